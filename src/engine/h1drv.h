/* engine/h1drv.h - the HTTP/1.1 driver of a worker, plain or TLS (internal to engine/).
 *
 * Every VU is one connection of its own: h1drv.c connects it (and shakes hands over https),
 * writes its requests, reads and frames its responses with the VU's sq_h1_reader, decodes
 * compressed bodies and counts SSE events on the way, and calls back into worker.c at each
 * request's end (engine/driver.h). The worker reaches it only through sq_engine__h1_driver.
 *
 * Errors, per request: a reset or an end of stream before the response ended is `closed`
 * (a response delimited by the close completes); a malformed response is `parse`, a corrupt or
 * oversized compressed body `decode`; a failed write `write`; a TLS alert or bad record `tls`.
 * Each closes the connection, and the VU connects again. Bytes that arrive while no request is
 * in flight, or behind a complete response (in the same read, or already waiting when it
 * ended), are `unsolicited`: they cost no request (the response before them stays completed),
 * and the connection is replaced.
 */
#ifndef SQ_ENGINE_H1DRV_H
#define SQ_ENGINE_H1DRV_H

#include "engine/driver.h"

struct sq_loop;
struct sq_io;

/* The HTTP/1.1 driver's event callback: wsdrv.c hands a connection back to it after an upgrade
 * that a plan's ws connect step did not get (the answer was another status). */
void sq_engine__h1_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev);
/* Frees the VUs' body decoders (created on a VU's first compressed response; h2drv.c decodes
 * bodies with the same ones). */
void sq_engine__h1_decoders_free(struct sq_engine__worker *w);
/* True once a VU decoding a large body must abandon it: the run is over (a decompression bomb
 * must not hold the worker past its end; the clock is read only past 64 KiB decoded). h2drv.c
 * keeps the same rule. */
bool sq_engine__h1_decode_over(struct sq_engine__conn *c);

#endif
