/* test_h1.c - HTTP/1.1 heads, body framer and response reader, table-driven.
 *
 * Parsers (heads, body framer) read their input from the end of a page followed by a PROT_NONE
 * guard page, so any read past the given length faults. Every case runs over every truncated
 * prefix; framer and reader cases also run whole, split in two at every point, and one byte at
 * a time, and must give the same result each way.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/h1.h"

#include "guard.h"

#define OK 1 /* expected result: a complete head / body */

_Static_assert(sizeof(struct sq_h1_reader) <= 88, "the per-connection reader must stay small");

/* ---- response heads ---- */

struct rh_case {
    const char *name;
    const char *in;
    int rc;          /* OK or a negative code */
    size_t head_len; /* OK: 0 means strlen(in) */
    int status, minor;
    const char *reason;
    size_t nhdr;
    int64_t cl;
    bool chunked, te, ka;
    size_t max_head, max_headers, cap; /* 0: defaults / an array of 16 */
};

/* Table rows leave trailing fields zero; that is the point of a table, not an oversight. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct rh_case rh_cases[] = {
    {"basic", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\n", OK, 0, 200, 1, "OK", 2,
     5, false, false, true},
    {"with body after", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", OK, 38, 200, 1, "OK",
     1, 5, false, false, true},
    {"no headers", "HTTP/1.1 204 No Content\r\n\r\n", OK, 0, 204, 1, "No Content", 0, -1, false,
     false, true},
    {"reason missing", "HTTP/1.1 200\r\n\r\n", OK, 0, 200, 1, "", 0, -1, false, false, true},
    {"reason empty", "HTTP/1.1 200 \r\n\r\n", OK, 0, 200, 1, "", 0, -1, false, false, true},
    {"reason with spaces", "HTTP/1.1 404 Not  Found \r\n\r\n", OK, 0, 404, 1, "Not  Found ", 0, -1,
     false, false, true},
    {"reason obs-text", "HTTP/1.1 200 \xc3\xa9t\xc3\xa9\r\n\r\n", OK, 0, 200, 1,
     "\xc3\xa9t\xc3\xa9", 0, -1, false, false, true},
    {"status 999", "HTTP/1.1 999 X\r\n\r\n", OK, 0, 999, 1, "X", 0, -1, false, false, true},
    {"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", OK, 0, 200, 0, "OK", 1, 0},
    {"http/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n", OK, 0, 200, 0,
     "OK", 1, -1, false, false, true},
    {"http/1.1 close", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", OK, 0, 200, 1, "OK", 1, -1},
    {"close wins", "HTTP/1.1 200 OK\r\nConnection: keep-alive, CLOSE\r\n\r\n", OK, 0, 200, 1, "OK",
     1, -1},
    {"connection list", "HTTP/1.1 200 OK\r\nConnection: upgrade,  foo\r\nconnection: x\r\n\r\n", OK,
     0, 200, 1, "OK", 2, -1, false, false, true},
    {"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", OK, 0, 200, 1, "OK", 1, -1,
     true, true, true},
    {"gzip, chunked", "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip , Chunked\r\n\r\n", OK, 0, 200, 1,
     "OK", 1, -1, true, true, true},
    {"te split lines",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", OK, 0, 200,
     1, "OK", 2, -1, true, true, true},
    {"te gzip only", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip;q=1\r\n\r\n", OK, 0, 200, 1, "OK",
     1, -1, false, true, true},
    {"cl list equal", "HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\nContent-Length: 7\r\n\r\n", OK, 0,
     200, 1, "OK", 2, 7, false, false, true},
    {"cl 18 digits", "HTTP/1.1 200 OK\r\nContent-Length: 999999999999999999\r\n\r\n", OK, 0, 200, 1,
     "OK", 1, 999999999999999999LL, false, false, true},
    {"ows trimmed", "HTTP/1.1 200 OK\r\nContent-Length: \t 3 \t\r\nX:\r\n\r\n", OK, 0, 200, 1, "OK",
     2, 3, false, false, true},
    {"bare lf", "HTTP/1.1 200 OK\nContent-Length: 2\n\n", OK, 0, 200, 1, "OK", 1, 2, false, false,
     true},
    {"mixed lf", "HTTP/1.1 200 OK\r\nA: b\n\r\n", OK, 0, 200, 1, "OK", 1, -1, false, false, true},
    {"exactly max head", "HTTP/1.1 200 OK\r\nX: 0123456789\r\n\r\n", OK, 0, 200, 1, "OK", 1, -1,
     false, false, true, 34},
    {"max headers ok", "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n", OK, 0, 200, 1, "OK", 2, -1, false,
     false, true, 0, 2},

    {"not http", "HTTX/1.1 200 OK\r\n\r\n", -SQ_EPARSE},
    {"http lowercase", "http/1.1 200 OK\r\n\r\n", -SQ_EPARSE},
    {"http/2", "HTTP/2 200 OK\r\n\r\n", -SQ_EPARSE},
    {"http/1.10", "HTTP/1.10 200 OK\r\n\r\n", -SQ_EPARSE},
    {"no space", "HTTP/1.1200 OK\r\n\r\n", -SQ_EPARSE},
    {"two spaces", "HTTP/1.1  200 OK\r\n\r\n", -SQ_EPARSE},
    {"status 2 digits", "HTTP/1.1 20 OK\r\n\r\n", -SQ_EPARSE},
    {"status 4 digits", "HTTP/1.1 2000 OK\r\n\r\n", -SQ_EPARSE},
    {"status letters", "HTTP/1.1 2x0 OK\r\n\r\n", -SQ_EPARSE},
    {"status 099", "HTTP/1.1 099 OK\r\n\r\n", -SQ_EPARSE},
    {"empty", "\r\n\r\n", -SQ_EPARSE},
    {"bare cr", "HTTP/1.1 200 OK\rX: y\r\n\r\n", -SQ_EPARSE},
    {"ctl in reason", "HTTP/1.1 200 O\x01K\r\n\r\n", -SQ_EPARSE},
    {"cl negative", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", -SQ_EPARSE},
    {"cl garbage", "HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n", -SQ_EPARSE},
    {"cl plus", "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", -SQ_EPARSE},
    {"cl empty", "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", -SQ_EPARSE},
    {"cl inner space", "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n", -SQ_EPARSE},
    {"cl 19 digits", "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000000\r\n\r\n", -SQ_EPARSE},
    {"cl conflict", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
     -SQ_EPARSE},
    {"cl list conflict", "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n", -SQ_EPARSE},
    {"cl with chunked",
     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", -SQ_EPARSE},
    {"chunked then cl",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", -SQ_EPARSE},
    {"chunked not last", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", -SQ_EPARSE},
    {"chunked twice",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
     -SQ_EPARSE},
    {"te empty", "HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\n", -SQ_EPARSE},
    {"te garbage", "HTTP/1.1 200 OK\r\nTransfer-Encoding: a b\r\n\r\n", -SQ_EPARSE},
    {"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n", -SQ_EPARSE},
    {"obs-fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", -SQ_EPARSE},
    {"leading ws field", "HTTP/1.1 200 OK\r\n X: a\r\n\r\n", -SQ_EPARSE},
    {"empty name", "HTTP/1.1 200 OK\r\n: a\r\n\r\n", -SQ_EPARSE},
    {"no colon", "HTTP/1.1 200 OK\r\nXa\r\n\r\n", -SQ_EPARSE},
    {"bad name char", "HTTP/1.1 200 OK\r\nX(a): b\r\n\r\n", -SQ_EPARSE},
    {"nul in value", "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n", -SQ_EPARSE},
    {"del in value", "HTTP/1.1 200 OK\r\nX: a\x7f\r\n\r\n", -SQ_EPARSE},
    {"cr in value", "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", -SQ_EPARSE},
    {"too many headers", "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", -SQ_ETOOBIG, 0, 0, 0,
     NULL, 0, 0, false, false, false, 0, 2},
    {"header array full", "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", -SQ_ETOOBIG, 0, 0, 0,
     NULL, 0, 0, false, false, false, 0, 0, 2},
    {"head too big", "HTTP/1.1 200 OK\r\nX: 0123456789\r\n\r\n", -SQ_ETOOBIG, 0, 0, 0, NULL, 0, 0,
     false, false, false, 33},
};
#pragma GCC diagnostic pop

static struct sq_h1_limits limits_of(size_t max_head, size_t max_headers)
{
    struct sq_h1_limits l = {max_head, max_headers};
    return l;
}

static void check_spans(const struct sq_h1_header *h, size_t n, const char *p, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        assert_true(h[i].name >= p && h[i].name + h[i].name_len <= p + len);
        assert_true(h[i].value >= p && h[i].value + h[i].value_len <= p + len);
        assert_true(h[i].name_len > 0);
        if (h[i].value_len) {
            assert_true(h[i].value[0] != ' ' && h[i].value[0] != '\t');
            assert_true(h[i].value[h[i].value_len - 1] != ' ');
        }
    }
}

static void test_response_heads(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < SQ_ARRAY_LEN(rh_cases); ci++) {
        const struct rh_case *c = &rh_cases[ci];
        size_t len = strlen(c->in);
        if (!strcmp(c->name, "nul in value"))
            len = 27;
        size_t head_len = c->head_len ? c->head_len : len;
        struct sq_h1_limits lim = limits_of(c->max_head, c->max_headers);
        struct guard g;
        guard_init(&g, len);
        for (int with_array = 0; with_array < 2; with_array++) {
            if (!with_array && c->cap)
                continue;
            for (size_t k = 0; k <= len; k++) {
                const char *p = guard_put(&g, c->in, k);
                struct sq_h1_header hdr[16];
                struct sq_h1_response r;
                memset(&r, 0, sizeof(r));
                r.headers = with_array ? hdr : NULL;
                r.headers_cap = with_array ? (c->cap ? c->cap : 16) : 0;
                int rc = sq_h1_parse_response_head(p, k, &lim, &r);
                if (c->rc != OK) {
                    CHECK(rc == (k == len              ? c->rc
                                 : rc == SQ_H1_PARTIAL ? rc
                                                       : c->rc),
                          "%s: prefix %zu gave %d\n", c->name, k, rc);
                    continue;
                }
                if (k < head_len) {
                    CHECK(rc == SQ_H1_PARTIAL, "%s: prefix %zu gave %d\n", c->name, k, rc);
                    continue;
                }
                CHECK(rc == (int)head_len, "%s: len %zu gave %d\n", c->name, k, rc);
                CHECK(r.status == c->status, "%s: status %d\n", c->name, r.status);
                CHECK(r.minor_version == c->minor, "%s\n", c->name);
                CHECK(r.reason_len == strlen(c->reason) &&
                          !memcmp(r.reason, c->reason, r.reason_len),
                      "%s: reason '%.*s'\n", c->name, (int)r.reason_len, r.reason);
                CHECK(r.num_headers == c->nhdr, "%s: %zu headers\n", c->name, r.num_headers);
                CHECK(r.content_length == c->cl, "%s: cl %lld\n", c->name,
                      (long long)r.content_length);
                CHECK(r.chunked == c->chunked && r.transfer_encoding == c->te, "%s\n", c->name);
                CHECK(r.keep_alive == c->ka, "%s: keep_alive\n", c->name);
                if (with_array)
                    check_spans(hdr, r.num_headers, p, k);
            }
        }
        guard_free(&g);
    }
}

static void test_response_header_spans(void **state)
{
    (void)state;
    const char *in = "HTTP/1.1 200 OK\r\nContent-Type:text/plain\r\nX-Empty:   \r\n"
                     "X-Pad: \t a  b \t\r\nSet-Cookie: a=1; Path=/\r\n\r\nBODY";
    struct sq_h1_header h[4];
    struct sq_h1_response r = {.headers = h, .headers_cap = 4};
    int rc = sq_h1_parse_response_head(in, strlen(in), NULL, &r);
    assert_int_equal(rc, (int)strlen(in) - 4);
    assert_int_equal(r.num_headers, 4);
    const char *names[] = {"Content-Type", "X-Empty", "X-Pad", "Set-Cookie"};
    const char *values[] = {"text/plain", "", "a  b", "a=1; Path=/"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(h[i].name_len, strlen(names[i]));
        assert_memory_equal(h[i].name, names[i], h[i].name_len);
        assert_int_equal(h[i].value_len, strlen(values[i]));
        assert_memory_equal(h[i].value, values[i], h[i].value_len);
    }
    /* default limits: 128 headers pass, 129 do not */
    char big[8192];
    for (int n = 128; n <= 129; n++) {
        size_t w = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\n");
        for (int i = 0; i < n; i++)
            w += (size_t)snprintf(big + w, sizeof(big) - w, "H%d: v\r\n", i);
        w += (size_t)snprintf(big + w, sizeof(big) - w, "\r\n");
        struct sq_h1_response r2 = {0};
        rc = sq_h1_parse_response_head(big, w, NULL, &r2);
        assert_int_equal(rc, n == 128 ? (int)w : -SQ_ETOOBIG);
    }
    /* a 64 KiB default head limit: a 70 KiB header is too big even before it ends */
    size_t blen = 70 * 1024;
    char *b = malloc(blen);
    assert_non_null(b);
    memcpy(b, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(b + 20, 'a', blen - 20);
    struct sq_h1_response r3 = {0};
    assert_int_equal(sq_h1_parse_response_head(b, blen, NULL, &r3), -SQ_ETOOBIG);
    assert_int_equal(sq_h1_parse_response_head(b, 60 * 1024, NULL, &r3), SQ_H1_PARTIAL);
    free(b);
}

