/* server/server.h - a small HTTP/1.1 server core: one thread and one epoll loop per worker.
 *
 * Each worker owns a SO_REUSEPORT listener on the shared port, its connections, a read buffer
 * and an output buffer; nothing is shared between workers on the request path. Requests are
 * parsed with http/h1, handed to one handler callback, and answered strictly in order
 * (pipelining included). The server itself answers malformed input (400; an HTTP/1.1 request
 * without exactly one valid Host is malformed, RFC 9112 3.2), oversized heads or too many headers
 * (431) and oversized bodies (413), each with a JSON body {"error": "..."} naming the limit,
 * counts them and closes the connection after.
 * Request-smuggling shapes (RFC 9112: Content-Length with Transfer-Encoding, Content-Length
 * fields that disagree, obs-fold, whitespace before a colon, a Transfer-Encoding it cannot frame)
 * are among the 400s and also counted on their own.
 *
 * Limits (each optional, counted when it acts): an idle timeout (no byte moved either way), a
 * header timeout (a request head, or a TLS handshake, still incomplete; answered 408), a request
 * timeout and a minimum body rate (a request whose body is still coming; 408), and a cap on open
 * connections (more are accepted and closed at once). Timeouts are checked by one sweep per
 * worker over its connections, never by a timer per request; a connection that waits on the
 * server's own timer (a delayed or streamed answer) is never idle.
 *
 * HTTP/2: a connection that opens with the HTTP/2 client preface (h2c, prior knowledge) is
 * served by an nghttp2 session instead (server/h2.h); the same handler answers each stream, with
 * req->h2 set. sq_server__h2_begin() switches a connection after TLS ALPN picked "h2".
 *
 * Threads: sq_server_start() spawns the workers; the handler runs on a worker thread and may only
 * touch that worker's state (req->worker says which). sq_server_stop() is async-signal-safe.
 */
#ifndef SQ_SERVER_SERVER_H
#define SQ_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/clock.h"
#include "base/err.h"
#include "http/h1.h"

#define SQ_SERVER_MAX_HEAD       (8 * 1024)    /* request line + headers; larger: 431 */
#define SQ_SERVER_MAX_HEADERS    64            /* more: 431 */
#define SQ_SERVER_MAX_BODY       (1024 * 1024) /* decoded request body; larger: 413 */
#define SQ_SERVER_MAX_DELAY_NS   (86400LL * SQ_NS_PER_S)
#define SQ_SERVER_MAX_TIMEOUT_NS (30LL * 86400 * SQ_NS_PER_S) /* idle / header timeouts */
/* What the faces that listen (target, serve, sink, inbox) set unless told otherwise: a whole
 * request within 60 s, a body at 1 KiB/s or faster once the header timeout has passed. */
#define SQ_SERVER_REQUEST_TIMEOUT_DEFAULT (60LL * SQ_NS_PER_S)
#define SQ_SERVER_MIN_BODY_RATE_DEFAULT   1024

struct sq_server; /* opaque; sq_server_start creates it */
struct sq_tls_server;

/* A complete request. Every pointer is borrowed and valid only during the handler call. */
struct sq_server_req {
    const char *method;
    size_t method_len;
    const char *path; /* the request-target as sent (query included) */
    size_t path_len;
    int minor_version; /* HTTP/1.<minor>; 0 for HTTP/2 */
    bool h2;           /* the request came over HTTP/2 (a stream) */
    bool h3;           /* the request came over HTTP/3 (squall target --http3: target/h3srv.h) */
    const struct sq_h1_header *headers; /* spans into the server's buffers */
    size_t num_headers;
    const char *body; /* decoded (de-chunked) body, or NULL when empty */
    size_t body_len;
    bool head;       /* the method is HEAD: the server drops the body it renders */
    bool keep_alive; /* the connection stays open after this response unless resp->close */
    int worker;      /* index of the worker thread running the handler, 0..threads-1 */
    int fd;          /* the connection's socket (getpeername: the client's address); the
                      * handler must not read, write or close it */
    /* CLOCK_MONOTONIC ns when the server first parsed this request's complete head (taken per
     * request, not per read); 0 unless the config asked for stamp_arrivals. */
    int64_t arrival_ns;
    struct sq_server *server;
    void *_conn; /* the connection (HTTP/1.x), for sq_server_hold; NULL over HTTP/2 */
};

