/* face/push.c - the per-second series streamed to Prometheus (remote write) and InfluxDB
 * (line protocol) while a run goes (see push.h). */
#include "face/push.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "plan/metrics.h"
#include "plan/plan.h"
#include "http/url.h"
#include "base/b64.h"
#include "base/redact.h"
#include "net/egress.h"
#include "net/tls.h"
#include "net/sock.h"

#ifdef SQ_HAVE_SNAPPY
#include <dlfcn.h>
#include <snappy-c.h>
#endif

#define QCAP       256               /* seconds queued at most (a dead receiver: 4 minutes) */
#define BATCH      64                /* seconds per POST at most */
#define TRIES      3                 /* a POST and two retries */
#define POST_NS    (3 * SQ_NS_PER_S) /* each try: connect, send and answer within this */
#define SLICE_MS   100               /* poll slices, so the end's deadline cuts a try short */
#define ANSWER_MAX 4096              /* the answer's bytes read (its status line is enough) */
#define BODY_MAX   (16u << 20)       /* a batch's encoding never comes near this */

static const char *const class_names[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};

struct sq_push {
    enum sq_push_kind kind;
    char *url, *path, *run, *run_id; /* url: as given, less its password */
    char authority[300];
    char *auth;                /* the Authorization value (owned, wiped), or NULL */
    struct sq_tls_client *tls; /* https: the client (the system's CAs, or SSL_CERT_FILE) */
    bool open_model;
    struct sq_addr addr;
    const struct sq_egress *egress;

    /* the plan's metrics (names owned), and per queue entry their figures (mq[i * nmetrics],
     * NULL without metrics) */
    struct sq_push_metric *metrics;
    uint32_t nmetrics;
    struct sq_push_mval *mq, *mtot;
    /* split by tags (nsets > 0): metrics[u] is plan metric u / nsets with tag set u % nsets,
     * step g's samples go to set step_set[g] (nsteps of them); nplan: the plan's metrics */
    uint32_t *step_set;
    uint32_t nsteps, nsets, nplan;

    /* the main thread's running totals */
    struct sq_push_point tot;
    double start_wall_s;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct sq_push_point q[QCAP];
    size_t head, n;
    bool stop, started;
    _Atomic int64_t stop_by_ns; /* monotonic; 0 until sq_push_finish */
    pthread_t th;

    /* counts (under mu) */
    uint64_t points, sent, failed, dropped, posts;
    char last_error[160];
};

#ifdef SQ_HAVE_SNAPPY
/* libsnappy is C++: linked in, it brings libstdc++ and libgcc_s into every run, about 1 MB of
 * resident library pages (their relocations and static constructors) that a run without
 * --out prometheus-rw never uses (bench/connmem.py's base). So it is loaded when that output is
 * opened, and only its two C entry points are looked up (snappy-c.h gives their types). */
static struct {
    pthread_once_t once;
    snappy_status (*compress)(const char *, size_t, char *, size_t *);
    size_t (*max_len)(size_t);
    char why[200];
} snappy = {.once = PTHREAD_ONCE_INIT};

static void snappy_load(void)
{
    void *h = dlopen("libsnappy.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(snappy.why, sizeof snappy.why, "%s", e ? e : "libsnappy.so.1 not found");
        return;
    }
    *(void **)&snappy.compress = dlsym(h, "snappy_compress");
    *(void **)&snappy.max_len = dlsym(h, "snappy_max_compressed_length");
    if (!snappy.compress || !snappy.max_len) {
        snappy.compress = NULL;
        snprintf(snappy.why, sizeof snappy.why, "libsnappy.so.1 lacks snappy_compress");
    }
}
#endif

bool sq_push_available(enum sq_push_kind kind)
{
#ifdef SQ_HAVE_SNAPPY
    (void)kind;
    return true;
#else
    return kind != SQ_PUSH_PROM_RW;
#endif
}

const char *sq_push_flag(enum sq_push_kind kind)
{
    return kind == SQ_PUSH_PROM_RW ? "prometheus-rw" : "influxdb";
}

/* ---- encoders ---- */

