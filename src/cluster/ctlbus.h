/* cluster/ctlbus.h - the control plane's NATS connection: one TCP connection to a NATS server that
 * publishes, subscribes and hands over messages, for the controller and the agents of a
 * distributed run (docs/internals/cluster.md).
 *
 * It is deliberately small and separate from the NATS load driver (engine/natsdrv.c): a few
 * messages a second on one socket, no event loop. The socket is blocking with a send timeout;
 * one thread reads (sq_ctlbus_next, sq_ctlbus_sync), any thread may publish (a mutex keeps each
 * operation whole on the wire). The text protocol is proto/nats.h's: its parser for what the
 * server sends, its encoders for SUB and PUB.
 *
 * A lost connection is the caller's to handle: sq_ctlbus_reconnect dials the same URL again and
 * renews every subscription (same sids), so a caller that rides out a broker's restart keeps its
 * struct sq_ctlbus (and any thread publishing through it sees -EPIPE meanwhile, never a freed
 * object). What was published while the connection was down is not kept here: NATS itself keeps
 * nothing for a subscriber that is away either (cluster/agent.c keeps and resends its seconds).
 *
 * TLS: a tls:// URL runs net/tls.c's client on the same socket, after the server's INFO (or
 * before it, tls_first: a server with tls { handshake_first: true }); the server's certificate is
 * verified against the URL's host with the options given (CAs, -k, a client certificate).
 * Credentials in the URL (nats://user:pass@host:port or nats://token@host:port, tls:// alike) are
 * sent in CONNECT. Not here: NKeys/JWT, JetStream.
 */
#ifndef SQ_CLUSTER_CTLBUS_H
#define SQ_CLUSTER_CTLBUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/tls.h"

struct sq_ctlbus;

/* One message, owned by the caller after sq_ctlbus_next (sq_ctlbus_msg_dispose). data is NUL-ended
 * (not counted in len), so a JSON payload can be parsed in place. */
struct sq_ctlbus_msg {
    char *subject, *reply; /* reply: "" when absent */
    char *data;
    size_t len;
    uint64_t sid;
};
void sq_ctlbus_msg_dispose(struct sq_ctlbus_msg *m);

/* Connects to url ("nats://host:4222", "host:port", "nats://user:pass@host", "[::1]:4222",
 * "tls://host:4222"; the port defaults to 4222), reads INFO, sends CONNECT (name names the client
 * in the server's monitoring) and waits for the PONG of a PING, all within timeout_ns. tls (NULL:
 * the system's CAs, no client certificate; its host and alpn are ignored) and tls_first apply to
 * a tls:// URL (tls_first with another is -SQ_EUSAGE). Returns 0, -SQ_EUSAGE (a URL it cannot
 * read, a TLS option that does not load), -SQ_ERESOLVE, -SQ_ETLS (the handshake failed: a
 * certificate that does not verify, an alert; or TLS that one side requires and the other does
 * not offer), -errno or -SQ_EPARSE (the server is not a NATS server), with err saying which and
 * why. */
SQ_MUST_CHECK int sq_ctlbus_connect(const char *url, const char *name,
                                    const struct sq_tls_client_opts *tls, bool tls_first,
                                    int64_t timeout_ns, struct sq_ctlbus **out, char *err,
                                    size_t len);
void sq_ctlbus_close(struct sq_ctlbus *b); /* NULL is a no-op */

/* The reading thread only: connects again to the URL sq_ctlbus_connect was given (the old
 * connection, if any, is closed), sends CONNECT and every subscription made so far with its sid,
 * and waits for the server to have them all, within timeout_ns. Messages already queued for
 * sq_ctlbus_next stay queued. Returns 0 or a negative code as sq_ctlbus_connect (the connection
 * then stays broken; try again later). */
SQ_MUST_CHECK int sq_ctlbus_reconnect(struct sq_ctlbus *b, int64_t timeout_ns, char *err,
                                      size_t len);

/* True once a read or a write found the connection gone (until sq_ctlbus_reconnect succeeds). */
bool sq_ctlbus_broken(const struct sq_ctlbus *b);

/* Subscribes to subject; *sid (optional) says which subscription a message came through. Any
 * thread. Returns 0 or a negative code (the connection is broken; the subscription is still
 * remembered, and sq_ctlbus_reconnect renews it). */
SQ_MUST_CHECK int sq_ctlbus_sub(struct sq_ctlbus *b, const char *subject, uint64_t *sid);

/* Publishes data to subject, with a reply subject (NULL: none). Any thread. Returns 0,
 * -SQ_ETOOBIG (over the server's max_payload) or a negative code (the connection is broken). */
SQ_MUST_CHECK int sq_ctlbus_pub(struct sq_ctlbus *b, const char *subject, const char *reply,
                                const void *data, size_t len);

/* The reading thread only: waits up to timeout_ns (0 polls) for the next message. Returns 1 with
 * *m filled, 0 when none came in time, or a negative code when the connection is gone (a read
 * found its end, or a write failed: -EPIPE at once) or the server sent -ERR (sq_ctlbus_error says
 * what). Server PINGs are answered here. */
SQ_MUST_CHECK int sq_ctlbus_next(struct sq_ctlbus *b, int64_t timeout_ns, struct sq_ctlbus_msg *m);

/* The reading thread only: a PING/PONG round trip, so every SUB and PUB sent before it has
 * reached the server. Messages that arrive meanwhile are kept for sq_ctlbus_next. Returns 0,
 * -ETIMEDOUT or a negative code. */
SQ_MUST_CHECK int sq_ctlbus_sync(struct sq_ctlbus *b, int64_t timeout_ns);

/* The server's max_payload (bytes one message may carry). */
size_t sq_ctlbus_max_payload(const struct sq_ctlbus *b);
/* What went wrong last ("" when nothing did): -ERR's text, or the socket error. */
const char *sq_ctlbus_error(const struct sq_ctlbus *b);
/* Bytes written and read on the connection (protocol included), and messages published and
 * received: the control plane's cost (docs/benchmarks.md). */
void sq_ctlbus_counts(struct sq_ctlbus *b, uint64_t *bytes_out, uint64_t *bytes_in,
                      uint64_t *msgs_out, uint64_t *msgs_in);

#endif
