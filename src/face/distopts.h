/* face/distopts.h - the flags of a distributed run, shared by the load faces (`squall URL` and
 * `squall run PLAN`): --agents N and --nats URL (run on N agents found over NATS instead of
 * here), --agent-wait, --tolerate-agent-loss, --subject-prefix, --segments and --nats-outage.
 * One option table, one help text and one parser, like face/netopts.h. The run itself is
 * cluster/'s (cluster/cluster.h); the CLI only refuses these from JSON (a daemon run is not
 * distributed).
 */
#ifndef SQ_FACE_DISTOPTS_H
#define SQ_FACE_DISTOPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct sq_distopts {
    uint64_t agents;        /* --agents N; 0: a local run */
    const char *nats;       /* --nats URL */
    int64_t agent_wait_ns;  /* --agent-wait D: how long to look for idle agents (default 10 s) */
    bool tolerate_loss;     /* --tolerate-agent-loss: exit 0 when an agent is lost */
    const char *prefix;     /* --subject-prefix P: the subjects' first tokens (default "squall") */
    const char *segments;   /* --segments SEQ: "0,1/2,3/4,1" (default: the even split) */
    int64_t nats_outage_ns; /* --nats-outage D: the NATS outage a run rides out (default 10 s) */
    /* --control [HOST:]PORT: the run's control endpoint (a local run's; HOST a loopback
     * address, 127.0.0.1 when left out; PORT 0: any free one), docs/quick.md; NULL: none */
    const char *control;
    char control_host[48];
    uint16_t control_port;
};

/* getopt_long ids; above netopts' (1000...) and any face's own. */
enum {
    SQ_DISTOPT_AGENTS = 1100,
    SQ_DISTOPT_NATS,
    SQ_DISTOPT_AGENT_WAIT,
    SQ_DISTOPT_TOLERATE,
    SQ_DISTOPT_PREFIX,
    SQ_DISTOPT_SEGMENTS,
    SQ_DISTOPT_NATS_OUTAGE,
    SQ_DISTOPT_CONTROL,
};

/* The entries to put in a face's struct option table. */
#define SQ_DISTOPTS_LONG_OPTIONS                                                                   \
    {"agents", required_argument, NULL, SQ_DISTOPT_AGENTS},                                        \
        {"nats", required_argument, NULL, SQ_DISTOPT_NATS},                                        \
        {"agent-wait", required_argument, NULL, SQ_DISTOPT_AGENT_WAIT},                            \
        {"tolerate-agent-loss", no_argument, NULL, SQ_DISTOPT_TOLERATE},                           \
        {"subject-prefix", required_argument, NULL, SQ_DISTOPT_PREFIX},                            \
        {"segments", required_argument, NULL, SQ_DISTOPT_SEGMENTS},                                \
        {"control", required_argument, NULL, SQ_DISTOPT_CONTROL},                                  \
    {                                                                                              \
        "nats-outage", required_argument, NULL, SQ_DISTOPT_NATS_OUTAGE                             \
    }

/* The lines of --help for those flags. */
extern const char sq_distopts_usage[];

/* Takes one parsed option: 1 when it was one of these flags (stored), 0 when it is not, or
 * -SQ_EUSAGE with err saying "FLAG: why". arg is borrowed and must outlive d. */
SQ_MUST_CHECK int sq_distopts_flag(struct sq_distopts *d, int opt, const char *flag,
                                   const char *arg, char *err, size_t len);

/* Checks them together: --agents and --nats go together, the others need them, --segments has
 * as many parts as --agents. Returns 0 or -SQ_EUSAGE. */
SQ_MUST_CHECK int sq_distopts_check(const struct sq_distopts *d, char *err, size_t len);

/* A subject prefix NATS can carry: tokens of [A-Za-z0-9_-] joined by dots. */
bool sq_distopts_prefix_ok(const char *p);

#endif
