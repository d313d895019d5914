/* engine/natsdrv.c - NATS load: core publish, JetStream publish, request/reply (see bus.h).
 *
 * The text protocol is proto/nats.h's; this file decides what a request is and when it ends.
 * The connection layer (busio.c) owns sockets, batching and the VUs' states.
 *
 * Greeting: the server's INFO, then CONNECT (with "headers" and, for requests, "no_responders"
 * when INFO offers headers), the SUB of the connection's reply inbox when requests need one, and
 * a PING; its PONG opens the connection. The server's PINGs are answered at once.
 *
 * Core publish. A PUB has no answer of its own, so a batch is closed by a PING: before each
 * write, when PUBs were queued since the last PING, one PING goes behind them, and the FIFO
 * of the connection records which VUs (and which of their requests: a generation number) the
 * PING covers. The server answers PINGs in order, after reading everything before them, so its
 * PONG completes exactly those PUBs. A VU that timed out meanwhile has a new generation: its
 * stale FIFO entry completes nothing.
 *
 * JetStream and requests. Each PUB carries a reply subject <inbox>.<slot>.<generation>, where
 * the inbox is _INBOX.<16 hex digits>, one per connection, subscribed once with
 * "<inbox>.>" (sid 1). A reply names its VU directly (slot within the connection) and is taken
 * only when the generation is the VU's current one: a reply to a request that timed out is
 * `late`, never the next request's answer. A 503 status (HMSG "NATS/1.0 503") is "no
 * responders": no stream (JetStream) or no one (request) listens on the subject. A PubAck with
 * an error fails its request as `ack`; one with "duplicate": true completes it and is counted.
 *
 * The steady state: no allocation per message (the payload renders into the worker's scratch,
 * the PUB is written straight into the connection's buffer); a static core PUB is one memcpy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "engine/bus.h"
#include "engine/busio.h"
#include "engine/driver.h"
#include "engine/worker.h"
#include "plan/tmpl.h"
#include "proto/nats.h"

#define SID_INBOX 1

struct natsconn {
    struct sq_busio b; /* first: busio.c allocates and casts */
    struct sq_nats_limits lim;
    bool got_info;
    bool headers;   /* the server takes HPUB */
    char inbox[48]; /* "_INBOX.<16 hex>." */
    uint8_t inbox_len;
    struct sq_engine__ring fifo;  /* core publish: (VU << 32 | generation) in send order */
    struct sq_engine__ring pings; /* core publish: PUBs each PING in flight closes */
    uint32_t unpinged;            /* PUBs queued since the last PING */
};

struct nvu {
    uint32_t gen;
    uint64_t iter;
};

struct nats {
    struct nvu *vus;     /* per VU of the worker */
    const char *payload; /* static payload, or NULL */
    size_t payload_len;
    char *msg; /* a whole static core PUB, or NULL */
    size_t msg_len;
    uint32_t quarter; /* core publish: write (and PING) every quarter window inside an event */
};

static struct nats *nats_of(struct sq_engine__worker *w)
{
    return sq_busdrv_of(w)->proto;
}

static struct natsconn *nc_of(struct sq_busio *b)
{
    return (struct natsconn *)b;
}

/* ---- the greeting ---- */

static int nats_hello(struct sq_busio *b)
{
    SQ_UNUSED(b);
    return 0; /* the server speaks first (INFO) */
}

