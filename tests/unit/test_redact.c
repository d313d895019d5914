/* tests/unit/test_redact.c - base/redact: credential fields by name, known secrets by value,
 * a secret's start at the end of a cut text, and every truncated prefix of a head (ending at a
 * guard page) keeping no secret. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/redact.h"
#include "guard.h"

static char *red(const char *text, unsigned flags, const char *const *secrets)
{
    struct sq_str s[8];
    size_t n = 0;
    for (; secrets && secrets[n]; n++)
        s[n] = (struct sq_str){secrets[n], strlen(secrets[n])};
    size_t len = 0;
    char *out = sq_redact_dup(text, strlen(text), flags, s, n, &len);
    assert_non_null(out);
    assert_int_equal(strlen(out), len);
    return out;
}

static void check(const char *text, unsigned flags, const char *const *secrets, const char *want)
{
    char *got = red(text, flags, secrets);
    if (strcmp(got, want) != 0)
        fail_msg("redacting\n%s\ngave\n%s\nwanted\n%s", text, got, want);
    free(got);
}

static void test_names(void **state)
{
    (void)state;
    assert_true(sq_redact_header_name("Authorization", 13));
    assert_true(sq_redact_header_name("proxy-AUTHORIZATION", 19));
    assert_true(sq_redact_header_name("cookie", 6));
    assert_true(sq_redact_header_name("Set-Cookie", 10));
    assert_true(sq_redact_header_name("X-API-Key", 9));
    assert_true(sq_redact_header_name("x-auth-token", 12));
    assert_false(sq_redact_header_name("Authorization2", 14));
    assert_false(sq_redact_header_name("Authorizatio", 12));
    assert_false(sq_redact_header_name("Content-Type", 12));
    assert_false(sq_redact_header_name("", 0));
}

static void test_by_name(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer abc.def\r\nAccept: */*\r\n\r\n",
         "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer [redacted]\r\nAccept: */*\r\n\r\n"},
        {"GET / HTTP/1.1\r\nauthorization:Basic   dXNlcjpwYXNz  \r\n\r\n",
         "GET / HTTP/1.1\r\nauthorization:Basic   [redacted]  \r\n\r\n"},
        /* one word: all of it is the secret */
        {"GET / HTTP/1.1\r\nAuthorization: s3cr3t\r\n\r\n",
         "GET / HTTP/1.1\r\nAuthorization: [redacted]\r\n\r\n"},
        {"GET / HTTP/1.1\r\nProxy-Authorization: Digest u=\"x\", r=\"y\"\r\n\r\n",
         "GET / HTTP/1.1\r\nProxy-Authorization: Digest [redacted]\r\n\r\n"},
        {"GET / HTTP/1.1\r\nCookie: sid=1; theme=dark\r\nX-Api-Key: k\r\nX-Auth-Token: t\r\n\r\n",
         "GET / HTTP/1.1\r\nCookie: [redacted]\r\nX-Api-Key: [redacted]\r\nX-Auth-Token: "
         "[redacted]\r\n\r\n"},
        {"HTTP/1.1 200 OK\nSet-Cookie: a=b; Path=/\nSET-COOKIE: c=d\nContent-Length: 0\n\n",
         "HTTP/1.1 200 OK\nSet-Cookie: [redacted]\nSET-COOKIE: [redacted]\nContent-Length: 0\n\n"},
        /* an empty value stays empty; a name with spaces before the colon still matches */
        {"GET / HTTP/1.1\r\nCookie:\r\nCookie : x\r\n\r\n",
         "GET / HTTP/1.1\r\nCookie:\r\nCookie : [redacted]\r\n\r\n"},
        /* an obs-fold line continues the redacted value; one after another field does not */
        {"GET / HTTP/1.1\r\nCookie: a=1;\r\n  b=2\r\nX-A: 1\r\n  2\r\n\r\n",
         "GET / HTTP/1.1\r\nCookie: [redacted]\r\n  [redacted]\r\nX-A: 1\r\n  2\r\n\r\n"},
        /* the body is not a head: a field-like line there is left to the value rule */
        {"POST / HTTP/1.1\r\nContent-Length: 21\r\n\r\nAuthorization: Bearer x",
         "POST / HTTP/1.1\r\nContent-Length: 21\r\n\r\nAuthorization: Bearer x"},
        /* a head cut in a credential field */
        {"GET / HTTP/1.1\r\nAuthorization: Bearer ab", "GET / HTTP/1.1\r\nAuthorization: Bearer "
                                                       "[redacted]"},
        {"GET / HTTP/1.1\r\nAuthorization: Bea", "GET / HTTP/1.1\r\nAuthorization: [redacted]"},
        {"GET / HTTP/1.1", "GET / HTTP/1.1"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check(cases[i].in, SQ_REDACT_HEAD, NULL, cases[i].want);
    /* without SQ_REDACT_HEAD the name rule does not apply */
    check("GET / HTTP/1.1\r\nCookie: a\r\n\r\n", 0, NULL, "GET / HTTP/1.1\r\nCookie: a\r\n\r\n");
}

