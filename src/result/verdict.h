/* result/verdict.h - evaluating a plan's thresholds against a run's merged figures: the verdicts.
 *
 * The thresholds themselves are parsed and checked by the plan loader (plan/threshold.c); which
 * metric is a counter, a rate, a gauge or a trend, and where the result keeps it, comes from the
 * one metric table (plan/metrics.h).
 *
 * Metric values follow k6: time metrics in milliseconds, rates as fractions, counters as counts
 * (rate: per second of the run). Tags select steps (step, method, status, group) and scenarios
 * (scenario); status selects the step's per-status histograms and counts. A metric with no
 * sample evaluates as 0 (k6's behaviour) and is flagged no_data so the summary can say so.
 */
#ifndef SQ_RESULT_VERDICT_H
#define SQ_RESULT_VERDICT_H

#include <stdbool.h>
#include <stddef.h>

#include "result/result.h"
#include "plan/plan.h"

struct sq_th_verdict {
    const struct sq_plan_threshold *th;
    const struct sq_th_expr *expr;
    double value;
    bool ok;
    bool no_data;
};

struct sq_th_verdicts {
    struct sq_th_verdict *v;
    size_t n;
    bool failed; /* at least one threshold did not hold */
};

/* Whether a run did its job: the one rule behind every face's exit code 1 ("no request
 * succeeded": the quick face, `squall run`, `squall wrk`, a distributed run) and the daemon's
 * `failed` status. A run succeeded when one unit of its work came back whole:
 *   - a request that got a complete response, whatever its status (c.completed): a target that
 *     answers 500 to everything did answer, and the 5xx are in the summary;
 *   - a plan's publish or subscribe step that completed (a step's reqs less its errors: the
 *     broker took the message, the event arrived), which sends no request;
 *   - in a plan whose flows did neither kind of work (think steps only, or every request skipped
 *     by its before hook), a completed iteration.
 * Iterations alone never count where a step was tried: an iteration also ends after a failed
 * request (on_error), so a dead target still completes iterations. */
bool sq_result_succeeded(const struct sq_result *r);

/* The units of work of a run that ended in an error: its failed requests, and in a plan run
 * its failed steps (requests and publish / subscribe steps, each once). */
uint64_t sq_result_failed_units(const struct sq_result *r);

/* Evaluates every threshold of p on r (a plan run's result: r->scens in plan order). Returns 0
 * or -ENOMEM. Free with sq_th_verdicts_dispose(). */
SQ_MUST_CHECK int sq_thresholds_eval(const struct sq_plan *p, const struct sq_result *r,
                                     struct sq_th_verdicts *out);
void sq_th_verdicts_dispose(struct sq_th_verdicts *v);

/* Refuses thresholds the engine cannot evaluate: tags on the per-phase metrics (kept for the whole
 * run) and step/method/status/group tags on per-scenario metrics (iterations, data, VUs). Returns
 * 0, or -SQ_EUSAGE with err as "file:line:col: thresholds: 'selector': why". */
SQ_MUST_CHECK int sq_thresholds_check(const struct sq_plan *p, char *err, size_t len);

/* Cumulative figures of a run so far, for abortOnFail thresholds (evaluated each second on the
 * main thread; only thresholds without tags can be checked live, tagged ones at the end). */
struct sq_live_totals {
    struct sq_hist *dur; /* every completed request so far, µs */
    uint64_t reqs, http_failed, checks_passed, checks_failed, iterations, dropped;
    uint64_t bytes_sent, bytes_received;
    double elapsed_s;
};

/* True when an abortOnFail threshold (without tags, past its delayAbortEval) fails on t; why
 * then names it. */
bool sq_thresholds_should_abort(const struct sq_plan *p, const struct sq_live_totals *t, char *why,
                                size_t len);

/* One threshold expression judged on the live totals. live false: it is judged at the end only
 * (a tagged selector, a metric not kept live, checks before any was judged); ok is then true. */
struct sq_th_live {
    const struct sq_plan_threshold *th;
    const struct sq_th_expr *expr;
    double value;
    bool ok, live;
};
/* Every expression of every threshold of p, in plan order, judged on t: at most max into out.
 * Returns how many. */
size_t sq_thresholds_live(const struct sq_plan *p, const struct sq_live_totals *t,
                          struct sq_th_live *out, size_t max);

#endif
