/* http/request.h - serialises one HTTP/1.1 request into a single buffer (built once per static
 * request and shared read-only by every connection), and parses -H "Name: value" flags. */
#ifndef SQ_HTTP_REQUEST_H
#define SQ_HTTP_REQUEST_H

#include <stddef.h>

#include "base/err.h"

/* A header as the user gave it. Strings are borrowed (NUL-terminated). */
struct sq_kv {
    const char *name;
    const char *value;
};

/* Builds
 *     METHOD SP path SP "HTTP/1.1" CRLF
 *     "Host: " authority CRLF
 *     <headers, in order> CRLF each
 *     "Content-Length: " N CRLF   when body_len > 0, or for POST/PUT/PATCH (then N may be 0)
 *     "User-Agent: squall/" SQ_VERSION CRLF
 *     CRLF body
 * A user header named Host, Content-Length or User-Agent (any case) replaces the default one
 * (a user Host goes first, where the default would be); with an empty value it only removes
 * the default. A user Transfer-Encoding also drops the default Content-Length (the caller
 * then frames the body itself). An empty user value is sent as "Name:".
 * method must be a token, path and authority non-empty visible ASCII, header names tokens,
 * header values free of control bytes other than HTAB (so no CR/LF); else -SQ_EUSAGE. body may
 * be NULL only when body_len is 0. On success *out is a malloc'd buffer of *out_len bytes plus a
 * NUL (not counted) that the caller frees. Returns 0, -SQ_EUSAGE or -ENOMEM. */
SQ_MUST_CHECK int sq_request_build(const char *method, const char *path, const char *authority,
                                   const struct sq_kv *headers, size_t nheaders, const void *body,
                                   size_t body_len, char **out, size_t *out_len);

/* Parses a -H flag: "Name: value" (OWS around the value trimmed; "Name:" gives an empty value).
 * The name must be a token. On success out->name is a malloc'd block that also holds
 * out->value; free it with sq_header_arg_dispose(). Returns 0, -SQ_EUSAGE (no colon, empty or
 * bad name, CR/LF or other control bytes in the value) or -ENOMEM. */
SQ_MUST_CHECK int sq_header_parse_arg(const char *arg, struct sq_kv *out);

/* Frees what sq_header_parse_arg() allocated and clears kv. A zeroed kv is a no-op. */
void sq_header_arg_dispose(struct sq_kv *kv);

#endif
