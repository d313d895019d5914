/* http/decode.c - streaming body decoders over zlib, brotli and zstd (see decode.h).
 *
 * Invariants: d->out (SQ_DECODE_CHUNK bytes) is the only output buffer; every feed drains the
 * library into it and hands each filled piece to the callback before asking for more, so no
 * decoded byte is ever held across calls. d->total counts what was delivered and never passes
 * d->max. d->err != 0 means the response failed: every call returns it until a reset.
 *
 * Allocation: all three libraries allocate through pool_alloc/pool_free (zlib's zalloc, brotli's
 * alloc_func, zstd's customMem). A freed block is kept in a small pool (POOL_SLOTS blocks, at
 * most POOL_KEEP bytes) and handed out again for a request it fits, best fit first. That is
 * what makes brotli's reset free of system allocations: brotli has no reset call, so its state
 * is destroyed and created again, and the blocks it frees are the ones it asks for next.
 * d->allocs counts the system allocations, so a test can assert that a warm reset makes none.
 *
 * zlib: one z_stream serves gzip (windowBits 15 + 16), zlib-wrapped deflate (15) and raw deflate
 * (-15); inflateReset2 switches between them without freeing the 32 KiB window (its size, 15
 * bits, never changes). "deflate" is sniffed as browsers do: the first two bytes are held until
 * both are seen; a valid zlib header (CM 8, CINFO <= 7, FCHECK) selects the zlib wrapper, any
 * other pair raw deflate.
 */
#include "http/decode.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/str.h"
#include "http/codecs.h"

#define POOL_SLOTS      16
#define POOL_KEEP       (1u << 20) /* bytes of freed blocks kept for reuse */
#define ZSTD_WINDOW_LOG 23         /* 8 MiB: RFC 8878 9.1 for HTTP content coding */

enum { ST_RUN, ST_END };                    /* the encoded stream is running / has ended */
enum { ZM_NONE, ZM_GZIP, ZM_ZLIB, ZM_RAW }; /* the wrapper the z_stream was last reset for */

/* A pooled block: this header, then the caller's bytes (16-byte aligned like malloc). */
struct blk {
    size_t size;
    size_t pad_;
};

struct sq_decoder {
    uint8_t coding;  /* enum sq_coding */
    uint8_t state;   /* ST_RUN / ST_END */
    uint8_t zmode;   /* ZM_*: the wrapper z is set up for */
    uint8_t sniff_n; /* deflate: bytes held in sniff (0..2) until the wrapper is known */
    unsigned char sniff[2];
    bool fed;       /* a byte of this response was fed */
    bool br_dirty;  /* the brotli state has seen input since it was created */
    bool z_init;    /* z was initialised (inflateInit2) */
    bool closing;   /* sq_decoder_free: frees go to the system, not the pool */
    int err;        /* the failure of this response, or 0 */
    uint64_t total; /* decoded bytes delivered for this response */
    uint64_t max;
    z_stream z;
    BrotliDecoderState *br;
    ZSTD_DCtx *zs;
    size_t zs_left; /* last ZSTD_decompressStream result: 0 when a frame ended cleanly */
    /* allocator */
    uint32_t allocs;
    size_t held;   /* bytes allocated from the system and not yet freed (pool included) */
    size_t pooled; /* bytes in the pool */
    struct blk *pool[POOL_SLOTS];
    char *out;
};

/* ---- names ---- */

