/* proto/mqtt.h - MQTT 3.1.1 and 5.0 client packets: encoders for what a client sends, a parser
 * for what a server sends.
 *
 * Parser: stateless, allocation-free, picohttpparser-shaped. sq_mqtt_parse() looks at the start
 * of buf and returns the length of one complete packet (> 0) described in *pkt as spans into
 * buf, SQ_MQTT_PARTIAL (0) while buf is a valid but incomplete prefix (*need then says the
 * packet's total length once its fixed header is complete, else 0), or -SQ_EPARSE /
 * -SQ_ETOOBIG with pkt->why naming the refusal. Every packet is checked against the version it
 * arrives on (flags, lengths, reason codes, properties, UTF-8 strings) and against the caps: the
 * Remaining Length varint takes at most 4 bytes and the packet at most max_packet bytes (which a
 * v5 CONNECT announces as Maximum Packet Size, so a conforming server never sends more).
 *
 * Encoders write into a caller buffer and return the bytes written, -SQ_ETOOBIG when it is too
 * small, or -EINVAL for what the protocol cannot carry (QoS 3, packet id 0 with QoS > 0, a string
 * over 65,535 bytes, a v5-only field on 3.1.1...). They never allocate.
 *
 * References: MQTT Version 3.1.1 (OASIS, 2014) and MQTT Version 5.0 (OASIS, 2019); section
 * numbers in mqtt.c refer to the 5.0 text unless they say otherwise.
 */
#ifndef SQ_PROTO_MQTT_H
#define SQ_PROTO_MQTT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define SQ_MQTT_PARTIAL 0

#define SQ_MQTT_V311 4 /* the protocol level byte of CONNECT */
#define SQ_MQTT_V5   5

/* The largest Remaining Length a 4-byte varint holds, and the default packet cap. */
#define SQ_MQTT_MAX_REMAINING      268435455u
#define SQ_MQTT_DEFAULT_MAX_PACKET (1024u * 1024u)

enum sq_mqtt_type {
    SQ_MQTT_CONNECT = 1,
    SQ_MQTT_CONNACK = 2,
    SQ_MQTT_PUBLISH = 3,
    SQ_MQTT_PUBACK = 4,
    SQ_MQTT_PUBREC = 5,
    SQ_MQTT_PUBREL = 6,
    SQ_MQTT_PUBCOMP = 7,
    SQ_MQTT_SUBSCRIBE = 8,
    SQ_MQTT_SUBACK = 9,
    SQ_MQTT_UNSUBSCRIBE = 10,
    SQ_MQTT_UNSUBACK = 11,
    SQ_MQTT_PINGREQ = 12,
    SQ_MQTT_PINGRESP = 13,
    SQ_MQTT_DISCONNECT = 14,
    SQ_MQTT_AUTH = 15,
};

/* A few reason codes by name (5.0 section 2.4); any code a packet may carry is accepted. */
enum {
    SQ_MQTT_RC_SUCCESS = 0x00,
    SQ_MQTT_RC_GRANTED_QOS1 = 0x01,
    SQ_MQTT_RC_GRANTED_QOS2 = 0x02,
    SQ_MQTT_RC_NO_MATCHING_SUBSCRIBERS = 0x10,
    SQ_MQTT_RC_UNSPECIFIED = 0x80,
    SQ_MQTT_RC_NOT_AUTHORIZED = 0x87,
    SQ_MQTT_RC_SERVER_BUSY = 0x89,
    SQ_MQTT_RC_PACKET_ID_IN_USE = 0x91,
    SQ_MQTT_RC_PACKET_ID_NOT_FOUND = 0x92,
    SQ_MQTT_RC_RECEIVE_MAX_EXCEEDED = 0x93,
    SQ_MQTT_RC_PACKET_TOO_LARGE = 0x95,
    SQ_MQTT_RC_QUOTA_EXCEEDED = 0x97,
};

/* A name/value pair: a v5 User Property. */
struct sq_mqtt_user_prop {
    struct sq_str name, value;
};

/* What the parser reads out of a v5 property block. `has` is a bit set of SQ_MQTT_HAS_*; a
 * value not present is 0 / empty. User properties stay in the block: walk them with
 * sq_mqtt_user_prop_next(). */
