/* cli/ab_cmd.c - `squall ab --arm A='URL flags' --arm B='URL flags' [--server-a 'CMD'] ...`:
 * whether a difference is real.
 *
 * Each round runs every arm once (and arm A a second time, the null test), in an order rotated
 * from round to round (stats/ab.h: ABBA for two, a Williams square for more), each run a child
 * `squall ARGS -q --json FILE` with a cooldown between runs. An arm with a server command gets
 * its server started before each of its runs and stopped after, so two builds can take turns on
 * one port. The statistics, the document, the table and the page are output/instr.h's.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "face/flags.h"
#include "cli/instr_run.h"
#include "face/watchopt.h"
#include "output/instr.h"
#include "output/json.h"
#include "proc/spawn.h"
#include "stats/ab.h"

#define FACE       "squall ab"
#define MAX_ROUNDS 1000
#define MAX_ARGS   480
#define RUN_SLACK  (60 * SQ_NS_PER_S) /* past its own length, a run is killed */

static const char ab_usage[] =
    "usage: squall ab --arm A='URL flags' --arm B='URL flags' [flags]\n"
    "\n"
    "Says whether a difference is real. Each round runs every arm once, plus arm A a second\n"
    "time (the null test), in an order rotated from round to round so drift lands on every\n"
    "arm; it compares each round's paired difference against A, bootstraps the median of\n"
    "those, and calls a difference resolved only when its 95% interval excludes 0 and lies\n"
    "beyond how far the null test moved.\n"
    "\n"
    "      --arm NAME='ARGS'     an arm: squall's arguments for each of its runs (2 or more;\n"
    "                            the first is the base the others are compared with)\n"
    "      --server-a 'CMD'      a server started before each run of the first arm and stopped\n"
    "      --server-b 'CMD'      after it (the second arm's); --server NAME='CMD' for any arm.\n"
    "                            A run starts once the arm's URL accepts connections\n"
    "      --rounds N            rounds (default 8)\n"
    "      --duration D          each run's length, unless its ARGS set one (default 5s)\n"
    "      --cooldown D          pause between runs (default 2s)\n"
    "      --metric M            the verdict's metric: rps (default), p50, p99, cpu (client CPU\n"
    "                            per request), server-cpu (with --watch or a server command)\n"
    "      --watch PID           watch this process in every run (its CPU per request is\n"
    "      --watch-name NAME     compared); an arm's server is watched on its own\n"
    "      --no-null             skip the null test (faster; the verdict then has no band)\n"
    "      --seed N              the bootstrap's seed (default 1: the same data, the same CI)\n"
    "      --ready-timeout D     the longest a server may take to listen (default 30s)\n"
    "      --json FILE|-         write the document (schema squall.ab/1; - for stdout)\n"
    "      --html FILE           write a self-contained HTML page\n"
    "  -q, --quiet               no progress and no table on the terminal\n"
    "  -h, --help                this help\n"
    "\n"
    "exit status: 0 done, 1 an arm never completed a run, 2 bad flags (or an arm's flags),\n"
    "             105 interrupted (SIGINT/SIGTERM: the rounds that completed are compared\n"
    "                 and written, marked interrupted)\n";

/* ---- the arms ---- */

struct arm {
    char *name;  /* owned */
    char **args; /* split (one allocation) */
    int nargs;
    char **server; /* split, or NULL */
    int nserver;
    const char *url;  /* the first argument that is an http(s) URL, or NULL */
    bool sets_length; /* its args give -d, -n or --stages */
    bool null_test;
    int *exit;      /* per round */
    double *values; /* per round x SQ_AB_NMETRICS */
    bool open;      /* its runs were open-loop */
};

struct opts {
    struct arm arms[SQ_AB_MAX_ARMS];
    uint32_t narms;
    const char *server_a, *server_b;
    struct {
        const char *name, *cmd;
    } servers[SQ_AB_MAX_ARMS];
    uint32_t nservers;
    uint64_t rounds, seed;
    int64_t duration_ns, cooldown_ns, ready_timeout_ns;
    int metric; /* -1: by the runs' loop */
    bool no_null, quiet;
    struct sq_watch_opts watch;
    const char *json_path, *html_path;
};

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.')
            return false;
    return true;
}

