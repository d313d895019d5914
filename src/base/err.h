/* base/err.h - squall's error codes: one X-macro list builds the enum and the strings.
 *
 * A call that can fail returns int: 0, a negative errno (-ENOMEM, -ECONNREFUSED) or a negative
 * SQ_E* code from the list below. sq_strerror() names either kind. SQ_E* codes start far above
 * any errno so the two never collide.
 */
#ifndef SQ_BASE_ERR_H
#define SQ_BASE_ERR_H

#include <stddef.h>

#define SQ_ERR_LIST(X)                                                                             \
    X(SQ_EPARSE, "malformed input")                                                                \
    X(SQ_ETOOBIG, "input exceeds a hard limit")                                                    \
    X(SQ_EUSAGE, "bad usage")                                                                      \
    X(SQ_ERESOLVE, "host could not be resolved")                                                   \
    X(SQ_ESCHEME, "unsupported URL scheme")                                                        \
    X(SQ_EDECODE, "corrupt encoded data")                                                          \
    X(SQ_ERANGE, "value out of range")                                                             \
    X(SQ_ESCRIPT, "script error")                                                                  \
    X(SQ_ETLS, "TLS failure")

enum sq_err {
    SQ_E__BASE = 10000,
#define SQ_ERR_ENUM(name, str) name,
    SQ_ERR_LIST(SQ_ERR_ENUM)
#undef SQ_ERR_ENUM
        SQ_E__END
};

/* Names err (a negative errno or a negative SQ_E* code; the sign is ignored). Never NULL. */
const char *sq_strerror(int err);

#define SQ_MUST_CHECK                      __attribute__((warn_unused_result))
#define SQ_UNUSED(x)                       ((void)(x))
#define SQ_ARRAY_LEN(a)                    (sizeof(a) / sizeof((a)[0]))
#define SQ_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#define SQ_LIKELY(x)                       __builtin_expect(!!(x), 1)
#define SQ_UNLIKELY(x)                     __builtin_expect(!!(x), 0)

/* An enum's names from its X-macro list, the one copy of the idiom for every list whose rows
 * are X(NAME, "name", ...): `static const char *const names[] = {SQ_FOO_LIST(SQ_LIST_STR)};`,
 * then SQ_NAME_AT(names, value), which is "?" for a value the list does not name. */
#define SQ_LIST_STR(name, ...)   SQ__LIST_STR(__VA_ARGS__, )
#define SQ__LIST_STR(str, ...)   str,
#define SQ_NAME_AT(names, value) ((unsigned)(value) < SQ_ARRAY_LEN(names) ? (names)[value] : "?")

#endif
