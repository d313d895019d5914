/* cli/report_cmd.c - `squall report FILE [--html OUT] [--junit OUT]`: a saved run's summary, or
 * its HTML report and its JUnit XML.
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
#include "output/junit.h"
#include "output/summary.h"

static const char report_usage[] =
    "usage: squall report FILE [--html OUT] [--junit OUT]\n"
    "\n"
    "Reads a result saved with `squall URL --json FILE` (schema squall.result/1; - reads stdin)\n"
    "and prints its summary again, or writes its HTML report or its JUnit XML.\n"
    "\n"
    "      --html OUT   write the self-contained HTML report to OUT (- for stdout): charts of\n"
    "                   throughput, errors and latency over time, the latency percentile plot,\n"
    "                   status codes, errors, request accounting and the configuration\n"
    "      --junit OUT  write a plan run's thresholds and checks as JUnit XML to OUT (- for\n"
    "                   stdout), as `squall run --junit` does\n"
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

/* A file flag's value: "--FLAG OUT" or "--FLAG=OUT" at argv[*i]. Returns 1 (taken, *out set),
 * 0 (not this flag) or the exit status after printing why. */
static int file_flag(int argc, char **argv, int *i, const char *flag, const char **out)
{
    const char *a = argv[*i];
    size_t n = strlen(flag);
    if (strncmp(a, flag, n) != 0 || (a[n] != '\0' && a[n] != '='))
        return 0;
    const char *v = a[n] == '=' ? a + n + 1 : NULL;
    if (!v) {
        if (*i + 1 >= argc)
            return sq_cli_usage_error(FACE, "%s needs a value", flag);
        v = argv[++*i];
    }
    if (!*v)
        return sq_cli_usage_error(FACE, "%s: '' is not a file name", flag);
    *out = v;
    return 1;
}

/* The flags: one result file, --html OUT, --junit OUT. Returns 0, SQ_EXIT_DONE (--help answered)
 * or the exit status after printing why. */
static int report_parse(int argc, char **argv, const char **path, const char **html,
                        const char **junit)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(report_usage, stdout);
            return SQ_EXIT_DONE;
        }
        int rc = file_flag(argc, argv, &i, "--html", html);
        if (rc == 0)
            rc = file_flag(argc, argv, &i, "--junit", junit);
        if (rc == 1)
            continue;
        if (rc != 0)
            return rc;
        if (a[0] == '-' && a[1] != '\0')
            return sq_cli_usage_error(FACE, "unknown flag '%s'", a);
        if (*path)
            return sq_cli_usage_error(FACE, "one result file only; unexpected '%s'", a);
        *path = a;
    }
    if (!*path)
        return sq_cli_usage_error(FACE, "no result file given");
    if (*html && *junit && strcmp(*html, "-") == 0 && strcmp(*junit, "-") == 0)
        return sq_cli_usage_error(FACE, "--junit -: standard output is taken by --html -");
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

/* The JUnit XML into path ("-": stdout), written atomically. Returns the exit status. */
static int junit_render(const json_t *doc, const char *path)
{
    struct sq_cli_file xf;
    if (sq_cli_file_open(FACE, "--junit", path, &xf) != 0)
        return SQ_EXIT_FAIL;
    int rc = sq_report_junit(doc, xf.f);
    if (rc < 0) {
        sq_cli_error(FACE, "--junit: writing '%s': %s", path, sq_strerror(rc));
        sq_cli_file_discard(&xf);
        return SQ_EXIT_FAIL;
    }
    return sq_cli_file_commit(&xf) < 0 ? SQ_EXIT_FAIL : SQ_EXIT_OK;
}

int sq_cli_report(int argc, char **argv)
{
    const char *path = NULL, *html = NULL, *junit = NULL;
    json_t *doc = NULL;
    int rc = report_parse(argc, argv, &path, &html, &junit);
    if (rc == 0)
        rc = load(path, &doc);
    if (rc == 0 && (html || !junit))
        rc = report_render(doc, html);
    if (rc == 0 && junit)
        rc = junit_render(doc, junit);
    json_decref(doc);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
