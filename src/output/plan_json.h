/* output/plan_json.h - the plan-run sections of the result document (docs/json-schema.md). */
#ifndef SQ_OUTPUT_PLAN_JSON_H
#define SQ_OUTPUT_PLAN_JSON_H

#include <jansson.h>
#include <stdint.h>

#include "base/err.h"

struct sq_plan;
struct sq_result;
struct sq_th_verdicts;

/* Plan runs: adds "plan", "scenarios", "steps", "checks", "thresholds", "thresholds_failed" and
 * k6-named "metrics" to doc (built by sq_report_json_doc, output/json.h). v may be NULL (no
 * thresholds evaluated). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_report_plan_sections(json_t *doc, const struct sq_plan *p,
                                          const struct sq_result *r,
                                          const struct sq_th_verdicts *v);

/* One second of the plan's metrics (m[0, nm), the plan's metrics: order; struct sq_msecond) as
 * the series entry's "custom_metrics": by name, a counter's {"count"}, a rate's {"passes",
 * "total", "rate"}, a gauge's {"value"}, a trend's {"count", "avg"} (avg in the samples' unit;
 * null without a sample). NULL when out of memory. */
struct sq_msecond;
json_t *sq_report_json_msecond(const struct sq_plan *p, const struct sq_msecond *m, uint32_t nm);

#endif
