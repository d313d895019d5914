/* engine/flow.h - a plan scenario's flow as the engine runs it.
 *
 * sq_flow_compile() turns each request step of a compiled plan (plan/plan.h) into either one
 * pre-serialised request shared by every VU (a step with no dynamic part: the static path of
 * the core engine, no rendering at all) or the pieces to render it per iteration into the VU's
 * own buffer. Each VU keeps its flow state in a struct sq_flow_vu: the step it is on, its
 * iteration, extracted variables, feeder rows, cookie jar and the buffers that a response is
 * captured into when a check or an extractor needs it. Buffers keep their memory between
 * iterations, so a VU that has reached its working size renders without allocating.
 */
#ifndef SQ_ENGINE_FLOW_H
#define SQ_ENGINE_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "http/redirect.h"
#include "http/h2client.h"
#include "net/sock.h"
#include "plan/plan.h"
#include "proto/stamp.h"

struct sq_url;
struct sq_cookie_jar;
struct sq_h1_header;

struct sq_flow_step {
    const struct sq_plan_step *ps;
    const struct sq_cond *cond; /* ps->cond: `if:` (NULL: the step always runs) */
    bool think;
    bool ws;   /* a WebSocket step (ps->ws): wsdrv.c does it, nothing is rendered here */
    bool head; /* a HEAD request: no response body */
    char *req; /* static steps: the whole request (owned), else NULL */
    size_t req_len;
    char *method_sp; /* "POST " */
    char *fixed;     /* " HTTP/1.1\r\nHost: ...\r\n" + static header lines */
    size_t fixed_len;
    uint32_t *dyn; /* indices of headers with dynamic values */
    size_t ndyn;
    bool content_length; /* send Content-Length (a body, or POST/PUT/PATCH) */
    bool may_override;   /* a before hook may set the body: send Content-Length when it does */
    uint32_t md_base;    /* first per-worker regex state of this step's extractors, then checks */
    int64_t timeout_ns;  /* 0: the run's */
    bool stamped;        /* its URL, a header or the body uses {{$stamp}} */
    bool follow;         /* follows redirects (max_redirects > 0) */
    uint32_t max_redirects; /* ps->req.max_redirects, or the run's (sq_flow_max_redirects) */
    /* publish and subscribe steps: the broker (an index into f->brokers) and the subject or
     * topic (owned) */
    int broker;
    char *subject;
    size_t subject_len;
    struct sq_h2_req h2; /* HTTP/2 flows (sq_flow_use_h2): a static step's request, else zeroed */
};

/* A broker the flow's publish and subscribe steps use: each worker opens one connection to it
 * (engine/flowbus.c) and subscribes there to every subject its subscribe steps wait on. */
struct sq_flow_broker {
    int kind; /* enum sq_bus_kind */
    char host[256];
    uint16_t port;
    char *user, *password;
    char **subs; /* subjects or topic filters to subscribe to */
    size_t nsubs;
    uint8_t qos; /* MQTT: the highest QoS a step asks for */
    /* Where it is: resolved once for the run, through its egress policy, by
     * sq_flow_resolve_brokers (before that, and after a failure, addr.len is 0). */
    struct sq_addr addr;
    /* tls:// or mqtts://: the TLS client for it (owned; its host the broker's), built by
     * sq_flow_resolve_brokers from the run's TLS flags. NULL: plain (or not built yet). */
    bool tls;
    struct sq_tls_client *tc;
    /* mqtt+ws://, mqtt+wss://: the WebSocket request's path and Host (engine/busws.h); NULL:
     * MQTT on the socket */
    char *ws_path, *ws_host;
};

