/* net/egress.c - see egress.h.
 *
 * Addresses are compared as bare IPs (no port): IPv4 as 4 bytes, IPv6 as 16, an IPv4-mapped
 * IPv6 address as the IPv4 address it maps, so ::ffff:10.1.2.3 cannot pass where 10.1.2.3 may
 * not. The operator's numeric entries are parsed once, when the policy is built.
 *
 * The set of addresses let through for a listed name ("seen") is append-only: a writer (set-up,
 * a --dns-ttl lookup on the run's main thread, a sink's thread) takes the mutex, fills the next
 * slot and publishes the count with a release store; a reader (a worker at connect()) loads the
 * count with acquire and scans that many slots, none of which changes afterwards but for its
 * kinds, which grow with atomic ors.
 */
#include "net/egress.h"

#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SEEN_MAX 128 /* addresses remembered per policy (16 per lookup at most) */
#define LIST_MAX 600 /* the list as messages quote it */

struct ip {
    uint8_t fam; /* 4 or 6 */
    uint8_t b[16];
};

struct entry {
    char *name; /* as the operator wrote it, brackets stripped */
    bool numeric;
    struct ip ip;
};

struct seen {
    struct ip ip;
    uint8_t kinds; /* 1 << enum sq_egress_kind */
};

struct sq_egress {
    enum sq_egress_style style;
    char *hint;
    struct entry *v;
    size_t n;
    char list[LIST_MAX]; /* "[a, b]" */
    pthread_mutex_t mu;  /* writers of seen */
    uint32_t nseen;      /* atomic: slots published */
    struct seen seen[SEEN_MAX];
};

/* ---- addresses ---- */

static bool ip_of(const struct sq_addr *a, struct ip *out)
{
    memset(out, 0, sizeof(*out));
    if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)&a->ss;
        out->fam = 4;
        memcpy(out->b, &s->sin_addr, 4);
        return true;
    }
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&a->ss;
        if (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr)) {
            out->fam = 4;
            memcpy(out->b, &s->sin6_addr.s6_addr[12], 4);
        } else {
            out->fam = 6;
            memcpy(out->b, &s->sin6_addr, 16);
        }
        return true;
    }
    return false;
}

/* A numeric host ("10.1.2.3", "::1", "[::1]") as an ip. */
static bool ip_parse(const char *s, struct ip *out)
{
    char buf[64];
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        s++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    memset(out, 0, sizeof(*out));
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, buf, &a4) == 1) {
        out->fam = 4;
        memcpy(out->b, &a4, 4);
        return true;
    }
    if (inet_pton(AF_INET6, buf, &a6) == 1) {
        if (IN6_IS_ADDR_V4MAPPED(&a6)) {
            out->fam = 4;
            memcpy(out->b, &a6.s6_addr[12], 4);
        } else {
            out->fam = 6;
            memcpy(out->b, &a6, 16);
        }
        return true;
    }
    return false;
}

static bool ip_eq(const struct ip *a, const struct ip *b)
{
    return a->fam == b->fam && memcmp(a->b, b->b, a->fam == 4 ? 4 : 16) == 0;
}

static bool ip_loopback(const struct ip *a)
{
    static const uint8_t one[16] = {[15] = 1};
    return a->fam == 4 ? a->b[0] == 127 : memcmp(a->b, one, 16) == 0;
}

static void ip_text(const struct ip *a, char *buf, size_t len)
{
    if (!inet_ntop(a->fam == 4 ? AF_INET : AF_INET6, a->b, buf, (socklen_t)len))
        snprintf(buf, len, "?");
}

bool sq_egress_is_loopback(const struct sq_addr *a)
{
    struct ip ip;
    return ip_of(a, &ip) && ip_loopback(&ip);
}

/* ---- the policy ---- */

