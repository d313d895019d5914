/* base/redact.h - credentials taken out of text before squall writes it anywhere: an exchange
 * captured on the wire (the sampled exchanges, --verbose, --http-debug), a command line, a stored
 * run request.
 *
 * Two rules, applied by one call:
 *  - by header name: in an HTTP message's head, the value of a field that carries a credential
 *    (Authorization, Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key, X-Auth-Token; any case)
 *    becomes "[redacted]"; an Authorization or Proxy-Authorization value keeps its scheme word
 *    ("Bearer [redacted]"), which says how the request authenticated without saying as whom;
 *  - by value: every occurrence of a known secret anywhere in the text, head or body (an OAuth2
 *    token, a client secret, a feeder cell marked secret, the value of a credential header the
 *    run sends, so an echo of it in a body goes too), becomes "[redacted]". A secret shorter
 *    than SQ_REDACT_MIN bytes is left to the name rule: replacing every "ab" of a text would
 *    wreck it and hide nothing. When the text was cut at its end (SQ_REDACT_CUT), a secret's
 *    first SQ_REDACT_MIN or more bytes at the very end go as well: the rest was never kept.
 *
 * A URL's userinfo is a credential too (sq_redact_url): "nats://user:[redacted]@host".
 *
 * Nothing here is on a hot path: callers redact only what they keep (a captured exchange, once).
 */
#ifndef SQ_BASE_REDACT_H
#define SQ_BASE_REDACT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

#define SQ_REDACTED   "[redacted]"
#define SQ_REDACT_MIN 4 /* the shortest secret the value rule looks for */

enum {
    /* The text starts with an HTTP/1.x head (a start line, fields, an empty line; or the first
     * part of one): the name rule applies to its fields. */
    SQ_REDACT_HEAD = 1,
    /* The text is the first part of something longer: a secret's start at its end goes too. */
    SQ_REDACT_CUT = 2,
};

/* True when a field of this name carries a credential (any case). */
bool sq_redact_header_name(const char *name, size_t len);

/* Appends to out the field value v[0, vlen) of field name[0, nlen) as the name rule writes it:
 * "[redacted]", after the scheme word and its spaces for Authorization and Proxy-Authorization
 * (a value of one word is all secret). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_redact_value(const char *name, size_t nlen, const char *v, size_t vlen,
                                  struct sq_buf *out);

/* The secret of a URL's userinfo: the password of "scheme://user:password@host...", or all of a
 * userinfo without a colon ("nats://token@host": NATS's token form). Sets [*at, *at + *n) and
 * returns true; false when the URL has no userinfo. */
bool sq_redact_url_secret(const char *url, size_t len, size_t *at, size_t *n);

/* Appends url[0, len) to out with that secret replaced by "[redacted]". Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_redact_url(const char *url, size_t len, struct sq_buf *out);

/* Appends text[0, len) to out with both rules applied (flags: SQ_REDACT_HEAD, SQ_REDACT_CUT);
 * secrets[0, n) are the known values (NULL when n is 0; empty and short ones are skipped).
 * Returns 0 or -ENOMEM (out then holds part of the text: the caller drops it). */
SQ_MUST_CHECK int sq_redact_text(const char *text, size_t len, unsigned flags,
                                 const struct sq_str *secrets, size_t n, struct sq_buf *out);

/* The same into a new NUL-terminated string (*out_len: its length without the NUL); NULL when
 * out of memory. */
char *sq_redact_dup(const char *text, size_t len, unsigned flags, const struct sq_str *secrets,
                    size_t n, size_t *out_len);

#endif
