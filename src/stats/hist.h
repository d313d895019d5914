/* stats/hist.h - HDR latency histogram. One per worker shard; merged after the run.
 *
 * A histogram covers [0, highest] with a bounded relative error set by `sigfigs` significant
 * decimal digits (3 digits: each bucket is at most 1/1024 of its value wide, about 0.1%).
 * squall records latency in microseconds with lowest 1, highest 3,600,000,000 (1 h), 3 digits.
 *
 * The bucket layout, the query semantics (min, max, mean, percentile) and the V2 compressed
 * encoding follow HdrHistogram, so a blob from sq_hist_encode() decodes with HdrHistogram's own
 * tools and the other way round. The code is squall's own (docs/internals/stats.md).
 *
 * A histogram belongs to one thread; nothing here locks. Recording never allocates.
 */
#ifndef SQ_STATS_HIST_H
#define SQ_STATS_HIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct sq_hist; /* opaque; the creator owns it */

/* Hard caps for sq_hist_decode(): a hostile blob cannot make it allocate more than this. */
#define SQ_HIST_DECODE_MAX_COUNTS (1 << 22) /* buckets in a decoded histogram: 32 MiB of counts */

/* Creates a histogram tracking values 0..highest (values below lowest share the first buckets)
 * with `sigfigs` significant digits (1..5). Requires lowest >= 1 and highest >= 2 * lowest.
 * Returns 0, -EINVAL (bad bounds) or -ENOMEM; *out is untouched on error. */
SQ_MUST_CHECK int sq_hist_new(int64_t lowest, int64_t highest, int sigfigs, struct sq_hist **out);
void sq_hist_free(struct sq_hist *h); /* NULL is a no-op */

/* squall's latency histogram, the one every shard, series and result uses (so any two merge
 * losslessly): microseconds from SQ_LATENCY_LOWEST_US to SQ_LATENCY_HIGHEST_US (1 h) at
 * SQ_LATENCY_SIGFIGS significant digits. Returns 0 or -ENOMEM. */
#define SQ_LATENCY_LOWEST_US  1
#define SQ_LATENCY_HIGHEST_US (3600LL * 1000 * 1000)
#define SQ_LATENCY_SIGFIGS    3
SQ_MUST_CHECK int sq_latency_hist_new(struct sq_hist **out);

/* Empties h (counts, total, min, max and the out-of-range counter); keeps its configuration. */
void sq_hist_reset(struct sq_hist *h);

/* Hot path: no allocation, no lock, no division. Records one value. Returns false if v is out of
 * range (v < 0 or v > highest); such a value is added to the out-of-range counter, not lost. */
bool sq_hist_record(struct sq_hist *h, int64_t v);

/* Records value v n times. An out-of-range v adds n (if positive) to the out-of-range counter
 * and returns false. Otherwise n == 0 records nothing and returns true; n < 0 returns false and
 * changes nothing. */
bool sq_hist_record_n(struct sq_hist *h, int64_t v, int64_t n);

/* Adds src into dst. With the same (lowest, highest, sigfigs) the merge is lossless: every
 * bucket, min and max come out as if all values had been recorded into dst. Across different
 * configurations each non-empty src bucket is recorded into dst at its lowest equivalent value
 * (HdrHistogram's hdr_add). Returns how many of src's in-range values did not fit into dst;
 * those, and src's own out-of-range count, are added to dst's out-of-range counter. */
int64_t sq_hist_merge(struct sq_hist *dst, const struct sq_hist *src);

int64_t sq_hist_total(const struct sq_hist *h);        /* values recorded in range */
int64_t sq_hist_out_of_range(const struct sq_hist *h); /* values rejected as out of range */

/* HdrHistogram semantics. min: 0 if a value in the first bucket was recorded, else the lowest
 * equivalent value of the smallest non-zero value; INT64_MAX when empty. max: the highest
 * equivalent value of the largest value; 0 when empty. Check sq_hist_total() first. */
int64_t sq_hist_min(const struct sq_hist *h);
int64_t sq_hist_max(const struct sq_hist *h);

/* Mean and standard deviation (population) over bucket midpoints (median equivalent values),
 * as HdrHistogram computes them. Both are 0.0 when the histogram is empty. */
double sq_hist_mean(const struct sq_hist *h);
double sq_hist_stddev(const struct sq_hist *h);

