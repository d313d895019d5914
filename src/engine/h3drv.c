/* engine/h3drv.c - HTTP/3 connections for a worker's VUs: QUIC (net/quic.h) carrying nghttp3
 * (http/h3client.h), through the driver seam (driver.h) as h2drv.c does for HTTP/2.
 *
 * A connection (struct h3conn) is a shared transport (engine/xport.h's sq_engine__mux: its VUs,
 * their states, its backoff) whose own connect (m.open) makes a connected UDP socket and starts
 * the QUIC handshake; its VUs are a contiguous range of w->conns (and their batch lanes another, as
 * in h2drv.c: a batch's requests are streams of the VU's connection), each VU's or lane's request
 * stream is h->st[its index], so the callbacks find their VU by pointer arithmetic and nothing of
 * ours is allocated per request. Requests are the HTTP/2 ones (cfg->h2_request, or a flow's
 * sq_engine__vux(c)->h2req): the same prepared field array goes to nghttp3.
 *
 * Writes are batched per connection as in h2drv.c: while the connection is inside its own event
 * (a read, a timer) a VU that submits marks it dirty and the event's end writes every packet due
 * (sendmmsg). The QUIC timer (ngtcp2's expiry: retransmissions, delayed ACKs, idle) is one
 * sq_timer per connection, moved after every write.
 *
 * The handshake is the connection's setup: HANDSHAKE from the first Initial until ngtcp2 says the
 * handshake completed, timed as the TLS phase (there is no TCP connect: connecting is 0). A
 * request whose stream the server's stream limit holds back waits (pend) until MAX_STREAMS.
 *
 * 0-RTT (--h3-0rtt): the worker keeps the latest session ticket its connections received
 * (h->ticket, with the server's transport parameters). A connection opened while it holds one
 * resumes: the HTTP/3 session is made (t_open_early) and the first flight held back until the
 * VUs are open (h3_connect right after the mux's connect, else a timer due at once: t_early_go),
 * so the requests waiting for it leave with the Initial as early data (ngtcp2 paces what follows
 * the Initial: a later 0-RTT packet would come after the handshake on loopback); the setup's
 * phases are 0. When the handshake
 * completes, the server accepted the early data or rejected it: then the HTTP/3 session is made
 * again on fresh streams and every request that was out is sent again (pend + retry_pending),
 * still one request each in the accounting.
 */
#include "engine/h3drv.h"

#ifdef SQ_HAVE_H3

#include <errno.h>
#include <nghttp3/nghttp3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "engine/flow.h"
#include "engine/h1drv.h"
#include "engine/h2drv.h"
#include "engine/worker.h"
#include "engine/xport.h"
#include "http/decode.h"
#include "http/h3client.h"
#include "http/sse.h"
#include "loop/loop.h"
#include "net/egress.h"
#include "net/quic.h"

_Static_assert(sizeof(ngtcp2_vec) == sizeof(nghttp3_vec) &&
                   offsetof(ngtcp2_vec, len) == offsetof(nghttp3_vec, len),
               "vec layouts");

struct h3conn {
    struct sq_engine__mux m; /* the VUs; m.x.io is the UDP socket */
    struct sq_quic_conn q;   /* valid while `quic` */
    struct sq_h3_client cl;  /* valid while `client` */
    struct sq_timer timer;   /* ngtcp2's expiry */
    bool quic, client;
    bool opened;      /* the handshake completed inside this event: open the VUs at its end */
    bool early;       /* opened with 0-RTT: the handshake is not yet complete */
    bool early_open;  /* ... and its VUs are still to be opened (at the next event's end) */
    bool confirmed;   /* an early connection's handshake completed inside this event */
    bool dirty;       /* something to write at the end of the event */
    bool more;        /* the server allowed more streams: retry the pending requests */
    int busy;         /* inside an event */
    uint32_t pending; /* VUs whose request waits for a stream */
    int64_t now;      /* inside a read: when it returned */
};

struct sq_engine__h3 {
    struct sq_quic_stats qs; /* the figures of the connections that ended */
    struct h3conn *t;
    uint32_t nt;
    uint32_t streams;
    struct sq_h3_stream *st;      /* one per VU and per batch lane, same index as w->conns */
    bool *pend;                   /* one per VU and lane: its request waits for a stream id */
    struct sq_quic_buf *buf;      /* the worker's packet buffers */
    struct sq_quic_ticket ticket; /* --h3-0rtt: the session the next connection resumes */
};