enum sq_coding sq_coding_from_header(const char *value, size_t len)
{
    enum sq_coding found = SQ_CODING_NONE;
    size_t i = 0;
    while (i < len) {
        while (i < len && (value[i] == ',' || value[i] == ' ' || value[i] == '\t'))
            i++;
        size_t s = i;
        while (i < len && value[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (value[e - 1] == ' ' || value[e - 1] == '\t'))
            e--;
        if (e == s)
            continue;
        const char *el = value + s;
        size_t n = e - s;
        enum sq_coding c;
        if (sq_ieq_cstr(el, n, "identity"))
            continue;
        if (sq_ieq_cstr(el, n, "gzip") || sq_ieq_cstr(el, n, "x-gzip"))
            c = SQ_CODING_GZIP;
        else if (sq_ieq_cstr(el, n, "deflate"))
            c = SQ_CODING_DEFLATE;
        else if (sq_ieq_cstr(el, n, "br"))
            c = SQ_CODING_BR;
        else if (sq_ieq_cstr(el, n, "zstd"))
            c = SQ_CODING_ZSTD;
        else
            return SQ_CODING_OTHER;
        if (found != SQ_CODING_NONE)
            return SQ_CODING_OTHER; /* stacked codings: not decoded here */
        found = c;
    }
    return found;
}

const char *sq_coding_name(enum sq_coding c)
{
    switch (c) {
    case SQ_CODING_NONE:
        return "identity";
    case SQ_CODING_GZIP:
        return "gzip";
    case SQ_CODING_DEFLATE:
        return "deflate";
    case SQ_CODING_BR:
        return "br";
    case SQ_CODING_ZSTD:
        return "zstd";
    default:
        return "other";
    }
}

const char *sq_accept_encoding_default(void)
{
    return "gzip, deflate, br, zstd";
}

/* ---- allocator ---- */

static void *pool_alloc(void *opaque, size_t size)
{
    struct sq_decoder *d = opaque;
    int best = -1;
    for (int i = 0; i < POOL_SLOTS; i++) {
        struct blk *b = d->pool[i];
        if (b && b->size >= size && (best < 0 || b->size < d->pool[best]->size))
            best = i;
    }
    if (best >= 0) {
        struct blk *b = d->pool[best];
        d->pool[best] = NULL;
        d->pooled -= b->size;
        return b + 1;
    }
    if (size > SIZE_MAX - sizeof(struct blk))
        return NULL;
    struct blk *b = malloc(sizeof(*b) + size);
    if (!b)
        return NULL;
    b->size = size;
    d->allocs++;
    d->held += sizeof(*b) + size;
    return b + 1;
}

static void pool_free(void *opaque, void *p)
{
    struct sq_decoder *d = opaque;
    if (!p)
        return;
    struct blk *b = (struct blk *)p - 1;
    if (!d->closing && d->pooled + b->size <= POOL_KEEP) {
        for (int i = 0; i < POOL_SLOTS; i++) {
            if (!d->pool[i]) {
                d->pool[i] = b;
                d->pooled += b->size;
                return;
            }
        }
    }
    d->held -= sizeof(*b) + b->size;
    free(b);
}

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    if (size && items > SIZE_MAX / size)
        return Z_NULL;
    return pool_alloc(opaque, (size_t)items * size);
}

static void z_free(voidpf opaque, voidpf p)
{
    pool_free(opaque, p);
}

/* ---- lifetime ---- */

int sq_decoder_new(uint64_t max_bytes, struct sq_decoder **out)
{
    struct sq_decoder *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->out = malloc(SQ_DECODE_CHUNK);
    if (!d->out) {
        free(d);
        return -ENOMEM;
    }
    d->allocs = 1;
    d->held = SQ_DECODE_CHUNK;
    d->max = max_bytes ? max_bytes : SQ_DECODE_DEFAULT_MAX;
    d->coding = SQ_CODING_NONE;
    d->state = ST_RUN;
    *out = d;
    return 0;
}

void sq_decoder_free(struct sq_decoder *d)
{
    if (!d)
        return;
    d->closing = true;
    if (d->z_init)
        inflateEnd(&d->z);
    if (d->br)
        BrotliDecoderDestroyInstance(d->br);
    if (d->zs)
        ZSTD_freeDCtx(d->zs);
    for (int i = 0; i < POOL_SLOTS; i++)
        free(d->pool[i]);
    free(d->out);
    free(d);
}

static int z_setup(struct sq_decoder *d, int zmode)
{
    int wbits = zmode == ZM_GZIP ? 15 + 16 : zmode == ZM_ZLIB ? 15 : -15;
    int rc;
    if (!d->z_init) {
        memset(&d->z, 0, sizeof(d->z));
        d->z.zalloc = z_alloc;
        d->z.zfree = z_free;
        d->z.opaque = d;
        rc = inflateInit2(&d->z, wbits);
        if (rc != Z_OK)
            return rc == Z_MEM_ERROR ? -ENOMEM : -SQ_EDECODE;
        d->z_init = true;
    } else {
        rc = inflateReset2(&d->z, wbits);
        if (rc != Z_OK)
            return -SQ_EDECODE;
    }
    d->zmode = (uint8_t)zmode;
    return 0;
}

static int br_setup(struct sq_decoder *d)
{
    if (d->br && !d->br_dirty)
        return 0;
    if (!d->br && sq_codecs_load(NULL, 0) < 0) /* the first br response of this decoder */
        return -ENOENT;
    if (d->br)
        BrotliDecoderDestroyInstance(d->br); /* no reset call: recreated from the pool */
    d->br = BrotliDecoderCreateInstance(pool_alloc, pool_free, d);
    d->br_dirty = false;
    return d->br ? 0 : -ENOMEM;
}

