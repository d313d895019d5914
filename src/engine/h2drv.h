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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/driver.h"

/* A response's head and body pieces, as the multiplexed drivers (h2drv.c, h3drv.c) handle them
 * alike once their library has parsed them. */
struct sq_engine__conn;
/* The final head is in (now: the loop's time, the first byte's if none yet): the exchange
 * capture's head line ("HTTP/2 200"), the flow's fields done, what the body goes through (an
 * SSE scanner, a decoder for coding). false: no decoder could be made, the request failed. */
bool sq_engine__mux_head(struct sq_engine__conn *c, int64_t now, int status, bool want_fields,
                         bool event_stream, uint8_t coding, const char *proto);
/* One field of the final head, for the flow (a redirect's location, extractors and checks). */
void sq_engine__mux_field(struct sq_engine__conn *c, int status, const char *name, size_t name_len,
                          const char *value, size_t value_len);
/* A piece of the decoded body: the SSE scanner, the flow's capture. 0. */
int sq_engine__mux_deliver(struct sq_engine__conn *c, const char *data, size_t len);
/* The decoder's callback (ud: the VU): -ETIMEDOUT past the run's end (h1drv.c's rule). */
int sq_engine__mux_on_decoded(void *ud, const char *data, size_t len);
/* A body that cannot be decoded: the request fails (decode), the VU goes on. */
void sq_engine__mux_body_failed(struct sq_engine__conn *c);

#endif
