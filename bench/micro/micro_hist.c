/* bench/micro/micro_hist.c - ns per sq_hist_record on squall's configuration (1 us .. 1 h,
 * 3 significant digits), median of several repetitions; also merge and encode cost.
 *
 *     build/bench/micro_hist [records_per_rep] [reps]
 *
 * Values are drawn ahead of time (log-normal around 2 ms with a long tail, the shape of a
 * latency run) into a 64 Ki-entry array that stays in L2, so the figure is the cost of
 * recording, not of generating. Prints one line per measure; the first is the headline. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "micro.h"
#include "base/clock.h"
#include "stats/hist.h"

#define NVALS 65536

int main(int argc, char **argv)
{
    long per_rep = argc > 1 ? atol(argv[1]) : 20000000;
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    if (per_rep <= 0 || reps <= 0 || reps > 101) {
        fprintf(stderr, "usage: micro_hist [records_per_rep] [reps (1..101)]\n");
        return 2;
    }
    static int64_t vals[NVALS];
    for (int i = 0; i < NVALS; i++) {
        double z = sqrt(-2.0 * log(micro_unit())) * cos(6.283185307179586 * micro_unit());
        double v = exp(log(2000.0) + 1.2 * z);
        vals[i] = v < 1 ? 1 : v > 3.6e9 ? 3600000000 : (int64_t)v;
    }

    struct sq_hist *h, *other;
    if (sq_hist_new(1, INT64_C(3600000000), 3, &h) < 0 ||
        sq_hist_new(1, INT64_C(3600000000), 3, &other) < 0)
        return 1;

    double rec[101], mrg[101], enc[101];
    size_t blob_len = 0;
    int64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        sq_hist_reset(h);
        int64_t t0 = sq_now_ns();
        for (long i = 0; i < per_rep; i++)
            sink += sq_hist_record(h, vals[i & (NVALS - 1)]);
        int64_t t1 = sq_now_ns();
        rec[r] = (double)(t1 - t0) / (double)per_rep;

        sq_hist_reset(other);
        t0 = sq_now_ns();
        sink += sq_hist_merge(other, h);
        t1 = sq_now_ns();
        mrg[r] = (double)(t1 - t0) / 1000.0;

        unsigned char *blob;
        t0 = sq_now_ns();
        if (sq_hist_encode(h, &blob, &blob_len) < 0)
            return 1;
        t1 = sq_now_ns();
        free(blob);
        enc[r] = (double)(t1 - t0) / 1000.0;
    }
    if (sink != (int64_t)per_rep * reps || sq_hist_total(other) != per_rep)
        return 1;

    printf("micro_hist: record %.2f ns/record (median of %d x %ld, 1us..1h 3sf)\n",
           micro_median(rec, reps), reps, per_rep);
    printf("micro_hist: merge %.1f us/merge (same config, %zu B of counts)\n",
           micro_median(mrg, reps), sq_hist_footprint(h));
    printf("micro_hist: encode %.1f us/encode (V2 compressed, %zu B blob)\n",
           micro_median(enc, reps), blob_len);
    sq_hist_free(h);
    sq_hist_free(other);
    return 0;
}
