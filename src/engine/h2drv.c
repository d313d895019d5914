/* engine/h2drv.c - HTTP/2 connections for a worker's VUs (see h2drv.h).
 *
 * A connection (struct h2conn) is a shared transport (engine/xport.h: its socket, TLS with ALPN
 * h2, its backoff and its VUs' states as it moves) and an http/h2 client session; its VUs are a
 * contiguous range of w->conns, and each VU's stream is h->st[vu index] (a caller-owned struct
 * sq_h2_stream), so a callback finds its VU by pointer arithmetic and the hot path allocates
 * nothing of ours (nghttp2 allocates 3 blocks per stream).
 *
 * Writes are batched per connection: while the connection is inside its own event (reading and
 * feeding nghttp2, or flushing) a VU that submits only marks it dirty, and the connection
 * writes everything queued with one send() when the event ends. So a read that completes 16
 * streams, whose VUs each start their next request from the completion callback, costs one
 * read() and one send(). A submit from outside (a pacing timer, an arrival, the sweep) writes
 * at once.
 *
 * Completion: the streams that complete in one read() share one clock read, taken right after
 * the read returned (they did complete then, as far as this client can know).
 *
 * VU states mirror the connection (xport.c's sq_engine__mux_*): CONNECTING (or BACKOFF) while it
 * (re)connects, IDLE/ACTIVE/PACING once it is open. After a GOAWAY a connection is "draining": its
 * idle and pacing VUs wait (CONNECTING) and its active ones finish; when no stream is left it is
 * closed and opened again for them.
 *
 * Bodies as over HTTP/1.1: the final head's content-encoding and content-type (http/h2client.c
 * reads them as the fields arrive) decide, per response, whether DATA goes through the VU's
 * decoder, the SSE scanner or a flow step's capture buffer; a plain body with nothing to look at is
 * only counted. A flow step that reads headers (checks, extractors, a cookie jar) asks for the
 * head's fields (want_fields), kept in the VU's head as "name: value" lines. So checks, extractors
 * and cookies see what they see over HTTP/1.1. A body that fails to decode fails its request
 * (`decode`) and resets its stream; the connection goes on.
 */
#include "engine/h2drv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "engine/flow.h"
#include "engine/h1drv.h"
#include "engine/worker.h"
#include "engine/xport.h"
#include "http/decode.h"
#include "http/h2client.h"
#include "http/sse.h"
#include "loop/loop.h"
#include "net/tls.h"

struct h2conn {
    struct sq_engine__mux m; /* the transport and its VUs; m.draining: GOAWAY received */
    struct sq_h2_client cl;  /* valid while `client` */
    int64_t now;             /* inside a read: when it returned (the completion time) */
    bool client;             /* cl is initialised */
    bool dirty;              /* frames queued while busy: write them when the event ends */
    int busy;                /* inside feed or flush */
};

struct sq_engine__h2 {
    struct h2conn *t;
    uint32_t nt;
    uint32_t streams;
    struct sq_h2_stream *st; /* one per VU, same index as w->conns */
};

static void t_on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev);
static bool t_flush(struct h2conn *t);

/* The driver's state of worker w. */
static inline struct sq_engine__h2 *h2_of(const struct sq_engine__worker *w)
{
    return w->proto;
}

static struct h2conn *conn_of(const struct sq_engine__conn *c)
{
    struct sq_engine__h2 *h = h2_of(c->w);
    if (SQ_UNLIKELY(c->lane)) /* a batch's lane: a stream on its VU's connection */
        return &h->t[(c->local - c->w->lane0) / c->w->lanes_per / h->streams];
    return &h->t[c->local / h->streams];
}

static struct sq_engine__conn *vu_of(struct h2conn *t, struct sq_h2_stream *st)
{
    return &t->m.w->conns[st - h2_of(t->m.w)->st];
}

/* Open, no GOAWAY: new streams may start. */
static bool usable(const struct h2conn *t)
{
    return t->m.state == SQ_ENGINE__MX_OPEN && !t->m.draining;
}

/* Writes now, or at the end of the connection's current event. */
static void t_kick(struct h2conn *t)
{
    if (t->busy)
        t->dirty = true;
    else if (t->m.state == SQ_ENGINE__MX_OPEN)
        t_flush(t);
}

