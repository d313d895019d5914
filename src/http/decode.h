/* http/decode.h - streaming response-body decoders: gzip, deflate, br (brotli), zstd.
 *
 * One decoder per connection (or per VU), reused response after response. It owns a bounded
 * output buffer (SQ_DECODE_CHUNK bytes) and hands decoded bytes to a callback in pieces of at
 * most that size; nothing is ever accumulated. Each library's state is created the first time a
 * response uses that coding and is reset, not recreated, for the next one (zlib inflateReset2,
 * ZSTD_DCtx_reset). Brotli has no reset call: its state is destroyed and created again, but every
 * library allocates through the decoder's own allocator, which keeps freed blocks in a small
 * pool, so a reset costs no system allocation once the first response has warmed it.
 *
 * Caps: total decoded bytes per response (default SQ_DECODE_DEFAULT_MAX, a decompression-bomb
 * guard: over it, -SQ_ETOOBIG), zstd windows of at most 8 MiB (RFC 8878 9.1's limit for HTTP),
 * brotli windows as the format allows (at most 16 MiB, no large-window extension).
 * See docs/internals/http.md, "Content decoding".
 */
#ifndef SQ_HTTP_DECODE_H
#define SQ_HTTP_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* A Content-Encoding, as far as squall can decode it. Values fit in a uint8_t. */
enum sq_coding {
    SQ_CODING_NONE,    /* no Content-Encoding, or only "identity" */
    SQ_CODING_GZIP,    /* "gzip" or "x-gzip"; several gzip members in a row are one body */
    SQ_CODING_DEFLATE, /* "deflate": zlib-wrapped (RFC 1950), raw deflate accepted too */
    SQ_CODING_BR,      /* "br" */
    SQ_CODING_ZSTD,    /* "zstd" */
    SQ_CODING_OTHER,   /* anything else, or more than one coding: not decodable here */
};

#define SQ_DECODE_CHUNK       (16 * 1024)           /* the output buffer; callback pieces <= this */
#define SQ_DECODE_DEFAULT_MAX (64ULL * 1024 * 1024) /* decoded bytes per response */

/* Maps a Content-Encoding field value (value[0, len), a comma-separated list) to a coding.
 * Case-insensitive; whitespace and empty list elements are skipped; "identity" is ignored.
 * Nothing left: SQ_CODING_NONE. Exactly one known coding: that one. Anything else (an unknown
 * coding, or two codings stacked such as "gzip, br"): SQ_CODING_OTHER. */
enum sq_coding sq_coding_from_header(const char *value, size_t len);

/* "identity", "gzip", "deflate", "br", "zstd" or "other". Never NULL. */
const char *sq_coding_name(enum sq_coding c);

/* The Accept-Encoding value a client sends by default: "gzip, deflate, br, zstd". */
const char *sq_accept_encoding_default(void);

/* Receives decoded bytes (len > 0, at most SQ_DECODE_CHUNK, valid during the call only). Return
 * 0 to go on, or a negative code that the feed call then returns. */
typedef int (*sq_decode_cb)(void *ud, const char *data, size_t len);

struct sq_decoder; /* opaque; sq_decoder_new creates it */

/* Creates a decoder with its output buffer; no library state yet. max_bytes caps the decoded
 * bytes of each response (0: SQ_DECODE_DEFAULT_MAX). The decoder starts ready for an
 * SQ_CODING_NONE body. Returns 0 or -ENOMEM (*out untouched). */
SQ_MUST_CHECK int sq_decoder_new(uint64_t max_bytes, struct sq_decoder **out);

/* Frees d and every library state it holds. NULL is a no-op. */
void sq_decoder_free(struct sq_decoder *d);

/* Prepares d for the next response body, encoded with coding. The first use of a coding creates
 * its library state (may allocate); after that a reset allocates nothing (brotli: see the file
 * comment). Returns 0, -ENOMEM, or -SQ_EUSAGE for SQ_CODING_OTHER (d then fails every feed with
 * -SQ_EUSAGE until the next reset). */
SQ_MUST_CHECK int sq_decoder_reset(struct sq_decoder *d, enum sq_coding coding);

/* Feeds the next in[0, len) of the encoded body (any split). Decoded bytes go to cb (NULL:
 * decode and count only), in order. SQ_CODING_NONE passes in through unchanged, in one call.
 * Returns 0, or a negative code: -SQ_EDECODE (corrupt data, a zlib preset dictionary, bytes
 * after the end of the stream other than a further gzip member), -SQ_ETOOBIG (more than the
 * cap decoded; the piece that would pass it is not delivered), -ENOMEM, -SQ_EUSAGE, or what cb
 * returned. After an error every feed and finish returns that error until the next reset. */
SQ_MUST_CHECK int sq_decoder_feed(struct sq_decoder *d, const char *in, size_t len, sq_decode_cb cb,
                                  void *ud);

/* The body ended (the framer said so). Returns 0 when the encoded stream ended properly - or no
 * byte at all was fed (an empty body, as HEAD, 204 and 304 answers carry) - or -SQ_EDECODE when
 * it was cut short, or the error a feed returned. Nothing is left to deliver at this point: feed
 * hands everything over as it goes. */
SQ_MUST_CHECK int sq_decoder_finish(struct sq_decoder *d);

/* Decoded bytes of the current response so far. */
uint64_t sq_decoder_total(const struct sq_decoder *d);

/* The coding set by the last reset. */
enum sq_coding sq_decoder_coding(const struct sq_decoder *d);

/* Changes the per-response cap (0: SQ_DECODE_DEFAULT_MAX); takes effect at once. */
void sq_decoder_set_max(struct sq_decoder *d, uint64_t max_bytes);

/* System allocations made by d and its library states since it was created (tests). */
uint32_t sq_decoder_allocs(const struct sq_decoder *d);

/* Bytes of heap d holds now: output buffer, library states and pooled blocks. */
size_t sq_decoder_heap_bytes(const struct sq_decoder *d);

#endif
