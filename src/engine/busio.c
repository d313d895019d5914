/* engine/busio.c - broker connections for the bus drivers (see busio.h).
 *
 * States: a connection is CLOSED, BACKOFF (waiting to retry after a failed connect), CONNECTING
 * (TCP), HELLO (the protocol's greeting: INFO/CONNECT/PONG, CONNECT/CONNACK/SUBACK) or OPEN. Its
 * VUs mirror it: CONNECTING or BACKOFF while it is not open, then IDLE, ACTIVE, PACING as the
 * worker moves them. Only an open connection takes messages.
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
#include <unistd.h>

#include "base/clock.h"
#include "engine/bus.h"
#include "engine/driver.h"
#include "engine/worker.h"
#include "net/egress.h"
#include "net/sock.h"

#define BACKOFF_MIN_NS    (10 * SQ_NS_PER_MS)
#define BACKOFF_MAX_SHIFT 7
#define READS_PER_EVENT   4 /* reads per readiness event before the loop gets a turn */

static void b_on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev);
static void b_flush(struct sq_busio *b);

struct sq_busdrv *sq_busdrv_of(const struct sq_engine__worker *w)
{
    return w->proto;
}

struct sq_busio *sq_busio_at(struct sq_busdrv *d, uint32_t k)
{
    return (struct sq_busio *)(void *)(d->conns + (size_t)k * d->ops->conn_size);
}

struct sq_busio *sq_busio_of(struct sq_engine__conn *c)
{
    struct sq_busdrv *d = sq_busdrv_of(c->w);
    return sq_busio_at(d, c->local / d->window);
}

static const struct sq_busio_ops *ops_of(const struct sq_busio *b)
{
    return b->ops;
}

/* VUs that wait for the connection to (re)open. */
static bool waiting(const struct sq_engine__conn *c)
{
    return c->state == CONN_CONNECTING || c->state == CONN_BACKOFF || c->state == CONN_CLOSED;
}

static void set_waiting(struct sq_busio *b, uint8_t vs)
{
    struct sq_engine__worker *w = b->w;
    for (uint32_t i = b->first; i < b->first + b->n; i++)
        if (waiting(&w->conns[i]))
            w->conns[i].state = vs;
}

/* Closes the socket and forgets every byte in both directions; no VU callback runs. */
static void b_teardown(struct sq_busio *b)
{
    struct sq_engine__worker *w = b->w;
    sq_timer_stop(w->loop, &b->timer);
    sq_timer_stop(w->loop, &b->kick);
    if (b->io.fd >= 0) {
        sq_io_stop(w->loop, &b->io);
        close(b->io.fd);
        b->io.fd = -1;
    }
    sq_buf_reset(&b->out);
    b->out_off = 0;
    sq_buf_reset(&b->spill);
    b->need = 0;
    b->dirty = false;
    b->broken = 0;
    if (b->state >= B_HELLO)
        ops_of(b)->reset(b);
    b->state = B_CLOSED;
}

static void b_connect(struct sq_busio *b);

static void b_connect_failed(struct sq_busio *b, int err)
{
    struct sq_engine__worker *w = b->w;
    if (err)
        sq_engine__connect_error(w, err);
    b_teardown(b);
    uint8_t vs = CONN_CLOSED;
    if (w->sending) {
        int64_t delay = BACKOFF_MIN_NS << b->backoff;
        if (b->backoff < BACKOFF_MAX_SHIFT)
            b->backoff++;
        if (sq_timer_start(w->loop, &b->timer, sq_loop_now(w->loop) + delay) == 0) {
            b->state = B_BACKOFF;
            vs = CONN_BACKOFF;
        }
    }
    set_waiting(b, vs);
}

static void b_connect(struct sq_busio *b)
{
    struct sq_engine__worker *w = b->w;
    const struct sq_addr *a =
        b->addr ? b->addr : &w->cfg->addrs[b->global % (uint32_t)w->cfg->naddrs];
    struct sq_addr fresh;
    if (!b->addr && w->cfg->dns_ttl_ns > 0) {
        sq_engine__addrs_load(&w->run->addrs, b->global, &fresh);
        a = &fresh;
    }
    if (SQ_UNLIKELY(w->cfg->egress != NULL) &&
        sq_egress_allows(w->cfg->egress, a, SQ_EGRESS_CONNECT) < 0) {
        b_connect_failed(b, -EACCES); /* the run's egress policy (net/egress.h) */
        return;
    }
    int fd = sq_connect_start(a);
    if (fd < 0) {
        b_connect_failed(b, fd);
        return;
    }
    int rc = sq_io_start(w->loop, &b->io, fd, EPOLLOUT, b_on_io);
    if (rc < 0) {
        close(fd);
        b_connect_failed(b, rc);
        return;
    }
    b->state = B_CONNECTING;
    b->since_ns = sq_loop_now(w->loop);
    set_waiting(b, CONN_CONNECTING);
}

