/* result/verdict.c - see verdict.h. Each metric's figure is taken where the result keeps it
 * (plan/metrics.h says which scope): per step and status, per scenario, or the whole run's phase
 * histograms. Switches over enum sq_metric have no default, so a metric added to the table
 * does not compile here until it has a figure. */
#include "result/verdict.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/metrics.h"
#include "stats/hist.h"

static bool span_eq(const char *a, size_t al, const char *b)
{
    return al == strlen(b) && memcmp(a, b, al) == 0;
}

/* The tag filter value for key, or NULL. */
static const char *tag(const struct sq_metric_sel *s, const char *key, size_t *len)
{
    for (size_t i = 0; i < s->ntags; i++)
        if (span_eq(s->tags[i].key, s->tags[i].key_len, key)) {
            *len = s->tags[i].value_len;
            return s->tags[i].value;
        }
    return NULL;
}

static bool scen_matches(const struct sq_metric_sel *s, const char *name)
{
    size_t l;
    const char *v = tag(s, "scenario", &l);
    return !v || span_eq(v, l, name);
}

/* Whether the selector's key is one of the built-in tags. */
static bool builtin_tag(const char *k, size_t kl)
{
    static const char *const names[] = {"scenario", "step", "method", "status", "group"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (span_eq(k, kl, names[i]))
            return true;
    return false;
}

/* Whether the selector has a user tag (one a plan's tags: gave its steps). */
static bool has_user_tag(const struct sq_metric_sel *s)
{
    for (size_t i = 0; i < s->ntags; i++)
        if (!builtin_tag(s->tags[i].key, s->tags[i].key_len))
            return true;
    return false;
}

/* Whether step ps carries every user tag of the selector, each with its value. */
static bool user_tags_match(const struct sq_metric_sel *s, const struct sq_plan_step *ps)
{
    for (size_t i = 0; i < s->ntags; i++) {
        if (builtin_tag(s->tags[i].key, s->tags[i].key_len))
            continue;
        bool ok = false;
        for (uint32_t t = 0; !ok && t < ps->ntags; t++)
            ok = span_eq(s->tags[i].key, s->tags[i].key_len, ps->tags[t].key) &&
                 span_eq(s->tags[i].value, s->tags[i].value_len, ps->tags[t].value);
        if (!ok)
            return false;
    }
    return true;
}

static bool step_matches(const struct sq_metric_sel *s, const struct sq_plan_step *ps)
{
    if (!user_tags_match(s, ps))
        return false;
    size_t l;
    const char *v = tag(s, "step", &l);
    if (v && !span_eq(v, l, ps->name))
        return false;
    v = tag(s, "group", &l);
    if (v && !sq_plan_in_group(ps->group, v, l))
        return false;
    v = tag(s, "method", &l);
    if (v && ps->kind == SQ_STEP_WS) /* a WebSocket step's method tag is WS */
        return span_eq(v, l, "WS");
    if (v && (ps->kind != SQ_STEP_REQUEST || !span_eq(v, l, ps->req.method)))
        return false;
    return ps->kind == SQ_STEP_REQUEST || ps->kind == SQ_STEP_WS;
}

static int status_filter(const struct sq_metric_sel *s)
{
    size_t l;
    const char *v = tag(s, "status", &l);
    if (!v)
        return -1;
    int n = 0;
    for (size_t i = 0; i < l && i < 4; i++)
        n = n * 10 + (v[i] >= '0' && v[i] <= '9' ? v[i] - '0' : 0);
    return n;
}

static double trend_value(const struct sq_hist *h, const struct sq_th_expr *e)
{
    if (!sq_hist_total(h))
        return 0;
    switch (e->agg) {
    case SQ_TH_AVG:
        return sq_hist_mean(h) / 1000.0;
    case SQ_TH_MIN:
        return (double)sq_hist_min(h) / 1000.0;
    case SQ_TH_MAX:
        return (double)sq_hist_max(h) / 1000.0;
    case SQ_TH_MED:
        return (double)sq_hist_percentile(h, 50) / 1000.0;
    case SQ_TH_PCT:
        return (double)sq_hist_percentile(h, e->pct) / 1000.0;
    default:
        return (double)sq_hist_total(h);
    }
}

/* What one threshold adds up across the run. */
struct acc {
    uint64_t num, den; /* counters and gauges: num; rates: num / den */
    struct sq_hist *h; /* trends */
    double sum;        /* the plan's own counters: their sum */
    double last;       /* ... gauges: the latest sample, */
    int64_t last_ns;   /* taken then (0: none) */
};

/* One step's (or setup's and teardown's) samples of a plan metric into the threshold's sum. */
static void mval_add(struct acc *a, const struct sq_step_mval *mv)
{
    a->sum += mv->sum;
    a->num += mv->nonzero;
    a->den += mv->n;
    if (mv->last_ns >= a->last_ns) {
        a->last = mv->last;
        a->last_ns = mv->last_ns;
    }
    sq_hist_merge(a->h, mv->h);
}

/* A threshold on one of the plan's own metrics: the samples of every metric: entry naming it,
 * in the steps its tags select. */
static void gather_custom(const struct sq_plan *p, const struct sq_result *r,
                          const struct sq_plan_threshold *th, struct acc *a)
{
    const struct sq_metric_sel *s = &th->sel;
    for (uint32_t i = 0; i < r->nscens && i < p->nscenarios; i++) {
        const struct sq_scen_result *sr = &r->scens[i];
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        if (!scen_matches(s, sc->name))
            continue;
        for (size_t k = 0; k < sr->nsteps && k < sc->nsteps; k++) {
            const struct sq_plan_step *ps = &sc->steps[k];
            const struct sq_step_stats *ss = &sr->steps[k];
            if (!ss->nmvals || !step_matches(s, ps))
                continue;
            for (uint32_t j = 0; j < ss->nmvals; j++) {
                const struct sq_step_mval *mv = &ss->mvals[j];
                if (sq_plan_slot_metric(ps, j) != (uint32_t)th->custom || !mv->n)
                    continue;
                mval_add(a, mv);
            }
        }
    }
    /* what setup: and teardown: added: no scenario, step, group or method of the run's */
    if (r->once && !s->ntags && (uint32_t)th->custom < r->once->nmvals) {
        const struct sq_step_mval *mv = &r->once->mvals[th->custom];
        if (mv->n) {
            mval_add(a, mv);
        }
    }
}

/* One expression's value on a plan's own metric. */
static double custom_value(enum sq_metric_kind k, const struct acc *a, const struct sq_th_expr *e,
                           double secs, bool *no_data)
{
    switch (k) {
    case SQ_MK_TREND:
        *no_data = sq_hist_total(a->h) == 0;
        /* avg exact, as k6's: the samples' sum over their count (the histogram's mean is its
         * buckets' midpoints: 5 read back as 5.002) */
        if (e->agg == SQ_TH_AVG)
            return a->den ? a->sum / (double)a->den : 0;
        return trend_value(a->h, e);
    case SQ_MK_RATE:
        *no_data = a->den == 0;
        return a->den ? (double)a->num / (double)a->den : 0;
    case SQ_MK_GAUGE:
        *no_data = a->den == 0;
        return a->last;
    case SQ_MK_COUNTER:
        break;
    }
    *no_data = false;
    return e->agg == SQ_TH_RATE ? a->sum / secs : a->sum;
}

/* The engine's phase behind a whole-run metric (its histogram is r->phase[k]), or -1. */
static int phase_of(enum sq_metric m)
{
    for (int k = 0; k < SQ_PHASE_COUNT; k++)
        if (strcmp(sq_phase_metric((enum sq_phase)k), sq_metric_name(m)) == 0)
            return k;
    return -1;
}

/* A step's share of a per-step metric (status: the status tag's value, -1 for none). */
static void add_step(enum sq_metric m, const struct sq_plan_step *ps,
                     const struct sq_step_stats *ss, int status, struct acc *a)
{
    uint64_t reqs = ss->reqs, failed = ss->failed;
    if (status >= 0) {
        reqs = 0;
        for (uint32_t b = 0; b < ss->nstatus; b++)
            if (ss->by_status[b].status == status)
                reqs += ss->by_status[b].n;
        failed = status >= 400 ? reqs : 0;
    }
    switch (m) {
    case SQ_METRIC_CHECKS:
        for (size_t c = 0; c < ps->nchecks; c++) {
            a->num += ss->check_pass[c];
            a->den += ss->check_pass[c] + ss->check_fail[c];
        }
        return;
    case SQ_METRIC_HTTP_REQ_DURATION:
        if (status < 0) {
            sq_hist_merge(a->h, ss->dur);
        } else {
            for (uint32_t b = 0; b < ss->nstatus; b++)
                if (ss->by_status[b].status == status)
                    sq_hist_merge(a->h, ss->by_status[b].h);
        }
        return;
    case SQ_METRIC_HTTP_REQS:
        a->num += reqs;
        return;
    case SQ_METRIC_HTTP_REQ_FAILED:
        a->num += failed;
        a->den += reqs;
        return;
    case SQ_METRIC_BATCH_DURATION: /* kept by a batch's first request; no status of its own */
        if (ss->batch_dur && status < 0)
            sq_hist_merge(a->h, ss->batch_dur);
        return;
        SQ_METRIC_PHASES(SQ_METRIC_CASE)
    case SQ_METRIC_GROUP_DURATION:
    case SQ_METRIC_ITERATIONS:
    case SQ_METRIC_ITERATION_DURATION:
    case SQ_METRIC_DROPPED_ITERATIONS:
    case SQ_METRIC_DATA_SENT:
    case SQ_METRIC_DATA_RECEIVED:
    case SQ_METRIC_VUS:
    case SQ_METRIC_VUS_MAX:
    case SQ_METRIC__COUNT:
        return; /* not kept per step */
    }
}

/* A scenario's share of a per-scenario metric. */
static void add_scenario(enum sq_metric m, const struct sq_scen_result *sr, struct acc *a)
{
    switch (m) {
    case SQ_METRIC_ITERATIONS:
        a->num += sr->c.iterations;
        return;
    case SQ_METRIC_DROPPED_ITERATIONS:
        a->num += sr->c.dropped;
        return;
    case SQ_METRIC_DATA_SENT:
        a->num += sr->c.bytes_sent;
        return;
    case SQ_METRIC_DATA_RECEIVED:
        a->num += sr->c.bytes_received;
        return;
    case SQ_METRIC_VUS:
    case SQ_METRIC_VUS_MAX:
        a->num += sr->vus_max;
        return;
    case SQ_METRIC_ITERATION_DURATION:
        sq_hist_merge(a->h, sr->iter_dur);
        return;
    case SQ_METRIC_HTTP_REQS:
    case SQ_METRIC_HTTP_REQ_DURATION:
    case SQ_METRIC_HTTP_REQ_FAILED:
    case SQ_METRIC_CHECKS:
    case SQ_METRIC_BATCH_DURATION:
    case SQ_METRIC_GROUP_DURATION:
        SQ_METRIC_PHASES(SQ_METRIC_CASE)
    case SQ_METRIC__COUNT:
        return; /* kept per step, per group, or for the whole run */
    }
}

/* group_duration: the durations of every group of the selected scenarios, or with a group tag
 * of the group of that path alone (k6 tags a group's duration with its own group only). */
static void gather_groups(const struct sq_plan *p, const struct sq_result *r,
                          const struct sq_metric_sel *s, struct acc *a)
{
    size_t l = 0;
    const char *want = tag(s, "group", &l);
    for (uint32_t i = 0; i < r->nscens && i < p->nscenarios; i++) {
        const struct sq_scen_result *sr = &r->scens[i];
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        if (!scen_matches(s, sc->name))
            continue;
        for (uint32_t g = 0; g < sr->ngroups && g < sc->ngroups; g++)
            if (!want || span_eq(want, l, sc->groups[g]))
                sq_hist_merge(a->h, sr->group_dur[g]);
    }
}

/* What a threshold's selector adds up on a finished run, once for all its expressions: a->h
 * must be empty. The request durations of scenarios selected without a step, method or status
 * tag come from the scenario's own histogram (its steps' durations, merged once by the run), so
 * a plan of many steps and thresholds does not merge every step's histogram per threshold. */
static void gather(const struct sq_plan *p, const struct sq_result *r,
                   const struct sq_plan_threshold *th, struct acc *a)
{
    const struct sq_metric_sel *s = &th->sel;
    const enum sq_metric m = th->metric;
    switch (sq_metric_scope(m)) {
    case SQ_MS_RUN: {
        int k = phase_of(m);
        if (k >= 0 && r->phase[k] && s->ntags == 0)
            sq_hist_merge(a->h, r->phase[k]);
        return;
    }
    case SQ_MS_GROUP:
        gather_groups(p, r, s, a);
        return;
    case SQ_MS_SCENARIO:
    case SQ_MS_STEP:
        break;
    }
    size_t l;
    const bool by_step = tag(s, "step", &l) || tag(s, "method", &l) || tag(s, "status", &l) ||
                         tag(s, "group", &l) || has_user_tag(s);
    const int want_status = status_filter(s);
    for (uint32_t i = 0; i < r->nscens && i < p->nscenarios; i++) {
        const struct sq_scen_result *sr = &r->scens[i];
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        if (!scen_matches(s, sc->name))
            continue;
        add_scenario(m, sr, a);
        if (sq_metric_scope(m) != SQ_MS_STEP)
            continue;
        if (m == SQ_METRIC_HTTP_REQ_DURATION && !by_step) {
            sq_hist_merge(a->h, sr->latency);
            continue;
        }
        for (size_t k = 0; k < sr->nsteps && k < sc->nsteps; k++)
            if (step_matches(s, &sc->steps[k]))
                add_step(m, &sc->steps[k], &sr->steps[k], want_status, a);
    }
}

/* One expression's value from what its threshold gathered. */
static double value_of(enum sq_metric m, const struct acc *a, const struct sq_th_expr *e,
                       double secs, bool *no_data)
{
    switch (sq_metric_kind(m)) {
    case SQ_MK_TREND:
        *no_data = sq_hist_total(a->h) == 0;
        return trend_value(a->h, e);
    case SQ_MK_RATE:
        *no_data = a->den == 0;
        return a->den ? (double)a->num / (double)a->den : 0;
    case SQ_MK_COUNTER:
    case SQ_MK_GAUGE:
        break;
    }
    *no_data = false;
    return e->agg == SQ_TH_RATE ? (double)a->num / secs : (double)a->num;
}

int sq_thresholds_eval(const struct sq_plan *p, const struct sq_result *r,
                       struct sq_th_verdicts *out)
{
    memset(out, 0, sizeof(*out));
    size_t n = 0;
    for (size_t i = 0; i < p->nthresholds; i++)
        n += p->thresholds[i].nexprs;
    out->v = calloc(n ? n : 1, sizeof(*out->v));
    if (!out->v)
        return -ENOMEM;
    const double secs = r->duration_ns > 0 ? (double)r->duration_ns / 1e9 : 1;
    for (size_t i = 0; i < p->nthresholds; i++) {
        const struct sq_plan_threshold *th = &p->thresholds[i];
        struct acc a = {0};
        int rc = sq_latency_hist_new(&a.h);
        if (rc < 0)
            return rc;
        const bool custom = th->custom >= 0 && (size_t)th->custom < p->nmetrics;
        if (custom)
            gather_custom(p, r, th, &a);
        else
            gather(p, r, th, &a);
        for (size_t k = 0; k < th->nexprs; k++) {
            struct sq_th_verdict *v = &out->v[out->n++];
            v->th = th;
            v->expr = &th->exprs[k];
            v->value =
                custom ? custom_value(p->metrics[th->custom].kind, &a, v->expr, secs, &v->no_data)
                       : value_of(th->metric, &a, v->expr, secs, &v->no_data);
            v->ok = sq_th_expr_holds(v->expr, v->value);
            if (!v->ok)
                out->failed = true;
        }
        sq_hist_free(a.h);
    }
    return 0;
}

void sq_th_verdicts_dispose(struct sq_th_verdicts *v)
{
    free(v->v);
    memset(v, 0, sizeof(*v));
}

int sq_thresholds_check(const struct sq_plan *p, char *err, size_t len)
{
    for (size_t i = 0; i < p->nthresholds; i++) {
        const struct sq_plan_threshold *th = &p->thresholds[i];
        const struct sq_metric_sel *s = &th->sel;
        if (!s->ntags)
            continue;
        const char *why = NULL;
        size_t l;
        if (th->custom >= 0) {
            if (tag(s, "status", &l))
                why = "the plan's own metrics are kept per step, not per status: the tags they "
                      "take are scenario, step, group and method";
        } else
            switch (sq_metric_scope(th->metric)) {
            case SQ_MS_RUN:
                why = "phase timings are kept for the whole run: this metric takes no tags";
                break;
            case SQ_MS_SCENARIO:
                if (tag(s, "step", &l) || tag(s, "method", &l) || tag(s, "status", &l) ||
                    tag(s, "group", &l) || has_user_tag(s))
                    why = "this metric is kept per scenario: the only tag it takes is scenario";
                break;
            case SQ_MS_GROUP:
                if (tag(s, "step", &l) || tag(s, "method", &l) || tag(s, "status", &l) ||
                    has_user_tag(s))
                    why = "group_duration is kept per group: the tags it takes are scenario and "
                          "group";
                break;
            case SQ_MS_STEP:
                if (th->metric == SQ_METRIC_BATCH_DURATION && tag(s, "status", &l))
                    why = "batch_duration is kept per batch, not per status: the tags it takes "
                          "are scenario, step (the batch's first request), group and method";
                break;
            }
        if (why) {
            snprintf(err, len, "%s:%u:%u: thresholds: '%s': %s", p->file, th->loc.line, th->loc.col,
                     th->selector, why);
            return -SQ_EUSAGE;
        }
    }
    return 0;
}

/* A counter's figure for an expression: its count, or its rate per second of secs. */
static double count_or_rate(const struct sq_th_expr *e, uint64_t n, double secs)
{
    return e->agg == SQ_TH_RATE ? (double)n / secs : (double)n;
}

/* e's value on the live totals t: false when it is not kept live (judged at the end), or, for
 * checks, when nothing was judged yet. */
static bool live_value(const struct sq_plan_threshold *th, const struct sq_th_expr *e,
                       const struct sq_live_totals *t, double *out)
{
    double v = 0;
    double secs = t->elapsed_s > 0 ? t->elapsed_s : 1;
    if (th->sel.ntags > 0 || th->custom >= 0) /* the plan's own metrics: judged at the end */
        return false;
    switch (th->metric) {
    case SQ_METRIC_HTTP_REQ_DURATION:
        v = trend_value(t->dur, e);
        break;
    case SQ_METRIC_HTTP_REQ_FAILED:
        v = t->reqs ? (double)t->http_failed / (double)t->reqs : 0;
        break;
    case SQ_METRIC_CHECKS:
        if (t->checks_passed + t->checks_failed == 0)
            return false; /* nothing to judge yet */
        v = (double)t->checks_passed / (double)(t->checks_passed + t->checks_failed);
        break;
    case SQ_METRIC_HTTP_REQS:
        v = count_or_rate(e, t->reqs, secs);
        break;
    case SQ_METRIC_ITERATIONS:
        v = count_or_rate(e, t->iterations, secs);
        break;
    case SQ_METRIC_DROPPED_ITERATIONS:
        v = count_or_rate(e, t->dropped, secs);
        break;
    case SQ_METRIC_DATA_SENT:
        v = count_or_rate(e, t->bytes_sent, secs);
        break;
    case SQ_METRIC_DATA_RECEIVED:
        v = count_or_rate(e, t->bytes_received, secs);
        break;
        SQ_METRIC_PHASES(SQ_METRIC_CASE)
    case SQ_METRIC_ITERATION_DURATION:
    case SQ_METRIC_VUS:
    case SQ_METRIC_VUS_MAX:
    case SQ_METRIC_GROUP_DURATION:
    case SQ_METRIC_BATCH_DURATION:
    case SQ_METRIC__COUNT:
        return false; /* not kept live: judged at the end */
    }
    *out = v;
    return true;
}

bool sq_thresholds_should_abort(const struct sq_plan *p, const struct sq_live_totals *t, char *why,
                                size_t len)
{
    for (size_t i = 0; i < p->nthresholds; i++) {
        const struct sq_plan_threshold *th = &p->thresholds[i];
        if (!th->abort_on_fail || t->elapsed_s * 1e9 < (double)th->delay_abort_eval_ns)
            continue;
        for (size_t k = 0; k < th->nexprs; k++) {
            const struct sq_th_expr *e = &th->exprs[k];
            double v = 0;
            if (!live_value(th, e, t, &v))
                continue;
            if (!sq_th_expr_holds(e, v)) {
                snprintf(why, len, "threshold %s: %s failed (value %.4g) with abortOnFail",
                         th->selector, e->text, v);
                return true;
            }
        }
    }
    return false;
}

size_t sq_thresholds_live(const struct sq_plan *p, const struct sq_live_totals *t,
                          struct sq_th_live *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nthresholds; i++) {
        const struct sq_plan_threshold *th = &p->thresholds[i];
        for (size_t k = 0; k < th->nexprs && n < max; k++, n++) {
            struct sq_th_live *o = &out[n];
            *o = (struct sq_th_live){.th = th, .expr = &th->exprs[k]};
            o->live = live_value(th, o->expr, t, &o->value);
            o->ok = !o->live || sq_th_expr_holds(o->expr, o->value);
        }
    }
    return n;
}

