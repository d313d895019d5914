/* cli/wrk.h - `squall wrk` (wrk_cmd.c), and what the quick face's -s shares with it: the script
 * block of the result document and wrk's report. */
#ifndef SQ_CLI_WRK_H
#define SQ_CLI_WRK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "engine/run.h"

/* `squall wrk <options> <url> [-- args]`; argv[0] is "wrk". Returns the exit status. */
int sq_cli_wrk(int argc, char **argv);

/* wrk's report from "  Thread Stats" to "Transfer/sec:" (latency: with the distribution). */
void sq_cli_wrk_report(FILE *f, const struct sq_result *r, bool latency);

/* The result document's "script" block: the file (NULL: none), the hooks it defines
 * (SQ_SCRIPT_*), whether the static request was sent, the hook calls, the threads
 * thread:stop() ended and the error that stopped the run (docs/json-schema.md). */
json_t *sq_cli_script_json(const char *file, unsigned hooks, const struct sq_result *r);

#endif
