/* engine/xport.h - the one transport every driver connects through (internal to engine/).
 *
 * Three layers, one copy each:
 *
 *  - the transport (struct sq_engine__xport): a socket from the connect to the close. It picks
 *    the address (a pinned one, a wrk script's thread.addr, or the run's addresses round robin,
 *    re-read when the run re-resolves them), asks the run's egress policy, connects without
 *    blocking, shakes hands when the driver hands it a TLS client (right after the connect, or
 *    later on an open plaintext connection: sq_engine__xport_starttls), times both phases, and
 * counts what fails (connect and TLS errors, handshakes). Its owner embeds it and owns its
 * callback; a driver's protocol sees only sq_engine__xport_recv / _send.
 *  - a VU's own transport (HTTP/1.1, WebSocket: struct sq_engine__conn embeds one): the VU
 *    mirrors the setup (CONN_CONNECTING, CONN_HANDSHAKE) and backs off alone when it fails.
 *  - a shared transport (struct sq_engine__mux: an HTTP/2 connection, a broker connection): one
 *    connection carries the VUs w->conns[first, first + n), which wait while it (re)connects,
 *    go to work together when it opens, and fail or reconnect together when it breaks. Its
 *    backoff (10 ms doubling to 1.28 s) is the connection's, not each VU's.
 *
 * The setup is the owner's state machine's first steps: sq_engine__xport_open registers the
 * owner's callback for EPOLLOUT; each event of a setting-up transport goes to
 * sq_engine__xport_step until it says READY (registered for EPOLLIN alone, the protocol's turn)
 * or fails (counted, closed: the owner backs off). What lands here later (other issues) has its
 * place in that one machine: a Unix socket is an address (sq_connect_start on an AF_UNIX
 * sq_addr), a proxy a phase between CONNECTING and HANDSHAKE (PROXY: write cfg->proxy_connect,
 * read the proxy's answer, at most 8 KiB of head, within the connect timeout that already runs
 * since the connect began; a non-2xx status is a `proxy` error; docs/internals/engine.md, "The
 * one transport"). The CONNECT round trip is part of connect_ns.
 *
 * The read and write wrappers are inline: one predictable branch on x->tls, the plaintext path a
 * plain read() / send() (the HTTP/1.1 hot path pays nothing for the layering).
 */
#ifndef SQ_ENGINE_XPORT_H
#define SQ_ENGINE_XPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/run.h"
#include "loop/loop.h"
#include "net/sock.h"
#include "net/tls.h"

struct sq_engine__worker;
struct sq_engine__conn;

/* Where a transport is (x->phase). */
enum sq_engine__xphase {
    SQ_ENGINE__XP_CLOSED,
    SQ_ENGINE__XP_CONNECTING, /* the non-blocking connect is out */
    SQ_ENGINE__XP_PROXY,      /* connected to the proxy, its answer to CONNECT awaited */
    SQ_ENGINE__XP_HANDSHAKE,  /* connected, the TLS handshake in progress */
    SQ_ENGINE__XP_OPEN,       /* usable: the protocol's bytes may flow */
};

/* What sq_engine__xport_step says (or a negative code: the setup failed). */
enum { SQ_ENGINE__XP_WAIT = 0, SQ_ENGINE__XP_READY = 1 };

#define SQ_ENGINE__XP_BADSTATUS 0xffffu

struct sq_engine__xport {
    struct sq_io io;            /* the socket: fd -1 while closed; io.cb is the owner's */
    struct sq_tls_conn *tls;    /* from the handshake on; NULL: plain */
    int64_t since_ns;           /* CONNECTING, HANDSHAKE: when that phase began; OPEN: when it
                                   opened (a clock read the owner may reuse) */
    int64_t connect_ns, tls_ns; /* the latest setup's phases: TCP connect, TLS handshake (0: none);
                                   a shared transport's VUs get copies (sq_engine__mux_open) */
    uint8_t phase;              /* enum sq_engine__xphase */
    /* PROXY (in the padding after phase: the struct did not grow): how much of the CRLF CRLF
     * that ends the proxy's answer has been seen, the answer's length so far, and its status
     * as parsed byte by byte (SQ_ENGINE__XP_BADSTATUS once the status line is not HTTP/1.x
     * NNN) */
    uint8_t pmatch;
    uint8_t via_proxy : 1; /* this connection goes to the run's proxy: CONNECT first */
    uint8_t up : 1;        /* CONNECTING: established already (sq_connect_ex): no SO_ERROR read */
    /* SQ_CONNECT_LAZY_NODELAY: 1, no write yet; 2, one write made; 0, TCP_NODELAY is set (or
     * was never put off). The owner calls sq_engine__xport_nagle before each write. */
    uint8_t nagle : 2;
    uint8_t fam : 2; /* the socket's family: XP_FAM_TCP4, XP_FAM_TCP6, 0 another (AF_UNIX) */
    uint16_t pgot;
    uint16_t pstatus;
};

