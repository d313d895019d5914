/* sink/subs.c - N subscribers beside a load (see subs.h).
 *
 * Threads: min(threads, n), subscriber i on thread i % threads. Each thread runs its own loop
 * with its subscribers' connections (subscribe.c's sq_sink__bus, its messages handed here
 * instead of to a sink's ledger) and sweeps them every 100 ms (connect timeouts, retries,
 * MQTT keep-alive). A message costs two relaxed atomic adds on its subscriber (the main thread
 * reads them while it waits for the last messages), a search for a stamp, and one record in
 * the thread's own latency histogram. No lock anywhere; the histograms are merged after join.
 */
#include "sink/subs.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "loop/loop.h"
#include "proto/busurl.h"
#include "proto/stamp.h"
#include "sink/internal.h"
#include "stats/hist.h"

#define SWEEP_NS (100 * SQ_NS_PER_MS)

struct sub {
    struct sq_sink__bus *b;
    struct subs_thread *t;
    uint64_t messages, bytes; /* atomic */
    int64_t last_ns;          /* atomic: monotonic time of the last message */
};

struct subs_thread {
    struct sq_subs *s;
    struct sq_loop *loop;
    pthread_t tid;
    bool started;
    struct sq_hist *lat; /* e2e, µs: this thread's alone until join */
    uint64_t unstamped, skewed;
    uint32_t first, n; /* its subscribers: subs[first + k * nthreads]... see sub_of */
};

struct sq_subs {
    struct sq_sink_config cfg; /* what subscribe.c reads (its URL is url_buf) */
    char *url_buf;
    bool nats;
    char *group, *subject, *shown_url;
    char *stream;           /* JetStream pull consumers (NULL: core / MQTT subscriptions) */
    char subscription[320]; /* the filter as subscribed: "$share/GROUP/TOPIC" when shared */
    uint32_t n, nthreads;
    struct sub *subs;
    struct subs_thread *threads;
    int stop; /* atomic */
    bool finished;
    int64_t go_ns, end_ns;
    uint64_t published;
    bool published_known;
};

static void on_msg(void *ud, const char *p, size_t n)
{
    struct sub *u = ud;
    struct subs_thread *t = u->t;
    __atomic_add_fetch(&u->messages, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&u->bytes, n, __ATOMIC_RELAXED);
    __atomic_store_n(&u->last_ns, sq_now_ns(), __ATOMIC_RELAXED);
    struct sq_stamp st;
    if (!sq_stamp_find(p, n, &st, NULL, NULL)) {
        t->unstamped++;
        return;
    }
    int64_t d = sq_stamp_now_ns() - st.ns;
    if (d < 0) {
        t->skewed++; /* the publisher's clock is ahead of ours */
        return;
    }
    int64_t us = d / 1000;
    sq_hist_record(t->lat, us < SQ_LATENCY_LOWEST_US ? SQ_LATENCY_LOWEST_US : us);
}

static void *thread_main(void *arg)
{
    struct subs_thread *t = arg;
    struct sq_subs *s = t->s;
    int64_t next = 0;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        int64_t now = sq_loop_update_now(t->loop);
        if (now >= next) {
            for (uint32_t i = t->first; i < s->n; i += s->nthreads)
                sq_sink__bus_sweep(s->subs[i].b, now);
            next = now + SWEEP_NS;
        }
        if (sq_loop_run_once(t->loop, 20 * SQ_NS_PER_MS) < 0)
            break;
    }
    return NULL;
}

static void stop_threads(struct sq_subs *s)
{
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    for (uint32_t k = 0; k < s->nthreads; k++)
        if (s->threads[k].started) {
            pthread_join(s->threads[k].tid, NULL);
            s->threads[k].started = false;
        }
}

void sq_subs_free(struct sq_subs *s)
{
    if (!s)
        return;
    if (s->threads)
        stop_threads(s);
    for (uint32_t i = 0; s->subs && i < s->n; i++)
        sq_sink__bus_free(s->subs[i].b);
    for (uint32_t k = 0; s->threads && k < s->nthreads; k++) {
        sq_loop_free(s->threads[k].loop);
        sq_hist_free(s->threads[k].lat);
    }
    free(s->subs);
    free(s->threads);
    free(s->url_buf);
    free(s->group);
    free(s->stream);
    free(s->subject);
    free(s->shown_url);
    free(s);
}

/* The URL the subscribers use: the load's, or for an MQTT shared subscription the same with
 * "$share/GROUP/" before the topic. */
