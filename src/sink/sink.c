/* sink/sink.c - the ledger of arrivals, the HTTP source, the sink's thread, its result block
 * (see sink.h).
 *
 * The ledger. Streams are found by their run field in a fixed table (open addressing; a new
 * stream is inserted under a mutex, looked up without one). Each stream keeps a bitmap of the
 * sequence numbers that arrived, in pages of 2^20 bits (128 KiB) allocated on first use, up to
 * 2^32 sequence numbers per stream, and the highest sequence number seen (+1, `top`). An arrival
 * sets its bit with an atomic fetch-or: the thread that flips it delivers the event, any other
 * (or later) arrival of the same bit is a duplicate. So a duplicate is found exactly, whichever
 * source and thread each copy came through, and no event is delivered twice.
 *
 * Lost is a count of clear bits: below `top` (or below what the sender said it sent, after
 * sq_sink_expect), counted by walking the bitmap. During the run the per-second series counts a
 * gap once it is `settle` old (below the `top` the stream had `settle` ago), so events that are
 * merely late are not reported lost; at the end every gap counts.
 *
 * Shards. Every recording thread (each HTTP worker, the sink's thread) has a shard: counters
 * and two latency histograms (the whole run so far, the current second) under a mutex taken
 * once per event, which only the once-a-second tick and the final read also take, so recording
 * never waits in practice. An arrival is recorded in the current second's histogram only; the
 * tick folds that into the run's (the result merges both).
 */
#include "sink/sink.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/b64.h"
#include "base/clock.h"
#include "loop/loop.h"
#include "proto/stamp.h"
#include "server/server.h"
#include "proto/busurl.h"
#include "sink/internal.h"
#include "stats/hist.h"

#define MAX_STREAMS  4096
#define PAGE_SHIFT   20
#define PAGE_SEQS    (1ull << PAGE_SHIFT)
#define PAGE_WORDS   (PAGE_SEQS / 64)
#define MAX_PAGES    4096
#define MAX_SEQ      (PAGE_SEQS * MAX_PAGES) /* 2^32 */
#define HISTORY      64                      /* seconds of `top` kept for the settle */
#define STREAM_SHIFT 12                      /* engine/run.h's SQ_STAMP_STREAM_BITS */

struct stream {
    uint64_t run;
    uint64_t *pages[MAX_PAGES]; /* atomic pointers */
    uint64_t top;               /* highest sequence number seen + 1 (atomic) */
    uint64_t expected;          /* what the sender sent (has_expected) */
    int has_expected;           /* atomic */
    /* the tick's own: `top` at the end of each of the last HISTORY seconds */
    uint64_t top_at[HISTORY];
    uint64_t lost_reported;
    uint64_t duplicates, out_of_order; /* atomic: sq_sink_streams' per-stream counts */
};

struct shard {
    pthread_mutex_t mu;
    uint64_t delivered, duplicates, out_of_order, unstamped, foreign, out_of_range, skewed;
    uint64_t events, bytes;
    struct sq_hist *total, *second;
    struct sq_sink_scratch *scratch; /* the finder's state for this thread */
};

struct sq_sink {
    struct sq_sink_config cfg;
    bool settle_stopped; /* *stop cut sq_sink_settle's wait short */
    struct sq_sink_finder *finder;
    struct stream *streams[MAX_STREAMS]; /* atomic pointers */
    uint32_t nstreams;
    pthread_mutex_t streams_mu;
    struct shard *shards;
    int nshards; /* HTTP workers + the sink's thread */
    struct sq_server *server;
    uint16_t http_port;
    struct sq_loop *loop;
    struct sq_sink__bus *bus[2];
    int nbus;
    pthread_t tid;
    bool thread;
    int stop; /* atomic */
    int stopped;
    int64_t start_ns;    /* monotonic */
    int64_t last_ns;     /* monotonic, the latest arrival (atomic) */
    uint64_t expected;   /* atomic */
    uint64_t run_expect; /* the run sq_sink_expect named */
    struct sq_sink_second *series;
    size_t nseries, capseries;
    uint64_t last[5];     /* the previous tick's cumulative counts */
    struct sq_hist *tick; /* the tick's merge scratch */
    uint64_t max_pages;   /* sq_sink_ledger_new's bitmap budget (0: none) */
    uint64_t npages;      /* atomic: pages made while a budget holds */
};

/* ---- streams ---- */

static uint32_t run_hash(uint64_t run)
{
    run ^= run >> 33;
    run *= 0xFF51AFD7ED558CCDull;
    run ^= run >> 33;
    return (uint32_t)run & (MAX_STREAMS - 1);
}

