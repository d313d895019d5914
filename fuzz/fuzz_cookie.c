/* fuzz_cookie.c - the cookie jar against hostile Set-Cookie values. The input is split at
 * '\n': each line is a Set-Cookie value received for one of a few hosts and request paths (the
 * line's first byte picks them), at a clock that moves forward. Checks: the jar never holds more
 * than SQ_COOKIE_MAX cookies; its allocations stay bounded; every Cookie header is well formed
 * ("n=v; n2=v2", no control bytes, within the caps); the date parser never reads past its
 * input (each line is also parsed as a date from an exact-size copy). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "plan/cookie.h"
#include "plan/cookie_internal.h"

static const char *const hosts[] = {"example.com",    "www.example.com", "a.b.example.com",
                                    "127.0.0.1:8080", "[::1]:80",        "localhost"};
static const char *const paths[] = {"/", "/a/b/c", "/a/b?x=/y", "/docs", "", "/a"};

static void check_header(struct sq_cookie_jar *j, const char *host, const char *path, bool secure,
                         int64_t now)
{
    struct sq_buf b = {0};
    int n = sq_cookie_jar_header(j, host, strlen(host), path, strlen(path), secure, now, &b);
    if (n < 0 || n > SQ_COOKIE_MAX || (n == 0) != (b.len == 0))
        abort();
    if (b.len > (size_t)n * (SQ_COOKIE_MAX_BYTES + 3))
        abort();
    int pairs = 0;
    size_t i = 0;
    while (i < b.len) {
        const char *semi = memchr(b.p + i, ';', b.len - i);
        size_t end = semi ? (size_t)(semi - b.p) : b.len;
        if (!memchr(b.p + i, '=', end - i) || b.p[i] == '=')
            abort(); /* every pair has a non-empty name */
        for (size_t k = i; k < end; k++)
            if ((unsigned char)b.p[k] < 0x20 && b.p[k] != '\t')
                abort();
        pairs++;
        i = end;
        if (semi) {
            if (i + 1 >= b.len || b.p[i + 1] != ' ')
                abort();
            i += 2;
        }
    }
    if (pairs <
        n) /* a value may hold ';' (it is opaque), so pairs can exceed n, never fall short */
        abort();
    sq_buf_dispose(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sq_cookie_jar *j;
    if (sq_cookie_jar_new(&j) != 0)
        abort();
    int64_t now = 1700000000;
    const char *s = (const char *)data, *end = s + size;
    size_t lines = 0;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
        unsigned sel = len ? (unsigned char)s[0] : 0;
        const char *host = hosts[sel % 6], *path = paths[(sel / 6) % 6];
        char *line = malloc(len ? len : 1); /* exact size: ASan sees an over-read */
        if (!line)
            abort();
        memcpy(line, s, len);
        if (sq_cookie_jar_set(j, host, strlen(host), path, strlen(path), line, len, now) != 0)
            abort();
        int64_t t;
        (void)sq_cookie__parse_date(line, len, &t);
        free(line);
        if (sq_cookie__count(j) > SQ_COOKIE_MAX)
            abort();
        check_header(j, hosts[(sel / 3) % 6], paths[sel % 6], sel & 1, now);
        now += sel % 7;
        lines++;
        s = nl ? nl + 1 : end;
    }
    /* the slot array, one buffer per slot, and a regrowth per stored cookie at most */
    if (sq_cookie__allocs(j) > 1 + 4 + SQ_COOKIE_MAX + lines)
        abort();
    check_header(j, "www.example.com", "/a/b/c", true, now);
    sq_cookie_jar_clear(j);
    if (sq_cookie__count(j) != 0)
        abort();
    sq_cookie_jar_free(j);
    return 0;
}
