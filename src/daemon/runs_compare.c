/* daemon/runs_compare.c - two results side by side (daemon/runs_compare.h). */
#include "daemon/runs_compare.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "output/fmt.h"
#include "stats/hist.h"

#define STEPS_PER_DECADE 20
#define MIN_DECADES      2
#define MAX_DECADES      7
#define SIMILAR          0.05 /* |change| under this: "similar" */

enum better { NONE, LOWER, HIGHER };
enum unit { U_COUNT, U_RATE, U_US, U_S };

static const struct row {
    const char *key; /* dotted path in the document; "errors" is the sum of its counts */
    const char *label;
    enum unit unit;
    enum better better;
} rows[] = {
    {"rate.requests_per_s", "requests/s", U_RATE, HIGHER},
    {"requests.sent", "sent", U_COUNT, NONE},
    {"requests.completed", "completed", U_COUNT, NONE},
    {"requests.failed", "failed", U_COUNT, LOWER},
    {"requests.dropped", "dropped", U_COUNT, LOWER},
    {"errors", "errors", U_COUNT, LOWER},
    {"status.2xx", "2xx", U_COUNT, NONE},
    {"status.4xx", "4xx", U_COUNT, LOWER},
    {"status.5xx", "5xx", U_COUNT, LOWER},
    {"latency.mean_us", "mean", U_US, LOWER},
    {"latency.p50_us", "p50", U_US, LOWER},
    {"latency.p90_us", "p90", U_US, LOWER},
    {"latency.p95_us", "p95", U_US, LOWER},
    {"latency.p99_us", "p99", U_US, LOWER},
    {"latency.p99_9_us", "p99.9", U_US, LOWER},
    {"latency.max_us", "max", U_US, LOWER},
    {"duration_s", "duration", U_S, NONE},
};

static const char *const unit_names[] = {"count", "per_s", "us", "s"};

/* The number at a dotted path, or NAN. */
static double num_at(const json_t *doc, const char *path)
{
    if (strcmp(path, "errors") == 0) {
        const json_t *e = json_object_get(doc, "errors");
        if (!json_is_object(e))
            return NAN;
        double sum = 0;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)e, k, v)
        {
            if (json_is_number(v))
                sum += json_number_value(v);
        }
        return sum;
    }
    char key[64];
    const json_t *cur = doc;
    for (const char *p = path; cur && *p;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof(key))
            return NAN;
        memcpy(key, p, n);
        key[n] = '\0';
        cur = json_object_get(cur, key);
        p += n + (dot ? 1 : 0);
    }
    return cur && json_is_number(cur) ? json_number_value(cur) : NAN;
}

static json_t *num_json(double v)
{
    if (isnan(v))
        return json_null();
    if (v == floor(v) && fabs(v) < 9e15)
        return json_integer((json_int_t)v);
    return json_real(v);
}

static json_t *side(const json_t *doc)
{
    const json_t *cfg = json_object_get(doc, "config");
    const json_t *url = cfg ? json_object_get(cfg, "url") : NULL;
    const json_t *mode = json_object_get(doc, "mode");
    return json_pack("{s:o, s:o, s:o}", "url", url ? json_incref((json_t *)url) : json_null(),
                     "mode", mode ? json_incref((json_t *)mode) : json_null(), "duration_s",
                     num_json(num_at(doc, "duration_s")));
}

static json_t *curve(const struct sq_hist *h, const json_t *xs)
{
    json_t *a = json_array();
    size_t i;
    json_t *x;
    json_array_foreach(xs, i, x)
    {
        double pct = 100.0 * (1.0 - 1.0 / json_real_value(x));
        json_array_append_new(a, json_integer(sq_hist_percentile(h, pct)));
    }
    return a;
}

json_t *sq_daemon_compare(const json_t *a, const struct sq_hist *ha, const json_t *b,
                          const struct sq_hist *hb)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *r = &rows[i];
        double va = num_at(a, r->key), vb = num_at(b, r->key);
        double delta = vb - va;
        double change = (!isnan(delta) && va != 0) ? delta / va : NAN;
        json_t *verdict = json_null();
        if (r->better != NONE && !isnan(delta)) {
            json_decref(verdict);
            bool up = delta > 0;
            if (!isnan(change) ? fabs(change) < SIMILAR : delta == 0)
                verdict = json_string("similar");
            else
                verdict = json_string(up == (r->better == HIGHER) ? "better" : "worse");
        }
        json_array_append_new(
            arr, json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o}", "key", r->key, "label",
                           r->label, "unit", unit_names[r->unit], "a", num_json(va), "b",
                           num_json(vb), "delta", num_json(delta), "change",
                           isnan(change) ? json_null() : json_real(change), "better",
                           r->better == NONE    ? json_null()
                           : r->better == LOWER ? json_string("lower")
                                                : json_string("higher"),
                           "verdict", verdict));
    }
    json_t *pct = json_null();
    int64_t ta = ha ? sq_hist_total(ha) : 0, tb = hb ? sq_hist_total(hb) : 0;
    if (ta > 0 && tb > 0) {
        int64_t total = ta > tb ? ta : tb;
        int decades = (int)ceil(log10((double)total));
        decades = decades < MIN_DECADES   ? MIN_DECADES
                  : decades > MAX_DECADES ? MAX_DECADES
                                          : decades;
        json_t *xs = json_array();
        for (int i = 0; i <= decades * STEPS_PER_DECADE; i++)
            json_array_append_new(xs, json_real(pow(10.0, (double)i / STEPS_PER_DECADE)));
        json_decref(pct);
        pct = json_pack("{s:o, s:o, s:o}", "x", xs, "a", curve(ha, xs), "b", curve(hb, xs));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "a", side(a), "b", side(b), "rows", arr, "percentiles",
                     pct ? pct : json_null());
}

static void value_text(const json_t *v, const char *unit, char *buf, size_t n)
{
    if (!json_is_number(v)) {
        snprintf(buf, n, "-");
        return;
    }
    double x = json_number_value(v);
    if (strcmp(unit, "us") == 0)
        sq_fmt_dur_us(x, buf, n);
    else if (strcmp(unit, "s") == 0)
        snprintf(buf, n, "%.2fs", x);
    else if (strcmp(unit, "per_s") == 0)
        snprintf(buf, n, "%.1f", x);
    else
        sq_fmt_group(x < 0 ? 0 : (uint64_t)x, buf, n);
}

void sq_daemon_compare_print(const json_t *cmp, const char *name_a, const char *name_b, FILE *f)
{
    fprintf(f, "%-12s %16s %16s %10s\n", "", name_a, name_b, "change");
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(cmp, "rows"), i, r)
    {
        const char *unit = json_string_value(json_object_get(r, "unit"));
        char va[40], vb[40], ch[24] = "";
        value_text(json_object_get(r, "a"), unit ? unit : "", va, sizeof(va));
        value_text(json_object_get(r, "b"), unit ? unit : "", vb, sizeof(vb));
        const json_t *c = json_object_get(r, "change");
        if (json_is_number(c))
            snprintf(ch, sizeof(ch), "%+.1f%%", 100.0 * json_number_value(c));
        const char *verdict = json_string_value(json_object_get(r, "verdict"));
        fprintf(f, "%-12s ", json_string_value(json_object_get(r, "label")));
        sq_fmt_pad(f, va, 16, true);
        fputc(' ', f);
        sq_fmt_pad(f, vb, 16, true);
        fprintf(f, " %10s%s%s\n", ch, verdict && strcmp(verdict, "similar") ? "  " : "",
                verdict && strcmp(verdict, "similar") ? verdict : "");
    }
}
