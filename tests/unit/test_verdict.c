/* tests/unit/test_verdict.c - result/verdict: a plan's thresholds against a result built by hand
 * (known histograms and counts), for every scope of the metric table: per step and status, per
 * scenario, the run's phases; rates, counters per second, gauges, no_data; the live abort check;
 * and the tags the engine cannot honour. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "result/verdict.h"
#include "stats/hist.h"

static struct sq_plan *load(const char *yaml)
{
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    if (sq_plan_load_string("t.yaml", yaml, strlen(yaml), &p, &e) != 0) {
        char b[800];
        sq_plan_error_format(&e, b, sizeof(b));
        fail_msg("%s", b);
    }
    return p;
}

/* A histogram as the engine makes them (µs, 1 µs to 1 h, 3 digits) holding us[0, n). */
static struct sq_hist *hist(const int64_t *us, size_t n)
{
    struct sq_hist *h = NULL;
    assert_int_equal(sq_hist_new(1, 3600LL * 1000 * 1000, 3, &h), 0);
    for (size_t i = 0; i < n; i++)
        assert_true(sq_hist_record(h, us[i]));
    return h;
}

#define HIST(...)  hist((const int64_t[]){__VA_ARGS__}, sizeof((int64_t[]){__VA_ARGS__}) / 8)
#define EMPTY_HIST hist(NULL, 0)

/* Two scenarios: a (steps login, items, a think) and b (step fetch). The comment after each
 * threshold is its verdict's index and what it sees in the result build() makes. */
static const char plan_yaml[] =
    "target: http://127.0.0.1:1\n"
    "scenarios:\n"
    "  a:\n"
    "    executor: per-vu-iterations\n"
    "    flow:\n"
    "      - { name: login, request: { method: POST, url: /l }, check: { status: 200 } }\n"
    "      - { name: items, request: { url: /i }, check: { status: 200, body_contains: x } }\n"
    "      - think: 1s\n"
    "  b:\n"
    "    executor: per-vu-iterations\n"
    "    flow:\n"
    "      - { name: fetch, request: { url: /f } }\n"
    "thresholds:\n"
    "  http_req_duration: [\"max < 50\", \"p(50) < 21\"]\n" /* 0, 1: 10 12 20 40 30 35 ms */
    "  \"http_req_duration{step:login}\": [\"max < 15\"]\n" /* 2: 10 12 */
    "  \"http_req_duration{status:500}\": [\"avg > 35\"]\n" /* 3: 40 */
    "  \"http_req_duration{scenario:b}\": [\"min > 29\"]\n" /* 4: 30 35 */
    "  \"http_req_duration{method:GET}\": [\"min > 19\"]\n" /* 5: items and fetch */
    "  http_reqs: [\"count == 6\", \"rate == 3\"]\n"        /* 6, 7: 6 in 2 s */
    "  \"http_reqs{scenario:a}\": [\"count == 4\"]\n"       /* 8 */
    "  http_req_failed: [\"rate < 0.2\"]\n"                 /* 9: 1 of 6 */
    "  checks: [\"rate > 0.8\"]\n"                          /* 10: 5 of 6 */
    "  iterations: [\"count == 7\"]\n"                      /* 11: 4 + 3 */
    "  \"iterations{scenario:b}\": [\"rate == 1.5\"]\n"     /* 12: 3 in 2 s */
    "  iteration_duration: [\"max < 2000\"]\n"              /* 13: 1500 ms */
    "  vus_max: [\"value == 3\"]\n"                         /* 14: 2 + 1 */
    "  http_req_waiting: [\"p(99) < 5\"]\n"                 /* 15: the phase, 4 ms */
    "  data_sent: [\"count == 1000\"]\n"                    /* 16: 600 + 400 */
    "  \"http_req_duration{step:fetch,scenario:a}\": [\"p(95) < 1\"]\n" /* 17: no data: 0 */
    "  \"http_reqs{step:items}\": [\"count > 2\"]\n"                    /* 18: 2, fails */
    "  \"checks{scenario:b}\": [\"rate > 0\"]\n";                       /* 19: no data, fails */

