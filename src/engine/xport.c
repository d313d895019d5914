/* engine/xport.c - the one transport: connect, TLS handshake, their timings and accounting, for
 * a VU's own connection and for a connection shared by a window of VUs (see xport.h).
 *
 * Nothing here runs per request: a connection pays it once when it opens. The request path
 * only crosses the inline sq_engine__xport_recv / _send of xport.h.
 *
 * The setup machine: CLOSED -> CONNECTING (sq_connect_start, EPOLLOUT) -> [PROXY (the CONNECT
 * written, its answer read, EPOLLIN)] -> [HANDSHAKE (TLS, EPOLLIN or EPOLLOUT as OpenSSL
 * wants)] -> OPEN (EPOLLIN). A protocol that starts in the clear (NATS: INFO, then TLS) goes
 * OPEN -> HANDSHAKE -> OPEN through sq_engine__xport_starttls. Each failure on the way is
 * counted once, here (a connect error with its errno, or a TLS error with its message), and
 * leaves the transport CLOSED; what the owner does then (a VU backs off alone, a shared
 * connection with all its VUs) is the owner's layer below.
 *
 * --connect-rate: before a connect starts, the owner asks for a turn (wait_turn): each worker
 * hands out turns pace_ns apart (the run's rate split evenly among its workers), and a connect
 * whose turn is later waits on its owner's timer (a VU: CONN_QUEUED; a shared connection:
 * MX_QUEUED, its VUs CONN_QUEUED), then connects with pace_bypass set. A queued VU keeps the
 * pool unsettled, so the run still starts only once every connection of the pool is open.
 */
#include "engine/xport.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "engine/driver.h"
#include "engine/worker.h"
#include "net/egress.h"

#define BACKOFF_MIN_NS    (10 * SQ_NS_PER_MS)
#define PROXY_HEAD_MAX    8192 /* the most of a proxy's answer to CONNECT read */
#define BACKOFF_MAX_SHIFT 7

/* ---- the transport ---- */

const struct sq_addr *sq_engine__xport_addr(const struct sq_engine__worker *w,
                                            const struct sq_addr *pin, uint32_t global,
                                            struct sq_addr *tmp)
{
    if (pin)
        return pin;
    if (SQ_UNLIKELY(w->addr != NULL))
        return w->addr;                       /* a wrk script's thread.addr */
    if (SQ_UNLIKELY(w->cfg->norigins != 0)) { /* --urls on several hosts: the connection's own */
        const struct sq_run_origin *o = &w->cfg->origins[global % w->cfg->norigins];
        return &o->addrs[(global / w->cfg->norigins) % (uint32_t)o->naddrs];
    }
    if (w->cfg->dns_ttl_ns > 0) {
        sq_engine__addrs_load(&w->run->addrs, global, tmp);
        return tmp;
    }
    return &w->cfg->addrs[global % (uint32_t)w->cfg->naddrs];
}

/* A failed setup: counted (err < 0; 0: counted already), the socket gone. */
static int setup_failed(struct sq_engine__xport *x, struct sq_engine__worker *w, int err)
{
    if (err < 0)
        sq_engine__connect_error(w, err);
    sq_engine__xport_close(x, w->loop);
    return err < 0 ? err : -EPROTO;
}

static int tls_failed(struct sq_engine__xport *x, struct sq_engine__worker *w, const char *msg)
{
    sq_engine__tls_error(w, msg, true);
    return setup_failed(x, w, 0);
}

/* Probe after the connect (SQ_CONNECT_PROBE)? While probes find connections up (loopback, a
 * near peer), every connect probes; after PROBE_MISSES misses in a row one connect in 64 does,
 * so a far peer pays a probe for 1/64 of its connects. */
#define PROBE_MISSES 4

enum { XP_FAM_TCP4 = 1, XP_FAM_TCP6 = 2 }; /* x->fam */

static bool probe_now(struct sq_engine__worker *w)
{
    return w->probe_misses < PROBE_MISSES || (++w->probe_tick & 63) == 0;
}

