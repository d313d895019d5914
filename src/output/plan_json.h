/* output/plan_json.h - the plan-run sections of the result document (docs/json-schema.md). */
#ifndef SQ_OUTPUT_PLAN_JSON_H
#define SQ_OUTPUT_PLAN_JSON_H

#include <jansson.h>

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

#endif
