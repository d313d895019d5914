/* Unit tests: stats/ab (medians, run orders, paired bootstrap, the verdict rule). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <errno.h>
#include <string.h>

#include "stats/ab.h"

#define NEAR(a, b, eps) assert_true(fabs((a) - (b)) <= (eps))

static void quantiles(void **state)
{
    (void)state;
    double v[] = {5, 1, 4, 2, 3};
    NEAR(sq_ab_quantile(v, 5, 0.5), 3, 1e-12);
    NEAR(sq_ab_quantile(v, 5, 0.25), 2, 1e-12);
    NEAR(sq_ab_quantile(v, 5, 0), 1, 1e-12);
    NEAR(sq_ab_quantile(v, 5, 1), 5, 1e-12);
    double e[] = {4, 1, 3, 2}; /* even count: the median lies between the middle two */
    NEAR(sq_ab_quantile(e, 4, 0.5), 2.5, 1e-12);
    NEAR(sq_ab_quantile(e, 4, 0.25), 1.75, 1e-12); /* numpy.percentile([1,2,3,4], 25) */
    double one[] = {7};
    NEAR(sq_ab_quantile(one, 1, 0.9), 7, 1e-12);
    assert_true(isnan(sq_ab_quantile(NULL, 0, 0.5)));
    /* more than the insertion-sort size */
    double big[101];
    for (int i = 0; i < 101; i++)
        big[i] = 100 - i;
    NEAR(sq_ab_quantile(big, 101, 0.5), 50, 1e-12);
    NEAR(sq_ab_quantile(big, 101, 0.99), 99, 1e-12);
}

static void summary(void **state)
{
    (void)state;
    const double v[] = {10, NAN, 30, 20, 40};
    struct sq_ab_summary s;
    assert_int_equal(sq_ab_summarize(v, 5, &s), 0);
    assert_int_equal(s.n, 4);
    NEAR(s.median, 25, 1e-12);
    NEAR(s.p25, 17.5, 1e-12);
    NEAR(s.p75, 32.5, 1e-12);
    NEAR(s.min, 10, 1e-12);
    NEAR(s.max, 40, 1e-12);
    assert_int_equal(v[0], 10); /* untouched */
    assert_int_equal(sq_ab_summarize(v, 0, &s), 0);
    assert_int_equal(s.n, 0);
    assert_true(isnan(s.median));
}

/* Over one period every arm runs in every position equally often, and (k >= 2) directly after
 * every other arm equally often: the Williams property. */
static void orders_balanced(void **state)
{
    (void)state;
    for (uint32_t k = 1; k <= 9; k++) {
        uint32_t period = sq_ab_order_period(k);
        assert_int_equal(period, k == 1 ? 1 : (k % 2 ? 2 * k : k));
        uint32_t pos[SQ_AB_MAX_ARMS][SQ_AB_MAX_ARMS] = {{0}};
        uint32_t follows[SQ_AB_MAX_ARMS][SQ_AB_MAX_ARMS] = {{0}};
        for (uint32_t r = 0; r < period; r++) {
            uint32_t o[SQ_AB_MAX_ARMS], seen = 0;
            sq_ab_order(k, r, o);
            for (uint32_t j = 0; j < k; j++) {
                assert_true(o[j] < k);
                seen |= 1u << o[j];
                pos[o[j]][j]++;
                if (j)
                    follows[o[j - 1]][o[j]]++;
            }
            assert_int_equal(seen, (1u << k) - 1); /* a permutation */
            /* the next period repeats this one */
            uint32_t again[SQ_AB_MAX_ARMS];
            sq_ab_order(k, r + period, again);
            assert_memory_equal(o, again, k * sizeof(*o));
        }
        for (uint32_t a = 0; a < k; a++)
            for (uint32_t j = 0; j < k; j++)
                assert_int_equal(pos[a][j], period / k);
        for (uint32_t a = 0; k > 1 && a < k; a++)
            for (uint32_t b = 0; b < k; b++)
                if (a != b)
                    assert_int_equal(follows[a][b], period / k);
    }
}

static void abba(void **state)
{
    (void)state;
    uint32_t o[2];
    sq_ab_order(2, 0, o);
    assert_true(o[0] == 0 && o[1] == 1);
    sq_ab_order(2, 1, o);
    assert_true(o[0] == 1 && o[1] == 0);
    sq_ab_order(2, 2, o);
    assert_true(o[0] == 0 && o[1] == 1);
}