static struct arm *find_arm(struct opts *o, const char *name)
{
    for (uint32_t i = 0; i < o->narms; i++)
        if (strcmp(o->arms[i].name, name) == 0)
            return &o->arms[i];
    return NULL;
}

/* Whether args set the run's length themselves (then --duration is not added). */
static bool sets_length(char **args, int n)
{
    static const char *const exact[] = {"-d", "--duration", "-n", "--requests", "--stages"};
    static const char *const prefix[] = {"--duration=", "--requests=", "--stages="};
    for (int i = 0; i < n; i++) {
        for (size_t k = 0; k < SQ_ARRAY_LEN(exact); k++)
            if (strcmp(args[i], exact[k]) == 0)
                return true;
        for (size_t k = 0; k < SQ_ARRAY_LEN(prefix); k++)
            if (strncmp(args[i], prefix[k], strlen(prefix[k])) == 0)
                return true;
        if ((strncmp(args[i], "-d", 2) == 0 || strncmp(args[i], "-n", 2) == 0) && args[i][2])
            return true;
    }
    return false;
}

static int add_arm(struct opts *o, const char *flag, const char *val)
{
    const char *eq = strchr(val, '=');
    if (!eq || !name_ok(val, (size_t)(eq - val)))
        return sq_cli_usage_error(FACE,
                                  "%s: '%s' is not NAME='ARGS' (a name of letters, digits, '_', "
                                  "'-' or '.', up to 32)",
                                  flag, val);
    if (o->narms == SQ_AB_MAX_ARMS - 1)
        return sq_cli_usage_error(FACE, "%s: at most %d arms", flag, SQ_AB_MAX_ARMS - 1);
    struct arm *a = &o->arms[o->narms];
    memset(a, 0, sizeof(*a));
    a->name = strndup(val, (size_t)(eq - val));
    if (!a->name)
        return SQ_EXIT_FAIL;
    if (find_arm(o, a->name)) {
        int rc = sq_cli_usage_error(FACE, "%s: '%s': there is already an arm named %s", flag, val,
                                    a->name);
        free(a->name);
        return rc;
    }
    const char *why;
    if (sq_args_split(eq + 1, &a->args, &a->nargs, &why) < 0) {
        free(a->name);
        return sq_cli_usage_error(FACE, "%s: '%s': %s", flag, val, why);
    }
    if (a->nargs == 0 || a->nargs > MAX_ARGS) {
        free(a->name);
        free(a->args);
        return sq_cli_usage_error(FACE, "%s: '%s': %s", flag, val,
                                  a->nargs ? "too many arguments" : "no arguments after '='");
    }
    for (int i = 0; i < a->nargs && !a->url; i++)
        if (strncmp(a->args[i], "http://", 7) == 0 || strncmp(a->args[i], "https://", 8) == 0)
            a->url = a->args[i];
    /* A plan ("run PLAN") sets its own length; so do -d, -n and --stages. */
    a->sets_length = strcmp(a->args[0], "run") == 0 || sets_length(a->args, a->nargs);
    o->narms++;
    return 0;
}

static void free_opts(struct opts *o)
{
    for (uint32_t i = 0; i < o->narms; i++) {
        struct arm *a = &o->arms[i];
        if (!a->null_test) {
            free(a->name);
            free(a->args);
            free(a->server);
        } else {
            free(a->name);
        }
        free(a->exit);
        free(a->values);
    }
}

/* ---- the flags ---- */

enum {
    O_ARM = 256,
    O_SERVER_A,
    O_SERVER_B,
    O_SERVER,
    O_ROUNDS,
    O_DURATION,
    O_COOLDOWN,
    O_METRIC,
    O_WATCH,
    O_WATCH_NAME,
    O_NO_NULL,
    O_SEED,
    O_READY_TIMEOUT,
    O_JSON,
    O_HTML,
};

/* --server NAME='CMD': kept as written, matched to its arm once every --arm is read. */
static int add_server(struct opts *o, const char *flag, const char *val)
{
    const char *eq = strchr(val, '=');
    if (!eq || !name_ok(val, (size_t)(eq - val)) || !eq[1])
        return sq_cli_usage_error(FACE, "%s: '%s' is not NAME='CMD'", flag, val);
    if (o->nservers == SQ_AB_MAX_ARMS)
        return sq_cli_usage_error(FACE, "%s: at most %d", flag, SQ_AB_MAX_ARMS);
    o->servers[o->nservers].name = val;
    o->servers[o->nservers].cmd = eq + 1;
    o->nservers++;
    return 0;
}