/* Closes the socket and the session; no callback runs. */
static void t_teardown(struct h2conn *t)
{
    sq_engine__mux_close(&t->m);
    if (t->client) {
        sq_h2_client_dispose(&t->cl);
        t->client = false;
    }
    t->dirty = false;
}

/* The connection is gone (kind: why, for the streams it carried): every active VU fails with
 * kind, the others stop what they were waiting for, and all ask for a connection again. */
static void t_fail(struct h2conn *t, enum sq_errk kind)
{
    t_teardown(t);
    sq_engine__mux_down(&t->m, kind);
}

/* A drained connection (GOAWAY, no stream left): closed by the server's wish, opened again. */
static void t_recycle(struct h2conn *t)
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

/* ---- stream callbacks (they run inside feed, or inside flush for refused requests) ---- */

/* ---- bodies: decoded, scanned for events, captured for a flow (as h1drv.c does) ---- */

/* The decoded body of the current response, in pieces (h3drv.c's too). */
int sq_engine__mux_deliver(struct sq_engine__conn *c, const char *data, size_t len)
{
    if (c->streaming) {
        struct sq_engine__vux *xv = sq_engine__vux(c);
        if (sq_sse_feed(&xv->sse, data, len) && !xv->first_event_ns)
            xv->first_event_ns = sq_now_ns();
    }
    if (c->fv && c->fv->capture)
        sq_flow_vu_capture(c->fv, data, len);
    return 0;
}

int sq_engine__mux_on_decoded(void *ud, const char *data, size_t len)
{
    struct sq_engine__conn *c = ud;
    /* a decompression bomb must not hold the worker past the run's end (h1drv.c's rule) */
    return sq_engine__h1_decode_over(c) ? -ETIMEDOUT : sq_engine__mux_deliver(c, data, len);
}

/* A body that cannot be decoded (or no memory to try): the request fails, its stream is reset
 * (the driver's close), the VU goes on on the same connection. */
void sq_engine__mux_body_failed(struct sq_engine__conn *c)
{
    sq_engine__vu_fail(c, SQ_ERRK_DECODE);
    sq_engine__vu_replace(c);
}

bool sq_engine__mux_head(struct sq_engine__conn *c, int64_t now, int status, bool want_fields,
                         bool event_stream, uint8_t coding, const char *proto)
{
    if (c->fb_ns == 0)
        c->fb_ns = now;
    if (SQ_UNLIKELY(c->xc != NULL) && !sq_engine__xc_head_done(c, (uint16_t)status)) {
        char line[32];
        int n = snprintf(line, sizeof(line), "%s %d\r\n\r\n", proto, status);
        sq_engine__xc_head(c, (uint16_t)status, line, (size_t)n);
    }
    if (SQ_UNLIKELY(c->fv != NULL) && want_fields)
        sq_flow_vu_fields_done(c->fv);
    c->streaming = event_stream;
    if (SQ_UNLIKELY(coding != SQ_CODING_NONE && coding != SQ_CODING_OTHER)) {
        struct sq_engine__vux *xv = sq_engine__vux(c);
        if ((!xv->dec && sq_decoder_new(0, &xv->dec) < 0) ||
            sq_decoder_reset(xv->dec, (enum sq_coding)coding) < 0) {
            sq_engine__mux_body_failed(c);
            return false;
        }
        c->decoding = true;
    }
    if (c->streaming) {
        sq_sse_init(&sq_engine__vux(c)->sse);
        sq_engine__vux(c)->first_event_ns = 0;
    }
    return true;
}

void sq_engine__mux_field(struct sq_engine__conn *c, int status, const char *name, size_t name_len,
                          const char *value, size_t value_len)
{
    struct sq_flow_vu *v = c->fv;
    if (!v)
        return;
    if (v->follow && sq_redirect_status(status) && name_len == 8 &&
        memcmp(name, "location", 8) == 0)
        sq_flow_vu_location_set(v, value, value_len); /* HTTP/2 and 3 names are lower-case */
    if (v->want_head)
        sq_flow_vu_field(v, name, name_len, value, value_len);
}