/* The stream of `run`, made on first sight; NULL when the table is full. */
static struct stream *stream_of(struct sq_sink *s, uint64_t run)
{
    uint32_t i = run_hash(run);
    for (uint32_t k = 0; k < MAX_STREAMS; k++, i = (i + 1) & (MAX_STREAMS - 1)) {
        struct stream *st = __atomic_load_n(&s->streams[i], __ATOMIC_ACQUIRE);
        if (!st)
            break;
        if (st->run == run)
            return st;
    }
    pthread_mutex_lock(&s->streams_mu);
    struct stream *found = NULL;
    i = run_hash(run);
    for (uint32_t k = 0; k < MAX_STREAMS; k++, i = (i + 1) & (MAX_STREAMS - 1)) {
        struct stream *st = s->streams[i];
        if (st && st->run == run) {
            found = st;
            break;
        }
        if (!st) {
            if (s->nstreams >= MAX_STREAMS / 2)
                break; /* keep the table sparse: lookups stay short */
            st = calloc(1, sizeof(*st));
            if (!st)
                break;
            st->run = run;
            s->nstreams++;
            __atomic_store_n(&s->streams[i], st, __ATOMIC_RELEASE);
            found = st;
            break;
        }
    }
    pthread_mutex_unlock(&s->streams_mu);
    return found;
}

