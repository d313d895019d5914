/* http/h3client.h - the HTTP/3 side of a client connection (nghttp3), beside the QUIC transport
 * that carries it (net/quic.h; engine/h3drv.c joins the two).
 *
 * What it owns is what HTTP/3 adds to QUIC streams: the control and QPACK streams, each request
 * (the same prepared struct sq_h2_req as over HTTP/2: its fields are handed to nghttp3 as they
 * are, nghttp2_nv and nghttp3_nv sharing one layout) and each response's head and body, mapped
 * onto the caller's struct sq_h3_stream (the stream user data, as h2client.h's sq_h2_stream).
 * The transport's part (which bytes go out on which QUIC stream, acknowledgements, flow-control
 * credit) goes straight to nghttp3 through sq_h3_client.conn: engine/h3drv.c calls
 * nghttp3_conn_writev_stream and friends on it.
 *
 * Our code allocates nothing per request; nghttp3 allocates per stream, as nghttp2 does.
 */
#ifndef SQ_HTTP_H3CLIENT_H
#define SQ_HTTP_H3CLIENT_H

#ifdef SQ_HAVE_H3

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "http/h2client.h"

/* HTTP/3 error codes (RFC 9114 8.1) as the callbacks report them. */
#define SQ_H3_NO_ERROR          0x100
#define SQ_H3_INTERNAL_ERROR    0x102
#define SQ_H3_REQUEST_CANCELLED 0x10c

/* One request in flight: caller-owned, valid from submit until on_end / on_reset, or until the
 * caller forgets it (sq_h3_stream_forget). */
struct sq_h3_stream {
    int64_t id;      /* the QUIC stream id; -1: none */
    uint16_t status; /* the final status once its head arrived, else 0 */
    uint8_t coding;  /* enum sq_coding of the final head's content-encoding */
    bool event_stream;
    bool want_fields;   /* set by the caller: every field of the final head to on_field */
    bool want_location; /* ... or only the location of a redirect */
    bool head_seen;
    uint64_t rx_bytes; /* response header block (decoded) + DATA payload bytes */
    const struct sq_h2_req *_req;
};

struct sq_h3_callbacks {
    void (*on_headers)(void *ud, struct sq_h3_stream *st, int status);
    void (*on_data)(void *ud, struct sq_h3_stream *st, const char *data, size_t len);
    /* The response ended (the server's FIN after a final head): st is done. */
    void (*on_end)(void *ud, struct sq_h3_stream *st);
    /* The stream ended without a complete response (reset, or closed with app_error): st is
     * done. */
    void (*on_reset)(void *ud, struct sq_h3_stream *st, uint64_t app_error);
    void (*on_field)(void *ud, struct sq_h3_stream *st, const char *name, size_t name_len,
                     const char *value, size_t value_len);
    /* nghttp3 consumed n bytes of stream sid that the transport must credit back (flow
     * control): DATA payload and deferred header bytes. */
    void (*on_consumed)(void *ud, int64_t sid, size_t n);
    /* The HTTP/3 layer asks the transport to stop a stream: read side (stop_sending) or write
     * side (reset_stream) with app_error. */
    void (*on_shutdown_stream)(void *ud, int64_t sid, uint64_t app_error, bool read);
    /* The server sent GOAWAY. May be NULL. */
    void (*on_goaway)(void *ud);
};

struct sq_h3_client {
    void *conn; /* nghttp3_conn */
    const struct sq_h3_callbacks *_cb;
    void *_ud;
    uint32_t open; /* requests submitted, not ended */
    bool goaway;
};

/* Creates the client (control and QPACK streams bound to the three unidirectional stream ids
 * the transport opened for them). Returns 0, -ENOMEM or -SQ_EPARSE. */
SQ_MUST_CHECK int sq_h3_client_init(struct sq_h3_client *c, const struct sq_h3_callbacks *cb,
                                    void *ud, int64_t ctrl, int64_t qenc, int64_t qdec);
void sq_h3_client_dispose(struct sq_h3_client *c);
/* Submits r on the new bidirectional stream sid with st. Returns 0 or a negative code. */
SQ_MUST_CHECK int sq_h3_client_submit(struct sq_h3_client *c, int64_t sid,
                                      const struct sq_h2_req *r, struct sq_h3_stream *st);
/* Stream data from the transport; callbacks run inside. Returns the bytes the transport may
 * credit back at once (>= 0), or a negative code: the connection must close (H3 error). */
int64_t sq_h3_client_read(struct sq_h3_client *c, int64_t sid, const uint8_t *data, size_t len,
                          bool fin);
/* The caller gives up on st (timeout, closed VU): no callback names it again. */
void sq_h3_stream_forget(struct sq_h3_client *c, struct sq_h3_stream *st);

#endif
#endif
