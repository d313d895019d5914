/* engine/h1drv.c - HTTP/1.1 connections, plain or TLS: one per VU (see h1drv.h).
 *
 * Per request the steady state costs one send(), one read() (usually), one clock read and no
 * allocation: the request bytes are shared, the response is read into the worker's buffer and
 * parsed for framing only, and every fd stays registered for EPOLLIN alone unless a write hits
 * EAGAIN. The read that ends a response also stamps the send of the next (its clock read is
 * the completion time, and sq_engine__vu_next sends from inside the same event).
 *
 * https: the transport sits behind conn_recv / conn_sendb (engine/xport.h: one predictable branch
 * on c->x.tls; the plaintext path is the plain read() / send()). The connect and the TLS handshake
 * are xport.c's, the one transport of every driver: after the TCP connect a connection shakes
 * hands (CONN_HANDSHAKE) before it counts as opened; a failed handshake is retried after a
 * backoff like a failed connect, and its message is kept for the summary.
 *
 * Framing (RFC 9112 6.3): one response per event at most. The read that completes a response
 * ends the event, and whatever came with it behind the response (the rest of that read, records
 * OpenSSL read ahead, or what the socket still held after a read that filled the buffer) is
 * unsolicited: counted, never matched to a request, the connection replaced. The check runs
 * before the next request goes out, and costs no system call unless the buffer was full or the
 * TLS response outgrew OpenSSL's buffer. Bytes on a connection with nothing in flight are
 * unsolicited too.
 *
 * Bodies: the reader frames every body; the head callback (on_head) decides per response whether
 * the body also goes through the VU's decoder, the SSE scanner or the flow's capture buffer. A
 * plain body with nothing to look at is framed and skipped. A body that decodes to far more than
 * it weighs is abandoned at the run's hard end (on_decoded), so a timed run ends on time.
 *
 * What the driver never does: count sent, completed, failed or in flight (worker.c does, through
 * the callbacks of engine/driver.h), or decide what a VU does next.
 */
#include "engine/h1drv.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "engine/flow.h"
#include "engine/worker.h"
#include "engine/xport.h"
#include "http/decode.h"
#include "http/h1.h"
#include "http/sse.h"
#include "loop/loop.h"
#include "net/sock.h"
#include "net/tls.h"
#include "script/script.h"

#define RBUF_SIZE SQ_ENGINE_RBUF_SIZE

/* One TLS read returns at most a record; a buffer this size leaves nothing inside OpenSSL. */
_Static_assert(RBUF_SIZE >= SQ_TLS_RECORD_MAX, "the read buffer must hold a TLS record");

static const struct sq_h1_limits h1_limits = {.max_head_bytes = 64 * 1024, .max_headers = 128};

static int on_head(void *ud, const char *head, size_t len);
static int on_fields(void *ud, const char *head, size_t len, const struct sq_h1_header *fields,
                     size_t nfields);
static int on_script_fields(void *ud, const char *head, size_t len,
                            const struct sq_h1_header *fields, size_t nfields);
static void on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev);

/* A fresh reader whose head callback decides, per response, whether the body is decoded,
 * scanned for events or captured. */
static void reader_init(struct sq_engine__conn *c)
{
    sq_h1_reader_init(&c->rd, &h1_limits);
    if (SQ_UNLIKELY(c->w->shooks & SQ_SCRIPT_RESPONSE) && sq_engine__vux(c)->cap)
        sq_h1_reader_on_fields(&c->rd, on_script_fields, c); /* a wrk script's response() */
    else
        sq_h1_reader_on_head(&c->rd, on_head, c);
    c->decoding = c->streaming = false;
}

/* ---- connect and handshake (engine/xport.c) ---- */

/* With w->rxts, a plain read goes through recvmsg for the kernel's receive time (c->rx_ns, on
 * the monotonic clock), so a response read late (the worker slept deaf until an arrival) is
 * still timed when it arrived. */