static uint64_t *page_of(struct stream *st, uint64_t seq)
{
    uint64_t **slot = &st->pages[seq >> PAGE_SHIFT];
    uint64_t *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (p)
        return p;
    uint64_t *fresh = calloc(PAGE_WORDS, sizeof(uint64_t));
    if (!fresh)
        return NULL;
    uint64_t *expect = NULL;
    if (__atomic_compare_exchange_n(slot, &expect, fresh, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return fresh;
    free(fresh); /* another thread made it first */
    return expect;
}

/* Clear bits in [0, limit): the sequence numbers that did not arrive. With list, the first
 * `max` of them are written there (*nlist counts them). */
static uint64_t missing(const struct stream *st, uint64_t limit, uint64_t *list, uint32_t max,
                        uint32_t *nlist)
{
    uint64_t miss = 0;
    if (limit > MAX_SEQ)
        limit = MAX_SEQ;
    for (uint64_t base = 0; base < limit; base += PAGE_SEQS) {
        const uint64_t *p = __atomic_load_n(&st->pages[base >> PAGE_SHIFT], __ATOMIC_ACQUIRE);
        uint64_t n = limit - base < PAGE_SEQS ? limit - base : PAGE_SEQS;
        if (!p) {
            for (uint64_t q = 0; list && *nlist < max && q < n; q++)
                list[(*nlist)++] = base + q;
            miss += n;
            continue;
        }
        for (uint64_t w = 0; w * 64 < n; w++) {
            uint64_t bits = __atomic_load_n(&p[w], __ATOMIC_RELAXED);
            uint64_t valid = n - w * 64 >= 64 ? ~0ull : (1ull << (n - w * 64)) - 1;
            uint64_t clear = ~bits & valid;
            if (!clear)
                continue;
            miss += (uint64_t)__builtin_popcountll(clear);
            while (list && clear && *nlist < max) {
                list[(*nlist)++] = base + w * 64 + (uint64_t)__builtin_ctzll(clear);
                clear &= clear - 1;
            }
        }
    }
    return miss;
}

/* ---- recording ---- */

struct rec {
    struct sq_sink *s;
    struct shard *sh;
    int64_t now_real;
    int64_t now_mono;
    bool any;
    struct sq_sink_hit *hit; /* sq_sink_record's: the first stamp's fate (NULL: none asked) */
};

/* Called by the finder for every stamp of one event, with the shard's mutex held. */
static void record(void *ud, const struct sq_stamp *stamp)
{
    struct rec *r = ud;
    struct sq_sink *s = r->s;
    struct shard *sh = r->sh;
    r->any = true;
    struct sq_sink_hit *hit = r->hit && !r->hit->stamped ? r->hit : NULL;
    if (hit) {
        hit->stamped = true;
        hit->run = stamp->run;
        hit->seq = stamp->seq;
        hit->latency_ns = r->now_real > stamp->ns ? r->now_real - stamp->ns : 0;
    }
    if (s->cfg.run_id && (stamp->run >> STREAM_SHIFT) != (s->cfg.run_id >> STREAM_SHIFT)) {
        sh->foreign++;
        if (hit)
            hit->unmatched = true;
        return;
    }
    struct stream *st = stamp->seq < MAX_SEQ ? stream_of(s, stamp->run) : NULL;
    if (st && s->max_pages &&
        !__atomic_load_n(&st->pages[stamp->seq >> PAGE_SHIFT], __ATOMIC_ACQUIRE) &&
        __atomic_fetch_add(&s->npages, 1, __ATOMIC_RELAXED) >= s->max_pages)
        st = NULL; /* over the ledger's budget: a new page is not made */
    uint64_t *page = st ? page_of(st, stamp->seq) : NULL;
    if (!page) {
        sh->out_of_range++;
        if (hit)
            hit->unmatched = true;
        return;
    }
    uint64_t bit = 1ull << (stamp->seq & 63);
    uint64_t old =
        __atomic_fetch_or(&page[(stamp->seq & (PAGE_SEQS - 1)) >> 6], bit, __ATOMIC_RELAXED);
    if (old & bit) {
        sh->duplicates++;
        __atomic_fetch_add(&st->duplicates, 1, __ATOMIC_RELAXED);
        if (hit)
            hit->duplicate = true;
        return;
    }
    uint64_t top = __atomic_load_n(&st->top, __ATOMIC_RELAXED);
    while (stamp->seq + 1 > top &&
           !__atomic_compare_exchange_n(&st->top, &top, stamp->seq + 1, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
        ;
    sh->delivered++;
    sh->out_of_order += stamp->seq + 1 < top;
    if (stamp->seq + 1 < top) {
        __atomic_fetch_add(&st->out_of_order, 1, __ATOMIC_RELAXED);
        if (hit)
            hit->out_of_order = true;
    }
    int64_t lat = r->now_real - stamp->ns;
    if (lat < 0) {
        sh->skewed++; /* the sender's clock is ahead of ours */
        lat = 0;
    }
    /* the current second only: the tick folds it into the run's histogram */
    sq_hist_record(sh->second, lat / 1000);
}

/* One event: the shard's mutex is taken once around the finder and the counts (only the
 * once-a-second tick and the final read contend for it). */
void sq_sink__event(struct sq_sink *s, int shard, const char *body, size_t len,
                    const struct sq_sink_field *fields, size_t nfields)
{
    struct shard *sh = &s->shards[shard];
    struct rec r = {.s = s, .sh = sh, .now_real = sq_stamp_now_ns()};
    pthread_mutex_lock(&sh->mu);
    size_t n = sq_sink_find(s->finder, sh->scratch, body, len, fields, nfields, record, &r);
    sh->events++;
    sh->bytes += len;
    if (n == 0)
        sh->unstamped++;
    pthread_mutex_unlock(&sh->mu);
    __atomic_store_n(&s->last_ns, sq_now_ns(), __ATOMIC_RELAXED);
}

int sq_sink__bus_shard(const struct sq_sink *s)
{
    return s->nshards - 1;
}

struct sq_sink_scratch *sq_sink__bus_scratch(struct sq_sink *s)
{
    return s->shards[s->nshards - 1].scratch;
}

/* ---- HTTP ---- */

static void on_request(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    struct sq_sink *s = ud;
    struct sq_sink_field fields[SQ_SERVER_MAX_HEADERS];
    size_t n = req->num_headers < SQ_SERVER_MAX_HEADERS ? req->num_headers : SQ_SERVER_MAX_HEADERS;
    for (size_t i = 0; i < n; i++)
        fields[i] = (struct sq_sink_field){req->headers[i].name, req->headers[i].value,
                                           req->headers[i].name_len, req->headers[i].value_len};
    sq_sink__event(s, req->worker, req->body, req->body_len, fields, n);
    resp->status = s->cfg.http_status ? s->cfg.http_status : 202;
}

/* ---- the sink's thread: bus sources and the per-second series ---- */

static void tick(struct sq_sink *s, int64_t now, bool final)
{
    uint64_t c[5] = {0, 0, 0, 0, 0}; /* delivered, duplicates, out of order, unstamped, lost */
    sq_hist_reset(s->tick);
    for (int i = 0; i < s->nshards; i++) {
        struct shard *sh = &s->shards[i];
        pthread_mutex_lock(&sh->mu);
        c[0] += sh->delivered;
        c[1] += sh->duplicates;
        c[2] += sh->out_of_order;
        c[3] += sh->unstamped;
        sq_hist_merge(s->tick, sh->second);
        sq_hist_merge(sh->total, sh->second);
        sq_hist_reset(sh->second);
        pthread_mutex_unlock(&sh->mu);
    }
    /* lost so far: gaps below what each stream's top was `settle` ago (all of them at the end) */
    int64_t settle = s->cfg.settle_ns;
    uint32_t back = (uint32_t)((settle + SQ_NS_PER_S - 1) / SQ_NS_PER_S);
    if (back >= HISTORY)
        back = HISTORY - 1;
    uint32_t sec = (uint32_t)s->nseries;
    for (uint32_t i = 0; i < MAX_STREAMS; i++) {
        struct stream *st = __atomic_load_n(&s->streams[i], __ATOMIC_ACQUIRE);
        if (!st)
            continue;
        uint64_t top = __atomic_load_n(&st->top, __ATOMIC_RELAXED);
        st->top_at[sec % HISTORY] = top;
        uint64_t limit = final ? top : sec >= back ? st->top_at[(sec - back) % HISTORY] : 0;
        if (__atomic_load_n(&st->has_expected, __ATOMIC_ACQUIRE) && final)
            limit = st->expected;
        uint64_t lost = limit ? missing(st, limit, NULL, 0, NULL) : 0;
        if (lost > st->lost_reported) {
            c[4] += lost - st->lost_reported;
            st->lost_reported = lost;
        }
    }
    c[4] += s->last[4];
    struct sq_sink_second e = {
        .t_s = (double)(now - s->start_ns) / 1e9,
        .delivered = c[0] - s->last[0],
        .duplicates = c[1] - s->last[1],
        .out_of_order = c[2] - s->last[2],
        .unstamped = c[3] - s->last[3],
        .lost = c[4] - s->last[4],
    };
    memcpy(s->last, c, sizeof(c));
    if (sq_hist_total(s->tick)) {
        e.p50_us = sq_hist_percentile(s->tick, 50);
        e.p90_us = sq_hist_percentile(s->tick, 90);
        e.p99_us = sq_hist_percentile(s->tick, 99);
        e.max_us = sq_hist_max(s->tick);
    }
    if (s->nseries == s->capseries) {
        size_t cap = s->capseries ? s->capseries * 2 : 64;
        struct sq_sink_second *v = realloc(s->series, cap * sizeof(*v));
        if (!v)
            return;
        s->series = v;
        s->capseries = cap;
    }
    s->series[s->nseries++] = e;
    if (s->cfg.on_tick && !final)
        s->cfg.on_tick(s->cfg.tick_ud, &e);
}

static void *sink_main(void *arg)
{
    struct sq_sink *s = arg;
    int64_t next_tick = s->start_ns + SQ_NS_PER_S, next_sweep = s->start_ns;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        int64_t now = sq_now_ns();
        int64_t wait = next_tick - now;
        if (wait > 50 * SQ_NS_PER_MS)
            wait = 50 * SQ_NS_PER_MS; /* checks the stop flag this often */
        if (wait < 0)
            wait = 0;
        if (sq_loop_run_once(s->loop, wait) < 0)
            break;
        now = sq_loop_update_now(s->loop);
        if (now >= next_sweep) {
            for (int i = 0; i < s->nbus; i++)
                sq_sink__bus_sweep(s->bus[i], now);
            next_sweep = now + 100 * SQ_NS_PER_MS;
        }
        if (now >= next_tick) {
            tick(s, now, false);
            next_tick += SQ_NS_PER_S;
            if (next_tick < now)
                next_tick = now + SQ_NS_PER_S;
        }
    }
    return NULL;
}

/* ---- lifecycle ---- */

static int split_listen(const char *spec, char *host, size_t hlen, uint16_t *port)
{
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec)
        return -1;
    const char *h = spec;
    size_t n = (size_t)(colon - spec);
    if (h[0] == '[' && n >= 2 && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n == 0 || n >= hlen)
        return -1;
    memcpy(host, h, n);
    host[n] = '\0';
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || p < 0 || p > 65535)
        return -1;
    *port = (uint16_t)p;
    return 0;
}

int sq_sink_check(const struct sq_sink_config *cfg, char *err, size_t len)
{
    char host[256];
    uint16_t port;
    if (!cfg->http && !cfg->nats && !cfg->mqtt)
        return (snprintf(err, len, "no source: --http HOST:PORT, --nats URL or --mqtt URL"),
                -SQ_EUSAGE);
    if (cfg->http && split_listen(cfg->http, host, sizeof(host), &port) < 0)
        return (snprintf(err, len, "--http: '%s' is not HOST:PORT (127.0.0.1:9000)", cfg->http),
                -SQ_EUSAGE);
    if (cfg->http_threads < 0 || cfg->http_threads > 64)
        return (snprintf(err, len, "--threads: from 1 to 64"), -SQ_EUSAGE);
    if (cfg->http_status && (cfg->http_status < 200 || cfg->http_status > 599))
        return (
            snprintf(err, len, "--status: '%d' is not a final status (200..599)", cfg->http_status),
            -SQ_EUSAGE);
    if ((cfg->nats_stream != NULL) != (cfg->nats_durable != NULL))
        return (snprintf(err, len,
                         "--stream and --durable go together (a JetStream durable "
                         "consumer on a stream)"),
                -SQ_EUSAGE);
    if (cfg->nats_stream && !cfg->nats)
        return (snprintf(err, len, "--stream applies to --nats"), -SQ_EUSAGE);
    if (cfg->nats_queue && !cfg->nats)
        return (snprintf(err, len, "--queue applies to --nats"), -SQ_EUSAGE);
    if (cfg->mqtt_qos > 2)
        return (snprintf(err, len, "--qos: '%d' is not a QoS (0, 1 or 2)", cfg->mqtt_qos),
                -SQ_EUSAGE);
    if (cfg->settle_ns < 0)
        return (snprintf(err, len, "--settle: must not be negative"), -SQ_EUSAGE);
    for (int k = 0; k < 2; k++) {
        const char *url = k == 0 ? cfg->nats : cfg->mqtt;
        if (!url)
            continue;
        struct sq_bus_url u;
        const char *why = NULL;
        int urc = sq_bus_url_parse(url, SQ_BUS_URL_TARGET | SQ_BUS_URL_FILTER, &u, &why);
        if (urc == 0 && u.kind != (k == 0 ? SQ_BUS_NATS : SQ_BUS_MQTT)) {
            why = k == 0 ? "expected nats://HOST[:PORT]/SUBJECT"
                         : "expected mqtt://HOST[:PORT]/TOPIC";
            urc = -SQ_EPARSE;
        }
        sq_bus_url_dispose(&u);
        if (urc == -SQ_EPARSE)
            return (snprintf(err, len, "%s: '%s': %s", k == 0 ? "--nats" : "--mqtt", url,
                             why ? why : "not a URL"),
                    -SQ_EUSAGE);
        if (urc < 0)
            return urc;
    }
    struct sq_sink_finder *f;
    int rc = sq_sink_finder_new(cfg->find, &f, err, len);
    if (rc < 0)
        return rc;
    sq_sink_finder_free(f);
    return 0;
}

int sq_sink_start(const struct sq_sink_config *cfg, struct sq_sink **out, char *err, size_t len)
{
    *out = NULL;
    int rc = sq_sink_check(cfg, err, len);
    if (rc < 0)
        return rc;
    struct sq_sink *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    if (!s->cfg.settle_ns)
        s->cfg.settle_ns = SQ_SINK_DEFAULT_SETTLE_NS;
    if (!s->cfg.list_lost)
        s->cfg.list_lost = SQ_SINK_DEFAULT_LIST_LOST;
    if (!s->cfg.http_threads)
        s->cfg.http_threads = 1;
    pthread_mutex_init(&s->streams_mu, NULL);
    s->start_ns = sq_now_ns();
    rc = sq_sink_finder_new(cfg->find, &s->finder, err, len);
    int nsh = (cfg->http ? s->cfg.http_threads : 0) + 1;
    s->shards = calloc((size_t)nsh, sizeof(*s->shards));
    if (rc == 0 && !s->shards)
        rc = -ENOMEM;
    for (int i = 0; rc == 0 && i < nsh; i++) {
        struct shard *sh = &s->shards[i];
        pthread_mutex_init(&sh->mu, NULL);
        s->nshards = i + 1;
        rc = sq_latency_hist_new(&sh->total);
        if (rc == 0)
            rc = sq_latency_hist_new(&sh->second);
        if (rc == 0 && !(sh->scratch = sq_sink_finder_scratch(s->finder)))
            rc = -ENOMEM;
    }
    if (rc == 0)
        rc = sq_latency_hist_new(&s->tick);
    if (rc == 0)
        rc = sq_loop_new(&s->loop);
    if (rc == 0 && cfg->nats)
        rc = sq_sink__bus_new(s, s->loop, SQ_SINK_NATS, &s->cfg, &s->bus[s->nbus++], err, len);
    if (rc == 0 && cfg->mqtt)
        rc = sq_sink__bus_new(s, s->loop, SQ_SINK_MQTT, &s->cfg, &s->bus[s->nbus++], err, len);
    if (rc == 0 && cfg->http) {
        char host[256];
        uint16_t port = 0;
        split_listen(cfg->http, host, sizeof(host), &port);
        struct sq_server_config sc = {
            .host = host,
            .port = port,
            .threads = s->cfg.http_threads,
            .handler = on_request,
            .ud = s,
            .idle_timeout_ns = 120 * SQ_NS_PER_S,
            .header_timeout_ns = 10 * SQ_NS_PER_S,
            .request_timeout_ns = SQ_SERVER_REQUEST_TIMEOUT_DEFAULT,
            .min_body_rate = SQ_SERVER_MIN_BODY_RATE_DEFAULT,
        };
        const char *why = NULL;
        rc = sq_server_start(&sc, &s->server, &why);
        if (rc < 0)
            snprintf(err, len, "--http: cannot listen on %s: %s", cfg->http,
                     why ? why : sq_strerror(rc));
        else
            s->http_port = sq_server_port(s->server);
    }
    if (rc == 0) {
        rc = -pthread_create(&s->tid, NULL, sink_main, s);
        if (rc < 0)
            snprintf(err, len, "cannot start the sink's thread: %s", sq_strerror(rc));
        else
            s->thread = true;
    }
    if (rc < 0) {
        if (rc == -ENOMEM && !err[0])
            snprintf(err, len, "out of memory");
        sq_sink_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

uint16_t sq_sink_http_port(const struct sq_sink *s)
{
    return s->http_port;
}

void sq_sink_expect(struct sq_sink *s, uint64_t run_id, const uint64_t *stamped, uint32_t n)
{
    uint64_t sum = 0;
    for (uint32_t w = 0; w < n; w++) {
        struct stream *st = stream_of(s, run_id + w);
        if (!st)
            continue;
        st->expected = stamped[w];
        __atomic_store_n(&st->has_expected, 1, __ATOMIC_RELEASE);
        sum += stamped[w];
    }
    s->run_expect = run_id;
    __atomic_store_n(&s->expected, sum, __ATOMIC_RELEASE);
}

void sq_sink_totals(struct sq_sink *s, struct sq_sink_totals *t)
{
    memset(t, 0, sizeof(*t));
    for (int i = 0; i < s->nshards; i++) {
        struct shard *sh = &s->shards[i];
        pthread_mutex_lock(&sh->mu);
        t->delivered += sh->delivered;
        t->duplicates += sh->duplicates;
        t->out_of_order += sh->out_of_order;
        t->unstamped += sh->unstamped;
        t->foreign += sh->foreign;
        pthread_mutex_unlock(&sh->mu);
    }
    t->expected = __atomic_load_n(&s->expected, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; t->expected && i < MAX_STREAMS; i++) {
        struct stream *st = __atomic_load_n(&s->streams[i], __ATOMIC_ACQUIRE);
        if (st && __atomic_load_n(&st->has_expected, __ATOMIC_ACQUIRE))
            t->expected_in += st->expected - missing(st, st->expected, NULL, 0, NULL);
    }
    t->last_arrival_ns = __atomic_load_n(&s->last_ns, __ATOMIC_RELAXED);
    t->connected = true;
    for (int i = 0; i < s->nbus; i++) {
        uint64_t m, r;
        bool sub;
        sq_sink__bus_counts(s->bus[i], &m, &r, &sub);
        t->reconnects += r;
        t->connected &= sub;
    }
}

bool sq_sink_settle(struct sq_sink *s, int64_t max_ns, volatile int *stop)
{
    int64_t begin = sq_now_ns();
    for (;;) {
        struct sq_sink_totals t;
        sq_sink_totals(s, &t);
        if (t.expected && t.expected_in >= t.expected)
            return true;
        int64_t now = sq_now_ns();
        int64_t since = now - (t.last_arrival_ns > begin ? t.last_arrival_ns : begin);
        if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED)) { /* set by another thread */
            s->settle_stopped = true;
            return false;
        }
        if (since >= s->cfg.settle_ns || now - begin >= max_ns)
            return false;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 5 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
}

void sq_sink_stop(struct sq_sink *s)
{
    if (s->stopped)
        return;
    s->stopped = 1;
    if (s->server) {
        sq_server_stop(s->server);
        sq_server_wait(s->server);
    }
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    if (s->thread) {
        pthread_join(s->tid, NULL);
        s->thread = false;
    }
    if (s->loop)
        tick(s, sq_now_ns(), true); /* the last, partial second, with every gap */
}

void sq_sink_free(struct sq_sink *s)
{
    if (!s)
        return;
    sq_sink_stop(s);
    sq_server_free(s->server);
    for (int i = 0; i < s->nbus; i++)
        sq_sink__bus_free(s->bus[i]);
    sq_loop_free(s->loop);
    for (int i = 0; i < s->nshards; i++) {
        sq_hist_free(s->shards[i].total);
        sq_hist_free(s->shards[i].second);
        sq_sink_scratch_free(s->shards[i].scratch);
        pthread_mutex_destroy(&s->shards[i].mu);
    }
    free(s->shards);
    for (uint32_t i = 0; i < MAX_STREAMS; i++) {
        struct stream *st = s->streams[i];
        if (!st)
            continue;
        for (uint32_t p = 0; p < MAX_PAGES; p++)
            free(st->pages[p]);
        free(st);
    }
    sq_hist_free(s->tick);
    sq_sink_finder_free(s->finder);
    free(s->series);
    pthread_mutex_destroy(&s->streams_mu);
    free(s);
}

/* ---- the result block ---- */

static json_t *histogram(const struct sq_hist *h)
{
    unsigned char *blob = NULL;
    size_t len = 0;
    if (sq_hist_encode(h, &blob, &len) < 0)
        return json_null();
    char *b64 = malloc(sq_b64_encoded_len(len));
    if (!b64) {
        free(blob);
        return json_null();
    }
    sq_b64_encode(blob, len, b64);
    free(blob);
    json_t *j =
        json_pack("{s:s, s:I, s:I, s:i, s:s, s:s}", "unit", "us", "lowest_us", (json_int_t)1,
                  "highest_us", (json_int_t)3600000000LL, "significant_figures", 3, "encoding",
                  "HdrHistogram V2 compressed, base64", "data", b64);
    free(b64);
    return j;
}

static void run_text(uint64_t run, char *out)
{
    struct sq_stamp st = {.run = run, .seq = 0, .ns = 0};
    char tmp[SQ_STAMP_MAX + 1];
    size_t n = sq_stamp_format(&st, tmp);
    tmp[n] = '\0';
    /* "sq1.<run>.0.0": the run field alone */
    char *a = tmp + SQ_STAMP_PREFIX_LEN, *dot = strchr(a, '.');
    if (dot)
        *dot = '\0';
    strcpy(out, a);
}

json_t *sq_sink_json(struct sq_sink *s)
{
    uint64_t delivered = 0, dup = 0, ooo = 0, unst = 0, foreign = 0, oor = 0, skew = 0, ev = 0,
             bytes = 0;
    struct sq_hist *lat = NULL;
    if (sq_latency_hist_new(&lat) < 0)
        return NULL;
    for (int i = 0; i < s->nshards; i++) {
        struct shard *sh = &s->shards[i];
        pthread_mutex_lock(&sh->mu);
        delivered += sh->delivered;
        dup += sh->duplicates;
        ooo += sh->out_of_order;
        unst += sh->unstamped;
        foreign += sh->foreign;
        oor += sh->out_of_range;
        skew += sh->skewed;
        ev += sh->events;
        bytes += sh->bytes;
        sq_hist_merge(lat, sh->total);
        sq_hist_merge(lat, sh->second); /* since the last tick */
        pthread_mutex_unlock(&sh->mu);
    }
    uint32_t max = s->cfg.list_lost, nlist = 0;
    uint64_t *list = calloc(max ? max : 1, sizeof(*list));
    json_t *lost_list = json_array();
    json_t *streams = json_array();
    uint64_t lost = 0, expected = 0;
    bool all_expected = __atomic_load_n(&s->expected, __ATOMIC_ACQUIRE) != 0;
    for (uint32_t i = 0; i < MAX_STREAMS && list; i++) {
        struct stream *st = s->streams[i];
        if (!st)
            continue;
        uint64_t top = __atomic_load_n(&st->top, __ATOMIC_RELAXED);
        bool has = __atomic_load_n(&st->has_expected, __ATOMIC_ACQUIRE);
        uint64_t limit = has ? st->expected : top;
        uint32_t before = nlist;
        uint64_t m = missing(st, limit, list, max, &nlist);
        uint64_t got = limit - m;
        uint64_t beyond = top > limit ? top - limit : 0;
        lost += m;
        if (has)
            expected += st->expected;
        char run[32];
        run_text(st->run, run);
        for (uint32_t k = before; k < nlist; k++)
            json_array_append_new(
                lost_list, json_pack("{s:s, s:I}", "stream", run, "seq", (json_int_t)list[k]));
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:o}", "stream", run, "delivered",
                              (json_int_t)got, "lost", (json_int_t)m, "highest_seq",
                              top ? (json_int_t)(top - 1) : (json_int_t)-1, "sent",
                              has ? json_integer((json_int_t)st->expected) : json_null());
        if (beyond)
            json_object_set_new(o, "beyond_sent", json_integer((json_int_t)beyond));
        json_array_append_new(streams, o);
    }
    free(list);
    json_t *series = json_array();
    for (size_t i = 0; i < s->nseries; i++) {
        const struct sq_sink_second *e = &s->series[i];
        json_array_append_new(
            series, json_pack("{s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "t_s", e->t_s,
                              "delivered", (json_int_t)e->delivered, "lost", (json_int_t)e->lost,
                              "duplicates", (json_int_t)e->duplicates, "out_of_order",
                              (json_int_t)e->out_of_order, "unstamped", (json_int_t)e->unstamped,
                              "p50_us", (json_int_t)e->p50_us, "p90_us", (json_int_t)e->p90_us,
                              "p99_us", (json_int_t)e->p99_us, "max_us", (json_int_t)e->max_us));
    }
    json_t *sources = json_array();
    if (s->cfg.http) {
        struct sq_server_counts sc = {0};
        if (s->server)
            sq_server_counts(s->server, &sc);
        char listen[300];
        const char *colon = strrchr(s->cfg.http, ':');
        snprintf(listen, sizeof(listen), "%.*s:%u", (int)(colon ? colon - s->cfg.http : 0),
                 s->cfg.http, s->http_port);
        json_array_append_new(sources, json_pack("{s:s, s:s, s:I, s:I}", "kind", "http", "listen",
                                                 listen, "requests", (json_int_t)sc.requests,
                                                 "connections", (json_int_t)sc.accepted));
    }
    for (int i = 0; i < s->nbus; i++)
        json_array_append_new(sources, sq_sink__bus_json(s->bus[i]));
    json_t *l = json_object();
    {
        int64_t n = sq_hist_total(lat);
        json_object_set_new(l, "measured_from", json_string("stamp_send_time"));
        json_object_set_new(l, "count", json_integer((json_int_t)n));
        json_object_set_new(l, "min_us", json_integer(n ? (json_int_t)sq_hist_min(lat) : 0));
        json_object_set_new(l, "mean_us", json_real(n ? sq_hist_mean(lat) : 0));
        static const struct {
            const char *key;
            double p;
        } ps[] = {
            {"p50_us", 50}, {"p90_us", 90}, {"p95_us", 95}, {"p99_us", 99}, {"p99_9_us", 99.9}};
        for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++)
            json_object_set_new(l, ps[k].key,
                                json_integer(n ? (json_int_t)sq_hist_percentile(lat, ps[k].p) : 0));
        json_object_set_new(l, "max_us", json_integer(n ? (json_int_t)sq_hist_max(lat) : 0));
        json_object_set_new(l, "histogram", histogram(lat));
    }
    sq_hist_free(lat);
    double dur = (double)(sq_now_ns() - s->start_ns) / 1e9;
    if (s->nseries)
        dur = s->series[s->nseries - 1].t_s;
    json_t *j = json_pack(
        "{s:o, s:s, s:f, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o, s:o, "
        "s:o, s:o}",
        "sources", sources, "stamp", s->cfg.find ? s->cfg.find : "scan", "settle_s",
        (double)s->cfg.settle_ns / 1e9, "sent",
        all_expected ? json_integer((json_int_t)expected) : json_null(), "delivered",
        (json_int_t)delivered, "lost", (json_int_t)lost, "duplicates", (json_int_t)dup,
        "out_of_order", (json_int_t)ooo, "unstamped", (json_int_t)unst, "foreign",
        (json_int_t)foreign, "out_of_range", (json_int_t)oor, "clock_skewed", (json_int_t)skew,
        "events", (json_int_t)ev, "bytes", (json_int_t)bytes, "duration_s", dur, "lost_seqs",
        lost_list, "latency", l, "streams", streams, "series", series);
    if (j && s->settle_stopped) /* events still on their way count as lost */
        json_object_set_new(j, "settle_stopped", json_true());
    return j;
}

