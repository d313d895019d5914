/* cli/run_cmd.c - the plan face: `squall run PLAN` and `squall validate PLAN`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/netopts.h"
#include "engine/flow.h"
#include "engine/run.h"
#include "engine/watchopt.h"
#include "engine/verdict.h"
#include "http/decode.h"
#include "http/url.h"
#include "net/sock.h"
#include "output/json.h"
#include "output/plan_json.h"
#include "output/progress.h"
#include "plan/plan.h"
#include "stats/hist.h"

#define FACE "squall run"

static const char run_usage[] =
    "usage: squall run PLAN [flags]      run a YAML plan (docs/plans.md)\n"
    "       squall validate PLAN         check a plan and print what it would run\n"
    "\n"
    "  -t, --threads N         worker threads per scenario (default: online CPUs)\n"
    "      --timeout D         request timeout unless the plan sets one (default 10s)\n"
    "      --connect-timeout D connect timeout (default 5s)\n"
    "      --json FILE         write the result document (- for stdout)\n"
    "      --html FILE         write a self-contained HTML report\n"
    "      --no-compression    do not offer Accept-Encoding (compressed bodies are still decoded)\n"
    "      --no-phases         do not record per-phase timings\n"
    "      --watch PID         sample that process and its children each second (CPU, RSS,\n"
    "                          threads, open files, switches; repeatable)\n"
    "      --watch-name NAME   the same for every process named NAME (repeatable)\n"
    "  -q, --quiet             no progress line, no summary\n"
    "  -h, --help              this help\n";

static const char run_usage_tail[] =
    "\n"
    "exit codes: 0 done, 1 nothing succeeded or an internal error, 2 bad flags or plan,\n"
    "99 thresholds failed\n";

static void print_usage(FILE *f)
{
    fputs(run_usage, f);
    fputs(sq_cli_net_usage, f);
    fputs(run_usage_tail, f);
}

/* Loads the plan or prints why not. */
static int load(const char *path, struct sq_plan **p)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "squall: %s: cannot read the plan: it is a directory\n", path);
        return SQ_EXIT_USAGE;
    }
    struct sq_plan_error err;
    memset(&err, 0, sizeof(err));
    int rc = sq_plan_load(path, p, &err);
    if (rc < 0) {
        char msg[1024];
        sq_plan_error_format(&err, msg, sizeof(msg));
        fprintf(stderr, "squall: %s\n", msg);
        return SQ_EXIT_USAGE;
    }
    return 0;
}

int sq_cli_validate(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_usage(stdout);
            return SQ_EXIT_OK;
        }
        if (a[0] == '-' && a[1] != '\0')
            return sq_cli_usage_error("squall validate", "unknown flag '%s'", a);
        if (path)
            return sq_cli_usage_error("squall validate", "one plan file only; unexpected '%s'", a);
        path = a;
    }
    if (!path)
        return sq_cli_usage_error("squall validate", "no plan file given");
    struct sq_plan *p = NULL;
    int rc = load(path, &p);
    if (rc)
        return rc;
    char err[512];
    if (sq_thresholds_check(p, err, sizeof(err)) < 0) {
        fprintf(stderr, "squall: %s\n", err);
        sq_plan_free(p);
        return SQ_EXIT_USAGE;
    }
    sq_plan_describe(p, stdout);
    printf("plan OK\n");
    sq_plan_free(p);
    return SQ_EXIT_OK;
}

/* The main thread's per-second work: progress, and abortOnFail thresholds on the totals. */
struct ticker {
    struct sq_progress progress;
    bool show;
    const struct sq_plan *plan;
    struct sq_live_totals t;
    volatile int *stop; /* the run's stop flag: an abortOnFail threshold sets it */
    bool aborted;
    char why[256];
};

static void on_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                    const struct sq_hist *hu)
{
    SQ_UNUSED(hu);
    struct ticker *t = ud;
    if (t->show)
        sq_progress_tick(&t->progress, s);
    sq_hist_merge(t->t.dur, h);
    t->t.reqs += s->completed + s->failed;
    t->t.http_failed += s->http_failed;
    t->t.checks_passed += s->checks_passed;
    t->t.checks_failed += s->checks_failed;
    t->t.iterations += s->iterations;
    t->t.dropped += s->dropped;
    t->t.bytes_sent += s->bytes_sent;
    t->t.bytes_received += s->bytes_received;
    t->t.elapsed_s = s->t_s;
    if (!t->aborted && sq_thresholds_should_abort(t->plan, &t->t, t->why, sizeof(t->why))) {
        t->aborted = true;
        *t->stop = 1;
    }
}

