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

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/parse.h"

static const char *const exec_names[] = {SQ_EXEC_LIST(SQ_LIST_STR)};

const char *sq_exec_name(enum sq_exec_kind k)
{
    return SQ_NAME_AT(exec_names, k);
}

static const char *const pacing_names[] = {"normal", "high", "off", "coarse"};

const char *sq_pacing_name(int p)
{
    return SQ_NAME_AT(pacing_names, p);
}

int sq_pacing_from_name(const char *name)
{
    for (int i = 0; i < (int)SQ_ARRAY_LEN(pacing_names); i++)
        if (strcmp(pacing_names[i], name) == 0)
            return i;
    return -1;
}

int sq_pacing_parse(const char *s, int64_t *window_ns)
{
    *window_ns = 0;
    if (strncmp(s, "coarse:", 7) != 0)
        return sq_pacing_from_name(s);
    int64_t ns;
    if (sq_parse_duration(s + 7, SQ_NS_PER_MS, &ns) < 0 || ns < SQ_PACING_WINDOW_MIN_NS ||
        ns > SQ_PACING_WINDOW_MAX_NS)
        return -2;
    *window_ns = ns;
    return SQ_PACING_COARSE;
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
    if (sq_exec_is_open(e) && e->max_vus > e->vus)
        return e->max_vus; /* the pool may grow that far */
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

double sq_exec_expected(const struct sq_exec *e, int64_t t_ns)
{
    for (uint32_t s = 0; s < e->nstages; s++) {
        int64_t d = e->stages[s].duration_ns;
        if (t_ns >= e->_t0[s] + d)
            continue;
        double k = t_ns > e->_t0[s] ? (double)(t_ns - e->_t0[s]) : 0;
        double f = e->_from[s], g = e->_to[s];
        return e->_cum[s] + f * k + (g - f) * k * k / (2 * (double)d);
    }
    return e->_cum[e->nstages];
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
        if (e->max_vus == 0)
            e->max_vus = e->vus;
        if (e->max_vus < e->vus) {
            *why = "max-vus: must be at least the number of connections";
            return -SQ_EUSAGE;
        }
        if (e->max_in_flight == 0)
            e->max_in_flight = e->max_vus;
        if (e->max_in_flight < e->vus) {
            *why = "max-in-flight: must be at least the number of connections";
            return -SQ_EUSAGE;
        }
        if (e->max_in_flight < e->max_vus) {
            *why = "max-in-flight: must be at least max-vus";
            return -SQ_EUSAGE;
        }
        if ((unsigned)e->precision > SQ_PACING_COARSE) {
            *why = "pacing-precision: must be high, normal, off or coarse";
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

/* ---- execution segments ---- */

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static struct sq_rat rat_reduce(uint64_t num, uint64_t den)
{
    uint64_t g = gcd_u64(num, den);
    return (struct sq_rat){num / g, den / g};
}

/* a < b, exactly (num and den below 2^32 each after parsing, so the products fit). */
static bool rat_less(struct sq_rat a, struct sq_rat b)
{
    return (unsigned __int128)a.num * b.den < (unsigned __int128)b.num * a.den;
}

/* One point: "1/3", "0.25", "25%", "0", "1". */
static int parse_point(const char *s, size_t len, struct sq_rat *out)
{
    char buf[48];
    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    uint64_t num = 0, den = 1;
    const char *p = buf;
    if (!(*p >= '0' && *p <= '9'))
        return -1;
    while (*p >= '0' && *p <= '9') {
        if (num > 100000000)
            return -1;
        num = num * 10 + (uint64_t)(*p++ - '0');
    }
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return -1;
        while (*p >= '0' && *p <= '9') {
            if (den >= 1000000000)
                return -1;
            num = num * 10 + (uint64_t)(*p++ - '0');
            den *= 10;
        }
    }
    if (*p == '%') {
        p++;
        if (den > 10000000)
            return -1;
        den *= 100;
    } else if (*p == '/' && den == 1) {
        p++;
        uint64_t d = 0;
        if (!(*p >= '1' && *p <= '9'))
            return -1;
        while (*p >= '0' && *p <= '9') {
            if (d > 100000000)
                return -1;
            d = d * 10 + (uint64_t)(*p++ - '0');
        }
        den = d;
    }
    if (*p || num > den)
        return -1;
    *out = rat_reduce(num, den);
    return 0;
}

int sq_seg_parse_sequence(const char *s, struct sq_rat *out, uint32_t max, uint32_t *n,
                          const char **why)
{
    uint32_t k = 0;
    const char *p = s;
    if (max < 2) {
        *why = "execution segment sequence: no room";
        return -SQ_EUSAGE;
    }
    out[k++] = (struct sq_rat){0, 1};
    bool first = true;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        struct sq_rat r;
        if (parse_point(p, len, &r) < 0) {
            *why = "execution segment sequence: each point is a fraction between 0 and 1 (1/3, "
                   "0.25 or 25%), separated by commas: 0,1/3,2/3,1";
            return -SQ_EUSAGE;
        }
        if (r.num != 0) {
            if (!rat_less(out[k - 1], r)) {
                *why = "execution segment sequence: the points must rise strictly";
                return -SQ_EUSAGE;
            }
            if (k == max) {
                *why = "execution segment sequence: too many points";
                return -SQ_EUSAGE;
            }
            out[k++] = r;
        } else if (!first) {
            *why = "execution segment sequence: the points must rise strictly";
            return -SQ_EUSAGE;
        }
        first = false;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (out[k - 1].num != out[k - 1].den) {
        if (k == max) {
            *why = "execution segment sequence: too many points";
            return -SQ_EUSAGE;
        }
        out[k++] = (struct sq_rat){1, 1};
    }
    *n = k;
    return 0;
}

void sq_seg_even(struct sq_rat *out, uint32_t n)
{
    for (uint32_t i = 0; i <= n; i++)
        out[i] = rat_reduce(i, n);
}

int sq_seg_init(struct sq_seg *s, const struct sq_rat *pt, uint32_t npoints, uint32_t index,
                const char **why)
{
    memset(s, 0, sizeof(*s));
    uint32_t parts = npoints ? npoints - 1 : 0;
    if (npoints < 2 || parts > SQ_SEG_MAX_PARTS || pt[0].num != 0 ||
        pt[parts].num != pt[parts].den) {
        *why = "execution segment sequence: it must run from 0 to 1 in at most 1024 parts";
        return -SQ_EUSAGE;
    }
    if (index >= parts) {
        *why = "execution segment: its index is past the end of the sequence";
        return -SQ_EUSAGE;
    }
    uint64_t L = 1;
    for (uint32_t i = 0; i <= parts; i++) {
        if (pt[i].den == 0 || pt[i].num > pt[i].den || (i && !rat_less(pt[i - 1], pt[i]))) {
            *why = "execution segment sequence: the points must rise strictly from 0 to 1";
            return -SQ_EUSAGE;
        }
        uint64_t d = pt[i].den / gcd_u64(pt[i].num, pt[i].den);
        uint64_t g = gcd_u64(L, d);
        if (L / g > SQ_SEG_MAX_PERIOD / d) {
            *why = "execution segment sequence: its common denominator is over 1,000,000";
            return -SQ_EUSAGE;
        }
        L = L / g * d;
    }
    if (L * parts > 20000000) {
        *why = "execution segment sequence: its common denominator times its parts is over "
               "20,000,000";
        return -SQ_EUSAGE;
    }
    /* Each segment's units per period, w[k] = L * (p[k+1] - p[k]); they add up to L. */
    uint64_t *w = calloc(parts, sizeof(*w)), *c = calloc(parts, sizeof(*c));
    if (!w || !c) {
        free(w);
        free(c);
        return -ENOMEM;
    }
    uint64_t whole = 0;
    for (uint32_t k = 0; k < parts; k++) {
        struct sq_rat a = rat_reduce(pt[k].num, pt[k].den);
        struct sq_rat b = rat_reduce(pt[k + 1].num, pt[k + 1].den);
        w[k] = b.num * (L / b.den) - a.num * (L / a.den);
        SQ_ASSERT(w[k] > 0); /* the points rise strictly */
        whole += w[k];
    }
    SQ_ASSERT_MSG(whole == L, "the segments' shares add up to the whole");
    s->pos = malloc(w[index] * sizeof(*s->pos));
    if (!s->pos) {
        free(w);
        free(c);
        return -ENOMEM;
    }
    /* The quota method: index h goes to the segment with the largest w/(c+1) among those whose
     * count stays within its upper quota, c < (h+1) w / L; ties to the lower segment. */
    uint64_t mine = 0;
    for (uint64_t h = 0; h < L; h++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t k = 0; k < parts; k++) {
            if (!(c[k] * L < (h + 1) * w[k]))
                continue;
            if (best == UINT32_MAX || w[k] * (c[best] + 1) > w[best] * (c[k] + 1))
                best = k;
        }
        SQ_ASSERT_MSG(best != UINT32_MAX, "the quota method always finds a segment");
        c[best]++; /* one is always eligible: the counts add up to h < h + 1 */
        if (best == index) {
            SQ_ASSERT(mine < w[index]); /* within its upper quota: pos has room */
            s->pos[mine++] = h;
        }
    }
    /* each index of the period went to exactly one segment, each segment got exactly its share */
    for (uint32_t k = 0; k < parts; k++)
        SQ_ASSERT_MSG(c[k] == w[k], "a segment's count per period is its share");
    SQ_ASSERT(mine == w[index]);
    s->from = rat_reduce(pt[index].num, pt[index].den);
    s->to = rat_reduce(pt[index + 1].num, pt[index + 1].den);
    s->index = index;
    s->count = parts;
    s->period = L;
    s->per_period = w[index];
    free(w);
    free(c);
    return 0;
}

void sq_seg_dispose(struct sq_seg *s)
{
    free(s->pos);
    memset(s, 0, sizeof(*s));
}

uint64_t sq_seg_share(const struct sq_seg *s, uint64_t v)
{
    if (!s)
        return v;
    uint64_t r = v % s->period, lo = 0, hi = s->per_period;
    while (lo < hi) { /* how many own positions lie below r */
        uint64_t mid = lo + (hi - lo) / 2;
        if (s->pos[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return v / s->period * s->per_period + lo;
}

uint64_t sq_seg_global(const struct sq_seg *s, uint64_t j)
{
    if (!s)
        return j;
    uint64_t g = j / s->per_period * s->period + s->pos[j % s->per_period];
    /* g is this segment's j-th index: j of its own lie below g, and g is one of them */
    SQ_ASSERT_MSG(sq_seg_share(s, g) == j && sq_seg_share(s, g + 1) == j + 1,
                  "each index belongs to exactly one segment");
    return g;
}

void sq_rat_format(struct sq_rat r, char *buf, size_t size)
{
    if (r.num == 0 || r.num == r.den)
        snprintf(buf, size, "%d", r.num ? 1 : 0);
    else
        snprintf(buf, size, "%llu/%llu", (unsigned long long)r.num, (unsigned long long)r.den);
}
