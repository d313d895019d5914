/* engine/run.c - run lifecycle: split the work, start the workers, watch, join, merge.
 *
 * The main thread never touches a worker's hot state while it runs: it reads only the small
 * `live` block each worker publishes with relaxed atomics, and merges shards after join.
 */
#include "engine/run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "engine/worker.h"
#include "stats/hist.h"

#define WATCH_NS (20 * SQ_NS_PER_MS)

static const char *const errk_names[] = {
#define SQ_ERRK_STR(name, str) str,
    SQ_ERRK_LIST(SQ_ERRK_STR)
#undef SQ_ERRK_STR
};

const char *sq_errk_name(enum sq_errk k)
{
    return (unsigned)k < SQ_ERRK_COUNT ? errk_names[k] : "?";
}

int sq_latency_hist_new(struct sq_hist **out)
{
    return sq_hist_new(1, 3600LL * 1000 * 1000, 3, out);
}

static void merge_counters(struct sq_counters *dst, const struct sq_counters *src)
{
    dst->sent += src->sent;
    dst->dropped += src->dropped;
    dst->completed += src->completed;
    dst->failed += src->failed;
    for (size_t i = 0; i < SQ_ARRAY_LEN(dst->status); i++)
        dst->status[i] += src->status[i];
    for (size_t i = 0; i < SQ_ERRK_COUNT; i++)
        dst->errors[i] += src->errors[i];
    dst->bytes_sent += src->bytes_sent;
    dst->bytes_received += src->bytes_received;
    dst->conns_opened += src->conns_opened;
    dst->conns_closed_by_server += src->conns_closed_by_server;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / SQ_NS_PER_S, .tv_nsec = ns % SQ_NS_PER_S};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Measures how late this machine's timed waits wake up (epoll_pwait2 with 1 ns timer slack,
 * the way workers wait), and returns a busy-wait tail that covers the 90th percentile of the
 * overshoot: the open model sleeps until that long before an arrival and polls for the rest.
 * docs/internals/engine.md has the table this was sized from. */
static int64_t calibrate_spin(void)
{
    enum { N = 25 };
    int64_t over[N];
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return 50 * SQ_NS_PER_US;
    unsigned long old = (unsigned long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    struct epoll_event ev;
    for (int i = 0; i < N; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 200 * SQ_NS_PER_US};
        int64_t t0 = sq_now_ns();
        epoll_pwait2(ep, &ev, 1, &ts, NULL);
        over[i] = sq_now_ns() - t0 - ts.tv_nsec;
    }
    prctl(PR_SET_TIMERSLACK, old, 0, 0, 0);
    close(ep);
    for (int i = 1; i < N; i++) /* insertion sort: 25 values */
        for (int k = i; k > 0 && over[k - 1] > over[k]; k--) {
            int64_t t = over[k];
            over[k] = over[k - 1];
            over[k - 1] = t;
        }
    int64_t spin = over[N * 9 / 10] + 10 * SQ_NS_PER_US;
    if (spin < 20 * SQ_NS_PER_US)
        spin = 20 * SQ_NS_PER_US;
    if (spin > 500 * SQ_NS_PER_US)
        spin = 500 * SQ_NS_PER_US;
    return spin;
}

struct totals {
    uint32_t done, ready;
    uint64_t progress, opened, errors;
    int last_err;
};

static void sum_live(struct sq_engine__worker *ws, uint32_t n, struct totals *t)
{
    memset(t, 0, sizeof(*t));
    for (uint32_t i = 0; i < n; i++) {
        struct sq_engine__live *l = &ws[i].live;
        t->done += (uint32_t)__atomic_load_n(&l->done, __ATOMIC_ACQUIRE);
        t->ready += (uint32_t)__atomic_load_n(&l->ready, __ATOMIC_ACQUIRE);
        t->progress += __atomic_load_n(&l->progress, __ATOMIC_RELAXED);
        t->opened += __atomic_load_n(&l->opened, __ATOMIC_RELAXED);
        uint64_t e = __atomic_load_n(&l->connect_errors, __ATOMIC_RELAXED);
        if (e)
            t->last_err = __atomic_load_n(&l->last_connect_err, __ATOMIC_RELAXED);
        t->errors += e;
    }
}

static void stop_run(struct sq_engine__shared *run, struct sq_result *out, const char *fmt,
                     const char *a, const char *b)
{
    if (run->abort)
        return;
    snprintf(out->abort_reason, sizeof(out->abort_reason), fmt, a, b);
    __atomic_store_n(&run->abort, 1, __ATOMIC_RELAXED);
}

/* Watches the workers from the main thread until every one has left its loop: starts the run
 * once every pool is open, and stops it when the caller asks, when no connection can be made
 * (every connection failed to connect and none succeeded), or when nothing has moved for a
 * whole timeout while connects keep failing. */