static const struct sq_quic_app quic_app;
static const struct sq_h3_callbacks h3_callbacks;
static void t_on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev);
static void t_write(struct h3conn *t);

static inline struct sq_engine__h3 *h3_of(const struct sq_engine__worker *w)
{
    return w->proto;
}

static struct h3conn *conn_of(const struct sq_engine__conn *c)
{
    struct sq_engine__h3 *h = h3_of(c->w);
    if (SQ_UNLIKELY(c->lane)) /* a batch's lane: a stream on its VU's connection */
        return &h->t[(c->local - c->w->lane0) / c->w->lanes_per / h->streams];
    return &h->t[c->local / h->streams];
}

static struct sq_engine__conn *vu_of(struct h3conn *t, struct sq_h3_stream *st)
{
    return &t->m.w->conns[st - h3_of(t->m.w)->st];
}

static bool usable(const struct h3conn *t)
{
    return t->m.state == SQ_ENGINE__MX_OPEN && !t->m.draining && t->client;
}

static void t_kick(struct h3conn *t)
{
    if (t->busy)
        t->dirty = true;
    else if (t->quic)
        t_write(t);
}

/* Frees the QUIC connection (sending its CONNECTION_CLOSE when due) and closes the socket. */

/* A completed handshake, full or resumed: counted, and the run's TLS names from the first. */
static void handshake_counted(struct sq_engine__worker *w, struct h3conn *t)
{
    w->c.tls_handshakes++;
    if (sq_quic_conn_resumed(&t->q))
        h3_of(w)->qs.resumed++;
    if (!w->tls_version) {
        w->tls_version = "TLSv1.3";
        w->tls_cipher = sq_quic_conn_cipher(&t->q);
        w->tls_alpn = "h3";
    }
}

static void t_teardown(struct h3conn *t)
{
    struct sq_engine__worker *w = t->m.w;
    struct sq_engine__h3 *h = h3_of(w);
    sq_timer_stop(w->loop, &t->timer);
    if (t->client) {
        sq_h3_client_dispose(&t->cl);
        t->client = false;
    }
    if (t->quic) {
        if (t->q.ticket_new && sq_quic_client_zero_rtt(w->cfg->h3))
            (void)sq_quic_conn_ticket(&t->q, &h->ticket);
        if (t->q.handshake_done) { /* its figures, before they go */
            uint64_t cwnd;
            int64_t srtt;
            sq_quic_conn_stat(&t->q, &cwnd, &srtt);
            h->qs.connections++;
            h->qs.datagrams_sent += t->q.datagrams_sent;
            h->qs.datagrams_received += t->q.datagrams_received;
            h->qs.cwnd_sum += cwnd;
            if (cwnd > h->qs.cwnd_max)
                h->qs.cwnd_max = cwnd;
            if (srtt > h->qs.srtt_max_ns)
                h->qs.srtt_max_ns = srtt;
            h->qs.packets_lost += t->q.packets_lost;
            h->qs.pto_count += t->q.pto_count;
            h->qs.send_calls += t->q.send_calls;
            h->qs.recv_calls += t->q.recv_calls;
            h->qs.gso_sends += t->q.gso_sends;
            h->qs.gso |= t->q.gso_sends > 0;
            if (!h->qs.rcvbuf_min || t->q.rcvbuf < h->qs.rcvbuf_min)
                h->qs.rcvbuf_min = t->q.rcvbuf;
            if (!h->qs.sndbuf_min || t->q.sndbuf < h->qs.sndbuf_min)
                h->qs.sndbuf_min = t->q.sndbuf;
        }
        sq_quic_conn_free(&t->q, h->buf);
        t->quic = false;
    }
    sq_engine__mux_close(&t->m);
    for (uint32_t j = 0; j < t->m.n + t->m.ln; j++) {
        uint32_t i = sq_engine__mux_at(&t->m, j);
        h->st[i].id = -1;
        h->pend[i] = false;
    }
    t->pending = 0;
    t->dirty = t->opened = t->more = t->early = t->early_open = t->confirmed = false;
}

static enum sq_errk kind_of(uint8_t fail)
{
    switch (fail) {
    case SQ_QUIC_HANDSHAKE:
        return SQ_ERRK_QUIC_HANDSHAKE;
    case SQ_QUIC_VERSION:
        return SQ_ERRK_QUIC_VERSION;
    case SQ_QUIC_IDLE:
        return SQ_ERRK_QUIC_IDLE;
    default:
        return SQ_ERRK_QUIC_CLOSED;
    }
}

