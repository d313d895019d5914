/* tests/unit/test_urllist.c - face/urllist: the --urls list parser. What each line becomes
 * (method, URL, literal body, @PATH), what is skipped (blanks, comments, CRs), and every refusal
 * with its "NAME:LINE:COL: why" message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "face/urllist.h"

static int parse(const char *text, struct sq_urllist *l, char *err, size_t len)
{
    err[0] = '\0';
    return sq_urllist_parse("u.txt", text, strlen(text), l, err, len);
}

static void lines_and_fields(void **state)
{
    (void)state;
    char err[512];
    struct sq_urllist l;
    const char *text = "# a comment\n"
                       "\n"
                       "   \t\n"
                       "http://127.0.0.1:8080/fast\n"
                       "POST http://127.0.0.1:8080/echo {\"a\": 1}  \r\n"
                       "\tPUT\thttp://127.0.0.1:8080/echo\t@body.json\n"
                       "  # indented comment\n"
                       "DELETE http://127.0.0.1:8080/items?id=3\r\n"
                       "http://127.0.0.1:8080/last"; /* no final newline */
    int rc = parse(text, &l, err, sizeof(err));
    if (rc != 0)
        fail_msg("rc %d: %s", rc, err);
    assert_int_equal(l.n, 5);

    assert_null(l.v[0].method);
    assert_string_equal(l.v[0].url, "http://127.0.0.1:8080/fast");
    assert_string_equal(l.v[0].u.path, "/fast");
    assert_int_equal(l.v[0].u.port, 8080);
    assert_null(l.v[0].body);
    assert_null(l.v[0].body_file);
    assert_int_equal(l.v[0].line, 4);

    assert_string_equal(l.v[1].method, "POST");
    assert_string_equal(l.v[1].u.path, "/echo");
    assert_int_equal(l.v[1].body_len, 8); /* inner blanks kept, trailing ones and CR gone */
    assert_memory_equal(l.v[1].body, "{\"a\": 1}", 8);
    assert_int_equal(l.v[1].line, 5);

    assert_string_equal(l.v[2].method, "PUT");
    assert_null(l.v[2].body);
    assert_string_equal(l.v[2].body_file, "body.json");

    assert_string_equal(l.v[3].method, "DELETE");
    assert_string_equal(l.v[3].u.path, "/items?id=3");
    assert_null(l.v[3].body);

    assert_string_equal(l.v[4].u.path, "/last");
    assert_int_equal(l.v[4].line, 9);
    sq_urllist_dispose(&l);
    assert_null(l.v);
    assert_int_equal(l.n, 0);
}

