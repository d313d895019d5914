/* face/report.h - the result documents of the two load faces: what a prepared run asked for (its
 * options, as the face read them) beside what its result measured.
 *
 * output/ builds the document from the result model and a struct sq_report_info of plain values
 * (output/json.h); only the face knows where those values are in its options, so the face fills
 * the info, adds its own sections (--urls, a plan's, the OAuth token source) and redacts what its
 * options say to. The CLI, the daemon and the MCP tools all call these, so the same run gives
 * the same document whichever face started it.
 */
#ifndef SQ_FACE_REPORT_H
#define SQ_FACE_REPORT_H

#include <jansson.h>

#include "face/planrun.h"
#include "face/quick.h"
#include "result/verdict.h"

/* The quick face's document (`squall URL --json`, and the daemon's run from {"quick": ...}):
 * what run r asked for and what res measured. NULL when out of memory. */
json_t *sq_quick_doc(const struct sq_quick_run *r, const struct sq_result *res);

/* The plan face's document (`squall run PLAN --json`, and the daemon's run from {"plan": ...}):
 * the run document of r and res, with the plan sections (output/plan_json.h) and the verdicts v
 * (sq_planrun_finish). NULL when out of memory. */
json_t *sq_planrun_doc(const struct sq_planrun *r, const struct sq_result *res,
                       const struct sq_th_verdicts *v);

#endif