/* The QUIC connection ended (q.fail says why). Before the handshake completed it is a failed
 * setup (counted once, the VUs wait through a backoff); after, every request out fails with its
 * kind (a connection with none out costs nothing: the server's close is counted as such) and
 * the VUs ask for a connection again. */
static void t_fail(struct h3conn *t)
{
    struct sq_engine__worker *w = t->m.w;
    enum sq_errk kind = kind_of(t->q.fail);
    if (t->m.state != SQ_ENGINE__MX_OPEN) {
        char why[128];
        sq_engine__tls_error(w, sq_quic_conn_why(&t->q, why, sizeof(why)), false);
        sq_engine__conn_error(w, kind == SQ_ERRK_QUIC_VERSION ? kind : SQ_ERRK_QUIC_HANDSHAKE);
        t_teardown(t);
        sq_engine__mux_retry(&t->m);
        return;
    }
    if (t->early && (kind == SQ_ERRK_QUIC_HANDSHAKE || kind == SQ_ERRK_QUIC_VERSION)) {
        /* 0-RTT: the VUs were opened before the handshake, which failed. The failure is the
         * setup's (no request); the requests out on it are lost as `closed`, and the
         * connection backs off as a failed handshake does (not a tight reconnect loop). */
        char why[128];
        sq_engine__tls_error(w, sq_quic_conn_why(&t->q, why, sizeof(why)), false);
        sq_engine__conn_error(w, kind);
        for (uint32_t j = 0; j < t->m.n + t->m.ln; j++) {
            struct sq_engine__conn *c = &w->conns[sq_engine__mux_at(&t->m, j)];
            if (c->state == CONN_ACTIVE) {
                sq_engine__vu_fail(c, SQ_ERRK_CLOSED);
            } else {
                sq_timer_stop(w->loop, &c->timer);
                c->state = CONN_CLOSED; /* waits out the backoff with the rest */
            }
        }
        t_teardown(t);
        sq_engine__mux_retry(&t->m);
        return;
    }
    if (kind == SQ_ERRK_QUIC_CLOSED)
        w->c.conns_closed_by_server++;
    t_teardown(t);
    sq_engine__mux_down(&t->m, kind);
}

/* A drained connection (GOAWAY, nothing left): closed and opened again. */
static void t_recycle(struct h3conn *t)
{
    struct sq_engine__worker *w = t->m.w;
    t_teardown(t);
    w->c.conns_closed_by_server++;
    t->m.backoff = 0;
    if (w->sending) {
        sq_engine__mux_connect(&t->m);
        return;
    }
    sq_engine__mux_waiting(&t->m, CONN_CLOSED);
}

/* ---- requests ---- */

/* Opens c's stream and submits its request: 0, 1 (it waits for the server's stream limit), or
 * -1 (the request failed and c was replaced). */
static int submit(struct h3conn *t, struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__h3 *h = h3_of(w);
    struct sq_h3_stream *st = &h->st[c->local];
    int64_t sid;
    int rc = sq_quic_conn_open_bidi(&t->q, &sid, st);
    if (rc == -EAGAIN) {
        h->pend[c->local] = true;
        t->pending++;
        return 1;
    }
    if (rc < 0 || sq_h3_client_submit(&t->cl, sid,
                                      sq_engine__vux(c)->h2req ? sq_engine__vux(c)->h2req
                                                               : w->cfg->h2_request,
                                      st) < 0) {
        if (rc == 0)
            sq_quic_conn_shutdown(&t->q, sid, SQ_H3_INTERNAL_ERROR);
        sq_engine__vu_fail(c, SQ_ERRK_WRITE);
        sq_engine__vu_replace(c);
        return -1;
    }
    return 0;
}

/* The server allows more streams: the waiting requests go, in VU order. On a connection that
 * takes no new stream (GOAWAY) they fail as `closed` and wait for the next connection. */
static void retry_pending(struct h3conn *t)
{
    struct sq_engine__worker *w = t->m.w;
    struct sq_engine__h3 *h = h3_of(w);
    t->more = false;
    for (uint32_t j = 0; t->pending && j < t->m.n + t->m.ln; j++) {
        uint32_t i = sq_engine__mux_at(&t->m, j);
        if (!h->pend[i])
            continue;
        h->pend[i] = false;
        t->pending--;
        struct sq_engine__conn *c = &w->conns[i];
        if (c->state != CONN_ACTIVE)
            continue;
        if (!usable(t)) {
            sq_engine__vu_fail(c, SQ_ERRK_CLOSED);
            sq_engine__vu_replace(c);
            continue;
        }
        if (submit(t, c) == 1)
            break; /* still no room */
        t->dirty = true;
    }
}