static int on_info(struct natsconn *nc, const struct sq_nats_event *ev)
{
    struct sq_busio *b = &nc->b;
    const struct sq_bus_config *bus = b->m.w->cfg->bus;
    struct sq_nats_info info;
    if (nc->got_info)
        return 0; /* an update (cluster URLs): nothing for a load client */
    if (sq_nats_info_parse(ev->text, &info) < 0)
        return -SQ_EPARSE;
    nc->got_info = true;
    if (info.max_payload > 0) {
        int64_t mp = info.max_payload;
        if (mp > SQ_NATS_MAX_PAYLOAD_LIMIT)
            mp = SQ_NATS_MAX_PAYLOAD_LIMIT;
        nc->lim.max_payload = (uint32_t)mp;
        b->max_unit = (size_t)mp + SQ_NATS_DEFAULT_MAX_LINE;
    }
    nc->headers = info.headers;
    struct sq_nats_connect_opts o = {
        .name = "squall",
        .lang = "c",
        .headers = info.headers,
        .no_responders = info.headers && bus->mode != SQ_BUS_PUBLISH,
    };
    if (bus->user && bus->password) {
        o.user = bus->user;
        o.pass = bus->password;
    } else if (bus->user) {
        o.auth_token = bus->user; /* nats://TOKEN@host */
    }
    char *r = sq_busio_room(b, 1024);
    if (!r)
        return -ENOMEM;
    int n = sq_nats_encode_connect(r, 1024, &o);
    if (n < 0)
        return n;
    size_t used = (size_t)n;
    if (bus->mode != SQ_BUS_PUBLISH) {
        char sub[64];
        memcpy(sub, nc->inbox, nc->inbox_len);
        sub[nc->inbox_len] = '>';
        int k = sq_nats_encode_sub(r + used, 1024 - used, (struct sq_str){sub, nc->inbox_len + 1u},
                                   (struct sq_str){"", 0}, SID_INBOX);
        if (k < 0)
            return k;
        used += (size_t)k;
    }
    memcpy(r + used, SQ_NATS_PING, SQ_NATS_PING_LEN);
    used += SQ_NATS_PING_LEN;
    sq_busio_commit(b, used);
    return 0;
}

/* ---- completions ---- */

static void complete(struct sq_busio *b, struct sq_engine__conn *c, size_t bytes)
{
    int64_t now = b->now ? b->now : sq_now_ns();
    c->rd.body.bytes = bytes;
    if (c->fb_ns == 0)
        c->fb_ns = now;
    sq_engine__vu_complete(c, now);
    sq_engine__vu_next(c, now);
}

static void fail(struct sq_engine__conn *c, enum sq_errk k)
{
    sq_engine__vu_fail(c, k);
    sq_engine__vu_replace(c);
}

/* A PONG after the greeting: the PUBs of the oldest PING in flight are read by the server. */
static void on_pong(struct natsconn *nc)
{
    struct sq_busio *b = &nc->b;
    if (!sq_busio_is_open(b)) {
        sq_busio_open(b);
        return;
    }
    if (nc->pings.len == 0)
        return;
    struct sq_engine__worker *w = b->m.w;
    struct nats *n = nats_of(w);
    uint64_t k = sq_engine__ring_pop(&nc->pings);
    for (; k > 0 && nc->fifo.len > 0; k--) {
        uint64_t e = sq_engine__ring_pop(&nc->fifo);
        uint32_t local = (uint32_t)(e >> 32), gen = (uint32_t)e;
        struct sq_engine__conn *c = &w->conns[local];
        if (c->state == CONN_ACTIVE && n->vus[local].gen == gen)
            complete(b, c, 0);
        if (b->broken)
            return;
    }
}

/* Reads "<slot>.<gen>" after the inbox prefix. */
static bool reply_target(const struct natsconn *nc, struct sq_str subj, uint32_t *slot,
                         uint32_t *gen)
{
    if (subj.len <= nc->inbox_len || memcmp(subj.p, nc->inbox, nc->inbox_len) != 0)
        return false;
    const char *p = subj.p + nc->inbox_len, *end = subj.p + subj.len;
    uint64_t v[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        const char *s = p;
        while (p < end && *p >= '0' && *p <= '9' && p - s < 10)
            v[k] = v[k] * 10 + (uint64_t)(*p++ - '0');
        if (p == s || v[k] > UINT32_MAX)
            return false;
        if (k == 0 && (p == end || *p++ != '.'))
            return false;
    }
    if (p != end)
        return false;
    *slot = (uint32_t)v[0];
    *gen = (uint32_t)v[1];
    return true;
}

