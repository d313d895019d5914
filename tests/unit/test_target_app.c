/* test_target_app.c - the target's /json, /login and /items helpers (pure parts), and the
 * server's streamed answers over loopback, read back with squall's own client pieces (the h1
 * reader, its head callback, the SSE counter and the decoder). */
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

#include <jansson.h>

#include "base/clock.h"
#include "http/decode.h"
#include "http/h1.h"
#include "http/sse.h"
#include "server/server.h"
#include "target/target.h"

/* ---- Accept-Encoding ---- */

static void test_pick_coding(void **state)
{
    (void)state;
    static const struct {
        const char *v;
        enum sq_coding c;
    } cases[] = {
        {"", SQ_CODING_NONE},
        {"gzip", SQ_CODING_GZIP},
        {"deflate", SQ_CODING_DEFLATE},
        {"br", SQ_CODING_BR},
        {"zstd", SQ_CODING_ZSTD},
        {"x-gzip", SQ_CODING_GZIP},
        {"GZIP ; Q=1", SQ_CODING_GZIP},
        {"gzip, deflate, br, zstd", SQ_CODING_ZSTD},
        {"gzip, deflate, br", SQ_CODING_BR},
        {"deflate, gzip", SQ_CODING_GZIP},
        {"deflate", SQ_CODING_DEFLATE},
        {"gzip;q=0.5, deflate", SQ_CODING_DEFLATE},
        {"zstd;q=0, br;q=0, gzip;q=0.001", SQ_CODING_GZIP},
        {"zstd;q=0.5, br;q=0.5", SQ_CODING_ZSTD},
        {"br; q=0.8 , gzip;q=0.9", SQ_CODING_GZIP},
        {"br;level=5;q=0.2, gzip;q=0.1", SQ_CODING_BR},
        {"*", SQ_CODING_ZSTD},
        {"*;q=0", SQ_CODING_NONE},
        {"*, zstd;q=0", SQ_CODING_BR},
        {"gzip;q=0, *", SQ_CODING_ZSTD},
        {"zstd;q=0, br;q=0, *;q=0.3, deflate;q=0.2", SQ_CODING_GZIP},
        {"identity", SQ_CODING_NONE},
        {"identity;q=0", SQ_CODING_NONE},
        {"compress, sdch", SQ_CODING_NONE},
        {"br;q=1.5", SQ_CODING_NONE},
        {"br;q=abc", SQ_CODING_NONE},
        {"br;q=0.0001", SQ_CODING_NONE},
        {"br;q=, gzip", SQ_CODING_GZIP},
        {" , ,gzip,,", SQ_CODING_GZIP},
        {"gzip;q=1.000", SQ_CODING_GZIP},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enum sq_coding c = sq_target_pick_coding(cases[i].v, strlen(cases[i].v));
        if (c != cases[i].c)
            fail_msg("\"%s\": %s, want %s", cases[i].v, sq_coding_name(c),
                     sq_coding_name(cases[i].c));
    }
    assert_int_equal(sq_target_pick_coding(NULL, 0), SQ_CODING_NONE);
}

/* ---- /json bodies ---- */

static void check_json(size_t n)
{
    char *buf = malloc(n); /* exact size: ASan sees any write past it */
    assert_non_null(buf);
    sq_target_json_fill(buf, n);
    json_error_t err;
    json_t *j = json_loadb(buf, n, 0, &err);
    if (!j)
        fail_msg("n %zu: not JSON: %s", n, err.text);
    assert_true(json_is_array(j));
    assert_int_equal(buf[0], '[');
    assert_int_equal(buf[n - 1], ']');
    if (json_array_size(j)) {
        json_t *last = json_array_get(j, json_array_size(j) - 1);
        assert_int_equal(json_integer_value(json_object_get(last, "id")),
                         (json_int_t)json_array_size(j) - 1);
    }
    json_decref(j);
    free(buf);
}