struct sq_flow {
    const struct sq_plan *plan;
    const struct sq_plan_scenario *sc;
    struct sq_flow_step *steps;
    size_t nsteps;
    uint32_t nloops; /* sc->nloops: repeat: blocks (0: flow_advance's plain path) */
    /* nloops + the scenario's groups (group_duration): 0 takes the plain paths of
     * sq_flow_vu_begin and the worker's flow_advance, so a flow with neither pays one test */
    uint32_t extra;
    char host[300];              /* the Host header value, also the cookie host */
    bool secure;                 /* https target (cookies marked Secure are sent) */
    const char *accept_encoding; /* offered on every request without its own, or NULL */
    uint32_t nstates;            /* regex match-data blocks a worker needs (sq_flow_states_new) */
    struct sq_flow_broker *brokers; /* of the publish and subscribe steps */
    size_t nbrokers;
    bool h2; /* runs over HTTP/2 (sq_flow_use_h2) */
    /* the origin a redirect may stay on: the target's (origin.host points at origin_host) */
    struct sq_redirect_origin origin;
    char origin_host[256];
    /* {{$oauth.token}}: the run's token source (engine/oauth.h), set by whoever runs the plan;
     * NULL renders it empty */
    const struct sq_tmpl_live *oauth;
};

/* ctx.url = url[0, len) in a before hook of v's current step: a path ("/a?b") or an absolute
 * URL on f's origin (scheme, host and port as the target's), made into the request-target to
 * send (dot segments removed, bytes a request line cannot carry percent-encoded), kept in
 * v->target. Returns 0, or -1 with *why (static text): another origin, a malformed URL, or no
 * memory. */
struct sq_flow_vu;
int sq_flow_hook_url(const struct sq_flow *f, struct sq_flow_vu *v, const char *url, size_t len,
                     const char **why);

/* The state of one VU. */
struct sq_flow_vu {
    uint32_t step;
    bool in_iter;
    bool capture;   /* capture the current response's body into body */
    bool want_head; /* capture the current response's head into head */
    uint64_t vu;    /* 1-based */
    uint64_t iteration;
    int last_status;  /* the status of the iteration's latest response (0: none yet): `if:` */
    uint64_t *loop_n; /* per repeat: block of the flow, the passes done (NULL: none) */
    int64_t iter_start_ns;
    int64_t think_until; /* the current think step's end (0: not thinking) */
    uint64_t rng;        /* xorshift64: the VU's random stream (sq_flow_vu_init) */
    struct sq_buf req, body, head, scratch, val;
    struct sq_buf fields; /* the head's fields (struct sq_resp_header), spans into head */
    size_t nfields;
    bool body_truncated;
    bool body_set;         /* a before hook set the body of the request about to be rendered */
    struct sq_str body_in; /* ... that body (borrowed until the request is rendered) */
    /* A before hook's other changes to that request (ovr false: none, the plan's request):
     * ovr_method the method ({NULL, 0}: the plan's), ovr_hdrs "Name: value\r\n" lines that
     * replace the plan's fields of their names or add to them ({NULL, 0}: none), both borrowed
     * until the request is rendered; ovr_url: target holds the request-target to send
     * (origin-form, encoded: sq_flow_hook_url). */
    bool ovr;
    bool ovr_url;
    struct sq_str ovr_method, ovr_hdrs;
    struct sq_buf target;
    const char *path; /* the current request's target, inside req (or the static request) */
    size_t path_len;
    struct sq_buf *vars; /* nvars */
    struct sq_str *var_views;
    const struct sq_str **rows; /* per feeder of the plan */
    struct sq_cookie_jar *jar;
    /* {{$stamp}}: who makes a stamp (the worker: its stream and sequence numbers), and the VU's
     * latest one (a later step may wait for the event that carries it) */
    size_t (*stamp_fn)(void *ud, uint64_t *seq, char *out);
    void *stamp_ud;
    char stamp[SQ_STAMP_MAX];
    uint8_t stamp_len;
    uint64_t stamp_seq;
    struct sq_h2_req h2; /* HTTP/2 flows: the current rendered request (storage reused) */
    /* Redirects (sq_flow_redirect): follow is the current step's; loc the Location of the
     * current response when it is a redirect (a driver keeps it: sq_flow_vu_location*); hops
     * the redirects the step has followed; redirect: v->req holds the next hop, not yet sent;
     * redir the storage the next hop is built in (swapped with req); jar_at and jar_len the
     * Cookie line the jar added to v->req (jar_len 0: none). */
    bool follow;
    bool redirect;
    uint32_t hops;
    struct sq_buf loc, redir;
    size_t jar_at, jar_len;
    /* A batch (struct sq_plan_step.batch) the VU is in: the next request of it to send
     * (batch_next), the step after its last (batch_end), the requests not yet answered
     * (batch_left; 0: no batch out), whether one of them asked to end the iteration, and when
     * it was sent. */
    uint32_t batch_next, batch_end, batch_left;
    bool batch_stop;
    int64_t batch_ns;
    uint32_t batch_first; /* the batch's first request (its batch_duration is kept there) */
    /* group_duration: the scenario's groups the VU is inside (bit g: groups[g]) and when it
     * entered each (gstart: one per group, NULL for a scenario without groups) */
    uint64_t gopen;
    int64_t *gstart;
    uint64_t gagain; /* the groups inside the repeat that just went back for another turn */
};