int sq_egress_new(const struct sq_egress_opts *o, struct sq_egress **out)
{
    struct sq_egress *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->style = o->style;
    pthread_mutex_init(&e->mu, NULL);
    e->hint = strdup(o->allow_hint ? o->allow_hint : "squall mcp --allow-host HOST");
    e->v = calloc(o->nhosts ? o->nhosts : 1, sizeof(*e->v));
    if (!e->hint || !e->v) {
        sq_egress_free(e);
        return -ENOMEM;
    }
    size_t used = (size_t)snprintf(e->list, sizeof(e->list), "[");
    for (size_t i = 0; i < o->nhosts; i++) {
        const char *h = o->hosts[i];
        size_t n = strlen(h);
        if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
            h++;
            n -= 2;
        }
        struct entry *en = &e->v[e->n];
        if (!(en->name = strndup(h, n))) {
            sq_egress_free(e);
            return -ENOMEM;
        }
        en->numeric = ip_parse(en->name, &en->ip);
        e->n++;
        if (used < sizeof(e->list))
            used += (size_t)snprintf(e->list + used, sizeof(e->list) - used, "%s%s", i ? ", " : "",
                                     en->name);
    }
    if (used < sizeof(e->list))
        snprintf(e->list + used, sizeof(e->list) - used, "]");
    else /* cut: say so rather than quote half a name */
        memcpy(e->list + sizeof(e->list) - 6, ", ...]", 6);
    *out = e;
    return 0;
}

void sq_egress_free(struct sq_egress *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].name);
    free(e->v);
    free(e->hint);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static bool listed_name(const struct sq_egress *e, const char *name)
{
    size_t n = strlen(name);
    if (n >= 2 && name[0] == '[' && name[n - 1] == ']') {
        name++;
        n -= 2;
    }
    for (size_t i = 0; i < e->n; i++)
        if (strlen(e->v[i].name) == n && strncasecmp(e->v[i].name, name, n) == 0)
            return true;
    return false;
}

static bool listed_ip(const struct sq_egress *e, const struct ip *a)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->v[i].numeric && ip_eq(&e->v[i].ip, a))
            return true;
    return false;
}

static bool seen_has(const struct sq_egress *e, const struct ip *a, enum sq_egress_kind kind)
{
    uint32_t n = __atomic_load_n(&e->nseen, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++)
        if (ip_eq(&e->seen[i].ip, a) &&
            (__atomic_load_n(&e->seen[i].kinds, __ATOMIC_RELAXED) & (1u << kind)))
            return true;
    return false;
}

/* Remembers a (let through for a listed name). False when the set is full. */
static bool seen_add(const struct sq_egress *ce, const struct ip *a, enum sq_egress_kind kind)
{
    struct sq_egress *e = (struct sq_egress *)ce; /* the set is the policy's own cache */
    bool ok = true;
    pthread_mutex_lock(&e->mu);
    uint32_t n = e->nseen, i = 0;
    for (; i < n; i++)
        if (ip_eq(&e->seen[i].ip, a))
            break;
    if (i < n) {
        __atomic_fetch_or(&e->seen[i].kinds, (uint8_t)(1u << kind), __ATOMIC_RELAXED);
    } else if (n < SEEN_MAX) {
        e->seen[n].ip = *a;
        e->seen[n].kinds = (uint8_t)(1u << kind);
        __atomic_store_n(&e->nseen, n + 1, __ATOMIC_RELEASE);
    } else {
        ok = false;
    }
    pthread_mutex_unlock(&e->mu);
    return ok;
}

/* Everything goes: a daemon run's connects with an empty allow_hosts. */
static bool open_connects(const struct sq_egress *e, enum sq_egress_kind kind)
{
    return e->style == SQ_EGRESS_DAEMON && e->n == 0 && kind == SQ_EGRESS_CONNECT;
}

static bool loopback_ok(const struct sq_egress *e, enum sq_egress_kind kind)
{
    return e->style == SQ_EGRESS_MCP || kind == SQ_EGRESS_LISTEN;
}

static const char *const mcp_rule = "cap: targets only on loopback";

/* Why a run may not listen at where: a host name (quoted in quote) or an address. */
static void refuse_listen(const struct sq_egress *e, const char *what, const char *quote,
                          const char *where, char *why, size_t len)
{
    if (e->style == SQ_EGRESS_MCP)
        snprintf(why, len, "%s: %s: would listen on %s%s%s; MCP runs may only listen on loopback",
                 mcp_rule, what, quote, where, quote);
    else
        snprintf(why, len,
                 "allow_hosts: %s: would listen on %s%s%s; a run of this daemon listens only on "
                 "loopback or on an address allow_hosts names %s",
                 what, quote, where, quote, e->list);
}

static int refuse_name(const struct sq_egress *e, const char *what, const char *name,
                       enum sq_egress_kind kind, char *why, size_t len)
{
    if (kind == SQ_EGRESS_LISTEN)
        refuse_listen(e, what, "'", name, why, len);
    else if (e->style == SQ_EGRESS_MCP)
        snprintf(why, len,
                 "%s: %s: host '%s' is not 127.0.0.1, ::1 or localhost; MCP runs may only reach "
                 "loopback unless the operator allows a host (%s)",
                 mcp_rule, what, name, e->hint);
    else
        snprintf(why, len, "allow_hosts: %s: '%s' is not in allow_hosts %s", what, name, e->list);
    return -EACCES;
}

