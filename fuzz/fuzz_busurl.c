/* fuzz_busurl.c - bus URLs (nats://, tls://, mqtt://, mqtts://, mqtt+ws://, mqtt+wss://).
 * Checks: a parsed URL has a kind, a host and a port; TLS only for tls://, mqtts:// and
 * mqtt+wss://; a WebSocket path (starting with '/') only for mqtt+ws(s)://; sq_bus_url_is_bus
 * agrees with the parser on the scheme; a refusal says why; a publish's topic passes the MQTT
 * check; nothing leaks (dispose after any result). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto/busurl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 4096)
        return 0;
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    int flags = data[0] & 3; /* the first byte picks TARGET / FILTER too */
    struct sq_bus_url u;
    const char *why = NULL;
    int rc = sq_bus_url_parse(s, flags, &u, &why);
    if (rc == 0) {
        if ((u.kind != SQ_BUS_NATS && u.kind != SQ_BUS_MQTT) || !u.host[0] || u.port == 0)
            abort();
        if (!sq_bus_url_is_bus(s))
            abort();
        bool tls_scheme = strncasecmp(s, "tls://", 6) == 0 || strncasecmp(s, "mqtts://", 8) == 0 ||
                          strncasecmp(s, "mqtt+wss://", 11) == 0;
        if (u.tls != tls_scheme)
            abort();
        /* a WebSocket path exactly for mqtt+ws(s)://, starting with '/' */
        bool ws_scheme = strncasecmp(s, "mqtt+ws", 7) == 0;
        if (!u.ws_path != !ws_scheme || (u.ws_path && u.ws_path[0] != '/'))
            abort();
        if ((flags & SQ_BUS_URL_TARGET) && !u.target)
            abort();
        if (u.kind == SQ_BUS_MQTT && u.target && !(flags & SQ_BUS_URL_FILTER) &&
            !sq_bus_mqtt_topic_ok(u.target, strlen(u.target), false))
            abort();
    } else if (rc == -SQ_EPARSE && (!why || !why[0])) {
        abort();
    }
    sq_bus_url_dispose(&u);
    free(s);
    return 0;
}