/* Produces piece seq (0-based, of count) of a streamed body into buf[0, cap). Returns the bytes
 * written (<= cap; 0: nothing for this piece). Runs on the worker thread that took the request;
 * ud is the response's stream_ud and must outlive the stream. */
typedef size_t (*sq_server_stream_fn)(void *ud, uint32_t seq, uint32_t count, char *buf,
                                      size_t cap);

#define SQ_SERVER_STREAM_PIECE 1024 /* most bytes one stream piece may hold */

/* What the handler answers (the server hands it zeroed). The server writes the status line,
 * Content-Length (not for 204/304), Content-Type when set, the handler's extra header lines,
 * and "Connection: close" / "Connection: keep-alive" when needed; nothing else. */
struct sq_server_resp {
    int status;               /* 200..999; 0 means 200 (a 1xx is not final: sent as 500) */
    const char *content_type; /* NULL: no Content-Type header */
    const char *headers;      /* more header lines, each ending in CRLF, copied verbatim */
    size_t headers_len;
    const char *body; /* copied before the handler's caller returns, unless delay_ns */
    size_t body_len;
    /* A streamed tail after body: fill_total bytes taken cyclically from fill[0..fill_len), which
     * must stay valid (and unchanged) for the life of the server. Large payloads are written
     * from it piece by piece, never copied whole. */
    const char *fill;
    size_t fill_len;
    uint64_t fill_total;
    bool close; /* close the connection after this response */
    /* > 0: "answer later". The server parks the connection (later pipelined requests wait) and
     * sends this response when a loop timer fires delay_ns from now (capped at a day,
     * SQ_SERVER_MAX_DELAY_NS). A plain response (no fill tail, no extra headers, !delay_copy)
     * is parked as pointers: body and content_type must then stay valid until sent (static
     * storage). Any other is rendered at once and its bytes held (one allocation) until the
     * timer fires; a fill tail is held by reference, so fill must outlive the server as above. */
    int64_t delay_ns;
    bool delay_copy; /* with delay_ns: body does not outlive the call, hold a rendered copy */
    /* A streamed body (stream set, stream_count > 0): the head leaves at once, with
     * "Transfer-Encoding: chunked" instead of Content-Length (an HTTP/1.0 request gets no framing
     * and the connection closes after the body); then piece i (0-based) is made by
     * stream(stream_ud, i, stream_count, ...) and sent as one chunk stream_interval_ns * (i + 1)
     * after the head; the zero chunk follows the last piece at once. Pieces that fall due
     * together (interval 0, a late timer, a socket that was full) leave together, at most 64 KiB
     * per loop round. The connection answers nothing else meanwhile: requests pipelined behind
     * wait, as behind a delayed answer. body, fill and delay_ns are ignored; HEAD, 204 and 304
     * get the head alone. */
    sq_server_stream_fn stream;
    void *stream_ud;
    uint32_t stream_count;
    int64_t stream_interval_ns; /* >= 0 */
    /* An upgrade: with status 101 on an HTTP/1.1 request (not HEAD, not HTTP/2) the server sends
     * "HTTP/1.1 101 Switching Protocols", the handler's extra header lines and nothing else (no
     * Content-Length, no Connection of its own; the handler writes Upgrade and Connection), and
     * the connection then belongs to `upgrade` with upgrade_ud; requests pipelined behind it are
     * the new protocol's bytes. Any other answer (another status, a HEAD, HTTP/1.0, HTTP/2) is
     * sent as it is, at once (delay and stream ignored), and upgrade->closed(upgrade_ud) runs once
     * it is rendered. With a 101, body, fill, delay and stream are ignored. */
    const struct sq_server_upgrade *upgrade;
    void *upgrade_ud;
};

/* ---- upgraded connections (101 Switching Protocols, RFC 9110 7.8) ---- */

struct sq_server_conn; /* a connection a handler took over with an upgrade (opaque) */

