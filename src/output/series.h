/* output/series.h - outputs fed second by second while a run goes: the progress line, the CSV
 * series and HdrHistogram's interval log. The main thread calls them from the run's tick. */
#ifndef SQ_OUTPUT_SERIES_H
#define SQ_OUTPUT_SERIES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"
#include "engine/run.h"

struct sq_hist;

/* The status line. On a terminal it is redrawn in place every second; elsewhere a plain line is
 * written every `every_s` seconds. errors_so_far counts every error kind since the start. */
struct sq_progress {
    FILE *f;
    bool tty, color;
    double length_s; /* the executor's length, for the bar; 0 when unknown (iterations) */
    int every_s;
    uint64_t errors_so_far, completed_so_far;
    bool open;
    bool drawn; /* a line is on screen and must be cleared */
};

void sq_progress_tick(struct sq_progress *p, const struct sq_second *s);
/* Clears the line on a terminal before the summary. */
void sq_progress_finish(struct sq_progress *p);

/* --out csv=FILE: the per-second series, one row per second. */
void sq_csv_header(FILE *f);
void sq_csv_row(FILE *f, const struct sq_second *s);

/* --out hdr=FILE: HdrHistogram's interval log (format version 1.2), one line per second with
 * the second's histogram in the V2 compressed encoding, base64. start_wall_s is the run's start
 * in seconds since the epoch. Returns 0 or a negative error. */
void sq_hdrlog_header(FILE *f, double start_wall_s);
SQ_MUST_CHECK int sq_hdrlog_line(FILE *f, const struct sq_second *s, const struct sq_hist *h);

#endif
