/* cli/dist.h - the controller's end of a distributed run (`--agents N --nats URL`) for both load
 * faces: the job sent to the agents, the run (cluster/cluster.h), its events on the terminal,
 * the "cluster" block of the result document and the exit status an agent's loss sets.
 * docs/distributed.md is the user's guide. */
#ifndef SQ_CLI_DIST_H
#define SQ_CLI_DIST_H

#include <jansson.h>
#include <stdbool.h>

#include "cluster/cluster.h"
#include "face/distopts.h"
#include "engine/run.h"

struct sq_cli_dist {
    const char *face;            /* "squall", "squall run" */
    const struct sq_distopts *d; /* the face's --agents ... flags */
    json_t *job;                 /* what the agents run (borrowed; see the faces) */
    bool open;                   /* an arrival-rate run */
    int64_t length_ns;           /* the planned length, graceful stops included */
    sq_tick_cb on_tick;          /* the face's tick: progress, thresholds, --out csv/hdr */
    void *tick_ud;
    volatile int *stop;
    struct sq_progress *progress; /* cleared before an event line; may be NULL */
};

/* "--seed=SEED" (the run's seed: every agent draws its VUs' values from it), then
 * argv[from..argc), as a JSON array of strings (NULL when out of memory or not UTF-8). */
json_t *sq_cli_dist_args(int argc, char **argv, int from, uint64_t seed);

/* Runs x on the agents. Returns 0 with res and rep filled (the run took place; rep may name lost
 * agents), or the exit status after printing why it could not run (SQ_EXIT_FAIL: no NATS, too
 * few agents, an agent refused the job). */
int sq_cli_dist_run(const struct sq_cli_dist *x, struct sq_result *res,
                    struct sq_cluster_report *rep);

/* Adds rep as the document's "cluster" block. Returns 0 or -ENOMEM. */
int sq_cli_dist_doc(json_t *doc, const struct sq_cluster_report *rep);

/* The exit status once the run's own (status) is known. A result that is incomplete (said on
 * stderr whatever the status) makes a 0 into 1: NATS away past --nats-outage always, an agent
 * lost or without a result unless --tolerate-agent-loss. */
int sq_cli_dist_status(const struct sq_cli_dist *x, const struct sq_cluster_report *rep,
                       int status);

#endif
