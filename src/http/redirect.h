/* http/redirect.h - following a redirect: which answers are redirects, where their Location
 * points (RFC 9110 10.2.2, RFC 3986 5.2), and what the next request's method and body are (as
 * Go's net/http and k6 do it: RFC 9110 15.4). Pure functions, no I/O. */
#ifndef SQ_HTTP_REDIRECT_H
#define SQ_HTTP_REDIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/* 301, 302, 303, 307 and 308: the answers a client follows (300, 304, 305 and 306 are not
 * redirects to follow). One compare in the common case: a status under 300 is out at once. */
static inline bool sq_redirect_status(unsigned status)
{
    return status - 301u <= 7u && status != 304 && status != 305 && status != 306;
}

/* Whether the next hop keeps the method and body: 307 and 308 do; 301, 302 and 303 turn any
 * method but HEAD into a GET with no body. */
static inline bool sq_redirect_keeps_method(unsigned status)
{
    return status == 307 || status == 308;
}

/* The origin a redirect may stay on: the run's target. */
struct sq_redirect_origin {
    bool secure;      /* https */
    const char *host; /* as the target's URL names it (IPv6 without brackets) */
    uint16_t port;
};

enum {
    SQ_REDIRECT_SAME = 0,    /* *out is the next request-target (origin-form) */
    SQ_REDIRECT_OFFSITE = 1, /* another scheme, host or port: not followed */
};

/* Resolves the Location value loc[0, len) against the current request-target base[0, blen)
 * (origin-form: "/path?query") of origin o. A fragment is dropped; dot segments are removed;
 * an absolute or scheme-relative URL is compared with o (scheme, host without case, port with
 * the scheme's default). The target goes into out (reset first), bytes that cannot go on a
 * request line percent-encoded. Returns SQ_REDIRECT_SAME, SQ_REDIRECT_OFFSITE, -SQ_EPARSE (an
 * empty or malformed Location) or -ENOMEM. */
SQ_MUST_CHECK int sq_redirect_resolve(const struct sq_redirect_origin *o, const char *base,
                                      size_t blen, const char *loc, size_t len, struct sq_buf *out);

#endif
