/* proc/watch.c - the watched set (see watch.h).
 *
 * Invariants: a process is in procs once (pid and start time); procs only grows; an exited
 * process keeps its last sample, so the totals (last - base, summed) stay the sum of every
 * interval the set reported. A scan of /proc (one stat file per process) runs at each sample only
 * when a name entry or a process that brings its children is in the set: a PID alone costs its
 * own files and nothing else.
 */
#include "proc/watch.h"

#include "base/clock.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NAME   255
#define MAX_DEPTH  64 /* ppid links followed to find an ancestor */
#define READ_FLAGS (SQ_PROC_FDS | SQ_PROC_CTXSW)
#define SCAN_NS    (5 * SQ_NS_PER_S) /* a scan of /proc for new processes, at most this often */

struct name_entry {
    char *name;
};

struct scanned {
    int pid, ppid;
    uint64_t starttime;
    char comm[SQ_PROC_COMM_MAX];
};

struct sq_watch {
    struct name_entry *names;
    size_t nnames;
    struct sq_watch_proc *procs;
    size_t nprocs, cap;
    bool started;
    int64_t start_ns, prev_ns;
    int64_t scanned_ns; /* the last scan of /proc; 0: none since the start */
    uint64_t start_ticks;
    uint64_t rss_peak;
    uint32_t threads_max;
    int32_t fds_max;
    int self;
};

int sq_watch_new(struct sq_watch **out)
{
    struct sq_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->fds_max = -1;
    w->self = (int)getpid();
    *out = w;
    return 0;
}

void sq_watch_free(struct sq_watch *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nnames; i++)
        free(w->names[i].name);
    free(w->names);
    free(w->procs);
    free(w);
}

bool sq_watch_any(const struct sq_watch *w)
{
    return w && (w->nprocs || w->nnames);
}

size_t sq_watch_count(const struct sq_watch *w)
{
    return w ? w->nprocs : 0;
}

const struct sq_watch_proc *sq_watch_get(const struct sq_watch *w, size_t i)
{
    return w && i < w->nprocs ? &w->procs[i] : NULL;
}

static struct sq_watch_proc *find(struct sq_watch *w, int pid, uint64_t starttime)
{
    for (size_t i = 0; i < w->nprocs; i++)
        if (w->procs[i].pid == pid && w->procs[i].starttime == starttime)
            return &w->procs[i];
    return NULL;
}

static int64_t rel(const struct sq_watch *w, int64_t now_ns)
{
    return w->started ? now_ns - w->start_ns : 0;
}