/* Content-Encoding and Content-Type: text/event-stream, over every prefix of each head. */
struct rf_case {
    const char *fields; /* header lines between the status line and the blank line */
    enum sq_coding ce;
    bool es;
};

static const struct rf_case rf_cases[] = {
    {"", SQ_CODING_NONE, false},
    {"Content-Encoding: gzip\r\n", SQ_CODING_GZIP, false},
    {"content-encoding:  BR \r\n", SQ_CODING_BR, false},
    {"CONTENT-ENCODING:zstd\r\n", SQ_CODING_ZSTD, false},
    {"Content-Encoding: deflate\r\n", SQ_CODING_DEFLATE, false},
    {"Content-Encoding: x-gzip\r\n", SQ_CODING_GZIP, false},
    {"Content-Encoding: identity\r\n", SQ_CODING_NONE, false},
    {"Content-Encoding: \r\n", SQ_CODING_NONE, false},
    {"Content-Encoding: compress\r\n", SQ_CODING_OTHER, false},
    {"Content-Encoding: gzip, zstd\r\n", SQ_CODING_OTHER, false},
    {"Content-Encoding: gzip\r\nContent-Encoding: br\r\n", SQ_CODING_OTHER, false},
    {"Content-Encoding: gzip\r\nContent-Encoding: identity\r\n", SQ_CODING_GZIP, false},
    {"Content-Encodinx: gzip\r\n", SQ_CODING_NONE, false},
    {"X-Content-Encoding: gzip\r\n", SQ_CODING_NONE, false},
    {"Content-Type: text/event-stream\r\n", SQ_CODING_NONE, true},
    {"content-type: Text/Event-Stream\r\n", SQ_CODING_NONE, true},
    {"Content-Type: text/event-stream;charset=utf-8\r\n", SQ_CODING_NONE, true},
    {"Content-Type: text/event-stream \t; x=y\r\n", SQ_CODING_NONE, true},
    {"Content-Type: text/event-streamx\r\n", SQ_CODING_NONE, false},
    {"Content-Type: text/event-stream-x\r\n", SQ_CODING_NONE, false},
    {"Content-Type: text/event\r\n", SQ_CODING_NONE, false},
    {"Content-Type: application/json\r\n", SQ_CODING_NONE, false},
    {"Content-Type: text/event-stream\r\nContent-Type: text/plain\r\n", SQ_CODING_NONE, false},
    {"Content-Type: text/plain\r\nContent-Type: text/event-stream\r\n", SQ_CODING_NONE, true},
    {"Content-Typo: text/event-stream\r\n", SQ_CODING_NONE, false},
    {"X-Type: text/event-stream\r\n", SQ_CODING_NONE, false},
    {"Content-Encoding: br\r\nContent-Type: text/event-stream\r\nContent-Length: 3\r\n",
     SQ_CODING_BR, true},
};

static void test_response_fields(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < SQ_ARRAY_LEN(rf_cases); ci++) {
        const struct rf_case *c = &rf_cases[ci];
        char in[512];
        int len = snprintf(in, sizeof(in), "HTTP/1.1 200 OK\r\nServer: t\r\n%s\r\n", c->fields);
        assert_true(len > 0 && (size_t)len < sizeof(in));
        struct guard g;
        guard_init(&g, (size_t)len);
        for (int with_array = 0; with_array < 2; with_array++) {
            for (size_t k = 0; k <= (size_t)len; k++) {
                const char *p = guard_put(&g, in, k);
                struct sq_h1_header hdr[16];
                struct sq_h1_response r;
                memset(&r, 0xff, sizeof(r));
                r.headers = with_array ? hdr : NULL;
                r.headers_cap = with_array ? 16 : 0;
                int rc = sq_h1_parse_response_head(p, k, NULL, &r);
                if (k < (size_t)len) {
                    CHECK(rc == SQ_H1_PARTIAL, "%s: prefix %zu gave %d\n", c->fields, k, rc);
                    continue;
                }
                CHECK(rc == len, "%s: gave %d\n", c->fields, rc);
                CHECK(r.content_encoding == c->ce, "%s: content_encoding %s\n", c->fields,
                      sq_coding_name((enum sq_coding)r.content_encoding));
                CHECK(r.event_stream == c->es, "%s: event_stream %d\n", c->fields, r.event_stream);
            }
        }
        guard_free(&g);
    }
}

/* Every byte value in a field name, a field value, a reason phrase and a request-target is
 * accepted exactly when RFC 9110/9112 allow it there. */
