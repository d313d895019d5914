/* engine/flowbus.c - a plan flow's publish and subscribe steps (see flowbus.h).
 *
 * One side connection (busio.c, carrying no VUs of its own) per broker of the flow. Matching:
 *   - a publish is remembered by its VU and that VU's bus generation: NATS and MQTT QoS 0 in a
 *     FIFO closed by the PING / PINGREQ written behind each batch, MQTT QoS 1 / 2 by packet id
 *     (the VU's index + 1: a VU has at most one publish out);
 *   - a subscribe waits in `waiting`, sequence number -> VU (this worker's stream only); an
 *     event of this worker's stream that nobody waits for yet goes into `early`, a table of
 *     the last EARLY_PER_VU x VUs arrivals (sequence number -> arrival time), so a VU that starts
 *     waiting after its event arrived completes at once.
 * A VU's generation moves at every step start and at every cancel, so a late PONG, ack or event
 * never ends a step it was not for.
 */
#include "engine/flowbus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "engine/busconf.h"
#include "engine/busio.h"
#include "engine/busws.h"
#include "engine/driver.h"
#include "engine/flow.h"
#include "engine/worker.h"
#include "net/sock.h"
#include "proto/mqtt.h"
#include "proto/nats.h"
#include "proto/stamp.h"

#define EARLY_PER_VU 4
#define SUB_ID_BASE  65000 /* MQTT SUBSCRIBE ids: above any VU's publish id */

struct fbconn {
    struct sq_engine__busconn b; /* first: busio.c casts */
    struct sq_engine__flowbus *fb;
    const struct sq_flow_broker *br;
    struct sq_addr addr;
    struct sq_nats_limits nlim;
    struct sq_mqtt_limits mlim;
    bool got_info;
    bool headers;     /* INFO: the server takes HPUB */
    bool connected;   /* CONNECT queued */
    uint32_t subacks; /* MQTT SUBACKs still awaited */
    bool started;
};

struct fbvu {
    uint32_t gen;
    bool waiting; /* a subscribe step waits for stamp_seq */
    uint64_t seq;
};

struct sq_engine__flowbus {
    struct sq_engine__worker *w;
    const struct sq_flow *f;
    struct fbconn *conns; /* one per broker of the flow */
    size_t nconns;
    struct fbvu *vus;
    struct sq_engine__seqmap waiting; /* sequence number -> VU index */
    struct sq_engine__seqmap early;   /* sequence number -> arrival, CLOCK_REALTIME ns */
    struct sq_engine__ring early_order;
    uint64_t stream;
};

static struct fbconn *fc_of(struct sq_engine__busconn *b)
{
    return (struct fbconn *)b;
}

/* ---- steps ending ---- */

static void done(struct sq_engine__flowbus *fb, uint32_t local, int kind, int64_t dur_us)
{
    struct sq_engine__conn *c = &fb->w->conns[local];
    fb->vus[local].gen++;
    if (fb->vus[local].waiting) {
        sq_engine__seqmap_del(&fb->waiting, fb->vus[local].seq);
        fb->vus[local].waiting = false;
    }
    sq_engine__flow_bus_done(c, kind, dur_us);
}

/* The publishes a PONG / PINGRESP closes (busio.c's batch: VU and generation). */
static void batch_done(struct fbconn *fc)
{
    struct sq_engine__flowbus *fb = fc->fb;
    struct sq_engine__busconn *b = &fc->b;
    int64_t now = b->now ? b->now : sq_now_ns();
    for (uint64_t k = sq_engine__bus_batch_take(b); k > 0 && b->fifo.len > 0; k--) {
        uint64_t e = sq_engine__ring_pop(&b->fifo);
        uint32_t local = (uint32_t)(e >> 32), gen = (uint32_t)(e & 0xffffffffu);
        if (local < fb->w->nconns && fb->vus[local].gen == gen && !fb->vus[local].waiting) {
            struct sq_engine__conn *c = &fb->w->conns[local];
            done(fb, local, -1, (now - c->sent_ns) / SQ_NS_PER_US);
        }
    }
}

