/* plan/exec.c - executor validation and schedule arithmetic.
 *
 * Arrival schedule. Within a stage of length D whose rate moves linearly from f to g (arrivals
 * per ns), the expected count after t ns is N(t) = f*t + (g-f)*t^2/(2D). Arrival k of the stage
 * is due when N(t) = k, i.e.
 *     t = 2k / (f + sqrt(f^2 + 2k(g-f)/D))
 * which is the root of the quadratic written so that it stays exact for flat stages (t = k/f),
 * ramps that start at zero (t = sqrt(2kD/g)) and ramps down, without dividing by g - f.
 */
#include "plan/exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/parse.h"

static const char *const exec_names[] = {
#define SQ_EXEC_STR(name, str) str,
    SQ_EXEC_LIST(SQ_EXEC_STR)
#undef SQ_EXEC_STR
};

const char *sq_exec_name(enum sq_exec_kind k)
{
    return (unsigned)k < SQ_EXEC__COUNT ? exec_names[k] : "?";
}

int sq_exec_kind_from_name(const char *name)
{
    for (int i = 0; i < SQ_EXEC__COUNT; i++)
        if (strcmp(exec_names[i], name) == 0)
            return i;
    return -1;
}

bool sq_exec_is_open(const struct sq_exec *e)
{
    return e->kind == SQ_EXEC_CONSTANT_ARRIVAL_RATE || e->kind == SQ_EXEC_RAMPING_ARRIVAL_RATE;
}

static int64_t stages_length(const struct sq_exec *e)
{
    int64_t sum = 0;
    for (uint32_t i = 0; i < e->nstages; i++)
        sum += e->stages[i].duration_ns;
    return sum;
}

int64_t sq_exec_length_ns(const struct sq_exec *e)
{
    switch (e->kind) {
    case SQ_EXEC_CONSTANT_VUS:
    case SQ_EXEC_CONSTANT_ARRIVAL_RATE:
        return e->duration_ns;
    case SQ_EXEC_RAMPING_VUS:
    case SQ_EXEC_RAMPING_ARRIVAL_RATE:
        return stages_length(e);
    default:
        return e->max_duration_ns;
    }
}

uint32_t sq_exec_max_vus(const struct sq_exec *e)
{
    if (e->kind != SQ_EXEC_RAMPING_VUS)
        return e->vus;
    double m = e->start_vus;
    for (uint32_t i = 0; i < e->nstages; i++)
        if (e->stages[i].target > m)
            m = e->stages[i].target;
    return (uint32_t)m;
}

uint32_t sq_exec_vus_at(const struct sq_exec *e, int64_t t)
{
    if (e->kind != SQ_EXEC_RAMPING_VUS)
        return e->vus;
    double from = e->start_vus;
    for (uint32_t i = 0; i < e->nstages; i++) {
        const struct sq_stage *s = &e->stages[i];
        if (t < s->duration_ns) {
            double v = from + (s->target - from) * (double)t / (double)s->duration_ns;
            return (uint32_t)floor(v + 1e-9);
        }
        t -= s->duration_ns;
        from = s->target;
    }
    return (uint32_t)from;
}

/* Builds the cumulative arrival table; constant-arrival-rate is one flat stage. */
static void build_schedule(struct sq_exec *e)
{
    double per_ns = 1.0 / (double)e->time_unit_ns;
    if (e->kind == SQ_EXEC_CONSTANT_ARRIVAL_RATE) {
        e->nstages = 1;
        e->stages[0].duration_ns = e->duration_ns;
        e->stages[0].target = e->rate;
        e->start_rate = e->rate;
    }
    double from = e->start_rate * per_ns, cum = 0;
    int64_t t0 = 0;
    for (uint32_t i = 0; i < e->nstages; i++) {
        double to = e->stages[i].target * per_ns;
        e->_t0[i] = t0;
        e->_cum[i] = cum;
        e->_from[i] = from;
        e->_to[i] = to;
        cum += (from + to) / 2 * (double)e->stages[i].duration_ns;
        t0 += e->stages[i].duration_ns;
        from = to;
    }
    e->_cum[e->nstages] = cum;
}

uint64_t sq_exec_total_arrivals(const struct sq_exec *e)
{
    double n = e->_cum[e->nstages];
    /* Arrival i is due before the end iff i < n; float noise below 1e-6 is not an arrival. */
    return n <= 0 ? 0 : (uint64_t)ceil(n - 1e-6);
}

int64_t sq_exec_arrival_ns(const struct sq_exec *e, uint64_t i)
{
    double x = (double)i;
    for (uint32_t s = 0; s < e->nstages; s++) {
        if (x >= e->_cum[s + 1])
            continue;
        double k = x - e->_cum[s], f = e->_from[s], g = e->_to[s];
        double d = (double)e->stages[s].duration_ns;
        if (k <= 0)
            return e->_t0[s];
        double t;
        if (f == g) {
            t = k / f;
        } else {
            double disc = f * f + 2 * k * (g - f) / d;
            t = 2 * k / (f + sqrt(disc > 0 ? disc : 0));
        }
        if (!(t < d))
            t = d;
        return e->_t0[s] + llround(t); /* nearest ns: k/f is never exact in binary */
    }
    return INT64_MAX;
}

static bool whole(double v)
{
    return v >= 0 && v == floor(v) && v < 1e7;
}

