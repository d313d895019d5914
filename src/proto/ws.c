/* proto/ws.c - WebSocket: the client's handshake bytes and checks, frames over wslay's frame API
 * for either end (a client sends masked frames and refuses masked ones; a server the reverse).
 *
 * wslay's frame API pulls bytes through a recv callback into a 4 KiB buffer inside its context
 * and pushes bytes through a send callback. Both callbacks here read and write through the
 * worker's cursor (struct sq_ws_ctx: _in, _out, _conn), so one callback set serves every
 * connection and a context can move between connections.
 *
 * The invariant that makes the pool safe: a connection's wslay context holds no state worth
 * keeping when every byte handed to it has been accounted to a frame header or to payload that
 * was delivered (_given == _used) and no frame is open (!_in_frame). wslay then sits at the start
 * of a frame with an empty buffer, exactly as a new context, and goes back to the pool. Header
 * bytes are accounted from the frame's length and mask bit, which is exact because wslay refuses
 * non-minimal length encodings. A connection idle between messages therefore holds no context.
 *
 * A client's frames are written here (encode_masked: the header, and the payload masked eight
 * bytes at a time); a server's go through one wslay encoder context per worker, made on first use:
 * a send always completes (the caller's buffer is checked first), so its output state is back at
 * the frame start after every call.
 */
#include "proto/ws.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <wslay/wslay.h>

#include "base/b64.h"
#include "base/dynlib.h"
#include "base/sha1.h"
#include "base/str.h"
#include "proto/text.h"

/* wslay is opened by the first frame context made (ctx_new: every context is made there), not
 * linked, so a run without WebSocket does not map it (base/dynlib.h; docs/benchmarks.md round
 * 6). Its four functions go through this table; a context exists only once it is open. */
#define WSLAY_SYMS(X)                                                                              \
    X(wslay_frame_context_free)                                                                    \
    X(wslay_frame_context_init)                                                                    \
    X(wslay_frame_recv)                                                                            \
    X(wslay_frame_send)

static struct {
#define WSLAY_FIELD(sym) __typeof__(sym) *sym;
    WSLAY_SYMS(WSLAY_FIELD)
#undef WSLAY_FIELD
} wslay;

static const struct sq_dynlib_sym wslay_syms[] = {
#define WSLAY_ENTRY(sym) {0, #sym, offsetof(__typeof__(wslay), sym)},
    WSLAY_SYMS(WSLAY_ENTRY)
#undef WSLAY_ENTRY
};

static const char *const wslay_sonames[] = {SQ_SONAME_WSLAY}; /* CMakeLists.txt's */

static struct sq_dynlib wslay_libs = {
    .what = "WebSocket",
    .hint = "scripts/deps.sh installs libwslay1",
    .sonames = wslay_sonames,
    .nlibs = 1,
    .syms = wslay_syms,
    .nsyms = sizeof(wslay_syms) / sizeof(wslay_syms[0]),
    .table = &wslay,
    .table_size = sizeof(wslay),
};

#define wslay_frame_context_free (wslay.wslay_frame_context_free)
#define wslay_frame_context_init (wslay.wslay_frame_context_init)
#define wslay_frame_recv         (wslay.wslay_frame_recv)
#define wslay_frame_send         (wslay.wslay_frame_send)

/* ---- handshake (RFC 6455 section 4) ---- */

void sq_ws_accept_for_key(const char *key, size_t len, char out[SQ_WS_ACCEPT_LEN + 1])
{
    unsigned char in[64 + sizeof(SQ_WS_GUID)];
    uint8_t md[SQ_SHA1_LEN];
    if (len > 64)
        len = 64; /* keys are 24 bytes; a longer one cannot match anyway */
    memcpy(in, key, len);
    memcpy(in + len, SQ_WS_GUID, sizeof(SQ_WS_GUID) - 1);
    sq_sha1(in, len + sizeof(SQ_WS_GUID) - 1, md);
    sq_b64_encode(md, sizeof(md), out);
}

