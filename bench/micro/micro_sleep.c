/* bench/micro/micro_sleep.c - how late do timed waits wake up on this machine?
 *
 * For several requested waits, measures the overshoot (actual - requested) of epoll_pwait2 (how
 * squall's workers wait) and clock_nanosleep(TIMER_ABSTIME), with the default 50 µs timer slack
 * and with the 1 ns slack squall's workers set. Prints p50/p90/p99 in µs. The open-loop
 * scheduler sizes its busy-wait tail from the 90th percentile of this overshoot
 * (engine/run.c calibrate_spin; docs/internals/engine.md has the table).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

#define N 400

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, unsigned long slack, int64_t req_us, int64_t *v)
{
    qsort(v, N, sizeof(*v), cmp);
    printf("| %-15s | %5lu ns | %6lld | %7.1f | %7.1f | %7.1f |\n", what, slack, (long long)req_us,
           (double)v[N / 2] / 1e3, (double)v[N * 9 / 10] / 1e3, (double)v[N * 99 / 100] / 1e3);
}

int main(void)
{
    static const int64_t waits_us[] = {50, 200, 1000, 5000};
    static const unsigned long slacks[] = {50000, 1};
    int ep = epoll_create1(0);
    struct epoll_event ev;
    int64_t v[N];
    printf("| wait            | slack    | req µs | p50 µs late | p90 | p99 |\n");
    printf("|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof(slacks) / sizeof(slacks[0]); s++) {
        prctl(PR_SET_TIMERSLACK, slacks[s], 0, 0, 0);
        for (size_t w = 0; w < sizeof(waits_us) / sizeof(waits_us[0]); w++) {
            int64_t ns = waits_us[w] * 1000;
            int n = waits_us[w] >= 5000 ? N / 4 : N;
            for (int i = 0; i < N; i++) {
                if (i >= n) {
                    v[i] = v[i % n];
                    continue;
                }
                struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
                int64_t t0 = sq_now_ns();
                epoll_pwait2(ep, &ev, 1, &ts, NULL);
                v[i] = sq_now_ns() - t0 - ns;
            }
            report("epoll_pwait2", slacks[s], waits_us[w], v);
            for (int i = 0; i < N; i++) {
                if (i >= n) {
                    v[i] = v[i % n];
                    continue;
                }
                int64_t due = sq_now_ns() + ns;
                struct timespec ts = {.tv_sec = due / SQ_NS_PER_S, .tv_nsec = due % SQ_NS_PER_S};
                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
                v[i] = sq_now_ns() - due;
            }
            report("clock_nanosleep", slacks[s], waits_us[w], v);
        }
    }
    close(ep);
    return 0;
}