static int put_varint(struct sq_buf *b, uint64_t v)
{
    unsigned char t[10];
    size_t n = 0;
    do {
        t[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            t[n] |= 0x80;
        n++;
    } while (v);
    return sq_buf_append(b, t, n);
}

/* A length-delimited field: tag, length, bytes. */
static int put_bytes(struct sq_buf *b, unsigned field, const void *p, size_t n)
{
    int rc = put_varint(b, (uint64_t)field << 3 | 2);
    if (rc == 0)
        rc = put_varint(b, n);
    if (rc == 0)
        rc = sq_buf_append(b, p, n);
    return rc;
}

static int put_label(struct sq_buf *ts, struct sq_buf *tmp, const char *name, const char *value)
{
    sq_buf_reset(tmp);
    int rc = put_bytes(tmp, 1, name, strlen(name));
    if (rc == 0)
        rc = put_bytes(tmp, 2, value, strlen(value));
    if (rc == 0)
        rc = put_bytes(ts, 1, tmp->p, tmp->len);
    return rc;
}

static int put_sample(struct sq_buf *ts, struct sq_buf *tmp, double v, int64_t ms)
{
    unsigned char d[9];
    d[0] = 1 << 3 | 1; /* field 1, 64-bit */
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    for (int i = 0; i < 8; i++)
        d[1 + i] = (unsigned char)(u >> (8 * i));
    sq_buf_reset(tmp);
    int rc = sq_buf_append(tmp, d, sizeof(d));
    if (rc == 0)
        rc = put_varint(tmp, 2 << 3 | 0);
    if (rc == 0)
        rc = put_varint(tmp, (uint64_t)ms);
    if (rc == 0)
        rc = put_bytes(ts, 2, tmp->p, tmp->len);
    return rc;
}

/* What a series takes from a point: false when the second has no value for it (no response
 * completed: no latency). */
typedef bool (*series_fn)(const struct sq_push_point *pt, int arg, double *v);

/* A running total: arg is its offset in the point (offsetof(struct sq_push_point, t_...)). */
static bool f_total(const struct sq_push_point *pt, int a, double *v)
{
    uint64_t u;
    memcpy(&u, (const char *)pt + a, sizeof(u));
    *v = (double)u;
    return true;
}
static bool f_class(const struct sq_push_point *pt, int a, double *v)
{
    *v = (double)pt->t_status[a];
    return true;
}
static bool f_rate(const struct sq_push_point *pt, int a, double *v)
{
    (void)a;
    *v = pt->len_s > 0 ? (double)pt->completed / pt->len_s : 0;
    return true;
}
static bool f_active(const struct sq_push_point *pt, int a, double *v)
{
    (void)a;
    *v = (double)pt->active;
    return true;
}
static bool f_lat(const struct sq_push_point *pt, int a, double *v)
{
    if (!pt->completed)
        return false;
    int64_t us = a == 0 ? pt->p50_us : a == 1 ? pt->p90_us : a == 2 ? pt->p99_us : pt->max_us;
    *v = (double)us / 1e6;
    return true;
}

/* A plan metric's figure: arg is its index * 4 + what (0 the running count of a counter, 1 the
 * running samples, 2 the running passes, 3 the gauge's value or the trend's average in the
 * second). None without the metric's point or, for 3, without a value. */
static bool f_custom(const struct sq_push_point *pt, int a, double *v)
{
    if (!pt->m)
        return false;
    const struct sq_push_mval *m = &pt->m[a / 4];
    switch (a % 4) {
    case 0:
        *v = m->t_sum;
        return true;
    case 1:
        *v = (double)m->t_n;
        return true;
    case 2:
        *v = (double)m->t_nonzero;
        return true;
    default:
        if (m->has_last) { /* a gauge */
            *v = m->last;
            return true;
        }
        if (!m->n)
            return false;
        *v = m->sum / (double)m->n;
        return true;
    }
}

struct series {
    const char *name;
    const char *label, *value; /* an extra label (class, quantile), or NULL */
    series_fn fn;
    int arg;
};

struct lpair {
    const char *k, *v;
};

static int lpair_cmp(const void *a, const void *b)
{
    return strcmp(((const struct lpair *)a)->k, ((const struct lpair *)b)->k);
}

void sq_push_prom_label_name(const char *key, char *out, size_t len)
{
    static const char *const builtin[] = {"run", "run_id", "metric", "kind", "class", "quantile"};
    size_t o = 0;
    bool taken = false;
    for (size_t i = 0; i < sizeof(builtin) / sizeof(*builtin); i++)
        taken |= strcmp(key, builtin[i]) == 0;
    if (taken || key[0] == '_' || (key[0] >= '0' && key[0] <= '9') || !key[0])
        o = (size_t)snprintf(out, len, "tag_");
    for (const char *c = key; *c && o + 1 < len; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9');
        out[o++] = ok ? *c : '_';
    }
    out[o < len ? o : len - 1] = '\0';
}

static int put_series_tags(struct sq_buf *b, struct sq_buf *ts, struct sq_buf *tmp,
                           const struct sq_push_labels *lab, const struct series *s,
                           const struct sq_push_point *pt, size_t n,
                           const struct sq_push_metric *mt)
{
    sq_buf_reset(ts);
    /* labels sorted by name: __name__, then the rest (class / quantile, run, run_id, tags) */
    struct lpair lp[3 + SQ_PLAN_TAGS_MAX];
    char kbuf[SQ_PLAN_TAGS_MAX][SQ_PLAN_TAG_LEN + 8]; /* the sanitized keys (not moved by qsort) */
    size_t nl = 0;
    if (s->label)
        lp[nl++] = (struct lpair){.k = s->label, .v = s->value};
    lp[nl++] = (struct lpair){.k = "run", .v = lab->run};
    lp[nl++] = (struct lpair){.k = "run_id", .v = lab->run_id};
    for (uint32_t i = 0; mt && i < mt->ntags && i < SQ_PLAN_TAGS_MAX; i++) {
        if (!mt->tv[i][0])
            continue; /* an empty value is no label */
        sq_push_prom_label_name(mt->tk[i], kbuf[i], sizeof(kbuf[i]));
        bool dup = false; /* two keys that sanitize alike: the first is kept */
        for (size_t j = 0; j < nl; j++)
            dup |= strcmp(lp[j].k, kbuf[i]) == 0;
        if (!dup)
            lp[nl++] = (struct lpair){.k = kbuf[i], .v = mt->tv[i]};
    }
    qsort(lp, nl, sizeof(*lp), lpair_cmp);
    int rc = put_label(ts, tmp, "__name__", s->name);
    for (size_t i = 0; rc == 0 && i < nl; i++)
        rc = put_label(ts, tmp, lp[i].k, lp[i].v);
    size_t any = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        double v;
        if (s->fn(&pt[i], s->arg, &v)) {
            rc = put_sample(ts, tmp, v, pt[i].ts_ms);
            any++;
        }
    }
    if (rc == 0 && any)
        rc = put_bytes(b, 1, ts->p, ts->len);
    return rc;
}

static int put_series(struct sq_buf *b, struct sq_buf *ts, struct sq_buf *tmp,
                      const struct sq_push_labels *lab, const struct series *s,
                      const struct sq_push_point *pt, size_t n)
{
    return put_series_tags(b, ts, tmp, lab, s, pt, n, NULL);
}

