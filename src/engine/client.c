/* engine/client.c - squall's own cost during a run, the watched processes, and whether the
 * client limited the run (see client.h and sq_client_judge in run.h).
 *
 * A worker's busy share is (on a CPU + waiting for one) / wall time, from
 * /proc/thread-self/schedstat: a worker that is runnable but has no CPU is as much a bottleneck
 * as one that is computing, and only the kernel sees the difference. An open-loop worker
 * busy-waits before each arrival on purpose (engine/worker.c), so its share alone is not judged:
 * the open loop's signs of saturation are falling behind its schedule, which each tick measures
 * as how overdue the next arrival is, and dropping arrivals while busy (a worker short of CPU
 * reads responses late, its in-flight cap stays full, and dropping an arrival costs nothing, so
 * it never falls behind).
 */
#include "engine/client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "engine/worker.h"
#include "proc/proc.h"

#define WHOLE_SECOND_NS (SQ_NS_PER_S / 2) /* a slot this long counts as a second of its own */
#define JUDGE_MIN_NS    (200 * SQ_NS_PER_MS)

/* ---- the worker's side ---- */

void sq_engine__times_open(struct sq_engine__worker *w)
{
    w->sched_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    w->sched_open = w->sched_fd >= 0;
}

void sq_engine__times_close(struct sq_engine__worker *w)
{
    if (w->sched_open)
        close(w->sched_fd);
    w->sched_open = false;
    w->sched_fd = -1;
}

void sq_engine__times(struct sq_engine__worker *w, int64_t *cpu_ns, int64_t *wait_ns)
{
    if (w->sched_open) {
        char buf[128];
        ssize_t n = pread(w->sched_fd, buf, sizeof(buf) - 1, 0);
        if (n > 0 && sq_proc_parse_schedstat(buf, (size_t)n, cpu_ns, wait_ns) == 0)
            return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    *cpu_ns = (int64_t)ts.tv_sec * SQ_NS_PER_S + ts.tv_nsec;
    *wait_ns = 0;
}

/* ---- the main thread's side ---- */

static int64_t tv_ns(struct timeval tv)
{
    return (int64_t)tv.tv_sec * SQ_NS_PER_S + (int64_t)tv.tv_usec * SQ_NS_PER_US;
}

static void rusage_ns(int64_t *user, int64_t *sys)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) < 0) {
        *user = *sys = 0;
        return;
    }
    *user = tv_ns(ru.ru_utime);
    *sys = tv_ns(ru.ru_stime);
}

static uint64_t self_rss(void)
{
    struct sq_proc_sample s;
    return sq_proc_read((int)getpid(), 0, &s) == 0 ? s.rss_bytes : 0;
}

int sq_engine__clagg_init(struct sq_engine__clagg *a, uint32_t n, const struct sq_run_config *cfg)
{
    memset(a, 0, sizeof(*a));
    a->n = n;
    a->cfg = cfg;
    a->end = calloc(n, sizeof(*a->end));
    a->cpu = calloc(n, sizeof(*a->cpu));
    a->wait = calloc(n, sizeof(*a->wait));
    a->poll = calloc(n, sizeof(*a->poll));
    a->sleep = calloc(n, sizeof(*a->sleep));
    a->ws = calloc(n, sizeof(*a->ws));
    return a->end && a->cpu && a->wait && a->poll && a->sleep && a->ws ? 0 : -ENOMEM;
}

void sq_engine__clagg_dispose(struct sq_engine__clagg *a)
{
    free(a->end);
    free(a->cpu);
    free(a->wait);
    free(a->poll);
    free(a->sleep);
    free(a->ws);
    memset(a, 0, sizeof(*a));
}

void sq_engine__clagg_begin(struct sq_engine__clagg *a, int64_t go)
{
    a->go = go;
    for (uint32_t i = 0; i < a->n; i++)
        a->end[i] = go;
    rusage_ns(&a->ru_user0, &a->ru_sys0);
    a->ru_prev = a->ru_user0 + a->ru_sys0;
    a->rss_peak = self_rss();
    if (a->cfg->watch)
        sq_watch_start(a->cfg->watch, go);
}

/* The time a worker was neither on a CPU as its clock counts it, nor waiting for one, nor asleep
 * by its own choice: taken by the hypervisor (steal) or by interrupts the task clock leaves out.
 * A thread short of CPU on a VM loses that time too, so it counts as busy. Its waits' wake-ups
 * are in both wait and sleep, so this errs low, never high. */
static int64_t off_ns(int64_t wall, int64_t cpu, int64_t wait, int64_t sleep)
{
    int64_t off = wall - cpu - wait - sleep;
    return off > 0 ? off : 0;
}

/* (cpu + wait - poll + off) / wall, from 0 (see struct sq_worker_stats). */
static double busy_of(int64_t wall, int64_t cpu, int64_t wait, int64_t poll, int64_t off)
{
    if (wall <= 0)
        return 0;
    double busy = (double)(cpu + wait - poll + off) / (double)wall;
    return busy < 0 ? 0 : busy;
}

