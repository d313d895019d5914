/* test_feeder.c - CSV and JSON feeders: parsing, errors with exact line:col, row choice. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/feeder.h"
#include "plan/feeder_internal.h"
#include "plan/tmpl.h"

static struct sq_feeder *csv(const char *s, size_t len)
{
    struct sq_feeder *f;
    char err[256];
    if (sq_feeder__parse_csv("t.csv", s, len, &f, err, sizeof(err)) != 0)
        fail_msg("CSV failed: %s", err);
    return f;
}

static struct sq_feeder *json(const char *s)
{
    struct sq_feeder *f;
    char err[256];
    if (sq_feeder__parse_json("t.json", s, strlen(s), &f, err, sizeof(err)) != 0)
        fail_msg("JSON failed: %s", err);
    return f;
}

/* Checks cell (row, col) and that it is a NUL-terminated span inside f->text. */
static void cell_is(const struct sq_feeder *f, size_t row, size_t col, const char *want,
                    size_t want_len)
{
    assert_true(row < f->nrows && col < f->ncolumns);
    const struct sq_str *c = &f->cells[row * f->ncolumns + col];
    if (c->len != want_len || memcmp(c->p, want, want_len) != 0)
        fail_msg("cell %zu,%zu is '%.*s', want '%.*s'", row, col, (int)c->len, c->p, (int)want_len,
                 want);
    assert_true(c->p >= f->text);
    assert_int_equal(c->p[c->len], '\0');
}
#define CELL(f, r, c, s) cell_is(f, r, c, s, sizeof(s) - 1)

static void columns_are(const struct sq_feeder *f, const char *const *names, size_t n)
{
    assert_int_equal(f->ncolumns, n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(f->columns[i], names[i]);
        assert_int_equal(sq_feeder_column(f, names[i], strlen(names[i])), (int)i);
    }
}

static void test_csv_basic(void **state)
{
    (void)state;
    const char *s = "user,pass\nalice,1\nbob,2\n";
    struct sq_feeder *f = csv(s, strlen(s));
    const char *cols[] = {"user", "pass"};
    columns_are(f, cols, 2);
    assert_int_equal(f->nrows, 2);
    CELL(f, 0, 0, "alice");
    CELL(f, 0, 1, "1");
    CELL(f, 1, 0, "bob");
    CELL(f, 1, 1, "2");
    assert_int_equal(sq_feeder_column(f, "use", 3), -1);
    assert_int_equal(sq_feeder_column(f, "users", 5), -1);
    assert_int_equal(sq_feeder_column(f, "user", 4), 0);
    assert_int_equal(sq_feeder_column(f, "pass\0x", 6), -1);
    sq_feeder_free(f);
    sq_feeder_free(NULL);
}

static void test_csv_quoting(void **state)
{
    (void)state;
    const char *s = "a,\"b,c\"\n"
                    "\"x,y\",\"he said \"\"hi\"\"\"\n"
                    "\"multi\nline\r\nfield\",\"\"\n"
                    "\"\"\"\",plain\n";
    struct sq_feeder *f = csv(s, strlen(s));
    const char *cols[] = {"a", "b,c"};
    columns_are(f, cols, 2);
    assert_int_equal(f->nrows, 3);
    CELL(f, 0, 0, "x,y");
    CELL(f, 0, 1, "he said \"hi\"");
    CELL(f, 1, 0, "multi\nline\r\nfield");
    CELL(f, 1, 1, "");
    CELL(f, 2, 0, "\"");
    CELL(f, 2, 1, "plain");
    sq_feeder_free(f);
}

static void test_csv_line_endings(void **state)
{
    (void)state;
    /* CRLF, no trailing newline */
    const char *s = "a,b\r\n1,2\r\n3,4";
    struct sq_feeder *f = csv(s, strlen(s));
    assert_int_equal(f->nrows, 2);
    CELL(f, 0, 1, "2");
    CELL(f, 1, 0, "3");
    CELL(f, 1, 1, "4");
    sq_feeder_free(f);
    /* mixed, blank lines skipped anywhere, a trailing empty field, a quoted last field at EOF */
    s = "\n\r\na,b\n\n1,\r\n\r\n\n\"q\",\"\"\n\n";
    f = csv(s, strlen(s));
    assert_int_equal(f->nrows, 2);
    CELL(f, 0, 0, "1");
    CELL(f, 0, 1, "");
    CELL(f, 1, 0, "q");
    CELL(f, 1, 1, "");
    sq_feeder_free(f);
    s = "a\n\"x\"";
    f = csv(s, strlen(s));
    assert_int_equal(f->nrows, 1);
    CELL(f, 0, 0, "x");
    sq_feeder_free(f);
}

