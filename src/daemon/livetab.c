/* daemon/livetab.c - the live tables of a run in progress: the "live" event.
 *
 * Once a second, on the runner thread, after the second's tick: one row per step of a plan run
 * (the engine's per-step counts so far, cfg->on_tick_steps, and each step's responses merged
 * here into a running histogram: the percentiles are the run's so far, the rate that second's),
 * or one row for a quick run's URL (the run's totals); and, for a plan, every threshold judged on
 * the running totals (sq_thresholds_live). Bounded: at most SQ_DAEMON_LIVE_ROWS rows and
 * SQ_DAEMON_LIVE_THRESHOLDS expressions (the counts left out ride along). Each check of a
 * plan's steps with its passes and failures so far (the workers' counts, handed over with the
 * steps' once a second: no more work per request), at most SQ_DAEMON_LIVE_CHECKS.
 *
 *   event: live   data: {"run": 7, "t_s": 12.0, "rows": [...], "rows_left_out": 0,
 *                        "thresholds": [...], "thresholds_left_out": 0,
 *                        "checks": [...], "checks_left_out": 0}
 *
 * The event is not kept with the seconds: a follower gets the latest one (docs/daemon.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/internal.h"
#include "output/json.h"
#include "stats/hist.h"
#include "plan/plan.h"
#include "result/verdict.h"

void sq_daemon__livetab_dispose(struct sq_daemon__livetab *t)
{
    for (uint32_t g = 0; t->h && g < t->n; g++)
        sq_hist_free(t->h[g]);
    free(t->h);
    for (uint32_t k = 0; k < SQ_XS_CLASSES; k++)
        json_decref(t->xs[k]);
    *t = (struct sq_daemon__livetab){0};
}

void sq_daemon__livetab_sample(struct sq_daemon__livetab *t, const struct sq_xsample *x)
{
    if (x->cls < SQ_XS_CLASSES && !t->xs[x->cls])
        t->xs[x->cls] = sq_report_json_sample(x);
}

/* The failure samples so far, one per class in class order: {class, kind, sample}. */
static json_t *samples_json(const struct sq_daemon__livetab *t)
{
    json_t *a = json_array();
    for (uint32_t k = 0; a && k < SQ_XS_CLASSES; k++)
        if (t->xs[k])
            json_array_append_new(
                a, json_pack("{s:s, s:s, s:O}", "class", sq_report_sample_class(k), "kind",
                             k < SQ_XS_STATUS_CLASSES ? "status" : "error", "sample", t->xs[k]));
    return a;
}

static double ms(int64_t us)
{
    return (double)us / 1000.0;
}

/* The latency columns of a row from h (the run's so far). */
static void row_latency(json_t *row, const struct sq_hist *h)
{
    bool any = h && sq_hist_total(h) > 0;
    json_object_set_new(row, "p50_ms",
                        any ? json_real(ms(sq_hist_percentile(h, 50))) : json_null());
    json_object_set_new(row, "p95_ms",
                        any ? json_real(ms(sq_hist_percentile(h, 95))) : json_null());
    json_object_set_new(row, "p99_ms",
                        any ? json_real(ms(sq_hist_percentile(h, 99))) : json_null());
    json_object_set_new(row, "max_ms", any ? json_real(ms(sq_hist_max(h))) : json_null());
}

static json_t *thresholds_json(const struct sq_plan *p, const struct sq_live_totals *lt,
                               uint64_t *left_out)
{
    json_t *a = json_array();
    struct sq_th_live v[SQ_DAEMON_LIVE_THRESHOLDS];
    size_t total = 0;
    for (size_t i = 0; i < p->nthresholds; i++)
        total += p->thresholds[i].nexprs;
    size_t n = sq_thresholds_live(p, lt, v, SQ_DAEMON_LIVE_THRESHOLDS);
    *left_out = total - n;
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:b, s:b}", "metric", v[i].th->selector,
                                           "expr", v[i].expr->text, "value",
                                           v[i].live ? json_real(v[i].value) : json_null(), "live",
                                           v[i].live, "ok", v[i].ok));
    return a;
}

/* One row per request step (think steps have none). */
static json_t *plan_rows(struct sq_daemon__livetab *t, const struct sq_plan *p,
                         const struct sq_step_live *v, uint32_t n, double len_s, uint64_t *left_out)
{
    json_t *rows = json_array();
    uint32_t g = 0;
    for (size_t i = 0; rows && i < p->nscenarios; i++) {
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        for (size_t k = 0; k < sc->nsteps; k++, g++) {
            const struct sq_plan_step *ps = &sc->steps[k];
            if (g >= n || ps->kind == SQ_STEP_THINK)
                continue;
            if (json_array_size(rows) >= SQ_DAEMON_LIVE_ROWS) {
                (*left_out)++;
                continue;
            }
            const struct sq_step_live *x = &v[g];
            uint64_t sec = x->h ? (uint64_t)sq_hist_total(x->h) : 0;
            if (x->h && g < t->n && (t->h[g] || sq_latency_hist_new(&t->h[g]) == 0))
                sq_hist_merge(t->h[g], x->h);
            const struct sq_hist *cum = g < t->n ? t->h[g] : NULL;
            json_t *st = json_object();
            for (uint32_t b = 0; b < x->nstatus && b < SQ_STEP_STATUSES; b++) {
                char code[8];
                snprintf(code, sizeof(code), "%u", x->by_status[b].status);
                json_object_set_new(st, code, json_integer((json_int_t)x->by_status[b].n));
            }
            const char *method = ps->kind == SQ_STEP_WS          ? "WS"
                                 : ps->kind == SQ_STEP_PUBLISH   ? "PUB"
                                 : ps->kind == SQ_STEP_SUBSCRIBE ? "SUB"
                                                                 : ps->req.method;
            json_t *row = json_pack(
                "{s:s, s:s, s:s?, s:s?, s:I, s:I, s:f, s:I, s:I, s:o}", "scenario", sc->name,
                "name", ps->name, "method", method, "url", ps->req.url_src, "requests",
                (json_int_t)x->reqs, "responses", (json_int_t)(cum ? sq_hist_total(cum) : 0), "rps",
                len_s > 0 ? (double)sec / len_s : 0.0, "failed", (json_int_t)x->failed, "errors",
                (json_int_t)x->errors, "status", st);
            if (!row)
                continue;
            row_latency(row, cum);
            json_array_append_new(rows, row);
        }
    }
    return rows;
}

