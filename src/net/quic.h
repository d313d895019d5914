/* net/quic.h - a QUIC client connection over one connected UDP socket: ngtcp2 for QUIC, GnuTLS
 * for its TLS 1.3 (ngtcp2_crypto_gnutls: Debian's OpenSSL 3.0 has no QUIC API, so TLS over TCP
 * stays on OpenSSL, net/tls.h). Built only with SQ_HAVE_H3 (CMakeLists.txt finds the libraries).
 *
 * The caller owns the event loop: it registers q->fd for EPOLLIN, calls sq_quic_conn_read when
 * it is readable, sq_quic_conn_write when it has something to send (and after every read), and
 * keeps a timer at sq_quic_conn_expiry, calling sq_quic_conn_timeout when it fires. What the
 * connection carries is the application's (struct sq_quic_app: HTTP/3 in engine/h3drv.c; the
 * target's server may later share the socket and packet code): stream data comes up through its
 * callbacks, and the write loop pulls the application's stream data through `pull`.
 *
 * Datagrams move in batches: recvmmsg reads up to SQ_QUIC_BATCH at once, and the write loop
 * fills up to SQ_QUIC_TX_BATCH packets, back to back in one buffer, before one sendmmsg. Where the
 * kernel offers UDP GSO (UDP_SEGMENT, probed once per process) a run of packets of one size (the
 * last may be shorter) leaves as one message the kernel cuts into datagrams; a GSO send the
 * kernel refuses (EIO: no checksum offload on the route, EINVAL) turns GSO off for the process
 * and the packets go again without it. Each connection has its own connected socket, so one
 * sendmmsg carries one connection's packets. SQUALL_UDP_BATCH=off in the environment (read by
 * sq_quic_client_new) sends one send() per datagram and reads one recv() per datagram, for
 * measuring what batching saves; SQUALL_UDP_BATCH=nogso keeps sendmmsg/recvmmsg without GSO.
 * The buffers are a struct sq_quic_buf per thread (a worker's), shared by its connections:
 * nothing is allocated per packet.
 */
#ifndef SQ_NET_QUIC_H
#define SQ_NET_QUIC_H

#ifdef SQ_HAVE_H3

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/err.h"
#include "base/h3lib.h" /* after the libraries' headers: their functions, loaded */
#include "net/sock.h"

#define SQ_QUIC_BATCH    16   /* datagrams one recvmmsg reads at most */
#define SQ_QUIC_TX_BATCH 32   /* packets one write fills before a send (GSO: at most 64) */
#define SQ_QUIC_PKT_MAX  1452 /* what one packet we send holds at most */
#define SQ_QUIC_RX_MAX                                                                             \
    2048 /* what one datagram we read holds at most (the transport                                 \
            parameter max_udp_payload_size says so to the server) */

/* Why a connection ended (q->fail). */
enum sq_quic_fail {
    SQ_QUIC_OK,
    SQ_QUIC_HANDSHAKE, /* the handshake failed or timed out (TLS) */
    SQ_QUIC_VERSION,   /* the server answered with Version Negotiation: it speaks no QUIC v1 */
    SQ_QUIC_IDLE,      /* the idle timeout passed with nothing heard */
    SQ_QUIC_CLOSED,    /* the server closed the connection (CONNECTION_CLOSE, stateless reset) */
    SQ_QUIC_ERROR,     /* a protocol error, the application's, or the socket's */
};

/* TLS settings of a run's QUIC connections; shared read-only by every worker. */
struct sq_quic_client_opts {
    bool insecure;      /* verify nothing (-k) */
    const char *cacert; /* PEM file of trusted CAs; NULL: the system's store */
    const char *host;   /* SNI and the name checked (not sent when an IP literal) */
    const char *alpn;   /* one protocol, "h3" */
    bool zero_rtt;      /* keep the server's session tickets, resume with 0-RTT (--h3-0rtt) */
};

/* How datagrams move (SQUALL_UDP_BATCH: "off", "nogso"; unset or "on": SQ_QUIC_BATCH_ON). */
enum sq_quic_batch {
    SQ_QUIC_BATCH_ON,    /* recvmmsg, sendmmsg, and GSO where the kernel offers it */
    SQ_QUIC_BATCH_NOGSO, /* recvmmsg and sendmmsg, no GSO */
    SQ_QUIC_BATCH_OFF,   /* one recv() and one send() per datagram */
};
struct sq_quic_client;

/* A session to resume (0-RTT): the server's ticket (GnuTLS's session data) and the transport
 * parameters it gave with it (the limits early data must respect: RFC 9000 7.4.1). Kept in
 * memory by whoever opens connections (a worker), never parsed by squall: GnuTLS reads it. */
