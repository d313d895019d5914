/* target/wsep.c - /ws (a WebSocket echo) and POST /webhook (see wsep.h).
 *
 * The handler checks the handshake (RFC 6455 4.2.1) and answers 101 with an upgrade
 * (server/server.h): from then on the server core hands the connection's bytes to ws_data, which
 * feeds them to proto/ws.h (the server's end: client frames must be masked) and answers from
 * inside the feed's callback. A connection costs a struct wsc (a few hundred bytes) and borrows
 * a wslay context from its worker's pool only while a frame is partly received; a fragmented
 * message is gathered in its own buffer, freed once echoed.
 */
#include "target/wsep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "proto/stamp.h"
#include "proto/ws.h"

#define MAX_CODE 4999

struct wsworker {
    _Alignas(64) struct sq_ws_ctx ctx;
    uint8_t *obuf;
    size_t ocap;
};

struct sq_target__ws {
    int threads;
    struct sq_target_counters *cnt;
    struct wsworker *w;
};

/* One upgraded connection. */
struct wsc {
    struct sq_target__ws *x;
    struct sq_server_conn *sc;
    int worker;
    bool opened, closing;
    bool ping;         /* ?ping=1 */
    uint16_t close;    /* ?close=CODE (0: none) */
    uint32_t after;    /* ?after=N */
    uint32_t frag;     /* ?frag=N (0: whole) */
    uint32_t echoed;   /* messages echoed so far */
    uint8_t msg_op;    /* the message being gathered */
    struct sq_buf msg; /* a message that did not arrive whole in one read */
    struct sq_ws_conn ws;
    char hdrs[256]; /* the 101's header lines (the server copies them before the call returns) */
};

static void count(struct wsc *k, int i, uint64_t n)
{
    sq_target_counters_add(k->x->cnt, k->worker, i, n);
}

/* ---- frames out ---- */

static int send_frame(struct wsc *k, uint8_t op, bool fin, const void *p, size_t n)
{
    struct wsworker *ww = &k->x->w[k->worker];
    size_t need = sq_ws_frame_len_for(&k->ws, n);
    if (ww->ocap < need) {
        size_t cap = ww->ocap ? ww->ocap : 4096;
        while (cap < need)
            cap *= 2;
        uint8_t *b = realloc(ww->obuf, cap);
        if (!b)
            return -ENOMEM;
        ww->obuf = b;
        ww->ocap = cap;
    }
    int len = sq_ws_encode_frame(&ww->ctx, &k->ws, ww->obuf, ww->ocap, op, fin, p, n);
    if (len < 0)
        return len;
    return sq_server_conn_send(k->sc, ww->obuf, (size_t)len);
}

/* Sends a close with code (0: none) and closes once it left; linger: wait for the client's close
 * (drained, not parsed). */
static void close_with(struct wsc *k, uint16_t code, bool linger)
{
    struct wsworker *ww = &k->x->w[k->worker];
    uint8_t buf[8];
    int n = sq_ws_encode_close(&ww->ctx, &k->ws, buf, sizeof(buf),
                               sq_ws_close_code_ok(code) ? code : 0, (struct sq_str){0});
    if (n > 0 && sq_server_conn_send(k->sc, buf, (size_t)n) < 0)
        linger = false; /* no memory for the close frame: just close */
    sq_server_conn_close(k->sc, linger);
    k->closing = true;
}

static void ping(struct wsc *k)
{
    if (send_frame(k, SQ_WS_PING, true, "squall", 6) == 0)
        count(k, SQ_TARGET_C_WS_PINGS_OUT, 1);
}

/* Echoes one whole message: one frame, or fragments of ?frag bytes; a ping first with ?ping. */
static int echo(struct wsc *k, uint8_t op, const uint8_t *p, size_t n)
{
    if (k->ping)
        ping(k);
    int rc = 0;
    if (k->frag && n > k->frag) {
        for (size_t off = 0; off < n && rc == 0; off += k->frag) {
            size_t len = n - off < k->frag ? n - off : k->frag;
            if (off && k->ping)
                ping(k);
            rc = send_frame(k, off ? SQ_WS_CONT : op, off + len == n, p + off, len);
        }
    } else {
        rc = send_frame(k, op, true, p, n);
    }
    if (rc < 0)
        return rc;
    count(k, SQ_TARGET_C_WS_MSGS_OUT, 1);
    count(k, SQ_TARGET_C_WS_BYTES_OUT, n);
    if (++k->echoed >= k->after && k->close)
        close_with(k, k->close, true);
    return 0;
}

/* ---- frames in ---- */

#define STOP 1 /* from the callback: a close came, the connection is done */

