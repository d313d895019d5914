/* engine/run.c - run lifecycle: split the work, start the workers, watch, join, merge.
 *
 * The main thread never touches a worker's hot state while it runs: it reads only the small
 * `live` block each worker publishes with relaxed atomics, and merges shards after join.
 */
#include "engine/run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/clock.h"
#include "engine/busconf.h"
#include "engine/client.h"
#include "engine/driver.h"
#include "engine/flow.h"
#include "engine/worker.h"
#include "plan/tmpl.h"
#include "proto/stamp.h"
#include "stats/hist.h"

#define WATCH_NS (20 * SQ_NS_PER_MS)

/* ---- run ids, seeds, connections ---- */

uint64_t sq_run_new_id(void)
{
    /* 52 random bits (the low ones carry the worker: SQ_STAMP_STREAM_BITS) */
    static uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 40) ^
                 __atomic_add_fetch(&counter, 0x9E3779B97F4A7C15ull, __ATOMIC_RELAXED);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    uint64_t id = x << SQ_STAMP_STREAM_BITS;
    return id ? id : 1ull << SQ_STAMP_STREAM_BITS; /* never 0: 0 means "draw one" */
}

uint64_t sq_run_new_seed(void)
{
    uint64_t x;
    if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x)) {
        /* no entropy from the kernel (a seccomp filter, an old kernel): a run id's mix */
        x = sq_run_new_id() ^ (uint64_t)sq_now_ns();
    }
    return x & SQ_SEED_MAX;
}

void sq_stamp_run_text(uint64_t run, char *out)
{
    struct sq_stamp_enc e;
    sq_stamp_enc_init(&e, run);
    /* the encoder's head is "sq1.<run>." */
    size_t n = (size_t)e.head_len - SQ_STAMP_PREFIX_LEN - 1;
    memcpy(out, e.head + SQ_STAMP_PREFIX_LEN, n);
    out[n] = '\0';
}

uint32_t sq_run_connections(const struct sq_run_config *cfg, uint32_t vus)
{
    uint32_t per = 1;
    if (cfg->scens)
        return vus;
    if (cfg->bus)
        per = cfg->bus->window ? cfg->bus->window : 1;
    else if (cfg->h2_request && cfg->streams > 1)
        per = cfg->streams;
    return (uint32_t)(((uint64_t)vus + per - 1) / per);
}

/* ---- the open model's spin tail ---- */

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / SQ_NS_PER_S, .tv_nsec = ns % SQ_NS_PER_S};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Measures how late this machine's timed waits wake up (epoll_pwait2 with 1 ns timer slack,
 * the way workers wait), and returns a busy-wait tail that covers the 90th percentile of the
 * overshoot: the open model sleeps until that long before an arrival and polls for the rest.
 * docs/internals/engine.md has the table this was sized from. */
static int64_t calibrate_spin(void)
{
    enum { N = 25 };
    int64_t over[N];
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return 50 * SQ_NS_PER_US;
    unsigned long old = (unsigned long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    struct epoll_event ev;
    for (int i = 0; i < N; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 200 * SQ_NS_PER_US};
        int64_t t0 = sq_now_ns();
        epoll_pwait2(ep, &ev, 1, &ts, NULL);
        over[i] = sq_now_ns() - t0 - ts.tv_nsec;
    }
    prctl(PR_SET_TIMERSLACK, old, 0, 0, 0);
    close(ep);
    for (int i = 1; i < N; i++) /* insertion sort: 25 values */
        for (int k = i; k > 0 && over[k - 1] > over[k]; k--) {
            int64_t t = over[k];
            over[k] = over[k - 1];
            over[k - 1] = t;
        }
    int64_t spin = over[N * 9 / 10] + 10 * SQ_NS_PER_US;
    if (spin < 20 * SQ_NS_PER_US)
        spin = 20 * SQ_NS_PER_US;
    if (spin > 500 * SQ_NS_PER_US)
        spin = 500 * SQ_NS_PER_US;
    return spin;
}

/* ---- the per-second series: the interval shards merged on the main thread ---- */

/* The main thread's half of the interval shards: merges each second's slots from every worker
 * into one series entry, and every slot into the run's total histograms. */
struct agg {
    uint32_t cur; /* the second being assembled, 1-based */
    struct sq_hist *h, *hu;
    /* plan runs: per step of every scenario (scenario i's steps from step_base[i]), this
     * second's latencies; NULL for think steps */
    struct sq_hist **sh;
    uint32_t *step_base;
    uint32_t nsteps;
    /* cfg->on_tick_steps: per worker, its steps' counts at its last consumed slot (wl[wi *
     * wl_stride + k]), and every step's sum handed to the callback */
    struct sq_step_live *wl, *lv;
    uint32_t wl_stride;
    /* cfg->on_tick_fine: this second's 100 ms bins, the workers' added up at the widest width
     * any of them had (nfine of fine_ns each) */
    struct sq_fine_bin fine[SQ_LIVE_FINE];
    uint32_t nfine;
    int64_t fine_ns;
    /* plan runs with metrics: declared (nm of them): per worker, its samples so far at its last
     * consumed slot (mlast[wi * nm + m]); their sum when the previous entry was emitted; and a
     * second's figures being put together */
    struct sq_msecond *mlast, *memitted, *mnow;
    uint32_t nm;
    /* the same per step of every scenario (g, step_base's numbering): per worker its steps' at
     * its last consumed slot (mslast[(wi * nsteps + g) * nm + m]), their sum when the previous
     * entry was emitted (msemitted[g * nm + m]), and the second's figures handed to on_tick
     * (msec, in sq_second.ms); NULL without metrics: */
    struct sq_msecond *mslast, *msemitted, *msec;
    size_t mcap;                /* seconds out->mseries has room for */
    struct sq_counters *last;   /* per worker: cumulative counters of its last consumed slot */
    uint64_t *active;           /* per worker: active VUs or in flight at its last slot */
    struct sq_counters emitted; /* the sum of `last` when the previous entry was emitted */
    int64_t prev_end;
    bool finished;
    struct sq_engine__clagg cl; /* squall's own cost, the watched processes (engine/client.h) */
};

static uint64_t errors_of(const struct sq_counters *c)
{
    uint64_t e = 0;
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        e += c->errors[k];
    return e;
}

static void fill_deltas(struct sq_second *e, const struct sq_counters *now,
                        const struct sq_counters *then)
{
    e->sent += now->sent - then->sent;
    e->completed += now->completed - then->completed;
    e->failed += now->failed - then->failed;
    e->dropped += now->dropped - then->dropped;
    e->errors += errors_of(now) - errors_of(then);
    e->bytes_received += now->bytes_received - then->bytes_received;
    e->bytes_sent += now->bytes_sent - then->bytes_sent;
    e->iterations += now->iterations - then->iterations;
    e->checks_passed += now->checks_passed - then->checks_passed;
    e->checks_failed += now->checks_failed - then->checks_failed;
    e->http_failed += now->http_failed - then->http_failed;
    for (size_t i = 0; i < SQ_ARRAY_LEN(e->status); i++)
        e->status[i] += now->status[i] - then->status[i];
    for (size_t i = 0; i < SQ_ERRK_COUNT; i++)
        e->errk[i] += now->errors[i] - then->errors[i];
}

static int series_push(struct sq_series *s, const struct sq_second *e)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct sq_second *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *e;
    return 0;
}

/* d += now - then, for the figures that add up (n, nonzero, sum); the latest sample is now's
 * when it is later than d's. */
static void mdelta(struct sq_msecond *d, const struct sq_msecond *now,
                   const struct sq_msecond *then)
{
    d->n += now->n - then->n;
    d->nonzero += now->nonzero - then->nonzero;
    d->sum += now->sum - then->sum;
    if (now->last_ns > d->last_ns) {
        d->last = now->last;
        d->last_ns = now->last_ns;
    }
}