static void on_reply(struct natsconn *nc, const struct sq_nats_event *ev)
{
    struct sq_busio *b = &nc->b;
    struct sq_engine__worker *w = b->m.w;
    uint32_t slot, gen;
    if (!reply_target(nc, ev->subject, &slot, &gen) || slot >= b->m.n) {
        w->c.bus.late++;
        return;
    }
    uint32_t local = b->m.first + slot;
    struct sq_engine__conn *c = &w->conns[local];
    if (c->state != CONN_ACTIVE || nats_of(w)->vus[local].gen != gen) {
        w->c.bus.late++;
        return;
    }
    w->c.bus.acks++;
    if (ev->op == SQ_NATS_OP_HMSG && ev->status == 503) {
        fail(c, SQ_ERRK_NO_RESPONDERS);
        return;
    }
    if (w->cfg->bus->mode == SQ_BUS_JETSTREAM) {
        struct sq_nats_puback pa;
        int rc = sq_nats_puback_parse(ev->payload.p, ev->payload.len, &pa);
        if (rc == SQ_NATS_ACK_DUPLICATE)
            w->c.bus.duplicates++;
        if (rc < 0 || rc == SQ_NATS_ACK_ERROR) {
            if (rc == SQ_NATS_ACK_ERROR && !w->live.bus_err_set) {
                char m[160];
                int ml = snprintf(m, sizeof(m), "jetstream: %d %.*s", pa.code,
                                  (int)(pa.description.len > 100 ? 100 : pa.description.len),
                                  pa.description.p);
                sq_busio_note(b, m, ml > 0 ? (size_t)ml : 0, false);
            }
            fail(c, rc < 0 ? SQ_ERRK_PARSE : SQ_ERRK_ACK);
            return;
        }
    }
    complete(b, c, ev->payload.len + ev->headers.len);
}

static int nats_unit(struct sq_busio *b, const char *p, size_t n, size_t *need)
{
    struct natsconn *nc = nc_of(b);
    struct sq_nats_event ev;
    int rc = sq_nats_parse(p, n, &nc->lim, &ev, need);
    if (rc <= 0)
        return rc;
    switch (ev.op) {
    case SQ_NATS_OP_INFO:
        if (on_info(nc, &ev) < 0)
            return -SQ_EPARSE;
        break;
    case SQ_NATS_OP_PING:
        if (sq_busio_queue(b, SQ_NATS_PONG, SQ_NATS_PONG_LEN) < 0)
            return -ENOMEM;
        break;
    case SQ_NATS_OP_PONG:
        if (!nc->got_info)
            return -SQ_EPARSE;
        on_pong(nc);
        break;
    case SQ_NATS_OP_MSG:
    case SQ_NATS_OP_HMSG:
        if (ev.sid_num == SID_INBOX && sq_busio_is_open(b))
            on_reply(nc, &ev);
        else
            b->m.w->c.bus.foreign++;
        break;
    case SQ_NATS_OP_ERR:
        sq_busio_note(b, ev.text.p, ev.text.len, true);
        if (!sq_busio_is_open(b))
            sq_busio_fail(b, SQ_ERRK_SERVER_ERROR); /* refused at CONNECT: back off */
        /* on an open connection the server closes after a fatal -ERR; a permissions error
         * leaves it open */
        break;
    default:
        break;
    }
    return rc;
}

/* ---- sending ---- */

