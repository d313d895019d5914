/* proto/stamp.c - encode, parse and find event stamps (format in proto/stamp.h).
 *
 * Encoding is on the send path of every stamped event, so base36 goes two digits at a time
 * through a 36 * 36 table (divisions by the constant 1296 become multiplications), and the
 * "sq1.<run>." head is rendered once per run. The finder leans on memmem() for the prefix and
 * then parses the candidate field by field; a candidate that fails is skipped, never an error.
 */
#include "proto/stamp.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

static const char b36[] = "0123456789abcdefghijklmnopqrstuvwxyz";
static const char b32[] = "0123456789abcdefghjkmnpqrstvwxyz"; /* Crockford, lowercase */

/* Digit values: 0-35 for [0-9a-z] (base36), 64 otherwise. The base32 table maps only its own
 * alphabet. */
static uint8_t v36[256], v32[256];
static char pair36[36 * 36][2];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_build(void)
{
    memset(v36, 64, sizeof(v36));
    memset(v32, 64, sizeof(v32));
    for (int i = 0; i < 36; i++)
        v36[(unsigned char)b36[i]] = (uint8_t)i;
    for (int i = 0; i < 32; i++)
        v32[(unsigned char)b32[i]] = (uint8_t)i;
    for (int i = 0; i < 36 * 36; i++) {
        pair36[i][0] = b36[i / 36];
        pair36[i][1] = b36[i % 36];
    }
}

static inline void tables(void)
{
    pthread_once(&tables_once, tables_build);
}

/* 36^k for k = 0..12; a u64 needs at most 13 base36 digits. */
static const uint64_t pow36[13] = {1ULL,
                                   36ULL,
                                   1296ULL,
                                   46656ULL,
                                   1679616ULL,
                                   60466176ULL,
                                   2176782336ULL,
                                   78364164096ULL,
                                   2821109907456ULL,
                                   101559956668416ULL,
                                   3656158440062976ULL,
                                   131621703842267136ULL,
                                   4738381338321616896ULL};

static inline size_t b36_len(uint64_t v)
{
    size_t n = 1;
    while (n < 13 && v >= pow36[n])
        n++;
    return n;
}

static inline size_t b36_put(char *out, uint64_t v)
{
    size_t n = b36_len(v);
    char *p = out + n;
    while (v >= 1296) {
        unsigned r = (unsigned)(v % 1296);
        v /= 1296;
        p -= 2;
        memcpy(p, pair36[r], 2);
    }
    if (v >= 36) {
        p -= 2;
        memcpy(p, pair36[v], 2);
    } else {
        *--p = b36[v];
    }
    return n;
}

static size_t b32_put(char *out, uint64_t v)
{
    char tmp[13];
    size_t n = 0;
    do {
        tmp[n++] = b32[v & 31];
        v >>= 5;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

void sq_stamp_enc_init(struct sq_stamp_enc *e, uint64_t run)
{
    tables();
    memcpy(e->head, SQ_STAMP_PREFIX, SQ_STAMP_PREFIX_LEN);
    size_t n = SQ_STAMP_PREFIX_LEN + b32_put(e->head + SQ_STAMP_PREFIX_LEN, run);
    e->head[n++] = '.';
    e->head_len = (uint8_t)n;
}

size_t sq_stamp_encode(const struct sq_stamp_enc *e, uint64_t seq, int64_t ns, char *out)
{
    size_t n = e->head_len;
    memcpy(out, e->head, sizeof(e->head));
    n += b36_put(out + n, seq);
    out[n++] = '.';
    n += b36_put(out + n, ns < 0 ? 0 : (uint64_t)ns);
    return n;
}

size_t sq_stamp_format(const struct sq_stamp *s, char *out)
{
    struct sq_stamp_enc e;
    sq_stamp_enc_init(&e, s->run);
    return sq_stamp_encode(&e, s->seq, s->ns, out);
}

/* One field: the longest run of base36 characters at p[*i], converted in base 32 or 36. False
 * on an empty field, a leading zero, a character outside the base, or a value over max. Twelve
 * digits fit 64 bits in either base; only a thirteenth needs an overflow check, and a
 * fourteenth overflows. Inlined with a constant base, so the multiply is by a constant. */
static inline __attribute__((always_inline)) bool field(const char *p, size_t n, size_t *i,
                                                        unsigned base, uint64_t max, uint64_t *out)
{
    const uint8_t *val = base == 32 ? v32 : v36;
    size_t s = *i, k = s;
    uint64_t v = 0;
    for (; k < n; k++) {
        unsigned char c = (unsigned char)p[k];
        if (v36[c] >= 36)
            break;
        unsigned d = val[c];
        if (d >= base)
            return false;
        if (k - s < 12) {
            v = v * base + d;
        } else if (k - s > 12 || __builtin_mul_overflow(v, base, &v) ||
                   __builtin_add_overflow(v, d, &v)) {
            return false;
        }
    }
    if (k == s || (k - s > 1 && p[s] == '0') || v > max)
        return false;
    *i = k;
    *out = v;
    return true;
}

static inline bool is_boundary(const char *p, size_t n, size_t i)
{
    if (i >= n)
        return true;
    unsigned char c = (unsigned char)p[i];
    return !(c == '.' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'));
}

/* Parses a stamp starting at p[0] ("sq1." included); *end is set past its last digit. */
static bool parse_at(const char *p, size_t n, struct sq_stamp *out, size_t *end)
{
    if (n < SQ_STAMP_PREFIX_LEN + 5 || memcmp(p, SQ_STAMP_PREFIX, SQ_STAMP_PREFIX_LEN) != 0)
        return false;
    size_t i = SQ_STAMP_PREFIX_LEN;
    uint64_t run, seq, ns;
    if (!field(p, n, &i, 32, UINT64_MAX, &run) || i >= n || p[i++] != '.')
        return false;
    if (!field(p, n, &i, 36, UINT64_MAX, &seq) || i >= n || p[i++] != '.')
        return false;
    if (!field(p, n, &i, 36, (uint64_t)INT64_MAX, &ns))
        return false;
    out->run = run;
    out->seq = seq;
    out->ns = (int64_t)ns;
    *end = i;
    return true;
}

int sq_stamp_parse(const char *p, size_t n, struct sq_stamp *out)
{
    tables();
    size_t end;
    struct sq_stamp s;
    if (!parse_at(p, n, &s, &end) || end != n)
        return -SQ_EPARSE;
    *out = s;
    return 0;
}

bool sq_stamp_find(const char *p, size_t n, struct sq_stamp *out, size_t *at, size_t *len)
{
    tables();
    size_t off = 0;
    while (off + SQ_STAMP_PREFIX_LEN <= n) {
        /* memchr for the 's' (vectorised in libc), then the other three bytes. */
        const char *c = memchr(p + off, 's', n - off - (SQ_STAMP_PREFIX_LEN - 1));
        if (!c)
            return false;
        if (memcmp(c + 1, &SQ_STAMP_PREFIX[1], SQ_STAMP_PREFIX_LEN - 1) != 0) {
            off = (size_t)(c - p) + 1;
            continue;
        }
        size_t i = (size_t)(c - p), end;
        struct sq_stamp s;
        if ((i == 0 || is_boundary(p, n, i - 1)) && parse_at(c, n - i, &s, &end) &&
            is_boundary(p, n, i + end)) {
            *out = s;
            if (at)
                *at = i;
            if (len)
                *len = end;
            return true;
        }
        off = i + 1;
    }
    return false;
}

int64_t sq_stamp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
