/* Unit tests: output/instr.c (the A/B and measure documents, sentences, tables, pages) and
 * output/compare.c (two runs side by side), fed made-up rounds and documents. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/compare.h"
#include "output/doc.h"
#include "output/instr.h"
#include "stats/ab.h"

/* Renders f(doc, FILE) into a string (free it). */
static char *render(int (*f)(const json_t *, FILE *), const json_t *doc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    assert_int_equal(f(doc, m), 0);
    fclose(m);
    return buf;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static void sentences(void **state)
{
    (void)state;
    char buf[512];
    struct sq_ab_said s = {"B", SQ_AB_RPS, SQ_AB_RESOLVED, 4.1, 2.8, 5.3, 0.95, 1.2, true, NAN};
    assert_string_equal(sq_ab_sentence(buf, sizeof(buf), &s),
                        "B is 4.1% faster (95% CI 2.8–5.3%), beyond the null test's ±1.2%");
    /* slower: the interval turns with the statement */
    s = (struct sq_ab_said){"B",   SQ_AB_RPS, SQ_AB_RESOLVED, -45.6, -57.1,
                            -35.8, 0.95,      18.8,           true,  NAN};
    assert_string_equal(sq_ab_sentence(buf, sizeof(buf), &s),
                        "B is 45.6% slower (95% CI 35.8–57.1%), beyond the null test's ±18.8%");
    /* latency: higher is slower, with the difference per request */
    s = (struct sq_ab_said){"B",  SQ_AB_P50, SQ_AB_RESOLVED, 87.2, 80.7, 91.1,
                            0.95, 5.0,       true,           1030};
    assert_string_equal(sq_ab_sentence(buf, sizeof(buf), &s),
                        "B is 87.2% slower at p50 (+1.03ms per request) (95% CI 80.7–91.1%), "
                        "beyond the null test's ±5.0%");
    s = (struct sq_ab_said){"new", SQ_AB_CLIENT_CPU, SQ_AB_RESOLVED, -10, -12, -8, 0.95, 1, false,
                            -0.5};
    assert_string_equal(sq_ab_sentence(buf, sizeof(buf), &s),
                        "new uses 10.0% less client CPU per request (-0.50µs) (95% CI "
                        "8.0–12.0%; no null test was run)");
    s = (struct sq_ab_said){"B",  SQ_AB_RPS, SQ_AB_INCLUDES_ZERO, -0.3, -1.9, 1.2, 0.95, 1.1,
                            true, NAN};
    assert_string_equal(sq_ab_sentence(buf, sizeof(buf), &s),
                        "not resolvable: B's req/s moved −0.3% (95% CI −1.9 to +1.2%), an "
                        "interval that includes 0; the null test moves ±1.1%");
    s = (struct sq_ab_said){"B",  SQ_AB_RPS, SQ_AB_WITHIN_NOISE, -4.1, -7.0, -1.2, 0.95, 6,
                            true, NAN};
    assert_string_equal(sq_ab_sentence(buf, sizeof(buf), &s),
                        "not resolvable here: the null test moves ±6.0% (B's req/s −4.1%, 95% "
                        "CI −7.0 to −1.2%)");
    s.verdict = SQ_AB_NO_DATA;
    s.metric = SQ_AB_SERVER_CPU;
    assert_string_equal(sq_ab_sentence(buf, sizeof(buf), &s),
                        "no data: B has no server CPU per request figure to compare in these "
                        "rounds");
    assert_int_equal(sq_ab_metric_parse("server-cpu"), SQ_AB_SERVER_CPU);
    assert_int_equal(sq_ab_metric_parse("p50"), SQ_AB_P50);
    assert_int_equal(sq_ab_metric_parse("mean"), -1);
    assert_string_equal(sq_ab_metric_key(SQ_AB_P99), "p99_us");
}

#define R 8

/* Three arms over 8 rounds: A, B (10% slower, 11% higher p50) and A' (A within 0.5%), each
 * round's noise shared (a drift the pairing removes). Round 3 of B failed. */
static json_t *ab_doc(void)
{
    static double va[R * SQ_AB_NMETRICS], vb[R * SQ_AB_NMETRICS], vn[R * SQ_AB_NMETRICS];
    static int ea[R], eb[R], en[R];
    for (int r = 0; r < R; r++) {
        double drift = 1 + 0.05 * sin(r); /* +-5% from round to round */
        double wobble = 1 + 0.004 * ((r % 3) - 1);
        double *a = &va[r * SQ_AB_NMETRICS], *b = &vb[r * SQ_AB_NMETRICS],
               *n = &vn[r * SQ_AB_NMETRICS];
        a[SQ_AB_RPS] = 1000 * drift;
        b[SQ_AB_RPS] = 900 * drift * (1 + 0.002 * (r % 2));
        n[SQ_AB_RPS] = 1000 * drift * wobble;
        a[SQ_AB_P50] = 1000 / drift;
        b[SQ_AB_P50] = 1110 / drift;
        n[SQ_AB_P50] = 1000 / drift / wobble;
        a[SQ_AB_P99] = b[SQ_AB_P99] = n[SQ_AB_P99] = 5000; /* no difference at all */
        a[SQ_AB_CLIENT_CPU] = 10;
        b[SQ_AB_CLIENT_CPU] = 10 * (r % 2 ? 1.01 : 0.99); /* around zero */
        n[SQ_AB_CLIENT_CPU] = 10;
        a[SQ_AB_SERVER_CPU] = b[SQ_AB_SERVER_CPU] = n[SQ_AB_SERVER_CPU] = NAN; /* not watched */
        ea[r] = en[r] = 0;
        eb[r] = r == 3 ? 1 : 0;
    }
    static const char *const args_a[] = {"http://127.0.0.1:1/a", "-c", "1"};
    static const char *const args_b[] = {"http://127.0.0.1:1/b", "-c", "1"};
    struct sq_ab_arm_in arms[3] = {
        {"A", args_a, 3, NULL, 0, false, ea, va},
        {"B", args_b, 3, NULL, 0, false, eb, vb},
        {"A'", args_a, 3, NULL, 0, true, en, vn},
    };
    uint32_t order[R * 3];
    for (uint32_t r = 0; r < R; r++)
        sq_ab_order(3, r, &order[r * 3]);
    struct sq_ab_in in = {arms, 3, R, order, 500000000, 100000000, 1, 10000, 0.95, SQ_AB_RPS};
    json_t *doc = sq_ab_doc(&in);
    assert_non_null(doc);
    return doc;
}

static const json_t *comparison(const json_t *doc, const char *arm, const char *metric)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(doc, "comparisons"), i, c)
    {
        if (strcmp(sq_report__str(c, "arm", ""), arm) == 0 &&
            strcmp(sq_report__str(c, "metric", ""), metric) == 0)
            return c;
    }
    fail_msg("no comparison %s %s", arm, metric);
    return NULL;
}

