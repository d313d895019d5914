/* cli/sinkrun.c - the command line's words around a sink beside a load run (see sinkrun.h). */
#include "cli/sinkrun.h"

#include <stdio.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "sink/sink.h"

int sq_cli_sink_plan_check(const struct sq_plan *p)
{
    char err[1024];
    if (sq_sink_beside_plan_check(p, NULL, NULL, err, sizeof(err)) == 0)
        return 0;
    fprintf(stderr, "squall: %s\n", err);
    return SQ_EXIT_USAGE;
}

int sq_cli_sink_begin(const char *face, const struct sq_sink_beside_opts *o, uint64_t run_id,
                      struct sq_sink **out)
{
    char err[512] = "";
    bool subscribed;
    int rc = sq_sink_beside_start(o, run_id, NULL, out, &subscribed, err, sizeof(err));
    if (rc == -SQ_EUSAGE)
        return sq_cli_usage_error(face, "--sink: %s", err);
    if (rc < 0) {
        sq_cli_error(face, "--sink: %s", err);
        return SQ_EXIT_FAIL;
    }
    if (!subscribed)
        fprintf(stderr,
                "%s: --sink: not subscribed after 5s; the load starts anyway (events "
                "before the subscription are lost to the sink)\n",
                face);
    return 0;
}

bool sq_cli_sink_end(struct sq_sink *s, const struct sq_result *res, json_t *doc,
                     volatile int *stop, char *why, size_t len)
{
    struct sq_sink_sent sent = {res->run_id, res->stamped, res->nstreams,
                                (const uint64_t *const *)res->unfinished, res->nunfinished};
    json_t *block = sq_sink_beside_end(s, &sent, stop, why, len);
    if (block && doc)
        json_object_set_new(doc, "sink", block);
    else
        json_decref(block);
    return s && len && why[0];
}
