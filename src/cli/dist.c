/* cli/dist.c - see dist.h. */
#include "cli/dist.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "output/progress.h"

json_t *sq_cli_dist_args(int argc, char **argv, int from, uint64_t seed)
{
    /* the run's seed first: before any "--" that ends the flags, and the same number as a
     * --seed of the user's, which wins over a plan's seed: on the agents as it did here */
    char flag[40];
    snprintf(flag, sizeof(flag), "--seed=%llu", (unsigned long long)seed);
    json_t *a = json_array();
    if (a && json_array_append_new(a, json_string(flag)) < 0) {
        json_decref(a);
        return NULL;
    }
    for (int i = from; a && i < argc; i++) {
        json_t *s = json_string(argv[i]);
        if (!s || json_array_append_new(a, s) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static void on_event(void *ud, const char *line)
{
    const struct sq_cli_dist *x = ud;
    if (x->progress && x->progress->tty)
        fputs("\r\033[K", stderr); /* the progress line is redrawn at the next tick */
    fprintf(stderr, "squall: %s\n", line);
}

int sq_cli_dist_run(const struct sq_cli_dist *x, struct sq_result *res,
                    struct sq_cluster_report *rep)
{
    char *job = json_dumps(x->job, JSON_COMPACT);
    if (!job) {
        fprintf(stderr, "squall: out of memory\n");
        return SQ_EXIT_FAIL;
    }
    struct sq_rat pt[SQ_SEG_MAX_PARTS + 1];
    uint32_t np = 0;
    const char *why;
    bool seq = x->d->segments &&
               sq_seg_parse_sequence(x->d->segments, pt, SQ_SEG_MAX_PARTS + 1, &np, &why) == 0;
    struct sq_cluster_config cfg = {
        .nats_url = x->d->nats,
        .nats_tls = sq_distopts_tls(x->d),
        .nats_tls_first = x->d->nats_tls_first,
        .prefix = x->d->prefix,
        .agents = (uint32_t)x->d->agents,
        .wait_ns = x->d->agent_wait_ns,
        .outage_ns = x->d->nats_outage_ns,
        .sequence = seq ? pt : NULL,
        .job = job,
        .open = x->open,
        .length_ns = x->length_ns,
        .stop = x->stop,
        .on_tick = x->on_tick,
        .tick_ud = x->tick_ud,
        .on_event = on_event,
        .event_ud = (void *)x,
    };
    char err[1024];
    int rc = sq_cluster_run(&cfg, res, rep, err, sizeof(err));
    free(job);
    if (rc < 0) {
        if (x->progress && x->progress->tty)
            fputs("\r\033[K", stderr);
        if (rc == -SQ_EUSAGE) /* the URL, or a TLS file that does not load: nothing was sent */
            return sq_cli_usage_error("squall", "--nats: %s", err);
        fprintf(stderr, "squall: %s%s\n", err,
                rc == -SQ_ETLS && strstr(err, "verify")
                    ? " (--nats-cacert FILE: the CAs to trust; --nats-insecure: verify "
                      "nothing)"
                    : "");
        return SQ_EXIT_FAIL;
    }
    return 0;
}

int sq_cli_dist_doc(json_t *doc, const struct sq_cluster_report *rep)
{
    json_t *c = sq_cluster_report_json(rep);
    if (!c)
        return -ENOMEM;
    return json_object_set_new(doc, "cluster", c) < 0 ? -ENOMEM : 0;
}

int sq_cli_dist_status(const struct sq_cli_dist *x, const struct sq_cluster_report *rep, int status)
{
    if (rep->incomplete[0])
        fprintf(stderr, "squall: the result is incomplete: %s\n", rep->incomplete);
    if (!rep->incomplete[0] || status != SQ_EXIT_OK)
        return status;
    if (rep->nats_gave_up) /* not an agent's loss: the run's tail is missing from every agent */
        return SQ_EXIT_FAIL;
    if (rep->lost)
        fprintf(stderr, "squall: %u of %u agents lost during the run%s\n", rep->lost, rep->n,
                x->d->tolerate_loss ? " (tolerated: --tolerate-agent-loss)" : "");
    return x->d->tolerate_loss ? SQ_EXIT_OK : SQ_EXIT_FAIL;
}
