/* engine/oauth.h - one OAuth2 access token for a whole run: a plan's auth.oauth2.
 *
 * The client-credentials grant (RFC 6749 4.4): the first token is fetched as the run starts
 * (sq_oauth_begin, never while a plan is only checked: a daemon validating a submission sends
 * nothing to its token URL; a run whose token cannot be had never sends its load), then a thread of
 * its own refreshes it before it expires and publishes each new token to every VU at once through a
 * struct sq_tmpl_live ({{$oauth.token}}, read with one acquire load per render; nothing on a worker
 * waits for it). Requests go on with the old token until the new one is in.
 *
 * When: a token that lives E seconds from the moment it was received (t) is refreshed at
 * max(t + E - refresh_lead, t + min_refresh_interval). A refresh that fails (no connection, a
 * timeout, a status other than 200, a body without access_token) is counted and retried after
 * retry_backoff, doubling up to retry_backoff_max, until one succeeds or the run ends. A token
 * without expires_in is never refreshed.
 *
 * Secrets: the client secret goes into the token request and nowhere else. No message of this
 * module quotes a request or a response body; a failure is described by its kind ("HTTP 503",
 * "connect: Connection refused", "the answer has no access_token").
 */
#ifndef SQ_ENGINE_OAUTH_H
#define SQ_ENGINE_OAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/tls.h"
#include "plan/plan.h"
#include "plan/tmpl.h"

struct sq_oauth; /* opaque */
struct sq_egress;

struct sq_oauth_stats {
    uint64_t tokens;       /* tokens received, the first included */
    uint64_t refreshes;    /* of which refreshes (tokens - 1) */
    uint64_t failures;     /* token requests that failed during the run */
    int64_t first_ns;      /* how long the first token took */
    int64_t expires_in_ns; /* the latest token's lifetime as the server said (0: none said) */
    char last_error[160];  /* the latest failure, "" if none */
};

/* Sets the token source up without a packet sent: the token URL parsed and resolved through
 * the run's egress policy (egress, may be NULL: any destination; checked again at connect()),
 * the TLS client and the token request made. target is the plan's origin (a token_url that is
 * a path is on it); tls (may be NULL) is the run's TLS options, used for an https token_url.
 * Returns 0, or a negative code with err saying why (never quoting the secret): -SQ_EPARSE (a
 * bad token_url), -SQ_ERESOLVE, -EACCES (the policy's refusal, naming its rule). */
SQ_MUST_CHECK int sq_oauth_new(const struct sq_plan_oauth2 *cfg, const char *target,
                               const struct sq_tls_client_opts *tls, const struct sq_egress *egress,
                               struct sq_oauth **out, char *err, size_t errlen);
/* At the run's start: fetches the first token and starts the refresher. Returns 0 or the
 * first fetch's failure ("auth.oauth2: no token from URL: HTTP 401"), the source left as
 * sq_oauth_new made it (sq_oauth_free it). */
SQ_MUST_CHECK int sq_oauth_begin(struct sq_oauth *o, char *err, size_t errlen);
/* What the flows render {{$oauth.token}} from; valid until sq_oauth_free. */
const struct sq_tmpl_live *sq_oauth_live(const struct sq_oauth *o);
/* The newest tokens published through live (sq_oauth_live), newest first, at most max of them
 * (any thread; valid until sq_oauth_free): what a captured exchange may carry, to redact it
 * (base/redact.h). Returns how many were written. */
size_t sq_oauth_recent(const struct sq_tmpl_live *live, struct sq_str *out, size_t max);
/* Stops the refresher (an attempt in progress is abandoned) and waits for it. */
void sq_oauth_stop(struct sq_oauth *o);
/* The figures so far (any thread). */
void sq_oauth_stats(struct sq_oauth *o, struct sq_oauth_stats *st);
/* Stops, then frees every token published. NULL is a no-op. */
void sq_oauth_free(struct sq_oauth *o);

#endif
