/* proto/mqtt.c - MQTT 3.1.1 / 5.0 client packets (see proto/mqtt.h).
 *
 * The parser reads the fixed header first and rejects a packet as soon as its first byte says
 * it cannot come from a server (a client-only type, flags 5.0 section 2.1.3 forbids, QoS 3) or
 * its Remaining Length is malformed or over the cap, before any body byte arrives. The body is
 * read through a bounds-checked cursor over exactly Remaining Length bytes: a field that would
 * cross the packet's end is malformed, and so are bytes left over where a packet has a fixed
 * shape. Property blocks are checked for the packet they arrive in (5.0 section 2.2.2.2: an
 * identifier a packet may not carry, or a second copy of one that may appear once, is a
 * protocol error).
 *
 * The encoders compute the Remaining Length first, check the caller's buffer once, and then
 * write front to back; nothing is written past cap and nothing is allocated.
 */
#include "proto/mqtt.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "proto/text.h"

#define PARTIAL SQ_MQTT_PARTIAL

static int fail(struct sq_mqtt_packet *pkt, int rc, const char *why)
{
    pkt->why = why;
    return rc;
}

/* ---- varint (1.5.5) ---- */

size_t sq_mqtt_varint_len(uint32_t v)
{
    return v < 128 ? 1 : v < 16384 ? 2 : v < 2097152 ? 3 : 4;
}

size_t sq_mqtt_varint_put(uint8_t *out, uint32_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 127;
        v >>= 7;
        out[n++] = (uint8_t)(b | (v ? 128 : 0));
    } while (v && n < 4);
    return n;
}

/* Reads a varint at p[0, n): > 0 its length, 0 more bytes needed, -1 malformed (a fifth byte,
 * or a non-minimal encoding, whose last byte is 0 after a continuation). */
static int varint_get(const uint8_t *p, size_t n, uint32_t *out)
{
    uint32_t v = 0;
    for (size_t i = 0; i < 4; i++) {
        if (i >= n)
            return 0;
        v |= (uint32_t)(p[i] & 127) << (7 * i);
        if (!(p[i] & 128)) {
            if (i > 0 && p[i] == 0)
                return -1;
            *out = v;
            return (int)i + 1;
        }
    }
    return -1;
}

/* ---- a bounds-checked reader over one packet body ---- */

struct rd {
    const uint8_t *p;
    size_t n, i;
    const char *why;
};

static bool rd_u8(struct rd *r, uint8_t *v)
{
    if (r->n - r->i < 1)
        return false;
    *v = r->p[r->i++];
    return true;
}

static bool rd_u16(struct rd *r, uint16_t *v)
{
    if (r->n - r->i < 2)
        return false;
    *v = (uint16_t)(r->p[r->i] << 8 | r->p[r->i + 1]);
    r->i += 2;
    return true;
}

static bool rd_u32(struct rd *r, uint32_t *v)
{
    if (r->n - r->i < 4)
        return false;
    const uint8_t *p = r->p + r->i;
    *v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    r->i += 4;
    return true;
}

static bool rd_varint(struct rd *r, uint32_t *v)
{
    int k = varint_get(r->p + r->i, r->n - r->i, v);
    if (k <= 0)
        return false;
    r->i += (size_t)k;
    return true;
}

/* Binary Data (1.5.6): a 2-byte length and that many bytes. */
static bool rd_bin(struct rd *r, struct sq_str *s)
{
    uint16_t n;
    if (!rd_u16(r, &n) || r->n - r->i < n)
        return false;
    *s = (struct sq_str){(const char *)r->p + r->i, n};
    r->i += n;
    return true;
}

/* UTF-8 Encoded String (1.5.4): well-formed UTF-8 without U+0000. */
static bool rd_str(struct rd *r, struct sq_str *s)
{
    if (!rd_bin(r, s))
        return false;
    if (!sq_proto__utf8_ok(s->p, s->len, false)) {
        r->why = "MQTT: a string is not well-formed UTF-8 (or holds U+0000)";
        return false;
    }
    return true;
}

/* ---- properties (5.0 section 2.2.2) ---- */

enum ptype { P_BYTE, P_U16, P_U32, P_VARINT, P_STR, P_BIN, P_PAIR };

