/* plan/load.c - the plan loader: YAML text -> a position-carrying node tree -> struct sq_plan.
 *
 * Two stages. First libfyaml's event parser builds a small tree of our own (scalars, mappings,
 * sequences) in which every node keeps its 1-based line:col: libfyaml's document API has no
 * position for mappings and sequences, and a plan error must always name file:line:col.
 * Anchors, aliases and merge keys (<<) are resolved while the tree is built. libfyaml's own
 * diagnostics are collected (never printed) and the first error becomes the load error.
 *
 * Second, a walk over the tree checks every key against the schema of docs/plans.md (an unknown
 * key is an error that suggests the nearest valid one) and compiles what the workers share:
 * templates, extractors, checks, executors, thresholds, feeders. The first problem stops the
 * load with one error: where (file:line:col), which key (a path such as
 * scenarios.shop.flow[0].request.url) and what was expected. Everything allocated for a half-
 * built plan hangs off the plan itself, so sq_plan_free() cleans up after any failure.
 */
#include "plan/plan.h"

#include <ctype.h>
#include <errno.h>
#include <libfyaml.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/text.h"

#define MAX_PLAN_BYTES (16u << 20) /* a plan file */
#define MAX_FILE_BODY  (64u << 20) /* a `file:` body */
#define MAX_JSON_BODY  (4u << 20)  /* a serialised `json:` body (aliases can multiply it) */
#define MAX_VUS        1000000
#define MAX_ITERATIONS 1000000000000ull

/* ------------------------------------------------------------------------------------------ */
/* The node tree                                                                               */

enum ykind { Y_SCALAR, Y_MAP, Y_SEQ };

struct ynode;

struct ypair {
    struct ynode *key, *val;
};

struct ynode {
    enum ykind kind;
    struct sq_loc loc; /* 1-based; 0:0 when libfyaml gave no position (an empty value) */
    size_t pos;        /* byte offset of the node in the source (valid when loc.line) */
    /* Y_SCALAR */
    char *s; /* NUL-terminated */
    size_t len;
    enum fy_scalar_style style;
    bool raw; /* tagged !raw */
    /* Y_MAP */
    struct ypair *pairs;
    size_t npairs;
    /* Y_SEQ */
    struct ynode **items;
    size_t nitems;
};

struct anchor {
    char *name;
    struct ynode *node;
};

/* The loader's state. Tree memory is one list of blocks freed together. */
struct ld {
    struct sq_plan *p;
    struct sq_plan_error *err;
    const char *src;
    size_t src_len;
    char dir[4096]; /* the plan file's directory, "" for the working directory */
    char path[256]; /* the key path being compiled */
    size_t path_len;
    void **blocks;
    size_t nblocks, capblocks;
    struct anchor *anchors;
    size_t nanchors, capanchors;
    /* the target origin, for absolute step URLs */
    char scheme[8];
    char host[256];
    unsigned port;
    /* defaults */
    const struct ynode *def_headers;
    const struct ynode *root;
};

static void *ld_alloc(struct ld *L, size_t size)
{
    if (L->nblocks == L->capblocks) {
        size_t cap = L->capblocks ? L->capblocks * 2 : 64;
        void **nb = realloc(L->blocks, cap * sizeof(*nb));
        if (!nb)
            return NULL;
        L->blocks = nb;
        L->capblocks = cap;
    }
    void *b = calloc(1, size ? size : 1);
    if (b)
        L->blocks[L->nblocks++] = b;
    return b;
}

static char *ld_strndup(struct ld *L, const char *s, size_t n)
{
    char *d = ld_alloc(L, n + 1);
    if (d && n)
        memcpy(d, s, n);
    return d;
}

static void ld_dispose(struct ld *L)
{
    for (size_t i = 0; i < L->nblocks; i++)
        free(L->blocks[i]);
    free(L->blocks);
    free(L->anchors);
}

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                      */

static size_t path_push(struct ld *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends to the key path; returns the length to restore with path_pop(). */
static size_t path_push(struct ld *L, const char *fmt, ...)
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

static size_t path_key(struct ld *L, const char *key)
{
    return L->path_len ? path_push(L, ".%s", key) : path_push(L, "%s", key);
}

static void path_pop(struct ld *L, size_t mark)
{
    L->path_len = mark;
    L->path[mark] = '\0';
}

static int fail_at(struct ld *L, struct sq_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_at(struct ld *L, struct sq_loc loc, const char *fmt, ...)
{
    struct sq_plan_error *e = L->err;
    if (!loc.line) { /* never happens for a node with a position; keep errors locatable */
        loc.line = 1;
        loc.col = 1;
    }
    if (e) {
        e->loc = loc;
        snprintf(e->key, sizeof(e->key), "%.95s", L->path);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
    }
    return -SQ_EPARSE;
}

#define fail(L, node, ...) fail_at((L), (node)->loc, __VA_ARGS__)

/* ------------------------------------------------------------------------------------------ */
/* YAML -> tree                                                                                */

struct frame {
    struct ynode *node;
    struct ynode **items; /* a mapping: key, value, key, value... */
    size_t n, cap;
    char *anchor;
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

static int frame_add(struct frame *f, struct ynode *n)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        struct ynode **ni = realloc(f->items, cap * sizeof(*ni));
        if (!ni)
            return -ENOMEM;
        f->items = ni;
        f->cap = cap;
    }
    f->items[f->n++] = n;
    return 0;
}

static int add_anchor(struct ld *L, const char *name, struct ynode *n)
{
    if (L->nanchors == L->capanchors) {
        size_t cap = L->capanchors ? L->capanchors * 2 : 8;
        struct anchor *na = realloc(L->anchors, cap * sizeof(*na));
        if (!na)
            return -ENOMEM;
        L->anchors = na;
        L->capanchors = cap;
    }
    L->anchors[L->nanchors].name = (char *)name;
    L->anchors[L->nanchors++].node = n;
    return 0;
}

static struct ynode *find_anchor(struct ld *L, const char *name, size_t len)
{
    for (size_t i = L->nanchors; i-- > 0;) /* the latest definition wins */
        if (strlen(L->anchors[i].name) == len && memcmp(L->anchors[i].name, name, len) == 0)
            return L->anchors[i].node;
    return NULL;
}

static bool pairs_have(const struct ypair *pairs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(pairs[i].key->s, key) == 0)
            return true;
    return false;
}

/* Closes a mapping: keys must be scalars and unique; merge keys (<<) bring in the pairs of the
 * merged mapping(s) that the mapping does not set itself. */
static int finish_map(struct ld *L, struct frame *f)
{
    struct ynode *m = f->node;
    size_t npairs = f->n / 2, nmerged = 0;
    for (size_t i = 0; i < npairs; i++) {
        struct ynode *k = f->items[2 * i], *v = f->items[2 * i + 1];
        if (k->kind != Y_SCALAR)
            return fail(L, k, "a mapping key must be a plain string");
        if (k->style == FYSS_PLAIN && strcmp(k->s, "<<") == 0) {
            if (v->kind == Y_MAP) {
                nmerged += v->npairs;
            } else if (v->kind == Y_SEQ) {
                for (size_t j = 0; j < v->nitems; j++) {
                    if (v->items[j]->kind != Y_MAP)
                        return fail(L, v->items[j], "a merge key (<<) takes mappings");
                    nmerged += v->items[j]->npairs;
                }
            } else {
                return fail(L, v, "a merge key (<<) takes a mapping or a list of mappings");
            }
            continue;
        }
        for (size_t j = 0; j < i; j++) {
            struct ynode *o = f->items[2 * j];
            if (strcmp(o->s, k->s) == 0 && !(o->style == FYSS_PLAIN && strcmp(o->s, "<<") == 0))
                return fail(L, k, "duplicate key '%s' (first at line %u)", k->s, o->loc.line);
        }
    }
    if (npairs + nmerged > SIZE_MAX / sizeof(struct ypair) / 2)
        return -ENOMEM;
    m->pairs = ld_alloc(L, (npairs + nmerged) * sizeof(struct ypair));
    if (!m->pairs)
        return -ENOMEM;
    for (size_t i = 0; i < npairs; i++) {
        struct ynode *k = f->items[2 * i];
        if (k->style == FYSS_PLAIN && strcmp(k->s, "<<") == 0)
            continue;
        m->pairs[m->npairs].key = k;
        m->pairs[m->npairs++].val = f->items[2 * i + 1];
    }
    for (size_t i = 0; i < npairs; i++) {
        struct ynode *k = f->items[2 * i], *v = f->items[2 * i + 1];
        if (!(k->style == FYSS_PLAIN && strcmp(k->s, "<<") == 0))
            continue;
        size_t nsrc = v->kind == Y_MAP ? 1 : v->nitems;
        for (size_t s = 0; s < nsrc; s++) {
            const struct ynode *src = v->kind == Y_MAP ? v : v->items[s];
            for (size_t j = 0; j < src->npairs; j++) {
                if (pairs_have(m->pairs, m->npairs, src->pairs[j].key->s))
                    continue; /* the mapping's own keys, then earlier merges, win */
                m->pairs[m->npairs++] = src->pairs[j];
            }
        }
    }
    return 0;
}