void sq_ws_handshake_init(struct sq_ws_handshake *hs, uint64_t *rng, struct sq_str protocol)
{
    uint8_t raw[16];
    uint64_t a = sq_ws_rand(rng), b = sq_ws_rand(rng);
    memcpy(raw, &a, 8);
    memcpy(raw + 8, &b, 8);
    sq_b64_encode(raw, sizeof(raw), hs->key);
    sq_ws_accept_for_key(hs->key, SQ_WS_KEY_LEN, hs->accept);
    hs->protocol = protocol;
    hs->_seen = 0;
    hs->why = NULL;
}

static bool has_ctl_or_blank(struct sq_str s)
{
    for (size_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.p[i];
        if (c <= 0x20 || c == 0x7f)
            return true;
    }
    return false;
}

int sq_ws_encode_upgrade(char *buf, size_t cap, const struct sq_ws_handshake *hs,
                         struct sq_str host, struct sq_str path, struct sq_str extra)
{
    if (host.len == 0 || path.len == 0 || path.p[0] != '/' || has_ctl_or_blank(host) ||
        has_ctl_or_blank(path))
        return -EINVAL;
    if (extra.len && (extra.len < 2 || memcmp(extra.p + extra.len - 2, "\r\n", 2) != 0))
        return -EINVAL;
    for (size_t i = 0; i < hs->protocol.len; i++)
        if (hs->protocol.p[i] == '\r' || hs->protocol.p[i] == '\n')
            return -EINVAL;
    static const char l1[] = "GET ", l2[] = " HTTP/1.1\r\nHost: ",
                      l3[] = "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             "Sec-WebSocket-Key: ",
                      l4[] = "\r\nSec-WebSocket-Version: 13\r\n", l5[] = "Sec-WebSocket-Protocol: ";
    size_t need = (sizeof(l1) - 1) + path.len + (sizeof(l2) - 1) + host.len + (sizeof(l3) - 1) +
                  SQ_WS_KEY_LEN + (sizeof(l4) - 1) +
                  (hs->protocol.len ? sizeof(l5) - 1 + hs->protocol.len + 2 : 0) + extra.len + 2;
    if (need > cap || need > INT_MAX)
        return -SQ_ETOOBIG;
    char *p = buf;
#define PUT(s, n)                                                                                  \
    do {                                                                                           \
        memcpy(p, (s), (n));                                                                       \
        p += (n);                                                                                  \
    } while (0)
    PUT(l1, sizeof(l1) - 1);
    PUT(path.p, path.len);
    PUT(l2, sizeof(l2) - 1);
    PUT(host.p, host.len);
    PUT(l3, sizeof(l3) - 1);
    PUT(hs->key, SQ_WS_KEY_LEN);
    PUT(l4, sizeof(l4) - 1);
    if (hs->protocol.len) {
        PUT(l5, sizeof(l5) - 1);
        PUT(hs->protocol.p, hs->protocol.len);
        PUT("\r\n", 2);
    }
    if (extra.len)
        PUT(extra.p, extra.len);
    PUT("\r\n", 2);
#undef PUT
    return (int)need;
}

enum { SEEN_UPGRADE = 1, SEEN_CONNECTION = 2, SEEN_ACCEPT = 4, SEEN_PROTOCOL = 8 };

