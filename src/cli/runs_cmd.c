/* cli/runs_cmd.c - `squall runs list | show ID | compare A B | export ID`: the run store of
 * `squall serve`, read from the terminal. The store is opened read-only, so these work beside a
 * running daemon (and never change what it holds).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "daemon/runs_compare.h"
#include "face/flags.h"
#include "daemon/daemon.h"
#include "output/doc.h"
#include "output/fmt.h"
#include "output/html.h"
#include "output/json.h"
#include "output/summary.h"
#include "stats/hist.h"
#include "store/store.h"

#define FACE "squall runs"

static const char runs_usage[] =
    "usage: squall runs list [--status S] [--limit N] [--json]\n"
    "       squall runs show ID [--json]\n"
    "       squall runs compare A B [--json]\n"
    "       squall runs export ID --json FILE [--html FILE]\n"
    "\n"
    "The runs `squall serve` stored (read-only: safe beside a running daemon).\n"
    "\n"
    "      --data DIR     the store (default ./squall-data)\n"
    "      --status S     list: only runs with these statuses (queued, running, finished,\n"
    "                     stopped, failed, interrupted; comma-separated)\n"
    "      --limit N      list: at most N runs, newest first (default 50, at most 1000)\n"
    "      --json [FILE]  list, show, compare: print JSON instead of a table;\n"
    "                     export: write the run's result document to FILE (- for stdout),\n"
    "                     the same document `squall URL --json FILE` writes\n"
    "      --html FILE    export: the run's HTML report\n"
    "  -h, --help         this help\n"
    "\n"
    "exit status: 0 done, 1 no such run or result, or the store cannot be read, 2 bad flags\n";

struct runs_opts {
    const char *data, *json_path, *html_path, *status;
    bool json;
    bool export; /* `runs export`: --json takes a file */
    uint64_t limit;
    const char *args[3];
    int nargs;
};

/* One flag getopt_long returned. Returns 0, SQ_EXIT_DONE (--help answered) or the exit status
 * after printing why. */
static int take_flag(void *ud, const struct option *longs, int opt, const char *flag)
{
    struct runs_opts *o = ud;
    switch (opt) {
    case 'D':
        o->data = optarg;
        return 0;
    case 's':
        o->status = optarg;
        return 0;
    case 'n':
        if (sq_parse_u64(optarg, 1, SQ_STORE_LIST_MAX, 0, &o->limit) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a count in 1..%d", flag, optarg,
                                      SQ_STORE_LIST_MAX);
        return 0;
    case 'j':
        o->json = true;
        o->json_path = o->export ? optarg : NULL;
        return 0;
    case 'H':
        o->html_path = optarg;
        return 0;
    case 'h':
        fputs(runs_usage, stdout);
        return SQ_EXIT_DONE;
    default:
        return sq_cli_flag_refused(FACE, longs, opt, flag);
    }
}