struct sq_quic_ticket {
    uint8_t *data; /* NULL: none */
    size_t len, cap;
    ngtcp2_transport_params tp;
};
void sq_quic_ticket_dispose(struct sq_quic_ticket *t);

/* Loads the QUIC libraries first (base/h3lib.h). Returns 0, -EINVAL (errbuf says why:
 * "--cacert: ...", or a library that could not be loaded) or -ENOMEM. */
SQ_MUST_CHECK int sq_quic_client_new(const struct sq_quic_client_opts *o,
                                     struct sq_quic_client **out, char *errbuf, size_t errlen);
void sq_quic_client_free(struct sq_quic_client *c);
/* Whether the run's connections resume with 0-RTT (opts.zero_rtt). */
bool sq_quic_client_zero_rtt(const struct sq_quic_client *c);

/* What the connection calls up (ud: sq_quic_conn_open's). A callback returning < 0 ends the
 * connection (SQ_QUIC_ERROR). */
struct sq_quic_app {
    int (*handshake_done)(void *ud);
    int (*stream_data)(void *ud, int64_t sid, const uint8_t *data, size_t len, bool fin);
    int (*acked)(void *ud, int64_t sid, uint64_t len);
    /* the stream is gone on both sides (app_error: its code when the peer gave one) */
    int (*stream_close)(void *ud, int64_t sid, bool has_code, uint64_t app_error);
    /* the server reset its side of the stream (RESET_STREAM) or asked us to stop (STOP_SENDING) */
    int (*stream_reset)(void *ud, int64_t sid, uint64_t app_error, bool stop_sending);
    int (*unblocked)(void *ud, int64_t sid); /* the stream may send more */
    int (*more_streams)(void *ud);           /* the server allows more bidirectional streams */
    /* The write loop asks for stream data: *sid (-1: none), *fin, up to max vectors. Returns
     * the vector count or < 0. */
    int (*pull)(void *ud, int64_t *sid, bool *fin, ngtcp2_vec *vec, size_t max);
    /* n bytes of what pull gave for sid went into packets */
    int (*pulled)(void *ud, int64_t sid, size_t n);
    /* sid cannot send now: flow control (shut: its write side is closed for good) */
    void (*pull_blocked)(void *ud, int64_t sid, bool shut);
};

/* A thread's packet buffers: the packets of one write lie back to back in tx (GSO sends a run
 * of them as one buffer). */
struct sq_quic_buf {
    uint8_t tx[SQ_QUIC_TX_BATCH * SQ_QUIC_PKT_MAX];
    uint16_t txlen[SQ_QUIC_TX_BATCH]; /* each packet's length */
    uint8_t rx[SQ_QUIC_BATCH][SQ_QUIC_RX_MAX];
    struct iovec txv[SQ_QUIC_TX_BATCH], rxv[SQ_QUIC_BATCH];
    struct mmsghdr txm[SQ_QUIC_TX_BATCH], rxm[SQ_QUIC_BATCH];
    uint8_t txn[SQ_QUIC_TX_BATCH]; /* each message's packet count */
    union {                        /* each message's UDP_SEGMENT control message */
        struct cmsghdr h;
        uint8_t b[CMSG_SPACE(sizeof(uint16_t))];
    } txc[SQ_QUIC_TX_BATCH];
};

struct sq_quic_conn {
    ngtcp2_conn *conn; /* NULL: closed */
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    ngtcp2_connection_close_error ccerr; /* what our CONNECTION_CLOSE says */
    const struct sq_quic_app *app;
    void *ud;
    struct sockaddr_storage local, remote;
    socklen_t local_len, remote_len;
    int fd;
    uint8_t fail;        /* enum sq_quic_fail */
    bool handshake_done; /* 1-RTT keys in place */
    bool closing;        /* no CONNECTION_CLOSE is due (the peer closed, or idle) */
    bool refused;        /* an ICMP unreachable came back (nothing listens there) */
    bool gso;            /* this socket sends with UDP_SEGMENT (the probe said yes) */
    uint8_t batch;       /* enum sq_quic_batch: the client's */
    bool early;          /* resumed a session: streams opened now go as 0-RTT early data */
    bool ticket_new;     /* the server sent a session ticket (sq_quic_conn_ticket takes it) */
    int liberr;          /* ngtcp2's error that ended it, or 0 */
    uint64_t datagrams_sent, datagrams_received;
    uint64_t bytes_sent, bytes_received; /* UDP payload bytes */
    uint64_t send_calls, recv_calls;     /* the syscalls that moved them (EAGAIN's included) */
    uint64_t gso_sends;                  /* messages sent as several datagrams (UDP_SEGMENT) */
    uint64_t packets_lost;               /* request streams' lost packets, summed as each closed */
    uint64_t pto_count;                  /* probe timeouts that fired */
    int rcvbuf, sndbuf;                  /* the socket's buffers as the kernel granted them */
};

