/* cluster/wire.h - what the controller and the agents say to each other, as JSON: one second of
 * a run (counters and its latency histograms) and a whole result (every counter, histogram,
 * scenario and step), both lossless (docs/internals/cluster.md has the messages).
 *
 * Histograms travel in the V2 compressed encoding (stats/hist.h) as base64, the form the result
 * document already uses, so what the controller merges is bucket for bucket what the agent
 * recorded. Counters travel by name: a field one side does not know is skipped, one it misses is
 * zero. Decoding is strict about types and sizes (a message comes over the network) and never
 * trusts a count to size an allocation beyond the message's own length.
 */
#ifndef SQ_CLUSTER_WIRE_H
#define SQ_CLUSTER_WIRE_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"
#include "result/result.h"

struct sq_hist;

/* The cluster protocol. A controller and an agent work together only when both speak the same
 * number; it changes whenever a message changes meaning. */
/* 3: a plan step's own-metric samples travel with the result; an agent of 2 would drop them.
 * 4: the plan's metrics per second travel in each second and the result's series ("m"); an agent
 * of 3 would leave them out. */
#define SQ_CLUSTER_PROTO 4

/* A histogram as base64 of its compressed encoding (NULL when out of memory); and back: 0,
 * -SQ_EPARSE (not a string, not base64), -SQ_EDECODE (not a histogram), or -ENOMEM. A JSON null
 * decodes to no histogram (*out NULL). A decoded histogram must have squall's latency
 * configuration (stats/hist.h), or it could not merge losslessly: -SQ_EDECODE otherwise. */
json_t *sq_wire_hist(const struct sq_hist *h);
SQ_MUST_CHECK int sq_wire_hist_read(const json_t *j, struct sq_hist **out);

/* One second of a run as an object: every field of s by name, and "h" / "hu" its histograms
 * (hu may be NULL). */
json_t *sq_wire_second(const struct sq_second *s, const struct sq_hist *h,
                       const struct sq_hist *hu);
/* Reads one back into *s (zeroed first) and, when h is not NULL, its histograms (*h, *hu: NULL
 * when absent; the caller frees them). Returns 0 or a negative code with err set. */
SQ_MUST_CHECK int sq_wire_second_read(const json_t *j, struct sq_second *s, struct sq_hist **h,
                                      struct sq_hist **hu, char *err, size_t len);

/* A second's plan metrics ("m": s->m[0, s->nm) as [n, nonzero, sum, last, last_ns] each; none
 * without) read back: *out (the caller frees it) and *nm, NULL and 0 when the second has none.
 * At most SQ_PLAN_METRICS_MAX (plan/plan.h). Returns 0, -SQ_EPARSE or -ENOMEM. */
SQ_MUST_CHECK int sq_wire_msecond_read(const json_t *j, struct sq_msecond **out, uint32_t *nm);

/* A whole result (r's series included, without histograms: each second's figures only). */
json_t *sq_wire_result(const struct sq_result *r);

/* A decoded result and the strings it points to (scenario names, TLS names). */
struct sq_wire_res {
    struct sq_result r;
    char **strs;
    size_t nstrs;
};
/* Reads a result back. Returns 0, or -SQ_EPARSE / -SQ_EDECODE / -ENOMEM with err saying what was
 * wrong; out is to be disposed either way. */
SQ_MUST_CHECK int sq_wire_result_read(const json_t *j, struct sq_wire_res *out, char *err,
                                      size_t len);
void sq_wire_res_dispose(struct sq_wire_res *w);

/* For tests: how many 64-bit words of struct sq_counters the wire carries by name, each counted
 * once (all of them: sizeof(struct sq_counters) / 8). */
size_t sq_wire_counter_words(void);

#endif