/* Type per property identifier; 0xff: not a property. */
static uint8_t prop_type(uint32_t id)
{
    switch (id) {
    case 0x01: /* Payload Format Indicator */
    case 0x17: /* Request Problem Information */
    case 0x19: /* Request Response Information */
    case 0x24: /* Maximum QoS */
    case 0x25: /* Retain Available */
    case 0x28: /* Wildcard Subscription Available */
    case 0x29: /* Subscription Identifier Available */
    case 0x2a: /* Shared Subscription Available */
        return P_BYTE;
    case 0x13: /* Server Keep Alive */
    case 0x21: /* Receive Maximum */
    case 0x22: /* Topic Alias Maximum */
    case 0x23: /* Topic Alias */
        return P_U16;
    case 0x02: /* Message Expiry Interval */
    case 0x11: /* Session Expiry Interval */
    case 0x18: /* Will Delay Interval */
    case 0x27: /* Maximum Packet Size */
        return P_U32;
    case 0x0b: /* Subscription Identifier */
        return P_VARINT;
    case 0x03: /* Content Type */
    case 0x08: /* Response Topic */
    case 0x12: /* Assigned Client Identifier */
    case 0x15: /* Authentication Method */
    case 0x1a: /* Response Information */
    case 0x1c: /* Server Reference */
    case 0x1f: /* Reason String */
        return P_STR;
    case 0x09: /* Correlation Data */
    case 0x16: /* Authentication Data */
        return P_BIN;
    case 0x26: /* User Property */
        return P_PAIR;
    default:
        return 0xff;
    }
}

#define B(id) (1ULL << (id))
/* Which properties each server packet may carry (5.0 chapter 3, each packet's 3.x.2.2). */
static uint64_t props_allowed(uint8_t type)
{
    const uint64_t common = B(0x1f) | B(0x26);
    switch (type) {
    case SQ_MQTT_CONNACK:
        return common | B(0x11) | B(0x21) | B(0x24) | B(0x25) | B(0x27) | B(0x12) | B(0x22) |
               B(0x28) | B(0x29) | B(0x2a) | B(0x13) | B(0x1a) | B(0x1c) | B(0x15) | B(0x16);
    case SQ_MQTT_PUBLISH:
        /* Reason String is not a PUBLISH property; Topic Alias is refused separately. */
        return B(0x26) | B(0x01) | B(0x02) | B(0x23) | B(0x08) | B(0x09) | B(0x0b) | B(0x03);
    case SQ_MQTT_DISCONNECT:
        return common | B(0x11) | B(0x1c);
    case SQ_MQTT_AUTH:
        return common | B(0x15) | B(0x16);
    default: /* PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK, UNSUBACK */
        return common;
    }
}

static bool bool_byte(uint8_t v)
{
    return v <= 1;
}