/* One flag getopt_long returned. Returns 0, SQ_EXIT_DONE (--help answered) or the exit status
 * after printing why. */
static int take_flag(void *ud, const struct option *longs, int opt, const char *flag)
{
    struct opts *o = ud;
    int64_t *dur = opt == O_DURATION   ? &o->duration_ns
                   : opt == O_COOLDOWN ? &o->cooldown_ns
                                       : &o->ready_timeout_ns;
    switch (opt) {
    case O_ARM:
        return add_arm(o, flag, optarg);
    case O_SERVER_A:
    case O_SERVER_B:
        if (!optarg[0])
            return sq_cli_usage_error(FACE, "%s: '' is not a command", flag);
        *(opt == O_SERVER_A ? &o->server_a : &o->server_b) = optarg;
        return 0;
    case O_SERVER:
        return add_server(o, flag, optarg);
    case O_ROUNDS:
        if (sq_parse_u64(optarg, 2, MAX_ROUNDS, 0, &o->rounds) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a round count (2..%d)", flag, optarg,
                                      MAX_ROUNDS);
        return 0;
    case O_DURATION:
    case O_COOLDOWN: /* a cooldown may be 0: runs back to back */
    case O_READY_TIMEOUT:
        if (sq_parse_duration(optarg, SQ_NS_PER_S, dur) < 0 || (opt != O_COOLDOWN && *dur <= 0))
            return sq_cli_usage_error(FACE, "%s: '%s' is not a duration (e.g. 500ms, 5s, 1m)", flag,
                                      optarg);
        return 0;
    case O_METRIC:
        if ((o->metric = sq_ab_metric_parse(optarg)) < 0)
            return sq_cli_usage_error(FACE,
                                      "%s: '%s' is not a metric (rps, p50, p99, cpu or "
                                      "server-cpu)",
                                      flag, optarg);
        return 0;
    case O_WATCH:
    case O_WATCH_NAME: {
        char err[512];
        if (sq_watch_opts_add(&o->watch, opt == O_WATCH_NAME, flag, optarg, err, sizeof(err)) < 0)
            return sq_cli_usage_error(FACE, "%s", err);
        return 0;
    }
    case O_NO_NULL:
        o->no_null = true;
        return 0;
    case O_SEED:
        if (sq_parse_u64(optarg, 0, UINT64_MAX, 0, &o->seed) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a number", flag, optarg);
        return 0;
    case O_JSON:
    case O_HTML:
        if (!optarg[0])
            return sq_cli_usage_error(FACE, "%s: '' is not a file name", flag);
        *(opt == O_JSON ? &o->json_path : &o->html_path) = optarg;
        return 0;
    case 'q':
        o->quiet = true;
        return 0;
    case 'h':
        fputs(ab_usage, stdout);
        return SQ_EXIT_DONE;
    }
    return sq_cli_flag_refused(FACE, longs, opt, flag);
}

/* The arms' servers: --server-a and --server-b name the first two arms, --server NAME='CMD'
 * any arm, one server an arm. Returns 0 or the exit status after printing why. */
static int arm_servers(struct opts *o)
{
    const char *why;
    for (int k = 0; k < 2; k++) {
        const char *cmd = k ? o->server_b : o->server_a;
        if (!cmd)
            continue;
        struct arm *a = &o->arms[k];
        if (sq_args_split(cmd, &a->server, &a->nserver, &why) < 0 || a->nserver == 0)
            return sq_cli_usage_error(FACE, "%s: '%s': %s", k ? "--server-b" : "--server-a", cmd,
                                      a->nserver ? why : "no command");
    }
    for (uint32_t i = 0; i < o->nservers; i++) {
        const char *nm = o->servers[i].name, *eq = strchr(nm, '=');
        char name[40];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - nm), nm);
        struct arm *a = find_arm(o, name);
        if (!a)
            return sq_cli_usage_error(FACE, "--server: '%s': no arm is named %s", nm, name);
        if (a->server)
            return sq_cli_usage_error(FACE, "--server: '%s': arm %s has a server already", nm,
                                      name);
        if (sq_args_split(o->servers[i].cmd, &a->server, &a->nserver, &why) < 0 ||
            a->nserver == 0) {
            free(a->server);
            a->server = NULL;
            return sq_cli_usage_error(FACE, "--server: '%s': %s", nm,
                                      a->nserver ? why : "no command");
        }
    }
    return 0;
}

