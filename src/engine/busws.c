/* engine/busws.c - MQTT over WebSocket under a broker connection (see busws.h). */
#include "engine/busws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "engine/busio.h"
#include "engine/worker.h"
#include "http/h1.h"

#define FRAME_MAX (64 * 1024) /* MQTT bytes per frame written */

static const struct sq_h1_limits up_limits = {.max_head_bytes = 16 * 1024, .max_headers = 64};
static const struct sq_str subprotocol = {"mqtt", 4};

struct sq_engine__busws {
    const char *path, *host; /* the run's (busconf.h), borrowed */
    struct sq_ws_handshake hs;
    struct sq_ws_conn wc;
    struct sq_h1_reader rd; /* the answer to the upgrade */
    struct sq_buf wire;     /* framed bytes (and the upgrade request) to write */
    size_t wire_off;
    uint64_t rng;
    bool open; /* past the 101: frames both ways */
};

static struct sq_engine__busws *ws_of(struct sq_engine__busconn *b)
{
    return b->ws;
}

struct sq_ws_ctx *sq_engine__busws_ctx(struct sq_engine__worker *w)
{
    if (w->busws)
        return w->busws;
    struct sq_ws_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return NULL;
    if (sq_ws_ctx_init(ctx) < 0) {
        free(ctx);
        return NULL;
    }
    w->busws = ctx;
    return ctx;
}

void sq_engine__busws_ctx_free(struct sq_engine__worker *w)
{
    if (!w->busws)
        return;
    sq_ws_ctx_dispose(w->busws);
    free(w->busws);
    w->busws = NULL;
}

int sq_engine__busws_attach(struct sq_engine__busconn *b, const char *path, const char *host)
{
    struct sq_engine__busws *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->path = path;
    s->host = host;
    s->rng = (uint64_t)sq_now_ns() ^ ((uint64_t)(uintptr_t)b << 16);
    sq_h1_reader_init(&s->rd, &up_limits);
    b->ws = s;
    return 0;
}

void sq_engine__busws_reset(struct sq_engine__busconn *b)
{
    struct sq_engine__busws *s = ws_of(b);
    if (!s)
        return;
    if (s->open && b->m.w->busws)
        sq_ws_conn_dispose(b->m.w->busws, &s->wc);
    s->open = false;
    sq_buf_reset(&s->wire);
    s->wire_off = 0;
    sq_h1_reader_dispose(&s->rd);
    sq_h1_reader_init(&s->rd, &up_limits);
}

void sq_engine__busws_free(struct sq_engine__busconn *b)
{
    struct sq_engine__busws *s = ws_of(b);
    if (!s)
        return;
    sq_engine__busws_reset(b);
    sq_h1_reader_dispose(&s->rd);
    sq_buf_dispose(&s->wire);
    free(s);
    b->ws = NULL;
}

struct sq_buf *sq_engine__busws_wire(struct sq_engine__busconn *b, size_t **off)
{
    struct sq_engine__busws *s = ws_of(b);
    *off = &s->wire_off;
    return &s->wire;
}

static struct sq_str str_of(const char *s)
{
    return (struct sq_str){s ? s : "", s ? strlen(s) : 0};
}

static int on_fields(void *ud, const char *head, size_t len, const struct sq_h1_header *fields,
                     size_t nfields)
{
    SQ_UNUSED(head);
    SQ_UNUSED(len);
    struct sq_engine__busws *s = ud;
    if (s->rd.status != 101)
        return 0; /* a refusal: its status says enough */
    for (size_t i = 0; i < nfields; i++) {
        struct sq_str name = {fields[i].name, fields[i].name_len};
        struct sq_str value = {fields[i].value, fields[i].value_len};
        if (sq_ws_handshake_field(&s->hs, name, value) < 0)
            return -SQ_EPARSE;
    }
    return 0;
}

/* Room in the wire buffer, compacted when what was written is most of it. */
static char *wire_room(struct sq_engine__busws *s, size_t n)
{
    if (s->wire_off && s->wire_off == s->wire.len)
        s->wire.len = s->wire_off = 0;
    if (sq_buf_reserve(&s->wire, n) < 0)
        return NULL;
    return s->wire.p + s->wire.len;
}

int sq_engine__busws_upgrade(struct sq_engine__busconn *b)
{
    struct sq_engine__busws *s = ws_of(b);
    if (!sq_engine__busws_ctx(b->m.w))
        return -ENOMEM;
    sq_engine__busws_reset(b);
    sq_ws_handshake_init(&s->hs, &s->rng, subprotocol);
    sq_h1_reader_start(&s->rd, false);
    sq_h1_reader_on_fields(&s->rd, on_fields, s);
    struct sq_str host = str_of(s->host), path = str_of(s->path);
    size_t need = 200 + host.len + path.len;
    char *r = wire_room(s, need);
    if (!r)
        return -ENOMEM;
    int n = sq_ws_encode_upgrade(r, need, &s->hs, host, path, (struct sq_str){"", 0});
    if (n < 0)
        return n;
    s->wire.len += (size_t)n;
    sq_engine__bus_commit(b, 0); /* written at the end of the event */
    return 0;
}

