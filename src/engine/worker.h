/* engine/worker.h - one worker thread: its event loop, its connections, its metric shard.
 * Internal to engine/: run.c creates, starts, joins and merges workers. */
#ifndef SQ_ENGINE_WORKER_H
#define SQ_ENGINE_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/assert.h"
#include "base/buf.h"
#include "engine/capture.h"
#include "engine/control.h"
#include "engine/run.h"
#include "engine/xport.h"
#include "http/h1.h"
#include "http/sse.h"
#include "loop/loop.h"
#include "net/tls.h"
#include "proto/stamp.h"

struct sq_loop;
struct sq_hist;
struct sq_engine__conn;
struct sq_flow;
struct sq_flow_vu;
struct sq_decoder;
struct sq_engine__driver; /* engine/driver.h: the protocol seam */
struct sq_ws_ctx;

/* One VU of a worker (worker.c). Over HTTP/1.1 (h1drv.c) and WebSocket (wsdrv.c) it is also a
 * connection: its transport (x), reader and all. Over HTTP/2 (h2drv.c) and a bus it is one slot
 * of a shared connection that the driver owns: x stays closed (fd -1), the state says where the
 * VU is, and rd carries the finished response's status and sizes so the accounting is the same
 * code. */
enum conn_state {
    CONN_CLOSED,
    CONN_BACKOFF,    /* waiting to reconnect after a failed connect */
    CONN_QUEUED,     /* waiting for its turn to connect (--connect-rate, xport.c) */
    CONN_CONNECTING, /* non-blocking connect in progress */
    CONN_HANDSHAKE,  /* connected, TLS handshake in progress */
    CONN_IDLE,       /* open, no request in flight */
    CONN_PACING,     /* open, waiting for the VU's next iteration start (closed model) */
    CONN_ACTIVE,     /* a request is in flight (maybe still being written) */
    CONN_THINK,      /* open, a flow's think step (plan runs) */
    CONN_WAIT,       /* open, a flow's publish or subscribe step is out (engine/flowbus.c) */
    CONN_DELAY,      /* open, waiting out a wrk script's delay() before its next request */
    CONN_BATCH,      /* open, a flow's batch is out on the VU's lanes (worker.c) */
};

/* A wrk script with response(): the response kept for it (the head with its fields, and the
 * body up to SQ_ENGINE_CAPTURE_CAP). Buffers keep their memory between responses. */
struct sq_engine__capture {
    struct sq_buf head, body;
    struct sq_buf fields; /* struct sq_resp_header, spans into head */
    size_t nfields;
};
#define SQ_ENGINE_CAPTURE_CAP (64u << 20)

struct sq_engine__conn {
    /* Laid out without holes: the pool holds one per VU (10,000 VUs: 10,000 of these), so each
     * byte here is a byte per connection (bench/connmem.py prints them). */
    struct sq_engine__xport x; /* its own transport (engine/xport.h): socket, TLS, setup; its
                                  connect_ns and tls_ns: this connection's setup phases */
    struct sq_engine__worker *w;
    int64_t since_ns; /* ACTIVE: intended send (open) or send (closed); HANDSHAKE over
                         WebSocket: when the upgrade was written */
    int64_t sent_ns;  /* ACTIVE: the actual send */
    /* One or the other, never both in one worker: pacing is refused with arrival rates
     * (plan/exec.c, the quick face's flags) and w->rxts is set only for them (worker.c). */
    union {
        int64_t iter_ns; /* paced VU: when its current iteration was scheduled to start */
        int64_t rx_ns;   /* w->rxts: the kernel's receive time of the last read, 0: none */
    };
    int64_t tmo_ns;   /* ACTIVE: this request's timeout */
    int64_t wdone_ns; /* ACTIVE: the request's last byte was written (0: not yet) */
    int64_t fb_ns;    /* ACTIVE: the response's first byte arrived (0: not yet) */
    uint64_t iters;   /* per-vu-iterations: iterations this VU may still start */
    const char *req;  /* ACTIVE: the request being sent (shared static bytes, or the VU's) */
    uint32_t req_len;
    uint32_t woff;    /* bytes of the request written so far */
    uint32_t pending; /* ACTIVE: responses still due (more than 1: a pipelined batch) */
    uint32_t local;   /* index in the worker: VU number, idle stack entry */
    uint32_t global;  /* global connection number, picks the address */
    uint8_t state;
    uint8_t backoff;
    bool head;             /* ACTIVE: a HEAD request (its response has no body) */
    bool in_idle;          /* on the worker's idle stack (open model) */
    bool growing;          /* opened to grow the pool, not yet idle once (open model) */
    bool fresh;            /* no request has completed on this connection yet */
    bool decoding;         /* the current response's body goes through dec */
    bool streaming;        /* the current response is a text/event-stream */
    bool delayed;          /* wrk scripts: delay() was called for the request about to leave */
    bool lane;             /* a batch's lane: a connection of a VU's, not a VU (worker.c) */
    uint16_t url;          /* ACTIVE with --urls: the URL's index */
    struct sq_flow_vu *fv; /* plan runs: the VU's flow state, else NULL */
    struct sq_timer timer; /* reconnect backoff, or pacing */
    struct sq_h1_reader rd;
    struct sq_engine__xc *xc; /* the run captures exchanges (engine/capture.h); else NULL */
};

