/* cli/compare_cmd.c - `squall compare A.json B.json [--html OUT] [--json OUT]`: two saved runs
 * side by side (output/compare.h). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "face/flags.h"
#include "output/compare.h"
#include "output/json.h"

#define FACE "squall compare"

static const char compare_usage[] =
    "usage: squall compare A.json B.json [--html OUT] [--json OUT]\n"
    "\n"
    "Two results saved with --json, side by side: every figure of both with B's difference\n"
    "from A (throughput, latency, requests, status classes, errors, connections, the client's\n"
    "cost and a watched server's), then every other number either document holds.\n"
    "\n"
    "      --html OUT   also write a self-contained HTML page: the table, both latency\n"
    "                   percentile curves on one plot, and throughput, p99 and server CPU\n"
    "                   over time with the two runs aligned on seconds since their start\n"
    "      --json OUT   also write the comparison as JSON (schema squall.compare/1; - for\n"
    "                   stdout, the table then goes to stderr)\n"
    "  -q, --quiet      no table on the terminal\n"
    "  -h, --help       this help\n"
    "\n"
    "Two single runs cannot tell a difference from noise; squall ab can (docs/instruments.md).\n"
    "\n"
    "exit status: 0 done, 1 an output could not be written, 2 bad flags or a file that is not a\n"
    "             squall result\n";

/* Writes to path ("-": stdout) with write(); returns 0 or prints why and returns
 * SQ_EXIT_FAIL. */
static int write_out(const char *flag, const char *path, int (*write)(FILE *, const void *),
                     const void *ud)
{
    struct sq_cli_file f;
    if (sq_cli_file_open(FACE, flag, path, &f) != 0)
        return SQ_EXIT_FAIL;
    int rc = write(f.f, ud);
    if (rc < 0) {
        sq_cli_error(FACE, "%s: writing '%s': %s", flag, path, sq_strerror(rc));
        sq_cli_file_discard(&f);
        return SQ_EXIT_FAIL;
    }
    return sq_cli_file_commit(&f) < 0 ? SQ_EXIT_FAIL : 0;
}

struct html_args {
    const json_t *cmp, *a, *b;
};

static int write_html(FILE *f, const void *ud)
{
    const struct html_args *h = ud;
    return sq_compare_html(h->cmp, h->a, h->b, f);
}

static int write_json(FILE *f, const void *ud)
{
    return sq_report_json_write(f, ud);
}

/* The file name without its folders, for the column headers. */
static const char *base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s && s[1] ? s + 1 : path;
}

/* ---- the command: parse -> prepare -> render ---- */

/* What the phases of one `squall compare` share. */
struct comparecmd {
    const char *html, *jpath; /* --html, --json; "-": stdout */
    const char *pa, *pb;      /* the two result files; one may be "-" (stdin) */
    bool quiet;
    json_t *a, *b, *cmp;
};

/* One flag getopt_long returned. Returns 0, SQ_EXIT_DONE (--help answered) or the exit status
 * after printing why. */
static int take_flag(void *ud, const struct option *longs, int opt, const char *flag)
{
    struct comparecmd *c = ud;
    switch (opt) {
    case 'H':
    case 'J':
        if (!optarg[0])
            return sq_cli_usage_error(FACE, "%s: '' is not a file name", flag);
        *(opt == 'H' ? &c->html : &c->jpath) = optarg;
        return 0;
    case 'q':
        c->quiet = true;
        return 0;
    case 'h':
        fputs(compare_usage, stdout);
        return SQ_EXIT_DONE;
    default:
        return sq_cli_flag_refused(FACE, longs, opt, flag);
    }
}

/* The flags and the two files. Returns 0, SQ_EXIT_DONE (--help answered) or the exit status
 * after printing why. */
static int compare_parse(struct comparecmd *c, int argc, char **argv)
{
    static const struct option longs[] = {
        {"html", required_argument, NULL, 'H'},
        {"json", required_argument, NULL, 'J'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int rc = sq_cli_getopt(argc, argv, ":qh", longs, take_flag, c);
    if (rc)
        return rc;
    if (argc - optind < 2)
        return sq_cli_usage_error(FACE, "two result files are needed (A.json B.json)");
    if (argc - optind > 2)
        return sq_cli_usage_error(FACE, "two result files only; unexpected '%s'", argv[optind + 2]);
    if (c->html && c->jpath && strcmp(c->html, "-") == 0 && strcmp(c->jpath, "-") == 0)
        return sq_cli_usage_error(FACE, "--html and --json cannot both go to stdout");
    c->pa = argv[optind];
    c->pb = argv[optind + 1];
    if (strcmp(c->pa, "-") == 0 && strcmp(c->pb, "-") == 0)
        return sq_cli_usage_error(FACE, "only one of the two files can be stdin (-)");
    return 0;
}

/* The two results read and checked, and their comparison. Returns 0 or the exit status. */
static int compare_prepare(struct comparecmd *c)
{
    int rc = sq_cli_read_result(FACE, c->pa, &c->a);
    if (rc == SQ_EXIT_OK)
        rc = sq_cli_read_result(FACE, c->pb, &c->b);
    if (rc != SQ_EXIT_OK)
        return rc;
    c->cmp = sq_compare_doc(c->a, c->b, base(c->pa), base(c->pb));
    if (!c->cmp) {
        sq_cli_error(FACE, "out of memory");
        return SQ_EXIT_FAIL;
    }
    return 0;
}

/* The table (on stderr when a file takes stdout), the page, the JSON; the exit status. */
static int compare_render(struct comparecmd *c)
{
    int rc = SQ_EXIT_OK;
    bool to_stdout =
        (c->html && strcmp(c->html, "-") == 0) || (c->jpath && strcmp(c->jpath, "-") == 0);
    if (!c->quiet && sq_compare_table(c->cmp, to_stdout ? stderr : stdout) < 0)
        rc = SQ_EXIT_FAIL;
    struct html_args ha = {c->cmp, c->a, c->b};
    if (c->html && write_out("--html", c->html, write_html, &ha) != 0)
        rc = SQ_EXIT_FAIL;
    if (c->jpath && write_out("--json", c->jpath, write_json, c->cmp) != 0)
        rc = SQ_EXIT_FAIL;
    return rc;
}

int sq_cli_compare(int argc, char **argv)
{
    struct comparecmd c = {0};
    int rc = compare_parse(&c, argc, argv);
    if (rc == 0)
        rc = compare_prepare(&c);
    if (rc == 0)
        rc = compare_render(&c);
    json_decref(c.cmp);
    json_decref(c.a);
    json_decref(c.b);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