/* ---- the transport ---- */

/* The address connection number `global` connects to: pin when given (a flow's broker), else the
 * worker's wrk script's thread.addr, else the run's addresses round robin, read from the run's
 * seqlock when it re-resolves them (--dns-ttl; the copy lands in *tmp). */
const struct sq_addr *sq_engine__xport_addr(const struct sq_engine__worker *w,
                                            const struct sq_addr *pin, uint32_t global,
                                            struct sq_addr *tmp);

/* x must be closed (fd -1). */
static inline void sq_engine__xport_init(struct sq_engine__xport *x)
{
    x->io.fd = -1;
    x->tls = NULL;
    x->phase = SQ_ENGINE__XP_CLOSED;
}

/* Starts the connect: the address (sq_engine__xport_addr), the run's egress policy on it, a
 * non-blocking socket registered for EPOLLOUT with on_io. Returns 0 (CONNECTING: on_io gets the
 * outcome) or a negative code: counted as a failed connect, x stays closed. */
int sq_engine__xport_open(struct sq_engine__xport *x, struct sq_engine__worker *w,
                          const struct sq_addr *pin, uint32_t global, sq_io_cb on_io);

/* An event of x while it sets up (CONNECTING or HANDSHAKE). tc: the TLS client to shake hands
 * with once connected (NULL: plain). Returns SQ_ENGINE__XP_WAIT, SQ_ENGINE__XP_READY (OPEN,
 * registered for EPOLLIN alone, its phases timed, a handshake counted) or a negative code: the
 * connect or the handshake failed, counted (a TLS failure with its message), x is closed. */
int sq_engine__xport_step(struct sq_engine__xport *x, struct sq_engine__worker *w,
                          struct sq_tls_client *tc);

/* Upgrades an open plaintext transport to TLS (a protocol that starts in the clear and switches:
 * NATS reads the server's INFO, then shakes hands before its CONNECT). x goes back to HANDSHAKE
 * with tc's client on the same socket; its events go to sq_engine__xport_step again until READY
 * (x->tls_ns timed, the handshake counted) or a failure (counted with its message, x closed).
 * Returns what sq_engine__xport_step would. The owner must not have bytes of its own buffered
 * past the point of the switch. */
int sq_engine__xport_starttls(struct sq_engine__xport *x, struct sq_engine__worker *w,
                              struct sq_tls_client *tc);

/* The sweep's part: a setup older than the connect timeout fails as a refused connect (or a
 * handshake that timed out), counted, x closed. True when it timed out here. */
bool sq_engine__xport_expired(struct sq_engine__xport *x, struct sq_engine__worker *w, int64_t now);

/* Closes the socket and the TLS state; no callback runs. A closed x is left alone. */
void sq_engine__xport_close(struct sq_engine__xport *x, struct sq_loop *loop);
/* sq_engine__xport_close for a connection the server has closed (its last response said
 * Connection: close), keeping the socket for x's next connect (net/sock.h sq_sock_recycle: the
 * server sees the same FIN as from a close()); when the socket cannot be kept, a plain close.
 * The kept socket stays in the loop's epoll set: the caller reconnects x at once and then calls
 * sq_engine__xport_unpark, which closes it if that connect did not take it. */
void sq_engine__xport_park(struct sq_engine__xport *x, struct sq_engine__worker *w);
void sq_engine__xport_unpark(struct sq_engine__worker *w);

static inline ssize_t sq_engine__tls_errno(ssize_t r)
{
    if (r >= 0)
        return r;
    errno = (int)-r;
    return -1;
}

