/* cli/loadrun.h - what the two load faces, `squall URL` (quick_cmd.c) and `squall run PLAN`
 * (run_cmd.c), do around one prepared run, in the order they do it: the output files checked
 * before any load is sent, the tick's progress line and --out files, the run here or on agents
 * (cli/dist.h) with the sink beside it (cli/sinkrun.h), the document finished for every output,
 * and the exit status's last words. Each face adds its own steps between these calls (the
 * quick face's --verbose exchanges and wrk script, the plan face's thresholds). */
#ifndef SQ_CLI_LOADRUN_H
#define SQ_CLI_LOADRUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli/common.h"
#include "cli/dist.h"
#include "cluster/cluster.h"
#include "engine/run.h"
#include "face/push.h"
#include "output/progress.h"
#include "sink/sink.h"

struct sq_cli_load {
    /* the face's, set before sq_cli_load_open */
    const char *face;            /* "squall", "squall run" */
    struct sq_run_config *cfg;   /* the prepared run's */
    const struct sq_distopts *d; /* --agents ...: the run goes to agents when d->agents */
    struct sq_cli_outputs outs;  /* --json, --html, -q */
    struct sq_progress progress; /* the progress line (sq_cli_progress_init) */
    bool show;                   /* draw it: not -q */
    struct sq_cli_series out;    /* --out files */
    struct sq_sink *sink;        /* a sink beside the load (cli/sinkrun.h), or NULL */
    /* --out prometheus-rw=URL and influxdb=URL (face/push.h), indexed by enum sq_push_kind;
     * NULL: not asked. run_name: the series' run label (--name; NULL: "squall"). */
    const char *push_url[2];
    const char *run_name;
    bool push_open; /* the open model: the active count is in flight, not VUs */
    /* plan runs: the plan's own metrics (metrics:), written each second by --out csv, influxdb
     * and prometheus-rw beside the run's series; NULL and 0: none */
    const struct sq_plan_metric *metrics;
    uint32_t nmetrics;
    struct sq_push *push[2]; /* the senders, started by sq_cli_load_open */
    json_t *job;             /* what the agents run (owned; NULL: could not be built) */
    /* what the run gives back */
    struct sq_cli_dist dist;
    struct sq_cluster_report rep;
    struct sq_result res;
    int sig; /* the signal that stopped it (0: none), and whether a second cut it short */
    bool forced;
    bool sink_failed;   /* a broker source of the sink never subscribed: sink_why says so */
    char sink_why[512]; /* (the sink's block goes into the document, its line first) */
};

/* Checks --json and --html and opens the --out files (sq_cli_outputs_open, sq_cli_series_open),
 * so a path that cannot be written is refused before any load is sent, and starts the senders
 * of push_url (their destination resolved through cfg->egress; no packet sent yet). Returns 0 or
 * the exit status after printing why. */
int sq_cli_load_open(struct sq_cli_load *l, const char *csv, const char *hdr, const char *ndjson,
                     double sample);

/* One second of the run, from the face's tick: the progress line, the --out files and the
 * senders' queues (never waits for the network). */
void sq_cli_load_tick(struct sq_cli_load *l, const struct sq_second *s, const struct sq_hist *h);

/* Runs cfg here (sq_run) or, with --agents, l->job on the agents (a NULL job fails: whoever
 * built it said why). The face has set cfg->stop (sq_cli_signals_begin), its tick and its sink.
 * open, length_ns: the run's loop and planned length (graceful stops included) for the agents'
 * controller. Returns 0 when the run took place (its result in l->res, the signal in l->sig),
 * or the exit status after printing why, the signals and the sink already ended. */
int sq_cli_load_run(struct sq_cli_load *l, bool open, int64_t length_ns, sq_tick_cb on_tick,
                    void *tick_ud);

/* A run that will not be rendered (the face's own step after it failed): the signals' default
 * actions back, the sink stopped without a document. */
void sq_cli_load_abandon(struct sq_cli_load *l);

/* The --out files committed and the result marked with the signal that stopped it: the
 * measured run, before its document is built. */
void sq_cli_load_measured(struct sq_cli_load *l);

/* The document the face built (doc; NULL: out of memory) finished for every output: the sink's
 * block (a signal while the sink waited for its last events counts), the cluster block, the
 * command line as typed (typed: argc words, NULL when it could not be copied; redact: hide the
 * secrets in it) and the signal. Returns doc, or NULL after printing "out of memory building
 * the result" (doc released). The signals' default actions are back either way. */
json_t *sq_cli_load_doc(struct sq_cli_load *l, json_t *doc, int argc, char **typed, bool redact);

/* Prints "squall: the run stopped on a script error: ..." and returns true when a script hook
 * stopped the run (the face then exits 1, its outputs written). */
bool sq_cli_load_script_failed(const struct sq_cli_load *l);

/* The exit status once the face's own is known: an agent's loss (cli/dist.h) and an output
 * that could not be written (written false) make a 0 into 1. */
int sq_cli_load_status(const struct sq_cli_load *l, int status, bool written);

/* The senders given at most 5 s to send what they hold, then one line on stderr each (with -q
 * only when a second failed or was dropped): "squall: --out influxdb: 10 of 10 seconds sent, 0
 * failed, 0 dropped (URL)", with the last error after it when there was one. sq_cli_load_run
 * calls it, once. */
void sq_cli_load_push_finish(struct sq_cli_load *l);

/* Frees what the run gave back; files not committed are removed (nothing was measured). */
void sq_cli_load_dispose(struct sq_cli_load *l);

#endif
