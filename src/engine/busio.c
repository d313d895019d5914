/* engine/busio.c - broker connections for the bus drivers (see busio.h).
 *
 * States (b->m.state, engine/xport.h): a connection is CLOSED, BACKOFF (waiting to retry after a
 * failed connect), CONNECTING (the transport: TCP), HELLO (the protocol's greeting:
 * INFO/CONNECT/PONG, CONNECT/CONNACK/SUBACK) or OPEN. Its VUs mirror it (xport.c moves them):
 * CONNECTING or BACKOFF while it is not open, then IDLE, ACTIVE, PACING as the worker moves them.
 * Only an open connection takes messages.
 *
 * The write invariant: out.p[out_off, out.len) is what is still to be written, whole units in
 * the order they were queued; a short write registers EPOLLOUT and the rest leaves when the
 * socket drains. Nothing is written while a unit is half queued (the protocol fills the room it
 * asked for, then commits).
 *
 * The read invariant: spill is empty, or it holds the start of one unit that the previous read
 * cut (the parser said PARTIAL); the next read's bytes go into the spill only until that unit is
 * complete (need), the rest is parsed where it lies in the worker's buffer.
 */
#include "engine/busio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "base/clock.h"
#include "engine/busconf.h"
#include "engine/busws.h"
#include "engine/driver.h"
#include "engine/worker.h"
#include "plan/tmpl.h"

#define READS_PER_EVENT 4 /* reads per readiness event before the loop gets a turn */

static void b_on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev);
static void b_flush(struct sq_engine__busconn *b);

/* ---- the ring and the sequence map ---- */

