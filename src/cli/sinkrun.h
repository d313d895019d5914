/* cli/sinkrun.h - a sink beside a load run (`squall URL --sink ...`, a plan's `sink:`): started
 * before the load, told afterwards what the load stamped, given its settle time, and written
 * into the same result document (its `sink` block, whose line the summary prints first). */
#ifndef SQ_CLI_SINKRUN_H
#define SQ_CLI_SINKRUN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/run.h"
#include "plan/plan.h"

struct sq_sink;

/* What the faces say about the sink: URLs (http://HOST:PORT to listen on, nats://.../SUBJECT or
 * mqtt://.../TOPIC to subscribe to), where the stamp is, the settle time, and for a bus source
 * its options. */
struct sq_cli_sink_opts {
    const char *urls[3];
    size_t nurls;
    const char *stamp; /* NULL: scan */
    int64_t settle_ns; /* 0: the sink's default */
    int http_threads;  /* 0: 1 */
    const char *nats_stream, *nats_durable, *nats_queue;
    int mqtt_qos, mqtt_version;
};

/* A plan's sink: section as the options above (http_buf holds "http://HOST:PORT"). */
void sq_cli_sink_plan_opts(const struct sq_plan *p, struct sq_cli_sink_opts *o, char *http_buf,
                           size_t len);

/* Checks a plan's sink: section as the sink will (the URLs, the stamp spec) without starting
 * anything. Returns 0, or SQ_EXIT_USAGE after printing "squall: FILE:LINE:COL: sink: why". */
int sq_cli_sink_plan_check(const struct sq_plan *p);

/* Starts the sink for the run whose id is run_id and waits (up to 5 s) for its subscriptions.
 * Returns 0 with *out set, or an exit status after printing why (face names the flag). */
int sq_cli_sink_begin(const char *face, const struct sq_cli_sink_opts *o, uint64_t run_id,
                      struct sq_sink **out);

/* After the load: tells the sink what was stamped, waits for what is still on its way (up to
 * its settle time after the last arrival, stopping early once everything arrived, or at *stop),
 * stops it and puts its block into doc. Frees the sink. */
void sq_cli_sink_end(struct sq_sink *s, const struct sq_result *res, json_t *doc,
                     volatile int *stop);

#endif
