/* plan/plan.h - the compiled plan: what `squall run plan.yaml` loads and every worker shares.
 *
 * sq_plan_load() reads the YAML (libfyaml), checks every key against the schema in
 * docs/plans.md and compiles templates, extractors, checks, thresholds and feeders. The result
 * is immutable once loaded (except the feeders' sequential cursors, which are atomics) and is
 * shared read-only by every worker. Nothing in here knows about sockets: the engine turns each
 * request into bytes.
 */
#ifndef SQ_PLAN_PLAN_H
#define SQ_PLAN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "plan/cond.h"
#include "plan/eval.h"
#include "plan/exec.h"
#include "plan/feeder.h"
#include "plan/metrics.h"
#include "plan/threshold.h"
#include "plan/tmpl.h"

/* A position in the plan file, 1-based. */
struct sq_loc {
    uint32_t line, col;
};

struct sq_plan_header {
    char *name;            /* as written */
    struct sq_tmpl *value; /* compiled with SQ_TMPL_ESC_NONE */
};

enum sq_body_kind {
    SQ_BODY_NONE,
    SQ_BODY_TEXT, /* body: a template string */
    SQ_BODY_JSON, /* json: an object serialised once into a template (values JSON-escaped) */
    SQ_BODY_FORM, /* form: urlencoded pairs (values form-escaped) */
    SQ_BODY_FILE, /* file: the file's bytes, read at load time (static) */
};

struct sq_plan_request {
    char *method; /* upper-case token; default GET */
    /* url: a path ("/items?x={{$vu}}") resolved against the plan's target, or an absolute
     * http:// URL on the same host and port as the target (other origins: a load error). */
    struct sq_tmpl *url;
    char *url_src;                  /* the url as written in the plan (for `squall validate`) */
    struct sq_plan_header *headers; /* the defaults first, then the step's (a step's header
                                       replaces a default of the same name) */
    size_t nheaders;
    enum sq_body_kind body_kind;
    struct sq_tmpl *body; /* NULL when body_kind is NONE */
    char *body_file;      /* FILE: the path as written in the plan; NULL otherwise */
    /* Content-Type the engine adds unless a header sets one: application/json for json,
     * application/x-www-form-urlencoded for form, NULL otherwise. */
    const char *content_type;
    int64_t timeout_ns; /* the step's, else the defaults', else 0 (the run's default) */
    /* redirects: how many 301/302/303/307/308 answers the step follows (the step's, else
     * defaults.max_redirects, else SQ_PLAN_MAX_REDIRECTS); 0: none, the 3xx is what checks see */
    uint32_t max_redirects;
    bool redirects_set; /* the step set its own (`redirects:`): `squall run --max-redirects`
                           leaves it */
};

#define SQ_PLAN_MAX_REDIRECTS 10 /* k6's maxRedirects */
#define SQ_PLAN_REDIRECTS_CAP 100

enum sq_on_error { SQ_ON_ERROR_CONTINUE, SQ_ON_ERROR_NEXT_ITERATION };

/* PUBLISH and SUBSCRIBE are event-bus steps (engine/flowbus.c): their req holds method "PUB" /
 * "SUB", url_src the broker URL (nats://HOST[:PORT]/SUBJECT or mqtt://HOST[:PORT]/TOPIC, checked
 * in full when the engine compiles the flow), a publish's payload (body) and headers (NATS
 * headers, MQTT 5 user properties), and the timeout. */
enum sq_step_kind {
    SQ_STEP_REQUEST,
    SQ_STEP_THINK,
    SQ_STEP_PUBLISH,
    SQ_STEP_SUBSCRIBE,
    SQ_STEP_WS
};

/* A WebSocket step (`ws:`, docs/plans.md). A VU's WebSocket is its HTTP/1.1 connection upgraded
 * in place by `connect`; it lives until `close` (every connect is followed by a close in the
 * flow, and no request step comes between them: the loader checks both). The step's templates
 * live in its `req`: connect's path in req.url and its headers in req.headers, send's message in
 * req.body (SQ_BODY_TEXT); req.timeout_ns is the step's timeout. */