static void test_json_fill(void **state)
{
    (void)state;
    for (size_t n = 2; n <= 700; n++)
        check_json(n);
    check_json(100000);
    check_json((1u << 20) + 3);
}

/* ---- tokens ---- */

static void test_tokens(void **state)
{
    (void)state;
    /* the SipHash-2-4 paper's key 00..0f and the 8-byte message 00..07 */
    const uint64_t k[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
    assert_true(sq_target_siphash(k, 0x0706050403020100ull) == 0x93f5f5799a932462ull);

    const uint64_t key[2] = {0x1234, 0x5678}, other[2] = {0x1234, 0x5679};
    char tok[SQ_TARGET_TOKEN_LEN + 1];
    for (uint64_t nonce = 0; nonce < 200; nonce++) {
        uint64_t x = nonce * 0x9e3779b97f4a7c15ull;
        sq_target_token_make(key, x, tok);
        tok[SQ_TARGET_TOKEN_LEN] = '\0';
        assert_true(sq_target_token_check(key, tok, SQ_TARGET_TOKEN_LEN));
        assert_false(sq_target_token_check(other, tok, SQ_TARGET_TOKEN_LEN));
        assert_false(sq_target_token_check(key, tok, SQ_TARGET_TOKEN_LEN - 1));
        for (int i = 0; i < SQ_TARGET_TOKEN_LEN; i++) {
            char saved = tok[i];
            tok[i] = saved == '0' ? '1' : '0';
            assert_false(sq_target_token_check(key, tok, SQ_TARGET_TOKEN_LEN));
            tok[i] = 'g';
            assert_false(sq_target_token_check(key, tok, SQ_TARGET_TOKEN_LEN));
            tok[i] = saved;
        }
    }
    for (int i = 0; i < SQ_TARGET_TOKEN_LEN; i++) /* hex of either case */
        if (tok[i] >= 'a')
            tok[i] = (char)(tok[i] - 32);
    assert_true(sq_target_token_check(key, tok, SQ_TARGET_TOKEN_LEN));
}

/* OAuth2 access tokens: made under the key, valid until their expiry */
static void test_oauth_tokens(void **state)
{
    (void)state;
    const uint64_t key[2] = {0x1234, 0x5678}, other[2] = {0x1234, 0x5679};
    char tok[SQ_TARGET_OAUTH_TOKEN_LEN];
    sq_target_oauth_make(key, 42, 5000, tok);
    assert_int_equal(sq_target_oauth_check(key, tok, sizeof(tok), 4999), 1);
    assert_int_equal(sq_target_oauth_check(key, tok, sizeof(tok), 5000), 0); /* expired */
    assert_int_equal(sq_target_oauth_check(other, tok, sizeof(tok), 1), -1);
    assert_int_equal(sq_target_oauth_check(key, tok, sizeof(tok) - 1, 1), -1);
    assert_false(sq_target_token_check(key, tok, SQ_TARGET_TOKEN_LEN)); /* not a /login one */
    for (size_t i = 0; i < sizeof(tok); i++) {
        /* no digit can change: the expiry cannot be moved without the key */
        char saved = tok[i];
        tok[i] = saved == 'f' ? 'e' : 'f';
        assert_int_equal(sq_target_oauth_check(key, tok, sizeof(tok), 1), -1);
        tok[i] = saved;
    }
    char login[SQ_TARGET_TOKEN_LEN];
    sq_target_token_make(key, 42, login);
    assert_int_equal(sq_target_oauth_check(key, login, sizeof(login), 1), -1);
}

static void test_route_new(void **state)
{
    (void)state;
    struct sq_target_route r = sq_target_route("GET", 3, "/json/1000?x", 12);
    assert_int_equal(r.ep, SQ_TARGET_EP_JSON);
    assert_false(r.bad_arg);
    assert_int_equal(r.arg, 1000);
    assert_true(sq_target_route("GET", 3, "/json/1", 7).bad_arg);
    assert_true(sq_target_route("GET", 3, "/json/16777217", 14).bad_arg);
    assert_false(sq_target_route("GET", 3, "/json/16777216", 14).bad_arg);
    assert_int_equal(sq_target_route("GET", 3, "/sse?events=1", 13).ep, SQ_TARGET_EP_SSE);
    assert_int_equal(sq_target_route("POST", 4, "/login", 6).ep, SQ_TARGET_EP_LOGIN);
    assert_int_equal(sq_target_route("GET", 3, "/login", 6).ep, SQ_TARGET_EP_NOT_FOUND);
    assert_int_equal(sq_target_route("GET", 3, "/items", 6).ep, SQ_TARGET_EP_ITEMS);
    r = sq_target_route("GET", 3, "/cookie/set?a=1", 15);
    assert_int_equal(r.ep, SQ_TARGET_EP_COOKIE);
    assert_int_equal(r.arg, 0);
    r = sq_target_route("GET", 3, "/cookie/echo", 12);
    assert_int_equal(r.ep, SQ_TARGET_EP_COOKIE);
    assert_int_equal(r.arg, 1);
    assert_int_equal(sq_target_route("GET", 3, "/cookie/", 8).ep, SQ_TARGET_EP_NOT_FOUND);
    assert_string_equal(sq_target_ep_name(SQ_TARGET_EP_COOKIE), "cookie");
    r = sq_target_route("GET", 3, "/redirect/3?status=307", 22);
    assert_int_equal(r.ep, SQ_TARGET_EP_REDIRECT);
    assert_false(r.bad_arg);
    assert_int_equal(r.arg, 3);
    r = sq_target_route("GET", 3, "/redirect/loop?x", 16);
    assert_int_equal(r.ep, SQ_TARGET_EP_REDIRECT);
    assert_false(r.bad_arg);
    assert_int_equal(r.arg, 0);
    assert_true(sq_target_route("GET", 3, "/redirect/0", 11).bad_arg);
    assert_true(sq_target_route("GET", 3, "/redirect/101", 13).bad_arg);
    assert_false(sq_target_route("GET", 3, "/redirect/100", 13).bad_arg);
    assert_true(sq_target_route("GET", 3, "/redirect/x", 11).bad_arg);
    assert_string_equal(sq_target_ep_name(SQ_TARGET_EP_REDIRECT), "redirect");
}

/* ---- streamed answers, live ---- */

static size_t piece(void *ud, uint32_t seq, uint32_t count, char *buf, size_t cap)
{
    (void)ud;
    int n = snprintf(buf, cap, "id: %u\ndata: %u of %u\n\n", seq, seq, count);
    return (size_t)n;
}

/* /s?N,MS: a stream of N events every MS ms; /after: "after"; /empty: a stream whose pieces are
 * all empty. */
static void handler(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    (void)ud;
    unsigned n = 0, ms = 0;
    if (req->path_len > 3 && !memcmp(req->path, "/s?", 3) &&
        sscanf(req->path + 3, "%u,%u", &n, &ms) == 2) {
        resp->content_type = "text/event-stream";
        resp->stream = piece;
        resp->stream_count = n;
        resp->stream_interval_ns = (int64_t)ms * SQ_NS_PER_MS;
        resp->body = "ignored";
        resp->body_len = 7;
        return;
    }
    resp->body = "after";
    resp->body_len = 5;
}

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

static void send_str(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
        assert_true(k > 0);
        s += k;
        n -= (size_t)k;
    }
}

