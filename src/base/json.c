/* base/json.c - see json.h.
 *
 * The walker is a small state machine: _state says what the grammar wants next (the root value,
 * a value, a value or ']', a key or '}', a key, ':', ',' or the container's end, or nothing but
 * whitespace), and one bit per open container says whether it is an object, so a closing
 * bracket is checked against the one that opened. step() is the whole of it; sq_json_next and
 * sq_json_skip are step() called once and in a loop (inlined into both, so skipping a value
 * costs no call per token).
 */
#include "base/json.h"

#include <stdio.h>
#include <string.h>

#include "base/text.h"

enum {
    ST_ROOT,      /* the root value */
    ST_VALUE,     /* a value: after ':' or after ',' in an array */
    ST_ARR_FIRST, /* a value or ']' */
    ST_OBJ_FIRST, /* a key or '}' */
    ST_KEY,       /* a key: after ',' in an object */
    ST_COLON,     /* ':' after a key */
    ST_AFTER,     /* ',' or the closing bracket, after a value in a container */
    ST_DONE,      /* the root value is complete */
};

/* ---- bytes ---- */

static inline bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline size_t skip_ws(const char *s, size_t i, size_t n)
{
    while (i < n && is_ws((unsigned char)s[i]))
        i++;
    return i;
}

static inline bool is_digit(char c)
{
    return (unsigned)(unsigned char)c - '0' < 10;
}

/* The 4 hex digits at s (4 bytes readable), or -1. */
static inline int32_t hex4(const char *s)
{
    int32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = sq_hex_value((unsigned char)s[k]);
        if (h < 0)
            return -1;
        v = v << 4 | h;
    }
    return v;
}

/* The first offset at or after i that ends a plain run inside a string (a quote, a backslash
 * or a control byte), or n. Eight bytes at a time: (v - 0x01..) & ~v & 0x80.. flags a zero byte
 * of v, exactly for the lowest one (a borrow only taints the bytes above it) and nothing in a
 * word that has none; the same with 0x20.. flags bytes below 0x20. On little-endian machines the
 * lowest flag is the first such byte in memory; elsewhere, and for the last few bytes, the word
 * is finished byte by byte. */
static inline size_t str_run(const char *s, size_t i, size_t n)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), high = ones * 0x80;
    while (n - i >= 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
        uint64_t hit = (((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x)) & high;
        if (hit) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return i + (size_t)(__builtin_ctzll(hit) >> 3);
#else
            break;
#endif
        }
        i += 8;
    }
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c < 0x20)
            break;
        i++;
    }
    return i;
}

