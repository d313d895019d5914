/* sink_feed.c - a pipelining HTTP/1.1 feeder of stamped events, for bench/pipeline.py's sink
 * bench (`squall sink --http`).
 *
 * Opens CONNS keep-alive connections to 127.0.0.1:PORT and sends COUNT stamped POSTs over them
 * (COUNT / CONNS each, the remainder on the first), DEPTH requests per send(): a batch is
 * rendered into one buffer and written at once, and the next batch of a connection goes out as
 * soon as at most DEPTH of its requests are unanswered (so up to 2 x DEPTH in flight). DEPTH 1
 * is one request in flight per connection, what a non-pipelining client does.
 *
 * Each connection is one stream of the stamp (docs/internals/proto.md): run id RUN with the
 * connection's index in its low 12 bits (squall's own convention for its workers), sequence
 * numbers 0, 1, 2... and the send time read when its batch is rendered. The request is what
 * squall's quick face sends for `-m POST -b '{"t":"{{$stamp}}"}'`:
 *
 *     POST /e HTTP/1.1 / Host / Content-Length / User-Agent, body {"t":"sq1...."}
 *
 * Answers are read with http/h1's response parser and counted: every one must be a 2xx; any
 * other status, a parse error or an early close ends the run with exit 1. Prints
 * {"sent":N,"answered":N,"seconds":T,"run":"<crockford>"} with T from the first send to the
 * last answer.
 * --chunk B writes each batch in pieces of B bytes (one send() each), so requests are cut
 * wherever B falls, as a client streaming its writes would cut them.
 * Usage: sink_feed PORT COUNT [--conns C] [--depth K] [--chunk B] [--run HEX]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "http/h1.h"
#include "proto/stamp.h"

#define MAX_CONNS 256
#define REQ_MAX   256
#define RBUF      (256 * 1024)

struct feed {
    int fd;
    struct sq_stamp_enc enc;
    long total;    /* requests this connection sends */
    long sent;     /* requests written */
    long answered; /* answers read */
    char *in;      /* answers not parsed yet */
    size_t in_len;
};

static void die(const char *what)
{
    fprintf(stderr, "sink_feed: %s: %s\n", what, strerror(errno));
    exit(1);
}

static size_t chunk; /* --chunk: write a batch in pieces of this many bytes (0: at once) */

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, chunk && n > chunk ? chunk : n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("send");
        p += w;
        n -= (size_t)w;
    }
}

/* Renders up to depth requests of f into buf and sends them with one send(). */
static void send_batch(struct feed *f, long depth, const char *host, char *buf)
{
    long k = f->total - f->sent < depth ? f->total - f->sent : depth;
    size_t off = 0;
    int64_t ns = sq_stamp_now_ns();
    for (long i = 0; i < k; i++) {
        char st[SQ_STAMP_MAX];
        size_t sl = sq_stamp_encode(&f->enc, (uint64_t)(f->sent + i), ns, st);
        int w = snprintf(buf + off, REQ_MAX,
                         "POST /e HTTP/1.1\r\nHost: %s\r\nContent-Length: %zu\r\n"
                         "User-Agent: squall-sink-feed\r\n\r\n{\"t\":\"%.*s\"}",
                         host, sl + 8, (int)sl, st);
        if (w <= 0 || w >= REQ_MAX)
            exit(1);
        off += (size_t)w;
    }
    send_all(f->fd, buf, off);
    f->sent += k;
}

