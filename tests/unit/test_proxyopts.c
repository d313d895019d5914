/* test_proxyopts.c - face/netopts.c's proxy and Unix socket set-up: the proxy URL parser, the
 * environment's proxy (HTTP_PROXY / HTTPS_PROXY / NO_PROXY, Go's and k6's rules), the CONNECT a
 * tunnel sends, and the egress policy with a proxy: the proxy's address AND the destination must
 * pass it (a plan cannot reach a forbidden host through a proxy), and a policy never lets a run
 * connect to a Unix socket. Only numeric addresses are looked up; nothing connects.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "face/netopts.h"
#include "http/url.h"
#include "net/egress.h"

static void test_parse(void **state)
{
    (void)state;
    char host[256], cred[256], err[300];
    uint16_t port = 0;
    assert_int_equal(sq_proxy_parse("http://u:p%40ss@127.0.0.1:3128", host, sizeof(host), &port,
                                    cred, sizeof(cred), err, sizeof(err)),
                     0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 3128);
    assert_string_equal(cred, "u:p@ss");
    assert_int_equal(sq_proxy_parse("proxy.example:8080/", host, sizeof(host), &port, cred,
                                    sizeof(cred), err, sizeof(err)),
                     0);
    assert_string_equal(host, "proxy.example");
    assert_string_equal(cred, "");
    assert_int_equal(sq_proxy_parse("http://[::1]", host, sizeof(host), &port, cred, sizeof(cred),
                                    err, sizeof(err)),
                     0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 1080);
    assert_int_equal(sq_proxy_parse("socks5://h:1", host, sizeof(host), &port, cred, sizeof(cred),
                                    err, sizeof(err)),
                     -SQ_EUSAGE);
    assert_non_null(strstr(err, "'socks5' proxies are not supported"));
    assert_int_equal(sq_proxy_parse("http://h:0", host, sizeof(host), &port, cred, sizeof(cred),
                                    err, sizeof(err)),
                     -SQ_EUSAGE);
    assert_int_equal(sq_proxy_parse("http://h:1/path", host, sizeof(host), &port, cred,
                                    sizeof(cred), err, sizeof(err)),
                     -SQ_EUSAGE);
    assert_int_equal(sq_proxy_parse("http://:1", host, sizeof(host), &port, cred, sizeof(cred), err,
                                    sizeof(err)),
                     -SQ_EUSAGE);
}

static void clear_env(void)
{
    const char *names[] = {"HTTP_PROXY",  "http_proxy", "HTTPS_PROXY",
                           "https_proxy", "NO_PROXY",   "no_proxy"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unsetenv(names[i]);
}

static void test_env(void **state)
{
    (void)state;
    const char *from = NULL;
    clear_env();
    assert_null(sq_proxy_from_env("http", "api.example", 80, &from));
    setenv("http_proxy", "http://lower:1", 1);
    assert_string_equal(sq_proxy_from_env("http", "api.example", 80, &from), "http://lower:1");
    assert_string_equal(from, "http_proxy");
    setenv("HTTP_PROXY", "http://upper:1", 1); /* Go and k6: the uppercase name first */
    assert_string_equal(sq_proxy_from_env("ws", "api.example", 80, &from), "http://upper:1");
    assert_string_equal(from, "HTTP_PROXY");
    assert_null(sq_proxy_from_env("https", "api.example", 443, &from)); /* HTTPS_PROXY's */
    setenv("https_proxy", "http://tls:1", 1);
    assert_string_equal(sq_proxy_from_env("wss", "api.example", 443, &from), "http://tls:1");
    /* loopback is never proxied from the environment */
    assert_null(sq_proxy_from_env("http", "localhost", 80, &from));
    assert_null(sq_proxy_from_env("http", "127.0.0.9", 80, &from));
    assert_null(sq_proxy_from_env("http", "::1", 80, &from));
    assert_null(sq_proxy_from_env("http", "a.localhost", 80, &from));
    /* NO_PROXY: names and their subdomains, ".domain" (subdomains only), ports, "*" */
    setenv("NO_PROXY", " other.example , example.org,.sub.example,10.1.2.3, api.example:8080", 1);
    assert_null(sq_proxy_from_env("http", "example.org", 80, &from));
    assert_null(sq_proxy_from_env("http", "www.EXAMPLE.org", 80, &from));
    assert_non_null(sq_proxy_from_env("http", "badexample.org", 80, &from));
    assert_non_null(sq_proxy_from_env("http", "sub.example", 80, &from));
    assert_null(sq_proxy_from_env("http", "a.sub.example", 80, &from));
    assert_null(sq_proxy_from_env("http", "10.1.2.3", 80, &from));
    assert_null(sq_proxy_from_env("http", "api.example", 8080, &from));
    assert_non_null(sq_proxy_from_env("http", "api.example", 80, &from));
    setenv("NO_PROXY", "*", 1);
    assert_null(sq_proxy_from_env("http", "api.example", 80, &from));
    unsetenv("NO_PROXY");
    setenv("no_proxy", "api.example", 1);
    assert_null(sq_proxy_from_env("http", "api.example", 80, &from));
    clear_env();
}

