/* test_egress.c - net/egress.c: the policy that decides whether a run may touch an address.
 *
 * Each rule in turn, through the calls the run's paths make: sq_egress_lookup (set-up: the name
 * before the resolver, then every address, --connect-to and --resolve included) and
 * sq_egress_allows (connect() and bind()). Names under .invalid (RFC 6761) never resolve, so a
 * refusal that names the rule rather than "cannot resolve" proves the resolver was not asked.
 * Only numeric addresses and "localhost" are looked up; nothing connects.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "net/egress.h"

static struct sq_addr addr(const char *ip, uint16_t port)
{
    struct sq_addr a;
    memset(&a, 0, sizeof(a));
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a.ss;
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(port);
        assert_int_equal(inet_pton(AF_INET6, ip, &s->sin6_addr), 1);
        a.len = sizeof(*s);
    } else {
        struct sockaddr_in *s = (struct sockaddr_in *)&a.ss;
        s->sin_family = AF_INET;
        s->sin_port = htons(port);
        assert_int_equal(inet_pton(AF_INET, ip, &s->sin_addr), 1);
        a.len = sizeof(*s);
    }
    return a;
}

static struct sq_egress *policy(enum sq_egress_style style, const char *const *hosts, size_t n)
{
    struct sq_egress_opts o = {.style = style, .hosts = hosts, .nhosts = n};
    struct sq_egress *e = NULL;
    assert_int_equal(sq_egress_new(&o, &e), 0);
    assert_non_null(e);
    return e;
}

/* lookup's result; its message in why */
static int look(const struct sq_egress *e, const struct sq_dns_opts *o, const char *host,
                enum sq_egress_kind kind, char *why, size_t len)
{
    struct sq_addr out[16];
    why[0] = '\0';
    return sq_egress_lookup(e, o, "the target", host, 8080, kind, out, 16, why, len);
}

static int allows(const struct sq_egress *e, const char *ip, enum sq_egress_kind kind)
{
    struct sq_addr a = addr(ip, 80);
    return sq_egress_allows(e, &a, kind);
}

