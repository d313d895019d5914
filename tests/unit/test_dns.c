/* test_dns.c - net/dns.c: the --resolve and --connect-to arguments (checked when the flag is
 * parsed, table-driven) and the lookup that applies them: connect-to rewrites the name and port,
 * a matching resolve entry answers without asking the resolver, anything else goes to
 * getaddrinfo. Names under .invalid (RFC 6761) prove that no system lookup happened: they never
 * resolve. The lookup keeps no state, so a --dns-ttl re-resolution is the same call made again
 * and sees what the overrides say then (test_again_sees_fresh_answers).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "net/dns.h"

struct arg_case {
    const char *arg;
    int connect_to;
    int ok;
    const char *why; /* a phrase the refusal must contain */
};

static const struct arg_case arg_cases[] = {
    /* --resolve HOST:PORT:ADDR[,ADDR...] */
    {"h:80:127.0.0.1", 0, 1, NULL},
    {"H.example:443:10.0.0.1,10.0.0.2", 0, 1, NULL},
    {"h:65535:[::1]", 0, 1, NULL},
    {"h:1:[::1],127.0.0.1,[2001:db8::2]", 0, 1, NULL},
    {"[::1]:80:127.0.0.1", 0, 1, NULL},
    {"h:80:1.1.1.1,1.1.1.2,1.1.1.3,1.1.1.4,1.1.1.5,1.1.1.6,1.1.1.7,1.1.1.8,1.1.1.9,1.1.1.10,"
     "1.1.1.11,1.1.1.12,1.1.1.13,1.1.1.14,1.1.1.15,1.1.1.16",
     0, 1, NULL},
    {"h:80:1.1.1.1,1.1.1.2,1.1.1.3,1.1.1.4,1.1.1.5,1.1.1.6,1.1.1.7,1.1.1.8,1.1.1.9,1.1.1.10,"
     "1.1.1.11,1.1.1.12,1.1.1.13,1.1.1.14,1.1.1.15,1.1.1.16,1.1.1.17",
     0, 0, "at most 16"},
    {"nope", 0, 0, "is not HOST:PORT:ADDR"},
    {"", 0, 0, "is not HOST:PORT:ADDR"},
    {"h:80", 0, 0, "is not HOST:PORT:ADDR"},
    {":80:127.0.0.1", 0, 0, "is not HOST:PORT:ADDR"},
    {"h:80:127.0.0.1:9", 0, 0, "is not HOST:PORT:ADDR"},
    {"h:80:::1", 0, 0, "is not HOST:PORT:ADDR"},
    {"h:0:127.0.0.1", 0, 0, "port must be 1-65535"},
    {"h:65536:127.0.0.1", 0, 0, "port must be 1-65535"},
    {"h::127.0.0.1", 0, 0, "port must be 1-65535"},
    {"h:8o:127.0.0.1", 0, 0, "port must be 1-65535"},
    {"h:-1:127.0.0.1", 0, 0, "port must be 1-65535"},
    {"h:80:", 0, 0, "numeric"},
    {"h:80:example.com", 0, 0, "numeric"},
    {"h:80:127.0.0.1,", 0, 0, "numeric"},
    {"h:80:,127.0.0.1", 0, 0, "numeric"},
    {"h:80:256.0.0.1", 0, 0, "numeric"},
    {"h:80:[::1", 0, 0, "numeric"},
    {"h:80:[127.0.0.1]", 0, 0, "numeric"},
    {"h:80:[]", 0, 0, "numeric"},
    /* --connect-to HOST:PORT:HOST2:PORT2 (any field may be empty) */
    {"h:80:g:8080", 1, 1, NULL},
    {"::g:", 1, 1, NULL},
    {":::", 1, 1, NULL},
    {"[::1]:80:[::2]:81", 1, 1, NULL},
    {"h:443:127.0.0.1:", 1, 1, NULL},
    {"h:80:g", 1, 0, "is not HOST:PORT:HOST2:PORT2"},
    {"h:80:g:1:2", 1, 0, "is not HOST:PORT:HOST2:PORT2"},
    {"", 1, 0, "is not HOST:PORT:HOST2:PORT2"},
    {"h:80:g:0", 1, 0, "port must be 1-65535"},
    {"h:99999:g:1", 1, 0, "port must be 1-65535"},
    {"h:x:g:1", 1, 0, "port must be 1-65535"},
};

