/* proto/busurl.h - bus URLs: nats://[user[:pass]@]host[:port]/subject (tls:// for NATS over
 * TLS) and mqtt://[user[:pass]@]host[:port]/topic/with/levels (mqtts:// over TLS), for the load
 * (engine/busconf.h) and the sink (sink/). The grammar is in busurl.c's opening comment. */
#ifndef SQ_PROTO_BUSURL_H
#define SQ_PROTO_BUSURL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum sq_bus_kind {
    SQ_BUS_NATS = 1,
    SQ_BUS_MQTT = 2,
};

/* The scheme's default port, 0 for a scheme that is no bus. */
uint16_t sq_bus_default_port(const char *scheme, size_t len);

/* A bus URL, split: nats://[user[:pass]@]host[:port]/subject and
 * mqtt://[user[:pass]@]host[:port]/topic/with/levels. */
struct sq_bus_url {
    enum sq_bus_kind kind;
    char host[256]; /* IPv6 without brackets */
    uint16_t port;  /* explicit or 4222 / 1883 / 8883 (mqtts) */
    bool tls;       /* tls:// (NATS) or mqtts://: the connection runs TLS */
    char *user, *password;
    char *target;  /* subject or topic, percent-decoded (NULL: none given) */
    char *ws_path; /* mqtt+ws://, mqtt+wss://: the WebSocket request's path (NULL: plain TCP) */
};

/* True when s starts with nats://, tls://, mqtt://, mqtts://, mqtt+ws:// or mqtt+wss:// (any case):
 * a URL for sq_bus_url_parse. */
bool sq_bus_url_is_bus(const char *s);

/* What a caller wants of the URL's target. */
enum {
    SQ_BUS_URL_TARGET = 1, /* a subject or topic is required */
    SQ_BUS_URL_FILTER = 2, /* it subscribes: MQTT wildcards allowed (NATS subjects always are) */
};

/* Parses a bus URL. The subject (NATS) must be one the protocol can carry (no blank or control
 * byte, no empty token); the topic (MQTT) is UTF-8 without U+0000 and, unless it is a filter,
 * without wildcards; both are percent-decoded first. Returns 0, -SQ_EPARSE with *why set (a
 * constant or thread-local message), or -ENOMEM. out is cleared first and may be disposed
 * whatever the result. */
SQ_MUST_CHECK int sq_bus_url_parse(const char *s, int flags, struct sq_bus_url *out,
                                   const char **why);
void sq_bus_url_dispose(struct sq_bus_url *u);

/* True when t can be an MQTT topic name to publish to (non-empty UTF-8, no U+0000, no '+' or
 * '#'), or, with filter, a topic filter to subscribe with (wildcards placed as MQTT 4.7
 * says). */
bool sq_bus_mqtt_topic_ok(const char *t, size_t len, bool filter);

#endif
