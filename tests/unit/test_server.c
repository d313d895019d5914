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
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>

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

static void test_counters(void **state)
{
    (void)state;
    struct sq_target_counters *c = sq_target_counters_new(3);
    assert_non_null(c);
    uint64_t v[SQ_TARGET_NCOUNTERS];
    uint64_t extra[SQ_TARGET_NEXTRA] = {10, 1, 2, 3, 1, 4, 5, 6, 7};

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
    assert_int_equal(v[SQ_TARGET_C_SMUGGLING], 1);
    assert_int_equal(v[SQ_TARGET_C_REFUSED], 4);
    assert_int_equal(v[SQ_TARGET_C_IDLE_TO], 5);
    assert_int_equal(v[SQ_TARGET_C_HEADER_TO], 6);
    assert_int_equal(v[SQ_TARGET_C_BODY_TO], 7);

    /* reset stores a baseline; counting goes on from zero */
    sq_target_counters_reset(c, extra);
    sq_target_counters_read(c, extra, v);
    for (int i = 0; i < SQ_TARGET_NCOUNTERS; i++)
        assert_int_equal(v[i], 0);
    sq_target_counters_bump(c, 1, SQ_TARGET_EP_FAST);
    extra[0] = 12;
    extra[2] = 5;
    extra[7] = 9;
    sq_target_counters_read(c, extra, v);
    assert_int_equal(v[SQ_TARGET_EP_FAST], 1);
    assert_int_equal(v[SQ_TARGET_C_ACCEPTED], 2);
    assert_int_equal(v[SQ_TARGET_C_413], 3);
    assert_int_equal(v[SQ_TARGET_C_HEADER_TO], 3);
    assert_int_equal(sq_target_counters_sum(c, SQ_TARGET_EP_FAST), 7); /* raw sums untouched */

    /* a value below its baseline (a racing reset) reads as 0, never wraps */
    extra[0] = 1;
    sq_target_counters_read(c, extra, v);
    assert_int_equal(v[SQ_TARGET_C_ACCEPTED], 0);

    sq_target_counters_free(c);
    sq_target_counters_free(NULL);
    assert_null(sq_target_counters_new(0));
}

/* ---- arrival gaps ---- */

static void gaps_of(struct sq_target_run *runs, size_t n, struct sq_target_gaps *g)
{
    memset(g, 0xab, sizeof(*g));
    assert_int_equal(sq_target_gaps(runs, n, g), 0);
}

/* HDR percentiles are a bucket's highest equivalent value: within 0.1% above the true value. */
static void assert_near(double got, double want)
{
    if (!(got >= want * 0.999 && got <= want * 1.001))
        fail_msg("got %.3f, want %.3f (0.1%%)", got, want);
}

static void test_gaps(void **state)
{
    (void)state;
    struct sq_target_gaps g;

    /* nothing, one empty run, one arrival: no gap, all 0 */
    gaps_of(NULL, 0, &g);
    assert_int_equal(g.count, 0);
    assert_true(g.p50_us == 0 && g.max_us == 0 && g.mean_us == 0);
    int64_t one[1] = {12345};
    struct sq_target_run r1[2] = {{NULL, 0}, {one, 1}};
    gaps_of(r1, 2, &g);
    assert_int_equal(g.count, 1);
    assert_true(g.p50_us == 0 && g.p99_us == 0 && g.max_us == 0 && g.mean_us == 0);

    /* three workers taking turns every 1 µs: each run alone has 3 µs gaps, merged 1 µs */
    static int64_t w[3][100];
    struct sq_target_run rr[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 100; i++)
            w[k][i] = 1000000 + 1000 * k + 3000 * i;
        rr[k] = (struct sq_target_run){w[k], 100};
    }
    gaps_of(rr, 3, &g);
    assert_int_equal(g.count, 300);
    assert_true(g.p50_us == 1.0 && g.p90_us == 1.0 && g.p99_us == 1.0);
    assert_true(g.max_us == 1.0 && g.mean_us == 1.0);

    /* 100 gaps: 90 of 1 ms, 9 of 10 ms, 1 of 100 ms, the arrivals dealt over 4 runs of
     * different lengths, one of them out of order (it is sorted first) */
    static int64_t t[101];
    t[0] = 5 * SQ_NS_PER_S;
    for (int i = 1; i <= 100; i++) {
        int64_t gap = i % 10 == 3 ? 10 * SQ_NS_PER_MS : SQ_NS_PER_MS; /* 10 of these ... */
        if (i == 53)
            gap = 100 * SQ_NS_PER_MS; /* ... one of which is the 100 ms gap */
        t[i] = t[i - 1] + gap;
    }
    static int64_t d[4][101];
    size_t dn[4] = {0};
    for (int i = 0; i <= 100; i++) {
        int k = i % 7 == 0 ? 3 : i % 3; /* uneven shares */
        d[k][dn[k]++] = t[i];
    }
    for (size_t i = 0; i < dn[2] / 2; i++) { /* reverse run 2 */
        int64_t x = d[2][i];
        d[2][i] = d[2][dn[2] - 1 - i];
        d[2][dn[2] - 1 - i] = x;
    }
    struct sq_target_run rd[5] = {
        {d[0], dn[0]}, {NULL, 0}, {d[1], dn[1]}, {d[2], dn[2]}, {d[3], dn[3]}};
    gaps_of(rd, 5, &g);
    assert_int_equal(g.count, 101);
    assert_near(g.p50_us, 1000.0);
    assert_near(g.p90_us, 1000.0);
    assert_near(g.p99_us, 10000.0);
    assert_true(g.max_us == 100000.0);                      /* exact */
    assert_true(g.mean_us == (90.0 + 90.0 + 100.0) * 10.0); /* exact: 2.8 ms */
    for (size_t i = 1; i < dn[2]; i++)
        assert_true(d[2][i - 1] <= d[2][i]); /* sorted in place */

    /* equal times on two workers (a 0 gap) and a gap past the histogram's 60 s */
    int64_t a[3] = {0, 10, 120 * SQ_NS_PER_S}, b[2] = {10, 20};
    struct sq_target_run re[2] = {{a, 3}, {b, 2}};
    gaps_of(re, 2, &g);
    assert_int_equal(g.count, 5);
    assert_true(g.p50_us == 0.01); /* merged 0, 10, 10, 20, 120 s: gaps 10, 0, 10 ns, ~120 s */
    assert_true(g.p90_us <= 60.0 * 1e6 * 1.001);               /* the histogram's top */
    assert_true(fabs(g.max_us - (120.0 * 1e6 - 0.02)) < 1e-6); /* exact, not clamped */
    assert_true(g.mean_us == (120.0 * 1e6) / 4.0);             /* exact */
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
    send_str(fd, "GET /fast HTTP/1.1\r\nHost: x\r\nX-Big: ");
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

    send_str(fd, "GET /hdr HTTP/1.1\r\nHost: x\r\nX-Echo: value 1\r\n\r\n"
                 "GET /fill HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /park HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /never HTTP/1.1\r\nHost: x\r\n\r\n");
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

/* ---- upgrades: a toy protocol that answers "<" + bytes + ">" and closes on "bye" ---- */

struct toy {
    char hdrs[64];
    int opened;
};

static atomic_int toy_closed, toy_live;

static int toy_open(void *ud, struct sq_server_conn *c)
{
    struct toy *t = ud;
    t->opened++;
    return sq_server_conn_send(c, "hello", 5);
}

static int toy_data(void *ud, struct sq_server_conn *c, const char *buf, size_t len)
{
    (void)ud;
    if (len >= 3 && memcmp(buf, "bye", 3) == 0) {
        if (sq_server_conn_send(c, "<bye>", 5) < 0)
            return -1;
        sq_server_conn_close(c, false);
        return 0;
    }
    if (len >= 4 && memcmp(buf, "fail", 4) == 0)
        return -EPROTO;
    if (sq_server_conn_send(c, "<", 1) < 0 || sq_server_conn_send(c, buf, len) < 0 ||
        sq_server_conn_send(c, ">", 1) < 0)
        return -1;
    return sq_server_conn_worker(c) == 0 ? 0 : -1;
}

