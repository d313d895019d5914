/* test_threshold.c - threshold expressions and metric selectors, table-driven. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/run.h"
#include "plan/metrics.h"
#include "plan/threshold.h"

struct ok_case {
    const char *in;
    enum sq_th_agg agg;
    double pct;
    enum sq_th_op op;
    double value;
    const char *text;
};

static const struct ok_case ok_cases[] = {
    {"p(95) < 200", SQ_TH_PCT, 95, SQ_TH_LT, 200, "p(95) < 200"},
    {"p(99.9)<=1.5", SQ_TH_PCT, 99.9, SQ_TH_LE, 1.5, "p(99.9)<=1.5"},
    {"p(100) > 0", SQ_TH_PCT, 100, SQ_TH_GT, 0, "p(100) > 0"},
    {"p(0.001)>=1", SQ_TH_PCT, 0.001, SQ_TH_GE, 1, "p(0.001)>=1"},
    {"  p ( 50 )  <  10  ", SQ_TH_PCT, 50, SQ_TH_LT, 10, "p ( 50 )  <  10"},
    {"rate>0.99", SQ_TH_RATE, 0, SQ_TH_GT, 0.99, "rate>0.99"},
    {"rate<0.01", SQ_TH_RATE, 0, SQ_TH_LT, 0.01, "rate<0.01"},
    {"avg<=120.5", SQ_TH_AVG, 0, SQ_TH_LE, 120.5, "avg<=120.5"},
    {"count == 0", SQ_TH_COUNT, 0, SQ_TH_EQ, 0, "count == 0"},
    {"count === 0", SQ_TH_COUNT, 0, SQ_TH_EQ, 0, "count === 0"},
    {"value != -1", SQ_TH_VALUE, 0, SQ_TH_NE, -1, "value != -1"},
    {"min>=+3", SQ_TH_MIN, 0, SQ_TH_GE, 3, "min>=+3"},
    {"max < 1e3", SQ_TH_MAX, 0, SQ_TH_LT, 1000, "max < 1e3"},
    {"max < 2.5E-2", SQ_TH_MAX, 0, SQ_TH_LT, 0.025, "max < 2.5E-2"},
    {"med<.5", SQ_TH_MED, 0, SQ_TH_LT, 0.5, "med<.5"},
    {"med < 5.", SQ_TH_MED, 0, SQ_TH_LT, 5, "med < 5."},
    {"\tavg\n<\r\n7", SQ_TH_AVG, 0, SQ_TH_LT, 7, "avg\n<\r\n7"},
};

struct err_case {
    const char *in;
    const char *msg; /* the exact message */
};

