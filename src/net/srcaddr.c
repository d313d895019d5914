/* net/srcaddr.c - see srcaddr.h. */
#include "net/srcaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_PORTS 28232u /* 32768-60999, Linux's default range */

static void set_v4(struct sq_addr *a, uint32_t host_order)
{
    memset(a, 0, sizeof(*a));
    struct sockaddr_in *s4 = (struct sockaddr_in *)&a->ss;
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(host_order);
    a->len = sizeof(*s4);
}

/* One address of an item: IPv4 into *v4 (host order, *is4 true) or IPv6 into a. */
static bool one(const char *s, size_t n, uint32_t *v4, struct sq_addr *a, bool *is4)
{
    char buf[INET6_ADDRSTRLEN + 1];
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    struct in_addr in4;
    if (inet_pton(AF_INET, buf, &in4) == 1) {
        *v4 = ntohl(in4.s_addr);
        *is4 = true;
        return true;
    }
    struct in6_addr in6;
    if (inet_pton(AF_INET6, buf, &in6) != 1)
        return false;
    memset(a, 0, sizeof(*a));
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_addr = in6;
    a->len = sizeof(*s6);
    *is4 = false;
    return true;
}

static int bad(char *why, size_t len, const char *s, size_t n, const char *what)
{
    snprintf(why, len, "'%.*s' %s", (int)(n > 60 ? 60 : n), s, what);
    return -SQ_EPARSE;
}

/* One item into out (grown as needed): its first and last IPv4 address (host order), or one
 * IPv6 address. */
static int item(const char *s, size_t n, uint32_t *first, uint32_t *last, struct sq_addr *v6,
                bool *is4, char *why, size_t len)
{
    const char *dash = memchr(s, '-', n), *slash = memchr(s, '/', n);
    static const char notaddr[] = "is not an IPv4 or IPv6 address";
    if (dash || slash) {
        const char *sep = dash ? dash : slash;
        size_t head = (size_t)(sep - s);
        if (!one(s, head, first, v6, is4) || !*is4)
            return bad(why, len, s, n,
                       dash ? "is not a range of IPv4 addresses (A-B)"
                            : "is not an IPv4 block (ADDR/N, N from 0 to 32)");
        const char *tail = sep + 1;
        size_t tn = n - head - 1;
        if (dash) {
            bool t4 = false;
            if (!one(tail, tn, last, v6, &t4) || !t4)
                return bad(why, len, s, n, "is not a range of IPv4 addresses (A-B)");
            if (*last < *first)
                return bad(why, len, s, n, "is a range that ends before it starts");
            return 0;
        }
        unsigned bits = 0;
        if (tn == 0 || tn > 2)
            return bad(why, len, s, n, "is not an IPv4 block (ADDR/N, N from 0 to 32)");
        for (size_t i = 0; i < tn; i++) {
            if (tail[i] < '0' || tail[i] > '9')
                return bad(why, len, s, n, "is not an IPv4 block (ADDR/N, N from 0 to 32)");
            bits = bits * 10 + (unsigned)(tail[i] - '0');
        }
        if (bits > 32)
            return bad(why, len, s, n, "is not an IPv4 block (ADDR/N, N from 0 to 32)");
        uint32_t mask = bits == 0 ? 0 : ~0u << (32 - bits);
        *first &= mask;
        *last = *first | ~mask;
        return 0;
    }
    if (!one(s, n, first, v6, is4))
        return bad(why, len, s, n, notaddr);
    *last = *first;
    return 0;
}

int sq_srcaddr_parse(const char *list, struct sq_addr **out, size_t *n, char *why, size_t len)
{
    /* two passes: count (and check) first, then fill */
    struct sq_addr *v = NULL;
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        size_t k = 0;
        const char *p = list;
        for (;;) {
            const char *end = strchr(p, ',');
            size_t in = end ? (size_t)(end - p) : strlen(p);
            if (in == 0) {
                free(v);
                snprintf(why, len,
                         "an empty item (a list is ADDR, A-B or ADDR/N, comma-separated)");
                return -SQ_EPARSE;
            }
            uint32_t first = 0, last = 0;
            struct sq_addr v6;
            bool is4 = false;
            int rc = item(p, in, &first, &last, &v6, &is4, why, len);
            if (rc < 0) {
                free(v);
                return rc;
            }
            uint64_t count = is4 ? (uint64_t)last - first + 1 : 1;
            if (k + count > SQ_SRCADDR_MAX) {
                free(v);
                snprintf(why, len, "more than %d addresses", SQ_SRCADDR_MAX);
                return -SQ_ETOOBIG;
            }
            if (pass == 1) {
                if (!is4)
                    v[k] = v6;
                else
                    for (uint64_t i = 0; i < count; i++)
                        set_v4(&v[k + i], first + (uint32_t)i);
            }
            k += count;
            if (!end)
                break;
            p = end + 1;
        }
        if (pass == 0) {
            total = k;
            v = calloc(total, sizeof(*v));
            if (!v)
                return -ENOMEM;
        }
    }
    *out = v;
    *n = total;
    return 0;
}

int sq_srcaddr_check(const struct sq_addr *a)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0)
        return -errno;
    int rc = bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

uint32_t sq_srcaddr_ports(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
    unsigned lo = 0, hi = 0;
    int got = f ? fscanf(f, "%u %u", &lo, &hi) : 0;
    if (f)
        fclose(f);
    if (got != 2 || hi < lo || hi > 65535)
        return DEFAULT_PORTS;
    return hi - lo + 1;
}

uint32_t sq_srcaddr_auto_count(uint64_t conns, uint32_t ports)
{
    uint64_t per = ports / 2 ? ports / 2 : 1;
    uint64_t n = (conns + per - 1) / per;
    if (n < 1)
        n = 1;
    return n > SQ_SRCADDR_MAX ? SQ_SRCADDR_MAX : (uint32_t)n;
}

void sq_srcaddr_loopback(struct sq_addr *out, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        set_v4(&out[i], (127u << 24) + 1 + i);
}

void sq_srcaddr_format(const struct sq_addr *a, char *buf, size_t size)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (a->ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->ss)->sin6_addr, ip, sizeof(ip));
    else
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->ss)->sin_addr, ip, sizeof(ip));
    snprintf(buf, size, "%s", ip);
}
