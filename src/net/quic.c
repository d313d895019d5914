/* net/quic.c - a QUIC client connection: ngtcp2 + GnuTLS over one UDP socket (see quic.h and
 * docs/internals/net.md). Compiled to nothing without SQ_HAVE_H3.
 */
#include "net/quic.h"

#ifdef SQ_HAVE_H3

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdatomic.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103 /* linux/udp.h; glibc's netinet/udp.h has it since 2.29 */
#endif

struct sq_quic_client {
    gnutls_certificate_credentials_t cred;
    char *host; /* NULL: an IP literal (no SNI) or none */
    char *alpn;
    bool verify;
    uint8_t batch; /* enum sq_quic_batch */
    bool zero_rtt;
};

/* UDP GSO in this process: 0 not probed yet, 1 offered, -1 not (the probe said so, or a GSO send
 * was refused). Workers race to probe; each finds the same answer. */
static _Atomic int gso_state;

/* Asks the kernel once whether it knows UDP_SEGMENT (Linux 4.18 and later). */
static bool gso_offered(int fd)
{
    int st = atomic_load_explicit(&gso_state, memory_order_relaxed);
    if (st == 0) {
        int v = 0;
        socklen_t l = sizeof(v);
        st = getsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &v, &l) == 0 ? 1 : -1;
        int expect = 0;
        (void)atomic_compare_exchange_strong(&gso_state, &expect, st);
        st = atomic_load_explicit(&gso_state, memory_order_relaxed);
    }
    return st > 0;
}

int sq_quic_client_batch(const struct sq_quic_client *c)
{
    return c->batch;
}

