/* daemon/prometheus.c - GET /metrics: the Prometheus text exposition format (version 0.0.4).
 *
 * Per run (the one running, and the last one that ended, labelled run="ID"): requests sent,
 * responses by status class, failures, drops and errors by kind as counters; a latency
 * histogram with fixed buckets (from the run's merged HDR histogram: each bucket counts the
 * values whose HDR bucket starts at or under the bound); VUs, requests in flight and the last
 * second's rate as gauges. While the run goes the figures are the per-second sums; once it has
 * ended they are the result's own, so the counters equal the document. Then the daemon's own:
 * runs by status, queue length, store bytes, API answers, SSE followers, build info.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "daemon/internal.h"

static const char *const class_names[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};

#define PUT_MAX 512 /* the longest text one put may add: a longer one is cut there */

void sq_daemon__prom_label(struct sq_buf *b, const char *s)
{
    for (; *s; s++) {
        int rc;
        if (*s == '\\')
            rc = sq_buf_append(b, "\\\\", 2);
        else if (*s == '"')
            rc = sq_buf_append(b, "\\\"", 2);
        else if (*s == '\n')
            rc = sq_buf_append(b, "\\n", 2);
        else
            rc = sq_buf_append(b, s, 1);
        if (rc < 0)
            return;
    }
}

static void family(struct sq_buf *b, const char *name, const char *type, const char *help)
{
    (void)sq_buf_printf(b, PUT_MAX, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

struct snap {
    struct sq_daemon__live *l;
    struct sq_daemon__totals t;
    bool running;
    char *cm_value, *cm_samples; /* copies of the live's (NULL: none) */
};

static void sample_u(struct sq_buf *b, const char *name, const struct snap *s, const char *extra,
                     uint64_t v)
{
    (void)sq_buf_printf(b, PUT_MAX, "%s{run=\"%" PRId64 "\"%s} %" PRIu64 "\n", name, s->l->id,
                        extra ? extra : "", v);
}

static void sample_d(struct sq_buf *b, const char *name, const struct snap *s, double v)
{
    (void)sq_buf_printf(b, PUT_MAX, "%s{run=\"%" PRId64 "\"} %.17g\n", name, s->l->id, v);
}

/* A family of one unlabelled figure per run: the totals' uint64_t at offset off. */
static void run_family(struct sq_buf *b, const struct snap *s, size_t n, const char *name,
                       const char *type, const char *help, size_t off)
{
    family(b, name, type, help);
    for (size_t i = 0; i < n; i++)
        sample_u(b, name, &s[i], NULL, *(const uint64_t *)((const char *)&s[i].t + off));
}

#define TOT(f) offsetof(struct sq_daemon__totals, f)

static void runs_metrics(struct sq_buf *b, const struct snap *s, size_t n)
{
    char extra[96];
    family(b, "squall_run_info", "gauge",
           "A run the daemon is running or ran last (1), with its name, kind and target.");
    for (size_t i = 0; i < n; i++) {
        (void)sq_buf_printf(b, PUT_MAX, "squall_run_info{run=\"%" PRId64 "\",kind=\"", s[i].l->id);
        sq_daemon__prom_label(b, s[i].l->kind);
        (void)sq_buf_printf(b, PUT_MAX, "\",name=\"");
        sq_daemon__prom_label(b, s[i].l->name);
        (void)sq_buf_printf(b, PUT_MAX, "\",target=\"");
        sq_daemon__prom_label(b, s[i].l->target);
        (void)sq_buf_printf(b, PUT_MAX, "\"} 1\n");
    }
    family(b, "squall_run_running", "gauge", "1 while the run goes, 0 once it has ended.");
    for (size_t i = 0; i < n; i++)
        sample_u(b, "squall_run_running", &s[i], NULL, s[i].running ? 1 : 0);
    run_family(b, s, n, "squall_run_requests_total", "counter", "Requests sent.", TOT(sent));
    family(b, "squall_run_responses_total", "counter",
           "Complete responses received, by status class.");
    for (size_t i = 0; i < n; i++)
        for (int c = 1; c <= 6; c++) {
            snprintf(extra, sizeof(extra), ",class=\"%s\"", class_names[c % 6]);
            sample_u(b, "squall_run_responses_total", &s[i], extra, s[i].t.status[c % 6]);
        }
    run_family(b, s, n, "squall_run_failed_total", "counter",
               "Requests sent but ended by an error (timeout, closed, parse, write...).",
               TOT(failed));
    run_family(b, s, n, "squall_run_dropped_total", "counter",
               "Arrivals due but never sent (open loop: no free VU or in-flight room).",
               TOT(dropped));
    family(b, "squall_run_errors_total", "counter", "Errors by kind.");
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < SQ_ERRK_COUNT; k++) {
            snprintf(extra, sizeof(extra), ",kind=\"%s\"", sq_errk_name((enum sq_errk)k));
            sample_u(b, "squall_run_errors_total", &s[i], extra, s[i].t.errk[k]);
        }
    run_family(b, s, n, "squall_run_received_bytes_total", "counter", "Response bytes received.",
               TOT(bytes_received));
    family(b, "squall_run_latency_seconds", "histogram",
           "Request latency (from the intended send in the open loop, else from the send).");
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < SQ_DAEMON_NBUCKETS; k++) {
            if (k < SQ_DAEMON_NBUCKETS - 1)
                snprintf(extra, sizeof(extra), ",le=\"%g\"", sq_daemon__buckets_s[k]);
            else
                snprintf(extra, sizeof(extra), ",le=\"+Inf\"");
            sample_u(b, "squall_run_latency_seconds_bucket", &s[i], extra, s[i].t.bucket[k]);
        }
        sample_d(b, "squall_run_latency_seconds_sum", &s[i], s[i].t.lat_sum_s);
        sample_u(b, "squall_run_latency_seconds_count", &s[i], NULL,
                 s[i].t.bucket[SQ_DAEMON_NBUCKETS - 1]);
    }
    run_family(b, s, n, "squall_run_vus", "gauge",
               "Active VUs in the last second (closed loop), or requests in flight (open loop).",
               TOT(vus));
    run_family(b, s, n, "squall_run_in_flight", "gauge", "Requests sent and not yet answered.",
               TOT(in_flight));
    family(b, "squall_run_workers", "gauge", "Worker threads the run uses.");
    for (size_t i = 0; i < n; i++)
        sample_u(b, "squall_run_workers", &s[i], NULL, s[i].l->workers);
    family(b, "squall_run_requests_per_second", "gauge",
           "Responses completed per second, over the last second of the run.");
    for (size_t i = 0; i < n; i++)
        sample_d(b, "squall_run_requests_per_second", &s[i], s[i].t.rps);
    family(b, "squall_run_elapsed_seconds", "gauge", "Seconds since the run's start.");
    for (size_t i = 0; i < n; i++)
        sample_d(b, "squall_run_elapsed_seconds", &s[i], s[i].t.elapsed_s);
}

