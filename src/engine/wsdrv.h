/* engine/wsdrv.h - the WebSocket driver of a worker, plain or TLS (internal to engine/).
 *
 * A run with cfg->ws (ws:// and wss:// URLs) gives every VU a connection of its own, opened with
 * squall's own HTTP/1.1 upgrade (proto/ws.h builds it and checks the 101; the VU's HTTP/1.1
 * reader parses it) over the transport HTTP/1.1 uses (engine/xport.h: TCP, TLS for wss://).
 * Each request is one message out; it completes with the next whole message the server sends
 * back after it. The executors, pacing, timeouts and accounting are worker.c's, unchanged.
 *
 * Errors: an upgrade that fails (a status other than 101, a 101 that fails RFC 6455's checks, no
 * answer within the connect timeout, a close before the answer) is `upgrade`, costs no request,
 * and the VU connects again after a backoff; the reason is counted in the ws block by status. A
 * message that breaks the protocol (a masked or malformed frame, a message over the size cap) is
 * `parse`; the server closing (a close frame, or the connection's end) while a message awaits
 * its reply is `closed`; a failed write `write`; a TLS alert `tls`; no reply within the timeout
 * `timeout`. Each closes the connection, and the VU connects again.
 */
#ifndef SQ_ENGINE_WSDRV_H
#define SQ_ENGINE_WSDRV_H

#include "engine/driver.h"

#endif