/* The final head of c's response is in: what its body goes through. */
static void cb_headers(void *ud, struct sq_h2_stream *st, int status)
{
    struct h2conn *t = ud;
    struct sq_engine__conn *c = vu_of(t, st);
    sq_engine__mux_head(c, sq_loop_now(t->m.w->loop), status, st->want_fields, st->event_stream,
                        st->coding, "HTTP/2");
}

static void cb_field(void *ud, struct sq_h2_stream *st, const char *name, size_t name_len,
                     const char *value, size_t value_len)
{
    sq_engine__mux_field(vu_of(ud, st), st->status, name, name_len, value, value_len);
}

static void cb_data(void *ud, struct sq_h2_stream *st, const char *data, size_t len)
{
    struct h2conn *t = ud;
    struct sq_engine__conn *c = vu_of(t, st);
    c->rd.body.bytes += len;
    if (SQ_UNLIKELY(c->xc != NULL) && c->xc->on)
        sq_engine__xc_body(c, data, len);
    if (SQ_LIKELY(!c->decoding && !c->streaming && !(c->fv && c->fv->capture)))
        return; /* framing only */
    int rc = c->decoding
                 ? sq_decoder_feed(sq_engine__vux(c)->dec, data, len, sq_engine__mux_on_decoded, c)
                 : sq_engine__mux_deliver(c, data, len);
    if (SQ_LIKELY(rc == 0))
        return;
    if (rc == -ETIMEDOUT) {
        /* abandoned at the run's end (on_decoded): the request stays in flight, its stream is
         * reset, and the worker leaves its loop after this batch */
        sq_h2_client_cancel(&t->cl, st, SQ_H2_CANCEL);
        t->dirty = true;
        c->decoding = c->streaming = false;
        return;
    }
    sq_engine__mux_body_failed(c);
}

