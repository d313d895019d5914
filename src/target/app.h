/* target/app.h - the target's application-like endpoints (module-internal; docs/target.md):
 * /json/N (compressed per Accept-Encoding), /sse (a timed event stream), POST /login and /items
 * (bearer tokens), /cookie/set and /cookie/echo. target.c routes and counts; this file answers.
 *
 * Threads: every call runs on a worker thread and touches that worker's own slot (a PRNG and a
 * scratch buffer) plus the shared /json cache, whose entries are immutable once published and
 * live until sq_target__app_free (the server may stream them after the handler returned).
 */
#ifndef SQ_TARGET_APP_H
#define SQ_TARGET_APP_H

#include <stdbool.h>
#include <stdint.h>

#include "server/server.h"

struct sq_target__app; /* opaque */

/* Per-process secret, per-worker PRNGs and buffers. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_target__app_new(int threads, struct sq_target__app **out);
/* Frees everything, the /json cache included: only after the server has stopped. */
void sq_target__app_free(struct sq_target__app *a);

/* /json/N (2 <= n <= SQ_TARGET_MAX_JSON, checked by the router). */
void sq_target__json(struct sq_target__app *a, const struct sq_server_req *req,
                     struct sq_server_resp *resp, uint64_t n);
/* /sse?events=N&interval=MS. */
void sq_target__sse(struct sq_target__app *a, const struct sq_server_req *req,
                    struct sq_server_resp *resp);
/* POST /login: a fresh token. */
void sq_target__login(struct sq_target__app *a, const struct sq_server_req *req,
                      struct sq_server_resp *resp);
/* /items: 200 with a valid bearer token (a /login token, or an OAuth2 token that has not
 * expired), else 401. Returns which. */
enum { SQ_TARGET_ITEMS_OK, SQ_TARGET_ITEMS_UNAUTH, SQ_TARGET_ITEMS_EXPIRED };
int sq_target__items(struct sq_target__app *a, const struct sq_server_req *req,
                     struct sq_server_resp *resp);
/* POST /oauth/token[?ttl=S][&fail=N&fail_after=M]: the client-credentials grant (docs/target.md).
 * Returns what it answered. */
enum { SQ_TARGET_OAUTH_ISSUED, SQ_TARGET_OAUTH_REFUSED, SQ_TARGET_OAUTH_BAD };
int sq_target__oauth(struct sq_target__app *a, const struct sq_server_req *req,
                     struct sq_server_resp *resp);
/* Accepts only the client "ID:SECRET" from then on (before the server starts). Returns 0,
 * -EINVAL (not ID:SECRET) or -ENOMEM. */
int sq_target__app_oauth_client(struct sq_target__app *a, const char *id_secret);
/* /stats/reset: the ordinal of token requests (fail_after counts from it) starts again. */
void sq_target__oauth_reset(struct sq_target__app *a);
/* /cookie/set?name=value[&name=value...] (echo false) or /cookie/echo (echo true). */
/* /redirect/N (n = N, 1..SQ_TARGET_MAX_REDIRECTS) and /redirect/loop (n = 0): a redirect,
 * ?status= (301, 302, 303, 307, 308; default 302), to /redirect/N-1 with the same query, at
 * N = 1 to ?to= (default /ok), and for /redirect/loop to itself; ?cookie=NAME=VALUE adds a
 * Set-Cookie. Anything malformed: 400. */
void sq_target__redirect(struct sq_target__app *a, const struct sq_server_req *req,
                         struct sq_server_resp *resp, uint64_t n);

void sq_target__cookie(struct sq_target__app *a, const struct sq_server_req *req,
                       struct sq_server_resp *resp, bool echo);

#endif
