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
#include <time.h>

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

/* Shares of total over n parts that always add up to total: the first total % n get one more. */
static uint64_t share(uint64_t total, uint32_t n, uint32_t i)
{
    return total / n + (i < total % n ? 1 : 0);
}

static void merge_counters(struct sq_counters *dst, const struct sq_counters *src)
{
    dst->sent += src->sent;
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

/* Watches the workers until every one has left its loop. Sets *abort when the caller asks for a
 * stop, or when no connection can be made: every connection has failed to connect at least once
 * and none ever succeeded, or (later in a run) nothing has moved for a whole timeout while
 * connects keep failing. */
static void watch(struct sq_engine__worker *ws, uint32_t n, const struct sq_run_config *cfg,
                  int *abort, struct sq_result *out)
{
    uint64_t last_progress = 0, last_opened = 0, errors_then = 0;
    int64_t still_since = sq_now_ns();
    int64_t stall_limit =
        cfg->timeout_ns > cfg->connect_timeout_ns ? cfg->timeout_ns : cfg->connect_timeout_ns;
    for (;;) {
        uint32_t done = 0;
        uint64_t progress = 0, opened = 0, errors = 0;
        int last_err = 0;
        for (uint32_t i = 0; i < n; i++) {
            struct sq_engine__live *l = &ws[i].live;
            done += (uint32_t)__atomic_load_n(&l->done, __ATOMIC_ACQUIRE);
            progress += __atomic_load_n(&l->progress, __ATOMIC_RELAXED);
            opened += __atomic_load_n(&l->opened, __ATOMIC_RELAXED);
            uint64_t e = __atomic_load_n(&l->connect_errors, __ATOMIC_RELAXED);
            if (e)
                last_err = __atomic_load_n(&l->last_connect_err, __ATOMIC_RELAXED);
            errors += e;
        }
        if (done == n)
            return;
        int64_t now = sq_now_ns();
        if (!*abort && cfg->stop && *cfg->stop) {
            snprintf(out->abort_reason, sizeof(out->abort_reason), "stopped by request");
            __atomic_store_n(abort, 1, __ATOMIC_RELAXED);
        }
        if (!*abort && opened == 0 && errors >= cfg->connections) {
            char a[64];
            sq_addr_format(&cfg->addrs[0], a, sizeof(a));
            snprintf(out->abort_reason, sizeof(out->abort_reason),
                     "no connection could be made to %s: %s", a, sq_strerror(last_err));
            __atomic_store_n(abort, 1, __ATOMIC_RELAXED);
        }
        if (progress != last_progress || opened != last_opened) {
            still_since = now;
            errors_then = errors;
        } else if (!*abort && errors > errors_then && now - still_since > stall_limit) {
            snprintf(out->abort_reason, sizeof(out->abort_reason),
                     "no progress for %.1fs while connects fail: %s", (double)stall_limit / 1e9,
                     sq_strerror(last_err));
            __atomic_store_n(abort, 1, __ATOMIC_RELAXED);
        }
        last_progress = progress;
        last_opened = opened;
        sleep_ns(WATCH_NS);
    }
}

int sq_run(const struct sq_run_config *cfg, struct sq_result *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    *why = NULL;
    uint32_t nw = cfg->threads < cfg->connections ? cfg->threads : cfg->connections;
    if (nw == 0 || cfg->naddrs <= 0 || !cfg->request_len) {
        *why = "nothing to run: no connection, address or request";
        return -EINVAL;
    }
    int rc = sq_latency_hist_new(&out->latency);
    if (rc < 0) {
        *why = "out of memory";
        return rc;
    }
    struct sq_engine__worker *ws = calloc(nw, sizeof(*ws));
    if (!ws) {
        *why = "out of memory";
        return -ENOMEM;
    }
    int abort = 0;
    uint32_t first = 0;
    for (uint32_t i = 0; i < nw; i++) {
        uint32_t nc = (uint32_t)share(cfg->connections, nw, i);
        uint64_t quota = cfg->total_requests ? share(cfg->total_requests, nw, i) : UINT64_MAX;
        rc = sq_engine__worker_init(&ws[i], cfg, nc, first, quota, &abort);
        if (rc < 0) {
            *why = "could not set up a worker";
            goto out;
        }
        first += nc;
    }
    int64_t start = sq_now_ns();
    uint32_t started = 0;
    for (uint32_t i = 0; i < nw; i++) {
        ws[i].deadline_ns = cfg->duration_ns ? start + cfg->duration_ns : 0;
        rc = -pthread_create(&ws[i].tid, NULL, sq_engine__worker_main, &ws[i]);
        if (rc < 0) {
            *why = "could not start a worker thread";
            __atomic_store_n(&abort, 1, __ATOMIC_RELAXED);
            break;
        }
        started++;
    }
    if (started == nw)
        watch(ws, nw, cfg, &abort, out);
    int64_t end = start;
    for (uint32_t i = 0; i < started; i++) {
        pthread_join(ws[i].tid, NULL);
        merge_counters(&out->c, &ws[i].c);
        out->in_flight += ws[i].in_flight;
        sq_hist_merge(out->latency, ws[i].hist);
        if (ws[i].end_ns > end)
            end = ws[i].end_ns;
    }
    out->duration_ns = end - start;
    out->threads = nw;
    out->connections = cfg->connections;
    out->aborted = abort != 0;
out:
    for (uint32_t i = 0; i < nw; i++)
        sq_engine__worker_dispose(&ws[i]);
    free(ws);
    if (rc < 0) {
        sq_hist_free(out->latency);
        out->latency = NULL;
    }
    return rc;
}

void sq_result_dispose(struct sq_result *r)
{
    sq_hist_free(r->latency);
    r->latency = NULL;
}
