/* http/h3client.c - the HTTP/3 client side over nghttp3 (see h3client.h and
 * docs/internals/http.md). Compiled to nothing without SQ_HAVE_H3.
 */
#include "http/h3client.h"

#ifdef SQ_HAVE_H3

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <nghttp3/nghttp3.h>
#include <stddef.h>
#include <string.h>

#include "base/h3lib.h"
#include "http/decode.h"
#include "http/h1.h"
#include "http/redirect.h"

/* A prepared request's nghttp2_nv array goes to nghttp3 as it is. */
_Static_assert(sizeof(nghttp2_nv) == sizeof(nghttp3_nv), "nv layouts");
_Static_assert(offsetof(nghttp2_nv, name) == offsetof(nghttp3_nv, name), "nv name");
_Static_assert(offsetof(nghttp2_nv, value) == offsetof(nghttp3_nv, value), "nv value");
_Static_assert(offsetof(nghttp2_nv, namelen) == offsetof(nghttp3_nv, namelen), "nv namelen");
_Static_assert(offsetof(nghttp2_nv, valuelen) == offsetof(nghttp3_nv, valuelen), "nv valuelen");
_Static_assert(offsetof(nghttp2_nv, flags) == offsetof(nghttp3_nv, flags), "nv flags");
_Static_assert((int)NGHTTP2_NV_FLAG_NO_COPY_NAME == (int)NGHTTP3_NV_FLAG_NO_COPY_NAME &&
                   (int)NGHTTP2_NV_FLAG_NO_COPY_VALUE == (int)NGHTTP3_NV_FLAG_NO_COPY_VALUE,
               "nv flags values");

/* The stream's caller state, when it is still the caller's. */
static struct sq_h3_stream *mine(int64_t sid, void *sud)
{
    struct sq_h3_stream *st = sud;
    return st && st->id == sid ? st : NULL;
}

static void done(struct sq_h3_client *c, nghttp3_conn *conn, struct sq_h3_stream *st)
{
    nghttp3_conn_set_stream_user_data(conn, st->id, NULL);
    st->id = -1;
    if (c->open)
        c->open--;
}

static int cb_recv_header(nghttp3_conn *conn, int64_t sid, int32_t token, nghttp3_rcbuf *name,
                          nghttp3_rcbuf *value, uint8_t flags, void *ud, void *sud)
{
    (void)conn;
    (void)flags;
    struct sq_h3_client *c = ud;
    struct sq_h3_stream *st = mine(sid, sud);
    if (!st)
        return 0;
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
    st->rx_bytes += n.len + v.len;
    if (token == NGHTTP3_QPACK_TOKEN__STATUS) {
        st->status = 0;
        if (v.len != 3)
            return 0;
        int s = 0;
        for (int i = 0; i < 3; i++) {
            if (v.base[i] < '0' || v.base[i] > '9')
                return 0;
            s = s * 10 + (v.base[i] - '0');
        }
        if (s >= 200)
            st->status = (uint16_t)s;
        return 0;
    }
    if (!st->status || (n.len && n.base[0] == ':'))
        return 0;
    const char *nm = (const char *)n.base, *vl = (const char *)v.base;
    if (token == NGHTTP3_QPACK_TOKEN_CONTENT_ENCODING) {
        enum sq_coding k = sq_coding_from_header(vl, v.len);
        if (k != SQ_CODING_NONE)
            st->coding = st->coding == SQ_CODING_NONE ? (uint8_t)k : (uint8_t)SQ_CODING_OTHER;
    } else if (token == NGHTTP3_QPACK_TOKEN_CONTENT_TYPE) {
        st->event_stream = sq_h1_is_event_stream(vl, v.len);
    }
    if ((st->want_fields || (st->want_location && sq_redirect_status(st->status) &&
                             token == NGHTTP3_QPACK_TOKEN_LOCATION)) &&
        c->_cb->on_field)
        c->_cb->on_field(c->_ud, st, nm, n.len, vl, v.len);
    return 0;
}

static int cb_end_headers(nghttp3_conn *conn, int64_t sid, int fin, void *ud, void *sud)
{
    (void)conn;
    (void)fin;
    struct sq_h3_client *c = ud;
    struct sq_h3_stream *st = mine(sid, sud);
    if (st && st->status && !st->head_seen) {
        st->head_seen = true;
        if (c->_cb->on_headers)
            c->_cb->on_headers(c->_ud, st, st->status);
    }
    return 0;
}

static int cb_recv_data(nghttp3_conn *conn, int64_t sid, const uint8_t *data, size_t len, void *ud,
                        void *sud)
{
    (void)conn;
    struct sq_h3_client *c = ud;
    c->_cb->on_consumed(c->_ud, sid, len); /* the body is consumed as it comes */
    struct sq_h3_stream *st = mine(sid, sud);
    if (!st || !st->head_seen)
        return 0;
    st->rx_bytes += len;
    if (c->_cb->on_data)
        c->_cb->on_data(c->_ud, st, (const char *)data, len);
    return 0;
}

static int cb_deferred_consume(nghttp3_conn *conn, int64_t sid, size_t n, void *ud, void *sud)
{
    (void)conn;
    (void)sud;
    struct sq_h3_client *c = ud;
    c->_cb->on_consumed(c->_ud, sid, n);
    return 0;
}

