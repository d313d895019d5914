/* engine/run.h - one run of the engine: its configuration and its lifecycle.
 *
 * sq_run() splits the connections (and a request total, if any) across worker threads, lets
 * each worker drive its own connections on its own event loop with its own metric shard, and
 * merges the shards when every worker has stopped. Nothing is shared on the hot path.
 *
 * What a run measured, struct sq_result, is the result model's (result/result.h, included
 * here): readers of results include that header alone and need nothing of the load path.
 */
#ifndef SQ_ENGINE_RUN_H
#define SQ_ENGINE_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "engine/capture.h"
#include "net/sock.h"
#include "plan/exec.h"
#include "proc/watch.h"
#include "result/result.h"

struct sq_hist;
struct sq_flow_vu;
struct sq_h2_req;
struct sq_tls_client;
struct sq_quic_client;
struct sq_egress;
struct sq_bus_config;
struct sq_capture;
struct sq_script;
struct sq_run_ctl;

/* What the run's stop flag (struct sq_run_config.stop) asks. */
enum {
    SQ_STOP_NONE = 0,
    /* Stop starting work; what is in flight may finish for the executor's graceful stop, at
     * most SQ_STOP_GRACE_MAX_NS (a signal, an abortOnFail threshold). */
    SQ_STOP_GRACEFUL = 1,
    SQ_STOP_NOW = 2, /* leave at once; what is in flight stays in flight */
};
#define SQ_STOP_GRACE_MAX_NS (5LL * 1000 * 1000 * 1000)

#define SQ_MAX_ADDRS 16

/* Called on the main thread as each second of the run completes. h is that second's merged
 * latency histogram (borrowed, valid during the call); hu the uncorrected one or NULL. */
typedef void (*sq_tick_cb)(void *ud, const struct sq_second *s, const struct sq_hist *h,
                           const struct sq_hist *hu);

#define SQ_STEP_LIVE_CHECKS  16
#define SQ_STEP_LIVE_METRICS 8
/* One step of a plan run as it stands after a second (cfg->on_tick_steps): its requests,
 * failures and statuses so far (cumulative: every worker's figures at its last published
 * second), and that second's latencies. */
struct sq_step_live {
    uint64_t reqs, failed, errors; /* as struct sq_step_stats counts them */
    uint32_t nstatus;
    struct {
        uint16_t status;
        uint64_t n;
    } by_status[SQ_STEP_STATUSES]; /* the first statuses seen */
    const struct sq_hist *h;       /* this second's responses, µs (NULL: a think step) */
    /* the step's checks so far, passed and failed: its first SQ_STEP_LIVE_CHECKS (nchecks is
     * how many the step has; those past the cap are not carried) */
    uint32_t nchecks;
    struct {
        uint64_t pass, fail;
    } checks[SQ_STEP_LIVE_CHECKS];
    /* the step's own-metric samples so far (struct sq_step_mval without the histogram): its
     * first SQ_STEP_LIVE_METRICS slots (nmvals is how many the step has) */
    uint32_t nmvals;
    struct {
        uint64_t n, nonzero;
        double sum, last;
        int64_t last_ns;
    } mvals[SQ_STEP_LIVE_METRICS];
};
/* Called on the main thread right after on_tick (plan runs): v[g] for every step g of every
 * scenario, in sq_result.step_series' order (borrowed, valid during the call). */
typedef void (*sq_tick_steps_cb)(void *ud, const struct sq_step_live *v, uint32_t n);

/* Called on the main thread with a sampled exchange (cfg->on_xsample_live). */
struct sq_xsample;
typedef void (*sq_xsample_live_cb)(void *ud, const struct sq_xsample *x);

/* Called on the main thread right before on_tick (cfg->on_tick_fine): that second's 100 ms
 * bins (the series_100ms figures: completed, failed, the largest latency), every worker's added
 * up: v[0..n) of bin_ns each from t0_s seconds after the start, cut at the second's end
 * (borrowed for the call). n is 0 once the workers' bins are wider than SQ_LIVE_FINE_MAX_NS
 * (past 20 minutes: engine/worker.c folds them) or for a second past the bins' span. */
