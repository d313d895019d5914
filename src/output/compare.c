/* output/compare.c - two saved runs side by side (see compare.h).
 *
 * A row per figure: the known ones from a table (label, unit, which direction is better), then
 * every other number found in either document by walking both (objects only: arrays hold the
 * series and per-process lists, which the charts show instead). A figure one document lacks has
 * null on that side and no delta.
 */
#include "output/compare.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "output/doc.h"
#include "output/fmt.h"
#include "output/html_assets.h"
#include "output/page.h"
#include "stats/hist.h"

#define D 40

enum unit { U_COUNT, U_RATE, U_US, U_MS, U_S, U_BYTES, U_BPS, U_NUM };

static const char *const unit_names[] = {"count", "per_s", "us",          "ms",
                                         "s",     "bytes", "bytes_per_s", "number"};

struct fig {
    const char *key, *label;
    enum unit unit;
    int better; /* +1 higher is better, -1 lower is, 0 neither */
};

static const struct fig figs[] = {
    {"rate.requests_per_s", "Throughput", U_RATE, +1},
    {"duration_s", "Duration", U_S, 0},
    {"setup_s", "Setup", U_S, -1},
    {"requests.sent", "Requests sent", U_COUNT, 0},
    {"requests.completed", "Completed", U_COUNT, +1},
    {"requests.failed", "Failed", U_COUNT, -1},
    {"requests.in_flight", "In flight at the end", U_COUNT, 0},
    {"requests.dropped", "Dropped", U_COUNT, -1},
    {"requests.arrivals", "Arrivals due", U_COUNT, 0},
    {"latency.min_us", "Latency min", U_US, -1},
    {"latency.mean_us", "Latency mean", U_US, -1},
    {"latency.stdev_us", "Latency stdev", U_US, -1},
    {"latency.p50_us", "Latency p50", U_US, -1},
    {"latency.p90_us", "Latency p90", U_US, -1},
    {"latency.p95_us", "Latency p95", U_US, -1},
    {"latency.p99_us", "Latency p99", U_US, -1},
    {"latency.p99_9_us", "Latency p99.9", U_US, -1},
    {"latency.max_us", "Latency max", U_US, -1},
    {"latency_uncorrected.p50_us", "Uncorrected p50", U_US, -1},
    {"latency_uncorrected.p99_us", "Uncorrected p99", U_US, -1},
    {"rate.bytes_received_per_s", "Bytes in", U_BPS, 0},
    {"rate.bytes_sent_per_s", "Bytes out", U_BPS, 0},
    {"status.1xx", "Status 1xx", U_COUNT, 0},
    {"status.2xx", "Status 2xx", U_COUNT, 0},
    {"status.3xx", "Status 3xx", U_COUNT, 0},
    {"status.4xx", "Status 4xx", U_COUNT, -1},
    {"status.5xx", "Status 5xx", U_COUNT, -1},
    {"status.other", "Status other", U_COUNT, -1},
    {"connections.opened", "Connections opened", U_COUNT, 0},
    {"connections.closed_by_server", "Closed by the server", U_COUNT, -1},
    {"server.cpu_ms_per_1k_requests", "Server CPU per 1k requests", U_MS, -1},
    {"server.rss_peak_bytes", "Server RSS peak", U_BYTES, -1},
    {"server.threads_max", "Server threads", U_COUNT, 0},
    {"server.fds_max", "Server open files", U_COUNT, 0},
    {"server.ctxsw_voluntary", "Server voluntary switches", U_COUNT, 0},
    {"server.ctxsw_involuntary", "Server involuntary switches", U_COUNT, -1},
    {"client.cpu_per_request_us", "Client CPU per request", U_US, -1},
    {"client.rss_peak_bytes", "Client RSS peak", U_BYTES, -1},
    {"client.loop_lag_max_ms", "Client loop lag max", U_MS, -1},
};

