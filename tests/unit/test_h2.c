/* tests/unit/test_h2.c - http/h2 (the client session) and server/h2 (the target over h2c).
 *
 * In memory: the client against a small nghttp2 server session written here, the bytes moved
 * between them by hand, so the server can answer, reset streams (RST_STREAM) and go away
 * (GOAWAY) exactly when a test wants. Live: the client over loopback against the in-process
 * target speaking h2c with prior knowledge (server/h2.c), N concurrent streams on one
 * connection, every endpoint's status and body checked, and /stats counting the streams. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <nghttp2/nghttp2.h>

#include "base/clock.h"
#include "http/decode.h"
#include "http/h2client.h"
#include "http/request.h"
#include "target/target.h"

/* ---- a client harness: per-stream results ---- */

#define MAXS 512

struct slot {
    struct sq_h2_stream st;
    int status;
    uint64_t body;
    uint32_t err;
    bool closed;
    char *data; /* want_body: what arrived */
    size_t data_len, data_cap;
};

struct harness {
    struct sq_h2_client c;
    struct slot s[MAXS];
    int closed, headers;
    int goaways;
    uint32_t goaway_err;
    int32_t goaway_last;
    char fields[1024]; /* on_field: "name=value;" for every stream */
    size_t fields_len;
    int status_at_first_field; /* the slot's status when the first field came (0: before on_headers)
                                */
    /* resubmit from on_close until `total` requests have been started */
    const struct sq_h2_req *again;
    int started, total;
};

static void h_headers(void *ud, struct sq_h2_stream *st, int status)
{
    struct harness *h = ud;
    struct slot *sl = SQ_CONTAINER_OF(st, struct slot, st);
    sl->status = status;
    h->headers++;
}

static void h_data(void *ud, struct sq_h2_stream *st, const char *data, size_t len)
{
    (void)ud;
    struct slot *sl = SQ_CONTAINER_OF(st, struct slot, st);
    sl->body += len;
    if (data) {
        if (sl->data_len + len > sl->data_cap) {
            sl->data_cap = (sl->data_len + len) * 2;
            sl->data = realloc(sl->data, sl->data_cap);
            assert_non_null(sl->data);
        }
        memcpy(sl->data + sl->data_len, data, len);
        sl->data_len += len;
    }
}

static void h_close(void *ud, struct sq_h2_stream *st, uint32_t err)
{
    struct harness *h = ud;
    struct slot *sl = SQ_CONTAINER_OF(st, struct slot, st);
    sl->closed = true;
    sl->err = err;
    h->closed++;
    if (h->again && h->started < h->total) {
        sl->closed = false;
        sl->status = 0;
        sl->body = 0;
        assert_true(sq_h2_client_submit(&h->c, h->again, st) > 0);
        h->started++;
    }
}

static void h_goaway(void *ud, uint32_t err, int32_t last)
{
    struct harness *h = ud;
    h->goaways++;
    h->goaway_err = err;
    h->goaway_last = last;
}

static void h_field(void *ud, struct sq_h2_stream *st, const char *name, size_t name_len,
                    const char *value, size_t value_len)
{
    struct harness *h = ud;
    if (h->fields_len == 0)
        h->status_at_first_field = SQ_CONTAINER_OF(st, struct slot, st)->status;
    int n = snprintf(h->fields + h->fields_len, sizeof(h->fields) - h->fields_len, "%.*s=%.*s;",
                     (int)name_len, name, (int)value_len, value);
    assert_true(n > 0 && (size_t)n < sizeof(h->fields) - h->fields_len);
    h->fields_len += (size_t)n;
}

static const struct sq_h2_callbacks hcb = {.on_headers = h_headers,
                                           .on_data = h_data,
                                           .on_close = h_close,
                                           .on_goaway = h_goaway,
                                           .on_field = h_field};

static void harness_init(struct harness *h, uint32_t max_streams, bool want_body)
{
    memset(h, 0, sizeof(*h));
    struct sq_h2_opts o = {.max_streams = max_streams, .want_body = want_body};
    assert_int_equal(sq_h2_client_init(&h->c, &o, &hcb, h), 0);
}

static void harness_dispose(struct harness *h)
{
    sq_h2_client_dispose(&h->c);
    for (int i = 0; i < MAXS; i++)
        free(h->s[i].data);
}

/* ---- requests ---- */

static const nghttp2_nv *nv_of(const struct sq_h2_req *r, size_t i)
{
    return &((const nghttp2_nv *)r->_nv)[i];
}

static void assert_nv(const struct sq_h2_req *r, size_t i, const char *name, const char *value)
{
    const nghttp2_nv *nv = nv_of(r, i);
    assert_int_equal(nv->namelen, strlen(name));
    assert_memory_equal(nv->name, name, nv->namelen);
    assert_int_equal(nv->valuelen, strlen(value));
    assert_memory_equal(nv->value, value, nv->valuelen);
}