static ssize_t recv_stamped(struct sq_engine__conn *c, void *buf, size_t n)
{
    struct iovec iov = {.iov_base = buf, .iov_len = n};
    union {
        char b[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
    ssize_t r = recvmsg(c->x.io.fd, &mh, 0);
    c->rx_ns = 0;
    if (r > 0)
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
                c->rx_ns = (int64_t)ts.tv_sec * SQ_NS_PER_S + ts.tv_nsec - c->w->rt_off;
            }
    return r;
}

static inline ssize_t conn_recv(struct sq_engine__conn *c, void *buf, size_t n)
{
    if (SQ_UNLIKELY(c->w->rxts) && !c->x.tls)
        return recv_stamped(c, buf, n);
    return sq_engine__xport_recv(&c->x, buf, n);
}

/* The time a response's bytes arrived: the kernel's stamp when there is one and it lies between
 * the request's send and now (a stamp outside that is a clock offset gone wrong), else now.
 * c->rx_ns is read only with w->rxts: without it the same bytes are a paced VU's iter_ns. */
static inline int64_t rx_time(const struct sq_engine__worker *w, const struct sq_engine__conn *c,
                              int64_t now)
{
    return SQ_UNLIKELY(w->rxts) && c->rx_ns && c->rx_ns < now && c->rx_ns >= c->sent_ns ? c->rx_ns
                                                                                        : now;
}

static inline ssize_t conn_sendb(struct sq_engine__conn *c, const void *buf, size_t n)
{
    return sq_engine__xport_send(&c->x, buf, n);
}

/* The connection is usable (TCP, and TLS when https; registered for EPOLLIN): it counts as
 * opened and goes to work. */
static void opened(struct sq_engine__conn *c, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    w->c.conns_opened++;
    c->backoff = 0;
    c->fresh = true; /* its first request carries connect_ns and tls_ns as phases */
    if (w->rxts && !c->x.tls) {
        int on = 1;
        if (setsockopt(c->x.io.fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) < 0)
            w->rxts = false; /* no stamps: no deaf sleeps either */
    }
    sq_engine__vu_next(c, now);
}

static void h1_connect(struct sq_engine__conn *c)
{
    /* HTTP speaks first: the handshake's last ACK rides on the request; in the clear, the
     * first request goes out whole, so TCP_NODELAY waits for a second write (TLS writes its
     * Finished and the request back to back: Nagle would hold the request) */
    unsigned opts = SQ_CONNECT_SMART_ACK | (c->w->cfg->tls ? 0 : SQ_CONNECT_LAZY_NODELAY);
    sq_engine__xport_vu_connect(c, on_io, opts);
}

/* ---- write ---- */

/* A request that cannot be written fails; the VU connects again. */
static void write_failed(struct sq_engine__conn *c)
{
    sq_engine__vu_fail(c, SQ_ERRK_WRITE);
    sq_engine__vu_replace(c);
}

/* Writes what is left of the request. Registers for EPOLLOUT only after a short write. */
static void conn_write(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    size_t len = c->req_len;
    sq_engine__xport_nagle(&c->x);
    ssize_t n = conn_sendb(c, c->req + c->woff, len - c->woff);
    if (n > 0) {
        w->c.bytes_sent += (uint64_t)n;
        c->woff += (uint32_t)n;
        if (c->woff == len) {
            c->wdone_ns = c->x.io.events & EPOLLOUT ? sq_loop_now(w->loop) : c->sent_ns;
            if (c->x.io.events & EPOLLOUT && sq_io_modify(w->loop, &c->x.io, EPOLLIN) < 0)
                write_failed(c);
            return;
        }
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        write_failed(c);
        return;
    }
    if (sq_io_modify(w->loop, &c->x.io, EPOLLIN | EPOLLOUT) < 0)
        write_failed(c);
}

static void h1_send(struct sq_engine__conn *c)
{
    sq_h1_reader_start(&c->rd, c->head);
    if (SQ_UNLIKELY(c->fv != NULL)) {
        /* a flow step: the head with its fields, or the plain callback */
        if (c->fv->want_head)
            sq_h1_reader_on_fields(&c->rd, on_fields, c);
        else
            sq_h1_reader_on_head(&c->rd, on_head, c);
    }
    conn_write(c);
}

/* ---- bodies: decoded, scanned for events, captured for a flow ---- */

/* The decoded body of the current response, in pieces: counted as SSE events when it is a stream,
 * kept for checks and extractors when the VU's step needs it. */
static int deliver(struct sq_engine__conn *c, const char *data, size_t len)
{
    if (c->streaming) {
        struct sq_engine__vux *xv = sq_engine__vux(c);
        if (sq_sse_feed(&xv->sse, data, len) && !xv->first_event_ns)
            xv->first_event_ns = sq_now_ns();
    }
    if (c->fv && c->fv->capture)
        sq_flow_vu_capture(c->fv, data, len);
    else if (SQ_UNLIKELY(c->w->shooks & SQ_SCRIPT_RESPONSE) && sq_engine__vux(c)->cap) {
        /* a wrk script's response(): the body, up to the cap */
        struct sq_engine__capture *k = sq_engine__vux(c)->cap;
        size_t room = SQ_ENGINE_CAPTURE_CAP - k->body.len;
        size_t n = len > room ? room : len;
        if (n && sq_buf_append(&k->body, data, n) < 0)
            return -ENOMEM;
    }
    if (SQ_UNLIKELY(c->xc != NULL) && c->xc->on)
        sq_engine__xc_body(c, data, len);
    return 0;
}

/* A body that decodes to far more than its size (a decompression bomb decodes up to the 64 MiB
 * cap before it fails) must not hold the worker past the run's end: past this much decoded, each
 * piece checks the clock, and at the hard end (or an abort) the response is abandoned, still in
 * flight. Small bodies never read the clock. */
#define DECODE_CHECK_AFTER (64 * 1024)

bool sq_engine__h1_decode_over(struct sq_engine__conn *c)
{
    return SQ_UNLIKELY(sq_decoder_total(sq_engine__vux(c)->dec) >= DECODE_CHECK_AFTER ||
                       c->w->over) &&
           sq_engine__past_end(c->w);
}

static int on_decoded(void *ud, const char *data, size_t len)
{
    struct sq_engine__conn *c = ud;
    return sq_engine__h1_decode_over(c) ? -ETIMEDOUT : deliver(c, data, len);
}

static int on_body(void *ud, const char *data, size_t len)
{
    struct sq_engine__conn *c = ud;
    if (c->decoding)
        return sq_decoder_feed(sq_engine__vux(c)->dec, data, len, on_decoded, c);
    return deliver(c, data, len);
}

/* A final response head is in (every reader has this callback, or on_fields): decides what its
 * body goes through. A plain body with nothing to look at stays framing-only. */
static int on_head(void *ud, const char *head, size_t len)
{
    struct sq_engine__conn *c = ud;
    struct sq_flow_vu *v = c->fv;
    if (SQ_UNLIKELY(c->xc != NULL) && !sq_engine__xc_head_done(c, c->rd.status))
        sq_engine__xc_head(c, c->rd.status, head, len);
    /* a flow step that follows redirects: one compare on the parsed status for any other */
    if (SQ_UNLIKELY(v != NULL) && v->follow) {
        sq_buf_reset(&v->loc);
        if (SQ_UNLIKELY(sq_redirect_status(c->rd.status)))
            sq_flow_vu_location(v, head, len);
    }
    uint8_t enc = c->rd.content_encoding;
    c->decoding = false;
    c->streaming = c->rd.event_stream;
    if (enc != SQ_CODING_NONE && enc != SQ_CODING_OTHER) {
        struct sq_engine__vux *xv = sq_engine__vux(c);
        if (!xv->dec && sq_decoder_new(0, &xv->dec) < 0)
            return -ENOMEM;
        int rc = sq_decoder_reset(xv->dec, (enum sq_coding)enc);
        if (rc < 0)
            return rc;
        c->decoding = true;
    }
    if (c->streaming) {
        sq_sse_init(&sq_engine__vux(c)->sse);
        sq_engine__vux(c)->first_event_ns = 0;
    }
    bool body = c->decoding || c->streaming || (v && v->capture) || (c->xc && c->xc->on);
    sq_h1_reader_on_body(&c->rd, body ? on_body : NULL, c);
    return 0;
}

/* The same, for a flow step that reads headers (checks, extractors, a cookie jar): the head is
 * kept with the fields the reader parsed on its way, so the flow never parses it again. */
static int on_fields(void *ud, const char *head, size_t len, const struct sq_h1_header *fields,
                     size_t nfields)
{
    struct sq_engine__conn *c = ud;
    sq_flow_vu_keep_head(c->fv, head, len, fields, nfields);
    return on_head(ud, head, len);
}

/* The same, for a wrk script with response(): the head and its fields kept for the call (spans
 * into the copy), and the body captured whatever it is. */
static int on_script_fields(void *ud, const char *head, size_t len,
                            const struct sq_h1_header *fields, size_t nfields)
{
    struct sq_engine__conn *c = ud;
    struct sq_engine__capture *k = sq_engine__vux(c)->cap;
    sq_buf_reset(&k->head);
    sq_buf_reset(&k->body);
    k->nfields = 0;
    if (sq_buf_append(&k->head, head, len) < 0 ||
        sq_buf_reserve(&k->fields, nfields * sizeof(struct sq_resp_header)) < 0)
        return -ENOMEM;
    struct sq_resp_header *out = (struct sq_resp_header *)(void *)k->fields.p;
    for (size_t i = 0; i < nfields; i++) {
        out[i].name = k->head.p + (fields[i].name - head);
        out[i].name_len = fields[i].name_len;
        out[i].value = k->head.p + (fields[i].value - head);
        out[i].value_len = fields[i].value_len;
    }
    k->nfields = nfields;
    int rc = on_head(ud, head, len);
    if (rc == 0)
        sq_h1_reader_on_body(&c->rd, on_body, c);
    return rc;
}

/* ---- read ---- */

/* Bytes no request asked for (RFC 9112 6.3): behind a complete response, or on a connection with
 * nothing in flight. They fail no request, and nothing after them can be matched to one: the
 * connection is replaced. */
static void unsolicited(struct sq_engine__conn *c)
{
    sq_engine__conn_error(c->w, SQ_ERRK_UNSOLICITED);
    sq_engine__vu_close(c);
    sq_engine__vu_replace(c);
}

/* A response ended exactly where the read that carried its last byte ended: did more bytes
 * arrive with it? Plain: only a read that filled the buffer can have left bytes in the socket.
 * TLS: records OpenSSL read ahead of the one returned, or, behind a response larger than its
 * buffer, bytes still in the socket. Costs a system call only in those last cases. */
static bool more_arrived(struct sq_engine__conn *c, ssize_t n)
{
    struct sq_engine__worker *w = c->w;
    if (SQ_LIKELY(!c->x.tls)) {
        if (SQ_LIKELY(n < RBUF_SIZE))
            return false;
    } else if (!sq_tls_buffered(c->x.tls) &&
               c->rd.head_bytes + c->rd.body.bytes < SQ_TLS_RECORD_MAX) {
        return false;
    }
    ssize_t m = conn_recv(c, w->rbuf, RBUF_SIZE);
    if (m > 0) {
        w->c.bytes_received += (uint64_t)m;
        return true;
    }
    /* nothing, or an end or error the next poll reports again; over TLS, part of a record that
     * OpenSSL still holds arrived all the same */
    return c->x.tls && sq_tls_buffered(c->x.tls);
}

/* The read returned n <= 0: nothing yet, a TLS failure, or the end of the stream. */
static void read_end(struct sq_engine__conn *c, ssize_t n)
{
    struct sq_engine__worker *w = c->w;
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (SQ_UNLIKELY(n < 0 && errno == EPROTO && c->x.tls)) {
        sq_engine__xport_vu_tls_broken(c);
        return;
    }
    /* End of stream or a reset. A response delimited by the close is complete now. */
    if (c->state == CONN_ACTIVE && n == 0 && sq_h1_reader_eof(&c->rd) == 1 &&
        !(c->decoding && sq_decoder_finish(sq_engine__vux(c)->dec) < 0)) {
        sq_engine__vu_complete(c, sq_now_ns());
        w->c.conns_closed_by_server++;
        sq_engine__vu_close(c);
    } else if (c->state == CONN_ACTIVE) {
        sq_engine__vu_fail(c, SQ_ERRK_CLOSED);
    } else {
        w->c.conns_closed_by_server++;
        sq_engine__vu_close(c);
    }
    sq_engine__vu_replace(c);
}

/* One response per read at most: the read that completes a response ends this event, and
 * whatever came with it behind the response is unsolicited, never the next request's answer
 * (the next request is sent only after this check). */
static void conn_read(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    for (;;) {
        ssize_t n = conn_recv(c, w->rbuf, RBUF_SIZE);
        if (SQ_UNLIKELY(n <= 0)) {
            read_end(c, n);
            return;
        }
        w->c.bytes_received += (uint64_t)n;
        if (SQ_UNLIKELY(c->state != CONN_ACTIVE)) {
            unsolicited(c);
            return;
        }
        if (c->fb_ns == 0)
            c->fb_ns = rx_time(w, c, sq_loop_now(w->loop));
        if (SQ_UNLIKELY(c->xc != NULL) && c->xc->on)
            sq_engine__xc_raw(c, w->rbuf, (size_t)n);
        const char *p = w->rbuf;
        size_t left = (size_t)n;
    next_response:;
        size_t used = 0;
        int rc = sq_h1_reader_feed(&c->rd, p, left, &used);
        if (rc == 0) {
            /* more to come; TLS: records OpenSSL already holds would wake no poll */
            if (SQ_LIKELY(!c->x.tls) || !sq_tls_buffered(c->x.tls))
                return;
            continue;
        }
        if (rc > 0 && c->decoding && sq_decoder_finish(sq_engine__vux(c)->dec) < 0)
            rc = -SQ_EDECODE; /* the encoded stream was cut short */
        if (rc < 0) {
            if (SQ_UNLIKELY(rc == -ETIMEDOUT)) {
                /* abandoned at the run's end (on_decoded): it stays in flight, unwatched */
                sq_io_stop(w->loop, &c->x.io);
                return;
            }
            sq_engine__vu_fail(c, c->decoding && (rc == -SQ_EDECODE || rc == -SQ_ETOOBIG)
                                      ? SQ_ERRK_DECODE
                                      : SQ_ERRK_PARSE);
            sq_engine__vu_replace(c);
            return;
        }
        int64_t now = sq_now_ns();
        sq_engine__vu_complete(c, rx_time(w, c, now));
        if (SQ_UNLIKELY(c->state == CONN_ACTIVE)) {
            /* A pipelined batch (a wrk script's request()): its next response follows on this
             * connection, maybe in the same read. */
            if (!c->rd.keep_alive) {
                sq_engine__vu_fail(c, SQ_ERRK_CLOSED); /* the rest of the batch is lost */
                sq_engine__vu_replace(c);
                return;
            }
            sq_h1_reader_start(&c->rd, c->head);
            p += used;
            left -= used;
            if (left)
                goto next_response;
            if (SQ_LIKELY(!c->x.tls) || !sq_tls_buffered(c->x.tls))
                return;
            continue;
        }
        if (SQ_UNLIKELY(used < left) || SQ_UNLIKELY(more_arrived(c, n))) {
            unsolicited(c);
            return;
        }
        if (!c->rd.keep_alive) {
            /* The server closes (it has or will have sent its FIN): ours goes out as from a
             * close(), but the socket is kept for the replacement's connect when TCP is done
             * with it (on loopback, at once): no close(), socket() or EPOLL_CTL_ADD. */
            w->c.conns_closed_by_server++;
            sq_engine__xport_park(&c->x, w);
            sq_engine__vu_close(c);
            sq_engine__vu_replace(c);
            sq_engine__xport_unpark(w);
            return;
        }
        sq_engine__vu_next(c, now);
        return;
    }
}

static void on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev)
{
    SQ_UNUSED(loop);
    struct sq_engine__conn *c = SQ_CONTAINER_OF(io, struct sq_engine__conn, x.io);
    if (SQ_UNLIKELY(c->x.phase != SQ_ENGINE__XP_OPEN)) {
        sq_engine__xport_vu_step(c, opened); /* the connect, the TLS handshake */
        return;
    }
    if ((ev & EPOLLOUT) && c->state == CONN_ACTIVE && c->woff < c->req_len) {
        conn_write(c);
        if (c->state < CONN_CONNECTING)
            return;
    }
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
        conn_read(c);
}

