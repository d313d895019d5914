/* server/h2.c - HTTP/2 server sessions (nghttp2) on the server core's connections.
 *
 * One nghttp2 server session per HTTP/2 connection, driven with mem_recv / mem_send: server.c
 * reads into the worker's buffer and feeds it here; output is pulled out of the session into
 * the worker's batch buffer and sent with the server's own send path (server/h2.h).
 *
 * Each request stream gets a `struct stream` (from a per-connection free list: a connection
 * that carries many streams allocates its stream structs once). Its fields (pseudo-headers
 * too) are copied into the stream's buffer as they arrive, its body into a buffer capped at
 * SQ_SERVER_MAX_BODY. When the request ends (END_STREAM) the handler runs once with an
 * sq_server_req like HTTP/1.1's - :method, :path, the fields as headers, ":authority" as a
 * "host" header when the request carries none - and its answer is copied into the stream
 * (handlers may answer from scratch memory that the next request reuses), then submitted:
 * HEADERS with :status, content-length (not for 204/304), content-type and the handler's extra
 * lines (names lowercased; connection-specific fields dropped), and a DATA source that reads
 * the body, then the fill tail cyclically (never copied whole). A delayed answer (delay_ns)
 * waits on the stream's own loop timer; the other streams of the connection go on meanwhile.
 * A streamed answer (resp->stream) gets HEADERS without content-length and a DATA source that
 * makes each piece when nghttp2 asks for data and the piece is due; until then it defers and
 * the stream's timer resumes it (flow control and a full socket hold pieces back, never queue
 * them).
 *
 * Limits as HTTP/1.1: a header block over SQ_SERVER_MAX_HEAD bytes or SQ_SERVER_MAX_HEADERS
 * fields is answered 431, a body over SQ_SERVER_MAX_BODY 413 (without calling the handler).
 * `close` in an answer becomes a GOAWAY (NO_ERROR) after that stream. HEAD gets no DATA.
 */
#include "server/h2.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "http/nghttp2lib.h"
#include "loop/loop.h"

#define HBUF_INLINE   256               /* request fields kept in the stream itself */
#define RS_INLINE     64                /* answer (content type, extra lines, body) kept inline */
#define STREAM_WINDOW (2 * 1024 * 1024) /* per stream: a whole SQ_SERVER_MAX_BODY fits */
#define CONN_WINDOW   (64 * 1024 * 1024)
#define FREE_KEEP     64 /* stream structs a connection keeps for reuse */
#define MAX_PSEUDO    4  /* :method :scheme :authority :path (and :protocol, ignored) */
#define MAX_RESP_NV   (3 + SQ_SERVER_MAX_HEADERS)

struct stream {
    struct sq_server__h2 *h;
    struct stream *prev, *next; /* live streams of the connection; next: the free list */
    struct sq_timer timer;      /* a delayed answer */
    int32_t id;
    bool answered; /* the handler ran (or an error answer was chosen) */
    bool too_big;  /* header block over the limits: 431 */
    bool body_big; /* body over SQ_SERVER_MAX_BODY: 413 */
    bool head;     /* a HEAD request: no DATA */
    uint16_t nfields;
    uint32_t hlen, hcap;
    char *hbuf; /* fields: [u16 name_len][u16 value_len][name][value], ... */
    char *body; /* the request body (heap) */
    uint32_t body_len, body_cap;
    /* the answer */
    int status;
    uint32_t ctype_len, hdrs_len; /* rs = [content type][extra lines][body] */
    size_t rs_len, body_off, rbody_len;
    char *rs;
    const char *fill;
    size_t fill_len, fill_off;
    uint64_t fill_left;
    uint64_t content_length;
    /* a streamed answer (sq_server_resp.stream): pieces made as nghttp2 asks for DATA */
    bool streamed;
    struct sq_server__pace pace;
    char *piece; /* SQ_SERVER_STREAM_PIECE bytes: the piece being sent */
    uint32_t piece_len, piece_off;
    char hinl[HBUF_INLINE];
    char rinl[RS_INLINE];
};