static void test_req_init(void **state)
{
    (void)state;
    struct sq_h2_req r;
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "a:1", "/x", NULL, 0, NULL, 0), 0);
    assert_int_equal(r._nvlen, 5);
    assert_nv(&r, 0, ":method", "GET");
    assert_nv(&r, 1, ":scheme", "http");
    assert_nv(&r, 2, ":authority", "a:1");
    assert_nv(&r, 3, ":path", "/x");
    assert_nv(&r, 4, "user-agent", "squall/" SQ_VERSION);
    sq_h2_req_dispose(&r);
    sq_h2_req_dispose(&r); /* zeroed: a no-op */

    struct sq_kv hv[] = {{"X-Thing", "1"},     {"Connection", "close"},          {"Host", "b"},
                         {"User-Agent", "me"}, {"Transfer-Encoding", "chunked"}, {"Accept", "*/*"}};
    assert_int_equal(sq_h2_req_init(&r, "POST", "https", "a", "/p", hv, 6, "hey", 3), 0);
    assert_int_equal(r._nvlen, 8);
    assert_nv(&r, 2, ":authority", "b");
    assert_nv(&r, 4, "x-thing", "1");
    assert_nv(&r, 5, "user-agent", "me");
    assert_nv(&r, 6, "accept", "*/*");
    assert_nv(&r, 7, "content-length", "3");
    sq_h2_req_dispose(&r);

    struct sq_kv noua[] = {{"user-agent", ""}};
    assert_int_equal(sq_h2_req_init(&r, "PUT", "http", "a", "/", noua, 1, NULL, 0), 0);
    assert_int_equal(r._nvlen, 5);
    assert_nv(&r, 4, "content-length", "0");
    sq_h2_req_dispose(&r);

    struct sq_kv bad[] = {{"x", "a\r\nb"}};
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "a", "/", bad, 1, NULL, 0), -SQ_EUSAGE);
    assert_int_equal(sq_h2_req_init(&r, "", "http", "a", "/", NULL, 0, NULL, 0), -SQ_EUSAGE);
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "", "/", NULL, 0, NULL, 0), -SQ_EUSAGE);
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "a", "", NULL, 0, NULL, 0), -SQ_EUSAGE);
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "a", "/", NULL, 0, NULL, 5), -SQ_EUSAGE);
}

/* ---- an in-memory nghttp2 server ---- */

struct msrv {
    nghttp2_session *s;
    int requests;
    int rst_every;    /* > 0: reset every n-th stream id ((id + 1) / 2 % n == 0) */
    int goaway_after; /* > 0: GOAWAY (last id = the n-th request) once n requests came */
    int32_t goaway_id;
    uint64_t body_in[MAXS];  /* request body bytes, by (id - 1) / 2 % MAXS */
    const char *fill;        /* 256 bytes of content */
    const nghttp2_nv *extra; /* more fields on every final head, and a 103 before it */
    size_t nextra;
};

static char fill_block[256];

/* Answer to stream id: status 200 + ((id - 1) / 2) % 3 (200, 201, 202), body id * 10 bytes. */
static ssize_t ms_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                       nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    uint64_t *left = src->ptr;
    size_t n = *left < len ? (size_t)*left : len;
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)fill_block[i % 256];
    *left -= n;
    if (!*left)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static uint64_t ms_left[4096];

static int ms_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct msrv *m = ud;
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    int32_t id = f->hd.stream_id;
    int k = (id + 1) / 2; /* 1, 2, 3, ... */
    if (m->goaway_id && id > m->goaway_id)
        return 0; /* after the GOAWAY: left unprocessed, the client refuses it */
    m->requests++;
    if (m->goaway_after && m->requests == m->goaway_after) {
        nghttp2_submit_goaway(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR, NULL, 0);
        m->goaway_id = id;
    }
    if (m->rst_every && k % m->rst_every == 0) {
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
        return 0;
    }
    char status[4];
    snprintf(status, sizeof(status), "%d", 200 + (k - 1) % 3);
    ms_left[id % 4096] = (uint64_t)id * 10;
    nghttp2_nv nv[8] = {{(uint8_t *)":status", (uint8_t *)status, 7, 3, 0}};
    assert_true(m->nextra < 8);
    for (size_t i = 0; i < m->nextra; i++)
        nv[1 + i] = m->extra[i];
    if (m->nextra) {
        nghttp2_nv early[] = {{(uint8_t *)":status", (uint8_t *)"103", 7, 3, 0},
                              {(uint8_t *)"link", (uint8_t *)"</a.css>", 4, 8, 0}};
        assert_int_equal(nghttp2_submit_headers(s, NGHTTP2_FLAG_NONE, id, NULL, early, 2, NULL), 0);
    }
    nghttp2_data_provider prd = {.source.ptr = &ms_left[id % 4096], .read_callback = ms_read};
    assert_int_equal(nghttp2_submit_response(s, id, nv, 1 + m->nextra, &prd), 0);
    return 0;
}

static int ms_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *ud)
{
    (void)s;
    (void)flags;
    (void)data;
    struct msrv *m = ud;
    m->body_in[(id - 1) / 2 % MAXS] += len;
    return 0;
}