static int cb_end_stream(nghttp3_conn *conn, int64_t sid, void *ud, void *sud)
{
    struct sq_h3_client *c = ud;
    struct sq_h3_stream *st = mine(sid, sud);
    if (!st)
        return 0;
    done(c, conn, st);
    if (st->head_seen)
        c->_cb->on_end(c->_ud, st);
    else
        c->_cb->on_reset(c->_ud, st, SQ_H3_NO_ERROR); /* ended without a final head */
    return 0;
}

static int cb_stream_close(nghttp3_conn *conn, int64_t sid, uint64_t code, void *ud, void *sud)
{
    struct sq_h3_client *c = ud;
    struct sq_h3_stream *st = mine(sid, sud);
    if (!st)
        return 0;
    done(c, conn, st);
    c->_cb->on_reset(c->_ud, st, code);
    return 0;
}

static int cb_stop_sending(nghttp3_conn *conn, int64_t sid, uint64_t code, void *ud, void *sud)
{
    (void)conn;
    (void)sud;
    struct sq_h3_client *c = ud;
    c->_cb->on_shutdown_stream(c->_ud, sid, code, true);
    return 0;
}

static int cb_reset_stream(nghttp3_conn *conn, int64_t sid, uint64_t code, void *ud, void *sud)
{
    (void)conn;
    (void)sud;
    struct sq_h3_client *c = ud;
    c->_cb->on_shutdown_stream(c->_ud, sid, code, false);
    return 0;
}

static int cb_shutdown(nghttp3_conn *conn, int64_t id, void *ud)
{
    (void)conn;
    (void)id;
    struct sq_h3_client *c = ud;
    c->goaway = true;
    if (c->_cb->on_goaway)
        c->_cb->on_goaway(c->_ud);
    return 0;
}

static const nghttp3_callbacks callbacks = {
    .stream_close = cb_stream_close,
    .recv_data = cb_recv_data,
    .deferred_consume = cb_deferred_consume,
    .recv_header = cb_recv_header,
    .end_headers = cb_end_headers,
    .stop_sending = cb_stop_sending,
    .end_stream = cb_end_stream,
    .reset_stream = cb_reset_stream,
    .shutdown = cb_shutdown,
};

int sq_h3_client_init(struct sq_h3_client *c, const struct sq_h3_callbacks *cb, void *ud,
                      int64_t ctrl, int64_t qenc, int64_t qdec)
{
    *c = (struct sq_h3_client){._cb = cb, ._ud = ud};
    nghttp3_settings s;
    nghttp3_settings_default(&s);
    nghttp3_conn *conn;
    if (nghttp3_conn_client_new(&conn, &callbacks, &s, NULL, c) != 0)
        return -ENOMEM;
    c->conn = conn;
    if (nghttp3_conn_bind_control_stream(conn, ctrl) != 0 ||
        nghttp3_conn_bind_qpack_streams(conn, qenc, qdec) != 0) {
        sq_h3_client_dispose(c);
        return -SQ_EPARSE;
    }
    return 0;
}

void sq_h3_client_dispose(struct sq_h3_client *c)
{
    nghttp3_conn_del(c->conn);
    c->conn = NULL;
    c->open = 0;
}

static nghttp3_ssize read_body(nghttp3_conn *conn, int64_t sid, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *ud, void *sud)
{
    (void)conn;
    (void)ud;
    struct sq_h3_stream *st = mine(sid, sud);
    *pflags = NGHTTP3_DATA_FLAG_EOF;
    if (!st || !veccnt)
        return 0;
    vec[0].base = (uint8_t *)(uintptr_t)st->_req->_body;
    vec[0].len = st->_req->_body_len;
    return 1;
}

static const nghttp3_data_reader body_reader = {.read_data = read_body};

int sq_h3_client_submit(struct sq_h3_client *c, int64_t sid, const struct sq_h2_req *r,
                        struct sq_h3_stream *st)
{
    st->id = sid;
    st->status = 0;
    st->coding = 0;
    st->event_stream = false;
    st->head_seen = false;
    st->rx_bytes = 0;
    st->_req = r;
    int rc = nghttp3_conn_submit_request(c->conn, sid, (const nghttp3_nv *)r->_nv, r->_nvlen,
                                         r->_body_len ? &body_reader : NULL, st);
    if (rc != 0) {
        st->id = -1;
        return rc == NGHTTP3_ERR_NOMEM ? -ENOMEM : -SQ_EPARSE;
    }
    c->open++;
    return 0;
}

int64_t sq_h3_client_read(struct sq_h3_client *c, int64_t sid, const uint8_t *data, size_t len,
                          bool fin)
{
    nghttp3_ssize n = nghttp3_conn_read_stream(c->conn, sid, data, len, fin);
    return n < 0 ? (n == NGHTTP3_ERR_NOMEM ? -ENOMEM : -SQ_EPARSE) : (int64_t)n;
}

void sq_h3_stream_forget(struct sq_h3_client *c, struct sq_h3_stream *st)
{
    if (st->id < 0)
        return;
    if (c->conn)
        done(c, c->conn, st);
    st->id = -1;
}

#endif