/* read() and send() on an open transport, plain or TLS: the same contract (-1 with errno;
 * EPROTO is a TLS failure whose message sq_tls_conn_error holds). A TLS write takes all of buf
 * or nothing (EAGAIN), and the next write must start with the same bytes (sq_tls_write). */
static inline ssize_t sq_engine__xport_recv(struct sq_engine__xport *x, void *buf, size_t n)
{
    if (SQ_UNLIKELY(x->tls != NULL))
        return sq_engine__tls_errno(sq_tls_read(x->tls, buf, n));
    return read(x->io.fd, buf, n);
}

static inline ssize_t sq_engine__xport_send(struct sq_engine__xport *x, const void *buf, size_t n)
{
    if (SQ_UNLIKELY(x->tls != NULL))
        return sq_engine__tls_errno(sq_tls_write(x->tls, buf, n));
    return send(x->io.fd, buf, n, MSG_NOSIGNAL);
}

/* Before a write on a transport opened with SQ_CONNECT_LAZY_NODELAY: the first write goes out
 * whole on an idle connection, where Nagle holds nothing back; any later one (the rest of a
 * short write, the next request) may follow unacknowledged bytes, so TCP_NODELAY is set then,
 * once per connection. */
static inline void sq_engine__xport_nagle(struct sq_engine__xport *x)
{
    if (SQ_LIKELY(x->nagle == 0))
        return;
    if (x->nagle == 1) {
        x->nagle = 2;
        return;
    }
    (void)sq_sock_nodelay(x->io.fd); /* if it fails, Nagle's delay is the worst that follows */
    x->nagle = 0;
}

/* Writes what the socket takes of p[0, len) (a batch: HTTP/2's frames, a broker's messages).
 * Returns the bytes written (len; fewer when the socket filled up: *full is set, and the owner
 * registers EPOLLOUT), or -1 with errno on a failure (EPROTO: TLS, its message in x->tls). */
ssize_t sq_engine__xport_write(struct sq_engine__xport *x, const char *p, size_t len, bool *full);

/* ---- a VU's own transport (h1drv.c, wsdrv.c: c->x) ---- */

/* What a driver does once its VU's transport is usable (TCP, and TLS when the run has it). */
typedef void (*sq_engine__opened_fn)(struct sq_engine__conn *c, int64_t now);

/* Starts the VU's connect (CONN_CONNECTING); on failure the VU backs off. */
void sq_engine__xport_vu_connect(struct sq_engine__conn *c, sq_io_cb on_io, unsigned opts);
/* The driver's callback saw an event of a VU whose transport sets up (c->x.phase below OPEN):
 * a step of it (CONN_HANDSHAKE while TLS shakes hands); once usable the VU carries the setup's
 * phases and `opened` runs; on failure the VU backs off. */
void sq_engine__xport_vu_step(struct sq_engine__conn *c, sq_engine__opened_fn opened);
/* The VU's setup failed after the transport opened (the driver's own first bytes could not be
 * written): err counted as a failed connect, the VU closed and backing off. */
void sq_engine__xport_vu_failed(struct sq_engine__conn *c, int err);
/* A TLS failure that costs no request (an alert on an idle connection): counted with its
 * message, the VU closed and backing off. */
void sq_engine__xport_vu_tls_failed(struct sq_engine__conn *c);
/* A TLS failure on an open connection: fails the request in flight (`tls`) and replaces the VU,
 * or, with none in flight, as sq_engine__xport_vu_tls_failed. */
void sq_engine__xport_vu_tls_broken(struct sq_engine__conn *c);
/* The sweep's part for one VU: its setup timed out (counted, the VU backing off). */
bool sq_engine__xport_vu_sweep(struct sq_engine__conn *c, int64_t now);

/* ---- a shared transport (h2drv.c, busio.c) ---- */

/* Where a shared connection is (m->state). */
enum sq_engine__mxstate {
    SQ_ENGINE__MX_CLOSED,
    SQ_ENGINE__MX_BACKOFF,    /* waiting to retry after a failed setup */
    SQ_ENGINE__MX_CONNECTING, /* the transport sets up (TCP, TLS) */
    SQ_ENGINE__MX_HELLO,      /* the protocol's greeting (a broker's CONNECT/CONNACK...) */
    SQ_ENGINE__MX_OPEN,
    SQ_ENGINE__MX_QUEUED, /* waiting for its turn to connect (--connect-rate): its timer */
};

