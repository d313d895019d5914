/* plan/jpath.c - JSON paths and the scanner that follows them through a document.
 *
 * The scanner walks the bytes of the document once, front to back, and builds nothing: the
 * values the path does not name are skipped (validated as it goes, RFC 8259 grammar), object
 * keys are compared against the path's name while they are decoded, byte by byte, and the
 * value the path names is returned as a span of the document.
 *
 * Invariants:
 *  - every read is of a byte p with p < end; no helper looks ahead without checking the length;
 *  - nesting is bounded by JSON_MAX_DEPTH containers, counted from the document's root, and
 *    skipping uses a fixed array of that size, never recursion;
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

/* ---- bytes ---- */

enum { C_WS = 1, C_STR = 2, C_DIGIT = 4 };

/* C_STR: a byte that ends the fast run inside a string (quote, backslash, control). */
static const unsigned char ctype[256] = {
    [0x00] = C_STR,  [0x01] = C_STR,        [0x02] = C_STR,        [0x03] = C_STR,
    [0x04] = C_STR,  [0x05] = C_STR,        [0x06] = C_STR,        [0x07] = C_STR,
    [0x08] = C_STR,  [0x09] = C_STR | C_WS, [0x0a] = C_STR | C_WS, [0x0b] = C_STR,
    [0x0c] = C_STR,  [0x0d] = C_STR | C_WS, [0x0e] = C_STR,        [0x0f] = C_STR,
    [0x10] = C_STR,  [0x11] = C_STR,        [0x12] = C_STR,        [0x13] = C_STR,
    [0x14] = C_STR,  [0x15] = C_STR,        [0x16] = C_STR,        [0x17] = C_STR,
    [0x18] = C_STR,  [0x19] = C_STR,        [0x1a] = C_STR,        [0x1b] = C_STR,
    [0x1c] = C_STR,  [0x1d] = C_STR,        [0x1e] = C_STR,        [0x1f] = C_STR,
    [' '] = C_WS,    ['"'] = C_STR,         ['\\'] = C_STR,        ['0'] = C_DIGIT,
    ['1'] = C_DIGIT, ['2'] = C_DIGIT,       ['3'] = C_DIGIT,       ['4'] = C_DIGIT,
    ['5'] = C_DIGIT, ['6'] = C_DIGIT,       ['7'] = C_DIGIT,       ['8'] = C_DIGIT,
    ['9'] = C_DIGIT,
};

#define IS(c, cls) (ctype[(unsigned char)(c)] & (cls))

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && IS(*p, C_WS))
        p++;
    return p;
}

/* The 4 hex digits at p, or -1. */
static int32_t hex4(const char *p, const char *end)
{
    if (end - p < 4)
        return -1;
    int32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = sq_hex_value((unsigned char)p[i]);
        if (h < 0)
            return -1;
        v = v << 4 | h;
    }
    return v;
}

enum { ESC_OK = 0, ESC_BAD = -1, ESC_LONE = -2 };

/* Decodes one escape; p is the byte after the backslash. ESC_OK: *cp is the code point (a \u
 * surrogate pair is joined). ESC_LONE: a well-formed \u escape that is an unpaired surrogate.
 * ESC_BAD: not an escape. *next is set for ESC_OK and ESC_LONE. squote: also accept \'. */
static int decode_escape(const char *p, const char *end, bool squote, uint32_t *cp,
                         const char **next)
{
    if (p >= end)
        return ESC_BAD;
    switch (*p) {
    case '"':
    case '\\':
    case '/':
        *cp = (unsigned char)*p;
        break;
    case 'b':
        *cp = '\b';
        break;
    case 'f':
        *cp = '\f';
        break;
    case 'n':
        *cp = '\n';
        break;
    case 'r':
        *cp = '\r';
        break;
    case 't':
        *cp = '\t';
        break;
    case '\'':
        if (!squote)
            return ESC_BAD;
        *cp = '\'';
        break;
    case 'u': {
        int32_t hi = hex4(p + 1, end);
        if (hi < 0)
            return ESC_BAD;
        p += 5;
        *next = p;
        if (hi >= 0xDC00 && hi <= 0xDFFF)
            return ESC_LONE;
        if (hi >= 0xD800 && hi <= 0xDBFF) {
            if (end - p < 2 || p[0] != '\\' || p[1] != 'u')
                return ESC_LONE;
            int32_t lo = hex4(p + 2, end);
            if (lo < 0)
                return ESC_BAD;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return ESC_LONE; /* the next escape is decoded on its own */
            *cp = 0x10000 + ((uint32_t)(hi - 0xD800) << 10) + (uint32_t)(lo - 0xDC00);
            *next = p + 6;
            return ESC_OK;
        }
        *cp = (uint32_t)hi;
        return ESC_OK;
    }
    default:
        return ESC_BAD;
    }
    *next = p + 1;
    return ESC_OK;
}

/* ---- skipping values ---- */

