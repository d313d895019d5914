/* cli/netopts.h - the flags both load faces share for reaching the target: DNS overrides
 * (--resolve, --connect-to, --dns-ttl) and TLS (-k/--insecure, --cacert, --cert, --key,
 * --tls-min, --tls-max). One parser, one help text, one set-up, so `squall URL` and
 * `squall run PLAN` cannot drift apart. */
#ifndef SQ_CLI_NETOPTS_H
#define SQ_CLI_NETOPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/run.h"
#include "net/dns.h"
#include "net/tls.h"

struct sq_url;

struct sq_cli_net {
    const char *face; /* for messages: "squall" (the default) or "squall run" */
    const char *resolve[16], *connect_to[16];
    size_t nresolve, nconnect_to;
    int64_t dns_ttl_ns;
    struct sq_tls_client_opts tls;
    /* set by sq_cli_net_setup, read by the run's re-resolution (keep it alive for the run) */
    struct sq_dns_opts dns;
    const struct sq_url *url;
};

/* getopt_long ids of the shared flags (-k is 'k'); above any id a face uses itself. */
enum {
    SQ_CLI_NET_RESOLVE = 1000,
    SQ_CLI_NET_CONNECT_TO,
    SQ_CLI_NET_DNS_TTL,
    SQ_CLI_NET_CACERT,
    SQ_CLI_NET_CERT,
    SQ_CLI_NET_KEY,
    SQ_CLI_NET_TLS_MIN,
    SQ_CLI_NET_TLS_MAX,
};

/* The entries to put in a face's struct option table. */
#define SQ_CLI_NET_LONG_OPTIONS                                                                    \
    {"resolve", required_argument, NULL, SQ_CLI_NET_RESOLVE},                                      \
        {"connect-to", required_argument, NULL, SQ_CLI_NET_CONNECT_TO},                            \
        {"dns-ttl", required_argument, NULL, SQ_CLI_NET_DNS_TTL},                                  \
        {"insecure", no_argument, NULL, 'k'},                                                      \
        {"cacert", required_argument, NULL, SQ_CLI_NET_CACERT},                                    \
        {"cert", required_argument, NULL, SQ_CLI_NET_CERT},                                        \
        {"key", required_argument, NULL, SQ_CLI_NET_KEY},                                          \
        {"tls-min", required_argument, NULL, SQ_CLI_NET_TLS_MIN},                                  \
    {                                                                                              \
        "tls-max", required_argument, NULL, SQ_CLI_NET_TLS_MAX                                     \
    }

/* The lines of --help for those flags. */
extern const char sq_cli_net_usage[];

/* Takes one parsed option: 1 when it was one of the shared flags (stored), 0 when it is not, or
 * SQ_EXIT_USAGE after printing "FACE: FLAG: why" to stderr (cli/common.h). flag is the option as
 * the user wrote it. */
int sq_cli_net_flag(struct sq_cli_net *n, int opt, const char *flag, const char *arg);

/* Checks the flags together (--tls-min above --tls-max, --key without --cert): 0, or
 * SQ_EXIT_USAGE after printing why. */
int sq_cli_net_check(const struct sq_cli_net *n);

/* Resolves url's host into cfg (addrs, naddrs, dns_ns, and the --dns-ttl re-resolution) and,
 * for https, creates the TLS client (*tls; the caller frees it). Returns 0, SQ_EXIT_USAGE (a TLS
 * option the library refuses) or SQ_EXIT_FAIL (the lookup failed), after printing why. */
int sq_cli_net_setup(struct sq_cli_net *n, const struct sq_url *url, struct sq_run_config *cfg,
                     struct sq_tls_client **tls);

#endif
