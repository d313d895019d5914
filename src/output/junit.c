/* output/junit.c - the JUnit XML report (see junit.h).
 *
 * One rule, as in html.c: the markup is written with fputs/fprintf whose arguments are literals
 * and numbers only, and every string from the document (a metric, an expression, a scenario, a
 * step or a check name: all from the user's plan, so possibly hostile) goes through
 * sq_report_xml_esc() once. The document may be a saved file (`squall report`), so every key may
 * be missing or of the wrong type: what is not there is left out, never guessed.
 *
 * The shape is the one CI tools agree on (Ant's, as Surefire and pytest write it):
 *   testsuites(name, tests, failures, errors, skipped, time)
 *     testsuite(name, tests, failures, errors, skipped, time, timestamp?)
 *       properties? testcase* system-out?
 *         testcase(classname, name, time): failure(message, type) | skipped(message), system-out
 * tests/junit/junit.xsd describes exactly this, and the e2e test validates against it.
 */
#include "output/junit.h"

#include <errno.h>
#include <string.h>

#include "base/text.h"
#include "output/doc.h"
#include "plan/metrics.h"

void sq_report_xml_esc(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    while (n) {
        uint32_t cp;
        size_t k = sq_utf8_decode(p, n, &cp);
        if (k == 0) { /* ill-formed: this byte alone is replaced, the next one tried afresh */
            fputs("\xEF\xBF\xBD", f);
            p++;
            n--;
            continue;
        }
        switch (cp) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        case '\t':
        case '\n':
        case '\r':
            fprintf(f, "&#%u;", (unsigned)cp);
            break;
        default:
            /* XML 1.0 §2.2 Char: no C0 control but the three above, no U+FFFE/U+FFFF (even as a
             * reference); DEL and C1 are allowed, but a terminal showing the file would act on
             * them, so they go too */
            if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0xfffe || cp == 0xffff)
                fputs("\xEF\xBF\xBD", f);
            else
                fwrite(p, 1, k, f);
        }
        p += k;
        n -= k;
    }
}

