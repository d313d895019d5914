/* sink/sink.h - the counting sink: what arrives at the far end of a pipeline, against what was
 * sent.
 *
 * Events carry a stamp (proto/stamp.h: run, sequence number, send time). The sink takes them
 * from any of three sources at once:
 *   - HTTP (--http HOST:PORT): any request on any path, answered 202 (server/ core, its own
 *     threads);
 *   - NATS (--nats URL/SUBJECT): a core subscription (wildcards and a queue group allowed), or
 *     a JetStream durable push consumer (--stream, --durable), each message acknowledged;
 *   - MQTT (--mqtt URL/FILTER): a subscription at QoS 0, 1 or 2;
 * finds the stamp in each event (sq_sink_find: scan the body, every stamp of a batch, a header,
 * a JSON path or a regex) and counts, per stream (one stream per sending worker: the stamp's
 * run field):
 *   delivered     events whose (stream, sequence) arrived for the first time
 *   duplicates    arrivals of a (stream, sequence) already delivered
 *   out_of_order  deliveries with a lower sequence number than one already seen in the stream
 *   lost          sequence numbers that never arrived: below the stream's highest one seen (or,
 *                 when the sender said how many it sent, below that count), counted once they
 *                 are `settle` old during the run and all of them at its end
 *   latency       arrival (CLOCK_REALTIME) minus the stamp's send time, in an HDR histogram
 *                 (same host: exact; across hosts: as good as the clocks' agreement)
 * Events without a stamp are `unstamped`; with a stamp of another run (when the sink knows its
 * run) `foreign`; past the ledger's memory cap (max_memory: its streams and bitmaps) `over_cap`,
 * counted but not tracked; past its bounds (a sequence number of 2^32 or more, a 4,097th stream)
 * `out_of_range`.
 *
 * Threads: the HTTP server's workers and the sink's own thread (the bus subscriptions and the
 * per-second ticks) record concurrently. Each keeps its own shard (counters, histograms) under a
 * mutex nobody else takes except the tick, once a second; the per-stream bitmaps of sequence
 * numbers are shared and set with atomic fetch-or, so a duplicate is found whichever thread got
 * the first copy.
 */
#ifndef SQ_SINK_SINK_H
#define SQ_SINK_SINK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct sq_sink;
struct sq_egress;
struct sq_tls_client_opts;

/* One second of the sink: what arrived in it, and the latency of what was delivered in it. */
struct sq_sink_second {
    double t_s; /* end of the second, after the sink's start */
    uint64_t delivered, duplicates, out_of_order, lost, unstamped;
    int64_t p50_us, p90_us, p99_us, max_us;
};

typedef void (*sq_sink_tick_cb)(void *ud, const struct sq_sink_second *s);

#define SQ_SINK_DEFAULT_SETTLE_NS (2LL * 1000000000LL)
#define SQ_SINK_DEFAULT_LIST_LOST 20
#define SQ_SINK_HTTP_MAX          300 /* the longest HOST:PORT to listen on, its NUL included */
/* The ledger's memory (streams, blocks, pages of the bitmaps) by default: 64 MiB tracks 2^29
 * sequence numbers, ~537 million events. */
#define SQ_SINK_DEFAULT_MAX_MEMORY (64ull << 20)
#define SQ_SINK_MIN_MAX_MEMORY     (1ull << 20)
#define SQ_SINK_MAX_MAX_MEMORY     (1ull << 40)

struct sq_sink_config {
    const char *http; /* "HOST:PORT" to listen on (port 0: any), NULL: none */
    int http_threads; /* 0: 1 */
    int http_status;  /* the answer; 0: 202 */
    const char *nats; /* nats://[user:pass@]host[:port]/subject, NULL: none */
    const char *nats_queue;
    const char *nats_stream, *nats_durable; /* JetStream durable push consumer (both or none) */
    /* With nats_stream: a JetStream pull consumer instead (sink/subs.c's subscribers; `squall
     * sink` does not set it): durable nats_durable shared by whoever names it, or an ephemeral
     * one of this connection's own when NULL; fetches of nats_batch messages (0: 100). */
    bool nats_pull;
    uint32_t nats_batch;
    /* Or a push consumer of the same kind (deliver subject this connection's own inbox; with
     * nats_durable, one deliver group of that name). */
    bool nats_push;
    const char *mqtt;   /* mqtt://[user:pass@]host[:port]/filter, NULL: none */
    int mqtt_qos;       /* -1: 1 */
    int mqtt_version;   /* 0 or 3: 3.1.1; 5 */
    const char *find;   /* "scan" (NULL), "all", "header:NAME", "json:PATH", "regex:RE" */
    int64_t settle_ns;  /* 0: SQ_SINK_DEFAULT_SETTLE_NS */
    uint32_t list_lost; /* 0: SQ_SINK_DEFAULT_LIST_LOST */
    /* What the ledger may take (streams, blocks, pages: sink.c); a stamp past it is counted
     * over_cap. 0: SQ_SINK_DEFAULT_MAX_MEMORY. */
    uint64_t max_memory;
    /* A run id (engine/run.h's, low SQ_STAMP_STREAM_BITS zero): streams of other runs are
     * foreign. 0: every run's streams are counted. */
    uint64_t run_id;
    sq_sink_tick_cb on_tick; /* on the sink's thread, once a second */
    void *tick_ud;
    /* The egress policy of the run the sink serves (net/egress.h; borrowed): the HTTP source
     * listens, and the brokers are reached, only where it allows (checked by sq_sink_check on
     * the resolved addresses, and again at bind() and connect()). NULL: anywhere (the CLI). */
    const struct sq_egress *egress;
    /* A broker over TLS (tls://, mqtts://): the CAs, -k, a client certificate (net/tls.h; its
     * host and alpn are ignored: the URL's host is verified). NULL: the system's CAs, no client
     * certificate. */
    const struct sq_tls_client_opts *tls;
};