static int hs_fail(struct sq_ws_handshake *hs, const char *why)
{
    hs->why = why;
    return -SQ_EPARSE;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Whether the comma-separated list holds tok (ASCII case ignored when icase). */
static bool list_has(struct sq_str list, struct sq_str tok, bool icase)
{
    size_t i = 0;
    while (i < list.len) {
        while (i < list.len && (is_ows(list.p[i]) || list.p[i] == ','))
            i++;
        size_t s = i;
        while (i < list.len && list.p[i] != ',')
            i++;
        size_t e = i;
        while (e > s && is_ows(list.p[e - 1]))
            e--;
        if (e - s == tok.len && e > s) {
            bool eq = true;
            for (size_t k = 0; k < tok.len && eq; k++) {
                char a = list.p[s + k], b = tok.p[k];
                if (icase) {
                    a = (char)(a >= 'A' && a <= 'Z' ? a + 32 : a);
                    b = (char)(b >= 'A' && b <= 'Z' ? b + 32 : b);
                }
                eq = a == b;
            }
            if (eq)
                return true;
        }
    }
    return false;
}

int sq_ws_handshake_field(struct sq_ws_handshake *hs, struct sq_str name, struct sq_str value)
{
    if (sq_ieq_cstr(name.p, name.len, "upgrade")) {
        if (!sq_ieq_cstr(value.p, value.len, "websocket"))
            return hs_fail(hs, "WebSocket: Upgrade is not websocket");
        hs->_seen |= SEEN_UPGRADE;
    } else if (sq_ieq_cstr(name.p, name.len, "connection")) {
        if (list_has(value, (struct sq_str){"upgrade", 7}, true))
            hs->_seen |= SEEN_CONNECTION;
    } else if (sq_ieq_cstr(name.p, name.len, "sec-websocket-accept")) {
        if (hs->_seen & SEEN_ACCEPT)
            return hs_fail(hs, "WebSocket: Sec-WebSocket-Accept appears twice");
        if (value.len != SQ_WS_ACCEPT_LEN || memcmp(value.p, hs->accept, SQ_WS_ACCEPT_LEN) != 0)
            return hs_fail(hs, "WebSocket: wrong Sec-WebSocket-Accept");
        hs->_seen |= SEEN_ACCEPT;
    } else if (sq_ieq_cstr(name.p, name.len, "sec-websocket-extensions")) {
        if (value.len)
            return hs_fail(hs, "WebSocket: the server chose an extension none was offered");
    } else if (sq_ieq_cstr(name.p, name.len, "sec-websocket-protocol")) {
        if (hs->_seen & SEEN_PROTOCOL)
            return hs_fail(hs, "WebSocket: Sec-WebSocket-Protocol appears twice");
        if (value.len == 0 || memchr(value.p, ',', value.len) ||
            !list_has(hs->protocol, value, false))
            return hs_fail(hs, "WebSocket: the server chose a subprotocol that was not offered");
        hs->_seen |= SEEN_PROTOCOL;
    }
    return 0;
}

int sq_ws_handshake_finish(struct sq_ws_handshake *hs, int status)
{
    if (status != 101)
        return hs_fail(hs, "WebSocket: the upgrade was answered without 101");
    if (!(hs->_seen & SEEN_UPGRADE))
        return hs_fail(hs, "WebSocket: 101 without Upgrade: websocket");
    if (!(hs->_seen & SEEN_CONNECTION))
        return hs_fail(hs, "WebSocket: 101 without Connection: Upgrade");
    if (!(hs->_seen & SEEN_ACCEPT))
        return hs_fail(hs, "WebSocket: 101 without Sec-WebSocket-Accept");
    return 0;
}

/* ---- wslay callbacks: the worker's cursor ---- */

static ssize_t on_recv(uint8_t *buf, size_t len, int flags, void *ud)
{
    (void)flags;
    struct sq_ws_ctx *w = ud;
    size_t n = w->_in_len < len ? w->_in_len : len;
    if (n == 0)
        return 0; /* wslay reads this as WSLAY_ERR_WANT_READ */
    memcpy(buf, w->_in, n);
    w->_in += n;
    w->_in_len -= n;
    w->_conn->_given += n;
    return (ssize_t)n;
}

static ssize_t on_send(const uint8_t *data, size_t len, int flags, void *ud)
{
    (void)flags;
    struct sq_ws_ctx *w = ud;
    size_t n = w->_out_cap - w->_out_len < len ? w->_out_cap - w->_out_len : len;
    if (n == 0)
        return 0;
    memcpy(w->_out + w->_out_len, data, n);
    w->_out_len += n;
    return (ssize_t)n;
}

static int on_genmask(uint8_t *buf, size_t len, void *ud)
{
    struct sq_ws_ctx *w = ud;
    while (len) {
        uint64_t r = sq_ws_rand(&w->_conn->rng);
        size_t n = len < 8 ? len : 8;
        memcpy(buf, &r, n);
        buf += n;
        len -= n;
    }
    return 0;
}

static const struct wslay_frame_callbacks callbacks = {on_send, on_recv, on_genmask};

static struct wslay_frame_context *ctx_new(struct sq_ws_ctx *w)
{
    wslay_frame_context_ptr fc;
    if (sq_dynlib_load(&wslay_libs, NULL, 0) < 0 ||
        wslay_frame_context_init(&fc, &callbacks, w) != 0)
        return NULL;
    w->contexts_created++;
    return fc;
}

static struct wslay_frame_context *pool_get(struct sq_ws_ctx *w)
{
    if (w->_npool)
        return w->_pool[--w->_npool];
    return ctx_new(w);
}

static void pool_put(struct sq_ws_ctx *w, struct wslay_frame_context *fc)
{
    if (w->_npool == w->_pool_cap) {
        size_t cap = w->_pool_cap ? w->_pool_cap * 2 : 16;
        struct wslay_frame_context **p = realloc(w->_pool, cap * sizeof(*p));
        if (!p) {
            wslay_frame_context_free(fc);
            return;
        }
        w->_pool = p;
        w->_pool_cap = cap;
    }
    w->_pool[w->_npool++] = fc;
}

int sq_ws_ctx_init(struct sq_ws_ctx *w)
{
    memset(w, 0, sizeof(*w));
    return 0;
}

void sq_ws_ctx_dispose(struct sq_ws_ctx *w)
{
    if (w->_enc_srv)
        wslay_frame_context_free(w->_enc_srv);
    for (size_t i = 0; i < w->_npool; i++)
        wslay_frame_context_free(w->_pool[i]);
    free(w->_pool);
    memset(w, 0, sizeof(*w));
}

void sq_ws_conn_init(struct sq_ws_conn *c, uint64_t seed, uint64_t max_msg)
{
    memset(c, 0, sizeof(*c));
    c->rng = seed;
    c->max_msg = max_msg ? max_msg : SQ_WS_DEFAULT_MAX_MSG;
}

void sq_ws_conn_init_server(struct sq_ws_conn *c, uint64_t max_msg)
{
    sq_ws_conn_init(c, 0, max_msg);
    c->server = true;
}

void sq_ws_conn_dispose(struct sq_ws_ctx *w, struct sq_ws_conn *c)
{
    if (c->_fc) {
        /* Mid-frame state cannot serve another connection: drop it, the pool refills. */
        if (c->_given == c->_used && !c->_in_frame)
            pool_put(w, c->_fc);
        else
            wslay_frame_context_free(c->_fc);
        c->_fc = NULL;
    }
}

/* ---- receiving ---- */

bool sq_ws_close_code_ok(unsigned code)
{
    if (code >= 3000 && code <= 4999)
        return true;
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014);
}

