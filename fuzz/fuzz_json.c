/* fuzz_json.c - base/json's walker, checked against itself and against jansson.
 *
 * Input: a document (libFuzzer's buffer is an exact-size heap block, so ASan sees any read past
 * it). Checks:
 *  - the token walk ends (END or an error) within len + 2 calls; every token lies inside the
 *    input, after the one before it; brackets match (a stack kept here); an error is sticky and
 *    names a byte at or before the end;
 *  - sq_json_skip over the root, and sq_json_find / sq_json_index in the root (and where it is
 *    due) for a few names and indexes, walking on from the value they give, end where the token
 *    walk ends, with the same error at the same byte (the fast loops and step() agree);
 *  - every string and key decodes with sq_json_unescape, unless it holds a lone surrogate, to no
 *    more bytes than it has, the same in place and out of place; sq_json_str_eq says the raw
 *    text equals what it decoded to;
 *  - when the input is valid UTF-8 and jansson parses it (no duplicate keys, numbers in range),
 *    the strict walk (SQ_JSON_SURROGATES) accepts it, and the other way round unless the walk
 *    stopped at the depth cap; when both accept, the token walk is jansson's tree: the same
 *    types, keys, decoded strings and numbers.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/text.h"

#define MAX_TOKENS (1 << 20)

static struct sq_json_tok toks[MAX_TOKENS];

/* Walks to the end; returns the token count. */
static size_t walk(const char *s, size_t n, unsigned flags, struct sq_json_walk *w)
{
    char stack[SQ_JSON_DEPTH_MAX];
    size_t depth = 0, nt = 0, after = 0;
    sq_json_walk_init(w, s, n, 0, flags);
    for (;;) {
        if (nt > n + 1)
            abort(); /* each token takes a byte, but END */
        struct sq_json_tok *t = &toks[nt];
        if (sq_json_next(w, t) < 0) {
            if (w->err == SQ_JSON_E_NONE || w->err_at > n)
                abort();
            struct sq_json_tok x;
            if (sq_json_next(w, &x) != -SQ_EPARSE || sq_json_peek(w) != -1)
                abort();
            return nt;
        }
        nt++;
        if (t->at < after || t->at + t->len > n)
            abort();
        after = t->at + t->len;
        switch (t->type) {
        case SQ_JSON_T_OBJ:
        case SQ_JSON_T_ARR:
            if (depth == SQ_JSON_DEPTH_MAX || t->len != 1)
                abort();
            stack[depth++] = t->type == SQ_JSON_T_OBJ ? '}' : ']';
            break;
        case SQ_JSON_T_OBJ_END:
        case SQ_JSON_T_ARR_END:
            if (!depth || stack[--depth] != s[t->at])
                abort();
            break;
        case SQ_JSON_T_KEY:
            if (!depth || stack[depth - 1] != '}')
                abort();
            /* fall through */
        case SQ_JSON_T_STR:
            if (t->len < 2 || s[t->at] != '"' || s[t->at + t->len - 1] != '"')
                abort();
            break;
        case SQ_JSON_T_END:
            if (depth || t->at != n)
                abort();
            return nt;
        default:
            break;
        }
    }
}

/* How a walk from w on ends; found: a value's first token just read (its rest is still to come). */
static void finish(struct sq_json_walk *w, struct sq_json_tok *found, enum sq_json_err *err,
                   size_t *at)
{
    struct sq_json_tok t;
    if (!found || sq_json_skip(w, found) == 0)
        while (sq_json_next(w, &t) == 0 && t.type != SQ_JSON_T_END)
            ;
    *err = w->err;
    *at = w->err_at;
}

static void agree(const struct sq_json_walk *ref, struct sq_json_walk *w, struct sq_json_tok *found)
{
    enum sq_json_err e;
    size_t at;
    finish(w, found, &e, &at);
    if (e != ref->err || (e && at != ref->err_at))
        abort();
}

static void strings(const char *s, size_t nt)
{
    static char out[1 << 16];
    for (size_t i = 0; i < nt; i++) {
        const struct sq_json_tok *t = &toks[i];
        if (t->type != SQ_JSON_T_STR && t->type != SQ_JSON_T_KEY)
            continue;
        const char *in = s + t->at + 1;
        size_t n = t->len - 2, got, bad;
        if (n > sizeof(out))
            continue;
        if (!t->esc && memchr(in, '\\', n))
            abort();
        if (sq_json_unescape(in, n, out, &got, &bad) < 0) {
            if (!t->esc || bad >= n || in[bad] != '\\')
                abort(); /* only an escape can fail in a string the walker took */
            if (sq_json_str_eq(in, n, out, 0))
                abort();
            continue;
        }
        if (got > n || !sq_json_str_eq(in, n, out, got))
            abort();
        char *copy = malloc(n + 1);
        if (!copy)
            abort();
        memcpy(copy + 1, in, n);
        size_t got2;
        if (sq_json_unescape(copy + 1, n, copy, &got2, NULL) != 0 || got2 != got ||
            memcmp(copy, out, got) != 0)
            abort();
        free(copy);
    }
}

static int json_depth(const json_t *j)
{
    int d = 0;
    size_t i;
    const char *k;
    json_t *v;
    if (json_is_object(j)) {
        json_object_foreach((json_t *)j, k, v)
        {
            int x = json_depth(v);
            d = x > d ? x : d;
        }
        return d + 1;
    }
    if (json_is_array(j)) {
        json_array_foreach(j, i, v)
        {
            int x = json_depth(v);
            d = x > d ? x : d;
        }
        return d + 1;
    }
    return 0;
}

