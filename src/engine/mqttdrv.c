/* engine/mqttdrv.c - MQTT 3.1.1 / 5.0 load: QoS 0, 1 and 2 publish, and the round trip (see
 * bus.h). The packets are proto/mqtt.h's; sockets, batching and the VUs' states are busio.c's.
 *
 * Greeting: CONNECT (clean start, a client id "<prefix>-<run id>-<connection>", the keep-alive,
 * credentials from the URL; on 5.0 a Maximum Packet Size of 1 MiB), the CONNACK (a refusal is a
 * `server_error` and the connection is retried after a backoff; on 5.0 its Receive Maximum caps
 * how many of the connection's VUs may have a QoS 1/2 publish out at once: the rest are parked),
 * and for the round trip a SUBSCRIBE to the topic at the publish QoS and its SUBACK.
 *
 * Packet ids. A publish of slot s (0 .. n-1 on its connection) at its VU's generation g gets id
 * 1 + s + n * (g mod G), G = 65534 / n, so an ack names its VU directly, and an ack for an
 * earlier publish of the same slot (one that timed out) has another id: it is `late`, never
 * the next publish's ack. Id 65535 is never a publish's: it is the SUBSCRIBE's.
 *
 * When a publish is complete:
 *   QoS 0        the PINGRESP to the PINGREQ written behind its batch (as NATS core's PING);
 *   QoS 1        its PUBACK;   QoS 2  its PUBCOMP (its PUBREC is answered with a PUBREL);
 *   round trip   its delivery on the connection's subscription, matched by the stamp's stream
 *                and sequence number through a small open-addressing map (sequence -> slot);
 *                deliveries that match nothing of the connection are `foreign` (with -c N every
 *                connection receives every publish: the broker fans out N times).
 * A PUBACK / PUBREC / PUBCOMP with a reason code >= 0x80 (5.0) fails the publish as `ack`.
 * Deliveries are acknowledged as the protocol asks (PUBACK; PUBREC, then PUBCOMP for PUBREL).
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
#include "proto/mqtt.h"

#define SUB_ID 65535

struct mqttconn {
    struct sq_busio b; /* first: busio.c allocates and casts */
    struct sq_mqtt_limits lim;
    uint8_t stage;               /* 0: CONNECT out, 1: SUBSCRIBE out */
    struct sq_engine__ring fifo; /* QoS 0: (VU << 32 | generation) in send order */
    struct sq_engine__ring
        pings; /* PUBLISHes each PINGREQ in flight closes (0: a keep-alive ping) */
    uint32_t unpinged;
    uint32_t g;                   /* generations per slot in the packet-id space: 65534 / n */
    struct sq_engine__seqmap map; /* round trip: stamp sequence number -> slot */
};

struct mvu {
    uint32_t gen;
    uint64_t iter;
    uint64_t seq; /* round trip: the stamp of the publish out (UINT64_MAX: none) */
};

struct mqtt {
    struct mvu *vus;
    const char *payload; /* static payload, or NULL */
    size_t payload_len;
    uint8_t *msg; /* a static PUBLISH (QoS 0: whole; QoS > 0: whole, id patched), or NULL */
    size_t msg_len, id_off;
    uint32_t quarter; /* QoS 0: write (and PINGREQ) every quarter window inside an event */
    uint64_t stream;  /* this worker's stamp run field */
};

static struct mqtt *mq_of(struct sq_engine__worker *w)
{
    return sq_busdrv_of(w)->proto;
}

static struct mqttconn *mc_of(struct sq_busio *b)
{
    return (struct mqttconn *)b;
}

static uint16_t packet_id(const struct mqttconn *mc, uint32_t slot, uint32_t gen)
{
    return (uint16_t)(1 + slot + mc->b.m.n * (gen % mc->g));
}

