/* plan/cond.c - a step's `if:` condition: parse once, evaluate per iteration (cond.h). */
#include "plan/cond.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/tmpl.h"

#define MAX_TERMS 32 /* comparisons in one condition */

enum opd_kind { OPD_STATUS, OPD_LIT, OPD_NAME };
enum op { OP_NONE, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE };

struct opd {
    enum opd_kind kind;
    const char *lit; /* OPD_LIT: into the condition's source copy */
    size_t lit_len;
    struct sq_tmpl *t; /* OPD_NAME */
};

struct term {
    struct opd a, b;
    enum op op;
    bool or_after; /* joined to the next term by || (else &&) */
};

struct sq_cond {
    char *src;
    struct term *terms;
    size_t n;
};

static void skip_ws(const char *s, size_t len, size_t *i)
{
    while (*i < len && (s[*i] == ' ' || s[*i] == '\t'))
        (*i)++;
}

static bool name_char(char c, bool first)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == '$' ||
           (!first && ((c >= '0' && c <= '9') || c == '.' || c == '-'));
}

static int fail(char *err, size_t errlen, size_t *erroff, size_t at, const char *msg)
{
    snprintf(err, errlen, "%s", msg);
    *erroff = at;
    return -SQ_EPARSE;
}

static int operand(const char *s, size_t len, size_t *i, sq_cond_name_fn name, void *ud,
                   struct opd *o, char *err, size_t errlen, size_t *erroff)
{
    skip_ws(s, len, i);
    size_t at = *i;
    if (at >= len)
        return fail(err, errlen, erroff, at,
                    "expected a value: status, a name, a number or a quoted string");
    char c = s[at];
    if (c == '\'' || c == '"') {
        const char *end = memchr(s + at + 1, c, len - at - 1);
        if (!end)
            return fail(err, errlen, erroff, at, "unclosed string");
        o->kind = OPD_LIT;
        o->lit = s + at + 1;
        o->lit_len = (size_t)(end - (s + at + 1));
        *i = (size_t)(end - s) + 1;
        return 0;
    }
    if ((c >= '0' && c <= '9') ||
        ((c == '-' || c == '+') && at + 1 < len && s[at + 1] >= '0' && s[at + 1] <= '9')) {
        size_t j = at + 1;
        while (j < len && ((s[j] >= '0' && s[j] <= '9') || s[j] == '.'))
            j++;
        o->kind = OPD_LIT;
        o->lit = s + at;
        o->lit_len = j - at;
        *i = j;
        return 0;
    }
    if (!name_char(c, true))
        return fail(err, errlen, erroff, at,
                    "expected a value: status, a name, a number or a quoted string");
    size_t j = at + 1;
    while (j < len && name_char(s[j], false))
        j++;
    *i = j;
    if (j - at == 6 && memcmp(s + at, "status", 6) == 0) {
        o->kind = OPD_STATUS;
        return 0;
    }
    o->kind = OPD_NAME;
    char msg[200] = "";
    int rc = name(ud, s + at, j - at, &o->t, msg, sizeof(msg));
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        return fail(err, errlen, erroff, at, msg[0] ? msg : "unknown name");
    return 0;
}

static enum op op_at(const char *s, size_t len, size_t *i)
{
    skip_ws(s, len, i);
    size_t at = *i;
    if (at >= len)
        return OP_NONE;
    bool two = at + 1 < len && s[at + 1] == '=';
    enum op op = OP_NONE;
    switch (s[at]) {
    case '=':
        op = two ? OP_EQ : OP_NONE;
        break;
    case '!':
        op = two ? OP_NE : OP_NONE;
        break;
    case '<':
        op = two ? OP_LE : OP_LT;
        break;
    case '>':
        op = two ? OP_GE : OP_GT;
        break;
    default:
        return OP_NONE;
    }
    if (op != OP_NONE)
        *i = at + (two ? 2 : 1);
    return op;
}

