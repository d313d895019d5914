/* base/str.h - small string helpers shared by the parsers. */
#ifndef SQ_BASE_STR_H
#define SQ_BASE_STR_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* True when p[0, n) starts with lit[0, lit_len) ignoring ASCII case; lit must be lowercase. */
static inline bool sq_ieq_prefix(const char *p, size_t n, const char *lit, size_t lit_len)
{
    if (n < lit_len)
        return false;
    for (size_t i = 0; i < lit_len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c + ('a' - 'A'));
        if (c != (unsigned char)lit[i])
            return false;
    }
    return true;
}

/* True when p[0, n) equals lit[0, lit_len) ignoring ASCII case; lit must be lowercase (header
 * names, codings, cookie attributes). */
static inline bool sq_ieq(const char *p, size_t n, const char *lit, size_t lit_len)
{
    return n == lit_len && sq_ieq_prefix(p, n, lit, lit_len);
}

/* The same against a NUL-terminated lowercase literal. */
static inline bool sq_ieq_cstr(const char *p, size_t n, const char *lit)
{
    return sq_ieq(p, n, lit, strlen(lit));
}

#endif