enum sq_ws_op {
    SQ_WS_OP_CONNECT, /* upgrade; completes with the answer's status (101) */
    SQ_WS_OP_SEND,    /* a message; completes when written, or with `reply` at the next message */
    SQ_WS_OP_RECEIVE, /* completes with the next message */
    SQ_WS_OP_CLOSE,   /* a close frame; completes with the server's close */
};

struct sq_plan_ws {
    enum sq_ws_op op;
    bool binary;         /* SEND: a binary message (default text) */
    bool reply;          /* SEND: wait for the next message */
    uint16_t close_code; /* CLOSE: the code sent (default 1000) */
    char *subprotocol;   /* CONNECT: Sec-WebSocket-Protocol to offer, or NULL */
};

/* metrics: the plan's own metrics (docs/plans.md, "Custom metrics"), k6's four kinds. */
#define SQ_PLAN_METRICS_MAX 32 /* declared per plan */
#define SQ_STEP_METRICS_MAX 4  /* metric: entries per step */
#define SQ_METRIC_NAME_MAX  64 /* a name's bytes */

struct sq_plan_metric {
    char *name; /* [A-Za-z_][A-Za-z0-9_]*, no built-in metric's name */
    enum sq_metric_kind kind;
    struct sq_loc loc;
};

/* tags: a step's user tags, its groups' and its scenario's merged (an inner one wins), which
 * thresholds select its requests by ("http_req_duration{page:home}"). */
#define SQ_PLAN_TAGS_MAX 8  /* per step, merged */
#define SQ_PLAN_TAG_LEN  64 /* a key's or a value's bytes */

struct sq_plan_tag {
    char *key, *value; /* owned */
};

/* Where a step's metric: sample comes from, once per response of the step. */
enum sq_step_metric_src {
    SQ_SMS_NUMBER, /* add: 2.5 (a rate: non-zero passes) */
    SQ_SMS_TMPL,   /* add: "{{total}}": rendered, then read as a number */
    SQ_SMS_CHECKS, /* from: checks: 1 when every check of the step held, else 0 */
};

struct sq_step_metric {
    uint32_t metric; /* index into plan->metrics */
    enum sq_step_metric_src src;
    double value;        /* NUMBER */
    struct sq_tmpl *tmp; /* TMPL: owned */
};

struct sq_plan_step {
    enum sq_step_kind kind;
    char *name; /* given, or "step N" (1-based) when the step has none; unique in the flow */
    struct sq_loc loc;
    int64_t think_ns; /* THINK */
    struct sq_plan_request req;
    struct sq_plan_ws ws;         /* WS */
    struct sq_extractor *extract; /* each sets extract[i].var */
    char **extract_src;           /* per extractor: its JSON path, regex or header as written */
    size_t nextract;
    struct sq_check *checks;
    size_t nchecks;
    enum sq_on_error on_error; /* after a failed extraction or a failed request */
    uint8_t qos;               /* PUBLISH, SUBSCRIBE over MQTT: 0..2 */
    bool needs_body;           /* a check, an extractor or an after hook reads the body */
    bool needs_headers;        /* a check, an extractor or an after hook reads headers */
    /* group: the groups around the step, outer first, joined by "::" ("checkout::pay"), as
     * k6 names them; NULL outside any group. Owned. */
    char *group;
    /* if: the step runs only when it holds (plan/cond.h); NULL: always. A step it skips sends
     * nothing and is not counted. */
    struct sq_cond *cond;
    struct sq_loc cond_loc;
    /* before: / after: the plan script's functions run around the request (NULL: none) */
    char *before, *after;
    struct sq_loc before_loc, after_loc;
    /* batch: (docs/plans.md, Parallel requests): the first request of a batch holds how many
     * requests the batch has (this step and the batch - 1 after it), 0 elsewhere; in_batch is
     * set on every request of a batch. A batch's requests go out at once and the flow goes on
     * when all of them are answered or failed. */
    uint32_t batch;
    bool in_batch;
    struct sq_plan_tag *tags; /* tags: (merged, see above); NULL: none */
    uint32_t ntags;
    /* metric: samples of the plan's own metrics, taken at each response (NULL: none) */
    struct sq_step_metric *metrics;
    uint32_t nmetrics;
    /* group_duration (docs/plans.md, Groups): bit g is set when the step is inside the
     * scenario's groups[g]; 0 outside groups. */
    uint64_t gmask;
};

