/* plan/yaml.c - YAML text -> a tree of our own whose every node keeps its line:col, and typed
 * access to it (see load_internal.h).
 *
 * libfyaml's event parser builds a small tree (scalars, mappings, sequences) in which every node
 * keeps its 1-based line:col: libfyaml's document API has no position for mappings and
 * sequences, and a plan error must always name file:line:col. Anchors, aliases and merge keys
 * (<<) are resolved while the tree is built. libfyaml's own diagnostics are collected (never
 * printed) and the first error becomes the load error. libfyaml is used here and nowhere else.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/text.h"
#include "plan/fyaml.h"
#include "plan/load_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* The loader's memory                                                                        */

/* The arena: blocks of 16 KiB growing to 1 MiB, bump-allocated, freed together. A node costs
 * its 32 bytes and nothing for bookkeeping (a malloc per node cost 3 to 4 times that). */
struct sq_plan__chunk {
    struct sq_plan__chunk *next;
    max_align_t data[];
};

_Static_assert(sizeof(struct ynode) == 32, "a node is 32 bytes (docs/internals/plan.md)");

#define CHUNK_MIN (16u << 10)
#define CHUNK_MAX (1u << 20)

static struct sq_plan__chunk *chunk_new(struct ld *L, size_t cap)
{
    if (cap > SIZE_MAX - sizeof(struct sq_plan__chunk))
        return NULL;
    struct sq_plan__chunk *c = calloc(1, sizeof(*c) + cap);
    if (c) {
        c->next = L->chunks;
        L->chunks = c;
    }
    return c;
}

static void *arena_take(struct ld *L, size_t size, size_t align)
{
    size_t pad = (size_t)(-(uintptr_t)L->cur & (align - 1));
    if (L->left >= pad && L->left - pad >= size) {
        char *p = L->cur + pad;
        L->cur = p + size;
        L->left -= pad + size;
        return p;
    }
    if (!L->next_size)
        L->next_size = CHUNK_MIN;
    if (size > L->next_size / 4) { /* a large piece (a long scalar): a block of its own */
        struct sq_plan__chunk *c = chunk_new(L, size);
        return c ? (void *)c->data : NULL;
    }
    struct sq_plan__chunk *c = chunk_new(L, L->next_size);
    if (!c)
        return NULL;
    L->cur = (char *)c->data;
    L->left = L->next_size;
    if (L->next_size < CHUNK_MAX)
        L->next_size *= 2;
    return arena_take(L, size, align); /* fits now: size <= a quarter of the block */
}

void *sq_plan__alloc(struct ld *L, size_t size)
{
    return arena_take(L, size ? size : 1, _Alignof(max_align_t)); /* blocks come zeroed */
}

char *sq_plan__strndup(struct ld *L, const char *s, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    char *d = arena_take(L, n + 1, 1);
    if (d && n)
        memcpy(d, s, n);
    if (d)
        d[n] = '\0';
    return d;
}

void sq_plan__ld_dispose(struct ld *L)
{
    for (struct sq_plan__chunk *c = L->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    L->chunks = NULL;
    L->cur = NULL;
    L->left = 0;
    free(L->stack);
    L->stack = NULL;
    sq_plan__map_dispose(&L->anchors);
    sq_plan__map_dispose(&L->vars);
    sq_plan__map_dispose(&L->slots);
    sq_plan__map_dispose(&L->step_names);
    sq_plan__map_dispose(&L->scenario_names);
    sq_plan__map_dispose(&L->all_step_names);
    sq_plan__map_dispose(&L->feeder_names);
    for (size_t i = 0; i < L->nfeeder_cols; i++)
        sq_plan__map_dispose(&L->feeder_cols[i]);
    free(L->feeder_cols);
}

/* ------------------------------------------------------------------------------------------ */
/* Errors and the key path                                                                    */

size_t sq_plan__path_push(struct ld *L, const char *fmt, ...)
{
    size_t mark = L->path_len;
    if (L->path_len < sizeof(L->path) - 1) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(L->path + L->path_len, sizeof(L->path) - L->path_len, fmt, ap);
        va_end(ap);
        if (n > 0)
            L->path_len += (size_t)n;
        if (L->path_len >= sizeof(L->path))
            L->path_len = sizeof(L->path) - 1;
    }
    return mark;
}

size_t sq_plan__path_key(struct ld *L, const char *key)
{
    return L->path_len ? sq_plan__path_push(L, ".%s", key) : sq_plan__path_push(L, "%s", key);
}

void sq_plan__path_pop(struct ld *L, size_t mark)
{
    L->path_len = mark;
    L->path[mark] = '\0';
}

static int vfail_at(struct ld *L, struct sq_loc loc, const char *fmt, va_list ap)
{
    struct sq_plan_error *e = L->err;
    if (!loc.line) { /* never happens for a node with a position; keep errors locatable */
        loc.line = 1;
        loc.col = 1;
    }
    if (e) {
        e->loc = loc;
        snprintf(e->key, sizeof(e->key), "%.95s", L->path);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    }
    return -SQ_EPARSE;
}

int sq_plan__fail_at(struct ld *L, struct sq_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail_at(L, loc, fmt, ap);
    va_end(ap);
    return rc;
}

