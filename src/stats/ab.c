/* stats/ab.c - medians, run orders, paired bootstrap and the verdict (see ab.h).
 *
 * Sizes are small (rounds of an A/B test: 8 by default, a few hundred at most), so each median
 * sorts its values; the bootstrap's 10,000 resamples of 8 cost about a millisecond.
 */
#include "stats/ab.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void sort_values(double *v, size_t n)
{
    if (n <= 16) { /* insertion sort: the bootstrap's resamples are this small */
        for (size_t i = 1; i < n; i++) {
            double x = v[i];
            size_t k = i;
            for (; k > 0 && v[k - 1] > x; k--)
                v[k] = v[k - 1];
            v[k] = x;
        }
        return;
    }
    qsort(v, n, sizeof(*v), cmp_double);
}

/* Type 7 on sorted values. */
static double quantile_sorted(const double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    if (q <= 0)
        return v[0];
    if (q >= 1)
        return v[n - 1];
    double h = (double)(n - 1) * q;
    size_t i = (size_t)h;
    double frac = h - (double)i;
    if (i + 1 >= n)
        return v[n - 1];
    return v[i] + frac * (v[i + 1] - v[i]);
}

double sq_ab_quantile(double *v, size_t n, double q)
{
    sort_values(v, n);
    return quantile_sorted(v, n, q);
}

/* Copies the finite values of v into a new array; *m gets their count. NULL when out of memory
 * (or n == 0: then *m is 0). */
static double *finite_copy(const double *v, size_t n, size_t *m)
{
    *m = 0;
    if (n == 0)
        return NULL;
    double *c = malloc(n * sizeof(*c));
    if (!c)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            c[(*m)++] = v[i];
    return c;
}

int sq_ab_summarize(const double *v, size_t n, struct sq_ab_summary *out)
{
    *out = (struct sq_ab_summary){0, NAN, NAN, NAN, NAN, NAN};
    if (n > SQ_AB_MAX_VALUES)
        return -EINVAL;
    if (n == 0)
        return 0;
    size_t m;
    double *c = finite_copy(v, n, &m);
    if (!c)
        return -ENOMEM;
    sort_values(c, m);
    out->n = m;
    if (m) {
        out->median = quantile_sorted(c, m, 0.5);
        out->p25 = quantile_sorted(c, m, 0.25);
        out->p75 = quantile_sorted(c, m, 0.75);
        out->min = c[0];
        out->max = c[m - 1];
    }
    free(c);
    return 0;
}

/* ---- run order ---- */

uint32_t sq_ab_order_period(uint32_t k)
{
    if (k <= 1)
        return 1;
    return k % 2 == 0 ? k : 2 * k;
}

void sq_ab_order(uint32_t k, uint32_t round, uint32_t *out)
{
    if (k == 0)
        return;
    if (k > SQ_AB_MAX_ARMS)
        k = SQ_AB_MAX_ARMS;
    /* The first row of a Williams square: 0, 1, k-1, 2, k-2, 3, ... */
    uint32_t first[SQ_AB_MAX_ARMS];
    uint32_t lo = 1, hi = k - 1;
    first[0] = 0;
    for (uint32_t j = 1; j < k; j++)
        first[j] = j % 2 == 1 ? lo++ : hi--;
    uint32_t period = sq_ab_order_period(k);
    uint32_t row = round % period;
    bool reversed = row >= k; /* odd k: the second k rows are the first k reversed */
    uint32_t shift = reversed ? row - k : row;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t v = (first[j] + shift) % k;
        out[reversed ? k - 1 - j : j] = v;
    }
}

/* ---- paired differences ---- */

size_t sq_ab_rel_deltas(const double *x, const double *base, size_t n, double *out)
{
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(base[i]) || base[i] == 0) {
            out[i] = NAN;
            continue;
        }
        out[i] = 100.0 * (x[i] - base[i]) / base[i];
        if (isfinite(out[i]))
            ok++;
        else
            out[i] = NAN;
    }
    return ok;
}

/* splitmix64: a small generator whose stream passes BigCrush; enough to draw resample indexes. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A uniform index below n (Lemire's multiply-shift; the bias for n this small is < 2^-40). */
static size_t draw(uint64_t *s, size_t n)
{
    return (size_t)(((unsigned __int128)splitmix64(s) * n) >> 64);
}

int sq_ab_bootstrap_median(const double *d, size_t n, uint32_t iters, double level, uint64_t seed,
                           struct sq_ab_interval *out)
{
    *out = (struct sq_ab_interval){0, NAN, NAN, NAN};
    if (n > SQ_AB_MAX_VALUES || iters < 100 || iters > 1000000 || !(level > 0 && level < 1))
        return -EINVAL;
    size_t m;
    double *c = finite_copy(d, n, &m);
    if (!c && n)
        return -ENOMEM;
    if (m == 0) {
        free(c);
        return -EINVAL;
    }
    double *res = malloc(m * sizeof(*res));
    double *meds = malloc((size_t)iters * sizeof(*meds));
    if (!res || !meds) {
        free(c);
        free(res);
        free(meds);
        return -ENOMEM;
    }
    uint64_t s = seed;
    for (uint32_t it = 0; it < iters; it++) {
        for (size_t i = 0; i < m; i++)
            res[i] = c[draw(&s, m)];
        sort_values(res, m);
        meds[it] = quantile_sorted(res, m, 0.5);
    }
    sort_values(meds, iters);
    sort_values(c, m);
    out->n = m;
    out->median = quantile_sorted(c, m, 0.5);
    out->lo = quantile_sorted(meds, iters, (1 - level) / 2);
    out->hi = quantile_sorted(meds, iters, (1 + level) / 2);
    free(c);
    free(res);
    free(meds);
    return 0;
}

double sq_ab_null_band(const struct sq_ab_interval *null)
{
    if (!null || null->n == 0)
        return 0;
    double b = fabs(null->median);
    if (fabs(null->lo) > b)
        b = fabs(null->lo);
    if (fabs(null->hi) > b)
        b = fabs(null->hi);
    return isfinite(b) ? b : 0;
}

enum sq_ab_verdict sq_ab_judge(const struct sq_ab_interval *d, double band)
{
    if (d->n == 0 || !isfinite(d->lo) || !isfinite(d->hi))
        return SQ_AB_NO_DATA;
    if (d->lo <= 0 && d->hi >= 0)
        return SQ_AB_INCLUDES_ZERO;
    if (d->lo > band || d->hi < -band)
        return SQ_AB_RESOLVED;
    return SQ_AB_WITHIN_NOISE;
}
