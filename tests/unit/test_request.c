/* test_request.c - request serialisation (exact bytes) and -H flag parsing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/h1.h"
#include "http/request.h"

#ifndef SQ_VERSION
#define SQ_VERSION "0"
#endif
#define UA "User-Agent: squall/" SQ_VERSION "\r\n"

struct build_case {
    const char *name;
    const char *method, *path, *authority;
    struct sq_kv hdr[4];
    size_t nhdr;
    const char *body;
    size_t body_len;
    int rc;
    const char *want;
};

/* Table rows leave trailing fields zero; that is the point of a table, not an oversight. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct build_case cases[] = {
    {"get",
     "GET",
     "/",
     "example.com",
     {{0}},
     0,
     NULL,
     0,
     0,
     "GET / HTTP/1.1\r\nHost: example.com\r\n" UA "\r\n"},
    {"get query port",
     "GET",
     "/a?b=1",
     "h:8080",
     {{0}},
     0,
     NULL,
     0,
     0,
     "GET /a?b=1 HTTP/1.1\r\nHost: h:8080\r\n" UA "\r\n"},
    {"get v6",
     "GET",
     "/",
     "[::1]:81",
     {{0}},
     0,
     NULL,
     0,
     0,
     "GET / HTTP/1.1\r\nHost: [::1]:81\r\n" UA "\r\n"},
    {"post body headers",
     "POST",
     "/p",
     "h",
     {{"Content-Type", "application/json"}, {"X-A", "1"}},
     2,
     "{\"a\":1}",
     7,
     0,
     "POST /p HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nX-A: 1\r\n"
     "Content-Length: 7\r\n" UA "\r\n{\"a\":1}"},
    {"post empty",
     "POST",
     "/",
     "h",
     {{0}},
     0,
     NULL,
     0,
     0,
     "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n" UA "\r\n"},
    {"put empty",
     "PUT",
     "/",
     "h",
     {{0}},
     0,
     "",
     0,
     0,
     "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n" UA "\r\n"},
    {"patch empty",
     "PATCH",
     "/",
     "h",
     {{0}},
     0,
     NULL,
     0,
     0,
     "PATCH / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n" UA "\r\n"},
    {"delete empty",
     "DELETE",
     "/x",
     "h",
     {{0}},
     0,
     NULL,
     0,
     0,
     "DELETE /x HTTP/1.1\r\nHost: h\r\n" UA "\r\n"},
    {"get with body",
     "GET",
     "/",
     "h",
     {{0}},
     0,
     "abc",
     3,
     0,
     "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n" UA "\r\nabc"},
    {"body with nul",
     "POST",
     "/",
     "h",
     {{0}},
     0,
     "a\0b",
     3,
     0,
     "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n" UA "\r\na\0b"},
    {"overrides",
     "POST",
     "/",
     "h",
     {{"user-agent", "me/1"}, {"HOST", "other:9"}, {"content-LENGTH", "3"}, {"X", "y"}},
     4,
     "abc",
     3,
     0,
     "POST / HTTP/1.1\r\nHOST: other:9\r\nuser-agent: me/1\r\ncontent-LENGTH: 3\r\nX: "
     "y\r\n\r\nabc"},
    {"removals",
     "GET",
     "/",
     "h",
     {{"User-Agent", ""}, {"X-Empty", ""}},
     2,
     NULL,
     0,
     0,
     "GET / HTTP/1.1\r\nHost: h\r\nX-Empty:\r\n\r\n"},
    {"host removed",
     "GET",
     "/",
     "h",
     {{"Host", ""}},
     1,
     NULL,
     0,
     0,
     "GET / HTTP/1.1\r\n" UA "\r\n"},
    {"transfer-encoding",
     "POST",
     "/",
     "h",
     {{"Transfer-Encoding", "chunked"}},
     1,
     "3\r\nabc\r\n0\r\n\r\n",
     13,
     0,
     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n" UA "\r\n3\r\nabc\r\n0\r\n\r\n"},
    {"value with tab and utf-8",
     "GET",
     "/",
     "h",
     {{"X", "a\tb \xc3\xa9"}},
     1,
     NULL,
     0,
     0,
     "GET / HTTP/1.1\r\nHost: h\r\nX: a\tb \xc3\xa9\r\n" UA "\r\n"},
    {"custom method",
     "PURGE",
     "*",
     "h",
     {{0}},
     0,
     NULL,
     0,
     0,
     "PURGE * HTTP/1.1\r\nHost: h\r\n" UA "\r\n"},

    {"crlf in value", "GET", "/", "h", {{"X", "a\r\nEvil: 1"}}, 1, NULL, 0, -SQ_EUSAGE},
    {"lf in value", "GET", "/", "h", {{"X", "a\nb"}}, 1, NULL, 0, -SQ_EUSAGE},
    {"ctl in value", "GET", "/", "h", {{"X", "a\x01"}}, 1, NULL, 0, -SQ_EUSAGE},
    {"space in name", "GET", "/", "h", {{"Bad Name", "v"}}, 1, NULL, 0, -SQ_EUSAGE},
    {"colon in name", "GET", "/", "h", {{"X:", "v"}}, 1, NULL, 0, -SQ_EUSAGE},
    {"crlf in name", "GET", "/", "h", {{"X\r\n", "v"}}, 1, NULL, 0, -SQ_EUSAGE},
    {"empty name", "GET", "/", "h", {{"", "v"}}, 1, NULL, 0, -SQ_EUSAGE},
    {"null value", "GET", "/", "h", {{"X", NULL}}, 1, NULL, 0, -SQ_EUSAGE},
    {"bad method", "GE T", "/", "h", {{0}}, 0, NULL, 0, -SQ_EUSAGE},
    {"empty method", "", "/", "h", {{0}}, 0, NULL, 0, -SQ_EUSAGE},
    {"space in path", "GET", "/a b", "h", {{0}}, 0, NULL, 0, -SQ_EUSAGE},
    {"empty path", "GET", "", "h", {{0}}, 0, NULL, 0, -SQ_EUSAGE},
    {"crlf in authority", "GET", "/", "h\r\nX: y", {{0}}, 0, NULL, 0, -SQ_EUSAGE},
    {"null authority", "GET", "/", NULL, {{0}}, 0, NULL, 0, -SQ_EUSAGE},
    {"null body with length", "POST", "/", "h", {{0}}, 0, NULL, 5, -SQ_EUSAGE},
};
#pragma GCC diagnostic pop

static void test_build_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < SQ_ARRAY_LEN(cases); i++) {
        const struct build_case *c = &cases[i];
        char *out = (char *)1;
        size_t out_len = 99;
        int rc = sq_request_build(c->method, c->path, c->authority, c->hdr, c->nhdr, c->body,
                                  c->body_len, &out, &out_len);
        if (rc != c->rc) {
            print_error("%s: rc %d\n", c->name, rc);
            fail();
        }
        if (rc) {
            assert_null(out);
            continue;
        }
        size_t want_len = strlen(c->want);
        if (!strcmp(c->name, "body with nul"))
            want_len += 2; /* the body "a\0b" */
        if (out_len != want_len || memcmp(out, c->want, want_len)) {
            print_error("%s: got\n%.*s\n---\nwant\n%s\n", c->name, (int)out_len, out, c->want);
            fail();
        }
        assert_int_equal(out[out_len], '\0');

        /* whatever we build, our own server-side parser accepts, with the same framing */
        struct sq_h1_request r = {0};
        int hl = sq_h1_parse_request_head(out, out_len, NULL, &r);
        assert_true(hl > 0);
        assert_int_equal(r.method_len, strlen(c->method));
        assert_memory_equal(r.method, c->method, r.method_len);
        assert_int_equal(r.path_len, strlen(c->path));
        if (!r.chunked)
            assert_int_equal(out_len - (size_t)hl,
                             r.content_length < 0 ? 0 : (size_t)r.content_length);
        free(out);
    }
}

