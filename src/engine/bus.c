/* engine/bus.c - bus URLs (nats://, mqtt://), topic checks and the configuration's lifetime.
 *
 * The URL grammar is the http one's shape (RFC 3986 authority) with userinfo allowed, because
 * brokers take credentials there (nats://user:pass@host, mqtt://user:pass@host):
 *
 *     scheme "://" [ user [ ":" password ] "@" ] host [ ":" port ] [ "/" target ]
 *
 * host is a name or IPv4 address (letters, digits, '-', '.', '_', '~') or a bracketed IPv6
 * literal; port 1..65535. user, password and target are percent-decoded; the target is the
 * rest of the URL after the first '/' (an MQTT topic keeps its own '/' levels, a NATS subject
 * its '.' tokens). '?' and '#' end nothing here (an MQTT '#' must be written %23 in a filter,
 * which a publish refuses anyway). Every refusal names what is wrong.
 */
#include "engine/bus.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"
#include "plan/tmpl.h"
#include "proto/nats.h"

static _Thread_local char why_buf[160];

uint16_t sq_bus_default_port(const char *scheme, size_t len)
{
    if (len == 4 && strncasecmp(scheme, "nats", 4) == 0)
        return 4222;
    if (len == 4 && strncasecmp(scheme, "mqtt", 4) == 0)
        return 1883;
    return 0;
}

bool sq_bus_url_is_bus(const char *s)
{
    return strncasecmp(s, "nats://", 7) == 0 || strncasecmp(s, "mqtt://", 7) == 0;
}

/* Percent-decodes s[0, n) into a new NUL-terminated string. A '%' not followed by two hex digits
 * is refused (NULL with *bad set); so is a decoded NUL (it would cut the string short). */
static char *pct_decode(const char *s, size_t n, bool *bad)
{
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            o[k++] = s[i];
            continue;
        }
        int hi = i + 1 < n ? sq_hex_value((unsigned char)s[i + 1]) : -1;
        int lo = i + 2 < n ? sq_hex_value((unsigned char)s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            free(o);
            *bad = true;
            return NULL;
        }
        o[k++] = (char)(hi * 16 + lo);
        i += 2;
    }
    o[k] = '\0';
    return o;
}

static bool host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

bool sq_bus_mqtt_topic_ok(const char *t, size_t len, bool filter)
{
    if (len == 0 || len > 65535 || !sq_utf8_valid(t, len) || memchr(t, '\0', len))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = t[i];
        if (c != '+' && c != '#')
            continue;
        if (!filter)
            return false;
        /* MQTT 4.7.1: a wildcard takes a whole level; '#' only as the last one */
        bool starts = i == 0 || t[i - 1] == '/';
        bool ends = i + 1 == len || t[i + 1] == '/';
        if (!starts || !ends || (c == '#' && i + 1 != len))
            return false;
    }
    return true;
}

static int fail(const char **why, const char *msg)
{
    if (why)
        *why = msg;
    return -SQ_EPARSE;
}