/* Reads a property block (its length varint included) for a packet of the given type. */
static bool rd_props(struct rd *r, uint8_t type, struct sq_mqtt_props *pr)
{
    uint32_t len;
    if (!rd_varint(r, &len) || r->n - r->i < len) {
        r->why = "MQTT: property length crosses the packet's end";
        return false;
    }
    struct rd b = {r->p + r->i, len, 0, NULL};
    pr->raw = (struct sq_str){(const char *)b.p, len};
    r->i += len;
    uint64_t allowed = props_allowed(type), seen = 0;
    while (b.i < b.n) {
        uint32_t id;
        if (!rd_varint(&b, &id) || id > 63 || prop_type(id) == 0xff || !(allowed & B(id))) {
            r->why = "MQTT: a property this packet may not carry";
            return false;
        }
        if ((seen & B(id)) && id != 0x26 && id != 0x0b) {
            r->why = "MQTT: a property appears twice";
            return false;
        }
        seen |= B(id);
        uint8_t u8 = 0;
        uint16_t u16 = 0;
        uint32_t u32 = 0;
        struct sq_str s = {0}, s2 = {0};
        bool ok;
        switch (prop_type(id)) {
        case P_BYTE:
            ok = rd_u8(&b, &u8) && bool_byte(u8);
            break;
        case P_U16:
            ok = rd_u16(&b, &u16);
            break;
        case P_U32:
            ok = rd_u32(&b, &u32);
            break;
        case P_VARINT:
            ok = rd_varint(&b, &u32) && u32 != 0;
            break;
        case P_STR:
            ok = rd_str(&b, &s);
            break;
        case P_BIN:
            ok = rd_bin(&b, &s);
            break;
        default: /* P_PAIR */
            ok = rd_str(&b, &s) && rd_str(&b, &s2);
            break;
        }
        if (!ok) {
            r->why = b.why ? b.why : "MQTT: malformed property value";
            return false;
        }
        switch (id) {
        case 0x01:
            pr->payload_format = u8;
            pr->has |= SQ_MQTT_HAS_PAYLOAD_FORMAT;
            break;
        case 0x02:
            pr->message_expiry = u32;
            pr->has |= SQ_MQTT_HAS_MESSAGE_EXPIRY;
            break;
        case 0x03:
            pr->content_type = s;
            break;
        case 0x08:
            pr->response_topic = s;
            break;
        case 0x09:
            pr->correlation_data = s;
            break;
        case 0x0b:
            pr->subscription_id = u32;
            pr->has |= SQ_MQTT_HAS_SUBSCRIPTION_ID;
            break;
        case 0x11:
            pr->session_expiry = u32;
            pr->has |= SQ_MQTT_HAS_SESSION_EXPIRY;
            break;
        case 0x12:
            pr->assigned_client_id = s;
            pr->has |= SQ_MQTT_HAS_ASSIGNED_CLIENT_ID;
            break;
        case 0x13:
            pr->server_keepalive = u16;
            pr->has |= SQ_MQTT_HAS_SERVER_KEEPALIVE;
            break;
        case 0x15:
            pr->auth_method = s;
            break;
        case 0x16:
            pr->auth_data = s;
            break;
        case 0x1a:
            pr->response_info = s;
            break;
        case 0x1c:
            pr->server_reference = s;
            break;
        case 0x1f:
            pr->reason_string = s;
            pr->has |= SQ_MQTT_HAS_REASON_STRING;
            break;
        case 0x21:
            if (u16 == 0) {
                r->why = "MQTT: Receive Maximum of 0";
                return false;
            }
            pr->receive_max = u16;
            pr->has |= SQ_MQTT_HAS_RECEIVE_MAX;
            break;
        case 0x22:
            pr->topic_alias_max = u16;
            pr->has |= SQ_MQTT_HAS_TOPIC_ALIAS_MAX;
            break;
        case 0x23:
            r->why = "MQTT: a Topic Alias the client never allowed";
            return false;
        case 0x24:
            pr->max_qos = u8;
            pr->has |= SQ_MQTT_HAS_MAX_QOS;
            break;
        case 0x25:
            pr->retain_available = u8;
            pr->has |= SQ_MQTT_HAS_RETAIN_AVAILABLE;
            break;
        case 0x26:
            pr->user_props++;
            break;
        case 0x27:
            if (u32 == 0) {
                r->why = "MQTT: Maximum Packet Size of 0";
                return false;
            }
            pr->max_packet_size = u32;
            pr->has |= SQ_MQTT_HAS_MAX_PACKET_SIZE;
            break;
        case 0x28:
            pr->wildcard_available = u8;
            break;
        case 0x29:
            pr->subid_available = u8;
            break;
        case 0x2a:
            pr->shared_available = u8;
            break;
        default:
            break;
        }
    }
    return true;
}

bool sq_mqtt_user_prop_next(struct sq_str raw, size_t *pos, struct sq_mqtt_user_prop *out)
{
    struct rd r = {(const uint8_t *)raw.p, raw.len, *pos, NULL};
    while (r.i < r.n) {
        uint32_t id;
        if (!rd_varint(&r, &id))
            break;
        uint8_t t = prop_type(id), u8;
        uint16_t u16;
        uint32_t u32;
        struct sq_str s;
        bool ok;
        switch (t) {
        case P_BYTE:
            ok = rd_u8(&r, &u8);
            break;
        case P_U16:
            ok = rd_u16(&r, &u16);
            break;
        case P_U32:
            ok = rd_u32(&r, &u32);
            break;
        case P_VARINT:
            ok = rd_varint(&r, &u32);
            break;
        case P_STR:
        case P_BIN:
            ok = rd_bin(&r, &s);
            break;
        case P_PAIR:
            if (!rd_bin(&r, &out->name) || !rd_bin(&r, &out->value))
                goto end;
            *pos = r.i;
            return true;
        default:
            ok = false;
        }
        if (!ok)
            break;
    }
end:
    *pos = raw.len;
    return false;
}

/* ---- reason codes a server may send, per packet (5.0 chapter 3) ---- */

static const uint8_t rc_connack[] = {0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86,
                                     0x87, 0x88, 0x89, 0x8a, 0x8c, 0x90, 0x95, 0x97,
                                     0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9f};
static const uint8_t rc_puback[] = {0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99};
static const uint8_t rc_pubrel[] = {0x00, 0x92};
static const uint8_t rc_suback[] = {0x00, 0x01, 0x02, 0x80, 0x83, 0x87,
                                    0x8f, 0x91, 0x97, 0x9e, 0xa1, 0xa2};
static const uint8_t rc_suback311[] = {0x00, 0x01, 0x02, 0x80};
static const uint8_t rc_unsuback[] = {0x00, 0x11, 0x80, 0x83, 0x87, 0x8f, 0x91};
static const uint8_t rc_disconnect[] = {0x00, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8b, 0x8d, 0x8e,
                                        0x8f, 0x90, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a,
                                        0x9b, 0x9c, 0x9d, 0x9e, 0x9f, 0xa0, 0xa1, 0xa2};
