/* cli/run_cmd.c - the plan face: `squall run PLAN` and `squall validate PLAN`. The flags, the
 * run's set-up and the thresholds are face/planrun.h (shared with the daemon); here: the help,
 * loading the file, printing what the engine refused, signals, the progress line and the
 * end-of-run outputs. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/file.h"
#include "cli/common.h"
#include "cli/sinkrun.h"
#include "cli/dist.h"
#include "face/flags.h"
#include "face/hookcheck.h"
#include "face/planrun.h"
#include "face/report.h"
#include "engine/run.h"
#include "result/verdict.h"
#include "output/json.h"
#include "output/plan_json.h"
#include "output/progress.h"
#include "plan/plan.h"

#define FACE "squall run"

static const char run_usage[] =
    "usage: squall run PLAN [flags]      run a YAML plan (docs/plans.md)\n"
    "       squall validate PLAN...      check plans and print what each would run\n"
    "\n"
    "  -t, --threads N         worker threads per scenario (default: online CPUs)\n"
    "      --timeout D         request timeout unless the plan sets one (default 10s)\n"
    "      --connect-timeout D connect timeout (default 5s)\n"
    "      --json FILE         write the result document (- for stdout)\n"
    "      --html FILE         write a self-contained HTML report\n"
    "      --out csv=FILE      write the per-second series as CSV while the run goes\n"
    "      --out hdr=FILE      write HdrHistogram's interval log (one histogram a second)\n"
    "      --out ndjson=FILE   write one JSON line per request (scenario and step named)\n"
    "      --sample F          with --out ndjson: record this share of requests (0 < F <= 1)\n"
    "      --http2             every scenario over HTTP/2 (h2c for http://, ALPN h2 for\n"
    "                          https://); a scenario may say `protocol: h2` on its own\n"
    "      --streams N         HTTP/2 scenarios: streams (VUs) per connection (default 1)\n"
    "      --no-compression    do not offer Accept-Encoding (compressed bodies are still decoded)\n"
    "      --no-phases         do not record per-phase timings\n"
    "      --name NAME         the run's name in the result (over the plan's name:)\n"
    "      --seed N            replay the random values (over the plan's seed:; default drawn\n"
    "                          from the OS, printed on the summary's Seed line and in the JSON)\n"
    "      --percentiles LIST  the latency percentiles reported (default 50,90,95,99,99.9)\n"
    "      --watch PID         sample that process and its children each second (CPU, RSS,\n"
    "                          threads, open files, switches; repeatable)\n"
    "      --watch-name NAME   the same for every process named NAME (repeatable)\n"
    "      --sample-responses N  keep N exchanges per status class and error kind, at random\n"
    "                          (request, response head, 4 KiB of body; default 5, 0: off)\n"
    "      --no-redact         keep credentials in the kept exchanges (as the plan's\n"
    "                          redact: false; default: Authorization, Cookie..., the plan's\n"
    "                          secrets and its OAuth2 tokens redacted)\n"
    "  -q, --quiet             no progress line, no summary\n"
    "  -h, --help              this help\n";

static void print_usage(FILE *f)
{
    fputs(run_usage, f);
    fputs(sq_netopts_usage, f);
    fputs(sq_distopts_usage, f);
    fputs("\nSIGINT or SIGTERM stops the run gracefully (in-flight iterations finish for their\n"
          "gracefulStop, at most 5 s) and still writes every output.\n\n",
          f);
    sq_cli_exit_codes(f);
}

/* Loads the plan or prints why not ("squall: FILE: cannot read the plan: it is a directory",
 * "squall: FILE:LINE:COL: key: why"). */
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

/* Validates one plan: prints what it would run and "plan OK", or why not. Returns the exit
 * status for it alone. */
