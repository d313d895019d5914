/* net/dns.c - see dns.h. */
#include "net/dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Splits "a:b:c..." honouring [v6] brackets. Returns the number of fields (at most max); each
 * field is a span into s. */
static int split(const char *s, const char **f, size_t *fl, int max)
{
    int n = 0;
    const char *p = s;
    while (n < max) {
        const char *start = p;
        int depth = 0;
        while (*p && (*p != ':' || depth)) {
            if (*p == '[')
                depth++;
            else if (*p == ']' && depth)
                depth--;
            p++;
        }
        f[n] = start;
        fl[n] = (size_t)(p - start);
        n++;
        if (!*p)
            return n;
        p++;
    }
    return n + 1; /* too many */
}

static int parse_port(const char *s, size_t len, uint16_t *out)
{
    if (len == 0 || len > 5)
        return -1;
    unsigned v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

/* One numeric address (v4, or [v6]) with port into a. */
static int parse_addr(const char *s, size_t len, uint16_t port, struct sq_addr *a)
{
    char buf[64];
    if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
        s++;
        len -= 2;
        if (len >= sizeof(buf))
            return -1;
        memcpy(buf, s, len);
        buf[len] = 0;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->ss;
        memset(a, 0, sizeof(*a));
        if (inet_pton(AF_INET6, buf, &s6->sin6_addr) != 1)
            return -1;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        a->len = sizeof(*s6);
        return 0;
    }
    if (len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    struct sockaddr_in *s4 = (struct sockaddr_in *)&a->ss;
    memset(a, 0, sizeof(*a));
    if (inet_pton(AF_INET, buf, &s4->sin_addr) != 1)
        return -1;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    a->len = sizeof(*s4);
    return 0;
}

/* Parses a comma-separated list of numeric addresses, storing the first max of them. Returns how
 * many the list holds (which may exceed max), or -1 when one of them is not an address. */
static int addr_list(const char *s, size_t len, uint16_t port, struct sq_addr *out, int max)
{
    int n = 0;
    size_t i = 0;
    while (i <= len) {
        size_t j = i;
        while (j < len && s[j] != ',')
            j++;
        struct sq_addr spare;
        if (parse_addr(s + i, j - i, port, n < max ? &out[n] : &spare) < 0)
            return -1;
        n++;
        i = j + 1;
    }
    return n;
}

static int host_eq(const char *h, size_t hl, const char *host)
{
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    return hl == strlen(host) && strncasecmp(h, host, hl) == 0;
}

int sq_dns_check_arg(const char *arg, int connect_to, char *why, size_t len)
{
    const char *f[5];
    size_t fl[5];
    int n = split(arg, f, fl, 4);
    uint16_t port;
    struct sq_addr a[SQ_DNS_MAX_RESOLVE];
    if (connect_to) {
        if (n != 4) {
            snprintf(why, len, "'%s' is not HOST:PORT:HOST2:PORT2", arg);
            return -SQ_EUSAGE;
        }
        if ((fl[1] && parse_port(f[1], fl[1], &port) < 0) ||
            (fl[3] && parse_port(f[3], fl[3], &port) < 0)) {
            snprintf(why, len, "'%s': a port must be 1-65535 (or empty)", arg);
            return -SQ_EUSAGE;
        }
        return 0;
    }
    if (n != 3 || fl[0] == 0) {
        snprintf(why, len, "'%s' is not HOST:PORT:ADDR[,ADDR...]", arg);
        return -SQ_EUSAGE;
    }
    if (parse_port(f[1], fl[1], &port) < 0) {
        snprintf(why, len, "'%s': the port must be 1-65535", arg);
        return -SQ_EUSAGE;
    }
    int naddrs = addr_list(f[2], fl[2], port, a, SQ_DNS_MAX_RESOLVE);
    if (naddrs < 0) {
        snprintf(why, len, "'%s': addresses must be numeric IPv4 or [IPv6], comma-separated", arg);
        return -SQ_EUSAGE;
    }
    if (naddrs > SQ_DNS_MAX_RESOLVE) {
        snprintf(why, len, "'%s': at most %d addresses", arg, SQ_DNS_MAX_RESOLVE);
        return -SQ_EUSAGE;
    }
    return 0;
}

int sq_dns_map(const struct sq_dns_opts *o, const char *host, uint16_t port, char *mapped,
               size_t mlen, uint16_t *mport, struct sq_addr *out, int max)
{
    snprintf(mapped, mlen, "%s", host);
    const char *f[5];
    size_t fl[5];
    for (size_t i = 0; o && i < o->nconnect_to; i++) {
        if (split(o->connect_to[i], f, fl, 4) != 4)
            continue;
        uint16_t p = 0;
        if (fl[0] && !host_eq(f[0], fl[0], host))
            continue;
        if (fl[1] && (parse_port(f[1], fl[1], &p) < 0 || p != port))
            continue;
        if (fl[2]) {
            const char *h = f[2];
            size_t hl = fl[2];
            if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
                h++;
                hl -= 2;
            }
            snprintf(mapped, mlen, "%.*s", (int)hl, h);
        }
        if (fl[3] && parse_port(f[3], fl[3], &p) == 0)
            port = p;
        break; /* the first matching rule wins, as in curl */
    }
    *mport = port;
    for (size_t i = 0; o && i < o->nresolve; i++) {
        if (split(o->resolve[i], f, fl, 3) != 3)
            continue;
        uint16_t p;
        if (!host_eq(f[0], fl[0], mapped) || parse_port(f[1], fl[1], &p) < 0 || p != port)
            continue;
        int n = addr_list(f[2], fl[2], port, out, max);
        if (n > 0)
            return n < max ? n : max;
    }
    return 0;
}

int sq_dns_lookup(const struct sq_dns_opts *o, const char *host, uint16_t port, struct sq_addr *out,
                  int max, char *why, size_t len)
{
    char mapped[256];
    int n = sq_dns_map(o, host, port, mapped, sizeof(mapped), &port, out, max);
    if (n > 0)
        return n;
    const char *msg = NULL;
    n = sq_resolve(mapped, port, out, max, &msg);
    if (n < 0)
        snprintf(why, len, "cannot resolve '%s': %s", mapped, msg ? msg : "failed");
    return n;
}