static const struct err_case err_cases[] = {
    {"", "empty threshold expression (expected e.g. 'p(95) < 200')"},
    {"   ", "empty threshold expression (expected e.g. 'p(95) < 200')"},
    {"p95 < 200", "unknown aggregation 'p95' at 0 (expected count, rate, value, avg, min, max, med "
                  "or p(N))"},
    {"  P(95) < 1",
     "unknown aggregation 'P(95)' at 2 (expected count, rate, value, avg, min, max, med "
     "or p(N))"},
    {"average<1", "unknown aggregation 'average' at 0 (expected count, rate, value, avg, min, "
                  "max, med or p(N))"},
    {"< 200", "unknown aggregation '<' at 0 (expected count, rate, value, avg, min, max, med or "
              "p(N))"},
    {"p() < 1", "expected a percentile at 2 in 'p(N)' (0 < N <= 100)"},
    {"p(x) < 1", "percentile 'x' at 2 is not a decimal number"},
    {"p(-5) < 1", "percentile '-5' at 2 is not a decimal number"},
    {"p(0) < 1", "percentile 0 at 2 is out of range (0 < N <= 100)"},
    {"p(100.5) < 1", "percentile 100.5 at 2 is out of range (0 < N <= 100)"},
    {"p(95 < 1", "expected ')' at 5 to close 'p(' at 0"},
    {"p(95.) < 1", "percentile '95.' at 2 is not a decimal number"},
    {"p(1e2) < 1", "expected ')' at 3 to close 'p(' at 0"},
    {"avg", "expected an operator (>, >=, <, <=, ==, === or !=) at 3, found the end"},
    {"avg = 1", "expected an operator (>, >=, <, <=, ==, === or !=) at 4, found '='"},
    {"avg => 1", "expected an operator (>, >=, <, <=, ==, === or !=) at 4, found '=>'"},
    {"avg ~ 1", "expected an operator (>, >=, <, <=, ==, === or !=) at 4, found '~'"},
    {"avg <", "expected a number at 5 after '<', found the end"},
    {"avg < ", "expected a number at 5 after '<', found the end"},
    {"avg < x", "malformed number 'x' at 6 after '<'"},
    {"avg < 200ms", "malformed number '200ms' at 6 after '<'"},
    {"avg < 1e", "malformed number '1e' at 6 after '<'"},
    {"avg < 1.2.3", "malformed number '1.2.3' at 6 after '<'"},
    {"avg <= -", "malformed number '-' at 7 after '<='"},
    {"avg < = 1", "malformed number '=' at 6 after '<'"},
    {"avg !== 1", "malformed number '=' at 6 after '!='"},
    {"avg < 1 2", "unexpected '2' at 8 after the number"},
    {"avg < 1 or x", "unexpected 'or' at 8 after the number"},
    {"avg < 1e999", "number '1e999' at 6 is out of range"},
    {"avg < inf", "malformed number 'inf' at 6 after '<'"},
    {"avg < nan", "malformed number 'nan' at 6 after '<'"},
};

static void test_expr_ok(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(ok_cases) / sizeof(ok_cases[0]); i++) {
        const struct ok_case *c = &ok_cases[i];
        struct sq_th_expr e;
        char err[256] = "x";
        int rc = sq_th_expr_parse(c->in, strlen(c->in), &e, err, sizeof(err));
        if (rc != 0)
            fail_msg("'%s': %s", c->in, err);
        assert_string_equal(err, "");
        assert_int_equal(e.agg, c->agg);
        assert_int_equal(e.op, c->op);
        assert_true(e.value == c->value);
        if (c->agg == SQ_TH_PCT)
            assert_true(fabs(e.pct - c->pct) < 1e-12);
        assert_string_equal(e.text, c->text);
    }
}

static void test_expr_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(err_cases) / sizeof(err_cases[0]); i++) {
        const struct err_case *c = &err_cases[i];
        struct sq_th_expr e;
        char err[256];
        int rc = sq_th_expr_parse(c->in, strlen(c->in), &e, err, sizeof(err));
        if (rc != -SQ_EPARSE)
            fail_msg("'%s' parsed (rc %d)", c->in, rc);
        if (strcmp(err, c->msg) != 0)
            fail_msg("'%s':\n got  %s\n want %s", c->in, err, c->msg);
        assert_int_equal(e.agg, 0); /* out is zeroed on error */
        assert_string_equal(e.text, "");
    }
    /* err may be NULL or tiny; s may be NULL */
    struct sq_th_expr e;
    assert_int_equal(sq_th_expr_parse("bad", 3, &e, NULL, 0), -SQ_EPARSE);
    char tiny[8];
    assert_int_equal(sq_th_expr_parse("bad", 3, &e, tiny, sizeof(tiny)), -SQ_EPARSE);
    assert_int_equal(strlen(tiny), 7);
    assert_int_equal(sq_th_expr_parse(NULL, 5, &e, NULL, 0), -SQ_EPARSE);
    /* the length is honoured: no NUL needed, the rest of the string is not read */
    assert_int_equal(sq_th_expr_parse("avg<1 garbage", 5, &e, NULL, 0), 0);
    assert_true(e.value == 1);
    assert_string_equal(e.text, "avg<1");
    /* an embedded NUL is an error, not an end */
    assert_int_equal(sq_th_expr_parse("avg<1\0", 6, &e, NULL, 0), -SQ_EPARSE);
}

