/* engine/wsdrv.c - WebSocket connections (RFC 6455), plain or TLS: one per VU (see wsdrv.h).
 *
 * A connection opens as HTTP/1.1 does (engine/xport.c: connect, TLS for wss://), then writes the
 * upgrade proto/ws.h builds (a fresh Sec-WebSocket-Key each time) and reads the answer with the
 * VU's HTTP/1.1 reader, which hands the 101's fields to proto/ws.h's checks. The VU stays
 * CONN_HANDSHAKE until the 101 passed them; only then does the connection count as opened and
 * the VU go to work. An upgrade that fails (another status, a bad handshake, no answer within
 * the connect timeout) costs no request: it is counted (`upgrade`, by status) and the VU tries
 * again after a backoff, like a failed connect.
 *
 * A request is one message: send() frames the message (masked, proto/ws.h over wslay) into the
 * worker's frame buffer and writes it; the request completes with the next whole message that
 * starts arriving after it (latency: from the send to that message's last byte). Messages that
 * arrive while none of ours awaits a reply are counted (`unmatched`), never taken as a reply.
 *
 * Reading: one read() into the worker's buffer, fed to sq_ws_feed. Its callback only counts and
 * notes (a reply completed, a ping to answer, a close): nothing is written while the frame layer
 * holds the worker's cursor, so the pong, the close reply and the next message leave after the
 * feed returns. A ping is answered with a pong carrying its payload (the latest one, when
 * several came in one read: RFC 6455 5.5.3 allows it). A close from the server is answered with
 * the same code, counted by code, and the connection replaced; a request in flight then fails
 * `closed`. An end without a close frame counts as close code 1006.
 *
 * Memory: an idle connection holds no buffer. Its frame state is a struct sq_ws_conn (a wslay
 * context is borrowed from the worker's pool only while a frame is partly received), and bytes a
 * full socket did not take go into a per-VU buffer that is freed once it drains.
 */
#include "engine/wsdrv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/clock.h"
#include "engine/flow.h"
#include "engine/h1drv.h"
#include "engine/worker.h"
#include "engine/xport.h"
#include "http/h1.h"
#include "loop/loop.h"
#include "plan/tmpl.h"
#include "proto/ws.h"
#include "stats/hist.h"

#define RBUF_SIZE SQ_ENGINE_RBUF_SIZE
#define OBUF_INIT 4096

enum { PH_NONE, PH_UPGRADE, PH_OPEN, PH_HTTP /* a plan's VU between WebSockets */ };

static const struct sq_h1_limits up_limits = {.max_head_bytes = 16 * 1024, .max_headers = 64};

struct wsvu {
    union {
        struct sq_ws_handshake hs; /* PH_UPGRADE */
        struct sq_ws_conn ws;      /* PH_OPEN */
    };
    struct sq_buf out;  /* bytes the socket did not take yet (NULL while empty) */
    int64_t up_ns;      /* when the upgrade request was written */
    int64_t ping_due;   /* the next client ping (--ws-ping) */
    uint64_t iteration; /* messages rendered: the template's $iteration */
    uint8_t phase;      /* PH_* */
    bool rx_reply;      /* the message being received started while ours awaited a reply */
};

/* What one feed leaves to do once the frame layer has let go of the worker's cursor. */
struct pending {
    struct sq_engine__conn *c;
    bool done;  /* the reply completed (the VU is IDLE now) */
    bool pong;  /* answer a ping */
    bool close; /* the server closed */
    bool ours;  /* ...answering a close step of ours: the step completed */
    uint8_t pong_len;
    uint16_t close_code;
    int64_t now;
    uint8_t pong_data[SQ_WS_MAX_CONTROL];
};

struct sq_engine__ws {
    struct wsvu *v; /* one per VU, same index as w->conns */
    struct sq_ws_ctx ctx;
    uint8_t *obuf; /* frames and the upgrade request are built here */
    size_t ocap;
    struct sq_buf msg; /* a rendered message */
    uint64_t rng;
    struct pending p;
    struct sq_ws_stats st;
};

static void on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev);

static inline struct sq_engine__ws *ws_of(const struct sq_engine__worker *w)
{
    return w->proto;
}

static inline struct wsvu *vu_of(const struct sq_engine__conn *c)
{
    return &ws_of(c->w)->v[c->local];
}

/* A plan's VU: the step it is on. */
static inline const struct sq_plan_step *step_of(const struct sq_engine__conn *c)
{
    return c->w->flow->steps[c->fv->step].ps;
}

/* Whether the VU's request in flight is waiting for a message: the quick face's always, a
 * plan's on a receive step or a send with reply. */