/* Every worker's samples so far, added up, in a->mnow. */
static void msum_last(struct agg *a, uint32_t nw)
{
    memset(a->mnow, 0, a->nm * sizeof(*a->mnow));
    for (uint32_t i = 0; i < nw; i++)
        for (uint32_t m = 0; m < a->nm; m++) {
            const struct sq_msecond *x = &a->mlast[(size_t)i * a->nm + m];
            struct sq_msecond *o = &a->mnow[m];
            o->n += x->n;
            o->nonzero += x->nonzero;
            o->sum += x->sum;
            if (x->last_ns > o->last_ns) {
                o->last = x->last;
                o->last_ns = x->last_ns;
            }
        }
}

/* Room in out->mseries for the entry of out->series.n - 1 (the one just pushed). */
static int mseries_room(struct agg *a, struct sq_result *out)
{
    if (out->series.n <= a->mcap)
        return 0;
    size_t cap = a->mcap ? a->mcap * 2 : 64;
    struct sq_msecond *v = realloc(out->mseries, cap * a->nm * sizeof(*v));
    if (!v)
        return -ENOMEM;
    out->mseries = v;
    a->mcap = cap;
    return 0;
}

/* The plan's metrics in the second just pushed (what every worker took since the previous
 * one) into out->mseries, and e pointed at them. Out of memory: the run goes on without the
 * metrics' series (out->nmetrics 0). */
static void metrics_emit(struct agg *a, uint32_t nw, struct sq_result *out, struct sq_second *e)
{
    if (mseries_room(a, out) < 0) {
        free(out->mseries);
        out->mseries = NULL;
        out->nmetrics = a->nm = 0;
        return;
    }
    struct sq_msecond *me = &out->mseries[(out->series.n - 1) * a->nm];
    msum_last(a, nw);
    for (uint32_t m = 0; m < a->nm; m++) {
        me[m] = (struct sq_msecond){.last = a->memitted[m].last, .last_ns = a->memitted[m].last_ns};
        mdelta(&me[m], &a->mnow[m], &a->memitted[m]);
        a->memitted[m] = a->mnow[m];
    }
    e->m = me;
    e->nm = a->nm;
    if (!a->msec)
        return;
    /* each step's: every worker's so far less what was emitted */
    size_t per = (size_t)a->nsteps * a->nm;
    for (size_t x = 0; x < per; x++)
        a->msec[x] =
            (struct sq_msecond){.last = a->msemitted[x].last, .last_ns = a->msemitted[x].last_ns};
    for (uint32_t i = 0; i < nw; i++)
        for (size_t x = 0; x < per; x++)
            mdelta(&a->msec[x], &a->mslast[i * per + x], &(struct sq_msecond){0});
    for (size_t x = 0; x < per; x++) {
        struct sq_msecond now = a->msec[x];
        a->msec[x].n -= a->msemitted[x].n;
        a->msec[x].nonzero -= a->msemitted[x].nonzero;
        a->msec[x].sum -= a->msemitted[x].sum;
        a->msemitted[x] = now;
    }
    e->ms = a->msec;
    e->nms = a->nsteps;
}

/* Worker wi's steps' samples so far (its slot's mcum past the per-metric ones) into
 * a->mslast; late: a slot of a second already emitted, whose difference also moves the
 * emitted baseline (as metrics' late samples do). */
static void mstep_take(struct agg *a, const struct sq_engine__worker *w, uint32_t wi,
                       const struct sq_msecond *mcum, bool late)
{
    if (!a->mslast)
        return;
    size_t per = (size_t)a->nsteps * a->nm;
    for (size_t k = 0; k < w->flow->nsteps; k++)
        for (uint32_t m = 0; m < a->nm; m++) {
            size_t x = (size_t)(a->step_base[w->scen] + k) * a->nm + m;
            const struct sq_msecond *c = &mcum[a->nm + k * a->nm + m];
            struct sq_msecond *l = &a->mslast[wi * per + x];
            if (late) {
                struct sq_msecond *d = &a->msemitted[x];
                d->n += c->n - l->n;
                d->nonzero += c->nonzero - l->nonzero;
                d->sum += c->sum - l->sum;
                if (c->last_ns > d->last_ns) {
                    d->last = c->last;
                    d->last_ns = c->last_ns;
                }
            }
            *l = *c;
        }
}

static void sum_last(const struct agg *a, uint32_t n, struct sq_counters *out)
{
    memset(out, 0, sizeof(*out));
    for (uint32_t i = 0; i < n; i++)
        sq_counters_add(out, &a->last[i]);
}

static int step_push(struct sq_step_series *s, const struct sq_step_point *p)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct sq_step_point *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *p;
    return 0;
}

_Static_assert(SQ_NS_PER_S / SQ_FINE_BIN_NS == SQ_LIVE_FINE, "SQ_LIVE_FINE: bins a second");

static void fine_add(struct sq_fine_bin *d, const struct sq_fine_bin *b)
{
    d->completed += b->completed;
    d->failed += b->failed;
    if (b->max_us > d->max_us)
        d->max_us = b->max_us;
}

/* A slot's 100 ms bins into the second's: the narrower of the two folded to the wider (a
 * worker past the 10 minutes folds its bins before another does). */
static void fine_slot(struct agg *a, const struct sq_engine__slot *s)
{
    if (!s->nfine)
        return;
    if (!a->nfine || s->fine_ns > a->fine_ns) {
        struct sq_fine_bin was[SQ_LIVE_FINE];
        uint32_t nwas = a->nfine;
        int64_t wide = a->fine_ns;
        memcpy(was, a->fine, sizeof(was));
        memset(a->fine, 0, sizeof(a->fine));
        a->nfine = s->nfine;
        a->fine_ns = s->fine_ns;
        for (uint32_t k = 0; k < nwas; k++)
            fine_add(&a->fine[k / (uint32_t)(a->fine_ns / wide)], &was[k]);
    }
    uint32_t r = (uint32_t)(a->fine_ns / s->fine_ns);
    for (uint32_t k = 0; k < s->nfine && k / r < a->nfine; k++)
        fine_add(&a->fine[k / r], &s->fine[k]);
}

/* The second's 100 ms bins to cfg->on_tick_fine, cut at its end (t_s), then cleared. */
static void fine_emit(struct agg *a, const struct sq_run_config *cfg, const struct sq_second *e)
{
    double t0 = (double)(a->cur - 1);
    uint32_t n = a->nfine;
    while (n > 0 && t0 + (double)(n - 1) * (double)a->fine_ns / 1e9 >= e->t_s)
        n--;
    cfg->on_tick_fine(cfg->tick_ud, a->fine, n, a->nfine ? a->fine_ns : SQ_FINE_BIN_NS, t0);
    memset(a->fine, 0, sizeof(a->fine));
    a->nfine = 0;
}

/* A slot of a second already emitted: its steps' responses join that second's points (their
 * percentiles stay the whole second's without the sliver, as in the run's series). */
static void step_late(struct agg *a, const struct sq_engine__worker *w,
                      const struct sq_engine__slot *s, struct sq_result *out)
{
    for (size_t k = 0; s->step_h && k < w->flow->nsteps; k++) {
        struct sq_step_series *ss = &out->step_series[a->step_base[w->scen] + k];
        if (!s->step_h[k] || !sq_hist_total(s->step_h[k]) || ss->n == 0)
            continue;
        struct sq_step_point *p = &ss->v[ss->n - 1];
        p->responses += (uint64_t)sq_hist_total(s->step_h[k]);
        if (sq_hist_max(s->step_h[k]) > p->max_us)
            p->max_us = sq_hist_max(s->step_h[k]);
    }
}

/* Every step as it stands (the workers' counts added up, statuses by code) with this second's
 * histogram, to cfg->on_tick_steps. */