static void build(struct sq_result *r, const struct sq_plan *p)
{
    memset(r, 0, sizeof(*r));
    r->duration_ns = 2 * SQ_NS_PER_S;
    r->nscens = 2;
    r->scens = calloc(2, sizeof(*r->scens));
    assert_non_null(r->scens);
    /* a: login 10, 12 ms (200); items 20 ms (200), 40 ms (500); think: nothing */
    struct sq_scen_result *a = &r->scens[0];
    a->nsteps = 3;
    a->steps = calloc(3, sizeof(*a->steps));
    a->steps[0].dur = HIST(10000, 12000);
    a->steps[0].reqs = 2;
    a->steps[0].nstatus = 1;
    a->steps[0].by_status[0].status = 200;
    a->steps[0].by_status[0].n = 2;
    a->steps[0].by_status[0].h = HIST(10000, 12000);
    a->steps[1].dur = HIST(20000, 40000);
    a->steps[1].reqs = 2;
    a->steps[1].failed = 1;
    a->steps[1].nstatus = 2;
    a->steps[1].by_status[0].status = 200;
    a->steps[1].by_status[0].n = 1;
    a->steps[1].by_status[0].h = HIST(20000);
    a->steps[1].by_status[1].status = 500;
    a->steps[1].by_status[1].n = 1;
    a->steps[1].by_status[1].h = HIST(40000);
    a->steps[2].dur = EMPTY_HIST; /* the think step */
    static uint64_t pass0[] = {2}, fail0[] = {0}, pass1[] = {1, 2}, fail1[] = {1, 0};
    a->steps[0].check_pass = pass0;
    a->steps[0].check_fail = fail0;
    a->steps[1].check_pass = pass1;
    a->steps[1].check_fail = fail1;
    a->latency = HIST(10000, 12000, 20000, 40000);
    a->iter_dur = HIST(1500000);
    a->c.iterations = 4;
    a->c.bytes_sent = 600;
    a->vus_max = 2;
    /* b: fetch 30, 35 ms (200) */
    struct sq_scen_result *b = &r->scens[1];
    b->nsteps = 1;
    b->steps = calloc(1, sizeof(*b->steps));
    b->steps[0].dur = HIST(30000, 35000);
    b->steps[0].reqs = 2;
    b->steps[0].nstatus = 1;
    b->steps[0].by_status[0].status = 200;
    b->steps[0].by_status[0].n = 2;
    b->steps[0].by_status[0].h = HIST(30000, 35000);
    b->latency = HIST(30000, 35000);
    b->iter_dur = HIST(35000);
    b->c.iterations = 3;
    b->c.bytes_sent = 400;
    b->vus_max = 1;
    for (int k = 0; k < SQ_PHASE_COUNT; k++)
        r->phase[k] = HIST(k == SQ_PHASE_WAITING ? 4000 : 1);
    (void)p;
}

static void dispose(struct sq_result *r)
{
    for (uint32_t i = 0; i < r->nscens; i++) {
        struct sq_scen_result *s = &r->scens[i];
        for (size_t k = 0; k < s->nsteps; k++) {
            sq_hist_free(s->steps[k].dur);
            for (uint32_t b = 0; b < s->steps[k].nstatus; b++)
                sq_hist_free(s->steps[k].by_status[b].h);
        }
        for (size_t k = 0; k < s->nsteps; k++)
            sq_hist_free(s->steps[k].batch_dur);
        free(s->steps);
        sq_hist_free(s->latency);
        sq_hist_free(s->iter_dur);
        sq_group_hists_free(s->group_dur, s->ngroups);
    }
    free(r->scens);
    for (int k = 0; k < SQ_PHASE_COUNT; k++)
        sq_hist_free(r->phase[k]);
}

/* group_duration: {group:PATH} takes that group's own passes (not those of the groups inside
 * it, as k6 tags a group's duration with its own group), no tag every group's; batch_duration is
 * kept by the batch's first request and selected by its step tag. Tags they cannot take are
 * refused. */