static void test_csv_bom(void **state)
{
    (void)state;
    const char *s = "\xEF\xBB\xBFid,v\n7,8\n";
    struct sq_feeder *f = csv(s, strlen(s));
    const char *cols[] = {"id", "v"};
    columns_are(f, cols, 2);
    CELL(f, 0, 0, "7");
    sq_feeder_free(f);
    /* only at the start; columns count after it */
    char err[256];
    s = "\xEF\xBB\xBF\"a\"x,b\n";
    assert_int_equal(sq_feeder__parse_csv("t.csv", s, strlen(s), &f, err, sizeof(err)), -SQ_EPARSE);
    assert_string_equal(err, "t.csv:1:4: unexpected 'x' after a closing quote (expected ',' or "
                             "the end of the line)");
    assert_null(f);
}

struct err_case {
    const char *in;
    size_t len; /* 0: strlen */
    const char *msg;
};

static const struct err_case csv_errs[] = {
    {"", 0, "t.csv:1:1: empty file (expected a header row)"},
    {"\n\r\n", 0, "t.csv:3:1: empty file (expected a header row)"},
    {"a,b\n", 0, "t.csv:2:1: no data rows after the header"},
    {"a,b", 0, "t.csv:1:4: no data rows after the header"},
    {"a,,b\n1,2,3\n", 0, "t.csv:1:3: empty column name (column 2)"},
    {"a,b,\n1,2,3\n", 0, "t.csv:1:5: empty column name (column 3)"},
    {"\"\"\n1\n", 0, "t.csv:1:1: empty column name (column 1)"},
    {"a,b,a\n1,2,3\n", 0, "t.csv:1:5: duplicate column name 'a' (column 3, first as column 1)"},
    {"\"a\",b,\"b\"\n1,2,3\n", 0,
     "t.csv:1:7: duplicate column name 'b' (column 3, first as column 2)"},
    {"\"a\nb\",\"a\nb\"\n1,2\n", 0,
     "t.csv:2:4: duplicate column name 'a\\x0ab' (column 2, first as column 1)"},
    {"a,b\n1,2,3\n", 0, "t.csv:2:5: row has 3 fields, the header has 2"},
    {"a,b\n1,2\n3\n", 0, "t.csv:3:2: row has 1 field, the header has 2"},
    {"a,b,c\n1,2\n", 0, "t.csv:2:4: row has 2 fields, the header has 3"},
    {"a,b\n1,2\n3", 0, "t.csv:3:2: row has 1 field, the header has 2"},
    {"a,b\n1,\"x\ny\"\n3,4,5,6\n", 0, "t.csv:4:5: row has 4 fields, the header has 2"},
    {"a,b\n1,\"x\ny\",z\n", 0, "t.csv:3:4: row has 3 fields, the header has 2"},
    {"a,b\n1,\"abc\n", 0, "t.csv:2:3: unterminated quoted field (no closing '\"' before the end)"},
    {"a,b\n1,\"", 0, "t.csv:2:3: unterminated quoted field (no closing '\"' before the end)"},
    {"a,b\n\"1\"x,2\n", 0,
     "t.csv:2:4: unexpected 'x' after a closing quote (expected ',' or the end of the line)"},
    {"a,b\n\"1\" ,2\n", 0,
     "t.csv:2:4: unexpected ' ' after a closing quote (expected ',' or the end of the line)"},
    {"a,b\n\"1\"\r2\n", 0,
     "t.csv:2:4: unexpected 0x0d after a closing quote (expected ',' or the end of the line)"},
    {"a,b\n1\"2,3\n", 0,
     "t.csv:2:2: '\"' in an unquoted field (quote the whole field and write the quote as \"\")"},
    {"a,b\r1,2\n", 0, "t.csv:1:4: CR not followed by LF"},
    {"a,b\n1,2\r", 0, "t.csv:2:4: CR not followed by LF"},
    {"a,b\n1,\0\n", 7, "t.csv:2:3: NUL byte in a field"},
    {"a,b\n1,\"\0\"\n", 9, "t.csv:2:4: NUL byte in a field"},
};

