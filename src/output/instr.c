/* output/instr.c - the A/B and measure documents, tables and pages (see instr.h).
 *
 * An A/B document holds every round's value of every arm (so the numbers can be checked by
 * hand), then per arm and metric the median and spread, and per arm other than the base the
 * paired differences: round r's value of the arm against round r's value of the base, in
 * percent, bootstrapped (stats/ab.h). The null test is the base arm run a second time in each
 * round; its own differences against the base give the band a real difference must clear.
 */
#include "output/instr.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "output/doc.h"
#include "output/fmt.h"
#include "output/html_assets.h"
#include "output/page.h"
#include "stats/ab.h"

#define D 48

static const struct {
    const char *key, *label, *unit, *path;
    int better; /* +1: higher is better */
} metrics[SQ_AB_NMETRICS] = {
    {"rps", "req/s", "per_s", "rate.requests_per_s", +1},
    {"p50_us", "p50", "us", "latency.p50_us", -1},
    {"p99_us", "p99", "us", "latency.p99_us", -1},
    {"client_cpu_us", "client CPU per request", "us", "client.cpu_per_request_us", -1},
    {"server_cpu_us", "server CPU per request", "us", "server.cpu_us_per_request", -1},
};

const char *sq_ab_metric_key(enum sq_ab_metric m)
{
    return (unsigned)m < SQ_AB_NMETRICS ? metrics[m].key : NULL;
}

