/* plan/threshold.c - k6 threshold expressions ("p(95) < 200") and metric selectors
 * ("http_req_duration{step:login}").
 *
 * Both parsers are hand-written scanners over (s, len): no allocation, no NUL needed, every
 * error names the offending token and its byte offset in s. See docs/internals/plan-data.md. */
#include "plan/threshold.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "plan/load_internal.h"
#include "plan/metrics.h"

#define AGG_LIST "count, rate, value, avg, min, max, med or p(N)"
#define OP_LIST  ">, >=, <, <=, ==, === or !="

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
                                                      ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -SQ_EPARSE;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_op_char(char c)
{
    return c == '<' || c == '>' || c == '=' || c == '!';
}

static size_t skip_ws(const char *s, size_t len, size_t i)
{
    while (i < len && is_ws(s[i]))
        i++;
    return i;
}

/* The end of the token starting at i, for messages: a run of characters that are neither
 * whitespace nor operator characters (at least one character when i < len). */
static size_t token_end(const char *s, size_t len, size_t i)
{
    size_t j = i;
    while (j < len && !is_ws(s[j]) && !is_op_char(s[j]))
        j++;
    if (j == i && i < len)
        j++;
    return j;
}

/* Shortens a token for quoting in a message. */
static int tok_len(size_t n)
{
    return n > 40 ? 40 : (int)n;
}

/* Scans a number at s[i..]: [+-]? (digits [. digits*] | . digits) ([eE] [+-]? digits)? when
 * allow_sign_exp, else digits [. digits]. Returns the end, or i when there is no number. */
static size_t scan_number(const char *s, size_t len, size_t i, bool allow_sign_exp)
{
    size_t j = i;
    if (allow_sign_exp && j < len && (s[j] == '+' || s[j] == '-'))
        j++;
    size_t int_start = j;
    while (j < len && is_digit(s[j]))
        j++;
    size_t nint = j - int_start, nfrac = 0;
    if (j < len && s[j] == '.') {
        size_t k = j + 1;
        while (k < len && is_digit(s[k]))
            k++;
        nfrac = k - j - 1;
        if (nfrac || (allow_sign_exp && nint))
            j = k;
        else if (!allow_sign_exp)
            return i; /* "95." is not a percentile */
    }
    if (nint == 0 && nfrac == 0)
        return i;
    if (allow_sign_exp && j < len && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < len && (s[k] == '+' || s[k] == '-'))
            k++;
        size_t d = k;
        while (k < len && is_digit(s[k]))
            k++;
        if (k == d)
            return i; /* "1e" */
        j = k;
    }
    return j;
}

/* Converts the scanned number s[i..j) (at most 63 characters) into *out. */
static bool to_double(const char *s, size_t i, size_t j, double *out)
{
    char tmp[64];
    if (j - i >= sizeof(tmp))
        return false;
    memcpy(tmp, s + i, j - i);
    tmp[j - i] = '\0';
    errno = 0;
    char *end;
    double v = strtod(tmp, &end);
    if (*end != '\0' || !isfinite(v))
        return false;
    *out = v;
    return true;
}

static const struct {
    const char *name;
    enum sq_th_agg agg;
} aggs[] = {
    {"count", SQ_TH_COUNT}, {"rate", SQ_TH_RATE}, {"value", SQ_TH_VALUE}, {"avg", SQ_TH_AVG},
    {"min", SQ_TH_MIN},     {"max", SQ_TH_MAX},   {"med", SQ_TH_MED},
};