static void test_csv_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(csv_errs) / sizeof(csv_errs[0]); i++) {
        const struct err_case *c = &csv_errs[i];
        size_t len = c->len ? c->len : strlen(c->in);
        struct sq_feeder *f = (struct sq_feeder *)1;
        char err[256];
        int rc = sq_feeder__parse_csv("t.csv", c->in, len, &f, err, sizeof(err));
        if (rc != -SQ_EPARSE)
            fail_msg("case %zu parsed (rc %d)", i, rc);
        if (strcmp(err, c->msg) != 0)
            fail_msg("case %zu:\n got  %s\n want %s", i, err, c->msg);
        assert_null(f);
    }
    /* err may be NULL */
    struct sq_feeder *f;
    assert_int_equal(sq_feeder__parse_csv("t.csv", "a", 1, &f, NULL, 0), -SQ_EPARSE);
    char tiny[4];
    assert_int_equal(sq_feeder__parse_csv("t.csv", "a", 1, &f, tiny, sizeof(tiny)), -SQ_EPARSE);
    assert_string_equal(tiny, "t.c");
}

/* Every prefix of a tricky file: parses or fails with a located message; the input sits in an
 * exact-size allocation so ASan catches any over-read. */
static void prefixes(const char *full, bool is_json)
{
    size_t n = strlen(full);
    for (size_t len = 0; len <= n; len++) {
        char *copy = malloc(len ? len : 1);
        memcpy(copy, full, len);
        struct sq_feeder *f;
        char err[256];
        int rc = is_json ? sq_feeder__parse_json("t", copy, len, &f, err, sizeof(err))
                         : sq_feeder__parse_csv("t", copy, len, &f, err, sizeof(err));
        if (rc == 0) {
            assert_true(f->nrows >= 1 && f->ncolumns >= 1);
            for (size_t k = 0; k < f->nrows * f->ncolumns; k++)
                assert_int_equal(f->cells[k].p[f->cells[k].len], '\0');
            sq_feeder_free(f);
        } else {
            assert_int_equal(rc, -SQ_EPARSE);
            assert_true(strncmp(err, "t:", 2) == 0);
            assert_null(f);
        }
        free(copy);
    }
}

static void test_prefixes(void **state)
{
    (void)state;
    prefixes("\xEF\xBB\xBF"
             "a,\"b\"\"\"\r\n\"1\n2\",\"\"\r\n\r\nx,y\n",
             false);
    prefixes("\xEF\xBB\xBF[ {\"a\" : \"\\u00e9\\ud83d\\ude00\\n\", \"b\":-1.5e+3},\n"
             "{\"b\":true,\"c\":null , \"a\":false} ] ",
             true);
}

static void test_json_basic(void **state)
{
    (void)state;
    struct sq_feeder *f = json("[{\"user\":\"a\\\"b\\u00e9\\ud83d\\ude00\\/\\\\\\b\\f\\n\\r\\t\","
                               "\"n\":1.50,\"ok\":true,\"z\":null},\n"
                               " {\"n\":-2e3,\"extra\":\"x\",\"ok\":false},\n"
                               " {},\n"
                               " {\"extra\":\"e\",\"z\":0,\"user\":\"u\",\"n\":0}]\n");
    const char *cols[] = {"user", "n", "ok", "z", "extra"};
    columns_are(f, cols, 5);
    assert_int_equal(f->nrows, 4);
    CELL(f, 0, 0, "a\"b\xC3\xA9\xF0\x9F\x98\x80/\\\b\f\n\r\t");
    CELL(f, 0, 1, "1.50"); /* as written */
    CELL(f, 0, 2, "true");
    CELL(f, 0, 3, "");
    CELL(f, 0, 4, "");
    CELL(f, 1, 0, "");
    CELL(f, 1, 1, "-2e3");
    CELL(f, 1, 2, "false");
    CELL(f, 1, 4, "x");
    for (size_t c = 0; c < 5; c++)
        cell_is(f, 2, c, "", 0);
    CELL(f, 3, 0, "u");
    CELL(f, 3, 1, "0");
    CELL(f, 3, 3, "0");
    CELL(f, 3, 4, "e");
    sq_feeder_free(f);

    /* a BOM, whitespace everywhere, a number right before '}' */
    f = json("\xEF\xBB\xBF \t\r\n[ { \"k\" : 12 } , {\"k\":\"\"}\n]\n\n");
    assert_int_equal(f->nrows, 2);
    CELL(f, 0, 0, "12");
    CELL(f, 1, 0, "");
    sq_feeder_free(f);
}

