/* face/busopts.h - a bus run's configuration (engine/busconf.h) from the quick face's flags:
 * --payload, -H, --window, --qos, --jetstream, --request, --round-trip, --retain,
 * --mqtt-version, --keepalive, --client-id, checked here, each refusal naming its flag.
 */
#ifndef SQ_FACE_BUSOPTS_H
#define SQ_FACE_BUSOPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "engine/busconf.h"
#include "proto/busurl.h"

/* What the quick face's bus flags say (face/quick.c fills it from --payload, -H, --window,
 * --qos, --jetstream...). Zeros mean "not given". */
struct sq_bus_opts {
    const char *payload; /* --payload's text (a @FILE already read); NULL: the default */
    size_t payload_len;
    const char *payload_flag; /* "--payload" or "@FILE" as the user wrote it, for messages */
    const char *const *header_names, *const *header_values; /* -H, parsed */
    size_t nheaders;
    uint64_t window;  /* --window; 0: the mode's default */
    int qos;          /* --qos; -1: not given (0) */
    int mqtt_version; /* --mqtt-version 3 (3.1.1) or 5; 0: 3.1.1 */
    bool jetstream, request, round_trip, retain;
    bool idle;             /* --idle (MQTT): connect and hold, no publish */
    int64_t keepalive_ns;  /* --keepalive; 0: 60 s */
    const char *client_id; /* --client-id prefix */
    bool tls_first;        /* --tls-first: NATS over TLS shakes hands before INFO */
};

/* The payload when --payload is not given: the stamp alone, so every message can be counted
 * and timed at the far end. */
#define SQ_BUS_DEFAULT_PAYLOAD "{{$stamp}}"
/* Default windows: a publish that no one answers (NATS core, MQTT QoS 0) is batched 1,000 to a
 * window; a publish that waits for its answer goes one at a time unless --window says more. */
#define SQ_BUS_DEFAULT_WINDOW_FIRE 1000
#define SQ_BUS_DEFAULT_WINDOW_WAIT 1

/* Builds c from a parsed URL (u->target must be set) and the flags. Returns 0, -SQ_EUSAGE with
 * err naming the flag ("--qos: '3' is not a QoS (0, 1 or 2)", "--payload: 1:7: unknown
 * built-in...") or -ENOMEM. c is cleared first and owns what it made either way
 * (sq_bus_config_dispose). */
SQ_MUST_CHECK int sq_bus_prepare(struct sq_bus_config *c, const struct sq_bus_url *u,
                                 const struct sq_bus_opts *o, char *err, size_t errlen);

#endif
