/* fuzz_url.c - URL parsing, and the request built from a parsed URL. Checks: a parsed URL
 * round-trips (scheme://authority path parses to the same host, port and path), the builder
 * accepts it, and our own request parser reads back the same method and target. The -H flag
 * parser is fed the same bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/h1.h"
#include "http/request.h"
#include "http/url.h"

/* Builds GET for u (with the user headers h); parse_back: read it back with our parser (only
 * without user headers, which may legitimately carry framing the parser refuses). */
static void check_request(const struct sq_url *u, const struct sq_kv *h, size_t nh, bool parse_back)
{
    char *req;
    size_t req_len;
    if (sq_request_build("GET", u->path, u->authority, h, nh, NULL, 0, &req, &req_len) != 0)
        abort();
    if (!parse_back) {
        free(req);
        return;
    }
    struct sq_h1_request r = {0};
    int rc = sq_h1_parse_request_head(req, req_len, NULL, &r);
    if (rc != (int)req_len || r.path_len != strlen(u->path) ||
        memcmp(r.path, u->path, r.path_len) != 0)
        abort();
    free(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';

    struct sq_url u;
    const char *msg = NULL;
    int rc = sq_url_parse(s, &u, &msg);
    if (rc == 0) {
        if (u.path[0] != '/' || u.port == 0 || !u.host[0] || !u.authority[0])
            abort();
        char again[1024];
        size_t plen = strlen(u.path);
        if (plen < 600) {
            snprintf(again, sizeof(again), "%s://%s%s", u.scheme, u.authority, u.path);
            struct sq_url v;
            if (sq_url_parse(again, &v, &msg) != 0 || strcmp(u.host, v.host) || u.port != v.port ||
                strcmp(u.path, v.path) || strcmp(u.authority, v.authority) ||
                u.ipv6_literal != v.ipv6_literal)
                abort();
            sq_url_dispose(&v);
        }
        check_request(&u, NULL, 0, true);
    } else if (!msg || !msg[0] || strchr(msg, '\n') || u.path) {
        abort();
    }

    struct sq_kv kv;
    if (sq_header_parse_arg(s, &kv) == 0) {
        if (rc == 0)
            check_request(&u, &kv, 1, false);
        sq_header_arg_dispose(&kv);
    }
    sq_url_dispose(&u);
    free(s);
    return 0;
}
