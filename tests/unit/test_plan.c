/* Unit tests: plan/load + plan/describe (the plan language: errors with file:line:col and key
 * path, and the compiled model of a full plan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "plan/load_internal.h"
#include "plan/plan.h"

static char tmpdir[64];

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/sq_test_plan_XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    write_file("users.csv", "name,password\n\"Ann \"\"Lee\"\"\",pw1\nbob,pw&2\n");
    write_file("body.bin", "{{not a template}}\x01 raw");
    write_file("hooks.lua", "function f(ctx) end\n");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    const char *names[] = {"users.csv", "body.bin", "plan.yaml", "hooks.lua"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(names); i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
        unlink(path);
    }
    rmdir(tmpdir);
    return 0;
}

/* Loads yaml as tmpdir/plan.yaml (so feeders resolve) and expects an error at where ("L:C"),
 * with key path key and a message containing msg. */
static void expect_err_at(int line, const char *yaml, const char *where, const char *key,
                          const char *msg)
{
    char name[128];
    snprintf(name, sizeof(name), "%s/plan.yaml", tmpdir);
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    int rc = sq_plan_load_string(name, yaml, strlen(yaml), &p, &e);
    if (rc == 0) {
        sq_plan_free(p);
        fail_msg("line %d: the plan loaded; expected %s %s: %s", line, where, key, msg);
    }
    char got_where[32];
    snprintf(got_where, sizeof(got_where), "%u:%u", e.loc.line, e.loc.col);
    char full[1024];
    sq_plan_error_format(&e, full, sizeof(full));
    if (strcmp(got_where, where) || strcmp(e.key, key) || !strstr(e.msg, msg) ||
        strcmp(e.file, name))
        fail_msg("line %d: got '%s'\n  expected %s: %s: ...%s...", line, full, where, key, msg);
    /* the formatted line is file:line:col: key: msg */
    char want[1024];
    if (key[0])
        snprintf(want, sizeof(want), "%s:%s: %s: %s", name, where, key, e.msg);
    else
        snprintf(want, sizeof(want), "%s:%s: %s", name, where, e.msg);
    assert_string_equal(full, want);
    assert_null(p);
}

#define expect_err(...) expect_err_at(__LINE__, __VA_ARGS__)

#define HEAD_REST                                                                                  \
    "scenarios:\n"                                                                                 \
    "  s:\n"                                                                                       \
    "    executor: constant-vus\n"                                                                 \
    "    duration: 1s\n"                                                                           \
    "    flow:\n"

#define HEAD                                                                                       \
    "target: http://127.0.0.1:8080\n"                                                              \
    "scenarios:\n"                                                                                 \
    "  s:\n"                                                                                       \
    "    executor: constant-vus\n"                                                                 \
    "    duration: 1s\n"                                                                           \
    "    flow:\n"

static void unknown_keys(void **state)
{
    (void)state;
    expect_err(HEAD "      - request: { metod: POST, url: /x }\n", "7:20",
               "scenarios.s.flow[0].request", "unknown key 'metod' (did you mean 'method'?)");
    expect_err(HEAD "      - request: { url: /x }\n        chek: { status: 200 }\n", "8:9",
               "scenarios.s.flow[0]", "unknown key 'chek' (did you mean 'check'?)");
    expect_err("target: http://127.0.0.1:8080\nscenarioz: {}\n", "2:1", "",
               "unknown key 'scenarioz' (did you mean 'scenarios'?)");
    expect_err(
        "target: http://127.0.0.1:8080\nzzzzzz: 1\n", "2:1", "",
        "unknown key 'zzzzzz' (expected one of: target, vars, defaults, data, scenarios, "
        "thresholds, script, auth, sink, name, seed, redact, source_addrs, connect_rate, setup, "
        "teardown, metrics, subscribers)");
    /* an executor's key on another executor */
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n"
               "    duration: 1s\n    rate: 5\n",
               "6:5", "scenarios.s",
               "'rate' does not apply to constant-vus (it takes vus, duration, pacing)");
    expect_err(HEAD
               "      - request: { url: /x }\n        check: { json: { \"$.a\": { gte: 1 } } }\n",
               "8:35", "scenarios.s.flow[0].check.json.$.a",
               "unknown operator 'gte' (did you mean 'gt'?)");
    expect_err("target: http://127.0.0.1:8080\ntarget: x\n", "2:1", "",
               "duplicate key 'target' (first at line 1)");
}

/* setup: and teardown: (issue 26 §2): one VU, one iteration; setup's variables are the columns
 * of the feeder "setup" ({{setup.NAME}}) for the scenarios and teardown, not for setup itself. */
#define ONCE_SETUP                                                                                 \
    "target: http://127.0.0.1:8080\n"                                                              \
    "setup:\n"                                                                                     \
    "  flow:\n"                                                                                    \
    "    - request: { method: POST, url: /login }\n"                                               \
    "      extract: { token: { json: $.token } }\n"

static void setup_teardown(void **state)
{
    (void)state;
    const char *ok = ONCE_SETUP "teardown:\n"
                                "  maxDuration: 5s\n"
                                "  flow:\n"
                                "    - request: { url: '/x?t={{setup.token}}' }\n"
                                "scenarios:\n"
                                "  s:\n"
                                "    executor: constant-vus\n"
                                "    duration: 1s\n"
                                "    flow:\n"
                                "      - request: { url: '/items?t={{setup.token}}' }\n";
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    int rc = sq_plan_load_string("p.yaml", ok, strlen(ok), &p, &e);
    if (rc) {
        char full[1024];
        sq_plan_error_format(&e, full, sizeof(full));
        fail_msg("%s", full);
    }
    assert_non_null(p->setup);
    assert_non_null(p->teardown);
    assert_string_equal(p->setup->name, "setup");
    assert_int_equal(p->setup->exec.kind, SQ_EXEC_PER_VU_ITERATIONS);
    assert_int_equal(p->setup->exec.vus, 1);
    assert_int_equal(p->setup->exec.iterations, 1);
    assert_int_equal(p->setup->exec.max_duration_ns, 60 * SQ_NS_PER_S);
    assert_int_equal(p->teardown->exec.max_duration_ns, 5 * SQ_NS_PER_S);
    assert_int_equal(p->setup->nvars, 1);
    assert_string_equal(p->setup->vars[0], "token");
    assert_true(p->setup_feeder >= 0);
    struct sq_feeder *fd = p->feeders[p->setup_feeder].data;
    assert_string_equal(p->feeders[p->setup_feeder].name, "setup");
    assert_int_equal(fd->nrows, 1);
    assert_int_equal(fd->ncolumns, 1);
    assert_string_equal(fd->columns[0], "token");
    assert_int_equal(fd->cells[0].len, 0);
    /* the value setup extracted, as the run writes it before the scenarios start */
    struct sq_str v = {"abc123", 6};
    assert_int_equal(sq_feeder_set_row(fd, &v), 0);
    assert_int_equal(fd->cells[0].len, 6);
    assert_memory_equal(fd->cells[0].p, "abc123", 6);
    assert_string_equal(fd->columns[0], "token");
    uint64_t rng = 1;
    assert_ptr_equal(sq_feeder_row(fd, SQ_FEED_PER_VU, 7, &rng), fd->cells);
    sq_plan_free(p);
    /* no executor: one VU runs it once */
    expect_err(ONCE_SETUP "  executor: constant-vus\n" HEAD_REST "      - request: { url: /x }\n",
               "6:3", "setup", "unknown key 'executor'");
    expect_err("target: http://127.0.0.1:8080\nsetup: { }\n" HEAD_REST
               "      - request: { url: /x }\n",
               "2:1", "setup", "missing key 'flow'");
    expect_err("target: http://127.0.0.1:8080\nsetup: [ ]\n" HEAD_REST
               "      - request: { url: /x }\n",
               "2:8", "setup", "expected a mapping with flow");
    /* what setup extracts, by its name */
    expect_err(ONCE_SETUP HEAD_REST "      - request: { url: '/x?{{setup.tokn}}' }\n", "11:31",
               "scenarios.s.flow[0].request.url",
               "feeder 'setup' has no column 'tokn' (did you mean 'token'?)");
    /* setup cannot read its own values */
    expect_err("target: http://127.0.0.1:8080\nsetup:\n  flow:\n"
               "    - request: { url: '/x?{{setup.token}}' }\n" HEAD_REST
               "      - request: { url: /x }\n",
               "4:29", "setup.flow[0].request.url", "unknown name 'setup.token'");
    /* a feeder of that name would hide them */
    char yaml[1024];
    snprintf(yaml, sizeof(yaml),
             "target: http://127.0.0.1:8080\ndata:\n  setup: { csv: %s/users.csv }\n"
             "setup:\n  flow:\n    - request: { url: /login }\n" HEAD_REST
             "      - request: { url: /x }\n",
             tmpdir);
    expect_err(yaml, "3:3", "data", "'setup' names setup:'s values");
    expect_err(ONCE_SETUP "  maxDuration: 0s\n" HEAD_REST "      - request: { url: /x }\n", "6:16",
               "setup.maxDuration", "maxDuration must be longer than 0");
}

/* if: on a step: parse errors at their column, and what a condition says for given values */
static int render_lit(void *ud, const struct sq_tmpl *t, struct sq_buf *out)
{
    (void)ud;
    const char *text;
    size_t n;
    return sq_tmpl_static(t, &text, &n) ? sq_buf_append(out, text, n) : 0;
}

static bool holds(const char *yaml_cond)
{
    char yaml[512];
    snprintf(yaml, sizeof(yaml),
             "target: http://127.0.0.1:8080\nvars: { env: prod, n: '5' }\n" HEAD_REST
             "      - if: \"%s\"\n        request: { url: /x }\n",
             yaml_cond);
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    int rc = sq_plan_load_string("p.yaml", yaml, strlen(yaml), &p, &e);
    if (rc) {
        char full[512];
        sq_plan_error_format(&e, full, sizeof(full));
        fail_msg("%s", full);
    }
    struct sq_buf a = {0}, b = {0};
    bool r = sq_cond_eval(p->scenarios[0].steps[0].cond, 404, render_lit, NULL, &a, &b);
    sq_buf_dispose(&a);
    sq_buf_dispose(&b);
    sq_plan_free(p);
    return r;
}

static void step_if(void **state)
{
    (void)state;
    assert_true(holds("status == 404"));
    assert_false(holds("status != 404"));
    assert_true(holds("status >= 400 && status < 500"));
    assert_false(holds("status < 400"));
    assert_true(holds("status == 200 || env == 'prod'"));
    assert_false(holds("status == 200 || env == 'dev' && 1 == 1"));
    assert_true(holds("n > 4 && n <= 5")); /* numbers compare as numbers */
    assert_true(holds("n == 5.0"));
    assert_true(holds("'10' > 9"));
    assert_true(holds("'b' > 'abc'")); /* else as bytes */
    assert_true(holds("env"));         /* a lone value: not empty, 0 or false */
    assert_false(holds("0"));
    assert_false(holds("'false'"));
    assert_false(holds("''"));
    /* errors name the column of what is wrong */
    expect_err(HEAD "      - if: \"status = 200\"\n        request: { url: /x }\n", "7:21",
               "scenarios.s.flow[0].if", "expected ==, !=, <, <=, > or >=");
    expect_err(HEAD "      - if: \"tokn == 'x'\"\n        request: { url: /x }\n", "7:14",
               "scenarios.s.flow[0].if", "unknown name 'tokn'");
    expect_err(HEAD "      - if: \"status == 200 and 1\"\n        request: { url: /x }\n", "7:28",
               "scenarios.s.flow[0].if", "expected &&, || or the end of the condition");
    expect_err(HEAD "      - if: \"status == 'x\"\n        request: { url: /x }\n", "7:24",
               "scenarios.s.flow[0].if", "unclosed string");
    expect_err(HEAD "      - if: \"status ==\"\n        request: { url: /x }\n", "7:23",
               "scenarios.s.flow[0].if", "expected a value");
    expect_err(HEAD "      - if: [ 1 ]\n        request: { url: /x }\n", "7:13",
               "scenarios.s.flow[0].if", "expected a condition");
    expect_err(HEAD "      - ws: { connect: /ws }\n        if: \"1\"\n      - ws: { close: {} }\n",
               "8:9", "scenarios.s.flow[0]", "'if' does not apply to ws steps");
}

