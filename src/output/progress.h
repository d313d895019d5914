/* output/progress.h - the progress line of a running test, fed by the run's tick on the main
 * thread. */
#ifndef SQ_OUTPUT_PROGRESS_H
#define SQ_OUTPUT_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "result/result.h"

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

#endif