static void toy_gone(void *ud)
{
    free(ud);
    atomic_fetch_add(&toy_closed, 1);
    atomic_fetch_sub(&toy_live, 1);
}

static const struct sq_server_upgrade toy_ops = {toy_open, toy_data, toy_gone};

static void upgrade_handler(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    (void)ud;
    struct toy *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    atomic_fetch_add(&toy_live, 1);
    snprintf(t->hdrs, sizeof(t->hdrs), "Upgrade: toy\r\nConnection: Upgrade\r\n");
    resp->status = req->path_len == 4 && memcmp(req->path, "/200", 4) == 0 ? 200 : 101;
    resp->headers = t->hdrs; /* points into the state: it must outlive the rendering */
    resp->headers_len = strlen(t->hdrs);
    resp->upgrade = &toy_ops;
    resp->upgrade_ud = t;
}

static void read_exact(struct reader *r, const char *want)
{
    size_t n = strlen(want);
    while (r->len < n)
        assert_true(fill(r));
    assert_memory_equal(r->buf, want, n);
    memmove(r->buf, r->buf + n, r->len - n);
    r->len -= n;
}

static void test_server_upgrade(void **state)
{
    (void)state;
    struct sq_server_config cfg = {.port = 0, .threads = 1, .handler = upgrade_handler};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    uint16_t port = sq_server_port(s);
    atomic_store(&toy_closed, 0);

    /* taken: the 101, the greeting, then the protocol; bytes behind the request in the same
     * write are the protocol's */
    int fd = client(port);
    struct reader rd = {.fd = fd};
    send_str(fd, "GET /x HTTP/1.1\r\nHost: h\r\n\r\nearly");
    read_exact(&rd, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: toy\r\nConnection: "
                    "Upgrade\r\n\r\nhello<early>");
    send_str(fd, "GET /y HTTP/1.1\r\nHost: x\r\n\r\n"); /* no longer HTTP: echoed */
    read_exact(&rd, "<GET /y HTTP/1.1\r\nHost: x\r\n\r\n>");
    send_str(fd, "bye");
    read_exact(&rd, "<bye>");
    assert_true(at_eof(&rd));
    close(fd);
    free(rd.buf);

    /* not taken (another status, HTTP/1.0, HEAD): answered as it is, the state freed after */
    const char *reqs[] = {"GET /200 HTTP/1.1\r\nHost: x\r\n\r\n", "GET /x HTTP/1.0\r\n\r\n",
                          "HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n"};
    int want[] = {200, 500, 500};
    for (int i = 0; i < 3; i++) {
        fd = client(port);
        struct reader r2 = {.fd = fd};
        struct resp r;
        send_str(fd, reqs[i]);
        read_resp(&r2, &r, i == 2);
        assert_int_equal(r.status, want[i]);
        if (want[i] == 200)
            assert_non_null(strstr(r.head, "Upgrade: toy\r\n"));
        free(r.body);
        close(fd);
        free(r2.buf);
    }

    /* a protocol error closes the connection; so does the client leaving */
    fd = client(port);
    struct reader r3 = {.fd = fd};
    send_str(fd, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    read_exact(&r3, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: toy\r\nConnection: "
                    "Upgrade\r\n\r\nhello");
    send_str(fd, "fail");
    assert_true(at_eof(&r3));
    close(fd);
    free(r3.buf);
    fd = client(port);
    send_str(fd, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    close(fd);

    for (int i = 0; i < 300 && (atomic_load(&toy_live) > 0 || atomic_load(&toy_closed) < 6); i++)
        usleep(10000);
    assert_int_equal(atomic_load(&toy_live), 0);
    assert_int_equal(atomic_load(&toy_closed), 6); /* once per state, taken or not */
    sq_server_free(s);
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
    cfg.idle_timeout_ns = -1;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), -EINVAL);
    cfg.idle_timeout_ns = 0;
    cfg.header_timeout_ns = SQ_SERVER_MAX_TIMEOUT_NS + 1;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), -EINVAL);
    cfg.header_timeout_ns = 0;
    cfg.host = "no.such.host.invalid";
    const char *why = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, &why), -SQ_ERESOLVE);
    assert_non_null(why);
}