int sq_plan__fail(struct ld *L, const struct ynode *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail_at(L, n->loc, fmt, ap);
    va_end(ap);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* YAML -> tree                                                                               */

/* An open mapping or sequence. Its children so far are L->stack[start, L->nstack): one stack
 * for every open collection, so building allocates nothing per collection but the node and,
 * when it closes, its exact array in the arena. */
struct frame {
    struct ynode *node;
    size_t start;
    uint64_t weight; /* the node's weight so far */
    const char *anchor;
    size_t anchor_len;
};

static struct sq_loc mark_loc(const struct fy_mark *m)
{
    struct sq_loc loc = {0, 0};
    if (m && m->line >= 0 && m->column >= 0) {
        loc.line = (uint32_t)m->line + 1;
        loc.col = (uint32_t)m->column + 1;
    }
    return loc;
}

/* ------------------------------------------------------------------------------------------ */
/* Messages that name the fix                                                                 */

/* Line lineno (1-based) of the plan's text: its first byte and length without the line end.
 * False past the last line. */
static bool src_line(const struct ld *L, uint32_t lineno, const char **p, size_t *n)
{
    const char *at = L->src, *end = L->src + L->src_len;
    for (uint32_t i = 1; i < lineno; i++) {
        const char *nl = memchr(at, '\n', (size_t)(end - at));
        if (!nl)
            return false;
        at = nl + 1;
    }
    const char *nl = memchr(at, '\n', (size_t)(end - at));
    size_t len = nl ? (size_t)(nl - at) : (size_t)(end - at);
    if (len && at[len - 1] == '\r')
        len--;
    *p = at;
    *n = len;
    return at < end || lineno == 1;
}

static size_t indent_of(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && p[i] == ' ')
        i++;
    return i;
}

/* A line with a key whose value is on the same line ("key: value", "- key: { a: 1 }"): the
 * key's 0-based column and length. A value that opens a block on the next lines (|, >, an anchor
 * or a tag alone) or a comment does not count. */
static bool key_with_value(const char *p, size_t n, size_t *kcol, size_t *klen)
{
    size_t i = indent_of(p, n);
    while (i + 1 < n && p[i] == '-' && p[i + 1] == ' ') { /* "- " items */
        i += 2;
        while (i < n && p[i] == ' ')
            i++;
    }
    if (i == n || p[i] == '#')
        return false;
    size_t k = i;
    while (i + 1 < n && !(p[i] == ':' && (p[i + 1] == ' ' || p[i + 1] == '\t')))
        i++;
    if (i + 1 >= n)
        return false;
    size_t v = i + 1;
    while (v < n && (p[v] == ' ' || p[v] == '\t'))
        v++;
    if (v == n || p[v] == '#' || p[v] == '|' || p[v] == '>' || p[v] == '&' || p[v] == '!')
        return false;
    *kcol = k;
    *klen = i - k;
    return true;
}

/* A syntax error near line at that is a line indented deeper than the key before it, which has
 * its value on its own line (libfyaml reports it on the line before, or as "invalid multiline
 * plain key"): the message names the over-indented line, the key it outruns and the fix. Returns
 * -SQ_EPARSE with the error set, or 0 when the text does not look like that. */
static int over_indented(struct ld *L, uint32_t at, const char *why)
{
    for (uint32_t c = at < 2 ? 2 : at; c <= at + 1; c++) {
        const char *cp, *pp = NULL;
        size_t cn, pn = 0;
        if (!src_line(L, c, &cp, &cn))
            return 0;
        size_t ci = indent_of(cp, cn);
        if (ci == cn || cp[ci] == '#')
            continue;
        uint32_t pl = c - 1; /* the line before, blank lines and comments skipped */
        for (; pl >= 1; pl--) {
            if (!src_line(L, pl, &pp, &pn))
                return 0;
            size_t pi = indent_of(pp, pn);
            if (pi < pn && pp[pi] != '#')
                break;
        }
        size_t kcol, klen;
        if (pl == 0 || !key_with_value(pp, pn, &kcol, &klen) || ci <= kcol)
            continue;
        size_t w = ci; /* what the over-indented line starts with, up to its ':' */
        while (w < cn && w - ci < 40 && cp[w] != ':' && cp[w] != ' ')
            w++;
        return sq_plan__fail_at(
            L, (struct sq_loc){c, (uint32_t)ci + 1},
            "YAML syntax error: line %u is indented too far: '%.*s' at column %zu is deeper than "
            "'%.*s' (line %u, column %zu), whose value is already on its line; line it up with "
            "'%.*s' at column %zu, or give '%.*s' no value on its line to nest keys under it "
            "(the YAML parser said: %s)",
            c, (int)(w - ci), cp + ci, ci + 1, (int)(klen > 40 ? 40 : klen), pp + kcol, pl,
            kcol + 1, (int)(klen > 40 ? 40 : klen), pp + kcol, kcol + 1,
            (int)(klen > 40 ? 40 : klen), pp + kcol, why);
    }
    return 0;
}

/* A mapping whose key is itself a mapping, written "{{...": an unquoted template that YAML read
 * as a flow mapping. Returns -SQ_EPARSE with a message that shows the value quoted, or 0 when
 * the mapping m is not written that way. */