/* repeat: flattened into the steps, each loop's bounds in pre-order; its errors */
static void step_repeat(void **state)
{
    (void)state;
    const char *ok = HEAD "      - request: { url: /a }\n"
                          "      - repeat:\n"
                          "          count: 3\n"
                          "          steps:\n"
                          "            - request: { url: /b }\n"
                          "            - repeat:\n"
                          "                while: \"status == 200\"\n"
                          "                max: 9\n"
                          "                steps:\n"
                          "                  - request: { url: /c }\n"
                          "                    extract: { n: { json: $.n } }\n"
                          "            - request: { url: '/d?{{n}}' }\n"
                          "      - request: { url: /e }\n";
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    int rc = sq_plan_load_string("p.yaml", ok, strlen(ok), &p, &e);
    if (rc) {
        char full[1024];
        sq_plan_error_format(&e, full, sizeof(full));
        fail_msg("%s", full);
    }
    const struct sq_plan_scenario *sc = &p->scenarios[0];
    assert_int_equal(sc->nsteps, 5);
    assert_int_equal(sc->nloops, 2);
    assert_int_equal(sc->loops[0].first, 1);
    assert_int_equal(sc->loops[0].last, 3);
    assert_int_equal(sc->loops[0].count, 3);
    assert_null(sc->loops[0].cond);
    assert_int_equal(sc->loops[1].first, 2);
    assert_int_equal(sc->loops[1].last, 2);
    assert_int_equal(sc->loops[1].max, 9);
    assert_non_null(sc->loops[1].cond);
    assert_string_equal(sc->steps[4].name, "step 5");
    assert_int_equal(sc->nvars, 1); /* an extract inside a repeat is a variable of the flow */
    sq_plan_free(p);
    expect_err(HEAD
               "      - repeat: { count: 2, while: \"1\", steps: [ { request: { url: /x } } ] }\n",
               "7:17", "scenarios.s.flow[0].repeat", "a repeat has count or while, not both");
    expect_err(HEAD "      - repeat: { while: \"1\", steps: [ { request: { url: /x } } ] }\n",
               "7:17", "scenarios.s.flow[0].repeat",
               "missing key 'max' (a while loop needs a cap)");
    expect_err(HEAD "      - repeat: { count: 0, steps: [ { request: { url: /x } } ] }\n", "7:26",
               "scenarios.s.flow[0].repeat.count", "");
    expect_err(HEAD "      - repeat: { count: 2, steps: [ ] }\n", "7:36",
               "scenarios.s.flow[0].repeat", "a repeat needs at least one step");
    expect_err(HEAD "      - repeat: { count: 2 }\n", "7:17", "scenarios.s.flow[0].repeat",
               "missing key 'steps'");
    expect_err(HEAD "      - repeat: { count: 2, steps: [ { request: { url: /x } } ] }\n"
                    "        name: r\n",
               "8:9", "scenarios.s.flow[0]", "a repeat item has only repeat");
    expect_err(HEAD "      - repeat: { count: 2, steps: [ { request: { url: /x }, chek: 1 } ] }\n",
               "7:62", "scenarios.s.flow[0].repeat.steps[0]", "unknown key 'chek'");
    expect_err(HEAD
               "      - repeat: { count: 2, steps: [ { request: { url: /x } },\n"
               "          { repeat: { while: \"1\", max: 2, steps: [ { think: 1s } ] } } ] }\n",
               "8:13", "scenarios.s.flow[0].repeat.steps[1].repeat",
               "a while loop cannot end its enclosing repeat's steps");
    expect_err(HEAD "      - repeat: { while: \"status = 1\", max: 2, steps: [ { think: 1s } ] }\n",
               "7:34", "scenarios.s.flow[0].repeat.while", "expected ==, !=");
}

/* group: its steps carry the path of the groups around them; its errors */
static void step_group(void **state)
{
    (void)state;
    const char *ok =
        HEAD "      - request: { url: /a }\n"
             "      - group: checkout\n"
             "        steps:\n"
             "          - request: { url: /b }\n"
             "          - group: pay\n"
             "            steps:\n"
             "              - repeat: { count: 2, steps: [ { request: { url: /c } } ] }\n"
             "      - request: { url: /d }\n";
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    int rc = sq_plan_load_string("p.yaml", ok, strlen(ok), &p, &e);
    if (rc) {
        char full[1024];
        sq_plan_error_format(&e, full, sizeof(full));
        fail_msg("%s", full);
    }
    const struct sq_plan_scenario *sc = &p->scenarios[0];
    assert_int_equal(sc->nsteps, 4);
    assert_null(sc->steps[0].group);
    assert_string_equal(sc->steps[1].group, "checkout");
    assert_string_equal(sc->steps[2].group, "checkout::pay");
    assert_null(sc->steps[3].group);
    assert_int_equal(sc->nloops, 1);
    assert_int_equal(sc->loops[0].first, 2);
    sq_plan_free(p);
    expect_err(HEAD "      - group: g\n", "7:9", "scenarios.s.flow[0]", "missing key 'steps'");
    expect_err(HEAD "      - group: 'a::b'\n        steps: [ { request: { url: /x } } ]\n", "7:17",
               "scenarios.s.flow[0].group", "holds no NUL byte or '::'");
    expect_err(HEAD
               "      - group: g\n        steps: [ { request: { url: /x } } ]\n        if: \"1\"\n",
               "9:9", "scenarios.s.flow[0]", "unknown key 'if'");
    expect_err(HEAD "      - group: g\n        steps: [ ]\n", "8:16", "scenarios.s.flow[0]",
               "a group needs at least one step");
}

/* batch: its requests flattened in place, the first holding how many; batchConnections; errors */
static void step_batch(void **state)
{
    (void)state;
    const char *ok = HEAD "      - request: { url: /a }\n"
                          "      - group: g\n"
                          "        steps:\n"
                          "          - batch:\n"
                          "              - name: b1\n"
                          "                request: { url: /b }\n"
                          "                extract: { id: { header: X-Id } }\n"
                          "              - request: { url: /c }\n"
                          "              - request: { url: /d }\n"
                          "      - request: { url: \"/e/{{id}}\" }\n"
                          "    batchConnections: 2\n";
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    int rc = sq_plan_load_string("p.yaml", ok, strlen(ok), &p, &e);
    if (rc) {
        char full[1024];
        sq_plan_error_format(&e, full, sizeof(full));
        fail_msg("%s", full);
    }
    const struct sq_plan_scenario *sc = &p->scenarios[0];
    assert_int_equal(sc->nsteps, 5);
    assert_int_equal(sc->steps[0].batch, 0);
    assert_false(sc->steps[0].in_batch);
    assert_int_equal(sc->steps[1].batch, 3);
    assert_true(sc->steps[1].in_batch && sc->steps[2].in_batch && sc->steps[3].in_batch);
    assert_int_equal(sc->steps[2].batch, 0);
    assert_false(sc->steps[4].in_batch);
    assert_string_equal(sc->steps[1].name, "b1");
    assert_string_equal(sc->steps[3].group, "g");
    assert_int_equal(sc->batch_max, 3);
    assert_int_equal(sc->batch_conns, 2);
    sq_plan_free(p);
    const char *plain = HEAD "      - request: { url: /a }\n";
    rc = sq_plan_load_string("p.yaml", plain, strlen(plain), &p, &e);
    assert_int_equal(rc, 0);
    assert_int_equal(p->scenarios[0].batch_max, 0);
    assert_int_equal(p->scenarios[0].batch_conns, SQ_PLAN_BATCH_CONNS);
    sq_plan_free(p);
    expect_err(HEAD "      - batch: [ ]\n", "7:16", "scenarios.s.flow[0].batch",
               "a batch needs at least one request step");
    expect_err(HEAD "      - batch: { request: { url: /x } }\n", "7:16",
               "scenarios.s.flow[0].batch", "expected a list of request steps");
    expect_err(HEAD "      - batch: [ { request: { url: /x } } ]\n        name: b\n", "8:9",
               "scenarios.s.flow[0]", "unknown key 'name'");
    expect_err(HEAD "      - batch: [ { think: 1s } ]\n", "7:18", "scenarios.s.flow[0].batch[0]",
               "a batch holds request steps only");
    expect_err(HEAD "      - batch: [ { batch: [ { request: { url: /x } } ] } ]\n", "7:18",
               "scenarios.s.flow[0].batch[0]", "no batch, group or repeat inside it");
    expect_err(HEAD "      - batch: [ { request: { url: /x }, if: \"status == 200\" } ]\n", "7:42",
               "scenarios.s.flow[0].batch[0]", "'if' does not apply inside a batch");
    expect_err(HEAD "      - batch: [ { request: { url: /x }, chek: 1 } ]\n", "7:42",
               "scenarios.s.flow[0].batch[0]", "unknown key 'chek'");
    char big[4096];
    size_t n = (size_t)snprintf(big, sizeof(big), "%s      - batch:\n", HEAD);
    for (int i = 0; i <= SQ_PLAN_BATCH_MAX; i++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "          - request: { url: /x }\n");
    expect_err(big, "40:13", "scenarios.s.flow[0].batch", "a batch holds 32 requests at most");
    expect_err(HEAD "      - request: { url: /x }\n    batchConnections: 0\n", "8:23",
               "scenarios.s.batchConnections", "");
}

/* seed: the random values' seed, a whole number in [0, 2^53 - 1]; absent: none (drawn) */
static void seed_key(void **state)
{
    (void)state;
    char name[128];
    snprintf(name, sizeof(name), "%s/plan.yaml", tmpdir);
    static const char *const ok[] = {"seed: 0\n", "seed: 42\n", "seed: 9007199254740991\n", ""};
    static const uint64_t want[] = {0, 42, 9007199254740991ull, 0};
    for (size_t i = 0; i < 4; i++) {
        char yaml[512];
        snprintf(yaml, sizeof(yaml), "%s" HEAD "      - request: { url: /x }\n", ok[i]);
        struct sq_plan *p = NULL;
        struct sq_plan_error e;
        if (sq_plan_load_string(name, yaml, strlen(yaml), &p, &e) != 0)
            fail_msg("'%s' did not load: %s", ok[i], e.msg);
        assert_int_equal(p->seed_set, ok[i][0] != '\0');
        assert_true(p->seed == want[i]);
        sq_plan_free(p);
    }
    expect_err("seed: 9007199254740992\n" HEAD "      - request: { url: /x }\n", "1:7", "seed",
               "expected a whole number from 0 to 9007199254740991, got '9007199254740992'");
    expect_err("seed: -1\n" HEAD "      - request: { url: /x }\n", "1:7", "seed",
               "expected a whole number from 0 to 9007199254740991, got '-1'");
    expect_err("seed: \"7\"\n" HEAD "      - request: { url: /x }\n", "1:8", "seed",
               "expected a whole number");
    expect_err("seed: [1]\n" HEAD "      - request: { url: /x }\n", "1:7", "seed",
               "a whole number");
    expect_err("sed: 7\n" HEAD "      - request: { url: /x }\n", "1:1", "",
               "unknown key 'sed' (did you mean 'seed'?)");
}

static void wrong_types(void **state)
{
    (void)state;
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n"
               "    vus: many\n    duration: 1s\n    flow: [ { request: { url: /x } } ]\n",
               "5:10", "scenarios.s.vus", "expected a whole number from 1 to 1000000, got 'many'");
    expect_err(HEAD "      - request: { url: /x }\n        check: { status: [200, 99] }\n", "8:32",
               "scenarios.s.flow[0].check.status",
               "expected an HTTP status from 100 to 599, got 99");
    expect_err(HEAD "      - request: { url: [a] }\n", "7:25", "scenarios.s.flow[0].request.url",
               "expected a path like /items or a URL on the target, got a list");
    expect_err(HEAD "      - request: /x\n", "7:18", "scenarios.s.flow[0].request",
               "expected a mapping (method, url, headers, body...), got a scalar");
    expect_err(HEAD "      - request: { url: /x, method: post }\n", "7:37",
               "scenarios.s.flow[0].request.method",
               "expected an upper-case method, got 'post' (did you mean 'POST'?)");
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n"
               "    duration: 1s\n    cookies: yes\n    flow: [ { request: { url: /x } } ]\n",
               "6:14", "scenarios.s.cookies", "expected true or false, got 'yes'");
    expect_err(HEAD "      - request: { url: /x }\n        on_error: next\n", "8:19",
               "scenarios.s.flow[0].on_error", "expected continue or next_iteration, got 'next'");
    expect_err(HEAD "      - request: { url: /x, json: { a: .inf } }\n", "7:40",
               "scenarios.s.flow[0].request.json.a", "'.inf' has no JSON form");
    expect_err(HEAD "      - request: { url: /x, body: a, json: { a: 1 } }\n", "7:38",
               "scenarios.s.flow[0].request",
               "a request has one body: 'body' and 'json' are both set");
}

static void missing_keys(void **state)
{
    (void)state;
    expect_err("scenarios: {}\n", "1:1", "", "missing key 'target'");
    expect_err("target: http://127.0.0.1:8080\n", "1:1", "", "missing key 'scenarios'");
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    duration: 1s\n", "3:3",
               "scenarios.s", "missing key 'executor'");
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n"
               "    flow: [ { request: { url: /x } } ]\n",
               "3:3", "scenarios.s", "missing key 'duration' (constant-vus needs it)");
    expect_err(
        "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-arrival-rate\n"
        "    rate: 10\n    duration: 1s\n    flow: [ { request: { url: /x } } ]\n",
        "3:3", "scenarios.s", "missing key 'preAllocatedVUs'");
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n"
               "    duration: 1s\n",
               "3:3", "scenarios.s", "missing key 'flow'");
    expect_err(HEAD "      - name: a\n", "7:9", "scenarios.s.flow[0]", "missing key 'request'");
    expect_err(HEAD "      - request: { method: GET }\n", "7:18", "scenarios.s.flow[0].request",
               "missing key 'url'");
    expect_err("", "1:1", "", "the plan is empty");
}