static void test_char_classes(void **state)
{
    (void)state;
    const char *tchar = "!#$%&'*+-.^_`|~";
    for (int b = 0; b < 256; b++) {
        bool alnum = (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z');
        bool is_tchar = alnum || (b && strchr(tchar, b));
        bool vchar = b > 0x20 && b < 0x7f;
        bool field = vchar || b == ' ' || b == '\t' || b >= 0x80;
        char buf[64];
        struct sq_h1_response r;
        struct sq_h1_request q;
        int n, rc;

        n = snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\nX%cY: a\r\n\r\n", 'Z');
        buf[18] = (char)b; /* the byte between X and Y */
        memset(&r, 0, sizeof(r));
        rc = sq_h1_parse_response_head(buf, (size_t)n, NULL, &r);
        if (b != ':') /* "X:Y: a" is the field X with the value "Y: a" */
            CHECK((rc == n) == is_tchar, "name byte 0x%02x: %d\n", b, rc);

        n = snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\nX: a%cb\r\n\r\n", 'Z');
        buf[21] = (char)b;
        memset(&r, 0, sizeof(r));
        rc = sq_h1_parse_response_head(buf, (size_t)n, NULL, &r);
        if (b != '\n') /* a LF ends the line early: then "b" is a bad field line anyway */
            CHECK((rc == n) == field, "value byte 0x%02x: %d\n", b, rc);
        else
            CHECK(rc < 0, "value LF\n");

        n = snprintf(buf, sizeof(buf), "HTTP/1.1 200 O%cK\r\n\r\n", 'Z');
        buf[14] = (char)b;
        memset(&r, 0, sizeof(r));
        rc = sq_h1_parse_response_head(buf, (size_t)n, NULL, &r);
        if (b != '\n')
            CHECK((rc == n) == field, "reason byte 0x%02x: %d\n", b, rc);

        n = snprintf(buf, sizeof(buf), "GET /a%cb HTTP/1.1\r\n\r\n", 'Z');
        buf[6] = (char)b;
        memset(&q, 0, sizeof(q));
        rc = sq_h1_parse_request_head(buf, (size_t)n, NULL, &q);
        CHECK((rc == n) == vchar, "target byte 0x%02x: %d\n", b, rc);
    }
}

/* ---- request heads ---- */

struct rq_case {
    const char *name;
    const char *in;
    int rc;
    size_t head_len;
    const char *method, *path;
    int minor;
    size_t nhdr;
    int64_t cl;
    bool chunked, ka, expect;
    size_t max_head, max_headers;
};

/* Table rows leave trailing fields zero; that is the point of a table, not an oversight. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct rq_case rq_cases[] = {
    {"get", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", OK, 0, "GET", "/", 1, 1, -1, false, true},
    {"no headers", "GET /x HTTP/1.1\r\n\r\n", OK, 0, "GET", "/x", 1, 0, -1, false, true},
    {"post body", "POST /submit?a=1&b=%20 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", OK,
     63, "POST", "/submit?a=1&b=%20", 1, 2, 3, false, true},
    {"expect", "PUT /u HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 10\r\n\r\n", OK, 0,
     "PUT", "/u", 1, 2, 10, false, true, true},
    {"expect 1.0 ignored", "PUT /u HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", OK, 0, "PUT", "/u", 0,
     1, -1, false, false, false},
    {"chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", OK, 0, "POST", "/", 1, 1,
     -1, true, true},
    {"http/1.0", "GET / HTTP/1.0\r\n\r\n", OK, 0, "GET", "/", 0, 0, -1, false, false},
    {"http/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", OK, 0, "GET", "/",
     0, 1, -1, false, true},
    {"close", "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", OK, 0, "GET", "/", 1, 1, -1, false,
     false},
    {"leading crlf", "\r\n\nGET / HTTP/1.1\r\n\r\n", OK, 0, "GET", "/", 1, 0, -1, false, true},
    {"absolute form", "GET http://h:1/p?q HTTP/1.1\r\n\r\n", OK, 0, "GET", "http://h:1/p?q", 1, 0,
     -1, false, true},
    {"options star", "OPTIONS * HTTP/1.1\r\n\r\n", OK, 0, "OPTIONS", "*", 1, 0, -1, false, true},
    {"custom method", "M-SEARCH! / HTTP/1.1\r\n\r\n", OK, 0, "M-SEARCH!", "/", 1, 0, -1, false,
     true},
    {"bare lf", "GET / HTTP/1.1\nA: b\n\n", OK, 0, "GET", "/", 1, 1, -1, false, true},
    /* Content-Length: one value of 1-18 digits (the short path), lists, the edges */
    {"cl 0", "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", OK, 0, "POST", "/", 1, 1, 0, false,
     true},
    {"cl 18 digits", "POST / HTTP/1.1\r\nContent-Length: 999999999999999999\r\n\r\n", OK, 0, "POST",
     "/", 1, 1, 999999999999999999LL, false, true},
    {"cl leading zeros", "POST / HTTP/1.1\r\nContent-Length: 007\r\n\r\n", OK, 0, "POST", "/", 1, 1,
     7, false, true},
    {"cl list", "POST / HTTP/1.1\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\n", OK, 0,
     "POST", "/", 1, 2, 5, false, true},
    {"cl trailing ows", "POST / HTTP/1.1\r\nContent-Length:\t12 \t\r\n\r\n", OK, 0, "POST", "/", 1,
     1, 12, false, true},
    /* field values: HTAB anywhere, a stop byte inside and after an 8-byte block */
    {"htab in long value", "GET / HTTP/1.1\r\nX-A: abcdefgh\tijklmnopq\t\tr\tstuvwxyz0\r\n\r\n", OK,
     0, "GET", "/", 1, 1, -1, false, true},
    {"obs-text in long value", "GET / HTTP/1.1\r\nX-A: \303\251\303\251abcdefghijk\377\r\n\r\n", OK,
     0, "GET", "/", 1, 1, -1, false, true},
    /* Host (RFC 9112 3.2): one at most; its absence and its value are the server's to judge */
    {"host bad value", "GET / HTTP/1.1\r\nHost: [::1]anything\r\n\r\n", OK, 0, "GET", "/", 1, 1, -1,
     false, true},
    {"host v6 port", "GET / HTTP/1.1\r\nhOST:  [::1]:8080 \r\n\r\n", OK, 0, "GET", "/", 1, 1, -1,
     false, true},
    {"host empty", "GET / HTTP/1.1\r\nHost:\r\n\r\n", OK, 0, "GET", "/", 1, 1, -1, false, true},
    {"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", -SQ_EPARSE},

    {"no method", " / HTTP/1.1\r\n\r\n", -SQ_EPARSE},
    {"double space", "GET  / HTTP/1.1\r\n\r\n", -SQ_EPARSE},
    {"no version", "GET /\r\n\r\n", -SQ_EPARSE},
    {"trailing space", "GET / HTTP/1.1 \r\n\r\n", -SQ_EPARSE},
    {"lowercase version", "GET / http/1.1\r\n\r\n", -SQ_EPARSE},
    {"http/2", "GET / HTTP/2.0\r\n\r\n", -SQ_EPARSE},
    {"ctl in target", "GET /a\x01 HTTP/1.1\r\n\r\n", -SQ_EPARSE},
    {"obs-text in target", "GET /\xc3\xa9 HTTP/1.1\r\n\r\n", -SQ_EPARSE},
    {"bad method", "GE(T / HTTP/1.1\r\n\r\n", -SQ_EPARSE},
    {"bare cr lead", "\rGET / HTTP/1.1\r\n\r\n", -SQ_EPARSE},
    {"te gzip", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", -SQ_EPARSE},
    {"te on 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -SQ_EPARSE},
    {"te with cl", "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
     -SQ_EPARSE},
    {"cl conflict", "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
     -SQ_EPARSE},
    {"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", -SQ_EPARSE},
    {"obs-fold", "GET / HTTP/1.1\r\nA: b\r\n\tc\r\n\r\n", -SQ_EPARSE},
    {"cl 19 digits", "POST / HTTP/1.1\r\nContent-Length: 1000000000000000000\r\n\r\n", -SQ_EPARSE},
    {"cl letter", "POST / HTTP/1.1\r\nContent-Length: 12a\r\n\r\n", -SQ_EPARSE},
    {"cl empty", "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n", -SQ_EPARSE},
    {"cl sign", "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", -SQ_EPARSE},
    {"del in long value", "GET / HTTP/1.1\r\nX-A: abcdefghijk\x7flm\r\n\r\n", -SQ_EPARSE},
    {"ctl after htab", "GET / HTTP/1.1\r\nX-A: abcdefgh\tijklmno\x01pqrstuvw\r\n\r\n", -SQ_EPARSE},
    {"bare cr in value", "GET / HTTP/1.1\r\nX-A: abcdefghijklmnop\rq\r\n\r\n", -SQ_EPARSE},
    {"minor not a digit", "GET / HTTP/1.x\r\n\r\n", -SQ_EPARSE},
    {"version name case", "GET / HTtP/1.1\r\n\r\n", -SQ_EPARSE},
    {"too many headers", "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n", -SQ_ETOOBIG, 0, NULL, NULL, 0, 0,
     0, false, false, false, 0, 1},
    {"too big", "GET /0123456789 HTTP/1.1\r\n\r\n", -SQ_ETOOBIG, 0, NULL, NULL, 0, 0, 0, false,
     false, false, 20},
    {"crlf flood too big", "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n", -SQ_ETOOBIG, 0, NULL,
     NULL, 0, 0, 0, false, false, false, 16},
};
#pragma GCC diagnostic pop

static void test_request_heads(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < SQ_ARRAY_LEN(rq_cases); ci++) {
        const struct rq_case *c = &rq_cases[ci];
        size_t len = strlen(c->in);
        size_t head_len = c->head_len ? c->head_len : len;
        struct sq_h1_limits lim = limits_of(c->max_head, c->max_headers);
        struct guard g;
        guard_init(&g, len);
        for (size_t k = 0; k <= len; k++) {
            const char *p = guard_put(&g, c->in, k);
            struct sq_h1_header hdr[16];
            struct sq_h1_request r;
            memset(&r, 0, sizeof(r));
            r.headers = hdr;
            r.headers_cap = 16;
            int rc = sq_h1_parse_request_head(p, k, &lim, &r);
            if (c->rc != OK) {
                CHECK(rc == (k == len              ? c->rc
                             : rc == SQ_H1_PARTIAL ? rc
                                                   : c->rc),
                      "%s: prefix %zu gave %d\n", c->name, k, rc);
                continue;
            }
            if (k < head_len) {
                CHECK(rc == SQ_H1_PARTIAL, "%s: prefix %zu gave %d\n", c->name, k, rc);
                continue;
            }
            CHECK(rc == (int)head_len, "%s: gave %d\n", c->name, rc);
            CHECK(r.method_len == strlen(c->method) && !memcmp(r.method, c->method, r.method_len),
                  "%s: method\n", c->name);
            CHECK(r.path_len == strlen(c->path) && !memcmp(r.path, c->path, r.path_len),
                  "%s: path\n", c->name);
            CHECK(r.minor_version == c->minor && r.num_headers == c->nhdr, "%s\n", c->name);
            CHECK(r.content_length == c->cl && r.chunked == c->chunked, "%s: framing\n", c->name);
            CHECK(r.keep_alive == c->ka, "%s: keep_alive\n", c->name);
            CHECK(r.expect_continue == c->expect, "%s: expect\n", c->name);
            const char *hv = NULL;
            for (const char *q = c->in; *q && !hv; q++)
                if (q[0] == '\n' && strncasecmp(q + 1, "host:", 5) == 0)
                    hv = q + 6;
            if (hv) {
                while (*hv == ' ')
                    hv++;
                size_t hn = strcspn(hv, " \r\n");
                CHECK(r.host == p + (hv - c->in) && r.host_len == hn, "%s: host\n", c->name);
            } else {
                CHECK(r.host == NULL && r.host_len == 0, "%s: no host\n", c->name);
            }
            check_spans(hdr, r.num_headers, p, k);
        }
        guard_free(&g);
    }
}

static void test_host_and_media_type(void **state)
{
    (void)state;
    static const char *const good[] = {
        "",
        "a",
        "example.com",
        "example.com:8080",
        "127.0.0.1",
        "127.0.0.1:1",
        "h:",
        "[::1]",
        "[::1]:9876",
        "[2001:db8::1]",
        "[::ffff:1.2.3.4]:80",
        "[fe80::1%25eth0]",
        "[v7.a:b]",
        "a-b_c~d!$&'()*+,;=",
        "%41bc",
        "xn--bcher-kva.example",
    };
    static const char *const bad[] = {
        "[::1]anything",
        "[::1",
        "[]",
        "[v]",
        "[1.2.3.4]",
        "[::1]:x",
        "[::g]",
        "[fe80::1%eth0]",
        "[fe80::1%25]",
        "a b",
        "a/b",
        "a@b",
        "a:b",
        "a:1:2",
        "%4",
        "%zz",
        ":80x",
        "a\"b",
        "\xc3\xa9",
        "a?",
        "a#",
        "[::1]]",
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(good); i++)
        CHECK(sq_h1_host_valid(good[i], strlen(good[i])), "good host '%s'\n", good[i]);
    for (size_t i = 0; i < SQ_ARRAY_LEN(bad); i++)
        CHECK(!sq_h1_host_valid(bad[i], strlen(bad[i])), "bad host '%s'\n", bad[i]);

    static const char *const json[] = {"application/json", "Application/JSON",
                                       "application/json; charset=utf-8",
                                       "application/json ;charset=utf-8", "application/json\t"};
    static const char *const not_json[] = {
        "application/jsonp", "application/json5",    "application/jso",  "",
        "text/json",         "application/json-seq", "xapplication/json"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(json); i++)
        CHECK(sq_h1_media_type_is(json[i], strlen(json[i]), "application/json"), "'%s'\n", json[i]);
    for (size_t i = 0; i < SQ_ARRAY_LEN(not_json); i++)
        CHECK(!sq_h1_media_type_is(not_json[i], strlen(not_json[i]), "application/json"), "'%s'\n",
              not_json[i]);
}

/* ---- body framer ---- */

struct sink {
    char buf[32768];
    size_t len;
    bool overflow;
};

static int sink_cb(void *ud, const char *p, size_t n)
{
    struct sink *s = ud;
    assert_true(n > 0);
    if (s->len + n > sizeof(s->buf)) {
        s->overflow = true;
        return 0;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    return 0;
}

struct body_case {
    const char *name;
    const char *in; /* NULL: generated, see body_input() */
    int mode;
    uint64_t length;
    int rc;          /* OK, 0 (needs more), or a negative code */
    size_t consumed; /* OK: bytes of the body; 0 means all of in */
    const char *out; /* decoded payload (OK and 0 cases) */
    int eof;         /* sq_h1_body_eof() afterwards, for rc 0 cases */
};

#define CH SQ_H1_BODY_CHUNKED

/* Table rows leave trailing fields zero; that is the point of a table, not an oversight. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct body_case body_cases[] = {
    {"simple", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", CH, 0, OK, 0, "hello world"},
    {"extensions", "5;a=1;b=\"x;y\"\r\nhello\r\n0;last\r\n\r\n", CH, 0, OK, 0, "hello"},
    {"ext bws", "5 ; a = 1\t\r\nhello\r\n0 \r\n\r\n", CH, 0, OK, 0, "hello"},
    {"uppercase hex", "A\r\n0123456789\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n", CH, 0, OK,
     0, "0123456789abcdefghijklmnopqrstuvwxyz"},
    {"leading zeros", "0005\r\nhello\r\n000\r\n\r\n", CH, 0, OK, 0, "hello"},
    {"16 digits", "0000000000000005\r\nhello\r\n0\r\n\r\n", CH, 0, OK, 0, "hello"},
    {"trailers", "3\r\nabc\r\n0\r\nX-Sum: 1\r\nX-Empty:\r\nX-Long: a b\tc\r\n\r\n", CH, 0, OK, 0,
     "abc"},
    {"zero chunk only", "0\r\n\r\n", CH, 0, OK, 0, ""},
    {"bare lf", "5\nhello\n0\nX: y\n\n", CH, 0, OK, 0, "hello"},
    {"pipelined rest", "2\r\nhi\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n", CH, 0, OK, 12, "hi"},
    {"huge size waits", "FFFFFFFFFFFFFFFF\r\nabc", CH, 0, 0, 0, "abc", -SQ_EPARSE},
    {"17 digits", "00000000000000005\r\nhello\r\n0\r\n\r\n", CH, 0, -SQ_ETOOBIG},
    {"overflow", "10000000000000000\r\n", CH, 0, -SQ_ETOOBIG},
    {"missing crlf", "5\r\nhelloX\r\n0\r\n\r\n", CH, 0, -SQ_EPARSE},
    {"missing crlf before last", "5\r\nhello0\r\n\r\n", CH, 0, -SQ_EPARSE},
    {"cr without lf after data", "5\r\nhello\rX", CH, 0, -SQ_EPARSE},
    {"bad hex", "g\r\n", CH, 0, -SQ_EPARSE},
    {"empty size", "\r\n0\r\n\r\n", CH, 0, -SQ_EPARSE},
    {"ext without size", ";a\r\n", CH, 0, -SQ_EPARSE},
    {"negative size", "-5\r\n", CH, 0, -SQ_EPARSE},
    {"hex prefix", "0x5\r\n", CH, 0, -SQ_EPARSE},
    {"space inside size", "1 2\r\n", CH, 0, -SQ_EPARSE},
    {"bare cr in size line", "5\rhello\r\n", CH, 0, -SQ_EPARSE},
    {"ctl in ext", "5;a\x01\r\n", CH, 0, -SQ_EPARSE},
    {"trailer obs-fold", "0\r\nA: b\r\n c\r\n\r\n", CH, 0, -SQ_EPARSE},
    {"trailer no colon", "0\r\nAb\r\n\r\n", CH, 0, -SQ_EPARSE},
    {"trailer bad end", "0\r\n\rX", CH, 0, -SQ_EPARSE},
    {"long ext", NULL, CH, 0, -SQ_ETOOBIG},
    {"long trailer", NULL, CH, 0, -SQ_ETOOBIG},
    {"ext at cap", NULL, CH, 0, OK, 0, "x"},
    {"length", "hello world", SQ_H1_BODY_LENGTH, 5, OK, 5, "hello"},
    {"length short", "hel", SQ_H1_BODY_LENGTH, 5, 0, 0, "hel", -SQ_EPARSE},
    {"length zero", "abc", SQ_H1_BODY_LENGTH, 0, OK, 0, ""},
    {"until close", "abc\r\n0\r\n", SQ_H1_BODY_UNTIL_CLOSE, 0, 0, 0, "abc\r\n0\r\n", OK},
    {"none", "abc", SQ_H1_BODY_NONE, 0, OK, 0, ""},
};
#pragma GCC diagnostic pop

/* Inputs too long to write out. Returns a malloc'd string. */
static char *body_input(const struct body_case *c)
{
    char *s = malloc(32768);
    assert_non_null(s);
    if (!strcmp(c->name, "long ext")) {
        strcpy(s, "1;");
        memset(s + 2, 'e', SQ_H1_MAX_CHUNK_LINE);
        strcpy(s + 2 + SQ_H1_MAX_CHUNK_LINE, "\r\nx\r\n0\r\n\r\n");
    } else if (!strcmp(c->name, "ext at cap")) {
        /* "1;" + ext + "\r\n" is exactly SQ_H1_MAX_CHUNK_LINE bytes */
        strcpy(s, "1;");
        memset(s + 2, 'e', SQ_H1_MAX_CHUNK_LINE - 4);
        strcpy(s + SQ_H1_MAX_CHUNK_LINE - 2, "\r\nx\r\n0\r\n\r\n");
    } else if (!strcmp(c->name, "long trailer")) {
        strcpy(s, "0\r\nX: ");
        memset(s + 6, 'v', SQ_H1_MAX_TRAILER_BYTES);
        strcpy(s + 6 + SQ_H1_MAX_TRAILER_BYTES, "\r\n\r\n");
    } else {
        strcpy(s, c->in);
    }
    return s;
}

struct body_result {
    int rc;
    size_t consumed;
    int eof;
};

/* Feeds in[0,len) in pieces (split > 0: two pieces; step > 0: pieces of step bytes; else
 * whole), each piece copied to just before a guard page. */
static struct body_result feed_body(const struct body_case *c, const char *in, size_t len,
                                    size_t split, size_t step, struct guard *g, struct sink *s)
{
    struct sq_h1_body b;
    struct body_result res = {0, 0, 0};
    sq_h1_body_init(&b, (enum sq_h1_body_mode)c->mode, c->length);
    s->len = 0;
    s->overflow = false;
    size_t off = 0;
    while (off < len) {
        size_t n = step ? step : split && off == 0 ? split : len - off;
        if (n > len - off)
            n = len - off;
        const char *p = guard_put(g, in + off, n);
        size_t used = 99999;
        int rc = sq_h1_body_feed(&b, p, n, &used, sink_cb, s);
        assert_true(used <= n);
        res.consumed += used;
        if (rc != 0) {
            res.rc = rc;
            if (rc == OK) {
                /* done stays done */
                size_t again = 1;
                assert_int_equal(sq_h1_body_feed(&b, p + used, n - used, &again, sink_cb, s), OK);
                assert_int_equal(again, 0);
                assert_int_equal(sq_h1_body_eof(&b), OK);
                assert_int_equal(b.bytes, s->len);
            }
            return res;
        }
        assert_int_equal(used, n);
        off += n;
    }
    res.rc = 0;
    res.eof = sq_h1_body_eof(&b);
    assert_int_equal(b.bytes, s->len);
    return res;
}

static void check_body(const struct body_case *c, const struct body_result *r, const struct sink *s,
                       size_t len, const char *how, size_t at)
{
    CHECK(r->rc == c->rc, "%s (%s %zu): rc %d\n", c->name, how, at, r->rc);
    if (c->rc == OK) {
        size_t want = c->consumed ? c->consumed : len;
        if (c->mode == SQ_H1_BODY_LENGTH && c->length == 0)
            want = 0;
        if (c->mode == SQ_H1_BODY_NONE)
            want = 0;
        CHECK(r->consumed == want, "%s (%s %zu): consumed %zu\n", c->name, how, at, r->consumed);
    }
    if (c->rc >= 0 && c->out) {
        CHECK(s->len == strlen(c->out) && !memcmp(s->buf, c->out, s->len),
              "%s (%s %zu): payload '%.*s'\n", c->name, how, at, (int)s->len, s->buf);
    }
    if (c->rc == 0)
        CHECK(r->eof == c->eof, "%s (%s %zu): eof %d\n", c->name, how, at, r->eof);
}

static void test_body_framer(void **state)
{
    (void)state;
    static struct sink s;
    for (size_t ci = 0; ci < SQ_ARRAY_LEN(body_cases); ci++) {
        const struct body_case *c = &body_cases[ci];
        char *in = body_input(c);
        size_t len = strlen(in);
        struct guard g;
        guard_init(&g, len);
        struct body_result r = feed_body(c, in, len, 0, 0, &g, &s);
        check_body(c, &r, &s, len, "whole", 0);
        r = feed_body(c, in, len, 0, 1, &g, &s);
        check_body(c, &r, &s, len, "bytewise", 1);
        /* long inputs: every split near the ends, strided in the middle */
        size_t stride = len > 1024 ? len / 256 : 1;
        for (size_t k = 1; k < len; k++) {
            if (k > 64 && k + 64 < len && k % stride)
                continue;
            r = feed_body(c, in, len, k, 0, &g, &s);
            check_body(c, &r, &s, len, "split", k);
        }
        /* every truncated prefix of a complete body needs more, never completes */
        if (c->rc == OK && c->mode == CH) {
            size_t want = c->consumed ? c->consumed : len;
            for (size_t k = 0; k < want; k += (k > 64 && k + 64 < want ? stride : 1)) {
                struct sq_h1_body b;
                sq_h1_body_init(&b, CH, 0);
                size_t used;
                const char *p = guard_put(&g, in, k);
                int rc = sq_h1_body_feed(&b, p, k, &used, NULL, NULL);
                CHECK(rc == 0 && used == k, "%s: prefix %zu gave %d\n", c->name, k, rc);
                CHECK(sq_h1_body_eof(&b) == -SQ_EPARSE, "%s: eof after prefix %zu\n", c->name, k);
            }
        }
        guard_free(&g);
        free(in);
    }
}

static int stop_cb(void *ud, const char *p, size_t n)
{
    (void)p;
    (void)n;
    (*(int *)ud)++;
    return -SQ_EDECODE;
}

static void test_body_callback_error(void **state)
{
    (void)state;
    struct sq_h1_body b;
    size_t used;
    int calls = 0;
    sq_h1_body_init(&b, CH, 0);
    assert_int_equal(sq_h1_body_feed(&b, "3\r\nabc\r\n0\r\n\r\n", 13, &used, stop_cb, &calls),
                     -SQ_EDECODE);
    assert_int_equal(calls, 1);
    assert_int_equal(used, 6);
    sq_h1_body_init(&b, SQ_H1_BODY_LENGTH, 3);
    assert_int_equal(sq_h1_body_feed(&b, "abc", 3, &used, stop_cb, &calls), -SQ_EDECODE);
    /* framing only: no callback at all */
    sq_h1_body_init(&b, CH, 0);
    assert_int_equal(sq_h1_body_feed(&b, "3\r\nabc\r\n0\r\n\r\n", 13, &used, NULL, NULL), OK);
    assert_int_equal(b.bytes, 3);
}

/* ---- response reader ---- */

struct rd_resp {
    int status;
    bool ka;
    const char *body;
    enum sq_coding ce; /* content_encoding of the final head */
    bool es;           /* event_stream */
};

struct rd_case {
    const char *name;
    const char *in; /* NULL: generated (big chunked) */
    bool head_req;
    int n; /* complete responses */
    struct rd_resp r[4];
    int err;     /* after the n responses: error from feed or eof (0: none) */
    bool by_eof; /* the last response completes only at close */
    size_t max_head, max_headers;
};

/* Table rows leave trailing fields zero; that is the point of a table, not an oversight. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct rd_case rd_cases[] = {
    {"content-length",
     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
     false,
     1,
     {{200, true, "hello"}}},
    {"content-length 0",
     "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
     false,
     1,
     {{200, true, ""}}},
    {"chunked",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
     false,
     1,
     {{200, true, "hello world"}}},
    {"chunked ext trailers",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA;n=v\r\n0123456789\r\n1A\r\n"
     "abcdefghijklmnopqrstuvwxyz\r\n0;x\r\nX-T: 1\r\n\r\n",
     false,
     1,
     {{200, true, "0123456789abcdefghijklmnopqrstuvwxyz"}}},
    {"chunked zero only",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     false,
     1,
     {{200, true, ""}}},
    {"chunk overflow",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
     false,
     0,
     {{0}},
     -SQ_ETOOBIG},
    {"chunk missing crlf",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhiX0\r\n\r\n",
     false,
     0,
     {{0}},
     -SQ_EPARSE},
    {"big chunked", NULL, false, 1, {{200, true, NULL}}},
    {"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", false, 1, {{200, false, "hi"}}},
    {"http/1.0 keep-alive",
     "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
     false,
     1,
     {{200, true, "hi"}}},
    {"http/1.0 until close",
     "HTTP/1.0 200 OK\r\n\r\nall of it",
     false,
     1,
     {{200, false, "all of it"}},
     0,
     true},
    {"connection close",
     "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi",
     false,
     1,
     {{200, false, "hi"}}},
    {"until close",
     "HTTP/1.1 200 OK\r\nServer: x\r\n\r\nsome body\r\n0\r\n\r\n",
     false,
     1,
     {{200, false, "some body\r\n0\r\n\r\n"}},
     0,
     true},
    {"te gzip until close",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzzz",
     false,
     1,
     {{200, false, "zzz"}},
     0,
     true},
    {"head",
     "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\nHTTP/1.1 404 Not Found\r\n"
     "Transfer-Encoding: chunked\r\n\r\n",
     true,
     2,
     {{200, true, ""}, {404, true, ""}}},
    {"204 and 304",
     "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"
     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
     false,
     3,
     {{204, true, ""}, {304, true, ""}, {200, true, "x"}}},
    {"interim skipped",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
     false,
     1,
     {{200, true, "ok"}}},
    {"101",
     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
     false,
     1,
     {{101, false, ""}}},
    {"pipelined",
     "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 201 Created\r\n"
     "Transfer-Encoding: chunked\r\n\r\n1\r\nd\r\n0\r\n\r\nHTTP/1.1 500 Oops\r\nContent-Length: "
     "2\r\n"
     "\r\nefHTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\ng",
     false,
     4,
     {{200, true, "abc"}, {201, true, "d"}, {500, true, "ef"}, {200, false, "g"}}},
    {"bare lf", "HTTP/1.1 200 OK\nContent-Length: 2\n\nhi", false, 1, {{200, true, "hi"}}},
    {"cl list",
     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2, 2\r\n\r\nhi",
     false,
     1,
     {{200, true, "hi"}}},
    {"bad status line", "HTTP/1.1 20 OK\r\n\r\n", false, 0, {{0}}, -SQ_EPARSE},
    {"not http", "SSH-2.0-OpenSSH_9.2\r\n\r\n", false, 0, {{0}}, -SQ_EPARSE},
    {"negative cl", "HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nhi", false, 0, {{0}}, -SQ_EPARSE},
    {"garbage cl", "HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\nhi", false, 0, {{0}}, -SQ_EPARSE},
    {"conflicting cl",
     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi",
     false,
     0,
     {{0}},
     -SQ_EPARSE},
    {"cl and chunked",
     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
     false,
     0,
     {{0}},
     -SQ_EPARSE},
    {"obs-fold",
     "HTTP/1.1 200 OK\r\nX: a\r\n  b\r\nContent-Length: 0\r\n\r\n",
     false,
     0,
     {{0}},
     -SQ_EPARSE},
    {"too many headers",
     "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n",
     false,
     0,
     {{0}},
     -SQ_ETOOBIG,
     false,
     0,
     3},
    {"head too big",
     "HTTP/1.1 200 OK\r\nX-Long: 0123456789012345678901234567890123456789\r\n\r\n",
     false,
     0,
     {{0}},
     -SQ_ETOOBIG,
     false,
     64},
    {"second head too big",
     "HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 200 OK\r\nX-Long: 01234567890123456789"
     "01234567890123456789\r\n\r\n",
     true,
     1,
     {{200, true, ""}},
     -SQ_ETOOBIG,
     false,
     64},
    {"truncated body",
     "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
     false,
     0,
     {{0}},
     -SQ_EPARSE},
    {"truncated chunked",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
     false,
     0,
     {{0}},
     -SQ_EPARSE},
    {"truncated head", "HTTP/1.1 200 OK\r\nContent-Le", false, 0, {{0}}, -SQ_EPARSE},
    {"interim then bad",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/0.1 200 OK\r\n\r\n",
     false,
     0,
     {{0}},
     -SQ_EPARSE},
    {"interim then close", "HTTP/1.1 100 Continue\r\n\r\n", false, 0, {{0}}, -SQ_EPARSE},
    {"gzip chunked",
     "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
     "3\r\nabc\r\n0\r\n\r\n",
     false,
     1,
     {{200, true, "abc", SQ_CODING_GZIP}}},
    {"event stream after interim",
     "HTTP/1.1 103 Early Hints\r\nContent-Type: text/event-stream\r\nContent-Encoding: br\r\n"
     "\r\nHTTP/1.1 200 OK\r\ncontent-type: Text/Event-Stream; charset=utf-8\r\n"
     "Content-Length: 9\r\n\r\ndata: x\n\n",
     false,
     1,
     {{200, true, "data: x\n\n", SQ_CODING_NONE, true}}},
    {"fields are per response",
     "HTTP/1.1 200 OK\r\nContent-Encoding: zstd\r\nContent-Type: text/event-stream\r\n"
     "Content-Length: 2\r\n\r\nzzHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"
     "HTTP/1.1 204 No Content\r\nContent-Encoding: deflate\r\n\r\n",
     false,
     3,
     {{200, true, "zz", SQ_CODING_ZSTD, true},
      {200, true, "x"},
      {204, true, "", SQ_CODING_DEFLATE}}},
    {"head request with encoding",
     "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 20\r\n\r\n",
     true,
     1,
     {{200, true, "", SQ_CODING_GZIP}}},
    {"good then bad",
     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxjunk\r\n\r\n",
     false,
     1,
     {{200, true, "x"}},
     -SQ_EPARSE},
    {"good then garbage",
     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxy",
     false,
     1,
     {{200, true, "x"}},
     -SQ_EPARSE},
};
#pragma GCC diagnostic pop

struct rd_got {
    int status;
    bool ka;
    uint8_t ce;
    bool es;
    uint64_t body_bytes;
    uint32_t head_bytes;
    char *body;
    size_t body_len;
    int head_calls; /* head callback calls for this response */
    char *head;     /* what the head callback got (a copy) */
    size_t head_len;
};

/* What the head callback saw for the response in progress. */
struct head_seen {
    const struct sq_h1_reader *r;
    struct sink *s;
    int calls;
    uint8_t ce;
    bool es;
    int status;
    char *head;
    size_t head_len;
    int fail; /* != 0: return this */
};

/* The reader's callbacks share one ud: the body goes to the head_seen's sink. */
static int head_sink_cb(void *ud, const char *p, size_t n)
{
    return sink_cb(((struct head_seen *)ud)->s, p, n);
}

static int head_cb(void *ud, const char *head, size_t len)
{
    struct head_seen *h = ud;
    /* before any body byte of this response, with the public fields already set */
    assert_int_equal(h->s->len, 0);
    assert_int_equal(h->r->body.bytes, 0);
    h->calls++;
    h->ce = h->r->content_encoding;
    h->es = h->r->event_stream;
    h->status = h->r->status;
    free(h->head);
    h->head = malloc(len + 1);
    assert_non_null(h->head);
    memcpy(h->head, head, len);
    h->head_len = len;
    return h->fail;
}

struct rd_outcome {
    int n;
    struct rd_got r[8];
    int err;
    bool by_eof;
    uint32_t spill_allocs;
};

static char *big_chunked(size_t *len)
{
    /* 16 KiB payload in 1 KiB chunks, with an extension on the 8th */
    size_t cap = 20000, w = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    w += (size_t)snprintf(s + w, cap - w,
                          "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 16; i++) {
        w += (size_t)snprintf(s + w, cap - w, i == 7 ? "400;i=7\r\n" : "400\r\n");
        for (int k = 0; k < 1024; k++)
            s[w++] = (char)('a' + (i + k) % 26);
        w += (size_t)snprintf(s + w, cap - w, "\r\n");
    }
    w += (size_t)snprintf(s + w, cap - w, "0\r\n\r\n");
    *len = w;
    return s;
}

static char *big_payload(void)
{
    char *s = malloc(16 * 1024 + 1);
    assert_non_null(s);
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 1024; k++)
            s[i * 1024 + k] = (char)('a' + (i + k) % 26);
    s[16 * 1024] = '\0';
    return s;
}