/* What only some runs or some responses need of a VU, beside the VU array rather than in it
 * (w->vux[c->local], sq_engine__vux): the array is allocated zeroed for every run, and a page of
 * it is touched only where a VU uses one of these, so a plain run's connections do not carry
 * them (bench/connmem.py counts the bytes per connection). */
struct sq_engine__vux {
    struct sq_sse sse;      /* the current response is a text/event-stream (c->streaming) */
    int64_t first_event_ns; /* streaming: when its first event completed (0: none yet) */
    char *own;              /* a request() string copied when its write was short; the quick
                               face's templated request (cfg->body_tmpl) */
    size_t own_cap;
    uint64_t body_iter; /* cfg->body_tmpl: this VU's requests so far ($iteration) */
    uint64_t rng;       /* the quick face's templates (body, WebSocket message, bus payload): this
                           VU's random stream, sq_tmpl_rng_init(seed, its global VU number), drawn
                           at its first use (0: not yet; the stream is never 0) */
    struct sq_decoder *dec; /* created on the first compressed response (c->decoding) */
    /* ACTIVE over HTTP/2 or 3: the request for nghttp2 when it is not cfg->h2_request (a flow's
     * step, one of --urls); NULL otherwise */
    const struct sq_h2_req *h2req;
    /* wrk scripts whose response() is defined (w->shooks & SQ_SCRIPT_RESPONSE): the response
     * kept for it */
    struct sq_engine__capture *cap;
};

/* A VU's exchange capture buffer (capture.c): the response of the request in flight, as it
 * arrives (--verbose, --http-debug; not the wrk scripts' struct sq_engine__capture). */
struct sq_engine__xc {
    bool on;      /* this exchange is being captured (buf holds what came so far) */
    bool in_body; /* the head is complete: what arrives now is body */
    bool head_cut;
    bool pooled;  /* buf is borrowed from the worker's sample pool (returned at the end) */
    int32_t pick; /* sampled: 1 + the reservoir slot its status class drew at the head; 0: none
                     (zero, so that a VU never drawn never writes its record) */
    uint32_t head_len, body_len;
    uint64_t body_total;
    int64_t head_ns; /* when the head completed (its first byte: the reader's fb_ns) */
    char *buf;       /* SQ_CAPTURE_HEAD_MAX head bytes, then the body's first bytes; NULL: none */
};

/* A worker's reservoir for one class of sampled exchanges (capture.c). */
struct sq_engine__xres {
    uint64_t seen;
    uint64_t next; /* full: the seen count of the next replacement (algorithm L) */
    double wgt;
    uint32_t n;              /* kept: slots [0, n) hold one */
    struct sq_xsample *slot; /* per_class of them */
};

/* A worker's first sampled exchange of a failure class, for cfg->on_xsample_live (capture.c):
 * state 0 empty, 1 written by the worker (release), 2 taken by the main thread (the worker
 * never writes it again). The worker writes x only while the state is 0; the main thread reads
 * and frees it only once it loaded 1 (acquire). */
struct sq_engine__xlive {
    uint32_t state;
    struct sq_xsample x;
};

/* What a worker publishes for the run's watchdog: written by the worker with relaxed atomic
 * stores at each sweep (10 per second), read by the main thread with relaxed loads. */
