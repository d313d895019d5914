/* test_url.c - URL parsing, table-driven. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/text.h"
#include "http/url.h"

struct url_case {
    const char *in;
    int rc;
    const char *scheme, *host;
    unsigned port;
    const char *path, *authority;
    bool v6;
};

#define HOST255                                                                                    \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
    "aaa"                                                                                          \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
    "aaa"                                                                                          \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

/* Table rows leave trailing fields zero; that is the point of a table, not an oversight. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct url_case cases[] = {
    {"http://example.com", 0, "http", "example.com", 80, "/", "example.com"},
    {"http://example.com/", 0, "http", "example.com", 80, "/", "example.com"},
    {"HTTP://Example.COM:8080/a/b?x=1&y=2#frag", 0, "http", "Example.COM", 8080, "/a/b?x=1&y=2",
     "Example.COM:8080"},
    {"hTTpS://127.0.0.1/", 0, "https", "127.0.0.1", 443, "/", "127.0.0.1"},
    {"https://127.0.0.1:443/x", 0, "https", "127.0.0.1", 443, "/x", "127.0.0.1"},
    {"https://h:80/x", 0, "https", "h", 80, "/x", "h:80"},
    {"http://h:80", 0, "http", "h", 80, "/", "h"},
    {"http://h:443", 0, "http", "h", 443, "/", "h:443"},
    {"http://[::1]:8080/p", 0, "http", "::1", 8080, "/p", "[::1]:8080", true},
    {"http://[2001:db8::1]", 0, "http", "2001:db8::1", 80, "/", "[2001:db8::1]", true},
    {"https://[::ffff:192.0.2.1]:443?q", 0, "https", "::ffff:192.0.2.1", 443, "/?q",
     "[::ffff:192.0.2.1]", true},
    {"http://h?q=1", 0, "http", "h", 80, "/?q=1", "h"},
    {"http://h#only-frag", 0, "http", "h", 80, "/", "h"},
    {"http://h/a?b#c?d", 0, "http", "h", 80, "/a?b", "h"},
    {"http://h:1/", 0, "http", "h", 1, "/", "h:1"},
    {"http://h:65535/", 0, "http", "h", 65535, "/", "h:65535"},
    {"http://h:00081/", 0, "http", "h", 81, "/", "h:81"},
    {"http://my-host_1.example~x/%41", 0, "http", "my-host_1.example~x", 80, "/%41",
     "my-host_1.example~x"},
    {"http://h/caf\xc3\xa9", 0, "http", "h", 80, "/caf%C3%A9", "h"},
    {"http://" HOST255 "/", 0, "http", HOST255, 80, "/", HOST255},

    {"http://h:0/", -SQ_EPARSE},
    {"http://h:65536/", -SQ_EPARSE},
    {"http://h:123456/", -SQ_EPARSE},
    {"http://h:abc/", -SQ_EPARSE},
    {"http://h:8o/", -SQ_EPARSE},
    {"http://h:-1/", -SQ_EPARSE},
    {"http://h:/", -SQ_EPARSE},
    {"http://[::1]:0/", -SQ_EPARSE},
    {"ftp://h/", -SQ_ESCHEME},
    {"ws://h/", -SQ_ESCHEME},
    {"httpx://h/", -SQ_ESCHEME},
    {"http:///path", -SQ_EPARSE},
    {"http://", -SQ_EPARSE},
    {"http://:80/", -SQ_EPARSE},
    {"http://?q", -SQ_EPARSE},
    {"example.com", -SQ_EPARSE},
    {"example.com:80/x", -SQ_EPARSE},
    {"/just/a/path", -SQ_EPARSE},
    {"", -SQ_EPARSE},
    {"http:/h", -SQ_EPARSE},
    {"://h", -SQ_EPARSE},
    {"1http://h", -SQ_EPARSE},
    {"http://[::1/", -SQ_EPARSE},
    {"http://[zz::1]/", -SQ_EPARSE},
    {"http://[]/", -SQ_EPARSE},
    {"http://[fe80::1%25eth0]/", -SQ_EPARSE},
    {"http://[::1]x/", -SQ_EPARSE},
    {"http://h/a b", -SQ_EPARSE},
    {"http://h/a\tb", -SQ_EPARSE},
    {"http://h/a\r\nHost: evil", -SQ_EPARSE},
    {"http://user:pw@h/", -SQ_EPARSE},
    {"http://h^/", -SQ_EPARSE},
    {"http://h%41/", -SQ_EPARSE},
    {" http://h/", -SQ_EPARSE},
    {"http://" HOST255 "a/", -SQ_EPARSE},
};
#pragma GCC diagnostic pop

static void test_url_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < SQ_ARRAY_LEN(cases); i++) {
        const struct url_case *c = &cases[i];
        struct sq_url u;
        const char *msg = NULL;
        int rc = sq_url_parse(c->in, &u, &msg);
        if (rc != c->rc) {
            print_error("%s: rc %d (%s)\n", c->in, rc, msg ? msg : "-");
            fail();
        }
        if (rc == 0) {
            assert_string_equal(u.scheme, c->scheme);
            assert_string_equal(u.host, c->host);
            assert_int_equal(u.port, c->port);
            assert_string_equal(u.path, c->path);
            assert_string_equal(u.authority, c->authority);
            assert_int_equal(u.ipv6_literal, c->v6);
        } else {
            assert_non_null(msg);
            assert_true(strlen(msg) > 0);
            assert_null(strchr(msg, '\n'));
            assert_null(u.path);
        }
        sq_url_dispose(&u);
        sq_url_dispose(&u); /* twice is harmless */
    }
}

static void test_url_messages(void **state)
{
    (void)state;
    struct sq_url u;
    const char *msg = NULL;
    assert_int_equal(sq_url_parse("ftp://files.example/", &u, &msg), -SQ_ESCHEME);
    assert_non_null(strstr(msg, "\"ftp\""));
    assert_int_equal(sq_url_parse("averyveryveryverylongscheme://x", &u, &msg), -SQ_ESCHEME);
    assert_non_null(strstr(msg, "..."));
    assert_int_equal(sq_url_parse("http://h:0", &u, &msg), -SQ_EPARSE);
    assert_non_null(strstr(msg, "port"));
    assert_int_equal(sq_url_parse("http:///x", &u, &msg), -SQ_EPARSE);
    assert_non_null(strstr(msg, "host"));
    /* a space is named as a space wherever it lands (in the port it read "port must be
     * 1..65535"), with the fix */
    assert_int_equal(sq_url_parse("http://127.0.0.1:8080 a/b", &u, &msg), -SQ_EPARSE);
    assert_string_equal(msg, "a URL may not contain a space (character 22): write it as %20");
    assert_int_equal(sq_url_parse("http://127.0.0.1:8080/a b", &u, &msg), -SQ_EPARSE);
    assert_string_equal(msg, "a URL may not contain a space (character 24): write it as %20");
    assert_int_equal(sq_url_parse("http://h\t/", &u, &msg), -SQ_EPARSE);
    assert_non_null(strstr(msg, "control character 0x09 (character 9)"));
    assert_int_equal(sq_blank_at("a b", 3), 1);
    assert_int_equal(sq_blank_at("a\x7f", 2), 1);
    assert_int_equal(sq_blank_at("ab", 2), 2);
    /* errmsg may be NULL */
    assert_int_equal(sq_url_parse("ftp://x", &u, NULL), -SQ_ESCHEME);
    assert_int_equal(sq_url_parse(NULL, &u, NULL), -SQ_EPARSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_table),
        cmocka_unit_test(test_url_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
