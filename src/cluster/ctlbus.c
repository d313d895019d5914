/* cluster/ctlbus.c - the control plane's NATS connection (ctlbus.h).
 *
 * Reading: one thread owns the read buffer. It parses what is there with proto/'s parser and
 * reads more (ppoll with the caller's deadline, then read) only when a parse says PARTIAL, so a
 * wait never blocks past its deadline and a message never waits for the next read. PINGs from
 * the server are answered as they are parsed; messages that arrive while sq_ctlbus_sync waits for
 * its PONG queue up for sq_ctlbus_next.
 *
 * Writing: any thread, one operation at a time under a mutex, with writev (control line,
 * payload, CRLF) on a blocking socket whose send timeout (SO_SNDTIMEO, 5 s) bounds how long a
 * stuck server can hold a publisher: a run's tick callback publishes, and must not hang a run.
 * A failed or timed-out write marks the connection broken; every later call fails at once, until
 * sq_ctlbus_reconnect dials the same server again and renews the subscriptions.
 *
 * TLS (a tls:// URL) is net/tls.c's, on the same socket: the server's INFO is read in the clear
 * and the handshake follows (what nats-server's tls { } block expects), or, with tls_first, the
 * handshake comes right after the TCP connect (tls { handshake_first: true }); CONNECT and
 * everything after it go encrypted. The socket is then non-blocking: a read is ppoll, then
 * sq_tls_read (-EAGAIN: a partial record, poll again), and records OpenSSL read ahead are taken
 * before polling; a write that finds the socket full polls for writability up to the same 5 s
 * the plain socket's send timeout gives. One SSL object must not be driven by two threads at
 * once, so over TLS the read takes the write mutex around sq_tls_read (never across a wait).
 */
#include "cluster/ctlbus.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/clock.h"
#include "net/sock.h"
#include "net/tls.h"
#include "proto/nats.h"

#define SEND_TIMEOUT_S 5
#define LINE_ROOM      (8 * 1024) /* a control line and its subject, beyond the payload */

static const char crlf[] = "\r\n";

struct sub {
    char *subject;
    uint64_t sid;
};

struct sq_ctlbus {
    int fd;
    pthread_mutex_t wlock;
    char *url, *name; /* for sq_ctlbus_reconnect: the same server, the same client name */
    struct sub *subs; /* every subscription, renewed on a reconnect (under wlock) */
    size_t nsubs;
    char *rbuf;
    size_t rlen, rcap;
    struct sq_nats_limits lim;
    uint64_t next_sid; /* under wlock */
    struct sq_ctlbus_msg *q;
    size_t qhead, qlen, qcap;
    uint64_t pongs;
    int broken; /* atomic: a write failed or the connection ended */
    char err[256];
    uint64_t bytes_out, bytes_in, msgs_out, msgs_in;
    /* TLS (tls://): the client context (its host the URL's), the connection's state (under
     * wlock; NULL on a plain connection or before the handshake) */
    struct sq_tls_client *tc;
    struct sq_tls_conn *tls;
    bool tls_first;
};

void sq_ctlbus_msg_dispose(struct sq_ctlbus_msg *m)
{
    free(m->subject);
    free(m->reply);
    free(m->data);
    memset(m, 0, sizeof(*m));
}

static void set_err(struct sq_ctlbus *b, const char *fmt, const char *a)
{
    snprintf(b->err, sizeof(b->err), fmt, a);
}

static int64_t left_ns(int64_t deadline)
{
    int64_t l = deadline - sq_now_ns();
    return l > 0 ? l : 0;
}

/* Waits until t's socket can go on (the direction the last -EAGAIN wanted), deadline at most.
 * Returns 1, 0 on timeout, or -errno. */