static void steps_live(struct agg *a, const struct sq_engine__worker *ws, uint32_t n,
                       const struct sq_run_config *cfg)
{
    memset(a->lv, 0, a->nsteps * sizeof(*a->lv));
    for (uint32_t i = 0; i < n; i++) {
        const struct sq_engine__worker *w = &ws[i];
        for (size_t k = 0; w->flow && k < w->flow->nsteps; k++) {
            const struct sq_step_live *x = &a->wl[(size_t)i * a->wl_stride + k];
            struct sq_step_live *o = &a->lv[a->step_base[w->scen] + k];
            o->reqs += x->reqs;
            o->failed += x->failed;
            o->errors += x->errors;
            for (uint32_t b = 0; b < x->nstatus && b < SQ_STEP_STATUSES; b++) {
                uint32_t j = 0;
                while (j < o->nstatus && o->by_status[j].status != x->by_status[b].status)
                    j++;
                if (j == o->nstatus) {
                    if (j == SQ_STEP_STATUSES)
                        continue; /* the first statuses seen keep a row, as in the result */
                    o->by_status[o->nstatus++].status = x->by_status[b].status;
                }
                o->by_status[j].n += x->by_status[b].n;
            }
            if (x->nchecks > o->nchecks)
                o->nchecks = x->nchecks;
            for (uint32_t ck = 0; ck < x->nchecks && ck < SQ_STEP_LIVE_CHECKS; ck++) {
                o->checks[ck].pass += x->checks[ck].pass;
                o->checks[ck].fail += x->checks[ck].fail;
            }
            if (x->nmvals > o->nmvals)
                o->nmvals = x->nmvals;
            for (uint32_t j = 0; j < x->nmvals && j < SQ_STEP_LIVE_METRICS; j++) {
                o->mvals[j].n += x->mvals[j].n;
                o->mvals[j].nonzero += x->mvals[j].nonzero;
                o->mvals[j].sum += x->mvals[j].sum;
                if (x->mvals[j].n && x->mvals[j].last_ns >= o->mvals[j].last_ns) {
                    o->mvals[j].last = x->mvals[j].last;
                    o->mvals[j].last_ns = x->mvals[j].last_ns;
                }
            }
        }
    }
    for (uint32_t g = 0; g < a->nsteps; g++)
        a->lv[g].h = a->sh[g];
    cfg->on_tick_steps(cfg->tick_ud, a->lv, a->nsteps);
}

/* This second's point of every step, from its merged histogram (then reset). */
static void step_emit(struct agg *a, struct sq_result *out, double t_s)
{
    for (uint32_t g = 0; g < a->nsteps; g++) {
        struct sq_hist *h = a->sh[g];
        if (!h)
            continue;
        struct sq_step_point p = {.t_s = t_s, .responses = (uint64_t)sq_hist_total(h)};
        if (p.responses) {
            p.p50_us = sq_hist_percentile(h, 50);
            p.p90_us = sq_hist_percentile(h, 90);
            p.p99_us = sq_hist_percentile(h, 99);
            p.max_us = sq_hist_max(h);
        }
        step_push(&out->step_series[g], &p);
        sq_hist_reset(h);
    }
}

/* Consumes one published slot of worker w: its histograms go into the second being assembled
 * (or, for a slot of a second already emitted, into that entry's counts only) and into the
 * run's totals; then the slot is reset and handed back. */
static void consume(struct agg *a, struct sq_engine__worker *w, uint32_t wi, struct sq_result *out,
                    int64_t go, int64_t *end)
{
    uint32_t rd = w->rd;
    struct sq_engine__slot *s = &w->slots[rd % SQ_SLOTS];
    if (s->step_live && a->wl) /* cumulative: the latest slot says it all, late or not */
        memcpy(&a->wl[(size_t)wi * a->wl_stride], s->step_live,
               w->flow->nsteps * sizeof(*s->step_live));
    sq_hist_merge(out->latency, s->hist);
    if (s->hist_unc)
        sq_hist_merge(out->latency_uncorrected, s->hist_unc);
    if (s->second < a->cur && out->series.n > 0) {
        /* A slot of a second already emitted (a last sliver of a run that came after its
         * second went out: aggregate's wait for the seal keeps this from happening, this is
         * the safety net): its counts join that entry, the baseline moves with them, and the
         * entry now ends where the slot did, so the last entry ends where the run does and the
         * entries' lengths still add up. */
        struct sq_second *e = &out->series.v[out->series.n - 1];
        fill_deltas(e, &s->c, &a->last[wi]);
        if (s->mcum && a->nm && out->series.n <= a->mcap) {
            struct sq_msecond *me = &out->mseries[(out->series.n - 1) * a->nm];
            for (uint32_t m = 0; m < a->nm; m++) {
                struct sq_msecond *l = &a->mlast[(size_t)wi * a->nm + m];
                mdelta(&me[m], &s->mcum[m], l);
                a->memitted[m].n += s->mcum[m].n - l->n;
                a->memitted[m].nonzero += s->mcum[m].nonzero - l->nonzero;
                a->memitted[m].sum += s->mcum[m].sum - l->sum;
                if (s->mcum[m].last_ns > a->memitted[m].last_ns) {
                    a->memitted[m].last = s->mcum[m].last;
                    a->memitted[m].last_ns = s->mcum[m].last_ns;
                }
                *l = s->mcum[m];
            }
            mstep_take(a, w, wi, s->mcum, true);
        }
        sq_counters_sub(&a->emitted, &a->last[wi]);
        sq_counters_add(&a->emitted, &s->c);
        a->last[wi] = s->c;
        sq_engine__clagg_slot(&a->cl, wi, s, e);
        int64_t mx = sq_hist_total(s->hist) ? sq_hist_max(s->hist) : 0;
        if (mx > e->max_us)
            e->max_us = mx;
        step_late(a, w, s, out);
        if (s->end_ns > a->prev_end) {
            e->t_s = (double)(s->end_ns - go) / 1e9;
            e->len_s += (double)(s->end_ns - a->prev_end) / 1e9;
            a->prev_end = s->end_ns;
        }
    } else {
        sq_hist_merge(a->h, s->hist);
        if (s->hist_unc)
            sq_hist_merge(a->hu, s->hist_unc);
        for (size_t k = 0; s->step_h && k < w->flow->nsteps; k++)
            if (s->step_h[k])
                sq_hist_merge(a->sh[a->step_base[w->scen] + k], s->step_h[k]);
        a->last[wi] = s->c;
        if (s->mcum && a->nm)
            memcpy(&a->mlast[(size_t)wi * a->nm], s->mcum, a->nm * sizeof(*s->mcum));
        if (s->mcum && a->nm)
            mstep_take(a, w, wi, s->mcum, false);
        a->active[wi] = s->active;
        fine_slot(a, s);
        sq_engine__clagg_slot(&a->cl, wi, s, NULL);
        if (s->end_ns > *end)
            *end = s->end_ns;
    }
    sq_hist_reset(s->hist);
    if (s->hist_unc)
        sq_hist_reset(s->hist_unc);
    for (size_t k = 0; s->step_h && k < w->flow->nsteps; k++)
        if (s->step_h[k])
            sq_hist_reset(s->step_h[k]);
    __atomic_store_n(&w->rd, rd + 1, __ATOMIC_RELEASE);
}

