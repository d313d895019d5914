/* Unit tests: plan/exec (executor validation, arrival schedule, VU ramps, stage parsing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "plan/exec.h"

static struct sq_exec rate_exec(double rate, int64_t duration_ns)
{
    struct sq_exec e = {
        .kind = SQ_EXEC_CONSTANT_ARRIVAL_RATE, .vus = 10, .rate = rate, .duration_ns = duration_ns};
    const char *why;
    assert_int_equal(sq_exec_prepare(&e, &why), 0);
    return e;
}

static void constant_rate_schedule(void **state)
{
    (void)state;
    struct sq_exec e = rate_exec(1000, 3 * SQ_NS_PER_S);
    assert_int_equal(sq_exec_total_arrivals(&e), 3000);
    for (uint64_t i = 0; i < 3000; i++)
        assert_int_equal(sq_exec_arrival_ns(&e, i), (int64_t)i * SQ_NS_PER_MS);
    assert_true(sq_exec_arrival_ns(&e, 3000) >= 3 * SQ_NS_PER_S); /* not before the end */
    assert_int_equal(e.max_in_flight, 10);                        /* defaults to the connections */

    /* Rates that do not divide the duration: every arrival due before the end counts. */
    e = rate_exec(3, SQ_NS_PER_S); /* 0, 333ms, 667ms */
    assert_int_equal(sq_exec_total_arrivals(&e), 3);
    e = rate_exec(2.5, SQ_NS_PER_S); /* 0, 400ms, 800ms */
    assert_int_equal(sq_exec_total_arrivals(&e), 3);
    assert_int_equal(sq_exec_arrival_ns(&e, 2), 800 * SQ_NS_PER_MS);
    e = rate_exec(7, 1500 * SQ_NS_PER_MS); /* 10.5 due: 0..10 */
    assert_int_equal(sq_exec_total_arrivals(&e), 11);
}

/* sq_exec_expected (a running run's control rebases on it, engine/control.c): the integral of
 * the rate curve, the inverse of sq_exec_arrival_ns, the whole count past the end. */
static void expected_count(void **state)
{
    (void)state;
    struct sq_exec m = {.kind = SQ_EXEC_RAMPING_ARRIVAL_RATE, .vus = 8};
    const char *why;
    assert_int_equal(sq_exec_parse_stages(&m, "2s:100,3s:100,2s:0", &why), 0);
    assert_int_equal(sq_exec_prepare(&m, &why), 0);
    assert_true(fabs(sq_exec_expected(&m, 0)) < 1e-9);
    assert_true(fabs(sq_exec_expected(&m, 1 * SQ_NS_PER_S) - 25) < 1e-6); /* 50 t^2 */
    assert_true(fabs(sq_exec_expected(&m, 2 * SQ_NS_PER_S) - 100) < 1e-6);
    assert_true(fabs(sq_exec_expected(&m, 3500 * SQ_NS_PER_MS) - 250) < 1e-6);
    assert_true(fabs(sq_exec_expected(&m, 6 * SQ_NS_PER_S) - 475) < 1e-6); /* 400 + 75 */
    assert_true(fabs(sq_exec_expected(&m, 60 * SQ_NS_PER_S) - 500) < 1e-6);
    for (uint64_t i = 1; i < 500; i += 7) {
        int64_t t = sq_exec_arrival_ns(&m, i);
        assert_true(fabs(sq_exec_expected(&m, t) - (double)i) < 1e-3);
    }
    struct sq_exec c = {.kind = SQ_EXEC_CONSTANT_ARRIVAL_RATE,
                        .vus = 4,
                        .rate = 300,
                        .duration_ns = 5 * SQ_NS_PER_S};
    assert_int_equal(sq_exec_prepare(&c, &why), 0);
    assert_true(fabs(sq_exec_expected(&c, 1234 * SQ_NS_PER_MS) - 370.2) < 1e-6);
}

