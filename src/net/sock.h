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
/* Options of sq_connect_ex. */
enum {
    /* No TCP_NODELAY at the connect: the caller sets it (sq_sock_nodelay) before the first write
     * that Nagle could hold back (one that follows unacknowledged data). A connection that
     * writes one request whole and closes never needs it. */
    SQ_CONNECT_LAZY_NODELAY = 1u << 0,
    /* The client speaks first (HTTP, TLS): TCP_QUICKACK off before the connect, so the
     * handshake's last ACK rides on the first bytes sent instead of a segment of its own
     * (HAProxy's tcp-smart-connect). Never for a protocol whose server speaks first: its
     * greeting would wait for the delayed ACK. */
    SQ_CONNECT_SMART_ACK = 1u << 1,
    /* After an in-progress connect, one zero-length send() asks whether it is established
     * already (on loopback the handshake completes within connect()): *up says so, and the
     * caller may skip the wait for writability and SO_ERROR. */
    SQ_CONNECT_PROBE = 1u << 2,
};
/* sq_connect_from with options. *up: the connection is established already (connect() returned
 * 0, or SQ_CONNECT_PROBE found it so); false: wait for writability, then sq_connect_result. A
 * connect the probe finds failed returns its -errno (the socket closed), as a failed connect()
 * does. */
SQ_MUST_CHECK int sq_connect_ex(const struct sq_addr *a, const struct sq_addr *src, unsigned opts,
                                bool *up);
/* sq_connect_ex on fd when fd >= 0: a socket sq_sock_recycle made ready to connect again (src
 * is ignored), closed on failure as a new one would be; fd -1: a new socket. */
SQ_MUST_CHECK int sq_connect_on(int fd, const struct sq_addr *a, const struct sq_addr *src,
                                unsigned opts, bool *up);
/* Ends a TCP connection whose peer has closed its side (its FIN read or queued) so that the
 * socket can connect again: shutdown(SHUT_WR) sends the FIN close() would send, and only when
 * TCP is then in CLOSE (the peer's ACK of that FIN processed already, as on loopback, where it
 * is processed before shutdown() returns) does connect(AF_UNSPEC) dissolve the association: in
 * CLOSE it sends nothing. What the peer sees is the close() it would have seen; the socket keeps
 * its descriptor, its file and its epoll registration, which a close() and a socket() would
 * have freed and made anew. true: fd may go to sq_connect_on; false: the caller closes fd (its
 * FIN is out; TCP ends the connection as after a close()). Not for AF_UNIX (false). */
SQ_MUST_CHECK bool sq_sock_recycle(int fd);
/* Sets TCP_NODELAY (after SQ_CONNECT_LAZY_NODELAY). Returns 0 or -errno. */
int sq_sock_nodelay(int fd);
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
