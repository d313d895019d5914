/* net/sock.h - resolution, non-blocking connect and listening sockets. */
#ifndef SQ_NET_SOCK_H
#define SQ_NET_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/err.h"

/* One resolved address. */
struct sq_addr {
    struct sockaddr_storage ss;
    socklen_t len;
};

/* Resolves host:port (numeric or by name) into at most max addresses, IPv4 first.
 * Returns the count (>0) or SQ_ERESOLVE with *why set to getaddrinfo's message. */
SQ_MUST_CHECK int sq_resolve(const char *host, uint16_t port, struct sq_addr *out, int max,
                             const char **why);

/* A Unix domain socket's path as an address (AF_UNIX: --unix-socket, squall target --unix).
 * Returns 0, or -ENAMETOOLONG for an empty path or one over sun_path's 107 bytes. */
SQ_MUST_CHECK int sq_addr_unix(const char *path, struct sq_addr *out);

/* Formats an address as "127.0.0.1:8080", "[::1]:8080" or "unix:/path". */
void sq_addr_format(const struct sq_addr *a, char *buf, size_t size);

/* Starts a non-blocking connect with TCP_NODELAY (AF_UNIX: a stream socket to the path, no
 * source address). Returns the fd (connect may be in progress:
 * wait for writability, then call sq_connect_result) or -errno. */
SQ_MUST_CHECK int sq_connect_start(const struct sq_addr *a);
/* The same from a local address (net/srcaddr.h): src (port 0, same family as a) is bound with
 * IP_BIND_ADDRESS_NO_PORT first, so the kernel still picks the port per 4-tuple; NULL: the
 * kernel picks the address too. -EADDRNOTAVAIL: src is not one of this host's addresses. */
SQ_MUST_CHECK int sq_connect_from(const struct sq_addr *a, const struct sq_addr *src);
/* 0 when the pending connect succeeded, else -errno (SO_ERROR). */
int sq_connect_result(int fd);

/* A non-blocking listening socket with SO_REUSEADDR (and SO_REUSEPORT when reuseport), bound to
 * a (port 0 picks a free one). Returns the fd or -errno. */
SQ_MUST_CHECK int sq_listen(const struct sq_addr *a, bool reuseport, int backlog);
/* The port a socket is bound to, or 0. */
uint16_t sq_sock_port(int fd);

/* Raises RLIMIT_NOFILE's soft limit to at least want (up to the hard limit).
 * Returns 0 when the limit is now >= want, else -EMFILE with *have set to what it is. */
int sq_raise_nofile(uint64_t want, uint64_t *have);

#endif