static int finish_seq(struct ld *L, struct frame *f)
{
    struct ynode *s = f->node;
    s->items = ld_alloc(L, f->n * sizeof(*s->items));
    if (!s->items)
        return -ENOMEM;
    if (f->n)
        memcpy(s->items, f->items, f->n * sizeof(*s->items));
    s->nitems = f->n;
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
    char *out = ld_alloc(L, end - pos + 1);
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
        n->style = FYSS_DOUBLE_QUOTED; /* a string, whatever it looks like */
        return 0;
    }
    if (!scalar && ((tl == 21 && memcmp(t, "tag:yaml.org,2002:map", 21) == 0) ||
                    (tl == 21 && memcmp(t, "tag:yaml.org,2002:seq", 21) == 0)))
        return 0;
    return fail(L, n, "unsupported tag '%.*s' (squall knows !!str, and !raw in json bodies)",
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
            return fail_at(L, loc, "the plan is not UTF-8 text (byte 0x%02X)", s[i]);
        if (n == 1 &&
            ((s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') || s[i] == 0x7f))
            return fail_at(L, loc, "control character 0x%02X in the plan", s[i]);
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
        return fail_at(L, loc, "YAML syntax error: %s", de->msg ? de->msg : "malformed YAML");
    }
    struct sq_loc loc = {1, 1};
    return fail_at(L, loc, "YAML syntax error");
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

/* Pass 1: the YAML syntax alone. libfyaml 0.7 leaks the text of a scalar token fetched with
 * fy_token_get_text() when the stream then fails (the parser still holds the token), so the
 * tree is built only from a stream known to parse. */
static int yaml_syntax(struct ld *L)
{
    struct fy_diag *diag = NULL;
    struct fy_parser *fyp = new_parser(L, &diag);
    if (!fyp)
        return -ENOMEM;
    struct fy_event *ev;
    while ((ev = fy_parser_parse(fyp)) != NULL)
        fy_parser_event_free(fyp, ev);
    int rc = fy_parser_get_stream_error(fyp) ? yaml_error(L, diag) : 0;
    fy_parser_destroy(fyp);
    fy_diag_destroy(diag);
    return rc;
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
        switch (ev->type) {
        case FYET_DOCUMENT_START:
            if (++docs > 1) {
                rc = fail_at(L, mark_loc(m), "a plan is one YAML document (found a second '---')");
            }
            break;
        case FYET_MAPPING_START:
        case FYET_SEQUENCE_START: {
            bool map = ev->type == FYET_MAPPING_START;
            anchor = map ? ev->mapping_start.anchor : ev->sequence_start.anchor;
            tag = map ? ev->mapping_start.tag : ev->sequence_start.tag;
            if (depth == SQ_ARRAY_LEN(stack)) {
                rc = fail_at(L, mark_loc(m), "nested too deeply (at most %zu levels)",
                             SQ_ARRAY_LEN(stack));
                break;
            }
            n = ld_alloc(L, sizeof(*n));
            if (!n) {
                rc = -ENOMEM;
                break;
            }
            n->kind = map ? Y_MAP : Y_SEQ;
            n->loc = mark_loc(m);
            n->pos = m ? m->input_pos : 0;
            rc = check_tag(L, tag, n, false);
            if (rc < 0)
                break;
            struct frame *f = &stack[depth++];
            memset(f, 0, sizeof(*f));
            f->node = n;
            if (anchor) {
                size_t al;
                const char *a = fy_token_get_text(anchor, &al);
                f->anchor = a ? ld_strndup(L, a, al) : NULL;
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
            free(f->items);
            f->items = NULL;
            depth--;
            n = f->node;
            if (rc == 0 && f->anchor)
                rc = add_anchor(L, f->anchor, n);
            break;
        }
        case FYET_SCALAR: {
            n = ld_alloc(L, sizeof(*n));
            if (!n) {
                rc = -ENOMEM;
                break;
            }
            size_t len = 0;
            n->kind = Y_SCALAR;
            n->style = fy_token_scalar_style(ev->scalar.value);
            if (n->style == FYSS_SINGLE_QUOTED && m && m->input_pos > 0 &&
                m->input_pos <= L->src_len && L->src[m->input_pos - 1] == '\'') {
                n->s = single_quoted(L, m->input_pos, &len);
            } else {
                const char *t = fy_token_get_text(ev->scalar.value, &len);
                n->s = ld_strndup(L, t ? t : "", t ? len : 0);
                len = t ? len : 0;
            }
            n->len = len;
            n->loc = mark_loc(m);
            n->pos = m ? m->input_pos : 0;
            if (!n->s) {
                rc = -ENOMEM;
                break;
            }
            rc = check_tag(L, ev->scalar.tag, n, true);
            if (rc == 0 && ev->scalar.anchor) {
                size_t al;
                const char *a = fy_token_get_text(ev->scalar.anchor, &al);
                char *name = a ? ld_strndup(L, a, al) : NULL;
                rc = !name ? -ENOMEM : add_anchor(L, name, n);
            }
            break;
        }
        case FYET_ALIAS: {
            size_t al = 0;
            const char *a = fy_token_get_text(ev->alias.anchor, &al);
            n = a ? find_anchor(L, a, al) : NULL;
            if (!n)
                rc = fail_at(L, mark_loc(m), "unknown alias '*%.*s'", (int)(al > 60 ? 60 : al),
                             a ? a : "");
            break;
        }
        default:
            break;
        }
        fy_parser_event_free(fyp, ev);
        if (rc == 0 && n && n->loc.line == 0 &&
            !(depth > 0 && stack[depth - 1].node->kind == Y_MAP && stack[depth - 1].n % 2 == 1)) {
            n->loc = last_loc; /* an empty key or item: where the parser last was */
            n->pos = last_pos;
        }
        if (ev_has_mark) {
            last_loc = ev_loc;
            last_pos = ev_pos;
        }
        if (rc == 0 && n) {
            if (depth == 0) {
                top = n;
            } else {
                struct frame *f = &stack[depth - 1];
                /* an empty value has no position: give it its key's */
                if (f->node->kind == Y_MAP && f->n % 2 == 1 && n->loc.line == 0) {
                    n->loc = f->items[f->n - 1]->loc;
                    n->pos = f->items[f->n - 1]->pos;
                }
                rc = frame_add(f, n);
            }
        }
    }
    if (rc == 0 && fy_parser_get_stream_error(fyp))
        rc = yaml_error(L, diag);
    while (depth > 0)
        free(stack[--depth].items);
    fy_parser_destroy(fyp);
    fy_diag_destroy(diag);
    if (rc < 0)
        return rc;
    if (!top || (top->kind == Y_SCALAR && top->style == FYSS_PLAIN && top->len == 0)) {
        struct sq_loc loc = {1, 1};
        return fail_at(L, loc, "the plan is empty (expected a mapping with target and scenarios)");
    }
    *root = top;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Typed access to nodes                                                                       */

static const char *kind_name(const struct ynode *n)
{
    return n->kind == Y_MAP ? "a mapping" : n->kind == Y_SEQ ? "a list" : "a scalar";
}

static const struct ynode *get(const struct ynode *map, const char *key)
{
    for (size_t i = 0; i < map->npairs; i++)
        if (strcmp(map->pairs[i].key->s, key) == 0)
            return map->pairs[i].val;
    return NULL;
}

static const struct ynode *get_key(const struct ynode *map, const char *key)
{
    for (size_t i = 0; i < map->npairs; i++)
        if (strcmp(map->pairs[i].key->s, key) == 0)
            return map->pairs[i].key;
    return NULL;
}

static int want_map(struct ld *L, const struct ynode *n, const char *what)
{
    if (n->kind == Y_MAP)
        return 0;
    return fail(L, n, "expected %s, got %s", what, kind_name(n));
}

/* Every key of map must be in allowed[0, n). */
static int check_keys(struct ld *L, const struct ynode *map, const char *const *allowed, size_t n)
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
            return fail(L, k, "unknown key '%.60s' (did you mean '%s'?)", k->s, s.best);
        char list[200] = "";
        size_t used = 0;
        for (size_t j = 0; j < n && used < sizeof(list); j++)
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", j ? ", " : "",
                                     allowed[j]);
        return fail(L, k, "unknown key '%.60s' (expected one of: %s)", k->s, list);
    }
    return 0;
}

static int want_scalar(struct ld *L, const struct ynode *n, const char *what)
{
    if (n->kind == Y_SCALAR)
        return 0;
    return fail(L, n, "expected %s, got %s", what, kind_name(n));
}

static int want_string(struct ld *L, const struct ynode *n, const char *what)
{
    int rc = want_scalar(L, n, what);
    if (rc == 0 && n->len == 0)
        return fail(L, n, "expected %s, got an empty value", what);
    if (rc == 0 && strlen(n->s) != n->len)
        return fail(L, n, "expected %s without NUL bytes", what);
    return rc;
}

static int get_duration(struct ld *L, const struct ynode *n, int64_t *out)
{
    static const char what[] = "a duration like 500ms or 2s";
    int rc = want_string(L, n, what);
    if (rc < 0)
        return rc;
    bool has_unit = isalpha((unsigned char)n->s[n->len - 1]) || strcmp(n->s, "0") == 0;
    if (!has_unit || sq_parse_duration(n->s, SQ_NS_PER_S, out) < 0)
        return fail(L, n, "expected %s, got '%.60s'", what, n->s);
    return 0;
}

static int get_u64(struct ld *L, const struct ynode *n, uint64_t min, uint64_t max, uint64_t *out)
{
    int rc = want_scalar(L, n, "a whole number");
    if (rc < 0)
        return rc;
    if (n->style != FYSS_PLAIN || sq_parse_u64(n->s, min, max, 0, out) < 0)
        return fail(L, n, "expected a whole number from %llu to %llu, got '%.60s'",
                    (unsigned long long)min, (unsigned long long)max, n->s);
    return 0;
}

static int get_number(struct ld *L, const struct ynode *n, double min, double *out)
{
    int rc = want_scalar(L, n, "a number");
    if (rc < 0)
        return rc;
    char *end = NULL;
    double v = n->len ? strtod(n->s, &end) : 0;
    if (n->style != FYSS_PLAIN || !end || *end || !isfinite(v) || v < min ||
        isspace((unsigned char)n->s[0]))
        return fail(L, n, "expected a number >= %g, got '%.60s'", min, n->s);
    *out = v;
    return 0;
}

static bool is_true(const char *s)
{
    return !strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE");
}

static bool is_false(const char *s)
{
    return !strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE");
}

static bool is_null(const struct ynode *n)
{
    return n->style == FYSS_PLAIN &&
           (n->len == 0 || !strcmp(n->s, "null") || !strcmp(n->s, "Null") ||
            !strcmp(n->s, "NULL") || !strcmp(n->s, "~"));
}

static int get_bool(struct ld *L, const struct ynode *n, bool *out)
{
    int rc = want_scalar(L, n, "true or false");
    if (rc < 0)
        return rc;
    if (n->style == FYSS_PLAIN && is_true(n->s))
        *out = true;
    else if (n->style == FYSS_PLAIN && is_false(n->s))
        *out = false;
    else
        return fail(L, n, "expected true or false, got '%.60s'", n->s);
    return 0;
}

static bool is_ident(const char *s)
{
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (const char *c = s + 1; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_'))
            return false;
    return true;
}

static bool is_token(const char *s)
{
    if (!*s)
        return false;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (!(isalnum(*c) || strchr("!#$%&'*+-.^_`|~", *c)))
            return false;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* YAML numbers (the core schema) as JSON                                                      */

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

/* A plain scalar the YAML 1.2 core schema reads as a number: its JSON text into out (64 bytes).
 * Returns 1 (a number), 0 (not a number), -1 (inf or nan: no JSON for it). */
static int yaml_number(const struct ynode *n, char *out, size_t outlen)
{
    if (n->style != FYSS_PLAIN || n->len == 0 || n->len > 40 || n->raw)
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

/* ------------------------------------------------------------------------------------------ */
/* Templates                                                                                   */

struct rctx {
    struct ld *L;
    size_t nvars;                      /* plan variables visible */
    const struct sq_plan_scenario *sc; /* NULL: no slots, no feeders */
    char msg[160];                     /* set when a name is unknown */
    bool have_msg;
};

static void resolve_name(void *ud, const char *name, size_t len, struct sq_tmpl_ref *out)
{
    struct rctx *R = ud;
    const struct sq_plan *p = R->L->p;
    out->kind = SQ_TMPL_REF_UNKNOWN;
    for (size_t i = 0; i < R->nvars; i++) {
        if (strlen(p->vars[i].name) == len && memcmp(p->vars[i].name, name, len) == 0) {
            out->kind = SQ_TMPL_REF_STATIC;
            out->value = p->vars[i].value;
            out->value_len = strlen(p->vars[i].value);
            return;
        }
    }
    if (R->sc) {
        for (uint32_t i = 0; i < R->sc->nvars; i++) {
            if (strlen(R->sc->vars[i]) == len && memcmp(R->sc->vars[i], name, len) == 0) {
                out->kind = SQ_TMPL_REF_VAR;
                out->index = i;
                return;
            }
        }
    }
    const char *dot = memchr(name, '.', len);
    char shown[64];
    snprintf(shown, sizeof(shown), "%.*s", (int)(len > 60 ? 60 : len), name);
    char tail[80];
    if (dot && R->sc) {
        size_t fl = (size_t)(dot - name);
        for (size_t i = 0; i < p->nfeeders; i++) {
            const struct sq_plan_feeder *f = &p->feeders[i];
            if (strlen(f->name) != fl || memcmp(f->name, name, fl) != 0)
                continue;
            const char *col = dot + 1;
            size_t cl = len - fl - 1;
            int c = sq_feeder_column(f->data, col, cl);
            if (c >= 0) {
                out->kind = SQ_TMPL_REF_FEED;
                out->feeder = (uint32_t)i;
                out->column = (uint32_t)c;
                return;
            }
            struct sq_suggest s;
            sq_suggest_init(&s, col, cl);
            for (size_t j = 0; j < f->data->ncolumns; j++)
                sq_suggest_try(&s, f->data->columns[j]);
            char cols[80] = "";
            size_t used = 0;
            for (size_t j = 0; j < f->data->ncolumns && used < sizeof(cols); j++)
                used += (size_t)snprintf(cols + used, sizeof(cols) - used, "%s%s", j ? ", " : "",
                                         f->data->columns[j]);
            snprintf(R->msg, sizeof(R->msg), "feeder '%s' has no column '%.*s'%s (columns: %s)",
                     f->name, (int)(cl > 40 ? 40 : cl), col,
                     sq_suggest_tail(&s, tail, sizeof(tail)), cols);
            R->have_msg = true;
            return;
        }
        struct sq_suggest s;
        sq_suggest_init(&s, name, fl);
        for (size_t i = 0; i < p->nfeeders; i++)
            sq_suggest_try(&s, p->feeders[i].name);
        if (s.best) {
            snprintf(R->msg, sizeof(R->msg), "unknown feeder '%.*s' in '%s' (did you mean '%s'?)",
                     (int)(fl > 40 ? 40 : fl), name, shown, s.best);
            R->have_msg = true;
            return;
        }
    }
    /* Suggest among every name the template could use here. */
    struct sq_suggest s;
    sq_suggest_init(&s, name, len);
    for (size_t i = 0; i < R->nvars; i++)
        sq_suggest_try(&s, p->vars[i].name);
    char full[8][128];
    size_t nfull = 0;
    if (R->sc) {
        for (uint32_t i = 0; i < R->sc->nvars; i++)
            sq_suggest_try(&s, R->sc->vars[i]);
        for (size_t i = 0; i < p->nfeeders; i++) {
            for (size_t j = 0; j < p->feeders[i].data->ncolumns; j++) {
                char cand[128];
                snprintf(cand, sizeof(cand), "%s.%s", p->feeders[i].name,
                         p->feeders[i].data->columns[j]);
                if (sq_suggest_offer(&s, cand, strlen(cand))) {
                    size_t slot = nfull < 8 ? nfull++ : 7;
                    memcpy(full[slot], cand, sizeof(cand));
                    s.best = full[slot]; /* cand is about to go */
                }
            }
        }
    }
    snprintf(R->msg, sizeof(R->msg), "unknown name '%s'%s", shown,
             sq_suggest_tail(&s, tail, sizeof(tail)));
    R->have_msg = true;
}

/* Where byte off of a scalar's value is in the file: exact while the value and the source agree
 * (no escapes or folding before it, one line), else the scalar's own position. libfyaml marks a
 * quoted scalar at its first character, after the quote. */
static struct sq_loc value_loc(const struct ld *L, const struct ynode *n, size_t off)
{
    struct sq_loc loc = n->loc;
    if (!loc.line || n->kind != Y_SCALAR || off > n->len)
        return loc;
    if (n->style == FYSS_LITERAL || n->style == FYSS_FOLDED)
        return loc;
    if (n->pos + off > L->src_len || memcmp(L->src + n->pos, n->s, off) != 0 ||
        memchr(n->s, '\n', off))
        return loc;
    uint32_t cols = 0;
    for (size_t i = 0; i < off; i++)
        cols += ((unsigned char)n->s[i] & 0xc0) != 0x80; /* characters, as libfyaml counts */
    loc.col += cols;
    return loc;
}

/* Compiles src (from node n, whose value the offsets refer to when exact) into *out. */
static int compile_tmpl(struct ld *L, const struct ynode *n, bool exact, const char *src,
                        size_t len, enum sq_tmpl_escape esc, struct rctx *R, struct sq_tmpl **out)
{
    struct sq_tmpl_error te = {0};
    R->have_msg = false;
    int rc = sq_tmpl_compile(src, len, esc, resolve_name, R, out, &te);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0) {
        struct sq_loc loc = exact ? value_loc(L, n, te.offset) : n->loc;
        return fail_at(L, loc, "%s", R->have_msg ? R->msg : te.msg);
    }
    return 0;
}

static int compile_scalar(struct ld *L, const struct ynode *n, enum sq_tmpl_escape esc,
                          struct rctx *R, struct sq_tmpl **out)
{
    return compile_tmpl(L, n, true, n->s, n->len, esc, R, out);
}

/* Compiles a scalar just to report its template errors at their exact place. */
static int precheck(struct ld *L, const struct ynode *n, struct rctx *R)
{
    if (!strstr(n->s, "{{"))
        return 0;
    struct sq_tmpl *t = NULL;
    int rc = compile_scalar(L, n, SQ_TMPL_ESC_NONE, R, &t);
    sq_tmpl_free(t);
    return rc;
}

/* Walks s: literal text through lit(), each "{{...}}" copied as it is. */
static int split_tags(struct sq_buf *b, const char *s, size_t n,
                      int (*lit)(struct sq_buf *, const char *, size_t))
{
    size_t i = 0;
    while (i < n) {
        const char *open = NULL;
        for (size_t j = i; j + 1 < n; j++)
            if (s[j] == '{' && s[j + 1] == '{') {
                open = s + j;
                break;
            }
        size_t end = open ? (size_t)(open - s) : n;
        int rc = lit(b, s + i, end - i);
        if (rc < 0 || !open)
            return rc;
        const char *close = NULL;
        for (size_t j = end + 2; j + 1 < n; j++)
            if (s[j] == '}' && s[j + 1] == '}') {
                close = s + j;
                break;
            }
        size_t stop = close ? (size_t)(close - s) + 2 : n;
        rc = sq_buf_append(b, s + end, stop - end);
        if (rc < 0)
            return rc;
        i = stop;
    }
    return 0;
}

static int lit_json(struct sq_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int rc;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rc = sq_buf_append(b, e, 2);
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', sq_hex_lower[c >> 4], sq_hex_lower[c & 15]};
            rc = sq_buf_append(b, e, 6);
        } else {
            rc = sq_buf_append(b, &s[i], 1);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int lit_form(struct sq_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int rc;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            rc = sq_buf_append(b, &s[i], 1);
        } else if (c == ' ') {
            rc = sq_buf_append(b, "+", 1);
        } else {
            char e[3] = {'%', sq_hex_upper[c >> 4], sq_hex_upper[c & 15]};
            rc = sq_buf_append(b, e, 3);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Serialises a YAML value into JSON text whose strings may hold "{{...}}" tags. */
static int to_json(struct ld *L, const struct ynode *n, struct rctx *R, struct sq_buf *b, int depth)
{
    int rc;
    if (depth > 64)
        return fail(L, n, "json body nested too deeply (at most 64 levels)");
    if (b->len > MAX_JSON_BODY)
        return fail(L, n, "json body larger than %u MiB", MAX_JSON_BODY >> 20);
    if (n->kind == Y_MAP || n->kind == Y_SEQ) {
        bool map = n->kind == Y_MAP;
        rc = sq_buf_append(b, map ? "{" : "[", 1);
        size_t count = map ? n->npairs : n->nitems;
        for (size_t i = 0; rc == 0 && i < count; i++) {
            if (i)
                rc = sq_buf_append(b, ",", 1);
            if (rc == 0 && map) {
                const struct ynode *k = n->pairs[i].key;
                size_t mark = path_key(L, k->s);
                rc = precheck(L, k, R);
                if (rc == 0)
                    rc = sq_buf_append(b, "\"", 1);
                if (rc == 0)
                    rc = split_tags(b, k->s, k->len, lit_json);
                if (rc == 0)
                    rc = sq_buf_append(b, "\":", 2);
                if (rc == 0)
                    rc = to_json(L, n->pairs[i].val, R, b, depth + 1);
                if (rc == 0)
                    path_pop(L, mark);
            } else if (rc == 0) {
                size_t mark = path_push(L, "[%zu]", i);
                rc = to_json(L, n->items[i], R, b, depth + 1);
                if (rc == 0)
                    path_pop(L, mark);
            }
        }
        return rc == 0 ? sq_buf_append(b, map ? "}" : "]", 1) : rc;
    }
    rc = precheck(L, n, R);
    if (rc < 0)
        return rc;
    if (n->raw)
        return sq_buf_append(b, n->s, n->len);
    if (n->style == FYSS_PLAIN) {
        if (is_null(n))
            return sq_buf_append(b, "null", 4);
        if (is_true(n->s))
            return sq_buf_append(b, "true", 4);
        if (is_false(n->s))
            return sq_buf_append(b, "false", 5);
        char num[64];
        int k = yaml_number(n, num, sizeof(num));
        if (k < 0)
            return fail(L, n, "'%s' has no JSON form (quote it to send a string)", n->s);
        if (k > 0)
            return sq_buf_append(b, num, strlen(num));
    }
    rc = sq_buf_append(b, "\"", 1);
    if (rc == 0)
        rc = split_tags(b, n->s, n->len, lit_json);
    return rc == 0 ? sq_buf_append(b, "\"", 1) : rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                       */

static int plan_relative(struct ld *L, const struct ynode *n, char *out, size_t outlen)
{
    int k = n->s[0] == '/' || !L->dir[0] ? snprintf(out, outlen, "%s", n->s)
                                         : snprintf(out, outlen, "%s/%s", L->dir, n->s);
    if (k < 0 || (size_t)k >= outlen)
        return fail(L, n, "path too long");
    return 0;
}

static int read_file(const char *path, size_t max, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    struct sq_buf b = {0};
    int rc = 0;
    for (;;) {
        rc = sq_buf_reserve(&b, 65536);
        if (rc < 0)
            break;
        size_t got = fread(b.p + b.len, 1, 65536, f);
        b.len += got;
        if (b.len > max) {
            rc = -SQ_ETOOBIG;
            break;
        }
        if (got < 65536) {
            if (ferror(f))
                rc = -EIO;
            break;
        }
    }
    fclose(f);
    if (rc == 0)
        rc = sq_buf_append(&b, "", 1);
    if (rc < 0) {
        sq_buf_dispose(&b);
        return rc;
    }
    *out = b.p;
    *len = b.len - 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Top level: vars, target, defaults, data                                                     */

static int load_vars(struct ld *L, const struct ynode *n)
{
    struct sq_plan *p = L->p;
    int rc = want_map(L, n, "a mapping of variable names to values");
    if (rc < 0)
        return rc;
    p->vars = calloc(n->npairs ? n->npairs : 1, sizeof(*p->vars));
    if (!p->vars)
        return -ENOMEM;
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        if (!is_ident(k->s))
            return fail(L, k,
                        "'%.60s' is not a variable name (letters, digits and '_', not starting "
                        "with a digit)",
                        k->s);
        size_t mark = path_key(L, k->s);
        if ((rc = want_scalar(L, v, "a text value")) < 0)
            return rc;
        struct rctx R = {.L = L, .nvars = i};
        struct sq_tmpl *t = NULL;
        if ((rc = compile_scalar(L, v, SQ_TMPL_ESC_NONE, &R, &t)) < 0)
            return rc;
        const char *s;
        size_t len;
        if (!sq_tmpl_static(t, &s, &len)) {
            sq_tmpl_free(t);
            return fail(L, v,
                        "a plan variable is fixed text: only other variables and $env.NAME may "
                        "appear in it");
        }
        p->vars[i].name = strdup(k->s);
        p->vars[i].value = strndup(s, len);
        p->nvars = i + 1;
        sq_tmpl_free(t);
        if (!p->vars[i].name || !p->vars[i].value)
            return -ENOMEM;
        path_pop(L, mark);
    }
    return 0;
}

/* scheme://host[:port][/] with nothing after: the origin every step's url is relative to. */
static bool parse_origin(const char *s, size_t len, char *scheme, char *host, size_t hostlen,
                         unsigned *port)
{
    const char *sep = NULL;
    for (size_t i = 0; i + 2 < len; i++)
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') {
            sep = s + i;
            break;
        }
    if (!sep)
        return false;
    size_t sl = (size_t)(sep - s);
    if (sl == 4 && strncasecmp(s, "http", 4) == 0)
        strcpy(scheme, "http");
    else if (sl == 5 && strncasecmp(s, "https", 5) == 0)
        strcpy(scheme, "https");
    else
        return false;
    const char *h = sep + 3, *end = s + len;
    if (end > h && end[-1] == '/')
        end--;
    const char *hend;
    if (h < end && *h == '[') {
        hend = memchr(h, ']', (size_t)(end - h));
        if (!hend)
            return false;
        for (const char *c = h + 1; c < hend; c++)
            if (!isxdigit((unsigned char)*c) && *c != ':' && *c != '.')
                return false;
        hend++;
    } else {
        hend = h;
        while (hend < end && (isalnum((unsigned char)*hend) || strchr("-._~", *hend)))
            hend++;
    }
    size_t hl = (size_t)(hend - h);
    if (hl == 0 || hl >= hostlen)
        return false;
    for (size_t i = 0; i < hl; i++)
        host[i] = (char)tolower((unsigned char)h[i]);
    host[hl] = '\0';
    *port = strcmp(scheme, "https") == 0 ? 443 : 80;
    if (hend < end) {
        if (*hend != ':' || hend + 1 == end)
            return false;
        unsigned v = 0;
        for (const char *c = hend + 1; c < end; c++) {
            if (!isdigit((unsigned char)*c) || v > 6553)
                return false;
            v = v * 10 + (unsigned)(*c - '0');
        }
        if (v == 0 || v > 65535)
            return false;
        *port = v;
    }
    return true;
}

static int load_target(struct ld *L, const struct ynode *n)
{
    int rc = want_string(L, n, "a URL like http://127.0.0.1:8080");
    if (rc < 0)
        return rc;
    struct rctx R = {.L = L, .nvars = L->p->nvars};
    struct sq_tmpl *t = NULL;
    if ((rc = compile_scalar(L, n, SQ_TMPL_ESC_NONE, &R, &t)) < 0)
        return rc;
    const char *s;
    size_t len;
    if (!sq_tmpl_static(t, &s, &len)) {
        sq_tmpl_free(t);
        return fail(L, n,
                    "the target is fixed text: only plan variables and $env.NAME may "
                    "appear in it");
    }
    bool ok = parse_origin(s, len, L->scheme, L->host, sizeof(L->host), &L->port);
    if (!ok) {
        char shown[120];
        snprintf(shown, sizeof(shown), "%.*s", (int)(len > 100 ? 100 : len), s);
        const char *sl = strstr(shown, "://");
        bool has_path = sl && strchr(sl + 3, '/') && strchr(sl + 3, '/')[1];
        sq_tmpl_free(t);
        if (has_path)
            return fail(L, n,
                        "expected an origin like http://127.0.0.1:8080 without a path, got "
                        "'%s' (paths go in each step's url)",
                        shown);
        return fail(L, n,
                    "expected an http:// or https:// URL like http://127.0.0.1:8080, got '%s'",
                    shown);
    }
    if (len && s[len - 1] == '/')
        len--;
    L->p->target = strndup(s, len);
    sq_tmpl_free(t);
    return L->p->target ? 0 : -ENOMEM;
}

static int load_defaults(struct ld *L, const struct ynode *n)
{
    static const char *const keys[] = {"headers", "timeout"};
    int rc = want_map(L, n, "a mapping (headers, timeout)");
    if (rc == 0)
        rc = check_keys(L, n, keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    const struct ynode *v = get(n, "timeout");
    if (v) {
        size_t mark = path_key(L, "timeout");
        if ((rc = get_duration(L, v, &L->p->default_timeout_ns)) < 0)
            return rc;
        path_pop(L, mark);
    }
    v = get(n, "headers");
    if (v) {
        size_t mark = path_key(L, "headers");
        if ((rc = want_map(L, v, "a mapping of header names to values")) < 0)
            return rc;
        path_pop(L, mark);
        L->def_headers = v;
    }
    return 0;
}

static int load_data(struct ld *L, const struct ynode *n)
{
    struct sq_plan *p = L->p;
    int rc = want_map(L, n, "a mapping of feeder names to { csv: FILE } or { json: FILE }");
    if (rc < 0)
        return rc;
    p->feeders = calloc(n->npairs ? n->npairs : 1, sizeof(*p->feeders));
    if (!p->feeders)
        return -ENOMEM;
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        static const char *const keys[] = {"csv", "json", "mode"};
        if (!is_ident(k->s))
            return fail(L, k, "'%.60s' is not a feeder name (letters, digits and '_')", k->s);
        size_t mark = path_key(L, k->s);
        if ((rc = want_map(L, v, "a mapping like { csv: users.csv, mode: per-vu }")) < 0 ||
            (rc = check_keys(L, v, keys, SQ_ARRAY_LEN(keys))) < 0)
            return rc;
        const struct ynode *csv = get(v, "csv"), *json = get(v, "json"), *mode = get(v, "mode");
        if (!csv == !json)
            return fail(L, v,
                        csv ? "a feeder has one of csv or json, not both"
                            : "missing key 'csv' or 'json' (the feeder's file)");
        struct sq_plan_feeder *f = &p->feeders[i];
        p->nfeeders = i + 1;
        f->mode = SQ_FEED_SEQUENTIAL;
        if (mode) {
            size_t m2 = path_key(L, "mode");
            if ((rc = want_string(L, mode, "sequential, per-vu or random")) < 0)
                return rc;
            if (!strcmp(mode->s, "sequential"))
                f->mode = SQ_FEED_SEQUENTIAL;
            else if (!strcmp(mode->s, "per-vu"))
                f->mode = SQ_FEED_PER_VU;
            else if (!strcmp(mode->s, "random"))
                f->mode = SQ_FEED_RANDOM;
            else {
                struct sq_suggest s;
                char tail[64];
                sq_suggest_init(&s, mode->s, mode->len);
                sq_suggest_try(&s, "sequential");
                sq_suggest_try(&s, "per-vu");
                sq_suggest_try(&s, "random");
                return fail(L, mode, "expected sequential, per-vu or random, got '%.40s'%s",
                            mode->s, sq_suggest_tail(&s, tail, sizeof(tail)));
            }
            path_pop(L, m2);
        }
        const struct ynode *file = csv ? csv : json;
        size_t m2 = path_key(L, csv ? "csv" : "json");
        if ((rc = want_string(L, file, "a file path")) < 0)
            return rc;
        char full[4096];
        if ((rc = plan_relative(L, file, full, sizeof(full))) < 0)
            return rc;
        f->name = strdup(k->s);
        f->path = strdup(full);
        if (!f->name || !f->path)
            return -ENOMEM;
        char ferr[256] = "";
        rc = csv ? sq_feeder_load_csv(full, &f->data, ferr, sizeof(ferr))
                 : sq_feeder_load_json(full, &f->data, ferr, sizeof(ferr));
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            return fail(L, file, "%s", ferr[0] ? ferr : sq_strerror(rc));
        if (f->data->ncolumns == 0 || f->data->nrows == 0)
            return fail(L, file, "%s: no data rows", full);
        path_pop(L, m2);
        path_pop(L, mark);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Scenarios: executors                                                                        */

enum {
    F_VUS = 1 << 0,
    F_DURATION = 1 << 1,
    F_ITERATIONS = 1 << 2,
    F_RATE = 1 << 3,
    F_TIME_UNIT = 1 << 4,
    F_START_RATE = 1 << 5,
    F_START_VUS = 1 << 6,
    F_PREALLOC = 1 << 7,
    F_MAX_VUS = 1 << 8,
    F_STAGES = 1 << 9,
    F_MAX_DURATION = 1 << 10,
    F_PACING = 1 << 11,
};

static const char *const exec_keys[] = {"vus",      "duration",  "iterations",  "rate",
                                        "timeUnit", "startRate", "startVUs",    "preAllocatedVUs",
                                        "maxVUs",   "stages",    "maxDuration", "pacing"};

static const struct {
    unsigned allowed, required;
} exec_fields[SQ_EXEC__COUNT] = {
    [SQ_EXEC_CONSTANT_VUS] = {F_VUS | F_DURATION | F_PACING, F_DURATION},
    [SQ_EXEC_RAMPING_VUS] = {F_START_VUS | F_STAGES | F_PACING, F_STAGES},
    [SQ_EXEC_CONSTANT_ARRIVAL_RATE] = {F_RATE | F_TIME_UNIT | F_DURATION | F_PREALLOC | F_MAX_VUS,
                                       F_RATE | F_DURATION | F_PREALLOC},
    [SQ_EXEC_RAMPING_ARRIVAL_RATE] = {F_START_RATE | F_TIME_UNIT | F_STAGES | F_PREALLOC |
                                          F_MAX_VUS,
                                      F_STAGES | F_PREALLOC},
    [SQ_EXEC_PER_VU_ITERATIONS] = {F_VUS | F_ITERATIONS | F_MAX_DURATION | F_PACING, 0},
    [SQ_EXEC_SHARED_ITERATIONS] = {F_VUS | F_ITERATIONS | F_MAX_DURATION | F_PACING, 0},
};

static const char *const scenario_common[] = {"executor", "flow", "startTime", "gracefulStop",
                                              "cookies"};

static int load_stages(struct ld *L, const struct ynode *n, struct sq_exec *e, bool vus)
{
    int rc;
    if (n->kind == Y_SCALAR) {
        const char *why;
        if (sq_exec_parse_stages(e, n->s, &why) < 0)
            return fail(L, n, "%s", why);
        return 0;
    }
    if (n->kind != Y_SEQ)
        return fail(L, n, "expected a list of { duration, target }, got %s", kind_name(n));
    if (n->nitems == 0)
        return fail(L, n, "at least one stage is needed");
    if (n->nitems > SQ_EXEC_MAX_STAGES)
        return fail(L, n->items[SQ_EXEC_MAX_STAGES], "at most %d stages", SQ_EXEC_MAX_STAGES);
    static const char *const keys[] = {"duration", "target"};
    for (size_t i = 0; i < n->nitems; i++) {
        const struct ynode *s = n->items[i];
        size_t mark = path_push(L, "[%zu]", i);
        if ((rc = want_map(L, s, "a stage like { duration: 30s, target: 100 }")) < 0 ||
            (rc = check_keys(L, s, keys, 2)) < 0)
            return rc;
        const struct ynode *d = get(s, "duration"), *t = get(s, "target");
        if (!d || !t)
            return fail(L, s, "missing key '%s' (a stage is { duration, target })",
                        d ? "target" : "duration");
        size_t m2 = path_key(L, "duration");
        if ((rc = get_duration(L, d, &e->stages[i].duration_ns)) < 0)
            return rc;
        path_pop(L, m2);
        m2 = path_key(L, "target");
        if (vus) {
            uint64_t v;
            if ((rc = get_u64(L, t, 0, MAX_VUS, &v)) < 0)
                return rc;
            e->stages[i].target = (double)v;
        } else if ((rc = get_number(L, t, 0, &e->stages[i].target)) < 0) {
            return rc;
        }
        path_pop(L, m2);
        path_pop(L, mark);
    }
    e->nstages = (uint32_t)n->nitems;
    return 0;
}

/* Maps sq_exec_prepare's complaint ("duration: must be positive") onto the plan key it is
 * about, in the plan's spelling. */
static int exec_error(struct ld *L, const struct ynode *sc_key, const struct ynode *sc,
                      const struct sq_exec *e, const char *why)
{
    static const struct {
        const char *prefix, *key;
    } map[] = {
        {"max-in-flight", "maxVUs"},
        {"preAllocatedVUs", "preAllocatedVUs"},
        {"timeUnit", "timeUnit"},
        {"startRate", "startRate"},
        {"vus", "vus"},
        {"duration", "duration"},
        {"rate", "rate"},
        {"stages", "stages"},
        {"iterations", "iterations"},
        {"pacing", "pacing"},
    };
    const char *key = NULL, *rest = why;
    for (size_t i = 0; i < SQ_ARRAY_LEN(map); i++) {
        size_t pl = strlen(map[i].prefix);
        if (strncmp(why, map[i].prefix, pl) == 0) {
            key = map[i].key;
            rest = why + pl;
            break;
        }
    }
    if (key && !strcmp(key, "vus") && sq_exec_is_open(e))
        key = "preAllocatedVUs";
    const struct ynode *at = key ? get(sc, key) : NULL;
    if (!key)
        return fail(L, sc_key, "%s", why);
    if (!strncmp(rest, " (connections)", 14))
        rest += 14;
    if (*rest == ':')
        rest++;
    while (*rest == ' ')
        rest++;
    path_key(L, key);
    if (!strcmp(key, "maxVUs"))
        rest = "must be at least preAllocatedVUs";
    return fail(L, at ? at : sc_key, "%s", rest);
}

static int load_executor(struct ld *L, const struct ynode *key, const struct ynode *n,
                         struct sq_plan_scenario *sc)
{
    int rc;
    const struct ynode *ex = get(n, "executor");
    if (!ex)
        return fail(L, key,
                    "missing key 'executor' (one of constant-vus, ramping-vus, "
                    "constant-arrival-rate, ramping-arrival-rate, per-vu-iterations, "
                    "shared-iterations)");
    size_t mark = path_key(L, "executor");
    if ((rc = want_string(L, ex, "an executor name")) < 0)
        return rc;
    int kind = sq_exec_kind_from_name(ex->s);
    if (kind < 0) {
        struct sq_suggest s;
        char tail[96];
        sq_suggest_init(&s, ex->s, ex->len);
        for (int i = 0; i < SQ_EXEC__COUNT; i++)
            sq_suggest_try(&s, sq_exec_name((enum sq_exec_kind)i));
        if (s.best)
            return fail(L, ex, "unknown executor '%.60s'%s", ex->s,
                        sq_suggest_tail(&s, tail, sizeof(tail)));
        return fail(L, ex,
                    "unknown executor '%.60s' (expected constant-vus, ramping-vus, "
                    "constant-arrival-rate, ramping-arrival-rate, per-vu-iterations or "
                    "shared-iterations)",
                    ex->s);
    }
    path_pop(L, mark);
    unsigned allowed = exec_fields[kind].allowed, required = exec_fields[kind].required;

    /* keys: the common ones plus the executor's own */
    const char *keys[SQ_ARRAY_LEN(scenario_common) + SQ_ARRAY_LEN(exec_keys)];
    size_t nkeys = 0;
    for (size_t i = 0; i < SQ_ARRAY_LEN(scenario_common); i++)
        keys[nkeys++] = scenario_common[i];
    for (size_t i = 0; i < SQ_ARRAY_LEN(exec_keys); i++)
        if (allowed & (1u << i))
            keys[nkeys++] = exec_keys[i];
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key;
        for (size_t j = 0; j < SQ_ARRAY_LEN(exec_keys); j++) {
            if (strcmp(k->s, exec_keys[j]) == 0 && !(allowed & (1u << j))) {
                char list[160] = "";
                size_t used = 0;
                for (size_t x = 0; x < SQ_ARRAY_LEN(exec_keys) && used < sizeof(list); x++)
                    if (allowed & (1u << x))
                        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
                                                 used ? ", " : "", exec_keys[x]);
                return fail(L, k, "'%s' does not apply to %s (it takes %s)", k->s,
                            sq_exec_name((enum sq_exec_kind)kind), list);
            }
        }
    }
    if ((rc = check_keys(L, n, keys, nkeys)) < 0)
        return rc;
    for (size_t j = 0; j < SQ_ARRAY_LEN(exec_keys); j++)
        if ((required & (1u << j)) && !get(n, exec_keys[j]))
            return fail(L, key, "missing key '%s' (%s needs it)", exec_keys[j],
                        sq_exec_name((enum sq_exec_kind)kind));

    struct sq_exec *e = &sc->exec;
    memset(e, 0, sizeof(*e));
    e->kind = (enum sq_exec_kind)kind;
    e->vus = 1;
    e->start_vus = 1;
    e->iterations = 1;
    e->graceful_stop_ns = 30 * SQ_NS_PER_S; /* k6's default */
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        const char *name = k->s;
        uint64_t u;
        size_t m2 = path_key(L, name);
        rc = 0;
        if (!strcmp(name, "vus") || !strcmp(name, "preAllocatedVUs")) {
            if ((rc = get_u64(L, v, 1, MAX_VUS, &u)) == 0)
                e->vus = (uint32_t)u;
        } else if (!strcmp(name, "startVUs")) {
            if ((rc = get_u64(L, v, 0, MAX_VUS, &u)) == 0)
                e->start_vus = (uint32_t)u;
        } else if (!strcmp(name, "maxVUs")) {
            if ((rc = get_u64(L, v, 1, 10 * (uint64_t)MAX_VUS, &u)) == 0)
                e->max_in_flight = u;
        } else if (!strcmp(name, "iterations")) {
            if ((rc = get_u64(L, v, 1, MAX_ITERATIONS, &u)) == 0)
                e->iterations = u;
        } else if (!strcmp(name, "duration")) {
            rc = get_duration(L, v, &e->duration_ns);
        } else if (!strcmp(name, "maxDuration")) {
            rc = get_duration(L, v, &e->max_duration_ns);
        } else if (!strcmp(name, "gracefulStop")) {
            rc = get_duration(L, v, &e->graceful_stop_ns);
        } else if (!strcmp(name, "pacing")) {
            rc = get_duration(L, v, &e->pacing_ns);
        } else if (!strcmp(name, "timeUnit")) {
            rc = get_duration(L, v, &e->time_unit_ns);
            if (rc == 0 && e->time_unit_ns <= 0)
                rc = fail(L, v, "timeUnit must be longer than 0");
        } else if (!strcmp(name, "startTime")) {
            rc = get_duration(L, v, &sc->start_ns);
        } else if (!strcmp(name, "rate")) {
            rc = get_number(L, v, 0, &e->rate);
        } else if (!strcmp(name, "startRate")) {
            rc = get_number(L, v, 0, &e->start_rate);
        } else if (!strcmp(name, "stages")) {
            rc = load_stages(L, v, e, kind == SQ_EXEC_RAMPING_VUS);
        } else if (!strcmp(name, "cookies")) {
            rc = get_bool(L, v, &sc->cookies);
        }
        if (rc < 0)
            return rc;
        path_pop(L, m2);
    }
    if (sq_exec_is_open(e)) {
        /* keep the schedule's arithmetic inside 64 bits: at most 10^15 arrivals */
        double unit = (double)(e->time_unit_ns ? e->time_unit_ns : SQ_NS_PER_S), total = 0;
        if (kind == SQ_EXEC_CONSTANT_ARRIVAL_RATE) {
            total = e->rate * (double)e->duration_ns / unit;
        } else {
            double from = e->start_rate;
            for (uint32_t i = 0; i < e->nstages; i++) {
                total += (from + e->stages[i].target) / 2 * (double)e->stages[i].duration_ns / unit;
                from = e->stages[i].target;
            }
        }
        if (!(total <= 1e15))
            return fail(L, key, "the schedule has %.3g iterations (at most 1e15: lower the rate)",
                        total);
    }
    const char *why = NULL;
    if (sq_exec_prepare(e, &why) < 0)
        return exec_error(L, key, n, e, why ? why : "invalid executor settings");
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Scenarios: steps                                                                            */

static int add_slot(struct sq_plan_scenario *sc, const char *name, uint32_t *index)
{
    for (uint32_t i = 0; i < sc->nvars; i++)
        if (!strcmp(sc->vars[i], name)) {
            *index = i;
            return 0;
        }
    char **nv = realloc(sc->vars, (sc->nvars + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    sc->vars = nv;
    sc->vars[sc->nvars] = strdup(name);
    if (!sc->vars[sc->nvars])
        return -ENOMEM;
    *index = sc->nvars++;
    return 0;
}

/* First pass over a flow: every extract key is a slot, in order of first appearance. */
static int collect_slots(struct ld *L, const struct ynode *flow, struct sq_plan_scenario *sc)
{
    int rc;
    for (size_t i = 0; i < flow->nitems; i++) {
        const struct ynode *st = flow->items[i];
        if (st->kind != Y_MAP)
            continue; /* reported by the second pass */
        const struct ynode *ex = get(st, "extract");
        if (!ex || ex->kind != Y_MAP)
            continue;
        size_t mark = path_push(L, ".flow[%zu].extract", i);
        for (size_t j = 0; j < ex->npairs; j++) {
            const struct ynode *k = ex->pairs[j].key;
            if (!is_ident(k->s))
                return fail(L, k,
                            "'%.60s' is not a variable name (letters, digits and '_', not "
                            "starting with a digit)",
                            k->s);
            for (size_t v = 0; v < L->p->nvars; v++)
                if (!strcmp(L->p->vars[v].name, k->s))
                    return fail(L, k,
                                "'%s' is already a plan variable (vars): extract into another "
                                "name",
                                k->s);
            uint32_t idx;
            if ((rc = add_slot(sc, k->s, &idx)) < 0)
                return rc;
        }
        path_pop(L, mark);
    }
    return 0;
}

static int find_header(const struct sq_plan_request *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++)
        if (!strcasecmp(r->headers[i].name, name))
            return (int)i;
    return -1;
}

static int load_headers(struct ld *L, const struct ynode *h, struct sq_plan_request *r,
                        struct rctx *R, bool from_defaults)
{
    int rc;
    for (size_t i = 0; i < h->npairs; i++) {
        const struct ynode *k = h->pairs[i].key, *v = h->pairs[i].val;
        if (!is_token(k->s))
            return fail(L, k, "'%.60s' is not a header name (letters, digits and -!#$%%&'*+.^_`|~)",
                        k->s);
        size_t mark = path_key(L, k->s);
        if ((rc = want_scalar(L, v, "a header value")) < 0)
            return rc;
        if (strpbrk(v->s, "\r\n") || strlen(v->s) != v->len)
            return fail(L, v, "a header value cannot contain line breaks or NUL bytes");
        for (size_t j = 0; j < i; j++) /* names differing only in case are one header */
            if (!strcasecmp(h->pairs[j].key->s, k->s))
                return fail(L, k, "header '%s' is set twice (first at line %u)", k->s,
                            h->pairs[j].key->loc.line);
        int at = from_defaults ? -1 : find_header(r, k->s);
        struct sq_tmpl *t = NULL;
        if ((rc = compile_scalar(L, v, SQ_TMPL_ESC_NONE, R, &t)) < 0)
            return rc;
        if (at >= 0) { /* the step's header replaces the default's, in its place */
            char *nn = strdup(k->s);
            if (!nn) {
                sq_tmpl_free(t);
                return -ENOMEM;
            }
            free(r->headers[at].name);
            r->headers[at].name = nn;
            sq_tmpl_free(r->headers[at].value);
            r->headers[at].value = t;
        } else {
            struct sq_plan_header *nh = &r->headers[r->nheaders];
            nh->name = strdup(k->s);
            nh->value = t;
            r->nheaders++;
            if (!nh->name)
                return -ENOMEM;
        }
        path_pop(L, mark);
    }
    return 0;
}

/* url: "/path?q" (a template) or an absolute URL on the target's origin. */
static int load_url(struct ld *L, const struct ynode *n, struct sq_plan_request *r, struct rctx *R)
{
    int rc = want_string(L, n, "a path like /items or a URL on the target");
    if (rc < 0)
        return rc;
    r->url_src = strdup(n->s);
    if (!r->url_src)
        return -ENOMEM;
    const char *s = n->s;
    size_t skip = 0;
    if (s[0] != '/') {
        const char *sep = strstr(s, "://");
        if (!sep || (strncasecmp(s, "http://", 7) && strncasecmp(s, "https://", 8)))
            return fail(L, n,
                        "expected a path starting with '/' or an http(s):// URL on the "
                        "target, got '%.60s'",
                        s);
        const char *end = sep + 3;
        while (*end && *end != '/' && *end != '?')
            end++;
        char scheme[8], host[256];
        unsigned port;
        size_t olen = (size_t)(end - s);
        if (memmem(s, olen, "{{", 2))
            return fail(L, n,
                        "the scheme, host and port of a url are fixed text (templates go "
                        "in the path)");
        if (!parse_origin(s, olen, scheme, host, sizeof(host), &port))
            return fail(L, n, "malformed URL '%.60s'", s);
        if (strcmp(scheme, L->scheme) || strcmp(host, L->host) || port != L->port)
            return fail(L, n,
                        "url '%.*s' is not on the target %s (a plan talks to one origin: use a "
                        "path like /x)",
                        (int)(olen > 60 ? 60 : olen), s, L->p->target);
        skip = olen;
    }
    const char *path = s + skip;
    size_t plen = n->len - skip;
    char buf[8];
    struct sq_buf tmp = {0};
    if (plen == 0 || path[0] == '?') { /* "http://h:1" or "http://h:1?x" */
        buf[0] = '/';
        if ((rc = sq_buf_append(&tmp, buf, 1)) < 0 || (rc = sq_buf_append(&tmp, path, plen)) < 0) {
            sq_buf_dispose(&tmp);
            return rc;
        }
        path = tmp.p;
        plen = tmp.len;
    }
    for (size_t i = 0; i < plen; i++) {
        if ((unsigned char)path[i] <= 0x20 || path[i] == 0x7f) {
            bool in_tag = false; /* blanks inside {{ }} are fine */
            for (size_t j = 0; j + 1 < i; j++) {
                if (path[j] == '{' && path[j + 1] == '{')
                    in_tag = true;
                else if (path[j] == '}' && path[j + 1] == '}')
                    in_tag = false;
            }
            if (!in_tag) {
                sq_buf_dispose(&tmp);
                return fail_at(L, value_loc(L, n, skip + i),
                               "a url cannot contain spaces or control characters (write %%20)");
            }
        }
    }
    if (tmp.p) {
        rc = compile_tmpl(L, n, false, path, plen, SQ_TMPL_ESC_NONE, R, &r->url);
    } else {
        /* offsets in the template are offsets in the value, shifted by the origin */
        struct sq_tmpl_error te = {0};
        R->have_msg = false;
        rc = sq_tmpl_compile(path, plen, SQ_TMPL_ESC_NONE, resolve_name, R, &r->url, &te);
        if (rc < 0 && rc != -ENOMEM)
            rc = fail_at(L, value_loc(L, n, skip + te.offset), "%s", R->have_msg ? R->msg : te.msg);
    }
    sq_buf_dispose(&tmp);
    return rc;
}

static int load_body(struct ld *L, const struct ynode *req, struct sq_plan_request *r,
                     struct rctx *R)
{
    static const char *const kinds[] = {"body", "json", "form", "file"};
    const struct ynode *which = NULL, *wkey = NULL;
    int rc;
    for (size_t i = 0; i < SQ_ARRAY_LEN(kinds); i++) {
        const struct ynode *v = get(req, kinds[i]);
        if (!v)
            continue;
        if (which)
            return fail(L, get_key(req, kinds[i]),
                        "a request has one body: '%s' and '%s' are both set", wkey->s, kinds[i]);
        which = v;
        wkey = get_key(req, kinds[i]);
    }
    if (!which)
        return 0;
    size_t mark = path_key(L, wkey->s);
    if (!strcmp(wkey->s, "body")) {
        if ((rc = want_scalar(L, which, "a text body")) < 0)
            return rc;
        r->body_kind = SQ_BODY_TEXT;
        rc = compile_scalar(L, which, SQ_TMPL_ESC_NONE, R, &r->body);
    } else if (!strcmp(wkey->s, "json")) {
        if (which->kind == Y_SCALAR)
            return fail(L, which,
                        "expected a mapping or a list (the JSON document); for JSON text use "
                        "body: with a Content-Type header");
        struct sq_buf b = {0};
        rc = to_json(L, which, R, &b, 0);
        if (rc == 0) {
            r->body_kind = SQ_BODY_JSON;
            r->content_type = "application/json";
            rc = compile_tmpl(L, which, false, b.p, b.len, SQ_TMPL_ESC_JSON, R, &r->body);
        }
        sq_buf_dispose(&b);
    } else if (!strcmp(wkey->s, "form")) {
        if ((rc = want_map(L, which, "a mapping of form fields")) < 0)
            return rc;
        struct sq_buf b = {0};
        for (size_t i = 0; rc == 0 && i < which->npairs; i++) {
            const struct ynode *k = which->pairs[i].key, *v = which->pairs[i].val;
            size_t m2 = path_key(L, k->s);
            rc = want_scalar(L, v, "a form value");
            if (rc == 0)
                rc = precheck(L, v, R);
            if (rc == 0 && i)
                rc = sq_buf_append(&b, "&", 1);
            if (rc == 0)
                rc = lit_form(&b, k->s, k->len);
            if (rc == 0)
                rc = sq_buf_append(&b, "=", 1);
            if (rc == 0 && !is_null(v))
                rc = split_tags(&b, v->s, v->len, lit_form);
            if (rc == 0)
                path_pop(L, m2);
        }
        if (rc == 0) {
            r->body_kind = SQ_BODY_FORM;
            r->content_type = "application/x-www-form-urlencoded";
            rc =
                compile_tmpl(L, which, false, b.p ? b.p : "", b.len, SQ_TMPL_ESC_FORM, R, &r->body);
        }
        sq_buf_dispose(&b);
    } else {
        if ((rc = want_string(L, which, "a file path")) < 0)
            return rc;
        char full[4096];
        if ((rc = plan_relative(L, which, full, sizeof(full))) < 0)
            return rc;
        char *data = NULL;
        size_t len = 0;
        rc = read_file(full, MAX_FILE_BODY, &data, &len);
        if (rc == -SQ_ETOOBIG)
            return fail(L, which, "%s: larger than %u MiB", full, MAX_FILE_BODY >> 20);
        if (rc < 0 && rc != -ENOMEM)
            return fail(L, which, "%s: %s", full, sq_strerror(rc));
        if (rc == 0) {
            r->body_kind = SQ_BODY_FILE;
            r->body_file = strdup(which->s);
            rc = sq_tmpl_new_literal(data, len, &r->body);
            if (rc == 0 && !r->body_file)
                rc = -ENOMEM;
        }
        free(data);
    }
    if (rc == 0)
        path_pop(L, mark);
    return rc;
}

static int load_request(struct ld *L, const struct ynode *n, struct sq_plan_request *r,
                        struct rctx *R)
{
    static const char *const keys[] = {"method", "url",  "headers", "body",
                                       "json",   "form", "file",    "timeout"};
    int rc = want_map(L, n, "a mapping (method, url, headers, body...)");
    if (rc == 0)
        rc = check_keys(L, n, keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    const struct ynode *v = get(n, "method");
    size_t mark;
    if (v) {
        mark = path_key(L, "method");
        if ((rc = want_string(L, v, "an HTTP method like GET or POST")) < 0)
            return rc;
        bool upper = true;
        for (const char *c = v->s; *c; c++)
            upper = upper && ((*c >= 'A' && *c <= 'Z') || *c == '-' || *c == '_');
        if (!upper) {
            char up[32];
            size_t i = 0;
            for (; i + 1 < sizeof(up) && v->s[i]; i++)
                up[i] = (char)toupper((unsigned char)v->s[i]);
            up[i] = '\0';
            if (is_token(v->s))
                return fail(L, v, "expected an upper-case method, got '%.30s' (did you mean '%s'?)",
                            v->s, up);
            return fail(L, v, "expected an HTTP method like GET or POST, got '%.30s'", v->s);
        }
        r->method = strdup(v->s);
        path_pop(L, mark);
    } else {
        r->method = strdup("GET");
    }
    if (!r->method)
        return -ENOMEM;
    v = get(n, "url");
    if (!v)
        return fail(L, n, "missing key 'url' (a path like /items, resolved against the target)");
    mark = path_key(L, "url");
    if ((rc = load_url(L, v, r, R)) < 0)
        return rc;
    path_pop(L, mark);

    size_t nh = (L->def_headers ? L->def_headers->npairs : 0);
    const struct ynode *h = get(n, "headers");
    if (h) {
        mark = path_key(L, "headers");
        if ((rc = want_map(L, h, "a mapping of header names to values")) < 0)
            return rc;
        path_pop(L, mark);
        nh += h->npairs;
    }
    r->headers = calloc(nh ? nh : 1, sizeof(*r->headers));
    if (!r->headers)
        return -ENOMEM;
    if (L->def_headers) {
        /* the defaults compile against this scenario's names; errors point into defaults */
        char saved[sizeof(L->path)];
        size_t saved_len = L->path_len;
        memcpy(saved, L->path, sizeof(saved));
        path_pop(L, 0);
        path_key(L, "defaults.headers");
        rc = load_headers(L, L->def_headers, r, R, true);
        if (rc < 0)
            return rc;
        memcpy(L->path, saved, sizeof(saved));
        L->path_len = saved_len;
    }
    if (h) {
        mark = path_key(L, "headers");
        if ((rc = load_headers(L, h, r, R, false)) < 0)
            return rc;
        path_pop(L, mark);
    }
    if ((rc = load_body(L, n, r, R)) < 0)
        return rc;
    r->timeout_ns = L->p->default_timeout_ns;
    v = get(n, "timeout");
    if (v) {
        mark = path_key(L, "timeout");
        if ((rc = get_duration(L, v, &r->timeout_ns)) < 0)
            return rc;
        path_pop(L, mark);
    }
    return 0;
}

static int load_extract(struct ld *L, const struct ynode *n, struct sq_plan_step *st,
                        struct sq_plan_scenario *sc)
{
    int rc = want_map(L, n, "a mapping of variable names to { json | regex | header }");
    if (rc < 0)
        return rc;
    st->extract = calloc(n->npairs ? n->npairs : 1, sizeof(*st->extract));
    st->extract_src = calloc(n->npairs ? n->npairs : 1, sizeof(*st->extract_src));
    if (!st->extract || !st->extract_src)
        return -ENOMEM;
    static const char *const keys[] = {"json", "regex", "header"};
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        size_t mark = path_key(L, k->s);
        if ((rc = want_map(L, v, "{ json: PATH }, { regex: PATTERN } or { header: NAME }")) < 0 ||
            (rc = check_keys(L, v, keys, SQ_ARRAY_LEN(keys))) < 0)
            return rc;
        if (v->npairs != 1)
            return fail(L, v, "an extractor has exactly one of json, regex or header");
        const struct ynode *what = v->pairs[0].key, *arg = v->pairs[0].val;
        size_t m2 = path_key(L, what->s);
        if ((rc = want_string(L, arg,
                              !strcmp(what->s, "json")    ? "a JSON path like $.token"
                              : !strcmp(what->s, "regex") ? "a regular expression"
                                                          : "a header name")) < 0)
            return rc;
        char eerr[256] = "";
        struct sq_extractor *e = &st->extract[st->nextract];
        if (!strcmp(what->s, "json"))
            rc = sq_extractor_init_json(e, arg->s, eerr, sizeof(eerr));
        else if (!strcmp(what->s, "regex"))
            rc = sq_extractor_init_regex(e, arg->s, eerr, sizeof(eerr));
        else if (!is_token(arg->s))
            return fail(L, arg, "'%.60s' is not a header name", arg->s);
        else
            rc = sq_extractor_init_header(e, arg->s, eerr, sizeof(eerr));
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            return fail(L, arg, "%s", eerr[0] ? eerr : "invalid extractor");
        st->extract_src[st->nextract] = strdup(arg->s);
        st->nextract++;
        uint32_t idx = 0;
        if ((rc = add_slot(sc, k->s, &idx)) < 0 || !st->extract_src[st->nextract - 1])
            return rc < 0 ? rc : -ENOMEM;
        e->var = idx;
        if (sq_extractor_needs_body(e))
            st->needs_body = true;
        if (e->kind == SQ_EXTRACT_HEADER)
            st->needs_headers = true;
        path_pop(L, m2);
        path_pop(L, mark);
    }
    return 0;
}

static struct sq_check *check_slot(struct sq_plan_step *st, size_t *cap)
{
    if (st->nchecks == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        struct sq_check *v = realloc(st->checks, nc * sizeof(*v));
        if (!v)
            return NULL;
        st->checks = v;
        *cap = nc;
    }
    struct sq_check *c = &st->checks[st->nchecks];
    memset(c, 0, sizeof(*c));
    return c;
}

static int check_done(struct ld *L, const struct ynode *at, struct sq_plan_step *st, int rc,
                      const char *err)
{
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        return fail(L, at, "%s", err[0] ? err : "invalid check");
    struct sq_check *c = &st->checks[st->nchecks++];
    if (sq_check_needs_body(c))
        st->needs_body = true;
    if (sq_check_needs_headers(c))
        st->needs_headers = true;
    return 0;
}

static int status_code(struct ld *L, const struct ynode *n, int *out)
{
    uint64_t v;
    if (n->kind != Y_SCALAR || n->style != FYSS_PLAIN || sq_parse_u64(n->s, 100, 599, 0, &v) < 0)
        return fail(L, n, "expected an HTTP status from 100 to 599, got %s",
                    n->kind == Y_SCALAR ? n->s : kind_name(n));
    *out = (int)v;
    return 0;
}

static int load_json_checks(struct ld *L, const struct ynode *n, struct sq_plan_step *st,
                            size_t *cap)
{
    int rc = want_map(L, n, "a mapping of JSON paths to values or { op: value }");
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        size_t mark = path_key(L, k->s);
        size_t nops = v->kind == Y_MAP ? v->npairs : 1;
        if (v->kind == Y_SEQ)
            return fail(L, v, "expected a value or { op: value } (ops: eq ne gt ge lt le exists)");
        if (v->kind == Y_MAP && nops == 0)
            return fail(L, v, "expected { op: value } (ops: eq ne gt ge lt le exists)");
        for (size_t j = 0; j < nops; j++) {
            const struct ynode *ok = v->kind == Y_MAP ? v->pairs[j].key : NULL;
            const struct ynode *val = v->kind == Y_MAP ? v->pairs[j].val : v;
            int op = SQ_CMP_EQ;
            if (ok) {
                op = sq_cmp_op_parse(ok->s);
                if (op < 0) {
                    static const char *const opn[] = {"eq", "ne", "gt", "ge", "lt", "le", "exists"};
                    struct sq_suggest s;
                    char tail[64];
                    sq_suggest_init(&s, ok->s, ok->len);
                    for (size_t x = 0; x < SQ_ARRAY_LEN(opn); x++)
                        sq_suggest_try(&s, opn[x]);
                    return fail(L, ok, "unknown operator '%.30s'%s (ops: eq ne gt ge lt le exists)",
                                ok->s, sq_suggest_tail(&s, tail, sizeof(tail)));
                }
            }
            size_t m2 = ok ? path_key(L, ok->s) : L->path_len;
            if ((rc = want_scalar(L, val, "a scalar value")) < 0)
                return rc;
            char num[64];
            int isnum = yaml_number(val, num, sizeof(num));
            const char *text = isnum > 0 ? num : is_null(val) ? "null" : val->s;
            if (op == SQ_CMP_EXISTS) {
                bool b;
                if ((rc = get_bool(L, val, &b)) < 0)
                    return rc;
                text = b ? "true" : "false";
                isnum = 0;
            } else if (val->style == FYSS_PLAIN && (is_true(val->s) || is_false(val->s))) {
                text = is_true(val->s) ? "true" : "false";
            }
            if ((op == SQ_CMP_GT || op == SQ_CMP_GE || op == SQ_CMP_LT || op == SQ_CMP_LE) &&
                isnum <= 0)
                return fail(L, val, "'%s' compares numbers: expected a number, got '%.40s'",
                            sq_cmp_op_name((enum sq_cmp_op)op), val->s);
            char cerr[256] = "";
            struct sq_jpath *jp = NULL; /* a bad path is reported at the path */
            rc = sq_jpath_compile(k->s, k->len, &jp, cerr, sizeof(cerr));
            sq_jpath_free(jp);
            if (rc == -ENOMEM)
                return rc;
            if (rc < 0)
                return fail(L, k, "%s", cerr[0] ? cerr : "malformed JSON path");
            struct sq_check *c = check_slot(st, cap);
            if (!c)
                return -ENOMEM;
            rc = sq_check_init_json(c, k->s, (enum sq_cmp_op)op, text, isnum > 0, cerr,
                                    sizeof(cerr));
            if ((rc = check_done(L, val, st, rc, cerr)) < 0)
                return rc;
            path_pop(L, m2);
        }
        path_pop(L, mark);
    }
    return 0;
}

static int load_checks(struct ld *L, const struct ynode *n, struct sq_plan_step *st)
{
    static const char *const keys[] = {"status", "body_contains",  "json",
                                       "header", "header_matches", "duration"};
    int rc = want_map(L, n,
                      "a mapping (status, body_contains, json, header, header_matches, "
                      "duration)");
    if (rc == 0)
        rc = check_keys(L, n, keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    size_t cap = 0;
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        size_t mark = path_key(L, k->s);
        char cerr[256] = "";
        if (!strcmp(k->s, "status")) {
            int codes[16];
            size_t nc = 0;
            if (v->kind == Y_SEQ) {
                if (v->nitems == 0 || v->nitems > 16)
                    return fail(L, v, "expected 1 to 16 status codes");
                for (size_t j = 0; j < v->nitems; j++)
                    if ((rc = status_code(L, v->items[j], &codes[nc++])) < 0)
                        return rc;
            } else if ((rc = status_code(L, v, &codes[nc++])) < 0) {
                return rc;
            }
            struct sq_check *c = check_slot(st, &cap);
            if (!c)
                return -ENOMEM;
            rc = sq_check_init_status(c, codes, nc, cerr, sizeof(cerr));
            if ((rc = check_done(L, v, st, rc, cerr)) < 0)
                return rc;
        } else if (!strcmp(k->s, "body_contains")) {
            size_t cnt = v->kind == Y_SEQ ? v->nitems : 1;
            if (v->kind == Y_MAP || cnt == 0)
                return fail(L, v, "expected a text or a list of texts");
            for (size_t j = 0; j < cnt; j++) {
                const struct ynode *t = v->kind == Y_SEQ ? v->items[j] : v;
                if ((rc = want_string(L, t, "a text to find in the body")) < 0)
                    return rc;
                struct sq_check *c = check_slot(st, &cap);
                if (!c)
                    return -ENOMEM;
                rc = sq_check_init_body_contains(c, t->s, cerr, sizeof(cerr));
                if ((rc = check_done(L, t, st, rc, cerr)) < 0)
                    return rc;
            }
        } else if (!strcmp(k->s, "json")) {
            if ((rc = load_json_checks(L, v, st, &cap)) < 0)
                return rc;
        } else if (!strcmp(k->s, "header") || !strcmp(k->s, "header_matches")) {
            bool re = !strcmp(k->s, "header_matches");
            if ((rc = want_map(L, v,
                               re ? "a mapping of header names to regular expressions"
                                  : "a mapping of header names to values")) < 0)
                return rc;
            for (size_t j = 0; j < v->npairs; j++) {
                const struct ynode *hk = v->pairs[j].key, *hv = v->pairs[j].val;
                size_t m2 = path_key(L, hk->s);
                if (!is_token(hk->s))
                    return fail(L, hk, "'%.60s' is not a header name", hk->s);
                if ((rc = want_scalar(L, hv, re ? "a regular expression" : "a header value")) < 0)
                    return rc;
                struct sq_check *c = check_slot(st, &cap);
                if (!c)
                    return -ENOMEM;
                rc = re ? sq_check_init_header_match(c, hk->s, hv->s, cerr, sizeof(cerr))
                        : sq_check_init_header_eq(c, hk->s, hv->s, cerr, sizeof(cerr));
                if ((rc = check_done(L, hv, st, rc, cerr)) < 0)
                    return rc;
                path_pop(L, m2);
            }
        } else { /* duration */
            if ((rc = want_map(L, v, "{ lt: 200ms } (ops: lt le gt ge)")) < 0)
                return rc;
            if (v->npairs == 0)
                return fail(L, v, "expected { lt: 200ms } (ops: lt le gt ge)");
            for (size_t j = 0; j < v->npairs; j++) {
                const struct ynode *ok = v->pairs[j].key, *ov = v->pairs[j].val;
                int op = sq_cmp_op_parse(ok->s);
                if (op != SQ_CMP_LT && op != SQ_CMP_LE && op != SQ_CMP_GT && op != SQ_CMP_GE)
                    return fail(L, ok, "unknown operator '%.30s' for a duration (ops: lt le gt ge)",
                                ok->s);
                size_t m2 = path_key(L, ok->s);
                int64_t ns;
                if ((rc = get_duration(L, ov, &ns)) < 0)
                    return rc;
                struct sq_check *c = check_slot(st, &cap);
                if (!c)
                    return -ENOMEM;
                rc = sq_check_init_duration(c, (enum sq_cmp_op)op, ns / SQ_NS_PER_US, cerr,
                                            sizeof(cerr));
                if ((rc = check_done(L, ov, st, rc, cerr)) < 0)
                    return rc;
                path_pop(L, m2);
            }
        }
        path_pop(L, mark);
    }
    return 0;
}

static int load_step(struct ld *L, const struct ynode *n, size_t index, struct sq_plan_step *st,
                     struct sq_plan_scenario *sc)
{
    static const char *const keys[] = {"name", "request", "think", "extract", "check", "on_error"};
    int rc = want_map(L, n, "a step: a mapping with request (or think)");
    if (rc == 0)
        rc = check_keys(L, n, keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    st->loc = n->loc;
    const struct ynode *name = get(n, "name");
    if (name) {
        size_t mark = path_key(L, "name");
        if ((rc = want_string(L, name, "a step name")) < 0)
            return rc;
        for (size_t i = 0; i < index; i++)
            if (!strcmp(sc->steps[i].name, name->s))
                return fail(L, name, "duplicate step name '%.60s' (first at line %u)", name->s,
                            sc->steps[i].loc.line);
        st->name = strdup(name->s);
        path_pop(L, mark);
    } else {
        char def[32];
        snprintf(def, sizeof(def), "step %zu", index + 1);
        for (size_t i = 0; i < index; i++)
            if (!strcmp(sc->steps[i].name, def))
                return fail(L, n, "step %zu has no name and another step is named '%s'", index + 1,
                            def);
        st->name = strdup(def);
    }
    if (!st->name)
        return -ENOMEM;
    const struct ynode *think = get(n, "think");
    if (think) {
        for (size_t i = 0; i < n->npairs; i++) {
            const char *k = n->pairs[i].key->s;
            if (strcmp(k, "think") && strcmp(k, "name"))
                return fail(L, n->pairs[i].key,
                            "a think step has only name and think ('%s' belongs to a request "
                            "step)",
                            k);
        }
        st->kind = SQ_STEP_THINK;
        size_t mark = path_key(L, "think");
        if ((rc = get_duration(L, think, &st->think_ns)) < 0)
            return rc;
        path_pop(L, mark);
        return 0;
    }
    const struct ynode *req = get(n, "request");
    if (!req)
        return fail(L, n, "missing key 'request' (a step is a request or a think: DURATION)");
    st->kind = SQ_STEP_REQUEST;
    struct rctx R = {.L = L, .nvars = L->p->nvars, .sc = sc};
    size_t mark = path_key(L, "request");
    if ((rc = load_request(L, req, &st->req, &R)) < 0)
        return rc;
    path_pop(L, mark);
    const struct ynode *v = get(n, "extract");
    if (v) {
        mark = path_key(L, "extract");
        if ((rc = load_extract(L, v, st, sc)) < 0)
            return rc;
        path_pop(L, mark);
    }
    v = get(n, "check");
    if (v) {
        mark = path_key(L, "check");
        if ((rc = load_checks(L, v, st)) < 0)
            return rc;
        path_pop(L, mark);
    }
    v = get(n, "on_error");
    st->on_error = SQ_ON_ERROR_CONTINUE;
    if (v) {
        mark = path_key(L, "on_error");
        if ((rc = want_string(L, v, "continue or next_iteration")) < 0)
            return rc;
        if (!strcmp(v->s, "next_iteration"))
            st->on_error = SQ_ON_ERROR_NEXT_ITERATION;
        else if (strcmp(v->s, "continue")) {
            struct sq_suggest s;
            char tail[64];
            sq_suggest_init(&s, v->s, v->len);
            sq_suggest_try(&s, "continue");
            sq_suggest_try(&s, "next_iteration");
            return fail(L, v, "expected continue or next_iteration, got '%.40s'%s", v->s,
                        sq_suggest_tail(&s, tail, sizeof(tail)));
        }
        path_pop(L, mark);
    }
    return 0;
}

static bool scenario_name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '-' || *s == '.'))
            return false;
    return true;
}

static int load_scenario(struct ld *L, const struct ynode *key, const struct ynode *n,
                         struct sq_plan_scenario *sc)
{
    int rc;
    if (!scenario_name_ok(key->s))
        return fail(L, key, "'%.60s' is not a scenario name (letters, digits, '_', '-' and '.')",
                    key->s);
    sc->name = strdup(key->s);
    sc->loc = key->loc;
    if (!sc->name)
        return -ENOMEM;
    size_t mark = path_key(L, key->s);
    if ((rc = want_map(L, n, "a scenario: a mapping with executor and flow")) < 0)
        return rc;
    if ((rc = load_executor(L, key, n, sc)) < 0)
        return rc;
    const struct ynode *flow = get(n, "flow");
    if (!flow)
        return fail(L, key, "missing key 'flow' (the list of steps each iteration runs)");
    size_t m2 = path_key(L, "flow");
    if (flow->kind != Y_SEQ)
        return fail(L, flow, "expected a list of steps, got %s", kind_name(flow));
    if (flow->nitems == 0)
        return fail(L, flow, "a flow needs at least one step");
    path_pop(L, m2);
    if ((rc = collect_slots(L, flow, sc)) < 0)
        return rc;
    sc->steps = calloc(flow->nitems, sizeof(*sc->steps));
    if (!sc->steps)
        return -ENOMEM;
    bool any_request = false;
    for (size_t i = 0; i < flow->nitems; i++) {
        size_t m3 = path_push(L, ".flow[%zu]", i);
        sc->nsteps = i + 1;
        if ((rc = load_step(L, flow->items[i], i, &sc->steps[i], sc)) < 0)
            return rc;
        any_request = any_request || sc->steps[i].kind == SQ_STEP_REQUEST;
        path_pop(L, m3);
    }
    if (!any_request)
        return fail(L, flow, "a flow needs at least one request step");
    path_pop(L, mark);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Thresholds                                                                                  */

enum mtype { M_COUNTER, M_RATE, M_GAUGE, M_TREND };

static const struct {
    const char *name;
    enum mtype type;
} metrics[] = {
    {"http_reqs", M_COUNTER},
    {"http_req_duration", M_TREND},
    {"http_req_failed", M_RATE},
    {"http_req_blocked", M_TREND},
    {"http_req_connecting", M_TREND},
    {"http_req_tls_handshaking", M_TREND},
    {"http_req_sending", M_TREND},
    {"http_req_waiting", M_TREND},
    {"http_req_receiving", M_TREND},
    {"http_req_dns", M_TREND},
    {"iterations", M_COUNTER},
    {"iteration_duration", M_TREND},
    {"dropped_iterations", M_COUNTER},
    {"checks", M_RATE},
    {"data_sent", M_COUNTER},
    {"data_received", M_COUNTER},
    {"vus", M_GAUGE},
    {"vus_max", M_GAUGE},
};

static bool agg_fits(enum mtype t, enum sq_th_agg a)
{
    switch (t) {
    case M_COUNTER:
        return a == SQ_TH_COUNT || a == SQ_TH_RATE;
    case M_RATE:
        return a == SQ_TH_RATE;
    case M_GAUGE:
        return a == SQ_TH_VALUE;
    default:
        return a == SQ_TH_AVG || a == SQ_TH_MIN || a == SQ_TH_MAX || a == SQ_TH_MED ||
               a == SQ_TH_PCT;
    }
}

static const char *type_aggs(enum mtype t)
{
    switch (t) {
    case M_COUNTER:
        return "a counter: count or rate";
    case M_RATE:
        return "a rate: rate";
    case M_GAUGE:
        return "a gauge: value";
    default:
        return "a trend: avg, min, max, med or p(N)";
    }
}

static const char *agg_name(const struct sq_th_expr *e, char *buf, size_t len)
{
    static const char *const names[] = {"count", "rate", "value", "avg", "min", "max", "med"};
    if (e->agg == SQ_TH_PCT) {
        snprintf(buf, len, "p(%g)", e->pct);
        return buf;
    }
    return (unsigned)e->agg < SQ_ARRAY_LEN(names) ? names[e->agg] : "?";
}

/* Checks the selector's metric and tags against the plan. Returns the metric's type. */
static int check_selector(struct ld *L, const struct ynode *key, const struct sq_metric_sel *sel,
                          enum mtype *type)
{
    char tail[96];
    int found = -1;
    for (size_t i = 0; i < SQ_ARRAY_LEN(metrics); i++)
        if (strlen(metrics[i].name) == sel->metric_len &&
            !memcmp(metrics[i].name, sel->metric, sel->metric_len))
            found = (int)i;
    if (found < 0) {
        struct sq_suggest s;
        sq_suggest_init(&s, sel->metric, sel->metric_len);
        for (size_t i = 0; i < SQ_ARRAY_LEN(metrics); i++)
            sq_suggest_try(&s, metrics[i].name);
        return fail(L, key, "unknown metric '%.*s'%s",
                    (int)(sel->metric_len > 60 ? 60 : sel->metric_len), sel->metric,
                    s.best ? sq_suggest_tail(&s, tail, sizeof(tail))
                           : " (see docs/plans.md for the metric names)");
    }
    *type = metrics[found].type;
    const struct sq_plan *p = L->p;
    for (size_t t = 0; t < sel->ntags; t++) {
        const char *k = sel->tags[t].key, *v = sel->tags[t].value;
        size_t kl = sel->tags[t].key_len, vl = sel->tags[t].value_len;
        static const char *const tags[] = {"scenario", "step", "method", "status"};
        int tag = -1;
        for (size_t i = 0; i < SQ_ARRAY_LEN(tags); i++)
            if (strlen(tags[i]) == kl && !memcmp(tags[i], k, kl))
                tag = (int)i;
        if (tag < 0) {
            struct sq_suggest s;
            sq_suggest_init(&s, k, kl);
            for (size_t i = 0; i < SQ_ARRAY_LEN(tags); i++)
                sq_suggest_try(&s, tags[i]);
            return fail(L, key, "unknown tag '%.*s'%s (tags: scenario, step, method, status)",
                        (int)(kl > 40 ? 40 : kl), k, sq_suggest_tail(&s, tail, sizeof(tail)));
        }
        bool ok = false;
        struct sq_suggest s;
        sq_suggest_init(&s, v, vl);
        if (tag == 0) {
            for (size_t i = 0; i < p->nscenarios; i++) {
                ok = ok ||
                     (strlen(p->scenarios[i].name) == vl && !memcmp(p->scenarios[i].name, v, vl));
                sq_suggest_try(&s, p->scenarios[i].name);
            }
        } else if (tag == 1) {
            for (size_t i = 0; i < p->nscenarios; i++)
                for (size_t j = 0; j < p->scenarios[i].nsteps; j++) {
                    const char *sn = p->scenarios[i].steps[j].name;
                    ok = ok || (strlen(sn) == vl && !memcmp(sn, v, vl));
                    sq_suggest_try(&s, sn);
                }
        } else if (tag == 2) {
            ok = vl > 0;
            for (size_t i = 0; i < vl; i++)
                ok = ok && ((v[i] >= 'A' && v[i] <= 'Z') || v[i] == '-' || v[i] == '_');
            if (!ok)
                return fail(L, key, "method:%.*s: expected an upper-case method like GET",
                            (int)(vl > 30 ? 30 : vl), v);
        } else {
            ok = vl == 3 && isdigit((unsigned char)v[0]) && isdigit((unsigned char)v[1]) &&
                 isdigit((unsigned char)v[2]);
            if (!ok)
                return fail(L, key, "status:%.*s: expected a 3-digit status like 200",
                            (int)(vl > 30 ? 30 : vl), v);
        }
        if (!ok)
            return fail(L, key, "no %s named '%.*s' in the plan%s", tag == 0 ? "scenario" : "step",
                        (int)(vl > 60 ? 60 : vl), v, sq_suggest_tail(&s, tail, sizeof(tail)));
    }
    return 0;
}

static struct sq_plan_threshold *new_threshold(struct sq_plan *p, const char *selector,
                                               struct sq_loc loc, size_t *cap)
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
    t->loc = loc;
    char err[8];
    if (sq_metric_sel_parse(t->selector, strlen(t->selector), &t->sel, err, sizeof(err)) < 0)
        return NULL; /* parsed once already: cannot fail */
    return t;
}

static int add_expr(struct sq_plan_threshold *t, const struct sq_th_expr *e)
{
    struct sq_th_expr *v = realloc(t->exprs, (t->nexprs + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    t->exprs = v;
    t->exprs[t->nexprs++] = *e;
    return 0;
}

static int parse_expr(struct ld *L, const struct ynode *n, enum mtype type,
                      const struct sq_metric_sel *sel, struct sq_th_expr *e)
{
    int rc = want_string(L, n, "an expression like \"p(95) < 200\"");
    if (rc < 0)
        return rc;
    char err[256] = "";
    rc = sq_th_expr_parse(n->s, n->len, e, err, sizeof(err));
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        return fail(L, n, "%s", err[0] ? err : "malformed threshold expression");
    if (!agg_fits(type, e->agg)) {
        char an[32];
        return fail(L, n, "'%s' does not apply to %.*s (%s)", agg_name(e, an, sizeof(an)),
                    (int)sel->metric_len, sel->metric, type_aggs(type));
    }
    return 0;
}

static int load_thresholds(struct ld *L, const struct ynode *n)
{
    struct sq_plan *p = L->p;
    int rc = want_map(L, n, "a mapping of metrics to lists of expressions");
    if (rc < 0)
        return rc;
    size_t cap = 0;
    static const char *const keys[] = {"threshold", "abortOnFail", "delayAbortEval"};
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        size_t mark = path_key(L, k->s);
        struct sq_metric_sel sel;
        char err[256] = "";
        if (sq_metric_sel_parse(k->s, k->len, &sel, err, sizeof(err)) < 0)
            return fail(L, k, "%s", err[0] ? err : "malformed metric selector");
        enum mtype type = M_TREND;
        if ((rc = check_selector(L, k, &sel, &type)) < 0)
            return rc;
        size_t cnt = v->kind == Y_SEQ ? v->nitems : 1;
        if (cnt == 0)
            return fail(L, v, "expected at least one expression like \"p(95) < 200\"");
        struct sq_plan_threshold *plain = NULL;
        for (size_t j = 0; j < cnt; j++) {
            const struct ynode *it = v->kind == Y_SEQ ? v->items[j] : v;
            size_t m2 = v->kind == Y_SEQ ? path_push(L, "[%zu]", j) : L->path_len;
            struct sq_th_expr e;
            if (it->kind == Y_MAP) {
                if ((rc = check_keys(L, it, keys, SQ_ARRAY_LEN(keys))) < 0)
                    return rc;
                const struct ynode *th = get(it, "threshold");
                if (!th)
                    return fail(L, it, "missing key 'threshold' (the expression)");
                size_t m3 = path_key(L, "threshold");
                if ((rc = parse_expr(L, th, type, &sel, &e)) < 0)
                    return rc;
                path_pop(L, m3);
                struct sq_plan_threshold *t = new_threshold(p, k->s, it->loc, &cap);
                if (!t || add_expr(t, &e) < 0)
                    return -ENOMEM;
                const struct ynode *x = get(it, "abortOnFail");
                if (x) {
                    m3 = path_key(L, "abortOnFail");
                    if ((rc = get_bool(L, x, &t->abort_on_fail)) < 0)
                        return rc;
                    path_pop(L, m3);
                }
                x = get(it, "delayAbortEval");
                if (x) {
                    m3 = path_key(L, "delayAbortEval");
                    if ((rc = get_duration(L, x, &t->delay_abort_eval_ns)) < 0)
                        return rc;
                    path_pop(L, m3);
                }
            } else {
                if ((rc = parse_expr(L, it, type, &sel, &e)) < 0)
                    return rc;
                if (!plain) {
                    plain = new_threshold(p, k->s, k->loc, &cap);
                    if (!plain)
                        return -ENOMEM;
                }
                if (add_expr(plain, &e) < 0)
                    return -ENOMEM;
            }
            path_pop(L, m2);
        }
        path_pop(L, mark);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Entry points                                                                                */

static int load_root(struct ld *L, const struct ynode *root)
{
    static const char *const keys[] = {"target", "vars",      "defaults",
                                       "data",   "scenarios", "thresholds"};
    struct sq_plan *p = L->p;
    int rc = want_map(L, root, "a mapping with target and scenarios");
    if (rc == 0)
        rc = check_keys(L, root, keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    struct sq_loc top = {1, 1};
    if (!get(root, "target"))
        return fail_at(L, top, "missing key 'target' (the base URL, like http://127.0.0.1:8080)");
    if (!get(root, "scenarios"))
        return fail_at(L, top,
                       "missing key 'scenarios' (at least one scenario with an executor "
                       "and a flow)");
    static const char *const order[] = {"vars", "target", "defaults", "data"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(order); i++) {
        const struct ynode *v = get(root, order[i]);
        if (!v)
            continue;
        size_t mark = path_key(L, order[i]);
        rc = i == 0   ? load_vars(L, v)
             : i == 1 ? load_target(L, v)
             : i == 2 ? load_defaults(L, v)
                      : load_data(L, v);
        if (rc < 0)
            return rc;
        path_pop(L, mark);
    }
    const struct ynode *sc = get(root, "scenarios");
    size_t mark = path_key(L, "scenarios");
    if ((rc = want_map(L, sc, "a mapping of scenario names to scenarios")) < 0)
        return rc;
    if (sc->npairs == 0)
        return fail(L, sc, "at least one scenario is needed");
    p->scenarios = calloc(sc->npairs, sizeof(*p->scenarios));
    if (!p->scenarios)
        return -ENOMEM;
    for (size_t i = 0; i < sc->npairs; i++) {
        p->nscenarios = i + 1;
        if ((rc = load_scenario(L, sc->pairs[i].key, sc->pairs[i].val, &p->scenarios[i])) < 0)
            return rc;
    }
    path_pop(L, mark);
    const struct ynode *th = get(root, "thresholds");
    if (th) {
        mark = path_key(L, "thresholds");
        if ((rc = load_thresholds(L, th)) < 0)
            return rc;
        path_pop(L, mark);
    }
    return 0;
}

int sq_plan_load_string(const char *name, const char *yaml, size_t len, struct sq_plan **out,
                        struct sq_plan_error *err)
{
    if (err) {
        memset(err, 0, sizeof(*err));
        snprintf(err->file, sizeof(err->file), "%s", name);
    }
    struct ld *L = calloc(1, sizeof(*L));
    struct sq_plan *p = calloc(1, sizeof(*p));
    if (!L || !p) {
        free(L);
        free(p);
        return -ENOMEM;
    }
    L->p = p;
    L->err = err;
    L->src = yaml;
    L->src_len = len;
    const char *slash = strrchr(name, '/');
    if (slash)
        snprintf(L->dir, sizeof(L->dir), "%.*s", (int)(slash == name ? 1 : slash - name), name);
    p->file = strdup(name);
    int rc = p->file ? 0 : -ENOMEM;
    struct ynode *root = NULL;
    if (rc == 0 && len > MAX_PLAN_BYTES) {
        struct sq_loc loc = {1, 1};
        rc = fail_at(L, loc, "the plan is larger than %u MiB", MAX_PLAN_BYTES >> 20);
    }
    if (rc == 0)
        rc = check_text(L);
    if (rc == 0)
        rc = build_tree(L, &root);
    L->root = root;
    if (rc == 0)
        rc = load_root(L, root);
    if (rc == -ENOMEM && err)
        snprintf(err->msg, sizeof(err->msg), "out of memory");
    ld_dispose(L);
    free(L);
    if (rc < 0) {
        sq_plan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int sq_plan_load(const char *path, struct sq_plan **out, struct sq_plan_error *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = read_file(path, MAX_PLAN_BYTES, &text, &len);
    if (rc < 0) {
        if (err) {
            memset(err, 0, sizeof(*err));
            snprintf(err->file, sizeof(err->file), "%s", path);
            snprintf(err->msg, sizeof(err->msg), "cannot read the plan: %s",
                     rc == -SQ_ETOOBIG ? "larger than 16 MiB" : sq_strerror(rc));
        }
        return rc == -SQ_ETOOBIG ? -SQ_EPARSE : rc;
    }
    rc = sq_plan_load_string(path, text, len, out, err);
    free(text);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */

static void request_dispose(struct sq_plan_request *r)
{
    free(r->method);
    sq_tmpl_free(r->url);
    free(r->url_src);
    for (size_t i = 0; i < r->nheaders; i++) {
        free(r->headers[i].name);
        sq_tmpl_free(r->headers[i].value);
    }
    free(r->headers);
    sq_tmpl_free(r->body);
    free(r->body_file);
}

void sq_plan_free(struct sq_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nscenarios; i++) {
        struct sq_plan_scenario *sc = &p->scenarios[i];
        for (size_t j = 0; j < sc->nsteps; j++) {
            struct sq_plan_step *st = &sc->steps[j];
            free(st->name);
            request_dispose(&st->req);
            for (size_t k = 0; k < st->nextract; k++) {
                sq_extractor_dispose(&st->extract[k]);
                free(st->extract_src[k]);
            }
            free(st->extract);
            free(st->extract_src);
            for (size_t k = 0; k < st->nchecks; k++)
                sq_check_dispose(&st->checks[k]);
            free(st->checks);
        }
        free(sc->steps);
        for (uint32_t j = 0; j < sc->nvars; j++)
            free(sc->vars[j]);
        free(sc->vars);
        free(sc->name);
    }
    free(p->scenarios);
    for (size_t i = 0; i < p->nfeeders; i++) {
        free(p->feeders[i].name);
        free(p->feeders[i].path);
        sq_feeder_free(p->feeders[i].data);
    }
    free(p->feeders);
    for (size_t i = 0; i < p->nvars; i++) {
        free(p->vars[i].name);
        free(p->vars[i].value);
    }
    free(p->vars);
    for (size_t i = 0; i < p->nthresholds; i++) {
        free(p->thresholds[i].selector);
        free(p->thresholds[i].exprs);
    }
    free(p->thresholds);
    free(p->target);
    free(p->file);
    free(p);
}