/* Checks a config without starting anything (flags, the find spec, the URLs; with an egress
 * policy, the places resolved and checked against it). Returns 0, -SQ_EUSAGE with err naming
 * the flag ("--stamp: 'xml:a' is not a place (scan, all, header:NAME, json:PATH or
 * regex:RE)"), or with a policy -EACCES (its refusal: "allow_hosts: nats: ...") or
 * -SQ_ERESOLVE ("--nats: cannot resolve ..."). */
SQ_MUST_CHECK int sq_sink_check(const struct sq_sink_config *cfg, char *err, size_t len);

/* Starts the sources: binds HTTP, starts connecting to the brokers (a broker that is not there
 * yet is retried), starts the sink's thread. Returns 0, -SQ_EUSAGE (as sq_sink_check), or
 * another negative code (bind, thread) with err saying why. */
SQ_MUST_CHECK int sq_sink_start(const struct sq_sink_config *cfg, struct sq_sink **out, char *err,
                                size_t len);

/* The port the HTTP source listens on (0: none). */
uint16_t sq_sink_http_port(const struct sq_sink *s);

/* What the sender says it sent (a run in the same process): stream run_id + w carried sequence
 * numbers 0 .. stamped[w] - 1, of which unfinished[w] (nunfinished[w] of them, in any order;
 * both arrays may be NULL) never completed their publish (failed, or still in flight at the end
 * of the load). An unfinished event is never lost: it is counted apart (`unfinished`, and
 * `unfinished_delivered` when it arrived all the same), and `sent` is stamped minus unfinished. */
struct sq_sink_sent {
    uint64_t run_id;
    const uint64_t *stamped;
    uint32_t nstreams;
    const uint64_t *const *unfinished;
    const uint64_t *nunfinished;
};
/* From then on those streams' losses count against these counts, and the totals' `expected` is
 * the sum of what was sent. */
void sq_sink_expect(struct sq_sink *s, const struct sq_sink_sent *sent);

/* Live totals (any thread). */
struct sq_sink_totals {
    uint64_t delivered, duplicates, out_of_order, unstamped, foreign;
    uint64_t over_cap;       /* stamps not tracked: past max_memory */
    uint64_t ledger_bytes;   /* what the ledger takes now (at most max_memory, but for
                                sq_sink_expect's streams) */
    uint64_t expected;       /* sq_sink_expect's sum of the events sent, 0 before */
    uint64_t expected_in;    /* of those, the ones delivered (the untracked count as in) */
    int64_t last_arrival_ns; /* CLOCK_MONOTONIC of the latest event, 0: none yet */
    uint64_t reconnects;     /* broker connections opened again */
    bool connected;          /* every broker source is subscribed */
};
void sq_sink_totals(struct sq_sink *s, struct sq_sink_totals *t);

/* Waits until every expected event arrived, or nothing arrived for settle_ns (cfg), or max_ns
 * passed, or *stop is set (the sink's block then says settle_stopped). Returns true when
 * everything expected arrived. */
bool sq_sink_settle(struct sq_sink *s, int64_t max_ns, volatile int *stop);

/* Stops every source (in-flight requests are answered), joins the threads. Idempotent. */
void sq_sink_stop(struct sq_sink *s);

/* After sq_sink_stop: true when a broker source (--nats, --mqtt) was never subscribed, so the
 * sink counted none of the events that crossed that broker; why names the source and its first
 * error ("nats://127.0.0.1:4222/orders: never subscribed (connect to 127.0.0.1:4222:
 * Connection refused): the sink counted nothing that crossed this broker"). A sink beside a load
 * fails its run then (sink/beside.h). */
bool sq_sink_unsubscribed(const struct sq_sink *s, char *why, size_t len);

/* The `sink` block of the result document (after sq_sink_stop), or NULL when out of memory.
 * docs/json-schema.md describes it; `error` is sq_sink_unsubscribed's why, when it is true. */
