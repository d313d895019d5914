/* engine/h2drv.c - HTTP/2 connections for a worker's VUs (see h2drv.h).
 *
 * A connection (struct h2conn) owns its socket, an http/h2 client session and a backoff timer;
 * its VUs are a contiguous range of w->conns, and each VU's stream is h->st[vu index] (a
 * caller-owned struct sq_h2_stream), so a callback finds its VU by pointer arithmetic and the
 * hot path allocates nothing of ours (nghttp2 allocates 3 blocks per stream).
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
 * VU states mirror the connection: CONNECTING (or BACKOFF) while it (re)connects, IDLE/ACTIVE/
 * PACING once it is open. After a GOAWAY a connection is "draining": its idle and pacing VUs
 * wait (CONNECTING) and its active ones finish; when no stream is left it is closed and opened
 * again for them.
 *
 * Bodies as over HTTP/1.1: the final head's content-encoding and content-type (http/h2.c reads
 * them as the fields arrive) decide, per response, whether DATA goes through the VU's decoder,
 * the SSE scanner or a flow step's capture buffer; a plain body with nothing to look at is only
 * counted. A flow step that reads headers (checks, extractors, a cookie jar) asks for the head's
 * fields (want_fields), kept in the VU's head as "name: value" lines. So checks, extractors and
 * cookies see what they see over HTTP/1.1. A body that fails to decode fails its request
 * (`decode`) and resets its stream; the connection goes on.
 */
#include "engine/h2drv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "engine/flow.h"
#include "engine/worker.h"
#include "http/decode.h"
#include "http/h2client.h"
#include "http/sse.h"
#include "loop/loop.h"
#include "net/egress.h"
#include "net/sock.h"
#include "net/tls.h"

#define BACKOFF_MIN_NS    (10 * SQ_NS_PER_MS)
#define BACKOFF_MAX_SHIFT 7

enum { T_CLOSED, T_BACKOFF, T_CONNECTING, T_HANDSHAKE, T_OPEN };

struct h2conn {
    struct sq_io io; /* fd -1 when closed */
    struct sq_engine__worker *w;
    struct sq_tls_conn *tls; /* https (ALPN h2), from the handshake on; NULL otherwise */
    struct sq_h2_client cl;  /* valid while `client` */
    struct sq_timer timer;   /* reconnect backoff */
    int64_t since_ns;        /* CONNECTING, HANDSHAKE: when that phase started */
    int64_t connect_ns;      /* the TCP connect's duration (for the phases) */
    int64_t now;             /* inside a read: when it returned (the completion time) */
    uint32_t first, n;       /* its VUs: w->conns[first, first + n) */
    uint32_t global;         /* connection number in the run: picks the address */
    uint8_t state;
    uint8_t backoff;
    bool client;   /* cl is initialised */
    bool draining; /* GOAWAY received */
    bool dirty;    /* frames queued while busy: write them when the event ends */
    int busy;      /* inside feed or flush */
};

struct sq_engine__h2 {
    struct h2conn *t;
    uint32_t nt;
    uint32_t streams;
    struct sq_h2_stream *st; /* one per VU, same index as w->conns */
};

static void t_on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev);
static bool t_flush(struct h2conn *t);

/* read() and send() on the connection, plain or TLS: -1 with errno (EPROTO: a TLS failure whose
 * message sq_tls_conn_error holds). A TLS write takes all of p or nothing (EAGAIN); the session
 * hands the same bytes first again next time, as sq_tls_write asks. */
