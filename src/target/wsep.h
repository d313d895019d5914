/* target/wsep.h - the target's event endpoints (module-internal; docs/target.md): /ws, a
 * WebSocket echo (RFC 6455, frames over proto/ws.h on the server core's upgrade), and POST
 * /webhook, which takes stamped events and answers 202.
 *
 * /ws echoes each message whole, in one frame of the same opcode: a fragmented message is
 * reassembled first (a message that arrives whole in one read is echoed straight from the read
 * buffer). It answers a ping with a pong, a close with the same code (then closes), and refuses a
 * frame RFC 6455 forbids from a client (unmasked, reserved bits, a bad close code) with close
 * 1002 (a message over 1 MiB: 1009). Knobs in the query string, for tests:
 *   close=CODE  close with CODE after `after` messages (default 0: right after the 101)
 *   after=N     see close
 *   ping=1      send a ping before every echo (and between its fragments with frag)
 *   frag=N      echo in fragments of N bytes (continuation frames)
 * The counters live in the target's shards (SQ_TARGET_C_WS_*, SQ_TARGET_C_WEBHOOK_*).
 */
#ifndef SQ_TARGET_WSEP_H
#define SQ_TARGET_WSEP_H

#include <stdbool.h>
#include <stdint.h>

#include "server/server.h"
#include "target/target.h"

struct sq_target__ws; /* opaque: one frame context per worker */

SQ_MUST_CHECK int sq_target__ws_new(int threads, struct sq_target_counters *cnt,
                                    struct sq_target__ws **out);
/* Only after the server has stopped (its connections are closed). */
void sq_target__ws_free(struct sq_target__ws *x);

/* GET /ws: the upgrade (101, the connection then echoes), or 400 for a request that is no
 * WebSocket handshake (426 with the version the target speaks for another version). */
void sq_target__ws(struct sq_target__ws *x, const struct sq_server_req *req,
                   struct sq_server_resp *resp);

/* POST /webhook: 202, the event counted (stamped when its body carries a {{$stamp}} token);
 * another method: 405. */
void sq_target__webhook(struct sq_target__ws *x, const struct sq_server_req *req,
                        struct sq_server_resp *resp);

#endif