struct sq_engine__mux {
    struct sq_engine__xport x;
    struct sq_engine__worker *w;
    const struct sq_addr *pin; /* a fixed address (a flow's broker); NULL: the run's */
    struct sq_tls_client *tc;  /* the handshake's client; NULL: plain */
    sq_io_cb on_io;            /* the owner's callback for every event of x */
    struct sq_timer timer;     /* reconnect backoff */
    uint32_t first, n;         /* its VUs: w->conns[first, first + n) */
    uint32_t lfirst, ln;       /* and their batch lanes (worker.h): w->conns[lfirst, lfirst + ln)
                                  (ln 0: none), after the VUs in every loop over them */
    uint32_t usable;           /* the first `usable` of them may work (a broker's Receive
                                  Maximum parks the rest: CONN_BACKOFF); n unless lowered */
    uint32_t global;           /* connection number in the run: picks the address */
    uint8_t state;             /* enum sq_engine__mxstate */
    uint8_t backoff;
    bool draining; /* open, but takes no new work (HTTP/2 GOAWAY): joining VUs wait */
    bool hold;     /* an idle bus run (--idle): open VUs stay idle, the connection only held */
    /* The owner's own connect (HTTP/3: a UDP socket and a QUIC handshake, h3drv.c): it opens x
     * (registered, its phase HANDSHAKE, since_ns set) or returns a negative code it counted.
     * NULL: sq_engine__xport_open (TCP, and TLS after it). */
    int (*open)(struct sq_engine__mux *m);
};

/* The i-th of the connections m carries (i < n + ln): its VUs, then their batch lanes. */
static inline uint32_t sq_engine__mux_at(const struct sq_engine__mux *m, uint32_t i)
{
    return i < m->n ? m->first + i : m->lfirst + (i - m->n);
}

/* Sets up a closed connection carrying VUs [first, first + n) of w (n may be 0: a flow's side
 * connection). */
void sq_engine__mux_init(struct sq_engine__mux *m, struct sq_engine__worker *w, uint32_t first,
                         uint32_t n, uint32_t global, sq_io_cb on_io);
/* Opens it (MX_CONNECTING, its waiting VUs CONN_CONNECTING), or backs off when the connect
 * cannot start. */
void sq_engine__mux_connect(struct sq_engine__mux *m);
/* An event while MX_CONNECTING: sq_engine__xport_step with m's TLS client. On READY the state
 * is the owner's to move (MX_HELLO, or sq_engine__mux_open); on failure the connection backs
 * off. Returns what the step returned. */
int sq_engine__mux_step(struct sq_engine__mux *m);
/* The connection is usable: counted as opened, its waiting VUs go to work (IDLE, the first of
 * them carrying the setup's phases, then sq_engine__vu_next; those past `usable` stay parked).
 * The owner keeps its writes for the end of the event (its busy count) around this. */
void sq_engine__mux_open(struct sq_engine__mux *m, int64_t now);
/* The driver's connect for VU c of m: IDLE (and on its way) while m is open, waiting while it
 * sets up or backs off, opening it when closed. */
void sq_engine__mux_join(struct sq_engine__mux *m, struct sq_engine__conn *c);
/* Stops the backoff timer and closes the transport: MX_CLOSED. The owner then forgets its
 * protocol state. */
void sq_engine__mux_close(struct sq_engine__mux *m);
/* After the owner's teardown of a connection that failed to set up (or whose greeting failed):
 * back off (while the run sends), its VUs waiting with it. */
void sq_engine__mux_retry(struct sq_engine__mux *m);
/* After the owner's teardown of an open connection that broke: its requests out fail with kind
 * (`closed` also counts a close by the server), every VU is closed and asks for it again. */
void sq_engine__mux_down(struct sq_engine__mux *m, enum sq_errk kind);
/* Sets the state of the VUs that wait for m (CONNECTING, BACKOFF or CLOSED) to vs. */
void sq_engine__mux_waiting(struct sq_engine__mux *m, uint8_t vs);
/* The sweep's part: a setup past the connect timeout fails and backs off. True when it did. */
bool sq_engine__mux_sweep(struct sq_engine__mux *m, int64_t now);

#endif
