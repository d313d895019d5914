/* tests/unit/test_planrun.c - face/planrun and plan/'s sq_plan_load_text: a plan given as text
 * (what the daemon gets) with its errors at file:line:col and its relative paths resolved against
 * the caller's directory or refused; the plan face's flags; the run a plan prepares and what it
 * refuses, with the CLI's messages; the abortOnFail watch; and a real run against `squall target`
 * giving the same result document whether the plan came from a file or from text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "face/flags.h"
#include "face/planrun.h"
#include "face/report.h"
#include "output/plan_json.h"
#include "stats/hist.h"

#include "target_proc.h"

static char tmpdir[64];

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int load_text(const char *text, const char *base, struct sq_plan **p, char *msg, size_t len)
{
    struct sq_plan_error e;
    int rc = sq_plan_load_text("pasted.yaml", text, strlen(text), base, p, &e);
    if (rc < 0)
        sq_plan_error_format(&e, msg, len);
    return rc;
}

static struct sq_plan *must_load(const char *text)
{
    struct sq_plan *p = NULL;
    char msg[800];
    if (load_text(text, NULL, &p, msg, sizeof(msg)) != 0)
        fail_msg("%s", msg);
    return p;
}

#define HEAD                                                                                       \
    "target: http://127.0.0.1:1\n"                                                                 \
    "scenarios:\n"                                                                                 \
    "  a:\n"                                                                                       \
    "    executor: shared-iterations\n"                                                            \
    "    vus: 1\n"                                                                                 \
    "    iterations: 1\n"                                                                          \
    "    flow:\n"

static void text_errors_have_line_and_col(void **state)
{
    (void)state;
    struct sq_plan *p = NULL;
    char msg[800];
    assert_int_equal(
        load_text(HEAD "      - request: { url: /fast, metod: GET }\n", NULL, &p, msg, sizeof(msg)),
        -SQ_EPARSE);
    assert_string_equal(msg, "pasted.yaml:8:32: scenarios.a.flow[0].request: unknown key 'metod' "
                             "(did you mean 'method'?)");
    assert_null(p);
    assert_int_equal(load_text("target: [\n", NULL, &p, msg, sizeof(msg)), -SQ_EPARSE);
    assert_memory_equal(msg, "pasted.yaml:", 12);
    /* the name is the plan's file for the result, too */
    p = must_load(HEAD "      - request: { url: /fast }\n");
    assert_string_equal(p->file, "pasted.yaml");
    sq_plan_free(p);
}

static void text_relative_paths(void **state)
{
    (void)state;
    write_file("body.json", "{\"k\": 1}");
    write_file("users.csv", "name\nann\n");
    static const char body_plan[] = HEAD "      - request: { url: /x, method: POST, file: "
                                         "body.json }\n";
    static const char feeder_plan[] = "data:\n  users: { csv: users.csv }\n" HEAD
                                      "      - request: { url: \"/u/{{users.name}}\" }\n";
    struct sq_plan *p = NULL;
    char msg[800];

    /* no base directory: refused where the path is written */
    assert_int_equal(load_text(body_plan, NULL, &p, msg, sizeof(msg)), -SQ_EPARSE);
    assert_string_equal(msg, "pasted.yaml:8:49: scenarios.a.flow[0].request.file: 'body.json' is "
                             "a relative path, and this plan was given as text with no directory "
                             "to resolve it against: use an absolute path");
    assert_int_equal(load_text(feeder_plan, NULL, &p, msg, sizeof(msg)), -SQ_EPARSE);
    assert_string_equal(msg, "pasted.yaml:2:17: data.users.csv: 'users.csv' is a relative path, "
                             "and this plan was given as text with no directory to resolve it "
                             "against: use an absolute path");

    /* with one: read from there */
    assert_int_equal(load_text(body_plan, tmpdir, &p, msg, sizeof(msg)), 0);
    assert_string_equal(p->scenarios[0].steps[0].req.body_file, "body.json");
    sq_plan_free(p);
    assert_int_equal(load_text(feeder_plan, tmpdir, &p, msg, sizeof(msg)), 0);
    assert_int_equal(p->nfeeders, 1);
    sq_plan_free(p);

    /* an absolute path needs no base */
    char abs_plan[1024];
    snprintf(abs_plan, sizeof(abs_plan), HEAD "      - request: { url: /x, file: %s/body.json }\n",
             tmpdir);
    assert_int_equal(load_text(abs_plan, NULL, &p, msg, sizeof(msg)), 0);
    sq_plan_free(p);

    /* sq_plan_load_string keeps resolving against its name's directory */
    char name[256];
    struct sq_plan_error e;
    snprintf(name, sizeof(name), "%s/plan.yaml", tmpdir);
    assert_int_equal(sq_plan_load_string(name, body_plan, strlen(body_plan), &p, &e), 0);
    sq_plan_free(p);
}

