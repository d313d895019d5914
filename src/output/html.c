/* output/html.c - the self-contained HTML report of a saved run.
 *
 * The page is written in three layers:
 *  - tables (summary, request accounting, status, errors, configuration, and steps / checks /
 *    thresholds when the document has them) are rendered here, every string from the document
 *    HTML-escaped;
 *  - the data for the charts travels as a JSON island, <script type="application/json">, holding
 *    the document itself and the HDR percentile curves computed here; every '<', '>' and '&' in
 *    it is written as a \u escape, so no string in the document can close the script element;
 *  - web/report/report.js (embedded, with uPlot) draws the charts from the island into the
 *    containers emitted here. A chart the document cannot feed gets a note instead of a
 *    container.
 *
 * A Content-Security-Policy meta tag allows inline scripts and styles and data: images only: the
 * report opens offline and cannot fetch anything.
 */
#include "output/html.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "output/doc.h"
#include "output/fmt.h"
#include "output/html_assets.h"
#include "output/page.h"
#include "stats/hist.h"

#define HDR_STEPS_PER_DECADE 20 /* points per decade of 1/(1-p) */
#define HDR_MIN_DECADES      2  /* up to 99% at least */
#define HDR_MAX_DECADES      7  /* up to 99.99999% at most */
#define GENERIC_MAX_DEPTH    4  /* nested tables; deeper values print as compact JSON */
#define GENERIC_MAX_ROWS     1000
#define GENERIC_MAX_COLS     24
#define D                    32

/* ---- escaping (output/page.c) ----
 *
 * One rule: the page's own markup is written with fputs and fprintf, whose arguments are
 * literals and numbers only; every string that came from the document (a URL, a header, a body,
 * an error message, a name: the network's or the user's) is written through esc() and nothing
 * else, once. No formatted string passes through esc(): a format that held a tag would have its
 * tag escaped into text. */

static void esc(FILE *f, const char *s)
{
    sq_page__esc(f, s);
}

/* ---- small table helpers ---- */

/* A figure: right-aligned, kept on one line. */
static void row(FILE *f, const char *label, const char *value)
{
    fputs("<tr><th>", f);
    esc(f, label);
    fputs("</th><td class=\"n\">", f);
    esc(f, value);
    fputs("</td></tr>\n", f);
}

/* A phrase: may wrap. */
static void row_text(FILE *f, const char *label, const char *value)
{
    fputs("<tr><th>", f);
    esc(f, label);
    fputs("</th><td class=\"t\">", f);
    esc(f, value);
    fputs("</td></tr>\n", f);
}

static const char *num_text(const json_t *doc, const char *path, char *buf)
{
    double v;
    if (!sq_report__num(doc, path, &v))
        return "—";
    return sq_fmt_group(sq_report__count(v), buf, D);
}

static const char *dur_text(const json_t *doc, const char *path, double scale, char *buf)
{
    double v;
    if (!sq_report__num(doc, path, &v))
        return "—";
    return sq_fmt_dur_us(v * scale, buf, D);
}

/* ---- generic rendering: configuration, steps, checks, thresholds ---- */

static void compact(FILE *f, const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    fputs("<code>", f);
    if (s)
        esc(f, s);
    fputs("</code>", f);
    free(s);
}

static void scalar(FILE *f, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        esc(f, json_string_value(v));
        break;
    case JSON_INTEGER:
        fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        fprintf(f, "%.6g", json_real_value(v));
        break;
    case JSON_TRUE:
        fputs("yes", f);
        break;
    case JSON_FALSE:
        fputs("no", f);
        break;
    case JSON_NULL:
        fputs("—", f);
        break;
    default:
        compact(f, v);
    }
}

static void value(FILE *f, const json_t *v, int depth);