int sq_cond_parse(const char *src, size_t len, sq_cond_name_fn name, void *ud, struct sq_cond **out,
                  char *err, size_t errlen, size_t *erroff)
{
    *out = NULL;
    *erroff = 0;
    struct sq_cond *c = calloc(1, sizeof(*c));
    if (!c || !(c->src = malloc(len + 1)) || !(c->terms = calloc(MAX_TERMS, sizeof(*c->terms)))) {
        sq_cond_free(c);
        return -ENOMEM;
    }
    memcpy(c->src, src, len);
    c->src[len] = '\0';
    const char *s = c->src;
    size_t i = 0;
    int rc = 0;
    for (;;) {
        if (c->n == MAX_TERMS) {
            rc = fail(err, errlen, erroff, i, "more than 32 comparisons");
            break;
        }
        struct term *t = &c->terms[c->n++];
        if ((rc = operand(s, len, &i, name, ud, &t->a, err, errlen, erroff)) < 0)
            break;
        size_t at = i;
        t->op = op_at(s, len, &i);
        if (t->op == OP_NONE && i < len && (s[i] == '=' || s[i] == '!')) {
            rc = fail(err, errlen, erroff, i, "expected ==, !=, <, <=, > or >=");
            break;
        }
        (void)at;
        if (t->op != OP_NONE &&
            (rc = operand(s, len, &i, name, ud, &t->b, err, errlen, erroff)) < 0)
            break;
        skip_ws(s, len, &i);
        if (i >= len)
            break;
        if (i + 1 < len && s[i] == '&' && s[i + 1] == '&') {
            i += 2;
        } else if (i + 1 < len && s[i] == '|' && s[i + 1] == '|') {
            t->or_after = true;
            i += 2;
        } else {
            rc = fail(err, errlen, erroff, i, "expected &&, || or the end of the condition");
            break;
        }
    }
    if (rc < 0) {
        sq_cond_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void sq_cond_free(struct sq_cond *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->terms && i < c->n; i++) {
        sq_tmpl_free(c->terms[i].a.t);
        sq_tmpl_free(c->terms[i].b.t);
    }
    free(c->terms);
    free(c->src);
    free(c);
}

const char *sq_cond_source(const struct sq_cond *c)
{
    return c->src;
}

/* The operand's text: a literal, the status in decimal (into buf), or the rendered name. */
static struct sq_str value(const struct opd *o, int status, sq_cond_render_fn render, void *ud,
                           struct sq_buf *buf)
{
    sq_buf_reset(buf);
    if (o->kind == OPD_LIT)
        return (struct sq_str){o->lit, o->lit_len};
    if (o->kind == OPD_STATUS) {
        char tmp[16];
        int n = snprintf(tmp, sizeof(tmp), "%d", status);
        if (sq_buf_append(buf, tmp, (size_t)n) < 0)
            return (struct sq_str){"", 0};
    } else if (render(ud, o->t, buf) < 0) {
        return (struct sq_str){"", 0};
    }
    return (struct sq_str){buf->p ? buf->p : "", buf->len};
}

/* A decimal number, the whole text: strtod on a bounded copy. */
static bool number(struct sq_str v, double *out)
{
    char tmp[64];
    if (v.len == 0 || v.len >= sizeof(tmp))
        return false;
    memcpy(tmp, v.p, v.len);
    tmp[v.len] = '\0';
    for (size_t i = 0; i < v.len; i++)
        if (!((tmp[i] >= '0' && tmp[i] <= '9') || tmp[i] == '.' || tmp[i] == '-' || tmp[i] == '+'))
            return false;
    char *end;
    *out = strtod(tmp, &end);
    return end == tmp + v.len;
}

static bool term_holds(const struct term *t, int status, sq_cond_render_fn render, void *ud,
                       struct sq_buf *a, struct sq_buf *b)
{
    struct sq_str x = value(&t->a, status, render, ud, a);
    if (t->op == OP_NONE)
        return x.len && !(x.len == 1 && x.p[0] == '0') &&
               !(x.len == 5 && memcmp(x.p, "false", 5) == 0);
    struct sq_str y = value(&t->b, status, render, ud, b);
    double dx, dy;
    int cmp;
    if (number(x, &dx) && number(y, &dy)) {
        cmp = dx < dy ? -1 : dx > dy ? 1 : 0;
    } else {
        size_t n = x.len < y.len ? x.len : y.len;
        cmp = n ? memcmp(x.p, y.p, n) : 0;
        if (cmp == 0)
            cmp = x.len < y.len ? -1 : x.len > y.len ? 1 : 0;
    }
    switch (t->op) {
    case OP_EQ:
        return cmp == 0;
    case OP_NE:
        return cmp != 0;
    case OP_LT:
        return cmp < 0;
    case OP_LE:
        return cmp <= 0;
    case OP_GT:
        return cmp > 0;
    case OP_GE:
        return cmp >= 0;
    case OP_NONE:
        break;
    }
    return false;
}

bool sq_cond_eval(const struct sq_cond *c, int status, sq_cond_render_fn render, void *ud,
                  struct sq_buf *a, struct sq_buf *b)
{
    bool any = false, all = true;
    for (size_t i = 0; i < c->n; i++) {
        all = all && term_holds(&c->terms[i], status, render, ud, a, b);
        if (c->terms[i].or_after || i + 1 == c->n) {
            any = any || all;
            all = true;
        }
    }
    return any;
}
