/* tests/unit/test_server.c - server/ and target/: routing, helpers, counters, and a live
 * in-process server driven over loopback sockets (pipelining, split input, chunked bodies,
 * delayed answers, streamed fills, limits). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/clock.h"
#include "server/server.h"
#include "target/target.h"

/* ---- routing and helpers ---- */

static struct sq_target_route route(const char *method, const char *path)
{
    return sq_target_route(method, strlen(method), path, strlen(path));
}

static void test_route(void **state)
{
    (void)state;
    struct sq_target_route r;
    assert_int_equal(route("GET", "/fast").ep, SQ_TARGET_EP_FAST);
    assert_int_equal(route("POST", "/fast?x=1").ep, SQ_TARGET_EP_FAST);
    assert_int_equal(route("GET", "/fast/").ep, SQ_TARGET_EP_NOT_FOUND);
    assert_int_equal(route("GET", "/fastx").ep, SQ_TARGET_EP_NOT_FOUND);
    assert_int_equal(route("GET", "/ok").ep, SQ_TARGET_EP_OK);
    assert_int_equal(route("PUT", "/echo").ep, SQ_TARGET_EP_ECHO);
    assert_int_equal(route("GET", "/").ep, SQ_TARGET_EP_NOT_FOUND);
    assert_int_equal(route("GET", "").ep, SQ_TARGET_EP_NOT_FOUND);
    assert_int_equal(route("GET", "*").ep, SQ_TARGET_EP_NOT_FOUND);
    assert_int_equal(route("GET", "http://x:1/fast?q").ep, SQ_TARGET_EP_FAST);
    assert_int_equal(route("GET", "https://x/ok").ep, SQ_TARGET_EP_OK);
    assert_int_equal(route("GET", "http://x").ep, SQ_TARGET_EP_NOT_FOUND);
    assert_int_equal(route("GET", "ftp://x/fast").ep, SQ_TARGET_EP_NOT_FOUND);

    r = route("GET", "/bytes/1234?x");
    assert_int_equal(r.ep, SQ_TARGET_EP_BYTES);
    assert_false(r.bad_arg);
    assert_int_equal(r.arg, 1234);
    r = route("GET", "/bytes/67108864");
    assert_false(r.bad_arg);
    assert_true(route("GET", "/bytes/67108865").bad_arg);
    assert_true(route("GET", "/bytes/").bad_arg);
    assert_true(route("GET", "/bytes/1a").bad_arg);
    assert_true(route("GET", "/bytes/-1").bad_arg);
    assert_true(route("GET", "/bytes/99999999999999999999999").bad_arg);

    r = route("GET", "/delay/60000");
    assert_int_equal(r.ep, SQ_TARGET_EP_DELAY);
    assert_int_equal(r.arg, 60000);
    assert_false(r.bad_arg);
    assert_true(route("GET", "/delay/60001").bad_arg);

    r = route("GET", "/status/503");
    assert_int_equal(r.ep, SQ_TARGET_EP_STATUS);
    assert_int_equal(r.arg, 503);
    assert_false(r.bad_arg);
    assert_false(route("GET", "/status/200").bad_arg);
    assert_false(route("GET", "/status/599").bad_arg);
    assert_true(route("GET", "/status/199").bad_arg);
    assert_true(route("GET", "/status/100").bad_arg);
    assert_true(route("GET", "/status/600").bad_arg);
    assert_true(route("GET", "/status/0200").bad_arg);
    assert_true(route("GET", "/status/20").bad_arg);

    assert_int_equal(route("GET", "/stats").ep, SQ_TARGET_EP_STATS);
    assert_int_equal(route("HEAD", "/stats").ep, SQ_TARGET_EP_STATS);
    assert_int_equal(route("POST", "/stats").ep, SQ_TARGET_EP_NOT_FOUND);
    assert_int_equal(route("POST", "/stats/reset").ep, SQ_TARGET_EP_STATS_RESET);
    assert_int_equal(route("GET", "/stats/reset").ep, SQ_TARGET_EP_NOT_FOUND);
    assert_string_equal(sq_target_ep_name(SQ_TARGET_EP_STATS_RESET), "stats");
    assert_string_equal(sq_target_ep_name(SQ_TARGET_EP_NOT_FOUND), "not_found");
}

static void test_parse_u64(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_true(sq_target_parse_u64("0", 1, 10, &v));
    assert_int_equal(v, 0);
    assert_true(sq_target_parse_u64("10", 2, 10, &v));
    assert_int_equal(v, 10);
    assert_false(sq_target_parse_u64("11", 2, 10, &v));
    assert_false(sq_target_parse_u64("", 0, 10, &v));
    assert_false(sq_target_parse_u64("+1", 2, 10, &v));
    assert_false(sq_target_parse_u64("1 ", 2, 10, &v));
    assert_true(sq_target_parse_u64("9999999999999999999", 19, UINT64_MAX, &v));
    assert_false(sq_target_parse_u64("18446744073709551615", 20, UINT64_MAX, &v));
}

