/* engine/steps.c - per-step figures of a plan run: allocated from a flow's shape (freeing and
 * merging them is the result model's: result/result.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/flow.h"
#include "engine/worker.h"
#include "stats/hist.h"

int sq_engine__steps_new(const struct sq_flow *f, struct sq_step_stats **out)
{
    struct sq_step_stats *s = calloc(f->nsteps ? f->nsteps : 1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    *out = s;
    for (size_t i = 0; i < f->nsteps; i++) {
        size_t nc = f->steps[i].ps->nchecks;
        s[i].check_pass = calloc(nc ? nc : 1, sizeof(uint64_t));
        s[i].check_fail = calloc(nc ? nc : 1, sizeof(uint64_t));
        s[i].nchecks = (uint32_t)nc;
        if (!s[i].check_pass || !s[i].check_fail)
            return -ENOMEM;
        int rc = sq_latency_hist_new(&s[i].dur);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The bodies are result/result.c's (sq_step_stats_free, sq_step_stats_merge); worker.c and
 * run.c reach them under the engine's internal names too. */
void sq_engine__steps_free(struct sq_step_stats *s, size_t n)
{
    sq_step_stats_free(s, n);
}

void sq_engine__steps_merge_one(struct sq_step_stats *d, const struct sq_step_stats *s,
                                size_t nchecks)
{
    sq_step_stats_merge(d, s, nchecks);
}