static void ramp_schedule(void **state)
{
    (void)state;
    struct sq_exec e = {.kind = SQ_EXEC_RAMPING_ARRIVAL_RATE, .vus = 8, .start_rate = 0};
    const char *why;
    assert_int_equal(sq_exec_parse_stages(&e, "10s:1000", &why), 0);
    assert_int_equal(sq_exec_prepare(&e, &why), 0);
    uint64_t n = sq_exec_total_arrivals(&e);
    assert_int_equal(n, 5000);
    /* The cumulative count follows the integral of the rate: N(t) = 50 t^2 (t in s). */
    int64_t prev = -1;
    for (uint64_t i = 0; i < n; i++) {
        int64_t t = sq_exec_arrival_ns(&e, i);
        assert_true(t >= prev);
        assert_true(t < 10 * SQ_NS_PER_S);
        double ts = (double)t / 1e9;
        assert_true(fabs(50 * ts * ts - (double)i) < 1e-3 * (double)i + 1e-6);
        prev = t;
    }
    /* Up, flat, down: 0->100 over 2s (100), 100 for 3s (300), 100->0 over 2s (100). */
    struct sq_exec m = {.kind = SQ_EXEC_RAMPING_ARRIVAL_RATE, .vus = 8};
    assert_int_equal(sq_exec_parse_stages(&m, "2s:100,3s:100,2s:0", &why), 0);
    assert_int_equal(sq_exec_prepare(&m, &why), 0);
    assert_int_equal(sq_exec_total_arrivals(&m), 500);
    assert_int_equal(sq_exec_arrival_ns(&m, 100), 2 * SQ_NS_PER_S);
    assert_int_equal(sq_exec_arrival_ns(&m, 150), 2500 * SQ_NS_PER_MS);
    prev = -1;
    for (uint64_t i = 0; i < 500; i++) {
        int64_t t = sq_exec_arrival_ns(&m, i);
        assert_true(t >= prev && t < 7 * SQ_NS_PER_S);
        prev = t;
    }
    /* The ramp down mirrors the ramp up: the last arrival is as far from the end as arrival 1
     * is from the start. */
    int64_t first_gap = sq_exec_arrival_ns(&m, 1);
    int64_t last = sq_exec_arrival_ns(&m, 499);
    assert_true(llabs(7 * SQ_NS_PER_S - last - first_gap) < SQ_NS_PER_MS);
}

static void shares_add_up(void **state)
{
    (void)state;
    struct sq_exec e = rate_exec(997, 2 * SQ_NS_PER_S);
    uint64_t total = sq_exec_total_arrivals(&e);
    for (uint32_t n = 1; n <= 7; n++) {
        uint64_t sum = 0;
        for (uint32_t w = 0; w < n; w++)
            for (uint64_t i = w; i < total; i += n)
                sum++;
        assert_int_equal(sum, total);
    }
}

static void vu_ramps(void **state)
{
    (void)state;
    struct sq_exec e = {.kind = SQ_EXEC_RAMPING_VUS};
    const char *why;
    assert_int_equal(sq_exec_parse_stages(&e, "10s:100,30s:100,10s:0", &why), 0);
    assert_int_equal(sq_exec_prepare(&e, &why), 0);
    assert_int_equal(sq_exec_length_ns(&e), 50 * SQ_NS_PER_S);
    assert_int_equal(sq_exec_max_vus(&e), 100);
    assert_int_equal(sq_exec_vus_at(&e, 0), 0);
    assert_int_equal(sq_exec_vus_at(&e, 5 * SQ_NS_PER_S), 50);
    assert_int_equal(sq_exec_vus_at(&e, 20 * SQ_NS_PER_S), 100);
    assert_int_equal(sq_exec_vus_at(&e, 45 * SQ_NS_PER_S), 50);
    assert_int_equal(sq_exec_vus_at(&e, 60 * SQ_NS_PER_S), 0);
}