/* repeat: (docs/plans.md, Loops): steps first..last (indices into the flat step list,
 * inclusive) run count times, or while cond holds and at most max times. A scenario's loops are
 * in pre-order (an outer loop before the loops inside it, first ascending). */
struct sq_plan_loop {
    uint32_t first, last;
    uint64_t count;       /* count: N; 0 for a while: loop */
    struct sq_cond *cond; /* while: (NULL for count:) */
    uint64_t max;         /* while: the cap */
    struct sq_loc loc;
    uint32_t gdepth; /* how many groups are around the repeat */
    uint64_t gin;    /* bit g: the scenario's groups[g] is inside the repeat (a pass per turn) */
};

#define SQ_PLAN_BATCH_MAX     32 /* requests in one batch: at most */
#define SQ_PLAN_BATCH_CONNS   6  /* batchConnections: its default (as browsers open per host) */
#define SQ_PLAN_BATCH_CONNMAX 32 /* batchConnections: at most */
#define SQ_PLAN_LOOP_MAX      1000000 /* count and max at most */
#define SQ_PLAN_LOOP_DEPTH    8       /* repeat inside repeat */

struct sq_plan_scenario {
    char *name;
    struct sq_loc loc;
    struct sq_exec exec; /* prepared (sq_exec_prepare) */
    int64_t start_ns;    /* startTime: offset from the run's start */
    struct sq_plan_step *steps;
    size_t nsteps;
    char **vars; /* names of the per-VU variable slots (extracted values, then the scenario's
                    locals: the names hooks set), nvars of them */
    uint32_t nvars;
    bool cookies; /* per-VU cookie jar */
    bool h2;      /* protocol: h2 (HTTP/2 streams; h2c for http://, ALPN h2 for https://) */
    bool h3;      /* protocol: h3 (HTTP/3 over QUIC, h2 set too: the same requests) */
    bool ws;      /* a flow with WebSocket steps */
    struct sq_plan_loop *loops; /* repeat: blocks, in pre-order */
    uint32_t nloops;
    uint32_t batch_max;   /* the most requests of any batch: in the flow (0: no batch) */
    uint32_t batch_conns; /* batchConnections: a VU's connections for a batch, beside its own */
    /* The scenario's group paths, each enclosing group too, in order of first appearance (the
     * result's `groups` order): group_duration is kept per entry (owned; NULL: no group). */
    char **groups;
    uint32_t ngroups; /* at most SQ_PLAN_GROUPS_MAX */
};
#define SQ_PLAN_GROUPS_MAX 64 /* group paths in one scenario (its steps' gmask bits) */

struct sq_plan_feeder {
    char *name;
    char *path;
    enum sq_feed_mode mode;
    struct sq_feeder *data;
    /* secret: per column of data, true when its cells are credentials: a VU's current cell is
     * redacted wherever an exchange is kept (base/redact.h); NULL when no column is secret */
    bool *secret;
};

struct sq_plan_threshold {
    char *selector;           /* as written: "http_req_duration{step:login}" */
    struct sq_metric_sel sel; /* spans into selector */
    enum sq_metric metric;    /* sel's metric, from the registry (plan/metrics.h) */
    int custom;               /* >= 0: sel names plan->metrics[custom] (metric is then unused) */
    struct sq_th_expr *exprs;
    size_t nexprs;
    bool abort_on_fail;
    int64_t delay_abort_eval_ns;
    struct sq_loc loc;
};

struct sq_plan_var {
    char *name, *value;
};

/* sink: what arrives at the far end of the run's pipeline, counted beside the load in one
 * process (sink/beside.h, sink/sink.h). Strings owned; URLs as written. */
