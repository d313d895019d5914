/* test_sse.c - the event-stream counter: exact counts over every split of each stream.
 *
 * Each case is fed whole, split in two at every point, split in three at every pair of points
 * (short streams), and one byte at a time; the count must be the same each way, and the events
 * returned by the feeds must add up to s.events. A slow reference counter, written from the
 * WHATWG rules line by line, checks random streams too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/sse.h"

_Static_assert(sizeof(struct sq_sse) <= 16, "the SSE counter must stay small");

struct sse_case {
    const char *name;
    const char *in;
    size_t len; /* 0: strlen(in) */
    uint64_t events;
};

#define BOM "\xef\xbb\xbf"

static const struct sse_case cases[] = {
    {"empty", "", 0, 0},
    {"one event", "data: hello\n\n", 0, 1},
    {"no blank line yet", "data: hello\n", 0, 0},
    {"no line end at all", "data: hello", 0, 0},
    {"two events", "data: a\n\ndata: b\n\n", 0, 2},
    {"multi-line data", "data: a\ndata: b\ndata: c\n\n", 0, 1},
    {"id and data", "id: 1\ndata: {\"x\":1}\n\n", 0, 1},
    {"target style", "id: 0\ndata: {\"id\":0}\n\nid: 1\ndata: {\"id\":1}\n\n", 0, 2},
    {"event without data", "event: ping\n\n", 0, 0},
    {"id only", "id: 7\n\n", 0, 0},
    {"retry only", "retry: 1000\n\n", 0, 0},
    {"comment only", ": keep-alive\n\n", 0, 0},
    {"comment then data", ": c\ndata: x\n\n", 0, 1},
    {"comment between data and blank", "data: x\n: c\n\n", 0, 1},
    {"data with empty value", "data:\n\n", 0, 1},
    {"data without colon", "data\n\n", 0, 1},
    {"data colon no space", "data:x\n\n", 0, 1},
    {"data with spaces", "data:   x  \n\n", 0, 1},
    {"field with a trailing space is not data", "data \n\n", 0, 0},
    {"longer field name", "datax: 1\n\n", 0, 0},
    {"shorter field name", "dat: 1\n\n", 0, 0},
    {"case matters", "Data: 1\n\nDATA: 2\n\n", 0, 0},
    {"leading space is not a field", " data: 1\n\n", 0, 0},
    {"comment that says data", ":data: 1\n\n", 0, 0},
    {"several blank lines", "data: a\n\n\n\n\ndata: b\n\n\n", 0, 2},
    {"blank lines only", "\n\n\n\r\n\r\r", 0, 0},
    {"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", 0, 2},
    {"cr", "data: a\r\rdata: b\r\r", 0, 2},
    {"mixed endings", "data: a\r\n\rdata: b\n\r\ndata: c\r\n", 0, 2},
    {"cr lf is one line end", "data: a\r\n", 0, 0},
    {"lf cr is two line ends", "data: a\n\r", 0, 1},
    {"cr cr lf", "data: a\r\r\n", 0, 1},
    {"crlf crlf", "data: a\r\n\r\n", 0, 1},
    {"bom", BOM "data: a\n\n", 0, 1},
    {"bom then blank", BOM "\ndata: a\n\n", 0, 1},
    {"bom only at the start", BOM "data: a\n\n" BOM "data: b\n\n", 0, 1},
    {"two boms", BOM BOM "data: a\n\n", 0, 0},
    {"half a bom",
     "\xef\xbb"
     "data: a\n\ndata: b\n\n",
     0, 1},
    {"bom-like byte",
     "\xef"
     "\n"
     "data: a\n\n",
     0, 1},
    {"events then an open one", "data: 1\n\ndata: 2\n\ndata: 3\n", 0, 2},
    {"event type and data", "event: update\ndata: {}\nid: 9\n\n", 0, 1},
    {"unknown fields", "foo: bar\nbaz\n\n", 0, 0},
    {"unknown field then data", "foo: bar\ndata\n\n", 0, 1},
    {"nul and binary", "data: \0\x01\xff\n\n", 11, 1},
    {"long line",
     "data: "
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "\n\n",
     0, 1},
};

/* Feeds in[0, n) in pieces cut at cuts[0..ncuts) (ascending). Returns s.events and checks that
 * the per-feed returns add up. */
static uint64_t run(const char *in, size_t n, const size_t *cuts, size_t ncuts)
{
    struct sq_sse s;
    sq_sse_init(&s);
    uint64_t sum = 0;
    size_t at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : n;
        /* each piece in its own exact-size heap copy: ASan catches any over-read */
        char *piece = malloc(end > at ? end - at : 1);
        assert_non_null(piece);
        memcpy(piece, in + at, end - at);
        sum += sq_sse_feed(&s, piece, end - at);
        free(piece);
        at = end;
    }
    assert_true(sum == s.events);
    return s.events;
}

static uint64_t run_bytewise(const char *in, size_t n)
{
    struct sq_sse s;
    sq_sse_init(&s);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        uint64_t k = sq_sse_feed(&s, &c, 1);
        assert_true(k <= 1);
        sum += k;
        sum += sq_sse_feed(&s, &c, 0); /* an empty feed changes nothing */
    }
    assert_true(sum == s.events);
    return s.events;
}