/* The first byte at or after p that ends a plain run inside a string (a quote, a backslash or a
 * control character), or end. Eight bytes at a time: (v - 0x01..) & ~v & 0x80.. flags a zero
 * byte of v, exactly for the lowest one (a borrow only taints the bytes above it) and nothing
 * in a word that has none; the same with 0x20.. flags bytes below 0x20. On little-endian
 * machines the lowest flag is the first such byte in memory; elsewhere, and for the last
 * few bytes, the word is finished byte by byte. */
static inline const char *str_run(const char *p, const char *end)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), high = ones * 0x80;
    while (end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
        uint64_t hit = (((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x)) & high;
        if (hit) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return p + (__builtin_ctzll(hit) >> 3);
#else
            break;
#endif
        }
        p += 8;
    }
    while (p < end && !IS(*p, C_STR))
        p++;
    return p;
}

/* p just inside a string; returns the byte after the closing quote, or NULL. */
static const char *skip_string_body(const char *p, const char *end)
{
    for (;;) {
        p = str_run(p, end);
        if (p >= end)
            return NULL;
        unsigned char c = (unsigned char)*p++;
        if (c == '"')
            return p;
        if (c != '\\')
            return NULL; /* a raw control character */
        if (p >= end)
            return NULL;
        c = (unsigned char)*p++;
        if (c == 'u') {
            if (hex4(p, end) < 0)
                return NULL;
            p += 4;
        } else if (!(c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                     c == 'r' || c == 't')) {
            return NULL;
        }
    }
}

/* p at the opening quote. */
static const char *skip_string(const char *p, const char *end)
{
    return skip_string_body(p + 1, end);
}

static const char *skip_digits(const char *p, const char *end)
{
    while (p < end && IS(*p, C_DIGIT))
        p++;
    return p;
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? ; returns the end or NULL. */
static const char *skip_number(const char *p, const char *end)
{
    if (p < end && *p == '-')
        p++;
    if (p >= end || !IS(*p, C_DIGIT))
        return NULL;
    if (*p == '0')
        p++;
    else
        p = skip_digits(p, end);
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !IS(*p, C_DIGIT))
            return NULL;
        p = skip_digits(p, end);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !IS(*p, C_DIGIT))
            return NULL;
        p = skip_digits(p, end);
    }
    return p;
}

static const char *skip_literal(const char *p, const char *end, const char *lit, size_t n)
{
    if ((size_t)(end - p) < n || memcmp(p, lit, n) != 0)
        return NULL;
    return p + n;
}

/* Skips the value at p (whitespace first). depth: containers already around it. Returns the
 * byte after the value and sets *type, or NULL when the value is malformed, truncated or nests
 * deeper than JSON_MAX_DEPTH. Iterative: close[] remembers the bracket each open container
 * needs. */
static const char *skip_value(const char *p, const char *end, unsigned depth,
                              enum sq_json_type *type)
{
    char close[JSON_MAX_DEPTH];
    unsigned d = 0;

value:
    p = skip_ws(p, end);
    if (p >= end)
        return NULL;
    switch (*p) {
    case '{':
    case '[':
        if (d == 0)
            *type = *p == '{' ? SQ_JSON_OBJECT : SQ_JSON_ARRAY;
        if (depth + d >= JSON_MAX_DEPTH)
            return NULL;
        close[d++] = *p == '{' ? '}' : ']';
        p = skip_ws(p + 1, end);
        if (p >= end)
            return NULL;
        if (*p == close[d - 1]) {
            p++;
            d--;
            goto after;
        }
        if (close[d - 1] == '}')
            goto key;
        goto value;
    case '"':
        if (d == 0)
            *type = SQ_JSON_STRING;
        p = skip_string(p, end);
        break;
    case 't':
        if (d == 0)
            *type = SQ_JSON_TRUE;
        p = skip_literal(p, end, "true", 4);
        break;
    case 'f':
        if (d == 0)
            *type = SQ_JSON_FALSE;
        p = skip_literal(p, end, "false", 5);
        break;
    case 'n':
        if (d == 0)
            *type = SQ_JSON_NULL;
        p = skip_literal(p, end, "null", 4);
        break;
    default:
        if (d == 0)
            *type = SQ_JSON_NUMBER;
        p = skip_number(p, end);
        break;
    }
    if (!p)
        return NULL;

after:
    if (d == 0)
        return p;
    p = skip_ws(p, end);
    if (p >= end)
        return NULL;
    if (*p == ',') {
        p = skip_ws(p + 1, end);
        if (close[d - 1] == ']')
            goto value;
        goto key;
    }
    if (*p != close[d - 1])
        return NULL;
    p++;
    d--;
    goto after;

key:
    if (p >= end || *p != '"')
        return NULL;
    p = skip_string(p, end);
    if (!p)
        return NULL;
    p = skip_ws(p, end);
    if (p >= end || *p != ':')
        return NULL;
    p++;
    goto value;
}

/* p at a key's opening quote. Returns the byte after the closing quote (NULL: malformed) and
 * sets *eq when the decoded key is exactly name[0, nlen). A key with an unpaired surrogate
 * escape matches no name. Once the key differs, the rest is only skipped. */