static void kv_table(FILE *f, const json_t *obj, int depth, const char *skip)
{
    const char *k;
    json_t *v;
    fputs("<table>\n", f);
    json_object_foreach((json_t *)obj, k, v)
    {
        if (skip && strcmp(k, skip) == 0)
            continue;
        fputs("<tr><th>", f);
        esc(f, k);
        fputs("</th><td>", f);
        value(f, v, depth + 1);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* An array of objects as one table: the union of their keys, in first-seen order, as columns. */
static void rows_table(FILE *f, const json_t *arr, int depth)
{
    json_t *cols = json_object(), *e, *v;
    size_t i;
    const char *k;
    if (!cols)
        return;
    json_array_foreach((json_t *)arr, i, e)
    {
        json_object_foreach(e, k, v)
        {
            if (json_object_size(cols) < GENERIC_MAX_COLS)
                json_object_set_new(cols, k, json_true());
        }
    }
    fputs("<table>\n<tr>", f);
    json_object_foreach(cols, k, v)
    {
        fputs("<th>", f);
        esc(f, k);
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    json_array_foreach((json_t *)arr, i, e)
    {
        if (i == GENERIC_MAX_ROWS)
            break;
        fputs("<tr>", f);
        json_object_foreach(cols, k, v)
        {
            const json_t *cell = json_object_get(e, k);
            fputs("<td>", f);
            if (cell)
                value(f, cell, depth + 1);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    if (json_array_size(arr) > GENERIC_MAX_ROWS)
        fprintf(f, "<p class=\"meta\">%zu more rows are in the embedded data.</p>\n",
                json_array_size(arr) - GENERIC_MAX_ROWS);
    json_decref(cols);
}

static void value(FILE *f, const json_t *v, int depth)
{
    if (depth > GENERIC_MAX_DEPTH) {
        compact(f, v);
        return;
    }
    if (json_is_object(v)) {
        if (json_object_size(v) == 0)
            fputs("—", f);
        else
            kv_table(f, v, depth, NULL);
        return;
    }
    if (json_is_array(v)) {
        size_t i, nobj = 0, nscalar = 0;
        json_t *e;
        json_array_foreach((json_t *)v, i, e)
        {
            nobj += json_is_object(e);
            nscalar += !json_is_object(e) && !json_is_array(e);
        }
        if (json_array_size(v) == 0) {
            fputs("none", f);
        } else if (nobj == json_array_size(v)) {
            rows_table(f, v, depth);
        } else if (nscalar == json_array_size(v)) {
            json_array_foreach((json_t *)v, i, e)
            {
                if (i)
                    fputs(", ", f);
                scalar(f, e);
            }
        } else {
            compact(f, v);
        }
        return;
    }
    scalar(f, v);
}

/* ---- the HDR percentile curves ---- */

static json_t *curve(const struct sq_hist *h, const json_t *xs)
{
    json_t *a = json_array(), *x;
    size_t i;
    json_array_foreach((json_t *)xs, i, x)
    {
        double pct = 100.0 * (1.0 - 1.0 / json_real_value(x));
        json_array_append_new(a, json_integer(sq_hist_percentile(h, pct)));
    }
    return a;
}

/* {"x": [1/(1-p)...], "corrected": [µs...], "uncorrected": [µs...]?, labels}, or NULL with
 * *why saying what is missing. */
static json_t *hdr_curves(const json_t *doc, bool open, const char **why)
{
    struct sq_hist *hc = NULL, *hu = NULL;
    if (sq_report__hist(json_object_get(doc, "latency"), &hc) < 0) {
        *why = "The document carries no readable latency histogram, so the percentile plot is "
               "left out.";
        return NULL;
    }
    int64_t total = sq_hist_total(hc);
    if (total == 0) {
        sq_hist_free(hc);
        *why = "No response completed: there is no latency to plot.";
        return NULL;
    }
    const json_t *ul = json_object_get(doc, "latency_uncorrected");
    if (json_is_object(ul) && (sq_report__hist(ul, &hu) < 0 || sq_hist_total(hu) == 0)) {
        sq_hist_free(hu);
        hu = NULL;
    }
    /* Past 1/(1-p) = total every percentile is the maximum: stop at the decade that holds it. */
    int decades = (int)ceil(log10((double)total));
    if (decades < HDR_MIN_DECADES)
        decades = HDR_MIN_DECADES;
    if (decades > HDR_MAX_DECADES)
        decades = HDR_MAX_DECADES;
    json_t *xs = json_array();
    for (int i = 0; i <= decades * HDR_STEPS_PER_DECADE; i++)
        json_array_append_new(xs, json_real(pow(10.0, (double)i / HDR_STEPS_PER_DECADE)));
    json_t *o = json_pack("{s:o, s:o, s:s}", "x", xs, "corrected", curve(hc, xs), "corrected_label",
                          open ? "from the intended send" : "from the actual send");
    if (o && hu) {
        json_object_set_new(o, "uncorrected", curve(hu, xs));
        json_object_set_new(o, "uncorrected_label",
                            json_string("uncorrected: from the actual send"));
    }
    sq_hist_free(hc);
    sq_hist_free(hu);
    if (!o)
        *why = "Out of memory computing the percentile plot.";
    return o;
}

/* ---- sections ---- */

/* When and where it ran, and how it was started: what an archived report is found by. */
static void run_line(FILE *f, const json_t *doc)
{
    const json_t *run = json_object_get(doc, "run");
    if (!json_is_object(run))
        return;
    fputs("<p class=\"meta run\">", f);
    const char *a = sq_report__str(run, "started_at", NULL);
    const char *b = sq_report__str(run, "ended_at", NULL);
    if (a) {
        fputs("<span id=\"run-start\">", f);
        esc(f, a);
        fputs("</span>", f);
        if (b) {
            fputs(" → <span id=\"run-end\">", f);
            esc(f, b);
            fputs("</span>", f);
        }
    } else {
        fputs("never started", f);
    }
    if (sq_report__str(run, "host", NULL)) {
        fputs(" · on ", f);
        esc(f, sq_report__str(run, "host", ""));
    }
    fputs("</p>\n", f);
    if (sq_report__str(run, "command", NULL)) {
        fputs("<p class=\"meta\"><code id=\"run-command\">", f);
        esc(f, sq_report__str(run, "command", ""));
        fputs("</code></p>\n", f);
    }
}

/* A plan with thresholds: PASS or FAIL, the crossed ones named. */
static void verdict(FILE *f, const json_t *doc)
{
    const json_t *ths = json_object_get(doc, "thresholds");
    if (!json_is_array(ths) || !json_array_size(ths))
        return;
    size_t i, crossed = 0;
    const json_t *e;
    json_array_foreach((json_t *)ths, i, e) crossed += !json_is_true(json_object_get(e, "ok"));
    fprintf(f, "<p id=\"verdict\" class=\"verdict %s\">%s", crossed ? "fail" : "pass",
            crossed ? "✗ FAIL · thresholds crossed: " : "✓ PASS · every threshold held");
    size_t n = 0;
    json_array_foreach((json_t *)ths, i, e)
    {
        if (json_is_true(json_object_get(e, "ok")))
            continue;
        fputs(n++ ? "; " : "", f);
        esc(f, sq_report__str(e, "metric", "?"));
        fputc(' ', f);
        esc(f, sq_report__str(e, "expression", "?"));
    }
    fputs("</p>\n", f);
}

static void header(FILE *f, const json_t *doc, bool open)
{
    const json_t *ex = sq_report__get(doc, "config.executor");
    char b[D];
    double v;
    const char *name = sq_report__str(doc, "run.name", NULL);
    fputs("<header>\n<h1><span class=\"brand\">squall</span>", f);
    if (name) {
        fputs("<span class=\"name\">", f);
        esc(f, name);
        fputs("</span> ", f);
    }
    fputs("<span class=\"target\">", f);
    if (json_is_object(json_object_get(doc, "plan"))) {
        /* a plan run: its file and target, not the quick face's method and URL */
        fputs("run ", f);
        esc(f, sq_report__str(doc, "plan.file", "?"));
        fputs(" → ", f);
        esc(f, sq_report__str(doc, "plan.target", "?"));
    } else {
        esc(f, sq_report__str(doc, "config.method", ""));
        fputc(' ', f);
        esc(f, sq_report__str(doc, "config.url", "(no URL in the document)"));
    }
    fputs("</span></h1>\n", f);
    run_line(f, doc);
    fputs("<p class=\"meta\">", f);
    esc(f, open ? "open loop" : "closed loop");
    if (sq_report__str(ex, "kind", NULL)) {
        fputs(" · ", f);
        esc(f, sq_report__str(ex, "kind", ""));
    }
    if (sq_report__num(ex, "rate_per_s", &v))
        fprintf(f, " %g/s", v);
    if (sq_report__num(doc, "config.connections", &v)) {
        fputs(" · ", f);
        esc(f, sq_fmt_group(sq_report__count(v), b, D));
        fputs(v == 1 ? " connection" : " connections", f);
    }
    if (sq_report__num(doc, "threads", &v) || sq_report__num(doc, "config.threads", &v))
        fprintf(f, " · %.0f thread%s", v, v == 1 ? "" : "s");
    if (sq_report__num(doc, "duration_s", &v))
        fprintf(f, " · %.2f s", v);
    if (sq_report__str(doc, "config.address", NULL)) {
        fputs(" · to ", f);
        esc(f, sq_report__str(doc, "config.address", ""));
    }
    if (sq_report__str(doc, "squall_version", NULL)) {
        fputs(" · squall ", f);
        esc(f, sq_report__str(doc, "squall_version", ""));
    }
    fputs("</p>\n", f);
    if (json_is_true(json_object_get(doc, "aborted"))) {
        fputs("<p class=\"meta bad\">Stopped early: ", f);
        esc(f, sq_report__str(doc, "abort_reason", "no reason given"));
        fputs("</p>\n", f);
    }
    verdict(f, doc);
    fputs("</header>\n", f);
}

static void figures(FILE *f, const json_t *doc, bool open)
{
    const json_t *l = json_object_get(doc, "latency");
    const json_t *u = json_object_get(doc, "latency_uncorrected");
    char b[D], c[D];
    double v;
    fputs("<div>\n<h3>Figures</h3>\n<table>\n", f);
    if (sq_report__num(doc, "rate.requests_per_s", &v)) {
        snprintf(b, D, "%.1f req/s", v);
        row(f, "Throughput", b);
    }
    if (sq_report__num(doc, "rate.bytes_received_per_s", &v)) {
        double out = sq_report__numd(doc, "rate.bytes_sent_per_s", 0);
        char t[2 * D + 16];
        snprintf(t, sizeof(t), "%s/s in · %s/s out", sq_fmt_bytes(v, b, D),
                 sq_fmt_bytes(out, c, D));
        row_text(f, "Bandwidth", t);
    }
    if (sq_report__num(doc, "duration_s", &v)) {
        snprintf(b, D, "%.3f s", v);
        row(f, "Duration", b);
    }
    row(f, "Setup", dur_text(doc, "setup_s", 1e6, b));
    if (sq_report__numd(l, "count", 0) > 0) {
        static const char *const keys[][2] = {
            {"min", "min_us"}, {"mean", "mean_us"},   {"stdev", "stdev_us"},
            {"p50", "p50_us"}, {"p90", "p90_us"},     {"p95", "p95_us"},
            {"p99", "p99_us"}, {"p99.9", "p99_9_us"}, {"max", "max_us"},
        };
        for (size_t i = 0; i < SQ_ARRAY_LEN(keys); i++) {
            char label[D];
            snprintf(label, D, "Latency %s", keys[i][0]);
            row(f, label, dur_text(l, keys[i][1], 1, b));
        }
        const char *from = sq_report__str(l, "measured_from", "");
        row_text(f, "Measured from",
                 strcmp(from, "intended_send") == 0 ? "the intended send (no coordinated omission)"
                 : strcmp(from, "actual_send") == 0 ? "the actual send"
                                                    : from);
        if (open && json_is_object(u) && sq_report__numd(u, "count", 0) > 0) {
            char t[4 * D + 32], d1[D], d2[D], d3[D];
            snprintf(t, sizeof(t), "p50 %s · p90 %s · p99 %s · max %s", dur_text(u, "p50_us", 1, b),
                     dur_text(u, "p90_us", 1, d1), dur_text(u, "p99_us", 1, d2),
                     dur_text(u, "max_us", 1, d3));
            row_text(f, "Uncorrected", t);
        }
    } else {
        row_text(f, "Latency", "no response completed");
    }
    if (sq_report__numd(l, "out_of_range", 0) > 0)
        row(f, "Out of range (not recorded)", num_text(l, "out_of_range", b));
    if (sq_report__num(doc, "spin_us", &v))
        row(f, "Spin before each arrival", dur_text(doc, "spin_us", 1, b));
    fputs("</table>\n</div>\n", f);
}

/* The responses with a status >= 400: "failures.http", or for an older document its 4xx and
 * 5xx. */
static double http_failures(const json_t *doc)
{
    double v;
    if (sq_report__num(doc, "failures.http", &v))
        return v;
    return sq_report__numd(doc, "status.4xx", 0) + sq_report__numd(doc, "status.5xx", 0);
}

/* A plan's checks, passed and failed, summed over `checks`; false when it has none. */
static bool check_counts(const json_t *doc, double *passed, double *failed)
{
    const json_t *checks = json_object_get(doc, "checks"), *e;
    size_t i;
    *passed = *failed = 0;
    if (!json_is_array(checks) || !json_array_size(checks))
        return false;
    json_array_foreach((json_t *)checks, i, e)
    {
        *passed += sq_report__numd(e, "passed", 0);
        *failed += sq_report__numd(e, "failed", 0);
    }
    return true;
}

static void accounting(FILE *f, const json_t *doc, bool open)
{
    const json_t *rq = json_object_get(doc, "requests");
    char b[D];
    fputs("<div>\n<h3>Request accounting</h3>\n<table>\n", f);
    row(f, "Sent", num_text(rq, "sent", b));
    row(f, "Completed", num_text(rq, "completed", b));
    /* The three kinds of failure apart, as the terminal summary's Failed line words them: a
     * request with no response, a response with a status >= 400 (completed, so not in the
     * accounting below), a check that did not hold. */
    row(f, "Failed: transport (no response)", num_text(rq, "failed", b));
    row(f, "Failed: HTTP (status ≥ 400)", sq_fmt_group(sq_report__count(http_failures(doc)), b, D));
    double cp, cf;
    if (check_counts(doc, &cp, &cf)) {
        char t[3 * D + 32], g1[D], g2[D];
        snprintf(t, sizeof(t), "%s of %s", sq_fmt_group(sq_report__count(cf), g1, D),
                 sq_fmt_group(sq_report__count(cp + cf), g2, D));
        row(f, "Failed: checks", t);
    }
    row(f, "In flight at the end", num_text(rq, "in_flight", b));
    /* a plan's arrivals are iterations, each running its flow's requests */
    bool iters = json_object_get(doc, "plan") != NULL;
    row(f, iters ? "Dropped (iterations due, not started)" : "Dropped (due, not sent)",
        num_text(rq, "dropped", b));
    if (open || json_object_get(rq, "arrivals"))
        row(f,
            iters ? "Arrivals (iterations due; each runs its flow's requests)" : "Arrivals (due)",
            num_text(rq, "arrivals", b));
    if (json_is_object(json_object_get(doc, "connections"))) {
        row(f, "Connections opened", num_text(doc, "connections.opened", b));
        row(f, "Replaced after a server close", num_text(doc, "connections.closed_by_server", b));
    }
    fputs("</table>\n", f);
    double sent = sq_report__numd(rq, "sent", 0), done = sq_report__numd(rq, "completed", 0),
           failed = sq_report__numd(rq, "failed", 0), infl = sq_report__numd(rq, "in_flight", 0);
    double off = sent - done - failed - infl;
    if (off == 0)
        fputs("<p class=\"meta\">sent = completed + transport failures + in flight: every "
              "request is accounted for (an HTTP failure is a completed request).</p>\n",
              f);
    else
        fprintf(f,
                "<p class=\"meta bad\">sent − (completed + transport failures + in flight) = "
                "%.0f</p>\n",
                off);
    fputs("</div>\n", f);
}

/* The watched processes' figures (--watch) and squall's own, when the document has them. */
static void resources(FILE *f, const json_t *doc)
{
    const json_t *sv = json_object_get(doc, "server");
    const json_t *cl = json_object_get(doc, "client");
    char b[D], t[4 * D];
    double v;
    if (json_is_object(sv)) {
        fputs("<div>\n<h3>Server (watched processes)</h3>\n<table>\n", f);
        if (sq_report__num(sv, "cpu_ms_per_1k_requests", &v)) {
            snprintf(b, D, "%.2f ms", v);
            row(f, "CPU per 1k requests", b);
        }
        snprintf(t, sizeof(t), "%.2f s user · %.2f s system", sq_report__numd(sv, "cpu_user_s", 0),
                 sq_report__numd(sv, "cpu_sys_s", 0));
        row_text(f, "CPU over the run", t);
        snprintf(b, D, "%.1f MB", sq_report__numd(sv, "rss_peak_bytes", 0) / 1e6);
        row(f, "RSS peak", b);
        row(f, "Threads (most)", num_text(sv, "threads_max", b));
        row(f, "Open files (most)", num_text(sv, "fds_max", b));
        if (sq_report__num(sv, "ctxsw_voluntary", &v)) {
            char g1[D], g2[D];
            snprintf(
                t, sizeof(t), "%s voluntary · %s involuntary",
                sq_fmt_group(sq_report__count(v), g1, D),
                sq_fmt_group(sq_report__count(sq_report__numd(sv, "ctxsw_involuntary", 0)), g2, D));
            row_text(f, "Context switches", t);
        }
        fputs("</table>\n", f);
        size_t i;
        const json_t *p;
        json_array_foreach(json_object_get(sv, "processes"), i, p)
        {
            if (!json_is_true(json_object_get(p, "exited")))
                continue;
            fprintf(f, "<p class=\"meta bad\">pid %.0f (", sq_report__numd(p, "pid", 0));
            esc(f, sq_report__str(p, "name", "?"));
            fprintf(f, ") exited between %.1f s and %.1f s into the run.</p>\n",
                    sq_report__numd(p, "last_seen_s", 0), sq_report__numd(p, "exited_at_s", 0));
        }
        fputs("</div>\n", f);
    }
    if (json_is_object(cl)) {
        fputs("<div>\n<h3>Client (squall itself)</h3>\n<table>\n", f);
        if (sq_report__num(cl, "cpu_per_request_us", &v))
            row(f, "CPU per request", sq_fmt_dur_us(v, b, D));
        snprintf(t, sizeof(t), "%.2f s user · %.2f s system", sq_report__numd(cl, "cpu_user_s", 0),
                 sq_report__numd(cl, "cpu_sys_s", 0));
        row_text(f, "CPU over the run", t);
        snprintf(b, D, "%.1f MB", sq_report__numd(cl, "rss_peak_bytes", 0) / 1e6);
        row(f, "RSS peak", b);
        row(f, "Loop lag (most)", dur_text(cl, "loop_lag_max_ms", 1e3, b));
        if (sq_report__num(cl, "behind_max_ms", &v))
            row(f, "Behind its schedule (most)", dur_text(cl, "behind_max_ms", 1e3, b));
        size_t i;
        const json_t *w;
        json_array_foreach(json_object_get(cl, "workers"), i, w)
        {
            char label[48];
            snprintf(label, sizeof(label), "Worker %zu busy", i + 1);
            snprintf(t, sizeof(t), "%.0f%% (busiest second %.0f%%)",
                     100 * sq_report__numd(w, "busy", 0), 100 * sq_report__numd(w, "busy_max", 0));
            row_text(f, label, t);
        }
        fputs("</table>\n", f);
        if (json_is_true(json_object_get(cl, "saturated"))) {
            fputs("<p class=\"meta bad\">The client was saturated: ", f);
            esc(f, sq_report__str(cl, "saturation", ""));
            fputs(". These figures measure squall, not the server; add threads or agents.</p>\n",
                  f);
        }
        fputs("</div>\n", f);
    }
}

/* True when some entry of the series carries key (an object). */
static bool series_has(const json_t *doc, const char *key)
{
    const json_t *series = json_object_get(doc, "series"), *e;
    size_t i;
    json_array_foreach((json_t *)series, i, e)
    {
        if (json_is_object(json_object_get(e, key)))
            return true;
    }
    return false;
}

/* A chart container, or the note that says why there is none; caption is trusted HTML. */
static void chart_or_note(FILE *f, const char *id, const char *title, const char *note,
                          const char *caption)
{
    fputs("<section>\n<h2>", f);
    esc(f, title);
    fputs("</h2>\n", f);
    if (note) {
        fputs("<p class=\"note\">", f);
        esc(f, note);
        fputs("</p>\n", f);
    } else {
        fprintf(f, "<div class=\"chart\" id=\"%s\"></div>\n", id);
        if (caption)
            fprintf(f, "<p class=\"meta\">%s</p>\n", caption);
    }
    fputs("</section>\n", f);
}

static void status_and_errors(FILE *f, const json_t *doc)
{
    static const char *const cls[] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
    const json_t *st = json_object_get(doc, "status");
    double total = 0;
    for (size_t i = 0; i < SQ_ARRAY_LEN(cls); i++)
        total += sq_report__numd(st, cls[i], 0);
    char b[D];
    fputs("<section>\n<h2>Status codes and errors</h2>\n<div class=\"grid\">\n"
          "<div><div class=\"chart\" id=\"chart-status\"></div></div>\n<div>\n"
          "<h3>Responses by status class</h3>\n<table>\n",
          f);
    for (size_t i = 0; i < SQ_ARRAY_LEN(cls); i++) {
        double n = sq_report__numd(st, cls[i], 0);
        fprintf(f, "<tr><th>%s</th><td class=\"n\">", cls[i]);
        esc(f, sq_fmt_group(sq_report__count(n), b, D));
        fprintf(f, "</td><td class=\"n\">%.2f%%</td></tr>\n", total > 0 ? 100.0 * n / total : 0.0);
    }
    fputs("</table>\n", f);
    const json_t *codes = json_object_get(doc, "status_codes");
    if (json_is_object(codes) && json_object_size(codes)) {
        const char *k;
        json_t *v;
        fputs("<h3>Responses by exact status</h3>\n<table id=\"status-codes\">\n", f);
        json_object_foreach((json_t *)codes, k, v)
        {
            fputs("<tr><th>", f);
            esc(f, k);
            fputs("</th><td class=\"n\">", f);
            esc(f,
                sq_fmt_group(sq_report__count(json_is_number(v) ? json_number_value(v) : 0), b, D));
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    const json_t *fl = json_object_get(doc, "failures");
    if (json_is_object(fl)) {
        fputs("<h3>Failures</h3>\n<table>\n<tr><th>transport (no response)</th><td class=\"n\">",
              f);
        esc(f, sq_fmt_group(sq_report__count(sq_report__numd(fl, "transport", 0)), b, D));
        fputs("</td></tr>\n<tr><th>HTTP (status ≥ 400)</th><td class=\"n\">", f);
        esc(f, sq_fmt_group(sq_report__count(sq_report__numd(fl, "http", 0)), b, D));
        fprintf(f, "</td></tr>\n<tr><th>http_req_failed (k6: both)</th><td class=\"n\">%.2f%%",
                100.0 * sq_report__numd(fl, "http_req_failed.rate", 0));
        fputs("</td></tr>\n</table>\n", f);
    }
    fputs("<h3>Errors by kind</h3>\n", f);
    const json_t *errs = json_object_get(doc, "errors");
    const json_t *msgs = json_object_get(doc, "error_messages");
    size_t shown = 0;
    if (json_is_object(errs) && json_object_size(errs)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)errs, k, v)
        {
            if (json_is_number(v) && json_number_value(v) <= 0)
                continue; /* empty kinds are folded away */
            if (!shown++)
                fputs("<table id=\"errors\">\n", f);
            fputs("<tr><th>", f);
            esc(f, k);
            fputs("</th><td class=\"n\">", f);
            if (json_is_number(v))
                esc(f, sq_fmt_group(sq_report__count(json_number_value(v)), b, D));
            else
                scalar(f, v);
            fputs("</td><td>", f);
            esc(f, sq_report__str(msgs, k, ""));
            fputs("</td></tr>\n", f);
        }
    }
    if (shown)
        fputs("</table>\n<p class=\"meta\">A connect error costs no request; the others each "
              "fail one (docs/json-schema.md).</p>\n",
              f);
    else
        fputs("<p class=\"note\">No errors.</p>\n", f);
    fputs("</div>\n</div>\n</section>\n", f);
}

/* The sampled exchanges (--sample-responses): per class, each kept exchange folded (when it
 * ended, its status or error, latency, request line), open to its request and response. */
static void samples_section(FILE *f, const json_t *doc)
{
    const json_t *classes = sq_report__get(doc, "sampled_exchanges.classes");
    if (!json_array_size(classes))
        return;
    char b[D];
    fputs("<section id=\"samples\">\n<h2>Sampled exchanges</h2>\n<p class=\"meta\">A uniform "
          "random sample of each status class and error kind (--sample-responses): the request "
          "as sent, the response head and the start of its body.</p>\n",
          f);
    size_t i, j;
    const json_t *c, *x;
    json_array_foreach(classes, i, c)
    {
        fputs("<h3>", f);
        esc(f, sq_report__str(c, "class", ""));
        fputs(" · ", f);
        esc(f, sq_fmt_group(sq_report__count(sq_report__numd(c, "seen", 0)), b, D));
        fputs(" seen</h3>\n", f);
        json_array_foreach(json_object_get(c, "samples"), j, x)
        {
            const char *req = sq_report__str(x, "request.text", "");
            size_t rl = strcspn(req, "\r\n");
            char line[160];
            snprintf(line, sizeof(line), "%.*s", (int)(rl < 120 ? rl : 120), req);
            fprintf(f, "<details class=\"sample\"><summary>%.3f s · ",
                    sq_report__numd(x, "t_s", 0));
            if (json_is_integer(json_object_get(x, "status")))
                fprintf(f, "%d", (int)sq_report__numd(x, "status", 0));
            else
                esc(f, sq_report__str(x, "error", ""));
            fprintf(f, " · %.3f ms · ", sq_report__numd(x, "latency_ms", 0));
            esc(f, line);
            fputs("</summary>\n<pre>", f);
            esc(f, req);
            if (json_is_true(sq_report__get(x, "request.cut")))
                fputs("[…]", f);
            fputs("</pre>\n", f);
            const json_t *r = json_object_get(x, "response");
            if (json_is_object(r)) {
                fputs("<pre>", f);
                esc(f, sq_report__str(r, "head", ""));
                esc(f, sq_report__str(r, "body", ""));
                if (json_is_true(json_object_get(r, "body_cut"))) {
                    fputs("[… ", f);
                    esc(f,
                        sq_fmt_group(sq_report__count(sq_report__numd(r, "body_bytes", 0)), b, D));
                    fputs(" bytes in all]", f);
                }
                fputs("</pre>\n", f);
            } else {
                fputs("<p class=\"note\">No response arrived.</p>\n", f);
            }
            fputs("</details>\n", f);
        }
    }
    fputs("</section>\n", f);
}

static void configuration(FILE *f, const json_t *doc)
{
    const json_t *cfg = json_object_get(doc, "config");
    fputs("<section>\n<h2>Configuration</h2>\n", f);
    if (!json_is_object(cfg)) {
        fputs("<p class=\"note\">The document has no configuration.</p>\n</section>\n", f);
        return;
    }
    fputs("<div class=\"grid\">\n<div>\n<h3>Run</h3>\n", f);
    if (json_is_object(json_object_get(doc, "plan"))) {
        /* a plan run: the quick face's method and URL mean nothing here (the header names the
         * plan file and its target) */
        json_t *c = json_copy((json_t *)cfg);
        if (c) {
            json_object_del(c, "method");
            json_object_del(c, "url");
            kv_table(f, c, 0, "executor");
            json_decref(c);
        }
    } else {
        kv_table(f, cfg, 0, "executor");
    }
    fputs("</div>\n", f);
    const json_t *ex = json_object_get(cfg, "executor");
    if (json_is_object(ex)) {
        fputs("<div>\n<h3>Executor</h3>\n", f);
        kv_table(f, ex, 0, NULL);
        fputs("</div>\n", f);
    }
    /* Where it ran, and the --out ndjson sample count, when the document has them. */
    static const char *const more[][2] = {{"environment", "Environment"},
                                          {"samples", "Samples (--out ndjson)"}};
    for (size_t i = 0; i < SQ_ARRAY_LEN(more); i++) {
        const json_t *v = json_object_get(doc, more[i][0]);
        if (!json_is_object(v) || json_object_size(v) == 0)
            continue;
        fputs("<div>\n<h3>", f);
        esc(f, more[i][1]);
        fputs("</h3>\n", f);
        kv_table(f, v, 0, NULL);
        fputs("</div>\n", f);
    }
    fputs("</div>\n</section>\n", f);
}

static void optional_section(FILE *f, const json_t *doc, const char *key, const char *title)
{
    const json_t *v = json_object_get(doc, key);
    if (!v || json_is_null(v))
        return;
    fputs("<section>\n<h2>", f);
    esc(f, title);
    fputs("</h2>\n", f);
    value(f, v, 0);
    fputs("</section>\n", f);
}

/* A step's latency percentile, from its duration_ms (k6's trend, in ms). */
static void step_dur_cell(FILE *f, const json_t *du, const char *key)
{
    char b[D];
    double v;
    fputs("<td class=\"n\">", f);
    if (sq_report__numd(du, "count", 0) > 0 && sq_report__num(du, key, &v))
        esc(f, sq_fmt_dur_us(v * 1000, b, D));
    else
        fputs("—", f);
    fputs("</td>", f);
}

static void count_cell(FILE *f, double v)
{
    char b[D];
    fputs("<td class=\"n\">", f);
    esc(f, sq_fmt_group(sq_report__count(v), b, D));
    fputs("</td>", f);
}

/* A plan's steps, one row each in the document's order (the flow's): requests, the failures
 * apart (transport: no response; HTTP: a status >= 400), p50 / p95 / p99 of its responses and
 * its checks, each with what held and what did not. A `steps` that is not an array of objects
 * is shown as it is. */
static void steps_section(FILE *f, const json_t *doc)
{
    const json_t *steps = json_object_get(doc, "steps"), *e, *c;
    if (!steps || json_is_null(steps))
        return;
    size_t i, j, nobj = 0;
    json_array_foreach((json_t *)steps, i, e) nobj += json_is_object(e);
    if (!json_is_array(steps) || !json_array_size(steps) || nobj != json_array_size(steps)) {
        optional_section(f, doc, "steps", "Steps");
        return;
    }
    /* the scenario column only when the steps span more than one */
    const char *sc0 = sq_report__str(json_array_get(steps, 0), "scenario", "");
    bool scenarios = false;
    json_array_foreach((json_t *)steps, i, e) scenarios |=
        strcmp(sq_report__str(e, "scenario", ""), sc0) != 0;
    const json_t *checks = json_object_get(doc, "checks");
    fputs("<section>\n<h2>Steps</h2>\n<table id=\"steps\">\n<tr>", f);
    if (scenarios)
        fputs("<th>scenario</th>", f);
    fputs("<th>step</th><th>method</th><th class=\"n\">requests</th><th class=\"n\">failed</th>"
          "<th class=\"n\">transport</th><th class=\"n\">HTTP</th><th class=\"n\">p50</th>"
          "<th class=\"n\">p95</th><th class=\"n\">p99</th><th>checks</th></tr>\n",
          f);
    json_array_foreach((json_t *)steps, i, e)
    {
        if (i == GENERIC_MAX_ROWS)
            break;
        const char *sc = sq_report__str(e, "scenario", ""), *name = sq_report__str(e, "step", "?");
        double failed = sq_report__numd(e, "failed", 0), errs = sq_report__numd(e, "errors", 0);
        const json_t *du = json_object_get(e, "duration_ms");
        fputs("<tr>", f);
        if (scenarios) {
            fputs("<td>", f);
            esc(f, sc);
            fputs("</td>", f);
        }
        fputs("<td>", f);
        esc(f, name);
        const json_t *bd = json_object_get(e, "batch_duration_ms"); /* a batch's first request */
        if (sq_report__numd(bd, "count", 0) > 0) {
            char b1[D], b2[D];
            fputs("<br><small>batch_duration p50 ", f);
            esc(f, sq_fmt_dur_us(sq_report__numd(bd, "med", 0) * 1000, b1, D));
            fputs(" · p95 ", f);
            esc(f, sq_fmt_dur_us(sq_report__numd(bd, "p(95)", 0) * 1000, b2, D));
            fputs("</small>", f);
        }
        fputs("</td><td>", f);
        esc(f, sq_report__str(e, "method", ""));
        fputs("</td>", f);
        count_cell(f, sq_report__numd(e, "requests", 0));
        count_cell(f, failed);
        count_cell(f, errs);
        count_cell(f, failed > errs ? failed - errs : 0);
        step_dur_cell(f, du, "med");
        step_dur_cell(f, du, "p(95)");
        step_dur_cell(f, du, "p(99)");
        fputs("<td>", f);
        size_t n = 0;
        json_array_foreach((json_t *)checks, j, c)
        {
            if (!json_is_object(c) || strcmp(sq_report__str(c, "step", ""), name) != 0 ||
                strcmp(sq_report__str(c, "scenario", ""), sc) != 0)
                continue;
            double cf = sq_report__numd(c, "failed", 0);
            char g1[D], g2[D];
            fprintf(f, "%s<span class=\"%s\">%s</span> ", n++ ? "<br>" : "",
                    cf > 0 ? "bad" : "good", cf > 0 ? "✗" : "✓");
            esc(f, sq_report__str(c, "check", "?"));
            fputs(" · ", f);
            esc(f, sq_fmt_group(sq_report__count(sq_report__numd(c, "passed", 0)), g1, D));
            fputs(" passed, ", f);
            esc(f, sq_fmt_group(sq_report__count(cf), g2, D));
            fputs(" failed", f);
        }
        if (!n)
            fputs("—", f);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    if (json_array_size(steps) > GENERIC_MAX_ROWS)
        fprintf(f, "<p class=\"meta\">%zu more steps are in the embedded data.</p>\n",
                json_array_size(steps) - GENERIC_MAX_ROWS);
    fputs("<p class=\"meta\">In the flow&#39;s order. failed = transport (no response) + HTTP "
          "(a status ≥ 400); p50, p95 and p99 are of the step&#39;s responses.</p>\n</section>\n",
          f);
}

/* The JSON island the page's script reads: the document under "result", the HdrHistogram
 * curves under "hdr" (null when they cannot be drawn: *hdr_why says why). NULL when out of
 * memory. */
static char *island_json(const json_t *doc, bool open, const char **hdr_why)
{
    json_t *hdr = hdr_curves(doc, open, hdr_why);
    json_t *island = json_object();
    if (!island) {
        json_decref(hdr);
        return NULL;
    }
    json_object_set(island, "result", (json_t *)doc);
    json_object_set_new(island, "hdr", hdr ? hdr : json_null());
    char *text = json_dumps(island, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(island);
    return text;
}

/* From the doctype to the body: the page's policy (nothing loaded from elsewhere), title and
 * styles. */
static void page_head(FILE *out, const json_t *doc)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"squall " SQ_VERSION "\">\n"
          "<link rel=\"icon\" href=\"data:,\">\n<title>squall report · ",
          out);
    esc(out, sq_report__str(doc, "config.url", "run"));
    fputs("</title>\n<style>\n", out);
    fwrite(sq_uplot_css, 1, sq_uplot_css_len, out);
    fputs("\n", out);
    fwrite(sq_report_css, 1, sq_report_css_len, out);
    fputs("</style>\n</head>\n<body>\n", out);
}

/* The charts over time: throughput, latency, every 100 ms, the watched server's and squall's
 * own (each where the document has their series; series_why: why it has none). */
static void time_charts(FILE *out, const json_t *doc, const char *series_why)
{
    chart_or_note(out, "chart-throughput", "Throughput and errors over time", series_why,
                  "Per second of the run: responses completed, requests failed and arrivals "
                  "dropped, and the VUs active (open loop: the requests in flight).");
    chart_or_note(out, "chart-latency", "Latency over time", series_why,
                  "Percentiles of the responses completed in each second.");
    const json_t *fine = json_object_get(doc, "series_100ms");
    chart_or_note(out, "chart-fine", "Every 100 ms",
                  json_is_object(fine) && json_array_size(json_object_get(fine, "completed"))
                      ? NULL
                      : "This result has no 100 ms series (written by an older squall, or the "
                        "run never started).",
                  "Responses completed and the largest latency in each 100 ms of the run: a "
                  "stall shorter than a second shows here, where the per-second charts average "
                  "it away.");
    if (json_is_object(json_object_get(doc, "server")) && !series_why) {
        chart_or_note(out, "chart-server", "The server over time (watched processes)",
                      series_has(doc, "server") ? NULL
                                                : "The series carries no sample of the watched "
                                                  "processes.",
                      "Per second: responses completed beside the CPU the watched processes "
                      "spent (100% is one core, user and system together).");
        if (series_has(doc, "server"))
            chart_or_note(out, "chart-server-mem", "Server memory, threads and open files", NULL,
                          "RSS of the watched processes at each second&#39;s end (summed), their "
                          "threads and their open file descriptors.");
    }
    if (series_has(doc, "client"))
        chart_or_note(out, "chart-client", "The client over time (squall itself)", NULL,
                      "Per second: the busiest worker thread&#39;s busy share (on a CPU or "
                      "waiting for one), squall&#39;s CPU (100% is one core) and how late its "
                      "once-a-second tick ran. A worker near 100% busy means the figures measure "
                      "squall, not the server.");
}

/* The sections after the summary: the charts, statuses and errors, sampled exchanges, the
 * configuration, a plan's steps, the watched processes, the pool and pacing. */
static void page_sections(FILE *out, const json_t *doc, bool open, bool plan,
                          const char *series_why, const char *hdr_why)
{
    time_charts(out, doc, series_why);
    /* changes made while it ran (engine/control.h): also marked on the charts over time */
    optional_section(out, doc, "controls", "Changes made while it ran (control)");
    chart_or_note(out, "chart-hdr", "Latency distribution (percentiles)", hdr_why,
                  open
                      ? "HdrHistogram&#39;s percentile plot of the merged histogram: the x axis is "
                        "1/(1&#8722;percentile) on a log scale, each tick one more nine. The solid "
                        "curve is measured from each request&#39;s intended send; the dashed one "
                        "from its actual send, which hides the waiting that coordinated omission "
                        "hides."
                      : "HdrHistogram&#39;s percentile plot of the merged histogram: the x axis is "
                        "1/(1&#8722;percentile) on a log scale, each tick one more nine.");
    status_and_errors(out, doc);
    samples_section(out, doc);
    configuration(out, doc);
    if (plan && json_array_size(json_object_get(doc, "steps")))
        chart_or_note(out, "chart-steps", "Steps over time", NULL,
                      "Per second, each request step's p99 latency (solid, left axis) and its "
                      "responses (dotted, right axis).");
    if (json_is_object(json_object_get(doc, "server")))
        optional_section(out, sq_report__get(doc, "server"), "processes", "Watched processes");
    optional_section(out, doc, "pool", "Connection pool (--max-vus)");
    optional_section(out, doc, "pacing", "Pacing (--pacing-precision)");
}

/* The footer, the document as the page's data island, the scripts. */
static void page_tail(FILE *out, const json_t *doc, const char *island)
{
    fputs("</main>\n<footer>Written by squall " SQ_VERSION " from a ", out);
    esc(out, sq_report__str(doc, "schema", ""));
    fputs(" document, which is embedded in this file (the JSON in script#squall-data, under "
          "\"result\").</footer>\n",
          out);
    sq_page__scripts(out, island, sq_report_js, sq_report_js_len);
}

int sq_report_html(const json_t *doc, FILE *out)
{
    const char *why;
    if (sq_report_doc_check(doc, &why) < 0)
        return -SQ_EPARSE;
    bool open = strcmp(sq_report__str(doc, "mode", ""), "open-loop") == 0;
    const char *hdr_why = NULL;
    char *island = island_json(doc, open, &hdr_why);
    if (!island)
        return -ENOMEM;
    const json_t *series = json_object_get(doc, "series");
    const char *series_why =
        json_is_array(series) && json_array_size(series)
            ? NULL
            : "This result has no per-second series (the squall that wrote it did not record "
              "one), so the charts over time are left out.";
    page_head(out, doc);
    header(out, doc, open);
    if (json_is_true(sq_report__get(doc, "client.saturated"))) {
        fputs("<p class=\"meta bad\">The client was saturated: ", out);
        esc(out, sq_report__str(doc, "client.saturation", ""));
        fputs(" &#8212; these figures measure squall, not the server; add threads or "
              "agents.</p>\n",
              out);
    }
    fputs("<main>\n", out);
    bool plan = json_is_object(json_object_get(doc, "plan"));
    if (plan) {
        /* a plan's verdict comes first: its thresholds, then its checks */
        optional_section(out, doc, "thresholds", "Thresholds");
        optional_section(out, doc, "checks", "Checks");
    }
    fputs("<section>\n<h2>Summary</h2>\n<div class=\"grid\">\n", out);
    figures(out, doc, open);
    accounting(out, doc, open);
    resources(out, doc);
    fputs("</div>\n</section>\n", out);
    steps_section(out, doc);
    optional_section(out, doc, "groups", "Groups"); /* group: blocks, their steps added up */
    optional_section(out, doc, "custom_metrics", "Custom metrics"); /* the plan's metrics: */
    page_sections(out, doc, open, plan, series_why, hdr_why);
    if (!plan) { /* not a plan: checks and thresholds, if any, come last */
        optional_section(out, doc, "checks", "Checks");
        optional_section(out, doc, "thresholds", "Thresholds");
    }
    page_tail(out, doc, island);
    free(island);
    return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
}
