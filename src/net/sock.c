/* net/sock.c - thin, allocation-free wrappers over the socket API. */
#include "net/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <unistd.h>

int sq_resolve(const char *host, uint16_t port, struct sq_addr *out, int max, const char **why)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    char service[8];
    snprintf(service, sizeof(service), "%u", (unsigned)port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        *why = gai_strerror(rc);
        return -SQ_ERESOLVE;
    }
    int n = 0;
    /* Two passes: IPv4 first, then IPv6, so "localhost" behaves the same everywhere. */
    for (int pass = 0; pass < 2; pass++) {
        for (struct addrinfo *ai = res; ai && n < max; ai = ai->ai_next) {
            if ((pass == 0) != (ai->ai_family == AF_INET))
                continue;
            if (ai->ai_addrlen > sizeof(out[n].ss))
                continue;
            memcpy(&out[n].ss, ai->ai_addr, ai->ai_addrlen);
            out[n].len = ai->ai_addrlen;
            n++;
        }
    }
    freeaddrinfo(res);
    if (n == 0) {
        *why = "no usable address";
        return -SQ_ERESOLVE;
    }
    return n;
}

int sq_addr_unix(const char *path, struct sq_addr *out)
{
    struct sockaddr_un *un = (struct sockaddr_un *)&out->ss;
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(un->sun_path))
        return -ENAMETOOLONG;
    memset(out, 0, sizeof(*out));
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, path, n + 1);
    out->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    return 0;
}

void sq_addr_format(const struct sq_addr *a, char *buf, size_t size)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (a->ss.ss_family == AF_UNIX) {
        snprintf(buf, size, "unix:%s", ((const struct sockaddr_un *)&a->ss)->sun_path);
        return;
    }
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a->ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
        snprintf(buf, size, "[%s]:%u", ip, (unsigned)ntohs(s6->sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&a->ss;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
        snprintf(buf, size, "%s:%u", ip, (unsigned)ntohs(s4->sin_port));
    }
}

int sq_connect_start(const struct sq_addr *a)
{
    return sq_connect_from(a, NULL);
}

int sq_connect_from(const struct sq_addr *a, const struct sq_addr *src)
{
    bool up;
    return sq_connect_ex(a, src, 0, &up);
}

int sq_connect_ex(const struct sq_addr *a, const struct sq_addr *src, unsigned opts, bool *up)
{
    return sq_connect_on(-1, a, src, opts, up);
}

int sq_connect_on(int fd, const struct sq_addr *a, const struct sq_addr *src, unsigned opts,
                  bool *up)
{
    bool un = a->ss.ss_family == AF_UNIX;
    *up = false;
    if (fd >= 0)
        src = NULL; /* a recycled socket: a source address would be bound already */
    else
        fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    un ? 0 : IPPROTO_TCP);
    if (fd < 0)
        return -errno;
    int one = 1, zero = 0;
    if (un) {
        src = NULL; /* no source address for a path */
    } else {
        if (!(opts & SQ_CONNECT_LAZY_NODELAY))
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (opts & SQ_CONNECT_SMART_ACK)
            setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof(zero));
    }
    /* The port stays the kernel's to pick at connect(), per 4-tuple: a bind() with port 0 alone
     * would reserve a port for the address whatever the destination, and run out at ~28k. */
    if (src && (setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one)) < 0 ||
                bind(fd, (const struct sockaddr *)&src->ss, src->len) < 0)) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (connect(fd, (const struct sockaddr *)&a->ss, a->len) == 0) {
        *up = true;
        return fd;
    }
    if (errno != EINPROGRESS) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (opts & SQ_CONNECT_PROBE) {
        /* TCP answers a send on a connecting socket with EAGAIN, on a failed one with the
         * connect's error, and takes zero bytes from an established one. */
        if (send(fd, "", 0, MSG_NOSIGNAL | MSG_DONTWAIT) == 0) {
            *up = true;
        } else if (errno != EAGAIN) {
            int err = -errno;
            close(fd);
            return err;
        }
    }
    return fd;
}

bool sq_sock_recycle(int fd)
{
    /* Our FIN, as close() would send it; on loopback the peer's ACK of it is processed before
     * shutdown() returns. */
    if (shutdown(fd, SHUT_WR) < 0)
        return false;
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 || len < 1 ||
        ti.tcpi_state != TCP_CLOSE)
        return false; /* not over yet (LAST_ACK, FIN_WAIT): close() lets TCP finish it */
    /* Both FINs sent and acknowledged: the disconnect sends nothing (no RST in CLOSE) */
    struct sockaddr un = {.sa_family = AF_UNSPEC};
    return connect(fd, &un, sizeof(un)) == 0;
}

int sq_sock_nodelay(int fd)
{
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ? -errno : 0;
}

int sq_connect_result(int fd)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        return -errno;
    return -err;
}

int sq_listen(const struct sq_addr *a, bool reuseport, int backlog)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0 || listen(fd, backlog) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

uint16_t sq_sock_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int sq_raise_nofile(uint64_t want, uint64_t *have)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    if (rl.rlim_cur >= want) {
        *have = rl.rlim_cur;
        return 0;
    }
    rlim_t target = want;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < target)
        target = rl.rlim_max;
    rl.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0 || getrlimit(RLIMIT_NOFILE, &rl) == 0)
        *have = rl.rlim_cur;
    return *have >= want ? 0 : -EMFILE;
}
