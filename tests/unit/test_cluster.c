/* Unit tests: cluster/ (the clock estimate, the wire codec, the lossless merge of agents'
 * results, parts, and the control-plane NATS connection against a real nats-server). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <netinet/in.h>

#include "base/clock.h"
#include "cluster/bus.h"
#include "cluster/cluster.h"
#include "cluster/internal.h"
#include "cluster/wire.h"
#include "stats/hist.h"

extern char **environ;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* ---- the clock estimate ---- */

static void clock_offset(void **state)
{
    (void)state;
    /* The agent's clock runs 250 ms ahead; one-way delays vary, the shortest round trip wins. */
    const int64_t off = 250 * SQ_NS_PER_MS;
    struct sq_clock_sample s[16];
    for (int i = 0; i < 16; i++) {
        int64_t send = 1000000000LL * i, up = 200000 + (int64_t)(rng() % 3000000),
                down = 200000 + (int64_t)(rng() % 3000000);
        int64_t tc = send + up; /* the controller's clock is the true time */
        s[i] = (struct sq_clock_sample){send + off, tc, tc + down + off};
    }
    s[7] = (struct sq_clock_sample){7000000000LL + off, 7000000000LL + 60000,
                                    7000000000LL + 100000 + off}; /* the fastest: 100 µs */
    struct sq_clock_est e;
    assert_int_equal(sq_clock_estimate(s, 16, &e), 0);
    assert_int_equal(e.rtt_ns, 100000);
    assert_int_equal(e.uncertainty_ns, 50000);
    assert_int_equal(e.samples, 16);
    /* the truth is within the bound, and the bound is half the shortest round trip */
    assert_true(llabs(e.offset_ns - off) <= e.uncertainty_ns);
    assert_int_equal(e.offset_ns, off - 10000); /* the middle: up 60 µs, down 40 µs */
    /* far-apart clocks (different boots) do not overflow */
    struct sq_clock_sample far = {INT64_MAX / 2, -INT64_MAX / 4, INT64_MAX / 2 + 1000};
    assert_int_equal(sq_clock_estimate(&far, 1, &e), 0);
    assert_int_equal(e.offset_ns, INT64_MAX / 2 + INT64_MAX / 4 + 500);
    struct sq_clock_sample bad = {10, 0, 5};
    assert_int_equal(sq_clock_estimate(&bad, 1, &e), -EINVAL);
    assert_int_equal(sq_clock_estimate(NULL, 0, &e), -EINVAL);
}

/* ---- the wire ---- */

static void counters_all_named(void **state)
{
    (void)state;
    /* A counter added to the engine without a name on the wire would vanish from distributed
     * runs: this fails instead. */
    assert_int_equal(sq_wire_counter_words(), sizeof(struct sq_counters) / sizeof(uint64_t));
}

static void fill_hist(struct sq_hist *h, int n, int64_t scale)
{
    for (int i = 0; i < n; i++)
        assert_true(sq_hist_record(h, 1 + (int64_t)(rng() % (uint64_t)scale)));
}

static void assert_hist_equal(const struct sq_hist *a, const struct sq_hist *b)
{
    assert_int_equal(sq_hist_total(a), sq_hist_total(b));
    assert_int_equal(sq_hist__counts_len(a), sq_hist__counts_len(b));
    for (int32_t i = 0; i < sq_hist__counts_len(a); i++)
        assert_int_equal(sq_hist__count_at_index(a, i), sq_hist__count_at_index(b, i));
    assert_int_equal(sq_hist_min(a), sq_hist_min(b));
    assert_int_equal(sq_hist_max(a), sq_hist_max(b));
}