/* ws: steps - what each operation takes, and the order the flow must keep. */
static void ws_steps(void **state)
{
    (void)state;
    char name[128];
    snprintf(name, sizeof(name), "%s/plan.yaml", tmpdir);
    const char *good = HEAD "      - request: { method: POST, url: /webhook, body: x }\n"
                            "      - name: open\n"
                            "        ws: { connect: '/ws?u={{$vu}}', headers: { X-A: b }, "
                            "subprotocol: chat, timeout: 2s }\n"
                            "        check: { status: 101 }\n"
                            "      - ws: { send: 'hi {{$iteration}}', reply: true }\n"
                            "      - ws: { send: 'x', binary: true }\n"
                            "      - ws: { receive: true }\n"
                            "      - ws: { close: 4000 }\n"
                            "      - request: { url: /fast }\n";
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    assert_int_equal(sq_plan_load_string(name, good, strlen(good), &p, &e), 0);
    const struct sq_plan_scenario *sc = &p->scenarios[0];
    assert_true(sc->ws);
    assert_int_equal(sc->nsteps, 7);
    assert_int_equal(sc->steps[1].kind, SQ_STEP_WS);
    assert_int_equal(sc->steps[1].ws.op, SQ_WS_OP_CONNECT);
    assert_string_equal(sc->steps[1].req.url_src, "/ws?u={{$vu}}");
    assert_int_equal(sc->steps[1].req.nheaders, 1);
    assert_string_equal(sc->steps[1].ws.subprotocol, "chat");
    assert_int_equal(sc->steps[1].req.timeout_ns, 2 * 1000000000LL);
    assert_int_equal(sc->steps[2].ws.op, SQ_WS_OP_SEND);
    assert_true(sc->steps[2].ws.reply);
    assert_false(sc->steps[2].ws.binary);
    assert_true(sc->steps[3].ws.binary);
    assert_int_equal(sc->steps[4].ws.op, SQ_WS_OP_RECEIVE);
    assert_int_equal(sc->steps[5].ws.close_code, 4000);
    sq_plan_free(p);

    expect_err(HEAD "      - ws: { connect: /ws, send: x }\n", "7:35", "scenarios.s.flow[0].ws",
               "a ws step does one thing: 'connect' and 'send'");
    expect_err(HEAD "      - ws: { timeout: 1s }\n", "7:13", "scenarios.s.flow[0].ws",
               "a ws step needs one of connect, send, receive or close");
    expect_err(HEAD "      - ws: { connect: ws://h/x }\n      - ws: { close: 1000 }\n", "7:24",
               "scenarios.s.flow[0].ws.connect", "expected a path starting with '/'");
    expect_err(HEAD "      - ws: { connect: /ws, reply: true }\n", "7:36", "scenarios.s.flow[0].ws",
               "'reply' goes with send, not connect");
    expect_err(HEAD "      - ws: { connect: /ws }\n      - ws: { close: 1005 }\n", "8:22",
               "scenarios.s.flow[1].ws.close", "1005 is not a close code a client may send");
    expect_err(HEAD "      - ws: { connect: /ws }\n      - ws: { receive: false }\n", "8:24",
               "scenarios.s.flow[1].ws.receive", "receive: true waits for the next message");
    expect_err(HEAD "      - ws: { connect: /ws }\n      - request: { url: /x }\n"
                    "      - ws: { close: 1000 }\n",
               "8:9", "scenarios.s.flow[1]",
               "a request step while the WebSocket opened by 'step 1' is open");
    expect_err(HEAD "      - ws: { send: x }\n", "7:9", "scenarios.s.flow[0]",
               "a ws send step with no WebSocket open");
    expect_err(HEAD "      - ws: { connect: /ws }\n      - ws: { connect: /ws }\n", "8:9",
               "scenarios.s.flow[1]", "ws connect while the WebSocket opened by 'step 1' is open");
    expect_err(HEAD "      - ws: { connect: /ws }\n      - ws: { send: x }\n", "7:9",
               "scenarios.s.flow[0]", "the WebSocket 'step 1' opens is never closed");
    expect_err(HEAD "      - ws: { connect: /ws }\n        request: { url: /x }\n", "7:13",
               "scenarios.s.flow[0]", "a step is a request or a ws step, not both");
}

static void durations_and_executors(void **state)
{
    (void)state;
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n"
               "    duration: 10 parsecs\n    flow: [ { request: { url: /x } } ]\n",
               "5:15", "scenarios.s.duration",
               "expected a duration like 500ms or 2s, got '10 parsecs'");
    expect_err(HEAD "      - think: 100\n", "7:16", "scenarios.s.flow[0].think",
               "expected a duration like 500ms or 2s, got '100'");
    expect_err(HEAD "      - think: 1s\n        request: { url: /x }\n", "8:9",
               "scenarios.s.flow[0]", "a think step has only name, if and think");
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vu\n"
               "    duration: 1s\n    flow: [ { request: { url: /x } } ]\n",
               "4:15", "scenarios.s.executor",
               "unknown executor 'constant-vu' (did you mean 'constant-vus'?)");
    /* sq_exec_prepare's complaints land on the key they are about */
    expect_err(
        "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: ramping-vus\n"
        "    stages: [ { duration: 0s, target: 5 } ]\n    flow: [ { request: { url: /x } } ]\n",
        "5:13", "scenarios.s.stages", "the stages add up to no time");
    expect_err(
        "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-arrival-rate\n"
        "    rate: 10\n    duration: 1s\n    preAllocatedVUs: 10\n    maxVUs: 5\n"
        "    flow: [ { request: { url: /x } } ]\n",
        "8:13", "scenarios.s.maxVUs", "must be at least preAllocatedVUs");
    expect_err(
        "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-arrival-rate\n"
        "    rate: 10\n    duration: 1s\n    preAllocatedVUs: 1\n    pacingPrecision: ultra\n"
        "    flow: [ { request: { url: /x } } ]\n",
        "8:22", "scenarios.s.pacingPrecision",
        "'ultra' is not a pacing precision: high, normal, off or coarse");
    expect_err(
        "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-arrival-rate\n"
        "    rate: 10\n    duration: 1s\n    preAllocatedVUs: 1\n    pacingPrecision: coarse:2s\n"
        "    flow: [ { request: { url: /x } } ]\n",
        "8:22", "scenarios.s.pacingPrecision",
        "'coarse:2s': the window of coarse:D is a duration, 1ms..100ms");
    {
        /* coarse:D: the user's own window */
        const char *y = "target: http://127.0.0.1:8080\nscenarios:\n  s:\n"
                        "    executor: constant-arrival-rate\n    rate: 10\n    duration: 1s\n"
                        "    preAllocatedVUs: 1\n    pacingPrecision: coarse:25ms\n"
                        "    flow: [ { request: { url: /x } } ]\n";
        struct sq_plan *p = NULL;
        struct sq_plan_error e;
        assert_int_equal(sq_plan_load_string("w.yaml", y, strlen(y), &p, &e), 0);
        assert_int_equal(p->scenarios[0].exec.precision, SQ_PACING_COARSE);
        assert_int_equal(p->scenarios[0].exec.window_ns, 25 * SQ_NS_PER_MS);
        sq_plan_free(p);
    }
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n"
               "    duration: 1s\n    pacingPrecision: high\n"
               "    flow: [ { request: { url: /x } } ]\n",
               "6:5", "scenarios.s", "'pacingPrecision' does not apply to constant-vus");
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n"
               "    duration: 0s\n    flow: [ { request: { url: /x } } ]\n",
               "5:15", "scenarios.s.duration", "must be positive");
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: ramping-vus\n"
               "    stages: [ { duration: 1s, target: 1.5 } ]\n",
               "5:39", "scenarios.s.stages[0].target", "expected a whole number");
}

static void templates(void **state)
{
    (void)state;
    expect_err(
        HEAD "      - request: { url: /login }\n        extract: { token: { json: \"$.token\" } }\n"
             "      - request: { url: \"/items/{{tokn}}\" }\n",
        "9:35", "scenarios.s.flow[1].request.url", "unknown name 'tokn' (did you mean 'token'?)");
    expect_err(HEAD "      - request: { url: \"/a/{{$vuu}}\" }\n", "7:31",
               "scenarios.s.flow[0].request.url", "unknown built-in '$vuu' (did you mean '$vu'?)");
    expect_err(HEAD "      - request: { url: \"/a/{{$vu\" }\n", "7:29",
               "scenarios.s.flow[0].request.url", "unclosed '{{'");
    expect_err(
        "target: http://127.0.0.1:8080\ndata:\n  users: { csv: users.csv }\n"
        "scenarios:\n  s:\n    executor: constant-vus\n    duration: 1s\n    flow:\n"
        "      - request: { url: \"/u/{{users.nme}}\" }\n",
        "9:31", "scenarios.s.flow[0].request.url",
        "feeder 'users' has no column 'nme' (did you mean 'name'?) (columns: name, password)");
    expect_err("target: http://127.0.0.1:8080\ndata:\n  users: { csv: users.csv }\n"
               "scenarios:\n  s:\n    executor: constant-vus\n    duration: 1s\n    flow:\n"
               "      - request: { url: \"/u/{{usrs.name}}\" }\n",
               "9:31", "scenarios.s.flow[0].request.url",
               "unknown feeder 'usrs' in 'usrs.name' (did you mean 'users'?)");
    /* in a json body: at the string inside the body */
    expect_err(HEAD
               "      - request:\n          url: /x\n          json: { a: [1, \"x {{nope}}\"] }\n",
               "9:31", "scenarios.s.flow[0].request.json.a[1]", "unknown name 'nope'");
    expect_err(HEAD "      - request:\n          url: /x\n          headers: { X-A: "
                    "\"{{$env.SQ_TEST_PLAN_UNSET}}\" }\n",
               "9:30", "scenarios.s.flow[0].request.headers.X-A",
               "environment variable 'SQ_TEST_PLAN_UNSET' is not set");
    expect_err("target: http://127.0.0.1:8080\nvars: { a: \"{{$vu}}\" }\nscenarios: {}\n", "2:13",
               "vars.a", "a plan variable is fixed text");
    /* extracting into a plan variable's name */
    expect_err("target: http://127.0.0.1:8080\nvars: { token: x }\nscenarios:\n  s:\n"
               "    executor: constant-vus\n    duration: 1s\n    flow:\n"
               "      - request: { url: /x }\n        extract: { token: { header: X-T } }\n",
               "9:20", "scenarios.s.flow[0].extract", "'token' is already a plan variable");
    /* urls */
    expect_err(HEAD "      - request: { url: \"http://example.com/x\" }\n", "7:26",
               "scenarios.s.flow[0].request.url", "is not on the target http://127.0.0.1:8080");
    expect_err(HEAD "      - request: { url: \"/a b\" }\n", "7:28",
               "scenarios.s.flow[0].request.url", "a url cannot contain spaces");
    expect_err(HEAD "      - request: { url: items }\n", "7:25", "scenarios.s.flow[0].request.url",
               "expected a path starting with '/'");
    expect_err("target: http://127.0.0.1:8080/api\nscenarios: {}\n", "1:9", "target",
               "without a path");
    expect_err("target: ftp://127.0.0.1\nscenarios: {}\n", "1:9", "target",
               "expected an http:// or https:// URL");
}

static void evaluators(void **state)
{
    (void)state;
    /* errors from plan/eval, reported at the node */
    expect_err(
        HEAD
        "      - request: { url: /login }\n        extract: { id: { regex: \"id=(\\\\d+\" } }\n",
        "8:34", "scenarios.s.flow[0].extract.id.regex", "missing closing parenthesis");
    expect_err(
        HEAD
        "      - request: { url: /login }\n        check: { header_matches: { X-Id: \"(\" } }\n",
        "8:43", "scenarios.s.flow[0].check.header_matches.X-Id", "missing closing parenthesis");
    expect_err(HEAD "      - request: { url: /login }\n        extract: { id: { json: token } }\n",
               "8:32", "scenarios.s.flow[0].extract.id.json", "$");
    expect_err(
        HEAD
        "      - request: { url: /login }\n        extract: { id: { json: $.a, header: X } }\n",
        "8:24", "scenarios.s.flow[0].extract.id", "exactly one of json, regex or header");
    expect_err(
        HEAD
        "      - request: { url: /login }\n        check: { json: { \"$.n\": { gt: abc } } }\n",
        "8:39", "scenarios.s.flow[0].check.json.$.n.gt", "'gt' compares numbers");
}

#define TH_HEAD                                                                                    \
    HEAD "      - name: login\n"                                                                   \
         "        request: { url: /login }\n"                                                      \
         "thresholds:\n"