int sq_engine__ring_push(struct sq_engine__ring *r, uint64_t x)
{
    if (r->len == r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 64;
        uint64_t *v = malloc((size_t)cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        for (uint32_t i = 0; i < r->len; i++)
            v[i] = r->v[(r->head + i) & (r->cap - 1)];
        free(r->v);
        r->v = v;
        r->head = 0;
        r->cap = cap;
    }
    r->v[(r->head + r->len) & (r->cap - 1)] = x;
    r->len++;
    return 0;
}

void sq_engine__ring_dispose(struct sq_engine__ring *r)
{
    free(r->v);
    *r = (struct sq_engine__ring){0};
}

static uint32_t seq_home(uint64_t k, uint32_t mask)
{
    k *= 0x9E3779B97F4A7C15ull; /* Fibonacci hashing: sequence numbers are consecutive */
    return (uint32_t)(k >> 32) & mask;
}

int sq_engine__seqmap_init(struct sq_engine__seqmap *m, uint32_t want)
{
    uint32_t size = 16;
    while (size < 2 * want)
        size *= 2;
    m->mask = size - 1;
    m->n = 0;
    m->key = malloc(size * sizeof(*m->key));
    m->val = malloc(size * sizeof(*m->val));
    if (!m->key || !m->val)
        return -ENOMEM;
    sq_engine__seqmap_clear(m);
    return 0;
}

void sq_engine__seqmap_dispose(struct sq_engine__seqmap *m)
{
    free(m->key);
    free(m->val);
    *m = (struct sq_engine__seqmap){0};
}

void sq_engine__seqmap_clear(struct sq_engine__seqmap *m)
{
    for (uint32_t i = 0; m->key && i <= m->mask; i++)
        m->key[i] = UINT64_MAX;
    m->n = 0;
}

bool sq_engine__seqmap_get(const struct sq_engine__seqmap *m, uint64_t k, int64_t *v)
{
    for (uint32_t i = seq_home(k, m->mask); m->key[i] != UINT64_MAX; i = (i + 1) & m->mask)
        if (m->key[i] == k) {
            *v = m->val[i];
            return true;
        }
    return false;
}

bool sq_engine__seqmap_put(struct sq_engine__seqmap *m, uint64_t k, int64_t v)
{
    uint32_t i = seq_home(k, m->mask);
    while (m->key[i] != UINT64_MAX && m->key[i] != k)
        i = (i + 1) & m->mask;
    if (m->key[i] == UINT64_MAX) {
        if (m->n >= (m->mask + 1) / 2)
            return false;
        m->n++;
    }
    m->key[i] = k;
    m->val[i] = v;
    return true;
}

void sq_engine__seqmap_del(struct sq_engine__seqmap *m, uint64_t k)
{
    uint32_t i = seq_home(k, m->mask);
    while (m->key[i] != k) {
        if (m->key[i] == UINT64_MAX)
            return;
        i = (i + 1) & m->mask;
    }
    m->n--;
    /* backward shift: close the hole so every entry stays reachable from its home */
    uint32_t j = i;
    for (;;) {
        m->key[i] = UINT64_MAX;
        for (;;) {
            j = (j + 1) & m->mask;
            if (m->key[j] == UINT64_MAX)
                return;
            uint32_t home = seq_home(m->key[j], m->mask);
            /* j's entry may move to i unless its home lies cyclically in (i, j] */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
                break;
        }
        m->key[i] = m->key[j];
        m->val[i] = m->val[j];
        i = j;
    }
}

struct sq_engine__busdrv *sq_engine__busdrv_of(const struct sq_engine__worker *w)
{
    return w->proto;
}

struct sq_engine__busconn *sq_engine__bus_at(struct sq_engine__busdrv *d, uint32_t k)
{
    return (struct sq_engine__busconn *)(void *)(d->conns + (size_t)k * d->ops->conn_size);
}

struct sq_engine__busconn *sq_engine__bus_of(struct sq_engine__conn *c)
{
    struct sq_engine__busdrv *d = sq_engine__busdrv_of(c->w);
    return sq_engine__bus_at(d, c->local / d->window);
}

static const struct sq_engine__bus_ops *ops_of(const struct sq_engine__busconn *b)
{
    return b->ops;
}

/* Closes the socket and forgets every byte in both directions; no VU callback runs. */
static void b_teardown(struct sq_engine__busconn *b)
{
    bool hello = b->m.state >= SQ_ENGINE__MX_HELLO;
    sq_timer_stop(b->m.w->loop, &b->kick);
    sq_engine__mux_close(&b->m);
    sq_buf_reset(&b->out);
    b->out_off = 0;
    sq_spill_reset(&b->spill);
    b->dirty = false;
    b->broken = 0;
    sq_engine__ring_clear(&b->fifo);
    sq_engine__ring_clear(&b->pings);
    b->unpinged = 0;
    b->upgrade = false;
    if (SQ_UNLIKELY(b->ws != NULL))
        sq_engine__busws_reset(b);
    if (hello)
        ops_of(b)->reset(b);
}

/* Frees what a torn-down connection still holds. */
static void b_dispose(struct sq_engine__busconn *b)
{
    sq_buf_dispose(&b->out);
    sq_spill_dispose(&b->spill);
    sq_engine__ring_dispose(&b->fifo);
    sq_engine__ring_dispose(&b->pings);
    sq_engine__busws_free(b);
}

/* The greeting failed (a refusal, a timeout, the connection closed): like a failed connect, it
 * is retried after a backoff. */
static void b_hello_failed(struct sq_engine__busconn *b)
{
    b_teardown(b);
    sq_engine__mux_retry(&b->m);
}

/* The connection is gone: requests out on it fail with kind, every VU asks for it again. */
static void b_down(struct sq_engine__busconn *b, enum sq_errk kind)
{
    if (b->m.state < SQ_ENGINE__MX_OPEN) {
        if (kind == SQ_ERRK_CLOSED)
            b->m.w->c.conns_closed_by_server++;
        b_hello_failed(b); /* a CONNACK refusal, a -ERR on CONNECT, closed while greeting */
        return;
    }
    b_teardown(b);
    sq_engine__mux_down(&b->m, kind);
}

void sq_engine__bus_fail(struct sq_engine__busconn *b, enum sq_errk kind)
{
    if (b->busy) {
        if (!b->broken)
            b->broken = 1 + (int)kind;
        return;
    }
    b_down(b, kind);
}

void sq_engine__bus_note(struct sq_engine__busconn *b, const char *msg, size_t len, bool count)
{
    struct sq_engine__worker *w = b->m.w;
    if (count) {
        w->c.errors[SQ_ERRK_SERVER_ERROR]++;
        __atomic_store_n(&w->live.bus_errors, w->c.errors[SQ_ERRK_SERVER_ERROR], __ATOMIC_RELAXED);
    }
    if (w->live.bus_err_set)
        return;
    if (len >= sizeof(w->bus_err))
        len = sizeof(w->bus_err) - 1;
    for (size_t i = 0; i < len; i++) /* printable only: it lands in a terminal and a JSON */
        w->bus_err[i] = (unsigned char)msg[i] < 0x20 || msg[i] == 0x7f ? '?' : msg[i];
    w->bus_err[len] = '\0';
    __atomic_store_n(&w->live.bus_err_set, 1, __ATOMIC_RELEASE);
}

/* ---- writes ---- */

static void b_kick(struct sq_engine__busconn *b)
{
    if (b->busy) {
        b->dirty = true;
        return;
    }
    if (!sq_timer_active(&b->kick) &&
        sq_timer_start(b->m.w->loop, &b->kick, sq_loop_now(b->m.w->loop)) < 0)
        b_flush(b); /* no room in the timer heap: write now */
}

static void b_on_kick(struct sq_loop *loop, struct sq_timer *t)
{
    SQ_UNUSED(loop);
    struct sq_engine__busconn *b = SQ_CONTAINER_OF(t, struct sq_engine__busconn, kick);
    if (b->m.state >= SQ_ENGINE__MX_HELLO)
        b_flush(b);
}

char *sq_engine__bus_room(struct sq_engine__busconn *b, size_t n)
{
    if (b->out_off && b->out_off == b->out.len) {
        b->out.len = 0;
        b->out_off = 0;
    }
    if (sq_buf_reserve(&b->out, n) < 0)
        return NULL;
    return b->out.p + b->out.len;
}

void sq_engine__bus_commit(struct sq_engine__busconn *b, size_t n)
{
    b->out.len += n;
    if (b->busy && b->out.len - b->out_off >= SQ_ENGINE__BUS_FLUSH_AT)
        b_flush(b); /* a long batch inside an event: let the broker start on it */
    else
        b_kick(b);
}

void sq_engine__bus_write_now(struct sq_engine__busconn *b)
{
    b_flush(b);
}

int sq_engine__bus_queue(struct sq_engine__busconn *b, const void *p, size_t n)
{
    char *r = sq_engine__bus_room(b, n);
    if (!r)
        return -ENOMEM;
    memcpy(r, p, n);
    sq_engine__bus_commit(b, n);
    return 0;
}

/* ---- batches ---- */

/* A ping behind the messages queued since the last one, and how many it closes. */
static int ping(struct sq_engine__busconn *b, uint32_t closes)
{
    if (sq_engine__ring_push(&b->pings, closes) < 0 ||
        sq_buf_append(&b->out, b->ping, b->ping_len) < 0)
        return -ENOMEM;
    return 0;
}

int sq_engine__bus_keepalive(struct sq_engine__busconn *b)
{
    if (ping(b, 0) < 0)
        return -ENOMEM;
    sq_engine__bus_commit(b, 0);
    return 0;
}

/* Writes what is queued, the open batch closed by a ping first. A failure ends the connection,
 * or marks it broken when inside an event. */
static void b_flush(struct sq_engine__busconn *b)
{
    struct sq_engine__worker *w = b->m.w;
    if (b->m.state < SQ_ENGINE__MX_HELLO || b->broken)
        return;
    sq_timer_stop(w->loop, &b->kick);
    b->dirty = false;
    if (b->unpinged) {
        if (ping(b, b->unpinged) < 0) {
            sq_engine__bus_fail(b, SQ_ERRK_WRITE);
            return;
        }
        b->unpinged = 0;
        w->c.bus.pings++;
    }
    bool blocked = false;
    struct sq_buf *o = &b->out;
    size_t *off = &b->out_off;
    if (SQ_UNLIKELY(b->ws != NULL)) { /* MQTT over WebSocket: the bytes go out framed */
        if (sq_engine__busws_wrap(b) < 0) {
            sq_engine__bus_fail(b, SQ_ERRK_WRITE);
            return;
        }
        o = sq_engine__busws_wire(b, &off);
    }
    if (*off < o->len) {
        ssize_t n = sq_engine__xport_write(&b->m.x, o->p + *off, o->len - *off, &blocked);
        if (n < 0) {
            sq_engine__bus_fail(b, SQ_ERRK_WRITE);
            return;
        }
        w->c.bytes_sent += (uint64_t)n;
        w->c.bus.flushes += n > 0;
        *off += (size_t)n;
    }
    b->wrote_ns = sq_loop_now(w->loop);
    if (!blocked) {
        o->len = 0;
        *off = 0;
    } else if (*off > o->cap / 2) {
        memmove(o->p, o->p + *off, o->len - *off);
        o->len -= *off;
        *off = 0;
    }
    if (sq_io_modify(w->loop, &b->m.x.io, blocked ? EPOLLIN | EPOLLOUT : EPOLLIN) < 0)
        sq_engine__bus_fail(b, SQ_ERRK_WRITE);
}

/* ---- reads ---- */

/* Hands one unit to the protocol (base/spill.h's callback). A protocol error marks the
 * connection broken; once it is broken the read stops. */
int sq_engine__bus_unit(void *ud, const char *p, size_t n, size_t *need)
{
    struct sq_engine__busconn *b = ud;
    if (b->broken || b->m.state < SQ_ENGINE__MX_HELLO)
        return -1;
    int rc = ops_of(b)->unit(b, p, n, need);
    if (rc < 0) {
        sq_engine__bus_fail(b, SQ_ERRK_PARSE); /* unless the protocol said why already */
        return -1;
    }
    return rc;
}

/* Feeds one read's bytes (see the read invariant at the top). */
static void b_feed(struct sq_engine__busconn *b, const char *p, size_t n)
{
    int rc = sq_spill_feed(&b->spill, b->max_unit + 4096, p, n, sq_engine__bus_unit, b);
    if (rc < 0 && !b->broken && b->m.state >= SQ_ENGINE__MX_HELLO)
        sq_engine__bus_fail(b, SQ_ERRK_PARSE); /* a unit too large, or longer than its bytes */
}

static void b_upgrade(struct sq_engine__busconn *b);

/* The end of an event: a failure found inside it, a switch to TLS, or the writes it queued. */
static void b_event_end(struct sq_engine__busconn *b)
{
    if (--b->busy > 0)
        return;
    if (b->broken) {
        enum sq_errk k = (enum sq_errk)(b->broken - 1);
        b->broken = 0;
        b_down(b, k);
        return;
    }
    if (SQ_UNLIKELY(b->upgrade)) {
        b->upgrade = false;
        b_upgrade(b);
        return;
    }
    if (b->dirty && b->m.state >= SQ_ENGINE__MX_HELLO)
        b_flush(b);
}

static bool tls_buffered(const struct sq_engine__busconn *b)
{
    return SQ_UNLIKELY(b->m.x.tls != NULL) && sq_tls_buffered(b->m.x.tls);
}

static void b_read(struct sq_engine__busconn *b)
{
    struct sq_engine__worker *w = b->m.w;
    b->busy++;
    /* over TLS, records OpenSSL read ahead wake no poll: they are read before the event ends,
     * past READS_PER_EVENT if need be (OpenSSL's buffer bounds them) */
    for (int i = 0; (i < READS_PER_EVENT || tls_buffered(b)) && b->m.state >= SQ_ENGINE__MX_HELLO &&
                    !b->broken && !b->upgrade;
         i++) {
        ssize_t n = sq_engine__xport_recv(&b->m.x, w->rbuf, SQ_ENGINE_RBUF_SIZE);
        if (n > 0) {
            w->c.bytes_received += (uint64_t)n;
            b->now = sq_now_ns();
            uint32_t out = b->pings.len, answered = b->answered;
            if (SQ_UNLIKELY(b->ws != NULL))
                sq_engine__busws_feed(b, w->rbuf, (size_t)n);
            else
                b_feed(b, w->rbuf, (size_t)n);
            /* every ping out before this read answered in it: the broker had read all there
             * was and waits for the next write (the pings of the messages the answers freed
             * are newer) */
            w->c.bus.drained += out > 0 && b->answered - answered >= out;
            if (n < SQ_ENGINE_RBUF_SIZE && !tls_buffered(b))
                break;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (n < 0 && errno == EPROTO && b->m.x.tls) {
            /* an alert (TLS 1.3: a broker that wants a client certificate says so after the
             * handshake) or a broken record: its message kept; counted as a `tls` error when
             * it costs no message (during the greeting), else the messages out fail as tls */
            bool open = sq_engine__bus_is_open(b);
            sq_engine__tls_error(w, sq_tls_conn_error(b->m.x.tls), !open);
            sq_engine__bus_fail(b, open ? SQ_ERRK_TLS : SQ_ERRK_CLOSED);
            break;
        }
        sq_engine__bus_fail(b, SQ_ERRK_CLOSED); /* end of stream, or a reset */
        break;
    }
    b->now = 0;
    b_event_end(b);
}

/* The transport is up: the protocol's greeting. */
static void b_connected(struct sq_engine__busconn *b)
{
    b->m.state = SQ_ENGINE__MX_HELLO;
    b->hello_ns = b->m.x.since_ns;
    b->busy++;
    /* over WebSocket the upgrade goes first; the protocol's hello follows its 101 (busws.c) */
    int rc = SQ_UNLIKELY(b->ws != NULL) ? sq_engine__busws_upgrade(b) : ops_of(b)->hello(b);
    if (rc < 0 && !b->broken)
        b->broken = 1 + SQ_ERRK_CONNECT;
    b_event_end(b);
}

void sq_engine__bus_starttls(struct sq_engine__busconn *b)
{
    b->upgrade = true;
}

/* The handshake of a connection that switched to TLS during its greeting is done or failed. */
static void b_upgraded(struct sq_engine__busconn *b, int rc)
{
    if (rc == SQ_ENGINE__XP_READY)
        b_connected(b); /* the greeting goes on, encrypted */
    else if (rc < 0)
        b_hello_failed(b); /* counted as a TLS error by the transport */
}

static void b_upgrade(struct sq_engine__busconn *b)
{
    if (!b->tls) {
        sq_engine__tls_error(b->m.w, "the broker asked for TLS on a plain connection", true);
        b_hello_failed(b);
        return;
    }
    b_upgraded(b, sq_engine__xport_starttls(&b->m.x, b->m.w, b->tls));
}

static void b_on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev)
{
    SQ_UNUSED(loop);
    struct sq_engine__busconn *b = SQ_CONTAINER_OF(io, struct sq_engine__busconn, m.x.io);
    if (SQ_UNLIKELY(b->m.x.phase == SQ_ENGINE__XP_HANDSHAKE && b->m.state == SQ_ENGINE__MX_HELLO)) {
        b_upgraded(b, sq_engine__xport_step(&b->m.x, b->m.w, NULL));
        return;
    }
    if (SQ_UNLIKELY(b->m.state == SQ_ENGINE__MX_CONNECTING)) {
        if (sq_engine__mux_step(&b->m) == SQ_ENGINE__XP_READY)
            b_connected(b);
        return;
    }
    if (ev & EPOLLOUT) {
        b->busy++;
        b_flush(b);
        b_event_end(b);
        if (b->m.state < SQ_ENGINE__MX_HELLO)
            return;
    }
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
        b_read(b);
}

void sq_engine__bus_open(struct sq_engine__busconn *b)
{
    if (b->was_open)
        b->m.w->c.bus.reconnects++;
    b->was_open = true;
    b->busy++;
    /* counted as opened: a flow's side connection (flowbus.c) too */
    sq_engine__mux_open(&b->m, b->now ? b->now : sq_now_ns());
    b_event_end(b);
}

/* ---- a VU's message: the skeleton of natsdrv.c and mqttdrv.c ---- */

void sq_engine__bus_complete(struct sq_engine__busconn *b, struct sq_engine__conn *c, size_t bytes)
{
    int64_t now = b->now ? b->now : sq_now_ns();
    sq_engine__busdrv_of(c->w)->vus[c->local].out = UINT64_MAX; /* its publish completed */
    c->rd.body.bytes = bytes;
    if (c->fb_ns == 0)
        c->fb_ns = now;
    sq_engine__vu_complete(c, now);
    sq_engine__vu_next(c, now);
}

void sq_engine__bus_vu_fail(struct sq_engine__conn *c, enum sq_errk k)
{
    sq_engine__vu_fail(c, k);
    sq_engine__vu_replace(c);
}

void sq_engine__bus_batch_complete(struct sq_engine__busconn *b)
{
    struct sq_engine__worker *w = b->m.w;
    const struct sq_engine__busvu *vus = sq_engine__busdrv_of(w)->vus;
    for (uint64_t k = sq_engine__bus_batch_take(b); k > 0 && b->fifo.len > 0; k--) {
        uint64_t e = sq_engine__ring_pop(&b->fifo);
        uint32_t local = (uint32_t)(e >> 32), gen = (uint32_t)e;
        struct sq_engine__conn *c = &w->conns[local];
        if (c->state == CONN_ACTIVE && vus[local].gen == gen)
            sq_engine__bus_complete(b, c, 0);
        if (b->broken)
            return;
    }
}

int sq_engine__bus_render(struct sq_engine__busdrv *d, struct sq_engine__conn *c, size_t nh,
                          struct sq_engine__busmsg *m)
{
    struct sq_engine__worker *w = c->w;
    const struct sq_bus_config *bus = d->bus;
    char stamp[SQ_STAMP_MAX];
    struct sq_str st = {stamp, 0};
    struct sq_tmpl_ctx ctx = {
        .vu = sq_engine__vu_number(w, c->local),
        .iteration = d->vus[c->local].iter++,
        .rng = sq_engine__vu_rng(c),
        .stamp = &st,
    };
    m->seq = UINT64_MAX;
    if (bus->stamped) {
        struct sq_engine__busvu *v = &d->vus[c->local];
        if (SQ_UNLIKELY(v->out != UINT64_MAX)) /* its last message never completed */
            sq_engine__unfinished(w, v->out);
        st.len = sq_engine__stamp(w, &m->seq, stamp);
        v->out = m->seq;
        w->c.bus.stamped++;
    }
    m->payload = d->payload;
    m->len = d->payload_len;
    if (!m->payload) {
        sq_buf_reset(&d->scratch);
        if (sq_tmpl_render(bus->payload, &ctx, &d->scratch) < 0)
            return SQ_ERRK_WRITE;
        m->payload = d->scratch.p ? d->scratch.p : "";
        m->len = d->scratch.len;
    }
    if (!nh)
        return 0;
    sq_buf_reset(&d->hscratch);
    size_t off[SQ_BUS_MAX_HEADERS + 1];
    for (size_t i = 0; i < nh; i++) {
        off[i] = d->hscratch.len;
        if (sq_tmpl_render(bus->headers[i].value, &ctx, &d->hscratch) < 0)
            return SQ_ERRK_WRITE;
    }
    off[nh] = d->hscratch.len;
    for (size_t i = 0; i < nh; i++) /* spans once the buffer no longer moves */
        m->vals[i] = (struct sq_str){d->hscratch.p + off[i], off[i + 1] - off[i]};
    return 0;
}

/* ---- the driver table (engine/driver.h), for both protocols ---- */

static int drv_init(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global)
{
    const struct sq_bus_config *bus = w->cfg->bus;
    const struct sq_engine__bus_ops *ops =
        bus->kind == SQ_BUS_MQTT ? &sq_engine__mqtt_ops : &sq_engine__nats_ops;
    struct sq_engine__busdrv *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    w->proto = d;
    d->ops = ops;
    d->bus = bus;
    d->window = bus->window ? bus->window : 1;
    d->quarter = d->window >= 4 ? d->window / 4 : 1;
    d->nconn = nconn;
    d->conns = calloc(nconn ? nconn : 1, ops->conn_size);
    d->vus = calloc(w->nconns ? w->nconns : 1, sizeof(*d->vus));
    if (!d->conns || !d->vus)
        return -ENOMEM;
    for (uint32_t i = 0; i < w->nconns; i++)
        d->vus[i].seq = d->vus[i].out = UINT64_MAX;
    if (sq_tmpl_static(bus->payload, &d->payload, &d->payload_len) && !d->payload)
        d->payload = "";
    for (uint32_t k = 0; k < nconn; k++) {
        struct sq_engine__busconn *b = sq_engine__bus_at(d, k);
        uint32_t first = k * d->window, n = d->window;
        if (first + n > w->nconns)
            n = first < w->nconns ? w->nconns - first : 0;
        sq_engine__mux_init(&b->m, w, first, n, first_global + k, b_on_io);
        b->m.hold = bus->idle; /* --idle: the VUs never publish */
        b->tls = bus->tls ? w->cfg->tls : NULL;
        if (bus->kind == SQ_BUS_MQTT || bus->tls_first)
            b->m.tc = b->tls; /* TLS right after the connect; NATS otherwise upgrades after INFO */
        b->ops = ops;
        b->max_unit = 1024 * 1024;
        sq_timer_init(&b->kick, b_on_kick);
        if (bus->ws_path && sq_engine__busws_attach(b, bus->ws_path, bus->ws_host) < 0)
            return -ENOMEM;
    }
    return ops->init ? ops->init(w) : 0;
}

static void drv_dispose(struct sq_engine__worker *w)
{
    struct sq_engine__busdrv *d = sq_engine__busdrv_of(w);
    if (!d)
        return;
    if (d->ops->dispose)
        d->ops->dispose(w);
    for (uint32_t k = 0; d->conns && k < d->nconn; k++)
        b_dispose(sq_engine__bus_at(d, k));
    sq_buf_dispose(&d->scratch);
    sq_buf_dispose(&d->hscratch);
    free(d->conns);
    free(d->vus);
    free(d->msg);
    free(d);
    w->proto = NULL;
}

static void drv_connect(struct sq_engine__conn *c)
{
    sq_engine__mux_join(&sq_engine__bus_of(c)->m, c);
}

static void drv_send(struct sq_engine__conn *c)
{
    struct sq_engine__busdrv *d = c->w->proto;
    struct sq_engine__busconn *b = sq_engine__bus_at(d, c->local / d->window);
    c->rd.status = 0;
    c->rd.head_bytes = 0;
    c->rd.body.bytes = 0;
    c->rd.content_encoding = 0;
    if (SQ_UNLIKELY(!sq_engine__bus_is_open(b) || b->broken)) {
        sq_engine__bus_vu_fail(c, SQ_ERRK_CLOSED);
        return;
    }
    d->vus[c->local].gen++; /* whatever answered an earlier request of c is late from now on */
    int kind = d->ops->send(d, b, c);
    if (SQ_UNLIKELY(kind != 0)) {
        sq_engine__bus_vu_fail(c, (enum sq_errk)kind);
        return;
    }
    c->wdone_ns = c->sent_ns;
}

static void drv_close(struct sq_engine__conn *c)
{
    if (c->state != CONN_ACTIVE)
        return;
    struct sq_engine__busdrv *d = sq_engine__busdrv_of(c->w);
    d->vus[c->local].gen++; /* whatever answers its request now is late */
    if (d->ops->release)
        d->ops->release(sq_engine__bus_of(c), c);
}

/* Bytes queued and not yet written (framed or not). */
static bool b_pending(struct sq_engine__busconn *b)
{
    if (b->out.len > b->out_off)
        return true;
    if (SQ_LIKELY(b->ws == NULL))
        return false;
    size_t *off;
    struct sq_buf *o = sq_engine__busws_wire(b, &off);
    return o->len > *off;
}

void sq_engine__bus_sweep_one(struct sq_engine__busconn *b, int64_t now)
{
    if (sq_engine__mux_sweep(&b->m, now))
        return;
    if (b->m.state == SQ_ENGINE__MX_HELLO && b->m.x.phase == SQ_ENGINE__XP_HANDSHAKE) {
        if (sq_engine__xport_expired(&b->m.x, b->m.w, now)) /* counted: handshake timed out */
            b_hello_failed(b);
        return;
    }
    if (b->m.state == SQ_ENGINE__MX_HELLO && now - b->hello_ns >= b->m.w->cfg->connect_timeout_ns) {
        sq_engine__connect_error(b->m.w, -ETIMEDOUT); /* the broker never finished its greeting */
        b_hello_failed(b);
    } else if (sq_engine__bus_is_open(b)) {
        if (b->ops->tick)
            b->ops->tick(b, now);
        if (sq_engine__bus_is_open(b) && b_pending(b) && !b->busy && !(b->m.x.io.events & EPOLLOUT))
            b_flush(b);
    }
}

void sq_engine__bus_init_side(struct sq_engine__busconn *b, struct sq_engine__worker *w,
                              const struct sq_engine__bus_ops *ops, const struct sq_addr *addr)
{
    memset(b, 0, sizeof(*b));
    sq_engine__mux_init(&b->m, w, 0, 0, 0, b_on_io);
    b->m.pin = addr;
    b->ops = ops;
    b->max_unit = 1024 * 1024;
    sq_timer_init(&b->kick, b_on_kick);
}

void sq_engine__bus_start(struct sq_engine__busconn *b)
{
    if (b->m.state == SQ_ENGINE__MX_CLOSED)
        sq_engine__mux_connect(&b->m);
}

void sq_engine__bus_dispose_side(struct sq_engine__busconn *b)
{
    b_teardown(b);
    b_dispose(b);
}

static void drv_sweep(struct sq_engine__worker *w, int64_t now)
{
    struct sq_engine__busdrv *d = sq_engine__busdrv_of(w);
    for (uint32_t k = 0; k < d->nconn; k++)
        sq_engine__bus_sweep_one(sq_engine__bus_at(d, k), now);
}

/* The end of the run: what is queued still goes to the broker (so its counts match what was
 * sent), with a bounded wait, then every connection closes without a callback. */
static void drv_close_all(struct sq_engine__worker *w)
{
    struct sq_engine__busdrv *d = sq_engine__busdrv_of(w);
    for (uint32_t i = 0; d && i < w->nconns; i++) /* stamped, never completed: unfinished */
        if (d->vus[i].out != UINT64_MAX) {
            sq_engine__unfinished(w, d->vus[i].out);
            d->vus[i].out = UINT64_MAX;
        }
    for (uint32_t k = 0; d && k < d->nconn; k++) {
        struct sq_engine__busconn *b = sq_engine__bus_at(d, k);
        struct sq_buf *o = &b->out;
        size_t *off = &b->out_off;
        if (b->ws && sq_engine__busws_wrap(b) == 0)
            o = sq_engine__busws_wire(b, &off);
        if (sq_engine__bus_is_open(b) && o->len > *off && !b->broken) {
            int fd = b->m.x.io.fd, fl = fcntl(fd, F_GETFL);
            struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
            if (fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 &&
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0) {
                while (*off < o->len) {
                    ssize_t n = sq_engine__xport_send(&b->m.x, o->p + *off, o->len - *off);
                    if (n <= 0)
                        break;
                    w->c.bytes_sent += (uint64_t)n;
                    *off += (size_t)n;
                }
            }
        }
        b_teardown(b);
    }
}

const struct sq_engine__driver sq_engine__bus_driver = {
    .name = "bus",
    .init = drv_init,
    .dispose = drv_dispose,
    .connect = drv_connect,
    .send = drv_send,
    .close = drv_close,
    .sweep = drv_sweep,
    .close_all = drv_close_all,
};
