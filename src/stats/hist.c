/* stats/hist.c - HDR histogram: bucket layout, recording, queries, merge, V2 encoding.
 *
 * Layout. Values are split into buckets by magnitude; each bucket holds `sub_count` linear
 * sub-buckets, so the width of a sub-bucket is a fixed fraction of its value. Bucket 0 covers
 * [0, sub_count << unit_mag) in sub_count steps of 1 << unit_mag; bucket b >= 1 covers
 * [sub_count << (unit_mag + b - 1), sub_count << (unit_mag + b)) in half_count steps of
 * 1 << (unit_mag + b) (its lower half would overlap bucket b - 1, so only the upper half is
 * stored). Counts are one flat array: bucket 0 takes indices [0, sub_count), bucket b >= 1 the
 * next half_count indices. Hence the index of v is
 *
 *     bucket = 63 - unit_mag - half_mag - clz(v | sub_mask)
 *     sub    = v >> (bucket + unit_mag)                       in [half_count, sub_count) for b >= 1
 *     index  = ((bucket + 1) << half_mag) + sub - half_count
 *
 * one clz, two shifts and an add: no division, no loop, no table.
 *
 * Invariants (checked by tests/unit/test_hist.c, and by SQ_ASSERT where asserts are on: the
 * index bound at each record, the counts after each merge and decode):
 *   - total == sum of counts; every count >= 0.
 *   - index_of(highest) < counts_len, so sq_hist_record never indexes out of bounds.
 *   - every non-zero count sits at an index <= index_of(max_raw); encode and merge stop there.
 *   - min_raw is the smallest non-zero value recorded (INT64_MAX if none), max_raw the largest
 *     (0 if none); both only ever describe values inside their own bucket, so the public
 *     min/max (bucket edges) are exact functions of the counts.
 */
#define ZLIB_CONST
#include "stats/hist.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <zlib.h>

#include "base/assert.h"

/* Cookies: the low nibble names the format, bits 4..7 the word size (1 for V2's varints). */
#define V2_COOKIE          0x1c849313u /* inner blob, 0x1c849303 | 0x10 */
#define V2_COMPRESSED      0x1c849314u
#define V1_BASE            0x1c849301u /* inner, word size 2/4/8 in bits 4..7 */
#define V1_COMPRESSED_BASE 0x1c849302u
#define WORD_NIBBLE_MASK   0xf0u
#define HEADER_LEN         40
#define VARINT_MAX         9

struct cfg {
    int64_t lowest;
    int64_t highest;
    int32_t sigfigs;
    int32_t unit_mag;   /* floor(log2(lowest)) */
    int32_t half_mag;   /* log2(sub_count) - 1 */
    int32_t sub_count;  /* sub-buckets per bucket: 2^ceil(log2(2 * 10^sigfigs)) */
    int32_t half_count; /* sub_count / 2 */
    int32_t bucket_count;
    int32_t counts_len; /* (bucket_count + 1) * half_count */
};

struct sq_hist {
    /* Everything sq_hist_record touches comes first: one cache line. */
    int64_t highest;
    uint64_t sub_mask; /* (sub_count - 1) << unit_mag */
    int32_t clz_base;  /* 63 - unit_mag - half_mag */
    int32_t unit_mag;
    int32_t half_mag;
    int32_t half_count;
    int64_t total;   /* values recorded in range == sum of counts */
    int64_t oor;     /* values rejected as out of range */
    int64_t min_raw; /* smallest non-zero value recorded; INT64_MAX if none */
    int64_t max_raw; /* largest value recorded; 0 if none */
    struct cfg cfg;
    int64_t counts[];
};

/* ---- configuration ---- */