static const uint8_t rc_auth[] = {0x00, 0x18, 0x19};

#define RC_OK(set, v) (memchr((set), (v), sizeof(set)) != NULL)

static bool ack_rc_ok(uint8_t type, uint8_t rc)
{
    if (type == SQ_MQTT_PUBACK || type == SQ_MQTT_PUBREC)
        return RC_OK(rc_puback, rc);
    return RC_OK(rc_pubrel, rc);
}

/* ---- the parser ---- */

int sq_mqtt_parse(const uint8_t *buf, size_t len, const struct sq_mqtt_limits *lim,
                  struct sq_mqtt_packet *pkt, size_t *need)
{
    uint8_t ver = lim && lim->version ? lim->version : SQ_MQTT_V311;
    size_t max_packet = lim && lim->max_packet ? lim->max_packet : SQ_MQTT_DEFAULT_MAX_PACKET;
    bool v5 = ver == SQ_MQTT_V5;
    memset(pkt, 0, sizeof(*pkt));
    if (need)
        *need = 0;
    if (len == 0)
        return PARTIAL;

    uint8_t type = buf[0] >> 4, flags = buf[0] & 15;
    switch (type) {
    case SQ_MQTT_CONNACK:
    case SQ_MQTT_PUBACK:
    case SQ_MQTT_PUBREC:
    case SQ_MQTT_PUBCOMP:
    case SQ_MQTT_SUBACK:
    case SQ_MQTT_UNSUBACK:
    case SQ_MQTT_PINGRESP:
        if (flags != 0)
            return fail(pkt, -SQ_EPARSE, "MQTT: reserved flags set in the fixed header");
        break;
    case SQ_MQTT_PUBREL:
        if (flags != 2)
            return fail(pkt, -SQ_EPARSE, "MQTT: PUBREL flags are not 0010");
        break;
    case SQ_MQTT_DISCONNECT:
    case SQ_MQTT_AUTH:
        if (!v5)
            return fail(pkt, -SQ_EPARSE, "MQTT: a server sent DISCONNECT or AUTH on 3.1.1");
        if (flags != 0)
            return fail(pkt, -SQ_EPARSE, "MQTT: reserved flags set in the fixed header");
        break;
    case SQ_MQTT_PUBLISH:
        pkt->qos = (flags >> 1) & 3;
        pkt->dup = flags & 8;
        pkt->retain = flags & 1;
        if (pkt->qos == 3)
            return fail(pkt, -SQ_EPARSE, "MQTT: PUBLISH with QoS 3");
        if (pkt->dup && pkt->qos == 0)
            return fail(pkt, -SQ_EPARSE, "MQTT: PUBLISH with DUP set at QoS 0");
        break;
    default:
        return fail(pkt, -SQ_EPARSE, "MQTT: a packet type a server does not send");
    }

    uint32_t rem;
    int vl = varint_get(buf + 1, len - 1, &rem);
    if (vl < 0)
        return fail(pkt, -SQ_EPARSE, "MQTT: malformed Remaining Length");
    if (vl == 0)
        return PARTIAL;
    size_t total = 1 + (size_t)vl + rem;
    if (total > max_packet)
        return fail(pkt, -SQ_ETOOBIG, "MQTT: packet over the size cap");
    /* Fixed shapes, judged before the body arrives. */
    if (type == SQ_MQTT_PINGRESP && rem != 0)
        return fail(pkt, -SQ_EPARSE, "MQTT: PINGRESP with a body");
    if (!v5 &&
        (type == SQ_MQTT_CONNACK || (type >= SQ_MQTT_PUBACK && type <= SQ_MQTT_PUBCOMP) ||
         type == SQ_MQTT_UNSUBACK) &&
        rem != 2)
        return fail(pkt, -SQ_EPARSE, "MQTT: a 3.1.1 packet with a fixed size has another");
    if (len < total) {
        if (need)
            *need = total;
        return PARTIAL;
    }

