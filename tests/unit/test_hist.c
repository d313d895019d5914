/* tests/unit/test_hist.c - the HDR histogram: layout, semantics, merge, V2 encoding, hostile
 * input. Reference answers come from a sorted copy of the recorded values. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "stats/hist.h"

#define US_LOWEST  1
#define US_HIGHEST INT64_C(3600000000)
#define N_VALUES   200000

/* ---- helpers ---- */

static uint64_t rng_state;

static uint64_t rng(void) /* splitmix64: seeded, so every run sees the same values */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static double rng_unit(void) /* (0, 1) */
{
    return ((double)(rng() >> 11) + 0.5) / 9007199254740992.0;
}

static double rng_normal(void)
{
    return sqrt(-2.0 * log(rng_unit())) * cos(6.283185307179586 * rng_unit());
}

enum dist { D_UNIFORM, D_LOGNORMAL, D_CONSTANT, D_OUTLIERS, D__COUNT };
static const char *const dist_names[] = {"uniform", "lognormal", "constant", "outliers"};

static int64_t clamp_us(double v)
{
    if (v < 1)
        return 1;
    if (v > (double)US_HIGHEST)
        return US_HIGHEST;
    return (int64_t)llround(v);
}

static void gen(enum dist d, int64_t *v, size_t n, uint64_t seed)
{
    rng_state = seed;
    for (size_t i = 0; i < n; i++) {
        switch (d) {
        case D_UNIFORM:
            v[i] = 1 + (int64_t)(rng() % 1000000);
            break;
        case D_LOGNORMAL: /* median 2 ms, long right tail */
            v[i] = clamp_us(exp(log(2000.0) + 1.2 * rng_normal()));
            break;
        case D_CONSTANT:
            v[i] = 1234;
            break;
        case D_OUTLIERS: /* fast responses and a few values near the 1 h ceiling */
            if (i % 20000 == 7)
                v[i] = US_HIGHEST - (int64_t)(rng() % 1000000);
            else if (i == 12345)
                v[i] = US_HIGHEST;
            else
                v[i] = 100 + (int64_t)(rng() % 900);
            break;
        default:
            fail();
        }
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static struct sq_hist *new_hist(int64_t lo, int64_t hi, int sf)
{
    struct sq_hist *h = NULL;
    assert_int_equal(sq_hist_new(lo, hi, sf, &h), 0);
    assert_non_null(h);
    return h;
}

static struct sq_hist *us_hist(void)
{
    return new_hist(US_LOWEST, US_HIGHEST, 3);
}

/* The same rank HdrHistogram uses: round(pct/100 * n), at least 1. */
static int64_t ref_rank(double pct, size_t n)
{
    double t = pct / 100.0 * (double)n + 0.5;
    int64_t r = t >= (double)n ? (int64_t)n : (int64_t)t;
    return r < 1 ? 1 : r;
}

static const double pcts[] = {0, 0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100};

/* Every bucket, the totals and the summary statistics of a and b are identical. */
static void assert_same_hist(const struct sq_hist *a, const struct sq_hist *b)
{
    assert_int_equal(sq_hist__counts_len(a), sq_hist__counts_len(b));
    for (int32_t i = 0; i < sq_hist__counts_len(a); i++)
        assert_int_equal(sq_hist__count_at_index(a, i), sq_hist__count_at_index(b, i));
    assert_int_equal(sq_hist_total(a), sq_hist_total(b));
    assert_int_equal(sq_hist_min(a), sq_hist_min(b));
    assert_int_equal(sq_hist_max(a), sq_hist_max(b));
    assert_true(sq_hist_mean(a) == sq_hist_mean(b));
    assert_true(sq_hist_stddev(a) == sq_hist_stddev(b));
    for (size_t i = 0; i < SQ_ARRAY_LEN(pcts); i++)
        assert_int_equal(sq_hist_percentile(a, pcts[i]), sq_hist_percentile(b, pcts[i]));
}

static bool same_counts(const struct sq_hist *a, const struct sq_hist *b)
{
    if (sq_hist__counts_len(a) != sq_hist__counts_len(b) || sq_hist_total(a) != sq_hist_total(b))
        return false;
    for (int32_t i = 0; i < sq_hist__counts_len(a); i++)
        if (sq_hist__count_at_index(a, i) != sq_hist__count_at_index(b, i))
            return false;
    return true;
}

/* Invariant any histogram must satisfy, decoded from junk or not: iteration adds up to total. */
static void assert_consistent(const struct sq_hist *h)
{
    struct sq_hist_iter it;
    int64_t sum = 0, prev = -1;
    sq_hist_iter_init(&it, h);
    while (sq_hist_iter_next(&it)) {
        assert_true(it.count > 0);
        assert_true(it.lowest > prev);
        assert_int_equal(it.value, sq_hist_highest_equiv(h, it.lowest));
        prev = it.value;
        sum += it.count;
        assert_int_equal(it.cumulative, sum);
    }
    assert_int_equal(sum, sq_hist_total(h));
}

/* ---- configuration and layout ---- */

static void test_new_rejects_bad_config(void **state)
{
    (void)state;
    struct sq_hist *h = (struct sq_hist *)0x1;
    assert_int_equal(sq_hist_new(0, 100, 3, &h), -EINVAL);
    assert_int_equal(sq_hist_new(-5, 100, 3, &h), -EINVAL);
    assert_int_equal(sq_hist_new(1, 1, 3, &h), -EINVAL);
    assert_int_equal(sq_hist_new(10, 19, 3, &h), -EINVAL);
    assert_int_equal(sq_hist_new(1, 100, 0, &h), -EINVAL);
    assert_int_equal(sq_hist_new(1, 100, 6, &h), -EINVAL);
    assert_int_equal(sq_hist_new(INT64_MAX, INT64_MAX, 3, &h), -EINVAL);
    assert_int_equal(sq_hist_new(INT64_C(1) << 55, INT64_MAX, 3, &h), -EINVAL); /* shift > 61 */
    assert_ptr_equal(h, (struct sq_hist *)0x1);                                 /* untouched */
    sq_hist_free(NULL);

    h = new_hist(10, 20, 3); /* the smallest legal range */
    assert_true(sq_hist_record(h, 20));
    assert_false(sq_hist_record(h, 21));
    sq_hist_free(h);
    h = new_hist(1, INT64_MAX, 3); /* the largest */
    assert_true(sq_hist_record(h, INT64_MAX));
    assert_int_equal(sq_hist_max(h), INT64_MAX);
    assert_int_equal(sq_hist_percentile(h, 100), INT64_MAX);
    sq_hist_free(h);
}

static void test_config_memory(void **state)
{
    (void)state;
    struct {
        int64_t lo, hi;
        int sf;
        int32_t counts_len;
    } cases[] = {
        {1, 3600000000, 3, 23552},     /* squall: 1 us .. 1 h */
        {1, 60000000, 3, 17408},       /* 1 us .. 60 s */
        {1000, 60000000000, 3, 18432}, /* ns, lowest 1 us */
        {1, 60000000000, 3, 27648},    /* ns, lowest 1 ns */
        {1, 100, 1, 64},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(cases); i++) {
        struct sq_hist *h = new_hist(cases[i].lo, cases[i].hi, cases[i].sf);
        assert_int_equal(sq_hist__counts_len(h), cases[i].counts_len);
        assert_true(sq_hist_footprint(h) >= (size_t)cases[i].counts_len * 8);
        assert_true(sq_hist_footprint(h) < (size_t)cases[i].counts_len * 8 + 256);
        /* highest always has a slot: recording it cannot go out of bounds */
        assert_true(sq_hist__index_of(h, cases[i].hi) < sq_hist__counts_len(h));
        assert_int_equal(sq_hist_lowest(h), cases[i].lo);
        assert_int_equal(sq_hist_highest(h), cases[i].hi);
        assert_int_equal(sq_hist_sigfigs(h), cases[i].sf);
        sq_hist_free(h);
    }
}

/* The factory every latency shard uses: 1 us .. 1 h at 3 digits, so any two merge losslessly. */
static void test_latency_factory(void **state)
{
    (void)state;
    struct sq_hist *a, *b;
    assert_int_equal(sq_latency_hist_new(&a), 0);
    assert_int_equal(sq_latency_hist_new(&b), 0);
    assert_int_equal(sq_hist_lowest(a), 1);
    assert_int_equal(sq_hist_highest(a), 3600000000LL);
    assert_int_equal(sq_hist_sigfigs(a), 3);
    assert_int_equal(sq_hist__counts_len(a), 23552);
    assert_true(sq_hist_record(a, 3600000000LL));
    assert_false(sq_hist_record(a, 3600000001LL));
    assert_true(sq_hist_record(b, 250));
    assert_int_equal(sq_hist_merge(b, a), 0);
    assert_int_equal(sq_hist_total(b), 2);
    sq_hist_free(a);
    sq_hist_free(b);
}

static void check_layout(struct sq_hist *h)
{
    int32_t len = sq_hist__counts_len(h);
    /* Index -> value -> index is the identity; buckets tile [0, top] without gaps. */
    for (int32_t i = 0; i < len; i++) {
        int64_t lo = sq_hist__value_at(h, i);
        int64_t hi = sq_hist_highest_equiv(h, lo);
        assert_int_equal(sq_hist__index_of(h, lo), i);
        assert_int_equal(sq_hist__index_of(h, hi), i);
        assert_int_equal(sq_hist_lowest_equiv(h, hi), lo);
        if (i + 1 < len)
            assert_int_equal(sq_hist__value_at(h, i + 1), hi + 1);
        /* the precision promise: a bucket is at most 1/(2^half_mag) of its value wide */
        int64_t width = hi - lo + 1, pow10 = 1;
        for (int k = 0; k < sq_hist_sigfigs(h); k++)
            pow10 *= 10;
        /* the precision promise: sigfigs digits, or the lowest discernible value */
        assert_true(width <= sq_hist_lowest(h) || width * pow10 <= lo);
    }
    /* Values around each power of two. */
    for (int k = 0; k < 62; k++) {
        for (int d = -1; d <= 1; d++) {
            int64_t v = (INT64_C(1) << k) + d;
            if (v < 0)
                continue;
            int64_t lo = sq_hist_lowest_equiv(h, v), hi = sq_hist_highest_equiv(h, v);
            assert_true(lo <= v && v <= hi);
            int32_t idx = sq_hist__index_of(h, v);
            if (idx < len)
                assert_int_equal(sq_hist__value_at(h, idx), lo);
        }
    }
}

static void test_index_boundaries(void **state)
{
    (void)state;
    struct sq_hist *h = us_hist();
    /* 3 sf: 2048 sub-buckets; exact up to 2047, then width 2, 4, ... */
    assert_int_equal(sq_hist__index_of(h, 0), 0);
    assert_int_equal(sq_hist__index_of(h, 1), 1);
    assert_int_equal(sq_hist__index_of(h, 2047), 2047);
    assert_int_equal(sq_hist__index_of(h, 2048), 2048);
    assert_int_equal(sq_hist__index_of(h, 2049), 2048);
    assert_int_equal(sq_hist__index_of(h, 4095), 3071);
    assert_int_equal(sq_hist__index_of(h, 4096), 3072);
    assert_int_equal(sq_hist__value_at(h, 2048), 2048);
    assert_int_equal(sq_hist__value_at(h, 3071), 4094);
    assert_int_equal(sq_hist__value_at(h, 3072), 4096);
    assert_int_equal(sq_hist_highest_equiv(h, 2048), 2049);
    assert_int_equal(sq_hist_highest_equiv(h, 4096), 4099);
    assert_int_equal(sq_hist_lowest_equiv(h, 10007), 10000);
    assert_int_equal(sq_hist_highest_equiv(h, 10000), 10007);
    assert_int_equal(sq_hist_lowest_equiv(h, -3), 0);
    /* 3.6e9 lies in bucket 21 (2^31..2^32): width 2^21 */
    int64_t lo = sq_hist_lowest_equiv(h, US_HIGHEST);
    assert_int_equal(sq_hist_highest_equiv(h, US_HIGHEST) - lo + 1, INT64_C(1) << 21);
    assert_int_equal(sq_hist__index_of(h, US_HIGHEST), 22 * 1024 + (US_HIGHEST >> 21) - 1024);
    check_layout(h);
    sq_hist_free(h);

    /* lowest 1000: unit magnitude 9, the first bucket is 512 wide steps */
    h = new_hist(1000, INT64_C(60000000000), 3);
    assert_int_equal(sq_hist__index_of(h, 0), 0);
    assert_int_equal(sq_hist__index_of(h, 511), 0);
    assert_int_equal(sq_hist__index_of(h, 512), 1);
    assert_int_equal(sq_hist_highest_equiv(h, 1000), 1023);
    check_layout(h);
    sq_hist_free(h);

    for (int sf = 1; sf <= 5; sf++) {
        h = new_hist(3, 1000000, sf);
        check_layout(h);
        sq_hist_free(h);
    }
}

/* ---- recording and queries ---- */

static void test_out_of_range_counted(void **state)
{
    (void)state;
    struct sq_hist *h = us_hist();
    assert_true(sq_hist_record(h, 0));
    assert_true(sq_hist_record(h, US_HIGHEST));
    assert_false(sq_hist_record(h, -1));
    assert_false(sq_hist_record(h, US_HIGHEST + 1));
    assert_false(sq_hist_record(h, INT64_MAX));
    assert_false(sq_hist_record(h, INT64_MIN));
    assert_false(sq_hist_record_n(h, US_HIGHEST + 5, 10));
    assert_int_equal(sq_hist_total(h), 2);
    assert_int_equal(sq_hist_out_of_range(h), 14);
    assert_int_equal(sq_hist_max(h), sq_hist_highest_equiv(h, US_HIGHEST));

    assert_true(sq_hist_record_n(h, 7, 0)); /* nothing recorded */
    assert_false(sq_hist_record_n(h, 7, -3));
    assert_int_equal(sq_hist_total(h), 2);
    assert_int_equal(sq_hist_count_at(h, 7), 0);
    assert_int_equal(sq_hist_out_of_range(h), 14);

    sq_hist_reset(h);
    assert_int_equal(sq_hist_total(h), 0);
    assert_int_equal(sq_hist_out_of_range(h), 0);
    assert_int_equal(sq_hist_max(h), 0);
    assert_int_equal(sq_hist_min(h), INT64_MAX);
    assert_int_equal(sq_hist_count_at(h, 0), 0);
    sq_hist_free(h);
}

/* RssAnon of this process, kB (/proc/self/status); -1 if unreadable. */
static long rss_anon_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "RssAnon:", 8) == 0)
            kb = strtol(line + 8, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

/* A reset hands the counts' whole pages back (a worker's per-second slots are reset every
 * second: bench/connmem.py), and what it leaves reads as an empty histogram that records and
 * answers as a new one. */
static void test_reset_releases_pages(void **state)
{
    (void)state;
    struct sq_hist *h, *fresh;
    assert_int_equal(sq_latency_hist_new(&h), 0);
    assert_int_equal(sq_latency_hist_new(&fresh), 0);
    /* ~700 values a power of two, from 1 µs to the top: every page of the counts is written */
    int64_t n = 0;
    for (double v = 1; v < (double)SQ_LATENCY_HIGHEST_US; v = v * 1.001 + 1, n++)
        assert_true(sq_hist_record(h, (int64_t)v));
    long before = rss_anon_kb();
    sq_hist_reset(h);
    long after = rss_anon_kb();
    if (before >= 0) /* the 184 KiB of counts, less the partial pages at either end */
        assert_true(before - after >= 150);
    assert_int_equal(sq_hist_total(h), 0);
    assert_int_equal(sq_hist_max(h), 0);
    assert_int_equal(sq_hist_min(h), INT64_MAX);
    for (double v = 1; v < (double)SQ_LATENCY_HIGHEST_US; v = v * 1.001 + 1)
        assert_int_equal(sq_hist_count_at(h, (int64_t)v), 0);
    for (double v = 3; v < (double)SQ_LATENCY_HIGHEST_US; v = v * 1.01 + 7) {
        assert_true(sq_hist_record(h, (int64_t)v));
        assert_true(sq_hist_record(fresh, (int64_t)v));
    }
    assert_int_equal(sq_hist_total(h), sq_hist_total(fresh));
    for (double p = 0; p <= 100; p += 0.5)
        assert_int_equal(sq_hist_percentile(h, p), sq_hist_percentile(fresh, p));
    unsigned char *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    assert_int_equal(sq_hist_encode(h, &a, &alen), 0);
    assert_int_equal(sq_hist_encode(fresh, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    free(a);
    free(b);
    assert_true(n > 15000);
    sq_hist_free(h);
    sq_hist_free(fresh);
}

static void test_min_max_mean_stddev(void **state)
{
    (void)state;
    struct sq_hist *h = us_hist();
    /* empty */
    assert_int_equal(sq_hist_min(h), INT64_MAX);
    assert_int_equal(sq_hist_max(h), 0);
    assert_true(sq_hist_mean(h) == 0.0);
    assert_true(sq_hist_stddev(h) == 0.0);
    assert_int_equal(sq_hist_percentile(h, 50), 0);

    /* exact region */
    for (int v = 1; v <= 4; v++)
        assert_true(sq_hist_record(h, v));
    assert_int_equal(sq_hist_min(h), 1);
    assert_int_equal(sq_hist_max(h), 4);
    assert_true(sq_hist_mean(h) == 2.5);
    assert_true(fabs(sq_hist_stddev(h) - sqrt(1.25)) < 1e-12);

    /* bucket edges: min is the lowest, max the highest equivalent value */
    sq_hist_reset(h);
    assert_true(sq_hist_record(h, 5001));  /* bucket 5000..5003 */
    assert_true(sq_hist_record(h, 10003)); /* bucket 10000..10007 */
    assert_int_equal(sq_hist_min(h), 5000);
    assert_int_equal(sq_hist_max(h), 10007);
    /* mean and stddev use bucket midpoints: 5002 and 10004 */
    assert_true(sq_hist_mean(h) == 7503.0);
    assert_true(fabs(sq_hist_stddev(h) - 2501.0) < 1e-9);
    assert_int_equal(sq_hist_percentile(h, 0), 5000);
    assert_int_equal(sq_hist_percentile(h, 50), 5003);
    assert_int_equal(sq_hist_percentile(h, 74.9), 5003); /* rank (int)(1.498 + 0.5) = 1 */
    assert_int_equal(sq_hist_percentile(h, 75), 10007);  /* rank (int)(1.5 + 0.5) = 2 */
    assert_int_equal(sq_hist_percentile(h, 100), 10007);
    assert_int_equal(sq_hist_percentile(h, 250), 10007); /* clamped */
    assert_int_equal(sq_hist_percentile(h, -1), 5000);   /* clamped to 0 */

    /* a zero value makes min 0 but does not hide the non-zero minimum from max */
    assert_true(sq_hist_record(h, 0));
    assert_int_equal(sq_hist_min(h), 0);
    assert_int_equal(sq_hist_max(h), 10007);
    sq_hist_reset(h);
    assert_true(sq_hist_record(h, 0));
    assert_int_equal(sq_hist_min(h), 0);
    assert_int_equal(sq_hist_max(h), 0);
    sq_hist_free(h);
}

static void check_against_reference(const struct sq_hist *h, const int64_t *sorted, size_t n,
                                    const char *name)
{
    for (size_t i = 0; i < SQ_ARRAY_LEN(pcts); i++) {
        int64_t ref = sorted[ref_rank(pcts[i], n) - 1];
        int64_t got = sq_hist_percentile(h, pcts[i]);
        /* The exact bucket HdrHistogram would answer with ... */
        int64_t want = pcts[i] == 0 ? sq_hist_lowest_equiv(h, ref) : sq_hist_highest_equiv(h, ref);
        if (got != want)
            fail_msg("%s p%g: got %lld want %lld (ref %lld)", name, pcts[i], (long long)got,
                     (long long)want, (long long)ref);
        /* ... and within 3 significant digits of the true value. */
        assert_true(llabs(got - ref) * 1000 <= ref);
    }
    assert_int_equal(sq_hist_min(h), sq_hist_lowest_equiv(h, sorted[0]));
    assert_int_equal(sq_hist_max(h), sq_hist_highest_equiv(h, sorted[n - 1]));
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)sorted[i];
    double mean = sum / (double)n;
    assert_true(fabs(sq_hist_mean(h) - mean) <= mean / 1000.0);
    double dev = 0;
    for (size_t i = 0; i < n; i++)
        dev += ((double)sorted[i] - mean) * ((double)sorted[i] - mean);
    double sd = sqrt(dev / (double)n);
    assert_true(fabs(sq_hist_stddev(h) - sd) <= sd / 500.0 + 1.0);
}

static void test_percentiles_vs_sorted(void **state)
{
    (void)state;
    int64_t *v = malloc(N_VALUES * sizeof(*v));
    assert_non_null(v);
    for (int d = 0; d < D__COUNT; d++) {
        gen((enum dist)d, v, N_VALUES, 42 + (uint64_t)d);
        struct sq_hist *h = us_hist();
        for (size_t i = 0; i < N_VALUES; i++)
            assert_true(sq_hist_record(h, v[i]));
        assert_int_equal(sq_hist_total(h), N_VALUES);
        assert_int_equal(sq_hist_out_of_range(h), 0);
        qsort(v, N_VALUES, sizeof(*v), cmp_i64);
        check_against_reference(h, v, N_VALUES, dist_names[d]);
        assert_consistent(h);
        sq_hist_free(h);
    }
    free(v);
}

static void test_count_between_and_iter(void **state)
{
    (void)state;
    struct sq_hist *h = us_hist();
    for (int64_t v = 0; v < 10000; v++)
        assert_true(sq_hist_record(h, v));
    assert_int_equal(sq_hist_count_between(h, 0, 2047), 2048);
    assert_int_equal(sq_hist_count_between(h, 100, 199), 100);
    assert_int_equal(sq_hist_count_between(h, -50, 9), 10);
    assert_int_equal(sq_hist_count_between(h, 0, INT64_MAX), 10000);
    assert_int_equal(sq_hist_count_between(h, 5000, 4999), 0);
    assert_int_equal(sq_hist_count_between(h, 20000, INT64_MAX), 0);
    /* bucket granularity: 4097 shares 4096..4099, counted where the bucket starts */
    assert_int_equal(sq_hist_count_at(h, 4097), 4);
    assert_int_equal(sq_hist_count_between(h, 4096, 4096), 4);
    assert_int_equal(sq_hist_count_between(h, 4097, 4099), 0);
    assert_int_equal(sq_hist_count_between(h, 4097, 4100), 4);
    assert_int_equal(sq_hist_count_between(h, 4096, 4103), 8);
    /* adjacent rows of any step add up to the total: no bucket in two rows */
    for (int64_t step = 1; step < 5000; step = step * 3 + 1) {
        int64_t sum = 0;
        for (int64_t a = 0; a < 10000; a += step)
            sum += sq_hist_count_between(h, a, a + step - 1);
        assert_int_equal(sum, 10000);
    }
    assert_int_equal(sq_hist_count_at(h, -1), 0);
    assert_int_equal(sq_hist_count_at(h, INT64_MAX), 0);

    struct sq_hist_iter it;
    sq_hist_iter_init(&it, h);
    int64_t buckets = 0;
    while (sq_hist_iter_next(&it))
        buckets++;
    /* 0..2047 one bucket each, 2048..4095 width 2, 4096..8191 width 4, 8192..9999 width 8 */
    assert_int_equal(buckets, 2048 + 1024 + 1024 + 226);
    assert_false(sq_hist_iter_next(&it)); /* stays finished */
    assert_consistent(h);

    sq_hist_reset(h);
    sq_hist_iter_init(&it, h);
    assert_false(sq_hist_iter_next(&it));
    sq_hist_free(h);
}

/* ---- merge ---- */

static void test_merge_equals_single(void **state)
{
    (void)state;
    int64_t *v = malloc(N_VALUES * sizeof(*v));
    assert_non_null(v);
    for (int d = 0; d < D__COUNT; d++) {
        gen((enum dist)d, v, N_VALUES, 7 + (uint64_t)d);
        struct sq_hist *all = us_hist(), *shard[4], *merged = us_hist();
        for (int s = 0; s < 4; s++)
            shard[s] = us_hist();
        for (size_t i = 0; i < N_VALUES; i++) {
            assert_true(sq_hist_record(all, v[i]));
            assert_true(sq_hist_record(shard[rng() % 4], v[i]));
        }
        /* out-of-range values travel with the merge */
        assert_false(sq_hist_record(shard[1], -1));
        assert_false(sq_hist_record_n(shard[3], US_HIGHEST + 1, 4));
        for (int s = 0; s < 4; s++) {
            assert_int_equal(sq_hist_merge(merged, shard[s]), 0);
            sq_hist_free(shard[s]);
        }
        assert_same_hist(merged, all);
        assert_int_equal(sq_hist_out_of_range(merged), 5);
        /* merging an empty histogram changes nothing */
        struct sq_hist *empty = us_hist();
        assert_int_equal(sq_hist_merge(merged, empty), 0);
        assert_same_hist(merged, all);
        sq_hist_free(empty);
        sq_hist_free(all);
        sq_hist_free(merged);
    }
    free(v);
}

static void test_merge_across_configs(void **state)
{
    (void)state;
    int64_t *v = malloc(N_VALUES * sizeof(*v));
    assert_non_null(v);
    gen(D_LOGNORMAL, v, N_VALUES, 99);
    struct sq_hist *src = us_hist();
    for (size_t i = 0; i < N_VALUES; i++)
        assert_true(sq_hist_record(src, v[i]));
    assert_false(sq_hist_record(src, -7));
    qsort(v, N_VALUES, sizeof(*v), cmp_i64);

    /* Coarser destinations whose buckets contain the source buckets (both are power-of-two
     * aligned): every percentile lands on the bucket of the true value. */
    struct {
        int64_t lo, hi;
        int sf;
    } coarser[] = {{1, US_HIGHEST, 2}, {1000, US_HIGHEST, 3}, {1, US_HIGHEST * 4, 1}};
    for (size_t c = 0; c < SQ_ARRAY_LEN(coarser); c++) {
        struct sq_hist *dst = new_hist(coarser[c].lo, coarser[c].hi, coarser[c].sf);
        assert_int_equal(sq_hist_merge(dst, src), 0);
        assert_int_equal(sq_hist_total(dst), N_VALUES);
        assert_int_equal(sq_hist_out_of_range(dst), 1);
        for (size_t i = 1; i < SQ_ARRAY_LEN(pcts); i++) {
            int64_t ref = v[ref_rank(pcts[i], N_VALUES) - 1];
            assert_int_equal(sq_hist_percentile(dst, pcts[i]), sq_hist_highest_equiv(dst, ref));
        }
        assert_consistent(dst);
        sq_hist_free(dst);
    }

    /* A finer destination gets each source bucket at its lowest equivalent value. */
    struct sq_hist *coarse = new_hist(1, US_HIGHEST, 2), *fine = new_hist(1, US_HIGHEST, 4);
    assert_int_equal(sq_hist_merge(coarse, src), 0);
    assert_int_equal(sq_hist_merge(fine, coarse), 0);
    for (size_t i = 1; i < SQ_ARRAY_LEN(pcts); i++) {
        int64_t ref = v[ref_rank(pcts[i], N_VALUES) - 1];
        int64_t want = sq_hist_highest_equiv(fine, sq_hist_lowest_equiv(coarse, ref));
        assert_int_equal(sq_hist_percentile(fine, pcts[i]), want);
    }
    assert_int_equal(sq_hist_out_of_range(fine), 1);
    sq_hist_free(coarse);
    sq_hist_free(fine);

    /* A narrower destination: what does not fit is returned and counted, never lost. */
    struct sq_hist *narrow = new_hist(1, 10000, 3);
    int64_t above = 0;
    struct sq_hist_iter it;
    sq_hist_iter_init(&it, src);
    while (sq_hist_iter_next(&it))
        if (it.lowest > 10000)
            above += it.count;
    assert_true(above > 0);
    assert_int_equal(sq_hist_merge(narrow, src), above);
    assert_int_equal(sq_hist_total(narrow) + above, N_VALUES);
    assert_int_equal(sq_hist_out_of_range(narrow), above + 1);
    assert_consistent(narrow);
    sq_hist_free(narrow);

    sq_hist_free(src);
    free(v);
}

static void test_merge_overflow_counted(void **state)
{
    (void)state;
    struct sq_hist *a = us_hist(), *b = us_hist();
    assert_true(sq_hist_record_n(a, 10, INT64_MAX - 5));
    assert_true(sq_hist_record_n(b, 10, 100));
    assert_int_equal(sq_hist_merge(a, b), 100);
    assert_int_equal(sq_hist_total(a), INT64_MAX - 5);
    assert_int_equal(sq_hist_out_of_range(a), 100);
    sq_hist_free(a);
    sq_hist_free(b);
}

/* ---- encoding ---- */

/* Known answer, worked by hand (docs/internals/stats.md walks through it):
 * (1, 100, 1 sf): 32 sub-buckets, half_mag 4, unit 0, counts_len 64.
 * record 1; 3 x2; 40 x300 (index 36); 100 (index 57): counts
 *   [0]=0 [1]=1 [2]=0 [3]=2 [4..35]=0 (32) [36]=300 [37..56]=0 (20) [57]=1
 * payload (ZigZag, then LEB128):
 *   -1 -> 01 | 1 -> 02 | -1 -> 01 | 2 -> 04 | -32 -> 3f | 300 -> 600 = d8 04 | -20 -> 27 | 1 -> 02
 */
static const unsigned char kat_blob[] = {
    0x1c, 0x84, 0x93, 0x13,                         /* V2 cookie */
    0x00, 0x00, 0x00, 0x09,                         /* payload length */
    0x00, 0x00, 0x00, 0x00,                         /* normalizing index offset */
    0x00, 0x00, 0x00, 0x01,                         /* significant figures */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, /* lowest */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x64, /* highest */
    0x3f, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* conversion ratio 1.0 */
    0x01, 0x02, 0x01, 0x04, 0x3f, 0xd8, 0x04, 0x27, 0x02,
};

static struct sq_hist *kat_hist(void)
{
    struct sq_hist *h = new_hist(1, 100, 1);
    assert_true(sq_hist_record(h, 1));
    assert_true(sq_hist_record_n(h, 3, 2));
    assert_true(sq_hist_record_n(h, 40, 300));
    assert_true(sq_hist_record(h, 100));
    assert_int_equal(sq_hist__index_of(h, 40), 36);
    assert_int_equal(sq_hist__index_of(h, 100), 57);
    return h;
}

static void test_encode_known_answer(void **state)
{
    (void)state;
    struct sq_hist *h = kat_hist();
    unsigned char *raw;
    size_t len;
    assert_int_equal(sq_hist__encode_raw(h, &raw, &len), 0);
    assert_int_equal(len, sizeof(kat_blob));
    assert_memory_equal(raw, kat_blob, sizeof(kat_blob));
    free(raw);

    /* the compressed form is the outer header around zlib of exactly those bytes */
    unsigned char *z;
    assert_int_equal(sq_hist_encode(h, &z, &len), 0);
    assert_true(len > 8);
    assert_memory_equal(z, "\x1c\x84\x93\x14", 4);
    uint32_t clen = (uint32_t)z[4] << 24 | (uint32_t)z[5] << 16 | (uint32_t)z[6] << 8 | z[7];
    assert_int_equal(clen, len - 8);
    unsigned char plain[128];
    uLongf plen = sizeof(plain);
    assert_int_equal(uncompress(plain, &plen, z + 8, clen), Z_OK);
    assert_int_equal(plen, sizeof(kat_blob));
    assert_memory_equal(plain, kat_blob, sizeof(kat_blob));
    free(z);

    struct sq_hist *back;
    assert_int_equal(sq_hist__decode_raw(kat_blob, sizeof(kat_blob), &back), 0);
    assert_same_hist(back, h);
    sq_hist_free(back);
    sq_hist_free(h);
}

static void test_encode_nine_byte_varint(void **state)
{
    (void)state;
    /* count 2^62 at index 1: ZigZag gives 2^63, which needs the 9-byte form whose last byte
     * carries 8 bits: 80 x8 then 80. */
    struct sq_hist *h = new_hist(1, 100, 1);
    assert_true(sq_hist_record_n(h, 1, INT64_C(1) << 62));
    unsigned char *raw;
    size_t len;
    assert_int_equal(sq_hist__encode_raw(h, &raw, &len), 0);
    static const unsigned char payload[] = {0x01, 0x80, 0x80, 0x80, 0x80,
                                            0x80, 0x80, 0x80, 0x80, 0x80};
    assert_int_equal(len, 40 + sizeof(payload));
    assert_int_equal(raw[7], sizeof(payload));
    assert_memory_equal(raw + 40, payload, sizeof(payload));
    struct sq_hist *back;
    assert_int_equal(sq_hist__decode_raw(raw, len, &back), 0);
    assert_int_equal(sq_hist_count_at(back, 1), INT64_C(1) << 62);
    sq_hist_free(back);
    free(raw);

    /* and the largest count, INT64_MAX: ZigZag 2^64 - 2 */
    sq_hist_reset(h);
    assert_true(sq_hist_record_n(h, 2, INT64_MAX));
    assert_int_equal(sq_hist__encode_raw(h, &raw, &len), 0);
    static const unsigned char payload2[] = {0x03, 0xfe, 0xff, 0xff, 0xff,
                                             0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(len, 40 + sizeof(payload2));
    assert_memory_equal(raw + 40, payload2, sizeof(payload2));
    assert_int_equal(sq_hist__decode_raw(raw, len, &back), 0);
    assert_int_equal(sq_hist_count_at(back, 2), INT64_MAX);
    assert_int_equal(sq_hist_total(back), INT64_MAX);
    sq_hist_free(back);
    free(raw);
    sq_hist_free(h);
}

static void roundtrip(const struct sq_hist *h)
{
    unsigned char *z, *z2, *raw;
    size_t len, len2, raw_len;
    struct sq_hist *back, *back_raw;
    assert_int_equal(sq_hist_encode(h, &z, &len), 0);
    assert_int_equal(sq_hist_decode(z, len, &back), 0);
    assert_int_equal(sq_hist_lowest(back), sq_hist_lowest(h));
    assert_int_equal(sq_hist_highest(back), sq_hist_highest(h));
    assert_int_equal(sq_hist_sigfigs(back), sq_hist_sigfigs(h));
    assert_same_hist(back, h);
    assert_consistent(back);
    /* deterministic: the decoded histogram re-encodes to the same bytes */
    assert_int_equal(sq_hist_encode(back, &z2, &len2), 0);
    assert_int_equal(len, len2);
    assert_memory_equal(z, z2, len);
    assert_int_equal(sq_hist__encode_raw(h, &raw, &raw_len), 0);
    assert_int_equal(sq_hist__decode_raw(raw, raw_len, &back_raw), 0);
    assert_same_hist(back_raw, h);
    free(z);
    free(z2);
    free(raw);
    sq_hist_free(back);
    sq_hist_free(back_raw);
}

static void test_roundtrip(void **state)
{
    (void)state;
    int64_t *v = malloc(N_VALUES * sizeof(*v));
    assert_non_null(v);
    for (int d = 0; d < D__COUNT; d++) {
        gen((enum dist)d, v, N_VALUES, 1000 + (uint64_t)d);
        struct sq_hist *h = us_hist();
        for (size_t i = 0; i < N_VALUES; i++)
            assert_true(sq_hist_record(h, v[i]));
        roundtrip(h);
        sq_hist_free(h);
    }
    free(v);

    struct sq_hist *h = us_hist();
    roundtrip(h); /* empty */
    assert_true(sq_hist_record(h, 0));
    roundtrip(h); /* only zeros */
    assert_true(sq_hist_record(h, US_HIGHEST));
    roundtrip(h); /* the two extremes */
    sq_hist_free(h);

    h = new_hist(1000, INT64_C(60000000000), 3);
    assert_true(sq_hist_record(h, 1));
    assert_true(sq_hist_record_n(h, 123456789, 77));
    assert_true(sq_hist_record(h, INT64_C(60000000000)));
    roundtrip(h);
    sq_hist_free(h);

    h = new_hist(1, INT64_C(100000000), 5);
    rng_state = 5;
    for (int i = 0; i < 50000; i++)
        assert_true(sq_hist_record(h, (int64_t)(rng() % 100000000)));
    roundtrip(h);
    sq_hist_free(h);
}

/* A small and a large real blob. */
static void make_blobs(unsigned char **small, size_t *small_len, unsigned char **large,
                       size_t *large_len)
{
    struct sq_hist *h = kat_hist();
    assert_int_equal(sq_hist_encode(h, small, small_len), 0);
    sq_hist_free(h);
    h = us_hist();
    int64_t *v = malloc(20000 * sizeof(*v));
    assert_non_null(v);
    gen(D_LOGNORMAL, v, 20000, 3);
    for (size_t i = 0; i < 20000; i++)
        assert_true(sq_hist_record(h, v[i]));
    free(v);
    assert_int_equal(sq_hist_encode(h, large, large_len), 0);
    sq_hist_free(h);
}

static void test_decode_truncated(void **state)
{
    (void)state;
    unsigned char *blobs[2];
    size_t lens[2];
    make_blobs(&blobs[0], &lens[0], &blobs[1], &lens[1]);
    for (int b = 0; b < 2; b++) {
        for (size_t n = 0; n < lens[b]; n++) {
            /* a copy of exactly n bytes, so ASan catches any read past the prefix */
            unsigned char *p = malloc(n ? n : 1);
            assert_non_null(p);
            memcpy(p, blobs[b], n);
            struct sq_hist *h = (struct sq_hist *)0x1;
            assert_int_equal(sq_hist_decode(p, n, &h), -SQ_EDECODE);
            assert_ptr_equal(h, (struct sq_hist *)0x1);
            free(p);
        }
        /* one byte too many is just as wrong */
        unsigned char *p = malloc(lens[b] + 1);
        assert_non_null(p);
        memcpy(p, blobs[b], lens[b]);
        p[lens[b]] = 0;
        struct sq_hist *h;
        assert_int_equal(sq_hist_decode(p, lens[b] + 1, &h), -SQ_EDECODE);
        free(p);
    }
    /* every prefix of the inner blob too */
    for (size_t n = 0; n < sizeof(kat_blob); n++) {
        unsigned char *p = malloc(n ? n : 1);
        memcpy(p, kat_blob, n);
        struct sq_hist *h;
        assert_int_equal(sq_hist__decode_raw(p, n, &h), -SQ_EDECODE);
        free(p);
    }
    assert_int_equal(sq_hist_decode(NULL, 0, &(struct sq_hist *){NULL}), -SQ_EDECODE);
    free(blobs[0]);
    free(blobs[1]);
}

static void test_decode_flipped(void **state)
{
    (void)state;
    unsigned char *blobs[2];
    size_t lens[2];
    make_blobs(&blobs[0], &lens[0], &blobs[1], &lens[1]);
    for (int b = 0; b < 2; b++) {
        struct sq_hist *orig;
        assert_int_equal(sq_hist_decode(blobs[b], lens[b], &orig), 0);
        unsigned char *p = malloc(lens[b]);
        int errors = 0, tries = 0;
        for (size_t i = 0; i < lens[b]; i++) {
            /* every single bit for the small blob; the whole byte for the large one */
            for (int bit = 0; bit < (b == 0 ? 9 : 1); bit++) {
                memcpy(p, blobs[b], lens[b]);
                p[i] ^= bit == 8 || b == 1 ? 0xff : (unsigned char)(1u << bit);
                struct sq_hist *h = NULL;
                int rc = sq_hist_decode(p, lens[b], &h);
                tries++;
                if (rc < 0) {
                    errors++;
                    assert_true(rc == -SQ_EDECODE || rc == -SQ_ETOOBIG);
                    continue;
                }
                /* A success is either a bit deflate ignores (same data back) or a change
                 * that zlib itself accepts: adler32 is weak on short runs and deflate's
                 * back-references can turn one flipped byte into an equal-sum change (seen
                 * here: 06 08 0a 04 04 -> 08 0a 04 02 08). The format has no other check. */
                if (!same_counts(h, orig)) {
                    unsigned char *plain = malloc(1 << 20);
                    uLongf plen = 1 << 20;
                    assert_int_equal(uncompress(plain, &plen, p + 8, (uLong)(lens[b] - 8)), Z_OK);
                    struct sq_hist *raw;
                    assert_int_equal(sq_hist__decode_raw(plain, plen, &raw), 0);
                    assert_true(same_counts(raw, h));
                    sq_hist_free(raw);
                    free(plain);
                    assert_consistent(h);
                }
                sq_hist_free(h);
            }
        }
        /* zlib's adler32 and the strict framing catch nearly every flip */
        assert_true(errors * 100 >= tries * 97);
        free(p);
        sq_hist_free(orig);
    }
    free(blobs[0]);
    free(blobs[1]);

    /* The inner blob has no checksum: a flip may give another valid histogram, but never a
     * crash or an inconsistent one. */
    unsigned char raw[sizeof(kat_blob)];
    for (size_t i = 0; i < sizeof(kat_blob); i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(raw, kat_blob, sizeof(raw));
            raw[i] ^= (unsigned char)(1u << bit);
            struct sq_hist *h;
            if (sq_hist__decode_raw(raw, sizeof(raw), &h) == 0) {
                assert_consistent(h);
                sq_hist_free(h);
            }
        }
    }
}

/* ---- hostile input, crafted ---- */

static size_t put_varint_ref(unsigned char *p, uint64_t v)
{
    size_t i = 0;
    while (i < 8 && v >= 0x80) {
        p[i++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[i++] = (unsigned char)v;
    return i;
}

static size_t zz(unsigned char *p, int64_t n)
{
    return put_varint_ref(p, ((uint64_t)n << 1) ^ (uint64_t)(n >> 63));
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

struct craft {
    unsigned char b[256];
    size_t len;
};

/* An inner blob: header fields as given, then the payload; payload length field = plen. */
static void craft(struct craft *c, uint32_t cookie, int32_t sf, int64_t lo, int64_t hi,
                  const unsigned char *payload, size_t plen)
{
    memset(c, 0, sizeof(*c));
    put32(c->b, cookie);
    put32(c->b + 4, (uint32_t)plen);
    put32(c->b + 8, 0);
    put32(c->b + 12, (uint32_t)sf);
    put64(c->b + 16, (uint64_t)lo);
    put64(c->b + 24, (uint64_t)hi);
    put64(c->b + 32, UINT64_C(0x3ff0000000000000));
    if (plen)
        memcpy(c->b + 40, payload, plen);
    c->len = 40 + plen;
}

/* The compressed wrapper around len bytes of inner blob. */
static unsigned char *wrap(uint32_t cookie, const unsigned char *inner, size_t len, size_t *out_len)
{
    uLongf zl = compressBound(len);
    unsigned char *z = malloc(8 + zl);
    assert_int_equal(compress(z + 8, &zl, inner, len), Z_OK);
    put32(z, cookie);
    put32(z + 4, (uint32_t)zl);
    *out_len = 8 + zl;
    return z;
}

static int decode_both(const struct craft *c)
{
    struct sq_hist *h;
    int rc = sq_hist__decode_raw(c->b, c->len, &h);
    if (rc == 0)
        sq_hist_free(h);
    size_t zl;
    unsigned char *z = wrap(0x1c849314, c->b, c->len, &zl);
    int rc2 = sq_hist_decode(z, zl, &h);
    if (rc2 == 0)
        sq_hist_free(h);
    free(z);
    assert_int_equal(rc, rc2);
    return rc;
}

static void test_decode_hostile(void **state)
{
    (void)state;
    struct craft c;
    unsigned char pl[80];
    size_t n;

    craft(&c, 0x1c849313, 1, 1, 100, NULL, 0); /* empty and valid */
    assert_int_equal(decode_both(&c), 0);

    craft(&c, 0x1c849313, 5, 1, INT64_MAX, NULL, 0); /* 6.2 M buckets: refused */
    assert_int_equal(decode_both(&c), -SQ_ETOOBIG);
    craft(&c, 0x1c849313, 0, 1, 100, NULL, 0);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    craft(&c, 0x1c849313, 6, 1, 100, NULL, 0);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    craft(&c, 0x1c849313, 3, 0, 100, NULL, 0);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    craft(&c, 0x1c849313, 3, -1, 100, NULL, 0);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    craft(&c, 0x1c849313, 3, 60, 100, NULL, 0);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    craft(&c, 0x1c849308, 3, 1, 100, NULL, 0); /* V0: not supported */
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    craft(&c, 0x1c849323, 3, 1, 100, NULL, 0); /* V2 with a word size other than 1 */
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    craft(&c, 0x1c849313, 3, 1, 100, NULL, 0);
    put32(c.b + 8, 1); /* normalizing index offset */
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    craft(&c, 0x1c849313, 3, 1, 100, NULL, 0);
    put32(c.b + 4, 0x80000000u); /* negative payload length */
    assert_int_equal(decode_both(&c), -SQ_EDECODE);

    /* (1, 100, 1): counts_len 64 */
    n = zz(pl, -64); /* a zero run to the very end is fine */
    craft(&c, 0x1c849313, 1, 1, 100, pl, n);
    assert_int_equal(decode_both(&c), 0);
    n = zz(pl, -65); /* one past */
    craft(&c, 0x1c849313, 1, 1, 100, pl, n);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    n = zz(pl, -64);
    n += zz(pl + n, 1); /* a count at index 64 */
    craft(&c, 0x1c849313, 1, 1, 100, pl, n);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    n = zz(pl, INT64_MAX);
    n += zz(pl + n, 1); /* total overflows */
    craft(&c, 0x1c849313, 1, 1, 100, pl, n);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    n = zz(pl, INT64_MIN); /* a zero run of 2^63 */
    craft(&c, 0x1c849313, 1, 1, 100, pl, n);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    pl[0] = 0x05;
    pl[1] = 0x80; /* a varint cut short */
    craft(&c, 0x1c849313, 1, 1, 100, pl, 2);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    memset(pl, 0x80, 8); /* eight continuation bytes and no ninth */
    craft(&c, 0x1c849313, 1, 1, 100, pl, 8);
    assert_int_equal(decode_both(&c), -SQ_EDECODE);
    memset(pl, 0, 65); /* 64 zero counts: legal, if wasteful */
    craft(&c, 0x1c849313, 1, 1, 100, pl, 64);
    assert_int_equal(decode_both(&c), 0);
    craft(&c, 0x1c849313, 1, 1, 100, pl, 65); /* 65 */
    assert_int_equal(decode_both(&c), -SQ_EDECODE);

    /* payload length field disagrees with the bytes */
    craft(&c, 0x1c849313, 1, 1, 100, pl, 4);
    put32(c.b + 4, 3);
    struct sq_hist *h;
    assert_int_equal(sq_hist__decode_raw(c.b, c.len, &h), -SQ_EDECODE);
    size_t zl;
    unsigned char *z = wrap(0x1c849314, c.b, c.len, &zl);
    assert_int_equal(sq_hist_decode(z, zl, &h), -SQ_EDECODE); /* data after the payload */
    free(z);
    put32(c.b + 4, 5);
    z = wrap(0x1c849314, c.b, c.len, &zl);
    assert_int_equal(sq_hist_decode(z, zl, &h), -SQ_EDECODE); /* payload cut short */
    free(z);

    /* a 20-byte blob claiming a 300 KB payload is refused before any allocation of that size */
    craft(&c, 0x1c849313, 3, 1, US_HIGHEST, NULL, 0);
    put32(c.b + 4, 9 * 23552);
    z = wrap(0x1c849314, c.b, 40, &zl);
    assert_int_equal(sq_hist_decode(z, zl, &h), -SQ_EDECODE);
    free(z);

    /* wrapper problems */
    craft(&c, 0x1c849313, 1, 1, 100, NULL, 0);
    z = wrap(0x1c849314, c.b, c.len, &zl);
    assert_int_equal(sq_hist_decode(z, zl, &h), 0);
    sq_hist_free(h);
    put32(z + 4, (uint32_t)(zl - 7)); /* length field one too big */
    assert_int_equal(sq_hist_decode(z, zl, &h), -SQ_EDECODE);
    put32(z + 4, 0xffffffffu);
    assert_int_equal(sq_hist_decode(z, zl, &h), -SQ_EDECODE);
    put32(z + 4, (uint32_t)(zl - 8));
    put32(z, 0x1c849304); /* V2 compressed cookie without the 0x10 */
    assert_int_equal(sq_hist_decode(z, zl, &h), -SQ_EDECODE);
    put32(z, 0x1c849342); /* a V1 wrapper around a V2 blob */
    assert_int_equal(sq_hist_decode(z, zl, &h), -SQ_EDECODE);
    free(z);
    z = wrap(0x1c849314, c.b, c.len, &zl);
    unsigned char *longer = malloc(zl + 1);
    memcpy(longer, z, zl);
    longer[zl] = 0x00;
    put32(longer + 4, (uint32_t)(zl + 1 - 8)); /* junk after the zlib stream */
    assert_int_equal(sq_hist_decode(longer, zl + 1, &h), -SQ_EDECODE);
    free(longer);
    free(z);
    /* not zlib at all */
    unsigned char junk[48] = {0x1c, 0x84, 0x93, 0x14, 0, 0, 0, 40};
    memcpy(junk + 8, kat_blob, 40);
    assert_int_equal(sq_hist_decode(junk, sizeof(junk), &h), -SQ_EDECODE);
}

static void test_decode_v1(void **state)
{
    (void)state;
    /* V1 as described in engine-facts §1: the same 40-byte header, counts as big-endian words
     * of the cookie's word size. (Crafted here; not checked against a V1 blob from Java.) */
    for (int word = 2; word <= 8; word *= 2) {
        unsigned char pl[4 * 8] = {0};
        int64_t counts[4] = {0, 5, 0, 7};
        for (int i = 0; i < 4; i++)
            for (int b = 0; b < word; b++)
                pl[i * word + b] = (unsigned char)(counts[i] >> (8 * (word - 1 - b)));
        struct craft c;
        craft(&c, 0x1c849301u | (uint32_t)word << 4, 1, 1, 100, pl, (size_t)(4 * word));
        struct sq_hist *h;
        assert_int_equal(sq_hist__decode_raw(c.b, c.len, &h), 0);
        assert_int_equal(sq_hist_count_at(h, 1), 5);
        assert_int_equal(sq_hist_count_at(h, 3), 7);
        assert_int_equal(sq_hist_total(h), 12);
        assert_int_equal(sq_hist_min(h), 1);
        assert_int_equal(sq_hist_max(h), 3);
        sq_hist_free(h);
        size_t zl;
        unsigned char *z = wrap(0x1c849302u | (uint32_t)word << 4, c.b, c.len, &zl);
        assert_int_equal(sq_hist_decode(z, zl, &h), 0);
        assert_int_equal(sq_hist_total(h), 12);
        sq_hist_free(h);
        free(z);
        /* a negative count and a ragged payload are corrupt */
        pl[word] = 0x80;
        craft(&c, 0x1c849301u | (uint32_t)word << 4, 1, 1, 100, pl, (size_t)(4 * word));
        assert_int_equal(sq_hist__decode_raw(c.b, c.len, &h), -SQ_EDECODE);
        craft(&c, 0x1c849301u | (uint32_t)word << 4, 1, 1, 100, pl, (size_t)(4 * word - 1));
        assert_int_equal(sq_hist__decode_raw(c.b, c.len, &h), -SQ_EDECODE);
    }
    struct craft c;
    craft(&c, 0x1c849331u, 1, 1, 100, NULL, 0); /* word size 3 */
    struct sq_hist *h;
    assert_int_equal(sq_hist__decode_raw(c.b, c.len, &h), -SQ_EDECODE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_rejects_bad_config),
        cmocka_unit_test(test_config_memory),
        cmocka_unit_test(test_latency_factory),
        cmocka_unit_test(test_index_boundaries),
        cmocka_unit_test(test_out_of_range_counted),
        cmocka_unit_test(test_reset_releases_pages),
        cmocka_unit_test(test_min_max_mean_stddev),
        cmocka_unit_test(test_percentiles_vs_sorted),
        cmocka_unit_test(test_count_between_and_iter),
        cmocka_unit_test(test_merge_equals_single),
        cmocka_unit_test(test_merge_across_configs),
        cmocka_unit_test(test_merge_overflow_counted),
        cmocka_unit_test(test_encode_known_answer),
        cmocka_unit_test(test_encode_nine_byte_varint),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_decode_truncated),
        cmocka_unit_test(test_decode_flipped),
        cmocka_unit_test(test_decode_hostile),
        cmocka_unit_test(test_decode_v1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