struct arg_case {
    const char *arg;
    int rc;
    const char *name, *value;
};

/* Table rows leave trailing fields zero; that is the point of a table, not an oversight. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct arg_case arg_cases[] = {
    {"X-A: b", 0, "X-A", "b"},
    {"X-A:b", 0, "X-A", "b"},
    {"X-A: \t b c \t", 0, "X-A", "b c"},
    {"X-A:", 0, "X-A", ""},
    {"X-A:   ", 0, "X-A", ""},
    {"X-Time: 12:00:01", 0, "X-Time", "12:00:01"},
    {"Authorization: Bearer abc.def", 0, "Authorization", "Bearer abc.def"},
    {"X-A", -SQ_EUSAGE},
    {": v", -SQ_EUSAGE},
    {"", -SQ_EUSAGE},
    {"X A: b", -SQ_EUSAGE},
    {"X-A : b", -SQ_EUSAGE},
    {" X-A: b", -SQ_EUSAGE},
    {"X-A: b\r\nEvil: 1", -SQ_EUSAGE},
    {"X-A: b\n", -SQ_EUSAGE},
};
#pragma GCC diagnostic pop

static void test_header_arg(void **state)
{
    (void)state;
    for (size_t i = 0; i < SQ_ARRAY_LEN(arg_cases); i++) {
        const struct arg_case *c = &arg_cases[i];
        struct sq_kv kv;
        int rc = sq_header_parse_arg(c->arg, &kv);
        if (rc != c->rc) {
            print_error("'%s': rc %d\n", c->arg, rc);
            fail();
        }
        if (rc == 0) {
            assert_string_equal(kv.name, c->name);
            assert_string_equal(kv.value, c->value);
            /* a parsed flag is accepted by the builder as is */
            char *out;
            size_t out_len;
            assert_int_equal(sq_request_build("GET", "/", "h", &kv, 1, NULL, 0, &out, &out_len), 0);
            free(out);
        } else {
            assert_null(kv.name);
        }
        sq_header_arg_dispose(&kv);
        assert_null(kv.name);
    }
    assert_int_equal(sq_header_parse_arg(NULL, &(struct sq_kv){0}), -SQ_EUSAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_table),
        cmocka_unit_test(test_header_arg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
