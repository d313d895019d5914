/* tests/unit/test_tls.c - net/tls: client and server objects over a non-blocking socketpair:
 * handshakes, verification messages, hostname checks, resumption, ALPN, client certificates,
 * EAGAIN'd writes retried from a moved copy, option errors, the client's suite order, and the
 * connection objects a thread keeps for its next connections. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/tls.h"

static char tmpdir[64];
static char certfile[128]; /* the generated server certificate, PEM */

/* A connected, non-blocking client/server pair of TLS objects. */
struct pair {
    int fd[2];
    struct sq_tls_conn *c, *s;
    int crc, src;
};

static void pair_open(struct pair *p, struct sq_tls_client *cl, struct sq_tls_sessions *cache,
                      struct sq_tls_server *sv)
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, p->fd), 0);
    assert_int_equal(sq_tls_conn_client(cl, cache, p->fd[0], &p->c), 0);
    assert_int_equal(sq_tls_conn_server(sv, p->fd[1], &p->s), 0);
    p->crc = p->src = -EAGAIN;
}

/* Steps both handshakes until neither waits. Everything is local, so no poll is needed. */
static void pair_handshake(struct pair *p)
{
    for (int i = 0; i < 200 && (p->crc == -EAGAIN || p->src == -EAGAIN); i++) {
        if (p->crc == -EAGAIN)
            p->crc = sq_tls_handshake(p->c);
        if (p->src == -EAGAIN)
            p->src = sq_tls_handshake(p->s);
    }
}

static void pair_close(struct pair *p)
{
    sq_tls_conn_free(p->c);
    sq_tls_conn_free(p->s);
    close(p->fd[0]);
    close(p->fd[1]);
}

/* Server sends msg, client reads it (this also delivers TLS 1.3 session tickets). */
static void pair_exchange(struct pair *p)
{
    char buf[SQ_TLS_RECORD_MAX];
    assert_int_equal(sq_tls_write(p->c, "ping", 4), 4);
    ssize_t n = -EAGAIN;
    for (int i = 0; i < 50 && n == -EAGAIN; i++)
        n = sq_tls_read(p->s, buf, sizeof(buf));
    assert_int_equal(n, 4);
    assert_memory_equal(buf, "ping", 4);
    assert_int_equal(sq_tls_write(p->s, "pong!", 5), 5);
    n = -EAGAIN;
    for (int i = 0; i < 50 && n == -EAGAIN; i++)
        n = sq_tls_read(p->c, buf, sizeof(buf));
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "pong!", 5);
}

static struct sq_tls_server *server(const struct sq_tls_server_opts *o)
{
    struct sq_tls_server *s = NULL;
    char err[SQ_TLS_ERRLEN];
    int rc = sq_tls_server_new(o, &s, err, sizeof(err));
    if (rc < 0)
        fail_msg("sq_tls_server_new: %s", err);
    return s;
}

static struct sq_tls_client *client(const struct sq_tls_client_opts *o)
{
    struct sq_tls_client *c = NULL;
    char err[SQ_TLS_ERRLEN];
    int rc = sq_tls_client_new(o, &c, err, sizeof(err));
    if (rc < 0)
        fail_msg("sq_tls_client_new: %s", err);
    return c;
}

