/* engine/steps.c - per-step figures of a plan run: made in a flow's shape (making one step's,
 * freeing and merging them is the result model's: result/result.c). */
#include "engine/flow.h"
#include "engine/worker.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats/hist.h"

int sq_engine__steps_new(const struct sq_flow *f, struct sq_step_stats **out)
{
    int rc = sq_step_stats_new(f->nsteps, out);
    for (size_t i = 0; rc == 0 && i < f->nsteps; i++) {
        rc = sq_step_stats_init(&(*out)[i], (uint32_t)f->steps[i].ps->nchecks);
        if (rc == 0)
            rc = sq_step_stats_metrics(&(*out)[i], sq_plan_step_nslots(f->plan, f->steps[i].ps));
        if (rc == 0 && f->steps[i].ps->batch)
            rc = sq_latency_hist_new(&(*out)[i].batch_dur);
    }
    return rc;
}

/* A templated value as a number: the whole text, finite. */
static bool read_number(const struct sq_buf *b, double *out)
{
    char tmp[64];
    if (!b->len || b->len >= sizeof(tmp))
        return false;
    memcpy(tmp, b->p, b->len);
    tmp[b->len] = '\0';
    char *end = NULL;
    double x = strtod(tmp, &end);
    if (end != tmp + b->len || !isfinite(x))
        return false;
    *out = x;
    return true;
}

void sq_engine__step_metrics(const struct sq_flow *f, struct sq_flow_vu *v,
                             const struct sq_plan_step *ps, struct sq_step_stats *ss, bool held,
                             int64_t now)
{
    for (uint32_t k = 0; k < ps->nmetrics && k < ss->nmvals; k++) {
        const struct sq_step_metric *sm = &ps->metrics[k];
        struct sq_step_mval *mv = &ss->mvals[k];
        double x = sm->value;
        if (sm->src == SQ_SMS_CHECKS) {
            x = held ? 1 : 0;
        } else if (sm->src == SQ_SMS_TMPL) {
            sq_buf_reset(&v->val);
            if (sq_flow_render(f, v, sm->tmp, &v->val) < 0 || !read_number(&v->val, &x)) {
                mv->bad++;
                continue;
            }
        }
        sq_engine__mval_add(mv, x, now);
    }
}

void sq_engine__mval_add(struct sq_step_mval *mv, double x, int64_t now)
{
    mv->n++;
    mv->nonzero += x != 0;
    mv->sum += x;
    mv->last = x;
    mv->last_ns = now;
    /* trends: milliseconds kept in µs, as request durations are (negative: not recorded) */
    if (x >= 0 && x < 9.2e15)
        sq_hist_record(mv->h, (int64_t)llround(x * 1000.0));
}