static int cfg_init(struct cfg *c, int64_t lowest, int64_t highest, int sigfigs)
{
    if (lowest < 1 || lowest > INT64_MAX / 2 || highest < 2 * lowest || sigfigs < 1 || sigfigs > 5)
        return -EINVAL;
    int64_t largest_exact = 2;
    for (int i = 0; i < sigfigs; i++)
        largest_exact *= 10;
    int32_t mag = 0; /* ceil(log2(2 * 10^sigfigs)) */
    while ((INT64_C(1) << mag) < largest_exact)
        mag++;
    c->half_mag = (mag > 1 ? mag : 1) - 1;
    c->unit_mag = 63 - __builtin_clzll((uint64_t)lowest);
    if (c->unit_mag + c->half_mag > 61)
        return -EINVAL;
    c->sub_count = INT32_C(1) << (c->half_mag + 1);
    c->half_count = c->sub_count / 2;

    /* Buckets needed until the smallest untrackable value exceeds highest. */
    int64_t untrackable = (int64_t)c->sub_count << c->unit_mag;
    int32_t buckets = 1;
    while (untrackable <= highest) {
        if (untrackable > INT64_MAX / 2) {
            buckets++;
            break;
        }
        untrackable <<= 1;
        buckets++;
    }
    c->bucket_count = buckets;
    c->counts_len = (buckets + 1) * c->half_count;
    c->lowest = lowest;
    c->highest = highest;
    c->sigfigs = sigfigs;
    return 0;
}

static bool cfg_equal(const struct cfg *a, const struct cfg *b)
{
    return a->lowest == b->lowest && a->highest == b->highest && a->sigfigs == b->sigfigs;
}

static int hist_alloc(const struct cfg *c, struct sq_hist **out)
{
    size_t size = sizeof(struct sq_hist) + (size_t)c->counts_len * sizeof(int64_t);
    struct sq_hist *h = calloc(1, size);
    if (!h)
        return -ENOMEM;
    h->cfg = *c;
    h->highest = c->highest;
    h->sub_mask = (uint64_t)(c->sub_count - 1) << c->unit_mag;
    h->clz_base = 63 - c->unit_mag - c->half_mag;
    h->unit_mag = c->unit_mag;
    h->half_mag = c->half_mag;
    h->half_count = c->half_count;
    h->min_raw = INT64_MAX;
    h->max_raw = 0;
    *out = h;
    return 0;
}

int sq_hist_new(int64_t lowest, int64_t highest, int sigfigs, struct sq_hist **out)
{
    struct cfg c;
    int rc = cfg_init(&c, lowest, highest, sigfigs);
    if (rc < 0)
        return rc;
    return hist_alloc(&c, out);
}

int sq_latency_hist_new(struct sq_hist **out)
{
    return sq_hist_new(SQ_LATENCY_LOWEST_US, SQ_LATENCY_HIGHEST_US, SQ_LATENCY_SIGFIGS, out);
}

void sq_hist_free(struct sq_hist *h)
{
    free(h);
}

/* ---- value <-> index ---- */

/* v >= 0. The result may be >= counts_len when v > the highest trackable value. */
static inline int32_t index_of(const struct sq_hist *h, int64_t v)
{
    int32_t bucket = h->clz_base - __builtin_clzll((uint64_t)v | h->sub_mask);
    int32_t sub = (int32_t)(v >> (bucket + h->unit_mag));
    return ((bucket + 1) << h->half_mag) + sub - h->half_count;
}

/* Bucket number and shift of the sub-bucket at idx: value = sub << shift, width = 1 << shift. */
static inline int64_t value_at(const struct sq_hist *h, int32_t idx, int32_t *shift)
{
    int32_t bucket = (idx >> h->half_mag) - 1;
    int64_t sub = (idx & (h->half_count - 1)) + h->half_count;
    if (bucket < 0) {
        sub -= h->half_count;
        bucket = 0;
    }
    *shift = bucket + h->unit_mag;
    return sub << *shift;
}

static inline int64_t lowest_at(const struct sq_hist *h, int32_t idx)
{
    int32_t shift;
    return value_at(h, idx, &shift);
}

static inline int64_t highest_at(const struct sq_hist *h, int32_t idx)
{
    int32_t shift;
    int64_t v = value_at(h, idx, &shift);
    return v + ((INT64_C(1) << shift) - 1);
}

