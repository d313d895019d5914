/* http/codecs.h - brotli and zstd, loaded when a response body first needs one (the client's
 * decoder, http/decode.c: a response in br or zstd) or the target first compresses a body in
 * one (target/app.c). Linked in, libbrotlienc, libbrotlidec, libbrotlicommon and libzstd were
 * mapped into every run, a plain `squall URL` too: 0.24 MB of resident pages
 * (docs/benchmarks.md, round 6; docs/internals/base.md, "dynlib").
 *
 * After the struct, each function those files call is defined as its pointer (base/dynlib.h), so
 * they include this header instead of the brotli headers and <zstd.h> and call them unchanged.
 * Nothing may be called before sq_codecs_load returned 0. gzip and deflate stay on zlib, which
 * is linked (the histogram encoding uses it in every run).
 */
#ifndef SQ_HTTP_CODECS_H
#define SQ_HTTP_CODECS_H

#ifndef ZSTD_STATIC_LINKING_ONLY
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_createDCtx_advanced: custom allocator (exported) */
#endif

#include <brotli/decode.h>
#include <brotli/encode.h>
#include <stddef.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "base/err.h"

/* X(library, function): every brotli and zstd function decode.c and target/app.c call. */
#define SQ_CODECS_SYMS(X)                                                                          \
    X(BROTLIDEC, BrotliDecoderCreateInstance)                                                      \
    X(BROTLIDEC, BrotliDecoderDecompressStream)                                                    \
    X(BROTLIDEC, BrotliDecoderDestroyInstance)                                                     \
    X(BROTLIDEC, BrotliDecoderGetErrorCode)                                                        \
    X(BROTLIENC, BrotliEncoderCompress)                                                            \
    X(BROTLIENC, BrotliEncoderMaxCompressedSize)                                                   \
    X(ZSTD, ZSTD_DCtx_reset)                                                                       \
    X(ZSTD, ZSTD_DCtx_setParameter)                                                                \
    X(ZSTD, ZSTD_compress)                                                                         \
    X(ZSTD, ZSTD_compressBound)                                                                    \
    X(ZSTD, ZSTD_createDCtx_advanced)                                                              \
    X(ZSTD, ZSTD_decompressStream)                                                                 \
    X(ZSTD, ZSTD_freeDCtx)                                                                         \
    X(ZSTD, ZSTD_getErrorCode)                                                                     \
    X(ZSTD, ZSTD_isError)

struct sq_codecs {
#define SQ_CODECS_FIELD(lib, sym) __typeof__(sym) *sym;
    SQ_CODECS_SYMS(SQ_CODECS_FIELD)
#undef SQ_CODECS_FIELD
};
extern struct sq_codecs sq_codecs;

/* Loads the three libraries once (thread-safe; later calls are one acquire load). Returns 0, or
 * -ENOENT with why naming the library or function that is missing. */
SQ_MUST_CHECK int sq_codecs_load(char *why, size_t len);

#ifndef SQ_CODECS_IMPL
#define BrotliDecoderCreateInstance    (sq_codecs.BrotliDecoderCreateInstance)
#define BrotliDecoderDecompressStream  (sq_codecs.BrotliDecoderDecompressStream)
#define BrotliDecoderDestroyInstance   (sq_codecs.BrotliDecoderDestroyInstance)
#define BrotliDecoderGetErrorCode      (sq_codecs.BrotliDecoderGetErrorCode)
#define BrotliEncoderCompress          (sq_codecs.BrotliEncoderCompress)
#define BrotliEncoderMaxCompressedSize (sq_codecs.BrotliEncoderMaxCompressedSize)
#define ZSTD_DCtx_reset                (sq_codecs.ZSTD_DCtx_reset)
#define ZSTD_DCtx_setParameter         (sq_codecs.ZSTD_DCtx_setParameter)
#define ZSTD_compress                  (sq_codecs.ZSTD_compress)
#define ZSTD_compressBound             (sq_codecs.ZSTD_compressBound)
#define ZSTD_createDCtx_advanced       (sq_codecs.ZSTD_createDCtx_advanced)
#define ZSTD_decompressStream          (sq_codecs.ZSTD_decompressStream)
#define ZSTD_freeDCtx                  (sq_codecs.ZSTD_freeDCtx)
#define ZSTD_getErrorCode              (sq_codecs.ZSTD_getErrorCode)
#define ZSTD_isError                   (sq_codecs.ZSTD_isError)
#endif

#endif