static bool awaits_message(const struct sq_engine__conn *c)
{
    if (c->state != CONN_ACTIVE)
        return false;
    if (!c->fv)
        return true;
    const struct sq_plan_step *ps = step_of(c);
    return ps->kind == SQ_STEP_WS &&
           (ps->ws.op == SQ_WS_OP_RECEIVE || (ps->ws.op == SQ_WS_OP_SEND && ps->ws.reply));
}

static bool obuf_reserve(struct sq_engine__ws *d, size_t n)
{
    if (d->ocap >= n)
        return true;
    size_t cap = d->ocap ? d->ocap : OBUF_INIT;
    while (cap < n)
        cap *= 2;
    uint8_t *p = realloc(d->obuf, cap);
    if (!p)
        return false;
    d->obuf = p;
    d->ocap = cap;
    return true;
}

/* ---- writing: at once, or what is left once the socket drains ---- */

/* Writes p[0, n) behind whatever is still queued. Returns 0 (written or queued) or -1 (the
 * connection is broken: the caller fails it). */
static int out_send(struct sq_engine__conn *c, const void *p, size_t n)
{
    struct sq_engine__worker *w = c->w;
    struct wsvu *v = vu_of(c);
    if (SQ_UNLIKELY(v->out.len > 0)) {
        /* Behind queued bytes (a TLS retry must start with the same bytes: they do). */
        return sq_buf_append(&v->out, p, n) < 0 ? -1 : 0;
    }
    ssize_t k = sq_engine__xport_send(&c->x, p, n);
    if (SQ_LIKELY(k == (ssize_t)n)) {
        w->c.bytes_sent += (uint64_t)k;
        return 0;
    }
    if (k < 0 && errno != EAGAIN && errno != EINTR)
        return -1;
    if (k < 0)
        k = 0;
    w->c.bytes_sent += (uint64_t)k;
    if (sq_buf_append(&v->out, (const char *)p + k, n - (size_t)k) < 0)
        return -1;
    return sq_io_modify(w->loop, &c->x.io, EPOLLIN | EPOLLOUT) < 0 ? -1 : 0;
}

/* EPOLLOUT: writes what is queued; once it drains the buffer is freed. Returns -1 when the
 * connection is broken. */
