/* fuzz_stamp.c - the stamp finder and parser against a slow reference written from the format
 * in proto/stamp.h. Checks: sq_stamp_find() agrees with the reference (found or not, where, how
 * long, the values); a found stamp parses exactly and formats back to the same bytes (one
 * spelling per stamp); sq_stamp_parse() over the whole input agrees with the reference. The
 * input is an exact-size heap copy, so ASan sees any read past it. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/stamp.h"

static int digit(unsigned char c, unsigned base)
{
    static const char b32[] = "0123456789abcdefghjkmnpqrstvwxyz";
    static const char b36[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    const char *a = base == 32 ? b32 : b36;
    for (unsigned i = 0; i < base; i++)
        if (a[i] == c)
            return (int)i;
    return -1;
}

static bool alnum36(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z');
}

static bool glue(unsigned char c)
{
    return c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Reads one field: the longest [0-9a-z] run, in base; false if any char is outside the base,
 * a leading zero, empty, or over max. */
static bool ref_field(const unsigned char *p, size_t n, size_t *i, unsigned base, uint64_t max,
                      uint64_t *out)
{
    size_t s = *i, e = s;
    while (e < n && alnum36(p[e]))
        e++;
    if (e == s || (e - s > 1 && p[s] == '0'))
        return false;
    unsigned __int128 v = 0;
    for (size_t k = s; k < e; k++) {
        int d = digit(p[k], base);
        if (d < 0)
            return false;
        v = v * base + (unsigned)d;
        if (v > max)
            return false;
    }
    *i = e;
    *out = (uint64_t)v;
    return true;
}

static bool ref_at(const unsigned char *p, size_t n, size_t i, struct sq_stamp *s, size_t *len)
{
    if (n - i < 4 || memcmp(p + i, "sq1.", 4) != 0)
        return false;
    if (i > 0 && glue(p[i - 1]))
        return false;
    size_t k = i + 4;
    uint64_t a, b, c;
    if (!ref_field(p, n, &k, 32, UINT64_MAX, &a) || k >= n || p[k++] != '.')
        return false;
    if (!ref_field(p, n, &k, 36, UINT64_MAX, &b) || k >= n || p[k++] != '.')
        return false;
    if (!ref_field(p, n, &k, 36, INT64_MAX, &c))
        return false;
    if (k < n && glue(p[k]))
        return false;
    s->run = a;
    s->seq = b;
    s->ns = (int64_t)c;
    *len = k - i;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *p = malloc(size ? size : 1);
    if (!p)
        abort();
    memcpy(p, data, size);
    const unsigned char *u = (const unsigned char *)p;

    bool want = false;
    size_t want_at = 0, want_len = 0;
    struct sq_stamp ws = {0};
    for (size_t i = 0; i < size && !want; i++)
        if (ref_at(u, size, i, &ws, &want_len)) {
            want = true;
            want_at = i;
        }
    struct sq_stamp s;
    size_t at = 0, len = 0;
    bool got = sq_stamp_find(p, size, &s, &at, &len);
    if (got != want)
        abort();
    if (got) {
        if (at != want_at || len != want_len || s.run != ws.run || s.seq != ws.seq || s.ns != ws.ns)
            abort();
        struct sq_stamp t;
        if (sq_stamp_parse(p + at, len, &t) != 0)
            abort();
        char out[SQ_STAMP_MAX];
        size_t n = sq_stamp_format(&s, out);
        if (n != len || memcmp(out, p + at, len) != 0)
            abort();
    }
    /* Exact parse of the whole input: a stamp iff it is one free-standing stamp of all of it. */
    struct sq_stamp t;
    size_t rl;
    bool exact = ref_at(u, size, 0, &ws, &rl) && rl == size;
    if ((sq_stamp_parse(p, size, &t) == 0) != exact)
        abort();
    free(p);
    return 0;
}