/* The most body bytes a VU keeps for checks and extractors; beyond, the body is marked
 * truncated (checks see the first bytes). */
#define SQ_FLOW_BODY_CAP (1u << 20)

/* Compiles the scenario's steps against the target URL; accept_encoding (static storage, or
 * NULL) is offered on requests that do not set Accept-Encoding. Returns 0, or a negative code
 * with err saying which step and why. */
SQ_MUST_CHECK int sq_flow_compile(const struct sq_plan *p, const struct sq_plan_scenario *sc,
                                  const struct sq_url *target, const char *accept_encoding,
                                  struct sq_flow **out, char *err, size_t errlen);
void sq_flow_free(struct sq_flow *f);

struct sq_egress;
struct sq_tls_client_opts;
/* Resolves the broker of each publish and subscribe step (its first address: workers connect
 * there, and nowhere else) through the run's egress policy e (NULL: any destination): the name
 * is checked before it is looked up, the address after. A broker over TLS gets its TLS client
 * from tls (the run's -k, --cacert, --cert; NULL: the system's CAs) with its host. Returns 0,
 * -SQ_ERESOLVE, -EACCES (the policy's refusal, naming its rule) or -SQ_EUSAGE (a TLS option
 * that cannot be used: a CA file that does not load...), with err naming the broker. */
SQ_MUST_CHECK int sq_flow_resolve_brokers(struct sq_flow *f, const struct sq_egress *e,
                                          const struct sq_tls_client_opts *tls, char *err,
                                          size_t errlen);

/* Sets VU number vu (global, 1-based) up; its random values ($randomUUID, $randomInt, random
 * feeders) come from sq_tmpl_rng_init(seed, vu) (plan/tmpl.h). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_flow_vu_init(struct sq_flow_vu *v, const struct sq_flow *f, uint64_t vu,
                                  uint64_t seed);
void sq_flow_vu_dispose(struct sq_flow_vu *v, const struct sq_flow *f);

/* A batch's lane (engine/worker.c): a second VU state that sends one request of VU v's batch
 * on a connection of its own. It renders with v's variables, feeder rows and cookie jar (it
 * borrows them: an extractor of a batch's request sets v's variable) into buffers of its own.
 * Its random values come from its own stream (lane->rng, set once by its owner). sq_flow_vu_lane
 * brings lane up to date with v before each request (lane zeroed at first);
 * sq_flow_vu_lane_dispose frees what is the lane's own. */
void sq_flow_vu_lane(struct sq_flow_vu *lane, const struct sq_flow_vu *v);
void sq_flow_vu_lane_dispose(struct sq_flow_vu *lane, const struct sq_flow *f);

/* Whether step st's `if:` holds for VU v (its names rendered into v->scratch and v->val). */
bool sq_flow_cond(const struct sq_flow *f, struct sq_flow_vu *v, const struct sq_flow_step *st);

/* repeat: blocks (f->nloops > 0). sq_flow_loops_enter: the loops that start at v->step, reached
 * from before them (in pre-order from loop `from`): their passes reset, a while: tested, and a
 * loop whose while does not hold jumped over (v->step may then be f->nsteps: the flow is
 * done). sq_flow_loops_after: step v->step has just ended; the innermost loop ending there
 * that goes again sends v->step back to its first step (and enters the loops that start there
 * inside it): true; none: false (the caller moves on). */
