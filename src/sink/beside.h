/* sink/beside.h - a sink beside a load run in one process (the quick face's `--sink ...`, a
 * plan's `sink:` section under `squall run` and under `squall serve`): started before the load,
 * told afterwards what the load stamped, given its settle time, and turned into the result
 * document's `sink` block. Face-independent: the faces (cli/sinkrun.c, daemon/prep.c) say the
 * words and choose the exit codes or HTTP statuses. */
#ifndef SQ_SINK_BESIDE_H
#define SQ_SINK_BESIDE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct sq_plan;
struct sq_sink;
struct sq_sink_sent;
struct sq_egress;
struct sq_tls_client_opts;

/* What the faces say about the sink: URLs (http://HOST:PORT to listen on, nats://.../SUBJECT or
 * mqtt://.../TOPIC to subscribe to), where the stamp is, the settle time, and for a bus source
 * its options. */
struct sq_sink_beside_opts {
    const char *urls[3];
    size_t nurls;
    const char *stamp; /* NULL: scan */
    int64_t settle_ns; /* 0: the sink's default */
    int http_threads;  /* 0: 1 */
    const char *nats_stream, *nats_durable, *nats_queue;
    int mqtt_qos, mqtt_version;
    /* The run's egress policy (net/egress.h; borrowed): where the sink may listen and which
     * brokers it may reach. NULL: anywhere (the CLI). */
    const struct sq_egress *egress;
    /* A broker over TLS (tls://, mqtts://): the run's TLS flags (-k, --cacert, --cert; net/tls.h;
     * borrowed). NULL: the system's CAs. */
    const struct sq_tls_client_opts *tls;
};

/* A plan's sink: section as the options above (http_buf holds "http://HOST:PORT"; it must
 * outlive o). No section: o says no URL. */
void sq_sink_beside_plan_opts(const struct sq_plan *p, struct sq_sink_beside_opts *o,
                              char *http_buf, size_t len);

/* Checks a plan's sink: section as the sink will (the URLs, the stamp spec; with egress, where
 * it would listen and the brokers, resolved and checked against the run's policy) without
 * starting anything; file names the plan in the message (NULL: the plan's own file). Returns 0
 * (also for no section), -SQ_EPARSE, or with a policy -EACCES (its refusal) or -SQ_ERESOLVE,
 * with err "FILE:LINE:COL: sink: why". */
SQ_MUST_CHECK int sq_sink_beside_plan_check(const struct sq_plan *p, const char *file,
                                            const struct sq_egress *egress, char *err, size_t len);

/* Starts the sink for the run whose id is run_id and waits (up to 5 s, or until *stop) for its
 * bus subscriptions. Returns 0 with *out set (*subscribed false: the wait ran out, the load may
 * start anyway); -SQ_EUSAGE (the URLs: err says why, e.g. "'URL': one sink of each kind");
 * or another negative code (the sink could not listen or start: err says why). */
SQ_MUST_CHECK int sq_sink_beside_start(const struct sq_sink_beside_opts *o, uint64_t run_id,
                                       volatile int *stop, struct sq_sink **out, bool *subscribed,
                                       char *err, size_t len);

/* After the load: tells the sink what was stamped and what never finished (sq_sink_expect),
 * waits for what is still on its way (up to its settle time after the
 * last arrival, stopping early once everything arrived, or at *stop), stops and frees it.
 * Returns its `sink` block (NULL: out of memory, or s NULL). When a broker source was never
 * subscribed (unreachable, refused: sq_sink_unsubscribed), the sink counted nothing that
 * crossed it and the run fails: why (len > 0) says so, and the block's `error` too; otherwise
 * why is "". */
json_t *sq_sink_beside_end(struct sq_sink *s, const struct sq_sink_sent *sent, volatile int *stop,
                           char *why, size_t len);

#endif
