/* engine/client.h - what a run measures besides the server's answers: squall's own cost (each
 * worker thread's CPU, its wait for a CPU, its loop's lag, the open loop's schedule) and the
 * processes it watches (--watch). Internal to engine/: worker.c reads a thread's times at each
 * tick, run.c feeds the main thread's half below from the published slots.
 *
 * Nothing here is on the hot path: a worker reads its times once a second (one pread of
 * /proc/thread-self/schedstat, about 2 µs), and the main thread reads /proc for itself and the
 * watched processes once a second.
 */
#ifndef SQ_ENGINE_CLIENT_H
#define SQ_ENGINE_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/run.h"

struct sq_engine__worker;
struct sq_engine__slot;

/* Worker side: opens the thread's schedstat (call on the worker thread) and reads the thread's
 * time on a CPU and waiting for one, in ns since the thread started. */
void sq_engine__times_open(struct sq_engine__worker *w);
void sq_engine__times(struct sq_engine__worker *w, int64_t *cpu_ns, int64_t *wait_ns);
void sq_engine__times_close(struct sq_engine__worker *w);

/* Main thread side: per worker, the last slot's readings; for the second being assembled, its
 * maxima; and the process's own baseline. */
struct sq_engine__clagg {
    uint32_t n;
    int64_t *end, *cpu, *wait, *poll, *sleep; /* per worker: at its last consumed slot */
    struct sq_worker_stats *ws;               /* per worker: the run's figures so far */
    double busy_max;                          /* the second being assembled */
    int64_t lag_max, behind_max;
    int64_t ru_user0, ru_sys0, ru_prev; /* getrusage at the start; user + sys at the last entry */
    uint64_t rss_peak;
    int64_t go;
    const struct sq_run_config *cfg;
};

/* Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_engine__clagg_init(struct sq_engine__clagg *a, uint32_t n,
                                        const struct sq_run_config *cfg);
void sq_engine__clagg_dispose(struct sq_engine__clagg *a);
/* At the common start go: the process's baseline, and the watched processes' (cfg->watch). */
void sq_engine__clagg_begin(struct sq_engine__clagg *a, int64_t go);
/* One published slot of worker wi. late: the slot belongs to a second already emitted, whose
 * entry is last (its maxima are raised in place). */
void sq_engine__clagg_slot(struct sq_engine__clagg *a, uint32_t wi, const struct sq_engine__slot *s,
                           struct sq_second *late);
/* Fills e's client and server parts as the second is emitted (now: CLOCK_MONOTONIC). */
void sq_engine__clagg_emit(struct sq_engine__clagg *a, struct sq_second *e, int64_t now);
/* After the last entry (last may be NULL: no entry): a final sample of the watched processes
 * folded into last, and the run's figures into out (client, server; judged). Returns 0 or
 * -ENOMEM. */
SQ_MUST_CHECK int sq_engine__clagg_end(struct sq_engine__clagg *a, struct sq_second *last,
                                       struct sq_result *out, int64_t now);

#endif
