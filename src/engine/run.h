/* engine/run.h - one closed-loop HTTP/1.1 run: configuration, result model and lifecycle.
 *
 * sq_run() splits the connections (and a request total, if any) across worker threads, lets
 * each worker drive its own connections on its own event loop with its own metric shard, and
 * merges the shards when every worker has stopped. Nothing is shared on the hot path.
 */
#ifndef SQ_ENGINE_RUN_H
#define SQ_ENGINE_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "plan/exec.h"
#include "net/sock.h"

struct sq_hist;
struct sq_tls_client;

/* Error kinds, counted per kind. Connect errors cost no request; the others fail one, except
 * tls: a failed handshake costs no request (sq_counters.tls_handshake_errors counts those), a
 * TLS failure while a request is out (an alert, a bad record) fails it. */
#define SQ_ERRK_LIST(X)                                                                            \
    X(CONNECT, "connect")                                                                          \
    X(TIMEOUT, "timeout")                                                                          \
    X(CLOSED, "closed")                                                                            \
    X(PARSE, "parse")                                                                              \
    X(WRITE, "write")                                                                              \
    X(TLS, "tls")

enum sq_errk {
#define SQ_ERRK_ENUM(name, str) SQ_ERRK_##name,
    SQ_ERRK_LIST(SQ_ERRK_ENUM)
#undef SQ_ERRK_ENUM
        SQ_ERRK_COUNT
};

/* The error kind's name as it appears in the summary and the JSON ("connect", "timeout"...). */
const char *sq_errk_name(enum sq_errk k);

#define SQ_MAX_ADDRS 16

/* One second of a run, merged across workers by the main thread (the per-second series). */
struct sq_second {
    double t_s;   /* end of the interval, seconds after the start */
    double len_s; /* its length (the last one may be shorter) */
    uint64_t sent, completed, failed, dropped, errors, bytes_received;
    uint64_t active; /* closed model: active VUs; open model: requests in flight at the end */
    int64_t p50_us, p90_us, p99_us, max_us;
};

struct sq_series {
    struct sq_second *v;
    size_t n, cap;
};

struct sq_hist;
/* Called on the main thread as each second of the run completes. h is that second's merged
 * latency histogram (borrowed, valid during the call); hu the uncorrected one or NULL. */
typedef void (*sq_tick_cb)(void *ud, const struct sq_second *s, const struct sq_hist *h,
                           const struct sq_hist *hu);

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
};

/* Called on the writer thread with a batch of records (borrowed for the call). */
typedef void (*sq_samples_cb)(void *ud, const struct sq_sample *v, size_t n);

struct sq_run_config {
    struct sq_addr addrs[SQ_MAX_ADDRS]; /* connections use them round-robin */
    int naddrs;
    const char *request; /* serialised once, shared read-only by every connection */
    size_t request_len;
    bool head_request;          /* responses carry no body */
    uint32_t threads;           /* workers; capped at the connections the executor needs */
    struct sq_exec exec;        /* prepared with sq_exec_prepare() */
    int64_t timeout_ns;         /* per request, from its send */
    int64_t connect_timeout_ns; /* per connect attempt */
    volatile int *stop;         /* optional: set non-zero (e.g. from SIGINT) to end the run */
    sq_tick_cb on_tick;         /* optional: progress, interval logs */
    void *tick_ud;
    sq_samples_cb on_samples; /* optional: per-request records */
    void *samples_ud;
    double sample_fraction; /* with on_samples: the share of requests recorded, (0, 1] */
    /* https: the TLS client context (net/tls.h), shared read-only by every worker; NULL for
     * plain http. Each worker keeps its own session cache, so reconnects resume. */
    struct sq_tls_client *tls;
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
};

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
    struct sq_series series;                /* one entry per second, owned by the result */
    uint64_t samples_written, samples_lost; /* per-request records: handed out, dropped */
    bool aborted; /* ended early: stop flag, or no connection could be made */
    char abort_reason[320];
    /* https: what the first connection negotiated (static strings; NULL for plain http or when
     * no handshake completed), and the first TLS error's message ("" if none). */
    bool tls; /* the run used TLS (https) */
    const char *tls_version, *tls_cipher, *tls_alpn;
    char tls_error[256];
};

/* Runs to completion. Returns 0 (the result is filled in, even when every request failed), or a
 * negative code when the run could not start (threads, memory, file limit); *why then says so. */
SQ_MUST_CHECK int sq_run(const struct sq_run_config *cfg, struct sq_result *out, const char **why);
void sq_result_dispose(struct sq_result *r);

/* The histogram every latency shard uses: µs from 1 µs to 1 h at 3 significant figures. */
SQ_MUST_CHECK int sq_latency_hist_new(struct sq_hist **out);

#endif