int sq_exec_prepare(struct sq_exec *e, const char **why)
{
    if ((unsigned)e->kind >= SQ_EXEC__COUNT) {
        *why = "executor: unknown kind";
        return -SQ_EUSAGE;
    }
    if (e->time_unit_ns == 0)
        e->time_unit_ns = SQ_NS_PER_S;
    if (e->max_duration_ns == 0)
        e->max_duration_ns = 600 * SQ_NS_PER_S;
    bool open = sq_exec_is_open(e);
    bool ramping = e->kind == SQ_EXEC_RAMPING_VUS || e->kind == SQ_EXEC_RAMPING_ARRIVAL_RATE;
    if (e->time_unit_ns < 0) {
        *why = "timeUnit: must be positive";
        return -SQ_EUSAGE;
    }
    if (e->kind != SQ_EXEC_RAMPING_VUS && e->vus == 0) {
        *why =
            open ? "preAllocatedVUs (connections): must be at least 1" : "vus: must be at least 1";
        return -SQ_EUSAGE;
    }
    if ((e->kind == SQ_EXEC_CONSTANT_VUS || e->kind == SQ_EXEC_CONSTANT_ARRIVAL_RATE) &&
        e->duration_ns <= 0) {
        *why = "duration: must be positive";
        return -SQ_EUSAGE;
    }
    if (e->kind == SQ_EXEC_CONSTANT_ARRIVAL_RATE && !(e->rate > 0 && isfinite(e->rate))) {
        *why = "rate: must be a positive number";
        return -SQ_EUSAGE;
    }
    if (ramping) {
        if (e->nstages == 0) {
            *why = "stages: at least one stage is needed";
            return -SQ_EUSAGE;
        }
        for (uint32_t i = 0; i < e->nstages; i++) {
            double v = e->stages[i].target;
            if (e->stages[i].duration_ns < 0 || !(v >= 0 && isfinite(v)) ||
                (e->kind == SQ_EXEC_RAMPING_VUS && !whole(v))) {
                *why = e->kind == SQ_EXEC_RAMPING_VUS
                           ? "stages: each needs a duration and a whole number of VUs"
                           : "stages: each needs a duration and a rate >= 0";
                return -SQ_EUSAGE;
            }
        }
        if (stages_length(e) <= 0) {
            *why = "stages: the stages add up to no time";
            return -SQ_EUSAGE;
        }
        if (e->kind == SQ_EXEC_RAMPING_ARRIVAL_RATE && !(e->start_rate >= 0)) {
            *why = "startRate: must be >= 0";
            return -SQ_EUSAGE;
        }
        if (e->kind == SQ_EXEC_RAMPING_VUS && sq_exec_max_vus(e) == 0) {
            *why = "stages: no stage has a VU";
            return -SQ_EUSAGE;
        }
    }
    if ((e->kind == SQ_EXEC_PER_VU_ITERATIONS || e->kind == SQ_EXEC_SHARED_ITERATIONS) &&
        e->iterations == 0) {
        *why = "iterations: must be at least 1";
        return -SQ_EUSAGE;
    }
    if (e->kind == SQ_EXEC_SHARED_ITERATIONS && e->vus > e->iterations)
        e->vus = (uint32_t)e->iterations; /* a VU with no iteration would only idle */
    if (open) {
        if (e->max_in_flight == 0)
            e->max_in_flight = e->vus;
        if (e->max_in_flight < e->vus) {
            *why = "max-in-flight: must be at least the number of connections";
            return -SQ_EUSAGE;
        }
        if (e->pacing_ns) {
            *why = "pacing: applies to VU executors, not to arrival rates";
            return -SQ_EUSAGE;
        }
        build_schedule(e);
    }
    if (e->pacing_ns < 0 || e->graceful_stop_ns < 0) {
        *why = "pacing and gracefulStop: must not be negative";
        return -SQ_EUSAGE;
    }
    return 0;
}

int sq_exec_parse_stages(struct sq_exec *e, const char *s, const char **why)
{
    e->nstages = 0;
    const char *p = s;
    while (*p) {
        if (e->nstages == SQ_EXEC_MAX_STAGES) {
            *why = "stages: at most 64";
            return -SQ_EUSAGE;
        }
        const char *colon = strchr(p, ':');
        const char *comma = strchr(p, ',');
        if (!comma)
            comma = p + strlen(p);
        if (!colon || colon > comma) {
            *why = "stages: expected DURATION:TARGET[,DURATION:TARGET...] e.g. 10s:100,30s:100";
            return -SQ_EUSAGE;
        }
        char dur[32], tgt[32];
        size_t dl = (size_t)(colon - p), tl = (size_t)(comma - colon - 1);
        if (dl == 0 || dl >= sizeof(dur) || tl == 0 || tl >= sizeof(tgt)) {
            *why = "stages: expected DURATION:TARGET[,DURATION:TARGET...] e.g. 10s:100,30s:100";
            return -SQ_EUSAGE;
        }
        memcpy(dur, p, dl);
        dur[dl] = '\0';
        memcpy(tgt, colon + 1, tl);
        tgt[tl] = '\0';
        struct sq_stage *st = &e->stages[e->nstages];
        char *end;
        st->target = strtod(tgt, &end);
        if (sq_parse_duration(dur, SQ_NS_PER_S, &st->duration_ns) < 0 || *end ||
            !(st->target >= 0) || !isfinite(st->target)) {
            *why = "stages: each stage is DURATION:TARGET with a duration like 10s and a "
                   "target >= 0";
            return -SQ_EUSAGE;
        }
        e->nstages++;
        if (*comma && !comma[1]) {
            *why = "stages: a trailing comma";
            return -SQ_EUSAGE;
        }
        p = *comma ? comma + 1 : comma;
    }
    if (e->nstages == 0) {
        *why = "stages: at least one stage is needed";
        return -SQ_EUSAGE;
    }
    return 0;
}