json_t *sq_sink_json(struct sq_sink *s);

void sq_sink_free(struct sq_sink *s); /* stops it first; NULL is a no-op */

/* ---- finding the stamp (exposed for the fuzzer and the tests) ---- */

struct sq_sink_finder;
/* Compiles a find spec (as cfg->find). Returns 0, -SQ_EUSAGE (err says why) or -ENOMEM. */
SQ_MUST_CHECK int sq_sink_finder_new(const char *spec, struct sq_sink_finder **out, char *err,
                                     size_t len);
void sq_sink_finder_free(struct sq_sink_finder *f);
/* Calls found(ud, stamp) for each stamp the spec finds in one event (a body and its headers:
 * names[i] / values[i], NULL when none; regex and JSON state is the caller's scratch, made by
 * sq_sink_finder_scratch). Returns how many it found. */
struct sq_stamp;
struct sq_sink_scratch;
struct sq_sink_scratch *sq_sink_finder_scratch(const struct sq_sink_finder *f);
void sq_sink_scratch_free(struct sq_sink_scratch *s);
struct sq_sink_field {
    const char *name, *value;
    size_t name_len, value_len;
};
size_t sq_sink_find(const struct sq_sink_finder *f, struct sq_sink_scratch *scratch,
                    const char *body, size_t len, const struct sq_sink_field *fields,
                    size_t nfields, void (*found)(void *ud, const struct sq_stamp *st), void *ud);

/* ---- the ledger alone (a host that receives events itself: the webhook inbox) ---- */

/* A sink with no source and no thread: the caller hands it events with sq_sink_record (any
 * thread) and reads the per-stream matching with sq_sink_streams. find is as cfg->find (NULL:
 * "scan"; borrowed for the sink's life). max_bytes caps its streams and bitmaps (0:
 * SQ_SINK_DEFAULT_MAX_MEMORY). When a new stream (or a page of one) does not fit, the stream
 * that has gone longest without an arrival is evicted (forgotten: its counts, its tag) to make
 * room, so streams in use win over stale ones; a stamp that still does not fit (one stream
 * alone fills the cap) is not matched (over_cap). Returns 0, -SQ_EUSAGE (err says why) or
 * -ENOMEM. sq_sink_free frees it. */
SQ_MUST_CHECK int sq_sink_ledger_new(const char *find, uint64_t max_bytes, struct sq_sink **out,
                                     char *err, size_t len);

/* What happened to the first stamp of one event. */
struct sq_sink_hit {
    bool stamped;       /* a stamp was found (then the rest is set) */
    bool duplicate;     /* its (stream, sequence) had arrived before */
    bool out_of_order;  /* delivered below a sequence number the stream had already seen */
    bool unmatched;     /* not matched: past the ledger's bounds (or another run's) */
    bool over_cap;      /* ... because of its memory cap */
    uint64_t run, seq;  /* the stamp's run field (the stream) and sequence number */
    int64_t latency_ns; /* arrival (CLOCK_REALTIME) minus the stamp's send time; >= 0 */
};

/* Records one event as a source would (stamps found, counted, matched); *hit (may be NULL)
 * says what became of its first stamp. A stream this event makes gets tag (the caller's: the
 * inbox's path where the stream was first seen), which sq_sink_streams hands back. Returns how
 * many stamps it found. */
size_t sq_sink_record(struct sq_sink *s, const char *body, size_t len,
                      const struct sq_sink_field *fields, size_t nfields, void *tag,
                      struct sq_sink_hit *hit);

/* One stream's matching so far. */
struct sq_sink_stream_counts {
    uint64_t run;       /* the stamp's run field */
    char run_text[16];  /* ... as the stamp spells it (Crockford base32) */
    uint64_t delivered; /* sequence numbers that arrived */
    uint64_t duplicates, out_of_order;
    uint64_t over_cap; /* its arrivals not tracked (the memory cap) */
    uint64_t missing;  /* sequence numbers below the highest seen that have not arrived */
    int64_t highest;   /* the highest sequence number seen, -1: none */
    void *tag;         /* sq_sink_record's, from the event that made the stream */
};

/* Calls each(ud, c) for every stream kept (any thread; the ledger alone holds its mutex
 * meanwhile, so each must not record). Returns how many. */
size_t sq_sink_streams(struct sq_sink *s,
                       void (*each)(void *ud, const struct sq_sink_stream_counts *c), void *ud);

/* The ledger alone's own figures. */
struct sq_sink_ledger_counts {
    uint64_t streams;      /* kept now */
    uint64_t evicted;      /* streams forgotten to make room */
    uint64_t over_cap;     /* stamps not matched for want of memory */
    uint64_t out_of_range; /* stamps not matched: a sequence number of 2^32 or more */
    uint64_t bytes, max_bytes;
};
void sq_sink_ledger_counts(struct sq_sink *s, struct sq_sink_ledger_counts *c);

#endif