struct sq_engine__live {
    uint64_t progress;       /* completed + failed */
    uint64_t opened;         /* successful connects */
    uint64_t connect_errors; /* failed connect attempts */
    int last_connect_err;    /* -errno of the latest failed connect */
    uint64_t tls_errors;     /* failed handshakes and other TLS errors */
    int tls_err_set;         /* tls_err (in the worker) is written: release store, once */
    uint64_t bus_errors;     /* the broker refused the connection or the session */
    int bus_err_set;         /* bus_err (in the worker) is written: release store, once */
    uint64_t upgrade_errors; /* failed WebSocket upgrades */
    int up_err_set;          /* up_err (in the worker) is written: release store, once */
    uint64_t proxy_errors;   /* refused or broken proxy CONNECTs */
    int proxy_err_set;       /* proxy_err (in the worker) is written: release store, once */
    int ready;               /* every connection of the pool has connected or failed once */
    int script_failed;       /* a script hook raised: script_err is written (release store) */
    int done;                /* the worker has left its loop */
    /* no slot for a second <= sealed will come any more (release store, worker only): see
     * SQ_FOLD_NS */
    uint32_t sealed;
};

/* The target's addresses when the run re-resolves them: a seqlock the main thread writes and
 * workers read at connect time. Every access is atomic, so a reader can never see a torn
 * address: it retries while a write is in progress or happened under it. */
#define SQ_ADDR_WORDS ((sizeof(struct sq_addr) + 7) / 8)
struct sq_engine__addrs {
    uint32_t seq; /* odd while the main thread writes */
    uint32_t n;
    uint64_t w[SQ_MAX_ADDRS][SQ_ADDR_WORDS];
};

void sq_engine__addrs_store(struct sq_engine__addrs *t, const struct sq_addr *a, int n);
/* Copies address idx % n into *out. */
void sq_engine__addrs_load(const struct sq_engine__addrs *t, uint32_t idx, struct sq_addr *out);

/* Control of a running run (engine/control.h), per scenario. The controlling thread appends to
 * segs and then stores nsegs (release), sets vus and paused, and last bumps gen (release); a
 * worker loads gen once per turn of its loop and, when it moved, the rest (acquire). Open loop:
 * from segs[k].t0 on (ns after the scenario's start) arrivals come at rate r per ns, arrival i
 * due at t0 + (i - c0) / r (none while r is 0); total is the schedule's arrivals after it. */
struct sq_engine__ctlseg {
    int64_t t0;
    double c0, r;
    uint64_t total;
};
struct sq_engine__ctlscen {
    uint32_t gen, nsegs;
    int64_t vus; /* closed loop: the VUs asked for; -1: the executor's */
    int paused;
    struct sq_engine__ctlseg segs[SQ_CTL_MAX_CHANGES];
    /* the controlling thread's own */
    const struct sq_exec *ex;
    int64_t offset_ns;
    double rate_ns; /* open loop: the rate set (per ns), what a resume goes on with; 0: none */
    uint32_t peak;  /* closed loop: the VUs opened */
    bool open;
};

/* When arrival i (global) is due under the changed schedule segs[0, n) (n > 0), ns after the
 * scenario's start; INT64_MAX while paused. */
int64_t sq_engine__ctl_arrival_ns(const struct sq_engine__ctlseg *segs, uint32_t n,
                                  const struct sq_exec *ex, uint64_t i);
struct sq_engine__shared;
/* run.c: the run takes the control (before its workers start), and gives it back after they
 * stopped, with the changes made into out->controls. */
SQ_MUST_CHECK int sq_engine__ctl_bind(struct sq_run_ctl *c, struct sq_engine__shared *run);
SQ_MUST_CHECK int sq_engine__ctl_unbind(struct sq_run_ctl *c, struct sq_result *out);

/* What every worker shares with the run, read-only for workers except through atomics. */
struct sq_engine__shared {
    struct sq_engine__addrs addrs; /* used when cfg->dns_ttl_ns > 0 */
    const struct sq_run_config *cfg;
    uint32_t nworkers;
    int abort;       /* set by the main thread: leave now */
    int64_t wind_ns; /* set by the main thread: stop starting work from then (SQ_STOP_GRACEFUL) */
    int64_t go_ns;   /* the common start, 0 until every worker is ready */
    uint64_t run_id; /* what stamps carry (cfg->run_id, or drawn) */
    uint64_t seed;   /* the random values' seed (cfg->seed, or drawn) */
    int64_t spin_ns; /* busy-wait tail before an arrival (open model) */
    struct sq_engine__ctlscen *ctl; /* per scenario (cfg->ctl), else NULL */
};

