/* sink/subs.h - the subscriber side as a load of its own: N subscriber connections to the load's
 * subject or topic, in the same run as the publishers (the quick face's `--subscribers N`).
 *
 * Where the sink (sink/sink.h) is one consumer that keeps a ledger of stamps (delivered, lost,
 * duplicated), the subscribers are many consumers that each count: messages, bytes, msgs/s, lag
 * behind the publishers at the end, and (over all of them) the end-to-end latency from the
 * publisher's {{$stamp}} send time. Each subscriber is its own connection (subscribe.c's, with
 * its reconnects and TLS); the connections are spread over `threads` threads, each with its
 * own loop and its own latency histogram. A queue group (NATS `SUB subject queue`) or an MQTT
 * shared subscription ($share/GROUP/topic) makes them share the messages instead of each
 * getting every one.
 */
#ifndef SQ_SINK_SUBS_H
#define SQ_SINK_SUBS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct sq_egress;
struct sq_tls_client_opts;
struct sq_subs;

#define SQ_SUBS_MAX 100000

struct sq_subs_opts {
    const char *url;   /* nats://.../SUBJECT, tls://..., mqtt://.../TOPIC or mqtts://... */
    uint32_t n;        /* subscribers, 1..SQ_SUBS_MAX */
    uint32_t threads;  /* 0: 1; more than n: n */
    const char *group; /* NATS queue group / MQTT shared subscription group; NULL: fan-out */
    /* NATS: JetStream pull consumers on this stream instead of core subscriptions (NULL: none):
     * each subscriber its own ephemeral consumer (fan-out), or with group one durable consumer
     * of that name they all fetch from; fetches of batch messages (0: 100), each one acked */
    const char *stream;
    uint32_t batch;
    bool push;        /* with stream: push consumers (a deliver group with group) instead of pull */
    int mqtt_qos;     /* the subscription's QoS; -1: 1 */
    int mqtt_version; /* 0 or 3: 3.1.1; 5 */
    const struct sq_egress *egress;       /* borrowed; NULL: anywhere */
    const struct sq_tls_client_opts *tls; /* borrowed; NULL: the system's CAs */
};

/* Checks o as sq_subs_start will (the count, the URL, the group's name, a stream on NATS)
 * without resolving or connecting. Returns 0 or -SQ_EUSAGE (err names what is wrong, by the
 * quick face's flags: "--queue: ..."). */
SQ_MUST_CHECK int sq_subs_check(const struct sq_subs_opts *o, char *err, size_t len);

/* Checks o, resolves the broker and starts the threads (the connections are made at once and
 * retried after a backoff while the broker is not there). Returns 0 with *out set, -SQ_EUSAGE
 * (err names what is wrong), -EACCES (the egress policy), -SQ_ERESOLVE or -ENOMEM. */
SQ_MUST_CHECK int sq_subs_start(const struct sq_subs_opts *o, struct sq_subs **out, char *err,
                                size_t len);

/* Waits until every subscriber is subscribed, at most timeout_ns (or until *stop). Returns how
 * many are. */
uint32_t sq_subs_wait(struct sq_subs *s, int64_t timeout_ns, volatile int *stop);

/* The load starts now: the subscribers' rates are measured from here. */
void sq_subs_go(struct sq_subs *s);

/* The load has ended. published: what the publishers published (UINT64_MAX: not known, e.g.
 * an external publisher). Waits until every subscriber has it (fan-out) or the group's sum
 * does, or until no message has arrived for quiet_ns (at once when published is not known),
 * or *stop; then stops the threads. Call once. */
void sq_subs_finish(struct sq_subs *s, uint64_t published, int64_t quiet_ns, volatile int *stop);

/* The result's `subscribers` block (docs/json-schema.md), after sq_subs_finish. NULL: out of
 * memory. */
json_t *sq_subs_json(const struct sq_subs *s);

/* Stops the threads when still running, closes every connection. NULL is a no-op. */
void sq_subs_free(struct sq_subs *s);

#endif
