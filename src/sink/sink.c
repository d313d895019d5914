/* sink/sink.c - the ledger of arrivals, the HTTP source, the sink's thread, its result block
 * (see sink.h).
 *
 * The ledger. Streams are found by their run field in a fixed table (open addressing, at most
 * half full; a new stream is inserted under a mutex, looked up without one). Each stream keeps a
 * bitmap of the sequence numbers that arrived, in pages of 2^16 bits (8 KiB) allocated on first
 * use, reached through a directory of 256 blocks of 256 page pointers (2 KiB each, also made on
 * first use): up to 2^32 sequence numbers per stream, and the highest one seen (+1, `top`). An
 * arrival sets its bit with an atomic fetch-or: the thread that flips it delivers the event, any
 * other (or later) arrival of the same bit is a duplicate. So a duplicate is found exactly,
 * whichever source and thread each copy came through, and no event is delivered twice.
 *
 * Memory is capped. Every stream, block and page is charged (its size and malloc's header)
 * against the sink's max_memory before it is made. A stamp whose stream, block or page does not
 * fit is counted `over_cap` (and per stream, when the stream exists) and not recorded; the
 * block or page it needed is marked UNTRACKED for good, so its sequence numbers are never
 * counted lost or delivered afterwards, and the figures of everything that fit stay exact. A
 * forged stamp costs at most a stream, a block and a page (~13 KiB), whatever its numbers: a
 * sequence number far ahead makes one page there, not the pages below it.
 *
 * Lost is a count of clear bits in tracked pages: below `top` (or below what the sender said it
 * sent, after sq_sink_expect), counted by walking the directory (a block never made counts its
 * 2^24 sequence numbers at once). During the run the per-second series counts a gap once it is
 * `settle` old (below the `top` the stream had `settle` ago), so events that are merely late are
 * not reported lost; at the end every gap counts.
 *
 * The ledger alone (sq_sink_ledger_new, the inbox) records under its one shard's mutex, so it
 * can also evict: when a new stream, block or page does not fit, the stream that has gone
 * longest without an arrival (a list in arrival order) is forgotten and its memory reused. So
 * the streams in use win over stale ones: forged stamps sent once cannot lock a real run out.
 *
 * Shards. Every recording thread (each HTTP worker, the sink's thread) has a shard: counters
 * and two latency histograms (the whole run so far, the current second) under a mutex taken
 * once per event, which only the once-a-second tick and the final read also take, so recording
 * never waits in practice. An arrival is recorded in the current second's histogram only; the
 * tick folds that into the run's (the result merges both).
 */
#include "sink/sink.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "loop/loop.h"
#include "net/egress.h"
#include "proto/stamp.h"
#include "server/server.h"
#include "proto/busurl.h"
#include "sink/internal.h"
#include "stats/hist.h"
#include "stats/histjson.h"

#define MAX_STREAMS  4096              /* one run's worth: the stamp's 12 worker bits */
#define TABLE        (2 * MAX_STREAMS) /* open addressing, at most half full */
#define PAGE_SHIFT   16                /* a page: 2^16 sequence numbers, 8 KiB */
#define PAGE_SEQS    (1ull << PAGE_SHIFT)
#define PAGE_WORDS   (PAGE_SEQS / 64)
#define BLOCK_PAGES  256 /* a block: 256 pages, 2^24 sequence numbers */
#define BLOCK_SHIFT  (PAGE_SHIFT + 8)
#define BLOCK_SEQS   (1ull << BLOCK_SHIFT)
#define DIR_BLOCKS   256 /* a stream: 256 blocks, 2^32 sequence numbers */
#define MAX_SEQ      (BLOCK_SEQS * DIR_BLOCKS)
#define HISTORY      64 /* seconds of `top` kept for the settle */
#define STREAM_SHIFT 12 /* engine/run.h's SQ_STAMP_STREAM_BITS */
#define MALLOC_HEAD  16 /* what malloc adds to each allocation, charged too */
/* A block or page that did not fit under the cap: its sequence numbers are not tracked. */
#define UNTRACKED ((void *)(uintptr_t)1)

struct block {
    uint64_t *pages[BLOCK_PAGES]; /* atomic pointers; UNTRACKED */
};

struct stream {
    uint64_t run;
    struct block *dir[DIR_BLOCKS]; /* atomic pointers; UNTRACKED */
    uint64_t top;                  /* highest sequence number seen + 1 (atomic) */
    uint64_t expected;             /* what the sender stamped (has_expected) */
    int has_expected;              /* atomic */
    /* Of those, the ones whose publish never completed (sq_sink_expect): sorted, distinct, below
     * `expected`; nunf is stored (release) after unf, and read (acquire) before it. Never lost:
     * missing() counts them apart. */
    uint64_t *unf;
    uint64_t nunf;
    /* the tick's own: `top` at the end of each of the last HISTORY seconds */
    uint64_t top_at[HISTORY];
    uint64_t lost_reported;
    uint64_t duplicates, out_of_order; /* atomic: sq_sink_streams' per-stream counts */
    uint64_t over_cap;                 /* atomic: arrivals not tracked (the memory cap) */
    void *tag;                         /* sq_sink_record's, set when the stream is made */
    struct stream *newer, *older;      /* the ledger alone: arrival order (its shard's mutex) */
};