struct run_opts {
    const char *plan, *json, *html;
    uint64_t threads;
    int64_t timeout_ns, connect_timeout_ns;
    bool quiet, no_compression, no_phases;
    struct sq_cli_net net;      /* DNS and TLS flags (cli/netopts.h) */
    struct sq_watch_opts watch; /* --watch, --watch-name */
};

static int parse(int argc, char **argv, struct run_opts *o)
{
    static const struct option longs[] = {
        {"threads", required_argument, NULL, 't'},
        {"timeout", required_argument, NULL, 'T'},
        {"connect-timeout", required_argument, NULL, 'C'},
        {"json", required_argument, NULL, 'j'},
        {"html", required_argument, NULL, 'H'},
        {"quiet", no_argument, NULL, 'q'},
        {"no-compression", no_argument, NULL, 'Z'},
        {"no-phases", no_argument, NULL, 'P'},
        {"watch", required_argument, NULL, 'W'},
        {"watch-name", required_argument, NULL, 'N'},
        SQ_CLI_NET_LONG_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int ch;
    int li = -1;
    while ((ch = getopt_long(argc, argv, ":t:qhk", longs, &li)) != -1) {
        char name[48];
        const char *flag = sq_cli_flag_name(longs, &li, ch, argv, name, sizeof(name));
        int taken = sq_cli_net_flag(&o->net, ch, flag, optarg);
        if (taken == 1)
            continue;
        if (taken)
            return taken;
        switch (ch) {
        case 't':
            if (sq_parse_u64(optarg, 1, 1024, 0, &o->threads) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a thread count (1..1024)", flag,
                                          optarg);
            break;
        case 'T':
            if (sq_parse_duration(optarg, SQ_NS_PER_S, &o->timeout_ns) < 0 || o->timeout_ns <= 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)",
                                          flag, optarg);
            break;
        case 'C':
            if (sq_parse_duration(optarg, SQ_NS_PER_S, &o->connect_timeout_ns) < 0 ||
                o->connect_timeout_ns <= 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)",
                                          flag, optarg);
            break;
        case 'j':
            o->json = optarg;
            break;
        case 'H':
            o->html = optarg;
            break;
        case 'q':
            o->quiet = true;
            break;
        case 'Z':
            o->no_compression = true;
            break;
        case 'P':
            o->no_phases = true;
            break;
        case 'W':
        case 'N': {
            char err[512];
            if (sq_watch_opts_add(&o->watch, ch == 'N', flag, optarg, err, sizeof(err)) < 0)
                return sq_cli_usage_error(FACE, "%s", err);
            break;
        }
        case 'h':
            print_usage(stdout);
            return SQ_EXIT_DONE;
        default:
            return sq_cli_flag_error(FACE, longs, ch, flag);
        }
    }
    int rc = sq_cli_net_check(&o->net);
    if (rc)
        return rc;
    if (optind >= argc)
        return sq_cli_usage_error(FACE, "no plan file given");
    if (optind < argc - 1)
        return sq_cli_usage_error(FACE, "one plan file only; unexpected '%s'", argv[optind + 1]);
    o->plan = argv[optind];
    return 0;
}