/* ---- bodies and heads: as h2drv.c's (sq_engine__mux_*) ---- */

static void cb_headers(void *ud, struct sq_h3_stream *st, int status)
{
    struct h3conn *t = ud;
    struct sq_engine__conn *c = vu_of(t, st);
    if (c->state != CONN_ACTIVE)
        return;
    sq_engine__mux_head(c, sq_loop_now(t->m.w->loop), status, st->want_fields, st->event_stream,
                        st->coding, "HTTP/3");
}

static void cb_field(void *ud, struct sq_h3_stream *st, const char *name, size_t name_len,
                     const char *value, size_t value_len)
{
    struct sq_engine__conn *c = vu_of(ud, st);
    if (c->state == CONN_ACTIVE)
        sq_engine__mux_field(c, st->status, name, name_len, value, value_len);
}

static void cb_data(void *ud, struct sq_h3_stream *st, const char *data, size_t len)
{
    struct h3conn *t = ud;
    struct sq_engine__conn *c = vu_of(t, st);
    if (c->state != CONN_ACTIVE)
        return;
    c->rd.body.bytes += len;
    if (SQ_UNLIKELY(c->xc != NULL) && c->xc->on)
        sq_engine__xc_body(c, data, len);
    if (SQ_LIKELY(!c->decoding && !c->streaming && !(c->fv && c->fv->capture)))
        return;
    int rc = c->decoding
                 ? sq_decoder_feed(sq_engine__vux(c)->dec, data, len, sq_engine__mux_on_decoded, c)
                 : sq_engine__mux_deliver(c, data, len);
    if (SQ_LIKELY(rc == 0))
        return;
    if (rc == -ETIMEDOUT) { /* abandoned at the run's end: stays in flight, stream cancelled */
        sq_quic_conn_shutdown(&t->q, st->id, SQ_H3_REQUEST_CANCELLED);
        sq_h3_stream_forget(&t->cl, st);
        t->dirty = true;
        c->decoding = c->streaming = false;
        return;
    }
    sq_engine__mux_body_failed(c);
}

static void cb_end(void *ud, struct sq_h3_stream *st)
{
    struct h3conn *t = ud;
    struct sq_engine__conn *c = vu_of(t, st);
    if (c->state != CONN_ACTIVE)
        return;
    int64_t now = t->now ? t->now : sq_now_ns();
    if (SQ_UNLIKELY(c->decoding) && sq_decoder_finish(sq_engine__vux(c)->dec) < 0) {
        sq_engine__mux_body_failed(c);
        return;
    }
    struct sq_h1_reader *rd = &c->rd;
    rd->status = st->status;
    rd->head_bytes = (uint32_t)(st->rx_bytes - rd->body.bytes);
    rd->content_encoding = st->coding;
    sq_engine__vu_complete(c, now);
    if (usable(t))
        sq_engine__vu_next(c, now);
    else
        c->state = CONN_CONNECTING; /* draining: waits for the next connection */
}

static void cb_reset(void *ud, struct sq_h3_stream *st, uint64_t code)
{
    SQ_UNUSED(code);
    struct h3conn *t = ud;
    struct sq_engine__conn *c = vu_of(t, st);
    if (c->state != CONN_ACTIVE)
        return;
    sq_engine__vu_fail(c, SQ_ERRK_QUIC_STREAM_RESET);
    sq_engine__vu_replace(c);
}

static void cb_consumed(void *ud, int64_t sid, size_t n)
{
    struct h3conn *t = ud;
    sq_quic_conn_consumed(&t->q, sid, n);
}

static void cb_shutdown_stream(void *ud, int64_t sid, uint64_t code, bool read)
{
    struct h3conn *t = ud;
    if (read)
        sq_quic_conn_shutdown_read(&t->q, sid, code);
    else
        sq_quic_conn_shutdown_write(&t->q, sid, code);
}

static void cb_goaway(void *ud)
{
    struct h3conn *t = ud;
    struct sq_engine__worker *w = t->m.w;
    t->m.draining = true;
    for (uint32_t j = 0; j < t->m.n + t->m.ln; j++) {
        struct sq_engine__conn *c = &w->conns[sq_engine__mux_at(&t->m, j)];
        if (c->state == CONN_IDLE || c->state == CONN_PACING) {
            sq_timer_stop(w->loop, &c->timer);
            c->state = CONN_CONNECTING;
        }
    }
}

