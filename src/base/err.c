/* base/err.c - names for squall's error codes and for errno values. */
#include "base/err.h"

#include <string.h>

static const char *const sq_err_names[] = {
#define SQ_ERR_STR(name, str) str,
    SQ_ERR_LIST(SQ_ERR_STR)
#undef SQ_ERR_STR
};

const char *sq_strerror(int err)
{
    if (err < 0)
        err = -err;
    if (err > SQ_E__BASE && err < SQ_E__END)
        return sq_err_names[err - SQ_E__BASE - 1];
    return strerror(err);
}
