/* cli/instr_run.c - child runs, servers, probes and Ctrl-C for measure and ab (see instr_run.h). */
#include "cli/instr_run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli/cli.h"
#include "face/planrun.h"
#include "face/probe.h"
#include "face/quick.h"
#include "http/url.h"
#include "output/doc.h"
#include "output/json.h"
#include "proc/spawn.h"

#define MAX_CHILD_ARGS 512

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1; /* a repeat changes nothing: what was started is being stopped already */
}

void sq_cli_instr_signals(void)
{
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a sleep returns early */
    sigaction(SIGTERM, &sa, NULL);
}

bool sq_cli_instr_interrupted(void)
{
    return interrupted != 0;
}

bool sq_cli_instr_sleep(int64_t ns)
{
    int64_t end = sq_now_ns() + ns;
    while (!interrupted) {
        int64_t left = end - sq_now_ns();
        if (left <= 0)
            return true;
        if (left > 50 * SQ_NS_PER_MS)
            left = 50 * SQ_NS_PER_MS;
        struct timespec ts = {.tv_sec = left / SQ_NS_PER_S, .tv_nsec = left % SQ_NS_PER_S};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* ---- child runs ---- */

static int temp_file(char *path, size_t len, const char *what)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, len, "%s/squall-%s-XXXXXX", dir && *dir ? dir : "/tmp", what);
    int fd = mkstemp(path);
    return fd < 0 ? -errno : fd;
}

int sq_cli_child_start(struct sq_cli_child *c, const char *const *args, int nargs)
{
    memset(c, 0, sizeof(*c));
    if (nargs > MAX_CHILD_ARGS - 5)
        return -E2BIG;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -errno;
    self[n] = '\0';
    int jfd = temp_file(c->json_path, sizeof(c->json_path), "run");
    if (jfd < 0)
        return jfd;
    close(jfd);
    int efd = temp_file(c->err_path, sizeof(c->err_path), "err");
    if (efd < 0) {
        unlink(c->json_path);
        return efd;
    }
    const char *argv[MAX_CHILD_ARGS];
    int k = 0;
    argv[k++] = self;
    for (int i = 0; i < nargs; i++)
        argv[k++] = args[i];
    argv[k++] = "-q";
    argv[k++] = "--json";
    argv[k++] = c->json_path;
    argv[k] = NULL;
    struct sq_spawn_io io = {.out_fd = -1, .err_fd = efd};
    int rc = sq_proc_spawn(argv, &io, &c->pid);
    close(efd);
    if (rc < 0) {
        unlink(c->json_path);
        unlink(c->err_path);
        return rc;
    }
    return 0;
}

bool sq_cli_child_poll(struct sq_cli_child *c)
{
    if (!c->done && c->pid > 0 && sq_proc_reap(c->pid, &c->status) == 1)
        c->done = true;
    return c->done;
}

void sq_cli_child_finish(struct sq_cli_child *c, int64_t timeout_ns, int *exit, json_t **doc,
                         char *err, size_t len)
{
    int64_t deadline = sq_now_ns() + timeout_ns;
    while (!sq_cli_child_poll(c) && sq_now_ns() < deadline && !interrupted)
        sq_cli_instr_sleep(5 * SQ_NS_PER_MS);
    if (!c->done) {
        sq_proc_stop(c->pid, 2 * SQ_NS_PER_S, &c->status);
        c->done = true;
    }
    *exit = WIFEXITED(c->status) ? WEXITSTATUS(c->status) : 128 + WTERMSIG(c->status);
    *doc = NULL;
    if (err && len)
        err[0] = '\0';
    FILE *f = fopen(c->json_path, "rb");
    if (f) {
        char why[256];
        if (sq_report_doc_read(f, doc, why, sizeof(why)) < 0)
            *doc = NULL;
        fclose(f);
    }
    f = fopen(c->err_path, "r");
    if (f && err && len) {
        /* The first line that says something. */
        char line[1024];
        while (fgets(line, sizeof(line), f)) {
            line[strcspn(line, "\n")] = '\0';
            if (line[0]) {
                snprintf(err, len, "%s", line);
                break;
            }
        }
    }
    if (f)
        fclose(f);
    unlink(c->json_path);
    unlink(c->err_path);
}

void sq_cli_child_abort(struct sq_cli_child *c)
{
    if (c->pid > 0 && !c->done) {
        sq_proc_stop(c->pid, SQ_NS_PER_S, NULL);
        c->done = true;
    }
    if (c->json_path[0])
        unlink(c->json_path);
    if (c->err_path[0])
        unlink(c->err_path);
}

/* ---- checking a run's arguments ---- */

