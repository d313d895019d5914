/* plan/cookie.h - a per-VU cookie jar (RFC 6265, for one origin at a time).
 *
 * The jar stores name, value, path, expiry and the Secure flag of each Set-Cookie the VU
 * receives; a later Set-Cookie with the same name and path replaces the entry in place (no
 * allocation when the value fits), Max-Age=0 or a past Expires removes it. Domain attributes are
 * accepted and matched against the request host. Requests get one Cookie header with every
 * cookie whose path matches, longest path first.
 */
#ifndef SQ_PLAN_COOKIE_H
#define SQ_PLAN_COOKIE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

struct sq_cookie_jar;

SQ_MUST_CHECK int sq_cookie_jar_new(struct sq_cookie_jar **out);
void sq_cookie_jar_free(struct sq_cookie_jar *j);
/* Forgets every cookie (keeps memory). */
void sq_cookie_jar_clear(struct sq_cookie_jar *j);
/* Stores one Set-Cookie value received for host/path at wall-clock now_s. A malformed value is
 * ignored (returns 0). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_cookie_jar_set(struct sq_cookie_jar *j, const char *host, size_t host_len,
                                    const char *path, size_t path_len, const char *set_cookie,
                                    size_t len, int64_t now_s);
/* Appends "name=value; name2=value2" for a request to host/path (secure: https), nothing when no
 * cookie applies. Returns the number of cookies appended, or -ENOMEM. */
int sq_cookie_jar_header(struct sq_cookie_jar *j, const char *host, size_t host_len,
                         const char *path, size_t path_len, bool secure, int64_t now_s,
                         struct sq_buf *out);

/* The values of the cookies the jar holds, at most max of them into out (views valid until the
 * jar changes): what a kept exchange redacts (base/redact.h). Returns how many there are. */
size_t sq_cookie_jar_values(const struct sq_cookie_jar *j, struct sq_str *out, size_t max);

#endif