static void record(struct rd_outcome *o, const struct sq_h1_reader *r, struct sink *s,
                   struct head_seen *h)
{
    assert_true(o->n < 8);
    struct rd_got *g = &o->r[o->n++];
    g->status = r->status;
    g->ka = r->keep_alive;
    g->ce = r->content_encoding;
    g->es = r->event_stream;
    g->head_calls = h->calls;
    g->head = h->head;
    g->head_len = h->head_len;
    if (h->calls) { /* the fields did not change between the head and the end */
        assert_int_equal(h->ce, r->content_encoding);
        assert_int_equal(h->es, r->event_stream);
        assert_int_equal(h->status, r->status);
    }
    h->calls = 0;
    h->head = NULL;
    h->head_len = 0;
    g->body_bytes = r->body.bytes;
    g->head_bytes = r->head_bytes;
    g->body = malloc(s->len + 1);
    assert_non_null(g->body);
    memcpy(g->body, s->buf, s->len);
    g->body_len = s->len;
    s->len = 0;
}

static void outcome_free(struct rd_outcome *o)
{
    for (int i = 0; i < o->n; i++) {
        free(o->r[i].body);
        free(o->r[i].head);
    }
    memset(o, 0, sizeof(*o));
}

/* Feeds in[0,len) like a connection would: each piece is copied into a scratch "read buffer"
 * that is wiped after the call, so the reader cannot keep pointers into it. */
