/* test_sock.c - net/sock.c on loopback: resolution and its order, address formatting, a
 * non-blocking connect that succeeds and one that is refused, listeners with and without
 * SO_REUSEPORT, and the open-file limit. Every socket is on 127.0.0.1 (or ::1 where the machine
 * has IPv6; those checks are skipped otherwise) and closed by the test that opened it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "guard.h"
#include "net/sock.h"
#include "net/srcaddr.h"
#include <stdlib.h>

static struct sq_addr v4(const char *ip, uint16_t port)
{
    struct sq_addr a;
    memset(&a, 0, sizeof(a));
    struct sockaddr_in *s = (struct sockaddr_in *)&a.ss;
    s->sin_family = AF_INET;
    s->sin_port = htons(port);
    assert_int_equal(inet_pton(AF_INET, ip, &s->sin_addr), 1);
    a.len = sizeof(*s);
    return a;
}

static struct sq_addr v6(const char *ip, uint16_t port)
{
    struct sq_addr a;
    memset(&a, 0, sizeof(a));
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a.ss;
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(port);
    assert_int_equal(inet_pton(AF_INET6, ip, &s->sin6_addr), 1);
    a.len = sizeof(*s);
    return a;
}

/* True when the machine can bind ::1 (containers often have no IPv6). */
static bool have_v6(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sq_addr a = v6("::1", 0);
    bool ok = bind(fd, (const struct sockaddr *)&a.ss, a.len) == 0;
    close(fd);
    return ok;
}

static void fmt(const struct sq_addr *a, char *buf, size_t size)
{
    sq_addr_format(a, buf, size);
}

static void test_addr_format(void **state)
{
    (void)state;
    char buf[80];
    struct sq_addr a = v4("127.0.0.1", 8080);
    fmt(&a, buf, sizeof(buf));
    assert_string_equal(buf, "127.0.0.1:8080");
    a = v4("255.255.255.255", 65535);
    fmt(&a, buf, sizeof(buf));
    assert_string_equal(buf, "255.255.255.255:65535");
    a = v6("::1", 443);
    fmt(&a, buf, sizeof(buf));
    assert_string_equal(buf, "[::1]:443");
    a = v6("2001:db8::1:0:0:1", 1);
    fmt(&a, buf, sizeof(buf));
    assert_string_equal(buf, "[2001:db8::1:0:0:1]:1");
    a = v6("::ffff:10.0.0.1", 80);
    fmt(&a, buf, sizeof(buf));
    assert_string_equal(buf, "[::ffff:10.0.0.1]:80");
    /* A short buffer truncates, NUL-terminated, and writes nothing past its size. */
    char small[8 + 1];
    memset(small, 'x', sizeof(small));
    a = v4("127.0.0.1", 8080);
    fmt(&a, small, 8);
    assert_string_equal(small, "127.0.0");
    assert_int_equal(small[8], 'x');
}

static void test_resolve_numeric(void **state)
{
    (void)state;
    struct sq_addr out[4];
    const char *why = NULL;
    char buf[80];
    int n = sq_resolve("127.0.0.1", 8080, out, 4, &why);
    assert_int_equal(n, 1);
    fmt(&out[0], buf, sizeof(buf));
    assert_string_equal(buf, "127.0.0.1:8080");
    assert_int_equal(out[0].len, sizeof(struct sockaddr_in));
    n = sq_resolve("::1", 9, out, 4, &why);
    assert_int_equal(n, 1);
    fmt(&out[0], buf, sizeof(buf));
    assert_string_equal(buf, "[::1]:9");
    assert_int_equal(out[0].len, sizeof(struct sockaddr_in6));
}

