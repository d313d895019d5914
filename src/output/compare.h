/* output/compare.h - two saved runs side by side (`squall compare a.json b.json`): every figure
 * with its delta, the latency percentile curves overlaid, the series aligned on time.
 *
 * The comparison is a document of its own (schema squall.compare/1, docs/json-schema.md) built
 * from the two result documents, so the table, the HTML page and `--json` cannot disagree. It
 * states differences only: two single runs cannot say whether a difference is noise (that is
 * `squall ab`'s job, docs/instruments.md).
 */
#ifndef SQ_OUTPUT_COMPARE_H
#define SQ_OUTPUT_COMPARE_H

#include <jansson.h>
#include <stdio.h>

#include "base/err.h"

#define SQ_COMPARE_SCHEMA "squall.compare/1"

/* Builds the comparison of result documents a and b (each passed sq_report_doc_check), named
 * name_a and name_b (file names). Rows: the known figures first (throughput, latency, requests,
 * status classes, errors, connections, the client's and the watched server's cost, phases), then
 * every other number either document holds (series, histograms and the environment aside), by
 * its dotted path. Returns the document (json_decref it) or NULL when out of memory. */
json_t *sq_compare_doc(const json_t *a, const json_t *b, const char *name_a, const char *name_b);

/* The comparison as a terminal table: figure, A, B, delta, delta %. Returns 0 or -EIO. */
SQ_MUST_CHECK int sq_compare_table(const json_t *cmp, FILE *f);

/* The comparison as a self-contained HTML page: the table, both latency percentile curves on one
 * plot, and requests per second, p99 and (when both runs watched a server) the server's CPU over
 * time, the two runs aligned on seconds since their start. Returns 0, -ENOMEM or -EIO. */
SQ_MUST_CHECK int sq_compare_html(const json_t *cmp, const json_t *a, const json_t *b, FILE *f);

#endif
