/* tests/unit/test_json.c - base/json: the token walker, skip, peek/sep, the escape decoder, the
 * unescaper and the decoding compare.
 *
 * The walker's table gives each input's whole token stream (or the error that stops it, with
 * its byte), written compactly: "{@0 K@1+3 N@5+1 }@6 $@7" (a '*' after a string marks one with
 * escapes; "!number@5" an error). Each input runs placed right before a PROT_NONE guard page,
 * whole and as every truncated prefix; a prefix gives the whole input's tokens up to where it was
 * cut (a number there may be cut shorter), then stops with an error that a cut explains, or with
 * the whole input's own error when that lies inside the prefix.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/json.h"

#include "guard.h" /* guard pages, CHECK */

static const char *err_name(enum sq_json_err e)
{
    static const char *const names[] = {
        [SQ_JSON_E_NONE] = "none",
        [SQ_JSON_E_END] = "end",
        [SQ_JSON_E_UNEXPECTED] = "unexpected",
        [SQ_JSON_E_TRAILING] = "trailing",
        [SQ_JSON_E_DEPTH] = "depth",
        [SQ_JSON_E_LITERAL] = "literal",
        [SQ_JSON_E_NUMBER] = "number",
        [SQ_JSON_E_STRING_END] = "string_end",
        [SQ_JSON_E_CONTROL] = "control",
        [SQ_JSON_E_ESCAPE] = "escape",
        [SQ_JSON_E_HEX] = "hex",
        [SQ_JSON_E_LONE_HIGH] = "lone_high",
        [SQ_JSON_E_LONE_LOW] = "lone_low",
        [SQ_JSON_E_NUL] = "nul",
    };
    return names[e];
}

/* One walked token, kept to compare a prefix's walk with the whole input's. */
struct rec {
    enum sq_json_tok_type type;
    size_t at, len;
    bool esc;
};

struct walk {
    struct rec tok[600];
    size_t n;
    enum sq_json_err err;
    size_t err_at;
    char text[8192];
};

/* Skips the root value with sq_json_skip and walks on: the same stop, at the same byte, as the
 * walk token by token (the fast loop and step() agree); root_end: where the root value ends
 * (0: it never does). */
static void skip_agrees(const char *s, size_t n, unsigned depth, unsigned flags,
                        const struct walk *ref, size_t root_end)
{
    struct sq_json_walk w;
    struct sq_json_tok t;
    sq_json_walk_init(&w, s, n, depth, flags);
    if (sq_json_next(&w, &t) < 0)
        return;
    bool box = t.type == SQ_JSON_T_OBJ || t.type == SQ_JSON_T_ARR;
    int rc = sq_json_skip(&w, &t);
    if (rc == 0 && box)
        assert_int_equal(t.at + t.len, root_end);
    while (rc == 0 && t.type != SQ_JSON_T_END)
        rc = sq_json_next(&w, &t);
    CHECK(w.err == ref->err && (rc == 0 || w.err_at == ref->err_at), "skip: %s@%zu, the walk: %s\n",
          err_name(w.err), w.err_at, ref->text);
}

/* Walks s[0, n) to its end or its error; every token must lie inside the input. */
static void walk(const char *s, size_t n, unsigned depth, unsigned flags, struct walk *out)
{
    static const char sym[] = {0, '{', '}', '[', ']', 'K', 'S', 'N', 't', 'f', 'n', '$'};
    struct sq_json_walk w;
    sq_json_walk_init(&w, s, n, depth, flags);
    size_t tl = 0, open = 0, root_end = 0;
    out->n = 0;
    out->text[0] = '\0';
    for (;;) {
        struct sq_json_tok t;
        int rc = sq_json_next(&w, &t);
        if (rc < 0) {
            assert_int_equal(rc, -SQ_EPARSE);
            assert_true(w.err != SQ_JSON_E_NONE && w.err_at <= n);
            out->err = w.err;
            out->err_at = w.err_at;
            tl += (size_t)snprintf(out->text + tl, sizeof(out->text) - tl, "%s!%s@%zu",
                                   tl ? " " : "", err_name(w.err), w.err_at);
            /* sticky */
            assert_int_equal(sq_json_next(&w, &t), -SQ_EPARSE);
            assert_int_equal(sq_json_skip(&w, &t), -SQ_EPARSE);
            assert_int_equal(sq_json_peek(&w), -1);
            assert_int_equal(w.err_at, out->err_at);
            skip_agrees(s, n, depth, flags, out, root_end);
            return;
        }
        assert_true(t.at + t.len <= n);
        assert_true(out->n < SQ_ARRAY_LEN(out->tok));
        out->tok[out->n++] = (struct rec){t.type, t.at, t.len, t.esc};
        if (t.type == SQ_JSON_T_OBJ || t.type == SQ_JSON_T_OBJ_END || t.type == SQ_JSON_T_ARR ||
            t.type == SQ_JSON_T_ARR_END || t.type == SQ_JSON_T_END) {
            assert_int_equal(t.len, t.type == SQ_JSON_T_END ? 0 : 1);
            tl += (size_t)snprintf(out->text + tl, sizeof(out->text) - tl, "%s%c@%zu",
                                   tl ? " " : "", sym[t.type], t.at);
        } else {
            tl += (size_t)snprintf(out->text + tl, sizeof(out->text) - tl, "%s%c%s@%zu+%zu",
                                   tl ? " " : "", sym[t.type], t.esc ? "*" : "", t.at, t.len);
        }
        if (t.type == SQ_JSON_T_END) {
            out->err = SQ_JSON_E_NONE;
            /* END again, and nothing moves */
            assert_int_equal(sq_json_next(&w, &t), 0);
            assert_int_equal(t.type, SQ_JSON_T_END);
            assert_int_equal(sq_json_peek(&w), -1);
            skip_agrees(s, n, depth, flags, out, root_end);
            return;
        }
        if (t.type == SQ_JSON_T_OBJ || t.type == SQ_JSON_T_ARR)
            open++;
        else if ((t.type == SQ_JSON_T_OBJ_END || t.type == SQ_JSON_T_ARR_END) && --open == 0)
            root_end = t.at + 1;
    }
}

