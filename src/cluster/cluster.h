/* cluster/cluster.h - one test on many machines: agents that wait for work, and a controller that
 * finds them over NATS, gives each its execution segment of the run, starts them together,
 * merges what they stream without loss and notices the ones it loses (docs/distributed.md,
 * docs/internals/cluster.md).
 *
 * Neither half knows how a run is described: the controller sends the face's job (an opaque JSON
 * text) and the agent hands it back to its face (prepare) to get a run configuration. The agent
 * adds its segment, the held start and its interval stream to that configuration and runs it with
 * sq_run(). Nothing here prints: events come out as lines through a callback.
 */
#ifndef SQ_CLUSTER_CLUSTER_H
#define SQ_CLUSTER_CLUSTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "engine/run.h"
#include "net/tls.h"
#include "plan/exec.h"

#define SQ_CLUSTER_PREFIX "squall" /* the subjects' first token unless configured */

/* Heartbeats: every agent and the controller send one every SQ_CLUSTER_HB_NS; an agent silent
 * for SQ_CLUSTER_LOSS_NS is lost (so a loss is seen at most LOSS + HB + one check after the
 * agent's last word, 2.6 s); an agent whose controller is silent for SQ_CLUSTER_ORPHAN_NS stops
 * its run. */
#define SQ_CLUSTER_HB_NS     (500LL * 1000 * 1000)
#define SQ_CLUSTER_LOSS_NS   (2000LL * 1000 * 1000)
#define SQ_CLUSTER_ORPHAN_NS (5000LL * 1000 * 1000)

/* A NATS outage a run rides out by default (--nats-outage): the controller and the agents
 * redial, the agents keep their seconds and their result and send them once it is back. Longer,
 * the controller ends the run with what arrived, marked incomplete. */
#define SQ_CLUSTER_OUTAGE_NS (10000LL * 1000 * 1000)

/* ---- clock offset (NTP's on-wire estimate) ----
 * The agent sends at t0 (its clock), the controller answers with its clock tc, the answer
 * arrives at t3 (the agent's clock). Whatever the delays, tc happened between t0 and t3, so the
 * offset (agent - controller) lies in [t0 - tc, t3 - tc]: the sample with the shortest round trip
 * gives the narrowest interval, and its middle is the estimate, good to half that round trip. */
struct sq_clock_sample {
    int64_t t0, tc, t3;
};
struct sq_clock_est {
    int64_t offset_ns;      /* agent clock - controller clock */
    int64_t uncertainty_ns; /* the true offset is within offset +- this (half the round trip) */
    int64_t rtt_ns;         /* the shortest round trip */
    uint32_t samples;
};
/* Returns 0, or -EINVAL when no sample is usable (t3 < t0). */
SQ_MUST_CHECK int sq_clock_estimate(const struct sq_clock_sample *s, size_t n,
                                    struct sq_clock_est *out);

/* ---- the agent (`squall agent`) ---- */

struct sq_agent_config {
    const char *nats_url; /* nats://, or tls:// with nats_tls and nats_tls_first */
    /* NATS over TLS (a tls:// URL): the CAs, -k, a client certificate (host and alpn are the
     * connection's own); zero: the system's CAs. nats_tls_first: the handshake before INFO. */
    struct sq_tls_client_opts nats_tls;
    bool nats_tls_first;
    const char *prefix;   /* NULL: SQ_CLUSTER_PREFIX */
    const char *name;     /* shown in results; NULL: host-pid */
    const json_t *labels; /* an object of strings (--labels), borrowed; NULL: none */
    bool once;            /* serve one run, then return (a Kubernetes Job's pod) */
    /* The face's half. prepare turns the controller's job (JSON text) into a run configuration
     * it owns (*handle), or fails with a message; seg is the agent's segment (it may size limits
     * by it; the agent sets cfg->seg itself). release frees it after the run. */
    int (*prepare)(void *ud, const char *job, size_t len, const struct sq_seg *seg,
                   struct sq_run_config **cfg, void **handle, char *err, size_t errlen);
    void (*release)(void *ud, void *handle);
    void (*log)(void *ud, const char *line); /* one line per event; may be NULL */
    void *ud;
    volatile int *quit; /* set (SIGTERM, SIGINT) to stop the run in progress and return */
    /* For tests only: this agent's clock reads skew_ns off (so the start must be aligned by the
     * offset estimate), and it speaks cluster protocol `proto` (0: SQ_CLUSTER_PROTO). */
    int64_t clock_skew_ns;
    int proto;
};

