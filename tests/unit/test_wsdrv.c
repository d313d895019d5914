/* Unit tests: engine/wsdrv.c, the WebSocket driver, against a server written here (one thread per
 * connection, blocking sockets) that can misbehave on purpose:
 *  - every reply split in two at every byte position in turn (the 101 itself too, and a frame
 *    sent in the same write as the 101);
 *  - replies fragmented with pings between the fragments (the client must answer each pong with
 *    the ping's payload, and reassemble the message);
 *  - a close with 1011 at the first message (the client must answer 1011 and count it);
 *  - a masked frame from the server (a protocol error), an upgrade answered 403 or with a wrong
 *    Sec-WebSocket-Accept, and an upgrade never answered (the connect timeout).
 * The server checks every client frame: masked, a mask that changes from frame to frame, a
 * known opcode. The allocation test links with --wrap=malloc (CMakeLists.txt): a run of 200
 * messages and one of 4,000 allocate exactly as often.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "engine/run.h"
#include "net/sock.h"
#include "plan/tmpl.h"
#include "proto/ws.h"
#include "stats/hist.h"

#include "alloc_count.h"

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ---- the server ---- */

enum mode {
    M_ECHO,      /* echo each message, the reply split in two at a point that moves */
    M_FRAG,      /* echo each message as 1-byte fragments with a ping after each fragment */
    M_CLOSE1011, /* close with 1011 at the first message */
    M_MASKED,    /* answer with a masked frame */
    M_REFUSE,    /* answer the upgrade 403 */
    M_BADKEY,    /* answer the upgrade 101 with a wrong Sec-WebSocket-Accept */
    M_SILENT,    /* read the upgrade, never answer */
};

#define MAX_CONNS 64

struct srv {
    int lfd;
    uint16_t port;
    enum mode mode;
    bool greet; /* send a message in the same write as the 101 */
    bool whole; /* never split a write (the allocation test: a split 101 spills, by timing) */
    int stop;
    pthread_t tid;
    int fds[MAX_CONNS];
    pthread_t conns[MAX_CONNS];
    int nconns;
    /* what the server saw, written by connection threads (atomics) */
    uint64_t msgs, frames, unmasked, same_mask, pings, pongs_ok, pongs_bad, closes_1011, splits;
    uint64_t bad_op;
};

static struct srv S;

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

/* Writes p[0, n) in two pieces, split at k, with a pause between so the client reads them
 * apart. */
static void write_split(int fd, const void *p, size_t n, size_t k)
{
    if (k == 0 || k >= n || S.whole) {
        write_all(fd, p, n);
        return;
    }
    write_all(fd, p, k);
    sleep_us(300);
    write_all(fd, (const char *)p + k, n - k);
    __atomic_add_fetch(&S.splits, 1, __ATOMIC_RELAXED);
}

/* Reads exactly n bytes; false at the end or on stop. */
static bool read_full(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, 100);
        if (r == 0) {
            if (__atomic_load_n(&S.stop, __ATOMIC_ACQUIRE))
                return false;
            continue;
        }
        ssize_t k = read(fd, c, n);
        if (k <= 0)
            return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

/* One unmasked server frame into out; returns its length. */
static size_t frame(uint8_t *out, uint8_t op, bool fin, const void *p, size_t n, bool mask)
{
    size_t i = 0;
    out[i++] = (uint8_t)((fin ? 0x80 : 0) | op);
    if (n < 126) {
        out[i++] = (uint8_t)((mask ? 0x80 : 0) | n);
    } else {
        out[i++] = (uint8_t)((mask ? 0x80 : 0) | 126);
        out[i++] = (uint8_t)(n >> 8);
        out[i++] = (uint8_t)n;
    }
    uint8_t key[4] = {1, 2, 3, 4};
    if (mask) {
        memcpy(out + i, key, 4);
        i += 4;
    }
    for (size_t k = 0; k < n; k++)
        out[i + k] = ((const uint8_t *)p)[k] ^ (mask ? key[k % 4] : 0);
    return i + n;
}