int sq_ab_metric_parse(const char *s)
{
    static const char *const names[SQ_AB_NMETRICS] = {"rps", "p50", "p99", "cpu", "server-cpu"};
    for (int i = 0; i < SQ_AB_NMETRICS; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

void sq_ab_run_values(const json_t *result, double v[SQ_AB_NMETRICS])
{
    for (int m = 0; m < SQ_AB_NMETRICS; m++) {
        v[m] = NAN;
        double x;
        if (sq_report__num(result, metrics[m].path, &x) && isfinite(x))
            v[m] = x;
    }
    /* A latency of a run in which nothing completed is no figure. */
    if (sq_report__numd(result, "requests.completed", 0) <= 0)
        v[SQ_AB_P50] = v[SQ_AB_P99] = NAN;
}

/* ---- the sentence ---- */

static const char *us_text(double us, char *buf, size_t size)
{
    double a = fabs(us);
    const char *sign = us < 0 ? "-" : "+";
    if (a < 10)
        snprintf(buf, size, "%s%.2fµs", sign, a);
    else if (a < 1000)
        snprintf(buf, size, "%s%.1fµs", sign, a);
    else if (a < 1e6)
        snprintf(buf, size, "%s%.2fms", sign, a / 1e3);
    else
        snprintf(buf, size, "%s%.2fs", sign, a / 1e6);
    return buf;
}

/* "−4.1" with a minus sign that reads as one. */
static const char *pct(double v, char *buf, size_t size)
{
    snprintf(buf, size, "%s%.1f", v < 0 ? "−" : "+", fabs(v));
    return buf;
}

const char *sq_ab_sentence(char *buf, size_t len, const struct sq_ab_said *s)
{
    unsigned m = (unsigned)s->metric < SQ_AB_NMETRICS ? (unsigned)s->metric : 0;
    const char *label = metrics[m].label;
    double level = 100 * s->level;
    char a[D], b[D], md[D], band[D];
    snprintf(band, sizeof(band), "±%.1f%%", s->band);
    if (s->verdict == SQ_AB_NO_DATA) {
        snprintf(buf, len, "no data: %s has no %s figure to compare in these rounds", s->arm,
                 label);
        return buf;
    }
    if (s->verdict == SQ_AB_INCLUDES_ZERO) {
        int n = snprintf(buf, len,
                         "not resolvable: %s's %s moved %s%% (%.0f%% CI %s to %s%%), an "
                         "interval that includes 0",
                         s->arm, label, pct(s->median, md, sizeof(md)), level,
                         pct(s->lo, a, sizeof(a)), pct(s->hi, b, sizeof(b)));
        if (s->null_test && n > 0 && (size_t)n < len)
            snprintf(buf + n, len - (size_t)n, "; the null test moves %s", band);
        return buf;
    }
    if (s->verdict == SQ_AB_WITHIN_NOISE) {
        snprintf(buf, len,
                 "not resolvable here: the null test moves %s (%s's %s %s%%, %.0f%% CI %s "
                 "to %s%%)",
                 band, s->arm, label, pct(s->median, md, sizeof(md)), level,
                 pct(s->lo, a, sizeof(a)), pct(s->hi, b, sizeof(b)));
        return buf;
    }
    /* Resolved: say it in the direction it went, the interval turned the same way. */
    bool up = s->median > 0;
    bool good = up == (metrics[m].better > 0);
    double lo = up ? s->lo : -s->hi, hi = up ? s->hi : -s->lo;
    char what[160], absd[D + 4] = "";
    if (isfinite(s->abs_median) && strcmp(metrics[m].unit, "us") == 0) {
        char t[D];
        snprintf(absd, sizeof(absd), " (%s%s)", us_text(s->abs_median, t, sizeof(t)),
                 m == SQ_AB_P50 || m == SQ_AB_P99 ? " per request" : "");
    }
    if (m == SQ_AB_RPS)
        snprintf(what, sizeof(what), "%s is %.1f%% %s", s->arm, fabs(s->median),
                 good ? "faster" : "slower");
    else if (m == SQ_AB_P50 || m == SQ_AB_P99)
        snprintf(what, sizeof(what), "%s is %.1f%% %s at %s%s", s->arm, fabs(s->median),
                 good ? "faster" : "slower", label, absd);
    else
        snprintf(what, sizeof(what), "%s uses %.1f%% %s %s%s", s->arm, fabs(s->median),
                 good ? "less" : "more", label, absd);
    if (s->null_test)
        snprintf(buf, len, "%s (%.0f%% CI %.1f–%.1f%%), beyond the null test's %s", what, level, lo,
                 hi, band);
    else
        snprintf(buf, len, "%s (%.0f%% CI %.1f–%.1f%%; no null test was run)", what, level, lo, hi);
    return buf;
}

/* ---- the A/B document ---- */

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *words(const char *const *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; v && i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *summary(const double *v, size_t n)
{
    struct sq_ab_summary s;
    if (sq_ab_summarize(v, n, &s) < 0 || s.n == 0)
        return json_null();
    double spread = s.median != 0 ? 100 * (s.p75 - s.p25) / 2 / fabs(s.median) : NAN;
    return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "n", (json_int_t)s.n, "median",
                     num_or_null(s.median), "p25", num_or_null(s.p25), "p75", num_or_null(s.p75),
                     "min", num_or_null(s.min), "max", num_or_null(s.max), "spread_pct",
                     num_or_null(spread));
}

/* Per round, metric m of arm a (a strided view of values into out). */
static void column(const struct sq_ab_in *in, uint32_t a, int m, double *out)
{
    for (uint32_t r = 0; r < in->rounds; r++)
        out[r] =
            in->arms[a].exit[r] == 0 ? in->arms[a].values[(size_t)r * SQ_AB_NMETRICS + m] : NAN;
}

struct diff {
    struct sq_ab_interval rel, abs;
    int rc;
};

/* Arm a against the base on metric m: the relative and absolute paired differences. */
static void paired(const struct sq_ab_in *in, uint32_t a, int m, double *x, double *base, double *d,
                   struct diff *out)
{
    column(in, a, m, x);
    column(in, 0, m, base);
    uint64_t seed = in->seed ^ ((uint64_t)a * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)(m + 1);
    sq_ab_rel_deltas(x, base, in->rounds, d);
    out->rc = sq_ab_bootstrap_median(d, in->rounds, in->iters, in->level, seed, &out->rel);
    for (uint32_t r = 0; r < in->rounds; r++)
        d[r] = isfinite(x[r]) && isfinite(base[r]) ? x[r] - base[r] : NAN;
    if (sq_ab_bootstrap_median(d, in->rounds, in->iters, in->level, seed + 1, &out->abs) < 0)
        out->abs = (struct sq_ab_interval){0, NAN, NAN, NAN};
    if (out->rc < 0)
        out->rel = (struct sq_ab_interval){0, NAN, NAN, NAN};
}

static const char *verdict_name(int v)
{
    switch (v) {
    case SQ_AB_RESOLVED:
        return "resolved";
    case SQ_AB_INCLUDES_ZERO:
        return "includes_zero";
    case SQ_AB_WITHIN_NOISE:
        return "within_noise";
    default:
        return "no_data";
    }
}

static json_t *environment(void)
{
    struct utsname u;
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    bool un = uname(&u) == 0;
    return json_pack("{s:s, s:s, s:s, s:I}", "host", host, "os", un ? u.sysname : "", "kernel",
                     un ? u.release : "", "cpus", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN));
}

/* The metrics' definitions: key, label, unit, which way is better. */
static json_t *metric_defs(void)
{
    json_t *mdefs = json_array();
    for (int m = 0; m < SQ_AB_NMETRICS; m++)
        json_array_append_new(mdefs,
                              json_pack("{s:s, s:s, s:s, s:s}", "key", metrics[m].key, "label",
                                        metrics[m].label, "unit", metrics[m].unit, "better",
                                        metrics[m].better > 0 ? "higher" : "lower"));
    return mdefs;
}

/* Per round, the arms' names in the order they ran. */
static json_t *order_json(const struct sq_ab_in *in)
{
    json_t *order = json_array();
    for (uint32_t r = 0; r < in->rounds; r++) {
        json_t *row = json_array();
        for (uint32_t k = 0; k < in->narms; k++)
            json_array_append_new(row, json_string(in->arms[in->order[r * in->narms + k]].name));
        json_array_append_new(order, row);
    }
    return order;
}

/* Per arm: its command, exits, every round's values and their summary (x: scratch, a round
 * each). */
static json_t *arms_json(const struct sq_ab_in *in, double *x)
{
    json_t *arms = json_array();
    for (uint32_t a = 0; a < in->narms; a++) {
        const struct sq_ab_arm_in *arm = &in->arms[a];
        json_t *vals = json_object(), *sums = json_object(), *exits = json_array();
        for (int m = 0; m < SQ_AB_NMETRICS; m++) {
            column(in, a, m, x);
            json_t *col = json_array();
            for (uint32_t r = 0; r < in->rounds; r++)
                json_array_append_new(col, num_or_null(x[r]));
            json_object_set_new(vals, metrics[m].key, col);
            json_object_set_new(sums, metrics[m].key, summary(x, in->rounds));
        }
        for (uint32_t r = 0; r < in->rounds; r++)
            json_array_append_new(exits, json_integer(arm->exit[r]));
        json_array_append_new(
            arms,
            json_pack("{s:s, s:o, s:o, s:b, s:o, s:o, s:o}", "name", arm->name, "args",
                      words(arm->args, arm->nargs), "server",
                      arm->server ? words(arm->server, arm->nserver) : json_null(), "null_test",
                      arm->null_test, "exit", exits, "values", vals, "summary", sums));
    }
    return arms;
}

/* Scratch space for the paired differences: a round each. */
struct scratch {
    double *x, *base, *d;
};

/* The null test (arm nnull) against the base arm, per metric: its differences into nd, its band
 * into the document. */
static json_t *null_json(const struct sq_ab_in *in, uint32_t nnull, struct scratch *s,
                         struct diff nd[SQ_AB_NMETRICS])
{
    json_t *null = json_object();
    for (int m = 0; m < SQ_AB_NMETRICS; m++) {
        paired(in, nnull, m, s->x, s->base, s->d, &nd[m]);
        const struct sq_ab_interval *iv = &nd[m].rel;
        json_object_set_new(null, metrics[m].key,
                            iv->n ? json_pack("{s:I, s:o, s:o, s:o, s:f}", "n", (json_int_t)iv->n,
                                              "median_pct", num_or_null(iv->median), "ci_lo_pct",
                                              num_or_null(iv->lo), "ci_hi_pct", num_or_null(iv->hi),
                                              "band_pct", sq_ab_null_band(iv))
                                  : json_null());
    }
    return null;
}

/* Every arm but the base and the null test against the base, per metric: its comparison (and
 * its sentence) into cmps, the primary metric's sentence into verdicts. nd: the null test's
 * differences (NULL: no null test). */
static void comparisons(const struct sq_ab_in *in, const struct diff *nd, struct scratch *s,
                        json_t *cmps, json_t *verdicts)
{
    for (uint32_t a = 1; a < in->narms; a++) {
        if (in->arms[a].null_test)
            continue;
        for (int m = 0; m < SQ_AB_NMETRICS; m++) {
            struct diff df;
            paired(in, a, m, s->x, s->base, s->d, &df);
            double band = nd ? sq_ab_null_band(&nd[m].rel) : 0;
            int v = sq_ab_judge(&df.rel, band);
            struct sq_ab_said said = {in->arms[a].name,
                                      (enum sq_ab_metric)m,
                                      v,
                                      df.rel.median,
                                      df.rel.lo,
                                      df.rel.hi,
                                      in->level,
                                      band,
                                      nd != NULL,
                                      df.abs.median};
            char text[512];
            sq_ab_sentence(text, sizeof(text), &said);
            json_array_append_new(
                cmps, json_pack("{s:s, s:s, s:s, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:s}",
                                "arm", in->arms[a].name, "against", in->arms[0].name, "metric",
                                metrics[m].key, "n", (json_int_t)df.rel.n, "median_pct",
                                num_or_null(df.rel.median), "ci_lo_pct", num_or_null(df.rel.lo),
                                "ci_hi_pct", num_or_null(df.rel.hi), "median_abs",
                                num_or_null(df.abs.median), "ci_lo_abs", num_or_null(df.abs.lo),
                                "ci_hi_abs", num_or_null(df.abs.hi), "null_band_pct",
                                nd ? json_real(band) : json_null(), "verdict", verdict_name(v),
                                "sentence", text));
            if (m == (int)in->primary)
                json_array_append_new(verdicts, json_string(text));
        }
    }
}

json_t *sq_ab_doc(const struct sq_ab_in *in)
{
    size_t R = in->rounds ? in->rounds : 1;
    struct scratch s = {malloc(R * sizeof(double)), malloc(R * sizeof(double)),
                        malloc(R * sizeof(double))};
    json_t *doc = NULL;
    if (!s.x || !s.base || !s.d)
        goto out;
    bool has_null = in->narms > 1 && in->arms[in->narms - 1].null_test;
    json_t *mdefs = metric_defs(), *order = order_json(in), *arms = arms_json(in, s.x);
    /* The null test's differences first: every comparison needs its band. */
    struct diff null_diff[SQ_AB_NMETRICS];
    json_t *null = has_null ? null_json(in, in->narms - 1, &s, null_diff) : json_null();
    json_t *cmps = json_array(), *verdicts = json_array();
    comparisons(in, has_null ? null_diff : NULL, &s, cmps, verdicts);
    doc = json_pack(
        "{s:s, s:s, s:I, s:f, s:f, s:b, s:f, s:I, s:I, s:s, s:o, s:o, s:o, s:o, s:o, "
        "s:o, s:o}",
        "schema", SQ_AB_SCHEMA, "squall_version", SQ_VERSION, "rounds", (json_int_t)in->rounds,
        "duration_s", (double)in->duration_ns / 1e9, "cooldown_s", (double)in->cooldown_ns / 1e9,
        "null_test", has_null, "level", in->level, "bootstrap_resamples", (json_int_t)in->iters,
        "seed", (json_int_t)(in->seed & 0x7fffffffffffffffULL), "primary", metrics[in->primary].key,
        "metrics", mdefs, "order", order, "arms", arms, "null", null, "comparisons", cmps,
        "verdicts", verdicts, "environment", environment());
out:
    free(s.x);
    free(s.base);
    free(s.d);
    return doc;
}

/* ---- the A/B table ---- */

static const char *value_text(const char *unit, double v, char *buf, size_t size)
{
    if (strcmp(unit, "us") == 0) {
        char t[D];
        const char *s = us_text(v, t, sizeof(t));
        snprintf(buf, size, "%s", s + 1); /* no sign */
    } else {
        char g[D];
        snprintf(buf, size, "%s/s", sq_fmt_group((uint64_t)llround(v < 0 ? 0 : v), g, sizeof(g)));
    }
    return buf;
}

static const json_t *metric_def(const json_t *doc, const char *key)
{
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(doc, "metrics"), i, m)
    {
        if (strcmp(sq_report__str(m, "key", ""), key) == 0)
            return m;
    }
    return NULL;
}

