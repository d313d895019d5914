/* output/plan_json.c - the plan-run sections of the result document: scenarios, steps, checks,
 * thresholds and k6-named metrics (docs/json-schema.md). The names come from the plan; every
 * figure from the merged result. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "result/verdict.h"
#include "output/json.h"
#include "output/plan_json.h"
#include "plan/metrics.h"
#include "stats/hist.h"

static double ms(int64_t us)
{
    return (double)us / 1000.0;
}

/* k6's trend figures, in ms. */
static json_t *trend(const struct sq_hist *h)
{
    if (!sq_hist_total(h))
        return json_pack("{s:I}", "count", (json_int_t)0);
    return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "count",
                     (json_int_t)sq_hist_total(h), "avg", sq_hist_mean(h) / 1000.0, "min",
                     ms(sq_hist_min(h)), "med", ms(sq_hist_percentile(h, 50)), "max",
                     ms(sq_hist_max(h)), "p(90)", ms(sq_hist_percentile(h, 90)), "p(95)",
                     ms(sq_hist_percentile(h, 95)), "p(99)", ms(sq_hist_percentile(h, 99)));
}

static json_t *counter(uint64_t n, double secs)
{
    return json_pack("{s:I, s:f}", "count", (json_int_t)n, "rate", secs > 0 ? (double)n / secs : 0);
}

static json_t *rate(uint64_t passes, uint64_t total)
{
    return json_pack("{s:f, s:I, s:I}", "rate", total ? (double)passes / (double)total : 0,
                     "passes", (json_int_t)passes, "fails", (json_int_t)(total - passes));
}

/* One step's responses and latency per second, as parallel arrays. */
static json_t *step_series(const struct sq_step_series *ss)
{
    json_t *t = json_array(), *n = json_array(), *p50 = json_array(), *p90 = json_array(),
           *p99 = json_array(), *mx = json_array();
    for (size_t i = 0; ss && i < ss->n; i++) {
        const struct sq_step_point *p = &ss->v[i];
        json_array_append_new(t, json_real(p->t_s));
        json_array_append_new(n, json_integer((json_int_t)p->responses));
        json_array_append_new(p50, json_integer(p->p50_us));
        json_array_append_new(p90, json_integer(p->p90_us));
        json_array_append_new(p99, json_integer(p->p99_us));
        json_array_append_new(mx, json_integer(p->max_us));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "t_s", t, "responses", n, "p50_us", p50,
                     "p90_us", p90, "p99_us", p99, "max_us", mx);
}

/* What the scenarios add up to, and the arrays they fill, as the sections are built. */
struct plan_acc {
    const struct sq_result *r;
    struct sq_hist *all, *iters; /* every request's duration, every iteration's */
    struct sq_hist *gdur, *bdur; /* every group's and batch's duration (NULL: none in the plan) */
    uint64_t reqs, failed, cpass, ctotal, vus;
    struct sq_counters tot;
    json_t *scen, *steps, *checks;
};

/* Step k of scenario sc (its figures ss; its series at index g of every scenario's steps): its
 * entry in "steps" and one in "checks" per check. */
