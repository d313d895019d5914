/* cli/agent_cmd.c - `squall agent`: wait on NATS for a controller's run and run its share.
 *
 * The agent's work is cluster/agent.c's; here are the flags, the signals, the log lines, and the
 * face's half of a job: the controller sends the arguments of `squall URL ...` or `squall run
 * PLAN ...` (with the plan's text, and a -b @FILE's bytes), and this file turns them into a run
 * configuration with the same engine code the faces use (face/quick.h, face/planrun.h), so
 * an agent refuses what the controller would. docs/distributed.md is the user's guide. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/b64.h"
#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cluster/cluster.h"
#include "face/distopts.h"
#include "face/flags.h"
#include "face/planrun.h"
#include "face/quick.h"
#include "plan/plan.h"

#define FACE "squall agent"

static const char usage[] =
    "usage: squall agent --nats URL [flags]   wait for distributed runs (docs/distributed.md)\n"
    "\n"
    "  An agent waits on NATS until a controller (squall URL ... --agents N --nats URL, or\n"
    "  squall run PLAN --agents N --nats URL) gives it its execution segment of a run, runs it\n"
    "  and streams the figures back; then it waits for the next run.\n"
    "\n"
    "      --nats URL          the NATS server (nats://host:4222; user:pass@ or token@ allowed;\n"
    "                          tls://host:4222 for NATS over TLS)\n"
    "      --cacert FILE       tls://: the CAs that sign the server's certificate (default: the\n"
    "                          system's)\n"
    "      --cert FILE, --key FILE  tls://: a client certificate and its key (mutual TLS)\n"
    "  -k, --insecure          tls://: do not verify the server's certificate\n"
    "      --tls-first         tls://: shake hands before the server's INFO (a server with\n"
    "                          tls { handshake_first: true })\n"
    "                          (--nats-cacert, --nats-cert, --nats-key, --nats-insecure and\n"
    "                          --nats-tls-first, the controller's spellings, work too)\n"
    "      --name NAME         the agent's name in results (default: HOST-PID)\n"
    "      --labels K=V[,K=V]  labels shown with its results (region=eu,rack=3)\n"
    "      --subject-prefix P  the NATS subjects' prefix, as the controller's (default squall)\n"
    "      --once              serve one run, then exit (a Kubernetes Job's pod)\n"
    "  -q, --quiet             no log lines\n"
    "  -h, --help              this help\n"
    "\n"
    "exit status: 0 stopped (SIGINT, SIGTERM) or --once done, 1 the first connection's TLS\n"
    "failed (a certificate that does not verify), 2 bad flags\n";

static volatile int quit;

static void on_signal(int sig)
{
    SQ_UNUSED(sig);
    quit = 1;
}

static void log_line(void *ud, const char *line)
{
    if (*(const bool *)ud)
        return;
    time_t now = time(NULL);
    struct tm tm;
    char ts[32];
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", gmtime_r(&now, &tm));
    fprintf(stderr, "%sZ squall agent: %s\n", ts, line);
}

/* One job: what the controller sent, and the run prepared from it. */
struct job {
    json_t *j;
    char **argv;
    int argc;
    bool plan;
    struct sq_quick_opts qo;
    struct sq_quick_run qr;
    struct sq_planrun_opts po;
    struct sq_plan *p;
    struct sq_planrun pr;
    bool qr_set, pr_set;
};

static void job_free(struct job *k)
{
    if (k->qr_set)
        sq_quick_run_dispose(&k->qr);
    if (!k->plan)
        sq_quick_opts_dispose(&k->qo);
    if (k->pr_set)
        sq_planrun_dispose(&k->pr);
    sq_plan_free(k->p);
    free(k->argv);
    json_decref(k->j);
    free(k);
}

static void release(void *ud, void *handle)
{
    SQ_UNUSED(ud);
    job_free(handle);
}

/* Writes a -b @FILE's bytes into a file of our own, for the face to read as @FILE. */
static int body_file(const char *b64, char *path, size_t len, char *err, size_t errlen)
{
    unsigned char *bytes = NULL;
    size_t n = 0;
    if (sq_b64_decode(b64, strlen(b64), &bytes, &n) < 0) {
        snprintf(err, errlen, "the job's body is not base64");
        return -SQ_EPARSE;
    }
    snprintf(path, len, "/tmp/squall-body-XXXXXX");
    int fd = mkstemp(path);
    int rc = fd < 0 ? -errno : 0;
    if (rc == 0 && write(fd, bytes, n) != (ssize_t)n)
        rc = -EIO;
    if (fd >= 0)
        close(fd);
    free(bytes);
    if (rc < 0) {
        snprintf(err, errlen, "cannot keep the job's body in a file: %s", sq_strerror(rc));
        if (fd >= 0)
            unlink(path);
    }
    return rc;
}

