/* plan/jpath.c - JSON paths, and following one through a document with base/json's walker.
 *
 * The walk reads the document once, front to back, and builds nothing: each step is one call
 * of the walker's (sq_json_find for a .name, sq_json_index for an [N]), which skips the values
 * the path does not name (validated as they go, RFC 8259 grammar) and compares object keys with
 * the step's name (a key without escapes by its bytes, one with escapes while it is decoded),
 * and the value the path names is returned as a span of the document.
 *
 * Invariants:
 *  - every read is the walker's, so of a byte below the document's length;
 *  - nesting is bounded by JSON_MAX_DEPTH containers, counted from the document's root (the
 *    walker's depth limit: it counts, it never recurses);
 *  - malformed JSON met before the value (or in it) ends the search: "not found". What follows
 *    the value is not looked at, except for the one byte that shows the value is complete (a ','
 *    or the closing bracket of its container; only whitespace after a value at the root), so a
 *    truncated document never yields a shortened number or literal.
 *  - duplicate keys: the first key that matches wins.
 */
#include "plan/eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/text.h"

#define JSON_MAX_DEPTH 256   /* containers nested in a document we still walk */
#define JPATH_MAX_SEGS 256   /* a longer path could never match */
#define JPATH_MAX_LEN  65536 /* bytes of path source */

struct seg {
    const char *name; /* decoded UTF-8 name; NULL: an array index */
    size_t len;
    size_t index;
};