/* The VU a packet id names, when it names its current publish. */
static struct sq_engine__conn *vu_for_id(struct mqttconn *mc, uint16_t id)
{
    struct sq_busio *b = &mc->b;
    if (id == 0 || id == SUB_ID || b->m.n == 0)
        return NULL;
    uint32_t slot = (uint32_t)(id - 1) % b->m.n, g = (uint32_t)(id - 1) / b->m.n;
    if (g >= mc->g)
        return NULL;
    uint32_t local = b->m.first + slot;
    struct sq_engine__conn *c = &b->m.w->conns[local];
    if (c->state != CONN_ACTIVE || mq_of(b->m.w)->vus[local].gen % mc->g != g)
        return NULL;
    return c;
}

static int queue_ack(struct sq_busio *b, uint8_t type, uint16_t id)
{
    uint8_t p[8];
    int n = sq_mqtt_encode_ack(SQ_MQTT_V311, p, sizeof(p), type, id, 0);
    return n < 0 ? n : sq_busio_queue(b, p, (size_t)n);
}

/* ---- the greeting ---- */

static int mqtt_hello(struct sq_busio *b)
{
    struct mqttconn *mc = mc_of(b);
    struct sq_engine__worker *w = b->m.w;
    const struct sq_bus_config *bus = w->cfg->bus;
    char id[128];
    int idl = snprintf(id, sizeof(id), "%s-%llx-%u", bus->client_id ? bus->client_id : "squall",
                       (unsigned long long)(w->run->run_id >> SQ_STAMP_STREAM_BITS), b->m.global);
    if (idl < 0 || (size_t)idl >= sizeof(id))
        idl = (int)sizeof(id) - 1;
    struct sq_mqtt_connect cn = {
        .version = bus->mqtt_version,
        .clean_start = true,
        .keepalive = bus->keepalive_s,
        .client_id = {id, (size_t)idl},
        .username = bus->user,
    };
    if (bus->password)
        cn.password = (struct sq_str){bus->password, strlen(bus->password)};
    if (bus->mqtt_version == SQ_MQTT_V5)
        cn.max_packet_size = SQ_MQTT_DEFAULT_MAX_PACKET;
    uint8_t *r = (uint8_t *)sq_busio_room(b, 1024);
    if (!r)
        return -ENOMEM;
    int n = sq_mqtt_encode_connect(r, 1024, &cn);
    if (n < 0)
        return n;
    mc->stage = 0;
    sq_busio_commit(b, (size_t)n);
    return 0;
}

static void refused(struct sq_busio *b, const char *what, uint8_t reason)
{
    char m[96];
    int n = snprintf(m, sizeof(m), "mqtt: %s (reason 0x%02x)", what, reason);
    sq_busio_note(b, m, n > 0 ? (size_t)n : 0, true);
    sq_busio_fail(b, SQ_ERRK_SERVER_ERROR);
}

