/* Unit tests: base/parse (durations and integers users type) and base/err. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/parse.h"

static void durations_ok(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int64_t ns;
    } cases[] = {
        {"500ms", 500 * SQ_NS_PER_MS},
        {"10s", 10 * SQ_NS_PER_S},
        {"2m", 120 * SQ_NS_PER_S},
        {"1h", 3600 * SQ_NS_PER_S},
        {"1m30s", 90 * SQ_NS_PER_S},
        {"1.5s", 1500 * SQ_NS_PER_MS},
        {"250us", 250 * SQ_NS_PER_US},
        {"7", 7 * SQ_NS_PER_S}, /* bare number: the default unit */
        {"0s", 0},
        {"1h2m3s4ms", 3723 * SQ_NS_PER_S + 4 * SQ_NS_PER_MS},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(cases); i++) {
        int64_t ns = -1;
        assert_int_equal(sq_parse_duration(cases[i].in, SQ_NS_PER_S, &ns), 0);
        assert_int_equal(ns, cases[i].ns);
    }
}

static void durations_bad(void **state)
{
    (void)state;
    static const char *const bad[] = {"",   "s",   "10parsecs", "-1s",  "1..5s",      "1m30",
                                      "ms", "1 s", "101d",      "1e3s", "5000000000h"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(bad); i++) {
        int64_t ns = 42;
        assert_int_equal(sq_parse_duration(bad[i], SQ_NS_PER_S, &ns), -SQ_EPARSE);
        assert_int_equal(ns, 42);
    }
}

static void integers(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(sq_parse_u64("64", 1, 100, 0, &v), 0);
    assert_int_equal(v, 64);
    assert_int_equal(sq_parse_u64("10k", 1, UINT64_MAX, 1, &v), 0);
    assert_int_equal(v, 10000);
    assert_int_equal(sq_parse_u64("2M", 1, UINT64_MAX, 1, &v), 0);
    assert_int_equal(v, 2000000);
    assert_int_equal(sq_parse_u64("10k", 1, UINT64_MAX, 0, &v), -SQ_EPARSE);
    assert_int_equal(sq_parse_u64("0", 1, 100, 0, &v), -SQ_ERANGE);
    assert_int_equal(sq_parse_u64("101", 1, 100, 0, &v), -SQ_ERANGE);
    assert_int_equal(sq_parse_u64("abc", 1, 100, 0, &v), -SQ_EPARSE);
    assert_int_equal(sq_parse_u64("-1", 0, 100, 0, &v), -SQ_EPARSE);
    assert_int_equal(sq_parse_u64("", 0, 100, 0, &v), -SQ_EPARSE);
    assert_int_equal(sq_parse_u64("99999999999999999999999", 0, UINT64_MAX, 0, &v), -SQ_ERANGE);
}

static void error_names(void **state)
{
    (void)state;
    assert_string_equal(sq_strerror(-SQ_EPARSE), "malformed input");
    assert_string_equal(sq_strerror(SQ_ETOOBIG), "input exceeds a hard limit");
    assert_string_equal(sq_strerror(-ECONNREFUSED), strerror(ECONNREFUSED));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(durations_ok),
        cmocka_unit_test(durations_bad),
        cmocka_unit_test(integers),
        cmocka_unit_test(error_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