/* Each arm's arguments, checked as its runs will read them, and each server's program found,
 * before anything runs. Returns 0 or the exit status after printing why. */
static int check_arms(struct opts *o)
{
    for (uint32_t i = 0; i < o->narms; i++) {
        struct arm *a = &o->arms[i];
        char err[1024], dur[32];
        const char *extra[2] = {"-d", dur};
        snprintf(dur, sizeof(dur), "%lldms", (long long)(o->duration_ns / SQ_NS_PER_MS));
        if (sq_cli_check_run_args((const char *const *)a->args, a->nargs, extra,
                                  a->sets_length ? 0 : 2, err, sizeof(err)) < 0)
            return sq_cli_usage_error(FACE, "--arm %s: %s", a->name, err);
    }
    for (uint32_t i = 0; i < o->narms; i++) {
        struct arm *a = &o->arms[i];
        if (!a->server)
            continue;
        char path[4096];
        if (sq_proc_which(a->server[0], path, sizeof(path)) < 0)
            return sq_cli_usage_error(FACE, "arm %s's server: no program '%s' (PATH searched)",
                                      a->name, a->server[0]);
        if (!a->url)
            return sq_cli_usage_error(FACE,
                                      "arm %s has a server but no http:// URL to know when it "
                                      "listens",
                                      a->name);
    }
    return 0;
}

/* The flags, then the arms' servers and arguments checked. Returns 0, SQ_EXIT_DONE or the exit
 * status after printing why. */
static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"arm", required_argument, NULL, O_ARM},
        {"server-a", required_argument, NULL, O_SERVER_A},
        {"server-b", required_argument, NULL, O_SERVER_B},
        {"server", required_argument, NULL, O_SERVER},
        {"rounds", required_argument, NULL, O_ROUNDS},
        {"duration", required_argument, NULL, O_DURATION},
        {"cooldown", required_argument, NULL, O_COOLDOWN},
        {"metric", required_argument, NULL, O_METRIC},
        {"watch", required_argument, NULL, O_WATCH},
        {"watch-name", required_argument, NULL, O_WATCH_NAME},
        {"no-null", no_argument, NULL, O_NO_NULL},
        {"seed", required_argument, NULL, O_SEED},
        {"ready-timeout", required_argument, NULL, O_READY_TIMEOUT},
        {"json", required_argument, NULL, O_JSON},
        {"html", required_argument, NULL, O_HTML},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int rc = sq_cli_getopt(argc, argv, ":qh", longs, take_flag, o);
    if (rc)
        return rc;
    if (optind < argc)
        return sq_cli_usage_error(FACE, "unexpected '%s' (each arm goes in --arm NAME='ARGS')",
                                  argv[optind]);
    if (o->narms < 2)
        return sq_cli_usage_error(FACE, "two arms at least: --arm A='URL flags' --arm B='URL "
                                        "flags'");
    if ((rc = arm_servers(o)) != 0)
        return rc;
    return check_arms(o);
}

/* ---- one run of an arm ---- */

/* Arm a's server started and listening (a TCP connect to the arm's URL). Returns 0 with *spid
 * set, or the exit status to stop with after printing why (the server stopped again). */
static int server_up(const struct opts *o, const struct arm *a, pid_t *spid)
{
    struct sq_cli_probe_url u;
    const char *why;
    if (sq_cli_probe_url(a->url, &u, &why) < 0) {
        sq_cli_error(FACE, "arm %s: '%s': %s", a->name, a->url, why);
        return SQ_EXIT_USAGE;
    }
    int rc = sq_proc_spawn((const char *const *)a->server, NULL, spid);
    if (rc < 0) {
        sq_cli_error(FACE, "arm %s: cannot start its server '%s': %s", a->name, a->server[0],
                     sq_strerror(rc));
        *spid = -1;
        return SQ_EXIT_FAIL;
    }
    int64_t at;
    int status = 0, last = 0;
    rc = sq_cli_wait_ready(*spid, &u, false, o->ready_timeout_ns, &at, &status, &last);
    if (rc == 0)
        return 0;
    char st[96];
    if (rc == -ECHILD)
        sq_cli_error(FACE, "arm %s: its server %s before it listened", a->name,
                     sq_proc_status_text(status, st, sizeof(st)));
    else if (rc != -EINTR) /* Ctrl-C: the face says it once, for the whole run */
        sq_cli_error(FACE, "arm %s: its server did not listen within %.1fs", a->name,
                     (double)o->ready_timeout_ns / 1e9);
    if (rc != -ECHILD) /* -ECHILD: it exited, and was reaped */
        sq_proc_stop(*spid, 5 * SQ_NS_PER_S, NULL);
    *spid = -1;
    return rc == -EINTR ? SQ_EXIT_INTERRUPTED : SQ_EXIT_FAIL;
}