static void msrv_init(struct msrv *m)
{
    memset(m, 0, sizeof(*m));
    for (int i = 0; i < 256; i++)
        fill_block[i] = (char)('a' + i % 26);
    nghttp2_session_callbacks *cb;
    assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, ms_frame);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, ms_data);
    assert_int_equal(nghttp2_session_server_new(&m->s, cb, m), 0);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 128}};
    assert_int_equal(nghttp2_submit_settings(m->s, NGHTTP2_FLAG_NONE, iv, 1), 0);
}

/* Moves bytes both ways until neither side has anything to say. */
static void shuttle(struct harness *h, struct msrv *m)
{
    for (int round = 0; round < 100000; round++) {
        bool moved = false;
        const char *p;
        size_t len;
        assert_int_equal(sq_h2_client_pending(&h->c, &p, &len), 0);
        if (len) {
            /* deliver in two pieces: the session must take any split */
            size_t half = len / 2;
            assert_int_equal(nghttp2_session_mem_recv(m->s, (const uint8_t *)p, half),
                             (ssize_t)half);
            assert_int_equal(nghttp2_session_mem_recv(m->s, (const uint8_t *)p + half, len - half),
                             (ssize_t)(len - half));
            sq_h2_client_consume(&h->c, len);
            moved = true;
        }
        const uint8_t *d;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(m->s, &d)) > 0) {
            assert_int_equal(sq_h2_client_feed(&h->c, (const char *)d, (size_t)n), 0);
            moved = true;
        }
        assert_true(n == 0);
        if (!moved)
            return;
    }
    fail_msg("shuttle did not settle");
}

static void test_mem_streams(void **state)
{
    (void)state;
    struct harness *h = calloc(1, sizeof(*h));
    struct msrv m;
    msrv_init(&m);
    harness_init(h, 64, false);
    struct sq_h2_req r;
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "x", "/y", NULL, 0, NULL, 0), 0);
    /* 64 concurrent, each slot resubmitted as it closes, 640 requests in all */
    h->again = &r;
    h->total = 640;
    for (int i = 0; i < 64; i++) {
        assert_true(sq_h2_client_can_submit(&h->c));
        assert_true(sq_h2_client_submit(&h->c, &r, &h->s[i].st) > 0);
        h->started++;
    }
    assert_false(sq_h2_client_can_submit(&h->c)); /* our own cap */
    assert_int_equal(sq_h2_client_submit(&h->c, &r, &h->s[64].st), -EAGAIN);
    assert_int_equal(h->c.open, 64);
    shuttle(h, &m);
    assert_int_equal(h->closed, 640);
    assert_int_equal(h->headers, 640);
    assert_int_equal(m.requests, 640);
    assert_int_equal(h->c.open, 0);
    for (int i = 0; i < 64; i++) { /* each slot's last stream */
        struct slot *s = &h->s[i];
        int32_t id = s->st.id;
        assert_true(s->closed);
        assert_int_equal(s->err, SQ_H2_NO_ERROR);
        assert_int_equal(s->status, 200 + ((id + 1) / 2 - 1) % 3);
        assert_int_equal(s->st.status, s->status);
        assert_int_equal(s->body, (uint64_t)id * 10);
        assert_true(s->st.rx_bytes > s->body);
    }

    /* what nghttp2 allocates per request, in the steady state */
    uint64_t a0 = h->c.allocs;
    h->total += 640;
    for (int i = 0; i < 64; i++) {
        assert_true(sq_h2_client_submit(&h->c, &r, &h->s[i].st) > 0);
        h->started++;
    }
    shuttle(h, &m);
    assert_int_equal(h->closed, 1280);
    double per = (double)(h->c.allocs - a0) / 640;
    print_message("nghttp2 client allocations per request: %.2f\n", per);
    assert_true(per < 16); /* a regression guard, not a target */

    sq_h2_req_dispose(&r);
    nghttp2_session_del(m.s);
    harness_dispose(h);
    free(h);
}

static void test_mem_body_upload(void **state)
{
    (void)state;
    struct harness *h = calloc(1, sizeof(*h));
    struct msrv m;
    msrv_init(&m);
    harness_init(h, 8, true);
    size_t blen = 100000; /* several DATA frames */
    char *body = malloc(blen);
    memset(body, 'q', blen);
    struct sq_h2_req r;
    assert_int_equal(sq_h2_req_init(&r, "POST", "http", "x", "/up", NULL, 0, body, blen), 0);
    for (int i = 0; i < 4; i++)
        assert_true(sq_h2_client_submit(&h->c, &r, &h->s[i].st) > 0);
    shuttle(h, &m);
    assert_int_equal(h->closed, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(m.body_in[i], blen);
        int32_t id = h->s[i].st.id;
        assert_int_equal(h->s[i].data_len, (size_t)id * 10); /* want_body: the bytes themselves */
        assert_memory_equal(h->s[i].data, fill_block,
                            h->s[i].data_len < 256 ? h->s[i].data_len : 256);
    }
    sq_h2_req_dispose(&r);
    free(body);
    nghttp2_session_del(m.s);
    harness_dispose(h);
    free(h);
}

/* The final head's fields: content-encoding and content-type read for every stream, every field
 * handed to on_field only for a stream that asked (want_fields), 1xx heads left out. */