static int nats_send(struct sq_busio *b, struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    struct sq_busdrv *d = sq_busdrv_of(w);
    const struct sq_bus_config *bus = d->bus;
    struct natsconn *nc = nc_of(b);
    struct nats *n = d->proto;
    struct nvu *v = &n->vus[c->local];
    v->gen++;
    bool core = bus->mode == SQ_BUS_PUBLISH;
    if (n->msg) {
        /* the static core PUB: one copy (the FIFO entry and the count first: the commit may
         * write, and the PING it adds must cover this PUB) */
        char *r = sq_busio_room(b, n->msg_len);
        if (!r || sq_engine__ring_push(&nc->fifo, (uint64_t)c->local << 32 | v->gen) < 0)
            return SQ_ERRK_WRITE;
        memcpy(r, n->msg, n->msg_len);
        nc->unpinged++;
        sq_busio_commit(b, n->msg_len);
        if (b->busy && nc->unpinged >= n->quarter)
            sq_busio_write_now(b);
        return 0;
    }
    char stamp[SQ_STAMP_MAX];
    struct sq_str st = {stamp, 0};
    struct sq_tmpl_ctx ctx = {
        .vu = sq_engine__vu_number(w, c->local),
        .iteration = v->iter++,
        .rng = &c->rng,
        .stamp = &st,
    };
    if (bus->stamped) {
        st.len = sq_engine__stamp(w, NULL, stamp);
        w->c.bus.stamped++;
    }
    const char *pl = n->payload;
    size_t plen = n->payload_len;
    if (!pl) {
        sq_buf_reset(&d->scratch);
        if (sq_tmpl_render(bus->payload, &ctx, &d->scratch) < 0)
            return SQ_ERRK_WRITE;
        pl = d->scratch.p ? d->scratch.p : "";
        plen = d->scratch.len;
    }
    struct sq_nats_header hs[SQ_BUS_MAX_HEADERS];
    size_t nh = nc->headers ? bus->nheaders : 0;
    if (nh) {
        sq_buf_reset(&d->hscratch);
        size_t off[SQ_BUS_MAX_HEADERS + 1];
        for (size_t i = 0; i < nh; i++) {
            off[i] = d->hscratch.len;
            if (sq_tmpl_render(bus->headers[i].value, &ctx, &d->hscratch) < 0)
                return SQ_ERRK_WRITE;
        }
        off[nh] = d->hscratch.len;
        for (size_t i = 0; i < nh; i++) {
            hs[i].name = (struct sq_str){bus->headers[i].name, strlen(bus->headers[i].name)};
            hs[i].value = (struct sq_str){d->hscratch.p + off[i], off[i + 1] - off[i]};
            /* a rendered CR or LF would end the field: it becomes a space (as HTTP's) */
            for (size_t k = off[i]; k < off[i + 1]; k++)
                if (d->hscratch.p[k] == '\r' || d->hscratch.p[k] == '\n')
                    d->hscratch.p[k] = ' ';
        }
    }
    char reply[80];
    struct sq_str rp = {reply, 0};
    if (!core) {
        memcpy(reply, nc->inbox, nc->inbox_len);
        int k = snprintf(reply + nc->inbox_len, sizeof(reply) - nc->inbox_len, "%u.%u",
                         c->local - b->m.first, v->gen);
        rp.len = nc->inbox_len + (size_t)k;
    }
    struct sq_str subj = {bus->subject, bus->subject_len};
    size_t hlen = nh ? sq_nats_headers_len(hs, nh) : 0;
    size_t cap = subj.len + rp.len + hlen + plen + 64;
    char *r = sq_busio_room(b, cap);
    if (!r)
        return SQ_ERRK_WRITE;
    int k = nh ? sq_nats_encode_hpub_head(r, cap, subj, rp, hs, nh, plen)
               : sq_nats_encode_pub_head(r, cap, subj, rp, plen);
    if (k < 0)
        return SQ_ERRK_WRITE;
    memcpy(r + k, pl, plen);
    memcpy(r + k + plen, "\r\n", 2);
    if (core) {
        if (sq_engine__ring_push(&nc->fifo, (uint64_t)c->local << 32 | v->gen) < 0)
            return SQ_ERRK_WRITE;
        nc->unpinged++;
    }
    sq_busio_commit(b, (size_t)k + plen + 2);
    if (core && b->busy && nc->unpinged >= n->quarter)
        sq_busio_write_now(b);
    return 0;
}

static void nats_release(struct sq_busio *b, struct sq_engine__conn *c)
{
    SQ_UNUSED(b);
    nats_of(c->w)->vus[c->local].gen++; /* whatever answers its request now is late */
}

