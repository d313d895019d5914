/* cli/loadrun.c - see loadrun.h. */
#include "cli/loadrun.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "cli/cli.h"
#include "cli/control.h"
#include "cli/sinkrun.h"
#include "engine/flow.h"
#include "output/json.h"
#include "plan/plan.h"

static void tagsets_free(uint32_t *step_set, struct sq_push_tagset *sets, uint32_t n)
{
    for (uint32_t j = 0; sets && j < n; j++)
        free((void *)sets[j].keys);
    free(sets);
    free(step_set);
}

int sq_cli_load_open(struct sq_cli_load *l, const char *csv, const char *hdr, const char *ndjson,
                     double sample)
{
    int rc = sq_cli_outputs_open(&l->outs);
    l->out.metrics = l->metrics;
    l->out.nmetrics = l->nmetrics;
    if (rc == 0)
        rc = sq_cli_series_open(&l->out, l->face, csv, hdr, ndjson, sample, l->cfg);
    if (rc != 0)
        return rc;
    /* the run's id in the series: its start (ms since the epoch) and this process */
    char id[64];
    snprintf(id, sizeof(id), "%llx-%d", (unsigned long long)(sq_wall_s() * 1000), (int)getpid());
    struct sq_push_metric pm[SQ_PLAN_METRICS_MAX];
    uint32_t nm = l->nmetrics < SQ_PLAN_METRICS_MAX ? l->nmetrics : SQ_PLAN_METRICS_MAX;
    for (uint32_t m = 0; m < nm; m++)
        pm[m] =
            (struct sq_push_metric){.name = l->metrics[m].name, .kind = (int)l->metrics[m].kind};
    struct sq_push_labels lab = {
        .run = l->run_name, .run_id = id, .open = l->push_open, .metrics = pm, .nmetrics = nm};
    /* the metrics split by the steps' tags (identical tag sets pushed as one); a distributed
     * run's seconds carry per-metric sums only, pushed untagged */
    uint32_t *step_set = NULL;
    struct sq_push_tagset *sets = NULL;
    uint32_t nsteps = 0, nsets = 0;
    for (uint32_t i = 0; nm && !l->d->agents && l->cfg->scens && i < l->cfg->nscens; i++)
        nsteps += (uint32_t)l->cfg->scens[i].flow->nsteps;
    if (nsteps) {
        step_set = calloc(nsteps, sizeof(*step_set));
        sets = calloc(nsteps, sizeof(*sets));
        if (!step_set || !sets)
            nsteps = 0; /* out of memory: untagged */
    }
    for (uint32_t i = 0, g = 0; nsteps && i < l->cfg->nscens; i++) {
        const struct sq_flow *f = l->cfg->scens[i].flow;
        for (size_t k = 0; k < f->nsteps; k++, g++) {
            const struct sq_plan_step *ps = f->steps[k].ps;
            uint32_t j = 0;
            for (; j < nsets; j++) {
                const struct sq_push_tagset *t = &sets[j];
                bool same = t->n == ps->ntags;
                for (uint32_t x = 0; same && x < t->n; x++)
                    same = strcmp(t->keys[x], ps->tags[x].key) == 0 &&
                           strcmp(t->vals[x], ps->tags[x].value) == 0;
                if (same)
                    break;
            }
            if (j == nsets) {
                sets[nsets] = (struct sq_push_tagset){0};
                const char **kv = ps->ntags ? calloc(2 * (size_t)ps->ntags, sizeof(*kv)) : NULL;
                if (kv) {
                    for (uint32_t x = 0; x < ps->ntags; x++) {
                        kv[x] = ps->tags[x].key;
                        kv[ps->ntags + x] = ps->tags[x].value;
                    }
                    sets[nsets] = (struct sq_push_tagset){ps->ntags, kv, kv + ps->ntags};
                }
                nsets++;
            }
            step_set[g] = j;
        }
    }
    lab.step_set = step_set;
    lab.nsteps = nsteps;
    lab.sets = sets;
    lab.nsets = nsteps ? nsets : 0;
    for (int k = 0; k < 2; k++) {
        if (!l->push_url[k])
            continue;
        char why[640];
        int e = sq_push_open((enum sq_push_kind)k, l->push_url[k], &lab, l->cfg->egress,
                             &l->push[k], why, sizeof(why));
        if (e < 0) {
            tagsets_free(step_set, sets, nsets);
            fprintf(stderr, "%s: %s\n", l->face, why);
            return e == -SQ_EUSAGE || e == -ENOTSUP || e == -EACCES ? SQ_EXIT_USAGE : SQ_EXIT_FAIL;
        }
    }
    tagsets_free(step_set, sets, nsets); /* sq_push_open copied them */
    return 0;
}

void sq_cli_load_tick(struct sq_cli_load *l, const struct sq_second *s, const struct sq_hist *h)
{
    if (l->show)
        sq_progress_tick(&l->progress, s);
    sq_cli_series_tick(&l->out, s, h);
    for (int k = 0; k < 2; k++) {
        /* the engine's start (set before its first second; a distributed run's controller
         * leaves it 0 until the end: then the push guesses it) */
        sq_push_set_start(l->push[k], (double)l->res.wall_start_ns / 1e9);
        sq_push_tick(l->push[k], s);
    }
}

void sq_cli_load_push_finish(struct sq_cli_load *l)
{
    for (int k = 0; k < 2; k++) {
        struct sq_push *p = l->push[k];
        if (!p)
            continue;
        sq_push_finish(p, 5.0);
        struct sq_push_stats st;
        sq_push_stats(p, &st);
        if (!l->show && !st.failed && !st.dropped)
            continue;
        fprintf(stderr,
                "squall: --out %s: %llu of %llu seconds sent, %llu failed, %llu dropped (%s)%s%s\n",
                sq_push_flag((enum sq_push_kind)k), (unsigned long long)st.sent,
                (unsigned long long)st.points, (unsigned long long)st.failed,
                (unsigned long long)st.dropped, sq_push_url(p), st.last_error[0] ? ": " : "",
                st.last_error);
    }
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
    sq_cli_load_push_finish(l);
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
    if (l->push[0] || l->push[1]) {
        json_t *o = json_object();
        bool bad = !o;
        for (int k = 0; !bad && k < 2; k++)
            bad = l->push[k] && json_object_set_new(o, sq_push_flag((enum sq_push_kind)k),
                                                    sq_push_json(l->push[k])) < 0;
        if (bad)
            json_decref(o);
        if (bad || json_object_set_new(doc, "push", o) < 0) {
            json_decref(doc);
            fprintf(stderr, "squall: out of memory building the result\n");
            return NULL;
        }
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
    for (int k = 0; k < 2; k++) {
        sq_push_free(l->push[k]); /* a run that did not go: nothing queued, no wait */
        l->push[k] = NULL;
    }
    sq_result_dispose(&l->res); /* before rep: a distributed result borrows its strings */
    sq_cluster_report_dispose(&l->rep);
    json_decref(l->job);
    l->job = NULL;
}