static void test_mem_fields(void **state)
{
    (void)state;
    struct harness *h = calloc(1, sizeof(*h));
    struct msrv m;
    msrv_init(&m);
    static const nghttp2_nv extra[] = {
        {(uint8_t *)"content-encoding", (uint8_t *)"gzip", 16, 4, 0},
        {(uint8_t *)"content-type", (uint8_t *)"Text/Event-Stream; charset=utf-8", 12, 32, 0},
        {(uint8_t *)"set-cookie", (uint8_t *)"a=1; Path=/", 10, 11, 0},
    };
    m.extra = extra;
    m.nextra = 3;
    harness_init(h, 8, false);
    struct sq_h2_req r;
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "x", "/", NULL, 0, NULL, 0), 0);
    h->s[1].st.want_fields = true;
    assert_true(sq_h2_client_submit(&h->c, &r, &h->s[0].st) > 0);
    assert_true(sq_h2_client_submit(&h->c, &r, &h->s[1].st) > 0);
    shuttle(h, &m);
    assert_int_equal(h->closed, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(h->s[i].err, SQ_H2_NO_ERROR);
        assert_int_equal(h->s[i].st.coding, SQ_CODING_GZIP);
        assert_true(h->s[i].st.event_stream);
    }
    /* one stream's fields, before its on_headers, without the 103's link or any pseudo-header */
    assert_string_equal(h->fields, "content-encoding=gzip;content-type=Text/Event-Stream; "
                                   "charset=utf-8;set-cookie=a=1; Path=/;");
    assert_int_equal(h->status_at_first_field, 0);

    /* two codings stack: not decodable here; identity is none */
    static const nghttp2_nv two[] = {
        {(uint8_t *)"content-encoding", (uint8_t *)"gzip", 16, 4, 0},
        {(uint8_t *)"content-encoding", (uint8_t *)"br", 16, 2, 0},
        {(uint8_t *)"content-type", (uint8_t *)"text/plain", 12, 10, 0}};
    m.extra = two;
    assert_true(sq_h2_client_submit(&h->c, &r, &h->s[2].st) > 0);
    shuttle(h, &m);
    assert_int_equal(h->s[2].st.coding, SQ_CODING_OTHER);
    assert_false(h->s[2].st.event_stream);
    static const nghttp2_nv id[] = {
        {(uint8_t *)"content-encoding", (uint8_t *)"identity", 16, 8, 0}};
    m.extra = id;
    m.nextra = 1;
    assert_true(sq_h2_client_submit(&h->c, &r, &h->s[3].st) > 0);
    shuttle(h, &m);
    assert_int_equal(h->s[3].st.coding, SQ_CODING_NONE);
    sq_h2_req_dispose(&r);
    nghttp2_session_del(m.s);
    harness_dispose(h);
    free(h);
}

/* A request from its HTTP/1.1 bytes is the one sq_h2_req_init builds from the same parts, and a
 * second conversion into the same req reuses its storage when it fits. */
static void test_req_from_h1(void **state)
{
    (void)state;
    struct sq_kv hv[] = {{"X-Thing", "1"}, {"Connection", "keep-alive"}, {"Accept", "*/*"}};
    char *h1;
    size_t len;
    assert_int_equal(sq_request_build("POST", "/p?q=1", "a:8", hv, 3, "hey", 3, &h1, &len), 0);
    struct sq_h2_req a = {0}, b;
    assert_int_equal(sq_h2_req_from_h1(&a, "http", h1, len), 0);
    assert_int_equal(sq_h2_req_init(&b, "POST", "http", "a:8", "/p?q=1", hv, 3, "hey", 3), 0);
    /* the same fields (the regular ones maybe in another order: user-agent and content-length
     * come from the HTTP/1.1 head where sq_request_build put them) */
    assert_int_equal(a._nvlen, b._nvlen);
    for (size_t i = 0; i < a._nvlen; i++) {
        const nghttp2_nv *x = nv_of(&a, i);
        bool found = false;
        for (size_t k = 0; k < b._nvlen && !found; k++) {
            const nghttp2_nv *y = nv_of(&b, k);
            found = x->namelen == y->namelen && x->valuelen == y->valuelen &&
                    !memcmp(x->name, y->name, x->namelen) &&
                    !memcmp(x->value, y->value, x->valuelen) && (i >= 4 || i == k);
        }
        if (!found)
            fail_msg("field %zu '%.*s' of the converted request is not sq_h2_req_init's", i,
                     (int)x->namelen, x->name);
    }
    assert_nv(&a, 2, ":authority", "a:8");
    assert_int_equal(a._body_len, 3);
    assert_memory_equal(a._body, "hey", 3);
    assert_ptr_equal(a._body, h1 + len - 3); /* borrowed */
    sq_h2_req_dispose(&b);

    char *store = a._store;
    char *h1b;
    size_t lenb;
    assert_int_equal(sq_request_build("GET", "/", "a:8", NULL, 0, NULL, 0, &h1b, &lenb), 0);
    assert_int_equal(sq_h2_req_from_h1(&a, "https", h1b, lenb), 0);
    assert_ptr_equal(a._store, store);
    assert_nv(&a, 0, ":method", "GET");
    assert_nv(&a, 1, ":scheme", "https");
    assert_nv(&a, 3, ":path", "/");
    assert_int_equal(a._body_len, 0);

    /* not a request head, or one HTTP/2 cannot carry: refused, a stays the last good request */
    static const char chunked[] =
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_int_equal(sq_h2_req_from_h1(&a, "http", chunked, sizeof(chunked) - 1), -SQ_EUSAGE);
    assert_int_equal(sq_h2_req_from_h1(&a, "http", "nonsense", 8), -SQ_EUSAGE);
    static const char nohost[] = "GET / HTTP/1.1\r\nAccept: x\r\n\r\n";
    assert_int_equal(sq_h2_req_from_h1(&a, "http", nohost, sizeof(nohost) - 1), -SQ_EUSAGE);
    assert_nv(&a, 0, ":method", "GET");
    sq_h2_req_dispose(&a);
    free(h1);
    free(h1b);
}

