/* face/netopts.c - see netopts.h. */
#include "face/netopts.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <strings.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/b64.h"
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
    "      --connect-rate N    open at most N connections per second (default: no limit)\n"
    "      --proxy URL         through this HTTP proxy: http://[user:pass@]host[:port]; https\n"
    "                          tunnels with CONNECT, http goes in absolute-form (default:\n"
    "                          HTTP(S)_PROXY unless NO_PROXY or a loopback host; \"\": none)\n"
    "      --unix-socket PATH  connect to this Unix socket instead (Host from the URL)\n";

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
    case SQ_NETOPT_PROXY:
        if (arg[0]) {
            char host[256], cred[256];
            uint16_t port;
            if (sq_proxy_parse(arg, host, sizeof(host), &port, cred, sizeof(cred), why,
                               sizeof(why)) < 0)
                return sq_flag_fail(err, len, "%s: %s", flag, why);
        }
        n->proxy = arg;
        return 1;
    case SQ_NETOPT_UNIX_SOCKET: {
        struct sq_addr a;
        if (sq_addr_unix(arg, &a) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is empty or longer than 107 bytes", flag, arg);
        n->unix_socket = arg;
        return 1;
    }
    default:
        return 0;
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int sq_proxy_parse(const char *url, char *host, size_t hostlen, uint16_t *port, char *cred,
                   size_t credlen, char *err, size_t len)
{
    const char *p = url;
    const char *sep = strstr(p, "://");
    if (sep) {
        if (sep - p != 4 || strncasecmp(p, "http", 4) != 0) {
            snprintf(err, len, "'%.*s' proxies are not supported (an HTTP proxy: http://)",
                     (int)(sep - p), p);
            return -SQ_EUSAGE;
        }
        p = sep + 3;
    }
    size_t n = strcspn(p, "/?#");
    if (p[n] == '?' || p[n] == '#' || (p[n] == '/' && p[n + 1])) {
        snprintf(err, len, "a proxy URL is http://[user:password@]host[:port], without a path");
        return -SQ_EUSAGE;
    }
    const char *end = p + n, *at = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@')
            at = q;
    size_t c = 0;
    if (at) {
        for (const char *q = p; q < at; q++) {
            char ch = *q;
            if (ch == '%' && q + 2 < at && hexval(q[1]) >= 0 && hexval(q[2]) >= 0) {
                ch = (char)(hexval(q[1]) * 16 + hexval(q[2]));
                q += 2;
            }
            if ((unsigned char)ch < 0x20 || ch == 0x7f || c + 1 >= credlen) {
                snprintf(err, len, "the proxy's user:password is too long or has control bytes");
                return -SQ_EUSAGE;
            }
            cred[c++] = ch;
        }
        p = at + 1;
    }
    cred[c] = '\0';
    const char *hend = end, *colon = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb) {
            snprintf(err, len, "the proxy's IPv6 address lacks its ']'");
            return -SQ_EUSAGE;
        }
        colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
        if (rb + 1 < end && !colon) {
            snprintf(err, len, "bytes after the proxy's ']'");
            return -SQ_EUSAGE;
        }
        p++;
        hend = rb;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        if (colon)
            hend = colon;
    }
    if (hend == p || (size_t)(hend - p) >= hostlen) {
        snprintf(err, len, "'%s' names no proxy host", url);
        return -SQ_EUSAGE;
    }
    for (const char *q = p; q < hend; q++)
        if (!(isalnum((unsigned char)*q) || strchr("-._~:", *q))) {
            snprintf(err, len, "the proxy host '%.*s' is not a host name or address",
                     (int)(hend - p), p);
            return -SQ_EUSAGE;
        }
    memcpy(host, p, (size_t)(hend - p));
    host[hend - p] = '\0';
    *port = 1080;
    if (colon) {
        char digits[8] = "";
        size_t dl = (size_t)(end - colon - 1);
        uint64_t v = 0;
        if (dl == 0 || dl >= sizeof(digits)) {
            snprintf(err, len, "the proxy's port must be 1..65535");
            return -SQ_EUSAGE;
        }
        memcpy(digits, colon + 1, dl);
        digits[dl] = '\0';
        if (sq_parse_u64(digits, 1, 65535, 0, &v) != 0) {
            snprintf(err, len, "the proxy's port '%s' must be 1..65535", digits);
            return -SQ_EUSAGE;
        }
        *port = (uint16_t)v;
    }
    return 0;
}

static const char *env2(const char *upper, const char *lower, const char **from)
{
    const char *v = getenv(upper);
    *from = upper;
    if (!v || !v[0]) {
        v = getenv(lower);
        *from = lower;
    }
    return v && v[0] ? v : NULL;
}

