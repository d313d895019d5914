/* tests/unit/test_dynlib.c - base/dynlib: a set of libraries loaded once by SONAME, each
 * function looked up into its table; a missing library or function named in the error, the
 * table left untouched, and the first answer kept. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/dynlib.h"

struct table {
    size_t (*strlen)(const char *);
    int (*abs)(int);
};

static const char *const libc[] = {"libc.so.6"};

static void test_loads_each_function(void **state)
{
    (void)state;
    static const struct sq_dynlib_sym syms[] = {{0, "strlen", offsetof(struct table, strlen)},
                                                {0, "abs", offsetof(struct table, abs)}};
    static struct table t;
    static struct sq_dynlib d = {.what = "test",
                                 .hint = "none",
                                 .sonames = libc,
                                 .nlibs = 1,
                                 .syms = syms,
                                 .nsyms = 2,
                                 .table = &t,
                                 .table_size = sizeof(t)};
    char why[256] = "";
    assert_int_equal(sq_dynlib_load(&d, why, sizeof(why)), 0);
    assert_non_null(t.strlen);
    assert_int_equal(t.strlen("four"), 4);
    assert_int_equal(t.abs(-3), 3);
    assert_int_equal(sq_dynlib_load(&d, NULL, 0), 0); /* once: the first answer */
}

static void test_names_a_missing_library(void **state)
{
    (void)state;
    static const char *const none[] = {"libc.so.6", "libsquall-none.so.0"};
    static const struct sq_dynlib_sym syms[] = {{0, "strlen", offsetof(struct table, strlen)}};
    static struct table t;
    static struct sq_dynlib d = {.what = "Feature",
                                 .hint = "install it",
                                 .sonames = none,
                                 .nlibs = 2,
                                 .syms = syms,
                                 .nsyms = 1,
                                 .table = &t,
                                 .table_size = sizeof(t)};
    char why[256] = "";
    assert_int_equal(sq_dynlib_load(&d, why, sizeof(why)), -ENOENT);
    assert_non_null(strstr(why, "Feature: libsquall-none.so.0 could not be loaded"));
    assert_non_null(strstr(why, "(install it)"));
    assert_null(t.strlen);
    why[0] = '\0';
    assert_int_equal(sq_dynlib_load(&d, why, sizeof(why)), -ENOENT); /* the same answer */
    assert_non_null(strstr(why, "libsquall-none.so.0"));
}

static void test_names_a_missing_function(void **state)
{
    (void)state;
    static const struct sq_dynlib_sym syms[] = {
        {0, "strlen", offsetof(struct table, strlen)},
        {0, "sq_no_such_function", offsetof(struct table, abs)}};
    static struct table t;
    static struct sq_dynlib d = {.what = "Feature",
                                 .hint = "install it",
                                 .sonames = libc,
                                 .nlibs = 1,
                                 .syms = syms,
                                 .nsyms = 2,
                                 .table = &t,
                                 .table_size = sizeof(t)};
    char why[256] = "";
    assert_int_equal(sq_dynlib_load(&d, why, sizeof(why)), -ENOENT);
    assert_non_null(strstr(why, "libc.so.6 has no sq_no_such_function"));
    assert_null(t.strlen); /* all or nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loads_each_function),
        cmocka_unit_test(test_names_a_missing_library),
        cmocka_unit_test(test_names_a_missing_function),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
