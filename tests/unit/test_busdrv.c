/* Unit tests: the bus drivers (engine/natsdrv.c, mqttdrv.c over busio.c) against Debian's
 * nats-server (JetStream on, a temp store, its monitoring port) and mosquitto (a generated
 * config), each started here on a free loopback port and stopped by PID.
 *
 * What they hold: every message is accounted for (sent = completed + failed + in flight, the
 * open loop's arrivals = sent + dropped), the broker's own count equals what was sent
 * (nats-server /varz in_msgs, /jsz messages), replies and acks complete exactly their request,
 * no responders and a missing broker are counted by kind, a broker stopped and started again
 * mid-run is reconnected to (counted) while the run goes on, and the steady state allocates
 * nothing (the file links with --wrap=malloc/calloc/realloc).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "base/clock.h"
#include "engine/busconf.h"
#include "face/busopts.h"
#include "engine/run.h"
#include "net/sock.h"
#include "proto/nats.h"
#include "stats/hist.h"

#include "alloc_count.h"

extern char **environ;

/* ---- servers ---- */

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int dial(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static bool wait_port(uint16_t port, pid_t pid)
{
    for (int i = 0; i < 200; i++) {
        int fd = dial(port);
        if (fd >= 0) {
            close(fd);
            return true;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return false;
        usleep(25000);
    }
    return false;
}

static void stop_pid(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGTERM);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
}

static pid_t spawn(const char *const *cargv)
{
    char *argv[16];
    size_t n = 0;
    for (; cargv[n] && n < 15; n++)
        argv[n] = (char *)(uintptr_t)cargv[n];
    argv[n] = NULL;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 1, 0);
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

static pid_t nats_pid;
static uint16_t nats_port, nats_mon;
static char nats_dir[64];

static bool nats_start(void)
{
    char p[8], m[8];
    snprintf(p, sizeof(p), "%u", nats_port);
    snprintf(m, sizeof(m), "%u", nats_mon);
    const char *argv[] = {"nats-server", "-a",  "127.0.0.1", "-p", p, "-m", m,
                          "-js",         "-sd", nats_dir,    NULL};
    nats_pid = spawn(argv);
    return nats_pid > 0 && wait_port(nats_port, nats_pid) && wait_port(nats_mon, nats_pid);
}

static int nats_setup(void **state)
{
    (void)state;
    snprintf(nats_dir, sizeof(nats_dir), "/tmp/sq-busdrv-XXXXXX");
    if (!mkdtemp(nats_dir))
        return -1;
    nats_port = free_port();
    nats_mon = free_port();
    return nats_start() ? 0 : -1;
}

static int nats_teardown(void **state)
{
    (void)state;
    stop_pid(&nats_pid);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", nats_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* GET path on the monitoring port; the number after "key": in the answer. */
static int64_t mon_get(const char *path, const char *key)
{
    int fd = dial(nats_mon);
    if (fd < 0)
        return -1;
    char req[256], buf[1 << 16];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(buf) - 1 && (r = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
        got += (size_t)r;
    close(fd);
    buf[got] = '\0';
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    char *at = strstr(buf, pat);
    if (!at)
        return -1;
    return strtoll(at + strlen(pat), NULL, 10);
}

/* A blocking NATS client for the test's own side: INFO, CONNECT, then the caller's bytes. */
static int nats_client(void)
{
    int fd = dial(nats_port);
    if (fd < 0)
        return -1;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    const char hello[] = "CONNECT {\"verbose\":false,\"headers\":true}\r\n";
    if (n <= 0 || write(fd, hello, sizeof(hello) - 1) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends cmd and waits for a reply MSG on the inbox it subscribed (the JetStream API). */
static bool nats_api(const char *subject, const char *json)
{
    int fd = nats_client();
    if (fd < 0)
        return false;
    char out[1024];
    int n = snprintf(out, sizeof(out), "SUB _INBOX.api 1\r\nPUB %s _INBOX.api %zu\r\n%s\r\n",
                     subject, strlen(json), json);
    bool ok = write(fd, out, (size_t)n) == n;
    char buf[4096];
    size_t got = 0;
    while (ok && got < sizeof(buf) - 1) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        buf[got] = '\0';
        if (strstr(buf, "MSG _INBOX.api") && strstr(strstr(buf, "MSG _INBOX.api"), "}\r\n"))
            break;
    }
    close(fd);
    return ok && strstr(buf, "MSG _INBOX.api") && !strstr(buf, "\"error\"");
}

/* ---- a responder for --request: answers every MSG on its subject with the same payload ---- */

struct responder {
    pthread_t tid;
    int fd;
    uint64_t answered;
    int stop;
};

static void *responder_main(void *arg)
{
    struct responder *r = arg;
    static char buf[1 << 16];
    char out[1 << 16];
    size_t have = 0;
    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        ssize_t n = read(r->fd, buf + have, sizeof(buf) - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        size_t off = 0, olen = 0;
        for (;;) {
            struct sq_nats_event ev;
            int rc = sq_nats_parse(buf + off, have - off, NULL, &ev, NULL);
            if (rc <= 0)
                break;
            off += (size_t)rc;
            if (ev.op == SQ_NATS_OP_PING) {
                memcpy(out + olen, "PONG\r\n", 6);
                olen += 6;
            } else if (ev.op == SQ_NATS_OP_MSG && ev.reply.len) {
                int k = sq_nats_encode_pub(out + olen, sizeof(out) - olen, ev.reply,
                                           (struct sq_str){"", 0}, ev.payload.p, ev.payload.len);
                if (k > 0)
                    olen += (size_t)k;
                r->answered++;
            }
            if (olen > sizeof(out) - 4096) {
                if (write(r->fd, out, olen) < 0)
                    return NULL;
                olen = 0;
            }
        }
        if (olen && write(r->fd, out, olen) < 0)
            break;
        memmove(buf, buf + off, have - off);
        have -= off;
    }
    return NULL;
}

static void responder_start(struct responder *r, const char *subject)
{
    memset(r, 0, sizeof(*r));
    r->fd = nats_client();
    assert_true(r->fd >= 0);
    char sub[256];
    int n = snprintf(sub, sizeof(sub), "SUB %s 1\r\nPING\r\n", subject);
    assert_int_equal(write(r->fd, sub, (size_t)n), n);
    char pong[256];
    assert_true(read(r->fd, pong, sizeof(pong)) > 0); /* the PONG: the SUB is in place */
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(pthread_create(&r->tid, NULL, responder_main, r), 0);
}

static void responder_stop(struct responder *r)
{
    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    shutdown(r->fd, SHUT_RDWR);
    pthread_join(r->tid, NULL);
    close(r->fd);
}

/* ---- runs ---- */

struct bus_run {
    struct sq_run_config cfg;
    struct sq_bus_config bus;
    struct sq_result res;
};

static void bus_config(struct bus_run *r, const char *url, const struct sq_bus_opts *o,
                       uint32_t conns)
{
    memset(r, 0, sizeof(*r));
    struct sq_bus_url u;
    const char *why = NULL;
    assert_int_equal(sq_bus_url_parse(url, SQ_BUS_URL_TARGET, &u, &why), 0);
    char err[256];
    int rc = sq_bus_prepare(&r->bus, &u, o, err, sizeof(err));
    if (rc != 0)
        fail_msg("prepare: %s", err);
    assert_int_equal(sq_resolve(u.host, u.port, r->cfg.addrs, SQ_MAX_ADDRS, &why), 1);
    sq_bus_url_dispose(&u);
    r->cfg.naddrs = 1;
    r->cfg.bus = &r->bus;
    r->cfg.threads = conns > 1 ? 2 : 1;
    r->cfg.exec.vus = conns * r->bus.window;
    r->cfg.timeout_ns = 5 * SQ_NS_PER_S;
    r->cfg.connect_timeout_ns = 2 * SQ_NS_PER_S;
}

static void bus_iterations(struct bus_run *r, uint64_t n)
{
    const char *why;
    r->cfg.exec.kind = SQ_EXEC_SHARED_ITERATIONS;
    r->cfg.exec.iterations = n;
    assert_int_equal(sq_exec_prepare(&r->cfg.exec, &why), 0);
}

static void bus_rate(struct bus_run *r, double rate, int64_t dur_ns)
{
    const char *why;
    r->cfg.exec.kind = SQ_EXEC_CONSTANT_ARRIVAL_RATE;
    r->cfg.exec.rate = rate;
    r->cfg.exec.duration_ns = dur_ns;
    r->cfg.exec.graceful_stop_ns = SQ_NS_PER_S;
    assert_int_equal(sq_exec_prepare(&r->cfg.exec, &why), 0);
}

static void bus_go(struct bus_run *r)
{
    const char *why;
    int rc = sq_run(&r->cfg, &r->res, &why);
    if (rc != 0)
        fail_msg("sq_run: %s", why);
}

static void bus_done(struct bus_run *r)
{
    sq_result_dispose(&r->res);
    sq_bus_config_dispose(&r->bus);
}

static uint64_t errors_of(const struct sq_result *res)
{
    uint64_t e = 0;
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        e += res->c.errors[k];
    return e;
}

static void assert_accounts(const struct sq_result *res)
{
    assert_int_equal(res->c.sent, res->c.completed + res->c.failed + res->in_flight);
    if (res->open)
        assert_int_equal(res->arrivals, res->c.sent + res->c.dropped);
}

static struct sq_bus_opts opts(void)
{
    struct sq_bus_opts o = {.qos = -1};
    return o;
}

static void nats_core_counts_match_varz(void **state)
{
    (void)state;
    struct bus_run r;
    struct sq_bus_opts o = opts();
    o.payload = "0123456789abcdef";
    o.payload_len = 16;
    o.window = 100;
    char url[128];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u/bench.core", nats_port);
    bus_config(&r, url, &o, 2);
    bus_iterations(&r, 20000);
    int64_t before = mon_get("/varz", "in_msgs");
    bus_go(&r);
    int64_t after = mon_get("/varz", "in_msgs");
    printf("core: sent %llu completed %llu pings %llu flushes %llu varz +%lld\n",
           (unsigned long long)r.res.c.sent, (unsigned long long)r.res.c.completed,
           (unsigned long long)r.res.c.bus.pings, (unsigned long long)r.res.c.bus.flushes,
           (long long)(after - before));
    assert_int_equal(r.res.c.completed, 20000);
    assert_int_equal(r.res.c.sent, 20000);
    assert_int_equal(r.res.in_flight, 0);
    assert_int_equal(errors_of(&r.res), 0);
    assert_int_equal(after - before, 20000);
    assert_true(r.res.c.bus.pings > 0);
    assert_int_equal(sq_hist_total(r.res.latency), 20000);
    assert_int_equal(r.res.c.conns_opened, 2);
    assert_int_equal(r.res.c.bus.stamped, 0);
    bus_done(&r);
}

static void nats_core_open_loop_accounts(void **state)
{
    (void)state;
    struct bus_run r;
    struct sq_bus_opts o = opts(); /* the default payload: a stamp */
    o.window = 1000;
    char url[128];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u/bench.open", nats_port);
    bus_config(&r, url, &o, 1);
    bus_rate(&r, 20000, SQ_NS_PER_S);
    int64_t before = mon_get("/varz", "in_msgs");
    bus_go(&r);
    int64_t after = mon_get("/varz", "in_msgs");
    printf("open: arrivals %llu sent %llu completed %llu dropped %llu failed %llu p50 %lld us "
           "p99 %lld us pings %llu\n",
           (unsigned long long)r.res.arrivals, (unsigned long long)r.res.c.sent,
           (unsigned long long)r.res.c.completed, (unsigned long long)r.res.c.dropped,
           (unsigned long long)r.res.c.failed, (long long)sq_hist_percentile(r.res.latency, 50),
           (long long)sq_hist_percentile(r.res.latency, 99), (unsigned long long)r.res.c.bus.pings);
    assert_accounts(&r.res);
    assert_int_equal(r.res.arrivals, 20000);
    assert_int_equal((uint64_t)(after - before), r.res.c.sent);
    assert_int_equal(r.res.c.bus.stamped, r.res.c.sent);
    assert_int_equal(r.res.nstreams, 1);
    assert_int_equal(r.res.stamped[0], r.res.c.sent);
    assert_int_equal(r.res.c.completed + r.res.in_flight, r.res.c.sent);
    assert_true(r.res.c.completed > 0);
    bus_done(&r);
}

static uint64_t nats_allocs_for(uint64_t n)
{
    struct bus_run r;
    struct sq_bus_opts o = opts();
    o.payload = "{\"id\":\"{{$stamp}}\",\"vu\":{{$vu}}}";
    o.payload_len = strlen(o.payload);
    o.window = 20;
    char url[128];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u/bench.alloc", nats_port);
    bus_config(&r, url, &o, 1);
    bus_iterations(&r, n);
    uint64_t before = alloc_count();
    bus_go(&r);
    uint64_t used = alloc_count() - before;
    assert_int_equal(r.res.c.completed, n);
    bus_done(&r);
    return used;
}

static void nats_no_allocation_per_message(void **state)
{
    (void)state;
    nats_allocs_for(500);
    uint64_t small = nats_allocs_for(2000), large = nats_allocs_for(40000);
    printf("allocations per run: %llu for 2,000 messages, %llu for 40,000\n",
           (unsigned long long)small, (unsigned long long)large);
    assert_int_equal(small, large);
}

static void nats_jetstream_pubacks(void **state)
{
    (void)state;
    assert_true(nats_api("$JS.API.STREAM.CREATE.SQJS",
                         "{\"name\":\"SQJS\",\"subjects\":[\"js.>\"],\"storage\":\"memory\"}"));
    struct bus_run r;
    struct sq_bus_opts o = opts();
    o.jetstream = true;
    o.window = 16;
    char url[128];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u/js.orders", nats_port);
    bus_config(&r, url, &o, 1);
    bus_iterations(&r, 3000);
    bus_go(&r);
    assert_int_equal(r.res.c.completed, 3000);
    assert_int_equal(r.res.c.bus.acks, 3000);
    assert_int_equal(r.res.c.bus.late, 0);
    assert_int_equal(errors_of(&r.res), 0);
    assert_int_equal(mon_get("/jsz", "messages"), 3000);
    bus_done(&r);

    /* a subject no stream listens to: every publish fails as no_responders */
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u/nostream.x", nats_port);
    bus_config(&r, url, &o, 1);
    bus_iterations(&r, 200);
    bus_go(&r);
    assert_int_equal(r.res.c.failed, 200);
    assert_int_equal(r.res.c.errors[SQ_ERRK_NO_RESPONDERS], 200);
    assert_accounts(&r.res);
    bus_done(&r);
}

static void nats_request_reply(void **state)
{
    (void)state;
    struct responder rs;
    responder_start(&rs, "svc.echo");
    struct bus_run r;
    struct sq_bus_opts o = opts();
    o.request = true;
    o.window = 8;
    char url[128];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u/svc.echo", nats_port);
    bus_config(&r, url, &o, 2);
    bus_iterations(&r, 4000);
    bus_go(&r);
    responder_stop(&rs);
    assert_int_equal(r.res.c.completed, 4000);
    assert_int_equal(r.res.c.bus.acks, 4000);
    assert_int_equal(rs.answered, 4000);
    assert_int_equal(errors_of(&r.res), 0);
    assert_true(sq_hist_min(r.res.latency) > 0 || sq_hist_max(r.res.latency) > 0);
    bus_done(&r);
}

/* The broker goes away mid-run and comes back on the same port: requests out fail as
 * `closed`, connects fail while it is gone, the connection is opened again (a reconnect) and
 * the run carries on to its end. */
struct runner {
    struct bus_run *r;
    int rc;
};

static void *run_main(void *arg)
{
    struct runner *x = arg;
    const char *why;
    x->rc = sq_run(&x->r->cfg, &x->r->res, &why);
    return NULL;
}

static void nats_broker_restart(void **state)
{
    (void)state;
    struct bus_run r;
    struct sq_bus_opts o = opts();
    o.window = 50;
    char url[128];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u/bench.restart", nats_port);
    bus_config(&r, url, &o, 1);
    bus_rate(&r, 5000, 3 * SQ_NS_PER_S);
    struct runner x = {.r = &r};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_main, &x), 0);
    usleep(1200 * 1000);
    stop_pid(&nats_pid);
    usleep(500 * 1000);
    assert_true(nats_start());
    pthread_join(t, NULL);
    assert_int_equal(x.rc, 0);
    int64_t after_restart = mon_get("/varz", "in_msgs"); /* the new server's own count */
    printf("restart: sent %llu completed %llu failed %llu dropped %llu reconnects %llu "
           "connect errors %llu closed %llu\n",
           (unsigned long long)r.res.c.sent, (unsigned long long)r.res.c.completed,
           (unsigned long long)r.res.c.failed, (unsigned long long)r.res.c.dropped,
           (unsigned long long)r.res.c.bus.reconnects,
           (unsigned long long)r.res.c.errors[SQ_ERRK_CONNECT],
           (unsigned long long)r.res.c.errors[SQ_ERRK_CLOSED]);
    assert_false(r.res.aborted);
    assert_accounts(&r.res);
    assert_int_equal(r.res.arrivals, 15000);
    assert_true(r.res.c.bus.reconnects >= 1);
    assert_true(r.res.c.errors[SQ_ERRK_CONNECT] >= 1);
    assert_true(r.res.c.dropped > 0); /* arrivals while no connection was open */
    /* published again once the new server was up (how many depends on how long it took to
     * start on a loaded machine, so no fixed share) */
    assert_true(after_restart > 0);
    assert_true(r.res.c.completed > 5000); /* the first 1.2 s at 5,000/s, and more */
    assert_int_equal(r.res.c.conns_opened, 1 + r.res.c.bus.reconnects);
    bus_done(&r);
}

/* ---- MQTT: mosquitto with a generated config ---- */

static pid_t mq_pid;
static uint16_t mq_port;
static char mq_dir[64];

static int mqtt_setup(void **state)
{
    (void)state;
    snprintf(mq_dir, sizeof(mq_dir), "/tmp/sq-busdrv-mq-XXXXXX");
    if (!mkdtemp(mq_dir))
        return -1;
    mq_port = free_port();
    char conf[128];
    snprintf(conf, sizeof(conf), "%s/mosquitto.conf", mq_dir);
    FILE *f = fopen(conf, "w");
    if (!f)
        return -1;
    fprintf(f,
            "listener %u 127.0.0.1\nallow_anonymous true\npersistence false\n"
            "log_dest none\nmax_queued_messages 100000\n",
            mq_port);
    fclose(f);
    const char *exe =
        access("/usr/sbin/mosquitto", X_OK) == 0 ? "/usr/sbin/mosquitto" : "mosquitto";
    const char *argv[] = {exe, "-c", conf, NULL};
    mq_pid = spawn(argv);
    return mq_pid > 0 && wait_port(mq_port, mq_pid) ? 0 : -1;
}

static int mqtt_teardown(void **state)
{
    (void)state;
    stop_pid(&mq_pid);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", mq_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void mqtt_qos(int qos, int version, uint32_t window)
{
    struct bus_run r;
    struct sq_bus_opts o = opts();
    o.qos = qos;
    o.mqtt_version = version;
    o.window = window;
    char url[128];
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%u/sq/load/%d", mq_port, qos);
    bus_config(&r, url, &o, 2);
    bus_iterations(&r, 3000);
    bus_go(&r);
    printf("qos %d v%d: completed %llu acks %llu pings %llu\n", qos, version,
           (unsigned long long)r.res.c.completed, (unsigned long long)r.res.c.bus.acks,
           (unsigned long long)r.res.c.bus.pings);
    assert_int_equal(r.res.c.completed, 3000);
    assert_int_equal(errors_of(&r.res), 0);
    assert_int_equal(r.res.c.bus.acks, qos ? 3000 : 0);
    if (qos == 0)
        assert_true(r.res.c.bus.pings > 0);
    assert_int_equal(r.res.c.bus.stamped, 3000);
    bus_done(&r);
}

static void mqtt_qos0(void **state)
{
    (void)state;
    mqtt_qos(0, 3, 100);
}

static void mqtt_qos1(void **state)
{
    (void)state;
    mqtt_qos(1, 3, 16);
    mqtt_qos(1, 5, 16);
}

static void mqtt_qos2(void **state)
{
    (void)state;
    mqtt_qos(2, 3, 8);
    mqtt_qos(2, 5, 8);
    /* mosquitto takes 20 QoS 2 publishes in flight per client (max_inflight_messages) and says
     * so in a 5.0 CONNACK (Receive Maximum): the VUs above it are parked, none times out */
    mqtt_qos(2, 5, 40);
}

static void mqtt_round_trip(void **state)
{
    (void)state;
    for (int qos = 0; qos <= 2; qos++) {
        struct bus_run r;
        struct sq_bus_opts o = opts();
        o.qos = qos;
        o.round_trip = true;
        o.window = 16; /* 3.1.1: mosquitto drops QoS 2 publishes past 20 in flight, silently */
        char url[128];
        snprintf(url, sizeof(url), "mqtt://127.0.0.1:%u/sq/rt/%d", mq_port, qos);
        bus_config(&r, url, &o, 1);
        bus_iterations(&r, 2000);
        bus_go(&r);
        printf("round trip qos %d: completed %llu delivered %llu foreign %llu late %llu failed "
               "%llu in flight %llu timeouts %llu\n",
               qos, (unsigned long long)r.res.c.completed,
               (unsigned long long)r.res.c.bus.delivered, (unsigned long long)r.res.c.bus.foreign,
               (unsigned long long)r.res.c.bus.late, (unsigned long long)r.res.c.failed,
               (unsigned long long)r.res.in_flight,
               (unsigned long long)r.res.c.errors[SQ_ERRK_TIMEOUT]);
        assert_int_equal(r.res.c.completed, 2000);
        assert_int_equal(r.res.c.bus.delivered, 2000);
        assert_int_equal(r.res.c.bus.foreign, 0);
        assert_int_equal(errors_of(&r.res), 0);
        bus_done(&r);
    }
}

static void mqtt_refused_without_broker(void **state)
{
    (void)state;
    struct bus_run r;
    struct sq_bus_opts o = opts();
    char url[128];
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%u/x", free_port());
    bus_config(&r, url, &o, 1);
    bus_iterations(&r, 10);
    bus_go(&r);
    assert_true(r.res.aborted);
    assert_int_equal(r.res.c.sent, 0);
    assert_true(r.res.c.errors[SQ_ERRK_CONNECT] >= 1);
    bus_done(&r);
}

int main(void)
{
    const struct CMUnitTest nats[] = {
        cmocka_unit_test(nats_core_counts_match_varz),
        cmocka_unit_test(nats_core_open_loop_accounts),
        cmocka_unit_test(nats_no_allocation_per_message),
        cmocka_unit_test(nats_jetstream_pubacks),
        cmocka_unit_test(nats_request_reply),
        cmocka_unit_test(nats_broker_restart),
    };
    const struct CMUnitTest mqtt[] = {
        cmocka_unit_test(mqtt_qos0),
        cmocka_unit_test(mqtt_qos1),
        cmocka_unit_test(mqtt_qos2),
        cmocka_unit_test(mqtt_round_trip),
        cmocka_unit_test(mqtt_refused_without_broker),
    };
    int rc = 0;
    if (system("command -v nats-server >/dev/null 2>&1") == 0)
        rc |= cmocka_run_group_tests_name("nats", nats, nats_setup, nats_teardown);
    else
        printf("nats-server not installed: skipped (scripts/deps.sh)\n");
    if (access("/usr/sbin/mosquitto", X_OK) == 0 ||
        system("command -v mosquitto >/dev/null 2>&1") == 0)
        rc |= cmocka_run_group_tests_name("mqtt", mqtt, mqtt_setup, mqtt_teardown);
    else
        printf("mosquitto not installed: skipped (scripts/deps.sh)\n");
    return rc;
}
