/* daemon/internal.h - what the daemon's files share. Not a public header.
 *
 * Threads and who owns what:
 *  - the API thread (the server's one worker): every handler, the dashboard, /metrics, every
 *    SSE follower (struct sq_daemon__sub) and the live runs as the API knows them (d->cur,
 *    d->last). It reads the store (the reader connection: never waits for an fsync) and never
 *    writes it.
 *  - the ops thread: runs struct sq_daemon__op in FIFO order - parsing a request (getopt_long is
 *    not thread-safe: every parse happens here), the durable store writes the API needs
 *    (create, cancel, delete), plan validation, pruning - and posts the answer back to the API
 *    thread.
 *  - the runner thread: takes jobs from the queue one at a time and runs them (sq_run on this
 *    thread, the engine's workers beside it); each second it appends the series to the store,
 *    updates the run's struct sq_daemon__live under its mutex and posts a wake-up to the API.
 * d->mu guards the configuration, the queue and d->running; a live run's own mutex guards its
 * events and totals. Lifetimes: a live run is created by the runner, handed to the API thread
 * by a "begin" post and given up by an "end" post; the API thread frees it (it keeps the last
 * ended one for /metrics), so the runner never touches it after "end".
 */
#ifndef SQ_DAEMON_INTERNAL_H
#define SQ_DAEMON_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "daemon/daemon.h"
#include "engine/control.h"
#include "engine/run.h"
#include "server/server.h"
#include "store/store.h"

struct sq_hist;
struct sq_inbox;

/* ---- prep.c: a run request (the body of POST /runs), parsed, checked and set up ---- */

struct sq_daemon__req; /* opaque: the parsed request, owned by its job */

/* What the list and the caps need to know of a request. */
struct sq_daemon__req_info {
    enum sq_store_kind kind;
    char target[512]; /* the URL (quick) or the plan's target */
    char name[256];   /* the body's "name", or the plan's name, or "" */
};

/* Parses and checks a POST /runs body against the caps and the egress policy of cfg (on the ops
 * thread only; nothing is sent anywhere: DNS lookups of the names the policy allows, no
 * more). mcp: the run comes from an MCP client (POST /mcp): it must pass the MCP cap (loopback,
 * or a host allow_hosts names) besides allow_hosts (so loopback only while allow_hosts is
 * empty, instead of anywhere). Returns 0 with *out
 * set; -SQ_EUSAGE (a key or flag is wrong: err names it), -SQ_EPARSE (the plan:
 * "plan.yaml:3:5: key: why"), -SQ_ERANGE (over a cap: err names it), -EACCES (a destination or
 * a listener the policy refuses: err names the rule), -SQ_ERESOLVE (a destination does not
 * resolve), or another negative code (err says why). */
SQ_MUST_CHECK int sq_daemon__req_parse(const json_t *body, const struct sq_daemon_config *cfg,
                                       bool mcp, struct sq_daemon__req **out,
                                       struct sq_daemon__req_info *info, char *err, size_t len);
/* POST /validate: parses body like sq_daemon__req_parse (no caps, no egress policy, no DNS) and
 * describes it.
 * Returns 0 with *describe malloc'd (what `squall validate` prints), or the codes above. */
SQ_MUST_CHECK int sq_daemon__req_validate(const json_t *body, char **describe, char *err,
                                          size_t len);
/* On the runner: sets the run up again (DNS through the run's egress policy, TLS, the request)
 * into a run configuration that stays valid until sq_daemon__req_free, then does the set-up's
 * first network I/O (auth.oauth2's first token). Returns 0 or a negative code (err says why). */
SQ_MUST_CHECK int sq_daemon__req_setup(struct sq_daemon__req *rq, struct sq_run_config **cfg,
                                       char *err, size_t len);
/* Each second (the run's tick): true once a plan's abortOnFail threshold fails (the caller then
 * stops the run; *why says which). */
bool sq_daemon__req_tick(struct sq_daemon__req *rq, const struct sq_second *s,
                         const struct sq_hist *h, const char **why);
/* A plan's setup: (teardown false) or teardown: flow, once, on the runner (face/planrun.h's
 * sq_planrun_once), stopped by *stop. Returns 0 when there is none or it went well; -1 when it
 * did not (why: "setup failed: 1 of its 1 checks failed"), or -ENOMEM. Its figures go into the
 * document's setup / teardown block. */
SQ_MUST_CHECK int sq_daemon__req_once(struct sq_daemon__req *rq, bool teardown, volatile int *stop,
                                      char *why, size_t len);
/* After sq_run: the squall.result/1 document, exactly what the CLI writes with --json for the
 * same run (NULL when out of memory). */