/* Parses `squall run` args (NULL-terminated, after "run"). */
static int parse_args(struct sq_planrun_opts *o, const char *const *args, char *err, size_t len)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"run";
    while (*args)
        argv[argc++] = (char *)*args++;
    argv[argc] = NULL;
    sq_planrun_opts_init(o);
    return sq_planrun_parse_argv(o, argc, argv, err, len);
}

static void flags(void **state)
{
    (void)state;
    static const struct {
        const char *args[8];
        const char *msg;
    } bad[] = {
        {{"-t", "0", "p.yaml", NULL}, "-t: '0' is not a thread count (1..1024)"},
        {{"--timeout", "0", "p.yaml", NULL},
         "--timeout: '0' is not a duration (e.g. 500ms, 10s, "
         "2m)"},
        {{"--resolve", "x", "p.yaml", NULL}, "--resolve: 'x' is not HOST:PORT:ADDR[,ADDR...]"},
        {{"--no-phases=1", "p.yaml", NULL}, "--no-phases takes no value"},
        {{"--bogus", "p.yaml", NULL}, "unknown flag '--bogus'"},
        {{"p.yaml", "--json", NULL}, "--json needs a value"},
        {{"--key", "k", "p.yaml", NULL}, "--key needs --cert"},
        {{NULL}, "no plan file given"},
        {{"p.yaml", "extra", NULL}, "one plan file only; unexpected 'extra'"},
    };
    char err[SQ_PREP_ERRLEN];
    struct sq_planrun_opts o;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse_args(&o, bad[i].args, err, sizeof(err)), -SQ_EUSAGE);
        assert_string_equal(err, bad[i].msg);
    }
    const char *help[] = {"-h", NULL};
    assert_int_equal(parse_args(&o, help, err, sizeof(err)), SQ_PLANRUN_HELP);
    const char *good[] = {"-t", "3", "--timeout", "2s", "--no-compression", "-q", "p.yaml", NULL};
    assert_int_equal(parse_args(&o, good, err, sizeof(err)), 0);
    assert_int_equal(o.threads, 3);
    assert_int_equal(o.timeout_ns, 2 * SQ_NS_PER_S);
    assert_true(o.no_compression);
    assert_true(o.quiet);
    assert_string_equal(o.plan, "p.yaml");
}

static void prepare(void **state)
{
    (void)state;
    char err[SQ_PREP_ERRLEN];
    struct sq_planrun_opts o;
    sq_planrun_opts_init(&o);
    o.threads = 2;
    struct sq_planrun r;
    struct sq_plan *p = must_load(
        "target: http://127.0.0.1:1\n"
        "defaults: { timeout: 3s }\n"
        "scenarios:\n"
        "  a: { executor: constant-vus, vus: 3, duration: 2s, flow: [ { request: { url: /a } } ] "
        "}\n"
        "  b: { executor: constant-arrival-rate, rate: 10, duration: 1s, preAllocatedVUs: 2,\n"
        "       startTime: 4s,\n"
        "       flow: [ { request: { url: /b } } ] }\n");
    assert_int_equal(sq_planrun_prepare(&r, p, &o, err, sizeof(err)), 0);
    assert_int_equal(r.cfg.nscens, 2);
    assert_string_equal(r.scens[1].name, "b");
    assert_int_equal(r.scens[1].start_ns, 4 * SQ_NS_PER_S);
    assert_int_equal(r.cfg.timeout_ns, 3 * SQ_NS_PER_S); /* the plan's, over --timeout's 10s */
    assert_int_equal(r.cfg.connect_timeout_ns, 5 * SQ_NS_PER_S);
    assert_int_equal(r.cfg.threads, 2);
    assert_int_equal(r.vus, 5);
    assert_true(r.open);
    assert_true(r.length_s > 4.99 && r.length_s < 5.01);
    assert_non_null(r.accept_encoding);
    assert_string_equal(r.net.addr, "127.0.0.1:1");
    assert_int_equal(r.cfg.naddrs, 1);
    sq_planrun_dispose(&r);
    o.no_compression = true;
    assert_int_equal(sq_planrun_prepare(&r, p, &o, err, sizeof(err)), 0);
    assert_null(r.accept_encoding);
    sq_planrun_dispose(&r);
    sq_plan_free(p);
}

