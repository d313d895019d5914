/* fuzz_redirect.c - a hostile Location against the redirect resolver (http/redirect.c) and the
 * next hop built from it (engine/flow.c). The input's first byte picks the base target and
 * the status, the rest is the Location. Checks: a followed Location gives an origin-form target
 * ('/' first, only visible ASCII: nothing that can break a request line) whose dot segments are
 * gone; the next request starts with its method and that target, keeps the previous request's
 * body only for 307 and 308, and ends its head once. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/flow.h"
#include "http/redirect.h"

static const char *const bases[] = {"/", "/a/b/c?q=1", "/a/", "", "/x?y"};
static const unsigned statuses[] = {301, 302, 303, 307, 308};

static bool has_dot_segment(const char *p, size_t n)
{
    const char *q = memchr(p, '?', n);
    size_t pl = q ? (size_t)(q - p) : n;
    for (size_t i = 0; i + 1 < pl; i++) {
        if (p[i] != '/')
            continue;
        size_t k = i + 1;
        if (p[k] == '.' && (k + 1 == pl || p[k + 1] == '/'))
            return true;
        if (k + 1 < pl && p[k] == '.' && p[k + 1] == '.' && (k + 2 == pl || p[k + 2] == '/'))
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *base = bases[data[0] % 5];
    unsigned status = statuses[(data[0] / 5) % 5];
    const char *loc = (const char *)data + 1;
    size_t len = size - 1;
    struct sq_redirect_origin o = {false, "h", 8080};
    struct sq_buf out = {0};
    int rc = sq_redirect_resolve(&o, base, strlen(base), loc, len, &out);
    if (rc == SQ_REDIRECT_SAME) {
        if (!out.len || out.p[0] != '/' || has_dot_segment(out.p, out.len))
            abort();
        for (size_t i = 0; i < out.len; i++)
            if ((unsigned char)out.p[i] <= 0x20 || (unsigned char)out.p[i] >= 0x7f)
                abort();
    } else if (rc != SQ_REDIRECT_OFFSITE && rc != -SQ_EPARSE) {
        abort();
    }
    struct sq_flow f;
    memset(&f, 0, sizeof(f));
    memcpy(f.host, "h:8080", 7);
    memcpy(f.origin_host, "h", 2);
    f.origin = o;
    struct sq_flow_vu v;
    memset(&v, 0, sizeof(v));
    static const char prev[] =
        "POST /a/b HTTP/1.1\r\nHost: h:8080\r\nContent-Length: 4\r\n\r\nbody";
    if (sq_buf_append(&v.loc, loc, len) < 0)
        abort();
    int r2 = sq_flow_redirect(&f, &v, prev, sizeof(prev) - 1, status);
    if (r2 != rc)
        abort();
    if (r2 == SQ_REDIRECT_SAME) {
        /* the hop resolves against the previous request's own target */
        if (sq_redirect_resolve(&o, "/a/b", 4, loc, len, &out) != SQ_REDIRECT_SAME)
            abort();
        bool keep = status == 307 || status == 308;
        const char *m = keep ? "POST " : "GET ";
        size_t ml = strlen(m);
        if (v.req.len < ml + out.len || memcmp(v.req.p, m, ml) != 0 ||
            memcmp(v.req.p + ml, out.p, out.len) != 0)
            abort();
        const char *end = memmem(v.req.p, v.req.len, "\r\n\r\n", 4);
        if (!end)
            abort();
        size_t body = v.req.len - (size_t)(end + 4 - v.req.p);
        if (body != (keep ? 4u : 0u))
            abort();
    }
    sq_buf_dispose(&out);
    sq_buf_dispose(&v.loc);
    sq_buf_dispose(&v.req);
    sq_buf_dispose(&v.redir);
    sq_buf_dispose(&v.val);
    return 0;
}