/* Creates the socket (connected to `to`, non-blocking, its buffers sized) and the connection,
 * and starts the handshake (the first flight leaves with the caller's sq_quic_conn_write).
 * resume (NULL, or empty: none): a session to resume; when GnuTLS takes it, q->early is set
 * and the streams opened before the handshake completes carry their data as 0-RTT.
 * Returns 0 or a negative errno (the socket) / -ENOMEM / -EPROTO (TLS setup); on failure
 * nothing is left open. q->fd is the caller's to register; sq_quic_conn_free does not close it. */
SQ_MUST_CHECK int sq_quic_conn_open(struct sq_quic_conn *q, const struct sq_quic_client *c,
                                    const struct sq_addr *to, const struct sq_quic_app *app,
                                    void *ud, const struct sq_quic_ticket *resume, int64_t now);
/* Once the handshake completed on a connection with q->early: whether the server took the
 * early data. When it did not, the connection forgets its streams (ngtcp2's
 * early_data_rejected) and returns false: the caller opens them again and re-sends. */
bool sq_quic_conn_early_accepted(struct sq_quic_conn *q);
/* Whether the handshake resumed a session. */
bool sq_quic_conn_resumed(const struct sq_quic_conn *q);
/* After q->ticket_new: copies the session and the server's transport parameters into *t
 * (replacing what it held). Returns 0 or -ENOMEM / -EPROTO (t unchanged). */
int sq_quic_conn_ticket(struct sq_quic_conn *q, struct sq_quic_ticket *t);
/* Sends our CONNECTION_CLOSE when one is due, then frees the connection (not the socket). */
void sq_quic_conn_free(struct sq_quic_conn *q, struct sq_quic_buf *b);
/* Reads every datagram waiting and feeds them in. Returns 0, or -1 with q->fail set. */
int sq_quic_conn_read(struct sq_quic_conn *q, struct sq_quic_buf *b, int64_t now);
/* Writes what is due (the application's streams pulled in). Returns 0, or -1 with q->fail. */
int sq_quic_conn_write(struct sq_quic_conn *q, struct sq_quic_buf *b, int64_t now);
/* When the connection's next timer is due (ns, CLOCK_MONOTONIC; INT64_MAX: none). */
int64_t sq_quic_conn_expiry(const struct sq_quic_conn *q);
/* The timer fired: retransmissions, ACKs, the idle and handshake timeouts. Returns 0 (then
 * write), or -1 with q->fail. */
int sq_quic_conn_timeout(struct sq_quic_conn *q, int64_t now);
/* Opens a bidirectional stream: 0 with *sid, -EAGAIN when the server allows no more now
 * (the app's more_streams says when), or another negative code. */
int sq_quic_conn_open_bidi(struct sq_quic_conn *q, int64_t *sid, void *sud);
int sq_quic_conn_open_uni(struct sq_quic_conn *q, int64_t *sid);
/* The application consumed n bytes of sid: flow-control credit back to the server. */
void sq_quic_conn_consumed(struct sq_quic_conn *q, int64_t sid, size_t n);
/* Shuts a stream down (both sides, or one) with app_error. */
void sq_quic_conn_shutdown(struct sq_quic_conn *q, int64_t sid, uint64_t app_error);
void sq_quic_conn_shutdown_read(struct sq_quic_conn *q, int64_t sid, uint64_t app_error);
void sq_quic_conn_shutdown_write(struct sq_quic_conn *q, int64_t sid, uint64_t app_error);
/* Why the connection ended, in words for the summary (a failed handshake: an untrusted
 * certificate, nothing listening, a TLS alert, ngtcp2's error); buf is used when needed. */
const char *sq_quic_conn_why(const struct sq_quic_conn *q, char *buf, size_t len);
/* The negotiated cipher's name (static), once the handshake completed. */
const char *sq_quic_conn_cipher(const struct sq_quic_conn *q);
/* The congestion window and smoothed RTT now (ngtcp2's connection stats). */
void sq_quic_conn_stat(struct sq_quic_conn *q, uint64_t *cwnd, int64_t *srtt_ns);
/* The client's batching mode (enum sq_quic_batch). */
int sq_quic_client_batch(const struct sq_quic_client *c);
/* The socket buffer size asked for each way (bytes). */
#define SQ_QUIC_SOCK_BUF (4 << 20)

#endif
#endif