/* Every check of every step so far (passed, failed), in the plan's order: at most
 * SQ_DAEMON_LIVE_CHECKS, and a step's first SQ_STEP_LIVE_CHECKS (the engine carries no more);
 * the others are counted in *left_out. */
static json_t *checks_json(const struct sq_plan *p, const struct sq_step_live *v, uint32_t n,
                           uint64_t *left_out)
{
    json_t *a = json_array();
    uint32_t g = 0;
    for (size_t i = 0; a && i < p->nscenarios; i++) {
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        for (size_t k = 0; k < sc->nsteps; k++, g++) {
            const struct sq_plan_step *ps = &sc->steps[k];
            for (size_t c = 0; c < ps->nchecks; c++) {
                if (g >= n || c >= SQ_STEP_LIVE_CHECKS ||
                    json_array_size(a) >= SQ_DAEMON_LIVE_CHECKS) {
                    (*left_out)++;
                    continue;
                }
                const struct sq_step_live *x = &v[g];
                json_array_append_new(a,
                                      json_pack("{s:s, s:s, s:s, s:I, s:I}", "scenario", sc->name,
                                                "step", ps->name, "check", ps->checks[c].name,
                                                "passed", (json_int_t)x->checks[c].pass, "failed",
                                                (json_int_t)x->checks[c].fail));
            }
        }
    }
    return a;
}

/* A quick run's one row: its URL, from the run's totals. */
static json_t *quick_rows(const struct sq_daemon__live *l, const struct sq_daemon__totals *tt,
                          const struct sq_hist *total)
{
    json_t *st = json_object();
    static const char *const cls[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int i = 1; i <= 6; i++)
        if (tt->status[i % 6])
            json_object_set_new(st, cls[i % 6], json_integer((json_int_t)tt->status[i % 6]));
    uint64_t failed = tt->failed + tt->status[4] + tt->status[5];
    json_t *row =
        json_pack("{s:s, s:s, s:s, s:n, s:I, s:I, s:f, s:I, s:I, s:o}", "scenario", "", "name",
                  l->target, "method", "", "url", "requests", (json_int_t)tt->sent, "responses",
                  (json_int_t)tt->completed, "rps", tt->rps, "failed", (json_int_t)failed, "errors",
                  (json_int_t)tt->errors, "status", st);
    if (row)
        row_latency(row, total);
    return json_pack("[o?]", row);
}

char *sq_daemon__event_live(struct sq_daemon__livetab *t, const struct sq_daemon__live *l,
                            const struct sq_daemon__totals *tt, const struct sq_hist *total,
                            const struct sq_plan *p, const struct sq_live_totals *lt,
                            const struct sq_step_live *v, uint32_t n, double len_s)
{
    if (p && !t->h && n) {
        t->h = calloc(n, sizeof(*t->h));
        t->n = t->h ? n : 0;
    }
    uint64_t rows_out = 0, th_out = 0, ck_out = 0;
    json_t *rows = p ? plan_rows(t, p, v, n, len_s, &rows_out) : quick_rows(l, tt, total);
    json_t *ths = p && lt ? thresholds_json(p, lt, &th_out) : json_array();
    json_t *cks = p ? checks_json(p, v, n, &ck_out) : json_array();
    json_t *xs = samples_json(t);
    json_t *o =
        json_pack("{s:I, s:f, s:o, s:I, s:o, s:I, s:o, s:I, s:o}", "run", (json_int_t)l->id, "t_s",
                  tt->elapsed_s, "rows", rows ? rows : json_array(), "rows_left_out",
                  (json_int_t)rows_out, "thresholds", ths ? ths : json_array(),
                  "thresholds_left_out", (json_int_t)th_out, "checks", cks ? cks : json_array(),
                  "checks_left_out", (json_int_t)ck_out, "failure_samples", xs ? xs : json_array());
    char *data =
        o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(o);
    if (!data)
        return NULL;
    size_t len = strlen(data) + 32;
    char *ev = malloc(len);
    if (ev)
        snprintf(ev, len, "event: live\ndata: %s\n\n", data);
    free(data);
    return ev;
}
