/* result/result.h - what a run measured: the result model every reader of results shares.
 *
 * The counters, the histograms (stats/hist.h), the error kinds and the request phases, the
 * per-second and 100 ms series, the per-scenario, per-step, per-URL, bus and WebSocket figures,
 * squall's own cost and the watched processes, the sampled exchanges; and what is done to a
 * result as a whole: dispose it, add counters, merge two results without loss, merge sampled
 * exchanges. engine/ fills a struct sq_result (engine/run.h: sq_run); output/, cluster/, daemon/,
 * mcp/ and the faces read it, and none of them needs the load path to do so.
 *
 * Nothing here runs a request. A function here reads or combines figures that already exist;
 * the verdicts a plan's thresholds give on a result are result/verdict.h's.
 */
#ifndef SQ_RESULT_RESULT_H
#define SQ_RESULT_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "proc/watch.h"

struct sq_hist;

/* Exact status codes are counted in a table indexed by the code: a status is three digits
 * (RFC 9110 15), so 1000 entries hold every one a parser accepts. */
#define SQ_STATUS_CODES 1000

/* The fine-grained series: completions, failures and the largest latency per 100 ms bin, so a
 * stall shorter than a second shows. Bins cover the first SQ_FINE_BINS x 100 ms (10 minutes);
 * a longer run doubles the bins' width as often as needed, so memory stays bounded. */
#define SQ_FINE_BIN_NS (100LL * 1000 * 1000)
#define SQ_FINE_BINS   6000
struct sq_fine_bin {
    uint32_t completed, failed;
    uint32_t max_us; /* 0 when nothing completed in the bin */
};
struct sq_fine_series {
    int64_t bin_ns;        /* SQ_FINE_BIN_NS, doubled for runs past SQ_FINE_BINS bins */
    struct sq_fine_bin *v; /* owned */
    size_t n;              /* bins up to the run's end */
};

/* Error kinds, counted per kind. connect, dns, extract and unsolicited cost no request; the
 * others fail one, except tls: a failed handshake costs no request
 * (sq_counters.tls_handshake_errors counts those), a TLS failure while a request is out (an
 * alert, a bad record) fails it. unsolicited: bytes that arrived on a connection while no request
 * was in flight, or behind a complete response (RFC 9112 6.3): the connection is replaced, the
 * response before them stays completed. upgrade: a WebSocket upgrade that did not end in a valid
 * 101 (another status, a bad handshake, no answer within the connect timeout, a close): it costs
 * no request, the VU connects again after a backoff (sq_ws_stats.upgrade_failed says why).
 * proxy: the HTTP proxy refused the tunnel (a non-2xx answer to CONNECT: 407, 403, 502...), or
 * its answer was bad, too large or late (the connect timeout); it costs no request, the
 * connection backs off and tries again (sq_result.proxy_error keeps the first reason). */
#define SQ_ERRK_LIST(X)                                                                            \
    X(CONNECT, "connect")                                                                          \
    X(TIMEOUT, "timeout")                                                                          \
    X(CLOSED, "closed")                                                                            \
    X(PARSE, "parse")                                                                              \
    X(WRITE, "write")                                                                              \
    X(DNS, "dns")                                                                                  \
    X(DECODE, "decode")                                                                            \
    X(TLS, "tls")                                                                                  \
    X(EXTRACT, "extract")                                                                          \
    X(UNSOLICITED, "unsolicited")                                                                  \
    X(UPGRADE, "upgrade")                                                                          \
    X(PROXY, "proxy")                                                                              \
    SQ_ERRK_BUS_LIST(X)                                                                            \
    SQ_ERRK_REDIRECT_LIST(X)                                                                       \
    SQ_ERRK_QUIC_LIST(X)

/* HTTP/3's own kinds (engine/h3drv.c). quic_handshake: a QUIC handshake failed or timed out (no
 * request lost: the connection backs off and retries). quic_version_negotiation: the server
 * answered the first Initial with Version Negotiation (it speaks no QUIC v1; counted as the
 * handshake's failure is, no request lost). quic_idle_timeout: the connection heard
 * nothing for its idle timeout. quic_closed: the server closed the connection (CONNECTION_CLOSE,
 * a stateless reset, an ICMP unreachable) or broke the protocol. quic_stream_reset: the server
 * reset a request's stream, or ended it without a response. The connection-wide ones fail the
 * requests out on it (one count each); a connection with none out costs nothing. */
#define SQ_ERRK_QUIC_LIST(X)                                                                       \
    X(QUIC_HANDSHAKE, "quic_handshake")                                                            \
    X(QUIC_VERSION, "quic_version_negotiation")                                                    \
    X(QUIC_IDLE, "quic_idle_timeout")                                                              \
    X(QUIC_CLOSED, "quic_closed")                                                                  \
    X(QUIC_STREAM_RESET, "quic_stream_reset")