/* Reads one client frame; checks its mask. Returns the payload length, or -1 at the end. */
static long read_frame(int fd, uint8_t *op, bool *fin, uint8_t *payload, size_t cap,
                       uint8_t last_mask[4])
{
    uint8_t h[2];
    if (!read_full(fd, h, 2))
        return -1;
    *fin = h[0] & 0x80;
    *op = h[0] & 15;
    uint64_t len = h[1] & 127;
    if (len == 126) {
        uint8_t e[2];
        if (!read_full(fd, e, 2))
            return -1;
        len = (uint64_t)e[0] << 8 | e[1];
    } else if (len == 127) {
        uint8_t e[8];
        if (!read_full(fd, e, 8))
            return -1;
        len = 0;
        for (int k = 0; k < 8; k++)
            len = len << 8 | e[k];
    }
    __atomic_add_fetch(&S.frames, 1, __ATOMIC_RELAXED);
    uint8_t key[4] = {0};
    if (!(h[1] & 0x80))
        __atomic_add_fetch(&S.unmasked, 1, __ATOMIC_RELAXED);
    else if (!read_full(fd, key, 4))
        return -1;
    if (memcmp(key, last_mask, 4) == 0)
        __atomic_add_fetch(&S.same_mask, 1, __ATOMIC_RELAXED);
    memcpy(last_mask, key, 4);
    if (len > cap || !read_full(fd, payload, (size_t)len))
        return -1;
    for (size_t k = 0; k < len; k++)
        payload[k] ^= key[k % 4];
    if (*op != 0 && *op != 1 && *op != 2 && *op != 8 && *op != 9 && *op != 10)
        __atomic_add_fetch(&S.bad_op, 1, __ATOMIC_RELAXED);
    return (long)len;
}

static bool handshake(int fd, uint64_t conn_no)
{
    char buf[4096];
    size_t have = 0;
    while (!(have >= 4 && memmem(buf, have, "\r\n\r\n", 4))) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) == 0) {
            if (__atomic_load_n(&S.stop, __ATOMIC_ACQUIRE))
                return false;
            continue;
        }
        ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (r <= 0)
            return false;
        have += (size_t)r;
    }
    buf[have] = 0;
    if (S.mode == M_SILENT) {
        while (!__atomic_load_n(&S.stop, __ATOMIC_ACQUIRE))
            sleep_us(5000);
        return false;
    }
    if (S.mode == M_REFUSE) {
        static const char r403[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
        write_all(fd, r403, sizeof(r403) - 1);
        return false;
    }
    char *k = strcasestr(buf, "\r\nSec-WebSocket-Key: ");
    if (!k)
        return false;
    k += 21;
    char accept[SQ_WS_ACCEPT_LEN + 1];
    sq_ws_accept_for_key(k, 24, accept);
    if (S.mode == M_BADKEY)
        accept[3] ^= 1;
    char out[512];
    int n = snprintf(out, sizeof(out),
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                     accept);
    if (S.greet)
        n += (int)frame((uint8_t *)out + n, SQ_WS_TEXT, true, "hello", 5, false);
    /* the 101 too arrives split, at a point that moves from connection to connection */
    write_split(fd, out, (size_t)n, (size_t)(conn_no * 7 % (uint64_t)n));
    return S.mode != M_BADKEY;
}

struct conn_arg {
    int fd;
    uint64_t no;
};

