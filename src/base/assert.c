/* base/assert.c - what a failed SQ_ASSERT does (see assert.h). The one place below cli/ and
 * daemon/ that writes to the terminal: a broken invariant is no error to return, and abort()
 * hands it to the sanitizer or fuzzer that runs the build. */
#include "base/assert.h"

#include <stdio.h>
#include <stdlib.h>

void sq_assert_fail(const char *file, int line, const char *expr, const char *msg)
{
    fprintf(stderr, "%s:%d: invariant failed: %s%s%s\n", file, line, expr, msg ? ": " : "",
            msg ? msg : "");
    fflush(stderr);
    abort();
}
