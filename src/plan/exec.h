/* plan/exec.h - executors: how much load a scenario offers over time (k6's names and semantics).
 *
 * Closed-model executors drive virtual users (VUs): each VU runs iterations back to back (one
 * request each in the quick face), optionally paced. Open-model executors start iterations at
 * arrival times fixed in advance, whatever the server does, and measure latency from each
 * arrival's intended time, so a slow server cannot slow the load down (no coordinated omission).
 *
 * The schedule is pure arithmetic on the configuration, shared read-only by every worker: worker
 * w of n takes arrivals w, w+n, w+2n... (and VUs likewise), so the shares always add up to the
 * whole for any rate, ramp or worker count.
 */
#ifndef SQ_PLAN_EXEC_H
#define SQ_PLAN_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SQ_EXEC_LIST(X)                                                                            \
    X(CONSTANT_VUS, "constant-vus")                                                                \
    X(RAMPING_VUS, "ramping-vus")                                                                  \
    X(CONSTANT_ARRIVAL_RATE, "constant-arrival-rate")                                              \
    X(RAMPING_ARRIVAL_RATE, "ramping-arrival-rate")                                                \
    X(PER_VU_ITERATIONS, "per-vu-iterations")                                                      \
    X(SHARED_ITERATIONS, "shared-iterations")

enum sq_exec_kind {
#define SQ_EXEC_ENUM(name, str) SQ_EXEC_##name,
    SQ_EXEC_LIST(SQ_EXEC_ENUM)
#undef SQ_EXEC_ENUM
        SQ_EXEC__COUNT
};

#define SQ_EXEC_MAX_STAGES 64

struct sq_stage {
    int64_t duration_ns;
    double target; /* VUs, or arrivals per time_unit */
};

struct sq_exec {
    enum sq_exec_kind kind;
    uint32_t vus;             /* constant-vus, *-iterations: VUs; arrival rate: connections */
    uint32_t start_vus;       /* ramping-vus */
    int64_t duration_ns;      /* constant-vus, constant-arrival-rate */
    int64_t max_duration_ns;  /* *-iterations (default 10 min) */
    int64_t graceful_stop_ns; /* how long in-flight iterations may finish after the end */
    uint64_t iterations;      /* per VU, or shared in all */
    double rate;              /* constant-arrival-rate, per time_unit */
    double start_rate;        /* ramping-arrival-rate, per time_unit */
    int64_t time_unit_ns;     /* default 1 s */
    uint64_t max_in_flight;   /* arrival rate: in flight + waiting for a connection; 0 = vus */
    int64_t pacing_ns;        /* closed model: minimum time between a VU's iteration starts */
    uint32_t max_vus;         /* arrival rate: the pool may grow to this many; 0 = vus (fixed) */
    int precision;            /* arrival rate: enum sq_pacing (how a worker waits for arrivals) */
    int64_t window_ns;        /* COARSE: the batch window (0: SQ_PACING_WINDOW_NS) */
    struct sq_stage stages[SQ_EXEC_MAX_STAGES];
    uint32_t nstages;
    /* Filled by sq_exec_prepare for the arrival schedule: per stage, its start (ns), the
     * arrivals expected before it, and its rates at both ends in arrivals per ns. */
    int64_t _t0[SQ_EXEC_MAX_STAGES];
    double _cum[SQ_EXEC_MAX_STAGES + 1];
    double _from[SQ_EXEC_MAX_STAGES], _to[SQ_EXEC_MAX_STAGES];
};

/* Open model: how a worker waits for its next arrival (docs/internals/engine.md, "Precise
 * waits"). NORMAL sleeps until a learnt low quantile of its own wake-up overshoot before the
 * arrival and polls what is left (most arrivals leave a few tens of µs late, nearly no spin);
 * HIGH polls the calibrated 90th percentile of the overshoot (on time, a busy core at high
 * rates); OFF sleeps until the arrival (late by the whole overshoot, no spin). COARSE releases
 * the arrivals in batches on a grid of SQ_PACING_WINDOW_NS (each at the end of the window it
 * falls in, its intended time from then on): one wake-up per window however high the rate. */
enum sq_pacing { SQ_PACING_NORMAL, SQ_PACING_HIGH, SQ_PACING_OFF, SQ_PACING_COARSE };
#define SQ_PACING_WINDOW_NS     (5 * 1000 * 1000)   /* COARSE's batch window: 5 ms */
#define SQ_PACING_WINDOW_MIN_NS (1000 * 1000)       /* coarse:D, D from 1 ms */
#define SQ_PACING_WINDOW_MAX_NS (100 * 1000 * 1000) /* to 100 ms (the sweep's period) */
/* "normal", "high", "off", "coarse"; the reverse returns -1 when unknown. */
const char *sq_pacing_name(int p);
int sq_pacing_from_name(const char *name);
/* A precision as a user writes it: a name, or "coarse:D" with its own window D (a duration,
 * ms by default, SQ_PACING_WINDOW_MIN_NS..SQ_PACING_WINDOW_MAX_NS) into *window_ns (0 for a
 * plain name: the default window). Returns the precision, -1 for an unknown name, -2 for a bad
 * window. */
int sq_pacing_parse(const char *s, int64_t *window_ns);

/* The executor's name as k6 spells it, and the reverse (-1 when unknown). */
const char *sq_exec_name(enum sq_exec_kind k);
int sq_exec_kind_from_name(const char *name);