static void second_round_trip(void **state)
{
    (void)state;
    struct sq_second s = {.t_s = 3.0,
                          .len_s = 1.0,
                          .sent = 1000,
                          .completed = 990,
                          .failed = 7,
                          .dropped = 3,
                          .errors = 7,
                          .bytes_received = 123456,
                          .active = 12,
                          .p50_us = 800,
                          .p99_us = 4000,
                          .max_us = 9000};
    s.status[2] = 980;
    s.status[5] = 10;
    s.errk[SQ_ERRK_TIMEOUT] = 7;
    struct sq_hist *h, *hu;
    assert_int_equal(sq_latency_hist_new(&h), 0);
    assert_int_equal(sq_latency_hist_new(&hu), 0);
    fill_hist(h, 990, 50000);
    fill_hist(hu, 990, 5000);
    json_t *j = sq_wire_second(&s, h, hu);
    assert_non_null(j);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    json_t *back = json_loads(text, 0, NULL);
    free(text);
    struct sq_second r;
    struct sq_hist *rh, *rhu;
    char err[128];
    assert_int_equal(sq_wire_second_read(back, &r, &rh, &rhu, err, sizeof(err)), 0);
    assert_memory_equal(&r, &s, sizeof(s));
    assert_hist_equal(rh, h);
    assert_hist_equal(rhu, hu);
    sq_hist_free(rh);
    sq_hist_free(rhu);
    /* hostile input: a histogram of another configuration, not base64, a negative count */
    struct sq_hist *other;
    assert_int_equal(sq_hist_new(1, 1000, 2, &other), 0);
    json_t *jo = sq_wire_hist(other);
    json_object_set_new(back, "h", jo);
    assert_int_equal(sq_wire_second_read(back, &r, &rh, &rhu, err, sizeof(err)), -SQ_EDECODE);
    json_object_set_new(back, "h", json_string("not base64!"));
    assert_true(sq_wire_second_read(back, &r, &rh, &rhu, err, sizeof(err)) < 0);
    json_object_set_new(back, "h", json_null());
    json_object_set_new(back, "sent", json_integer(-1));
    assert_int_equal(sq_wire_second_read(back, &r, &rh, &rhu, err, sizeof(err)), -SQ_EPARSE);
    json_decref(back);
    sq_hist_free(other);
    sq_hist_free(h);
    sq_hist_free(hu);
}

/* A result like a plan run's: two scenarios with steps, statuses and checks. */
static void make_result(struct sq_result *r, int64_t scale, const char *const *names)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(sq_latency_hist_new(&r->latency), 0);
    assert_int_equal(sq_latency_hist_new(&r->latency_uncorrected), 0);
    r->open = true;
    r->c.sent = 100 + rng() % 1000;
    r->c.completed = r->c.sent - 3;
    r->c.failed = 2;
    r->in_flight = 1;
    r->c.errors[SQ_ERRK_TIMEOUT] = 2;
    r->c.status[2] = r->c.completed;
    r->c.sse_events = rng() % 77;
    r->arrivals = r->c.sent + 5;
    r->c.dropped = 5;
    r->duration_ns = (int64_t)(rng() % SQ_NS_PER_S) + 5 * SQ_NS_PER_S;
    r->threads = 2;
    r->connections = 8;
    fill_hist(r->latency, (int)r->c.completed, scale);
    fill_hist(r->latency_uncorrected, (int)r->c.completed, scale / 2);
    for (int k = 0; k < SQ_PHASE_COUNT; k += 2) {
        assert_int_equal(sq_latency_hist_new(&r->phase[k]), 0);
        fill_hist(r->phase[k], 50, scale);
    }
    r->nscens = 2;
    r->scens = calloc(2, sizeof(*r->scens));
    for (uint32_t i = 0; i < 2; i++) {
        struct sq_scen_result *s = &r->scens[i];
        s->name = names[i];
        s->c.sent = 10 + i;
        s->vus_max = 3 + i;
        s->interrupted = i;
        assert_int_equal(sq_latency_hist_new(&s->latency), 0);
        assert_int_equal(sq_latency_hist_new(&s->iter_dur), 0);
        fill_hist(s->latency, 20, scale);
        fill_hist(s->iter_dur, 20, scale * 3);
        s->nsteps = 2;
        s->steps = calloc(2, sizeof(*s->steps));
        for (size_t k = 0; k < 2; k++) {
            struct sq_step_stats *st = &s->steps[k];
            st->reqs = 20;
            st->failed = 1;
            st->nchecks = (uint32_t)k + 1;
            st->check_pass = calloc(k + 1, sizeof(uint64_t));
            st->check_fail = calloc(k + 1, sizeof(uint64_t));
            st->check_pass[0] = 19;
            st->check_fail[0] = 1;
            assert_int_equal(sq_latency_hist_new(&st->dur), 0);
            fill_hist(st->dur, 20, scale);
            st->nstatus = 2;
            st->by_status[0].status = 200;
            st->by_status[0].n = 19;
            st->by_status[1].status = (uint16_t)(k ? 404 : 500);
            st->by_status[1].n = 1;
            for (int b = 0; b < 2; b++) {
                assert_int_equal(sq_latency_hist_new(&st->by_status[b].h), 0);
                fill_hist(st->by_status[b].h, (int)st->by_status[b].n, scale);
            }
        }
    }
    r->series.n = r->series.cap = 3;
    r->series.v = calloc(3, sizeof(*r->series.v));
    for (size_t i = 0; i < 3; i++)
        r->series.v[i] = (struct sq_second){.t_s = (double)i + 1, .len_s = 1, .sent = 7 * i};
    r->aborted = true;
    snprintf(r->abort_reason, sizeof(r->abort_reason), "stopped by request");
    r->tls_version = "TLSv1.3";
}