static int out_flush(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    struct wsvu *v = vu_of(c);
    ssize_t k = sq_engine__xport_send(&c->x, v->out.p, v->out.len);
    if (k < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    w->c.bytes_sent += (uint64_t)k;
    if ((size_t)k < v->out.len) {
        memmove(v->out.p, v->out.p + k, v->out.len - (size_t)k);
        v->out.len -= (size_t)k;
        return 0;
    }
    sq_buf_dispose(&v->out); /* an idle connection holds no buffer */
    if (c->state == CONN_ACTIVE && !c->wdone_ns)
        c->wdone_ns = sq_loop_now(w->loop);
    return sq_io_modify(w->loop, &c->x.io, EPOLLIN) < 0 ? -1 : 0;
}

/* ---- the connection breaks ---- */

/* The connection cannot go on (a write failed, the server ended it, its bytes broke the
 * protocol): a request in flight fails with k; an idle VU only counts k when count_idle. The VU
 * connects again. */
static void broken(struct sq_engine__conn *c, enum sq_errk k, bool count_idle)
{
    if (c->state == CONN_ACTIVE) {
        sq_engine__vu_fail(c, k);
    } else {
        if (count_idle)
            sq_engine__conn_error(c->w, k);
        sq_engine__vu_close(c);
    }
    sq_engine__vu_replace(c);
}

/* ---- the upgrade ---- */

/* The upgrade failed. The quick face: it cost no request, the VU tries again after a backoff. A
 * plan's connect step: the step fails (`upgrade`) and the VU goes on, on a new connection. */
static void upgrade_failed(struct sq_engine__conn *c, uint16_t key, const char *msg)
{
    struct sq_engine__ws *d = ws_of(c->w);
    sq_ws_tally_add(&d->st.upgrade_failed, key, 1);
    if (c->fv) {
        sq_engine__vu_fail(c, SQ_ERRK_UPGRADE);
        sq_engine__vu_replace(c);
        return;
    }
    sq_engine__upgrade_error(c->w, msg);
    sq_engine__vu_close(c);
    sq_engine__vu_backoff(c);
}

static int send_close(struct sq_engine__conn *c, uint16_t code);

/* After a request completed: the next one, unless a plan's iteration ended with its WebSocket
 * still open (a check stopped it early): that one is closed (1000), and the VU goes on with a
 * fresh HTTP/1.1 connection. */
static void after_complete(struct sq_engine__conn *c, int64_t now)
{
    if (c->fv && !c->fv->in_iter && vu_of(c)->phase == PH_OPEN) {
        send_close(c, SQ_WS_CLOSE_NORMAL);
        sq_engine__vu_close(c);
        sq_engine__vu_replace(c);
        return;
    }
    sq_engine__vu_next(c, now);
}

static struct sq_str str_of(const char *s)
{
    return (struct sq_str){s ? s : "", s ? strlen(s) : 0};
}

static int on_fields(void *ud, const char *head, size_t len, const struct sq_h1_header *fields,
                     size_t nfields)
{
    SQ_UNUSED(head);
    SQ_UNUSED(len);
    struct sq_engine__conn *c = ud;
    if (c->rd.status != 101)
        return 0; /* a refusal: its status says enough */
    struct wsvu *v = vu_of(c);
    for (size_t i = 0; i < nfields; i++) {
        struct sq_str name = {fields[i].name, fields[i].name_len};
        struct sq_str value = {fields[i].value, fields[i].value_len};
        if (sq_ws_handshake_field(&v->hs, name, value) < 0)
            return -SQ_EPARSE;
    }
    return 0;
}

/* TCP (and TLS) is up: write the upgrade. The VU stays CONN_HANDSHAKE until its 101. */
static void opened(struct sq_engine__conn *c, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__ws *d = ws_of(w);
    struct wsvu *v = vu_of(c);
    const struct sq_ws_run *r = w->cfg->ws;
    c->state = CONN_HANDSHAKE;
    c->since_ns = now; /* the upgrade gets a connect timeout of its own */
    v->phase = PH_UPGRADE;
    sq_ws_handshake_init(&v->hs, &d->rng, str_of(r->protocol));
    sq_h1_reader_start(&c->rd, false);
    sq_h1_reader_on_fields(&c->rd, on_fields, c);
    struct sq_str host = str_of(r->host), path = str_of(r->path), extra = str_of(r->headers);
    size_t need = 160 + host.len + path.len + extra.len + v->hs.protocol.len;
    int n = obuf_reserve(d, need)
                ? sq_ws_encode_upgrade((char *)d->obuf, d->ocap, &v->hs, host, path, extra)
                : -ENOMEM;
    if (n < 0) {
        upgrade_failed(c, SQ_WS_UP_MALFORMED, "WebSocket: cannot build the upgrade request");
        return;
    }
    if (out_send(c, d->obuf, (size_t)n) < 0) {
        sq_engine__xport_vu_failed(c, -EPIPE);
        return;
    }
    v->up_ns = sq_now_ns();
}

static void feed_frames(struct sq_engine__conn *c, const char *buf, size_t n);

/* Reads the answer to the upgrade. */
static void upgrade_read(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__ws *d = ws_of(w);
    struct wsvu *v = vu_of(c);
    for (;;) {
        ssize_t n = sq_engine__xport_recv(&c->x, w->rbuf, RBUF_SIZE);
        if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            if (n < 0 && errno == EPROTO && c->x.tls) {
                if (c->fv)
                    sq_engine__xport_vu_tls_broken(c); /* a plan's connect step fails `tls` */
                else
                    sq_engine__xport_vu_tls_failed(c);
                return;
            }
            upgrade_failed(c, SQ_WS_UP_CLOSED,
                           "WebSocket: the connection ended before the upgrade was answered");
            return;
        }
        w->c.bytes_received += (uint64_t)n;
        size_t used = 0;
        int rc = sq_h1_reader_feed(&c->rd, w->rbuf, (size_t)n, &used);
        if (rc == 0) {
            if (!c->x.tls || !sq_tls_buffered(c->x.tls))
                return;
            continue;
        }
        if (rc < 0) {
            if (rc == -SQ_EPARSE && c->rd.status == 101 && v->hs.why)
                upgrade_failed(c, SQ_WS_UP_INVALID, v->hs.why);
            else
                upgrade_failed(c, SQ_WS_UP_MALFORMED,
                               "WebSocket: the answer to the upgrade is not HTTP/1.1");
            return;
        }
        uint16_t status = c->rd.status;
        if (status != 101 && c->fv) {
            /* a plan's connect step: an answer like any other, and the connection stays HTTP */
            sq_ws_tally_add(&d->st.upgrade_failed, status, 1);
            v->phase = PH_HTTP;
            c->x.io.cb = sq_engine__h1_io;
            int64_t now = sq_now_ns();
            sq_engine__vu_complete(c, now);
            if (used < (size_t)n) {
                sq_engine__conn_error(w, SQ_ERRK_UNSOLICITED);
                sq_engine__vu_close(c);
                sq_engine__vu_replace(c);
            } else if (!c->rd.keep_alive) {
                w->c.conns_closed_by_server++;
                sq_engine__vu_close(c);
                sq_engine__vu_replace(c);
            } else {
                after_complete(c, now);
            }
            return;
        }
        if (status != 101) {
            char msg[96];
            snprintf(msg, sizeof(msg), "WebSocket: the upgrade was answered with status %u",
                     (unsigned)status);
            upgrade_failed(c, status, msg);
            return;
        }
        if (sq_ws_handshake_finish(&v->hs, status) < 0) {
            upgrade_failed(c, SQ_WS_UP_INVALID, v->hs.why);
            return;
        }
        int64_t now = sq_now_ns();
        sq_hist_record(d->st.upgrade_us, (now - v->up_ns) / SQ_NS_PER_US);
        d->st.upgrades++;
        const struct sq_ws_run *r = w->cfg->ws;
        sq_ws_conn_init(&v->ws, sq_ws_rand(&d->rng), r ? r->max_message : 0);
        v->phase = PH_OPEN;
        v->rx_reply = false;
        v->ping_due = r && r->ping_ns > 0 ? now + r->ping_ns : INT64_MAX;
        if (c->fv) {
            sq_engine__vu_complete(c, now); /* the connect step, status 101 */
        } else {
            w->c.conns_opened++;
            c->backoff = 0;
            c->fresh = true;
            c->state = CONN_IDLE;
            sq_h1_reader_dispose(&c->rd); /* a spilled head's buffer goes */
            sq_h1_reader_init(&c->rd, &up_limits);
        }
        if (used < (size_t)n) {
            /* frames right behind the 101: the server spoke first (none of ours awaits) */
            feed_frames(c, w->rbuf + used, (size_t)n - used);
            if (c->state < CONN_IDLE)
                return; /* it closed, or broke the protocol */
        }
        after_complete(c, now);
        return;
    }
}