#define SQ_LIVE_FINE        10                   /* bins a second, at most: 1 s / SQ_FINE_BIN_NS */
#define SQ_LIVE_FINE_MAX_NS (2 * SQ_FINE_BIN_NS) /* the widest bin handed over live */
typedef void (*sq_tick_fine_cb)(void *ud, const struct sq_fine_bin *v, uint32_t n, int64_t bin_ns,
                                double t0_s);

/* Called on the writer thread with a batch of records (borrowed for the call). */
typedef void (*sq_samples_cb)(void *ud, const struct sq_sample *v, size_t n);

struct sq_flow;
struct sq_tmpl;

/* A WebSocket run (ws://, wss://; cfg->ws set, the quick face). Every VU is one connection
 * opened with an HTTP/1.1 upgrade (engine/wsdrv.c); a request is one message out, and it
 * completes with the next whole message the server sends back after it (latency: from the send
 * to that message's last byte). The message is cfg->request (static), or `message` rendered per
 * send when it has dynamic parts. */
struct sq_ws_run {
    const char *host;     /* the Host header value */
    const char *path;     /* the request target of the upgrade ("/ws?room=1") */
    const char *headers;  /* more header lines for the upgrade, each ending in CRLF, or NULL */
    const char *protocol; /* Sec-WebSocket-Protocol to offer (a list), or NULL */
    bool binary;          /* send binary frames (default: text) */
    const struct sq_tmpl *message; /* dynamic message (plan/tmpl.h), else NULL */
    int64_t ping_ns;               /* > 0: each open connection pings every ping_ns */
    uint64_t max_message;          /* largest message accepted back; 0: 1 MiB */
};

/* One scenario of a plan run: its own executor, start offset and flow (engine/flow.h). */
struct sq_run_scen {
    const char *name;
    struct sq_exec exec; /* prepared */
    int64_t start_ns;    /* offset from the run's common start */
    const struct sq_flow *flow;
    bool h2; /* over HTTP/2 (`protocol: h2`, --http2): its VUs are stream slots, `streams` of
                them per connection (the run's streams, at least 1); the flow sq_flow_use_h2'd */
    bool h3; /* with h2: over HTTP/3 (`protocol: h3`, --http3), QUIC with cfg->h3's settings */
    /* Optional: called on the worker's thread when one of its VUs ends an iteration (not when
     * one is interrupted), with that VU's state (its variables); stopped: it ended early
     * (on_error: next_iteration). The setup: flow hands its values over this way (face/). */
    void (*on_iter_end)(void *ud, const struct sq_flow_vu *v, bool stopped);
    void *iter_ud;
};

/* One URL of the quick face's --urls list: its request serialised once (and prepared for
 * nghttp2 over HTTP/2). Every URL of a run shares the scheme, host and port. */
struct sq_run_url {
    const char *request; /* HTTP/1.1 bytes, shared read-only */
    size_t request_len;
    bool head;                  /* a HEAD request: its responses carry no body */
    const struct sq_h2_req *h2; /* HTTP/2 runs: the same request for nghttp2; else NULL */
    uint16_t origin;            /* with sq_run_config.origins: the origin it is sent to */
};

/* --urls on several hosts (plain HTTP/1.1): each connection belongs to one origin for its
 * whole life (connection g to origins[g % norigins], round-robin over that origin's addresses)
 * and sends only that origin's URLs, so a connection never carries a request for another host
 * and the pools stay apart. */
struct sq_run_origin {
    struct sq_addr addrs[SQ_MAX_ADDRS];
    int naddrs;
};