static void run_reader(const struct rd_case *c, const char *in, size_t len, size_t split,
                       size_t step, bool eof, struct rd_outcome *o)
{
    static struct sink s;
    struct sq_h1_reader r;
    struct sq_h1_limits lim = {c->max_head, c->max_headers};
    struct head_seen h = {.r = &r, .s = &s};
    memset(o, 0, sizeof(*o));
    s.len = 0;
    sq_h1_reader_init(&r, &lim);
    sq_h1_reader_on_body(&r, head_sink_cb, &h);
    sq_h1_reader_on_head(&r, head_cb, &h);
    sq_h1_reader_start(&r, c->head_req);
    char *scratch = malloc(len + 1);
    assert_non_null(scratch);
    size_t off = 0;
    bool stop = false;
    while (off < len && !stop) {
        size_t n = step ? step : split && off == 0 ? split : len - off;
        if (n > len - off)
            n = len - off;
        memcpy(scratch, in + off, n);
        size_t p = 0;
        for (int guard = 0; p < n; guard++) {
            assert_true(guard < 100);
            size_t used = 99999;
            int rc = sq_h1_reader_feed(&r, scratch + p, n - p, &used);
            assert_true(used <= n - p);
            p += used;
            if (rc == SQ_H1_DONE) {
                record(o, &r, &s, &h);
                sq_h1_reader_start(&r, c->head_req);
            } else if (rc == 0) {
                assert_int_equal(p, n);
            } else {
                o->err = rc;
                stop = true;
                break;
            }
        }
        memset(scratch, 0xAA, n);
        off += n;
    }
    if (!stop && eof) {
        int rc = sq_h1_reader_eof(&r);
        if (rc == SQ_H1_DONE) {
            record(o, &r, &s, &h);
            o->by_eof = true;
        } else if (rc < 0) {
            o->err = rc;
        }
    }
    o->spill_allocs = sq_h1_reader_spill_allocs(&r);
    assert_true(sq_h1_reader_heap_bytes(&r) <= 512);
    sq_h1_reader_dispose(&r);
    free(scratch);
    free(h.head);
    /* each head the callback got is one whole final head of the input, contiguous */
    for (int i = 0; i < o->n; i++) {
        const struct rd_got *g = &o->r[i];
        if (!g->head_calls)
            continue;
        struct sq_h1_response hr = {0};
        assert_int_equal(sq_h1_parse_response_head(g->head, g->head_len, &lim, &hr),
                         (int)g->head_len);
        assert_int_equal(hr.status, g->status);
        assert_true(g->head_len <= g->head_bytes);
        assert_non_null(memmem(in, len, g->head, g->head_len));
    }
}