/* The event buses' own kinds (engine/natsdrv.c, mqttdrv.c). no_responders: a NATS request or
 * JetStream publish that no one listens to (a 503 status); it fails its request. ack: the broker
 * refused a message in its acknowledgement (a JetStream PubAck with an error, an MQTT PUBACK,
 * PUBREC or PUBCOMP with a reason code >= 0x80); it fails its request. server_error: the broker
 * said no to the connection or the session (a NATS -ERR, an MQTT CONNACK refusal, a SUBACK
 * failure, a DISCONNECT from the server); it costs no request, the connection is replaced
 * (requests still out on it fail as `closed`). */
#define SQ_ERRK_BUS_LIST(X)                                                                        \
    X(NO_RESPONDERS, "no_responders")                                                              \
    X(ACK, "ack")                                                                                  \
    X(SERVER_ERROR, "server_error")

/* A flow step's redirects (engine/flow.c): redirect_limit, a step answered by one more redirect
 * than it may follow (a loop, or a chain past `redirects`); redirect_offsite, a redirect it
 * cannot follow (a Location on another scheme, host or port, or no URL at all). Both cost no
 * request: the 3xx is completed, it is what the step's checks see, and the step counts an
 * error (its on_error applies). */
#define SQ_ERRK_REDIRECT_LIST(X)                                                                   \
    X(REDIRECT_LIMIT, "redirect_limit")                                                            \
    X(REDIRECT_OFFSITE, "redirect_offsite")

enum sq_errk {
#define SQ_ERRK_ENUM(name, str) SQ_ERRK_##name,
    SQ_ERRK_LIST(SQ_ERRK_ENUM)
#undef SQ_ERRK_ENUM
        SQ_ERRK_COUNT
};

/* The error kind's name as it appears in the summary and the JSON ("connect", "timeout"...). */
const char *sq_errk_name(enum sq_errk k);

/* Per-request phases (k6's names where k6 has them). A request on a reused connection records
 * zero for its setup phases (dns, connecting, tls_handshaking). */
#define SQ_PHASE_LIST(X)                                                                           \
    X(BLOCKED, "blocked", "http_req_blocked")                                                      \
    X(DNS, "dns", "http_req_dns")                                                                  \
    X(CONNECTING, "connecting", "http_req_connecting")                                             \
    X(TLS, "tls_handshaking", "http_req_tls_handshaking")                                          \
    X(SENDING, "sending", "http_req_sending")                                                      \
    X(WAITING, "waiting", "http_req_waiting")                                                      \
    X(RECEIVING, "receiving", "http_req_receiving")

enum sq_phase {
#define SQ_PHASE_ENUM(name, str, k6) SQ_PHASE_##name,
    SQ_PHASE_LIST(SQ_PHASE_ENUM)
#undef SQ_PHASE_ENUM
        SQ_PHASE_COUNT
};

/* "blocked" ... and "http_req_blocked" ... */
const char *sq_phase_name(enum sq_phase p);
const char *sq_phase_metric(enum sq_phase p);

/* The client's own cost in one second of the run (squall's, read once a second: nothing of it
 * is on the hot path). busy: the share of the second a worker thread was on a CPU or waiting for
 * one (an open-loop worker's busy-wait before each arrival included), for the busiest worker. */
struct sq_client_second {
    int64_t cpu_ns;        /* the whole process: user + system, in this second */
    double busy_max;       /* 0..1 (and a little above when the kernel's clocks disagree) */
    int64_t lag_max_ns;    /* how late the busiest-lagging worker's once-a-second tick ran */
    int64_t behind_max_ns; /* open loop: the most an arrival was overdue at a worker's tick */
    uint64_t rss_bytes;    /* the process's RSS at the end of the second */
};

/* One second of a run, merged across workers by the main thread (the per-second series). */
struct sq_second {
    double t_s;   /* end of the interval, seconds after the start */
    double len_s; /* its length (the last one may be shorter) */
    uint64_t sent, completed, failed, dropped, errors, bytes_received;
    uint64_t bytes_sent, iterations, checks_passed, checks_failed, http_failed; /* plan runs */
    uint64_t active; /* closed model: active VUs; open model: requests in flight at the end */
    int64_t p50_us, p90_us, p99_us, max_us;
    uint64_t status[6];           /* completed by class: [0] other, [1..5] 1xx..5xx */
    uint64_t errk[SQ_ERRK_COUNT]; /* errors by kind (errors is their sum) */
    struct sq_client_second client;
    struct sq_watch_tick server; /* the watched processes (cfg->watch); server.on false without */
    /* The plan's own metrics in this second (nm of them, the plan's metrics: order), handed to
     * the run's on_tick only (borrowed for the call); NULL and 0 in sq_result.series, whose
     * entries' values are in sq_result.mseries. */
    const struct sq_msecond *m;
    uint32_t nm;
    /* the same per step of every scenario (nms of them, sq_result.step_series' order):
     * ms[g * nm + m], what --out influxdb and prometheus-rw split by the steps' tags; on_tick
     * only, NULL where not known (a distributed run's controller) */
    const struct sq_msecond *ms;
    uint32_t nms;
};