/* An event on a subscription: whose stamp is it? */
static void delivered(struct fbconn *fc, const char *p, size_t n, const struct sq_str *vals,
                      size_t nvals)
{
    struct sq_engine__flowbus *fb = fc->fb;
    struct sq_stamp st;
    bool found = sq_stamp_find(p, n, &st, NULL, NULL);
    for (size_t i = 0; !found && i < nvals; i++)
        found = sq_stamp_find(vals[i].p, vals[i].len, &st, NULL, NULL);
    if (!found || st.run != fb->stream)
        return; /* not this worker's: another worker waits for it */
    int64_t now = sq_stamp_now_ns();
    int64_t dur = now > st.ns ? (now - st.ns) / 1000 : 0;
    int64_t v;
    if (sq_engine__seqmap_get(&fb->waiting, st.seq, &v)) {
        done(fb, (uint32_t)v, -1, dur);
        return;
    }
    /* early: keep it for the VU that will wait for it */
    while (!sq_engine__seqmap_put(&fb->early, st.seq, now) && fb->early_order.len)
        sq_engine__seqmap_del(&fb->early, sq_engine__ring_pop(&fb->early_order));
    if (sq_engine__ring_push(&fb->early_order, st.seq) < 0)
        sq_engine__seqmap_del(&fb->early, st.seq); /* unordered, it could never make room */
}

/* ---- NATS ---- */

static int nats_connect(struct fbconn *fc);

static int fb_hello(struct sq_engine__busconn *b)
{
    struct fbconn *fc = fc_of(b);
    if (fc->br->kind == SQ_BUS_NATS) /* the server speaks first; after a switch to TLS: CONNECT */
        return fc->got_info && !fc->connected ? nats_connect(fc) : 0;
    const struct sq_flow_broker *br = fc->br;
    char id[96];
    int idl =
        snprintf(id, sizeof(id), "squall-flow-%llx-%u",
                 (unsigned long long)(fc->fb->stream >> SQ_STAMP_STREAM_BITS), fc->fb->w->windex);
    struct sq_mqtt_connect cn = {
        .version = SQ_MQTT_V311,
        .clean_start = true,
        .keepalive = 60,
        .client_id = {id, (size_t)idl},
        .username = br->user,
    };
    if (br->password)
        cn.password = (struct sq_str){br->password, strlen(br->password)};
    uint8_t buf[1024];
    int n = sq_mqtt_encode_connect(buf, sizeof(buf), &cn);
    return n < 0 ? n : sq_engine__bus_queue(b, buf, (size_t)n);
}

static int nats_info(struct fbconn *fc, const struct sq_nats_event *ev)
{
    struct sq_engine__busconn *b = &fc->b;
    struct sq_nats_info info;
    if (fc->got_info)
        return 0;
    if (sq_nats_info_parse(ev->text, &info) < 0)
        return -SQ_EPARSE;
    fc->got_info = true;
    fc->headers = info.headers;
    const char *bad = !b->tls && info.tls_required
                          ? "the NATS server requires TLS: use tls://HOST[:PORT]/SUBJECT"
                      : b->tls && !b->m.x.tls && !info.tls_required && !info.tls_available
                          ? "the NATS server offers no TLS (tls:// asks for it)"
                          : NULL;
    if (bad) {
        sq_engine__tls_error(b->m.w, bad, true);
        return -SQ_EPARSE;
    }
    if (b->tls && !b->m.x.tls) {
        sq_engine__bus_starttls(b); /* CONNECT once the handshake is done (fb_hello) */
        return 0;
    }
    return nats_connect(fc);
}