static void b_on_backoff(struct sq_loop *loop, struct sq_timer *t)
{
    SQ_UNUSED(loop);
    struct sq_busio *b = SQ_CONTAINER_OF(t, struct sq_busio, timer);
    b->state = B_CLOSED;
    if (b->w->sending) {
        b_connect(b);
        return;
    }
    set_waiting(b, CONN_CLOSED);
}

/* The connection is gone: requests out on it fail with kind, every VU asks for it again. */
static void b_down(struct sq_busio *b, enum sq_errk kind)
{
    struct sq_engine__worker *w = b->w;
    bool hello = b->state < B_OPEN;
    b_teardown(b);
    if (hello && kind != SQ_ERRK_CLOSED) {
        /* refused during the greeting (a CONNACK refusal, a -ERR on CONNECT): like a failed
         * connect, it is retried after a backoff */
        b_connect_failed(b, 0);
        return;
    }
    if (kind == SQ_ERRK_CLOSED)
        w->c.conns_closed_by_server++;
    for (uint32_t i = b->first; i < b->first + b->n; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        if (c->state == CONN_ACTIVE) {
            sq_engine__vu_fail(c, kind);
        } else if (!waiting(c)) {
            sq_timer_stop(w->loop, &c->timer);
            c->state = CONN_CLOSED;
        }
    }
    if (hello) {
        b_connect_failed(b, 0); /* closed during the greeting: back off */
        return;
    }
    for (uint32_t i = b->first; i < b->first + b->n; i++)
        if (w->conns[i].state == CONN_CLOSED)
            sq_engine__vu_replace(&w->conns[i]);
}

void sq_busio_fail(struct sq_busio *b, enum sq_errk kind)
{
    if (b->busy) {
        if (!b->broken)
            b->broken = 1 + (int)kind;
        return;
    }
    b_down(b, kind);
}

