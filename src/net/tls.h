/* net/tls.h - TLS over a non-blocking socket (OpenSSL 3): client and server contexts, one
 * object per connection, handshake / read / write that never block.
 *
 * A context (sq_tls_client, sq_tls_server) is built once from options and then shared read-only
 * by every thread (OpenSSL's SSL_CTX is safe for that). A connection object (sq_tls_conn) wraps
 * one SSL on one fd and belongs to the thread that drives it.
 *
 * Errors: every failure leaves a one-line message naming the cause in the connection object
 * (sq_tls_conn_error), e.g. "certificate verify failed: self-signed certificate (depth 0,
 * CN=localhost)", "handshake failure: tlsv1 alert unknown ca", "ALPN mismatch: ...". OpenSSL's
 * thread-local error queue is emptied at each failure, so the next call on the thread starts
 * clean.
 *
 * Writes use send(MSG_NOSIGNAL): a closed peer is an error (-EPIPE), never a SIGPIPE.
 *
 * Records: one sq_tls_read returns the plaintext of at most one TLS record (16 KiB). A caller
 * whose buffer holds at least SQ_TLS_RECORD_MAX bytes never leaves decrypted bytes inside
 * OpenSSL. Server connections read the socket record by record (read-ahead off), so a
 * level-triggered poll on the fd stays truthful. Client connections read ahead: one read() takes
 * every record the socket holds (up to OpenSSL's buffer), which halves the reads per response,
 * and records still inside OpenSSL wake no poll: a client calls again while sq_tls_buffered(),
 * and can tell without a system call whether more bytes arrived behind the ones it read.
 */
#ifndef SQ_NET_TLS_H
#define SQ_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"

#define SQ_TLS_RECORD_MAX 16384 /* largest plaintext of one record */
#define SQ_TLS_ERRLEN     256   /* room for any message this module writes */

/* ---- client ---- */

struct sq_tls_client_opts {
    bool insecure;           /* verify nothing (curl's -k) */
    const char *cacert;      /* PEM file of trusted CAs; NULL: the system's store */
    const char *cert;        /* PEM client certificate (chain); with key */
    const char *key;         /* PEM private key of cert */
    const char *min_version; /* "1.2" or "1.3"; NULL: 1.2 */
    const char *max_version; /* "1.2" or "1.3"; NULL: 1.3 */
    /* Protocols offered by ALPN, comma-separated in preference order; NULL: "http/1.1". A list
     * without http/1.1 makes ALPN required: a server that selects none fails the handshake. */
    const char *alpn;
    /* The server's name: sent as SNI and verified against the certificate. An IP literal is
     * verified against the certificate's IP addresses and not sent (RFC 6066). NULL: no SNI and
     * no name check (the chain is still verified unless insecure). */
    const char *host;
};

struct sq_tls_client; /* opaque; shared read-only by every worker */

/* Builds a client context. Returns 0, -EINVAL (bad option: errbuf names it, e.g. "--cacert:
 * cannot load 'x.pem': no such file"), -ENOENT (libssl or libcrypto could not be opened: the
 * first context of a process opens them, base/dynlib.h; errbuf says which), or -ENOMEM. errbuf
 * always ends in a NUL. */
SQ_MUST_CHECK int sq_tls_client_new(const struct sq_tls_client_opts *o, struct sq_tls_client **out,
                                    char *errbuf, size_t errlen);
void sq_tls_client_free(struct sq_tls_client *c); /* NULL is a no-op */

/* A session cache for resumption, one per thread (a worker): keeps the latest sessions the
 * servers gave this thread's connections, and offers the newest on the next connection. A
 * TLS 1.3 ticket is used once (OpenSSL's client spends it: RFC 8446 C.4), so it leaves the cache
 * when offered and each resumed connection brings a fresh one; a TLS 1.2 session stays and is
 * offered again. A session is offered only by the client context whose connection got it (a
 * thread may reach several hosts, each with its own context and checks). Zero-initialised storage
 * is an empty cache; sq_tls_sessions_dispose frees what it holds. Not thread-safe: one per
 * thread.
 *
 * It also keeps up to SQ_TLS_SPARES connection objects of closed connections, reset (no keys,
 * no session, no socket) for the thread's next connection on the same client context: a
 * connection whose handshake completed and that ended without a TLS error leaves its SSL here
 * instead of freeing it, which spares the next connection an SSL_new and an SSL_free (the
 * copy of the context's settings, and the read buffer). */
#define SQ_TLS_SESSIONS 64
#define SQ_TLS_SPARES   4
struct sq_tls_sessions {
    void *_v[SQ_TLS_SESSIONS];       /* SSL_SESSION *, oldest first */
    const void *_c[SQ_TLS_SESSIONS]; /* the SSL_CTX whose connection got each */
    unsigned _n;
    void *_spare[SQ_TLS_SPARES]; /* SSL *, cleared */
    unsigned _nspare;
};
void sq_tls_sessions_dispose(struct sq_tls_sessions *s);
/* Sessions held now (for tests). */
unsigned sq_tls_sessions_count(const struct sq_tls_sessions *s);
/* Spare connection objects held now (for tests). */
unsigned sq_tls_sessions_spares(const struct sq_tls_sessions *s);