/* Paths the generic walk leaves out: the series, histograms, the environment, per-worker and
 * per-process lists (arrays are left out anyway), and the known figures. */
static bool skipped(const char *path)
{
    static const char *const prefixes[] = {"series", "environment", "schema", "squall_version"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(prefixes); i++) {
        size_t n = strlen(prefixes[i]);
        if (strncmp(path, prefixes[i], n) == 0 && (path[n] == '\0' || path[n] == '.'))
            return true;
    }
    if (strstr(path, "histogram"))
        return true;
    for (size_t i = 0; i < SQ_ARRAY_LEN(figs); i++)
        if (strcmp(path, figs[i].key) == 0)
            return true;
    return false;
}

static json_t *num_or_null(const json_t *doc, const char *key)
{
    double v;
    return sq_report__num(doc, key, &v) ? json_real(v) : json_null();
}

static enum unit guess_unit(const char *key)
{
    size_t n = strlen(key);
#define ENDS(s) (n >= sizeof(s) - 1 && strcmp(key + n - (sizeof(s) - 1), s) == 0)
    if (ENDS("_us"))
        return U_US;
    if (ENDS("_ms"))
        return U_MS;
    if (ENDS("_s"))
        return U_S;
    if (ENDS("bytes_per_s"))
        return U_BPS;
    if (ENDS("_bytes") || ENDS("bytes"))
        return U_BYTES;
    if (ENDS("_per_s"))
        return U_RATE;
#undef ENDS
    return U_NUM;
}

static int add_row(json_t *rows, json_t *seen, const json_t *a, const json_t *b, const char *key,
                   const char *label, enum unit unit, int better)
{
    if (json_object_get(seen, key))
        return 0;
    json_t *va = num_or_null(a, key), *vb = num_or_null(b, key);
    if (json_is_null(va) && json_is_null(vb)) {
        json_decref(va);
        json_decref(vb);
        return 0;
    }
    json_object_set_new(seen, key, json_true());
    json_t *delta = json_null(), *pct = json_null();
    if (json_is_real(va) && json_is_real(vb)) {
        double x = json_real_value(va), y = json_real_value(vb);
        json_decref(delta);
        delta = json_real(y - x);
        if (x != 0) {
            json_decref(pct);
            pct = json_real(100 * (y - x) / x);
        }
    }
    json_t *r =
        json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:s?}", "key", key, "label", label, "unit",
                  unit_names[unit], "a", va, "b", vb, "delta", delta, "delta_pct", pct, "better",
                  better > 0   ? "higher"
                  : better < 0 ? "lower"
                               : NULL);
    return r ? json_array_append_new(rows, r) : -ENOMEM;
}

/* Every number under obj (objects only), by dotted path, into rows. */
static void walk(json_t *rows, json_t *seen, const json_t *a, const json_t *b, const json_t *obj,
                 char *path, size_t len, size_t cap)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        size_t kl = strlen(k);
        if (len + kl + 2 > cap)
            continue;
        size_t at = len;
        if (len)
            path[at++] = '.';
        memcpy(path + at, k, kl + 1);
        if (skipped(path)) {
            path[len] = '\0';
            continue;
        }
        if (json_is_object(v))
            walk(rows, seen, a, b, v, path, at + kl, cap);
        else if (json_is_number(v))
            add_row(rows, seen, a, b, path, path, guess_unit(path), 0);
        path[len] = '\0';
    }
}

/* The union of the keys of a's and b's objects at path, each as "path.KEY". */
static void union_rows(json_t *rows, json_t *seen, const json_t *a, const json_t *b,
                       const char *path, const char *suffix, const char *label_fmt, enum unit unit,
                       int better)
{
    const json_t *docs[2] = {a, b};
    for (int d = 0; d < 2; d++) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)sq_report__get(docs[d], path), k, v)
        {
            char key[256], label[160];
            snprintf(key, sizeof(key), "%s.%s%s", path, k, suffix);
            snprintf(label, sizeof(label), label_fmt, k);
            add_row(rows, seen, a, b, key, label, unit, better);
        }
    }
}