struct sq_plan_sink {
    char *http; /* HOST:PORT to listen on */
    char *nats, *mqtt;
    char *stamp; /* where the stamp is (NULL: scan) */
    int64_t settle_ns;
    int qos; /* mqtt: -1 default */
    char *stream, *durable, *queue;
    struct sq_loc loc;
};

/* subscribers: N subscriber connections to a subject or topic the plan's publish steps publish
 * to, counted beside the load in one process (sink/subs.h; the quick face's --subscribers).
 * Strings owned; the URL as written (checked in full when the subscribers start). */
struct sq_plan_subscribers {
    char *url;        /* nats://.../SUBJECT, tls://..., mqtt://.../TOPIC or mqtts://... */
    uint32_t count;   /* 1..SQ_PLAN_SUBSCRIBERS_MAX */
    uint32_t threads; /* 0: one per CPU, at most one per subscriber */
    char *queue;      /* NATS queue group / MQTT shared subscription; NULL: fan-out */
    char *stream;     /* NATS: JetStream consumers on this stream; NULL: core subscriptions */
    uint32_t batch;   /* with stream, pull: the fetch size (0: the default) */
    bool push;        /* with stream: push consumers */
    int qos;          /* mqtt: -1 default (1) */
    struct sq_loc loc;
};
#define SQ_PLAN_SUBSCRIBERS_MAX 100000

/* auth.oauth2: one access token for the whole run from the client-credentials grant (RFC 6749
 * 4.4), fetched before the start and refreshed while it runs (engine/oauth.h). */
struct sq_plan_oauth2 {
    char *token_url;         /* an absolute http(s) URL, or a path on the plan's target */
    char *client_id;         /* fixed text (plan variables and $env.NAME resolved) */
    char *client_secret;     /* the same; never printed (not by validate, errors or the JSON) */
    char *scope;             /* NULL: none asked */
    bool client_auth_body;   /* client_auth: body (the pair in the form) instead of HTTP Basic */
    int64_t refresh_lead_ns; /* refresh this long before the token expires (30s) */
    int64_t min_refresh_ns;  /* never two refreshes closer than this (1s) */
    int64_t retry_ns;        /* after a failed refresh, wait this long, doubling (500ms) ... */
    int64_t retry_max_ns;    /* ... up to this (30s) */
    int64_t timeout_ns;      /* one token request (10s) */
    struct sq_loc loc;
};

struct sq_plan {
    char *file;                              /* the path it was loaded from */
    struct sq_plan_sink *sink;               /* NULL: none */
    struct sq_plan_subscribers *subscribers; /* NULL: none */
    char *target;                            /* base URL ("http://127.0.0.1:8080"), required */
    char *name;                              /* the run's name (name:); NULL when unset */
    struct sq_plan_var *vars;
    size_t nvars;
    struct sq_plan_feeder *feeders;
    size_t nfeeders;
    struct sq_plan_scenario *scenarios;
    size_t nscenarios;
    /* setup: / teardown: flows run once, on one VU, before and after the scenarios (NULL:
     * none); each a scenario named "setup" / "teardown" whose executor is per-vu-iterations,
     * 1 VU, 1 iteration, maxDuration 60s. What setup extracts is the one row of the feeder
     * feeders[setup_feeder] ("setup", per-vu, a column per setup variable): templates read it
     * as {{setup.NAME}}; sq_feeder_set_row() fills it before the scenarios start. */
    struct sq_plan_scenario *setup, *teardown;
    int setup_feeder;               /* -1: no setup */
    struct sq_plan_metric *metrics; /* metrics: declared in the plan, in order */
    size_t nmetrics;
    struct sq_plan_threshold *thresholds;
    size_t nthresholds;
    int64_t default_timeout_ns;     /* defaults.timeout; 0 when unset */
    uint32_t default_max_redirects; /* defaults.max_redirects; SQ_PLAN_MAX_REDIRECTS unset */
    char *script; /* script: the Lua file of the steps' before/after hooks (a resolved path), or
                     NULL */
    struct sq_loc script_loc;
    struct sq_plan_oauth2 *oauth2; /* auth.oauth2, or NULL */
    /* seed: the random values' seed (plan/tmpl.h), in [0, SQ_SEED_MAX]; seed_set false: none
     * (the run draws one, or takes --seed, which wins over this) */
    uint64_t seed;
    bool seed_set;
    bool no_redact; /* redact: false: kept exchanges keep their credentials */
    /* source_addrs: local addresses the connections bind, round-robin (the syntax of
     * --source-addrs, net/srcaddr.h: checked by the face, at source_addrs_loc); connect_rate:
     * connections opened per second at most (0: none). The flags win over both. */
    char *source_addrs;
    struct sq_loc source_addrs_loc;
    double connect_rate;
    /* The credentials the plan holds as fixed text, found when it loads: the fixed value of each
     * credential header (base/redact.h's names) and its part after the scheme word, auth.oauth2's
     * client secret, the password of a broker URL. Views into the plan; nsecrets of them. */
    struct sq_str *secrets;
    size_t nsecrets;
};

