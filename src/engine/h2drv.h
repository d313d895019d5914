/* engine/h2drv.h - the HTTP/2 driver of a worker (internal to engine/).
 *
 * Over HTTP/2 a worker's VUs are stream slots: VU i rides connection i / streams, each connection
 * carries `streams` VUs, and every VU behaves as over HTTP/1.1 (worker.c runs the executors,
 * pacing, timeouts and accounting unchanged) except for a handful of entry points that worker.c
 * routes here when w->h2 is set: connect (join the VU's connection, opening it if needed), send
 * (submit a stream), close (cancel the VU's stream) and the end-of-run and sweep hooks. The
 * connections, their nghttp2 sessions (http/h2.h) and their reconnect logic live in h2drv.c.
 *
 * Errors, per request: a stream reset by the server (RST_STREAM, or REFUSED_STREAM after a
 * GOAWAY) is `closed`; the connection closing under open streams fails each with `closed`; bytes
 * that break the protocol fail every open stream with `parse`; a failed write with `write`; a
 * timeout cancels that stream alone (RST_STREAM CANCEL) and counts `timeout`, the connection
 * goes on. A GOAWAY lets the open streams finish, then the connection is replaced.
 */
#ifndef SQ_ENGINE_H2DRV_H
#define SQ_ENGINE_H2DRV_H

#include <stdint.h>

#include "base/err.h"

struct sq_engine__worker;
struct sq_engine__conn;

/* Sets up w->h2: nconn connections numbered from first_global (they pick the address), each
 * carrying cfg->streams VUs: w->conns[k * streams .. (k + 1) * streams). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_engine__h2_init(struct sq_engine__worker *w, uint32_t nconn,
                                     uint32_t first_global);
/* Frees w->h2 (after sq_engine__h2_close_all). NULL w->h2 is a no-op. */
void sq_engine__h2_dispose(struct sq_engine__worker *w);

/* The VU c wants its connection: IDLE at once (and sent on its way) when the connection is
 * open, CONNECTING while it connects (opening it if it is closed), BACKOFF while it waits to
 * reconnect. */
void sq_engine__h2_vu_connect(struct sq_engine__conn *c);
/* c was made ACTIVE by worker.c's conn_send: submit its request as a stream and write it (at
 * once, or at the end of the connection's current event). */
void sq_engine__h2_vu_send(struct sq_engine__conn *c);
/* worker.c closes c: an ACTIVE c's stream is cancelled (RST_STREAM CANCEL). The connection
 * stays. */
void sq_engine__h2_vu_close(struct sq_engine__conn *c);
/* Every 100 ms: connect timeouts, and RST_STREAMs still to be written. */
void sq_engine__h2_sweep(struct sq_engine__worker *w, int64_t now);
/* The end of the run: closes every connection (VUs are left to worker.c). */
void sq_engine__h2_close_all(struct sq_engine__worker *w);

#endif
