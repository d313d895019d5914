/* stats/ab.h - telling a difference from noise: the arithmetic of `squall ab` (and the spreads
 * of `squall measure`). Medians and quartiles of a few values, the order arms run in each round,
 * paired per-round differences with a percentile-bootstrap interval, and the verdict rule.
 *
 * Pure functions: no I/O, no clock; the bootstrap is deterministic for a given seed. The method
 * (docs/instruments.md): interleave the arms in every round and rotate their order so drift lands
 * on each of them; compare each round's paired difference, never pooled means; bootstrap the
 * median of those differences; and run arm A against itself in the same rounds (the null test),
 * whose interval is the harness's own noise. A difference is resolved only when its interval
 * excludes zero and lies beyond the null test's band.
 */
#ifndef SQ_STATS_AB_H
#define SQ_STATS_AB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SQ_AB_MAX_VALUES 100000 /* values one summary or bootstrap takes */
#define SQ_AB_MAX_ARMS   26

/* The q-quantile (0 <= q <= 1) of n values, interpolated linearly between order statistics
 * (Hyndman and Fan's type 7, the default of R and numpy). Sorts v in place; NaN values are not
 * allowed. Returns NaN for n == 0. */
double sq_ab_quantile(double *v, size_t n, double q);

/* A few values: how many, their median, quartiles and extremes. */
struct sq_ab_summary {
    size_t n;
    double median, p25, p75, min, max;
};

/* Summarises n values (v is not changed; NaN values are skipped). n == 0 (or only NaNs) gives a
 * summary of NaNs with n 0. Returns 0 or -ENOMEM / -EINVAL (n > SQ_AB_MAX_VALUES). */
SQ_MUST_CHECK int sq_ab_summarize(const double *v, size_t n, struct sq_ab_summary *out);

/* The order k arms run in round r (0-based): out[0..k) is a permutation of 0..k-1.
 *   k == 1: 0.
 *   k == 2: AB in even rounds, BA in odd ones (ABBA over each two rounds).
 *   k >= 3: row r mod P of a Williams design, a Latin square balanced for first-order
 *           carry-over: over P rounds every arm runs in every position equally often, and
 *           directly after every other arm equally often (P = k for even k; for odd k the k rows
 *           of the square and their k reversals, P = 2k).
 * k must be 1..SQ_AB_MAX_ARMS. */
void sq_ab_order(uint32_t k, uint32_t round, uint32_t *out);
/* P above: 1 for one arm, 2 for two, k or 2k for more. */
uint32_t sq_ab_order_period(uint32_t k);

/* Paired relative differences in percent: out[i] = 100 (x[i] - base[i]) / base[i]. A pair whose
 * base is 0 or not finite gives NaN. Returns how many are finite. */
size_t sq_ab_rel_deltas(const double *x, const double *base, size_t n, double *out);

/* A median difference and its interval (percent, or the metric's unit). */
struct sq_ab_interval {
    size_t n;      /* finite differences it came from */
    double median; /* their median */
    double lo, hi; /* the bootstrap interval of that median */
};

/* Percentile bootstrap of the median of d (n values, NaNs skipped): iters resamples of the same
 * size drawn with replacement (a splitmix64 stream from seed), the median of each; lo and hi are
 * the (1 - level) / 2 and (1 + level) / 2 quantiles of those medians. Returns 0, -EINVAL (no
 * finite value, iters < 100 or > 1,000,000, level outside (0, 1), n > SQ_AB_MAX_VALUES) or
 * -ENOMEM. */
SQ_MUST_CHECK int sq_ab_bootstrap_median(const double *d, size_t n, uint32_t iters, double level,
                                         uint64_t seed, struct sq_ab_interval *out);

/* How far the null test moved: the largest of |median|, |lo| and |hi| of its interval (percent).
 * A difference must lie beyond +-band to count. */
double sq_ab_null_band(const struct sq_ab_interval *null);

enum sq_ab_verdict {
    SQ_AB_RESOLVED,      /* the interval excludes zero and the null band: a real difference */
    SQ_AB_INCLUDES_ZERO, /* the interval includes zero: no difference this run can show */
    SQ_AB_WITHIN_NOISE,  /* the interval excludes zero but reaches into the null band */
    SQ_AB_NO_DATA,       /* no finite difference (a metric the arms did not report) */
};

/* The verdict on a difference d given the null band (sq_ab_null_band; 0 without a null test). */
enum sq_ab_verdict sq_ab_judge(const struct sq_ab_interval *d, double band);

#endif