/* ---- server ---- */

struct sq_tls_server_opts {
    /* PEM certificate (chain) and key files; both NULL: a self-signed EC P-256 certificate is
     * generated (CN=localhost, SAN DNS:localhost, IP:127.0.0.1, IP:::1, valid one day). */
    const char *cert, *key;
    /* PEM file of CAs: when set, every client must present a certificate they signed. */
    const char *client_ca;
    /* Protocols the server accepts by ALPN, comma-separated, server's preference first; NULL:
     * "http/1.1". A client offering none of them is refused (no_application_protocol alert);
     * a client offering no ALPN at all is accepted. */
    const char *alpn;
    const char *min_version, *max_version; /* as for the client; NULL: 1.2 and 1.3 */
    const char *cert_out; /* if set: the certificate in use is written there as PEM */
};

struct sq_tls_server; /* opaque; shared read-only by every server worker */

/* Builds a server context (generating the certificate if asked). Returns 0, -EINVAL with errbuf
 * naming the cause, -ENOENT (OpenSSL could not be opened, as for the client), or -ENOMEM. */
SQ_MUST_CHECK int sq_tls_server_new(const struct sq_tls_server_opts *o, struct sq_tls_server **out,
                                    char *errbuf, size_t errlen);
void sq_tls_server_free(struct sq_tls_server *s); /* NULL is a no-op */
/* The certificate and private key in use (the files' or the generated ones), each as PEM text in
 * a fresh NUL-terminated allocation (free both; the key's is wiped by sq_tls_pem_free). For a
 * second TLS stack beside this one (the target's HTTP/3). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_tls_server_pem(const struct sq_tls_server *s, char **cert, char **key);
void sq_tls_pem_free(char *pem);

/* ---- connections ---- */

struct sq_tls_conn; /* opaque; owned by the thread that drives it */

/* A client connection on a connected non-blocking fd; cache (may be NULL) supplies a session to
 * resume and receives the new ones, and a spare connection object if it holds one of c (the
 * connection then takes its object back to cache when freed). The fd stays the caller's (never
 * closed here). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_tls_conn_client(struct sq_tls_client *c, struct sq_tls_sessions *cache, int fd,
                                     struct sq_tls_conn **out);
/* A server connection on an accepted non-blocking fd. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_tls_conn_server(struct sq_tls_server *s, int fd, struct sq_tls_conn **out);
void sq_tls_conn_free(struct sq_tls_conn *t); /* NULL is a no-op; leaves the fd open */

/* Drives the handshake. Returns 0 when it is complete, -EAGAIN when it waits for the socket
 * (sq_tls_want_write says which way), or a negative code with the cause in sq_tls_conn_error:
 * -EPROTO (verify failure, alert, ALPN mismatch, not TLS) or -errno of the socket. */
SQ_MUST_CHECK int sq_tls_handshake(struct sq_tls_conn *t);

/* After -EAGAIN: true when the call waits for writability, false for readability. */
bool sq_tls_want_write(const struct sq_tls_conn *t);

/* Reads plaintext. Returns the byte count (> 0), 0 at the end of the stream (close_notify, or
 * the peer's FIN: an unannounced end reads as a clean one, as on a plain socket), -EAGAIN, or
 * a negative code (-EPROTO with a message, or -errno). */
ssize_t sq_tls_read(struct sq_tls_conn *t, void *buf, size_t n);
/* Writes plaintext: all n bytes (returns n), or -EAGAIN, or a negative code as for read. After
 * -EAGAIN the next write must start with the same bytes (they may have moved) and be at least
 * as long. */
ssize_t sq_tls_write(struct sq_tls_conn *t, const void *buf, size_t n);
/* Decrypted bytes held inside OpenSSL, not yet read (0 with a buffer >= SQ_TLS_RECORD_MAX). */
size_t sq_tls_pending(const struct sq_tls_conn *t);
/* True when OpenSSL holds bytes of the peer not yet read: decrypted, or records read ahead (a
 * client connection), whole or partial. The next sq_tls_read may still return -EAGAIN (a
 * partial record, or one that carried no application data). */
bool sq_tls_buffered(const struct sq_tls_conn *t);
/* Sends close_notify once, best effort (never blocks, never fails). */
void sq_tls_shutdown(struct sq_tls_conn *t);

/* The message of the last failure ("" if none). Valid until the next call on t. */
const char *sq_tls_conn_error(const struct sq_tls_conn *t);
/* After the handshake: was the session resumed; the protocol ("TLSv1.3"), cipher and ALPN
 * protocol negotiated. The strings outlive t: static, or (ALPN) held by the context; ALPN is ""
 * when none was selected. */
bool sq_tls_resumed(const struct sq_tls_conn *t);
const char *sq_tls_version(const struct sq_tls_conn *t);
const char *sq_tls_cipher(const struct sq_tls_conn *t);
const char *sq_tls_alpn(const struct sq_tls_conn *t);

/* "1.2" -> 0x0303, "1.3" -> 0x0304 (OpenSSL's TLS1_x_VERSION); anything else -EINVAL. */
int sq_tls_version_parse(const char *s);

#endif