/* A counter family with one label: name{key="label"} v, a line per item. */
struct labelled {
    const char *label;
    uint64_t v;
};

static void labelled(struct sq_buf *b, const char *name, const char *key,
                     const struct labelled *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        (void)sq_buf_printf(b, PUT_MAX, "%s{%s=\"%s\"} %" PRIu64 "\n", name, key, items[i].label,
                            items[i].v);
}

/* The server core's own counts: what it refused or closed before the API saw a request. */
static void server_metrics(struct sq_daemon *d, struct sq_buf *b)
{
    struct sq_server_counts sc;
    sq_server_counts(d->srv, &sc);
    family(b, "squall_daemon_api_connections_open", "gauge", "API connections open now.");
    (void)sq_buf_printf(b, PUT_MAX, "squall_daemon_api_connections_open %" PRIu64 "\n", sc.open);
    family(b, "squall_daemon_api_connections_total", "counter",
           "API connections: accepted; refused at a cap with none to make room; evicted "
           "(closed to make room: the one waiting longest on its client).");
    const struct labelled conns[] = {
        {"accepted", sc.accepted}, {"refused", sc.refused}, {"evicted", sc.evicted}};
    labelled(b, "squall_daemon_api_connections_total", "event", conns, SQ_ARRAY_LEN(conns));
    family(b, "squall_daemon_api_timeouts_total", "counter",
           "API connections closed by a timeout: idle, header (a slow head: 408), body (a "
           "body under the minimum rate or past the request timeout: 408).");
    const struct labelled tos[] = {
        {"idle", sc.idle_timeouts}, {"header", sc.header_timeouts}, {"body", sc.body_timeouts}};
    labelled(b, "squall_daemon_api_timeouts_total", "kind", tos, SQ_ARRAY_LEN(tos));
    family(b, "squall_daemon_api_rejected_total", "counter",
           "API requests the server refused before the API saw them whole: malformed (400), "
           "body over 1 MiB (413), head over 8 KiB or 64 fields (431), refused at the head "
           "(the gate's 401/403/413/415, answered before the body was read).");
    const struct labelled rej[] = {{"malformed", sc.bad_req},
                                   {"body_too_large", sc.too_large},
                                   {"head_too_large", sc.head_big},
                                   {"at_head", sc.head_refused}};
    labelled(b, "squall_daemon_api_rejected_total", "reason", rej, SQ_ARRAY_LEN(rej));
}

/* The runs shown: the one running and the last that ended (when it is another), each copied
 * under its lock. Returns how many (0..2). */