static int on_connack(struct mqttconn *mc, const struct sq_mqtt_packet *pk)
{
    struct sq_busio *b = &mc->b;
    const struct sq_bus_config *bus = b->m.w->cfg->bus;
    if (sq_busio_is_open(b) || mc->stage != 0)
        return -SQ_EPARSE;
    if (pk->reason != 0) {
        refused(b, "CONNACK refused the connection", pk->reason);
        return 0;
    }
    b->m.usable = b->m.n;
    if (bus->mqtt_version == SQ_MQTT_V5 && (pk->props.has & SQ_MQTT_HAS_RECEIVE_MAX) &&
        bus->qos > 0 && pk->props.receive_max < b->m.n)
        b->m.usable = pk->props.receive_max;
    if (bus->mode != SQ_BUS_ROUND_TRIP) {
        sq_busio_open(b);
        return 0;
    }
    struct sq_mqtt_subscription s = {
        .filter = {bus->subject, bus->subject_len},
        .qos = bus->qos,
    };
    uint8_t *r = (uint8_t *)sq_busio_room(b, bus->subject_len + 32);
    if (!r)
        return -ENOMEM;
    int n = sq_mqtt_encode_subscribe(bus->mqtt_version, r, bus->subject_len + 32, SUB_ID, &s, 1, 0);
    if (n < 0)
        return n;
    mc->stage = 1;
    sq_busio_commit(b, (size_t)n);
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

static void on_pingresp(struct mqttconn *mc)
{
    struct sq_busio *b = &mc->b;
    if (mc->pings.len == 0)
        return;
    struct sq_engine__worker *w = b->m.w;
    struct mqtt *m = mq_of(w);
    uint64_t k = sq_engine__ring_pop(&mc->pings);
    for (; k > 0 && mc->fifo.len > 0; k--) {
        uint64_t e = sq_engine__ring_pop(&mc->fifo);
        uint32_t local = (uint32_t)(e >> 32), gen = (uint32_t)e;
        struct sq_engine__conn *c = &w->conns[local];
        if (c->state == CONN_ACTIVE && m->vus[local].gen == gen)
            complete(b, c, 0);
        if (b->broken)
            return;
    }
}

/* A message the broker delivers on the round trip's subscription. */
static void on_delivery(struct mqttconn *mc, const struct sq_mqtt_packet *pk)
{
    struct sq_busio *b = &mc->b;
    struct sq_engine__worker *w = b->m.w;
    struct mqtt *m = mq_of(w);
    struct sq_stamp st;
    bool found = sq_stamp_find(pk->payload.p, pk->payload.len, &st, NULL, NULL);
    if (!found && w->cfg->bus->mqtt_version == SQ_MQTT_V5 && pk->props.user_props) {
        size_t pos = 0;
        struct sq_mqtt_user_prop up;
        while (!found && sq_mqtt_user_prop_next(pk->props.raw, &pos, &up))
            found = sq_stamp_find(up.value.p, up.value.len, &st, NULL, NULL);
    }
    int64_t slot;
    if (!found || st.run != m->stream || !sq_engine__seqmap_get(&mc->map, st.seq, &slot) ||
        slot >= b->m.n) {
        w->c.bus.foreign++;
        return;
    }
    uint32_t local = b->m.first + (uint32_t)slot;
    struct sq_engine__conn *c = &w->conns[local];
    if (c->state != CONN_ACTIVE || m->vus[local].seq != st.seq) {
        w->c.bus.late++;
        return;
    }
    sq_engine__seqmap_del(&mc->map, st.seq);
    m->vus[local].seq = UINT64_MAX;
    w->c.bus.delivered++;
    complete(b, c, pk->payload.len);
}

static int mqtt_unit(struct sq_busio *b, const char *p, size_t n, size_t *need)
{
    struct mqttconn *mc = mc_of(b);
    struct sq_engine__worker *w = b->m.w;
    const struct sq_bus_config *bus = w->cfg->bus;
    struct sq_mqtt_packet pk;
    int rc = sq_mqtt_parse((const uint8_t *)p, n, &mc->lim, &pk, need);
    if (rc <= 0)
        return rc;
    struct sq_engine__conn *c;
    switch (pk.type) {
    case SQ_MQTT_CONNACK:
        if (on_connack(mc, &pk) < 0)
            return -SQ_EPARSE;
        break;
    case SQ_MQTT_SUBACK:
        if (pk.packet_id != SUB_ID || sq_busio_is_open(b) || mc->stage != 1)
            break;
        if (pk.reasons.len == 0 || (uint8_t)pk.reasons.p[0] >= 0x80) {
            refused(b, "SUBACK refused the subscription",
                    pk.reasons.len ? (uint8_t)pk.reasons.p[0] : 0x80);
            break;
        }
        sq_busio_open(b);
        break;
    case SQ_MQTT_PUBACK:
    case SQ_MQTT_PUBCOMP:
        c = vu_for_id(mc, pk.packet_id);
        if (!c) {
            if (bus->mode != SQ_BUS_ROUND_TRIP) /* a round trip may end before its ack */
                w->c.bus.late++;
            break;
        }
        w->c.bus.acks++;
        if (pk.reason >= 0x80)
            fail(c, SQ_ERRK_ACK);
        else if (bus->mode != SQ_BUS_ROUND_TRIP)
            complete(b, c, 0);
        break;
    case SQ_MQTT_PUBREC:
        /* the broker holds the message: release it, whoever it was for */
        if (pk.reason < 0x80 && queue_ack(b, SQ_MQTT_PUBREL, pk.packet_id) < 0)
            return -ENOMEM;
        c = vu_for_id(mc, pk.packet_id);
        if (c && pk.reason >= 0x80)
            fail(c, SQ_ERRK_ACK);
        break;
    case SQ_MQTT_PUBLISH:
        if (pk.qos == 1 && queue_ack(b, SQ_MQTT_PUBACK, pk.packet_id) < 0)
            return -ENOMEM;
        if (pk.qos == 2 && queue_ack(b, SQ_MQTT_PUBREC, pk.packet_id) < 0)
            return -ENOMEM;
        if (sq_busio_is_open(b) && bus->mode == SQ_BUS_ROUND_TRIP)
            on_delivery(mc, &pk);
        else
            w->c.bus.foreign++;
        break;
    case SQ_MQTT_PUBREL:
        if (queue_ack(b, SQ_MQTT_PUBCOMP, pk.packet_id) < 0)
            return -ENOMEM;
        break;
    case SQ_MQTT_PINGRESP:
        on_pingresp(mc);
        break;
    case SQ_MQTT_DISCONNECT:
        refused(b, "the server sent DISCONNECT", pk.reason);
        break;
    default:
        break;
    }
    return rc;
}

/* ---- sending ---- */

static int mqtt_send(struct sq_busio *b, struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    struct sq_busdrv *d = sq_busdrv_of(w);
    const struct sq_bus_config *bus = d->bus;
    struct mqttconn *mc = mc_of(b);
    struct mqtt *m = d->proto;
    struct mvu *v = &m->vus[c->local];
    uint32_t slot = c->local - b->m.first;
    v->gen++;
    uint16_t id = bus->qos ? packet_id(mc, slot, v->gen) : 0;
    bool batch = bus->qos == 0 && bus->mode != SQ_BUS_ROUND_TRIP;
    if (m->msg) {
        uint8_t *r = (uint8_t *)sq_busio_room(b, m->msg_len);
        if (!r || (batch && sq_engine__ring_push(&mc->fifo, (uint64_t)c->local << 32 | v->gen) < 0))
            return SQ_ERRK_WRITE;
        memcpy(r, m->msg, m->msg_len);
        if (id) {
            r[m->id_off] = (uint8_t)(id >> 8);
            r[m->id_off + 1] = (uint8_t)id;
        }
        if (batch)
            mc->unpinged++;
        sq_busio_commit(b, m->msg_len);
        if (batch && b->busy && mc->unpinged >= m->quarter)
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
        uint64_t seq;
        st.len = sq_engine__stamp(w, &seq, stamp);
        w->c.bus.stamped++;
        if (bus->mode == SQ_BUS_ROUND_TRIP) {
            if (v->seq != UINT64_MAX)
                sq_engine__seqmap_del(&mc->map, v->seq);
            v->seq = seq;
            if (!sq_engine__seqmap_put(&mc->map, seq, slot)) /* never: 4 slots a VU */
                return SQ_ERRK_WRITE;
        }
    }
    const char *pl = m->payload;
    size_t plen = m->payload_len;
    if (!pl) {
        sq_buf_reset(&d->scratch);
        if (sq_tmpl_render(bus->payload, &ctx, &d->scratch) < 0)
            return SQ_ERRK_WRITE;
        pl = d->scratch.p ? d->scratch.p : "";
        plen = d->scratch.len;
    }
    struct sq_mqtt_user_prop ups[SQ_BUS_MAX_HEADERS];
    size_t nh = bus->mqtt_version == SQ_MQTT_V5 ? bus->nheaders : 0;
    size_t plen_props = 0;
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
            ups[i].name = (struct sq_str){bus->headers[i].name, strlen(bus->headers[i].name)};
            ups[i].value = (struct sq_str){d->hscratch.p + off[i], off[i + 1] - off[i]};
            plen_props += 5 + ups[i].name.len + ups[i].value.len;
        }
    }
    struct sq_mqtt_publish pub = {
        .topic = {bus->subject, bus->subject_len},
        .qos = bus->qos,
        .retain = bus->retain,
        .packet_id = id,
        .payload = pl,
        .payload_len = plen,
        .payload_format = -1,
        .user_props = nh ? ups : NULL,
        .n_user_props = nh,
    };
    size_t cap = 16 + bus->subject_len + plen_props + plen;
    uint8_t *r = (uint8_t *)sq_busio_room(b, cap);
    if (!r)
        return SQ_ERRK_WRITE;
    int k = sq_mqtt_encode_publish(bus->mqtt_version, r, cap, &pub);
    if (k < 0 || (batch && sq_engine__ring_push(&mc->fifo, (uint64_t)c->local << 32 | v->gen) < 0))
        return SQ_ERRK_WRITE;
    if (batch)
        mc->unpinged++;
    sq_busio_commit(b, (size_t)k);
    if (batch && b->busy && mc->unpinged >= m->quarter)
        sq_busio_write_now(b);
    return 0;
}

