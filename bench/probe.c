/* bench/probe.c - the physical floor for a closed-loop HTTP/1.1 client on this machine.
 *
 * usage: probe HOST PORT PATH CONNECTIONS SECONDS
 * epoll with each fd registered once for EPOLLIN, one write straight after each response and one
 * read per response, nothing else: it assumes each read holds exactly one whole response, which
 * holds for small responses with one request in flight. No parsing, no latency, no timeouts.
 * What squall adds on top of this is what a client costs beyond the kernel's TCP work.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
    int ep = epoll_create1(0);
    for (int i = 0; i < conns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            perror("probe: connect");
            return 1;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        if (write(fd, req, (size_t)len) != len)
            return 1;
    }
    static char buf[65536];
    struct epoll_event evs[256];
    unsigned long long responses = 0;
    double end = now_s() + secs, t0 = now_s();
    while (now_s() < end) {
        int n = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (read(fd, buf, sizeof(buf)) <= 0)
                return 1;
            responses++;
            if (write(fd, req, (size_t)len) != len)
                return 1;
        }
    }
    double took = now_s() - t0;
    printf("probe: %llu responses in %.2fs, %.0f req/s\n", responses, took,
           (double)responses / took);
    return 0;
}
