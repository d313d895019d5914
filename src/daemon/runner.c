/* daemon/runner.c - the run queue, the runner thread and the ops thread (daemon/internal.h has
 * who owns what).
 *
 * The runner takes the oldest queued job, marks it running in the store, sets it up (DNS, TLS:
 * the same code as the CLI), and runs the engine on this thread. Each second the engine's tick
 * (on this thread) appends the second to the store - one transaction, so a kill -9 loses at
 * most that second - renders the second's event once and posts a wake-up to the API thread.
 * When the run ends its result document and histograms are stored in one durable transaction
 * before the API hears of the end, so a client that sees "finished" can always read the result.
 *
 * The ops thread does, in order, what the API thread must not wait for: it parses requests
 * (the quick face's parser uses getopt_long, which is not thread-safe: only this thread
 * parses), writes the store durably (create, cancel, delete) and prunes after each run.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "daemon/internal.h"
#include "result/verdict.h"
#include "plan/exec.h"
#include "plan/plan.h"
#include "output/json.h"
#include "stats/hist.h"

/* ---- posts to the API thread ---- */

enum { LIVE_BEGIN, LIVE_TICK, LIVE_END };

struct live_post {
    struct sq_daemon *d;
    struct sq_daemon__live *l;
    int what;
};

static void on_live_post(void *ud)
{
    struct live_post *p = ud;
    if (p->what == LIVE_BEGIN)
        sq_daemon__live_begin(p->d, p->l);
    else if (p->what == LIVE_TICK)
        sq_daemon__live_tick(p->d, p->l);
    else
        sq_daemon__live_end(p->d, p->l);
    free(p);
}

/* Returns false when the post could not be made (the API thread then never hears of it). */
static bool live_post(struct sq_daemon *d, struct sq_daemon__live *l, int what)
{
    struct live_post *p = malloc(sizeof(*p));
    if (!p)
        return false;
    *p = (struct live_post){d, l, what};
    if (sq_server_post(d->srv, 0, on_live_post, p) < 0) {
        free(p);
        return false;
    }
    return true;
}

struct cancel_post {
    struct sq_daemon *d;
    int64_t id;
    enum sq_store_status st;
    char reason[128];
};

static void on_cancel_post(void *ud)
{
    struct cancel_post *p = ud;
    sq_daemon__live_cancelled(p->d, p->id, p->st, p->reason);
    free(p);
}

static void cancel_post(struct sq_daemon *d, int64_t id, const char *reason)
{
    struct cancel_post *p = malloc(sizeof(*p));
    if (!p)
        return;
    p->d = d;
    p->id = id;
    p->st = SQ_STORE_STOPPED;
    snprintf(p->reason, sizeof(p->reason), "%s", reason);
    if (sq_server_post(d->srv, 0, on_cancel_post, p) < 0)
        free(p);
}

/* ---- config copies (the ops and runner threads read the config through a copy) ---- */