static int validate_one(const char *path, bool named)
{
    if (named)
        printf("== %s\n", path);
    struct sq_plan *p = NULL;
    int rc = load(path, &p);
    if (rc)
        return rc;
    if ((rc = sq_cli_sink_plan_check(p)) != 0) {
        sq_plan_free(p);
        return rc;
    }
    char err[512];
    if (sq_thresholds_check(p, err, sizeof(err)) < 0 ||
        sq_plan_hooks_check(p, err, sizeof(err)) < 0) {
        fprintf(stderr, "squall: %s\n", err);
        sq_plan_free(p);
        return SQ_EXIT_USAGE;
    }
    sq_plan_describe(p, stdout);
    printf("plan OK\n");
    sq_plan_free(p);
    return SQ_EXIT_OK;
}

int sq_cli_validate(int argc, char **argv)
{
    int nplans = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_usage(stdout);
            return SQ_EXIT_OK;
        }
        if (strcmp(a, "--") == 0)
            break;
        if (a[0] == '-' && a[1] != '\0')
            return sq_cli_usage_error("squall validate", "unknown flag '%s'", a);
        nplans++;
    }
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0)
            nplans += argc - i - 1;
    if (!nplans)
        return sq_cli_usage_error("squall validate", "no plan file given");
    /* Each plan on its own: one bad plan does not hide what the others say. */
    int worst = SQ_EXIT_OK, bad = 0;
    bool after_dashes = false;
    for (int i = 1; i < argc; i++) {
        if (!after_dashes && strcmp(argv[i], "--") == 0) {
            after_dashes = true;
            continue;
        }
        if (!after_dashes && argv[i][0] == '-' && argv[i][1] != '\0')
            continue;
        int rc = validate_one(argv[i], nplans > 1);
        if (rc != SQ_EXIT_OK) {
            bad++;
            if (worst == SQ_EXIT_OK || rc == SQ_EXIT_USAGE)
                worst = rc;
        }
        if (nplans > 1 && i + 1 < argc)
            putchar('\n');
    }
    if (nplans > 1)
        printf("%d of %d plans OK\n", nplans - bad, nplans);
    return worst;
}

/* The main thread's per-second work: progress, and abortOnFail thresholds on the totals. */
struct ticker {
    struct sq_progress progress;
    bool show;
    struct sq_planrun_watch w;
    volatile int *stop;       /* the run's stop flag: an abortOnFail threshold sets it */
    struct sq_cli_series out; /* --out files */
};

static void on_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                    const struct sq_hist *hu)
{
    SQ_UNUSED(hu);
    struct ticker *t = ud;
    if (t->show)
        sq_progress_tick(&t->progress, s);
    sq_cli_series_tick(&t->out, s, h);
    if (sq_planrun_watch_tick(&t->w, s, h))
        *t->stop = 1;
}

/* What the agents run: this face's arguments and the plan's text (its data files must be at the
 * same paths on the agents; docs/distributed.md). */
static json_t *plan_job(int argc, char **argv, const char *path, uint64_t seed)
{
    char *text = NULL, real[PATH_MAX];
    size_t len = 0;
    if (sq_file_read(path, 64u << 20, &text, &len) < 0) {
        fprintf(stderr, "squall: %s: cannot read the plan to send it\n", path);
        return NULL;
    }
    if (!realpath(path, real))
        snprintf(real, sizeof(real), "%s", path);
    json_t *args = sq_cli_dist_args(argc, argv, 1, seed);
    json_t *jt = json_stringn(text, len);
    free(text);
    if (!args || !jt) {
        json_decref(args);
        json_decref(jt);
        fprintf(stderr, "squall: %s: the plan is not UTF-8 text\n", path);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:{s:s, s:o, s:s}}", "face", "plan", "args", args, "plan", "name",
                     path, "text", jt, "dir", dirname(real));
}