static inline size_t header_len(uint64_t payload, bool mask)
{
    return 2 + (payload < 126 ? 0 : payload < 65536 ? 2 : 8) + (mask ? 4 : 0);
}

static int ws_fail(struct sq_ws_ctx *w, int rc, const char *why)
{
    w->why = why;
    return rc;
}

/* A frame header just arrived (io describes it): check it against the connection's state. */
static int frame_start(struct sq_ws_ctx *w, struct sq_ws_conn *c, const struct wslay_frame_iocb *io)
{
    if (c->close_received)
        return ws_fail(w, -SQ_EPARSE,
                       c->server ? "WebSocket: a frame after the client's close"
                                 : "WebSocket: a frame after the server's close");
    if (io->mask && !c->server)
        return ws_fail(w, -SQ_EPARSE, "WebSocket: a masked frame from the server");
    if (!io->mask && c->server)
        return ws_fail(w, -SQ_EPARSE, "WebSocket: an unmasked frame from the client");
    if (io->rsv)
        return ws_fail(w, -SQ_EPARSE, "WebSocket: RSV bits set with no extension agreed");
    c->_in_frame = true;
    c->_used += header_len(io->payload_length, io->mask);
    c->_frame_left = io->payload_length;
    c->_frame_op = io->opcode;
    c->_frame_fin = io->fin;
    switch (io->opcode) {
    case SQ_WS_CLOSE:
    case SQ_WS_PING:
    case SQ_WS_PONG:
        c->_ctl_len = 0; /* wslay refused > 125 bytes and FIN clear */
        return 0;
    case SQ_WS_TEXT:
    case SQ_WS_BINARY:
        if (c->_msg_op)
            return ws_fail(w, -SQ_EPARSE, "WebSocket: a new message inside a fragmented one");
        c->_msg_op = io->opcode;
        c->_msg_len = 0;
        c->_msg_first = true;
        break;
    case SQ_WS_CONT:
        if (!c->_msg_op)
            return ws_fail(w, -SQ_EPARSE, "WebSocket: a continuation with no message open");
        break;
    default:
        return ws_fail(w, -SQ_EPARSE, "WebSocket: a reserved opcode");
    }
    if (io->payload_length > c->max_msg - c->_msg_len)
        return ws_fail(w, -SQ_ETOOBIG, "WebSocket: a message over the size cap");
    return 0;
}