struct sq_mqtt_props {
    uint32_t has;
    uint32_t message_expiry, session_expiry, max_packet_size, subscription_id;
    uint16_t receive_max, topic_alias_max, server_keepalive;
    uint8_t payload_format, max_qos, retain_available, wildcard_available, subid_available,
        shared_available;
    struct sq_str content_type, response_topic, correlation_data, assigned_client_id, reason_string,
        response_info, server_reference, auth_method, auth_data;
    uint32_t user_props; /* how many User Property pairs */
    struct sq_str raw;   /* the whole block, length prefix excluded */
};

enum {
    SQ_MQTT_HAS_MESSAGE_EXPIRY = 1u << 0,
    SQ_MQTT_HAS_SESSION_EXPIRY = 1u << 1,
    SQ_MQTT_HAS_MAX_PACKET_SIZE = 1u << 2,
    SQ_MQTT_HAS_RECEIVE_MAX = 1u << 3,
    SQ_MQTT_HAS_TOPIC_ALIAS_MAX = 1u << 4,
    SQ_MQTT_HAS_SERVER_KEEPALIVE = 1u << 5,
    SQ_MQTT_HAS_PAYLOAD_FORMAT = 1u << 6,
    SQ_MQTT_HAS_MAX_QOS = 1u << 7,
    SQ_MQTT_HAS_RETAIN_AVAILABLE = 1u << 8,
    SQ_MQTT_HAS_SUBSCRIPTION_ID = 1u << 9,
    SQ_MQTT_HAS_ASSIGNED_CLIENT_ID = 1u << 10,
    SQ_MQTT_HAS_REASON_STRING = 1u << 11,
};

/* One server packet. Spans point into the parsed buffer. Set on success; on error only why. */
struct sq_mqtt_packet {
    uint8_t type;  /* enum sq_mqtt_type */
    uint8_t flags; /* the low nibble of the first byte */
    uint32_t len;  /* the whole packet: fixed header + Remaining Length */
    /* PUBLISH */
    uint8_t qos;
    bool retain, dup;
    struct sq_str topic, payload;
    /* PUBLISH (QoS > 0), PUB*, SUBACK, UNSUBACK */
    uint16_t packet_id;
    /* CONNACK: session_present and the return / reason code. PUB*, DISCONNECT, AUTH: reason
     * (0 when a v5 packet leaves it out). */
    bool session_present;
    uint8_t reason;
    /* SUBACK: one return / reason code per filter; v5 UNSUBACK likewise. */
    struct sq_str reasons;
    /* v5: the packet's properties. */
    struct sq_mqtt_props props;
    const char *why; /* on error */
};

struct sq_mqtt_limits {
    uint8_t version;     /* SQ_MQTT_V311 or SQ_MQTT_V5 */
    uint32_t max_packet; /* 0: SQ_MQTT_DEFAULT_MAX_PACKET; at most 1 + 4 + MAX_REMAINING */
};

/* Parses one server-to-client packet at the start of buf[0, len) (see the top of the file).
 * need may be NULL. A packet only a client sends (CONNECT, SUBSCRIBE, ...), a DISCONNECT or
 * AUTH on 3.1.1, or a PUBLISH that uses a Topic Alias (a client that announced no Topic Alias
 * Maximum never gets one) is -SQ_EPARSE. */
SQ_MUST_CHECK int sq_mqtt_parse(const uint8_t *buf, size_t len, const struct sq_mqtt_limits *lim,
                                struct sq_mqtt_packet *pkt, size_t *need);

/* Walks the User Properties of a parsed property block (props.raw). *pos starts at 0. */
bool sq_mqtt_user_prop_next(struct sq_str raw, size_t *pos, struct sq_mqtt_user_prop *out);

/* ---- encoders ---- */

