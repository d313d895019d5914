/* cli/run_cmd.c - the plan face: `squall run PLAN` and `squall validate PLAN`. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/netopts.h"
#include "engine/flow.h"
#include "engine/run.h"
#include "engine/verdict.h"
#include "http/decode.h"
#include "http/url.h"
#include "net/sock.h"
#include "output/doc.h"
#include "output/html.h"
#include "output/report.h"
#include "output/series.h"
#include "plan/plan.h"
#include "stats/hist.h"

static volatile int stop_flag;

static void on_sigint(int sig)
{
    SQ_UNUSED(sig);
    if (stop_flag) {
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);
    }
    stop_flag = 1;
}

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

static int usage_error(const char *fmt, const char *a)
{
    fprintf(stderr, "squall: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n(squall run --help for usage)\n");
    return SQ_EXIT_USAGE;
}

/* Loads the plan or prints why not. */
static int load(const char *path, struct sq_plan **p)
{
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
    if (argc != 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_usage(argc == 2 ? stdout : stderr);
        return argc == 2 ? SQ_EXIT_OK : SQ_EXIT_USAGE;
    }
    struct sq_plan *p = NULL;
    int rc = load(argv[1], &p);
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
        stop_flag = 1;
    }
}

struct run_opts {
    const char *plan, *json, *html;
    uint64_t threads;
    int64_t timeout_ns, connect_timeout_ns;
    bool quiet, no_compression, no_phases;
    struct sq_cli_net net; /* DNS and TLS flags (cli/netopts.h) */
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
        SQ_CLI_NET_LONG_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int ch;
    int li = -1;
    while ((ch = getopt_long(argc, argv, ":t:qhk", longs, &li)) != -1) {
        char flag[40];
        if (li >= 0)
            snprintf(flag, sizeof(flag), "--%s", longs[li].name);
        else
            snprintf(flag, sizeof(flag), "-%c", ch > 0 && ch < 128 ? ch : '?');
        li = -1;
        int taken = sq_cli_net_flag(&o->net, ch, flag, optarg);
        if (taken == 1)
            continue;
        if (taken)
            return taken;
        switch (ch) {
        case 't':
            if (sq_parse_u64(optarg, 1, 1024, 0, &o->threads) < 0)
                return usage_error("-t: expected a thread count from 1 to 1024, got '%s'", optarg);
            break;
        case 'T':
            if (sq_parse_duration(optarg, SQ_NS_PER_S, &o->timeout_ns) < 0 || o->timeout_ns <= 0)
                return usage_error("--timeout: expected a duration like 5s, got '%s'", optarg);
            break;
        case 'C':
            if (sq_parse_duration(optarg, SQ_NS_PER_S, &o->connect_timeout_ns) < 0 ||
                o->connect_timeout_ns <= 0)
                return usage_error("--connect-timeout: expected a duration like 5s, got '%s'",
                                   optarg);
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
        case 'h':
            print_usage(stdout);
            return SQ_EXIT_DONE;
        case ':':
            return usage_error("%s needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown flag '%s'", argv[optind - 1]);
        }
    }
    int rc = sq_cli_net_check(&o->net);
    if (rc)
        return rc;
    if (optind != argc - 1)
        return usage_error("%s", optind >= argc ? "run needs one plan file" : "one plan file only");
    o->plan = argv[optind];
    return 0;
}

int sq_cli_run(int argc, char **argv)
{
    struct run_opts o = {.timeout_ns = 10 * SQ_NS_PER_S, .connect_timeout_ns = 5 * SQ_NS_PER_S};
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
    FILE *jf = NULL, *hf = NULL;
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
        .stop = &stop_flag,
        .scens = scens,
        .nscens = (uint32_t)p->nscenarios,
        .phases = !o.no_phases,
    };
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cfg.threads = (uint32_t)(o.threads ? o.threads : (uint64_t)(cpus > 0 ? cpus : 1));
    rc = sq_cli_net_setup(&o.net, &url, &cfg, &tls);
    if (rc != 0) {
        exit_code = rc;
        goto out;
    }
    uint64_t have = 0;
    if (sq_raise_nofile(vus + 64, &have) < 0) {
        fprintf(stderr, "squall: %llu VUs need %llu open files but the limit is %llu\n",
                (unsigned long long)vus, (unsigned long long)(vus + 64), (unsigned long long)have);
        goto out;
    }
    if (o.json) {
        jf = strcmp(o.json, "-") == 0 ? stdout : fopen(o.json, "w");
        if (!jf) {
            exit_code = usage_error("--json: cannot write '%s'", o.json);
            goto out;
        }
    }
    if (o.html && !(hf = fopen(o.html, "w"))) {
        exit_code = usage_error("--html: cannot write '%s'", o.html);
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
    tk.progress = (struct sq_progress){.f = stderr,
                                       .tty = isatty(STDERR_FILENO),
                                       .color = isatty(STDERR_FILENO) && !getenv("NO_COLOR"),
                                       .every_s = 10,
                                       .open = open,
                                       .length_s = length_s};
    tk.show = !o.quiet;
    if (sq_latency_hist_new(&tk.t.dur) < 0)
        goto out;
    cfg.on_tick = on_tick;
    cfg.tick_ud = &tk;

    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_sigint);
    rc = sq_run(&cfg, &res, &why);
    signal(SIGINT, SIG_DFL);
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
    FILE *tf = jf == stdout ? stderr : stdout;
    if (!o.quiet && sq_report_summary_json(doc, tf) < 0)
        fprintf(stderr, "squall: could not print the summary\n");
    if (jf && sq_report_json_write(jf, doc) < 0)
        fprintf(stderr, "squall: --json: write failed: %s\n", strerror(errno));
    if (hf && sq_report_html(doc, hf) < 0)
        fprintf(stderr, "squall: --html: write failed: %s\n", strerror(errno));
    json_decref(doc);
    if (tk.aborted)
        fprintf(stderr, "squall: run stopped: %s\n", tk.why);
    if (verdicts.failed || tk.aborted) {
        fprintf(stderr, "squall: thresholds failed\n");
        exit_code = SQ_EXIT_THRESHOLDS;
    } else if (res.c.completed == 0) {
        fprintf(stderr, "squall: no request succeeded%s%s\n", res.aborted ? ": " : "",
                res.aborted ? res.abort_reason : "");
        exit_code = SQ_EXIT_FAIL;
    } else {
        exit_code = SQ_EXIT_OK;
    }
out:
    if (jf && jf != stdout)
        fclose(jf);
    if (hf)
        fclose(hf);
    sq_hist_free(tk.t.dur);
    sq_th_verdicts_dispose(&verdicts);
    sq_result_dispose(&res);
    if (scens)
        for (size_t i = 0; i < p->nscenarios; i++)
            sq_flow_free((struct sq_flow *)scens[i].flow);
    free(scens);
    sq_url_dispose(&url);
    sq_tls_client_free(tls);
    sq_plan_free(p);
    return exit_code;
}
