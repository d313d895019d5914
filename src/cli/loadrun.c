/* cli/loadrun.c - see loadrun.h. */
#include "cli/loadrun.h"

#include <stdio.h>

#include "base/err.h"
#include "cli/cli.h"
#include "cli/control.h"
#include "cli/sinkrun.h"
#include "output/json.h"

int sq_cli_load_open(struct sq_cli_load *l, const char *csv, const char *hdr, const char *ndjson,
                     double sample)
{
    int rc = sq_cli_outputs_open(&l->outs);
    if (rc == 0)
        rc = sq_cli_series_open(&l->out, l->face, csv, hdr, ndjson, sample, l->cfg);
    return rc;
}

void sq_cli_load_tick(struct sq_cli_load *l, const struct sq_second *s, const struct sq_hist *h)
{
    if (l->show)
        sq_progress_tick(&l->progress, s);
    sq_cli_series_tick(&l->out, s, h);
}

void sq_cli_load_abandon(struct sq_cli_load *l)
{
    sq_cli_signals_end();
    sq_cli_sink_end(l->sink, &l->res, NULL, l->cfg->stop, NULL, 0);
}

/* The same run on agents: they get the face's job. */
static int dist_run(struct sq_cli_load *l, bool open, int64_t length_ns, sq_tick_cb on_tick,
                    void *tick_ud)
{
    struct sq_cli_dist x = {.face = l->face,
                            .d = l->d,
                            .job = l->job,
                            .open = open,
                            .length_ns = length_ns,
                            .on_tick = on_tick,
                            .tick_ud = tick_ud,
                            .stop = l->cfg->stop,
                            .progress = l->show ? &l->progress : NULL};
    l->dist = x;
    int rc = l->job ? sq_cli_dist_run(&l->dist, &l->res, &l->rep) : SQ_EXIT_FAIL;
    l->res.seed = l->cfg->seed; /* the agents' seed: the job carried it */
    return rc;
}

int sq_cli_load_run(struct sq_cli_load *l, bool open, int64_t length_ns, sq_tick_cb on_tick,
                    void *tick_ud)
{
    const char *why = NULL;
    int rc;
    if (l->d->agents) {
        /* a distributed run that could not run returns an exit status, not -errno */
        if ((rc = dist_run(l, open, length_ns, on_tick, tick_ud)) != 0) {
            sq_cli_load_abandon(l);
            return rc;
        }
    } else {
        struct sq_cli_control ctl;
        if ((rc = sq_cli_control_start(&ctl, l->d, l->cfg)) != 0) {
            sq_cli_load_abandon(l);
            return rc;
        }
        rc = sq_run(l->cfg, &l->res, &why);
        sq_cli_control_stop(&ctl, l->cfg);
    }
    l->sig = sq_cli_signal_seen(&l->forced);
    sq_progress_finish(&l->progress);
    sq_cli_series_report(&l->out, &l->res);
    if (rc < 0) {
        sq_cli_signals_end();
        fprintf(stderr, "squall: %s: %s\n", why, sq_strerror(rc));
        sq_cli_sink_end(l->sink, &l->res, NULL, l->cfg->stop, NULL, 0);
        return SQ_EXIT_FAIL;
    }
    return 0;
}

void sq_cli_load_measured(struct sq_cli_load *l)
{
    sq_cli_series_close(&l->out, true);
    if (l->sig)
        sq_cli_signal_mark(&l->res, l->sig, l->forced);
}

json_t *sq_cli_load_doc(struct sq_cli_load *l, json_t *doc, int argc, char **typed, bool redact)
{
    l->sink_failed =
        sq_cli_sink_end(l->sink, &l->res, doc, l->cfg->stop, l->sink_why, sizeof(l->sink_why));
    if (!l->sig && l->sink) /* a signal while the sink waited for the last events */
        l->sig = sq_cli_signal_seen(&l->forced);
    sq_cli_signals_end();
    if (doc && l->d->agents && sq_cli_dist_doc(doc, &l->rep) < 0) {
        json_decref(doc);
        doc = NULL;
    }
    if (!doc) {
        fprintf(stderr, "squall: out of memory building the result\n");
        return NULL;
    }
    if (typed)
        sq_report_set_command(doc, argc, typed, redact);
    if (l->sig)
        sq_cli_signal_doc(doc, l->sig, l->forced);
    return doc;
}

bool sq_cli_load_script_failed(const struct sq_cli_load *l)
{
    if (!l->res.script_error)
        return false;
    fprintf(stderr, "squall: the run stopped on a script error: %s\n", l->res.script_error);
    return true;
}

int sq_cli_load_status(const struct sq_cli_load *l, int status, bool written)
{
    if (l->d->agents)
        status = sq_cli_dist_status(&l->dist, &l->rep, status);
    if (!written && status == SQ_EXIT_OK)
        status = SQ_EXIT_FAIL;
    return status;
}

void sq_cli_load_dispose(struct sq_cli_load *l)
{
    sq_cli_signals_end();
    sq_cli_series_close(&l->out, false); /* what was not committed: nothing measured */
    sq_result_dispose(&l->res);          /* before rep: a distributed result borrows its strings */
    sq_cluster_report_dispose(&l->rep);
    json_decref(l->job);
    l->job = NULL;
}