static void test_mem_rst(void **state)
{
    (void)state;
    struct harness *h = calloc(1, sizeof(*h));
    struct msrv m;
    msrv_init(&m);
    m.rst_every = 3;
    harness_init(h, 32, false);
    struct sq_h2_req r;
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "x", "/", NULL, 0, NULL, 0), 0);
    for (int i = 0; i < 30; i++)
        assert_true(sq_h2_client_submit(&h->c, &r, &h->s[i].st) > 0);
    shuttle(h, &m);
    assert_int_equal(h->closed, 30);
    int reset = 0;
    for (int i = 0; i < 30; i++) {
        int k = (h->s[i].st.id + 1) / 2;
        if (k % 3 == 0) {
            assert_int_equal(h->s[i].err, SQ_H2_INTERNAL_ERROR);
            assert_int_equal(h->s[i].status, 0);
            reset++;
        } else {
            assert_int_equal(h->s[i].err, SQ_H2_NO_ERROR);
            assert_true(h->s[i].status >= 200);
        }
    }
    assert_int_equal(reset, 10);
    assert_true(sq_h2_client_alive(&h->c)); /* a reset stream does not end the connection */
    sq_h2_req_dispose(&r);
    nghttp2_session_del(m.s);
    harness_dispose(h);
    free(h);
}

static void test_mem_cancel(void **state)
{
    (void)state;
    struct harness *h = calloc(1, sizeof(*h));
    struct msrv m;
    msrv_init(&m);
    harness_init(h, 4, false);
    struct sq_h2_req r;
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "x", "/", NULL, 0, NULL, 0), 0);
    for (int i = 0; i < 4; i++)
        assert_true(sq_h2_client_submit(&h->c, &r, &h->s[i].st) > 0);
    assert_false(sq_h2_client_can_submit(&h->c));
    /* cancelled while its HEADERS still wait in the queue: never sent, slot free at once */
    sq_h2_client_cancel(&h->c, &h->s[1].st, SQ_H2_CANCEL);
    sq_h2_client_cancel(&h->c, &h->s[1].st, SQ_H2_CANCEL); /* twice: a no-op */
    assert_int_equal(h->c.open, 3);
    assert_true(sq_h2_client_can_submit(&h->c));
    /* the rest reach the server, which answers; one is cancelled before the answer arrives */
    const char *p;
    size_t len;
    assert_int_equal(sq_h2_client_pending(&h->c, &p, &len), 0);
    assert_int_equal(nghttp2_session_mem_recv(m.s, (const uint8_t *)p, len), (ssize_t)len);
    sq_h2_client_consume(&h->c, len);
    assert_int_equal(m.requests, 3);
    sq_h2_client_cancel(&h->c, &h->s[2].st, SQ_H2_CANCEL);
    shuttle(h, &m);
    assert_int_equal(h->closed, 2); /* 0 and 3; the cancelled ones are never named again */
    assert_true(h->s[0].closed && h->s[3].closed);
    assert_false(h->s[1].closed || h->s[2].closed);
    assert_int_equal(h->c.open, 0);
    assert_true(sq_h2_client_alive(&h->c));
    /* the freed slots carry new requests */
    assert_true(sq_h2_client_submit(&h->c, &r, &h->s[1].st) > 0);
    shuttle(h, &m);
    assert_true(h->s[1].closed);
    assert_int_equal(h->s[1].err, SQ_H2_NO_ERROR);
    sq_h2_req_dispose(&r);
    nghttp2_session_del(m.s);
    harness_dispose(h);
    free(h);
}

