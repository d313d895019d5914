/* base/json.c - see json.h.
 *
 * The walker is a small state machine: _state says what the grammar wants next (the root value,
 * a value, a value or ']', a key or '}', a key, ':', ',' or the container's end, or nothing but
 * whitespace), and one bit per open container says whether it is an object, so a closing
 * bracket is checked against the one that opened. step() is the whole of it: sq_json_next is
 * step() once. sq_json_skip, sq_json_find and sq_json_index, the hot ones (a JSON path skips
 * every value it does not name, once per response), run the same grammar as loops over locals
 * (skip_fast, and find_fast and index_fast over one container's members, skipping the values
 * they pass with it) and, only when that finds a fault, walk again with step() to say exactly
 * what and where: the fault's report is step()'s, whichever way in. The unit tests and
 * fuzz/fuzz_json.c hold the two to the same answers.
 */
#include "base/json.h"

#include <stdio.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

enum { C_WS = 1, C_STR = 2, C_DIGIT = 4 };

/* C_STR: a byte that ends a plain run inside a string (quote, backslash, control). */
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
#define HOT        static inline __attribute__((always_inline))

/* The internals work on pointers, p < end before every read; the API speaks in offsets. */

HOT const char *skip_ws(const char *p, const char *end)
{
    while (p < end && IS(*p, C_WS))
        p++;
    return p;
}

/* The 4 hex digits at p (4 bytes readable), or -1. */
static inline int32_t hex4(const char *p)
{
    int32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = sq_hex_value((unsigned char)p[k]);
        if (h < 0)
            return -1;
        v = v << 4 | h;
    }
    return v;
}

/* The first byte at or after p that ends a plain run inside a string (a quote, a backslash or
 * a control byte), or end. 16 bytes at a time with SSE2 where the compiler has it (every
 * x86-64): bytes equal to '"' or '\\', or at most 0x1f (max(x, 0x1f) == 0x1f), as a bit mask;
 * else 8 at a time in a word (SWAR): (v - 0x01..) & ~v & 0x80.. flags a zero byte of v, exactly
 * for the lowest one (a borrow only taints the bytes above it) and nothing in a word that has
 * none; the same with 0x20.. flags bytes below 0x20. On little-endian machines the lowest flag
 * is the first such byte in memory; elsewhere, and for the last few bytes, byte by byte. */
HOT const char *str_run(const char *p, const char *end)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  ctl = _mm_set1_epi8(0x1f);
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i hit =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
                         _mm_cmpeq_epi8(_mm_max_epu8(x, ctl), ctl));
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (m)
            return p + __builtin_ctz(m);
        p += 16;
    }
#endif
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

