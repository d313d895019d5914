/* face/push.h - the per-second series streamed to a metrics store while a run goes:
 * --out prometheus-rw=URL (Prometheus remote write 1.0: protobuf WriteRequest, snappy) and
 * --out influxdb=URL (InfluxDB 1.x line protocol to /write).
 *
 * One sender thread per destination with a bounded queue of per-second points. The main thread
 * enqueues from the run's tick and never waits: a full queue drops the point and counts it. The
 * sender batches what is queued into one POST (HTTP/1.1 over TCP, or TLS for https://, one
 * connection per POST, every step under a deadline), retries a failed POST a bounded number of
 * times and then counts its points as failed. At the run's end sq_push_finish gives it a bounded
 * time to send what is left; what is still queued then counts as dropped. A slow or dead receiver
 * never slows the load: the workers never see it, the tick only copies a point under a short lock.
 *
 * The destination is resolved once, at open, through the run's egress policy (net/egress.h),
 * and each connect() asks it again. */
#ifndef SQ_FACE_PUSH_H
#define SQ_FACE_PUSH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "result/result.h"

struct sq_egress;

enum sq_push_kind {
    SQ_PUSH_PROM_RW, /* --out prometheus-rw=URL */
    SQ_PUSH_INFLUX,  /* --out influxdb=URL */
};

/* One second as pushed: the interval's figures and the run's running totals at its end. */
struct sq_push_point {
    int64_t ts_ms; /* end of the interval, ms since the epoch */
    double len_s;
    uint64_t sent, completed, failed, dropped, errors, bytes_received, active;
    int64_t p50_us, p90_us, p99_us, max_us;
    uint64_t status[6];
    /* running totals since the start */
    uint64_t t_sent, t_completed, t_failed, t_dropped, t_errors, t_bytes;
    uint64_t t_status[6];
    /* the plan's metrics (labels' nmetrics of them, their order), or NULL */
    const struct sq_push_mval *m;
};

/* One of a plan's own metrics (plan `metrics:`) in one second as pushed: the second's figures
 * (struct sq_msecond) and the run's running totals at its end. */
struct sq_push_mval {
    uint64_t n, nonzero; /* samples in the second, of them not 0 */
    double sum;          /* their sum */
    double last;         /* a gauge's latest sample so far (has_last) */
    bool has_last;
    uint64_t t_n, t_nonzero; /* since the start */
    double t_sum;
};

/* A plan metric's name and kind (enum sq_metric_kind, plan/metrics.h), and the user tags of
 * the steps whose samples it carries (ntags of them, tk[i]=tv[i]; none: 0): influx tags,
 * Prometheus labels (a key sanitized to [a-zA-Z_][a-zA-Z0-9_]*, and "tag_" before one that
 * is a built-in label's name: run, run_id, metric, kind, class, quantile). */
struct sq_push_metric {
    const char *name;
    int kind;
    uint32_t ntags;
    char **tk, **tv;
};

/* One set of user tags (a step's, merged with its group's and scenario's). */
struct sq_push_tagset {
    uint32_t n;
    const char *const *keys, *const *vals;
};

/* The labels (tags) every series carries. Values are copied at open. */
struct sq_push_labels {
    const char *run;    /* the run's name (--name), or "squall" */
    const char *run_id; /* unique per run */
    bool open;          /* open model: `active` is requests in flight; closed: active VUs */
    /* a plan's own metrics, pushed each second beside the run's series (none: 0) */
    const struct sq_push_metric *metrics;
    uint32_t nmetrics;
    /* the metrics split by the steps' tags: step g (sq_second.ms's numbering, nsteps of them)
     * has tag set sets[step_set[g]] (nsets distinct ones); each metric is then pushed once per
     * set with its tags, from the steps of that set. nsets 0: one series per metric */
    const uint32_t *step_set;
    uint32_t nsteps;
    const struct sq_push_tagset *sets;
    uint32_t nsets;
};

