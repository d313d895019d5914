/* engine/worker.c - the closed-loop HTTP/1.1 hot path.
 *
 * Each connection cycles CONNECTING -> ACTIVE (a request in flight) -> ACTIVE ... and is
 * replaced when the server closes it or an error ends it. Per request the steady state costs one
 * send(), one read() (usually), one clock read and no allocation: the request bytes are shared,
 * the response is read into the worker's buffer and parsed for framing only, and every fd stays
 * registered for EPOLLIN alone unless a write hits EAGAIN.
 *
 * Timeouts are found by a sweep of the worker's connections every 100 ms instead of a timer per
 * request: arming and disarming a heap timer on every request would cost more than the scan.
 *
 * Accounting invariant, per worker and so per run:
 *   c.sent == c.completed + c.failed + in_flight
 */
#include "engine/worker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "http/h1.h"
#include "loop/loop.h"
#include "stats/hist.h"

#define RBUF_SIZE         (64 * 1024)
#define SWEEP_NS          (100 * SQ_NS_PER_MS)
#define BACKOFF_MIN_NS    (10 * SQ_NS_PER_MS)
#define BACKOFF_MAX_SHIFT 7 /* 10 ms << 7 = 1.28 s */

enum conn_state {
    CONN_CLOSED,
    CONN_BACKOFF,    /* waiting to reconnect after a failed connect */
    CONN_CONNECTING, /* non-blocking connect in progress */
    CONN_IDLE,       /* open, no request in flight (the worker stopped sending) */
    CONN_ACTIVE,     /* a request is in flight (maybe still being written) */
};

struct sq_engine__conn {
    struct sq_io io; /* fd lives here */
    struct sq_engine__worker *w;
    int64_t since_ns; /* ACTIVE: when the request was sent; CONNECTING: connect start */
    uint32_t woff;    /* bytes of the request written so far */
    uint32_t index;   /* global connection number, picks the address */
    uint8_t state;
    uint8_t backoff;
    struct sq_timer retry;
    struct sq_h1_reader rd;
};

static const struct sq_h1_limits h1_limits = {.max_head_bytes = 64 * 1024, .max_headers = 128};

static void conn_connect(struct sq_engine__conn *c);
static void conn_send(struct sq_engine__conn *c, int64_t now);

static void publish(struct sq_engine__worker *w)
{
    __atomic_store_n(&w->live.progress, w->c.completed + w->c.failed, __ATOMIC_RELAXED);
    __atomic_store_n(&w->live.opened, w->c.conns_opened, __ATOMIC_RELAXED);
    __atomic_store_n(&w->live.connect_errors, w->c.errors[SQ_ERRK_CONNECT], __ATOMIC_RELAXED);
}

/* Closes the socket and forgets any request in flight (the caller has accounted for it). */
static void conn_close(struct sq_engine__conn *c)
{
    if (c->state >= CONN_CONNECTING) {
        sq_io_stop(c->w->loop, &c->io);
        close(c->io.fd);
        c->io.fd = -1;
    }
    if (c->state == CONN_ACTIVE)
        c->w->in_flight--;
    sq_h1_reader_dispose(&c->rd);
    sq_h1_reader_init(&c->rd, &h1_limits);
    c->state = CONN_CLOSED;
}

/* Ends the request in flight with an error of kind k. */
static void conn_fail(struct sq_engine__conn *c, enum sq_errk k)
{
    struct sq_engine__worker *w = c->w;
    w->c.errors[k]++;
    if (c->state == CONN_ACTIVE)
        w->c.failed++;
    conn_close(c);
}

/* Opens a fresh connection in place of a closed one, if the worker still sends. */
static void conn_replace(struct sq_engine__conn *c)
{
    if (c->w->sending)
        conn_connect(c);
}

static void retry_cb(struct sq_loop *loop, struct sq_timer *t)
{
    SQ_UNUSED(loop);
    struct sq_engine__conn *c = SQ_CONTAINER_OF(t, struct sq_engine__conn, retry);
    c->state = CONN_CLOSED;
    conn_replace(c);
}

static void connect_failed(struct sq_engine__conn *c, int err)
{
    struct sq_engine__worker *w = c->w;
    w->c.errors[SQ_ERRK_CONNECT]++;
    w->live.last_connect_err = err;
    __atomic_store_n(&w->live.connect_errors, w->c.errors[SQ_ERRK_CONNECT], __ATOMIC_RELAXED);
    conn_close(c);
    if (!w->sending)
        return;
    int64_t delay = BACKOFF_MIN_NS << c->backoff;
    if (c->backoff < BACKOFF_MAX_SHIFT)
        c->backoff++;
    if (sq_timer_start(w->loop, &c->retry, sq_loop_now(w->loop) + delay) == 0)
        c->state = CONN_BACKOFF;
}