/* Encodes r, sends it through text as the wire does, and decodes it. */
static void through_wire(const struct sq_result *r, struct sq_wire_res *out)
{
    json_t *j = sq_wire_result(r);
    assert_non_null(j);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    json_t *back = json_loads(text, 0, NULL);
    free(text);
    char err[128];
    assert_int_equal(sq_wire_result_read(back, out, err, sizeof(err)), 0);
    json_decref(back);
}

static void result_round_trip(void **state)
{
    (void)state;
    const char *names[] = {"browse", "buy"};
    struct sq_result r;
    make_result(&r, 100000, names);
    struct sq_wire_res w;
    through_wire(&r, &w);
    assert_memory_equal(&w.r.c, &r.c, sizeof(r.c));
    assert_int_equal(w.r.in_flight, 1);
    assert_int_equal(w.r.arrivals, r.arrivals);
    assert_int_equal(w.r.duration_ns, r.duration_ns);
    assert_true(w.r.open && w.r.aborted);
    assert_string_equal(w.r.abort_reason, "stopped by request");
    assert_string_equal(w.r.tls_version, "TLSv1.3");
    assert_hist_equal(w.r.latency, r.latency);
    assert_hist_equal(w.r.latency_uncorrected, r.latency_uncorrected);
    for (int k = 0; k < SQ_PHASE_COUNT; k++) {
        assert_int_equal(w.r.phase[k] != NULL, r.phase[k] != NULL);
        if (r.phase[k])
            assert_hist_equal(w.r.phase[k], r.phase[k]);
    }
    assert_int_equal(w.r.nscens, 2);
    assert_string_equal(w.r.scens[1].name, "buy");
    assert_int_equal(w.r.scens[1].vus_max, 4);
    assert_int_equal(w.r.scens[1].steps[1].nchecks, 2);
    assert_int_equal(w.r.scens[1].steps[1].by_status[1].status, 404);
    assert_hist_equal(w.r.scens[0].steps[0].by_status[0].h, r.scens[0].steps[0].by_status[0].h);
    assert_int_equal(w.r.series.n, 3);
    assert_int_equal(w.r.series.v[2].sent, 14);
    assert_null(w.r.script_error);
    sq_wire_res_dispose(&w);
    /* a WebSocket run's own figures: counts, tallies by key, histograms */
    r.ws = calloc(1, sizeof(*r.ws));
    assert_non_null(r.ws);
    assert_int_equal(sq_latency_hist_new(&r.ws->upgrade_us), 0);
    fill_hist(r.ws->upgrade_us, 500, 20000);
    r.ws->upgrades = 7;
    r.ws->messages_received = 1234;
    r.ws->closes_sent = 7;
    sq_ws_tally_add(&r.ws->close_codes, 1000, 5);
    sq_ws_tally_add(&r.ws->close_codes, 1006, 2);
    sq_ws_tally_add(&r.ws->upgrade_failed, SQ_WS_UP_TIMEOUT, 3);
    r.ws->upgrade_failed.other = 4;
    through_wire(&r, &w);
    assert_non_null(w.r.ws);
    assert_int_equal(w.r.ws->upgrades, 7);
    assert_int_equal(w.r.ws->messages_received, 1234);
    assert_int_equal(w.r.ws->close_codes.n, 2);
    assert_int_equal(w.r.ws->close_codes.row[1].key, 1006);
    assert_int_equal(w.r.ws->close_codes.row[1].n, 2);
    assert_int_equal(w.r.ws->upgrade_failed.row[0].key, SQ_WS_UP_TIMEOUT);
    assert_int_equal(w.r.ws->upgrade_failed.other, 4);
    assert_hist_equal(w.r.ws->upgrade_us, r.ws->upgrade_us);
    assert_null(w.r.ws->ping_rtt_us);
    struct sq_result wsm = {0};
    assert_int_equal(sq_result_merge(&wsm, &w.r), 0);
    assert_int_equal(sq_result_merge(&wsm, &w.r), 0);
    assert_int_equal(wsm.ws->upgrades, 14);
    assert_int_equal(wsm.ws->close_codes.row[0].n, 10);
    assert_int_equal(wsm.ws->upgrade_failed.other, 8);
    assert_int_equal(sq_hist_total(wsm.ws->upgrade_us), 2 * sq_hist_total(r.ws->upgrade_us));
    sq_result_dispose(&wsm);
    sq_wire_res_dispose(&w);
    /* a hook's error and the threads thread:stop() ended come back too */
    r.script_error = strdup("hooks.lua:3: boom\nstack traceback: ...");
    r.script_stopped = 2;
    through_wire(&r, &w);
    assert_string_equal(w.r.script_error, r.script_error);
    assert_int_equal(w.r.script_stopped, 2);
    struct sq_result merged = {0};
    assert_int_equal(sq_result_merge(&merged, &w.r), 0);
    assert_int_equal(sq_result_merge(&merged, &w.r), 0);
    assert_string_equal(merged.script_error, r.script_error);
    assert_int_equal(merged.script_stopped, 4);
    sq_result_dispose(&merged);
    sq_wire_res_dispose(&w);
    sq_result_dispose(&r);
}