/* Core publish: a PING behind the PUBs queued since the last one. */
static void nats_before_write(struct sq_busio *b)
{
    struct natsconn *nc = nc_of(b);
    if (!nc->unpinged)
        return;
    if (sq_engine__ring_push(&nc->pings, nc->unpinged) < 0 ||
        sq_buf_append(&b->out, SQ_NATS_PING, SQ_NATS_PING_LEN) < 0) {
        sq_busio_fail(b, SQ_ERRK_WRITE);
        return;
    }
    nc->unpinged = 0;
    b->m.w->c.bus.pings++;
}

static void nats_reset(struct sq_busio *b)
{
    struct natsconn *nc = nc_of(b);
    nc->got_info = false;
    sq_engine__ring_clear(&nc->fifo);
    sq_engine__ring_clear(&nc->pings);
    nc->unpinged = 0;
    sq_nats_limits_init(&nc->lim);
    b->max_unit = SQ_NATS_DEFAULT_MAX_PAYLOAD + SQ_NATS_DEFAULT_MAX_LINE;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int nats_init(struct sq_engine__worker *w)
{
    struct sq_busdrv *d = sq_busdrv_of(w);
    const struct sq_bus_config *bus = d->bus;
    struct nats *n = calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    d->proto = n;
    n->vus = calloc(w->nconns ? w->nconns : 1, sizeof(*n->vus));
    if (!n->vus)
        return -ENOMEM;
    uint64_t seed = w->run->run_id ^ ((uint64_t)w->windex << 40) ^ (uint64_t)sq_now_ns();
    n->quarter = d->window >= 4 ? d->window / 4 : 1;
    if (sq_tmpl_static(bus->payload, &n->payload, &n->payload_len) && !n->payload)
        n->payload = "";
    if (n->payload && bus->mode == SQ_BUS_PUBLISH && bus->nheaders == 0) {
        size_t cap = bus->subject_len + n->payload_len + 64;
        n->msg = malloc(cap);
        if (!n->msg)
            return -ENOMEM;
        int k = sq_nats_encode_pub(n->msg, cap, (struct sq_str){bus->subject, bus->subject_len},
                                   (struct sq_str){"", 0}, n->payload, n->payload_len);
        if (k < 0)
            return k;
        n->msg_len = (size_t)k;
    }
    for (uint32_t k = 0; k < d->nconn; k++) {
        struct natsconn *nc = nc_of(sq_busio_at(d, k));
        sq_nats_limits_init(&nc->lim);
        nc->b.max_unit = SQ_NATS_DEFAULT_MAX_PAYLOAD + SQ_NATS_DEFAULT_MAX_LINE;
        int len = snprintf(nc->inbox, sizeof(nc->inbox), "_INBOX.%016llx.",
                           (unsigned long long)splitmix(&seed));
        nc->inbox_len = (uint8_t)len;
    }
    return 0;
}

static void nats_dispose(struct sq_engine__worker *w)
{
    struct sq_busdrv *d = sq_busdrv_of(w);
    struct nats *n = d->proto;
    for (uint32_t k = 0; d->conns && k < d->nconn; k++) {
        struct natsconn *nc = nc_of(sq_busio_at(d, k));
        sq_engine__ring_dispose(&nc->fifo);
        sq_engine__ring_dispose(&nc->pings);
    }
    if (n) {
        free(n->vus);
        free(n->msg);
        free(n);
    }
    d->proto = NULL;
}

static const struct sq_busio_ops nats_ops = {
    .conn_size = sizeof(struct natsconn),
    .hello = nats_hello,
    .unit = nats_unit,
    .send = nats_send,
    .release = nats_release,
    .before_write = nats_before_write,
    .reset = nats_reset,
    .init = nats_init,
    .dispose = nats_dispose,
};

static int drv_init(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global)
{
    return sq_busio_drv_init(w, nconn, first_global, &nats_ops);
}

const struct sq_engine__driver sq_engine__nats_driver = {
    .name = "nats",
    .init = drv_init,
    .dispose = sq_busio_drv_dispose,
    .connect = sq_busio_drv_connect,
    .send = sq_busio_drv_send,
    .close = sq_busio_drv_close,
    .sweep = sq_busio_drv_sweep,
    .close_all = sq_busio_drv_close_all,
};