/* TLS 1.3 only, without the middlebox compatibility mode (RFC 9001 8.4). */
static const char PRIORITY[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:%DISABLE_TLS13_COMPAT_MODE";

static bool is_ip(const char *h)
{
    unsigned char tmp[16];
    return inet_pton(AF_INET, h, tmp) == 1 || inet_pton(AF_INET6, h, tmp) == 1;
}

int sq_quic_client_new(const struct sq_quic_client_opts *o, struct sq_quic_client **out,
                       char *errbuf, size_t errlen)
{
    *out = NULL;
    if (errlen)
        errbuf[0] = 0;
    /* the first HTTP/3 call of a run (the quick face, a plan's, the daemon's): the libraries
     * are loaded here, never in a run without HTTP/3 */
    if (sq_h3lib_load(errbuf, errlen) < 0)
        return -EINVAL;
    struct sq_quic_client *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->verify = !o->insecure;
    const char *b = getenv("SQUALL_UDP_BATCH");
    c->batch = !b || !*b || strcmp(b, "on") == 0 ? SQ_QUIC_BATCH_ON
               : strcmp(b, "nogso") == 0         ? SQ_QUIC_BATCH_NOGSO
               : strcmp(b, "off") == 0           ? SQ_QUIC_BATCH_OFF
                                                 : 255;
    if (c->batch == 255) {
        snprintf(errbuf, errlen, "SQUALL_UDP_BATCH: '%s': on, nogso or off", b);
        free(c);
        return -EINVAL;
    }
    if (gnutls_certificate_allocate_credentials(&c->cred) != GNUTLS_E_SUCCESS) {
        free(c);
        return -ENOMEM;
    }
    c->zero_rtt = o->zero_rtt;
    if (c->verify) {
        int rc = o->cacert ? gnutls_certificate_set_x509_trust_file(c->cred, o->cacert,
                                                                    GNUTLS_X509_FMT_PEM)
                           : gnutls_certificate_set_x509_system_trust(c->cred);
        if (rc < 0 || (o->cacert && rc == 0)) {
            snprintf(errbuf, errlen, "--cacert: '%s': %s", o->cacert ? o->cacert : "(system)",
                     rc < 0 ? gnutls_strerror(rc) : "no certificate in it");
            sq_quic_client_free(c);
            return -EINVAL;
        }
    }
    c->alpn = strdup(o->alpn ? o->alpn : "h3");
    c->host = o->host && !is_ip(o->host) ? strdup(o->host) : NULL;
    if (!c->alpn || (o->host && !is_ip(o->host) && !c->host)) {
        sq_quic_client_free(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

bool sq_quic_client_zero_rtt(const struct sq_quic_client *c)
{
    return c->zero_rtt;
}

void sq_quic_ticket_dispose(struct sq_quic_ticket *t)
{
    free(t->data);
    *t = (struct sq_quic_ticket){0};
}

void sq_quic_client_free(struct sq_quic_client *c)
{
    if (!c)
        return;
    if (c->cred)
        gnutls_certificate_free_credentials(c->cred);
    free(c->host);
    free(c->alpn);
    free(c);
}

/* ---- ngtcp2's callbacks ---- */

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
    return ((struct sq_quic_conn *)ref->user_data)->conn;
}

static void rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    (void)gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

static int new_cid_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *ud)
{
    (void)conn;
    (void)ud;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) != 0 ||
        gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    cid->datalen = cidlen;
    return 0;
}

#define APP(ud) ((struct sq_quic_conn *)(ud))

static int handshake_cb(ngtcp2_conn *conn, void *ud)
{
    (void)conn;
    APP(ud)->handshake_done = true;
    return APP(ud)->app->handshake_done(APP(ud)->ud) < 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int recv_data_cb(ngtcp2_conn *conn, uint32_t flags, int64_t sid, uint64_t off,
                        const uint8_t *data, size_t len, void *ud, void *sud)
{
    (void)conn;
    (void)off;
    (void)sud;
    bool fin = (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0;
    return APP(ud)->app->stream_data(APP(ud)->ud, sid, data, len, fin) < 0
               ? NGTCP2_ERR_CALLBACK_FAILURE
               : 0;
}

static int acked_cb(ngtcp2_conn *conn, int64_t sid, uint64_t off, uint64_t len, void *ud, void *sud)
{
    (void)conn;
    (void)off;
    (void)sud;
    return APP(ud)->app->acked(APP(ud)->ud, sid, len) < 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int close_cb(ngtcp2_conn *conn, uint32_t flags, int64_t sid, uint64_t code, void *ud,
                    void *sud)
{
    (void)sud;
    /* the stream is still known to ngtcp2 inside this callback: its lost packets, before they go */
    APP(ud)->packets_lost += ngtcp2_conn_get_stream_loss_count(conn, sid);
    bool has = (flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET) != 0;
    return APP(ud)->app->stream_close(APP(ud)->ud, sid, has, code) < 0 ? NGTCP2_ERR_CALLBACK_FAILURE
                                                                       : 0;
}

static int reset_cb(ngtcp2_conn *conn, int64_t sid, uint64_t final_size, uint64_t code, void *ud,
                    void *sud)
{
    (void)conn;
    (void)final_size;
    (void)sud;
    return APP(ud)->app->stream_reset(APP(ud)->ud, sid, code, false) < 0
               ? NGTCP2_ERR_CALLBACK_FAILURE
               : 0;
}

static int stop_cb(ngtcp2_conn *conn, int64_t sid, uint64_t code, void *ud, void *sud)
{
    (void)conn;
    (void)sud;
    return APP(ud)->app->stream_reset(APP(ud)->ud, sid, code, true) < 0
               ? NGTCP2_ERR_CALLBACK_FAILURE
               : 0;
}

static int extend_data_cb(ngtcp2_conn *conn, int64_t sid, uint64_t max, void *ud, void *sud)
{
    (void)conn;
    (void)max;
    (void)sud;
    return APP(ud)->app->unblocked(APP(ud)->ud, sid) < 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int extend_streams_cb(ngtcp2_conn *conn, uint64_t max, void *ud)
{
    (void)conn;
    (void)max;
    return APP(ud)->app->more_streams(APP(ud)->ud) < 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

/* ngtcp2_crypto's callbacks are set by fill_callbacks: the library is loaded at run time
 * (base/h3lib.h), so its functions are no constants. */
static const ngtcp2_callbacks callbacks = {
    .handshake_completed = handshake_cb,
    .recv_stream_data = recv_data_cb,
    .acked_stream_data_offset = acked_cb,
    .stream_close = close_cb,
    .extend_max_local_streams_bidi = extend_streams_cb,
    .rand = rand_cb,
    .get_new_connection_id = new_cid_cb,
    .stream_reset = reset_cb,
    .extend_max_stream_data = extend_data_cb,
    .stream_stop_sending = stop_cb,
};

/* callbacks with ngtcp2_crypto's callbacks filled in. */
static void fill_callbacks(ngtcp2_callbacks *cb)
{
    *cb = callbacks;
    sq_h3lib_crypto_callbacks(cb);
    cb->client_initial = ngtcp2_crypto_client_initial_cb;
    cb->recv_retry = ngtcp2_crypto_recv_retry_cb;
    cb->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
    cb->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
}

/* ---- the connection ---- */

static ngtcp2_path path_of(struct sq_quic_conn *q)
{
    return (ngtcp2_path){
        .local = {(ngtcp2_sockaddr *)&q->local, (ngtcp2_socklen)q->local_len},
        .remote = {(ngtcp2_sockaddr *)&q->remote, (ngtcp2_socklen)q->remote_len},
    };
}

/* GnuTLS's hook after a NewSessionTicket arrived: the session can be resumed from now on. */
static int ticket_hook(gnutls_session_t s, unsigned htype, unsigned when, unsigned incoming,
                       const gnutls_datum_t *msg)
{
    (void)msg;
    if (htype == GNUTLS_HANDSHAKE_NEW_SESSION_TICKET && when == GNUTLS_HOOK_POST && incoming) {
        ngtcp2_crypto_conn_ref *ref = gnutls_session_get_ptr(s);
        ((struct sq_quic_conn *)ref->user_data)->ticket_new = true;
    }
    return 0;
}

static int tls_setup(struct sq_quic_conn *q, const struct sq_quic_client *c)
{
    unsigned flags = GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA;
    if (c->zero_rtt)
        flags |= GNUTLS_ENABLE_EARLY_DATA;
    if (gnutls_init(&q->tls, flags) != GNUTLS_E_SUCCESS) {
        q->tls = NULL;
        return -ENOMEM;
    }
    gnutls_datum_t alpn = {(unsigned char *)c->alpn, (unsigned)strlen(c->alpn)};
    if (gnutls_priority_set_direct(q->tls, PRIORITY, NULL) != GNUTLS_E_SUCCESS ||
        ngtcp2_crypto_gnutls_configure_client_session(q->tls) != 0 ||
        gnutls_credentials_set(q->tls, GNUTLS_CRD_CERTIFICATE, c->cred) != GNUTLS_E_SUCCESS ||
        gnutls_alpn_set_protocols(q->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != GNUTLS_E_SUCCESS ||
        (c->host && gnutls_server_name_set(q->tls, GNUTLS_NAME_DNS, c->host, strlen(c->host)) != 0))
        return -EPROTO;
    if (c->verify)
        gnutls_session_set_verify_cert(q->tls, c->host, 0);
    q->ref = (ngtcp2_crypto_conn_ref){.get_conn = get_conn, .user_data = q};
    gnutls_session_set_ptr(q->tls, &q->ref);
    if (c->zero_rtt)
        gnutls_handshake_set_hook_function(q->tls, GNUTLS_HANDSHAKE_NEW_SESSION_TICKET,
                                           GNUTLS_HOOK_POST, ticket_hook);
    return 0;
}

/* The remembered transport parameters early data goes by (ngtcp2.h lists the fields that
 * count; the rest, pointers among them, stay at their defaults). */
static void early_params(ngtcp2_conn *conn, const ngtcp2_transport_params *r)
{
    ngtcp2_transport_params p;
    ngtcp2_transport_params_default(&p);
    p.initial_max_streams_bidi = r->initial_max_streams_bidi;
    p.initial_max_streams_uni = r->initial_max_streams_uni;
    p.initial_max_stream_data_bidi_local = r->initial_max_stream_data_bidi_local;
    p.initial_max_stream_data_bidi_remote = r->initial_max_stream_data_bidi_remote;
    p.initial_max_stream_data_uni = r->initial_max_stream_data_uni;
    p.initial_max_data = r->initial_max_data;
    p.active_connection_id_limit = r->active_connection_id_limit;
    p.max_idle_timeout = r->max_idle_timeout;
    p.max_udp_payload_size = r->max_udp_payload_size;
    p.disable_active_migration = r->disable_active_migration;
    p.max_datagram_frame_size = r->max_datagram_frame_size;
    ngtcp2_conn_set_early_remote_transport_params(conn, &p);
}

int sq_quic_conn_ticket(struct sq_quic_conn *q, struct sq_quic_ticket *t)
{
    q->ticket_new = false;
    size_t n = t->cap;
    int rc = gnutls_session_get_data(q->tls, t->data, &n);
    if (rc == GNUTLS_E_SHORT_MEMORY_BUFFER && n <= 65536) {
        uint8_t *d = malloc(n);
        if (!d)
            return -ENOMEM;
        rc = gnutls_session_get_data(q->tls, d, &n);
        if (rc != GNUTLS_E_SUCCESS) {
            free(d);
            return -EPROTO;
        }
        free(t->data);
        t->data = d;
        t->cap = n;
    } else if (rc != GNUTLS_E_SUCCESS || !t->data) {
        return -EPROTO;
    }
    t->len = n;
    t->tp = *ngtcp2_conn_get_remote_transport_params(q->conn);
    return 0;
}

bool sq_quic_conn_early_accepted(struct sq_quic_conn *q)
{
    if (gnutls_session_get_flags(q->tls) & GNUTLS_SFLAGS_EARLY_DATA)
        return true;
    (void)ngtcp2_conn_early_data_rejected(q->conn);
    return false;
}

bool sq_quic_conn_resumed(const struct sq_quic_conn *q)
{
    return gnutls_session_is_resumed(q->tls) != 0;
}

int sq_quic_conn_open(struct sq_quic_conn *q, const struct sq_quic_client *c,
                      const struct sq_addr *to, const struct sq_quic_app *app, void *ud,
                      const struct sq_quic_ticket *resume, int64_t now)
{
    *q = (struct sq_quic_conn){.app = app, .ud = ud, .fd = -1, .batch = c->batch};
    int fd = socket(to->ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd < 0)
        return -errno;
    /* asked for each way; the kernel caps it at net.core.rmem_max / wmem_max and reports double
     * what it keeps (its bookkeeping): what getsockopt says is what the result reports */
    int sz = SQ_QUIC_SOCK_BUF;
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    socklen_t sl = sizeof(q->rcvbuf);
    if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &q->rcvbuf, &sl) < 0)
        q->rcvbuf = 0;
    sl = sizeof(q->sndbuf);
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &q->sndbuf, &sl) < 0)
        q->sndbuf = 0;
    q->gso = c->batch == SQ_QUIC_BATCH_ON && gso_offered(fd);
    q->local_len = sizeof(q->local);
    if (connect(fd, (const struct sockaddr *)&to->ss, to->len) < 0 ||
        getsockname(fd, (struct sockaddr *)&q->local, &q->local_len) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    memcpy(&q->remote, &to->ss, to->len);
    q->remote_len = to->len;
    q->fd = fd;
    ngtcp2_cid dcid = {.datalen = 18}, scid = {.datalen = 16};
    (void)gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen);
    (void)gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen);
    ngtcp2_settings s;
    ngtcp2_settings_default(&s);
    s.initial_ts = (ngtcp2_tstamp)now;
    s.max_tx_udp_payload_size = SQ_QUIC_PKT_MAX;
    ngtcp2_transport_params p;
    ngtcp2_transport_params_default(&p);
    p.initial_max_streams_uni = 3;
    p.initial_max_stream_data_bidi_local = 16u << 20;
    p.initial_max_stream_data_uni = 1u << 20;
    p.initial_max_data = 1u << 30;
    p.max_idle_timeout = 30 * NGTCP2_SECONDS;
    p.max_udp_payload_size = SQ_QUIC_RX_MAX;
    ngtcp2_path path = path_of(q);
    ngtcp2_callbacks cb;
    fill_callbacks(&cb);
    int rc = -ENOMEM;
    if (ngtcp2_conn_client_new(&q->conn, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb, &s, &p,
                               NULL, q) != 0) {
        q->conn = NULL;
        goto fail;
    }
    rc = tls_setup(q, c);
    if (rc < 0)
        goto fail;
    ngtcp2_conn_set_tls_native_handle(q->conn, q->tls);
    /* a ticket GnuTLS refuses (expired, another server's) is a full handshake, not an error */
    if (resume && resume->len &&
        gnutls_session_set_data(q->tls, resume->data, resume->len) == GNUTLS_E_SUCCESS) {
        early_params(q->conn, &resume->tp);
        q->early = true;
    }
    return 0;
fail:
    if (q->conn)
        ngtcp2_conn_del(q->conn);
    if (q->tls)
        gnutls_deinit(q->tls);
    q->conn = NULL;
    q->tls = NULL;
    close(fd);
    q->fd = -1;
    return rc;
}

void sq_quic_conn_free(struct sq_quic_conn *q, struct sq_quic_buf *b)
{
    if (!q->conn)
        return;
    if (!q->closing && q->handshake_done && b && !ngtcp2_conn_is_in_closing_period(q->conn) &&
        !ngtcp2_conn_is_in_draining_period(q->conn)) {
        ngtcp2_path path = path_of(q);
        ngtcp2_pkt_info pi = {0};
        ngtcp2_ssize n = ngtcp2_conn_write_connection_close(
            q->conn, &path, &pi, b->tx, SQ_QUIC_PKT_MAX, &q->ccerr, (ngtcp2_tstamp)0);
        if (n > 0)
            (void)send(q->fd, b->tx, (size_t)n, MSG_DONTWAIT);
    }
    ngtcp2_conn_del(q->conn);
    gnutls_deinit(q->tls);
    q->conn = NULL;
    q->tls = NULL;
}

/* An error from ngtcp2 (rv < 0): why the connection ends. */
static int failed(struct sq_quic_conn *q, int rv)
{
    q->liberr = rv;
    if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_CLOSING) {
        q->fail = SQ_QUIC_CLOSED;
        q->closing = true;
    } else if (rv == NGTCP2_ERR_IDLE_CLOSE) {
        q->fail = SQ_QUIC_IDLE;
        q->closing = true;
    } else if (rv == NGTCP2_ERR_RECV_VERSION_NEGOTIATION) {
        q->fail = SQ_QUIC_VERSION; /* nothing to close: no connection was made */
        q->closing = true;
    } else if (!q->handshake_done || rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT ||
               rv == NGTCP2_ERR_CRYPTO) {
        q->fail = SQ_QUIC_HANDSHAKE;
        q->closing = rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT;
        ngtcp2_connection_close_error_set_transport_error_liberr(&q->ccerr, rv, NULL, 0);
    } else {
        q->fail = SQ_QUIC_ERROR;
        ngtcp2_connection_close_error_set_transport_error_liberr(&q->ccerr, rv, NULL, 0);
    }
    return -1;
}

/* A receive that failed (not EAGAIN): -1 with q->fail. */
static int recv_failed(struct sq_quic_conn *q)
{
    if (errno == ECONNREFUSED) { /* ICMP: nothing listens there */
        q->refused = true;
        return failed(q, q->handshake_done ? NGTCP2_ERR_DRAINING : NGTCP2_ERR_CRYPTO);
    }
    q->fail = SQ_QUIC_ERROR;
    return -1;
}

int sq_quic_conn_read(struct sq_quic_conn *q, struct sq_quic_buf *b, int64_t now)
{
    ngtcp2_path path = path_of(q);
    /* batching off: one recv() per datagram */
    int max = q->batch == SQ_QUIC_BATCH_OFF ? 1 : SQ_QUIC_BATCH;
    for (;;) {
        int n;
        q->recv_calls++;
        if (max == 1) {
            ssize_t r = recv(q->fd, b->rx[0], SQ_QUIC_RX_MAX, MSG_DONTWAIT);
            if (r >= 0)
                b->rxm[0].msg_len = (unsigned)r;
            n = r < 0 ? -1 : 1;
        } else {
            for (int i = 0; i < max; i++) {
                b->rxv[i] = (struct iovec){b->rx[i], SQ_QUIC_RX_MAX};
                b->rxm[i].msg_hdr = (struct msghdr){.msg_iov = &b->rxv[i], .msg_iovlen = 1};
            }
            n = recvmmsg(q->fd, b->rxm, (unsigned)max, MSG_DONTWAIT, NULL);
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0;
            return recv_failed(q);
        }
        for (int i = 0; i < n; i++) {
            q->datagrams_received++;
            q->bytes_received += b->rxm[i].msg_len;
            ngtcp2_pkt_info pi = {0};
            int rv = ngtcp2_conn_read_pkt(q->conn, &path, &pi, b->rx[i], b->rxm[i].msg_len,
                                          (ngtcp2_tstamp)now);
            if (rv != 0)
                return failed(q, rv);
        }
        if (n < max)
            return 0;
    }
}

/* The messages for packets [p, n) of b->tx (starting at byte off): with GSO a run of packets of
 * one length, the last possibly shorter, is one message with UDP_SEGMENT; without, one message
 * per packet. Returns the message count. */
static int build(struct sq_quic_buf *b, int p, int n, size_t off, bool gso)
{
    int m = 0;
    while (p < n) {
        size_t seg = b->txlen[p], len = seg;
        int k = 1;
        if (gso)
            while (p + k < n && b->txlen[p + k] <= seg) {
                len += b->txlen[p + k];
                if (b->txlen[p + k++] < seg)
                    break; /* a shorter one ends the run */
            }
        b->txv[m] = (struct iovec){b->tx + off, len};
        b->txm[m].msg_hdr = (struct msghdr){.msg_iov = &b->txv[m], .msg_iovlen = 1};
        if (k > 1) {
            struct msghdr *h = &b->txm[m].msg_hdr;
            h->msg_control = b->txc[m].b;
            h->msg_controllen = sizeof(b->txc[m].b);
            struct cmsghdr *c = CMSG_FIRSTHDR(h);
            c->cmsg_level = IPPROTO_UDP; /* SOL_UDP */
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t s16 = (uint16_t)seg;
            memcpy(CMSG_DATA(c), &s16, sizeof(s16));
        }
        b->txn[m++] = (uint8_t)k;
        off += len;
        p += k;
    }
    return m;
}

/* Sends the n packets of b->tx: sendmmsg (with GSO where offered), or one send() each. A GSO
 * message the kernel refuses turns GSO off for good and what is left goes again without it. */
static int flush(struct sq_quic_conn *q, struct sq_quic_buf *b, int n)
{
    if (q->batch == SQ_QUIC_BATCH_OFF) {
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            q->send_calls++;
            ssize_t r = send(q->fd, b->tx + off, b->txlen[i], MSG_DONTWAIT);
            off += b->txlen[i];
            if (r < 0) {
                if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR)
                    continue; /* dropped: QUIC retransmits what was lost */
                q->fail = errno == ECONNREFUSED ? SQ_QUIC_CLOSED : SQ_QUIC_ERROR;
                return -1;
            }
            q->datagrams_sent++;
            q->bytes_sent += (uint64_t)r;
        }
        return 0;
    }
    int p = 0; /* the first packet not sent yet */
    size_t off = 0;
    while (p < n) {
        int m = build(b, p, n, off, q->gso);
        int k = 0;
        while (k < m) {
            q->send_calls++;
            int r = sendmmsg(q->fd, b->txm + k, (unsigned)(m - k), MSG_DONTWAIT);
            if (r < 0) {
                if (errno == EINTR)
                    continue;
                if ((errno == EIO || errno == EINVAL) && b->txn[k] > 1) {
                    /* the kernel or the route has no GSO after all */
                    atomic_store(&gso_state, -1);
                    q->gso = false;
                    break;
                }
                if (errno == EAGAIN || errno == ENOBUFS) {
                    k = m; /* dropped: QUIC retransmits what was lost */
                    p = n;
                    break;
                }
                q->fail = errno == ECONNREFUSED ? SQ_QUIC_CLOSED : SQ_QUIC_ERROR;
                return -1;
            }
            for (int i = k; i < k + r; i++) {
                q->bytes_sent += b->txv[i].iov_len;
                q->datagrams_sent += b->txn[i];
                q->gso_sends += b->txn[i] > 1;
                p += b->txn[i];
                off += b->txv[i].iov_len;
            }
            k += r;
        }
    }
    return 0;
}