static void https_and_ipv6_origins(void **state)
{
    (void)state;
    char err[512];
    struct sq_urllist l;
    assert_int_equal(
        parse("https://localhost/a\nHEAD https://localhost:443/b\n", &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.v[1].method, "HEAD");
    sq_urllist_dispose(&l);
    assert_int_equal(parse("http://[::1]:9000/a\nhttp://[::1]:9000/b\n", &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 2);
    sq_urllist_dispose(&l);
    /* http:// URLs may name several hosts (each connection goes to one) */
    assert_int_equal(
        parse("http://127.0.0.1:1/a\nPOST http://127.0.0.1:2/b\nhttp://localhost:1/c\n", &l, err,
              sizeof(err)),
        0);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.v[1].u.port, 2);
    sq_urllist_dispose(&l);
}

/* text is refused with exactly want. */
static void refused(const char *text, const char *want)
{
    char err[512];
    struct sq_urllist l;
    int rc = parse(text, &l, err, sizeof(err));
    if (rc != -SQ_EPARSE || strcmp(err, want) != 0)
        fail_msg("%s\n  rc %d, message: %s\n  wanted: %s", text, rc, err, want);
    sq_urllist_dispose(&l);
}

static void refusals(void **state)
{
    (void)state;
    refused("", "u.txt:1:1: no URL in the list (one per line: [METHOD] URL [BODY|@FILE])");
    refused("# only\n\n",
            "u.txt:2:1: no URL in the list (one per line: [METHOD] URL [BODY|@FILE])");
    refused("http://127.0.0.1:1/a\n127.0.0.1:1/b\n",
            "u.txt:2:1: '127.0.0.1:1/b' is not a URL: it has no scheme (did you mean "
            "http://127.0.0.1:1/b?)");
    refused("  ftp://127.0.0.1/x\n",
            "u.txt:1:3: 'ftp://127.0.0.1/x' is not a URL: unsupported URL scheme \"ftp\" (use "
            "http:// or https://)");
    refused("http://127.0.0.1:1/a\nPOST\n", "u.txt:2:5: a URL must follow the method 'POST'");
    refused("post http://127.0.0.1:1/a\n",
            "u.txt:1:1: 'post' is not a method: methods are case-sensitive (did you mean "
            "'POST'?)");
    refused("https://127.0.0.1:1/a\nhttps://127.0.0.1:2/b\n",
            "u.txt:2:1: 'https://127.0.0.1:2/b' is on https://127.0.0.1:2, not on "
            "https://127.0.0.1:1 like line 1: https:// URLs of a run share one host and port "
            "(http:// ones may name several); run the other origin separately");
    refused("http://127.0.0.1:1/a\nGET https://127.0.0.1:1/b\n",
            "u.txt:2:5: 'https://127.0.0.1:1/b' is on https://127.0.0.1:1, not on "
            "http://127.0.0.1:1 like line 1: every URL of a run has one scheme; run the other "
            "origin separately");
    refused("POST http://127.0.0.1:1/a @\n",
            "u.txt:1:27: '@' names no file (@PATH reads the body from PATH)");
}

static void nul_byte_and_limits(void **state)
{
    (void)state;
    char err[512];
    struct sq_urllist l;
    const char nul[] = "http://127.0.0.1:1/a\nhttp://127.0.0.1:1/\0b\n";
    assert_int_equal(sq_urllist_parse("u.txt", nul, sizeof(nul) - 1, &l, err, sizeof(err)),
                     -SQ_EPARSE);
    assert_string_equal(err, "u.txt:2:20: a NUL byte");
    sq_urllist_dispose(&l);

    /* SQ_URLLIST_MAX requests are taken, one more is refused on its own line */
    size_t cap = (SQ_URLLIST_MAX + 1) * 32;
    char *big = malloc(cap);
    assert_non_null(big);
    size_t at = 0;
    for (int i = 0; i < SQ_URLLIST_MAX; i++)
        at += (size_t)snprintf(big + at, cap - at, "http://127.0.0.1:1/%d\n", i);
    assert_int_equal(sq_urllist_parse("u.txt", big, at, &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, SQ_URLLIST_MAX);
    sq_urllist_dispose(&l);
    at += (size_t)snprintf(big + at, cap - at, "http://127.0.0.1:1/one-more\n");
    assert_int_equal(sq_urllist_parse("u.txt", big, at, &l, err, sizeof(err)), -SQ_EPARSE);
    assert_string_equal(err, "u.txt:257:1: more than 256 URLs in one list");
    sq_urllist_dispose(&l);
    free(big);

    /* a field too long for the line splitter is refused, not cut */
    char *longurl = malloc(5000);
    assert_non_null(longurl);
    int n = snprintf(longurl, 5000, "http://127.0.0.1:1/");
    memset(longurl + n, 'a', 3000);
    longurl[n + 3000] = '\0';
    assert_int_equal(parse(longurl, &l, err, sizeof(err)), -SQ_EPARSE);
    assert_string_equal(err, "u.txt:1:1: a field longer than 2047 bytes");
    sq_urllist_dispose(&l);
    free(longurl);

    /* the list itself is capped before anything is parsed */
    assert_int_equal(sq_urllist_parse("u.txt", "x", SQ_URLLIST_MAX_BYTES + 1, &l, err, sizeof(err)),
                     -SQ_EPARSE);
    assert_string_equal(err, "u.txt:1:1: the list is larger than 1024 KiB");
    sq_urllist_dispose(&l);
}

/* vegeta's format: header lines and an @PATH line under a request line, blank lines between
 * targets; "host:8080/x" stays a URL without its scheme */
static void vegeta_targets(void **state)
{
    (void)state;
    char err[512];
    struct sq_urllist l;
    const char *text = "POST http://127.0.0.1:1/a\n"
                       "Content-Type: application/json\n"
                       "X-Empty:\n"
                       "  X-Tabs:\t v \t\r\n"
                       "# a comment keeps the target open\n"
                       "@body.json\n"
                       "\n"
                       "GET http://127.0.0.1:1/b\n"
                       "X-Id: 7\n"
                       "\n"
                       "http://127.0.0.1:1/c\n";
    int rc = parse(text, &l, err, sizeof(err));
    if (rc != 0)
        fail_msg("rc %d: %s", rc, err);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.v[0].nheaders, 3);
    assert_string_equal(l.v[0].headers[0].name, "Content-Type");
    assert_string_equal(l.v[0].headers[0].value, "application/json");
    assert_string_equal(l.v[0].headers[1].name, "X-Empty");
    assert_string_equal(l.v[0].headers[1].value, "");
    assert_string_equal(l.v[0].headers[2].value, "v");
    assert_string_equal(l.v[0].body_file, "body.json");
    assert_int_equal(l.v[1].nheaders, 1);
    assert_string_equal(l.v[1].headers[0].value, "7");
    assert_null(l.v[1].body_file);
    assert_int_equal(l.v[2].nheaders, 0);
    assert_int_equal(l.v[2].line, 11);
    sq_urllist_dispose(&l);

    refused("localhost:8080/x\n", "u.txt:1:1: 'localhost:8080/x' is not a URL: it has no scheme "
                                  "(did you mean http://localhost:8080/x?)");
    refused("X-Id: 1\nhttp://127.0.0.1:1/\n",
            "u.txt:1:1: a header line with no request line above it (header lines go right under "
            "their METHOD URL line, before its @PATH line, with no blank line between)");
    refused("http://127.0.0.1:1/\n\n@b\n",
            "u.txt:3:1: a body line (@PATH) with no request line above it (@PATH lines go right "
            "under their METHOD URL line, after its headers, with no blank line between)");
    refused("PUT http://127.0.0.1:1/ x\n@b\n",
            "u.txt:2:1: line 1 already has a body: one body per request");
    refused("PUT http://127.0.0.1:1/\n@b\nX-A: 1\n",
            "u.txt:3:1: a header line with no request line above it (header lines go right under "
            "their METHOD URL line, before its @PATH line, with no blank line between)");
    refused("PUT http://127.0.0.1:1/\nX-A: \x01\n",
            "u.txt:2:6: a header value may not hold control characters (Name: value)");
    /* SQ_URLLIST_MAX_HEADERS header lines are taken, one more is refused */
    char big[4096];
    size_t at = (size_t)snprintf(big, sizeof(big), "GET http://127.0.0.1:1/\n");
    for (int i = 0; i < SQ_URLLIST_MAX_HEADERS; i++)
        at += (size_t)snprintf(big + at, sizeof(big) - at, "X-%d: v\n", i);
    assert_int_equal(parse(big, &l, err, sizeof(err)), 0);
    assert_int_equal(l.v[0].nheaders, SQ_URLLIST_MAX_HEADERS);
    sq_urllist_dispose(&l);
    snprintf(big + at, sizeof(big) - at, "X-more: v\n");
    refused(big, "u.txt:66:1: more than 64 header lines under line 1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vegeta_targets),         cmocka_unit_test(lines_and_fields),
        cmocka_unit_test(https_and_ipv6_origins), cmocka_unit_test(refusals),
        cmocka_unit_test(nul_byte_and_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