static const struct err_case json_errs[] = {
    {"", 0, "t.json:1:1: empty file (expected a JSON array of objects)"},
    {" \n ", 0, "t.json:2:2: empty file (expected a JSON array of objects)"},
    {"{}", 0, "t.json:1:1: expected '[' (a top-level array of objects), found '{'"},
    {"[]", 0, "t.json:1:2: empty array (expected at least one object)"},
    {"[\n ]", 0, "t.json:2:2: empty array (expected at least one object)"},
    {"[1]", 0, "t.json:1:2: row index 0 is not an object (found '1')"},
    {"[{\"a\":1},\n \"x\"]", 0, "t.json:2:2: row index 1 is not an object (found '\"')"},
    {"[{\"a\":1},\n {\"a\":{\"x\":1}}]", 0,
     "t.json:2:7: row index 1, key 'a': nested object not allowed (values are strings, numbers, "
     "booleans or null)"},
    {"[{\"a\":1,\"list\":[1]}]", 0,
     "t.json:1:16: row index 0, key 'list': nested array not allowed (values are strings, "
     "numbers, booleans or null)"},
    {"[{\"a\":1,\"a\":2}]", 0, "t.json:1:9: row index 0: duplicate key 'a'"},
    {"[{\"a\":01}]", 0, "t.json:1:8: expected ',' or '}' in row index 0, found '1'"},
    {"[{\"a\":1.}]", 0, "t.json:1:7: malformed number"},
    {"[{\"a\":-}]", 0, "t.json:1:7: malformed number"},
    {"[{\"a\":1e}]", 0, "t.json:1:7: malformed number"},
    {"[{\"a\":+1}]", 0, "t.json:1:7: expected a value (string, number, true, false or null)"},
    {"[{\"a\":tru}]", 0, "t.json:1:7: expected a value (string, number, true, false or null)"},
    {"[{\"a\":nul", 0, "t.json:1:7: expected a value (string, number, true, false or null)"},
    {"[{\"a\":truex}]", 0, "t.json:1:11: expected ',' or '}' in row index 0, found 'x'"},
    {"[{\"a\":\"x\\qy\"}]", 0, "t.json:1:9: invalid escape '\\' followed by 'q'"},
    {"[{\"a\":\"\\ud800\"}]", 0,
     "t.json:1:8: high surrogate \\uD800 not followed by a low surrogate"},
    {"[{\"a\":\"\\ud800\\u0041\"}]", 0,
     "t.json:1:8: high surrogate \\uD800 not followed by a low surrogate"},
    {"[{\"a\":\"\\udc00\"}]", 0, "t.json:1:8: lone low surrogate \\uDC00"},
    {"[{\"a\":\"\\u0000\"}]", 0, "t.json:1:8: \\u0000 is not allowed in a feeder"},
    {"[{\"a\":\"\\u12\"}]", 0, "t.json:1:8: '\\u' must be followed by 4 hex digits"},
    {"[{\"a\":\"\\u12", 0, "t.json:1:8: '\\u' must be followed by 4 hex digits"},
    {"[{\"a\":\"x", 0, "t.json:1:7: unterminated string"},
    {"[{\"a\":\"x\\", 0, "t.json:1:7: unterminated string"},
    {"[{\"a\":\"x\ny\"}]", 0, "t.json:1:9: control character 0x0a in a string (escape it)"},
    {"[{\"a\":1}] x", 0, "t.json:1:11: unexpected 'x' after the array"},
    {"[{\"a\":1}][]", 0, "t.json:1:10: unexpected '[' after the array"},
    {"[{\"a\":1},]", 0, "t.json:1:10: row index 1 is not an object (found ']')"},
    {"[{\"a\":1},", 0, "t.json:1:10: unexpected end (expected an object for row index 1)"},
    {"[{\"a\":1}", 0, "t.json:1:9: expected ',' or ']' after row index 0, found the end"},
    {"[{\"a\":1};", 0, "t.json:1:9: expected ',' or ']' after row index 0, found ';'"},
    {"[{\"a\":1", 0, "t.json:1:8: expected ',' or '}' in row index 0, found the end"},
    {"[{\"a\":1,}]", 0, "t.json:1:9: expected a key string in row index 0"},
    {"[{1:2}]", 0, "t.json:1:3: expected a key string in row index 0"},
    {"[{\"\":1}]", 0, "t.json:1:3: row index 0: empty key"},
    {"[{\"a\" 1}]", 0, "t.json:1:7: expected ':' after key 'a'"},
    {"[{\"a\\tb\" 1}]", 0, "t.json:1:10: expected ':' after key 'a\\x09b'"},
    {"[{\"a\":", 0, "t.json:1:7: unexpected end (expected a value)"},
    {"[{}]", 0, "t.json: no keys in any object (no columns)"},
    {"[{\"a\":\"\0\"}]", 10, "t.json:1:8: control character 0x00 in a string (escape it)"},
};