/* ---- frames in ---- */

static int on_event(void *ud, const struct sq_ws_event *ev)
{
    struct sq_engine__conn *c = ud;
    struct sq_engine__worker *w = c->w;
    struct sq_engine__ws *d = ws_of(w);
    struct wsvu *v = vu_of(c);
    struct pending *p = &d->p;
    switch (ev->type) {
    case SQ_WS_EV_DATA:
        if (ev->first)
            v->rx_reply = awaits_message(c);
        if (v->rx_reply && c->fb_ns == 0)
            c->fb_ns = sq_loop_now(w->loop);
        if (v->rx_reply && c->fv && c->fv->capture && ev->len) {
            struct sq_flow_vu *fv = c->fv;
            size_t room = SQ_FLOW_BODY_CAP - fv->body.len, k = ev->len < room ? ev->len : room;
            if (k < ev->len || (k && sq_buf_append(&fv->body, ev->data, k) < 0))
                fv->body_truncated = true;
        }
        if (!ev->last)
            return 0;
        d->st.messages_received++;
        d->st.bytes_received += ev->msg_len;
        if (!v->rx_reply || !awaits_message(c)) {
            d->st.unmatched++;
            return 0;
        }
        v->rx_reply = false;
        p->now = sq_now_ns();
        c->rd.status = 0; /* a message has no HTTP status */
        c->rd.head_bytes = 0;
        c->rd.body.bytes = ev->msg_len;
        c->rd.content_encoding = SQ_CODING_NONE;
        sq_engine__vu_complete(c, p->now); /* counts only: the VU is IDLE, nothing is sent */
        p->done = true;
        return 0;
    case SQ_WS_EV_PING:
        d->st.pings_received++;
        p->pong = true;
        p->pong_len = (uint8_t)ev->len;
        memcpy(p->pong_data, ev->data, ev->len);
        return 0;
    case SQ_WS_EV_PONG:
        d->st.pongs_received++;
        if (ev->len == 8) {
            int64_t sent;
            memcpy(&sent, ev->data, 8);
            int64_t rtt = sq_now_ns() - sent;
            if (rtt >= 0 && rtt < 3600 * SQ_NS_PER_S)
                sq_hist_record(d->st.ping_rtt_us, rtt / SQ_NS_PER_US);
        }
        return 0;
    case SQ_WS_EV_CLOSE:
        p->close = true;
        p->close_code = ev->code;
        sq_ws_tally_add(&d->st.close_codes, ev->code, 1);
        if (c->fv && c->state == CONN_ACTIVE && step_of(c)->kind == SQ_STEP_WS &&
            step_of(c)->ws.op == SQ_WS_OP_CLOSE) {
            /* the answer to a close step of ours */
            p->ours = true;
            p->now = sq_now_ns();
            c->rd.status = 0;
            c->rd.head_bytes = 0;
            c->rd.body.bytes = 0;
            c->rd.content_encoding = SQ_CODING_NONE;
            sq_engine__vu_complete(c, p->now);
        }
        return 0;
    default:
        return 0;
    }
}

/* A control frame of ours (not inside the frame layer's callback). Returns 0 or -1 (broken). */
static int send_control(struct sq_engine__conn *c, uint8_t op, const void *data, size_t len)
{
    struct sq_engine__ws *d = ws_of(c->w);
    struct wsvu *v = vu_of(c);
    uint8_t buf[SQ_WS_MAX_CONTROL + 14];
    int n = sq_ws_encode_frame(&d->ctx, &v->ws, buf, sizeof(buf), op, true, data, len);
    return n < 0 ? -1 : out_send(c, buf, (size_t)n);
}

