/* face/distopts.h - the flags of a distributed run, shared by the load faces (`squall URL` and
 * `squall run PLAN`): --agents N and --nats URL (run on N agents found over NATS instead of
 * here), --agent-wait, --tolerate-agent-loss, --subject-prefix, --segments, --nats-outage, and
 * NATS over TLS (--nats-cacert, --nats-cert/--nats-key, --nats-insecure, --nats-tls-first; the
 * agent takes the same, and spells them --cacert, --cert/--key, -k and --tls-first too).
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
#include "net/tls.h"

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
    /* NATS over TLS (a tls:// --nats URL): the CAs to trust (NULL: the system's), a client
     * certificate and its key, verify nothing, the handshake before the server's INFO */
    const char *nats_cacert, *nats_cert, *nats_key;
    bool nats_insecure, nats_tls_first;
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
    SQ_DISTOPT_NATS_CACERT,
    SQ_DISTOPT_NATS_CERT,
    SQ_DISTOPT_NATS_KEY,
    SQ_DISTOPT_NATS_INSECURE,
    SQ_DISTOPT_NATS_TLS_FIRST,
};

/* The NATS TLS flags' entries (in SQ_DISTOPTS_LONG_OPTIONS; the agent's table has them too). */
#define SQ_DISTOPTS_TLS_LONG_OPTIONS                                                               \
    {"nats-cacert", required_argument, NULL, SQ_DISTOPT_NATS_CACERT},                              \
        {"nats-cert", required_argument, NULL, SQ_DISTOPT_NATS_CERT},                              \
        {"nats-key", required_argument, NULL, SQ_DISTOPT_NATS_KEY},                                \
        {"nats-insecure", no_argument, NULL, SQ_DISTOPT_NATS_INSECURE},                            \
    {                                                                                              \
        "nats-tls-first", no_argument, NULL, SQ_DISTOPT_NATS_TLS_FIRST                             \
    }

/* The entries to put in a face's struct option table. */
#define SQ_DISTOPTS_LONG_OPTIONS                                                                   \
    {"agents", required_argument, NULL, SQ_DISTOPT_AGENTS},                                        \
        {"nats", required_argument, NULL, SQ_DISTOPT_NATS},                                        \
        {"agent-wait", required_argument, NULL, SQ_DISTOPT_AGENT_WAIT},                            \
        {"tolerate-agent-loss", no_argument, NULL, SQ_DISTOPT_TOLERATE},                           \
        {"subject-prefix", required_argument, NULL, SQ_DISTOPT_PREFIX},                            \
        {"segments", required_argument, NULL, SQ_DISTOPT_SEGMENTS},                                \
        {"control", required_argument, NULL, SQ_DISTOPT_CONTROL}, SQ_DISTOPTS_TLS_LONG_OPTIONS,    \
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

/* The NATS TLS flags together with the URL: each is for a tls:// URL, --nats-cert and
 * --nats-key go together, the files can be read. Returns 0 or -SQ_EUSAGE (err: "FLAG: why"). The
 * agent calls it too. */
SQ_MUST_CHECK int sq_distopts_tls_check(const struct sq_distopts *d, char *err, size_t len);

/* The TLS client options the NATS TLS flags make (strings borrowed from d). */
struct sq_tls_client_opts sq_distopts_tls(const struct sq_distopts *d);

/* A subject prefix NATS can carry: tokens of [A-Za-z0-9_-] joined by dots. */
bool sq_distopts_prefix_ok(const char *p);

#endif
