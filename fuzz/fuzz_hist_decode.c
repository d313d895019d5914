/* fuzz/fuzz_hist_decode.c - libFuzzer target for the HDR histogram decoders.
 *
 * Each input goes to both the compressed decoder (sq_hist_decode: what log lines carry) and the
 * raw inner-blob decoder (sq_hist__decode_raw: reaches the header and varint parsing without
 * first getting past zlib's checksum). Whatever decodes must be internally consistent, survive
 * every query, re-encode to a blob that decodes to the same counts, and merge without losing a
 * value. Any violation traps. Seeds: fuzz/corpus/hist_decode/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "stats/hist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static void exercise(const struct sq_hist *h)
{
    /* iteration adds up to the total */
    struct sq_hist_iter it;
    int64_t sum = 0;
    sq_hist_iter_init(&it, h);
    while (sq_hist_iter_next(&it)) {
        CHECK(it.count > 0 && it.lowest <= it.value);
        sum += it.count;
    }
    CHECK(sum == sq_hist_total(h));

    /* queries stay inside the recorded range */
    int64_t total = sq_hist_total(h);
    int64_t prev = -1;
    static const double pcts[] = {0, 1, 50, 90, 99, 99.99, 100};
    for (size_t i = 0; i < sizeof(pcts) / sizeof(pcts[0]); i++) {
        int64_t p = sq_hist_percentile(h, pcts[i]);
        CHECK(p >= prev);
        prev = p;
        if (total > 0)
            CHECK(p <= sq_hist_max(h) && (i == 0 || p >= sq_hist_min(h) || sq_hist_min(h) == 0));
    }
    (void)sq_hist_mean(h);
    (void)sq_hist_stddev(h);
    CHECK(sq_hist_count_between(h, 0, INT64_MAX) == total);

    /* re-encode and decode again: same counts */
    unsigned char *blob;
    size_t len;
    if (sq_hist_encode(h, &blob, &len) == 0) {
        struct sq_hist *back;
        CHECK(sq_hist_decode(blob, len, &back) == 0);
        CHECK(sq_hist_total(back) == total);
        CHECK(sq_hist_max(back) == sq_hist_max(h));
        CHECK(sq_hist_min(back) == sq_hist_min(h));
        CHECK(sq_hist__counts_len(back) == sq_hist__counts_len(h));
        struct sq_hist_iter a, b; /* lockstep: stops at the last non-empty bucket */
        sq_hist_iter_init(&a, h);
        sq_hist_iter_init(&b, back);
        while (sq_hist_iter_next(&a)) {
            CHECK(sq_hist_iter_next(&b));
            CHECK(a.value == b.value && a.count == b.count);
        }
        CHECK(!sq_hist_iter_next(&b));
        sq_hist_free(back);
        free(blob);
    }

    /* merge into squall's own configuration: nothing is lost */
    struct sq_hist *dst;
    if (sq_hist_new(1, INT64_C(3600000000), 3, &dst) == 0) {
        int64_t dropped = sq_hist_merge(dst, h);
        CHECK(dropped >= 0 && sq_hist_total(dst) + dropped == total);
        CHECK(sq_hist_out_of_range(dst) == dropped + sq_hist_out_of_range(h));
        sq_hist_free(dst);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sq_hist *h;
    if (sq_hist_decode(data, size, &h) == 0) {
        exercise(h);
        sq_hist_free(h);
    }
    if (sq_hist__decode_raw(data, size, &h) == 0) {
        exercise(h);
        sq_hist_free(h);
    }
    return 0;
}