static void test_no_policy_is_anything(void **state)
{
    (void)state;
    char why[512];
    assert_int_equal(look(NULL, NULL, "10.1.2.3", SQ_EGRESS_CONNECT, why, sizeof(why)), 1);
    assert_int_equal(look(NULL, NULL, "0.0.0.0", SQ_EGRESS_LISTEN, why, sizeof(why)), 1);
    assert_int_equal(allows(NULL, "10.1.2.3", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(allows(NULL, "0.0.0.0", SQ_EGRESS_LISTEN), 0);
    /* without a policy the lookup is sq_dns_lookup's, message included */
    assert_int_equal(look(NULL, NULL, "nowhere.invalid", SQ_EGRESS_CONNECT, why, sizeof(why)),
                     -SQ_ERESOLVE);
    assert_non_null(strstr(why, "cannot resolve 'nowhere.invalid'"));
}

/* The daemon with an empty allow_hosts: connects anywhere, listens on loopback only. */
static void test_daemon_open(void **state)
{
    (void)state;
    char why[512];
    struct sq_egress *e = policy(SQ_EGRESS_DAEMON, NULL, 0);
    assert_int_equal(look(e, NULL, "10.1.2.3", SQ_EGRESS_CONNECT, why, sizeof(why)), 1);
    assert_int_equal(allows(e, "10.1.2.3", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(allows(e, "2001:db8::1", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(look(e, NULL, "127.0.0.1", SQ_EGRESS_LISTEN, why, sizeof(why)), 1);
    assert_int_equal(look(e, NULL, "::1", SQ_EGRESS_LISTEN, why, sizeof(why)), 1);
    assert_true(look(e, NULL, "localhost", SQ_EGRESS_LISTEN, why, sizeof(why)) > 0);
    assert_int_equal(look(e, NULL, "0.0.0.0", SQ_EGRESS_LISTEN, why, sizeof(why)), -EACCES);
    assert_string_equal(why, "allow_hosts: the target: would listen on 0.0.0.0:8080; a run of "
                             "this daemon listens only on loopback or on an address allow_hosts "
                             "names []");
    assert_int_equal(allows(e, "0.0.0.0", SQ_EGRESS_LISTEN), -EACCES);
    assert_int_equal(allows(e, "::", SQ_EGRESS_LISTEN), -EACCES);
    assert_int_equal(allows(e, "127.0.0.1", SQ_EGRESS_LISTEN), 0);
    /* a listener's name is not looked up unless it is localhost or listed */
    assert_int_equal(look(e, NULL, "box.invalid", SQ_EGRESS_LISTEN, why, sizeof(why)), -EACCES);
    assert_non_null(strstr(why, "would listen on 'box.invalid'"));
    sq_egress_free(e);
}

/* allow_hosts ["127.0.0.1"]: the address actually connected to is what counts. */
static void test_daemon_list_overrides(void **state)
{
    (void)state;
    char why[512];
    const char *hosts[] = {"127.0.0.1"};
    struct sq_egress *e = policy(SQ_EGRESS_DAEMON, hosts, 1);
    assert_int_equal(look(e, NULL, "127.0.0.1", SQ_EGRESS_CONNECT, why, sizeof(why)), 1);

    const char *ct[] = {"127.0.0.1:8080:10.1.2.3:80"};
    struct sq_dns_opts o = {.connect_to = ct, .nconnect_to = 1};
    assert_int_equal(look(e, &o, "127.0.0.1", SQ_EGRESS_CONNECT, why, sizeof(why)), -EACCES);
    assert_string_equal(why, "allow_hosts: the target: '127.0.0.1' connects to 10.1.2.3:80 "
                             "(after connect-to), and 10.1.2.3 is not in allow_hosts "
                             "[127.0.0.1]");

    const char *rs[] = {"127.0.0.1:8080:127.0.0.1,10.1.2.3"};
    o = (struct sq_dns_opts){.resolve = rs, .nresolve = 1};
    assert_int_equal(look(e, &o, "127.0.0.1", SQ_EGRESS_CONNECT, why, sizeof(why)), -EACCES);
    assert_non_null(strstr(why, "connects to 10.1.2.3:8080 (from resolve), and 10.1.2.3 is not "
                                "in allow_hosts [127.0.0.1]"));
    /* a name off the list, even one a --resolve sends to 127.0.0.1, is not resolved, and a
     * --resolve of a name to a listed address is fine: the address counts */
    assert_int_equal(look(e, NULL, "evil.invalid", SQ_EGRESS_CONNECT, why, sizeof(why)), -EACCES);
    assert_string_equal(
        why, "allow_hosts: the target: 'evil.invalid' is not in allow_hosts [127.0.0.1]");
    const char *rs2[] = {"evil.invalid:8080:127.0.0.1"};
    o = (struct sq_dns_opts){.resolve = rs2, .nresolve = 1};
    assert_int_equal(look(e, &o, "evil.invalid", SQ_EGRESS_CONNECT, why, sizeof(why)), 1);
    /* "localhost" is a name like any: off the list */
    assert_int_equal(look(e, NULL, "localhost", SQ_EGRESS_CONNECT, why, sizeof(why)), -EACCES);

    assert_int_equal(allows(e, "127.0.0.1", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(allows(e, "::ffff:127.0.0.1", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(allows(e, "127.0.0.2", SQ_EGRESS_CONNECT), -EACCES); /* not loopback-wide */
    assert_int_equal(allows(e, "10.1.2.3", SQ_EGRESS_CONNECT), -EACCES);
    assert_int_equal(allows(e, "::ffff:10.1.2.3", SQ_EGRESS_CONNECT), -EACCES);
    assert_int_equal(allows(e, "::1", SQ_EGRESS_CONNECT), -EACCES);
    sq_egress_free(e);
}

/* A listed name: what the resolver finds for it is let through, and remembered for connect(). */
static void test_daemon_listed_name(void **state)
{
    (void)state;
    char why[512];
    const char *hosts[] = {"LocalHost", "10.9.9.9", "[2001:db8::7]"};
    struct sq_egress *e = policy(SQ_EGRESS_DAEMON, hosts, 3);
    /* before anything was resolved, loopback is nothing to a daemon's list */
    assert_int_equal(allows(e, "127.0.0.1", SQ_EGRESS_CONNECT), -EACCES);
    assert_true(look(e, NULL, "localhost", SQ_EGRESS_CONNECT, why, sizeof(why)) > 0);
    assert_int_equal(allows(e, "127.0.0.1", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(allows(e, "127.0.0.2", SQ_EGRESS_CONNECT), -EACCES);
    assert_int_equal(allows(e, "10.9.9.9", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(allows(e, "2001:db8::7", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(allows(e, "10.9.9.9", SQ_EGRESS_LISTEN), 0); /* listed: may listen there */
    /* --connect-to to a listed name: its resolved addresses count as that name's */
    const char *ct[] = {"x.invalid::localhost:"};
    struct sq_dns_opts o = {.connect_to = ct, .nconnect_to = 1};
    assert_true(look(e, &o, "x.invalid", SQ_EGRESS_CONNECT, why, sizeof(why)) > 0);
    /* a --resolve of a listed name gives addresses, not the name's: they must be listed */
    const char *rs[] = {"localhost:8080:10.1.2.3"};
    o = (struct sq_dns_opts){.resolve = rs, .nresolve = 1};
    assert_int_equal(look(e, &o, "localhost", SQ_EGRESS_CONNECT, why, sizeof(why)), -EACCES);
    assert_non_null(strstr(why, "10.1.2.3 is not in allow_hosts [LocalHost, 10.9.9.9, "
                                "2001:db8::7]"));
    /* a listed name that does not resolve: asked, and it says so */
    const char *h2[] = {"gone.invalid"};
    struct sq_egress *e2 = policy(SQ_EGRESS_DAEMON, h2, 1);
    assert_int_equal(look(e2, NULL, "gone.invalid", SQ_EGRESS_CONNECT, why, sizeof(why)),
                     -SQ_ERESOLVE);
    assert_non_null(strstr(why, "cannot resolve 'gone.invalid'"));
    sq_egress_free(e2);
    sq_egress_free(e);
}

/* The MCP cap: loopback, and what the operator allowed. */
static void test_mcp(void **state)
{
    (void)state;
    char why[512];
    struct sq_egress *e = policy(SQ_EGRESS_MCP, NULL, 0);
    assert_int_equal(look(e, NULL, "127.0.0.5", SQ_EGRESS_CONNECT, why, sizeof(why)), 1);
    assert_int_equal(look(e, NULL, "::1", SQ_EGRESS_CONNECT, why, sizeof(why)), 1);
    assert_true(look(e, NULL, "localhost", SQ_EGRESS_CONNECT, why, sizeof(why)) > 0);
    assert_int_equal(look(e, NULL, "10.1.2.3", SQ_EGRESS_CONNECT, why, sizeof(why)), -EACCES);
    assert_string_equal(why, "cap: targets only on loopback: the target: '10.1.2.3' connects to "
                             "10.1.2.3:8080; MCP runs may only reach loopback unless the operator "
                             "allows a host (squall mcp --allow-host HOST)");
    assert_int_equal(look(e, NULL, "example.invalid", SQ_EGRESS_CONNECT, why, sizeof(why)),
                     -EACCES);
    assert_string_equal(why, "cap: targets only on loopback: the target: host 'example.invalid' "
                             "is not 127.0.0.1, ::1 or localhost; MCP runs may only reach loopback "
                             "unless the operator allows a host (squall mcp --allow-host HOST)");
    const char *ct[] = {":8080:10.1.2.3:4222"};
    struct sq_dns_opts o = {.connect_to = ct, .nconnect_to = 1};
    assert_int_equal(look(e, &o, "localhost", SQ_EGRESS_CONNECT, why, sizeof(why)), -EACCES);
    assert_non_null(strstr(why, "'localhost' connects to 10.1.2.3:4222 (after connect-to)"));
    assert_int_equal(look(e, NULL, "0.0.0.0", SQ_EGRESS_LISTEN, why, sizeof(why)), -EACCES);
    assert_string_equal(why, "cap: targets only on loopback: the target: would listen on "
                             "0.0.0.0:8080; MCP runs may only listen on loopback");
    assert_int_equal(look(e, NULL, "127.0.0.1", SQ_EGRESS_LISTEN, why, sizeof(why)), 1);
    assert_int_equal(allows(e, "127.255.0.1", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(allows(e, "::ffff:127.0.0.1", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(allows(e, "::ffff:10.1.2.3", SQ_EGRESS_CONNECT), -EACCES);
    assert_int_equal(allows(e, "0.0.0.0", SQ_EGRESS_CONNECT), -EACCES);
    assert_int_equal(allows(e, "128.0.0.1", SQ_EGRESS_CONNECT), -EACCES);
    assert_int_equal(allows(e, "::2", SQ_EGRESS_CONNECT), -EACCES);
    sq_egress_free(e);

    const char *hosts[] = {"10.1.2.3", "api.invalid"};
    struct sq_egress_opts opts = {
        .style = SQ_EGRESS_MCP, .hosts = hosts, .nhosts = 2, .allow_hint = "allow_hosts"};
    assert_int_equal(sq_egress_new(&opts, &e), 0);
    assert_int_equal(look(e, NULL, "10.1.2.3", SQ_EGRESS_CONNECT, why, sizeof(why)), 1);
    assert_int_equal(allows(e, "10.1.2.3", SQ_EGRESS_CONNECT), 0);
    /* an allowed name is asked for (and does not resolve here) */
    assert_int_equal(look(e, NULL, "API.invalid", SQ_EGRESS_CONNECT, why, sizeof(why)),
                     -SQ_ERESOLVE);
    assert_int_equal(look(e, NULL, "10.1.2.4", SQ_EGRESS_CONNECT, why, sizeof(why)), -EACCES);
    assert_non_null(strstr(why, "unless the operator allows a host (allow_hosts)"));
    sq_egress_free(e);
}

/* The set of addresses let through for a name is bounded; past it the policy refuses. */
static void test_seen_bounded(void **state)
{
    (void)state;
    char why[512];
    const char *hosts[] = {"many.invalid"};
    struct sq_egress *e = policy(SQ_EGRESS_DAEMON, hosts, 1);
    struct sq_addr a[16];
    int refused = -1;
    for (int round = 0; round < 16 && refused < 0; round++) {
        for (int i = 0; i < 16; i++) {
            char ip[32];
            snprintf(ip, sizeof(ip), "10.0.%d.%d", round, i);
            a[i] = addr(ip, 80);
        }
        if (sq_egress_check_addrs(e, "the target", "many.invalid", "many.invalid", "", a, 16,
                                  SQ_EGRESS_CONNECT, why, sizeof(why)) < 0)
            refused = round;
    }
    assert_int_equal(refused, 8); /* 128 remembered */
    assert_non_null(strstr(why, "more addresses than a run may remember"));
    assert_int_equal(allows(e, "10.0.7.15", SQ_EGRESS_CONNECT), 0);
    assert_int_equal(allows(e, "10.0.8.0", SQ_EGRESS_CONNECT), -EACCES);
    /* the same addresses again take no new slot */
    for (int i = 0; i < 16; i++) {
        char ip[32];
        snprintf(ip, sizeof(ip), "10.0.3.%d", i);
        a[i] = addr(ip, 443);
    }
    assert_int_equal(sq_egress_check_addrs(e, "x", "many.invalid", "many.invalid", NULL, a, 16,
                                           SQ_EGRESS_CONNECT, why, sizeof(why)),
                     0);
    sq_egress_free(e);
}

static void test_long_list_is_cut(void **state)
{
    (void)state;
    char why[1024], names[40][40];
    const char *hosts[40];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof(names[i]), "host-number-%02d.example.invalid", i);
        hosts[i] = names[i];
    }
    struct sq_egress *e = policy(SQ_EGRESS_DAEMON, hosts, 40);
    assert_int_equal(look(e, NULL, "other.invalid", SQ_EGRESS_CONNECT, why, sizeof(why)), -EACCES);
    assert_non_null(strstr(why, "[host-number-00.example.invalid, "));
    assert_non_null(strstr(why, ", ...]"));
    sq_egress_free(e);
    sq_egress_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_policy_is_anything),
        cmocka_unit_test(test_daemon_open),
        cmocka_unit_test(test_daemon_list_overrides),
        cmocka_unit_test(test_daemon_listed_name),
        cmocka_unit_test(test_mcp),
        cmocka_unit_test(test_seen_bounded),
        cmocka_unit_test(test_long_list_is_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