/* ---- find and index, against the same done token by token ---- */

/* Past the value whose first token t next() just gave, by next() alone. */
static int ref_skip(struct sq_json_walk *w, struct sq_json_tok *t)
{
    if (t->type != SQ_JSON_T_OBJ && t->type != SQ_JSON_T_ARR)
        return 0;
    size_t open = 1, at = t->at;
    while (open) {
        if (sq_json_next(w, t) < 0)
            return -SQ_EPARSE;
        if (t->type == SQ_JSON_T_OBJ || t->type == SQ_JSON_T_ARR)
            open++;
        else if (t->type == SQ_JSON_T_OBJ_END || t->type == SQ_JSON_T_ARR_END)
            open--;
    }
    t->len = t->at + 1 - at;
    t->at = at;
    return 0;
}

/* What a search shows: the error, "none", or the found value's first token t; then, walking on
 * to the end, how the walk ends. */
static void outcome(struct sq_json_walk *w, int rc, struct sq_json_tok t, char *out, size_t len)
{
    size_t n;
    if (rc < 0) {
        snprintf(out, len, "!%s@%zu", err_name(w->err), w->err_at);
        return;
    }
    if (rc == 0)
        n = (size_t)snprintf(out, len, "none");
    else
        n = (size_t)snprintf(out, len, "%d@%zu+%zu", t.type, t.at, t.len);
    if (rc == 1 && ref_skip(w, &t) < 0) {
        snprintf(out + n, len - n, " !%s@%zu", err_name(w->err), w->err_at);
        return;
    }
    while (sq_json_next(w, &t) == 0 && t.type != SQ_JSON_T_END)
        if (ref_skip(w, &t) < 0)
            break;
    snprintf(out + n, len - n, " %s@%zu", err_name(w->err), w->err_at);
}

/* sq_json_find and sq_json_index (their fast loop and their slow way both) give what walking
 * token by token gives, for a few names and indexes, on s[0, n). */
static void find_index_agree(const char *s, size_t n, unsigned depth, unsigned flags)
{
    static const char *const names[] = {"a", "b", "c", "k", "A", "", "b\n", "\xf0\x9f\x98\x80"};
    struct sq_json_walk w, r;
    struct sq_json_tok t, v;
    char got[128], want[128];
    int rc;
    sq_json_walk_init(&w, s, n, depth, flags);
    if (sq_json_next(&w, &t) < 0)
        return;
    if (t.type == SQ_JSON_T_OBJ) {
        for (size_t i = 0; i < SQ_ARRAY_LEN(names); i++) {
            size_t nl = strlen(names[i]);
            /* from just after '{', and again from after the first member's value */
            for (int from_after = 0; from_after < 2; from_after++) {
                sq_json_walk_init(&w, s, n, depth, flags);
                assert_int_equal(sq_json_next(&w, &t), 0);
                if (from_after) {
                    if (sq_json_next(&w, &t) < 0 || t.type != SQ_JSON_T_KEY ||
                        sq_json_next(&w, &t) < 0 || ref_skip(&w, &t) < 0)
                        continue;
                }
                r = w;
                memset(&v, 0, sizeof(v));
                rc = sq_json_find(&w, names[i], nl, &v);
                outcome(&w, rc, v, got, sizeof(got));
                memset(&v, 0, sizeof(v));
                for (;;) {
                    if ((rc = sq_json_next(&r, &t)) < 0 || t.type == SQ_JSON_T_OBJ_END) {
                        rc = rc < 0 ? rc : 0;
                        break;
                    }
                    bool eq = sq_json_str_eq(s + t.at + 1, t.len - 2, names[i], nl);
                    if (sq_json_next(&r, &v) < 0) {
                        rc = -SQ_EPARSE;
                        break;
                    }
                    if (eq) {
                        rc = 1;
                        break;
                    }
                    if (ref_skip(&r, &v) < 0) {
                        rc = -SQ_EPARSE;
                        break;
                    }
                }
                outcome(&r, rc, v, want, sizeof(want));
                CHECK(!strcmp(got, want), "find '%s' in '%.*s': %s, by tokens %s\n", names[i],
                      (int)n, s, got, want);
            }
        }
    } else if (t.type == SQ_JSON_T_ARR) {
        for (size_t k = 0; k < 6; k++) {
            sq_json_walk_init(&w, s, n, depth, flags);
            assert_int_equal(sq_json_next(&w, &t), 0);
            r = w;
            memset(&v, 0, sizeof(v));
            rc = sq_json_index(&w, k, &v);
            outcome(&w, rc, v, got, sizeof(got));
            for (size_t i = 0; i <= k; i++) {
                if ((rc = sq_json_next(&r, &v)) < 0)
                    break;
                if (v.type == SQ_JSON_T_ARR_END) {
                    rc = 0;
                    break;
                }
                if (i == k) {
                    rc = 1;
                    break;
                }
                if (ref_skip(&r, &v) < 0) {
                    rc = -SQ_EPARSE;
                    break;
                }
            }
            outcome(&r, rc, v, want, sizeof(want));
            CHECK(!strcmp(got, want), "index %zu in '%.*s': %s, by tokens %s\n", k, (int)n, s, got,
                  want);
        }
    }
    /* from the root, before its first token: find takes the '{' of an object due, index the '['
     * of an array; anything else is 0 with the walker where it was (next() reads the root) */
    for (int arr = 0; arr < 2; arr++) {
        sq_json_walk_init(&w, s, n, depth, flags);
        memset(&v, 0, sizeof(v));
        rc = arr ? sq_json_index(&w, 1, &v) : sq_json_find(&w, "a", 1, &v);
        sq_json_walk_init(&r, s, n, depth, flags);
        bool due = sq_json_next(&r, &t) == 0 && t.type == (arr ? SQ_JSON_T_ARR : SQ_JSON_T_OBJ);
        if (!due) {
            if (r.err == SQ_JSON_E_DEPTH) {
                CHECK(rc == -SQ_EPARSE && w.err == r.err && w.err_at == r.err_at, "root %d\n", arr);
                continue;
            }
            CHECK(rc == 0, "root %s of '%.*s': %d\n", arr ? "index" : "find", (int)n, s, rc);
            struct sq_json_tok a, b;
            sq_json_walk_init(&r, s, n, depth, flags);
            int ra = sq_json_next(&w, &a), rb = sq_json_next(&r, &b);
            CHECK(ra == rb && (ra < 0 ? w.err == r.err && w.err_at == r.err_at
                                      : a.type == b.type && a.at == b.at && a.len == b.len),
                  "root of '%.*s': the walker moved\n", (int)n, s);
            continue;
        }
        outcome(&w, rc, v, got, sizeof(got));
        memset(&v, 0, sizeof(v));
        rc = arr ? sq_json_index(&r, 1, &v) : sq_json_find(&r, "a", 1, &v);
        outcome(&r, rc, v, want, sizeof(want));
        CHECK(!strcmp(got, want), "root %s of '%.*s': %s, from inside %s\n", arr ? "index" : "find",
              (int)n, s, got, want);
    }
    /* misuse: not between members, not after '[' */
    sq_json_walk_init(&w, s, n, depth, flags);
    if (sq_json_next(&w, &t) == 0 && t.type != SQ_JSON_T_OBJ && t.type != SQ_JSON_T_ARR &&
        t.type != SQ_JSON_T_END) {
        rc = sq_json_find(&w, "a", 1, &v);
        assert_true(rc == 0 || rc == -SQ_EPARSE);
    }
}

