/* base/b64.c - base64 encode and strict decode (standard alphabet, padded). */
#include "base/b64.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static const char alphabet[64] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

#define BAD 0xff

/* Reverse of the alphabet, stored as value + 1 so that 0 (every other byte, '=' included)
 * means "not base64". */
static const uint8_t rev[256] = {
    ['A'] = 1,  ['B'] = 2,  ['C'] = 3,  ['D'] = 4,  ['E'] = 5,  ['F'] = 6,  ['G'] = 7,  ['H'] = 8,
    ['I'] = 9,  ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16,
    ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24,
    ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32,
    ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40,
    ['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48,
    ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
    ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64};

static inline unsigned sextet(unsigned char c)
{
    return rev[c] ? rev[c] - 1u : BAD;
}

size_t sq_b64_encoded_len(size_t n)
{
    return (n / 3 + (n % 3 != 0)) * 4 + 1;
}

void sq_b64_encode(const void *in, size_t n, char *out)
{
    const unsigned char *p = in;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *out++ = alphabet[v >> 18];
        *out++ = alphabet[(v >> 12) & 63];
        *out++ = alphabet[(v >> 6) & 63];
        *out++ = alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        *out++ = alphabet[v >> 18];
        *out++ = alphabet[(v >> 12) & 63];
        *out++ = '=';
        *out++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        *out++ = alphabet[v >> 18];
        *out++ = alphabet[(v >> 12) & 63];
        *out++ = alphabet[(v >> 6) & 63];
        *out++ = '=';
    }
    *out = '\0';
}

int sq_b64_decode(const char *in, size_t n, unsigned char **out, size_t *out_len)
{
    if (n % 4 != 0 || (n > 0 && !in))
        return -SQ_EDECODE;
    const unsigned char *s = (const unsigned char *)in;
    size_t pad = 0;
    if (n > 0 && s[n - 1] == '=')
        pad = (s[n - 2] == '=') ? 2 : 1;
    size_t len = n / 4 * 3 - pad;
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf)
        return -ENOMEM;

    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        bool last = i + 4 == n;
        unsigned a = sextet(s[i]), b = sextet(s[i + 1]);
        unsigned c = (last && pad == 2) ? 0 : sextet(s[i + 2]);
        unsigned d = (last && pad >= 1) ? 0 : sextet(s[i + 3]);
        if (a == BAD || b == BAD || c == BAD || d == BAD)
            goto bad;
        uint32_t v = a << 18 | b << 12 | c << 6 | d;
        buf[o++] = (unsigned char)(v >> 16);
        if (last && pad == 2) {
            if (v & 0xffff) /* the 4 unused bits of b must be zero */
                goto bad;
            break;
        }
        buf[o++] = (unsigned char)(v >> 8);
        if (last && pad == 1) {
            if (v & 0xff) /* the 2 unused bits of c must be zero */
                goto bad;
            break;
        }
        buf[o++] = (unsigned char)v;
    }
    *out = buf;
    *out_len = len;
    return 0;
bad:
    free(buf);
    return -SQ_EDECODE;
}