/* Appends a process first read as s (at now_ns). */
static int add_proc(struct sq_watch *w, const struct sq_proc_sample *s, enum sq_watch_how how,
                    bool children, int64_t now_ns)
{
    if (w->nprocs == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 8;
        struct sq_watch_proc *v = realloc(w->procs, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        w->procs = v;
        w->cap = cap;
    }
    struct sq_watch_proc *p = &w->procs[w->nprocs++];
    memset(p, 0, sizeof(*p));
    p->pid = s->pid;
    memcpy(p->comm, s->comm, sizeof(p->comm));
    p->how = how;
    p->children = children;
    p->starttime = s->starttime;
    p->seen_ns = p->last_seen_ns = rel(w, now_ns);
    p->base = p->last = *s;
    p->fresh = true;
    if (w->started && s->starttime >= w->start_ticks) {
        /* Born after the start: every tick of its CPU time and every switch is inside. */
        p->base.cpu_user_ns = p->base.cpu_sys_ns = 0;
        p->base.ctxsw_vol = s->ctxsw_vol >= 0 ? 0 : -1;
        p->base.ctxsw_invol = s->ctxsw_invol >= 0 ? 0 : -1;
    }
    p->rss_peak = s->rss_bytes;
    p->threads_max = s->threads;
    p->fds_max = s->fds;
    return 0;
}

int sq_watch_add_pid(struct sq_watch *w, int pid, bool children)
{
    if (pid <= 0)
        return -EINVAL;
    struct sq_proc_sample s;
    int rc = sq_proc_read(pid, READ_FLAGS, &s);
    if (rc < 0)
        return rc == -ESRCH || rc == -ENOENT ? -ESRCH : rc;
    struct sq_watch_proc *p = find(w, s.pid, s.starttime);
    if (p) {
        p->children |= children;
        return 0;
    }
    return add_proc(w, &s, SQ_WATCH_BY_PID, children, sq_now_ns());
}

/* ---- scanning /proc ---- */

static int cmp_scanned(const void *a, const void *b)
{
    const struct scanned *x = a, *y = b;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Every process's pid, ppid, start time and name, sorted by pid. Returns the count or -errno. */
static long scan(struct scanned **out)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    size_t n = 0, cap = 256;
    struct scanned *v = malloc(cap * sizeof(*v));
    if (!v) {
        closedir(d);
        return -ENOMEM;
    }
    struct dirent *e;
    char path[64], buf[1024];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%.20s/stat", e->d_name);
        long len = sq_proc_read_file(path, buf, sizeof(buf));
        struct sq_proc_stat st;
        if (len <= 0 || sq_proc_parse_stat(buf, (size_t)len, &st) < 0 || st.state == 'Z' ||
            st.state == 'X')
            continue;
        if (n == cap) {
            struct scanned *nv = realloc(v, cap * 2 * sizeof(*v));
            if (!nv) {
                free(v);
                closedir(d);
                return -ENOMEM;
            }
            v = nv;
            cap *= 2;
        }
        v[n].pid = st.pid;
        v[n].ppid = st.ppid;
        v[n].starttime = st.starttime;
        memcpy(v[n].comm, st.comm, sizeof(st.comm));
        n++;
    }
    closedir(d);
    qsort(v, n, sizeof(*v), cmp_scanned);
    *out = v;
    return (long)n;
}