struct sq_server__h2 {
    nghttp2_session *s;
    struct conn *c;
    struct sq_loop *loop;
    struct stream *live; /* doubly linked */
    struct stream *free; /* singly linked through next */
    int nfree;
    bool dying; /* being freed: callbacks do nothing */
};

static nghttp2_session_callbacks *callbacks;
static nghttp2_option *options;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* ---- streams ---- */

static void on_timer(struct sq_loop *loop, struct sq_timer *t);

static struct stream *stream_get(struct sq_server__h2 *h, int32_t id)
{
    struct stream *st = h->free;
    if (st) {
        h->free = st->next;
        h->nfree--;
    } else if (!(st = malloc(sizeof(*st)))) {
        return NULL;
    }
    memset(st, 0, offsetof(struct stream, hinl));
    st->h = h;
    st->id = id;
    st->hbuf = st->hinl;
    st->hcap = HBUF_INLINE;
    st->rs = st->rinl;
    sq_timer_init(&st->timer, on_timer);
    st->next = h->live;
    if (h->live)
        h->live->prev = st;
    h->live = st;
    return st;
}

static void stream_release(struct sq_server__h2 *h, struct stream *st, bool keep)
{
    sq_timer_stop(h->loop, &st->timer);
    if (st->hbuf != st->hinl)
        free(st->hbuf);
    if (st->rs != st->rinl)
        free(st->rs);
    free(st->body);
    free(st->piece);
    if (st->prev)
        st->prev->next = st->next;
    else
        h->live = st->next;
    if (st->next)
        st->next->prev = st->prev;
    if (keep && h->nfree < FREE_KEEP) {
        st->next = h->free;
        h->free = st;
        h->nfree++;
    } else {
        free(st);
    }
}

static bool hbuf_add(struct stream *st, const uint8_t *name, size_t nlen, const uint8_t *value,
                     size_t vlen)
{
    size_t need = st->hlen + 4 + nlen + vlen;
    if (need > SQ_SERVER_MAX_HEAD || st->nfields >= SQ_SERVER_MAX_HEADERS + MAX_PSEUDO)
        return false;
    if (need > st->hcap) {
        size_t cap = st->hcap * 2 > need ? st->hcap * 2 : need;
        if (cap > SQ_SERVER_MAX_HEAD)
            cap = SQ_SERVER_MAX_HEAD;
        char *p = malloc(cap);
        if (!p)
            return false;
        memcpy(p, st->hbuf, st->hlen);
        if (st->hbuf != st->hinl)
            free(st->hbuf);
        st->hbuf = p;
        st->hcap = (uint32_t)cap;
    }
    uint16_t l[2] = {(uint16_t)nlen, (uint16_t)vlen};
    char *o = st->hbuf + st->hlen;
    memcpy(o, l, 4);
    memcpy(o + 4, name, nlen);
    memcpy(o + 4 + nlen, value, vlen);
    st->hlen = (uint32_t)need;
    st->nfields++;
    return true;
}

static bool body_reserve(struct stream *st, uint64_t need)
{
    if (need > SQ_SERVER_MAX_BODY)
        return false;
    if (need <= st->body_cap)
        return true;
    uint64_t cap = (uint64_t)st->body_cap * 2;
    if (cap < need)
        cap = need;
    if (cap < 1024)
        cap = 1024;
    if (cap > SQ_SERVER_MAX_BODY)
        cap = SQ_SERVER_MAX_BODY;
    char *p = realloc(st->body, (size_t)cap);
    if (!p)
        return false;
    st->body = p;
    st->body_cap = (uint32_t)cap;
    return true;
}