static void validation(void **state)
{
    (void)state;
    const char *why = NULL;
    struct sq_exec e = {.kind = SQ_EXEC_CONSTANT_VUS, .vus = 0, .duration_ns = SQ_NS_PER_S};
    assert_int_equal(sq_exec_prepare(&e, &why), -SQ_EUSAGE);
    assert_non_null(strstr(why, "vus"));
    e = (struct sq_exec){
        .kind = SQ_EXEC_CONSTANT_ARRIVAL_RATE, .vus = 4, .rate = 0, .duration_ns = SQ_NS_PER_S};
    assert_int_equal(sq_exec_prepare(&e, &why), -SQ_EUSAGE);
    assert_non_null(strstr(why, "rate"));
    e = (struct sq_exec){.kind = SQ_EXEC_CONSTANT_ARRIVAL_RATE,
                         .vus = 4,
                         .rate = 10,
                         .duration_ns = SQ_NS_PER_S,
                         .max_in_flight = 2};
    assert_int_equal(sq_exec_prepare(&e, &why), -SQ_EUSAGE);
    assert_non_null(strstr(why, "max-in-flight"));
    /* maxVUs: the pool grows from vus to it; the in-flight cap defaults to it */
    e = (struct sq_exec){
        .kind = SQ_EXEC_CONSTANT_ARRIVAL_RATE, .vus = 4, .rate = 10, .duration_ns = SQ_NS_PER_S};
    assert_int_equal(sq_exec_prepare(&e, &why), 0);
    assert_int_equal(e.max_vus, 4);
    assert_int_equal(e.max_in_flight, 4);
    assert_int_equal(sq_exec_max_vus(&e), 4);
    assert_int_equal(e.precision, SQ_PACING_NORMAL);
    e.max_vus = 40;
    e.max_in_flight = 0;
    assert_int_equal(sq_exec_prepare(&e, &why), 0);
    assert_int_equal(e.max_in_flight, 40);
    assert_int_equal(sq_exec_max_vus(&e), 40);
    e.max_vus = 2;
    e.max_in_flight = 0;
    assert_int_equal(sq_exec_prepare(&e, &why), -SQ_EUSAGE);
    assert_non_null(strstr(why, "max-vus"));
    e.max_vus = 40;
    e.max_in_flight = 10;
    assert_int_equal(sq_exec_prepare(&e, &why), -SQ_EUSAGE);
    assert_non_null(strstr(why, "at least max-vus"));
    e.max_in_flight = 0;
    e.precision = 7;
    assert_int_equal(sq_exec_prepare(&e, &why), -SQ_EUSAGE);
    assert_non_null(strstr(why, "pacing-precision"));
    assert_string_equal(sq_pacing_name(SQ_PACING_HIGH), "high");
    assert_int_equal(sq_pacing_from_name("off"), SQ_PACING_OFF);
    assert_int_equal(sq_pacing_from_name("normal"), SQ_PACING_NORMAL);
    assert_int_equal(sq_pacing_from_name("coarse"), SQ_PACING_COARSE);
    assert_int_equal(sq_pacing_from_name("Normal"), -1);
    e = (struct sq_exec){.kind = SQ_EXEC_SHARED_ITERATIONS, .vus = 4};
    assert_int_equal(sq_exec_prepare(&e, &why), -SQ_EUSAGE);
    assert_non_null(strstr(why, "iterations"));
    e = (struct sq_exec){.kind = SQ_EXEC_SHARED_ITERATIONS, .vus = 40, .iterations = 5};
    assert_int_equal(sq_exec_prepare(&e, &why), 0);
    assert_int_equal(e.vus, 5);                                 /* no VU without an iteration */
    assert_int_equal(sq_exec_length_ns(&e), 600 * SQ_NS_PER_S); /* maxDuration default */
    e = (struct sq_exec){.kind = SQ_EXEC_RAMPING_VUS};
    assert_int_equal(sq_exec_prepare(&e, &why), -SQ_EUSAGE);
    assert_int_equal(sq_exec_parse_stages(&e, "10s:0", &why), 0);
    assert_int_equal(sq_exec_prepare(&e, &why), -SQ_EUSAGE); /* never a VU */
    assert_int_equal(sq_exec_parse_stages(&e, "10s:2.5", &why), 0);
    assert_int_equal(sq_exec_prepare(&e, &why), -SQ_EUSAGE); /* half a VU */
}