json_t *sq_compare_doc(const json_t *a, const json_t *b, const char *name_a, const char *name_b)
{
    json_t *rows = json_array(), *seen = json_object();
    if (!rows || !seen) {
        json_decref(rows);
        json_decref(seen);
        return NULL;
    }
    for (size_t i = 0; i < SQ_ARRAY_LEN(figs); i++)
        add_row(rows, seen, a, b, figs[i].key, figs[i].label, figs[i].unit, figs[i].better);
    union_rows(rows, seen, a, b, "errors", "", "Errors: %s", U_COUNT, -1);
    union_rows(rows, seen, a, b, "phases", ".p50_us", "Phase %s p50", U_US, -1);
    union_rows(rows, seen, a, b, "phases", ".p95_us", "Phase %s p95", U_US, -1);
    char path[512] = "";
    walk(rows, seen, a, b, a, path, 0, sizeof(path));
    walk(rows, seen, a, b, b, path, 0, sizeof(path));
    json_decref(seen);
    json_t *side_a = json_pack(
        "{s:s, s:s, s:s, s:s}", "name", name_a, "url", sq_report__str(a, "config.url", ""), "mode",
        sq_report__str(a, "mode", ""), "squall_version", sq_report__str(a, "squall_version", ""));
    json_t *side_b = json_pack(
        "{s:s, s:s, s:s, s:s}", "name", name_b, "url", sq_report__str(b, "config.url", ""), "mode",
        sq_report__str(b, "mode", ""), "squall_version", sq_report__str(b, "squall_version", ""));
    return json_pack("{s:s, s:o, s:o, s:o}", "schema", SQ_COMPARE_SCHEMA, "a", side_a, "b", side_b,
                     "figures", rows);
}

/* ---- formatting ---- */

static enum unit unit_of(const char *name)
{
    for (size_t i = 0; i < SQ_ARRAY_LEN(unit_names); i++)
        if (strcmp(name, unit_names[i]) == 0)
            return (enum unit)i;
    return U_NUM;
}

static const char *us_text(double us, char *buf, size_t size)
{
    if (us < 10)
        snprintf(buf, size, "%.2fµs", us);
    else if (us < 100)
        snprintf(buf, size, "%.1fµs", us);
    else
        sq_fmt_dur_us(us, buf, size);
    return buf;
}

/* A value (or a delta, with its sign) in its unit. */
static const char *fmt_value(enum unit u, double v, bool sign, char *buf, size_t size)
{
    char t[D - 2];
    double a = fabs(v);
    switch (u) {
    case U_COUNT:
        if (a == floor(a) && a < 1e15)
            sq_fmt_group((uint64_t)a, t, sizeof(t));
        else
            snprintf(t, sizeof(t), "%.1f", a);
        break;
    case U_RATE:
        snprintf(t, sizeof(t), "%.1f/s", a);
        break;
    case U_US:
        us_text(a, t, sizeof(t));
        break;
    case U_MS:
        us_text(a * 1e3, t, sizeof(t));
        break;
    case U_S:
        us_text(a * 1e6, t, sizeof(t));
        break;
    case U_BYTES:
        sq_fmt_bytes(a, t, sizeof(t));
        break;
    case U_BPS: {
        char bb[D - 6];
        snprintf(t, sizeof(t), "%s/s", sq_fmt_bytes(a, bb, sizeof(bb)));
        break;
    }
    default:
        snprintf(t, sizeof(t), "%.6g", a);
    }
    const char *s = v < 0 ? "-" : sign && v > 0 ? "+" : "";
    snprintf(buf, size, "%s%s", s, t);
    return buf;
}

static const char *cell(const json_t *row, const char *k, bool sign, char *buf)
{
    const json_t *v = json_object_get(row, k);
    if (!json_is_number(v))
        return "—";
    return fmt_value(unit_of(sq_report__str(row, "unit", "")), json_number_value(v), sign, buf, D);
}

