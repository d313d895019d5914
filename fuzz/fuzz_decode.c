/* fuzz_decode.c - the body decoders on arbitrary (mostly corrupt) encoded bytes.
 *
 * Input: byte 0 picks the coding (low 3 bits mod 5: identity, gzip, deflate, br, zstd) and
 * byte 1 seeds the split; the rest is the encoded body. Checks: every callback piece is
 * 1..SQ_DECODE_CHUNK bytes; the cap (1 MiB here, so bombs stay fast) is never passed; one
 * reused decoder fed random pieces (each an exact-size heap copy under ASan) gives the same
 * result and the same bytes as a fresh decoder fed the whole body at once (for an error, one
 * output is a prefix of the other; see below for the one way two errors may differ); a reset
 * after any outcome leaves the decoder usable.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/decode.h"

#define CAP (1u << 20)

struct out {
    unsigned char *p;
    size_t n;
};

static int collect(void *ud, const char *data, size_t len)
{
    struct out *o = ud;
    if (len == 0 || len > SQ_DECODE_CHUNK || o->n + len > CAP)
        abort();
    memcpy(o->p + o->n, data, len);
    o->n += len;
    return 0;
}

static uint32_t next_rand(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static int run(struct sq_decoder *d, enum sq_coding c, const uint8_t *in, size_t len, uint32_t seed,
               struct out *o)
{
    o->n = 0;
    if (sq_decoder_reset(d, c) != 0)
        abort();
    size_t off = 0;
    while (off < len) {
        size_t n = seed ? 1 + next_rand(&seed) % 97 : len;
        if (n > len - off)
            n = len - off;
        char *piece = malloc(n);
        if (!piece)
            abort();
        memcpy(piece, in + off, n);
        int rc = sq_decoder_feed(d, piece, n, collect, o);
        free(piece);
        off += n;
        if (rc < 0)
            return rc;
    }
    return sq_decoder_finish(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sq_decoder *reused;
    static struct out a, b;
    if (!reused) {
        if (sq_decoder_new(CAP, &reused) != 0)
            abort();
        a.p = malloc(CAP);
        b.p = malloc(CAP);
        if (!a.p || !b.p)
            abort();
    }
    if (size < 2)
        return 0;
    enum sq_coding c = (enum sq_coding)((data[0] & 7) % 5);
    uint32_t seed = data[1] * 2654435761u + 1;
    const uint8_t *in = data + 2;
    size_t len = size - 2;

    struct sq_decoder *fresh;
    if (sq_decoder_new(CAP, &fresh) != 0)
        abort();
    int rw = run(fresh, c, in, len, 0, &a);
    sq_decoder_free(fresh);
    int rp = run(reused, c, in, len, seed, &b);
    if (sq_decoder_total(reused) != b.n)
        abort();
    /* The same code, except that a corrupt stream may fail as -SQ_EDECODE one way and hit the
     * cap the other: zstd decodes a single-segment frame into a buffer sized by the frame's
     * declared content size, so a fresh context stops at "destination too small" where a reused
     * one, holding a larger buffer from an earlier frame, decodes on until the content-size
     * check at the frame's end (or the cap). Both fail; the bytes agree up to the shorter. */
    if (rw != rp && !(rw < 0 && rp < 0 && (rw == -SQ_ETOOBIG || rp == -SQ_ETOOBIG)))
        abort();
    size_t k = a.n < b.n ? a.n : b.n;
    if (memcmp(a.p, b.p, k) != 0 || (rw == 0 && a.n != b.n))
        abort();
    if (rw == 0 && c == SQ_CODING_NONE && (a.n != len))
        abort();
    if (rw > 0 || (rw < 0 && rw != -SQ_EDECODE && rw != -SQ_ETOOBIG))
        abort(); /* no callback error here and no allocation failure expected */
    return 0;
}