static void add_step(struct plan_acc *a, const struct sq_plan_scenario *sc, size_t k,
                     const struct sq_step_stats *ss, size_t g)
{
    const struct sq_plan_step *ps = &sc->steps[k];
    const struct sq_result *r = a->r;
    bool ws = ps->kind == SQ_STEP_WS;
    if (ps->kind == SQ_STEP_REQUEST || ws) { /* publish and subscribe are not requests */
        a->reqs += ss->reqs;
        a->failed += ss->failed;
    }
    json_t *st = json_object();
    for (uint32_t b = 0; b < ss->nstatus; b++) {
        char code[8];
        snprintf(code, sizeof(code), "%u", ss->by_status[b].status);
        json_object_set_new(st, code, json_integer((json_int_t)ss->by_status[b].n));
    }
    json_array_append_new(
        a->steps,
        json_pack("{s:s, s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:o, s:o}", "scenario", sc->name,
                  "step", ps->name, "method", ws ? "WS" : ps->req.method, "url",
                  ps->req.url_src ? json_string(ps->req.url_src) : json_null(), "requests",
                  (json_int_t)ss->reqs, "failed", (json_int_t)ss->failed, "errors",
                  (json_int_t)ss->errors, "extract_failed", (json_int_t)ss->extract_fail, "status",
                  st, "duration_ms", trend(ss->dur)));
    json_t *last = json_array_get(a->steps, json_array_size(a->steps) - 1);
    if (r->step_series && g < r->nstep_series)
        json_object_set_new(last, "series", step_series(&r->step_series[g]));
    if (ss->batch_dur) { /* a batch's first request: the batch's own duration */
        json_object_set_new(last, "batch_duration_ms", trend(ss->batch_dur));
        if (a->bdur || sq_latency_hist_new(&a->bdur) == 0)
            sq_hist_merge(a->bdur, ss->batch_dur);
    }
    if (ps->group)
        json_object_set_new(last, "group", json_string(ps->group));
    if (ps->ntags) {
        json_t *tags = json_object();
        for (uint32_t t = 0; tags && t < ps->ntags; t++)
            json_object_set_new(tags, ps->tags[t].key, json_string(ps->tags[t].value));
        json_object_set_new(last, "tags", tags);
    }
    if (ws) { /* which WebSocket operation (docs/json-schema.md) */
        static const char *const ops[] = {"connect", "send", "receive", "close"};
        json_object_set_new(last, "ws", json_string(ops[ps->ws.op]));
    }
    for (size_t c = 0; c < ps->nchecks; c++) {
        a->cpass += ss->check_pass[c];
        a->ctotal += ss->check_pass[c] + ss->check_fail[c];
        json_array_append_new(a->checks,
                              json_pack("{s:s, s:s, s:s, s:I, s:I}", "scenario", sc->name, "step",
                                        ps->name, "check", ps->checks[c].name, "passed",
                                        (json_int_t)ss->check_pass[c], "failed",
                                        (json_int_t)ss->check_fail[c]));
    }
}

/* Scenario i (its first step at base among every scenario's): its entry in "scenarios", its
 * steps (think steps are not listed), its part of the totals. */
static void add_scenario(struct plan_acc *a, const struct sq_plan *p, uint32_t i, size_t base)
{
    const struct sq_scen_result *sr = &a->r->scens[i];
    const struct sq_plan_scenario *sc = &p->scenarios[i];
    sq_hist_merge(a->all, sr->latency);
    sq_hist_merge(a->iters, sr->iter_dur);
    a->vus += sr->vus_max;
    for (uint32_t g = 0; g < sr->ngroups; g++)
        if (a->gdur || sq_latency_hist_new(&a->gdur) == 0)
            sq_hist_merge(a->gdur, sr->group_dur[g]);
    a->tot.iterations += sr->c.iterations;
    a->tot.dropped += sr->c.dropped;
    a->tot.bytes_sent += sr->c.bytes_sent;
    a->tot.bytes_received += sr->c.bytes_received;
    json_array_append_new(
        a->scen,
        json_pack("{s:s, s:s, s:I, s:f, s:I, s:I, s:I, s:o}", "name", sc->name, "executor",
                  sq_exec_name(sc->exec.kind), "vus_max", (json_int_t)sr->vus_max, "start_s",
                  (double)sc->start_ns / 1e9, "iterations", (json_int_t)sr->c.iterations,
                  "interrupted", (json_int_t)sr->interrupted, "dropped", (json_int_t)sr->c.dropped,
                  "iteration_duration_ms", trend(sr->iter_dur)));
    for (size_t k = 0; k < sr->nsteps && k < sc->nsteps; k++)
        if (sc->steps[k].kind != SQ_STEP_THINK)
            add_step(a, sc, k, &sr->steps[k], base + k);
}

/* Whether a step of group path g belongs to group name (itself or a group inside it). */
static bool in_group(const char *g, const char *name)
{
    return sq_plan_in_group(g, name, strlen(name));
}

/* One "groups" entry per group of scenario i (each enclosing group too), in order of first
 * appearance: its steps' figures added up, their durations merged. */