int sq_quic_conn_write(struct sq_quic_conn *q, struct sq_quic_buf *b, int64_t now)
{
    ngtcp2_path path = path_of(q);
    ngtcp2_pkt_info pi = {0};
    int np = 0;
    size_t off = 0; /* where packet np goes in b->tx */
    for (;;) {
        int64_t sid = -1;
        bool fin = false;
        ngtcp2_vec vec[16];
        int nv = 0;
        if ((q->handshake_done || q->early) && ngtcp2_conn_get_max_data_left(q->conn)) {
            nv = q->app->pull(q->ud, &sid, &fin, vec, 16);
            if (nv < 0) {
                q->fail = SQ_QUIC_ERROR;
                return -1;
            }
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize taken = -1;
        ngtcp2_ssize w =
            ngtcp2_conn_writev_stream(q->conn, &path, &pi, b->tx + off, SQ_QUIC_PKT_MAX, &taken,
                                      flags, sid, vec, (size_t)nv, (ngtcp2_tstamp)now);
        if (w < 0) {
            if (w == NGTCP2_ERR_STREAM_DATA_BLOCKED || w == NGTCP2_ERR_STREAM_SHUT_WR) {
                q->app->pull_blocked(q->ud, sid, w == NGTCP2_ERR_STREAM_SHUT_WR);
                continue;
            }
            if (w == NGTCP2_ERR_WRITE_MORE) {
                if (q->app->pulled(q->ud, sid, (size_t)taken) < 0) {
                    q->fail = SQ_QUIC_ERROR;
                    return -1;
                }
                continue;
            }
            return failed(q, (int)w);
        }
        if (taken >= 0 && sid >= 0 && q->app->pulled(q->ud, sid, (size_t)taken) < 0) {
            q->fail = SQ_QUIC_ERROR;
            return -1;
        }
        if (w == 0)
            break;
        b->txlen[np] = (uint16_t)w;
        off += (size_t)w;
        if (++np == SQ_QUIC_TX_BATCH) {
            if (flush(q, b, np) < 0)
                return -1;
            np = 0;
            off = 0;
        }
    }
    if (np && flush(q, b, np) < 0)
        return -1;
    ngtcp2_conn_update_pkt_tx_time(q->conn, (ngtcp2_tstamp)now);
    return 0;
}

int64_t sq_quic_conn_expiry(const struct sq_quic_conn *q)
{
    ngtcp2_tstamp t = ngtcp2_conn_get_expiry(q->conn);
    return t >= (ngtcp2_tstamp)INT64_MAX ? INT64_MAX : (int64_t)t;
}

int sq_quic_conn_timeout(struct sq_quic_conn *q, int64_t now)
{
    /* pto_count counts the PTOs in a row (an ACK sets it back to 0): each rise here is one that
     * fired */
    ngtcp2_conn_stat cs;
    ngtcp2_conn_get_conn_stat(q->conn, &cs);
    size_t pto = cs.pto_count;
    int rv = ngtcp2_conn_handle_expiry(q->conn, (ngtcp2_tstamp)now);
    ngtcp2_conn_get_conn_stat(q->conn, &cs);
    if (cs.pto_count > pto)
        q->pto_count += cs.pto_count - pto;
    return rv == 0 ? 0 : failed(q, rv);
}

int sq_quic_conn_open_bidi(struct sq_quic_conn *q, int64_t *sid, void *sud)
{
    int rv = ngtcp2_conn_open_bidi_stream(q->conn, sid, sud);
    if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED)
        return -EAGAIN;
    return rv == 0 ? 0 : rv == NGTCP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
}