HOT const char *digits(const char *p, const char *end)
{
    while (p < end && IS(*p, C_DIGIT))
        p++;
    return p;
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? at p (p < end): its end, or NULL when it
 * is malformed. What follows is not looked at: "01" is the number 0 and then an unexpected '1'. */
HOT const char *scan_number(const char *p, const char *end)
{
    if (*p == '-')
        p++;
    if (p >= end || !IS(*p, C_DIGIT))
        return NULL;
    p = *p == '0' ? p + 1 : digits(p, end);
    if (p < end && *p == '.') {
        if (++p >= end || !IS(*p, C_DIGIT))
            return NULL;
        p = digits(p, end);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        if (++p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !IS(*p, C_DIGIT))
            return NULL;
        p = digits(p, end);
    }
    return p;
}

/* true, false or null at p (*p is 't', 'f' or 'n'): its end and *type, or NULL. */
HOT const char *scan_literal(const char *p, const char *end, enum sq_json_tok_type *type)
{
    size_t room = (size_t)(end - p);
    if (*p == 't' && room >= 4 && memcmp(p, "true", 4) == 0) {
        *type = SQ_JSON_T_TRUE;
        return p + 4;
    }
    if (*p == 'f' && room >= 5 && memcmp(p, "false", 5) == 0) {
        *type = SQ_JSON_T_FALSE;
        return p + 5;
    }
    if (*p == 'n' && room >= 4 && memcmp(p, "null", 4) == 0) {
        *type = SQ_JSON_T_NULL;
        return p + 4;
    }
    return NULL;
}

/* The end of a well-formed string whose opening quote is just before p (past its closing
 * quote), or NULL: the common case, checked by the grammar alone. *esc is set when it holds a
 * backslash. scan_string says what is wrong with one this refuses, or checks the flags. */
HOT const char *string_end(const char *p, const char *end, bool *esc)
{
    for (;;) {
        p = str_run(p, end);
        if (p >= end)
            return NULL;
        char c = *p++;
        if (c == '"')
            return p;
        if (c != '\\' || p >= end)
            return NULL;
        *esc = true;
        c = *p++;
        if (c == 'u') {
            if (end - p < 4 || hex4(p) < 0)
                return NULL;
            p += 4;
        } else if (!(c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                     c == 'r' || c == 't')) {
            return NULL;
        }
    }
}

/* The string whose opening quote is at q: SQ_JSON_E_NONE with its end (past the closing quote)
 * in *at, or the fault with its byte in *at. *esc is set when it holds a backslash. */
static enum sq_json_err scan_string_slow(const char *q, const char *end, unsigned flags,
                                         const char **at, bool *esc)
{
    const char *p = q + 1;
    enum sq_json_err e;
    for (;;) {
        p = str_run(p, end);
        if (p >= end) {
            p = q;
            e = SQ_JSON_E_STRING_END;
            break;
        }
        char c = *p;
        if (c == '"') {
            *at = p + 1;
            return SQ_JSON_E_NONE;
        }
        if (c != '\\') {
            e = SQ_JSON_E_CONTROL;
            break;
        }
        *esc = true;
        if (end - p < 2) {
            p = q;
            e = SQ_JSON_E_STRING_END;
            break;
        }
        c = p[1];
        if (c != 'u') {
            if (!(c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                  c == 'r' || c == 't')) {
                e = SQ_JSON_E_ESCAPE;
                break;
            }
            p += 2;
            continue;
        }
        int32_t hi = end - p >= 6 ? hex4(p + 2) : -1;
        if (hi < 0) {
            e = SQ_JSON_E_HEX;
            break;
        }
        size_t k = 6;
        if (SQ_UNLIKELY(flags)) {
            if ((flags & SQ_JSON_SURROGATES) && hi >= 0xD800 && hi <= 0xDFFF) {
                uint32_t cp;
                int r = sq_json_escape(p, (size_t)(end - p), &cp);
                if (r < 0) {
                    e = (enum sq_json_err) - r;
                    break;
                }
                k = (size_t)r;
            } else if ((flags & SQ_JSON_NO_NUL) && hi == 0) {
                e = SQ_JSON_E_NUL;
                break;
            }
        }
        p += k;
    }
    *at = p;
    return e;
}

HOT enum sq_json_err scan_string(const char *q, const char *end, unsigned flags, const char **at,
                                 bool *esc)
{
    if (SQ_LIKELY(!flags) && (*at = string_end(q + 1, end, esc)))
        return SQ_JSON_E_NONE;
    return scan_string_slow(q, end, flags, at, esc);
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
    const char *p = s, *end = s + n;
    char *o = out;
    for (;;) {
        const char *r = str_run(p, end);
        if (r > p) {
            memmove(o, p, (size_t)(r - p)); /* out may be s, or before it */
            o += r - p;
            p = r;
        }
        if (p >= end)
            break;
        uint32_t cp;
        int k = *p == '\\' ? sq_json_escape(p, (size_t)(end - p), &cp) : -SQ_JSON_E_CONTROL;
        if (k < 0) {
            if (bad)
                *bad = (size_t)(p - s);
            return -SQ_EPARSE;
        }
        /* k bytes read, at most k - 1 written (2 -> 1, 6 -> 3, 12 -> 4): o stays behind. */
        o += sq_utf8_encode(cp, (unsigned char *)o);
        p += k;
    }
    *outlen = (size_t)(o - out);
    return 0;
}

bool sq_json_str_eq(const char *s, size_t n, const char *name, size_t nlen)
{
    const char *p = s, *end = s + n;
    size_t j = 0;
    while (p < end) {
        const char *r = str_run(p, end);
        if (r > p) {
            size_t m = (size_t)(r - p);
            if (nlen - j < m || memcmp(name + j, p, m) != 0)
                return false;
            j += m;
            p = r;
            if (p >= end)
                break;
        }
        uint32_t cp;
        int k = sq_json_escape(p, (size_t)(end - p), &cp);
        if (k < 0)
            return false;
        unsigned char u[4];
        size_t m = sq_utf8_encode(cp, u);
        if (nlen - j < m || memcmp(name + j, u, m) != 0)
            return false;
        j += m;
        p += k;
    }
    return j == nlen;
}

/* ---- the walker ---- */

/* ST_ROOT is 0: sq_json_walk_init (json.h) starts there. */
_Static_assert(ST_ROOT == 0, "sq_json_walk_init starts at ST_ROOT");

static int fail(struct sq_json_walk *w, enum sq_json_err e, const char *at)
{
    w->err = e;
    w->err_at = (size_t)(at - w->s);
    return -SQ_EPARSE;
}

static inline bool obj_at(const uint64_t *obj, unsigned d)
{
    return obj[d >> 6] >> (d & 63) & 1;
}

static inline bool in_object(const struct sq_json_walk *w)
{
    return obj_at(w->_obj, w->depth - 1);
}

/* The innermost container closed: what follows is a separator or its parent's end, or nothing
 * at all after the root. */
static inline void left(struct sq_json_walk *w)
{
    w->depth--;
    w->_state = w->depth ? ST_AFTER : ST_DONE;
}

static inline void tok(struct sq_json_tok *t, enum sq_json_tok_type type, const char *s,
                       const char *p, const char *q)
{
    t->type = type;
    t->at = (size_t)(p - s);
    t->len = (size_t)(q - p);
}

/* A closing bracket at p, in a container. */
static inline int close_at(struct sq_json_walk *w, struct sq_json_tok *t, const char *p)
{
    bool obj = in_object(w);
    if (*p != (obj ? '}' : ']'))
        return fail(w, SQ_JSON_E_UNEXPECTED, p);
    left(w);
    t->esc = false;
    tok(t, obj ? SQ_JSON_T_OBJ_END : SQ_JSON_T_ARR_END, w->s, p, p + 1);
    w->pos = (size_t)(p + 1 - w->s);
    return 0;
}

/* One token. w->pos and w->_state are current on return, on an error too (so that
 * sq_json_describe can say what the grammar wanted). */
static inline __attribute__((always_inline)) int step(struct sq_json_walk *w, struct sq_json_tok *t)
{
    const char *s = w->s, *end = s + w->len, *p = skip_ws(s + w->pos, end), *q;
    unsigned st = w->_state;
    enum sq_json_err e;
    w->pos = (size_t)(p - s);
    if (st == ST_AFTER || st == ST_COLON) {
        if (p >= end)
            return fail(w, SQ_JSON_E_END, end);
        if (st == ST_COLON) {
            if (*p != ':')
                return fail(w, SQ_JSON_E_UNEXPECTED, p);
            st = ST_VALUE;
        } else if (*p == ',') {
            st = in_object(w) ? ST_KEY : ST_VALUE;
        } else {
            return close_at(w, t, p);
        }
        p = skip_ws(p + 1, end);
        w->pos = (size_t)(p - s);
        w->_state = (uint8_t)st;
    }
    t->esc = false;
    if (p >= end) {
        if (st != ST_DONE)
            return fail(w, SQ_JSON_E_END, end);
        tok(t, SQ_JSON_T_END, s, end, end);
        return 0;
    }
    switch (st) {
    case ST_DONE:
        return fail(w, SQ_JSON_E_TRAILING, p);
    case ST_OBJ_FIRST:
        if (*p == '}')
            return close_at(w, t, p);
        /* fall through */
    case ST_KEY:
        if (*p != '"')
            return fail(w, SQ_JSON_E_UNEXPECTED, p);
        if ((e = scan_string(p, end, w->flags, &q, &t->esc)))
            return fail(w, e, q);
        tok(t, SQ_JSON_T_KEY, s, p, q);
        w->pos = (size_t)(q - s);
        w->_state = ST_COLON;
        return 0;
    case ST_ARR_FIRST:
        if (*p == ']')
            return close_at(w, t, p);
        break;
    default:
        break;
    }
    /* A value. */
    switch (*p) {
    case '{':
    case '[': {
        if (w->depth >= w->max_depth)
            return fail(w, SQ_JSON_E_DEPTH, p);
        unsigned d = w->depth++;
        uint64_t bit = UINT64_C(1) << (d & 63);
        bool obj = *p == '{';
        if (obj)
            w->_obj[d >> 6] |= bit;
        else
            w->_obj[d >> 6] &= ~bit;
        tok(t, obj ? SQ_JSON_T_OBJ : SQ_JSON_T_ARR, s, p, p + 1);
        w->pos = (size_t)(p + 1 - s);
        w->_state = obj ? ST_OBJ_FIRST : ST_ARR_FIRST;
        return 0;
    }
    case '"':
        if ((e = scan_string(p, end, w->flags, &q, &t->esc)))
            return fail(w, e, q);
        t->type = SQ_JSON_T_STR;
        break;
    case 't':
    case 'f':
    case 'n':
        if (!(q = scan_literal(p, end, &t->type)))
            return fail(w, SQ_JSON_E_LITERAL, p);
        break;
    default:
        if (*p != '-' && !IS(*p, C_DIGIT))
            return fail(w, SQ_JSON_E_UNEXPECTED, p);
        if (!(q = scan_number(p, end)))
            return fail(w, SQ_JSON_E_NUMBER, p);
        t->type = SQ_JSON_T_NUM;
        break;
    }
    tok(t, t->type, s, p, q);
    w->pos = (size_t)(q - s);
    w->_state = w->depth ? ST_AFTER : ST_DONE;
    return 0;
}

int sq_json_next(struct sq_json_walk *w, struct sq_json_tok *t)
{
    if (w->err)
        return -SQ_EPARSE;
    return step(w, t);
}

/* The inside of a key, k[0, n), is name[0, nlen): by its bytes when it has no escape. */
HOT bool key_eq(const char *k, size_t n, bool esc, const char *name, size_t nlen)
{
    return esc ? sq_json_str_eq(k, n, name, nlen) : n == nlen && memcmp(k, name, n) == 0;
}

/* The fast way past a container whose opening bracket is just before p and which is open at
 * depth d (1-based: the root's is 1; d <= max): the byte past its matching closer, or NULL when
 * anything in it is wrong (the caller then walks again with step() to learn what and where).
 * step()'s grammar as one loop over locals; close[] holds the closer each container opened here
 * needs, so that no bit of the walker's changes. */
static const char *skip_fast(const char *p, const char *end, unsigned d, unsigned max,
                             unsigned flags, char outer_closer)
{
    char close[SQ_JSON_DEPTH_MAX];
    unsigned k = 0; /* containers opened here */
    char closer = outer_closer;
    bool esc;
    const char *q;
    enum sq_json_tok_type type;
    p = skip_ws(p, end);
    if (p < end && *p == closer) {
        p++;
        goto closed;
    }
    if (closer == '}')
        goto key;
value:
    p = skip_ws(p, end);
    if (p >= end)
        return NULL;
    switch (*p) {
    case '{':
    case '[':
        if (d + k >= max)
            return NULL;
        closer = close[k++] = *p == '{' ? '}' : ']';
        p = skip_ws(p + 1, end);
        if (p < end && *p == closer) {
            p++;
            goto closed;
        }
        if (closer == '}')
            goto key;
        goto value;
    case '"':
        if (scan_string(p, end, flags, &q, &esc))
            return NULL;
        p = q;
        break;
    case 't':
    case 'f':
    case 'n':
        if (!(p = scan_literal(p, end, &type)))
            return NULL;
        break;
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        if (!(p = scan_number(p, end)))
            return NULL;
        break;
    default:
        return NULL;
    }
after:
    p = skip_ws(p, end);
    if (p >= end)
        return NULL;
    if (*p == ',') {
        p++;
        if (closer == ']')
            goto value;
        goto key;
    }
    if (*p != closer)
        return NULL;
    p++;
closed:
    if (k == 0)
        return p;
    k--;
    closer = k ? close[k - 1] : outer_closer;
    goto after;
key:
    p = skip_ws(p, end);
    if (p >= end || *p != '"' || scan_string(p, end, flags, &q, &esc))
        return NULL;
    p = skip_ws(q, end);
    if (p >= end || *p != ':')
        return NULL;
    p++;
    goto value;
}

/* The end of the value at p (p < end, no whitespace before it) inside d open containers, or
 * NULL. A container is skipped by skip_fast, out of line: the members of the one being searched
 * and those of the ones inside it then take different branches, as they take different paths. */
HOT const char *value_fast(const char *p, const char *end, unsigned d, unsigned max, unsigned flags)
{
    const char *q;
    bool esc;
    enum sq_json_tok_type type;
    switch (*p) {
    case '"':
        return scan_string(p, end, flags, &q, &esc) ? NULL : q;
    case '{':
    case '[':
        return d < max ? skip_fast(p + 1, end, d + 1, max, flags, *p == '{' ? '}' : ']') : NULL;
    case 't':
    case 'f':
    case 'n':
        return scan_literal(p, end, &type);
    default:
        return *p == '-' || IS(*p, C_DIGIT) ? scan_number(p, end) : NULL;
    }
}

/* After a value in a container whose closer is c: the byte after a ',' (*closed false) or past
 * c (*closed true); NULL for anything else. */
HOT const char *comma_or(const char *p, const char *end, char c, bool *closed)
{
    p = skip_ws(p, end);
    if (p >= end || (*p != ',' && *p != c))
        return NULL;
    *closed = *p == c;
    return p + 1;
}

/* The fast find: from p, just after the '{' of the object open at depth d or (after) just after
 * one of its values, to the byte after the ':' of its first member whose key is name[0, nlen]
 * (*found set), or the byte past its '}'; NULL on any fault. */
static const char *find_fast(const char *p, const char *end, unsigned d, unsigned max,
                             unsigned flags, bool after, const char *name, size_t nlen, bool *found)
{
    bool closed;
    const char *q;
    bool esc;
    if (after)
        goto after;
    p = skip_ws(p, end);
    if (p < end && *p == '}')
        return p + 1;
    for (;;) {
        p = skip_ws(p, end);
        esc = false;
        if (p >= end || *p != '"' || scan_string(p, end, flags, &q, &esc))
            return NULL;
        bool eq = key_eq(p + 1, (size_t)(q - p) - 2, esc, name, nlen);
        p = skip_ws(q, end);
        if (p >= end || *p != ':')
            return NULL;
        p++;
        if (eq) {
            *found = true;
            return p;
        }
        p = skip_ws(p, end);
        if (p >= end || !(p = value_fast(p, end, d, max, flags)))
            return NULL;
    after:
        if (!(p = comma_or(p, end, '}', &closed)) || closed)
            return p;
    }
}

/* The fast index: from p, just after the '[' of the array open at depth d, to its value number
 * index (*found set), or the byte past its ']'; NULL on any fault. */
static const char *index_fast(const char *p, const char *end, unsigned d, unsigned max,
                              unsigned flags, size_t index, bool *found)
{
    p = skip_ws(p, end);
    if (p < end && *p == ']')
        return p + 1;
    for (size_t i = 0;; i++) {
        p = skip_ws(p, end);
        if (p >= end)
            return NULL;
        if (i == index) {
            *found = true;
            return p;
        }
        bool closed;
        if (!(p = value_fast(p, end, d, max, flags)) || !(p = comma_or(p, end, ']', &closed)) ||
            closed)
            return p;
    }
}

/* Past the container t opened (its token just given), or nothing for another token. */
HOT int skip_value(struct sq_json_walk *w, struct sq_json_tok *t)
{
    if (t->type != SQ_JSON_T_OBJ && t->type != SQ_JSON_T_ARR)
        return 0;
    unsigned outer = w->depth - 1; /* t opened the container at this depth */
    const char *end = skip_fast(w->s + w->pos, w->s + w->len, w->depth, w->max_depth, w->flags,
                                in_object(w) ? '}' : ']');
    if (end) {
        w->pos = (size_t)(end - w->s);
        left(w);
        t->len = w->pos - t->at;
        return 0;
    }
    /* Something in it is wrong: walk it again token by token, for what and where. */
    struct sq_json_tok x;
    do {
        if (step(w, &x) < 0)
            return -SQ_EPARSE;
    } while (w->depth > outer);
    t->len = x.at + x.len - t->at;
    return 0;
}

int sq_json_skip(struct sq_json_walk *w, struct sq_json_tok *t)
{
    if (w->err)
        return -SQ_EPARSE;
    return skip_value(w, t);
}

/* Where a fast find or index stopped: before the value found (1, its first token in *t), or
 * past the container's closer (0). */
static int landed(struct sq_json_walk *w, const char *p, bool found, struct sq_json_tok *t)
{
    w->pos = (size_t)(p - w->s);
    if (found) {
        w->_state = ST_VALUE;
        return step(w, t) < 0 ? -SQ_EPARSE : 1;
    }
    left(w);
    return 0;
}

/* Where a value is due (the root, after ':' or ',' in an array; for an object also just after
 * '['): takes its opening bracket when it is open, and returns 1; 0 when the value due is
 * something else (nothing taken but whitespace); 1 too when no value is due (the walker is
 * inside the container already: between an object's members, or just after '[' for an array). */
static int enter(struct sq_json_walk *w, char open)
{
    unsigned st = w->_state;
    if (st != ST_ROOT && st != ST_VALUE && !(st == ST_ARR_FIRST && open == '{'))
        return 1;
    const char *p = skip_ws(w->s + w->pos, w->s + w->len);
    w->pos = (size_t)(p - w->s);
    if (p >= w->s + w->len || *p != open)
        return 0;
    if (w->depth >= w->max_depth)
        return fail(w, SQ_JSON_E_DEPTH, p);
    unsigned d = w->depth++;
    uint64_t bit = UINT64_C(1) << (d & 63);
    if (open == '{')
        w->_obj[d >> 6] |= bit;
    else
        w->_obj[d >> 6] &= ~bit;
    w->pos++;
    w->_state = open == '{' ? ST_OBJ_FIRST : ST_ARR_FIRST;
    return 1;
}

int sq_json_find(struct sq_json_walk *w, const char *name, size_t nlen, struct sq_json_tok *t)
{
    if (w->err)
        return -SQ_EPARSE;
    int in = enter(w, '{');
    if (in <= 0)
        return in;
    unsigned st = w->_state;
    if ((st == ST_OBJ_FIRST || st == ST_AFTER) && in_object(w)) {
        bool found = false;
        const char *p = find_fast(w->s + w->pos, w->s + w->len, w->depth, w->max_depth, w->flags,
                                  st == ST_AFTER, name, nlen, &found);
        if (p)
            return landed(w, p, found, t);
    }
    /* Something is wrong (or this is not between an object's members): again by step(). */
    struct sq_json_tok k;
    for (;;) {
        if (step(w, &k) < 0)
            return -SQ_EPARSE;
        if (k.type == SQ_JSON_T_OBJ_END)
            return 0;
        if (k.type != SQ_JSON_T_KEY)
            return fail(w, SQ_JSON_E_UNEXPECTED, w->s + k.at);
        bool eq = key_eq(w->s + k.at + 1, k.len - 2, k.esc, name, nlen);
        if (step(w, t) < 0)
            return -SQ_EPARSE;
        if (eq)
            return 1;
        if (skip_value(w, t) < 0)
            return -SQ_EPARSE;
    }
}

int sq_json_index(struct sq_json_walk *w, size_t n, struct sq_json_tok *t)
{
    if (w->err)
        return -SQ_EPARSE;
    int in = enter(w, '[');
    if (in <= 0)
        return in;
    if (w->_state == ST_ARR_FIRST) {
        bool found = false;
        const char *p =
            index_fast(w->s + w->pos, w->s + w->len, w->depth, w->max_depth, w->flags, n, &found);
        if (p)
            return landed(w, p, found, t);
    }
    /* Something is wrong (or this is not just after a '['): again by step(). */
    if (w->_state != ST_ARR_FIRST)
        return fail(w, SQ_JSON_E_UNEXPECTED, w->s + w->pos);
    for (size_t i = 0; i < n; i++) {
        if (step(w, t) < 0)
            return -SQ_EPARSE;
        if (t->type == SQ_JSON_T_ARR_END)
            return 0;
        if (skip_value(w, t) < 0)
            return -SQ_EPARSE;
    }
    if (step(w, t) < 0) /* value n, or the ']' before it */
        return -SQ_EPARSE;
    return t->type == SQ_JSON_T_ARR_END ? 0 : 1;
}

int sq_json_sep(struct sq_json_walk *w)
{
    if (w->err)
        return -SQ_EPARSE;
    const char *end = w->s + w->len, *p = skip_ws(w->s + w->pos, end);
    unsigned st = w->_state;
    w->pos = (size_t)(p - w->s);
    if (p >= end)
        return fail(w, SQ_JSON_E_END, end);
    if (st == ST_COLON && *p == ':')
        w->_state = ST_VALUE;
    else if (st == ST_AFTER && *p == ',')
        w->_state = in_object(w) ? ST_KEY : ST_VALUE;
    else
        return fail(w, SQ_JSON_E_UNEXPECTED, p);
    w->pos++;
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
