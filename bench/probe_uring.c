/* bench/probe_uring.c - the floor probe's request loop (bench/probe.c) on io_uring.
 *
 * usage: probe_uring HOST PORT PATH CONNECTIONS SECONDS [MODE]
 * The same closed loop as bench/probe.c: N keep-alive connections, one GET in flight on each,
 * a response counted when its connection has received the length the first response told (no
 * parsing, no latency). The transport differs:
 *  - every socket is a registered (fixed) file;
 *  - one multishot receive per connection, armed once, takes its buffers from a provided buffer
 *    ring; a buffer goes back to the ring as soon as its bytes are counted; the receive is armed
 *    again only when the kernel ends it (no IORING_CQE_F_MORE: out of buffers, or an error);
 *  - the sends a batch of completions calls for are queued as SQEs with IOSQE_CQE_SKIP_SUCCESS
 *    (no completion unless one fails) and submitted together with the wait for the next
 *    completions: one io_uring_enter per loop iteration (io_uring_submit_and_wait_timeout);
 *  - no SQPOLL thread.
 * MODE: "defer" (default: IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, task work
 * run only inside io_uring_enter), "coop" (IORING_SETUP_COOP_TASKRUN) or "plain" (no flag).
 * Prints what bench/probe.c prints (bench/harness.py reads it the same way), and on stderr the
 * mode, the loop iterations (one io_uring_enter each) per response, the receives re-armed and
 * the loop's own CPU per 1,000 responses.
 * Built only when liburing is found (scripts/deps.sh bench installs liburing-dev).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { BUF_SIZE = 4096, BGID = 1 };

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

/* As in bench/probe.c: sends one request on fd and reads its whole response; returns its length
 * in bytes, or -1 when it is not a 2xx or has no Content-Length. */
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

/* user_data: the connection index shifted left once; the low bit marks a send. */
static struct io_uring_sqe *sqe_or_flush(struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe) {
        io_uring_submit(ring);
        sqe = io_uring_get_sqe(ring);
    }
    return sqe;
}

static int arm_recv(struct io_uring *ring, int k)
{
    struct io_uring_sqe *sqe = sqe_or_flush(ring);
    if (!sqe)
        return -1;
    io_uring_prep_recv_multishot(sqe, k, NULL, 0, 0);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    io_uring_sqe_set_data64(sqe, (uint64_t)k << 1);
    return 0;
}

static int queue_send(struct io_uring *ring, int k, const char *req, int len)
{
    struct io_uring_sqe *sqe = sqe_or_flush(ring);
    if (!sqe)
        return -1;
    io_uring_prep_send(sqe, k, req, (size_t)len, 0);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, ((uint64_t)k << 1) | 1);
    return 0;
}

