/* target/target.c - the endpoints of `squall target` (docs/target.md), on top of server/.
 *
 * Every handler call runs on a worker thread and touches only that worker's shard and scratch
 * buffer. /bytes/N never allocates N: it hands the server a shared 64 KiB block, filled once
 * with a period-64 pattern (byte i of any body is PATTERN[i % 64]), to write cyclically.
 * /delay/MS asks the server to answer later (a loop timer, never a sleep).
 *
 * Arrivals: worker w appends the arrival time the server stamped on each request it counts to
 * its ring arr[w].ts. The owner alone writes entries and count (the entry with a relaxed store,
 * then count with a release store); /stats/reset (any worker) stores base = count with a release
 * store; the window is entries [base, count). The owner writes only at count, and drops (counts
 * in dropped) when count - base reaches the ring's size, so it never overwrites the window. A
 * reader (any worker) loads base, then count (acquire), copies the window, and loads base again:
 * if a reset moved it meanwhile the owner may have reused those slots, so it reads again.
 * Entries are _Atomic so that this race is benign, not undefined; on x86-64 they are plain moves.
 *
 * Stall: the handler computes when the response would leave (now + any /delay) and, when that
 * falls inside a stall window, asks the server to answer later, at the window's end.
 */
#include "target/target.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/b64.h"
#include "base/clock.h"
#include "base/text.h"
#include "server/server.h"
#include "stats/hist.h"
#include "target/app.h"
#include "target/h3srv.h"
#include "target/wsep.h"

#define BLOCK_SIZE   (64 * 1024)
#define SCRATCH_KEEP (1024 * 1024) /* a scratch buffer grown past this shrinks on the next use */
#define STATS_CAP    4096          /* the /stats body */
#define GAP_HIGHEST  (60LL * SQ_NS_PER_S)
#define READ_TRIES   4          /* /stats re-reads the arrivals this often when resets race it */
#define RING_HUGE    (2u << 20) /* a transparent huge page */

static const char PATTERN[65] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static char block[BLOCK_SIZE];
static pthread_once_t block_once = PTHREAD_ONCE_INIT;

static void block_fill(void)
{
    for (size_t i = 0; i < BLOCK_SIZE; i++)
        block[i] = PATTERN[i % 64];
}

/* ---- counters ---- */

struct shard {
    _Alignas(64) _Atomic uint64_t v[SQ_TARGET_NSHARD];
};

struct sq_target_counters {
    int n;
    struct shard *shards;
    _Alignas(64) _Atomic uint64_t base[SQ_TARGET_NCOUNTERS];
};

struct sq_target_counters *sq_target_counters_new(int nshards)
{
    if (nshards < 1)
        return NULL;
    struct sq_target_counters *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    size_t size = (size_t)nshards * sizeof(struct shard);
    c->shards = aligned_alloc(_Alignof(struct shard), size);
    if (!c->shards) {
        free(c);
        return NULL;
    }
    memset(c->shards, 0, size);
    c->n = nshards;
    return c;
}

void sq_target_counters_free(struct sq_target_counters *c)
{
    if (!c)
        return;
    free(c->shards);
    free(c);
}

void sq_target_counters_add(struct sq_target_counters *c, int s, int i, uint64_t n)
{
    _Atomic uint64_t *p = &c->shards[s].v[i];
    atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

void sq_target_counters_bump(struct sq_target_counters *c, int s, int i)
{
    _Atomic uint64_t *p = &c->shards[s].v[i];
    atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

uint64_t sq_target_counters_sum(const struct sq_target_counters *c, int i)
{
    uint64_t sum = 0;
    if (i < 0 || i >= SQ_TARGET_NSHARD)
        return 0;
    for (int s = 0; s < c->n; s++)
        sum += atomic_load_explicit(&c->shards[s].v[i], memory_order_relaxed);
    return sum;
}

static uint64_t raw_value(const struct sq_target_counters *c,
                          const uint64_t extra[SQ_TARGET_NEXTRA], int i)
{
    if (i < SQ_TARGET_NSHARD)
        return sq_target_counters_sum(c, i);
    return extra ? extra[i - SQ_TARGET_NSHARD] : 0;
}

void sq_target_counters_read(const struct sq_target_counters *c,
                             const uint64_t extra[SQ_TARGET_NEXTRA], uint64_t *out)
{
    for (int i = 0; i < SQ_TARGET_NCOUNTERS; i++) {
        uint64_t v = raw_value(c, extra, i);
        uint64_t b = atomic_load_explicit(&c->base[i], memory_order_relaxed);
        out[i] = v > b ? v - b : 0;
    }
}

void sq_target_counters_reset(struct sq_target_counters *c, const uint64_t extra[SQ_TARGET_NEXTRA])
{
    for (int i = 0; i < SQ_TARGET_NCOUNTERS; i++)
        atomic_store_explicit(&c->base[i], raw_value(c, extra, i), memory_order_relaxed);
}

/* ---- arrival gaps ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void sort_run(struct sq_target_run *r)
{
    for (size_t i = 1; i < r->n; i++) {
        if (r->t[i] < r->t[i - 1]) {
            qsort(r->t, r->n, sizeof(*r->t), cmp_i64);
            return;
        }
    }
}

/* A k-way merge: a binary min-heap of run heads. */
struct mhead {
    int64_t v;
    size_t run, pos;
};

static void sift_down(struct mhead *h, size_t n, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && h[c + 1].v < h[c].v)
            c++;
        if (h[i].v <= h[c].v)
            return;
        struct mhead tmp = h[i];
        h[i] = h[c];
        h[c] = tmp;
        i = c;
    }
}

struct gap_acc {
    struct sq_hist *h;
    int64_t prev, first, max;
    uint64_t count;
};