static void thresholds(void **state)
{
    (void)state;
    expect_err(TH_HEAD "  http_req_duration: [\"p95 < 200\"]\n", "10:24",
               "thresholds.http_req_duration[0]", "unknown aggregation 'p95'");
    expect_err(TH_HEAD "  http_req_duraton: [\"p(95) < 200\"]\n", "10:3",
               "thresholds.http_req_duraton",
               "unknown metric 'http_req_duraton' (did you mean 'http_req_duration'?)");
    expect_err(TH_HEAD "  \"http_req_duration{step:logn}\": [\"p(95) < 200\"]\n", "10:4",
               "thresholds.http_req_duration{step:logn}",
               "no step named 'logn' in the plan (did you mean 'login'?)");
    expect_err(TH_HEAD "  \"http_reqs{scenario:t}\": [\"count > 1\"]\n", "10:4",
               "thresholds.http_reqs{scenario:t}", "no scenario named 't' in the plan");
    expect_err(TH_HEAD "  \"http_reqs{stp:login}\": [\"count > 1\"]\n", "10:4",
               "thresholds.http_reqs{stp:login}", "unknown tag 'stp' (did you mean 'step'?)");
    expect_err(TH_HEAD "  \"http_reqs{group:checkout}\": [\"count > 1\"]\n", "10:4",
               "thresholds.http_reqs{group:checkout}", "no group named 'checkout' in the plan");
    expect_err(HEAD "      - group: checkout\n"
                    "        steps: [ { group: pay, steps: [ { request: { url: /p } } ] } ]\n"
                    "thresholds:\n"
                    "  \"http_reqs{group:checkout::py}\": [\"count > 1\"]\n",
               "10:4", "thresholds.http_reqs{group:checkout::py}",
               "no group named 'checkout::py' in the plan (did you mean 'checkout::pay'?)");
    /* group_duration takes a group's path as the result shows it, and a trend's aggregations */
    expect_err(HEAD "      - group: checkout\n"
                    "        steps: [ { group: pay, steps: [ { request: { url: /p } } ] } ]\n"
                    "thresholds:\n"
                    "  \"group_duration{group:chekout}\": [\"p(95) < 300\"]\n",
               "10:4", "thresholds.group_duration{group:chekout}",
               "no group named 'chekout' in the plan");
    expect_err(HEAD "      - group: checkout\n"
                    "        steps: [ { request: { url: /p } } ]\n"
                    "thresholds:\n"
                    "  group_duration: [\"count > 1\"]\n",
               "10:21", "thresholds.group_duration[0]",
               "'count' does not apply to group_duration (a trend: avg, min, max, med or p(N))");
    expect_err(TH_HEAD "  batch_duration: [\"rate > 1\"]\n", "10:21",
               "thresholds.batch_duration[0]",
               "'rate' does not apply to batch_duration (a trend: avg, min, max, med or p(N))");
    expect_err(TH_HEAD "  checks: [\"p(95) < 200\"]\n", "10:13", "thresholds.checks[0]",
               "'p(95)' does not apply to checks (a rate: rate)");
    expect_err(TH_HEAD "  vus: [\"avg < 2\"]\n", "10:10", "thresholds.vus[0]",
               "'avg' does not apply to vus (a gauge: value)");
    expect_err(TH_HEAD "  http_reqs: [{ threshold: \"count > 1\", abortOnFail: 1 }]\n", "10:54",
               "thresholds.http_reqs[0].abortOnFail", "expected true or false");
    expect_err(TH_HEAD "  http_reqs: [{ abortOnFail: true }]\n", "10:15", "thresholds.http_reqs[0]",
               "missing key 'threshold'");
}

static void repeat_steps_not_a_list(void **state)
{
    (void)state;
    /* a repeat whose steps are not a list, beside one that is (fuzz_plan found it writing past
     * the loops array sized for the valid one) */
    expect_err(HEAD "      - repeat: { count: 2, steps: [ { request: { url: /a } } ] }\n"
                    "      - repeat: { count: 2, steps: x }\n",
               "8:36", "scenarios.s.flow[1].repeat", "expected a list of steps, got a scalar");
}

/* metrics: declared once, added by steps, named by thresholds: each mistake at its line:col */
#define MT_HEAD                                                                                    \
    "target: http://127.0.0.1:8080\n"                                                              \
    "metrics: { orders: counter, cart: trend, ok_rate: rate, depth: gauge }\n"                     \
    "scenarios:\n"                                                                                 \
    "  s:\n"                                                                                       \
    "    executor: constant-vus\n"                                                                 \
    "    duration: 1s\n"                                                                           \
    "    flow:\n"

static void custom_metrics(void **state)
{
    (void)state;
    const char *ok = MT_HEAD "      - name: buy\n"
                             "        request: { url: /b }\n"
                             "        extract: { total: { header: X-Total } }\n"
                             "        check: { status: 200 }\n"
                             "        metric:\n"
                             "          - { name: orders }\n"
                             "          - { name: cart, add: \"{{total}}\" }\n"
                             "          - { name: ok_rate, from: checks }\n"
                             "          - { name: depth, add: -2.5 }\n"
                             "thresholds:\n"
                             "  orders: [\"count > 1\", \"rate > 0\"]\n"
                             "  \"cart{step:buy}\": [\"p(95) < 50\"]\n"
                             "  ok_rate: [\"rate > 0.9\"]\n"
                             "  depth: [\"value < 3\"]\n";
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    if (sq_plan_load_string("p.yaml", ok, strlen(ok), &p, &e) != 0) {
        char full[1024];
        sq_plan_error_format(&e, full, sizeof(full));
        fail_msg("%s", full);
    }
    assert_int_equal(p->nmetrics, 4);
    assert_string_equal(p->metrics[1].name, "cart");
    assert_int_equal(p->metrics[1].kind, SQ_MK_TREND);
    const struct sq_plan_step *st = &p->scenarios[0].steps[0];
    assert_int_equal(st->nmetrics, 4);
    assert_int_equal(st->metrics[0].src, SQ_SMS_NUMBER);
    assert_true(st->metrics[0].value == 1);
    assert_int_equal(st->metrics[1].src, SQ_SMS_TMPL);
    assert_int_equal(st->metrics[2].src, SQ_SMS_CHECKS);
    assert_true(st->metrics[3].value == -2.5);
    assert_int_equal(p->thresholds[0].custom, 0);
    assert_int_equal(p->thresholds[1].custom, 1);
    sq_plan_free(p);

    expect_err("target: http://127.0.0.1:8080\nmetrics: { orders: countr }\n" HEAD_REST
               "      - request: { url: /b }\n",
               "2:20", "metrics.orders", "unknown metric kind 'countr' (did you mean 'counter'?)");
    expect_err("target: http://127.0.0.1:8080\nmetrics: { http_reqs: counter }\n" HEAD_REST
               "      - request: { url: /b }\n",
               "2:12", "metrics.http_reqs", "'http_reqs' is a built-in metric");
    expect_err("target: http://127.0.0.1:8080\nmetrics: { 9x: counter }\n" HEAD_REST
               "      - request: { url: /b }\n",
               "2:12", "metrics.9x", "a metric name is letters, digits and '_'");
    expect_err(MT_HEAD "      - request: { url: /b }\n        metric: { name: ordrs }\n", "9:25",
               "scenarios.s.flow[0].metric.name",
               "no metric named 'ordrs' under metrics: (did you mean 'orders'?)");
    expect_err(MT_HEAD "      - request: { url: /b }\n        metric: { name: orders, add: x }\n",
               "9:38", "scenarios.s.flow[0].metric.add", "expected a number, true/false");
    expect_err(MT_HEAD
               "      - request: { url: /b }\n        metric: { name: ok_rate, from: checks }\n",
               "9:40", "scenarios.s.flow[0].metric.from", "from: checks needs a check:");
    expect_err(MT_HEAD "      - request: { url: /b }\n        metric: [ { name: orders, add: 1, "
                       "from: checks } ]\n",
               "9:43", "scenarios.s.flow[0].metric[0]", "takes add or from, not both");
    expect_err(MT_HEAD
               "      - request: { url: /b }\n        metric: { name: cart, add: \"{{nope}}\" }\n",
               "9:39", "scenarios.s.flow[0].metric.add", "unknown name 'nope'");
    expect_err(MT_HEAD "      - think: 1s\n        metric: { name: orders }\n", "9:9",
               "scenarios.s.flow[0]", "a think step has only name, if and think");
    expect_err(MT_HEAD "      - request: { url: /b }\nthresholds:\n  cart: [\"count > 1\"]\n",
               "10:11", "thresholds.cart[0]",
               "'count' does not apply to cart (a trend: avg, min, max");
    expect_err(MT_HEAD "      - request: { url: /b }\nthresholds:\n  ordrs: [\"count > 1\"]\n",
               "10:3", "thresholds.ordrs", "unknown metric 'ordrs' (did you mean 'orders'?)");
}

/* tags: on a scenario, a group and a step, merged per step; each mistake at its line:col */
static void user_tags(void **state)
{
    (void)state;
    const char *ok = "target: http://127.0.0.1:8080\n"
                     "scenarios:\n"
                     "  s:\n"
                     "    executor: constant-vus\n"
                     "    duration: 1s\n"
                     "    tags: { team: a, page: none }\n"
                     "    flow:\n"
                     "      - request: { url: /a }\n"
                     "      - group: g\n"
                     "        tags: { page: g, flow: 1 }\n"
                     "        steps:\n"
                     "          - request: { url: /b }\n"
                     "            tags: { page: b }\n"
                     "      - batch:\n"
                     "          - request: { url: /c }\n"
                     "            tags: { page: c }\n"
                     "thresholds:\n"
                     "  \"http_reqs{page:b,team:a}\": [\"count > 1\"]\n";
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    if (sq_plan_load_string("p.yaml", ok, strlen(ok), &p, &e) != 0) {
        char full[1024];
        sq_plan_error_format(&e, full, sizeof(full));
        fail_msg("%s", full);
    }
    const struct sq_plan_scenario *sc = &p->scenarios[0];
    assert_int_equal(sc->steps[0].ntags, 2);
    assert_string_equal(sc->steps[0].tags[1].value, "none");
    assert_int_equal(sc->steps[1].ntags, 3);
    assert_string_equal(sc->steps[1].tags[0].key, "team");
    assert_string_equal(sc->steps[1].tags[1].key, "page");
    assert_string_equal(sc->steps[1].tags[1].value, "b"); /* the step's wins */
    assert_string_equal(sc->steps[1].tags[2].value, "1");
    assert_true(sc->steps[2].in_batch); /* a batch's requests carry their tags too */
    assert_int_equal(sc->steps[2].ntags, 2);
    assert_string_equal(sc->steps[2].tags[1].value, "c");
    sq_plan_free(p);

    expect_err(HEAD "      - request: { url: /a }\n        tags: { status: x }\n", "8:17",
               "scenarios.s.flow[0].tags.status", "'status' is a built-in tag");
    expect_err(HEAD "      - request: { url: /a }\n        tags: { page: [a] }\n", "8:23",
               "scenarios.s.flow[0].tags.page", "a tag value");
    expect_err(HEAD "      - request: { url: /a }\n"
                    "        tags: { a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1 }\n",
               "8:15", "scenarios.s.flow[0].tags", "at most 8 tags");
    expect_err(HEAD "      - request: { url: /a }\n        tags: { page: home }\n"
                    "thresholds:\n  \"http_reqs{page:hme}\": [\"count > 1\"]\n",
               "10:4", "thresholds.http_reqs{page:hme}",
               "no step has the tag page:hme in the plan (did you mean 'home'?)");
    expect_err(HEAD "      - request: { url: /a }\n        tags: { page: home }\n"
                    "thresholds:\n  \"http_reqs{pag:home}\": [\"count > 1\"]\n",
               "10:4", "thresholds.http_reqs{pag:home}",
               "unknown tag 'pag' (did you mean 'page'?)");
}

static void yaml_syntax(void **state)
{
    (void)state;
    expect_err("target: http://127.0.0.1:8080\nscenarios: [a,\n  b: c\n", "4:1", "",
               "YAML syntax error");
    /* a line indented too far is named itself (libfyaml blames the line before), with the
     * key it outruns and the fix */
    expect_err("target: http://127.0.0.1:8080\n  bad: indent\n", "2:3", "",
               "YAML syntax error: line 2 is indented too far: 'bad' at column 3 is deeper than "
               "'target' (line 1, column 1), whose value is already on its line; line it up with "
               "'target' at column 1");
    expect_err(HEAD "      - request: { url: /x }\n\n         check: { status: 200 }\n", "9:10", "",
               "line 9 is indented too far: 'check' at column 10 is deeper than 'request' (line "
               "7, column 9)");
    /* an unquoted template is a flow mapping to YAML: the message shows it quoted */
    expect_err(HEAD "      - request:\n          url: {{x}}\n", "8:16", "",
               "'{{' here starts a YAML mapping, not a template: a value that begins with {{ "
               "must be quoted: url: \"{{x}}\"");
    expect_err(HEAD "      - request: { url: {{x}}, method: GET }\n", "7:25", "",
               "must be quoted: url: \"{{x}}\"");
    expect_err(HEAD "      - request:\n          url: {{x}}/a # c\n", "8:16", "",
               "must be quoted: url: \"{{x}}/a\"");
    expect_err("target: http://127.0.0.1:8080\n{a: 1}: 2\n", "2:1", "",
               "a mapping key must be a plain string, not a mapping");
    /* a space in a URL is named as a space, at its column, with the fix */
    expect_err("target: http://127.0.0.1:8080 a/b\n" HEAD_REST "      - request: { url: /x }\n",
               "1:30", "target", "the target may not contain a space");
    expect_err(HEAD "      - request: { url: \"http://127.0.0.1:8080 a/b\" }\n", "7:47",
               "scenarios.s.flow[0].request.url",
               "cannot contain spaces or control characters "
               "(write %20)");
    expect_err("a: *nowhere\n", "1:5", "", "unknown alias '*nowhere'");
    expect_err("a: 1\n---\nb: 2\n", "2:1", "", "a plan is one YAML document");
    expect_err("target: !foo x\n", "1:14", "", "unsupported tag '!foo'");
    /* text libfyaml must never see: malformed UTF-8 (%\xff hangs libfyaml 0.7), controls */
    expect_err("%\xff", "1:2", "", "the plan is not UTF-8 text (byte 0xFF)");
    expect_err("a: \xc3\xa9\xed\xa0\x80\n", "1:5", "", "not UTF-8 text (byte 0xED)");
    expect_err("a: 1\nb: x\x01\n", "2:5", "", "control character 0x01");
}