/* Interval shards: the worker records each second's latencies into its current slot, and at
 * each second's end publishes the slot (with a copy of its cumulative counters) and moves to the
 * next. Slots [rd, wr) await the main thread, which merges and resets them; the worker owns
 * slot wr % SQ_SLOTS. Single producer, single consumer: wr is written by the worker, rd by the
 * main thread, each with release and read with acquire. No lock, no copy of a histogram. */
#define SQ_SLOTS 4

/* A worker that ends less than this after a tick folds its last sliver into the second that
 * tick closed (worker.c, the run's end), so the main thread holds that second back from
 * cfg->on_tick until each worker still running has sealed it (live.sealed): it has seen its
 * clock pass the tick plus this, so its end can no longer fold into it. Without the wait the
 * sliver reached the result's series but never the streams fed by on_tick. */
#define SQ_FOLD_NS (SQ_NS_PER_S / 10)

struct sq_engine__slot {
    struct sq_hist *hist, *hist_unc;
    struct sq_counters c; /* the worker's cumulative counters when the slot closed */
    uint64_t arrivals;    /* open loop: its arrivals due so far (c.dropped: those dropped) */
    uint64_t active;      /* active VUs (closed) or in flight (open) when it closed */
    uint32_t second;      /* 1-based: the second of the run this slot ends */
    int64_t end_ns;
    struct sq_hist **step_h;        /* plan runs: per step of the flow, its responses' latency (NULL
                                       for think steps) */
    struct sq_step_live *step_live; /* cfg->on_tick_steps: per step, the worker's counts at the
                                       slot's close (h unused); else NULL */
    struct sq_msecond *mcum; /* plan runs with metrics: declared (nm of them): per plan metric,
                                the worker's samples so far at the slot's close (every step's
                                slots for it added up), mcum[0, nm); then per step k of the
                                flow, its own, mcum[nm + k * nm + m] (the streamed outputs'
                                tags); else NULL */
    /* The worker's own cost from the common start to end_ns (engine/client.c), and at this
     * tick: how late it ran, and (open loop) how overdue the next arrival was. */
    int64_t cpu_ns, wait_ns;
    int64_t poll_ns;  /* of cpu_ns, polling for responses (wait_io): not judged busy */
    int64_t sleep_ns; /* in waits that could block: the loop's and the deaf sleeps */
    int64_t lag_ns, behind_ns;
    /* cfg->on_tick_fine: the 100 ms bins of the second the slot ends (copied from w->fine when
     * it closes: bins before it are final), nfine of them of fine_ns each; 0: none */
    struct sq_fine_bin fine[SQ_LIVE_FINE];
    uint32_t nfine;
    int64_t fine_ns;
};

