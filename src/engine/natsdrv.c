/* engine/natsdrv.c - NATS load: core publish, JetStream publish, request/reply (see
 * busconf.h).
 *
 * The text protocol is proto/nats.h's; this file decides what a request is and when it ends.
 * The connection layer (busio.c) owns sockets, batching, the VUs' states and generations, and
 * the rendering of a message; this file encodes it.
 *
 * Greeting: the server's INFO, then (over TLS: tls://) the switch to TLS on the same socket
 * (busio.c's sq_engine__bus_starttls; with --tls-first the handshake came before INFO), then
 * CONNECT (with "headers" and, for requests, "no_responders"
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
#include "engine/busconf.h"
#include "engine/busio.h"
#include "engine/driver.h"
#include "engine/worker.h"
#include "proto/nats.h"

#define SID_INBOX 1

struct natsconn {
    struct sq_engine__busconn b; /* first: busio.c allocates and casts */
    struct sq_nats_limits lim;
    bool got_info;
    bool headers;   /* the server takes HPUB */
    bool connected; /* CONNECT queued */
    char inbox[48]; /* "_INBOX.<16 hex>." */
    uint8_t inbox_len;
};

static struct natsconn *nc_of(struct sq_engine__busconn *b)
{
    return (struct natsconn *)b;
}

/* ---- the greeting ---- */

static int send_connect(struct natsconn *nc);

static int nats_hello(struct sq_engine__busconn *b)
{
    struct natsconn *nc = nc_of(b);
    /* the server speaks first (INFO); after a switch to TLS the greeting goes on here */
    return nc->got_info && !nc->connected ? send_connect(nc) : 0;
}

/* A TLS mismatch between the URL and the server's INFO: counted as a TLS failure, its message
 * the run's; the connection is retried. */
static int tls_mismatch(struct natsconn *nc, const char *msg)
{
    sq_engine__tls_error(nc->b.m.w, msg, true);
    sq_engine__bus_note(&nc->b, msg, strlen(msg), false);
    return -SQ_EPARSE;
}

static int on_info(struct natsconn *nc, const struct sq_nats_event *ev)
{
    struct sq_engine__busconn *b = &nc->b;
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
    if (!b->tls && info.tls_required)
        return tls_mismatch(nc, "the NATS server requires TLS: use tls://HOST[:PORT]/SUBJECT");
    if (b->tls && !b->m.x.tls) {
        if (!info.tls_required && !info.tls_available)
            return tls_mismatch(nc, "the NATS server offers no TLS (tls:// asks for it)");
        sq_engine__bus_starttls(b); /* CONNECT once the handshake is done (nats_hello) */
        return 0;
    }
    return send_connect(nc);
}

static int send_connect(struct natsconn *nc)
{
    struct sq_engine__busconn *b = &nc->b;
    const struct sq_bus_config *bus = b->m.w->cfg->bus;
    nc->connected = true;
    struct sq_nats_connect_opts o = {
        .name = "squall",
        .lang = "c",
        .headers = nc->headers,
        .no_responders = nc->headers && bus->mode != SQ_BUS_PUBLISH,
        .tls_required = b->m.x.tls != NULL,
    };
    if (bus->user && bus->password) {
        o.user = bus->user;
        o.pass = bus->password;
    } else if (bus->user) {
        o.auth_token = bus->user; /* nats://TOKEN@host */
    }
    char *r = sq_engine__bus_room(b, 1024);
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
    sq_engine__bus_commit(b, used);
    return 0;
}

/* ---- completions ---- */