static int sub_url(struct sq_subs *s, const struct sq_subs_opts *o, bool mqtt)
{
    if (!o->group || !mqtt) {
        s->url_buf = strdup(o->url);
        return s->url_buf ? 0 : -ENOMEM;
    }
    const char *auth = strstr(o->url, "://");
    const char *slash = auth ? strchr(auth + 3, '/') : NULL;
    if (!slash)
        return -SQ_EUSAGE;
    size_t len = strlen(o->url) + strlen(o->group) + 16;
    s->url_buf = malloc(len);
    if (!s->url_buf)
        return -ENOMEM;
    snprintf(s->url_buf, len, "%.*s/$share/%s/%s", (int)(slash - o->url), o->url, o->group,
             slash + 1);
    return 0;
}

int sq_subs_check(const struct sq_subs_opts *o, char *err, size_t len)
{
    if (o->n < 1 || o->n > SQ_SUBS_MAX) {
        snprintf(err, len, "--subscribers: %u is not a subscriber count (1..%u)", o->n,
                 SQ_SUBS_MAX);
        return -SQ_EUSAGE;
    }
    struct sq_bus_url u;
    const char *why = NULL;
    if (sq_bus_url_parse(o->url, SQ_BUS_URL_TARGET | SQ_BUS_URL_FILTER, &u, &why) < 0) {
        snprintf(err, len, "--subscribers: '%s': %s", o->url, why ? why : "not a bus URL");
        return -SQ_EUSAGE;
    }
    bool nats = u.kind == SQ_BUS_NATS;
    sq_bus_url_dispose(&u);
    if (o->group && (!o->group[0] || strchr(o->group, '/') || strchr(o->group, ' ') ||
                     strchr(o->group, '+') || strchr(o->group, '#'))) {
        snprintf(err, len, "--queue: '%s' is not a group name (no '/', '+', '#' or blank)",
                 o->group);
        return -SQ_EUSAGE;
    }
    if (o->stream && !nats) {
        snprintf(err, len, "--stream: JetStream consumers are NATS's (the URL is MQTT)");
        return -SQ_EUSAGE;
    }
    return 0;
}

int sq_subs_start(const struct sq_subs_opts *o, struct sq_subs **out, char *err, size_t len)
{
    *out = NULL;
    int rc = sq_subs_check(o, err, len);
    if (rc < 0)
        return rc;
    struct sq_bus_url u;
    const char *why = NULL;
    if (sq_bus_url_parse(o->url, SQ_BUS_URL_TARGET | SQ_BUS_URL_FILTER, &u, &why) < 0) {
        snprintf(err, len, "--subscribers: '%s': %s", o->url, why ? why : "not a bus URL");
        return -SQ_EUSAGE;
    }
    bool nats = u.kind == SQ_BUS_NATS;
    struct sq_subs *s = calloc(1, sizeof(*s));
    if (!s) {
        sq_bus_url_dispose(&u);
        return -ENOMEM;
    }
    s->nats = nats;
    s->n = o->n;
    s->nthreads = o->threads ? o->threads : 1;
    if (s->nthreads > s->n)
        s->nthreads = s->n;
    char shown[400];
    bool v6 = strchr(u.host, ':') != NULL;
    snprintf(shown, sizeof(shown), "%s://%s%s%s:%u",
             nats ? (u.tls ? "tls" : "nats") : (u.tls ? "mqtts" : "mqtt"), v6 ? "[" : "", u.host,
             v6 ? "]" : "", u.port);
    s->shown_url = strdup(shown);
    s->subject = strdup(u.target);
    s->group = o->group ? strdup(o->group) : NULL;
    if (o->group && !nats)
        snprintf(s->subscription, sizeof(s->subscription), "$share/%s/%s", o->group, u.target);
    else
        snprintf(s->subscription, sizeof(s->subscription), "%s", u.target);
    sq_bus_url_dispose(&u);
    rc = !s->shown_url || !s->subject || (o->group && !s->group) ? -ENOMEM : 0;
    if (rc == 0)
        rc = sub_url(s, o, !nats);
    if (rc == 0) {
        s->cfg.mqtt_qos = o->mqtt_qos;
        s->cfg.mqtt_version = o->mqtt_version;
        s->cfg.egress = o->egress;
        s->cfg.tls = o->tls;
        if (nats && o->stream) {
            s->cfg.nats = s->url_buf;
            s->cfg.nats_stream = s->stream = strdup(o->stream);
            s->cfg.nats_durable = s->group; /* shared by the group; NULL: ephemeral each */
            s->cfg.nats_pull = !o->push;
            s->cfg.nats_push = o->push;
            s->cfg.nats_batch = o->push ? 0 : o->batch ? o->batch : 100;
            if (!s->stream)
                rc = -ENOMEM;
        } else if (nats) {
            s->cfg.nats = s->url_buf;
            s->cfg.nats_queue = s->group;
        } else {
            s->cfg.mqtt = s->url_buf;
        }
        s->subs = calloc(s->n, sizeof(*s->subs));
        s->threads = calloc(s->nthreads, sizeof(*s->threads));
        if (!s->subs || !s->threads)
            rc = -ENOMEM;
    }
    for (uint32_t k = 0; rc == 0 && k < s->nthreads; k++) {
        struct subs_thread *t = &s->threads[k];
        t->s = s;
        t->first = k;
        rc = sq_loop_new(&t->loop);
        if (rc == 0)
            rc = sq_latency_hist_new(&t->lat);
    }
    for (uint32_t i = 0; rc == 0 && i < s->n; i++) {
        struct sub *x = &s->subs[i];
        x->t = &s->threads[i % s->nthreads];
        rc = sq_sink__bus_new(NULL, x->t->loop, nats ? SQ_SINK_NATS : SQ_SINK_MQTT, &s->cfg, &x->b,
                              err, len);
        if (rc == 0)
            sq_sink__bus_on_message(x->b, on_msg, x);
    }
    for (uint32_t k = 0; rc == 0 && k < s->nthreads; k++) {
        int e = pthread_create(&s->threads[k].tid, NULL, thread_main, &s->threads[k]);
        if (e) {
            snprintf(err, len, "--subscribers: cannot start a thread: %s", strerror(e));
            rc = -e;
        } else {
            s->threads[k].started = true;
        }
    }
    if (rc < 0) {
        if (rc == -ENOMEM && !err[0])
            snprintf(err, len, "--subscribers: out of memory");
        sq_subs_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static uint32_t count_subscribed(const struct sq_subs *s)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        uint64_t m, r;
        bool now;
        sq_sink__bus_counts(s->subs[i].b, &m, &r, &now);
        k += now;
    }
    return k;
}