/* Emits every second for which each worker has either published its slot or finished. */
static void aggregate(struct agg *a, struct sq_engine__worker *ws, uint32_t n,
                      const struct sq_run_config *cfg, struct sq_result *out, int64_t go)
{
    while (!a->finished) {
        bool any = false;
        for (uint32_t i = 0; i < n; i++) {
            struct sq_engine__worker *w = &ws[i];
            /* done first: a worker marks itself done after its last slot is out */
            int done = __atomic_load_n(&w->live.done, __ATOMIC_ACQUIRE);
            uint32_t wr = __atomic_load_n(&w->wr, __ATOMIC_ACQUIRE);
            if (wr != w->rd) {
                any = true;
                /* a slot is waiting, for this second or a later one; a worker still running
                 * may yet end inside this second's fold window and send its last sliver as
                 * this second: the second waits until it is sealed (SQ_FOLD_NS) */
                if (!done && __atomic_load_n(&w->live.sealed, __ATOMIC_ACQUIRE) < a->cur)
                    return;
                continue;
            }
            if (!done)
                return; /* still inside this second */
        }
        if (!any) {
            a->finished = true;
            return;
        }
        if (a->prev_end == 0)
            a->prev_end = go;
        int64_t end = a->prev_end;
        bool late_only = true;
        for (uint32_t i = 0; i < n; i++) {
            struct sq_engine__worker *w = &ws[i];
            while (__atomic_load_n(&w->wr, __ATOMIC_ACQUIRE) != w->rd &&
                   w->slots[w->rd % SQ_SLOTS].second <= a->cur) {
                if (w->slots[w->rd % SQ_SLOTS].second == a->cur)
                    late_only = false;
                consume(a, w, i, out, go, &end);
            }
        }
        if (late_only) {
            a->cur++;
            continue;
        }
        struct sq_counters total;
        sum_last(a, n, &total);
        struct sq_second e = {0};
        fill_deltas(&e, &total, &a->emitted);
        a->emitted = total;
        e.t_s = (double)(end - go) / 1e9;
        e.len_s = (double)(end - a->prev_end) / 1e9;
        a->prev_end = end;
        for (uint32_t i = 0; i < n; i++)
            e.active += a->active[i];
        if (sq_hist_total(a->h)) {
            e.p50_us = sq_hist_percentile(a->h, 50);
            e.p90_us = sq_hist_percentile(a->h, 90);
            e.p99_us = sq_hist_percentile(a->h, 99);
            e.max_us = sq_hist_max(a->h);
        }
        sq_engine__clagg_emit(&a->cl, &e, sq_now_ns());
        if (cfg->on_xsample_live)
            sq_engine__xs_live_take(ws, n, cfg);
        if (cfg->on_tick_fine)
            fine_emit(a, cfg, &e);
        if (series_push(&out->series, &e) == 0) {
            struct sq_second te = e;
            if (a->nm)
                metrics_emit(a, n, out, &te);
            if (cfg->on_tick)
                cfg->on_tick(cfg->tick_ud, &te, a->h, out->open ? a->hu : NULL);
        }
        if (a->lv)
            steps_live(a, ws, n, cfg);
        if (a->sh)
            step_emit(a, out, e.t_s);
        sq_hist_reset(a->h);
        if (a->hu)
            sq_hist_reset(a->hu);
        a->cur++;
    }
}

/* ---- the writer thread (--out ndjson) ---- */

/* The writer thread: drains every worker's ring of per-request records into the caller's
 * callback, so formatting and disk writes never happen on a worker. */
struct writer {
    pthread_t tid;
    struct sq_engine__worker *ws;
    uint32_t n;
    const struct sq_run_config *cfg;
    int stop;
    uint64_t written;
};

static bool drain(struct writer *wr)
{
    bool any = false;
    for (uint32_t i = 0; i < wr->n; i++) {
        struct sq_engine__worker *w = &wr->ws[i];
        if (!w->ring)
            continue;
        uint32_t head = __atomic_load_n(&w->rhead, __ATOMIC_ACQUIRE);
        uint32_t tail = w->rtail;
        while (tail != head) {
            /* Hand out the contiguous run up to the ring's end in one call. */
            uint32_t at = tail & (w->rcap - 1);
            uint32_t n = head - tail;
            if (n > w->rcap - at)
                n = w->rcap - at;
            wr->cfg->on_samples(wr->cfg->samples_ud, &w->ring[at], n);
            wr->written += n;
            tail += n;
            __atomic_store_n(&w->rtail, tail, __ATOMIC_RELEASE);
            any = true;
        }
    }
    return any;
}

static void *writer_main(void *arg)
{
    struct writer *wr = arg;
    while (!__atomic_load_n(&wr->stop, __ATOMIC_ACQUIRE)) {
        if (!drain(wr))
            sleep_ns(2 * SQ_NS_PER_MS);
    }
    drain(wr); /* what the workers wrote before they stopped */
    return NULL;
}

/* ---- watching the workers: start, stop, stall, DNS ---- */

/* What the workers published in their live blocks, summed: read each turn of the watch. */
struct totals {
    uint32_t done, ready, script_failed;
    uint64_t progress, opened, errors, tls_errors;
    int last_err;
    const char *tls_msg; /* a worker's first TLS error, or NULL */
    const char *bus_msg; /* a worker's first broker error, or NULL */
    const char *up_msg;  /* a worker's first failed WebSocket upgrade, or NULL */
    const char *px_msg;  /* a worker's first refused proxy CONNECT, or NULL */
};

static void sum_live(struct sq_engine__worker *ws, uint32_t n, struct totals *t)
{
    memset(t, 0, sizeof(*t));
    for (uint32_t i = 0; i < n; i++) {
        struct sq_engine__live *l = &ws[i].live;
        t->done += (uint32_t)__atomic_load_n(&l->done, __ATOMIC_ACQUIRE);
        t->script_failed += (uint32_t)__atomic_load_n(&l->script_failed, __ATOMIC_ACQUIRE);
        t->ready += (uint32_t)__atomic_load_n(&l->ready, __ATOMIC_ACQUIRE);
        t->progress += __atomic_load_n(&l->progress, __ATOMIC_RELAXED);
        t->opened += __atomic_load_n(&l->opened, __ATOMIC_RELAXED);
        uint64_t e = __atomic_load_n(&l->connect_errors, __ATOMIC_RELAXED);
        if (e)
            t->last_err = __atomic_load_n(&l->last_connect_err, __ATOMIC_RELAXED);
        t->errors += e;
        e = __atomic_load_n(&l->tls_errors, __ATOMIC_RELAXED);
        t->errors += e;
        t->tls_errors += e;
        if (!t->tls_msg && __atomic_load_n(&l->tls_err_set, __ATOMIC_ACQUIRE))
            t->tls_msg = ws[i].tls_err; /* written once, before the flag */
        t->errors += __atomic_load_n(&l->bus_errors, __ATOMIC_RELAXED);
        if (!t->bus_msg && __atomic_load_n(&l->bus_err_set, __ATOMIC_ACQUIRE))
            t->bus_msg = ws[i].bus_err;
        t->errors += __atomic_load_n(&l->upgrade_errors, __ATOMIC_RELAXED);
        if (!t->up_msg && __atomic_load_n(&l->up_err_set, __ATOMIC_ACQUIRE))
            t->up_msg = ws[i].up_err;
        t->errors += __atomic_load_n(&l->proxy_errors, __ATOMIC_RELAXED);
        if (!t->px_msg && __atomic_load_n(&l->proxy_err_set, __ATOMIC_ACQUIRE))
            t->px_msg = ws[i].proxy_err;
    }
}

static void stop_run(struct sq_engine__shared *run, struct sq_result *out, const char *fmt,
                     const char *a, const char *b)
{
    if (run->abort)
        return;
    if (!run->wind_ns)
        snprintf(out->abort_reason, sizeof(out->abort_reason), fmt, a, b);
    __atomic_store_n(&run->abort, 1, __ATOMIC_RELAXED);
}

/* The caller's stop flag: a graceful stop once the run has started (workers stop starting work
 * and let what is in flight finish for their graceful stop), otherwise at once. */
static void stop_asked(struct sq_engine__shared *run, struct sq_result *out, int how, int64_t now)
{
    if (how >= SQ_STOP_NOW || !run->go_ns) {
        stop_run(run, out, "stopped by request%s%s", "", "");
        return;
    }
    if (run->wind_ns || run->abort)
        return;
    snprintf(out->abort_reason, sizeof(out->abort_reason), "stopped by request");
    __atomic_store_n(&run->wind_ns, now, __ATOMIC_RELAXED);
}

/* Every pool is open (each worker ready): the run starts, a moment ahead so every worker sees
 * go_ns before it is due, or at the held start (cfg->start_at) once it is known. With no
 * connection at all, it stops instead, saying why (the first upgrade, TLS or broker error a
 * worker kept, else the last connect error). */
