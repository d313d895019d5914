/* face/busopts.c - a bus run's configuration from the quick face's flags (see busopts.h). URLs
 * are proto/busurl.c's; the configuration's lifetime is engine/busconf.c's. */
#include "face/busopts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"
#include "face/flags.h"
#include "plan/tmpl.h"
#include "proto/nats.h"

/* ---- the configuration from the quick face's flags ---- */

/* A header name: a token (RFC 9110) for NATS, any UTF-8 without NUL for MQTT 5. */
static bool header_name_ok(const char *s, size_t n, enum sq_bus_kind kind)
{
    if (n == 0)
        return false;
    if (kind == SQ_BUS_MQTT)
        return sq_utf8_valid(s, n) && !memchr(s, '\0', n);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || c == ':')
            return false;
    }
    return true;
}

int sq_bus_prepare(struct sq_bus_config *c, const struct sq_bus_url *u, const struct sq_bus_opts *o,
                   char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->kind = u->kind;
    bool nats = u->kind == SQ_BUS_NATS;
    if (!u->target)
        return sq_flag_fail(err, errlen, "the URL names no %s", nats ? "subject" : "topic");
    if (nats && o->idle)
        return sq_flag_fail(err, errlen, "--idle is for mqtt:// URLs");
    if (o->idle &&
        (o->round_trip || o->qos >= 0 || o->retain || o->window > 1 || o->payload || o->nheaders))
        return sq_flag_fail(err, errlen,
                            "--idle publishes nothing: no --round-trip, --qos, --retain, --window, "
                            "--payload or -H");
    if (nats && o->round_trip)
        return sq_flag_fail(err, errlen, "--round-trip is for mqtt:// (NATS has --request)");
    if (!nats && (o->jetstream || o->request))
        return sq_flag_fail(err, errlen, "%s is for nats:// URLs",
                            o->jetstream ? "--jetstream" : "--request");
    if (o->jetstream && o->request)
        return sq_flag_fail(err, errlen, "--jetstream and --request: pick one");
    if (nats && o->qos >= 0)
        return sq_flag_fail(err, errlen,
                            "--qos is for mqtt:// URLs (NATS core has no QoS; see "
                            "--jetstream)");
    if (nats && (o->retain || o->mqtt_version || o->client_id || o->keepalive_ns))
        return sq_flag_fail(err, errlen, "%s is for mqtt:// URLs",
                            o->retain         ? "--retain"
                            : o->mqtt_version ? "--mqtt-version"
                            : o->client_id    ? "--client-id"
                                              : "--keepalive");
    if (o->tls_first && !(nats && u->tls))
        return sq_flag_fail(err, errlen, "--tls-first is for tls:// URLs (NATS over TLS)%s",
                            nats ? "" : "; MQTT over TLS (mqtts://) always shakes hands first");
    c->tls = u->tls;
    c->tls_first = o->tls_first;
    if (o->qos > 2)
        return sq_flag_fail(err, errlen, "--qos: '%d' is not a QoS (0, 1 or 2)", o->qos);
    if (o->mqtt_version && o->mqtt_version != 3 && o->mqtt_version != 5)
        return sq_flag_fail(err, errlen, "--mqtt-version: '%d' is not 3 (3.1.1) or 5",
                            o->mqtt_version);
    if (o->window > SQ_BUS_MAX_WINDOW)
        return sq_flag_fail(err, errlen, "--window: at most %d messages out per connection",
                            SQ_BUS_MAX_WINDOW);
    if (o->keepalive_ns < 0 || o->keepalive_ns > 65535LL * 1000000000LL)
        return sq_flag_fail(err, errlen, "--keepalive: from 0 (off) to 65535s");
    c->mode = o->jetstream    ? SQ_BUS_JETSTREAM
              : o->request    ? SQ_BUS_REQUEST
              : o->round_trip ? SQ_BUS_ROUND_TRIP
                              : SQ_BUS_PUBLISH;
    c->qos = o->qos > 0 ? (uint8_t)o->qos : 0;
    c->mqtt_version = o->mqtt_version == 5 ? 5 : 4;
    c->retain = o->retain;
    c->idle = o->idle;
    c->keepalive_s = o->keepalive_ns ? (uint16_t)(o->keepalive_ns / 1000000000LL) : 60;
    if (o->keepalive_ns && c->keepalive_s == 0)
        c->keepalive_s = 1;
    bool fire = c->mode == SQ_BUS_PUBLISH && c->qos == 0;
    c->window = o->window ? (uint32_t)o->window
                : o->idle ? 1 /* -c N: N connections */
                : fire    ? SQ_BUS_DEFAULT_WINDOW_FIRE
                          : SQ_BUS_DEFAULT_WINDOW_WAIT;
    c->subject = strdup(u->target);
    if (!c->subject)
        return -ENOMEM;
    c->subject_len = strlen(c->subject);
    if (u->user && !(c->user = strdup(u->user)))
        return -ENOMEM;
    if (u->password && !(c->password = strdup(u->password)))
        return -ENOMEM;
    if (o->client_id && !(c->client_id = strdup(o->client_id)))
        return -ENOMEM;
    if (u->ws_path) {
        char host[300];
        bool v6 = strchr(u->host, ':') != NULL;
        snprintf(host, sizeof(host), "%s%s%s:%u", v6 ? "[" : "", u->host, v6 ? "]" : "",
                 (unsigned)u->port);
        if (!(c->ws_path = strdup(u->ws_path)) || !(c->ws_host = strdup(host)))
            return -ENOMEM;
    }
    if (!nats && u->password && !u->user)
        return sq_flag_fail(err, errlen, "the URL has a password without a user name");
    struct sq_tmpl_error te = {0};
    const char *pl = o->payload ? o->payload : SQ_BUS_DEFAULT_PAYLOAD;
    size_t plen = o->payload ? o->payload_len : strlen(SQ_BUS_DEFAULT_PAYLOAD);
    int rc = sq_tmpl_compile(pl, plen, SQ_TMPL_ESC_NONE, NULL, NULL, &c->payload, &te);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        return sq_flag_fail(err, errlen, "%s: at byte %zu: %s",
                            o->payload_flag ? o->payload_flag : "--payload", te.offset + 1, te.msg);
    c->stamped = sq_tmpl_uses_stamp(c->payload);
    if (o->nheaders > SQ_BUS_MAX_HEADERS)
        return sq_flag_fail(err, errlen, "-H: at most %d headers", SQ_BUS_MAX_HEADERS);
    if (o->nheaders && !nats && c->mqtt_version != 5)
        return sq_flag_fail(err, errlen,
                            "-H: MQTT 3.1.1 has no user properties (--mqtt-version 5)");
    for (size_t i = 0; i < o->nheaders; i++) {
        const char *h = o->header_names[i], *v = o->header_values[i];
        if (!header_name_ok(h, strlen(h), u->kind))
            return sq_flag_fail(err, errlen, "-H: '%s' is not a header name (%s)", h,
                                nats ? "a token without ':' or blanks" : "UTF-8, not empty");
        if (strpbrk(v, "\r\n"))
            return sq_flag_fail(err, errlen, "-H: '%s': CR and LF are not allowed", h);
        struct sq_bus_header *bh = &c->headers[c->nheaders];
        bh->name = strdup(h);
        if (!bh->name)
            return -ENOMEM;
        rc = sq_tmpl_compile(v, strlen(v), SQ_TMPL_ESC_NONE, NULL, NULL, &bh->value, &te);
        if (rc == -ENOMEM) {
            free(bh->name);
            bh->name = NULL;
            return rc;
        }
        c->nheaders++;
        if (rc < 0)
            return sq_flag_fail(err, errlen, "-H: '%s': at byte %zu of the value: %s", h,
                                te.offset + 1, te.msg);
        if (sq_tmpl_uses_stamp(bh->value))
            c->stamped = true;
    }
    if (c->mode == SQ_BUS_ROUND_TRIP && !c->stamped)
        return sq_flag_fail(err, errlen,
                            "--round-trip matches each delivery to its publish by the "
                            "stamp: put {{$stamp}} in --payload%s",
                            c->mqtt_version == 5 ? " or in a -H user property" : "");
    return 0;
}