/* A whole control frame has been gathered in c->_ctl. */
static int control_done(struct sq_ws_ctx *w, struct sq_ws_conn *c, sq_ws_event_cb cb, void *ud)
{
    struct sq_ws_event ev = {0};
    ev.data = c->_ctl;
    ev.len = c->_ctl_len;
    if (c->_frame_op == SQ_WS_PING) {
        ev.type = SQ_WS_EV_PING;
    } else if (c->_frame_op == SQ_WS_PONG) {
        ev.type = SQ_WS_EV_PONG;
    } else {
        ev.type = SQ_WS_EV_CLOSE;
        if (c->_ctl_len == 1)
            return ws_fail(w, -SQ_EPARSE, "WebSocket: a close frame of one byte");
        if (c->_ctl_len == 0) {
            ev.code = SQ_WS_CLOSE_NO_STATUS;
        } else {
            ev.code = (uint16_t)(c->_ctl[0] << 8 | c->_ctl[1]);
            if (!sq_ws_close_code_ok(ev.code))
                return ws_fail(w, -SQ_EPARSE, "WebSocket: a close code a peer may not send");
            ev.data = c->_ctl + 2;
            ev.len = c->_ctl_len - 2u;
            if (!sq_proto__utf8_ok((const char *)ev.data, ev.len, true))
                return ws_fail(w, -SQ_EPARSE, "WebSocket: a close reason that is not UTF-8");
        }
        c->close_received = true;
    }
    return cb ? cb(ud, &ev) : 0;
}

static const char *after_close(const struct sq_ws_conn *c)
{
    return c->server ? "WebSocket: bytes after the client's close"
                     : "WebSocket: bytes after the server's close";
}