static const struct sq_h3_callbacks h3_callbacks = {
    .on_headers = cb_headers,
    .on_data = cb_data,
    .on_end = cb_end,
    .on_reset = cb_reset,
    .on_field = cb_field,
    .on_consumed = cb_consumed,
    .on_shutdown_stream = cb_shutdown_stream,
    .on_goaway = cb_goaway,
};

/* ---- QUIC's callbacks ---- */

/* The early data was rejected: the connection forgot its streams, so the HTTP/3 session is made
 * again on new ones, and every request that was out waits to be sent again (retry_pending at
 * the event's end). */
static int early_rejected(struct h3conn *t)
{
    struct sq_engine__h3 *h = h3_of(t->m.w);
    sq_h3_client_dispose(&t->cl);
    for (uint32_t i = t->m.first; i < t->m.first + t->m.n; i++) {
        if (h->st[i].id < 0)
            continue;
        h->st[i].id = -1;
        if (!h->pend[i]) {
            h->pend[i] = true;
            t->pending++;
        }
    }
    t->more = true;
    return 0;
}

static int q_handshake(void *ud)
{
    struct h3conn *t = ud;
    if (t->early) {
        t->confirmed = true;
        struct sq_engine__h3 *h = h3_of(t->m.w);
        t->client = false; /* no stream callback reaches the requests while ngtcp2 forgets */
        if (sq_quic_conn_early_accepted(&t->q)) {
            t->client = true;
            h->qs.early_accepted++;
            return 0;
        }
        h->qs.early_rejected++;
        early_rejected(t);
    }
    int64_t ctrl, qenc, qdec;
    if (sq_quic_conn_open_uni(&t->q, &ctrl) < 0 || sq_quic_conn_open_uni(&t->q, &qenc) < 0 ||
        sq_quic_conn_open_uni(&t->q, &qdec) < 0 ||
        sq_h3_client_init(&t->cl, &h3_callbacks, t, ctrl, qenc, qdec) < 0)
        return -1;
    t->client = true;
    t->opened = !t->early;
    return 0;
}

static int q_data(void *ud, int64_t sid, const uint8_t *data, size_t len, bool fin)
{
    struct h3conn *t = ud;
    if (!t->client)
        return -1;
    int64_t n = sq_h3_client_read(&t->cl, sid, data, len, fin);
    if (n < 0)
        return -1;
    sq_quic_conn_consumed(&t->q, sid, (size_t)n);
    return 0;
}

static int q_acked(void *ud, int64_t sid, uint64_t len)
{
    struct h3conn *t = ud;
    return t->client && nghttp3_conn_add_ack_offset(t->cl.conn, sid, len) != 0 ? -1 : 0;
}

static int q_close(void *ud, int64_t sid, bool has, uint64_t code)
{
    struct h3conn *t = ud;
    if (!t->client)
        return 0;
    int rv = nghttp3_conn_close_stream(t->cl.conn, sid, has ? code : NGHTTP3_H3_NO_ERROR);
    return rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND ? -1 : 0;
}

static int q_reset(void *ud, int64_t sid, uint64_t code, bool stop)
{
    SQ_UNUSED(code);
    struct h3conn *t = ud;
    if (!t->client)
        return 0;
    if (stop) {
        nghttp3_conn_shutdown_stream_write(t->cl.conn, sid);
        return 0;
    }
    return nghttp3_conn_shutdown_stream_read(t->cl.conn, sid) != 0 ? -1 : 0;
}

static int q_unblocked(void *ud, int64_t sid)
{
    struct h3conn *t = ud;
    return t->client && nghttp3_conn_unblock_stream(t->cl.conn, sid) != 0 ? -1 : 0;
}

static int q_more(void *ud)
{
    ((struct h3conn *)ud)->more = true;
    return 0;
}

static int q_pull(void *ud, int64_t *sid, bool *fin, ngtcp2_vec *vec, size_t max)
{
    struct h3conn *t = ud;
    *sid = -1;
    *fin = false;
    if (!t->client)
        return 0;
    int f = 0;
    nghttp3_ssize n = nghttp3_conn_writev_stream(t->cl.conn, sid, &f, (nghttp3_vec *)vec, max);
    *fin = f != 0;
    return n < 0 ? -1 : (int)n;
}

static int q_pulled(void *ud, int64_t sid, size_t n)
{
    struct h3conn *t = ud;
    return nghttp3_conn_add_write_offset(t->cl.conn, sid, n) != 0 ? -1 : 0;
}