static void test_handshake_insecure(void **state)
{
    (void)state;
    struct sq_tls_server *sv = server(&(struct sq_tls_server_opts){0});
    struct sq_tls_client *cl = client(&(struct sq_tls_client_opts){.insecure = true});
    struct pair p;
    pair_open(&p, cl, NULL, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, 0);
    assert_int_equal(p.src, 0);
    assert_string_equal(sq_tls_version(p.c), "TLSv1.3");
    assert_string_equal(sq_tls_alpn(p.c), "http/1.1");
    assert_string_equal(sq_tls_alpn(p.s), "http/1.1");
    assert_true(strlen(sq_tls_cipher(p.c)) > 0);
    assert_false(sq_tls_resumed(p.c));
    pair_exchange(&p);
    /* A clean close reads as the end of the stream. */
    sq_tls_shutdown(p.s);
    char buf[SQ_TLS_RECORD_MAX];
    assert_int_equal(sq_tls_read(p.c, buf, sizeof(buf)), 0);
    pair_close(&p);

    /* TLS 1.2 only. */
    struct sq_tls_client *cl12 =
        client(&(struct sq_tls_client_opts){.insecure = true, .max_version = "1.2"});
    pair_open(&p, cl12, NULL, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, 0);
    assert_string_equal(sq_tls_version(p.c), "TLSv1.2");
    pair_exchange(&p);
    /* The peer going away without close_notify also reads as the end. */
    sq_tls_conn_free(p.s);
    p.s = NULL;
    close(p.fd[1]);
    p.fd[1] = -1;
    assert_int_equal(sq_tls_read(p.c, buf, sizeof(buf)), 0);
    pair_close(&p);
    sq_tls_client_free(cl12);
    sq_tls_client_free(cl);
    sq_tls_server_free(sv);
}

static void test_verify_failure_message(void **state)
{
    (void)state;
    struct sq_tls_server *sv = server(&(struct sq_tls_server_opts){0});
    /* No --cacert: the system store does not know the generated certificate. */
    struct sq_tls_client *cl = client(&(struct sq_tls_client_opts){.host = "localhost"});
    struct pair p;
    pair_open(&p, cl, NULL, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, -EPROTO);
    const char *m = sq_tls_conn_error(p.c);
    assert_non_null(strstr(m, "certificate verify failed: self"));
    assert_non_null(strstr(m, "(depth 0, CN=localhost)"));
    assert_true(p.src < 0); /* the server saw the client's alert */
    assert_non_null(strstr(sq_tls_conn_error(p.s), "handshake failure: tlsv1 alert unknown ca"));
    pair_close(&p);
    sq_tls_client_free(cl);
    sq_tls_server_free(sv);
}

static void test_cacert_and_hostname(void **state)
{
    (void)state;
    struct sq_tls_server *sv = server(&(struct sq_tls_server_opts){.cert_out = certfile});
    static const char *const good[] = {"localhost", "127.0.0.1", NULL};
    struct pair p;
    for (int i = 0; i < 3; i++) {
        struct sq_tls_client *cl =
            client(&(struct sq_tls_client_opts){.cacert = certfile, .host = good[i]});
        pair_open(&p, cl, NULL, sv);
        pair_handshake(&p);
        if (p.crc != 0)
            fail_msg("host %s: %s", good[i] ? good[i] : "(none)", sq_tls_conn_error(p.c));
        pair_exchange(&p);
        pair_close(&p);
        sq_tls_client_free(cl);
    }
    struct sq_tls_client *cl =
        client(&(struct sq_tls_client_opts){.cacert = certfile, .host = "example.com"});
    pair_open(&p, cl, NULL, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, -EPROTO);
    assert_non_null(strstr(sq_tls_conn_error(p.c), "certificate verify failed: hostname mismatch"));
    assert_non_null(strstr(sq_tls_conn_error(p.c), "expected example.com"));
    pair_close(&p);
    sq_tls_client_free(cl);
    /* The same server certificate loaded from files works as well. */
    char keyfile[160];
    snprintf(keyfile, sizeof(keyfile), "%s/none.key", tmpdir);
    struct sq_tls_server *s2 = NULL;
    char err[SQ_TLS_ERRLEN];
    assert_int_equal(
        sq_tls_server_new(&(struct sq_tls_server_opts){.cert = certfile, .key = keyfile}, &s2, err,
                          sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "none.key"));
    sq_tls_server_free(sv);
}