/* eager: the owner steps the transport at once when it is up (x->up), so it is registered for
 * EPOLLIN from the start; otherwise for EPOLLOUT, whose event steps it. */
static int open_as(struct sq_engine__xport *x, struct sq_engine__worker *w,
                   const struct sq_addr *pin, uint32_t global, sq_io_cb on_io, bool eager,
                   unsigned opts)
{
    struct sq_addr tmp;
    const struct sq_addr *a = sq_engine__xport_addr(w, pin, global, &tmp);
    /* the run's egress policy, the last line of defence: on the address itself, before any
     * packet (net/egress.h) */
    if (SQ_UNLIKELY(w->cfg->egress != NULL) &&
        sq_egress_allows(w->cfg->egress, a, SQ_EGRESS_CONNECT) < 0) {
        sq_engine__connect_error(w, -EACCES);
        return -EACCES;
    }
    /* a source address (--source-addrs, or the loopback spread): the connection's number picks
     * it, round-robin, when its family is the destination's */
    const struct sq_addr *src = NULL;
    if (SQ_UNLIKELY(w->cfg->nsrc != 0)) {
        src = &w->cfg->src_addrs[global % w->cfg->nsrc];
        if (src->ss.ss_family != a->ss.ss_family)
            src = NULL;
    }
    /* a tunnel through the run's proxy: only to the run's own addresses (the proxy's), not to
     * a flow's pinned broker or a wrk script's thread.addr */
    x->via_proxy = w->cfg->proxy_connect && !pin && !w->addr;
    if (x->via_proxy || a->ss.ss_family == AF_UNIX)
        opts &= ~(unsigned)SQ_CONNECT_LAZY_NODELAY; /* the CONNECT is a write of its own */
    /* the socket of x's last connection, when it was kept (sq_engine__xport_park): it is
     * still in the epoll set, for this io */
    int spare = -1;
    uint8_t fam = a->ss.ss_family == AF_INET    ? XP_FAM_TCP4
                  : a->ss.ss_family == AF_INET6 ? XP_FAM_TCP6
                                                : 0;
    if (SQ_UNLIKELY(w->spare_x == x) && !src && !x->via_proxy && fam == x->fam) {
        spare = w->spare_fd;
        w->spare_x = NULL;
    }
    bool probe = eager && probe_now(w), up = false;
    int fd = sq_connect_on(spare, a, src, opts | (probe ? SQ_CONNECT_PROBE : 0), &up);
    if (fd < 0) {
        sq_engine__connect_error(w, fd);
        return fd;
    }
    if (probe)
        w->probe_misses = up ? 0 : (uint8_t)(w->probe_misses + (w->probe_misses < PROBE_MISSES));
    x->up = up;
    x->nagle = opts & SQ_CONNECT_LAZY_NODELAY ? 1 : 0;
    x->fam = fam;
    uint32_t events = up && eager ? EPOLLIN : EPOLLOUT;
    int rc = spare >= 0 ? sq_io_unpark(w->loop, &x->io, fd, events, on_io)
                        : sq_io_start(w->loop, &x->io, fd, events, on_io);
    if (rc < 0) {
        close(fd);
        x->io.fd = -1;
        sq_engine__connect_error(w, rc);
        return rc;
    }
    x->tls = NULL;
    x->phase = SQ_ENGINE__XP_CONNECTING;
    x->pgot = x->pstatus = 0;
    x->pmatch = 0;
    x->since_ns = sq_loop_now(w->loop);
    x->connect_ns = x->tls_ns = 0;
    return 0;
}

int sq_engine__xport_open(struct sq_engine__xport *x, struct sq_engine__worker *w,
                          const struct sq_addr *pin, uint32_t global, sq_io_cb on_io)
{
    return open_as(x, w, pin, global, on_io, false, 0);
}

/* The transport is usable: only reads wake it from now on (a driver registers EPOLLOUT after a
 * short write). */
