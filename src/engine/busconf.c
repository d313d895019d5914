/* engine/busconf.c - a bus run's configuration: its lifetime and names (see busconf.h);
 * face/busopts.c builds one from the quick face's flags. */
#include "engine/busconf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"
#include "plan/tmpl.h"
#include "proto/nats.h"

void sq_bus_config_dispose(struct sq_bus_config *c)
{
    free(c->subject);
    sq_tmpl_free(c->payload);
    for (size_t i = 0; i < c->nheaders; i++) {
        free(c->headers[i].name);
        sq_tmpl_free(c->headers[i].value);
    }
    free(c->user);
    free(c->password);
    free(c->client_id);
    free(c->ws_path);
    free(c->ws_host);
    memset(c, 0, sizeof(*c));
}

const char *sq_bus_kind_name(enum sq_bus_kind k)
{
    return k == SQ_BUS_NATS ? "nats" : k == SQ_BUS_MQTT ? "mqtt" : "?";
}

const char *sq_bus_mode_name(enum sq_bus_mode m)
{
    switch (m) {
    case SQ_BUS_PUBLISH:
        return "publish";
    case SQ_BUS_JETSTREAM:
        return "jetstream";
    case SQ_BUS_REQUEST:
        return "request";
    case SQ_BUS_ROUND_TRIP:
        return "round_trip";
    }
    return "?";
}