/* argv[0] is the subcommand: export takes --json FILE, the others a bare --json. */
static int parse(int argc, char **argv, struct runs_opts *o)
{
    static const struct option longs[] = {
        {"data", required_argument, NULL, 'D'},
        {"status", required_argument, NULL, 's'},
        {"limit", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"html", required_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct option export_longs[] = {
        {"data", required_argument, NULL, 'D'},
        {"json", required_argument, NULL, 'j'},
        {"html", required_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    o->export = strcmp(argv[0], "export") == 0;
    o->args[o->nargs++] = argv[0];
    int rc = sq_cli_getopt(argc, argv, ":h", o->export ? export_longs : longs, take_flag, o);
    if (rc)
        return rc;
    for (int i = optind; i < argc; i++) {
        if (o->nargs == 3)
            return sq_cli_usage_error(FACE, "unexpected argument '%s'", argv[i]);
        o->args[o->nargs++] = argv[i];
    }
    return 0;
}

static int open_store(const struct runs_opts *o, struct sq_store **s)
{
    struct sq_store_opts so = {.read_only = true};
    char err[512];
    const char *dir = o->data ? o->data : SQ_DAEMON_DATA;
    int rc = sq_store_open(dir, &so, s, err, sizeof(err));
    if (rc < 0) {
        if (rc == -ENOENT)
            sq_cli_error(FACE, "no run store at '%s' (start `squall serve`, or pass --data DIR)",
                         dir);
        else
            sq_cli_error(FACE, "%s", err);
        return SQ_EXIT_FAIL;
    }
    return 0;
}

static int run_id(const char *s, int64_t *id)
{
    uint64_t v;
    if (!s || sq_parse_u64(s, 1, INT64_MAX, 0, &v) < 0)
        return sq_cli_usage_error(FACE, "'%s' is not a run id", s ? s : "");
    *id = (int64_t)v;
    return 0;
}

static void iso(int64_t ms, char *buf, size_t len)
{
    if (ms <= 0) {
        snprintf(buf, len, "-");
        return;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

/* The list as JSON: one object per run. */
static void list_json(const struct sq_store_runs *l)
{
    json_t *a = json_array();
    for (size_t i = 0; i < l->n; i++) {
        const struct sq_store_run *r = &l->v[i];
        json_array_append_new(
            a, json_pack("{s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:f, s:I, s:I}", "id",
                         (json_int_t)r->id, "name", r->name, "kind", sq_store_kind_name(r->kind),
                         "status", sq_store_status_name(r->status), "created_ms",
                         (json_int_t)r->created_ms, "started_ms", (json_int_t)r->started_ms,
                         "ended_ms", (json_int_t)r->ended_ms, "target", r->target, "requests_per_s",
                         r->req_per_s, "p99_us", (json_int_t)r->p99_us, "errors",
                         (json_int_t)r->errors));
    }
    json_dumpf(a, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(a);
}

/* The list as a table, one run a line ("-" where a figure is not known). */
static void list_table(const struct sq_store_runs *l)
{
    if (l->n == 0) {
        printf("no runs\n");
        return;
    }
    printf("%6s  %-11s  %-19s  %12s  %10s  %8s  %s\n", "ID", "STATUS", "STARTED", "REQ/S", "P99",
           "ERRORS", "TARGET");
    for (size_t i = 0; i < l->n; i++) {
        const struct sq_store_run *r = &l->v[i];
        char when[32], rps[32] = "-", p99[32] = "-", errs[32] = "-";
        iso(r->started_ms ? r->started_ms : r->created_ms, when, sizeof(when));
        if (r->req_per_s >= 0)
            snprintf(rps, sizeof(rps), "%.1f", r->req_per_s);
        if (r->p99_us >= 0)
            sq_fmt_dur_us((double)r->p99_us, p99, sizeof(p99));
        if (r->errors >= 0)
            sq_fmt_group((uint64_t)r->errors, errs, sizeof(errs));
        printf("%6lld  %-11s  %-19s  %12s  ", (long long)r->id, sq_store_status_name(r->status),
               when, rps);
        sq_fmt_pad(stdout, p99, 10, true);
        printf("  %8s  %s%s%s%s\n", errs, r->target, r->name[0] ? "  (" : "", r->name,
               r->name[0] ? ")" : "");
    }
    if (l->more)
        printf("(more: --limit, or --status to narrow)\n");
}

static int cmd_list(struct sq_store *s, const struct runs_opts *o)
{
    struct sq_store_query q = {.limit = (size_t)o->limit};
    if (o->status) {
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", o->status);
        for (char *p = buf, *tok; (tok = strsep(&p, ","));) {
            enum sq_store_status st;
            if (sq_store_status_parse(tok, &st) < 0)
                return sq_cli_usage_error(FACE,
                                          "--status: '%s' is not a status (queued, running, "
                                          "finished, stopped, failed, interrupted)",
                                          tok);
            q.status_mask |= SQ_STORE_STATUS_BIT(st);
        }
    }
    struct sq_store_runs l = {0};
    char err[512];
    if (sq_store_run_list(s, &q, &l, err, sizeof(err)) < 0) {
        sq_cli_error(FACE, "%s", err);
        return SQ_EXIT_FAIL;
    }
    if (o->json)
        list_json(&l);
    else
        list_table(&l);
    sq_store_runs_dispose(&l);
    return SQ_EXIT_OK;
}

/* Reads run id's result document (parsed) and optionally its histogram. */
static int load_doc(struct sq_store *s, int64_t id, json_t **doc, struct sq_hist **h)
{
    struct sq_store_result res = {0};
    char err[512];
    int rc = sq_store_result_get(s, id, &res, err, sizeof(err));
    if (rc < 0) {
        sq_cli_error(FACE, "run %lld: %s", (long long)id, err);
        return SQ_EXIT_FAIL;
    }
    *doc = json_loadb(res.doc, res.doc_len, 0, NULL);
    if (h && (!res.hist || sq_hist_decode(res.hist, res.hist_len, h) < 0))
        *h = NULL;
    sq_store_result_dispose(&res);
    if (!*doc) {
        sq_cli_error(FACE, "run %lld: the stored result does not parse", (long long)id);
        return SQ_EXIT_FAIL;
    }
    return 0;
}

static int cmd_show(struct sq_store *s, const struct runs_opts *o)
{
    int64_t id = 0;
    int rc = run_id(o->args[1], &id);
    if (rc)
        return rc;
    struct sq_store_run r;
    char err[512];
    if ((rc = sq_store_run_get(s, id, &r, err, sizeof(err))) < 0) {
        sq_cli_error(FACE, "%s", rc == -ENOENT ? "no such run" : err);
        return SQ_EXIT_FAIL;
    }
    json_t *doc = NULL;
    if (r.has_result && load_doc(s, id, &doc, NULL) != 0) {
        sq_store_run_dispose(&r);
        return SQ_EXIT_FAIL;
    }
    if (o->json) {
        json_t *req = r.request ? json_loads(r.request, 0, NULL) : NULL;
        json_t *j = json_pack(
            "{s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:o, s:o, s:o}", "id", (json_int_t)r.id,
            "name", r.name, "kind", sq_store_kind_name(r.kind), "status",
            sq_store_status_name(r.status), "created_ms", (json_int_t)r.created_ms, "started_ms",
            (json_int_t)r.started_ms, "ended_ms", (json_int_t)r.ended_ms, "target", r.target,
            "reason", r.reason ? json_string(r.reason) : json_null(), "request",
            req ? req : json_null(), "result", doc ? json_incref(doc) : json_null());
        json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(j);
    } else {
        char c[32], b[32], e[32];
        iso(r.created_ms, c, sizeof(c));
        iso(r.started_ms, b, sizeof(b));
        iso(r.ended_ms, e, sizeof(e));
        printf("run %lld%s%s%s: %s\n", (long long)r.id, r.name[0] ? " (" : "", r.name,
               r.name[0] ? ")" : "", sq_store_status_name(r.status));
        printf("target   %s (%s)\n", r.target, sq_store_kind_name(r.kind));
        printf("created  %s   started  %s   ended  %s\n", c, b, e);
        if (r.reason)
            printf("reason   %s\n", r.reason);
        printf("\n");
        if (doc && sq_report_summary(doc, stdout) < 0)
            sq_cli_error(FACE, "run %lld: the stored result is not one this squall reads",
                         (long long)id);
        else if (!doc)
            printf("no result document (the run %s)\n", r.status == SQ_STORE_INTERRUPTED
                                                            ? "was interrupted: `squall runs show "
                                                              "--json` has its series"
                                                            : "has none");
    }
    json_decref(doc);
    sq_store_run_dispose(&r);
    return SQ_EXIT_OK;
}

static int cmd_compare(struct sq_store *s, const struct runs_opts *o)
{
    int64_t a = 0, b = 0;
    int rc = run_id(o->args[1], &a);
    if (rc == 0)
        rc = run_id(o->args[2], &b);
    if (rc)
        return rc;
    json_t *da = NULL, *db = NULL;
    struct sq_hist *ha = NULL, *hb = NULL;
    rc = load_doc(s, a, &da, &ha);
    if (rc == 0)
        rc = load_doc(s, b, &db, &hb);
    if (rc == 0) {
        json_t *c = sq_daemon_compare(da, ha, db, hb);
        if (!c) {
            rc = SQ_EXIT_FAIL;
        } else if (o->json) {
            json_dumpf(c, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            fputc('\n', stdout);
        } else {
            char na[32], nb[32];
            snprintf(na, sizeof(na), "run %lld", (long long)a);
            snprintf(nb, sizeof(nb), "run %lld", (long long)b);
            sq_daemon_compare_print(c, na, nb, stdout);
        }
        json_decref(c);
    }
    json_decref(da);
    json_decref(db);
    sq_hist_free(ha);
    sq_hist_free(hb);
    return rc;
}

static int cmd_export(struct sq_store *s, const struct runs_opts *o)
{
    int64_t id = 0;
    int rc = run_id(o->args[1], &id);
    if (rc)
        return rc;
    if (!o->json_path && !o->html_path)
        return sq_cli_usage_error(FACE, "export needs --json FILE or --html FILE");
    json_t *doc = NULL;
    if ((rc = load_doc(s, id, &doc, NULL)) != 0)
        return rc;
    int exit_code = SQ_EXIT_OK;
    if (o->json_path) { /* written atomically (cli/common.h), "-" to standard output */
        struct sq_cli_file cf;
        if ((rc = sq_cli_file_open(FACE, "--json", o->json_path, &cf)) != 0) {
            exit_code = rc;
        } else if (sq_report_json_write(cf.f, doc) < 0) {
            sq_cli_error(FACE, "--json: cannot write '%s'", o->json_path);
            sq_cli_file_discard(&cf);
            exit_code = SQ_EXIT_FAIL;
        } else if (sq_cli_file_commit(&cf) < 0) {
            exit_code = SQ_EXIT_FAIL;
        }
    }
    if (o->html_path && exit_code == SQ_EXIT_OK) {
        struct sq_cli_file cf;
        if ((rc = sq_cli_file_open(FACE, "--html", o->html_path, &cf)) != 0) {
            exit_code = rc;
        } else if (sq_report_html(doc, cf.f) < 0) {
            sq_cli_error(FACE, "--html: cannot write '%s'", o->html_path);
            sq_cli_file_discard(&cf);
            exit_code = SQ_EXIT_FAIL;
        } else if (sq_cli_file_commit(&cf) < 0) {
            exit_code = SQ_EXIT_FAIL;
        }
    }
    json_decref(doc);
    return exit_code;
}

int sq_cli_runs(int argc, char **argv)
{
    if (argc < 2)
        return sq_cli_usage_error(FACE, "say what to do: list, show ID, compare A B or export ID");
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(runs_usage, stdout);
        return SQ_EXIT_OK;
    }
    const char *cmd = argv[1];
    int want = strcmp(cmd, "list") == 0      ? 1
               : strcmp(cmd, "show") == 0    ? 2
               : strcmp(cmd, "export") == 0  ? 2
               : strcmp(cmd, "compare") == 0 ? 3
                                             : 0;
    if (!want)
        return sq_cli_usage_error(FACE, "'%s' is not a runs command (list, show, compare, export)",
                                  cmd);
    struct runs_opts o = {0};
    int rc = parse(argc - 1, argv + 1, &o);
    if (rc)
        return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
    if (o.nargs != want)
        return sq_cli_usage_error(FACE, "%s takes %s", cmd,
                                  want == 1   ? "no argument"
                                  : want == 2 ? "one run id"
                                              : "two run ids");
    if (o.html_path && strcmp(cmd, "export") != 0)
        return sq_cli_usage_error(FACE, "--html FILE goes with export");
    struct sq_store *s = NULL;
    if ((rc = open_store(&o, &s)) != 0)
        return rc;
    if (want == 1)
        rc = cmd_list(s, &o);
    else if (strcmp(cmd, "show") == 0)
        rc = cmd_show(s, &o);
    else if (strcmp(cmd, "export") == 0)
        rc = cmd_export(s, &o);
    else
        rc = cmd_compare(s, &o);
    sq_store_close(s);
    return rc;
}