static void check_reader(const struct rd_case *c, const struct rd_outcome *o, const char *how,
                         size_t at, const char *big)
{
    CHECK(o->n == c->n, "%s (%s %zu): %d responses\n", c->name, how, at, o->n);
    CHECK(o->err == c->err, "%s (%s %zu): err %d\n", c->name, how, at, o->err);
    CHECK(o->by_eof == c->by_eof, "%s (%s %zu): by_eof\n", c->name, how, at);
    for (int i = 0; i < c->n; i++) {
        const char *want = c->r[i].body ? c->r[i].body : big;
        CHECK(o->r[i].status == c->r[i].status, "%s (%s %zu): #%d status %d\n", c->name, how, at, i,
              o->r[i].status);
        CHECK(o->r[i].ka == c->r[i].ka, "%s (%s %zu): #%d keep_alive\n", c->name, how, at, i);
        CHECK(o->r[i].body_len == strlen(want) && !memcmp(o->r[i].body, want, o->r[i].body_len),
              "%s (%s %zu): #%d body '%.*s'\n", c->name, how, at, i, (int)o->r[i].body_len,
              o->r[i].body);
        CHECK(o->r[i].body_bytes == o->r[i].body_len, "%s: body_bytes\n", c->name);
        CHECK(o->r[i].head_bytes > 0, "%s: head_bytes\n", c->name);
        CHECK(o->r[i].ce == c->r[i].ce && o->r[i].es == c->r[i].es,
              "%s (%s %zu): #%d content_encoding %d event_stream %d\n", c->name, how, at, i,
              o->r[i].ce, o->r[i].es);
        CHECK(o->r[i].head_calls == 1, "%s (%s %zu): #%d head callback called %d times\n", c->name,
              how, at, i, o->r[i].head_calls);
    }
    /* a head under 512 bytes never needs more than one spill allocation, kept for reuse */
    CHECK(o->spill_allocs <= 1, "%s (%s %zu): %u spill allocations\n", c->name, how, at,
          o->spill_allocs);
}