static void check_all_splits(const char *name, const char *in, size_t n, uint64_t want)
{
    uint64_t got = run(in, n, NULL, 0);
    if (got != want)
        fail_msg("%s: whole: %llu events, want %llu", name, (unsigned long long)got,
                 (unsigned long long)want);
    for (size_t k = 0; k <= n; k++) {
        got = run(in, n, &k, 1);
        if (got != want)
            fail_msg("%s: split at %zu: %llu events, want %llu", name, k, (unsigned long long)got,
                     (unsigned long long)want);
    }
    if (n <= 120) {
        for (size_t a = 0; a <= n; a++) {
            for (size_t b = a; b <= n; b++) {
                size_t cuts[2] = {a, b};
                got = run(in, n, cuts, 2);
                if (got != want)
                    fail_msg("%s: split at %zu and %zu: %llu events, want %llu", name, a, b,
                             (unsigned long long)got, (unsigned long long)want);
            }
        }
    }
    got = run_bytewise(in, n);
    if (got != want)
        fail_msg("%s: byte by byte: %llu events, want %llu", name, (unsigned long long)got,
                 (unsigned long long)want);
}

static void test_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct sse_case *c = &cases[i];
        check_all_splits(c->name, c->in, c->len ? c->len : strlen(c->in), c->events);
    }
}

/* The number of new events comes back from the feed that completes them. */
static void test_feed_returns(void **state)
{
    (void)state;
    struct sq_sse s;
    sq_sse_init(&s);
    assert_int_equal(sq_sse_feed(&s, "data: 1\n", 8), 0);
    assert_int_equal(sq_sse_feed(&s, "\n", 1), 1);
    assert_int_equal(sq_sse_feed(&s, "data: 2\n\ndata: 3\n\ndata: 4", 25), 2);
    assert_int_equal(sq_sse_feed(&s, "\r", 1), 0);
    assert_int_equal(sq_sse_feed(&s, "\n", 1), 0); /* the LF of the CRLF above */
    assert_int_equal(sq_sse_feed(&s, "\r", 1), 1); /* a CR alone is a blank line */
    assert_int_equal(sq_sse_feed(&s, "\n", 1), 0); /* ...and this LF belongs to it */
    assert_int_equal(sq_sse_feed(&s, "\n", 1), 0); /* a blank line with nothing pending */
    assert_int_equal(s.events, 4);
    /* a CR at the end of a feed, then data: the CR ended the line on its own */
    assert_int_equal(sq_sse_feed(&s, "data: 5\r", 8), 0);
    assert_int_equal(sq_sse_feed(&s, "\r", 1), 1);
    assert_int_equal(s.events, 5);
    /* init starts over */
    sq_sse_init(&s);
    assert_int_equal(s.events, 0);
    assert_int_equal(sq_sse_feed(&s, BOM "data\n\n", 9), 1);
}

/* Many events, coalesced in one feed and spread over every split point. */
static void test_many_events(void **state)
{
    (void)state;
    size_t cap = 64 * 1024, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    static const char *const ends[] = {"\n", "\r\n", "\r"};
    for (int i = 0; i < 200; i++) {
        const char *e = ends[i % 3];
        n += (size_t)snprintf(buf + n, cap - n, "id: %d%sdata: {\"i\":%d}%s%s", i, e, i, e, e);
        if (i % 7 == 0)
            n += (size_t)snprintf(buf + n, cap - n, ": comment%s", e);
        if (i % 11 == 0)
            n += (size_t)snprintf(buf + n, cap - n, "event: nodata%s%s", e, e);
    }
    check_all_splits("200 events, mixed line ends", buf, n, 200);
    free(buf);
}

/* Reference: split into lines per the spec, then apply the rules. */
static uint64_t reference(const unsigned char *p, size_t n)
{
    size_t i = 0;
    if (n >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf)
        i = 3;
    uint64_t events = 0;
    bool data = false;
    while (i < n) {
        size_t s = i;
        while (i < n && p[i] != '\r' && p[i] != '\n')
            i++;
        if (i == n)
            break; /* an unterminated last line is never processed */
        size_t e = i;
        if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n')
            i++;
        i++;
        size_t len = e - s;
        if (len == 0) {
            if (data)
                events++;
            data = false;
            continue;
        }
        if (p[s] == ':')
            continue;
        const unsigned char *colon = memchr(p + s, ':', len);
        size_t name_len = colon ? (size_t)(colon - (p + s)) : len;
        if (name_len == 4 && memcmp(p + s, "data", 4) == 0)
            data = true;
    }
    return events;
}

static void test_random_streams(void **state)
{
    (void)state;
    static const char *const atoms[] = {
        "data", "data:", "data: x", ":", ": c", "id: 1", "event: e", "\n",       "\r",  "\r\n",
        "\n\n", "d",     "at",      "a", "x",   BOM,     " ",        "retry: 5", "dat", "da"};
    uint64_t seed = 0x243f6a8885a308d3ull;
    char buf[512];
    for (int round = 0; round < 3000; round++) {
        size_t n = 0;
        int atoms_n = 1 + (int)(seed % 30);
        for (int k = 0; k < atoms_n; k++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            const char *a = atoms[seed % (sizeof(atoms) / sizeof(atoms[0]))];
            size_t al = strlen(a);
            if (n + al > sizeof(buf))
                break;
            memcpy(buf + n, a, al);
            n += al;
        }
        uint64_t want = reference((const unsigned char *)buf, n);
        uint64_t got = run(buf, n, NULL, 0);
        if (got != want)
            fail_msg("round %d: %llu events, reference %llu: \"%.*s\"", round,
                     (unsigned long long)got, (unsigned long long)want, (int)n, buf);
        for (size_t k = 0; k <= n; k++)
            assert_true(run(buf, n, &k, 1) == want);
        assert_true(run_bytewise(buf, n) == want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_feed_returns),
        cmocka_unit_test(test_many_events),
        cmocka_unit_test(test_random_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
