/* output/figures.h - the latency figures every output prints, computed once from a merged
 * histogram (so the JSON, the summary and the report cannot disagree). */
#ifndef SQ_OUTPUT_FIGURES_H
#define SQ_OUTPUT_FIGURES_H

#include <stdint.h>

struct sq_hist;

/* Latency figures derived once from the merged histogram, in µs. */
struct sq_latency_figures {
    int64_t count, out_of_range;
    int64_t min, max, p50, p90, p95, p99, p999;
    double mean, stdev;
};

/* Figures of one latency histogram (the result's, or its uncorrected one). An empty histogram
 * gives zeros (out_of_range kept). */
void sq_report_latency_figures(const struct sq_hist *h, struct sq_latency_figures *out);

#endif