static int on_event(void *ud, const struct sq_ws_event *ev)
{
    struct wsc *k = ud;
    switch (ev->type) {
    case SQ_WS_EV_DATA:
        if (k->closing)
            return 0;
        if (ev->last) {
            count(k, SQ_TARGET_C_WS_MSGS_IN, 1);
            count(k, SQ_TARGET_C_WS_BYTES_IN, ev->msg_len);
        }
        if (ev->first && ev->last) /* whole in this read: echoed straight from it */
            return echo(k, ev->opcode, ev->data, ev->len);
        if (ev->first) {
            sq_buf_reset(&k->msg);
            k->msg_op = ev->opcode;
        }
        if (sq_buf_append(&k->msg, ev->data, ev->len) < 0)
            return -ENOMEM;
        if (!ev->last)
            return 0;
        int rc = echo(k, k->msg_op, (const uint8_t *)k->msg.p, k->msg.len);
        sq_buf_dispose(&k->msg); /* a connection between messages holds no buffer */
        return rc;
    case SQ_WS_EV_PING:
        count(k, SQ_TARGET_C_WS_PINGS_IN, 1);
        return k->closing ? 0 : send_frame(k, SQ_WS_PONG, true, ev->data, ev->len);
    case SQ_WS_EV_PONG:
        count(k, SQ_TARGET_C_WS_PONGS_IN, 1);
        return 0;
    case SQ_WS_EV_CLOSE:
        count(k, SQ_TARGET_C_WS_CLOSES_IN, 1);
        if (!k->closing) /* the client's close: the same code back, then the server closes */
            close_with(k, ev->code == SQ_WS_CLOSE_NO_STATUS ? 0 : ev->code, false);
        else
            sq_server_conn_close(k->sc, false); /* the answer to ours: done */
        return STOP;
    default:
        return 0;
    }
}

static int ws_open(void *ud, struct sq_server_conn *sc)
{
    struct wsc *k = ud;
    k->sc = sc;
    k->opened = true;
    count(k, SQ_TARGET_C_WS_UPGRADES, 1);
    if (k->close && k->after == 0)
        close_with(k, k->close, true);
    return 0;
}

static int ws_data(void *ud, struct sq_server_conn *sc, const char *buf, size_t len)
{
    struct wsc *k = ud;
    k->sc = sc;
    if (k->closing)
        return 0;
    int rc = sq_ws_feed(&k->x->w[k->worker].ctx, &k->ws, buf, len, on_event, k);
    if (rc == STOP || rc == 0 || k->closing)
        return 0;
    if (rc == -ENOMEM)
        return rc;
    /* a frame a client may not send (proto/ws.h says which): 1002, or 1009 for a message over
     * the cap */
    count(k, SQ_TARGET_C_WS_ERRORS, 1);
    close_with(k, rc == -SQ_ETOOBIG ? SQ_WS_CLOSE_TOO_BIG : SQ_WS_CLOSE_PROTOCOL_ERROR, true);
    return 0;
}

static void ws_closed(void *ud)
{
    struct wsc *k = ud;
    if (k->opened)
        count(k, SQ_TARGET_C_WS_ENDED, 1);
    sq_ws_conn_dispose(&k->x->w[k->worker].ctx, &k->ws);
    sq_buf_dispose(&k->msg);
    free(k);
}

static const struct sq_server_upgrade ws_ops = {
    .open = ws_open,
    .data = ws_data,
    .closed = ws_closed,
};

/* ---- the handshake ---- */

static bool ieq(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

/* Whether the comma-separated list v[0, n) holds tok (case ignored). */
static bool has_token(const char *v, size_t n, const char *tok)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (ieq(v + s, e - s, tok))
            return true;
    }
    return false;
}