int sq_push_encode_prom(struct sq_buf *b, const struct sq_push_labels *lab,
                        const struct sq_push_point *pt, size_t n)
{
    static const char *const q[4] = {"0.5", "0.9", "0.99", "1"};
    struct series all[6 + 6 + 2 + 4] = {
        {"squall_run_requests_total", NULL, NULL, f_total,
         (int)offsetof(struct sq_push_point, t_sent)},
        {"squall_run_completed_total", NULL, NULL, f_total,
         (int)offsetof(struct sq_push_point, t_completed)},
        {"squall_run_failed_total", NULL, NULL, f_total,
         (int)offsetof(struct sq_push_point, t_failed)},
        {"squall_run_dropped_total", NULL, NULL, f_total,
         (int)offsetof(struct sq_push_point, t_dropped)},
        {"squall_run_errors_total", NULL, NULL, f_total,
         (int)offsetof(struct sq_push_point, t_errors)},
        {"squall_run_received_bytes_total", NULL, NULL, f_total,
         (int)offsetof(struct sq_push_point, t_bytes)},
    };
    size_t k = 6;
    for (int c = 1; c <= 6; c++)
        all[k++] = (struct series){"squall_run_responses_total", "class", class_names[c % 6],
                                   f_class, c % 6};
    all[k++] = (struct series){"squall_run_requests_per_second", NULL, NULL, f_rate, 0};
    all[k++] = (struct series){lab->open ? "squall_run_in_flight" : "squall_run_vus", NULL, NULL,
                               f_active, 0};
    for (int i = 0; i < 4; i++)
        all[k++] =
            (struct series){"squall_run_interval_latency_seconds", "quantile", q[i], f_lat, i};
    struct sq_buf ts = {0}, tmp = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < k; i++)
        rc = put_series(b, &ts, &tmp, lab, &all[i], pt, n);
    /* the plan's metrics: squall_custom_NAME_total (a counter's sum so far), _samples_total and
     * _passes_total (a rate's), NAME (a gauge's latest value), _avg and _samples_total (a
     * trend's average in the second, its samples so far) */
    for (uint32_t m = 0; rc == 0 && m < lab->nmetrics; m++) {
        static const char *const suf[4] = {"_total", "_samples_total", "_passes_total", ""};
        bool want[4] = {false};
        switch (lab->metrics[m].kind) {
        case SQ_MK_COUNTER:
            want[0] = true;
            break;
        case SQ_MK_RATE:
            want[1] = want[2] = true;
            break;
        case SQ_MK_GAUGE:
            want[3] = true;
            break;
        case SQ_MK_TREND:
            want[1] = want[3] = true;
            break;
        }
        for (int w = 0; rc == 0 && w < 4; w++) {
            if (!want[w])
                continue;
            char name[SQ_METRIC_NAME_MAX + 40];
            snprintf(name, sizeof(name), "squall_custom_%s%s", lab->metrics[m].name,
                     w == 3 && lab->metrics[m].kind == SQ_MK_TREND ? "_avg" : suf[w]);
            struct series cs = {name, NULL, NULL, f_custom, (int)m * 4 + w};
            rc = put_series_tags(b, &ts, &tmp, lab, &cs, pt, n, &lab->metrics[m]);
        }
    }
    sq_buf_dispose(&ts);
    sq_buf_dispose(&tmp);
    return rc;
}

/* A tag value in line protocol: commas, equals signs and spaces escaped. */
static int put_tag(struct sq_buf *b, const char *s)
{
    int rc = 0;
    for (; rc == 0 && *s; s++) {
        if (*s == ',' || *s == '=' || *s == ' ' || *s == '\\')
            rc = sq_buf_append(b, "\\", 1);
        if (rc == 0)
            rc = sq_buf_append(b, (*s == '\n' || *s == '\r') ? " " : s, 1);
    }
    return rc;
}

/* A line's measurement and the run's tags: "NAME,run=..,run_id=..". */
static int put_line_head(struct sq_buf *b, const char *name, const struct sq_push_labels *lab)
{
    int rc = sq_buf_append(b, name, strlen(name));
    if (rc == 0)
        rc = sq_buf_append(b, ",run=", 5);
    if (rc == 0)
        rc = put_tag(b, lab->run);
    if (rc == 0)
        rc = sq_buf_append(b, ",run_id=", 8);
    if (rc == 0)
        rc = put_tag(b, lab->run_id);
    return rc;
}

/* A plan metric's second: squall_custom,run=..,run_id=..,metric=NAME,kind=KIND and its fields
 * (counter count, a float; rate passes, total, rate; gauge value; trend samples, avg: a field's
 * type is fixed per measurement). A gauge without a sample yet writes no line. */
static int influx_custom(struct sq_buf *b, const struct sq_push_labels *lab,
                         const struct sq_push_metric *mt, const struct sq_push_mval *v,
                         int64_t ts_ms)
{
    static const char *const kinds[] = {"counter", "rate", "gauge", "trend"};
    if (mt->kind == SQ_MK_GAUGE && !v->has_last)
        return 0;
    int rc = put_line_head(b, "squall_custom", lab);
    if (rc == 0)
        rc = sq_buf_append(b, ",metric=", 8);
    if (rc == 0)
        rc = put_tag(b, mt->name);
    if (rc == 0)
        rc = sq_buf_printf(b, 32, ",kind=%s", kinds[mt->kind & 3]);
    for (uint32_t i = 0; rc == 0 && i < mt->ntags; i++) {
        if (!mt->tk[i][0] || !mt->tv[i][0])
            continue; /* line protocol has no empty tag */
        static const char *const builtin[] = {"run", "run_id", "metric", "kind"};
        bool taken = false;
        for (size_t j = 0; j < sizeof(builtin) / sizeof(*builtin); j++)
            taken |= strcmp(mt->tk[i], builtin[j]) == 0;
        rc = sq_buf_append(b, taken ? ",tag_" : ",", taken ? 5 : 1);
        if (rc == 0)
            rc = put_tag(b, mt->tk[i]);
        if (rc == 0)
            rc = sq_buf_append(b, "=", 1);
        if (rc == 0)
            rc = put_tag(b, mt->tv[i]);
    }
    if (rc == 0)
        rc = sq_buf_append(b, " ", 1);
    if (rc < 0)
        return rc;
    switch (mt->kind) {
    case SQ_MK_COUNTER:
        rc = sq_buf_printf(b, 64, "count=%.15g", v->sum);
        break;
    case SQ_MK_RATE:
        rc = sq_buf_printf(b, 96, "passes=%" PRIu64 "i,total=%" PRIu64 "i", v->nonzero, v->n);
        if (rc == 0 && v->n)
            rc = sq_buf_printf(b, 64, ",rate=%.6f", (double)v->nonzero / (double)v->n);
        break;
    case SQ_MK_GAUGE:
        rc = sq_buf_printf(b, 64, "value=%.15g", v->last);
        break;
    default:
        rc = sq_buf_printf(b, 64, "samples=%" PRIu64 "i", v->n);
        if (rc == 0 && v->n)
            rc = sq_buf_printf(b, 64, ",avg=%.15g", v->sum / (double)v->n);
        break;
    }
    if (rc == 0)
        rc = sq_buf_printf(b, 64, " %" PRId64 "\n", ts_ms);
    return rc;
}