static void test_reader_table(void **state)
{
    (void)state;
    char *big = big_payload();
    for (size_t ci = 0; ci < SQ_ARRAY_LEN(rd_cases); ci++) {
        const struct rd_case *c = &rd_cases[ci];
        size_t len;
        char *in;
        if (c->in) {
            len = strlen(c->in);
            in = malloc(len + 1);
            assert_non_null(in);
            memcpy(in, c->in, len + 1);
        } else {
            in = big_chunked(&len);
        }
        struct rd_outcome o;

        run_reader(c, in, len, 0, 0, true, &o);
        check_reader(c, &o, "whole", 0, big);
        if (c->err == 0)
            CHECK(o.spill_allocs == 0, "%s: whole input must not spill\n", c->name);
        outcome_free(&o);

        run_reader(c, in, len, 0, 1, true, &o);
        check_reader(c, &o, "bytewise", 1, big);
        outcome_free(&o);

        size_t stride = len > 1024 ? len / 512 : 1;
        for (size_t k = 1; k < len; k++) {
            if (k > 256 && k + 256 < len && k % stride)
                continue;
            run_reader(c, in, len, k, 0, true, &o);
            check_reader(c, &o, "split", k, big);
            outcome_free(&o);
        }

        /* every truncated prefix of a valid stream: no error, and never the last response */
        if (c->err == 0) {
            for (size_t k = 0; k < len; k += (k > 256 && k + 256 < len ? stride : 1)) {
                run_reader(c, in, k, 0, 0, false, &o);
                CHECK(o.err == 0 && o.n < c->n, "%s: prefix %zu gave %d responses, err %d\n",
                      c->name, k, o.n, o.err);
                for (int i = 0; i < o.n; i++)
                    CHECK(o.r[i].status == c->r[i].status, "%s: prefix %zu\n", c->name, k);
                outcome_free(&o);
                run_reader(c, in, k, 0, 1, false, &o);
                CHECK(o.err == 0 && o.n < c->n, "%s: bytewise prefix %zu\n", c->name, k);
                outcome_free(&o);
            }
        }
        free(in);
    }
    free(big);
}

static void test_reader_misc(void **state)
{
    (void)state;
    struct sq_h1_reader r;
    size_t used;
    sq_h1_reader_init(&r, NULL);
    /* nothing started */
    assert_int_equal(sq_h1_reader_feed(&r, "HTTP/1.1 200 OK\r\n\r\n", 19, &used), -SQ_EUSAGE);
    assert_int_equal(sq_h1_reader_eof(&r), 0);
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_eof(&r), 0); /* started, no byte came: nothing to complete */

    /* a complete small response in one buffer: no copy, no allocation */
    const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nServer: t\r\n\r\nbodyHTTP/1.1";
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_feed(&r, resp, strlen(resp), &used), SQ_H1_DONE);
    assert_int_equal(used, strlen(resp) - 8);
    assert_int_equal(r.status, 200);
    assert_true(r.keep_alive);
    assert_int_equal(r.body.bytes, 4);
    assert_int_equal(r.head_bytes, strlen(resp) - 12);
    assert_int_equal(sq_h1_reader_spill_allocs(&r), 0);
    assert_int_equal(sq_h1_reader_heap_bytes(&r), 0);
    /* feeding after DONE without start is a usage error */
    assert_int_equal(sq_h1_reader_feed(&r, "x", 1, &used), -SQ_EUSAGE);

    /* a split small head: one spill allocation, kept (<= 512 bytes) and reused */
    for (int round = 0; round < 3; round++) {
        sq_h1_reader_start(&r, false);
        assert_int_equal(sq_h1_reader_feed(&r, resp, 20, &used), 0);
        assert_int_equal(used, 20);
        assert_int_equal(sq_h1_reader_feed(&r, resp + 20, strlen(resp) - 20, &used), SQ_H1_DONE);
        assert_int_equal(used, strlen(resp) - 20 - 8);
        assert_int_equal(r.body.bytes, 4);
    }
    assert_int_equal(sq_h1_reader_spill_allocs(&r), 1);
    assert_int_equal(sq_h1_reader_heap_bytes(&r), 512);
    sq_h1_reader_dispose(&r);
    assert_int_equal(sq_h1_reader_heap_bytes(&r), 0);

    /* a big split head: the spill grows, then is released once the head is parsed */
    sq_h1_reader_init(&r, NULL);
    char head[4096];
    size_t w = (size_t)snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nX: ");
    memset(head + w, 'v', 3000);
    w += 3000;
    w += (size_t)snprintf(head + w, sizeof(head) - w, "\r\nContent-Length: 0\r\n\r\n");
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_feed(&r, head, 100, &used), 0);
    assert_int_equal(sq_h1_reader_feed(&r, head + 100, 2000, &used), 0);
    assert_true(sq_h1_reader_heap_bytes(&r) >= 2100);
    assert_int_equal(sq_h1_reader_feed(&r, head + 2100, w - 2100, &used), SQ_H1_DONE);
    assert_int_equal(used, w - 2100);
    assert_int_equal(r.head_bytes, w);
    assert_int_equal(sq_h1_reader_heap_bytes(&r), 0);
    sq_h1_reader_dispose(&r);

    /* an error, a close or a restart in the middle of a big head releases the spill buffer */
    for (int how = 0; how < 3; how++) {
        sq_h1_reader_init(&r, NULL);
        sq_h1_reader_start(&r, false);
        assert_int_equal(sq_h1_reader_feed(&r, head, 100, &used), 0);
        assert_int_equal(sq_h1_reader_feed(&r, head + 100, 2000, &used), 0);
        assert_true(sq_h1_reader_heap_bytes(&r) >= 2100);
        if (how == 0)
            assert_int_equal(sq_h1_reader_feed(&r, "\x01\r\n\r\n", 5, &used), -SQ_EPARSE);
        else if (how == 1)
            assert_int_equal(sq_h1_reader_eof(&r), -SQ_EPARSE);
        else
            sq_h1_reader_start(&r, false);
        assert_int_equal(sq_h1_reader_heap_bytes(&r), 0);
        sq_h1_reader_dispose(&r);
    }

    /* a head at exactly the limit passes, one byte more does not (whole and split) */
    for (int extra = 0; extra < 2; extra++) {
        for (int split = 0; split < 2; split++) {
            struct sq_h1_limits lim = {.max_head_bytes = w - 1 + (size_t)(extra ? 0 : 1)};
            sq_h1_reader_init(&r, &lim);
            sq_h1_reader_start(&r, false);
            int rc;
            if (split) {
                rc = sq_h1_reader_feed(&r, head, 10, &used);
                assert_int_equal(rc, 0);
                rc = sq_h1_reader_feed(&r, head + 10, w - 10, &used);
            } else {
                rc = sq_h1_reader_feed(&r, head, w, &used);
            }
            assert_int_equal(rc, extra ? -SQ_ETOOBIG : SQ_H1_DONE);
            sq_h1_reader_dispose(&r);
        }
    }

    /* endless interim responses are cut off */
    sq_h1_reader_init(&r, NULL);
    sq_h1_reader_start(&r, false);
    int rc = 0;
    for (int i = 0; i <= SQ_H1_MAX_INTERIM && rc == 0; i++)
        rc = sq_h1_reader_feed(&r, "HTTP/1.1 100 Continue\r\n\r\n", 25, &used);
    assert_int_equal(rc, -SQ_ETOOBIG);
    sq_h1_reader_dispose(&r);

    /* the reader may be restarted after an error */
    sq_h1_reader_init(&r, NULL);
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_feed(&r, "garbage\r\n\r\n", 11, &used), -SQ_EPARSE);
    assert_int_equal(sq_h1_reader_feed(&r, "x", 1, &used), -SQ_EUSAGE);
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_feed(&r, resp, strlen(resp), &used), SQ_H1_DONE);
    sq_h1_reader_dispose(&r);
}

