/* fuzz_h3resp.c - the HTTP/3 client side (http/h3client) fed hostile server bytes. Two requests
 * are submitted (one with a body) on client streams 0 and 4, the client's control and QPACK
 * streams bound to 2, 6 and 10; the input is a series of pieces, each a header byte (which
 * stream: the two request streams, the server's control stream 3 or its QPACK streams 7 and 11;
 * FIN or not) and a length byte, then the bytes, fed with what nghttp3 wants to send drained
 * before each piece. Checks: on_end / on_reset run once per submitted stream, never for one not
 * in flight; the open count matches the streams in flight; a status reported is a final one;
 * body bytes come only after a head. Without HTTP/3 in the build it does nothing. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/h3client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef SQ_HAVE_H3

#include <nghttp3/nghttp3.h>

#include "base/h3lib.h"

#define SLOTS 2

struct slot {
    struct sq_h3_stream st;
    bool busy;
};

struct ctx {
    struct sq_h3_client c;
    struct slot s[SLOTS];
};

static struct slot *slot_of(struct sq_h3_stream *st)
{
    return SQ_CONTAINER_OF(st, struct slot, st);
}

static void on_headers(void *ud, struct sq_h3_stream *st, int status)
{
    (void)ud;
    if (!slot_of(st)->busy || status < 200 || status > 999 || !st->head_seen)
        abort();
}

static void on_data(void *ud, struct sq_h3_stream *st, const char *data, size_t len)
{
    (void)ud;
    (void)data;
    (void)len;
    if (!slot_of(st)->busy || !st->head_seen)
        abort();
}

static void on_end(void *ud, struct sq_h3_stream *st)
{
    (void)ud;
    struct slot *sl = slot_of(st);
    if (!sl->busy || !st->status)
        abort();
    sl->busy = false;
}

static void on_reset(void *ud, struct sq_h3_stream *st, uint64_t code)
{
    (void)ud;
    (void)code;
    struct slot *sl = slot_of(st);
    if (!sl->busy)
        abort();
    sl->busy = false;
}

static void on_field(void *ud, struct sq_h3_stream *st, const char *name, size_t name_len,
                     const char *value, size_t value_len)
{
    (void)ud;
    (void)name;
    (void)value;
    if (!slot_of(st)->busy || (name_len && !name) || (value_len && !value))
        abort();
}

static void on_consumed(void *ud, int64_t sid, size_t n)
{
    (void)ud;
    (void)sid;
    (void)n;
}

static void on_shutdown_stream(void *ud, int64_t sid, uint64_t code, bool read)
{
    (void)ud;
    (void)sid;
    (void)code;
    (void)read;
}

static const struct sq_h3_callbacks cb = {
    .on_headers = on_headers,
    .on_data = on_data,
    .on_end = on_end,
    .on_reset = on_reset,
    .on_field = on_field,
    .on_consumed = on_consumed,
    .on_shutdown_stream = on_shutdown_stream,
};

static void check(struct ctx *x)
{
    uint32_t busy = 0;
    for (int i = 0; i < SLOTS; i++)
        busy += x->s[i].busy;
    if (busy != x->c.open)
        abort();
}

/* Takes everything nghttp3 has to send, as if the transport sent it all. */
static bool drain(struct ctx *x)
{
    for (int guard = 0; guard < 64; guard++) {
        int64_t sid = -1;
        int fin = 0;
        nghttp3_vec vec[8];
        nghttp3_ssize n = nghttp3_conn_writev_stream(x->c.conn, &sid, &fin, vec, 8);
        if (n < 0)
            return false;
        if (sid < 0)
            return true;
        size_t len = 0;
        for (nghttp3_ssize i = 0; i < n; i++)
            len += vec[i].len;
        if (nghttp3_conn_add_write_offset(x->c.conn, sid, len) != 0)
            return false;
        if (len == 0 && !fin)
            return true;
    }
    return true;
}

static const int64_t STREAMS[] = {0, 4, 3, 7, 11};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[256];
    if (sq_h3lib_load(why, sizeof(why)) < 0) /* the libraries, as --http3 loads them */
        abort();
    static struct ctx x;
    memset(&x, 0, sizeof(x));
    struct sq_h2_req get, post;
    if (sq_h2_req_init(&get, "GET", "https", "x", "/", NULL, 0, NULL, 0) != 0 ||
        sq_h2_req_init(&post, "POST", "https", "x", "/p", NULL, 0, "0123456789", 10) != 0)
        abort();
    if (sq_h3_client_init(&x.c, &cb, &x, 2, 6, 10) != 0)
        abort();
    for (int i = 0; i < SLOTS; i++) {
        x.s[i].st.want_fields = true;
        x.s[i].busy = sq_h3_client_submit(&x.c, 4 * i, i ? &get : &post, &x.s[i].st) == 0;
    }
    check(&x);
    size_t off = 0;
    while (off + 2 <= size && drain(&x)) {
        uint8_t h = data[off], l = data[off + 1];
        off += 2;
        size_t piece = l;
        if (piece > size - off)
            piece = size - off;
        int64_t sid = STREAMS[(h & 0x7f) % 5];
        bool fin = (h & 0x80) && sid < 3; /* a FIN on a critical stream only closes it */
        int64_t rc = sq_h3_client_read(&x.c, sid, data + off, piece, fin);
        off += piece;
        check(&x);
        if (rc < 0 || (size_t)rc > piece)
            break;
    }
    sq_h3_client_dispose(&x.c);
    sq_h2_req_dispose(&get);
    sq_h2_req_dispose(&post);
    return 0;
}

#else

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)data;
    (void)size;
    return 0;
}

#endif