/* One second of one of the plan's own metrics (plan `metrics:`): every worker's samples taken in
 * the second added up. A counter's increment is sum, a rate's passes nonzero of n, a trend's
 * average sum / n; a gauge's value is the latest sample of the run so far (has_last). */
struct sq_msecond {
    uint64_t n;       /* samples taken in the second */
    uint64_t nonzero; /* of them, not 0 */
    double sum;       /* their sum */
    double last;      /* the latest sample of the run up to the second's end ... */
    int64_t last_ns;  /* ... taken at this monotonic time (0: none yet) */
};

struct sq_series {
    struct sq_second *v;
    size_t n, cap;
};

/* One request, for per-request outputs (--out ndjson). Filled on the worker's hot path only when
 * sampling is on, into a per-worker ring that a writer thread drains: the hot path never waits
 * for the disk (a full ring drops the record and counts it). */
struct sq_sample {
    int64_t end_ns;     /* when it completed or failed, ns after the start */
    int64_t latency_us; /* from the intended send (open) or the send (closed) */
    int64_t wait_us;    /* open model: from the intended to the actual send */
    uint32_t bytes;     /* response bytes, head and body */
    uint16_t status;    /* 0 when it failed */
    uint8_t error;      /* 0, or 1 + enum sq_errk */
    uint8_t _pad;
    uint16_t scen;  /* plan runs: the scenario's index (0 for the quick face) */
    uint16_t label; /* plan runs: 1 + the step's index; --urls: 1 + the URL's index; 0: none */
};

/* Keys of sq_ws_stats.upgrade_failed besides HTTP statuses. */
enum {
    SQ_WS_UP_TIMEOUT = 1000,   /* no answer within the connect timeout */
    SQ_WS_UP_CLOSED = 1001,    /* the connection ended before the answer */
    SQ_WS_UP_INVALID = 1002,   /* a 101 that fails RFC 6455's checks (accept key, Upgrade...) */
    SQ_WS_UP_MALFORMED = 1003, /* the answer is not HTTP/1.1 */
};

#define SQ_WS_KEYS 16
/* A small count by key (close codes, upgrade failures): the first SQ_WS_KEYS keys seen each get
 * their own row, the rest add up in `other`. */
struct sq_ws_tally {
    struct {
        uint16_t key;
        uint64_t n;
    } row[SQ_WS_KEYS];
    uint32_t n;
    uint64_t other;
};

/* What an HTTP/3 run adds to the result (the document's `quic` block): ngtcp2's statistics of each
 * QUIC connection, read as it ended (or at the run's end for those still open). */
struct sq_quic_stats {
    uint64_t connections; /* QUIC connections whose figures are in (0: no `quic` block) */
    uint64_t datagrams_sent, datagrams_received;
    uint64_t cwnd_sum, cwnd_max; /* congestion window at each connection's end, bytes */
    int64_t srtt_max_ns;         /* the largest smoothed RTT at a connection's end */
    uint64_t packets_lost;       /* request streams' packets ngtcp2 declared lost */
    uint64_t pto_count;          /* probe timeouts that fired */
    uint64_t send_calls, recv_calls, gso_sends; /* the UDP syscalls; GSO messages */
    int64_t rcvbuf_min, sndbuf_min;             /* the smallest buffers granted (0: none yet) */
    int64_t buf_asked;                          /* what was asked for each way */
    uint8_t batch;                              /* enum sq_quic_batch (net/quic.h) */
    bool gso;                                   /* some connection sent with UDP GSO */
    /* --h3-0rtt: handshakes that resumed a session, and those that sent early data (0-RTT)
     * which the server accepted or rejected (a rejected request was sent again, counted once) */
    uint64_t resumed, early_accepted, early_rejected;
};

/* What a WebSocket run adds to the result (the document's `ws` block). Payload bytes; the wire
 * bytes, frames and upgrades included, are the run's bytes. */
struct sq_ws_stats {
    uint64_t upgrades; /* 101s that passed the checks: connections opened */
    uint64_t messages_sent, messages_received;
    uint64_t bytes_sent, bytes_received;
    uint64_t unmatched; /* whole messages that arrived with no message of ours awaiting a reply */
    uint64_t pings_sent, pongs_received, pings_received, pongs_sent;
    uint64_t closes_sent;
    struct sq_ws_tally close_codes;    /* close frames from the server by code; 1006: the
                                          connection ended without one */
    struct sq_ws_tally upgrade_failed; /* by HTTP status, or SQ_WS_UP_* */
    struct sq_hist *upgrade_us;        /* from the upgrade's send to its 101 */
    struct sq_hist *ping_rtt_us;       /* from a ping of ours to its pong */
};

/* Adds n to key's row (or to `other`). */
void sq_ws_tally_add(struct sq_ws_tally *t, uint16_t key, uint64_t n);
/* The key's name in the document: the number, or "timeout", "closed", "invalid", "malformed"
 * for the SQ_WS_UP_* keys of upgrade_failed (upgrade true). buf holds at least 12 bytes. */
