/* tests/unit/test_file.c - base/file: a whole file read with a cap; a directory and an oversized
 * file refused as such (by size before any read, or while reading what has no size). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"

static char dir[64];

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

static void write_bytes(const char *name, const char *data, size_t n)
{
    char p[128];
    path_of(p, sizeof(p), name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sq_test_file_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    const char *names[] = {"empty", "ten", "nul", "sparse"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(names); i++) {
        char p[128];
        path_of(p, sizeof(p), names[i]);
        unlink(p);
    }
    rmdir(dir);
    return 0;
}

static void test_reads_whole_files(void **state)
{
    (void)state;
    char p[128];
    char *buf = NULL;
    size_t len = 99;
    write_bytes("empty", "", 0);
    path_of(p, sizeof(p), "empty");
    assert_int_equal(sq_file_read(p, 10, &buf, &len), 0);
    assert_int_equal(len, 0);
    assert_string_equal(buf, ""); /* NUL-terminated even when empty */
    free(buf);
    write_bytes("ten", "0123456789", 10);
    path_of(p, sizeof(p), "ten");
    assert_int_equal(sq_file_read(p, 10, &buf, &len), 0); /* exactly max */
    assert_int_equal(len, 10);
    assert_string_equal(buf, "0123456789");
    free(buf);
    write_bytes("nul", "a\0b", 3);
    path_of(p, sizeof(p), "nul");
    assert_int_equal(sq_file_read(p, 100, &buf, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, "a\0b", 4);
    free(buf);
}

static void test_refusals(void **state)
{
    (void)state;
    char p[128];
    char *buf = (char *)"untouched";
    size_t len = 7;
    path_of(p, sizeof(p), "ten");
    assert_int_equal(sq_file_read(p, 9, &buf, &len), -SQ_ETOOBIG); /* one byte over */
    assert_int_equal(sq_file_read(dir, 100, &buf, &len), -EISDIR);
    assert_int_equal(sq_file_read("/", 100, &buf, &len), -EISDIR);
    path_of(p, sizeof(p), "missing");
    assert_int_equal(sq_file_read(p, 100, &buf, &len), -ENOENT);
    assert_string_equal(buf, "untouched");
    assert_int_equal(len, 7);
    /* a large sparse file is refused by its size, without reading 1 GiB of zeros */
    path_of(p, sizeof(p), "sparse");
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (off_t)1 << 30), 0);
    fclose(f);
    assert_int_equal(sq_file_read(p, 16u << 20, &buf, &len), -SQ_ETOOBIG);
    /* what has no size (a character device) is refused once it has given max + 1 bytes */
    assert_int_equal(sq_file_read("/dev/zero", 100000, &buf, &len), -SQ_ETOOBIG);
    assert_int_equal(sq_file_read("/dev/null", 100, &buf, &len), 0);
    assert_int_equal(len, 0);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_whole_files),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
