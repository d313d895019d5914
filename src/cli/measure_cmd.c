/* cli/measure_cmd.c - `squall measure --spawn 'CMD ARGS' --ready URL [--load 'ARGS'] [--idle D]
 * [--after D] [--repeat N]`: a server's life, measured.
 *
 *   cold start  spawn -> the first 2xx on the ready URL, --repeat times (the server is stopped
 *               between repeats and kept running after the last)
 *   idle        the server and its children sampled once a second from /proc for --idle
 *   load        the same while `squall ARGS --watch PID` runs against it (when --load is given)
 *   after       the same for --after: does the memory come back?
 *
 * The document and its table come from output/instr.h; the sampling is proc/watch.h's.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "face/flags.h"
#include "cli/instr_run.h"
#include "face/probe.h"
#include "output/instr.h"
#include "output/json.h"
#include "proc/spawn.h"
#include "proc/watch.h"

#define FACE       "squall measure"
#define MAX_REPEAT 100
#define MAX_PHASE  (24 * 3600 * SQ_NS_PER_S)

static const char measure_usage[] =
    "usage: squall measure --spawn 'CMD ARGS' --ready URL [--load 'SQUALL ARGS'] [flags]\n"
    "\n"
    "Starts a server and measures its life: cold start (spawn to the first 2xx on the ready\n"
    "URL, median and spread over repeats), its CPU, RSS, threads and open files idle, under a\n"
    "load run, and after it (does memory come back?), and the size of its binary.\n"
    "\n"
    "      --spawn 'CMD ARGS'   the server's command line (split like a shell, no expansions;\n"
    "                           it runs in its own process group, stopped with SIGTERM)\n"
    "      --ready URL          an http:// URL that answers 2xx once the server is ready\n"
    "      --load 'ARGS'        a squall run against it, e.g. 'http://127.0.0.1:8080/ -c 64\n"
    "                           -d 30s' (a leading 'squall' is dropped)\n"
    "      --idle D             how long to sample it idle (default 60s; 0 skips)\n"
    "      --after D            how long to sample it after the load (default 60s; 0 skips)\n"
    "      --repeat N           cold starts to measure (default 5)\n"
    "      --ready-timeout D    the longest a start may take (default 30s)\n"
    "      --json FILE|-        write the document (schema squall.measure/1; - for stdout)\n"
    "      --html FILE          write a self-contained HTML page\n"
    "  -q, --quiet              no table on the terminal\n"
    "  -h, --help               this help\n"
    "\n"
    "exit status: 0 done, 1 the server did not start or the load run failed, 2 bad flags,\n"
    "             105 interrupted (SIGINT/SIGTERM: the server is stopped, what was measured\n"
    "                 is written marked interrupted)\n";

/* ---- the flags ---- */

struct opts {
    const char *spawn, *ready, *load, *json_path, *html_path;
    int64_t idle_ns, after_ns, ready_timeout_ns;
    uint64_t repeat;
    bool quiet;
};

/* One flag getopt_long returned. Returns 0, SQ_EXIT_DONE (--help answered) or the exit status
 * after printing why. */
static int take_flag(void *ud, const struct option *longs, int opt, const char *flag)
{
    struct opts *o = ud;
    int64_t *dur = opt == 'I' ? &o->idle_ns : opt == 'A' ? &o->after_ns : &o->ready_timeout_ns;
    switch (opt) {
    case 'S':
        o->spawn = optarg;
        return 0;
    case 'R':
        o->ready = optarg;
        return 0;
    case 'L':
        o->load = optarg;
        return 0;
    case 'I':
    case 'A':
    case 'T': /* --idle 0 and --after 0 skip their phase; a ready timeout must be positive */
        if (sq_parse_duration(optarg, SQ_NS_PER_S, dur) < 0 || *dur > MAX_PHASE ||
            (opt == 'T' && *dur <= 0))
            return sq_cli_usage_error(FACE, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)",
                                      flag, optarg);
        return 0;
    case 'N':
        if (sq_parse_u64(optarg, 1, MAX_REPEAT, 0, &o->repeat) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a count (1..%d)", flag, optarg,
                                      MAX_REPEAT);
        return 0;
    case 'J':
    case 'H':
        if (!optarg[0])
            return sq_cli_usage_error(FACE, "%s: '' is not a file name", flag);
        *(opt == 'J' ? &o->json_path : &o->html_path) = optarg;
        return 0;
    case 'q':
        o->quiet = true;
        return 0;
    case 'h':
        fputs(measure_usage, stdout);
        return SQ_EXIT_DONE;
    default:
        return sq_cli_flag_refused(FACE, longs, opt, flag);
    }
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"spawn", required_argument, NULL, 'S'},
        {"ready", required_argument, NULL, 'R'},
        {"load", required_argument, NULL, 'L'},
        {"idle", required_argument, NULL, 'I'},
        {"after", required_argument, NULL, 'A'},
        {"repeat", required_argument, NULL, 'N'},
        {"ready-timeout", required_argument, NULL, 'T'},
        {"json", required_argument, NULL, 'J'},
        {"html", required_argument, NULL, 'H'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int rc = sq_cli_getopt(argc, argv, ":qh", longs, take_flag, o);
    if (rc)
        return rc;
    if (optind < argc)
        return sq_cli_usage_error(FACE, "unexpected '%s' (the command goes in --spawn '...')",
                                  argv[optind]);
    if (!o->spawn)
        return sq_cli_usage_error(FACE, "--spawn is required: the server's command line");
    if (!o->ready)
        return sq_cli_usage_error(FACE, "--ready is required: a URL that answers 2xx when the "
                                        "server is ready");
    return 0;
}