const char *sq_ws_key_name(uint16_t key, bool upgrade, char *buf);

/* One URL's figures (the result's `urls` block), merged across workers. */
struct sq_url_result {
    uint64_t sent, completed, failed; /* failed: ended by an error (no response) */
    uint64_t status[6];               /* [0] other, [1..5] 1xx..5xx */
    struct sq_hist *latency;          /* µs, completed requests, measured as the run's */
};

/* What the event-bus drivers count besides requests (the result's `nats` / `mqtt` block). Only
 * uint64_t fields: merged as an array. */
struct sq_bus_counters {
    uint64_t reconnects; /* connections opened again after an open one was lost */
    uint64_t flushes;    /* writes that carried messages */
    uint64_t pings;      /* NATS PINGs / MQTT PINGREQs sent to close a window of publishes */
    uint64_t drained;    /* reads that answered every ping (either kind) out when they began:
                            the broker had read all there was and waited for more */
    uint64_t acks;       /* JetStream PubAcks, MQTT PUBACKs / PUBCOMPs, NATS replies */
    uint64_t duplicates; /* JetStream PubAcks saying "duplicate" (same Nats-Msg-Id) */
    uint64_t late;       /* replies or acks for a request no longer waiting (timed out) */
    uint64_t delivered;  /* round trip: deliveries matched to a publish of this run */
    uint64_t foreign;    /* round trip: deliveries of messages the connection did not publish (the
                            other connections' copies, other publishers'): others_delivered */
    uint64_t stamped;    /* messages (or requests) that carried a {{$stamp}} */
    /* MQTT greeting and keep-alive (the result's mqtt.connect) */
    uint64_t connacks;        /* CONNACKs that accepted the connection */
    uint64_t keepalive_pings; /* PINGREQs sent to keep an idle connection alive */
    uint64_t pingresps;       /* PINGRESPs received (to either kind of PINGREQ) */
    /* CONNACK refusals by reason: [1..5] the 3.1.1 return codes (5.0's equivalents 0x84,
     * 0x85, 0x88, 0x86, 0x87 counted there too), [0] any other code */
    uint64_t refused[6];
};

/* One shard of counters. Each worker owns one; the run merges them at the end. */
struct sq_counters {
    uint64_t sent;      /* requests whose write was started */
    uint64_t dropped;   /* arrivals due but never sent: no room under the in-flight cap, or
                           still waiting for a connection when the run ended */
    uint64_t completed; /* full responses received, any status */
    uint64_t failed;    /* sent but ended by an error (timeout, closed, parse, write) */
    uint64_t status[6]; /* [0] other, [1..5] 1xx..5xx */
    uint64_t errors[SQ_ERRK_COUNT];
    uint64_t bytes_sent, bytes_received;
    uint64_t conns_opened;           /* successful connects (https: with the handshake done) */
    uint64_t conns_closed_by_server; /* replaced after the server closed them */
    uint64_t tls_handshakes;         /* TLS handshakes completed */
    uint64_t tls_resumed;            /* ... of which resumed a session */
    uint64_t tls_handshake_errors;   /* errors[TLS] that cost no request (handshake, idle) */
    /* plan runs */
    uint64_t iterations; /* completed iterations of a flow */
    uint64_t checks_passed, checks_failed;
    uint64_t http_failed; /* k6's http_req_failed: errors and statuses >= 400 */
    uint64_t rendered;    /* requests rendered from templates (static steps are not) */
    /* bodies */
    uint64_t body_bytes;  /* response bodies after decoding (uncompressed bodies as they came) */
    uint64_t compressed;  /* responses with a Content-Encoding squall decoded */
    uint64_t undecodable; /* responses with a coding squall cannot decode (counted raw) */
    uint64_t sse_streams, sse_events; /* text/event-stream responses, and their events */
    struct sq_bus_counters bus;       /* event buses */
    /* wrk-style scripts: calls of request(), response() and delay() */
    uint64_t script_requests, script_responses, script_delays;
    uint64_t script_hooks, script_skips; /* plan hooks: before/after calls, skipped steps */
};

/* Per-step figures of a plan run, merged across the scenario's workers. */
#define SQ_STEP_STATUSES 8
/* One metric: entry of a plan step (plan/plan.h, struct sq_step_metric): its samples, taken at
 * the step's responses on one worker, then merged. Which of the fields counts depends on the
 * metric's kind: counter sum, rate nonzero / n, gauge last, trend h. */
struct sq_step_mval {
    uint64_t n;        /* samples taken */
    uint64_t nonzero;  /* of them, not 0 (a rate's passes) */
    uint64_t bad;      /* templated values that did not read as a number: no sample */
    double sum;        /* their sum */
    double last;       /* the latest sample ... */
    int64_t last_ns;   /* ... taken at this monotonic time (0: none) */
    struct sq_hist *h; /* every sample, in µs (the value read as milliseconds) */
};

