/* face/netopts.h - the flags every load face shares for reaching the target: DNS overrides
 * (--resolve, --connect-to, --dns-ttl), TLS (-k/--insecure, --cacert, --cert, --key,
 * --tls-min, --tls-max) and connection setup (--source-addrs, --connect-rate); and setting them
 * up for a run: the target resolved into the run's configuration, the TLS client made, the
 * source addresses checked (or spread over 127.0.0.1+ on loopback). One option table, one help
 * text, one parser and one set-up, so `squall URL`, `squall run PLAN` and the daemon cannot drift
 * apart.
 *
 * Nothing here prints: messages go into the caller's buffer, with the return codes of
 * face/flags.h (-SQ_EUSAGE names a flag; any other negative code is a failure to set up).
 */
#ifndef SQ_FACE_NETOPTS_H
#define SQ_FACE_NETOPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/run.h"
#include "net/dns.h"
#include "net/egress.h"
#include "net/tls.h"

struct sq_url;

#define SQ_NETOPTS_MAX 16 /* --resolve and --connect-to: at most this many of each */

/* The flags, as parsed. Strings are borrowed from the arguments. */
struct sq_netopts {
    const char *resolve[SQ_NETOPTS_MAX], *connect_to[SQ_NETOPTS_MAX];
    size_t nresolve, nconnect_to;
    int64_t dns_ttl_ns; /* 0: resolve once */
    struct sq_tls_client_opts tls;
    const char *source_addrs; /* --source-addrs LIST (net/srcaddr.h); NULL: none */
    const char *source_what;  /* names it in messages; NULL: "--source-addrs" */
    double connect_rate;      /* --connect-rate N: connects per second at most; 0: no limit */
    /* --proxy URL: an HTTP proxy, http://[user:password@]host[:port] (default port 1080); ""
     * turns the environment's off. NULL: the environment's when proxy_env, else none. */
    const char *proxy;
    /* Not a flag: honour HTTP_PROXY / HTTPS_PROXY / NO_PROXY (and their lowercase forms) of
     * this process. The CLI faces set it; the daemon and MCP do not (their host's environment
     * is not the remote caller's: only an explicit proxy applies there). */
    bool proxy_env;
    /* Not a flag: the face sends plain http in absolute-form (its requests carry the proxy's
     * part: sq_net.proxy_target, .proxy_auth); else plain http tunnels with CONNECT as https
     * does. */
    bool proxy_absolute;
    /* --unix-socket PATH: connect to this AF_UNIX path instead of the URL's host and port (the
     * Host header and TLS's server name still from the URL). NULL: TCP. */
    const char *unix_socket;
    /* Not a flag: the run's egress policy (net/egress.h), set by a face that has one (the
     * daemon, MCP) and borrowed for the run; NULL (the CLI): any destination. */
    const struct sq_egress *egress;
};

/* getopt_long ids of the shared flags (-k is 'k'); above any id a face uses itself. */
enum {
    SQ_NETOPT_RESOLVE = 1000,
    SQ_NETOPT_CONNECT_TO,
    SQ_NETOPT_DNS_TTL,
    SQ_NETOPT_CACERT,
    SQ_NETOPT_CERT,
    SQ_NETOPT_KEY,
    SQ_NETOPT_TLS_MIN,
    SQ_NETOPT_TLS_MAX,
    SQ_NETOPT_SOURCE_ADDRS,
    SQ_NETOPT_CONNECT_RATE,
    SQ_NETOPT_PROXY,
    SQ_NETOPT_UNIX_SOCKET,
};

