/* tests/unit/test_b64.c - base64: RFC 4648 vectors, round trips, strict rejection. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/b64.h"

static const struct {
    const char *plain, *coded;
} rfc4648[] = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

static void test_rfc4648_vectors(void **state)
{
    (void)state;
    for (size_t i = 0; i < SQ_ARRAY_LEN(rfc4648); i++) {
        size_t n = strlen(rfc4648[i].plain);
        size_t cap = sq_b64_encoded_len(n);
        assert_int_equal(cap, strlen(rfc4648[i].coded) + 1);
        char *out = malloc(cap); /* exactly the advertised size: ASan checks the bound */
        assert_non_null(out);
        sq_b64_encode(rfc4648[i].plain, n, out);
        assert_string_equal(out, rfc4648[i].coded);
        free(out);

        unsigned char *dec = NULL;
        size_t dec_len = 99;
        assert_int_equal(sq_b64_decode(rfc4648[i].coded, strlen(rfc4648[i].coded), &dec, &dec_len),
                         0);
        assert_non_null(dec);
        assert_int_equal(dec_len, n);
        assert_memory_equal(dec, rfc4648[i].plain, n);
        free(dec);
    }
}

/* Binary input with NUL and high bytes, the last alphabet characters (the target's echo writes
 * a non-UTF-8 body this way). */
static void test_binary_vector(void **state)
{
    (void)state;
    char out[8];
    assert_int_equal(sq_b64_encoded_len(3), 5);
    sq_b64_encode("\xff\x00\xfe", 3, out);
    assert_string_equal(out, "/wD+");
    sq_b64_encode(NULL, 0, out);
    assert_string_equal(out, "");
}

static void test_all_bytes_roundtrip(void **state)
{
    (void)state;
    unsigned char in[300];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(i * 7 + 3);
    for (size_t n = 0; n <= sizeof(in); n++) {
        char *out = malloc(sq_b64_encoded_len(n));
        sq_b64_encode(in, n, out);
        assert_int_equal(strlen(out), sq_b64_encoded_len(n) - 1);
        unsigned char *dec;
        size_t dec_len;
        assert_int_equal(sq_b64_decode(out, strlen(out), &dec, &dec_len), 0);
        assert_int_equal(dec_len, n);
        assert_memory_equal(dec, in, n);
        free(dec);
        free(out);
    }
    /* both extra characters and every byte value */
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)(255 - i);
    char out[400];
    sq_b64_encode(all, sizeof(all), out);
    assert_non_null(strchr(out, '+'));
    assert_non_null(strchr(out, '/'));
}

static void test_rejects_bad_input(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "Zg",       /* length not a multiple of 4 */
        "Zg=",      /* idem */
        "Zm9vY",    /* idem */
        "Zg==Zg==", /* padding in the middle */
        "Z===",     /* three pad characters */
        "====",     /* only padding */
        "=Zm9",     /* padding first */
        "Zm=v",     /* pad before a data character */
        "Zh==",     /* unused bits not zero (f = 0x66 -> "Zg==") */
        "Zm9=",     /* idem for one pad */
        "Zm9v\n",   /* whitespace */
        "Zm 9v",    /* idem */
        "Zm9-",     /* URL-safe alphabet is not the standard one */
        "Zm9_",     /* idem */
        "Zm9\x80",  /* high byte */
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(bad); i++) {
        unsigned char *out = (unsigned char *)0x1;
        size_t len = 7;
        if (sq_b64_decode(bad[i], strlen(bad[i]), &out, &len) != -SQ_EDECODE)
            fail_msg("accepted bad input #%zu \"%s\"", i, bad[i]);
        assert_ptr_equal(out, (unsigned char *)0x1);
        assert_int_equal(len, 7);
    }
    /* an embedded NUL inside the given length */
    unsigned char *out;
    size_t len;
    assert_int_equal(sq_b64_decode("Zm\0v", 4, &out, &len), -SQ_EDECODE);
    /* n counts, not the NUL: a prefix of a longer valid string is judged on its own */
    assert_int_equal(sq_b64_decode("Zm9vYmFy", 4, &out, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(out, "foo", 3);
    free(out);
}

static void test_every_prefix_and_byte(void **state)
{
    (void)state;
    const char *good = "SGVsbG8sIHdvcmxkIQ==";
    size_t n = strlen(good);
    for (size_t k = 0; k <= n; k++) {
        /* an exact-size copy without a NUL, so over-reads show under ASan */
        char *p = malloc(k ? k : 1);
        memcpy(p, good, k);
        unsigned char *out;
        size_t len;
        int rc = sq_b64_decode(p, k, &out, &len);
        if (k % 4 == 0) {
            assert_int_equal(rc, 0);
            free(out);
        } else {
            assert_int_equal(rc, -SQ_EDECODE);
        }
        free(p);
    }
    /* every byte value at every position: accepted only if it is a valid string */
    char buf[21];
    for (size_t i = 0; i < n; i++) {
        for (int c = 0; c < 256; c++) {
            memcpy(buf, good, n);
            buf[i] = (char)c;
            unsigned char *out;
            size_t len;
            int rc = sq_b64_decode(buf, n, &out, &len);
            if (rc == 0) {
                /* re-encoding must give the input back: the decoder is canonical */
                char again[32];
                sq_b64_encode(out, len, again);
                assert_memory_equal(again, buf, n);
                free(out);
            } else {
                assert_int_equal(rc, -SQ_EDECODE);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_vectors),       cmocka_unit_test(test_binary_vector),
        cmocka_unit_test(test_all_bytes_roundtrip),   cmocka_unit_test(test_rejects_bad_input),
        cmocka_unit_test(test_every_prefix_and_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