static void ab_document(void **state)
{
    (void)state;
    json_t *doc = ab_doc();
    assert_string_equal(sq_report__str(doc, "schema", ""), "squall.ab/1");
    assert_true(json_is_true(json_object_get(doc, "null_test")));
    assert_int_equal(json_array_size(json_object_get(doc, "arms")), 3);
    assert_int_equal(json_array_size(json_object_get(doc, "order")), R);
    /* B's failed round is a null, and the medians skip it */
    const json_t *b = json_array_get(json_object_get(doc, "arms"), 1);
    assert_true(json_is_null(json_array_get(sq_report__get(b, "values.rps"), 3)));
    assert_int_equal(sq_report__numd(b, "summary.rps.n", 0), 7);
    /* B against A: -10% resolved; the pairing removes the 5% drift */
    const json_t *c = comparison(doc, "B", "rps");
    assert_string_equal(sq_report__str(c, "verdict", ""), "resolved");
    assert_int_equal(sq_report__numd(c, "n", 0), 7);
    assert_true(fabs(sq_report__numd(c, "median_pct", 0) + 10) < 0.3);
    assert_true(sq_report__numd(c, "ci_hi_pct", 0) < -9 &&
                sq_report__numd(c, "ci_lo_pct", 0) > -11);
    assert_true(sq_report__numd(c, "null_band_pct", 99) < 1);
    c = comparison(doc, "B", "p50_us");
    assert_string_equal(sq_report__str(c, "verdict", ""), "resolved");
    assert_true(fabs(sq_report__numd(c, "median_pct", 0) - 11) < 0.01);
    assert_true(sq_report__numd(c, "median_abs", 0) > 100 &&
                sq_report__numd(c, "median_abs", 0) < 120);
    c = comparison(doc, "B", "p99_us");
    assert_string_equal(sq_report__str(c, "verdict", ""), "includes_zero");
    c = comparison(doc, "B", "client_cpu_us");
    assert_string_equal(sq_report__str(c, "verdict", ""), "includes_zero");
    c = comparison(doc, "B", "server_cpu_us");
    assert_string_equal(sq_report__str(c, "verdict", ""), "no_data");
    /* the null arm is not compared as an arm; its band is there */
    assert_int_equal(json_array_size(json_object_get(doc, "comparisons")), SQ_AB_NMETRICS);
    assert_true(sq_report__numd(doc, "null.rps.band_pct", 99) < 1);
    const json_t *v = json_array_get(json_object_get(doc, "verdicts"), 0);
    assert_non_null(strstr(json_string_value(v), "B is 10."));
    assert_non_null(strstr(json_string_value(v), "% slower (95% CI "));
    assert_non_null(strstr(json_string_value(v), "beyond the null test's ±"));

    char *t = render(sq_ab_table, doc);
    assert_non_null(strstr(t, "A' (null test)"));
    assert_non_null(strstr(t, "Verdict: B is 10."));
    assert_non_null(strstr(t, "not resolvable (CI includes 0)"));
    assert_null(strstr(t, "server CPU per request")); /* no arm has it */
    free(t);
    char *h = render(sq_ab_html, doc);
    assert_int_equal(count(h, "<script"), 3);
    assert_non_null(strstr(h, "id=\"chart-ab-0\""));
    assert_null(strstr(h, "id=\"chart-ab-4\"")); /* server CPU: no data, no chart */
    assert_non_null(strstr(h, "B is 10."));
    free(h);
    json_decref(doc);
}