struct shard {
    pthread_mutex_t mu;
    uint64_t delivered, duplicates, out_of_order, unstamped, foreign, out_of_range, over_cap,
        skewed;
    uint64_t events, bytes;
    struct sq_hist *total, *second;
    struct sq_sink_scratch *scratch; /* the finder's state for this thread */
};

struct sq_sink {
    struct sq_sink_config cfg;
    /* cfg.http points here: the caller's string (a beside-the-load sink builds it in a buffer
     * of its own frame) need not outlive sq_sink_start, and sq_sink_json reads it at the end */
    char http[SQ_SINK_HTTP_MAX];
    bool settle_stopped; /* *stop cut sq_sink_settle's wait short */
    struct sq_sink_finder *finder;
    struct stream *streams[TABLE]; /* atomic pointers */
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
    int told;            /* atomic: sq_sink_expect ran */
    struct sq_sink_second *series;
    size_t nseries, capseries;
    uint64_t last[5];     /* the previous tick's cumulative counts */
    struct sq_hist *tick; /* the tick's merge scratch */
    uint64_t max_bytes;   /* the ledger's cap: streams, blocks and pages */
    uint64_t used;        /* atomic: what they take now, charged before they are made */
    /* The ledger alone: it evicts the stream with the oldest arrival to make room. */
    bool evict;
    struct stream *newest, *oldest;
    uint64_t evicted;
};

/* ---- memory ---- */

/* Reserves n bytes under the cap (force: even over it). */
static bool charge(struct sq_sink *s, uint64_t n, bool force)
{
    n += MALLOC_HEAD;
    uint64_t now = __atomic_add_fetch(&s->used, n, __ATOMIC_RELAXED);
    if (now <= s->max_bytes || force)
        return true;
    __atomic_sub_fetch(&s->used, n, __ATOMIC_RELAXED);
    return false;
}

static void uncharge(struct sq_sink *s, uint64_t n)
{
    __atomic_sub_fetch(&s->used, n + MALLOC_HEAD, __ATOMIC_RELAXED);
}

static bool made(const void *p)
{
    return p && p != UNTRACKED;
}

/* Frees a stream, its blocks and pages, and gives their memory back. */
static void stream_free(struct sq_sink *s, struct stream *st)
{
    for (uint32_t d = 0; d < DIR_BLOCKS; d++) {
        struct block *b = st->dir[d];
        if (!made(b))
            continue;
        for (uint32_t p = 0; p < BLOCK_PAGES; p++)
            if (made(b->pages[p])) {
                free(b->pages[p]);
                uncharge(s, PAGE_WORDS * sizeof(uint64_t));
            }
        free(b);
        uncharge(s, sizeof(*b));
    }
    free(st->unf);
    free(st);
    uncharge(s, sizeof(*st));
}

/* ---- streams ---- */

static uint32_t run_hash(uint64_t run)
{
    run ^= run >> 33;
    run *= 0xFF51AFD7ED558CCDull;
    run ^= run >> 33;
    return (uint32_t)run & (TABLE - 1);
}

/* The ledger alone: takes st, which is in it, out of the arrival order. */
static void list_out(struct sq_sink *s, struct stream *st)
{
    if (st->newer)
        st->newer->older = st->older;
    if (st->older)
        st->older->newer = st->newer;
    if (s->oldest == st)
        s->oldest = st->newer;
    if (s->newest == st)
        s->newest = st->older;
}

/* The ledger alone: st arrived just now (the newest in arrival order). Under its shard's mutex. */
static void touch(struct sq_sink *s, struct stream *st)
{
    if (s->newest == st)
        return;
    if (st->older || st->newer || s->oldest == st) /* in the list: take it out */
        list_out(s, st);
    st->older = s->newest;
    st->newer = NULL;
    if (s->newest)
        s->newest->newer = st;
    s->newest = st;
    if (!s->oldest)
        s->oldest = st;
}

/* The ledger alone: forgets the stream with the oldest arrival but `keep`, and frees it.
 * False when there is none. Under its shard's mutex (every reader of the table takes it). */