/* A PONG after the greeting: the PUBs of the oldest PING in flight are read by the server. */
static void on_pong(struct natsconn *nc)
{
    struct sq_engine__busconn *b = &nc->b;
    if (!sq_engine__bus_is_open(b)) {
        sq_engine__bus_open(b);
        return;
    }
    sq_engine__bus_batch_complete(b);
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
    struct sq_engine__busconn *b = &nc->b;
    struct sq_engine__worker *w = b->m.w;
    uint32_t slot, gen;
    if (!reply_target(nc, ev->subject, &slot, &gen) || slot >= b->m.n) {
        w->c.bus.late++;
        return;
    }
    uint32_t local = b->m.first + slot;
    struct sq_engine__conn *c = &w->conns[local];
    if (c->state != CONN_ACTIVE || sq_engine__busdrv_of(w)->vus[local].gen != gen) {
        w->c.bus.late++;
        return;
    }
    w->c.bus.acks++;
    if (ev->op == SQ_NATS_OP_HMSG && ev->status == 503) {
        sq_engine__bus_vu_fail(c, SQ_ERRK_NO_RESPONDERS);
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
                sq_engine__bus_note(b, m, ml > 0 ? (size_t)ml : 0, false);
            }
            sq_engine__bus_vu_fail(c, rc < 0 ? SQ_ERRK_PARSE : SQ_ERRK_ACK);
            return;
        }
    }
    sq_engine__bus_complete(b, c, ev->payload.len + ev->headers.len);
}

int sq_engine__bus_nats_unit(struct sq_engine__busconn *b, const struct sq_nats_limits *lim,
                             const char *p, size_t n, struct sq_nats_event *ev, size_t *need)
{
    int rc = sq_nats_parse(p, n, lim, ev, need);
    if (rc <= 0)
        return rc;
    if (ev->op == SQ_NATS_OP_PING && sq_engine__bus_queue(b, SQ_NATS_PONG, SQ_NATS_PONG_LEN) < 0)
        return -ENOMEM;
    if (ev->op == SQ_NATS_OP_ERR) {
        sq_engine__bus_note(b, ev->text.p, ev->text.len, true);
        /* refused at CONNECT: back off. On an open connection the server closes after a fatal
         * -ERR; a permissions error leaves it open. */
        if (!sq_engine__bus_is_open(b))
            sq_engine__bus_fail(b, SQ_ERRK_SERVER_ERROR);
    }
    return rc;
}

static int nats_unit(struct sq_engine__busconn *b, const char *p, size_t n, size_t *need)
{
    struct natsconn *nc = nc_of(b);
    struct sq_nats_event ev;
    int rc = sq_engine__bus_nats_unit(b, &nc->lim, p, n, &ev, need);
    if (rc <= 0)
        return rc;
    switch (ev.op) {
    case SQ_NATS_OP_INFO:
        if (on_info(nc, &ev) < 0)
            return -SQ_EPARSE;
        break;
    case SQ_NATS_OP_PONG:
        if (!nc->got_info)
            return -SQ_EPARSE;
        on_pong(nc);
        break;
    case SQ_NATS_OP_MSG:
    case SQ_NATS_OP_HMSG:
        if (ev.sid_num == SID_INBOX && sq_engine__bus_is_open(b))
            on_reply(nc, &ev);
        else
            b->m.w->c.bus.foreign++;
        break;
    default:
        break;
    }
    return rc;
}

/* ---- sending ---- */

/* A message other than the static core PUB: its payload and headers rendered, then encoded
 * straight into the connection's buffer. Kept out of nats_send, so that the static path does
 * not pay for this one's stack frame. */