/* ---- a job: what the controller sent, prepared as the faces would ---- */

/* The job's JSON: its face and its arguments as an argv (argv[0] "run" or "squall", as main
 * passes them), the strings borrowed from k->j. Returns 0 or -SQ_EPARSE / -ENOMEM. */
static int job_read(struct job *k, const char *text, size_t len, char *err, size_t errlen)
{
    json_error_t je;
    k->j = json_loadb(text, len, 0, &je);
    const json_t *args = json_object_get(k->j, "args");
    const char *face = json_string_value(json_object_get(k->j, "face"));
    if (!k->j || !json_is_array(args) || !face) {
        snprintf(err, errlen, "the job is not one this agent reads");
        return -SQ_EPARSE;
    }
    k->plan = strcmp(face, "plan") == 0;
    if (!k->plan && strcmp(face, "quick") != 0) {
        snprintf(err, errlen, "the job's face '%s' is not one this agent runs", face);
        return -SQ_EPARSE;
    }
    size_t n = json_array_size(args);
    k->argv = calloc(n + 2, sizeof(*k->argv));
    if (!k->argv)
        return -ENOMEM;
    static char arg0_run[] = "run", arg0_quick[] = "squall";
    k->argv[k->argc++] = k->plan ? arg0_run : arg0_quick;
    for (size_t i = 0; i < n; i++) {
        const char *a = json_string_value(json_array_get(args, i));
        if (!a) {
            snprintf(err, errlen, "the job's arguments are not strings");
            return -SQ_EPARSE;
        }
        k->argv[k->argc++] = (char *)a;
    }
    return 0;
}

/* `squall URL ...`'s job: the flags, a -b @FILE's bytes in a file of our own for as long as the
 * set-up reads it, then the run prepared and the open-file limit raised for this agent's share. */
static int prepare_quick(struct job *k, const struct sq_seg *seg, char *err, size_t errlen)
{
    sq_quick_opts_init(&k->qo);
    int rc = sq_quick_parse_argv(&k->qo, k->argc, k->argv, err, errlen);
    if (rc != 0)
        return rc > 0 ? -SQ_EUSAGE : rc;
    char body[64] = "", at[70];
    const char *b64 = json_string_value(json_object_get(k->j, "body_file_b64"));
    if (b64) {
        if ((rc = body_file(b64, body, sizeof(body), err, errlen)) < 0)
            return rc;
        snprintf(at, sizeof(at), "@%s", body);
        k->qo.body_arg = at;
        k->qo.body_literal = false;
    }
    rc = sq_quick_prepare(&k->qr, &k->qo, err, errlen);
    k->qr_set = true;
    if (body[0])
        unlink(body);
    k->qo.body_arg = NULL; /* it pointed at this frame */
    if (rc == 0)
        rc = sq_net_raise_nofile(sq_seg_share(seg, k->qr.conns), "connections", err, errlen);
    return rc;
}

/* `squall run PLAN ...`'s job: the flags, the plan from the job's text (its data files at the
 * same paths here), the run prepared, the open-file limit, this agent's own first OAuth2 token. */
static int prepare_plan(struct job *k, const struct sq_seg *seg, char *err, size_t errlen)
{
    const json_t *plan = json_object_get(k->j, "plan");
    const char *name = json_string_value(json_object_get(plan, "name"));
    const char *dir = json_string_value(json_object_get(plan, "dir"));
    const json_t *ptext = json_object_get(plan, "text");
    if (!name || !dir || !json_is_string(ptext)) {
        snprintf(err, errlen, "the job carries no plan");
        return -SQ_EPARSE;
    }
    sq_planrun_opts_init(&k->po);
    int rc = sq_planrun_parse_argv(&k->po, k->argc, k->argv, err, errlen);
    if (rc != 0)
        return rc > 0 ? -SQ_EUSAGE : rc;
    /* setup: and teardown: ran (or will run) once on the controller: setup's values came */
    const json_t *setup = json_object_get(k->j, "setup");
    k->po.once_elsewhere = json_is_object(setup);
    struct sq_plan_error perr;
    memset(&perr, 0, sizeof(perr));
    rc = sq_plan_load_text(name, json_string_value(ptext), json_string_length(ptext), dir, &k->p,
                           &perr);
    if (rc < 0) {
        sq_plan_error_format(&perr, err, errlen);
        return rc;
    }
    rc = sq_planrun_prepare(&k->pr, k->p, &k->po, err, errlen);
    k->pr_set = true;
    if (rc == 0 && setup) /* every VU of this agent reads {{setup.NAME}} */
        rc = sq_planrun_setup_from_json(&k->pr, setup, err, errlen);
    if (rc == 0)
        rc = sq_net_raise_nofile(sq_seg_share(seg, k->pr.vus), "VUs", err, errlen);
    if (rc == 0) /* auth.oauth2: this agent's own first token */
        rc = sq_planrun_begin(&k->pr, err, errlen);
    return rc;
}

