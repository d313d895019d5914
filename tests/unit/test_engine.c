/* Unit tests: engine/ against a real `squall target` process on an ephemeral loopback port.
 *
 * The allocation test links with --wrap=malloc/calloc/realloc (see CMakeLists.txt) and counts
 * every allocation the process makes: two runs that differ only in their request count must
 * allocate exactly as often, so the steady-state hot path allocates nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "engine/run.h"
#include "http/h2.h"
#include "http/request.h"
#include "net/sock.h"
#include "stats/hist.h"

extern char **environ;

static uint64_t n_allocs;

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
    __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
    return __real_malloc(n);
}

void *__wrap_calloc(size_t a, size_t b)
{
    __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
    return __real_calloc(a, b);
}

void *__wrap_realloc(void *p, size_t n)
{
    __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
    return __real_realloc(p, n);
}

static pid_t target_pid;
static uint16_t target_port;

static int start_target(void **state)
{
    (void)state;
    const char *squall = getenv("SQUALL");
    if (!squall)
        squall = "build/squall";
    int fds[2];
    if (pipe(fds) < 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    char a0[256], a1[] = "target", a2[] = "--port", a3[] = "0", a4[] = "-t", a5[] = "1";
    snprintf(a0, sizeof(a0), "%s", squall);
    char *argv[] = {a0, a1, a2, a3, a4, a5, NULL};
    int rc = posix_spawn(&target_pid, squall, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0)
        return -1;
    FILE *f = fdopen(fds[0], "r");
    char line[256] = "";
    if (!f || !fgets(line, sizeof(line), f))
        return -1;
    fclose(f);
    char *colon = strrchr(line, ':');
    target_port = colon ? (uint16_t)atoi(colon + 1) : 0;
    return target_port ? 0 : -1;
}

static int stop_target(void **state)
{
    (void)state;
    if (target_pid > 0) {
        kill(target_pid, SIGTERM);
        waitpid(target_pid, NULL, 0);
    }
    return 0;
}

static void config(struct sq_run_config *cfg, char **req, const char *path)
{
    memset(cfg, 0, sizeof(*cfg));
    const char *why;
    assert_int_equal(sq_resolve("127.0.0.1", target_port, cfg->addrs, SQ_MAX_ADDRS, &why), 1);
    cfg->naddrs = 1;
    size_t len;
    assert_int_equal(sq_request_build("GET", path, "127.0.0.1", NULL, 0, NULL, 0, req, &len), 0);
    cfg->request = *req;
    cfg->request_len = len;
    cfg->threads = 2;
    cfg->exec.vus = 8;
    cfg->timeout_ns = 5 * SQ_NS_PER_S;
    cfg->connect_timeout_ns = 5 * SQ_NS_PER_S;
}

static void prepare(struct sq_run_config *cfg)
{
    const char *why;
    assert_int_equal(sq_exec_prepare(&cfg->exec, &why), 0);
}

static void iterations(struct sq_run_config *cfg, uint64_t n)
{
    cfg->exec.kind = SQ_EXEC_SHARED_ITERATIONS;
    cfg->exec.iterations = n;
    prepare(cfg);
}

static uint64_t allocs_for(uint64_t requests)
{
    struct sq_run_config cfg;
    char *req;
    config(&cfg, &req, "/fast");
    iterations(&cfg, requests);
    struct sq_result res;
    const char *why;
    uint64_t before = __atomic_load_n(&n_allocs, __ATOMIC_RELAXED);
    assert_int_equal(sq_run(&cfg, &res, &why), 0);
    uint64_t used = __atomic_load_n(&n_allocs, __ATOMIC_RELAXED) - before;
    assert_int_equal(res.c.completed, requests);
    assert_int_equal(res.c.sent, requests);
    assert_int_equal(res.in_flight, 0);
    assert_int_equal(sq_hist_total(res.latency), (int64_t)requests);
    assert_int_equal(res.c.conns_opened, 8);
    sq_result_dispose(&res);
    free(req);
    return used;
}

static void no_allocation_per_request(void **state)
{
    (void)state;
    allocs_for(100); /* warm up whatever libc sets up once */
    uint64_t small = allocs_for(200);
    uint64_t large = allocs_for(20000);
    printf("allocations per run: %llu for 200 requests, %llu for 20000\n",
           (unsigned long long)small, (unsigned long long)large);
    assert_int_equal(small, large);
}