struct sq_run_config {
    struct sq_addr addrs[SQ_MAX_ADDRS]; /* connections use them round-robin */
    int naddrs;
    const char *request; /* serialised once, shared read-only by every connection */
    size_t request_len;
    bool head_request; /* responses carry no body */
    /* The quick face's HTTP/1.1 body as a template with dynamic parts ({{$stamp}}...), else
     * NULL (the static request above). Then `request` is the head, whose Content-Length value
     * (one digit) is at request[body_cl]: each request is that head with the rendered body's
     * length in its place, then the body, written into the connection's own buffer. */
    const struct sq_tmpl *body_tmpl;
    size_t body_cl;
    uint32_t threads; /* workers; capped at the connections the executor needs */
    /* --cpus: worker i pins itself to cpus[i % ncpus] when it starts (best effort: a refusal
     * leaves it unpinned, and the result's worker_cpu says -1). ncpus 0: no pinning. */
    const uint16_t *cpus;
    uint32_t ncpus;
    struct sq_exec exec;        /* prepared with sq_exec_prepare() */
    int64_t timeout_ns;         /* per request, from its send */
    int64_t connect_timeout_ns; /* per connect attempt */
    volatile int *stop;         /* optional: SQ_STOP_GRACEFUL or SQ_STOP_NOW ends the run */
    sq_tick_cb on_tick;         /* optional: progress, interval logs */
    void *tick_ud;
    /* optional, plan runs (tick_ud too): the steps so far, once a second (the daemon's live
     * tables). Without it the workers copy nothing. */
    sq_tick_steps_cb on_tick_steps;
    /* optional (tick_ud too): the second's 100 ms bins, once a second (the daemon's 100 ms
     * view). Without it the workers copy nothing. */
    sq_tick_fine_cb on_tick_fine;
    sq_samples_cb on_samples; /* optional: per-request records */
    void *samples_ud;
    double sample_fraction; /* with on_samples: the share of requests recorded, (0, 1] */
    /* https: the TLS client context (net/tls.h), shared read-only by every worker; NULL for
     * plain http. Each worker keeps its own session cache, so reconnects resume. */
    struct sq_tls_client *tls;
    bool phases; /* record per-phase timings (--no-phases turns them off) */
    /* Optional: resolve the target again every dns_ttl_ns while the run goes (new connections
     * use the fresh addresses; a failed lookup counts a `dns` error and keeps the old ones).
     * Called on the main thread; returns the number of addresses or a negative code. */
    int64_t dns_ttl_ns;
    int (*resolve)(void *ud, struct sq_addr *out, int max);
    void *resolve_ud;
    int64_t dns_ns; /* how long resolving the target took (once per run, before it) */
    /* The run's egress policy (net/egress.h): every connect() of the run asks it first, on the
     * address itself (once per connection, never per request). NULL (a CLI run): no check, one
     * pointer test. Borrowed; sq_net_setup sets it from the face's options. */
    const struct sq_egress *egress;
    /* Through an HTTP proxy (--proxy, HTTPS_PROXY...: face/netopts.c): addrs are the proxy's,
     * and each connection to them first sends these bytes ("CONNECT host:port HTTP/1.1" and
     * its head, Proxy-Authorization included) and reads the proxy's answer, a 2xx head, before
     * TLS or the protocol's bytes (engine/xport.c). NULL: no tunnel (no proxy, or plain http
     * in absolute-form, whose request carries the proxy's part itself). Borrowed. */
    const char *proxy_connect;
    size_t proxy_connect_len;
    /* Source addresses (net/srcaddr.h: --source-addrs, or 127.0.0.1, 127.0.0.2... spread by
     * the face on loopback): connection g binds src_addrs[g % nsrc] before connect() when its
     * family is the destination's (else the kernel picks, as with nsrc 0). Borrowed. */
    const struct sq_addr *src_addrs;
    uint32_t nsrc;
    /* --connect-rate: connections opened per second at most, the run's workers together (each
     * keeps its share: rate / workers), while the pool opens and when a connection is
     * replaced; a connect waits its turn (CONN_QUEUED). 0: as fast as they come. */
    double connect_rate;
    /* Plan runs: the scenarios, run concurrently (each with min(threads, its VUs) workers).
     * NULL for the quick face, which runs exec with the static request above. */
    const struct sq_run_scen *scens;
    uint32_t nscens;
    /* HTTP/2 (the quick face's --http2; not with scens): the request prepared once for nghttp2,
     * NULL for HTTP/1.1. The executor's VUs are then stream slots: each connection carries
     * `streams` of them (>= 1), so a run opens ceil(VUs / streams) connections
     * (sq_run_connections). */
    const struct sq_h2_req *h2_request;
    uint32_t streams;
    /* HTTP/3 (--http3, with h2_request: the same prepared request, its fields handed to nghttp3):
     * QUIC to the run's addresses over UDP with these TLS settings (net/quic.h), `streams` VUs
     * per connection as over HTTP/2 (engine/h3drv.c). NULL: not HTTP/3. Borrowed. */
    const struct sq_quic_client *h3;
    /* Event buses (engine/busconf.h: NATS or MQTT, the quick face's nats:// and mqtt:// URLs; not
     * with scens): what to publish and how; NULL for HTTP. The executor's VUs are then window
     * slots: each connection carries bus->window of them (sq_run_connections). */
    const struct sq_bus_config *bus;
    /* The run id that {{$stamp}} carries (proto/stamp.h), 0: one is drawn at random. Worker w's
     * stamps carry run_id + w (its stream: SQ_STAMP_STREAM_BITS below). */
    uint64_t run_id;
    /* The seed of the run's random values (plan/tmpl.h: {{$randomUUID}}, {{$randomInt}}, random
     * feeders, Lua's math.random), in [0, SQ_SEED_MAX]: VU v draws from
     * sq_tmpl_rng_init(seed, v) (v global, as {{$vu}} in a plan). seed_set false: sq_run draws
     * one from the OS (sq_run_new_seed). The result says which was used (sq_result.seed). */
    uint64_t seed;
    bool seed_set;
    /* Distributed runs (cluster/). seg: run only this execution segment of every executor
     * (plan/exec.h): its share of the VUs, shared iterations and in-flight cap, and the global
     * arrivals dealt to it, each at its global time; VU numbers ({{$vu}}) stay global. A
     * scenario whose share has no VU gets no worker. NULL: the whole.
     * start_at: once every pool is open the run calls on_ready(ready_ud) (optional) once, then
     * starts at the CLOCK_MONOTONIC time another thread stores into *start_at with an atomic
     * store (0: not known yet), or at once when that time has passed. NULL: at once. */
    const struct sq_seg *seg;
    int64_t *start_at;
    void (*on_ready)(void *ud);
    void *ready_ud;
    /* Plans that mix HTTP/1.1 and HTTP/2 scenarios over https: the TLS client of the h2 ones
     * (ALPN h2), tls being the others'. NULL: every connection uses tls. */
    struct sq_tls_client *tls_h2;
    /* The quick face's --urls: the requests, sent round-robin (each worker takes the next URL
     * for each request it starts); request above is the first one's. NULL: one request. */
    const struct sq_run_url *urls;
    uint32_t nurls;
    /* Optional, with urls: their origins when there are several (each with a URL at least);
     * norigins 0: every connection goes to addrs. Not with --dns-ttl, a proxy or TLS. */
    const struct sq_run_origin *origins;
    uint32_t norigins;
    /* Optional: exchanges (request and response heads, the start of each body) handed to a
     * per-worker hook (engine/capture.h: --verbose, --http-debug). NULL costs nothing. */
    const struct sq_capture *capture;
    /* Sampled exchanges (--sample-responses): at most this many kept per class (the result's
     * struct sq_xsamples, result/result.h; engine/capture.c draws them); 0: none, nothing paid. */
    uint32_t sample_per_class;
    /* Optional, with sample_per_class (tick_ud too): the failures' first sampled exchanges, live
     * (the daemon's failures panel). Called on the main thread before on_tick with each one a
     * worker handed over: its first of a failure class (4xx, 5xx, an error kind), redacted as
     * the reservoir's (borrowed for the call). At most one per class per worker, ever. */
    sq_xsample_live_cb on_xsample_live;
    /* Credentials in what the two above keep (base/redact.h): redacted when an exchange is
     * captured, before any hook or writer sees it, unless no_redact (--no-redact, a plan's
     * `redact: false`). Credential fields by name; secrets (borrowed, nsecrets of them: values
     * known before the run, such as the quick face's -H credential values) by value anywhere;
     * a plan VU adds its flow's (sq_flow_secrets). Nothing is paid for an exchange not kept. */
    bool no_redact;
    const struct sq_str *secrets;
    size_t nsecrets;
    /* Optional (--watch, --watch-name): processes sampled from /proc at the start, at each second
     * and at the end, on the main thread (proc/watch.h). Owned by the caller; sq_run starts it.
     * The figures land in each second's `server` and in the result's `server`. */
    struct sq_watch *watch;
    /* wrk-style scripts (squall wrk, the quick face's -s; HTTP/1.1, not with scens): one Lua
     * state per worker, prepared by face/wrkscript.h. NULL: no script. */
    const struct sq_run_script *script;
    /* Record each worker's requests per second every 100 ms into sq_result.rate (wrk's
     * Req/Sec figures and done()'s `requests`). */
    bool rate_samples;
    /* WebSocket (the quick face's ws:// and wss:// URLs; not with scens): NULL otherwise. */
    const struct sq_ws_run *ws;
    /* Optional (engine/control.h): another thread changes the run through it while it goes
     * (not with seg). Borrowed; NULL costs the workers one pointer test per loop turn. */
    struct sq_run_ctl *ctl;
};

