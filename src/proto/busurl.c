/* proto/busurl.c - bus URLs (nats://, tls://, mqtt://, mqtts://) and MQTT topic checks (see
 * busurl.h).
 *
 * The URL grammar is the http one's shape (RFC 3986 authority) with userinfo allowed, because
 * brokers take credentials there (nats://user:pass@host, mqtt://user:pass@host):
 *
 * scheme is nats or tls (NATS, plain or over TLS: the NATS clients' spelling), mqtt or mqtts
 * (MQTT, plain or over TLS, default port 8883), mqtt+ws or mqtt+wss (MQTT over WebSocket, plain or
 * over TLS, default port 80 / 443). The WebSocket schemes are not ws:// and wss:// because those
 * already run the WebSocket load (engine/wsdrv.c) with its own messages; here the path is the
 * WebSocket request's (default /mqtt, as brokers serve it) and the topic comes in `?topic=`:
 *
 *     mqtt+ws "://" [ userinfo "@" ] host [ ":" port ] [ "/" path ] [ "?topic=" topic ]
 *
 *     scheme "://" [ user [ ":" password ] "@" ] host [ ":" port ] [ "/" target ]
 *
 * host is a name or IPv4 address (letters, digits, '-', '.', '_', '~') or a bracketed IPv6
 * literal; port 1..65535. user, password and target are percent-decoded; the target is the
 * rest of the URL after the first '/' (an MQTT topic keeps its own '/' levels, a NATS subject
 * its '.' tokens). '?' and '#' end nothing here (an MQTT '#' must be written %23 in a filter,
 * which a publish refuses anyway). Every refusal names what is wrong.
 */

#include "proto/busurl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"
#include "proto/nats.h"

static _Thread_local char why_buf[160];

/* The schemes: nats (plain), tls (NATS over TLS, as the NATS clients spell it), mqtt (plain),
 * mqtts (MQTT over TLS), mqtt+ws and mqtt+wss (MQTT carried in WebSocket binary frames, plain or
 * over TLS). */
static const struct {
    const char *name;
    uint8_t len;
    enum sq_bus_kind kind;
    bool tls, ws;
    uint16_t port;
} schemes[] = {
    {"nats", 4, SQ_BUS_NATS, false, false, 4222}, {"tls", 3, SQ_BUS_NATS, true, false, 4222},
    {"mqtt", 4, SQ_BUS_MQTT, false, false, 1883}, {"mqtts", 5, SQ_BUS_MQTT, true, false, 8883},
    {"mqtt+ws", 7, SQ_BUS_MQTT, false, true, 80}, {"mqtt+wss", 8, SQ_BUS_MQTT, true, true, 443},
};

static int scheme_of(const char *scheme, size_t len)
{
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
        if (len == schemes[i].len && strncasecmp(scheme, schemes[i].name, len) == 0)
            return (int)i;
    return -1;
}

uint16_t sq_bus_default_port(const char *scheme, size_t len)
{
    int i = scheme_of(scheme, len);
    return i < 0 ? 0 : schemes[i].port;
}

bool sq_bus_url_is_bus(const char *s)
{
    const char *sep = strstr(s, "://");
    return sep && sep - s <= 8 && scheme_of(s, (size_t)(sep - s)) >= 0;
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

int sq_bus_url_parse(const char *s, int flags, struct sq_bus_url *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    if (why)
        *why = NULL;
    const char *sep = strstr(s, "://");
    if (!sep)
        return fail(why, "expected nats://HOST[:PORT]/SUBJECT or mqtt://HOST[:PORT]/TOPIC");
    size_t slen = (size_t)(sep - s);
    int si = scheme_of(s, slen);
    if (si < 0) {
        snprintf(why_buf, sizeof(why_buf),
                 "unsupported scheme '%.*s' (nats, tls, mqtt, mqtts, mqtt+ws or mqtt+wss)",
                 (int)(slen > 16 ? 16 : slen), s);
        return fail(why, why_buf);
    }
    out->kind = schemes[si].kind;
    out->tls = schemes[si].tls;
    out->port = schemes[si].port;
    bool ws = schemes[si].ws;
    const char *a = sep + 3;
    const char *end = a + strcspn(a, ws ? "/?" : "/"); /* mqtt+ws://h?topic=t: no path */
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
        if ((size_t)(rb - h - 1) >= sizeof(out->host))
            return fail(why, "the IPv6 address is too long");
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
    if (ws) {
        /* the path is the WebSocket request's (default /mqtt); the topic is ?topic= */
        const char *q = strstr(end, "?topic=");
        size_t plen = q ? (size_t)(q - end) : strlen(end);
        if (plen == 0 || (plen == 1 && *end == '/')) {
            out->ws_path = strdup("/mqtt");
        } else if (*end == '/') {
            for (size_t i = 0; i < plen; i++)
                if ((unsigned char)end[i] <= 0x20 || end[i] == 0x7f || end[i] == '?' ||
                    end[i] == '#')
                    return fail(why, "the WebSocket path has a blank, a control character, '?' "
                                     "or '#' (the topic goes in ?topic=)");
            out->ws_path = strndup(end, plen);
        } else {
            return fail(why, "expected '/PATH' or '?topic=' after the host");
        }
        if (!out->ws_path)
            return -ENOMEM;
        if (q && q[7]) {
            out->target = pct_decode(q + 7, strlen(q + 7), &bad);
            if (!out->target)
                return bad ? fail(why, "the topic has a bad %-escape") : -ENOMEM;
        }
    } else if (*end == '/' && end[1]) {
        out->target = pct_decode(end + 1, strlen(end + 1), &bad);
        if (!out->target)
            return bad ? fail(why, "the subject or topic has a bad %-escape") : -ENOMEM;
    }
    bool need_target = flags & SQ_BUS_URL_TARGET, filter = flags & SQ_BUS_URL_FILTER;
    if (!out->target) {
        if (need_target)
            return fail(why, out->kind == SQ_BUS_NATS ? "no subject: nats://HOST[:PORT]/SUBJECT"
                             : ws ? "no topic: mqtt+ws://HOST[:PORT][/PATH]?topic=TOPIC"
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
    } else if (!sq_bus_mqtt_topic_ok(out->target, tl, filter)) {
        return fail(why, !filter ? "the topic must be UTF-8 without NUL and without '+' or '#' "
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
    free(u->ws_path);
    u->user = u->password = u->target = u->ws_path = NULL;
}