struct sq_step_stats {
    uint64_t reqs;         /* requests sent on this step (completed + failed) */
    uint64_t failed;       /* http_req_failed: an error, or a status >= 400 */
    uint64_t errors;       /* no response: timeout, closed, parse, write */
    uint64_t extract_fail; /* extractions that found nothing */
    struct sq_hist *dur;   /* µs, completed requests */
    struct {
        uint16_t status;
        uint64_t n;
        struct sq_hist *h;
    } by_status[SQ_STEP_STATUSES]; /* the first statuses seen, with their own durations */
    uint32_t nstatus;
    uint64_t *check_pass, *check_fail; /* per check of the step */
    uint32_t nchecks;                  /* their length */
    struct sq_step_mval *mvals;        /* per metric: entry of the step; NULL when none */
    uint32_t nmvals;
    /* batch_duration, µs: the first request of a batch (plan.h, sq_plan_step.batch) keeps its
     * batch's, from the send to the last answer; NULL on every other step */
    struct sq_hist *batch_dur;
};

/* One second of one step of a plan run: its responses and their latency percentiles. */
struct sq_step_point {
    double t_s;
    uint64_t responses;
    int64_t p50_us, p90_us, p99_us, max_us;
};
struct sq_step_series {
    struct sq_step_point *v;
    size_t n, cap;
};

struct sq_scen_result {
    const char *name;
    struct sq_counters c;     /* this scenario's workers only */
    struct sq_hist *latency;  /* every request of the scenario */
    struct sq_hist *iter_dur; /* iteration_duration, µs */
    /* group_duration, µs: one per group of the scenario (plan.h, sq_plan_scenario.groups), each
     * the time from entering the group to leaving it; NULL when the scenario has none */
    struct sq_hist **group_dur;
    uint32_t ngroups;
    struct sq_step_stats *steps;
    size_t nsteps;
    uint32_t vus_max;
    uint64_t interrupted; /* iterations still going when the run ended (hard end or abort) */
};

/* One worker thread's own cost over the run (from the common start to the worker's end). */
struct sq_worker_stats {
    int64_t wall_ns;
    int64_t cpu_ns;             /* on a CPU */
    int64_t wait_ns;            /* runnable, waiting for a CPU (0 when the kernel does not say) */
    int64_t poll_ns;            /* of cpu_ns, polling for responses before sleeping (worker.c) */
    int64_t off_ns;             /* neither on a CPU, nor waiting for one, nor asleep by choice:
                                   hypervisor steal, interrupts (engine/client.c off_ns) */
    double busy;                /* (cpu + wait - poll + off) / wall (open loop: its busy-wait
                                   included) */
    double busy_max;            /* the same for its busiest whole second */
    uint32_t busy_seconds;      /* whole seconds at or above SQ_CLIENT_BUSY */
    uint32_t seconds;           /* whole seconds it ran */
    int64_t lag_max_ns;         /* the latest its once-a-second tick ran */
    int64_t behind_max_ns;      /* open loop: the most an arrival was overdue at one of its ticks */
    uint64_t arrivals, dropped; /* open loop: its arrivals due, and those it dropped */
    uint32_t busy_drop_seconds; /* open loop: whole seconds at or above SQ_CLIENT_BUSY in which it
                                   dropped at least SQ_CLIENT_DROPS of its arrivals */
};

/* squall's own cost during a run: the process's CPU and RSS, each worker's share. */
struct sq_client_stats {
    bool valid;                      /* filled by a run (false in a result built by hand) */
    int64_t cpu_user_ns, cpu_sys_ns; /* the whole process, from the start to the end */
    uint64_t rss_peak;               /* the largest RSS of the process at a second's end */
    struct sq_worker_stats *workers; /* owned by the result */
    uint32_t nworkers;
    bool saturated;
    char saturation[256]; /* why, in words: "worker 1 of 2 was busy 97% of the run (...)" */
    /* The workers' waits for responses (worker.c wait_io): those that polled the sockets first,
     * those an event (a response, a timer) ended while polling, those that slept. */
    uint64_t idle_polled, idle_caught, idle_slept;
};

/* The watched processes over the run (cfg->watch). */
struct sq_server_stats {
    bool on;
    struct sq_watch_totals tot;
    struct sq_watch_proc *procs; /* a copy, owned by the result */
    size_t nprocs;
};

/* ---- sampled exchanges (--sample-responses N) ----
 *
 * A run with struct sq_run_config.sample_per_class N > 0 keeps, per class, a uniform random
 * sample of at most N exchanges (reservoir sampling, per worker, merged at the end weighted by
 * what each worker saw). The classes: the response status classes (1xx .. 5xx, and "other" for a
 * status outside 100..599), then one per error kind (enum sq_errk). A response's class is drawn
 * when its head is complete: only a drawn exchange borrows a buffer (from a small per-worker
 * pool) and copies its head (SQ_SAMPLE_HEAD_MAX bytes at most) and the first SQ_SAMPLE_BODY_MAX
 * bytes of its body; every other one costs a counter and a random draw. A failure is drawn when it
 * fails (its request, what arrived of the response when it had been drawn as a response). */