/* True when some arm has a value of metric key. */
static bool metric_seen(const json_t *doc, const char *key)
{
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(doc, "arms"), i, a)
    {
        if (sq_report__get(json_object_get(a, "summary"), key) &&
            !json_is_null(sq_report__get(json_object_get(a, "summary"), key)))
            return true;
    }
    return false;
}

/* An arm's summary of one metric (s; unit its unit) as a cell: "MEDIAN ±SPREAD%", the median
 * alone, or "—" without one. */
static void summary_cell(const json_t *s, const char *unit, char *cell, size_t size)
{
    char v[D];
    double med, sp;
    if (!sq_report__num(s, "median", &med)) {
        snprintf(cell, size, "—");
        return;
    }
    value_text(unit, med, v, sizeof(v));
    if (sq_report__num(s, "spread_pct", &sp))
        snprintf(cell, size, "%s ±%.1f%%", v, sp);
    else
        snprintf(cell, size, "%s", v);
}

/* The table's arms: a row each, a column per metric some arm has (keys). */
static void table_arms(const json_t *doc, const char *const *keys, size_t nk, FILE *f)
{
    sq_fmt_pad(f, "arm (median ±spread)", 22, false);
    for (size_t k = 0; k < nk; k++)
        sq_fmt_pad(f, sq_report__str(metric_def(doc, keys[k]), "label", keys[k]), 24, true);
    fputc('\n', f);
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(doc, "arms"), i, a)
    {
        char name[64];
        snprintf(name, sizeof(name), "%s%s", sq_report__str(a, "name", "?"),
                 json_is_true(json_object_get(a, "null_test")) ? " (null test)" : "");
        sq_fmt_pad(f, name, 22, false);
        for (size_t k = 0; k < nk; k++) {
            char cellb[D * 2];
            summary_cell(sq_report__get(json_object_get(a, "summary"), keys[k]),
                         sq_report__str(metric_def(doc, keys[k]), "unit", ""), cellb,
                         sizeof(cellb));
            sq_fmt_pad(f, cellb, 24, true);
        }
        fputc('\n', f);
    }
}