static const char *pct_cell(const json_t *row, char *buf)
{
    const json_t *v = json_object_get(row, "delta_pct");
    if (!json_is_number(v))
        return "";
    snprintf(buf, D, "%+.1f%%", json_number_value(v));
    return buf;
}

int sq_compare_table(const json_t *cmp, FILE *f)
{
    fprintf(f, "A  %s  (%s)\nB  %s  (%s)\n\n", sq_report__str(cmp, "a.name", "?"),
            sq_report__str(cmp, "a.url", ""), sq_report__str(cmp, "b.name", "?"),
            sq_report__str(cmp, "b.url", ""));
    sq_fmt_pad(f, "figure", 34, false);
    sq_fmt_pad(f, "A", 16, true);
    sq_fmt_pad(f, "B", 16, true);
    sq_fmt_pad(f, "B - A", 16, true);
    sq_fmt_pad(f, "", 10, true);
    fputc('\n', f);
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(cmp, "figures"), i, r)
    {
        char a[D], b[D], d[D], p[D];
        const char *label = sq_report__str(r, "label", "?");
        sq_fmt_pad(f, label, 34, false);
        sq_fmt_pad(f, cell(r, "a", false, a), 16, true);
        sq_fmt_pad(f, cell(r, "b", false, b), 16, true);
        sq_fmt_pad(f, json_is_number(json_object_get(r, "delta")) ? cell(r, "delta", true, d) : "",
                   16, true);
        sq_fmt_pad(f, pct_cell(r, p), 10, true);
        fputc('\n', f);
    }
    fputs("\nDifferences of single runs: `squall ab` says whether one is beyond noise.\n", f);
    return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}

/* ---- the HTML page ---- */

/* The percentile curves of both latency histograms on one x grid (1/(1-p), log), or null. */
static json_t *hdr_pair(const json_t *a, const json_t *b)
{
    struct sq_hist *ha = NULL, *hb = NULL;
    bool oka = sq_report__hist(json_object_get(a, "latency"), &ha) == 0 && sq_hist_total(ha) > 0;
    bool okb = sq_report__hist(json_object_get(b, "latency"), &hb) == 0 && sq_hist_total(hb) > 0;
    if (!oka && !okb) {
        sq_hist_free(ha);
        sq_hist_free(hb);
        return json_null();
    }
    int64_t total = 0;
    if (oka)
        total = sq_hist_total(ha);
    if (okb && sq_hist_total(hb) > total)
        total = sq_hist_total(hb);
    int decades = (int)ceil(log10((double)total));
    decades = decades < 2 ? 2 : decades > 7 ? 7 : decades;
    json_t *xs = json_array(), *ya = json_array(), *yb = json_array();
    for (int i = 0; i <= decades * 20; i++) {
        double x = pow(10.0, i / 20.0), pct = 100.0 * (1.0 - 1.0 / x);
        json_array_append_new(xs, json_real(x));
        json_array_append_new(ya, oka ? json_integer(sq_hist_percentile(ha, pct)) : json_null());
        json_array_append_new(yb, okb ? json_integer(sq_hist_percentile(hb, pct)) : json_null());
    }
    sq_hist_free(ha);
    sq_hist_free(hb);
    return json_pack("{s:o, s:o, s:o}", "x", xs, "a", ya, "b", yb);
}

static void td_num(FILE *f, const char *text, const char *cls)
{
    fprintf(f, "<td class=\"n%s%s\">", cls ? " " : "", cls ? cls : "");
    sq_page__esc(f, text);
    fputs("</td>", f);
}

