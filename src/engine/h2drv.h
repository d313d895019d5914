/* engine/h2drv.h - the HTTP/2 driver of a worker (internal to engine/).
 *
 * Over HTTP/2 a worker's VUs are stream slots: VU i rides connection i / streams, each connection
 * carries `streams` VUs, and every VU behaves as over HTTP/1.1 (worker.c runs the executors,
 * pacing, timeouts and accounting unchanged). The worker reaches the driver through
 * sq_engine__h2_driver (engine/driver.h): connect (join the VU's connection, opening it if
 * needed: IDLE at once and sent on its way when it is open, CONNECTING while it connects,
 * BACKOFF while it waits to reconnect), send (submit a stream, written at once or at the end of
 * the connection's current event), close (cancel an ACTIVE VU's stream with RST_STREAM CANCEL;
 * the connection stays), sweep (connect timeouts, RST_STREAMs still to be written) and close_all.
 * The connections, their nghttp2 sessions (http/h2.h) and their reconnect logic live in h2drv.c.
 *
 * Errors, per request: a stream reset by the server (RST_STREAM, or REFUSED_STREAM after a
 * GOAWAY) is `closed`; the connection closing under open streams fails each with `closed`; bytes
 * that break the protocol fail every open stream with `parse`; a failed write with `write`; a
 * timeout cancels that stream alone (RST_STREAM CANCEL) and counts `timeout`, the connection
 * goes on. A GOAWAY lets the open streams finish, then the connection is replaced.
 */
#ifndef SQ_ENGINE_H2DRV_H
#define SQ_ENGINE_H2DRV_H

#include "engine/driver.h"

#endif