static bool evict_oldest(struct sq_sink *s, const struct stream *keep)
{
    struct stream *v = s->oldest;
    if (v == keep)
        v = v->newer;
    if (!v)
        return false;
    list_out(s, v);
    /* out of the table: linear probing's deletion, moving back the entries of the run after it
     * whose home is not between the hole and them */
    uint32_t i = run_hash(v->run);
    while (s->streams[i] != v)
        i = (i + 1) & (TABLE - 1);
    s->streams[i] = NULL;
    for (uint32_t j = (i + 1) & (TABLE - 1); s->streams[j]; j = (j + 1) & (TABLE - 1)) {
        uint32_t h = run_hash(s->streams[j]->run);
        bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (stays)
            continue;
        s->streams[i] = s->streams[j];
        s->streams[j] = NULL;
        i = j;
    }
    s->nstreams--;
    s->evicted++;
    stream_free(s, v);
    return true;
}

/* What a new stream with its first block and page takes. */
#define STREAM_COST                                                                                \
    (sizeof(struct stream) + sizeof(struct block) + PAGE_WORDS * sizeof(uint64_t) + 3 * MALLOC_HEAD)

/* The stream of `run`, made on first sight (tag is its tag then); NULL when the table is full
 * (*over: false) or the cap leaves no room for it (*over: true). force: made over the cap. */
static struct stream *stream_of(struct sq_sink *s, uint64_t run, void *tag, bool force, bool *over)
{
    *over = false;
    uint32_t i = run_hash(run);
    for (uint32_t k = 0; k < TABLE; k++, i = (i + 1) & (TABLE - 1)) {
        struct stream *st = __atomic_load_n(&s->streams[i], __ATOMIC_ACQUIRE);
        if (!st)
            break;
        if (st->run == run)
            return st;
    }
    if (s->evict) /* room first: the oldest stream goes while the table or the cap is full */
        while ((s->nstreams >= MAX_STREAMS ||
                __atomic_load_n(&s->used, __ATOMIC_RELAXED) + STREAM_COST > s->max_bytes) &&
               evict_oldest(s, NULL))
            ;
    pthread_mutex_lock(&s->streams_mu);
    struct stream *found = NULL;
    i = run_hash(run);
    for (uint32_t k = 0; k < TABLE; k++, i = (i + 1) & (TABLE - 1)) {
        struct stream *st = s->streams[i];
        if (st && st->run == run) {
            found = st;
            break;
        }
        if (!st) {
            if (s->nstreams >= MAX_STREAMS)
                break; /* keep the table sparse: lookups stay short */
            /* a stream only when its first page would fit too: no empty streams past the cap */
            if (!force &&
                __atomic_load_n(&s->used, __ATOMIC_RELAXED) + STREAM_COST > s->max_bytes) {
                *over = true;
                break;
            }
            if (!charge(s, sizeof(*st), force)) {
                *over = true;
                break;
            }
            st = calloc(1, sizeof(*st));
            if (!st) {
                uncharge(s, sizeof(*st));
                *over = true;
                break;
            }
            st->run = run;
            st->tag = tag;
            s->nstreams++;
            __atomic_store_n(&s->streams[i], st, __ATOMIC_RELEASE);
            found = st;
            break;
        }
    }
    pthread_mutex_unlock(&s->streams_mu);
    return found;
}

/* The pointer in *slot, made (size bytes, zeroed) when there is none and it fits; UNTRACKED
 * when it did not fit, now or before. */