    struct rd r = {buf + 1 + vl, rem, 0, NULL};
    pkt->type = type;
    pkt->flags = flags;
    pkt->len = (uint32_t)total;
    switch (type) {
    case SQ_MQTT_CONNACK: {
        uint8_t af, rc;
        if (!rd_u8(&r, &af) || !rd_u8(&r, &rc))
            return fail(pkt, -SQ_EPARSE, "MQTT: CONNACK too short");
        if (af & 0xfe)
            return fail(pkt, -SQ_EPARSE, "MQTT: CONNACK reserved flags set");
        pkt->session_present = af & 1;
        pkt->reason = rc;
        if (v5 ? !RC_OK(rc_connack, rc) : rc > 5)
            return fail(pkt, -SQ_EPARSE, "MQTT: CONNACK with an unknown reason code");
        if (rc != 0 && pkt->session_present)
            return fail(pkt, -SQ_EPARSE, "MQTT: CONNACK refusal with Session Present");
        if (v5 && !rd_props(&r, type, &pkt->props))
            return fail(pkt, -SQ_EPARSE, r.why);
        break;
    }
    case SQ_MQTT_PUBLISH: {
        if (!rd_str(&r, &pkt->topic))
            return fail(pkt, -SQ_EPARSE, r.why ? r.why : "MQTT: PUBLISH topic crosses its end");
        if (pkt->topic.len == 0)
            return fail(pkt, -SQ_EPARSE, "MQTT: PUBLISH with an empty topic");
        if (memchr(pkt->topic.p, '+', pkt->topic.len) || memchr(pkt->topic.p, '#', pkt->topic.len))
            return fail(pkt, -SQ_EPARSE, "MQTT: PUBLISH topic with a wildcard");
        if (pkt->qos) {
            if (!rd_u16(&r, &pkt->packet_id) || pkt->packet_id == 0)
                return fail(pkt, -SQ_EPARSE, "MQTT: PUBLISH without a packet id");
        }
        if (v5 && !rd_props(&r, type, &pkt->props))
            return fail(pkt, -SQ_EPARSE, r.why);
        pkt->payload = (struct sq_str){(const char *)r.p + r.i, r.n - r.i};
        r.i = r.n;
        break;
    }
    case SQ_MQTT_PUBACK:
    case SQ_MQTT_PUBREC:
    case SQ_MQTT_PUBREL:
    case SQ_MQTT_PUBCOMP:
        if (!rd_u16(&r, &pkt->packet_id))
            return fail(pkt, -SQ_EPARSE, "MQTT: acknowledgement too short");
        if (pkt->packet_id == 0)
            return fail(pkt, -SQ_EPARSE, "MQTT: acknowledgement of packet id 0");
        if (v5 && r.i < r.n) {
            rd_u8(&r, &pkt->reason);
            if (!ack_rc_ok(type, pkt->reason))
                return fail(pkt, -SQ_EPARSE, "MQTT: acknowledgement with an unknown reason");
            if (r.i < r.n && !rd_props(&r, type, &pkt->props))
                return fail(pkt, -SQ_EPARSE, r.why);
        }
        break;
    case SQ_MQTT_SUBACK:
    case SQ_MQTT_UNSUBACK: {
        if (!rd_u16(&r, &pkt->packet_id) || pkt->packet_id == 0)
            return fail(pkt, -SQ_EPARSE, "MQTT: SUBACK / UNSUBACK without a packet id");
        if (v5 && !rd_props(&r, type, &pkt->props))
            return fail(pkt, -SQ_EPARSE, r.why);
        if (type == SQ_MQTT_UNSUBACK && !v5)
            break;
        if (r.i == r.n)
            return fail(pkt, -SQ_EPARSE, "MQTT: SUBACK / UNSUBACK without reason codes");
        pkt->reasons = (struct sq_str){(const char *)r.p + r.i, r.n - r.i};
        for (; r.i < r.n; r.i++) {
            uint8_t c = r.p[r.i];
            bool ok = type == SQ_MQTT_UNSUBACK ? RC_OK(rc_unsuback, c)
                      : v5                     ? RC_OK(rc_suback, c)
                                               : RC_OK(rc_suback311, c);
            if (!ok)
                return fail(pkt, -SQ_EPARSE, "MQTT: SUBACK / UNSUBACK with an unknown code");
        }
        break;
    }
    case SQ_MQTT_PINGRESP:
        break;
    default: /* DISCONNECT, AUTH (v5) */
        if (r.i < r.n) {
            rd_u8(&r, &pkt->reason);
            bool ok = type == SQ_MQTT_AUTH ? RC_OK(rc_auth, pkt->reason)
                                           : RC_OK(rc_disconnect, pkt->reason);
            if (!ok)
                return fail(pkt, -SQ_EPARSE, "MQTT: DISCONNECT / AUTH with an unknown reason");
            if (r.i < r.n && !rd_props(&r, type, &pkt->props))
                return fail(pkt, -SQ_EPARSE, r.why);
        }
        break;
    }
    if (r.i != r.n)
        return fail(pkt, -SQ_EPARSE, "MQTT: bytes left over at the end of a packet");
    return (int)total;
}

/* ---- encoders ---- */

static inline uint8_t *put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

static inline uint8_t *put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return p + 4;
}