static void test_group_duration(void **state)
{
    (void)state;
    struct sq_plan *p = load("target: http://127.0.0.1:1\n"
                             "scenarios:\n"
                             "  a:\n"
                             "    executor: per-vu-iterations\n"
                             "    flow:\n"
                             "      - group: checkout\n"
                             "        steps:\n"
                             "          - request: { url: /cart }\n"
                             "          - group: pay\n"
                             "            steps: [ { request: { url: /pay } } ]\n"
                             "      - batch: [ { name: css, request: { url: /c } },\n"
                             "                 { name: js, request: { url: /j } } ]\n"
                             "thresholds:\n"
                             "  \"group_duration{group:checkout}\": [\"min >= 40\", \"max < 45\"]\n"
                             "  \"group_duration{group:checkout::pay}\": [\"max < 25\"]\n"
                             "  group_duration: [\"min < 25\", \"max >= 40\"]\n"
                             "  \"batch_duration{step:css}\": [\"p(50) >= 30\"]\n"
                             "  \"batch_duration{step:js}\": [\"max < 1\"]\n");
    struct sq_result r;
    memset(&r, 0, sizeof(r));
    r.duration_ns = SQ_NS_PER_S;
    r.nscens = 1;
    r.scens = calloc(1, sizeof(*r.scens));
    assert_non_null(r.scens);
    struct sq_scen_result *a = &r.scens[0];
    a->nsteps = 4;
    a->steps = calloc(4, sizeof(*a->steps));
    for (size_t k = 0; k < 4; k++)
        a->steps[k].dur = EMPTY_HIST;
    a->steps[2].batch_dur = HIST(30000, 31000);
    a->latency = EMPTY_HIST;
    a->iter_dur = EMPTY_HIST;
    a->ngroups = 2;
    a->group_dur = calloc(2, sizeof(*a->group_dur));
    a->group_dur[0] = HIST(40000, 41000, 42000); /* checkout */
    a->group_dur[1] = HIST(20000, 21000);        /* checkout::pay */
    struct sq_th_verdicts v;
    assert_int_equal(sq_thresholds_eval(p, &r, &v), 0);
    assert_int_equal(v.n, 7);
    for (size_t i = 0; i < 6; i++)
        assert_true(v.v[i].ok && !v.v[i].no_data);
    assert_true(v.v[0].value >= 39.9 && v.v[0].value < 40.1);
    assert_true(v.v[2].value > 20.9 && v.v[2].value < 21.1);  /* pay alone */
    assert_true(v.v[3].value >= 19.9 && v.v[3].value < 20.1); /* every group: min of pay */
    assert_true(v.v[4].value > 41.9 && v.v[4].value < 42.1);  /* ... max of checkout */
    assert_true(v.v[6].ok && v.v[6].no_data);                 /* js keeps no batch figure */
    assert_false(v.failed);
    sq_th_verdicts_dispose(&v);
    char err[256] = "";
    assert_int_equal(sq_thresholds_check(p, err, sizeof(err)), 0);
    dispose(&r);
    sq_plan_free(p);

    static const char *const refused[] = {"group_duration{step:x}", "group_duration{method:GET}",
                                          "group_duration{status:200}",
                                          "batch_duration{status:200}"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char yaml[512];
        snprintf(yaml, sizeof(yaml),
                 "target: http://127.0.0.1:1\n"
                 "scenarios:\n"
                 "  a:\n"
                 "    executor: per-vu-iterations\n"
                 "    flow:\n"
                 "      - group: g\n"
                 "        steps: [ { name: x, request: { url: / } } ]\n"
                 "thresholds:\n"
                 "  \"%s\": [\"max < 1\"]\n",
                 refused[i]);
        p = load(yaml);
        assert_int_equal(sq_thresholds_check(p, err, sizeof(err)), -SQ_EUSAGE);
        assert_non_null(strstr(err, i < 3 ? "group_duration is kept per group"
                                          : "batch_duration is kept per batch"));
        sq_plan_free(p);
    }
}