static int tls_wait(int fd, const struct sq_tls_conn *t, int64_t deadline)
{
    for (;;) {
        int64_t l = left_ns(deadline);
        struct timespec ts = {.tv_sec = l / SQ_NS_PER_S, .tv_nsec = l % SQ_NS_PER_S};
        struct pollfd pfd = {.fd = fd, .events = sq_tls_want_write(t) ? POLLOUT : POLLIN};
        int r = ppoll(&pfd, 1, &ts, NULL);
        if (r < 0 && errno == EINTR)
            continue;
        return r < 0 ? -errno : r > 0;
    }
}

/* Writes iov whole through TLS, under the caller's lock: each piece whole (an -EAGAIN'd write
 * is retried with the same bytes), within SEND_TIMEOUT_S as the plain socket's send timeout. */
static int write_tls(struct sq_ctlbus *b, const struct iovec *iov, int n)
{
    int64_t deadline = sq_now_ns() + SEND_TIMEOUT_S * SQ_NS_PER_S;
    for (int i = 0; i < n; i++) {
        for (;;) {
            ssize_t w = sq_tls_write(b->tls, iov[i].iov_base, iov[i].iov_len);
            if (w >= 0) {
                b->bytes_out += (uint64_t)w;
                break;
            }
            int rc = (int)w;
            if (rc == -EAGAIN) {
                rc = tls_wait(b->fd, b->tls, deadline);
                if (rc > 0)
                    continue;
                rc = rc == 0 ? -ETIMEDOUT : rc;
                set_err(b, "writing to the NATS server: %s", strerror(-rc));
            } else {
                set_err(b, "writing to the NATS server: TLS: %s", sq_tls_conn_error(b->tls));
            }
            __atomic_store_n(&b->broken, 1, __ATOMIC_RELEASE);
            return rc;
        }
    }
    return 0;
}

/* Writes iov whole, under the caller's lock. */
static int write_all(struct sq_ctlbus *b, struct iovec *iov, int n)
{
    if (__atomic_load_n(&b->broken, __ATOMIC_ACQUIRE))
        return -EPIPE;
    if (b->tls)
        return write_tls(b, iov, n);
    if (b->tc) /* over TLS nothing goes in the clear: a publisher waits for the handshake */
        return -EPIPE;
    while (n > 0) {
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(b->fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = errno == EAGAIN || errno == EWOULDBLOCK ? ETIMEDOUT : errno;
            set_err(b, "writing to the NATS server: %s", strerror(e));
            __atomic_store_n(&b->broken, 1, __ATOMIC_RELEASE);
            return -e;
        }
        b->bytes_out += (uint64_t)w;
        size_t done = (size_t)w;
        while (n > 0 && done >= iov->iov_len) {
            done -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= done;
        }
    }
    return 0;
}

static int write_str(struct sq_ctlbus *b, const char *s, size_t len)
{
    struct iovec iov = {.iov_base = (void *)s, .iov_len = len};
    pthread_mutex_lock(&b->wlock);
    int rc = write_all(b, &iov, 1);
    pthread_mutex_unlock(&b->wlock);
    return rc;
}

/* fill() over TLS: records OpenSSL already holds first, then poll and read (-EAGAIN: a partial
 * record, or one with no data: poll again). The SSL object is read under wlock. */
static int fill_tls(struct sq_ctlbus *b, int64_t deadline)
{
    for (;;) {
        pthread_mutex_lock(&b->wlock);
        ssize_t n = sq_tls_read(b->tls, b->rbuf + b->rlen, b->rcap - b->rlen);
        if (n < 0 && n != -EAGAIN)
            set_err(b, "reading from the NATS server: TLS: %s", sq_tls_conn_error(b->tls));
        pthread_mutex_unlock(&b->wlock);
        if (n > 0) {
            b->rlen += (size_t)n;
            b->bytes_in += (uint64_t)n;
            return 1;
        }
        if (n == 0 || n != -EAGAIN) {
            if (n == 0)
                set_err(b, "%s", "the NATS server closed the connection");
            __atomic_store_n(&b->broken, 1, __ATOMIC_RELEASE);
            /* -EPROTO: TLS itself failed (an alert: the server wants a client certificate) */
            return n == 0 ? -ECONNRESET : n == -EPROTO ? -SQ_ETLS : (int)n;
        }
        int r = tls_wait(b->fd, b->tls, deadline);
        if (r <= 0)
            return r;
    }
}