static const char full_plan[] =
    "target: http://127.0.0.1:8080/\n"
    "vars: { greeting: hello, both: \"{{greeting}} world\" }\n"
    "defaults: { headers: { Accept: application/json, X-Env: fixed }, timeout: 5s }\n"
    "data:\n"
    "  users: { csv: users.csv, mode: per-vu }\n"
    "x-common: &common\n"
    "  executor: constant-vus\n"
    "scenarios:\n"
    "  shoppers:\n"
    "    <<: *common\n"
    "    vus: 64\n"
    "    duration: 30s\n"
    "    cookies: true\n"
    "    flow:\n"
    "      - name: login\n"
    "        request:\n"
    "          method: POST\n"
    "          url: /login\n"
    "          json: { user: \"{{users.name}}\", pw: \"{{users.password}}\", n: 5, f: 1.5,\n"
    "                  ok: true, nil: null, hex: 0x1F, list: [1, \"a\\\"b\"], id: !raw "
    "\"{{$vu}}\",\n"
    "                  s: \"5\" }\n"
    "        extract: { token: { json: \"$.token\" }, rid: { header: X-Request-Id } }\n"
    "        check: { status: 200 }\n"
    "        on_error: next_iteration\n"
    "      - name: items\n"
    "        request:\n"
    "          url: \"/items?vu={{$vu}}&it={{$iteration}}&t={{token}}&g={{greeting}}\"\n"
    "          headers: { Authorization: \"Bearer {{token}}\", x-env: step }\n"
    "          timeout: 2s\n"
    "        check: { status: [200, 204], body_contains: items, json: { \"$.count\": { gt: 0, le: "
    "10 },\n"
    "                 \"$.ok\": true }, header: { Content-Type: application/json },\n"
    "                 header_matches: { X-Id: \"^[0-9]+$\" }, duration: { lt: 200ms } }\n"
    "        extract: { last: { regex: \"id=(\\\\d+)\" } }\n"
    "      - think: 100ms\n"
    "      - name: form\n"
    "        request: { method: PUT, url: \"http://127.0.0.1:8080/f\", form: { \"user name\": "
    "\"{{users.name}}\", q: \"a&b c\" } }\n"
    "      - name: upload\n"
    "        request: { method: POST, url: /up, file: body.bin }\n"
    "      - request: { url: /static, body: \"{{both}}\" }\n"
    "  burst:\n"
    "    executor: ramping-arrival-rate\n"
    "    startRate: 0\n"
    "    timeUnit: 1m\n"
    "    stages: [{ duration: 10s, target: 600 }, { duration: 20s, target: 600 }]\n"
    "    preAllocatedVUs: 10\n"
    "    maxVUs: 50\n"
    "    startTime: 5s\n"
    "    flow:\n"
    "      - request: { url: /health }\n"
    "thresholds:\n"
    "  http_req_duration: [\"p(95) < 200\", \"p(99) < 500\"]\n"
    "  \"http_req_duration{step:login}\": [\"p(99) < 300\"]\n"
    "  checks: \"rate > 0.99\"\n"
    "  http_req_failed: [\"rate < 0.05\", { threshold: \"rate < 0.01\", abortOnFail: true, "
    "delayAbortEval: 10s }]\n";

static char *render(const struct sq_tmpl *t, const struct sq_str *vars, const struct sq_str *row)
{
    uint64_t rng = 12345;
    const struct sq_str *rows[] = {row};
    struct sq_tmpl_ctx ctx = {.vu = 3, .iteration = 9, .rng = &rng, .vars = vars, .rows = rows};
    struct sq_buf b = {0};
    assert_int_equal(sq_tmpl_render(t, &ctx, &b), 0);
    assert_int_equal(sq_buf_append(&b, "", 1), 0);
    return b.p;
}

static void full_plan_model(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/plan.yaml", tmpdir);
    write_file("plan.yaml", full_plan);
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    int rc = sq_plan_load(path, &p, &e);
    if (rc != 0) {
        char b[800];
        sq_plan_error_format(&e, b, sizeof(b));
        fail_msg("%s", b);
    }
    assert_string_equal(p->target, "http://127.0.0.1:8080");
    assert_int_equal(p->nvars, 2);
    assert_string_equal(p->vars[1].name, "both");
    assert_string_equal(p->vars[1].value, "hello world");
    assert_int_equal(p->default_timeout_ns, 5 * SQ_NS_PER_S);
    assert_int_equal(p->nfeeders, 1);
    assert_string_equal(p->feeders[0].name, "users");
    assert_int_equal(p->feeders[0].mode, SQ_FEED_PER_VU);
    assert_int_equal(p->feeders[0].data->nrows, 2);
    assert_int_equal(p->nscenarios, 2);

    const struct sq_plan_scenario *sc = &p->scenarios[0];
    assert_string_equal(sc->name, "shoppers");
    assert_int_equal(sc->exec.kind, SQ_EXEC_CONSTANT_VUS); /* from the merge key */
    assert_int_equal(sc->exec.vus, 64);
    assert_int_equal(sc->exec.duration_ns, 30 * SQ_NS_PER_S);
    assert_int_equal(sc->exec.graceful_stop_ns, 30 * SQ_NS_PER_S);
    assert_true(sc->cookies);
    assert_int_equal(sc->nsteps, 6);
    /* slots in order of first appearance */
    assert_int_equal(sc->nvars, 3);
    assert_string_equal(sc->vars[0], "token");
    assert_string_equal(sc->vars[1], "rid");
    assert_string_equal(sc->vars[2], "last");

    /* step 1: POST /login, json body */
    const struct sq_plan_step *st = &sc->steps[0];
    assert_int_equal(st->kind, SQ_STEP_REQUEST);
    assert_string_equal(st->name, "login");
    assert_int_equal(st->loc.line, 15);
    assert_string_equal(st->req.method, "POST");
    const char *s;
    size_t len;
    assert_true(sq_tmpl_static(st->req.url, &s, &len));
    assert_int_equal(len, 6);
    assert_memory_equal(s, "/login", 6);
    assert_int_equal(st->req.body_kind, SQ_BODY_JSON);
    assert_string_equal(st->req.content_type, "application/json");
    assert_false(sq_tmpl_static(st->req.body, NULL, NULL));
    assert_true(sq_tmpl_uses_feeds(st->req.body));
    static const struct sq_str row[] = {{"Ann \"Lee\"", 9}, {"pw&1", 4}};
    static const struct sq_str vars[] = {{"T0K", 3}, {"r", 1}, {"42", 2}};
    char *r = render(st->req.body, vars, row);
    assert_string_equal(
        r, "{\"user\":\"Ann \\\"Lee\\\"\",\"pw\":\"pw&1\",\"n\":5,\"f\":1.5,\"ok\":true,"
           "\"nil\":null,\"hex\":31,\"list\":[1,\"a\\\"b\"],\"id\":3,\"s\":\"5\"}");
    free(r);
    assert_int_equal(st->nextract, 2);
    assert_int_equal(st->extract[0].kind, SQ_EXTRACT_JSON);
    assert_int_equal(st->extract[0].var, 0);
    assert_string_equal(st->extract_src[0], "$.token");
    assert_int_equal(st->extract[1].kind, SQ_EXTRACT_HEADER);
    assert_int_equal(st->extract[1].var, 1);
    assert_int_equal(st->nchecks, 1);
    assert_int_equal(st->checks[0].kind, SQ_CHECK_STATUS);
    assert_int_equal(st->on_error, SQ_ON_ERROR_NEXT_ITERATION);
    assert_true(st->needs_body);    /* the json extractor */
    assert_true(st->needs_headers); /* the header extractor */
    assert_int_equal(st->req.timeout_ns, 5 * SQ_NS_PER_S);
    assert_int_equal(st->req.nheaders, 2);

    /* step 2: templated url, merged headers, checks */
    st = &sc->steps[1];
    assert_string_equal(st->req.method, "GET");
    assert_false(sq_tmpl_static(st->req.url, NULL, NULL));
    assert_false(sq_tmpl_uses_feeds(st->req.url));
    r = render(st->req.url, vars, row);
    assert_string_equal(r, "/items?vu=3&it=9&t=T0K&g=hello");
    free(r);
    assert_int_equal(st->req.nheaders, 3); /* Accept, X-Env (replaced in place), Authorization */
    assert_string_equal(st->req.headers[0].name, "Accept");
    assert_string_equal(st->req.headers[1].name, "x-env");
    assert_true(sq_tmpl_static(st->req.headers[1].value, &s, &len));
    assert_memory_equal(s, "step", 4);
    assert_string_equal(st->req.headers[2].name, "Authorization");
    r = render(st->req.headers[2].value, vars, row);
    assert_string_equal(r, "Bearer T0K");
    free(r);
    assert_int_equal(st->req.timeout_ns, 2 * SQ_NS_PER_S);
    assert_int_equal(st->nchecks, 8); /* status, body, 2 + 1 json, header, match, duration */
    assert_int_equal(st->checks[0].kind, SQ_CHECK_STATUS);
    assert_int_equal(st->checks[0].ncodes, 2);
    assert_int_equal(st->checks[0].codes[1], 204);
    assert_int_equal(st->checks[1].kind, SQ_CHECK_BODY_CONTAINS);
    assert_int_equal(st->checks[2].kind, SQ_CHECK_JSON);
    assert_int_equal(st->checks[2].op, SQ_CMP_GT);
    assert_true(st->checks[2].num);
    assert_int_equal(st->checks[3].op, SQ_CMP_LE);
    assert_int_equal(st->checks[4].op, SQ_CMP_EQ);
    assert_false(st->checks[4].num);
    assert_int_equal(st->checks[5].kind, SQ_CHECK_HEADER_EQ);
    assert_int_equal(st->checks[6].kind, SQ_CHECK_HEADER_MATCH);
    assert_int_equal(st->checks[7].kind, SQ_CHECK_DURATION);
    assert_int_equal(st->checks[7].op, SQ_CMP_LT);
    assert_true(st->checks[7].value == 200000.0); /* µs */
    assert_true(st->needs_body);
    assert_true(st->needs_headers);
    assert_int_equal(st->nextract, 1);
    assert_int_equal(st->extract[0].kind, SQ_EXTRACT_REGEX);
    assert_int_equal(st->extract[0].var, 2);

    /* step 3: think */
    st = &sc->steps[2];
    assert_int_equal(st->kind, SQ_STEP_THINK);
    assert_string_equal(st->name, "step 3");
    assert_int_equal(st->think_ns, 100 * SQ_NS_PER_MS);

    /* step 4: form body, absolute url on the target */
    st = &sc->steps[3];
    assert_int_equal(st->req.body_kind, SQ_BODY_FORM);
    assert_string_equal(st->req.content_type, "application/x-www-form-urlencoded");
    assert_string_equal(st->req.url_src, "http://127.0.0.1:8080/f");
    assert_true(sq_tmpl_static(st->req.url, &s, &len));
    assert_memory_equal(s, "/f", 2);
    r = render(st->req.body, vars, row);
    assert_string_equal(r, "user+name=Ann+%22Lee%22&q=a%26b+c");
    free(r);
    assert_false(st->needs_body);
    assert_false(st->needs_headers);

    /* step 5: file body, bytes as they are */
    st = &sc->steps[4];
    assert_int_equal(st->req.body_kind, SQ_BODY_FILE);
    assert_null(st->req.content_type);
    assert_string_equal(st->req.body_file, "body.bin");
    assert_true(sq_tmpl_static(st->req.body, &s, &len));
    assert_int_equal(len, 23);
    assert_memory_equal(s, "{{not a template}}\x01 raw", 23);

    /* step 6: a text body that is static after plan variables */
    st = &sc->steps[5];
    assert_string_equal(st->name, "step 6");
    assert_int_equal(st->req.body_kind, SQ_BODY_TEXT);
    assert_true(sq_tmpl_static(st->req.body, &s, &len));
    assert_int_equal(len, 11);
    assert_memory_equal(s, "hello world", 11);

    /* the arrival-rate scenario */
    sc = &p->scenarios[1];
    assert_string_equal(sc->name, "burst");
    assert_int_equal(sc->exec.kind, SQ_EXEC_RAMPING_ARRIVAL_RATE);
    assert_int_equal(sc->exec.vus, 10);
    assert_int_equal(sc->exec.max_in_flight, 50);
    assert_int_equal(sc->exec.max_vus, 50); /* k6's maxVUs: the pool may grow to it */
    assert_int_equal(sq_exec_max_vus(&sc->exec), 50);
    assert_int_equal(sc->exec.precision, SQ_PACING_NORMAL);
    assert_int_equal(sc->exec.time_unit_ns, 60 * SQ_NS_PER_S);
    assert_int_equal(sc->exec.nstages, 2);
    assert_true(sc->exec.stages[0].target == 600.0);
    assert_int_equal(sq_exec_total_arrivals(&sc->exec), 250); /* 10/s: 50 + 200 */
    assert_int_equal(sc->start_ns, 5 * SQ_NS_PER_S);
    assert_int_equal(sc->nvars, 0);
    assert_false(sc->cookies);

    /* thresholds: plain strings grouped per selector, each object its own entry */
    assert_int_equal(p->nthresholds, 5);
    assert_string_equal(p->thresholds[0].selector, "http_req_duration");
    assert_int_equal(p->thresholds[0].nexprs, 2);
    assert_int_equal(p->thresholds[0].exprs[1].agg, SQ_TH_PCT);
    assert_true(p->thresholds[0].exprs[1].pct == 99.0);
    assert_string_equal(p->thresholds[1].selector, "http_req_duration{step:login}");
    assert_int_equal(p->thresholds[1].sel.ntags, 1);
    assert_int_equal(p->thresholds[1].sel.metric_len, strlen("http_req_duration"));
    assert_string_equal(p->thresholds[2].selector, "checks");
    assert_int_equal(p->thresholds[2].exprs[0].agg, SQ_TH_RATE);
    assert_false(p->thresholds[3].abort_on_fail);
    assert_true(p->thresholds[4].abort_on_fail);
    assert_int_equal(p->thresholds[4].delay_abort_eval_ns, 10 * SQ_NS_PER_S);
    assert_int_equal(p->thresholds[4].nexprs, 1);

    /* the outline */
    char *text = NULL;
    size_t tlen = 0;
    FILE *out = open_memstream(&text, &tlen);
    assert_non_null(out);
    sq_plan_describe(p, out);
    fclose(out);
    static const char *const want[] = {
        "target http://127.0.0.1:8080\n",
        "users: ",
        "2 rows, per-vu; columns name, password\n",
        "scenario shoppers\n  constant-vus: 64 VUs for 30s, graceful stop 30s\n",
        "1. login: POST /login\n",
        "body (json): {\"user\":\"{{users.name}}\"",
        "extract token <- json $.token\n",
        "2. items: GET /items?vu={{$vu}}&it={{$iteration}}&t={{token}}&g={{greeting}}\n",
        "header Authorization: Bearer {{token}}\n",
        "3. step 3: think 100ms\n",
        "body (form): user+name={{users.name}}&q=a%26b+c\n",
        "body (file): body.bin, 23 bytes\n",
        ("ramping-arrival-rate: from 0 per 1m: 10s to 600 per 1m, 20s to 600 per 1m (30s, 250 "
         "iterations), 10 VUs preallocated, at most 50 in flight"),
        "starts at 5s\n",
        "http_req_failed: rate < 0.01 (abort on fail, evaluated after 10s)\n",
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(want); i++)
        if (!strstr(text, want[i]))
            fail_msg("describe lacks '%s' in:\n%s", want[i], text);
    free(text);
    sq_plan_free(p);
    sq_plan_free(NULL);
}