static void test_check_arg_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(arg_cases) / sizeof(arg_cases[0]); i++) {
        const struct arg_case *c = &arg_cases[i];
        char why[300] = "";
        int rc = sq_dns_check_arg(c->arg, c->connect_to, why, sizeof(why));
        if (c->ok) {
            if (rc != 0)
                fail_msg("case %zu '%s': refused: %s", i, c->arg, why);
            continue;
        }
        if (rc != -SQ_EUSAGE)
            fail_msg("case %zu '%s': accepted (rc %d)", i, c->arg, rc);
        if (!strstr(why, c->why))
            fail_msg("case %zu '%s': message '%s' lacks '%s'", i, c->arg, why, c->why);
        /* Every refusal quotes the argument, so the user sees which one. */
        char quoted[300];
        snprintf(quoted, sizeof(quoted), "'%s'", c->arg);
        if (!strstr(why, quoted))
            fail_msg("case %zu: message '%s' does not quote the argument", i, why);
    }
}

static void test_check_arg_truncates_message(void **state)
{
    (void)state;
    char why[16];
    memset(why, 'x', sizeof(why));
    assert_int_equal(sq_dns_check_arg("a-rather-long-bad-argument", 0, why, 10), -SQ_EUSAGE);
    assert_int_equal(strlen(why), 9);
    assert_int_equal(why[10], 'x');
}

/* Runs a lookup and formats every address as "a b c". */
static int lookup(const char *const *resolve, size_t nr, const char *const *connect_to, size_t nc,
                  const char *host, uint16_t port, int max, char *out, size_t outlen, char *why)
{
    struct sq_dns_opts o = {
        .resolve = resolve, .nresolve = nr, .connect_to = connect_to, .nconnect_to = nc};
    struct sq_addr addrs[16];
    why[0] = '\0';
    int n = sq_dns_lookup(&o, host, port, addrs, max, why, 300);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        char a[80];
        sq_addr_format(&addrs[i], a, sizeof(a));
        size_t l = strlen(out);
        snprintf(out + l, outlen - l, "%s%s", i ? " " : "", a);
    }
    return n;
}