static void test_by_value(void **state)
{
    (void)state;
    const char *const tok[] = {"tok-123456", NULL};
    check("{\"echo\":\"Bearer tok-123456\",\"again\":\"tok-123456tok-123456\"}", 0, tok,
          "{\"echo\":\"Bearer [redacted]\",\"again\":\"[redacted]\"}");
    /* overlapping secrets redact their union once */
    const char *const two[] = {"abcdef", "defghi", NULL};
    check("xxabcdefghiyy", 0, two, "xx[redacted]yy");
    /* overlapping occurrences of one secret */
    const char *const aaa[] = {"aaaa", NULL};
    check("baaaaaab", 0, aaa, "b[redacted]b");
    /* short and empty secrets are the name rule's */
    const char *const shrt[] = {"abc", "", NULL};
    check("abcabc", 0, shrt, "abcabc");
    /* a cut text: the secret's start at the end goes, four bytes or more */
    const char *const cut[] = {"SECRETVALUE", NULL};
    check("body ... SECRETVA", SQ_REDACT_CUT, cut, "body ... [redacted]");
    check("body ... SECR", SQ_REDACT_CUT, cut, "body ... [redacted]");
    check("body ... SEC", SQ_REDACT_CUT, cut, "body ... SEC");
    check("body ... SECRETVA", 0, cut, "body ... SECRETVA"); /* not cut: a coincidence */
    /* both rules: the head's field by name, the secret in the body by value */
    const char *const both[] = {"Bearer tok-123456", "tok-123456", NULL};
    check("POST /x HTTP/1.1\r\nAuthorization: Bearer tok-123456\r\n\r\n{\"t\":\"tok-123456\"}",
          SQ_REDACT_HEAD, both,
          "POST /x HTTP/1.1\r\nAuthorization: Bearer [redacted]\r\n\r\n{\"t\":\"[redacted]\"}");
    /* in the URL and in another field too */
    check("GET /a?k=tok-123456 HTTP/1.1\r\nX-T: tok-123456\r\n\r\n", SQ_REDACT_HEAD, both,
          "GET /a?k=[redacted] HTTP/1.1\r\nX-T: [redacted]\r\n\r\n");
}

static void url(const char *in, const char *want)
{
    struct sq_buf b = {0};
    assert_int_equal(sq_redact_url(in, strlen(in), &b), 0);
    assert_int_equal(sq_buf_append(&b, "", 1), 0);
    if (strcmp(b.p, want) != 0)
        fail_msg("%s gave %s, wanted %s", in, b.p, want);
    sq_buf_dispose(&b);
}

static void test_urls(void **state)
{
    (void)state;
    url("nats://u:pw@127.0.0.1:4222/subj", "nats://u:[redacted]@127.0.0.1:4222/subj");
    url("mqtt://tok3n@host", "mqtt://[redacted]@host");
    url("nats://u:p@ss@host/x@y", "nats://u:[redacted]@host/x@y");
    url("http://host/a@b?c=d@e", "http://host/a@b?c=d@e");
    url("nats://u:@host", "nats://u:@host");
    url("nats://@host", "nats://@host");
    url("host:4222", "host:4222");
    url("", "");
}

/* Every truncated prefix of a request, ending at a guard page: no read past it, and no four
 * bytes of either secret survive (a cut text). */
static void test_prefixes(void **state)
{
    (void)state;
    static const char req[] = "POST /login?key=K3y-0f-the-app HTTP/1.1\r\n"
                              "Host: 127.0.0.1\r\n"
                              "Authorization: Bearer eyJhbGciOi.payload.sig\r\n"
                              "Cookie: session=0123456789abcdef\r\n"
                              "Content-Length: 40\r\n"
                              "\r\n"
                              "{\"password\":\"K3y-0f-the-app\",\"n\":1}";
    const struct sq_str secrets[] = {{"K3y-0f-the-app", 14}};
    static const char *const never[] = {"K3y-", "eyJh", "0123", "payload", "-app"};
    struct guard g;
    guard_init(&g, sizeof(req));
    for (size_t n = 0; n < sizeof(req); n++) {
        const char *p = guard_put(&g, req, n);
        size_t len;
        char *out = sq_redact_dup(p, n, SQ_REDACT_HEAD | SQ_REDACT_CUT, secrets, 1, &len);
        assert_non_null(out);
        for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
            if (strstr(out, never[i]))
                fail_msg("prefix of %zu bytes: '%s' survived in\n%s", n, never[i], out);
        free(out);
    }
    guard_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),    cmocka_unit_test(test_by_name),
        cmocka_unit_test(test_by_value), cmocka_unit_test(test_urls),
        cmocka_unit_test(test_prefixes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