static void q_blocked(void *ud, int64_t sid, bool shut)
{
    struct h3conn *t = ud;
    if (shut)
        nghttp3_conn_shutdown_stream_write(t->cl.conn, sid);
    else
        nghttp3_conn_block_stream(t->cl.conn, sid);
}

static const struct sq_quic_app quic_app = {
    .handshake_done = q_handshake,
    .stream_data = q_data,
    .acked = q_acked,
    .stream_close = q_close,
    .stream_reset = q_reset,
    .unblocked = q_unblocked,
    .more_streams = q_more,
    .pull = q_pull,
    .pulled = q_pulled,
    .pull_blocked = q_blocked,
};

/* ---- events ---- */

/* Writes what is due and moves the timer. */
static void t_write(struct h3conn *t)
{
    struct sq_engine__worker *w = t->m.w;
    t->dirty = false;
    uint64_t before = t->q.bytes_sent;
    int rc = sq_quic_conn_write(&t->q, h3_of(w)->buf, sq_now_ns());
    w->c.bytes_sent += t->q.bytes_sent - before;
    if (rc < 0) {
        t_fail(t);
        return;
    }
    int64_t due = sq_quic_conn_expiry(&t->q);
    if (due == INT64_MAX)
        sq_timer_stop(w->loop, &t->timer);
    else if (sq_timer_start(w->loop, &t->timer, due) < 0) {
        t->q.fail = SQ_QUIC_ERROR;
        t_fail(t);
    }
}

/* The end of an event: open the VUs after a handshake, retry held requests, recycle a drained
 * connection, write. */
/* 0-RTT: the VUs of a connection opened with early data are opened now, before its handshake
 * completes: their requests go as early data. */
static void t_early_go(struct h3conn *t, int64_t now)
{
    t->early_open = false;
    t->m.x.phase = SQ_ENGINE__XP_OPEN;
    uint8_t backoff = t->m.backoff; /* kept until the handshake completes */
    t->busy++;
    sq_engine__mux_open(&t->m, now);
    t->busy--;
    t->m.backoff = backoff;
}

static void t_end(struct h3conn *t, int64_t now)
{
    struct sq_engine__worker *w = t->m.w;
    if (t->q.ticket_new && sq_quic_client_zero_rtt(w->cfg->h3))
        (void)sq_quic_conn_ticket(&t->q, &h3_of(w)->ticket);
    if (t->early_open) /* a connect from inside the mux (a retry, a recycle) */
        t_early_go(t, now);
    if (t->confirmed) { /* an early connection's handshake: counted, nothing to time */
        t->confirmed = t->early = false;
        t->m.backoff = 0;
        handshake_counted(w, t);
    }
    if (t->opened) {
        t->opened = false;
        t->m.x.tls_ns = now - t->m.x.since_ns; /* the handshake: the setup's TLS phase */
        t->m.x.connect_ns = 0;
        t->m.x.phase = SQ_ENGINE__XP_OPEN;
        handshake_counted(w, t);
        t->busy++;
        sq_engine__mux_open(&t->m, now);
        t->busy--;
    }
    if ((t->more || t->m.draining) && t->pending) {
        t->busy++;
        retry_pending(t);
        t->busy--;
    }
    if (t->m.draining && t->client && t->cl.open == 0 && t->pending == 0) {
        t_recycle(t);
        return;
    }
    t_write(t);
}

static void t_on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev)
{
    SQ_UNUSED(loop);
    SQ_UNUSED(ev);
    struct h3conn *t = SQ_CONTAINER_OF(io, struct h3conn, m.x.io);
    struct sq_engine__worker *w = t->m.w;
    int64_t now = sq_now_ns();
    uint64_t got = t->q.bytes_received;
    t->now = now;
    t->busy++;
    int rc = sq_quic_conn_read(&t->q, h3_of(w)->buf, now);
    t->busy--;
    t->now = 0;
    w->c.bytes_received += t->q.bytes_received - got;
    if (rc < 0) {
        t_fail(t);
        return;
    }
    t_end(t, now);
}

static void t_on_timer(struct sq_loop *loop, struct sq_timer *tm)
{
    SQ_UNUSED(loop);
    struct h3conn *t = SQ_CONTAINER_OF(tm, struct h3conn, timer);
    int64_t now = sq_now_ns();
    t->busy++;
    int rc = sq_quic_conn_timeout(&t->q, now);
    t->busy--;
    if (rc < 0) {
        t_fail(t);
        return;
    }
    t_end(t, now);
}

