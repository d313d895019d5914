/* http/h2client.h - an HTTP/2 client session (nghttp2) for one connection, driven by the caller's
 * I/O.
 *
 * The caller owns the socket: it feeds what it read with sq_h2_client_feed() and writes what
 * sq_h2_client_pending() hands out (all queued frames coalesced into one buffer, so one send()
 * carries them), then says how much left with sq_h2_client_consume(). Results come back per
 * stream through callbacks, which run inside feed() (and inside pending() for streams nghttp2
 * closes itself while sending, e.g. a request refused after a GOAWAY).
 *
 * A request is prepared once (struct sq_h2_req: the nghttp2 header array with its strings) and
 * submitted any number of times. Each in-flight request needs a caller-owned struct
 * sq_h2_stream (embed it in whatever represents the request; SQ_CONTAINER_OF gets back to it),
 * which must stay put until its on_close callback has run or the client is disposed.
 * Our code allocates nothing per request; nghttp2 allocates a few blocks per stream
 * (sq_h2_client.allocs counts them; docs/internals/http.md has the figure).
 *
 * Flow control: the client announces a large stream window (default 16 MiB) and widens the
 * connection window (default 1 GiB), so a loopback server never waits for WINDOW_UPDATE; nghttp2
 * sends the updates as data is consumed. Response bodies are framed only (counted, not kept)
 * unless the options ask for them.
 */
#ifndef SQ_HTTP_H2CLIENT_H
#define SQ_HTTP_H2CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "http/request.h"

#define SQ_H2_DEFAULT_WINDOW      (16u << 20) /* SETTINGS_INITIAL_WINDOW_SIZE we announce */
#define SQ_H2_DEFAULT_CONN_WINDOW (1u << 30)  /* the connection's receive window */
#define SQ_H2_MAX_WINDOW          0x7fffffffu

/* RST_STREAM / GOAWAY error codes (RFC 9113 7) as the callbacks report them. */
#define SQ_H2_NO_ERROR       0x0
#define SQ_H2_PROTOCOL_ERROR 0x1
#define SQ_H2_INTERNAL_ERROR 0x2
#define SQ_H2_REFUSED_STREAM 0x7
#define SQ_H2_CANCEL         0x8

/* A request prepared once: pseudo-headers, fields and an optional body. Opaque. */
struct sq_h2_req {
    void *_nv; /* nghttp2_nv[], names and values in _store */
    size_t _nvlen;
    char *_store;
    size_t _cap;       /* bytes of _store: sq_h2_req_from_h1 reuses it when it fits */
    const char *_body; /* borrowed: must outlive every submission */
    size_t _body_len;
};

/* One request in flight: caller-owned storage, valid from submit until on_close. */
struct sq_h2_stream {
    const struct sq_h2_req *_req;
    uint64_t _off;   /* request body bytes handed to nghttp2 */
    int32_t id;      /* the stream id (> 0) once submitted */
    uint16_t status; /* the final status once the response head arrived, else 0 */
    bool _head_seen;
    bool _live; /* submitted, not closed or cancelled yet */
    /* Of the final response head, set as its fields arrive (before on_headers): */
    uint8_t coding;    /* enum sq_coding of its content-encoding field(s) (http/decode.h) */
    bool event_stream; /* its content-type is text/event-stream */
    /* Set by the caller before a submit (a submit leaves it as it is): hand every field of the
     * final response head to on_field. */
    bool want_fields;
    /* ... or only the location field of a redirect (http/redirect.h: 301, 302, 303, 307, 308):
     * a head with another status costs one compare */
    bool want_location;
    uint64_t rx_bytes; /* response header block + DATA payload bytes received */
};

struct sq_h2_callbacks {
    /* The final (non-1xx) response head of st arrived. May be NULL. */
    void (*on_headers)(void *ud, struct sq_h2_stream *st, int status);
    /* DATA payload for st: data is NULL unless the options asked for bodies. May be NULL. */
    void (*on_data)(void *ud, struct sq_h2_stream *st, const char *data, size_t len);
    /* st is closed: error_code is SQ_H2_NO_ERROR for a normal end, else the RST_STREAM code
     * (either side's), SQ_H2_REFUSED_STREAM for a request the server never processed (after a
     * GOAWAY). Always called once per submitted stream unless the client is disposed first.
     * st may be reused (submitted again) from inside this callback. */
    void (*on_close)(void *ud, struct sq_h2_stream *st, uint32_t error_code);
    /* The server sent GOAWAY: no new request will be accepted; streams above last_stream_id
     * are closed with SQ_H2_REFUSED_STREAM right after. May be NULL. */
    void (*on_goaway)(void *ud, uint32_t error_code, int32_t last_stream_id);
    /* One field of st's final (non-1xx) response head, pseudo-headers left out, in the order
     * they came (name lower case, as HTTP/2 sends it; nghttp2 has checked both for bytes a field
     * may not hold), for a stream with want_fields set (or its location field, with
     * want_location); before on_headers. May be NULL. */
    void (*on_field)(void *ud, struct sq_h2_stream *st, const char *name, size_t name_len,
                     const char *value, size_t value_len);
};