/* One connection read with the h1 reader; body bytes go through the SSE counter. */
struct conn_rd {
    int fd;
    char buf[16384];
    size_t off, len;
    struct sq_h1_reader rd;
    struct sq_sse sse;
    uint64_t body;
    int64_t first_event_ns;
    int heads;
    char head[512];
};

static int on_body(void *ud, const char *p, size_t n)
{
    struct conn_rd *c = ud;
    c->body += n;
    if (sq_sse_feed(&c->sse, p, n) && !c->first_event_ns)
        c->first_event_ns = sq_now_ns();
    return 0;
}

static int on_head(void *ud, const char *p, size_t n)
{
    struct conn_rd *c = ud;
    c->heads++;
    assert_true(n < sizeof(c->head));
    memcpy(c->head, p, n);
    c->head[n] = '\0';
    return 0;
}

static void rd_init(struct conn_rd *c, int fd)
{
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    sq_h1_reader_init(&c->rd, NULL);
    sq_h1_reader_on_body(&c->rd, on_body, c);
    sq_h1_reader_on_head(&c->rd, on_head, c);
}

/* Reads one response; returns SQ_H1_DONE (also when the close ended it) or an error. */
static int rd_response(struct conn_rd *c, bool head_req)
{
    sq_sse_init(&c->sse);
    c->body = 0;
    c->first_event_ns = 0;
    c->heads = 0;
    sq_h1_reader_start(&c->rd, head_req);
    for (;;) {
        if (c->off < c->len) {
            size_t used;
            int rc = sq_h1_reader_feed(&c->rd, c->buf + c->off, c->len - c->off, &used);
            c->off += used;
            if (rc != 0)
                return rc;
        }
        ssize_t n = recv(c->fd, c->buf, sizeof(c->buf), 0);
        if (n == 0)
            return sq_h1_reader_eof(&c->rd);
        if (n < 0)
            return -errno;
        c->off = 0;
        c->len = (size_t)n;
    }
}

