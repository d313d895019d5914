/* http/h2client.c - the HTTP/2 client session (see h2client.h and docs/internals/http.md).
 *
 * A thin layer over an nghttp2 client session driven with mem_recv / mem_send: it keeps one
 * output buffer per connection (frames coalesced so the caller writes once), maps nghttp2's
 * per-stream callbacks onto the caller's struct sq_h2_stream (the stream user data), and counts
 * what nghttp2 allocates through a custom allocator, so the per-request cost can be measured.
 */
#include "http/h2client.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/decode.h"
#include "http/h1.h"
#include "http/nghttp2lib.h"
#include "http/redirect.h"

#define OUT_INIT        (16 * 1024)
#define OUT_SOFT        (64 * 1024) /* stop pulling frames once this much is queued */
#define DEFAULT_STREAMS 100
#define MAX_REQ_HEADERS 128

/* ---- allocation counting ---- */

static void *m_malloc(size_t n, void *ud)
{
    ((struct sq_h2_client *)ud)->allocs++;
    return malloc(n);
}

static void m_free(void *p, void *ud)
{
    (void)ud;
    free(p);
}

static void *m_calloc(size_t k, size_t n, void *ud)
{
    ((struct sq_h2_client *)ud)->allocs++;
    return calloc(k, n);
}

static void *m_realloc(void *p, size_t n, void *ud)
{
    ((struct sq_h2_client *)ud)->allocs++;
    return realloc(p, n);
}

/* ---- requests ---- */

static bool has_ctl(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
            return true;
    return false;
}

static bool named(const char *name, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(name, lit, n) == 0;
}

static bool conn_specific(const char *name, size_t n)
{
    return named(name, n, "connection") || named(name, n, "keep-alive") ||
           named(name, n, "proxy-connection") || named(name, n, "transfer-encoding") ||
           named(name, n, "upgrade");
}

struct field {
    const char *name, *value;
    size_t nlen, vlen;
};

/* Builds r from spans: the pseudo-headers, then the caller's fields (the rules of h2.h), into
 * r's storage when it fits (else a fresh block). On error r keeps what it had. */
static int build(struct sq_h2_req *r, struct field method, const char *scheme,
                 struct field authority, struct field path, const struct field *hs, size_t nheaders,
                 const void *body, size_t body_len)
{
    if (!method.vlen || !scheme || !*scheme || !path.vlen || has_ctl(method.value, method.vlen) ||
        has_ctl(path.value, path.vlen) || nheaders > MAX_REQ_HEADERS || (body_len && !body))
        return -SQ_EUSAGE;
    static const char ua[] = "squall/" SQ_VERSION;
    struct field f[4 + MAX_REQ_HEADERS + 2];
    size_t n = 0;
    bool user_ua = false, user_cl = false;
    for (size_t i = 0; i < nheaders; i++) {
        const struct field *h = &hs[i];
        if (!h->nlen || has_ctl(h->name, h->nlen) || has_ctl(h->value, h->vlen) ||
            memchr(h->name, ':', h->nlen))
            return -SQ_EUSAGE;
        if (named(h->name, h->nlen, "host")) {
            if (h->vlen)
                authority = (struct field){NULL, h->value, 0, h->vlen};
        } else if (named(h->name, h->nlen, "user-agent")) {
            user_ua = true;
        } else if (named(h->name, h->nlen, "content-length")) {
            user_cl = true;
        }
    }
    if (!authority.vlen || has_ctl(authority.value, authority.vlen))
        return -SQ_EUSAGE; /* none given, and no Host field either */
    char cl[24];
    f[n++] = (struct field){":method", method.value, 7, method.vlen};
    f[n++] = (struct field){":scheme", scheme, 7, strlen(scheme)};
    f[n++] = (struct field){":authority", authority.value, 10, authority.vlen};
    f[n++] = (struct field){":path", path.value, 5, path.vlen};
    for (size_t i = 0; i < nheaders; i++) {
        const struct field *h = &hs[i];
        if (named(h->name, h->nlen, "host") || conn_specific(h->name, h->nlen) ||
            (named(h->name, h->nlen, "user-agent") && !h->vlen))
            continue;
        f[n++] = *h;
    }
    if (!user_ua)
        f[n++] = (struct field){"user-agent", ua, 10, sizeof(ua) - 1};
    if (!user_cl &&
        (body_len || named(method.value, method.vlen, "POST") ||
         named(method.value, method.vlen, "PUT") || named(method.value, method.vlen, "PATCH"))) {
        int k = snprintf(cl, sizeof(cl), "%zu", body_len);
        f[n++] = (struct field){"content-length", cl, 14, (size_t)k};
    }
    size_t bytes = n * sizeof(nghttp2_nv);
    for (size_t i = 0; i < n; i++)
        bytes += f[i].nlen + f[i].vlen + 2;
    /* The strings may live in r's own storage (sq_h2_req_from_h1 over a request rendered into a
     * buffer is not, but a caller may pass spans of a previous r): build into a fresh block
     * unless r's fits and nothing points into it. */
    char *store = r->_store;
    bool reuse = store && r->_cap >= bytes;
    uintptr_t lo = (uintptr_t)store, hi = lo + r->_cap;
    for (size_t i = 0; reuse && i < n; i++)
        if (((uintptr_t)f[i].name >= lo && (uintptr_t)f[i].name < hi) ||
            ((uintptr_t)f[i].value >= lo && (uintptr_t)f[i].value < hi))
            reuse = false;
    if (!reuse) {
        store = malloc(bytes);
        if (!store)
            return -ENOMEM;
    }
    nghttp2_nv *nv = (nghttp2_nv *)(void *)store;
    char *o = store + n * sizeof(nghttp2_nv);
    for (size_t i = 0; i < n; i++) {
        char *name = o;
        for (size_t k = 0; k < f[i].nlen; k++) {
            char ch = f[i].name[k];
            name[k] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
        }
        name[f[i].nlen] = 0;
        char *value = name + f[i].nlen + 1;
        memcpy(value, f[i].value, f[i].vlen);
        value[f[i].vlen] = 0;
        o = value + f[i].vlen + 1;
        /* the strings live as long as r: nghttp2 need not copy them per submission */
        nv[i] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, f[i].nlen, f[i].vlen,
                             NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
    }
    if (!reuse) {
        free(r->_store);
        r->_cap = bytes;
    }
    r->_nv = nv;
    r->_nvlen = n;
    r->_store = store;
    r->_body = body;
    r->_body_len = body_len;
    return 0;
}