static int zs_setup(struct sq_decoder *d)
{
    if (d->zs) {
        ZSTD_DCtx_reset(d->zs, ZSTD_reset_session_only); /* keeps windowLogMax and buffers */
        return 0;
    }
    if (sq_codecs_load(NULL, 0) < 0) /* the first zstd response of this decoder */
        return -ENOENT;
    ZSTD_customMem mem = {pool_alloc, pool_free, d};
    d->zs = ZSTD_createDCtx_advanced(mem);
    if (!d->zs)
        return -ENOMEM;
    if (ZSTD_isError(ZSTD_DCtx_setParameter(d->zs, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG))) {
        ZSTD_freeDCtx(d->zs);
        d->zs = NULL;
        return -ENOMEM;
    }
    return 0;
}

int sq_decoder_reset(struct sq_decoder *d, enum sq_coding coding)
{
    int rc = 0;
    d->coding = (uint8_t)coding;
    d->state = ST_RUN;
    d->total = 0;
    d->fed = false;
    d->sniff_n = 0;
    d->zs_left = 0;
    d->err = 0;
    switch (coding) {
    case SQ_CODING_NONE:
        break;
    case SQ_CODING_GZIP:
        rc = z_setup(d, ZM_GZIP);
        break;
    case SQ_CODING_DEFLATE:
        /* the wrapper is chosen once two bytes are in; the z_stream must exist by then */
        rc = d->z_init ? 0 : z_setup(d, ZM_ZLIB);
        d->zmode = ZM_NONE;
        break;
    case SQ_CODING_BR:
        rc = br_setup(d);
        break;
    case SQ_CODING_ZSTD:
        rc = zs_setup(d);
        break;
    default:
        rc = -SQ_EUSAGE;
        break;
    }
    if (rc < 0)
        d->err = rc;
    return rc;
}

/* ---- decoding ---- */

static int emit(struct sq_decoder *d, const char *p, size_t n, sq_decode_cb cb, void *ud)
{
    if (n == 0)
        return 0;
    if (n > d->max - d->total)
        return -SQ_ETOOBIG;
    d->total += n;
    return cb ? cb(ud, p, n) : 0;
}

/* Inflates in[0, len) in the current wrapper; a gzip stream may hold several members. */
static int z_feed(struct sq_decoder *d, const unsigned char *in, size_t len, sq_decode_cb cb,
                  void *ud)
{
    while (len > 0) {
        if (d->state == ST_END) {
            if (d->zmode != ZM_GZIP)
                return -SQ_EDECODE; /* bytes after the end of the stream */
            if (inflateReset(&d->z) != Z_OK)
                return -SQ_EDECODE;
            d->state = ST_RUN; /* another gzip member (RFC 1952 2.2) */
        }
        uInt n = len > UINT_MAX ? UINT_MAX : (uInt)len;
        d->z.next_in = (Bytef *)(uintptr_t)in; /* zlib does not write through next_in */
        d->z.avail_in = n;
        for (;;) {
            d->z.next_out = (Bytef *)d->out;
            d->z.avail_out = SQ_DECODE_CHUNK;
            int r = inflate(&d->z, Z_NO_FLUSH);
            int rc = emit(d, d->out, SQ_DECODE_CHUNK - d->z.avail_out, cb, ud);
            if (rc < 0)
                return rc;
            if (r == Z_STREAM_END) {
                d->state = ST_END;
                break;
            }
            if (r == Z_MEM_ERROR)
                return -ENOMEM;
            if (r != Z_OK && r != Z_BUF_ERROR)
                return -SQ_EDECODE; /* Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR */
            if (d->z.avail_out != 0)
                break; /* all input taken and all output out: wants more input */
        }
        size_t used = n - d->z.avail_in;
        if (used == 0 && d->state != ST_END)
            return -SQ_EDECODE; /* no progress: cannot happen, but never loop on it */
        in += used;
        len -= used;
    }
    return 0;
}