static void mqtt_release(struct sq_busio *b, struct sq_engine__conn *c)
{
    struct mvu *v = &mq_of(c->w)->vus[c->local];
    v->gen++;
    if (v->seq != UINT64_MAX) {
        sq_engine__seqmap_del(&mc_of(b)->map, v->seq);
        v->seq = UINT64_MAX;
    }
}

static int push_ping(struct sq_busio *b, uint32_t count)
{
    struct mqttconn *mc = mc_of(b);
    uint8_t p[2];
    if (sq_mqtt_encode_pingreq(p, sizeof(p)) < 0 || sq_engine__ring_push(&mc->pings, count) < 0 ||
        sq_buf_append(&b->out, p, 2) < 0)
        return -ENOMEM;
    b->m.w->c.bus.pings++;
    return 0;
}

static void mqtt_before_write(struct sq_busio *b)
{
    struct mqttconn *mc = mc_of(b);
    if (!mc->unpinged)
        return;
    if (push_ping(b, mc->unpinged) < 0) {
        sq_busio_fail(b, SQ_ERRK_WRITE);
        return;
    }
    mc->unpinged = 0;
}

/* Keep-alive: a PINGREQ once half the keep-alive has passed without a write. */
static void mqtt_tick(struct sq_busio *b, int64_t now)
{
    const struct sq_bus_config *bus = b->m.w->cfg->bus;
    if (!bus->keepalive_s || now - b->wrote_ns < (int64_t)bus->keepalive_s * SQ_NS_PER_S / 2)
        return;
    uint8_t p[2];
    struct mqttconn *mc = mc_of(b);
    if (sq_mqtt_encode_pingreq(p, sizeof(p)) < 0 || sq_engine__ring_push(&mc->pings, 0) < 0 ||
        sq_busio_queue(b, p, 2) < 0)
        sq_busio_fail(b, SQ_ERRK_WRITE);
}

