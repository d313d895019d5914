/* cli/common.c - see common.h. */
#include "cli/common.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli/cli.h"
#include "engine/flags.h"
#include "engine/netopts.h"
#include "output/html.h"
#include "output/json.h"
#include "output/progress.h"
#include "output/series.h"
#include "output/summary.h"

/* Prints msg with C escapes for control bytes, so it stays on one line whatever the user typed. */
static void put_line(const char *msg)
{
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p == '\r')
            fputs("\\r", stderr);
        else if (*p == '\n')
            fputs("\\n", stderr);
        else if (*p == '\t')
            fputs("\\t", stderr);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
}

static void vline(const char *face, const char *hint, const char *fmt, va_list ap)
{
    char msg[1024];
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    fprintf(stderr, "%s: ", face);
    put_line(msg);
    if (n >= (int)sizeof(msg))
        fputs("...", stderr); /* an overlong value is cut */
    if (hint)
        fprintf(stderr, " (see %s --help)", hint);
    fputc('\n', stderr);
}

int sq_cli_usage_error(const char *face, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(face, face, fmt, ap);
    va_end(ap);
    return SQ_EXIT_USAGE;
}

void sq_cli_error(const char *face, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(face, NULL, fmt, ap);
    va_end(ap);
}

int sq_cli_prep_error(const char *face, int rc, const char *msg)
{
    if (rc == -SQ_EUSAGE)
        return sq_cli_usage_error(face, "%s", msg);
    fprintf(stderr, "squall: %s\n", msg);
    return rc == -SQ_EPARSE ? SQ_EXIT_USAGE : SQ_EXIT_FAIL;
}

int sq_cli_tls_error(const char *face, const char *err)
{
    char msg[SQ_PREP_ERRLEN];
    sq_netopts_tls_message(err, msg, sizeof(msg));
    return sq_cli_usage_error(face, "%s", msg);
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
    if (!path[0]) {
        *exit_code = sq_cli_usage_error(face, "%s: '' is not a file name", flag);
        return NULL;
    }
    FILE *f = fopen(path, "w");
    if (!f)
        *exit_code =
            sq_cli_usage_error(face, "%s: cannot write '%s': %s", flag, path, strerror(errno));
    return f;
}

int sq_cli_series_open(struct sq_cli_series *s, const char *face, const char *csv, const char *hdr,
                       const char *ndjson, double sample, struct sq_run_config *cfg)
{
    int rc = 0;
    s->face = face;
    if (csv && !(s->csv = sq_cli_open_out(face, "--out csv", csv, &rc)))
        return rc;
    if (hdr && !(s->hdr = sq_cli_open_out(face, "--out hdr", hdr, &rc)))
        return rc;
    if (ndjson) {
        if (!(s->nd.f = sq_cli_open_out(face, "--out ndjson", ndjson, &rc)))
            return rc;
        setvbuf(s->nd.f, NULL, _IOFBF, 1 << 20);
        if (!s->nd.scenario)
            s->nd.scenario = "default";
        cfg->on_samples = sq_ndjson_write;
        cfg->samples_ud = &s->nd;
        cfg->sample_fraction = sample > 0 ? sample : 1;
    }
    if (s->csv)
        sq_csv_header(s->csv);
    if (s->hdr)
        sq_hdrlog_header(s->hdr, sq_wall_s());
    return 0;
}

void sq_cli_series_tick(struct sq_cli_series *s, const struct sq_second *e, const struct sq_hist *h)
{
    if (s->csv)
        sq_csv_row(s->csv, e);
    if (s->hdr && !s->hdr_failed && sq_hdrlog_line(s->hdr, e, h) < 0)
        s->hdr_failed = true;
}

void sq_cli_series_report(struct sq_cli_series *s, const struct sq_result *res)
{
    if (s->hdr_failed)
        fprintf(stderr, "squall: --out hdr: could not encode an interval\n");
    if (s->nd.f && (fflush(s->nd.f) != 0 || s->nd.failed))
        fprintf(stderr, "squall: --out ndjson: write failed: %s\n", strerror(errno));
    if (res->samples_lost)
        fprintf(stderr,
                "squall: --out ndjson: %llu requests not recorded (the writer fell "
                "behind; try --sample)\n",
                (unsigned long long)res->samples_lost);
}

void sq_cli_series_close(struct sq_cli_series *s)
{
    if (s->csv)
        fclose(s->csv);
    if (s->hdr)
        fclose(s->hdr);
    if (s->nd.f)
        fclose(s->nd.f);
    s->csv = s->hdr = s->nd.f = NULL;
    sq_ndjson_dispose(&s->nd);
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
    if (res->c.completed || res->c.iterations) /* a flow of publish / subscribe steps sends no
                                                  request: its iterations count */
        return SQ_EXIT_OK;
    if (!res->aborted && res->tls_error[0])
        fprintf(stderr, "squall: no request succeeded: tls: %s\n", res->tls_error);
    else
        fprintf(stderr, "squall: no request succeeded%s%s\n", res->aborted ? ": " : "",
                res->aborted ? res->abort_reason : "");
    return SQ_EXIT_FAIL;
}