static struct field span(const char *s)
{
    return (struct field){NULL, s ? s : "", 0, s ? strlen(s) : 0};
}

int sq_h2_req_init(struct sq_h2_req *r, const char *method, const char *scheme,
                   const char *authority, const char *path, const struct sq_kv *headers,
                   size_t nheaders, const void *body, size_t body_len)
{
    memset(r, 0, sizeof(*r));
    if (nheaders > MAX_REQ_HEADERS)
        return -SQ_EUSAGE;
    struct field hs[MAX_REQ_HEADERS];
    for (size_t i = 0; i < nheaders; i++) {
        const char *hn = headers[i].name, *hv = headers[i].value;
        if (!hn || !hv)
            return -SQ_EUSAGE;
        hs[i] = (struct field){hn, hv, strlen(hn), strlen(hv)};
    }
    return build(r, span(method), scheme, span(authority), span(path), hs, nheaders, body,
                 body_len);
}

int sq_h2_req_from_h1(struct sq_h2_req *r, const char *scheme, const char *h1, size_t len)
{
    struct sq_h1_header hh[MAX_REQ_HEADERS];
    struct sq_h1_request q = {.headers = hh, .headers_cap = MAX_REQ_HEADERS};
    struct sq_h1_limits lim = {.max_head_bytes = len, .max_headers = MAX_REQ_HEADERS};
    int head = sq_h1_parse_request_head(h1, len, &lim, &q);
    if (head <= 0 || q.chunked)
        return head == -ENOMEM ? -ENOMEM : -SQ_EUSAGE;
    struct field hs[MAX_REQ_HEADERS];
    for (size_t i = 0; i < q.num_headers; i++)
        hs[i] = (struct field){hh[i].name, hh[i].value, hh[i].name_len, hh[i].value_len};
    size_t blen = len - (size_t)head;
    return build(r, (struct field){NULL, q.method, 0, q.method_len}, scheme,
                 (struct field){NULL, "", 0, 0}, (struct field){NULL, q.path, 0, q.path_len}, hs,
                 q.num_headers, blen ? h1 + head : NULL, blen);
}

void sq_h2_req_dispose(struct sq_h2_req *r)
{
    free(r->_store);
    memset(r, 0, sizeof(*r));
}

/* ---- callbacks ---- */

static struct sq_h2_stream *stream_of(nghttp2_session *s, int32_t id)
{
    return nghttp2_session_get_stream_user_data(s, id);
}