/* One comparison's row: the difference (and, for a duration, its size), the CI, the null
 * test's band, the verdict. */
static void table_comparison(const json_t *doc, const json_t *c, FILE *f)
{
    const json_t *def = metric_def(doc, sq_report__str(c, "metric", ""));
    char lab[96], diff[D * 2], ci[D * 3], band[D], p1[D], p2[D];
    snprintf(lab, sizeof(lab), "%s · %s", sq_report__str(c, "arm", "?"),
             sq_report__str(def, "label", "?"));
    sq_fmt_pad(f, lab, 30, false);
    double mabs;
    if (strcmp(sq_report__str(def, "unit", ""), "us") == 0 &&
        sq_report__num(c, "median_abs", &mabs)) {
        char t[D];
        snprintf(diff, sizeof(diff), "%s%% (%s)",
                 pct(sq_report__numd(c, "median_pct", 0), p1, sizeof(p1)),
                 us_text(mabs, t, sizeof(t)));
    } else {
        snprintf(diff, sizeof(diff), "%s%%",
                 pct(sq_report__numd(c, "median_pct", 0), p1, sizeof(p1)));
    }
    sq_fmt_pad(f, diff, 22, true);
    snprintf(ci, sizeof(ci), "%s to %s%%", pct(sq_report__numd(c, "ci_lo_pct", 0), p1, sizeof(p1)),
             pct(sq_report__numd(c, "ci_hi_pct", 0), p2, sizeof(p2)));
    sq_fmt_pad(f, ci, 22, true);
    double b;
    if (sq_report__num(c, "null_band_pct", &b))
        snprintf(band, sizeof(band), "±%.1f%%", b);
    else
        band[0] = '\0';
    sq_fmt_pad(f, band, 12, true);
    const char *v = sq_report__str(c, "verdict", "");
    fprintf(f, "  %s\n",
            strcmp(v, "resolved") == 0        ? "resolved"
            : strcmp(v, "includes_zero") == 0 ? "not resolvable (CI includes 0)"
            : strcmp(v, "within_noise") == 0  ? "not resolvable (within the null test)"
                                              : "no data");
}

