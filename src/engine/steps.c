/* engine/steps.c - per-step figures of a plan run: allocation and merging. */
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

void sq_engine__steps_free(struct sq_step_stats *s, size_t n)
{
    if (!s)
        return;
    for (size_t i = 0; i < n; i++) {
        free(s[i].check_pass);
        free(s[i].check_fail);
        sq_hist_free(s[i].dur);
        for (uint32_t k = 0; k < s[i].nstatus; k++)
            sq_hist_free(s[i].by_status[k].h);
    }
    free(s);
}

void sq_engine__steps_merge_one(struct sq_step_stats *d, const struct sq_step_stats *s,
                                size_t nchecks)
{
    d->reqs += s->reqs;
    d->failed += s->failed;
    d->errors += s->errors;
    d->extract_fail += s->extract_fail;
    sq_hist_merge(d->dur, s->dur);
    for (size_t k = 0; k < nchecks; k++) {
        d->check_pass[k] += s->check_pass[k];
        d->check_fail[k] += s->check_fail[k];
    }
    for (uint32_t i = 0; i < s->nstatus; i++) {
        uint32_t j = 0;
        while (j < d->nstatus && d->by_status[j].status != s->by_status[i].status)
            j++;
        if (j == d->nstatus) {
            if (j == SQ_STEP_STATUSES || sq_latency_hist_new(&d->by_status[j].h) < 0)
                continue;
            d->by_status[j].status = s->by_status[i].status;
            d->nstatus++;
        }
        d->by_status[j].n += s->by_status[i].n;
        sq_hist_merge(d->by_status[j].h, s->by_status[i].h);
    }
}