/* Reads GET /stats off an open connection and parses it. */
static json_t *get_stats(int fd, struct reader *rd)
{
    struct resp r;
    send_str(fd, "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(rd, &r, false);
    assert_int_equal(r.status, 200);
    json_error_t err;
    json_t *j = json_loads(r.body, 0, &err);
    if (!j)
        fail_msg("bad /stats JSON: %s: %s", err.text, r.body);
    free(r.body);
    return j;
}

static json_int_t jint(json_t *j, const char *a, const char *b)
{
    json_t *v = json_object_get(j, a);
    if (b)
        v = json_object_get(v, b);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

/* Sends n pipelined /fast requests and reads their answers. */
static void fast_n(int fd, struct reader *rd, int n)
{
    char buf[64 * 40];
    size_t len = 0;
    assert_true(n <= 64);
    for (int i = 0; i < n; i++)
        len +=
            (size_t)snprintf(buf + len, sizeof(buf) - len, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n");
    send_all(fd, buf, len);
    for (int i = 0; i < n; i++) {
        struct resp r;
        read_resp(rd, &r, false);
        assert_int_equal(r.status, 200);
        free(r.body);
    }
}

static void post_reset(int fd, struct reader *rd)
{
    struct resp r;
    send_str(fd, "POST /stats/reset HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    read_resp(rd, &r, false);
    assert_int_equal(r.status, 200);
    free(r.body);
}

static void check_arrivals(int fd, struct reader *rd, json_int_t count, json_int_t dropped)
{
    json_t *j = get_stats(fd, rd);
    assert_int_equal(jint(j, "arrivals", "count"), count);
    assert_int_equal(jint(j, "arrivals_dropped", NULL), dropped);
    json_t *g = json_object_get(json_object_get(j, "arrivals"), "gap_us");
    const char *keys[] = {"p50", "p90", "p99", "max", "mean"};
    for (size_t i = 0; i < 5; i++)
        assert_true(json_is_number(json_object_get(g, keys[i])));
    assert_null(json_object_get(j, "stall")); /* only with a stall */
    json_decref(j);
}

static void test_target_arrivals(void **state)
{
    (void)state;
    /* a window of 8 per worker: fills, drops and counts, and starts over after a reset */
    struct sq_target_config cfg = {.port = 0, .threads = 1, .arrivals_cap = 6};
    struct sq_target *t = NULL;
    assert_int_equal(sq_target_start(&cfg, &t, NULL), 0);
    int fd = client(sq_target_port(t));
    struct reader rd = {.fd = fd};

    fast_n(fd, &rd, 5);
    check_arrivals(fd, &rd, 5, 0);
    check_arrivals(fd, &rd, 5, 0); /* /stats reads are not arrivals */
    fast_n(fd, &rd, 10);
    check_arrivals(fd, &rd, 8, 7);
    post_reset(fd, &rd);
    check_arrivals(fd, &rd, 0, 0); /* nor is the reset */
    fast_n(fd, &rd, 3);            /* the ring wraps: slots 0..2 again */
    check_arrivals(fd, &rd, 3, 0);
    fast_n(fd, &rd, 12);
    check_arrivals(fd, &rd, 8, 7);
    post_reset(fd, &rd);
    fast_n(fd, &rd, 8);
    check_arrivals(fd, &rd, 8, 0);

    close(fd);
    free(rd.buf);
    sq_target_free(t);

    /* bad stall settings */
    struct sq_target_config bad[] = {
        {.threads = 1, .stall_ns = 1, .stall_period_ns = 0},
        {.threads = 1, .stall_ns = 0, .stall_period_ns = 5},
        {.threads = 1, .stall_ns = 5, .stall_period_ns = 5},
        {.threads = 1, .stall_ns = -1, .stall_period_ns = 5},
        {.threads = 1, .stall_ns = SQ_TARGET_MAX_STALL_NS + 1, .stall_period_ns = INT64_MAX},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sq_target_start(&bad[i], &t, NULL), -EINVAL);
}

static void test_target_stall(void **state)
{
    (void)state;
    /* 40 ms of every 100 ms: /stats says so, and is never held itself */
    const int64_t D = 40 * SQ_NS_PER_MS, P = 100 * SQ_NS_PER_MS;
    struct sq_target_config cfg = {.port = 0, .threads = 1, .stall_ns = D, .stall_period_ns = P};
    struct sq_target *t = NULL;
    int64_t s_lo = sq_now_ns(); /* the target's start lies in [s_lo, s_hi] */
    assert_int_equal(sq_target_start(&cfg, &t, NULL), 0);
    int64_t s_hi = sq_now_ns();
    int fd = client(sq_target_port(t));
    struct reader rd = {.fd = fd};
    json_t *j = get_stats(fd, &rd);
    assert_int_equal(jint(j, "stall", "duration_ms"), 40);
    assert_int_equal(jint(j, "stall", "period_ms"), 100);
    json_decref(j);

    /* A request sent inside a window (whatever the start within [s_lo, s_hi]) is answered no
     * sooner than the window's end: /fast, a held /echo (scratch body) and a held /bytes (fill
     * tail) alike. Requests are spread over the phases by a 7 ms step. */
    static const char *reqs[] = {
        "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
        "GET /bytes/100000 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /delay/7 HTTP/1.1\r\nHost: x\r\n\r\n",
    };
    int inside = 0, fast_outside = 0;
    for (int i = 0; i < 48; i++) {
        const char *q = reqs[i % 4];
        int64_t t0 = sq_now_ns();
        send_str(fd, q);
        struct resp r;
        read_resp(&rd, &r, false);
        int64_t t1 = sq_now_ns();
        assert_int_equal(r.status, 200);
        if (i % 4 == 1)
            assert_non_null(strstr(r.body, "\"body\":\"abc\""));
        if (i % 4 == 2)
            assert_int_equal(r.body_len, 100000);
        free(r.body);
        int64_t k = (t0 - s_hi) / P, ph_hi = (t0 - s_hi) % P, ph_lo = (t0 - s_lo) - k * P;
        if (i % 4 == 3) {
            assert_true(t1 - t0 >= 7 * SQ_NS_PER_MS);
        } else if (ph_hi >= 0 && ph_lo < D) {
            inside++;
            assert_true(t1 >= s_lo + k * P + D);
        } else if (ph_hi > D + 5 * SQ_NS_PER_MS && ph_lo < P - 10 * SQ_NS_PER_MS &&
                   t1 - t0 < 5 * SQ_NS_PER_MS) {
            fast_outside++;
        }
        usleep(7000);
    }
    assert_true(inside > 0);
    assert_true(fast_outside > 0);
    close(fd);
    free(rd.buf);
    sq_target_free(t);
}

/* ---- arrival stamps and held answers in the server core ---- */

static _Atomic int64_t stamps[8];
static atomic_int nstamps;

static void stamp_handler(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    (void)ud;
    int i = atomic_load(&nstamps);
    if (i < 8) {
        atomic_store(&stamps[i], req->arrival_ns);
        atomic_store(&nstamps, i + 1);
    }
    static char buf[16]; /* valid until the call returns: rewritten by later calls */
    if (req->path_len == 5 && memcmp(req->path, "/held", 5) == 0) {
        /* a transient body, extra headers and a fill tail: rendered now, held, sent later */
        memcpy(buf, "transient", 10);
        resp->body = buf;
        resp->body_len = 9;
        resp->headers = "X-H: 1\r\n";
        resp->headers_len = 8;
        resp->fill = seven;
        resp->fill_len = 7;
        resp->fill_total = 200000;
        resp->delay_ns = 30 * SQ_NS_PER_MS;
        resp->delay_copy = true;
    } else if (req->path_len == 5 && memcmp(req->path, "/copy", 5) == 0) {
        memcpy(buf, "first", 6);
        resp->body = buf;
        resp->body_len = 5;
        resp->delay_ns = 30 * SQ_NS_PER_MS;
        resp->delay_copy = true;
        resp->close = true;
    } else if (req->path_len == 8 && memcmp(req->path, "/clobber", 8) == 0) {
        memcpy(buf, "ZZZZZ", 6); /* while /copy is held: the server must have copied it */
    } else {
        resp->body = "ok";
        resp->body_len = 2;
    }
}

static void test_server_stamps_and_held(void **state)
{
    (void)state;
    struct sq_server_config cfg = {
        .port = 0, .threads = 1, .stamp_arrivals = true, .handler = stamp_handler};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    int fd = client(sq_server_port(s));
    struct reader rd = {.fd = fd};
    struct resp r;

    /* a body that arrives 200 ms after its head: stamped when the head was parsed, before the
     * body was sent (a bound on the clock, not on how fast a loaded machine parses) */
    int64_t t0 = sq_now_ns();
    send_str(fd, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n");
    usleep(200000);
    int64_t t_body = sq_now_ns();
    send_str(fd, "hello");
    read_resp(&rd, &r, false);
    free(r.body);
    int64_t st = atomic_load(&stamps[0]);
    assert_true(st >= t0);
    assert_true(st < t_body);

    /* pipelined: one read, each request its own clock read, in order; then a held answer with
     * everything a parked one cannot keep, and the answers behind it wait */
    t0 = sq_now_ns();
    send_str(fd, "GET /b HTTP/1.1\r\nHost: x\r\n\r\nGET /held HTTP/1.1\r\nHost: x\r\n\r\nGET /c "
                 "HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&rd, &r, false);
    assert_string_equal(r.body, "ok");
    free(r.body);
    read_resp(&rd, &r, false);
    assert_true(sq_now_ns() - t0 >= 30 * SQ_NS_PER_MS);
    assert_non_null(strstr(r.head, "X-H: 1\r\n"));
    assert_int_equal(r.body_len, 200009);
    assert_memory_equal(r.body, "transient0123456", 16);
    for (size_t i = 9; i < r.body_len; i++)
        if (r.body[i] != seven[(i - 9) % 7])
            fail_msg("held fill mismatch at %zu", i);
    free(r.body);
    read_resp(&rd, &r, false);
    assert_string_equal(r.body, "ok");
    free(r.body);
    assert_int_equal(atomic_load(&nstamps), 4);
    assert_true(atomic_load(&stamps[1]) >= t0);
    assert_true(atomic_load(&stamps[2]) > atomic_load(&stamps[1])); /* a clock read each */
    assert_true(atomic_load(&stamps[2]) < t0 + 25 * SQ_NS_PER_MS);
    /* /c waited unparsed behind the held answer: stamped when parsed, after the release */
    assert_true(atomic_load(&stamps[3]) >= t0 + 30 * SQ_NS_PER_MS);

    /* a copied body, held while another connection's call rewrites the handler's buffer,
     * then the connection closes as asked */
    send_str(fd, "GET /copy HTTP/1.1\r\nHost: x\r\n\r\n");
    int fd2 = client(sq_server_port(s));
    struct reader rd2 = {.fd = fd2};
    send_str(fd2, "GET /clobber HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&rd2, &r, false);
    free(r.body);
    close(fd2);
    free(rd2.buf);
    read_resp(&rd, &r, false);
    assert_string_equal(r.body, "first");
    assert_non_null(strstr(r.head, "Connection: close\r\n"));
    free(r.body);
    assert_true(at_eof(&rd));
    close(fd);
    free(rd.buf);

    /* a held answer whose client leaves before it is sent: freed with the connection */
    fd = client(sq_server_port(s));
    send_str(fd, "GET /held HTTP/1.1\r\nHost: x\r\n\r\n");
    close(fd);
    usleep(50000);
    sq_server_free(s);
}

/* ---- limits: timeouts, the connection cap, smuggling shapes, a client that never reads ---- */

static const char big_block[] = "0123456789abcdef";

/* /slow: a plain parked answer (600 ms); /held: a held one (600 ms, extra header); /big: 256 KiB
 * by fill tail; anything else: "ok". */
static void lim_handler(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    (void)ud;
    if (req->path_len == 5 && memcmp(req->path, "/slow", 5) == 0) {
        resp->body = "slow";
        resp->body_len = 4;
        resp->delay_ns = 600 * SQ_NS_PER_MS;
    } else if (req->path_len == 5 && memcmp(req->path, "/held", 5) == 0) {
        resp->headers = "X-H: 1\r\n";
        resp->headers_len = 8;
        resp->body = "held";
        resp->body_len = 4;
        resp->delay_ns = 600 * SQ_NS_PER_MS;
    } else if (req->path_len == 4 && memcmp(req->path, "/big", 4) == 0) {
        resp->fill = big_block;
        resp->fill_len = 16;
        resp->fill_total = 256 * 1024;
    } else {
        resp->body = "ok";
        resp->body_len = 2;
    }
}

static struct sq_server *lim_start(int64_t idle_ns, int64_t header_ns, uint32_t max_conns,
                                   int threads)
{
    struct sq_server_config cfg = {.port = 0,
                                   .threads = threads,
                                   .handler = lim_handler,
                                   .idle_timeout_ns = idle_ns,
                                   .header_timeout_ns = header_ns,
                                   .max_conns = max_conns};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    return s;
}

/* Blocks until the peer closes fd (EOF or reset) and returns when, in ns since t0. */
static int64_t wait_eof(int fd, int64_t t0)
{
    char b[4096];
    for (;;) {
        ssize_t n = recv(fd, b, sizeof(b), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return sq_now_ns() - t0;
        assert_true(n > 0); /* the 10 s receive timeout fails the test */
    }
}

static uint64_t counts_of(struct sq_server *s, size_t off)
{
    struct sq_server_counts c;
    sq_server_counts(s, &c);
    return *(const uint64_t *)((const char *)&c + off);
}

/* Polls a count (or the open gauge) until it is want (at most 5 s). */
static void wait_count(struct sq_server *s, size_t off, uint64_t want)
{
    for (int i = 0; i < 500 && counts_of(s, off) != want; i++)
        usleep(10000);
    assert_int_equal(counts_of(s, off), want);
}

#define IDLE_MS 300

static void test_server_idle_timeout(void **state)
{
    (void)state;
    struct sq_server *s = lim_start(IDLE_MS * SQ_NS_PER_MS, 0, 0, 1);
    uint16_t port = sq_server_port(s);
    struct resp r;

    /* a connection that sends nothing: closed after the timeout, never before, not much after
     * (the sweep runs every 1/8 of it; a stamp lags by less than one sweep) */
    int64_t t0 = sq_now_ns();
    int quiet = client(port);
    int64_t took = wait_eof(quiet, t0);
    assert_true(took >= IDLE_MS * SQ_NS_PER_MS);
    assert_true(took < (IDLE_MS + 700) * SQ_NS_PER_MS);
    close(quiet);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, idle_timeouts)), 1);

    /* one that keeps talking outlives the timeout several times over */
    int busy = client(port);
    struct reader rb = {.fd = busy};
    for (int i = 0; i < 8; i++) {
        send_str(busy, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
        read_resp(&rb, &r, false);
        assert_string_equal(r.body, "ok");
        free(r.body);
        usleep(100 * 1000);
    }
    close(busy); /* closed by us, not by the timeout */
    free(rb.buf);

    /* answers the server parks for longer than the timeout (plain and held) are the server's
     * wait, not the client's silence; once sent, the idle clock starts again */
    int park = client(port);
    struct reader rp = {.fd = park};
    send_str(park, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&rp, &r, false);
    assert_string_equal(r.body, "slow");
    free(r.body);
    send_str(park, "GET /held HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&rp, &r, false);
    assert_string_equal(r.body, "held");
    free(r.body);
    t0 = sq_now_ns();
    took = wait_eof(park, t0);
    assert_true(took >= (IDLE_MS - 50) * SQ_NS_PER_MS); /* the stamp may precede the read */
    close(park);
    free(rp.buf);
    wait_count(s, offsetof(struct sq_server_counts, idle_timeouts), 2);

    /* a client that never reads: the server stops reading its requests (back-pressure, no
     * growing buffer) and, with no byte moving, the idle timeout closes it */
    int deaf = client(port);
    int small = 4096;
    setsockopt(deaf, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    uint64_t before = counts_of(s, offsetof(struct sq_server_counts, requests));
    for (int i = 0; i < 200; i++)
        send_str(deaf, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_count(s, offsetof(struct sq_server_counts, idle_timeouts), 3);
    uint64_t served = counts_of(s, offsetof(struct sq_server_counts, requests)) - before;
    assert_true(served >= 1);
    assert_true(served < 100); /* 256 KiB each: the socket buffers hold a few, not 200 */
    close(deaf);
    wait_count(s, offsetof(struct sq_server_counts, open), 0);
    sq_server_free(s);
}

static void test_server_header_timeout(void **state)
{
    (void)state;
    struct sq_server *s = lim_start(0, IDLE_MS * SQ_NS_PER_MS, 0, 1);
    uint16_t port = sq_server_port(s);
    struct resp r;

    /* slowloris: a byte every 30 ms, never a whole head: 408 and a close */
    int slow = client(port);
    struct reader rs = {.fd = slow};
    const char *head = "GET /x HTTP/1.1\r\nHost: y\r\nX-Slow: ";
    int64_t t0 = sq_now_ns();
    for (size_t i = 0; head[i]; i++) {
        send_all(slow, head + i, 1);
        usleep(30 * 1000);
        if (counts_of(s, offsetof(struct sq_server_counts, header_timeouts)))
            break;
    }
    read_resp(&rs, &r, false);
    int64_t took = sq_now_ns() - t0;
    assert_int_equal(r.status, 408);
    assert_non_null(strstr(r.head, "Connection: close\r\n"));
    free(r.body);
    assert_true(took >= IDLE_MS * SQ_NS_PER_MS);
    assert_true(took < (IDLE_MS + 700) * SQ_NS_PER_MS);
    assert_true(at_eof(&rs));
    close(slow);
    free(rs.buf);

    /* a whole head, then a slow body: the head timeout is over once the head is in */
    int body = client(port);
    struct reader rbd = {.fd = body};
    send_str(body, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n");
    for (int i = 0; i < 8; i++) {
        usleep(80 * 1000);
        send_str(body, "b");
    }
    read_resp(&rbd, &r, false);
    assert_int_equal(r.status, 200);
    free(r.body);

    /* a head pipelined behind a parked answer could not be read meanwhile: its clock starts
     * when the connection reads again */
    send_str(body, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /x HTTP/1.1\r\nHo");
    read_resp(&rbd, &r, false);
    assert_string_equal(r.body, "slow");
    free(r.body);
    usleep(100 * 1000);
    send_str(body, "st: y\r\n\r\n");
    read_resp(&rbd, &r, false);
    assert_string_equal(r.body, "ok");
    free(r.body);

    /* a connection between requests is not reading a head: no idle timeout here, so it stays */
    usleep((IDLE_MS + 400) * 1000);
    send_str(body, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&rbd, &r, false);
    assert_string_equal(r.body, "ok");
    free(r.body);
    close(body);
    free(rbd.buf);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, header_timeouts)), 1);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, idle_timeouts)), 0);
    sq_server_free(s);
}

/* A body dripped a byte at a time never lets the idle timeout fire: the minimum rate and the
 * whole-request deadline bound it (408 with a JSON body naming the limit). */
static void test_server_slow_body(void **state)
{
    (void)state;
    struct sq_server_config cfg = {.port = 0,
                                   .threads = 1,
                                   .handler = lim_handler,
                                   .idle_timeout_ns = 5 * SQ_NS_PER_S,
                                   .header_timeout_ns = IDLE_MS * SQ_NS_PER_MS,
                                   .request_timeout_ns = 1500 * SQ_NS_PER_MS,
                                   .min_body_rate = 1000};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    uint16_t port = sq_server_port(s);
    struct resp r;

    /* a byte every 50 ms (20 B/s): the head's bytes buy it 300 ms + ~60 ms, then 408 */
    int drip = client(port);
    struct reader rd = {.fd = drip};
    int64_t t0 = sq_now_ns();
    send_str(drip, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n");
    for (int i = 0; i < 100 && !counts_of(s, offsetof(struct sq_server_counts, body_timeouts));
         i++) {
        usleep(50 * 1000);
        if (send(drip, "b", 1, MSG_NOSIGNAL) != 1)
            break;
    }
    read_resp(&rd, &r, false);
    int64_t took = sq_now_ns() - t0;
    assert_int_equal(r.status, 408);
    assert_non_null(strstr(r.head, "Content-Type: application/json\r\n"));
    assert_non_null(strstr(r.body, "{\"error\":\"request timeout: the request body came slower "
                                   "than the minimum rate (1000 bytes/s after the first 0.3 s)"));
    free(r.body);
    assert_true(took >= IDLE_MS * SQ_NS_PER_MS);
    assert_true(took < 1500 * SQ_NS_PER_MS); /* the rate acted, not the request timeout */
    assert_true(at_eof(&rd));
    close(drip);
    free(rd.buf);

    /* a body at 2,000 B/s keeps above the rate: answered */
    int good = client(port);
    struct reader rg = {.fd = good};
    send_str(good, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
    char piece[100];
    memset(piece, 'g', sizeof(piece));
    for (int i = 0; i < 10; i++) {
        usleep(50 * 1000);
        send_all(good, piece, sizeof(piece));
    }
    read_resp(&rg, &r, false);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok");
    free(r.body);

    /* ... but not for longer than the request timeout (1.5 s), counted from the head's first
     * byte, on a connection that already served a request */
    t0 = sq_now_ns();
    send_str(good, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    for (int i = 0; i < 100 && counts_of(s, offsetof(struct sq_server_counts, body_timeouts)) < 2;
         i++) {
        usleep(50 * 1000);
        if (send(good, piece, sizeof(piece), MSG_NOSIGNAL) != (ssize_t)sizeof(piece))
            break;
    }
    read_resp(&rg, &r, false);
    took = sq_now_ns() - t0;
    assert_int_equal(r.status, 408);
    assert_non_null(strstr(r.body, "{\"error\":\"request timeout: the request was not complete "
                                   "within the request timeout (1.5 s)\"}"));
    free(r.body);
    assert_true(took >= 1500 * SQ_NS_PER_MS);
    assert_true(took < 2500 * SQ_NS_PER_MS);
    close(good);
    free(rg.buf);

    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, body_timeouts)), 2);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, header_timeouts)), 0);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, idle_timeouts)), 0);
    sq_server_free(s);
}

