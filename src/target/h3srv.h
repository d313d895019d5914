/* target/h3srv.h - HTTP/3 for `squall target --http3` (docs/target.md, docs/internals/target.md).
 *
 * One thread with one UDP socket bound to the target's TCP port number: QUIC connections
 * (ngtcp2, TLS 1.3 by GnuTLS through ngtcp2_crypto_gnutls, ALPN "h3") carrying HTTP/3
 * (nghttp3). Each complete request goes to the same handler the TCP server calls, with
 * req->h3 set and req->worker the index the caller gave this thread (a slot of its own in the
 * handler's per-worker state). Bodies, statuses and counts are the handler's, as over HTTP/1.1
 * and HTTP/2; delayed answers wait on this thread's own timers, streamed ones (SSE) go out
 * piece by piece at their pace.
 *
 * Bounds: at most max_conns connections (new Initials over it are dropped and counted), 100
 * concurrent request streams each, a request head of SQ_SERVER_MAX_HEAD bytes and
 * SQ_SERVER_MAX_HEADERS fields (else 431), a body of SQ_SERVER_MAX_BODY (else 413); anything that
 * is not a QUIC packet for a known connection or an acceptable Initial is dropped and counted.
 *
 * Built only with SQ_HAVE_H3 (the QUIC libraries found by CMake); without them sq_h3srv_start
 * answers -ENOTSUP and sq_h3srv_available() false.
 */
#ifndef SQ_TARGET_H3SRV_H
#define SQ_TARGET_H3SRV_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "server/server.h"

struct sq_h3srv; /* opaque */

#define SQ_H3SRV_MAX_CONNS_DEFAULT 1024 /* when max_conns is 0 (about 180 KiB each) */
#define SQ_H3SRV_MAX_STREAMS       100  /* concurrent request streams per connection */

struct sq_h3srv_config {
    const char *host; /* NULL: 127.0.0.1 */
    uint16_t port;    /* the UDP port (the TCP server's number) */
    /* The certificate chain and key, PEM text (borrowed for the call). */
    const char *cert_pem, *key_pem;
    sq_server_handler handler;
    void *ud;
    int worker;                   /* req->worker for every request */
    struct sq_server *server;     /* req->server (the TCP server: /stats reads its counts) */
    uint32_t max_conns;           /* 0: SQ_H3SRV_MAX_CONNS_DEFAULT */
    int64_t idle_timeout_ns;      /* QUIC max_idle_timeout; 0: 60 s */
    int64_t handshake_timeout_ns; /* 0: 10 s */
};

struct sq_h3srv_counts {
    uint64_t conns;    /* QUIC connections accepted (an Initial that was answered) */
    uint64_t requests; /* requests handed to the handler */
    uint64_t streams;  /* request streams the client opened */
    uint64_t refused;  /* Initials dropped: max_conns reached */
    /* datagrams that made no connection and belonged to none: not QUIC, an unknown connection,
     * an Initial that did not decrypt, a version this server does not speak (answered with
     * Version Negotiation) */
    uint64_t dropped;
    uint64_t open;          /* connections open now (a gauge) */
    uint64_t resumed;       /* handshakes that resumed a session (a ticket this server issued) */
    uint64_t early;         /* of those, the ones whose 0-RTT early data was accepted */
    uint64_t early_streams; /* request streams whose first bytes came in 0-RTT packets */
};

/* True when this build has HTTP/3. */
bool sq_h3srv_available(void);
/* Loads the QUIC libraries (base/h3lib.h), binds the UDP socket and starts the thread. Returns
 * 0, -ENOTSUP (no HTTP/3 in this build), -ENOENT (the libraries could not be loaded), -EINVAL
 * (*why: the certificate or key), -SQ_ERESOLVE or -errno. */
SQ_MUST_CHECK int sq_h3srv_start(const struct sq_h3srv_config *cfg, struct sq_h3srv **out,
                                 const char **why);
/* Asks the thread to close every connection and exit. Async-signal-safe; idempotent. */
void sq_h3srv_stop(struct sq_h3srv *s);
/* Stops, waits and frees. NULL is a no-op. */
void sq_h3srv_free(struct sq_h3srv *s);
/* Relaxed loads; any thread. */
void sq_h3srv_counts(const struct sq_h3srv *s, struct sq_h3srv_counts *out);

/* ---- for the fuzzer: no socket, no thread ---- */

/* A server that only takes datagrams through sq_h3srv_feed (cert/key as above). */
SQ_MUST_CHECK int sq_h3srv_new_detached(const struct sq_h3srv_config *cfg, struct sq_h3srv **out);
/* Handles one datagram from 127.0.0.1:port as the thread would (answers are built and dropped),
 * then runs the timers due at now. */
void sq_h3srv_feed(struct sq_h3srv *s, const uint8_t *p, size_t n, uint16_t port);
/* The HTTP/3 request path alone (no QUIC, no TLS): a fresh nghttp3 server session is fed p as
 * pieces (a stream selector byte, a length byte, the bytes) on request and QPACK streams; every
 * complete request goes to the handler and its answer is pulled out and acknowledged. */
void sq_h3srv_fuzz_request(struct sq_h3srv *s, const uint8_t *p, size_t n);

#endif