/* One run of arm a in round r: its server (if any) up, the child run, the server down. Returns
 * 0, or an exit status to stop with (after printing why). */
static int run_one(struct opts *o, struct arm *a, uint32_t r, const char **watch_args, int nwatch)
{
    pid_t spid = -1;
    char pidtxt[24];
    const char *args[MAX_ARGS + SQ_WATCH_MAX * 2 + 8];
    int n = 0;
    for (int i = 0; i < a->nargs; i++)
        args[n++] = a->args[i];
    char dur[32];
    if (!a->sets_length) {
        snprintf(dur, sizeof(dur), "%lldms", (long long)(o->duration_ns / SQ_NS_PER_MS));
        args[n++] = "-d";
        args[n++] = dur;
    }
    for (int i = 0; i < nwatch; i++)
        args[n++] = watch_args[i];
    if (a->server) {
        int rc = server_up(o, a, &spid);
        if (rc)
            return rc;
        snprintf(pidtxt, sizeof(pidtxt), "%d", (int)spid);
        args[n++] = "--watch";
        args[n++] = pidtxt;
    }
    struct sq_cli_child c;
    int rc = sq_cli_child_start(&c, args, n);
    if (rc < 0) {
        sq_cli_error(FACE, "arm %s: cannot start squall: %s", a->name, sq_strerror(rc));
        if (spid > 0)
            sq_proc_stop(spid, 5 * SQ_NS_PER_S, NULL);
        return SQ_EXIT_FAIL;
    }
    int64_t limit = (a->sets_length ? 3600 * SQ_NS_PER_S : o->duration_ns) + RUN_SLACK;
    int code;
    json_t *doc = NULL;
    char err[512];
    sq_cli_child_finish(&c, limit, &code, &doc, err, sizeof(err));
    if (spid > 0)
        sq_proc_stop(spid, 5 * SQ_NS_PER_S, NULL);
    double *v = &a->values[(size_t)r * SQ_AB_NMETRICS];
    a->exit[r] = code;
    if (doc) {
        sq_ab_run_values(doc, v);
        const char *mode = json_string_value(json_object_get(doc, "mode"));
        a->open |= mode && strcmp(mode, "open-loop") == 0;
        json_decref(doc);
    }
    if (sq_cli_instr_interrupted())
        return SQ_EXIT_INTERRUPTED;
    if (code == SQ_EXIT_USAGE) {
        sq_cli_error(FACE, "--arm %s: %s", a->name, err[0] ? err : "its arguments were refused");
        return SQ_EXIT_USAGE;
    }
    if (code != 0 && !o->quiet)
        fprintf(stderr, "  %s: the run exited %d%s%s\n", a->name, code, err[0] ? ": " : "", err);
    return 0;
}

/* ---- the command: parse -> prepare -> run -> render ---- */

/* What the phases of one `squall ab` share. */
struct abcmd {
    struct opts o;
    const char *watch_args[SQ_WATCH_MAX * 2]; /* --watch/--watch-name, as each run gets them */
    int nwatch;
    struct sq_cli_docfiles files;
    uint32_t k, rounds;       /* arms (the null test's included); rounds asked */
    uint32_t *order;          /* per round, the arms' order (k each) */
    struct sq_ab_arm_in *ins; /* per arm, what the statistics read */
    uint32_t done;            /* rounds every arm of which ran */
    bool stopped;             /* Ctrl-C: what completed is compared, marked interrupted */
};

/* The watched processes must exist now; each run gets the same flags. Returns 0 or the exit
 * status. */