/* Every refusal of the core carries a JSON body naming its limit. */
static void test_server_refusal_bodies(void **state)
{
    (void)state;
    struct sq_server *s = lim_start(0, IDLE_MS * SQ_NS_PER_MS, 0, 1);
    uint16_t port = sq_server_port(s);
    char big[9000];
    memset(big, 'a', sizeof(big));
    big[sizeof(big) - 1] = '\0';
    char head431[9100];
    snprintf(head431, sizeof(head431), "GET /x HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", big);
    const struct {
        const char *req;
        int status;
        const char *body;
    } cases[] = {
        {"GET /x HTTP/1.1\r\n\r\n", 400,
         "{\"error\":\"bad Host: an HTTP/1.1 request needs exactly one Host field, whose value is "
         "host[:port] (RFC 9112 3.2)\"}"},
        {"GET /x HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400, "{\"error\":\"bad Host: "},
        {"GET /x HTTP/1.1\r\nHost: [::1]anything\r\n\r\n", 400, "{\"error\":\"bad Host: "},
        {"GET /x HTTP/1.1\r\nHost: x\r\nBad line\r\n\r\n", 400,
         "{\"error\":\"malformed request: RFC 9112 refuses its request line or a header field\"}"},
        {"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400,
         "{\"error\":\"malformed request: a framing RFC 9112 refuses (request smuggling"},
        {"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400,
         "{\"error\":\"malformed chunked body (RFC 9112 7.1)\"}"},
        {"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n", 413,
         "{\"error\":\"request body too large: the server's cap is 1 MiB (1048576 bytes)\"}"},
        {head431, 431,
         "{\"error\":\"request head too large: the server's cap is 8 KiB (8192 bytes) and 64 "
         "header fields\"}"},
        {"GET /x HTTP/1.1\r\nHost: x\r\nX-Slow: ", 408,
         "{\"error\":\"request timeout: the request head was not complete within the header "
         "timeout (0.3 s)\"}"},
        /* HTTP/1.0 needs no Host; a valid one of any shape passes */
        {"GET /x HTTP/1.0\r\n\r\n", 200, "ok"},
        {"GET /x HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 200, "ok"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int fd = client(port);
        struct reader rd = {.fd = fd};
        struct resp r;
        send_str(fd, cases[i].req);
        read_resp(&rd, &r, false);
        if (r.status != cases[i].status || strncmp(r.body, cases[i].body, strlen(cases[i].body)))
            fail_msg("case %zu: %d %s", i, r.status, r.body);
        if (r.status != 200) {
            assert_non_null(strstr(r.head, "Content-Type: application/json\r\n"));
            assert_non_null(strstr(r.head, "Connection: close\r\n"));
            assert_int_equal(r.clen, (long)r.body_len);
            assert_true(at_eof(&rd));
        }
        free(r.body);
        close(fd);
        free(rd.buf);
    }
    struct sq_server_counts c;
    sq_server_counts(s, &c);
    assert_int_equal(c.bad_req, 6);
    assert_int_equal(c.smuggling, 1);
    assert_int_equal(c.too_large, 1);
    assert_int_equal(c.head_big, 1);
    assert_int_equal(c.header_timeouts, 1);
    sq_server_free(s);
}

/* on_head: refuses a request with a body unless it carries "X-Token: ok"; counts its calls. */
static atomic_int head_calls;

static void admit(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    (void)ud;
    atomic_fetch_add(&head_calls, 1);
    assert_null(req->body);
    const struct sq_h1_header *t = sq_server_req_header(req, "x-token");
    if (t && t->value_len == 2 && memcmp(t->value, "ok", 2) == 0)
        return;
    resp->status = 401;
    resp->content_type = "application/json";
    resp->headers = "WWW-Authenticate: Bearer\r\n";
    resp->headers_len = strlen(resp->headers);
    resp->body = "{\"error\":\"no token\"}";
    resp->body_len = strlen(resp->body);
    resp->delay_ns = SQ_NS_PER_S; /* ignored: a refusal leaves at once */
}

static void test_server_on_head(void **state)
{
    (void)state;
    struct sq_server_config cfg = {
        .port = 0, .threads = 1, .handler = lim_handler, .on_head = admit};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    uint16_t port = sq_server_port(s);
    struct resp r;

    /* the head alone: refused at once, though 500,000 body bytes were announced */
    int fd = client(port);
    struct reader rd = {.fd = fd};
    send_str(fd, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n\r\n");
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 401);
    assert_string_equal(r.body, "{\"error\":\"no token\"}");
    assert_non_null(strstr(r.head, "WWW-Authenticate: Bearer\r\n"));
    assert_non_null(strstr(r.head, "Connection: close\r\n"));
    free(r.body);
    assert_true(at_eof(&rd));
    close(fd);
    free(rd.buf);

    /* chunked, and Expect: 100-continue gets no 100 before the refusal */
    fd = client(port);
    rd = (struct reader){.fd = fd};
    send_str(fd, "POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n");
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 401);
    free(r.body);
    close(fd);
    free(rd.buf);

    /* admitted: asked once, though the body comes in three pieces; a GET is not asked */
    atomic_store(&head_calls, 0);
    fd = client(port);
    rd = (struct reader){.fd = fd};
    send_str(fd, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&rd, &r, false);
    free(r.body);
    assert_int_equal(atomic_load(&head_calls), 0);
    send_str(fd, "POST /x HTTP/1.1\r\nHost: x\r\nX-Token: ok\r\nContent-Length: 6\r\n\r\nab");
    usleep(20000);
    send_str(fd, "cd");
    usleep(20000);
    send_str(fd, "ef");
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok");
    free(r.body);
    assert_int_equal(atomic_load(&head_calls), 1);
    /* the connection goes on; a refused one behind it ends it */
    send_str(fd, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab");
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 401);
    free(r.body);
    assert_true(at_eof(&rd));
    close(fd);
    free(rd.buf);

    struct sq_server_counts c;
    sq_server_counts(s, &c);
    assert_int_equal(c.head_refused, 3);
    assert_int_equal(c.requests, 2);
    sq_server_free(s);
}

static void test_server_max_conns(void **state)
{
    (void)state;
    struct sq_server *s = lim_start(0, 0, 2, 2); /* the cap spans both workers */
    uint16_t port = sq_server_port(s);
    struct resp r;
    int a = client(port), b = client(port);
    struct reader ra = {.fd = a}, rb = {.fd = b};
    send_str(a, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    send_str(b, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&ra, &r, false);
    free(r.body);
    read_resp(&rb, &r, false);
    free(r.body);

    /* the third is accepted and closed at once, and counted */
    int c = client(port);
    wait_eof(c, sq_now_ns());
    close(c);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, refused)), 1);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, open)), 2);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, accepted)), 2);

    /* once one leaves there is room again */
    close(a);
    free(ra.buf);
    wait_count(s, offsetof(struct sq_server_counts, open), 1);
    int d = client(port);
    struct reader rd = {.fd = d};
    send_str(d, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&rd, &r, false);
    assert_string_equal(r.body, "ok");
    free(r.body);
    close(d);
    free(rd.buf);
    close(b);
    free(rb.buf);
    wait_count(s, offsetof(struct sq_server_counts, open), 0);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, refused)), 1);
    sq_server_free(s);
}

