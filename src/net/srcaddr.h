/* net/srcaddr.h - source addresses: the local addresses a run's connections are bound to before
 * connect(), so that the ephemeral ports of one address never limit a run.
 *
 * A TCP connection is one 4-tuple (source address, source port, destination address,
 * destination port). Towards one destination, one source address offers as many connections as
 * the ephemeral port range holds (/proc/sys/net/ipv4/ip_local_port_range: 28,232 by default),
 * less the ports still in TIME_WAIT. More source addresses multiply that: 127.0.0.0/8 is all
 * local on Linux, so a loopback run spreads over 127.0.0.1, 127.0.0.2, ... by itself
 * (sq_srcaddr_auto); elsewhere the operator lists the host's own addresses (--source-addrs).
 * A connection binds its source address with IP_BIND_ADDRESS_NO_PORT (net/sock.h), so the
 * kernel still picks the port at connect(), per 4-tuple.
 *
 * The list's syntax (--source-addrs), items separated by commas:
 *   ADDR          one IPv4 or IPv6 address           10.0.0.7, ::1
 *   ADDR-ADDR     an inclusive IPv4 range             127.0.0.2-127.0.0.5
 *   ADDR/N        every address of an IPv4 block      127.0.0.0/30 (four: .0 .1 .2 .3)
 * at most SQ_SRCADDR_MAX addresses in all; no item may be empty. Source addresses are local
 * binds only: the egress policy (net/egress.h) still decides where a run may connect.
 */
#ifndef SQ_NET_SRCADDR_H
#define SQ_NET_SRCADDR_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/sock.h"

#define SQ_SRCADDR_MAX 4096 /* addresses in one list (4096 x 28k ports: 100M connections) */

/* Parses list into a new array of n addresses (port 0) that the caller frees. Returns 0,
 * -SQ_EPARSE with why saying what is wrong ("'127.0.0.x' is not an IPv4 or IPv6 address"),
 * -SQ_ETOOBIG (more than SQ_SRCADDR_MAX) or -ENOMEM; *out untouched on error. */
SQ_MUST_CHECK int sq_srcaddr_parse(const char *list, struct sq_addr **out, size_t *n, char *why,
                                   size_t len);

/* May this host bind a socket to a (port 0)? 0, or -errno (-EADDRNOTAVAIL: not one of its
 * addresses). Opens and closes one socket; sends nothing. */
int sq_srcaddr_check(const struct sq_addr *a);

/* The ephemeral port range's size (ip_local_port_range), or 28232 (Linux's default) when it
 * cannot be read. */
uint32_t sq_srcaddr_ports(void);

/* How many loopback source addresses conns connections to one destination need, keeping each
 * address at half of its ports (the other half for TIME_WAIT, replaced connections and other
 * processes): 1 up to ports / 2, then one more per ports / 2. */
uint32_t sq_srcaddr_auto_count(uint64_t conns, uint32_t ports);

/* Fills out[0..n) with 127.0.0.1, 127.0.0.2, ... (n <= SQ_SRCADDR_MAX). */
void sq_srcaddr_loopback(struct sq_addr *out, uint32_t n);

/* Formats a's address without its port: "127.0.0.2", "::1". */
void sq_srcaddr_format(const struct sq_addr *a, char *buf, size_t size);

#endif
