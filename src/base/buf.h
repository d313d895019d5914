/* base/buf.h - a growable byte buffer and a string view.
 *
 * A struct sq_buf is reused: sq_buf_reset() keeps the memory, so a buffer that has reached its
 * working size costs no allocation afterwards (the hot-path rule for per-VU rendering). */
#ifndef SQ_BASE_BUF_H
#define SQ_BASE_BUF_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

struct sq_str {
    const char *p;
    size_t len;
};

struct sq_buf {
    char *p;
    size_t len, cap;
};

/* Makes room for n more bytes. Returns 0 or -ENOMEM (the buffer is unchanged then). */
SQ_MUST_CHECK static inline int sq_buf_reserve(struct sq_buf *b, size_t n)
{
    if (b->cap - b->len >= n)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < n) {
        if (cap > ((size_t)-1) / 2)
            return -ENOMEM;
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p)
        return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

SQ_MUST_CHECK static inline int sq_buf_append(struct sq_buf *b, const void *s, size_t n)
{
    int rc = sq_buf_reserve(b, n);
    if (rc < 0)
        return rc;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

/* Appends printf's text of fmt, cut to its first max - 1 bytes (max >= 1): the writers of a
 * bounded line (the daemon's /metrics, the inbox's JSON). Returns 0, -EINVAL (a format error;
 * nothing appended) or -ENOMEM (the buffer is unchanged then). */
int sq_buf_printf(struct sq_buf *b, size_t max, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void sq_buf_reset(struct sq_buf *b)
{
    b->len = 0;
}

static inline void sq_buf_dispose(struct sq_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

#endif