static void test_every_scope(void **state)
{
    (void)state;
    struct sq_plan *p = load(plan_yaml);
    struct sq_result r;
    build(&r, p);
    struct sq_th_verdicts v;
    assert_int_equal(sq_thresholds_eval(p, &r, &v), 0);
    assert_int_equal(v.n, 20);
    for (size_t i = 0; i < v.n; i++) {
        bool want_ok = i < 18;
        if (v.v[i].ok != want_ok)
            fail_msg("verdict %zu: %s: %s is %g, ok %d", i, v.v[i].th->selector, v.v[i].expr->text,
                     v.v[i].value, v.v[i].ok);
        assert_int_equal(v.v[i].no_data, i == 17 || i == 19);
    }
    assert_true(v.v[0].value > 39.9 && v.v[0].value < 40.1); /* every request */
    assert_true(v.v[2].value > 11.9 && v.v[2].value < 12.1); /* login only */
    assert_true(v.v[3].value > 39.9 && v.v[3].value < 40.1); /* the 500 only */
    assert_true(v.v[7].value == 3.0);
    assert_true(v.v[9].value > 0.166 && v.v[9].value < 0.167);
    assert_true(v.v[10].value > 0.833 && v.v[10].value < 0.834);
    assert_true(v.v[12].value == 1.5);
    assert_true(v.v[14].value == 3.0);
    assert_true(v.v[15].value > 3.9 && v.v[15].value < 4.1);
    assert_true(v.v[17].value == 0);
    assert_true(v.v[18].value == 2.0);
    assert_true(v.failed);
    sq_th_verdicts_dispose(&v);
    dispose(&r);
    sq_plan_free(p);
}

/* Tags the engine cannot honour are refused before a run, naming the threshold. */
static void test_check_refuses(void **state)
{
    (void)state;
    static const char head[] = "target: http://127.0.0.1:1\n"
                               "scenarios:\n"
                               "  a:\n"
                               "    executor: per-vu-iterations\n"
                               "    flow: [ { name: login, request: { url: / } } ]\n"
                               "thresholds:\n";
    static const struct {
        const char *th, *why;
    } cases[] = {
        {"  \"http_req_waiting{scenario:a}\": [\"p(95) < 1\"]\n",
         "t.yaml:7:4: thresholds: 'http_req_waiting{scenario:a}': phase timings are kept for the "
         "whole run: this metric takes no tags"},
        {"  \"iterations{step:login}\": [\"count > 1\"]\n",
         "t.yaml:7:4: thresholds: 'iterations{step:login}': this metric is kept per scenario: the "
         "only tag it takes is scenario"},
        {"  \"vus{status:200}\": [\"value > 1\"]\n",
         "t.yaml:7:4: thresholds: 'vus{status:200}': this metric is kept per scenario: the only "
         "tag it takes is scenario"},
        {"  \"iterations{scenario:a}\": [\"count > 1\"]\n", NULL},
        {"  \"http_req_duration{step:login,status:200}\": [\"p(95) < 1\"]\n", NULL},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(cases); i++) {
        char yaml[1024], err[512] = "";
        snprintf(yaml, sizeof(yaml), "%s%s", head, cases[i].th);
        struct sq_plan *p = load(yaml);
        int rc = sq_thresholds_check(p, err, sizeof(err));
        if (cases[i].why) {
            assert_int_equal(rc, -SQ_EUSAGE);
            assert_string_equal(err, cases[i].why);
        } else {
            assert_int_equal(rc, 0);
        }
        sq_plan_free(p);
    }
}

/* The group tag: a group's path selects its steps and those of the groups inside it, as the
 * result's `groups` figures add them up; per-scenario metrics refuse it. */