/* ---- the ledger alone (sink.h) ---- */

int sq_sink_ledger_new(const char *find, uint32_t max_pages, struct sq_sink **out, char *err,
                       size_t len)
{
    *out = NULL;
    struct sq_sink *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg.find = find;
    s->max_pages = max_pages;
    s->cfg.settle_ns = SQ_SINK_DEFAULT_SETTLE_NS;
    s->cfg.list_lost = SQ_SINK_DEFAULT_LIST_LOST;
    pthread_mutex_init(&s->streams_mu, NULL);
    s->start_ns = sq_now_ns();
    s->stopped = 1; /* nothing to stop */
    int rc = sq_sink_finder_new(find, &s->finder, err, len);
    if (rc == 0 && !(s->shards = calloc(1, sizeof(*s->shards))))
        rc = -ENOMEM;
    if (rc == 0) {
        pthread_mutex_init(&s->shards[0].mu, NULL);
        s->nshards = 1;
        rc = sq_latency_hist_new(&s->shards[0].total);
        if (rc == 0)
            rc = sq_latency_hist_new(&s->shards[0].second);
        if (rc == 0 && !(s->shards[0].scratch = sq_sink_finder_scratch(s->finder)))
            rc = -ENOMEM;
    }
    if (rc < 0) {
        sq_sink_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

size_t sq_sink_record(struct sq_sink *s, const char *body, size_t len,
                      const struct sq_sink_field *fields, size_t nfields, struct sq_sink_hit *hit)
{
    struct shard *sh = &s->shards[0];
    if (hit)
        memset(hit, 0, sizeof(*hit));
    struct rec r = {.s = s, .sh = sh, .now_real = sq_stamp_now_ns(), .hit = hit};
    pthread_mutex_lock(&sh->mu);
    size_t n = sq_sink_find(s->finder, sh->scratch, body, len, fields, nfields, record, &r);
    sh->events++;
    sh->bytes += len;
    if (n == 0)
        sh->unstamped++;
    if (sq_hist_total(sh->second) > (1 << 20)) { /* no tick here: fold now and then */
        sq_hist_merge(sh->total, sh->second);
        sq_hist_reset(sh->second);
    }
    pthread_mutex_unlock(&sh->mu);
    __atomic_store_n(&s->last_ns, sq_now_ns(), __ATOMIC_RELAXED);
    return n;
}

size_t sq_sink_streams(struct sq_sink *s,
                       void (*each)(void *ud, const struct sq_sink_stream_counts *c), void *ud)
{
    size_t k = 0;
    for (uint32_t i = 0; i < MAX_STREAMS; i++) {
        struct stream *st = __atomic_load_n(&s->streams[i], __ATOMIC_ACQUIRE);
        if (!st)
            continue;
        uint64_t top = __atomic_load_n(&st->top, __ATOMIC_RELAXED);
        uint64_t m = missing(st, top, NULL, 0, NULL);
        struct sq_sink_stream_counts c = {
            .run = st->run,
            .delivered = top - m,
            .duplicates = __atomic_load_n(&st->duplicates, __ATOMIC_RELAXED),
            .out_of_order = __atomic_load_n(&st->out_of_order, __ATOMIC_RELAXED),
            .missing = m,
            .highest = top ? (int64_t)(top - 1) : -1,
        };
        run_text(st->run, c.run_text);
        each(ud, &c);
        k++;
    }
    return k;
}