static void *slot_of(struct sq_sink *s, void **slot, size_t size, const struct stream *st)
{
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (p)
        return p;
    bool fits = charge(s, size, false);
    while (!fits && s->evict && evict_oldest(s, st))
        fits = charge(s, size, false);
    void *fresh = fits ? calloc(1, size) : NULL;
    if (fits && !fresh)
        uncharge(s, size);
    void *want = fresh ? fresh : UNTRACKED;
    void *expect = NULL;
    if (__atomic_compare_exchange_n(slot, &expect, want, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return want;
    if (fresh) { /* another thread made it (or gave up on it) first */
        free(fresh);
        uncharge(s, size);
    }
    return expect;
}

/* The page holding seq's bit; NULL when it is not tracked (the cap). */
static uint64_t *page_of(struct sq_sink *s, struct stream *st, uint64_t seq)
{
    struct block *b = slot_of(s, (void **)&st->dir[seq >> BLOCK_SHIFT], sizeof(struct block), st);
    if (b == UNTRACKED)
        return NULL;
    uint64_t *p = slot_of(s, (void **)&b->pages[(seq >> PAGE_SHIFT) & (BLOCK_PAGES - 1)],
                          PAGE_WORDS * sizeof(uint64_t), st);
    return p == UNTRACKED ? NULL : p;
}

/* In [0, limit): the sequence numbers that did not arrive (clear bits in tracked pages, every
 * one in a page or block never made) and those not tracked (the cap). With list, the first `max`
 * missing ones are written there (*nlist counts them). */
struct gaps {
    uint64_t missing, untracked;
    /* the unfinished ones below limit (not in missing): missing, and arrived all the same */
    uint64_t unf_missing, unf_arrived;
};

static bool is_unfinished(const uint64_t *unf, uint64_t n, uint64_t seq)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (unf[mid] == seq)
            return true;
        if (unf[mid] < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* Whether seq arrived: 1 yes, 0 no, -1 not tracked (the cap). */
static int arrived(const struct stream *st, uint64_t seq)
{
    const struct block *b = __atomic_load_n(&st->dir[seq >> BLOCK_SHIFT], __ATOMIC_ACQUIRE);
    if (!made(b))
        return b == UNTRACKED ? -1 : 0;
    const uint64_t *p =
        __atomic_load_n(&b->pages[(seq >> PAGE_SHIFT) & (BLOCK_PAGES - 1)], __ATOMIC_ACQUIRE);
    if (!made(p))
        return p == UNTRACKED ? -1 : 0;
    uint64_t i = seq & (PAGE_SEQS - 1);
    return (__atomic_load_n(&p[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1;
}

/* Lists q as missing unless it is unfinished (the first `max` only). */
#define LIST(q)                                                                                    \
    do {                                                                                           \
        if (*nlist < max && !is_unfinished(unf, nunf, (q)))                                        \
            list[(*nlist)++] = (q);                                                                \
    } while (0)

static struct gaps missing(const struct stream *st, uint64_t limit, uint64_t *list, uint32_t max,
                           uint32_t *nlist)
{
    struct gaps g = {0, 0, 0, 0};
    uint64_t nunf = __atomic_load_n(&st->nunf, __ATOMIC_ACQUIRE);
    const uint64_t *unf = st->unf;
    if (limit > MAX_SEQ)
        limit = MAX_SEQ;
    for (uint64_t base = 0; base < limit;) {
        const struct block *b = __atomic_load_n(&st->dir[base >> BLOCK_SHIFT], __ATOMIC_ACQUIRE);
        uint64_t bend = limit - base < BLOCK_SEQS ? limit : base + BLOCK_SEQS;
        if (!made(b)) {
            if (b == UNTRACKED) {
                g.untracked += bend - base;
            } else {
                for (uint64_t q = base; list && *nlist < max && q < bend; q++)
                    LIST(q);
                g.missing += bend - base;
            }
            base = bend;
            continue;
        }
        for (; base < bend; base += PAGE_SEQS) {
            const uint64_t *p = __atomic_load_n(&b->pages[(base >> PAGE_SHIFT) & (BLOCK_PAGES - 1)],
                                                __ATOMIC_ACQUIRE);
            uint64_t n = bend - base < PAGE_SEQS ? bend - base : PAGE_SEQS;
            if (p == UNTRACKED) {
                g.untracked += n;
                continue;
            }
            if (!p) {
                for (uint64_t q = 0; list && *nlist < max && q < n; q++)
                    LIST(base + q);
                g.missing += n;
                continue;
            }
            for (uint64_t w = 0; w * 64 < n; w++) {
                uint64_t bits = __atomic_load_n(&p[w], __ATOMIC_RELAXED);
                uint64_t valid = n - w * 64 >= 64 ? ~0ull : (1ull << (n - w * 64)) - 1;
                uint64_t clear = ~bits & valid;
                if (!clear)
                    continue;
                g.missing += (uint64_t)__builtin_popcountll(clear);
                while (list && clear && *nlist < max) {
                    LIST(base + w * 64 + (uint64_t)__builtin_ctzll(clear));
                    clear &= clear - 1;
                }
            }
        }
    }
    /* an event the sender never finished sending is not lost by the pipeline */
    for (uint64_t k = 0; k < nunf && unf[k] < limit; k++) {
        int a = arrived(st, unf[k]);
        if (a == 0) {
            g.missing--;
            g.unf_missing++;
        } else if (a == 1) {
            g.unf_arrived++;
        }
    }
    return g;
}
#undef LIST

/* ---- recording ---- */

struct rec {
    struct sq_sink *s;
    struct shard *sh;
    int64_t now_real;
    int64_t now_mono;
    bool any;
    struct sq_sink_hit *hit; /* sq_sink_record's: the first stamp's fate (NULL: none asked) */
    void *tag;               /* sq_sink_record's: a new stream's tag */
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
    bool over = false;
    struct stream *st =
        stamp->seq < MAX_SEQ ? stream_of(s, stamp->run, r->tag, false, &over) : NULL;
    if (st && s->evict)
        touch(s, st);
    uint64_t *page = st ? page_of(s, st, stamp->seq) : NULL;
    if (!page) {
        if (st || over) {
            sh->over_cap++; /* the memory cap: counted, not tracked */
            if (st)
                __atomic_fetch_add(&st->over_cap, 1, __ATOMIC_RELAXED);
        } else {
            sh->out_of_range++; /* a sequence number past 2^32, or the table is full */
        }
        if (hit) {
            hit->unmatched = true;
            hit->over_cap = st || over;
        }
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

/* One event into r's shard: its stamps found and recorded, its counts. fold: the second's
 * histogram is folded into the total when it grows large (for a caller no tick folds for). The
 * shard's mutex is taken once around all of it (only the once-a-second tick and the final read
 * contend for it). Returns the stamps found. */
static size_t take_event(struct rec *r, const char *body, size_t len,
                         const struct sq_sink_field *fields, size_t nfields, bool fold)
{
    struct sq_sink *s = r->s;
    struct shard *sh = r->sh;
    pthread_mutex_lock(&sh->mu);
    size_t n = sq_sink_find(s->finder, sh->scratch, body, len, fields, nfields, record, r);
    sh->events++;
    sh->bytes += len;
    if (n == 0)
        sh->unstamped++;
    if (fold && sq_hist_total(sh->second) > (1 << 20)) {
        sq_hist_merge(sh->total, sh->second);
        sq_hist_reset(sh->second);
    }
    pthread_mutex_unlock(&sh->mu);
    __atomic_store_n(&s->last_ns, sq_now_ns(), __ATOMIC_RELAXED);
    return n;
}

/* One event from a source (HTTP, a bus subscription). */
void sq_sink__event(struct sq_sink *s, int shard, const char *body, size_t len,
                    const struct sq_sink_field *fields, size_t nfields)
{
    struct rec r = {.s = s, .sh = &s->shards[shard], .now_real = sq_stamp_now_ns()};
    (void)take_event(&r, body, len, fields, nfields, false);
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
    for (uint32_t i = 0; i < TABLE; i++) {
        struct stream *st = __atomic_load_n(&s->streams[i], __ATOMIC_ACQUIRE);
        if (!st)
            continue;
        uint64_t top = __atomic_load_n(&st->top, __ATOMIC_RELAXED);
        st->top_at[sec % HISTORY] = top;
        uint64_t limit = final ? top : sec >= back ? st->top_at[(sec - back) % HISTORY] : 0;
        if (__atomic_load_n(&st->has_expected, __ATOMIC_ACQUIRE) && final)
            limit = st->expected;
        uint64_t lost = limit ? missing(st, limit, NULL, 0, NULL).missing : 0;
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

/* With an egress policy: where the HTTP source would listen, resolved and checked; its first
 * address, numeric, into numeric (the server binds exactly that, no second lookup). */
static int listen_checked(const struct sq_sink_config *cfg, char *numeric, size_t nlen,
                          uint16_t *port, char *err, size_t len)
{
    char host[256], why[800];
    split_listen(cfg->http, host, sizeof(host), port);
    struct sq_addr a;
    int rc = sq_egress_lookup(cfg->egress, NULL, "http", host, *port, SQ_EGRESS_LISTEN, &a, 1, why,
                              sizeof(why));
    if (rc < 0) {
        snprintf(err, len, rc == -EACCES ? "%s" : "--http: %s", why);
        return rc == -EACCES ? rc : -SQ_ERESOLVE;
    }
    char at[80];
    sq_addr_format(&a, at, sizeof(at)); /* "127.0.0.1:9000", "[::1]:9000" */
    char *colon = strrchr(at, ':');
    if (colon)
        *colon = '\0';
    bool v6 = at[0] == '[';
    snprintf(numeric, nlen, "%.*s", (int)strlen(at) - (v6 ? 2 : 0), at + v6);
    return 0;
}

/* With an egress policy: a broker, resolved and checked. */
static int broker_checked(const struct sq_sink_config *cfg, const struct sq_bus_url *u, int k,
                          char *err, size_t len)
{
    char why[800];
    struct sq_addr a;
    int rc = sq_egress_lookup(cfg->egress, NULL, k == 0 ? "nats" : "mqtt", u->host, u->port,
                              SQ_EGRESS_CONNECT, &a, 1, why, sizeof(why));
    if (rc == -EACCES) {
        snprintf(err, len, "%s", why);
        return rc;
    }
    if (rc < 0) {
        snprintf(err, len, "%s: %s", k == 0 ? "--nats" : "--mqtt", why);
        return -SQ_ERESOLVE;
    }
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
    if (cfg->max_memory &&
        (cfg->max_memory < SQ_SINK_MIN_MAX_MEMORY || cfg->max_memory > SQ_SINK_MAX_MAX_MEMORY))
        return (snprintf(err, len, "--max-memory: from 1MiB to 1024GiB"), -SQ_EUSAGE);
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
        if (urc == 0 && cfg->egress)
            urc = broker_checked(cfg, &u, k, err, len);
        sq_bus_url_dispose(&u);
        if (urc == -SQ_EPARSE)
            return (snprintf(err, len, "%s: '%s': %s", k == 0 ? "--nats" : "--mqtt", url,
                             why ? why : "not a URL"),
                    -SQ_EUSAGE);
        if (urc < 0)
            return urc;
    }
    if (cfg->http && cfg->egress) {
        char numeric[INET6_ADDRSTRLEN + 2];
        int rc = listen_checked(cfg, numeric, sizeof(numeric), &port, err, len);
        if (rc < 0)
            return rc;
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
    if (cfg->http) {
        if (strlen(cfg->http) >= sizeof(s->http)) {
            free(s);
            snprintf(err, len, "--http: '%.40s...' is longer than %d bytes", cfg->http,
                     SQ_SINK_HTTP_MAX - 1);
            return -SQ_EUSAGE;
        }
        strcpy(s->http, cfg->http);
        s->cfg.http = s->http;
    }
    if (!s->cfg.settle_ns)
        s->cfg.settle_ns = SQ_SINK_DEFAULT_SETTLE_NS;
    if (!s->cfg.list_lost)
        s->cfg.list_lost = SQ_SINK_DEFAULT_LIST_LOST;
    if (!s->cfg.http_threads)
        s->cfg.http_threads = 1;
    if (!s->cfg.max_memory)
        s->cfg.max_memory = SQ_SINK_DEFAULT_MAX_MEMORY;
    s->max_bytes = s->cfg.max_memory;
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
        /* a run's sink: where its policy allows, resolved once (the server binds the address) */
        if (cfg->egress)
            rc = listen_checked(cfg, host, sizeof(host), &port, err, len);
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
        if (rc == 0) {
            rc = sq_server_start(&sc, &s->server, &why);
            if (rc < 0)
                snprintf(err, len, "--http: cannot listen on %s: %s", cfg->http,
                         why ? why : sq_strerror(rc));
            else
                s->http_port = sq_server_port(s->server);
        }
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

bool sq_sink_unsubscribed(const struct sq_sink *s, char *why, size_t len)
{
    for (int i = 0; i < s->nbus; i++)
        if (sq_sink__bus_never(s->bus[i], why, len))
            return true;
    return false;
}

uint16_t sq_sink_http_port(const struct sq_sink *s)
{
    return s->http_port;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A stream's unfinished sequence numbers: sorted, distinct, below what it stamped. Out of
 * memory: none (they count as lost then). */
static void set_unfinished(struct stream *st, const uint64_t *seqs, uint64_t n)
{
    uint64_t *v = n ? malloc(n * sizeof(*v)) : NULL;
    if (!v)
        return;
    memcpy(v, seqs, n * sizeof(*v));
    qsort(v, n, sizeof(*v), cmp_u64);
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++)
        if (v[i] < st->expected && (k == 0 || v[k - 1] != v[i]))
            v[k++] = v[i];
    free(st->unf);
    st->unf = v;
    __atomic_store_n(&st->nunf, k, __ATOMIC_RELEASE);
}

void sq_sink_expect(struct sq_sink *s, const struct sq_sink_sent *sent)
{
    uint64_t sum = 0;
    for (uint32_t w = 0; w < sent->nstreams; w++) {
        bool over;
        /* the run's own streams: made even over the cap (their pages still obey it) */
        struct stream *st = stream_of(s, sent->run_id + w, NULL, true, &over);
        if (!st)
            continue;
        st->expected = sent->stamped[w];
        if (sent->unfinished && sent->nunfinished && sent->nunfinished[w])
            set_unfinished(st, sent->unfinished[w], sent->nunfinished[w]);
        __atomic_store_n(&st->has_expected, 1, __ATOMIC_RELEASE);
        sum += sent->stamped[w] - __atomic_load_n(&st->nunf, __ATOMIC_RELAXED);
    }
    s->run_expect = sent->run_id;
    __atomic_store_n(&s->expected, sum, __ATOMIC_RELEASE);
    __atomic_store_n(&s->told, 1, __ATOMIC_RELEASE);
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
        t->over_cap += sh->over_cap;
        pthread_mutex_unlock(&sh->mu);
    }
    t->ledger_bytes = __atomic_load_n(&s->used, __ATOMIC_RELAXED);
    t->expected = __atomic_load_n(&s->expected, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; t->expected && i < TABLE; i++) {
        struct stream *st = __atomic_load_n(&s->streams[i], __ATOMIC_ACQUIRE);
        if (st && __atomic_load_n(&st->has_expected, __ATOMIC_ACQUIRE)) {
            /* what is not tracked (the cap) cannot be waited for: it counts as in; so does
             * what was never sent in full (unfinished: not in g.missing) */
            struct gaps g = missing(st, st->expected, NULL, 0, NULL);
            t->expected_in +=
                st->expected - __atomic_load_n(&st->nunf, __ATOMIC_RELAXED) - g.missing;
        }
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
    for (uint32_t i = 0; i < TABLE; i++)
        if (s->streams[i])
            stream_free(s, s->streams[i]);
    sq_hist_free(s->tick);
    sq_sink_finder_free(s->finder);
    free(s->series);
    pthread_mutex_destroy(&s->streams_mu);
    free(s);
}

/* ---- the result block ---- */

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

json_t *sq_sink__latency_json(const struct sq_hist *lat)
{
    json_t *l = json_object();
    if (!l)
        return NULL;
    int64_t n = sq_hist_total(lat);
    json_object_set_new(l, "measured_from", json_string("stamp_send_time"));
    json_object_set_new(l, "count", json_integer((json_int_t)n));
    json_object_set_new(l, "min_us", json_integer(n ? (json_int_t)sq_hist_min(lat) : 0));
    json_object_set_new(l, "mean_us", json_real(n ? sq_hist_mean(lat) : 0));
    static const struct {
        const char *key;
        double p;
    } ps[] = {{"p50_us", 50}, {"p90_us", 90}, {"p95_us", 95}, {"p99_us", 99}, {"p99_9_us", 99.9}};
    for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++)
        json_object_set_new(l, ps[k].key,
                            json_integer(n ? (json_int_t)sq_hist_percentile(lat, ps[k].p) : 0));
    json_object_set_new(l, "max_us", json_integer(n ? (json_int_t)sq_hist_max(lat) : 0));
    json_object_set_new(l, "histogram", sq_hist_json(lat));
    return l;
}

json_t *sq_sink_json(struct sq_sink *s)
{
    uint64_t delivered = 0, dup = 0, ooo = 0, unst = 0, foreign = 0, oor = 0, over = 0, skew = 0,
             ev = 0, bytes = 0;
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
        over += sh->over_cap;
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
    uint64_t lost = 0, expected = 0, stamped = 0, unfinished = 0, unf_delivered = 0;
    bool all_expected = __atomic_load_n(&s->told, __ATOMIC_ACQUIRE) != 0;
    if (s->evict) /* the ledger alone frees what it evicts under this mutex */
        pthread_mutex_lock(&s->shards[0].mu);
    for (uint32_t i = 0; i < TABLE && list; i++) {
        struct stream *st = s->streams[i];
        if (!st)
            continue;
        uint64_t top = __atomic_load_n(&st->top, __ATOMIC_RELAXED);
        bool has = __atomic_load_n(&st->has_expected, __ATOMIC_ACQUIRE);
        uint64_t limit = has ? st->expected : top;
        uint32_t before = nlist;
        struct gaps gp = missing(st, limit, list, max, &nlist);
        uint64_t m = gp.missing;
        uint64_t got = limit - m - gp.unf_missing - gp.untracked;
        uint64_t beyond = top > limit ? top - limit : 0;
        uint64_t nunf = has ? __atomic_load_n(&st->nunf, __ATOMIC_ACQUIRE) : 0;
        lost += m;
        if (has) {
            expected += st->expected - nunf;
            stamped += st->expected;
            unfinished += nunf;
            unf_delivered += gp.unf_arrived;
        }
        char run[32];
        run_text(st->run, run);
        for (uint32_t k = before; k < nlist; k++)
            json_array_append_new(
                lost_list, json_pack("{s:s, s:I}", "stream", run, "seq", (json_int_t)list[k]));
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:o}", "stream", run, "delivered",
                              (json_int_t)got, "lost", (json_int_t)m, "highest_seq",
                              top ? (json_int_t)(top - 1) : (json_int_t)-1, "sent",
                              has ? json_integer((json_int_t)(st->expected - nunf)) : json_null());
        if (has) {
            json_object_set_new(o, "stamped", json_integer((json_int_t)st->expected));
            json_object_set_new(o, "unfinished", json_integer((json_int_t)nunf));
            json_object_set_new(o, "unfinished_delivered",
                                json_integer((json_int_t)gp.unf_arrived));
        }
        if (beyond)
            json_object_set_new(o, "beyond_sent", json_integer((json_int_t)beyond));
        uint64_t oc = __atomic_load_n(&st->over_cap, __ATOMIC_RELAXED);
        if (oc) /* its figures are those of what was tracked */
            json_object_set_new(o, "over_cap", json_integer((json_int_t)oc));
        json_array_append_new(streams, o);
    }
    if (s->evict)
        pthread_mutex_unlock(&s->shards[0].mu);
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
    json_t *l = sq_sink__latency_json(lat);
    sq_hist_free(lat);
    double dur = (double)(sq_now_ns() - s->start_ns) / 1e9;
    if (s->nseries)
        dur = s->series[s->nseries - 1].t_s;
    json_t *j = json_pack(
        "{s:o, s:s, s:f, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:f, s:o, s:o, s:o, s:o}",
        "sources", sources, "stamp", s->cfg.find ? s->cfg.find : "scan", "settle_s",
        (double)s->cfg.settle_ns / 1e9, "sent",
        all_expected ? json_integer((json_int_t)expected) : json_null(), "delivered",
        (json_int_t)delivered, "lost", (json_int_t)lost, "duplicates", (json_int_t)dup,
        "out_of_order", (json_int_t)ooo, "unstamped", (json_int_t)unst, "foreign",
        (json_int_t)foreign, "out_of_range", (json_int_t)oor, "over_cap", (json_int_t)over,
        "max_memory", (json_int_t)s->max_bytes, "ledger_bytes",
        (json_int_t)__atomic_load_n(&s->used, __ATOMIC_RELAXED), "clock_skewed", (json_int_t)skew,
        "events", (json_int_t)ev, "bytes", (json_int_t)bytes, "duration_s", dur, "lost_seqs",
        lost_list, "latency", l, "streams", streams, "series", series);
    if (j && all_expected) {
        json_object_set_new(j, "stamped", json_integer((json_int_t)stamped));
        json_object_set_new(j, "unfinished", json_integer((json_int_t)unfinished));
        json_object_set_new(j, "unfinished_delivered", json_integer((json_int_t)unf_delivered));
    }
    if (j && s->settle_stopped) /* events still on their way count as lost */
        json_object_set_new(j, "settle_stopped", json_true());
    char why[512];
    if (j && s->stopped && sq_sink_unsubscribed(s, why, sizeof(why)))
        json_object_set_new(j, "error", json_string(why));
    return j;
}

/* ---- the ledger alone (sink.h) ---- */

int sq_sink_ledger_new(const char *find, uint64_t max_bytes, struct sq_sink **out, char *err,
                       size_t len)
{
    *out = NULL;
    struct sq_sink *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg.find = find;
    s->max_bytes = max_bytes ? max_bytes : SQ_SINK_DEFAULT_MAX_MEMORY;
    s->cfg.max_memory = s->max_bytes;
    s->evict = true;
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
                      const struct sq_sink_field *fields, size_t nfields, void *tag,
                      struct sq_sink_hit *hit)
{
    if (hit)
        memset(hit, 0, sizeof(*hit));
    struct rec r = {
        .s = s, .sh = &s->shards[0], .now_real = sq_stamp_now_ns(), .hit = hit, .tag = tag};
    return take_event(&r, body, len, fields, nfields, true); /* no tick here: fold now and then */
}

size_t sq_sink_streams(struct sq_sink *s,
                       void (*each)(void *ud, const struct sq_sink_stream_counts *c), void *ud)
{
    size_t k = 0;
    /* the ledger alone frees the streams it evicts under its shard's mutex: hold it */
    if (s->evict)
        pthread_mutex_lock(&s->shards[0].mu);
    for (uint32_t i = 0; i < TABLE; i++) {
        struct stream *st = __atomic_load_n(&s->streams[i], __ATOMIC_ACQUIRE);
        if (!st)
            continue;
        uint64_t top = __atomic_load_n(&st->top, __ATOMIC_RELAXED);
        struct gaps g = missing(st, top, NULL, 0, NULL);
        struct sq_sink_stream_counts c = {
            .run = st->run,
            .tag = st->tag,
            .delivered = top - g.missing - g.untracked,
            .duplicates = __atomic_load_n(&st->duplicates, __ATOMIC_RELAXED),
            .out_of_order = __atomic_load_n(&st->out_of_order, __ATOMIC_RELAXED),
            .over_cap = __atomic_load_n(&st->over_cap, __ATOMIC_RELAXED),
            .missing = g.missing,
            .highest = top ? (int64_t)(top - 1) : -1,
        };
        run_text(st->run, c.run_text);
        each(ud, &c);
        k++;
    }
    if (s->evict)
        pthread_mutex_unlock(&s->shards[0].mu);
    return k;
}

void sq_sink_ledger_counts(struct sq_sink *s, struct sq_sink_ledger_counts *c)
{
    pthread_mutex_lock(&s->shards[0].mu);
    *c = (struct sq_sink_ledger_counts){
        .streams = s->nstreams,
        .evicted = s->evicted,
        .over_cap = s->shards[0].over_cap,
        .out_of_range = s->shards[0].out_of_range,
        .bytes = __atomic_load_n(&s->used, __ATOMIC_RELAXED),
        .max_bytes = s->max_bytes,
    };
    pthread_mutex_unlock(&s->shards[0].mu);
}
