/* face/netopts.c - see netopts.h. */
#include "face/netopts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/parse.h"
#include "face/flags.h"
#include "http/url.h"
#include "net/sock.h"
#include "net/srcaddr.h"

#define NOFILE_HEADROOM 64

const char sq_netopts_usage[] =
    "      --resolve H:P:ADDR  use ADDR (IPv4, [IPv6], comma-separated) for host H port P\n"
    "      --connect-to H:P:H2:P2  connect to H2:P2 instead of H:P (Host header unchanged)\n"
    "      --dns-ttl D         resolve the host again every D during the run (default: once)\n"
    "  -k, --insecure          https: do not verify the server's certificate\n"
    "      --cacert FILE       https: trust the CAs in this PEM file (default: the system's)\n"
    "      --cert FILE         https: client certificate (PEM), with --key\n"
    "      --key FILE          https: private key of --cert (PEM)\n"
    "      --tls-min V         https: lowest TLS version, 1.2 or 1.3 (default 1.2)\n"
    "      --tls-max V         https: highest TLS version, 1.2 or 1.3 (default 1.3)\n"
    "      --source-addrs LIST bind connections round-robin to these local addresses: ADDR,\n"
    "                          A-B (IPv4 range) or ADDR/N (IPv4 block), comma-separated\n"
    "                          (default: 127.0.0.1+ on loopback when one address's ports\n"
    "                          would not do)\n"
    "      --connect-rate N    open at most N connections per second (default: no limit)\n";

int sq_netopts_flag(struct sq_netopts *n, int opt, const char *flag, const char *arg, char *err,
                    size_t len)
{
    char why[240];
    switch (opt) {
    case SQ_NETOPT_RESOLVE:
    case SQ_NETOPT_CONNECT_TO: {
        bool ct = opt == SQ_NETOPT_CONNECT_TO;
        size_t *cnt = ct ? &n->nconnect_to : &n->nresolve;
        if (*cnt == SQ_NETOPTS_MAX)
            return sq_flag_fail(err, len, "%s: at most 16 of them", flag);
        if (sq_dns_check_arg(arg, ct, why, sizeof(why)) < 0)
            return sq_flag_fail(err, len, "%s: %s", flag, why);
        (ct ? n->connect_to : n->resolve)[(*cnt)++] = arg;
        return 1;
    }
    case SQ_NETOPT_DNS_TTL:
        if (sq_parse_duration(arg, SQ_NS_PER_S, &n->dns_ttl_ns) < 0 || n->dns_ttl_ns <= 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)", flag,
                                arg);
        return 1;
    case 'k':
        n->tls.insecure = true;
        return 1;
    case SQ_NETOPT_CACERT:
        n->tls.cacert = arg;
        return 1;
    case SQ_NETOPT_CERT:
        n->tls.cert = arg;
        return 1;
    case SQ_NETOPT_KEY:
        n->tls.key = arg;
        return 1;
    case SQ_NETOPT_TLS_MIN:
    case SQ_NETOPT_TLS_MAX:
        if (sq_tls_version_parse(arg) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a TLS version (1.2 or 1.3)", flag, arg);
        if (opt == SQ_NETOPT_TLS_MIN)
            n->tls.min_version = arg;
        else
            n->tls.max_version = arg;
        return 1;
    case SQ_NETOPT_SOURCE_ADDRS: {
        struct sq_addr *v = NULL;
        size_t nv = 0;
        int rc = sq_srcaddr_parse(arg, &v, &nv, why, sizeof(why));
        free(v);
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            return sq_flag_fail(err, len, "%s: %s", flag, why);
        n->source_addrs = arg;
        return 1;
    }
    case SQ_NETOPT_CONNECT_RATE: {
        char *end = NULL;
        double v = strtod(arg, &end);
        if (end == arg || *end || !isfinite(v) || v <= 0 || v > 1e9)
            return sq_flag_fail(
                err, len, "%s: '%s' is not a rate (connections per second, above 0)", flag, arg);
        n->connect_rate = v;
        return 1;
    }
    default:
        return 0;
    }
}

int sq_netopts_check(const struct sq_netopts *n, char *err, size_t len)
{
    const struct sq_tls_client_opts *t = &n->tls;
    if (t->min_version && t->max_version &&
        sq_tls_version_parse(t->min_version) > sq_tls_version_parse(t->max_version))
        return sq_flag_fail(err, len, "--tls-min %s is above --tls-max %s", t->min_version,
                            t->max_version);
    if (t->key && !t->cert)
        return sq_flag_fail(err, len, "--key needs --cert");
    return 0;
}

/* The names the TLS library gives its options (net/tls.h), and the flags that set them. */
static const struct {
    const char *field, *flag;
} tls_flags[] = {
    {"cacert '", "--cacert"},       {"cert '", "--cert"},         {"key '", "--key"},
    {"client_ca '", "--client-ca"}, {"cert_out '", "--cert-out"},
};

void sq_netopts_tls_message(const char *tls_err, char *out, size_t len)
{
    for (size_t i = 0; i < SQ_ARRAY_LEN(tls_flags); i++) {
        size_t n = strlen(tls_flags[i].field);
        if (strncmp(tls_err, tls_flags[i].field, n) == 0) {
            /* OpenSSL's reason for a file that is not PEM says only "no start line". */
            const char *end = tls_err + strlen(tls_err);
            bool pem = end - tls_err >= 13 && strcmp(end - 13, "no start line") == 0;
            snprintf(out, len, "%s: '%s%s", tls_flags[i].flag, tls_err + n,
                     pem ? " (not a PEM file)" : "");
            return;
        }
    }
    snprintf(out, len, "tls: %s", tls_err);
}