/* The head callback: once per final response, the whole head contiguous - from the caller's
 * buffer when it came in one piece, from the spill buffer when split - before any body byte. */
/* A fields callback sees the head with the fields the reader parsed: spans into that head, in
 * order, at every split of the stream (in place, or out of the spill buffer). */
struct fields_seen {
    int calls;
    size_t head_len, n;
    char names[8][32], values[8][64];
    bool inside; /* every span lies inside the head it came with */
};

static int fields_cb(void *ud, const char *head, size_t len, const struct sq_h1_header *f, size_t n)
{
    struct fields_seen *fs = ud;
    fs->calls++;
    fs->head_len = len;
    fs->n = n;
    fs->inside = true;
    for (size_t i = 0; i < n && i < 8; i++) {
        fs->inside &= f[i].name >= head && f[i].name + f[i].name_len <= head + len;
        fs->inside &= f[i].value >= head && f[i].value + f[i].value_len <= head + len;
        snprintf(fs->names[i], sizeof(fs->names[i]), "%.*s", (int)f[i].name_len, f[i].name);
        snprintf(fs->values[i], sizeof(fs->values[i]), "%.*s", (int)f[i].value_len, f[i].value);
    }
    return 0;
}

static void test_reader_fields_callback(void **state)
{
    (void)state;
    static const char in[] = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                             "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-Id:  42 \r\n"
                             "Content-Length: 2\r\n\r\nhi";
    size_t len = sizeof(in) - 1;
    struct sq_h1_reader r;
    struct fields_seen fs;
    size_t used;
    sq_h1_reader_init(&r, NULL);
    sq_h1_reader_on_fields(&r, fields_cb, &fs);
    for (size_t k = 1; k <= len; k++) {
        char *a = malloc(k), *b = malloc(len - k + 1);
        assert_non_null(a);
        assert_non_null(b);
        memcpy(a, in, k);
        memcpy(b, in + k, len - k);
        memset(&fs, 0, sizeof(fs));
        sq_h1_reader_start(&r, false);
        int rc = sq_h1_reader_feed(&r, a, k, &used);
        size_t p = used;
        if (k < len) {
            assert_int_equal(rc, 0);
            rc = sq_h1_reader_feed(&r, b, len - k, &used);
            p += used;
        }
        assert_int_equal(rc, SQ_H1_DONE);
        assert_int_equal(p, len);
        assert_int_equal(fs.calls, 1); /* the final head only, never the 103 */
        assert_int_equal(fs.n, 3);
        assert_true(fs.inside);
        assert_string_equal(fs.names[0], "Set-Cookie");
        assert_string_equal(fs.values[0], "a=1");
        assert_string_equal(fs.names[1], "X-Id");
        assert_string_equal(fs.values[1], "42");
        assert_string_equal(fs.names[2], "Content-Length");
        assert_int_equal(r.status, 200);
        assert_int_equal(r.body.bytes, 2);
        free(a);
        free(b);
    }
    /* more fields than a fields callback can take: refused, as max_headers would */
    char big[8192];
    size_t n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i <= SQ_H1_READER_MAX_FIELDS; i++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "X-%d: v\r\n", i);
    n += (size_t)snprintf(big + n, sizeof(big) - n, "Content-Length: 0\r\n\r\n");
    struct sq_h1_limits lim = {.max_headers = 1000};
    sq_h1_reader_dispose(&r);
    sq_h1_reader_init(&r, &lim);
    sq_h1_reader_on_fields(&r, fields_cb, &fs);
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_feed(&r, big, n, &used), -SQ_ETOOBIG);
    /* the plain head callback (set again) takes the same head */
    sq_h1_reader_on_head(&r, NULL, NULL);
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_feed(&r, big, n, &used), SQ_H1_DONE);
    sq_h1_reader_dispose(&r);
}

static void test_reader_head_callback(void **state)
{
    (void)state;
    static const char interim[] = "HTTP/1.1 100 Continue\r\n\r\n";
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
                               "Content-Type: text/event-stream\r\nContent-Length: 5\r\n\r\n";
    char in[256];
    size_t ilen = sizeof(interim) - 1, hlen = sizeof(head) - 1;
    memcpy(in, interim, ilen);
    memcpy(in + ilen, head, hlen);
    memcpy(in + ilen + hlen, "hello", 5);
    size_t len = ilen + hlen + 5;
    static struct sink s;
    struct sq_h1_reader r;
    struct head_seen h = {.r = &r, .s = &s};
    size_t used;
    sq_h1_reader_init(&r, NULL);
    sq_h1_reader_on_body(&r, head_sink_cb, &h);
    sq_h1_reader_on_head(&r, head_cb, &h);

    /* whole: the callback sees the caller's buffer, just past the interim head */
    s.len = 0;
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_feed(&r, in, len, &used), SQ_H1_DONE);
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.head_len, hlen);
    assert_memory_equal(h.head, head, hlen);
    assert_int_equal(h.ce, SQ_CODING_GZIP);
    assert_true(h.es);
    assert_int_equal(s.len, 5);

    /* split at every point: the same head, contiguous, once */
    for (size_t k = 1; k < len; k++) {
        char *a = malloc(k), *b = malloc(len - k);
        assert_non_null(a);
        assert_non_null(b);
        memcpy(a, in, k);
        memcpy(b, in + k, len - k);
        h.calls = 0;
        s.len = 0;
        sq_h1_reader_start(&r, false);
        int rc = sq_h1_reader_feed(&r, a, k, &used);
        size_t p = used;
        assert_true(rc == 0 || (rc == SQ_H1_DONE && k == len));
        memset(a, 0xAA, k); /* the reader must not keep pointers into an old read */
        assert_int_equal(sq_h1_reader_feed(&r, b, len - k, &used), SQ_H1_DONE);
        p += used;
        assert_int_equal(p, len);
        assert_int_equal(h.calls, 1);
        assert_int_equal(h.head_len, hlen);
        assert_memory_equal(h.head, head, hlen);
        assert_int_equal(s.len, 5);
        assert_memory_equal(s.buf, "hello", 5);
        free(a);
        free(b);
    }

    /* an error from the callback stops the response before its body */
    h.calls = 0;
    h.fail = -99;
    s.len = 0;
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_feed(&r, in, len, &used), -99);
    assert_int_equal(h.calls, 1);
    assert_int_equal(s.len, 0);
    /* ...also from the spill path */
    h.calls = 0;
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_feed(&r, in, ilen + 10, &used), 0);
    assert_int_equal(sq_h1_reader_feed(&r, in + ilen + 10, len - ilen - 10, &used), -99);
    assert_int_equal(h.calls, 1);
    assert_int_equal(s.len, 0);
    assert_int_equal(sq_h1_reader_heap_bytes(&r), 512);

    /* no callback: nothing is called */
    h.calls = 0;
    h.fail = 0;
    sq_h1_reader_on_head(&r, NULL, NULL);
    sq_h1_reader_start(&r, false);
    assert_int_equal(sq_h1_reader_feed(&r, in, len, &used), SQ_H1_DONE);
    assert_int_equal(h.calls, 0);
    assert_int_equal(r.content_encoding, SQ_CODING_GZIP);
    assert_true(r.event_stream);
    /* a new response clears the fields */
    sq_h1_reader_start(&r, false);
    assert_int_equal(r.content_encoding, SQ_CODING_NONE);
    assert_false(r.event_stream);
    sq_h1_reader_dispose(&r);
    free(h.head);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_response_heads),       cmocka_unit_test(test_response_header_spans),
        cmocka_unit_test(test_char_classes),         cmocka_unit_test(test_request_heads),
        cmocka_unit_test(test_host_and_media_type),  cmocka_unit_test(test_body_framer),
        cmocka_unit_test(test_body_callback_error),  cmocka_unit_test(test_reader_table),
        cmocka_unit_test(test_reader_misc),          cmocka_unit_test(test_response_fields),
        cmocka_unit_test(test_reader_head_callback), cmocka_unit_test(test_reader_fields_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