int sq_compare_html(const json_t *cmp, const json_t *a, const json_t *b, FILE *f)
{
    char title[512];
    snprintf(title, sizeof(title), "squall compare · %s vs %s", sq_report__str(cmp, "a.name", "A"),
             sq_report__str(cmp, "b.name", "B"));
    sq_page__head(f, title);
    fputs("<header>\n<h1><span class=\"brand\">squall</span><span class=\"target\">compare</span>"
          "</h1>\n<p class=\"meta\">A: ",
          f);
    sq_page__esc(f, sq_report__str(cmp, "a.name", "?"));
    fputs(" (", f);
    sq_page__esc(f, sq_report__str(cmp, "a.url", ""));
    fputs(")<br>B: ", f);
    sq_page__esc(f, sq_report__str(cmp, "b.name", "?"));
    fputs(" (", f);
    sq_page__esc(f, sq_report__str(cmp, "b.url", ""));
    fputs(")</p>\n</header>\n<main>\n<section>\n<h2>Figures</h2>\n<table>\n<tr><th>figure</th>"
          "<th>A</th><th>B</th><th>B &#8722; A</th><th></th></tr>\n",
          f);
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(cmp, "figures"), i, r)
    {
        char x[D], y[D], d[D], p[D];
        const char *better = sq_report__str(r, "better", NULL);
        double delta;
        const char *cls = NULL;
        if (better && sq_report__num(r, "delta", &delta) && delta != 0)
            cls = (delta > 0) == (strcmp(better, "higher") == 0) ? "good" : "bad";
        fputs("<tr><th>", f);
        sq_page__esc(f, sq_report__str(r, "label", "?"));
        fputs("</th>", f);
        td_num(f, cell(r, "a", false, x), NULL);
        td_num(f, cell(r, "b", false, y), NULL);
        td_num(f, json_is_number(json_object_get(r, "delta")) ? cell(r, "delta", true, d) : "",
               cls);
        td_num(f, pct_cell(r, p), cls);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n<p class=\"meta\">Differences of single runs. Whether one is beyond noise is "
          "what <code>squall ab</code> answers (rotated rounds, a null test, a bootstrap "
          "interval).</p>\n</section>\n",
          f);
    static const char *const charts[][3] = {
        {"chart-cmp-hdr", "Latency distribution (percentiles), A and B",
         "HdrHistogram&#39;s percentile plot of each run&#39;s merged histogram; the x axis is "
         "1/(1&#8722;percentile) on a log scale."},
        {"chart-cmp-rps", "Throughput over time",
         "Responses completed per second, both runs "
         "aligned on seconds since their start."},
        {"chart-cmp-p99", "p99 latency over time", "The 99th percentile of each second."},
        {"chart-cmp-server", "Server CPU over time",
         "CPU the watched processes spent each second (100% is one core)."},
    };
    bool server = json_is_object(json_object_get(a, "server")) &&
                  json_is_object(json_object_get(b, "server"));
    for (size_t c = 0; c < SQ_ARRAY_LEN(charts); c++) {
        if (c == 3 && !server)
            continue;
        fputs("<section>\n<h2>", f);
        sq_page__esc(f, charts[c][1]);
        fprintf(f,
                "</h2>\n<div class=\"chart\" id=\"%s\"></div>\n<p class=\"meta\">%s</p>\n"
                "</section>\n",
                charts[c][0], charts[c][2]);
    }
    fputs(
        "</main>\n<footer>Written by squall " SQ_VERSION ". The comparison (schema "
        "squall.compare/1) and both runs&#39; series are embedded (script#squall-data).</footer>\n",
        f);
    json_t *series_a = json_object_get(a, "series"), *series_b = json_object_get(b, "series");
    json_t *island = json_pack(
        "{s:s, s:O, s:o, s:o, s:o}", "kind", "compare", "compare", (json_t *)cmp, "series_a",
        json_is_array(series_a) ? json_incref(series_a) : json_array(), "series_b",
        json_is_array(series_b) ? json_incref(series_b) : json_array(), "hdr", hdr_pair(a, b));
    if (!island)
        return -ENOMEM;
    int rc = sq_page__tail(f, island, sq_instr_js, sq_instr_js_len);
    json_decref(island);
    return rc;
}
