/* engine/mqttdrv.c - MQTT 3.1.1 / 5.0 load: QoS 0, 1 and 2 publish, and the round trip (see
 * busconf.h). The packets are proto/mqtt.h's; sockets, batching, the VUs' states and generations
 * and the rendering of a message are busio.c's; this file encodes it.
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
#include "engine/busconf.h"
#include "engine/busio.h"
#include "engine/driver.h"
#include "engine/worker.h"
#include "proto/mqtt.h"
#include "stats/hist.h"

#define SUB_ID 65535

struct mqttconn {
    struct sq_engine__busconn b; /* first: busio.c allocates and casts */
    struct sq_mqtt_limits lim;
    uint8_t stage;                /* 0: CONNECT out, 1: SUBSCRIBE out */
    int64_t connect_ns;           /* when the CONNECT was queued (the CONNACK's latency) */
    uint32_t g;                   /* generations per slot in the packet-id space: 65534 / n */
    struct sq_engine__seqmap map; /* round trip: stamp sequence number -> slot */
};

static const char pingreq[2] = {(char)(SQ_MQTT_PINGREQ << 4), 0};

/* The VUs' state (busio.c's: generation, iteration, the round trip's stamp). */
static struct sq_engine__busvu *vus_of(struct sq_engine__worker *w)
{
    return sq_engine__busdrv_of(w)->vus;
}

static struct mqttconn *mc_of(struct sq_engine__busconn *b)
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
    struct sq_engine__busconn *b = &mc->b;
    if (id == 0 || id == SUB_ID || b->m.n == 0)
        return NULL;
    uint32_t slot = (uint32_t)(id - 1) % b->m.n, g = (uint32_t)(id - 1) / b->m.n;
    if (g >= mc->g)
        return NULL;
    uint32_t local = b->m.first + slot;
    struct sq_engine__conn *c = &b->m.w->conns[local];
    if (c->state != CONN_ACTIVE || vus_of(b->m.w)[local].gen % mc->g != g)
        return NULL;
    return c;
}

static int queue_ack(struct sq_engine__busconn *b, uint8_t type, uint16_t id)
{
    uint8_t p[8];
    int n = sq_mqtt_encode_ack(SQ_MQTT_V311, p, sizeof(p), type, id, 0);
    return n < 0 ? n : sq_engine__bus_queue(b, p, (size_t)n);
}

int sq_engine__bus_mqtt_unit(struct sq_engine__busconn *b, const struct sq_mqtt_limits *lim,
                             const char *p, size_t n, struct sq_mqtt_packet *pk, size_t *need)
{
    int rc = sq_mqtt_parse((const uint8_t *)p, n, lim, pk, need);
    if (rc <= 0)
        return rc;
    int ack = -1;
    if (pk->type == SQ_MQTT_PUBREC && pk->reason < 0x80)
        ack = SQ_MQTT_PUBREL; /* the broker holds the message: release it, whoever it was for */
    else if (pk->type == SQ_MQTT_PUBLISH && pk->qos)
        ack = pk->qos == 1 ? SQ_MQTT_PUBACK : SQ_MQTT_PUBREC;
    else if (pk->type == SQ_MQTT_PUBREL)
        ack = SQ_MQTT_PUBCOMP;
    if (ack >= 0 && queue_ack(b, (uint8_t)ack, pk->packet_id) < 0)
        return -ENOMEM;
    return rc;
}

/* ---- the greeting ---- */

static int mqtt_hello(struct sq_engine__busconn *b)
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
    uint8_t *r = (uint8_t *)sq_engine__bus_room(b, 1024);
    if (!r)
        return -ENOMEM;
    int n = sq_mqtt_encode_connect(r, 1024, &cn);
    if (n < 0)
        return n;
    mc->stage = 0;
    mc->connect_ns = sq_now_ns();
    sq_engine__bus_commit(b, (size_t)n);
    return 0;
}

static void refused(struct sq_engine__busconn *b, const char *what, uint8_t reason)
{
    char m[96];
    int n = snprintf(m, sizeof(m), "mqtt: %s (reason 0x%02x)", what, reason);
    sq_engine__bus_note(b, m, n > 0 ? (size_t)n : 0, true);
    sq_engine__bus_fail(b, SQ_ERRK_SERVER_ERROR);
}

