/* fuzz_ws.c - the WebSocket frame path (wslay plus this layer's checks) and the encoder.
 * Input: byte 0 seeds the split, picks a small message cap (bit 0) and which end reads (bit 1:
 * the server's end, squall target's, which wants masked frames); the rest is what the peer sends
 * after the 101. Checks: fed whole, in random pieces and byte by byte (each piece
 * an exact-size heap copy), the events (data joined per message, control frames, close codes)
 * and the final result are the same; data chunks never pass the cap; a connection left idle at a
 * frame boundary holds no wslay context. Then the input's bytes are framed by the encoder (a
 * client's end: masked; a server's: not) and read back by a reference decoder. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/ws.h"

static uint32_t next_rand(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

struct acc {
    uint64_t h;
    uint64_t max;
    int open; /* a message has started and not ended */
};

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ULL;
    return h;
}

static int on_event(void *ud, const struct sq_ws_event *ev)
{
    struct acc *a = ud;
    uint8_t t[2] = {ev->type, ev->opcode};
    if (ev->type == SQ_WS_EV_DATA) {
        if (ev->first == (a->open != 0))
            abort(); /* first chunk exactly when no message is open */
        a->open = !ev->last;
        if (ev->msg_len > a->max)
            abort();
        if (ev->first)
            a->h = mix(a->h, t, 2);
        a->h = mix(a->h, ev->data, ev->len); /* chunk boundaries are not hashed */
        if (ev->last)
            a->h = mix(a->h, &ev->msg_len, sizeof(ev->msg_len));
        return 0;
    }
    if (ev->len > SQ_WS_MAX_CONTROL)
        abort();
    a->h = mix(a->h, t, 2);
    a->h = mix(a->h, ev->data, ev->len);
    a->h = mix(a->h, &ev->code, sizeof(ev->code));
    return 0;
}

static int run(struct sq_ws_ctx *w, const uint8_t *in, size_t n, uint32_t seed, int mode,
               uint64_t max, bool server, uint64_t *hash)
{
    struct sq_ws_conn c;
    if (server)
        sq_ws_conn_init_server(&c, max);
    else
        sq_ws_conn_init(&c, seed, max);
    struct acc a = {1469598103934665603ULL, c.max_msg, 0};
    int rc = 0;
    for (size_t off = 0; off < n && rc == 0;) {
        size_t k = n - off;
        if (mode == 1)
            k = 1 + next_rand(&seed) % 29;
        else if (mode == 2)
            k = 1;
        if (k > n - off)
            k = n - off;
        uint8_t *piece = malloc(k);
        if (!piece)
            abort();
        memcpy(piece, in + off, k);
        rc = sq_ws_feed(w, &c, piece, k, on_event, &a);
        free(piece);
        off += k;
        if (rc == 0 && !c._in_frame && c._given == c._used && c._fc)
            abort(); /* idle at a frame boundary: the context must be back in the pool */
    }
    sq_ws_conn_dispose(w, &c);
    *hash = a.h;
    return rc;
}

static void encode_check(struct sq_ws_ctx *w, const uint8_t *d, size_t n, bool server)
{
    struct sq_ws_conn c;
    if (server)
        sq_ws_conn_init_server(&c, 0);
    else
        sq_ws_conn_init(&c, n, 0);
    size_t cap = sq_ws_frame_len_for(&c, n);
    uint8_t *out = malloc(cap);
    if (!out)
        abort();
    uint8_t op = n && (d[0] & 1) ? SQ_WS_TEXT : SQ_WS_BINARY;
    int len = sq_ws_encode_frame(w, &c, out, cap, op, true, d, n);
    if (len != (int)cap)
        abort();
    size_t i = 2, pl = out[1] & 127;
    if (!(out[1] & 0x80) != server || (out[0] & 0x7f) != op || !(out[0] & 0x80))
        abort();
    if (pl == 126) {
        pl = (size_t)out[2] << 8 | out[3];
        i = 4;
    } else if (pl == 127) {
        pl = 0;
        for (int k = 0; k < 8; k++)
            pl = pl << 8 | out[2 + k];
        i = 10;
    }
    size_t mk = server ? 0 : 4;
    if (pl != n || i + mk + n != cap)
        abort();
    for (size_t k = 0; k < n; k++)
        if ((uint8_t)(out[i + mk + k] ^ (server ? 0 : out[i + (k % 4)])) != d[k])
            abort();
    if (sq_ws_encode_frame(w, &c, out, cap - 1, op, true, d, n) != -SQ_ETOOBIG)
        abort();
    free(out);
    sq_ws_conn_dispose(w, &c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct sq_ws_ctx w;
    if (sq_ws_ctx_init(&w) != 0)
        abort();
    uint32_t seed = data[0] * 2654435761u + 1;
    uint64_t max = data[0] & 1 ? 100 : 0;
    bool server = data[0] & 2;
    uint64_t h0, h1, h2;
    int r0 = run(&w, data + 1, size - 1, seed, 0, max, server, &h0);
    int r1 = run(&w, data + 1, size - 1, seed, 1, max, server, &h1);
    int r2 = run(&w, data + 1, size - 1, seed, 2, max, server, &h2);
    if (r0 != r1 || r0 != r2 || h0 != h1 || h0 != h2)
        abort();
    encode_check(&w, data + 1, size - 1, server);
    sq_ws_ctx_dispose(&w);
    return 0;
}
