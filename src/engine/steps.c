/* engine/steps.c - per-step figures of a plan run: made in a flow's shape (making one step's,
 * freeing and merging them is the result model's: result/result.c). */
#include "engine/flow.h"
#include "engine/worker.h"

int sq_engine__steps_new(const struct sq_flow *f, struct sq_step_stats **out)
{
    int rc = sq_step_stats_new(f->nsteps, out);
    for (size_t i = 0; rc == 0 && i < f->nsteps; i++)
        rc = sq_step_stats_init(&(*out)[i], (uint32_t)f->steps[i].ps->nchecks);
    return rc;
}
