/* http/url.c - a strict parser for the absolute http(s) URLs squall is pointed at (RFC 3986
 * syntax, restricted to what an HTTP client needs). */
#include "http/url.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"

static int fail(const char **errmsg, const char *msg, int rc)
{
    if (errmsg)
        *errmsg = msg;
    return rc;
}

static bool is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* reg-name / IPv4 characters we accept (unreserved minus nothing: ALPHA DIGIT - . _ ~). */
static bool is_host_char(unsigned char c)
{
    return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* s[0,n) equals the lowercase literal lit, ignoring ASCII case. */
static bool scheme_is(const char *s, size_t n, const char *lit)
{
    if (n != strlen(lit))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != lit[i])
            return false;
    }
    return true;
}

/* The message for an unsupported scheme names it; it lives in a per-thread buffer. */
static const char *scheme_msg(const char *s, size_t n)
{
    static _Thread_local char buf[96];
    char name[24];
    size_t k = n < sizeof(name) - 4 ? n : sizeof(name) - 4;
    memcpy(name, s, k);
    strcpy(name + k, k < n ? "..." : "");
    snprintf(buf, sizeof(buf), "unsupported URL scheme \"%s\" (use http:// or https://)", name);
    return buf;
}

/* The message for a space or a control byte at s[i] (0-based) names the character and the fix;
 * it lives in a per-thread buffer. */
static const char *blank_msg(const char *s, size_t i)
{
    static _Thread_local char buf[128];
    unsigned char c = (unsigned char)s[i];
    if (c == ' ')
        snprintf(buf, sizeof(buf),
                 "a URL may not contain a space (character %zu): write it as %%20", i + 1);
    else
        snprintf(buf, sizeof(buf),
                 "a URL may not contain control character 0x%02X (character %zu): "
                 "percent-encode it (%%%02X)",
                 c, i + 1, c);
    return buf;
}

/* Copies the path (and query) from s[0,n) into a new string, percent-encoding bytes >= 0x80.
 * A path starting with '?' (or empty) gets a leading '/'. */
static int copy_path(const char *s, size_t n, char **out, const char **errmsg)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7f)
            return fail(errmsg, "URL contains a space or a control character", -SQ_EPARSE);
        len += c >= 0x80 ? 3 : 1;
    }
    bool slash = n == 0 || s[0] != '/';
    char *p = malloc(len + slash + 1);
    if (!p)
        return fail(errmsg, "out of memory", -ENOMEM);
    char *w = p;
    if (slash)
        *w++ = '/';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            *w++ = '%';
            *w++ = sq_hex_upper[c >> 4];
            *w++ = sq_hex_upper[c & 15];
        } else {
            *w++ = (char)c;
        }
    }
    *w = '\0';
    *out = p;
    return 0;
}