struct sq_h2_opts {
    uint32_t max_streams; /* streams this client keeps open at most (also capped by the
                             server's SETTINGS_MAX_CONCURRENT_STREAMS); 0: 100 */
    uint32_t window;      /* initial stream window we announce; 0: SQ_H2_DEFAULT_WINDOW */
    uint32_t conn_window; /* connection receive window; 0: SQ_H2_DEFAULT_CONN_WINDOW */
    bool want_body;       /* hand DATA bytes to on_data (else NULL and only the length) */
};

/* Caller-owned; fields starting with _ are private. */
struct sq_h2_client {
    void *_s; /* nghttp2_session */
    const struct sq_h2_callbacks *_cb;
    void *_ud;
    char *_out; /* coalesced output: [_out_off, _out_len) not written yet */
    size_t _out_off, _out_len, _out_cap;
    uint32_t _max_streams;
    uint32_t open; /* streams submitted and not closed yet */
    bool _want_body;
    bool goaway;     /* the server sent GOAWAY */
    uint64_t allocs; /* allocations nghttp2 made through this session (for measurement) */
};

/* Prepares a request: ":method", ":scheme", ":authority", ":path", then headers (names
 * lowercased; Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding and Upgrade are
 * dropped; a user Host replaces :authority), then "user-agent: squall/VERSION" unless a user
 * User-Agent is given (an empty one removes it), and "content-length" when body_len > 0 or the
 * method is POST, PUT or PATCH (unless the user gave one). Strings are copied; body is borrowed
 * and must outlive every submission. Returns 0, -SQ_EUSAGE (empty method, scheme, authority
 * or path; control bytes) or -ENOMEM. */
SQ_MUST_CHECK int sq_h2_req_init(struct sq_h2_req *r, const char *method, const char *scheme,
                                 const char *authority, const char *path,
                                 const struct sq_kv *headers, size_t nheaders, const void *body,
                                 size_t body_len);
/* The same request from its HTTP/1.1 form h1[0, len), as sq_request_build or a plan's flow
 * serialises it: the method and target of the request line, every field (Host becomes
 * :authority; connection-specific ones are dropped, as above), and the bytes after the head as
 * the body (borrowed: they must outlive every submission). r is zeroed, or a request this
 * function or sq_h2_req_init built: its storage is reused when the new request fits, so a
 * caller rendering a request per iteration into one r stops allocating once r has reached its
 * working size. Returns 0, -SQ_EUSAGE (not a request head, or a field HTTP/2 cannot carry) or
 * -ENOMEM; on error r is left as a valid request (maybe a previous one) or zeroed. */
SQ_MUST_CHECK int sq_h2_req_from_h1(struct sq_h2_req *r, const char *scheme, const char *h1,
                                    size_t len);
/* Frees what sq_h2_req_init() allocated. A zeroed req is a no-op. */
void sq_h2_req_dispose(struct sq_h2_req *r);

/* Creates the client session and queues the preface, SETTINGS (push off, the stream window)
 * and the connection WINDOW_UPDATE. cb must outlive c. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_h2_client_init(struct sq_h2_client *c, const struct sq_h2_opts *opts,
                                    const struct sq_h2_callbacks *cb, void *ud);
/* Frees the session and buffers. Streams still open get no on_close: the caller accounts for
 * them (c->open says how many). */
void sq_h2_client_dispose(struct sq_h2_client *c);

/* Feeds bytes read from the connection; callbacks run inside. Returns 0, or -SQ_EPARSE (the
 * peer broke the protocol, or a callback failed) / -ENOMEM: the session is over, close the
 * connection (after writing what pending() still has, e.g. a GOAWAY). */
SQ_MUST_CHECK int sq_h2_client_feed(struct sq_h2_client *c, const char *buf, size_t len);

/* Submits r on st. Returns the stream id (> 0), -EAGAIN (opts.max_streams are open),
 * -EPIPE (GOAWAY received, or stream ids exhausted: open a new connection) or -ENOMEM. The
 * HEADERS frame is queued; it leaves with pending(). Past the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS nghttp2 holds the request back until a stream closes. */
SQ_MUST_CHECK int32_t sq_h2_client_submit(struct sq_h2_client *c, const struct sq_h2_req *r,
                                          struct sq_h2_stream *st);
/* True when a submit would be accepted now (no GOAWAY, under opts.max_streams). */
bool sq_h2_client_can_submit(const struct sq_h2_client *c);
/* Gives up on st (a timeout, say): queues RST_STREAM with error_code and forgets the stream at
 * once - its slot counts as free, and no callback will name st again. No-op when st is not in
 * flight on c. */
void sq_h2_client_cancel(struct sq_h2_client *c, struct sq_h2_stream *st, uint32_t error_code);

/* Everything queued to write, coalesced: *p and *len (0 when nothing) stay valid until the next
 * call on c. Returns 0, or -ENOMEM / -SQ_EPARSE (the session failed: close). */
SQ_MUST_CHECK int sq_h2_client_pending(struct sq_h2_client *c, const char **p, size_t *len);
/* The caller wrote n bytes of what pending() returned (n <= its len). */
void sq_h2_client_consume(struct sq_h2_client *c, size_t n);

/* True while the session wants to read or write (false once a GOAWAY exchange ended it). */
bool sq_h2_client_alive(const struct sq_h2_client *c);

#endif
