/* test_decode.c - the body decoders against the libraries' own compressors.
 *
 * Every coding round-trips several bodies (empty, tiny, text, incompressible, a long run that
 * inflates far past the output buffer) fed whole, split in two at many points, and one byte at
 * a time; truncated streams, corrupt and trailing bytes fail; the cap stops a bomb; a warm
 * decoder resets without a system allocation.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <brotli/encode.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "http/decode.h"

/* ---- compressors ---- */

struct blob {
    unsigned char *p;
    size_t n;
};

static void blob_free(struct blob *b)
{
    free(b->p);
    b->p = NULL;
    b->n = 0;
}

/* wbits: 31 gzip, 15 zlib, -15 raw deflate. */
static struct blob z_compress(const unsigned char *in, size_t n, int wbits, int level)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    assert_int_equal(deflateInit2(&z, level, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    struct blob b = {malloc(cap), 0};
    assert_non_null(b.p);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = b.p;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    b.n = cap - z.avail_out;
    deflateEnd(&z);
    return b;
}

static struct blob br_compress(const unsigned char *in, size_t n, int quality)
{
    size_t cap = BrotliEncoderMaxCompressedSize(n) + 64;
    struct blob b = {malloc(cap), cap};
    assert_non_null(b.p);
    assert_true(BrotliEncoderCompress(quality, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC, n, in,
                                      &b.n, b.p));
    return b;
}

static struct blob zs_compress(const unsigned char *in, size_t n, int level, bool checksum)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    assert_non_null(c);
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum ? 1 : 0);
    size_t cap = ZSTD_compressBound(n) + 64;
    struct blob b = {malloc(cap), 0};
    assert_non_null(b.p);
    size_t r = ZSTD_compress2(c, b.p, cap, in, n);
    assert_false(ZSTD_isError(r));
    b.n = r;
    ZSTD_freeCCtx(c);
    return b;
}

enum { K_GZIP, K_ZLIB, K_RAW, K_BR, K_ZSTD, K__N };
static const char *const kind_name[K__N] = {"gzip", "deflate/zlib", "deflate/raw", "br", "zstd"};
static const enum sq_coding kind_coding[K__N] = {SQ_CODING_GZIP, SQ_CODING_DEFLATE,
                                                 SQ_CODING_DEFLATE, SQ_CODING_BR, SQ_CODING_ZSTD};

static struct blob encode(int kind, const unsigned char *in, size_t n)
{
    switch (kind) {
    case K_GZIP:
        return z_compress(in, n, 31, 6);
    case K_ZLIB:
        return z_compress(in, n, 15, 6);
    case K_RAW:
        return z_compress(in, n, -15, 6);
    case K_BR:
        return br_compress(in, n, 5);
    default:
        return zs_compress(in, n, 3, true);
    }
}

/* ---- bodies ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static struct blob body_text(size_t n)
{
    static const char *const words[] = {"{\"id\":", "\"name\":", "\"items\"", "[1,2,3]", "true",
                                        "false",    "null",      "squall",    "load",    "test"};
    struct blob b = {malloc(n + 1), n};
    assert_non_null(b.p);
    size_t i = 0;
    while (i < n) {
        const char *w = words[next_rand() % 10];
        size_t k = strlen(w);
        if (k > n - i)
            k = n - i;
        memcpy(b.p + i, w, k);
        i += k;
        if (i < n)
            b.p[i++] = (unsigned char)(next_rand() % 2 ? ',' : ' ');
    }
    return b;
}

static struct blob body_random(size_t n)
{
    struct blob b = {malloc(n + 1), n};
    assert_non_null(b.p);
    for (size_t i = 0; i < n; i++)
        b.p[i] = (unsigned char)next_rand();
    return b;
}

static struct blob body_run(size_t n)
{
    struct blob b = {malloc(n + 1), n};
    assert_non_null(b.p);
    memset(b.p, 'a', n);
    return b;
}

/* ---- the sink ---- */

struct sink {
    unsigned char *p;
    size_t n, cap;
    size_t calls;
    size_t biggest;
    int fail_after; /* > 0: return -77 on that call */
};

