/* net/egress.h - the egress policy: may a run touch this address?
 *
 * One policy per run, built from what the operator set (the daemon's allow_hosts, the MCP
 * server's loopback cap and its --allow-host); a plain CLI run has none (NULL: anything goes,
 * and every call below answers yes at the cost of one pointer test). Every path of a run that
 * opens a socket or a listener asks it, on the resolved addresses, before any packet:
 *
 *   sq_egress_lookup    how a run finds a destination: the name is checked before the system
 *                       resolver is asked (no lookup of a name the run may not reach), then
 *                       every address found (--connect-to and --resolve included: the address
 *                       actually connected to is what counts) - once, at set-up;
 *   sq_egress_allows    the last line of defence at connect() or bind(): one address, no
 *                       message, no lookup; it knows the addresses the checks above let through
 *                       for a name the operator allowed.
 *
 * The rules. A destination is allowed when its address is
 *   - loopback (127.0.0.0/8, ::1, and ::ffff:127.x), for an MCP run's connects and for every
 *     listener;
 *   - equal to a numeric entry of the operator's list;
 *   - found by the system resolver for a name of the operator's list (not given by --resolve,
 *     and not a name --connect-to rewrote the destination into unless that name is listed);
 *   - anything, for a daemon run's connects when allow_hosts is empty.
 * A listener binds loopback unless the operator lists the address itself (0.0.0.0 included).
 * The port plays no part. Refusals are -EACCES with a message that names the rule:
 *   "allow_hosts: the target: '127.0.0.1' connects to 10.1.2.3:80 (after connect-to), and
 *    10.1.2.3 is not in allow_hosts [127.0.0.1]"
 *   "cap: targets only on loopback: step 'sub': '10.1.2.3' connects to 10.1.2.3:4222; MCP runs
 *    may only reach loopback unless the operator allows a host (squall mcp --allow-host HOST)"
 *
 * Threads: a policy is built once and then read by any thread. The checks record the addresses
 * they let through for a listed name in a small set of the policy's own (a mutex for writers,
 * an atomic count for readers), so sq_egress_allows on a worker takes no lock. Redirects (when
 * they exist) call sq_egress_lookup on the Location's host as any other destination does.
 */
#ifndef SQ_NET_EGRESS_H
#define SQ_NET_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/dns.h"
#include "net/sock.h"

struct sq_egress; /* opaque; the creator owns it */

enum sq_egress_style {
    SQ_EGRESS_DAEMON, /* allow_hosts: only the listed hosts, or any when the list is empty */
    SQ_EGRESS_MCP,    /* the MCP cap: loopback, and the hosts the operator allowed */
};

enum sq_egress_kind {
    SQ_EGRESS_CONNECT, /* a run connects there */
    SQ_EGRESS_LISTEN,  /* a run listens there (a sink's HTTP source) */
};

struct sq_egress_opts {
    enum sq_egress_style style;
    const char *const *hosts; /* the operator's list: names or numeric addresses (copied) */
    size_t nhosts;
    /* How the operator allows more, for the MCP style's messages (copied); NULL:
     * "squall mcp --allow-host HOST". */
    const char *allow_hint;
};

/* Returns 0 or -ENOMEM; *out is untouched on error. */
SQ_MUST_CHECK int sq_egress_new(const struct sq_egress_opts *o, struct sq_egress **out);
void sq_egress_free(struct sq_egress *e); /* NULL is a no-op */

/* Before a lookup: may the system resolver be asked for name, for a destination of kind? A
 * numeric address always may (it is checked as an address next); "localhost" may under the
 * MCP style and for a listener. what names the destination in the message ("the target",
 * "auth.oauth2.token_url", "sink: nats"). Returns 0, or -EACCES with why filled in. */
SQ_MUST_CHECK int sq_egress_check_name(const struct sq_egress *e, const char *what,
                                       const char *name, enum sq_egress_kind kind, char *why,
                                       size_t len);

/* After: may the run reach (or listen on) the n addresses found for host? name is the name the
 * system resolver was asked for (after --connect-to), or NULL when the addresses were given
 * as they are (--resolve, a numeric host counts as its own name); note says how (" (after
 * connect-to)"), "" or NULL for nothing. Addresses let through because name is listed are
 * remembered for sq_egress_allows. Returns 0, or -EACCES with why naming the rule. */
SQ_MUST_CHECK int sq_egress_check_addrs(const struct sq_egress *e, const char *what,
                                        const char *host, const char *name, const char *note,
                                        const struct sq_addr *a, int n, enum sq_egress_kind kind,
                                        char *why, size_t len);

/* How a run finds a destination: sq_dns_lookup (o may be NULL: no overrides) with the checks
 * above around it. Returns the number of addresses (> 0, at most max), -SQ_ERESOLVE or
 * -SQ_EUSAGE ("cannot resolve 'HOST': ..."), or -EACCES, with why filled in. With e NULL it is
 * sq_dns_lookup. */
SQ_MUST_CHECK int sq_egress_lookup(const struct sq_egress *e, const struct sq_dns_opts *o,
                                   const char *what, const char *host, uint16_t port,
                                   enum sq_egress_kind kind, struct sq_addr *out, int max,
                                   char *why, size_t len);

/* At connect() or bind(): 0 when the policy lets a run of it reach (listen on) a, else -EACCES.
 * No lookup, no lock, no allocation; e NULL is 0. Callers on a hot path test e first. */
int sq_egress_allows(const struct sq_egress *e, const struct sq_addr *a, enum sq_egress_kind kind);

/* True when a is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x.y.z). */
bool sq_egress_is_loopback(const struct sq_addr *a);

#endif