struct sq_mqtt_connect {
    uint8_t version; /* SQ_MQTT_V311 or SQ_MQTT_V5 */
    bool clean_start;
    uint16_t keepalive;      /* seconds; 0 turns keep-alive off */
    struct sq_str client_id; /* may be empty (the server assigns one; 3.1.1 needs clean_start) */
    const char *username;    /* NULL: none */
    struct sq_str password;  /* sent when password.p != NULL (binary allowed) */
    /* v5 only (0 / NULL: left out) */
    uint32_t session_expiry;
    uint16_t receive_max;
    uint32_t max_packet_size;
    bool request_problem_info_off; /* send Request Problem Information = 0 */
    const struct sq_mqtt_user_prop *user_props;
    size_t n_user_props;
};

struct sq_mqtt_publish {
    struct sq_str topic;
    uint8_t qos; /* 0, 1, 2 */
    bool retain, dup;
    uint16_t packet_id; /* QoS > 0: 1..65535 */
    const void *payload;
    size_t payload_len;
    /* v5 only (0 / empty: left out) */
    bool has_message_expiry;
    uint32_t message_expiry;
    int payload_format; /* -1: left out; 0 bytes, 1 UTF-8 */
    struct sq_str content_type, response_topic, correlation_data;
    const struct sq_mqtt_user_prop *user_props;
    size_t n_user_props;
};

struct sq_mqtt_subscription {
    struct sq_str filter;
    uint8_t qos;
    /* v5 only */
    bool no_local, retain_as_published;
    uint8_t retain_handling; /* 0..2 */
};

SQ_MUST_CHECK int sq_mqtt_encode_connect(uint8_t *buf, size_t cap, const struct sq_mqtt_connect *c);

/* The PUBLISH packet up to, not including, its payload: for a caller that sends the payload from
 * elsewhere (an iovec) or renders a static head once (the packet id, when QoS > 0, sits at
 * offset sq_mqtt_publish_id_offset()). */
SQ_MUST_CHECK int sq_mqtt_encode_publish_head(uint8_t version, uint8_t *buf, size_t cap,
                                              const struct sq_mqtt_publish *p);
/* A whole PUBLISH. */
SQ_MUST_CHECK int sq_mqtt_encode_publish(uint8_t version, uint8_t *buf, size_t cap,
                                         const struct sq_mqtt_publish *p);
/* Where the 2-byte packet id of a PUBLISH head starts (QoS > 0 only): after the fixed header
 * and the topic. head_len is what sq_mqtt_encode_publish_head() returned. */
size_t sq_mqtt_publish_id_offset(const uint8_t *head, const struct sq_mqtt_publish *p);

/* PUBACK, PUBREC, PUBREL or PUBCOMP for packet id. On v5 a reason other than 0 is sent (and 0 is
 * left out, as 5.0 section 3.4.2.1 allows); on 3.1.1 reason must be 0. */
SQ_MUST_CHECK int sq_mqtt_encode_ack(uint8_t version, uint8_t *buf, size_t cap, uint8_t type,
                                     uint16_t packet_id, uint8_t reason);

/* SUBSCRIBE with n filters; subscription_id 1..268435455 is sent on v5 (0: none). */
SQ_MUST_CHECK int sq_mqtt_encode_subscribe(uint8_t version, uint8_t *buf, size_t cap,
                                           uint16_t packet_id, const struct sq_mqtt_subscription *s,
                                           size_t n, uint32_t subscription_id);

SQ_MUST_CHECK int sq_mqtt_encode_unsubscribe(uint8_t version, uint8_t *buf, size_t cap,
                                             uint16_t packet_id, const struct sq_str *filters,
                                             size_t n);

/* PINGREQ (2 bytes). */
SQ_MUST_CHECK int sq_mqtt_encode_pingreq(uint8_t *buf, size_t cap);

/* DISCONNECT; on v5 with its reason code (0: normal disconnection, left out). */
SQ_MUST_CHECK int sq_mqtt_encode_disconnect(uint8_t version, uint8_t *buf, size_t cap,
                                            uint8_t reason);

/* The Remaining Length varint: writes v (<= SQ_MQTT_MAX_REMAINING) at out (4 bytes of room) and
 * returns its length; sq_mqtt_varint_len() only measures. */
size_t sq_mqtt_varint_put(uint8_t *out, uint32_t v);
size_t sq_mqtt_varint_len(uint32_t v);

/* A name for a packet type ("PUBLISH"), "?" for others. */
const char *sq_mqtt_type_name(unsigned type);

#endif