/* Reads what the socket has, waiting until deadline at most. 1: bytes came, 0: timeout, < 0: the
 * connection is gone. */
static int fill(struct sq_ctlbus *b, int64_t deadline)
{
    size_t want = b->lim.max_payload + LINE_ROOM;
    if (b->rcap - b->rlen < 4096 && b->rcap < want) {
        size_t cap = b->rcap ? b->rcap * 2 : 16384;
        if (cap > want)
            cap = want;
        char *p = realloc(b->rbuf, cap);
        if (!p)
            return -ENOMEM;
        b->rbuf = p;
        b->rcap = cap;
    }
    if (b->rlen == b->rcap) {
        set_err(b, "%s", "the NATS server sent an operation over the read buffer");
        return -SQ_ETOOBIG;
    }
    if (b->tls)
        return fill_tls(b, deadline);
    for (;;) {
        int64_t l = left_ns(deadline);
        struct timespec ts = {.tv_sec = l / SQ_NS_PER_S, .tv_nsec = l % SQ_NS_PER_S};
        struct pollfd pfd = {.fd = b->fd, .events = POLLIN};
        int r = ppoll(&pfd, 1, &ts, NULL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return 0;
        ssize_t n = read(b->fd, b->rbuf + b->rlen, b->rcap - b->rlen);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : ECONNRESET;
            set_err(b, "%s", n < 0 ? strerror(e) : "the NATS server closed the connection");
            __atomic_store_n(&b->broken, 1, __ATOMIC_RELEASE);
            return -e;
        }
        b->rlen += (size_t)n;
        b->bytes_in += (uint64_t)n;
        return 1;
    }
}

static char *dup_span(struct sq_str s)
{
    char *p = malloc(s.len + 1);
    if (p) {
        if (s.len) /* an absent reply is an empty span with no pointer */
            memcpy(p, s.p, s.len);
        p[s.len] = '\0';
    }
    return p;
}

/* Parses one operation at the start of the buffer. Returns 1 with *m set (a message), 2 for an
 * operation handled here (PING, PONG, INFO, +OK), 0 when more bytes are needed, or < 0. */
static int parse_one(struct sq_ctlbus *b, struct sq_ctlbus_msg *m)
{
    struct sq_nats_event ev;
    int n = sq_nats_parse(b->rbuf, b->rlen, &b->lim, &ev, NULL);
    if (n == SQ_NATS_PARTIAL)
        return 0;
    if (n < 0) {
        set_err(b, "the NATS server sent what is not the NATS protocol: %s", ev.why);
        __atomic_store_n(&b->broken, 1, __ATOMIC_RELEASE);
        return n;
    }
    int rc = 2;
    switch (ev.op) {
    case SQ_NATS_OP_PING:
        rc = write_str(b, SQ_NATS_PONG, SQ_NATS_PONG_LEN);
        rc = rc < 0 ? rc : 2;
        break;
    case SQ_NATS_OP_PONG:
        b->pongs++;
        break;
    case SQ_NATS_OP_ERR: {
        char msg[200];
        snprintf(msg, sizeof(msg), "%.*s", (int)(ev.text.len < 190 ? ev.text.len : 190), ev.text.p);
        set_err(b, "the NATS server refused: %s", msg);
        rc = -EPROTO;
        break;
    }
    case SQ_NATS_OP_MSG:
    case SQ_NATS_OP_HMSG:
        memset(m, 0, sizeof(*m));
        m->subject = dup_span(ev.subject);
        m->reply = dup_span(ev.reply);
        m->data = dup_span(ev.payload);
        m->len = ev.payload.len;
        m->sid = ev.sid_num;
        if (!m->subject || !m->reply || !m->data) {
            sq_ctlbus_msg_dispose(m);
            rc = -ENOMEM;
        } else {
            b->msgs_in++;
            rc = 1;
        }
        break;
    default: /* INFO updates, +OK */
        break;
    }
    memmove(b->rbuf, b->rbuf + n, b->rlen - (size_t)n);
    b->rlen -= (size_t)n;
    return rc;
}