static void test_mem_goaway(void **state)
{
    (void)state;
    struct harness *h = calloc(1, sizeof(*h));
    struct msrv m;
    msrv_init(&m);
    m.goaway_after = 5; /* GOAWAY with last_stream_id = the 5th request's id (9) */
    harness_init(h, 32, false);
    struct sq_h2_req r;
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "x", "/", NULL, 0, NULL, 0), 0);
    /* submitted one by one so the server sees them in order: 5 are processed, and the 5
     * submitted before the GOAWAY reached the client but after the 5th are refused */
    for (int i = 0; i < 10; i++)
        assert_true(sq_h2_client_submit(&h->c, &r, &h->s[i].st) > 0);
    shuttle(h, &m);
    assert_int_equal(h->goaways, 1);
    assert_int_equal(h->goaway_err, SQ_H2_NO_ERROR);
    assert_int_equal(h->goaway_last, 9);
    assert_true(h->c.goaway);
    assert_int_equal(h->closed, 10);
    int refused = 0;
    for (int i = 0; i < 10; i++) {
        if (h->s[i].st.id > 9) {
            assert_int_equal(h->s[i].err, SQ_H2_REFUSED_STREAM);
            refused++;
        } else {
            assert_int_equal(h->s[i].err, SQ_H2_NO_ERROR);
        }
    }
    assert_int_equal(refused, 5);
    assert_false(sq_h2_client_can_submit(&h->c));
    assert_int_equal(sq_h2_client_submit(&h->c, &r, &h->s[20].st), -EPIPE);
    sq_h2_req_dispose(&r);
    nghttp2_session_del(m.s);
    harness_dispose(h);
    free(h);
}