static int add_groups(json_t *groups, const struct sq_plan_scenario *sc,
                      const struct sq_scen_result *sr)
{
    size_t n = sr->nsteps < sc->nsteps ? sr->nsteps : sc->nsteps;
    for (size_t k = 0; k < n; k++) {
        const char *g = sc->steps[k].group;
        /* each prefix of g ending at "::" or at its end, first seen at step k */
        for (size_t end = 0; g && end <= strlen(g); end++) {
            if (g[end] != '\0' && !(g[end] == ':' && g[end + 1] == ':'))
                continue;
            char name[256];
            snprintf(name, sizeof(name), "%.*s", (int)end, g);
            bool seen = false;
            for (size_t j = 0; j < k && !seen; j++)
                seen = in_group(sc->steps[j].group, name);
            if (seen)
                continue;
            struct sq_hist *h = NULL;
            if (sq_latency_hist_new(&h) < 0)
                return -ENOMEM;
            uint64_t reqs = 0, failed = 0, errors = 0, cpass = 0, cfail = 0;
            size_t nsteps = 0;
            for (size_t j = k; j < n; j++) {
                if (!in_group(sc->steps[j].group, name))
                    continue;
                const struct sq_step_stats *ss = &sr->steps[j];
                nsteps++;
                reqs += ss->reqs;
                failed += ss->failed;
                errors += ss->errors;
                sq_hist_merge(h, ss->dur);
                for (uint32_t c = 0; c < ss->nchecks; c++) {
                    cpass += ss->check_pass[c];
                    cfail += ss->check_fail[c];
                }
            }
            json_t *e = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "scenario",
                                  sc->name, "group", name, "steps", (json_int_t)nsteps, "requests",
                                  (json_int_t)reqs, "failed", (json_int_t)failed, "errors",
                                  (json_int_t)errors, "checks_passed", (json_int_t)cpass,
                                  "checks_failed", (json_int_t)cfail, "duration_ms", trend(h));
            sq_hist_free(h);
            for (uint32_t gi = 0; e && gi < sr->ngroups && gi < sc->ngroups; gi++)
                if (strcmp(sc->groups[gi], name) == 0) /* the group's own wall time */
                    json_object_set_new(e, "group_duration_ms", trend(sr->group_dur[gi]));
            json_array_append_new(groups, e);
        }
    }
    return 0;
}

/* The thresholds' verdicts, one entry each. */
static json_t *thresholds_json(const struct sq_th_verdicts *v)
{
    json_t *ths = json_array();
    for (size_t i = 0; ths && v && i < v->n; i++) {
        const struct sq_th_verdict *t = &v->v[i];
        json_array_append_new(ths, json_pack("{s:s, s:s, s:f, s:b, s:b, s:b}", "metric",
                                             t->th->selector, "expression", t->expr->text, "value",
                                             t->value, "ok", t->ok, "no_data", t->no_data,
                                             "abort_on_fail", t->th->abort_on_fail));
    }
    return ths;
}

/* The k6 metrics under the registry's names (plan/metrics.h), in its order. */
static json_t *metrics_json(const struct plan_acc *a, double secs)
{
    json_t *metrics = json_object();
    for (int m = 0; metrics && m < SQ_METRIC__COUNT; m++) {
        json_t *val = NULL;
        switch ((enum sq_metric)m) {
        case SQ_METRIC_HTTP_REQS:
            val = counter(a->reqs, secs);
            break;
        case SQ_METRIC_HTTP_REQ_DURATION:
            val = trend(a->all);
            break;
        case SQ_METRIC_HTTP_REQ_FAILED:
            val = rate(a->failed, a->reqs);
            break;
        case SQ_METRIC_ITERATIONS:
            val = counter(a->tot.iterations, secs);
            break;
        case SQ_METRIC_ITERATION_DURATION:
            val = trend(a->iters);
            break;
        case SQ_METRIC_DROPPED_ITERATIONS:
            val = counter(a->tot.dropped, secs);
            break;
        case SQ_METRIC_CHECKS:
            val = rate(a->cpass, a->ctotal);
            break;
        case SQ_METRIC_DATA_SENT:
            val = counter(a->tot.bytes_sent, secs);
            break;
        case SQ_METRIC_DATA_RECEIVED:
            val = counter(a->tot.bytes_received, secs);
            break;
        case SQ_METRIC_VUS_MAX:
            val = json_pack("{s:I}", "value", (json_int_t)a->vus);
            break;
        case SQ_METRIC_VUS: /* a live gauge: the document has vus_max */
            break;
        case SQ_METRIC_GROUP_DURATION: /* only for a plan with groups */
            if (a->gdur)
                val = trend(a->gdur);
            break;
        case SQ_METRIC_BATCH_DURATION: /* only for a plan with batches */
            if (a->bdur)
                val = trend(a->bdur);
            break;
            SQ_METRIC_PHASES(SQ_METRIC_CASE) /* under "phases" (output/json.c) */
        case SQ_METRIC__COUNT:
            break;
        }
        if (val)
            json_object_set_new(metrics, sq_metric_name((enum sq_metric)m), val);
    }
    return metrics;
}