static int enqueue(struct sq_ctlbus *b, struct sq_ctlbus_msg *m)
{
    if (b->qhead + b->qlen == b->qcap) {
        if (b->qhead) {
            memmove(b->q, b->q + b->qhead, b->qlen * sizeof(*b->q));
            b->qhead = 0;
        } else {
            size_t cap = b->qcap ? b->qcap * 2 : 16;
            struct sq_ctlbus_msg *q = realloc(b->q, cap * sizeof(*q));
            if (!q) {
                sq_ctlbus_msg_dispose(m);
                return -ENOMEM;
            }
            b->q = q;
            b->qcap = cap;
        }
    }
    b->q[b->qhead + b->qlen++] = *m;
    return 0;
}

int sq_ctlbus_next(struct sq_ctlbus *b, int64_t timeout_ns, struct sq_ctlbus_msg *m)
{
    if (b->qlen) {
        *m = b->q[b->qhead++];
        b->qlen--;
        if (!b->qlen)
            b->qhead = 0;
        return 1;
    }
    if (__atomic_load_n(&b->broken, __ATOMIC_ACQUIRE))
        return -EPIPE; /* a write failed: the connection is of no use, even if reads still work */
    int64_t deadline = sq_now_ns() + (timeout_ns > 0 ? timeout_ns : 0);
    for (;;) {
        int rc = parse_one(b, m);
        if (rc == 1 || rc < 0)
            return rc;
        if (rc == 2)
            continue;
        rc = fill(b, deadline);
        if (rc <= 0)
            return rc;
    }
}

int sq_ctlbus_sync(struct sq_ctlbus *b, int64_t timeout_ns)
{
    uint64_t want = b->pongs + 1;
    int rc = write_str(b, "PING\r\n", 6);
    if (rc < 0)
        return rc;
    int64_t deadline = sq_now_ns() + timeout_ns;
    while (b->pongs < want) {
        struct sq_ctlbus_msg m;
        rc = parse_one(b, &m);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            rc = enqueue(b, &m);
            if (rc < 0)
                return rc;
            continue;
        }
        if (rc == 2)
            continue;
        rc = fill(b, deadline);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            set_err(b, "%s", "the NATS server did not answer a PING in time");
            return -ETIMEDOUT;
        }
    }
    return 0;
}

/* Sends SUB subject id, under the caller's lock. */
static int send_sub(struct sq_ctlbus *b, const char *subject, uint64_t id)
{
    char line[512];
    int n = sq_nats_encode_sub(line, sizeof(line), (struct sq_str){subject, strlen(subject)},
                               (struct sq_str){"", 0}, id);
    if (n <= 0)
        return n < 0 ? n : -SQ_ETOOBIG;
    struct iovec iov = {.iov_base = line, .iov_len = (size_t)n};
    return write_all(b, &iov, 1);
}

int sq_ctlbus_sub(struct sq_ctlbus *b, const char *subject, uint64_t *sid)
{
    pthread_mutex_lock(&b->wlock);
    uint64_t id = ++b->next_sid;
    int rc = -ENOMEM;
    struct sub *v = realloc(b->subs, (b->nsubs + 1) * sizeof(*v));
    if (v) {
        b->subs = v;
        v[b->nsubs].subject = strdup(subject);
        v[b->nsubs].sid = id;
        rc = v[b->nsubs].subject ? send_sub(b, subject, id) : -ENOMEM;
        if (v[b->nsubs].subject)
            b->nsubs++; /* kept even when the write failed: a reconnect sends it */
    }
    pthread_mutex_unlock(&b->wlock);
    if (rc >= 0 && sid)
        *sid = id;
    return rc < 0 ? rc : 0;
}