struct sq_engine__worker {
    pthread_t tid;
    const struct sq_run_config *cfg;
    const struct sq_exec *ex;
    struct sq_engine__shared *run;
    uint32_t windex;      /* among every worker of the run */
    int cpu;              /* --cpus: the CPU it pinned itself to, -1: none (or refused) */
    uint32_t sindex, snw; /* among the workers of its scenario, and how many those are */
    uint32_t scen;        /* its scenario (0 for the quick face) */
    uint32_t first_vu;    /* global number of its first VU - 1 (in a segment: vu_base + the
                             segment's own index of it) */
    uint32_t vu_base;     /* VUs of the scenarios before its own */
    int64_t offset_ns;    /* the scenario's start time after the run's start */
    /* plan runs */
    const struct sq_flow *flow;
    struct sq_flow_vu *vus;      /* one per connection */
    struct sq_step_stats *steps; /* one per step of the flow */
    struct sq_hist *iter_hist;   /* iteration_duration */
    struct sq_hist **gdur;       /* group_duration per group of the scenario (NULL: it has none) */
    struct sq_hist *phase[SQ_PHASE_COUNT]; /* per-phase timings, when the run records them */
    struct sq_hist *sse_first, *sse_dur;   /* streams: created with the first one */
    struct sq_hist *connack; /* MQTT: CONNECT to CONNACK, µs (the first one makes it) */
    struct sq_ws_ctx *busws; /* MQTT over WebSocket: the frame context (busws.c, made on use) */
    void **states;           /* regex match data */
    /* A flow with a batch: each VU i has lanes_per connections of its own beside its VU
     * connection, conns[lane0 + i * lanes_per + k] (lane0: past the pool, ncap), which send the
     * batch's requests; nlanes in all, their flow states lane_fv[k - lane0]. 0: none. Drivers
     * treat a lane as any connection: they set up, sweep and close [lane0, lane0 + nlanes) as
     * they do [0, nconns). */
    uint32_t lane0, nlanes, lanes_per;
    struct sq_flow_vu *lane_fv;
    struct sq_engine__conn *lane_cur; /* the lane whose answer ends a batch, while it does */
    uint64_t in_iter;                 /* VUs inside an iteration */
    uint64_t interrupted;
    struct sq_loop *loop;
    struct sq_engine__conn *conns;
    struct sq_engine__vux *vux; /* nconns of them, zeroed (sq_engine__vux) */
    uint32_t nconns;
    bool open;           /* arrival-rate executor */
    bool ticking;        /* past the run's common start: publishing seconds */
    bool dns_done;       /* the run's resolution time has been recorded (worker 0) */
    bool started;        /* past its scenario's start */
    bool hold;           /* an idle bus run (MQTT --idle): VUs never send */
    bool sending;        /* still starting iterations */
    bool leave;          /* leave the loop */
    bool over;           /* a driver found the run over (sq_engine__past_end): leave at once */
    uint64_t quota;      /* shared-iterations: iterations this worker may still start */
    uint32_t active_vus; /* ramping-vus: how many of this worker's VUs may run */
    uint64_t in_flight;
    /* --connect-rate (xport.c): this worker's connects are pace_ns apart, the next one not
     * before pace_next_ns; pace_bypass: the connect being made is one whose turn has come. */
    int64_t pace_ns, pace_next_ns;
    bool pace_bypass;
    /* eager connects (xport.c, a VU's own transport): connects whose zero-length probe found
     * them not yet up in a row (probing stops at PROBE_MISSES but for one connect in 64), a
     * count of connects, and whether an eager open is running now (no second one inside it) */
    uint8_t probe_misses;
    bool eager;
    uint32_t probe_tick;
    /* a socket sq_engine__xport_park kept for spare_x's next connect; spare_x NULL: none (it
     * never outlives the call that parked it: sq_engine__xport_unpark) */
    struct sq_engine__xport *spare_x;
    int spare_fd;
    /* control (engine/control.h): the scenario's, the generation applied, the open loop's
     * changed schedule (nsegs pieces of ctl->segs; 0: the executor's) */
    struct sq_engine__ctlscen *ctl;
    uint32_t ctl_gen, nsegs;
    /* open model */
    uint64_t next_arrival; /* global index of this worker's next arrival */
    uint64_t total_arrivals;
    uint64_t arrivals; /* this worker's arrivals dispatched (sent + dropped) */
    /* How many requests one arrival sends where that is fixed (the quick face's static request
     * or pipelined batch, its --urls, its templated body); 0 where it varies (a flow, a
     * script's request()). Read only by worker.c's accounting asserts. */
    uint32_t per_arrival;
    int64_t *queue; /* intended times of arrivals waiting for a connection (ring) */
    uint32_t qhead, qlen, qcap;
    uint32_t *idle; /* stack of idle connection indices */
    uint32_t nidle;
    /* The pool may grow (k6's maxVUs, HTTP/1.1 only): conns[0, ncap) are set up, [0, npre)
     * opened before the start, [0, nconns) in use; an arrival that waits with no connection
     * coming for it opens conns[nconns++]. The pool never shrinks: nconns is its peak. */
    uint32_t npre, ncap, ngrowing;
    uint64_t ifcap;                /* this worker's share of max_in_flight */
    uint64_t grown;                /* connections opened to grow the pool */
    int64_t grow_first, grow_last; /* when (monotonic ns), 0 until it grows */
    /* Pacing (enum sq_pacing): the poll tail before an arrival, and the last wake-ups' overshoot
     * past the time a timed wait asked for (a ring: NORMAL learns its tail from it). */
    int precision;
    int64_t spin_ns;
    int64_t window_ns; /* COARSE: arrivals released on this grid; 0: each at its own time */
    int64_t wake_at;   /* the end of the timed wait in progress, 0 when none */
    int64_t overshoot[32];
    uint32_t nover;
    uint64_t wakes, late_wakes; /* timed waits for an arrival; those that woke past it */
    /* Precision normal, plain HTTP/1.1 quick runs: reads carry the kernel's receive time
     * (SO_TIMESTAMPNS, CLOCK_REALTIME; rt_off = realtime - monotonic at the last wake-up), so a
     * worker may sleep deaf to its sockets until an arrival and read the responses then. */
    bool rxts;
    int64_t rt_off;
    uint64_t deaf_sleeps;
    int64_t deaf_ns; /* their length, cumulative */
    /* Idle polling (worker.c wait_io): the recent waits' length (ns, a moving average), and
     * the waits that polled first, those an event (a response, a timer) ended while polling,
     * those that slept. */
    int64_t idle_gap_ns;
    int64_t idle_poll_ns; /* time spent polling, cumulative */
    uint64_t idle_polled, idle_caught, idle_slept;
    char *rbuf; /* per-worker read buffer, shared by all its connections */
    struct sq_counters c;
    uint64_t codes[SQ_STATUS_CODES]; /* responses by exact status */
    struct sq_hist *hist, *hist_unc; /* the current slot's */
    struct sq_hist **step_h;         /* the current slot's, per step (plan runs) */
    /* the 100 ms series (run.h): the bin being filled and when it ends */
    struct sq_fine_bin *fine;
    uint32_t fine_i;
    int64_t fine_ns, fine_next;
    /* exchanges (capture.c): the run's hook, a buffer per VU, what this worker already handed
     * out (one bit per status code, then one per error kind) */
    const struct sq_capture *capture;
    struct sq_engine__xc *xcs;
    uint8_t *xc_seen;
    /* sampled exchanges (capture.c): per class reservoirs, the buffers drawn exchanges borrow
     * (xs_free: a stack of free ones), and the draws' own xorshift64 state */
    uint32_t xs_per;
    struct sq_engine__xres *xs;
    char *xs_pool;
    uint32_t *xs_free, xs_nfree;
    uint64_t xs_rng;
    struct sq_engine__xlive *xs_live; /* cfg->on_xsample_live: per class; else NULL */
    int first_connect_err;
    struct sq_engine__slot slots[SQ_SLOTS];
    uint32_t wr, rd; /* slots published / consumed */
    /* Per-request records (sampling on): a ring written by this worker (rhead) and drained by
     * the run's writer thread (rtail); release/acquire on both indexes. */
    struct sq_sample *ring;
    uint32_t rcap, rhead, rtail;
    uint64_t rng, sample_below; /* xorshift64 state; record when rng < sample_below */
    uint64_t samples_lost;
    int64_t next_tick_ns;
    int64_t seal_ns;      /* when second seal_second is sealed (INT64_MAX: none pending) */
    uint32_t seal_second; /* the latest second published by a tick */
    int64_t start_ns;     /* the run's common start */
    int64_t sched_ns;     /* its scenario's start: the executor's time zero */
    int64_t end_load_ns, hard_end_ns, end_ns, ready_ns;
    /* its own cost (read at each tick only): /proc/thread-self/schedstat, kept open (when the
     * kernel does not offer it, the thread's CPU clock is read instead); the readings at the
     * common start; the largest tick lateness since the last slot */
    int sched_fd;
    bool sched_open;
    int64_t cpu0_ns, wait0_ns, sleep0_ns, lag_ns;
    struct sq_engine__live live;
    /* --urls: per-URL figures (cfg->nurls of them, histograms included), and the next URL */
    struct sq_url_result *ustats;
    uint32_t url_next;
    /* https */
    struct sq_tls_sessions tls_cache; /* the latest sessions, offered by the next connects */
    const char *tls_version, *tls_cipher, *tls_alpn; /* of the first handshake */
    char tls_err[SQ_TLS_ERRLEN]; /* the first TLS error (written once, then live.tls_err_set) */
    char bus_err[160];           /* the broker's first error message (written once, then
                                    live.bus_err_set) */
    char up_err[192]; /* the first failed WebSocket upgrade (written once, then live.up_err_set) */
    char proxy_err[160]; /* the first refused proxy CONNECT (written once, then
                            live.proxy_err_set) */
    /* the protocol: its driver (HTTP/1.1, HTTP/2 when cfg->h2_request, WebSocket when cfg->ws)
     * and that driver's own per-worker state (h2drv.c: its connections; wsdrv.c: its VUs'
     * frame state; NULL for HTTP/1.1) */
    const struct sq_engine__driver *drv;
    void *proto;
    struct sq_engine__flowbus *fbus; /* plan runs with publish / subscribe steps, else NULL */
    /* {{$stamp}}: this worker's stream (run id + windex) and its next sequence number */
    struct sq_stamp_enc stamp;
    uint64_t stamp_next;
    /* Stamped events whose publish never completed (a bus load: failed, or still in flight at
     * the end): their sequence numbers, in no order (sq_engine__unfinished) */
    uint64_t *unfinished;
    uint64_t nunfinished, capunfinished;
    /* cfg->body_tmpl: the rendered body (reused) */
    struct sq_buf body;
    /* a wrk-style script (cfg->script): this worker's state, the hooks it calls per request
     * (SQ_SCRIPT_REQUEST, _RESPONSE, _DELAY) and its static request; NULL/0 without one */
    struct sq_script *script;
    unsigned shooks;
    const char *req; /* the request iterations send without request(): cfg->request, or the
                        script state's static request */
    size_t req_len;
    uint32_t req_n; /* requests in it (a static pipeline) */
    bool req_head;
    const struct sq_addr *addr; /* the script's thread.addr, or NULL: the run's addresses */
    char *script_err;           /* the first hook error (owned), then live.script_failed */
    bool script_stopped;        /* thread:stop() */
    /* plan hooks (a plan's script:): this worker's own state (owned) and, per step, the handles
     * of its before and after hooks ([2 * step], [2 * step + 1]; -1: none); NULL: no hooks */
    int *hook_ids;
    bool own_script;
    /* cfg->rate_samples: requests per second every 100 ms (wrk's Req/Sec) */
    struct sq_hist *rate;
    int64_t rate_ns;
    uint64_t rate_base;
};