static int send_close(struct sq_engine__conn *c, uint16_t code)
{
    struct sq_engine__ws *d = ws_of(c->w);
    struct wsvu *v = vu_of(c);
    uint8_t buf[16];
    int n = sq_ws_encode_close(&d->ctx, &v->ws, buf, sizeof(buf),
                               sq_ws_close_code_ok(code) ? code : 0, (struct sq_str){0});
    if (n < 0)
        return -1;
    d->st.closes_sent++;
    return out_send(c, buf, (size_t)n);
}

/* Feeds frames; then answers a ping, takes a close, or sends the VU's next message. c may be
 * closed on return (c->state < CONN_IDLE). */
static void feed_frames(struct sq_engine__conn *c, const char *buf, size_t n)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__ws *d = ws_of(w);
    struct wsvu *v = vu_of(c);
    struct pending *p = &d->p;
    memset(p, 0, offsetof(struct pending, pong_data));
    p->c = c;
    int rc = sq_ws_feed(&d->ctx, &v->ws, buf, n, on_event, c);
    if (p->ours) {
        /* a close step of ours is answered: the WebSocket is done, the VU goes on over a fresh
         * HTTP/1.1 connection */
        sq_engine__vu_close(c);
        sq_engine__vu_replace(c);
        return;
    }
    if (p->close) {
        /* The server's close: echo its code (RFC 6455 5.5.1), then the connection goes. Bytes
         * after the close (rc < 0 then) change nothing. */
        send_close(c, p->close_code == SQ_WS_CLOSE_NO_STATUS ? 0 : p->close_code);
        w->c.conns_closed_by_server++;
        broken(c, SQ_ERRK_CLOSED, false);
        return;
    }
    if (rc < 0) {
        send_close(c, rc == -SQ_ETOOBIG ? SQ_WS_CLOSE_TOO_BIG : SQ_WS_CLOSE_PROTOCOL_ERROR);
        broken(c, SQ_ERRK_PARSE, true);
        return;
    }
    if (p->pong) {
        d->st.pongs_sent++;
        if (send_control(c, SQ_WS_PONG, p->pong_data, p->pong_len) < 0) {
            broken(c, SQ_ERRK_WRITE, true);
            return;
        }
    }
    if (p->done)
        after_complete(c, p->now);
}

/* The read returned n <= 0. */
static void read_end(struct sq_engine__conn *c, ssize_t n)
{
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n < 0 && errno == EPROTO && c->x.tls) {
        sq_engine__xport_vu_tls_broken(c);
        return;
    }
    /* an end without a close frame: 1006 (RFC 6455 7.1.5) */
    sq_ws_tally_add(&ws_of(c->w)->st.close_codes, 1006, 1);
    c->w->c.conns_closed_by_server++;
    broken(c, SQ_ERRK_CLOSED, false);
}

static void ws_read(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    for (;;) {
        ssize_t n = sq_engine__xport_recv(&c->x, w->rbuf, RBUF_SIZE);
        if (n <= 0) {
            read_end(c, n);
            return;
        }
        w->c.bytes_received += (uint64_t)n;
        feed_frames(c, w->rbuf, (size_t)n);
        if (c->state < CONN_IDLE)
            return;
        /* TLS: records OpenSSL already holds would wake no poll */
        if (!c->x.tls || !sq_tls_buffered(c->x.tls))
            return;
    }
}