int sq_cli_run(int argc, char **argv)
{
    char err[SQ_PREP_ERRLEN];
    struct sq_planrun_opts o;
    sq_planrun_opts_init(&o);
    /* the command line as typed ("squall run PLAN ..."; main passed argv + 1, so argv[-1] is
     * the program): getopt reorders argv */
    char **typed = sq_cli_argv_copy(argc + 1, argv - 1);
    int rc = sq_planrun_parse_argv(&o, argc, argv, err, sizeof(err));
    if (rc == SQ_PLANRUN_HELP)
        print_usage(stdout);
    if (rc) {
        free(typed);
        return rc > 0 ? SQ_EXIT_OK : sq_cli_prep_error(FACE, rc, err);
    }
    struct sq_plan *p = NULL;
    rc = load(o.plan, &p);
    if (rc == 0 && (rc = sq_cli_sink_plan_check(p)) != 0)
        sq_plan_free(p);
    if (rc) {
        free(typed);
        return rc;
    }

    int exit_code = SQ_EXIT_FAIL;
    struct sq_planrun run;
    struct sq_result res = {0};
    struct sq_th_verdicts verdicts = {0};
    struct ticker tk = {0};
    struct sq_cluster_report rep = {0};
    struct sq_cli_dist dist = {0};
    json_t *job = NULL;
    struct sq_cli_outputs outs = {
        .face = FACE, .json_path = o.json_path, .html_path = o.html_path, .quiet = o.quiet};
    const char *why = NULL;
    int sig = 0;
    bool forced = false;

    rc = sq_planrun_prepare(&run, p, &o, err, sizeof(err));
    if (rc == 0 && !o.dist.agents) /* on agents, each raises its own */
        rc = sq_net_raise_nofile(run.vus, "VUs", err, sizeof(err));
    if (rc == 0 && !o.dist.agents) /* auth.oauth2's first token (each agent fetches its own) */
        rc = sq_planrun_begin(&run, err, sizeof(err));
    if (rc < 0) {
        exit_code = sq_cli_prep_error(FACE, rc, err);
        goto out;
    }
    if ((rc = sq_cli_outputs_open(&outs)) != 0 ||
        (rc = sq_cli_series_open(&tk.out, FACE, o.csv_path, o.hdr_path, o.ndjson_path, o.sample,
                                 &run.cfg)) != 0) {
        exit_code = rc;
        goto out;
    }
    if (tk.out.nd.f && sq_ndjson_plan_labels(&tk.out.nd, p) < 0) {
        fprintf(stderr, "squall: out of memory\n");
        goto out;
    }
    sq_cli_progress_init(&tk.progress, run.open, run.length_s);
    tk.show = !o.quiet;
    if (sq_planrun_watch_init(&tk.w, p) < 0)
        goto out;
    run.cfg.on_tick = on_tick;
    run.cfg.tick_ud = &tk;

    struct sq_sink *sink = NULL;
    if (p->sink) {
        struct sq_sink_beside_opts so;
        char http[300];
        sq_sink_beside_plan_opts(p, &so, http, sizeof(http));
        run.cfg.run_id = sq_run_new_id();
        if ((rc = sq_cli_sink_begin(FACE, &so, run.cfg.run_id, &sink)) != 0) {
            exit_code = rc;
            goto out;
        }
    }
    run.cfg.stop = tk.stop = sq_cli_signals_begin();
    if (o.dist.agents) {
        /* The plan on agents: validated above, before anything is sent anywhere. */
        int64_t grace = 0;
        for (uint32_t i = 0; i < run.cfg.nscens; i++)
            if (run.cfg.scens[i].exec.graceful_stop_ns > grace)
                grace = run.cfg.scens[i].exec.graceful_stop_ns;
        job = plan_job(argc, argv, o.plan, run.cfg.seed);
        struct sq_cli_dist x = {.face = FACE,
                                .d = &o.dist,
                                .job = job,
                                .open = run.open,
                                .length_ns = (int64_t)(run.length_s * 1e9) + grace,
                                .on_tick = on_tick,
                                .tick_ud = &tk,
                                .stop = tk.stop,
                                .progress = tk.show ? &tk.progress : NULL};
        dist = x;
        rc = job ? sq_cli_dist_run(&dist, &res, &rep) : SQ_EXIT_FAIL;
        res.seed = run.cfg.seed; /* the agents' seed: the job carried it */
        if (rc) {
            sq_cli_signals_end();
            sq_cli_sink_end(sink, &res, NULL, run.cfg.stop, NULL, 0);
            exit_code = rc;
            goto out;
        }
    } else {
        rc = sq_run(&run.cfg, &res, &why);
    }
    sig = sq_cli_signal_seen(&forced);
    sq_progress_finish(&tk.progress);
    sq_cli_series_report(&tk.out, &res);
    if (rc < 0) {
        sq_cli_signals_end();
        fprintf(stderr, "squall: %s: %s\n", why, sq_strerror(rc));
        sq_cli_sink_end(sink, &res, NULL, run.cfg.stop, NULL, 0);
        goto out;
    }
    if (sq_planrun_finish(&run, &tk.w, &res, &verdicts) < 0) {
        sq_cli_signals_end();
        sq_cli_sink_end(sink, &res, NULL, run.cfg.stop, NULL, 0);
        goto out;
    }
    sq_cli_series_close(&tk.out, true);
    if (sig)
        sq_cli_signal_mark(&res, sig, forced);
    json_t *doc = sq_planrun_doc(&run, &res, &verdicts);
    char sink_why[512] = "";
    bool sink_failed = sq_cli_sink_end(sink, &res, doc, run.cfg.stop, sink_why, sizeof(sink_why));
    if (!sig && sink) /* a signal while the sink waited for the last events */
        sig = sq_cli_signal_seen(&forced);
    sq_cli_signals_end();
    if (doc && o.dist.agents && sq_cli_dist_doc(doc, &rep) < 0) {
        json_decref(doc);
        doc = NULL;
    }
    if (!doc) {
        fprintf(stderr, "squall: out of memory building the result\n");
        goto out;
    }
    if (typed)
        sq_report_set_command(doc, argc + 1, typed, !o.no_redact && !p->no_redact);
    if (sig)
        sq_cli_signal_doc(doc, sig, forced);
    bool written = sq_cli_render(&outs, doc) == 0;
    json_decref(doc);
    if (res.script_error) {
        fprintf(stderr, "squall: the run stopped on a script error: %s\n", res.script_error);
        goto out;
    }
    if (tk.w.aborted)
        fprintf(stderr, "squall: run stopped: %s\n", tk.w.why);
    /* Which verdict wins: a signal (the run is incomplete), then a target that got nothing or a
     * run where nothing succeeded (thresholds on no data are not a regression, and a dead
     * target is not a slow one: result/verdict.h's rule), then the thresholds. */
    if (sig) {
        exit_code = SQ_EXIT_SIGNAL;
    } else if (res.c.sent == 0 && res.c.iterations == 0 && !sq_result_succeeded(&res)) {
        fprintf(stderr, "squall: nothing was sent: %s\n",
                res.aborted ? res.abort_reason : "the target was not reachable");
        exit_code = SQ_EXIT_FAIL;
    } else if (!sq_result_succeeded(&res)) {
        exit_code = sq_cli_run_status(&res, 0, run.cfg.timeout_ns);
    } else if (sink_failed) { /* the sink counted nothing that crossed its broker */
        fprintf(stderr, "squall: sink: %s\n", sink_why);
        exit_code = SQ_EXIT_FAIL;
    } else if (verdicts.failed || tk.w.aborted) {
        fprintf(stderr, "squall: thresholds crossed\n");
        exit_code = SQ_EXIT_THRESHOLDS;
    } else {
        exit_code = SQ_EXIT_OK;
    }
    if (o.dist.agents)
        exit_code = sq_cli_dist_status(&dist, &rep, exit_code);
    if (!written && exit_code == SQ_EXIT_OK)
        exit_code = SQ_EXIT_FAIL;
out:
    sq_cli_signals_end();
    sq_cli_series_close(&tk.out, false); /* what was not committed above: nothing measured */
    sq_planrun_watch_dispose(&tk.w);
    sq_th_verdicts_dispose(&verdicts);
    sq_result_dispose(&res); /* before rep: a distributed result borrows its strings */
    sq_cluster_report_dispose(&rep);
    json_decref(job);
    sq_planrun_dispose(&run);
    sq_plan_free(p);
    free(typed);
    return exit_code;
}