static inline int64_t median_at(const struct sq_hist *h, int32_t idx)
{
    int32_t shift;
    int64_t v = value_at(h, idx, &shift);
    return v + ((INT64_C(1) << shift) >> 1);
}

int64_t sq_hist_lowest_equiv(const struct sq_hist *h, int64_t v)
{
    if (v < 0)
        v = 0;
    int32_t shift = h->clz_base - __builtin_clzll((uint64_t)v | h->sub_mask) + h->unit_mag;
    return (v >> shift) << shift;
}

int64_t sq_hist_highest_equiv(const struct sq_hist *h, int64_t v)
{
    if (v < 0)
        v = 0;
    int32_t shift = h->clz_base - __builtin_clzll((uint64_t)v | h->sub_mask) + h->unit_mag;
    return ((v >> shift) << shift) + ((INT64_C(1) << shift) - 1);
}

int32_t sq_hist__index_of(const struct sq_hist *h, int64_t v)
{
    return index_of(h, v < 0 ? 0 : v);
}

int64_t sq_hist__value_at(const struct sq_hist *h, int32_t idx)
{
    return lowest_at(h, idx);
}

int32_t sq_hist__counts_len(const struct sq_hist *h)
{
    return h->cfg.counts_len;
}

int64_t sq_hist__count_at_index(const struct sq_hist *h, int32_t idx)
{
    if (idx < 0 || idx >= h->cfg.counts_len)
        return 0;
    return h->counts[idx];
}

/* ---- recording (the hot path) ---- */

static int64_t sat_add(int64_t a, int64_t b) /* a, b >= 0 */
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

bool sq_hist_record(struct sq_hist *h, int64_t v)
{
    /* One unsigned compare rejects both v < 0 and v > highest. */
    if (SQ_UNLIKELY((uint64_t)v > (uint64_t)h->highest)) {
        h->oor++;
        return false;
    }
    int32_t idx = index_of(h, v);
    SQ_ASSERT(idx >= 0 && idx < h->cfg.counts_len); /* index_of(highest) < counts_len */
    h->counts[idx]++;
    h->total++;
    if (v > h->max_raw)
        h->max_raw = v;
    if (v < h->min_raw && v != 0)
        h->min_raw = v;
    return true;
}

bool sq_hist_record_n(struct sq_hist *h, int64_t v, int64_t n)
{
    if (SQ_UNLIKELY((uint64_t)v > (uint64_t)h->highest)) {
        if (n > 0)
            h->oor = sat_add(h->oor, n);
        return false;
    }
    if (n <= 0)
        return n == 0;
    int32_t idx = index_of(h, v);
    SQ_ASSERT(idx >= 0 && idx < h->cfg.counts_len);
    h->counts[idx] += n;
    h->total += n;
    if (v > h->max_raw)
        h->max_raw = v;
    if (v < h->min_raw && v != 0)
        h->min_raw = v;
    return true;
}

/* ---- merge ---- */

/* The last index that may hold a non-zero count (see the invariants above). */
static int32_t last_index(const struct sq_hist *h)
{
    int32_t last = index_of(h, h->max_raw);
    return last < h->cfg.counts_len ? last : h->cfg.counts_len - 1;
}

/* Zeroes bytes at p. The whole pages inside go back to the kernel (MADV_DONTNEED on this
 * private anonymous memory: they read as zero when next touched, and are resident again only
 * if written), the partial pages at either end are cleared by hand. Fewer than RELEASE_PAGES
 * whole pages, or a madvise that fails (another page size), are cleared by hand too. */
#define RELEASE_PAGE  4096u
#define RELEASE_PAGES 2u
static void clear_release(void *p, size_t bytes)
{
    uintptr_t a = (uintptr_t)p, e = a + bytes;
    uintptr_t pa = (a + RELEASE_PAGE - 1) & ~(uintptr_t)(RELEASE_PAGE - 1);
    uintptr_t pe = e & ~(uintptr_t)(RELEASE_PAGE - 1);
    if (pe >= pa + RELEASE_PAGES * RELEASE_PAGE &&
        madvise((void *)pa, pe - pa, MADV_DONTNEED) == 0) {
        memset(p, 0, pa - a);
        memset((void *)pe, 0, e - pe);
        return;
    }
    memset(p, 0, bytes);
}