int sq_ab_table(const json_t *doc, FILE *f)
{
    const json_t *arms = json_object_get(doc, "arms");
    size_t narms = json_array_size(arms), i;
    bool null = json_is_true(json_object_get(doc, "null_test"));
    fprintf(
        f,
        "squall ab · %zu arms%s · %.0f rounds × %gs, %gs cooldown · order rotated each round\n\n",
        null ? narms - 1 : narms, null ? " + the null test" : "", sq_report__numd(doc, "rounds", 0),
        sq_report__numd(doc, "duration_s", 0), sq_report__numd(doc, "cooldown_s", 0));
    const char *keys[SQ_AB_NMETRICS];
    size_t nk = 0;
    for (int m = 0; m < SQ_AB_NMETRICS; m++)
        if (metric_seen(doc, metrics[m].key))
            keys[nk++] = metrics[m].key;
    table_arms(doc, keys, nk, f);
    const json_t *cmps = json_object_get(doc, "comparisons");
    if (json_array_size(cmps)) {
        fprintf(f,
                "\nPaired per round against %s (median of the rounds' differences, %.0f%% "
                "bootstrap CI%s)\n",
                sq_report__str(json_array_get(arms, 0), "name", "A"),
                100 * sq_report__numd(doc, "level", 0.95),
                null ? "; the null test's band beside it" : "");
        sq_fmt_pad(f, "arm · metric", 30, false);
        sq_fmt_pad(f, "difference", 22, true);
        sq_fmt_pad(f, "CI", 22, true);
        sq_fmt_pad(f, null ? "null test" : "", 12, true);
        fputs("  verdict\n", f);
        const json_t *c;
        json_array_foreach((json_t *)cmps, i, c)
        {
            if (sq_report__get(c, "n") && sq_report__numd(c, "n", 0) != 0) /* else: no data */
                table_comparison(doc, c, f);
        }
    }
    const json_t *vs = json_object_get(doc, "verdicts");
    if (json_array_size(vs)) {
        fputc('\n', f);
        const json_t *v;
        json_array_foreach((json_t *)vs, i, v)
        {
            fprintf(f, "Verdict: %s\n", json_string_value(v) ? json_string_value(v) : "");
        }
    }
    return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}

/* ---- the A/B page ---- */

/* A command's words (a JSON array of strings), escaped, one space between. */
static void esc_words(FILE *f, const json_t *words)
{
    size_t i;
    const json_t *w;
    json_array_foreach(words, i, w)
    {
        if (i)
            fputc(' ', f);
        sq_page__esc(f, json_string_value(w) ? json_string_value(w) : "");
    }
}