static void test_resumption(void **state)
{
    (void)state;
    struct sq_tls_server *sv = server(&(struct sq_tls_server_opts){0});
    static const char *const maxv[] = {"1.3", "1.2"};
    for (int v = 0; v < 2; v++) {
        struct sq_tls_client *cl =
            client(&(struct sq_tls_client_opts){.insecure = true, .max_version = maxv[v]});
        struct sq_tls_sessions cache = {0};
        struct pair p;
        for (int i = 0; i < 3; i++) {
            pair_open(&p, cl, &cache, sv);
            pair_handshake(&p);
            assert_int_equal(p.crc, 0);
            assert_int_equal(p.src, 0);
            if (i == 0)
                assert_false(sq_tls_resumed(p.c));
            else if (!sq_tls_resumed(p.c))
                fail_msg("TLS %s: connection %d was not resumed", maxv[v], i);
            pair_exchange(&p); /* TLS 1.3: the ticket arrives with the first read */
            assert_true(sq_tls_sessions_count(&cache) > 0);
            pair_close(&p);
        }
        /* Connections that reconnect together each find a session: a TLS 1.3 ticket is spent
         * by the handshake that uses it, so the cache holds one per handshake. */
        enum { K = 4 };
        struct pair q[K];
        for (int round = 0; round < 4; round++) { /* round 0 fills the cache: K live sessions */
            for (int i = 0; i < K; i++)
                pair_open(&q[i], cl, &cache, sv);
            for (int i = 0; i < K; i++) {
                pair_handshake(&q[i]);
                assert_int_equal(q[i].crc, 0);
                if (round > 0 && !sq_tls_resumed(q[i].c))
                    fail_msg("TLS %s: round %d, connection %d of %d together was not resumed",
                             maxv[v], round, i, K);
            }
            for (int i = 0; i < K; i++) {
                pair_exchange(&q[i]);
                pair_close(&q[i]);
            }
        }
        assert_true(sq_tls_sessions_count(&cache) <= SQ_TLS_SESSIONS);
        /* Without a cache nothing resumes. */
        pair_open(&p, cl, NULL, sv);
        pair_handshake(&p);
        assert_int_equal(p.crc, 0);
        assert_false(sq_tls_resumed(p.c));
        pair_close(&p);
        sq_tls_sessions_dispose(&cache);
        sq_tls_sessions_dispose(&cache); /* idempotent */
        sq_tls_client_free(cl);
    }
    sq_tls_server_free(sv);
}

static void test_alpn(void **state)
{
    (void)state;
    struct sq_tls_server *h1 = server(&(struct sq_tls_server_opts){0});
    struct sq_tls_server *h2 = server(&(struct sq_tls_server_opts){.alpn = "h2,http/1.1"});
    struct sq_tls_client *both =
        client(&(struct sq_tls_client_opts){.insecure = true, .alpn = "h2,http/1.1"});
    struct sq_tls_client *only_h2 =
        client(&(struct sq_tls_client_opts){.insecure = true, .alpn = "h2"});
    struct pair p;

    pair_open(&p, both, NULL, h2);
    pair_handshake(&p);
    assert_int_equal(p.crc, 0);
    assert_string_equal(sq_tls_alpn(p.c), "h2");
    assert_string_equal(sq_tls_alpn(p.s), "h2");
    pair_close(&p);

    pair_open(&p, both, NULL, h1);
    pair_handshake(&p);
    assert_int_equal(p.crc, 0);
    assert_string_equal(sq_tls_alpn(p.c), "http/1.1");
    pair_close(&p);

    /* A server that speaks only http/1.1 refuses a client that offers only h2. */
    pair_open(&p, only_h2, NULL, h1);
    pair_handshake(&p);
    assert_int_equal(p.crc, -EPROTO);
    assert_non_null(strstr(sq_tls_conn_error(p.c), "ALPN mismatch"));
    assert_non_null(strstr(sq_tls_conn_error(p.s), "ALPN mismatch: the client offered none of"));
    pair_close(&p);

    sq_tls_client_free(both);
    sq_tls_client_free(only_h2);
    sq_tls_server_free(h1);
    sq_tls_server_free(h2);
}

