/* cli/sinkrun.h - the command line's words around a sink beside a load run (`squall URL --sink
 * ...`, a plan's `sink:` under `squall run`): sink/beside.h does the work; these print what went
 * wrong the way the faces do and return their exit codes. */
#ifndef SQ_CLI_SINKRUN_H
#define SQ_CLI_SINKRUN_H

#include <jansson.h>

#include "engine/run.h"
#include "plan/plan.h"
#include "sink/beside.h"

/* Checks a plan's sink: section as the sink will (the URLs, the stamp spec) without starting
 * anything. Returns 0, or SQ_EXIT_USAGE after printing "squall: FILE:LINE:COL: sink: why". */
int sq_cli_sink_plan_check(const struct sq_plan *p);

/* Starts the sink for the run whose id is run_id and waits (up to 5 s) for its subscriptions.
 * Returns 0 with *out set, or an exit status after printing why (face names the flag). */
int sq_cli_sink_begin(const char *face, const struct sq_sink_beside_opts *o, uint64_t run_id,
                      struct sq_sink **out);

/* After the load: sq_sink_beside_end, and its block into doc (when doc is not NULL). True when
 * the sink failed the run (a broker source never subscribed), why (len > 0) saying so; the
 * caller prints it and exits 1. */
bool sq_cli_sink_end(struct sq_sink *s, const struct sq_result *res, json_t *doc,
                     volatile int *stop, char *why, size_t len);

#endif