static int nats_connect(struct fbconn *fc)
{
    struct sq_engine__busconn *b = &fc->b;
    fc->connected = true;
    /* echo: the same connection publishes and subscribes, and a flow may wait for its own */
    struct sq_nats_connect_opts o = {.name = "squall-flow",
                                     .headers = fc->headers,
                                     .echo = true,
                                     .tls_required = b->m.x.tls != NULL};
    if (fc->br->user && fc->br->password) {
        o.user = fc->br->user;
        o.pass = fc->br->password;
    } else if (fc->br->user) {
        o.auth_token = fc->br->user;
    }
    char buf[2048];
    int n = sq_nats_encode_connect(buf, sizeof(buf), &o);
    if (n < 0 || sq_engine__bus_queue(b, buf, (size_t)n) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < fc->br->nsubs; i++) {
        const char *s = fc->br->subs[i];
        n = sq_nats_encode_sub(buf, sizeof(buf), (struct sq_str){s, strlen(s)},
                               (struct sq_str){"", 0}, i + 1);
        if (n < 0 || sq_engine__bus_queue(b, buf, (size_t)n) < 0)
            return -ENOMEM;
    }
    return sq_engine__bus_queue(b, SQ_NATS_PING, SQ_NATS_PING_LEN);
}

static int nats_unit(struct fbconn *fc, const char *p, size_t n, size_t *need)
{
    struct sq_engine__busconn *b = &fc->b;
    struct sq_nats_event ev;
    int rc = sq_engine__bus_nats_unit(b, &fc->nlim, p, n, &ev, need); /* PING, -ERR: answered */
    if (rc <= 0)
        return rc;
    switch (ev.op) {
    case SQ_NATS_OP_INFO:
        if (nats_info(fc, &ev) < 0)
            return -SQ_EPARSE;
        break;
    case SQ_NATS_OP_PONG:
        if (!sq_engine__bus_is_open(b))
            sq_engine__bus_open(b);
        else
            batch_done(fc);
        break;
    case SQ_NATS_OP_MSG:
    case SQ_NATS_OP_HMSG: {
        struct sq_str vals[16];
        size_t nv = 0, pos = 0;
        struct sq_str name, value;
        while (ev.op == SQ_NATS_OP_HMSG && nv < 16 &&
               sq_nats_header_next(ev.headers, &pos, &name, &value))
            vals[nv++] = value;
        if (sq_engine__bus_is_open(b))
            delivered(fc, ev.payload.p, ev.payload.len, vals, nv);
        break;
    }
    default:
        break;
    }
    return rc;
}

/* ---- MQTT ---- */

static int mqtt_unit(struct fbconn *fc, const char *p, size_t n, size_t *need)
{
    struct sq_engine__busconn *b = &fc->b;
    struct sq_engine__flowbus *fb = fc->fb;
    struct sq_mqtt_packet pk;
    int rc = sq_engine__bus_mqtt_unit(b, &fc->mlim, p, n, &pk, need); /* the acks it owes: sent */
    if (rc <= 0)
        return rc;
    uint8_t buf[1024];
    int k;
    switch (pk.type) {
    case SQ_MQTT_CONNACK:
        if (pk.reason != 0) {
            sq_engine__bus_note(b, "mqtt: CONNACK refused the connection", 36, true);
            sq_engine__bus_fail(b, SQ_ERRK_SERVER_ERROR);
            break;
        }
        fc->subacks = (uint32_t)fc->br->nsubs;
        for (size_t i = 0; i < fc->br->nsubs; i++) {
            struct sq_mqtt_subscription s = {
                .filter = {fc->br->subs[i], strlen(fc->br->subs[i])},
                .qos = fc->br->qos,
            };
            k = sq_mqtt_encode_subscribe(SQ_MQTT_V311, buf, sizeof(buf),
                                         (uint16_t)(SUB_ID_BASE + i), &s, 1, 0);
            if (k < 0 || sq_engine__bus_queue(b, buf, (size_t)k) < 0)
                return -ENOMEM;
        }
        if (!fc->subacks)
            sq_engine__bus_open(b);
        break;
    case SQ_MQTT_SUBACK:
        if (pk.reasons.len == 0 || (uint8_t)pk.reasons.p[0] >= 0x80) {
            sq_engine__bus_note(b, "mqtt: SUBACK refused a subscription", 35, true);
            sq_engine__bus_fail(b, SQ_ERRK_SERVER_ERROR);
            break;
        }
        if (fc->subacks && --fc->subacks == 0)
            sq_engine__bus_open(b);
        break;
    case SQ_MQTT_PUBACK:
    case SQ_MQTT_PUBCOMP:
        if (pk.packet_id >= 1 && pk.packet_id <= fb->w->nconns) {
            uint32_t local = pk.packet_id - 1u;
            struct sq_engine__conn *c = &fb->w->conns[local];
            if (c->state == CONN_WAIT && !fb->vus[local].waiting)
                done(fb, local, pk.reason >= 0x80 ? SQ_ERRK_ACK : -1,
                     ((b->now ? b->now : sq_now_ns()) - c->sent_ns) / SQ_NS_PER_US);
        }
        break;
    case SQ_MQTT_PUBLISH:
        if (sq_engine__bus_is_open(b))
            delivered(fc, pk.payload.p, pk.payload.len, NULL, 0);
        break;
    case SQ_MQTT_PINGRESP:
        batch_done(fc);
        break;
    default:
        break;
    }
    return rc;
}