/* ---- sampling a phase ---- */

/* The samples of every phase, and the phase being measured. */
struct sampler {
    struct sq_watch *watch;
    int64_t spawned; /* when the last server was spawned */
    int64_t prev;    /* the previous sample */
    struct sq_measure_sample *v;
    size_t n, cap;
};

static int push(struct sampler *s, const struct sq_measure_sample *x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        struct sq_measure_sample *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *x;
    return 0;
}

/* Samples once a second for dur (or, with child, until the child exits), into the phase. */
static void sample_phase(struct sampler *s, const char *name, int64_t dur,
                         struct sq_cli_child *child, struct sq_measure_phase *ph)
{
    struct sq_watch_totals t0, t1;
    struct sq_watch_tick tk;
    int64_t start = sq_now_ns(), next = start + SQ_NS_PER_S;
    /* The phase's first reading: where its RSS starts. */
    sq_watch_sample(s->watch, start, &tk);
    s->prev = start;
    ph->on = true;
    ph->rss_start = ph->rss_end = ph->rss_peak = tk.rss_bytes;
    ph->threads_max = tk.threads;
    ph->procs_max = tk.procs;
    ph->fds_max = tk.fds;
    sq_watch_totals(s->watch, &t0);
    for (;;) {
        bool done = child ? sq_cli_child_poll(child) : sq_now_ns() >= start + dur;
        if (done || sq_cli_instr_interrupted())
            break;
        int64_t now = sq_now_ns();
        int64_t wake = next;
        if (!child && start + dur < wake)
            wake = start + dur;
        if (child && wake - now > 20 * SQ_NS_PER_MS)
            wake = now + 20 * SQ_NS_PER_MS; /* notice the child's end soon */
        if (wake > now)
            sq_cli_instr_sleep(wake - now);
        now = sq_now_ns();
        if (now < next && !(!child && now >= start + dur))
            continue;
        sq_watch_sample(s->watch, now, &tk);
        double secs = (double)(now - s->prev) / 1e9;
        s->prev = now;
        next += SQ_NS_PER_S;
        if (next <= now)
            next = now + SQ_NS_PER_S;
        struct sq_measure_sample x = {
            .t_s = (double)(now - s->spawned) / 1e9,
            .phase = name,
            .cpu_pct =
                secs > 0 ? 100.0 * (double)(tk.cpu_user_ns + tk.cpu_sys_ns) / 1e9 / secs : NAN,
            .rss_bytes = tk.rss_bytes,
            .threads = tk.threads,
            .fds = tk.fds,
        };
        push(s, &x);
        ph->rss_end = tk.rss_bytes;
        if (tk.rss_bytes > ph->rss_peak)
            ph->rss_peak = tk.rss_bytes;
        if (tk.threads > ph->threads_max)
            ph->threads_max = tk.threads;
        if (tk.procs > ph->procs_max)
            ph->procs_max = tk.procs;
        if (tk.fds > ph->fds_max)
            ph->fds_max = tk.fds;
    }
    int64_t end = sq_now_ns();
    sq_watch_sample(s->watch, end, &tk); /* the tail since the last whole second */
    s->prev = end;
    ph->rss_end = tk.rss_bytes;
    if (tk.rss_bytes > ph->rss_peak)
        ph->rss_peak = tk.rss_bytes;
    sq_watch_totals(s->watch, &t1);
    ph->duration_ns = end - start;
    ph->cpu_user_ns = t1.cpu_user_ns - t0.cpu_user_ns;
    ph->cpu_sys_ns = t1.cpu_sys_ns - t0.cpu_sys_ns;
}