/* The global number (1-based) of the worker's VU i ({{$vu}}): in a segment, its place in the
 * whole, so a VU has the same number, and the same random stream (plan/tmpl.h), on one machine
 * or on an agent. */
uint64_t sq_engine__vu_number(const struct sq_engine__worker *w, uint32_t i);

/* c's record beside the VU array. */
static inline struct sq_engine__vux *sq_engine__vux(const struct sq_engine__conn *c)
{
    return &c->w->vux[c->local];
}

/* c's random stream for the quick face's templates (drawn at its first use). */
uint64_t *sq_engine__vu_rng(struct sq_engine__conn *c);

/* The stamp of a new event of worker w, sent now: its sequence number in *seq (may be NULL),
 * the token in out (SQ_STAMP_MAX bytes). Returns the token's length. */
size_t sq_engine__stamp(struct sq_engine__worker *w, uint64_t *seq, char *out);
/* A stamped event whose publish did not complete (sequence number seq): kept for the result's
 * `unfinished` (a sink beside the load counts it apart from lost). Past
 * SQ_ENGINE_MAX_UNFINISHED of a worker (8 MiB of them: only failures grow the list, e.g. a
 * broker refusing every publish), or out of memory: forgotten (then it counts as lost if it
 * never arrives), never fatal. */