static void run_values(void **state)
{
    (void)state;
    json_error_t e;
    json_t *d = json_loads("{\"rate\":{\"requests_per_s\":123.5},\"requests\":{\"completed\":10},"
                           "\"latency\":{\"p50_us\":100,\"p99_us\":900},"
                           "\"client\":{\"cpu_per_request_us\":3.5}}",
                           0, &e);
    double v[SQ_AB_NMETRICS];
    sq_ab_run_values(d, v);
    assert_true(v[SQ_AB_RPS] == 123.5 && v[SQ_AB_P50] == 100 && v[SQ_AB_P99] == 900);
    assert_true(v[SQ_AB_CLIENT_CPU] == 3.5 && isnan(v[SQ_AB_SERVER_CPU]));
    json_object_set_new(json_object_get(d, "requests"), "completed", json_integer(0));
    sq_ab_run_values(d, v);
    assert_true(isnan(v[SQ_AB_P50]) && isnan(v[SQ_AB_P99])); /* nothing completed */
    json_decref(d);
}

static json_t *result(double rps, double p50, bool server)
{
    json_t *d = json_pack("{s:s, s:s, s:{s:s}, s:{s:f}, s:{s:I, s:I, s:I}, s:{s:I, s:I}, "
                          "s:{s:I, s:I}, s:f, s:[{s:f, s:f, s:I}]}",
                          "schema", "squall.result/1", "mode", "closed-loop", "config", "url",
                          "http://h/x", "rate", "requests_per_s", rps, "requests", "sent",
                          (json_int_t)100, "completed", (json_int_t)100, "failed", (json_int_t)0,
                          "latency", "count", (json_int_t)100, "p50_us", (json_int_t)p50, "errors",
                          "timeout", (json_int_t)0, "closed", (json_int_t)0, "duration_s", 1.0,
                          "series", "t_s", 1.0, "rps", rps, "p99_us", (json_int_t)p50);
    if (server)
        json_object_set_new(d, "server", json_pack("{s:f}", "cpu_ms_per_1k_requests", 5.0));
    return d;
}

static void compare(void **state)
{
    (void)state;
    json_t *a = result(1000, 200, true), *b = result(1100, 150, false);
    json_object_set_new(b, "only_in_b", json_integer(7));
    json_t *cmp = sq_compare_doc(a, b, "a.json", "b.json");
    assert_non_null(cmp);
    assert_string_equal(sq_report__str(cmp, "schema", ""), "squall.compare/1");
    const json_t *rows = json_object_get(cmp, "figures"), *r, *tp = NULL, *p50 = NULL, *srv = NULL,
                 *extra = NULL;
    size_t i;
    json_array_foreach((json_t *)rows, i, r)
    {
        const char *k = sq_report__str(r, "key", "");
        if (!strcmp(k, "rate.requests_per_s"))
            tp = r;
        if (!strcmp(k, "latency.p50_us"))
            p50 = r;
        if (!strcmp(k, "server.cpu_ms_per_1k_requests"))
            srv = r;
        if (!strcmp(k, "only_in_b"))
            extra = r;
        assert_null(strstr(k, "series")); /* the series is charted, not tabled */
    }
    assert_non_null(tp);
    assert_true(sq_report__numd(tp, "delta", 0) == 100);
    assert_true(fabs(sq_report__numd(tp, "delta_pct", 0) - 10) < 1e-9);
    assert_string_equal(sq_report__str(tp, "better", ""), "higher");
    assert_true(sq_report__numd(p50, "delta", 0) == -50);
    assert_non_null(srv); /* in A only: B's side is null, no delta */
    assert_true(json_is_null(json_object_get(srv, "b")));
    assert_true(json_is_null(json_object_get(srv, "delta")));
    assert_non_null(extra);
    assert_true(json_is_null(json_object_get(extra, "a")));
    /* the first row is throughput */
    assert_string_equal(sq_report__str(json_array_get(rows, 0), "label", ""), "Throughput");

    char *t = render(sq_compare_table, cmp);
    assert_non_null(strstr(t, "Throughput"));
    assert_non_null(strstr(t, "+10.0%"));
    assert_non_null(strstr(t, "-50.0µs"));
    free(t);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_int_equal(sq_compare_html(cmp, a, b, m), 0);
    fclose(m);
    assert_int_equal(count(buf, "<script"), 3);
    assert_non_null(strstr(buf, "id=\"chart-cmp-rps\""));
    assert_null(strstr(buf, "id=\"chart-cmp-server\"")); /* only one side watched a server */
    free(buf);
    json_decref(cmp);
    json_decref(a);
    json_decref(b);
}