/* The result's slot of a CONNACK refusal (result.h: refused): the 3.1.1 return code, or the
 * 5.0 reason code that says the same. */
static unsigned refusal_slot(uint8_t reason)
{
    switch (reason) {
    case 1:
    case 0x84: /* unsupported protocol version */
        return 1;
    case 2:
    case 0x85: /* client identifier not valid */
        return 2;
    case 3:
    case 0x88: /* server unavailable */
        return 3;
    case 4:
    case 0x86: /* bad user name or password */
        return 4;
    case 5:
    case 0x87: /* not authorized */
        return 5;
    default:
        return 0;
    }
}

static int on_connack(struct mqttconn *mc, const struct sq_mqtt_packet *pk)
{
    struct sq_engine__busconn *b = &mc->b;
    const struct sq_bus_config *bus = b->m.w->cfg->bus;
    if (sq_engine__bus_is_open(b) || mc->stage != 0)
        return -SQ_EPARSE;
    struct sq_engine__worker *w = b->m.w;
    if (pk->reason != 0) {
        w->c.bus.refused[refusal_slot(pk->reason)]++;
        refused(b, "CONNACK refused the connection", pk->reason);
        return 0;
    }
    w->c.bus.connacks++;
    if (w->connack || sq_latency_hist_new(&w->connack) == 0) {
        int64_t now = b->now ? b->now : sq_now_ns();
        sq_hist_record(w->connack, (now - mc->connect_ns) / SQ_NS_PER_US);
    }
    b->m.usable = b->m.n;
    if (bus->mqtt_version == SQ_MQTT_V5 && (pk->props.has & SQ_MQTT_HAS_RECEIVE_MAX) &&
        bus->qos > 0 && pk->props.receive_max < b->m.n)
        b->m.usable = pk->props.receive_max;
    if (bus->mode != SQ_BUS_ROUND_TRIP) {
        sq_engine__bus_open(b);
        return 0;
    }
    struct sq_mqtt_subscription s = {
        .filter = {bus->subject, bus->subject_len},
        .qos = bus->qos,
    };
    uint8_t *r = (uint8_t *)sq_engine__bus_room(b, bus->subject_len + 32);
    if (!r)
        return -ENOMEM;
    int n = sq_mqtt_encode_subscribe(bus->mqtt_version, r, bus->subject_len + 32, SUB_ID, &s, 1, 0);
    if (n < 0)
        return n;
    mc->stage = 1;
    sq_engine__bus_commit(b, (size_t)n);
    return 0;
}

/* ---- completions ---- */

/* A message the broker delivers on the round trip's subscription. */
static void on_delivery(struct mqttconn *mc, const struct sq_mqtt_packet *pk)
{
    struct sq_engine__busconn *b = &mc->b;
    struct sq_engine__worker *w = b->m.w;
    struct sq_engine__busvu *vus = vus_of(w);
    struct sq_stamp st;
    bool found = sq_stamp_find(pk->payload.p, pk->payload.len, &st, NULL, NULL);
    if (!found && w->cfg->bus->mqtt_version == SQ_MQTT_V5 && pk->props.user_props) {
        size_t pos = 0;
        struct sq_mqtt_user_prop up;
        while (!found && sq_mqtt_user_prop_next(pk->props.raw, &pos, &up))
            found = sq_stamp_find(up.value.p, up.value.len, &st, NULL, NULL);
    }
    int64_t slot;
    uint64_t stream = w->run->run_id + w->windex; /* this worker's stamps */
    if (!found || st.run != stream || !sq_engine__seqmap_get(&mc->map, st.seq, &slot) ||
        slot >= b->m.n) {
        w->c.bus.foreign++;
        return;
    }
    uint32_t local = b->m.first + (uint32_t)slot;
    struct sq_engine__conn *c = &w->conns[local];
    if (c->state != CONN_ACTIVE || vus[local].seq != st.seq) {
        w->c.bus.late++;
        return;
    }
    sq_engine__seqmap_del(&mc->map, st.seq);
    vus[local].seq = UINT64_MAX;
    w->c.bus.delivered++;
    sq_engine__bus_complete(b, c, pk->payload.len);
}