static int parse_expr(const char *s, size_t len, struct sq_th_expr *out, char *err, size_t errlen)
{
    size_t start = skip_ws(s, len, 0), end = len;
    while (end > start && is_ws(s[end - 1]))
        end--;
    if (start == end)
        return fail(err, errlen, "empty threshold expression (expected e.g. 'p(95) < 200')");

    /* The aggregation. */
    size_t i = start, w = i;
    while (w < end && ((s[w] >= 'a' && s[w] <= 'z') || (s[w] >= 'A' && s[w] <= 'Z') ||
                       is_digit(s[w]) || s[w] == '_'))
        w++;
    size_t after = skip_ws(s, end, w);
    if (w - i == 1 && s[i] == 'p' && after < end && s[after] == '(') {
        size_t n0 = skip_ws(s, end, after + 1);
        size_t n1 = scan_number(s, end, n0, false);
        double pct;
        if (n1 == n0) {
            size_t te = n0;
            while (te < end && s[te] != ')' && !is_ws(s[te]))
                te++;
            if (te == n0)
                return fail(err, errlen, "expected a percentile at %zu in 'p(N)' (0 < N <= 100)",
                            n0);
            return fail(err, errlen, "percentile '%.*s' at %zu is not a decimal number",
                        tok_len(te - n0), s + n0, n0);
        }
        if (!to_double(s, n0, n1, &pct) || !(pct > 0 && pct <= 100))
            return fail(err, errlen, "percentile %.*s at %zu is out of range (0 < N <= 100)",
                        tok_len(n1 - n0), s + n0, n0);
        size_t c = skip_ws(s, end, n1);
        if (c >= end || s[c] != ')')
            return fail(err, errlen, "expected ')' at %zu to close 'p(' at %zu", c, i);
        out->agg = SQ_TH_PCT;
        out->pct = pct;
        i = c + 1;
    } else {
        bool found = false;
        for (size_t k = 0; k < SQ_ARRAY_LEN(aggs); k++) {
            if (strlen(aggs[k].name) == w - i && memcmp(aggs[k].name, s + i, w - i) == 0) {
                out->agg = aggs[k].agg;
                found = true;
                break;
            }
        }
        if (!found) {
            size_t te = token_end(s, end, i);
            return fail(err, errlen, "unknown aggregation '%.*s' at %zu (expected " AGG_LIST ")",
                        tok_len(te - i), s + i, i);
        }
        i = w;
    }

    /* The operator: longest match first. */
    i = skip_ws(s, end, i);
    static const struct {
        const char *text;
        enum sq_th_op op;
    } ops[] = {{"===", SQ_TH_EQ}, {"==", SQ_TH_EQ}, {"!=", SQ_TH_NE}, {">=", SQ_TH_GE},
               {"<=", SQ_TH_LE},  {">", SQ_TH_GT},  {"<", SQ_TH_LT}};
    size_t oplen = 0;
    for (size_t k = 0; k < SQ_ARRAY_LEN(ops); k++) {
        size_t n = strlen(ops[k].text);
        if (end - i >= n && memcmp(s + i, ops[k].text, n) == 0) {
            out->op = ops[k].op;
            oplen = n;
            break;
        }
    }
    if (!oplen) {
        if (i >= end)
            return fail(err, errlen, "expected an operator (" OP_LIST ") at %zu, found the end", i);
        size_t te = i;
        while (te < end && is_op_char(s[te]))
            te++;
        if (te == i)
            te = token_end(s, end, i);
        return fail(err, errlen, "expected an operator (" OP_LIST ") at %zu, found '%.*s'", i,
                    tok_len(te - i), s + i);
    }
    size_t op_at = i;
    i = skip_ws(s, end, i + oplen);

    /* The number. */
    size_t n1 = scan_number(s, end, i, true);
    if (n1 == i || (n1 < end && !is_ws(s[n1]))) {
        if (i >= end)
            return fail(err, errlen, "expected a number at %zu after '%.*s', found the end", i,
                        (int)oplen, s + op_at);
        size_t te = i;
        while (te < end && !is_ws(s[te]))
            te++;
        return fail(err, errlen, "malformed number '%.*s' at %zu after '%.*s'", tok_len(te - i),
                    s + i, i, (int)oplen, s + op_at);
    }
    if (!to_double(s, i, n1, &out->value))
        return fail(err, errlen, "number '%.*s' at %zu is out of range", tok_len(n1 - i), s + i, i);
    size_t t = skip_ws(s, end, n1);
    if (t < end) {
        size_t te = t;
        while (te < end && !is_ws(s[te]))
            te++;
        return fail(err, errlen, "unexpected '%.*s' at %zu after the number", tok_len(te - t),
                    s + t, t);
    }

    /* The text as written, trimmed; a long one is cut with "...". */
    size_t n = end - start;
    if (n < sizeof(out->text)) {
        memcpy(out->text, s + start, n);
        out->text[n] = '\0';
    } else {
        size_t keep = sizeof(out->text) - 4;
        memcpy(out->text, s + start, keep);
        memcpy(out->text + keep, "...", 4);
    }
    return 0;
}