static int unquoted_template(struct ld *L, struct sq_loc at)
{
    const char *p;
    size_t n;
    if (!src_line(L, at.line, &p, &n) || at.col == 0 || at.col + 1 > n)
        return 0;
    size_t b = at.col - 1;
    if (p[b] != '{' || p[b + 1] != '{')
        return 0;
    bool flow = false; /* inside a flow mapping or list: the value ends at ',' '}' ']' */
    for (size_t i = 0; i < b; i++)
        flow |= p[i] == '{' || p[i] == '[';
    const char *close = NULL;
    for (size_t i = b + 2; i + 1 < n && !close; i++)
        if (p[i] == '}' && p[i + 1] == '}')
            close = p + i + 2;
    size_t e = close ? (size_t)(close - p) : n;
    while (e < n && !(flow && (p[e] == ',' || p[e] == '}' || p[e] == ']')) &&
           !(p[e] == '#' && p[e - 1] == ' '))
        e++;
    while (e > b && (p[e - 1] == ' ' || p[e - 1] == '\t'))
        e--;
    size_t k = b; /* the key before it: "KEY: {{" */
    while (k > 0 && p[k - 1] == ' ')
        k--;
    size_t ke = k, ks = k;
    if (k > 0 && p[k - 1] == ':') {
        ke = k - 1;
        ks = ke;
        while (ks > 0 && p[ks - 1] != ' ' && p[ks - 1] != '{' && p[ks - 1] != ',' &&
               p[ks - 1] != '-')
            ks--;
    }
    bool dq = !memchr(p + b, '"', e - b);
    const char q = dq ? '"' : '\'';
    if (ke > ks)
        return sq_plan__fail_at(
            L, at,
            "'{{' here starts a YAML mapping, not a template: a value that begins with {{ must "
            "be quoted: %.*s: %c%.*s%c",
            (int)(ke - ks > 60 ? 60 : ke - ks), p + ks, q, (int)(e - b > 120 ? 120 : e - b), p + b,
            q);
    return sq_plan__fail_at(L, at,
                            "'{{' here starts a YAML mapping, not a template: a value that "
                            "begins with {{ must be quoted: %c%.*s%c",
                            q, (int)(e - b > 120 ? 120 : e - b), p + b, q);
}

/* A syntax error on a line whose value starts with an unquoted "{{" ("url: {{x}}/a" is a flow
 * mapping followed by text): the message shows the value quoted. Returns -SQ_EPARSE, or 0 when
 * the line has no such value. */
static int template_value(struct ld *L, uint32_t line)
{
    const char *p;
    size_t n;
    if (!src_line(L, line, &p, &n))
        return 0;
    for (size_t i = 1; i + 1 < n; i++)
        if (p[i] == '{' && p[i + 1] == '{' && (p[i - 1] == ' ' || p[i - 1] == '\t')) {
            size_t j = i - 1;
            while (j > 0 && (p[j] == ' ' || p[j] == '\t'))
                j--;
            if (p[j] == ':' || p[j] == '-' || p[j] == ',' || p[j] == '[')
                return unquoted_template(L, (struct sq_loc){line, (uint32_t)i + 1});
        }
    return 0;
}

