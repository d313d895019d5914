/* net/dns.h - how a run finds its target's addresses: the cache it resolves into once per run,
 * and curl's overrides.
 *
 *   --resolve HOST:PORT:ADDR[,ADDR...]      use these addresses for HOST:PORT (no lookup)
 *   --connect-to HOST:PORT:HOST2:PORT2      connect to HOST2:PORT2 instead of HOST:PORT (the
 *                                           Host header and TLS name stay HOST); an empty HOST or
 *                                           PORT matches any, an empty HOST2 or PORT2 keeps the
 *                                           original
 *
 * IPv6 addresses are written in brackets ([::1]). Every address found is used, round-robin across
 * connections; a lookup that fails is the run's `dns` error. */
#ifndef SQ_NET_DNS_H
#define SQ_NET_DNS_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/sock.h"

/* The most addresses one --resolve entry may list (a run keeps at most 16: engine/run.h). */
#define SQ_DNS_MAX_RESOLVE 16

struct sq_dns_opts {
    const char *const *resolve; /* --resolve arguments */
    size_t nresolve;
    const char *const *connect_to; /* --connect-to arguments */
    size_t nconnect_to;
};

/* Checks one --resolve (connect_to false) or --connect-to argument. Returns 0, or -SQ_EUSAGE
 * with why saying what is wrong. */
SQ_MUST_CHECK int sq_dns_check_arg(const char *arg, int connect_to, char *why, size_t len);

/* The overrides alone: --connect-to rewrites host:port into mapped (NUL-terminated, at most
 * mlen bytes) and *mport, then a --resolve entry for that gives the addresses. Returns how many
 * the entry gave (> 0, at most max), or 0 when the system resolver is to be asked for
 * mapped:*mport. No lookup, no allocation. */
int sq_dns_map(const struct sq_dns_opts *o, const char *host, uint16_t port, char *mapped,
               size_t mlen, uint16_t *mport, struct sq_addr *out, int max);

/* Finds host:port's addresses: --connect-to first maps the name and port, then a --resolve
 * entry for the result is used as it is (its first max addresses), else the system resolver.
 * Returns the number of addresses (> 0, at most max), or -SQ_ERESOLVE / -SQ_EUSAGE with why
 * filled in. */
SQ_MUST_CHECK int sq_dns_lookup(const struct sq_dns_opts *o, const char *host, uint16_t port,
                                struct sq_addr *out, int max, char *why, size_t len);

#endif