/* The page's arms: a row each, with its command and a cell per metric. */
static void html_arms(const json_t *doc, FILE *f)
{
    fputs("</section>\n<section>\n<h2>Arms</h2>\n<table>\n<tr><th>arm</th><th>command</th>", f);
    size_t i;
    const json_t *m, *a;
    json_array_foreach(json_object_get(doc, "metrics"), i, m)
    {
        fputs("<th>", f);
        sq_page__esc(f, sq_report__str(m, "label", ""));
        fputs(" (median ±spread)</th>", f);
    }
    fputs("</tr>\n", f);
    json_array_foreach(json_object_get(doc, "arms"), i, a)
    {
        fputs("<tr><th>", f);
        sq_page__esc(f, sq_report__str(a, "name", "?"));
        if (json_is_true(json_object_get(a, "null_test")))
            fputs(" (null test)", f);
        fputs("</th><td><code>", f);
        esc_words(f, json_object_get(a, "args"));
        fputs("</code></td>", f);
        size_t k;
        json_array_foreach(json_object_get(doc, "metrics"), k, m)
        {
            char cellb[D * 2];
            summary_cell(
                sq_report__get(json_object_get(a, "summary"), sq_report__str(m, "key", "")),
                sq_report__str(m, "unit", ""), cellb, sizeof(cellb));
            fputs("<td class=\"n\">", f);
            sq_page__esc(f, cellb);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
}

/* The page's paired differences: a row per comparison, and how they were made. */
static void html_comparisons(const json_t *doc, FILE *f)
{
    fputs("</table>\n</section>\n<section>\n<h2>Paired differences</h2>\n<table>\n<tr><th>arm"
          "</th><th>metric</th><th>median difference</th><th>CI</th><th>null test</th>"
          "<th>verdict</th></tr>\n",
          f);
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(doc, "comparisons"), i, c)
    {
        char p1[D], p2[D], band[D] = "";
        double b;
        if (sq_report__num(c, "null_band_pct", &b))
            snprintf(band, sizeof(band), "±%.1f%%", b);
        const char *verdict = sq_report__str(c, "verdict", "");
        fputs("<tr><th>", f);
        sq_page__esc(f, sq_report__str(c, "arm", "?"));
        fputs("</th><td>", f);
        sq_page__esc(f,
                     sq_report__str(metric_def(doc, sq_report__str(c, "metric", "")), "label", ""));
        fputs("</td><td class=\"n\">", f);
        sq_page__escf(f, "%s%%", pct(sq_report__numd(c, "median_pct", 0), p1, sizeof(p1)));
        fputs("</td><td class=\"n\">", f);
        sq_page__escf(f, "%s to %s%%", pct(sq_report__numd(c, "ci_lo_pct", 0), p1, sizeof(p1)),
                      pct(sq_report__numd(c, "ci_hi_pct", 0), p2, sizeof(p2)));
        fputs("</td><td class=\"n\">", f);
        sq_page__esc(f, band);
        fprintf(f, "</td><td class=\"t%s\">", strcmp(verdict, "resolved") == 0 ? " good" : "");
        sq_page__esc(f, sq_report__str(c, "sentence", ""));
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n<p class=\"meta\">Each round runs every arm once, in an order rotated from "
          "round to round (ABBA for two, a Williams Latin square for more) so drift lands on every "
          "arm. A difference is round r&#39;s value of the arm against round r&#39;s value of the "
          "base arm; its interval is a percentile bootstrap of the median difference. The null "
          "test runs the base arm twice in each round: how far it moves is the harness&#39;s own "
          "noise, and a difference counts only beyond it.</p>\n</section>\n",
          f);
}

int sq_ab_html(const json_t *doc, FILE *f)
{
    sq_page__head(f, "squall ab");
    fputs("<header>\n<h1><span class=\"brand\">squall</span><span class=\"target\">ab</span></h1>"
          "\n<p class=\"meta\">",
          f);
    bool null = json_is_true(json_object_get(doc, "null_test"));
    const json_t *arms = json_object_get(doc, "arms");
    sq_page__escf(f, "%zu arms%s · %.0f rounds × %g s, %g s cooldown · order rotated each round",
                  null ? json_array_size(arms) - 1 : json_array_size(arms),
                  null ? " + the null test" : "", sq_report__numd(doc, "rounds", 0),
                  sq_report__numd(doc, "duration_s", 0), sq_report__numd(doc, "cooldown_s", 0));
    fputs("</p>\n</header>\n<main>\n<section>\n<h2>Verdict</h2>\n", f);
    size_t i;
    const json_t *v, *m;
    json_array_foreach(json_object_get(doc, "verdicts"), i, v)
    {
        fputs("<p>", f);
        sq_page__esc(f, json_string_value(v) ? json_string_value(v) : "");
        fputs("</p>\n", f);
    }
    html_arms(doc, f);
    html_comparisons(doc, f);
    json_array_foreach(json_object_get(doc, "metrics"), i, m)
    {
        if (!metric_seen(doc, sq_report__str(m, "key", "")))
            continue;
        fputs("<section>\n<h2>", f);
        sq_page__esc(f, sq_report__str(m, "label", ""));
        fprintf(f, " per round</h2>\n<div class=\"chart\" id=\"chart-ab-%zu\"></div>\n</section>\n",
                i);
    }
    fputs("</main>\n<footer>Written by squall " SQ_VERSION ". The A/B document (schema "
          "squall.ab/1) is embedded (script#squall-data).</footer>\n",
          f);
    json_t *island = json_pack("{s:s, s:O}", "kind", "ab", "ab", (json_t *)doc);
    if (!island)
        return -ENOMEM;
    int rc = sq_page__tail(f, island, sq_instr_js, sq_instr_js_len);
    json_decref(island);
    return rc;
}

/* ---- squall measure ---- */

static json_t *phase(const struct sq_measure_phase *p)
{
    if (!p->on)
        return json_null();
    double secs = (double)p->duration_ns / 1e9;
    double cpu = (double)(p->cpu_user_ns + p->cpu_sys_ns) / 1e9;
    return json_pack("{s:f, s:f, s:f, s:o, s:I, s:I, s:I, s:I, s:I, s:o}", "duration_s", secs,
                     "cpu_user_s", (double)p->cpu_user_ns / 1e9, "cpu_sys_s",
                     (double)p->cpu_sys_ns / 1e9, "cpu_pct",
                     secs > 0 ? json_real(100 * cpu / secs) : json_null(), "rss_start_bytes",
                     (json_int_t)p->rss_start, "rss_end_bytes", (json_int_t)p->rss_end,
                     "rss_peak_bytes", (json_int_t)p->rss_peak, "threads_max",
                     (json_int_t)p->threads_max, "processes_max", (json_int_t)p->procs_max,
                     "fds_max", p->fds_max >= 0 ? json_integer(p->fds_max) : json_null());
}

json_t *sq_measure_doc(const struct sq_measure_in *in)
{
    json_t *cold = json_array();
    for (size_t i = 0; i < in->ncold; i++)
        json_array_append_new(cold, num_or_null(in->cold_ms[i]));
    struct sq_ab_summary s;
    json_t *cs = json_null();
    if (sq_ab_summarize(in->cold_ms, in->ncold, &s) == 0 && s.n) {
        json_decref(cs);
        cs = json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "n", (json_int_t)s.n, "median_ms",
                       s.median, "p25_ms", s.p25, "p75_ms", s.p75, "min_ms", s.min, "max_ms", s.max,
                       "spread_ms", (s.p75 - s.p25) / 2);
    }
    json_t *load = phase(&in->load);
    if (json_is_object(load)) {
        json_object_set_new(load, "args", words(in->load_args, in->nload_args));
        json_object_set_new(load, "exit", json_integer(in->load_exit));
        const json_t *r = in->load_result;
        double v;
        json_object_set_new(load, "requests_per_s",
                            sq_report__num(r, "rate.requests_per_s", &v) ? json_real(v)
                                                                         : json_null());
        json_object_set_new(load, "completed",
                            sq_report__num(r, "requests.completed", &v)
                                ? json_integer((json_int_t)v)
                                : json_null());
        json_object_set_new(load, "p50_us",
                            sq_report__num(r, "latency.p50_us", &v) ? json_real(v) : json_null());
        json_object_set_new(load, "p99_us",
                            sq_report__num(r, "latency.p99_us", &v) ? json_real(v) : json_null());
        /* The server's CPU per 1k requests: the load run's own figure when it watched the
         * server (its window is the run itself), else this phase's CPU over its completions. */
        double done = sq_report__numd(r, "requests.completed", 0);
        double per1k;
        if (!sq_report__num(r, "server.cpu_ms_per_1k_requests", &per1k))
            per1k = done > 0
                        ? (double)(in->load.cpu_user_ns + in->load.cpu_sys_ns) / 1e6 / done * 1000
                        : NAN;
        json_object_set_new(load, "cpu_ms_per_1k_requests", num_or_null(per1k));
        json_object_set_new(load, "result", r ? json_deep_copy(r) : json_null());
    }
    json_t *after = phase(&in->after);
    if (json_is_object(after) && in->idle.on) {
        /* Does memory return? The RSS after the load against the idle RSS before it. */
        double base = (double)in->idle.rss_end, end = (double)in->after.rss_end;
        double peak = in->load.on ? (double)in->load.rss_peak : base;
        json_object_set_new(after, "rss_above_idle_bytes", json_real(end - base));
        json_object_set_new(after, "rss_returned_pct",
                            peak > base ? json_real(100 * (peak - end) / (peak - base))
                                        : json_null());
    }
    json_t *samples = json_array();
    for (size_t i = 0; i < in->nsamples; i++) {
        const struct sq_measure_sample *p = &in->samples[i];
        json_array_append_new(samples,
                              json_pack("{s:f, s:s, s:o, s:I, s:I, s:o}", "t_s", p->t_s, "phase",
                                        p->phase, "cpu_pct", num_or_null(p->cpu_pct), "rss_bytes",
                                        (json_int_t)p->rss_bytes, "threads", (json_int_t)p->threads,
                                        "fds", p->fds >= 0 ? json_integer(p->fds) : json_null()));
    }
    return json_pack("{s:s, s:s, s:o, s:s, s:{s:s, s:o}, s:{s:o, s:o}, s:o, s:o, s:o, s:o, s:o}",
                     "schema", SQ_MEASURE_SCHEMA, "squall_version", SQ_VERSION, "command",
                     words(in->command, in->ncommand), "ready_url",
                     in->ready_url ? in->ready_url : "", "binary", "path",
                     in->binary_path ? in->binary_path : "", "bytes",
                     in->binary_bytes >= 0 ? json_integer(in->binary_bytes) : json_null(),
                     "cold_start", "runs_ms", cold, "summary", cs, "idle", phase(&in->idle), "load",
                     load, "after", after, "samples", samples, "environment", environment());
}