static void stage_parsing(void **state)
{
    (void)state;
    struct sq_exec e = {0};
    const char *why;
    assert_int_equal(sq_exec_parse_stages(&e, "500ms:10,1m30s:20.5", &why), 0);
    assert_int_equal(e.nstages, 2);
    assert_int_equal(e.stages[0].duration_ns, 500 * SQ_NS_PER_MS);
    assert_true(e.stages[1].target == 20.5);
    assert_int_equal(e.stages[1].duration_ns, 90 * SQ_NS_PER_S);
    static const char *const bad[] = {"",      "10s",    "10s:",    ":5",      "10s:-1",
                                      "10x:5", "10s:5,", "10s:5,,", "10s:abc", "10s:5:6"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(bad); i++)
        assert_int_equal(sq_exec_parse_stages(&e, bad[i], &why), -SQ_EUSAGE);
    assert_int_equal(sq_exec_kind_from_name("ramping-arrival-rate"), SQ_EXEC_RAMPING_ARRIVAL_RATE);
    assert_int_equal(sq_exec_kind_from_name("nope"), -1);
}

/* ---- execution segments ---- */

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rnd(uint64_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state % n;
}

/* Checks every property of a sequence's segments over the counts 0..vmax and the given ones:
 * the shares add up to the count, each stays within one of its exact proportion (so equal
 * segments differ by at most one), and the global indices of the segments partition 0..v-1. */
static void check_sequence(const struct sq_rat *pt, uint32_t np, uint64_t vmax,
                           const uint64_t *extra, size_t nextra)
{
    uint32_t parts = np - 1;
    struct sq_seg *segs = calloc(parts, sizeof(*segs));
    assert_non_null(segs);
    const char *why = NULL;
    for (uint32_t k = 0; k < parts; k++)
        assert_int_equal(sq_seg_init(&segs[k], pt, np, k, &why), 0);
    uint64_t L = segs[0].period;
    unsigned char *owner = calloc(vmax + 1, 1);
    assert_non_null(owner);
    for (uint64_t v = 0; v <= vmax + nextra; v++) {
        uint64_t count = v <= vmax ? v : extra[v - vmax - 1];
        uint64_t sum = 0;
        for (uint32_t k = 0; k < parts; k++) {
            uint64_t sh = sq_seg_share(&segs[k], count);
            sum += sh;
            /* |share - count * len| < 1, with len = per_period / L: exact in integers */
            unsigned __int128 exact = (unsigned __int128)count * segs[k].per_period;
            unsigned __int128 lo = (unsigned __int128)sh * L;
            assert_true(lo + L > exact && exact + L > lo);
        }
        assert_int_equal(sum, count);
    }
    /* The global indices: each of 0..vmax-1 belongs to exactly one segment, in rising order. */
    for (uint32_t k = 0; k < parts; k++) {
        uint64_t n = sq_seg_share(&segs[k], vmax), prev = 0;
        for (uint64_t j = 0; j < n; j++) {
            uint64_t g = sq_seg_global(&segs[k], j);
            assert_true(g < vmax);
            assert_true(j == 0 || g > prev);
            assert_int_equal(owner[g], 0);
            owner[g] = (unsigned char)(k + 1);
            assert_int_equal(sq_seg_share(&segs[k], g), j); /* j of its own lie below g */
            prev = g;
        }
    }
    for (uint64_t g = 0; g < vmax; g++)
        assert_true(owner[g] != 0);
    free(owner);
    for (uint32_t k = 0; k < parts; k++)
        sq_seg_dispose(&segs[k]);
    free(segs);
}