static void mqtt_reset(struct sq_busio *b)
{
    struct mqttconn *mc = mc_of(b);
    struct mqtt *m = mq_of(b->m.w);
    mc->stage = 0;
    sq_engine__ring_clear(&mc->fifo);
    sq_engine__ring_clear(&mc->pings);
    mc->unpinged = 0;
    b->m.usable = b->m.n;
    if (mc->map.key) {
        sq_engine__seqmap_clear(&mc->map);
        for (uint32_t i = b->m.first; i < b->m.first + b->m.n; i++)
            m->vus[i].seq = UINT64_MAX;
    }
}

static int mqtt_init(struct sq_engine__worker *w)
{
    struct sq_busdrv *d = sq_busdrv_of(w);
    const struct sq_bus_config *bus = d->bus;
    struct mqtt *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    d->proto = m;
    m->vus = calloc(w->nconns ? w->nconns : 1, sizeof(*m->vus));
    if (!m->vus)
        return -ENOMEM;
    for (uint32_t i = 0; i < w->nconns; i++)
        m->vus[i].seq = UINT64_MAX;
    m->stream = w->run->run_id + w->windex;
    m->quarter = d->window >= 4 ? d->window / 4 : 1;
    if (sq_tmpl_static(bus->payload, &m->payload, &m->payload_len) && !m->payload)
        m->payload = "";
    if (m->payload && bus->nheaders == 0 && bus->mode != SQ_BUS_ROUND_TRIP) {
        struct sq_mqtt_publish pub = {
            .topic = {bus->subject, bus->subject_len},
            .qos = bus->qos,
            .retain = bus->retain,
            .packet_id = bus->qos ? 1 : 0,
            .payload = m->payload,
            .payload_len = m->payload_len,
            .payload_format = -1,
        };
        size_t cap = 16 + bus->subject_len + m->payload_len;
        m->msg = malloc(cap);
        if (!m->msg)
            return -ENOMEM;
        int k = sq_mqtt_encode_publish(bus->mqtt_version, m->msg, cap, &pub);
        if (k < 0)
            return k;
        m->msg_len = (size_t)k;
        m->id_off = bus->qos ? sq_mqtt_publish_id_offset(m->msg, &pub) : 0;
    }
    for (uint32_t k = 0; k < d->nconn; k++) {
        struct mqttconn *mc = mc_of(sq_busio_at(d, k));
        mc->lim.version = bus->mqtt_version;
        mc->lim.max_packet = SQ_MQTT_DEFAULT_MAX_PACKET;
        mc->b.max_unit = SQ_MQTT_DEFAULT_MAX_PACKET;
        mc->g = mc->b.m.n ? 65534 / mc->b.m.n : 1;
        /* at most one publish out per slot: 4 table slots a VU keep the probes short */
        if (bus->mode == SQ_BUS_ROUND_TRIP && sq_engine__seqmap_init(&mc->map, 2 * mc->b.m.n) < 0)
            return -ENOMEM;
    }
    return 0;
}