/* The entries to put in a face's struct option table. */
#define SQ_NETOPTS_LONG_OPTIONS                                                                    \
    {"resolve", required_argument, NULL, SQ_NETOPT_RESOLVE},                                       \
        {"connect-to", required_argument, NULL, SQ_NETOPT_CONNECT_TO},                             \
        {"dns-ttl", required_argument, NULL, SQ_NETOPT_DNS_TTL},                                   \
        {"insecure", no_argument, NULL, 'k'},                                                      \
        {"cacert", required_argument, NULL, SQ_NETOPT_CACERT},                                     \
        {"cert", required_argument, NULL, SQ_NETOPT_CERT},                                         \
        {"key", required_argument, NULL, SQ_NETOPT_KEY},                                           \
        {"tls-min", required_argument, NULL, SQ_NETOPT_TLS_MIN},                                   \
        {"source-addrs", required_argument, NULL, SQ_NETOPT_SOURCE_ADDRS},                         \
        {"connect-rate", required_argument, NULL, SQ_NETOPT_CONNECT_RATE},                         \
        {"proxy", required_argument, NULL, SQ_NETOPT_PROXY},                                       \
        {"unix-socket", required_argument, NULL, SQ_NETOPT_UNIX_SOCKET},                           \
    {                                                                                              \
        "tls-max", required_argument, NULL, SQ_NETOPT_TLS_MAX                                      \
    }

/* The lines of --help for those flags. */
extern const char sq_netopts_usage[];

/* Takes one parsed option: 1 when it was one of the shared flags (stored), 0 when it is not, or
 * -SQ_EUSAGE with err saying "FLAG: why". flag is the option as the user wrote it
 * (sq_flag_name); arg is borrowed and must outlive n. */
SQ_MUST_CHECK int sq_netopts_flag(struct sq_netopts *n, int opt, const char *flag, const char *arg,
                                  char *err, size_t len);

/* Checks the flags together (--tls-min above --tls-max, --key without --cert): 0, or -SQ_EUSAGE
 * with err saying why. */
SQ_MUST_CHECK int sq_netopts_check(const struct sq_netopts *n, char *err, size_t len);

/* A TLS library message that names its option ("cacert '/x.pem': No such file or directory",
 * net/tls.h) rewritten to name the flag instead: "--cacert: '/x.pem': No such file or directory"
 * (", (not a PEM file)" added where OpenSSL says only "no start line"); any other one as
 * "tls: MESSAGE". Knows the client's and the target's TLS flags. */
void sq_netopts_tls_message(const char *tls_err, char *out, size_t len);

/* What the set-up made for one run. The run's configuration points into it (the --dns-ttl
 * re-resolution), so it must stay where it is, alive, until the run has ended. */
struct sq_net {
    struct sq_dns_opts dns;
    const struct sq_egress *egress; /* borrowed: the run's policy, or NULL */
    const struct sq_url *url;       /* borrowed */
    struct sq_tls_client *tls;      /* https: owned; NULL for http */
    char addr[80];                  /* the first address found, "127.0.0.1:8080" (the document's) */
    /* The source addresses (sq_net_sources): owned; src_names[i] is src[i] as text */
    struct sq_addr *src;
    uint32_t nsrc;
    bool src_auto; /* spread over 127.0.0.1+ by itself (a loopback target), not --source-addrs */
    char **src_names;
    double connect_rate; /* --connect-rate, 0: none */
    /* The proxy the run goes through (none: proxy_shown[0] == 0). proxy_shown is its URL
     * without credentials ("http://127.0.0.1:3128"), proxy_from where it came from ("--proxy",
     * "HTTPS_PROXY"...), proxy_mode "connect" (a tunnel: cfg->proxy_connect, owned here) or
     * "absolute-form" (plain http: the face serialises its requests with proxy_target, the
     * absolute-form prefix "http://authority", and the header proxy_auth when not NULL:
     * "Basic ...", owned). The report shows all but the credentials. */
    char proxy_shown[300];
    const char *proxy_from, *proxy_mode;
    bool proxy_has_auth;
    char *proxy_connect, *proxy_auth;
    char proxy_target[320];
    char proxy_host[256]; /* what --dns-ttl looks up again through a proxy: the proxy */
    uint16_t proxy_port;
};

/* Parses a proxy URL: "http://" (or no scheme), an optional "user:password@" (percent-decoded),
 * host or [v6], an optional ":port" (default 1080), an optional "/". Returns 0 with host, port
 * and the "user:password" text (empty: none) filled in, or -SQ_EUSAGE with err saying why. */