static void cb_close(void *ud, struct sq_h2_stream *st, uint32_t error_code)
{
    struct h2conn *t = ud;
    struct sq_engine__conn *c = vu_of(t, st);
    if (c->state != CONN_ACTIVE)
        return;
    int64_t now = t->now ? t->now : sq_now_ns();
    if (error_code == SQ_H2_NO_ERROR && st->status) {
        if (SQ_UNLIKELY(c->decoding) && sq_decoder_finish(sq_engine__vux(c)->dec) < 0) {
            sq_engine__mux_body_failed(c); /* the encoded stream was cut short */
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
        return;
    }
    /* reset by the server (any code), or refused after a GOAWAY */
    sq_engine__vu_fail(c, SQ_ERRK_CLOSED);
    sq_engine__vu_replace(c);
}

static void cb_goaway(void *ud, uint32_t error_code, int32_t last_stream_id)
{
    SQ_UNUSED(error_code);
    SQ_UNUSED(last_stream_id);
    struct h2conn *t = ud;
    struct sq_engine__worker *w = t->m.w;
    t->m.draining = true;
    for (uint32_t j = 0; j < t->m.n + t->m.ln; j++) {
        struct sq_engine__conn *c = &w->conns[sq_engine__mux_at(&t->m, j)];
        if (c->state == CONN_IDLE || c->state == CONN_PACING) {
            sq_timer_stop(w->loop, &c->timer); /* a paced VU resumes its cadence afterwards */
            c->state = CONN_CONNECTING;
        }
    }
}

static const struct sq_h2_callbacks callbacks = {
    .on_headers = cb_headers,
    .on_data = cb_data,
    .on_close = cb_close,
    .on_goaway = cb_goaway,
    .on_field = cb_field,
};

/* ---- I/O ---- */

/* Writes what the session has queued. Returns false when the connection failed (it is closed
 * and its VUs dealt with: the caller must not touch t's streams). */
static bool t_flush(struct h2conn *t)
{
    struct sq_engine__worker *w = t->m.w;
    enum sq_errk kind = SQ_ERRK_WRITE;
    bool ok = true, blocked = false;
    t->busy++;
    for (;;) {
        t->dirty = false;
        const char *p;
        size_t len;
        if (sq_h2_client_pending(&t->cl, &p, &len) < 0) {
            ok = false;
            kind = SQ_ERRK_PARSE;
            break;
        }
        if (!len)
            break;
        ssize_t n = sq_engine__xport_write(&t->m.x, p, len, &blocked);
        if (n < 0) {
            if (errno == EPROTO && t->m.x.tls) {
                sq_engine__tls_error(w, sq_tls_conn_error(t->m.x.tls), t->cl.open == 0);
                kind = SQ_ERRK_TLS;
            }
            ok = false;
            break;
        }
        w->c.bytes_sent += (uint64_t)n;
        sq_h2_client_consume(&t->cl, (size_t)n);
        if (blocked)
            break; /* the socket is full */
    }
    t->busy--;
    if (ok && sq_io_modify(w->loop, &t->m.x.io, blocked ? EPOLLIN | EPOLLOUT : EPOLLIN) < 0)
        ok = false;
    if (!ok) {
        t_fail(t, kind);
        return false;
    }
    if (!sq_h2_client_alive(&t->cl)) {
        if (t->m.draining && t->cl.open == 0)
            t_recycle(t); /* the server's GOAWAY, and nothing left to wait for */
        else
            t_fail(t, SQ_ERRK_PARSE); /* our GOAWAY went out: the server broke the protocol */
        return false;
    }
    return true;
}

/* The connection is up (TCP, and TLS when https; ALPN is h2: the only protocol offered): start
 * the session and its VUs. */
static void t_open(struct h2conn *t)
{
    struct sq_engine__worker *w = t->m.w;
    struct sq_h2_opts o = {.max_streams = t->m.n + t->m.ln, .want_body = true};
    if (sq_h2_client_init(&t->cl, &o, &callbacks, t) < 0) {
        sq_engine__connect_error(w, -ENOMEM);
        t_teardown(t);
        sq_engine__mux_retry(&t->m);
        return;
    }
    t->client = true;
    t->busy++;
    sq_engine__mux_open(&t->m, t->m.x.since_ns);
    t->busy--;
    t_flush(t); /* the preface, SETTINGS and the first streams in one write */
}

static void t_read(struct h2conn *t)
{
    struct sq_engine__worker *w = t->m.w;
    struct sq_engine__xport *x = &t->m.x;
    ssize_t n = sq_engine__xport_recv(x, w->rbuf, SQ_ENGINE_RBUF_SIZE);
    if (n > 0) {
        t->now = sq_now_ns();
        t->busy++;
        int rc;
        for (;;) {
            w->c.bytes_received += (uint64_t)n;
            rc = sq_h2_client_feed(&t->cl, w->rbuf, (size_t)n);
            /* TLS: records OpenSSL read ahead would wake no poll */
            if (rc < 0 || !x->tls || !sq_tls_buffered(x->tls) ||
                (n = sq_engine__xport_recv(x, w->rbuf, SQ_ENGINE_RBUF_SIZE)) <= 0)
                break;
        }
        t->busy--;
        t->now = 0;
        if (rc < 0) {
            t_fail(t, SQ_ERRK_PARSE);
            return;
        }
        if (t->m.draining && t->cl.open == 0) {
            t_recycle(t);
            return;
        }
        t_flush(t);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n < 0 && errno == EPROTO && x->tls) { /* an alert, a bad record */
        sq_engine__tls_error(w, sq_tls_conn_error(x->tls), t->cl.open == 0);
        t_fail(t, SQ_ERRK_TLS);
        return;
    }
    t_fail(t, SQ_ERRK_CLOSED); /* end of stream, or a reset */
}

static void t_on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev)
{
    SQ_UNUSED(loop);
    struct h2conn *t = SQ_CONTAINER_OF(io, struct h2conn, m.x.io);
    if (SQ_UNLIKELY(t->m.state == SQ_ENGINE__MX_CONNECTING)) {
        if (sq_engine__mux_step(&t->m) == SQ_ENGINE__XP_READY) /* the connect, the handshake */
            t_open(t);
        return;
    }
    if ((ev & EPOLLOUT) && !t_flush(t))
        return;
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
        t_read(t);
}

/* ---- the driver table (engine/driver.h) ---- */

static void h2_connect(struct sq_engine__conn *c)
{
    sq_engine__mux_join(&conn_of(c)->m, c);
}

