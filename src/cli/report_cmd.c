/* cli/report_cmd.c - `squall report FILE [--html OUT]`: a saved run's summary, or its HTML report.
 *
 * FILE is a document written by `squall URL --json FILE` (schema squall.result/1). A file that
 * cannot be read, is not JSON or is not such a result gets one line naming the file and the
 * problem, and exit status 2, like a bad flag.
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "output/doc.h"
#include "output/html.h"
#include "output/summary.h"

static const char report_usage[] =
    "usage: squall report FILE [--html OUT]\n"
    "\n"
    "Reads a result saved with `squall URL --json FILE` (schema squall.result/1; - reads stdin)\n"
    "and prints its summary again, or writes its HTML report.\n"
    "\n"
    "      --html OUT   write the self-contained HTML report to OUT (- for stdout): charts of\n"
    "                   throughput, errors and latency over time, the latency percentile plot,\n"
    "                   status codes, errors, request accounting and the configuration\n"
    "  -h, --help       this help\n"
    "\n"
    "exit status: 0 done, 1 the report could not be written, 2 bad flags or a FILE that is not\n"
    "             a squall result\n";

#define FACE "squall report"

/* Loads and checks the document; on failure prints the one line and returns the exit status. */
static int load(const char *path, json_t **out)
{
    return sq_cli_read_result(FACE, path, out);
}

/* ---- the command: parse -> render ---- */

/* The flags: one result file, --html OUT. Returns 0, SQ_EXIT_DONE (--help answered) or the exit
 * status after printing why. */
static int report_parse(int argc, char **argv, const char **path, const char **html)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(report_usage, stdout);
            return SQ_EXIT_DONE;
        }
        if (strcmp(a, "--html") == 0) {
            if (i + 1 >= argc)
                return sq_cli_usage_error(FACE, "--html needs a value");
            if (!*argv[i + 1])
                return sq_cli_usage_error(FACE, "--html: '' is not a file name");
            *html = argv[++i];
            continue;
        }
        if (strncmp(a, "--html=", 7) == 0) {
            if (!a[7])
                return sq_cli_usage_error(FACE, "--html: '' is not a file name");
            *html = a + 7;
            continue;
        }
        if (a[0] == '-' && a[1] != '\0')
            return sq_cli_usage_error(FACE, "unknown flag '%s'", a);
        if (*path)
            return sq_cli_usage_error(FACE, "one result file only; unexpected '%s'", a);
        *path = a;
    }
    if (!*path)
        return sq_cli_usage_error(FACE, "no result file given");
    return 0;
}

/* The summary on stdout, or the HTML report into html ("-": stdout). Returns the exit status. */
static int report_render(const json_t *doc, const char *html)
{
    if (!html) {
        int rc = sq_report_summary(doc, stdout);
        if (rc < 0) {
            fprintf(stderr, "squall report: writing the summary: %s\n", sq_strerror(rc));
            return SQ_EXIT_FAIL;
        }
        return SQ_EXIT_OK;
    }
    bool to_stdout = strcmp(html, "-") == 0;
    FILE *out = to_stdout ? stdout : fopen(html, "w");
    if (!out) {
        sq_cli_error(FACE, "--html: cannot write '%s': %s", html, strerror(errno));
        return SQ_EXIT_FAIL;
    }
    int rc = sq_report_html(doc, out);
    if (!to_stdout && fclose(out) != 0 && rc == 0)
        rc = -errno;
    if (rc < 0) {
        sq_cli_error(FACE, "--html: writing '%s': %s", html, sq_strerror(rc));
        return SQ_EXIT_FAIL;
    }
    return SQ_EXIT_OK;
}

int sq_cli_report(int argc, char **argv)
{
    const char *path = NULL, *html = NULL;
    json_t *doc = NULL;
    int rc = report_parse(argc, argv, &path, &html);
    if (rc == 0)
        rc = load(path, &doc);
    if (rc == 0)
        rc = report_render(doc, html);
    json_decref(doc);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