/* An error a cut can explain: the input stopped inside a token or between tokens. */
static bool cut_error(enum sq_json_err e)
{
    return e == SQ_JSON_E_END || e == SQ_JSON_E_STRING_END || e == SQ_JSON_E_LITERAL ||
           e == SQ_JSON_E_NUMBER || e == SQ_JSON_E_HEX || e == SQ_JSON_E_LONE_HIGH;
}

struct wcase {
    const char *in;
    const char *want;
    unsigned depth;
    unsigned flags;
    size_t len; /* 0: strlen(in) */
};

#define SUR  SQ_JSON_SURROGATES
#define NNUL SQ_JSON_NO_NUL

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct wcase wcases[] = {
    /* nothing, or nothing but whitespace */
    {"", "!end@0"},
    {" \t\r\n", "!end@4"},
    {"\f1", "!unexpected@0"}, /* form feed and vertical tab are not JSON whitespace */
    {"\v1", "!unexpected@0"},
    /* scalars at the root */
    {"true", "t@0+4 $@4"},
    {"false", "f@0+5 $@5"},
    {"null", "n@0+4 $@4"},
    {" null \n", "n@1+4 $@7"},
    {"tru", "!literal@0"},
    {"truex", "t@0+4 !trailing@4"},
    {"nul", "!literal@0"},
    {"nulL", "!literal@0"},
    {"True", "!unexpected@0"},
    {"x", "!unexpected@0"},
    {"\"s\"", "S@0+3 $@3"},
    {"\"\"", "S@0+2 $@2"},
    /* numbers at their edges */
    {"0", "N@0+1 $@1"},
    {"-0", "N@0+2 $@2"},
    {"-0.0e-0", "N@0+7 $@7"},
    {"01", "N@0+1 !trailing@1"},
    {"-01", "N@0+2 !trailing@2"},
    {"00", "N@0+1 !trailing@1"},
    {"1234567890", "N@0+10 $@10"},
    {"-", "!number@0"},
    {"-a", "!number@0"},
    {"+1", "!unexpected@0"},
    {".5", "!unexpected@0"},
    {"1.", "!number@0"},
    {"1.e3", "!number@0"},
    {"1e", "!number@0"},
    {"1e+", "!number@0"},
    {"1E-5", "N@0+4 $@4"},
    {"1e+05", "N@0+5 $@5"},
    {"1.5e308", "N@0+7 $@7"},
    {"1e999999999999999999999", "N@0+23 $@23"}, /* kept as written: no conversion, no range */
    {"99999999999999999999999999999999", "N@0+32 $@32"},
    {"-9223372036854775809", "N@0+20 $@20"},
    {"1.5.5", "N@0+3 !trailing@3"},
    {"1e5e5", "N@0+3 !trailing@3"},
    {"0x10", "N@0+1 !trailing@1"},
    {"[-]", "[@0 !number@1"},
    {"[1,-1.5e+2,0]", "[@0 N@1+1 N@3+7 N@11+1 ]@12 $@13"},
    /* strings: escapes, raw bytes, controls */
    {"\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"", "S*@0+27 $@27"},
    {"\"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\"", "S*@0+32 $@32"},
    {"\"caf\xc3\xa9 \x7f \xff\"", "S@0+11 $@11"}, /* bytes at or above 0x7f pass, valid or not */
    {"\"\\x\"", "!escape@1"},
    {"\"\\'\"", "!escape@1"},
    {"\"\\U0041\"", "!escape@1"},
    {"\"\\u12G4\"", "!hex@1"},
    {"\"\\u12\"", "!hex@1"},
    {"\"ab\\", "!string_end@0"},
    {"\"ab", "!string_end@0"},
    {"\"a\nb\"", "!control@2"},
    {"\"a\tb\"", "!control@2"},
    {"\"\x1f\"", "!control@1"},
    {"\"a\0b\"", "!control@2", 0, 0, 5},
    {"\"0123456789abcdef\x01\"", "!control@17"}, /* found by the 8-byte scan */
    {"\"0123456\"89abcdef\"", "S@0+9 !trailing@9"},
    {"\"0123456\\\\89abcdef\"", "S*@0+19 $@19"},
    /* lone surrogates: well formed by the grammar; refused with SQ_JSON_SURROGATES */
    {"\"\\ud800\"", "S*@0+8 $@8"},
    {"\"\\udc00x\"", "S*@0+9 $@9"},
    {"\"\\ud800\\ud800\"", "S*@0+14 $@14"},
    {"\"\\ud800\"", "!lone_high@1", 0, SUR},
    {"\"\\ud800x\"", "!lone_high@1", 0, SUR},
    {"\"\\ud800\\u0041\"", "!lone_high@1", 0, SUR},
    {"\"\\ud800\\ud800\"", "!lone_high@1", 0, SUR},
    {"\"\\ud800\\u12G4\"", "!lone_high@1", 0, SUR}, /* the first fault, left to right */
    {"\"\\ud800\\n\"", "!lone_high@1", 0, SUR},
    {"\"\\udc00\"", "!lone_low@1", 0, SUR},
    {"\"x\\uDFFF\"", "!lone_low@2", 0, SUR},
    {"\"\\udbff\\udfff\\ud800\\udc00\"", "S*@0+26 $@26", 0, SUR},
    {"\"\\ud83d\\ude00\\x\"", "!escape@13", 0, SUR},
    /* \u0000 */
    {"\"\\u0000\"", "S*@0+8 $@8"},
    {"\"a\\u0000\"", "!nul@2", 0, NNUL},
    {"\"\\u0001\\u0100\"", "S*@0+14 $@14", 0, NNUL},
    {"\"\\ud800\\u0000\"", "!lone_high@1", 0, SUR | NNUL},
    {"\"\\u0000\\ud800\"", "!nul@1", 0, SUR | NNUL},
    /* objects and arrays */
    {"{}", "{@0 }@1 $@2"},
    {"[]", "[@0 ]@1 $@2"},
    {" { \"a\" : 1 , \"b\\n\" : [ true , null ] } ",
     "{@1 K@3+3 N@9+1 K*@13+5 [@21 t@23+4 n@30+4 ]@35 }@37 $@39"},
    {"{\"a\":{\"b\":{}},\"c\":[[],[{}]]}",
     "{@0 K@1+3 {@5 K@6+3 {@10 }@11 }@12 K@14+3 [@18 [@19 ]@20 [@22 {@23 }@24 ]@25 ]@26 }@27 "
     "$@28"},
    {"[\"]\",\"}\",\"{[\"]", "[@0 S@1+3 S@5+3 S@9+4 ]@13 $@14"},
    /* the grammar between tokens */
    {"{\"a\"}", "{@0 K@1+3 !unexpected@4"},
    {"{\"a\" 1}", "{@0 K@1+3 !unexpected@5"},
    {"{\"a\":}", "{@0 K@1+3 !unexpected@5"},
    {"{\"a\":1,}", "{@0 K@1+3 N@5+1 !unexpected@7"},
    {"{\"a\":1 \"b\":2}", "{@0 K@1+3 N@5+1 !unexpected@7"},
    {"{\"a\":1,,\"b\":2}", "{@0 K@1+3 N@5+1 !unexpected@7"},
    {"{,}", "{@0 !unexpected@1"},
    {"{1:2}", "{@0 !unexpected@1"},
    {"{a:1}", "{@0 !unexpected@1"},
    {"{'a':1}", "{@0 !unexpected@1"},
    {"{\"a\":1]", "{@0 K@1+3 N@5+1 !unexpected@6"},
    {"{]", "{@0 !unexpected@1"},
    {"[}", "[@0 !unexpected@1"},
    {"[1}", "[@0 N@1+1 !unexpected@2"},
    {"[1,]", "[@0 N@1+1 !unexpected@3"},
    {"[,1]", "[@0 !unexpected@1"},
    {"[1 2]", "[@0 N@1+1 !unexpected@3"},
    {"[1:2]", "[@0 N@1+1 !unexpected@2"},
    {"[\"a\":1]", "[@0 S@1+3 !unexpected@4"},
    {"[", "[@0 !end@1"},
    {"[1", "[@0 N@1+1 !end@2"},
    {"[1,", "[@0 N@1+1 !end@3"},
    {"{\"a\"", "{@0 K@1+3 !end@4"},
    {"{\"a\":", "{@0 K@1+3 !end@5"},
    {"{\"a\":1", "{@0 K@1+3 N@5+1 !end@6"},
    {"{\"a\":1,", "{@0 K@1+3 N@5+1 !end@7"},
    /* after the root value */
    {"{} x", "{@0 }@1 !trailing@3"},
    {"{}{}", "{@0 }@1 !trailing@2"},
    {"[]]", "[@0 ]@1 !trailing@2"},
    {"1 2", "N@0+1 !trailing@2"},
    {"\"a\"\"b\"", "S@0+3 !trailing@3"},
    {"{}\0", "{@0 }@1 !trailing@2", 0, 0, 3},
    /* depth: counted containers, the root's included */
    {"[[[]]]", "[@0 [@1 [@2 ]@3 ]@4 ]@5 $@6", 3},
    {"[[[]]]", "[@0 [@1 !depth@2", 2},
    {"{\"a\":{\"b\":[1]}}", "{@0 K@1+3 {@5 K@6+3 !depth@10", 2},
    {"[1]", "[@0 N@1+1 ]@2 $@3", 0xffffffffu}, /* out of range: the default, 256 */
};
#pragma GCC diagnostic pop

static void check_case(struct guard *g, const struct wcase *c, size_t ci)
{
    size_t len = c->len ? c->len : strlen(c->in);
    static struct walk full, part;
    walk(guard_put(g, c->in, len), len, c->depth, c->flags, &full);
    CHECK(!strcmp(full.text, c->want), "case %zu '%s':\n  got  %s\n  want %s\n", ci, c->in,
          full.text, c->want);
    find_index_agree(guard_put(g, c->in, len), len, c->depth, c->flags);
    for (size_t k = 0; k < len; k++) {
        find_index_agree(guard_put(g, c->in, k), k, c->depth, c->flags);
        walk(guard_put(g, c->in, k), k, c->depth, c->flags, &part);
        /* the same tokens as far as they go; a number at the cut may be shorter */
        for (size_t j = 0; j < part.n; j++) {
            const struct rec *a = &part.tok[j], *b = &full.tok[j];
            if (a->type == SQ_JSON_T_END) { /* the prefix is a whole document itself */
                CHECK(a->at == k, "case %zu prefix %zu: END at %zu\n", ci, k, a->at);
                continue;
            }
            if (j >= full.n) { /* "1" of "1.": a number the cut completes */
                CHECK(a->type == SQ_JSON_T_NUM && a->at + a->len == k,
                      "case %zu prefix %zu: token %zu past the whole input's\n", ci, k, j);
                continue;
            }
            bool same =
                a->type == b->type && a->at == b->at && a->len == b->len && a->esc == b->esc;
            bool shorter_num = a->type == SQ_JSON_T_NUM && b->type == SQ_JSON_T_NUM &&
                               a->at == b->at && a->len < b->len && a->at + a->len == k;
            CHECK(same || shorter_num, "case %zu prefix %zu: token %zu differs: %s\n", ci, k, j,
                  part.text);
        }
        if (part.err != SQ_JSON_E_NONE) {
            bool own = full.err == part.err && full.err_at == part.err_at;
            CHECK(own || cut_error(part.err), "case %zu prefix %zu: %s\n", ci, k, part.text);
        }
    }
}

static void test_walk_table(void **state)
{
    (void)state;
    struct guard g;
    guard_init(&g, 4096);
    for (size_t ci = 0; ci < SQ_ARRAY_LEN(wcases); ci++)
        check_case(&g, &wcases[ci], ci);
    guard_free(&g);
}

/* Nesting: exactly SQ_JSON_DEPTH_MAX walks, one more stops at its bracket; a megabyte of
 * brackets costs one pass and no recursion. */
static void test_deep(void **state)
{
    (void)state;
    size_t big = 1 << 20;
    char *s = malloc(big);
    assert_non_null(s);
    for (unsigned d = SQ_JSON_DEPTH_MAX - 1; d <= SQ_JSON_DEPTH_MAX + 1; d++) {
        memset(s, '[', d);
        memset(s + d, ']', d);
        struct guard g;
        guard_init(&g, 2 * d);
        struct sq_json_walk w;
        sq_json_walk_init(&w, guard_put(&g, s, 2 * d), 2 * d, 0, 0);
        struct sq_json_tok t;
        int rc = 0;
        size_t n = 0;
        while ((rc = sq_json_next(&w, &t)) == 0 && t.type != SQ_JSON_T_END)
            n++;
        if (d <= SQ_JSON_DEPTH_MAX) {
            assert_int_equal(rc, 0);
            assert_int_equal(n, 2 * d);
        } else {
            assert_int_equal(rc, -SQ_EPARSE);
            assert_int_equal(w.err, SQ_JSON_E_DEPTH);
            assert_int_equal(w.err_at, SQ_JSON_DEPTH_MAX);
        }
        /* the same through skip */
        sq_json_walk_init(&w, guard_put(&g, s, 2 * d), 2 * d, 0, 0);
        assert_int_equal(sq_json_next(&w, &t), 0);
        rc = sq_json_skip(&w, &t);
        if (d <= SQ_JSON_DEPTH_MAX) {
            assert_int_equal(rc, 0);
            assert_int_equal(t.len, 2 * d);
            assert_int_equal(sq_json_next(&w, &t), 0);
            assert_int_equal(t.type, SQ_JSON_T_END);
        } else {
            assert_int_equal(rc, -SQ_EPARSE);
            assert_int_equal(w.err, SQ_JSON_E_DEPTH);
        }
        guard_free(&g);
    }
    /* objects and arrays mixed, to the limit: the bit stack keeps each closer right */
    size_t n = 0;
    for (unsigned i = 0; i < SQ_JSON_DEPTH_MAX - 1; i++) {
        if (i % 3 == 0) {
            memcpy(s + n, "{\"k\":", 5);
            n += 5;
        } else {
            s[n++] = '[';
        }
    }
    s[n++] = '1';
    for (int i = SQ_JSON_DEPTH_MAX - 2; i >= 0; i--)
        s[n++] = i % 3 == 0 ? '}' : ']';
    struct sq_json_walk w;
    struct sq_json_tok t;
    sq_json_walk_init(&w, s, n, 0, 0);
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(sq_json_skip(&w, &t), 0);
    assert_int_equal(t.len, n);
    /* a closer swapped deep inside is found */
    s[n - 100] = s[n - 100] == '}' ? ']' : '}';
    sq_json_walk_init(&w, s, n, 0, 0);
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(sq_json_skip(&w, &t), -SQ_EPARSE);
    assert_int_equal(w.err, SQ_JSON_E_UNEXPECTED);
    assert_int_equal(w.err_at, n - 100);

    /* a megabyte of '[': stops at the limit, having read no further */
    memset(s, '[', big);
    sq_json_walk_init(&w, s, big, 0, 0);
    while (sq_json_next(&w, &t) == 0)
        ;
    assert_int_equal(w.err, SQ_JSON_E_DEPTH);
    assert_int_equal(w.err_at, SQ_JSON_DEPTH_MAX);
    free(s);
}

/* skip widens a container's token to the whole value and leaves the walker after it. */
static void test_skip(void **state)
{
    (void)state;
    static const char doc[] = " {\"a\":[1,{\"b\":\"]}\"},[]],\"c\":{},\"d\":\"x\"} ";
    struct guard g;
    guard_init(&g, sizeof(doc));
    size_t n = sizeof(doc) - 1;
    const char *s = guard_put(&g, doc, n);
    struct sq_json_walk w;
    struct sq_json_tok t;
    sq_json_walk_init(&w, s, n, 0, 0);
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(t.type, SQ_JSON_T_OBJ);
    assert_int_equal(sq_json_next(&w, &t), 0); /* "a" */
    assert_int_equal(t.type, SQ_JSON_T_KEY);
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(t.type, SQ_JSON_T_ARR);
    assert_int_equal(sq_json_skip(&w, &t), 0);
    assert_int_equal(t.type, SQ_JSON_T_ARR);
    assert_int_equal(t.len, strlen("[1,{\"b\":\"]}\"},[]]"));
    assert_memory_equal(s + t.at, "[1,{\"b\":\"]}\"},[]]", t.len);
    assert_int_equal(sq_json_peek(&w), ',');
    assert_int_equal(sq_json_next(&w, &t), 0); /* "c" */
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(sq_json_skip(&w, &t), 0);
    assert_int_equal(t.len, 2);
    assert_int_equal(sq_json_next(&w, &t), 0); /* "d" */
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(t.type, SQ_JSON_T_STR);
    size_t before = t.len;
    assert_int_equal(sq_json_skip(&w, &t), 0); /* a scalar: nothing to do */
    assert_int_equal(t.len, before);
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(t.type, SQ_JSON_T_OBJ_END);
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(t.type, SQ_JSON_T_END);

    /* every prefix of the document: skipping the root fails with a cut error, never reads on */
    for (size_t k = 0; k < n - 1; k++) {
        s = guard_put(&g, doc, k);
        sq_json_walk_init(&w, s, k, 0, 0);
        if (sq_json_next(&w, &t) < 0) {
            assert_int_equal(w.err, SQ_JSON_E_END);
            continue;
        }
        assert_int_equal(sq_json_skip(&w, &t), -SQ_EPARSE);
        assert_true(cut_error(w.err));
    }
    guard_free(&g);
}

/* peek and sep: a caller that checks the shape itself and words its own errors. */
static void test_peek_sep(void **state)
{
    (void)state;
    char msg[128];
    static const char doc[] = "[ {\"a\" : 1 } , 2 ]";
    struct sq_json_walk w;
    struct sq_json_tok t;
    sq_json_walk_init(&w, doc, sizeof(doc) - 1, 0, 0);
    assert_int_equal(sq_json_peek(&w), '[');
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(sq_json_peek(&w), '{');
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(sq_json_peek(&w), '"');
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(sq_json_peek(&w), ':');
    assert_int_equal(sq_json_sep(&w), 0);
    assert_int_equal(sq_json_peek(&w), '1');
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(t.type, SQ_JSON_T_NUM);
    assert_int_equal(sq_json_peek(&w), '}');
    assert_int_equal(sq_json_sep(&w), -SQ_EPARSE); /* '}' is no separator */
    assert_int_equal(w.err, SQ_JSON_E_UNEXPECTED);
    assert_int_equal(w.err_at, 11);
    assert_string_equal(sq_json_describe(&w, msg, sizeof(msg)), "byte 11: expected ',' or '}'");

    sq_json_walk_init(&w, doc, sizeof(doc) - 1, 0, 0);
    for (int i = 0; i < 5; i++) /* [ { "a" 1 } */
        assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(sq_json_peek(&w), ',');
    assert_int_equal(sq_json_sep(&w), 0);
    assert_int_equal(sq_json_peek(&w), '2');
    assert_int_equal(sq_json_sep(&w), -SQ_EPARSE); /* a value is wanted, not a separator */
    assert_string_equal(sq_json_describe(&w, msg, sizeof(msg)), "byte 15: expected a value");

    /* sep at the end; describe for each kind of stop */
    sq_json_walk_init(&w, "{\"a\"", 4, 0, 0);
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(sq_json_next(&w, &t), 0);
    assert_int_equal(sq_json_sep(&w), -SQ_EPARSE);
    assert_int_equal(w.err, SQ_JSON_E_END);
    assert_string_equal(sq_json_describe(&w, msg, sizeof(msg)),
                        "byte 4: the input ends where ':' was expected");
    static const struct {
        const char *in, *msg;
    } d[] = {
        {"", "byte 0: the input ends where a value was expected"},
        {"[", "byte 1: the input ends where a value or ']' was expected"},
        {"{", "byte 1: the input ends where a string key or '}' was expected"},
        {"{\"a\":1,", "byte 7: the input ends where a string key was expected"},
        {"[1 2", "byte 3: expected ',' or ']'"},
        {"[1,]", "byte 3: expected a value"},
        {"1 2", "byte 2: more after the document's value"},
        {"[\"\\q\"]", "byte 2: invalid escape"},
        {"[01]", "byte 2: expected ',' or ']'"},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(d); i++) {
        sq_json_walk_init(&w, d[i].in, strlen(d[i].in), 0, 0);
        while (sq_json_next(&w, &t) == 0 && t.type != SQ_JSON_T_END)
            ;
        CHECK(!strcmp(sq_json_describe(&w, msg, sizeof(msg)), d[i].msg), "'%s': %s\n", d[i].in,
              msg);
    }
    assert_string_equal(sq_json_strerror(SQ_JSON_E_NONE), "no error");
    assert_string_equal(sq_json_strerror(SQ_JSON_E_NUMBER), "malformed number");
}

static void test_escape(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int rc;
        uint32_t cp;
    } c[] = {
        {"\\\"", 2, '"'},
        {"\\\\", 2, '\\'},
        {"\\/", 2, '/'},
        {"\\b", 2, '\b'},
        {"\\f", 2, '\f'},
        {"\\n", 2, '\n'},
        {"\\r", 2, '\r'},
        {"\\t", 2, '\t'},
        {"\\u0000", 6, 0},
        {"\\u00e9", 6, 0xe9},
        {"\\uFFFF", 6, 0xffff},
        {"\\ud83d\\ude00", 12, 0x1f600},
        {"\\uDBFF\\uDFFF", 12, 0x10ffff},
        {"\\uD800\\uDC00", 12, 0x10000},
        {"\\", -SQ_JSON_E_ESCAPE, 0},
        {"\\'", -SQ_JSON_E_ESCAPE, 0},
        {"\\x", -SQ_JSON_E_ESCAPE, 0},
        {"x", -SQ_JSON_E_ESCAPE, 0},
        {"\\u", -SQ_JSON_E_HEX, 0},
        {"\\u123", -SQ_JSON_E_HEX, 0},
        {"\\u123g", -SQ_JSON_E_HEX, 0},
        {"\\udc00", -SQ_JSON_E_LONE_LOW, 0},
        {"\\ud800", -SQ_JSON_E_LONE_HIGH, 0},
        {"\\ud800\\u", -SQ_JSON_E_LONE_HIGH, 0},
        {"\\ud800\\udc0", -SQ_JSON_E_LONE_HIGH, 0},
        {"\\ud800\\ud800", -SQ_JSON_E_LONE_HIGH, 0},
        {"\\ud800\\uE000", -SQ_JSON_E_LONE_HIGH, 0},
        {"\\ud800x\\udc00", -SQ_JSON_E_LONE_HIGH, 0},
    };
    struct guard g;
    guard_init(&g, 64);
    for (size_t i = 0; i < SQ_ARRAY_LEN(c); i++) {
        size_t n = strlen(c[i].in);
        uint32_t cp = 0xffffffff;
        int rc = sq_json_escape(guard_put(&g, c[i].in, n), n, &cp);
        CHECK(rc == c[i].rc, "'%s': %d\n", c[i].in, rc);
        if (rc > 0)
            assert_int_equal(cp, c[i].cp);
    }
    guard_free(&g);
}

