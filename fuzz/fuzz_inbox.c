/* fuzz/fuzz_inbox.c - libFuzzer target for the webhook inbox's input (target/inbox.h): the API's
 * query strings (since, limit, path: percent-decoding, bounds), its routes, and captured
 * requests whose bodies and headers are searched for event stamps and matched by the sink's
 * ledger.
 *
 * One inbox without a listener (sq_inbox_new, a ring of 64, bodies cut at 256 bytes) lives for
 * the whole run; each input is handed to sq_inbox_handle as one request. The first byte picks
 * what: bit 0 mounts the inbox under "/inbox" as the daemon does (strip 6); bits 1..3 pick the
 * request: GET /_inbox/captures?REST, GET /_inbox/stats, GET /_inbox/stream?REST, DELETE
 * /_inbox/captures, a capture (POST REST as the path, REST as the body and as an X-Stamp and a
 * second header's value), or REST as "METHOD PATH" taken raw. Every answer must be a status in
 * 200..999 (the capture's answer is configurable) with a JSON body that parses when it says
 * JSON. ASan and UBSan watch the parsing. Seeds: fuzz/corpus/inbox/.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "target/inbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static struct sq_inbox *inbox_once(void)
{
    static struct sq_inbox *b;
    if (b)
        return b;
    struct sq_inbox_config cfg = {.threads = 1, .max_captures = 64, .max_body = 256};
    CHECK(sq_inbox_new(&cfg, &b) == 0);
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    struct sq_inbox *b = inbox_once();
    unsigned sel = data[0];
    const char *rest = (const char *)data + 1;
    size_t rn = size - 1;
    bool mounted = sel & 1;
    const char *pfx = mounted ? "/inbox" : "";
    size_t pl = strlen(pfx);
    char *path = malloc(pl + 32 + rn + 1);
    CHECK(path);
    memcpy(path, pfx, pl);
    size_t n = pl;
    const char *method = "GET";
    struct sq_h1_header hdrs[2];
    struct sq_server_req req = {.keep_alive = true, .minor_version = 1, .fd = -1, .headers = hdrs};
    char raw_method[16];
    switch ((sel >> 1) & 7) {
    case 0:
    case 1:
        n += (size_t)sprintf(path + n, "/_inbox/captures?");
        memcpy(path + n, rest, rn);
        n += rn;
        break;
    case 2:
        n += (size_t)sprintf(path + n, "/_inbox/stats");
        break;
    case 3:
        n += (size_t)sprintf(path + n, "/_inbox/stream?");
        memcpy(path + n, rest, rn);
        n += rn;
        break;
    case 4:
        method = "DELETE";
        n += (size_t)sprintf(path + n, "/_inbox/captures");
        break;
    case 5:
    case 6: {
        method = "POST";
        path[n++] = '/';
        memcpy(path + n, rest, rn);
        n += rn;
        req.body = rn ? rest : NULL;
        req.body_len = rn;
        hdrs[0] = (struct sq_h1_header){"X-Stamp", 7, rest, rn};
        hdrs[1] = (struct sq_h1_header){"Content-Type", 12, rest, rn < 64 ? rn : 64};
        req.num_headers = 2;
        break;
    }
    default: { /* "METHOD PATH" */
        const char *sp = memchr(rest, ' ', rn);
        size_t ml = sp ? (size_t)(sp - rest) : 0;
        if (!sp || ml == 0 || ml >= sizeof(raw_method)) {
            free(path);
            return 0;
        }
        memcpy(raw_method, rest, ml);
        raw_method[ml] = '\0';
        method = raw_method;
        memcpy(path + n, sp + 1, rn - ml - 1);
        n += rn - ml - 1;
        break;
    }
    }
    path[n] = '\0';
    req.method = method;
    req.method_len = strlen(method);
    req.path = path;
    req.path_len = n;
    req.head = strcmp(method, "HEAD") == 0;
    struct sq_server_resp resp = {0};
    sq_inbox_handle(b, &req, mounted ? 6 : 0, &resp);
    int st = resp.status ? resp.status : 200;
    CHECK(st >= 200 && st <= 999);
    CHECK(resp.body_len == 0 || resp.body);
    if (resp.content_type && strcmp(resp.content_type, "application/json") == 0 && resp.body_len) {
        json_t *j = json_loadb(resp.body, resp.body_len, JSON_ALLOW_NUL, NULL);
        CHECK(j);
        json_decref(j);
    }
    free(path);
    return 0;
}