static void test_json_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(json_errs) / sizeof(json_errs[0]); i++) {
        const struct err_case *c = &json_errs[i];
        size_t len = c->len ? c->len : strlen(c->in);
        struct sq_feeder *f = (struct sq_feeder *)1;
        char err[256];
        int rc = sq_feeder__parse_json("t.json", c->in, len, &f, err, sizeof(err));
        if (rc != -SQ_EPARSE)
            fail_msg("case %zu parsed (rc %d)", i, rc);
        if (strcmp(err, c->msg) != 0)
            fail_msg("case %zu:\n got  %s\n want %s", i, err, c->msg);
        assert_null(f);
    }
}

static void test_modes(void **state)
{
    (void)state;
    const char *s = "v\nr0\nr1\nr2\n";
    struct sq_feeder *f = csv(s, strlen(s));
    uint64_t rng = 1;
    /* sequential wraps */
    const char *seq[] = {"r0", "r1", "r2", "r0", "r1", "r2", "r0"};
    for (size_t i = 0; i < 7; i++)
        assert_string_equal(sq_feeder_row(f, SQ_FEED_SEQUENTIAL, 99, &rng)[0].p, seq[i]);
    assert_int_equal(rng, 1); /* untouched */
    /* per-vu: (vu - 1) mod rows, the same for every iteration */
    const char *pervu[] = {"r0", "r1", "r2", "r0", "r1"};
    for (int it = 0; it < 3; it++)
        for (uint64_t vu = 1; vu <= 5; vu++)
            assert_string_equal(sq_feeder_row(f, SQ_FEED_PER_VU, vu, &rng)[0].p, pervu[vu - 1]);
    assert_string_equal(sq_feeder_row(f, SQ_FEED_PER_VU, 3001, &rng)[0].p, "r0");
    assert_int_equal(f->cursor, 7); /* per-vu does not move the cursor */
    /* random: uniform-ish, advances the VU's state; state 0 is replaced */
    size_t hits[3] = {0};
    for (size_t i = 0; i < 30000; i++) {
        uint64_t before = rng;
        const struct sq_str *row = sq_feeder_row(f, SQ_FEED_RANDOM, 1, &rng);
        assert_int_not_equal(rng, before);
        hits[row[0].p[1] - '0']++;
    }
    for (size_t k = 0; k < 3; k++)
        assert_true(hits[k] > 9500 && hits[k] < 10500);
    rng = 0;
    (void)sq_feeder_row(f, SQ_FEED_RANDOM, 1, &rng);
    assert_int_not_equal(rng, 0);
    /* same seed, same sequence */
    uint64_t a = 42, b = 42;
    for (int i = 0; i < 100; i++)
        assert_ptr_equal(sq_feeder_row(f, SQ_FEED_RANDOM, 1, &a),
                         sq_feeder_row(f, SQ_FEED_RANDOM, 2, &b));
    sq_feeder_free(f);
}

