/* cli/common.c - see common.h. */
#include "cli/common.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "net/sock.h"
#include "output/html.h"
#include "output/json.h"
#include "output/progress.h"
#include "output/summary.h"

#define NOFILE_HEADROOM 64

int sq_cli_usage_error(const char *face, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s (see %s --help)\n", face, msg, face);
    return SQ_EXIT_USAGE;
}

uint32_t sq_cli_threads(uint64_t asked)
{
    if (asked)
        return (uint32_t)asked;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return (uint32_t)(cpus > 0 ? cpus : 1);
}

int sq_cli_raise_nofile(uint64_t n, const char *what)
{
    uint64_t have = 0, need = n + NOFILE_HEADROOM;
    if (sq_raise_nofile(need, &have) == 0)
        return 0;
    fprintf(stderr,
            "squall: %llu %s need %llu open files but the limit is %llu; raise it (ulimit -n) or "
            "use fewer %s\n",
            (unsigned long long)n, what, (unsigned long long)need, (unsigned long long)have, what);
    return SQ_EXIT_FAIL;
}

static volatile int stop_flag;

static void on_sigint(int sig)
{
    SQ_UNUSED(sig);
    if (stop_flag) {
        /* Second Ctrl-C: stop now, without a summary. */
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);
    }
    stop_flag = 1;
}

volatile int *sq_cli_signals_begin(void)
{
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_sigint);
    return &stop_flag;
}

void sq_cli_signals_end(void)
{
    signal(SIGINT, SIG_DFL);
}

void sq_cli_progress_init(struct sq_progress *p, bool open, double length_s)
{
    bool tty = isatty(STDERR_FILENO);
    *p = (struct sq_progress){.f = stderr,
                              .tty = tty,
                              .color = tty && !getenv("NO_COLOR"),
                              .every_s = 10,
                              .open = open,
                              .length_s = length_s};
}

FILE *sq_cli_open_out(const char *face, const char *flag, const char *path, int *exit_code)
{
    FILE *f = fopen(path, "w");
    if (!f)
        *exit_code =
            sq_cli_usage_error(face, "%s: cannot write '%s': %s", flag, path, strerror(errno));
    return f;
}

int sq_cli_outputs_open(struct sq_cli_outputs *o)
{
    int rc = 0;
    if (o->html_path && !(o->html = sq_cli_open_out(o->face, "--html", o->html_path, &rc)))
        return rc;
    if (o->json_path) {
        if (strcmp(o->json_path, "-") == 0)
            o->json = stdout;
        else if (!(o->json = sq_cli_open_out(o->face, "--json", o->json_path, &rc)))
            return rc;
    }
    return 0;
}

void sq_cli_render(const struct sq_cli_outputs *o, const json_t *doc)
{
    FILE *tf = o->json == stdout ? stderr : stdout;
    if (!o->quiet && sq_report_summary(doc, tf) < 0)
        fprintf(stderr, "squall: could not print the summary\n");
    if (o->json && sq_report_json_write(o->json, doc) < 0)
        fprintf(stderr, "squall: --json: write failed: %s\n", strerror(errno));
    if (o->html && sq_report_html(doc, o->html) < 0)
        fprintf(stderr, "squall: --html: write failed: %s\n", strerror(errno));
}

void sq_cli_outputs_close(struct sq_cli_outputs *o)
{
    if (o->json && o->json != stdout)
        fclose(o->json);
    if (o->html)
        fclose(o->html);
    o->json = o->html = NULL;
}

int sq_cli_run_status(const struct sq_result *res)
{
    if (res->c.completed)
        return SQ_EXIT_OK;
    if (!res->aborted && res->tls_error[0])
        fprintf(stderr, "squall: no request succeeded: tls: %s\n", res->tls_error);
    else
        fprintf(stderr, "squall: no request succeeded%s%s\n", res->aborted ? ": " : "",
                res->aborted ? res->abort_reason : "");
    return SQ_EXIT_FAIL;
}