static void on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev)
{
    SQ_UNUSED(loop);
    struct sq_engine__conn *c = SQ_CONTAINER_OF(io, struct sq_engine__conn, x.io);
    struct wsvu *v = vu_of(c);
    if (SQ_UNLIKELY(c->x.phase != SQ_ENGINE__XP_OPEN)) {
        sq_engine__xport_vu_step(c, opened); /* the connect, the TLS handshake */
        return;
    }
    if ((ev & EPOLLOUT) && v->out.len && out_flush(c) < 0) {
        if (v->phase == PH_UPGRADE)
            upgrade_failed(c, SQ_WS_UP_CLOSED, "WebSocket: the upgrade request could not be sent");
        else
            broken(c, SQ_ERRK_WRITE, true);
        return;
    }
    if (!(ev & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        return;
    if (v->phase == PH_UPGRADE)
        upgrade_read(c);
    else
        ws_read(c);
}

/* ---- the driver table ---- */

static void ws_connect(struct sq_engine__conn *c)
{
    struct wsvu *v = vu_of(c);
    if (c->w->flow) { /* a plan's VU starts on HTTP/1.1; a connect step upgrades it */
        v->phase = PH_HTTP;
        sq_engine__h1_driver.connect(c);
        return;
    }
    v->phase = PH_NONE;
    sq_engine__xport_vu_connect(c, on_io, 0);
}

/* The message of this send: the run's static bytes, or its template rendered for this VU. */
static int message(struct sq_engine__conn *c, const char **p, size_t *len)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__ws *d = ws_of(w);
    struct wsvu *v = vu_of(c);
    const struct sq_tmpl *t = w->cfg->ws->message;
    if (!t) {
        *p = c->req;
        *len = c->req_len;
        return 0;
    }
    char stamp[SQ_STAMP_MAX];
    struct sq_str st = {stamp, 0};
    if (sq_tmpl_uses_stamp(t)) { /* one event per message */
        st.len = sq_engine__stamp(w, NULL, stamp);
        w->c.bus.stamped++;
    }
    struct sq_tmpl_ctx x = {
        .vu = sq_engine__vu_number(w, c->local),
        .iteration = v->iteration++,
        .rng = sq_engine__vu_rng(c), /* the VU's seeded stream; d->rng (the OS's) keeps the masks */
        .stamp = &st,
    };
    sq_buf_reset(&d->msg);
    if (sq_tmpl_render(t, &x, &d->msg) < 0)
        return -ENOMEM;
    w->c.rendered++;
    *p = d->msg.p;
    *len = d->msg.len;
    return 0;
}

/* Appends s[0, n) to b with bytes a request line or a header cannot carry made harmless:
 * controls and spaces percent-encoded in a target (target true), CR and LF turned into spaces
 * in a header value. */
static int append_clean(struct sq_buf *b, const char *s, size_t n, bool target)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[3];
        if (target && (ch <= 0x20 || ch == 0x7f)) {
            esc[0] = '%';
            esc[1] = "0123456789ABCDEF"[ch >> 4];
            esc[2] = "0123456789ABCDEF"[ch & 15];
            if (sq_buf_append(b, esc, 3) < 0)
                return -ENOMEM;
        } else if (sq_buf_append(b, (ch == '\r' || ch == '\n') && !target ? " " : &s[i], 1) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* A plan's ws connect step: the VU's HTTP/1.1 connection (open and idle) sends the upgrade, and
 * its answer decides (upgrade_read): a 101 makes it a WebSocket, anything else is the step's
 * answer and the connection stays HTTP/1.1. */
static void flow_connect(struct sq_engine__conn *c, const struct sq_plan_step *ps)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__ws *d = ws_of(w);
    struct wsvu *v = vu_of(c);
    struct sq_flow_vu *fv = c->fv;
    const struct sq_plan_request *r = &ps->req;
    sq_buf_reset(&fv->scratch);
    sq_buf_reset(&fv->val);
    int rc = sq_flow_render(w->flow, fv, r->url, &fv->val);
    if (rc == 0)
        rc = append_clean(&fv->scratch, fv->val.p, fv->val.len, true);
    size_t path_len = fv->scratch.len;
    for (size_t i = 0; rc == 0 && i < r->nheaders; i++) {
        sq_buf_reset(&fv->val);
        rc = sq_flow_render(w->flow, fv, r->headers[i].value, &fv->val);
        if (rc == 0)
            rc = sq_buf_append(&fv->scratch, r->headers[i].name, strlen(r->headers[i].name));
        if (rc == 0)
            rc = sq_buf_append(&fv->scratch, ": ", 2);
        if (rc == 0)
            rc = append_clean(&fv->scratch, fv->val.p, fv->val.len, false);
        if (rc == 0)
            rc = sq_buf_append(&fv->scratch, "\r\n", 2);
    }
    if (rc < 0) {
        broken(c, SQ_ERRK_WRITE, true);
        return;
    }
    sq_ws_handshake_init(&v->hs, &d->rng, str_of(ps->ws.subprotocol));
    struct sq_str host = str_of(w->flow->host), path = {fv->scratch.p, path_len},
                  extra = {fv->scratch.p + path_len, fv->scratch.len - path_len};
    size_t need = 160 + host.len + fv->scratch.len + v->hs.protocol.len;
    int n = obuf_reserve(d, need)
                ? sq_ws_encode_upgrade((char *)d->obuf, d->ocap, &v->hs, host, path, extra)
                : -ENOMEM;
    if (n < 0) {
        broken(c, SQ_ERRK_WRITE, true);
        return;
    }
    v->phase = PH_UPGRADE;
    c->x.io.cb = on_io;
    sq_h1_reader_start(&c->rd, false);
    sq_h1_reader_on_fields(&c->rd, on_fields, c);
    v->up_ns = sq_now_ns();
    if (out_send(c, d->obuf, (size_t)n) < 0) {
        broken(c, SQ_ERRK_WRITE, true);
        return;
    }
    if (!v->out.len)
        c->wdone_ns = c->sent_ns;
}

/* A plan's step on a VU of this driver: HTTP/1.1 requests go to h1drv, ws steps are done here. */
static void flow_send(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__ws *d = ws_of(w);
    struct wsvu *v = vu_of(c);
    const struct sq_plan_step *ps = step_of(c);
    if (ps->kind != SQ_STEP_WS) {
        if (v->phase != PH_HTTP) { /* cannot happen in a flow the loader passed */
            broken(c, SQ_ERRK_CLOSED, true);
            return;
        }
        sq_engine__h1_driver.send(c);
        return;
    }
    if (ps->ws.op == SQ_WS_OP_CONNECT) {
        if (v->phase != PH_HTTP) {
            broken(c, SQ_ERRK_CLOSED, true);
            return;
        }
        flow_connect(c, ps);
        return;
    }
    if (v->phase != PH_OPEN) {
        /* no WebSocket: its connect failed (or the server closed it) */
        broken(c, SQ_ERRK_CLOSED, true);
        return;
    }
    v->rx_reply = false;
    if (ps->ws.op == SQ_WS_OP_RECEIVE) {
        c->wdone_ns = c->sent_ns;
        return; /* the next message completes it */
    }
    if (ps->ws.op == SQ_WS_OP_CLOSE) {
        if (send_close(c, ps->ws.close_code) < 0)
            broken(c, SQ_ERRK_WRITE, true);
        else if (!v->out.len)
            c->wdone_ns = c->sent_ns;
        return; /* the server's close completes it */
    }
    sq_buf_reset(&d->msg);
    if (sq_flow_render_event(w->flow, c->fv, ps->req.body, &d->msg) < 0 ||
        !obuf_reserve(d, sq_ws_frame_len(d->msg.len))) {
        broken(c, SQ_ERRK_WRITE, true);
        return;
    }
    w->c.rendered++;
    uint8_t op = ps->ws.binary ? SQ_WS_BINARY : SQ_WS_TEXT;
    int n = sq_ws_encode_frame(&d->ctx, &v->ws, d->obuf, d->ocap, op, true, d->msg.p, d->msg.len);
    if (n < 0 || out_send(c, d->obuf, (size_t)n) < 0) {
        broken(c, SQ_ERRK_WRITE, true);
        return;
    }
    d->st.messages_sent++;
    d->st.bytes_sent += d->msg.len;
    if (!v->out.len)
        c->wdone_ns = c->sent_ns;
    if (ps->ws.reply)
        return;
    /* fire and forget: written (or queued), the step is done */
    int64_t now = sq_now_ns();
    c->rd.status = 0;
    c->rd.head_bytes = 0;
    c->rd.body.bytes = 0;
    c->rd.content_encoding = SQ_CODING_NONE;
    sq_engine__vu_complete(c, now);
    after_complete(c, now);
}

static void ws_send(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    if (c->fv) {
        flow_send(c);
        return;
    }
    struct sq_engine__ws *d = ws_of(w);
    struct wsvu *v = vu_of(c);
    const char *msg;
    size_t len;
    v->rx_reply = false;
    if (SQ_UNLIKELY(message(c, &msg, &len) < 0) || !obuf_reserve(d, sq_ws_frame_len(len))) {
        broken(c, SQ_ERRK_WRITE, true);
        return;
    }
    uint8_t op = w->cfg->ws->binary ? SQ_WS_BINARY : SQ_WS_TEXT;
    int n = sq_ws_encode_frame(&d->ctx, &v->ws, d->obuf, d->ocap, op, true, msg, len);
    if (n < 0 || out_send(c, d->obuf, (size_t)n) < 0) {
        broken(c, SQ_ERRK_WRITE, true);
        return;
    }
    d->st.messages_sent++;
    d->st.bytes_sent += len;
    if (!v->out.len)
        c->wdone_ns = c->sent_ns;
}

/* Releases the VU's connection; no callback runs, nothing is written. */
static void ws_close(struct sq_engine__conn *c)
{
    struct sq_engine__ws *d = ws_of(c->w);
    struct wsvu *v = vu_of(c);
    if (v->phase == PH_OPEN)
        sq_ws_conn_dispose(&d->ctx, &v->ws);
    v->phase = PH_NONE;
    sq_buf_dispose(&v->out);
    if (c->w->flow) { /* the socket and the reader (with its head callback) are h1drv's */
        sq_engine__h1_driver.close(c);
        return;
    }
    sq_engine__xport_close(&c->x, c->w->loop);
    sq_h1_reader_dispose(&c->rd);
    sq_h1_reader_init(&c->rd, &up_limits);
}

/* Connect, TLS and upgrade timeouts; client pings. */
static void ws_sweep(struct sq_engine__worker *w, int64_t now)
{
    struct sq_engine__ws *d = ws_of(w);
    const struct sq_ws_run *r = w->cfg->ws;
    if (!r) { /* a plan: connects are h1drv's, an upgrade in place is a request (its timeout) */
        sq_engine__h1_driver.sweep(w, now);
        return;
    }
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        struct wsvu *v = &d->v[i];
        if (c->state == CONN_HANDSHAKE && v->phase == PH_UPGRADE) {
            if (now - c->since_ns >= w->cfg->connect_timeout_ns)
                upgrade_failed(c, SQ_WS_UP_TIMEOUT,
                               "WebSocket: no answer to the upgrade within the connect timeout");
            continue;
        }
        if (sq_engine__xport_vu_sweep(c, now))
            continue;
        if (r->ping_ns > 0 && v->phase == PH_OPEN && c->state >= CONN_IDLE && now >= v->ping_due) {
            v->ping_due = now + r->ping_ns;
            int64_t t = sq_now_ns();
            d->st.pings_sent++;
            if (send_control(c, SQ_WS_PING, &t, sizeof(t)) < 0)
                broken(c, SQ_ERRK_WRITE, true);
        }
    }
}