/* Deflate before the wrapper is known: holds the first two bytes, then picks it. */
static int deflate_feed(struct sq_decoder *d, const unsigned char *in, size_t len, sq_decode_cb cb,
                        void *ud)
{
    if (d->zmode == ZM_NONE) {
        while (d->sniff_n < 2 && len > 0) {
            d->sniff[d->sniff_n++] = *in++;
            len--;
        }
        if (d->sniff_n < 2)
            return 0;
        unsigned cmf = d->sniff[0], flg = d->sniff[1];
        bool zlib = (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && ((cmf << 8) | flg) % 31 == 0;
        int rc = z_setup(d, zlib ? ZM_ZLIB : ZM_RAW);
        if (rc == 0)
            rc = z_feed(d, d->sniff, 2, cb, ud);
        if (rc < 0)
            return rc;
    }
    return z_feed(d, in, len, cb, ud);
}

static int br_feed(struct sq_decoder *d, const unsigned char *in, size_t len, sq_decode_cb cb,
                   void *ud)
{
    if (d->state == ST_END)
        return -SQ_EDECODE;
    d->br_dirty = true;
    size_t avail_in = len;
    const uint8_t *next_in = in;
    for (;;) {
        size_t avail_out = SQ_DECODE_CHUNK;
        uint8_t *next_out = (uint8_t *)d->out;
        BrotliDecoderResult r =
            BrotliDecoderDecompressStream(d->br, &avail_in, &next_in, &avail_out, &next_out, NULL);
        int rc = emit(d, d->out, SQ_DECODE_CHUNK - avail_out, cb, ud);
        if (rc < 0)
            return rc;
        switch (r) {
        case BROTLI_DECODER_RESULT_SUCCESS:
            d->state = ST_END;
            return avail_in ? -SQ_EDECODE : 0;
        case BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT:
            return 0;
        case BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT:
            continue;
        default: {
            BrotliDecoderErrorCode e = BrotliDecoderGetErrorCode(d->br);
            return e <= BROTLI_DECODER_ERROR_ALLOC_CONTEXT_MODES &&
                           e >= BROTLI_DECODER_ERROR_ALLOC_BLOCK_TYPE_TREES
                       ? -ENOMEM
                       : -SQ_EDECODE;
        }
        }
    }
}

static int zs_feed(struct sq_decoder *d, const unsigned char *in, size_t len, sq_decode_cb cb,
                   void *ud)
{
    ZSTD_inBuffer ib = {in, len, 0};
    for (;;) {
        ZSTD_outBuffer ob = {d->out, SQ_DECODE_CHUNK, 0};
        size_t r = ZSTD_decompressStream(d->zs, &ob, &ib);
        if (ZSTD_isError(r))
            return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? -ENOMEM : -SQ_EDECODE;
        int rc = emit(d, d->out, ob.pos, cb, ud);
        if (rc < 0)
            return rc;
        d->zs_left = r; /* 0: a frame ended and everything of it was flushed */
        /* Done when the input is used up and either the output was not filled (nothing more
         * is pending) or a frame just ended: calling again then would start the next frame
         * and report its header as missing. */
        if (ib.pos == ib.size && (ob.pos < ob.size || r == 0))
            return 0;
    }
}

static int none_feed(struct sq_decoder *d, const unsigned char *in, size_t len, sq_decode_cb cb,
                     void *ud)
{
    return emit(d, (const char *)in, len, cb, ud);
}

typedef int (*feed_fn)(struct sq_decoder *d, const unsigned char *in, size_t len, sq_decode_cb cb,
                       void *ud);

/* Each decodable coding's feed; SQ_CODING_OTHER has none. */
static const feed_fn feeds[] = {
    [SQ_CODING_NONE] = none_feed, [SQ_CODING_GZIP] = z_feed,  [SQ_CODING_DEFLATE] = deflate_feed,
    [SQ_CODING_BR] = br_feed,     [SQ_CODING_ZSTD] = zs_feed,
};

int sq_decoder_feed(struct sq_decoder *d, const char *in, size_t len, sq_decode_cb cb, void *ud)
{
    if (d->err)
        return d->err;
    if (len == 0)
        return 0;
    d->fed = true;
    feed_fn fn = (unsigned)d->coding < sizeof(feeds) / sizeof(feeds[0]) ? feeds[d->coding] : NULL;
    int rc = fn ? fn(d, (const unsigned char *)in, len, cb, ud) : -SQ_EUSAGE;
    if (rc < 0)
        d->err = rc;
    return rc;
}

int sq_decoder_finish(struct sq_decoder *d)
{
    if (d->err)
        return d->err;
    if (!d->fed)
        return 0; /* an empty body: nothing was encoded */
    bool ended;
    switch (d->coding) {
    case SQ_CODING_NONE:
        ended = true;
        break;
    case SQ_CODING_ZSTD:
        ended = d->zs_left == 0;
        break;
    default:
        ended = d->state == ST_END;
        break;
    }
    if (!ended)
        d->err = -SQ_EDECODE; /* truncated */
    return d->err;
}

uint64_t sq_decoder_total(const struct sq_decoder *d)
{
    return d->total;
}

enum sq_coding sq_decoder_coding(const struct sq_decoder *d)
{
    return (enum sq_coding)d->coding;
}

void sq_decoder_set_max(struct sq_decoder *d, uint64_t max_bytes)
{
    d->max = max_bytes ? max_bytes : SQ_DECODE_DEFAULT_MAX;
}

uint32_t sq_decoder_allocs(const struct sq_decoder *d)
{
    return d->allocs;
}

size_t sq_decoder_heap_bytes(const struct sq_decoder *d)
{
    return sizeof(*d) + d->held;
}