static size_t digits(const char *s, size_t i, size_t n)
{
    while (i < n && is_digit(s[i]))
        i++;
    return i;
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? at s[i] (i < n): its end, or 0 when it
 * is malformed (a number never ends at offset 0). What follows is not looked at: "01" is the
 * number 0 and then an unexpected '1'. */
static size_t scan_number(const char *s, size_t i, size_t n)
{
    if (s[i] == '-')
        i++;
    if (i >= n || !is_digit(s[i]))
        return 0;
    i = s[i] == '0' ? i + 1 : digits(s, i, n);
    if (i < n && s[i] == '.') {
        if (++i >= n || !is_digit(s[i]))
            return 0;
        i = digits(s, i, n);
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        if (++i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || !is_digit(s[i]))
            return 0;
        i = digits(s, i, n);
    }
    return i;
}

/* ---- escapes ---- */

int sq_json_escape(const char *s, size_t n, uint32_t *cp)
{
    if (n < 2 || s[0] != '\\')
        return -SQ_JSON_E_ESCAPE;
    switch (s[1]) {
    case '"':
    case '\\':
    case '/':
        *cp = (unsigned char)s[1];
        return 2;
    case 'b':
        *cp = '\b';
        return 2;
    case 'f':
        *cp = '\f';
        return 2;
    case 'n':
        *cp = '\n';
        return 2;
    case 'r':
        *cp = '\r';
        return 2;
    case 't':
        *cp = '\t';
        return 2;
    case 'u':
        break;
    default:
        return -SQ_JSON_E_ESCAPE;
    }
    int32_t hi = n >= 6 ? hex4(s + 2) : -1;
    if (hi < 0)
        return -SQ_JSON_E_HEX;
    if (hi >= 0xDC00 && hi <= 0xDFFF)
        return -SQ_JSON_E_LONE_LOW;
    if (hi >= 0xD800 && hi <= 0xDBFF) {
        /* Whatever follows that is not \u and a low surrogate leaves the high one unpaired (a
         * malformed escape there included: the first fault, reading left to right, is this). */
        int32_t lo = n >= 12 && s[6] == '\\' && s[7] == 'u' ? hex4(s + 8) : -1;
        if (lo < 0xDC00 || lo > 0xDFFF)
            return -SQ_JSON_E_LONE_HIGH;
        *cp = 0x10000 + ((uint32_t)(hi - 0xD800) << 10) + (uint32_t)(lo - 0xDC00);
        return 12;
    }
    *cp = (uint32_t)hi;
    return 6;
}

int sq_json_unescape(const char *s, size_t n, char *out, size_t *outlen, size_t *bad)
{
    size_t i = 0;
    char *o = out;
    for (;;) {
        size_t r = str_run(s, i, n);
        if (r > i) {
            memmove(o, s + i, r - i); /* out may be s, or before it */
            o += r - i;
            i = r;
        }
        if (i >= n)
            break;
        uint32_t cp;
        int k = s[i] == '\\' ? sq_json_escape(s + i, n - i, &cp) : -SQ_JSON_E_CONTROL;
        if (k < 0) {
            if (bad)
                *bad = i;
            return -SQ_EPARSE;
        }
        /* k bytes read, at most k - 1 written (2 -> 1, 6 -> 3, 12 -> 4): o stays behind. */
        o += sq_utf8_encode(cp, (unsigned char *)o);
        i += (size_t)k;
    }
    *outlen = (size_t)(o - out);
    return 0;
}

bool sq_json_str_eq(const char *s, size_t n, const char *name, size_t nlen)
{
    size_t i = 0, j = 0;
    while (i < n) {
        size_t r = str_run(s, i, n);
        if (r > i) {
            if (nlen - j < r - i || memcmp(name + j, s + i, r - i) != 0)
                return false;
            j += r - i;
            i = r;
            if (i >= n)
                break;
        }
        uint32_t cp;
        int k = sq_json_escape(s + i, n - i, &cp);
        if (k < 0)
            return false;
        unsigned char u[4];
        size_t m = sq_utf8_encode(cp, u);
        if (nlen - j < m || memcmp(name + j, u, m) != 0)
            return false;
        j += m;
        i += (size_t)k;
    }
    return j == nlen;
}

/* ---- the walker ---- */

void sq_json_walk_init(struct sq_json_walk *w, const char *s, size_t len, unsigned max_depth,
                       unsigned flags)
{
    w->s = s;
    w->len = s ? len : 0;
    w->pos = 0;
    w->depth = 0;
    w->max_depth = max_depth && max_depth <= SQ_JSON_DEPTH_MAX ? max_depth : SQ_JSON_DEPTH_MAX;
    w->flags = flags;
    w->err = SQ_JSON_E_NONE;
    w->err_at = 0;
    w->_state = ST_ROOT;
}

static int fail(struct sq_json_walk *w, enum sq_json_err e, size_t at)
{
    w->err = e;
    w->err_at = at;
    return -SQ_EPARSE;
}

static inline bool in_object(const struct sq_json_walk *w)
{
    unsigned d = w->depth - 1;
    return w->_obj[d >> 6] >> (d & 63) & 1;
}

/* The string whose opening quote is at s[q]: its end (past the closing quote) into *end. */
static inline int scan_string(struct sq_json_walk *w, size_t q, size_t *end, bool *esc)
{
    const char *s = w->s;
    size_t n = w->len, i = q + 1;
    for (;;) {
        i = str_run(s, i, n);
        if (i >= n)
            return fail(w, SQ_JSON_E_STRING_END, q);
        char c = s[i];
        if (c == '"') {
            *end = i + 1;
            return 0;
        }
        if (c != '\\')
            return fail(w, SQ_JSON_E_CONTROL, i);
        *esc = true;
        if (n - i < 2)
            return fail(w, SQ_JSON_E_STRING_END, q);
        c = s[i + 1];
        if (c != 'u') {
            if (!(c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                  c == 'r' || c == 't'))
                return fail(w, SQ_JSON_E_ESCAPE, i);
            i += 2;
            continue;
        }
        int32_t hi = n - i >= 6 ? hex4(s + i + 2) : -1;
        if (hi < 0)
            return fail(w, SQ_JSON_E_HEX, i);
        size_t k = 6;
        if (SQ_UNLIKELY(w->flags)) {
            if ((w->flags & SQ_JSON_SURROGATES) && hi >= 0xD800 && hi <= 0xDFFF) {
                uint32_t cp;
                int r = sq_json_escape(s + i, n - i, &cp);
                if (r < 0)
                    return fail(w, (enum sq_json_err) - r, i);
                k = (size_t)r;
            } else if ((w->flags & SQ_JSON_NO_NUL) && hi == 0) {
                return fail(w, SQ_JSON_E_NUL, i);
            }
        }
        i += k;
    }
}

/* A closing bracket c at s[i], in a container. */
static inline int close_at(struct sq_json_walk *w, struct sq_json_tok *t, size_t i, char c)
{
    bool obj = in_object(w);
    if (c != (obj ? '}' : ']'))
        return fail(w, SQ_JSON_E_UNEXPECTED, i);
    w->depth--;
    t->type = obj ? SQ_JSON_T_OBJ_END : SQ_JSON_T_ARR_END;
    t->esc = false;
    t->at = i;
    t->len = 1;
    w->pos = i + 1;
    w->_state = w->depth ? ST_AFTER : ST_DONE;
    return 0;
}

/* One token; w->pos and w->_state are current on return, the error's state too (so
 * sq_json_describe can say what was wanted). */
static inline __attribute__((always_inline)) int step(struct sq_json_walk *w, struct sq_json_tok *t)
{
    const char *s = w->s;
    size_t n = w->len, i = skip_ws(s, w->pos, n);
    unsigned st = w->_state;
    w->pos = i;
    if (st == ST_AFTER || st == ST_COLON) {
        if (i >= n)
            return fail(w, SQ_JSON_E_END, n);
        char c = s[i];
        if (st == ST_COLON) {
            if (c != ':')
                return fail(w, SQ_JSON_E_UNEXPECTED, i);
            st = ST_VALUE;
        } else if (c == ',') {
            st = in_object(w) ? ST_KEY : ST_VALUE;
        } else {
            return close_at(w, t, i, c);
        }
        i = skip_ws(s, i + 1, n);
        w->pos = i;
        w->_state = (uint8_t)st;
    }
    t->esc = false;
    if (i >= n) {
        if (st != ST_DONE)
            return fail(w, SQ_JSON_E_END, n);
        t->type = SQ_JSON_T_END;
        t->at = n;
        t->len = 0;
        return 0;
    }
    char c = s[i];
    size_t end;
    switch (st) {
    case ST_DONE:
        return fail(w, SQ_JSON_E_TRAILING, i);
    case ST_OBJ_FIRST:
        if (c == '}')
            return close_at(w, t, i, c);
        /* fall through */
    case ST_KEY:
        if (c != '"')
            return fail(w, SQ_JSON_E_UNEXPECTED, i);
        if (scan_string(w, i, &end, &t->esc) < 0)
            return -SQ_EPARSE;
        t->type = SQ_JSON_T_KEY;
        t->at = i;
        t->len = end - i;
        w->pos = end;
        w->_state = ST_COLON;
        return 0;
    case ST_ARR_FIRST:
        if (c == ']')
            return close_at(w, t, i, c);
        break;
    default:
        break;
    }
    /* A value. */
    switch (c) {
    case '{':
    case '[': {
        if (w->depth >= w->max_depth)
            return fail(w, SQ_JSON_E_DEPTH, i);
        unsigned d = w->depth++;
        uint64_t bit = UINT64_C(1) << (d & 63);
        if (c == '{')
            w->_obj[d >> 6] |= bit;
        else
            w->_obj[d >> 6] &= ~bit;
        t->type = c == '{' ? SQ_JSON_T_OBJ : SQ_JSON_T_ARR;
        t->at = i;
        t->len = 1;
        w->pos = i + 1;
        w->_state = c == '{' ? ST_OBJ_FIRST : ST_ARR_FIRST;
        return 0;
    }
    case '"':
        if (scan_string(w, i, &end, &t->esc) < 0)
            return -SQ_EPARSE;
        t->type = SQ_JSON_T_STR;
        break;
    case 't':
    case 'f':
    case 'n': {
        static const char *const lit[] = {"true", "false", "null"};
        static const enum sq_json_tok_type type[] = {SQ_JSON_T_TRUE, SQ_JSON_T_FALSE,
                                                     SQ_JSON_T_NULL};
        int k = c == 't' ? 0 : c == 'f' ? 1 : 2;
        size_t l = k == 1 ? 5 : 4;
        if (n - i < l || memcmp(s + i, lit[k], l) != 0)
            return fail(w, SQ_JSON_E_LITERAL, i);
        end = i + l;
        t->type = type[k];
        break;
    }
    default:
        if (c != '-' && !is_digit(c))
            return fail(w, SQ_JSON_E_UNEXPECTED, i);
        end = scan_number(s, i, n);
        if (!end)
            return fail(w, SQ_JSON_E_NUMBER, i);
        t->type = SQ_JSON_T_NUM;
        break;
    }
    t->at = i;
    t->len = end - i;
    w->pos = end;
    w->_state = w->depth ? ST_AFTER : ST_DONE;
    return 0;
}

int sq_json_next(struct sq_json_walk *w, struct sq_json_tok *t)
{
    if (w->err)
        return -SQ_EPARSE;
    return step(w, t);
}

int sq_json_skip(struct sq_json_walk *w, struct sq_json_tok *t)
{
    if (w->err)
        return -SQ_EPARSE;
    if (t->type != SQ_JSON_T_OBJ && t->type != SQ_JSON_T_ARR)
        return 0;
    unsigned outer = w->depth - 1; /* t opened the container at this depth */
    struct sq_json_tok x;
    do {
        if (step(w, &x) < 0)
            return -SQ_EPARSE;
    } while (w->depth > outer);
    t->len = x.at + x.len - t->at;
    return 0;
}

int sq_json_peek(struct sq_json_walk *w)
{
    if (w->err)
        return -1;
    w->pos = skip_ws(w->s, w->pos, w->len);
    return w->pos < w->len ? (unsigned char)w->s[w->pos] : -1;
}

int sq_json_sep(struct sq_json_walk *w)
{
    if (w->err)
        return -SQ_EPARSE;
    size_t i = skip_ws(w->s, w->pos, w->len);
    w->pos = i;
    unsigned st = w->_state;
    if (i >= w->len)
        return fail(w, SQ_JSON_E_END, w->len);
    char c = w->s[i];
    if (st == ST_COLON && c == ':')
        w->_state = ST_VALUE;
    else if (st == ST_AFTER && c == ',')
        w->_state = in_object(w) ? ST_KEY : ST_VALUE;
    else
        return fail(w, SQ_JSON_E_UNEXPECTED, i);
    w->pos = i + 1;
    return 0;
}

/* ---- messages ---- */

const char *sq_json_strerror(enum sq_json_err e)
{
    switch (e) {
    case SQ_JSON_E_NONE:
        return "no error";
#define SQ_JSON_ERR_CASE(name, str)                                                                \
    case name:                                                                                     \
        return str;
        SQ_JSON_ERRORS(SQ_JSON_ERR_CASE)
#undef SQ_JSON_ERR_CASE
    }
    return "unknown JSON error";
}

/* What the grammar wanted when the walk stopped. */
static const char *wanted(const struct sq_json_walk *w)
{
    switch (w->_state) {
    case ST_ARR_FIRST:
        return "a value or ']'";
    case ST_OBJ_FIRST:
        return "a string key or '}'";
    case ST_KEY:
        return "a string key";
    case ST_COLON:
        return "':'";
    case ST_AFTER:
        return in_object(w) ? "',' or '}'" : "',' or ']'";
    case ST_DONE:
        return "the end";
    default:
        return "a value";
    }
}

const char *sq_json_describe(const struct sq_json_walk *w, char *buf, size_t len)
{
    if (w->err == SQ_JSON_E_END)
        snprintf(buf, len, "byte %zu: the input ends where %s was expected", w->err_at, wanted(w));
    else if (w->err == SQ_JSON_E_UNEXPECTED)
        snprintf(buf, len, "byte %zu: expected %s", w->err_at, wanted(w));
    else
        snprintf(buf, len, "byte %zu: %s", w->err_at, sq_json_strerror(w->err));
    return buf;
}