static int on_data(void *ud, const char *data, size_t len)
{
    struct sink *s = ud;
    assert_true(len > 0);
    assert_true(len <= SQ_DECODE_CHUNK);
    s->calls++;
    if (s->fail_after && (int)s->calls == s->fail_after)
        return -77;
    if (len > s->biggest)
        s->biggest = len;
    if (s->n + len > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        while (cap < s->n + len)
            cap *= 2;
        s->p = realloc(s->p, cap);
        assert_non_null(s->p);
        s->cap = cap;
    }
    memcpy(s->p + s->n, data, len);
    s->n += len;
    return 0;
}

static void sink_clear(struct sink *s)
{
    s->n = 0;
    s->calls = 0;
    s->biggest = 0;
    s->fail_after = 0;
}

/* Decodes enc in pieces: split == 0 whole, split == 1 one byte at a time, split > 1: two pieces
 * at that offset (clamped). Returns the finish (or first failing feed) code. */
static int decode(struct sq_decoder *d, enum sq_coding c, const struct blob *enc, size_t split,
                  struct sink *s)
{
    sink_clear(s);
    int rc = sq_decoder_reset(d, c);
    if (rc < 0)
        return rc;
    const char *p = (const char *)enc->p;
    if (split == 1) {
        for (size_t i = 0; i < enc->n; i++)
            if ((rc = sq_decoder_feed(d, p + i, 1, on_data, s)) < 0)
                return rc;
    } else {
        size_t k = split > enc->n ? enc->n : split;
        if ((rc = sq_decoder_feed(d, p, k, on_data, s)) < 0)
            return rc;
        if ((rc = sq_decoder_feed(d, p + k, enc->n - k, on_data, s)) < 0)
            return rc;
    }
    return sq_decoder_finish(d);
}

static void expect_round_trip(struct sq_decoder *d, int kind, const struct blob *plain,
                              const struct blob *enc, size_t split, struct sink *s)
{
    int rc = decode(d, kind_coding[kind], enc, split, s);
    if (rc != 0 || s->n != plain->n || (plain->n && memcmp(s->p, plain->p, plain->n) != 0))
        fail_msg("%s: %zu plain bytes, %zu encoded, split %zu: rc %d (%s), got %zu bytes",
                 kind_name[kind], plain->n, enc->n, split, rc, sq_strerror(rc), s->n);
    assert_int_equal(sq_decoder_total(d), plain->n);
}

/* ---- tests ---- */