/* How many step figures custom_metrics_json reads for scenario i: its steps, or for i past the
 * last scenario the one slot set of setup: and teardown: (result.h, sq_result.once). */
static size_t once_or_steps(const struct sq_plan *p, const struct sq_result *r, uint32_t i)
{
    if (i < r->nscens && i < p->nscenarios)
        return r->scens[i].nsteps < p->scenarios[i].nsteps ? r->scens[i].nsteps
                                                           : p->scenarios[i].nsteps;
    return i == r->nscens && r->once ? 1 : 0;
}

/* The plan's own metrics (metrics:), each from the samples of every metric: entry naming it. */
static json_t *custom_metrics_json(const struct sq_plan *p, const struct sq_result *r, double secs)
{
    json_t *out = json_object();
    for (size_t m = 0; out && m < p->nmetrics; m++) {
        uint64_t n = 0, nonzero = 0, bad = 0;
        double sum = 0, last = 0;
        int64_t last_ns = 0;
        struct sq_hist *h = NULL;
        if (sq_latency_hist_new(&h) < 0) {
            json_decref(out);
            return NULL;
        }
        for (uint32_t i = 0; i <= r->nscens && i <= p->nscenarios; i++)
            for (size_t k = 0; k < once_or_steps(p, r, i); k++) {
                /* the scenarios' steps, then (i == nscens) setup: and teardown:'s samples */
                const struct sq_step_stats *ss = i < r->nscens ? &r->scens[i].steps[k] : r->once;
                for (uint32_t j = 0; j < ss->nmvals; j++) {
                    const struct sq_step_mval *mv = &ss->mvals[j];
                    if ((i < r->nscens ? sq_plan_slot_metric(&p->scenarios[i].steps[k], j) : j) !=
                        m)
                        continue;
                    n += mv->n;
                    nonzero += mv->nonzero;
                    bad += mv->bad;
                    sum += mv->sum;
                    if (mv->n && mv->last_ns >= last_ns) {
                        last = mv->last;
                        last_ns = mv->last_ns;
                    }
                    sq_hist_merge(h, mv->h);
                }
            }
        json_t *val = NULL;
        switch (p->metrics[m].kind) {
        case SQ_MK_COUNTER:
            val = json_pack("{s:s, s:f, s:f}", "kind", "counter", "count", sum, "rate",
                            secs > 0 ? sum / secs : 0);
            break;
        case SQ_MK_RATE:
            val = rate(nonzero, n);
            if (val)
                json_object_set_new(val, "kind", json_string("rate"));
            break;
        case SQ_MK_GAUGE:
            val = json_pack("{s:s, s:o}", "kind", "gauge", "value",
                            n ? json_real(last) : json_null());
            break;
        case SQ_MK_TREND:
            val = trend(h);
            if (val)
                json_object_set_new(val, "kind", json_string("trend"));
            /* avg exact, as k6's (and as thresholds judge it): the samples' sum over their
             * count, not the histogram's bucket midpoints */
            if (val && n && sq_hist_total(h))
                json_object_set_new(val, "avg", json_real(sum / (double)n));
            break;
        }
        sq_hist_free(h);
        if (!val) {
            json_decref(out);
            return NULL;
        }
        json_object_set_new(val, "samples", json_integer((json_int_t)n));
        json_object_set_new(val, "not_a_number", json_integer((json_int_t)bad));
        json_object_set_new(out, p->metrics[m].name, val);
    }
    return out;
}