static void check_escape(const char *in, size_t n, const char *want)
{
    char out[256];
    size_t len = sq_target_json_escape(out, sizeof(out), in, n);
    assert_true(len <= 6 * n);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(out, want, len);
    /* a short buffer reports the same length and writes no further than its capacity */
    char small[4] = {'#', '#', '#', '#'};
    assert_int_equal(sq_target_json_escape(small, 2, in, n), len);
    assert_int_equal(small[2], '#');
}

static void test_json_escape(void **state)
{
    (void)state;
    check_escape("plain", 5, "plain");
    check_escape("a\"b\\c", 5, "a\\\"b\\\\c");
    check_escape("\n\r\t\b\f", 5, "\\n\\r\\t\\b\\f");
    check_escape("\x01\x1f\x7f", 3, "\\u0001\\u001f\x7f");
    check_escape("nul\0x", 5, "nul\\u0000x");
    check_escape("h\xc3\xa9", 3, "h\xc3\xa9");                /* é passes through */
    check_escape("\xe2\x98\x83", 3, "\xe2\x98\x83");          /* U+2603 */
    check_escape("\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80");  /* U+1F600 */
    check_escape("\xff", 1, "\\u00ff");                       /* not UTF-8 */
    check_escape("\xc3", 1, "\\u00c3");                       /* truncated */
    check_escape("\xc0\xaf", 2, "\\u00c0\\u00af");            /* overlong */
    check_escape("\xed\xa0\x80", 3, "\\u00ed\\u00a0\\u0080"); /* surrogate */
}