/* A string member of an object, or dflt (missing, or not a string). */
static const char *str_of(const json_t *o, const char *key, const char *dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

static double num_of(const json_t *o, const char *key, double dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* The array at key, or NULL. */
static const json_t *array_at(const json_t *doc, const char *key)
{
    const json_t *a = json_object_get(doc, key);
    return json_is_array(a) ? a : NULL;
}

/* ---- thresholds ---- */

/* The unit of a threshold's value, from its metric's kind (plan/metrics.h: trends in ms, a
 * counter's rate per second) and the aggregation: "" when none. */
static const char *th_unit(const char *metric, const char *agg)
{
    size_t len = strcspn(metric, "{");
    while (len && metric[len - 1] == ' ')
        len--;
    int m = sq_metric_find(metric, len);
    if (m < 0)
        return "";
    switch (sq_metric_kind((enum sq_metric)m)) {
    case SQ_MK_TREND:
        return "ms";
    case SQ_MK_COUNTER:
        return strcmp(agg, "rate") == 0 ? "/s" : "";
    case SQ_MK_RATE:
    case SQ_MK_GAUGE:
        break;
    }
    return "";
}

/* "p(95)=412.3ms, bound < 300": the figure against the bound, from the expression as written
 * (its aggregation before the operator, the bound from the operator on). Written escaped. */
static void th_figure(FILE *f, const json_t *t)
{
    const char *metric = str_of(t, "metric", "");
    const char *expr = str_of(t, "expression", "");
    double value = num_of(t, "value", 0);
    size_t at = strcspn(expr, "<>=!");
    size_t agg_len = at;
    while (agg_len && expr[agg_len - 1] == ' ')
        agg_len--;
    char agg[64];
    if (!expr[at] || agg_len == 0 || agg_len >= sizeof(agg)) {
        /* not an expression this reader knows how to split: the value beside it, whole */
        char v[64];
        snprintf(v, sizeof(v), "value %.6g%s, bound ", value, th_unit(metric, ""));
        sq_report_xml_esc(f, v);
        sq_report_xml_esc(f, expr);
        return;
    }
    memcpy(agg, expr, agg_len);
    agg[agg_len] = '\0';
    sq_report_xml_esc(f, agg);
    char v[64];
    snprintf(v, sizeof(v), "=%.6g%s, bound ", value, th_unit(metric, agg));
    sq_report_xml_esc(f, v);
    sq_report_xml_esc(f, expr + at);
    if (json_is_true(json_object_get(t, "no_data")))
        sq_report_xml_esc(f, " (no data: the metric had no sample)");
}

static void th_case(FILE *f, const json_t *t)
{
    fputs("    <testcase classname=\"squall.thresholds\" name=\"", f);
    sq_report_xml_esc(f, str_of(t, "metric", "?"));
    fputs(": ", f);
    sq_report_xml_esc(f, str_of(t, "expression", "?"));
    fputs("\" time=\"0\">\n", f);
    if (!json_is_true(json_object_get(t, "ok"))) {
        fputs("      <failure type=\"threshold\" message=\"", f);
        th_figure(f, t);
        fputs("\">", f);
        sq_report_xml_esc(f, str_of(t, "metric", "?"));
        fputs(": ", f);
        sq_report_xml_esc(f, str_of(t, "expression", "?"));
        fputs(" did not hold", f);
        if (json_is_true(json_object_get(t, "abort_on_fail")))
            fputs(" (abortOnFail: the run was stopped)", f);
        fputs("</failure>\n", f);
    }
    fputs("      <system-out>", f);
    th_figure(f, t);
    fputs("</system-out>\n    </testcase>\n", f);
}

/* ---- checks ---- */

static void check_case(FILE *f, const json_t *c)
{
    uint64_t passed = sq_report__count(num_of(c, "passed", 0));
    uint64_t failed = sq_report__count(num_of(c, "failed", 0));
    fputs("    <testcase classname=\"squall.checks.", f);
    sq_report_xml_esc(f, str_of(c, "scenario", "?"));
    fputs("\" name=\"", f);
    sq_report_xml_esc(f, str_of(c, "step", "?"));
    fputs(": ", f);
    sq_report_xml_esc(f, str_of(c, "check", "?"));
    fputs("\" time=\"0\">\n", f);
    if (failed)
        fprintf(f,
                "      <failure type=\"check\" message=\"%llu of %llu failed\">passed %llu, "
                "failed %llu</failure>\n",
                (unsigned long long)failed, (unsigned long long)(passed + failed),
                (unsigned long long)passed, (unsigned long long)failed);
    else if (!passed)
        fputs("      <skipped message=\"never evaluated (the step got no response)\"/>\n", f);
    fprintf(f, "      <system-out>passed %llu, failed %llu</system-out>\n    </testcase>\n",
            (unsigned long long)passed, (unsigned long long)failed);
}

/* ---- suites ---- */

struct tally {
    size_t tests, failures, skipped;
};

static struct tally count(const json_t *a, bool checks)
{
    struct tally t = {0};
    size_t i;
    const json_t *e;
    json_array_foreach(a, i, e)
    {
        if (!json_is_object(e))
            continue;
        t.tests++;
        if (!checks) {
            t.failures += !json_is_true(json_object_get(e, "ok"));
        } else if (num_of(e, "failed", 0) > 0) {
            t.failures++;
        } else if (!(num_of(e, "passed", 0) > 0)) {
            t.skipped++;
        }
    }
    return t;
}

/* What a run's consumer may want beside the verdicts: its name, start, seed and, when it was
 * stopped early, why (the figures then cover part of it). */
static void properties(FILE *f, const json_t *doc)
{
    static const char *const keys[][2] = {{"name", "run.name"},
                                          {"started_at", "run.started_at"},
                                          {"plan", "plan.file"},
                                          {"abort_reason", "abort_reason"}};
    bool any = false;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const char *v = sq_report__str(doc, keys[i][1], NULL);
        if (!v || !v[0] || (i == 3 && !json_is_true(sq_report__get(doc, "aborted"))))
            continue;
        if (!any)
            fputs("    <properties>\n", f);
        any = true;
        fprintf(f, "      <property name=\"%s\" value=\"", keys[i][0]);
        sq_report_xml_esc(f, v);
        fputs("\"/>\n", f);
    }
    double seed;
    if (sq_report__num(doc, "run.seed", &seed)) {
        if (!any)
            fputs("    <properties>\n", f);
        any = true;
        fprintf(f, "      <property name=\"seed\" value=\"%.0f\"/>\n", seed);
    }
    if (any)
        fputs("    </properties>\n", f);
}

static void suite(FILE *f, const json_t *doc, const char *name, const json_t *a, bool checks,
                  double secs)
{
    struct tally t = count(a, checks);
    fprintf(f,
            "  <testsuite name=\"%s\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" "
            "time=\"%.3f\"",
            name, t.tests, t.failures, t.skipped, secs);
    const char *ts = sq_report__str(doc, "run.started_at", NULL);
    if (ts) {
        fputs(" timestamp=\"", f);
        sq_report_xml_esc(f, ts);
        fputc('"', f);
    }
    fputs(">\n", f);
    properties(f, doc);
    size_t i;
    const json_t *e;
    json_array_foreach(a, i, e)
    {
        if (!json_is_object(e))
            continue;
        if (checks)
            check_case(f, e);
        else
            th_case(f, e);
    }
    fputs("  </testsuite>\n", f);
}

int sq_report_junit(const json_t *doc, FILE *f)
{
    const json_t *ths = array_at(doc, "thresholds"), *checks = array_at(doc, "checks");
    double secs = sq_report__numd(doc, "duration_s", 0);
    if (!(secs >= 0 && secs < 1e12))
        secs = 0;
    struct tally a = count(ths, false), b = count(checks, true);
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fputs("<testsuites name=\"squall", f);
    const char *name = sq_report__str(doc, "run.name", NULL);
    if (name && name[0]) {
        fputs(": ", f);
        sq_report_xml_esc(f, name);
    }
    fprintf(f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" time=\"%.3f\">\n",
            a.tests + b.tests, a.failures + b.failures, a.skipped + b.skipped, secs);
    suite(f, doc, "thresholds", ths, false, secs);
    suite(f, doc, "checks", checks, true, secs);
    fputs("</testsuites>\n", f);
    if (ferror(f))
        return -(errno ? errno : EIO);
    return 0;
}