int sq_egress_check_name(const struct sq_egress *e, const char *what, const char *name,
                         enum sq_egress_kind kind, char *why, size_t len)
{
    struct ip ip;
    if (!e || open_connects(e, kind) || ip_parse(name, &ip) || listed_name(e, name))
        return 0;
    if (strcasecmp(name, "localhost") == 0 && loopback_ok(e, kind))
        return 0; /* its addresses must still be loopback */
    return refuse_name(e, what, name, kind, why, len);
}

int sq_egress_check_addrs(const struct sq_egress *e, const char *what, const char *host,
                          const char *name, const char *note, const struct sq_addr *a, int n,
                          enum sq_egress_kind kind, char *why, size_t len)
{
    if (!e || open_connects(e, kind))
        return 0;
    bool by_name = name && listed_name(e, name);
    for (int i = 0; i < n; i++) {
        struct ip ip;
        bool known = ip_of(&a[i], &ip);
        if (known && ((ip_loopback(&ip) && loopback_ok(e, kind)) || listed_ip(e, &ip)))
            continue;
        if (known && by_name && seen_add(e, &ip, kind))
            continue;
        char at[80], bare[INET6_ADDRSTRLEN] = "?";
        sq_addr_format(&a[i], at, sizeof(at));
        if (known)
            ip_text(&ip, bare, sizeof(bare));
        if (!note)
            note = "";
        if (known && by_name) /* the set is full: a run of hundreds of addresses */
            snprintf(why, len, "%s: %s: '%s' has more addresses than a run may remember (%d)",
                     e->style == SQ_EGRESS_MCP ? mcp_rule : "allow_hosts", what, host, SEEN_MAX);
        else if (kind == SQ_EGRESS_LISTEN)
            refuse_listen(e, what, "", at, why, len);
        else if (e->style == SQ_EGRESS_MCP)
            snprintf(why, len,
                     "%s: %s: '%s' connects to %s%s; MCP runs may only reach loopback unless the "
                     "operator allows a host (%s)",
                     mcp_rule, what, host, at, note, e->hint);
        else
            snprintf(why, len,
                     "allow_hosts: %s: '%s' connects to %s%s, and %s is not in allow_hosts %s",
                     what, host, at, note, bare, e->list);
        return -EACCES;
    }
    return 0;
}

int sq_egress_lookup(const struct sq_egress *e, const struct sq_dns_opts *o, const char *what,
                     const char *host, uint16_t port, enum sq_egress_kind kind, struct sq_addr *out,
                     int max, char *why, size_t len)
{
    if (!e)
        return sq_dns_lookup(o, host, port, out, max, why, len);
    char mapped[256];
    uint16_t mport = port;
    int n = sq_dns_map(o, host, port, mapped, sizeof(mapped), &mport, out, max);
    if (n > 0) /* given as they are: only the addresses count */
        return sq_egress_check_addrs(e, what, host, NULL, " (from resolve)", out, n, kind, why,
                                     len) < 0
                   ? -EACCES
                   : n;
    int rc = sq_egress_check_name(e, what, mapped, kind, why, len);
    if (rc < 0)
        return rc;
    const char *msg = NULL;
    n = sq_resolve(mapped, mport, out, max, &msg);
    if (n < 0) {
        snprintf(why, len, "cannot resolve '%s': %s", mapped, msg ? msg : "failed");
        return n;
    }
    bool moved = strcasecmp(mapped, host) != 0 || mport != port;
    if (sq_egress_check_addrs(e, what, host, mapped, moved ? " (after connect-to)" : "", out, n,
                              kind, why, len) < 0)
        return -EACCES;
    return n;
}

int sq_egress_allows(const struct sq_egress *e, const struct sq_addr *a, enum sq_egress_kind kind)
{
    if (!e)
        return 0;
    if (a->ss.ss_family == AF_UNIX)
        return -EACCES; /* a path on the host (a daemon's control socket...): never, with a policy
                         */
    if (open_connects(e, kind))
        return 0;
    struct ip ip;
    if (!ip_of(a, &ip))
        return -EACCES;
    if ((ip_loopback(&ip) && loopback_ok(e, kind)) || listed_ip(e, &ip) || seen_has(e, &ip, kind))
        return 0;
    return -EACCES;
}