static void on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev);

static void conn_connect(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    const struct sq_addr *a = &w->cfg->addrs[c->index % (uint32_t)w->cfg->naddrs];
    int fd = sq_connect_start(a);
    if (fd < 0) {
        connect_failed(c, fd);
        return;
    }
    int rc = sq_io_start(w->loop, &c->io, fd, EPOLLOUT, on_io);
    if (rc < 0) {
        close(fd);
        connect_failed(c, rc);
        return;
    }
    c->state = CONN_CONNECTING;
    c->since_ns = sq_loop_now(w->loop);
}

/* Writes what is left of the request. Registers for EPOLLOUT only after a short write. */
static void conn_write(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    size_t len = w->cfg->request_len;
    ssize_t n = send(c->io.fd, w->cfg->request + c->woff, len - c->woff, MSG_NOSIGNAL);
    if (n > 0) {
        w->c.bytes_sent += (uint64_t)n;
        c->woff += (uint32_t)n;
        if (c->woff == len) {
            if (c->io.events & EPOLLOUT && sq_io_modify(w->loop, &c->io, EPOLLIN) < 0) {
                conn_fail(c, SQ_ERRK_WRITE);
                conn_replace(c);
            }
            return;
        }
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        conn_fail(c, SQ_ERRK_WRITE);
        conn_replace(c);
        return;
    }
    if (sq_io_modify(w->loop, &c->io, EPOLLIN | EPOLLOUT) < 0) {
        conn_fail(c, SQ_ERRK_WRITE);
        conn_replace(c);
    }
}

/* Starts the next request on an open connection, or parks it when the worker is done. */
static void conn_send(struct sq_engine__conn *c, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    if (!w->sending || w->quota == 0) {
        c->state = CONN_IDLE;
        return;
    }
    if (w->quota != UINT64_MAX && --w->quota == 0)
        w->sending = false;
    w->c.sent++;
    w->in_flight++;
    c->state = CONN_ACTIVE;
    c->since_ns = now;
    c->woff = 0;
    sq_h1_reader_start(&c->rd, w->cfg->head_request);
    conn_write(c);
}

static void conn_complete(struct sq_engine__conn *c, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    int64_t us = (now - c->since_ns) / SQ_NS_PER_US;
    sq_hist_record(w->hist, us);
    unsigned cls = (unsigned)c->rd.status / 100;
    w->c.status[cls <= 5 ? cls : 0]++;
    w->c.completed++;
    w->in_flight--;
    c->state = CONN_IDLE;
}

static void conn_read(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    ssize_t n = read(c->io.fd, w->rbuf, RBUF_SIZE);
    if (n > 0) {
        w->c.bytes_received += (uint64_t)n;
        size_t off = 0;
        while (off < (size_t)n) {
            if (c->state != CONN_ACTIVE) {
                /* Bytes nobody asked for: the stream can no longer be trusted. */
                w->c.errors[SQ_ERRK_PARSE]++;
                conn_close(c);
                conn_replace(c);
                return;
            }
            size_t used = 0;
            int rc = sq_h1_reader_feed(&c->rd, w->rbuf + off, (size_t)n - off, &used);
            off += used;
            if (rc == 0)
                return;
            if (rc < 0) {
                conn_fail(c, SQ_ERRK_PARSE);
                conn_replace(c);
                return;
            }
            int64_t now = sq_now_ns();
            conn_complete(c, now);
            if (!c->rd.keep_alive) {
                w->c.conns_closed_by_server++;
                conn_close(c);
                conn_replace(c);
                return;
            }
            conn_send(c, now);
            if (c->state != CONN_ACTIVE)
                return; /* parked, or replaced after a failed write: drop the rest */
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    /* End of stream or a reset. A response delimited by the close is complete now. */
    if (c->state == CONN_ACTIVE && n == 0 && sq_h1_reader_eof(&c->rd) == 1) {
        conn_complete(c, sq_now_ns());
        w->c.conns_closed_by_server++;
        conn_close(c);
    } else if (c->state == CONN_ACTIVE) {
        conn_fail(c, SQ_ERRK_CLOSED);
    } else {
        w->c.conns_closed_by_server++;
        conn_close(c);
    }
    conn_replace(c);
}

static void on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev)
{
    SQ_UNUSED(loop);
    struct sq_engine__conn *c = SQ_CONTAINER_OF(io, struct sq_engine__conn, io);
    struct sq_engine__worker *w = c->w;
    if (c->state == CONN_CONNECTING) {
        int rc = sq_connect_result(c->io.fd);
        if (rc < 0) {
            connect_failed(c, rc);
            return;
        }
        w->c.conns_opened++;
        c->backoff = 0;
        if (sq_io_modify(w->loop, &c->io, EPOLLIN) < 0) {
            connect_failed(c, -errno);
            return;
        }
        c->state = CONN_IDLE;
        conn_send(c, sq_now_ns());
        return;
    }
    if ((ev & EPOLLOUT) && c->state == CONN_ACTIVE && c->woff < w->cfg->request_len) {
        conn_write(c);
        if (c->state < CONN_CONNECTING)
            return;
    }
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
        conn_read(c);
}

/* Every 100 ms: time out slow requests and connects, publish live figures. */
static void sweep(struct sq_engine__worker *w, int64_t now)
{
    const struct sq_run_config *cfg = w->cfg;
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        if (c->state == CONN_ACTIVE && now - c->since_ns >= cfg->timeout_ns) {
            conn_fail(c, SQ_ERRK_TIMEOUT);
            conn_replace(c);
        } else if (c->state == CONN_CONNECTING && now - c->since_ns >= cfg->connect_timeout_ns) {
            connect_failed(c, -ETIMEDOUT);
        }
    }
    publish(w);
}