static int ready(struct sq_engine__xport *x, struct sq_engine__worker *w, int64_t now)
{
    if (sq_io_modify(w->loop, &x->io, EPOLLIN) < 0)
        return setup_failed(x, w, -errno);
    x->phase = SQ_ENGINE__XP_OPEN;
    x->since_ns = now;
    return SQ_ENGINE__XP_READY;
}

static int handshake(struct sq_engine__xport *x, struct sq_engine__worker *w)
{
    int rc = sq_tls_handshake(x->tls);
    if (rc == -EAGAIN) {
        if (sq_io_modify(w->loop, &x->io, sq_tls_want_write(x->tls) ? EPOLLOUT : EPOLLIN) < 0)
            return setup_failed(x, w, -errno);
        return SQ_ENGINE__XP_WAIT;
    }
    if (rc < 0)
        return tls_failed(x, w, sq_tls_conn_error(x->tls));
    int64_t now = sq_now_ns();
    x->tls_ns = now - x->since_ns;
    sq_engine__tls_done(w, x->tls);
    return ready(x, w, now);
}

static int proxy_failed(struct sq_engine__xport *x, struct sq_engine__worker *w, const char *msg)
{
    sq_engine__proxy_error(w, msg);
    return setup_failed(x, w, 0);
}

/* The TCP connect (or the tunnel through the proxy) is up: TLS next, or the protocol. */
static int connected(struct sq_engine__xport *x, struct sq_engine__worker *w,
                     struct sq_tls_client *tc)
{
    int64_t now = sq_now_ns();
    x->connect_ns = now - x->since_ns; /* a tunnel's CONNECT round trip included */
    if (!tc)
        return ready(x, w, now);
    if (sq_tls_conn_client(tc, &w->tls_cache, x->io.fd, &x->tls) < 0)
        return tls_failed(x, w, "out of memory for a TLS connection");
    x->phase = SQ_ENGINE__XP_HANDSHAKE;
    x->since_ns = now;
    return handshake(x, w);
}

/* Connected to the proxy: the CONNECT goes out whole (a fresh socket's buffer takes a few
 * hundred bytes), then its answer is awaited. */
static int proxy_send(struct sq_engine__xport *x, struct sq_engine__worker *w)
{
    const struct sq_run_config *cfg = w->cfg;
    ssize_t n = send(x->io.fd, cfg->proxy_connect, cfg->proxy_connect_len, MSG_NOSIGNAL);
    if (n < 0)
        return setup_failed(x, w, -errno);
    if ((size_t)n != cfg->proxy_connect_len)
        return setup_failed(x, w, -EMSGSIZE);
    if (sq_io_modify(w->loop, &x->io, EPOLLIN) < 0)
        return setup_failed(x, w, -errno);
    x->phase = SQ_ENGINE__XP_PROXY;
    return SQ_ENGINE__XP_WAIT;
}

/* The proxy's answer: its head is read up to its blank line (nothing follows it: the server
 * beyond says nothing before the client does), its status 2xx or the tunnel fails. */