static void prepare_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *plan, *msg;
        int rc;
    } bad[] = {
        /* the loader refuses such a target itself; the run's set-up checks it again */
        {"target: http://127.0.0.1:1\n"
         "scenarios: { a: { executor: shared-iterations, flow: [ { request: { url: /x } } ] } }\n",
         "pasted.yaml: target: bad URL 'ftp://127.0.0.1:1': unsupported URL scheme \"ftp\" (use "
         "http:// or https://)",
         -SQ_EPARSE},
        {HEAD "      - { name: x, request: { url: /x } }\n"
              "thresholds:\n"
              "  \"http_req_connecting{step:x}\": [\"p(95)<100\"]\n",
         NULL, -SQ_EPARSE},
        {"target: https://127.0.0.1:1\n"
         "scenarios: { a: { executor: shared-iterations, flow: [ { request: { url: /x } } ] } }\n",
         "--cacert: '/nonexistent/ca.pem': No such file or directory", -SQ_EUSAGE},
        {"target: http://nonexistent.invalid:1\n"
         "scenarios: { a: { executor: shared-iterations, flow: [ { request: { url: /x } } ] } }\n",
         NULL, -SQ_ERESOLVE},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[SQ_PREP_ERRLEN] = "", want[SQ_PREP_ERRLEN];
        struct sq_planrun_opts o;
        sq_planrun_opts_init(&o);
        o.net.tls.cacert = "/nonexistent/ca.pem";
        o.net.resolve[0] = "other.invalid:1:127.0.0.1";
        o.net.nresolve = 1;
        struct sq_plan *p = must_load(bad[i].plan);
        if (i == 0) {
            free(p->target);
            p->target = strdup("ftp://127.0.0.1:1");
        }
        struct sq_planrun r;
        assert_int_equal(sq_planrun_prepare(&r, p, &o, err, sizeof(err)), bad[i].rc);
        if (bad[i].msg) {
            assert_string_equal(err, bad[i].msg);
        } else if (bad[i].rc == -SQ_EPARSE) {
            /* the same words as the threshold check itself (and `squall validate`) */
            assert_int_equal(sq_thresholds_check(p, want, sizeof(want)), -SQ_EUSAGE);
            assert_string_equal(err, want);
            assert_memory_equal(err, "pasted.yaml:10:", 15);
        } else {
            assert_memory_equal(err, "dns: ", 5);
        }
        sq_planrun_dispose(&r);
        sq_plan_free(p);
    }
}

static void watch_aborts_once(void **state)
{
    (void)state;
    struct sq_plan *p = must_load(HEAD "      - request: { url: /x }\n"
                                       "thresholds:\n"
                                       "  http_req_failed:\n"
                                       "    - { threshold: \"rate < 0.1\", abortOnFail: true }\n");
    struct sq_planrun_watch w;
    assert_int_equal(sq_planrun_watch_init(&w, p), 0);
    struct sq_hist *h = NULL;
    assert_int_equal(sq_latency_hist_new(&h), 0);
    struct sq_second s = {.t_s = 1, .len_s = 1, .completed = 10};
    assert_false(sq_planrun_watch_tick(&w, &s, h));
    s = (struct sq_second){.t_s = 2, .len_s = 1, .completed = 5, .failed = 5, .http_failed = 5};
    assert_true(sq_planrun_watch_tick(&w, &s, h));
    assert_true(w.aborted);
    assert_int_equal(w.t.reqs, 20);
    s.t_s = 3;
    assert_false(sq_planrun_watch_tick(&w, &s, h)); /* once */
    assert_string_equal(w.why, "threshold http_req_failed: rate < 0.1 failed (value 0.25) "
                               "with abortOnFail");
    sq_hist_free(h);
    sq_planrun_watch_dispose(&w);
    sq_plan_free(p);
}