/* A client bound to a source address of its own (127.0.0.0/8 is all loopback): another peer. */
static int client_from(uint16_t port, const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in b = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, src, &b.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&b, sizeof(b)), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Reads what the server sends until it closes fd; returns it (NUL-terminated, to free). */
static char *read_to_eof(int fd)
{
    struct reader r = {.fd = fd};
    while (fill(&r))
        ;
    char *out = malloc(r.len + 1);
    memcpy(out, r.buf, r.len);
    out[r.len] = '\0';
    free(r.buf);
    return out;
}

/* One request answered on fd (it stays open). */
static void ask_ok(int fd)
{
    struct reader rd = {.fd = fd};
    struct resp r;
    send_str(fd, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&rd, &r, false);
    assert_string_equal(r.body, "ok");
    free(r.body);
    free(rd.buf);
}

/* Over a cap, the connection that has waited longest on its client makes room (never one being
 * answered); a peer over its own cap makes room only among its own connections. */
static void test_server_evict(void **state)
{
    (void)state;
    struct sq_server_config cfg = {.port = 0,
                                   .threads = 1,
                                   .handler = lim_handler,
                                   .max_conns = 6,
                                   .max_conns_per_peer = 4,
                                   .evict = true};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    uint16_t port = sq_server_port(s);
    size_t ev = offsetof(struct sq_server_counts, evicted);

    /* 127.0.0.1: a parked answer first (oldest, but being answered), then two slow heads and
     * one idle connection, a few ms apart */
    int park = client(port);
    send_str(park, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    usleep(5000);
    int a = client(port);
    send_str(a, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Le");
    usleep(5000);
    int b = client(port);
    send_str(b, "GET /x HTTP/1.1\r\nHo");
    usleep(5000);
    int idle = client(port);
    ask_ok(idle);
    wait_count(s, offsetof(struct sq_server_counts, open), 4);

    /* a fifth from the same address: over its cap of 4, so its own oldest waiting one (a, not
     * the parked one) is closed, with a 503 naming why */
    int e = client(port);
    ask_ok(e);
    char *got = read_to_eof(a);
    assert_non_null(strstr(got, "HTTP/1.1 503 Service Unavailable\r\n"));
    assert_non_null(strstr(got, "{\"error\":\"too many connections: this request, the one "
                                "waiting longest on its client, was closed to make room"));
    free(got);
    close(a);
    assert_int_equal(counts_of(s, ev), 1);

    /* another address fills the table (6): its third one makes room among everyone's: b */
    int p2a = client_from(port, "127.0.0.2");
    int p2b = client_from(port, "127.0.0.2");
    ask_ok(p2a);
    ask_ok(p2b);
    int p2c = client_from(port, "127.0.0.2");
    ask_ok(p2c);
    free(read_to_eof(b));
    close(b);
    assert_int_equal(counts_of(s, ev), 2);

    /* the parked answer was never a candidate: it arrives */
    struct reader rp = {.fd = park};
    struct resp r;
    read_resp(&rp, &r, false);
    assert_string_equal(r.body, "slow");
    free(r.body);
    free(rp.buf);

    /* every one alive still answers */
    int alive[] = {park, idle, e, p2a, p2b, p2c};
    for (size_t i = 0; i < sizeof(alive) / sizeof(alive[0]); i++) {
        ask_ok(alive[i]);
        close(alive[i]);
    }
    wait_count(s, offsetof(struct sq_server_counts, open), 0);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, refused)), 0);
    sq_server_free(s);

    /* without evict, over the peer's cap is refused, with a 503 naming the cap */
    cfg = (struct sq_server_config){
        .port = 0, .threads = 1, .handler = lim_handler, .max_conns_per_peer = 2};
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    port = sq_server_port(s);
    int x = client(port), y = client(port);
    ask_ok(x);
    ask_ok(y);
    int z = client(port);
    got = read_to_eof(z);
    assert_non_null(strstr(got, "{\"error\":\"too many connections from this address: its cap of "
                                "2 is reached"));
    free(got);
    close(z);
    int other = client_from(port, "127.0.0.3"); /* another address is not counted with them */
    ask_ok(other);
    close(other);
    close(x);
    wait_count(s, offsetof(struct sq_server_counts, open), 1);
    z = client(port); /* room again */
    ask_ok(z);
    close(z);
    close(y);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, refused)), 1);
    assert_int_equal(counts_of(s, ev), 0);
    sq_server_free(s);
}

