/* Unit tests: plan/exec (executor validation, arrival schedule, VU ramps, stage parsing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(constant_rate_schedule),
        cmocka_unit_test(ramp_schedule),
        cmocka_unit_test(shares_add_up),
        cmocka_unit_test(vu_ramps),
        cmocka_unit_test(validation),
        cmocka_unit_test(stage_parsing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
