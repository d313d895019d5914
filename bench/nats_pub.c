/* nats_pub.c - a NATS core publisher on proto/nats.h's encoder, for bench/nats_floor.py.
 *
 * Connects, reads INFO, sends CONNECT, then publishes COUNT messages of SIZE payload bytes to
 * SUBJECT, BATCH PUBs per send(), each PUB encoded into the batch buffer as it goes
 * (sq_nats_encode_pub: the general path, subject checked and size formatted every time) or, with
 * --static, copied from a control line rendered once (what a driver does for a static PUB).
 * Ends with PING and waits for the PONG, so every message has reached the server; prints
 * {"sent":N,"seconds":T} with T from the first send to the PONG.
 * Usage: nats_pub PORT COUNT SIZE [--static] [--batch N] [--subject S]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "proto/nats.h"

static void die(const char *what)
{
    fprintf(stderr, "nats_pub: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            die("send");
        p += w;
        n -= (size_t)w;
    }
}

/* Reads until one whole operation of type op arrives (answering PINGs). */
static void wait_op(int fd, int op)
{
    static char buf[1 << 16];
    static size_t len;
    for (;;) {
        struct sq_nats_event ev;
        int n = sq_nats_parse(buf, len, NULL, &ev, NULL);
        if (n < 0) {
            fprintf(stderr, "nats_pub: %s\n", ev.why);
            exit(1);
        }
        if (n > 0) {
            memmove(buf, buf + n, len - (size_t)n);
            len -= (size_t)n;
            if (ev.op == SQ_NATS_OP_ERR) {
                fprintf(stderr, "nats_pub: -ERR %.*s\n", (int)ev.text.len, ev.text.p);
                exit(1);
            }
            if (ev.op == SQ_NATS_OP_PING)
                send_all(fd, SQ_NATS_PONG, SQ_NATS_PONG_LEN);
            if (ev.op == op)
                return;
            continue;
        }
        ssize_t r = recv(fd, buf + len, sizeof(buf) - len, 0);
        if (r <= 0)
            die("recv");
        len += (size_t)r;
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: nats_pub PORT COUNT SIZE [--static] [--batch N] [--subject S]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    long count = atol(argv[2]);
    size_t size = (size_t)atol(argv[3]);
    bool stat = false;
    long batch = 1000;
    const char *subject = "bench.floor";
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--static") == 0)
            stat = true;
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = atol(argv[++i]);
        else if (strcmp(argv[i], "--subject") == 0 && i + 1 < argc)
            subject = argv[++i];
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    wait_op(fd, SQ_NATS_OP_INFO);
    char cbuf[512];
    struct sq_nats_connect_opts o = {.name = "squall-nats-pub", .echo = true};
    int n = sq_nats_encode_connect(cbuf, sizeof(cbuf), &o);
    if (n < 0)
        return 1;
    send_all(fd, cbuf, (size_t)n);
    send_all(fd, SQ_NATS_PING, SQ_NATS_PING_LEN);
    wait_op(fd, SQ_NATS_OP_PONG);

    char *payload = malloc(size + 1);
    size_t slen = strlen(subject);
    size_t per = 32 + slen + size;
    char *buf = malloc((size_t)batch * per);
    if (!payload || !buf)
        die("malloc");
    memset(payload, 'x', size);
    struct sq_str subj = {subject, slen}, none = {0};
    char head[128];
    int hl = sq_nats_encode_pub_head(head, sizeof(head), subj, none, size);
    if (hl < 0)
        return 1;

    int64_t t0 = sq_now_ns();
    long left = count;
    while (left > 0) {
        long k = left < batch ? left : batch;
        size_t off = 0;
        for (long i = 0; i < k; i++) {
            if (stat) {
                memcpy(buf + off, head, (size_t)hl);
                memcpy(buf + off + hl, payload, size);
                memcpy(buf + off + (size_t)hl + size, "\r\n", 2);
                off += (size_t)hl + size + 2;
            } else {
                int w = sq_nats_encode_pub(buf + off, (size_t)batch * per - off, subj, none,
                                           payload, size);
                if (w < 0)
                    return 1;
                off += (size_t)w;
            }
        }
        send_all(fd, buf, off);
        left -= k;
    }
    send_all(fd, SQ_NATS_PING, SQ_NATS_PING_LEN);
    wait_op(fd, SQ_NATS_OP_PONG);
    double secs = (double)(sq_now_ns() - t0) / 1e9;
    printf("{\"sent\":%ld,\"seconds\":%.6f}\n", count, secs);
    close(fd);
    free(buf);
    free(payload);
    return 0;
}