static int stack_push(struct ld *L, struct ynode *n)
{
    if (L->nstack == L->capstack) {
        size_t cap = L->capstack ? L->capstack * 2 : 256;
        struct ynode **ns = realloc(L->stack, cap * sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        L->stack = ns;
        L->capstack = cap;
    }
    L->stack[L->nstack++] = n;
    return 0;
}

static int too_heavy(struct ld *L, struct sq_loc at)
{
    return sq_plan__fail_at(L, at,
                            "aliases expand the plan past %u MiB, the limit for a plan with its "
                            "aliases expanded (see docs/plans.md, Limits)",
                            SQ_PLAN_MAX_WEIGHT >> 20);
}

/* Adds a node's weight to its parent's; at says where to report a plan that gets too heavy. */
static int add_weight(struct ld *L, struct frame *f, uint64_t w, struct sq_loc at)
{
    f->weight += w;
    return f->weight > SQ_PLAN_MAX_WEIGHT ? too_heavy(L, at) : 0;
}

static bool is_merge_key(const struct ynode *k)
{
    return k->kind == Y_SCALAR && k->style == YS_PLAIN && strcmp(k->s, "<<") == 0;
}

/* Mappings with more keys than this check duplicates with a hash map, smaller ones pairwise. */
#define SMALL_MAP 16

/* Closes a mapping: keys must be scalars and unique; merge keys (<<) bring in the pairs of the
 * merged mapping(s) that the mapping does not set itself (its own keys win, then earlier
 * merges). Errors come in the order of the keys. */
static int finish_map(struct ld *L, struct frame *f)
{
    struct ynode *m = f->node;
    struct ynode *const *it = L->stack ? L->stack + f->start : NULL; /* NULL: {} first */
    size_t npairs = (L->nstack - f->start) / 2, nmerged = 0;
    for (size_t i = 0; i < npairs; i++) { /* an upper bound on what merges bring */
        const struct ynode *k = it[2 * i], *v = it[2 * i + 1];
        if (!is_merge_key(k))
            continue;
        if (v->kind == Y_MAP)
            nmerged += v->npairs;
        else if (v->kind == Y_SEQ)
            for (size_t j = 0; j < v->nitems; j++)
                nmerged += v->items[j]->kind == Y_MAP ? v->items[j]->npairs : 0;
    }
    const bool hashed = npairs + nmerged > SMALL_MAP;
    struct sq_plan__map keys; /* key -> index of its pair in it[] / 2 */
    sq_plan__map_init(&keys, false);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < npairs; i++) {
        const struct ynode *k = it[2 * i], *v = it[2 * i + 1];
        if (k->kind != Y_SCALAR) {
            rc = unquoted_template(L, m->loc);
            if (rc == 0)
                rc = sq_plan__fail(L, k,
                                   "a mapping key must be a plain string, not a %s (quote it: "
                                   "\"...\")",
                                   k->kind == Y_MAP ? "mapping" : "list");
        } else if (is_merge_key(k)) {
            if (v->kind == Y_SEQ) {
                for (size_t j = 0; rc == 0 && j < v->nitems; j++)
                    if (v->items[j]->kind != Y_MAP)
                        rc = sq_plan__fail(L, v->items[j], "a merge key (<<) takes mappings");
            } else if (v->kind != Y_MAP) {
                rc = sq_plan__fail(L, v, "a merge key (<<) takes a mapping or a list of mappings");
            }
            f->weight -= (uint64_t)k->weight + v->weight; /* walked as the merged pairs */
        } else {
            const struct ynode *first = NULL;
            if (hashed) {
                uintptr_t j = 0;
                int added = sq_plan__map_add(&keys, k->s, strlen(k->s), i, &j);
                if (added < 0)
                    rc = added;
                else if (added == 0)
                    first = it[2 * j];
            } else {
                for (size_t j = 0; j < i && !first; j++)
                    if (!is_merge_key(it[2 * j]) && strcmp(it[2 * j]->s, k->s) == 0)
                        first = it[2 * j];
            }
            if (first)
                rc = sq_plan__fail(L, k, "duplicate key '%s' (first at line %u)", k->s,
                                   first->loc.line);
        }
    }
    if (rc == 0 && (npairs + nmerged > UINT32_MAX ||
                    !(m->pairs = sq_plan__alloc(L, (npairs + nmerged) * sizeof(struct ypair)))))
        rc = -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; rc == 0 && i < npairs; i++)
        if (!is_merge_key(it[2 * i]))
            m->pairs[n++] = (struct ypair){it[2 * i], it[2 * i + 1]};
    for (size_t i = 0; rc == 0 && i < npairs; i++) {
        const struct ynode *k = it[2 * i], *v = it[2 * i + 1];
        if (!is_merge_key(k))
            continue;
        size_t nsrc = v->kind == Y_MAP ? 1 : v->nitems;
        for (size_t s = 0; rc == 0 && s < nsrc; s++) {
            const struct ynode *src = v->kind == Y_MAP ? v : v->items[s];
            for (size_t j = 0; rc == 0 && j < src->npairs; j++) {
                const struct ypair *pr = &src->pairs[j];
                bool have = false;
                if (hashed) {
                    int added = sq_plan__map_add(&keys, pr->key->s, strlen(pr->key->s), 0, NULL);
                    rc = added < 0 ? added : 0;
                    have = added == 0;
                } else {
                    for (size_t x = 0; x < n && !have; x++)
                        have = strcmp(m->pairs[x].key->s, pr->key->s) == 0;
                }
                if (rc == 0 && !have) {
                    m->pairs[n++] = *pr;
                    rc = add_weight(L, f, (uint64_t)pr->key->weight + pr->val->weight, m->loc);
                }
            }
        }
    }
    m->npairs = (uint32_t)n;
    sq_plan__map_dispose(&keys);
    return rc;
}

static int finish_seq(struct ld *L, struct frame *f)
{
    struct ynode *s = f->node;
    size_t n = L->nstack - f->start;
    if (n > UINT32_MAX || !(s->items = sq_plan__alloc(L, n * sizeof(*s->items))))
        return -ENOMEM;
    if (n)
        memcpy(s->items, L->stack + f->start, n * sizeof(*s->items));
    s->nitems = (uint32_t)n;
    return 0;
}

/* The value of a single-quoted scalar whose text starts at src[pos] (after the quote): '' is a
 * quote; a line break folds into a space, n empty lines into n line breaks; blanks around line
 * breaks go. Done here rather than with fy_token_get_text(): libfyaml 0.7 leaks its atom
 * iterator's chunk array on runs of '' escapes. The stream is known to parse (pass 1). */
static char *single_quoted(struct ld *L, size_t pos, size_t *len)
{
    const char *s = L->src;
    size_t end = pos;
    while (end < L->src_len && !(s[end] == '\'' && (end + 1 >= L->src_len || s[end + 1] != '\'')))
        end += s[end] == '\'' ? 2 : 1;
    char *out = arena_take(L, end - pos + 1, 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = pos; i < end;) {
        if (s[i] == '\'' && i + 1 < end && s[i + 1] == '\'') {
            out[o++] = '\'';
            i += 2;
        } else if (s[i] == '\r' || s[i] == '\n') {
            while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == '\t'))
                o--; /* trailing blanks of the line */
            size_t breaks = 0;
            while (i < end && (s[i] == '\r' || s[i] == '\n' || s[i] == ' ' || s[i] == '\t')) {
                if (s[i] == '\n' || (s[i] == '\r' && (i + 1 >= end || s[i + 1] != '\n')))
                    breaks++;
                i++;
            }
            if (breaks == 1)
                out[o++] = ' ';
            else
                for (size_t b = 1; b < breaks; b++)
                    out[o++] = '\n';
        } else {
            out[o++] = s[i++];
        }
    }
    out[o] = '\0';
    *len = o;
    return out;
}