static bool rd_at_eof(struct conn_rd *c)
{
    if (c->off < c->len)
        return false;
    char x;
    ssize_t n = recv(c->fd, &x, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void test_stream_live(void **state)
{
    (void)state;
    struct sq_server_config cfg = {.port = 0, .threads = 1, .handler = handler};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    uint16_t port = sq_server_port(s);
    struct conn_rd *c = malloc(sizeof(*c));
    assert_non_null(c);

    /* 5 events 30 ms apart, then a pipelined request that waits behind the stream */
    rd_init(c, client(port));
    int64_t t0 = sq_now_ns();
    send_str(c->fd,
             "GET /s?5,30 HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(rd_response(c, false), SQ_H1_DONE);
    int64_t took = sq_now_ns() - t0;
    assert_int_equal(c->sse.events, 5);
    assert_int_equal(c->heads, 1);
    assert_non_null(strstr(c->head, "Transfer-Encoding: chunked\r\n"));
    assert_null(strstr(c->head, "Content-Length"));
    assert_true(c->rd.event_stream);
    assert_true(c->rd.body.mode == SQ_H1_BODY_CHUNKED);
    assert_true(took >= 150 * SQ_NS_PER_MS);                  /* the 5th piece is due at 150 ms */
    assert_true(took < 5000 * SQ_NS_PER_MS);                  /* and not much later */
    assert_true(c->first_event_ns - t0 >= 30 * SQ_NS_PER_MS); /* the first after one interval */
    assert_true(c->rd.keep_alive);
    assert_int_equal(rd_response(c, false), SQ_H1_DONE);
    assert_int_equal(c->body, 5); /* "after" */
    /* HEAD: the head alone, and the connection goes on */
    send_str(c->fd,
             "HEAD /s?3,1000 HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(rd_response(c, true), SQ_H1_DONE);
    assert_non_null(strstr(c->head, "Transfer-Encoding: chunked\r\n"));
    assert_int_equal(c->body, 0);
    assert_int_equal(rd_response(c, false), SQ_H1_DONE);
    assert_int_equal(c->body, 5);
    close(c->fd);
    sq_h1_reader_dispose(&c->rd);

    /* HTTP/1.0: no chunked framing, the close ends the body */
    rd_init(c, client(port));
    send_str(c->fd, "GET /s?4,0 HTTP/1.0\r\n\r\n");
    assert_int_equal(rd_response(c, false), SQ_H1_DONE);
    assert_int_equal(c->sse.events, 4);
    assert_null(strstr(c->head, "Transfer-Encoding"));
    assert_non_null(strstr(c->head, "Connection: close\r\n"));
    assert_true(c->rd.body.mode == SQ_H1_BODY_UNTIL_CLOSE);
    close(c->fd);
    sq_h1_reader_dispose(&c->rd);

    /* 300000 pieces (7 MB) at once to a reader that sleeps first: the socket fills, the stream
     * waits for it to drain, and every event arrives exactly once */
    rd_init(c, client(port));
    int rcvbuf = 65536;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    send_str(c->fd,
             "GET /s?300000,0 HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n");
    usleep(200 * 1000);
    assert_int_equal(rd_response(c, false), SQ_H1_DONE);
    assert_int_equal(c->sse.events, 300000);
    assert_int_equal(rd_response(c, false), SQ_H1_DONE);
    assert_int_equal(c->body, 5);
    close(c->fd);
    sq_h1_reader_dispose(&c->rd);

    /* a client that leaves mid-stream, and Connection: close after a stream */
    int fd = client(port);
    send_str(fd, "GET /s?1000,1 HTTP/1.1\r\nHost: x\r\n\r\n");
    usleep(20 * 1000);
    close(fd);
    rd_init(c, client(port));
    send_str(c->fd, "GET /s?3,1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /after "
                    "HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(rd_response(c, false), SQ_H1_DONE);
    assert_int_equal(c->sse.events, 3);
    assert_false(c->rd.keep_alive);
    assert_true(rd_at_eof(c));
    close(c->fd);
    sq_h1_reader_dispose(&c->rd);

    struct sq_server_counts cnt;
    sq_server_counts(s, &cnt);
    assert_int_equal(cnt.accepted, 5);
    sq_server_free(s);
    free(c);
}

/* Streams and the idle timeout: pieces further apart than the timeout are the server's wait,
 * not the client's silence; a stream to a client that stops reading is. */
static void test_stream_idle(void **state)
{
    (void)state;
    struct sq_server_config cfg = {
        .port = 0, .threads = 1, .handler = handler, .idle_timeout_ns = 200 * SQ_NS_PER_MS};
    struct sq_server *s = NULL;
    assert_int_equal(sq_server_start(&cfg, &s, NULL), 0);
    uint16_t port = sq_server_port(s);
    struct conn_rd *c = malloc(sizeof(*c));
    assert_non_null(c);

    rd_init(c, client(port));
    send_str(c->fd, "GET /s?3,350 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(rd_response(c, false), SQ_H1_DONE);
    assert_int_equal(c->sse.events, 3);
    assert_true(c->rd.keep_alive);
    send_str(c->fd, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n"); /* the connection is still there */
    assert_int_equal(rd_response(c, false), SQ_H1_DONE);
    assert_int_equal(c->body, 5);
    int64_t t0 = sq_now_ns();
    assert_true(rd_at_eof(c)); /* then, silent, it is closed */
    assert_true(sq_now_ns() - t0 >= 150 * SQ_NS_PER_MS);
    close(c->fd);
    sq_h1_reader_dispose(&c->rd);

    /* a stream whose client never reads: the socket fills, nothing moves, the timeout acts */
    int fd = client(port);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    send_str(fd, "GET /s?1000000,0 HTTP/1.1\r\nHost: x\r\n\r\n");
    struct sq_server_counts cnt;
    for (int i = 0; i < 500; i++) {
        sq_server_counts(s, &cnt);
        if (cnt.idle_timeouts == 2)
            break;
        usleep(10000);
    }
    assert_int_equal(cnt.idle_timeouts, 2);
    close(fd);
    sq_server_free(s);
    free(c);
}

/* The target end to end in-process: /json in every coding decodes to its N bytes. */
struct jsink {
    char *p;
    size_t n, cap;
};

static int jsink_cb(void *ud, const char *p, size_t n)
{
    struct jsink *j = ud;
    if (j->n + n > j->cap) {
        j->cap = (j->n + n) * 2;
        j->p = realloc(j->p, j->cap);
        assert_non_null(j->p);
    }
    memcpy(j->p + j->n, p, n);
    j->n += n;
    return 0;
}

struct dec_ctx {
    struct sq_decoder *d;
    struct jsink *sink;
    struct conn_rd *c;
};

/* The way a client sets up decoding: from the head callback, before the first body byte. */
static int decode_head(void *ud, const char *p, size_t n)
{
    struct dec_ctx *x = ud;
    on_head(x->c, p, n);
    return sq_decoder_reset(x->d, (enum sq_coding)x->c->rd.content_encoding);
}

static int decode_body(void *ud, const char *p, size_t n)
{
    struct dec_ctx *x = ud;
    return sq_decoder_feed(x->d, p, n, jsink_cb, x->sink);
}

static void test_target_json_live(void **state)
{
    (void)state;
    struct sq_target_config cfg = {.host = "127.0.0.1", .port = 0, .threads = 2};
    struct sq_target *t = NULL;
    assert_int_equal(sq_target_start(&cfg, &t, NULL), 0);
    struct sq_decoder *d;
    assert_int_equal(sq_decoder_new(0, &d), 0);
    struct jsink sink = {0};
    int fd = client(sq_target_port(t));
    struct conn_rd *c = malloc(sizeof(*c));
    assert_non_null(c);
    struct dec_ctx x = {d, &sink, c};
    rd_init(c, fd);
    sq_h1_reader_on_body(&c->rd, decode_body, &x);
    sq_h1_reader_on_head(&c->rd, decode_head, &x);
    static const char *const accepts[] = {"",   "gzip", "deflate",
                                          "br", "zstd", "gzip, deflate, br, zstd"};
    static const enum sq_coding want[] = {SQ_CODING_NONE, SQ_CODING_GZIP, SQ_CODING_DEFLATE,
                                          SQ_CODING_BR,   SQ_CODING_ZSTD, SQ_CODING_ZSTD};
    static const size_t sizes[] = {2, 100, 16384, 16385, 300000};
    char req[256];
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        for (size_t ai = 0; ai < sizeof(accepts) / sizeof(accepts[0]); ai++) {
            for (int again = 0; again < 2; again++) { /* the second one comes from the cache */
                snprintf(req, sizeof(req),
                         "GET /json/%zu HTTP/1.1\r\nHost: x\r\nAccept-Encoding: %s\r\n\r\n",
                         sizes[si], accepts[ai]);
                send_str(fd, req);
                sink.n = 0;
                assert_int_equal(rd_response(c, false), SQ_H1_DONE);
                assert_int_equal(c->heads, 1);
                assert_int_equal(c->rd.status, 200);
                assert_int_equal(c->rd.content_encoding, want[ai]);
                assert_int_equal(sq_decoder_finish(d), 0);
                assert_int_equal(sink.n, sizes[si]);
                json_error_t err;
                json_t *j = json_loadb(sink.p, sink.n, 0, &err);
                if (!j)
                    fail_msg("/json/%zu %s: %s", sizes[si], accepts[ai], err.text);
                json_decref(j);
                assert_non_null(strstr(c->head, "Vary: Accept-Encoding\r\n"));
            }
        }
    }
    close(fd);
    sq_h1_reader_dispose(&c->rd);
    free(c);
    free(sink.p);
    sq_decoder_free(d);
    sq_target_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick_coding),      cmocka_unit_test(test_json_fill),
        cmocka_unit_test(test_tokens),           cmocka_unit_test(test_route_new),
        cmocka_unit_test(test_oauth_tokens),     cmocka_unit_test(test_stream_live),
        cmocka_unit_test(test_target_json_live), cmocka_unit_test(test_stream_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