static int fb_unit(struct sq_engine__busconn *b, const char *p, size_t n, size_t *need)
{
    struct fbconn *fc = fc_of(b);
    return fc->br->kind == SQ_BUS_NATS ? nats_unit(fc, p, n, need) : mqtt_unit(fc, p, n, need);
}

static void fb_reset(struct sq_engine__busconn *b)
{
    struct fbconn *fc = fc_of(b);
    fc->got_info = false;
    fc->connected = false;
    fc->subacks = 0;
}

static void fb_tick(struct sq_engine__busconn *b, int64_t now)
{
    struct fbconn *fc = fc_of(b);
    if (fc->br->kind != SQ_BUS_MQTT || now - b->wrote_ns < 30 * SQ_NS_PER_S)
        return;
    if (sq_engine__bus_keepalive(b) < 0)
        sq_engine__bus_fail(b, SQ_ERRK_WRITE);
}

/* A side connection carries no VU: nothing to send or release for one. */
static const struct sq_engine__bus_ops fb_ops = {
    .conn_size = sizeof(struct fbconn),
    .hello = fb_hello,
    .unit = fb_unit,
    .reset = fb_reset,
    .tick = fb_tick,
};

/* ---- the steps ---- */

static int publish(struct sq_engine__flowbus *fb, struct sq_engine__conn *c,
                   const struct sq_flow_step *st)
{
    struct fbconn *fc = &fb->conns[st->broker];
    struct sq_engine__busconn *b = &fc->b;
    if (!sq_engine__bus_is_open(b) || b->broken)
        return SQ_ERRK_CLOSED;
    const struct sq_plan_request *r = &st->ps->req;
    struct sq_str payload, vals[SQ_FLOW_MAX_HEADERS];
    if (sq_flow_publish_render(fb->f, st, c->fv, &payload, vals) < 0)
        return SQ_ERRK_WRITE;
    uint32_t local = c->local;
    struct fbvu *v = &fb->vus[local];
    size_t hl = 0;
    for (size_t i = 0; i < r->nheaders; i++)
        hl += strlen(r->headers[i].name) + vals[i].len + 8;
    size_t cap = st->subject_len + payload.len + hl + 64;
    char *room = sq_engine__bus_room(b, cap);
    if (!room)
        return SQ_ERRK_WRITE;
    int k;
    bool batch = true;
    if (fc->br->kind == SQ_BUS_NATS) {
        struct sq_str subj = {st->subject, st->subject_len}, none = {"", 0};
        if (r->nheaders) {
            struct sq_nats_header hs[SQ_FLOW_MAX_HEADERS];
            for (size_t i = 0; i < r->nheaders; i++)
                hs[i] = (struct sq_nats_header){{r->headers[i].name, strlen(r->headers[i].name)},
                                                vals[i]};
            k = sq_nats_encode_hpub(room, cap, subj, none, hs, r->nheaders, payload.p, payload.len);
        } else {
            k = sq_nats_encode_pub(room, cap, subj, none, payload.p, payload.len);
        }
    } else {
        uint8_t qos = st->ps->qos;
        struct sq_mqtt_publish pub = {
            .topic = {st->subject, st->subject_len},
            .qos = qos,
            .packet_id = qos ? (uint16_t)(local + 1) : 0,
            .payload = payload.p,
            .payload_len = payload.len,
            .payload_format = -1,
        };
        if (qos && local + 1 >= SUB_ID_BASE)
            return SQ_ERRK_WRITE; /* more VUs in one worker than packet ids */
        k = sq_mqtt_encode_publish(SQ_MQTT_V311, (uint8_t *)room, cap, &pub);
        batch = qos == 0;
    }
    if (k < 0)
        return SQ_ERRK_WRITE;
    /* the batch first: the commit may write, and the ping it adds must cover this publish */
    if (batch && sq_engine__bus_batch_add(b, local, v->gen) < 0)
        return SQ_ERRK_WRITE;
    sq_engine__bus_commit(b, (size_t)k);
    return 0;
}