static void try_start(struct sq_engine__shared *run, struct sq_result *out, const struct totals *t,
                      const char *addr, int64_t begin, int64_t now, bool *readied, struct agg *agg)
{
    const struct sq_run_config *cfg = run->cfg;
    if (t->opened == 0 && t->px_msg) {
        stop_run(run, out, "no connection could be made to %s: %s", addr, t->px_msg);
        return;
    }
    if (t->opened == 0 && t->up_msg) {
        stop_run(run, out, "no connection could be made to %s: %s", addr, t->up_msg);
        return;
    }
    if (t->opened == 0 && t->tls_msg) {
        stop_run(run, out, "no connection could be made to %s: tls: %s", addr, t->tls_msg);
        return;
    }
    if (t->opened == 0 && t->bus_msg) {
        stop_run(run, out, "no connection could be made to %s: %s", addr, t->bus_msg);
        return;
    }
    if (t->opened == 0) {
        stop_run(run, out, "no connection could be made to %s: %s", addr, sq_strerror(t->last_err));
        return;
    }
    int64_t go = now + SQ_NS_PER_MS;
    if (!*readied) {
        *readied = true;
        out->setup_ns = now - begin;
        if (cfg->start_at && cfg->on_ready)
            cfg->on_ready(cfg->ready_ud);
    }
    if (cfg->start_at) {
        /* 0: not known yet (asked again on the next turn); never before our own moment ahead */
        int64_t at = __atomic_load_n(cfg->start_at, __ATOMIC_ACQUIRE);
        go = at == 0 ? 0 : at > go ? at : go;
    }
    if (go) {
        out->wall_start_ns = sq_wall_ns() + (go - now);
        sq_engine__clagg_begin(&agg->cl, go);
        __atomic_store_n(&run->go_ns, go, __ATOMIC_RELEASE);
    }
}

/* Nothing has moved for stall_limit while errors keep coming: the run stops, naming the error
 * that is most likely the cause. */
static void stall_stop(struct sq_engine__shared *run, struct sq_result *out, const struct totals *t,
                       int64_t stall_limit)
{
    char secs[32];
    snprintf(secs, sizeof(secs), "%.1fs", (double)stall_limit / 1e9);
    if (t->tls_errors && t->tls_msg)
        stop_run(run, out, "no progress for %s while TLS fails: %s", secs, t->tls_msg);
    else if (t->bus_msg)
        stop_run(run, out, "no progress for %s while the broker refuses: %s", secs, t->bus_msg);
    else if (t->up_msg)
        stop_run(run, out, "no progress for %s while upgrades fail: %s", secs, t->up_msg);
    else if (t->px_msg)
        stop_run(run, out, "no progress for %s while the proxy refuses: %s", secs, t->px_msg);
    else
        stop_run(run, out, "no progress for %s while connects fail: %s", secs,
                 sq_strerror(t->last_err));
}

/* --dns-ttl: the target resolved again; the workers take the new addresses on their next
 * connect. A failed lookup keeps the old ones and counts a DNS error. */
static void dns_refresh(struct sq_engine__shared *run, struct sq_result *out)
{
    const struct sq_run_config *cfg = run->cfg;
    struct sq_addr fresh[SQ_MAX_ADDRS];
    int got = cfg->resolve(cfg->resolve_ud, fresh, SQ_MAX_ADDRS);
    if (got > 0)
        sq_engine__addrs_store(&run->addrs, fresh, got);
    else
        out->c.errors[SQ_ERRK_DNS]++;
    out->dns_lookups++;
}

/* Watches the workers from the main thread until every one has left its loop: starts the run
 * once every pool is open, and stops it when the caller asks, when no connection can be made
 * (every connection failed to connect and none succeeded), or when nothing has moved for a
 * whole timeout while connects keep failing. */
static void watch(struct sq_engine__worker *ws, uint32_t n, struct sq_engine__shared *run,
                  struct sq_result *out, int64_t begin, struct agg *agg)
{
    const struct sq_run_config *cfg = run->cfg;
    uint64_t last_progress = 0, last_opened = 0, errors_then = 0;
    bool readied = false;
    int64_t still_since = sq_now_ns();
    int64_t next_dns = still_since + cfg->dns_ttl_ns;
    int64_t stall_limit =
        cfg->timeout_ns > cfg->connect_timeout_ns ? cfg->timeout_ns : cfg->connect_timeout_ns;
    char addr[64];
    sq_addr_format(&cfg->addrs[0], addr, sizeof(addr));
    for (;;) {
        struct totals t;
        sum_live(ws, n, &t);
        if (run->go_ns)
            aggregate(agg, ws, n, cfg, out, run->go_ns);
        /* done: every worker left its loop and, once started, every second was emitted */
        if (t.done == n && (!run->go_ns || agg->finished)) {
            if (run->go_ns &&
                sq_engine__clagg_end(&agg->cl,
                                     out->series.n ? &out->series.v[out->series.n - 1] : NULL, out,
                                     sq_now_ns()) < 0)
                out->client.valid = false;
            return;
        }
        int64_t now = sq_now_ns();
        int stop_how = cfg->stop ? __atomic_load_n(cfg->stop, __ATOMIC_RELAXED) : 0;
        if (stop_how) /* another thread may set it */
            stop_asked(run, out, stop_how, now);
        if (t.script_failed)
            stop_run(run, out, "a script hook raised an error%s%s", "", "");
        if (!run->go_ns && t.ready == n)
            try_start(run, out, &t, addr, begin, now, &readied, agg);
        if (t.progress != last_progress || t.opened != last_opened) {
            still_since = now;
            errors_then = t.errors;
        } else if (t.errors > errors_then && now - still_since > stall_limit) {
            stall_stop(run, out, &t, stall_limit);
        }
        if (cfg->dns_ttl_ns > 0 && cfg->resolve && now >= next_dns) {
            dns_refresh(run, out);
            next_dns = sq_now_ns() + cfg->dns_ttl_ns;
        }
        last_progress = t.progress;
        last_opened = t.opened;
        sleep_ns(run->go_ns ? WATCH_NS : SQ_NS_PER_MS);
    }
}

/* ---- sizing the scenarios, merging after the join ---- */

/* Plan runs: a per-step series for every step of every scenario, and the histogram each second
 * is merged into. */