SQ_MUST_CHECK int sq_proxy_parse(const char *url, char *host, size_t hostlen, uint16_t *port,
                                 char *cred, size_t credlen, char *err, size_t len);

/* The environment's proxy for a URL of scheme (http, ws: HTTP_PROXY then http_proxy; https,
 * wss: HTTPS_PROXY then https_proxy; the uppercase name first, as Go's ProxyFromEnvironment
 * and k6 do) and host, or NULL: none set, or NO_PROXY (then no_proxy) lists the host, or the
 * host is localhost or a loopback address (never proxied from the environment: --proxy is how
 * a loopback target goes through a proxy). NO_PROXY: comma-separated "*" (everything), host
 * names (matching the name and its subdomains; a leading "." matches only subdomains), IP
 * addresses, each optionally with ":port" (then only that port). *from names the variable. */
const char *sq_proxy_from_env(const char *scheme, const char *host, uint16_t port,
                              const char **from);

/* For a face that serialises its requests before sq_net_setup: when n sends url's plain http
 * through a proxy in absolute-form (n->proxy_absolute, the same choice of proxy as
 * sq_net_setup's), target gets "http://AUTHORITY" (the request-target's prefix) and *auth the
 * Proxy-Authorization value ("Basic ...", malloc'd; NULL without credentials); else target is
 * "". Returns 0, -SQ_EUSAGE (a bad proxy URL in the environment: err says which) or -ENOMEM. */
SQ_MUST_CHECK int sq_net_proxy_form(const struct sq_netopts *n, const struct sq_url *url,
                                    char *target, size_t tlen, char **auth, char *err, size_t len);

/* Resolves url's host into cfg (addrs, naddrs, dns_ns, and the --dns-ttl re-resolution) through
 * n->egress (the name before the lookup, every address after, overrides included; cfg->egress
 * is set for the connect-time check) and, for https, creates the TLS client (alpn: the
 * protocols to offer, NULL for http/1.1) into s->tls and cfg->tls. n and url are borrowed and
 * must outlive the run. Returns 0, -SQ_EUSAGE (a TLS file or option the library refuses: err
 * names the flag), -SQ_ERESOLVE ("dns: why"), -EACCES (the policy's refusal, naming its rule)
 * or another negative code ("tls: why"). s is filled either way: sq_net_dispose it.
 * With --unix-socket the run's one address is that path (refused under an egress policy). With
 * a proxy (--proxy, or the environment's when n->proxy_env) the run's addresses are the
 * proxy's; under an egress policy both the proxy and the destination must pass it (the
 * destination is looked up here for the check alone: the proxy resolves it again). */
SQ_MUST_CHECK int sq_net_setup(struct sq_net *s, const struct sq_netopts *n,
                               const struct sq_url *url, const char *alpn,
                               struct sq_run_config *cfg, char *err, size_t len);
void sq_net_dispose(struct sq_net *s);

/* After sq_net_setup, once the run's connection count is known: the source addresses into s and
 * cfg (src_addrs, nsrc). --source-addrs: its list, each address bound once here to prove it is
 * this host's; none, with every target address IPv4 loopback and more connections than one
 * address keeps within half its ephemeral ports (net/srcaddr.h): 127.0.0.1, 127.0.0.2... as
 * many as needed; else none. Returns 0, -SQ_EUSAGE ("--source-addrs: 10.9.9.9 is not an address
 * of this host (Cannot assign requested address)") or -ENOMEM. */
SQ_MUST_CHECK int sq_net_sources(struct sq_net *s, const struct sq_netopts *n, uint64_t conns,
                                 struct sq_run_config *cfg, char *err, size_t len);

/* Raises RLIMIT_NOFILE for n sockets plus headroom (files, the loop, listeners). Returns 0, or
 * -EMFILE with err saying "N WHAT need M open files but the limit is L; raise it (ulimit -n) or
 * use fewer WHAT" (what: "connections", "VUs"). */
SQ_MUST_CHECK int sq_net_raise_nofile(uint64_t n, const char *what, char *err, size_t len);

#endif