static void test_resolve_order_and_max(void **state)
{
    (void)state;
    struct sq_addr out[16];
    const char *why = NULL;
    /* localhost: IPv4 first whatever the resolver's order, so it behaves the same everywhere. */
    const char *name = "localhost";
    int n = sq_resolve(name, 80, out, 16, &why);
    if (n < 0) { /* a bare chroot may have no /etc/hosts: nothing to order then */
        print_message("localhost does not resolve here (%s): order not checked\n", why);
        name = "127.0.0.1";
        n = sq_resolve(name, 80, out, 16, &why);
    }
    assert_true(n >= 1);
    assert_int_equal(out[0].ss.ss_family, AF_INET);
    for (int i = 1; i < n; i++)
        if (out[i].ss.ss_family == AF_INET)
            assert_int_equal(out[i - 1].ss.ss_family, AF_INET);
    /* max is respected. */
    memset(out, 0xab, sizeof(out));
    assert_int_equal(sq_resolve(name, 80, out, 1, &why), 1);
    assert_int_equal(out[1].len, (socklen_t)0xabababab);
}

static void test_resolve_failure(void **state)
{
    (void)state;
    struct sq_addr out[4];
    const char *why = NULL;
    /* .invalid never resolves (RFC 6761); numeric garbage fails without asking anyone. */
    assert_int_equal(sq_resolve("squall.invalid", 80, out, 4, &why), -SQ_ERESOLVE);
    assert_non_null(why);
    assert_true(why[0] != '\0');
    why = NULL;
    assert_int_equal(sq_resolve("[::1]", 80, out, 4, &why), -SQ_ERESOLVE);
    assert_non_null(why);
}

static bool nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && (fl & O_NONBLOCK);
}

/* Waits for fd to become writable (a connect finished either way). */
static void wait_writable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    assert_int_equal(poll(&p, 1, 5000), 1);
}