int sq_push_encode_influx(struct sq_buf *b, const struct sq_push_labels *lab,
                          const struct sq_push_point *pt, size_t n)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct sq_push_point *p = &pt[i];
        rc = put_line_head(b, "squall_http_reqs", lab);
        if (rc == 0)
            rc = sq_buf_printf(b, 512,
                               " count=%" PRIu64 "i,sent=%" PRIu64 "i,failed=%" PRIu64
                               "i,dropped=%" PRIu64 "i,errors=%" PRIu64 "i,bytes=%" PRIu64
                               "i,%s=%" PRIu64 "i,rate=%.3f",
                               p->completed, p->sent, p->failed, p->dropped, p->errors,
                               p->bytes_received, lab->open ? "in_flight" : "vus", p->active,
                               p->len_s > 0 ? (double)p->completed / p->len_s : 0.0);
        for (int c = 1; rc == 0 && c <= 6; c++)
            rc = sq_buf_printf(b, 64, ",s%s=%" PRIu64 "i", class_names[c % 6], p->status[c % 6]);
        if (rc == 0 && p->completed)
            rc = sq_buf_printf(b, 256, ",p50_ms=%.3f,p90_ms=%.3f,p99_ms=%.3f,max_ms=%.3f",
                               (double)p->p50_us / 1e3, (double)p->p90_us / 1e3,
                               (double)p->p99_us / 1e3, (double)p->max_us / 1e3);
        if (rc == 0)
            rc = sq_buf_printf(b, 64, " %" PRId64 "\n", p->ts_ms);
        for (uint32_t m = 0; rc == 0 && p->m && m < lab->nmetrics; m++)
            rc = influx_custom(b, lab, &lab->metrics[m], &p->m[m], p->ts_ms);
    }
    return rc;
}

/* ---- the sender ---- */

static void set_error(struct sq_push *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_error(struct sq_push *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&p->mu);
    vsnprintf(p->last_error, sizeof(p->last_error), fmt, ap);
    pthread_mutex_unlock(&p->mu);
    va_end(ap);
}

/* A try that ran out of time: what. One cut short by the end's deadline (the run is over, the
 * receiver merely slow) keeps the failure before it, the receiver's own answer in the case that
 * matters (a wrong password's 401 behind a slow TLS handshake); it says what only when there
 * was none. */
static void set_timeout(struct sq_push *p, const char *what)
{
    int64_t stop_by = atomic_load(&p->stop_by_ns);
    pthread_mutex_lock(&p->mu);
    bool keep = stop_by && sq_now_ns() >= stop_by && p->last_error[0];
    pthread_mutex_unlock(&p->mu);
    if (!keep)
        set_error(p, "%s", what);
}

/* Waits for events on fd until deadline (monotonic ns) or the end's deadline. 1: ready, 0: out
 * of time, <0: -errno. */
static int wait_fd(struct sq_push *p, int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t now = sq_now_ns(), stop_by = atomic_load(&p->stop_by_ns);
        int64_t until = stop_by && stop_by < deadline ? stop_by : deadline;
        if (now >= until)
            return 0;
        int64_t ms = (until - now) / SQ_NS_PER_MS + 1;
        struct pollfd pf = {.fd = fd, .events = events};
        int r = poll(&pf, 1, (int)(ms < SLICE_MS ? ms : SLICE_MS));
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

/* The TLS handshake of an https receiver on a connected fd, within the deadline. 0, or -1 with
 * last_error set. */
static int tls_open(struct sq_push *p, int fd, struct sq_tls_conn **tc, int64_t deadline)
{
    if (sq_tls_conn_client(p->tls, NULL, fd, tc) < 0) {
        set_error(p, "tls: out of memory");
        return -1;
    }
    for (;;) {
        int rc = sq_tls_handshake(*tc);
        if (rc == 0)
            return 0;
        if (rc != -EAGAIN) {
            const char *e = sq_tls_conn_error(*tc);
            set_error(p, "tls: %s", e && e[0] ? e : strerror(-rc));
            return -1;
        }
        if ((rc = wait_fd(p, fd, sq_tls_want_write(*tc) ? POLLOUT : POLLIN, deadline)) < 0) {
            set_error(p, "tls: %s", strerror(-rc));
            return -1;
        }
        if (rc == 0) {
            set_timeout(p, "tls: no handshake within the deadline");
            return -1;
        }
    }
}

/* Sends buf[0, n) whole (over TLS when tc). 0, or -1 with last_error set. */
static int send_all(struct sq_push *p, int fd, struct sq_tls_conn *tc, const char *buf, size_t n,
                    int64_t deadline)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w =
            tc ? sq_tls_write(tc, buf + off, n - off) : send(fd, buf + off, n - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        int err = tc ? (int)-w : errno;
        if (w < 0 && err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
            set_error(p, "I/O: %s", strerror(err));
            return -1;
        }
        int rc = wait_fd(p, fd, POLLOUT, deadline);
        if (rc < 0)
            set_error(p, "%s", strerror(-rc));
        else if (rc == 0)
            set_timeout(p, "no answer within the deadline");
        if (rc <= 0)
            return -1;
    }
    return 0;
}

