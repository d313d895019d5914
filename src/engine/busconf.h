/* engine/busconf.h - a bus run's configuration: load on an event bus, NATS (core publish,
 * JetStream, request/reply) and MQTT (QoS 0/1/2 publish, round trip), as the quick face's nats://
 * and mqtt:// URLs run it (face/busopts.c builds one from the quick face's flags).
 *
 * A bus run is the same engine as an HTTP one (engine/run.h): the same executors, the same
 * accounting (sent = completed + failed + in flight; arrivals = sent + dropped), the same
 * per-second series and histograms. Only the driver changes (natsdrv.c, mqttdrv.c) and what a
 * "request" is:
 *
 *   NATS publish     one PUB; complete when the server has read it: the PONG to the PING the
 *                    driver writes behind each batch of PUBs comes back (what nats.c's Flush
 *                    waits for). Latency = from the (intended) send to that PONG: the time the
 *                    message spent in squall's buffer, the socket and the server's read queue.
 *   NATS jetstream   one PUB with a reply subject; complete when the PubAck arrives (an error in
 *                    it fails the request as `ack`, no stream on the subject as `no_responders`).
 *   NATS request     one PUB with a reply subject; complete when the reply arrives.
 *   MQTT QoS 0       one PUBLISH; complete at the PINGRESP to the PINGREQ written behind it
 *                    (the broker handles a connection's packets in order).
 *   MQTT QoS 1 / 2   complete at the PUBACK / PUBCOMP (a reason code >= 0x80 fails it: `ack`).
 *   MQTT round trip  the connection subscribes to the topic; a publish is complete when the
 *                    broker delivers it back (matched by its {{$stamp}}).
 *
 * VUs are window slots: each connection carries `window` of them, so a run opens
 * ceil(VUs / window) connections and each connection has at most `window` messages out.
 */
#ifndef SQ_ENGINE_BUSCONF_H
#define SQ_ENGINE_BUSCONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "proto/busurl.h"

struct sq_tmpl;

enum sq_bus_mode {
    SQ_BUS_PUBLISH = 0, /* NATS core publish; MQTT publish at the configured QoS */
    SQ_BUS_JETSTREAM,   /* NATS: publish and wait for the PubAck */
    SQ_BUS_REQUEST,     /* NATS: request/reply */
    SQ_BUS_ROUND_TRIP,  /* MQTT: publish and wait for the delivery on a subscription */
};

/* A header (NATS HPUB) or user property (MQTT 5): a name and a template for its value. */
struct sq_bus_header {
    char *name;
    struct sq_tmpl *value;
};

#define SQ_BUS_MAX_WINDOW  65535 /* slots per connection (MQTT packet ids are 16 bits) */
#define SQ_BUS_MAX_HEADERS 64

struct sq_bus_config {
    enum sq_bus_kind kind;
    enum sq_bus_mode mode;
    char *subject; /* NATS subject or MQTT topic (owned) */
    size_t subject_len;
    struct sq_tmpl *payload; /* compiled (owned); static when it has no dynamic part */
    struct sq_bus_header headers[SQ_BUS_MAX_HEADERS];
    size_t nheaders;
    uint32_t window;      /* VUs per connection, 1..SQ_BUS_MAX_WINDOW */
    uint8_t qos;          /* MQTT 0..2 */
    uint8_t mqtt_version; /* 4 (3.1.1) or 5 */
    bool retain;
    /* MQTT --idle: connect and hold. Each connection does CONNECT / CONNACK, then only keeps
     * alive (PINGREQ / PINGRESP); its VU never publishes. The CONNACKs' latency and refusals are
     * the result (mqtt.connect). */
    bool idle;
    bool stamped;          /* some template uses {{$stamp}} */
    uint16_t keepalive_s;  /* MQTT keep-alive; NATS answers the server's PINGs */
    char *user, *password; /* from the URL's userinfo (owned, NULL: none) */
    char *client_id;       /* MQTT client id prefix; the connection number is appended */
    /* TLS (tls://, mqtts://): the run's TLS client (run.h's tls) shakes hands with the broker.
     * MQTT, and NATS with tls_first, shake hands right after the TCP connect; NATS otherwise
     * reads the server's plaintext INFO first and upgrades before its CONNECT. */
    bool tls;
    bool tls_first; /* NATS: TLS before INFO (the server's handshake_first) */
    /* MQTT over WebSocket (mqtt+ws://, mqtt+wss://): once TCP (and TLS) is up, an HTTP/1.1
     * upgrade to `ws_path` with subprotocol mqtt, Host `ws_host`; then every MQTT byte rides
     * binary frames (engine/busws.c). NULL: MQTT straight on the socket. Owned. */
    char *ws_path, *ws_host;
};

/* Frees what the configuration owns (templates, strings); c may be zeroed again. */
void sq_bus_config_dispose(struct sq_bus_config *c);

/* The protocol's name as the result document writes it: "nats" or "mqtt". */
const char *sq_bus_kind_name(enum sq_bus_kind k);
/* The mode's name: "publish", "jetstream", "request" or "round_trip". */
const char *sq_bus_mode_name(enum sq_bus_mode m);

#endif