void sq_engine__h1_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev)
{
    on_io(loop, io, ev);
}

/* ---- the rest of the driver table ---- */

/* Closes the socket; the reader starts afresh for the next connection. */
static void h1_close(struct sq_engine__conn *c)
{
    sq_engine__xport_close(&c->x, c->w->loop);
    sq_h1_reader_dispose(&c->rd);
    reader_init(c);
}

/* Connects and handshakes that take longer than the connect timeout fail like a refused one. */
static void h1_sweep(struct sq_engine__worker *w, int64_t now)
{
    for (uint32_t i = 0; i < w->nconns; i++)
        sq_engine__xport_vu_sweep(&w->conns[i], now);
    for (uint32_t i = w->lane0; i < w->lane0 + w->nlanes; i++)
        sq_engine__xport_vu_sweep(&w->conns[i], now);
}

static void h1_close_all(struct sq_engine__worker *w)
{
    for (uint32_t i = 0; i < w->nconns; i++)
        sq_engine__xport_close(&w->conns[i].x, w->loop);
    for (uint32_t i = w->lane0; i < w->lane0 + w->nlanes; i++)
        sq_engine__xport_close(&w->conns[i].x, w->loop);
}

static int h1_init(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global)
{
    SQ_UNUSED(nconn);
    SQ_UNUSED(first_global);
    for (uint32_t i = 0; i < w->nconns; i++)
        reader_init(&w->conns[i]);
    for (uint32_t i = w->lane0; i < w->lane0 + w->nlanes; i++)
        reader_init(&w->conns[i]);
    return 0;
}

