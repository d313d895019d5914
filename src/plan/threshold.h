/* plan/threshold.h - k6-style thresholds: "metric{tag:value,...}": ["p(95) < 200", ...].
 *
 * The parser turns a metric selector and an expression into data; the engine computes the
 * aggregate named by the expression from its merged metrics and asks sq_threshold_expr_holds().
 * Units: time metrics (http_req_duration, iteration_duration, http_req_*) in milliseconds, as in
 * k6; rates as fractions in [0, 1]; counts as plain numbers.
 */
#ifndef SQ_PLAN_THRESHOLD_H
#define SQ_PLAN_THRESHOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum sq_th_agg {
    SQ_TH_COUNT, /* counters: total */
    SQ_TH_RATE,  /* counters: per second; rate metrics: the passed fraction */
    SQ_TH_VALUE, /* gauges: last value */
    SQ_TH_AVG,
    SQ_TH_MIN,
    SQ_TH_MAX,
    SQ_TH_MED,
    SQ_TH_PCT, /* p(N): pct holds N */
};

enum sq_th_op { SQ_TH_GT, SQ_TH_GE, SQ_TH_LT, SQ_TH_LE, SQ_TH_EQ, SQ_TH_NE };

struct sq_th_expr {
    enum sq_th_agg agg;
    double pct; /* SQ_TH_PCT: 0 < pct <= 100 */
    enum sq_th_op op;
    double value;
    char text[96]; /* the expression as written, trimmed, for the summary */
};

/* Parses "p(95) < 200", "rate>0.99", "avg<=120.5", "count == 0". Whitespace anywhere between
 * tokens; === is accepted as ==. Returns 0, or -SQ_EPARSE with err naming the offending part and
 * offset (e.g. "unknown aggregation 'p95' at 0 (expected count, rate, value, avg, min, max,
 * med or p(N))"). */
SQ_MUST_CHECK int sq_th_expr_parse(const char *s, size_t len, struct sq_th_expr *out, char *err,
                                   size_t errlen);
bool sq_th_expr_holds(const struct sq_th_expr *e, double v);
const char *sq_th_op_str(enum sq_th_op op); /* "<" ... */

#define SQ_TH_MAX_TAGS 4

/* "http_req_duration{step:login,status:200}": metric name and tag filters (spans into the
 * caller's string, which must outlive the selector). */
struct sq_metric_sel {
    const char *metric;
    size_t metric_len;
    struct {
        const char *key, *value;
        size_t key_len, value_len;
    } tags[SQ_TH_MAX_TAGS];
    size_t ntags;
};

/* Parses a selector. Returns 0 or -SQ_EPARSE (err: what and where). Does not check that the
 * metric or tag names exist (the plan loader does, against its own lists). */
SQ_MUST_CHECK int sq_metric_sel_parse(const char *s, size_t len, struct sq_metric_sel *out,
                                      char *err, size_t errlen);

#endif