static unsigned pow2_at_least(unsigned v)
{
    unsigned p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 7) {
        fprintf(stderr,
                "usage: probe_uring HOST PORT PATH CONNECTIONS SECONDS [defer|coop|plain]\n");
        return 2;
    }
    int conns = atoi(argv[4]);
    double secs = atof(argv[5]);
    const char *mode = argc == 7 ? argv[6] : "defer";
    unsigned setup_flags;
    if (strcmp(mode, "defer") == 0)
        setup_flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    else if (strcmp(mode, "coop") == 0)
        setup_flags = IORING_SETUP_COOP_TASKRUN;
    else if (strcmp(mode, "plain") == 0)
        setup_flags = 0;
    else {
        fprintf(stderr, "probe_uring: MODE must be defer, coop or plain\n");
        return 2;
    }
    if (conns < 1 || conns > 32768) {
        fprintf(stderr, "probe_uring: CONNECTIONS must be 1 to 32768\n");
        return 2;
    }
    char req[512];
    int len = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", argv[3], argv[1],
                       argv[2]);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
        fprintf(stderr, "probe_uring: IPv4 address expected\n");
        return 2;
    }
    static char first[65536];
    long rlen = -1;
    int *fds = calloc((size_t)conns, sizeof(int));
    long *have = calloc((size_t)conns, sizeof(long));
    /* what the exit frees, whichever way it is reached */
    struct io_uring ring;
    bool ring_up = false;
    struct io_uring_buf_ring *br = MAP_FAILED;
    size_t ring_bytes = 0;
    char *bufs = NULL;
    int status = 1;
    if (!fds || !have)
        goto out;
    for (int i = 0; i < conns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            perror("probe_uring: connect");
            goto out;
        }
        if (i == 0 && (rlen = learn_length(fd, req, len, first, sizeof(first))) <= 0) {
            fprintf(stderr, "probe_uring: the response must be a 2xx with a Content-Length, at "
                            "most 64 KiB\n");
            goto out;
        }
        fds[i] = fd;
    }

    struct io_uring_params p = {.flags = setup_flags};
    unsigned entries = pow2_at_least((unsigned)conns * 2 < 64 ? 64 : (unsigned)conns * 2);
    int rc = io_uring_queue_init_params(entries, &ring, &p);
    if (rc < 0) {
        fprintf(stderr, "probe_uring: io_uring_queue_init (%s): %s\n", mode, strerror(-rc));
        goto out;
    }
    ring_up = true;
    if ((rc = io_uring_register_files(&ring, fds, (unsigned)conns)) < 0) {
        fprintf(stderr, "probe_uring: io_uring_register_files: %s\n", strerror(-rc));
        goto out;
    }
    /* The provided buffer ring: at least 4 buffers per connection (a buffer is back in the ring
     * before the next wait), a power of two, at most 32768. */
    unsigned nbufs = pow2_at_least((unsigned)conns * 4 < 256 ? 256 : (unsigned)conns * 4);
    if (nbufs > 32768)
        nbufs = 32768;
    ring_bytes = nbufs * sizeof(struct io_uring_buf);
    br = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bufs = malloc((size_t)nbufs * BUF_SIZE);
    if (br == MAP_FAILED || !bufs)
        goto out;
    io_uring_buf_ring_init(br);
    struct io_uring_buf_reg reg = {
        .ring_addr = (unsigned long)(uintptr_t)br, .ring_entries = nbufs, .bgid = BGID};
    if ((rc = io_uring_register_buf_ring(&ring, &reg, 0)) < 0) {
        fprintf(stderr, "probe_uring: io_uring_register_buf_ring: %s\n", strerror(-rc));
        goto out;
    }
    int mask = io_uring_buf_ring_mask(nbufs);
    for (unsigned b = 0; b < nbufs; b++)
        io_uring_buf_ring_add(br, bufs + (size_t)b * BUF_SIZE, BUF_SIZE, (unsigned short)b, mask,
                              (int)b);
    io_uring_buf_ring_advance(br, (int)nbufs);

    for (int k = 0; k < conns; k++)
        if (arm_recv(&ring, k) < 0 || queue_send(&ring, k, req, len) < 0)
            goto out;

    unsigned long long responses = 0, loops = 0, rearmed = 0;
    double end = now_s() + secs, t0 = now_s(), c0 = cpu_s();
    while (now_s() < end) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 100000000};
        rc = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, NULL);
        loops++;
        if (rc < 0 && rc != -ETIME && rc != -EINTR) {
            fprintf(stderr, "probe_uring: io_uring_submit_and_wait: %s\n", strerror(-rc));
            goto out;
        }
        unsigned head, seen = 0;
        int returned = 0;
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            seen++;
            int k = (int)(cqe->user_data >> 1);
            if (cqe->user_data & 1) { /* only a failed send completes */
                fprintf(stderr, "probe_uring: send: %s\n", strerror(-cqe->res));
                goto out;
            }
            if (cqe->flags & IORING_CQE_F_BUFFER) {
                unsigned short bid = (unsigned short)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
                io_uring_buf_ring_add(br, bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, bid, mask,
                                      returned++);
            }
            if (cqe->res > 0) {
                have[k] += cqe->res;
                if (have[k] >= rlen) {
                    responses += (unsigned long long)(have[k] / rlen);
                    have[k] %= rlen;
                    if (queue_send(&ring, k, req, len) < 0)
                        goto out;
                }
            } else if (cqe->res != -ENOBUFS) {
                fprintf(stderr, "probe_uring: recv: %s\n",
                        cqe->res == 0 ? "closed by the server" : strerror(-cqe->res));
                goto out;
            }
            if (!(cqe->flags & IORING_CQE_F_MORE)) {
                rearmed++;
                if (arm_recv(&ring, k) < 0)
                    goto out;
            }
        }
        io_uring_buf_ring_advance(br, returned);
        io_uring_cq_advance(&ring, seen);
    }
    double took = now_s() - t0, loop_cpu = cpu_s() - c0;
    printf("probe_uring: %llu responses in %.2fs, %.0f req/s (%ld B each)\n", responses, took,
           (double)responses / took, rlen);
    fprintf(stderr,
            "probe_uring: mode %s, %.3f loop iterations per response, %llu receives re-armed\n",
            mode, responses ? (double)loops / (double)responses : 0.0, rearmed);
    fprintf(stderr, "probe_uring: %.2f ms of CPU per 1,000 responses in the loop\n",
            responses ? loop_cpu * 1e6 / (double)responses : 0.0);
    status = 0;
out:
    if (ring_up)
        io_uring_queue_exit(&ring);
    if (br != MAP_FAILED)
        munmap(br, ring_bytes);
    free(bufs);
    free(fds);
    free(have);
    return status;
}