static bool loopback_host(const char *host)
{
    if (strcasecmp(host, "localhost") == 0 || strcmp(host, "::1") == 0)
        return true;
    size_t n = strlen(host);
    if (n > 10 && strcasecmp(host + n - 10, ".localhost") == 0)
        return true;
    struct in_addr a4;
    return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

/* One NO_PROXY entry [a, a + n) against host:port. */
static bool no_proxy_match(const char *a, size_t n, const char *host, uint16_t port)
{
    while (n && (a[0] == ' ' || a[0] == '\t'))
        a++, n--;
    while (n && (a[n - 1] == ' ' || a[n - 1] == '\t'))
        n--;
    if (n == 0)
        return false;
    if (n == 1 && a[0] == '*')
        return true;
    /* an entry's port: after the last ':' of "name:port" or "[v6]:port" */
    const char *rb = memchr(a, ']', n), *colon = NULL;
    for (const char *q = rb ? rb : a; q < a + n; q++)
        if (*q == ':')
            colon = q;
    if (colon && (rb || memchr(a, ':', (size_t)(colon - a)) == NULL)) {
        if ((uint16_t)strtoul(colon + 1, NULL, 10) != port)
            return false;
        n = (size_t)(colon - a);
    }
    if (n >= 2 && a[0] == '[' && a[n - 1] == ']')
        a++, n -= 2;
    bool sub_only = a[0] == '.';
    if (sub_only)
        a++, n--;
    size_t h = strlen(host);
    if (!sub_only && h == n && strncasecmp(host, a, n) == 0)
        return true;
    return h > n && host[h - n - 1] == '.' && strncasecmp(host + h - n, a, n) == 0;
}

const char *sq_proxy_from_env(const char *scheme, const char *host, uint16_t port,
                              const char **from)
{
    bool tls = strcmp(scheme, "https") == 0 || strcmp(scheme, "wss") == 0;
    const char *v =
        tls ? env2("HTTPS_PROXY", "https_proxy", from) : env2("HTTP_PROXY", "http_proxy", from);
    if (!v || loopback_host(host))
        return NULL;
    const char *np_from;
    const char *np = env2("NO_PROXY", "no_proxy", &np_from);
    for (const char *p = np; p && *p;) {
        size_t n = strcspn(p, ",");
        if (no_proxy_match(p, n, host, port))
            return NULL;
        p += n + (p[n] == ',');
    }
    return v;
}

/* The proxy a run of url takes (NULL: none), and where it came from. */
static const char *proxy_choice(const struct sq_netopts *n, const struct sq_url *url,
                                const char **from)
{
    *from = "--proxy";
    if (n->unix_socket)
        return NULL;
    if (n->proxy)
        return n->proxy[0] ? n->proxy : NULL;
    if (n->proxy_env)
        return sq_proxy_from_env(url->scheme, url->host, url->port, from);
    return NULL;
}

/* "Basic base64(cred)", malloc'd. */
static char *basic_auth(const char *cred)
{
    size_t cl = strlen(cred);
    char *a = malloc(6 + sq_b64_encoded_len(cl));
    if (a) {
        memcpy(a, "Basic ", 6);
        sq_b64_encode(cred, cl, a + 6);
    }
    return a;
}

int sq_net_proxy_form(const struct sq_netopts *n, const struct sq_url *url, char *target,
                      size_t tlen, char **auth, char *err, size_t len)
{
    const char *from;
    const char *purl = proxy_choice(n, url, &from);
    target[0] = '\0';
    *auth = NULL;
    if (!purl || !n->proxy_absolute || strcmp(url->scheme, "http") != 0)
        return 0;
    char host[256], cred[256], why[300];
    uint16_t port;
    if (sq_proxy_parse(purl, host, sizeof(host), &port, cred, sizeof(cred), why, sizeof(why)) < 0) {
        snprintf(err, len, "%s: %s", from, why);
        return -SQ_EUSAGE;
    }
    if (cred[0] && !(*auth = basic_auth(cred)))
        return -ENOMEM;
    explicit_bzero(cred, sizeof(cred));
    snprintf(target, tlen, "http://%s", url->authority);
    return 0;
}

static int relookup(void *ud, struct sq_addr *out, int max);

/* The run goes through an HTTP proxy: its address into cfg, the CONNECT (a tunnel) or the
 * absolute-form's parts (plain http) into s. */
static int proxy_setup(struct sq_net *s, const struct sq_netopts *n, const struct sq_url *url,
                       const char *purl, const char *from, struct sq_run_config *cfg, char *err,
                       size_t len)
{
    char host[256], cred[256], why[600];
    uint16_t port;
    if (sq_proxy_parse(purl, host, sizeof(host), &port, cred, sizeof(cred), why, sizeof(why)) < 0) {
        snprintf(err, len, "%s: %s", from, why);
        return -SQ_EUSAGE;
    }
    /* the destination passes the run's policy too: a proxy is no way around it */
    if (n->egress) {
        struct sq_addr dest[SQ_MAX_ADDRS];
        int rc =
            sq_egress_lookup(n->egress, &s->dns, "the target (through the proxy)", url->host,
                             url->port, SQ_EGRESS_CONNECT, dest, SQ_MAX_ADDRS, why, sizeof(why));
        if (rc < 0) {
            snprintf(err, len, "%s%s", rc == -EACCES ? "" : "dns: ", why);
            return rc == -EACCES ? rc : -SQ_ERESOLVE;
        }
    }
    int64_t t0 = sq_now_ns();
    int rc = sq_egress_lookup(n->egress, &s->dns, "the proxy", host, port, SQ_EGRESS_CONNECT,
                              cfg->addrs, SQ_MAX_ADDRS, why, sizeof(why));
    if (rc == -EACCES) {
        snprintf(err, len, "%s", why);
        return rc;
    }
    if (rc < 0) {
        snprintf(err, len, "dns: the proxy (%s): %s", from, why);
        return -SQ_ERESOLVE;
    }
    cfg->dns_ns = sq_now_ns() - t0;
    cfg->naddrs = rc;
    snprintf(s->proxy_host, sizeof(s->proxy_host), "%s", host);
    s->proxy_port = port;
    if (n->dns_ttl_ns) {
        cfg->dns_ttl_ns = n->dns_ttl_ns;
        cfg->resolve = relookup;
        cfg->resolve_ud = s;
    }
    bool v6 = strchr(host, ':') != NULL;
    snprintf(s->proxy_shown, sizeof(s->proxy_shown), "http://%s%s%s:%u", v6 ? "[" : "", host,
             v6 ? "]" : "", (unsigned)port);
    s->proxy_from = from;
    s->proxy_has_auth = cred[0] != '\0';
    if (cred[0] && !(s->proxy_auth = basic_auth(cred)))
        return -ENOMEM;
    explicit_bzero(cred, sizeof(cred));
    bool plain = strcmp(url->scheme, "http") == 0;
    if (plain && n->proxy_absolute) {
        s->proxy_mode = "absolute-form";
        snprintf(s->proxy_target, sizeof(s->proxy_target), "http://%s", url->authority);
        return 0;
    }
    s->proxy_mode = "connect";
    bool uv6 = strchr(url->host, ':') != NULL;
    char hp[300];
    snprintf(hp, sizeof(hp), "%s%s%s:%u", uv6 ? "[" : "", url->host, uv6 ? "]" : "",
             (unsigned)url->port);
    size_t cap = 2 * strlen(hp) + (s->proxy_auth ? strlen(s->proxy_auth) : 0) + 128;
    if (!(s->proxy_connect = malloc(cap)))
        return -ENOMEM;
    int w = snprintf(s->proxy_connect, cap, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s%s%s\r\n", hp, hp,
                     s->proxy_auth ? "Proxy-Authorization: " : "",
                     s->proxy_auth ? s->proxy_auth : "", s->proxy_auth ? "\r\n" : "");
    cfg->proxy_connect = s->proxy_connect;
    cfg->proxy_connect_len = (size_t)w;
    return 0;
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
    if (s->proxy_host[0]) /* through a proxy the connections go to it: its addresses again */
        return sq_egress_lookup(s->egress, &s->dns, "the proxy", s->proxy_host, s->proxy_port,
                                SQ_EGRESS_CONNECT, out, max, why, sizeof(why));
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
    cfg->tls = s->tls;
    if (n->unix_socket) {
        if (n->proxy && n->proxy[0]) {
            snprintf(err, len, "--unix-socket and --proxy: one or the other");
            return -SQ_EUSAGE;
        }
        if (sq_addr_unix(n->unix_socket, &cfg->addrs[0]) < 0) {
            snprintf(err, len, "--unix-socket: '%s' is empty or too long", n->unix_socket);
            return -SQ_EUSAGE;
        }
        if (sq_egress_allows(n->egress, &cfg->addrs[0], SQ_EGRESS_CONNECT) < 0) {
            snprintf(err, len,
                     "--unix-socket %s: runs under an egress policy (the daemon, MCP) may not "
                     "connect to a Unix socket",
                     n->unix_socket);
            return -EACCES;
        }
        cfg->naddrs = 1;
        sq_addr_format(&cfg->addrs[0], s->addr, sizeof(s->addr));
        return 0;
    }
    const char *from;
    const char *purl = proxy_choice(n, url, &from);
    if (purl) {
        int rc = proxy_setup(s, n, url, purl, from, cfg, err, len);
        if (rc == 0)
            sq_addr_format(&cfg->addrs[0], s->addr, sizeof(s->addr));
        return rc;
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
    free(s->proxy_connect);
    if (s->proxy_auth)
        explicit_bzero(s->proxy_auth, strlen(s->proxy_auth));
    free(s->proxy_auth);
    s->proxy_connect = s->proxy_auth = NULL;
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