json_t *sq_daemon__req_doc(struct sq_daemon__req *rq, struct sq_result *res);
/* A plan's sink: section (none: nothing done, *subscribed true). After sq_daemon__req_setup,
 * before the load: starts the sink (listens, subscribes; waits up to 5 s or *stop for the
 * subscriptions: *subscribed false when they did not come). Returns 0, or a negative code with
 * err "plan.yaml:L:C: sink: why" (the port is taken, ...). */
SQ_MUST_CHECK int sq_daemon__req_sink_begin(struct sq_daemon__req *rq, volatile int *stop,
                                            bool *subscribed, char *err, size_t len);
bool sq_daemon__req_has_sink(const struct sq_daemon__req *rq);
/* After the load (and sq_daemon__req_doc): tells the sink what the run stamped, waits its
 * settle (cut short by *stop), stops it and puts its `sink` block into doc (when not NULL).
 * True when the sink fails the run (a broker source never subscribed): why says so, as
 * "plan.yaml:L:C: sink: nats://...: never subscribed (...)". */
bool sq_daemon__req_sink_end(struct sq_daemon__req *rq, const struct sq_result *res, json_t *doc,
                             volatile int *stop, char *why, size_t len);
/* Plan runs: the plan and its running totals (as of the last sq_daemon__req_tick); NULL for a
 * quick run. */
const struct sq_plan *sq_daemon__req_plan(const struct sq_daemon__req *rq);
const struct sq_live_totals *sq_daemon__req_live_totals(const struct sq_daemon__req *rq);
/* The worker threads and the most VUs the set-up run uses. */
void sq_daemon__req_shape(const struct sq_daemon__req *rq, uint32_t *workers, uint64_t *vus);
/* The request as the store keeps it (the runs.request column, GET /runs/{id}, the dashboard's
 * "Run again"): text, or, when it holds credentials, a copy with them redacted (base/redact.h:
 * a quick request's credential -H values, the plan's fixed credentials in its text) and
 * "redacted": true, which POST /runs refuses. As it came with no-redact / a plan's redact:
 * false. NULL when out of memory. */
char *sq_daemon__req_stored(const struct sq_daemon__req *rq, const json_t *body, const char *text);
void sq_daemon__req_free(struct sq_daemon__req *rq);

/* ---- live.c: the run in progress as the API sees it, SSE followers ---- */

/* How the operator lets runs reach a host beyond loopback: named in the MCP cap's error and the
 * MCP tools' descriptions (squall mcp names its own --allow-host). */
#define SQ_DAEMON_ALLOW_SETTING "squall serve --allow-host HOST, or allow_hosts in PUT /config"

#define SQ_DAEMON_NBUCKETS 15 /* Prometheus latency buckets, +Inf included */
extern const double sq_daemon__buckets_s[SQ_DAEMON_NBUCKETS - 1];

/* Running totals of a run (for its events, /health and /metrics). */
struct sq_daemon__totals {
    double elapsed_s;
    uint64_t sent, completed, failed, dropped, errors, bytes_received;
    uint64_t status[6]; /* [0] other, [1..5] 1xx..5xx */
    uint64_t errk[SQ_ERRK_COUNT];
    uint64_t vus, in_flight;
    double rps; /* the last second's completed per second */
    int64_t p50_us, p90_us, p99_us, max_us;
    uint64_t bucket[SQ_DAEMON_NBUCKETS]; /* cumulative: at or under each bound; last +Inf */
    double lat_sum_s;
    bool ended; /* the totals are the result's (exact) */
};

struct sq_daemon__live {
    int64_t id;
    /* set before the begin post, then read-only */
    uint32_t workers;
    uint64_t vus_max;
    char kind[8];
    char name[256];
    char target[512];
    int64_t started_ms;
    pthread_mutex_t mu; /* guards what follows */
    char **ev;          /* the events so far ("second" events), each owned */
    size_t nev, cap;
    char *end_ev;      /* the last event, once the run ended */
    char *live_ev;     /* the latest "live" event (livetab.c), replaced each second; owned */
    uint64_t live_seq; /* how many were set (a follower sends the latest when it missed it) */
    /* a plan run's own metrics as /metrics sample lines (runner.c, each second; NULL: none):
     * squall_run_custom_value and squall_run_custom_samples_total, owned */
    char *cm_value, *cm_samples;
    enum sq_store_status status;
    struct sq_daemon__totals t;
};

