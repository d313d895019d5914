/* proto/stamp.h - the event stamp `{{$stamp}}` expands to: run id, sequence number, send time.
 *
 * Format (docs/internals/proto.md has the rationale):
 *
 *     sq1.<run>.<seq>.<ns>
 *
 *   sq1   the literal prefix and format version
 *   run   the run id, a 64-bit value in Crockford base32, lowercase (0-9 a-h j k m n p-t v-z)
 *   seq   the sequence number, a 64-bit value in base36 (0-9 a-z)
 *   ns    the send time, ns since the Unix epoch (CLOCK_REALTIME), int64 >= 0, in base36
 *
 * Every number is written without leading zeros (0 is "0"), so one stamp has exactly one
 * spelling. The alphabet is [0-9a-z.]: nothing a JSON string, an HTTP or NATS header value, an
 * MQTT user property, a URL path or a CSV cell would escape. The longest stamp is
 * SQ_STAMP_MAX bytes (4 + 13 + 1 + 13 + 1 + 13).
 *
 * A stamp found inside other text must stand alone: the byte before "sq1." and the byte after the
 * last digit, where present, are not ASCII letters or digits. "xsq1.a.b.c" is not a stamp.
 */
#ifndef SQ_PROTO_STAMP_H
#define SQ_PROTO_STAMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SQ_STAMP_MAX        45
#define SQ_STAMP_PREFIX     "sq1."
#define SQ_STAMP_PREFIX_LEN 4

struct sq_stamp {
    uint64_t run;
    uint64_t seq;
    int64_t ns; /* CLOCK_REALTIME ns; >= 0 */
};

/* An encoder for one run: "sq1.<run>." rendered once. */
struct sq_stamp_enc {
    char head[SQ_STAMP_PREFIX_LEN + 13 + 1];
    uint8_t head_len;
};

void sq_stamp_enc_init(struct sq_stamp_enc *e, uint64_t run);

/* Writes the stamp for (seq, ns) at out, which holds SQ_STAMP_MAX bytes, and returns its length.
 * No NUL is written. A negative ns is written as 0. Hot path: no allocation, no division by a
 * variable. */
size_t sq_stamp_encode(const struct sq_stamp_enc *e, uint64_t seq, int64_t ns, char *out);

/* The same without a prepared encoder. */
size_t sq_stamp_format(const struct sq_stamp *s, char *out);

/* Parses exactly one stamp spanning p[0, n). Returns 0 or -SQ_EPARSE (wrong prefix, a character
 * outside a field's alphabet, a leading zero, an empty field, a value over 64 bits or ns over
 * INT64_MAX, anything left over). */
SQ_MUST_CHECK int sq_stamp_parse(const char *p, size_t n, struct sq_stamp *out);

/* Finds the first valid, free-standing stamp in p[0, n): true with *out set and, when at / len
 * are not NULL, its offset and length; false when there is none. Candidates that fail to parse
 * are skipped, so a payload may mention "sq1." in other ways. Never reads outside p[0, n). */
bool sq_stamp_find(const char *p, size_t n, struct sq_stamp *out, size_t *at, size_t *len);

/* CLOCK_REALTIME in ns: the send time a stamp carries (the only wall-clock use on a hot path:
 * end-to-end latency is measured between machines or processes that share no monotonic clock). */
int64_t sq_stamp_now_ns(void);

#endif
