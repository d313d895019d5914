/* sink/internal.h - what sink.c (the ledger, HTTP, the thread) and subscribe.c (the NATS and MQTT
 * subscriptions) share. Internal to sink/. */
#ifndef SQ_SINK_INTERNAL_H
#define SQ_SINK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sink/sink.h"

struct sq_loop;
struct sq_sink__bus;
struct sq_hist;

/* One event from a source: its stamps are found (the sink's finder) and recorded in shard
 * `shard` (the caller's thread's own). */
void sq_sink__event(struct sq_sink *s, int shard, const char *body, size_t len,
                    const struct sq_sink_field *fields, size_t nfields);
/* The shard of the sink's own thread (the bus sources). */
int sq_sink__bus_shard(const struct sq_sink *s);
/* The finder's scratch of the sink's own thread. */
struct sq_sink_scratch *sq_sink__bus_scratch(struct sq_sink *s);

enum sq_sink__bus_kind { SQ_SINK_NATS, SQ_SINK_MQTT };

/* A subscription to a broker on the sink's loop: it connects, subscribes, hands every message
 * to sq_sink__event and reconnects (counted) when the broker goes away. */
SQ_MUST_CHECK int sq_sink__bus_new(struct sq_sink *s, struct sq_loop *loop,
                                   enum sq_sink__bus_kind kind, const struct sq_sink_config *cfg,
                                   struct sq_sink__bus **out, char *err, size_t len);
/* Every 100 ms on the sink's thread: connect timeouts, retries, keep-alive. */
void sq_sink__bus_sweep(struct sq_sink__bus *b, int64_t now);
/* Counts for the result: messages, reconnects, and whether it is subscribed now. */
void sq_sink__bus_counts(const struct sq_sink__bus *b, uint64_t *messages, uint64_t *reconnects,
                         bool *subscribed);
/* After the sink's thread stopped: true when the source was never subscribed, why naming it
 * and its first error. */
bool sq_sink__bus_never(const struct sq_sink__bus *b, char *why, size_t len);
/* What the source is, for the result ("nats", the URL without credentials, the subject). */
json_t *sq_sink__bus_json(const struct sq_sink__bus *b);
void sq_sink__bus_free(struct sq_sink__bus *b);

/* A subscription whose messages go to cb (on the loop's thread) instead of sq_sink__event:
 * sink/subs.c's subscribers, made with s NULL. Set before the first sweep. */
typedef void (*sq_sink__msg_cb)(void *ud, const char *payload, size_t len);
void sq_sink__bus_on_message(struct sq_sink__bus *b, sq_sink__msg_cb cb, void *ud);
/* A JetStream consumer's counts: acks sent, fetches (pull), messages delivered more than once. */
void sq_sink__bus_js_counts(const struct sq_sink__bus *b, uint64_t *acks, uint64_t *fetches,
                            uint64_t *redelivered);

/* The sink's latency block ({"measured_from": "stamp_send_time", "count", "min_us", ...,
 * "histogram"}) for lat, a latency histogram (stats/hist.h); NULL when out of memory. */
json_t *sq_sink__latency_json(const struct sq_hist *lat);

#endif