static void url(struct sq_url *u, const char *scheme, const char *host, uint16_t port)
{
    memset(u, 0, sizeof(*u));
    snprintf(u->scheme, sizeof(u->scheme), "%s", scheme);
    snprintf(u->host, sizeof(u->host), "%s", host);
    u->port = port;
    snprintf(u->authority, sizeof(u->authority), "%s:%u", host, (unsigned)port);
    u->path = (char *)"/";
}

static int setup(const struct sq_netopts *n, const struct sq_url *u, struct sq_run_config *cfg,
                 struct sq_net *s, char *err, size_t len)
{
    memset(cfg, 0, sizeof(*cfg));
    err[0] = '\0';
    return sq_net_setup(s, n, u, NULL, cfg, err, len);
}

static void test_tunnel(void **state)
{
    (void)state;
    struct sq_run_config *cfg = calloc(1, sizeof(*cfg));
    struct sq_net s;
    struct sq_url u;
    char err[600];
    struct sq_netopts n = {.proxy = "http://user:secret@127.0.0.7:3128", .tls = {.insecure = true}};
    url(&u, "https", "10.1.2.3", 8443);
    assert_int_equal(setup(&n, &u, cfg, &s, err, sizeof(err)), 0);
    assert_int_equal(cfg->naddrs, 1);
    assert_string_equal(s.addr, "127.0.0.7:3128"); /* the connections go to the proxy */
    assert_string_equal(s.proxy_shown, "http://127.0.0.7:3128");
    assert_null(strstr(s.proxy_shown, "secret"));
    assert_string_equal(s.proxy_mode, "connect");
    assert_true(s.proxy_has_auth);
    assert_non_null(cfg->proxy_connect);
    assert_string_equal(cfg->proxy_connect,
                        "CONNECT 10.1.2.3:8443 HTTP/1.1\r\nHost: 10.1.2.3:8443\r\n"
                        "Proxy-Authorization: Basic dXNlcjpzZWNyZXQ=\r\n\r\n");
    assert_int_equal(cfg->proxy_connect_len, strlen(cfg->proxy_connect));
    sq_net_dispose(&s);

    /* --dns-ttl through a proxy looks the proxy up again, not the destination */
    n.dns_ttl_ns = 1000000000;
    assert_int_equal(setup(&n, &u, cfg, &s, err, sizeof(err)), 0);
    assert_non_null(cfg->resolve);
    struct sq_addr again[4];
    assert_int_equal(cfg->resolve(cfg->resolve_ud, again, 4), 1);
    char text[80];
    sq_addr_format(&again[0], text, sizeof(text));
    assert_string_equal(text, "127.0.0.7:3128");
    sq_net_dispose(&s);
    n.dns_ttl_ns = 0;

    /* plain http: absolute-form when the face does it, else a tunnel too */
    n.proxy_absolute = true;
    url(&u, "http", "10.1.2.3", 80);
    assert_int_equal(setup(&n, &u, cfg, &s, err, sizeof(err)), 0);
    assert_string_equal(s.proxy_mode, "absolute-form");
    assert_null(cfg->proxy_connect);
    sq_net_dispose(&s);
    char target[320], *auth = NULL;
    assert_int_equal(sq_net_proxy_form(&n, &u, target, sizeof(target), &auth, err, sizeof(err)), 0);
    assert_string_equal(target, "http://10.1.2.3:80");
    assert_string_equal(auth, "Basic dXNlcjpzZWNyZXQ=");
    free(auth);

    /* "" turns the environment's proxy off; without proxy_env it is never read */
    setenv("HTTP_PROXY", "http://127.0.0.8:1", 1);
    struct sq_netopts none = {0};
    assert_int_equal(setup(&none, &u, cfg, &s, err, sizeof(err)), 0);
    assert_string_equal(s.addr, "10.1.2.3:80");
    sq_net_dispose(&s);
    none.proxy_env = true;
    assert_int_equal(setup(&none, &u, cfg, &s, err, sizeof(err)), 0);
    assert_string_equal(s.addr, "127.0.0.8:1");
    assert_string_equal(s.proxy_from, "HTTP_PROXY");
    sq_net_dispose(&s);
    none.proxy = "";
    assert_int_equal(setup(&none, &u, cfg, &s, err, sizeof(err)), 0);
    assert_string_equal(s.addr, "10.1.2.3:80");
    sq_net_dispose(&s);
    unsetenv("HTTP_PROXY");
    free(cfg);
}