static inline void gap_add(struct gap_acc *a, int64_t t)
{
    if (a->count++ == 0) {
        a->first = a->prev = t;
        return;
    }
    int64_t g = t - a->prev;
    a->prev = t;
    if (g > a->max)
        a->max = g;
    sq_hist_record(a->h, g < GAP_HIGHEST ? g : GAP_HIGHEST);
}

int sq_target_gaps(struct sq_target_run *runs, size_t nruns, struct sq_target_gaps *out)
{
    struct gap_acc a = {0};
    int rc = sq_hist_new(1, GAP_HIGHEST, 3, &a.h);
    if (rc < 0)
        return rc;
    struct mhead *heap = malloc((nruns ? nruns : 1) * sizeof(*heap));
    if (!heap) {
        sq_hist_free(a.h);
        return -ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < nruns; i++) {
        sort_run(&runs[i]);
        if (runs[i].n)
            heap[n++] = (struct mhead){runs[i].t[0], i, 0};
    }
    for (size_t i = n / 2; i-- > 0;)
        sift_down(heap, n, i);
    while (n > 1) {
        struct mhead *top = &heap[0];
        gap_add(&a, top->v);
        const struct sq_target_run *r = &runs[top->run];
        if (++top->pos < r->n)
            top->v = r->t[top->pos];
        else
            heap[0] = heap[--n];
        sift_down(heap, n, 0);
    }
    if (n == 1) /* the last run left: no more merging */
        for (size_t i = heap[0].pos; i < runs[heap[0].run].n; i++)
            gap_add(&a, runs[heap[0].run].t[i]);
    free(heap);

    memset(out, 0, sizeof(*out));
    out->count = a.count;
    if (a.count >= 2) {
        /* a bucket's highest equivalent value may pass the exact max: never report past it */
        int64_t p50 = sq_hist_percentile(a.h, 50.0), p90 = sq_hist_percentile(a.h, 90.0),
                p99 = sq_hist_percentile(a.h, 99.0);
        out->p50_us = (double)(p50 < a.max ? p50 : a.max) / 1e3;
        out->p90_us = (double)(p90 < a.max ? p90 : a.max) / 1e3;
        out->p99_us = (double)(p99 < a.max ? p99 : a.max) / 1e3;
        out->max_us = (double)a.max / 1e3;
        out->mean_us = (double)(a.prev - a.first) / (double)(a.count - 1) / 1e3;
    }
    sq_hist_free(a.h);
    return 0;
}

/* ---- arrival rings (see the file comment) ---- */

struct arrivals {
    _Alignas(64) _Atomic uint64_t count; /* times ever appended (owner; release) */
    _Atomic uint64_t dropped;            /* times not kept: the window was full (owner) */
    _Atomic uint64_t base;               /* count at the last reset (any worker; release) */
    _Atomic uint64_t dropped_base;       /* dropped at the last reset */
    _Atomic int64_t *ts;                 /* mask + 1 entries; time number i is ts[i & mask] */
    uint64_t mask;
    size_t map_len;
};