int sq_th_expr_parse(const char *s, size_t len, struct sq_th_expr *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (err && errlen)
        err[0] = '\0';
    int rc = parse_expr(s ? s : "", s ? len : 0, out, err, errlen);
    if (rc < 0)
        memset(out, 0, sizeof(*out));
    return rc;
}

bool sq_th_expr_holds(const struct sq_th_expr *e, double v)
{
    switch (e->op) {
    case SQ_TH_GT:
        return v > e->value;
    case SQ_TH_GE:
        return v >= e->value;
    case SQ_TH_LT:
        return v < e->value;
    case SQ_TH_LE:
        return v <= e->value;
    case SQ_TH_EQ:
        return v == e->value;
    case SQ_TH_NE:
        return v != e->value;
    }
    return false;
}

const char *sq_th_op_str(enum sq_th_op op)
{
    switch (op) {
    case SQ_TH_GT:
        return ">";
    case SQ_TH_GE:
        return ">=";
    case SQ_TH_LT:
        return "<";
    case SQ_TH_LE:
        return "<=";
    case SQ_TH_EQ:
        return "==";
    case SQ_TH_NE:
        return "!=";
    }
    return "?";
}

/* ---- selectors ---- */

static bool is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || c == '_';
}

static bool is_name_char(char c)
{
    return is_name_start(c) || is_digit(c);
}

static int parse_sel(const char *s, size_t len, struct sq_metric_sel *out, char *err, size_t errlen)
{
    size_t i = skip_ws(s, len, 0), end = len;
    while (end > i && is_ws(s[end - 1]))
        end--;
    if (i == end)
        return fail(err, errlen, "empty metric selector (expected e.g. 'http_req_duration')");
    if (!is_name_start(s[i]))
        return fail(err, errlen,
                    "metric name must start with a lowercase letter or '_' at %zu, found '%c'", i,
                    s[i]);
    size_t m0 = i;
    while (i < end && is_name_char(s[i]))
        i++;
    out->metric = s + m0;
    out->metric_len = i - m0;
    size_t b = skip_ws(s, end, i);
    if (b == end)
        return 0;
    if (s[b] != '{') {
        if (b == i)
            return fail(err, errlen,
                        "unexpected '%c' at %zu in the metric name (expected [a-z0-9_] or '{')",
                        s[i], i);
        return fail(err, errlen, "expected '{' or the end at %zu, found '%c'", b, s[b]);
    }
    i = b + 1;
    for (;;) {
        /* key */
        size_t k0 = skip_ws(s, end, i), k1 = k0;
        while (k1 < end && !is_ws(s[k1]) && s[k1] != ':' && s[k1] != ',' && s[k1] != '{' &&
               s[k1] != '}' && s[k1] != '"')
            k1++;
        if (k1 == k0) {
            if (k0 >= end)
                return fail(err, errlen, "expected a tag 'key:value' at %zu, found the end", k0);
            return fail(err, errlen, "expected a tag 'key:value' at %zu, found '%c'", k0, s[k0]);
        }
        size_t c = skip_ws(s, end, k1);
        if (c >= end || s[c] != ':')
            return fail(err, errlen, "expected ':' after tag '%.*s' at %zu", tok_len(k1 - k0),
                        s + k0, c);
        for (size_t t = 0; t < out->ntags; t++)
            if (out->tags[t].key_len == k1 - k0 && memcmp(out->tags[t].key, s + k0, k1 - k0) == 0)
                return fail(err, errlen, "duplicate tag '%.*s' at %zu", tok_len(k1 - k0), s + k0,
                            k0);
        if (out->ntags == SQ_TH_MAX_TAGS)
            return fail(err, errlen, "too many tags at %zu (at most %d)", k0, SQ_TH_MAX_TAGS);
        /* value */
        size_t v0 = skip_ws(s, end, c + 1), v1, next;
        if (v0 < end && s[v0] == '"') {
            v1 = v0 + 1;
            while (v1 < end && s[v1] != '"')
                v1++;
            if (v1 >= end)
                return fail(err, errlen, "unterminated quoted value starting at %zu", v0);
            next = skip_ws(s, end, v1 + 1);
            v0++;
            if (next < end && s[next] != ',' && s[next] != '}')
                return fail(err, errlen, "expected ',' or '}' at %zu after the quoted value", next);
        } else {
            v1 = v0;
            while (v1 < end && s[v1] != ',' && s[v1] != '}') {
                if (s[v1] == '"' || s[v1] == '{')
                    return fail(err, errlen, "unexpected '%c' at %zu in the value of tag '%.*s'",
                                s[v1], v1, tok_len(k1 - k0), s + k0);
                v1++;
            }
            next = v1;
            while (v1 > v0 && is_ws(s[v1 - 1]))
                v1--;
            if (v1 == v0)
                return fail(err, errlen, "empty value for tag '%.*s' at %zu", tok_len(k1 - k0),
                            s + k0, v0);
        }
        out->tags[out->ntags].key = s + k0;
        out->tags[out->ntags].key_len = k1 - k0;
        out->tags[out->ntags].value = s + v0;
        out->tags[out->ntags].value_len = v1 - v0;
        out->ntags++;
        if (next >= end)
            return fail(err, errlen, "expected '}' at %zu to close '{' at %zu", next, b);
        if (s[next] == '}') {
            size_t t = skip_ws(s, end, next + 1);
            if (t != end)
                return fail(err, errlen, "unexpected '%c' at %zu after '}'", s[t], t);
            return 0;
        }
        i = next + 1; /* ',' */
    }
}