/* The end of the run: a close frame (1000) on every open connection whose socket takes it at
 * once, then every socket closed, no callback. */
static void ws_close_all(struct sq_engine__worker *w)
{
    struct sq_engine__ws *d = ws_of(w);
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        struct wsvu *v = &d->v[i];
        if (c->state < CONN_CONNECTING)
            continue;
        if (w->flow && v->phase != PH_OPEN)
            continue; /* h1drv's close_all below */
        if (v->phase == PH_OPEN && !v->out.len) {
            uint8_t buf[16];
            int n = sq_ws_encode_close(&d->ctx, &v->ws, buf, sizeof(buf), SQ_WS_CLOSE_NORMAL,
                                       (struct sq_str){0});
            if (n > 0 && sq_engine__xport_send(&c->x, buf, (size_t)n) == n) {
                d->st.closes_sent++;
                w->c.bytes_sent += (uint64_t)n;
            }
        }
        if (!w->flow)
            sq_engine__xport_close(&c->x, w->loop);
    }
    if (w->flow)
        sq_engine__h1_driver.close_all(w);
}

static int ws_init(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global)
{
    struct sq_engine__ws *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    w->proto = d;
    d->v = calloc(w->nconns ? w->nconns : 1, sizeof(*d->v));
    if (!d->v || sq_ws_ctx_init(&d->ctx) < 0 || !obuf_reserve(d, OBUF_INIT) ||
        sq_latency_hist_new(&d->st.upgrade_us) < 0 || sq_latency_hist_new(&d->st.ping_rtt_us) < 0)
        return -ENOMEM;
    if (getrandom(&d->rng, sizeof(d->rng), 0) != sizeof(d->rng))
        d->rng = (uint64_t)sq_now_ns();
    d->rng ^= 0x9E3779B97F4A7C15ull * (w->windex + 1);
    if (!d->rng)
        d->rng = 1; /* the template's xorshift state must not be 0 */
    if (w->flow)    /* HTTP/1.1 steps: h1drv's readers */
        return sq_engine__h1_driver.init(w, nconn, first_global);
    for (uint32_t i = 0; i < w->nconns; i++)
        sq_h1_reader_init(&w->conns[i].rd, &up_limits);
    return 0;
}