/* The per-peer table over many addresses: it grows, entries leave when their count reaches 0
 * (backward shift), and every address keeps its own count through all of it. */
static void test_server_many_peers(void **state)
{
    (void)state;
    struct sq_server_config cfg = {
        .port = 0, .threads = 2, .handler = lim_handler, .max_conns_per_peer = 2};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    uint16_t port = sq_server_port(s);
    enum { PEERS = 70 };
    int fds[PEERS][2];
    for (int round = 0; round < 2; round++) {
        for (int p = 0; p < PEERS; p++) {
            char src[32];
            snprintf(src, sizeof(src), "127.0.%d.%d", 1 + p % 3, 10 + p);
            for (int k = 0; k < 2; k++) {
                fds[p][k] = client_from(port, src);
                ask_ok(fds[p][k]);
            }
            if (p % 7 == 0) { /* a third from the same address is refused */
                int x = client_from(port, src);
                free(read_to_eof(x));
                close(x);
            }
        }
        /* close every other address first, then the rest: deletions in the middle of runs */
        for (int odd = 0; odd < 2; odd++)
            for (int p = odd; p < PEERS; p += 2)
                for (int k = 0; k < 2; k++)
                    close(fds[p][k]);
        wait_count(s, offsetof(struct sq_server_counts, open), 0);
    }
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, refused)),
                     2 * ((PEERS + 6) / 7));
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, accepted)), 2 * 2 * PEERS);
    sq_server_free(s);
}