static size_t snapshots(struct sq_daemon *d, struct snap s[2])
{
    size_t n = 0;
    struct sq_daemon__live *ls[2] = {d->cur, d->last};
    for (int i = 0; i < 2; i++) {
        struct sq_daemon__live *l = ls[i];
        if (!l || (i == 1 && l == d->cur))
            continue;
        pthread_mutex_lock(&l->mu);
        s[n].t = l->t;
        s[n].running = !l->t.ended;
        s[n].cm_value = l->cm_value ? strdup(l->cm_value) : NULL;
        s[n].cm_samples = l->cm_samples ? strdup(l->cm_samples) : NULL;
        pthread_mutex_unlock(&l->mu);
        s[n].l = l;
        n++;
    }
    return n;
}

/* The store's figures: runs by status, the queue, bytes on disk, checkpoints. */
static void store_metrics(struct sq_daemon *d, struct sq_buf *b)
{
    char err[256];
    int64_t counts[SQ_STORE_STATUS__COUNT] = {0};
    if (sq_store_count(d->store, counts, err, sizeof(err)) == 0) {
        family(b, "squall_daemon_runs", "gauge", "Runs in the store, by status.");
        for (int i = 0; i < SQ_STORE_STATUS__COUNT; i++)
            (void)sq_buf_printf(b, PUT_MAX, "squall_daemon_runs{status=\"%s\"} %" PRId64 "\n",
                                sq_store_status_name((enum sq_store_status)i), counts[i]);
    }
    pthread_mutex_lock(&d->mu);
    size_t queued = d->q_len;
    pthread_mutex_unlock(&d->mu);
    family(b, "squall_daemon_queue_length", "gauge", "Runs waiting to start.");
    (void)sq_buf_printf(b, PUT_MAX, "squall_daemon_queue_length %zu\n", queued);
    int64_t bytes;
    if (sq_store_size(d->store, &bytes, err, sizeof(err)) == 0) {
        family(b, "squall_daemon_store_bytes", "gauge", "Bytes the store takes on disk.");
        (void)sq_buf_printf(b, PUT_MAX, "squall_daemon_store_bytes %" PRId64 "\n", bytes);
    }
    family(b, "squall_daemon_store_checkpoints_total", "counter",
           "Times the store's write-ahead log was copied into the database.");
    (void)sq_buf_printf(b, PUT_MAX, "squall_daemon_store_checkpoints_total %" PRId64 "\n",
                        sq_store_checkpoints(d->store));
}

int sq_daemon__metrics(struct sq_daemon *d, struct sq_buf *b)
{
    struct snap s[2];
    size_t n = snapshots(d, s);
    if (n)
        runs_metrics(b, s, n);
    bool custom = false;
    for (size_t i = 0; i < n; i++)
        custom |= s[i].cm_samples != NULL;
    if (custom) {
        family(b, "squall_run_custom_value", "gauge",
               "A plan's own metric so far: a counter's sum, a rate's share of non-zero samples, a "
               "gauge's latest sample, a trend's mean.");
        for (size_t i = 0; i < n; i++)
            if (s[i].cm_value && sq_buf_append(b, s[i].cm_value, strlen(s[i].cm_value)) < 0)
                break;
        family(b, "squall_run_custom_samples_total", "counter",
               "Samples a plan's own metric has taken.");
        for (size_t i = 0; i < n; i++)
            if (s[i].cm_samples && sq_buf_append(b, s[i].cm_samples, strlen(s[i].cm_samples)) < 0)
                break;
    }
    for (size_t i = 0; i < n; i++) {
        free(s[i].cm_value);
        free(s[i].cm_samples);
    }
    store_metrics(d, b);
    family(b, "squall_daemon_api_responses_total", "counter", "API answers, by status class.");
    for (int c = 1; c <= 6; c++)
        (void)sq_buf_printf(b, PUT_MAX,
                            "squall_daemon_api_responses_total{class=\"%s\"} %" PRIu64 "\n",
                            class_names[c % 6], d->answers[c % 6]);
    family(b, "squall_daemon_api_unauthorized_total", "counter",
           "API requests refused for a missing or wrong token.");
    (void)sq_buf_printf(b, PUT_MAX, "squall_daemon_api_unauthorized_total %" PRIu64 "\n",
                        d->unauthorized);
    if (d->srv)
        server_metrics(d, b);
    family(b, "squall_daemon_live_followers", "gauge", "Clients following a run's live events.");
    (void)sq_buf_printf(b, PUT_MAX, "squall_daemon_live_followers %zu\n", d->nsubs);
    family(b, "squall_daemon_start_time_seconds", "gauge",
           "When the daemon started, seconds since the Unix epoch.");
    (void)sq_buf_printf(b, PUT_MAX, "squall_daemon_start_time_seconds %.3f\n",
                        (double)d->start_wall_ms / 1e3);
    family(b, "squall_build_info", "gauge", "The squall build serving this API.");
    (void)sq_buf_printf(b, PUT_MAX, "squall_build_info{version=\"%s\"} 1\n", SQ_VERSION);
    return sq_buf_reserve(b, 1);
}