/* The merge is lossless: three agents' latencies, each recorded by its agent, sent over the wire
 * and merged, give bin for bin the histogram of every raw latency recorded into one; totals are
 * the sums. */
static void merge_is_lossless(void **state)
{
    (void)state;
    struct sq_hist *all;
    assert_int_equal(sq_latency_hist_new(&all), 0);
    struct sq_result merged = {0};
    uint64_t sent = 0, completed = 0;
    const char *names[] = {"a", "b"};
    for (int agent = 0; agent < 3; agent++) {
        struct sq_result r;
        make_result(&r, 1000, names);
        sq_hist_reset(r.latency);
        /* this agent's raw latencies: different shapes per agent */
        int n = 20000 + agent * 7919;
        for (int i = 0; i < n; i++) {
            int64_t v = agent == 0   ? 100 + (int64_t)(rng() % 900)
                        : agent == 1 ? 1000 + (int64_t)(rng() % 50000)
                                     : (int64_t)(rng() % 3000000) + 1;
            assert_true(sq_hist_record(r.latency, v));
            assert_true(sq_hist_record(all, v));
        }
        sent += r.c.sent;
        completed += r.c.completed;
        struct sq_wire_res w;
        through_wire(&r, &w);
        assert_int_equal(sq_result_merge(&merged, &w.r), 0);
        sq_wire_res_dispose(&w);
        sq_result_dispose(&r);
    }
    assert_hist_equal(merged.latency, all);
    for (double p = 0; p <= 100; p += 0.5)
        assert_int_equal(sq_hist_percentile(merged.latency, p), sq_hist_percentile(all, p));
    assert_int_equal(merged.c.sent, sent);
    assert_int_equal(merged.c.completed, completed);
    assert_int_equal(merged.in_flight, 3);
    assert_int_equal(merged.threads, 6);
    assert_int_equal(merged.nscens, 2);
    assert_int_equal(merged.scens[1].vus_max, 12);
    assert_int_equal(merged.scens[0].steps[1].check_pass[0], 57);
    assert_int_equal(merged.scens[0].steps[1].by_status[1].n, 3);
    /* the merged p99 is not the average of the agents' p99s (the reason for all this) */
    sq_result_dispose(&merged);
    sq_hist_free(all);
}