/* ---- answering ---- */

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    struct stream *st = src->ptr;
    size_t n = 0;
    size_t left = st->rbody_len - st->body_off;
    if (left) {
        n = left < length ? left : length;
        memcpy(buf, st->rs + st->rs_len - st->rbody_len + st->body_off, n);
        st->body_off += n;
    }
    while (n < length && st->fill_left) {
        size_t k = st->fill_len - st->fill_off;
        if (k > length - n)
            k = length - n;
        if (k > st->fill_left)
            k = (size_t)st->fill_left;
        memcpy(buf + n, st->fill + st->fill_off, k);
        n += k;
        st->fill_left -= k;
        st->fill_off = (st->fill_off + k) % st->fill_len;
    }
    if (st->body_off == st->rbody_len && !st->fill_left)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* A streamed answer: copies the piece in progress, then makes the pieces that are due, until buf
 * is full; when nothing is due yet, arms the stream's timer for the next piece and defers (the
 * timer resumes the stream). */
static ssize_t read_stream(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                           uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    struct sq_server__h2 *h = ud;
    struct stream *st = src->ptr;
    size_t n = 0;
    int64_t now = 0;
    while (n < length) {
        if (st->piece_off < st->piece_len) {
            size_t k = st->piece_len - st->piece_off;
            if (k > length - n)
                k = length - n;
            memcpy(buf + n, st->piece + st->piece_off, k);
            st->piece_off += (uint32_t)k;
            n += k;
            continue;
        }
        struct sq_server__pace *p = &st->pace;
        if (p->next >= p->count) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            break;
        }
        int64_t due = sq_server__pace_due(p, p->next);
        if (!now)
            now = sq_now_ns();
        if (due > now) {
            if (n)
                break;
            if (sq_timer_start(h->loop, &st->timer, due) < 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
            return NGHTTP2_ERR_DEFERRED;
        }
        size_t k = p->fn(p->ud, p->next, p->count, st->piece, SQ_SERVER_STREAM_PIECE);
        p->next++;
        st->piece_len = (uint32_t)(k < SQ_SERVER_STREAM_PIECE ? k : SQ_SERVER_STREAM_PIECE);
        st->piece_off = 0;
    }
    return (ssize_t)n;
}

static bool conn_specific(const char *name, size_t n)
{
    static const char *const drop[] = {"connection", "keep-alive",        "proxy-connection",
                                       "upgrade",    "transfer-encoding", "content-length"};
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        if (strlen(drop[i]) == n && strncasecmp(drop[i], name, n) == 0)
            return true;
    return false;
}

static nghttp2_nv mknv(const char *name, size_t nlen, const char *value, size_t vlen)
{
    return (nghttp2_nv){(uint8_t *)(uintptr_t)name, (uint8_t *)(uintptr_t)value, nlen, vlen,
                        NGHTTP2_NV_FLAG_NONE};
}

/* Submits the answer kept in st. Returns 0 or a negative nghttp2 code (the stream is gone). */
static int submit(struct sq_server__h2 *h, struct stream *st)
{
    nghttp2_nv nv[MAX_RESP_NV];
    size_t n = 0;
    char status[4] = {(char)('0' + st->status / 100), (char)('0' + st->status / 10 % 10),
                      (char)('0' + st->status % 10), 0};
    nv[n++] = mknv(":status", 7, status, 3);
    char cl[24];
    bool no_cl = st->status == 204 || st->status == 304;
    if (!no_cl && !st->streamed) {
        int k = snprintf(cl, sizeof(cl), "%llu", (unsigned long long)st->content_length);
        nv[n++] = mknv("content-length", 14, cl, (size_t)k);
    }
    if (st->ctype_len)
        nv[n++] = mknv("content-type", 12, st->rs, st->ctype_len);
    /* extra lines "Name: value\r\n": names were lowercased when copied */
    char *p = st->rs + st->ctype_len, *end = p + st->hdrs_len;
    while (p < end && n < MAX_RESP_NV) {
        char *eol = memchr(p, '\n', (size_t)(end - p));
        char *line_end = eol ? eol : end;
        char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon && colon > p) {
            char *v = colon + 1, *ve = line_end;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (!conn_specific(p, (size_t)(colon - p)))
                nv[n++] = mknv(p, (size_t)(colon - p), v, (size_t)(ve - v));
        }
        p = eol ? eol + 1 : end;
    }
    bool body = !st->head && !no_cl && (st->streamed || st->content_length > 0);
    nghttp2_data_provider prd = {.source.ptr = st,
                                 .read_callback = st->streamed ? read_stream : read_body};
    return nghttp2_submit_response(h->s, st->id, nv, n, body ? &prd : NULL);
}