/* Prints why the server did not become ready; returns the exit status. */
static int not_ready(int rc, const char *cmd, int status, int last, int64_t timeout)
{
    char st[96];
    if (rc == -EINTR) {
        sq_cli_error(FACE, "interrupted before the server was ready: nothing was measured");
        return SQ_EXIT_INTERRUPTED;
    }
    if (rc == -ECHILD)
        sq_cli_error(FACE, "the server '%s' %s before it was ready", cmd,
                     sq_proc_status_text(status, st, sizeof(st)));
    else if (last)
        sq_cli_error(FACE, "the server answered %d, not 2xx, for %.1fs (--ready-timeout)", last,
                     (double)timeout / 1e9);
    else
        sq_cli_error(FACE, "the server did not answer within %.1fs (--ready-timeout)",
                     (double)timeout / 1e9);
    return SQ_EXIT_FAIL;
}

/* ---- the command: parse -> prepare -> run -> render ---- */

/* What the phases of one `squall measure` share. */
struct measurecmd {
    struct opts o;
    char **cmd, **load; /* --spawn's words, --load's (without a leading "squall") */
    int ncmd, nload;
    char exe[4096]; /* the program --spawn runs, found on PATH */
    struct sq_cli_probe_url ready;
    struct sq_cli_docfiles files;
    struct sq_watch *watch;
    struct sampler smp;
    double *cold; /* per repeat, ms */
    pid_t pid;    /* the server (-1: none running) */
    struct sq_cli_child child;
    bool child_running;
    json_t *load_doc;
    struct sq_measure_in in;
    bool stopped; /* Ctrl-C: what was measured is written, marked interrupted */
};

/* --load: its squall arguments, checked as the run will read them. Returns 0 or the exit
 * status after printing why. */
static int load_args(struct measurecmd *c)
{
    const char *load = c->o.load, *why;
    if (sq_args_split(load, &c->load, &c->nload, &why) < 0)
        return sq_cli_usage_error(FACE, "--load: '%s': %s", load, why);
    if (c->nload && strcmp(c->load[0], "squall") == 0) {
        memmove(c->load, c->load + 1, (size_t)c->nload * sizeof(*c->load)); /* keeps the NULL */
        c->nload--;
    }
    if (c->nload == 0)
        return sq_cli_usage_error(FACE, "--load: '%s' holds no squall arguments", load);
    char err[1024];
    if (sq_cli_check_run_args((const char *const *)c->load, c->nload, NULL, 0, err, sizeof(err)) <
        0)
        return sq_cli_usage_error(FACE, "--load: %s", err);
    return 0;
}

/* Everything checked before the first spawn: the command, the load's arguments, the ready URL
 * (and nothing answering there yet), the output files. Returns 0 or the exit status. */
static int measure_prepare(struct measurecmd *c)
{
    const struct opts *o = &c->o;
    const char *why;
    if (sq_args_split(o->spawn, &c->cmd, &c->ncmd, &why) < 0)
        return sq_cli_usage_error(FACE, "--spawn: '%s': %s", o->spawn, why);
    if (c->ncmd == 0)
        return sq_cli_usage_error(FACE, "--spawn: '%s' holds no command", o->spawn);
    if (sq_proc_which(c->cmd[0], c->exe, sizeof(c->exe)) < 0)
        return sq_cli_usage_error(FACE, "--spawn: '%s': no program '%s' (PATH searched)", o->spawn,
                                  c->cmd[0]);
    int rc;
    if (o->load && (rc = load_args(c)) != 0)
        return rc;
    if (sq_cli_probe_url(o->ready, &c->ready, &why) < 0)
        return sq_cli_usage_error(FACE, "--ready: '%s': %s", o->ready, why);
    /* Something already answering there would make every cold start a lie. */
    if (sq_probe_connect(&c->ready.addr, 500 * SQ_NS_PER_MS) == 0) {
        char a[80];
        sq_addr_format(&c->ready.addr, a, sizeof(a));
        sq_cli_error(FACE, "something already listens on %s (--ready); stop it first", a);
        return SQ_EXIT_FAIL;
    }
    /* The output files first: a path that cannot be written is refused before anything runs. */
    c->files = (struct sq_cli_docfiles){
        .face = FACE, .json_path = o->json_path, .html_path = o->html_path};
    if ((rc = sq_cli_docfiles_open(&c->files)) != 0)
        return rc;
    c->cold = calloc(o->repeat, sizeof(*c->cold));
    if (!c->cold || sq_watch_new(&c->watch) < 0) {
        sq_cli_error(FACE, "out of memory");
        return SQ_EXIT_FAIL;
    }
    c->smp.watch = c->watch;
    return 0;
}

