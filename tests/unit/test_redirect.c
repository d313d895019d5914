/* test_redirect.c - following a redirect: which statuses, where a Location points
 * (http/redirect.c), and the next hop's request: method, body, headers (engine/flow.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/flow.h"
#include "http/redirect.h"

static void test_status(void **state)
{
    (void)state;
    static const unsigned yes[] = {301, 302, 303, 307, 308};
    static const unsigned no[] = {0, 200, 204, 299, 300, 304, 305, 306, 309, 310, 400, 500};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        assert_true(sq_redirect_status(yes[i]));
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        assert_false(sq_redirect_status(no[i]));
    assert_true(sq_redirect_keeps_method(307));
    assert_true(sq_redirect_keeps_method(308));
    assert_false(sq_redirect_keeps_method(301));
    assert_false(sq_redirect_keeps_method(302));
    assert_false(sq_redirect_keeps_method(303));
}

struct rcase {
    const char *base, *loc;
    int rc;
    const char *out;
};

static const struct rcase cases[] = {
    /* absolute paths */
    {"/a/b?q=1", "/x", SQ_REDIRECT_SAME, "/x"},
    {"/a/b", "/x?y=2", SQ_REDIRECT_SAME, "/x?y=2"},
    {"/a/b", "/x#frag", SQ_REDIRECT_SAME, "/x"},
    {"/a/b", "  /x  ", SQ_REDIRECT_SAME, "/x"},
    {"/a/b", "/a/./b/../c", SQ_REDIRECT_SAME, "/a/c"},
    {"/a/b", "/..", SQ_REDIRECT_SAME, "/"},
    {"/a/b", "/a/.", SQ_REDIRECT_SAME, "/a/"},
    {"/a/b", "/a//b/", SQ_REDIRECT_SAME, "/a//b/"},
    /* relative references (RFC 3986 5.4.1, base /b/c/d;p?q) */
    {"/b/c/d;p?q", "g", SQ_REDIRECT_SAME, "/b/c/g"},
    {"/b/c/d;p?q", "./g", SQ_REDIRECT_SAME, "/b/c/g"},
    {"/b/c/d;p?q", "g/", SQ_REDIRECT_SAME, "/b/c/g/"},
    {"/b/c/d;p?q", "?y", SQ_REDIRECT_SAME, "/b/c/d;p?y"},
    {"/b/c/d;p?q", "g?y", SQ_REDIRECT_SAME, "/b/c/g?y"},
    {"/b/c/d;p?q", ".", SQ_REDIRECT_SAME, "/b/c/"},
    {"/b/c/d;p?q", "..", SQ_REDIRECT_SAME, "/b/"},
    {"/b/c/d;p?q", "../g", SQ_REDIRECT_SAME, "/b/g"},
    {"/b/c/d;p?q", "../..", SQ_REDIRECT_SAME, "/"},
    {"/b/c/d;p?q", "../../../g", SQ_REDIRECT_SAME, "/g"},
    {"/b/c/d;p?q", "g#s", SQ_REDIRECT_SAME, "/b/c/g"},
    {"/", "x", SQ_REDIRECT_SAME, "/x"},
    {"", "x", SQ_REDIRECT_SAME, "/x"},
    /* absolute URLs: the origin is http://Example.com:8080 */
    {"/a", "http://example.COM:8080/p?q", SQ_REDIRECT_SAME, "/p?q"},
    {"/a", "HTTP://example.com:8080", SQ_REDIRECT_SAME, "/"},
    {"/a", "http://example.com:8080?q", SQ_REDIRECT_SAME, "/?q"},
    {"/a", "//example.com:8080/p", SQ_REDIRECT_SAME, "/p"},
    {"/a", "http://example.com/p", SQ_REDIRECT_OFFSITE, NULL},
    {"/a", "http://example.com:80/p", SQ_REDIRECT_OFFSITE, NULL},
    {"/a", "https://example.com:8080/p", SQ_REDIRECT_OFFSITE, NULL},
    {"/a", "http://other.com:8080/p", SQ_REDIRECT_OFFSITE, NULL},
    {"/a", "//other.com:8080/p", SQ_REDIRECT_OFFSITE, NULL},
    {"/a", "ftp://example.com:8080/p", SQ_REDIRECT_OFFSITE, NULL},
    {"/a", "mailto:x@example.com", SQ_REDIRECT_OFFSITE, NULL},
    /* malformed */
    {"/a", "", -SQ_EPARSE, NULL},
    {"/a", "   ", -SQ_EPARSE, NULL},
    {"/a", "#only", -SQ_EPARSE, NULL},
    {"/a", "http:/p", -SQ_EPARSE, NULL},
    {"/a", "http://", -SQ_EPARSE, NULL},
    {"/a", "http://u@example.com:8080/", -SQ_EPARSE, NULL},
    {"/a", "http://example.com:80x/", -SQ_EPARSE, NULL},
    {"/a", "http://example.com:99999/", -SQ_EPARSE, NULL},
    {"/a", "http://[::1/", -SQ_EPARSE, NULL},
    /* bytes a request line cannot hold */
    {"/a", "/a b\x01\xc3\xa9", SQ_REDIRECT_SAME, "/a%20b%01%C3%A9"},
};

