/* engine/driver.h - the seam between a worker and a protocol (internal to engine/).
 *
 * A worker (worker.c) owns VUs, scheduling and accounting; a driver owns its connections' bytes.
 * Each worker runs one driver, picked once at init (worker.c: HTTP/1.1 unless the run is
 * HTTP/2), and calls it through the small table below at five points: connect, send, close,
 * sweep and the end of the run (plus init and dispose). Every VU is a struct sq_engine__conn
 * (worker.h) whatever the protocol: the driver moves it between the states of enum conn_state
 * and calls back into the worker (the sq_engine__vu_* functions below) when a request
 * completes, fails or the VU is free for its next one. docs/internals/engine.md, "How to add a
 * protocol", says what each side owes the other. A flow with a batch adds lanes (worker.h:
 * conns[lane0, lane0 + nlanes), c->lane): connections that are not VUs, which a driver sets up,
 * sweeps and closes as it does its VUs; the callbacks below are the same for them.
 *
 * Why a table and not a switch: the only entry point a request crosses in the steady state is
 * `send` (connect, close and sweep are per connection or per 100 ms), and an indirect call that
 * always goes to the same place costs what a direct one does; docs/benchmarks.md ("The driver
 * seam, the framing check and the head fields") measures it against the code it replaced.
 *
 * The accounting contract, per worker: c.sent == c.completed + c.failed + in_flight. The worker
 * counts `sent` and `in_flight` in conn_send before it calls `send`; from then on exactly one of
 * sq_engine__vu_complete or sq_engine__vu_fail ends that request, or it is still in flight when
 * the run ends. A driver never touches sent/completed/failed/in_flight itself.
 */
#ifndef SQ_ENGINE_DRIVER_H
#define SQ_ENGINE_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/run.h"

struct sq_engine__worker;
struct sq_engine__conn;
struct sq_tls_conn;

struct sq_engine__driver {
    const char *name; /* "http/1.1", "h2" */
    /* Sets up the driver's state for the worker's VUs, w->conns[0, w->nconns) (their common
     * fields are set already): nconn connections numbered from first_global (the number picks
     * the address), w->nconns / nconn VUs each. Returns 0 or -ENOMEM. */
    int (*init)(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global);
    /* Frees what init made; runs once, after close_all (or after a failed init). */
    void (*dispose)(struct sq_engine__worker *w);
    /* The VU c (CONN_CLOSED) wants its connection. The driver makes it CONN_CONNECTING (or
     * CONN_HANDSHAKE, or CONN_BACKOFF after sq_engine__vu_backoff) and, once the connection is
     * usable, CONN_IDLE followed by sq_engine__vu_next. */
    void (*connect)(struct sq_engine__conn *c);
    /* c is CONN_ACTIVE with its request in c->req[0, c->req_len) (c->head: a HEAD request),
     * already counted as sent: put it on the wire. Hot path: no allocation. A write that fails
     * ends the request with sq_engine__vu_fail (and sq_engine__vu_replace). */
    void (*send)(struct sq_engine__conn *c);
    /* The worker closes c (sq_engine__vu_close, with c->state still the old state): release
     * what the VU holds (its socket, or its stream on a shared connection). No callback runs. */
    void (*close)(struct sq_engine__conn *c);
    /* Every 100 ms: connect and handshake timeouts, deferred writes. Request timeouts are the
     * worker's (it fails the request and closes the VU). */
    void (*sweep)(struct sq_engine__worker *w, int64_t now);
    /* The end of the run: close every connection without a callback; the worker then marks
     * every VU closed (what was still out stays in flight). */
    void (*close_all)(struct sq_engine__worker *w);
    /* Optional (NULL: nothing): after join, before dispose, adds the driver's own figures into
     * the run's result (WebSocket: out->ws). Main thread, once per worker. */
    int (*result)(struct sq_engine__worker *w, struct sq_result *out);
};

