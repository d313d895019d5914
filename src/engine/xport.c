/* engine/xport.c - connect, TLS handshake and their accounting for the stream drivers (see
 * xport.h). Nothing here runs per request: a connection pays it once when it opens. */
#include "engine/xport.h"

#include "base/clock.h"
#include "engine/driver.h"
#include "net/egress.h"
#include "net/sock.h"

void sq_engine__xport_connect_failed(struct sq_engine__conn *c, int err)
{
    sq_engine__connect_error(c->w, err);
    sq_engine__vu_close(c);
    sq_engine__vu_backoff(c);
}

void sq_engine__xport_tls_failed(struct sq_engine__conn *c, const char *msg)
{
    sq_engine__tls_error(c->w, msg, true);
    sq_engine__vu_close(c);
    sq_engine__vu_backoff(c);
}

void sq_engine__xport_tls_broken(struct sq_engine__conn *c)
{
    if (c->state != CONN_ACTIVE) {
        sq_engine__xport_tls_failed(c, sq_tls_conn_error(c->tls));
        return;
    }
    sq_engine__tls_error(c->w, sq_tls_conn_error(c->tls), false);
    sq_engine__vu_fail(c, SQ_ERRK_TLS);
    sq_engine__vu_replace(c);
}

void sq_engine__xport_tls_step(struct sq_engine__conn *c, sq_engine__opened_fn opened)
{
    struct sq_engine__worker *w = c->w;
    int rc = sq_tls_handshake(c->tls);
    if (rc == -EAGAIN) {
        if (sq_io_modify(w->loop, &c->io, sq_tls_want_write(c->tls) ? EPOLLOUT : EPOLLIN) < 0)
            sq_engine__xport_connect_failed(c, -errno);
        return;
    }
    if (rc < 0) {
        sq_engine__xport_tls_failed(c, sq_tls_conn_error(c->tls));
        return;
    }
    int64_t now = sq_now_ns();
    c->tls_ns = now - c->since_ns;
    sq_engine__tls_done(w, c->tls);
    opened(c, now);
}

static void tls_begin(struct sq_engine__conn *c, sq_engine__opened_fn opened)
{
    struct sq_engine__worker *w = c->w;
    if (sq_tls_conn_client(w->cfg->tls, &w->tls_cache, c->io.fd, &c->tls) < 0) {
        sq_engine__xport_tls_failed(c, "out of memory for a TLS connection");
        return;
    }
    c->state = CONN_HANDSHAKE;
    c->since_ns = sq_now_ns();
    sq_engine__xport_tls_step(c, opened);
}

void sq_engine__xport_connected(struct sq_engine__conn *c, sq_engine__opened_fn opened)
{
    int rc = sq_connect_result(c->io.fd);
    if (rc < 0) {
        sq_engine__xport_connect_failed(c, rc);
        return;
    }
    c->connect_ns = sq_now_ns() - c->since_ns;
    if (SQ_UNLIKELY(c->w->cfg->tls != NULL)) {
        tls_begin(c, opened);
        return;
    }
    c->tls_ns = 0;
    opened(c, sq_now_ns());
}

void sq_engine__xport_connect(struct sq_engine__conn *c, sq_io_cb on_io)
{
    struct sq_engine__worker *w = c->w;
    const struct sq_addr *a = &w->cfg->addrs[c->global % (uint32_t)w->cfg->naddrs];
    struct sq_addr fresh;
    if (SQ_UNLIKELY(w->addr != NULL)) {
        a = w->addr; /* a wrk script's thread.addr */
    } else if (w->cfg->dns_ttl_ns > 0) {
        sq_engine__addrs_load(&w->run->addrs, c->global, &fresh);
        a = &fresh;
    }
    /* the run's egress policy, the last line of defence: on the address itself */
    if (SQ_UNLIKELY(w->cfg->egress != NULL) &&
        sq_egress_allows(w->cfg->egress, a, SQ_EGRESS_CONNECT) < 0) {
        sq_engine__xport_connect_failed(c, -EACCES);
        return;
    }
    int fd = sq_connect_start(a);
    if (fd < 0) {
        sq_engine__xport_connect_failed(c, fd);
        return;
    }
    int rc = sq_io_start(w->loop, &c->io, fd, EPOLLOUT, on_io);
    if (rc < 0) {
        close(fd);
        sq_engine__xport_connect_failed(c, rc);
        return;
    }
    c->state = CONN_CONNECTING;
    c->since_ns = sq_loop_now(w->loop);
}

void sq_engine__xport_close(struct sq_engine__conn *c)
{
    if (c->state < CONN_CONNECTING)
        return;
    sq_io_stop(c->w->loop, &c->io);
    if (c->tls) {
        sq_tls_conn_free(c->tls);
        c->tls = NULL;
    }
    close(c->io.fd);
    c->io.fd = -1;
}

bool sq_engine__xport_sweep(struct sq_engine__conn *c, int64_t now)
{
    int64_t limit = c->w->cfg->connect_timeout_ns;
    if (c->state == CONN_CONNECTING && now - c->since_ns >= limit) {
        sq_engine__xport_connect_failed(c, -ETIMEDOUT);
        return true;
    }
    if (c->state == CONN_HANDSHAKE && now - c->since_ns >= limit) {
        sq_engine__xport_tls_failed(c, "handshake timed out");
        return true;
    }
    return false;
}