static void watch(struct sq_engine__worker *ws, uint32_t n, struct sq_engine__shared *run,
                  struct sq_result *out, int64_t begin)
{
    const struct sq_run_config *cfg = run->cfg;
    uint64_t last_progress = 0, last_opened = 0, errors_then = 0;
    int64_t still_since = sq_now_ns();
    int64_t stall_limit =
        cfg->timeout_ns > cfg->connect_timeout_ns ? cfg->timeout_ns : cfg->connect_timeout_ns;
    char addr[64];
    sq_addr_format(&cfg->addrs[0], addr, sizeof(addr));
    for (;;) {
        struct totals t;
        sum_live(ws, n, &t);
        if (t.done == n)
            return;
        int64_t now = sq_now_ns();
        if (cfg->stop && *cfg->stop)
            stop_run(run, out, "stopped by request%s%s", "", "");
        if (!run->go_ns && t.ready == n) {
            if (t.opened == 0) {
                stop_run(run, out, "no connection could be made to %s: %s", addr,
                         sq_strerror(t.last_err));
            } else {
                out->setup_ns = now - begin;
                /* A moment ahead, so every worker sees it before it is due. */
                __atomic_store_n(&run->go_ns, now + SQ_NS_PER_MS, __ATOMIC_RELEASE);
            }
        }
        if (t.progress != last_progress || t.opened != last_opened) {
            still_since = now;
            errors_then = t.errors;
        } else if (t.errors > errors_then && now - still_since > stall_limit) {
            char secs[32];
            snprintf(secs, sizeof(secs), "%.1fs", (double)stall_limit / 1e9);
            stop_run(run, out, "no progress for %s while connects fail: %s", secs,
                     sq_strerror(t.last_err));
        }
        last_progress = t.progress;
        last_opened = t.opened;
        sleep_ns(run->go_ns ? WATCH_NS : SQ_NS_PER_MS);
    }
}

int sq_run(const struct sq_run_config *cfg, struct sq_result *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    *why = NULL;
    const struct sq_exec *ex = &cfg->exec;
    uint32_t conns = sq_exec_max_vus(ex);
    uint32_t nw = cfg->threads < conns ? cfg->threads : conns;
    if (nw == 0 || cfg->naddrs <= 0 || !cfg->request_len) {
        *why = "nothing to run: no connection, address or request";
        return -EINVAL;
    }
    out->open = sq_exec_is_open(ex);
    int rc = sq_latency_hist_new(&out->latency);
    if (rc == 0 && out->open)
        rc = sq_latency_hist_new(&out->latency_uncorrected);
    if (rc < 0) {
        *why = "out of memory";
        sq_result_dispose(out);
        return rc;
    }
    struct sq_engine__worker *ws = calloc(nw, sizeof(*ws));
    if (!ws) {
        *why = "out of memory";
        sq_result_dispose(out);
        return -ENOMEM;
    }
    struct sq_engine__shared run = {.cfg = cfg, .nworkers = nw};
    run.spin_ns = out->open ? calibrate_spin() : 0;
    for (uint32_t i = 0; i < nw; i++) {
        rc = sq_engine__worker_init(&ws[i], &run, i);
        if (rc < 0) {
            *why = "could not set up a worker";
            goto out;
        }
    }
    int64_t begin = sq_now_ns();
    uint32_t started = 0;
    for (uint32_t i = 0; i < nw; i++) {
        rc = -pthread_create(&ws[i].tid, NULL, sq_engine__worker_main, &ws[i]);
        if (rc < 0) {
            *why = "could not start a worker thread";
            __atomic_store_n(&run.abort, 1, __ATOMIC_RELAXED);
            break;
        }
        started++;
    }
    if (started == nw)
        watch(ws, nw, &run, out, begin);
    int64_t go = run.go_ns, end = go;
    for (uint32_t i = 0; i < started; i++) {
        pthread_join(ws[i].tid, NULL);
        merge_counters(&out->c, &ws[i].c);
        out->in_flight += ws[i].in_flight;
        out->arrivals += ws[i].arrivals;
        sq_hist_merge(out->latency, ws[i].hist);
        if (ws[i].hist_unc)
            sq_hist_merge(out->latency_uncorrected, ws[i].hist_unc);
        if (ws[i].end_ns > end)
            end = ws[i].end_ns;
    }
    out->duration_ns = go ? end - go : 0;
    out->spin_ns = run.spin_ns;
    out->threads = nw;
    out->connections = conns;
    out->aborted = run.abort != 0;
out:
    for (uint32_t i = 0; i < nw; i++)
        sq_engine__worker_dispose(&ws[i]);
    free(ws);
    if (rc < 0)
        sq_result_dispose(out);
    return rc;
}

void sq_result_dispose(struct sq_result *r)
{
    sq_hist_free(r->latency);
    sq_hist_free(r->latency_uncorrected);
    r->latency = NULL;
    r->latency_uncorrected = NULL;
}