/* The protocol an upgraded connection speaks from the byte after the request on. The server
 * keeps the socket, TLS, the output path and its limits (the idle timeout, EPOLLOUT
 * back-pressure: while output waits, nothing is read); the protocol gets the bytes and answers
 * through sq_server_conn_send. Every call runs on the connection's worker thread. */
struct sq_server_upgrade {
    /* Optional: called once, right after the 101 is queued (a greeting, a close at once).
     * Returns 0, or a negative code: the connection closes. */
    int (*open)(void *ud, struct sq_server_conn *c);
    /* Bytes from the client (the first call may carry bytes that came behind the request).
     * Returns 0, or a negative code: what was queued is sent, then the connection closes. */
    int (*data)(void *ud, struct sq_server_conn *c, const char *buf, size_t len);
    /* The connection is gone (either side, an error, the server stopping), or the upgrade was
     * not taken (see sq_server_resp.upgrade): free ud. Runs exactly once. */
    void (*closed)(void *ud);
};

/* Queues p[0, n) for the client (sent when the current event ends, or sooner once 64 KiB wait).
 * Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_server_conn_send(struct sq_server_conn *c, const void *p, size_t n);
/* Closes the connection once what is queued has left. linger: shut the write side first and
 * drain what the client still sends for up to a second (a WebSocket close handshake), instead of
 * closing at once. */
void sq_server_conn_close(struct sq_server_conn *c, bool linger);
/* The worker (0..threads-1) the connection runs on. */
int sq_server_conn_worker(const struct sq_server_conn *c);

/* Called on a worker thread for each complete request, in order per connection. */
typedef void (*sq_server_handler)(void *ud, const struct sq_server_req *req,
                                  struct sq_server_resp *resp);

/* Admission (HTTP/1.x): called once per request that has a body to come (Content-Length > 0 or
 * chunked), as soon as its head is complete and before the server waits for any byte of the
 * body (the whole request may already be there). req is as the handler gets it but with body
 * NULL and body_len the declared Content-Length (0 when chunked). Leave resp->status 0 to let
 * the request in (the handler then gets it whole); set it to refuse: the server sends status,
 * content_type, headers and body (copied; the rest of resp is ignored) with "Connection: close",
 * reads no more of the request, and closes the connection after a short drain (counted:
 * head_refused). A credentials check here answers 401 to a client that has not sent its body. */
typedef void (*sq_server_head_fn)(void *ud, const struct sq_server_req *req,
                                  struct sq_server_resp *resp);

struct sq_server_config {
    const char *host; /* numeric address or name; NULL means 127.0.0.1 */
    uint16_t port;    /* 0: any free port (the first listener picks it, the rest share it) */
    /* Listen on this Unix domain socket path instead of host:port (NULL: TCP). The socket file
     * is made mode 0600 (its owner only); a stale socket there (nothing listening) is replaced,
     * anything else (a file, a live socket) is refused: -EEXIST, -EADDRINUSE. The workers
     * share the one listener; the file is removed when the server is freed. */
    const char *unix_path;
    int threads; /* >= 1 */
    int backlog; /* 0: 1024 */
    /* Read the clock once per request, as its head is parsed: req->arrival_ns. */
    bool stamp_arrivals;
    /* Optional: serve TLS on every connection (borrowed; must outlive the server). Each
     * accepted connection shakes hands first; one that fails is closed. */
    struct sq_tls_server *tls;
    sq_server_handler handler;
    void *ud;
    sq_server_head_fn on_head; /* optional, with ud: see sq_server_head_fn */
    /* > 0: close a connection that moved no byte in either direction for this long (one waiting
     * on a delayed or streamed answer of the server's is not idle). 0: never. */
    int64_t idle_timeout_ns;
    /* > 0: a request head (or a TLS handshake) still incomplete this long after its first byte
     * arrived (after accept, for a handshake) is answered 408 (a handshake: closed) and its
     * connection closed. 0: never. */
    int64_t header_timeout_ns;
    /* > 0: a whole request (head and body) still incomplete this long after its first byte
     * arrived is answered 408 and its connection closed. Each byte that arrives resets the idle
     * timer; this deadline is what bounds a body dripped a byte at a time. 0: never. */
    int64_t request_timeout_ns;
    /* > 0, bytes per second: a request whose body is still arriving is answered 408 and closed
     * once it has taken longer than the header timeout (1 s when there is none) plus one second
     * for every min_body_rate bytes of it received so far (head and body). 0: no minimum. */
    uint32_t min_body_rate;
    /* > 0: at most this many connections open at once across all workers; one more is accepted
     * and closed at once (counted: refused), unless evict makes room. 0: no cap. */
    uint32_t max_conns;
    /* > 0: at most this many connections open at once from one client address (an IPv4
     * address; an IPv6 address by its /64), across all workers; one more is refused like one
     * over max_conns, unless evict makes room. 0: no per-peer cap. Costs a lock per accept and
     * per close (never per request) while set. */
    uint32_t max_conns_per_peer;
    /* A connection over a cap makes room instead of being refused: the accepting worker closes
     * its connection (of the same peer, when the peer's cap is the one reached) that has waited
     * longest on its client - one lingering after an error, in a TLS handshake, reading an
     * incomplete request (since its first byte: a 503 with a JSON body is tried first) or idle
     * between requests (since its last byte) - counted: evicted. Never one the server is
     * answering (output pending, a delayed, held or streamed answer), nor HTTP/2 or an upgraded
     * connection. With none to close, the new one is refused. So a client that holds many
     * connections with slow requests cannot keep a new one out; the timeouts bound how long a
     * slow request lives. */
    bool evict;
    /* Serve HTTP/1.x only: the HTTP/2 client preface is answered 400 like any malformed request
     * line (an API whose answers may be held, below, which HTTP/2 streams cannot be). */
    bool http1_only;
};

