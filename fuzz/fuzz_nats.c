/* fuzz_nats.c - the NATS server-op parser, the JSON reader and the PubAck / INFO readers.
 * Input: byte 0 seeds the split, the rest is a server stream. Checks: every span lies inside the
 * buffer; a PARTIAL's `need` exceeds what was there; the stream parsed whole and fed in random
 * pieces through a driver-like spill (each piece an exact-size heap copy, so ASan sees any
 * over-read) gives the same events and the same final error code; header walks and the JSON
 * readers never fail on what the parser accepted. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/nats.h"

static uint32_t next_rand(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ULL;
    return h ^ n;
}

static void in_buf(struct sq_str s, const char *buf, size_t len)
{
    if (s.len && (s.p < buf || s.p + s.len > buf + len))
        abort();
}

/* Checks one event and folds it into h. */
static uint64_t event(uint64_t h, const struct sq_nats_event *ev, const char *buf, size_t len)
{
    in_buf(ev->subject, buf, len);
    in_buf(ev->sid, buf, len);
    in_buf(ev->reply, buf, len);
    in_buf(ev->headers, buf, len);
    in_buf(ev->payload, buf, len);
    in_buf(ev->text, buf, len);
    h = mix(h, &ev->op, 1);
    h = mix(h, ev->subject.p, ev->subject.len);
    h = mix(h, ev->sid.p, ev->sid.len);
    h = mix(h, ev->reply.p, ev->reply.len);
    h = mix(h, ev->payload.p, ev->payload.len);
    h = mix(h, ev->text.p, ev->text.len);
    h = mix(h, &ev->status, sizeof(ev->status));
    if (ev->op == SQ_NATS_OP_HMSG) {
        size_t pos = 0;
        struct sq_str n, v;
        while (sq_nats_header_next(ev->headers, &pos, &n, &v)) {
            in_buf(n, buf, len);
            in_buf(v, buf, len);
            if (n.len == 0)
                abort();
        }
    }
    if (ev->op == SQ_NATS_OP_INFO) {
        struct sq_nats_info info;
        if (sq_nats_info_parse(ev->text, &info) != 0)
            abort(); /* the parser accepted it */
    }
    if (ev->op == SQ_NATS_OP_MSG || ev->op == SQ_NATS_OP_HMSG) {
        struct sq_nats_puback a;
        int k = sq_nats_puback_parse(ev->payload.p, ev->payload.len, &a);
        if (k >= 0) {
            in_buf(a.stream, ev->payload.p, ev->payload.len);
            in_buf(a.description, ev->payload.p, ev->payload.len);
        }
    }
    return h;
}

struct limits_pick {
    struct sq_nats_limits lim;
};

/* Parses in[0,n) in pieces (sizes from seed; 0 seed: whole). Returns the final rc (0 or an
 * error) and the event hash. */
static int run(const char *in, size_t n, uint32_t seed, const struct sq_nats_limits *lim,
               uint64_t *hash)
{
    char *spill = NULL;
    size_t have = 0, off = 0;
    uint64_t h = 1469598103934665603ULL;
    int rc = 0;
    while (off < n || have) {
        size_t k = n - off;
        if (seed && k) {
            k = 1 + next_rand(&seed) % 23;
            if (k > n - off)
                k = n - off;
        }
        char *buf = malloc(have + k ? have + k : 1);
        if (!buf)
            abort();
        if (have)
            memcpy(buf, spill, have);
        if (k)
            memcpy(buf + have, in + off, k);
        free(spill);
        spill = NULL;
        off += k;
        size_t len = have + k, pos = 0;
        for (;;) {
            struct sq_nats_event ev;
            size_t need = 0;
            rc = sq_nats_parse(buf + pos, len - pos, lim, &ev, &need);
            if (rc < 0) {
                if (!ev.why)
                    abort();
                free(buf);
                *hash = h;
                return rc;
            }
            if (rc == 0) {
                if (need && need <= len - pos)
                    abort();
                break;
            }
            if ((size_t)rc > len - pos)
                abort();
            h = event(h, &ev, buf + pos, (size_t)rc);
            pos += (size_t)rc;
        }
        have = len - pos;
        if (have) {
            spill = malloc(have);
            if (!spill)
                abort();
            memcpy(spill, buf + pos, have);
        }
        free(buf);
        if (off == n)
            break;
    }
    free(spill);
    *hash = h;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t seed = data[0] * 2654435761u + 1;
    struct sq_nats_limits lim;
    sq_nats_limits_init(&lim);
    if (data[0] & 1) { /* small caps, to reach the TOOBIG paths */
        lim.max_line = 64;
        lim.max_info = 128;
        lim.max_payload = 100;
    }
    const char *in = (const char *)data + 1;
    size_t n = size - 1;
    uint64_t h1, h2;
    int r1 = run(in, n, 0, &lim, &h1);
    int r2 = run(in, n, seed, &lim, &h2);
    if (r1 != r2 || h1 != h2)
        abort();

    /* The JSON reader on the raw bytes. */
    struct sq_str v;
    int j = sq_nats_json_get((struct sq_str){in, n}, "seq", &v);
    if (j == 1)
        in_buf(v, in, n);
    return 0;
}
