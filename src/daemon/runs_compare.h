/* daemon/runs_compare.h - two stored runs side by side: a table of figures with their deltas, and
 * their latency percentile curves on one x axis. GET /compare and `squall runs compare A B`
 * both use it, so the dashboard and the terminal show the same numbers.
 */
#ifndef SQ_DAEMON_RUNS_COMPARE_H
#define SQ_DAEMON_RUNS_COMPARE_H

#include <jansson.h>
#include <stdio.h>

struct sq_hist;

/* Compares result documents a and b (squall.result/1). ha and hb are their merged latency
 * histograms (either may be NULL: no curves then). Returns (owned by the caller, NULL when out of
 * memory):
 *   {"a": {"url", "mode", "duration_s"}, "b": {...},
 *    "rows": [{"key": "latency.p99_us", "label": "p99", "unit": "us", "a": 812, "b": 930,
 *              "delta": 118, "change": 0.145, "better": "lower", "verdict": "worse"}, ...],
 *    "percentiles": {"x": [1, 1.12, ...], "a": [...], "b": [...]} or null}
 * "change" is delta / a (null when a is 0 or a figure is missing); "verdict" is "better",
 * "worse" or "similar" (within 5%) for figures with a better direction, else null. x is
 * 1/(1-p): 10 is p90, 100 p99, 1000 p99.9. */
json_t *sq_daemon_compare(const json_t *a, const struct sq_hist *ha, const json_t *b,
                          const struct sq_hist *hb);

/* Prints the comparison as a table for the terminal, the runs named name_a and name_b. */
void sq_daemon_compare_print(const json_t *cmp, const char *name_a, const char *name_b, FILE *f);

#endif