static void segments_even(void **state)
{
    (void)state;
    struct sq_rat pt[9];
    const char *why;
    sq_seg_even(pt, 3);
    struct sq_seg a, b, c;
    assert_int_equal(sq_seg_init(&a, pt, 4, 0, &why), 0);
    assert_int_equal(sq_seg_init(&b, pt, 4, 1, &why), 0);
    assert_int_equal(sq_seg_init(&c, pt, 4, 2, &why), 0);
    /* Round-robin: 0,3,6.. / 1,4,7.. / 2,5,8.. */
    for (uint64_t j = 0; j < 100; j++) {
        assert_int_equal(sq_seg_global(&a, j), 3 * j);
        assert_int_equal(sq_seg_global(&b, j), 3 * j + 1);
        assert_int_equal(sq_seg_global(&c, j), 3 * j + 2);
    }
    /* 7 VUs over 3 agents: 3, 2, 2. 1,000 over 3: 334, 333, 333. */
    assert_int_equal(sq_seg_share(&a, 7), 3);
    assert_int_equal(sq_seg_share(&b, 7), 2);
    assert_int_equal(sq_seg_share(&c, 7), 2);
    assert_int_equal(sq_seg_share(&a, 1000), 334);
    assert_int_equal(sq_seg_share(&b, 1000), 333);
    assert_int_equal(sq_seg_share(&c, 1000), 333);
    assert_int_equal(sq_seg_share(NULL, 1000), 1000);
    assert_int_equal(sq_seg_global(NULL, 17), 17);
    char buf[32];
    sq_rat_format(b.from, buf, sizeof(buf));
    assert_string_equal(buf, "1/3");
    sq_rat_format(c.to, buf, sizeof(buf));
    assert_string_equal(buf, "1");
    sq_seg_dispose(&a);
    sq_seg_dispose(&b);
    sq_seg_dispose(&c);
    for (uint32_t n = 1; n <= 64; n++) {
        sq_seg_even(pt, n > 8 ? 8 : n);
        struct sq_rat *big = calloc(n + 1, sizeof(*big));
        assert_non_null(big);
        sq_seg_even(big, n);
        uint64_t extra[] = {1000000007ull, 3000, 15000, UINT64_MAX / 2};
        check_sequence(big, n + 1, 300, extra, 4);
        free(big);
    }
}

/* The property over many (VUs, rate, iterations, agents) combinations and uneven sequences:
 * each executor's quantities (VUs, iterations, the arrivals its rate and duration make) split
 * by any sequence add up exactly, and no share strays a unit from its proportion. */
static void segments_property(void **state)
{
    (void)state;
    int checked = 0;
    for (int round = 0; round < 300; round++) {
        uint32_t parts = 1 + (uint32_t)rnd(round < 150 ? 8 : 24);
        struct sq_rat pt[26];
        pt[0] = (struct sq_rat){0, 1};
        /* random rising points with small denominators */
        uint32_t np = 1;
        for (uint32_t k = 1; k < parts; k++) {
            uint64_t den = 2 + rnd(round % 3 == 0 ? 60 : 12), num = 1 + rnd(den - 1);
            struct sq_rat r = {num, den};
            /* insert keeping order and uniqueness */
            uint32_t at = np;
            bool dup = false;
            for (uint32_t i = 1; i < np; i++) {
                unsigned __int128 x = (unsigned __int128)r.num * pt[i].den,
                                  y = (unsigned __int128)pt[i].num * r.den;
                if (x == y)
                    dup = true;
                if (x < y && at == np)
                    at = i;
            }
            if (dup)
                continue;
            memmove(&pt[at + 1], &pt[at], (np - at) * sizeof(pt[0]));
            pt[at] = r;
            np++;
        }
        pt[np++] = (struct sq_rat){1, 1};
        uint64_t L = 1; /* the period, kept small enough for a quick test */
        for (uint32_t i = 0; i < np && L <= 50000; i++) {
            uint64_t a = L, b = pt[i].den / gcd(pt[i].num, pt[i].den);
            L = a / gcd(a, b) * b;
        }
        if (L > 50000)
            continue;
        /* The executors' counts: VUs, iterations and the arrivals of a rate over a duration. */
        uint64_t vus = 1 + rnd(5000), iters = 1 + rnd(100000);
        struct sq_exec e = rate_exec(1 + (double)rnd(20000), (int64_t)(1 + rnd(30)) * SQ_NS_PER_S);
        uint64_t counts[] = {vus, iters, sq_exec_total_arrivals(&e), 7, 1000, 3 * L + 1};
        checked++;
        check_sequence(pt, np, L * 2 + 40 < 4000 ? L * 2 + 40 : 4000, counts, 6);
    }
    assert_true(checked > 150); /* most rounds ran: the skip above is the exception */
}