int sq_engine__flowbus_begin(struct sq_engine__flowbus *fb, struct sq_engine__conn *c)
{
    const struct sq_flow_step *st = &fb->f->steps[c->fv->step];
    struct fbvu *v = &fb->vus[c->local];
    v->gen++;
    if (st->ps->kind == SQ_STEP_PUBLISH)
        return publish(fb, c, st);
    /* subscribe: the event with the VU's latest stamp */
    struct sq_flow_vu *fv = c->fv;
    if (!fv->stamp_len)
        return SQ_ERRK_EXTRACT; /* nothing to wait for: no step of this iteration stamped */
    int64_t at;
    if (sq_engine__seqmap_get(&fb->early, fv->stamp_seq, &at)) {
        sq_engine__seqmap_del(&fb->early, fv->stamp_seq);
        struct sq_stamp s;
        int64_t dur =
            sq_stamp_parse(fv->stamp, fv->stamp_len, &s) == 0 && at > s.ns ? (at - s.ns) / 1000 : 0;
        v->gen++;
        sq_engine__flow_bus_done(c, -1, dur);
        return 0;
    }
    struct fbconn *fc = &fb->conns[st->broker];
    if (!sq_engine__bus_is_open(&fc->b))
        return SQ_ERRK_CLOSED;
    if (!sq_engine__seqmap_put(&fb->waiting, fv->stamp_seq, c->local))
        return SQ_ERRK_WRITE;
    v->waiting = true;
    v->seq = fv->stamp_seq;
    return 0;
}

void sq_engine__flowbus_cancel(struct sq_engine__flowbus *fb, struct sq_engine__conn *c)
{
    struct fbvu *v = &fb->vus[c->local];
    v->gen++;
    if (v->waiting) {
        sq_engine__seqmap_del(&fb->waiting, v->seq);
        v->waiting = false;
    }
}

/* ---- lifetime ---- */

int sq_engine__flowbus_new(struct sq_engine__worker *w, struct sq_engine__flowbus **out)
{
    *out = NULL;
    const struct sq_flow *f = w->flow;
    if (!f || !f->nbrokers)
        return 0;
    struct sq_engine__flowbus *fb = calloc(1, sizeof(*fb));
    if (!fb)
        return -ENOMEM;
    fb->w = w;
    fb->f = f;
    fb->stream = w->run->run_id + w->windex;
    fb->nconns = f->nbrokers;
    fb->conns = calloc(f->nbrokers, sizeof(*fb->conns));
    fb->vus = calloc(w->nconns ? w->nconns : 1, sizeof(*fb->vus));
    int rc = fb->conns && fb->vus ? 0 : -ENOMEM;
    if (rc == 0)
        rc = sq_engine__seqmap_init(&fb->waiting, w->nconns + 1);
    if (rc == 0)
        rc = sq_engine__seqmap_init(&fb->early, EARLY_PER_VU * (w->nconns + 1));
    for (size_t i = 0; rc == 0 && i < f->nbrokers; i++) {
        struct fbconn *fc = &fb->conns[i];
        fc->fb = fb;
        fc->br = &f->brokers[i];
        fc->addr = fc->br->addr; /* resolved and checked once for the run (flow.h) */
        if (fc->addr.len == 0)
            rc = -SQ_ERESOLVE;
        sq_engine__bus_init_side(&fc->b, w, &fb_ops, &fc->addr);
        fc->b.tls = fc->br->tc; /* over TLS: MQTT shakes hands at once, NATS after INFO */
        if (fc->br->kind == SQ_BUS_MQTT)
            fc->b.m.tc = fc->br->tc;
        if (rc == 0 && fc->br->ws_path)
            rc = sq_engine__busws_attach(&fc->b, fc->br->ws_path, fc->br->ws_host);
        fc->b.ping = fc->br->kind == SQ_BUS_NATS ? SQ_NATS_PING : "\xc0\x00"; /* PINGREQ */
        fc->b.ping_len = fc->br->kind == SQ_BUS_NATS ? SQ_NATS_PING_LEN : 2;
        sq_nats_limits_init(&fc->nlim);
        fc->mlim.version = SQ_MQTT_V311;
        fc->mlim.max_packet = SQ_MQTT_DEFAULT_MAX_PACKET;
    }
    if (rc < 0) {
        sq_engine__flowbus_free(fb);
        return rc;
    }
    *out = fb;
    return 0;
}