static void test_group_tag(void **state)
{
    (void)state;
    struct sq_plan *p = load("target: http://127.0.0.1:1\n"
                             "scenarios:\n"
                             "  a:\n"
                             "    executor: per-vu-iterations\n"
                             "    flow:\n"
                             "      - request: { url: /home }\n"
                             "      - group: checkout\n"
                             "        steps:\n"
                             "          - request: { url: /cart }\n"
                             "          - group: pay\n"
                             "            steps: [ { request: { url: /pay } } ]\n"
                             "thresholds:\n"
                             "  \"http_req_duration{group:checkout}\": [\"max < 25\"]\n"
                             "  \"http_req_duration{group:checkout::pay}\": [\"min > 25\"]\n"
                             "  \"http_reqs{group:checkout}\": [\"count == 3\"]\n"
                             "  \"http_reqs{group:checkout::pay,status:500}\": [\"count == 1\"]\n"
                             "  \"http_req_failed{group:checkout::pay}\": [\"rate == 0\"]\n");
    struct sq_result r;
    memset(&r, 0, sizeof(r));
    r.duration_ns = SQ_NS_PER_S;
    r.nscens = 1;
    r.scens = calloc(1, sizeof(*r.scens));
    assert_non_null(r.scens);
    struct sq_scen_result *a = &r.scens[0];
    a->nsteps = 3;
    a->steps = calloc(3, sizeof(*a->steps));
    static const int64_t ms[] = {10, 20, 30};
    for (size_t k = 0; k < 3; k++) {
        a->steps[k].dur = HIST(ms[k] * 1000, ms[k] * 1000 + 1000);
        a->steps[k].reqs = 2;
        a->steps[k].nstatus = 2;
        a->steps[k].by_status[0].status = 200;
        a->steps[k].by_status[0].n = 1;
        a->steps[k].by_status[0].h = HIST(ms[k] * 1000);
        a->steps[k].by_status[1].status = 500;
        a->steps[k].by_status[1].n = 1;
        a->steps[k].by_status[1].h = HIST(ms[k] * 1000 + 1000);
        a->steps[k].failed = 1;
    }
    a->latency = HIST(10000);
    a->iter_dur = HIST(1);
    struct sq_th_verdicts v;
    assert_int_equal(sq_thresholds_eval(p, &r, &v), 0);
    assert_int_equal(v.n, 5);
    /* checkout: /cart and /pay, 20..31 ms: max 31 fails; checkout::pay: /pay only */
    assert_false(v.v[0].ok);
    assert_true(v.v[0].value > 30.9 && v.v[0].value < 31.1);
    assert_true(v.v[1].ok);
    assert_true(v.v[1].value > 29.9 && v.v[1].value < 30.1);
    assert_false(v.v[2].ok);
    assert_true(v.v[2].value == 4.0);
    assert_true(v.v[3].ok);
    assert_false(v.v[4].ok);
    assert_true(v.v[4].value == 0.5);
    sq_th_verdicts_dispose(&v);
    char err[256] = "";
    assert_int_equal(sq_thresholds_check(p, err, sizeof(err)), 0);
    dispose(&r);
    sq_plan_free(p);

    p = load("target: http://127.0.0.1:1\n"
             "scenarios:\n"
             "  a:\n"
             "    executor: per-vu-iterations\n"
             "    flow: [ { group: g, steps: [ { request: { url: / } } ] } ]\n"
             "thresholds:\n"
             "  \"iterations{group:g}\": [\"count > 1\"]\n");
    assert_int_equal(sq_thresholds_check(p, err, sizeof(err)), -SQ_EUSAGE);
    assert_string_equal(err, "t.yaml:7:4: thresholds: 'iterations{group:g}': this metric is kept "
                             "per scenario: the only tag it takes is scenario");
    sq_plan_free(p);
}

/* The plan's own metrics: each kind from the steps' slots its tags select; a gauge is its
 * latest sample over every step; a status tag is refused; none is judged live. */