static inline uint8_t *put_bin(uint8_t *p, struct sq_str s)
{
    p = put_u16(p, (uint16_t)s.len);
    if (s.len)
        memcpy(p, s.p, s.len);
    return p + s.len;
}

static bool str_ok(struct sq_str s)
{
    return s.len <= 65535 && (s.len == 0 || sq_proto__utf8_ok(s.p, s.len, false));
}

static bool topic_ok(struct sq_str t)
{
    return t.len > 0 && str_ok(t) && !memchr(t.p, '+', t.len) && !memchr(t.p, '#', t.len);
}

static bool user_props_ok(const struct sq_mqtt_user_prop *u, size_t n, size_t *len)
{
    for (size_t i = 0; i < n; i++) {
        if (!str_ok(u[i].name) || !str_ok(u[i].value))
            return false;
        *len += 1 + 2 + u[i].name.len + 2 + u[i].value.len;
    }
    return true;
}

static uint8_t *put_user_props(uint8_t *p, const struct sq_mqtt_user_prop *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        *p++ = 0x26;
        p = put_bin(p, u[i].name);
        p = put_bin(p, u[i].value);
    }
    return p;
}

/* The fixed header for a packet whose Remaining Length is rem; checks the total against cap. */
static int fixed(uint8_t *buf, size_t cap, uint8_t first, size_t rem, uint8_t **body)
{
    if (rem > SQ_MQTT_MAX_REMAINING)
        return -EINVAL;
    size_t total = 1 + sq_mqtt_varint_len((uint32_t)rem) + rem;
    if (total > cap || total > INT_MAX)
        return -SQ_ETOOBIG;
    buf[0] = first;
    *body = buf + 1 + sq_mqtt_varint_put(buf + 1, (uint32_t)rem);
    return (int)total;
}

int sq_mqtt_encode_connect(uint8_t *buf, size_t cap, const struct sq_mqtt_connect *c)
{
    bool v5 = c->version == SQ_MQTT_V5;
    if (c->version != SQ_MQTT_V5 && c->version != SQ_MQTT_V311)
        return -EINVAL;
    struct sq_str user = {c->username, c->username ? strlen(c->username) : 0};
    bool has_pass = c->password.p != NULL;
    if (!str_ok(c->client_id) || !str_ok(user) || c->password.len > 65535)
        return -EINVAL;
    if (!v5 && (has_pass && !c->username))
        return -EINVAL; /* 3.1.1 section 3.1.2.9 */
    if (!v5 && c->client_id.len == 0 && !c->clean_start)
        return -EINVAL; /* 3.1.1 section 3.1.3.1 */
    if (!v5 && (c->session_expiry || c->receive_max || c->max_packet_size ||
                c->request_problem_info_off || c->n_user_props))
        return -EINVAL;
    size_t plen = 0;
    if (v5) {
        plen += c->session_expiry ? 5 : 0;
        plen += c->receive_max ? 3 : 0;
        plen += c->max_packet_size ? 5 : 0;
        plen += c->request_problem_info_off ? 2 : 0;
        if (!user_props_ok(c->user_props, c->n_user_props, &plen))
            return -EINVAL;
        if (plen > SQ_MQTT_MAX_REMAINING)
            return -EINVAL;
    }
    size_t rem = 6 + 1 + 1 + 2 + (v5 ? sq_mqtt_varint_len((uint32_t)plen) + plen : 0) + 2 +
                 c->client_id.len + (c->username ? 2 + user.len : 0) +
                 (has_pass ? 2 + c->password.len : 0);
    uint8_t *p;
    int total = fixed(buf, cap, SQ_MQTT_CONNECT << 4, rem, &p);
    if (total < 0)
        return total;
    memcpy(p, "\0\4MQTT", 6);
    p += 6;
    *p++ = c->version;
    *p++ = (uint8_t)((c->username ? 0x80 : 0) | (has_pass ? 0x40 : 0) | (c->clean_start ? 2 : 0));
    p = put_u16(p, c->keepalive);
    if (v5) {
        p += sq_mqtt_varint_put(p, (uint32_t)plen);
        if (c->session_expiry) {
            *p++ = 0x11;
            p = put_u32(p, c->session_expiry);
        }
        if (c->receive_max) {
            *p++ = 0x21;
            p = put_u16(p, c->receive_max);
        }
        if (c->max_packet_size) {
            *p++ = 0x27;
            p = put_u32(p, c->max_packet_size);
        }
        if (c->request_problem_info_off) {
            *p++ = 0x17;
            *p++ = 0;
        }
        p = put_user_props(p, c->user_props, c->n_user_props);
    }
    p = put_bin(p, c->client_id);
    if (c->username)
        p = put_bin(p, user);
    if (has_pass)
        p = put_bin(p, c->password);
    return total;
}