/* ?name=N in the request-target: 1 found (*out set), 0 absent, -1 not a number in [0, max]. */
static int query_u64(const struct sq_server_req *req, const char *name, uint64_t max, uint64_t *out)
{
    const char *q = memchr(req->path, '?', req->path_len);
    if (!q)
        return 0;
    const char *end = req->path + req->path_len;
    size_t nl = strlen(name);
    for (const char *p = q + 1; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        if ((size_t)(e - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == '=')
            return sq_target_parse_u64(p + nl + 1, (size_t)(e - p - (ptrdiff_t)nl - 1), max, out)
                       ? 1
                       : -1;
        p = e + 1;
    }
    return 0;
}

static void refuse(struct sq_server_resp *resp, int status, const char *why)
{
    resp->status = status;
    resp->content_type = "text/plain";
    resp->body = why;
    resp->body_len = strlen(why);
    if (status == 426)
        resp->headers = "Sec-WebSocket-Version: 13\r\n";
    if (resp->headers)
        resp->headers_len = strlen(resp->headers);
}

void sq_target__ws(struct sq_target__ws *x, const struct sq_server_req *req,
                   struct sq_server_resp *resp)
{
    if (req->h2 || req->minor_version < 1 || !ieq(req->method, req->method_len, "GET")) {
        refuse(resp, 400, "a WebSocket handshake is a GET over HTTP/1.1\n");
        return;
    }
    const struct sq_h1_header *up = sq_server_req_header(req, "Upgrade");
    const struct sq_h1_header *conn = sq_server_req_header(req, "Connection");
    const struct sq_h1_header *ver = sq_server_req_header(req, "Sec-WebSocket-Version");
    const struct sq_h1_header *key = sq_server_req_header(req, "Sec-WebSocket-Key");
    const struct sq_h1_header *proto = sq_server_req_header(req, "Sec-WebSocket-Protocol");
    if (!up || !has_token(up->value, up->value_len, "websocket")) {
        refuse(resp, 426, "/ws speaks WebSocket: send Upgrade: websocket\n");
        return;
    }
    if (!conn || !has_token(conn->value, conn->value_len, "upgrade")) {
        refuse(resp, 400, "Connection must list upgrade\n");
        return;
    }
    if (!ver || !ieq(ver->value, ver->value_len, "13")) {
        refuse(resp, 426, "Sec-WebSocket-Version must be 13\n");
        return;
    }
    if (!key || key->value_len != SQ_WS_KEY_LEN || key->value[22] != '=' || key->value[23] != '=') {
        refuse(resp, 400, "Sec-WebSocket-Key must be 16 bytes in base64\n");
        return;
    }
    uint64_t close = 0, after = 0, ping = 0, frag = 0;
    if (query_u64(req, "close", MAX_CODE, &close) < 0 ||
        (close && !sq_ws_close_code_ok((unsigned)close)) ||
        query_u64(req, "after", UINT32_MAX, &after) < 0 || query_u64(req, "ping", 1, &ping) < 0 ||
        query_u64(req, "frag", 1 << 20, &frag) < 0) {
        refuse(resp, 400,
               "/ws knobs: close=CODE (1000-1003, 1007-1014, 3000-4999), after=N, ping=0|1, "
               "frag=N (bytes, at most 1048576)\n");
        return;
    }
    struct wsc *k = calloc(1, sizeof(*k));
    if (!k) {
        resp->status = 503;
        return;
    }
    k->x = x;
    k->worker = req->worker;
    k->close = (uint16_t)close;
    k->after = (uint32_t)after;
    k->ping = ping != 0;
    k->frag = (uint32_t)frag;
    sq_ws_conn_init_server(&k->ws, 0);
    char accept[SQ_WS_ACCEPT_LEN + 1];
    sq_ws_accept_for_key(key->value, key->value_len, accept);
    int n = snprintf(k->hdrs, sizeof(k->hdrs),
                     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n",
                     accept);
    if (proto && proto->value_len) {
        /* the first subprotocol offered, if it fits */
        size_t e = 0;
        while (e < proto->value_len && proto->value[e] != ',' && proto->value[e] != ' ')
            e++;
        if (e < sizeof(k->hdrs) - (size_t)n - 32)
            n += snprintf(k->hdrs + n, sizeof(k->hdrs) - (size_t)n,
                          "Sec-WebSocket-Protocol: %.*s\r\n", (int)e, proto->value);
    }
    resp->status = 101;
    resp->headers = k->hdrs;
    resp->headers_len = (size_t)n;
    resp->upgrade = &ws_ops;
    resp->upgrade_ud = k;
}

void sq_target__webhook(struct sq_target__ws *x, const struct sq_server_req *req,
                        struct sq_server_resp *resp)
{
    if (!ieq(req->method, req->method_len, "POST")) {
        resp->status = 405;
        resp->headers = "Allow: POST\r\n";
        resp->headers_len = strlen(resp->headers);
        return;
    }
    struct sq_stamp st;
    size_t at, len;
    sq_target_counters_bump(x->cnt, req->worker, SQ_TARGET_C_WEBHOOK_EVENTS);
    sq_target_counters_add(x->cnt, req->worker, SQ_TARGET_C_WEBHOOK_BYTES, req->body_len);
    if (req->body_len && sq_stamp_find(req->body, req->body_len, &st, &at, &len))
        sq_target_counters_bump(x->cnt, req->worker, SQ_TARGET_C_WEBHOOK_STAMPED);
    resp->status = 202;
}

/* ---- lifetime ---- */

int sq_target__ws_new(int threads, struct sq_target_counters *cnt, struct sq_target__ws **out)
{
    struct sq_target__ws *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->threads = threads;
    x->cnt = cnt;
    x->w = aligned_alloc(64, (size_t)threads * sizeof(*x->w));
    if (!x->w) {
        free(x);
        return -ENOMEM;
    }
    memset(x->w, 0, (size_t)threads * sizeof(*x->w));
    for (int i = 0; i < threads; i++) {
        if (sq_ws_ctx_init(&x->w[i].ctx) < 0) {
            sq_target__ws_free(x);
            return -ENOMEM;
        }
    }
    *out = x;
    return 0;
}

void sq_target__ws_free(struct sq_target__ws *x)
{
    if (!x)
        return;
    for (int i = 0; x->w && i < x->threads; i++) {
        sq_ws_ctx_dispose(&x->w[i].ctx);
        free(x->w[i].obuf);
    }
    free(x->w);
    free(x);
}