/* A random feeder draws from the VU's stream (plan/tmpl.h): the run's seed and the VU's number
 * replay its rows, another seed draws others. */
static void test_random_rows_follow_the_seed(void **state)
{
    (void)state;
    char s[8192] = "v\n";
    for (int i = 0; i < 1000; i++)
        snprintf(s + strlen(s), sizeof(s) - strlen(s), "r%d\n", i);
    struct sq_feeder *f = csv(s, strlen(s));
    const struct sq_str *a[64], *b[64], *c[64], *d[64];
    uint64_t ra = sq_tmpl_rng_init(7, 1), rb = sq_tmpl_rng_init(7, 1);
    uint64_t rc = sq_tmpl_rng_init(8, 1), rd = sq_tmpl_rng_init(7, 2);
    for (int i = 0; i < 64; i++) {
        a[i] = sq_feeder_row(f, SQ_FEED_RANDOM, 1, &ra);
        b[i] = sq_feeder_row(f, SQ_FEED_RANDOM, 1, &rb);
        c[i] = sq_feeder_row(f, SQ_FEED_RANDOM, 1, &rc);
        d[i] = sq_feeder_row(f, SQ_FEED_RANDOM, 2, &rd);
    }
    assert_memory_equal(a, b, sizeof(a));
    int same_c = 0, same_d = 0;
    for (int i = 0; i < 64; i++) {
        same_c += a[i] == c[i];
        same_d += a[i] == d[i];
    }
    assert_true(same_c < 5 && same_d < 5); /* 1 in 1000 each by chance */
    sq_feeder_free(f);
}

struct seq_arg {
    struct sq_feeder *f;
    size_t hits[4];
};

static void *seq_thread(void *p)
{
    struct seq_arg *a = p;
    for (int i = 0; i < 10000; i++)
        a->hits[sq_feeder_row(a->f, SQ_FEED_SEQUENTIAL, 1, NULL)[0].p[0] - '0']++;
    return NULL;
}

/* Four threads share the cursor: every row is used exactly as often. */
static void test_sequential_threads(void **state)
{
    (void)state;
    const char *s = "v\n0\n1\n2\n3\n";
    struct sq_feeder *f = csv(s, strlen(s));
    struct seq_arg args[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&args[i], 0, sizeof(args[i]));
        args[i].f = f;
        assert_int_equal(pthread_create(&th[i], NULL, seq_thread, &args[i]), 0);
    }
    size_t total[4] = {0};
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        for (int k = 0; k < 4; k++)
            total[k] += args[i].hits[k];
    }
    for (int k = 0; k < 4; k++)
        assert_int_equal(total[k], 10000);
    assert_int_equal(f->cursor, 40000);
    sq_feeder_free(f);
}