static void test_coding_from_header(void **state)
{
    (void)state;
    static const struct {
        const char *v;
        enum sq_coding c;
    } cases[] = {
        {"", SQ_CODING_NONE},
        {"identity", SQ_CODING_NONE},
        {" IDENTITY ", SQ_CODING_NONE},
        {" , ,", SQ_CODING_NONE},
        {"gzip", SQ_CODING_GZIP},
        {"GZip", SQ_CODING_GZIP},
        {"\t gzip \t", SQ_CODING_GZIP},
        {"x-gzip", SQ_CODING_GZIP},
        {"gzip,", SQ_CODING_GZIP},
        {", gzip ,,", SQ_CODING_GZIP},
        {"identity, gzip", SQ_CODING_GZIP},
        {"gzip, identity", SQ_CODING_GZIP},
        {"deflate", SQ_CODING_DEFLATE},
        {"Deflate", SQ_CODING_DEFLATE},
        {"br", SQ_CODING_BR},
        {"BR", SQ_CODING_BR},
        {"zstd", SQ_CODING_ZSTD},
        {"ZSTD ", SQ_CODING_ZSTD},
        {"gzip, br", SQ_CODING_OTHER},
        {"gzip,gzip", SQ_CODING_OTHER},
        {"compress", SQ_CODING_OTHER},
        {"gzip;q=1", SQ_CODING_OTHER},
        {"g zip", SQ_CODING_OTHER},
        {"brotli", SQ_CODING_OTHER},
        {"gzipx", SQ_CODING_OTHER},
        {"*", SQ_CODING_OTHER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enum sq_coding c = sq_coding_from_header(cases[i].v, strlen(cases[i].v));
        if (c != cases[i].c)
            fail_msg("\"%s\": got %s, want %s", cases[i].v, sq_coding_name(c),
                     sq_coding_name(cases[i].c));
    }
    /* a length, not a C string */
    assert_int_equal(sq_coding_from_header("gzipXYZ", 4), SQ_CODING_GZIP);
    assert_int_equal(sq_coding_from_header(NULL, 0), SQ_CODING_NONE);
    assert_string_equal(sq_accept_encoding_default(), "gzip, deflate, br, zstd");
    assert_string_equal(sq_coding_name(SQ_CODING_BR), "br");
    assert_string_equal(sq_coding_name(SQ_CODING_NONE), "identity");
}

static void test_round_trips(void **state)
{
    (void)state;
    struct blob bodies[] = {body_text(0),       body_text(1),      body_text(5000),
                            body_random(70000), body_run(3 << 20), body_text(200000)};
    struct sq_decoder *d;
    assert_int_equal(sq_decoder_new(0, &d), 0);
    struct sink s = {0};
    for (int kind = 0; kind < K__N; kind++) {
        for (size_t b = 0; b < sizeof(bodies) / sizeof(bodies[0]); b++) {
            struct blob *plain = &bodies[b];
            struct blob enc = encode(kind, plain->p, plain->n);
            expect_round_trip(d, kind, plain, &enc, 0, &s);
            if (plain->n >= (3u << 20)) /* a long run: many full output buffers per feed */
                assert_true(s.biggest == SQ_DECODE_CHUNK);
            /* every split point of small streams, about 200 of larger ones */
            size_t step = enc.n <= 600 ? 1 : enc.n / 200;
            for (size_t k = 2; k < enc.n; k += step)
                expect_round_trip(d, kind, plain, &enc, k, &s);
            /* one byte at a time (the 200 KB text: about 40-60 KB of feeds) */
            expect_round_trip(d, kind, plain, &enc, 1, &s);
            blob_free(&enc);
        }
    }
    free(s.p);
    sq_decoder_free(d);
    for (size_t b = 0; b < sizeof(bodies) / sizeof(bodies[0]); b++)
        blob_free(&bodies[b]);
}

static void test_identity_and_empty(void **state)
{
    (void)state;
    struct sq_decoder *d;
    assert_int_equal(sq_decoder_new(0, &d), 0);
    struct sink s = {0};
    /* a fresh decoder passes bytes through (NONE) */
    assert_int_equal(sq_decoder_feed(d, "abc", 3, on_data, &s), 0);
    assert_int_equal(sq_decoder_feed(d, "de", 2, on_data, &s), 0);
    assert_int_equal(sq_decoder_finish(d), 0);
    assert_int_equal(s.n, 5);
    assert_memory_equal(s.p, "abcde", 5);
    assert_int_equal(sq_decoder_coding(d), SQ_CODING_NONE);
    /* an empty body in any coding: nothing fed, finish says fine */
    for (int kind = 0; kind < K__N; kind++) {
        sink_clear(&s);
        assert_int_equal(sq_decoder_reset(d, kind_coding[kind]), 0);
        assert_int_equal(sq_decoder_feed(d, "", 0, on_data, &s), 0);
        assert_int_equal(sq_decoder_finish(d), 0);
        assert_int_equal(s.calls, 0);
        assert_int_equal(sq_decoder_total(d), 0);
    }
    /* NULL callback: decode and count only */
    unsigned char text[] = "count me, do not deliver me";
    struct blob enc = encode(K_GZIP, text, sizeof(text));
    assert_int_equal(sq_decoder_reset(d, SQ_CODING_GZIP), 0);
    assert_int_equal(sq_decoder_feed(d, (const char *)enc.p, enc.n, NULL, NULL), 0);
    assert_int_equal(sq_decoder_finish(d), 0);
    assert_int_equal(sq_decoder_total(d), sizeof(text));
    blob_free(&enc);
    /* OTHER cannot be decoded */
    assert_int_equal(sq_decoder_reset(d, SQ_CODING_OTHER), -SQ_EUSAGE);
    assert_int_equal(sq_decoder_feed(d, "x", 1, on_data, &s), -SQ_EUSAGE);
    assert_int_equal(sq_decoder_finish(d), -SQ_EUSAGE);
    assert_int_equal(sq_decoder_reset(d, SQ_CODING_NONE), 0);
    assert_int_equal(sq_decoder_finish(d), 0);
    free(s.p);
    sq_decoder_free(d);
    sq_decoder_free(NULL);
}

static void test_truncated(void **state)
{
    (void)state;
    struct blob plain = body_text(3000);
    struct sq_decoder *d;
    assert_int_equal(sq_decoder_new(0, &d), 0);
    struct sink s = {0};
    for (int kind = 0; kind < K__N; kind++) {
        struct blob enc = encode(kind, plain.p, plain.n);
        for (size_t k = 1; k < enc.n; k++) {
            struct blob cut = {enc.p, k};
            int rc = decode(d, kind_coding[kind], &cut, 0, &s);
            if (rc != -SQ_EDECODE)
                fail_msg("%s: prefix %zu of %zu: rc %d, want -SQ_EDECODE", kind_name[kind], k,
                         enc.n, rc);
            /* finish stays failed */
            assert_int_equal(sq_decoder_finish(d), -SQ_EDECODE);
            assert_true(s.n <= plain.n);
            assert_true(s.n == 0 || memcmp(s.p, plain.p, s.n) == 0);
        }
        /* the same prefix, one byte at a time (deflate: a single held sniff byte too) */
        struct blob one = {enc.p, 1};
        assert_int_equal(decode(d, kind_coding[kind], &one, 1, &s), -SQ_EDECODE);
        blob_free(&enc);
    }
    free(s.p);
    sq_decoder_free(d);
    blob_free(&plain);
}

static void test_corrupt(void **state)
{
    (void)state;
    struct blob plain = body_text(4000);
    struct sq_decoder *d;
    assert_int_equal(sq_decoder_new(0, &d), 0);
    struct sink s = {0};
    static const char notcomp[] = "this is plain text sent with a Content-Encoding";
    struct blob junk = {(unsigned char *)(uintptr_t)notcomp, sizeof(notcomp) - 1};
    for (int kind = 0; kind < K__N; kind++) {
        if (kind == K_RAW)
            continue; /* raw deflate has no header: any text may start a stored block */
        int rc = decode(d, kind_coding[kind], &junk, 0, &s);
        if (rc != -SQ_EDECODE)
            fail_msg("%s: plain text: rc %d", kind_name[kind], rc);
        assert_int_equal(sq_decoder_feed(d, "x", 1, on_data, &s), -SQ_EDECODE);
    }
    /* every single-byte flip: gzip and zlib carry a checksum, so the result is an error or, for
     * header bytes nobody checks (gzip MTIME, XFL, OS), the same body; br and zstd must not
     * crash or over-deliver (ASan run) */
    for (int kind = 0; kind < K__N; kind++) {
        struct blob enc = encode(kind, plain.p, plain.n);
        for (size_t i = 0; i < enc.n; i++) {
            enc.p[i] ^= 0x5a;
            int rc = decode(d, kind_coding[kind], &enc, 0, &s);
            enc.p[i] ^= 0x5a;
            bool same = rc == 0 && s.n == plain.n && memcmp(s.p, plain.p, plain.n) == 0;
            if (kind == K_GZIP || kind == K_ZLIB || kind == K_ZSTD) {
                if (rc >= 0 && !same)
                    fail_msg("%s: flip at %zu of %zu decoded to a different body", kind_name[kind],
                             i, enc.n);
                assert_true(rc >= 0 || rc == -SQ_EDECODE);
            } else {
                assert_true(rc == 0 || rc == -SQ_EDECODE);
            }
        }
        /* bytes after the end of the stream */
        struct blob more = {malloc(enc.n + 3), enc.n + 3};
        memcpy(more.p, enc.p, enc.n);
        memcpy(more.p + enc.n, "xyz", 3);
        assert_int_equal(decode(d, kind_coding[kind], &more, 0, &s), -SQ_EDECODE);
        assert_int_equal(decode(d, kind_coding[kind], &more, 1, &s), -SQ_EDECODE);
        blob_free(&more);
        blob_free(&enc);
    }
    /* a zlib stream that needs a preset dictionary */
    static const unsigned char fdict[] = {0x78, 0xbb, 0x00, 0x00, 0x00, 0x01, 0x03, 0x00};
    struct blob dict = {(unsigned char *)(uintptr_t)fdict, sizeof(fdict)};
    assert_int_equal(decode(d, SQ_CODING_DEFLATE, &dict, 0, &s), -SQ_EDECODE);
    free(s.p);
    sq_decoder_free(d);
    blob_free(&plain);
}

static void test_gzip_members(void **state)
{
    (void)state;
    unsigned char a[] = "first member|", b[] = "second member";
    struct blob ea = encode(K_GZIP, a, sizeof(a) - 1), eb = encode(K_GZIP, b, sizeof(b) - 1);
    struct blob both = {malloc(ea.n + eb.n), ea.n + eb.n};
    memcpy(both.p, ea.p, ea.n);
    memcpy(both.p + ea.n, eb.p, eb.n);
    struct sq_decoder *d;
    assert_int_equal(sq_decoder_new(0, &d), 0);
    struct sink s = {0};
    for (size_t split = 0; split < both.n; split++) {
        assert_int_equal(decode(d, SQ_CODING_GZIP, &both, split, &s), 0);
        assert_int_equal(s.n, sizeof(a) + sizeof(b) - 2);
        assert_memory_equal(s.p, "first member|second member", s.n);
    }
    /* the second member cut short: truncated */
    struct blob cut = {both.p, both.n - 1};
    assert_int_equal(decode(d, SQ_CODING_GZIP, &cut, 0, &s), -SQ_EDECODE);
    /* zstd: two frames are one body too */
    struct blob za = encode(K_ZSTD, a, sizeof(a) - 1), zb = encode(K_ZSTD, b, sizeof(b) - 1);
    struct blob zboth = {malloc(za.n + zb.n), za.n + zb.n};
    memcpy(zboth.p, za.p, za.n);
    memcpy(zboth.p + za.n, zb.p, zb.n);
    for (size_t split = 0; split < zboth.n; split++) {
        assert_int_equal(decode(d, SQ_CODING_ZSTD, &zboth, split, &s), 0);
        assert_memory_equal(s.p, "first member|second member", s.n);
    }
    free(s.p);
    sq_decoder_free(d);
    blob_free(&ea);
    blob_free(&eb);
    blob_free(&both);
    blob_free(&za);
    blob_free(&zb);
    blob_free(&zboth);
}

static void test_bomb_cap(void **state)
{
    (void)state;
    struct blob zeros = body_run(8u << 20);
    struct sq_decoder *d;
    assert_int_equal(sq_decoder_new(1u << 20, &d), 0);
    struct sink s = {0};
    for (int kind = 0; kind < K__N; kind++) {
        struct blob enc = encode(kind, zeros.p, zeros.n);
        assert_true(enc.n < 64 * 1024); /* a small body that inflates 8 MiB */
        for (size_t split = 0; split <= 1; split++) {
            int rc = decode(d, kind_coding[kind], &enc, split, &s);
            if (rc != -SQ_ETOOBIG)
                fail_msg("%s: rc %d, want -SQ_ETOOBIG", kind_name[kind], rc);
            assert_true(s.n <= (1u << 20));
            assert_true(s.n > (1u << 20) - SQ_DECODE_CHUNK);
            assert_true(sq_decoder_total(d) == s.n);
            assert_int_equal(sq_decoder_finish(d), -SQ_ETOOBIG);
            assert_int_equal(sq_decoder_feed(d, "x", 1, on_data, &s), -SQ_ETOOBIG);
        }
        /* a cap exactly the size of the body passes */
        sq_decoder_set_max(d, zeros.n);
        int rc = decode(d, kind_coding[kind], &enc, 0, &s);
        if (rc != 0)
            fail_msg("%s: exact cap: rc %d (%s)", kind_name[kind], rc, sq_strerror(rc));
        assert_int_equal(s.n, zeros.n);
        sq_decoder_set_max(d, 1u << 20);
        blob_free(&enc);
    }
    /* identity is capped too */
    assert_int_equal(sq_decoder_reset(d, SQ_CODING_NONE), 0);
    assert_int_equal(sq_decoder_feed(d, (const char *)zeros.p, 1u << 20, NULL, NULL), 0);
    assert_int_equal(sq_decoder_feed(d, "x", 1, NULL, NULL), -SQ_ETOOBIG);
    sq_decoder_free(d);
    /* the default cap: 64 MiB */
    struct blob big = body_run((64u << 20) + 1);
    struct blob enc = z_compress(big.p, big.n, 31, 1);
    blob_free(&big);
    assert_int_equal(sq_decoder_new(0, &d), 0);
    assert_int_equal(sq_decoder_reset(d, SQ_CODING_GZIP), 0);
    assert_int_equal(sq_decoder_feed(d, (const char *)enc.p, enc.n, NULL, NULL), -SQ_ETOOBIG);
    assert_true(sq_decoder_total(d) <= SQ_DECODE_DEFAULT_MAX);
    assert_true(sq_decoder_total(d) > SQ_DECODE_DEFAULT_MAX - SQ_DECODE_CHUNK);
    blob_free(&enc);
    sq_decoder_free(d);
    free(s.p);
    blob_free(&zeros);
}

static void test_callback_error(void **state)
{
    (void)state;
    struct blob plain = body_random(100000);
    struct sq_decoder *d;
    assert_int_equal(sq_decoder_new(0, &d), 0);
    struct sink s = {0};
    for (int kind = 0; kind < K__N; kind++) {
        struct blob enc = encode(kind, plain.p, plain.n);
        assert_int_equal(sq_decoder_reset(d, kind_coding[kind]), 0);
        sink_clear(&s);
        s.fail_after = 3;
        assert_int_equal(sq_decoder_feed(d, (const char *)enc.p, enc.n, on_data, &s), -77);
        assert_int_equal(s.calls, 3);
        assert_int_equal(sq_decoder_feed(d, "x", 1, on_data, &s), -77);
        assert_int_equal(sq_decoder_finish(d), -77);
        /* a reset clears it */
        expect_round_trip(d, kind, &plain, &enc, 0, &s);
        blob_free(&enc);
    }
    free(s.p);
    sq_decoder_free(d);
    blob_free(&plain);
}

/* A warm decoder resets and decodes again, in any coding it has seen, with no system
 * allocation; brotli's state is recreated from the pool. */
static void test_reset_reuse(void **state)
{
    (void)state;
    struct blob plain = body_text(150000);
    struct blob enc[K__N];
    for (int kind = 0; kind < K__N; kind++)
        enc[kind] = encode(kind, plain.p, plain.n);
    struct sq_decoder *d;
    assert_int_equal(sq_decoder_new(0, &d), 0);
    assert_int_equal(sq_decoder_allocs(d), 1); /* the output buffer */
    struct sink s = {0};
    for (int kind = 0; kind < K__N; kind++) /* warm every coding once */
        expect_round_trip(d, kind, &plain, &enc[kind], 0, &s);
    uint32_t warm = sq_decoder_allocs(d);
    size_t heap = sq_decoder_heap_bytes(d);
    for (int round = 0; round < 3; round++) {
        for (int kind = 0; kind < K__N; kind++) {
            expect_round_trip(d, kind, &plain, &enc[kind], round == 1 ? 1 : 0, &s);
            if (sq_decoder_allocs(d) != warm)
                fail_msg("round %d, %s: %u system allocations, %u when warm", round,
                         kind_name[kind], sq_decoder_allocs(d), warm);
        }
        /* a response abandoned halfway, then reset */
        assert_int_equal(sq_decoder_reset(d, SQ_CODING_BR), 0);
        assert_int_equal(sq_decoder_feed(d, (const char *)enc[K_BR].p, enc[K_BR].n / 2, NULL, NULL),
                         0);
        assert_int_equal(sq_decoder_reset(d, SQ_CODING_ZSTD), 0);
        assert_int_equal(
            sq_decoder_feed(d, (const char *)enc[K_ZSTD].p, enc[K_ZSTD].n / 2, NULL, NULL), 0);
        assert_int_equal(sq_decoder_allocs(d), warm);
    }
    assert_int_equal(sq_decoder_heap_bytes(d), heap);
    assert_true(heap < (2u << 20));
    free(s.p);
    sq_decoder_free(d);
    for (int kind = 0; kind < K__N; kind++)
        blob_free(&enc[kind]);
    blob_free(&plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coding_from_header),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_identity_and_empty),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_gzip_members),
        cmocka_unit_test(test_bomb_cap),
        cmocka_unit_test(test_callback_error),
        cmocka_unit_test(test_reset_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