/* The cold starts: spawn to ready, --repeat times; the server is stopped between repeats and
 * left running after the last. Returns 0 or the exit status. */
static int cold_starts(struct measurecmd *c)
{
    const struct opts *o = &c->o;
    struct sq_spawn_io io = {.out_fd = -1, .err_fd = -1};
    for (uint64_t r = 0; r < o->repeat; r++) {
        int64_t t0 = sq_now_ns();
        int rc = sq_proc_spawn((const char *const *)c->cmd, &io, &c->pid);
        if (rc < 0) {
            sq_cli_error(FACE, "--spawn: cannot start '%s': %s", c->cmd[0], sq_strerror(rc));
            c->pid = -1;
            return SQ_EXIT_FAIL;
        }
        int64_t ready_at;
        int status = 0, last = 0;
        rc = sq_cli_wait_ready(c->pid, &c->ready, true, o->ready_timeout_ns, &ready_at, &status,
                               &last);
        if (rc < 0) {
            if (rc == -ECHILD)
                c->pid = -1; /* reaped */
            return not_ready(rc, o->spawn, status, last, o->ready_timeout_ns);
        }
        c->cold[r] = (double)(ready_at - t0) / 1e6;
        c->smp.spawned = t0;
        if (!o->quiet)
            fprintf(stderr, "cold start %llu/%llu: %.1f ms\n", (unsigned long long)r + 1,
                    (unsigned long long)o->repeat, c->cold[r]);
        if (r + 1 < o->repeat) {
            sq_proc_stop(c->pid, 5 * SQ_NS_PER_S, NULL);
            c->pid = -1;
        }
    }
    return 0;
}

/* The load phase: `squall ARGS --watch PID` as a child, sampled while it runs. Returns 0 (a run
 * that failed is said and measured all the same) or the exit status. */
static int load_phase(struct measurecmd *c)
{
    /* The load run watches the server itself, so its CPU per request covers exactly the run;
     * this face samples the phase as well. */
    const char **args = calloc((size_t)c->nload + 3, sizeof(*args));
    char pidtxt[24];
    snprintf(pidtxt, sizeof(pidtxt), "%d", (int)c->pid);
    if (!args) {
        sq_cli_error(FACE, "out of memory");
        return SQ_EXIT_FAIL;
    }
    for (int i = 0; i < c->nload; i++)
        args[i] = c->load[i];
    args[c->nload] = "--watch";
    args[c->nload + 1] = pidtxt;
    int rc = sq_cli_child_start(&c->child, args, c->nload + 2);
    free(args);
    if (rc < 0) {
        sq_cli_error(FACE, "--load: cannot start squall: %s", sq_strerror(rc));
        return SQ_EXIT_FAIL;
    }
    c->child_running = true;
    if (!c->o.quiet)
        fprintf(stderr, "load: squall %s\n", c->o.load);
    sample_phase(&c->smp, "load", 0, &c->child, &c->in.load);
    char err[512];
    sq_cli_child_finish(&c->child, 10 * SQ_NS_PER_S, &c->in.load_exit, &c->load_doc, err,
                        sizeof(err));
    c->child_running = false;
    c->in.load_result = c->load_doc;
    if (c->in.load_exit == SQ_EXIT_USAGE)
        return sq_cli_usage_error(FACE, "--load: the run refused its flags: %s", err);
    if (c->in.load_exit != 0 && !sq_cli_instr_interrupted())
        sq_cli_error(FACE, "--load: the run exited %d%s%s", c->in.load_exit, err[0] ? ": " : "",
                     err);
    return 0;
}