struct sq_jpath {
    size_t nseg;
    struct seg seg[]; /* followed by the decoded names */
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ---- compiling a path ---- */

static int path_error(char *err, size_t errlen, size_t off, const char *what)
{
    if (err && errlen)
        snprintf(err, errlen, "offset %zu: expected %s", off, what);
    return -SQ_EPARSE;
}

/* A byte allowed in a .name: anything but the path's punctuation (backslash included: escapes
 * belong in the quoted form), whitespace and controls. */
static bool name_byte(unsigned char c)
{
    return c > 0x20 && c != 0x7f && c != '.' && c != '[' && c != ']' && c != '\'' && c != '"' &&
           c != '\\';
}

int sq_jpath_compile(const char *src, size_t len, struct sq_jpath **out, char *err, size_t errlen)
{
    *out = NULL;
    if (len > JPATH_MAX_LEN) {
        if (err && errlen)
            snprintf(err, errlen, "path longer than %d bytes", JPATH_MAX_LEN);
        return -SQ_EPARSE;
    }
    if (len == 0 || src[0] != '$')
        return path_error(err, errlen, 0, "'$' (a path starts at the document's root)");
    /* Each segment takes at least 2 bytes of source, and a decoded name is never longer than
     * its source: one block holds it all. */
    size_t maxseg = len / 2 + 1;
    struct sq_jpath *p = malloc(sizeof(*p) + maxseg * sizeof(struct seg) + len);
    if (!p)
        return -ENOMEM;
    char *names = (char *)&p->seg[maxseg];
    p->nseg = 0;
    size_t i = 1;
    int rc;
    while (i < len) {
        if (p->nseg == JPATH_MAX_SEGS) {
            rc = path_error(err, errlen, i, "the end (more than 256 steps)");
            goto fail;
        }
        struct seg *g = &p->seg[p->nseg];
        if (src[i] == '.') {
            size_t s = ++i;
            while (i < len && name_byte((unsigned char)src[i]))
                i++;
            if (i == s) {
                rc = path_error(err, errlen, s, "a name after '.'");
                goto fail;
            }
            memcpy(names, src + s, i - s);
            g->name = names;
            g->len = i - s;
            names += g->len;
        } else if (src[i] == '[') {
            i++;
            if (i < len && is_digit(src[i])) {
                size_t v = 0, s = i;
                while (i < len && is_digit(src[i])) {
                    if (v > ((size_t)-1 - 9) / 10) {
                        rc = path_error(err, errlen, s, "a smaller index");
                        goto fail;
                    }
                    v = v * 10 + (size_t)(src[i] - '0');
                    i++;
                }
                g->name = NULL;
                g->len = 0;
                g->index = v;
            } else if (i < len && (src[i] == '\'' || src[i] == '"')) {
                char q = src[i++];
                g->name = names;
                for (;;) {
                    if (i >= len) {
                        rc = path_error(err, errlen, i, q == '"' ? "'\"'" : "\"'\"");
                        goto fail;
                    }
                    if (src[i] == q) {
                        i++;
                        break;
                    }
                    if (src[i] != '\\') {
                        *names++ = src[i++];
                        continue;
                    }
                    uint32_t cp = '\'';
                    int e = i + 1 < len && src[i + 1] == '\''
                                ? 2
                                : sq_json_escape(src + i, len - i, &cp);
                    if (e == -SQ_JSON_E_LONE_HIGH || e == -SQ_JSON_E_LONE_LOW) {
                        rc =
                            path_error(err, errlen, i, "a \\u escape that is not a lone surrogate");
                        goto fail;
                    }
                    if (e < 0) {
                        rc =
                            path_error(err, errlen, i,
                                       "an escape (\\\\ \\' \\\" \\/ \\b \\f \\n \\r \\t \\uXXXX)");
                        goto fail;
                    }
                    names += sq_utf8_encode(cp, (unsigned char *)names);
                    i += (size_t)e;
                }
                g->len = (size_t)(names - g->name);
            } else if (i < len && src[i] == '-') {
                rc = path_error(err, errlen, i, "a non-negative index");
                goto fail;
            } else {
                rc = path_error(err, errlen, i, "an index or a quoted name after '['");
                goto fail;
            }
            if (i >= len || src[i] != ']') {
                rc = path_error(err, errlen, i, "']'");
                goto fail;
            }
            i++;
        } else {
            rc = path_error(err, errlen, i, "'.' or '['");
            goto fail;
        }
        p->nseg++;
    }
    *out = p;
    return 0;
fail:
    free(p);
    return rc;
}

void sq_jpath_free(struct sq_jpath *p)
{
    free(p);
}

/* ---- evaluating ---- */

static const enum sq_json_type type_of[] = {
    [SQ_JSON_T_OBJ] = SQ_JSON_OBJECT, [SQ_JSON_T_ARR] = SQ_JSON_ARRAY,
    [SQ_JSON_T_STR] = SQ_JSON_STRING, [SQ_JSON_T_NUM] = SQ_JSON_NUMBER,
    [SQ_JSON_T_TRUE] = SQ_JSON_TRUE,  [SQ_JSON_T_FALSE] = SQ_JSON_FALSE,
    [SQ_JSON_T_NULL] = SQ_JSON_NULL,
};

int sq_jpath_eval(const struct sq_jpath *p, const char *doc, size_t len, struct sq_json_val *out)
{
    out->type = SQ_JSON_NONE;
    out->raw = NULL;
    out->raw_len = 0;
    if (len == 0)
        return 0; /* also keeps doc == NULL out of the pointer arithmetic */

    struct sq_json_walk w;
    struct sq_json_tok t; /* the value at the current step: its first token */
    sq_json_walk_init(&w, doc, len, JSON_MAX_DEPTH, 0);
    for (size_t i = 0; i < p->nseg; i++) {
        const struct seg *g = &p->seg[i];
        /* A step goes into the value due: at the root none has been read, later it has, and
         * must be the container the step needs. */
        if (i && t.type != (g->name ? SQ_JSON_T_OBJ : SQ_JSON_T_ARR))
            return 0;
        if ((g->name ? sq_json_find(&w, g->name, g->len, &t) : sq_json_index(&w, g->index, &t)) !=
            1)
            return 0; /* absent (too few elements, another type), or malformed */
    }
    if (p->nseg == 0 && sq_json_next(&w, &t) < 0)
        return 0;
    if ((t.type == SQ_JSON_T_OBJ || t.type == SQ_JSON_T_ARR) && sq_json_skip(&w, &t) < 0)
        return 0;
    /* The one byte that shows the value complete: ',' or the bracket that closes the container
     * around it; at the root, the end. */
    int c = sq_json_peek(&w);
    if (p->nseg ? c != ',' && c != (p->seg[p->nseg - 1].name ? '}' : ']') : c != -1)
        return 0;
    out->type = type_of[t.type];
    out->raw = doc + t.at;
    out->raw_len = t.len;
    return 1;
}

/* ---- value text ---- */

int sq_json_val_text(const struct sq_json_val *v, struct sq_buf *out)
{
    if (v->type == SQ_JSON_NONE)
        return 0;
    if (v->type != SQ_JSON_STRING)
        return sq_buf_append(out, v->raw, v->raw_len);
    if (v->raw_len < 2 || v->raw[0] != '"' || v->raw[v->raw_len - 1] != '"')
        return -SQ_EPARSE;
    size_t n = v->raw_len - 2;
    if (n == 0)
        return 0;                    /* "" (and out->p may still be NULL) */
    int rc = sq_buf_reserve(out, n); /* decoding never lengthens */
    if (rc < 0)
        return rc;
    size_t got;
    if (sq_json_unescape(v->raw + 1, n, out->p + out->len, &got, NULL) < 0)
        return -SQ_EPARSE; /* a bad escape, a lone surrogate, a raw quote or control byte */
    out->len += got;
    return 0;
}
