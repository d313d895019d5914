/* cli/run_cmd.c - the plan face: `squall run PLAN` and `squall validate PLAN`. The flags, the
 * run's set-up and the thresholds are face/planrun.h (shared with the daemon); here: the help,
 * loading the file, printing what the engine refused, signals, the progress line and the
 * end-of-run outputs (what the quick face does too is cli/loadrun.h's). `squall run` goes
 * parse -> prepare -> run -> render, each phase a function of its own over one struct plancmd. */
#include <libgen.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/cli.h"
#include "base/clock.h"
#include "base/file.h"
#include "cli/common.h"
#include "cli/loadrun.h"
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
#include "sink/subs.h"

#define FACE "squall run"

/* ---- the help ---- */

static const char run_usage[] =
    "usage: squall run PLAN [flags]      run a YAML plan (docs/plans.md)\n"
    "       squall validate PLAN...      check plans and print what each would run\n"
    "\n"
    "  -t, --threads N         worker threads per scenario (default: online CPUs)\n"
    "      --timeout D         request timeout unless the plan sets one (default 10s)\n"
    "      --connect-timeout D connect timeout (default 5s)\n"
    "      --json FILE         write the result document (- for stdout)\n"
    "      --html FILE         write a self-contained HTML report\n"
    "      --junit FILE        write the thresholds and checks as JUnit XML, for CI (- for "
    "stdout)\n"
    "      --out csv=FILE      write the per-second series as CSV while the run goes (tail -f\n"
    "                          shows each second; so do hdr= and ndjson=)\n"
    "      --out hdr=FILE      write HdrHistogram's interval log (one histogram a second)\n"
    "      --out ndjson=FILE   write one JSON line per request (scenario and step named)\n"
    "      --out prometheus-rw=URL  stream the per-second series to Prometheus's remote-write\n"
    "                          receiver (http://HOST:9090/api/v1/write) while the run goes\n"
    "      --out influxdb=URL  the same to InfluxDB 1.x (http://HOST:8086/DB, line protocol;\n"
    "                          https:// and user:password@ too, tokens from the environment);\n"
    "                          a slow or dead receiver never slows the load (drops counted)\n"
    "      --sample F          with --out ndjson: record this share of requests (0 < F <= 1)\n"
    "      --http2             every scenario over HTTP/2 (h2c for http://, ALPN h2 for\n"
    "                          https://); a scenario may say `protocol: h2` on its own\n"
    "      --http3             every scenario over HTTP/3 (QUIC; an https:// base URL); a\n"
    "                          scenario may say `protocol: h3` on its own\n"
    "      --h3-0rtt           HTTP/3 scenarios: keep the server's session ticket; later\n"
    "                          connections resume with 0-RTT (first request as early data)\n"
    "      --streams N         HTTP/2 and HTTP/3 scenarios: streams (VUs) per connection\n"
    "                          (default 1)\n"
    "      --no-compression    do not offer Accept-Encoding (compressed bodies are still decoded)\n"
    "      --no-phases         do not record per-phase timings\n"
    "      --max-redirects N   redirects each request step follows unless it sets its own\n"
    "                          `redirects` (0..100, 0: none; over defaults.max_redirects;\n"
    "                          default 10)\n"
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

/* ---- the plan file, and `squall validate` ---- */

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