static void test_utf8_base64(void **state)
{
    (void)state;
    assert_true(sq_target_utf8_valid("", 0));
    assert_true(sq_target_utf8_valid("abc\xc3\xa9\xe2\x98\x83", 8));
    assert_false(sq_target_utf8_valid("\xc3", 1));
    assert_false(sq_target_utf8_valid("\xc0\x80", 2));
    assert_false(sq_target_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    assert_false(sq_target_utf8_valid("\x80", 1));

    static const struct {
        const char *in, *out;
    } v[] = {{"", ""},
             {"f", "Zg=="},
             {"fo", "Zm8="},
             {"foo", "Zm9v"},
             {"foob", "Zm9vYg=="},
             {"fooba", "Zm9vYmE="},
             {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char out[16];
        size_t n = sq_target_base64(out, v[i].in, strlen(v[i].in));
        assert_int_equal(n, strlen(v[i].out));
        assert_memory_equal(out, v[i].out, n);
    }
    char out[8];
    assert_int_equal(sq_target_base64(out, "\xff\x00\xfe", 3), 4);
    assert_memory_equal(out, "/wD+", 4);
}

static void test_counters(void **state)
{
    (void)state;
    struct sq_target_counters *c = sq_target_counters_new(3);
    assert_non_null(c);
    uint64_t v[SQ_TARGET_NCOUNTERS];
    uint64_t extra[4] = {10, 1, 2, 3};

    for (int s = 0; s < 3; s++)
        for (int k = 0; k <= s; k++)
            sq_target_counters_bump(c, s, SQ_TARGET_EP_FAST);
    sq_target_counters_bump(c, 2, SQ_TARGET_EP_ECHO);
    assert_int_equal(sq_target_counters_sum(c, SQ_TARGET_EP_FAST), 6);
    assert_int_equal(sq_target_counters_sum(c, SQ_TARGET_EP_ECHO), 1);
    assert_int_equal(sq_target_counters_sum(c, SQ_TARGET_C_400), 0); /* not a shard slot */

    sq_target_counters_read(c, extra, v);
    assert_int_equal(v[SQ_TARGET_EP_FAST], 6);
    assert_int_equal(v[SQ_TARGET_EP_ECHO], 1);
    assert_int_equal(v[SQ_TARGET_EP_OK], 0);
    assert_int_equal(v[SQ_TARGET_C_ACCEPTED], 10);
    assert_int_equal(v[SQ_TARGET_C_431], 3);

    /* reset stores a baseline; counting goes on from zero */
    sq_target_counters_reset(c, extra);
    sq_target_counters_read(c, extra, v);
    for (int i = 0; i < SQ_TARGET_NCOUNTERS; i++)
        assert_int_equal(v[i], 0);
    sq_target_counters_bump(c, 1, SQ_TARGET_EP_FAST);
    extra[0] = 12;
    extra[2] = 5;
    sq_target_counters_read(c, extra, v);
    assert_int_equal(v[SQ_TARGET_EP_FAST], 1);
    assert_int_equal(v[SQ_TARGET_C_ACCEPTED], 2);
    assert_int_equal(v[SQ_TARGET_C_413], 3);
    assert_int_equal(sq_target_counters_sum(c, SQ_TARGET_EP_FAST), 7); /* raw sums untouched */

    /* a value below its baseline (a racing reset) reads as 0, never wraps */
    extra[0] = 1;
    sq_target_counters_read(c, extra, v);
    assert_int_equal(v[SQ_TARGET_C_ACCEPTED], 0);

    sq_target_counters_free(c);
    sq_target_counters_free(NULL);
    assert_null(sq_target_counters_new(0));
}

static void test_reason(void **state)
{
    (void)state;
    assert_string_equal(sq_server_reason(200), "OK");
    assert_string_equal(sq_server_reason(404), "Not Found");
    assert_string_equal(sq_server_reason(431), "Request Header Fields Too Large");
    assert_string_equal(sq_server_reason(299), "");
}

/* ---- a live server over loopback ---- */

static int client(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void send_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
        assert_true(k > 0);
        s += k;
        n -= (size_t)k;
    }
}

static void send_str(int fd, const char *s)
{
    send_all(fd, s, strlen(s));
}

/* A response read off a blocking socket; leftover bytes stay in the reader. */
struct reader {
    int fd;
    char *buf;
    size_t len, cap;
};

struct resp {
    int status;
    long clen;
    char head[1024];
    char *body;
    size_t body_len;
};

static bool fill(struct reader *r)
{
    if (r->cap - r->len < 65536) {
        r->cap = r->cap * 2 + 65536;
        r->buf = realloc(r->buf, r->cap);
        assert_non_null(r->buf);
    }
    ssize_t n = recv(r->fd, r->buf + r->len, r->cap - r->len, 0);
    if (n <= 0)
        return false;
    r->len += (size_t)n;
    return true;
}

static void read_resp(struct reader *r, struct resp *out, bool head_req)
{
    char *end;
    for (;;) {
        end = r->len ? memmem(r->buf, r->len, "\r\n\r\n", 4) : NULL;
        if (end)
            break;
        assert_true(fill(r));
    }
    size_t hl = (size_t)(end + 4 - r->buf);
    assert_true(hl < sizeof(out->head));
    memcpy(out->head, r->buf, hl);
    out->head[hl] = '\0';
    assert_int_equal(sscanf(out->head, "HTTP/1.1 %d", &out->status), 1);
    const char *cl = strstr(out->head, "Content-Length: ");
    out->clen = cl ? atol(cl + 16) : -1;
    size_t blen = head_req || out->clen < 0 ? 0 : (size_t)out->clen;
    while (r->len < hl + blen)
        assert_true(fill(r));
    out->body = malloc(blen + 1);
    memcpy(out->body, r->buf + hl, blen);
    out->body[blen] = '\0';
    out->body_len = blen;
    memmove(r->buf, r->buf + hl + blen, r->len - hl - blen);
    r->len -= hl + blen;
}

static bool at_eof(struct reader *r)
{
    char c;
    ssize_t n = recv(r->fd, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void test_target_live(void **state)
{
    (void)state;
    struct sq_target_config cfg = {.host = "127.0.0.1", .port = 0, .threads = 2};
    struct sq_target *t = NULL;
    const char *why = NULL;
    assert_int_equal(sq_target_start(&cfg, &t, &why), 0);
    uint16_t port = sq_target_port(t);
    assert_true(port > 0);

    int fd = client(port);
    struct reader rd = {.fd = fd};
    struct resp r;

    /* pipelined, with a delayed answer in the middle: order is kept */
    int64_t t0 = sq_now_ns();
    send_str(fd, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /delay/30 HTTP/1.1\r\nHost: x\r\n\r\n"
                 "HEAD /bytes/100000 HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /bytes/100000 HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "hello world");
    free(r.body);
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.clen, 0);
    assert_true(sq_now_ns() - t0 >= 30 * SQ_NS_PER_MS);
    free(r.body);
    read_resp(&rd, &r, true);
    assert_int_equal(r.clen, 100000);
    free(r.body);
    read_resp(&rd, &r, false);
    assert_int_equal(r.body_len, 100000);
    for (size_t i = 0; i < r.body_len; i++)
        if (r.body[i] != "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[i % 64])
            fail_msg("pattern mismatch at %zu", i);
    free(r.body);

    /* a chunked echo split over many writes, one byte at a time near the chunk lines */
    const char *req = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\n\r\n";
    for (size_t i = 0; req[i]; i++) {
        send_all(fd, req + i, 1);
        if (i % 5 == 0)
            usleep(1000);
    }
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"body\":\"abcdefg\""));
    free(r.body);

    /* stats count what was served (the /stats read itself is not in its own figures) */
    send_str(fd, "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&rd, &r, false);
    assert_non_null(strstr(r.body, "\"requests\":5,"));
    assert_non_null(strstr(r.body, "\"bytes\":2,"));
    assert_non_null(strstr(r.body, "\"connections\":1,"));
    free(r.body);

    /* an oversized head: 431, then the connection closes */
    char big[10000];
    memset(big, 'a', sizeof(big));
    send_str(fd, "GET /fast HTTP/1.1\r\nX-Big: ");
    send_all(fd, big, sizeof(big));
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 431);
    assert_non_null(strstr(r.head, "Connection: close\r\n"));
    free(r.body);
    assert_true(at_eof(&rd));
    close(fd);
    free(rd.buf);

    sq_target_stop(t);
    sq_target_wait(t);
    sq_target_free(t);
}

/* A handler of our own: fills with a 7-byte block, parks, closes on request. */
static const char seven[] = "0123456";

static void handler(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    (void)ud;
    if (req->path_len == 5 && memcmp(req->path, "/fill", 5) == 0) {
        resp->fill = seven;
        resp->fill_len = 7;
        resp->fill_total = 3000000;
        resp->body = "head:";
        resp->body_len = 5;
    } else if (req->path_len == 5 && memcmp(req->path, "/park", 5) == 0) {
        resp->status = 202;
        resp->content_type = "text/plain";
        resp->body = "parked";
        resp->body_len = 6;
        resp->delay_ns = 20 * SQ_NS_PER_MS;
        resp->close = true;
    } else {
        const struct sq_h1_header *h = sq_server_req_header(req, "x-ECHO");
        resp->status = 299;
        resp->headers = "X-A: 1\r\nX-B: 2\r\n";
        resp->headers_len = strlen(resp->headers);
        if (h) {
            resp->body = h->value;
            resp->body_len = h->value_len;
        }
    }
}

static void test_server_custom_handler(void **state)
{
    (void)state;
    struct sq_server_config cfg = {.port = 0, .threads = 1, .handler = handler};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    assert_int_equal(sq_server_threads(s), 1);
    int fd = client(sq_server_port(s));
    struct reader rd = {.fd = fd};
    struct resp r;

    send_str(fd, "GET /hdr HTTP/1.1\r\nX-Echo: value 1\r\n\r\n"
                 "GET /fill HTTP/1.1\r\n\r\n"
                 "GET /park HTTP/1.1\r\n\r\n"
                 "GET /never HTTP/1.1\r\n\r\n");
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 299);
    assert_string_equal(r.body, "value 1");
    assert_string_equal(r.head, "HTTP/1.1 299 \r\nContent-Length: 7\r\nX-A: 1\r\nX-B: 2\r\n\r\n");
    free(r.body);
    read_resp(&rd, &r, false);
    assert_int_equal(r.body_len, 3000005);
    assert_memory_equal(r.body, "head:0123456012", 15);
    for (size_t i = 5; i < r.body_len; i++)
        if (r.body[i] != seven[(i - 5) % 7])
            fail_msg("fill mismatch at %zu", i);
    free(r.body);
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 202);
    assert_string_equal(r.body, "parked");
    assert_non_null(strstr(r.head, "Connection: close\r\n"));
    assert_non_null(strstr(r.head, "Content-Type: text/plain\r\n"));
    free(r.body);
    assert_true(at_eof(&rd)); /* /never was not answered */
    close(fd);
    free(rd.buf);

    struct sq_server_counts c;
    sq_server_counts(s, &c);
    assert_int_equal(c.accepted, 1);
    assert_int_equal(c.requests, 3);
    assert_int_equal(c.bad_req + c.too_large + c.head_big, 0);
    sq_server_free(s);
    sq_server_free(NULL);
}

static void test_server_bad_config(void **state)
{
    (void)state;
    struct sq_server *s = NULL;
    struct sq_server_config cfg = {.threads = 0, .handler = handler};
    assert_int_equal(sq_server_start(&cfg, &s, NULL), -EINVAL);
    cfg.threads = 1;
    cfg.handler = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), -EINVAL);
    cfg.handler = handler;
    cfg.host = "no.such.host.invalid";
    const char *why = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, &why), -SQ_ERESOLVE);
    assert_non_null(why);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route),
        cmocka_unit_test(test_parse_u64),
        cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_utf8_base64),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_reason),
        cmocka_unit_test(test_target_live),
        cmocka_unit_test(test_server_custom_handler),
        cmocka_unit_test(test_server_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