int sq_bus_url_parse(const char *s, bool need_target, struct sq_bus_url *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    if (why)
        *why = NULL;
    const char *sep = strstr(s, "://");
    if (!sep)
        return fail(why, "expected nats://HOST[:PORT]/SUBJECT or mqtt://HOST[:PORT]/TOPIC");
    size_t slen = (size_t)(sep - s);
    uint16_t port = sq_bus_default_port(s, slen);
    if (!port) {
        snprintf(why_buf, sizeof(why_buf), "unsupported scheme '%.*s' (nats or mqtt)",
                 (int)(slen > 16 ? 16 : slen), s);
        return fail(why, why_buf);
    }
    out->kind = strncasecmp(s, "nats", 4) == 0 ? SQ_BUS_NATS : SQ_BUS_MQTT;
    out->port = port;
    const char *a = sep + 3;
    const char *end = a + strcspn(a, "/");
    /* userinfo: up to the last '@' of the authority */
    const char *at = NULL;
    for (const char *p = a; p < end; p++)
        if (*p == '@')
            at = p;
    bool bad = false;
    if (at) {
        const char *colon = memchr(a, ':', (size_t)(at - a));
        const char *uend = colon ? colon : at;
        if (uend == a)
            return fail(why, "the user name before '@' is empty");
        out->user = pct_decode(a, (size_t)(uend - a), &bad);
        if (!out->user)
            return bad ? fail(why, "the user name has a bad %-escape") : -ENOMEM;
        if (colon) {
            out->password = pct_decode(colon + 1, (size_t)(at - colon - 1), &bad);
            if (!out->password)
                return bad ? fail(why, "the password has a bad %-escape") : -ENOMEM;
        }
        a = at + 1;
    }
    const char *h = a, *hend;
    if (*h == '[') {
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (!rb)
            return fail(why, "an IPv6 address needs its closing ']'");
        for (const char *p = h + 1; p < rb; p++)
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
                  (*p >= 'A' && *p <= 'F') || *p == ':' || *p == '.'))
                return fail(why, "not an IPv6 address between '[' and ']'");
        if (rb == h + 1)
            return fail(why, "empty IPv6 address");
        memcpy(out->host, h + 1, (size_t)(rb - h - 1));
        out->host[rb - h - 1] = '\0';
        hend = rb + 1;
    } else {
        hend = h;
        while (hend < end && *hend != ':')
            hend++;
        if (hend == h)
            return fail(why, "no host");
        if ((size_t)(hend - h) >= sizeof(out->host))
            return fail(why, "the host name is too long");
        for (const char *p = h; p < hend; p++)
            if (!host_char(*p))
                return fail(why, "the host has a character a host name cannot have");
        memcpy(out->host, h, (size_t)(hend - h));
        out->host[hend - h] = '\0';
    }
    if (hend < end) {
        if (*hend != ':')
            return fail(why, "expected ':PORT' or '/' after the host");
        const char *p = hend + 1;
        if (p == end)
            return fail(why, "empty port");
        unsigned long v = 0;
        for (; p < end; p++) {
            if (*p < '0' || *p > '9' || v > 65535)
                return fail(why, "the port is not a number from 1 to 65535");
            v = v * 10 + (unsigned long)(*p - '0');
        }
        if (v == 0 || v > 65535)
            return fail(why, "the port is not a number from 1 to 65535");
        out->port = (uint16_t)v;
    }
    if (*end == '/' && end[1]) {
        out->target = pct_decode(end + 1, strlen(end + 1), &bad);
        if (!out->target)
            return bad ? fail(why, "the subject or topic has a bad %-escape") : -ENOMEM;
    }
    if (!out->target) {
        if (need_target)
            return fail(why, out->kind == SQ_BUS_NATS ? "no subject: nats://HOST[:PORT]/SUBJECT"
                                                      : "no topic: mqtt://HOST[:PORT]/TOPIC");
        return 0;
    }
    size_t tl = strlen(out->target);
    if (out->kind == SQ_BUS_NATS) {
        if (!sq_nats_subject_ok((struct sq_str){out->target, tl}))
            return fail(why, "the subject has a blank or a control character");
        const char *t = out->target;
        if (t[0] == '.' || t[tl - 1] == '.' || strstr(t, ".."))
            return fail(why, "the subject has an empty token (a leading, trailing or double '.')");
    } else if (!sq_bus_mqtt_topic_ok(out->target, tl, !need_target)) {
        return fail(why, need_target
                             ? "the topic must be UTF-8 without NUL and without '+' or '#' "
                               "(a publish names one topic)"
                             : "the topic filter must be UTF-8 with '+' and '#' each a whole "
                               "level ('#' the last)");
    }
    return 0;
}

void sq_bus_url_dispose(struct sq_bus_url *u)
{
    free(u->user);
    free(u->password);
    free(u->target);
    u->user = u->password = u->target = NULL;
}

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

/* ---- the configuration from the quick face's flags ---- */