static void connect_to_listener(const struct sq_addr *bind_addr)
{
    int lfd = sq_listen(bind_addr, false, 16);
    assert_true(lfd >= 0);
    assert_true(nonblocking(lfd));
    uint16_t port = sq_sock_port(lfd);
    assert_true(port > 0);

    struct sq_addr to = *bind_addr;
    if (to.ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&to.ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)&to.ss)->sin6_port = htons(port);
    int fd = sq_connect_start(&to);
    assert_true(fd >= 0);
    assert_true(nonblocking(fd));
    int one = 0;
    socklen_t len = sizeof(one);
    assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, &len), 0);
    assert_int_not_equal(one, 0);
    assert_true((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    wait_writable(fd);
    assert_int_equal(sq_connect_result(fd), 0);

    /* The listener has it; bytes go through. */
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    int afd = accept(lfd, NULL, NULL);
    assert_true(afd >= 0);
    assert_int_equal(send(fd, "ping", 4, MSG_NOSIGNAL), 4);
    char buf[8];
    p = (struct pollfd){.fd = afd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_int_equal(recv(afd, buf, sizeof(buf), 0), 4);
    assert_memory_equal(buf, "ping", 4);
    close(afd);
    close(fd);
    close(lfd);
}

static void test_connect_loopback(void **state)
{
    (void)state;
    struct sq_addr a = v4("127.0.0.1", 0);
    connect_to_listener(&a);
    if (!have_v6()) {
        print_message("no IPv6 loopback here: the ::1 connect is skipped\n");
        return;
    }
    a = v6("::1", 0);
    connect_to_listener(&a);
}

static void test_connect_refused(void **state)
{
    (void)state;
    /* A socket bound but not listening holds the port, so nothing else can take it and the
     * kernel answers a connect with RST. */
    int hold = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(hold >= 0);
    struct sq_addr a = v4("127.0.0.1", 0);
    assert_int_equal(bind(hold, (const struct sockaddr *)&a.ss, a.len), 0);
    uint16_t port = sq_sock_port(hold);
    assert_true(port > 0);
    a = v4("127.0.0.1", port);
    int fd = sq_connect_start(&a);
    if (fd < 0) {
        /* Loopback may refuse at once. */
        assert_int_equal(fd, -ECONNREFUSED);
    } else {
        wait_writable(fd);
        assert_int_equal(sq_connect_result(fd), -ECONNREFUSED);
        close(fd);
    }
    close(hold);
}

static void test_listen_reuseport(void **state)
{
    (void)state;
    struct sq_addr a = v4("127.0.0.1", 0);
    int l1 = sq_listen(&a, true, 8);
    assert_true(l1 >= 0);
    a = v4("127.0.0.1", sq_sock_port(l1));
    /* With SO_REUSEPORT on both, a second listener shares the port (one per target worker). */
    int l2 = sq_listen(&a, true, 8);
    assert_true(l2 >= 0);
    assert_int_equal(sq_sock_port(l2), sq_sock_port(l1));
    /* Without it, the port is taken. */
    assert_int_equal(sq_listen(&a, false, 8), -EADDRINUSE);
    close(l2);
    close(l1);
    /* Not a socket: no port. */
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    assert_int_equal(sq_sock_port(pfd[0]), 0);
    close(pfd[0]);
    close(pfd[1]);
}

static void test_raise_nofile(void **state)
{
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    uint64_t have = 0;
    /* Already enough: nothing changes, have says what it is. */
    assert_int_equal(sq_raise_nofile(16, &have), 0);
    assert_int_equal(have, rl.rlim_cur);
    if (rl.rlim_max == RLIM_INFINITY)
        return;
    /* Up to the hard limit works... */
    assert_int_equal(sq_raise_nofile(rl.rlim_max, &have), 0);
    assert_int_equal(have, rl.rlim_max);
    /* ...past it is refused with what the limit now is. */
    have = 0;
    assert_int_equal(sq_raise_nofile((uint64_t)rl.rlim_max + 1, &have), -EMFILE);
    assert_int_equal(have, rl.rlim_max);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/* --source-addrs lists: each case whole, with its NUL right before a guard page, and what it
 * yields (the addresses joined by commas) or NULL for a refusal. */
static void test_srcaddr_parse(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"127.0.0.2", "127.0.0.2"},
        {"127.0.0.2-127.0.0.5", "127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5"},
        {"127.0.0.0/30", "127.0.0.0,127.0.0.1,127.0.0.2,127.0.0.3"},
        {"127.0.0.9/31,::1", "127.0.0.8,127.0.0.9,::1"},
        {"10.0.0.1-10.0.0.1", "10.0.0.1"},
        {"10.0.0.7/32", "10.0.0.7"},
        {"127.0.0.255-127.0.1.0", "127.0.0.255,127.0.1.0"},
        {"", NULL},
        {",", NULL},
        {"127.0.0.1,", NULL},
        {"127.0.0.x", NULL},
        {"127.0.0.5-127.0.0.2", NULL},
        {"127.0.0.0/33", NULL},
        {"127.0.0.0/", NULL},
        {"127.0.0.0/3x", NULL},
        {"::1-::2", NULL},
        {"::1/127", NULL},
        {"10.0.0.0/8", NULL}, /* 16M addresses: over SQ_SRCADDR_MAX */
        {"-", NULL},
        {"/", NULL},
    };
    struct guard g;
    guard_init(&g, 256);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *in = guard_put(&g, cases[i].in, strlen(cases[i].in) + 1);
        struct sq_addr *v = NULL;
        size_t n = 0;
        char why[240] = "", got[512] = "";
        int rc = sq_srcaddr_parse(in, &v, &n, why, sizeof(why));
        if (!cases[i].want) {
            if (rc >= 0)
                fail_msg("'%s' parsed", cases[i].in);
            assert_true(why[0] != '\0');
            continue;
        }
        if (rc < 0)
            fail_msg("'%s': %s", cases[i].in, why);
        for (size_t k = 0; k < n; k++) {
            char one[64];
            sq_srcaddr_format(&v[k], one, sizeof(one));
            assert_int_equal(v[k].len, v[k].ss.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                                    : sizeof(struct sockaddr_in6));
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", k ? "," : "", one);
        }
        assert_string_equal(got, cases[i].want);
        free(v);
    }
    guard_free(&g);
}

/* The loopback spread: one address up to half the ports, then one more per half; the addresses
 * 127.0.0.1 up; and a bind check that knows which addresses are this host's. */