/* One POST; 0 when the answer is 2xx, else -1 with last_error set. */
static int post_once(struct sq_push *p, const char *head, size_t hlen, const char *body,
                     size_t blen)
{
    int64_t deadline = sq_now_ns() + POST_NS;
    if (p->egress && sq_egress_allows(p->egress, &p->addr, SQ_EGRESS_CONNECT) != 0) {
        set_error(p, "refused by the egress policy");
        return -1;
    }
    int fd = sq_connect_start(&p->addr);
    if (fd < 0) {
        set_error(p, "connect: %s", strerror(-fd));
        return -1;
    }
    struct sq_tls_conn *tc = NULL;
    int ret = -1;
    int rc = wait_fd(p, fd, POLLOUT, deadline);
    if (rc < 0)
        set_error(p, "connect: %s", strerror(-rc));
    else if (rc == 0)
        set_timeout(p, "connect: timed out");
    if (rc <= 0)
        goto out;
    if ((rc = sq_connect_result(fd)) != 0) {
        set_error(p, "connect: %s", strerror(-rc));
        goto out;
    }
    if (p->tls && tls_open(p, fd, &tc, deadline) < 0)
        goto out;
    if (send_all(p, fd, tc, head, hlen, deadline) < 0 ||
        send_all(p, fd, tc, body, blen, deadline) < 0)
        goto out;
    /* a TLS record's plaintext fits: sq_tls_read returns at most one record */
    static_assert(ANSWER_MAX < SQ_TLS_RECORD_MAX, "a record fits the answer's buffer");
    char ans[SQ_TLS_RECORD_MAX + 1];
    size_t got = 0;
    while (got < ANSWER_MAX && !memmem(ans, got, "\r\n", 2)) {
        ssize_t r = tc ? sq_tls_read(tc, ans + got, sizeof(ans) - 1 - got)
                       : recv(fd, ans + got, ANSWER_MAX - got, 0);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r == 0)
            break;
        int err = tc ? (int)-r : errno;
        if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
            const char *e = tc ? sq_tls_conn_error(tc) : NULL;
            set_error(p, "I/O: %s", e && e[0] ? e : strerror(err));
            goto out;
        }
        if ((rc = wait_fd(p, fd, POLLIN, deadline)) < 0)
            set_error(p, "%s", strerror(-rc));
        else if (rc == 0)
            set_timeout(p, "no answer within the deadline");
        if (rc <= 0)
            goto out;
    }
    ans[got] = '\0';
    int status = 0;
    if (sscanf(ans, "HTTP/1.%*d %d", &status) != 1) {
        set_error(p, "no HTTP answer");
        goto out;
    }
    if (status < 200 || status > 299) {
        char *eol = strstr(ans, "\r\n");
        if (eol)
            *eol = '\0';
        set_error(p, "answered '%.100s'", ans);
        goto out;
    }
    ret = 0;
out:
    if (tc)
        sq_tls_shutdown(tc);
    sq_tls_conn_free(tc);
    close(fd);
    return ret;
}

/* Encodes a batch into body (and head); 0 or -ENOMEM. */
static int encode(struct sq_push *p, const struct sq_push_point *pt, size_t n, struct sq_buf *raw,
                  struct sq_buf *body, struct sq_buf *head)
{
    struct sq_push_labels lab = {.run = p->run,
                                 .run_id = p->run_id,
                                 .open = p->open_model,
                                 .metrics = p->metrics,
                                 .nmetrics = p->nmetrics};
    sq_buf_reset(raw);
    sq_buf_reset(body);
    sq_buf_reset(head);
    int rc;
    const char *extra;
    if (p->kind == SQ_PUSH_PROM_RW) {
#ifdef SQ_HAVE_SNAPPY
        if ((rc = sq_push_encode_prom(raw, &lab, pt, n)) < 0)
            return rc;
        size_t cap = snappy.max_len(raw->len);
        if ((rc = sq_buf_reserve(body, cap)) < 0)
            return rc;
        size_t out = cap;
        if (snappy.compress(raw->p, raw->len, body->p, &out) != SNAPPY_OK)
            return -ENOMEM;
        body->len = out;
#else
        return -ENOTSUP;
#endif
        extra = "Content-Encoding: snappy\r\nContent-Type: application/x-protobuf\r\n"
                "X-Prometheus-Remote-Write-Version: 0.1.0\r\n";
    } else {
        if ((rc = sq_push_encode_influx(body, &lab, pt, n)) < 0)
            return rc;
        extra = "Content-Type: text/plain; charset=utf-8\r\n";
    }
    return sq_buf_printf(head, 4096,
                         "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: squall\r\n%s%s%s%s"
                         "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                         p->path, p->authority, extra, p->auth ? "Authorization: " : "",
                         p->auth ? p->auth : "", p->auth ? "\r\n" : "", body->len);
}

static void sleep_ms(struct sq_push *p, int ms)
{
    int64_t until = sq_now_ns() + (int64_t)ms * SQ_NS_PER_MS;
    for (;;) {
        int64_t now = sq_now_ns(), stop_by = atomic_load(&p->stop_by_ns);
        if (now >= until || (stop_by && now >= stop_by))
            return;
        struct timespec ts = {0, 20 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
}

static void *sender(void *arg)
{
    struct sq_push *p = arg;
    struct sq_push_point *batch = malloc(sizeof(*batch) * BATCH);
    struct sq_push_mval *bm =
        p->nmetrics ? malloc(sizeof(*bm) * BATCH * p->nmetrics) : NULL; /* batch[i].m */
    struct sq_buf raw = {0}, body = {0}, head = {0};
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->n && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->n)
            break;
        int64_t stop_by = atomic_load(&p->stop_by_ns);
        if (!batch || (p->nmetrics && !bm) || (stop_by && sq_now_ns() >= stop_by)) {
            p->dropped += p->n; /* out of time (or memory): what is left is dropped */
            p->n = 0;
            break;
        }
        size_t k = p->n < BATCH ? p->n : BATCH;
        for (size_t i = 0; i < k; i++) {
            size_t at = (p->head + i) % QCAP;
            batch[i] = p->q[at];
            batch[i].m = NULL;
            if (p->nmetrics) {
                memcpy(&bm[i * p->nmetrics], &p->mq[at * p->nmetrics], p->nmetrics * sizeof(*bm));
                batch[i].m = &bm[i * p->nmetrics];
            }
        }
        p->head = (p->head + k) % QCAP;
        p->n -= k;
        pthread_mutex_unlock(&p->mu);

        bool ok = false;
        int rc = encode(p, batch, k, &raw, &body, &head);
        if (rc < 0)
            set_error(p, "encoding: %s", strerror(-rc));
        for (int t = 0; rc == 0 && t < TRIES && !ok; t++) {
            stop_by = atomic_load(&p->stop_by_ns);
            if (t && stop_by && sq_now_ns() >= stop_by)
                break;
            if (t)
                sleep_ms(p, 250 << (t - 1));
            stop_by = atomic_load(&p->stop_by_ns);
            if (t && stop_by && sq_now_ns() >= stop_by)
                break; /* the end's deadline came in the pause: no try that cannot finish */
            pthread_mutex_lock(&p->mu);
            p->posts++;
            pthread_mutex_unlock(&p->mu);
            ok = post_once(p, head.p, head.len, body.p, body.len) == 0;
        }
        pthread_mutex_lock(&p->mu);
        if (ok)
            p->sent += k;
        else
            p->failed += k;
    }
    pthread_mutex_unlock(&p->mu);
    sq_buf_dispose(&raw);
    sq_buf_dispose(&body);
    sq_buf_dispose(&head);
    free(batch);
    free(bm);
    return NULL;
}