static int plan_subs_check(const struct sq_plan *p);

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
    if ((rc = sq_cli_sink_plan_check(p)) != 0 || (rc = plan_subs_check(p)) != 0) {
        sq_plan_free(p);
        return rc;
    }
    char err[512];
    struct sq_netopts none = {0};
    if (sq_thresholds_check(p, err, sizeof(err)) < 0 ||
        sq_plan_hooks_check(p, err, sizeof(err)) < 0 ||
        sq_planrun_check_sources(p, &none, err, sizeof(err)) < 0) {
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

/* ---- the command: parse -> prepare -> run -> render ---- */

/* What the phases of one `squall run PLAN` share. */
struct plancmd {
    int argc; /* main passed argv + 1: argv[0] is "run", argv[-1] the program */
    char **argv;
    char **typed; /* the command line as typed, for the result: getopt reorders argv */
    struct sq_planrun_opts o;
    struct sq_plan *p;
    struct sq_planrun run;
    bool prepared;             /* run and load hold what prepare set up */
    struct sq_cli_load load;   /* the outputs, the tick, the sink, the result */
    struct sq_planrun_watch w; /* abortOnFail thresholds on the running totals */
    struct sq_th_verdicts verdicts;
    struct sq_subs *subs; /* the plan's subscribers: (sink/subs.h), or NULL */
    bool subs_none;       /* none of them ever subscribed: the run fails, as a dead sink does */
    char subs_where[512]; /* then where, without credentials: "nats://HOST:PORT SUBJECT" */
};

/* The main thread's per-second work: progress, --out files, and abortOnFail thresholds on the
 * totals (a failed one sets the run's stop flag, as a signal would). */
static void on_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                    const struct sq_hist *hu)
{
    SQ_UNUSED(hu);
    struct plancmd *c = ud;
    sq_cli_load_tick(&c->load, s, h);
    if (sq_planrun_watch_tick(&c->w, s, h))
        *c->run.cfg.stop = 1;
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

/* The flags and the plan file (loaded, its sink: section checked; nothing set up yet). Returns 0
 * to go on, SQ_EXIT_DONE when --help was answered, or the exit status after printing why. */
static int plan_parse(struct plancmd *c)
{
    char err[SQ_PREP_ERRLEN];
    sq_planrun_opts_init(&c->o);
    c->o.net.proxy_env = true; /* this process's HTTP(S)_PROXY: the CLI's own environment */
    c->typed = sq_cli_argv_copy(c->argc + 1, c->argv - 1);
    int rc = sq_planrun_parse_argv(&c->o, c->argc, c->argv, err, sizeof(err));
    if (rc == SQ_PLANRUN_HELP)
        print_usage(stdout);
    if (rc)
        return rc > 0 ? SQ_EXIT_DONE : sq_cli_prep_error(FACE, rc, err);
    rc = load(c->o.plan, &c->p);
    if (rc == 0)
        rc = sq_cli_sink_plan_check(c->p);
    if (rc == 0)
        rc = plan_subs_check(c->p);
    return rc;
}

/* A plan's sink: section: the sink beside the load, told this run's id first. */
static int plan_sink(struct plancmd *c)
{
    if (!c->p->sink)
        return 0;
    struct sq_sink_beside_opts so;
    char http[300];
    sq_sink_beside_plan_opts(c->p, &so, http, sizeof(http));
    so.tls = &c->o.net.tls; /* a broker over TLS: the run's -k, --cacert, --cert */
    c->run.cfg.run_id = sq_run_new_id();
    return sq_cli_sink_begin(FACE, &so, c->run.cfg.run_id, &c->load.sink);
}

/* A plan's subscribers: section as sink/subs.h's options (threads: the section's, else -t,
 * else one per CPU). */
static struct sq_subs_opts plan_subs_opts(const struct sq_plan_subscribers *ps, uint32_t threads)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    return (struct sq_subs_opts){.url = ps->url,
                                 .n = ps->count,
                                 .threads = ps->threads ? ps->threads
                                            : threads   ? threads
                                            : ncpu > 0  ? (uint32_t)ncpu
                                                        : 1,
                                 .group = ps->queue,
                                 .stream = ps->stream,
                                 .batch = ps->batch,
                                 .push = ps->push,
                                 .mqtt_qos = ps->qos < 0 ? 1 : ps->qos};
}

/* sink/subs.c's words name the quick face's flags ("--queue: ..."); here they are the section's
 * keys: "FILE:LINE:COL: subscribers: queue: ...". */
static int plan_subs_refuse(const struct sq_plan *p, const char *why)
{
    const char *w = strncmp(why, "--", 2) == 0 ? why + 2 : why;
    bool url = strncmp(w, "subscribers: ", 13) == 0; /* the flag's words on its URL */
    fprintf(stderr, "squall: %s:%u:%u: subscribers: %s%s\n", p->file ? p->file : "plan",
            (unsigned)p->subscribers->loc.line, (unsigned)p->subscribers->loc.col,
            url ? "url: " : "", url ? w + 13 : w);
    return SQ_EXIT_USAGE;
}

/* Checks a plan's subscribers: section as the subscribers will (the URL, the group's name),
 * without connecting. Returns 0, or SQ_EXIT_USAGE after printing why. */
static int plan_subs_check(const struct sq_plan *p)
{
    if (!p->subscribers)
        return 0;
    struct sq_subs_opts so = plan_subs_opts(p->subscribers, 1);
    char err[512] = "";
    return sq_subs_check(&so, err, sizeof(err)) < 0 ? plan_subs_refuse(p, err) : 0;
}