static void test_srcaddr_auto(void **state)
{
    (void)state;
    assert_int_equal(sq_srcaddr_auto_count(1, 28232), 1);
    assert_int_equal(sq_srcaddr_auto_count(14116, 28232), 1);
    assert_int_equal(sq_srcaddr_auto_count(14117, 28232), 2);
    assert_int_equal(sq_srcaddr_auto_count(19000, 28232), 2);
    assert_int_equal(sq_srcaddr_auto_count(100000, 28232), 8);
    assert_int_equal(sq_srcaddr_auto_count(1000000, 28232), 71);
    assert_int_equal(sq_srcaddr_auto_count(UINT64_MAX / 2, 28232), SQ_SRCADDR_MAX);
    assert_true(sq_srcaddr_ports() > 0);
    struct sq_addr a[3];
    sq_srcaddr_loopback(a, 3);
    char buf[64];
    sq_srcaddr_format(&a[2], buf, sizeof(buf));
    assert_string_equal(buf, "127.0.0.3");
    assert_int_equal(sq_srcaddr_check(&a[2]), 0);
    struct sq_addr *v = NULL;
    size_t n = 0;
    char why[240];
    assert_int_equal(sq_srcaddr_parse("192.0.2.7", &v, &n, why, sizeof(why)), 0);
    assert_int_equal(sq_srcaddr_check(&v[0]), -EADDRNOTAVAIL); /* TEST-NET-1: never local */
    free(v);
}

/* A connection from 127.0.0.4 arrives from 127.0.0.4, its port picked at connect(). */
static void test_connect_from(void **state)
{
    (void)state;
    struct sq_addr lo;
    const char *why = NULL;
    assert_int_equal(sq_resolve("127.0.0.1", 0, &lo, 1, &why), 1);
    int lfd = sq_listen(&lo, false, 8);
    assert_true(lfd >= 0);
    ((struct sockaddr_in *)&lo.ss)->sin_port = htons(sq_sock_port(lfd));
    struct sq_addr four[4];
    sq_srcaddr_loopback(four, 4);
    int fd = sq_connect_from(&lo, &four[3]);
    assert_true(fd >= 0);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    struct sockaddr_in peer;
    socklen_t plen = sizeof(peer);
    int afd = accept(lfd, (struct sockaddr *)&peer, &plen);
    assert_true(afd >= 0);
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
    assert_string_equal(ip, "127.0.0.4");
    assert_true(ntohs(peer.sin_port) != 0);
    close(afd);
    close(fd);
    close(lfd);
}

static int nodelay_of(int fd)
{
    int on = -1;
    socklen_t len = sizeof(on);
    assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len), 0);
    return on;
}

/* The probe finds a loopback connection up at once (the handshake completes inside connect()):
 * no wait for writability, no SO_ERROR; TCP_NODELAY waits for sq_sock_nodelay; bytes flow. */
static void test_connect_probe(void **state)
{
    (void)state;
    struct sq_addr a = v4("127.0.0.1", 0);
    int lfd = sq_listen(&a, false, 16);
    assert_true(lfd >= 0);
    a = v4("127.0.0.1", sq_sock_port(lfd));
    bool up = false;
    int fd = sq_connect_ex(&a, NULL,
                           SQ_CONNECT_PROBE | SQ_CONNECT_LAZY_NODELAY | SQ_CONNECT_SMART_ACK, &up);
    assert_true(fd >= 0);
    assert_true(up);
    assert_int_equal(nodelay_of(fd), 0);
    assert_int_equal(send(fd, "ping", 4, MSG_NOSIGNAL), 4);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    int afd = accept(lfd, NULL, NULL);
    assert_true(afd >= 0);
    char buf[8];
    p = (struct pollfd){.fd = afd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_int_equal(recv(afd, buf, sizeof(buf), 0), 4);
    assert_int_equal(sq_sock_nodelay(fd), 0);
    assert_int_not_equal(nodelay_of(fd), 0);
    close(afd);
    close(fd);

    /* without the options: TCP_NODELAY at once, and up only if connect() said so */
    fd = sq_connect_ex(&a, NULL, 0, &up);
    assert_true(fd >= 0);
    assert_int_not_equal(nodelay_of(fd), 0);
    if (!up) {
        wait_writable(fd);
        assert_int_equal(sq_connect_result(fd), 0);
    }
    close(fd);
    close(lfd);

    /* a refused connect: the probe returns the connect's error, the socket closed */
    int hold = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(hold >= 0);
    a = v4("127.0.0.1", 0);
    assert_int_equal(bind(hold, (const struct sockaddr *)&a.ss, a.len), 0);
    a = v4("127.0.0.1", sq_sock_port(hold));
    fd = sq_connect_ex(&a, NULL, SQ_CONNECT_PROBE, &up);
    if (fd >= 0) { /* not refused yet when probed (never seen on loopback) */
        assert_false(up);
        wait_writable(fd);
        assert_int_equal(sq_connect_result(fd), -ECONNREFUSED);
        close(fd);
    } else {
        assert_int_equal(fd, -ECONNREFUSED);
    }
    close(hold);
}

/* Accepts the pending connection on lfd (5 s at most). */
static int accept_one(int lfd)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    int afd = accept(lfd, NULL, NULL);
    assert_true(afd >= 0);
    return afd;
}