static int config_copy(struct sq_daemon *d, struct sq_daemon_config *out)
{
    pthread_mutex_lock(&d->mu);
    *out = d->cfg;
    int rc = 0;
    for (size_t i = 0; i < out->nallow; i++) {
        out->allow_hosts[i] = strdup(d->cfg.allow_hosts[i]);
        if (!out->allow_hosts[i]) {
            out->nallow = i;
            rc = -ENOMEM;
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* ---- the run of one job ---- */

struct tick_ctx {
    struct sq_daemon *d;
    struct sq_daemon__job *job;
    struct sq_daemon__live *l;
    struct sq_hist *total; /* every second merged: the running percentiles and buckets */
    struct sq_daemon__totals t;
    int64_t idx;
    bool open; /* an arrival-rate scenario: the client block's behind_ms */
    bool store_failed;
    char store_err[256]; /* the first write the store refused, and at which second */
    double store_at_s;
    const char *abort_why;
    /* the live tables (livetab.c): a plan run renders them after the steps' callback, which
     * follows on_tick; len_s is that second's length */
    struct sq_daemon__livetab tab;
    bool steps;
    bool pending;
    double len_s;
    char *fine; /* the second's 100 ms bins (on_tick_fine, just before on_tick), or NULL */
};

static void totals_latency(struct sq_daemon__totals *t, const struct sq_hist *h)
{
    int64_t n = sq_hist_total(h);
    if (n) {
        t->p50_us = sq_hist_percentile(h, 50);
        t->p90_us = sq_hist_percentile(h, 90);
        t->p99_us = sq_hist_percentile(h, 99);
        t->max_us = sq_hist_max(h);
    }
    for (int i = 0; i < SQ_DAEMON_NBUCKETS - 1; i++)
        t->bucket[i] =
            (uint64_t)sq_hist_count_between(h, 0, (int64_t)llround(sq_daemon__buckets_s[i] * 1e6));
    t->bucket[SQ_DAEMON_NBUCKETS - 1] = (uint64_t)n;
    t->lat_sum_s = sq_hist_mean(h) * (double)n / 1e6;
}

/* Any arrival-rate scenario makes the run open-loop (as the engine's result says at the end). */
static bool run_is_open(const struct sq_run_config *cfg)
{
    if (!cfg->scens)
        return sq_exec_is_open(&cfg->exec);
    for (uint32_t i = 0; i < cfg->nscens; i++)
        if (sq_exec_is_open(&cfg->scens[i].exec))
            return true;
    return false;
}

/* The running totals, one second more (t->rps is that second's). */
static void totals_add(struct tick_ctx *x, const struct sq_second *s, const struct sq_hist *h)
{
    struct sq_daemon__totals *t = &x->t;
    t->elapsed_s = s->t_s;
    t->sent += s->sent;
    t->completed += s->completed;
    t->failed += s->failed;
    t->dropped += s->dropped;
    t->errors += s->errors;
    t->bytes_received += s->bytes_received;
    for (int i = 0; i < 6; i++)
        t->status[i] += s->status[i];
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        t->errk[k] += s->errk[k];
    t->vus = s->active;
    t->in_flight = t->sent >= t->completed + t->failed ? t->sent - t->completed - t->failed : 0;
    t->rps = s->len_s > 0 ? (double)s->completed / s->len_s : 0;
    sq_hist_merge(x->total, h);
    totals_latency(t, x->total);
}

/* The second appended to the run's stored series (one transaction), extra its JSON. The first
 * write the store refuses is kept: the run goes on and ends failed. */
static void store_second(struct tick_ctx *x, const struct sq_second *s, const char *extra)
{
    struct sq_store_second ss = {
        .idx = x->idx,
        .t_s = s->t_s,
        .len_s = s->len_s,
        .sent = s->sent,
        .completed = s->completed,
        .failed = s->failed,
        .errors = s->errors,
        .dropped = s->dropped,
        .bytes = s->bytes_received,
        .active = s->active,
        .p50_us = s->p50_us,
        .p90_us = s->p90_us,
        .p99_us = s->p99_us,
        .max_us = s->max_us,
        .extra = extra,
    };
    char err[256];
    if (sq_store_series_append(x->d->store, x->job->id, &ss, err, sizeof(err)) < 0 &&
        !x->store_failed) {
        /* the run goes on (its figures are in memory, and in its result); it ends failed */
        x->store_failed = true;
        x->store_at_s = s->t_s - s->len_s;
        snprintf(x->store_err, sizeof(x->store_err), "%s", err);
        sq_daemon__log(x->d, "run %lld: the series could not be stored: %s", (long long)x->job->id,
                       err);
    }
}

/* ev (owned) appended to the live run's events for its followers, and with t the live totals
 * set, under the live run's lock; ev is freed when it cannot be kept (out of memory). */
static void live_push(struct sq_daemon__live *l, char *ev, const struct sq_daemon__totals *t)
{
    pthread_mutex_lock(&l->mu);
    if (ev && l->nev == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->ev, cap * sizeof(*v));
        if (v) {
            l->ev = v;
            l->cap = cap;
        }
    }
    if (ev && l->nev < l->cap) {
        l->ev[l->nev++] = ev;
        ev = NULL;
    }
    if (t)
        l->t = *t;
    pthread_mutex_unlock(&l->mu);
    free(ev);
}

/* ev (owned, may be NULL) as the live run's latest "live" event. */
static void live_set_tables(struct sq_daemon__live *l, char *ev)
{
    if (!ev)
        return;
    pthread_mutex_lock(&l->mu);
    free(l->live_ev);
    l->live_ev = ev;
    l->live_seq++;
    pthread_mutex_unlock(&l->mu);
}

/* Each second of the run, on the runner thread: the totals, the stored series, the live event
 * (rendered once, posted to the API thread), the abortOnFail thresholds. */
static void on_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                    const struct sq_hist *hu)
{
    SQ_UNUSED(hu);
    struct tick_ctx *x = ud;
    totals_add(x, s, h);
    char *totals = sq_daemon__totals_json(&x->t);
    /* the client block rides in every second (its figures are valid once the run ends well) */
    char *entry = sq_daemon__second_json(s, true, x->open, sq_daemon__req_plan(x->job->req));
    size_t xl = (totals ? strlen(totals) : 0) + (entry ? strlen(entry) : 0) + 32;
    char *extra = totals && entry ? malloc(xl) : NULL;
    if (extra)
        snprintf(extra, xl, "{\"totals\":%s,\"second\":%s}", totals, entry);
    store_second(x, s, extra);
    free(extra);
    char *ev = sq_daemon__event_second(x->job->id, x->idx, entry, totals, x->fine);
    free(x->fine); /* the second's 100 ms bins go with this event only */
    x->fine = NULL;
    free(entry);
    free(totals);
    live_push(x->l, ev, &x->t);
    x->idx++;
    const char *why = NULL;
    if (!x->abort_why && sq_daemon__req_tick(x->job->req, s, h, &why)) {
        x->abort_why = why ? why : "a threshold with abortOnFail failed";
        __atomic_store_n(&x->job->stop, 1, __ATOMIC_RELAXED);
    }
    if (x->steps) { /* the tables and the wake-up come with the steps (on_tick_steps) */
        x->pending = true;
        x->len_s = s->len_s;
        return;
    }
    live_set_tables(
        x->l, sq_daemon__event_live(&x->tab, x->l, &x->t, x->total, NULL, NULL, NULL, 0, s->len_s));
    live_post(x->d, x->l, LIVE_TICK);
}

static const char *const kind_names[] = {"counter", "rate", "gauge", "trend"};

static void prom_double(struct sq_buf *b, double v)
{
    if (isnan(v))
        (void)sq_buf_printf(b, 8, "NaN\n");
    else if (isinf(v))
        (void)sq_buf_printf(b, 8, "%s\n", v > 0 ? "+Inf" : "-Inf");
    else
        (void)sq_buf_printf(b, 32, "%.17g\n", v);
}

/* A plan's own metrics so far as /metrics sample lines (docs/daemon.md): every step's slots that
 * count for each metric (its first SQ_STEP_LIVE_METRICS) added up as the result adds them. The
 * value: a counter's sum, a rate's share of non-zero samples, a gauge's latest sample, a trend's
 * mean (its percentiles need the histograms, which stay with the workers until the end). */
static void custom_lines(struct sq_daemon__live *l, const struct sq_plan *p,
                         const struct sq_step_live *v, uint32_t n)
{
    struct agg {
        uint64_t n, nonzero;
        double sum, last;
        int64_t last_ns;
    } *m = calloc(p->nmetrics, sizeof(*m));
    if (!m)
        return;
    uint32_t g = 0;
    for (size_t i = 0; i < p->nscenarios; i++) {
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        for (size_t k = 0; k < sc->nsteps && g < n; k++, g++) {
            const struct sq_step_live *x = &v[g];
            for (uint32_t j = 0; j < x->nmvals && j < SQ_STEP_LIVE_METRICS; j++) {
                uint32_t mi = sq_plan_slot_metric(&sc->steps[k], j);
                if (mi >= p->nmetrics)
                    continue;
                struct agg *a = &m[mi];
                a->n += x->mvals[j].n;
                a->nonzero += x->mvals[j].nonzero;
                a->sum += x->mvals[j].sum;
                if (x->mvals[j].n && x->mvals[j].last_ns >= a->last_ns) {
                    a->last = x->mvals[j].last;
                    a->last_ns = x->mvals[j].last_ns;
                }
            }
        }
    }
    struct sq_buf val = {0}, smp = {0};
    for (size_t i = 0; i < p->nmetrics; i++) {
        const struct agg *a = &m[i];
        enum sq_metric_kind kind = p->metrics[i].kind;
        (void)sq_buf_printf(&smp, 512,
                            "squall_run_custom_samples_total{run=\"%" PRId64 "\",metric=\"", l->id);
        sq_daemon__prom_label(&smp, p->metrics[i].name);
        (void)sq_buf_printf(&smp, 32, "\"} %" PRIu64 "\n", a->n);
        if (kind != SQ_MK_COUNTER && !a->n)
            continue; /* no value yet */
        (void)sq_buf_printf(&val, 512, "squall_run_custom_value{run=\"%" PRId64 "\",metric=\"",
                            l->id);
        sq_daemon__prom_label(&val, p->metrics[i].name);
        (void)sq_buf_printf(&val, 32, "\",kind=\"%s\"} ", kind_names[kind]);
        prom_double(&val, kind == SQ_MK_COUNTER ? a->sum
                          : kind == SQ_MK_RATE  ? (double)a->nonzero / (double)a->n
                          : kind == SQ_MK_GAUGE ? a->last
                                                : a->sum / (double)a->n);
    }
    free(m);
    char *vs = NULL, *ss = NULL;
    if (sq_buf_append(&val, "", 1) == 0 && sq_buf_append(&smp, "", 1) == 0) {
        vs = val.p;
        ss = smp.p;
    } else {
        free(val.p);
        free(smp.p);
    }
    pthread_mutex_lock(&l->mu);
    free(l->cm_value);
    free(l->cm_samples);
    l->cm_value = vs;
    l->cm_samples = ss;
    pthread_mutex_unlock(&l->mu);
}

/* A plan run's steps after each second (right after on_tick): the live tables, the wake-up. */
static void on_tick_steps(void *ud, const struct sq_step_live *v, uint32_t n)
{
    struct tick_ctx *x = ud;
    if (!x->pending)
        return;
    x->pending = false;
    const struct sq_plan *p = sq_daemon__req_plan(x->job->req);
    if (p && p->nmetrics)
        custom_lines(x->l, p, v, n);
    live_set_tables(x->l, sq_daemon__event_live(
                              &x->tab, x->l, &x->t, x->total, sq_daemon__req_plan(x->job->req),
                              sq_daemon__req_live_totals(x->job->req), v, n, x->len_s));
    live_post(x->d, x->l, LIVE_TICK);
}

/* A second's 100 ms bins, right before its on_tick: they ride in its "second" event. */
static void on_tick_fine(void *ud, const struct sq_fine_bin *v, uint32_t n, int64_t bin_ns,
                         double t0_s)
{
    struct tick_ctx *x = ud;
    free(x->fine);
    x->fine = sq_daemon__fine_json(v, n, bin_ns, t0_s);
}

/* A failure's first sampled exchange of a worker (before on_tick): kept for the live event,
 * the first of each class. */
static void on_xsample_live(void *ud, const struct sq_xsample *x)
{
    struct tick_ctx *c = ud;
    sq_daemon__livetab_sample(&c->tab, x);
}

/* The totals at the end, from the result itself (exact: /metrics then equals the document). */
static void final_totals(struct sq_daemon__totals *t, const struct sq_result *res)
{
    t->sent = res->c.sent;
    t->completed = res->c.completed;
    t->failed = res->c.failed;
    t->dropped = res->c.dropped;
    t->bytes_received = res->c.bytes_received;
    t->errors = 0;
    for (int i = 0; i < 6; i++)
        t->status[i] = res->c.status[i];
    for (int k = 0; k < SQ_ERRK_COUNT; k++) {
        t->errk[k] = res->c.errors[k];
        t->errors += res->c.errors[k];
    }
    t->in_flight = 0;
    t->vus = 0;
    t->elapsed_s = (double)res->duration_ns / 1e9;
    if (res->latency) {
        t->p50_us = t->p90_us = t->p99_us = t->max_us = 0;
        totals_latency(t, res->latency);
    }
    t->ended = true;
}

/* Ends the live run: its last event and totals, then the post that gives it to the API. */
static void live_finish(struct sq_daemon *d, struct sq_daemon__live *l, enum sq_store_status st,
                        const char *reason, const char *doc, size_t doc_len,
                        const struct sq_daemon__totals *t)
{
    char *end = sq_daemon__event_end(l->id, st, reason, doc, doc_len);
    pthread_mutex_lock(&l->mu);
    l->end_ev = end ? end : strdup("event: end\ndata: {}\n\n");
    l->status = st;
    if (t)
        l->t = *t;
    l->t.ended = true;
    pthread_mutex_unlock(&l->mu);
    if (!live_post(d, l, LIVE_END))
        sq_daemon__log(d, "run %lld: the API could not be told the run ended", (long long)l->id);
}

/* Tells the followers that the load ended and the sink waits for what is still on its way
 * (event: settle). */
static void live_settle(struct sq_daemon *d, struct sq_daemon__live *l, const struct sq_result *res)
{
    uint64_t stamped = 0;
    for (uint32_t w = 0; w < res->nstreams; w++)
        stamped += res->stamped ? res->stamped[w] : 0;
    char *ev = malloc(128);
    if (!ev)
        return;
    snprintf(ev, 128, "event: settle\ndata: {\"run\":%lld,\"stamped\":%llu}\n\n", (long long)l->id,
             (unsigned long long)stamped);
    live_push(l, ev, NULL);
    live_post(d, l, LIVE_TICK);
}

static const char *status_word(enum sq_store_status st)
{
    return sq_store_status_name(st);
}

/* An end the store could not write: kept in memory (every read of the daemon shows it), written
 * by the ops thread once the store can take it (store_retry, every second while one is kept). */
static void end_kept(struct sq_daemon *d, int64_t id, const struct sq_store_end *e)
{
    char err[512];
    if (sq_store_run_end_later(d->store, id, e, err, sizeof(err)) < 0) {
        sq_daemon__log(d, "run %lld: its end could not be kept either: %s", (long long)id, err);
        return;
    }
    sq_daemon__log(d, "run %lld: %s; kept until the store can take it", (long long)id,
                   sq_store_status_name(e->status));
    sq_daemon__op_wake(d);
}

/* What the steps of one job's run share (on the runner thread). */
struct jobrun {
    struct sq_daemon *d;
    struct sq_daemon__job *job;
    struct sq_daemon__live *l;
    struct sq_run_config *cfg; /* the request's, set up (daemon/prep.c) */
    int rc;                    /* the set-up's or the run's: 0 when the run took place */
    struct tick_ctx x;
    struct sq_result res;
    json_t *doc; /* the result document (NULL: none) */
    char *text;  /* doc as the store keeps it */
    enum sq_store_status st;
    const char *reason; /* why it did not finish (NULL: it did), often why_buf */
    char why_buf[512];
    char end_why[640]; /* the store's refusal of the end, when that is the reason */
    char err[2048];
};

/* The live run made and the run marked running in the store, with its kind, name and target.
 * False when the job ends here (its end, if any, stored or kept). */
static bool job_begin(struct jobrun *r)
{
    struct sq_daemon *d = r->d;
    int64_t id = r->job->id;
    if (sq_daemon__live_new(id, &r->l) < 0) {
        struct sq_store_end e = {.status = SQ_STORE_FAILED, .reason = "out of memory"};
        if (sq_store_run_end(d->store, id, &e, r->err, sizeof(r->err)) < 0)
            sq_daemon__log(d, "run %lld: %s", (long long)id, r->err);
        return false;
    }
    int rc = sq_store_run_start(d->store, id, r->err, sizeof(r->err));
    if (rc < 0) {
        sq_daemon__log(d, "run %lld could not start: %s", (long long)id, r->err);
        /* -EPERM, -ENOENT: no longer queued (cancelled, deleted); else the store refused the
         * write, and the run fails */
        if (rc != -EPERM && rc != -ENOENT) {
            char why[400];
            snprintf(why, sizeof(why), "the store could not take the run's start: %.300s", r->err);
            end_kept(d, id, &(struct sq_store_end){.status = SQ_STORE_FAILED, .reason = why});
        }
        sq_daemon__live_free(r->l);
        return false;
    }
    struct sq_daemon__live *l = r->l;
    l->started_ms = 0;
    struct sq_store_run sr;
    if (sq_store_run_get(d->store, id, &sr, r->err, sizeof(r->err)) == 0) {
        snprintf(l->kind, sizeof(l->kind), "%s", sq_store_kind_name(sr.kind));
        snprintf(l->name, sizeof(l->name), "%s", sr.name);
        snprintf(l->target, sizeof(l->target), "%s", sr.target);
        l->started_ms = sr.started_ms;
        sq_store_run_dispose(&sr);
    }
    return true;
}

/* The request set up as a run (the CLI's code), and the API told it started either way. */
static void job_setup(struct jobrun *r)
{
    struct sq_daemon *d = r->d;
    r->rc = sq_daemon__req_setup(r->job->req, &r->cfg, r->err, sizeof(r->err));
    if (r->rc == 0)
        sq_daemon__req_shape(r->job->req, &r->l->workers, &r->l->vus_max);
    if (!live_post(d, r->l, LIVE_BEGIN)) {
        /* the API will not know of it: run it all the same, its result is what matters */
        sq_daemon__log(d, "run %lld: the API could not be told the run started",
                       (long long)r->job->id);
    }
    sq_daemon__log(d, "run %lld started", (long long)r->job->id);
}

/* How the run ended, in the order the CLI decides it: a stop (by request or the daemon's
 * shutdown), an abortOnFail threshold, the engine's own abort, a sink that never subscribed,
 * nothing succeeded; else finished. */
static void job_verdict(struct jobrun *r, bool sink_failed)
{
    struct sq_daemon__job *job = r->job;
    bool stopped = __atomic_load_n(&job->stop, __ATOMIC_RELAXED) && !r->x.abort_why;
    r->st = SQ_STORE_FAILED;
    if (stopped) {
        pthread_mutex_lock(&r->d->mu); /* written under it by sq_daemon__threads_stop */
        bool shut = job->shutting_down;
        pthread_mutex_unlock(&r->d->mu);
        r->st = SQ_STORE_STOPPED;
        r->reason = shut ? "the daemon shut down" : "stopped by request";
    } else if (r->x.abort_why) {
        snprintf(r->why_buf, sizeof(r->why_buf), "%s", r->x.abort_why);
        r->reason = r->why_buf;
    } else if (r->res.aborted) {
        snprintf(r->why_buf, sizeof(r->why_buf), "%s", r->res.abort_reason);
        r->reason = r->why_buf;
    } else if (sink_failed) { /* its broker never subscribed: it counted nothing */
        r->reason = r->why_buf;
    } else if (!sq_result_succeeded(&r->res)) {
        /* the rule and the words of the CLI's exit code 1 (result/verdict.h) */
        char text[480];
        snprintf(r->why_buf, sizeof(r->why_buf), "no request succeeded: %s",
                 sq_report_why_failed(&r->res, r->cfg->timeout_ns, text, sizeof(text)));
        r->reason = r->why_buf;
    } else {
        r->st = SQ_STORE_FINISHED;
    }
    if (!r->doc) {
        r->st = SQ_STORE_FAILED;
        r->reason = "out of memory building the result";
    }
}

/* The run itself, with the plan's sink beside it; then its document and its verdict. */
static void job_load(struct jobrun *r)
{
    struct sq_daemon *d = r->d;
    struct sq_daemon__job *job = r->job;
    bool subscribed = true, sink_failed = false;
    r->st = SQ_STORE_FAILED;
    if (r->rc < 0) {
        snprintf(r->why_buf, sizeof(r->why_buf), "%.500s", r->err);
        r->reason = r->why_buf;
        return;
    }
    if ((r->rc = sq_latency_hist_new(&r->x.total)) < 0) {
        r->reason = "out of memory";
        return;
    }
    r->rc = sq_daemon__req_sink_begin(job->req, &job->stop, &subscribed, r->err, sizeof(r->err));
    if (r->rc < 0) {
        /* a plan's sink could not listen or start: this run fails, the daemon goes on */
        snprintf(r->why_buf, sizeof(r->why_buf), "%.500s", r->err);
        r->reason = r->why_buf;
        return;
    }
    if (!subscribed)
        sq_daemon__log(d,
                       "run %lld: sink: not subscribed after 5s; the load starts anyway "
                       "(events before the subscription are lost to the sink)",
                       (long long)job->id);
    r->x.open = run_is_open(r->cfg);
    r->cfg->stop = &job->stop;
    r->cfg->ctl = job->ctl;
    r->cfg->on_tick = on_tick;
    r->cfg->tick_ud = &r->x;
    r->cfg->on_tick_fine = on_tick_fine; /* the latency chart's 100 ms view */
    if (r->cfg->sample_per_class)        /* the failures panel's samples */
        r->cfg->on_xsample_live = on_xsample_live;
    if (sq_daemon__req_plan(job->req)) { /* the live tables' rows: the steps */
        r->cfg->on_tick_steps = on_tick_steps;
        r->x.steps = true;
    }
    /* a plan's setup: once before the load (what it extracts, every VU reads); a setup that
     * fails or is stopped ends the run before the scenarios, and no teardown runs (squall run's
     * rule) */
    int orc = sq_daemon__req_once(job->req, false, &job->stop, r->why_buf, sizeof(r->why_buf));
    if (orc < 0) {
        if (orc == -1 && __atomic_load_n(&job->stop, __ATOMIC_RELAXED)) {
            r->st = SQ_STORE_STOPPED;
            snprintf(r->why_buf, sizeof(r->why_buf), "%s",
                     "stopped during setup; the scenarios did not run");
        } else if (orc == -1) {
            size_t n = strlen(r->why_buf);
            snprintf(r->why_buf + n, sizeof(r->why_buf) - n, "; the scenarios did not run");
        }
        r->rc = orc == -1 ? -EPROTO : orc;
        r->reason = r->why_buf;
        return;
    }
    const char *why = NULL;
    r->rc = sq_run(r->cfg, &r->res, &why);
    /* the plan's teardown: once after the load, also when a stop or an abortOnFail threshold
     * ended it; a second stop ends the teardown at once */
    char td_why[320];
    if (sq_daemon__req_once(job->req, true, &job->stop_again, td_why, sizeof(td_why)) < 0)
        sq_daemon__log(d, "run %lld: %s", (long long)job->id, td_why);
    if (r->rc < 0) {
        snprintf(r->why_buf, sizeof(r->why_buf), "%s: %s", why ? why : "the run could not start",
                 sq_strerror(r->rc));
        r->reason = r->why_buf;
        return;
    }
    r->doc = sq_daemon__req_doc(job->req, &r->res);
    if (sq_daemon__req_has_sink(job->req)) {
        /* the sink's settle: this run (and the queue behind it) waits for the events still on
         * their way, up to its settle time after the last one; a stop ends it */
        live_settle(d, r->l, &r->res);
        sink_failed = sq_daemon__req_sink_end(job->req, &r->res, r->doc, &job->stop, r->why_buf,
                                              sizeof(r->why_buf));
    }
    job_verdict(r, sink_failed);
}

/* The result document, its histograms and the end, in one durable write; an end the store
 * refuses is kept until it can (end_kept) and the run ends failed. */
static void job_store(struct jobrun *r)
{
    struct sq_daemon *d = r->d;
    r->text = r->doc ? json_dumps(r->doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (r->doc && !r->text) {
        r->st = SQ_STORE_FAILED;
        r->reason = "out of memory building the result";
    }
    if (r->x.store_failed) {
        /* its seconds from then on are not in the store: the run failed, its result (every
         * second in its series) is kept */
        snprintf(r->why_buf, sizeof(r->why_buf),
                 "the store could not take the run's seconds from %.0f s on: %.300s%s",
                 r->x.store_at_s, r->x.store_err, r->text ? " (the result has them all)" : "");
        r->st = SQ_STORE_FAILED;
        r->reason = r->why_buf;
    }
    unsigned char *hb = NULL, *hub = NULL;
    size_t hl = 0, hul = 0;
    if (r->text && r->res.latency && sq_hist_encode(r->res.latency, &hb, &hl) < 0)
        hb = NULL, hl = 0;
    if (r->text && r->res.latency_uncorrected &&
        sq_hist_encode(r->res.latency_uncorrected, &hub, &hul) < 0)
        hub = NULL, hul = 0;
    struct sq_store_end e = {
        .status = r->st,
        .reason = r->reason,
        .doc = r->text,
        .doc_len = r->text ? strlen(r->text) : 0,
        .hist = hb,
        .hist_len = hl,
        .hist_uncorrected = hub,
        .hist_uncorrected_len = hul,
    };
    if (sq_store_run_end(d->store, r->job->id, &e, r->err, sizeof(r->err)) < 0) {
        sq_daemon__log(d, "run %lld: the result could not be stored: %s", (long long)r->job->id,
                       r->err);
        /* failed, with the write error; kept (with its result) until the store can take it */
        if (!r->x.store_failed) {
            snprintf(r->end_why, sizeof(r->end_why),
                     "the store could not take the run's end: %.400s", r->err);
            r->reason = r->end_why;
        }
        e.status = r->st = SQ_STORE_FAILED;
        e.reason = r->reason;
        end_kept(d, r->job->id, &e);
    }
    free(hb);
    free(hub);
}

/* The log line, the live run's last event and totals (exact, from the result). */
static void job_finish(struct jobrun *r)
{
    struct sq_daemon *d = r->d;
    struct sq_daemon__totals t = r->x.t;
    if (r->rc == 0 && r->res.latency)
        final_totals(&t, &r->res);
    if (r->st == SQ_STORE_FINISHED)
        sq_daemon__log(d, "run %lld finished: %llu requests, %.1f req/s", (long long)r->job->id,
                       (unsigned long long)r->res.c.completed,
                       r->res.duration_ns > 0
                           ? (double)r->res.c.completed * 1e9 / (double)r->res.duration_ns
                           : 0.0);
    else
        sq_daemon__log(d, "run %lld %s: %s", (long long)r->job->id, status_word(r->st),
                       r->reason ? r->reason : "");
    live_finish(d, r->l, r->st, r->reason, r->text, r->text ? strlen(r->text) : 0, &t);
}

static void run_job(struct sq_daemon *d, struct sq_daemon__job *job)
{
    struct jobrun r = {.d = d, .job = job};
    r.x = (struct tick_ctx){.d = d, .job = job};
    if (!job_begin(&r))
        return;
    r.x.l = r.l;
    job_setup(&r);
    job_load(&r);
    job_store(&r);
    json_decref(r.doc);
    job_finish(&r);
    free(r.text);
    sq_hist_free(r.x.total);
    sq_daemon__livetab_dispose(&r.x.tab);
    free(r.x.fine);
    sq_result_dispose(&r.res);
}

/* ---- the runner thread ---- */

static void *runner_main(void *arg)
{
    struct sq_daemon *d = arg;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        while (!d->q_head && !d->q_stop)
            pthread_cond_wait(&d->q_cv, &d->mu);
        if (d->q_stop) {
            pthread_mutex_unlock(&d->mu);
            break;
        }
        struct sq_daemon__job *job = d->q_head;
        d->q_head = job->next;
        if (!d->q_head)
            d->q_tail = NULL;
        d->q_len--;
        if (sq_run_ctl_new(&job->ctl) < 0)
            job->ctl = NULL; /* the run goes without control */
        d->running = job;
        pthread_mutex_unlock(&d->mu);

        run_job(d, job);

        pthread_mutex_lock(&d->mu);
        d->running = NULL;
        pthread_mutex_unlock(&d->mu);
        sq_run_ctl_free(job->ctl);
        struct sq_daemon__op *done = calloc(1, sizeof(*done));
        if (done) {
            done->kind = OP_MCP_DONE; /* the MCP calls waiting for it */
            done->id = job->id;
            (void)sq_daemon__op_push(d, done);
        }
        sq_daemon__req_free(job->req);
        free(job);
        struct sq_daemon__op *op = calloc(1, sizeof(*op));
        if (op) {
            op->kind = OP_PRUNE;
            (void)sq_daemon__op_push(d, op);
        }
    }
    return NULL;
}

bool sq_daemon__stop_running(struct sq_daemon *d, int64_t id)
{
    bool hit = false;
    pthread_mutex_lock(&d->mu);
    if (d->running && d->running->id == id) {
        if (__atomic_load_n(&d->running->stop, __ATOMIC_RELAXED)) /* asked again */
            __atomic_store_n(&d->running->stop_again, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&d->running->stop, 1, __ATOMIC_RELAXED);
        hit = true;
    }
    pthread_mutex_unlock(&d->mu);
    return hit;
}

int sq_daemon__control_running(struct sq_daemon *d, int64_t id, const char *body, size_t len,
                               json_t **answer, char *why, size_t whylen)
{
    int rc = -ENOENT;
    *answer = NULL;
    pthread_mutex_lock(&d->mu);
    struct sq_daemon__job *job = d->running;
    if (job && job->id == id && !job->ctl) {
        snprintf(why, whylen, "%s", "out of memory: this run cannot be changed");
        rc = -ENOMEM;
    } else if (job && job->id == id) {
        rc = sq_run_ctl_json(job->ctl, body, len, answer, why, whylen);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

bool sq_daemon__dequeue(struct sq_daemon *d, int64_t id)
{
    struct sq_daemon__job *hit = NULL;
    pthread_mutex_lock(&d->mu);
    for (struct sq_daemon__job **pp = &d->q_head; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            hit = *pp;
            *pp = hit->next;
            if (d->q_tail == hit) {
                d->q_tail = NULL;
                for (struct sq_daemon__job *j = d->q_head; j; j = j->next)
                    d->q_tail = j;
            }
            d->q_len--;
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);
    if (!hit)
        return false;
    sq_daemon__req_free(hit->req);
    free(hit);
    return true;
}

/* ---- the ops thread ---- */

void sq_daemon__op_free(struct sq_daemon__op *op)
{
    if (!op)
        return;
    free(op->body);
    free(op);
}

int sq_daemon__op_push(struct sq_daemon *d, struct sq_daemon__op *op)
{
    pthread_mutex_lock(&d->ops_mu);
    if (d->ops_stop) {
        pthread_mutex_unlock(&d->ops_mu);
        if (op->p)
            sq_daemon__answer(d, op->p, 503, sq_daemon__error_body("the daemon is shutting down"),
                              NULL);
        sq_daemon__op_free(op);
        return -ESHUTDOWN;
    }
    op->next = NULL;
    if (d->ops_tail)
        d->ops_tail->next = op;
    else
        d->ops_head = op;
    d->ops_tail = op;
    pthread_cond_signal(&d->ops_cv);
    pthread_mutex_unlock(&d->ops_mu);
    return 0;
}

/* Parses an API body: an object, with duplicate keys refused. NULL with err set otherwise. */
static json_t *body_json(const struct sq_daemon__op *op, char *err, size_t len)
{
    json_error_t je;
    json_t *j = json_loadb(op->body ? op->body : "", op->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        snprintf(err, len, "the body is not JSON: %s (line %d, column %d)", je.text, je.line,
                 je.column);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        snprintf(err, len, "the body must be a JSON object");
        return NULL;
    }
    return j;
}

static int status_of(int rc)
{
    switch (rc) {
    case -SQ_EUSAGE:
    case -SQ_EPARSE:
    case -SQ_ERANGE:
    case -SQ_ERESOLVE:
    case -SQ_ESCHEME:
    case -SQ_ETOOBIG:
    case -EINVAL:
        return 400;
    case -EACCES:
        return 403;
    case -ENOMEM:
        return 503;
    default:
        return 500;
    }
}

int sq_daemon__enqueue(struct sq_daemon *d, const json_t *body, const char *text, bool mcp,
                       int64_t *id, int *status, char *err, size_t len)
{
    struct sq_daemon_config cfg;
    if (config_copy(d, &cfg) < 0) {
        sq_daemon_config_dispose(&cfg);
        snprintf(err, len, "out of memory");
        *status = 503;
        return -ENOMEM;
    }
    pthread_mutex_lock(&d->mu);
    bool full = d->q_len >= cfg.max_queue;
    pthread_mutex_unlock(&d->mu);
    if (full) {
        snprintf(err, len, "max_queue: %u runs are waiting already; try again later",
                 cfg.max_queue);
        sq_daemon_config_dispose(&cfg);
        *status = 429;
        return -EAGAIN;
    }
    struct sq_daemon__req *rq = NULL;
    struct sq_daemon__req_info info;
    int rc = sq_daemon__req_parse(body, &cfg, mcp, &rq, &info, err, len);
    sq_daemon_config_dispose(&cfg);
    if (rc < 0) {
        *status = status_of(rc);
        return rc;
    }
    struct sq_daemon__job *job = calloc(1, sizeof(*job));
    char *stored = sq_daemon__req_stored(rq, body, text); /* credentials redacted */
    struct sq_store_new_run nr = {
        .kind = info.kind, .name = info.name, .target = info.target, .request = stored};
    rc = job && stored ? sq_store_run_create(d->store, &nr, id, err, len) : -ENOMEM;
    free(stored);
    if (rc < 0) {
        if (!job || !stored)
            snprintf(err, len, "out of memory");
        free(job);
        sq_daemon__req_free(rq);
        *status = status_of(rc) == 400 ? 500 : status_of(rc);
        return rc;
    }
    job->id = *id;
    job->req = rq;
    pthread_mutex_lock(&d->mu);
    bool stopping = d->q_stop;
    if (!stopping) {
        if (d->q_tail)
            d->q_tail->next = job;
        else
            d->q_head = job;
        d->q_tail = job;
        d->q_len++;
        pthread_cond_signal(&d->q_cv);
    }
    pthread_mutex_unlock(&d->mu);
    if (stopping) {
        struct sq_store_end e = {.status = SQ_STORE_STOPPED, .reason = "the daemon shut down"};
        char err2[512];
        if (sq_store_run_end(d->store, *id, &e, err2, sizeof(err2)) < 0)
            sq_daemon__log(d, "run %lld: %s", (long long)*id, err2);
        sq_daemon__req_free(rq);
        free(job);
        snprintf(err, len, "the daemon is shutting down");
        *status = 503;
        return -ESHUTDOWN;
    }
    sq_daemon__log(d, "run %lld queued: %s %s", (long long)*id, sq_store_kind_name(info.kind),
                   info.target);
    return 0;
}

static void op_create(struct sq_daemon *d, struct sq_daemon__op *op)
{
    char err[2048];
    json_t *body = body_json(op, err, sizeof(err));
    if (!body) {
        sq_daemon__answer(d, op->p, 400, sq_daemon__error_body(err), NULL);
        return;
    }
    int64_t id = 0;
    int status = 500;
    int rc = sq_daemon__enqueue(d, body, op->body, false, &id, &status, err, sizeof(err));
    json_decref(body);
    if (rc < 0) {
        sq_daemon__answer(d, op->p, status, sq_daemon__error_body(err),
                          status == 429 ? "Retry-After: 10\r\n" : NULL);
        return;
    }
    char body_out[160], loc[96];
    snprintf(body_out, sizeof(body_out),
             "{\"id\":%lld,\"status\":\"queued\",\"url\":\"/runs/%lld\"}", (long long)id,
             (long long)id);
    snprintf(loc, sizeof(loc), "Location: /runs/%lld\r\n", (long long)id);
    sq_daemon__answer(d, op->p, 201, strdup(body_out), loc);
}

static void op_validate(struct sq_daemon *d, struct sq_daemon__op *op)
{
    char err[2048];
    json_t *body = body_json(op, err, sizeof(err));
    if (!body) {
        sq_daemon__answer(d, op->p, 400, sq_daemon__error_body(err), NULL);
        return;
    }
    char *desc = NULL;
    int rc = sq_daemon__req_validate(body, &desc, err, sizeof(err));
    json_decref(body);
    json_t *o = rc == 0 ? json_pack("{s:b, s:s}", "ok", 1, "description", desc)
                        : json_pack("{s:b, s:s}", "ok", 0, "error", err);
    free(desc);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (!text)
        rc = -ENOMEM, text = sq_daemon__error_body("out of memory");
    /* validating worked, whatever it found: 200, "ok" says which; only a failure of the
     * daemon's own (memory) is not a 200 */
    int st = rc == 0 ? 200 : rc == -ENOMEM ? 503 : status_of(rc) == 500 ? 500 : 200;
    sq_daemon__answer(d, op->p, st, text, NULL);
}

static void op_cancel(struct sq_daemon *d, struct sq_daemon__op *op)
{
    char err[512];
    const char *reason = "cancelled before it started";
    struct sq_store_end e = {.status = SQ_STORE_STOPPED, .reason = reason};
    int rc = sq_store_run_end(d->store, op->id, &e, err, sizeof(err));
    if (rc < 0) {
        sq_daemon__answer(d, op->p, rc == -ENOENT ? 404 : 409, sq_daemon__error_body(err), NULL);
        return;
    }
    sq_daemon__log(d, "run %lld stopped: %s", (long long)op->id, reason);
    cancel_post(d, op->id, reason);
    sq_daemon__mcp_done(d, op->id);
    char body[128];
    snprintf(body, sizeof(body), "{\"id\":%lld,\"status\":\"stopped\"}", (long long)op->id);
    sq_daemon__answer(d, op->p, 200, strdup(body), NULL);
}

void sq_daemon__cancel_queued(struct sq_daemon *d, int64_t id)
{
    char err[512];
    const char *reason = "cancelled before it started";
    struct sq_store_end e = {.status = SQ_STORE_STOPPED, .reason = reason};
    if (sq_store_run_end(d->store, id, &e, err, sizeof(err)) < 0) {
        sq_daemon__log(d, "run %lld: %s", (long long)id, err);
        return;
    }
    sq_daemon__log(d, "run %lld stopped: %s", (long long)id, reason);
    cancel_post(d, id, reason);
    sq_daemon__mcp_done(d, id);
}

static void op_delete(struct sq_daemon *d, struct sq_daemon__op *op)
{
    char err[512];
    int rc = sq_store_run_delete(d->store, op->id, err, sizeof(err));
    if (rc < 0) {
        /* 507: the run has ended, but the store cannot take its end (and so the delete) yet */
        sq_daemon__answer(d, op->p,
                          rc == -ENOENT   ? 404
                          : rc == -EPERM  ? 409
                          : rc == -ENOSPC ? 507
                                          : 500,
                          sq_daemon__error_body(rc == -ENOENT ? "no such run" : err), NULL);
        return;
    }
    sq_daemon__log(d, "run %lld deleted", (long long)op->id);
    sq_daemon__answer(d, op->p, 204, NULL, NULL);
}

static void op_prune(struct sq_daemon *d)
{
    pthread_mutex_lock(&d->mu);
    struct sq_store_retention r = {.keep_runs = d->cfg.keep_runs, .keep_days = d->cfg.keep_days};
    pthread_mutex_unlock(&d->mu);
    if (!r.keep_runs && !r.keep_days)
        return;
    struct sq_store_prune_stats st = {0};
    char err[512];
    if (sq_store_prune(d->store, &r, &st, err, sizeof(err)) < 0)
        sq_daemon__log(d, "pruning failed: %s", err);
    else if (st.runs_deleted)
        sq_daemon__log(d, "pruned %lld runs (keep %lld runs, %lld days)",
                       (long long)st.runs_deleted, (long long)r.keep_runs, (long long)r.keep_days);
}

/* Writes the ends kept in memory, if the store can take them now. */
static void store_retry(struct sq_daemon *d)
{
    char err[512];
    int64_t first = 0;
    size_t before = sq_store_pending(d->store);
    int rc = sq_store_retry(d->store, &first, err, sizeof(err));
    size_t left = sq_store_pending(d->store);
    if (left < before)
        sq_daemon__log(d, "the store took %zu kept run end%s (run %lld first)", before - left,
                       before - left == 1 ? "" : "s", (long long)first);
    (void)rc; /* still refused: said when it was kept; quiet until it changes */
}

void sq_daemon__op_wake(struct sq_daemon *d)
{
    pthread_mutex_lock(&d->ops_mu);
    pthread_cond_signal(&d->ops_cv);
    pthread_mutex_unlock(&d->ops_mu);
}

static void *ops_main(void *arg)
{
    struct sq_daemon *d = arg;
    for (;;) {
        pthread_mutex_lock(&d->ops_mu);
        while (!d->ops_head && !d->ops_stop) {
            if (!sq_store_pending(d->store)) {
                pthread_cond_wait(&d->ops_cv, &d->ops_mu);
                continue;
            }
            /* ends the store could not take: tried again every second, until it can */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            if (pthread_cond_timedwait(&d->ops_cv, &d->ops_mu, &until) == ETIMEDOUT) {
                pthread_mutex_unlock(&d->ops_mu);
                store_retry(d);
                pthread_mutex_lock(&d->ops_mu);
            }
        }
        struct sq_daemon__op *op = d->ops_head;
        if (op) {
            d->ops_head = op->next;
            if (!d->ops_head)
                d->ops_tail = NULL;
        }
        pthread_mutex_unlock(&d->ops_mu);
        if (!op)
            break; /* stopping, and nothing left */
        switch (op->kind) {
        case OP_CREATE:
            op_create(d, op);
            break;
        case OP_VALIDATE:
            op_validate(d, op);
            break;
        case OP_CANCEL:
            op_cancel(d, op);
            break;
        case OP_DELETE:
            op_delete(d, op);
            break;
        case OP_PRUNE:
            op_prune(d);
            break;
        case OP_MCP:
            sq_daemon__mcp_op(d, op);
            break;
        case OP_MCP_DONE:
            sq_daemon__mcp_done(d, op->id);
            break;
        }
        sq_daemon__op_free(op);
    }
    return NULL;
}

int sq_daemon__threads_start(struct sq_daemon *d, char *err, size_t len)
{
    int rc = -pthread_create(&d->ops, NULL, ops_main, d);
    if (rc < 0) {
        snprintf(err, len, "cannot start the ops thread: %s", sq_strerror(rc));
        return rc;
    }
    d->ops_started = true;
    rc = -pthread_create(&d->runner, NULL, runner_main, d);
    if (rc < 0) {
        snprintf(err, len, "cannot start the runner thread: %s", sq_strerror(rc));
        return rc;
    }
    d->runner_started = true;
    return 0;
}

void sq_daemon__threads_stop(struct sq_daemon *d)
{
    pthread_mutex_lock(&d->mu);
    d->q_stop = true;
    if (d->running) {
        d->running->shutting_down = true;
        __atomic_store_n(&d->running->stop, 1, __ATOMIC_RELAXED);
    }
    struct sq_daemon__job *queued = d->q_head;
    d->q_head = d->q_tail = NULL;
    d->q_len = 0;
    pthread_cond_broadcast(&d->q_cv);
    pthread_mutex_unlock(&d->mu);
    if (d->runner_started) {
        pthread_join(d->runner, NULL);
        d->runner_started = false;
    }
    char err[512];
    while (queued) {
        struct sq_daemon__job *j = queued;
        queued = j->next;
        struct sq_store_end e = {.status = SQ_STORE_STOPPED,
                                 .reason = "the daemon shut down before it started"};
        if (sq_store_run_end(d->store, j->id, &e, err, sizeof(err)) < 0) {
            sq_daemon__log(d, "run %lld: %s", (long long)j->id, err);
        } else {
            cancel_post(d, j->id, e.reason);
            struct sq_daemon__op *done = calloc(1, sizeof(*done));
            if (done) {
                done->kind = OP_MCP_DONE;
                done->id = j->id;
                (void)sq_daemon__op_push(d, done);
            }
        }
        sq_daemon__req_free(j->req);
        free(j);
    }
    pthread_mutex_lock(&d->ops_mu);
    d->ops_stop = true;
    pthread_cond_broadcast(&d->ops_cv);
    pthread_mutex_unlock(&d->ops_mu);
    if (d->ops_started) {
        pthread_join(d->ops, NULL);
        d->ops_started = false;
    }
    store_retry(d);
    if (sq_store_pending(d->store))
        sq_daemon__log(d, "%zu run end%s could not be stored: the next start finds %s interrupted",
                       sq_store_pending(d->store), sq_store_pending(d->store) == 1 ? "" : "s",
                       sq_store_pending(d->store) == 1 ? "it" : "them");
}
