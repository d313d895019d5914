/* fuzz/fuzz_daemon_api.c - libFuzzer target for the daemon's API input: routes, ids, query
 * strings, the gate's headers (Host, Origin, Authorization, Content-Type) and request bodies
 * (PUT /config's JSON and its validators).
 *
 * One daemon (a store in a temp directory, no token) is started once; each input is a request
 * written as text - a line "METHOD TARGET", header lines "Name: value", an empty line, the
 * body - handed straight to the API handler, as the server would after parsing. Requests that
 * the daemon holds for its ops thread (POST /runs, DELETE, /validate) cannot be held here (no
 * connection): the handler must then answer 503 itself. Every answer must be a status in
 * 200..599 with a body that, when JSON, parses. ASan and UBSan watch the parsing.
 * Seeds: fuzz/corpus/daemon_api/.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static struct sq_daemon *daemon_once(void)
{
    static struct sq_daemon *d;
    if (d)
        return d;
    static char dir[] = "/tmp/squall-fuzz-daemon-XXXXXX";
    CHECK(mkdtemp(dir));
    struct sq_daemon_opts o = {.port = 0, .data_dir = dir, .log = fopen("/dev/null", "w")};
    sq_daemon_config_init(&o.config);
    char err[512];
    CHECK(sq_daemon_start(&o, &d, err, sizeof(err)) == 0);
    return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sq_daemon *d = daemon_once();
    char *buf = malloc(size + 1);
    CHECK(buf);
    memcpy(buf, data, size);
    buf[size] = '\0';
    /* the request line */
    char *p = buf, *e = buf + size;
    char *nl = memchr(p, '\n', (size_t)(e - p));
    char *line_end = nl ? nl : e;
    char *sp = memchr(p, ' ', (size_t)(line_end - p));
    struct sq_h1_header hdrs[16];
    struct sq_server_req req = {.headers = hdrs, .keep_alive = true, .minor_version = 1};
    if (!sp) {
        free(buf);
        return 0;
    }
    req.method = p;
    req.method_len = (size_t)(sp - p);
    req.path = sp + 1;
    req.path_len = (size_t)(line_end - sp - 1);
    if (req.path_len == 0 || req.method_len == 0) {
        free(buf);
        return 0;
    }
    p = nl ? nl + 1 : e;
    /* headers until an empty line */
    while (p < e && req.num_headers < 16) {
        nl = memchr(p, '\n', (size_t)(e - p));
        line_end = nl ? nl : e;
        if (line_end == p) {
            p = nl ? nl + 1 : e;
            break;
        }
        char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon) {
            const char *v = colon + 1;
            while (v < line_end && *v == ' ')
                v++;
            hdrs[req.num_headers++] = (struct sq_h1_header){.name = p,
                                                            .name_len = (size_t)(colon - p),
                                                            .value = v,
                                                            .value_len = (size_t)(line_end - v)};
        }
        p = nl ? nl + 1 : e;
    }
    req.body = p < e ? p : NULL;
    req.body_len = (size_t)(e - p);
    req.head = req.method_len == 4 && memcmp(req.method, "HEAD", 4) == 0;
    struct sq_server_resp resp = {0};
    sq_daemon__handler(d, &req, &resp);
    int st = resp.status ? resp.status : 200;
    CHECK(st >= 200 && st <= 599);
    CHECK(resp.body_len == 0 || resp.body);
    if (resp.content_type && strcmp(resp.content_type, "application/json") == 0 && resp.body_len) {
        json_t *j = json_loadb(resp.body, resp.body_len, 0, NULL);
        CHECK(j);
        json_decref(j);
    }
    free(buf);
    return 0;
}
