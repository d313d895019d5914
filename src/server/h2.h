/* server/h2.h - HTTP/2 in the server core: internal to server/ (and to its TLS path).
 *
 * A connection becomes HTTP/2 in one of two ways:
 *  - plaintext, prior knowledge (h2c): the first bytes a fresh connection sends are the client
 *    preface "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" (server.c notices it where the HTTP/1.1 parser
 *    rejects the request line, so HTTP/1.1 requests pay nothing for the check);
 *  - over TLS after ALPN selected "h2": the TLS path calls sq_server__h2_begin() with the
 *    decrypted bytes it has already read (possibly none).
 * From then on the connection's bytes go through an nghttp2 server session (h2.c), which calls
 * the same handler as HTTP/1.1 once per complete request (stream). Output is pulled from the
 * session with nghttp2_session_mem_send() and leaves through the server's own batch buffer,
 * send path and EAGAIN queue, so whatever carries HTTP/1.1 bytes (plain or TLS) carries these.
 *
 * `struct conn` is server.c's connection; h2.c only holds a pointer to it.
 */
#ifndef SQ_SERVER_H2_H
#define SQ_SERVER_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/clock.h"
#include "base/err.h"
#include "server/server.h"

struct conn;
struct sq_loop;
struct sq_server__h2; /* one connection's HTTP/2 state (h2.c) */

/* A streamed answer's pace (sq_server_resp.stream), over HTTP/1.x and HTTP/2 alike: the piece
 * maker, the next piece to make, how many in all, and when each is due. */
struct sq_server__pace {
    sq_server_stream_fn fn;
    void *ud;
    uint32_t next, count;
    int64_t start_ns, interval_ns;
};

/* Starts r's pace now (r->stream set; a negative interval counts as none). */
static inline void sq_server__pace_start(struct sq_server__pace *p, const struct sq_server_resp *r)
{
    p->fn = r->stream;
    p->ud = r->stream_ud;
    p->next = 0;
    p->count = r->stream_count;
    p->start_ns = sq_now_ns();
    p->interval_ns = r->stream_interval_ns > 0 ? r->stream_interval_ns : 0;
}

/* When piece k (0-based) is due: interval * (k + 1) after the start, saturating. */
static inline int64_t sq_server__pace_due(const struct sq_server__pace *p, uint32_t k)
{
    int64_t off, due;
    if (__builtin_mul_overflow(p->interval_ns, (int64_t)k + 1, &off) ||
        __builtin_add_overflow(p->start_ns, off, &due))
        return INT64_MAX;
    return due;
}

/* The HTTP/2 client connection preface (RFC 9113 3.4), 24 bytes. */
#define SQ_SERVER_H2_PREFACE     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define SQ_SERVER_H2_PREFACE_LEN 24
/* SETTINGS_MAX_CONCURRENT_STREAMS the server announces. */
#define SQ_SERVER_H2_MAX_STREAMS 1024

/* ---- server.c, for the TLS path ---- */

/* Switches connection c to HTTP/2 and feeds it initial[0, len) (bytes already read; for h2c
 * they start with the client preface, after ALPN "h2" they are whatever the TLS layer has
 * decrypted so far, possibly nothing). Sends the server's SETTINGS and any answers, sets c's
 * events. c may be closed on return (out of memory, a protocol error). Worker thread only. */
void sq_server__h2_begin(struct conn *c, const char *initial, size_t len);

/* ---- h2.c, called by server.c ---- */

/* Creates c's session (server SETTINGS queued). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_server__h2_new(struct conn *c, struct sq_loop *loop,
                                    struct sq_server__h2 **out);
/* Frees the session, its streams and their timers. NULL is a no-op. */
void sq_server__h2_free(struct sq_server__h2 *h);
/* Feeds received bytes; complete requests are answered (the handler runs inside). Returns 0,
 * or a negative code when the connection is beyond saving (send what is queued, then close). */
SQ_MUST_CHECK int sq_server__h2_feed(struct sq_server__h2 *h, const char *buf, size_t len);
/* Pulls queued frames out of the session into sq_server__h2_out() until the session has
 * nothing more to send now or the output blocked. Returns 0 (all out), 1 (blocked: call again
 * once the socket drained) or a negative code. */
SQ_MUST_CHECK int sq_server__h2_send(struct sq_server__h2 *h);
/* True when a stream waits on its own timer (a delayed answer, a streamed one between pieces):
 * the connection is then not idle, whatever its client does. */
bool sq_server__h2_waiting(const struct sq_server__h2 *h);
/* True when the session wants neither to read nor to write (GOAWAY done): close. */
bool sq_server__h2_done(const struct sq_server__h2 *h);

/* ---- server.c, called by h2.c ---- */

/* Queues p[0, n) for c (the worker's batch, sent when it fills, else by the caller of
 * sq_server__h2_send). Returns 0 (go on), 1 (the socket is full: the bytes are kept, stop
 * pulling) or a negative code. */
SQ_MUST_CHECK int sq_server__h2_out(struct conn *c, const uint8_t *p, size_t n);
/* Runs the server's handler for one complete request: fills req->worker, server and
 * arrival_ns, counts the request and the stream. */
void sq_server__h2_dispatch(struct conn *c, struct sq_server_req *req, struct sq_server_resp *resp);
/* A timer of c's session queued output outside any I/O event: send it, set c's events, and
 * close c when the session is done. c may be closed on return. */
void sq_server__h2_kick(struct conn *c);

#endif