/* SSE followers (API thread only). */
struct sq_daemon__sub {
    struct sq_daemon__sub *next, *prev;
    struct sq_daemon *d;
    struct sq_server_hold *h;
    int64_t run;
    size_t next_ev;    /* the next live event to send */
    uint64_t live_seq; /* the "live" event it has (struct sq_daemon__live's live_seq) */
};

SQ_MUST_CHECK int sq_daemon__live_new(int64_t id, struct sq_daemon__live **out);
void sq_daemon__live_free(struct sq_daemon__live *l);
/* Renders one "second" event: the second's series entry (second_json: the result document's
 * shape, sq_daemon__second_json), the totals after it, and (fine_json, a live run's, else NULL)
 * its 100 ms bins. idx numbers it (the SSE id). Returns malloc'd text or NULL. */
char *sq_daemon__event_second(int64_t run, int64_t idx, const char *second_json,
                              const char *totals_json, const char *fine_json);
/* A second's 100 ms bins (cfg->on_tick_fine) as the event's "fine" object (malloc'd JSON text:
 * bin_s, t0_s, completed, failed, max_us, as the result's series_100ms), or NULL. */
char *sq_daemon__fine_json(const struct sq_fine_bin *v, uint32_t n, int64_t bin_ns, double t0_s);
/* One second as the result document's series entry (output/json.h), as JSON text (malloc'd);
 * with p (a plan run's plan, else NULL) and the second's metrics (s->m), their custom_metrics. */
struct sq_plan;
char *sq_daemon__second_json(const struct sq_second *s, bool client, bool open,
                             const struct sq_plan *p);
/* The totals as JSON text (malloc'd), as they ride in events and the store's series extra. */
char *sq_daemon__totals_json(const struct sq_daemon__totals *t);
/* The last event: {"run", "status", "reason", "result"}; doc may be NULL. */
char *sq_daemon__event_end(int64_t run, enum sq_store_status st, const char *reason,
                           const char *doc, size_t doc_len);
/* An event without data worth a struct: "status" with {"run", "status"}. */
char *sq_daemon__event_status(int64_t run, enum sq_store_status st);

/* API thread: GET /runs/{id}/live. Answers it (held and streamed), or fills resp. */
void sq_daemon__live_follow(struct sq_daemon *d, const struct sq_server_req *req,
                            struct sq_server_resp *resp, int64_t id, const char *cors);
/* API thread: a change made to running run id (POST /runs/{id}/control, its answer) sent to the
 * run's followers as a "control" event and kept for later ones. */
void sq_daemon__live_control(struct sq_daemon *d, int64_t id, const json_t *change);
/* API thread, from the runner's posts. */
void sq_daemon__live_begin(struct sq_daemon *d, struct sq_daemon__live *l);
void sq_daemon__live_tick(struct sq_daemon *d, struct sq_daemon__live *l);
void sq_daemon__live_end(struct sq_daemon *d, struct sq_daemon__live *l);
/* API thread: a queued run was cancelled or the daemon stops: end its followers. */
void sq_daemon__live_cancelled(struct sq_daemon *d, int64_t id, enum sq_store_status st,
                               const char *reason);
void sq_daemon__live_close_all(struct sq_daemon *d);

/* ---- livetab.c: the live tables ("live" event) ---- */

#define SQ_DAEMON_LIVE_ROWS       200 /* rows (steps) in one live event, at most */
#define SQ_DAEMON_LIVE_THRESHOLDS 64  /* threshold expressions in one live event, at most */
#define SQ_DAEMON_LIVE_CHECKS     200 /* checks in one live event, at most */

/* A run's per-step running histograms (runner thread). */
struct sq_daemon__livetab {
    struct sq_hist **h; /* per step (sq_result.step_series' order), made with its first data */
    uint32_t n;
    /* per sampled-exchange class (result.h: 4xx, 5xx, the error kinds), the first failure
     * sample a worker handed over (cfg->on_xsample_live), as the result's sampled_exchanges
     * write one; NULL: none yet */
    json_t *xs[SQ_XS_CLASSES];
};
void sq_daemon__livetab_dispose(struct sq_daemon__livetab *t);
/* Keeps x (borrowed) as its class's failure sample when the class has none yet. */
void sq_daemon__livetab_sample(struct sq_daemon__livetab *t, const struct sq_xsample *x);
struct sq_plan;
struct sq_live_totals;
struct sq_step_live;
/* Renders the "live" event after a second: a plan run's rows from v[0..n) (each step's second
 * histogram merged into t), its thresholds judged on lt; a quick run's (p NULL) one row from the
 * totals tt and total (the run's histogram so far). len_s: the second's length. Returns the
 * event's text (malloc'd) or NULL. */