#define SQ_XS_STATUS_CLASSES        6
#define SQ_SAMPLE_HEAD_MAX          4096 /* response head bytes kept; the rest is cut (head_cut) */
#define SQ_SAMPLE_BODY_MAX          4096 /* body bytes kept */
#define SQ_SAMPLE_RESPONSES_DEFAULT 5    /* kept per class unless --sample-responses says */
#define SQ_SAMPLE_RESPONSES_MAX     100  /* [0] other, [1] 1xx .. [5] 5xx */

/* One kept exchange (owned by the result). */
struct sq_xsample {
    uint32_t cls;       /* its class: 0..5 a status class, 6 + k the error kind k */
    int64_t end_ns;     /* when it ended, ns after the run's start */
    int64_t latency_us; /* completed: its latency; failed: the time until it failed */
    int64_t ttfb_us;    /* to the response's first byte; -1 when none arrived */
    int64_t connect_us; /* its connection's TCP connect and TLS handshake (0: none timed) */
    int64_t tls_us;
    uint16_t status; /* 0: no complete response head */
    int error;       /* -1: completed; else an enum sq_errk */
    bool h2;         /* over HTTP/2: req is its HTTP/1.1 form, head the status line only */
    char *req;       /* the request as sent: its head and up to SQ_SAMPLE_BODY_MAX of body */
    size_t req_len;
    bool req_cut;
    char *head; /* the response head (NULL: none) */
    size_t head_len;
    bool head_cut;
    char *body; /* the start of the response body (decoded), body_len bytes */
    size_t body_len;
    uint64_t body_total; /* body bytes seen in all */
};

/* The sampled exchanges of a run (below): per class, how many were seen, and the kept
 * ones (v, sorted by class, then by when they ended). */
#define SQ_XS_CLASSES (SQ_XS_STATUS_CLASSES + SQ_ERRK_COUNT)
struct sq_xsamples {
    uint32_t per_class; /* 0: the run sampled none */
    uint64_t seen[SQ_XS_CLASSES];
    struct sq_xsample *v;
    size_t n;
};

#define SQ_RESULT_MAX_PINNED 1024 /* workers whose CPU a result records (-t is at most 1024) */
/* A change made to a running run (engine/control.h): when (s after the common start), what and
 * to which value (rate: arrivals per second; vus: VUs; pause and resume: 0), and to which
 * scenario (-1: every one it applied to). */
enum sq_control_kind { SQ_CONTROL_RATE, SQ_CONTROL_VUS, SQ_CONTROL_PAUSE, SQ_CONTROL_RESUME };
struct sq_control_event {
    double t_s;
    enum sq_control_kind kind;
    double value;
    int32_t scen;
};
/* "rate", "vus", "pause", "resume". */
const char *sq_control_kind_name(enum sq_control_kind k);