void sq_hist_reset(struct sq_hist *h)
{
    /* Only the counts up to the last one in use: none lies past index_of(max_raw) (the
     * invariants above), and the pages past it were never written, so a histogram reset every
     * second does not make its whole array resident (bench/connmem.py). The whole pages among
     * them are handed back rather than written: a worker's four per-second slots then hold only
     * the pages of the seconds not yet merged, not each one's widest second so far. */
    clear_release(h->counts, (size_t)(last_index(h) + 1) * sizeof(int64_t));
    h->total = 0;
    h->oor = 0;
    h->min_raw = INT64_MAX;
    h->max_raw = 0;
}

/* The first three invariants at the top, for SQ_ASSERT: no count below zero, none past
 * index_of(max_raw), and total their sum. It walks what a merge or a query walks (the counts up
 * to the last one in use), and finds a count past that as a sum that falls short. */
static bool counts_consistent(const struct sq_hist *h)
{
    int64_t sum = 0;
    for (int32_t i = 0, last = last_index(h); i <= last; i++) {
        if (h->counts[i] < 0 || __builtin_add_overflow(sum, h->counts[i], &sum))
            return false;
    }
    return sum == h->total;
}

/* Adds c to counts[idx] and total unless either would overflow. */
static bool add_count(struct sq_hist *h, int32_t idx, int64_t c)
{
    int64_t nc, nt;
    if (__builtin_add_overflow(h->counts[idx], c, &nc) || __builtin_add_overflow(h->total, c, &nt))
        return false;
    h->counts[idx] = nc;
    h->total = nt;
    return true;
}

int64_t sq_hist_merge(struct sq_hist *dst, const struct sq_hist *src)
{
    int64_t dropped = 0;
    if (cfg_equal(&dst->cfg, &src->cfg)) {
        /* Same layout: add bucket by bucket, carry the exact min and max. */
        int32_t last = last_index(src);
        for (int32_t i = 0; i <= last; i++) {
            int64_t c = src->counts[i];
            if (c != 0 && !add_count(dst, i, c))
                dropped = sat_add(dropped, c);
        }
        if (src->max_raw > dst->max_raw)
            dst->max_raw = src->max_raw;
        if (src->min_raw < dst->min_raw)
            dst->min_raw = src->min_raw;
    } else {
        /* Different layout: record each source bucket at its lowest equivalent value. */
        struct sq_hist_iter it;
        sq_hist_iter_init(&it, src);
        while (sq_hist_iter_next(&it)) {
            int64_t v = it.lowest;
            if (v > dst->highest || !add_count(dst, index_of(dst, v), it.count)) {
                dropped = sat_add(dropped, it.count);
                continue;
            }
            if (v > dst->max_raw)
                dst->max_raw = v;
            if (v < dst->min_raw && v != 0)
                dst->min_raw = v;
        }
    }
    dst->oor = sat_add(dst->oor, sat_add(src->oor, dropped));
    SQ_ASSERT_MSG(counts_consistent(dst), "merged: total == the sum of the counts");
    return dropped;
}

/* ---- queries ---- */

int64_t sq_hist_total(const struct sq_hist *h)
{
    return h->total;
}

int64_t sq_hist_out_of_range(const struct sq_hist *h)
{
    return h->oor;
}

int64_t sq_hist_min(const struct sq_hist *h)
{
    if (h->counts[0] > 0)
        return 0;
    if (h->min_raw == INT64_MAX)
        return INT64_MAX;
    return sq_hist_lowest_equiv(h, h->min_raw);
}