/* The smuggling classifier over every truncated prefix of each head, each copied into a buffer
 * of exactly its length (ASan catches a read past it): complete heads classify as the table
 * says; no prefix of a clean head is a shape (but for Transfer-Encoding lists). */
static void test_smuggle_shape(void **state)
{
    (void)state;
    static const struct {
        const char *head;
        bool shape;
    } cases[] = {
        {"POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", true},
        {"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 0\r\n\r\n", true},
        {"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", true},
        {"POST / HTTP/1.1\r\nContent-Length: 3,4\r\n\r\n", true},
        {"POST / HTTP/1.1\r\nContent-Length: 4, 4\r\nContent-Length: 04\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", true},
        {"GET / HTTP/1.1\nX: a\n\tb\n\n", true},
        {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost\t: x\r\n\r\n", true},
        {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", true},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", true},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", true},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
         true},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", false},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", false},
        {"\r\nGET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nX-Bad\r\n\r\n", false},
        {"GARBAGE", false},
        {"", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = strlen(cases[i].head);
        for (size_t n = 0; n <= len; n++) {
            char *p = malloc(n ? n : 1);
            assert_non_null(p);
            memcpy(p, cases[i].head, n);
            bool got = sq_server_smuggle_shape(p, n);
            free(p);
            if (n == len && got != cases[i].shape)
                fail_msg("case %zu: %d, want %d", i, got, cases[i].shape);
            /* (a prefix that stops after "Transfer-Encoding: gzip" is a shape of its own) */
            if (!cases[i].shape && got && !strstr(cases[i].head, "Transfer-Encoding"))
                fail_msg("case %zu, prefix %zu: a shape in a clean head", i, n);
        }
    }
}

static void test_server_smuggling(void **state)
{
    (void)state;
    struct sq_server *s = lim_start(0, 0, 0, 1);
    uint16_t port = sq_server_port(s);
    static const char *const shapes[] = {
        /* RFC 9112 6.1 / 6.3: both framings */
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: "
        "chunked\r\n\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: "
        "4\r\n\r\n0\r\n\r\n",
        /* 6.3: Content-Length values that disagree, in two fields or in one list */
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\nabcd",
        /* 5.2: obs-fold */
        "GET /x HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n",
        /* 5.1: whitespace between the field name and the colon */
        "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length : 0\r\n\r\n",
        /* 6.1 / 6.3: a Transfer-Encoding that cannot frame the body */
        "POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
        "chunked\r\n\r\n",
    };
    size_t n = sizeof(shapes) / sizeof(shapes[0]);
    for (size_t i = 0; i < n; i++) {
        int fd = client(port);
        struct reader rd = {.fd = fd};
        struct resp r;
        send_str(fd, shapes[i]);
        read_resp(&rd, &r, false);
        if (r.status != 400)
            fail_msg("shape %zu: status %d", i, r.status);
        assert_non_null(strstr(r.head, "Connection: close\r\n"));
        free(r.body);
        assert_true(at_eof(&rd));
        close(fd);
        free(rd.buf);
        assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, smuggling)), i + 1);
    }
    /* malformed but no smuggling shape: a 400, not counted as one; equal lengths are fine */
    static const char *const plain[] = {"GARBAGE\r\n\r\n",
                                        "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n"};
    for (size_t i = 0; i < 2; i++) {
        int fd = client(port);
        struct reader rd = {.fd = fd};
        struct resp r;
        send_str(fd, plain[i]);
        read_resp(&rd, &r, false);
        assert_int_equal(r.status, 400);
        free(r.body);
        close(fd);
        free(rd.buf);
    }
    int fd = client(port);
    struct reader rd = {.fd = fd};
    struct resp r;
    send_str(
        fd, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4, 4\r\nContent-Length: 4\r\n\r\nabcd");
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 200);
    free(r.body);
    close(fd);
    free(rd.buf);
    struct sq_server_counts c;
    sq_server_counts(s, &c);
    assert_int_equal(c.bad_req, n + 2);
    assert_int_equal(c.smuggling, n);
    sq_server_free(s);
}

/* ---- held answers and posts (sq_server_hold, sq_server_post) ---- */

struct held_ctx {
    struct sq_server *srv;
    struct sq_server_hold *h; /* the hold waiting, API thread only */
    atomic_int gone, posts, holds;
    int plan; /* what the next post does */
};

static void held_gone(void *ud)
{
    struct held_ctx *x = ud;
    x->h = NULL;
    atomic_fetch_add(&x->gone, 1);
}

static void held_handler(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    struct held_ctx *x = ud;
    if (req->path_len == 5 && memcmp(req->path, "/hold", 5) == 0) {
        x->h = sq_server_hold(req, held_gone, x);
        assert_non_null(x->h);
        assert_null(sq_server_hold(req, held_gone, x)); /* once per request */
        atomic_fetch_add(&x->holds, 1);
        return;
    }
    if (req->path_len == 7 && memcmp(req->path, "/stream", 7) == 0) {
        x->h = sq_server_hold(req, held_gone, x);
        assert_non_null(x->h);
        atomic_fetch_add(&x->holds, 1);
        resp->status = 200; /* the head leaves at once, with a first chunk */
        resp->content_type = "text/event-stream";
        resp->body = "first;";
        resp->body_len = 6;
        return;
    }
    resp->body = "later";
    resp->body_len = 5;
}

enum { P_ANSWER, P_CHUNKS, P_END };

static void held_post(void *ud)
{
    struct held_ctx *x = ud;
    if (!x->h) {
        atomic_fetch_add(&x->posts, 1); /* last: the test's thread then reuses x */
        return;
    }
    if (x->plan == P_ANSWER) {
        struct sq_server_resp r = {.status = 201,
                                   .content_type = "application/json",
                                   .body = "{\"ok\":1}",
                                   .body_len = 8,
                                   .headers = "X-Held: yes\r\n",
                                   .headers_len = 13};
        assert_int_equal(sq_server_hold_answer(x->h, &r), 0);
        x->h = NULL;
    } else if (x->plan == P_CHUNKS) {
        assert_int_equal(sq_server_hold_write(x->h, "a", 1), 0);
        assert_int_equal(sq_server_hold_write(x->h, "bb", 2), 0);
        assert_int_equal(sq_server_hold_write(x->h, "", 0), 0);
    } else {
        assert_int_equal(sq_server_hold_end(x->h), 0);
        x->h = NULL;
    }
    atomic_fetch_add(&x->posts, 1);
}

static void post_wait(struct held_ctx *x, int plan, int want_posts)
{
    x->plan = plan;
    assert_int_equal(sq_server_post(x->srv, 0, held_post, x), 0);
    for (int i = 0; i < 2000 && atomic_load(&x->posts) < want_posts; i++)
        usleep(1000);
    assert_int_equal(atomic_load(&x->posts), want_posts);
}

static void wait_for(atomic_int *v, int want)
{
    for (int i = 0; i < 5000 && atomic_load(v) < want; i++)
        usleep(1000);
    assert_int_equal(atomic_load(v), want);
}