static void parts(void **state)
{
    (void)state;
    char run[40], agent[40];
    uint32_t i, n;
    const char *body;
    size_t blen;
    const char ok[] = "SQPART r1 a2 3 5\n{\"x\":1}";
    assert_int_equal(sq_cluster__part(ok, strlen(ok), run, agent, &i, &n, &body, &blen), 1);
    assert_string_equal(run, "r1");
    assert_string_equal(agent, "a2");
    assert_int_equal(i, 3);
    assert_int_equal(n, 5);
    assert_int_equal(blen, 7);
    assert_int_equal(sq_cluster__part("{}", 2, run, agent, &i, &n, &body, &blen), 0);
    const char *bad[] = {"SQPART r1 a2 5 5\nx", "SQPART r1 a2 0 0\nx", "SQPART r1\nx",
                         "SQPART r1 a2 1 2"};
    for (size_t k = 0; k < 4; k++)
        assert_int_equal(sq_cluster__part(bad[k], strlen(bad[k]), run, agent, &i, &n, &body, &blen),
                         -1);
    assert_true(sq_cluster__token_ok("agent-0_x"));
    assert_false(sq_cluster__token_ok("a.b"));
    assert_false(sq_cluster__token_ok(""));
    assert_false(sq_cluster__token_ok("a b"));
}

/* ---- the NATS connection, against a real nats-server ---- */

static pid_t nats_pid;
static uint16_t nats_port;

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(sa);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    getsockname(fd, (struct sockaddr *)&sa, &l);
    close(fd);
    return ntohs(sa.sin_port);
}