int64_t sq_hist_max(const struct sq_hist *h)
{
    if (h->max_raw == 0)
        return 0;
    return sq_hist_highest_equiv(h, h->max_raw);
}

double sq_hist_mean(const struct sq_hist *h)
{
    if (h->total == 0)
        return 0.0;
    double sum = 0.0;
    struct sq_hist_iter it;
    sq_hist_iter_init(&it, h);
    while (sq_hist_iter_next(&it))
        sum += (double)it.count * (double)median_at(h, it._idx);
    return sum / (double)h->total;
}

double sq_hist_stddev(const struct sq_hist *h)
{
    if (h->total == 0)
        return 0.0;
    double mean = sq_hist_mean(h);
    double sum = 0.0;
    struct sq_hist_iter it;
    sq_hist_iter_init(&it, h);
    while (sq_hist_iter_next(&it)) {
        double dev = (double)median_at(h, it._idx) - mean;
        sum += dev * dev * (double)it.count;
    }
    return sqrt(sum / (double)h->total);
}

int64_t sq_hist_percentile(const struct sq_hist *h, double pct)
{
    if (h->total == 0)
        return 0;
    if (!(pct > 0.0)) /* also catches NaN */
        pct = 0.0;
    if (pct > 100.0)
        pct = 100.0;
    double t = pct / 100.0 * (double)h->total + 0.5;
    int64_t target = t >= (double)h->total ? h->total : (int64_t)t;
    if (target < 1)
        target = 1;
    int64_t cum = 0;
    int32_t last = last_index(h);
    for (int32_t i = 0; i <= last; i++) {
        cum += h->counts[i];
        if (cum >= target)
            return pct == 0.0 ? lowest_at(h, i) : highest_at(h, i);
    }
    SQ_ASSERT_MSG(false, "total == the sum of the counts");
    return 0; /* unreachable while total == sum of counts */
}

int64_t sq_hist_count_between(const struct sq_hist *h, int64_t lo, int64_t hi)
{
    if (hi < lo || hi < 0)
        return 0;
    if (lo < 0)
        lo = 0;
    /* Buckets that start in [lo, hi]: skip the one holding lo if it starts below lo. */
    int32_t i0 = index_of(h, lo);
    if (i0 < h->cfg.counts_len && lowest_at(h, i0) < lo)
        i0++;
    int32_t i1 = index_of(h, hi);
    if (i1 >= h->cfg.counts_len)
        i1 = h->cfg.counts_len - 1;
    int64_t sum = 0;
    for (int32_t i = i0; i <= i1; i++)
        sum += h->counts[i];
    return sum;
}

int64_t sq_hist_count_at(const struct sq_hist *h, int64_t v)
{
    if (v < 0)
        return 0;
    int32_t idx = index_of(h, v);
    return idx < h->cfg.counts_len ? h->counts[idx] : 0;
}

int64_t sq_hist_lowest(const struct sq_hist *h)
{
    return h->cfg.lowest;
}

int64_t sq_hist_highest(const struct sq_hist *h)
{
    return h->cfg.highest;
}

int sq_hist_sigfigs(const struct sq_hist *h)
{
    return h->cfg.sigfigs;
}

size_t sq_hist_footprint(const struct sq_hist *h)
{
    return sizeof(*h) + (size_t)h->cfg.counts_len * sizeof(int64_t);
}

/* ---- iteration ---- */

void sq_hist_iter_init(struct sq_hist_iter *it, const struct sq_hist *h)
{
    memset(it, 0, sizeof(*it));
    it->_h = h;
    it->_idx = -1;
}

bool sq_hist_iter_next(struct sq_hist_iter *it)
{
    const struct sq_hist *h = it->_h;
    if (it->cumulative >= h->total)
        return false;
    for (int32_t i = it->_idx + 1; i < h->cfg.counts_len; i++) {
        if (h->counts[i] != 0) {
            it->_idx = i;
            it->count = h->counts[i];
            it->cumulative += it->count;
            it->lowest = lowest_at(h, i);
            it->value = highest_at(h, i);
            return true;
        }
    }
    it->_idx = h->cfg.counts_len;
    return false;
}

