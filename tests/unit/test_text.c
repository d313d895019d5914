/* tests/unit/test_text.c - base/text: hex digits, UTF-8 decode/encode/validate (every code point
 * round-trips; every malformed shape is refused), edit distance and suggestions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "base/text.h"

static void test_hex(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        int want = -1;
        if (c >= '0' && c <= '9')
            want = c - '0';
        else if (c >= 'a' && c <= 'f')
            want = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            want = c - 'A' + 10;
        assert_int_equal(sq_hex_value((unsigned char)c), want);
    }
    for (int v = 0; v < 16; v++) {
        assert_int_equal(sq_hex_value((unsigned char)sq_hex_lower[v]), v);
        assert_int_equal(sq_hex_value((unsigned char)sq_hex_upper[v]), v);
    }
    assert_string_equal(sq_hex_lower, "0123456789abcdef");
    assert_string_equal(sq_hex_upper, "0123456789ABCDEF");
}

/* Every scalar value encodes to the length its range says and decodes back to itself. */
static void test_utf8_round_trip(void **state)
{
    (void)state;
    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff)
            continue;
        unsigned char u[4];
        size_t n = sq_utf8_encode(cp, u);
        size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        assert_int_equal(n, want);
        uint32_t back = 0xffffffff;
        assert_int_equal(sq_utf8_decode(u, n, &back), n);
        assert_int_equal(back, cp);
        assert_true(sq_utf8_valid((const char *)u, n));
        if (n > 1) { /* cut short: refused */
            assert_int_equal(sq_utf8_decode(u, n - 1, NULL), 0);
            assert_false(sq_utf8_valid((const char *)u, n - 1));
        }
    }
}

static void test_utf8_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t n;
    } bad[] = {
        {"\x80", 1},             /* a continuation byte alone */
        {"\xbf", 1},             /* likewise */
        {"\xc0\x80", 2},         /* overlong NUL */
        {"\xc1\xbf", 2},         /* overlong */
        {"\xe0\x80\xaf", 3},     /* overlong '/' */
        {"\xe0\x9f\xbf", 3},     /* overlong U+07FF */
        {"\xf0\x8f\xbf\xbf", 4}, /* overlong U+FFFF */
        {"\xed\xa0\x80", 3},     /* U+D800, a surrogate */
        {"\xed\xbf\xbf", 3},     /* U+DFFF */
        {"\xf4\x90\x80\x80", 4}, /* past U+10FFFF */
        {"\xf5\x80\x80\x80", 4}, /* no such lead byte */
        {"\xff", 1},             /* likewise */
        {"\xc3\x28", 2},         /* the second byte is not a continuation */
        {"\xe2\x28\xa1", 3},     /* likewise */
        {"\xf0\x90\x28\xbc", 4}, /* the third */
        {"\xc3", 1},             /* truncated */
        {"\xe2\x82", 2},         /* truncated */
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(bad); i++) {
        assert_int_equal(sq_utf8_decode((const unsigned char *)bad[i].s, bad[i].n, NULL), 0);
        assert_false(sq_utf8_valid(bad[i].s, bad[i].n));
    }
    assert_true(sq_utf8_valid("", 0));
    assert_true(sq_utf8_valid("abc\xc3\xa9\xe2\x98\x83\xf0\x9f\x98\x80", 12));
    assert_false(sq_utf8_valid("abc\xc3\xa9\xe2\x98", 7)); /* cut inside the last one */
    uint32_t cp = 0;
    assert_int_equal(sq_utf8_decode((const unsigned char *)"\xf4\x8f\xbf\xbf", 4, &cp), 4);
    assert_int_equal(cp, 0x10ffff);
    assert_int_equal(sq_utf8_decode((const unsigned char *)"A\x80", 2, &cp), 1);
    assert_int_equal(cp, 'A');
}

static size_t dist(const char *a, const char *b)
{
    return sq_edit_distance(a, strlen(a), b, strlen(b));
}

static void test_edit_distance(void **state)
{
    (void)state;
    assert_int_equal(dist("", ""), 0);
    assert_int_equal(dist("abc", ""), 3);
    assert_int_equal(dist("", "abc"), 3);
    assert_int_equal(dist("kitten", "sitting"), 3);
    assert_int_equal(dist("metod", "method"), 1);
    assert_int_equal(dist("methdo", "method"), 2); /* a swap is two edits */
    assert_int_equal(dist("URL", "url"), 0);       /* ASCII case is ignored */
    assert_int_equal(dist("Timeout", "timeout"), 0);
    assert_int_equal(dist("_", "\x7f"), 1); /* only letters fold */
    assert_int_equal(dist("[", "{"), 1);
    /* 63 bytes is the longest measured; longer is "far" */
    char a[70], b[70];
    memset(a, 'a', 63);
    a[63] = '\0';
    memset(b, 'a', 63);
    b[63] = '\0';
    b[0] = 'b';
    assert_int_equal(dist(a, b), 1);
    memset(a, 'a', 64);
    a[64] = '\0';
    assert_int_equal(dist(a, b), 64);
    assert_int_equal(dist(b, a), 64);
}

static void test_suggest(void **state)
{
    (void)state;
    struct sq_suggest s;
    char tail[64];
    sq_suggest_init(&s, "metod", 5);
    assert_string_equal(sq_suggest_tail(&s, tail, sizeof(tail)), "");
    sq_suggest_try(&s, "url");
    assert_null(s.best);
    sq_suggest_try(&s, "method");
    sq_suggest_try(&s, "methods"); /* farther: the first closest stays */
    assert_string_equal(s.best, "method");
    assert_string_equal(sq_suggest_tail(&s, tail, sizeof(tail)), " (did you mean 'method'?)");
    /* the bound grows with the length: 1 + longest / 4 */
    sq_suggest_init(&s, "ab", 2);
    sq_suggest_try(&s, "xy"); /* 2 > 1 + 2 / 4 */
    assert_null(s.best);
    sq_suggest_init(&s, "scenarois", 9);
    sq_suggest_try(&s, "scenarios"); /* 2 <= 1 + 9 / 4 */
    assert_string_equal(s.best, "scenarios");
    /* offer reports when a candidate became the best */
    sq_suggest_init(&s, "vus", 3);
    assert_true(sq_suggest_offer(&s, "vu", 2));
    assert_false(sq_suggest_offer(&s, "vux", 3)); /* as close, not closer */
    assert_true(sq_suggest_offer(&s, "vus", 3));
    assert_int_equal(s.bestd, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_utf8_round_trip),
        cmocka_unit_test(test_utf8_malformed),
        cmocka_unit_test(test_edit_distance),
        cmocka_unit_test(test_suggest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