/* cluster/'s prepare callback (struct sq_agent_config). *handle is set first: the agent
 * releases it whatever this returns. */
static int prepare(void *ud, const char *text, size_t len, const struct sq_seg *seg,
                   struct sq_run_config **cfg, void **handle, char *err, size_t errlen)
{
    SQ_UNUSED(ud);
    struct job *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    *handle = k;
    int rc = job_read(k, text, len, err, errlen);
    if (rc < 0)
        return rc;
    if (!k->plan) {
        rc = prepare_quick(k, seg, err, errlen);
        if (k->qr_set) /* the prepared run, even one that failed (the agent reads it on 0) */
            *cfg = &k->qr.cfg;
        return rc;
    }
    rc = prepare_plan(k, seg, err, errlen);
    if (k->pr_set)
        *cfg = &k->pr.cfg;
    return rc;
}

/* ---- the command: parse -> run ---- */

/* "k=v,k2=v2" into an object of strings. */
static json_t *labels_parse(const char *s)
{
    json_t *o = json_object();
    char *copy = strdup(s), *save = NULL;
    if (!o || !copy) {
        json_decref(o);
        free(copy);
        return NULL;
    }
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !json_is_string(json_string(eq + 1))) {
            json_decref(o);
            free(copy);
            return NULL;
        }
        *eq = '\0';
        json_object_set_new(o, tok, json_string(eq + 1));
    }
    free(copy);
    return o;
}

enum { OPT_NATS = 256, OPT_NAME, OPT_LABELS, OPT_PREFIX, OPT_ONCE, OPT_SKEW, OPT_PROTO };

/* What the phases of one `squall agent` share. */
struct agentcmd {
    bool quiet;
    struct sq_distopts tls; /* --nats and the NATS TLS flags, in the controller's form */
    json_t *labels;         /* --labels (owned) */
    struct sq_agent_config cfg;
};

/* One flag getopt_long returned. Returns 0, SQ_EXIT_DONE (--help answered) or the exit status
 * after printing why. */