static ssize_t t_recv(struct h2conn *t, char *buf, size_t n)
{
    if (!t->tls)
        return read(t->io.fd, buf, n);
    ssize_t r = sq_tls_read(t->tls, buf, n);
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

static ssize_t t_send(struct h2conn *t, const char *p, size_t n)
{
    if (!t->tls)
        return send(t->io.fd, p, n, MSG_NOSIGNAL);
    ssize_t r = sq_tls_write(t->tls, p, n);
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

/* The driver's state of worker w. */
static inline struct sq_engine__h2 *h2_of(const struct sq_engine__worker *w)
{
    return w->proto;
}

static struct h2conn *conn_of(const struct sq_engine__conn *c)
{
    struct sq_engine__h2 *h = h2_of(c->w);
    return &h->t[c->local / h->streams];
}

static struct sq_engine__conn *vu_of(struct h2conn *t, struct sq_h2_stream *st)
{
    return &t->w->conns[st - h2_of(t->w)->st];
}

/* Open, no GOAWAY: new streams may start. */
static bool usable(const struct h2conn *t)
{
    return t->state == T_OPEN && !t->draining;
}

/* Writes now, or at the end of the connection's current event. */
static void t_kick(struct h2conn *t)
{
    if (t->busy)
        t->dirty = true;
    else if (t->state == T_OPEN)
        t_flush(t);
}

/* Closes the socket and the session; no callback runs. */
static void t_teardown(struct h2conn *t)
{
    struct sq_engine__worker *w = t->w;
    sq_timer_stop(w->loop, &t->timer);
    if (t->io.fd >= 0) {
        sq_io_stop(w->loop, &t->io);
        if (t->tls) {
            sq_tls_conn_free(t->tls);
            t->tls = NULL;
        }
        close(t->io.fd);
        t->io.fd = -1;
    }
    if (t->client) {
        sq_h2_client_dispose(&t->cl);
        t->client = false;
    }
    t->state = T_CLOSED;
    t->draining = t->dirty = false;
}

/* The connection is gone (kind: why, for the streams it carried): every active VU fails with
 * kind, the others stop what they were waiting for, and all ask for a connection again. */
static void t_fail(struct h2conn *t, enum sq_errk kind)
{
    struct sq_engine__worker *w = t->w;
    t_teardown(t);
    if (kind == SQ_ERRK_CLOSED)
        w->c.conns_closed_by_server++;
    for (uint32_t i = t->first; i < t->first + t->n; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        if (c->state == CONN_ACTIVE) {
            sq_engine__vu_fail(c, kind);
        } else {
            sq_timer_stop(w->loop, &c->timer);
            c->state = CONN_CLOSED;
        }
    }
    for (uint32_t i = t->first; i < t->first + t->n; i++)
        if (w->conns[i].state == CONN_CLOSED)
            sq_engine__vu_replace(&w->conns[i]);
}

/* The VUs of t that wait for it to (re)connect. */
static bool waiting(const struct sq_engine__conn *c)
{
    return c->state == CONN_CONNECTING || c->state == CONN_BACKOFF || c->state == CONN_CLOSED;
}

static void t_connect(struct h2conn *t);

static void t_connect_failed(struct h2conn *t, int err)
{
    struct sq_engine__worker *w = t->w;
    if (err) /* 0: a handshake failure, counted as such by the caller */
        sq_engine__connect_error(w, err);
    t_teardown(t);
    uint8_t vs = CONN_CLOSED;
    if (w->sending) {
        int64_t delay = BACKOFF_MIN_NS << t->backoff;
        if (t->backoff < BACKOFF_MAX_SHIFT)
            t->backoff++;
        if (sq_timer_start(w->loop, &t->timer, sq_loop_now(w->loop) + delay) == 0) {
            t->state = T_BACKOFF;
            vs = CONN_BACKOFF;
        }
    }
    for (uint32_t i = t->first; i < t->first + t->n; i++)
        if (waiting(&w->conns[i]))
            w->conns[i].state = vs;
}

static void t_connect(struct h2conn *t)
{
    struct sq_engine__worker *w = t->w;
    const struct sq_addr *a = &w->cfg->addrs[t->global % (uint32_t)w->cfg->naddrs];
    struct sq_addr fresh;
    if (w->cfg->dns_ttl_ns > 0) {
        sq_engine__addrs_load(&w->run->addrs, t->global, &fresh);
        a = &fresh;
    }
    if (SQ_UNLIKELY(w->cfg->egress != NULL) &&
        sq_egress_allows(w->cfg->egress, a, SQ_EGRESS_CONNECT) < 0) {
        t_connect_failed(t, -EACCES); /* the run's egress policy (net/egress.h) */
        return;
    }
    int fd = sq_connect_start(a);
    if (fd < 0) {
        t_connect_failed(t, fd);
        return;
    }
    int rc = sq_io_start(w->loop, &t->io, fd, EPOLLOUT, t_on_io);
    if (rc < 0) {
        close(fd);
        t_connect_failed(t, rc);
        return;
    }
    t->state = T_CONNECTING;
    t->since_ns = sq_loop_now(w->loop);
    for (uint32_t i = t->first; i < t->first + t->n; i++)
        if (waiting(&w->conns[i]))
            w->conns[i].state = CONN_CONNECTING;
}

static void t_on_backoff(struct sq_loop *loop, struct sq_timer *tm)
{
    SQ_UNUSED(loop);
    struct h2conn *t = SQ_CONTAINER_OF(tm, struct h2conn, timer);
    t->state = T_CLOSED;
    if (t->w->sending) {
        t_connect(t);
        return;
    }
    for (uint32_t i = t->first; i < t->first + t->n; i++)
        if (waiting(&t->w->conns[i]))
            t->w->conns[i].state = CONN_CLOSED;
}

/* A drained connection (GOAWAY, no stream left): closed by the server's wish, opened again. */
static void t_recycle(struct h2conn *t)
{
    struct sq_engine__worker *w = t->w;
    t_teardown(t);
    w->c.conns_closed_by_server++;
    t->backoff = 0;
    if (w->sending) {
        t_connect(t);
        return;
    }
    for (uint32_t i = t->first; i < t->first + t->n; i++)
        if (waiting(&w->conns[i]))
            w->conns[i].state = CONN_CLOSED;
}

/* ---- stream callbacks (they run inside feed, or inside flush for refused requests) ---- */

/* ---- bodies: decoded, scanned for events, captured for a flow (as h1drv.c does) ---- */

/* Past this much decoded, each piece checks the clock: a decompression bomb must not hold the
 * worker past the run's end (h1drv.c has the same rule). */
#define DECODE_CHECK_AFTER (64 * 1024)

/* The decoded body of the current response, in pieces. */
static int deliver(struct sq_engine__conn *c, const char *data, size_t len)
{
    if (c->streaming && sq_sse_feed(&c->sse, data, len) && !c->first_event_ns)
        c->first_event_ns = sq_now_ns();
    if (c->fv && c->fv->capture)
        sq_flow_vu_capture(c->fv, data, len);
    return 0;
}

static int on_decoded(void *ud, const char *data, size_t len)
{
    struct sq_engine__conn *c = ud;
    if (SQ_UNLIKELY(sq_decoder_total(c->dec) >= DECODE_CHECK_AFTER || c->w->over) &&
        sq_engine__past_end(c->w))
        return -ETIMEDOUT;
    return deliver(c, data, len);
}

/* A body that cannot be decoded (or no memory to try): the request fails, its stream is reset
 * (h2_close), the VU goes on on the same connection. */
static void body_failed(struct sq_engine__conn *c)
{
    sq_engine__vu_fail(c, SQ_ERRK_DECODE);
    sq_engine__vu_replace(c);
}

/* The final head of c's response is in: what its body goes through. */
static void cb_headers(void *ud, struct sq_h2_stream *st, int status)
{
    struct h2conn *t = ud;
    struct sq_engine__conn *c = vu_of(t, st);
    if (c->fb_ns == 0)
        c->fb_ns = sq_loop_now(t->w->loop);
    if (SQ_UNLIKELY(c->xc != NULL) && !sq_engine__xc_head_done(c, (uint16_t)status)) {
        char line[32];
        int n = snprintf(line, sizeof(line), "HTTP/2 %d\r\n\r\n", status);
        sq_engine__xc_head(c, (uint16_t)status, line, (size_t)n);
    }
    if (SQ_UNLIKELY(c->fv != NULL) && st->want_fields)
        sq_flow_vu_fields_done(c->fv);
    c->streaming = st->event_stream;
    if (SQ_UNLIKELY(st->coding != SQ_CODING_NONE && st->coding != SQ_CODING_OTHER)) {
        if ((!c->dec && sq_decoder_new(0, &c->dec) < 0) ||
            sq_decoder_reset(c->dec, (enum sq_coding)st->coding) < 0) {
            body_failed(c);
            return;
        }
        c->decoding = true;
    }
    if (c->streaming) {
        sq_sse_init(&c->sse);
        c->first_event_ns = 0;
    }
}

static void cb_field(void *ud, struct sq_h2_stream *st, const char *name, size_t name_len,
                     const char *value, size_t value_len)
{
    struct sq_engine__conn *c = vu_of(ud, st);
    if (c->fv)
        sq_flow_vu_field(c->fv, name, name_len, value, value_len);
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
    int rc =
        c->decoding ? sq_decoder_feed(c->dec, data, len, on_decoded, c) : deliver(c, data, len);
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
    body_failed(c);
}

static void cb_close(void *ud, struct sq_h2_stream *st, uint32_t error_code)
{
    struct h2conn *t = ud;
    struct sq_engine__conn *c = vu_of(t, st);
    if (c->state != CONN_ACTIVE)
        return;
    int64_t now = t->now ? t->now : sq_now_ns();
    if (error_code == SQ_H2_NO_ERROR && st->status) {
        if (SQ_UNLIKELY(c->decoding) && sq_decoder_finish(c->dec) < 0) {
            body_failed(c); /* the encoded stream was cut short */
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
    struct sq_engine__worker *w = t->w;
    t->draining = true;
    for (uint32_t i = t->first; i < t->first + t->n; i++) {
        struct sq_engine__conn *c = &w->conns[i];
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
    struct sq_engine__worker *w = t->w;
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
        ssize_t n = t_send(t, p, len);
        if (n > 0) {
            w->c.bytes_sent += (uint64_t)n;
            sq_h2_client_consume(&t->cl, (size_t)n);
            if ((size_t)n < len) {
                blocked = true; /* the socket is full */
                break;
            }
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            blocked = true;
            break;
        }
        if (n < 0 && errno == EPROTO && t->tls) {
            sq_engine__tls_error(w, sq_tls_conn_error(t->tls), t->cl.open == 0);
            kind = SQ_ERRK_TLS;
        }
        ok = false;
        break;
    }
    t->busy--;
    if (ok && sq_io_modify(w->loop, &t->io, blocked ? EPOLLIN | EPOLLOUT : EPOLLIN) < 0)
        ok = false;
    if (!ok) {
        t_fail(t, kind);
        return false;
    }
    if (!sq_h2_client_alive(&t->cl)) {
        if (t->draining && t->cl.open == 0)
            t_recycle(t); /* the server's GOAWAY, and nothing left to wait for */
        else
            t_fail(t, SQ_ERRK_PARSE); /* our GOAWAY went out: the server broke the protocol */
        return false;
    }
    return true;
}

/* The connection is up (TCP, and TLS when https): start the session and its VUs. */
static void t_open(struct h2conn *t, int64_t now, int64_t tls_ns)
{
    struct sq_engine__worker *w = t->w;
    w->c.conns_opened++;
    t->backoff = 0;
    struct sq_h2_opts o = {.max_streams = t->n, .want_body = true};
    if (sq_h2_client_init(&t->cl, &o, &callbacks, t) < 0) {
        t_connect_failed(t, -ENOMEM);
        return;
    }
    t->client = true;
    t->state = T_OPEN;
    t->draining = false;
    bool first = true;
    t->busy++;
    for (uint32_t i = t->first; i < t->first + t->n; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        if (c->state != CONN_CONNECTING && c->state != CONN_BACKOFF)
            continue;
        c->state = CONN_IDLE;
        c->fresh = first; /* the setup lands on one request of the connection, not on each */
        first = false;
        c->connect_ns = t->connect_ns;
        c->tls_ns = tls_ns;
        sq_engine__vu_next(c, now);
    }
    t->busy--;
    if (sq_io_modify(w->loop, &t->io, EPOLLIN) < 0) {
        t_fail(t, SQ_ERRK_WRITE);
        return;
    }
    t_flush(t); /* the preface, SETTINGS and the first streams in one write */
}

/* A handshake that failed or timed out: one `tls` error (no request lost), then the same backoff
 * as a failed connect. */
static void t_tls_failed(struct h2conn *t, const char *msg)
{
    struct sq_engine__worker *w = t->w;
    sq_engine__tls_error(w, msg, true);
    t_connect_failed(t, 0);
}

static void t_handshake(struct h2conn *t)
{
    struct sq_engine__worker *w = t->w;
    int rc = sq_tls_handshake(t->tls);
    if (rc == -EAGAIN) {
        if (sq_io_modify(w->loop, &t->io, sq_tls_want_write(t->tls) ? EPOLLOUT : EPOLLIN) < 0)
            t_tls_failed(t, "epoll_ctl failed");
        return;
    }
    if (rc < 0) {
        t_tls_failed(t, sq_tls_conn_error(t->tls));
        return;
    }
    int64_t now = sq_now_ns();
    sq_engine__tls_done(w, t->tls); /* ALPN is h2: it was the only protocol offered */
    t_open(t, now, now - t->since_ns);
}

static void t_connected(struct h2conn *t)
{
    struct sq_engine__worker *w = t->w;
    int rc = sq_connect_result(t->io.fd);
    if (rc < 0) {
        t_connect_failed(t, rc);
        return;
    }
    int64_t now = sq_now_ns();
    t->connect_ns = now - t->since_ns;
    /* a plan mixing protocols: its h2 scenarios have their own client (ALPN h2) */
    struct sq_tls_client *tc = w->cfg->tls_h2 ? w->cfg->tls_h2 : w->cfg->tls;
    if (tc) {
        if (sq_tls_conn_client(tc, &w->tls_cache, t->io.fd, &t->tls) < 0) {
            t_tls_failed(t, "out of memory for a TLS connection");
            return;
        }
        t->state = T_HANDSHAKE;
        t->since_ns = now;
        t_handshake(t);
        return;
    }
    t_open(t, now, 0);
}

static void t_read(struct h2conn *t)
{
    struct sq_engine__worker *w = t->w;
    ssize_t n = t_recv(t, w->rbuf, SQ_ENGINE_RBUF_SIZE);
    if (n > 0) {
        t->now = sq_now_ns();
        t->busy++;
        int rc;
        for (;;) {
            w->c.bytes_received += (uint64_t)n;
            rc = sq_h2_client_feed(&t->cl, w->rbuf, (size_t)n);
            /* TLS: records OpenSSL read ahead would wake no poll */
            if (rc < 0 || !t->tls || !sq_tls_buffered(t->tls) ||
                (n = t_recv(t, w->rbuf, SQ_ENGINE_RBUF_SIZE)) <= 0)
                break;
        }
        t->busy--;
        t->now = 0;
        if (rc < 0) {
            t_fail(t, SQ_ERRK_PARSE);
            return;
        }
        if (t->draining && t->cl.open == 0) {
            t_recycle(t);
            return;
        }
        t_flush(t);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n < 0 && errno == EPROTO && t->tls) { /* an alert, a bad record */
        sq_engine__tls_error(w, sq_tls_conn_error(t->tls), t->cl.open == 0);
        t_fail(t, SQ_ERRK_TLS);
        return;
    }
    t_fail(t, SQ_ERRK_CLOSED); /* end of stream, or a reset */
}

static void t_on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev)
{
    SQ_UNUSED(loop);
    struct h2conn *t = SQ_CONTAINER_OF(io, struct h2conn, io);
    if (t->state == T_CONNECTING) {
        t_connected(t);
        return;
    }
    if (SQ_UNLIKELY(t->state == T_HANDSHAKE)) {
        t_handshake(t);
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
    struct h2conn *t = conn_of(c);
    switch (t->state) {
    case T_OPEN:
        if (t->draining) {
            c->state = CONN_CONNECTING;
            return;
        }
        c->state = CONN_IDLE;
        c->fresh = false;
        sq_engine__vu_next(c, sq_loop_now(c->w->loop));
        return;
    case T_CONNECTING:
    case T_HANDSHAKE:
        c->state = CONN_CONNECTING;
        return;
    case T_BACKOFF:
        c->state = CONN_BACKOFF;
        return;
    default:
        c->state = CONN_CONNECTING;
        t_connect(t); /* sets c's state (and its neighbours') as it goes */
        return;
    }
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
    if (sq_h2_client_submit(&t->cl, c->h2req ? c->h2req : w->cfg->h2_request, st) < 0) {
        /* stream ids ran out (2^30 requests), or no memory: start a fresh connection */
        t->draining = true;
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
        if (t->state == T_CONNECTING && now - t->since_ns >= w->cfg->connect_timeout_ns)
            t_connect_failed(t, -ETIMEDOUT);
        else if (t->state == T_HANDSHAKE && now - t->since_ns >= w->cfg->connect_timeout_ns)
            t_tls_failed(t, "handshake timed out");
        else if (t->state == T_OPEN && t->dirty && !t->busy)
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
    h->st = calloc(w->nconns ? w->nconns : 1, sizeof(*h->st));
    if (!h->t || !h->st)
        return -ENOMEM;
    for (uint32_t k = 0; k < nconn; k++) {
        struct h2conn *t = &h->t[k];
        t->w = w;
        t->io.fd = -1;
        t->first = k * h->streams;
        t->n = h->streams;
        t->global = first_global + k;
        sq_timer_init(&t->timer, t_on_backoff);
    }
    return 0;
}

static void h2_dispose(struct sq_engine__worker *w)
{
    struct sq_engine__h2 *h = h2_of(w);
    if (!h)
        return;
    if (h->t)
        for (uint32_t k = 0; k < h->nt; k++)
            if (h->t[k].client)
                sq_h2_client_dispose(&h->t[k].cl);
    free(h->t);
    free(h->st);
    free(h);
    w->proto = NULL;
    for (uint32_t i = 0; w->conns && i < w->nconns; i++) {
        sq_decoder_free(w->conns[i].dec);
        w->conns[i].dec = NULL;
    }
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
