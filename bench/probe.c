/* bench/probe.c - the physical floor for a closed-loop HTTP/1.1 client on this machine.
 *
 * usage: probe HOST PORT PATH CONNECTIONS SECONDS
 * epoll with each fd registered once for EPOLLIN, one write straight after each response and
 * reads of whatever has arrived, nothing else. The first response, read on the first connection
 * before the start, tells the response length (head + Content-Length); every later response
 * must have that same length (true of a fixed endpoint: /fast, /bytes/N, a static file), so a
 * response is complete when its connection has received that many bytes. No parsing, no
 * latency, no timeouts. What squall adds on top of this is what a client costs beyond the
 * kernel's TCP work. Prints the responses and the rate on stdout, and the loop's own CPU (user +
 * system, getrusage, set-up and exit left out) per 1,000 responses on stderr.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* User + system CPU of this process so far, in seconds. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Sends one request on fd and reads its whole response; returns its length in bytes, or -1 when
 * it is not a 2xx or has no Content-Length (chunked, or delimited by the close). */
static long learn_length(int fd, const char *req, int len, char *buf, size_t cap)
{
    if (write(fd, req, (size_t)len) != len)
        return -1;
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n <= 0)
            return -1;
        got += (size_t)n;
        buf[got] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (!end)
            continue;
        if (strncmp(buf, "HTTP/1.1 2", 10) != 0)
            return -1;
        *end = 0;
        char *cl = strcasestr(buf, "\r\ncontent-length:");
        *end = '\r';
        if (!cl)
            return -1;
        long total = (long)(end + 4 - buf) + strtol(cl + 17, NULL, 10);
        if ((long)got >= total)
            return total;
        if ((size_t)total >= cap)
            return -1;
    }
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: probe HOST PORT PATH CONNECTIONS SECONDS\n");
        return 2;
    }
    int conns = atoi(argv[4]);
    double secs = atof(argv[5]);
    char req[512];
    int len = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", argv[3], argv[1],
                       argv[2]);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
        fprintf(stderr, "probe: IPv4 address expected\n");
        return 2;
    }
    static char buf[65536];
    long rlen = -1;
    int ep = epoll_create1(0);
    if (conns < 1) {
        fprintf(stderr, "probe: CONNECTIONS must be at least 1\n");
        return 2;
    }
    int *fds = calloc((size_t)conns, sizeof(int));
    long *have = calloc((size_t)conns, sizeof(long));
    if (!fds || !have)
        return 1;
    for (int i = 0; i < conns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            perror("probe: connect");
            return 1;
        }
        if (i == 0 && (rlen = learn_length(fd, req, len, buf, sizeof(buf))) <= 0) {
            fprintf(stderr,
                    "probe: the response must be a 2xx with a Content-Length, at most 64 KiB\n");
            return 1;
        }
        fds[i] = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        if (write(fd, req, (size_t)len) != len)
            return 1;
    }
    struct epoll_event evs[256];
    unsigned long long responses = 0;
    double end = now_s() + secs, t0 = now_s(), c0 = cpu_s();
    while (now_s() < end) {
        int n = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < n; i++) {
            uint32_t k = evs[i].data.u32;
            ssize_t got = read(fds[k], buf, sizeof(buf));
            if (got <= 0)
                return 1;
            have[k] += got;
            if (have[k] < rlen)
                continue;
            responses += (unsigned long long)(have[k] / rlen);
            have[k] %= rlen;
            if (write(fds[k], req, (size_t)len) != len)
                return 1;
        }
    }
    double took = now_s() - t0, loop_cpu = cpu_s() - c0;
    printf("probe: %llu responses in %.2fs, %.0f req/s (%ld B each)\n", responses, took,
           (double)responses / took, rlen);
    fprintf(stderr, "probe: %.2f ms of CPU per 1,000 responses in the loop\n",
            responses ? loop_cpu * 1e6 / (double)responses : 0.0);
    free(fds);
    free(have);
    return 0;
}