static void test_egress(void **state)
{
    (void)state;
    struct sq_egress_opts eo = {.style = SQ_EGRESS_MCP};
    struct sq_egress *e = NULL;
    assert_int_equal(sq_egress_new(&eo, &e), 0);
    struct sq_run_config *cfg = calloc(1, sizeof(*cfg));
    struct sq_net s;
    struct sq_url u;
    char err[600];
    /* a loopback proxy does not carry a run to a forbidden destination */
    struct sq_netopts n = {.proxy = "http://127.0.0.1:3128", .egress = e};
    url(&u, "http", "10.1.2.3", 80);
    assert_int_equal(setup(&n, &u, cfg, &s, err, sizeof(err)), -EACCES);
    assert_non_null(
        strstr(err, "the target (through the proxy): '10.1.2.3' connects to 10.1.2.3:80"));
    sq_net_dispose(&s);
    /* nor may the proxy itself be somewhere the policy forbids */
    n.proxy = "http://10.9.9.9:3128";
    url(&u, "http", "127.0.0.1", 80);
    assert_int_equal(setup(&n, &u, cfg, &s, err, sizeof(err)), -EACCES);
    assert_non_null(strstr(err, "the proxy: '10.9.9.9' connects to 10.9.9.9:3128"));
    sq_net_dispose(&s);
    /* both allowed: the run goes to the proxy */
    n.proxy = "http://127.0.0.1:3128";
    assert_int_equal(setup(&n, &u, cfg, &s, err, sizeof(err)), 0);
    assert_string_equal(s.addr, "127.0.0.1:3128");
    sq_net_dispose(&s);
    /* a Unix socket: never under a policy, allowed without one */
    struct sq_netopts un = {.unix_socket = "/run/some.sock", .egress = e};
    assert_int_equal(setup(&un, &u, cfg, &s, err, sizeof(err)), -EACCES);
    assert_non_null(strstr(err, "may not connect to a Unix socket"));
    sq_net_dispose(&s);
    un.egress = NULL;
    assert_int_equal(setup(&un, &u, cfg, &s, err, sizeof(err)), 0);
    assert_string_equal(s.addr, "unix:/run/some.sock");
    assert_int_equal(cfg->addrs[0].ss.ss_family, AF_UNIX);
    assert_int_equal(sq_egress_allows(e, &cfg->addrs[0], SQ_EGRESS_CONNECT), -EACCES);
    sq_net_dispose(&s);
    free(cfg);
    sq_egress_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_tunnel),
        cmocka_unit_test(test_egress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
