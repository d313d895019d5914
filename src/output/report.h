/* output/report.h - the end-of-run outputs of the quick face: terminal summary and JSON.
 *
 * Both read one result model (engine/run.h) and the run's description below; neither touches
 * the engine while it runs.
 */
#ifndef SQ_OUTPUT_REPORT_H
#define SQ_OUTPUT_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "engine/run.h"

/* The JSON schema this build writes; docs/json-schema.md describes it. */
#define SQ_RESULT_SCHEMA "squall.result/1"

/* What was asked for, as the user said it. */
struct sq_report_info {
    const char *url;
    const char *method;
    const char *target_addr; /* the first resolved address, "127.0.0.1:8080" */
    const struct sq_exec *exec; /* what load was asked for */
    uint32_t threads;
    int64_t timeout_ns, connect_timeout_ns;
    size_t request_bytes; /* size of one serialised request */
    bool color;           /* ANSI colour in the summary */
};

/* Latency figures derived once from the merged histogram, in µs. */
struct sq_latency_figures {
    int64_t count, out_of_range;
    int64_t min, max, p50, p90, p95, p99, p999;
    double mean, stdev;
};

/* Figures of one latency histogram (the result's, or its uncorrected one). */
void sq_report_latency_figures(const struct sq_hist *h, struct sq_latency_figures *out);

/* Prints the human summary. */
void sq_report_summary(FILE *f, const struct sq_report_info *info, const struct sq_result *r);

/* Writes the result as one JSON document (schema SQ_RESULT_SCHEMA). Returns 0 or -errno /
 * -ENOMEM. */
SQ_MUST_CHECK int sq_report_json(FILE *f, const struct sq_report_info *info,
                                 const struct sq_result *r);

#endif