/* Fields of a response: :status first, then the rest. Only the final head's fields count (a 1xx
 * head leaves st->status at 0, trailers come after _head_seen). */
static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    (void)flags;
    struct sq_h2_client *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS)
        return 0;
    struct sq_h2_stream *st = stream_of(s, f->hd.stream_id);
    if (!st || st->_head_seen)
        return 0;
    if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
        if (vlen != 3)
            return 0; /* nghttp2 checked :status is three digits */
        int v = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
        if (v >= 200)
            st->status = (uint16_t)v;
        return 0;
    }
    if (!st->status || (nlen && name[0] == ':'))
        return 0;
    const char *n = (const char *)name, *v = (const char *)value;
    if (nlen == 16 && memcmp(name, "content-encoding", 16) == 0) {
        enum sq_coding k = sq_coding_from_header(v, vlen);
        if (k != SQ_CODING_NONE) /* a second coding stacks: not decodable here */
            st->coding = st->coding == SQ_CODING_NONE ? (uint8_t)k : (uint8_t)SQ_CODING_OTHER;
    } else if (nlen == 12 && memcmp(name, "content-type", 12) == 0) {
        st->event_stream = sq_h1_is_event_stream(v, vlen);
    }
    if ((st->want_fields || (SQ_UNLIKELY(st->want_location) && sq_redirect_status(st->status) &&
                             nlen == 8 && memcmp(name, "location", 8) == 0)) &&
        c->_cb->on_field)
        c->_cb->on_field(c->_ud, st, n, nlen, v, vlen);
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct sq_h2_client *c = ud;
    if (f->hd.type == NGHTTP2_HEADERS) {
        struct sq_h2_stream *st = stream_of(s, f->hd.stream_id);
        if (!st)
            return 0;
        st->rx_bytes += f->hd.length;
        if (st->status && !st->_head_seen) {
            st->_head_seen = true;
            if (c->_cb->on_headers)
                c->_cb->on_headers(c->_ud, st, st->status);
        }
    } else if (f->hd.type == NGHTTP2_GOAWAY) {
        c->goaway = true;
        if (c->_cb->on_goaway)
            c->_cb->on_goaway(c->_ud, f->goaway.error_code, f->goaway.last_stream_id);
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    struct sq_h2_client *c = ud;
    struct sq_h2_stream *st = stream_of(s, id);
    if (!st)
        return 0;
    st->rx_bytes += len;
    if (c->_cb->on_data)
        c->_cb->on_data(c->_ud, st, c->_want_body ? (const char *)data : NULL, len);
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *ud)
{
    struct sq_h2_client *c = ud;
    struct sq_h2_stream *st = stream_of(s, id);
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(s, id, NULL);
    st->_live = false;
    c->open--;
    c->_cb->on_close(c->_ud, st, error_code);
    return 0;
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    struct sq_h2_stream *st = src->ptr;
    const struct sq_h2_req *r = st->_req;
    size_t left = r->_body_len - (size_t)st->_off;
    size_t n = left < length ? left : length;
    memcpy(buf, r->_body + st->_off, n);
    st->_off += n;
    if (st->_off == r->_body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---- the session ---- */

int sq_h2_client_init(struct sq_h2_client *c, const struct sq_h2_opts *opts,
                      const struct sq_h2_callbacks *cb, void *ud)
{
    memset(c, 0, sizeof(*c));
    c->_cb = cb;
    c->_ud = ud;
    c->_max_streams = opts && opts->max_streams ? opts->max_streams : DEFAULT_STREAMS;
    c->_want_body = opts && opts->want_body;
    uint32_t window = opts && opts->window ? opts->window : SQ_H2_DEFAULT_WINDOW;
    uint32_t conn_window =
        opts && opts->conn_window ? opts->conn_window : SQ_H2_DEFAULT_CONN_WINDOW;
    if (window > SQ_H2_MAX_WINDOW)
        window = SQ_H2_MAX_WINDOW;
    if (conn_window > SQ_H2_MAX_WINDOW)
        conn_window = SQ_H2_MAX_WINDOW;

    if (sq_nghttp2_load(NULL, 0) < 0) /* the process's first HTTP/2 session */
        return -ENOENT;
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_option *opt = NULL;
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cbs);
        return -ENOMEM;
    }
    nghttp2_option_set_no_closed_streams(opt, 1);
    nghttp2_option_set_peer_max_concurrent_streams(opt, c->_max_streams);
    nghttp2_mem mem = {c, m_malloc, m_free, m_calloc, m_realloc};
    nghttp2_session *s = NULL;
    int rv = nghttp2_session_client_new3(&s, cbs, c, opt, &mem);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    if (rv != 0)
        return -ENOMEM;
    c->_s = s;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 0}, /* the server may not open streams */
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window},
    };
    c->_out = malloc(OUT_INIT);
    c->_out_cap = OUT_INIT;
    if (!c->_out || nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, iv, 3) != 0 ||
        nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0, (int32_t)conn_window) != 0) {
        sq_h2_client_dispose(c);
        return -ENOMEM;
    }
    return 0;
}

