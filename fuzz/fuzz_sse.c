/* fuzz_sse.c - the event-stream counter. Input: byte 0 seeds the split, the rest is the stream.
 * Checks: the count is the same fed whole, in random pieces (each an exact-size heap copy under
 * ASan) and byte by byte; the per-feed returns add up; and it equals a slow reference that
 * splits lines and applies the WHATWG rules literally. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/sse.h"

static uint64_t reference(const unsigned char *p, size_t n)
{
    size_t i = 0;
    if (n >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf)
        i = 3;
    uint64_t events = 0;
    bool data = false;
    while (i < n) {
        size_t s = i;
        while (i < n && p[i] != '\r' && p[i] != '\n')
            i++;
        if (i == n)
            break;
        size_t e = i;
        if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n')
            i++;
        i++;
        size_t len = e - s;
        if (len == 0) {
            if (data)
                events++;
            data = false;
        } else if (p[s] != ':') {
            const unsigned char *colon = memchr(p + s, ':', len);
            size_t name = colon ? (size_t)(colon - (p + s)) : len;
            if (name == 4 && memcmp(p + s, "data", 4) == 0)
                data = true;
        }
    }
    return events;
}

static uint32_t next_rand(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t seed = data[0] * 2654435761u + 1;
    const char *in = (const char *)data + 1;
    size_t len = size - 1;
    uint64_t want = reference((const unsigned char *)in, len);

    struct sq_sse s;
    sq_sse_init(&s);
    if (sq_sse_feed(&s, in, len) != want || s.events != want)
        abort();

    sq_sse_init(&s);
    uint64_t sum = 0;
    for (size_t off = 0; off < len;) {
        size_t n = 1 + next_rand(&seed) % 17;
        if (n > len - off)
            n = len - off;
        char *piece = malloc(n);
        if (!piece)
            abort();
        memcpy(piece, in + off, n);
        sum += sq_sse_feed(&s, piece, n);
        free(piece);
        off += n;
    }
    if (sum != want || s.events != want)
        abort();

    sq_sse_init(&s);
    for (size_t i = 0; i < len; i++)
        sq_sse_feed(&s, in + i, 1);
    if (s.events != want)
        abort();
    return 0;
}