static void test_unescape(void **state)
{
    (void)state;
    static const struct {
        const char *in; /* the inside of a string */
        const char *out;
        size_t out_len; /* 0: strlen(out) */
        long bad;       /* -1: decodes */
    } c[] = {
        {"", "", 0, -1},
        {"plain text, longer than eight bytes", "plain text, longer than eight bytes", 0, -1},
        {"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti", "a\"b\\c/d\be\ff\ng\rh\ti", 0, -1},
        {"caf\\u00e9 \\u20ac \\ud83d\\ude00", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0, -1},
        {"\\u0000!", "\0!", 2, -1},
        {"raw \xc3\xa9\xff", "raw \xc3\xa9\xff", 0, -1},
        {"0123456789\\q", NULL, 0, 10},
        {"ab\\ud800", NULL, 0, 2},
        {"\\ud800\\ud800", NULL, 0, 0},
        {"ab\\udc00", NULL, 0, 2},
        {"ab\\u12", NULL, 0, 2},
        {"ab\\", NULL, 0, 2},
        {"0123456789\"", NULL, 0, 10},
        {"0123456789\x01", NULL, 0, 10},
        {"a\nb", NULL, 0, 1},
    };
    struct guard g;
    guard_init(&g, 256);
    for (size_t i = 0; i < SQ_ARRAY_LEN(c); i++) {
        size_t n = strlen(c[i].in), outlen = 12345, bad = 12345;
        char out[256];
        int rc = sq_json_unescape(guard_put(&g, c[i].in, n), n, out, &outlen, &bad);
        if (c[i].bad < 0) {
            size_t want = c[i].out_len ? c[i].out_len : strlen(c[i].out);
            CHECK(rc == 0 && outlen == want && !memcmp(out, c[i].out, want), "'%s'\n", c[i].in);
            /* in place: over itself, and one byte before itself (as the feeder decodes) */
            char *p = guard_put(&g, c[i].in, n);
            assert_int_equal(sq_json_unescape(p, n, p, &outlen, NULL), 0);
            assert_int_equal(outlen, want);
            assert_memory_equal(p, c[i].out, want);
            p = guard_put(&g, c[i].in, n);
            assert_int_equal(sq_json_unescape(p, n, p - 1, &outlen, NULL), 0);
            assert_int_equal(outlen, want);
            assert_memory_equal(p - 1, c[i].out, want);
        } else {
            CHECK(rc == -SQ_EPARSE && bad == (size_t)c[i].bad, "'%s': rc %d bad %zu\n", c[i].in, rc,
                  bad);
        }
        /* every prefix decodes or fails, inside its bounds */
        for (size_t k = 0; k < n; k++) {
            rc = sq_json_unescape(guard_put(&g, c[i].in, k), k, out, &outlen, &bad);
            assert_true(rc == 0 ? outlen <= k : rc == -SQ_EPARSE && bad < k);
        }
    }
    guard_free(&g);
}