/* The cold starts, then the server watched idle, under load and after; the server stopped.
 * Ctrl-C skips the phases left. Returns 0 or the exit status. */
static int measure_run(struct measurecmd *c)
{
    const struct opts *o = &c->o;
    sq_cli_instr_signals();
    int rc = cold_starts(c);
    if (rc)
        return rc;
    if (sq_watch_add_pid(c->watch, c->pid, true) < 0) {
        sq_cli_error(FACE, "the server (pid %d) exited right after it was ready", (int)c->pid);
        return SQ_EXIT_FAIL;
    }
    sq_watch_start(c->watch, sq_now_ns());
    c->in = (struct sq_measure_in){
        .command = (const char *const *)c->cmd,
        .ncommand = c->ncmd,
        .ready_url = o->ready,
        .binary_path = c->exe,
        .binary_bytes = -1,
        .cold_ms = c->cold,
        .ncold = o->repeat,
        .load_args = (const char *const *)c->load,
        .nload_args = c->nload,
    };
    struct stat st;
    if (stat(c->exe, &st) == 0)
        c->in.binary_bytes = st.st_size;
    if (o->idle_ns > 0 && !sq_cli_instr_interrupted()) {
        if (!o->quiet)
            fprintf(stderr, "idle for %.0fs\n", (double)o->idle_ns / 1e9);
        sample_phase(&c->smp, "idle", o->idle_ns, NULL, &c->in.idle);
    }
    if (c->load && !sq_cli_instr_interrupted() && (rc = load_phase(c)) != 0)
        return rc;
    if (o->after_ns > 0 && !sq_cli_instr_interrupted()) {
        if (!o->quiet)
            fprintf(stderr, "after for %.0fs\n", (double)o->after_ns / 1e9);
        sample_phase(&c->smp, "after", o->after_ns, NULL, &c->in.after);
    }
    sq_proc_stop(c->pid, 5 * SQ_NS_PER_S, NULL);
    c->pid = -1;
    c->stopped = sq_cli_instr_interrupted();
    if (c->stopped)
        sq_cli_error(FACE, "interrupted: the server was stopped; what was measured is written, "
                           "marked interrupted");
    return 0;
}

/* The document, its table and files; the exit status. */
static int measure_render(struct measurecmd *c)
{
    c->in.samples = c->smp.v;
    c->in.nsamples = c->smp.n;
    json_t *doc = sq_measure_doc(&c->in);
    if (!doc || (c->stopped && json_object_set_new(doc, "interrupted", json_true()) < 0)) {
        sq_cli_error(FACE, "out of memory");
        json_decref(doc);
        return SQ_EXIT_FAIL;
    }
    int exit_code = c->stopped             ? SQ_EXIT_INTERRUPTED
                    : c->in.load_exit == 0 ? SQ_EXIT_OK
                                           : SQ_EXIT_FAIL;
    bool json_stdout = sq_cli_docfiles_json_stdout(&c->files);
    if (!c->o.quiet && sq_measure_table(doc, json_stdout ? stderr : stdout) < 0)
        exit_code = SQ_EXIT_FAIL;
    if (sq_cli_docfiles_write(&c->files, doc, sq_measure_html) < 0)
        exit_code = SQ_EXIT_FAIL;
    json_decref(doc);
    return exit_code;
}

static void measure_dispose(struct measurecmd *c)
{
    sq_cli_docfiles_discard(&c->files); /* not committed: nothing under its name */
    if (c->child_running)
        sq_cli_child_abort(&c->child);
    if (c->pid > 0)
        sq_proc_stop(c->pid, 5 * SQ_NS_PER_S, NULL);
    json_decref(c->load_doc);
    sq_watch_free(c->watch);
    free(c->smp.v);
    free(c->cold);
    free(c->cmd);
    free(c->load);
}

int sq_cli_measure(int argc, char **argv)
{
    struct measurecmd c = {.o = {.idle_ns = 60 * SQ_NS_PER_S,
                                 .after_ns = 60 * SQ_NS_PER_S,
                                 .ready_timeout_ns = 30 * SQ_NS_PER_S,
                                 .repeat = 5},
                           .pid = -1};
    int rc = parse(argc, argv, &c.o);
    if (rc == 0)
        rc = measure_prepare(&c);
    if (rc == 0)
        rc = measure_run(&c);
    if (rc == 0)
        rc = measure_render(&c);
    measure_dispose(&c);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