/* A stamp's run field is the run id with the worker (the stream) in its low bits: each worker
 * numbers its own events 0, 1, 2... so a sink finds gaps per stream without any shared
 * counter on the hot path. */
#define SQ_STAMP_STREAM_BITS 12

/* A fresh run id for stamps (52 random bits, the low SQ_STAMP_STREAM_BITS zero): what sq_run
 * draws when cfg->run_id is 0; a caller that must know it before the run (a sink beside it)
 * draws it first. */
uint64_t sq_run_new_id(void);

/* A fresh seed for a run's random values (struct sq_run_config.seed): SQ_SEED_MAX's 53 bits
 * from getrandom (the clock and the process mixed, should the kernel refuse). */
uint64_t sq_run_new_seed(void);

/* A stamp's run field as the stamp writes it (Crockford base32, lowercase), NUL-terminated, in
 * out (14 bytes). */
void sq_stamp_run_text(uint64_t run, char *out);

/* A wrk-style script as a run uses it: per worker (sq_run_workers(cfg) of them) its state, its
 * static request and the address setup() gave its thread. Borrowed for the run. */
struct sq_run_script {
    struct sq_script *const *states;
    const struct sq_addr *addrs; /* per worker; NULL: the run's addresses */
    uint32_t n;
};

/* Connections a run opens for `vus` VUs: one each over HTTP/1.1, one per `streams` over
 * HTTP/2. */