json_t *sq_report_json_msecond(const struct sq_plan *p, const struct sq_msecond *m, uint32_t nm)
{
    json_t *out = json_object();
    for (uint32_t i = 0; out && i < nm && i < p->nmetrics; i++) {
        const struct sq_msecond *x = &m[i];
        json_t *val = NULL;
        switch (p->metrics[i].kind) {
        case SQ_MK_COUNTER:
            val = json_pack("{s:f}", "count", x->sum);
            break;
        case SQ_MK_RATE:
            val = json_pack("{s:I, s:I, s:o}", "passes", (json_int_t)x->nonzero, "total",
                            (json_int_t)x->n, "rate",
                            x->n ? json_real((double)x->nonzero / (double)x->n) : json_null());
            break;
        case SQ_MK_GAUGE:
            val = json_pack("{s:o}", "value", x->last_ns ? json_real(x->last) : json_null());
            break;
        case SQ_MK_TREND:
            val = json_pack("{s:I, s:o}", "count", (json_int_t)x->n, "avg",
                            x->n ? json_real(x->sum / (double)x->n) : json_null());
            break;
        }
        if (!val) {
            json_decref(out);
            return NULL;
        }
        json_object_set_new(out, p->metrics[i].name, val);
    }
    return out;
}

/* Each entry of the document's per-second "series" gets its second's "custom_metrics". */
static int series_metrics(json_t *doc, const struct sq_plan *p, const struct sq_result *r)
{
    json_t *series = json_object_get(doc, "series");
    size_t n = json_array_size(series);
    for (size_t i = 0; i < n && i < r->series.n; i++) {
        json_t *o = sq_report_json_msecond(p, &r->mseries[i * r->nmetrics], r->nmetrics);
        if (!o)
            return -ENOMEM;
        json_object_set_new(json_array_get(series, i), "custom_metrics", o);
    }
    return 0;
}

int sq_report_plan_sections(json_t *doc, const struct sq_plan *p, const struct sq_result *r,
                            const struct sq_th_verdicts *v)
{
    double secs = (double)r->duration_ns / 1e9;
    struct plan_acc a = {.r = r};
    a.scen = json_array();
    a.steps = json_array();
    a.checks = json_array();
    if (!a.scen || !a.steps || !a.checks || sq_latency_hist_new(&a.all) < 0 ||
        sq_latency_hist_new(&a.iters) < 0)
        goto fail;
    size_t base = 0; /* the scenario's first step among every scenario's (r->step_series) */
    for (uint32_t i = 0; i < r->nscens && i < p->nscenarios; base += p->scenarios[i].nsteps, i++)
        add_scenario(&a, p, i, base);
    json_t *ths = thresholds_json(v), *metrics = metrics_json(&a, secs);
    if (!ths || !metrics) {
        json_decref(ths);
        json_decref(metrics);
        goto fail;
    }
    sq_hist_free(a.all);
    sq_hist_free(a.iters);
    sq_hist_free(a.gdur);
    sq_hist_free(a.bdur);
    json_object_set_new(doc, "plan", json_pack("{s:s, s:s}", "file", p->file, "target", p->target));
    if (p->name)
        json_object_set_new(json_object_get(doc, "plan"), "name", json_string(p->name));
    json_object_set_new(doc, "scenarios", a.scen);
    json_object_set_new(doc, "steps", a.steps);
    json_object_set_new(doc, "checks", a.checks);
    json_t *groups = json_array();
    for (uint32_t i = 0; groups && i < r->nscens && i < p->nscenarios; i++)
        if (add_groups(groups, &p->scenarios[i], &r->scens[i]) < 0) {
            json_decref(groups);
            groups = NULL;
        }
    if (!groups)
        return -ENOMEM;
    if (json_array_size(groups))
        json_object_set_new(doc, "groups", groups);
    else
        json_decref(groups);
    if (p->nmetrics) {
        json_t *cm = custom_metrics_json(p, r, secs);
        if (!cm)
            return -ENOMEM;
        json_object_set_new(doc, "custom_metrics", cm);
        if (r->nmetrics == p->nmetrics && r->mseries && series_metrics(doc, p, r) < 0)
            return -ENOMEM;
    }
    json_object_set_new(doc, "thresholds", ths);
    json_object_set_new(doc, "metrics", metrics);
    json_object_set_new(doc, "thresholds_failed", json_boolean(v && v->failed));
    /* How many requests were rendered from templates: steps without a dynamic part send their
     * pre-serialised bytes and count none. */
    json_object_set_new(doc, "rendered_requests", json_integer((json_int_t)r->c.rendered));
    return 0;
fail:
    sq_hist_free(a.all);
    sq_hist_free(a.iters);
    sq_hist_free(a.gdur);
    sq_hist_free(a.bdur);
    json_decref(a.scen);
    json_decref(a.steps);
    json_decref(a.checks);
    return -ENOMEM;
}