/* Only the records that hold a decoder are written: a write to every VU's record would make
 * the whole side array resident at the run's end (its peak RSS: bench/connmem.py). */
static void decoder_free(struct sq_engine__vux *xv)
{
    if (xv->dec) {
        sq_decoder_free(xv->dec);
        xv->dec = NULL;
    }
}

void sq_engine__h1_decoders_free(struct sq_engine__worker *w)
{
    for (uint32_t i = 0; w->vux && i < w->nconns; i++)
        decoder_free(&w->vux[i]);
    for (uint32_t i = w->lane0; w->vux && i < w->lane0 + w->nlanes; i++)
        decoder_free(&w->vux[i]);
}

static void h1_dispose(struct sq_engine__worker *w)
{
    for (uint32_t i = 0; w->conns && i < w->nconns; i++)
        sq_h1_reader_dispose(&w->conns[i].rd);
    for (uint32_t i = w->lane0; w->conns && i < w->lane0 + w->nlanes; i++)
        sq_h1_reader_dispose(&w->conns[i].rd);
    sq_engine__h1_decoders_free(w);
}

const struct sq_engine__driver sq_engine__h1_driver = {
    .name = "http/1.1",
    .init = h1_init,
    .dispose = h1_dispose,
    .connect = h1_connect,
    .send = h1_send,
    .close = h1_close,
    .sweep = h1_sweep,
    .close_all = h1_close_all,
};
