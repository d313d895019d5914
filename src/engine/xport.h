/* engine/xport.h - the transport the stream drivers share (internal to engine/).
 *
 * HTTP/1.1 (h1drv.c) and WebSocket (wsdrv.c) both run one TCP connection per VU, optionally under
 * TLS (https://, wss://). What that costs to set up is the same code for both: a non-blocking
 * connect (CONN_CONNECTING), the TLS handshake (CONN_HANDSHAKE) with the worker's session cache,
 * the setup accounting (connect and TLS errors, handshakes, the connect and TLS times a first
 * request's phases carry), and the timeouts of both. A driver hands in `opened`, what to do once
 * the transport is usable: HTTP/1.1 counts the connection and sends, WebSocket writes its upgrade.
 *
 * The read and write wrappers are inline: one predictable branch on c->tls, the plaintext path a
 * plain read() / send() (the HTTP/1.1 hot path is unchanged by the split).
 */
#ifndef SQ_ENGINE_XPORT_H
#define SQ_ENGINE_XPORT_H

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/worker.h"
#include "loop/loop.h"
#include "net/tls.h"

/* What a driver does once its VU's transport is usable (TCP, and TLS when the run has it). */
typedef void (*sq_engine__opened_fn)(struct sq_engine__conn *c, int64_t now);

static inline ssize_t sq_engine__tls_errno(ssize_t r)
{
    if (r >= 0)
        return r;
    errno = (int)-r;
    return -1;
}

/* read() and send() on the VU's connection, plain or TLS: the same contract (-1 with errno;
 * EPROTO is a TLS failure whose message sq_tls_conn_error holds). A TLS write takes all of buf
 * or nothing (EAGAIN), and the next write must start with the same bytes (sq_tls_write). */
static inline ssize_t sq_engine__recv(struct sq_engine__conn *c, void *buf, size_t n)
{
    if (SQ_UNLIKELY(c->tls != NULL))
        return sq_engine__tls_errno(sq_tls_read(c->tls, buf, n));
    return read(c->io.fd, buf, n);
}

static inline ssize_t sq_engine__sendb(struct sq_engine__conn *c, const void *buf, size_t n)
{
    if (SQ_UNLIKELY(c->tls != NULL))
        return sq_engine__tls_errno(sq_tls_write(c->tls, buf, n));
    return send(c->io.fd, buf, n, MSG_NOSIGNAL);
}

/* Starts the VU's connect: a socket to the run's address for c->global, registered for EPOLLOUT
 * with the driver's callback (CONN_CONNECTING). On failure the VU backs off (counted). */
void sq_engine__xport_connect(struct sq_engine__conn *c, sq_io_cb on_io);
/* The driver's callback saw a CONN_CONNECTING VU's event: the connect finished. On to the TLS
 * handshake when the run has TLS, else `opened`. */
void sq_engine__xport_connected(struct sq_engine__conn *c, sq_engine__opened_fn opened);
/* The driver's callback saw a CONN_HANDSHAKE VU's event during the TLS handshake: step it; on
 * completion the handshake is counted and `opened` runs. */
void sq_engine__xport_tls_step(struct sq_engine__conn *c, sq_engine__opened_fn opened);
/* A failed connect (err < 0): counted, the VU closed and backing off. */
void sq_engine__xport_connect_failed(struct sq_engine__conn *c, int err);
/* A TLS failure that costs no request (the handshake, or an alert on an idle connection):
 * counted with its message, the VU closed and backing off. */
void sq_engine__xport_tls_failed(struct sq_engine__conn *c, const char *msg);
/* A TLS failure on an open connection: fails the request in flight (`tls`) and replaces the VU,
 * or, with none in flight, as sq_engine__xport_tls_failed. */
void sq_engine__xport_tls_broken(struct sq_engine__conn *c);
/* Closes the socket (and the TLS state) of an open or opening VU (state CONNECTING or later);
 * no callback runs. */
void sq_engine__xport_close(struct sq_engine__conn *c);
/* The sweep's part: a connect or TLS handshake older than the connect timeout fails like a
 * refused connect. True when c timed out here. */
bool sq_engine__xport_sweep(struct sq_engine__conn *c, int64_t now);

#endif
