/* bench/micro/micro.h - what every micro-benchmark shares: a seeded PRNG and the median of the
 * repetitions. Header-only (static functions), since each program is built on its own. */
#ifndef SQ_BENCH_MICRO_H
#define SQ_BENCH_MICRO_H

#include <stdint.h>
#include <stdlib.h>

static uint64_t micro_state = 0x5eed;

/* A uniform double in (0, 1) from xorshift64: the same sequence every run. */
static inline double micro_unit(void)
{
    micro_state ^= micro_state << 13;
    micro_state ^= micro_state >> 7;
    micro_state ^= micro_state << 17;
    return ((double)(micro_state >> 11) + 0.5) / 9007199254740992.0;
}

static inline int micro_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns its median. */
static inline double micro_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), micro_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