/* Open loop: dropped at least SQ_CLIENT_DROPS of these arrivals. */
static bool dropping(uint64_t dropped, uint64_t arrivals)
{
    return dropped > 0 && (double)dropped >= SQ_CLIENT_DROPS * (double)arrivals;
}

void sq_engine__clagg_slot(struct sq_engine__clagg *a, uint32_t wi, const struct sq_engine__slot *s,
                           struct sq_second *late)
{
    struct sq_worker_stats *ws = &a->ws[wi];
    int64_t wall = s->end_ns - a->end[wi];
    /* time spent polling for responses is the worker's choice, not a sign it is short of CPU */
    int64_t off =
        off_ns(wall, s->cpu_ns - a->cpu[wi], s->wait_ns - a->wait[wi], s->sleep_ns - a->sleep[wi]);
    double busy = busy_of(wall, s->cpu_ns - a->cpu[wi], s->wait_ns - a->wait[wi],
                          s->poll_ns - a->poll[wi], off);
    if (wall >= WHOLE_SECOND_NS) {
        ws->seconds++;
        if (busy >= SQ_CLIENT_BUSY)
            ws->busy_seconds++;
        if (busy > ws->busy_max)
            ws->busy_max = busy;
    }
    if (s->lag_ns > ws->lag_max_ns)
        ws->lag_max_ns = s->lag_ns;
    if (s->behind_ns > ws->behind_max_ns)
        ws->behind_max_ns = s->behind_ns;
    if (wall >= WHOLE_SECOND_NS && busy >= SQ_CLIENT_BUSY &&
        dropping(s->c.dropped - ws->dropped, s->arrivals - ws->arrivals))
        ws->busy_drop_seconds++;
    ws->arrivals = s->arrivals;
    ws->dropped = s->c.dropped;
    ws->wall_ns = s->end_ns - a->go;
    ws->cpu_ns = s->cpu_ns;
    ws->wait_ns = s->wait_ns;
    ws->poll_ns = s->poll_ns;
    ws->off_ns += off; /* interval by interval: a wake-up counted twice stays in its own */
    a->end[wi] = s->end_ns;
    a->poll[wi] = s->poll_ns;
    a->sleep[wi] = s->sleep_ns;
    a->cpu[wi] = s->cpu_ns;
    a->wait[wi] = s->wait_ns;

    struct sq_client_second *c = late ? &late->client : NULL;
    double *bmax = c ? &c->busy_max : &a->busy_max;
    int64_t *lmax = c ? &c->lag_max_ns : &a->lag_max;
    int64_t *hmax = c ? &c->behind_max_ns : &a->behind_max;
    if (wall >= WHOLE_SECOND_NS && busy > *bmax)
        *bmax = busy;
    if (s->lag_ns > *lmax)
        *lmax = s->lag_ns;
    if (s->behind_ns > *hmax)
        *hmax = s->behind_ns;
}

void sq_engine__clagg_emit(struct sq_engine__clagg *a, struct sq_second *e, int64_t now)
{
    int64_t u, sy;
    rusage_ns(&u, &sy);
    e->client.cpu_ns = u + sy - a->ru_prev;
    a->ru_prev = u + sy;
    e->client.busy_max = a->busy_max;
    e->client.lag_max_ns = a->lag_max;
    e->client.behind_max_ns = a->behind_max;
    e->client.rss_bytes = self_rss();
    if (e->client.rss_bytes > a->rss_peak)
        a->rss_peak = e->client.rss_bytes;
    a->busy_max = 0;
    a->lag_max = a->behind_max = 0;
    if (a->cfg->watch)
        (void)sq_watch_sample(a->cfg->watch, now, &e->server);
}

