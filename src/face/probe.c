/* face/probe.c - one blocking GET with a deadline (see probe.h). */
#include "face/probe.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "http/h1.h"

#define HEAD_MAX 16384

/* Waits for events on fd until deadline. Returns 0 when they came, -ETIMEDOUT, or -errno. */
static int wait_for(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - sq_now_ns();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int ms = (int)((left + SQ_NS_PER_MS - 1) / SQ_NS_PER_MS);
        int n = poll(&p, 1, ms);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

/* A connected socket (fd) or -errno. */
static int connect_by(const struct sq_addr *a, int64_t deadline)
{
    int fd = sq_connect_start(a);
    if (fd < 0)
        return fd;
    int rc = wait_for(fd, POLLOUT, deadline);
    if (rc == 0)
        rc = sq_connect_result(fd);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

int sq_probe_connect(const struct sq_addr *a, int64_t timeout_ns)
{
    int fd = connect_by(a, sq_now_ns() + timeout_ns);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

int sq_probe_get(const struct sq_addr *a, const char *authority, const char *path,
                 int64_t timeout_ns, int *status)
{
    int64_t deadline = sq_now_ns() + timeout_ns;
    char req[2048];
    int n = snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: squall/" SQ_VERSION
                     "\r\nConnection: close\r\n\r\n",
                     path, authority);
    if (n < 0 || (size_t)n >= sizeof(req))
        return -SQ_ETOOBIG;
    int fd = connect_by(a, deadline);
    if (fd < 0)
        return fd;
    int rc = 0;
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN && (rc = wait_for(fd, POLLOUT, deadline)) == 0)
            continue;
        rc = rc ? rc : -errno;
        break;
    }
    char head[HEAD_MAX];
    size_t got = 0;
    while (rc == 0) {
        ssize_t r = recv(fd, head + got, sizeof(head) - got, 0);
        if (r > 0) {
            got += (size_t)r;
            struct sq_h1_response resp = {0};
            struct sq_h1_limits lim = {.max_head_bytes = HEAD_MAX, .max_headers = 100};
            int h = sq_h1_parse_response_head(head, got, &lim, &resp);
            if (h > 0) {
                *status = resp.status;
                break;
            }
            if (h != SQ_H1_PARTIAL || got == sizeof(head))
                rc = h == SQ_H1_PARTIAL ? -SQ_ETOOBIG : h;
            continue;
        }
        if (r == 0) {
            rc = -ECONNRESET;
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN) {
            rc = wait_for(fd, POLLIN, deadline);
            continue;
        }
        rc = -errno;
    }
    close(fd);
    return rc;
}