static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_client_certificate(void **state)
{
    (void)state;
    if (sh("command -v openssl >/dev/null 2>&1") != 0)
        skip();
    const char *d = tmpdir;
    int rc = sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
                "-keyout ca.key -out ca.pem -subj /CN=test-ca -days 1 2>/dev/null && "
                "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout cl.key "
                "-out cl.csr -subj /CN=client 2>/dev/null && "
                "openssl x509 -req -in cl.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
                "-out cl.pem -days 1 2>/dev/null",
                d);
    assert_int_equal(rc, 0);
    char ca[160], cert[160], key[160];
    snprintf(ca, sizeof(ca), "%s/ca.pem", d);
    snprintf(cert, sizeof(cert), "%s/cl.pem", d);
    snprintf(key, sizeof(key), "%s/cl.key", d);
    struct sq_tls_server *sv = server(&(struct sq_tls_server_opts){.client_ca = ca});
    struct sq_tls_client *anon = client(&(struct sq_tls_client_opts){.insecure = true});
    struct sq_tls_client *with =
        client(&(struct sq_tls_client_opts){.insecure = true, .cert = cert, .key = key});
    struct sq_tls_client *anon12 =
        client(&(struct sq_tls_client_opts){.insecure = true, .max_version = "1.2"});
    struct pair p;
    char buf[SQ_TLS_RECORD_MAX];

    /* TLS 1.3: the client's handshake ends before the server has judged its (missing)
     * certificate; the refusal arrives as an alert on the first read. */
    pair_open(&p, anon, NULL, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, 0);
    assert_int_equal(p.src, -EPROTO);
    assert_int_equal(sq_tls_read(p.c, buf, sizeof(buf)), -EPROTO);
    assert_non_null(strstr(sq_tls_conn_error(p.c), "certificate required"));
    pair_close(&p);

    /* TLS 1.2: the handshake itself fails. */
    pair_open(&p, anon12, NULL, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, -EPROTO);
    assert_non_null(strstr(sq_tls_conn_error(p.c), "handshake failure: "));
    pair_close(&p);

    pair_open(&p, with, NULL, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, 0);
    assert_int_equal(p.src, 0);
    pair_exchange(&p);
    pair_close(&p);

    /* The server's key as a client key does not match the client certificate. */
    struct sq_tls_client *bad = NULL;
    char err[SQ_TLS_ERRLEN];
    assert_int_equal(sq_tls_client_new(&(struct sq_tls_client_opts){.cert = cert, .key = ca}, &bad,
                                       err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "key '"));

    sq_tls_client_free(anon);
    sq_tls_client_free(anon12);
    sq_tls_client_free(with);
    sq_tls_server_free(sv);
}

/* A write that hits EAGAIN is retried from a copy of the same bytes (what the server's output
 * queue does), and everything arrives in order. */
static void test_write_eagain_moved_buffer(void **state)
{
    (void)state;
    struct sq_tls_server *sv = server(&(struct sq_tls_server_opts){0});
    struct sq_tls_client *cl = client(&(struct sq_tls_client_opts){.insecure = true});
    struct pair p;
    pair_open(&p, cl, NULL, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, 0);
    size_t n = 4 << 20;
    char *src = malloc(n), *dst = malloc(n);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < n; i++)
        src[i] = (char)(i * 131 + (i >> 9));
    size_t sent = 0, got = 0;
    char *copy = NULL;
    int eagains = 0;
    while (got < n) {
        if (sent < n) {
            size_t k = n - sent < 100000 ? n - sent : 100000;
            const char *from = src + sent;
            if (copy) { /* retry from a moved copy, as long as before or longer */
                memcpy(copy, src + sent, k);
                from = copy;
            }
            ssize_t w = sq_tls_write(p.s, from, k);
            if (w == -EAGAIN) {
                eagains++;
                free(copy);
                copy = malloc(100000);
            } else {
                assert_int_equal(w, (ssize_t)k);
                sent += k;
            }
        }
        ssize_t r = sq_tls_read(p.c, dst + got, n - got);
        if (r > 0)
            got += (size_t)r;
        else
            assert_int_equal(r, -EAGAIN);
    }
    free(copy);
    assert_true(eagains > 0);
    assert_memory_equal(src, dst, n);
    assert_int_equal(sq_tls_pending(p.c), 0);
    free(src);
    free(dst);
    pair_close(&p);
    sq_tls_client_free(cl);
    sq_tls_server_free(sv);
}