static int watch_args(struct abcmd *c)
{
    struct sq_watch *w = NULL;
    char err[512];
    int rc = sq_watch_opts_build(&c->o.watch, &w, err, sizeof(err));
    sq_watch_free(w);
    if (rc < 0)
        return rc == -SQ_EUSAGE ? sq_cli_usage_error(FACE, "%s", err) : SQ_EXIT_FAIL;
    for (size_t i = 0; i < c->o.watch.n; i++) {
        c->watch_args[c->nwatch++] = c->o.watch.by_name[i] ? "--watch-name" : "--watch";
        c->watch_args[c->nwatch++] = c->o.watch.arg[i];
    }
    return 0;
}

/* The watched processes, the output files, the null test's arm (the base arm again, in the same
 * rounds) and every arm's per-round figures. Returns 0 or the exit status. */
static int ab_prepare(struct abcmd *c)
{
    struct opts *o = &c->o;
    int rc = watch_args(c);
    if (rc)
        return rc;
    c->files = (struct sq_cli_docfiles){
        .face = FACE, .json_path = o->json_path, .html_path = o->html_path};
    if ((rc = sq_cli_docfiles_open(&c->files)) != 0)
        return rc;
    if (!o->no_null) {
        struct arm *n = &o->arms[o->narms], *base = &o->arms[0];
        *n = *base; /* shares base's args and server: free_opts frees them once */
        n->null_test = true;
        size_t len = strlen(base->name) + 2;
        n->name = malloc(len);
        if (!n->name)
            return SQ_EXIT_FAIL;
        snprintf(n->name, len, "%s'", base->name);
        o->narms++;
    }
    c->k = o->narms;
    c->rounds = (uint32_t)o->rounds;
    c->order = calloc((size_t)c->rounds * c->k, sizeof(*c->order));
    c->ins = calloc(c->k, sizeof(*c->ins));
    if (!c->order || !c->ins)
        return SQ_EXIT_FAIL;
    for (uint32_t i = 0; i < c->k; i++) {
        struct arm *a = &o->arms[i];
        a->exit = malloc(c->rounds * sizeof(*a->exit));
        a->values = malloc((size_t)c->rounds * SQ_AB_NMETRICS * sizeof(*a->values));
        if (!a->exit || !a->values)
            return SQ_EXIT_FAIL;
        for (uint32_t r = 0; r < c->rounds; r++)
            a->exit[r] = -1;
        for (size_t v = 0; v < (size_t)c->rounds * SQ_AB_NMETRICS; v++)
            a->values[v] = NAN;
    }
    return 0;
}

/* Round r: every arm once, in the round's order, a cooldown before each run but the very first.
 * Returns 0 (c->stopped set on Ctrl-C) or the exit status to stop with. */
static int ab_round(struct abcmd *c, uint32_t r, bool *first)
{
    struct opts *o = &c->o;
    sq_ab_order(c->k, r, &c->order[(size_t)r * c->k]);
    if (!o->quiet)
        fprintf(stderr, "round %u/%u:", r + 1, c->rounds);
    for (uint32_t j = 0; j < c->k; j++) {
        struct arm *a = &o->arms[c->order[(size_t)r * c->k + j]];
        if (!*first && !sq_cli_instr_sleep(o->cooldown_ns)) {
            c->stopped = true;
            break;
        }
        *first = false;
        int rc = run_one(o, a, r, c->watch_args, c->nwatch);
        if (rc == SQ_EXIT_INTERRUPTED) {
            c->stopped = true;
            break;
        }
        if (rc != 0)
            return rc; /* the round's line is left open: the error is the last word */
        if (!o->quiet) {
            double v = a->values[(size_t)r * SQ_AB_NMETRICS + SQ_AB_RPS];
            if (isfinite(v))
                fprintf(stderr, " %s %.0f req/s", a->name, v);
            else
                fprintf(stderr, " %s —", a->name);
        }
    }
    if (!o->quiet)
        fputc('\n', stderr);
    return 0;
}

/* The rounds, until the last or Ctrl-C. Returns 0 when at least one round completed, or the
 * exit status after printing why. */
