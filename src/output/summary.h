/* output/summary.h - the terminal summary, printed from the result document after a run and
 * again by `squall report FILE`. */
#ifndef SQ_OUTPUT_SUMMARY_H
#define SQ_OUTPUT_SUMMARY_H

#include <jansson.h>
#include <stdio.h>

#include "base/err.h"

/* Prints the summary of doc (a squall.result/1 document, output/doc.h): header, requests,
 * throughput, latency, status classes, errors, connections, TLS, bodies, phases, a plan run's
 * steps / checks / thresholds, and the latency distribution. A key the document lacks leaves its
 * part out. No colour. Returns 0, -SQ_EPARSE (sq_report_doc_check failed) or -EIO. */
SQ_MUST_CHECK int sq_report_summary(const json_t *doc, FILE *f);

#endif