/* Length of a PUBLISH's v5 property block; false on a field the protocol cannot carry. */
static bool publish_props_len(const struct sq_mqtt_publish *m, size_t *len)
{
    size_t n = 0;
    if (m->payload_format >= 0) {
        if (m->payload_format > 1)
            return false;
        n += 2;
    }
    n += m->has_message_expiry ? 5 : 0;
    if (m->content_type.len) {
        if (!str_ok(m->content_type))
            return false;
        n += 3 + m->content_type.len;
    }
    if (m->response_topic.len) {
        if (!topic_ok(m->response_topic))
            return false;
        n += 3 + m->response_topic.len;
    }
    if (m->correlation_data.len) {
        if (m->correlation_data.len > 65535)
            return false;
        n += 3 + m->correlation_data.len;
    }
    if (!user_props_ok(m->user_props, m->n_user_props, &n))
        return false;
    *len = n;
    return n <= SQ_MQTT_MAX_REMAINING;
}

static int publish(uint8_t version, uint8_t *buf, size_t cap, const struct sq_mqtt_publish *m,
                   bool with_payload)
{
    bool v5 = version == SQ_MQTT_V5;
    if ((version != SQ_MQTT_V5 && version != SQ_MQTT_V311) || m->qos > 2 ||
        (m->qos && m->packet_id == 0) || (m->dup && m->qos == 0) || !topic_ok(m->topic))
        return -EINVAL;
    size_t plen = 0;
    if (v5 && !publish_props_len(m, &plen))
        return -EINVAL;
    if (!v5 && (m->has_message_expiry || m->payload_format >= 0 || m->content_type.len ||
                m->response_topic.len || m->correlation_data.len || m->n_user_props))
        return -EINVAL;
    size_t rem = 2 + m->topic.len + (m->qos ? 2 : 0) +
                 (v5 ? sq_mqtt_varint_len((uint32_t)plen) + plen : 0) + m->payload_len;
    if (rem > SQ_MQTT_MAX_REMAINING)
        return -EINVAL;
    size_t head = 1 + sq_mqtt_varint_len((uint32_t)rem) + rem - m->payload_len;
    if ((with_payload ? head + m->payload_len : head) > cap)
        return -SQ_ETOOBIG;
    uint8_t *p;
    int total = fixed(
        buf, with_payload ? cap : SIZE_MAX,
        (uint8_t)(SQ_MQTT_PUBLISH << 4 | (m->dup ? 8 : 0) | m->qos << 1 | (m->retain ? 1 : 0)), rem,
        &p);
    if (total < 0)
        return total;
    p = put_bin(p, m->topic);
    if (m->qos)
        p = put_u16(p, m->packet_id);
    if (v5) {
        p += sq_mqtt_varint_put(p, (uint32_t)plen);
        if (m->payload_format >= 0) {
            *p++ = 0x01;
            *p++ = (uint8_t)m->payload_format;
        }
        if (m->has_message_expiry) {
            *p++ = 0x02;
            p = put_u32(p, m->message_expiry);
        }
        if (m->content_type.len) {
            *p++ = 0x03;
            p = put_bin(p, m->content_type);
        }
        if (m->response_topic.len) {
            *p++ = 0x08;
            p = put_bin(p, m->response_topic);
        }
        if (m->correlation_data.len) {
            *p++ = 0x09;
            p = put_bin(p, m->correlation_data);
        }
        p = put_user_props(p, m->user_props, m->n_user_props);
    }
    if (!with_payload)
        return (int)head;
    if (m->payload_len)
        memcpy(p, m->payload, m->payload_len);
    return total;
}

int sq_mqtt_encode_publish_head(uint8_t version, uint8_t *buf, size_t cap,
                                const struct sq_mqtt_publish *p)
{
    return publish(version, buf, cap, p, false);
}

int sq_mqtt_encode_publish(uint8_t version, uint8_t *buf, size_t cap,
                           const struct sq_mqtt_publish *p)
{
    return publish(version, buf, cap, p, true);
}

size_t sq_mqtt_publish_id_offset(const uint8_t *head, const struct sq_mqtt_publish *p)
{
    size_t vl = 1;
    while (vl < 4 && (head[vl] & 128))
        vl++;
    return 1 + vl + 2 + p->topic.len;
}