/* Every prefix of a valid expression either parses or fails with a message; none crashes. */
static void test_expr_prefixes(void **state)
{
    (void)state;
    const char *full[] = {"p(99.9) <= 1.5e+3", "  rate  !=  -0.5  ", "count===10"};
    for (size_t k = 0; k < 3; k++) {
        size_t n = strlen(full[k]);
        for (size_t len = 0; len <= n; len++) {
            char *copy = malloc(len ? len : 1); /* exact size: ASan catches an over-read */
            memcpy(copy, full[k], len);
            struct sq_th_expr e;
            char err[256];
            int rc = sq_th_expr_parse(copy, len, &e, err, sizeof(err));
            if (rc == 0)
                assert_string_equal(err, "");
            else
                assert_true(rc == -SQ_EPARSE && err[0]);
            free(copy);
        }
    }
}

static void test_expr_long_text(void **state)
{
    (void)state;
    char s[200];
    memset(s, ' ', sizeof(s));
    memcpy(s, "avg", 3);
    memcpy(s + 150, "< 1", 3);
    struct sq_th_expr e;
    assert_int_equal(sq_th_expr_parse(s, 153, &e, NULL, 0), 0);
    assert_int_equal(strlen(e.text), sizeof(e.text) - 1);
    assert_string_equal(e.text + sizeof(e.text) - 4, "...");
}

struct eval_case {
    const char *expr;
    double v;
    bool holds;
};

static const struct eval_case eval_cases[] = {
    {"avg < 200", 199.999, true},   {"avg < 200", 200, false},
    {"avg < 200", 201, false},      {"avg <= 200", 200, true},
    {"avg <= 200", 200.001, false}, {"avg > 1", 1, false},
    {"avg > 1", 1.0001, true},      {"avg >= 1", 1, true},
    {"avg >= 1", 0.9999, false},    {"count == 0", 0, true},
    {"count == 0", 1, false},       {"count === 3", 3, true},
    {"count == 0.1", 0.1, true},    {"count == 0.3", 0.1 + 0.2, false}, /* exact compare */
    {"count != 0", 0, false},       {"count != 0", -1, true},
    {"rate > 0.99", 0.995, true},   {"rate > 0.99", 0.99, false},
    {"min >= -5", -5, true},        {"min >= -5", -5.5, false},
    {"max < 1e3", 999, true},       {"max < 1e3", 1000, false},
};

static void test_expr_holds(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(eval_cases) / sizeof(eval_cases[0]); i++) {
        const struct eval_case *c = &eval_cases[i];
        struct sq_th_expr e;
        assert_int_equal(sq_th_expr_parse(c->expr, strlen(c->expr), &e, NULL, 0), 0);
        if (sq_th_expr_holds(&e, c->v) != c->holds)
            fail_msg("'%s' with %g: want %d", c->expr, c->v, c->holds);
    }
    /* NaN satisfies only != */
    struct sq_th_expr e;
    assert_int_equal(sq_th_expr_parse("avg < 1", 7, &e, NULL, 0), 0);
    assert_false(sq_th_expr_holds(&e, NAN));
    assert_int_equal(sq_th_expr_parse("avg != 1", 8, &e, NULL, 0), 0);
    assert_true(sq_th_expr_holds(&e, NAN));
}

static void test_op_str(void **state)
{
    (void)state;
    assert_string_equal(sq_th_op_str(SQ_TH_GT), ">");
    assert_string_equal(sq_th_op_str(SQ_TH_GE), ">=");
    assert_string_equal(sq_th_op_str(SQ_TH_LT), "<");
    assert_string_equal(sq_th_op_str(SQ_TH_LE), "<=");
    assert_string_equal(sq_th_op_str(SQ_TH_EQ), "==");
    assert_string_equal(sq_th_op_str(SQ_TH_NE), "!=");
    assert_string_equal(sq_th_op_str((enum sq_th_op)99), "?");
    /* every operator round-trips through its string */
    for (int op = SQ_TH_GT; op <= SQ_TH_NE; op++) {
        char s[32];
        snprintf(s, sizeof(s), "avg %s 1", sq_th_op_str((enum sq_th_op)op));
        struct sq_th_expr e;
        assert_int_equal(sq_th_expr_parse(s, strlen(s), &e, NULL, 0), 0);
        assert_int_equal(e.op, op);
    }
}