static void test_options(void **state)
{
    (void)state;
    assert_int_equal(sq_tls_version_parse("1.2"), 0x0303);
    assert_int_equal(sq_tls_version_parse("1.3"), 0x0304);
    assert_int_equal(sq_tls_version_parse("1.1"), -EINVAL);
    assert_int_equal(sq_tls_version_parse(""), -EINVAL);
    assert_int_equal(sq_tls_version_parse(NULL), -EINVAL);

    struct sq_tls_client *c = NULL;
    char err[SQ_TLS_ERRLEN];
    assert_int_equal(
        sq_tls_client_new(&(struct sq_tls_client_opts){.min_version = "1.3", .max_version = "1.2"},
                          &c, err, sizeof(err)),
        -EINVAL);
    assert_string_equal(err, "min_version 1.3 is above max_version 1.2");
    assert_int_equal(sq_tls_client_new(&(struct sq_tls_client_opts){.cacert = "/nonexistent.pem"},
                                       &c, err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, "cacert '/nonexistent.pem': No such file or directory");
    assert_int_equal(sq_tls_client_new(&(struct sq_tls_client_opts){.cacert = "/etc/hostname"}, &c,
                                       err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "cacert '/etc/hostname': "));
    assert_int_equal(
        sq_tls_client_new(&(struct sq_tls_client_opts){.alpn = "h2,,x"}, &c, err, sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "alpn"));
    assert_int_equal(
        sq_tls_client_new(&(struct sq_tls_client_opts){.key = "/x.key"}, &c, err, sizeof(err)),
        -EINVAL);
    struct sq_tls_server *s = NULL;
    assert_int_equal(
        sq_tls_server_new(&(struct sq_tls_server_opts){.cert = certfile}, &s, err, sizeof(err)),
        -EINVAL);
    assert_int_equal(sq_tls_server_new(&(struct sq_tls_server_opts){.cert_out = "/nonexistent/x"},
                                       &s, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "cert_out '/nonexistent/x'"));
    sq_tls_client_free(NULL);
    sq_tls_server_free(NULL);
    sq_tls_conn_free(NULL);
}

/* Writing to a peer that has gone returns an error; it does not raise SIGPIPE (which this
 * test program leaves at its default action: it would die). */
static void test_no_sigpipe(void **state)
{
    (void)state;
    struct sq_tls_server *sv = server(&(struct sq_tls_server_opts){0});
    struct sq_tls_client *cl = client(&(struct sq_tls_client_opts){.insecure = true});
    struct pair p;
    pair_open(&p, cl, NULL, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, 0);
    close(p.fd[0]);
    p.fd[0] = -1;
    ssize_t w = 0;
    for (int i = 0; i < 10 && w >= 0; i++)
        w = sq_tls_write(p.s, "x", 1);
    assert_true(w == -EPIPE || w == -ECONNRESET);
    assert_non_null(strstr(sq_tls_conn_error(p.s), "write failed: "));
    sq_tls_shutdown(p.s); /* after a failure: nothing is sent, nothing is raised */
    pair_close(&p);
    sq_tls_client_free(cl);
    sq_tls_server_free(sv);
}

/* Not TLS on the other end: the message says so. */
/* The certificate and key in use come out as PEM (the target's HTTP/3 hands them to GnuTLS). */
static void test_server_pem(void **state)
{
    (void)state;
    struct sq_tls_server *s = server(&(struct sq_tls_server_opts){0});
    char *cert = NULL, *key = NULL;
    assert_int_equal(sq_tls_server_pem(s, &cert, &key), 0);
    assert_non_null(strstr(cert, "-----BEGIN CERTIFICATE-----\n"));
    assert_non_null(strstr(cert, "-----END CERTIFICATE-----\n"));
    assert_non_null(strstr(key, "-----BEGIN PRIVATE KEY-----\n"));
    assert_non_null(strstr(key, "-----END PRIVATE KEY-----\n"));
    free(cert);
    sq_tls_pem_free(key);
    sq_tls_pem_free(NULL);
    sq_tls_server_free(s);
}

static void test_not_tls(void **state)
{
    (void)state;
    struct sq_tls_client *cl = client(&(struct sq_tls_client_opts){.insecure = true});
    int fd[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd), 0);
    struct sq_tls_conn *c;
    assert_int_equal(sq_tls_conn_client(cl, NULL, fd[0], &c), 0);
    assert_int_equal(sq_tls_handshake(c), -EAGAIN);
    assert_false(sq_tls_want_write(c));
    static const char resp[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(write(fd[1], resp, sizeof(resp) - 1), (ssize_t)sizeof(resp) - 1);
    assert_int_equal(sq_tls_handshake(c), -EPROTO);
    assert_non_null(strstr(sq_tls_conn_error(c), "is the peer speaking TLS?"));
    sq_tls_conn_free(c);
    close(fd[0]);
    close(fd[1]);
    sq_tls_client_free(cl);
}

static int setup(void **state)
{
    (void)state;
    /* SIGPIPE stays at its default: writes to a closed peer must not raise it. */
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/sq_tls_XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(certfile, sizeof(certfile), "%s/server.pem", tmpdir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return sh("rm -rf '%s'", tmpdir) == 0 ? 0 : -1;
}

/* The client offers AES-128-GCM first (a browser's order), so a server that follows the client's
 * order (OpenSSL's default) negotiates it, in TLS 1.3 and 1.2. */
static void test_client_suite_order(void **state)
{
    (void)state;
    struct sq_tls_server *sv = server(&(struct sq_tls_server_opts){0});
    static const char *const maxv[] = {"1.3", "1.2"};
    static const char *const want[] = {"TLS_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"};
    for (int v = 0; v < 2; v++) {
        struct sq_tls_client *cl =
            client(&(struct sq_tls_client_opts){.insecure = true, .max_version = maxv[v]});
        struct pair p;
        pair_open(&p, cl, NULL, sv);
        pair_handshake(&p);
        assert_int_equal(p.crc, 0);
        assert_string_equal(sq_tls_cipher(p.c), want[v]);
        assert_string_equal(sq_tls_cipher(p.s), want[v]);
        pair_close(&p);
        sq_tls_client_free(cl);
    }
    sq_tls_server_free(sv);
}

/* A thread's cache serves several client contexts (hosts): a session is offered only by the
 * context that got it, so a context with other checks still verifies the server. */
static void test_sessions_per_context(void **state)
{
    (void)state;
    struct sq_tls_server *sv = server(&(struct sq_tls_server_opts){.cert_out = certfile});
    struct sq_tls_client *cl =
        client(&(struct sq_tls_client_opts){.cacert = certfile, .host = "localhost"});
    struct sq_tls_client *strict = client(&(struct sq_tls_client_opts){.host = "localhost"});
    struct sq_tls_sessions cache = {0};
    struct pair p;
    pair_open(&p, cl, &cache, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, 0);
    pair_exchange(&p);
    pair_close(&p);
    assert_int_equal(sq_tls_sessions_count(&cache), 1);
    pair_open(&p, strict, &cache, sv); /* trusts no CA of this server: must not resume */
    pair_handshake(&p);
    assert_int_equal(p.crc, -EPROTO);
    assert_non_null(strstr(sq_tls_conn_error(p.c), "certificate verify failed"));
    pair_close(&p);
    assert_int_equal(sq_tls_sessions_count(&cache), 1); /* still cl's */
    pair_open(&p, cl, &cache, sv);
    pair_handshake(&p);
    assert_int_equal(p.crc, 0);
    assert_true(sq_tls_resumed(p.c));
    pair_close(&p);
    sq_tls_sessions_dispose(&cache);
    sq_tls_client_free(strict);
    sq_tls_client_free(cl);
    sq_tls_server_free(sv);
}

/* A finished client connection leaves its SSL in the thread's cache; the next connection of the
 * same context takes it, resumes, verifies and exchanges as a fresh one; a failed connection
 * leaves nothing; another context's spare is not used. */
static void test_spare_connections(void **state)
{
    (void)state;
    struct sq_tls_server *sv = server(&(struct sq_tls_server_opts){.cert_out = certfile});
    struct sq_tls_client *cl = client(&(struct sq_tls_client_opts){
        .cacert = certfile, .host = "localhost", .alpn = "h2,http/1.1"});
    struct sq_tls_client *strict = client(&(struct sq_tls_client_opts){.host = "localhost"});
    struct sq_tls_sessions cache = {0};
    struct pair p;
    for (int i = 0; i < 4; i++) {
        pair_open(&p, cl, &cache, sv);
        assert_int_equal(sq_tls_sessions_spares(&cache), 0); /* taken (after the first) */
        pair_handshake(&p);
        assert_int_equal(p.crc, 0);
        assert_int_equal(p.src, 0);
        assert_int_equal(sq_tls_resumed(p.c), i > 0);
        assert_string_equal(sq_tls_alpn(p.c), "http/1.1");
        pair_exchange(&p);
        pair_close(&p);
        assert_int_equal(sq_tls_sessions_spares(&cache), 1);
    }
    /* Another context (one that trusts no CA): the spare is not used, and its failure keeps
     * nothing. */
    pair_open(&p, strict, &cache, sv);
    assert_int_equal(sq_tls_sessions_spares(&cache), 0);
    pair_handshake(&p);
    assert_int_equal(p.crc, -EPROTO);
    assert_non_null(strstr(sq_tls_conn_error(p.c), "certificate verify failed"));
    pair_close(&p);
    assert_int_equal(sq_tls_sessions_spares(&cache), 0);
    /* A connection closed mid-handshake keeps nothing either. */
    pair_open(&p, cl, &cache, sv);
    assert_int_equal(sq_tls_handshake(p.c), -EAGAIN);
    pair_close(&p);
    assert_int_equal(sq_tls_sessions_spares(&cache), 0);
    /* Connections open together: each closed one leaves a spare, up to SQ_TLS_SPARES. */
    enum { K = SQ_TLS_SPARES + 2 };
    struct pair q[K];
    for (int i = 0; i < K; i++) {
        pair_open(&q[i], cl, &cache, sv);
        pair_handshake(&q[i]);
        assert_int_equal(q[i].crc, 0);
    }
    for (int i = 0; i < K; i++)
        pair_close(&q[i]);
    assert_int_equal(sq_tls_sessions_spares(&cache), SQ_TLS_SPARES);
    sq_tls_sessions_dispose(&cache);
    assert_int_equal(sq_tls_sessions_spares(&cache), 0);
    sq_tls_client_free(strict);
    sq_tls_client_free(cl);
    sq_tls_server_free(sv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_insecure),
        cmocka_unit_test(test_verify_failure_message),
        cmocka_unit_test(test_cacert_and_hostname),
        cmocka_unit_test(test_resumption),
        cmocka_unit_test(test_alpn),
        cmocka_unit_test(test_client_certificate),
        cmocka_unit_test(test_write_eagain_moved_buffer),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_not_tls),
        cmocka_unit_test(test_server_pem),
        cmocka_unit_test(test_no_sigpipe),
        cmocka_unit_test(test_client_suite_order),
        cmocka_unit_test(test_sessions_per_context),
        cmocka_unit_test(test_spare_connections),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
