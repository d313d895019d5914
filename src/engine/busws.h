/* engine/busws.h - MQTT over WebSocket under a broker connection (engine/busio.c; internal to
 * engine/): mqtt+ws:// and mqtt+wss:// (busconf.h: ws_path).
 *
 * The protocol above (mqttdrv.c, flowbus.c) never sees WebSocket: it queues MQTT bytes in the
 * connection's output buffer and is handed MQTT packets, as over TCP. This layer sits between
 * that and the socket:
 *
 *  - the greeting: once TCP (and TLS) is up, an HTTP/1.1 upgrade (proto/ws.c's request, with
 *    Sec-WebSocket-Protocol: mqtt) goes out before the protocol's hello; the answer is read with
 *    http/h1.c's reader and checked by proto/ws.c (101, Upgrade, Connection, the accept key, the
 *    subprotocol when the broker names one); only then does the protocol's hello (CONNECT) run.
 *    A refusal is noted (bus_error) and counted as a `server_error`, and the connection backs off
 *    and retries as after a CONNACK refusal;
 *  - writes: at each flush, whatever MQTT bytes are queued go out as masked binary frames (one
 *    per 64 KiB), whole packets or not: RFC 6455 frames carry a byte stream here (MQTT 5.0
 *    section 6: a frame may hold several packets, or part of one);
 *  - reads: frames are taken apart by proto/ws.c (sq_ws_feed, which holds a frame's header cut
 *    by a read); the payload of binary messages is fed, chunk by chunk, to the same spill and
 *    MQTT parser as a TCP read, so a packet that spans frames (or reads) is reassembled there and
 *    a frame with several packets yields each. A PING is answered with a PONG, a CLOSE ends the
 *    connection (`closed`), a text frame or a frame proto/ws.c refuses is a `parse` error.
 */
#ifndef SQ_ENGINE_BUSWS_H
#define SQ_ENGINE_BUSWS_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/spill.h"
#include "proto/ws.h"

struct sq_engine__busconn;
struct sq_engine__worker;

/* The WebSocket state of one connection (allocated with it when the run is mqtt+ws). */
struct sq_engine__busws;

/* Sets b up for MQTT over WebSocket when the run's bus asks for it. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_engine__busws_attach(struct sq_engine__busconn *b, const char *path,
                                          const char *host);
void sq_engine__busws_free(struct sq_engine__busconn *b);
/* The connection is gone: back to "upgrade needed"; framed bytes not yet written are dropped. */
void sq_engine__busws_reset(struct sq_engine__busconn *b);
/* TCP (and TLS) is up: queue the upgrade request. Returns 0 or a negative code. */
int sq_engine__busws_upgrade(struct sq_engine__busconn *b);
/* Bytes read from the socket. */
void sq_engine__busws_feed(struct sq_engine__busconn *b, const char *p, size_t n);
/* Moves the MQTT bytes queued in b->out into frames. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_engine__busws_wrap(struct sq_engine__busconn *b);
/* The wire buffer (framed bytes) and its written offset. */
struct sq_buf *sq_engine__busws_wire(struct sq_engine__busconn *b, size_t **off);
/* The worker's frame context (made on first use); frees it at the worker's end. */
struct sq_ws_ctx *sq_engine__busws_ctx(struct sq_engine__worker *w);
void sq_engine__busws_ctx_free(struct sq_engine__worker *w);

/* The read side alone, for tests and fuzz/fuzz_mqttws.c: feeds the bytes of a server's frames
 * to c and the payload of binary messages to sp, cut into units by unit (an MQTT packet parser,
 * as busio.c's). ctl, when not NULL, sees each PING's payload (to answer it). Returns 0, 1 when a
 * CLOSE came (the connection is done), or a negative code: -SQ_EPARSE (a text message, a frame
 * proto/ws.c refuses), what unit or the spill returned. */
typedef int (*sq_engine__busws_ping_fn)(void *ud, const uint8_t *p, size_t n);
int sq_engine__busws_frames(struct sq_ws_ctx *ctx, struct sq_ws_conn *c, struct sq_spill *sp,
                            size_t max_unit, const char *p, size_t n, sq_spill_unit_fn unit,
                            sq_engine__busws_ping_fn ping, void *ud);

#endif