int sq_metric_sel_parse(const char *s, size_t len, struct sq_metric_sel *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (err && errlen)
        err[0] = '\0';
    int rc = parse_sel(s ? s : "", s ? len : 0, out, err, errlen);
    if (rc < 0)
        memset(out, 0, sizeof(*out));
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Thresholds in a plan (the loader's part: see load_internal.h)                              */

static const char *agg_name(const struct sq_th_expr *e, char *buf, size_t len)
{
    static const char *const names[] = {"count", "rate", "value", "avg", "min", "max", "med"};
    if (e->agg == SQ_TH_PCT) {
        snprintf(buf, len, "p(%g)", e->pct);
        return buf;
    }
    return (unsigned)e->agg < SQ_ARRAY_LEN(names) ? names[e->agg] : "?";
}

static int custom_find(const struct sq_plan *p, const char *s, size_t len);

/* Whether a step of the plan carries the user tag k[0, kl) (with the value v[0, vl) unless v is
 * NULL). */
static bool user_tag_known(const struct sq_plan *p, const char *k, size_t kl, const char *v,
                           size_t vl)
{
    for (size_t i = 0; i < p->nscenarios; i++)
        for (size_t j = 0; j < p->scenarios[i].nsteps; j++) {
            const struct sq_plan_step *st = &p->scenarios[i].steps[j];
            for (uint32_t t = 0; t < st->ntags; t++)
                if (strlen(st->tags[t].key) == kl && !memcmp(st->tags[t].key, k, kl) &&
                    (!v || (strlen(st->tags[t].value) == vl && !memcmp(st->tags[t].value, v, vl))))
                    return true;
        }
    return false;
}

/* Checks the selector's metric and tags against the plan; *metric is the metric, or *custom
 * the plan's own metric it names (else -1). */
static int check_selector(struct ld *L, const struct ynode *key, const struct sq_metric_sel *sel,
                          enum sq_metric *metric, int *custom)
{
    char tail[96];
    int found = sq_metric_find(sel->metric, sel->metric_len);
    *custom = found < 0 ? custom_find(L->p, sel->metric, sel->metric_len) : -1;
    if (found < 0 && *custom < 0) {
        struct sq_suggest s;
        sq_suggest_init(&s, sel->metric, sel->metric_len);
        for (int i = 0; i < SQ_METRIC__COUNT; i++)
            sq_suggest_try(&s, sq_metric_name((enum sq_metric)i));
        for (size_t i = 0; i < L->p->nmetrics; i++)
            sq_suggest_try(&s, L->p->metrics[i].name);
        return sq_plan__fail(L, key, "unknown metric '%.*s'%s",
                             (int)(sel->metric_len > 60 ? 60 : sel->metric_len), sel->metric,
                             s.best ? sq_suggest_tail(&s, tail, sizeof(tail))
                                    : " (see docs/plans.md for the metric names)");
    }
    *metric = found >= 0 ? (enum sq_metric)found : SQ_METRIC_HTTP_REQS;
    const struct sq_plan *p = L->p;
    for (size_t t = 0; t < sel->ntags; t++) {
        const char *k = sel->tags[t].key, *v = sel->tags[t].value;
        size_t kl = sel->tags[t].key_len, vl = sel->tags[t].value_len;
        static const char *const tags[] = {"scenario", "step", "method", "status", "group"};
        int tag = -1;
        for (size_t i = 0; i < SQ_ARRAY_LEN(tags); i++)
            if (strlen(tags[i]) == kl && !memcmp(tags[i], k, kl))
                tag = (int)i;
        if (tag < 0 && user_tag_known(p, k, kl, v, vl)) /* a user tag a step carries */
            continue;
        if (tag < 0 && user_tag_known(p, k, kl, NULL, 0)) {
            struct sq_suggest s;
            sq_suggest_init(&s, v, vl);
            for (size_t i = 0; i < p->nscenarios; i++)
                for (size_t j = 0; j < p->scenarios[i].nsteps; j++) {
                    const struct sq_plan_step *st = &p->scenarios[i].steps[j];
                    for (uint32_t t2 = 0; t2 < st->ntags; t2++)
                        if (strlen(st->tags[t2].key) == kl && !memcmp(st->tags[t2].key, k, kl))
                            sq_suggest_try(&s, st->tags[t2].value);
                }
            return sq_plan__fail(L, key, "no step has the tag %.*s:%.*s in the plan%s",
                                 (int)(kl > 40 ? 40 : kl), k, (int)(vl > 60 ? 60 : vl), v,
                                 sq_suggest_tail(&s, tail, sizeof(tail)));
        }
        if (tag < 0) {
            struct sq_suggest s;
            sq_suggest_init(&s, k, kl);
            for (size_t i = 0; i < SQ_ARRAY_LEN(tags); i++)
                sq_suggest_try(&s, tags[i]);
            for (size_t i = 0; i < p->nscenarios; i++)
                for (size_t j = 0; j < p->scenarios[i].nsteps; j++)
                    for (uint32_t t2 = 0; t2 < p->scenarios[i].steps[j].ntags; t2++)
                        sq_suggest_try(&s, p->scenarios[i].steps[j].tags[t2].key);
            return sq_plan__fail(
                L, key,
                "unknown tag '%.*s'%s (tags: scenario, step, method, status, group, and the tags: "
                "the plan's steps carry)",
                (int)(kl > 40 ? 40 : kl), k, sq_suggest_tail(&s, tail, sizeof(tail)));
        }
        bool ok = false;
        struct sq_suggest s;
        sq_suggest_init(&s, v, vl);
        if (tag == 0) {
            ok = sq_plan__map_get(&L->scenario_names, v, vl, NULL);
            for (size_t i = 0; !ok && i < p->nscenarios; i++)
                sq_suggest_try(&s, p->scenarios[i].name);
        } else if (tag == 1) {
            ok = sq_plan__map_get(&L->all_step_names, v, vl, NULL);
            for (size_t i = 0; !ok && i < p->nscenarios; i++)
                for (size_t j = 0; j < p->scenarios[i].nsteps; j++)
                    sq_suggest_try(&s, p->scenarios[i].steps[j].name);
        } else if (tag == 2) {
            ok = vl > 0;
            for (size_t i = 0; i < vl; i++)
                ok = ok && ((v[i] >= 'A' && v[i] <= 'Z') || v[i] == '-' || v[i] == '_');
            if (!ok)
                return sq_plan__fail(L, key, "method:%.*s: expected an upper-case method like GET",
                                     (int)(vl > 30 ? 30 : vl), v);
        } else if (tag == 4) { /* a group path as the result shows it: "checkout::pay" */
            for (size_t i = 0; !ok && i < p->nscenarios; i++)
                for (size_t j = 0; !ok && j < p->scenarios[i].nsteps; j++) {
                    const char *g = p->scenarios[i].steps[j].group;
                    ok = sq_plan_in_group(g, v, vl);
                    if (g)
                        sq_suggest_try(&s, g);
                }
        } else {
            ok = vl == 3 && isdigit((unsigned char)v[0]) && isdigit((unsigned char)v[1]) &&
                 isdigit((unsigned char)v[2]);
            if (!ok)
                return sq_plan__fail(L, key, "status:%.*s: expected a 3-digit status like 200",
                                     (int)(vl > 30 ? 30 : vl), v);
        }
        if (!ok)
            return sq_plan__fail(L, key, "no %s named '%.*s' in the plan%s",
                                 tag == 0   ? "scenario"
                                 : tag == 1 ? "step"
                                            : "group",
                                 (int)(vl > 60 ? 60 : vl), v,
                                 sq_suggest_tail(&s, tail, sizeof(tail)));
    }
    return 0;
}

static struct sq_plan_threshold *new_threshold(struct sq_plan *p, const char *selector,
                                               enum sq_metric metric, int custom, struct sq_loc loc,
                                               size_t *cap)
{
    if (p->nthresholds == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        struct sq_plan_threshold *v = realloc(p->thresholds, nc * sizeof(*v));
        if (!v)
            return NULL;
        p->thresholds = v;
        *cap = nc;
    }
    struct sq_plan_threshold *t = &p->thresholds[p->nthresholds];
    memset(t, 0, sizeof(*t));
    t->selector = strdup(selector);
    if (!t->selector)
        return NULL;
    p->nthresholds++;
    t->metric = metric;
    t->custom = custom;
    t->loc = loc;
    char err[8];
    if (sq_metric_sel_parse(t->selector, strlen(t->selector), &t->sel, err, sizeof(err)) < 0)
        return NULL; /* parsed once already: cannot fail */
    return t;
}

static int add_expr(struct sq_plan_threshold *t, const struct sq_th_expr *e)
{
    size_t n = t->nexprs;
    if ((n & (n - 1)) == 0) { /* 0 or a power of two: double */
        struct sq_th_expr *v = realloc(t->exprs, (n ? 2 * n : 1) * sizeof(*v));
        if (!v)
            return -ENOMEM;
        t->exprs = v;
    }
    t->exprs[t->nexprs++] = *e;
    return 0;
}

static int check_expr(struct ld *L, const struct ynode *n, enum sq_metric_kind kind,
                      const struct sq_metric_sel *sel, struct sq_th_expr *e)
{
    int rc = sq_plan__want_string(L, n, "an expression like \"p(95) < 200\"");
    if (rc < 0)
        return rc;
    char err[256] = "";
    rc = sq_th_expr_parse(n->s, n->len, e, err, sizeof(err));
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        return sq_plan__fail(L, n, "%s", err[0] ? err : "malformed threshold expression");
    if (!sq_metric_agg_fits(kind, e->agg)) {
        char an[32];
        return sq_plan__fail(L, n, "'%s' does not apply to %.*s (%s)", agg_name(e, an, sizeof(an)),
                             (int)sel->metric_len, sel->metric, sq_metric_kind_aggs(kind));
    }
    return 0;
}

int sq_plan__load_thresholds(struct ld *L, const struct ynode *n)
{
    struct sq_plan *p = L->p;
    int rc = sq_plan__want_map(L, n, "a mapping of metrics to lists of expressions");
    if (rc < 0)
        return rc;
    /* the names tags may select, looked up once per tag */
    for (size_t i = 0; i < p->nscenarios; i++) {
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        if (sq_plan__map_add(&L->scenario_names, sc->name, strlen(sc->name), i, NULL) < 0)
            return -ENOMEM;
        for (size_t j = 0; j < sc->nsteps; j++)
            if (sq_plan__map_add(&L->all_step_names, sc->steps[j].name, strlen(sc->steps[j].name),
                                 j, NULL) < 0)
                return -ENOMEM;
    }
    size_t cap = 0;
    static const char *const keys[] = {"threshold", "abortOnFail", "delayAbortEval"};
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        size_t mark = sq_plan__path_key(L, k->s);
        struct sq_metric_sel sel;
        char err[256] = "";
        if (sq_metric_sel_parse(k->s, k->len, &sel, err, sizeof(err)) < 0)
            return sq_plan__fail(L, k, "%s", err[0] ? err : "malformed metric selector");
        enum sq_metric metric = SQ_METRIC_HTTP_REQ_DURATION;
        int custom = -1;
        if ((rc = check_selector(L, k, &sel, &metric, &custom)) < 0)
            return rc;
        const enum sq_metric_kind kind =
            custom >= 0 ? p->metrics[custom].kind : sq_metric_kind(metric);
        size_t cnt = v->kind == Y_SEQ ? v->nitems : 1;
        if (cnt == 0)
            return sq_plan__fail(L, v, "expected at least one expression like \"p(95) < 200\"");
        struct sq_plan_threshold *plain = NULL;
        for (size_t j = 0; j < cnt; j++) {
            const struct ynode *it = v->kind == Y_SEQ ? v->items[j] : v;
            size_t m2 = v->kind == Y_SEQ ? sq_plan__path_push(L, "[%zu]", j) : L->path_len;
            struct sq_th_expr e;
            if (it->kind == Y_MAP) {
                if ((rc = sq_plan__check_keys(L, it, keys, SQ_ARRAY_LEN(keys))) < 0)
                    return rc;
                const struct ynode *th = sq_plan__get(it, "threshold");
                if (!th)
                    return sq_plan__fail(L, it, "missing key 'threshold' (the expression)");
                size_t m3 = sq_plan__path_key(L, "threshold");
                if ((rc = check_expr(L, th, kind, &sel, &e)) < 0)
                    return rc;
                sq_plan__path_pop(L, m3);
                struct sq_plan_threshold *t = new_threshold(p, k->s, metric, custom, it->loc, &cap);
                if (!t || add_expr(t, &e) < 0)
                    return -ENOMEM;
                const struct ynode *x = sq_plan__get(it, "abortOnFail");
                if (x) {
                    m3 = sq_plan__path_key(L, "abortOnFail");
                    if ((rc = sq_plan__get_bool(L, x, &t->abort_on_fail)) < 0)
                        return rc;
                    sq_plan__path_pop(L, m3);
                }
                x = sq_plan__get(it, "delayAbortEval");
                if (x) {
                    m3 = sq_plan__path_key(L, "delayAbortEval");
                    if ((rc = sq_plan__get_duration(L, x, &t->delay_abort_eval_ns)) < 0)
                        return rc;
                    sq_plan__path_pop(L, m3);
                }
            } else {
                if ((rc = check_expr(L, it, kind, &sel, &e)) < 0)
                    return rc;
                if (!plain) {
                    plain = new_threshold(p, k->s, metric, custom, k->loc, &cap);
                    if (!plain)
                        return -ENOMEM;
                }
                if (add_expr(plain, &e) < 0)
                    return -ENOMEM;
            }
            sq_plan__path_pop(L, m2);
        }
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The plan's own metrics and the steps that add to them                                      */

int sq_plan__load_metrics(struct ld *L, const struct ynode *n)
{
    static const char *const kinds[] = {"counter", "rate", "gauge", "trend"};
    static const enum sq_metric_kind kv[] = {SQ_MK_COUNTER, SQ_MK_RATE, SQ_MK_GAUGE, SQ_MK_TREND};
    struct sq_plan *p = L->p;
    int rc = sq_plan__want_map(L, n,
                               "a mapping of metric names to kinds (counter, gauge, rate, "
                               "trend)");
    if (rc < 0)
        return rc;
    if (n->npairs > SQ_PLAN_METRICS_MAX)
        return sq_plan__fail(L, n, "at most %d metrics", SQ_PLAN_METRICS_MAX);
    p->metrics = calloc(n->npairs ? n->npairs : 1, sizeof(*p->metrics));
    if (!p->metrics)
        return -ENOMEM;
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        size_t mark = sq_plan__path_key(L, k->s);
        if (!sq_plan__is_ident(k->s) || k->len > SQ_METRIC_NAME_MAX)
            return sq_plan__fail(L, k,
                                 "a metric name is letters, digits and '_', not starting with a "
                                 "digit, %d bytes at most",
                                 SQ_METRIC_NAME_MAX);
        if (sq_metric_find(k->s, k->len) >= 0)
            return sq_plan__fail(L, k, "'%s' is a built-in metric: choose another name", k->s);
        if ((rc = sq_plan__want_string(L, v, "counter, gauge, rate or trend")) < 0)
            return rc;
        int kind = -1;
        for (size_t j = 0; j < SQ_ARRAY_LEN(kinds); j++)
            if (!strcmp(v->s, kinds[j]))
                kind = (int)j;
        if (kind < 0) {
            struct sq_suggest s;
            char tail[96];
            sq_suggest_init(&s, v->s, v->len);
            for (size_t j = 0; j < SQ_ARRAY_LEN(kinds); j++)
                sq_suggest_try(&s, kinds[j]);
            return sq_plan__fail(L, v,
                                 "unknown metric kind '%.40s'%s (counter, gauge, rate, trend)",
                                 v->s, sq_suggest_tail(&s, tail, sizeof(tail)));
        }
        struct sq_plan_metric *m = &p->metrics[p->nmetrics];
        m->name = strdup(k->s);
        if (!m->name)
            return -ENOMEM;
        p->nmetrics++;
        m->kind = kv[kind];
        m->loc = k->loc;
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

/* The plan's metric named s[0, len), or -1. */
static int custom_find(const struct sq_plan *p, const char *s, size_t len)
{
    for (size_t i = 0; i < p->nmetrics; i++)
        if (strlen(p->metrics[i].name) == len && !memcmp(p->metrics[i].name, s, len))
            return (int)i;
    return -1;
}

static int load_step_metric(struct ld *L, const struct ynode *n, struct sq_step_metric *out,
                            const struct sq_plan_step *st, struct rctx *R)
{
    static const char *const keys[] = {"name", "add", "from"};
    int rc = sq_plan__want_keys(L, n, "a mapping with name and add (or from: checks)", keys,
                                SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    const struct ynode *name = sq_plan__get(n, "name");
    if (!name)
        return sq_plan__fail(L, n, "missing key 'name' (a metric declared under metrics:)");
    size_t mark = sq_plan__path_key(L, "name");
    if ((rc = sq_plan__want_string(L, name, "a metric name")) < 0)
        return rc;
    int m = custom_find(L->p, name->s, name->len);
    if (m < 0) {
        struct sq_suggest s;
        char tail[96];
        sq_suggest_init(&s, name->s, name->len);
        for (size_t i = 0; i < L->p->nmetrics; i++)
            sq_suggest_try(&s, L->p->metrics[i].name);
        return sq_plan__fail(L, name, "no metric named '%.60s' under metrics:%s", name->s,
                             sq_suggest_tail(&s, tail, sizeof(tail)));
    }
    sq_plan__path_pop(L, mark);
    out->metric = (uint32_t)m;
    const struct ynode *add = sq_plan__get(n, "add"), *from = sq_plan__get(n, "from");
    if (add && from)
        return sq_plan__fail(L, sq_plan__get_key(n, "from"),
                             "a metric: entry takes add or from, not both");
    if (from) {
        mark = sq_plan__path_key(L, "from");
        if ((rc = sq_plan__want_string(L, from, "checks")) < 0)
            return rc;
        if (strcmp(from->s, "checks"))
            return sq_plan__fail(L, from,
                                 "expected checks (1 when every check of the step held, "
                                 "else 0), got '%.40s'",
                                 from->s);
        if (!st->nchecks)
            return sq_plan__fail(L, from, "from: checks needs a check: on this step");
        out->src = SQ_SMS_CHECKS;
        sq_plan__path_pop(L, mark);
        return 0;
    }
    out->src = SQ_SMS_NUMBER;
    out->value = 1;
    if (!add)
        return 0;
    mark = sq_plan__path_key(L, "add");
    if (add->kind == Y_SCALAR && strstr(add->s, "{{")) {
        if ((rc = sq_plan__compile_scalar(L, add, SQ_TMPL_ESC_NONE, R, &out->tmp)) < 0)
            return rc;
        out->src = SQ_SMS_TMPL;
    } else if (add->kind == Y_SCALAR && (sq_plan__is_true(add->s) || sq_plan__is_false(add->s))) {
        out->value = sq_plan__is_true(add->s) ? 1 : 0;
    } else {
        char num[64];
        if (add->kind != Y_SCALAR || sq_plan__yaml_number(add, num, sizeof(num)) != 1)
            return sq_plan__fail(L, add,
                                 "expected a number, true/false, or a template like "
                                 "\"{{total}}\"");
        out->value = strtod(num, NULL);
    }
    sq_plan__path_pop(L, mark);
    return 0;
}

int sq_plan__load_step_metrics(struct ld *L, const struct ynode *n, struct sq_plan_step *st,
                               struct rctx *R)
{
    size_t cnt = n->kind == Y_SEQ ? n->nitems : 1;
    if (cnt == 0 || cnt > SQ_STEP_METRICS_MAX)
        return sq_plan__fail(L, n, "expected 1 to %d metric: entries", SQ_STEP_METRICS_MAX);
    st->metrics = calloc(cnt, sizeof(*st->metrics));
    if (!st->metrics)
        return -ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        const struct ynode *it = n->kind == Y_SEQ ? n->items[i] : n;
        size_t mark = n->kind == Y_SEQ ? sq_plan__path_push(L, "[%zu]", i) : L->path_len;
        st->nmetrics = (uint32_t)i + 1;
        int rc = load_step_metric(L, it, &st->metrics[i], st, R);
        if (rc < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    return 0;
}