static void test_custom(void **state)
{
    (void)state;
    struct sq_plan *p = load("target: http://127.0.0.1:1\n"
                             "metrics: { n: counter, ok: rate, depth: gauge, t: trend }\n"
                             "scenarios:\n"
                             "  a:\n"
                             "    executor: per-vu-iterations\n"
                             "    flow:\n"
                             "      - name: x\n"
                             "        request: { url: /x }\n"
                             "        tags: { page: home }\n"
                             "        metric: [ { name: n, add: 2 }, { name: depth, add: 1 } ]\n"
                             "      - name: y\n"
                             "        request: { url: /y }\n"
                             "        metric: [ { name: n }, { name: ok }, { name: depth },\n"
                             "                  { name: t } ]\n"
                             "thresholds:\n"
                             "  n: [\"count == 5\", \"rate == 2.5\"]\n"
                             "  \"n{page:home}\": [\"count == 4\"]\n"
                             "  ok: [\"rate == 0.5\"]\n"
                             "  depth: [\"value == 7\"]\n"
                             "  \"t{step:y}\": [\"max < 13\", \"min > 11\", \"avg == 12\"]\n"
                             "  \"t{step:x}\": [\"p(95) < 1\"]\n");
    struct sq_result r;
    memset(&r, 0, sizeof(r));
    r.duration_ns = 2 * SQ_NS_PER_S;
    r.nscens = 1;
    r.scens = calloc(1, sizeof(*r.scens));
    struct sq_scen_result *a = &r.scens[0];
    a->nsteps = 2;
    a->steps = calloc(2, sizeof(*a->steps));
    for (size_t k = 0; k < 2; k++) {
        a->steps[k].dur = EMPTY_HIST;
        assert_int_equal(sq_step_stats_metrics(&a->steps[k], k ? 4 : 2), 0);
    }
    /* x: n 2 + 2, depth 1 then 3 (at 10 and 30) */
    a->steps[0].mvals[0] =
        (struct sq_step_mval){.n = 2, .nonzero = 2, .sum = 4, .h = a->steps[0].mvals[0].h};
    a->steps[0].mvals[1] = (struct sq_step_mval){
        .n = 2, .nonzero = 2, .sum = 4, .last = 3, .last_ns = 30, .h = a->steps[0].mvals[1].h};
    /* y: n 1, ok 1 of 2, depth 7 at 40 (the latest), t 12 ms */
    a->steps[1].mvals[0] =
        (struct sq_step_mval){.n = 1, .nonzero = 1, .sum = 1, .h = a->steps[1].mvals[0].h};
    a->steps[1].mvals[1] =
        (struct sq_step_mval){.n = 2, .nonzero = 1, .sum = 1, .h = a->steps[1].mvals[1].h};
    a->steps[1].mvals[2] = (struct sq_step_mval){
        .n = 1, .nonzero = 1, .sum = 7, .last = 7, .last_ns = 40, .h = a->steps[1].mvals[2].h};
    a->steps[1].mvals[3].n = 1;
    a->steps[1].mvals[3].sum = 12; /* avg is the exact mean: the histogram's would be 12.004 */
    assert_true(sq_hist_record(a->steps[1].mvals[3].h, 12000));
    a->latency = EMPTY_HIST;
    a->iter_dur = EMPTY_HIST;
    struct sq_th_verdicts v;
    assert_int_equal(sq_thresholds_eval(p, &r, &v), 0);
    assert_int_equal(v.n, 9);
    for (size_t i = 0; i < v.n; i++)
        if (!v.v[i].ok)
            fail_msg("verdict %zu: %s: %s is %g", i, v.v[i].th->selector, v.v[i].expr->text,
                     v.v[i].value);
    assert_true(v.v[8].no_data); /* x takes no t sample */
    sq_th_verdicts_dispose(&v);
    char err[256];
    assert_int_equal(sq_thresholds_check(p, err, sizeof(err)), 0);
    struct sq_live_totals t = {.elapsed_s = 1, .reqs = 5};
    struct sq_th_live lv[16];
    size_t nl = sq_thresholds_live(p, &t, lv, 16);
    for (size_t i = 0; i < nl; i++)
        assert_false(lv[i].live);
    for (size_t k = 0; k < 2; k++) {
        for (uint32_t j = 0; j < a->steps[k].nmvals; j++)
            sq_hist_free(a->steps[k].mvals[j].h);
        free(a->steps[k].mvals);
        a->steps[k].nmvals = 0;
    }
    dispose(&r);
    sq_plan_free(p);

    p = load("target: http://127.0.0.1:1\n"
             "metrics: { n: counter }\n"
             "scenarios:\n"
             "  a:\n"
             "    executor: per-vu-iterations\n"
             "    flow: [ { request: { url: / }, metric: { name: n } } ]\n"
             "thresholds:\n"
             "  \"n{status:200}\": [\"count > 1\"]\n");
    assert_int_equal(sq_thresholds_check(p, err, sizeof(err)), -SQ_EUSAGE);
    assert_string_equal(err, "t.yaml:8:4: thresholds: 'n{status:200}': the plan's own metrics are "
                             "kept per step, not per status: the tags they take are scenario, "
                             "step, group and method");
    sq_plan_free(p);
}

/* abortOnFail: judged on the live totals once past delayAbortEval; tagged thresholds and
 * metrics that are not kept live wait for the end; checks with none run yet are not judged. */