static void error_format(void **state)
{
    (void)state;
    struct sq_plan_error e = {.file = "p.yaml", .loc = {12, 7}, .key = "a.b", .msg = "bad"};
    char buf[128];
    sq_plan_error_format(&e, buf, sizeof(buf));
    assert_string_equal(buf, "p.yaml:12:7: a.b: bad");
    e.key[0] = '\0';
    sq_plan_error_format(&e, buf, sizeof(buf));
    assert_string_equal(buf, "p.yaml:12:7: bad");
    e.loc.line = 0;
    sq_plan_error_format(&e, buf, sizeof(buf));
    assert_string_equal(buf, "p.yaml: bad");

    /* an unreadable file */
    struct sq_plan *p = NULL;
    int rc = sq_plan_load("/nonexistent/dir/plan.yaml", &p, &e);
    assert_int_equal(rc, -ENOENT);
    assert_non_null(strstr(e.msg, "cannot read"));
    assert_null(p);
}

/* YAML details the loader handles itself: single-quoted folding and '' (libfyaml 0.7 gets runs
 * of '' wrong), !!str, block scalars, $env in vars and target, aliases. */
static void yaml_features(void **state)
{
    (void)state;
    setenv("SQ_TEST_PLAN_PORT", "8081", 1);
    static const char yaml[] = "target: \"http://127.0.0.1:{{$env.SQ_TEST_PLAN_PORT}}\"\n"
                               "vars:\n"
                               "  a: 'x''''y'\n"
                               "  b: 'line one\n"
                               "    line two'\n"
                               "  c: 'para one\n"
                               "\n"
                               "    para two  '\n"
                               "  d: !!str 12\n"
                               "  e: &e |\n"
                               "    literal\n"
                               "    text\n"
                               "  f: *e\n"
                               "scenarios:\n"
                               "  s: { executor: per-vu-iterations, flow: [ { request: { url: "
                               "'/x''y', body: !!str 5 } } ] }\n";
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    int rc = sq_plan_load_string("inline.yaml", yaml, strlen(yaml), &p, &e);
    if (rc != 0) {
        char b[800];
        sq_plan_error_format(&e, b, sizeof(b));
        fail_msg("%s", b);
    }
    assert_string_equal(p->target, "http://127.0.0.1:8081");
    assert_string_equal(p->vars[0].value, "x''y");
    assert_string_equal(p->vars[1].value, "line one line two");
    assert_string_equal(p->vars[2].value, "para one\npara two  ");
    assert_string_equal(p->vars[3].value, "12");
    assert_string_equal(p->vars[4].value, "literal\ntext\n");
    assert_string_equal(p->vars[5].value, "literal\ntext\n");
    const struct sq_plan_step *st = &p->scenarios[0].steps[0];
    const char *s;
    size_t len;
    assert_true(sq_tmpl_static(st->req.url, &s, &len));
    assert_int_equal(len, 4);
    assert_memory_equal(s, "/x'y", 4);
    assert_int_equal(p->scenarios[0].exec.vus, 1); /* k6's defaults */
    assert_int_equal(p->scenarios[0].exec.iterations, 1);
    sq_plan_free(p);
}

/* Every plan under examples/ loads (they are documentation a user copies). */
/* group_duration: a scenario's group paths (each enclosing group too) in order of first
 * appearance, each step's bits over them (gmask), and the groups inside each repeat (gin: a
 * repeat inside a group that starts where the group does is not around it). */
static void group_index(void **state)
{
    (void)state;
    static const char yaml[] =
        HEAD "      - request: { url: /a }\n"
             "      - group: checkout\n"
             "        steps:\n"
             "          - group: pay\n"
             "            steps: [ { request: { url: /p } }, { request: { url: /q } } ]\n"
             "          - request: { url: /c }\n"
             "      - batch: [ { request: { url: /x } }, { request: { url: /y } } ]\n"
             "thresholds:\n"
             "  \"group_duration{group:checkout::pay}\": [\"p(95) < 300\"]\n"
             "  \"group_duration{scenario:s,group:checkout}\": [\"max < 900\"]\n"
             "  group_duration: [\"avg < 500\"]\n"
             "  \"batch_duration{step:step 5}\": [\"p(99) < 300\"]\n";
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    if (sq_plan_load_string("inline.yaml", yaml, sizeof(yaml) - 1, &p, &e) != 0) {
        char b[800];
        sq_plan_error_format(&e, b, sizeof(b));
        fail_msg("%s", b);
    }
    const struct sq_plan_scenario *sc = &p->scenarios[0];
    assert_int_equal(sc->ngroups, 2);
    assert_string_equal(sc->groups[0], "checkout");
    assert_string_equal(sc->groups[1], "checkout::pay");
    assert_int_equal(sc->nsteps, 6);
    static const uint64_t mask[] = {0, 3, 3, 1, 0, 0};
    for (size_t k = 0; k < 6; k++)
        assert_int_equal(sc->steps[k].gmask, mask[k]);
    assert_int_equal(p->nthresholds, 4);
    assert_int_equal(p->thresholds[0].metric, SQ_METRIC_GROUP_DURATION);
    assert_int_equal(p->thresholds[0].sel.ntags, 1);
    assert_int_equal(p->thresholds[3].metric, SQ_METRIC_BATCH_DURATION);
    assert_int_equal(sc->steps[4].batch, 2);
    sq_plan_free(p);

    static const char loops[] =
        HEAD "      - group: a\n"
             "        steps:\n"
             "          - repeat:\n"
             "              count: 2\n"
             "              steps: [ { group: b, steps: [ { request: { url: /b } } ] } ]\n"
             "      - repeat:\n"
             "          count: 2\n"
             "          steps: [ { group: c, steps: [ { request: { url: /c } } ] } ]\n";
    if (sq_plan_load_string("inline.yaml", loops, sizeof(loops) - 1, &p, &e) != 0) {
        char b[800];
        sq_plan_error_format(&e, b, sizeof(b));
        fail_msg("%s", b);
    }
    sc = &p->scenarios[0];
    assert_int_equal(sc->ngroups, 3); /* a, a::b, c */
    assert_int_equal(sc->nloops, 2);
    assert_int_equal(sc->loops[0].gdepth, 1);
    assert_int_equal(sc->loops[0].gin, 2); /* a::b only: a is around the repeat */
    assert_int_equal(sc->loops[1].gdepth, 0);
    assert_int_equal(sc->loops[1].gin, 4); /* c */
    sq_plan_free(p);
}

static void examples_load(void **state)
{
    (void)state;
    char pattern[512];
    const char *here = __FILE__; /* .../tests/unit/test_plan.c */
    const char *cut = strstr(here, "tests/unit/test_plan.c");
    assert_non_null(cut);
    snprintf(pattern, sizeof(pattern), "%.*sexamples/*.yaml", (int)(cut - here), here);
    glob_t g;
    assert_int_equal(glob(pattern, 0, NULL, &g), 0);
    assert_true(g.gl_pathc >= 4);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct sq_plan *p = NULL;
        struct sq_plan_error e;
        if (sq_plan_load(g.gl_pathv[i], &p, &e) != 0) {
            char b[800];
            sq_plan_error_format(&e, b, sizeof(b));
            globfree(&g);
            fail_msg("%s", b);
        }
        FILE *out = fopen("/dev/null", "w");
        assert_non_null(out);
        sq_plan_describe(p, out);
        fclose(out);
        sq_plan_free(p);
    }
    globfree(&g);
}

/* ---- large plans and limits ---- */