void sq_h2_client_dispose(struct sq_h2_client *c)
{
    if (c->_s)                      /* a session: nghttp2 is open */
        nghttp2_session_del(c->_s); /* runs no stream-close callback */
    free(c->_out);
    c->_s = NULL;
    c->_out = NULL;
    c->_out_off = c->_out_len = c->_out_cap = 0;
}

int sq_h2_client_feed(struct sq_h2_client *c, const char *buf, size_t len)
{
    ssize_t r = nghttp2_session_mem_recv(c->_s, (const uint8_t *)buf, len);
    if (r < 0)
        return r == NGHTTP2_ERR_NOMEM ? -ENOMEM : -SQ_EPARSE;
    return 0;
}

bool sq_h2_client_can_submit(const struct sq_h2_client *c)
{
    return !c->goaway && c->open < c->_max_streams;
}

void sq_h2_client_cancel(struct sq_h2_client *c, struct sq_h2_stream *st, uint32_t error_code)
{
    if (!st->_live)
        return;
    /* works for a stream whose HEADERS still wait in nghttp2's queue too: they are dropped */
    nghttp2_session_set_stream_user_data(c->_s, st->id, NULL);
    (void)nghttp2_submit_rst_stream(c->_s, NGHTTP2_FLAG_NONE, st->id, error_code);
    st->_live = false;
    c->open--;
}

int32_t sq_h2_client_submit(struct sq_h2_client *c, const struct sq_h2_req *r,
                            struct sq_h2_stream *st)
{
    if (c->goaway)
        return -EPIPE;
    if (c->open >= c->_max_streams)
        return -EAGAIN;
    st->_req = r;
    st->_off = 0;
    st->id = 0;
    st->status = 0;
    st->_head_seen = false;
    st->coding = SQ_CODING_NONE;
    st->event_stream = false;
    st->rx_bytes = 0;
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
    int32_t id =
        nghttp2_submit_request(c->_s, NULL, r->_nv, r->_nvlen, r->_body_len ? &prd : NULL, st);
    if (id < 0)
        return id == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPIPE;
    st->id = id;
    st->_live = true;
    c->open++;
    return id;
}

static bool out_reserve(struct sq_h2_client *c, size_t n)
{
    if (c->_out_cap - c->_out_len >= n)
        return true;
    if (c->_out_off) { /* move the unwritten rest down first */
        memmove(c->_out, c->_out + c->_out_off, c->_out_len - c->_out_off);
        c->_out_len -= c->_out_off;
        c->_out_off = 0;
        if (c->_out_cap - c->_out_len >= n)
            return true;
    }
    size_t cap = c->_out_cap * 2;
    if (cap < c->_out_len + n)
        cap = c->_out_len + n;
    char *p = realloc(c->_out, cap);
    if (!p)
        return false;
    c->_out = p;
    c->_out_cap = cap;
    return true;
}

int sq_h2_client_pending(struct sq_h2_client *c, const char **p, size_t *len)
{
    if (c->_out_off == c->_out_len)
        c->_out_off = c->_out_len = 0;
    while (c->_out_len - c->_out_off < OUT_SOFT) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(c->_s, &d);
        if (n < 0)
            return n == NGHTTP2_ERR_NOMEM ? -ENOMEM : -SQ_EPARSE;
        if (n == 0)
            break;
        if (!out_reserve(c, (size_t)n))
            return -ENOMEM;
        memcpy(c->_out + c->_out_len, d, (size_t)n);
        c->_out_len += (size_t)n;
    }
    *p = c->_out + c->_out_off;
    *len = c->_out_len - c->_out_off;
    return 0;
}

void sq_h2_client_consume(struct sq_h2_client *c, size_t n)
{
    c->_out_off += n;
    if (c->_out_off >= c->_out_len)
        c->_out_off = c->_out_len = 0;
}

bool sq_h2_client_alive(const struct sq_h2_client *c)
{
    return c->_s && (nghttp2_session_want_read(c->_s) || nghttp2_session_want_write(c->_s));
}