static const struct scanned *scanned_get(const struct scanned *v, size_t n, int pid)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].pid == pid)
            return &v[mid];
        if (v[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* comm is cut to 15 bytes by the kernel: a longer name matches on its first 15. */
static bool name_matches(const char *comm, const char *name)
{
    return strncmp(comm, name, SQ_PROC_COMM_MAX - 1) == 0;
}

/* The name entry sc matches, or -1. */
static int matched_name(const struct sq_watch *w, const struct scanned *sc)
{
    if (sc->pid == w->self)
        return -1;
    for (size_t i = 0; i < w->nnames; i++)
        if (name_matches(sc->comm, w->names[i].name))
            return (int)i;
    return -1;
}

/* True when a live process of the set that brings its children is sc's ancestor. */
static bool below_root(const struct sq_watch *w, const struct scanned *v, size_t n,
                       const struct scanned *sc)
{
    int ppid = sc->ppid;
    for (int depth = 0; depth < MAX_DEPTH && ppid > 1; depth++) {
        const struct scanned *up = scanned_get(v, n, ppid);
        if (!up)
            return false;
        if (matched_name(w, up) >= 0)
            return true;
        for (size_t i = 0; i < w->nprocs; i++) {
            const struct sq_watch_proc *p = &w->procs[i];
            if (p->children && !p->exited && p->pid == up->pid && p->starttime == up->starttime)
                return true;
        }
        ppid = up->ppid;
    }
    return false;
}

static bool needs_scan(const struct sq_watch *w)
{
    if (w->nnames)
        return true;
    for (size_t i = 0; i < w->nprocs; i++)
        if (w->procs[i].children && !w->procs[i].exited)
            return true;
    return false;
}

/* Adds the processes a scan finds that the set lacks: those a name matches and those below a
 * process that brings its children. Returns how many it added, or -errno. */
static long discover(struct sq_watch *w, int64_t now_ns)
{
    struct scanned *v = NULL;
    long n = scan(&v);
    if (n < 0)
        return n;
    long added = 0;
    for (long i = 0; i < n; i++) {
        const struct scanned *sc = &v[i];
        if (sc->pid == w->self || find(w, sc->pid, sc->starttime))
            continue;
        bool by_name = matched_name(w, sc) >= 0;
        if (!by_name && !below_root(w, v, (size_t)n, sc))
            continue;
        struct sq_proc_sample s;
        if (sq_proc_read(sc->pid, READ_FLAGS, &s) < 0 || s.starttime != sc->starttime)
            continue; /* gone since the scan */
        if (add_proc(w, &s, by_name ? SQ_WATCH_BY_NAME : SQ_WATCH_BY_CHILD, by_name, now_ns) < 0) {
            free(v);
            return -ENOMEM;
        }
        added++;
    }
    free(v);
    return added;
}

int sq_watch_add_name(struct sq_watch *w, const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > MAX_NAME || strchr(name, '/'))
        return -EINVAL;
    struct name_entry *v = realloc(w->names, (w->nnames + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    w->names = v;
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    w->names[w->nnames++].name = copy;
    size_t before = w->nprocs;
    long rc = discover(w, sq_now_ns());
    if (rc < 0)
        return (int)rc;
    bool any = w->nprocs > before;
    for (size_t i = 0; !any && i < w->nprocs; i++)
        any = !w->procs[i].exited && name_matches(w->procs[i].comm, name);
    if (!any) {
        free(w->names[--w->nnames].name);
        return -ESRCH;
    }
    return 0;
}

/* ---- sampling ---- */

void sq_watch_start(struct sq_watch *w, int64_t now_ns)
{
    w->started = true;
    w->start_ns = w->prev_ns = now_ns;
    w->start_ticks = sq_proc_now_ticks();
    for (size_t i = 0; i < w->nprocs; i++) {
        struct sq_watch_proc *p = &w->procs[i];
        struct sq_proc_sample s;
        p->seen_ns = p->last_seen_ns = 0;
        if (sq_proc_read(p->pid, READ_FLAGS, &s) < 0 || s.starttime != p->starttime) {
            p->exited = true; /* gone before the start: it counts nothing */
            p->exited_ns = 0;
            p->base = p->last;
            continue;
        }
        p->base = p->last = s;
        p->fresh = false;
        p->rss_peak = s.rss_bytes;
        p->threads_max = s.threads;
        p->fds_max = s.fds;
    }
    if (needs_scan(w))
        (void)discover(w, now_ns);
    for (size_t i = 0; i < w->nprocs; i++)
        w->procs[i].fresh = false; /* read just now: the baseline */
    uint64_t rss = 0;
    uint32_t thr = 0;
    int32_t fds = -1;
    for (size_t i = 0; i < w->nprocs; i++) {
        const struct sq_watch_proc *p = &w->procs[i];
        if (p->exited)
            continue;
        rss += p->last.rss_bytes;
        thr += p->last.threads;
        if (p->last.fds >= 0)
            fds = (fds < 0 ? 0 : fds) + p->last.fds;
    }
    w->rss_peak = rss;
    w->threads_max = thr;
    w->fds_max = fds;
}

static int64_t pos_delta(int64_t now, int64_t then)
{
    return now > then ? now - then : 0;
}

int sq_watch_sample(struct sq_watch *w, int64_t now_ns, struct sq_watch_tick *t)
{
    if (!w->started)
        sq_watch_start(w, now_ns);
    memset(t, 0, sizeof(*t));
    t->on = true;
    t->fds = -1;
    t->ctxsw_vol = t->ctxsw_invol = -1;
    int rc = 0;
    /* New processes (a name's, or children): at the first sample, then every SCAN_NS. A scan
     * reads every process's stat file (docs/benchmarks.md: about 1 ms per 100 processes). */
    if (needs_scan(w) && (!w->scanned_ns || now_ns - w->scanned_ns >= SCAN_NS)) {
        w->scanned_ns = now_ns;
        if (discover(w, now_ns) == -ENOMEM)
            rc = -ENOMEM;
    }
    int64_t at = rel(w, now_ns);
    for (size_t i = 0; i < w->nprocs; i++) {
        struct sq_watch_proc *p = &w->procs[i];
        if (p->exited)
            continue;
        struct sq_proc_sample s, prev = p->last;
        if (p->fresh) {
            s = p->last; /* read when it joined (by this sample's scan, or before the start) */
            prev = p->base;
            p->fresh = false;
        } else if (sq_proc_read(p->pid, READ_FLAGS, &s) < 0 || s.starttime != p->starttime) {
            p->exited = true;
            p->exited_ns = at;
            continue;
        }
        t->cpu_user_ns += pos_delta(s.cpu_user_ns, prev.cpu_user_ns);
        t->cpu_sys_ns += pos_delta(s.cpu_sys_ns, prev.cpu_sys_ns);
        if (s.ctxsw_vol >= 0 && prev.ctxsw_vol >= 0) {
            t->ctxsw_vol =
                (t->ctxsw_vol < 0 ? 0 : t->ctxsw_vol) + pos_delta(s.ctxsw_vol, prev.ctxsw_vol);
            t->ctxsw_invol = (t->ctxsw_invol < 0 ? 0 : t->ctxsw_invol) +
                             pos_delta(s.ctxsw_invol, prev.ctxsw_invol);
        }
        if (p->base.ctxsw_vol < 0 && s.ctxsw_vol >= 0) {
            p->base.ctxsw_vol = s.ctxsw_vol; /* first readable: counts from here */
            p->base.ctxsw_invol = s.ctxsw_invol;
        }
        t->rss_bytes += s.rss_bytes;
        t->threads += s.threads;
        t->procs++;
        if (s.fds >= 0)
            t->fds = (t->fds < 0 ? 0 : t->fds) + s.fds;
        /* Keep the CPU counters monotonic in last, whatever a reading said. */
        if (s.cpu_user_ns < prev.cpu_user_ns)
            s.cpu_user_ns = prev.cpu_user_ns;
        if (s.cpu_sys_ns < prev.cpu_sys_ns)
            s.cpu_sys_ns = prev.cpu_sys_ns;
        p->last = s;
        memcpy(p->comm, s.comm, sizeof(p->comm)); /* an exec since changes it */
        p->last_seen_ns = at;
        if (s.rss_bytes > p->rss_peak)
            p->rss_peak = s.rss_bytes;
        if (s.threads > p->threads_max)
            p->threads_max = s.threads;
        if (s.fds > p->fds_max)
            p->fds_max = s.fds;
    }
    if (t->rss_bytes > w->rss_peak)
        w->rss_peak = t->rss_bytes;
    if (t->threads > w->threads_max)
        w->threads_max = t->threads;
    if (t->fds > w->fds_max)
        w->fds_max = t->fds;
    w->prev_ns = now_ns;
    return rc;
}

void sq_watch_totals(const struct sq_watch *w, struct sq_watch_totals *out)
{
    memset(out, 0, sizeof(*out));
    out->ctxsw_vol = out->ctxsw_invol = -1;
    out->fds_max = w->fds_max;
    out->rss_peak = w->rss_peak;
    out->threads_max = w->threads_max;
    out->elapsed_ns = w->started ? w->prev_ns - w->start_ns : 0;
    out->nprocs = (uint32_t)w->nprocs;
    for (size_t i = 0; i < w->nprocs; i++) {
        const struct sq_watch_proc *p = &w->procs[i];
        out->exited += p->exited;
        out->cpu_user_ns += pos_delta(p->last.cpu_user_ns, p->base.cpu_user_ns);
        out->cpu_sys_ns += pos_delta(p->last.cpu_sys_ns, p->base.cpu_sys_ns);
        if (p->base.ctxsw_vol >= 0 && p->last.ctxsw_vol >= 0) {
            out->ctxsw_vol = (out->ctxsw_vol < 0 ? 0 : out->ctxsw_vol) +
                             pos_delta(p->last.ctxsw_vol, p->base.ctxsw_vol);
            out->ctxsw_invol = (out->ctxsw_invol < 0 ? 0 : out->ctxsw_invol) +
                               pos_delta(p->last.ctxsw_invol, p->base.ctxsw_invol);
        }
    }
}