struct sq_push; /* opaque */

/* Whether this build can push kind (prometheus-rw needs libsnappy at build time). */
bool sq_push_available(enum sq_push_kind kind);
const char *sq_push_flag(enum sq_push_kind kind); /* "prometheus-rw", "influxdb" */

/* Checks and resolves url (http:// or https://) through egress (NULL: anything goes) and starts
 * the sender. A "user:password@" in url (%-escaped) is taken out and sent as HTTP Basic on
 * every POST, unless the environment's token for kind is set (SQUALL_INFLUXDB_TOKEN: "Token T";
 * SQUALL_PROMETHEUS_RW_TOKEN: "Bearer T"); https checks the receiver against OpenSSL's default
 * CAs (SSL_CERT_FILE...) and the URL's host. Returns 0 with *out set, or a negative error with
 * why filled in (bad URL, refused by the policy, cannot resolve, not built in), which never
 * holds the password. No packet is sent to the destination here. */
SQ_MUST_CHECK int sq_push_open(enum sq_push_kind kind, const char *url,
                               const struct sq_push_labels *lab, const struct sq_egress *egress,
                               struct sq_push **out, char *why, size_t len);

/* One second of the run (main thread): adds it to the running totals and queues it. Never
 * blocks on the network; a full queue counts a drop. The timestamps are the intervals' ends
 * from the run's start on the wall clock: sq_push_set_start's, else the first call's now less
 * s->t_s; each at most the wall clock's now (a receiver queried right after the run sees every
 * point) and each after the one before. */
void sq_push_tick(struct sq_push *p, const struct sq_second *s);

/* The run's common start on the wall clock (seconds since the epoch; <= 0: unknown), for the
 * timestamps of the seconds ticked after it. NULL p: a no-op. */
void sq_push_set_start(struct sq_push *p, double wall_s);

/* Lets the sender send what is queued for at most deadline_s seconds, then stops and joins it.
 * Idempotent. */
void sq_push_finish(struct sq_push *p, double deadline_s);

struct sq_push_stats {
    uint64_t points;      /* seconds handed to sq_push_tick */
    uint64_t sent;        /* seconds the receiver accepted (2xx) */
    uint64_t failed;      /* seconds whose POST failed after its retries */
    uint64_t dropped;     /* seconds dropped: the queue was full, or still queued at the end */
    uint64_t posts;       /* POSTs attempted (retries included) */
    char last_error[160]; /* the last failure, "" for none */
};
void sq_push_stats(const struct sq_push *p, struct sq_push_stats *out);
const char *sq_push_url(const struct sq_push *p); /* as given, less its password */
void sq_push_free(struct sq_push *p);             /* finishes first when needed; NULL no-op */

/* {"url":..., "points":n, "sent":n, "failed":n, "dropped":n, "posts":n, "last_error":...}, or
 * NULL when out of memory. */
json_t *sq_push_json(const struct sq_push *p);

/* A user tag's key as a Prometheus label name into out (len bytes): [a-zA-Z_][a-zA-Z0-9_]*,
 * any other byte as '_', "tag_" before one that starts with a digit or '_' or is a built-in
 * label (run, run_id, metric, kind, class, quantile). */
void sq_push_prom_label_name(const char *key, char *out, size_t len);

/* The encoders, exposed for the unit tests. Both append to b and return 0 or -ENOMEM. */
/* The remote-write WriteRequest (uncompressed protobuf) for n points. */
SQ_MUST_CHECK int sq_push_encode_prom(struct sq_buf *b, const struct sq_push_labels *lab,
                                      const struct sq_push_point *pt, size_t n);
/* Line protocol, one line per point, millisecond timestamps. */
SQ_MUST_CHECK int sq_push_encode_influx(struct sq_buf *b, const struct sq_push_labels *lab,
                                        const struct sq_push_point *pt, size_t n);

#endif
