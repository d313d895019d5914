/* mqtt_pub_floor.c - the MQTT QoS 0 publish floor for bench/pipeline_figures.py: a bare
 * socket, no library. CONNECT (MQTT 3.1.1, clean session), wait for the CONNACK, then COUNT
 * PUBLISH packets (QoS 0, one topic, SIZE bytes of 'x') written 1,000 to a buffer and the
 * buffer to the socket as fast as it takes them, then PINGREQ and wait for the PINGRESP: the
 * broker has read every PUBLISH before it (MQTT keeps a connection's packets in order).
 * Prints {"sent":N,"seconds":T} from the first write to the PINGRESP.
 * Usage: mqtt_pub_floor PORT COUNT SIZE [TOPIC]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            die("write");
        p += w;
        n -= (size_t)w;
    }
}

/* The remaining length's variable-length encoding; returns its bytes. */
static size_t varlen(unsigned char *p, size_t v)
{
    size_t n = 0;
    do {
        unsigned char b = v % 128;
        v /= 128;
        p[n++] = b | (v ? 0x80 : 0);
    } while (v);
    return n;
}

/* Reads one whole packet into buf; returns its first byte. */
static int read_packet(int fd, unsigned char *buf, size_t cap)
{
    size_t have = 0;
    for (;;) {
        if (have >= 2) {
            size_t len = 0, mul = 1, i = 1;
            while (i < have && i < 5) {
                len += (buf[i] & 127u) * mul;
                mul *= 128;
                if (!(buf[i++] & 128))
                    break;
            }
            if (i <= have && !(buf[i - 1] & 128) && have >= i + len)
                return buf[0];
        }
        if (have == cap) {
            fprintf(stderr, "mqtt_pub_floor: packet too large\n");
            exit(1);
        }
        ssize_t r = read(fd, buf + have, cap - have);
        if (r <= 0)
            die("read");
        have += (size_t)r;
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: mqtt_pub_floor PORT COUNT SIZE [TOPIC]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    long count = atol(argv[2]);
    size_t size = (size_t)atol(argv[3]);
    const char *topic = argc > 4 ? argv[4] : "bench/floor";
    size_t tl = strlen(topic);
    if (tl > 1024 || size > 1 << 20)
        return 2;

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        die("connect");

    /* CONNECT: protocol name "MQTT", level 4, clean session, keep alive 60 s, client id. */
    static const char id[] = "mqtt-pub-floor";
    unsigned char c[64];
    size_t vl = 10 + 2 + sizeof(id) - 1;
    size_t n = 0;
    c[n++] = 0x10;
    n += varlen(c + n, vl);
    memcpy(c + n, "\0\4MQTT\4\2\0\74", 10);
    n += 10;
    c[n++] = 0;
    c[n++] = sizeof(id) - 1;
    memcpy(c + n, id, sizeof(id) - 1);
    n += sizeof(id) - 1;
    write_all(fd, c, n);
    unsigned char in[256];
    if (read_packet(fd, in, sizeof(in)) != 0x20 || in[3] != 0) {
        fprintf(stderr, "mqtt_pub_floor: no CONNACK, or refused\n");
        return 1;
    }

    /* One PUBLISH, then 1,000 of them in a row. */
    unsigned char hdr[8];
    size_t rem = 2 + tl + size;
    size_t hl = 1 + varlen(hdr + 1, rem);
    hdr[0] = 0x30;
    size_t pl = hl + rem;
    enum { PER_WRITE = 1000 };
    unsigned char *chunk = malloc(pl * PER_WRITE);
    if (!chunk)
        return 1;
    unsigned char *p = chunk;
    memcpy(p, hdr, hl);
    p[hl] = (unsigned char)(tl >> 8);
    p[hl + 1] = (unsigned char)tl;
    memcpy(p + hl + 2, topic, tl);
    memset(p + hl + 2 + tl, 'x', size);
    for (int i = 1; i < PER_WRITE; i++)
        memcpy(chunk + (size_t)i * pl, chunk, pl);

    double t0 = now();
    for (long left = count; left > 0; left -= PER_WRITE) {
        long k = left < PER_WRITE ? left : PER_WRITE;
        write_all(fd, chunk, pl * (size_t)k);
    }
    static const unsigned char ping[2] = {0xc0, 0};
    write_all(fd, ping, 2);
    while (read_packet(fd, in, sizeof(in)) != 0xd0)
        ;
    double secs = now() - t0;
    static const unsigned char disc[2] = {0xe0, 0};
    write_all(fd, disc, 2);
    close(fd);
    free(chunk);
    printf("{\"sent\":%ld,\"seconds\":%.6f}\n", count, secs);
    return 0;
}