/* Reads what arrived on f and counts the whole answers in it. */
static void read_answers(struct feed *f)
{
    ssize_t r = recv(f->fd, f->in + f->in_len, RBUF - f->in_len, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (r <= 0) {
        fprintf(stderr, "sink_feed: connection closed after %ld of %ld answers\n", f->answered,
                f->sent);
        exit(1);
    }
    f->in_len += (size_t)r;
    size_t off = 0;
    for (;;) {
        struct sq_h1_response rs = {0};
        int hl = sq_h1_parse_response_head(f->in + off, f->in_len - off, NULL, &rs);
        if (hl == SQ_H1_PARTIAL)
            break;
        if (hl < 0) {
            fprintf(stderr, "sink_feed: a malformed answer\n");
            exit(1);
        }
        size_t body = rs.content_length > 0 ? (size_t)rs.content_length : 0;
        if (rs.chunked) {
            fprintf(stderr, "sink_feed: a chunked answer\n");
            exit(1);
        }
        if (f->in_len - off < (size_t)hl + body)
            break;
        if (rs.status < 200 || rs.status > 299) {
            fprintf(stderr, "sink_feed: status %d\n", rs.status);
            exit(1);
        }
        off += (size_t)hl + body;
        f->answered++;
    }
    memmove(f->in, f->in + off, f->in_len - off);
    f->in_len -= off;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: sink_feed PORT COUNT [--conns C] [--depth K] [--chunk B] [--run HEX]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    long count = atol(argv[2]), conns = 4, depth = 64;
    uint64_t run = (uint64_t)sq_stamp_now_ns() << 12;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--conns") == 0 && i + 1 < argc)
            conns = atol(argv[++i]);
        else if (strcmp(argv[i], "--depth") == 0 && i + 1 < argc)
            depth = atol(argv[++i]);
        else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc)
            chunk = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--run") == 0 && i + 1 < argc)
            run = strtoull(argv[++i], NULL, 16) << 12;
        else {
            fprintf(stderr, "sink_feed: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (port <= 0 || count <= 0 || conns <= 0 || conns > MAX_CONNS || depth <= 0 || depth > 4096) {
        fprintf(stderr, "sink_feed: bad PORT, COUNT, --conns (1..256) or --depth (1..4096)\n");
        return 2;
    }
    char host[32];
    snprintf(host, sizeof(host), "127.0.0.1:%d", port);
    static struct feed fs[MAX_CONNS];
    static struct pollfd pfd[MAX_CONNS];
    char *buf = malloc((size_t)depth * REQ_MAX);
    if (!buf)
        die("malloc");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (long c = 0; c < conns; c++) {
        struct feed *f = &fs[c];
        f->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (f->fd < 0 || connect(f->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
            die("connect");
        int one = 1;
        setsockopt(f->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        sq_stamp_enc_init(&f->enc, run | (uint64_t)c);
        f->total = count / conns + (c == 0 ? count % conns : 0);
        f->in = malloc(RBUF);
        if (!f->in)
            die("malloc");
        pfd[c] = (struct pollfd){.fd = f->fd, .events = POLLIN};
    }

    int64_t t0 = sq_now_ns();
    long answered = 0;
    for (long c = 0; c < conns; c++)
        if (fs[c].total)
            send_batch(&fs[c], depth, host, buf);
    while (answered < count) {
        if (poll(pfd, (nfds_t)conns, 10000) <= 0) {
            fprintf(stderr, "sink_feed: no answer for 10 s (%ld of %ld)\n", answered, count);
            return 1;
        }
        for (long c = 0; c < conns; c++) {
            struct feed *f = &fs[c];
            if (!(pfd[c].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            long before = f->answered;
            read_answers(f);
            answered += f->answered - before;
            if (f->answered > f->sent) {
                fprintf(stderr, "sink_feed: more answers than requests\n");
                return 1;
            }
            if (f->sent < f->total && f->sent - f->answered <= depth)
                send_batch(f, depth, host, buf);
        }
    }
    double secs = (double)(sq_now_ns() - t0) / 1e9;
    char rs[SQ_STAMP_MAX];
    struct sq_stamp one = {.run = run, .seq = 0, .ns = 0};
    size_t rl = sq_stamp_format(&one, rs); /* "sq1.<run>.0.0" */
    printf("{\"sent\":%ld,\"answered\":%ld,\"seconds\":%.6f,\"run\":\"%.*s\"}\n", count, answered,
           secs, (int)(rl - 8), rs + 4);
    for (long c = 0; c < conns; c++) {
        close(fs[c].fd);
        free(fs[c].in);
    }
    free(buf);
    return 0;
}
