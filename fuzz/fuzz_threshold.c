/* fuzz_threshold.c - threshold expressions and metric selectors. Checks: a parsed expression
 * re-parses from its own text to the same data and from a canonical rendering ("avg < 1.5") to
 * the same aggregation, operator and value; a failure leaves the output zeroed and a one-line
 * message. Selector spans lie inside the input and obey the grammar. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/threshold.h"

static const char *agg_name(enum sq_th_agg a)
{
    static const char *const names[] = {"count", "rate", "value", "avg", "min", "max", "med"};
    return a < SQ_TH_PCT ? names[a] : "p";
}

static void check_expr(const char *s, size_t len)
{
    struct sq_th_expr e, z;
    char err[256];
    memset(&z, 0, sizeof(z));
    int rc = sq_th_expr_parse(s, len, &e, err, sizeof(err));
    if (rc != 0) {
        if (rc != -SQ_EPARSE || !err[0] || strchr(err, '\n') || memcmp(&e, &z, sizeof(e)) != 0)
            abort();
        return;
    }
    if (err[0] || e.agg > SQ_TH_PCT || e.op > SQ_TH_NE || !isfinite(e.value))
        abort();
    if (e.agg == SQ_TH_PCT ? !(e.pct > 0 && e.pct <= 100) : e.pct != 0)
        abort();
    size_t tl = strnlen(e.text, sizeof(e.text));
    if (tl == 0 || tl >= sizeof(e.text))
        abort();
    /* the text, when not cut short, parses to the same thing */
    if (tl < sizeof(e.text) - 1 || strcmp(e.text + tl - 3, "...") != 0) {
        struct sq_th_expr again;
        if (sq_th_expr_parse(e.text, tl, &again, NULL, 0) != 0 || again.agg != e.agg ||
            again.op != e.op || again.value != e.value || again.pct != e.pct ||
            strcmp(again.text, e.text) != 0)
            abort();
    }
    /* a canonical rendering parses to the same operator and value */
    char canon[128];
    if (e.agg == SQ_TH_PCT)
        snprintf(canon, sizeof(canon), "p(%.17g) %s %.17g", e.pct, sq_th_op_str(e.op), e.value);
    else
        snprintf(canon, sizeof(canon), "%s %s %.17g", agg_name(e.agg), sq_th_op_str(e.op), e.value);
    struct sq_th_expr c;
    int crc = sq_th_expr_parse(canon, strlen(canon), &c, NULL, 0);
    if (e.agg == SQ_TH_PCT && strchr(canon, 'e') && strchr(canon, 'e') < strchr(canon, ')'))
        return; /* %g wrote the percentile with an exponent, which p(N) does not take */
    if (crc != 0 || c.agg != e.agg || c.op != e.op || c.value != e.value || c.pct != e.pct)
        abort();
    /* holds() agrees with C's own comparison */
    double v = e.value;
    bool want = e.op == SQ_TH_LE || e.op == SQ_TH_GE || e.op == SQ_TH_EQ;
    if (sq_th_expr_holds(&e, v) != want)
        abort();
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || c == '_' || (c >= '0' && c <= '9');
}

static void check_sel(const char *s, size_t len)
{
    struct sq_metric_sel m;
    char err[256];
    int rc = sq_metric_sel_parse(s, len, &m, err, sizeof(err));
    if (rc != 0) {
        if (rc != -SQ_EPARSE || !err[0] || strchr(err, '\n') || m.metric || m.ntags)
            abort();
        return;
    }
    if (err[0] || !m.metric || m.metric < s || m.metric + m.metric_len > s + len || !m.metric_len ||
        m.ntags > SQ_TH_MAX_TAGS || (m.metric[0] >= '0' && m.metric[0] <= '9'))
        abort();
    for (size_t i = 0; i < m.metric_len; i++)
        if (!name_char(m.metric[i]))
            abort();
    for (size_t t = 0; t < m.ntags; t++) {
        if (!m.tags[t].key_len || m.tags[t].key < s ||
            m.tags[t].key + m.tags[t].key_len > s + len || m.tags[t].value < s ||
            m.tags[t].value + m.tags[t].value_len > s + len)
            abort();
        if (memchr(m.tags[t].key, ':', m.tags[t].key_len))
            abort();
        for (size_t u = 0; u < t; u++)
            if (m.tags[u].key_len == m.tags[t].key_len &&
                memcmp(m.tags[u].key, m.tags[t].key, m.tags[t].key_len) == 0)
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy: ASan catches a read past the length */
    char *s = malloc(size ? size : 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    check_expr(s, size);
    check_sel(s, size);
    free(s);
    return 0;
}
