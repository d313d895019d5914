/* http/url.h - the target URL of a run: http:// or https://, host, port, path and query. */
#ifndef SQ_HTTP_URL_H
#define SQ_HTTP_URL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct sq_url {
    char scheme[8];      /* "http" or "https", lowercase */
    char host[256];      /* name or address as written, IPv6 without brackets */
    uint16_t port;       /* explicit, or 80 / 443 */
    char *path;          /* path + query as sent on the request line ("/" default); malloc'd */
    char authority[300]; /* Host header value: host or [v6], ":port" only when not default */
    bool ipv6_literal;   /* host was a bracketed IPv6 literal */
};

/* Parses an absolute http(s) URL. Accepted: scheme (any case) "://" host [":" port] then an
 * optional path, query and fragment (the fragment is dropped). host is a name or IPv4 address
 * (letters, digits, '-', '.', '_', '~') or a bracketed IPv6 literal (no zone id); port is
 * 1..65535. Bytes >= 0x80 in the path are percent-encoded; spaces and control bytes are
 * rejected, looked for first (base/text.h's sq_blank_at) and named with their character number
 * and the fix ("write it as %20") wherever they land. userinfo ("user@") is rejected.
 * Returns 0; -SQ_ESCHEME for a scheme other than http/https; -SQ_EPARSE for anything else that
 * is wrong; -ENOMEM. On error *errmsg (if errmsg is not NULL) gets a one-line message in static
 * storage (thread-local for the scheme message, valid until the next call on this thread) and
 * out->path is NULL, so sq_url_dispose(out) is always safe after the call. */
SQ_MUST_CHECK int sq_url_parse(const char *s, struct sq_url *out, const char **errmsg);

/* Frees u->path; u may be parsed into again. */
void sq_url_dispose(struct sq_url *u);

#endif