int sq_engine__worker_init(struct sq_engine__worker *w, const struct sq_run_config *cfg,
                           uint32_t nconns, uint32_t first_conn, uint64_t quota, const int *abort)
{
    memset(w, 0, sizeof(*w));
    w->cfg = cfg;
    w->nconns = nconns;
    w->first_conn = first_conn;
    w->quota = quota;
    w->abort = abort;
    int rc = sq_loop_new(&w->loop);
    if (rc < 0)
        return rc;
    w->conns = calloc(nconns, sizeof(*w->conns));
    w->rbuf = malloc(RBUF_SIZE);
    if (!w->conns || !w->rbuf)
        return -ENOMEM;
    rc = sq_latency_hist_new(&w->hist);
    if (rc < 0)
        return rc;
    for (uint32_t i = 0; i < nconns; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        c->w = w;
        c->io.fd = -1;
        c->index = first_conn + i;
        c->state = CONN_CLOSED;
        sq_timer_init(&c->retry, retry_cb);
        sq_h1_reader_init(&c->rd, &h1_limits);
    }
    return 0;
}

void sq_engine__worker_dispose(struct sq_engine__worker *w)
{
    if (w->conns) {
        for (uint32_t i = 0; i < w->nconns; i++)
            sq_h1_reader_dispose(&w->conns[i].rd);
    }
    free(w->conns);
    free(w->rbuf);
    sq_hist_free(w->hist);
    sq_loop_free(w->loop);
    memset(w, 0, sizeof(*w));
}

void *sq_engine__worker_main(void *arg)
{
    struct sq_engine__worker *w = arg;
    struct sq_loop *loop = w->loop;
    w->sending = w->quota > 0;
    w->start_ns = sq_loop_update_now(loop);
    for (uint32_t i = 0; i < w->nconns && w->sending; i++)
        conn_connect(&w->conns[i]);
    int64_t next_sweep = w->start_ns + SWEEP_NS;
    for (;;) {
        int64_t now = sq_loop_now(loop);
        int64_t wait = next_sweep - now;
        if (w->deadline_ns && w->deadline_ns - now < wait)
            wait = w->deadline_ns - now;
        if (wait < 0)
            wait = 0;
        if (sq_loop_run_once(loop, wait) < 0)
            break;
        now = sq_loop_now(loop);
        if (now >= next_sweep) {
            sweep(w, now);
            next_sweep = now + SWEEP_NS;
        }
        if (__atomic_load_n(w->abort, __ATOMIC_RELAXED))
            break;
        if (w->deadline_ns && now >= w->deadline_ns)
            break; /* a timed run ends on time; what is in flight is reported as such */
        if (!w->sending && w->in_flight == 0)
            break;
    }
    w->end_ns = sq_loop_update_now(loop);
    w->sending = false;
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        sq_timer_stop(loop, &c->retry);
        if (c->state >= CONN_CONNECTING) {
            sq_io_stop(loop, &c->io);
            close(c->io.fd);
        }
        c->state = CONN_CLOSED; /* in_flight keeps counting what was still out */
    }
    publish(w);
    __atomic_store_n(&w->live.done, 1, __ATOMIC_RELEASE);
    return NULL;
}