static void phase_line(FILE *f, const char *name, const json_t *p)
{
    if (!json_is_object(p))
        return;
    char fd[D];
    double v;
    if (sq_report__num(p, "fds_max", &v))
        snprintf(fd, sizeof(fd), " · %.0f open files", v);
    else
        fd[0] = '\0';
    fprintf(f,
            "%-12s CPU %.2f%% of a core · RSS %.1f MB (peak %.1f MB) · %.0f threads%s · %.0f s\n",
            name, sq_report__numd(p, "cpu_pct", 0), sq_report__numd(p, "rss_end_bytes", 0) / 1e6,
            sq_report__numd(p, "rss_peak_bytes", 0) / 1e6, sq_report__numd(p, "threads_max", 0), fd,
            sq_report__numd(p, "duration_s", 0));
}

int sq_measure_table(const json_t *doc, FILE *f)
{
    fprintf(f, "squall measure ·");
    size_t i;
    const json_t *w;
    json_array_foreach(json_object_get(doc, "command"), i, w)
    {
        fprintf(f, " %s", json_string_value(w) ? json_string_value(w) : "");
    }
    fprintf(f, "\n\n");
    double v;
    if (sq_report__num(doc, "binary.bytes", &v))
        fprintf(f, "%-12s %s: %.1f MB\n", "Binary", sq_report__str(doc, "binary.path", "?"),
                v / 1e6);
    const json_t *cs = sq_report__get(doc, "cold_start.summary");
    if (json_is_object(cs)) {
        fprintf(f,
                "%-12s median %.1f ms ±%.1f ms (min %.1f, max %.1f; %.0f runs) to the first 2xx "
                "of %s\n",
                "Cold start", sq_report__numd(cs, "median_ms", 0),
                sq_report__numd(cs, "spread_ms", 0), sq_report__numd(cs, "min_ms", 0),
                sq_report__numd(cs, "max_ms", 0), sq_report__numd(cs, "n", 0),
                sq_report__str(doc, "ready_url", "?"));
    }
    phase_line(f, "Idle", json_object_get(doc, "idle"));
    const json_t *load = json_object_get(doc, "load");
    phase_line(f, "Under load", load);
    if (json_is_object(load)) {
        char d0[D], d1[D];
        fprintf(f, "%-12s %.1f req/s · p50 %s · p99 %s", "",
                sq_report__numd(load, "requests_per_s", 0),
                sq_fmt_dur_us(sq_report__numd(load, "p50_us", 0), d0, sizeof(d0)),
                sq_fmt_dur_us(sq_report__numd(load, "p99_us", 0), d1, sizeof(d1)));
        if (sq_report__num(load, "cpu_ms_per_1k_requests", &v))
            fprintf(f, " · server %.1f ms CPU per 1k requests", v);
        fputc('\n', f);
    }
    const json_t *after = json_object_get(doc, "after");
    phase_line(f, "After", after);
    if (json_is_object(after) && sq_report__num(after, "rss_above_idle_bytes", &v)) {
        double ret;
        fprintf(f, "%-12s RSS %+.1f MB against idle", "", v / 1e6);
        if (sq_report__num(after, "rss_returned_pct", &ret))
            fprintf(f, " · %.0f%% of what the load added was given back", ret);
        fputc('\n', f);
    }
    return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}