/* ---- the main thread's side ---- */

static int fail(char *why, size_t len, int rc, const char *fmt, const char *a, const char *b)
{
    snprintf(why, len, fmt, a, b);
    return rc;
}

/* A hex digit's value, or -1. */
static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* url's "user:password@" (as written, between "://" and the authority's first '/', '?' or
 * '#'), taken out: *clean is url without it (malloc'd), *cred "user:password" percent-decoded
 * (malloc'd; NULL: none). 0 or -ENOMEM; -EINVAL for a bad %-escape. */
static int split_userinfo(const char *url, char **clean, char **cred)
{
    *clean = *cred = NULL;
    const char *sep = strstr(url, "://");
    const char *host = sep ? sep + 3 : url;
    size_t alen = strcspn(host, "/?#");
    const char *at = memchr(host, '@', alen);
    if (!at) {
        *clean = strdup(url);
        return *clean ? 0 : -ENOMEM;
    }
    /* the last '@' of the authority ends the userinfo */
    while (memchr(at + 1, '@', alen - (size_t)(at + 1 - host)))
        at = memchr(at + 1, '@', alen - (size_t)(at + 1 - host));
    size_t pre = (size_t)(host - url), ul = (size_t)(at - host);
    *clean = malloc(strlen(url) + 1);
    *cred = malloc(ul + 1);
    if (!*clean || !*cred) {
        free(*clean);
        free(*cred);
        *clean = *cred = NULL;
        return -ENOMEM;
    }
    memcpy(*clean, url, pre);
    strcpy(*clean + pre, at + 1);
    size_t o = 0;
    for (size_t i = 0; i < ul; i++) {
        if (host[i] != '%') {
            (*cred)[o++] = host[i];
            continue;
        }
        int hi = i + 2 < ul ? hexval(host[i + 1]) : -1, lo = hi >= 0 ? hexval(host[i + 2]) : -1;
        if (lo < 0) {
            explicit_bzero(*cred, ul);
            free(*cred);
            free(*clean);
            *clean = *cred = NULL;
            return -EINVAL;
        }
        (*cred)[o++] = (char)(hi << 4 | lo);
        i += 2;
    }
    (*cred)[o] = '\0';
    return 0;
}

/* The Authorization value: the environment's token for this kind (InfluxDB's "Token T", a
 * bearer token for remote write), else the URL's user:password as Basic; NULL when neither, or
 * out of memory (*oom). */
static char *auth_value(enum sq_push_kind kind, const char *cred, bool *oom)
{
    const char *env =
        kind == SQ_PUSH_INFLUX ? "SQUALL_INFLUXDB_TOKEN" : "SQUALL_PROMETHEUS_RW_TOKEN";
    const char *tok = getenv(env);
    char *v = NULL;
    if (tok && tok[0]) {
        size_t n = strlen(tok) + 16;
        if ((v = malloc(n)) != NULL)
            snprintf(v, n, "%s %s", kind == SQ_PUSH_INFLUX ? "Token" : "Bearer", tok);
    } else if (cred) {
        size_t n = sq_b64_encoded_len(strlen(cred)) + 8;
        if ((v = malloc(n)) != NULL) {
            memcpy(v, "Basic ", 6);
            sq_b64_encode(cred, strlen(cred), v + 6);
        }
    } else {
        return NULL;
    }
    *oom = !v;
    return v;
}

int sq_push_open(enum sq_push_kind kind, const char *given, const struct sq_push_labels *lab,
                 const struct sq_egress *egress, struct sq_push **out, char *why, size_t len)
{
    const char *flag = sq_push_flag(kind);
    if (!sq_push_available(kind))
        return fail(why, len, -ENOTSUP,
                    "--out %s: this squall was built without libsnappy, which Prometheus remote "
                    "write needs (scripts/deps.sh installs it; then rebuild)%s",
                    flag, "");
#ifdef SQ_HAVE_SNAPPY
    if (kind == SQ_PUSH_PROM_RW) {
        pthread_once(&snappy.once, snappy_load);
        if (!snappy.compress)
            return fail(why, len, -ENOTSUP,
                        "--out %s: libsnappy could not be loaded (%s); Debian's libsnappy1v5 "
                        "provides it",
                        flag, snappy.why);
    }
#endif
    /* the credentials out of the URL before it is parsed (a URL with userinfo is refused) */
    char *url = NULL, *cred = NULL;
    int rc = split_userinfo(given, &url, &cred);
    if (rc == -ENOMEM)
        return fail(why, len, rc, "--out %s: %s", flag, "out of memory");
    if (rc < 0)
        return fail(why, len, -SQ_EUSAGE, "--out %s: '%s': a bad %%-escape in its user:password",
                    flag, "URL");
    bool oom = false;
    char *auth = auth_value(kind, cred, &oom);
    if (cred) {
        explicit_bzero(cred, strlen(cred));
        free(cred);
    }
    struct sq_url u;
    const char *msg = NULL;
    rc = oom ? -ENOMEM : sq_url_parse(url, &u, &msg);
    struct sq_tls_client *tls = NULL;
    if (rc == 0 && strcmp(u.scheme, "https") == 0) {
        /* the system's CAs (OpenSSL's default paths: SSL_CERT_FILE, SSL_CERT_DIR), the name
         * checked; the run's own TLS flags are the target's */
        char terr[256];
        struct sq_tls_client_opts to = {.host = u.host};
        if ((rc = sq_tls_client_new(&to, &tls, terr, sizeof(terr))) < 0) {
            sq_url_dispose(&u);
            snprintf(why, len, "--out %s: tls: %s", flag, terr);
            rc = rc == -EINVAL ? -SQ_EUSAGE : rc;
        }
    } else if (rc < 0) {
        snprintf(why, len,
                 oom ? "--out %s: out of memory" : "--out %s: '%s' is not an http(s):// URL", flag,
                 url); /* as given, less its password */
        rc = oom ? -ENOMEM : -SQ_EUSAGE;
    }
    if (rc < 0) {
        free(url);
        if (auth)
            explicit_bzero(auth, strlen(auth));
        free(auth);
        return rc;
    }
    struct sq_push *p = calloc(1, sizeof(*p));
    if (!p) {
        sq_url_dispose(&u);
        sq_tls_client_free(tls);
        free(auth);
        free(url);
        return fail(why, len, -ENOMEM, "--out %s: %s", flag, "out of memory");
    }
    p->auth = auth;
    p->tls = tls;
    p->url = url; /* less its password: what the result shows */
    p->kind = kind;
    p->egress = egress;
    p->open_model = lab->open;
    snprintf(p->authority, sizeof(p->authority), "%s", u.authority);
    char what[64];
    snprintf(what, sizeof(what), "--out %s", flag);
    char ewhy[512] = "";
    rc = sq_egress_lookup(egress, NULL, what, u.host, u.port, SQ_EGRESS_CONNECT, &p->addr, 1, ewhy,
                          sizeof(ewhy));
    if (rc < 0) {
        sq_url_dispose(&u);
        sq_push_free(p);
        /* a refusal names the destination itself; a lookup's failure does not */
        if (rc == -EACCES)
            return fail(why, len, rc, "%s%s", ewhy, "");
        return fail(why, len, rc, "%s: %s", what, ewhy[0] ? ewhy : "cannot resolve it");
    }
    if (kind == SQ_PUSH_INFLUX) {
        /* k6's form: the path names the database (http://host:8086/DB); "/" means "squall" */
        const char *db = u.path[0] == '/' ? u.path + 1 : u.path;
        size_t dn = strcspn(db, "?");
        if (!dn)
            db = "squall", dn = 6;
        size_t n = dn + 64;
        if ((p->path = malloc(n)) != NULL)
            snprintf(p->path, n, "/write?db=%.*s&precision=ms", (int)dn, db);
    } else {
        p->path = strdup(u.path);
    }
    sq_url_dispose(&u);
    p->run = strdup(lab->run && lab->run[0] ? lab->run : "squall");
    p->run_id = strdup(lab->run_id ? lab->run_id : "");
    bool moom = false;
    if (lab->nmetrics) {
        /* split by the steps' tags: one unit per (metric, tag set) */
        uint32_t nsets = lab->nsets && lab->nsteps && lab->step_set ? lab->nsets : 0;
        uint32_t nu = lab->nmetrics * (nsets ? nsets : 1);
        p->metrics = calloc(nu, sizeof(*p->metrics));
        p->mq = calloc((size_t)QCAP * nu, sizeof(*p->mq));
        p->mtot = calloc(nu, sizeof(*p->mtot));
        moom = !p->metrics || !p->mq || !p->mtot;
        if (!moom && nsets) {
            moom = !(p->step_set = calloc(lab->nsteps, sizeof(*p->step_set)));
            for (uint32_t g = 0; !moom && g < lab->nsteps; g++)
                p->step_set[g] = lab->step_set[g] < nsets ? lab->step_set[g] : 0;
            p->nsteps = lab->nsteps;
            p->nsets = nsets;
        }
        p->nplan = lab->nmetrics;
        for (uint32_t ui = 0; !moom && ui < nu; ui++) {
            const struct sq_push_metric *pm = &lab->metrics[nsets ? ui / nsets : ui];
            struct sq_push_metric *x = &p->metrics[ui];
            x->kind = pm->kind;
            moom = !(x->name = strdup(pm->name));
            p->nmetrics = ui + 1;
            const struct sq_push_tagset *ts = nsets ? &lab->sets[ui % nsets] : NULL;
            if (moom || !ts || !ts->n)
                continue;
            x->tk = calloc(ts->n, sizeof(*x->tk));
            x->tv = calloc(ts->n, sizeof(*x->tv));
            moom = !x->tk || !x->tv;
            for (uint32_t i = 0; !moom && i < ts->n; i++) {
                x->tk[i] = strdup(ts->keys[i]);
                x->tv[i] = strdup(ts->vals[i]);
                x->ntags = i + 1;
                moom = !x->tk[i] || !x->tv[i];
            }
        }
    }
    if (!p->path || !p->url || !p->run || !p->run_id || moom) {
        sq_push_free(p);
        return fail(why, len, -ENOMEM, "--out %s: %s", flag, "out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if ((rc = pthread_create(&p->th, NULL, sender, p)) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p->path); /* then sq_push_free leaves the lock alone: it is gone already */
        free(p->url);
        p->url = p->path = NULL;
        sq_push_free(p);
        return fail(why, len, -rc, "--out %s: cannot start its thread%s", flag, "");
    }
    p->started = true;
    *out = p;
    return 0;
}

void sq_push_tick(struct sq_push *p, const struct sq_second *s)
{
    if (!p)
        return;
    double now = sq_wall_s();
    if (p->start_wall_s <= 0)
        p->start_wall_s = now - s->t_s;
    struct sq_push_point *t = &p->tot;
    int64_t ts = (int64_t)((p->start_wall_s + s->t_s) * 1000.0), now_ms = (int64_t)(now * 1000.0);
    /* Never ahead of the clock: a start guessed from a late first second put every point
     * after it in the future, where a query at "now" (Prometheus's instant query) did not see
     * the last one. And increasing: remote write refuses a sample older than its series'
     * latest. */
    if (ts > now_ms)
        ts = now_ms;
    if (p->tot.ts_ms && ts <= p->tot.ts_ms)
        ts = p->tot.ts_ms + 1;
    t->ts_ms = ts;
    t->len_s = s->len_s;
    t->sent = s->sent;
    t->completed = s->completed;
    t->failed = s->failed;
    t->dropped = s->dropped;
    t->errors = s->errors;
    t->bytes_received = s->bytes_received;
    t->active = s->active;
    t->p50_us = s->p50_us;
    t->p90_us = s->p90_us;
    t->p99_us = s->p99_us;
    t->max_us = s->max_us;
    t->t_sent += s->sent;
    t->t_completed += s->completed;
    t->t_failed += s->failed;
    t->t_dropped += s->dropped;
    t->t_errors += s->errors;
    t->t_bytes += s->bytes_received;
    for (int c = 0; c < 6; c++) {
        t->status[c] = s->status[c];
        t->t_status[c] += s->status[c];
    }
    for (uint32_t u = 0; u < p->nmetrics; u++) {
        struct sq_push_mval *v = &p->mtot[u];
        uint32_t m = p->nsets ? u / p->nsets : u;
        struct sq_msecond tx = {0};
        const struct sq_msecond *x = NULL;
        if (p->nsets && s->ms && s->nms == p->nsteps && s->nm == p->nplan) {
            /* the steps of this unit's tag set, added up */
            for (uint32_t g = 0; g < p->nsteps; g++) {
                if (p->step_set[g] != u % p->nsets)
                    continue;
                const struct sq_msecond *y = &s->ms[(size_t)g * s->nm + m];
                tx.n += y->n;
                tx.nonzero += y->nonzero;
                tx.sum += y->sum;
                if (y->last_ns > tx.last_ns) {
                    tx.last = y->last;
                    tx.last_ns = y->last_ns;
                }
            }
            x = &tx;
        } else if (s->m && m < s->nm && (!p->nsets || u % p->nsets == 0)) {
            x = &s->m[m]; /* no step figures: the whole metric in its first set */
        }
        if (x) { /* none: a second without the plan's figures counts 0 */
            v->n = x->n;
            v->nonzero = x->nonzero;
            v->sum = x->sum;
            v->t_n += x->n;
            v->t_nonzero += x->nonzero;
            v->t_sum += x->sum;
            if (x->last_ns && p->metrics[u].kind == SQ_MK_GAUGE) {
                v->last = x->last;
                v->has_last = true;
            }
        } else {
            v->n = v->nonzero = 0;
            v->sum = 0;
        }
    }
    pthread_mutex_lock(&p->mu);
    p->points++;
    if (p->n == QCAP || p->stop) {
        p->dropped++;
    } else {
        if (p->nmetrics)
            memcpy(&p->mq[((p->head + p->n) % QCAP) * p->nmetrics], p->mtot,
                   p->nmetrics * sizeof(*p->mtot));
        p->q[(p->head + p->n) % QCAP] = *t;
        p->n++;
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
}

void sq_push_set_start(struct sq_push *p, double wall_s)
{
    if (p && wall_s > 0)
        p->start_wall_s = wall_s;
}

void sq_push_finish(struct sq_push *p, double deadline_s)
{
    if (!p || !p->started)
        return;
    atomic_store(&p->stop_by_ns, sq_now_ns() + (int64_t)(deadline_s * 1e9));
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    p->started = false;
    pthread_mutex_lock(&p->mu);
    p->dropped += p->n; /* a sender that gave up early (out of memory) left these */
    p->n = 0;
    pthread_mutex_unlock(&p->mu);
}

void sq_push_stats(const struct sq_push *p, struct sq_push_stats *out)
{
    struct sq_push *m = (struct sq_push *)p; /* the lock only */
    pthread_mutex_lock(&m->mu);
    out->points = p->points;
    out->sent = p->sent;
    out->failed = p->failed;
    out->dropped = p->dropped;
    out->posts = p->posts;
    snprintf(out->last_error, sizeof(out->last_error), "%s", p->last_error);
    pthread_mutex_unlock(&m->mu);
}

const char *sq_push_url(const struct sq_push *p)
{
    return p->url;
}

json_t *sq_push_json(const struct sq_push *p)
{
    struct sq_push_stats s;
    sq_push_stats(p, &s);
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:s?}", "url", p->url, "points",
                     (json_int_t)s.points, "sent", (json_int_t)s.sent, "failed",
                     (json_int_t)s.failed, "dropped", (json_int_t)s.dropped, "posts",
                     (json_int_t)s.posts, "last_error", s.last_error[0] ? s.last_error : NULL);
}

void sq_push_free(struct sq_push *p)
{
    if (!p)
        return;
    if (p->started)
        sq_push_finish(p, 0);
    if (p->url && p->path && p->run && p->run_id) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
    }
    free(p->path);
    free(p->url);
    free(p->run);
    free(p->run_id);
    for (uint32_t m = 0; p->metrics && m < p->nmetrics; m++) {
        free((char *)p->metrics[m].name);
        for (uint32_t i = 0; i < p->metrics[m].ntags; i++) {
            free(p->metrics[m].tk[i]);
            free(p->metrics[m].tv[i]);
        }
        free(p->metrics[m].tk);
        free(p->metrics[m].tv);
    }
    free(p->step_set);
    free(p->metrics);
    free(p->mq);
    free(p->mtot);
    if (p->auth)
        explicit_bzero(p->auth, strlen(p->auth));
    free(p->auth);
    sq_tls_client_free(p->tls);
    free(p);
}
