/* base/clock.h - monotonic time in nanoseconds. Only monotonic clocks measure intervals. */
#ifndef SQ_BASE_CLOCK_H
#define SQ_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

#define SQ_NS_PER_US 1000LL
#define SQ_NS_PER_MS 1000000LL
#define SQ_NS_PER_S  1000000000LL

/* CLOCK_MONOTONIC in ns. A vDSO call: about 20 ns, no system call. */
static inline int64_t sq_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * SQ_NS_PER_S + ts.tv_nsec;
}

/* Wall-clock seconds since the epoch, for reports only (never for intervals). */
static inline double sq_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wall-clock ns since the epoch, for reports only (never for intervals). */
static inline int64_t sq_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * SQ_NS_PER_S + ts.tv_nsec;
}

#endif