static char *write_tmp(const char *content, size_t len)
{
    const char *dir = getenv("TMPDIR");
    char *path = malloc(512);
    snprintf(path, 512, "%s/sq_feeder_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

static void test_load_files(void **state)
{
    (void)state;
    char err[512];
    struct sq_feeder *f;
    /* a CSV file larger than the read chunk */
    size_t n = 20000;
    char *big = malloc(n * 16 + 32);
    size_t len = (size_t)sprintf(big, "id,name\n");
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(big + len, "%zu,n%zu\n", i, i);
    char *path = write_tmp(big, len);
    assert_int_equal(sq_feeder_load_csv(path, &f, err, sizeof(err)), 0);
    assert_int_equal(f->nrows, n);
    CELL(f, 0, 1, "n0");
    CELL(f, 19999, 0, "19999");
    sq_feeder_free(f);
    /* the same file as JSON: an error naming the path, line and column */
    assert_int_equal(sq_feeder_load_json(path, &f, err, sizeof(err)), -SQ_EPARSE);
    char want[600];
    snprintf(want, sizeof(want), "%s:1:1: expected '[' (a top-level array of objects), found 'i'",
             path);
    assert_string_equal(err, want);
    unlink(path);
    free(path);
    free(big);

    /* a CSV error names the path */
    const char *bad = "a,b\n1\n";
    path = write_tmp(bad, strlen(bad));
    assert_int_equal(sq_feeder_load_csv(path, &f, err, sizeof(err)), -SQ_EPARSE);
    snprintf(want, sizeof(want), "%s:2:2: row has 1 field, the header has 2", path);
    assert_string_equal(err, want);
    unlink(path);
    free(path);

    const char *js = "\xEF\xBB\xBF[{\"a\":\"1\"}]";
    path = write_tmp(js, strlen(js));
    assert_int_equal(sq_feeder_load_json(path, &f, err, sizeof(err)), 0);
    CELL(f, 0, 0, "1");
    sq_feeder_free(f);
    unlink(path);
    free(path);

    /* cannot read */
    assert_int_equal(sq_feeder_load_csv("/nonexistent/x.csv", &f, err, sizeof(err)), -ENOENT);
    assert_null(f);
    assert_string_equal(err, "/nonexistent/x.csv: cannot open: No such file or directory");
    assert_int_equal(sq_feeder_load_json("/", &f, err, sizeof(err)), -EISDIR);
    assert_string_equal(err, "/: cannot read: Is a directory");
    assert_null(f);
}

/* Files of many columns parse in linear time (a hash map of the names: the pairwise checks took
 * minutes at 100,000 columns) and still name a duplicate with both positions. */
static void test_many_columns(void **state)
{
    (void)state;
    enum { N = 100000 };
    size_t cap = (size_t)N * 16 + 64, n = 0;
    char *b = malloc(cap);
    assert_non_null(b);
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(b + n, cap - n, "%sc%d", i ? "," : "", i);
    size_t header = n;
    n += (size_t)snprintf(b + n, cap - n, "\n");
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(b + n, cap - n, "%s%d", i ? "," : "", i % 10);
    n += (size_t)snprintf(b + n, cap - n, "\n");
    struct sq_feeder *f = csv(b, n);
    assert_int_equal(f->ncolumns, N);
    assert_int_equal(sq_feeder_column(f, "c99999", 6), N - 1);
    CELL(f, 0, N - 1, "9");
    sq_feeder_free(f);
    /* the last column named as the eighth */
    n = header - strlen("c99999");
    n += (size_t)snprintf(b + n, cap - n, "c7\n1\n");
    char err[256];
    assert_int_equal(sq_feeder__parse_csv("t.csv", b, n, &f, err, sizeof(err)), -SQ_EPARSE);
    char want[128]; /* the duplicate starts where c99999 did */
    snprintf(want, sizeof(want),
             "t.csv:1:%zu: duplicate column name 'c7' (column 100000, first as column 8)",
             header - strlen("c99999") + 1);
    assert_string_equal(err, want);
    /* JSON: every row sets its keys in another order, new keys keep coming */
    n = (size_t)snprintf(b, cap, "[");
    for (int r = 0; r < 200; r++) {
        n += (size_t)snprintf(b + n, cap - n, "%s{", r ? "," : "");
        for (int k = 0; k < 200; k++)
            n += (size_t)snprintf(b + n, cap - n, "%s\"k%d\": %d", k ? "," : "", (k * 7 + r) % 250,
                                  k);
        n += (size_t)snprintf(b + n, cap - n, "}");
    }
    n += (size_t)snprintf(b + n, cap - n, "]");
    b[n] = '\0';
    f = json(b);
    assert_int_equal(f->ncolumns, 250);
    assert_int_equal(f->nrows, 200);
    sq_feeder_free(f);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_basic),
        cmocka_unit_test(test_csv_quoting),
        cmocka_unit_test(test_csv_line_endings),
        cmocka_unit_test(test_csv_bom),
        cmocka_unit_test(test_csv_errors),
        cmocka_unit_test(test_prefixes),
        cmocka_unit_test(test_json_basic),
        cmocka_unit_test(test_json_errors),
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_sequential_threads),
        cmocka_unit_test(test_load_files),
        cmocka_unit_test(test_many_columns),
        cmocka_unit_test(test_random_rows_follow_the_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