static const char *scan_key(const char *p, const char *end, const char *name, size_t nlen, bool *eq)
{
    size_t i = 0;
    *eq = false;
    p++;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (!IS(c, C_STR)) {
            if (i >= nlen || (unsigned char)name[i] != c)
                return skip_string_body(p, end);
            i++;
            p++;
            continue;
        }
        if (c == '"') {
            *eq = i == nlen;
            return p + 1;
        }
        if (c != '\\')
            return NULL;
        uint32_t cp;
        const char *next;
        int rc = decode_escape(p + 1, end, false, &cp, &next);
        if (rc == ESC_BAD)
            return NULL;
        if (rc == ESC_LONE)
            return skip_string_body(next, end);
        unsigned char u[4];
        size_t n = sq_utf8_encode(cp, u);
        if (nlen - i < n || memcmp(name + i, u, n) != 0)
            return skip_string_body(next, end);
        i += n;
        p = next;
    }
    return NULL;
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
            if (i < len && IS(src[i], C_DIGIT)) {
                size_t v = 0, s = i;
                while (i < len && IS(src[i], C_DIGIT)) {
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
                const char *end = src + len;
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
                    uint32_t cp;
                    const char *next;
                    int e = decode_escape(src + i + 1, end, true, &cp, &next);
                    if (e == ESC_BAD) {
                        rc =
                            path_error(err, errlen, i,
                                       "an escape (\\\\ \\' \\\" \\/ \\b \\f \\n \\r \\t \\uXXXX)");
                        goto fail;
                    }
                    if (e == ESC_LONE) {
                        rc =
                            path_error(err, errlen, i, "a \\u escape that is not a lone surrogate");
                        goto fail;
                    }
                    names += sq_utf8_encode(cp, (unsigned char *)names);
                    i = (size_t)(next - src);
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

int sq_jpath_eval(const struct sq_jpath *p, const char *doc, size_t len, struct sq_json_val *out)
{
    const char *s = doc, *end = len ? doc + len : doc;
    unsigned depth = 0;
    char closer = 0; /* the bracket that closes the container around the value; 0 at the root */
    enum sq_json_type t;
    out->type = SQ_JSON_NONE;
    out->raw = NULL;
    out->raw_len = 0;
    if (len == 0)
        return 0; /* also keeps doc == NULL out of the pointer arithmetic */

    s = skip_ws(s, end);
    for (size_t i = 0; i < p->nseg; i++) {
        const struct seg *g = &p->seg[i];
        if (s >= end || depth >= JSON_MAX_DEPTH)
            return 0;
        if (g->name) {
            if (*s != '{')
                return 0;
            s = skip_ws(s + 1, end);
            for (;;) {
                if (s >= end || *s != '"')
                    return 0; /* '}' (absent) or malformed */
                bool eq;
                s = scan_key(s, end, g->name, g->len, &eq);
                if (!s)
                    return 0;
                s = skip_ws(s, end);
                if (s >= end || *s != ':')
                    return 0;
                s = skip_ws(s + 1, end);
                if (eq)
                    break;
                s = skip_value(s, end, depth + 1, &t);
                if (!s)
                    return 0;
                s = skip_ws(s, end);
                if (s >= end || *s != ',')
                    return 0;
                s = skip_ws(s + 1, end);
            }
            closer = '}';
        } else {
            if (*s != '[')
                return 0;
            s = skip_ws(s + 1, end);
            if (s < end && *s == ']')
                return 0;
            for (size_t k = 0; k < g->index; k++) {
                s = skip_value(s, end, depth + 1, &t);
                if (!s)
                    return 0;
                s = skip_ws(s, end);
                if (s >= end || *s != ',')
                    return 0; /* ']' (too few elements) or malformed */
                s = skip_ws(s + 1, end);
            }
            closer = ']';
        }
        depth++;
    }

    const char *v = s;
    s = skip_value(s, end, depth, &t);
    if (!s)
        return 0;
    const char *after = skip_ws(s, end);
    if (closer ? after >= end || (*after != ',' && *after != closer) : after != end)
        return 0;
    out->type = t;
    out->raw = v;
    out->raw_len = (size_t)(s - v);
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
    const char *p = v->raw + 1, *end = v->raw + v->raw_len - 1;
    if (p == end)
        return 0;                                    /* "" (and out->p may still be NULL) */
    int rc = sq_buf_reserve(out, (size_t)(end - p)); /* decoding never lengthens */
    if (rc < 0)
        return rc;
    unsigned char *w = (unsigned char *)out->p + out->len;
    while (p < end) {
        const char *run = p;
        p = str_run(p, end);
        memcpy(w, run, (size_t)(p - run));
        w += p - run;
        if (p >= end)
            break;
        if (*p != '\\')
            return -SQ_EPARSE; /* a raw quote or control character */
        uint32_t cp;
        const char *next;
        if (decode_escape(p + 1, end, false, &cp, &next) != ESC_OK)
            return -SQ_EPARSE;
        w += sq_utf8_encode(cp, w);
        p = next;
    }
    out->len = (size_t)((char *)w - out->p);
    return 0;
}