static int steps_init(struct agg *a, const struct sq_run_config *cfg, struct sq_result *out)
{
    a->step_base = calloc(cfg->nscens, sizeof(*a->step_base));
    if (!a->step_base)
        return -ENOMEM;
    for (uint32_t i = 0; i < cfg->nscens; i++) {
        a->step_base[i] = a->nsteps;
        a->nsteps += (uint32_t)cfg->scens[i].flow->nsteps;
    }
    a->sh = calloc(a->nsteps ? a->nsteps : 1, sizeof(*a->sh));
    out->step_series = calloc(a->nsteps ? a->nsteps : 1, sizeof(*out->step_series));
    if (!a->sh || !out->step_series)
        return -ENOMEM;
    out->nstep_series = a->nsteps;
    for (uint32_t i = 0; i < cfg->nscens; i++) {
        const struct sq_flow *f = cfg->scens[i].flow;
        for (size_t k = 0; k < f->nsteps; k++) {
            int rc = f->steps[k].think ? 0 : sq_engine__step_hist_new(&a->sh[a->step_base[i] + k]);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* The run's 100 ms series: every worker's bins, brought to the widest width any of them
 * reached, added up, and cut at the run's end. */
static int fine_merge(struct sq_engine__worker *ws, uint32_t n, int64_t duration_ns,
                      struct sq_fine_series *out)
{
    int64_t bin = SQ_FINE_BIN_NS;
    for (uint32_t i = 0; i < n; i++)
        if (ws[i].fine_ns > bin)
            bin = ws[i].fine_ns;
    size_t nb = duration_ns > 0 ? (size_t)((duration_ns + bin - 1) / bin) : 0;
    if (nb > SQ_FINE_BINS)
        nb = SQ_FINE_BINS;
    out->bin_ns = bin;
    out->n = nb;
    out->v = calloc(nb ? nb : 1, sizeof(*out->v));
    if (!out->v)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        int64_t scale = bin / ws[i].fine_ns; /* a power of two */
        for (size_t k = 0; k < SQ_FINE_BINS; k++) {
            const struct sq_fine_bin *b = &ws[i].fine[k];
            size_t j = k / (size_t)scale;
            if (j >= nb) {
                if (!b->completed && !b->failed)
                    continue;
                j = nb ? nb - 1 : 0; /* a sliver past the end lands in the last bin */
                if (!nb)
                    continue;
            }
            struct sq_fine_bin *d = &out->v[j];
            d->completed += b->completed;
            d->failed += b->failed;
            if (b->max_us > d->max_us)
                d->max_us = b->max_us;
        }
    }
    return 0;
}

/* Scenario i's executor. */
static const struct sq_exec *scen_exec(const struct sq_run_config *cfg, uint32_t i)
{
    return cfg->scens ? &cfg->scens[i].exec : &cfg->exec;
}

/* Scenario i's VUs at their peak: all of them, or the run's segment's share. */
static uint32_t seg_vus(const struct sq_run_config *cfg, uint32_t i)
{
    const struct sq_exec *ex = scen_exec(cfg, i);
    uint32_t v = sq_exec_max_vus(ex);
    /* the open loop's pool grows on HTTP/1.1 only (worker.c): elsewhere maxVUs caps in flight */
    if (sq_exec_is_open(ex) && cfg->scens && (cfg->scens[i].h2 || cfg->scens[i].flow->sc->ws))
        v = ex->vus;
    return (uint32_t)sq_seg_share(cfg->seg, v);
}

/* Connections of scenario i: a plan's HTTP/2 scenario carries `streams` VUs on each. */
static uint32_t scen_conns(const struct sq_run_config *cfg, uint32_t i)
{
    uint32_t vus = seg_vus(cfg, i);
    if (cfg->scens && cfg->scens[i].h2 && cfg->streams > 1)
        return (uint32_t)(((uint64_t)vus + cfg->streams - 1) / cfg->streams);
    return sq_run_connections(cfg, vus);
}

/* Workers for one scenario: the run's threads, never more than its connections. */
static uint32_t scen_workers(const struct sq_run_config *cfg, uint32_t i)
{
    uint32_t v = scen_conns(cfg, i);
    return cfg->threads < v ? cfg->threads : v;
}

/* --urls: each URL's figures from every worker. */
static int merge_urls(const struct sq_run_config *cfg, struct sq_engine__worker *ws, uint32_t nw,
                      struct sq_result *out)
{
    out->urls = calloc(cfg->nurls, sizeof(*out->urls));
    if (!out->urls)
        return -ENOMEM;
    out->nurls = cfg->nurls;
    for (uint32_t u = 0; u < cfg->nurls; u++) {
        struct sq_url_result *r = &out->urls[u];
        int rc = sq_latency_hist_new(&r->latency);
        if (rc < 0)
            return rc;
        for (uint32_t k = 0; k < nw; k++) {
            const struct sq_url_result *x = ws[k].ustats ? &ws[k].ustats[u] : NULL;
            if (!x)
                continue;
            r->sent += x->sent;
            r->completed += x->completed;
            r->failed += x->failed;
            for (size_t c = 0; c < SQ_ARRAY_LEN(r->status); c++)
                r->status[c] += x->status[c];
            sq_hist_merge(r->latency, x->latency);
        }
    }
    return 0;
}

/* Plan runs: each scenario's figures from its workers. */
static int merge_scens(const struct sq_run_config *cfg, struct sq_engine__worker *ws, uint32_t nw,
                       struct sq_result *out)
{
    out->scens = calloc(cfg->nscens, sizeof(*out->scens));
    if (!out->scens)
        return -ENOMEM;
    out->nscens = cfg->nscens;
    for (uint32_t i = 0; i < cfg->nscens; i++) {
        struct sq_scen_result *r = &out->scens[i];
        const struct sq_flow *f = cfg->scens[i].flow;
        r->name = cfg->scens[i].name;
        r->vus_max = seg_vus(cfg, i);
        r->nsteps = f->nsteps;
        int rc = sq_latency_hist_new(&r->latency);
        if (rc == 0)
            rc = sq_latency_hist_new(&r->iter_dur);
        if (rc == 0)
            rc = sq_engine__steps_new(f, &r->steps);
        if (rc == 0 && (rc = sq_group_hists_new(f->sc->ngroups, &r->group_dur)) == 0)
            r->ngroups = f->sc->ngroups;
        if (rc < 0)
            return rc;
        for (uint32_t k = 0; k < nw; k++) {
            struct sq_engine__worker *w = &ws[k];
            if (w->scen != i || !w->steps)
                continue;
            sq_counters_add(&r->c, &w->c);
            r->interrupted += w->interrupted;
            sq_hist_merge(r->iter_dur, w->iter_hist);
            for (uint32_t g = 0; w->gdur && g < r->ngroups; g++)
                sq_hist_merge(r->group_dur[g], w->gdur[g]);
            for (size_t s = 0; s < f->nsteps; s++)
                sq_step_stats_merge(&r->steps[s], &w->steps[s], f->steps[s].ps->nchecks);
        }
        for (size_t s = 0; s < f->nsteps; s++) /* HTTP requests only: http_req_duration */
            if (f->steps[s].ps->kind == SQ_STEP_REQUEST)
                sq_hist_merge(r->latency, r->steps[s].dur);
    }
    return 0;
}

/* ---- sq_run: size -> set up -> start -> watch -> join and merge ---- */

/* What the phases of one run share, on the main thread. run is the block every worker points
 * at: it stays where it is until they are joined. */
struct runctx {
    const struct sq_run_config *cfg;
    struct sq_result *out;
    const char **why;
    uint32_t nscen, nw, conns; /* scenarios (1 without a plan), workers, connections */
    struct sq_engine__worker *ws;
    struct sq_engine__shared run;
    struct agg agg;
    struct writer wr;
    bool writing;     /* the writer thread runs (cfg->on_samples) */
    uint32_t started; /* worker threads started */
    int64_t begin;    /* the threads' start (CLOCK_MONOTONIC) */
    int64_t go, end;  /* the run's start and its last worker's end (0: it never started) */
};

static int oom(struct runctx *x)
{
    *x->why = "out of memory";
    return -ENOMEM;
}

/* How many workers and connections each scenario gets, and whether the run can run at all.
 * Returns 0 or -EINVAL with *why. */
static int run_size(struct runctx *x)
{
    const struct sq_run_config *cfg = x->cfg;
    bool empty = false; /* a scenario without VUs: nothing sensible to run */
    x->nscen = cfg->scens ? cfg->nscens : 1;
    for (uint32_t i = 0; i < x->nscen; i++) {
        uint32_t sw = scen_workers(cfg, i);
        empty |= sw == 0 && !cfg->seg; /* a segment may have no share of a scenario */
        x->nw += sw;
        x->conns += scen_conns(cfg, i);
        if (sq_exec_is_open(scen_exec(cfg, i)))
            x->out->open = true;
    }
    if (empty || x->nw == 0 || cfg->naddrs <= 0 ||
        (!cfg->scens && !cfg->request_len && !cfg->bus && !cfg->ws)) {
        *x->why = "nothing to run: no connection, address or request";
        return -EINVAL;
    }
    if (cfg->script && (cfg->scens || cfg->h2_request || cfg->script->n != x->nw)) {
        *x->why = "a wrk script needs one state per worker, over HTTP/1.1";
        return -EINVAL;
    }
    return 0;
}

/* The result's totals, the workers' array, the run's id and seed, the stamps' streams.
 * Returns 0 or -ENOMEM (with *why). */
static int run_alloc(struct runctx *x)
{
    const struct sq_run_config *cfg = x->cfg;
    struct sq_result *out = x->out;
    int rc = sq_latency_hist_new(&out->latency);
    if (rc == 0 && out->open)
        rc = sq_latency_hist_new(&out->latency_uncorrected);
    if (rc < 0) {
        *x->why = "out of memory";
        return rc;
    }
    x->ws = calloc(x->nw, sizeof(*x->ws));
    if (!x->ws)
        return oom(x);
    x->run = (struct sq_engine__shared){.cfg = cfg, .nworkers = x->nw, .run_id = cfg->run_id};
    if (!x->run.run_id)
        x->run.run_id = sq_run_new_id();
    out->run_id = x->run.run_id;
    x->run.seed = cfg->seed_set ? cfg->seed : sq_run_new_seed();
    out->seed = x->run.seed;
    out->stamped = calloc(x->nw, sizeof(*out->stamped));
    out->unfinished = calloc(x->nw, sizeof(*out->unfinished));
    out->nunfinished = calloc(x->nw, sizeof(*out->nunfinished));
    if (!out->stamped || !out->unfinished || !out->nunfinished)
        return oom(x);
    out->nstreams = x->nw;
    sq_engine__addrs_store(&x->run.addrs, cfg->addrs, cfg->naddrs);
    return 0;
}

/* The main thread's aggregation, the open model's spin tail, then every worker set up (its
 * connections not yet opened). Returns 0 or a negative code with *why. */
static int run_setup(struct runctx *x)
{
    const struct sq_run_config *cfg = x->cfg;
    struct agg *agg = &x->agg;
    agg->last = calloc(x->nw, sizeof(*agg->last));
    agg->active = calloc(x->nw, sizeof(*agg->active));
    int rc = agg->last && agg->active ? sq_latency_hist_new(&agg->h) : -ENOMEM;
    if (rc == 0)
        rc = sq_engine__clagg_init(&agg->cl, x->nw, cfg);
    if (rc == 0 && x->out->open)
        rc = sq_latency_hist_new(&agg->hu);
    if (rc == 0 && cfg->scens)
        rc = steps_init(agg, cfg, x->out);
    if (rc == 0 && cfg->scens && cfg->nscens && cfg->scens[0].flow->plan->nmetrics) {
        agg->nm = (uint32_t)cfg->scens[0].flow->plan->nmetrics;
        agg->mlast = calloc((size_t)x->nw * agg->nm, sizeof(*agg->mlast));
        agg->memitted = calloc(agg->nm, sizeof(*agg->memitted));
        agg->mnow = calloc(agg->nm, sizeof(*agg->mnow));
        x->out->nmetrics = agg->nm;
        rc = agg->mlast && agg->memitted && agg->mnow ? 0 : -ENOMEM;
        if (rc == 0 && agg->nsteps && agg->step_base) {
            size_t per = (size_t)agg->nsteps * agg->nm;
            agg->mslast = calloc((size_t)x->nw * per, sizeof(*agg->mslast));
            agg->msemitted = calloc(per, sizeof(*agg->msemitted));
            agg->msec = calloc(per, sizeof(*agg->msec));
            rc = agg->mslast && agg->msemitted && agg->msec ? 0 : -ENOMEM;
        }
    }
    if (rc == 0 && cfg->scens && cfg->on_tick_steps && agg->nsteps) {
        for (uint32_t i = 0; i < cfg->nscens; i++)
            if (cfg->scens[i].flow->nsteps > agg->wl_stride)
                agg->wl_stride = (uint32_t)cfg->scens[i].flow->nsteps;
        agg->wl = calloc((size_t)x->nw * agg->wl_stride, sizeof(*agg->wl));
        agg->lv = calloc(agg->nsteps, sizeof(*agg->lv));
        rc = agg->wl && agg->lv ? 0 : -ENOMEM;
    }
    if (rc < 0) {
        *x->why = "out of memory";
        return rc;
    }
    x->run.spin_ns = x->out->open ? calibrate_spin() : 0;
    /* workers are numbered across scenarios; a scenario's VUs are numbered from vu_base */
    uint32_t wi = 0, vu_base = 0;
    for (uint32_t s = 0; s < x->nscen; s++) {
        uint32_t sw = scen_workers(cfg, s);
        for (uint32_t k = 0; k < sw; k++, wi++) {
            struct sq_engine__place pl = {.scen = s, .sindex = k, .snw = sw, .vu_base = vu_base};
            rc = sq_engine__worker_init(&x->ws[wi], &x->run, wi, &pl);
            if (rc < 0) {
                *x->why = "could not set up a worker";
                return rc;
            }
        }
        vu_base += sq_exec_max_vus(scen_exec(cfg, s));
    }
    return 0;
}

/* The writer thread, when the caller takes per-request records. Returns 0 or -errno. */
static int start_writer(struct runctx *x)
{
    if (!x->cfg->on_samples)
        return 0;
    x->wr = (struct writer){.ws = x->ws, .n = x->nw, .cfg = x->cfg};
    int rc = -pthread_create(&x->wr.tid, NULL, writer_main, &x->wr);
    if (rc < 0) {
        *x->why = "could not start the writer thread";
        return rc;
    }
    x->writing = true;
    return 0;
}

/* The worker threads. A thread that cannot start aborts the run: those started stop at once
 * and are joined; the run is not watched. Returns 0 or -errno. */
static int start_workers(struct runctx *x)
{
    x->begin = sq_now_ns();
    for (uint32_t i = 0; i < x->nw; i++) {
        int rc = -pthread_create(&x->ws[i].tid, NULL, sq_engine__worker_main, &x->ws[i]);
        if (rc < 0) {
            *x->why = "could not start a worker thread";
            __atomic_store_n(&x->run.abort, 1, __ATOMIC_RELAXED);
            return rc;
        }
        x->started++;
    }
    return 0;
}

/* An open-loop worker's pacing and pool figures: the pool's sizes add up, its first and last
 * growth are the earliest and the latest of any worker (from its own start). */
static void merge_pool(struct sq_result *out, const struct sq_engine__worker *w)
{
    out->precision = w->precision;
    if (w->spin_ns > out->pace_tail_ns)
        out->pace_tail_ns = w->spin_ns;
    out->pace_wakes += w->wakes;
    out->pace_deaf += w->deaf_sleeps;
    out->pace_window_ns = w->window_ns;
    out->pool.pre += w->npre;
    out->pool.cap += w->ncap;
    out->pool.peak += w->nconns;
    out->pool.grown += w->grown;
    int64_t f = w->grow_first ? w->grow_first - w->start_ns : -1;
    int64_t l = w->grow_last ? w->grow_last - w->start_ns : -1;
    if (f >= 0 && (out->pool.first_ns < 0 || f < out->pool.first_ns))
        out->pool.first_ns = f;
    if (l > out->pool.last_ns)
        out->pool.last_ns = l;
}

/* Worker i's figures, once joined, into the result: counts add up, the first worker with a
 * TLS session, an error message or a script error gives it (the script error is handed over). */
static void merge_worker(struct runctx *x, uint32_t i)
{
    struct sq_result *out = x->out;
    struct sq_engine__worker *w = &x->ws[i];
    sq_counters_add(&out->c, &w->c);
    out->in_flight += w->in_flight;
    out->arrivals += w->arrivals; /* latencies arrived through the slots */
    out->client.idle_polled += w->idle_polled;
    out->client.idle_caught += w->idle_caught;
    out->client.idle_slept += w->idle_slept;
    if (w->open)
        merge_pool(out, w);
    if (w->end_ns > x->end)
        x->end = w->end_ns;
    if (!out->tls_version && w->tls_version) {
        out->tls_version = w->tls_version;
        out->tls_cipher = w->tls_cipher;
        out->tls_alpn = w->tls_alpn;
    }
    if (!out->tls_error[0] && w->live.tls_err_set)
        snprintf(out->tls_error, sizeof(out->tls_error), "%s", w->tls_err);
    if (!out->bus_error[0] && w->live.bus_err_set)
        snprintf(out->bus_error, sizeof(out->bus_error), "%s", w->bus_err);
    out->stamped[i] = w->stamp_next;
    if (w->nunfinished && out->unfinished) { /* handed over */
        out->unfinished[i] = w->unfinished;
        out->nunfinished[i] = w->nunfinished;
        w->unfinished = NULL;
        w->nunfinished = w->capunfinished = 0;
    }
    for (size_t k = 0; k < SQ_STATUS_CODES; k++)
        out->status_codes[k] += w->codes[k];
    if (!out->first_connect_err)
        out->first_connect_err = w->first_connect_err;
    if (!out->script_error && w->script_err) {
        out->script_error = w->script_err; /* handed over */
        w->script_err = NULL;
    }
    out->script_stopped += w->script_stopped;
    if (!out->upgrade_error[0] && w->live.up_err_set)
        snprintf(out->upgrade_error, sizeof(out->upgrade_error), "%s", w->up_err);
    if (!out->proxy_error[0] && w->live.proxy_err_set)
        snprintf(out->proxy_error, sizeof(out->proxy_error), "%s", w->proxy_err);
}

/* Joins the started workers, each folded into the result as it ends (and its driver's own
 * figures), then the sampled exchanges and the 100 ms series; the writer stops last, once it
 * has drained what the workers wrote. rc: what the start said (kept when it failed). Returns
 * rc, or -ENOMEM (with *why) when a merge ran out of memory. */
static int join_workers(struct runctx *x, int rc)
{
    struct sq_result *out = x->out;
    x->go = x->run.go_ns;
    x->end = x->go;
    for (uint32_t i = 0; i < x->started; i++) {
        struct sq_engine__worker *w = &x->ws[i];
        pthread_join(w->tid, NULL);
        merge_worker(x, i);
        if (w->drv && w->drv->result && w->drv->result(w, out) < 0 && rc == 0)
            rc = oom(x);
    }
    /* Each worker's identity (worker.c) adds up; and once watch() consumed every slot, each
     * completed request is in the latency histogram once (recorded, or out of its range). */
    SQ_ASSERT_MSG(out->c.sent == out->c.completed + out->c.failed + out->in_flight,
                  "the run's sent == completed + failed + in flight");
    SQ_ASSERT_MSG(x->started < x->nw ||
                      (uint64_t)(sq_hist_total(out->latency) +
                                 sq_hist_out_of_range(out->latency)) == out->c.completed,
                  "one latency per completed request");
    if (rc == 0 &&
        sq_engine__xs_merge(x->ws, x->started, x->cfg->sample_per_class, &out->xsamples) < 0)
        rc = oom(x);
    if (rc == 0 && x->go && fine_merge(x->ws, x->started, x->end - x->go, &out->fine) < 0)
        rc = oom(x);
    if (x->writing) {
        __atomic_store_n(&x->wr.stop, 1, __ATOMIC_RELEASE);
        pthread_join(x->wr.tid, NULL);
        out->samples_written = x->wr.written;
        for (uint32_t i = 0; i < x->nw; i++)
            out->samples_lost += x->ws[i].samples_lost;
    }
    return rc;
}

/* The histograms kept only when asked: per phase (cfg->phases), SSE's (workers that saw an
 * event stream), requests per second (cfg->rate_samples). Returns 0 or -ENOMEM. */
static int merge_hists(struct runctx *x)
{
    const struct sq_run_config *cfg = x->cfg;
    struct sq_result *out = x->out;
    for (int k = 0; cfg->phases && k < SQ_PHASE_COUNT; k++) {
        if (sq_latency_hist_new(&out->phase[k]) < 0)
            return oom(x);
        for (uint32_t i = 0; i < x->started; i++)
            sq_hist_merge(out->phase[k], x->ws[i].phase[k]);
    }
    for (uint32_t i = 0; i < x->started; i++) {
        if (!x->ws[i].connack)
            continue;
        if (!out->bus_connect && sq_latency_hist_new(&out->bus_connect) < 0)
            return oom(x);
        sq_hist_merge(out->bus_connect, x->ws[i].connack);
    }
    for (uint32_t i = 0; i < x->started; i++) {
        if (!x->ws[i].sse_first)
            continue;
        if ((!out->sse_first_event && sq_latency_hist_new(&out->sse_first_event) < 0) ||
            (!out->sse_duration && sq_latency_hist_new(&out->sse_duration) < 0))
            return oom(x);
        sq_hist_merge(out->sse_first_event, x->ws[i].sse_first);
        sq_hist_merge(out->sse_duration, x->ws[i].sse_dur);
    }
    if (cfg->rate_samples) {
        if (sq_latency_hist_new(&out->rate) < 0)
            return oom(x);
        for (uint32_t i = 0; i < x->started; i++)
            if (x->ws[i].rate)
                sq_hist_merge(out->rate, x->ws[i].rate);
    }
    return 0;
}

/* What is merged across workers after the join: the histograms, --urls' figures, a plan's
 * scenarios; then the run's own facts. Returns 0 or -ENOMEM. */
static int run_merge(struct runctx *x)
{
    const struct sq_run_config *cfg = x->cfg;
    struct sq_result *out = x->out;
    out->dns_ns = cfg->dns_ns;
    if (merge_hists(x) < 0)
        return -ENOMEM;
    if (!cfg->scens && cfg->nurls && merge_urls(cfg, x->ws, x->started, out) < 0)
        return oom(x);
    if (cfg->scens && merge_scens(cfg, x->ws, x->started, out) < 0)
        return oom(x);
    out->duration_ns = x->go ? x->end - x->go : 0;
    out->start_mono_ns = x->go;
    out->spin_ns = x->run.spin_ns;
    out->threads = x->nw;
    out->connections = x->conns;
    out->npinned = 0;
    for (uint32_t i = 0; cfg->ncpus && i < x->started && i < SQ_RESULT_MAX_PINNED; i++)
        out->worker_cpu[out->npinned++] = (int16_t)x->ws[i].cpu;
    out->aborted = x->run.abort != 0 || x->run.wind_ns != 0;
    out->tls = cfg->tls != NULL;
    return 0;
}

/* Frees the workers and the aggregation; a failed run's result too. */
static void run_dispose(struct runctx *x, int rc)
{
    for (uint32_t i = 0; x->ws && i < x->nw; i++)
        sq_engine__worker_dispose(&x->ws[i]);
    free(x->ws);
    free(x->agg.last);
    free(x->agg.active);
    sq_engine__clagg_dispose(&x->agg.cl);
    sq_hist_free(x->agg.h);
    sq_hist_free(x->agg.hu);
    for (uint32_t g = 0; x->agg.sh && g < x->agg.nsteps; g++)
        sq_hist_free(x->agg.sh[g]);
    free(x->agg.sh);
    free(x->agg.step_base);
    free(x->agg.wl);
    free(x->agg.lv);
    free(x->agg.mlast);
    free(x->agg.memitted);
    free(x->agg.mnow);
    free(x->agg.mslast);
    free(x->agg.msemitted);
    free(x->agg.msec);
    if (rc < 0)
        sq_result_dispose(x->out);
}

int sq_run(const struct sq_run_config *cfg, struct sq_result *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    out->pool.first_ns = out->pool.last_ns = -1;
    *why = NULL;
    struct runctx x = {.cfg = cfg, .out = out, .why = why, .agg = {.cur = 1}};
    int rc = run_size(&x);
    if (rc < 0)
        return rc; /* nothing allocated yet */
    rc = run_alloc(&x);
    if (rc == 0)
        rc = run_setup(&x);
    bool bound = false;
    if (rc == 0 && cfg->ctl && (rc = sq_engine__ctl_bind(cfg->ctl, &x.run)) == 0)
        bound = true;
    if (rc == 0)
        rc = start_writer(&x);
    if (rc == 0) {
        rc = start_workers(&x);
        if (x.started == x.nw) /* every worker runs: watch them to the end */
            watch(x.ws, x.nw, &x.run, out, x.begin, &x.agg);
        rc = join_workers(&x, rc);
    }
    if (bound) { /* the workers are gone: the changes made go into the result */
        int urc = sq_engine__ctl_unbind(cfg->ctl, rc == 0 ? out : NULL);
        if (rc == 0)
            rc = urc;
    }
    if (rc == 0)
        rc = run_merge(&x);
    run_dispose(&x, rc);
    return rc;
}

uint32_t sq_run_workers(const struct sq_run_config *cfg)
{
    uint32_t nw = 0;
    for (uint32_t i = 0; i < (cfg->scens ? cfg->nscens : 1); i++)
        nw += scen_workers(cfg, i);
    return nw;
}