/* What the server reads after its last byte: 0 (our FIN), or -errno (a reset). */
static int server_reads_end(int afd)
{
    char buf[8];
    struct pollfd p = {.fd = afd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    ssize_t n = recv(afd, buf, sizeof(buf), 0);
    return n < 0 ? -errno : (int)n;
}

/* sq_sock_recycle after the server closed: the server reads our FIN (not a reset), and the same
 * descriptor connects again and carries bytes. Before the server closed, or on a Unix socket,
 * it says no, and the server still sees a FIN. */
static void test_sock_recycle(void **state)
{
    (void)state;
    struct sq_addr a = v4("127.0.0.1", 0);
    int lfd = sq_listen(&a, false, 16);
    assert_true(lfd >= 0);
    a = v4("127.0.0.1", sq_sock_port(lfd));
    bool up = false;
    int fd = sq_connect_ex(&a, NULL, SQ_CONNECT_PROBE | SQ_CONNECT_SMART_ACK, &up);
    assert_true(fd >= 0);
    int afd = accept_one(lfd);
    /* the server answers and closes its side, as `Connection: close` does */
    assert_int_equal(send(afd, "resp", 4, MSG_NOSIGNAL), 4);
    assert_int_equal(shutdown(afd, SHUT_WR), 0);
    char buf[8];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_int_equal(recv(fd, buf, sizeof(buf), 0), 4);
    assert_true(sq_sock_recycle(fd)); /* loopback: the ACK of our FIN is in before it returns */
    assert_int_equal(server_reads_end(afd), 0);
    close(afd);
    int again = sq_connect_on(fd, &a, NULL, SQ_CONNECT_PROBE | SQ_CONNECT_SMART_ACK, &up);
    assert_int_equal(again, fd);
    if (!up)
        wait_writable(fd);
    afd = accept_one(lfd);
    assert_int_equal(send(fd, "ping", 4, MSG_NOSIGNAL), 4);
    p = (struct pollfd){.fd = afd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_int_equal(recv(afd, buf, sizeof(buf), 0), 4);

    /* the server has not closed: our FIN goes out, TCP is not done (FIN_WAIT2), no recycling */
    assert_false(sq_sock_recycle(fd));
    close(fd);
    assert_int_equal(server_reads_end(afd), 0);
    close(afd);
    close(lfd);

    /* a Unix stream socket has no TCP_INFO: no */
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    assert_int_equal(shutdown(sp[1], SHUT_WR), 0);
    assert_false(sq_sock_recycle(sp[0]));
    close(sp[0]);
    close(sp[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addr_format),           cmocka_unit_test(test_resolve_numeric),
        cmocka_unit_test(test_resolve_order_and_max), cmocka_unit_test(test_resolve_failure),
        cmocka_unit_test(test_connect_loopback),      cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_listen_reuseport),      cmocka_unit_test(test_raise_nofile),
        cmocka_unit_test(test_srcaddr_parse),         cmocka_unit_test(test_srcaddr_auto),
        cmocka_unit_test(test_connect_from),          cmocka_unit_test(test_connect_probe),
        cmocka_unit_test(test_sock_recycle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