int sq_quic_conn_open_uni(struct sq_quic_conn *q, int64_t *sid)
{
    int rv = ngtcp2_conn_open_uni_stream(q->conn, sid, NULL);
    return rv == 0 ? 0 : -EPROTO;
}

void sq_quic_conn_consumed(struct sq_quic_conn *q, int64_t sid, size_t n)
{
    ngtcp2_conn_extend_max_stream_offset(q->conn, sid, n);
    ngtcp2_conn_extend_max_offset(q->conn, n);
}

void sq_quic_conn_shutdown(struct sq_quic_conn *q, int64_t sid, uint64_t app_error)
{
    (void)ngtcp2_conn_shutdown_stream(q->conn, sid, app_error);
}

void sq_quic_conn_shutdown_read(struct sq_quic_conn *q, int64_t sid, uint64_t app_error)
{
    (void)ngtcp2_conn_shutdown_stream_read(q->conn, sid, app_error);
}

void sq_quic_conn_shutdown_write(struct sq_quic_conn *q, int64_t sid, uint64_t app_error)
{
    (void)ngtcp2_conn_shutdown_stream_write(q->conn, sid, app_error);
}

const char *sq_quic_conn_why(const struct sq_quic_conn *q, char *buf, size_t len)
{
    if (q->refused)
        return "nothing answered on that UDP port (ICMP port unreachable)";
    if (q->liberr == NGTCP2_ERR_RECV_VERSION_NEGOTIATION)
        return "the server answered with Version Negotiation: it does not speak QUIC v1";
    if (q->tls && !q->handshake_done && gnutls_session_get_verify_cert_status(q->tls) != 0)
        return "the server's certificate is not trusted (--cacert names a CA, -k skips the check)";
    uint8_t alert = q->conn ? ngtcp2_conn_get_tls_alert(q->conn) : 0;
    if (alert) {
        const char *a = gnutls_alert_get_strname((gnutls_alert_description_t)alert);
        snprintf(buf, len, "TLS alert %s", a ? a : "(unknown)");
        return buf;
    }
    if (q->liberr == NGTCP2_ERR_HANDSHAKE_TIMEOUT)
        return "QUIC handshake timed out";

    snprintf(buf, len, "QUIC: %s", q->liberr ? ngtcp2_strerror(q->liberr) : "connection failed");
    return buf;
}

const char *sq_quic_conn_cipher(const struct sq_quic_conn *q)
{
    return gnutls_cipher_get_name(gnutls_cipher_get(q->tls));
}

void sq_quic_conn_stat(struct sq_quic_conn *q, uint64_t *cwnd, int64_t *srtt_ns)
{
    ngtcp2_conn_stat cs;
    ngtcp2_conn_get_conn_stat(q->conn, &cs);
    *cwnd = cs.cwnd;
    *srtt_ns = (int64_t)cs.smoothed_rtt;
}

#endif