static __attribute__((noinline)) int nats_send_rendered(struct sq_engine__busdrv *d,
                                                        struct sq_engine__busconn *b,
                                                        struct sq_engine__conn *c)
{
    const struct sq_bus_config *bus = d->bus;
    struct natsconn *nc = nc_of(b);
    bool core = bus->mode == SQ_BUS_PUBLISH; /* no answer: the PING behind its batch ends it */
    size_t nh = nc->headers ? bus->nheaders : 0;
    struct sq_engine__busmsg m;
    if (sq_engine__bus_render(d, c, nh, &m) != 0)
        return SQ_ERRK_WRITE;
    struct sq_nats_header hs[SQ_BUS_MAX_HEADERS];
    for (size_t i = 0; i < nh; i++) {
        hs[i].name = (struct sq_str){bus->headers[i].name, strlen(bus->headers[i].name)};
        hs[i].value = m.vals[i];
        /* a rendered CR or LF would end the field: it becomes a space (as HTTP's) */
        char *v = (char *)m.vals[i].p;
        for (size_t k = 0; k < m.vals[i].len; k++)
            if (v[k] == '\r' || v[k] == '\n')
                v[k] = ' ';
    }
    char reply[80];
    struct sq_str rp = {reply, 0};
    if (!core) {
        memcpy(reply, nc->inbox, nc->inbox_len);
        int k = snprintf(reply + nc->inbox_len, sizeof(reply) - nc->inbox_len, "%u.%u",
                         c->local - b->m.first, d->vus[c->local].gen);
        rp.len = nc->inbox_len + (size_t)k;
    }
    struct sq_str subj = {bus->subject, bus->subject_len};
    size_t hlen = nh ? sq_nats_headers_len(hs, nh) : 0;
    size_t cap = subj.len + rp.len + hlen + m.len + 64;
    char *r = sq_engine__bus_room(b, cap);
    if (!r)
        return SQ_ERRK_WRITE;
    int k = nh ? sq_nats_encode_hpub_head(r, cap, subj, rp, hs, nh, m.len)
               : sq_nats_encode_pub_head(r, cap, subj, rp, m.len);
    if (k < 0)
        return SQ_ERRK_WRITE;
    memcpy(r + k, m.payload, m.len);
    memcpy(r + k + m.len, "\r\n", 2);
    return sq_engine__bus_sent(d, b, c->local, (size_t)k + m.len + 2, core);
}

static int nats_send(struct sq_engine__busdrv *d, struct sq_engine__busconn *b,
                     struct sq_engine__conn *c)
{
    if (d->msg) /* the static core PUB: one copy */
        return sq_engine__bus_send_static(d, b, c->local, 0, true);
    return nats_send_rendered(d, b, c);
}

static void nats_reset(struct sq_engine__busconn *b)
{
    struct natsconn *nc = nc_of(b);
    nc->got_info = false;
    nc->connected = false;
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
    struct sq_engine__busdrv *d = sq_engine__busdrv_of(w);
    const struct sq_bus_config *bus = d->bus;
    uint64_t seed = w->run->run_id ^ ((uint64_t)w->windex << 40) ^ (uint64_t)sq_now_ns();
    if (d->payload && bus->mode == SQ_BUS_PUBLISH && bus->nheaders == 0) {
        size_t cap = bus->subject_len + d->payload_len + 64;
        d->msg = malloc(cap);
        if (!d->msg)
            return -ENOMEM;
        int k = sq_nats_encode_pub(d->msg, cap, (struct sq_str){bus->subject, bus->subject_len},
                                   (struct sq_str){"", 0}, d->payload, d->payload_len);
        if (k < 0)
            return k;
        d->msg_len = (size_t)k;
    }
    for (uint32_t k = 0; k < d->nconn; k++) {
        struct natsconn *nc = nc_of(sq_engine__bus_at(d, k));
        nc->b.ping = SQ_NATS_PING;
        nc->b.ping_len = SQ_NATS_PING_LEN;
        sq_nats_limits_init(&nc->lim);
        nc->b.max_unit = SQ_NATS_DEFAULT_MAX_PAYLOAD + SQ_NATS_DEFAULT_MAX_LINE;
        int len = snprintf(nc->inbox, sizeof(nc->inbox), "_INBOX.%016llx.",
                           (unsigned long long)splitmix(&seed));
        nc->inbox_len = (uint8_t)len;
    }
    return 0;
}

const struct sq_engine__bus_ops sq_engine__nats_ops = {
    .conn_size = sizeof(struct natsconn),
    .hello = nats_hello,
    .unit = nats_unit,
    .send = nats_send,
    .reset = nats_reset,
    .init = nats_init,
};