static void ws_dispose(struct sq_engine__worker *w)
{
    struct sq_engine__ws *d = ws_of(w);
    if (!d)
        return;
    for (uint32_t i = 0; d->v && w->conns && i < w->nconns; i++) {
        if (d->v[i].phase == PH_OPEN)
            sq_ws_conn_dispose(&d->ctx, &d->v[i].ws);
        sq_buf_dispose(&d->v[i].out);
        if (!w->flow)
            sq_h1_reader_dispose(&w->conns[i].rd);
    }
    if (w->flow)
        sq_engine__h1_driver.dispose(w);
    sq_ws_ctx_dispose(&d->ctx);
    free(d->v);
    free(d->obuf);
    sq_buf_dispose(&d->msg);
    sq_hist_free(d->st.upgrade_us);
    sq_hist_free(d->st.ping_rtt_us);
    free(d);
    w->proto = NULL;
}

static int ws_result(struct sq_engine__worker *w, struct sq_result *out)
{
    return sq_result_ws_add(out, &ws_of(w)->st);
}

const struct sq_engine__driver sq_engine__ws_driver = {
    .name = "websocket",
    .init = ws_init,
    .dispose = ws_dispose,
    .connect = ws_connect,
    .send = ws_send,
    .close = ws_close,
    .sweep = ws_sweep,
    .close_all = ws_close_all,
    .result = ws_result,
};