/* Counts kept by the server itself, summed over workers (each worker writes only its own). */
struct sq_server_counts {
    uint64_t accepted;           /* connections accepted */
    uint64_t requests;           /* requests handed to the handler */
    uint64_t bad_req;            /* 400: malformed */
    uint64_t too_large;          /* 413: body over SQ_SERVER_MAX_BODY */
    uint64_t head_big;           /* 431: head over SQ_SERVER_MAX_HEAD or too many headers */
    uint64_t tls_ok, tls_failed; /* TLS handshakes completed / failed (closed) */
    uint64_t h2_conns;           /* connections switched to HTTP/2 (h2c preface or ALPN "h2") */
    uint64_t h2_streams; /* HTTP/2 requests (streams) handed to the handler; in requests too */
    uint64_t smuggling;  /* of bad_req: request-smuggling shapes (see the file comment) */
    uint64_t refused;    /* connections closed at accept: a cap was reached (none evicted) */
    uint64_t idle_timeouts, header_timeouts; /* connections closed by each timeout */
    /* connections answered 408 because a request's body came too slowly: past the request
     * timeout, or under the minimum rate (a head still incomplete is a header timeout) */
    uint64_t body_timeouts;
    uint64_t head_refused; /* requests the on_head hook refused before their body was read */
    uint64_t evicted;      /* connections closed to make room for a new one (evict) */
    uint64_t open;         /* connections open now (a gauge, not a count) */
};

/* Binds every listener, then starts the worker threads. Returns 0, -errno (bind, listen, thread
 * creation), -SQ_ERESOLVE (with *why set, may be NULL) or -EINVAL (bad config: a negative
 * timeout, or one over SQ_SERVER_MAX_TIMEOUT_NS). Nothing is left
 * running on error. */
SQ_MUST_CHECK int sq_server_start(const struct sq_server_config *cfg, struct sq_server **out,
                                  const char **why);
/* The port every listener is bound to. */
uint16_t sq_server_port(const struct sq_server *s);
/* Number of worker threads. */
int sq_server_threads(const struct sq_server *s);
/* Asks every worker to close its connections and exit. Async-signal-safe; idempotent. */
void sq_server_stop(struct sq_server *s);
/* Waits for every worker to exit (after sq_server_stop). */
void sq_server_wait(struct sq_server *s);
/* Stops, waits, and frees the server. NULL is a no-op. */
void sq_server_free(struct sq_server *s);

/* Sums the per-worker counts (relaxed loads: a live, untorn-per-field view). Any thread. */
void sq_server_counts(const struct sq_server *s, struct sq_server_counts *out);

