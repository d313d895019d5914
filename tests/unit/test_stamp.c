/* test_stamp.c - the event stamp: known encodings, round trips at the edges of every field,
 * refusals, the finder in payloads of every kind, and a guard page behind each input. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "proto_test.h"

#include "proto/stamp.h"

static void test_known(void **state)
{
    (void)state;
    char out[SQ_STAMP_MAX];
    struct sq_stamp s = {0, 0, 0};
    size_t n = sq_stamp_format(&s, out);
    assert_int_equal(n, 9);
    assert_memory_equal(out, "sq1.0.0.0", 9);
    s = (struct sq_stamp){31, 35, 36};
    n = sq_stamp_format(&s, out);
    assert_memory_equal(out, "sq1.z.z.10", n);
    s = (struct sq_stamp){32, 1295, 1296};
    n = sq_stamp_format(&s, out);
    assert_memory_equal(out, "sq1.10.zz.100", n);
    /* The longest: every field at its maximum. */
    s = (struct sq_stamp){UINT64_MAX, UINT64_MAX, INT64_MAX};
    n = sq_stamp_format(&s, out);
    assert_int_equal(n, SQ_STAMP_MAX);
    assert_memory_equal(out, "sq1.fzzzzzzzzzzzz.3w5e11264sgsf.1y2p0ij32e8e7", n);
    /* Crockford's alphabet has no i, l, o, u. */
    s = (struct sq_stamp){18, 1, 1};
    n = sq_stamp_format(&s, out);
    assert_memory_equal(out, "sq1.j.1.1", n);
    /* A negative time is written as 0. */
    struct sq_stamp_enc e;
    sq_stamp_enc_init(&e, 5);
    n = sq_stamp_encode(&e, 7, -5, out);
    assert_memory_equal(out, "sq1.5.7.0", n);
}

static uint64_t rng = 0x1234567;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_round_trip(void **state)
{
    (void)state;
    struct guard g;
    guard_init(&g, 4096);
    uint64_t edges[] = {0,
                        1,
                        31,
                        32,
                        35,
                        36,
                        1295,
                        1296,
                        1297,
                        UINT32_MAX,
                        (uint64_t)INT64_MAX,
                        UINT64_MAX - 1,
                        UINT64_MAX};
    for (size_t i = 0; i < SQ_ARRAY_LEN(edges) * 3 + 3000; i++) {
        struct sq_stamp s;
        if (i < SQ_ARRAY_LEN(edges) * 3) {
            uint64_t v = edges[i / 3];
            s.run = i % 3 == 0 ? v : next();
            s.seq = i % 3 == 1 ? v : next();
            s.ns = (int64_t)((i % 3 == 2 ? v : next()) & (uint64_t)INT64_MAX);
        } else {
            s.run = next() >> (next() % 64);
            s.seq = next() >> (next() % 64);
            s.ns = (int64_t)((next() >> (next() % 64)) & (uint64_t)INT64_MAX);
        }
        char out[SQ_STAMP_MAX];
        struct sq_stamp_enc e;
        sq_stamp_enc_init(&e, s.run);
        uint64_t before = n_allocs;
        size_t n = sq_stamp_encode(&e, s.seq, s.ns, out);
        assert_true(n <= SQ_STAMP_MAX);
        const char *p = guard_put(&g, out, n);
        struct sq_stamp back;
        assert_int_equal(sq_stamp_parse(p, n, &back), 0);
        assert_int_equal(n_allocs, before);
        assert_true(back.run == s.run && back.seq == s.seq && back.ns == s.ns);
        /* Every strict prefix is refused (read without crossing the guard page), except those
         * that end inside the time field: "sq1.a.b.12" cut to "sq1.a.b.1" is a stamp too. */
        size_t last_dot = (size_t)((const char *)memrchr(out, '.', n) - out);
        for (size_t k = 0; k <= last_dot + 1; k++) {
            p = guard_put(&g, out, k);
            struct sq_stamp t;
            CHECK(sq_stamp_parse(p, k, &t) == -SQ_EPARSE, "prefix %zu of %.*s parsed\n", k, (int)n,
                  out);
        }
    }
    guard_free(&g);
}

