/* face/probe.h - "is the server up?": one connection, one GET, blocking with a deadline, for
 * `squall measure --ready URL` (a cold start ends at the first 2xx) and `squall ab --server-X`
 * (an arm starts once its server accepts connections). Not a load path: each call opens and
 * closes its own socket and waits with poll().
 */
#ifndef SQ_FACE_PROBE_H
#define SQ_FACE_PROBE_H

#include <stdint.h>

#include "base/err.h"
#include "net/sock.h"

/* Connects to a. Returns 0 once a TCP connection is made (and closes it), -ECONNREFUSED when
 * nothing listens, -ETIMEDOUT when the connect does not finish within timeout_ns, or another
 * -errno. */
SQ_MUST_CHECK int sq_probe_connect(const struct sq_addr *a, int64_t timeout_ns);

/* Sends "GET path HTTP/1.1" with Host: authority and Connection: close on a fresh connection to
 * a and reads the response head. Returns 0 with *status (100..999); -ECONNREFUSED; -ETIMEDOUT
 * (no connection or no complete head within timeout_ns); -ECONNRESET (closed before a head);
 * -SQ_EPARSE (not an HTTP/1.x response); or another -errno. */
SQ_MUST_CHECK int sq_probe_get(const struct sq_addr *a, const char *authority, const char *path,
                               int64_t timeout_ns, int *status);

#endif