static void rel_deltas(void **state)
{
    (void)state;
    const double x[] = {110, 90, 5, NAN};
    const double a[] = {100, 100, 0, 1};
    double d[4];
    assert_int_equal(sq_ab_rel_deltas(x, a, 4, d), 2);
    NEAR(d[0], 10, 1e-12);
    NEAR(d[1], -10, 1e-12);
    assert_true(isnan(d[2]) && isnan(d[3]));
}

static void bootstrap(void **state)
{
    (void)state;
    /* A clear shift: every difference between 9 and 11. */
    const double d[] = {10, 9.5, 10.5, 9, 11, 10.2, 9.8, 10.1};
    struct sq_ab_interval iv;
    assert_int_equal(sq_ab_bootstrap_median(d, 8, 10000, 0.95, 42, &iv), 0);
    assert_int_equal(iv.n, 8);
    NEAR(iv.median, 10.05, 1e-9);
    assert_true(iv.lo >= 9 && iv.lo <= iv.median);
    assert_true(iv.hi <= 11 && iv.hi >= iv.median);
    /* Deterministic for a seed. */
    struct sq_ab_interval again;
    assert_int_equal(sq_ab_bootstrap_median(d, 8, 10000, 0.95, 42, &again), 0);
    assert_true(iv.lo == again.lo && iv.hi == again.hi);
    assert_int_equal(sq_ab_judge(&iv, 2), SQ_AB_RESOLVED);
    assert_int_equal(sq_ab_judge(&iv, 9.5), SQ_AB_WITHIN_NOISE);

    /* Differences around zero: the interval includes it. */
    const double z[] = {1, -1, 0.5, -0.5, 2, -2, 0.1, -0.1};
    assert_int_equal(sq_ab_bootstrap_median(z, 8, 10000, 0.95, 7, &iv), 0);
    assert_true(iv.lo < 0 && iv.hi > 0);
    assert_int_equal(sq_ab_judge(&iv, 0), SQ_AB_INCLUDES_ZERO);
    NEAR(sq_ab_null_band(&iv), fmax(fabs(iv.lo), fabs(iv.hi)), 1e-12);

    /* A wider level gives a wider interval. */
    struct sq_ab_interval wide;
    assert_int_equal(sq_ab_bootstrap_median(z, 8, 10000, 0.99, 7, &wide), 0);
    assert_true(wide.lo <= iv.lo && wide.hi >= iv.hi);

    /* Refusals. */
    const double nan[] = {NAN, NAN};
    assert_int_equal(sq_ab_bootstrap_median(nan, 2, 1000, 0.95, 1, &iv), -EINVAL);
    assert_int_equal(iv.n, 0);
    assert_int_equal(sq_ab_judge(&iv, 0), SQ_AB_NO_DATA);
    assert_int_equal(sq_ab_bootstrap_median(d, 8, 10, 0.95, 1, &iv), -EINVAL);
    assert_int_equal(sq_ab_bootstrap_median(d, 8, 1000, 1.0, 1, &iv), -EINVAL);
    assert_int_equal(sq_ab_null_band(NULL), 0);
}

/* A one-sided interval: a negative shift resolves below the band. */
static void negative_shift(void **state)
{
    (void)state;
    const double d[] = {-45, -44, -46, -45.5, -44.5, -45.2, -44.8, -45.1};
    struct sq_ab_interval iv;
    assert_int_equal(sq_ab_bootstrap_median(d, 8, 10000, 0.95, 3, &iv), 0);
    assert_true(iv.hi < -44 && iv.lo > -46);
    assert_int_equal(sq_ab_judge(&iv, 1.5), SQ_AB_RESOLVED);
    /* The coverage of the bootstrap: for samples of N(0,1) the 95% interval of the median
     * includes 0 in most of 200 trials (a percentile bootstrap of 8 values undercovers a
     * little: it is near 90%, never far below). */
    uint64_t s = 12345;
    int covered = 0;
    for (int trial = 0; trial < 200; trial++) {
        double v[8];
        for (int i = 0; i < 8; i++) { /* Box-Muller from two uniforms */
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            double u1 = ((double)(s >> 11) + 1) / 9007199254740993.0;
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            double u2 = (double)(s >> 11) / 9007199254740992.0;
            v[i] = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
        }
        assert_int_equal(sq_ab_bootstrap_median(v, 8, 2000, 0.95, (uint64_t)trial, &iv), 0);
        covered += iv.lo <= 0 && iv.hi >= 0;
    }
    assert_true(covered >= 170);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quantiles),       cmocka_unit_test(summary),
        cmocka_unit_test(orders_balanced), cmocka_unit_test(abba),
        cmocka_unit_test(rel_deltas),      cmocka_unit_test(bootstrap),
        cmocka_unit_test(negative_shift),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