void sq_busio_note(struct sq_busio *b, const char *msg, size_t len, bool count)
{
    struct sq_engine__worker *w = b->w;
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

static void b_kick(struct sq_busio *b)
{
    if (b->busy) {
        b->dirty = true;
        return;
    }
    if (!sq_timer_active(&b->kick) &&
        sq_timer_start(b->w->loop, &b->kick, sq_loop_now(b->w->loop)) < 0)
        b_flush(b); /* no room in the timer heap: write now */
}

static void b_on_kick(struct sq_loop *loop, struct sq_timer *t)
{
    SQ_UNUSED(loop);
    struct sq_busio *b = SQ_CONTAINER_OF(t, struct sq_busio, kick);
    if (b->state >= B_HELLO)
        b_flush(b);
}

char *sq_busio_room(struct sq_busio *b, size_t n)
{
    if (b->out_off && b->out_off == b->out.len) {
        b->out.len = 0;
        b->out_off = 0;
    }
    if (sq_buf_reserve(&b->out, n) < 0)
        return NULL;
    return b->out.p + b->out.len;
}

void sq_busio_commit(struct sq_busio *b, size_t n)
{
    b->out.len += n;
    if (b->busy && b->out.len - b->out_off >= SQ_BUSIO_FLUSH_AT)
        b_flush(b); /* a long batch inside an event: let the broker start on it */
    else
        b_kick(b);
}

void sq_busio_write_now(struct sq_busio *b)
{
    b_flush(b);
}

int sq_busio_queue(struct sq_busio *b, const void *p, size_t n)
{
    char *r = sq_busio_room(b, n);
    if (!r)
        return -ENOMEM;
    memcpy(r, p, n);
    sq_busio_commit(b, n);
    return 0;
}

/* Writes what is queued (after the protocol's last word on the batch). A failure ends the
 * connection, or marks it broken when inside an event. */
static void b_flush(struct sq_busio *b)
{
    struct sq_engine__worker *w = b->w;
    if (b->state < B_HELLO || b->broken)
        return;
    sq_timer_stop(w->loop, &b->kick);
    b->dirty = false;
    ops_of(b)->before_write(b);
    bool blocked = false;
    while (b->out_off < b->out.len) {
        ssize_t n = send(b->io.fd, b->out.p + b->out_off, b->out.len - b->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            w->c.bytes_sent += (uint64_t)n;
            w->c.bus.flushes++;
            b->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            blocked = true;
            break;
        }
        sq_busio_fail(b, SQ_ERRK_WRITE);
        return;
    }
    b->wrote_ns = sq_loop_now(w->loop);
    if (!blocked) {
        b->out.len = 0;
        b->out_off = 0;
    } else if (b->out_off > b->out.cap / 2) {
        memmove(b->out.p, b->out.p + b->out_off, b->out.len - b->out_off);
        b->out.len -= b->out_off;
        b->out_off = 0;
    }
    if (sq_io_modify(w->loop, &b->io, blocked ? EPOLLIN | EPOLLOUT : EPOLLIN) < 0)
        sq_busio_fail(b, SQ_ERRK_WRITE);
}

/* ---- reads ---- */

/* Hands one unit to the protocol. Returns its length, 0 (partial), or -1 (the connection
 * broke: marked). */
static long b_unit(struct sq_busio *b, const char *p, size_t n, size_t *need)
{
    *need = 0;
    int rc = ops_of(b)->unit(b, p, n, need);
    if (rc < 0) {
        sq_busio_fail(b, SQ_ERRK_PARSE);
        return -1;
    }
    if (rc > 0 && (size_t)rc > n) {
        sq_busio_fail(b, SQ_ERRK_PARSE);
        return -1;
    }
    return rc;
}

/* Feeds one read's bytes (see the read invariant at the top). */
static void b_feed(struct sq_busio *b, const char *p, size_t n)
{
    while (b->spill.len > 0 && n > 0 && !b->broken) {
        size_t take = b->need > b->spill.len ? b->need - b->spill.len : 4096;
        if (take > n)
            take = n;
        if (b->spill.len + take > b->max_unit + 4096 || sq_buf_append(&b->spill, p, take) < 0) {
            sq_busio_fail(b, SQ_ERRK_PARSE);
            return;
        }
        p += take;
        n -= take;
        size_t need;
        long rc = b_unit(b, b->spill.p, b->spill.len, &need);
        if (rc < 0)
            return;
        if (rc == 0) {
            b->need = need;
            continue;
        }
        /* the unit ended inside the bytes just taken: give the rest back to the read */
        size_t rest = b->spill.len - (size_t)rc;
        p -= rest;
        n += rest;
        sq_buf_reset(&b->spill);
        b->need = 0;
    }
    while (n > 0 && !b->broken && b->state >= B_HELLO) {
        size_t need;
        long rc = b_unit(b, p, n, &need);
        if (rc < 0)
            return;
        if (rc == 0) {
            if (n > b->max_unit + 4096 || sq_buf_append(&b->spill, p, n) < 0) {
                sq_busio_fail(b, SQ_ERRK_PARSE);
                return;
            }
            b->need = need;
            return;
        }
        p += rc;
        n -= (size_t)rc;
    }
}

/* The end of an event: a failure found inside it, or the writes it queued. */
static void b_event_end(struct sq_busio *b)
{
    if (--b->busy > 0)
        return;
    if (b->broken) {
        enum sq_errk k = (enum sq_errk)(b->broken - 1);
        b->broken = 0;
        b_down(b, k);
        return;
    }
    if (b->dirty && b->state >= B_HELLO)
        b_flush(b);
}

static void b_read(struct sq_busio *b)
{
    struct sq_engine__worker *w = b->w;
    b->busy++;
    for (int i = 0; i < READS_PER_EVENT && b->state >= B_HELLO && !b->broken; i++) {
        ssize_t n = read(b->io.fd, w->rbuf, SQ_ENGINE_RBUF_SIZE);
        if (n > 0) {
            w->c.bytes_received += (uint64_t)n;
            b->now = sq_now_ns();
            b_feed(b, w->rbuf, (size_t)n);
            if (n < SQ_ENGINE_RBUF_SIZE)
                break;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        sq_busio_fail(b, SQ_ERRK_CLOSED); /* end of stream, or a reset */
        break;
    }
    b->now = 0;
    b_event_end(b);
}

static void b_connected(struct sq_busio *b)
{
    struct sq_engine__worker *w = b->w;
    int rc = sq_connect_result(b->io.fd);
    if (rc < 0) {
        b_connect_failed(b, rc);
        return;
    }
    int64_t now = sq_now_ns();
    b->connect_ns = now - b->since_ns;
    b->since_ns = now;
    b->state = B_HELLO;
    if (sq_io_modify(w->loop, &b->io, EPOLLIN) < 0) {
        b_connect_failed(b, -errno);
        return;
    }
    b->busy++;
    rc = ops_of(b)->hello(b);
    if (rc < 0 && !b->broken)
        b->broken = 1 + SQ_ERRK_CONNECT;
    b_event_end(b);
}

static void b_on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev)
{
    SQ_UNUSED(loop);
    struct sq_busio *b = SQ_CONTAINER_OF(io, struct sq_busio, io);
    if (b->state == B_CONNECTING) {
        b_connected(b);
        return;
    }
    if (ev & EPOLLOUT) {
        b->busy++;
        b_flush(b);
        b_event_end(b);
        if (b->state < B_HELLO)
            return;
    }
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
        b_read(b);
}

void sq_busio_open(struct sq_busio *b)
{
    struct sq_engine__worker *w = b->w;
    w->c.conns_opened++; /* a flow's side connection (flowbus.c) counts too */
    if (b->was_open)
        w->c.bus.reconnects++;
    b->was_open = true;
    b->backoff = 0;
    b->state = B_OPEN;
    int64_t now = b->now ? b->now : sq_now_ns();
    bool first = true;
    b->busy++;
    for (uint32_t i = b->first; i < b->first + b->n; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        if (c->state != CONN_CONNECTING && c->state != CONN_BACKOFF)
            continue;
        if (i - b->first >= b->usable) {
            c->state = CONN_BACKOFF; /* past what the broker takes at once: parked */
            continue;
        }
        c->state = CONN_IDLE;
        c->fresh = first; /* the setup lands on one request of the connection */
        first = false;
        c->connect_ns = b->connect_ns;
        c->tls_ns = 0;
        sq_engine__vu_next(c, now);
    }
    b_event_end(b);
}

/* ---- the driver table ---- */

int sq_busio_drv_init(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global,
                      const struct sq_busio_ops *ops)
{
    struct sq_busdrv *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    w->proto = d;
    d->ops = ops;
    d->bus = w->cfg->bus;
    d->window = d->bus->window ? d->bus->window : 1;
    d->nconn = nconn;
    d->conns = calloc(nconn ? nconn : 1, ops->conn_size);
    if (!d->conns)
        return -ENOMEM;
    for (uint32_t k = 0; k < nconn; k++) {
        struct sq_busio *b = sq_busio_at(d, k);
        b->w = w;
        b->ops = ops;
        b->io.fd = -1;
        b->first = k * d->window;
        b->n = d->window;
        if (b->first + b->n > w->nconns)
            b->n = b->first < w->nconns ? w->nconns - b->first : 0;
        b->global = first_global + k;
        b->usable = b->n;
        b->max_unit = 1024 * 1024;
        sq_timer_init(&b->timer, b_on_backoff);
        sq_timer_init(&b->kick, b_on_kick);
    }
    return ops->init ? ops->init(w) : 0;
}

void sq_busio_drv_dispose(struct sq_engine__worker *w)
{
    struct sq_busdrv *d = sq_busdrv_of(w);
    if (!d)
        return;
    if (d->ops->dispose)
        d->ops->dispose(w);
    for (uint32_t k = 0; d->conns && k < d->nconn; k++) {
        struct sq_busio *b = sq_busio_at(d, k);
        sq_buf_dispose(&b->out);
        sq_buf_dispose(&b->spill);
    }
    sq_buf_dispose(&d->scratch);
    sq_buf_dispose(&d->hscratch);
    free(d->conns);
    free(d);
    w->proto = NULL;
}

void sq_busio_drv_connect(struct sq_engine__conn *c)
{
    struct sq_busio *b = sq_busio_of(c);
    switch (b->state) {
    case B_OPEN:
        if (c->local - b->first >= b->usable) {
            c->state = CONN_BACKOFF; /* parked (see sq_busio_open) */
            return;
        }
        c->state = CONN_IDLE;
        c->fresh = false;
        sq_engine__vu_next(c, sq_loop_now(c->w->loop));
        return;
    case B_CONNECTING:
    case B_HELLO:
        c->state = CONN_CONNECTING;
        return;
    case B_BACKOFF:
        c->state = CONN_BACKOFF;
        return;
    default:
        c->state = CONN_CONNECTING;
        b_connect(b);
        return;
    }
}

void sq_busio_drv_send(struct sq_engine__conn *c)
{
    struct sq_busio *b = sq_busio_of(c);
    c->rd.status = 0;
    c->rd.head_bytes = 0;
    c->rd.body.bytes = 0;
    c->rd.content_encoding = 0;
    if (SQ_UNLIKELY(b->state != B_OPEN || b->broken)) {
        sq_engine__vu_fail(c, SQ_ERRK_CLOSED);
        sq_engine__vu_replace(c);
        return;
    }
    int kind = sq_busdrv_of(c->w)->ops->send(b, c);
    if (SQ_UNLIKELY(kind != 0)) {
        sq_engine__vu_fail(c, (enum sq_errk)kind);
        sq_engine__vu_replace(c);
        return;
    }
    c->wdone_ns = c->sent_ns;
}

void sq_busio_drv_close(struct sq_engine__conn *c)
{
    struct sq_busio *b = sq_busio_of(c);
    if (c->state == CONN_ACTIVE)
        sq_busdrv_of(c->w)->ops->release(b, c);
}

void sq_busio_sweep_one(struct sq_busio *b, int64_t now)
{
    int64_t limit = b->w->cfg->connect_timeout_ns;
    if (b->state == B_CONNECTING && now - b->since_ns >= limit) {
        b_connect_failed(b, -ETIMEDOUT);
    } else if (b->state == B_HELLO && now - b->since_ns >= limit) {
        b_connect_failed(b, -ETIMEDOUT); /* the broker never finished its greeting */
    } else if (b->state == B_OPEN) {
        if (b->ops->tick)
            b->ops->tick(b, now);
        if (b->state == B_OPEN && b->out.len > b->out_off && !b->busy && !(b->io.events & EPOLLOUT))
            b_flush(b);
    }
}

void sq_busio_drv_sweep(struct sq_engine__worker *w, int64_t now)
{
    struct sq_busdrv *d = sq_busdrv_of(w);
    for (uint32_t k = 0; k < d->nconn; k++)
        sq_busio_sweep_one(sq_busio_at(d, k), now);
}

void sq_busio_init_side(struct sq_busio *b, struct sq_engine__worker *w,
                        const struct sq_busio_ops *ops, const struct sq_addr *addr)
{
    memset(b, 0, sizeof(*b));
    b->w = w;
    b->ops = ops;
    b->addr = addr;
    b->io.fd = -1;
    b->max_unit = 1024 * 1024;
    sq_timer_init(&b->timer, b_on_backoff);
    sq_timer_init(&b->kick, b_on_kick);
}

void sq_busio_start(struct sq_busio *b)
{
    if (b->state == B_CLOSED)
        b_connect(b);
}

void sq_busio_dispose_side(struct sq_busio *b)
{
    b_teardown(b);
    sq_buf_dispose(&b->out);
    sq_buf_dispose(&b->spill);
}

/* The end of the run: what is queued still goes to the broker (so its counts match what was
 * sent), with a bounded wait, then every connection closes without a callback. */
void sq_busio_drv_close_all(struct sq_engine__worker *w)
{
    struct sq_busdrv *d = sq_busdrv_of(w);
    for (uint32_t k = 0; d && k < d->nconn; k++) {
        struct sq_busio *b = sq_busio_at(d, k);
        if (b->state == B_OPEN && b->out.len > b->out_off && !b->broken) {
            int fl = fcntl(b->io.fd, F_GETFL);
            struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
            if (fl >= 0 && fcntl(b->io.fd, F_SETFL, fl & ~O_NONBLOCK) == 0 &&
                setsockopt(b->io.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0) {
                while (b->out_off < b->out.len) {
                    ssize_t n = send(b->io.fd, b->out.p + b->out_off, b->out.len - b->out_off,
                                     MSG_NOSIGNAL);
                    if (n <= 0)
                        break;
                    w->c.bytes_sent += (uint64_t)n;
                    b->out_off += (size_t)n;
                }
            }
        }
        b_teardown(b);
    }
}
