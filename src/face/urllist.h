/* face/urllist.h - the quick face's URL list (`squall --urls FILE`): several requests, each
 * with its own method and body, spread over one run's VUs round-robin.
 *
 * One request per line:
 *
 *   # a comment (a line whose first non-blank byte is '#'); blank lines are skipped too
 *   http://127.0.0.1:8080/fast
 *   POST http://127.0.0.1:8080/echo {"a":1}
 *   PUT  http://127.0.0.1:8080/echo @body.json
 *
 * that is `[METHOD] URL [BODY]`, fields separated by spaces or tabs. METHOD is an upper-case token
 * (default: the run's -m); URL an absolute http:// or https:// URL; BODY the rest of the line as
 * it is (trailing blanks and CR removed), or @PATH: the file's bytes (a relative PATH is taken
 * from the list's directory). Without a BODY a line uses the run's -b, if any.
 *
 * vegeta's target format is read too, as it is: header lines ("Name: value") right under a
 * request line belong to that request, and a line "@PATH" under them is its body; a blank line
 * ends a target. So
 *
 *   POST http://127.0.0.1:8080/echo
 *   Content-Type: application/json
 *   X-Id: 7
 *   @body.json
 *
 * is one request with two headers of its own (a header the run's -H also sets is replaced) and
 * its body from body.json. A header line is a token followed by ':' (then a blank, the end of
 * the line, or a byte that is neither a digit nor '/', so "host:8080/x" stays a URL without a
 * scheme); one with no request line above it, after a blank line or after the @PATH line, is
 * refused, as is a second body. At most SQ_URLLIST_MAX_HEADERS header lines per request.
 *
 * Every URL must name the first one's scheme; https:// URLs its host and port too (one TLS
 * client). http:// URLs may name several hosts: face/quick.c then gives each connection one
 * origin (a request on a connection goes to that connection's origin). At most SQ_URLLIST_MAX
 * lines carry a request.
 *
 * The parser reads text only (no file is opened), so it can be fuzzed (fuzz/fuzz_urllist.c);
 * face/quick.c reads the list and the @PATH bodies.
 */
#ifndef SQ_FACE_URLLIST_H
#define SQ_FACE_URLLIST_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "http/request.h"
#include "http/url.h"

#define SQ_URLLIST_MAX         256        /* requests in one list */
#define SQ_URLLIST_MAX_BYTES   (1u << 20) /* the list file itself */
#define SQ_URLLIST_MAX_HEADERS 64         /* header lines under one request */

struct sq_urllist_entry {
    char *method;    /* NULL: none given (the run's -m) */
    char *url;       /* as written */
    struct sq_url u; /* parsed */
    char *body;      /* the literal body, or NULL */
    size_t body_len;
    char *body_file;       /* @PATH: the path as written (without '@'), or NULL */
    struct sq_kv *headers; /* the header lines under it (each from sq_header_parse_arg), or NULL */
    size_t nheaders;
    uint32_t line; /* 1-based */
};

struct sq_urllist {
    struct sq_urllist_entry *v;
    size_t n;
};

/* Parses text[0, len) (the contents of the file called name, for messages). Returns 0 with
 * out filled (sq_urllist_dispose it), or -SQ_EPARSE with err saying "NAME:LINE:COL: why" (a
 * method that is not a token, a URL that does not parse, an origin other than the first line's,
 * an empty @, a NUL byte, too many lines, no URL at all, a header line that is malformed or has no
 * request above it, a second body), or -ENOMEM. out is valid (maybe empty)
 * either way. */
SQ_MUST_CHECK int sq_urllist_parse(const char *name, const char *text, size_t len,
                                   struct sq_urllist *out, char *err, size_t errlen);
void sq_urllist_dispose(struct sq_urllist *l);

#endif
