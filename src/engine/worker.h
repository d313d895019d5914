/* engine/worker.h - one worker thread: its event loop, its connections, its metric shard.
 * Internal to engine/: run.c creates, starts, joins and merges workers. */
#ifndef SQ_ENGINE_WORKER_H
#define SQ_ENGINE_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/run.h"

struct sq_loop;
struct sq_hist;
struct sq_engine__conn;

/* What a worker publishes for the run's watchdog: written by the worker with relaxed atomic
 * stores at each sweep (10 per second), read by the main thread with relaxed loads. */
struct sq_engine__live {
    uint64_t progress;       /* completed + failed */
    uint64_t opened;         /* successful connects */
    uint64_t connect_errors; /* failed connect attempts */
    int last_connect_err;    /* -errno of the latest failed connect */
    int done;                /* the worker has left its loop */
};

struct sq_engine__worker {
    pthread_t tid;
    const struct sq_run_config *cfg;
    struct sq_loop *loop;
    struct sq_engine__conn *conns;
    uint32_t nconns, first_conn; /* first_conn: global index of conns[0], for address choice */
    uint64_t quota;              /* requests this worker may still start (UINT64_MAX: no bound) */
    uint64_t in_flight;
    bool sending; /* still starting requests */
    bool leave;   /* leave the loop at the end of this round */
    char *rbuf;   /* per-worker read buffer, shared by all its connections */
    struct sq_counters c;
    struct sq_hist *hist;
    int64_t start_ns, deadline_ns, end_ns;
    const int *abort; /* the run's own stop flag (watchdog, caller's stop) */
    struct sq_engine__live live;
};

/* Allocates the worker's loop, connections, buffer and shard. Returns 0 or -errno. */
SQ_MUST_CHECK int sq_engine__worker_init(struct sq_engine__worker *w,
                                         const struct sq_run_config *cfg, uint32_t nconns,
                                         uint32_t first_conn, uint64_t quota, const int *abort);
void sq_engine__worker_dispose(struct sq_engine__worker *w);
/* The thread body: runs until the deadline, the quota is done, or *abort is set. */
void *sq_engine__worker_main(void *arg);

#endif