/* A plan's subscribers: section: started, and subscribed (up to 5 s), before the first
 * publish. */
static int plan_subs(struct plancmd *c)
{
    const struct sq_plan_subscribers *ps = c->p->subscribers;
    if (!ps)
        return 0;
    if (c->o.dist.agents)
        return plan_subs_refuse(c->p, "the subscribers run on this machine only; not with "
                                      "--agents");
    struct sq_subs_opts so = plan_subs_opts(ps, (uint32_t)c->o.threads);
    so.egress = c->run.cfg.egress;
    so.tls = &c->o.net.tls; /* a broker over TLS: the run's -k, --cacert, --cert */
    char err[512] = "";
    int rc = sq_subs_start(&so, &c->subs, err, sizeof(err));
    if (rc == -SQ_EUSAGE)
        return plan_subs_refuse(c->p, err);
    if (rc < 0) {
        sq_cli_error(FACE, "subscribers: %s", strncmp(err, "--", 2) == 0 ? err + 2 : err);
        return SQ_EXIT_FAIL;
    }
    uint32_t k = sq_subs_wait(c->subs, 5 * SQ_NS_PER_S, NULL);
    if (k < ps->count)
        fprintf(stderr, "%s: subscribers: %u of %u subscribed after 5s; the load starts anyway\n",
                FACE, k, ps->count);
    return 0;
}

/* What the plan's publish steps to the subscribers' URL completed (each of them, when none is
 * written as that URL: a wildcard subscription); UINT64_MAX when the plan publishes nothing. */
static uint64_t plan_published(const struct sq_plan *p, const struct sq_result *res)
{
    uint64_t same = 0, all = 0;
    bool any_same = false, any = false;
    for (uint32_t i = 0; i < res->nscens && i < p->nscenarios; i++) {
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        const struct sq_scen_result *sr = &res->scens[i];
        for (size_t k = 0; k < sc->nsteps && k < sr->nsteps; k++) {
            if (sc->steps[k].kind != SQ_STEP_PUBLISH)
                continue;
            uint64_t done = sr->steps[k].reqs - sr->steps[k].failed;
            any = true;
            all += done;
            if (sc->steps[k].req.url_src &&
                strcasecmp(sc->steps[k].req.url_src, p->subscribers->url) == 0) {
                any_same = true;
                same += done;
            }
        }
    }
    return any_same ? same : any ? all : UINT64_MAX;
}

/* Everything before the first packet of load: the run set up (face/planrun.h), the open-file
 * limit, auth.oauth2's first token, the output files, the tick and the sink. Returns 0, or the
 * exit status after printing why. */
static int plan_prepare(struct plancmd *c)
{
    char err[SQ_PREP_ERRLEN];
    c->o.run_once = true; /* setup: and teardown: run here, on agents' runs too (the controller) */
    const struct sq_planrun_opts *o = &c->o;
    int rc = sq_planrun_prepare(&c->run, c->p, o, err, sizeof(err));
    c->prepared = true;
    if (rc == 0 && !o->dist.agents) /* on agents, each raises its own */
        rc = sq_net_raise_nofile(c->run.vus, "VUs", err, sizeof(err));
    /* auth.oauth2's first token (each agent fetches its own; the controller's setup: and
     * teardown: need one here) */
    if (rc == 0 && (!o->dist.agents || c->p->setup || c->p->teardown))
        rc = sq_planrun_begin(&c->run, err, sizeof(err));
    if (rc < 0)
        return sq_cli_prep_error(FACE, rc, err);
    if (c->run.h3_proxy_env)
        fprintf(stderr,
                "squall: note: HTTP/3: %s is not used: an HTTP proxy cannot carry QUIC "
                "(UDP); the requests go straight to the target\n",
                c->run.h3_proxy_env);
    struct sq_cli_load *l = &c->load;
    l->face = FACE;
    l->cfg = &c->run.cfg;
    l->d = &o->dist;
    l->outs = (struct sq_cli_outputs){.face = FACE,
                                      .json_path = o->json_path,
                                      .html_path = o->html_path,
                                      .junit_path = o->junit_path,
                                      .quiet = o->quiet};
    l->push_url[SQ_PUSH_PROM_RW] = o->prom_rw_url;
    l->push_url[SQ_PUSH_INFLUX] = o->influx_url;
    l->run_name = o->name;
    l->push_open = c->run.open;
    l->metrics = c->p->metrics;
    l->nmetrics = (uint32_t)c->p->nmetrics;
    if ((rc = sq_cli_load_open(l, o->csv_path, o->hdr_path, o->ndjson_path, o->sample)) != 0)
        return rc;
    if (l->out.nd.f && sq_ndjson_plan_labels(&l->out.nd, c->p) < 0) {
        fprintf(stderr, "squall: out of memory\n");
        return SQ_EXIT_FAIL;
    }
    sq_cli_progress_init(&l->progress, c->run.open, c->run.length_s);
    l->show = !o->quiet;
    if (sq_planrun_watch_init(&c->w, c->p) < 0)
        return SQ_EXIT_FAIL;
    c->run.cfg.on_tick = on_tick;
    c->run.cfg.tick_ud = c;
    if ((rc = plan_sink(c)) != 0)
        return rc;
    return plan_subs(c);
}