static int ab_run(struct abcmd *c)
{
    const struct opts *o = &c->o;
    sq_cli_instr_signals();
    if (!o->quiet)
        fprintf(stderr, "squall ab: %u arms%s × %u rounds × %.1fs, %.1fs cooldown\n",
                o->no_null ? c->k : c->k - 1, o->no_null ? "" : " + null test", c->rounds,
                (double)o->duration_ns / 1e9, (double)o->cooldown_ns / 1e9);
    bool first = true;
    for (uint32_t r = 0; r < c->rounds && !c->stopped; r++) {
        int rc = ab_round(c, r, &first);
        if (rc)
            return rc;
        if (!c->stopped)
            c->done++;
    }
    if (c->stopped && c->done == 0) {
        sq_cli_error(FACE, "interrupted before a round completed: nothing to compare");
        return SQ_EXIT_INTERRUPTED;
    }
    if (c->stopped)
        sq_cli_error(FACE,
                     "interrupted: every run and server it started was stopped; the %u round%s "
                     "that completed %s compared, marked interrupted",
                     c->done, c->done == 1 ? "" : "s", c->done == 1 ? "is" : "are");
    return 0;
}

/* The statistics' document of the rounds that completed, or NULL when out of memory. */
static json_t *ab_doc(struct abcmd *c)
{
    const struct opts *o = &c->o;
    /* The verdict's metric: as asked, else requests per second, or p50 when the runs were open
     * loop (a fixed rate makes the rate the same in every arm). */
    enum sq_ab_metric primary = SQ_AB_RPS;
    if (o->metric >= 0)
        primary = (enum sq_ab_metric)o->metric;
    else if (o->arms[0].open)
        primary = SQ_AB_P50;
    for (uint32_t i = 0; i < c->k; i++) {
        const struct arm *a = &o->arms[i];
        c->ins[i] = (struct sq_ab_arm_in){
            .name = a->name,
            .args = (const char *const *)a->args,
            .nargs = a->nargs,
            .server = (const char *const *)a->server,
            .nserver = a->nserver,
            .null_test = a->null_test,
            .exit = a->exit,
            .values = a->values,
        };
    }
    struct sq_ab_in in = {
        .arms = c->ins,
        .narms = c->k,
        .rounds = c->done,
        .order = c->order,
        .duration_ns = o->duration_ns,
        .cooldown_ns = o->cooldown_ns,
        .seed = o->seed,
        .iters = 10000,
        .level = 0.95,
        .primary = primary,
    };
    return sq_ab_doc(&in);
}

/* The document, its table and files; the exit status. */
static int ab_render(struct abcmd *c)
{
    const struct opts *o = &c->o;
    json_t *doc = ab_doc(c);
    if (!doc || (c->stopped && json_object_set_new(doc, "interrupted", json_true()) < 0)) {
        sq_cli_error(FACE, "out of memory");
        json_decref(doc);
        return SQ_EXIT_FAIL;
    }
    int exit_code = c->stopped ? SQ_EXIT_INTERRUPTED : SQ_EXIT_OK;
    for (uint32_t i = 0; i < c->k; i++) {
        bool any = false;
        for (uint32_t r = 0; r < c->done; r++)
            any |= o->arms[i].exit[r] == 0;
        if (!any) {
            sq_cli_error(FACE, "arm %s completed no run", o->arms[i].name);
            exit_code = SQ_EXIT_FAIL;
        }
    }
    bool json_stdout = sq_cli_docfiles_json_stdout(&c->files);
    if (!o->quiet) {
        fputc('\n', json_stdout ? stderr : stdout);
        if (sq_ab_table(doc, json_stdout ? stderr : stdout) < 0)
            exit_code = SQ_EXIT_FAIL;
    }
    if (sq_cli_docfiles_write(&c->files, doc, sq_ab_html) < 0)
        exit_code = SQ_EXIT_FAIL;
    json_decref(doc);
    return exit_code;
}

int sq_cli_ab(int argc, char **argv)
{
    struct abcmd c = {.o = {.rounds = 8,
                            .seed = 1,
                            .duration_ns = 5 * SQ_NS_PER_S,
                            .cooldown_ns = 2 * SQ_NS_PER_S,
                            .ready_timeout_ns = 30 * SQ_NS_PER_S,
                            .metric = -1}};
    int rc = parse(argc, argv, &c.o);
    if (rc == 0)
        rc = ab_prepare(&c);
    if (rc == 0)
        rc = ab_run(&c);
    if (rc == 0)
        rc = ab_render(&c);
    sq_cli_docfiles_discard(&c.files); /* not committed: nothing under its name */
    free(c.order);
    free(c.ins);
    free_opts(&c.o);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