/* --dns-ttl: the run's lookup again, on the main thread. */
static int relookup(void *ud, struct sq_addr *out, int max)
{
    struct sq_net *s = ud;
    char why[600];
    return sq_egress_lookup(s->egress, &s->dns, "the target", s->url->host, s->url->port,
                            SQ_EGRESS_CONNECT, out, max, why, sizeof(why));
}

int sq_net_setup(struct sq_net *s, const struct sq_netopts *n, const struct sq_url *url,
                 const char *alpn, struct sq_run_config *cfg, char *err, size_t len)
{
    *s = (struct sq_net){.dns = {.resolve = n->resolve,
                                 .nresolve = n->nresolve,
                                 .connect_to = n->connect_to,
                                 .nconnect_to = n->nconnect_to},
                         .egress = n->egress,
                         .url = url};
    cfg->egress = n->egress;
    cfg->connect_rate = s->connect_rate = n->connect_rate;
    if (strcmp(url->scheme, "https") == 0) {
        char why[SQ_TLS_ERRLEN];
        struct sq_tls_client_opts t = n->tls;
        t.host = url->host;
        t.alpn = alpn;
        int rc = sq_tls_client_new(&t, &s->tls, why, sizeof(why));
        if (rc == -EINVAL) {
            sq_netopts_tls_message(why, err, len);
            return -SQ_EUSAGE;
        }
        if (rc < 0) {
            snprintf(err, len, "tls: %s", sq_strerror(rc));
            return rc;
        }
    }
    char why[600];
    int64_t t0 = sq_now_ns();
    int rc = sq_egress_lookup(n->egress, &s->dns, "the target", url->host, url->port,
                              SQ_EGRESS_CONNECT, cfg->addrs, SQ_MAX_ADDRS, why, sizeof(why));
    if (rc == -EACCES) {
        snprintf(err, len, "%s", why);
        return rc;
    }
    if (rc < 0) {
        snprintf(err, len, "dns: %s", why);
        return -SQ_ERESOLVE;
    }
    cfg->dns_ns = sq_now_ns() - t0;
    cfg->naddrs = rc;
    cfg->tls = s->tls;
    sq_addr_format(&cfg->addrs[0], s->addr, sizeof(s->addr));
    if (n->dns_ttl_ns) {
        cfg->dns_ttl_ns = n->dns_ttl_ns;
        cfg->resolve = relookup;
        cfg->resolve_ud = s;
    }
    return 0;
}

void sq_net_dispose(struct sq_net *s)
{
    sq_tls_client_free(s->tls);
    s->tls = NULL;
    if (s->src_names)
        free(s->src_names[0]);
    free(s->src_names);
    free(s->src);
    s->src_names = NULL;
    s->src = NULL;
    s->nsrc = 0;
}

/* Every target address IPv4 loopback (127.0.0.0/8). */
static bool loopback_target(const struct sq_run_config *cfg)
{
    for (int i = 0; i < cfg->naddrs; i++) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&cfg->addrs[i].ss;
        if (s4->sin_family != AF_INET || (ntohl(s4->sin_addr.s_addr) >> 24) != 127)
            return false;
    }
    return cfg->naddrs > 0;
}

int sq_net_sources(struct sq_net *s, const struct sq_netopts *n, uint64_t conns,
                   struct sq_run_config *cfg, char *err, size_t len)
{
    char why[240];
    size_t nv = 0;
    const char *what = n->source_what ? n->source_what : "--source-addrs";
    if (n->source_addrs) {
        int rc = sq_srcaddr_parse(n->source_addrs, &s->src, &nv, why, sizeof(why));
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            return sq_flag_fail(err, len, "%s: %s", what, why);
    } else {
        if (!loopback_target(cfg))
            return 0;
        uint32_t want = sq_srcaddr_auto_count(conns, sq_srcaddr_ports());
        if (want < 2)
            return 0;
        if (!(s->src = calloc(want, sizeof(*s->src))))
            return -ENOMEM;
        sq_srcaddr_loopback(s->src, want);
        nv = want;
        s->src_auto = true;
    }
    s->nsrc = (uint32_t)nv;
    s->src_names = calloc(nv, sizeof(*s->src_names));
    char *names = calloc(nv, INET6_ADDRSTRLEN);
    if (!s->src_names || !names) {
        free(names);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nv; i++) {
        s->src_names[i] = names + i * INET6_ADDRSTRLEN;
        sq_srcaddr_format(&s->src[i], s->src_names[i], INET6_ADDRSTRLEN);
        int rc = sq_srcaddr_check(&s->src[i]);
        if (rc < 0 && s->src_auto)
            return sq_flag_fail(err, len,
                                "%llu connections to loopback need %u source addresses, and %s "
                                "cannot be bound (%s): name the ones to use with --source-addrs",
                                (unsigned long long)conns, s->nsrc, s->src_names[i],
                                sq_strerror(rc));
        if (rc < 0)
            return sq_flag_fail(err, len, "%s: %s is not an address of this host (%s)", what,
                                s->src_names[i], sq_strerror(rc));
    }
    cfg->src_addrs = s->src;
    cfg->nsrc = s->nsrc;
    return 0;
}

int sq_net_raise_nofile(uint64_t n, const char *what, char *err, size_t len)
{
    uint64_t have = 0, need = n + NOFILE_HEADROOM;
    if (sq_raise_nofile(need, &have) == 0)
        return 0;
    snprintf(err, len,
             "%llu %s need %llu open files but the limit is %llu; raise it (ulimit -n) or use "
             "fewer %s",
             (unsigned long long)n, what, (unsigned long long)need, (unsigned long long)have, what);
    return -EMFILE;
}