static void test_resolve_override(void **state)
{
    (void)state;
    char got[400], why[300];
    const char *r[] = {"other.invalid:80:10.9.9.9", "api.invalid:8080:127.0.0.2,[::1]",
                       "api.invalid:80:127.0.0.3"};
    /* The entry for this host and port answers, every address in order, with the port. */
    assert_int_equal(lookup(r, 3, NULL, 0, "api.invalid", 8080, 16, got, sizeof(got), why), 2);
    assert_string_equal(got, "127.0.0.2:8080 [::1]:8080");
    assert_int_equal(lookup(r, 3, NULL, 0, "api.invalid", 80, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.3:80");
    /* Names compare case-insensitively, as DNS does. */
    assert_int_equal(lookup(r, 3, NULL, 0, "API.Invalid", 80, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.3:80");
    /* Another port of the same name is not covered: the resolver is asked, and fails. */
    assert_int_equal(lookup(r, 3, NULL, 0, "api.invalid", 443, 16, got, sizeof(got), why),
                     -SQ_ERESOLVE);
    assert_non_null(strstr(why, "cannot resolve 'api.invalid'"));
    /* The first matching entry wins. */
    const char *dup[] = {"h.invalid:80:127.0.0.5", "h.invalid:80:127.0.0.6"};
    assert_int_equal(lookup(dup, 2, NULL, 0, "h.invalid", 80, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.5:80");
    /* An IPv6 name is matched with or without its brackets. */
    const char *v6[] = {"[::1]:80:127.0.0.7"};
    assert_int_equal(lookup(v6, 1, NULL, 0, "::1", 80, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.7:80");
}

static void test_resolve_keeps_at_most_max(void **state)
{
    (void)state;
    char got[400], why[300];
    const char *r[] = {"many.invalid:80:127.0.0.1,127.0.0.2,127.0.0.3"};
    /* More addresses than the caller has room for: the first max, not a system lookup. */
    assert_int_equal(lookup(r, 1, NULL, 0, "many.invalid", 80, 2, got, sizeof(got), why), 2);
    assert_string_equal(got, "127.0.0.1:80 127.0.0.2:80");
}

static void test_connect_to(void **state)
{
    (void)state;
    char got[400], why[300];
    /* HOST2 numeric: goes to the system resolver, which answers numbers without asking. */
    const char *c1[] = {"api.invalid:80:127.0.0.1:9090"};
    assert_int_equal(lookup(NULL, 0, c1, 1, "api.invalid", 80, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.1:9090");
    /* Not this port: the rule does not apply. */
    assert_int_equal(lookup(NULL, 0, c1, 1, "api.invalid", 81, 16, got, sizeof(got), why),
                     -SQ_ERESOLVE);
    assert_non_null(strstr(why, "'api.invalid'"));
    /* Empty HOST and PORT match anything; an empty PORT2 keeps the port. */
    const char *c2[] = {"::127.0.0.1:"};
    assert_int_equal(lookup(NULL, 0, c2, 1, "whatever.invalid", 7, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.1:7");
    /* An empty HOST2 keeps the name and changes only the port. */
    const char *c3[] = {"127.0.0.1:80::8081"};
    assert_int_equal(lookup(NULL, 0, c3, 1, "127.0.0.1", 80, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.1:8081");
    /* The first matching rule wins; a later one is not applied on top. */
    const char *c4[] = {"a.invalid:80:127.0.0.1:1001", "a.invalid:80:127.0.0.2:1002",
                        "127.0.0.1:1001:127.0.0.3:1003"};
    assert_int_equal(lookup(NULL, 0, c4, 3, "a.invalid", 80, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.1:1001");
    /* A bracketed IPv6 HOST2 loses its brackets before the lookup. */
    const char *c5[] = {"v6.invalid:443:[::1]:8443"};
    assert_int_equal(lookup(NULL, 0, c5, 1, "v6.invalid", 443, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "[::1]:8443");
    /* A failed lookup names the name it tried: the rewritten one. */
    const char *c6[] = {"a.invalid::b.invalid:"};
    assert_int_equal(lookup(NULL, 0, c6, 1, "a.invalid", 80, 16, got, sizeof(got), why),
                     -SQ_ERESOLVE);
    assert_non_null(strstr(why, "cannot resolve 'b.invalid'"));
}

static void test_connect_to_then_resolve(void **state)
{
    (void)state;
    char got[400], why[300];
    /* --connect-to rewrites first; --resolve then answers for the rewritten name and port. */
    const char *c[] = {"api.invalid:443:backend.invalid:8443"};
    const char *r[] = {"api.invalid:443:10.0.0.1", "backend.invalid:8443:127.0.0.9"};
    assert_int_equal(lookup(r, 2, c, 1, "api.invalid", 443, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.9:8443");
    /* Without a rule for the request's name, its own --resolve entry is used. */
    assert_int_equal(lookup(r, 2, NULL, 0, "api.invalid", 443, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "10.0.0.1:443");
}

static void test_unparseable_rules_are_skipped(void **state)
{
    (void)state;
    char got[400], why[300];
    /* Arguments are checked when the flag is parsed; a lookup given bad ones skips them. */
    const char *r[] = {"bad", "h.invalid:0:127.0.0.1", "h.invalid:80:nonsense",
                       "h.invalid:80:127.0.0.4"};
    const char *c[] = {"x", "h.invalid:80:g.invalid"};
    assert_int_equal(lookup(r, 4, c, 2, "h.invalid", 80, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.4:80");
}

static void test_no_options(void **state)
{
    (void)state;
    char why[300];
    struct sq_addr a[4];
    /* NULL options: the system resolver alone. */
    assert_int_equal(sq_dns_lookup(NULL, "127.0.0.1", 80, a, 4, why, sizeof(why)), 1);
    assert_int_equal(sq_dns_lookup(NULL, "squall.invalid", 80, a, 4, why, sizeof(why)),
                     -SQ_ERESOLVE);
    assert_non_null(strstr(why, "cannot resolve 'squall.invalid'"));
}

static void test_again_sees_fresh_answers(void **state)
{
    (void)state;
    /* --dns-ttl: the engine calls the same lookup again every TTL (engine/run.c); nothing is
     * cached here, so each call answers from the options as they are at that moment. */
    char got[400], why[300];
    const char *r[] = {"svc.invalid:80:127.0.0.1"};
    assert_int_equal(lookup(r, 1, NULL, 0, "svc.invalid", 80, 16, got, sizeof(got), why), 1);
    assert_string_equal(got, "127.0.0.1:80");
    r[0] = "svc.invalid:80:127.0.0.2,127.0.0.3";
    assert_int_equal(lookup(r, 1, NULL, 0, "svc.invalid", 80, 16, got, sizeof(got), why), 2);
    assert_string_equal(got, "127.0.0.2:80 127.0.0.3:80");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_arg_table),
        cmocka_unit_test(test_check_arg_truncates_message),
        cmocka_unit_test(test_resolve_override),
        cmocka_unit_test(test_resolve_keeps_at_most_max),
        cmocka_unit_test(test_connect_to),
        cmocka_unit_test(test_connect_to_then_resolve),
        cmocka_unit_test(test_unparseable_rules_are_skipped),
        cmocka_unit_test(test_no_options),
        cmocka_unit_test(test_again_sees_fresh_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