struct sq_result {
    struct sq_counters c;
    uint64_t in_flight; /* sent but neither completed nor failed when the run ended */
    /* Latency in µs, owned by the result. Closed model: from the actual send. Open model: from
     * each arrival's intended send time, and latency_uncorrected from the actual send. */
    struct sq_hist *latency;
    struct sq_hist *latency_uncorrected; /* NULL for the closed model */
    bool open;                           /* arrival-rate executor */
    uint64_t arrivals;                   /* open model: arrivals due, = sent + dropped */
    int64_t setup_ns;                    /* opening the connection pool, before the start */
    int64_t duration_ns;                 /* from the common start to the last worker's end */
    int64_t spin_ns; /* open model: the busy-wait tail used before each arrival */
    uint32_t threads, connections;
    /* --cpus: the CPU each of the first npinned workers pinned itself to, -1 where the kernel
     * refused (the worker ran unpinned). npinned 0: no pinning asked. */
    uint32_t npinned;
    int16_t worker_cpu[SQ_RESULT_MAX_PINNED];
    /* Open model (h-pace): how the workers waited for arrivals, and the pool's growth (k6's
     * maxVUs). precision < 0: not an open-loop run. pace_tail_ns: the largest tail a worker
     * polled at the end; pace_wakes: timed waits for an arrival. Pool: connections opened before
     * the start, the cap, the peak in use, how many opened to grow, and when the first and the
     * last of those opened (ns after the start; -1: it never grew). */
    int precision;
    int64_t pace_tail_ns;
    uint64_t pace_wakes;
    uint64_t pace_deaf;     /* of those, sleeps deaf to the sockets (reads stamped by the kernel) */
    int64_t pace_window_ns; /* coarse: the batch window */
    struct {
        uint64_t pre, cap, peak, grown;
        int64_t first_ns, last_ns;
    } pool;
    struct sq_series series;                /* one entry per second, owned by the result */
    uint64_t samples_written, samples_lost; /* per-request records: handed out, dropped */
    struct sq_hist *phase[SQ_PHASE_COUNT];  /* µs per phase, when cfg->phases; else NULL */
    int64_t dns_ns;                         /* the run's first resolution of the target */
    uint64_t dns_lookups;                   /* resolutions during the run (--dns-ttl) */
    struct sq_hist *sse_first_event;        /* streams: from the send to the first event, µs */
    struct sq_hist *bus_connect;            /* MQTT: CONNECT written to CONNACK accepting, µs */
    struct sq_hist *sse_duration;           /* streams: from the send to the end of the stream */
    struct sq_scen_result *scens;           /* plan runs: one per scenario */
    uint32_t nscens;
    int64_t start_mono_ns; /* the common start, CLOCK_MONOTONIC; 0 when it never started */
    bool aborted;          /* ended early: stop flag, or no connection could be made */
    char abort_reason[320];
    uint64_t status_codes[SQ_STATUS_CODES]; /* responses by exact status ([0]: none parsed) */
    struct sq_xsamples xsamples;            /* sampled exchanges (cfg->sample_per_class) */
    int64_t wall_start_ns;                  /* CLOCK_REALTIME at the common start; 0: none */
    int first_connect_err;                  /* -errno of the first failed connect; 0: none */
    struct sq_fine_series fine;             /* the 100 ms series */
    /* Plan runs: per request step (indexed like the steps of every scenario in order, think
     * steps included, which stay empty), its responses and latency per second. */
    struct sq_step_series *step_series;
    uint32_t nstep_series;
    /* Plan runs with metrics: declared: per second of `series` (same index), each metric's
     * figures: mseries[i * nmetrics + m] (owned; NULL and 0 without metrics). */
    struct sq_msecond *mseries;
    uint32_t nmetrics;
    /* https: what the first connection negotiated (static strings; NULL for plain http or when
     * no handshake completed), and the first TLS error's message ("" if none). */
    bool tls; /* the run used TLS (https) */
    const char *tls_version, *tls_cipher, *tls_alpn;
    char tls_error[256];
    /* Stamps ({{$stamp}}): the run id and, per worker (stream), how many events it stamped:
     * stream w carried run_id + w and sequence numbers 0 .. stamped[w] - 1. */
    uint64_t run_id;
    /* The seed the run's random values came from (cfg->seed, or the one drawn): given back as
     * --seed, it replays them. */
    uint64_t seed;
    uint64_t *stamped; /* nstreams entries, owned */
    uint32_t nstreams;
    /* Per stream (NULL: none at all), the stamped events whose publish never completed (a bus
     * load: failed, or in flight at the end): unfinished[w] holds nunfinished[w] sequence
     * numbers, in no order (owned). A sink beside the load counts them apart from lost, and
     * its `sent` is stamped minus these. */
    uint64_t **unfinished;
    uint64_t *nunfinished;
    /* Event buses: the broker's first error message ("" if none), e.g. a NATS -ERR text. */
    char bus_error[256];
    struct sq_url_result *urls; /* --urls: one per URL, in the list's order (owned); else NULL */
    uint32_t nurls;
    struct sq_client_stats client; /* squall's own cost */
    struct sq_server_stats server; /* cfg->watch's processes */
    /* cfg->rate_samples: requests per second, one value per worker and 100 ms (owned) */
    struct sq_hist *rate;
    /* wrk-style scripts: the first error a hook raised during the run, with its Lua traceback
     * (owned; the run was stopped by it), or NULL */
    char *script_error;
    uint32_t script_stopped;   /* workers that thread:stop() ended */
    struct sq_ws_stats *ws;    /* WebSocket runs: their own figures (owned); NULL otherwise */
    struct sq_quic_stats quic; /* HTTP/3 runs (engine/h3drv.c); zero otherwise */
    char upgrade_error[192];   /* the first failed WebSocket upgrade's reason ("" if none) */
    /* Changes made while the run went (engine/control.h), in time order (owned); NULL: none. */
    struct sq_control_event *controls;
    uint32_t ncontrols;
    char proxy_error[160]; /* the first refused or broken proxy CONNECT ("" if none) */
    /* Plan runs: the samples setup: and teardown: steps added to the plan's own metrics, one slot
     * per plan metric (once->mvals[m] for plan->metrics[m]; owned; NULL: none) */
    struct sq_step_stats *once;
};

/* Frees what r owns and leaves its pointers NULL and its counts 0 (so disposing twice is safe).
 * What r borrows (scenario and TLS names) is left alone. */
void sq_result_dispose(struct sq_result *r);

/* Adds src's counters into dst's. */
void sq_counters_add(struct sq_counters *dst, const struct sq_counters *src);
/* Subtracts src's counters from dst's (dst was at least src: a later total minus an earlier one,
 * the per-second deltas of engine/run.c). */
void sq_counters_sub(struct sq_counters *dst, const struct sq_counters *src);

/* Adds the result src into dst without loss (result/merge.c), as if one run had done both:
 * counters, in-flight and arrivals summed; every histogram merged bucket for bucket (created in
 * dst when only src has it); scenarios and their steps matched by index (both results come from
 * the same plan; dst takes src's shape when it has none); threads, connections and VUs summed;
 * setup, duration and the DNS time the longest; aborted if either was, with the first reason;
 * the QUIC figures summed (the congestion window's sum too, so its mean is weighted by
 * connections), their maxima the larger.
 * Strings (scenario names, TLS names) are borrowed from src when dst has none. The per-second
 * series is left alone: a second's percentiles need that second's histograms (cluster/ merges
 * them from the interval stream). Returns 0, -EINVAL (scenarios or steps that do not match) or
 * -ENOMEM (dst may then be partly merged; dispose it). */