int sq_mqtt_encode_ack(uint8_t version, uint8_t *buf, size_t cap, uint8_t type, uint16_t packet_id,
                       uint8_t reason)
{
    if (type < SQ_MQTT_PUBACK || type > SQ_MQTT_PUBCOMP || packet_id == 0)
        return -EINVAL;
    if (version != SQ_MQTT_V5 && (version != SQ_MQTT_V311 || reason != 0))
        return -EINVAL;
    size_t n = reason ? 5 : 4;
    if (n > cap)
        return -SQ_ETOOBIG;
    buf[0] = (uint8_t)(type << 4 | (type == SQ_MQTT_PUBREL ? 2 : 0));
    buf[1] = (uint8_t)(n - 2);
    put_u16(buf + 2, packet_id);
    if (reason)
        buf[4] = reason;
    return (int)n;
}

int sq_mqtt_encode_subscribe(uint8_t version, uint8_t *buf, size_t cap, uint16_t packet_id,
                             const struct sq_mqtt_subscription *s, size_t n,
                             uint32_t subscription_id)
{
    bool v5 = version == SQ_MQTT_V5;
    if ((!v5 && version != SQ_MQTT_V311) || packet_id == 0 || n == 0 ||
        subscription_id > SQ_MQTT_MAX_REMAINING || (!v5 && subscription_id))
        return -EINVAL;
    size_t plen = subscription_id ? 1 + sq_mqtt_varint_len(subscription_id) : 0;
    size_t rem = 2 + (v5 ? 1 + plen : 0);
    for (size_t i = 0; i < n; i++) {
        if (s[i].filter.len == 0 || !str_ok(s[i].filter) || s[i].qos > 2 ||
            s[i].retain_handling > 2)
            return -EINVAL;
        if (!v5 && (s[i].no_local || s[i].retain_as_published || s[i].retain_handling))
            return -EINVAL;
        rem += 2 + s[i].filter.len + 1;
    }
    uint8_t *p;
    int total = fixed(buf, cap, SQ_MQTT_SUBSCRIBE << 4 | 2, rem, &p);
    if (total < 0)
        return total;
    p = put_u16(p, packet_id);
    if (v5) {
        *p++ = (uint8_t)plen;
        if (subscription_id) {
            *p++ = 0x0b;
            p += sq_mqtt_varint_put(p, subscription_id);
        }
    }
    for (size_t i = 0; i < n; i++) {
        p = put_bin(p, s[i].filter);
        *p++ = (uint8_t)(s[i].qos | (s[i].no_local ? 4 : 0) | (s[i].retain_as_published ? 8 : 0) |
                         s[i].retain_handling << 4);
    }
    return total;
}

int sq_mqtt_encode_unsubscribe(uint8_t version, uint8_t *buf, size_t cap, uint16_t packet_id,
                               const struct sq_str *filters, size_t n)
{
    bool v5 = version == SQ_MQTT_V5;
    if ((!v5 && version != SQ_MQTT_V311) || packet_id == 0 || n == 0)
        return -EINVAL;
    size_t rem = 2 + (v5 ? 1 : 0);
    for (size_t i = 0; i < n; i++) {
        if (filters[i].len == 0 || !str_ok(filters[i]))
            return -EINVAL;
        rem += 2 + filters[i].len;
    }
    uint8_t *p;
    int total = fixed(buf, cap, SQ_MQTT_UNSUBSCRIBE << 4 | 2, rem, &p);
    if (total < 0)
        return total;
    p = put_u16(p, packet_id);
    if (v5)
        *p++ = 0;
    for (size_t i = 0; i < n; i++)
        p = put_bin(p, filters[i]);
    return total;
}

int sq_mqtt_encode_pingreq(uint8_t *buf, size_t cap)
{
    if (cap < 2)
        return -SQ_ETOOBIG;
    buf[0] = SQ_MQTT_PINGREQ << 4;
    buf[1] = 0;
    return 2;
}

int sq_mqtt_encode_disconnect(uint8_t version, uint8_t *buf, size_t cap, uint8_t reason)
{
    if (version != SQ_MQTT_V5 && (version != SQ_MQTT_V311 || reason != 0))
        return -EINVAL;
    size_t n = reason ? 3 : 2;
    if (n > cap)
        return -SQ_ETOOBIG;
    buf[0] = SQ_MQTT_DISCONNECT << 4;
    buf[1] = (uint8_t)(n - 2);
    if (reason)
        buf[2] = reason;
    return (int)n;
}

const char *sq_mqtt_type_name(unsigned type)
{
    static const char *const names[16] = {"?",         "CONNECT",  "CONNACK",     "PUBLISH",
                                          "PUBACK",    "PUBREC",   "PUBREL",      "PUBCOMP",
                                          "SUBSCRIBE", "SUBACK",   "UNSUBSCRIBE", "UNSUBACK",
                                          "PINGREQ",   "PINGRESP", "DISCONNECT",  "AUTH"};
    return type < 16 ? names[type] : "?";
}