/* ---- answers given later, and work handed to a worker from another thread ----
 *
 * A handler that cannot answer at once (the answer needs a disk write, or it is a stream of
 * events that other threads produce) holds the request: the connection is parked with no events
 * and no timer, like a delayed answer, and the requests pipelined behind it wait. Later, on the
 * same worker thread, the answer is given whole (sq_server_hold_answer), or as a chunked stream
 * (begin, write..., end). Another thread reaches the worker with sq_server_post. A held
 * connection is never idle while nothing is queued for it (the idle timeout skips it), and a
 * reader that is more than SQ_SERVER_HOLD_MAX_PENDING bytes behind a stream is closed. */

#define SQ_SERVER_HOLD_MAX_PENDING (1024 * 1024)

struct sq_server_hold; /* owned by the server; valid until the hold ends or gone() is called */

/* Called on the worker thread when a held connection closes before its hold ended: the peer
 * left (seen when the kernel reports it, or at the next write), or the server is stopping.
 * The hold is invalid once it returns. */
typedef void (*sq_server_gone_fn)(void *ud);

/* Inside the handler only: holds req. Returns the handle, or NULL when the request cannot be
 * held (HTTP/2, out of memory, or already held): answer it now. If the handler also sets
 * resp->status, the answer begins at once as a stream (sq_server_hold_begin with resp, in order
 * with the answers before it); else resp is ignored. */
struct sq_server_hold *sq_server_hold(const struct sq_server_req *req, sq_server_gone_fn gone,
                                      void *ud);

/* On the hold's worker thread (in a sq_server_post callback or a handler), never inside the
 * handler that created it. Each returns 0, or a negative code when the connection failed and
 * was closed: the hold is over then and gone is not called. fill and stream in resp are not
 * supported here (fill_total is ignored). */

/* Sends the whole answer and ends the hold; the connection goes on with what waits behind. */
int sq_server_hold_answer(struct sq_server_hold *h, const struct sq_server_resp *resp);
/* Sends resp's head with "Transfer-Encoding: chunked" (an HTTP/1.0 request: unframed, and the
 * connection closes at the end) and resp->body, if any, as the first chunk. The hold goes on. A
 * HEAD request gets the head alone; later writes send nothing. */
int sq_server_hold_begin(struct sq_server_hold *h, const struct sq_server_resp *resp);
/* Sends p[0, n) as one chunk of a begun stream (n 0: nothing). -ENOBUFS: more than
 * SQ_SERVER_HOLD_MAX_PENDING bytes were already waiting for a reader that does not read. */
int sq_server_hold_write(struct sq_server_hold *h, const char *p, size_t n);
/* Ends a begun stream (the zero chunk) and the hold. */
int sq_server_hold_end(struct sq_server_hold *h);

/* Runs fn(ud) on worker's thread once its loop wakes (an eventfd per worker). Any thread.
 * Returns 0: fn runs exactly once - on the worker, or, for a post the worker did not reach
 * before it stopped, inside sq_server_free on the calling thread; or -ENOMEM / -EINVAL (no such
 * worker): fn never runs. Posts from one thread run in the order they were made. */
SQ_MUST_CHECK int sq_server_post(struct sq_server *s, int worker, void (*fn)(void *ud), void *ud);

/* Finds a header by name, case-insensitively. Returns it or NULL. */
const struct sq_h1_header *sq_server_req_header(const struct sq_server_req *req, const char *name);

/* True when the request head at p[0, n) (complete or not; never read past p + n) has a shape
 * RFC 9112 refuses because two parties could frame its body differently: Content-Length with
 * Transfer-Encoding (6.1, 6.3), Content-Length values that disagree (6.3), obs-fold (5.2),
 * whitespace between a field name and its colon (5.1), Transfer-Encoding in HTTP/1.0, or
 * without "chunked" as its one and final coding (6.1, 6.3). The server asks it only about heads
 * the parser has refused (400), to count them apart; exposed for tests. */
bool sq_server_smuggle_shape(const char *p, size_t n);

/* The reason phrase for a status code ("" for codes without one). */
const char *sq_server_reason(int status);

#endif