static void *conn_main(void *arg)
{
    struct conn_arg *ca = arg;
    int fd = ca->fd;
    uint64_t no = ca->no;
    free(ca);
    if (!handshake(fd, no))
        return NULL;
    static __thread uint8_t payload[1 << 16], out[(1 << 16) + 64];
    uint8_t mask[4] = {0};
    char pings[64][16]; /* the pings of the current reply, in order */
    int npings = 0, answered = -1;
    for (;;) {
        uint8_t op;
        bool fin;
        long n = read_frame(fd, &op, &fin, payload, sizeof(payload), mask);
        if (n < 0)
            break;
        if (op == SQ_WS_PONG) {
            /* a pong answers the latest ping the client had read: one of ours, never an
             * earlier one than the last pong answered */
            int j = answered + 1;
            while (j < npings &&
                   !((size_t)n == strlen(pings[j]) && memcmp(payload, pings[j], (size_t)n) == 0))
                j++;
            bool ok = j < npings;
            if (ok)
                answered = j;
            __atomic_add_fetch(ok ? &S.pongs_ok : &S.pongs_bad, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (op == SQ_WS_CLOSE) {
            if (n >= 2 && (payload[0] << 8 | payload[1]) == 1011)
                __atomic_add_fetch(&S.closes_1011, 1, __ATOMIC_RELAXED);
            break;
        }
        if (op == SQ_WS_PING)
            continue;
        uint64_t i = __atomic_fetch_add(&S.msgs, 1, __ATOMIC_RELAXED);
        size_t len;
        switch (S.mode) {
        case M_ECHO:
            len = frame(out, op, true, payload, (size_t)n, false);
            write_split(fd, out, len, (size_t)(i % len));
            break;
        case M_FRAG:
            len = 0;
            npings = 0;
            answered = -1;
            for (long k = 0; k < n; k++) {
                len +=
                    frame(out + len, k == 0 ? op : SQ_WS_CONT, k == n - 1, payload + k, 1, false);
                if (k < n - 1 && npings < 64) {
                    size_t pl = (size_t)snprintf(pings[npings], sizeof(pings[0]), "p%ld.%llu", k,
                                                 (unsigned long long)i);
                    len += frame(out + len, SQ_WS_PING, true, pings[npings++], pl, false);
                    __atomic_add_fetch(&S.pings, 1, __ATOMIC_RELAXED);
                }
            }
            write_split(fd, out, len, (size_t)(i % len));
            break;
        case M_CLOSE1011:
            len = frame(out, SQ_WS_CLOSE, true, "\x03\xf3going", 7, false);
            write_all(fd, out, len);
            break;
        case M_MASKED:
            len = frame(out, op, true, payload, (size_t)n, true);
            write_all(fd, out, len);
            break;
        default:
            break;
        }
    }
    return NULL;
}

static void *srv_main(void *arg)
{
    (void)arg;
    uint64_t no = 0;
    while (!__atomic_load_n(&S.stop, __ATOMIC_ACQUIRE)) {
        struct pollfd pfd = {.fd = S.lfd, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        int fd = accept(S.lfd, NULL, NULL);
        if (fd < 0)
            continue;
        if (S.nconns == MAX_CONNS) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct conn_arg *ca = malloc(sizeof(*ca));
        ca->fd = fd;
        ca->no = no++;
        S.fds[S.nconns] = fd;
        if (pthread_create(&S.conns[S.nconns], NULL, conn_main, ca) != 0) {
            close(fd);
            free(ca);
            continue;
        }
        S.nconns++;
    }
    return NULL;
}

static void srv_start_opts(enum mode mode, bool greet, bool whole)
{
    memset(&S, 0, sizeof(S));
    S.mode = mode;
    S.greet = greet;
    S.whole = whole;
    S.lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(S.lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(S.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(S.lfd, 128), 0);
    socklen_t al = sizeof(a);
    assert_int_equal(getsockname(S.lfd, (struct sockaddr *)&a, &al), 0);
    S.port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&S.tid, NULL, srv_main, NULL), 0);
}

static void srv_start(enum mode mode, bool greet)
{
    srv_start_opts(mode, greet, false);
}

static void srv_stop(void)
{
    __atomic_store_n(&S.stop, 1, __ATOMIC_RELEASE);
    pthread_join(S.tid, NULL);
    for (int i = 0; i < S.nconns; i++)
        shutdown(S.fds[i], SHUT_RDWR);
    for (int i = 0; i < S.nconns; i++) {
        pthread_join(S.conns[i], NULL);
        close(S.fds[i]);
    }
    close(S.lfd);
}

/* ---- runs ---- */

static struct sq_ws_run wsr;

static void config(struct sq_run_config *cfg, const char *msg, uint32_t vus, uint64_t iterations)
{
    memset(cfg, 0, sizeof(*cfg));
    memset(&wsr, 0, sizeof(wsr));
    const char *why;
    assert_int_equal(sq_resolve("127.0.0.1", S.port, cfg->addrs, SQ_MAX_ADDRS, &why), 1);
    cfg->naddrs = 1;
    cfg->request = msg;
    cfg->request_len = strlen(msg);
    cfg->threads = 2;
    cfg->timeout_ns = 5 * SQ_NS_PER_S;
    cfg->connect_timeout_ns = 5 * SQ_NS_PER_S;
    cfg->phases = true;
    wsr.host = "127.0.0.1";
    wsr.path = "/ws";
    cfg->ws = &wsr;
    cfg->exec.vus = vus;
    cfg->exec.kind = SQ_EXEC_SHARED_ITERATIONS;
    cfg->exec.iterations = iterations;
    cfg->exec.max_duration_ns = 20 * SQ_NS_PER_S;
}

static void run(struct sq_run_config *cfg, struct sq_result *res)
{
    const char *why;
    assert_int_equal(sq_exec_prepare(&cfg->exec, &why), 0);
    assert_int_equal(sq_run(cfg, res, &why), 0);
    assert_non_null(res->ws);
    printf("  sent %llu completed %llu failed %llu | ws: up %llu, out %llu, in %llu, unmatched "
           "%llu, pings in %llu, pongs out %llu | errors: upgrade %llu parse %llu closed %llu\n",
           (unsigned long long)res->c.sent, (unsigned long long)res->c.completed,
           (unsigned long long)res->c.failed, (unsigned long long)res->ws->upgrades,
           (unsigned long long)res->ws->messages_sent,
           (unsigned long long)res->ws->messages_received, (unsigned long long)res->ws->unmatched,
           (unsigned long long)res->ws->pings_received, (unsigned long long)res->ws->pongs_sent,
           (unsigned long long)res->c.errors[SQ_ERRK_UPGRADE],
           (unsigned long long)res->c.errors[SQ_ERRK_PARSE],
           (unsigned long long)res->c.errors[SQ_ERRK_CLOSED]);
}

static uint64_t tally(const struct sq_ws_tally *t, uint16_t key)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (t->row[i].key == key)
            return t->row[i].n;
    return 0;
}

/* Every client frame the server saw was masked, with a fresh mask, and a known opcode. */
static void assert_masks(void)
{
    assert_true(S.frames > 0);
    assert_int_equal(S.unmasked, 0);
    assert_int_equal(S.bad_op, 0);
    assert_true(S.same_mask <=
                (uint64_t)S.nconns); /* a zero mask once in 2^32: allow one per connection */
}

static void echo_split_everywhere(void **state)
{
    (void)state;
    srv_start(M_ECHO, true);
    struct sq_run_config cfg;
    config(&cfg, "{\"hello\":\"websocket\"}", 4, 400);
    struct sq_result res;
    run(&cfg, &res);
    srv_stop();
    assert_int_equal(res.c.sent, 400);
    assert_int_equal(res.c.completed, 400);
    assert_int_equal(res.c.failed, 0);
    assert_int_equal(res.in_flight, 0);
    assert_int_equal(res.c.conns_opened, 4);
    assert_int_equal(res.ws->upgrades, 4);
    assert_int_equal(res.ws->messages_sent, 400);
    /* the greeting behind each 101 is nobody's reply */
    assert_int_equal(res.ws->messages_received, 404);
    assert_int_equal(res.ws->unmatched, 4);
    assert_int_equal(res.ws->bytes_sent, 400 * 21);
    assert_int_equal(S.msgs, 400);
    assert_true(S.splits >= 300); /* a frame of 23 bytes split at each of its positions */
    assert_int_equal(sq_hist_total(res.latency), 400);
    assert_int_equal(sq_hist_total(res.ws->upgrade_us), 4);
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        assert_int_equal(res.c.errors[k], 0);
    /* every close at the end of the run was ours: no close code from the server */
    assert_int_equal(res.ws->close_codes.n, 0);
    assert_int_equal(res.ws->closes_sent, 4);
    assert_masks();
    sq_result_dispose(&res);
}

static void fragments_and_pings(void **state)
{
    (void)state;
    srv_start(M_FRAG, false);
    struct sq_run_config cfg;
    config(&cfg, "fragmented!", 2, 60);
    struct sq_result res;
    run(&cfg, &res);
    /* the last pongs may still be on their way when the run ends */
    sleep_us(50000);
    srv_stop();
    assert_int_equal(res.c.completed, 60);
    assert_int_equal(res.c.failed, 0);
    assert_int_equal(res.ws->messages_received, 60);
    assert_int_equal(res.ws->bytes_received, 60 * 11);
    assert_int_equal(res.ws->pings_received, 60 * 10);
    /* pings that came in the same read are answered once, with the latest payload: at least
     * one pong per reply, at most one per ping */
    assert_true(res.ws->pongs_sent >= 60 && res.ws->pongs_sent <= res.ws->pings_received);
    assert_int_equal(S.pongs_bad, 0);
    assert_int_equal(S.pongs_ok, res.ws->pongs_sent);
    assert_masks();
    sq_result_dispose(&res);
}

static void close_1011(void **state)
{
    (void)state;
    srv_start(M_CLOSE1011, false);
    struct sq_run_config cfg;
    config(&cfg, "x", 1, 3);
    struct sq_result res;
    run(&cfg, &res);
    sleep_us(50000);
    srv_stop();
    assert_int_equal(res.c.sent, 3);
    assert_int_equal(res.c.failed, 3);
    assert_int_equal(res.c.errors[SQ_ERRK_CLOSED], 3);
    assert_int_equal(tally(&res.ws->close_codes, 1011), 3);
    assert_int_equal(res.ws->upgrades, 3); /* each close replaced the connection */
    assert_int_equal(S.closes_1011, 3);    /* and each was answered with the same code */
    assert_int_equal(res.c.conns_closed_by_server, 3);
    sq_result_dispose(&res);
}

static void masked_server_frame(void **state)
{
    (void)state;
    srv_start(M_MASKED, false);
    struct sq_run_config cfg;
    config(&cfg, "x", 1, 2);
    struct sq_result res;
    run(&cfg, &res);
    srv_stop();
    assert_int_equal(res.c.failed, 2);
    assert_int_equal(res.c.errors[SQ_ERRK_PARSE], 2);
    assert_int_equal(res.c.completed, 0);
    assert_int_equal(res.ws->messages_received, 0);
    sq_result_dispose(&res);
}

static void refused_upgrades(void **state)
{
    (void)state;
    enum mode modes[] = {M_REFUSE, M_BADKEY};
    uint16_t keys[] = {403, SQ_WS_UP_INVALID};
    const char *msgs[] = {"status 403", "Sec-WebSocket-Accept"};
    for (int i = 0; i < 2; i++) {
        srv_start(modes[i], false);
        struct sq_run_config cfg;
        config(&cfg, "x", 2, 10);
        struct sq_result res;
        run(&cfg, &res);
        srv_stop();
        /* nothing ever opened: the run stops before it starts, and says why */
        assert_true(res.aborted);
        assert_int_equal(res.c.sent, 0);
        assert_true(res.c.errors[SQ_ERRK_UPGRADE] >= 2);
        assert_int_equal(tally(&res.ws->upgrade_failed, keys[i]), res.c.errors[SQ_ERRK_UPGRADE]);
        assert_non_null(strstr(res.abort_reason, msgs[i]));
        assert_non_null(strstr(res.upgrade_error, msgs[i]));
        assert_int_equal(res.ws->upgrades, 0);
        sq_result_dispose(&res);
    }
}

static void silent_upgrade_times_out(void **state)
{
    (void)state;
    srv_start(M_SILENT, false);
    struct sq_run_config cfg;
    config(&cfg, "x", 2, 10);
    cfg.connect_timeout_ns = 300 * SQ_NS_PER_MS;
    struct sq_result res;
    int64_t t0 = sq_now_ns();
    run(&cfg, &res);
    int64_t took = sq_now_ns() - t0;
    srv_stop();
    assert_true(res.aborted);
    assert_true(took < 3 * SQ_NS_PER_S);
    assert_int_equal(tally(&res.ws->upgrade_failed, SQ_WS_UP_TIMEOUT), 2);
    assert_non_null(strstr(res.abort_reason, "no answer to the upgrade"));
    sq_result_dispose(&res);
}

/* A message with a template is rendered per send; the server echoes what it got. */
static void templated_message(void **state)
{
    (void)state;
    srv_start(M_ECHO, false);
    struct sq_run_config cfg;
    config(&cfg, "", 2, 50);
    struct sq_tmpl *t;
    struct sq_tmpl_error err;
    const char *src = "{\"vu\":{{$vu}},\"i\":{{$iteration}}}";
    assert_int_equal(sq_tmpl_compile(src, strlen(src), SQ_TMPL_ESC_NONE, NULL, NULL, &t, &err), 0);
    wsr.message = t;
    struct sq_result res;
    run(&cfg, &res);
    srv_stop();
    assert_int_equal(res.c.completed, 50);
    assert_int_equal(res.c.rendered, 50);
    assert_true(res.ws->bytes_sent >= 50 * 14);
    assert_int_equal(res.ws->bytes_received, res.ws->bytes_sent);
    sq_tmpl_free(t);
    sq_result_dispose(&res);
}

/* Client pings every 100 ms are answered by the server's pongs (the echo server ignores pings:
 * here the target answers nothing, so only pings_sent is checked) and a timed run of an idle
 * open-loop pool ends on time. */
static void client_pings(void **state)
{
    (void)state;
    srv_start(M_ECHO, false);
    struct sq_run_config cfg;
    config(&cfg, "x", 2, 0);
    memset(&cfg.exec, 0, sizeof(cfg.exec));
    cfg.exec.vus = 2;
    cfg.exec.kind = SQ_EXEC_CONSTANT_ARRIVAL_RATE;
    cfg.exec.rate = 10;
    cfg.exec.duration_ns = 600 * SQ_NS_PER_MS;
    wsr.ping_ns = 100 * SQ_NS_PER_MS;
    struct sq_result res;
    run(&cfg, &res);
    srv_stop();
    assert_true(res.c.completed >= 5);
    assert_true(res.ws->pings_sent >= 6);
    assert_int_equal(res.c.failed, 0);
    sq_result_dispose(&res);
}

static uint64_t allocs_for(uint64_t messages)
{
    struct sq_run_config cfg;
    config(&cfg, "steady state", 4, messages);
    cfg.threads = 1;
    struct sq_result res;
    const char *why;
    assert_int_equal(sq_exec_prepare(&cfg.exec, &why), 0);
    uint64_t before = alloc_count();
    assert_int_equal(sq_run(&cfg, &res, &why), 0);
    uint64_t used = alloc_count() - before;
    assert_int_equal(res.c.completed, messages);
    sq_result_dispose(&res);
    return used;
}

static void no_allocation_per_message(void **state)
{
    (void)state;
    srv_start_opts(M_ECHO, false, true);
    allocs_for(100);
    uint64_t small = allocs_for(200), large = allocs_for(4000);
    srv_stop();
    printf("  allocations per run: %llu for 200 messages, %llu for 4000\n",
           (unsigned long long)small, (unsigned long long)large);
    assert_int_equal(small, large);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(echo_split_everywhere),
        cmocka_unit_test(fragments_and_pings),
        cmocka_unit_test(close_1011),
        cmocka_unit_test(masked_server_frame),
        cmocka_unit_test(refused_upgrades),
        cmocka_unit_test(silent_upgrade_times_out),
        cmocka_unit_test(templated_message),
        cmocka_unit_test(client_pings),
        cmocka_unit_test(no_allocation_per_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