void sq_flow_loops_enter(const struct sq_flow *f, struct sq_flow_vu *v, uint32_t from);
bool sq_flow_loops_after(const struct sq_flow *f, struct sq_flow_vu *v);

/* Starts an iteration: step 0 (or past the loops that do not run there), feeder rows picked. */
void sq_flow_vu_begin(struct sq_flow_vu *v, const struct sq_flow *f, int64_t now);

/* group_duration (a scenario with groups only): the VU goes on to step `next` (f->nsteps: its
 * iteration is over) at now. Each group it leaves, or starts again (inside a repeat that went back
 * for another turn: v->gagain), records the time since it entered into gdur[g] (µs); each group it
 * enters starts its clock. sq_flow_vu_begin calls it for the iteration's first step (gdur NULL:
 * none is open). */
struct sq_hist;
void sq_flow_groups_move(const struct sq_flow *f, struct sq_flow_vu *v, size_t next, int64_t now,
                         struct sq_hist **gdur);
/* The credentials an exchange of VU v (NULL: none in particular) may carry, for redacting it
 * when it is kept (base/redact.h): the plan's fixed ones (struct sq_plan.secrets), the cells of
 * v's current feeder rows in columns marked secret, the values of the cookies in v's jar, and
 * the run's newest OAuth2 tokens. Writes
 * at most max into out and returns how many there are in all (more than max: call again with
 * room for them). Views valid until the VU's next iteration. */
size_t sq_flow_secrets(const struct sq_flow *f, const struct sq_flow_vu *v, struct sq_str *out,
                       size_t max);

/* The request of step st for this VU: the static bytes, or rendered into v->req. Returns 0 or
 * -ENOMEM; *rendered tells which. */
SQ_MUST_CHECK int sq_flow_request(const struct sq_flow *f, const struct sq_flow_step *st,
                                  struct sq_flow_vu *v, const char **req, size_t *len,
                                  bool *rendered);

#define SQ_FLOW_MAX_HEADERS 128 /* a request's headers: the plan allows 100 */

/* A publish step's message for this VU: the payload and each header's value rendered (the
 * stamp made first when the step uses one). Spans point into the VU's buffers, valid until its
 * next render; hvals has room for the step's headers. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_flow_publish_render(const struct sq_flow *f, const struct sq_flow_step *st,
                                         struct sq_flow_vu *v, struct sq_str *payload,
                                         struct sq_str *hvals);

/* Renders t with the VU's values ($vu, $iteration, variables, feeder rows), appended to out
 * (a WebSocket step's path, headers and message). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_flow_render(const struct sq_flow *f, struct sq_flow_vu *v,
                                 const struct sq_tmpl *t, struct sq_buf *out);
/* The same for one event (a WebSocket step's message): when t uses {{$stamp}}, a new stamp is
 * made for it first (counted as stamped; a later subscribe: step waits for it). */
SQ_MUST_CHECK int sq_flow_render_event(const struct sq_flow *f, struct sq_flow_vu *v,
                                       const struct sq_tmpl *t, struct sq_buf *out);

/* Keeps a response head for the step's checks, extractors and cookie jar: head[0, len) is
 * copied into v->head and its fields, as the HTTP/1.1 reader parsed them (spans into head), are
 * kept as spans into that copy, so the head is never parsed again. Out of memory: the head is
 * dropped (the step then sees no headers). Allocates only until the buffers reach their
 * working size. */
void sq_flow_vu_keep_head(struct sq_flow_vu *v, const char *head, size_t len,
                          const struct sq_h1_header *fields, size_t nfields);

/* HTTP/2 (`protocol: h2`, `squall run --http2`): the flow's requests go out as HTTP/2 streams.
 * Each static step's request is converted once (st->h2, sq_h2_req_from_h1); a rendered one is
 * converted per request into the VU's own (sq_flow_h2_request), from the same HTTP/1.1 bytes the
 * templates rendered, so both protocols send the same method, target, fields and body. Returns 0,
 * or a negative code with err saying which step and why. */