/* Hot path: a few loads and two plain stores, all on the owner's own cache line and ring. */
static inline void arrival_record(struct arrivals *a, int64_t t)
{
    uint64_t n = atomic_load_explicit(&a->count, memory_order_relaxed);
    if (SQ_UNLIKELY(n - atomic_load_explicit(&a->base, memory_order_relaxed) > a->mask)) {
        atomic_store_explicit(&a->dropped,
                              atomic_load_explicit(&a->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return;
    }
    atomic_store_explicit(&a->ts[n & a->mask], t, memory_order_relaxed);
    atomic_store_explicit(&a->count, n + 1, memory_order_release);
}

/* Reserves len bytes for a ring: address space only, touched as the ring fills. A ring of 2 MiB
 * or more is 2 MiB-aligned and asks for transparent huge pages (best effort): the first touch
 * of each 4 KiB page costs a fault, 30 ns per arrival on a paravirtualised VM, and huge pages
 * take 512 times fewer. Returns NULL when out of address space. */
static void *ring_map(size_t len)
{
    size_t align = len >= RING_HUGE ? RING_HUGE : 0, map = len + align;
    char *m =
        mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (!align)
        return m;
    char *p = (char *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
    if (p > m)
        munmap(m, (size_t)(p - m));
    if (m + map > p + len)
        munmap(p + len, (size_t)(m + map - (p + len)));
    (void)madvise(p, len, MADV_HUGEPAGE);
    return p;
}

static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* ---- text helpers ---- */

static const char *const ep_names[] = {
#define SQ_TARGET_EP_STR(name, str) str,
    SQ_TARGET_ENDPOINTS(SQ_TARGET_EP_STR)
#undef SQ_TARGET_EP_STR
};

const char *sq_target_ep_name(enum sq_target_ep ep)
{
    if (ep == SQ_TARGET_EP_STATS_RESET)
        ep = SQ_TARGET_EP_STATS;
    return (unsigned)ep < SQ_ARRAY_LEN(ep_names) ? ep_names[ep] : "?";
}

bool sq_target_parse_u64(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    if (n == 0 || n > 19)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

size_t sq_target_json_escape(char *out, size_t cap, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
#define EMIT(ch)                                                                                   \
    do {                                                                                           \
        if (o < cap)                                                                               \
            out[o] = (char)(ch);                                                                   \
        o++;                                                                                       \
    } while (0)
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            EMIT(c);
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = sq_utf8_decode(p + i, n - i, NULL);
            if (k) {
                for (size_t j = 0; j < k; j++)
                    EMIT(p[i + j]);
                i += k;
                continue;
            }
        }
        EMIT('\\');
        switch (c) {
        case '"':
            EMIT('"');
            break;
        case '\\':
            EMIT('\\');
            break;
        case '\n':
            EMIT('n');
            break;
        case '\r':
            EMIT('r');
            break;
        case '\t':
            EMIT('t');
            break;
        case '\b':
            EMIT('b');
            break;
        case '\f':
            EMIT('f');
            break;
        default:
            EMIT('u');
            EMIT('0');
            EMIT('0');
            EMIT(sq_hex_lower[c >> 4]);
            EMIT(sq_hex_lower[c & 15]);
        }
        i++;
    }
#undef EMIT
    return o;
}

/* ---- routing ---- */

static bool eq(const char *s, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return n == k && memcmp(s, lit, k) == 0;
}

static bool prefix(const char *s, size_t n, const char *lit, size_t *k)
{
    *k = strlen(lit);
    return n >= *k && memcmp(s, lit, *k) == 0;
}

struct sq_target_route sq_target_route(const char *method, size_t method_len, const char *path,
                                       size_t path_len)
{
    struct sq_target_route r = {.ep = SQ_TARGET_EP_NOT_FOUND};
    size_t k;
    /* absolute-form ("http://host:port/fast", RFC 9112 3.2.2): route on its path */
    if ((prefix(path, path_len, "http://", &k) || prefix(path, path_len, "https://", &k))) {
        const char *slash = memchr(path + k, '/', path_len - k);
        if (!slash)
            return r;
        path_len -= (size_t)(slash - path);
        path = slash;
    }
    const char *q = memchr(path, '?', path_len);
    size_t n = q ? (size_t)(q - path) : path_len;
    if (n < 2 || path[0] != '/')
        return r;
    switch (path[1]) {
    case 'f':
        if (eq(path, n, "/fast"))
            r.ep = SQ_TARGET_EP_FAST;
        break;
    case 'o':
        if (eq(path, n, "/ok"))
            r.ep = SQ_TARGET_EP_OK;
        else if (eq(path, n, "/oauth/token") && eq(method, method_len, "POST"))
            r.ep = SQ_TARGET_EP_OAUTH;
        break;
    case 'e':
        if (eq(path, n, "/echo"))
            r.ep = SQ_TARGET_EP_ECHO;
        break;
    case 'j':
        if (prefix(path, n, "/json/", &k)) {
            r.ep = SQ_TARGET_EP_JSON;
            r.bad_arg =
                !sq_target_parse_u64(path + k, n - k, SQ_TARGET_MAX_JSON, &r.arg) || r.arg < 2;
        }
        break;
    case 'l':
        if (eq(path, n, "/login") && eq(method, method_len, "POST"))
            r.ep = SQ_TARGET_EP_LOGIN;
        break;
    case 'i':
        if (eq(path, n, "/items"))
            r.ep = SQ_TARGET_EP_ITEMS;
        break;
    case 'w':
        if (eq(path, n, "/ws"))
            r.ep = SQ_TARGET_EP_WS;
        else if (eq(path, n, "/webhook"))
            r.ep = SQ_TARGET_EP_WEBHOOK;
        break;
    case 'c':
        if (eq(path, n, "/cookie/set") || eq(path, n, "/cookie/echo")) {
            r.ep = SQ_TARGET_EP_COOKIE;
            r.arg = path[8] == 'e';
        }
        break;
    case 'b':
        if (prefix(path, n, "/bytes/", &k)) {
            r.ep = SQ_TARGET_EP_BYTES;
            r.bad_arg = !sq_target_parse_u64(path + k, n - k, SQ_TARGET_MAX_BYTES, &r.arg);
        }
        break;
    case 'r':
        if (eq(path, n, "/redirect/loop")) {
            r.ep = SQ_TARGET_EP_REDIRECT; /* arg 0: to itself */
        } else if (prefix(path, n, "/redirect/", &k)) {
            r.ep = SQ_TARGET_EP_REDIRECT;
            r.bad_arg =
                !sq_target_parse_u64(path + k, n - k, SQ_TARGET_MAX_REDIRECTS, &r.arg) || r.arg < 1;
        }
        break;
    case 'd':
        if (prefix(path, n, "/delay/", &k)) {
            r.ep = SQ_TARGET_EP_DELAY;
            r.bad_arg = !sq_target_parse_u64(path + k, n - k, SQ_TARGET_MAX_DELAY_MS, &r.arg);
        }
        break;
    case 's':
        if (prefix(path, n, "/status/", &k)) {
            r.ep = SQ_TARGET_EP_STATUS;
            r.bad_arg = n - k != 3 || !sq_target_parse_u64(path + k, 3, 599, &r.arg) ||
                        r.arg < 200; /* 1xx cannot be a final answer */
        } else if (eq(path, n, "/sse")) {
            r.ep = SQ_TARGET_EP_SSE;
        } else if (eq(path, n, "/stats")) {
            if (eq(method, method_len, "GET") || eq(method, method_len, "HEAD"))
                r.ep = SQ_TARGET_EP_STATS;
        } else if (eq(path, n, "/stats/reset")) {
            if (eq(method, method_len, "POST"))
                r.ep = SQ_TARGET_EP_STATS_RESET;
        }
        break;
    }
    return r;
}

/* ---- the target ---- */

struct scratch {
    _Alignas(64) char *p;
    size_t cap;
};

struct sq_target {
    struct sq_server *srv;
    struct sq_target_counters *cnt;
    struct scratch *scr;  /* one per worker */
    struct arrivals *arr; /* one per worker */
    struct sq_target__app *app;
    struct sq_target__ws *ws; /* /ws and /webhook */
    struct sq_h3srv *h3;      /* --http3: its thread is worker slot `threads` */
    /* the same, for the workers (/stats): stored (release) once it runs, after they started */
    struct sq_h3srv *_Atomic h3_live;
    int threads;
    int slots;                  /* per-worker state: threads, plus one for the HTTP/3 thread */
    char alt_svc[48];           /* "Alt-Svc: h3=\":PORT\"\r\n" with --http3, else "" */
    _Atomic size_t alt_svc_len; /* stored (release) once alt_svc is written */
    struct scratch *hdr;        /* per worker: Alt-Svc joined with a handler's own header lines */
    int64_t start_ns;
    int64_t stall_ns, stall_period_ns; /* 0: no stall */
    /* as configured, for /stats' "limits" */
    int64_t idle_timeout_ns, header_timeout_ns, request_timeout_ns;
    uint32_t min_body_rate, max_conns;
    _Atomic int64_t reset_ns;
    _Atomic uint64_t h2_base[2]; /* h2 connections and streams at the last reset */
    _Atomic uint64_t
        h3_base[6]; /* h3 connections, requests, streams, resumed, 0-RTT, 0-RTT streams at reset */
};

static char *scratch_get(struct scratch *s, size_t need)
{
    if (s->cap >= need && (s->cap <= SCRATCH_KEEP || need > SCRATCH_KEEP / 4))
        return s->p;
    char *p = realloc(s->p, need < 4096 ? 4096 : need);
    if (!p)
        return NULL;
    s->p = p;
    s->cap = need < 4096 ? 4096 : need;
    return p;
}

static void server_extra(const struct sq_server *srv, uint64_t extra[SQ_TARGET_NEXTRA])
{
    struct sq_server_counts sc;
    sq_server_counts(srv, &sc);
    const uint64_t v[SQ_TARGET_NEXTRA] = {sc.accepted,      sc.bad_req,         sc.too_large,
                                          sc.head_big,      sc.smuggling,       sc.refused,
                                          sc.idle_timeouts, sc.header_timeouts, sc.body_timeouts};
    memcpy(extra, v, sizeof(v));
}

/* Summarises the arrivals since the last reset. Returns 0 or -ENOMEM. */
static int arrivals_read(struct sq_target *t, struct sq_target_gaps *g, uint64_t *dropped)
{
    int nw = t->slots;
    struct sq_target_run *runs = calloc((size_t)nw, sizeof(*runs));
    uint64_t *base = calloc((size_t)nw, sizeof(*base));
    int64_t *buf = NULL;
    int rc = -ENOMEM;
    if (!runs || !base)
        goto out;
    for (int tries = 0;; tries++) {
        size_t total = 0;
        for (int w = 0; w < nw; w++) {
            struct arrivals *a = &t->arr[w];
            base[w] = atomic_load_explicit(&a->base, memory_order_acquire);
            uint64_t c = atomic_load_explicit(&a->count, memory_order_acquire);
            uint64_t n = sub0(c, base[w]);
            runs[w].n = (size_t)(n > a->mask + 1 ? a->mask + 1 : n);
            total += runs[w].n;
        }
        free(buf);
        buf = malloc((total ? total : 1) * sizeof(*buf));
        if (!buf)
            goto out;
        bool moved = false;
        int64_t *p = buf;
        for (int w = 0; w < nw; w++) {
            struct arrivals *a = &t->arr[w];
            runs[w].t = p;
            for (size_t i = 0; i < runs[w].n; i++)
                p[i] = atomic_load_explicit(&a->ts[(base[w] + i) & a->mask], memory_order_relaxed);
            p += runs[w].n;
            if (atomic_load_explicit(&a->base, memory_order_acquire) != base[w])
                moved = true;
        }
        if (!moved || tries + 1 >= READ_TRIES)
            break; /* resets kept racing: report what was read (a blend of two windows) */
    }
    rc = sq_target_gaps(runs, (size_t)nw, g);
    *dropped = 0;
    for (int w = 0; w < nw; w++)
        *dropped += sub0(atomic_load_explicit(&t->arr[w].dropped, memory_order_relaxed),
                         atomic_load_explicit(&t->arr[w].dropped_base, memory_order_relaxed));
out:
    free(buf);
    free(base);
    free(runs);
    return rc;
}

static void arrivals_reset(struct sq_target *t)
{
    for (int w = 0; w < t->slots; w++) {
        struct arrivals *a = &t->arr[w];
        atomic_store_explicit(&a->dropped_base,
                              atomic_load_explicit(&a->dropped, memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&a->base, atomic_load_explicit(&a->count, memory_order_acquire),
                              memory_order_release);
    }
}

/* Milliseconds as a JSON number: an integer when whole, else with ns precision. */
static int put_ms(char *o, size_t cap, int64_t ns)
{
    if (ns % SQ_NS_PER_MS == 0)
        return snprintf(o, cap, "%lld", (long long)(ns / SQ_NS_PER_MS));
    return snprintf(o, cap, "%.6f", (double)ns / 1e6);
}

static void answer_stats(struct sq_target *t, const struct sq_server_req *req,
                         struct sq_server_resp *resp)
{
    uint64_t extra[SQ_TARGET_NEXTRA], v[SQ_TARGET_NCOUNTERS];
    server_extra(req->server, extra);
    sq_target_counters_read(t->cnt, extra, v);
    uint64_t total = 0;
    for (int i = 0; i < SQ_TARGET_EP__COUNT; i++)
        total += v[i];
    struct sq_server_counts sc;
    sq_server_counts(req->server, &sc);
    uint64_t h2c = sub0(sc.h2_conns, atomic_load_explicit(&t->h2_base[0], memory_order_relaxed));
    uint64_t h2s = sub0(sc.h2_streams, atomic_load_explicit(&t->h2_base[1], memory_order_relaxed));
    struct sq_h3srv_counts h3 = {0};
    struct sq_h3srv *h3s = atomic_load_explicit(&t->h3_live, memory_order_acquire);
    if (h3s)
        sq_h3srv_counts(h3s, &h3);
    struct sq_target_gaps g;
    uint64_t dropped;
    char *o = scratch_get(&t->scr[req->worker], STATS_CAP);
    if (!o || arrivals_read(t, &g, &dropped) < 0) {
        resp->status = 500;
        return;
    }
    int64_t now = sq_now_ns();
    int64_t since = atomic_load_explicit(&t->reset_ns, memory_order_relaxed);
    size_t len = 0, cap = STATS_CAP;
    len += (size_t)snprintf(o + len, cap - len, "{\"requests\":%llu,\"endpoints\":{",
                            (unsigned long long)total);
    for (int i = 0; i < SQ_TARGET_EP__COUNT; i++)
        len += (size_t)snprintf(o + len, cap - len, "%s\"%s\":%llu", i ? "," : "",
                                sq_target_ep_name((enum sq_target_ep)i), (unsigned long long)v[i]);
    len += (size_t)snprintf(
        o + len, cap - len,
        "},\"errors\":{\"400\":%llu,\"413\":%llu,\"431\":%llu,\"smuggling\":%llu},"
        "\"connections\":%llu,\"open\":%llu,\"refused\":%llu,"
        "\"timeouts\":{\"idle\":%llu,\"header\":%llu,\"body\":%llu},"
        "\"limits\":{\"max_conns\":%u,\"idle_timeout_s\":%.3f,\"header_timeout_s\":%.3f,"
        "\"request_timeout_s\":%.3f,\"min_body_rate\":%u},"
        "\"threads\":%d,\"uptime_s\":%.3f,\"since_reset_s\":%.3f,"
        "\"arrivals\":{\"count\":%llu,\"gap_us\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,"
        "\"max\":%.3f,\"mean\":%.3f}},\"arrivals_dropped\":%llu,"
        "\"auth\":{\"logins\":%llu,\"items_ok\":%llu,\"items_unauthorized\":%llu},"
        "\"oauth\":{\"tokens\":%llu,\"refused\":%llu,\"expired\":%llu},"
        "\"h2\":{\"connections\":%llu,\"streams\":%llu},"
        "\"h3\":{\"enabled\":%s,\"connections\":%llu,\"requests\":%llu,\"streams\":%llu,"
        "\"open\":%llu,\"refused\":%llu,\"dropped\":%llu,\"resumed\":%llu,\"early_data\":%llu,"
        "\"early_requests\":%llu}",
        (unsigned long long)v[SQ_TARGET_C_400], (unsigned long long)v[SQ_TARGET_C_413],
        (unsigned long long)v[SQ_TARGET_C_431], (unsigned long long)v[SQ_TARGET_C_SMUGGLING],
        (unsigned long long)v[SQ_TARGET_C_ACCEPTED], (unsigned long long)sc.open,
        (unsigned long long)v[SQ_TARGET_C_REFUSED], (unsigned long long)v[SQ_TARGET_C_IDLE_TO],
        (unsigned long long)v[SQ_TARGET_C_HEADER_TO], (unsigned long long)v[SQ_TARGET_C_BODY_TO],
        t->max_conns, (double)t->idle_timeout_ns / 1e9, (double)t->header_timeout_ns / 1e9,
        (double)t->request_timeout_ns / 1e9, t->min_body_rate, t->threads,
        (double)(now - t->start_ns) / 1e9, (double)(now - since) / 1e9, (unsigned long long)g.count,
        g.p50_us, g.p90_us, g.p99_us, g.max_us, g.mean_us, (unsigned long long)dropped,
        (unsigned long long)v[SQ_TARGET_C_LOGINS], (unsigned long long)v[SQ_TARGET_C_ITEMS_OK],
        (unsigned long long)v[SQ_TARGET_C_ITEMS_UNAUTH],
        (unsigned long long)v[SQ_TARGET_C_OAUTH_TOKENS],
        (unsigned long long)v[SQ_TARGET_C_OAUTH_REFUSED],
        (unsigned long long)v[SQ_TARGET_C_ITEMS_EXPIRED], (unsigned long long)h2c,
        (unsigned long long)h2s, h3s ? "true" : "false",
        (unsigned long long)sub0(h3.conns,
                                 atomic_load_explicit(&t->h3_base[0], memory_order_relaxed)),
        (unsigned long long)sub0(h3.requests,
                                 atomic_load_explicit(&t->h3_base[1], memory_order_relaxed)),
        (unsigned long long)sub0(h3.streams,
                                 atomic_load_explicit(&t->h3_base[2], memory_order_relaxed)),
        (unsigned long long)h3.open, (unsigned long long)h3.refused, (unsigned long long)h3.dropped,
        (unsigned long long)sub0(h3.resumed,
                                 atomic_load_explicit(&t->h3_base[3], memory_order_relaxed)),
        (unsigned long long)sub0(h3.early,
                                 atomic_load_explicit(&t->h3_base[4], memory_order_relaxed)),
        (unsigned long long)sub0(h3.early_streams,
                                 atomic_load_explicit(&t->h3_base[5], memory_order_relaxed)));
    /* open WebSocket connections: raw sums (a gauge; a reset does not zero it) */
    uint64_t ws_up = sq_target_counters_sum(t->cnt, SQ_TARGET_C_WS_UPGRADES),
             ws_end = sq_target_counters_sum(t->cnt, SQ_TARGET_C_WS_ENDED);
    len += (size_t)snprintf(
        o + len, cap - len,
        ",\"ws\":{\"upgrades\":%llu,\"open\":%llu,\"messages_in\":%llu,\"messages_out\":%llu,"
        "\"bytes_in\":%llu,\"bytes_out\":%llu,\"pings_sent\":%llu,\"pongs_received\":%llu,"
        "\"pings_received\":%llu,\"closes_received\":%llu,\"protocol_errors\":%llu},"
        "\"webhook\":{\"events\":%llu,\"stamped\":%llu,\"bytes\":%llu}",
        (unsigned long long)v[SQ_TARGET_C_WS_UPGRADES],
        (unsigned long long)(ws_up > ws_end ? ws_up - ws_end : 0),
        (unsigned long long)v[SQ_TARGET_C_WS_MSGS_IN],
        (unsigned long long)v[SQ_TARGET_C_WS_MSGS_OUT],
        (unsigned long long)v[SQ_TARGET_C_WS_BYTES_IN],
        (unsigned long long)v[SQ_TARGET_C_WS_BYTES_OUT],
        (unsigned long long)v[SQ_TARGET_C_WS_PINGS_OUT],
        (unsigned long long)v[SQ_TARGET_C_WS_PONGS_IN],
        (unsigned long long)v[SQ_TARGET_C_WS_PINGS_IN],
        (unsigned long long)v[SQ_TARGET_C_WS_CLOSES_IN],
        (unsigned long long)v[SQ_TARGET_C_WS_ERRORS],
        (unsigned long long)v[SQ_TARGET_C_WEBHOOK_EVENTS],
        (unsigned long long)v[SQ_TARGET_C_WEBHOOK_STAMPED],
        (unsigned long long)v[SQ_TARGET_C_WEBHOOK_BYTES]);
    if (t->stall_ns) {
        len += (size_t)snprintf(o + len, cap - len, ",\"stall\":{\"duration_ms\":");
        len += (size_t)put_ms(o + len, cap - len, t->stall_ns);
        len += (size_t)snprintf(o + len, cap - len, ",\"period_ms\":");
        len += (size_t)put_ms(o + len, cap - len, t->stall_period_ns);
        len += (size_t)snprintf(o + len, cap - len, "}");
    }
    len += (size_t)snprintf(o + len, cap - len, "}\n");
    resp->content_type = "application/json";
    resp->body = o;
    resp->body_len = len;
}

/* Appends a JSON string (quoted) for s[0, n) at o + *len; the caller reserved 6n + 2 bytes. */
static void put_json_str(char *o, size_t *len, const char *s, size_t n)
{
    o[(*len)++] = '"';
    *len += sq_target_json_escape(o + *len, 6 * n, s, n);
    o[(*len)++] = '"';
}

static void put_lit(char *o, size_t *len, const char *lit)
{
    size_t k = strlen(lit);
    memcpy(o + *len, lit, k);
    *len += k;
}

static void answer_echo(struct sq_target *t, const struct sq_server_req *req,
                        struct sq_server_resp *resp)
{
    bool utf8 = sq_utf8_valid(req->body, req->body_len);
    size_t need = 256 + 6 * (req->method_len + req->path_len) +
                  (utf8 ? 6 * req->body_len : 4 * (req->body_len / 3 + 1));
    for (size_t i = 0; i < req->num_headers; i++)
        need += 16 + 6 * (req->headers[i].name_len + req->headers[i].value_len);
    char *o = scratch_get(&t->scr[req->worker], need);
    if (!o) {
        resp->status = 500;
        return;
    }
    size_t len = 0;
    put_lit(o, &len, "{\"method\":");
    put_json_str(o, &len, req->method, req->method_len);
    put_lit(o, &len, ",\"path\":");
    put_json_str(o, &len, req->path, req->path_len);
    put_lit(o, &len,
            req->h3                   ? ",\"version\":\"HTTP/3\",\"headers\":["
            : req->h2                 ? ",\"version\":\"HTTP/2\",\"headers\":["
            : req->minor_version == 0 ? ",\"version\":\"HTTP/1.0\",\"headers\":["
                                      : ",\"version\":\"HTTP/1.1\",\"headers\":[");
    for (size_t i = 0; i < req->num_headers; i++) {
        const struct sq_h1_header *h = &req->headers[i];
        put_lit(o, &len, i ? ",[" : "[");
        put_json_str(o, &len, h->name, h->name_len);
        o[len++] = ',';
        put_json_str(o, &len, h->value, h->value_len);
        o[len++] = ']';
    }
    if (utf8) {
        put_lit(o, &len, "],\"body\":");
        put_json_str(o, &len, req->body ? req->body : "", req->body_len);
    } else {
        put_lit(o, &len, "],\"body_base64\":\"");
        sq_b64_encode(req->body, req->body_len, o + len); /* room: see need above */
        len += sq_b64_encoded_len(req->body_len) - 1;
        o[len++] = '"';
    }
    len += (size_t)snprintf(o + len, 64, ",\"body_len\":%zu}\n", req->body_len);
    resp->content_type = "application/json";
    resp->body = o;
    resp->body_len = len;
}

/* The delay that makes a response due delay_ns from now leave outside the stall windows. */
static int64_t stall_delay(const struct sq_target *t, int64_t delay_ns)
{
    int64_t at = sq_now_ns() + delay_ns - t->start_ns; /* when it would leave, since start */
    int64_t phase = at % t->stall_period_ns;
    return phase < t->stall_ns ? delay_ns + (t->stall_ns - phase) : delay_ns;
}

/* Puts the Alt-Svc line before the handler's own header lines (the worker's hdr buffer: the
 * server copies or renders them before the handler's caller returns). */
static void add_alt_svc(struct sq_target *t, int worker, struct sq_server_resp *resp)
{
    size_t n = atomic_load_explicit(&t->alt_svc_len, memory_order_acquire);
    if (!resp->headers_len) {
        resp->headers = t->alt_svc;
        resp->headers_len = n;
        return;
    }
    char *o = scratch_get(&t->hdr[worker], n + resp->headers_len);
    if (!o)
        return; /* out of memory: no Alt-Svc on this one */
    memcpy(o, t->alt_svc, n);
    memcpy(o + n, resp->headers, resp->headers_len);
    resp->headers = o;
    resp->headers_len += n;
}

static void handle(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    struct sq_target *t = ud;
    struct sq_target_route r =
        sq_target_route(req->method, req->method_len, req->path, req->path_len);
    int ep = r.ep == SQ_TARGET_EP_STATS_RESET ? SQ_TARGET_EP_STATS : (int)r.ep;
    if (ep != SQ_TARGET_EP_STATS) /* the observer's own requests are not arrivals */
        arrival_record(&t->arr[req->worker], req->arrival_ns);
    if (r.bad_arg) {
        resp->status = 400;
    } else {
        switch (r.ep) {
        case SQ_TARGET_EP_FAST:
            resp->content_type = "text/plain";
            resp->body = "hello world";
            resp->body_len = 11;
            break;
        case SQ_TARGET_EP_OK:
            break;
        case SQ_TARGET_EP_BYTES:
            resp->content_type = "application/octet-stream";
            resp->fill = block;
            resp->fill_len = BLOCK_SIZE;
            resp->fill_total = r.arg;
            break;
        case SQ_TARGET_EP_DELAY:
            resp->delay_ns = (int64_t)r.arg * SQ_NS_PER_MS;
            break;
        case SQ_TARGET_EP_STATUS:
            resp->status = (int)r.arg;
            break;
        case SQ_TARGET_EP_ECHO:
            answer_echo(t, req, resp);
            resp->delay_copy = true; /* the body is in the worker's scratch buffer */
            break;
        case SQ_TARGET_EP_JSON:
            sq_target__json(t->app, req, resp, r.arg);
            break;
        case SQ_TARGET_EP_SSE:
            sq_target__sse(t->app, req, resp);
            break;
        case SQ_TARGET_EP_LOGIN:
            sq_target__login(t->app, req, resp);
            sq_target_counters_bump(t->cnt, req->worker, SQ_TARGET_C_LOGINS);
            break;
        case SQ_TARGET_EP_ITEMS: {
            int got = sq_target__items(t->app, req, resp);
            sq_target_counters_bump(t->cnt, req->worker,
                                    got == SQ_TARGET_ITEMS_OK ? SQ_TARGET_C_ITEMS_OK
                                                              : SQ_TARGET_C_ITEMS_UNAUTH);
            if (got == SQ_TARGET_ITEMS_EXPIRED)
                sq_target_counters_bump(t->cnt, req->worker, SQ_TARGET_C_ITEMS_EXPIRED);
            break;
        }
        case SQ_TARGET_EP_OAUTH: {
            int got = sq_target__oauth(t->app, req, resp);
            if (got != SQ_TARGET_OAUTH_BAD)
                sq_target_counters_bump(t->cnt, req->worker,
                                        got == SQ_TARGET_OAUTH_ISSUED ? SQ_TARGET_C_OAUTH_TOKENS
                                                                      : SQ_TARGET_C_OAUTH_REFUSED);
            break;
        }
        case SQ_TARGET_EP_COOKIE:
            sq_target__cookie(t->app, req, resp, r.arg == 1);
            break;
        case SQ_TARGET_EP_REDIRECT:
            sq_target__redirect(t->app, req, resp, r.arg);
            break;
        case SQ_TARGET_EP_WS:
            sq_target__ws(t->ws, req, resp);
            break;
        case SQ_TARGET_EP_WEBHOOK:
            sq_target__webhook(t->ws, req, resp);
            break;
        case SQ_TARGET_EP_STATS:
            /* rendered before this request is counted: a /stats read does not count itself */
            answer_stats(t, req, resp);
            break;
        case SQ_TARGET_EP_STATS_RESET: {
            /* counted before the baseline is taken: the reset does not show up after it */
            sq_target_counters_bump(t->cnt, req->worker, ep);
            uint64_t extra[SQ_TARGET_NEXTRA];
            server_extra(req->server, extra);
            sq_target_counters_reset(t->cnt, extra);
            struct sq_server_counts sc;
            sq_server_counts(req->server, &sc);
            atomic_store_explicit(&t->h2_base[0], sc.h2_conns, memory_order_relaxed);
            atomic_store_explicit(&t->h2_base[1], sc.h2_streams, memory_order_relaxed);
            struct sq_h3srv *h3s = atomic_load_explicit(&t->h3_live, memory_order_acquire);
            if (h3s) {
                struct sq_h3srv_counts h3;
                sq_h3srv_counts(h3s, &h3);
                atomic_store_explicit(&t->h3_base[0], h3.conns, memory_order_relaxed);
                atomic_store_explicit(&t->h3_base[1], h3.requests, memory_order_relaxed);
                atomic_store_explicit(&t->h3_base[2], h3.streams, memory_order_relaxed);
                atomic_store_explicit(&t->h3_base[3], h3.resumed, memory_order_relaxed);
                atomic_store_explicit(&t->h3_base[4], h3.early, memory_order_relaxed);
                atomic_store_explicit(&t->h3_base[5], h3.early_streams, memory_order_relaxed);
            }
            arrivals_reset(t);
            sq_target__oauth_reset(t->app);
            atomic_store_explicit(&t->reset_ns, sq_now_ns(), memory_order_relaxed);
            resp->content_type = "application/json";
            resp->body = "{\"reset\":true}\n";
            resp->body_len = strlen(resp->body);
            return;
        }
        default:
            resp->status = 404;
            break;
        }
    }
    if (t->stall_ns && ep != SQ_TARGET_EP_STATS)
        resp->delay_ns = stall_delay(t, resp->delay_ns);
    if (atomic_load_explicit(&t->alt_svc_len, memory_order_relaxed) && !req->h3 && !resp->upgrade)
        add_alt_svc(t, req->worker, resp);
    sq_target_counters_bump(t->cnt, req->worker, ep);
}

int sq_target_start(const struct sq_target_config *cfg, struct sq_target **out, const char **why)
{
    if (why)
        *why = NULL;
    if (!cfg || cfg->threads < 1)
        return -EINVAL;
    if (cfg->stall_ns || cfg->stall_period_ns) {
        if (cfg->stall_ns <= 0 || cfg->stall_ns >= cfg->stall_period_ns ||
            cfg->stall_ns > SQ_TARGET_MAX_STALL_NS)
            return -EINVAL;
    }
    size_t want = cfg->arrivals_cap ? cfg->arrivals_cap : SQ_TARGET_ARRIVALS_CAP;
    if (want > ((size_t)1 << 40))
        return -EINVAL;
    size_t cap = 1;
    while (cap < want)
        cap <<= 1;
    if (cfg->http3 && (!cfg->tls || cfg->unix_path))
        return -EINVAL;
    pthread_once(&block_once, block_fill);
    struct sq_target *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->threads = cfg->threads;
    int slots = t->slots = cfg->threads + (cfg->http3 ? 1 : 0);
    t->start_ns = sq_now_ns();
    t->stall_ns = cfg->stall_ns;
    t->stall_period_ns = cfg->stall_period_ns;
    t->idle_timeout_ns = cfg->idle_timeout_ns;
    t->header_timeout_ns = cfg->header_timeout_ns;
    t->request_timeout_ns = cfg->request_timeout_ns;
    t->min_body_rate = cfg->min_body_rate;
    t->max_conns = cfg->max_conns;
    atomic_store(&t->reset_ns, t->start_ns);
    t->cnt = sq_target_counters_new(slots);
    if (sq_target__app_new(slots, &t->app) < 0) {
        t->app = NULL;
    } else if (cfg->oauth_client && sq_target__app_oauth_client(t->app, cfg->oauth_client) < 0) {
        sq_target__app_free(t->app);
        t->app = NULL;
    }
    t->scr = aligned_alloc(64, (size_t)slots * sizeof(struct scratch));
    if (t->scr) /* zeroed at once: sq_target_free walks it */
        memset(t->scr, 0, (size_t)slots * sizeof(struct scratch));
    t->arr = aligned_alloc(64, (size_t)slots * sizeof(struct arrivals));
    if (t->arr)
        memset(t->arr, 0, (size_t)slots * sizeof(struct arrivals));
    t->hdr = aligned_alloc(64, (size_t)slots * sizeof(struct scratch));
    if (t->hdr)
        memset(t->hdr, 0, (size_t)slots * sizeof(struct scratch));
    if (t->cnt && sq_target__ws_new(slots, t->cnt, &t->ws) < 0)
        t->ws = NULL;
    if (!t->cnt || !t->scr || !t->arr || !t->app || !t->ws || !t->hdr) {
        sq_target_free(t);
        return -ENOMEM;
    }
    for (int w = 0; w < slots; w++) {
        size_t len = cap * sizeof(int64_t);
        void *m = ring_map(len);
        if (!m) {
            sq_target_free(t);
            return -ENOMEM;
        }
        t->arr[w].ts = m;
        t->arr[w].mask = cap - 1;
        t->arr[w].map_len = len;
    }
    struct sq_server_config sc = {
        .host = cfg->host,
        .port = cfg->port,
        .unix_path = cfg->unix_path,
        .threads = cfg->threads,
        .stamp_arrivals = true,
        .tls = cfg->tls,
        .handler = handle,
        .ud = t,
        .idle_timeout_ns = cfg->idle_timeout_ns,
        .header_timeout_ns = cfg->header_timeout_ns,
        .request_timeout_ns = cfg->request_timeout_ns,
        .min_body_rate = cfg->min_body_rate,
        .max_conns = cfg->max_conns,
    };
    int rc = sq_server_start(&sc, &t->srv, why);
    if (rc < 0) {
        sq_target_free(t);
        return rc;
    }
    if (cfg->http3) {
        uint16_t port = sq_server_port(t->srv);
        struct sq_h3srv_config hc = {.host = cfg->host,
                                     .port = port,
                                     .cert_pem = cfg->h3_cert_pem,
                                     .key_pem = cfg->h3_key_pem,
                                     .handler = handle,
                                     .ud = t,
                                     .worker = cfg->threads,
                                     .server = t->srv,
                                     .max_conns = cfg->max_conns,
                                     .idle_timeout_ns = cfg->idle_timeout_ns,
                                     .handshake_timeout_ns = cfg->header_timeout_ns};
        rc = sq_h3srv_start(&hc, &t->h3, why);
        if (rc < 0) {
            t->h3 = NULL;
            sq_target_free(t);
            return rc;
        }
        int n = snprintf(t->alt_svc, sizeof(t->alt_svc), "Alt-Svc: h3=\":%u\"\r\n", (unsigned)port);
        atomic_store_explicit(&t->h3_live, t->h3, memory_order_release);
        atomic_store_explicit(&t->alt_svc_len, (size_t)n, memory_order_release);
    }
    *out = t;
    return 0;
}

uint16_t sq_target_port(const struct sq_target *t)
{
    return sq_server_port(t->srv);
}

void sq_target_stop(struct sq_target *t)
{
    if (t->h3)
        sq_h3srv_stop(t->h3);
    if (t->srv)
        sq_server_stop(t->srv);
}

void sq_target_wait(struct sq_target *t)
{
    if (t->srv)
        sq_server_wait(t->srv);
}

void sq_target_free(struct sq_target *t)
{
    if (!t)
        return;
    sq_h3srv_free(t->h3); /* its thread calls the handler: before anything it uses goes */
    sq_server_free(t->srv);
    if (t->scr)
        for (int i = 0; i < t->slots; i++)
            free(t->scr[i].p);
    free(t->scr);
    if (t->hdr)
        for (int i = 0; i < t->slots; i++)
            free(t->hdr[i].p);
    free(t->hdr);
    if (t->arr)
        for (int i = 0; i < t->slots; i++)
            if (t->arr[i].ts)
                munmap((void *)t->arr[i].ts, t->arr[i].map_len);
    free(t->arr);
    sq_target__app_free(t->app); /* after the server: it may be streaming /json bodies */
    sq_target__ws_free(t->ws);   /* after the server: its connections are closed */
    sq_target_counters_free(t->cnt);
    free(t);
}