int sq_url_parse(const char *s, struct sq_url *out, const char **errmsg)
{
    memset(out, 0, sizeof(*out));
    if (!s || !*s)
        return fail(errmsg, "empty URL", -SQ_EPARSE);
    /* before anything else: a space would otherwise be blamed on the part it lands in (a port
     * of "8080 a" is not 1..65535, but the fix is %20) */
    size_t sl = strlen(s), blank = sq_blank_at(s, sl);
    if (blank < sl)
        return fail(errmsg, blank_msg(s, blank), -SQ_EPARSE);

    /* scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) */
    const char *sep = strstr(s, "://");
    size_t sn = sep ? (size_t)(sep - s) : 0;
    bool scheme_ok = sn > 0 && is_alpha((unsigned char)s[0]);
    for (size_t i = 1; scheme_ok && i < sn; i++) {
        unsigned char c = (unsigned char)s[i];
        scheme_ok = is_alpha(c) || is_digit(c) || c == '+' || c == '-' || c == '.';
    }
    if (!scheme_ok)
        return fail(errmsg, "URL must start with http:// or https://", -SQ_EPARSE);
    uint16_t default_port;
    if (scheme_is(s, sn, "http")) {
        strcpy(out->scheme, "http");
        default_port = 80;
    } else if (scheme_is(s, sn, "https")) {
        strcpy(out->scheme, "https");
        default_port = 443;
    } else {
        return fail(errmsg, scheme_msg(s, sn), -SQ_ESCHEME);
    }

    /* authority = host [ ":" port ], ended by '/', '?', '#' or the end */
    const char *a = sep + 3;
    size_t an = strcspn(a, "/?#");
    if (memchr(a, '@', an))
        return fail(errmsg, "user:password@ in URLs is not supported", -SQ_EPARSE);
    const char *host, *port = NULL;
    size_t hn, pn = 0;
    if (an > 0 && a[0] == '[') {
        const char *rb = memchr(a, ']', an);
        if (!rb)
            return fail(errmsg, "IPv6 address in URL lacks its closing ']'", -SQ_EPARSE);
        host = a + 1;
        hn = (size_t)(rb - host);
        const char *after = rb + 1;
        size_t rest = an - (size_t)(after - a);
        if (rest > 0) {
            if (after[0] != ':')
                return fail(errmsg, "unexpected characters after ']' in URL", -SQ_EPARSE);
            port = after + 1;
            pn = rest - 1;
        }
        char tmp[64];
        struct in6_addr addr;
        if (hn == 0 || hn >= sizeof(tmp))
            return fail(errmsg, "bad IPv6 address in URL", -SQ_EPARSE);
        memcpy(tmp, host, hn);
        tmp[hn] = '\0';
        if (inet_pton(AF_INET6, tmp, &addr) != 1)
            return fail(errmsg, "bad IPv6 address in URL", -SQ_EPARSE);
        out->ipv6_literal = true;
    } else {
        host = a;
        const char *colon = memchr(a, ':', an);
        hn = colon ? (size_t)(colon - a) : an;
        if (colon) {
            port = colon + 1;
            pn = an - hn - 1;
        }
        if (hn == 0)
            return fail(errmsg, "URL has no host", -SQ_EPARSE);
        for (size_t i = 0; i < hn; i++)
            if (!is_host_char((unsigned char)host[i]))
                return fail(errmsg, "bad character in URL host", -SQ_EPARSE);
    }
    if (hn >= sizeof(out->host))
        return fail(errmsg, "URL host is longer than 255 characters", -SQ_EPARSE);
    memcpy(out->host, host, hn);
    out->host[hn] = '\0';

    out->port = default_port;
    if (port) {
        unsigned long v = 0;
        if (pn == 0)
            return fail(errmsg, "URL has an empty port after ':'", -SQ_EPARSE);
        if (pn > 5)
            return fail(errmsg, "URL port must be 1..65535", -SQ_EPARSE);
        for (size_t i = 0; i < pn; i++) {
            if (!is_digit((unsigned char)port[i]))
                return fail(errmsg, "URL port must be a number", -SQ_EPARSE);
            v = v * 10 + (unsigned long)(port[i] - '0');
        }
        if (v == 0 || v > 65535)
            return fail(errmsg, "URL port must be 1..65535", -SQ_EPARSE);
        out->port = (uint16_t)v;
    }

    if (out->ipv6_literal)
        snprintf(out->authority, sizeof(out->authority), "[%s]", out->host);
    else
        snprintf(out->authority, sizeof(out->authority), "%s", out->host);
    if (out->port != default_port) {
        size_t k = strlen(out->authority);
        snprintf(out->authority + k, sizeof(out->authority) - k, ":%u", (unsigned)out->port);
    }

    /* path-abempty [ "?" query ], fragment dropped */
    const char *p = a + an;
    size_t pl = strcspn(p, "#");
    return copy_path(p, pl, &out->path, errmsg);
}

void sq_url_dispose(struct sq_url *u)
{
    free(u->path);
    u->path = NULL;
}