/* Copies the handler's answer into st (content type, extra lines, body; the fill tail by
 * reference). Returns false when out of memory (st then answers 500). */
static bool keep_answer(struct stream *st, const struct sq_server_resp *r)
{
    int status = r->status ? r->status : 200;
    const char *ctype = r->content_type;
    size_t hdrs_len = r->headers_len, body_len = r->body_len;
    uint64_t fill_total = r->fill_total;
    bool bad = status < 200 || status > 999 || (fill_total && (!r->fill || !r->fill_len));
    if (bad) {
        status = 500; /* as HTTP/1.1: no 1xx final answer, no fill without bytes */
        ctype = NULL;
        hdrs_len = body_len = 0;
        fill_total = 0;
    }
    size_t ctype_len = ctype ? strlen(ctype) : 0;
    size_t need = ctype_len + hdrs_len + body_len;
    char *rs = st->rinl;
    if (need > RS_INLINE && !(rs = malloc(need))) {
        st->status = 500;
        st->content_length = 0;
        return false;
    }
    if (ctype_len)
        memcpy(rs, ctype, ctype_len);
    if (hdrs_len) {
        memcpy(rs + ctype_len, r->headers, hdrs_len);
        /* lowercase the field names (RFC 9113 8.2.1) */
        bool in_name = true;
        for (size_t i = ctype_len; i < ctype_len + hdrs_len; i++) {
            char ch = rs[i];
            if (ch == '\n')
                in_name = true;
            else if (ch == ':')
                in_name = false;
            else if (in_name && ch >= 'A' && ch <= 'Z')
                rs[i] = (char)(ch + 32);
        }
    }
    if (body_len)
        memcpy(rs + ctype_len + hdrs_len, r->body, body_len);
    st->rs = rs;
    st->rs_len = need;
    st->status = status;
    st->ctype_len = (uint32_t)ctype_len;
    st->hdrs_len = (uint32_t)hdrs_len;
    st->rbody_len = body_len;
    st->body_off = 0;
    st->fill = r->fill;
    st->fill_len = r->fill_len;
    st->fill_off = 0;
    st->fill_left = fill_total;
    st->content_length = body_len + fill_total;
    if (r->stream && r->stream_count && !bad) {
        st->streamed = true;
        sq_server__pace_start(&st->pace, r);
        st->rbody_len = st->content_length = 0;
        st->fill_left = 0;
        if (!(st->piece = malloc(SQ_SERVER_STREAM_PIECE))) {
            st->streamed = false;
            st->status = 500;
            st->ctype_len = st->hdrs_len = 0;
            return false;
        }
    }
    return true;
}

/* The stream's timer: a delayed answer is due, or the next piece of a streamed one. Either
 * call fails only when the stream is gone: nothing to send then. */
static void on_timer(struct sq_loop *loop, struct sq_timer *t)
{
    (void)loop;
    struct stream *st = SQ_CONTAINER_OF(t, struct stream, timer);
    struct sq_server__h2 *h = st->h;
    if (st->streamed)
        (void)nghttp2_session_resume_data(h->s, st->id);
    else
        (void)submit(h, st);
    sq_server__h2_kick(h->c); /* may close the connection and free h */
}

static const char *field_at(const char *p, uint16_t *nlen, uint16_t *vlen)
{
    memcpy(nlen, p, 2);
    memcpy(vlen, p + 2, 2);
    return p + 4;
}