/* A growable text for generated plans. */
struct text {
    char *p;
    size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if (t->p && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
}

/* Loads t (named inline.yaml) and returns the plan, failing the test on an error. */
static struct sq_plan *load_ok(const struct text *t)
{
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    if (sq_plan_load_string("inline.yaml", t->p, t->len, &p, &e) != 0) {
        char b[800];
        sq_plan_error_format(&e, b, sizeof(b));
        fail_msg("%s", b);
    }
    return p;
}

/* Loads t and expects an error whose message contains msg; returns the error. */
static struct sq_plan_error load_err(const struct text *t, const char *msg)
{
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    int rc = sq_plan_load_string("inline.yaml", t->p, t->len, &p, &e);
    if (rc == 0) {
        sq_plan_free(p);
        fail_msg("the plan loaded; expected ...%s...", msg);
    }
    if (!strstr(e.msg, msg))
        fail_msg("got '%s', expected ...%s...", e.msg, msg);
    assert_null(p);
    return e;
}

#define FLOW1 "scenarios:\n  s:\n    executor: per-vu-iterations\n    flow:\n"

/* 100,000 plan variables (one mapping of 100,000 keys) load, every one resolvable; a duplicate
 * among them is found (a hash map: the pairwise check took 29 s) and named with its first line. */
static void many_keys(void **state)
{
    (void)state;
    struct text t = {0};
    put(&t, "target: http://127.0.0.1:8080\nvars:\n");
    for (int i = 0; i < 100000; i++)
        put(&t, "  v%d: x%d\n", i, i);
    put(&t, FLOW1 "      - request: { url: \"/{{v0}}/{{v99999}}\" }\n");
    struct sq_plan *p = load_ok(&t);
    assert_int_equal(p->nvars, 100000);
    assert_string_equal(p->vars[99999].name, "v99999");
    const char *s;
    size_t len;
    assert_true(sq_tmpl_static(p->scenarios[0].steps[0].req.url, &s, &len));
    assert_int_equal(len, 10);
    assert_memory_equal(s, "/x0/x99999", 10);
    sq_plan_free(p);

    t.len = 0;
    put(&t, "target: http://127.0.0.1:8080\nvars:\n");
    for (int i = 0; i < 100000; i++)
        put(&t, "  v%d: x\n", i == 99999 ? 17 : i);
    put(&t, FLOW1 "      - request: { url: / }\n");
    struct sq_plan_error e = load_err(&t, "duplicate key 'v17' (first at line 20)");
    assert_int_equal(e.loc.line, 100002);
    assert_int_equal(e.loc.col, 3);
    free(t.p);
}

/* 100,000 anchors and as many aliases load (a hash map; a linear search took 15 s); a later
 * anchor of the same name replaces the earlier one, as YAML says. */
static void many_anchors(void **state)
{
    (void)state;
    struct text t = {0};
    put(&t, "target: http://127.0.0.1:8080\nx-a:\n");
    for (int i = 0; i < 100000; i++)
        put(&t, "  - &a%d /p%d\n", i, i);
    put(&t, "  - &a5 /again\nx-b:\n");
    for (int i = 0; i < 100000; i++)
        put(&t, "  - *a%d\n", i);
    put(&t, FLOW1 "      - request: { url: *a99999 }\n      - request: { url: *a5 }\n");
    struct sq_plan *p = load_ok(&t);
    const char *s;
    size_t len;
    assert_true(sq_tmpl_static(p->scenarios[0].steps[0].req.url, &s, &len));
    assert_int_equal(len, 7);
    assert_memory_equal(s, "/p99999", 7);
    assert_true(sq_tmpl_static(p->scenarios[0].steps[1].req.url, &s, &len));
    assert_int_equal(len, 6);
    assert_memory_equal(s, "/again", 6);
    sq_plan_free(p);
    free(t.p);
}

/* Merge keys over mappings large enough for the hashed path keep YAML's rule: the mapping's own
 * keys win, then earlier merges; a duplicate own key is still an error. */
static void large_merges(void **state)
{
    (void)state;
    struct text t = {0};
    put(&t, "target: http://127.0.0.1:8080\nx-one: &one\n");
    for (int i = 0; i < 40; i++)
        put(&t, "  v%d: one%d\n", i, i);
    put(&t, "x-two: &two\n");
    for (int i = 0; i < 60; i++)
        put(&t, "  v%d: two%d\n", i, i);
    put(&t, "vars:\n  <<: [*one, *two]\n  v3: own\n" FLOW1
            "      - request: { url: \"/{{v3}}/{{v39}}/{{v59}}\" }\n");
    struct sq_plan *p = load_ok(&t);
    assert_int_equal(p->nvars, 60);
    assert_string_equal(p->vars[0].name, "v3"); /* own keys first */
    const char *s;
    size_t len;
    assert_true(sq_tmpl_static(p->scenarios[0].steps[0].req.url, &s, &len));
    assert_int_equal(len, strlen("/own/one39/two59"));
    assert_memory_equal(s, "/own/one39/two59", len);
    sq_plan_free(p);

    t.len = 0;
    put(&t, "target: http://127.0.0.1:8080\nx-one: &one\n");
    for (int i = 0; i < 40; i++)
        put(&t, "  v%d: one\n", i);
    put(&t, "vars:\n  <<: *one\n  w: 1\n  w: 2\n" FLOW1 "      - request: { url: / }\n");
    struct sq_plan_error e = load_err(&t, "duplicate key 'w' (first at line 45)");
    assert_int_equal(e.loc.line, 46);
    free(t.p);
}

/* Many scenarios, steps, headers, extracts and thresholds: each name check is a lookup. */
static void many_names(void **state)
{
    (void)state;
    struct text t = {0};
    put(&t, "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: per-vu-iterations\n"
            "    flow:\n");
    for (int i = 0; i < 20000; i++)
        put(&t,
            "      - { name: st%d, request: { url: \"/{{e%d}}\", headers: { X-A: a, x-b: b } }, "
            "extract: { e%d: { header: X-E } } }\n",
            i, i, i);
    put(&t, "thresholds:\n");
    for (int i = 0; i < 20000; i += 7)
        put(&t, "  \"http_req_duration{step:st%d}\": [\"p(95) < 100\"]\n", i);
    struct sq_plan *p = load_ok(&t);
    assert_int_equal(p->scenarios[0].nsteps, 20000);
    assert_int_equal(p->scenarios[0].nvars, 20000);
    assert_int_equal(p->scenarios[0].steps[19999].extract[0].var, 19999);
    assert_int_equal(p->nthresholds, (20000 + 6) / 7);
    sq_plan_free(p);

    t.len = 0;
    put(&t, "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: per-vu-iterations\n"
            "    flow:\n");
    for (int i = 0; i < 1000; i++)
        put(&t, "      - { name: st%d, request: { url: / } }\n", i);
    put(&t, "      - { name: st500, request: { url: / } }\n");
    struct sq_plan_error e = load_err(&t, "duplicate step name 'st500' (first at line 506)");
    assert_int_equal(e.loc.line, 1006);
    free(t.p);
}

/* The documented limits, each refused with a message that names it. */
static void limits(void **state)
{
    (void)state;
    /* nodes: counted while the syntax is checked, so an oversized plan stops early */
    struct text t = {0};
    put(&t, "target: http://127.0.0.1:8080\nx-big: [");
    for (int i = 0; i < 1000000; i++)
        put(&t, "0,");
    put(&t, "0]\n" FLOW1 "      - request: { url: / }\n");
    struct sq_plan_error e =
        load_err(&t, "the plan has more than 1000000 YAML nodes, the limit for a plan");
    assert_int_equal(e.loc.line, 2);
    /* the node past the limit: the root mapping, target and its value, x-big and the list come
     * first, so it is the list's 999,996th item, in column 9 + 2 * 999,995 */
    assert_int_equal(e.loc.col, 1999999);
    /* just under it loads */
    t.len = 0;
    put(&t, "target: http://127.0.0.1:8080\nx-big: [");
    for (int i = 0; i < 999980; i++)
        put(&t, "0,");
    put(&t, "0]\n" FLOW1 "      - request: { url: / }\n");
    sq_plan_free(load_ok(&t));

    /* the weight with aliases expanded: a billion laughs stops at the alias that passes it */
    t.len = 0;
    put(&t, "target: http://127.0.0.1:8080\n"
            "x-0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for (int i = 1; i < 9; i++)
        put(&t, "x-%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n", i, i,
            i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
    put(&t, FLOW1 "      - request: { url: / }\n");
    e = load_err(&t, "aliases expand the plan past 32 MiB, the limit for a plan with its aliases "
                     "expanded");
    assert_int_equal(e.loc.line, 8); /* x-6: 11 * 10^6 bytes of "lol" and more, x-7 passes */
    /* a json body that aliases multiply is caught by the same limit */
    t.len = 0;
    put(&t, "target: http://127.0.0.1:8080\nx-s: &s \"%0*d\"\nx-l: &l [", 1000000, 0);
    for (int i = 0; i < 40; i++)
        put(&t, "*s, ");
    put(&t, "*s]\n" FLOW1 "      - request: { url: /, json: [*l] }\n");
    load_err(&t, "aliases expand the plan past 32 MiB");

    /* bytes: by the string's length, and by the file's size before reading it */
    char *big = malloc((16u << 20) + 2);
    assert_non_null(big);
    memset(big, '#', (16u << 20) + 1);
    big[(16u << 20) + 1] = '\0';
    struct sq_plan *p = NULL;
    assert_int_equal(sq_plan_load_string("big.yaml", big, (16u << 20) + 1, &p, &e), -SQ_EPARSE);
    assert_string_equal(e.msg, "the plan is larger than 16 MiB, the limit for a plan file (see "
                               "docs/plans.md, Limits)");
    free(big);
    char path[128];
    snprintf(path, sizeof(path), "%s/big.yaml", tmpdir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 50 << 20), 0); /* sparse: nothing to read */
    fclose(f);
    int64_t t0 = sq_now_ns();
    assert_int_equal(sq_plan_load(path, &p, &e), -SQ_EPARSE);
    assert_true(sq_now_ns() - t0 < SQ_NS_PER_S);
    assert_string_equal(e.msg, "the plan is larger than 16 MiB, the limit for a plan file (see "
                               "docs/plans.md, Limits)");
    unlink(path);

    /* headers: 100 per request, the defaults' included */
    t.len = 0;
    put(&t, "target: http://127.0.0.1:8080\ndefaults:\n  headers:\n");
    for (int i = 0; i < 60; i++)
        put(&t, "    D%d: d\n", i);
    put(&t, FLOW1 "      - request:\n          url: /\n          headers:\n");
    for (int i = 0; i < 40; i++)
        put(&t, "            S%d: s\n", i);
    put(&t, "            D0: replaced\n");
    p = load_ok(&t);
    assert_int_equal(p->scenarios[0].steps[0].req.nheaders, 100);
    assert_string_equal(p->scenarios[0].steps[0].req.headers[0].name, "D0");
    sq_plan_free(p);
    t.len -= strlen("            D0: replaced\n");
    put(&t, "            S40: one too many\n");
    e = load_err(&t, "more than 100 headers in one request (the defaults' included), the limit "
                     "for a request");
    assert_string_equal(e.key, "scenarios.s.flow[0].request.headers.S40");
    free(t.p);
}

/* A directory where a file is expected says so (it said "Input/output error"). */
static void directories(void **state)
{
    (void)state;
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    assert_int_equal(sq_plan_load(tmpdir, &p, &e), -EISDIR);
    char full[600];
    sq_plan_error_format(&e, full, sizeof(full));
    char want[600];
    snprintf(want, sizeof(want), "%s: cannot read the plan: it is a directory", tmpdir);
    assert_string_equal(full, want);
    expect_err(HEAD "      - request: { url: /, file: . }\n", "7:34",
               "scenarios.s.flow[0].request.file", "/.: is a directory, not a file");
    expect_err("target: http://127.0.0.1:8080\ndata:\n  u: { csv: . }\nscenarios:\n  s:\n"
               "    executor: per-vu-iterations\n    flow: [ { request: { url: / } } ]\n",
               "3:13", "data.u.csv", "/.: cannot read: Is a directory");
}

/* The loader's string map: add keeps the first value, set replaces, case folding on demand,
 * growth past many keys. */
static void string_map(void **state)
{
    (void)state;
    struct sq_plan__map m;
    sq_plan__map_init(&m, false);
    uintptr_t v = 0;
    assert_false(sq_plan__map_get(&m, "a", 1, &v));
    assert_int_equal(sq_plan__map_add(&m, "a", 1, 7, NULL), 1);
    assert_int_equal(sq_plan__map_add(&m, "a", 1, 8, &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(sq_plan__map_set(&m, "a", 1, 9), 0);
    assert_true(sq_plan__map_get(&m, "a", 1, &v));
    assert_int_equal(v, 9);
    assert_false(sq_plan__map_get(&m, "A", 1, NULL));
    assert_false(sq_plan__map_get(&m, "a\0", 2, NULL)); /* lengths count */
    static char keys[5000][8];
    for (int i = 0; i < 5000; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        assert_int_equal(sq_plan__map_add(&m, keys[i], strlen(keys[i]), (uintptr_t)i, NULL), 1);
    }
    for (int i = 0; i < 5000; i++) {
        assert_true(sq_plan__map_get(&m, keys[i], strlen(keys[i]), &v));
        assert_int_equal(v, i);
    }
    assert_int_equal(m.n, 5001);
    sq_plan__map_dispose(&m);
    sq_plan__map_init(&m, true);
    assert_int_equal(sq_plan__map_add(&m, "Content-Type", 12, 1, NULL), 1);
    assert_true(sq_plan__map_get(&m, "content-TYPE", 12, &v));
    assert_int_equal(sq_plan__map_add(&m, "CONTENT-type", 12, 2, &v), 0);
    assert_int_equal(v, 1);
    sq_plan__map_dispose(&m);
}

/* script:, before:/after:, locals: and auth.oauth2 */
/* sink: the counting sink beside the load: its sources, stamp, settle and bus options load as
 * written; a bad key, QoS or duration, or no source at all, is refused at its place. */
static void sink_section(void **state)
{
    (void)state;
    static const char ok[] =
        "target: http://127.0.0.1:8080\n"
        "sink:\n"
        "  http: 127.0.0.1:9000\n"
        "  nats: nats://127.0.0.1:4222/orders.>\n"
        "  mqtt: mqtt://127.0.0.1:1883/orders/#\n"
        "  stamp: json:t\n"
        "  settle: 500ms\n"
        "  qos: 2\n"
        "  stream: ORDERS\n"
        "  durable: squall\n"
        "  queue: q\n" HEAD_REST "      - publish: { url: nats://127.0.0.1:4222/orders.a }\n";
    struct text t = {0};
    put(&t, "%s", ok);
    struct sq_plan *p = load_ok(&t);
    assert_non_null(p->sink);
    assert_string_equal(p->sink->http, "127.0.0.1:9000");
    assert_string_equal(p->sink->nats, "nats://127.0.0.1:4222/orders.>");
    assert_string_equal(p->sink->mqtt, "mqtt://127.0.0.1:1883/orders/#");
    assert_string_equal(p->sink->stamp, "json:t");
    assert_int_equal(p->sink->settle_ns, 500 * 1000000LL);
    assert_int_equal(p->sink->qos, 2);
    assert_string_equal(p->sink->stream, "ORDERS");
    assert_string_equal(p->sink->durable, "squall");
    assert_string_equal(p->sink->queue, "q");
    assert_int_equal(p->sink->loc.line, 3);
    sq_plan_free(p);
    free(t.p);
    /* a plan without one has none, and the defaults are "not said" */
    t = (struct text){0};
    put(&t, "target: http://127.0.0.1:8080\nsink: {http: '127.0.0.1:0'}\n" HEAD_REST
            "      - publish: { url: nats://127.0.0.1:4222/a }\n");
    p = load_ok(&t);
    assert_int_equal(p->sink->qos, -1);
    assert_int_equal(p->sink->settle_ns, 0);
    assert_null(p->sink->stamp);
    sq_plan_free(p);
    free(t.p);

    expect_err("target: http://127.0.0.1:8080\nsink: {stamp: scan}\n" HEAD_REST
               "      - request: { url: /x }\n",
               "2:7", "sink", "a sink needs a source");
    expect_err("target: http://127.0.0.1:8080\nsink: {http: '127.0.0.1:0', qos: 3}\n" HEAD_REST
               "      - request: { url: /x }\n",
               "2:34", "sink.qos", "expected a QoS of 0, 1 or 2, got '3'");
    expect_err("target: http://127.0.0.1:8080\nsink: {http: '127.0.0.1:0', settle: 2x}\n" HEAD_REST
               "      - request: { url: /x }\n",
               "2:37", "sink.settle", "expected a duration");
    expect_err("target: http://127.0.0.1:8080\nsink: {http: '127.0.0.1:0', topic: t}\n" HEAD_REST
               "      - request: { url: /x }\n",
               "2:29", "sink", "unknown key 'topic'");
    expect_err("target: http://127.0.0.1:8080\nsink: [http]\n" HEAD_REST
               "      - request: { url: /x }\n",
               "2:7", "sink", "a mapping");
}

/* subscribers: the quick face's --subscribers and its flags as keys: they load as written, and
 * a bad key, count, QoS or a key that applies to another kind of consumer is refused at its
 * place. */
static void subscribers_section(void **state)
{
    (void)state;
    static const char ok[] =
        "target: http://127.0.0.1:8080\n"
        "subscribers:\n"
        "  url: nats://127.0.0.1:4222/orders\n"
        "  count: 8\n"
        "  threads: 2\n"
        "  queue: workers\n"
        "  stream: ORDERS\n"
        "  batch: 50\n" HEAD_REST "      - publish: { url: nats://127.0.0.1:4222/orders }\n";
    struct text t = {0};
    put(&t, "%s", ok);
    struct sq_plan *p = load_ok(&t);
    assert_non_null(p->subscribers);
    assert_string_equal(p->subscribers->url, "nats://127.0.0.1:4222/orders");
    assert_int_equal(p->subscribers->count, 8);
    assert_int_equal(p->subscribers->threads, 2);
    assert_string_equal(p->subscribers->queue, "workers");
    assert_string_equal(p->subscribers->stream, "ORDERS");
    assert_int_equal(p->subscribers->batch, 50);
    assert_false(p->subscribers->push);
    assert_int_equal(p->subscribers->qos, -1);
    assert_int_equal(p->subscribers->loc.line, 3);
    sq_plan_free(p);
    free(t.p);
    /* the defaults: one subscriber, fan-out, core subscriptions; MQTT takes a QoS */
    t = (struct text){0};
    put(&t, "target: http://127.0.0.1:8080\nsubscribers: {url: 'mqtt://127.0.0.1:1883/a', qos: "
            "2}\n" HEAD_REST "      - publish: { url: mqtt://127.0.0.1:1883/a }\n");
    p = load_ok(&t);
    assert_int_equal(p->subscribers->count, 1);
    assert_int_equal(p->subscribers->qos, 2);
    assert_null(p->subscribers->queue);
    assert_null(p->subscribers->stream);
    sq_plan_free(p);
    free(t.p);

#define SUBS(x)                                                                                    \
    "target: http://127.0.0.1:8080\nsubscribers: " x "\n" HEAD_REST                                \
    "      - publish: { url: nats://127.0.0.1:4222/a }\n"
    expect_err(SUBS("{count: 2}"), "2:14", "subscribers", "missing key 'url'");
    expect_err(SUBS("{url: 'http://x/a'}"), "2:21", "subscribers.url",
               "expected nats://HOST[:PORT]/SUBJECT or mqtt://HOST[:PORT]/TOPIC");
    expect_err(SUBS("{url: 'nats://h/a', count: 0}"), "2:41", "subscribers.count",
               "expected a whole number from 1 to 100000, got '0'");
    expect_err(SUBS("{url: 'nats://h/a', count: 100001}"), "2:41", "subscribers.count",
               "expected a whole number from 1 to 100000");
    expect_err(SUBS("{url: 'nats://h/a', cont: 2}"), "2:34", "subscribers",
               "unknown key 'cont' (did you mean 'count'?)");
    expect_err(SUBS("{url: 'nats://h/a', qos: 1}"), "2:39", "subscribers.qos",
               "qos is for mqtt:// and mqtts:// URLs");
    expect_err(SUBS("{url: 'mqtt://h/a', qos: 3}"), "2:39", "subscribers.qos",
               "expected a QoS of 0, 1 or 2, got '3'");
    expect_err(SUBS("{url: 'mqtt://h/a', stream: S}"), "2:42", "subscribers.stream",
               "JetStream consumers are NATS's");
    expect_err(SUBS("{url: 'nats://h/a', batch: 10}"), "2:41", "subscribers.batch",
               "batch is a JetStream pull consumer's fetch size");
    expect_err(SUBS("{url: 'nats://h/a', push: true}"), "2:40", "subscribers.push",
               "push makes JetStream consumers push ones");
    expect_err(SUBS("{url: 'nats://h/a', stream: S, batch: 5, push: true}"), "2:61",
               "subscribers.push", "not with push");
    expect_err(SUBS("{url: 'nats://h/a', push: maybe}"), "2:40", "subscribers.push", "");
    expect_err(SUBS("[nats]"), "2:14", "subscribers", "a mapping");
#undef SUBS
}

static void hooks_and_auth(void **state)
{
    (void)state;
    setenv("SQ_TEST_SECRET", "s3cr3t", 1);
    char name[128];
    snprintf(name, sizeof(name), "%s/plan.yaml", tmpdir);
    static const char ok[] =
        "target: http://127.0.0.1:8080\n"
        "script: hooks.lua\n"
        "auth:\n"
        "  oauth2:\n"
        "    token_url: /oauth/token\n"
        "    client_id: me\n"
        "    client_secret: \"{{$env.SQ_TEST_SECRET}}\"\n"
        "    scope: a b\n"
        "    refresh_lead: 5s\n"
        "    client_auth: body\n"
        "scenarios:\n"
        "  s:\n"
        "    executor: constant-vus\n"
        "    duration: 1s\n"
        "    locals: [user]\n"
        "    flow:\n"
        "      - request: { url: \"/x?u={{user}}\", headers: { A: \"Bearer {{$oauth.token}}\" } }\n"
        "        before: f\n"
        "        after: f\n";
    struct sq_plan *p = NULL;
    struct sq_plan_error e;
    assert_int_equal(sq_plan_load_string(name, ok, strlen(ok), &p, &e), 0);
    char want[256];
    snprintf(want, sizeof(want), "%s/hooks.lua", tmpdir);
    assert_string_equal(p->script, want);
    const struct sq_plan_step *st = &p->scenarios[0].steps[0];
    assert_string_equal(st->before, "f");
    assert_string_equal(st->after, "f");
    assert_true(st->needs_body && st->needs_headers); /* an after hook sees the response */
    assert_int_equal(p->scenarios[0].nvars, 1);
    assert_string_equal(p->scenarios[0].vars[0], "user");
    const struct sq_plan_oauth2 *o = p->oauth2;
    assert_non_null(o);
    assert_string_equal(o->token_url, "/oauth/token");
    assert_string_equal(o->client_secret, "s3cr3t");
    assert_string_equal(o->scope, "a b");
    assert_true(o->client_auth_body);
    assert_int_equal(o->refresh_lead_ns, 5 * SQ_NS_PER_S);
    assert_int_equal(o->min_refresh_ns, SQ_NS_PER_S); /* the defaults */
    assert_int_equal(o->retry_ns, 500 * SQ_NS_PER_MS);
    assert_int_equal(o->retry_max_ns, 30 * SQ_NS_PER_S);
    assert_int_equal(o->timeout_ns, 10 * SQ_NS_PER_S);
    sq_plan_free(p);
    expect_err("script: hooks.lua\n" HEAD "      - ws: { connect: /ws }\n        before: f\n"
               "      - ws: { close: 1000 }\n",
               "9:17", "scenarios.s.flow[0].before",
               "'before': hooks run around request steps, not ws steps");

#define AUTH(x)                                                                                    \
    "target: http://127.0.0.1:8080\nauth:\n  oauth2:\n    token_url: /t\n    client_id: a\n" x     \
    "scenarios:\n  s:\n    executor: constant-vus\n    duration: 1s\n    flow:\n"                  \
    "      - request: { url: /x }\n"
    expect_err(AUTH(""), "4:5", "auth.oauth2", "missing key 'client_secret'");
    expect_err(AUTH("    client_secret: b\n    client_auth: form\n"), "7:18",
               "auth.oauth2.client_auth", "expected basic");
    expect_err(AUTH("    client_secret: \"{{$randomUUID}}\"\n"), "6:21",
               "auth.oauth2.client_secret", "the client secret is fixed for the run");
    expect_err(AUTH("    client_secret: b\n    retry_backoff: 1m\n"), "4:5", "auth.oauth2",
               "retry_backoff_max: must be at least retry_backoff");
    expect_err("target: http://127.0.0.1:8080\nauth:\n  oauth2:\n    token_url: ftp://x\n"
               "    client_id: a\n    client_secret: b\n"
               "scenarios:\n  s:\n    executor: constant-vus\n    duration: 1s\n    flow:\n"
               "      - request: { url: /x }\n",
               "4:16", "auth.oauth2.token_url", "expected an http:// or https:// URL");
    expect_err(HEAD "      - request: { url: /x, headers: { A: \"{{$oauth.token}}\" } }\n", "7:46",
               "scenarios.s.flow[0].request.headers.A",
               "'$oauth.token' needs an OAuth2 token source");
    expect_err(HEAD "      - request: { url: /x }\n        before: f\n", "8:17",
               "scenarios.s.flow[0].before", "the plan has no script");
    expect_err("target: http://127.0.0.1:8080\nscript: hooks.lua\n" HEAD_REST
               "      - request: { url: /x }\n        after: \"not-a-name\"\n",
               "9:17", "scenarios.s.flow[0].after", "is not a Lua function name");
    expect_err("target: http://127.0.0.1:8080\nscript: nope.lua\n" HEAD_REST
               "      - request: { url: /x }\n",
               "2:9", "script", "cannot read");
    expect_err("target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n"
               "    duration: 1s\n    locals: [1x]\n    flow:\n      - request: { url: /x }\n",
               "6:14", "scenarios.s.locals", "'1x' is not a variable name");
#undef AUTH
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unknown_keys),
        cmocka_unit_test(seed_key),
        cmocka_unit_test(setup_teardown),
        cmocka_unit_test(step_if),
        cmocka_unit_test(step_repeat),
        cmocka_unit_test(step_group),
        cmocka_unit_test(repeat_steps_not_a_list),
        cmocka_unit_test(custom_metrics),
        cmocka_unit_test(user_tags),
        cmocka_unit_test(step_batch),
        cmocka_unit_test(wrong_types),
        cmocka_unit_test(missing_keys),
        cmocka_unit_test(durations_and_executors),
        cmocka_unit_test(templates),
        cmocka_unit_test(evaluators),
        cmocka_unit_test(thresholds),
        cmocka_unit_test(group_index),
        cmocka_unit_test(yaml_syntax),
        cmocka_unit_test(full_plan_model),
        cmocka_unit_test(error_format),
        cmocka_unit_test(yaml_features),
        cmocka_unit_test(examples_load),
        cmocka_unit_test(many_keys),
        cmocka_unit_test(many_anchors),
        cmocka_unit_test(large_merges),
        cmocka_unit_test(many_names),
        cmocka_unit_test(limits),
        cmocka_unit_test(directories),
        cmocka_unit_test(string_map),
        cmocka_unit_test(hooks_and_auth),
        cmocka_unit_test(sink_section),
        cmocka_unit_test(subscribers_section),
        cmocka_unit_test(ws_steps),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