#define SQ_ENGINE_MAX_UNFINISHED (1u << 20)
void sq_engine__unfinished(struct sq_engine__worker *w, uint64_t seq);

/* Allocates the worker's loop, connections, buffers and shard. Returns 0 or -errno. */
/* Which scenario a worker serves: its index, the worker's rank among that scenario's workers,
 * how many those are, and the global number (0-based) of the scenario's first VU. */
struct sq_engine__place {
    uint32_t scen, sindex, snw, vu_base;
};

SQ_MUST_CHECK int sq_engine__worker_init(struct sq_engine__worker *w, struct sq_engine__shared *run,
                                         uint32_t windex, const struct sq_engine__place *pl);
void sq_engine__worker_dispose(struct sq_engine__worker *w);
/* The thread body: opens the pool, waits for the common start, runs the executor. */
void *sq_engine__worker_main(void *arg);

/* The histograms of the per-step series: 2 significant digits, enough for a chart. */
SQ_MUST_CHECK int sq_engine__step_hist_new(struct sq_hist **out);

/* The 100 ms series: the bin of time now (after the run's start), moved on when now has passed
 * the current one. */
void sq_engine__fine_advance(struct sq_engine__worker *w, int64_t now);
static inline struct sq_fine_bin *sq_engine__fine_bin(struct sq_engine__worker *w, int64_t now)
{
    if (SQ_UNLIKELY(now >= w->fine_next))
        sq_engine__fine_advance(w, now);
    return &w->fine[w->fine_i];
}