static void test_str_eq(void **state)
{
    (void)state;
    static const struct {
        const char *s, *name;
        bool eq;
    } c[] = {
        {"", "", true},
        {"a", "", false},
        {"", "a", false},
        {"id", "id", true},
        {"id", "id2", false},
        {"id2", "id", false},
        {"a long key, past eight bytes", "a long key, past eight bytes", true},
        {"a long key, past eight bytes", "a long key, past eight byteZ", false},
        {"caf\\u00e9", "caf\xc3\xa9", true},
        {"caf\\u00E9", "caf\xc3\xa9", true},
        {"caf\xc3\xa9", "caf\xc3\xa9", true},
        {"caf\\u00e9x", "caf\xc3\xa9", false},
        {"caf\\u00e9", "caf\xc3\xa9x", false},
        {"caf\\u00e9", "cafe", false},
        {"a\\\"b", "a\"b", true},
        {"a\\/b", "a/b", true},
        {"tab\\there", "tab\there", true},
        {"\\ud83d\\ude00", "\xf0\x9f\x98\x80", true},
        {"\\ud83d\\ude00", "\xf0\x9f\x98", false},
        {"\\ud800", "\xed\xa0\x80", false}, /* a lone surrogate equals nothing */
        {"\\ud800", "", false},
        {"\\u0041", "A", true},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(c); i++)
        CHECK(sq_json_str_eq(c[i].s, strlen(c[i].s), c[i].name, strlen(c[i].name)) == c[i].eq,
              "'%s' vs '%s'\n", c[i].s, c[i].name);
}