/* Fills the defaults (time unit 1 s, max duration 10 min, max_in_flight = vus) and checks the
 * configuration. Returns 0, or -SQ_EUSAGE with *why naming the field and the problem. */
SQ_MUST_CHECK int sq_exec_prepare(struct sq_exec *e, const char **why);

/* True for the arrival-rate executors. */
bool sq_exec_is_open(const struct sq_exec *e);

/* How long the executor offers load (stages summed, duration, or max duration), before the
 * graceful stop. */
int64_t sq_exec_length_ns(const struct sq_exec *e);

/* The most VUs (or connections) the executor ever needs at once. */
uint32_t sq_exec_max_vus(const struct sq_exec *e);

/* Ramping VUs: how many VUs should be active t ns after the start (linear between stages,
 * rounded down, as k6 does). Constant VUs: vus. */
uint32_t sq_exec_vus_at(const struct sq_exec *e, int64_t t_ns);

/* Arrival executors: the number of arrivals due in [0, length): every i with
 * sq_exec_arrival_ns(e, i) < length. Exact: 1,000/s for 3 s is 3,000. */
uint64_t sq_exec_total_arrivals(const struct sq_exec *e);

/* Arrival executors: when arrival i (0-based, global) is due, in ns after the start. Arrival i is
 * due the moment the expected cumulative count of arrivals reaches i, integrating the rate curve
 * of each stage (linear ramps included). Returns INT64_MAX past the last stage. */
int64_t sq_exec_arrival_ns(const struct sq_exec *e, uint64_t i);

/* Arrival executors: the arrivals expected in [0, t_ns) (a real number: the rate curve integrated
 * to t_ns; arrival i is due when it reaches i). The whole schedule's count past its end. */
double sq_exec_expected(const struct sq_exec *e, int64_t t_ns);

/* Parses "10s:100,30s:100,10s:0" into e->stages. Returns 0 or -SQ_EUSAGE with *why set. */
SQ_MUST_CHECK int sq_exec_parse_stages(struct sq_exec *e, const char *s, const char **why);

/* ---- Execution segments (distributed runs; k6's semantics) ----
 *
 * A distributed run splits every executor across agents by an execution segment sequence: the
 * rationals 0 = s0 < s1 < ... < sN = 1, agent k running the segment (s_k, s_k+1]. Every quantity
 * is split by one rule, so the shares always add up to the whole: the global indices 0, 1, 2...
 * (of VUs, of iterations, of arrivals) are dealt to the segments in a fixed striped order, and a
 * segment's share of a count v is how many of the indices below v are its own. An agent's
 * arrivals are the global arrival indices it was dealt, each at its global time, so three agents
 * at 1,000/s interleave into one steady 3,000/s stream instead of three bursts in step.
 *
 * The order repeats every L indices, L the least common denominator of the sequence; within a
 * period the indices are dealt by Balinski and Young's quota method (the next index goes to the
 * segment with the largest len/(count+1) among those that would stay within their upper quota),
 * so every share of every count v stays within one of its exact proportion v * len: shares of
 * equal segments differ by at most one, and an even split deals round-robin (0,1,2,0,1,2...). */

struct sq_rat {
    uint64_t num, den; /* den > 0; kept reduced */
};

#define SQ_SEG_MAX_PARTS  1024    /* segments in one sequence */
#define SQ_SEG_MAX_PERIOD 1000000 /* the least common denominator of a sequence */

/* One segment of a sequence, with its stripe (sq_seg_init). */
struct sq_seg {
    struct sq_rat from, to;
    uint32_t index, count; /* its place in the sequence, and how many segments it has */
    uint64_t period;       /* L: the order repeats every L global indices */
    uint64_t per_period;   /* how many of each L are this segment's: L * (to - from) */
    uint64_t *pos;         /* those indices within [0, L), ascending (owned) */
};

/* Parses a sequence like "0,1/3,2/3,1" (fractions, decimals like 0.25, or percentages like 25%)
 * into out[0..*n), adding 0 and 1 when missing, as k6 does. The points must rise strictly.
 * Returns 0 or -SQ_EUSAGE with *why naming the problem. */
SQ_MUST_CHECK int sq_seg_parse_sequence(const char *s, struct sq_rat *out, uint32_t max,
                                        uint32_t *n, const char **why);

/* The even sequence of n parts: 0, 1/n, 2/n, ..., 1 (n + 1 points into out). */
void sq_seg_even(struct sq_rat *out, uint32_t n);

/* Builds segment `index` (0-based) of the sequence points[0..npoints). Returns 0, -SQ_EUSAGE (a
 * sequence that does not rise from 0 to 1, an index past its end, a period over
 * SQ_SEG_MAX_PERIOD: *why says so) or -ENOMEM. */
SQ_MUST_CHECK int sq_seg_init(struct sq_seg *s, const struct sq_rat *points, uint32_t npoints,
                              uint32_t index, const char **why);
void sq_seg_dispose(struct sq_seg *s);

/* The segment's share of a count v: how many of the global indices 0..v-1 are its own. The
 * shares of every segment of a sequence add up to v. s NULL (no segment: the whole) gives v. */
uint64_t sq_seg_share(const struct sq_seg *s, uint64_t v);

/* The global index of the segment's j-th own index (0-based). s NULL gives j. */
uint64_t sq_seg_global(const struct sq_seg *s, uint64_t j);

/* "1/3", or "0" and "1". */
void sq_rat_format(struct sq_rat r, char *buf, size_t size);

#endif