/* ---- capture.c: exchanges for the run's hook (engine/capture.h) ---- */

/* On the main thread (cfg->on_xsample_live): hands each failure class's sample a worker has
 * written since the last call to the callback, frees it and marks it taken. */
void sq_engine__xs_live_take(struct sq_engine__worker *ws, uint32_t n,
                             const struct sq_run_config *cfg);

/* Allocates the VUs' capture buffers when the run captures. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_engine__xc_init(struct sq_engine__worker *w);
void sq_engine__xc_dispose(struct sq_engine__worker *w);
/* A request was sent: capture its exchange (the mode decides at its end). */
void sq_engine__xc_arm(struct sq_engine__conn *c);
/* At a response head (h1drv, h2drv; c->xc set): the sampling's common case, inline. True when
 * that was all (the class is full and no replacement is due: its counter went up); false when
 * sq_engine__xc_head must see the head (it draws and copies). */
static inline bool sq_engine__xc_head_done(struct sq_engine__conn *c, uint16_t status)
{
    struct sq_engine__worker *w = c->w;
    if (SQ_LIKELY(w->xs_per != 0) && !c->xc->on) {
        uint32_t cls = (uint32_t)(status - 100) < 500 ? ((uint32_t)status * 41) >> 12 : 0;
        struct sq_engine__xres *r = &w->xs[cls];
        if (SQ_LIKELY(r->seen >= w->xs_per && r->seen + 1 != r->next)) {
            r->seen++; /* xc->pick is 0 already: every end that drew one resets it */
            return true;
        }
    }
    return false;
}

/* Merges the workers' reservoirs into out (drawn in proportion to what each saw). Returns 0 or
 * -ENOMEM. The workers keep nothing of it. */
SQ_MUST_CHECK int sq_engine__xs_merge(struct sq_engine__worker *ws, uint32_t n, uint32_t per_class,
                                      struct sq_xsamples *out);
/* The request ended: completed with status (error -1), or failed with an enum sq_errk. Hands
 * the exchange to the hook when the mode wants it. */
void sq_engine__xc_end(struct sq_engine__conn *c, int64_t now, uint16_t status, int error);

/* Per-step figures in a flow's shape (freed with sq_step_stats_free, added up with
 * sq_step_stats_merge). Returns 0 or -ENOMEM; *out may then hold what was made. */
SQ_MUST_CHECK int sq_engine__steps_new(const struct sq_flow *f, struct sq_step_stats **out);
struct sq_plan_step;
/* A step's metric: samples at one of its responses (held: every check of the step held), into
 * the worker's own figures ss: no lock, no allocation (a templated value renders into the VU's
 * val buffer). Only called for a step with metric: entries. */
/* One sample into a slot (a finite x; now: monotonic ns). */
void sq_engine__mval_add(struct sq_step_mval *mv, double x, int64_t now);
void sq_engine__step_metrics(const struct sq_flow *f, struct sq_flow_vu *v,
                             const struct sq_plan_step *ps, struct sq_step_stats *ss, bool held,
                             int64_t now);

#define SQ_ENGINE_RBUF_SIZE (64 * 1024) /* a worker's read buffer (w->rbuf) */

/* Shares of total over n parts that always add up to total: the first total % n get one more. */
static inline uint64_t sq_engine__share(uint64_t total, uint32_t n, uint32_t i)
{
    SQ_ASSERT(i < n);
    return total / n + (i < total % n ? 1 : 0);
}

#endif