static int take_flag(void *ud, const struct option *longs, int ch, const char *flag)
{
    struct agentcmd *a = ud;
    switch (ch) {
    case OPT_NATS:
        a->cfg.nats_url = a->tls.nats = optarg;
        return 0;
    case SQ_DISTOPT_NATS_CACERT:
    case SQ_DISTOPT_NATS_CERT:
    case SQ_DISTOPT_NATS_KEY:
    case SQ_DISTOPT_NATS_INSECURE:
    case SQ_DISTOPT_NATS_TLS_FIRST: {
        char why[256];
        if (sq_distopts_flag(&a->tls, ch, flag, optarg, why, sizeof(why)) < 0)
            return sq_cli_usage_error(FACE, "%s", why);
        return 0;
    }
    case OPT_NAME:
        a->cfg.name = optarg;
        if (!optarg[0] || strlen(optarg) > 100 || strpbrk(optarg, "\r\n\""))
            return sq_cli_usage_error(FACE, "%s: '%s' is not a name (1..100 printable bytes)", flag,
                                      optarg);
        return 0;
    case OPT_LABELS:
        json_decref(a->labels);
        if (!(a->labels = labels_parse(optarg)))
            return sq_cli_usage_error(FACE, "%s: '%s' is not K=V[,K=V...]", flag, optarg);
        return 0;
    case OPT_PREFIX:
        a->cfg.prefix = optarg;
        if (!sq_distopts_prefix_ok(optarg))
            return sq_cli_usage_error(FACE,
                                      "%s: '%s' is not a subject prefix (letters, digits, _ "
                                      "and -, in tokens joined by dots)",
                                      flag, optarg);
        return 0;
    case OPT_ONCE:
        a->cfg.once = true;
        return 0;
    case OPT_SKEW: { /* a duration with an optional leading '-' */
        const char *v = optarg[0] == '-' ? optarg + 1 : optarg;
        int64_t ns;
        if (sq_parse_duration(v, SQ_NS_PER_MS, &ns) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a duration", flag, optarg);
        a->cfg.clock_skew_ns = optarg[0] == '-' ? -ns : ns;
        return 0;
    }
    case OPT_PROTO: {
        uint64_t v;
        if (sq_parse_u64(optarg, 1, 1000, 0, &v) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a protocol number", flag, optarg);
        a->cfg.proto = (int)v;
        return 0;
    }
    case 'k':
        a->tls.nats_insecure = true;
        return 0;
    case 'q':
        a->quiet = true;
        return 0;
    case 'h':
        fputs(usage, stdout);
        return SQ_EXIT_DONE;
    }
    return sq_cli_flag_refused(FACE, longs, ch, flag);
}

/* The flags. Returns 0, SQ_EXIT_DONE or the exit status after printing why. */
static int agent_parse(struct agentcmd *a, int argc, char **argv)
{
    static const struct option longs[] = {
        {"nats", required_argument, NULL, OPT_NATS},
        {"name", required_argument, NULL, OPT_NAME},
        {"labels", required_argument, NULL, OPT_LABELS},
        {"subject-prefix", required_argument, NULL, OPT_PREFIX},
        {"once", no_argument, NULL, OPT_ONCE},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        /* for tests only (docs/distributed.md): a skewed clock, another protocol number */
        {"x-clock-skew", required_argument, NULL, OPT_SKEW},
        {"x-proto", required_argument, NULL, OPT_PROTO},
        /* NATS over TLS: the agent's own spellings, and the controller's */
        {"cacert", required_argument, NULL, SQ_DISTOPT_NATS_CACERT},
        {"cert", required_argument, NULL, SQ_DISTOPT_NATS_CERT},
        {"key", required_argument, NULL, SQ_DISTOPT_NATS_KEY},
        {"insecure", no_argument, NULL, SQ_DISTOPT_NATS_INSECURE},
        {"tls-first", no_argument, NULL, SQ_DISTOPT_NATS_TLS_FIRST},
        SQ_DISTOPTS_TLS_LONG_OPTIONS,
        {0, 0, 0, 0},
    };
    int rc = sq_cli_getopt(argc, argv, ":qhk", longs, take_flag, a);
    if (rc)
        return rc;
    if (optind < argc)
        return sq_cli_usage_error(FACE, "unexpected '%s'", argv[optind]);
    if (!a->cfg.nats_url)
        return sq_cli_usage_error(FACE, "--nats URL is needed (nats://host:4222)");
    char why[256];
    if (sq_distopts_tls_check(&a->tls, why, sizeof(why)) < 0)
        return sq_cli_usage_error(FACE, "%s", why);
    a->cfg.nats_tls = sq_distopts_tls(&a->tls);
    a->cfg.nats_tls_first = a->tls.nats_tls_first;
    return 0;
}

/* Serves jobs until SIGINT or SIGTERM (or one job with --once). Returns the exit status. */
static int agent_run(struct agentcmd *a)
{
    a->cfg.labels = a->labels;
    a->cfg.quit = &quit;
    sq_cli_stop_signals(on_signal);
    signal(SIGPIPE, SIG_IGN);
    char err[512];
    int r = sq_agent_serve(&a->cfg, err, sizeof(err));
    if (r == -SQ_EUSAGE)
        return sq_cli_usage_error(FACE, "--nats: %s", err);
    if (r < 0) {
        fprintf(stderr, "squall agent: %s%s\n", err,
                r == -SQ_ETLS && strstr(err, "verify")
                    ? " (--cacert FILE: the CAs to trust; -k: verify nothing)"
                    : "");
        return SQ_EXIT_FAIL;
    }
    return SQ_EXIT_OK;
}

int sq_cli_agent(int argc, char **argv)
{
    struct agentcmd a = {0};
    a.cfg = (struct sq_agent_config){
        .prepare = prepare, .release = release, .log = log_line, .ud = &a.quiet};
    int rc = agent_parse(&a, argc, argv);
    if (rc == 0)
        rc = agent_run(&a);
    json_decref(a.labels);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