static void h2_send(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    struct h2conn *t = conn_of(c);
    c->rd.body.bytes = 0;
    c->rd.head_bytes = 0;
    c->rd.status = 0;
    c->decoding = c->streaming = false;
    if (SQ_UNLIKELY(!usable(t))) {
        sq_engine__vu_fail(c, SQ_ERRK_CLOSED);
        sq_engine__vu_replace(c);
        return;
    }
    struct sq_h2_stream *st = &h2_of(w)->st[c->local];
    st->want_fields = SQ_UNLIKELY(c->fv != NULL) && c->fv->want_head;
    st->want_location = SQ_UNLIKELY(c->fv != NULL) && c->fv->follow;
    if (SQ_UNLIKELY(c->fv != NULL))
        sq_buf_reset(&c->fv->loc);
    if (sq_h2_client_submit(
            &t->cl, sq_engine__vux(c)->h2req ? sq_engine__vux(c)->h2req : w->cfg->h2_request, st) <
        0) {
        /* stream ids ran out (2^30 requests), or no memory: start a fresh connection */
        t->m.draining = true;
        sq_engine__vu_fail(c, SQ_ERRK_WRITE);
        if (t->cl.open == 0 && !t->busy)
            t_recycle(t); /* c waits for the new connection with the others */
        else
            sq_engine__vu_replace(c);
        return;
    }
    c->wdone_ns = c->sent_ns; /* the HEADERS leave with this event's one write */
    t_kick(t);
}

static void h2_close(struct sq_engine__conn *c)
{
    struct h2conn *t = conn_of(c);
    if (c->state == CONN_ACTIVE && t->client) {
        sq_h2_client_cancel(&t->cl, &h2_of(c->w)->st[c->local], SQ_H2_CANCEL);
        t->dirty = true; /* the RST_STREAM leaves with the next write (or the sweep) */
    }
}

static void h2_sweep(struct sq_engine__worker *w, int64_t now)
{
    struct sq_engine__h2 *h = h2_of(w);
    for (uint32_t k = 0; k < h->nt; k++) {
        struct h2conn *t = &h->t[k];
        if (!sq_engine__mux_sweep(&t->m, now) && t->m.state == SQ_ENGINE__MX_OPEN && t->dirty &&
            !t->busy)
            t_flush(t);
    }
}

static void h2_close_all(struct sq_engine__worker *w)
{
    struct sq_engine__h2 *h = h2_of(w);
    for (uint32_t k = 0; h && k < h->nt; k++)
        t_teardown(&h->t[k]);
}

static int h2_init(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global)
{
    struct sq_engine__h2 *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    w->proto = h;
    h->streams = w->cfg->streams ? w->cfg->streams : 1;
    h->nt = nconn;
    h->t = calloc(nconn ? nconn : 1, sizeof(*h->t));
    /* one per VU and per batch lane (worker.h: the lanes follow the pool) */
    uint32_t nst = w->nlanes ? w->lane0 + w->nlanes : w->nconns;
    h->st = calloc(nst ? nst : 1, sizeof(*h->st));
    if (!h->t || !h->st)
        return -ENOMEM;
    /* a plan mixing protocols: its h2 scenarios have their own client (ALPN h2) */
    struct sq_tls_client *tc = w->cfg->tls_h2 ? w->cfg->tls_h2 : w->cfg->tls;
    for (uint32_t k = 0; k < nconn; k++) {
        struct h2conn *t = &h->t[k];
        sq_engine__mux_init(&t->m, w, k * h->streams, h->streams, first_global + k, t_on_io);
        t->m.tc = tc;
        if (w->nlanes) { /* its VUs' batch lanes are streams of it too */
            t->m.lfirst = w->lane0 + k * h->streams * w->lanes_per;
            t->m.ln = h->streams * w->lanes_per;
        }
    }
    return 0;
}

static void h2_dispose(struct sq_engine__worker *w)
{
    struct sq_engine__h2 *h = h2_of(w);
    if (!h)
        return;
    sq_engine__h1_decoders_free(w); /* bodies are decoded as over HTTP/1.1 */
    for (uint32_t k = 0; h->t && k < h->nt; k++)
        if (h->t[k].client)
            sq_h2_client_dispose(&h->t[k].cl);
    free(h->t);
    free(h->st);
    free(h);
    w->proto = NULL;
}

const struct sq_engine__driver sq_engine__h2_driver = {
    .name = "h2",
    .init = h2_init,
    .dispose = h2_dispose,
    .connect = h2_connect,
    .send = h2_send,
    .close = h2_close,
    .sweep = h2_sweep,
    .close_all = h2_close_all,
};