int sq_ws_feed(struct sq_ws_ctx *w, struct sq_ws_conn *c, const void *buf, size_t len,
               sq_ws_event_cb cb, void *ud)
{
    if (len == 0)
        return 0;
    if (c->close_received)
        return ws_fail(w, -SQ_EPARSE, after_close(c));
    if (!c->_fc) {
        c->_fc = pool_get(w);
        if (!c->_fc)
            return ws_fail(w, -ENOMEM, "WebSocket: out of memory");
    }
    w->_in = buf;
    w->_in_len = len;
    w->_conn = c;
    int rc = 0;
    for (;;) {
        struct wslay_frame_iocb io;
        memset(&io, 0, sizeof(io));
        ssize_t r = wslay_frame_recv(c->_fc, &io);
        if (r == WSLAY_ERR_WANT_READ)
            break;
        if (r < 0) {
            rc = ws_fail(w, -SQ_EPARSE,
                         "WebSocket: malformed frame (a control frame over 125 bytes or "
                         "fragmented, a non-minimal or 64-bit-signed length)");
            break;
        }
        if (!c->_in_frame && (rc = frame_start(w, c, &io)) != 0)
            break;
        c->_used += io.data_length;
        c->_frame_left -= io.data_length;
        bool frame_done = c->_frame_left == 0;
        if (c->_frame_op & 8) {
            memcpy(c->_ctl + c->_ctl_len, io.data, io.data_length);
            c->_ctl_len = (uint8_t)(c->_ctl_len + io.data_length);
            if (frame_done) {
                c->_in_frame = false;
                if ((rc = control_done(w, c, cb, ud)) != 0)
                    break;
            }
            continue;
        }
        c->_msg_len += io.data_length;
        struct sq_ws_event ev = {0};
        ev.type = SQ_WS_EV_DATA;
        ev.opcode = c->_msg_op;
        ev.first = c->_msg_first;
        ev.last = frame_done && c->_frame_fin;
        ev.data = io.data;
        ev.len = io.data_length;
        ev.msg_len = c->_msg_len;
        c->_msg_first = false;
        if (frame_done) {
            c->_in_frame = false;
            if (c->_frame_fin)
                c->_msg_op = 0;
        }
        if (cb && (rc = cb(ud, &ev)) != 0)
            break;
    }
    w->_in = NULL;
    w->_in_len = 0;
    w->_conn = NULL;
    if (rc == 0 && c->close_received && c->_given != c->_used)
        rc = ws_fail(w, -SQ_EPARSE, after_close(c));
    if (rc == 0 && c->_given == c->_used && !c->_in_frame) {
        pool_put(w, c->_fc);
        c->_fc = NULL;
    }
    return rc;
}

/* ---- sending ---- */

size_t sq_ws_frame_len(size_t len)
{
    return header_len(len, true) + len;
}

size_t sq_ws_frame_len_for(const struct sq_ws_conn *c, size_t len)
{
    return header_len(len, !c->server) + len;
}

/* A client's frame, written here rather than by wslay: wslay masks byte by byte through a 4 KiB
 * stack copy (655 instructions for a 64-byte message, a quarter of a client's whole cost per
 * message: docs/benchmarks.md); this writes the header (RFC 6455 5.2, the shortest length form)
 * and XORs the payload eight bytes at a time. The mask is one draw of the connection's
 * splitmix64, as wslay's callback drew it. buf has room for need bytes (checked). */
static int encode_masked(struct sq_ws_conn *c, uint8_t *buf, uint8_t opcode, bool fin,
                         const void *payload, size_t len, size_t need)
{
    uint8_t *o = buf;
    *o++ = (uint8_t)((fin ? 0x80 : 0) | opcode);
    if (len < 126) {
        *o++ = (uint8_t)(0x80 | len);
    } else if (len < 65536) {
        *o++ = 0x80 | 126;
        *o++ = (uint8_t)(len >> 8);
        *o++ = (uint8_t)len;
    } else {
        *o++ = 0x80 | 127;
        for (int k = 7; k >= 0; k--)
            *o++ = (uint8_t)((uint64_t)len >> (8 * k));
    }
    uint64_t r = sq_ws_rand(&c->rng);
    uint8_t key[8];
    memcpy(key, &r, 4);
    memcpy(key + 4, &r, 4);
    memcpy(o, key, 4);
    o += 4;
    uint64_t k8;
    memcpy(&k8, key, 8);
    const uint8_t *p = payload;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        v ^= k8;
        memcpy(o + i, &v, 8);
    }
    for (; i < len; i++)
        o[i] = p[i] ^ key[i & 3];
    return (int)need;
}

