/* bench/micro/micro_metrics.c - what squall's metrics cost per request on this machine.
 *
 *     build/bench/micro_metrics [requests_per_rep] [reps]
 *
 * Measures, each the median of several repetitions:
 *   - one counter increment in a worker's struct sq_counters shard, back to back on the same
 *     counter (bound by the store-to-load latency: the worst case), and spread over eight
 *     counters in turn (the throughput case, closer to a request's mix);
 *   - the metrics of one request as engine/worker.c does them: conn_send (sent, in_flight),
 *     conn_write (bytes_sent), conn_read (bytes_received), conn_complete (one histogram record,
 *     the status class, completed, in_flight), for the closed model (one histogram) and the
 *     open model (a second, uncorrected histogram);
 *   - one sq_now_ns() for scale: the engine reads the clock once per event.
 *
 * Keeping it honest: the shard is reached through a pointer the compiler cannot see through
 * (a volatile global), and an empty asm statement with a memory clobber after each step forces
 * every counter to be loaded and stored in every iteration, as in the engine where calls into
 * the kernel separate the updates. Without it the compiler would fold a loop of increments into
 * one addition. Latencies (in ns, divided to µs as conn_complete does) and statuses are drawn
 * ahead of time (log-normal around 2 ms, one in 64 a 404) into 64 Ki-entry arrays, so the
 * figure is the cost of recording, not of generating. The results are checked against the expected
 * totals at the end.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "micro.h"
#include "base/clock.h"
#include "engine/run.h"
#include "stats/hist.h"

#define NVALS   65536
#define MAXREPS 101

/* The part of a worker that a request's metrics touch (engine/worker.h keeps it private). */
struct shard {
    struct sq_counters c;
    uint64_t in_flight;
    struct sq_hist *hist;     /* latency from the intended send */
    struct sq_hist *hist_unc; /* open model: latency from the actual send; NULL when closed */
};

static struct shard the_shard;
static struct shard *volatile shard_ptr = &the_shard;

#define CLOBBER() __asm__ __volatile__("" ::: "memory")

static int64_t lat_ns[NVALS]; /* now - since, in ns, as the engine has it */
static uint16_t status[NVALS];
static double bench_same_counter(long n)
{
    struct shard *s = shard_ptr;
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < n; i++) {
        s->c.completed++;
        CLOBBER();
    }
    return (double)(sq_now_ns() - t0) / (double)n;
}

static double bench_eight_counters(long n)
{
    struct shard *s = shard_ptr;
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < n; i++) {
        /* No two of these are adjacent, so the compiler cannot pair them into one vector add. */
        s->c.sent++;
        s->c.completed++;
        s->c.status[2]++;
        s->c.errors[0]++;
        s->c.errors[2]++;
        s->c.bytes_sent++;
        s->c.conns_opened++;
        s->in_flight++;
        CLOBBER();
    }
    return (double)(sq_now_ns() - t0) / (double)n / 8.0;
}

/* One request's metrics, in the order the engine does them. */
static double bench_request(long n)
{
    struct shard *s = shard_ptr;
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < n; i++) {
        size_t k = (size_t)i & (NVALS - 1);
        /* conn_send + conn_write */
        s->c.sent++;
        s->in_flight++;
        s->c.bytes_sent += 75;
        CLOBBER();
        /* conn_read */
        s->c.bytes_received += 140;
        /* conn_complete */
        sq_hist_record(s->hist, lat_ns[k] / SQ_NS_PER_US);
        if (s->hist_unc)
            sq_hist_record(s->hist_unc, (lat_ns[k] - 3000) / SQ_NS_PER_US);
        unsigned cls = (unsigned)status[k] / 100;
        s->c.status[cls <= 5 ? cls : 0]++;
        s->c.completed++;
        s->in_flight--;
        CLOBBER();
    }
    return (double)(sq_now_ns() - t0) / (double)n;
}

static double bench_clock(long n)
{
    int64_t acc = 0;
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < n; i++)
        acc += sq_now_ns() & 1;
    double ns = (double)(sq_now_ns() - t0) / (double)n;
    shard_ptr->c.errors[1] += (uint64_t)acc; /* keeps acc (and so the calls) alive */
    return ns;
}

int main(int argc, char **argv)
{
    long per_rep = argc > 1 ? atol(argv[1]) : 20000000;
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    if (per_rep <= 0 || reps <= 0 || reps > MAXREPS) {
        fprintf(stderr, "usage: micro_metrics [requests_per_rep] [reps (1..%d)]\n", MAXREPS);
        return 2;
    }
    for (int i = 0; i < NVALS; i++) {
        double z = sqrt(-2.0 * log(micro_unit())) * cos(6.283185307179586 * micro_unit());
        double v = exp(log(2000.0) + 1.2 * z);
        int64_t us = v < 4 ? 4 : v > 3.6e9 ? 3600000000 : (int64_t)v;
        lat_ns[i] = us * SQ_NS_PER_US + (int64_t)(micro_unit() * 1000.0);
        status[i] = (i & 63) == 0 ? 404 : 200;
    }
    struct shard *s = shard_ptr;
    struct sq_hist *unc;
    if (sq_latency_hist_new(&s->hist) < 0 || sq_latency_hist_new(&unc) < 0) {
        fprintf(stderr, "micro_metrics: out of memory\n");
        return 1;
    }

    static double same[MAXREPS], eight[MAXREPS], closed[MAXREPS], open[MAXREPS], clk[MAXREPS];
    long clock_n = per_rep / 10 > 0 ? per_rep / 10 : 1;
    for (int r = 0; r < reps; r++) {
        same[r] = bench_same_counter(per_rep);
        eight[r] = bench_eight_counters(per_rep);
        s->hist_unc = NULL;
        closed[r] = bench_request(per_rep);
        s->hist_unc = unc;
        open[r] = bench_request(per_rep);
        clk[r] = bench_clock(clock_n);
    }

    /* Every step must have happened. Per repetition: completed by the same-counter, eight-counter
     * and both request loops; sent by the eight-counter and both request loops. */
    uint64_t want = (uint64_t)per_rep * (uint64_t)reps;
    uint64_t err404 = 0;
    for (long i = 0; i < per_rep; i++)
        err404 += status[i & (NVALS - 1)] == 404;
    if (s->c.completed != 4 * want || s->c.sent != 3 * want || s->in_flight != want ||
        s->c.status[4] != 2 * err404 * (uint64_t)reps ||
        sq_hist_total(s->hist) != (int64_t)want * 2 || sq_hist_total(unc) != (int64_t)want) {
        fprintf(stderr, "micro_metrics: counts do not add up\n");
        return 1;
    }

    printf("micro_metrics: counter increment, same counter back to back %.2f ns "
           "(median of %d x %ld)\n",
           micro_median(same, reps), reps, per_rep);
    printf("micro_metrics: counter increment, 8 counters in turn %.2f ns/increment\n",
           micro_median(eight, reps));
    printf("micro_metrics: per request, closed loop (1 hist record + 7 counter updates) %.2f ns\n",
           micro_median(closed, reps));
    printf("micro_metrics: per request, open loop (2 hist records + 7 counter updates) %.2f ns\n",
           micro_median(open, reps));
    printf("micro_metrics: sq_now_ns() %.2f ns/call (for scale: one per event)\n",
           micro_median(clk, reps));
    sq_hist_free(s->hist);
    sq_hist_free(unc);
    return 0;
}