static int check_tag(struct ld *L, struct fy_token *tag, struct ynode *n, bool scalar)
{
    if (!tag)
        return 0;
    size_t tl;
    const char *t = fy_token_get_text(tag, &tl);
    if (!t)
        return 0;
    if (scalar && tl == 4 && memcmp(t, "!raw", 4) == 0) {
        n->raw = true;
        return 0;
    }
    if (scalar && tl == 21 && memcmp(t, "tag:yaml.org,2002:str", 21) == 0) {
        n->style = YS_DOUBLE; /* a string, whatever it looks like */
        return 0;
    }
    if (!scalar && ((tl == 21 && memcmp(t, "tag:yaml.org,2002:map", 21) == 0) ||
                    (tl == 21 && memcmp(t, "tag:yaml.org,2002:seq", 21) == 0)))
        return 0;
    return sq_plan__fail(L, n,
                         "unsupported tag '%.*s' (squall knows !!str, and !raw in json bodies)",
                         (int)(tl > 60 ? 60 : tl), t);
}

/* A plan is UTF-8 text without control characters other than tab and line breaks. Checked
 * before libfyaml sees it: some malformed UTF-8 sends libfyaml 0.7 into an endless loop. */
static int check_text(struct ld *L)
{
    const unsigned char *s = (const unsigned char *)L->src;
    struct sq_loc loc = {1, 1};
    for (size_t i = 0; i < L->src_len;) {
        size_t n = sq_utf8_decode(s + i, L->src_len - i, NULL);
        if (n == 0)
            return sq_plan__fail_at(L, loc, "the plan is not UTF-8 text (byte 0x%02X)", s[i]);
        if (n == 1 &&
            ((s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') || s[i] == 0x7f))
            return sq_plan__fail_at(L, loc, "control character 0x%02X in the plan", s[i]);
        if (s[i] == '\n') {
            loc.line++;
            loc.col = 1;
        } else {
            loc.col++;
        }
        i += n;
    }
    return 0;
}

static void diag_sink(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
    (void)diag;
    (void)user;
    (void)buf;
    (void)len; /* errors are collected and reported by the loader, never printed */
}

/* Reports libfyaml's first collected error as a plan error. */
static int yaml_error(struct ld *L, struct fy_diag *diag)
{
    void *it = NULL;
    struct fy_diag_error *de;
    while ((de = fy_diag_errors_iterate(diag, &it)) != NULL) {
        if (de->type < FYET_ERROR)
            continue;
        struct sq_loc loc = {de->line > 0 ? (uint32_t)de->line : 1,
                             de->column > 0 ? (uint32_t)de->column : 1};
        int rc = over_indented(L, loc.line, de->msg ? de->msg : "malformed YAML");
        if (rc == 0)
            rc = template_value(L, loc.line);
        if (rc < 0)
            return rc;
        return sq_plan__fail_at(L, loc, "YAML syntax error: %s",
                                de->msg ? de->msg : "malformed YAML");
    }
    struct sq_loc loc = {1, 1};
    return sq_plan__fail_at(L, loc, "YAML syntax error");
}

/* A parser whose diagnostics are collected, never printed. */
static struct fy_parser *new_parser(struct ld *L, struct fy_diag **diagp)
{
    struct fy_diag_cfg dc;
    fy_diag_cfg_default(&dc);
    dc.fp = NULL;
    dc.output_fn = diag_sink;
    dc.colorize = false;
    struct fy_diag *diag = fy_diag_create(&dc);
    if (!diag)
        return NULL;
    fy_diag_set_collect_errors(diag, true);
    struct fy_parse_cfg cfg = {.flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2, .diag = diag};
    struct fy_parser *fyp = fy_parser_create(&cfg);
    if (!fyp || fy_parser_set_string(fyp, L->src, L->src_len) != 0) {
        if (fyp)
            fy_parser_destroy(fyp);
        fy_diag_destroy(diag);
        return NULL;
    }
    *diagp = diag;
    return fyp;
}

/* Pass 1: the YAML syntax alone, and the node count. libfyaml 0.7 leaks the text of a scalar
 * token fetched with fy_token_get_text() when the stream then fails (the parser still holds the
 * token), so the tree is built only from a stream known to parse. A plan over the node limit
 * stops here, after reading no more than the limit's worth of it. */
static int yaml_syntax(struct ld *L)
{
    struct fy_diag *diag = NULL;
    struct fy_parser *fyp = new_parser(L, &diag);
    if (!fyp)
        return -ENOMEM;
    struct fy_event *ev;
    size_t nodes = 0;
    int rc = 0;
    while (rc == 0 && (ev = fy_parser_parse(fyp)) != NULL) {
        if ((ev->type == FYET_SCALAR || ev->type == FYET_ALIAS || ev->type == FYET_MAPPING_START ||
             ev->type == FYET_SEQUENCE_START) &&
            ++nodes > SQ_PLAN_MAX_NODES) {
            struct sq_loc at = mark_loc(fy_event_start_mark(ev));
            rc = sq_plan__fail_at(L, at.line ? at : (struct sq_loc){1, 1},
                                  "the plan has more than %u YAML nodes, the limit for a plan "
                                  "(see docs/plans.md, Limits)",
                                  (unsigned)SQ_PLAN_MAX_NODES);
        }
        fy_parser_event_free(fyp, ev);
    }
    if (rc == 0 && fy_parser_get_stream_error(fyp))
        rc = yaml_error(L, diag);
    fy_parser_destroy(fyp);
    fy_diag_destroy(diag);
    return rc;
}

static enum ystyle style_of(enum fy_scalar_style s)
{
    switch (s) {
    case FYSS_SINGLE_QUOTED:
        return YS_SINGLE;
    case FYSS_DOUBLE_QUOTED:
        return YS_DOUBLE;
    case FYSS_LITERAL:
        return YS_LITERAL;
    case FYSS_FOLDED:
        return YS_FOLDED;
    default:
        return YS_PLAIN;
    }
}

static int build_tree(struct ld *L, struct ynode **root)
{
    int rc = yaml_syntax(L);
    if (rc < 0)
        return rc;
    struct fy_diag *diag = NULL;
    struct fy_parser *fyp = new_parser(L, &diag);
    if (!fyp)
        return -ENOMEM;
    struct frame stack[80];
    size_t depth = 0, docs = 0;
    struct ynode *top = NULL;
    struct fy_event *ev = NULL;
    struct sq_loc last_loc = {1, 1}; /* for nodes libfyaml gives no position (empty scalars) */
    size_t last_pos = 0;
    while (rc == 0 && (ev = fy_parser_parse(fyp)) != NULL) {
        struct ynode *n = NULL;
        struct fy_token *anchor = NULL, *tag = NULL;
        const struct fy_mark *m = fy_event_start_mark(ev);
        const bool ev_has_mark = m && m->line >= 0 && m->column >= 0; /* m dies with ev */
        const struct sq_loc ev_loc = mark_loc(m);
        const size_t ev_pos = m ? m->input_pos : 0;
        bool alias = false;
        switch (ev->type) {
        case FYET_DOCUMENT_START:
            if (++docs > 1) {
                rc = sq_plan__fail_at(L, mark_loc(m),
                                      "a plan is one YAML document (found a second '---')");
            }
            break;
        case FYET_MAPPING_START:
        case FYET_SEQUENCE_START: {
            bool map = ev->type == FYET_MAPPING_START;
            anchor = map ? ev->mapping_start.anchor : ev->sequence_start.anchor;
            tag = map ? ev->mapping_start.tag : ev->sequence_start.tag;
            if (depth == SQ_ARRAY_LEN(stack)) {
                rc = sq_plan__fail_at(L, mark_loc(m), "nested too deeply (at most %zu levels)",
                                      SQ_ARRAY_LEN(stack));
                break;
            }
            n = sq_plan__alloc(L, sizeof(*n));
            if (!n) {
                rc = -ENOMEM;
                break;
            }
            n->kind = map ? Y_MAP : Y_SEQ;
            n->loc = mark_loc(m);
            n->pos = (uint32_t)ev_pos;
            rc = check_tag(L, tag, n, false);
            if (rc < 0)
                break;
            struct frame *f = &stack[depth++];
            memset(f, 0, sizeof(*f));
            f->node = n;
            f->start = L->nstack;
            f->weight = 8;
            if (anchor) {
                size_t al = 0;
                const char *a = fy_token_get_text(anchor, &al);
                f->anchor = a ? sq_plan__strndup(L, a, al) : NULL;
                f->anchor_len = al;
                if (a && !f->anchor)
                    rc = -ENOMEM;
            }
            n = NULL; /* added to its parent when it closes */
            break;
        }
        case FYET_MAPPING_END:
        case FYET_SEQUENCE_END: {
            struct frame *f = &stack[depth - 1];
            rc = f->node->kind == Y_MAP ? finish_map(L, f) : finish_seq(L, f);
            L->nstack = f->start;
            depth--;
            n = f->node;
            n->weight = (uint32_t)f->weight; /* at most SQ_PLAN_MAX_WEIGHT */
            if (rc == 0 && f->anchor)
                rc = sq_plan__map_set(&L->anchors, f->anchor, f->anchor_len, (uintptr_t)n);
            break;
        }
        case FYET_SCALAR: {
            n = sq_plan__alloc(L, sizeof(*n));
            if (!n) {
                rc = -ENOMEM;
                break;
            }
            size_t len = 0;
            n->kind = Y_SCALAR;
            n->style = style_of(fy_token_scalar_style(ev->scalar.value));
            if (n->style == YS_SINGLE && m && m->input_pos > 0 && m->input_pos <= L->src_len &&
                L->src[m->input_pos - 1] == '\'') {
                n->s = single_quoted(L, m->input_pos, &len);
            } else {
                const char *t = fy_token_get_text(ev->scalar.value, &len);
                n->s = sq_plan__strndup(L, t ? t : "", t ? len : 0);
                len = t ? len : 0;
            }
            n->len = (uint32_t)len; /* a plan is at most 16 MiB */
            n->weight = (uint32_t)(len + 8);
            n->loc = mark_loc(m);
            n->pos = (uint32_t)ev_pos;
            if (!n->s) {
                rc = -ENOMEM;
                break;
            }
            rc = check_tag(L, ev->scalar.tag, n, true);
            if (rc == 0 && ev->scalar.anchor) {
                size_t al = 0;
                const char *a = fy_token_get_text(ev->scalar.anchor, &al);
                char *name = a ? sq_plan__strndup(L, a, al) : NULL;
                rc = !name ? -ENOMEM : sq_plan__map_set(&L->anchors, name, al, (uintptr_t)n);
            }
            break;
        }
        case FYET_ALIAS: {
            size_t al = 0;
            const char *a = fy_token_get_text(ev->alias.anchor, &al);
            uintptr_t node = 0;
            if (a && sq_plan__map_get(&L->anchors, a, al, &node))
                n = (struct ynode *)node;
            if (!n)
                rc = sq_plan__fail_at(L, mark_loc(m), "unknown alias '*%.*s'",
                                      (int)(al > 60 ? 60 : al), a ? a : "");
            alias = true;
            break;
        }
        default:
            break;
        }
        fy_parser_event_free(fyp, ev);
        struct frame *f = depth > 0 ? &stack[depth - 1] : NULL;
        const bool is_value = f && f->node->kind == Y_MAP && (L->nstack - f->start) % 2 == 1;
        if (rc == 0 && n && n->loc.line == 0 && !is_value) {
            n->loc = last_loc; /* an empty key or item: where the parser last was */
            n->pos = (uint32_t)last_pos;
        }
        if (ev_has_mark) {
            last_loc = ev_loc;
            last_pos = ev_pos;
        }
        if (rc == 0 && n) {
            if (!f) {
                top = n;
            } else {
                /* an empty value has no position: give it its key's */
                if (is_value && n->loc.line == 0) {
                    n->loc = L->stack[L->nstack - 1]->loc;
                    n->pos = L->stack[L->nstack - 1]->pos;
                }
                rc = stack_push(L, n);
                if (rc == 0)
                    rc = add_weight(L, f, n->weight, alias && ev_loc.line ? ev_loc : n->loc);
            }
        }
    }
    if (rc == 0 && fy_parser_get_stream_error(fyp))
        rc = yaml_error(L, diag);
    L->nstack = 0;
    fy_parser_destroy(fyp);
    fy_diag_destroy(diag);
    if (rc < 0)
        return rc;
    if (!top || (top->kind == Y_SCALAR && top->style == YS_PLAIN && top->len == 0)) {
        struct sq_loc loc = {1, 1};
        return sq_plan__fail_at(L, loc,
                                "the plan is empty (expected a mapping with target and scenarios)");
    }
    *root = top;
    return 0;
}

int sq_plan__yaml_tree(struct ld *L, struct ynode **root)
{
    char why[320];
    if (sq_fyaml_load(why, sizeof(why)) < 0) /* plan/fyaml.h */
        return sq_plan__fail_at(L, (struct sq_loc){1, 1}, "%s", why);
    int rc = check_text(L);
    return rc < 0 ? rc : build_tree(L, root);
}

/* ------------------------------------------------------------------------------------------ */
/* Typed access to nodes                                                                      */

const char *sq_plan__kind_name(const struct ynode *n)
{
    return n->kind == Y_MAP ? "a mapping" : n->kind == Y_SEQ ? "a list" : "a scalar";
}

static const struct ypair *find_pair(const struct ynode *map, const char *key)
{
    if (map->kind != Y_MAP)
        return NULL;
    for (size_t i = 0; i < map->npairs; i++)
        if (strcmp(map->pairs[i].key->s, key) == 0)
            return &map->pairs[i];
    return NULL;
}

const struct ynode *sq_plan__get(const struct ynode *map, const char *key)
{
    const struct ypair *p = find_pair(map, key);
    return p ? p->val : NULL;
}

const struct ynode *sq_plan__get_key(const struct ynode *map, const char *key)
{
    const struct ypair *p = find_pair(map, key);
    return p ? p->key : NULL;
}

int sq_plan__want_map(struct ld *L, const struct ynode *n, const char *what)
{
    if (n->kind == Y_MAP)
        return 0;
    return sq_plan__fail(L, n, "expected %s, got %s", what, sq_plan__kind_name(n));
}

int sq_plan__check_keys(struct ld *L, const struct ynode *map, const char *const *allowed, size_t n)
{
    for (size_t i = 0; i < map->npairs; i++) {
        const struct ynode *k = map->pairs[i].key;
        bool ok = map == L->root && strncmp(k->s, "x-", 2) == 0; /* extension keys: anchors */
        for (size_t j = 0; j < n && !ok; j++)
            ok = strcmp(k->s, allowed[j]) == 0;
        if (ok)
            continue;
        struct sq_suggest s;
        sq_suggest_init(&s, k->s, k->len);
        for (size_t j = 0; j < n; j++)
            sq_suggest_try(&s, allowed[j]);
        if (s.best)
            return sq_plan__fail(L, k, "unknown key '%.60s' (did you mean '%s'?)", k->s, s.best);
        char list[200] = "";
        size_t used = 0;
        for (size_t j = 0; j < n && used < sizeof(list); j++)
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", j ? ", " : "",
                                     allowed[j]);
        return sq_plan__fail(L, k, "unknown key '%.60s' (expected one of: %s)", k->s, list);
    }
    return 0;
}

int sq_plan__want_keys(struct ld *L, const struct ynode *n, const char *what,
                       const char *const *allowed, size_t nallowed)
{
    int rc = sq_plan__want_map(L, n, what);
    return rc < 0 ? rc : sq_plan__check_keys(L, n, allowed, nallowed);
}

int sq_plan__want_scalar(struct ld *L, const struct ynode *n, const char *what)
{
    if (n->kind == Y_SCALAR)
        return 0;
    return sq_plan__fail(L, n, "expected %s, got %s", what, sq_plan__kind_name(n));
}

int sq_plan__want_string(struct ld *L, const struct ynode *n, const char *what)
{
    int rc = sq_plan__want_scalar(L, n, what);
    if (rc == 0 && n->len == 0)
        return sq_plan__fail(L, n, "expected %s, got an empty value", what);
    if (rc == 0 && strlen(n->s) != n->len)
        return sq_plan__fail(L, n, "expected %s without NUL bytes", what);
    return rc;
}

int sq_plan__get_duration(struct ld *L, const struct ynode *n, int64_t *out)
{
    static const char what[] = "a duration like 500ms or 2s";
    int rc = sq_plan__want_string(L, n, what);
    if (rc < 0)
        return rc;
    bool has_unit = isalpha((unsigned char)n->s[n->len - 1]) || strcmp(n->s, "0") == 0;
    if (!has_unit || sq_parse_duration(n->s, SQ_NS_PER_S, out) < 0)
        return sq_plan__fail(L, n, "expected %s, got '%.60s'", what, n->s);
    return 0;
}

int sq_plan__get_u64(struct ld *L, const struct ynode *n, uint64_t min, uint64_t max, uint64_t *out)
{
    int rc = sq_plan__want_scalar(L, n, "a whole number");
    if (rc < 0)
        return rc;
    if (n->style != YS_PLAIN || sq_parse_u64(n->s, min, max, 0, out) < 0)
        return sq_plan__fail(L, n, "expected a whole number from %llu to %llu, got '%.60s'",
                             (unsigned long long)min, (unsigned long long)max, n->s);
    return 0;
}

int sq_plan__get_number(struct ld *L, const struct ynode *n, double min, double *out)
{
    int rc = sq_plan__want_scalar(L, n, "a number");
    if (rc < 0)
        return rc;
    char *end = NULL;
    double v = n->len ? strtod(n->s, &end) : 0;
    if (n->style != YS_PLAIN || !end || *end || !isfinite(v) || v < min ||
        isspace((unsigned char)n->s[0]))
        return sq_plan__fail(L, n, "expected a number >= %g, got '%.60s'", min, n->s);
    *out = v;
    return 0;
}

bool sq_plan__is_true(const char *s)
{
    return !strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE");
}

bool sq_plan__is_false(const char *s)
{
    return !strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE");
}

bool sq_plan__is_null(const struct ynode *n)
{
    return n->kind == Y_SCALAR && n->style == YS_PLAIN &&
           (n->len == 0 || !strcmp(n->s, "null") || !strcmp(n->s, "Null") ||
            !strcmp(n->s, "NULL") || !strcmp(n->s, "~"));
}

int sq_plan__get_bool(struct ld *L, const struct ynode *n, bool *out)
{
    int rc = sq_plan__want_scalar(L, n, "true or false");
    if (rc < 0)
        return rc;
    if (n->style == YS_PLAIN && sq_plan__is_true(n->s))
        *out = true;
    else if (n->style == YS_PLAIN && sq_plan__is_false(n->s))
        *out = false;
    else
        return sq_plan__fail(L, n, "expected true or false, got '%.60s'", n->s);
    return 0;
}

bool sq_plan__is_ident(const char *s)
{
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (const char *c = s + 1; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_'))
            return false;
    return true;
}

bool sq_plan__is_token(const char *s)
{
    if (!*s)
        return false;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (!(isalnum(*c) || strchr("!#$%&'*+-.^_`|~", *c)))
            return false;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* YAML numbers (the core schema) as JSON                                                     */

static bool json_number_syntax(const char *s)
{
    const char *p = s;
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (isdigit((unsigned char)*p))
            p++;
    else
        return false;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
    }
    return *p == '\0';
}

int sq_plan__yaml_number(const struct ynode *n, char *out, size_t outlen)
{
    if (n->kind != Y_SCALAR || n->style != YS_PLAIN || n->len == 0 || n->len > 40 || n->raw)
        return 0;
    const char *s = n->s;
    if (json_number_syntax(s)) {
        snprintf(out, outlen, "%s", s);
        return 1;
    }
    const char *b = (*s == '+' || *s == '-') ? s + 1 : s;
    if (!strcmp(b, ".inf") || !strcmp(b, ".Inf") || !strcmp(b, ".INF") || !strcmp(s, ".nan") ||
        !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))
        return -1;
    char *end;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'o') && s[2]) {
        unsigned long long v = strtoull(s + 2, &end, s[1] == 'x' ? 16 : 8);
        if (*end || s[2] == '-' || s[2] == '+' || isspace((unsigned char)s[2]))
            return 0;
        snprintf(out, outlen, "%llu", v);
        return 1;
    }
    /* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
    const char *p = b;
    size_t digits = 0;
    while (isdigit((unsigned char)*p))
        p++, digits++;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p))
            p++, digits++;
    }
    if (!digits)
        return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit((unsigned char)*p))
            return 0;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p)
        return 0;
    double v = strtod(s, &end);
    if (*end || !isfinite(v))
        return -1;
    if (v == floor(v) && fabs(v) < 9e15)
        snprintf(out, outlen, "%.0f", v);
    else
        snprintf(out, outlen, "%.17g", v);
    return 1;
}