/* The longest graceful stop of the plan's scenarios: the agents' controller waits for it. */
static int64_t plan_grace(const struct sq_run_config *cfg)
{
    int64_t grace = 0;
    for (uint32_t i = 0; i < cfg->nscens; i++)
        if (cfg->scens[i].exec.graceful_stop_ns > grace)
            grace = cfg->scens[i].exec.graceful_stop_ns;
    return grace;
}

/* The run, here or on agents, then the thresholds on its result. Returns 0 when it took place,
 * or the exit status after printing why. */
static int plan_run(struct plancmd *c)
{
    struct sq_run_config *cfg = &c->run.cfg;
    cfg->stop = sq_cli_signals_begin();
    if (c->o.dist.agents) /* the plan on agents: validated above, before anything is sent */
        c->load.job = plan_job(c->argc, c->argv, c->o.plan, cfg->seed);
    int64_t length_ns = (int64_t)(c->run.length_s * 1e9) + (c->o.dist.agents ? plan_grace(cfg) : 0);
    int rc = 0;
    if (c->p->setup) { /* once, before the scenarios: what it extracts, every VU reads */
        if (sq_planrun_once(&c->run, false, cfg->stop) < 0) {
            sq_cli_load_abandon(&c->load);
            fprintf(stderr, "squall: out of memory\n");
            return SQ_EXIT_FAIL;
        }
        if (!c->run.setup.ok && *cfg->stop) {
            sq_cli_load_abandon(&c->load);
            fprintf(stderr,
                    "squall: stopped by a signal during setup; the scenarios did not run\n");
            return SQ_EXIT_SIGNAL;
        }
        if (!c->run.setup.ok) {
            sq_cli_load_abandon(&c->load);
            fprintf(stderr, "squall: setup failed: %s; the scenarios did not run\n",
                    c->run.setup.why);
            return SQ_EXIT_FAIL;
        }
    }
    if (c->load.job && (c->p->setup || c->p->teardown)) {
        /* the agents run the scenarios alone: setup's values go with the job (an empty object
         * for a plan with teardown only: it tells the agent the controller runs them) */
        char why[300];
        json_t *vals = sq_planrun_setup_json(&c->run, why, sizeof(why));
        if (!vals || json_object_set_new(c->load.job, "setup", vals) < 0) {
            fprintf(stderr, "squall: %s\n", vals ? "out of memory" : why);
            sq_cli_load_abandon(&c->load);
            rc = SQ_EXIT_FAIL;
        }
    }
    if (rc == 0 && c->subs)
        sq_subs_go(c->subs);
    if (rc == 0)
        rc = sq_cli_load_run(&c->load, c->run.open, length_ns, on_tick, c);
    if (c->p->teardown) { /* after the scenarios, even when a signal or a threshold stopped them */
        if (sq_planrun_once(&c->run, true, sq_cli_signals_again()) < 0)
            fprintf(stderr, "squall: teardown: out of memory\n");
        else if (!c->run.teardown.ok)
            fprintf(stderr, "squall: teardown failed: %s\n", c->run.teardown.why);
    }
    if (rc)
        return rc;
    if (sq_planrun_finish(&c->run, &c->w, &c->load.res, &c->verdicts) < 0) {
        sq_cli_load_abandon(&c->load);
        return SQ_EXIT_FAIL;
    }
    sq_cli_load_measured(&c->load);
    return 0;
}