static void test_mem_garbage(void **state)
{
    (void)state;
    struct harness *h = calloc(1, sizeof(*h));
    harness_init(h, 4, false);
    struct sq_h2_req r;
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "x", "/", NULL, 0, NULL, 0), 0);
    assert_true(sq_h2_client_submit(&h->c, &r, &h->s[0].st) > 0);
    const char *p;
    size_t len;
    assert_int_equal(sq_h2_client_pending(&h->c, &p, &len), 0);
    assert_true(len > 24);
    assert_memory_equal(p, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    sq_h2_client_consume(&h->c, 6); /* a short write keeps the rest */
    const char *p2;
    size_t len2;
    assert_int_equal(sq_h2_client_pending(&h->c, &p2, &len2), 0);
    assert_int_equal(len2, len - 6);
    assert_memory_equal(p2, "HTTP/2.0", 6);
    sq_h2_client_consume(&h->c, len2);
    /* an HTTP/1.1 answer is no SETTINGS frame: the session ends (feed fails, or a GOAWAY is
     * queued and the session stops reading) */
    static const char junk[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    int rc = sq_h2_client_feed(&h->c, junk, sizeof(junk) - 1);
    if (rc == 0) {
        assert_int_equal(sq_h2_client_pending(&h->c, &p, &len), 0);
        assert_true(len > 0); /* the GOAWAY */
        sq_h2_client_consume(&h->c, len);
        assert_false(sq_h2_client_alive(&h->c));
    } else {
        assert_int_equal(rc, -SQ_EPARSE);
    }
    sq_h2_req_dispose(&r);
    harness_dispose(h);
    free(h);
}

/* ---- live: the target over h2c ---- */

static int connect_to(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* Runs the client over fd until `want` streams closed (5 s at most). */
static void drive(struct harness *h, int fd, int want)
{
    int64_t end = sq_now_ns() + 5 * SQ_NS_PER_S;
    char buf[65536];
    while (h->closed < want) {
        assert_true(sq_now_ns() < end);
        const char *p;
        size_t len;
        assert_int_equal(sq_h2_client_pending(&h->c, &p, &len), 0);
        struct pollfd pf = {.fd = fd, .events = POLLIN | (len ? POLLOUT : 0)};
        assert_true(poll(&pf, 1, 1000) >= 0);
        if (pf.revents & POLLOUT) {
            ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
            assert_true(n > 0);
            sq_h2_client_consume(&h->c, (size_t)n);
        }
        if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            assert_true(n > 0);
            assert_int_equal(sq_h2_client_feed(&h->c, buf, (size_t)n), 0);
        }
    }
}

static json_t *stats_h1(uint16_t port)
{
    int fd = connect_to(port);
    static const char rq[] = "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    assert_int_equal(send(fd, rq, sizeof(rq) - 1, 0), (ssize_t)sizeof(rq) - 1);
    static char buf[16384];
    size_t len = 0;
    ssize_t n;
    while ((n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = 0;
    char *body = strstr(buf, "\r\n\r\n");
    assert_non_null(body);
    json_t *j = json_loads(body + 4, 0, NULL);
    assert_non_null(j);
    return j;
}

static uint64_t jget(json_t *j, const char *a, const char *b)
{
    json_t *v = json_object_get(j, a);
    if (b)
        v = json_object_get(v, b);
    assert_true(json_is_integer(v));
    return (uint64_t)json_integer_value(v);
}

static const char PATTERN[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void test_live_target(void **state)
{
    (void)state;
    struct sq_target_config cfg = {.threads = 2, .arrivals_cap = 4096};
    struct sq_target *t;
    assert_int_equal(sq_target_start(&cfg, &t, NULL), 0);
    uint16_t port = sq_target_port(t);
    char auth[32];
    snprintf(auth, sizeof(auth), "127.0.0.1:%u", port);

    struct harness *h = calloc(1, sizeof(*h));
    harness_init(h, 128, true);
    int fd = connect_to(port);

    /* one connection, many concurrent streams, every endpoint */
    enum { N = 100 };
    static const char *paths[] = {"/fast",     "/ok",   "/bytes/100000", "/status/503",
                                  "/delay/20", "/nope", "/bytes/0",      "/status/204"};
    static const int want_status[] = {200, 200, 200, 503, 200, 404, 200, 204};
    static const uint64_t want_len[] = {11, 0, 100000, 0, 0, 0, 0, 0};
    enum { NP = sizeof(paths) / sizeof(paths[0]) };
    struct sq_h2_req reqs[NP];
    for (int i = 0; i < NP; i++)
        assert_int_equal(sq_h2_req_init(&reqs[i], "GET", "http", auth, paths[i], NULL, 0, NULL, 0),
                         0);
    int64_t t0 = sq_now_ns();
    for (int i = 0; i < N; i++)
        assert_true(sq_h2_client_submit(&h->c, &reqs[i % NP], &h->s[i].st) > 0);
    drive(h, fd, N);
    assert_true(sq_now_ns() - t0 >= 20 * SQ_NS_PER_MS); /* the /delay ones waited */
    for (int i = 0; i < N; i++) {
        struct slot *s = &h->s[i];
        assert_int_equal(s->err, SQ_H2_NO_ERROR);
        assert_int_equal(s->status, want_status[i % NP]);
        assert_int_equal(s->body, want_len[i % NP]);
        if (i % NP == 0)
            assert_memory_equal(s->data, "hello world", 11);
        if (i % NP == 2)
            for (size_t k = 0; k < s->data_len; k += 997)
                assert_int_equal(s->data[k], PATTERN[k % 64]);
    }

    /* nghttp2's allocations per request against this server, the same client session: one
     * more than in memory (test_mem_streams) for the literal content-length the server's
     * HPACK never indexes */
    uint64_t a0 = h->c.allocs;
    for (int i = 0; i < 100; i++)
        assert_true(sq_h2_client_submit(&h->c, &reqs[0], &h->s[N + 10 + i].st) > 0);
    drive(h, fd, 2 * N);
    double per = (double)(h->c.allocs - a0) / 100;
    print_message("nghttp2 client allocations per /fast over h2c: %.2f\n", per);
    assert_true(per <= 4.05);
    h->closed -= 100;

    /* a body up and back: /echo (several DATA frames each way) */
    size_t blen = 70000;
    char *body = malloc(blen);
    for (size_t k = 0; k < blen; k++)
        body[k] = (char)('a' + k % 26);
    struct sq_kv hv[] = {{"X-Test", "yes"}};
    struct sq_h2_req echo;
    assert_int_equal(sq_h2_req_init(&echo, "POST", "http", auth, "/echo?q=1", hv, 1, body, blen),
                     0);
    struct slot *es = &h->s[N];
    assert_true(sq_h2_client_submit(&h->c, &echo, &es->st) > 0);
    drive(h, fd, N + 1);
    assert_int_equal(es->status, 200);
    json_t *j = json_loadb(es->data, es->data_len, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "version")), "HTTP/2");
    assert_string_equal(json_string_value(json_object_get(j, "method")), "POST");
    assert_string_equal(json_string_value(json_object_get(j, "path")), "/echo?q=1");
    assert_int_equal(json_integer_value(json_object_get(j, "body_len")), (json_int_t)blen);
    json_t *hs = json_object_get(j, "headers");
    assert_string_equal(json_string_value(json_array_get(json_array_get(hs, 0), 0)), "host");
    assert_string_equal(json_string_value(json_array_get(json_array_get(hs, 0), 1)), auth);
    bool xt = false;
    for (size_t k = 0; k < json_array_size(hs); k++)
        if (strcmp(json_string_value(json_array_get(json_array_get(hs, k), 0)), "x-test") == 0)
            xt = true;
    assert_true(xt);
    json_decref(j);

    /* a body over the server's 1 MiB cap: 413, the connection goes on */
    size_t big = (1 << 20) + 1;
    char *bigbody = calloc(1, big);
    struct sq_h2_req bigreq;
    assert_int_equal(sq_h2_req_init(&bigreq, "POST", "http", auth, "/echo", NULL, 0, bigbody, big),
                     0);
    struct slot *bs = &h->s[N + 1];
    assert_true(sq_h2_client_submit(&h->c, &bigreq, &bs->st) > 0);
    drive(h, fd, N + 2);
    assert_int_equal(bs->status, 413);
    assert_true(sq_h2_client_alive(&h->c));
    struct slot *after = &h->s[N + 2];
    assert_true(sq_h2_client_submit(&h->c, &reqs[0], &after->st) > 0);
    drive(h, fd, N + 3);
    assert_int_equal(after->status, 200);

    /* /stats (over HTTP/1.1) counts one h2 connection that carried every stream */
    j = stats_h1(port);
    assert_int_equal(jget(j, "h2", "connections"), 1);
    assert_int_equal(jget(j, "h2", "streams"), N + 100 + 2); /* the 413 never reached the handler */
    json_decref(j);

    close(fd);
    for (int i = 0; i < NP; i++)
        sq_h2_req_dispose(&reqs[i]);
    sq_h2_req_dispose(&echo);
    sq_h2_req_dispose(&bigreq);
    free(body);
    free(bigbody);
    harness_dispose(h);
    free(h);
    sq_target_free(t);
}

/* The preface split over many writes, and HTTP/1.1 before it, on the same server. */
static void test_live_preface(void **state)
{
    (void)state;
    struct sq_target_config cfg = {.threads = 1, .arrivals_cap = 4096};
    struct sq_target *t;
    assert_int_equal(sq_target_start(&cfg, &t, NULL), 0);
    uint16_t port = sq_target_port(t);

    struct harness *h = calloc(1, sizeof(*h));
    harness_init(h, 8, false);
    struct sq_h2_req r;
    assert_int_equal(sq_h2_req_init(&r, "GET", "http", "x", "/fast", NULL, 0, NULL, 0), 0);
    assert_true(sq_h2_client_submit(&h->c, &r, &h->s[0].st) > 0);
    int fd = connect_to(port);
    const char *p;
    size_t len;
    assert_int_equal(sq_h2_client_pending(&h->c, &p, &len), 0);
    for (size_t i = 0; i < 30; i++) { /* byte by byte across the preface and beyond */
        assert_int_equal(send(fd, p + i, 1, 0), 1);
        usleep(1000);
    }
    sq_h2_client_consume(&h->c, 30);
    drive(h, fd, 1);
    assert_int_equal(h->s[0].status, 200);
    assert_int_equal(h->s[0].body, 11);
    close(fd);

    /* the preface after an HTTP/1.1 request is no preface: 400 */
    fd = connect_to(port);
    static const char rq[] =
        "GET /fast HTTP/1.1\r\nHost: x\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    assert_int_equal(send(fd, rq, sizeof(rq) - 1, 0), (ssize_t)sizeof(rq) - 1);
    char buf[4096];
    size_t got = 0;
    ssize_t n;
    while ((n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
        got += (size_t)n;
    buf[got] = 0;
    assert_non_null(strstr(buf, "HTTP/1.1 200 OK"));
    assert_non_null(strstr(buf, "HTTP/1.1 400 Bad Request"));
    close(fd);

    json_t *j = stats_h1(port);
    assert_int_equal(jget(j, "h2", "connections"), 1);
    assert_int_equal(jget(j, "h2", "streams"), 1);
    json_decref(j);
    sq_h2_req_dispose(&r);
    harness_dispose(h);
    free(h);
    sq_target_free(t);
}

/* A client that resets a delayed stream, and one that leaves with streams open: the server
 * frees them (ASan checks) and goes on serving. */
static void test_live_cancel(void **state)
{
    (void)state;
    struct sq_target_config cfg = {.threads = 1, .arrivals_cap = 4096};
    struct sq_target *t;
    assert_int_equal(sq_target_start(&cfg, &t, NULL), 0);
    uint16_t port = sq_target_port(t);
    struct harness *h = calloc(1, sizeof(*h));
    harness_init(h, 8, false);
    struct sq_h2_req slow, fast;
    assert_int_equal(sq_h2_req_init(&slow, "GET", "http", "x", "/delay/300", NULL, 0, NULL, 0), 0);
    assert_int_equal(sq_h2_req_init(&fast, "GET", "http", "x", "/fast", NULL, 0, NULL, 0), 0);
    int fd = connect_to(port);
    int32_t id = sq_h2_client_submit(&h->c, &slow, &h->s[0].st);
    assert_true(id > 0);
    assert_true(sq_h2_client_submit(&h->c, &fast, &h->s[1].st) > 0);
    drive(h, fd, 1); /* /fast answers while /delay waits */
    assert_true(h->s[1].closed);
    assert_false(h->s[0].closed);
    assert_int_equal(nghttp2_submit_rst_stream(h->c._s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL), 0);
    drive(h, fd, 2);
    assert_int_equal(h->s[0].err, SQ_H2_CANCEL);
    assert_true(sq_h2_client_submit(&h->c, &slow, &h->s[2].st) > 0);
    assert_true(sq_h2_client_submit(&h->c, &fast, &h->s[3].st) > 0);
    drive(h, fd, 3);
    close(fd);          /* leaves with /delay open */
    usleep(400 * 1000); /* past the delay: the server must not answer a closed connection */
    json_t *j = stats_h1(port);
    assert_int_equal(jget(j, "h2", "streams"), 4);
    json_decref(j);
    sq_h2_req_dispose(&slow);
    sq_h2_req_dispose(&fast);
    harness_dispose(h);
    free(h);
    sq_target_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_req_init),        cmocka_unit_test(test_req_from_h1),
        cmocka_unit_test(test_mem_fields),      cmocka_unit_test(test_mem_streams),
        cmocka_unit_test(test_mem_body_upload), cmocka_unit_test(test_mem_rst),
        cmocka_unit_test(test_mem_goaway),      cmocka_unit_test(test_mem_cancel),
        cmocka_unit_test(test_mem_garbage),     cmocka_unit_test(test_live_target),
        cmocka_unit_test(test_live_preface),    cmocka_unit_test(test_live_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
