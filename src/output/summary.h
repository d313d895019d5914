/* output/summary.h - the terminal summary, printed from the result document after a run and
 * again by `squall report FILE`. */
#ifndef SQ_OUTPUT_SUMMARY_H
#define SQ_OUTPUT_SUMMARY_H

#include <jansson.h>
#include <stdio.h>

#include "base/err.h"

#include <stdbool.h>

/* How the summary is printed. */
struct sq_summary_opts {
    bool color; /* ANSI colours: red errors and crossed thresholds (the caller decides: a
                   terminal, and NO_COLOR unset) */
};

/* Prints the summary of doc (a squall.result/1 document, output/doc.h): a warning when every
 * response was an error status, the header, requests and the two kinds of failure, throughput,
 * latency, exact status codes, errors with their messages, connections, TLS, bodies, phases, a
 * plan run's steps / checks / thresholds (crossed ones first), the latency distribution on
 * log-spaced rows, and for a plan with thresholds a last line with the verdict ("thresholds
 * crossed: ..."). A key the document lacks leaves its part out. o may be NULL (no colour).
 * Returns 0, -SQ_EPARSE (sq_report_doc_check failed) or -EIO. */
SQ_MUST_CHECK int sq_report_summary_opts(const json_t *doc, FILE *f,
                                         const struct sq_summary_opts *o);
/* The same without colour. */
SQ_MUST_CHECK int sq_report_summary(const json_t *doc, FILE *f);

#endif