/* ---- selectors ---- */

static void expect_span(const char *p, size_t len, const char *want)
{
    if (len != strlen(want) || memcmp(p, want, len) != 0)
        fail_msg("span '%.*s', want '%s'", (int)len, p, want);
}

static void test_sel_ok(void **state)
{
    (void)state;
    struct sq_metric_sel s;
    char err[256];
    const char *in = "http_req_duration";
    assert_int_equal(sq_metric_sel_parse(in, strlen(in), &s, err, sizeof(err)), 0);
    expect_span(s.metric, s.metric_len, "http_req_duration");
    assert_int_equal(s.ntags, 0);
    assert_ptr_equal(s.metric, in);

    in = "  http_req_duration{step:login,status:200}  ";
    assert_int_equal(sq_metric_sel_parse(in, strlen(in), &s, err, sizeof(err)), 0);
    expect_span(s.metric, s.metric_len, "http_req_duration");
    assert_int_equal(s.ntags, 2);
    expect_span(s.tags[0].key, s.tags[0].key_len, "step");
    expect_span(s.tags[0].value, s.tags[0].value_len, "login");
    expect_span(s.tags[1].key, s.tags[1].key_len, "status");
    expect_span(s.tags[1].value, s.tags[1].value_len, "200");
}

static void test_sel_values(void **state)
{
    (void)state;
    struct sq_metric_sel s;
    char err[256];
    const char *in = "_m2 { a : b c , url:http://x/y?q=1 , q : \"x, }y\" ,d:\"\" }";
    if (sq_metric_sel_parse(in, strlen(in), &s, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    expect_span(s.metric, s.metric_len, "_m2");
    assert_int_equal(s.ntags, 4);
    expect_span(s.tags[0].key, s.tags[0].key_len, "a");
    expect_span(s.tags[0].value, s.tags[0].value_len, "b c");
    expect_span(s.tags[1].key, s.tags[1].key_len, "url");
    expect_span(s.tags[1].value, s.tags[1].value_len, "http://x/y?q=1");
    expect_span(s.tags[2].key, s.tags[2].key_len, "q");
    expect_span(s.tags[2].value, s.tags[2].value_len, "x, }y");
    expect_span(s.tags[3].key, s.tags[3].key_len, "d");
    assert_int_equal(s.tags[3].value_len, 0);
}

static const struct err_case sel_errs[] = {
    {"", "empty metric selector (expected e.g. 'http_req_duration')"},
    {"  ", "empty metric selector (expected e.g. 'http_req_duration')"},
    {"Http", "metric name must start with a lowercase letter or '_' at 0, found 'H'"},
    {"9m", "metric name must start with a lowercase letter or '_' at 0, found '9'"},
    {"{a:b}", "metric name must start with a lowercase letter or '_' at 0, found '{'"},
    {"http-req", "unexpected '-' at 4 in the metric name (expected [a-z0-9_] or '{')"},
    {"httpReq", "unexpected 'R' at 4 in the metric name (expected [a-z0-9_] or '{')"},
    {"m x", "expected '{' or the end at 2, found 'x'"},
    {"m{", "expected a tag 'key:value' at 2, found the end"},
    {"m{}", "expected a tag 'key:value' at 2, found '}'"},
    {"m{a:b,}", "expected a tag 'key:value' at 6, found '}'"},
    {"m{,a:b}", "expected a tag 'key:value' at 2, found ','"},
    {"m{a}", "expected ':' after tag 'a' at 3"},
    {"m{a b:c}", "expected ':' after tag 'a' at 4"},
    {"m{a:}", "empty value for tag 'a' at 4"},
    {"m{a: ,b:c}", "empty value for tag 'a' at 5"},
    {"m{a:b", "expected '}' at 5 to close '{' at 1"},
    {"m{a:b c", "expected '}' at 7 to close '{' at 1"},
    {"m{a:\"b", "unterminated quoted value starting at 4"},
    {"m{a:\"b\" c}", "expected ',' or '}' at 8 after the quoted value"},
    {"m{a:b\"c}", "unexpected '\"' at 5 in the value of tag 'a'"},
    {"m{a:{b}}", "unexpected '{' at 4 in the value of tag 'a'"},
    {"m{a:b}x", "unexpected 'x' at 6 after '}'"},
    {"m{a:b} }", "unexpected '}' at 7 after '}'"},
    {"m{\"a\":b}", "expected a tag 'key:value' at 2, found '\"'"},
    {"m{a:b}{c:d}", "unexpected '{' at 6 after '}'"},
    {"m{a:1,a:2}", "duplicate tag 'a' at 6"},
    {"m{a:1,b:2,c:3,d:4,e:5}", "too many tags at 18 (at most 4)"},
};

static void test_sel_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(sel_errs) / sizeof(sel_errs[0]); i++) {
        const struct err_case *c = &sel_errs[i];
        struct sq_metric_sel s;
        char err[256];
        int rc = sq_metric_sel_parse(c->in, strlen(c->in), &s, err, sizeof(err));
        if (rc != -SQ_EPARSE)
            fail_msg("'%s' parsed (rc %d)", c->in, rc);
        if (strcmp(err, c->msg) != 0)
            fail_msg("'%s':\n got  %s\n want %s", c->in, err, c->msg);
        assert_null(s.metric);
        assert_int_equal(s.ntags, 0);
    }
    struct sq_metric_sel s;
    assert_int_equal(sq_metric_sel_parse(NULL, 3, &s, NULL, 0), -SQ_EPARSE);
    /* exactly SQ_TH_MAX_TAGS is fine */
    const char *four = "m{a:1,b:2,c:3,d:4}";
    assert_int_equal(sq_metric_sel_parse(four, strlen(four), &s, NULL, 0), 0);
    assert_int_equal(s.ntags, SQ_TH_MAX_TAGS);
    /* the length is honoured */
    assert_int_equal(sq_metric_sel_parse("abc{x", 3, &s, NULL, 0), 0);
    expect_span(s.metric, s.metric_len, "abc");
}