/* The scan for a string's end (16 bytes at a time, then 8, then 1) finds a quote, a backslash or
 * a control byte in every lane, and nothing else: bytes 0x20, 0x7f, 0x80 and 0xff pass. */
static void test_string_lanes(void **state)
{
    (void)state;
    struct guard g;
    guard_init(&g, 64);
    char buf[64];
    static const unsigned char plain[] = {' ', 'a', 0x7f, 0x80, 0xff, '/'};
    for (size_t len = 1; len <= 48; len++) {
        for (size_t k = 0; k < len; k++) {
            memset(buf, 'x', sizeof(buf));
            buf[0] = '"';
            buf[len + 1] = '"';
            for (size_t i = 0; i < SQ_ARRAY_LEN(plain); i++) { /* passes: one string */
                buf[1 + k] = (char)plain[i];
                struct sq_json_walk w;
                struct sq_json_tok t;
                sq_json_walk_init(&w, guard_put(&g, buf, len + 2), len + 2, 0, 0);
                assert_int_equal(sq_json_next(&w, &t), 0);
                assert_int_equal(t.len, len + 2);
                assert_false(t.esc);
            }
            static const struct {
                char c;
                enum sq_json_err e;
                size_t at; /* 0: the byte itself */
            } stop[] = {{'"', SQ_JSON_E_TRAILING, 0},
                        {'\\', SQ_JSON_E_ESCAPE, 0},
                        {0x1f, SQ_JSON_E_CONTROL, 0},
                        {0x00, SQ_JSON_E_CONTROL, 0},
                        {'\n', SQ_JSON_E_CONTROL, 0}};
            for (size_t i = 0; i < SQ_ARRAY_LEN(stop); i++) {
                buf[1 + k] = stop[i].c;
                struct sq_json_walk w;
                struct sq_json_tok t;
                sq_json_walk_init(&w, guard_put(&g, buf, len + 2), len + 2, 0, 0);
                int rc = sq_json_next(&w, &t);
                if (stop[i].c == '"') { /* the string ends there, then more follows */
                    assert_int_equal(rc, 0);
                    assert_int_equal(t.len, k + 2);
                    assert_int_equal(sq_json_next(&w, &t), -SQ_EPARSE);
                    assert_int_equal(w.err, SQ_JSON_E_TRAILING);
                    continue;
                }
                assert_int_equal(rc, -SQ_EPARSE);
                if (stop[i].c == '\\' && k == len - 1) { /* \" : the string never ends */
                    assert_int_equal(w.err, SQ_JSON_E_STRING_END);
                    assert_int_equal(w.err_at, 0);
                    continue;
                }
                assert_int_equal(w.err, stop[i].e);
                assert_int_equal(w.err_at, 1 + k);
            }
        }
    }
    guard_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_table), cmocka_unit_test(test_deep),
        cmocka_unit_test(test_skip),       cmocka_unit_test(test_peek_sep),
        cmocka_unit_test(test_escape),     cmocka_unit_test(test_unescape),
        cmocka_unit_test(test_str_eq),     cmocka_unit_test(test_string_lanes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