static void shares_add_up(void **state)
{
    (void)state;
    /* 7 connections over 3 threads and 1001 requests: every request is sent exactly once. */
    struct sq_run_config cfg;
    char *req;
    config(&cfg, &req, "/fast");
    cfg.threads = 3;
    cfg.exec.vus = 7;
    iterations(&cfg, 1001);
    struct sq_result res;
    const char *why;
    assert_int_equal(sq_run(&cfg, &res, &why), 0);
    assert_int_equal(res.threads, 3);
    assert_int_equal(res.c.sent, 1001);
    assert_int_equal(res.c.completed, 1001);
    assert_int_equal(res.c.status[2], 1001);
    assert_int_equal(res.c.conns_opened, 7);
    sq_result_dispose(&res);
    free(req);
}

static void timed_run_accounts_for_everything(void **state)
{
    (void)state;
    struct sq_run_config cfg;
    char *req;
    config(&cfg, &req, "/delay/20");
    cfg.exec.kind = SQ_EXEC_CONSTANT_VUS;
    cfg.exec.duration_ns = 300 * SQ_NS_PER_MS;
    prepare(&cfg);
    struct sq_result res;
    const char *why;
    int64_t t0 = sq_now_ns();
    assert_int_equal(sq_run(&cfg, &res, &why), 0);
    int64_t took = sq_now_ns() - t0;
    assert_true(took < 600 * SQ_NS_PER_MS);
    assert_true(res.duration_ns >= 300 * SQ_NS_PER_MS);
    assert_int_equal(res.c.sent, res.c.completed + res.c.failed + res.in_flight);
    assert_true(res.in_flight <= 8);
    assert_true(res.c.completed >= 8 * 10); /* 300 ms / 20 ms per request, with slack */
    int64_t p50 = sq_hist_percentile(res.latency, 50);
    assert_true(p50 >= 20000 && p50 < 30000);
    sq_result_dispose(&res);
    free(req);
}

static void worker_count_capped_by_connections(void **state)
{
    (void)state;
    struct sq_run_config cfg;
    char *req;
    config(&cfg, &req, "/fast");
    cfg.threads = 16;
    cfg.exec.vus = 3;
    iterations(&cfg, 30);
    struct sq_result res;
    const char *why;
    assert_int_equal(sq_run(&cfg, &res, &why), 0);
    assert_int_equal(res.threads, 3);
    assert_int_equal(res.c.completed, 30);
    sq_result_dispose(&res);
    free(req);
}

static void per_vu_iterations(void **state)
{
    (void)state;
    /* 5 VUs over 2 threads, 7 iterations each: exactly 35 requests, 7 per connection. */
    struct sq_run_config cfg;
    char *req;
    config(&cfg, &req, "/fast");
    cfg.exec.kind = SQ_EXEC_PER_VU_ITERATIONS;
    cfg.exec.vus = 5;
    cfg.exec.iterations = 7;
    prepare(&cfg);
    struct sq_result res;
    const char *why;
    assert_int_equal(sq_run(&cfg, &res, &why), 0);
    assert_int_equal(res.c.sent, 35);
    assert_int_equal(res.c.completed, 35);
    assert_int_equal(res.c.conns_opened, 5);
    assert_int_equal(res.in_flight, 0);
    sq_result_dispose(&res);
    free(req);
}

static void paced_vus_keep_cadence(void **state)
{
    (void)state;
    /* 2 VUs paced at 20 ms for 500 ms: 25 iterations each (the first at the start). */
    struct sq_run_config cfg;
    char *req;
    config(&cfg, &req, "/fast");
    cfg.exec.kind = SQ_EXEC_CONSTANT_VUS;
    cfg.exec.vus = 2;
    cfg.exec.duration_ns = 500 * SQ_NS_PER_MS;
    cfg.exec.pacing_ns = 20 * SQ_NS_PER_MS;
    prepare(&cfg);
    struct sq_result res;
    const char *why;
    assert_int_equal(sq_run(&cfg, &res, &why), 0);
    assert_true(res.c.sent >= 48 && res.c.sent <= 52);
    sq_result_dispose(&res);
    free(req);
}

