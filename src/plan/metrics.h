/* plan/metrics.h - the k6 metrics squall reports: one table of names, kinds and scopes.
 *
 * The plan loader checks a threshold's metric against it (plan/threshold.c), the evaluator
 * computes a threshold from the kind and scope it gives (result/verdict.c) and the result
 * document writes the metrics under these names (output/plan_json.c). A metric is added here,
 * once; a switch over enum sq_metric without a default makes the compiler point at every place
 * that must learn about it.
 *
 * Units follow k6: trends in milliseconds, rates as fractions in [0, 1], counters as counts
 * (their rate: per second of the run), gauges as values.
 */
#ifndef SQ_PLAN_METRICS_H
#define SQ_PLAN_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "plan/threshold.h"

/* What a metric is, which decides the aggregations a threshold may take of it. */
enum sq_metric_kind {
    SQ_MK_COUNTER, /* count, rate */
    SQ_MK_RATE,    /* rate (the passed fraction) */
    SQ_MK_GAUGE,   /* value */
    SQ_MK_TREND,   /* avg, min, max, med, p(N) */
};

/* Where the engine keeps a metric, which decides the tags it may be selected by. */
enum sq_metric_scope {
    SQ_MS_STEP,     /* per step and status: the tags scenario, step, method, status */
    SQ_MS_SCENARIO, /* per scenario: the tag scenario only */
    SQ_MS_RUN,      /* the request phases, kept for the whole run: no tag */
    SQ_MS_GROUP,    /* per scenario and group: the tags scenario and group */
};

/* X(id, name, kind, scope), in the order messages list them. The request phases are a list of
 * their own so that a switch can name them all at once: SQ_METRIC_PHASES(SQ_METRIC_CASE). */
#define SQ_METRIC_PHASES(X)                                                                        \
    X(HTTP_REQ_BLOCKED, "http_req_blocked", TREND, RUN)                                            \
    X(HTTP_REQ_CONNECTING, "http_req_connecting", TREND, RUN)                                      \
    X(HTTP_REQ_TLS_HANDSHAKING, "http_req_tls_handshaking", TREND, RUN)                            \
    X(HTTP_REQ_SENDING, "http_req_sending", TREND, RUN)                                            \
    X(HTTP_REQ_WAITING, "http_req_waiting", TREND, RUN)                                            \
    X(HTTP_REQ_RECEIVING, "http_req_receiving", TREND, RUN)                                        \
    X(HTTP_REQ_DNS, "http_req_dns", TREND, RUN)

#define SQ_METRIC_LIST(X)                                                                          \
    X(HTTP_REQS, "http_reqs", COUNTER, STEP)                                                       \
    X(HTTP_REQ_DURATION, "http_req_duration", TREND, STEP)                                         \
    X(HTTP_REQ_FAILED, "http_req_failed", RATE, STEP)                                              \
    SQ_METRIC_PHASES(X)                                                                            \
    X(ITERATIONS, "iterations", COUNTER, SCENARIO)                                                 \
    X(ITERATION_DURATION, "iteration_duration", TREND, SCENARIO)                                   \
    X(DROPPED_ITERATIONS, "dropped_iterations", COUNTER, SCENARIO)                                 \
    X(CHECKS, "checks", RATE, STEP)                                                                \
    X(DATA_SENT, "data_sent", COUNTER, SCENARIO)                                                   \
    X(DATA_RECEIVED, "data_received", COUNTER, SCENARIO)                                           \
    X(VUS, "vus", GAUGE, SCENARIO)                                                                 \
    X(VUS_MAX, "vus_max", GAUGE, SCENARIO)                                                         \
    X(GROUP_DURATION, "group_duration", TREND, GROUP)                                              \
    X(BATCH_DURATION, "batch_duration", TREND, STEP)

/* A case label per metric of a list: `switch (m) { SQ_METRIC_PHASES(SQ_METRIC_CASE) ... }`. */
#define SQ_METRIC_CASE(id, name, kind, scope) case SQ_METRIC_##id:

enum sq_metric {
#define SQ_METRIC_ENUM(id, name, kind, scope) SQ_METRIC_##id,
    SQ_METRIC_LIST(SQ_METRIC_ENUM)
#undef SQ_METRIC_ENUM
        SQ_METRIC__COUNT
};

const char *sq_metric_name(enum sq_metric m); /* "http_reqs"; "?" out of range */
enum sq_metric_kind sq_metric_kind(enum sq_metric m);
enum sq_metric_scope sq_metric_scope(enum sq_metric m);
/* The metric named name[0, len), or -1. */
int sq_metric_find(const char *name, size_t len);

/* True when a threshold may take aggregation a of a metric of kind k (count of a counter, p(95)
 * of a trend...). */
bool sq_metric_agg_fits(enum sq_metric_kind k, enum sq_th_agg a);
/* What k takes, for messages: "a counter: count or rate". */
const char *sq_metric_kind_aggs(enum sq_metric_kind k);

#endif