int sq_cli_check_run_args(const char *const *args, int nargs, const char *const *extra, int nextra,
                          char *err, size_t len)
{
    /* getopt_long permutes what it parses: a copy, with the program's name first. */
    char **v = calloc((size_t)nargs + (size_t)nextra + 2, sizeof(*v));
    if (!v)
        return -ENOMEM;
    int n = 0;
    v[n++] = (char *)"squall";
    for (int i = 0; i < nargs; i++)
        v[n++] = (char *)args[i];
    for (int i = 0; i < nextra; i++)
        v[n++] = (char *)extra[i];
    int rc;
    if (nargs > 0 && strcmp(args[0], "run") == 0) {
        struct sq_planrun_opts o;
        sq_planrun_opts_init(&o);
        rc = sq_planrun_parse_argv(&o, n - 1, v + 1, err, len);
    } else {
        struct sq_quick_opts o;
        sq_quick_opts_init(&o);
        rc = sq_quick_parse_argv(&o, n, v, err, len);
        if (rc == 0) { /* the URL, a -b @FILE, the load shape, the TLS files: no connection */
            struct sq_quick_run r;
            rc = sq_quick_prepare(&r, &o, err, len);
            sq_quick_run_dispose(&r);
            if (rc < 0 && rc != -SQ_EUSAGE)
                rc = 0; /* a lookup or the TLS library here: the run itself will say */
        }
        sq_quick_opts_dispose(&o);
    }
    free(v);
    if (rc > 0) { /* --help or --version: not a run */
        snprintf(err, len, "--help and --version do not run anything");
        return -SQ_EUSAGE;
    }
    return rc < 0 ? -SQ_EUSAGE : 0;
}

/* ---- probes ---- */

int sq_cli_probe_url(const char *url, struct sq_cli_probe_url *out, const char **why)
{
    struct sq_url u;
    int rc = sq_url_parse(url, &u, why);
    if (rc < 0)
        return rc;
    if (strcmp(u.scheme, "http") != 0) {
        sq_url_dispose(&u);
        *why = "only http:// (the probe speaks plain HTTP/1.1)";
        return -SQ_ESCHEME;
    }
    if (strlen(u.path) >= sizeof(out->path)) {
        sq_url_dispose(&u);
        *why = "the path is longer than 1023 bytes";
        return -SQ_ETOOBIG;
    }
    snprintf(out->authority, sizeof(out->authority), "%s", u.authority);
    snprintf(out->path, sizeof(out->path), "%s", u.path);
    rc = sq_resolve(u.host, u.port, &out->addr, 1, why);
    sq_url_dispose(&u);
    return rc < 0 ? rc : 0;
}

int sq_cli_wait_ready(pid_t pid, const struct sq_cli_probe_url *u, bool want_2xx,
                      int64_t timeout_ns, int64_t *ready_ns, int *status, int *last_status)
{
    int64_t deadline = sq_now_ns() + timeout_ns;
    *last_status = 0;
    for (;;) {
        if (interrupted)
            return -EINTR;
        if (sq_proc_reap(pid, status) == 1)
            return -ECHILD;
        int64_t left = deadline - sq_now_ns();
        if (left <= 0)
            return -ETIMEDOUT;
        int64_t slice = left < 2 * SQ_NS_PER_S ? left : 2 * SQ_NS_PER_S;
        int rc, code = 0;
        if (want_2xx) {
            rc = sq_probe_get(&u->addr, u->authority, u->path, slice, &code);
            if (rc == 0 && code >= 200 && code < 300) {
                *ready_ns = sq_now_ns();
                return 0;
            }
            if (rc == 0)
                *last_status = code;
        } else {
            rc = sq_probe_connect(&u->addr, slice);
            if (rc == 0) {
                *ready_ns = sq_now_ns();
                return 0;
            }
        }
        /* Refused: nothing listens yet; try again in a millisecond. A status that is not 2xx:
         * it listens but is not ready; in ten. */
        sq_cli_instr_sleep(rc == 0 ? 10 * SQ_NS_PER_MS : SQ_NS_PER_MS);
    }
}

/* ---- --json and --html ---- */

int sq_cli_docfiles_open(struct sq_cli_docfiles *d)
{
    int rc;
    if (d->json_path && strcmp(d->json_path, "-") != 0 &&
        (rc = sq_cli_file_open(d->face, "--json", d->json_path, &d->jf)) != 0)
        return rc;
    if (d->html_path && (rc = sq_cli_file_open(d->face, "--html", d->html_path, &d->hf)) != 0)
        return rc;
    return 0;
}

bool sq_cli_docfiles_json_stdout(const struct sq_cli_docfiles *d)
{
    return d->json_path && strcmp(d->json_path, "-") == 0;
}

int sq_cli_docfiles_write(struct sq_cli_docfiles *d, const json_t *doc,
                          int (*html)(const json_t *doc, FILE *f))
{
    int rc = 0;
    FILE *jf = sq_cli_docfiles_json_stdout(d) ? stdout : d->jf.f;
    if (d->json_path && sq_report_json_write(jf, doc) < 0) {
        sq_cli_error(d->face, "--json: writing '%s': %s", d->json_path, strerror(errno));
        rc = -1;
    } else if (sq_cli_file_commit(&d->jf) < 0) {
        rc = -1;
    }
    if (d->hf.f && html(doc, d->hf.f) < 0) {
        sq_cli_error(d->face, "--html: writing '%s': %s", d->html_path, strerror(errno));
        rc = -1;
    } else if (sq_cli_file_commit(&d->hf) < 0) {
        rc = -1;
    }
    return rc;
}

void sq_cli_docfiles_discard(struct sq_cli_docfiles *d)
{
    sq_cli_file_discard(&d->jf);
    sq_cli_file_discard(&d->hf);
}