static int proxy_recv(struct sq_engine__xport *x, struct sq_engine__worker *w,
                      struct sq_tls_client *tc)
{
    char buf[1024];
    ssize_t n = read(x->io.fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return SQ_ENGINE__XP_WAIT;
    if (n < 0)
        return setup_failed(x, w, -errno);
    if (n == 0)
        return proxy_failed(x, w, "the proxy closed the connection before answering CONNECT");
    static const char eoh[] = "\r\n\r\n", proto[] = "HTTP/1.";
    ssize_t i = 0;
    while (i < n && x->pmatch < 4) {
        char ch = buf[i++];
        uint16_t k = x->pgot; /* the status line, "HTTP/1.x NNN" then SP or CR, as it comes */
        bool ok = k < 7     ? ch == proto[k]
                  : k == 7  ? ch >= '0' && ch <= '9'
                  : k == 8  ? ch == ' '
                  : k < 12  ? ch >= '0' && ch <= '9'
                  : k == 12 ? ch == ' ' || ch == '\r'
                            : true;
        if (!ok)
            x->pstatus = SQ_ENGINE__XP_BADSTATUS;
        else if (k >= 9 && k < 12 && x->pstatus != SQ_ENGINE__XP_BADSTATUS)
            x->pstatus = (uint16_t)(x->pstatus * 10 + (ch - '0'));
        if (++x->pgot > PROXY_HEAD_MAX)
            return proxy_failed(x, w, "the proxy's answer to CONNECT is over 8 KiB");
        x->pmatch = ch == eoh[x->pmatch] ? (uint8_t)(x->pmatch + 1) : ch == '\r' ? 1 : 0;
    }
    if (x->pmatch < 4)
        return SQ_ENGINE__XP_WAIT;
    if (x->pstatus == SQ_ENGINE__XP_BADSTATUS || x->pgot < 13 || x->pstatus < 100)
        return proxy_failed(x, w, "the proxy's answer to CONNECT is not an HTTP/1.x status line");
    if (x->pstatus / 100 != 2) { /* a refusal (its body, if any, is left unread) */
        char msg[96];
        snprintf(msg, sizeof(msg), "the proxy answered CONNECT with %u%s", (unsigned)x->pstatus,
                 x->pstatus == 407 ? " (proxy authentication required)" : "");
        return proxy_failed(x, w, msg);
    }
    if (i < n)
        return proxy_failed(x, w, "the proxy sent bytes after its 2xx answer to CONNECT");
    return connected(x, w, tc);
}

int sq_engine__xport_step(struct sq_engine__xport *x, struct sq_engine__worker *w,
                          struct sq_tls_client *tc)
{
    if (SQ_UNLIKELY(x->phase == SQ_ENGINE__XP_HANDSHAKE))
        return handshake(x, w);
    if (SQ_UNLIKELY(x->phase == SQ_ENGINE__XP_PROXY))
        return proxy_recv(x, w, tc);
    int rc = x->up ? 0 : sq_connect_result(x->io.fd);
    x->up = false;
    if (rc < 0)
        return setup_failed(x, w, rc);
    if (SQ_UNLIKELY(x->via_proxy))
        return proxy_send(x, w);
    return connected(x, w, tc);
}

int sq_engine__xport_starttls(struct sq_engine__xport *x, struct sq_engine__worker *w,
                              struct sq_tls_client *tc)
{
    if (x->phase != SQ_ENGINE__XP_OPEN || x->tls)
        return tls_failed(x, w, "TLS asked for on a connection that is not open and plain");
    if (sq_tls_conn_client(tc, &w->tls_cache, x->io.fd, &x->tls) < 0)
        return tls_failed(x, w, "out of memory for a TLS connection");
    x->phase = SQ_ENGINE__XP_HANDSHAKE;
    x->since_ns = sq_now_ns();
    return handshake(x, w);
}

bool sq_engine__xport_expired(struct sq_engine__xport *x, struct sq_engine__worker *w, int64_t now)
{
    if (x->phase == SQ_ENGINE__XP_CLOSED || x->phase == SQ_ENGINE__XP_OPEN ||
        now - x->since_ns < w->cfg->connect_timeout_ns)
        return false;
    if (x->phase == SQ_ENGINE__XP_CONNECTING)
        setup_failed(x, w, -ETIMEDOUT);
    else if (x->phase == SQ_ENGINE__XP_PROXY)
        proxy_failed(x, w, "the proxy did not answer CONNECT within the connect timeout");
    else
        tls_failed(x, w, "handshake timed out");
    return true;
}

void sq_engine__xport_close(struct sq_engine__xport *x, struct sq_loop *loop)
{
    if (x->io.fd < 0)
        return;
    if (x->tls) {
        sq_tls_conn_free(x->tls);
        x->tls = NULL;
    }
    sq_io_close(loop, &x->io); /* the socket is this transport's alone: no EPOLL_CTL_DEL */
    x->phase = SQ_ENGINE__XP_CLOSED;
}

void sq_engine__xport_park(struct sq_engine__xport *x, struct sq_engine__worker *w)
{
    /* not through a proxy or from a chosen source address (open_as would not take it) */
    if (x->io.fd < 0 || w->spare_x != NULL || x->via_proxy || x->fam == 0 || w->cfg->nsrc != 0) {
        sq_engine__xport_close(x, w->loop);
        return;
    }
    if (x->tls) {
        sq_tls_conn_free(x->tls);
        x->tls = NULL;
    }
    x->phase = SQ_ENGINE__XP_CLOSED;
    int fd = sq_io_park(w->loop, &x->io);
    if (!sq_sock_recycle(fd)) {
        close(fd); /* its registration goes with it */
        return;
    }
    w->spare_x = x;
    w->spare_fd = fd;
}

void sq_engine__xport_unpark(struct sq_engine__worker *w)
{
    if (w->spare_x) {
        close(w->spare_fd);
        w->spare_x = NULL;
    }
}

ssize_t sq_engine__xport_write(struct sq_engine__xport *x, const char *p, size_t len, bool *full)
{
    size_t off = 0;
    *full = false;
    while (off < len) {
        ssize_t n = sq_engine__xport_send(x, p + off, len - off);
        if (n > 0) {
            off += (size_t)n;
            *full = off < len; /* a short write: the socket took what it had room for */
            if (*full)
                break;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            *full = true;
            break;
        } else {
            if (n == 0)
                errno = EPIPE;
            return -1;
        }
    }
    return (ssize_t)off;
}

/* ---- turns (--connect-rate) ---- */

/* True when the connect must wait: t is armed for its turn. False: connect now (no rate, a
 * turn that has come, or a timer that could not be armed). */
static bool wait_turn(struct sq_engine__worker *w, struct sq_timer *t)
{
    if (SQ_LIKELY(w->pace_ns == 0) || w->pace_bypass)
        return false;
    int64_t now = sq_loop_now(w->loop);
    int64_t turn = w->pace_next_ns > now ? w->pace_next_ns : now;
    w->pace_next_ns = turn + w->pace_ns;
    return turn > now && sq_timer_start(w->loop, t, turn) == 0;
}

/* ---- a VU's own transport ---- */

static void vu_backoff(struct sq_engine__conn *c)
{
    sq_engine__vu_close(c);
    sq_engine__vu_backoff(c);
}

void sq_engine__xport_vu_connect(struct sq_engine__conn *c, sq_io_cb on_io, unsigned opts)
{
    if (SQ_UNLIKELY(wait_turn(c->w, &c->timer))) {
        c->state = CONN_QUEUED; /* worker.c's timer_cb connects it at its turn */
        return;
    }
    struct sq_engine__worker *w = c->w;
    bool eager = !w->eager; /* not inside another eager open: the depth stays one */
    if (open_as(&c->x, w, NULL, c->global, on_io, eager, opts) < 0) {
        vu_backoff(c);
        return;
    }
    c->state = CONN_CONNECTING;
    if (eager && c->x.up) {
        /* Up already (loopback): the step the EPOLLOUT event would have made, now, without
         * the wait, the SO_ERROR read and the EPOLL_CTL_MOD to EPOLLIN. */
        w->eager = true;
        on_io(w->loop, &c->x.io, EPOLLOUT);
        w->eager = false;
    }
}

void sq_engine__xport_vu_step(struct sq_engine__conn *c, sq_engine__opened_fn opened)
{
    int rc = sq_engine__xport_step(&c->x, c->w, c->w->cfg->tls);
    if (rc == SQ_ENGINE__XP_WAIT) {
        c->state = CONN_HANDSHAKE;
        return;
    }
    if (rc < 0) {
        vu_backoff(c);
        return;
    }
    opened(c, c->x.since_ns); /* the setup's phases stay in c->x for its first request */
}

void sq_engine__xport_vu_failed(struct sq_engine__conn *c, int err)
{
    sq_engine__connect_error(c->w, err);
    vu_backoff(c);
}

void sq_engine__xport_vu_tls_failed(struct sq_engine__conn *c)
{
    sq_engine__tls_error(c->w, sq_tls_conn_error(c->x.tls), true);
    vu_backoff(c);
}

void sq_engine__xport_vu_tls_broken(struct sq_engine__conn *c)
{
    if (c->state != CONN_ACTIVE) {
        sq_engine__xport_vu_tls_failed(c);
        return;
    }
    sq_engine__tls_error(c->w, sq_tls_conn_error(c->x.tls), false);
    sq_engine__vu_fail(c, SQ_ERRK_TLS);
    sq_engine__vu_replace(c);
}

bool sq_engine__xport_vu_sweep(struct sq_engine__conn *c, int64_t now)
{
    if (c->x.phase == SQ_ENGINE__XP_OPEN || !sq_engine__xport_expired(&c->x, c->w, now))
        return false;
    vu_backoff(c);
    return true;
}

/* ---- a shared transport ---- */

static void mux_on_backoff(struct sq_loop *loop, struct sq_timer *t)
{
    SQ_UNUSED(loop);
    struct sq_engine__mux *m = SQ_CONTAINER_OF(t, struct sq_engine__mux, timer);
    bool turn = m->state == SQ_ENGINE__MX_QUEUED;
    m->state = SQ_ENGINE__MX_CLOSED;
    if (m->w->sending) {
        m->w->pace_bypass = turn;
        sq_engine__mux_connect(m);
        m->w->pace_bypass = false;
        return;
    }
    sq_engine__mux_waiting(m, CONN_CLOSED);
}

void sq_engine__mux_init(struct sq_engine__mux *m, struct sq_engine__worker *w, uint32_t first,
                         uint32_t n, uint32_t global, sq_io_cb on_io)
{
    *m = (struct sq_engine__mux){.w = w, .on_io = on_io, .first = first, .n = n, .usable = n};
    m->global = global; /* the connection's number in the run: its address */
    sq_engine__xport_init(&m->x);
    sq_timer_init(&m->timer, mux_on_backoff);
}

/* VUs that wait for the connection to (re)open. */
static bool waiting(const struct sq_engine__conn *c)
{
    return c->state == CONN_CONNECTING || c->state == CONN_BACKOFF || c->state == CONN_CLOSED ||
           c->state == CONN_QUEUED;
}

void sq_engine__mux_waiting(struct sq_engine__mux *m, uint8_t vs)
{
    struct sq_engine__conn *v = m->w->conns;
    for (uint32_t j = 0; j < m->n + m->ln; j++) {
        uint32_t i = sq_engine__mux_at(m, j);
        if (waiting(&v[i]))
            v[i].state = vs;
    }
}

void sq_engine__mux_retry(struct sq_engine__mux *m)
{
    struct sq_engine__worker *w = m->w;
    uint8_t vs = CONN_CLOSED;
    m->state = SQ_ENGINE__MX_CLOSED;
    if (w->sending) {
        int64_t delay = BACKOFF_MIN_NS << m->backoff;
        if (m->backoff < BACKOFF_MAX_SHIFT)
            m->backoff++;
        if (sq_timer_start(w->loop, &m->timer, sq_loop_now(w->loop) + delay) == 0) {
            m->state = SQ_ENGINE__MX_BACKOFF;
            vs = CONN_BACKOFF;
        }
    }
    sq_engine__mux_waiting(m, vs);
}

void sq_engine__mux_connect(struct sq_engine__mux *m)
{
    if (SQ_UNLIKELY(wait_turn(m->w, &m->timer))) {
        m->state = SQ_ENGINE__MX_QUEUED; /* mux_on_backoff connects it at its turn */
        sq_engine__mux_waiting(m, CONN_QUEUED);
        return;
    }
    if ((m->open ? m->open(m) : sq_engine__xport_open(&m->x, m->w, m->pin, m->global, m->on_io)) <
        0) {
        sq_engine__mux_retry(m);
        return;
    }
    m->state = SQ_ENGINE__MX_CONNECTING;
    m->draining = false;
    sq_engine__mux_waiting(m, CONN_CONNECTING);
}

int sq_engine__mux_step(struct sq_engine__mux *m)
{
    int rc = sq_engine__xport_step(&m->x, m->w, m->tc);
    if (rc < 0)
        sq_engine__mux_retry(m);
    return rc;
}

void sq_engine__mux_open(struct sq_engine__mux *m, int64_t now)
{
    struct sq_engine__worker *w = m->w;
    w->c.conns_opened++;
    m->backoff = 0;
    m->state = SQ_ENGINE__MX_OPEN;
    m->draining = false;
    bool first = true;
    for (uint32_t j = 0; j < m->n + m->ln; j++) {
        struct sq_engine__conn *c = &w->conns[sq_engine__mux_at(m, j)];
        if (c->state != CONN_CONNECTING && c->state != CONN_BACKOFF)
            continue;
        if (j < m->n && j >= m->usable) {
            c->state = CONN_BACKOFF; /* past what the peer takes at once: parked */
            continue;
        }
        c->state = CONN_IDLE;
        c->fresh = first; /* the setup lands on one request of the connection, not on each */
        first = false;
        c->x.connect_ns = m->x.connect_ns; /* the VU's own transport is unused under a mux: */
        c->x.tls_ns = m->x.tls_ns;         /* it holds the shared setup's phases */
        if (!m->hold)
            sq_engine__vu_next(c, now);
    }
}

void sq_engine__mux_join(struct sq_engine__mux *m, struct sq_engine__conn *c)
{
    switch (m->state) {
    case SQ_ENGINE__MX_OPEN:
        if (m->draining) {
            c->state = CONN_CONNECTING; /* waits for the next connection */
            return;
        }
        if (!c->lane && c->local - m->first >= m->usable) {
            c->state = CONN_BACKOFF; /* parked (sq_engine__mux_open) */
            return;
        }
        c->state = CONN_IDLE;
        c->fresh = false;
        if (!m->hold)
            sq_engine__vu_next(c, sq_loop_now(c->w->loop));
        return;
    case SQ_ENGINE__MX_CONNECTING:
    case SQ_ENGINE__MX_HELLO:
        c->state = CONN_CONNECTING;
        return;
    case SQ_ENGINE__MX_BACKOFF:
        c->state = CONN_BACKOFF;
        return;
    case SQ_ENGINE__MX_QUEUED:
        c->state = CONN_QUEUED;
        return;
    default:
        c->state = CONN_CONNECTING;
        sq_engine__mux_connect(m); /* sets c's state (and its neighbours') as it goes */
        return;
    }
}

void sq_engine__mux_close(struct sq_engine__mux *m)
{
    sq_timer_stop(m->w->loop, &m->timer);
    sq_engine__xport_close(&m->x, m->w->loop);
    m->state = SQ_ENGINE__MX_CLOSED;
    m->draining = false;
}

void sq_engine__mux_down(struct sq_engine__mux *m, enum sq_errk kind)
{
    struct sq_engine__worker *w = m->w;
    if (kind == SQ_ERRK_CLOSED)
        w->c.conns_closed_by_server++;
    for (uint32_t j = 0; j < m->n + m->ln; j++) {
        struct sq_engine__conn *c = &w->conns[sq_engine__mux_at(m, j)];
        if (c->state == CONN_ACTIVE) {
            sq_engine__vu_fail(c, kind);
        } else {
            sq_timer_stop(w->loop, &c->timer);
            c->state = CONN_CLOSED;
        }
    }
    /* the first VU reopens the connection, the others join it */
    for (uint32_t j = 0; j < m->n + m->ln; j++) {
        struct sq_engine__conn *c = &w->conns[sq_engine__mux_at(m, j)];
        if (c->state == CONN_CLOSED)
            sq_engine__vu_replace(c);
    }
}

bool sq_engine__mux_sweep(struct sq_engine__mux *m, int64_t now)
{
    if (m->state != SQ_ENGINE__MX_CONNECTING || !sq_engine__xport_expired(&m->x, m->w, now))
        return false;
    sq_engine__mux_retry(m);
    return true;
}