static void measure_document(void **state)
{
    (void)state;
    const char *cmd[] = {"squall", "target", "--port", "8080"};
    double cold[] = {12, 10, 11, 30, 10.5};
    struct sq_measure_sample smp[] = {
        {1, "idle", 0.5, 5000000, 2, 10},
        {2, "load", 95, 9000000, 2, 80},
        {3, "after", 0.1, 6000000, 2, 10},
    };
    json_t *load = result(5000, 120, true);
    const char *largs[] = {"http://127.0.0.1:8080/", "-d", "1s"};
    struct sq_measure_in in = {
        .command = cmd,
        .ncommand = 4,
        .ready_url = "http://127.0.0.1:8080/ok",
        .binary_path = "/usr/bin/squall",
        .binary_bytes = 2500000,
        .cold_ms = cold,
        .ncold = 5,
        .idle = {true, 1000000000, 1000000, 4000000, 5000000, 5000000, 5000000, 2, 1, 10},
        .load = {true, 1000000000, 600000000, 350000000, 5000000, 9000000, 9500000, 2, 1, 80},
        .after = {true, 1000000000, 500000, 500000, 9000000, 6000000, 9000000, 2, 1, 10},
        .load_args = largs,
        .nload_args = 3,
        .load_exit = 0,
        .load_result = load,
        .samples = smp,
        .nsamples = 3,
    };
    json_t *doc = sq_measure_doc(&in);
    assert_non_null(doc);
    assert_string_equal(sq_report__str(doc, "schema", ""), "squall.measure/1");
    assert_true(sq_report__numd(doc, "cold_start.summary.median_ms", 0) == 11);
    assert_true(sq_report__numd(doc, "cold_start.summary.max_ms", 0) == 30);
    assert_true(sq_report__numd(doc, "idle.cpu_pct", 9) == 0.5);
    assert_true(sq_report__numd(doc, "load.cpu_pct", 0) == 95);
    assert_true(sq_report__numd(doc, "load.requests_per_s", 0) == 5000);
    /* the load run watched the server: its own figure wins */
    assert_true(sq_report__numd(doc, "load.cpu_ms_per_1k_requests", 0) == 5);
    /* 4.5 MB were added at the peak, 1 MB stayed: 7/9 of it came back */
    assert_true(sq_report__numd(doc, "after.rss_above_idle_bytes", 0) == 1000000);
    assert_true(fabs(sq_report__numd(doc, "after.rss_returned_pct", 0) - 100 * 3.5 / 4.5) < 1e-9);
    assert_int_equal(json_array_size(json_object_get(doc, "samples")), 3);
    char *t = render(sq_measure_table, doc);
    assert_non_null(strstr(t, "Cold start   median 11.0 ms"));
    assert_non_null(strstr(t, "Under load   CPU 95.00% of a core"));
    assert_non_null(strstr(t, "server 5.0 ms CPU per 1k requests"));
    assert_non_null(strstr(t, "78% of what the load added was given back"));
    free(t);
    char *h = render(sq_measure_html, doc);
    assert_int_equal(count(h, "<script"), 3);
    assert_non_null(strstr(h, "id=\"chart-measure\""));
    free(h);
    json_decref(doc);
    json_decref(load);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sentences),        cmocka_unit_test(ab_document),
        cmocka_unit_test(run_values),       cmocka_unit_test(compare),
        cmocka_unit_test(measure_document),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