int sq_engine__busws_wrap(struct sq_engine__busconn *b)
{
    struct sq_engine__busws *s = ws_of(b);
    if (!s->open || b->out_off >= b->out.len)
        return 0;
    const char *p = b->out.p + b->out_off;
    size_t left = b->out.len - b->out_off;
    while (left) {
        size_t k = left > FRAME_MAX ? FRAME_MAX : left;
        size_t need = sq_ws_frame_len(k);
        char *r = wire_room(s, need);
        if (!r)
            return -ENOMEM;
        int n =
            sq_ws_encode_frame(b->m.w->busws, &s->wc, (uint8_t *)r, need, SQ_WS_BINARY, true, p, k);
        if (n < 0)
            return n;
        s->wire.len += (size_t)n;
        p += k;
        left -= k;
    }
    b->out.len = b->out_off = 0;
    return 0;
}

/* ---- reads ---- */

struct feed {
    struct sq_spill *sp;
    size_t max_unit;
    sq_spill_unit_fn unit;
    sq_engine__busws_ping_fn ping;
    void *ud;
    bool closed;
};

static int on_event(void *ud, const struct sq_ws_event *ev)
{
    struct feed *f = ud;
    switch (ev->type) {
    case SQ_WS_EV_DATA:
        if (ev->opcode != SQ_WS_BINARY)
            return -SQ_EPARSE; /* MQTT rides binary frames only */
        if (!ev->len)
            return 0;
        return sq_spill_feed(f->sp, f->max_unit, (const char *)ev->data, ev->len, f->unit, f->ud);
    case SQ_WS_EV_PING:
        return f->ping ? f->ping(f->ud, ev->data, ev->len) : 0;
    case SQ_WS_EV_CLOSE:
        f->closed = true;
        return 1;
    default:
        return 0;
    }
}

int sq_engine__busws_frames(struct sq_ws_ctx *ctx, struct sq_ws_conn *c, struct sq_spill *sp,
                            size_t max_unit, const char *p, size_t n, sq_spill_unit_fn unit,
                            sq_engine__busws_ping_fn ping, void *ud)
{
    struct feed f = {.sp = sp, .max_unit = max_unit, .unit = unit, .ping = ping, .ud = ud};
    int rc = sq_ws_feed(ctx, c, p, n, on_event, &f);
    if (f.closed)
        return 1;
    return rc > 0 ? 0 : rc;
}

static int pong(void *ud, const uint8_t *p, size_t n)
{
    struct sq_engine__busconn *b = ud;
    struct sq_engine__busws *s = ws_of(b);
    size_t need = sq_ws_frame_len(n);
    /* the MQTT bytes queued go first: the pong must not cut a frame in two */
    if (sq_engine__busws_wrap(b) < 0)
        return -ENOMEM;
    char *r = wire_room(s, need);
    if (!r)
        return -ENOMEM;
    int k = sq_ws_encode_frame(b->m.w->busws, &s->wc, (uint8_t *)r, need, SQ_WS_PONG, true, p, n);
    if (k < 0)
        return k;
    s->wire.len += (size_t)k;
    sq_engine__bus_commit(b, 0);
    return 0;
}

static void refuse(struct sq_engine__busconn *b, const char *why)
{
    char m[160];
    int n = snprintf(m, sizeof(m), "mqtt+ws: %s", why);
    sq_engine__bus_note(b, m, n > 0 ? (size_t)n : 0, true);
    sq_engine__bus_fail(b, SQ_ERRK_SERVER_ERROR);
}

static void frames(struct sq_engine__busconn *b, const char *p, size_t n)
{
    struct sq_engine__busws *s = ws_of(b);
    int rc = sq_engine__busws_frames(b->m.w->busws, &s->wc, &b->spill, b->max_unit + 4096, p, n,
                                     sq_engine__bus_unit, pong, b);
    if (b->broken || b->m.state < SQ_ENGINE__MX_HELLO)
        return;
    if (rc == 1)
        sq_engine__bus_fail(b, SQ_ERRK_CLOSED); /* the broker's CLOSE */
    else if (rc < 0)
        sq_engine__bus_fail(b, SQ_ERRK_PARSE);
}

void sq_engine__busws_feed(struct sq_engine__busconn *b, const char *p, size_t n)
{
    struct sq_engine__busws *s = ws_of(b);
    if (s->open) {
        frames(b, p, n);
        return;
    }
    size_t used = 0;
    int rc = sq_h1_reader_feed(&s->rd, p, n, &used);
    if (rc == 0)
        return;
    if (rc < 0) {
        refuse(b, rc == -SQ_EPARSE && s->rd.status == 101 && s->hs.why
                      ? s->hs.why
                      : "the answer to the upgrade is not HTTP/1.1");
        return;
    }
    if (s->rd.status != 101) {
        char m[96];
        snprintf(m, sizeof(m), "the upgrade was answered with status %u", (unsigned)s->rd.status);
        refuse(b, m);
        return;
    }
    if (sq_ws_handshake_finish(&s->hs, 101) < 0) {
        refuse(b, s->hs.why);
        return;
    }
    sq_h1_reader_dispose(&s->rd); /* a spilled head's buffer goes */
    sq_h1_reader_init(&s->rd, &up_limits);
    sq_ws_conn_init(&s->wc, sq_ws_rand(&s->rng), UINT64_MAX);
    s->open = true;
    if (b->ops->hello(b) < 0) {
        sq_engine__bus_fail(b, SQ_ERRK_CONNECT);
        return;
    }
    if (used < n)
        frames(b, p + used, n - used); /* frames right behind the 101 */
}
