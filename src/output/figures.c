/* output/figures.c - the figures both outputs print, computed once from the result. */
#include "output/figures.h"

#include "stats/hist.h"

void sq_report_latency_figures(const struct sq_hist *h, struct sq_latency_figures *out)
{
    out->count = sq_hist_total(h);
    out->out_of_range = sq_hist_out_of_range(h);
    if (out->count == 0) {
        *out = (struct sq_latency_figures){.out_of_range = out->out_of_range};
        return;
    }
    out->min = sq_hist_min(h);
    out->max = sq_hist_max(h);
    out->mean = sq_hist_mean(h);
    out->stdev = sq_hist_stddev(h);
    out->p50 = sq_hist_percentile(h, 50.0);
    out->p90 = sq_hist_percentile(h, 90.0);
    out->p95 = sq_hist_percentile(h, 95.0);
    out->p99 = sq_hist_percentile(h, 99.0);
    out->p999 = sq_hist_percentile(h, 99.9);
}