static int usage(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int usage(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -SQ_EUSAGE;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d)
        memcpy(d, s, n + 1);
    return d;
}

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
        return usage(err, errlen, "the URL names no %s", nats ? "subject" : "topic");
    if (nats && o->round_trip)
        return usage(err, errlen, "--round-trip is for mqtt:// (NATS has --request)");
    if (!nats && (o->jetstream || o->request))
        return usage(err, errlen, "%s is for nats:// URLs",
                     o->jetstream ? "--jetstream" : "--request");
    if (o->jetstream && o->request)
        return usage(err, errlen, "--jetstream and --request: pick one");
    if (nats && o->qos >= 0)
        return usage(err, errlen,
                     "--qos is for mqtt:// URLs (NATS core has no QoS; see "
                     "--jetstream)");
    if (nats && (o->retain || o->mqtt_version || o->client_id || o->keepalive_ns))
        return usage(err, errlen, "%s is for mqtt:// URLs",
                     o->retain         ? "--retain"
                     : o->mqtt_version ? "--mqtt-version"
                     : o->client_id    ? "--client-id"
                                       : "--keepalive");
    if (o->qos > 2)
        return usage(err, errlen, "--qos: '%d' is not a QoS (0, 1 or 2)", o->qos);
    if (o->mqtt_version && o->mqtt_version != 3 && o->mqtt_version != 5)
        return usage(err, errlen, "--mqtt-version: '%d' is not 3 (3.1.1) or 5", o->mqtt_version);
    if (o->window > SQ_BUS_MAX_WINDOW)
        return usage(err, errlen, "--window: at most %d messages out per connection",
                     SQ_BUS_MAX_WINDOW);
    if (o->keepalive_ns < 0 || o->keepalive_ns > 65535LL * 1000000000LL)
        return usage(err, errlen, "--keepalive: from 0 (off) to 65535s");
    c->mode = o->jetstream    ? SQ_BUS_JETSTREAM
              : o->request    ? SQ_BUS_REQUEST
              : o->round_trip ? SQ_BUS_ROUND_TRIP
                              : SQ_BUS_PUBLISH;
    c->qos = o->qos > 0 ? (uint8_t)o->qos : 0;
    c->mqtt_version = o->mqtt_version == 5 ? 5 : 4;
    c->retain = o->retain;
    c->keepalive_s = o->keepalive_ns ? (uint16_t)(o->keepalive_ns / 1000000000LL) : 60;
    if (o->keepalive_ns && c->keepalive_s == 0)
        c->keepalive_s = 1;
    bool fire = c->mode == SQ_BUS_PUBLISH && c->qos == 0;
    c->window = o->window ? (uint32_t)o->window
                : fire    ? SQ_BUS_DEFAULT_WINDOW_FIRE
                          : SQ_BUS_DEFAULT_WINDOW_WAIT;
    c->subject = dup_str(u->target);
    if (!c->subject)
        return -ENOMEM;
    c->subject_len = strlen(c->subject);
    if (u->user && !(c->user = dup_str(u->user)))
        return -ENOMEM;
    if (u->password && !(c->password = dup_str(u->password)))
        return -ENOMEM;
    if (o->client_id && !(c->client_id = dup_str(o->client_id)))
        return -ENOMEM;
    if (!nats && u->password && !u->user)
        return usage(err, errlen, "the URL has a password without a user name");
    struct sq_tmpl_error te = {0};
    const char *pl = o->payload ? o->payload : SQ_BUS_DEFAULT_PAYLOAD;
    size_t plen = o->payload ? o->payload_len : strlen(SQ_BUS_DEFAULT_PAYLOAD);
    int rc = sq_tmpl_compile(pl, plen, SQ_TMPL_ESC_NONE, NULL, NULL, &c->payload, &te);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        return usage(err, errlen, "%s: at byte %zu: %s",
                     o->payload_flag ? o->payload_flag : "--payload", te.offset + 1, te.msg);
    c->stamped = sq_tmpl_uses_stamp(c->payload);
    if (o->nheaders > SQ_BUS_MAX_HEADERS)
        return usage(err, errlen, "-H: at most %d headers", SQ_BUS_MAX_HEADERS);
    if (o->nheaders && !nats && c->mqtt_version != 5)
        return usage(err, errlen, "-H: MQTT 3.1.1 has no user properties (--mqtt-version 5)");
    for (size_t i = 0; i < o->nheaders; i++) {
        const char *h = o->headers[i];
        const char *colon = strchr(h, ':');
        if (!colon || !header_name_ok(h, (size_t)(colon - h), u->kind))
            return usage(err, errlen,
                         "-H: '%s' is not a header: expected 'Name: value' (the name %s)", h,
                         nats ? "a token without ':' or blanks" : "UTF-8, not empty");
        if (strpbrk(h, "\r\n"))
            return usage(err, errlen, "-H: '%s': CR and LF are not allowed", h);
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        struct sq_bus_header *bh = &c->headers[c->nheaders];
        bh->name = malloc((size_t)(colon - h) + 1);
        if (!bh->name)
            return -ENOMEM;
        memcpy(bh->name, h, (size_t)(colon - h));
        bh->name[colon - h] = '\0';
        rc = sq_tmpl_compile(v, strlen(v), SQ_TMPL_ESC_NONE, NULL, NULL, &bh->value, &te);
        if (rc == -ENOMEM) {
            free(bh->name);
            bh->name = NULL;
            return rc;
        }
        c->nheaders++;
        if (rc < 0)
            return usage(err, errlen, "-H: '%s': at byte %zu of the value: %s", h, te.offset + 1,
                         te.msg);
        if (sq_tmpl_uses_stamp(bh->value))
            c->stamped = true;
    }
    if (c->mode == SQ_BUS_ROUND_TRIP && !c->stamped)
        return usage(err, errlen,
                     "--round-trip matches each delivery to its publish by the "
                     "stamp: put {{$stamp}} in --payload%s",
                     c->mqtt_version == 5 ? " or in a -H user property" : "");
    return 0;
}
