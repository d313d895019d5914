/* engine/verdict.c - see verdict.h. */
#include "engine/verdict.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/flow.h"
#include "stats/hist.h"

enum mtype { M_COUNTER, M_RATE, M_TREND, M_GAUGE, M_UNKNOWN };

static bool is(const struct sq_metric_sel *s, const char *name)
{
    return s->metric_len == strlen(name) && memcmp(s->metric, name, s->metric_len) == 0;
}

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

static bool step_matches(const struct sq_metric_sel *s, const struct sq_plan_step *ps)
{
    size_t l;
    const char *v = tag(s, "step", &l);
    if (v && !span_eq(v, l, ps->name))
        return false;
    v = tag(s, "method", &l);
    if (v && (ps->kind != SQ_STEP_REQUEST || !span_eq(v, l, ps->req.method)))
        return false;
    return ps->kind == SQ_STEP_REQUEST;
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

/* One threshold expression's value on a finished run. */
static int value_of(const struct sq_plan *p, const struct sq_result *r,
                    const struct sq_plan_threshold *th, const struct sq_th_expr *e, double *out,
                    bool *no_data)
{
    const struct sq_metric_sel *s = &th->sel;
    double secs = r->duration_ns > 0 ? (double)r->duration_ns / 1e9 : 1;
    int want_status = status_filter(s);
    struct sq_hist *h = NULL;
    int rc = sq_latency_hist_new(&h);
    if (rc < 0)
        return rc;
    uint64_t num = 0, den = 0;
    bool trend = false;
    for (uint32_t i = 0; i < r->nscens && i < p->nscenarios; i++) {
        const struct sq_scen_result *sr = &r->scens[i];
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        if (!scen_matches(s, sc->name))
            continue;
        if (is(s, "iterations") || is(s, "dropped_iterations") || is(s, "iteration_duration") ||
            is(s, "data_sent") || is(s, "data_received") || is(s, "vus") || is(s, "vus_max")) {
            if (is(s, "iterations"))
                num += sr->c.iterations;
            else if (is(s, "dropped_iterations"))
                num += sr->c.dropped;
            else if (is(s, "data_sent"))
                num += sr->c.bytes_sent;
            else if (is(s, "data_received"))
                num += sr->c.bytes_received;
            else if (is(s, "vus") || is(s, "vus_max"))
                num += sr->vus_max;
            else {
                trend = true;
                sq_hist_merge(h, sr->iter_dur);
            }
            continue;
        }
        for (size_t k = 0; k < sr->nsteps && k < sc->nsteps; k++) {
            const struct sq_plan_step *ps = &sc->steps[k];
            const struct sq_step_stats *ss = &sr->steps[k];
            if (!step_matches(s, ps))
                continue;
            if (is(s, "checks")) {
                for (size_t c = 0; c < ps->nchecks; c++) {
                    num += ss->check_pass[c];
                    den += ss->check_pass[c] + ss->check_fail[c];
                }
                continue;
            }
            if (is(s, "http_req_duration")) {
                trend = true;
                if (want_status < 0) {
                    sq_hist_merge(h, ss->dur);
                } else {
                    for (uint32_t b = 0; b < ss->nstatus; b++)
                        if (ss->by_status[b].status == want_status)
                            sq_hist_merge(h, ss->by_status[b].h);
                }
                continue;
            }
            uint64_t reqs = ss->reqs, failed = ss->failed;
            if (want_status >= 0) {
                reqs = 0;
                for (uint32_t b = 0; b < ss->nstatus; b++)
                    if (ss->by_status[b].status == want_status)
                        reqs += ss->by_status[b].n;
                failed = want_status >= 400 ? reqs : 0;
            }
            if (is(s, "http_reqs")) {
                num += reqs;
            } else if (is(s, "http_req_failed")) {
                num += failed;
                den += reqs;
            } else {
                trend = true; /* phase metrics: taken from the run's phase histograms below */
            }
        }
    }
    for (int k = 0; k < SQ_PHASE_COUNT; k++) {
        if (is(s, sq_phase_metric((enum sq_phase)k))) {
            trend = true;
            if (r->phase[k] && s->ntags == 0)
                sq_hist_merge(h, r->phase[k]);
        }
    }
    bool rate_metric = is(s, "http_req_failed") || is(s, "checks");
    if (trend) {
        *no_data = sq_hist_total(h) == 0;
        *out = trend_value(h, e);
    } else if (rate_metric) {
        *no_data = den == 0;
        *out = den ? (double)num / (double)den : 0;
    } else {
        *no_data = false;
        *out = e->agg == SQ_TH_RATE ? (double)num / secs : (double)num;
    }
    sq_hist_free(h);
    return 0;
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
    for (size_t i = 0; i < p->nthresholds; i++) {
        const struct sq_plan_threshold *th = &p->thresholds[i];
        for (size_t k = 0; k < th->nexprs; k++) {
            struct sq_th_verdict *v = &out->v[out->n++];
            v->th = th;
            v->expr = &th->exprs[k];
            int rc = value_of(p, r, th, v->expr, &v->value, &v->no_data);
            if (rc < 0)
                return rc;
            v->ok = sq_th_expr_holds(v->expr, v->value);
            if (!v->ok)
                out->failed = true;
        }
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
    static const char *const run_level[] = {
        "iterations", "iteration_duration", "dropped_iterations",
        "data_sent",  "data_received",      "vus",
        "vus_max"};
    for (size_t i = 0; i < p->nthresholds; i++) {
        const struct sq_plan_threshold *th = &p->thresholds[i];
        const struct sq_metric_sel *s = &th->sel;
        if (!s->ntags)
            continue;
        const char *why = NULL;
        for (int k = 0; k < SQ_PHASE_COUNT && !why; k++)
            if (is(s, sq_phase_metric((enum sq_phase)k)))
                why = "phase timings are kept for the whole run: this metric takes no tags";
        size_t l;
        for (size_t k = 0; k < SQ_ARRAY_LEN(run_level) && !why; k++)
            if (is(s, run_level[k]) &&
                (tag(s, "step", &l) || tag(s, "method", &l) || tag(s, "status", &l)))
                why = "this metric is kept per scenario: the only tag it takes is scenario";
        if (why) {
            snprintf(err, len, "%s:%u:%u: thresholds: '%s': %s", p->file, th->loc.line, th->loc.col,
                     th->selector, why);
            return -SQ_EUSAGE;
        }
    }
    return 0;
}

bool sq_thresholds_should_abort(const struct sq_plan *p, const struct sq_live_totals *t, char *why,
                                size_t len)
{
    for (size_t i = 0; i < p->nthresholds; i++) {
        const struct sq_plan_threshold *th = &p->thresholds[i];
        const struct sq_metric_sel *s = &th->sel;
        if (!th->abort_on_fail || s->ntags > 0 ||
            t->elapsed_s * 1e9 < (double)th->delay_abort_eval_ns)
            continue;
        for (size_t k = 0; k < th->nexprs; k++) {
            const struct sq_th_expr *e = &th->exprs[k];
            double v;
            double secs = t->elapsed_s > 0 ? t->elapsed_s : 1;
            if (is(s, "http_req_duration"))
                v = trend_value(t->dur, e);
            else if (is(s, "http_req_failed"))
                v = t->reqs ? (double)t->http_failed / (double)t->reqs : 0;
            else if (is(s, "checks") && t->checks_passed + t->checks_failed)
                v = (double)t->checks_passed / (double)(t->checks_passed + t->checks_failed);
            else if (is(s, "http_reqs"))
                v = e->agg == SQ_TH_RATE ? (double)t->reqs / secs : (double)t->reqs;
            else if (is(s, "iterations"))
                v = e->agg == SQ_TH_RATE ? (double)t->iterations / secs : (double)t->iterations;
            else if (is(s, "dropped_iterations"))
                v = e->agg == SQ_TH_RATE ? (double)t->dropped / secs : (double)t->dropped;
            else if (is(s, "data_sent"))
                v = e->agg == SQ_TH_RATE ? (double)t->bytes_sent / secs : (double)t->bytes_sent;
            else if (is(s, "data_received"))
                v = e->agg == SQ_TH_RATE ? (double)t->bytes_received / secs
                                         : (double)t->bytes_received;
            else
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