SQ_MUST_CHECK int sq_flow_use_h2(struct sq_flow *f, char *err, size_t errlen);

/* The HTTP/2 request for step st of VU v, whose HTTP/1.1 form sq_flow_request just gave as
 * req[0, len): the step's own when static, else converted into v->h2 (allocates only until v->h2
 * reaches its working size). Returns 0 or a negative code (-ENOMEM). */
SQ_MUST_CHECK int sq_flow_h2_request(const struct sq_flow *f, const struct sq_flow_step *st,
                                     struct sq_flow_vu *v, const char *req, size_t len,
                                     const struct sq_h2_req **out);

/* Keeps one field of an HTTP/2 response head for the step's checks, extractors and cookie jar,
 * as "name: value" lines in v->head; the first field after the head was reset starts a new one.
 * sq_flow_vu_fields_done then makes them the spans sq_flow_eval reads (as sq_flow_vu_keep_head
 * does for HTTP/1.1). Out of memory: the head is dropped (the step then sees no headers). */
void sq_flow_vu_field(struct sq_flow_vu *v, const char *name, size_t name_len, const char *value,
                      size_t value_len);
void sq_flow_vu_fields_done(struct sq_flow_vu *v);

/* Appends a piece of the response body for checks and extractors, up to SQ_FLOW_BODY_CAP (past
 * it, or out of memory, v->body_truncated is set and the rest dropped). */
void sq_flow_vu_capture(struct sq_flow_vu *v, const char *data, size_t len);

/* Per-worker regex match data for every extractor and check of the flow. */
void **sq_flow_states_new(const struct sq_flow *f);
void sq_flow_states_free(const struct sq_flow *f, void **st);

/* Outcome of evaluating one response. */
struct sq_flow_outcome {
    uint32_t extract_fail; /* extractors that found nothing */
    bool stop_iteration;   /* on_error: next_iteration and something failed */
};

/* `squall run --max-redirects n`: every request step that does not set its own `redirects`
 * follows up to n (0: none). */
void sq_flow_max_redirects(struct sq_flow *f, uint32_t n);

/* Keeps the Location of a redirect for sq_flow_redirect: from a raw HTTP/1.1 head (its
 * "Location:" line, the first one), or a field's value as HTTP/2 gives it. Called only for a
 * redirect status of a step that follows them. Out of memory: no Location (the 3xx is final). */
void sq_flow_vu_location(struct sq_flow_vu *v, const char *head, size_t len);
void sq_flow_vu_location_set(struct sq_flow_vu *v, const char *value, size_t len);

/* Stores the Set-Cookie fields of the response whose head v keeps (sq_flow_vu_keep_head) in the
 * VU's jar, for the current request's path. */
void sq_flow_store_cookies(const struct sq_flow *f, struct sq_flow_vu *v);

/* The next hop of a redirect: the previous request prev[0, len) (HTTP/1.1 bytes, as sent)
 * answered by status with the Location v->loc. On SQ_REDIRECT_SAME, v->req holds the next
 * request (method and body as redirect.h says; the jar's cookies for its path) and v->path its
 * target. Returns SQ_REDIRECT_SAME, SQ_REDIRECT_OFFSITE, -SQ_EPARSE (no usable Location) or
 * -ENOMEM. */
SQ_MUST_CHECK int sq_flow_redirect(const struct sq_flow *f, struct sq_flow_vu *v, const char *prev,
                                   size_t len, unsigned status);

/* Runs the step's checks (adding to pass/fail, one slot per check) and extractors, stores
 * cookies, for a completed response with status and duration. The head's fields and the body
 * are taken from v (sq_flow_vu_keep_head, v->body) when they were captured. */
void sq_flow_eval(const struct sq_flow *f, const struct sq_flow_step *st, struct sq_flow_vu *v,
                  void **states, int status, int64_t duration_us, uint64_t *pass, uint64_t *fail,
                  struct sq_flow_outcome *out);

#endif