static void test_refusals(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "sq1.",
        "sq1...",
        "sq1.a.b",
        "sq1.a.b.",
        "sq2.a.b.c",
        "SQ1.a.b.c",
        "sq1.A.b.c",
        "sq1.i.b.c",                                      /* i is not Crockford base32 */
        "sq1.00.b.c",                                     /* leading zero */
        "sq1.a.01.c",                                     /* leading zero */
        "sq1.a.b.0c",                                     /* leading zero */
        "sq1.a.b.c.",                                     /* left over */
        "sq1.a.b.c ",                                     /* left over */
        "sq1.g00000000000000.b.c",                        /* run over 64 bits */
        "sq1.a.3w5e11264sgsg.c",                          /* seq over 64 bits */
        "sq1.a.b.1y2p0ij32e8e8",                          /* time over INT64_MAX */
        "sq1.a.b.zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", /* absurdly long */
        "sq1.a.b-c.d",
    };
    struct sq_stamp s;
    for (size_t i = 0; i < SQ_ARRAY_LEN(bad); i++)
        CHECK(sq_stamp_parse(bad[i], strlen(bad[i]), &s) == -SQ_EPARSE, "parsed '%s'\n", bad[i]);
    assert_int_equal(sq_stamp_parse("sq1.a.b.c", 9, &s), 0);
    assert_int_equal(s.run, 10);
    assert_int_equal(s.seq, 11);
    assert_int_equal(s.ns, 12);
}

struct fcase {
    const char *in;
    size_t n; /* 0: strlen(in) */
    bool found;
    size_t at, len;
    uint64_t seq;
};

static void test_find(void **state)
{
    (void)state;
    static const struct fcase cases[] = {
        {"{\"t\":\"sq1.k.1.2\"}", 0, true, 6, 9, 1},
        {"sq1.k.2.2", 0, true, 0, 9, 2},
        {"X-Stamp: sq1.k.3.2\r\n", 0, true, 9, 9, 3},
        {"/webhook/sq1.k.4.2?x=1", 0, true, 9, 9, 4},
        {"xsq1.k.5.2", 0, false, 0, 0, 0},    /* glued on the left */
        {"sq1.k.5.2x", 0, true, 0, 10, 5},    /* x is a base36 digit of the time */
        {"sq1.k.5.2X", 0, false, 0, 0, 0},    /* an upper-case letter glues too */
        {"a.sq1.k.5.2", 0, false, 0, 0, 0},   /* a dot glues */
        {"sq1.k.5.2.", 0, false, 0, 0, 0},    /* a dot glues */
        {"sq1.sq1.k.6.2", 0, false, 0, 0, 0}, /* no free-standing candidate */
        {"sq1.bad sq1.k.7.2", 0, true, 8, 9, 7},
        {"sq1.sq1.k.8.1 sq1.k.9.2", 0, true, 14, 9, 9},
        {"sq1.k.10", 0, false, 0, 0, 0},
        {"", 0, false, 0, 0, 0},
        {"sq1", 0, false, 0, 0, 0},
        {"{\"a\":\"sq1.k.1.a\",\"b\":\"sq1.k.2.b\"}", 0, true, 6, 9, 1}, /* the first wins */
        {"\x00\xffsq1.k.11.3\xff", 13, true, 2, 10, 37},
    };
    struct guard g;
    guard_init(&g, 4096);
    for (size_t i = 0; i < SQ_ARRAY_LEN(cases); i++) {
        const struct fcase *t = &cases[i];
        size_t n = t->n ? t->n : strlen(t->in);
        const char *p = guard_put(&g, t->in, n);
        struct sq_stamp s;
        size_t at = 99, len = 99;
        bool f = sq_stamp_find(p, n, &s, &at, &len);
        CHECK(f == t->found, "'%s': found %d\n", t->in, f);
        if (f) {
            CHECK(at == t->at && len == t->len && s.seq == t->seq,
                  "'%s': at %zu len %zu seq %llu\n", t->in, at, len, (unsigned long long)s.seq);
            /* Truncated just before the stamp's end, it is not found there. */
            p = guard_put(&g, t->in, at + len - 1);
            bool f2 = sq_stamp_find(p, at + len - 1, &s, &at, &len);
            CHECK(!f2 || at + len <= t->at + t->len - 1, "'%s': found in a truncation\n", t->in);
        }
    }
    guard_free(&g);
}

static void test_now(void **state)
{
    (void)state;
    int64_t a = sq_stamp_now_ns();
    assert_true(a > 1600000000LL * 1000000000LL); /* after 2020 */
    struct sq_stamp_enc e;
    sq_stamp_enc_init(&e, 0xdeadbeef);
    char out[SQ_STAMP_MAX];
    size_t n = sq_stamp_encode(&e, 1, a, out);
    struct sq_stamp s;
    assert_int_equal(sq_stamp_parse(out, n, &s), 0);
    assert_int_equal(s.ns, a);
    assert_int_equal(s.run, 0xdeadbeef);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known),    cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals), cmocka_unit_test(test_find),
        cmocka_unit_test(test_now),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