/* Serves until quit is set (or after one run with once). Reconnects to NATS when the connection
 * is lost; a run in progress goes on, its seconds and its result kept until they can be sent (up
 * to the run's outage window: past it the run is stopped and its result dropped). Returns 0, or
 * a negative code with err saying why when it cannot even start: -SQ_EUSAGE (a URL or a TLS
 * option it cannot use), -SQ_ETLS (the first connection's TLS failed: a certificate that does
 * not verify, TLS one side requires and the other does not offer). */
SQ_MUST_CHECK int sq_agent_serve(const struct sq_agent_config *cfg, char *err, size_t len);

/* ---- the controller (`squall run ... --agents N --nats URL`) ---- */

struct sq_cluster_config {
    const char *nats_url;
    struct sq_tls_client_opts nats_tls; /* as the agent's */
    bool nats_tls_first;
    const char *prefix; /* NULL: SQ_CLUSTER_PREFIX */
    uint32_t agents;
    int64_t wait_ns;               /* how long to look for idle agents (default 10 s) */
    int64_t outage_ns;             /* the NATS outage it rides out (0: SQ_CLUSTER_OUTAGE_NS) */
    int64_t setup_timeout_ns;      /* assignment to every agent ready (default 60 s) */
    const struct sq_rat *sequence; /* NULL: the even split; else agents + 1 points */
    const char *job;               /* the face's job, JSON text (sent as it is) */
    bool open;                     /* an arrival-rate run: the live seconds carry hu */
    int64_t length_ns;             /* the run's planned length with its graceful stops */
    volatile int *stop;            /* set (Ctrl-C, abortOnFail): every agent stops gracefully */
    sq_tick_cb on_tick;            /* the merged seconds, as a local run's */
    void *tick_ud;
    void (*on_event)(void *ud, const char *line); /* "agent b lost at 12.4 s" ...; may be NULL */
    void *event_ud;
};

/* What the controller knows of one agent. */
struct sq_cluster_agent {
    char id[40], name[128], host[128], version[32];
    json_t *labels;         /* owned; an object */
    struct sq_rat from, to; /* its segment */
    struct sq_clock_est clock;
    int64_t setup_ns;      /* opening its pools */
    int64_t start_late_ns; /* how late it started against the common start (its own clock) */
    bool finished;         /* its final result came */
    bool lost; /* no heartbeat for SQ_CLUSTER_LOSS_NS; its data up to then is its own, apart */
    double lost_at_s;     /* its last word, seconds after the common start */
    uint32_t seconds;     /* interval messages received (each second once) */
    uint32_t series;      /* seconds in its final result's series (what it sent, when finished) */
    char error[320];      /* it could not run its share ("" if it could) */
    struct sq_result res; /* its own figures: the final result, or its seconds when lost */
    /* internal */
    struct sq_cluster__agent *_in;
};

struct sq_cluster_report {
    char run[40];
    uint32_t n;
    struct sq_cluster_agent *agents; /* n, in segment order */
    uint32_t lost;                   /* agents lost during the run */
    double start_spread_ms;          /* the largest minus the smallest start error (estimated) */
    /* "" when the result covers the whole run; else why not (an agent lost, NATS away past the
     * outage window, an agent whose run failed): what arrived is in the result all the same */
    char incomplete[1024];
    bool nats_gave_up; /* NATS stayed away past the outage window (exit 1, whatever else) */
    /* No agent's final result came (NATS away past the window, every agent lost): the totals are
     * then every lost agent's last known figures, all from their seconds alike (what arrived),
     * rather than nothing; else they are the finished agents' results alone. */
    bool totals_last_known;
    uint32_t nats_outages; /* times the connection to NATS was lost and came back */
    double nats_down_s;    /* how long it was away, in all */
    /* the control plane's cost: bytes and messages through the controller's connection, its CPU
     * time (user + system) from the start to the end of the run */
    uint64_t bytes_in, bytes_out, msgs_in, msgs_out;
    double cpu_s, run_s;
};

/* Runs the job on cfg->agents agents. out is the merged result (sq_result_dispose it; its
 * strings are borrowed from rep, so dispose out first); rep says how each agent did
 * (sq_cluster_report_dispose). Returns 0 when the run took place (agents may have been lost:
 * rep->lost), or a negative code with err saying why it could not (no NATS, too few agents, an
 * agent that refused the job, a run that could not start). */
SQ_MUST_CHECK int sq_cluster_run(const struct sq_cluster_config *cfg, struct sq_result *out,
                                 struct sq_cluster_report *rep, char *err, size_t len);
void sq_cluster_report_dispose(struct sq_cluster_report *rep);

/* The result document's "cluster" block (docs/json-schema.md). NULL when out of memory. */
json_t *sq_cluster_report_json(const struct sq_cluster_report *rep);

#endif