/* A resumed session: the HTTP/3 session on the streams the remembered transport parameters
 * allow, made before the first flight. The VUs are opened at the end of the connection's next
 * event (a timer due at once: the mux is not ours to move inside m.open), before the handshake
 * completes: their requests go as early data. */
static int t_open_early(struct h3conn *t)
{
    int64_t ctrl, qenc, qdec;
    if (sq_quic_conn_open_uni(&t->q, &ctrl) < 0 || sq_quic_conn_open_uni(&t->q, &qenc) < 0 ||
        sq_quic_conn_open_uni(&t->q, &qdec) < 0 ||
        sq_h3_client_init(&t->cl, &h3_callbacks, t, ctrl, qenc, qdec) < 0)
        return -1;
    t->client = true;
    t->early = t->early_open = true;
    return 0;
}

/* m.open: a UDP socket to the connection's address and the QUIC handshake's first flight. */
static int t_open(struct sq_engine__mux *m)
{
    struct h3conn *t = SQ_CONTAINER_OF(m, struct h3conn, m);
    struct sq_engine__worker *w = m->w;
    struct sq_addr tmp;
    const struct sq_addr *a = sq_engine__xport_addr(w, m->pin, m->global, &tmp);
    if (SQ_UNLIKELY(w->cfg->egress != NULL) &&
        sq_egress_allows(w->cfg->egress, a, SQ_EGRESS_CONNECT) < 0) {
        sq_engine__connect_error(w, -EACCES);
        return -EACCES;
    }
    int64_t now = sq_now_ns();
    struct sq_engine__h3 *h = h3_of(w);
    int rc = sq_quic_conn_open(&t->q, w->cfg->h3, a, &quic_app, t,
                               sq_quic_client_zero_rtt(w->cfg->h3) ? &h->ticket : NULL, now);
    if (rc < 0) {
        sq_engine__connect_error(w, rc);
        return rc;
    }
    if (sq_io_start(w->loop, &m->x.io, t->q.fd, EPOLLIN, t_on_io) < 0) {
        int fd = t->q.fd;
        sq_quic_conn_free(&t->q, NULL);
        close(fd);
        sq_engine__connect_error(w, -ENOMEM);
        return -ENOMEM;
    }
    t->quic = true;
    m->x.phase = SQ_ENGINE__XP_HANDSHAKE;
    m->x.since_ns = now;
    m->x.connect_ns = 0;
    m->x.tls_ns = 0;
    if (t->q.early && t_open_early(t) < 0)
        t->q.early = false; /* no memory for it: the HTTP/3 session waits for the handshake */
    if (t->early_open) {
        /* 0-RTT: the first flight waits for the VUs' requests (h3_connect right after this
         * returns, else this timer): ngtcp2 paces what follows the Initial, and on loopback the
         * handshake would complete before a later 0-RTT packet could leave */
        if (sq_timer_start(w->loop, &t->timer, now) == 0)
            return 0;
        t->early_open = false;
    }
    t_write(t); /* the Initial */
    return t->quic ? 0 : -EPROTO;
}

/* ---- the driver table ---- */

static void h3_connect(struct sq_engine__conn *c)
{
    struct h3conn *t = conn_of(c);
    sq_engine__mux_join(&t->m, c);
    if (t->early_open && t->m.state == SQ_ENGINE__MX_CONNECTING) {
        /* the join connected with 0-RTT: the VUs open now, and what they send leaves at once */
        t_early_go(t, sq_now_ns());
        t_kick(t);
    }
}

static void h3_send(struct sq_engine__conn *c)
{
    struct h3conn *t = conn_of(c);
    c->rd.body.bytes = 0;
    c->rd.head_bytes = 0;
    c->rd.status = 0;
    c->decoding = c->streaming = false;
    if (SQ_UNLIKELY(!usable(t))) {
        sq_engine__vu_fail(c, SQ_ERRK_CLOSED);
        sq_engine__vu_replace(c);
        return;
    }
    struct sq_h3_stream *st = &h3_of(c->w)->st[c->local];
    st->want_fields = SQ_UNLIKELY(c->fv != NULL) && c->fv->want_head;
    st->want_location = SQ_UNLIKELY(c->fv != NULL) && c->fv->follow;
    if (SQ_UNLIKELY(c->fv != NULL))
        sq_buf_reset(&c->fv->loc);
    if (submit(t, c) < 0)
        return;
    c->wdone_ns = c->sent_ns;
    t_kick(t);
}