static void nap(void)
{
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

uint32_t sq_subs_wait(struct sq_subs *s, int64_t timeout_ns, volatile int *stop)
{
    int64_t end = sq_now_ns() + timeout_ns;
    uint32_t k;
    while ((k = count_subscribed(s)) < s->n && sq_now_ns() < end && !(stop && *stop))
        nap();
    return k;
}

void sq_subs_go(struct sq_subs *s)
{
    s->go_ns = sq_now_ns();
}

static uint64_t msgs(const struct sub *u)
{
    return __atomic_load_n(&u->messages, __ATOMIC_RELAXED);
}

void sq_subs_finish(struct sq_subs *s, uint64_t published, int64_t quiet_ns, volatile int *stop)
{
    if (s->finished)
        return;
    s->finished = true;
    if (!s->go_ns)
        s->go_ns = sq_now_ns();
    s->published = published;
    s->published_known = published != UINT64_MAX;
    uint64_t last_total = UINT64_MAX;
    int64_t quiet_since = sq_now_ns();
    while (s->published_known && !(stop && *stop)) {
        uint64_t total = 0, min = UINT64_MAX;
        for (uint32_t i = 0; i < s->n; i++) {
            uint64_t m = msgs(&s->subs[i]);
            total += m;
            min = m < min ? m : min;
        }
        if (s->group ? total >= published : min >= published)
            break;
        int64_t now = sq_now_ns();
        if (total != last_total) {
            last_total = total;
            quiet_since = now;
        } else if (now - quiet_since >= quiet_ns) {
            break;
        }
        nap();
    }
    stop_threads(s);
    s->end_ns = sq_now_ns();
}

json_t *sq_subs_json(const struct sq_subs *s)
{
    struct sq_hist *lat = NULL;
    if (sq_latency_hist_new(&lat) < 0)
        return NULL;
    uint64_t unst = 0, skew = 0;
    for (uint32_t k = 0; k < s->nthreads; k++) {
        sq_hist_merge(lat, s->threads[k].lat);
        unst += s->threads[k].unstamped;
        skew += s->threads[k].skewed;
    }
    double window = (double)((s->end_ns ? s->end_ns : sq_now_ns()) - s->go_ns) / 1e9;
    json_t *per = json_array();
    uint64_t total = 0, bytes = 0, min = UINT64_MAX, max = 0, reconnects = 0;
    uint64_t acks = 0, fetches = 0, redelivered = 0;
    uint32_t subscribed = 0;
    double sum = 0, sumsq = 0, rate_min = INFINITY, rate_max = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const struct sub *u = &s->subs[i];
        uint64_t m = msgs(u), r, mm;
        bool now;
        sq_sink__bus_counts(u->b, &mm, &r, &now);
        uint64_t by = __atomic_load_n(&u->bytes, __ATOMIC_RELAXED);
        int64_t last = __atomic_load_n(&u->last_ns, __ATOMIC_RELAXED);
        /* msgs/s over the subscriber's active time: from the load's start to its last message */
        double span = m && last > s->go_ns ? (double)(last - s->go_ns) / 1e9 : window;
        double rate = m && span > 0 ? (double)m / span : 0;
        total += m;
        bytes += by;
        reconnects += r;
        subscribed += now || m;
        min = m < min ? m : min;
        max = m > max ? m : max;
        sum += (double)m;
        sumsq += (double)m * (double)m;
        rate_min = rate < rate_min ? rate : rate_min;
        rate_max = rate > rate_max ? rate : rate_max;
        json_t *o =
            json_pack("{s:I, s:I, s:I, s:f, s:I}", "id", (json_int_t)i, "messages", (json_int_t)m,
                      "bytes", (json_int_t)by, "msgs_per_s", rate, "reconnects", (json_int_t)r);
        if (o && s->stream) {
            uint64_t a, fe, rd;
            sq_sink__bus_js_counts(u->b, &a, &fe, &rd);
            acks += a;
            fetches += fe;
            redelivered += rd;
            json_object_set_new(o, "acks", json_integer((json_int_t)a));
            json_object_set_new(o, "redelivered", json_integer((json_int_t)rd));
        }
        if (o && s->published_known && !s->group)
            json_object_set_new(o, "lag", json_integer((json_int_t)s->published - (json_int_t)m));
        json_array_append_new(per, o);
    }
    double mean = sum / s->n;
    double var = sumsq / s->n - mean * mean;
    uint64_t expected = s->group ? s->published : s->published * s->n;
    json_t *spread =
        json_pack("{s:I, s:I, s:f, s:f, s:f, s:f}", "min", (json_int_t)min, "max", (json_int_t)max,
                  "mean", mean, "stddev", var > 0 ? sqrt(var) : 0.0, "msgs_per_s_min",
                  isfinite(rate_min) ? rate_min : 0.0, "msgs_per_s_max", rate_max);
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:o, s:I, s:I, s:f, s:f, s:I, s:o, s:I, s:I, s:o, "
        "s:o}",
        "kind", s->nats ? "nats" : "mqtt", "url", s->shown_url, s->nats ? "subject" : "topic",
        s->subject, "mode",
        !s->group ? "fan_out"
        : s->nats ? "queue"
                  : "shared",
        "count", (json_int_t)s->n, "threads", (json_int_t)s->nthreads, "subscription",
        s->subscription, "group", s->group ? json_string(s->group) : json_null(), "subscribed",
        (json_int_t)subscribed, "received", (json_int_t)total, "duration_s", window, "msgs_per_s",
        window > 0 ? (double)total / window : 0.0, "bytes", (json_int_t)bytes, "published",
        s->published_known ? json_integer((json_int_t)s->published) : json_null(), "reconnects",
        (json_int_t)reconnects, "unstamped", (json_int_t)unst, "spread", spread, "per_subscriber",
        per);
    if (j && s->published_known) {
        json_object_set_new(j, "expected", json_integer((json_int_t)expected));
        json_object_set_new(j, "lag", json_integer((json_int_t)expected - (json_int_t)total));
    } else if (j) {
        json_object_set_new(j, "expected", json_null());
        json_object_set_new(j, "lag", json_null());
    }
    if (j) {
        json_object_set_new(j, "clock_skewed", json_integer((json_int_t)skew));
        json_object_set_new(j, "latency", sq_sink__latency_json(lat));
    }
    if (j && s->stream)
        json_object_set_new(j, "jetstream",
                            json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:I}", "stream", s->stream,
                                      "consumer", s->cfg.nats_push ? "push" : "pull", "durable",
                                      s->group ? json_string(s->group) : json_null(), "batch",
                                      (json_int_t)s->cfg.nats_batch, "fetches", (json_int_t)fetches,
                                      "acks", (json_int_t)acks, "redelivered",
                                      (json_int_t)redelivered));
    sq_hist_free(lat);
    return j;
}
