/* test_ws.c - WebSocket client: handshake, frames over wslay, the context pool.
 *
 * Server streams (unmasked frames, written out by hand from RFC 6455 section 5.2) are fed whole,
 * split in two at every point, one byte at a time, and as every truncated prefix, each piece
 * placed against a guard page, and must give the same events each way; invalid streams must fail
 * with the same code however they are split. Client frames the encoder writes are unmasked here
 * by a reference decoder and compared.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "proto_test.h"

#include "base/b64.h"
#include "proto/ws.h"

_Static_assert(sizeof(struct sq_ws_conn) <= 256, "a WebSocket connection must stay small");

/* ---- handshake ---- */

static void test_accept_key(void **state)
{
    (void)state;
    char out[SQ_WS_ACCEPT_LEN + 1];
    sq_ws_accept_for_key("dGhlIHNhbXBsZSBub25jZQ==", 24, out); /* RFC 6455 section 1.3 */
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void test_handshake(void **state)
{
    (void)state;
    uint64_t rng = 42;
    struct sq_ws_handshake hs, hs2;
    sq_ws_handshake_init(&hs, &rng, (struct sq_str){0});
    sq_ws_handshake_init(&hs2, &rng, (struct sq_str){0});
    assert_int_equal(strlen(hs.key), SQ_WS_KEY_LEN);
    assert_string_not_equal(hs.key, hs2.key);
    unsigned char *raw;
    size_t raw_len;
    assert_int_equal(sq_b64_decode(hs.key, SQ_WS_KEY_LEN, &raw, &raw_len), 0);
    assert_int_equal(raw_len, 16);
    free(raw);
    char want_accept[SQ_WS_ACCEPT_LEN + 1];
    sq_ws_accept_for_key(hs.key, SQ_WS_KEY_LEN, want_accept);
    assert_string_equal(hs.accept, want_accept);

    char buf[512], want[512];
    int n = sq_ws_encode_upgrade(buf, sizeof(buf), &hs, S("127.0.0.1:8080"), S("/ws?x=1"),
                                 S("Origin: http://x\r\n"));
    snprintf(want, sizeof(want),
             "GET /ws?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
             "Origin: http://x\r\n\r\n",
             hs.key);
    assert_int_equal(n, (int)strlen(want));
    assert_memory_equal(buf, want, (size_t)n);
    for (int cap = 0; cap < n; cap++)
        assert_int_equal(sq_ws_encode_upgrade(buf, (size_t)cap, &hs, S("127.0.0.1:8080"),
                                              S("/ws?x=1"), S("Origin: http://x\r\n")) < 0,
                         1);
    assert_int_equal(sq_ws_encode_upgrade(buf, sizeof(buf), &hs, S("h"), S("ws"), S("")), -EINVAL);
    assert_int_equal(sq_ws_encode_upgrade(buf, sizeof(buf), &hs, S("h"), S("/a b"), S("")),
                     -EINVAL);
    assert_int_equal(sq_ws_encode_upgrade(buf, sizeof(buf), &hs, S("h\r\n"), S("/"), S("")),
                     -EINVAL);
    assert_int_equal(sq_ws_encode_upgrade(buf, sizeof(buf), &hs, S("h"), S("/"), S("X: y")),
                     -EINVAL);

    /* A good answer, fields in any case, Connection as a list. */
    assert_int_equal(sq_ws_handshake_field(&hs, S("UPGRADE"), S("WebSocket")), 0);
    assert_int_equal(sq_ws_handshake_field(&hs, S("connection"), S("keep-alive, Upgrade")), 0);
    assert_int_equal(sq_ws_handshake_field(&hs, S("Server"), S("x")), 0);
    assert_int_equal(
        sq_ws_handshake_field(&hs, S("Sec-WebSocket-Accept"), (struct sq_str){want_accept, 28}), 0);
    assert_int_equal(sq_ws_handshake_finish(&hs, 101), 0);

    /* Refusals. */
    struct {
        const char *name, *value;
        int status;
    } bad[] = {
        {"Upgrade", "h2c", 101},
        {"Sec-WebSocket-Accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", 101},
        {"Sec-WebSocket-Extensions", "permessage-deflate", 101},
        {"Sec-WebSocket-Protocol", "chat", 101},
        {NULL, NULL, 200},
        {"Connection", "close", 101},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(bad); i++) {
        struct sq_ws_handshake h;
        sq_ws_handshake_init(&h, &rng, (struct sq_str){0});
        int rc = 0;
        if (bad[i].name)
            rc = sq_ws_handshake_field(&h, (struct sq_str){bad[i].name, strlen(bad[i].name)},
                                       (struct sq_str){bad[i].value, strlen(bad[i].value)});
        if (rc == 0 && strcmp(bad[i].name ? bad[i].name : "", "Connection") != 0) {
            /* Everything else right: only the bad field or status may fail it. */
            assert_int_equal(sq_ws_handshake_field(&h, S("Upgrade"), S("websocket")), 0);
            assert_int_equal(sq_ws_handshake_field(&h, S("Connection"), S("Upgrade")), 0);
            assert_int_equal(
                sq_ws_handshake_field(&h, S("Sec-WebSocket-Accept"), (struct sq_str){h.accept, 28}),
                0);
        } else if (rc == 0) {
            assert_int_equal(sq_ws_handshake_field(&h, S("Upgrade"), S("websocket")), 0);
            assert_int_equal(
                sq_ws_handshake_field(&h, S("Sec-WebSocket-Accept"), (struct sq_str){h.accept, 28}),
                0);
        }
        if (rc == 0)
            rc = sq_ws_handshake_finish(&h, bad[i].status);
        CHECK(rc == -SQ_EPARSE && h.why, "case %zu accepted\n", i);
    }
    /* A subprotocol that was offered is fine; twice is not. */
    struct sq_ws_handshake hp;
    sq_ws_handshake_init(&hp, &rng, S("chat, superchat"));
    n = sq_ws_encode_upgrade(buf, sizeof(buf), &hp, S("h"), S("/"), S(""));
    assert_non_null(strstr(buf, "Sec-WebSocket-Protocol: chat, superchat\r\n"));
    assert_int_equal(sq_ws_handshake_field(&hp, S("Sec-WebSocket-Protocol"), S("superchat")), 0);
    assert_int_equal(sq_ws_handshake_field(&hp, S("Sec-WebSocket-Protocol"), S("chat")),
                     -SQ_EPARSE);
}

/* ---- receiving ---- */

struct log {
    char s[4096];
    int stop_at; /* return an error from the callback at this event (0: never) */
    int events;
};

static int on_event(void *ud, const struct sq_ws_event *ev)
{
    struct log *l = ud;
    size_t n = strlen(l->s);
    char data[sizeof(l->s)];
    size_t dl = ev->len < sizeof(data) - 1 ? ev->len : sizeof(data) - 1;
    for (size_t i = 0; i < dl; i++)
        data[i] = (ev->data[i] >= 0x20 && ev->data[i] < 0x7f) ? (char)ev->data[i] : '?';
    data[dl] = 0;
    switch (ev->type) {
    case SQ_WS_EV_DATA:
        /* Chunks of one message are joined, so a log does not depend on how bytes arrived. */
        if (ev->first)
            n += (size_t)snprintf(l->s + n, sizeof(l->s) - n, "%s[", ev->opcode == 1 ? "T" : "B");
        n += (size_t)snprintf(l->s + n, sizeof(l->s) - n, "%s", data);
        if (ev->last)
            snprintf(l->s + n, sizeof(l->s) - n, "]%llu;", (unsigned long long)ev->msg_len);
        break;
    case SQ_WS_EV_PING:
        snprintf(l->s + n, sizeof(l->s) - n, "PING(%s);", data);
        break;
    case SQ_WS_EV_PONG:
        snprintf(l->s + n, sizeof(l->s) - n, "PONG(%s);", data);
        break;
    case SQ_WS_EV_CLOSE:
        snprintf(l->s + n, sizeof(l->s) - n, "CLOSE(%u,%s);", ev->code, data);
        break;
    }
    if (++l->events == l->stop_at)
        return -12345;
    return 0;
}

/* Feeds in[0,n) in pieces of the given sizes (cycled; 0 means the rest), each piece placed
 * against a guard page. Returns the first nonzero feed result. */
static int feed_pieces(struct sq_ws_ctx *w, const uint8_t *in, size_t n, size_t piece, size_t split,
                       struct log *lg, uint64_t max_msg)
{
    struct sq_ws_conn c;
    sq_ws_conn_init(&c, 1, max_msg);
    struct guard g;
    guard_init(&g, n + 16);
    int rc = 0;
    size_t off = 0;
    while (off < n && rc == 0) {
        size_t k = n - off;
        if (split)
            k = off < split ? split - off : n - off;
        else if (piece && piece < k)
            k = piece;
        const char *p = guard_put(&g, in + off, k);
        rc = sq_ws_feed(w, &c, p, k, on_event, lg);
        off += k;
    }
    sq_ws_conn_dispose(w, &c);
    guard_free(&g);
    return rc;
}

struct rcase {
    const char *name;
    const char *hex;
    int rc;
    const char *log;
    uint64_t max_msg;
};

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
    size_t n = 0;
    while (*h) {
        if (*h == ' ') {
            h++;
            continue;
        }
        if (*h == '*') { /* "*N:XX" repeats byte XX N times */
            unsigned cnt, v;
            int used;
            if (sscanf(h, "*%u:%2x%n", &cnt, &v, &used) != 2 || n + cnt > cap)
                fail_msg("bad repeat at '%s'", h);
            memset(out + n, (int)v, cnt);
            n += cnt;
            h += used;
            continue;
        }
        unsigned v;
        if (sscanf(h, "%2x", &v) != 1 || n == cap)
            fail_msg("bad hex at '%s'", h);
        out[n++] = (uint8_t)v;
        h += 2;
    }
    return n;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct rcase rcases[] = {
    {"text", "81 05 68 65 6c 6c 6f", 0, "T[hello]5;"},
    {"empty text", "81 00", 0, "T[]0;"},
    {"binary 16-bit length", "82 7e 00 c8 *200:61", 0,
     "B[aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
    {"fragmented with ping inside", "01 03 68 65 6c 89 02 68 69 00 01 6c 80 01 6f", 0,
     "T[helPING(hi);lo]5;"},
    {"empty fragments", "02 00 00 00 80 00", 0, "B[]0;"},
    {"pong", "8a 03 61 62 63", 0, "PONG(abc);"},
    {"close 1000", "88 02 03 e8", 0, "CLOSE(1000,);"},
    {"close 1011 with reason", "88 05 03 f3 62 79 65", 0, "CLOSE(1011,bye);"},
    {"close without code", "88 00", 0, "CLOSE(1005,);"},
    {"close 4000", "88 02 0f a0", 0, "CLOSE(4000,);"},
    {"two messages", "81 01 61 82 02 62 63 89 00", 0, "T[a]1;B[bc]2;PING();"},
    {"at the cap", "81 0a *10:78", 0, "T[xxxxxxxxxx]10;", 10},
    {"fragments at the cap", "01 05 *5:78 80 05 *5:79", 0, "T[xxxxxyyyyy]10;", 10},
    /* refusals */
    {"masked", "81 85 01 02 03 04 69 67 6f 68 6e", -SQ_EPARSE},
    {"rsv1", "c1 01 61", -SQ_EPARSE},
    {"rsv3", "91 01 61", -SQ_EPARSE},
    {"reserved opcode", "83 00", -SQ_EPARSE},
    {"reserved control opcode", "8b 00", -SQ_EPARSE},
    {"continuation alone", "80 01 61", -SQ_EPARSE},
    {"message inside message", "01 01 61 81 01 62", -SQ_EPARSE},
    {"long control", "89 7e 00 7e *126:61", -SQ_EPARSE},
    {"fragmented control", "09 00", -SQ_EPARSE},
    {"non-minimal 16", "81 7e 00 05 68 65 6c 6c 6f", -SQ_EPARSE},
    {"non-minimal 64", "81 7f 00 00 00 00 00 00 00 05 68 65 6c 6c 6f", -SQ_EPARSE},
    {"64-bit top bit", "82 7f 80 00 00 00 00 00 00 00", -SQ_EPARSE},
    {"close one byte", "88 01 03", -SQ_EPARSE},
    {"close 1005 on the wire", "88 02 03 ed", -SQ_EPARSE},
    {"close 999", "88 02 03 e7", -SQ_EPARSE},
    {"close 5000", "88 02 13 88", -SQ_EPARSE},
    {"close reason not utf8", "88 04 03 e8 c0 80", -SQ_EPARSE},
    {"frame after close", "88 02 03 e8 81 01 61", -SQ_EPARSE},
    {"over the cap", "81 0b *11:78", -SQ_ETOOBIG, NULL, 10},
    {"fragments over the cap", "01 06 *6:78 80 05 *5:79", -SQ_ETOOBIG, NULL, 10},
    /* wslay reports a frame with its first payload byte: one is needed to judge it */
    {"huge frame", "82 7f 7f ff ff ff ff ff ff ff 00", -SQ_ETOOBIG},
};
#pragma GCC diagnostic pop

static void test_receive(void **state)
{
    (void)state;
    struct sq_ws_ctx w;
    assert_int_equal(sq_ws_ctx_init(&w), 0);
    static uint8_t in[70000];
    for (size_t c = 0; c < SQ_ARRAY_LEN(rcases); c++) {
        const struct rcase *t = &rcases[c];
        size_t n = unhex(t->hex, in, sizeof(in));
        struct log whole = {0};
        int rc = feed_pieces(&w, in, n, 0, 0, &whole, t->max_msg);
        CHECK(rc == t->rc, "%s: whole gives %d (%s), want %d\n", t->name, rc, w.why, t->rc);
        if (t->rc == 0 && t->log)
            CHECK(strncmp(whole.s, t->log, strlen(t->log)) == 0, "%s: log %s\nwant %s\n", t->name,
                  whole.s, t->log);
        if (t->rc < 0)
            CHECK(w.why != NULL, "%s: no reason\n", t->name);
        struct log lg;
        for (size_t s = 1; s < n; s++) {
            memset(&lg, 0, sizeof(lg));
            rc = feed_pieces(&w, in, n, 0, s, &lg, t->max_msg);
            CHECK(rc == t->rc && strcmp(lg.s, whole.s) == 0,
                  "%s: split at %zu gives %d, log %s\nwant %s\n", t->name, s, rc, lg.s, whole.s);
        }
        memset(&lg, 0, sizeof(lg));
        rc = feed_pieces(&w, in, n, 1, 0, &lg, t->max_msg);
        CHECK(rc == t->rc && strcmp(lg.s, whole.s) == 0, "%s: byte by byte gives %d, log %s\n",
              t->name, rc, lg.s);
        /* Every truncated prefix: no error yet for a valid stream, and its log a prefix of the
         * whole one (a message reported whole only once its last byte is in). */
        for (size_t k = 0; t->rc == 0 && k < n; k++) {
            memset(&lg, 0, sizeof(lg));
            rc = feed_pieces(&w, in, k, 0, 0, &lg, t->max_msg);
            CHECK(rc == 0 && strncmp(whole.s, lg.s, strlen(lg.s)) == 0,
                  "%s: prefix %zu gives %d, log %s\n", t->name, k, rc, lg.s);
        }
    }
    sq_ws_ctx_dispose(&w);
}

static void test_callback_stops(void **state)
{
    (void)state;
    struct sq_ws_ctx w;
    assert_int_equal(sq_ws_ctx_init(&w), 0);
    uint8_t in[64];
    size_t n = unhex("81 01 61 81 01 62 81 01 63", in, sizeof(in));
    struct log lg = {.stop_at = 2};
    assert_int_equal(feed_pieces(&w, in, n, 0, 0, &lg, 0), -12345);
    assert_string_equal(lg.s, "T[a]1;T[b]1;");
    sq_ws_ctx_dispose(&w);
}

/* ---- sending ---- */

/* Reference decoder for one masked client frame; returns the payload length or -1. */
static long unmask(const uint8_t *f, size_t n, uint8_t *op, bool *fin, uint8_t *out,
                   uint8_t mask[4])
{
    if (n < 2 || !(f[1] & 0x80))
        return -1;
    *fin = f[0] & 0x80;
    *op = f[0] & 15;
    uint64_t len = f[1] & 127;
    size_t i = 2;
    if (len == 126) {
        len = (uint64_t)f[2] << 8 | f[3];
        i = 4;
    } else if (len == 127) {
        len = 0;
        for (int k = 0; k < 8; k++)
            len = len << 8 | f[2 + k];
        i = 10;
    }
    memcpy(mask, f + i, 4);
    i += 4;
    if (n != i + len)
        return -1;
    for (size_t k = 0; k < len; k++)
        out[k] = f[i + k] ^ mask[k % 4];
    return (long)len;
}

static void test_encode(void **state)
{
    (void)state;
    struct sq_ws_ctx w;
    assert_int_equal(sq_ws_ctx_init(&w), 0);
    struct sq_ws_conn c;
    sq_ws_conn_init(&c, 7, 0);
    static uint8_t payload[70000], out[70100], back[70000];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(i * 7);
    size_t lens[] = {0, 1, 5, 125, 126, 4095, 4096, 4097, 65535, 65536, 70000};
    size_t hdrs[] = {6, 6, 6, 6, 8, 8, 8, 8, 8, 14, 14};
    uint8_t prev_mask[4] = {0};
    for (size_t i = 0; i < SQ_ARRAY_LEN(lens); i++) {
        assert_int_equal(sq_ws_frame_len(lens[i]), hdrs[i] + lens[i]);
        uint64_t before = n_allocs, created = w.contexts_created;
        int n = sq_ws_encode_frame(&w, &c, out, sizeof(out), SQ_WS_BINARY, i % 2, payload, lens[i]);
        assert_int_equal(n_allocs, before);
        assert_int_equal(w.contexts_created, created);
        assert_int_equal(n, (int)(hdrs[i] + lens[i]));
        uint8_t op, mask[4];
        bool fin;
        long got = unmask(out, (size_t)n, &op, &fin, back, mask);
        assert_int_equal(got, (long)lens[i]);
        assert_int_equal(op, SQ_WS_BINARY);
        assert_int_equal(fin, i % 2);
        assert_memory_equal(back, payload, lens[i]);
        assert_memory_not_equal(mask, prev_mask, 4); /* a fresh mask per frame */
        memcpy(prev_mask, mask, 4);
    }
    /* Every cap below the frame's size is refused without a write past it. */
    struct guard g;
    guard_init(&g, 256);
    for (size_t cap = 0; cap < 6 + 5; cap++)
        assert_int_equal(
            sq_ws_encode_frame(&w, &c, (uint8_t *)g.end - cap, cap, SQ_WS_TEXT, true, "hello", 5),
            -SQ_ETOOBIG);
    assert_int_equal(
        sq_ws_encode_frame(&w, &c, (uint8_t *)g.end - 11, 11, SQ_WS_TEXT, true, "hello", 5), 11);
    guard_free(&g);
    /* Control frames. */
    assert_int_equal(sq_ws_encode_frame(&w, &c, out, sizeof(out), SQ_WS_PING, true, payload, 126),
                     -EINVAL);
    assert_int_equal(sq_ws_encode_frame(&w, &c, out, sizeof(out), SQ_WS_PING, false, "", 0),
                     -EINVAL);
    assert_int_equal(sq_ws_encode_frame(&w, &c, out, sizeof(out), 3, true, "", 0), -EINVAL);
    int n = sq_ws_encode_close(&w, &c, out, sizeof(out), 1000, S("bye"));
    assert_int_equal(n, 6 + 5);
    uint8_t op, mask[4];
    bool fin;
    assert_int_equal(unmask(out, (size_t)n, &op, &fin, back, mask), 5);
    assert_int_equal(op, SQ_WS_CLOSE);
    assert_memory_equal(back,
                        "\x03\xe8"
                        "bye",
                        5);
    assert_int_equal(sq_ws_encode_close(&w, &c, out, sizeof(out), 0, S("")), 6);
    assert_int_equal(sq_ws_encode_close(&w, &c, out, sizeof(out), 0, S("x")), -EINVAL);
    assert_int_equal(sq_ws_encode_close(&w, &c, out, sizeof(out), 1005, S("")), -EINVAL);

    /* What the client writes, a server-side reader unmasks; this client refuses it masked. */
    n = sq_ws_encode_frame(&w, &c, out, sizeof(out), SQ_WS_TEXT, true, "hi", 2);
    struct sq_ws_conn r;
    sq_ws_conn_init(&r, 1, 0);
    struct log lg = {0};
    assert_int_equal(sq_ws_feed(&w, &r, out, (size_t)n, on_event, &lg), -SQ_EPARSE);
    assert_non_null(strstr(w.why, "masked"));
    sq_ws_conn_dispose(&w, &r);
    sq_ws_conn_dispose(&w, &c);
    sq_ws_ctx_dispose(&w);
}

/* A ping is answered with a pong carrying its payload. */
struct pinger {
    struct sq_ws_ctx *w;
    struct sq_ws_conn *c;
    uint8_t out[64];
    int out_len;
};

static int answer_ping(void *ud, const struct sq_ws_event *ev)
{
    struct pinger *p = ud;
    if (ev->type == SQ_WS_EV_PING)
        p->out_len = sq_ws_encode_frame(p->w, p->c, p->out, sizeof(p->out), SQ_WS_PONG, true,
                                        ev->data, ev->len);
    return 0;
}

static void test_ping_pong(void **state)
{
    (void)state;
    struct sq_ws_ctx w;
    assert_int_equal(sq_ws_ctx_init(&w), 0);
    struct sq_ws_conn c;
    sq_ws_conn_init(&c, 3, 0);
    struct pinger p = {&w, &c, {0}, 0};
    uint8_t in[] = {0x89, 0x04, 't', 'i', 'c', 'k'};
    /* Split inside the payload: the ping is reported once, whole. */
    assert_int_equal(sq_ws_feed(&w, &c, in, 4, answer_ping, &p), 0);
    assert_int_equal(p.out_len, 0);
    assert_int_equal(sq_ws_feed(&w, &c, in + 4, 2, answer_ping, &p), 0);
    assert_int_equal(p.out_len, 10);
    uint8_t op, mask[4], back[8];
    bool fin;
    assert_int_equal(unmask(p.out, 10, &op, &fin, back, mask), 4);
    assert_int_equal(op, SQ_WS_PONG);
    assert_memory_equal(back, "tick", 4);
    sq_ws_conn_dispose(&w, &c);
    sq_ws_ctx_dispose(&w);
}

/* The server's end (squall target): client frames, masked, are unmasked; an unmasked one is
 * refused; what it writes is unmasked and a client reads it. Fed whole and split at every byte. */
static void test_server_end(void **state)
{
    (void)state;
    struct sq_ws_ctx w;
    assert_int_equal(sq_ws_ctx_init(&w), 0);
    struct sq_ws_conn cl, sv;
    sq_ws_conn_init(&cl, 9, 0);
    uint8_t stream[256];
    size_t n = 0;
    int k = sq_ws_encode_frame(&w, &cl, stream, sizeof(stream), SQ_WS_TEXT, false, "hel", 3);
    n += (size_t)k;
    k = sq_ws_encode_frame(&w, &cl, stream + n, sizeof(stream) - n, SQ_WS_PING, true, "p", 1);
    n += (size_t)k;
    k = sq_ws_encode_frame(&w, &cl, stream + n, sizeof(stream) - n, SQ_WS_CONT, true, "lo", 2);
    n += (size_t)k;
    k = sq_ws_encode_close(&w, &cl, stream + n, sizeof(stream) - n, 1000, S(""));
    n += (size_t)k;
    struct log whole = {0};
    for (size_t split = 0; split < n; split++) {
        struct log lg = {0};
        sq_ws_conn_init_server(&sv, 0);
        if (split)
            assert_int_equal(sq_ws_feed(&w, &sv, stream, split, on_event, &lg), 0);
        assert_int_equal(sq_ws_feed(&w, &sv, stream + split, n - split, on_event, &lg), 0);
        if (split == 0)
            whole = lg;
        assert_string_equal(lg.s, whole.s);
        sq_ws_conn_dispose(&w, &sv);
    }
    assert_string_equal(whole.s, "T[helPING(p);lo]5;CLOSE(1000,);");
    /* An unmasked client frame is refused; bytes after the client's close too. */
    sq_ws_conn_init_server(&sv, 0);
    uint8_t plain[] = {0x81, 0x01, 'a'};
    struct log lg = {0};
    assert_int_equal(sq_ws_feed(&w, &sv, plain, sizeof(plain), on_event, &lg), -SQ_EPARSE);
    assert_non_null(strstr(w.why, "unmasked"));
    sq_ws_conn_dispose(&w, &sv);
    /* The server writes unmasked frames a client reads. */
    sq_ws_conn_init_server(&sv, 0);
    assert_int_equal(sq_ws_frame_len_for(&sv, 5), 7);
    assert_int_equal(sq_ws_frame_len_for(&cl, 5), 11);
    uint8_t out[16];
    k = sq_ws_encode_frame(&w, &sv, out, sizeof(out), SQ_WS_TEXT, true, "hello", 5);
    assert_int_equal(k, 7);
    assert_int_equal(out[1], 5); /* no mask bit */
    struct sq_ws_conn rd;
    sq_ws_conn_init(&rd, 1, 0);
    memset(&lg, 0, sizeof(lg));
    assert_int_equal(sq_ws_feed(&w, &rd, out, (size_t)k, on_event, &lg), 0);
    assert_non_null(strstr(lg.s, "hello"));
    sq_ws_conn_dispose(&w, &rd);
    sq_ws_conn_dispose(&w, &sv);
    sq_ws_conn_dispose(&w, &cl);
    sq_ws_ctx_dispose(&w);
}

/* Idle connections hold no wslay context; the pool grows to the peak caught mid-frame and the
 * steady state allocates nothing. */
static void test_pool(void **state)
{
    (void)state;
    struct sq_ws_ctx w;
    assert_int_equal(sq_ws_ctx_init(&w), 0);
    assert_int_equal(w.contexts_created, 0); /* a client's frames need no wslay encoder */
    enum { N = 100 };
    static struct sq_ws_conn conns[N];
    for (int i = 0; i < N; i++)
        sq_ws_conn_init(&conns[i], (uint64_t)i, 0);
    uint8_t frame[] = {0x81, 0x03, 'a', 'b', 'c'};
    struct log lg = {0};
    for (int round = 0; round < 3; round++) {
        uint64_t allocs = n_allocs;
        /* Whole frames: each connection borrows and gives back at once. */
        for (int i = 0; i < N; i++) {
            assert_int_equal(sq_ws_feed(&w, &conns[i], frame, sizeof(frame), NULL, NULL), 0);
            assert_null(conns[i]._fc);
        }
        assert_int_equal(w.contexts_created, round == 0 ? 1 : N);
        /* Every connection caught mid-frame at once. */
        for (int i = 0; i < N; i++)
            assert_int_equal(sq_ws_feed(&w, &conns[i], frame, 3, NULL, NULL), 0);
        for (int i = 0; i < N; i++) {
            assert_non_null(conns[i]._fc);
            assert_int_equal(sq_ws_feed(&w, &conns[i], frame + 3, 2, on_event, &lg), 0);
            assert_null(conns[i]._fc);
        }
        assert_int_equal(w.contexts_created, N);
        if (round > 0)
            CHECK(n_allocs == allocs, "round %d allocated %llu times\n", round,
                  (unsigned long long)(n_allocs - allocs));
    }
    for (int i = 0; i < N; i++)
        sq_ws_conn_dispose(&w, &conns[i]);
    sq_ws_ctx_dispose(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_key), cmocka_unit_test(test_handshake),
        cmocka_unit_test(test_receive),    cmocka_unit_test(test_callback_stops),
        cmocka_unit_test(test_encode),     cmocka_unit_test(test_ping_pong),
        cmocka_unit_test(test_pool),       cmocka_unit_test(test_server_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