int sq_ws_encode_frame(struct sq_ws_ctx *w, struct sq_ws_conn *c, uint8_t *buf, size_t cap,
                       uint8_t opcode, bool fin, const void *payload, size_t len)
{
    switch (opcode) {
    case SQ_WS_CONT:
    case SQ_WS_TEXT:
    case SQ_WS_BINARY:
        break;
    case SQ_WS_CLOSE:
    case SQ_WS_PING:
    case SQ_WS_PONG:
        if (!fin || len > SQ_WS_MAX_CONTROL)
            return ws_fail(w, -EINVAL, "WebSocket: a control frame over 125 bytes or not final");
        break;
    default:
        return ws_fail(w, -EINVAL, "WebSocket: a reserved opcode");
    }
    size_t need = sq_ws_frame_len_for(c, len);
    if (need > cap || need > INT_MAX)
        return ws_fail(w, -SQ_ETOOBIG, "WebSocket: the frame does not fit the buffer");
    if (!c->server)
        return encode_masked(c, buf, opcode, fin, payload, len, need);
    /* (wslay 1.1.1 keeps a context's mask flag once a masked frame set it: omask is never
     * cleared. The one encoder context here only ever writes unmasked frames.) */
    struct wslay_frame_context **enc = &w->_enc_srv;
    if (!*enc && !(*enc = ctx_new(w)))
        return ws_fail(w, -ENOMEM, "WebSocket: out of memory");
    /* A send from inside a feed's callback (an echo) leaves the feed's cursor as it was. */
    struct sq_ws_conn *feeding = w->_conn;
    w->_out = buf;
    w->_out_len = 0;
    w->_out_cap = cap;
    w->_conn = c;
    struct wslay_frame_iocb io = {
        .fin = fin,
        .rsv = 0,
        .opcode = opcode,
        .payload_length = len,
        .mask = !c->server,
        .data = payload,
        .data_length = len,
    };
    ssize_t r = wslay_frame_send(*enc, &io);
    size_t wrote = w->_out_len;
    w->_out = NULL;
    w->_out_cap = w->_out_len = 0;
    w->_conn = feeding;
    if (r < 0 || (size_t)r != len || wrote != need) {
        /* Cannot happen with the room checked above; never leave the encoder mid-frame. */
        wslay_frame_context_free(*enc);
        *enc = ctx_new(w);
        return ws_fail(w, -EIO, "WebSocket: wslay did not write the whole frame");
    }
    return (int)need;
}

int sq_ws_encode_close(struct sq_ws_ctx *w, struct sq_ws_conn *c, uint8_t *buf, size_t cap,
                       uint16_t code, struct sq_str reason)
{
    uint8_t body[SQ_WS_MAX_CONTROL];
    if (code == 0) {
        if (reason.len)
            return ws_fail(w, -EINVAL, "WebSocket: a close reason without a code");
        return sq_ws_encode_frame(w, c, buf, cap, SQ_WS_CLOSE, true, NULL, 0);
    }
    if (reason.len > SQ_WS_MAX_CONTROL - 2 || !sq_ws_close_code_ok(code))
        return ws_fail(w, -EINVAL, "WebSocket: a close code or reason the protocol cannot carry");
    body[0] = (uint8_t)(code >> 8);
    body[1] = (uint8_t)code;
    if (reason.len)
        memcpy(body + 2, reason.p, reason.len);
    return sq_ws_encode_frame(w, c, buf, cap, SQ_WS_CLOSE, true, body, 2 + reason.len);
}
