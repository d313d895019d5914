/* cli/netopts.c - see netopts.h. */
#include "cli/netopts.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "http/url.h"

const char sq_cli_net_usage[] =
    "      --resolve H:P:ADDR  use ADDR (IPv4, [IPv6], comma-separated) for host H port P\n"
    "      --connect-to H:P:H2:P2  connect to H2:P2 instead of H:P (Host header unchanged)\n"
    "      --dns-ttl D         resolve the host again every D during the run (default: once)\n"
    "  -k, --insecure          https: do not verify the server's certificate\n"
    "      --cacert FILE       https: trust the CAs in this PEM file (default: the system's)\n"
    "      --cert FILE         https: client certificate (PEM), with --key\n"
    "      --key FILE          https: private key of --cert (PEM)\n"
    "      --tls-min V         https: lowest TLS version, 1.2 or 1.3 (default 1.2)\n"
    "      --tls-max V         https: highest TLS version, 1.2 or 1.3 (default 1.3)\n";

static const char *face(const struct sq_cli_net *n)
{
    return n->face ? n->face : "squall";
}

static int fail(const struct sq_cli_net *n, const char *flag, const char *why)
{
    return sq_cli_usage_error(face(n), "%s: %s", flag, why);
}

int sq_cli_net_flag(struct sq_cli_net *n, int opt, const char *flag, const char *arg)
{
    char why[240];
    switch (opt) {
    case SQ_CLI_NET_RESOLVE:
    case SQ_CLI_NET_CONNECT_TO: {
        bool ct = opt == SQ_CLI_NET_CONNECT_TO;
        size_t *cnt = ct ? &n->nconnect_to : &n->nresolve;
        if (*cnt == 16)
            return fail(n, flag, "at most 16 of them");
        if (sq_dns_check_arg(arg, ct, why, sizeof(why)) < 0)
            return fail(n, flag, why);
        (ct ? n->connect_to : n->resolve)[(*cnt)++] = arg;
        return 1;
    }
    case SQ_CLI_NET_DNS_TTL:
        if (sq_parse_duration(arg, SQ_NS_PER_S, &n->dns_ttl_ns) < 0 || n->dns_ttl_ns <= 0) {
            snprintf(why, sizeof(why), "'%s' is not a duration (e.g. 500ms, 10s, 2m)", arg);
            return fail(n, flag, why);
        }
        return 1;
    case 'k':
        n->tls.insecure = true;
        return 1;
    case SQ_CLI_NET_CACERT:
        n->tls.cacert = arg;
        return 1;
    case SQ_CLI_NET_CERT:
        n->tls.cert = arg;
        return 1;
    case SQ_CLI_NET_KEY:
        n->tls.key = arg;
        return 1;
    case SQ_CLI_NET_TLS_MIN:
    case SQ_CLI_NET_TLS_MAX:
        if (sq_tls_version_parse(arg) < 0) {
            snprintf(why, sizeof(why), "'%s' is not a TLS version (1.2 or 1.3)", arg);
            return fail(n, flag, why);
        }
        if (opt == SQ_CLI_NET_TLS_MIN)
            n->tls.min_version = arg;
        else
            n->tls.max_version = arg;
        return 1;
    default:
        return 0;
    }
}

int sq_cli_net_check(const struct sq_cli_net *n)
{
    const struct sq_tls_client_opts *t = &n->tls;
    if (t->min_version && t->max_version &&
        sq_tls_version_parse(t->min_version) > sq_tls_version_parse(t->max_version)) {
        return sq_cli_usage_error(face(n), "--tls-min %s is above --tls-max %s", t->min_version,
                                  t->max_version);
    }
    if (t->key && !t->cert)
        return sq_cli_usage_error(face(n), "--key needs --cert");
    return 0;
}

/* --dns-ttl: the run's lookup again, on the main thread. */
static int relookup(void *ud, struct sq_addr *out, int max)
{
    struct sq_cli_net *n = ud;
    char why[300];
    return sq_dns_lookup(&n->dns, n->url->host, n->url->port, out, max, why, sizeof(why));
}

int sq_cli_net_setup(struct sq_cli_net *n, const struct sq_url *url, struct sq_run_config *cfg,
                     struct sq_tls_client **tls)
{
    *tls = NULL;
    if (strcmp(url->scheme, "https") == 0) {
        char err[SQ_TLS_ERRLEN];
        n->tls.host = url->host;
        int rc = sq_tls_client_new(&n->tls, tls, err, sizeof(err));
        if (rc == -EINVAL)
            return sq_cli_tls_error(face(n), err);
        if (rc < 0) {
            fprintf(stderr, "squall: tls: %s\n", sq_strerror(rc));
            return SQ_EXIT_FAIL;
        }
    }
    n->dns = (struct sq_dns_opts){.resolve = n->resolve,
                                  .nresolve = n->nresolve,
                                  .connect_to = n->connect_to,
                                  .nconnect_to = n->nconnect_to};
    n->url = url;
    char why[300];
    int64_t t0 = sq_now_ns();
    int rc =
        sq_dns_lookup(&n->dns, url->host, url->port, cfg->addrs, SQ_MAX_ADDRS, why, sizeof(why));
    if (rc < 0) {
        fprintf(stderr, "squall: dns: %s\n", why);
        return SQ_EXIT_FAIL;
    }
    cfg->dns_ns = sq_now_ns() - t0;
    cfg->naddrs = rc;
    cfg->tls = *tls;
    if (n->dns_ttl_ns) {
        cfg->dns_ttl_ns = n->dns_ttl_ns;
        cfg->resolve = relookup;
        cfg->resolve_ud = n;
    }
    return 0;
}