static void segment_parsing(void **state)
{
    (void)state;
    struct sq_rat pt[16];
    uint32_t n;
    const char *why;
    assert_int_equal(sq_seg_parse_sequence("0,1/3,2/3,1", pt, 16, &n, &why), 0);
    assert_int_equal(n, 4);
    assert_int_equal(pt[1].num, 1);
    assert_int_equal(pt[1].den, 3);
    assert_int_equal(sq_seg_parse_sequence("1/3,2/3", pt, 16, &n, &why), 0); /* 0 and 1 added */
    assert_int_equal(n, 4);
    assert_int_equal(pt[3].num, 1);
    assert_int_equal(sq_seg_parse_sequence("25%,0.5,3/4", pt, 16, &n, &why), 0);
    assert_int_equal(n, 5);
    assert_int_equal(pt[1].num, 1);
    assert_int_equal(pt[1].den, 4);
    assert_int_equal(pt[2].den, 2);
    assert_int_equal(sq_seg_parse_sequence("2/4", pt, 16, &n, &why), 0); /* reduced */
    assert_int_equal(pt[1].num, 1);
    assert_int_equal(pt[1].den, 2);
    const char *bad[] = {"",    "1/3,1/4", "2/1",  "abc",  "1/0",  "0,0",  "0.5,0.5",
                         "1,1", "1/3,,1",  "-1/3", "1/3 ", "50%%", "0x1/2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        assert_int_equal(sq_seg_parse_sequence(bad[i], pt, 16, &n, &why), -SQ_EUSAGE);
        assert_non_null(why);
    }
    assert_int_equal(sq_seg_parse_sequence("0.1,0.2,0.3", pt, 3, &n, &why), -SQ_EUSAGE);
    /* init refuses what cannot be a sequence */
    struct sq_seg s;
    struct sq_rat up[] = {{0, 1}, {1, 2}, {1, 1}};
    assert_int_equal(sq_seg_init(&s, up, 3, 2, &why), -SQ_EUSAGE); /* index past the end */
    struct sq_rat down[] = {{0, 1}, {2, 3}, {1, 3}, {1, 1}};
    assert_int_equal(sq_seg_init(&s, down, 4, 0, &why), -SQ_EUSAGE);
    struct sq_rat huge[] = {{0, 1}, {1, 999983}, {1, 999979}, {1, 1}};
    assert_int_equal(sq_seg_init(&s, huge, 4, 0, &why), -SQ_EUSAGE); /* period over the cap */
    struct sq_rat whole[] = {{0, 1}, {1, 1}};
    assert_int_equal(sq_seg_init(&s, whole, 2, 0, &why), 0);
    assert_int_equal(sq_seg_share(&s, 12345), 12345);
    sq_seg_dispose(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(constant_rate_schedule),
        cmocka_unit_test(ramp_schedule),
        cmocka_unit_test(expected_count),
        cmocka_unit_test(shares_add_up),
        cmocka_unit_test(vu_ramps),
        cmocka_unit_test(validation),
        cmocka_unit_test(stage_parsing),
        cmocka_unit_test(segments_even),
        cmocka_unit_test(segments_property),
        cmocka_unit_test(segment_parsing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