uint32_t sq_run_connections(const struct sq_run_config *cfg, uint32_t vus);

/* The worker threads sq_run(cfg) starts: per scenario, cfg->threads but never more than the
 * connections its executor needs (what a run's result reports as threads). */
uint32_t sq_run_workers(const struct sq_run_config *cfg);

/* The client's verdict on itself: a worker this busy, or an open loop this far behind its
 * schedule, means the figures measure squall rather than the server (sq_client_judge). */
#define SQ_CLIENT_BUSY      0.95
#define SQ_CLIENT_BUSY_SECS 3                    /* ... in this many whole seconds */
#define SQ_CLIENT_BEHIND_NS (50 * 1000 * 1000LL) /* overdue arrivals at a tick */
#define SQ_CLIENT_DROPS     0.01                 /* open loop: this share of arrivals dropped */

/* Sets c->saturated and c->saturation from the workers' figures: closed loop, a worker busy at
 * least SQ_CLIENT_BUSY of the run (once it ran 200 ms) or in SQ_CLIENT_BUSY_SECS whole seconds;
 * open loop (whose workers busy-wait before each arrival on purpose, so busy alone says
 * nothing), an arrival overdue by SQ_CLIENT_BEHIND_NS at a tick, or a worker that dropped at
 * least SQ_CLIENT_DROPS of its arrivals while busy SQ_CLIENT_BUSY, over the run (once it ran
 * 200 ms) or in SQ_CLIENT_BUSY_SECS whole seconds: a client short of CPU reads its responses
 * late, its in-flight cap stays full, and it drops arrivals rather than falling behind. */
void sq_client_judge(struct sq_client_stats *c, bool open);

/* Runs to completion. Returns 0 (the result is filled in, even when every request failed), or a
 * negative code when the run could not start (threads, memory, file limit); *why then says so. */
SQ_MUST_CHECK int sq_run(const struct sq_run_config *cfg, struct sq_result *out, const char **why);

#endif