static void test_should_abort(void **state)
{
    (void)state;
    struct sq_plan *p =
        load("target: http://127.0.0.1:1\n"
             "scenarios:\n"
             "  a:\n"
             "    executor: per-vu-iterations\n"
             "    flow: [ { name: s, request: { url: / } } ]\n"
             "thresholds:\n"
             "  checks: [{ threshold: \"rate > 0.9\", abortOnFail: true }]\n"
             "  iteration_duration: [{ threshold: \"max < 0\", abortOnFail: true }]\n"
             "  \"http_reqs{step:s}\": [{ threshold: \"count < 0\", abortOnFail: true }]\n"
             "  http_req_failed:\n"
             "    - { threshold: \"rate < 0.1\", abortOnFail: true, "
             "delayAbortEval: 2s }\n"
             "  data_received: [{ threshold: \"rate < 1000\", abortOnFail: true }]\n");
    struct sq_live_totals t = {0};
    assert_int_equal(sq_hist_new(1, 3600LL * 1000 * 1000, 3, &t.dur), 0);
    char why[256] = "";
    t.reqs = 10;
    t.http_failed = 5;
    t.elapsed_s = 1;
    assert_false(sq_thresholds_should_abort(p, &t, why, sizeof(why))); /* before the delay */
    t.elapsed_s = 3;
    assert_true(sq_thresholds_should_abort(p, &t, why, sizeof(why)));
    assert_string_equal(why, "threshold http_req_failed: rate < 0.1 failed (value 0.5) with "
                             "abortOnFail");
    t.http_failed = 0;
    t.bytes_received = 6000; /* 2000 per second */
    assert_true(sq_thresholds_should_abort(p, &t, why, sizeof(why)));
    assert_string_equal(why, "threshold data_received: rate < 1000 failed (value 2000) with "
                             "abortOnFail");
    t.bytes_received = 0;
    t.checks_passed = 1;
    t.checks_failed = 1;
    assert_true(sq_thresholds_should_abort(p, &t, why, sizeof(why)));
    assert_string_equal(why, "threshold checks: rate > 0.9 failed (value 0.5) with abortOnFail");
    sq_hist_free(t.dur);
    sq_plan_free(p);
}

/* Every threshold judged on the live totals (the daemon's live event): plan order, one entry
 * per expression, tagged ones and metrics not kept live "judged at the end" (live false, ok),
 * checks before any was judged too; the cap on entries. */
static void test_live(void **state)
{
    (void)state;
    struct sq_plan *p = load("target: http://127.0.0.1:1\n"
                             "scenarios:\n"
                             "  a:\n"
                             "    executor: per-vu-iterations\n"
                             "    flow: [ { name: s, request: { url: / } } ]\n"
                             "thresholds:\n"
                             "  http_req_failed: [\"rate < 0.1\", \"rate < 0.9\"]\n"
                             "  \"http_reqs{step:s}\": [\"count < 0\"]\n"
                             "  iteration_duration: [\"max < 0\"]\n"
                             "  checks: [\"rate > 0.9\"]\n"
                             "  http_reqs: [\"rate > 100\"]\n");
    struct sq_live_totals t = {0};
    assert_int_equal(sq_hist_new(1, 3600LL * 1000 * 1000, 3, &t.dur), 0);
    t.reqs = 10;
    t.http_failed = 5;
    t.elapsed_s = 2;
    struct sq_th_live v[8];
    assert_int_equal(sq_thresholds_live(p, &t, v, 8), 6);
    assert_string_equal(v[0].th->selector, "http_req_failed");
    assert_string_equal(v[0].expr->text, "rate < 0.1");
    assert_true(v[0].live);
    assert_false(v[0].ok);
    assert_true(v[0].value > 0.49 && v[0].value < 0.51);
    assert_string_equal(v[1].expr->text, "rate < 0.9");
    assert_true(v[1].live && v[1].ok);
    assert_string_equal(v[2].th->selector, "http_reqs{step:s}");
    assert_false(v[2].live);
    assert_true(v[2].ok);
    assert_false(v[3].live); /* iteration_duration: at the end */
    assert_false(v[4].live); /* checks: none judged yet */
    assert_true(v[5].live);  /* http_reqs: 5 per second */
    assert_false(v[5].ok);
    assert_true(v[5].value > 4.99 && v[5].value < 5.01);
    t.checks_passed = 1;
    assert_int_equal(sq_thresholds_live(p, &t, v, 5), 5); /* the cap */
    assert_true(v[4].live && v[4].ok);
    sq_hist_free(t.dur);
    sq_plan_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_scope), cmocka_unit_test(test_check_refuses),
        cmocka_unit_test(test_group_tag),   cmocka_unit_test(test_group_duration),
        cmocka_unit_test(test_custom),      cmocka_unit_test(test_should_abort),
        cmocka_unit_test(test_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