int sq_engine__clagg_end(struct sq_engine__clagg *a, struct sq_second *last, struct sq_result *out,
                         int64_t now)
{
    struct sq_client_stats *c = &out->client;
    int64_t u, sy;
    rusage_ns(&u, &sy);
    if (last)
        last->client.cpu_ns += u + sy - a->ru_prev;
    a->ru_prev = u + sy;
    c->cpu_user_ns = u - a->ru_user0;
    c->cpu_sys_ns = sy - a->ru_sys0;
    uint64_t rss = self_rss();
    c->rss_peak = rss > a->rss_peak ? rss : a->rss_peak;
    c->workers = calloc(a->n ? a->n : 1, sizeof(*c->workers));
    if (!c->workers)
        return -ENOMEM;
    c->nworkers = a->n;
    for (uint32_t i = 0; i < a->n; i++) {
        struct sq_worker_stats *ws = &c->workers[i];
        *ws = a->ws[i];
        ws->busy = ws->wall_ns > 0 ? (double)(ws->cpu_ns + ws->wait_ns - ws->poll_ns + ws->off_ns) /
                                         (double)ws->wall_ns
                                   : 0;
        if (ws->busy < 0)
            ws->busy = 0;
    }
    c->valid = true;
    sq_client_judge(c, out->open);

    struct sq_watch *w = a->cfg->watch;
    if (!w)
        return 0;
    struct sq_watch_tick t;
    int rc = sq_watch_sample(w, now, &t);
    if (last) {
        /* The tail after the last entry's sample belongs to the last entry. */
        struct sq_watch_tick *e = &last->server;
        e->on = true;
        e->cpu_user_ns += t.cpu_user_ns;
        e->cpu_sys_ns += t.cpu_sys_ns;
        if (t.ctxsw_vol >= 0) {
            e->ctxsw_vol = (e->ctxsw_vol < 0 ? 0 : e->ctxsw_vol) + t.ctxsw_vol;
            e->ctxsw_invol = (e->ctxsw_invol < 0 ? 0 : e->ctxsw_invol) + t.ctxsw_invol;
        }
    }
    struct sq_server_stats *sv = &out->server;
    sv->on = true;
    sq_watch_totals(w, &sv->tot);
    sv->nprocs = sq_watch_count(w);
    sv->procs = calloc(sv->nprocs ? sv->nprocs : 1, sizeof(*sv->procs));
    if (!sv->procs)
        return -ENOMEM;
    for (size_t i = 0; i < sv->nprocs; i++)
        sv->procs[i] = *sq_watch_get(w, i);
    return rc;
}

/* ---- the verdict ---- */

/* "70% on a CPU, 27% waiting for one" (", 6% taken from it" when the host took 1% or more). */
static void busy_parts(const struct sq_worker_stats *w, char *out, size_t n)
{
    double wall = (double)w->wall_ns;
    int k = snprintf(out, n, "%.0f%% on a CPU, %.0f%% waiting for one",
                     100 * (double)w->cpu_ns / wall, 100 * (double)w->wait_ns / wall);
    if (k > 0 && (size_t)k < n && (double)w->off_ns >= 0.01 * wall)
        snprintf(out + k, n - (size_t)k, ", %.0f%% taken from it", 100 * (double)w->off_ns / wall);
}

void sq_client_judge(struct sq_client_stats *c, bool open)
{
    c->saturated = false;
    c->saturation[0] = '\0';
    for (uint32_t i = 0; i < c->nworkers; i++) {
        const struct sq_worker_stats *w = &c->workers[i];
        char who[48];
        if (c->nworkers > 1)
            snprintf(who, sizeof(who), "worker %u of %u", i + 1, c->nworkers);
        else
            snprintf(who, sizeof(who), "the worker");
        if (open && w->behind_max_ns >= SQ_CLIENT_BEHIND_NS) {
            snprintf(c->saturation, sizeof(c->saturation),
                     "the open loop fell behind its schedule (%s was %.0f ms late sending an "
                     "arrival)",
                     who, (double)w->behind_max_ns / 1e6);
            c->saturated = true;
            return;
        }
        if (open && w->wall_ns >= JUDGE_MIN_NS && w->busy >= SQ_CLIENT_BUSY &&
            dropping(w->dropped, w->arrivals)) {
            char why[96];
            busy_parts(w, why, sizeof(why));
            snprintf(c->saturation, sizeof(c->saturation),
                     "%s dropped %llu of its %llu arrivals while busy %.0f%% of the run (%s)", who,
                     (unsigned long long)w->dropped, (unsigned long long)w->arrivals, 100 * w->busy,
                     why);
            c->saturated = true;
            return;
        }
        if (open && w->busy_drop_seconds >= SQ_CLIENT_BUSY_SECS) {
            snprintf(c->saturation, sizeof(c->saturation),
                     "%s dropped arrivals in %u of its %u seconds while at least %.0f%% busy", who,
                     w->busy_drop_seconds, w->seconds, 100 * SQ_CLIENT_BUSY);
            c->saturated = true;
            return;
        }
        if (open)
            continue; /* it busy-waits before each arrival on purpose: busy alone says nothing;
                         busy and dropping arrivals, it could not keep up (above) */
        if (w->wall_ns >= JUDGE_MIN_NS && w->busy >= SQ_CLIENT_BUSY) {
            char why[96];
            busy_parts(w, why, sizeof(why));
            snprintf(c->saturation, sizeof(c->saturation), "%s was busy %.0f%% of the run (%s)",
                     who, 100 * w->busy, why);
            c->saturated = true;
            return;
        }
        if (w->busy_seconds >= SQ_CLIENT_BUSY_SECS) {
            snprintf(c->saturation, sizeof(c->saturation),
                     "%s was at least %.0f%% busy in %u of its %u seconds", who,
                     100 * SQ_CLIENT_BUSY, w->busy_seconds, w->seconds);
            c->saturated = true;
            return;
        }
    }
}
