/* base/b64.h - base64, standard alphabet (RFC 4648 section 4), padded. Used for HdrHistogram
 * log lines and anywhere else squall writes binary into text. */
#ifndef SQ_BASE_B64_H
#define SQ_BASE_B64_H

#include <stddef.h>

#include "base/err.h"

/* The size of the buffer sq_b64_encode() needs for n input bytes, terminating NUL included:
 * 4 * ceil(n / 3) + 1. (The encoded text itself is one byte shorter.) */
size_t sq_b64_encoded_len(size_t n);

/* Writes the base64 text of in[0..n) to out, then a NUL. out holds sq_b64_encoded_len(n) bytes. */
void sq_b64_encode(const void *in, size_t n, char *out);

/* Decodes in[0..n) into a new malloc'd buffer (*out, *out_len; the caller frees *out, which is
 * non-NULL even for empty input). Strict: n must be a multiple of 4, only the standard alphabet,
 * '=' only as one or two final pad characters, unused bits of the last group zero, no
 * whitespace. Returns 0, -SQ_EDECODE on bad input or -ENOMEM; *out is untouched on error. */
SQ_MUST_CHECK int sq_b64_decode(const char *in, size_t n, unsigned char **out, size_t *out_len);

#endif