/* Which verdict wins: a signal (the run is incomplete), then a target that got nothing or a run
 * where nothing succeeded (thresholds on no data are not a regression, and a dead target is not
 * a slow one: result/verdict.h's rule), then the sink, then the thresholds. */
static int plan_status(const struct plancmd *c)
{
    const struct sq_result *res = &c->load.res;
    if (c->load.sig)
        return SQ_EXIT_SIGNAL;
    if (res->c.sent == 0 && res->c.iterations == 0 && !sq_result_succeeded(res)) {
        fprintf(stderr, "squall: nothing was sent: %s\n",
                res->aborted ? res->abort_reason : "the target was not reachable");
        return SQ_EXIT_FAIL;
    }
    if (!sq_result_succeeded(res))
        return sq_cli_run_status(res, 0, c->run.cfg.timeout_ns);
    if (c->load.sink_failed) { /* the sink counted nothing that crossed its broker */
        fprintf(stderr, "squall: sink: %s\n", c->load.sink_why);
        return SQ_EXIT_FAIL;
    }
    if (c->subs_none) { /* what they would have counted is not known: not a pass */
        fprintf(stderr,
                "squall: subscribers: none of the %u subscribed to %s (the broker was not there "
                "or refused them)\n",
                (unsigned)c->p->subscribers->count, c->subs_where);
        return SQ_EXIT_FAIL;
    }
    if (c->verdicts.failed || c->w.aborted) {
        fprintf(stderr, "squall: thresholds crossed\n");
        return SQ_EXIT_THRESHOLDS;
    }
    return SQ_EXIT_OK;
}

/* One document feeds every output; then the exit status. */
static int plan_render(struct plancmd *c)
{
    struct sq_cli_load *l = &c->load;
    json_t *doc = sq_cli_load_doc(l, sq_planrun_doc(&c->run, &l->res, &c->verdicts), c->argc + 1,
                                  c->typed, !c->o.no_redact && !c->p->no_redact);
    if (!doc)
        return SQ_EXIT_FAIL;
    if (c->subs) { /* the last messages (quiet for 1 s at most), then the block */
        sq_subs_finish(c->subs, plan_published(c->p, &l->res), SQ_NS_PER_S, c->run.cfg.stop);
        json_t *b = sq_subs_json(c->subs);
        c->subs_none = b && json_integer_value(json_object_get(b, "subscribed")) == 0;
        if (c->subs_none) /* the block's URL: the section's without its credentials */
            snprintf(c->subs_where, sizeof(c->subs_where), "%s %s",
                     json_string_value(json_object_get(b, "url")),
                     json_string_value(json_object_get(b, "subscription")));
        if (b)
            json_object_set_new(doc, "subscribers", b);
    }
    bool written = sq_cli_render(&l->outs, doc) == 0;
    json_decref(doc);
    for (int i = 0; i < 2 && !c->o.quiet; i++) { /* counted apart from the scenarios above */
        const struct sq_planrun_once *o = i ? &c->run.teardown : &c->run.setup;
        if (o->ran)
            fprintf(stderr,
                    "%s: %" PRIu64 " request%s, %" PRIu64 " of %" PRIu64
                    " checks passed, %s in %.3fs\n",
                    i ? "teardown" : "setup", o->sent, o->sent == 1 ? "" : "s", o->checks_passed,
                    o->checks_passed + o->checks_failed, o->ok ? "ok" : "FAILED",
                    (double)o->duration_ns / 1e9);
    }
    if (sq_cli_load_script_failed(l))
        return SQ_EXIT_FAIL;
    if (c->w.aborted)
        fprintf(stderr, "squall: run stopped: %s\n", c->w.why);
    return sq_cli_load_status(l, plan_status(c), written);
}

static void plan_dispose(struct plancmd *c)
{
    sq_subs_free(c->subs);
    if (c->prepared) {
        sq_cli_load_dispose(&c->load);
        sq_planrun_watch_dispose(&c->w);
        sq_th_verdicts_dispose(&c->verdicts);
        sq_planrun_dispose(&c->run);
    }
    sq_plan_free(c->p);
    free(c->typed);
}

int sq_cli_run(int argc, char **argv)
{
    struct plancmd c = {.argc = argc, .argv = argv};
    int rc = plan_parse(&c);
    if (rc == 0)
        rc = plan_prepare(&c);
    if (rc == 0)
        rc = plan_run(&c);
    if (rc == 0)
        rc = plan_render(&c);
    plan_dispose(&c);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