extern const struct sq_engine__driver sq_engine__h1_driver; /* h1drv.c */
extern const struct sq_engine__driver sq_engine__h2_driver; /* h2drv.c */
#ifdef SQ_HAVE_H3
extern const struct sq_engine__driver sq_engine__h3_driver; /* h3drv.c: QUIC (net/quic.h) */
#endif
extern const struct sq_engine__driver sq_engine__ws_driver; /* wsdrv.c */
/* busio.c: NATS and MQTT, one skeleton around the protocol's ops (natsdrv.c, mqttdrv.c) */
extern const struct sq_engine__driver sq_engine__bus_driver;
/* flowbus.c: a plan flow with no request step (only publish, subscribe, think): its VUs open
 * no connection of their own */
extern const struct sq_engine__driver sq_engine__null_driver;

/* ---- what a driver calls back (worker.c) ---- */

/* The VU is open and idle: send, pace, park, think, or wait for an arrival. */
void sq_engine__vu_next(struct sq_engine__conn *c, int64_t now);
/* The VU's request completed; its status and sizes are in c->rd (status, head_bytes,
 * body.bytes, content_encoding): latency, status, bytes, sample, the flow's checks. Leaves c
 * CONN_IDLE; the driver then calls sq_engine__vu_next, or closes and replaces the VU. */
void sq_engine__vu_complete(struct sq_engine__conn *c, int64_t now);
/* The VU's request failed with kind k (an ACTIVE VU), or the VU's connection broke while no
 * request was out (then only the kind is counted): the VU is closed (sq_engine__vu_close). The
 * driver then calls sq_engine__vu_replace. */
void sq_engine__vu_fail(struct sq_engine__conn *c, enum sq_errk k);
/* Closes the VU through the driver's close; CONN_CLOSED after. A request still out (the rest of a
 * pipelined batch behind a response that ended with the connection) fails as `closed`, so no
 * request is ever forgotten. */
void sq_engine__vu_close(struct sq_engine__conn *c);
/* The VU asks for a connection again, unless the worker is winding down. */
void sq_engine__vu_replace(struct sq_engine__conn *c);
/* After a failed connect or handshake: the VU waits (CONN_BACKOFF, the worker's timer, 10 ms
 * doubling to 1.28 s) and asks again; once the run winds down it gives its iteration up. */
void sq_engine__vu_backoff(struct sq_engine__conn *c);
/* An error of kind k that costs no request (unsolicited bytes, a broken idle connection):
 * counted; the caller closes and replaces the connection. */
void sq_engine__conn_error(struct sq_engine__worker *w, enum sq_errk k);
/* A connect attempt failed with err: counted once, published for the watchdog. */
void sq_engine__connect_error(struct sq_engine__worker *w, int err);
/* A TLS failure: its message kept for the summary (the first one); with count, also counted as
 * one `tls` error that cost no request (a handshake, or an alert on an idle connection). */
void sq_engine__tls_error(struct sq_engine__worker *w, const char *msg, bool count);
/* A handshake completed: counted (resumed too); the first one's version, cipher and ALPN kept. */
void sq_engine__tls_done(struct sq_engine__worker *w, const struct sq_tls_conn *t);
/* Exchange capture (engine/capture.h), called only when c->xc is set: raw response bytes read
 * before the head is complete, the complete head, and body bytes (decoded). */
void sq_engine__xc_raw(struct sq_engine__conn *c, const char *data, size_t len);
void sq_engine__xc_head(struct sq_engine__conn *c, uint16_t status, const char *head, size_t len);
void sq_engine__xc_body(struct sq_engine__conn *c, const char *data, size_t len);
/* A WebSocket upgrade failed (msg says how): counted as one `upgrade` error that cost no request,
 * the first message kept for the summary and the watchdog. The driver closes the VU and backs
 * off. */
void sq_engine__upgrade_error(struct sq_engine__worker *w, const char *msg);
/* A proxy refused a connection's CONNECT (or answered it badly): counts a `proxy` error and
 * keeps the first message for the summary. */
void sq_engine__proxy_error(struct sq_engine__worker *w, const char *msg);
/* True once the worker must stop: past its hard end (the load's end plus the graceful stop),
 * or the run was aborted. For a driver inside long work (decoding a large body): it abandons
 * the work, leaves the request in flight and stops watching that connection; the worker leaves
 * its loop as soon as the current batch of events is done. Reads the clock until it is true. */
bool sq_engine__past_end(struct sq_engine__worker *w);

#endif