/* hdr_value_at_percentile: pct is clamped to [0, 100]; the answer is the highest equivalent
 * value of the bucket where the cumulative count first reaches round(pct/100 * total) (at least
 * 1), or its lowest equivalent value when pct is 0. 0 when empty. */
int64_t sq_hist_percentile(const struct sq_hist *h, double pct);

/* Count of values whose bucket starts (lowest equivalent value) in [lo, hi]. Each bucket lies in
 * exactly one of the adjacent ranges [a, b], [b + 1, c], ... so the rows of a distribution chart
 * add up to the total, with no bucket counted twice. (HdrHistogram's getCountBetweenValues
 * instead counts both end buckets whole; that double-counts across adjacent ranges.)
 * Exact when lo and hi + 1 are bucket starts. 0 if lo > hi. */
int64_t sq_hist_count_between(const struct sq_hist *h, int64_t lo, int64_t hi);

/* Count recorded in the bucket holding v (0 for v outside the tracked range). */
int64_t sq_hist_count_at(const struct sq_hist *h, int64_t v);

/* The smallest and largest values that share v's bucket (v < 0 is treated as 0). */
int64_t sq_hist_lowest_equiv(const struct sq_hist *h, int64_t v);
int64_t sq_hist_highest_equiv(const struct sq_hist *h, int64_t v);

/* The configuration h was created (or decoded) with, and its size in bytes (struct + counts). */
int64_t sq_hist_lowest(const struct sq_hist *h);
int64_t sq_hist_highest(const struct sq_hist *h);
int sq_hist_sigfigs(const struct sq_hist *h);
size_t sq_hist_footprint(const struct sq_hist *h);

/* Iteration over non-empty buckets in increasing value order:
 *
 *     struct sq_hist_iter it;
 *     sq_hist_iter_init(&it, h);
 *     while (sq_hist_iter_next(&it))
 *         use(it.lowest, it.value, it.count);
 *
 * The histogram must not change during the iteration. */
struct sq_hist_iter {
    int64_t value;      /* highest equivalent value of the bucket */
    int64_t lowest;     /* lowest equivalent value of the bucket */
    int64_t count;      /* values in the bucket (> 0) */
    int64_t cumulative; /* values in this bucket and all below it */
    const struct sq_hist *_h;
    int32_t _idx;
};
void sq_hist_iter_init(struct sq_hist_iter *it, const struct sq_hist *h);
bool sq_hist_iter_next(struct sq_hist_iter *it);

/* V2 compressed encoding: BE u32 0x1c849314, BE i32 length, then a zlib stream of the V2 blob
 * (40-byte header, ZigZag/LEB128 counts). This is what HdrHistogram writes into a log line
 * (base64 of it; see base/b64.h). *out is malloc'd; the caller frees it. The out-of-range counter
 * is not part of the format. Returns 0 or -ENOMEM; *out is untouched on error. */
SQ_MUST_CHECK int sq_hist_encode(const struct sq_hist *h, unsigned char **out, size_t *out_len);

/* Decodes a compressed blob (V2, or V1 with 2/4/8-byte words) into a new histogram with the
 * blob's configuration. Returns 0; -SQ_EDECODE for any corrupt, truncated or trailing input;
 * -SQ_ETOOBIG if the configuration needs more than SQ_HIST_DECODE_MAX_COUNTS buckets; -ENOMEM.
 * Never reads outside buf; *out is untouched on error. */
SQ_MUST_CHECK int sq_hist_decode(const unsigned char *buf, size_t len, struct sq_hist **out);

/* ---- Internal: for stats/ itself, its tests and its fuzzer. Not part of the API. ---- */

/* The uncompressed inner V2 blob (cookie 0x1c849313, header, payload). Same contract as encode. */
SQ_MUST_CHECK int sq_hist__encode_raw(const struct sq_hist *h, unsigned char **out,
                                      size_t *out_len);
/* Decodes an uncompressed inner blob (V2 or V1); the blob must be exactly header + payload. */
SQ_MUST_CHECK int sq_hist__decode_raw(const unsigned char *buf, size_t len, struct sq_hist **out);
/* Bucket index of v (may be >= the counts length for v beyond the tracked range; v >= 0). */
int32_t sq_hist__index_of(const struct sq_hist *h, int64_t v);
/* Lowest value of bucket idx (0 <= idx). */
int64_t sq_hist__value_at(const struct sq_hist *h, int32_t idx);
int32_t sq_hist__counts_len(const struct sq_hist *h);
int64_t sq_hist__count_at_index(const struct sq_hist *h, int32_t idx);

#endif