/* ---- the run's own verdict ---- */

/* Over every step of every scenario: the step ends (reqs) and those that failed (errors). */
static void step_totals(const struct sq_result *r, uint64_t *ends, uint64_t *errors)
{
    *ends = *errors = 0;
    for (uint32_t i = 0; i < r->nscens; i++)
        for (size_t k = 0; k < r->scens[i].nsteps; k++) {
            *ends += r->scens[i].steps[k].reqs;
            *errors += r->scens[i].steps[k].errors;
        }
}

bool sq_result_succeeded(const struct sq_result *r)
{
    if (r->c.completed)
        return true;
    if (r->c.sent == 0 && r->c.bus.connacks > 0) /* MQTT --idle: it only connects and holds */
        return true;
    uint64_t ends, errors;
    step_totals(r, &ends, &errors);
    if (ends > errors) /* a step that completed: only publish / subscribe ones are left */
        return true;
    return ends == 0 && r->c.sent == 0 && r->c.iterations > 0;
}

uint64_t sq_result_failed_units(const struct sq_result *r)
{
    if (!r->nscens)
        return r->c.failed;
    uint64_t ends, errors;
    step_totals(r, &ends, &errors);
    /* every request of a plan is a step's; a request that failed is one step error */
    return errors > r->c.failed ? errors : r->c.failed;
}