/* ---- HTTP/2: VUs are stream slots on shared connections (engine/h2drv.c) ---- */

static uint64_t h2_allocs_for(uint64_t requests, uint32_t threads)
{
    struct sq_run_config cfg;
    char *req;
    config(&cfg, &req, "/fast");
    struct sq_h2_req h2;
    assert_int_equal(sq_h2_req_init(&h2, "GET", "http", "127.0.0.1", "/fast", NULL, 0, NULL, 0), 0);
    cfg.h2_request = &h2;
    cfg.streams = 4;
    cfg.threads = threads;
    iterations(&cfg, requests); /* 8 VUs: 2 connections of 4 streams */
    struct sq_result res;
    const char *why;
    uint64_t before = __atomic_load_n(&n_allocs, __ATOMIC_RELAXED);
    assert_int_equal(sq_run(&cfg, &res, &why), 0);
    uint64_t used = __atomic_load_n(&n_allocs, __ATOMIC_RELAXED) - before;
    assert_int_equal(res.c.completed, requests);
    assert_int_equal(res.c.sent, requests);
    assert_int_equal(res.c.failed, 0);
    assert_int_equal(res.in_flight, 0);
    assert_int_equal(res.c.status[2], requests);
    assert_int_equal(sq_hist_total(res.latency), (int64_t)requests);
    assert_int_equal(res.c.body_bytes, requests * 11);
    assert_int_equal(res.c.conns_opened, 2);
    assert_int_equal(res.connections, 2);
    assert_int_equal(res.threads, threads < 2 ? threads : 2); /* capped at the connections */
    sq_result_dispose(&res);
    sq_h2_req_dispose(&h2);
    free(req);
    return used;
}

static void h2_streams_share_connections(void **state)
{
    (void)state;
    h2_allocs_for(100, 2); /* two workers, one connection each */
    h2_allocs_for(100, 8); /* threads capped at the connections: still 2 */
    uint64_t small = h2_allocs_for(200, 1);
    uint64_t large = h2_allocs_for(20200, 1);
    double per = (double)(large - small) / 20000;
    printf("HTTP/2: %.2f allocations per request (all nghttp2's)\n", per);
    /* nghttp2's: the stream, its HEADERS item, the nv copy, and the literal content-length
     * value the target's HPACK never indexes (test_h2.c counts nghttp2's alone: the same 4) */
    assert_true(per <= 4.05);
}

static void h2_timed_run_accounts(void **state)
{
    (void)state;
    struct sq_run_config cfg;
    char *req;
    config(&cfg, &req, "/delay/20");
    struct sq_h2_req h2;
    assert_int_equal(sq_h2_req_init(&h2, "GET", "http", "127.0.0.1", "/delay/20", NULL, 0, NULL, 0),
                     0);
    cfg.h2_request = &h2;
    cfg.streams = 8;
    cfg.exec.vus = 16;
    cfg.exec.kind = SQ_EXEC_CONSTANT_VUS;
    cfg.exec.duration_ns = 300 * SQ_NS_PER_MS;
    prepare(&cfg);
    struct sq_result res;
    const char *why;
    assert_int_equal(sq_run(&cfg, &res, &why), 0);
    assert_int_equal(res.c.sent, res.c.completed + res.c.failed + res.in_flight);
    /* 16 concurrent 20 ms requests for 300 ms: about 240, far more than 2 at a time would do */
    assert_true(res.c.completed >= 120);
    assert_true(res.in_flight <= 16);
    assert_int_equal(res.c.conns_opened, 2);
    sq_result_dispose(&res);
    sq_h2_req_dispose(&h2);
    free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_allocation_per_request),
        cmocka_unit_test(shares_add_up),
        cmocka_unit_test(timed_run_accounts_for_everything),
        cmocka_unit_test(worker_count_capped_by_connections),
        cmocka_unit_test(per_vu_iterations),
        cmocka_unit_test(paced_vus_keep_cadence),
        cmocka_unit_test(h2_streams_share_connections),
        cmocka_unit_test(h2_timed_run_accounts),
    };
    return cmocka_run_group_tests(tests, start_target, stop_target);
}
