/* base/buf.c - the formatted append of base/buf.h (the rest is inline there). */
#include "base/buf.h"

#include <stdarg.h>
#include <stdio.h>

int sq_buf_printf(struct sq_buf *b, size_t max, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    int rc = n < 0 ? -EINVAL : 0;
    size_t len = n < 0 ? 0 : (size_t)n < max ? (size_t)n : max - 1;
    if (rc == 0)
        rc = sq_buf_reserve(b, len + 1); /* vsnprintf writes the NUL too; len does not count it */
    if (rc == 0) {
        vsnprintf(b->p + b->len, len + 1, fmt, again);
        b->len += len;
    }
    va_end(again);
    return rc;
}
