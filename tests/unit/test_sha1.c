/* tests/unit/test_sha1.c - base/sha1.c: FIPS 180 examples and the padding's edges (a message
 * ending just before, at and after the 56-byte mark and the 64-byte block), against digests
 * from Python's hashlib; the WebSocket accept key (RFC 6455 section 1.3) is in test_ws.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/sha1.h"

static void hex(const uint8_t d[SQ_SHA1_LEN], char out[2 * SQ_SHA1_LEN + 1])
{
    for (int i = 0; i < SQ_SHA1_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void check(const void *in, size_t n, const char *want)
{
    uint8_t d[SQ_SHA1_LEN];
    char got[2 * SQ_SHA1_LEN + 1];
    sq_sha1(in, n, d);
    hex(d, got);
    assert_string_equal(got, want);
}

static void test_fips_examples(void **state)
{
    (void)state;
    check("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    check("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check(two, strlen(two), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

static void test_padding_edges(void **state)
{
    (void)state;
    static const struct {
        size_t n;
        const char *sha1;
    } v[] = {
        {55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"},
        {56, "c2db330f6083854c99d4b5bfb6e8f29f201be699"},
        {63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5"},
        {64, "0098ba824b5c16427bd7a1122a5a442a25ec644d"},
        {65, "11655326c708d70319be2610e8a57d9a5b959d3b"},
        {119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56"},
        {120, "f34c1488385346a55709ba056ddd08280dd4c6d6"},
        {1000000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char *a = malloc(v[i].n); /* exactly n: ASan checks the reads stay inside */
        assert_non_null(a);
        memset(a, 'a', v[i].n);
        check(a, v[i].n, v[i].sha1);
        free(a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_examples),
        cmocka_unit_test(test_padding_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