char *sq_daemon__event_live(struct sq_daemon__livetab *t, const struct sq_daemon__live *l,
                            const struct sq_daemon__totals *tt, const struct sq_hist *total,
                            const struct sq_plan *p, const struct sq_live_totals *lt,
                            const struct sq_step_live *v, uint32_t n, double len_s);

/* ---- runner.c: the queue, the runner and the ops thread ---- */

struct sq_daemon__job {
    struct sq_daemon__job *next;
    int64_t id;
    struct sq_daemon__req *req;
    volatile int stop;       /* the run's stop flag (cfg.stop): atomic stores and loads */
    volatile int stop_again; /* a stop asked again: the plan's teardown: stops at once */
    bool shutting_down;      /* stopped because the daemon shuts down (under d->mu) */
    struct sq_run_ctl *ctl;  /* the run's control (cfg.ctl) while it is the running job, or NULL */
};

/* A held API request waiting for the ops thread. gone() clears h. */
struct sq_daemon__pending {
    struct sq_daemon *d;
    struct sq_server_hold *h;
    char *headers; /* extra header lines for the answer (CORS), owned */
    int64_t t0;    /* --access-log: when the request came, and its method and path */
    char what[224];
};

enum sq_daemon__op_kind {
    OP_CREATE,
    OP_VALIDATE,
    OP_CANCEL,
    OP_DELETE,
    OP_PRUNE,
    OP_MCP,      /* POST or DELETE /mcp */
    OP_MCP_DONE, /* run id ended: answer the MCP calls waiting for it */
};

#define SQ_DAEMON_MCP_SID_MAX 64 /* an Mcp-Session-Id's length at most */

struct sq_daemon__op {
    struct sq_daemon__op *next;
    enum sq_daemon__op_kind kind;
    struct sq_daemon__pending *p; /* NULL for OP_PRUNE */
    int64_t id;
    char *body; /* OP_CREATE, OP_VALIDATE, OP_MCP: the request body (owned, NUL-terminated) */
    size_t body_len;
    char mcp_sid[SQ_DAEMON_MCP_SID_MAX + 1]; /* OP_MCP: the Mcp-Session-Id header, or "" */
    bool mcp_delete;                         /* OP_MCP: DELETE /mcp */
    bool mcp_sse; /* OP_MCP: the Accept header takes text/event-stream (progress may stream) */
};

SQ_MUST_CHECK int sq_daemon__threads_start(struct sq_daemon *d, char *err, size_t len);
/* Stops the runner (its run stopped gracefully, queued runs cancelled) and the ops thread. */
void sq_daemon__threads_stop(struct sq_daemon *d);
/* Hands op to the ops thread (which frees it). Returns 0 or -ESHUTDOWN (op freed, not run). */
int sq_daemon__op_push(struct sq_daemon *d, struct sq_daemon__op *op);
void sq_daemon__op_free(struct sq_daemon__op *op);
/* Wakes the ops thread: a run end was kept in memory (the store could not take it); the ops
 * thread tries to write the kept ends every second until the store takes them. */
void sq_daemon__op_wake(struct sq_daemon *d);
/* API thread: stops run id if it is the one running (true), under d->mu. */
bool sq_daemon__stop_running(struct sq_daemon *d, int64_t id);
/* API thread: changes run id if it is the one running (engine/control.h, sq_run_ctl_json: POST
 * /runs/{id}/control), under d->mu. Returns what that returns, or -ENOENT when run id is not
 * running; *answer as it gives it. */
int sq_daemon__control_running(struct sq_daemon *d, int64_t id, const char *body, size_t len,
                               json_t **answer, char *why, size_t whylen);
/* API thread: takes run id out of the queue (true when it was there). */
bool sq_daemon__dequeue(struct sq_daemon *d, int64_t id);
/* Ops thread: a run sq_daemon__dequeue took out is stored stopped and its followers told. */
void sq_daemon__cancel_queued(struct sq_daemon *d, int64_t id);
/* Ops thread: what POST /runs does with body (an object; text is its JSON text, stored as the
 * request): checks it and queues the run. Returns 0 with *id, or a negative code with *status
 * (the HTTP status POST /runs would answer) and err. */
SQ_MUST_CHECK int sq_daemon__enqueue(struct sq_daemon *d, const json_t *body, const char *text,
                                     bool mcp, int64_t *id, int *status, char *err, size_t len);

/* ---- mcp.c: POST /mcp (ops thread only) ---- */

