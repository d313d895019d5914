/* engine/flowbus.h - a plan flow's publish and subscribe steps (internal to engine/).
 *
 * Each worker of a scenario whose flow has such steps keeps one connection per broker the flow
 * names (struct sq_flow_broker), on busio.c's machinery, opened with the VUs' pool before the
 * start and subscribed then to every subject (topic filter) a subscribe step waits on, so no
 * event can arrive before its subscription exists.
 *
 *   publish    the VU's message (payload and headers rendered, with its stamp) goes out on the
 *              worker's connection to the broker; the step ends when the broker has it: NATS
 *              at the PONG to the PING behind its batch, MQTT at the PUBACK / PUBCOMP (QoS 1 /
 *              2) or the PINGRESP behind its batch (QoS 0), as the load drivers define it.
 *   subscribe  the VU waits for the event carrying its latest stamp (the one its last stamped
 *              step made: a webhook POST, a publish) on the step's subject. Events are matched
 *              by the stamp's stream (this worker's) and sequence number; one that arrives
 *              before its VU waits for it is kept (a bounded table of early arrivals) and ends
 *              the wait at once. The step's duration is the event's end-to-end latency: its
 *              arrival (CLOCK_REALTIME) minus the stamp's send time.
 * Either step fails as `timeout` past its timeout (the worker's sweep), as `closed` when the
 * broker connection is not open, and is then handled by the step's on_error like a request.
 */
#ifndef SQ_ENGINE_FLOWBUS_H
#define SQ_ENGINE_FLOWBUS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct sq_engine__worker;
struct sq_engine__conn;
struct sq_engine__flowbus;

/* Sets up the worker's broker connections (none are opened yet); *out is NULL when the flow has
 * no bus step. Returns 0, -ENOMEM or -SQ_ERESOLVE (a broker host that does not resolve). */
SQ_MUST_CHECK int sq_engine__flowbus_new(struct sq_engine__worker *w,
                                         struct sq_engine__flowbus **out);
void sq_engine__flowbus_free(struct sq_engine__flowbus *fb);
/* Opens every connection (with the pool, before the start). */
void sq_engine__flowbus_connect(struct sq_engine__flowbus *fb);
/* True once every connection is subscribed or has failed once. */
bool sq_engine__flowbus_settled(const struct sq_engine__flowbus *fb);
/* Every 100 ms: connection timeouts, reconnects while the run sends, keep-alive. */
void sq_engine__flowbus_sweep(struct sq_engine__flowbus *fb, int64_t now);
/* Closes every connection without a callback (the end of the run). */
void sq_engine__flowbus_close_all(struct sq_engine__flowbus *fb);

/* The VU c starts its current step (publish or subscribe; c->fv says which). Returns 0 (the
 * step goes on: its end comes through sq_engine__flow_bus_done, maybe before this returns) or
 * an error kind (enum sq_errk) that failed it at once. */
int sq_engine__flowbus_begin(struct sq_engine__flowbus *fb, struct sq_engine__conn *c);
/* The VU gives its step up (timeout, closed): whatever ends it later matches nothing. */
void sq_engine__flowbus_cancel(struct sq_engine__flowbus *fb, struct sq_engine__conn *c);

/* worker.c: the VU's publish or subscribe step ended: kind < 0 completed, after dur_us;
 * else it failed with that error kind. */
void sq_engine__flow_bus_done(struct sq_engine__conn *c, int kind, int64_t dur_us);

#endif
