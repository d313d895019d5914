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

struct sq_planrun;
/* The plan face's document (`squall run PLAN --json`, and the daemon's run from {"plan": ...}):
 * the run document of r (engine/planrun.h) and res, with the plan sections and the verdicts v
 * (sq_planrun_finish). The CLI and the daemon both call it, so the same run gives the same
 * document. NULL when out of memory. */
json_t *sq_report_planrun_doc(const struct sq_planrun *r, const struct sq_result *res,
                              const struct sq_th_verdicts *v);

#endif