/* The request on st is complete (or refused by a limit): run the handler and answer. */
static void request_done(struct sq_server__h2 *h, struct stream *st)
{
    if (st->answered)
        return;
    st->answered = true;
    struct sq_server_resp resp = {0};
    if (st->too_big || st->body_big) {
        resp.status = st->too_big ? 431 : 413;
        keep_answer(st, &resp);
        (void)submit(h, st);
        return;
    }
    struct sq_h1_header hdrs[SQ_SERVER_MAX_HEADERS + 1];
    struct sq_server_req req = {.keep_alive = true, .h2 = true, .headers = hdrs};
    const char *authority = NULL;
    size_t authority_len = 0, nh = 1; /* hdrs[0] is kept for a host made from :authority */
    bool host = false;
    const char *p = st->hbuf, *end = st->hbuf + st->hlen;
    while (p < end) {
        uint16_t nl, vl;
        const char *name = field_at(p, &nl, &vl), *value = name + nl;
        p = value + vl;
        if (nl && name[0] == ':') {
            if (nl == 7 && memcmp(name, ":method", 7) == 0) {
                req.method = value;
                req.method_len = vl;
            } else if (nl == 5 && memcmp(name, ":path", 5) == 0) {
                req.path = value;
                req.path_len = vl;
            } else if (nl == 10 && memcmp(name, ":authority", 10) == 0) {
                authority = value;
                authority_len = vl;
            }
            continue;
        }
        if (nl == 4 && memcmp(name, "host", 4) == 0)
            host = true;
        if (nh < SQ_SERVER_MAX_HEADERS + 1)
            hdrs[nh++] = (struct sq_h1_header){name, nl, value, vl};
    }
    if (authority && !host) {
        hdrs[0] = (struct sq_h1_header){"host", 4, authority, authority_len};
        req.headers = hdrs;
        req.num_headers = nh;
    } else {
        req.headers = hdrs + 1;
        req.num_headers = nh - 1;
    }
    if (!req.method) { /* nghttp2 checks the pseudo-headers; this is a CONNECT or worse */
        req.method = "";
        req.path = "";
    } else if (!req.path) {
        req.path = "";
    }
    req.head = req.method_len == 4 && memcmp(req.method, "HEAD", 4) == 0;
    req.body = st->body_len ? st->body : NULL;
    req.body_len = st->body_len;
    st->head = req.head;
    sq_server__h2_dispatch(h->c, &req, &resp);
    keep_answer(st, &resp);
    if (SQ_UNLIKELY(resp.upgrade != NULL)) {   /* no upgrade over HTTP/2 (RFC 9113 8.6) */
        resp.upgrade->closed(resp.upgrade_ud); /* the answer is copied: its state may go */
        resp.upgrade = NULL;
    }
    if (resp.close)
        (void)nghttp2_submit_goaway(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR, NULL, 0);
    if (resp.delay_ns > 0 && !st->streamed) {
        int64_t d = resp.delay_ns > SQ_SERVER_MAX_DELAY_NS ? SQ_SERVER_MAX_DELAY_NS : resp.delay_ns;
        /* a fresh clock, as for HTTP/1.1: the handler may aim at an absolute moment */
        if (sq_timer_start(h->loop, &st->timer, sq_now_ns() + d) == 0)
            return;
        /* no timer memory: answer now */
    }
    (void)submit(h, st);
}