static void h3_close(struct sq_engine__conn *c)
{
    struct h3conn *t = conn_of(c);
    struct sq_engine__h3 *h = h3_of(c->w);
    if (c->state != CONN_ACTIVE)
        return;
    if (h->pend[c->local]) {
        h->pend[c->local] = false;
        t->pending--;
        return;
    }
    struct sq_h3_stream *st = &h->st[c->local];
    if (st->id >= 0 && t->client) {
        sq_quic_conn_shutdown(&t->q, st->id, SQ_H3_REQUEST_CANCELLED);
        sq_h3_stream_forget(&t->cl, st);
        t->dirty = true;
    }
}

static void h3_sweep(struct sq_engine__worker *w, int64_t now)
{
    struct sq_engine__h3 *h = h3_of(w);
    for (uint32_t k = 0; k < h->nt; k++) {
        struct h3conn *t = &h->t[k];
        if (t->m.state == SQ_ENGINE__MX_CONNECTING && t->quic &&
            now - t->m.x.since_ns >= w->cfg->connect_timeout_ns) {
            sq_engine__tls_error(w, "QUIC handshake timed out", false);
            t->q.fail = SQ_QUIC_HANDSHAKE;
            t_fail(t);
            continue;
        }
        if (t->m.state == SQ_ENGINE__MX_OPEN && t->dirty && !t->busy && t->quic)
            t_write(t);
    }
}

static void h3_close_all(struct sq_engine__worker *w)
{
    struct sq_engine__h3 *h = h3_of(w);
    for (uint32_t k = 0; h && k < h->nt; k++)
        t_teardown(&h->t[k]);
}

static int h3_init(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global)
{
    struct sq_engine__h3 *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    w->proto = h;
    h->streams = w->cfg->streams ? w->cfg->streams : 1;
    h->nt = nconn;
    h->t = calloc(nconn ? nconn : 1, sizeof(*h->t));
    /* one per VU and per batch lane (worker.h: the lanes follow the pool) */
    uint32_t nst = w->nlanes ? w->lane0 + w->nlanes : w->nconns;
    h->st = calloc(nst ? nst : 1, sizeof(*h->st));
    h->pend = calloc(nst ? nst : 1, sizeof(*h->pend));
    h->buf = malloc(sizeof(*h->buf));
    if (!h->t || !h->st || !h->pend || !h->buf)
        return -ENOMEM;
    for (uint32_t i = 0; i < nst; i++)
        h->st[i].id = -1;
    for (uint32_t k = 0; k < nconn; k++) {
        struct h3conn *t = &h->t[k];
        sq_engine__mux_init(&t->m, w, k * h->streams, h->streams, first_global + k, t_on_io);
        t->m.open = t_open;
        sq_timer_init(&t->timer, t_on_timer);
        if (w->nlanes) { /* its VUs' batch lanes are streams of it too (as over HTTP/2) */
            t->m.lfirst = w->lane0 + k * h->streams * w->lanes_per;
            t->m.ln = h->streams * w->lanes_per;
        }
    }
    return 0;
}

static void h3_dispose(struct sq_engine__worker *w)
{
    struct sq_engine__h3 *h = h3_of(w);
    if (!h)
        return;
    sq_engine__h1_decoders_free(w);
    for (uint32_t k = 0; h->t && k < h->nt; k++) {
        if (h->t[k].client)
            sq_h3_client_dispose(&h->t[k].cl);
        if (h->t[k].quic)
            sq_quic_conn_free(&h->t[k].q, NULL);
    }
    free(h->t);
    free(h->st);
    free(h->pend);
    free(h->buf);
    sq_quic_ticket_dispose(&h->ticket);
    free(h);
    w->proto = NULL;
}

/* The QUIC figures into the run's result (after close_all: every connection's are in). */
static int h3_result(struct sq_engine__worker *w, struct sq_result *out)
{
    struct sq_quic_stats s = h3_of(w)->qs;
    s.batch = (uint8_t)sq_quic_client_batch(w->cfg->h3);
    s.buf_asked = SQ_QUIC_SOCK_BUF;
    sq_result_quic_add(&out->quic, &s);
    return 0;
}

const struct sq_engine__driver sq_engine__h3_driver = {
    .name = "h3",
    .init = h3_init,
    .dispose = h3_dispose,
    .connect = h3_connect,
    .send = h3_send,
    .close = h3_close,
    .sweep = h3_sweep,
    .close_all = h3_close_all,
    .result = h3_result,
};

#endif