static void test_resolve(void **state)
{
    (void)state;
    struct sq_redirect_origin o = {false, "Example.com", 8080};
    struct sq_buf out = {0};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct rcase *c = &cases[i];
        int rc = sq_redirect_resolve(&o, c->base, strlen(c->base), c->loc, strlen(c->loc), &out);
        if (rc != c->rc) {
            fprintf(stderr, "case %zu (%s against %s): rc %d, want %d\n", i, c->loc, c->base, rc,
                    c->rc);
            fail();
        }
        if (c->out && (out.len != strlen(c->out) || memcmp(out.p, c->out, out.len) != 0)) {
            fprintf(stderr, "case %zu (%s against %s): got '%.*s', want '%s'\n", i, c->loc, c->base,
                    (int)out.len, out.p ? out.p : "", c->out);
            fail();
        }
    }
    /* IPv6 and default ports */
    struct sq_redirect_origin v6 = {true, "::1", 443};
    const char *loc = "https://[::1]/z";
    assert_int_equal(sq_redirect_resolve(&v6, "/", 1, loc, strlen(loc), &out), SQ_REDIRECT_SAME);
    assert_int_equal(out.len, 2);
    loc = "http://[::1]:443/z";
    assert_int_equal(sq_redirect_resolve(&v6, "/", 1, loc, strlen(loc), &out), SQ_REDIRECT_OFFSITE);
    sq_buf_dispose(&out);
}

/* The next hop built from the previous request's bytes. */
static const char *hop(struct sq_flow *f, struct sq_flow_vu *v, const char *prev, unsigned status,
                       const char *loc, int want)
{
    sq_buf_reset(&v->loc);
    assert_int_equal(sq_buf_append(&v->loc, loc, strlen(loc)), 0);
    int rc = sq_flow_redirect(f, v, prev, strlen(prev), status);
    assert_int_equal(rc, want);
    if (rc != SQ_REDIRECT_SAME)
        return NULL;
    assert_int_equal(sq_buf_append(&v->req, "", 1), 0); /* a NUL to compare as a string */
    v->req.len--;
    return v->req.p;
}

static void test_next_request(void **state)
{
    (void)state;
    struct sq_flow f;
    memset(&f, 0, sizeof(f));
    snprintf(f.host, sizeof(f.host), "h:8080");
    snprintf(f.origin_host, sizeof(f.origin_host), "h");
    f.origin = (struct sq_redirect_origin){false, f.origin_host, 8080};
    struct sq_flow_vu v;
    memset(&v, 0, sizeof(v));
    const char *post = "POST /a/b?x=1 HTTP/1.1\r\nHost: h:8080\r\nContent-Type: text/plain\r\n"
                       "X-Keep: 1\r\nContent-Length: 5\r\n\r\nhello";
    /* 301, 302, 303: a GET without the body, its framing and its type */
    static const unsigned to_get[] = {301, 302, 303};
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(hop(&f, &v, post, to_get[i], "c?y=2", SQ_REDIRECT_SAME),
                            "GET /a/c?y=2 HTTP/1.1\r\nHost: h:8080\r\nX-Keep: 1\r\n\r\n");
    assert_int_equal(v.path_len, 8);
    assert_memory_equal(v.path, "/a/c?y=2", 8);
    /* 307, 308: the method, the headers and the body as they were */
    static const unsigned keep[] = {307, 308};
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(hop(&f, &v, post, keep[i], "http://h:8080/n", SQ_REDIRECT_SAME),
                            "POST /n HTTP/1.1\r\nHost: h:8080\r\nContent-Type: text/plain\r\n"
                            "X-Keep: 1\r\nContent-Length: 5\r\n\r\nhello");
    /* HEAD stays HEAD */
    assert_string_equal(
        hop(&f, &v, "HEAD /a HTTP/1.1\r\nHost: h:8080\r\n\r\n", 302, "/b", SQ_REDIRECT_SAME),
        "HEAD /b HTTP/1.1\r\nHost: h:8080\r\n\r\n");
    /* a hop built from the previous hop, which lives in v.req itself */
    hop(&f, &v, post, 307, "/one", SQ_REDIRECT_SAME);
    assert_string_equal(hop(&f, &v, v.req.p, 303, "two", SQ_REDIRECT_SAME),
                        "GET /two HTTP/1.1\r\nHost: h:8080\r\nX-Keep: 1\r\n\r\n");
    /* elsewhere, or no Location */
    hop(&f, &v, post, 302, "http://elsewhere/x", SQ_REDIRECT_OFFSITE);
    sq_buf_reset(&v.loc);
    assert_int_equal(sq_flow_redirect(&f, &v, post, strlen(post), 302), -SQ_EPARSE);
    sq_buf_dispose(&v.req);
    sq_buf_dispose(&v.redir);
    sq_buf_dispose(&v.loc);
    sq_buf_dispose(&v.val);
}

/* The Location of a raw HTTP/1.1 head: the first, without its whitespace, any case. */
static void test_location_from_head(void **state)
{
    (void)state;
    struct sq_flow_vu v;
    memset(&v, 0, sizeof(v));
    const char *h = "HTTP/1.1 302 Found\r\nContent-Length: 0\r\nLOCATION:  /next \r\n"
                    "Location: /second\r\n\r\n";
    sq_flow_vu_location(&v, h, strlen(h));
    sq_buf_reset(&v.val);
    assert_int_equal(v.loc.len, 8);
    assert_memory_equal(v.loc.p, "  /next ", 8); /* the resolver trims the whitespace */
    h = "HTTP/1.1 302 Found\r\nX-Location: /no\r\n\r\n";
    sq_flow_vu_location(&v, h, strlen(h));
    assert_int_equal(v.loc.len, 0);
    sq_buf_dispose(&v.loc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_next_request),
        cmocka_unit_test(test_location_from_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