SQ_MUST_CHECK int sq_result_merge(struct sq_result *dst, const struct sq_result *src);

/* Adds src's QUIC figures into dst's: counts summed, the window's sum summed (its mean stays
 * weighted by connections), maxima the larger, the smallest granted buffers the smaller; the
 * batching mode and the buffer asked for are the first non-empty side's. */
void sq_result_quic_add(struct sq_quic_stats *dst, const struct sq_quic_stats *src);
/* A WebSocket run's own figures into dst->ws (made when missing): counts summed, tallies by key,
 * histograms bucket for bucket (a worker's, engine/wsdrv.c; another result's, above). s NULL:
 * nothing. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_result_ws_add(struct sq_result *dst, const struct sq_ws_stats *s);

/* n per-step figures, zeroed, in *out (an array of one when n is 0); each step then gets its
 * shape from sq_step_stats_init. Returns 0 or -ENOMEM (*out untouched). */
SQ_MUST_CHECK int sq_step_stats_new(size_t n, struct sq_step_stats **out);
/* Gives a zeroed step its empty figures: nchecks check counts (pass and fail) and the duration
 * histogram. Returns 0 or -ENOMEM; what it made is then sq_step_stats_free's to free. */
SQ_MUST_CHECK int sq_step_stats_init(struct sq_step_stats *s, uint32_t nchecks);
/* Gives a step's figures room for its n metric: entries (none when n is 0). 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_step_stats_metrics(struct sq_step_stats *s, uint32_t n);
/* n empty group_duration histograms in *out (an array), or NULL when n is 0. 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_group_hists_new(uint32_t n, struct sq_hist ***out);
void sq_group_hists_free(struct sq_hist **h, uint32_t n); /* NULL is a no-op */

/* d += s for one metric: entry's samples (counts and sums added, the later last sample kept,
 * histograms merged). */
void sq_step_mval_merge(struct sq_step_mval *d, const struct sq_step_mval *s);
/* One step's figures with n metric slots and nothing else (sq_result.once): 0 or -ENOMEM (*out
 * NULL). Freed with sq_step_stats_free(s, 1). */
SQ_MUST_CHECK int sq_once_metrics_new(uint32_t n, struct sq_step_stats **out);

/* Frees n per-step figures (their histograms and check counts) and the array; NULL is a no-op. */
void sq_step_stats_free(struct sq_step_stats *s, size_t n);

/* d += s for one step: counts summed, histograms merged bucket for bucket, the per-status rows
 * matched by status (a status d has no room for, past SQ_STEP_STATUSES, is left out), the first
 * nchecks check counts summed. */
void sq_step_stats_merge(struct sq_step_stats *d, const struct sq_step_stats *s, size_t nchecks);

/* Frees one kept exchange's bytes and zeroes it. */
void sq_xsample_clear(struct sq_xsample *x);
/* Frees the kept exchanges and empties x. */
void sq_xsamples_dispose(struct sq_xsamples *x);

/* Several runs' sampled exchanges into one (a distributed run's agents, cluster/): per class, a
 * uniform sample of the union of what they saw, the workers' rule: each input's kept exchanges
 * of a class stand for what it saw of that class, so an input is drawn in proportion to that,
 * and one of its kept exchanges at random. out->seen is the sum, out->per_class the largest of
 * the inputs' (0: none sampled, out is empty), out->v sorted by class, then by when they ended.
 * Each input's v must be sorted by class (struct sq_xsamples is). The exchanges taken move to
 * out (their slots in the inputs are left empty); the inputs are still to be disposed. Returns 0
 * or -ENOMEM (out empty). */
SQ_MUST_CHECK int sq_xs_merge(struct sq_xsamples *in, uint32_t n, struct sq_xsamples *out);

/* What sq_xs_merge does, for inputs of any shape (a run's workers, engine/capture.c, or whole
 * runs): one part per class and input, parts[k * n + i] being input i's uniform sample of class k
 * (v[0, n) of the `seen` exchanges of that class it saw). out gets per_class as its per_class
 * (0: none sampled, out is empty) and, per class, a uniform sample of at most per_class of the
 * union, sorted by class, then by when they ended. The exchanges taken move to out (their slots
 * in the parts are zeroed); what is left in the parts stays the caller's. Returns 0 or -ENOMEM
 * (out empty). */
struct sq_xs_part {
    uint64_t seen;
    struct sq_xsample *v;
    uint32_t n;
};
SQ_MUST_CHECK int sq_xs_merge_parts(const struct sq_xs_part *parts, uint32_t n, uint32_t per_class,
                                    struct sq_xsamples *out);

#endif