/* ---- a real run: the same document from a file and from text ---- */

/* The group's fixtures: a temporary directory for the plans' files, and the target. */
static int setup(void **state)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/sq-planrun-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    return start_target(state);
}

static int teardown(void **state)
{
    stop_target(state);
    static const char *const files[] = {"body.json", "users.csv", "run.yaml"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", tmpdir, files[i]);
        unlink(path);
    }
    rmdir(tmpdir);
    return 0;
}

static void same_document(void **state)
{
    (void)state;
    char text[1024], path[256], err[SQ_PREP_ERRLEN] = "";
    snprintf(text, sizeof(text),
             "target: http://127.0.0.1:%u\n"
             "scenarios:\n"
             "  a:\n"
             "    executor: shared-iterations\n"
             "    vus: 2\n"
             "    iterations: 30\n"
             "    flow:\n"
             "      - request: { url: /fast }\n"
             "        check: { status: 200 }\n"
             "thresholds:\n"
             "  http_req_failed: [\"rate < 0.01\"]\n",
             (unsigned)target_port);
    write_file("run.yaml", text);
    snprintf(path, sizeof(path), "%s/run.yaml", tmpdir);
    struct sq_plan *pf = NULL, *pt = NULL;
    struct sq_plan_error e;
    assert_int_equal(sq_plan_load(path, &pf, &e), 0);
    assert_int_equal(sq_plan_load_text(path, text, strlen(text), tmpdir, &pt, &e), 0);
    struct sq_planrun_opts o;
    sq_planrun_opts_init(&o);
    o.threads = 1;
    struct sq_planrun rf, rt;
    assert_int_equal(sq_planrun_prepare(&rf, pf, &o, err, sizeof(err)), 0);
    assert_int_equal(sq_planrun_prepare(&rt, pt, &o, err, sizeof(err)), 0);

    struct sq_planrun_watch w;
    assert_int_equal(sq_planrun_watch_init(&w, pt), 0);
    struct sq_result res = {0};
    const char *why = NULL;
    assert_int_equal(sq_run(&rt.cfg, &res, &why), 0);
    assert_int_equal(res.c.completed, 30);
    struct sq_th_verdicts vf = {0}, vt = {0};
    assert_int_equal(sq_planrun_finish(&rt, &w, &res, &vt), 0);
    assert_int_equal(sq_planrun_finish(&rf, NULL, &res, &vf), 0);
    assert_false(vt.failed);
    assert_false(res.aborted);

    json_t *df = sq_planrun_doc(&rf, &res, &vf), *dt = sq_planrun_doc(&rt, &res, &vt);
    assert_non_null(df);
    assert_non_null(dt);
    assert_true(json_equal(df, dt));
    const json_t *cfg = json_object_get(dt, "config");
    assert_string_equal(json_string_value(json_object_get(cfg, "url")), path);
    assert_string_equal(json_string_value(json_object_get(cfg, "method")), "run");
    assert_non_null(json_object_get(dt, "thresholds"));
    json_decref(df);
    json_decref(dt);
    sq_th_verdicts_dispose(&vf);
    sq_th_verdicts_dispose(&vt);
    sq_planrun_watch_dispose(&w);
    sq_result_dispose(&res);
    sq_planrun_dispose(&rf);
    sq_planrun_dispose(&rt);
    sq_plan_free(pf);
    sq_plan_free(pt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text_errors_have_line_and_col),
        cmocka_unit_test(text_relative_paths),
        cmocka_unit_test(flags),
        cmocka_unit_test(prepare),
        cmocka_unit_test(prepare_refusals),
        cmocka_unit_test(watch_aborts_once),
        cmocka_unit_test(same_document),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