/* A load error: where, which key, what was expected. */
struct sq_plan_error {
    char file[256];
    struct sq_loc loc;
    char key[96];  /* the key path: "scenarios.shoppers.flow[0].request.url" */
    char msg[320]; /* "unknown key 'metod' (did you mean 'method'?)" */
};

/* Loads and compiles the plan at path. Returns 0, or -SQ_EPARSE / -SQ_EUSAGE (err filled:
 * sq_plan_error_format() prints it as file:line:col: key: msg), -errno when the file cannot be
 * read, -ENOMEM. */
SQ_MUST_CHECK int sq_plan_load(const char *path, struct sq_plan **out, struct sq_plan_error *err);
/* The same from a string (tests); name is used as the file name in errors, and relative paths
 * resolve against its directory (the working directory when it has none). */
SQ_MUST_CHECK int sq_plan_load_string(const char *name, const char *yaml, size_t len,
                                      struct sq_plan **out, struct sq_plan_error *err);
/* A plan given as text (pasted into the daemon, sent to its API): name is what errors and the
 * result call it ("plan.yaml:3:5: ..."), and relative `file:` bodies and feeder paths resolve
 * against base_dir; with base_dir NULL they are refused at their line:col ("'data.csv' is a
 * relative path, and this plan was given as text with no directory to resolve it against: use
 * an absolute path"), and an absolute `script:` is not opened (the faces that load plans so,
 * the daemon and MCP, refuse any script: whether its file exists is not theirs to tell).
 * Returns what sq_plan_load returns. */
SQ_MUST_CHECK int sq_plan_load_text(const char *name, const char *text, size_t len,
                                    const char *base_dir, struct sq_plan **out,
                                    struct sq_plan_error *err);
void sq_plan_free(struct sq_plan *p);

/* The samples of a step's metrics are kept per slot (result/result.h, struct sq_step_mval): one
 * per metric: entry of the step, then, for a step with a before: or after: hook, one per metric
 * of the plan for what the hook adds (ctx:metric). How many slots a step has, and the plan
 * metric slot j counts for: */
static inline uint32_t sq_plan_step_nslots(const struct sq_plan *p, const struct sq_plan_step *ps)
{
    return ps->nmetrics + (ps->before || ps->after ? (uint32_t)p->nmetrics : 0);
}
static inline uint32_t sq_plan_slot_metric(const struct sq_plan_step *ps, uint32_t j)
{
    return j < ps->nmetrics ? ps->metrics[j].metric : j - ps->nmetrics;
}

/* Whether a step of group path `group` ("checkout::pay", NULL outside any group) belongs to the
 * group whose path is name[0, len): that group itself or a group inside it. One rule for the
 * result's `groups` figures and the threshold tag `group:`. */
bool sq_plan_in_group(const char *group, const char *name, size_t len);

/* "plan.yaml:12:7: scenarios.shoppers.flow[0].request: unknown key 'metod' (did you mean
 * 'method'?)" into buf. */
void sq_plan_error_format(const struct sq_plan_error *e, char *buf, size_t len);

/* What `squall validate` prints: target, feeders, each scenario with its executor, load shape
 * and steps (method, url template, checks, extractors), thresholds. */
void sq_plan_describe(const struct sq_plan *p, FILE *out);

#endif