struct sq_daemon__mcp; /* the sessions and the calls waiting for a run */
void sq_daemon__mcp_op(struct sq_daemon *d, struct sq_daemon__op *op);
void sq_daemon__mcp_done(struct sq_daemon *d, int64_t run);
/* After the ops thread stopped: answers the waiting calls, ends every session. */
void sq_daemon__mcp_close(struct sq_daemon *d);
/* API thread: a second of run l went by: the MCP calls waiting for it with a progress token get
 * a notifications/progress on their SSE answer. */
void sq_daemon__mcp_tick(struct sq_daemon *d, struct sq_daemon__live *l);

/* ---- api.c ---- */

void sq_daemon__handler(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp);
/* The server's on_head hook: the gate, before a body is read (a tokenless POST gets its 401
 * without sending its body). */
void sq_daemon__on_head(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp);
void sq_daemon__pending_gone(void *ud);
void sq_daemon__pending_free(struct sq_daemon__pending *p);
/* Any thread: answers p on the API thread (status, JSON body; body is taken). */
void sq_daemon__answer(struct sq_daemon *d, struct sq_daemon__pending *p, int status, char *body,
                       const char *extra_headers);
/* {"error": msg} as JSON text (malloc'd, never NULL). */
char *sq_daemon__error_body(const char *msg);
/* Unix ms as "2024-05-01T12:00:00.123Z"; "" for 0. */
void sq_daemon__iso_time(int64_t ms, char *buf, size_t len);
/* A run as the list shows it (no request, no result). */
json_t *sq_daemon__run_json(const struct sq_store_run *r);
void sq_daemon__log(struct sq_daemon *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- config.c ---- */

/* GET /config: {key: {"value", "applies", "description"}} (under d->mu). */
json_t *sq_daemon__config_json(struct sq_daemon *d);
/* PUT /config: checks every key, then applies them all (or none). Returns 0, -SQ_EUSAGE with
 * err naming the key, or -ENOMEM. */
SQ_MUST_CHECK int sq_daemon__config_put(struct sq_daemon *d, const json_t *obj, char *err,
                                        size_t len);

/* ---- metrics.c ---- */

/* Renders the Prometheus text exposition (API thread). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_daemon__metrics(struct sq_daemon *d, struct sq_buf *out);
/* Label value escaping for the exposition format (\\, \" and \n). */
void sq_daemon__prom_label(struct sq_buf *b, const char *s);

/* ---- dashboard.c ---- */

/* The dashboard page: uPlot and web/dashboard/ inlined into one HTML document (built once). */
SQ_MUST_CHECK int sq_daemon__page(char **out, size_t *len);
extern const char sq_daemon__page_csp[];

/* The answer the API thread is building (its body and header lines): the server copies both
 * before the handler's caller returns, so one serves every request. */
struct sq_daemon__out {
    struct sq_buf body;
    char hdrs[2048];
    size_t hlen;
    bool held; /* handed to the ops thread: counted when answered */
};

/* ---- the daemon ---- */

struct sq_daemon {
    FILE *log;
    bool access_log;
    char *host, *data_dir, *token, *cors_origin, *cors_headers;
    size_t token_len;
    bool check_host; /* loopback without a token: only loopback Host headers (DNS rebinding) */
    struct sq_store *store;
    struct sq_server *srv;
    uint16_t port;
    int64_t start_wall_ms, start_ns;
    pthread_mutex_t log_mu;

    pthread_mutex_t mu; /* guards cfg, the queue and running */
    pthread_cond_t q_cv;
    struct sq_daemon_config cfg;
    struct sq_daemon__job *q_head, *q_tail;
    size_t q_len;
    struct sq_daemon__job *running;
    bool q_stop;
    pthread_t runner;
    bool runner_started;

    pthread_mutex_t ops_mu;
    pthread_cond_t ops_cv;
    struct sq_daemon__op *ops_head, *ops_tail;
    bool ops_stop, ops_started;
    pthread_t ops;

    struct sq_daemon__mcp *mcp; /* ops thread only (then the thread that shuts down) */
    struct sq_inbox *inbox;     /* /inbox/...: captured and served on the API thread */

    /* API thread only */
    struct sq_daemon__live *cur, *last;
    struct sq_daemon__mcp_stream *mcp_streams; /* MCP answers streamed as SSE (daemon/mcp.c) */
    struct sq_daemon__sub *subs;
    size_t nsubs;
    uint64_t sse_total;
    uint64_t answers[6]; /* API answers by status class ([0]: other) */
    uint64_t unauthorized;
    char *page;
    size_t page_len;
    struct sq_daemon__out out; /* the answer being built */
    struct sq_buf live_body;   /* GET /runs/{id}/live's first bytes */
    char live_hdrs[1024];
    bool shut;
};

#endif