static void noop_post(void *ud)
{
    atomic_fetch_add((atomic_int *)ud, 1);
}

static void test_server_hold_and_post(void **state)
{
    (void)state;
    struct held_ctx x = {0};
    struct sq_server_config cfg = {.threads = 1,
                                   .handler = held_handler,
                                   .ud = &x,
                                   .idle_timeout_ns = 200 * SQ_NS_PER_MS,
                                   .http1_only = true};
    assert_int_equal(sq_server_start(&cfg, &x.srv, NULL), 0);
    assert_int_equal(sq_server_post(x.srv, 1, noop_post, &x.posts), -EINVAL);
    int fd = client(sq_server_port(x.srv));
    struct reader rd = {.fd = fd};
    struct resp r;

    /* a held answer keeps its place: the request pipelined behind waits for it */
    send_str(fd, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\nGET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_for(&x.holds, 1);
    usleep(300 * 1000); /* past the idle timeout: a held connection is not idle */
    post_wait(&x, P_ANSWER, 1);
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "{\"ok\":1}");
    assert_non_null(strstr(r.head, "X-Held: yes\r\n"));
    free(r.body);
    read_resp(&rd, &r, false);
    assert_string_equal(r.body, "later");
    free(r.body);

    /* a stream: the head and first chunk at once, chunks from posts, then the end */
    send_str(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\nGET /x HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_for(&x.holds, 2);
    post_wait(&x, P_CHUNKS, 2);
    post_wait(&x, P_END, 3);
    const char *want = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                       "Content-Type: text/event-stream\r\n\r\n"
                       "6\r\nfirst;\r\n1\r\na\r\n2\r\nbb\r\n0\r\n\r\n";
    while (rd.len < strlen(want))
        assert_true(fill(&rd));
    assert_memory_equal(rd.buf, want, strlen(want));
    memmove(rd.buf, rd.buf + strlen(want), rd.len - strlen(want));
    rd.len -= strlen(want);
    read_resp(&rd, &r, false);
    assert_string_equal(r.body, "later");
    free(r.body);
    assert_int_equal(atomic_load(&x.gone), 0);

    /* HTTP/1.0: the stream is unframed and the close ends it */
    send_str(fd, "GET /stream HTTP/1.0\r\n\r\n");
    wait_for(&x.holds, 3);
    post_wait(&x, P_CHUNKS, 4);
    post_wait(&x, P_END, 5);
    while (!memmem(rd.buf, rd.len, "first;abb", 9))
        assert_true(fill(&rd));
    assert_null(memmem(rd.buf, rd.len, "Transfer-Encoding", 17));
    assert_true(at_eof(&rd));
    close(fd);
    rd.len = 0;

    /* a client that leaves while held: gone is called, and a post then finds no hold */
    fd = client(sq_server_port(x.srv));
    send_str(fd, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_for(&x.holds, 4);
    shutdown(fd, SHUT_RDWR);
    close(fd);
    wait_for(&x.gone, 1);
    post_wait(&x, P_ANSWER, 6);

    /* HTTP/2's preface is a bad request on an HTTP/1-only server */
    fd = client(sq_server_port(x.srv));
    rd.fd = fd;
    send_str(fd, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    read_resp(&rd, &r, false);
    assert_int_equal(r.status, 400);
    free(r.body);
    close(fd);

    /* a hold that is still open when the server stops: gone; a post after the stop runs in
     * sq_server_free, once */
    fd = client(sq_server_port(x.srv));
    send_str(fd, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_for(&x.holds, 5);
    sq_server_stop(x.srv);
    sq_server_wait(x.srv);
    assert_int_equal(atomic_load(&x.gone), 2);
    atomic_int late = 0;
    assert_int_equal(sq_server_post(x.srv, 0, noop_post, &late), 0);
    assert_int_equal(atomic_load(&late), 0);
    sq_server_free(x.srv);
    assert_int_equal(atomic_load(&late), 1);
    close(fd);
    free(rd.buf);
}

/* Posts from many threads all run, in each thread's order. */
struct order_ctx {
    int last[4];
    atomic_int bad, n;
};
struct order_post {
    struct order_ctx *x;
    int thread, seq;
};
static void order_fn(void *ud)
{
    struct order_post *p = ud;
    if (p->seq != p->x->last[p->thread] + 1)
        atomic_fetch_add(&p->x->bad, 1);
    p->x->last[p->thread] = p->seq;
    atomic_fetch_add(&p->x->n, 1);
    free(p);
}
struct poster {
    pthread_t t;
    struct sq_server *s;
    struct order_ctx *x;
    int idx;
};
static void *poster_main(void *arg)
{
    struct poster *p = arg;
    for (int i = 0; i < 2000; i++) {
        struct order_post *o = malloc(sizeof(*o));
        *o = (struct order_post){p->x, p->idx, i};
        if (sq_server_post(p->s, 0, order_fn, o) < 0)
            free(o);
    }
    return NULL;
}

static void test_server_post_threads(void **state)
{
    (void)state;
    struct held_ctx hx = {0};
    struct sq_server_config cfg = {.threads = 1, .handler = held_handler, .ud = &hx};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    struct order_ctx x = {.last = {-1, -1, -1, -1}};
    struct poster ps[4];
    for (int i = 0; i < 4; i++) {
        ps[i] = (struct poster){.s = s, .x = &x, .idx = i};
        assert_int_equal(pthread_create(&ps[i].t, NULL, poster_main, &ps[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(ps[i].t, NULL);
    sq_server_free(s); /* what the worker did not run yet runs here */
    assert_int_equal(atomic_load(&x.n), 8000);
    assert_int_equal(atomic_load(&x.bad), 0);
}

static void test_server_backpressure(void **state)
{
    (void)state;
    struct sq_server *s = lim_start(0, 0, 0, 1);
    int fd = client(sq_server_port(s));
    /* 200 answers of 256 KiB (50 MiB) asked for at once by a client that does not read yet */
    for (int i = 0; i < 200; i++)
        send_str(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
    usleep(300 * 1000);
    uint64_t served = counts_of(s, offsetof(struct sq_server_counts, requests));
    assert_true(served < 150); /* it stopped reading; the rest waits in the socket buffers */
    /* then it reads: every answer arrives, whole and in order */
    struct reader rd = {.fd = fd};
    for (int i = 0; i < 200; i++) {
        struct resp r;
        read_resp(&rd, &r, false);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.body_len, 256 * 1024);
        assert_memory_equal(r.body + 1000, big_block + 1000 % 16, 16 - 1000 % 16);
        free(r.body);
    }
    close(fd);
    free(rd.buf);
    assert_int_equal(counts_of(s, offsetof(struct sq_server_counts, requests)), 200);
    sq_server_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route),
        cmocka_unit_test(test_parse_u64),
        cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_reason),
        cmocka_unit_test(test_target_live),
        cmocka_unit_test(test_server_custom_handler),
        cmocka_unit_test(test_server_bad_config),
        cmocka_unit_test(test_target_arrivals),
        cmocka_unit_test(test_target_stall),
        cmocka_unit_test(test_server_stamps_and_held),
        cmocka_unit_test(test_server_idle_timeout),
        cmocka_unit_test(test_server_header_timeout),
        cmocka_unit_test(test_server_max_conns),
        cmocka_unit_test(test_server_slow_body),
        cmocka_unit_test(test_server_refusal_bodies),
        cmocka_unit_test(test_server_on_head),
        cmocka_unit_test(test_server_evict),
        cmocka_unit_test(test_server_many_peers),
        cmocka_unit_test(test_smuggle_shape),
        cmocka_unit_test(test_server_smuggling),
        cmocka_unit_test(test_server_backpressure),
        cmocka_unit_test(test_server_hold_and_post),
        cmocka_unit_test(test_server_post_threads),
        cmocka_unit_test(test_server_upgrade),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