/* ---- nghttp2 callbacks ---- */

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct sq_server__h2 *h = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* trailers: their fields are dropped */
    struct stream *st = stream_get(h, f->hd.stream_id);
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
    if (nghttp2_session_set_stream_user_data(s, f->hd.stream_id, st) != 0) {
        stream_release(h, st, true);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!st || st->too_big)
        return 0;
    if (!hbuf_add(st, name, nlen, value, vlen)) {
        st->too_big = true;
        return 0;
    }
    if (nlen == 14 && memcmp(name, "content-length", 14) == 0) {
        uint64_t v = 0;
        for (size_t i = 0; i < vlen && v <= SQ_SERVER_MAX_BODY; i++)
            v = v * 10 + (uint64_t)(value[i] - '0'); /* nghttp2 checked it is a number */
        if (v > SQ_SERVER_MAX_BODY)
            st->body_big = true;
        else if (v && !body_reserve(st, v))
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *ud)
{
    (void)flags;
    (void)ud;
    struct stream *st = nghttp2_session_get_stream_user_data(s, id);
    if (!st || st->body_big || st->answered)
        return 0;
    if (!body_reserve(st, (uint64_t)st->body_len + len)) {
        st->body_big = true;
        return 0;
    }
    memcpy(st->body + st->body_len, data, len);
    st->body_len += (uint32_t)len;
    return 0;
}

static int on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct sq_server__h2 *h = ud;
    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
        return 0;
    struct stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!st)
        return 0;
    if ((f->hd.flags & NGHTTP2_FLAG_END_STREAM) || st->too_big || st->body_big)
        request_done(h, st);
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *ud)
{
    (void)error_code;
    struct sq_server__h2 *h = ud;
    if (h->dying)
        return 0;
    struct stream *st = nghttp2_session_get_stream_user_data(s, id);
    if (st)
        stream_release(h, st, true);
    return 0;
}

static void setup(void)
{
    if (sq_nghttp2_load(NULL, 0) < 0 || nghttp2_session_callbacks_new(&callbacks) != 0) {
        callbacks = NULL;
        return;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_close);
    if (nghttp2_option_new(&options) == 0)
        nghttp2_option_set_no_closed_streams(options, 1); /* no priority tree of dead streams */
}

/* ---- the session ---- */

int sq_server__h2_new(struct conn *c, struct sq_loop *loop, struct sq_server__h2 **out)
{
    pthread_once(&once, setup);
    if (!callbacks)
        return -ENOMEM;
    struct sq_server__h2 *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->c = c;
    h->loop = loop;
    if (nghttp2_session_server_new2(&h->s, callbacks, h, options) != 0) {
        free(h);
        return -ENOMEM;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, SQ_SERVER_H2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
    };
    if (nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
        nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0) {
        sq_server__h2_free(h);
        return -ENOMEM;
    }
    *out = h;
    return 0;
}

void sq_server__h2_free(struct sq_server__h2 *h)
{
    if (!h)
        return;
    h->dying = true;
    nghttp2_session_del(h->s);
    while (h->live)
        stream_release(h, h->live, false);
    while (h->free) {
        struct stream *st = h->free;
        h->free = st->next;
        free(st);
    }
    free(h);
}

bool sq_server__h2_waiting(const struct sq_server__h2 *h)
{
    for (const struct stream *st = h->live; st; st = st->next)
        if (sq_timer_active(&st->timer))
            return true;
    return false;
}

int sq_server__h2_feed(struct sq_server__h2 *h, const char *buf, size_t len)
{
    if (!len)
        return 0;
    ssize_t r = nghttp2_session_mem_recv(h->s, (const uint8_t *)buf, len);
    if (r < 0)
        return r == NGHTTP2_ERR_NOMEM ? -ENOMEM : -SQ_EPARSE;
    return 0;
}

int sq_server__h2_send(struct sq_server__h2 *h)
{
    for (;;) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(h->s, &p);
        if (n < 0)
            return n == NGHTTP2_ERR_NOMEM ? -ENOMEM : -SQ_EPARSE;
        if (n == 0)
            return 0;
        int rc = sq_server__h2_out(h->c, p, (size_t)n);
        if (rc != 0)
            return rc;
    }
}

bool sq_server__h2_done(const struct sq_server__h2 *h)
{
    return !nghttp2_session_want_read(h->s) && !nghttp2_session_want_write(h->s);
}