/* ---- encoding ---- */

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void put_be64(unsigned char *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

static uint32_t get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_be64(const unsigned char *p)
{
    return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

static uint64_t zigzag(int64_t n)
{
    return ((uint64_t)n << 1) ^ (uint64_t)(n >> 63);
}

static int64_t unzigzag(uint64_t u)
{
    return (int64_t)((u >> 1) ^ (~(u & 1) + 1));
}

/* HdrHistogram's LEB128 variant: 7 bits a byte for 8 bytes, then a 9th byte of 8 bits. */
static size_t put_varint(unsigned char *p, uint64_t v)
{
    for (size_t i = 0; i < VARINT_MAX - 1; i++) {
        if (v < 0x80) {
            p[i] = (unsigned char)v;
            return i + 1;
        }
        p[i] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[VARINT_MAX - 1] = (unsigned char)v;
    return VARINT_MAX;
}

/* Returns the bytes read, or 0 if the varint runs past n. */
static size_t get_varint(const unsigned char *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < VARINT_MAX - 1; i++) {
        if (i >= n)
            return 0;
        v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    if (n < VARINT_MAX)
        return 0;
    *out = v | (uint64_t)p[VARINT_MAX - 1] << 56;
    return VARINT_MAX;
}

int sq_hist__encode_raw(const struct sq_hist *h, unsigned char **out, size_t *out_len)
{
    int32_t limit = last_index(h) + 1;
    unsigned char *buf = malloc(HEADER_LEN + (size_t)limit * VARINT_MAX);
    if (!buf)
        return -ENOMEM;
    size_t p = HEADER_LEN;
    for (int32_t i = 0; i < limit;) {
        int64_t c = h->counts[i++];
        if (c == 0) {
            int64_t zeros = 1;
            while (i < limit && h->counts[i] == 0) {
                zeros++;
                i++;
            }
            c = -zeros;
        }
        p += put_varint(buf + p, zigzag(c));
    }
    double ratio = 1.0; /* conversion ratio: squall's histograms hold plain integers */
    uint64_t ratio_bits;
    memcpy(&ratio_bits, &ratio, sizeof(ratio_bits));
    put_be32(buf, V2_COOKIE);
    put_be32(buf + 4, (uint32_t)(p - HEADER_LEN));
    put_be32(buf + 8, 0); /* normalizing index offset */
    put_be32(buf + 12, (uint32_t)h->cfg.sigfigs);
    put_be64(buf + 16, (uint64_t)h->cfg.lowest);
    put_be64(buf + 24, (uint64_t)h->cfg.highest);
    put_be64(buf + 32, ratio_bits);
    *out = buf;
    *out_len = p;
    return 0;
}

int sq_hist_encode(const struct sq_hist *h, unsigned char **out, size_t *out_len)
{
    unsigned char *raw;
    size_t raw_len;
    int rc = sq_hist__encode_raw(h, &raw, &raw_len);
    if (rc < 0)
        return rc;
    uLongf zlen = compressBound((uLong)raw_len);
    unsigned char *buf = malloc(8 + (size_t)zlen);
    if (!buf) {
        free(raw);
        return -ENOMEM;
    }
    rc = compress2(buf + 8, &zlen, raw, (uLong)raw_len, Z_DEFAULT_COMPRESSION);
    free(raw);
    if (rc != Z_OK) {
        free(buf);
        return -ENOMEM; /* compress2 fails only for lack of memory with a compressBound buffer */
    }
    put_be32(buf, V2_COMPRESSED);
    put_be32(buf + 4, (uint32_t)zlen);
    *out = buf;
    *out_len = 8 + (size_t)zlen;
    return 0;
}

/* ---- decoding ---- */

struct header {
    struct cfg cfg;
    int word;       /* 0: V2 varints; 2, 4 or 8: V1 fixed-width big-endian counts */
    size_t payload; /* payload bytes */
};

static int parse_header(const unsigned char *b, bool v1, struct header *hd)
{
    uint32_t cookie = get_be32(b);
    if (v1) {
        hd->word = (int)((cookie & WORD_NIBBLE_MASK) >> 4);
        if ((cookie & ~WORD_NIBBLE_MASK) != V1_BASE ||
            (hd->word != 2 && hd->word != 4 && hd->word != 8))
            return -SQ_EDECODE;
    } else {
        if (cookie != V2_COOKIE)
            return -SQ_EDECODE;
        hd->word = 0;
    }
    int32_t payload = (int32_t)get_be32(b + 4);
    int32_t norm_offset = (int32_t)get_be32(b + 8);
    int32_t sigfigs = (int32_t)get_be32(b + 12);
    int64_t lowest = (int64_t)get_be64(b + 16);
    int64_t highest = (int64_t)get_be64(b + 24);
    /* b + 32: the conversion ratio, meaningless for integer histograms; ignored. */
    if (payload < 0 || norm_offset != 0)
        return -SQ_EDECODE;
    if (cfg_init(&hd->cfg, lowest, highest, sigfigs) < 0)
        return -SQ_EDECODE;
    if (hd->cfg.counts_len > SQ_HIST_DECODE_MAX_COUNTS)
        return -SQ_ETOOBIG;
    /* Each count takes at most VARINT_MAX bytes (V2) or exactly `word` bytes (V1). */
    size_t per = hd->word ? (size_t)hd->word : VARINT_MAX;
    if ((size_t)payload > per * (size_t)hd->cfg.counts_len)
        return -SQ_EDECODE;
    if (hd->word && (size_t)payload % per != 0)
        return -SQ_EDECODE;
    hd->payload = (size_t)payload;
    return 0;
}

static int fill_v2(struct sq_hist *h, const unsigned char *p, size_t n, int32_t *first,
                   int32_t *last)
{
    int64_t len = h->cfg.counts_len, idx = 0;
    size_t pos = 0;
    while (pos < n) {
        uint64_t u;
        size_t k = get_varint(p + pos, n - pos, &u);
        if (k == 0)
            return -SQ_EDECODE;
        pos += k;
        int64_t c = unzigzag(u);
        if (c < 0) {
            if (c == INT64_MIN || -c > len - idx)
                return -SQ_EDECODE;
            idx -= c;
            continue;
        }
        if (idx >= len || __builtin_add_overflow(h->total, c, &h->total))
            return -SQ_EDECODE;
        if (c != 0) {
            h->counts[idx] = c;
            if (*first < 0)
                *first = (int32_t)idx;
            *last = (int32_t)idx;
        }
        idx++;
    }
    return 0;
}

static int fill_v1(struct sq_hist *h, const unsigned char *p, size_t n, int word, int32_t *first,
                   int32_t *last)
{
    size_t count = n / (size_t)word; /* <= counts_len, checked by parse_header */
    for (size_t i = 0; i < count; i++) {
        const unsigned char *q = p + i * (size_t)word;
        int64_t c = word == 2   ? (int16_t)(uint16_t)(q[0] << 8 | q[1])
                    : word == 4 ? (int32_t)get_be32(q)
                                : (int64_t)get_be64(q);
        if (c < 0 || __builtin_add_overflow(h->total, c, &h->total))
            return -SQ_EDECODE;
        if (c != 0) {
            h->counts[i] = c;
            if (*first < 0)
                *first = (int32_t)i;
            *last = (int32_t)i;
        }
    }
    return 0;
}

static int decode_body(const struct header *hd, const unsigned char *p, struct sq_hist **out)
{
    struct sq_hist *h;
    int rc = hist_alloc(&hd->cfg, &h);
    if (rc < 0)
        return rc;
    int32_t first = -1, last = -1;
    rc = hd->word ? fill_v1(h, p, hd->payload, hd->word, &first, &last)
                  : fill_v2(h, p, hd->payload, &first, &last);
    if (rc < 0) {
        sq_hist_free(h);
        return rc;
    }
    /* As HdrHistogram rebuilds them: min from the first non-zero bucket above bucket 0 (zero
     * values do not count), max the highest equivalent value of the last non-zero bucket. */
    if (last >= 0)
        h->max_raw = highest_at(h, last);
    for (int32_t i = first > 0 ? first : 1; first >= 0 && i <= last; i++) {
        if (h->counts[i] != 0) {
            h->min_raw = lowest_at(h, i);
            break;
        }
    }
    SQ_ASSERT_MSG(counts_consistent(h), "decoded: total == the sum of the counts");
    *out = h;
    return 0;
}

int sq_hist__decode_raw(const unsigned char *buf, size_t len, struct sq_hist **out)
{
    if (!buf || len < HEADER_LEN)
        return -SQ_EDECODE;
    bool v1 = (get_be32(buf) & ~WORD_NIBBLE_MASK) == V1_BASE;
    struct header hd;
    int rc = parse_header(buf, v1, &hd);
    if (rc < 0)
        return rc;
    if (len - HEADER_LEN != hd.payload)
        return -SQ_EDECODE;
    return decode_body(&hd, buf + HEADER_LEN, out);
}

/* Inflates into dst[0..n) until it is full or the stream ends. Returns the bytes written, or a
 * negative code; *ended says whether the stream (adler32 checked) ended. */
static int64_t inflate_into(z_stream *zs, unsigned char *dst, size_t n, bool *ended)
{
    zs->next_out = dst;
    zs->avail_out = (uInt)n;
    *ended = false;
    while (zs->avail_out > 0) {
        int rc = inflate(zs, Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
            *ended = true;
            break;
        }
        if (rc == Z_MEM_ERROR)
            return -ENOMEM;
        if (rc != Z_OK) /* corrupt, needs a dictionary, or truncated (Z_BUF_ERROR) */
            return -SQ_EDECODE;
    }
    return (int64_t)(n - zs->avail_out);
}

int sq_hist_decode(const unsigned char *buf, size_t len, struct sq_hist **out)
{
    if (!buf || len < 8)
        return -SQ_EDECODE;
    uint32_t cookie = get_be32(buf);
    bool v1 = (cookie & ~WORD_NIBBLE_MASK) == V1_COMPRESSED_BASE;
    if (cookie != V2_COMPRESSED && !v1)
        return -SQ_EDECODE;
    int32_t clen = (int32_t)get_be32(buf + 4);
    if (clen < 0 || (size_t)clen != len - 8)
        return -SQ_EDECODE;

    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit(&zs) != Z_OK)
        return -ENOMEM;
    zs.next_in = buf + 8;
    zs.avail_in = (uInt)clen;

    unsigned char head[HEADER_LEN];
    unsigned char *payload = NULL;
    struct header hd;
    bool ended;
    int64_t got = inflate_into(&zs, head, sizeof(head), &ended);
    int rc = got < 0 ? (int)got : got != HEADER_LEN ? -SQ_EDECODE : parse_header(head, v1, &hd);
    if (rc < 0)
        goto out;
    /* Deflate expands at most about 1032:1; a payload claim beyond that cannot be real, and
     * refusing it here keeps a 20-byte blob from making us allocate megabytes. */
    if (hd.payload > (size_t)clen * 1032 + 64) {
        rc = -SQ_EDECODE;
        goto out;
    }
    /* One spare byte: if the stream fills it, there is data after the payload. */
    payload = malloc(hd.payload + 1);
    if (!payload) {
        rc = -ENOMEM;
        goto out;
    }
    got = ended ? 0 : inflate_into(&zs, payload, hd.payload + 1, &ended);
    if (got < 0) {
        rc = (int)got;
        goto out;
    }
    if (!ended || (size_t)got != hd.payload || zs.avail_in != 0) {
        rc = -SQ_EDECODE;
        goto out;
    }
    rc = decode_body(&hd, payload, out);
out:
    inflateEnd(&zs);
    free(payload);
    return rc;
}