static void test_sel_prefixes(void **state)
{
    (void)state;
    const char *full = "http_req_duration{ step : \"lo,gin\" , status:200 }";
    size_t n = strlen(full);
    for (size_t len = 0; len <= n; len++) {
        char *copy = malloc(len ? len : 1);
        memcpy(copy, full, len);
        struct sq_metric_sel s;
        char err[256];
        int rc = sq_metric_sel_parse(copy, len, &s, err, sizeof(err));
        /* a bare name prefix parses, the whole parses; anything between fails cleanly */
        if (rc == 0) {
            assert_true(len <= 17 || len >= n - 1);
            for (size_t t = 0; t < s.ntags; t++) {
                assert_true(s.tags[t].key >= copy &&
                            s.tags[t].key + s.tags[t].key_len <= copy + len);
                assert_true(s.tags[t].value >= copy &&
                            s.tags[t].value + s.tags[t].value_len <= copy + len);
            }
        } else {
            assert_true(rc == -SQ_EPARSE && err[0]);
        }
        free(copy);
    }
}

/* The metric registry: unique names that find themselves, the kinds k6 gives them, the
 * aggregations each kind takes, and the engine's phases among the whole-run trends. */
static void test_metric_registry(void **state)
{
    (void)state;
    for (int i = 0; i < SQ_METRIC__COUNT; i++) {
        const char *n = sq_metric_name((enum sq_metric)i);
        assert_int_equal(sq_metric_find(n, strlen(n)), i);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(n, sq_metric_name((enum sq_metric)j));
    }
    assert_int_equal(sq_metric_find("http_req", 8), -1); /* a prefix is not a name */
    assert_int_equal(sq_metric_find("http_reqs{", 10), -1);
    assert_int_equal(sq_metric_find("", 0), -1);
    assert_string_equal(sq_metric_name(SQ_METRIC__COUNT), "?");
    assert_int_equal(sq_metric_kind(SQ_METRIC_HTTP_REQS), SQ_MK_COUNTER);
    assert_int_equal(sq_metric_kind(SQ_METRIC_HTTP_REQ_FAILED), SQ_MK_RATE);
    assert_int_equal(sq_metric_kind(SQ_METRIC_CHECKS), SQ_MK_RATE);
    assert_int_equal(sq_metric_kind(SQ_METRIC_VUS_MAX), SQ_MK_GAUGE);
    assert_int_equal(sq_metric_kind(SQ_METRIC_ITERATION_DURATION), SQ_MK_TREND);
    assert_int_equal(sq_metric_scope(SQ_METRIC_HTTP_REQ_DURATION), SQ_MS_STEP);
    assert_int_equal(sq_metric_scope(SQ_METRIC_DATA_SENT), SQ_MS_SCENARIO);
    /* the built-in trends of groups and batches: group_duration per group, batch_duration per
     * step (a batch's first request) */
    assert_int_equal(sq_metric_find("group_duration", 14), SQ_METRIC_GROUP_DURATION);
    assert_int_equal(sq_metric_kind(SQ_METRIC_GROUP_DURATION), SQ_MK_TREND);
    assert_int_equal(sq_metric_scope(SQ_METRIC_GROUP_DURATION), SQ_MS_GROUP);
    assert_int_equal(sq_metric_find("batch_duration", 14), SQ_METRIC_BATCH_DURATION);
    assert_int_equal(sq_metric_kind(SQ_METRIC_BATCH_DURATION), SQ_MK_TREND);
    assert_int_equal(sq_metric_scope(SQ_METRIC_BATCH_DURATION), SQ_MS_STEP);
    assert_true(sq_metric_agg_fits(SQ_MK_COUNTER, SQ_TH_COUNT));
    assert_true(sq_metric_agg_fits(SQ_MK_COUNTER, SQ_TH_RATE));
    assert_false(sq_metric_agg_fits(SQ_MK_COUNTER, SQ_TH_PCT));
    assert_true(sq_metric_agg_fits(SQ_MK_RATE, SQ_TH_RATE));
    assert_false(sq_metric_agg_fits(SQ_MK_RATE, SQ_TH_COUNT));
    assert_true(sq_metric_agg_fits(SQ_MK_GAUGE, SQ_TH_VALUE));
    assert_false(sq_metric_agg_fits(SQ_MK_GAUGE, SQ_TH_MAX));
    assert_true(sq_metric_agg_fits(SQ_MK_TREND, SQ_TH_PCT));
    assert_false(sq_metric_agg_fits(SQ_MK_TREND, SQ_TH_VALUE));
    assert_string_equal(sq_metric_kind_aggs(SQ_MK_RATE), "a rate: rate");
    /* Every engine phase is a whole-run trend of the registry, and every whole-run metric is a
     * phase: the evaluator finds a phase's histogram by this name. */
    int run_scope = 0;
    for (int i = 0; i < SQ_METRIC__COUNT; i++)
        run_scope += sq_metric_scope((enum sq_metric)i) == SQ_MS_RUN;
    assert_int_equal(run_scope, SQ_PHASE_COUNT);
    for (int k = 0; k < SQ_PHASE_COUNT; k++) {
        const char *n = sq_phase_metric((enum sq_phase)k);
        int m = sq_metric_find(n, strlen(n));
        assert_true(m >= 0);
        assert_int_equal(sq_metric_scope((enum sq_metric)m), SQ_MS_RUN);
        assert_int_equal(sq_metric_kind((enum sq_metric)m), SQ_MK_TREND);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expr_ok),         cmocka_unit_test(test_expr_errors),
        cmocka_unit_test(test_expr_prefixes),   cmocka_unit_test(test_expr_long_text),
        cmocka_unit_test(test_expr_holds),      cmocka_unit_test(test_op_str),
        cmocka_unit_test(test_sel_ok),          cmocka_unit_test(test_sel_values),
        cmocka_unit_test(test_sel_errors),      cmocka_unit_test(test_sel_prefixes),
        cmocka_unit_test(test_metric_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