int sq_cli_run(int argc, char **argv)
{
    struct run_opts o = {.timeout_ns = 10 * SQ_NS_PER_S,
                         .connect_timeout_ns = 5 * SQ_NS_PER_S,
                         .net = {.face = FACE}};
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
    struct sq_plan *p = NULL;
    rc = load(o.plan, &p);
    if (rc)
        return rc;

    int exit_code = SQ_EXIT_FAIL;
    struct sq_url url = {0};
    struct sq_run_scen *scens = NULL;
    struct sq_result res = {0};
    struct sq_th_verdicts verdicts = {0};
    struct ticker tk = {.plan = p};
    struct sq_tls_client *tls = NULL;
    struct sq_watch *watch = NULL;
    struct sq_cli_outputs outs = {
        .face = FACE, .json_path = o.json, .html_path = o.html, .quiet = o.quiet};
    const char *why = NULL;
    char err[512];

    if (sq_thresholds_check(p, err, sizeof(err)) < 0) {
        fprintf(stderr, "squall: %s\n", err);
        exit_code = SQ_EXIT_USAGE;
        goto out;
    }
    rc = sq_url_parse(p->target, &url, &why);
    if (rc < 0) {
        fprintf(stderr, "squall: %s: target: bad URL '%s': %s\n", o.plan, p->target,
                why ? why : sq_strerror(rc));
        exit_code = SQ_EXIT_USAGE;
        goto out;
    }
    const char *accept = o.no_compression ? NULL : sq_accept_encoding_default();
    scens = calloc(p->nscenarios ? p->nscenarios : 1, sizeof(*scens));
    if (!scens)
        goto out;
    uint64_t vus = 0;
    for (size_t i = 0; i < p->nscenarios; i++) {
        struct sq_flow *f = NULL;
        rc = sq_flow_compile(p, &p->scenarios[i], &url, accept, &f, err, sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "squall: %s: scenario '%s': %s\n", o.plan, p->scenarios[i].name, err);
            exit_code = SQ_EXIT_USAGE;
            goto out;
        }
        scens[i].name = p->scenarios[i].name;
        scens[i].exec = p->scenarios[i].exec;
        scens[i].start_ns = p->scenarios[i].start_ns;
        scens[i].flow = f;
        vus += sq_exec_max_vus(&scens[i].exec);
    }
    struct sq_run_config cfg = {
        .timeout_ns = p->default_timeout_ns ? p->default_timeout_ns : o.timeout_ns,
        .connect_timeout_ns = o.connect_timeout_ns,
        .scens = scens,
        .nscens = (uint32_t)p->nscenarios,
        .phases = !o.no_phases,
    };
    cfg.threads = sq_cli_threads(o.threads);
    rc = sq_watch_opts_build(&o.watch, &watch, err, sizeof(err));
    if (rc < 0) {
        exit_code = rc == -SQ_EUSAGE ? sq_cli_usage_error(FACE, "%s", err) : SQ_EXIT_FAIL;
        goto out;
    }
    cfg.watch = watch;
    rc = sq_cli_net_setup(&o.net, &url, &cfg, &tls);
    if (rc != 0) {
        exit_code = rc;
        goto out;
    }
    if ((rc = sq_cli_raise_nofile(vus, "VUs")) != 0 || (rc = sq_cli_outputs_open(&outs)) != 0) {
        exit_code = rc;
        goto out;
    }
    double length_s = 0;
    bool open = false;
    for (size_t i = 0; i < p->nscenarios; i++) {
        double l = (double)(scens[i].start_ns + sq_exec_length_ns(&scens[i].exec)) / 1e9;
        if (l > length_s)
            length_s = l;
        open |= sq_exec_is_open(&scens[i].exec);
    }
    sq_cli_progress_init(&tk.progress, open, length_s);
    tk.show = !o.quiet;
    if (sq_latency_hist_new(&tk.t.dur) < 0)
        goto out;
    cfg.on_tick = on_tick;
    cfg.tick_ud = &tk;

    cfg.stop = tk.stop = sq_cli_signals_begin();
    rc = sq_run(&cfg, &res, &why);
    sq_cli_signals_end();
    sq_progress_finish(&tk.progress);
    if (rc < 0) {
        fprintf(stderr, "squall: %s: %s\n", why, sq_strerror(rc));
        goto out;
    }
    if (sq_thresholds_eval(p, &res, &verdicts) < 0)
        goto out;
    char addr[80];
    sq_addr_format(&cfg.addrs[0], addr, sizeof(addr));
    struct sq_report_info info = {
        .url = o.plan,
        .method = "run",
        .target_addr = addr,
        .exec = &scens[0].exec,
        .threads = res.threads,
        .timeout_ns = cfg.timeout_ns,
        .connect_timeout_ns = cfg.connect_timeout_ns,
        .accept_encoding = accept,
    };
    if (tk.aborted) {
        /* The run stopped itself: say which threshold, not "stopped by request". */
        res.aborted = true;
        snprintf(res.abort_reason, sizeof(res.abort_reason), "%.159s", tk.why);
    }
    json_t *doc = sq_report_json_doc(&info, &res);
    if (!doc || sq_report_plan_sections(doc, p, &res, &verdicts) < 0) {
        json_decref(doc);
        fprintf(stderr, "squall: out of memory building the result\n");
        goto out;
    }
    sq_cli_render(&outs, doc);
    json_decref(doc);
    if (tk.aborted)
        fprintf(stderr, "squall: run stopped: %s\n", tk.why);
    if (verdicts.failed || tk.aborted) {
        fprintf(stderr, "squall: thresholds failed\n");
        exit_code = SQ_EXIT_THRESHOLDS;
    } else {
        exit_code = sq_cli_run_status(&res);
    }
out:
    sq_cli_outputs_close(&outs);
    sq_hist_free(tk.t.dur);
    sq_th_verdicts_dispose(&verdicts);
    sq_result_dispose(&res);
    if (scens)
        for (size_t i = 0; i < p->nscenarios; i++)
            sq_flow_free((struct sq_flow *)scens[i].flow);
    free(scens);
    sq_url_dispose(&url);
    sq_tls_client_free(tls);
    sq_watch_free(watch);
    sq_plan_free(p);
    return exit_code;
}