static int start_nats(void **state)
{
    (void)state;
    if (access("/usr/sbin/nats-server", X_OK) != 0 && access("/usr/bin/nats-server", X_OK) != 0)
        return 0; /* the bus test skips */
    const char *bin = access("/usr/sbin/nats-server", X_OK) == 0 ? "/usr/sbin/nats-server"
                                                                 : "/usr/bin/nats-server";
    nats_port = free_port();
    /* a small max_payload, so results in parts are tested with small messages */
    char conf[] = "/tmp/sq-nats-XXXXXX";
    int cfd = mkstemp(conf);
    if (cfd < 0)
        return -1;
    const char text[] = "max_payload: 65536\n";
    if (write(cfd, text, sizeof(text) - 1) != (ssize_t)(sizeof(text) - 1))
        return -1;
    close(cfd);
    char port[16], a0[64], a1[] = "-a", a2[] = "127.0.0.1", a3[] = "-p", a5[] = "-c";
    snprintf(port, sizeof(port), "%u", nats_port);
    snprintf(a0, sizeof(a0), "%s", bin);
    char *argv[] = {a0, a1, a2, a3, port, a5, conf, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawn(&nats_pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    for (int i = 0; i < 200; i++) {
        char url[64], err[256];
        snprintf(url, sizeof(url), "nats://127.0.0.1:%u", nats_port);
        struct sq_bus *b;
        if (sq_bus_connect(url, "probe", SQ_NS_PER_S, &b, err, sizeof(err)) == 0) {
            sq_bus_close(b);
            unlink(conf);
            return 0;
        }
        struct timespec ts = {0, 20 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static int stop_nats(void **state)
{
    (void)state;
    if (nats_pid > 0) {
        kill(nats_pid, SIGTERM);
        waitpid(nats_pid, NULL, 0);
    }
    return 0;
}

static void bus_against_nats_server(void **state)
{
    (void)state;
    if (!nats_pid)
        skip();
    char url[64], err[256];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u", nats_port);
    struct sq_bus *a, *b;
    assert_int_equal(sq_bus_connect(url, "a", SQ_NS_PER_S, &a, err, sizeof(err)), 0);
    assert_int_equal(sq_bus_connect(url, "b", SQ_NS_PER_S, &b, err, sizeof(err)), 0);
    assert_int_equal(sq_bus_max_payload(a), 65536);
    uint64_t sid;
    assert_int_equal(sq_bus_sub(b, "t.x", &sid), 0);
    assert_int_equal(sq_bus_sync(b, SQ_NS_PER_S), 0);
    assert_int_equal(sq_bus_pub(a, "t.x", "t.reply", "hello", 5), 0);
    struct sq_bus_msg m;
    assert_int_equal(sq_bus_next(b, SQ_NS_PER_S, &m), 1);
    assert_string_equal(m.subject, "t.x");
    assert_string_equal(m.reply, "t.reply");
    assert_int_equal(m.len, 5);
    assert_string_equal(m.data, "hello");
    assert_int_equal(m.sid, sid);
    sq_bus_msg_dispose(&m);
    /* nothing more: a timeout, on time */
    int64_t t0 = sq_now_ns();
    assert_int_equal(sq_bus_next(b, 100 * SQ_NS_PER_MS, &m), 0);
    int64_t took = sq_now_ns() - t0;
    assert_true(took >= 100 * SQ_NS_PER_MS && took < 600 * SQ_NS_PER_MS);
    /* messages that arrive during a sync are kept, in order */
    for (int i = 0; i < 50; i++) {
        char buf[16];
        int n = snprintf(buf, sizeof(buf), "m%d", i);
        assert_int_equal(sq_bus_pub(a, "t.x", NULL, buf, (size_t)n), 0);
    }
    assert_int_equal(sq_bus_sync(a, SQ_NS_PER_S), 0); /* they reached the server */
    assert_int_equal(sq_bus_sync(b, SQ_NS_PER_S), 0); /* ... and were delivered before the PONG */
    for (int i = 0; i < 50; i++) {
        char want[16];
        snprintf(want, sizeof(want), "m%d", i);
        assert_int_equal(sq_bus_next(b, SQ_NS_PER_S, &m), 1);
        assert_string_equal(m.data, want);
        sq_bus_msg_dispose(&m);
    }
    /* over max_payload: refused here; in parts: whole at the other end */
    size_t big = 200000;
    char *text = malloc(big);
    for (size_t i = 0; i < big; i++)
        text[i] = (char)('a' + i % 26);
    assert_int_equal(sq_bus_pub(a, "t.x", NULL, text, big), -SQ_ETOOBIG);
    assert_int_equal(sq_cluster__pub_big(a, "t.x", "run1", "ag1", text, big), 0);
    size_t got = 0;
    uint32_t expect = 0;
    while (got < big) {
        assert_int_equal(sq_bus_next(b, SQ_NS_PER_S, &m), 1);
        char run[40], ag[40];
        uint32_t i, n;
        const char *body;
        size_t blen;
        assert_int_equal(sq_cluster__part(m.data, m.len, run, ag, &i, &n, &body, &blen), 1);
        assert_int_equal(i, expect++);
        assert_true(m.len <= 65536);
        assert_memory_equal(body, text + got, blen);
        got += blen;
        sq_bus_msg_dispose(&m);
    }
    free(text);
    uint64_t bo, bi, mo, mi;
    sq_bus_counts(a, &bo, &bi, &mo, &mi);
    assert_true(mo >= 55 && bo > big);
    sq_bus_close(a);
    sq_bus_close(b);
    /* what is not a NATS URL, and nothing listening */
    assert_int_equal(sq_bus_connect("http://x", "c", SQ_NS_PER_S, &a, err, sizeof(err)),
                     -SQ_EUSAGE);
    assert_int_equal(
        sq_bus_connect("nats://127.0.0.1:99999", "c", SQ_NS_PER_S, &a, err, sizeof(err)),
        -SQ_EUSAGE);
    assert_true(sq_bus_connect("nats://127.0.0.1:1", "c", SQ_NS_PER_S, &a, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "cannot connect"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(clock_offset),
        cmocka_unit_test(counters_all_named),
        cmocka_unit_test(second_round_trip),
        cmocka_unit_test(result_round_trip),
        cmocka_unit_test(merge_is_lossless),
        cmocka_unit_test(parts),
        cmocka_unit_test(bus_against_nats_server),
    };
    return cmocka_run_group_tests(tests, start_nats, stop_nats);
}