static void mqtt_dispose(struct sq_engine__worker *w)
{
    struct sq_busdrv *d = sq_busdrv_of(w);
    struct mqtt *m = d->proto;
    for (uint32_t k = 0; d->conns && k < d->nconn; k++) {
        struct mqttconn *mc = mc_of(sq_busio_at(d, k));
        sq_engine__ring_dispose(&mc->fifo);
        sq_engine__ring_dispose(&mc->pings);
        sq_engine__seqmap_dispose(&mc->map);
    }
    if (m) {
        free(m->vus);
        free(m->msg);
        free(m);
    }
    d->proto = NULL;
}

static const struct sq_busio_ops mqtt_ops = {
    .conn_size = sizeof(struct mqttconn),
    .hello = mqtt_hello,
    .unit = mqtt_unit,
    .send = mqtt_send,
    .release = mqtt_release,
    .before_write = mqtt_before_write,
    .reset = mqtt_reset,
    .tick = mqtt_tick,
    .init = mqtt_init,
    .dispose = mqtt_dispose,
};

static int drv_init(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global)
{
    return sq_busio_drv_init(w, nconn, first_global, &mqtt_ops);
}

const struct sq_engine__driver sq_engine__mqtt_driver = {
    .name = "mqtt",
    .init = drv_init,
    .dispose = sq_busio_drv_dispose,
    .connect = sq_busio_drv_connect,
    .send = sq_busio_drv_send,
    .close = sq_busio_drv_close,
    .sweep = sq_busio_drv_sweep,
    .close_all = sq_busio_drv_close_all,
};