void sq_engine__flowbus_free(struct sq_engine__flowbus *fb)
{
    if (!fb)
        return;
    for (size_t i = 0; fb->conns && i < fb->nconns; i++) {
        struct fbconn *fc = &fb->conns[i];
        if (fc->fb)
            sq_engine__bus_dispose_side(&fc->b);
    }
    free(fb->conns);
    free(fb->vus);
    sq_engine__seqmap_dispose(&fb->waiting);
    sq_engine__seqmap_dispose(&fb->early);
    sq_engine__ring_dispose(&fb->early_order);
    free(fb);
}

void sq_engine__flowbus_connect(struct sq_engine__flowbus *fb)
{
    for (size_t i = 0; i < fb->nconns; i++) {
        fb->conns[i].started = true;
        sq_engine__bus_start(&fb->conns[i].b);
    }
}

bool sq_engine__flowbus_settled(const struct sq_engine__flowbus *fb)
{
    for (size_t i = 0; i < fb->nconns; i++) {
        uint8_t s = fb->conns[i].b.m.state;
        if (s == SQ_ENGINE__MX_CONNECTING || s == SQ_ENGINE__MX_HELLO)
            return false;
    }
    return true;
}

void sq_engine__flowbus_sweep(struct sq_engine__flowbus *fb, int64_t now)
{
    for (size_t i = 0; i < fb->nconns; i++) {
        struct sq_engine__busconn *b = &fb->conns[i].b;
        if (b->m.state == SQ_ENGINE__MX_CLOSED && fb->w->sending && fb->conns[i].started)
            sq_engine__bus_start(b); /* it broke: open it again */
        else
            sq_engine__bus_sweep_one(b, now);
    }
}

void sq_engine__flowbus_close_all(struct sq_engine__flowbus *fb)
{
    for (size_t i = 0; i < fb->nconns; i++)
        sq_engine__bus_dispose_side(&fb->conns[i].b);
}

/* ---- the driver of a flow without a request step: VUs need no connection of their own ---- */

static int null_init(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global)
{
    SQ_UNUSED(w);
    SQ_UNUSED(nconn);
    SQ_UNUSED(first_global);
    return 0;
}

static void null_dispose(struct sq_engine__worker *w)
{
    SQ_UNUSED(w);
}

static void null_connect(struct sq_engine__conn *c)
{
    c->state = CONN_IDLE;
    sq_engine__vu_next(c, sq_loop_now(c->w->loop));
}

static void null_send(struct sq_engine__conn *c)
{
    sq_engine__vu_fail(c, SQ_ERRK_WRITE); /* never: such a flow sends no request */
}

static void null_close(struct sq_engine__conn *c)
{
    SQ_UNUSED(c);
}

static void null_sweep(struct sq_engine__worker *w, int64_t now)
{
    SQ_UNUSED(w);
    SQ_UNUSED(now);
}

static void null_close_all(struct sq_engine__worker *w)
{
    SQ_UNUSED(w);
}

const struct sq_engine__driver sq_engine__null_driver = {
    .name = "none",
    .init = null_init,
    .dispose = null_dispose,
    .connect = null_connect,
    .send = null_send,
    .close = null_close,
    .sweep = null_sweep,
    .close_all = null_close_all,
};