static int mqtt_unit(struct sq_engine__busconn *b, const char *p, size_t n, size_t *need)
{
    struct mqttconn *mc = mc_of(b);
    struct sq_engine__worker *w = b->m.w;
    const struct sq_bus_config *bus = w->cfg->bus;
    struct sq_mqtt_packet pk;
    int rc = sq_engine__bus_mqtt_unit(b, &mc->lim, p, n, &pk, need);
    if (rc <= 0)
        return rc;
    struct sq_engine__conn *c;
    switch (pk.type) {
    case SQ_MQTT_CONNACK:
        if (on_connack(mc, &pk) < 0)
            return -SQ_EPARSE;
        break;
    case SQ_MQTT_SUBACK:
        if (pk.packet_id != SUB_ID || sq_engine__bus_is_open(b) || mc->stage != 1)
            break;
        if (pk.reasons.len == 0 || (uint8_t)pk.reasons.p[0] >= 0x80) {
            refused(b, "SUBACK refused the subscription",
                    pk.reasons.len ? (uint8_t)pk.reasons.p[0] : 0x80);
            break;
        }
        sq_engine__bus_open(b);
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
            sq_engine__bus_vu_fail(c, SQ_ERRK_ACK);
        else if (bus->mode != SQ_BUS_ROUND_TRIP)
            sq_engine__bus_complete(b, c, 0);
        break;
    case SQ_MQTT_PUBREC: /* released (sq_engine__bus_mqtt_unit) unless it refuses */
        c = vu_for_id(mc, pk.packet_id);
        if (c && pk.reason >= 0x80)
            sq_engine__bus_vu_fail(c, SQ_ERRK_ACK);
        break;
    case SQ_MQTT_PUBLISH:
        if (sq_engine__bus_is_open(b) && bus->mode == SQ_BUS_ROUND_TRIP)
            on_delivery(mc, &pk);
        else
            w->c.bus.foreign++;
        break;
    case SQ_MQTT_PINGRESP:
        w->c.bus.pingresps++;
        sq_engine__bus_batch_complete(b);
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

/* A message other than the static PUBLISH: its payload and user properties rendered, then
 * encoded straight into the connection's buffer. Kept out of mqtt_send, so that the static path
 * does not pay for this one's stack frame. */
static __attribute__((noinline)) int mqtt_send_rendered(struct sq_engine__busdrv *d,
                                                        struct sq_engine__busconn *b,
                                                        struct sq_engine__conn *c, uint16_t id,
                                                        bool batch)
{
    const struct sq_bus_config *bus = d->bus;
    struct mqttconn *mc = mc_of(b);
    struct sq_engine__busvu *v = &d->vus[c->local];
    uint32_t slot = c->local - b->m.first;
    size_t nh = bus->mqtt_version == SQ_MQTT_V5 ? bus->nheaders : 0;
    struct sq_engine__busmsg m;
    if (sq_engine__bus_render(d, c, nh, &m) != 0)
        return SQ_ERRK_WRITE;
    if (bus->stamped && bus->mode == SQ_BUS_ROUND_TRIP) {
        if (v->seq != UINT64_MAX)
            sq_engine__seqmap_del(&mc->map, v->seq);
        v->seq = m.seq;
        if (!sq_engine__seqmap_put(&mc->map, m.seq, slot)) /* never: 4 slots a VU */
            return SQ_ERRK_WRITE;
    }
    struct sq_mqtt_user_prop ups[SQ_BUS_MAX_HEADERS];
    size_t plen_props = 0;
    for (size_t i = 0; i < nh; i++) {
        ups[i].name = (struct sq_str){bus->headers[i].name, strlen(bus->headers[i].name)};
        ups[i].value = m.vals[i];
        plen_props += 5 + ups[i].name.len + ups[i].value.len;
    }
    struct sq_mqtt_publish pub = {
        .topic = {bus->subject, bus->subject_len},
        .qos = bus->qos,
        .retain = bus->retain,
        .packet_id = id,
        .payload = m.payload,
        .payload_len = m.len,
        .payload_format = -1,
        .user_props = nh ? ups : NULL,
        .n_user_props = nh,
    };
    size_t cap = 16 + bus->subject_len + plen_props + m.len;
    uint8_t *r = (uint8_t *)sq_engine__bus_room(b, cap);
    if (!r)
        return SQ_ERRK_WRITE;
    int k = sq_mqtt_encode_publish(bus->mqtt_version, r, cap, &pub);
    if (k < 0)
        return SQ_ERRK_WRITE;
    return sq_engine__bus_sent(d, b, c->local, (size_t)k, batch);
}

static int mqtt_send(struct sq_engine__busdrv *d, struct sq_engine__busconn *b,
                     struct sq_engine__conn *c)
{
    const struct sq_bus_config *bus = d->bus;
    uint32_t slot = c->local - b->m.first;
    uint16_t id = bus->qos ? packet_id(mc_of(b), slot, d->vus[c->local].gen) : 0;
    bool batch = bus->qos == 0 && bus->mode != SQ_BUS_ROUND_TRIP; /* the PINGRESP ends it */
    if (d->msg) /* the static PUBLISH: one copy, its packet id patched in */
        return sq_engine__bus_send_static(d, b, c->local, id, batch);
    return mqtt_send_rendered(d, b, c, id, batch);
}

static void mqtt_release(struct sq_engine__busconn *b, struct sq_engine__conn *c)
{
    struct sq_engine__busvu *v = &vus_of(c->w)[c->local];
    if (v->seq != UINT64_MAX) {
        sq_engine__seqmap_del(&mc_of(b)->map, v->seq);
        v->seq = UINT64_MAX;
    }
}

/* Keep-alive: a PINGREQ once half the keep-alive has passed without a write. */
static void mqtt_tick(struct sq_engine__busconn *b, int64_t now)
{
    const struct sq_bus_config *bus = b->m.w->cfg->bus;
    if (!bus->keepalive_s || now - b->wrote_ns < (int64_t)bus->keepalive_s * SQ_NS_PER_S / 2)
        return;
    if (sq_engine__bus_keepalive(b) < 0)
        sq_engine__bus_fail(b, SQ_ERRK_WRITE);
    else
        b->m.w->c.bus.keepalive_pings++;
}

static void mqtt_reset(struct sq_engine__busconn *b)
{
    struct mqttconn *mc = mc_of(b);
    struct sq_engine__busvu *vus = vus_of(b->m.w);
    mc->stage = 0;
    b->m.usable = b->m.n;
    if (mc->map.key) {
        sq_engine__seqmap_clear(&mc->map);
        for (uint32_t i = b->m.first; i < b->m.first + b->m.n; i++)
            vus[i].seq = UINT64_MAX;
    }
}

static int mqtt_init(struct sq_engine__worker *w)
{
    struct sq_engine__busdrv *d = sq_engine__busdrv_of(w);
    const struct sq_bus_config *bus = d->bus;
    if (d->payload && bus->nheaders == 0 && bus->mode != SQ_BUS_ROUND_TRIP) {
        /* the static PUBLISH (QoS 0: whole; QoS > 0: whole, its packet id patched per send) */
        struct sq_mqtt_publish pub = {
            .topic = {bus->subject, bus->subject_len},
            .qos = bus->qos,
            .retain = bus->retain,
            .packet_id = bus->qos ? 1 : 0,
            .payload = d->payload,
            .payload_len = d->payload_len,
            .payload_format = -1,
        };
        size_t cap = 16 + bus->subject_len + d->payload_len;
        uint8_t *msg = malloc(cap);
        if (!msg)
            return -ENOMEM;
        d->msg = (char *)msg;
        int k = sq_mqtt_encode_publish(bus->mqtt_version, msg, cap, &pub);
        if (k < 0)
            return k;
        d->msg_len = (size_t)k;
        d->id_off = bus->qos ? sq_mqtt_publish_id_offset(msg, &pub) : 0;
    }
    for (uint32_t k = 0; k < d->nconn; k++) {
        struct mqttconn *mc = mc_of(sq_engine__bus_at(d, k));
        mc->b.ping = pingreq;
        mc->b.ping_len = sizeof(pingreq);
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
    struct sq_engine__busdrv *d = sq_engine__busdrv_of(w);
    for (uint32_t k = 0; d->conns && k < d->nconn; k++)
        sq_engine__seqmap_dispose(&mc_of(sq_engine__bus_at(d, k))->map);
}

const struct sq_engine__bus_ops sq_engine__mqtt_ops = {
    .conn_size = sizeof(struct mqttconn),
    .hello = mqtt_hello,
    .unit = mqtt_unit,
    .send = mqtt_send,
    .release = mqtt_release,
    .reset = mqtt_reset,
    .tick = mqtt_tick,
    .init = mqtt_init,
    .dispose = mqtt_dispose,
};