bool sq_ctlbus_broken(const struct sq_ctlbus *b)
{
    return __atomic_load_n(&b->broken, __ATOMIC_ACQUIRE) != 0;
}

int sq_ctlbus_pub(struct sq_ctlbus *b, const char *subject, const char *reply, const void *data,
                  size_t len)
{
    if (len > b->lim.max_payload)
        return -SQ_ETOOBIG;
    char head[600];
    int n = sq_nats_encode_pub_head(head, sizeof(head), (struct sq_str){subject, strlen(subject)},
                                    (struct sq_str){reply ? reply : "", reply ? strlen(reply) : 0},
                                    len);
    if (n < 0)
        return n;
    struct iovec iov[3] = {{.iov_base = head, .iov_len = (size_t)n},
                           {.iov_base = (void *)data, .iov_len = len},
                           {.iov_base = (void *)crlf, .iov_len = 2}};
    pthread_mutex_lock(&b->wlock);
    int rc = write_all(b, iov, 3);
    if (rc == 0)
        b->msgs_out++;
    pthread_mutex_unlock(&b->wlock);
    return rc;
}

size_t sq_ctlbus_max_payload(const struct sq_ctlbus *b)
{
    return b->lim.max_payload;
}

const char *sq_ctlbus_error(const struct sq_ctlbus *b)
{
    return b->err;
}

void sq_ctlbus_counts(struct sq_ctlbus *b, uint64_t *bytes_out, uint64_t *bytes_in,
                      uint64_t *msgs_out, uint64_t *msgs_in)
{
    pthread_mutex_lock(&b->wlock);
    *bytes_out = b->bytes_out;
    *msgs_out = b->msgs_out;
    pthread_mutex_unlock(&b->wlock);
    *bytes_in = b->bytes_in;
    *msgs_in = b->msgs_in;
}

/* ---- connecting ---- */

struct url_parts {
    char host[256], user[128], pass[128];
    uint16_t port;
    bool tls; /* tls:// */
};

static int parse_url(const char *url, struct url_parts *u, char *err, size_t len)
{
    memset(u, 0, sizeof(*u));
    u->port = 4222;
    const char *p = url;
    if (strncmp(p, "nats://", 7) == 0) {
        p += 7;
    } else if (strncmp(p, "tls://", 6) == 0) {
        p += 6;
        u->tls = true;
    } else if (strstr(p, "://")) {
        snprintf(err, len, "'%s': the control connection speaks nats:// or tls:// (NATS over TLS)",
                 url);
        return -SQ_EUSAGE;
    }
    const char *at = strrchr(p, '@');
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        size_t ul = colon ? (size_t)(colon - p) : (size_t)(at - p);
        size_t pl = colon ? (size_t)(at - colon - 1) : 0;
        if (ul >= sizeof(u->user) || pl >= sizeof(u->pass) || ul == 0)
            goto bad;
        memcpy(u->user, p, ul);
        if (colon)
            memcpy(u->pass, colon + 1, pl);
        p = at + 1;
    }
    const char *hend, *port = NULL;
    if (*p == '[') {
        hend = strchr(p, ']');
        if (!hend)
            goto bad;
        p++;
        port = hend[1] == ':' ? hend + 2 : NULL;
        if (hend[1] && hend[1] != ':')
            goto bad;
    } else {
        hend = strchr(p, ':');
        if (hend)
            port = hend + 1;
        else
            hend = p + strlen(p);
    }
    size_t hl = (size_t)(hend - p);
    if (hl == 0 || hl >= sizeof(u->host))
        goto bad;
    memcpy(u->host, p, hl);
    if (port) {
        char *end;
        long v = strtol(port, &end, 10);
        if (end == port || (*end && strcmp(end, "/") != 0) || v < 1 || v > 65535)
            goto bad;
        u->port = (uint16_t)v;
    }
    return 0;
