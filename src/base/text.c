/* base/text.c - see text.h. */
#include "base/text.h"

#include <stdio.h>
#include <string.h>

const char sq_hex_lower[17] = "0123456789abcdef";
const char sq_hex_upper[17] = "0123456789ABCDEF";

size_t sq_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    size_t len;
    uint32_t min, v;
    if (c < 0x80) {
        if (cp)
            *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, min = 0x80, v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, min = 0x800, v = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, min = 0x10000, v = c & 0x07;
    } else {
        return 0; /* a continuation byte, 0xc0/0xc1 (always overlong) or 0xf5 and up */
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    if (cp)
        *cp = v;
    return len;
}

size_t sq_utf8_encode(uint32_t cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

bool sq_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) { /* the common case, without a call */
            i++;
            continue;
        }
        size_t k = sq_utf8_decode(p + i, n - i, NULL);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

static unsigned char fold(char c)
{
    unsigned char u = (unsigned char)c;
    return u >= 'A' && u <= 'Z' ? (unsigned char)(u + ('a' - 'A')) : u;
}

size_t sq_edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    if (la > 63 || lb > 63)
        return 64;
    size_t row[64]; /* one row of the table: distances from a[0, i) to each prefix of b */
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t v = diag + (fold(a[i - 1]) != fold(b[j - 1]));
            if (row[j] + 1 < v)
                v = row[j] + 1;
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            row[j] = v;
            diag = up;
        }
    }
    return row[lb];
}

void sq_suggest_init(struct sq_suggest *s, const char *word, size_t wlen)
{
    s->best = NULL;
    s->bestd = (size_t)-1;
    s->word = word;
    s->wlen = wlen;
}

bool sq_suggest_offer(struct sq_suggest *s, const char *cand, size_t len)
{
    size_t d = sq_edit_distance(s->word, s->wlen, cand, len);
    size_t longest = s->wlen > len ? s->wlen : len;
    if (d <= 1 + longest / 4 && d < s->bestd) {
        s->bestd = d;
        s->best = cand;
        return true;
    }
    return false;
}

void sq_suggest_try(struct sq_suggest *s, const char *cand)
{
    sq_suggest_offer(s, cand, strlen(cand));
}

const char *sq_suggest_tail(const struct sq_suggest *s, char *buf, size_t len)
{
    if (!s->best)
        return "";
    snprintf(buf, len, " (did you mean '%s'?)", s->best);
    return buf;
}