int sq_measure_html(const json_t *doc, FILE *f)
{
    sq_page__head(f, "squall measure");
    fputs("<header>\n<h1><span class=\"brand\">squall</span><span class=\"target\">measure ", f);
    esc_words(f, json_object_get(doc, "command"));
    fputs("</span></h1>\n</header>\n<main>\n<section>\n<h2>Figures</h2>\n<pre>", f);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return -ENOMEM;
    int rc = sq_measure_table(doc, mem);
    fclose(mem);
    if (rc == 0 && text)
        sq_page__esc(f, text);
    free(text);
    fputs("</pre>\n</section>\n<section>\n<h2>CPU and memory through the phases</h2>\n"
          "<div class=\"chart\" id=\"chart-measure\"></div>\n<p class=\"meta\">One sample a "
          "second of the server and its children: idle, under load, after.</p>\n</section>\n"
          "</main>\n<footer>Written by squall " SQ_VERSION ". The measure document (schema "
          "squall.measure/1) is embedded (script#squall-data).</footer>\n",
          f);
    json_t *island = json_pack("{s:s, s:O}", "kind", "measure", "measure", (json_t *)doc);
    if (!island)
        return -ENOMEM;
    rc = sq_page__tail(f, island, sq_instr_js, sq_instr_js_len);
    json_decref(island);
    return rc;
}