bad:
    snprintf(err, len, "'%s' is not a NATS URL (nats://host:4222, tls://host:4222)", url);
    return -SQ_EUSAGE;
}

/* Connects to a within deadline. The socket is blocking with a send timeout for a plain
 * connection, non-blocking for TLS (net/tls.c's calls never block). */
static int connect_addr(const struct sq_addr *a, bool tls, int64_t deadline)
{
    int fd = sq_connect_start(a);
    if (fd < 0)
        return fd;
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    for (;;) {
        int64_t l = left_ns(deadline);
        struct timespec ts = {.tv_sec = l / SQ_NS_PER_S, .tv_nsec = l % SQ_NS_PER_S};
        int r = ppoll(&pfd, 1, &ts, NULL);
        if (r < 0 && errno == EINTR)
            continue;
        int rc = r < 0 ? -errno : r == 0 ? -ETIMEDOUT : sq_connect_result(fd);
        if (rc < 0) {
            close(fd);
            return rc;
        }
        break;
    }
    if (tls)
        return fd;
    int fl = fcntl(fd, F_GETFL);
    struct timeval tv = {.tv_sec = SEND_TIMEOUT_S};
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* The TLS handshake on b->fd, within deadline. Returns 0, or -SQ_ETLS / -ETIMEDOUT / -errno with
 * err saying why. */
static int tls_start(struct sq_ctlbus *b, const struct url_parts *u, int64_t deadline, char *err,
                     size_t len)
{
    struct sq_tls_conn *t;
    if (sq_tls_conn_client(b->tc, NULL, b->fd, &t) < 0)
        return -ENOMEM;
    for (;;) {
        int rc = sq_tls_handshake(t);
        if (rc == 0)
            break;
        if (rc == -EAGAIN) {
            rc = tls_wait(b->fd, t, deadline);
            if (rc > 0)
                continue;
            if (rc == 0)
                snprintf(err, len, "TLS with the NATS server at %s:%u: no handshake in time%s",
                         u->host, u->port,
                         b->tls_first ? " (does the server have tls { handshake_first: true }?)"
                                      : "");
            else
                snprintf(err, len, "TLS with the NATS server at %s:%u: %s", u->host, u->port,
                         strerror(-rc));
            sq_tls_conn_free(t);
            return rc == 0 ? -ETIMEDOUT : rc;
        }
        snprintf(err, len, "TLS with the NATS server at %s:%u: %s", u->host, u->port,
                 sq_tls_conn_error(t));
        sq_tls_conn_free(t);
        return -SQ_ETLS;
    }
    pthread_mutex_lock(&b->wlock);
    b->tls = t;
    pthread_mutex_unlock(&b->wlock);
    return 0;
}

/* Reads the server's INFO (over TLS already with tls_first), shakes hands for TLS after it when
 * the URL asks, and sends CONNECT, then a PING whose PONG says it took it. */
static int handshake(struct sq_ctlbus *b, const struct url_parts *u, const char *name,
                     int64_t deadline, char *err, size_t len)
{
    struct sq_nats_event ev;
    int n;
    for (;;) {
        n = sq_nats_parse(b->rbuf, b->rlen, &b->lim, &ev, NULL);
        if (n != SQ_NATS_PARTIAL)
            break;
        int rc = fill(b, deadline);
        if (rc <= 0) {
            snprintf(err, len, "no INFO from the NATS server: %s%s", rc == 0 ? "timed out" : b->err,
                     rc == 0 && b->tc && !b->tls_first
                         ? " (a server with tls { handshake_first: true } wants the handshake "
                           "first: --tls-first)"
                         : "");
            return rc == 0 ? -ETIMEDOUT : rc;
        }
    }
    struct sq_nats_info info;
    if (n < 0 || ev.op != SQ_NATS_OP_INFO || sq_nats_info_parse(ev.text, &info) < 0) {
        snprintf(err, len, "%s:%u does not speak NATS (no INFO line)", u->host, u->port);
        return -SQ_EPARSE;
    }
    if (!b->tc && info.tls_required) {
        snprintf(err, len, "the NATS server at %s:%u requires TLS: use tls://%s:%u", u->host,
                 u->port, u->host, u->port);
        return -SQ_ETLS;
    }
    if (b->tc && !b->tls && !info.tls_required && !info.tls_available) {
        snprintf(err, len, "the NATS server at %s:%u offers no TLS (tls:// asks for it)", u->host,
                 u->port);
        return -SQ_ETLS;
    }
    if (info.max_payload > 0 && info.max_payload <= SQ_NATS_MAX_PAYLOAD_LIMIT)
        b->lim.max_payload = (uint32_t)info.max_payload;
    memmove(b->rbuf, b->rbuf + n, b->rlen - (size_t)n);
    b->rlen -= (size_t)n;
    if (b->tc && !b->tls) {
        if (b->rlen) { /* the server said more than INFO before our ClientHello */
            snprintf(err, len, "%s:%u sent more than INFO before the TLS handshake", u->host,
                     u->port);
            return -SQ_EPARSE;
        }
        int rc = tls_start(b, u, deadline, err, len);
        if (rc < 0)
            return rc;
    }
    bool token = u->user[0] && !u->pass[0];
    struct sq_nats_connect_opts o = {
        .name = name,
        .lang = "c",
        .user = u->user[0] && !token ? u->user : NULL,
        .pass = u->pass[0] ? u->pass : NULL,
        .auth_token = token ? u->user : NULL,
        .echo = true,
        .tls_required = b->tls != NULL,
    };
    char line[1024];
    n = sq_nats_encode_connect(line, sizeof(line), &o);
    if (n < 0 || write_str(b, line, (size_t)n) < 0) {
        snprintf(err, len, "could not send CONNECT: %s", n < 0 ? sq_strerror(n) : b->err);
        return n < 0 ? n : -EPIPE;
    }
    int rc = sq_ctlbus_sync(b, left_ns(deadline));
    if (rc < 0) {
        snprintf(err, len, "%s", b->err);
        return rc;
    }
    return 0;
}

/* Resolves b->url, connects and shakes hands, within deadline; b->fd is the new connection. */
static int dial(struct sq_ctlbus *b, int64_t deadline, char *err, size_t len)
{
    struct url_parts u;
    int rc = parse_url(b->url, &u, err, len);
    if (rc < 0)
        return rc;
    struct sq_addr addrs[4];
    const char *why = NULL;
    int na = sq_resolve(u.host, u.port, addrs, 4, &why);
    if (na <= 0) {
        snprintf(err, len, "cannot resolve the NATS server '%s': %s", u.host, why ? why : "?");
        return -SQ_ERESOLVE;
    }
    int fd = -1;
    rc = -ECONNREFUSED;
    for (int i = 0; i < na && fd < 0; i++) {
        rc = connect_addr(&addrs[i], b->tc != NULL, deadline);
        if (rc >= 0)
            fd = rc;
    }
    if (fd < 0) {
        snprintf(err, len, "cannot connect to the NATS server at %s:%u: %s", u.host, u.port,
                 sq_strerror(rc));
        return rc;
    }
    pthread_mutex_lock(&b->wlock);
    sq_tls_conn_free(b->tls); /* the old connection's, if any */
    b->tls = NULL;
    if (b->fd >= 0)
        close(b->fd);
    b->fd = fd;
    b->rlen = 0; /* what the old connection left half-read is of no use */
    sq_nats_limits_init(&b->lim);
    __atomic_store_n(&b->broken, 0, __ATOMIC_RELEASE);
    b->err[0] = '\0';
    pthread_mutex_unlock(&b->wlock);
    rc = b->tls_first ? tls_start(b, &u, deadline, err, len) : 0;
    if (rc == 0)
        rc = handshake(b, &u, b->name, deadline, err, len);
    if (rc < 0)
        __atomic_store_n(&b->broken, 1, __ATOMIC_RELEASE);
    return rc;
}

int sq_ctlbus_connect(const char *url, const char *name, const struct sq_tls_client_opts *tls,
                      bool tls_first, int64_t timeout_ns, struct sq_ctlbus **out, char *err,
                      size_t len)
{
    struct url_parts u;
    int rc = parse_url(url, &u, err, len);
    if (rc < 0)
        return rc;
    if (tls_first && !u.tls) {
        snprintf(err, len, "'%s': the TLS handshake first is for a tls:// URL", url);
        return -SQ_EUSAGE;
    }
    struct sq_ctlbus *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    sq_nats_limits_init(&b->lim);
    pthread_mutex_init(&b->wlock, NULL);
    b->fd = -1;
    b->url = strdup(url);
    b->name = strdup(name ? name : "");
    if (!b->url || !b->name) {
        sq_ctlbus_close(b);
        return -ENOMEM;
    }
    if (u.tls) {
        /* the CAs, -k and a client certificate as the caller says; the name checked is the
         * URL's host (an IP address against the certificate's IP subjectAltNames) */
        struct sq_tls_client_opts t = tls ? *tls : (struct sq_tls_client_opts){0};
        t.host = u.host;
        t.alpn = NULL;
        char twhy[SQ_TLS_ERRLEN];
        rc = sq_tls_client_new(&t, &b->tc, twhy, sizeof(twhy));
        if (rc < 0) {
            snprintf(err, len, "%s", rc == -EINVAL ? twhy : sq_strerror(rc));
            sq_ctlbus_close(b);
            return rc == -EINVAL ? -SQ_EUSAGE : rc;
        }
        b->tls_first = tls_first;
    }
    rc = dial(b, sq_now_ns() + timeout_ns, err, len);
    if (rc < 0) {
        sq_ctlbus_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

int sq_ctlbus_reconnect(struct sq_ctlbus *b, int64_t timeout_ns, char *err, size_t len)
{
    int64_t deadline = sq_now_ns() + timeout_ns;
    int rc = dial(b, deadline, err, len);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&b->wlock);
    for (size_t i = 0; i < b->nsubs && rc == 0; i++)
        rc = send_sub(b, b->subs[i].subject, b->subs[i].sid);
    pthread_mutex_unlock(&b->wlock);
    if (rc == 0)
        rc = sq_ctlbus_sync(b, left_ns(deadline)); /* every SUB is in effect */
    if (rc < 0) {
        snprintf(err, len, "%s", b->err[0] ? b->err : sq_strerror(rc));
        __atomic_store_n(&b->broken, 1, __ATOMIC_RELEASE);
    }
    return rc;
}

void sq_ctlbus_close(struct sq_ctlbus *b)
{
    if (!b)
        return;
    if (b->tls)
        sq_tls_shutdown(b->tls);
    sq_tls_conn_free(b->tls);
    sq_tls_client_free(b->tc);
    if (b->fd >= 0)
        close(b->fd);
    for (size_t i = 0; i < b->qlen; i++)
        sq_ctlbus_msg_dispose(&b->q[b->qhead + i]);
    for (size_t i = 0; i < b->nsubs; i++)
        free(b->subs[i].subject);
    free(b->subs);
    free(b->url);
    free(b->name);
    free(b->q);
    free(b->rbuf);
    pthread_mutex_destroy(&b->wlock);
    free(b);
}