/* The tokens from *i on are the value j. */
static void same(const char *s, size_t *i, const json_t *j)
{
    static char buf[1 << 16];
    const struct sq_json_tok *t = &toks[(*i)++];
    size_t got;
    switch (t->type) {
    case SQ_JSON_T_OBJ: {
        size_t members = 0;
        while (toks[*i].type == SQ_JSON_T_KEY) {
            const struct sq_json_tok *k = &toks[(*i)++];
            if (k->len - 2 > sizeof(buf) ||
                sq_json_unescape(s + k->at + 1, k->len - 2, buf, &got, NULL) != 0)
                abort();
            json_t *v = json_object_getn(j, buf, got);
            if (!v)
                abort();
            same(s, i, v);
            members++;
        }
        if (toks[(*i)++].type != SQ_JSON_T_OBJ_END || members != json_object_size(j))
            abort();
        return;
    }
    case SQ_JSON_T_ARR: {
        size_t n = 0;
        while (toks[*i].type != SQ_JSON_T_ARR_END) {
            json_t *v = json_array_get(j, n++);
            if (!v)
                abort();
            same(s, i, v);
        }
        (*i)++;
        if (n != json_array_size(j))
            abort();
        return;
    }
    case SQ_JSON_T_STR:
        if (!json_is_string(j) || t->len - 2 > sizeof(buf) ||
            sq_json_unescape(s + t->at + 1, t->len - 2, buf, &got, NULL) != 0 ||
            got != json_string_length(j) || memcmp(buf, json_string_value(j), got) != 0)
            abort();
        return;
    case SQ_JSON_T_NUM:
        if (!json_is_number(j))
            abort();
        if (t->len < 64) {
            char num[64];
            memcpy(num, s + t->at, t->len);
            num[t->len] = '\0';
            if (strtod(num, NULL) != json_number_value(j))
                abort();
        }
        return;
    case SQ_JSON_T_TRUE:
        if (!json_is_true(j))
            abort();
        return;
    case SQ_JSON_T_FALSE:
        if (!json_is_false(j))
            abort();
        return;
    case SQ_JSON_T_NULL:
        if (!json_is_null(j))
            abort();
        return;
    default:
        abort();
    }
}

static void against_jansson(const char *s, size_t n)
{
    if (!sq_utf8_valid(s, n) || memchr(s, 0, n))
        return; /* jansson refuses bytes the grammar lets through in strings, and stops at a NUL
                 * as if the input ended there */
    json_error_t je;
    json_t *root = json_loadb(
        s, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
        &je);
    struct sq_json_walk w;
    size_t nt = walk(s, n, SQ_JSON_SURROGATES, &w);
    if (!root) {
        /* refusals the grammar does not make: numbers out of range, duplicate keys */
        if (strstr(je.text, "overflow") || strstr(je.text, "too big") ||
            strstr(je.text, "duplicate"))
            return;
        if (w.err == SQ_JSON_E_NONE)
            abort(); /* the walker took what jansson refused */
        return;
    }
    if (w.err == SQ_JSON_E_DEPTH) {
        json_decref(root);
        return;
    }
    if (w.err != SQ_JSON_E_NONE || json_depth(root) > SQ_JSON_DEPTH_MAX)
        abort(); /* jansson took what the walker refused */
    size_t i = 0;
    same(s, &i, root);
    if (toks[i].type != SQ_JSON_T_END || i + 1 != nt)
        abort();
    json_decref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    struct sq_json_walk ref, w;
    struct sq_json_tok t;
    size_t nt = walk(s, size, 0, &ref);
    strings(s, nt);

    /* skip over the root */
    sq_json_walk_init(&w, s, size, 0, 0);
    if (sq_json_next(&w, &t) == 0) {
        if (sq_json_skip(&w, &t) == 0 && t.at + t.len > size)
            abort();
        agree(&ref, &w, NULL);
    }

    /* find and index from the root: they end the walk where the tokens do (from the found
     * value on, walking on) */
    static const char *const names[] = {"a", "b", "", "id", "x"};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        sq_json_walk_init(&w, s, size, 0, 0);
        if (sq_json_next(&w, &t) < 0 || t.type != SQ_JSON_T_OBJ)
            break;
        int rc = sq_json_find(&w, names[k], strlen(names[k]), &t);
        if (rc >= 0)
            agree(&ref, &w, rc ? &t : NULL);
        else if (w.err != ref.err || w.err_at != ref.err_at)
            abort();
    }
    for (size_t k = 0; k < 4; k++) {
        sq_json_walk_init(&w, s, size, 0, 0);
        if (sq_json_next(&w, &t) < 0 || t.type != SQ_JSON_T_ARR)
            break;
        int rc = sq_json_index(&w, k, &t);
        if (rc >= 0)
            agree(&ref, &w, rc ? &t : NULL);
        else if (w.err != ref.err || w.err_at != ref.err_at)
            abort();
    }

    /* find and index where the root is due: they take its bracket, or leave the walker be */
    for (int arr = 0; arr < 2; arr++) {
        sq_json_walk_init(&w, s, size, 0, 0);
        int rc = arr ? sq_json_index(&w, 1, &t) : sq_json_find(&w, "a", 1, &t);
        if (rc >= 0)
            agree(&ref, &w, rc ? &t : NULL);
        else if (w.err != ref.err || w.err_at != ref.err_at)
            abort();
    }

    against_jansson(s, size);
    return 0;
}
