/* output/series.h - the per-second series written while a run goes: --out csv=FILE and
 * HdrHistogram's interval log (--out hdr=FILE). The main thread calls them from the run's tick. */
#ifndef SQ_OUTPUT_SERIES_H
#define SQ_OUTPUT_SERIES_H

#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "result/result.h"

struct sq_hist;

/* --out csv=FILE: the per-second series, one row per second. A plan's own metrics (m[0, nm),
 * NULL and 0: none) add columns after vus: a counter NAME (its increment in the second), a rate
 * NAME_passes and NAME_total, a gauge NAME (its latest sample; empty before one), a trend
 * NAME_count and NAME_avg (empty without a sample). */
struct sq_plan_metric;
void sq_csv_header(FILE *f, const struct sq_plan_metric *m, uint32_t nm);
void sq_csv_row(FILE *f, const struct sq_second *s, const struct sq_plan_metric *m, uint32_t nm);

/* --out hdr=FILE: HdrHistogram's interval log (format version 1.2), one line per second with
 * the second's histogram in the V2 compressed encoding, base64. start_wall_s is the run's start
 * in seconds since the epoch. Returns 0 or a negative error. */
void sq_hdrlog_header(FILE *f, double start_wall_s);
SQ_MUST_CHECK int sq_hdrlog_line(FILE *f, const struct sq_second *s, const struct sq_hist *h);

#endif
