/* proc/proc.c - reading one process from /proc (see proc.h).
 *
 * Costs, per process read (measured in docs/internals/proc.md): stat and status are one open,
 * read and close each (a few µs: the kernel formats them on the read); SQ_PROC_FDS lists the fd
 * directory (about 1 µs per 30 open files); SQ_PROC_CTXSW reads one status file per thread.
 */
#include "proc/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STATUS_CAP 4096

/* ---- parsers ---- */

/* Parses an unsigned decimal at *p (leading blanks skipped); advances *p past it. */
static bool take_u64(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    if (s == end || *s < '0' || *s > '9')
        return false;
    uint64_t v = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        s++;
    }
    *p = s;
    *out = v;
    return true;
}

/* A signed decimal (stat has a few fields that may be negative: priority, nice, tty). */
static bool take_i64(const char **p, const char *end, int64_t *out)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    bool neg = s < end && *s == '-';
    if (neg)
        s++;
    uint64_t v;
    if (!take_u64(&s, end, &v) || v > (uint64_t)INT64_MAX)
        return false;
    *p = s;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

int sq_proc_parse_stat(const char *s, size_t len, struct sq_proc_stat *out)
{
    const char *end = s + len, *p = s;
    memset(out, 0, sizeof(*out));
    int64_t pid;
    if (!take_i64(&p, end, &pid) || pid <= 0 || pid > INT32_MAX)
        return -SQ_EPARSE;
    out->pid = (int)pid;
    while (p < end && *p == ' ')
        p++;
    if (p == end || *p != '(')
        return -SQ_EPARSE;
    const char *name = p + 1, *close = NULL;
    for (const char *q = end; q > name;) /* the last ')' ends the name, whatever it holds */
        if (*--q == ')') {
            close = q;
            break;
        }
    if (!close)
        return -SQ_EPARSE;
    size_t n = (size_t)(close - name);
    if (n > SQ_PROC_COMM_MAX - 1)
        n = SQ_PROC_COMM_MAX - 1;
    memcpy(out->comm, name, n);
    out->comm[n] = '\0';
    p = close + 1;
    if (p + 2 > end || p[0] != ' ' || p[1] < 'A' || p[1] > 'z')
        return -SQ_EPARSE;
    out->state = p[1];
    p += 2;
    /* Fields 4 .. 24, each a number. */
    for (int field = 4; field <= 24; field++) {
        int64_t v;
        if (!take_i64(&p, end, &v))
            return -SQ_EPARSE;
        switch (field) {
        case 4:
            if (v < 0 || v > INT32_MAX)
                return -SQ_EPARSE;
            out->ppid = (int)v;
            break;
        case 14:
            out->utime = v < 0 ? 0 : (uint64_t)v;
            break;
        case 15:
            out->stime = v < 0 ? 0 : (uint64_t)v;
            break;
        case 20:
            out->num_threads = v;
            break;
        case 22:
            out->starttime = v < 0 ? 0 : (uint64_t)v;
            break;
        case 24:
            out->rss_pages = v < 0 ? 0 : (uint64_t)v;
            break;
        default:
            break;
        }
    }
    return 0;
}

/* The value of a "Key:\tN kB" or "Key:\tN" line whose key is name; false if the line is another. */
static int status_line(const char *line, const char *lend, const char *name, uint64_t unit,
                       uint64_t *out)
{
    size_t n = strlen(name);
    if ((size_t)(lend - line) <= n || memcmp(line, name, n) != 0 || line[n] != ':')
        return 0;
    const char *p = line + n + 1;
    uint64_t v;
    if (!take_u64(&p, lend, &v))
        return -1;
    if (unit > 1 && v > UINT64_MAX / unit)
        return -1;
    *out = v * unit;
    return 1;
}

int sq_proc_parse_status(const char *s, size_t len, struct sq_proc_status *out)
{
    memset(out, 0, sizeof(*out));
    const char *end = s + len;
    int seen = 0;
    while (s < end) {
        const char *lend = memchr(s, '\n', (size_t)(end - s));
        if (!lend)
            lend = end;
        uint64_t v = 0;
        int r;
        if ((r = status_line(s, lend, "VmRSS", 1024, &out->vm_rss)) != 0 ||
            (r = status_line(s, lend, "VmHWM", 1024, &out->vm_hwm)) != 0) {
            if (r < 0)
                return -SQ_EPARSE;
        } else if ((r = status_line(s, lend, "Threads", 1, &v)) != 0) {
            if (r < 0 || v > UINT32_MAX)
                return -SQ_EPARSE;
            out->threads = (uint32_t)v;
        } else if ((r = status_line(s, lend, "voluntary_ctxt_switches", 1, &out->ctxsw_vol)) != 0) {
            if (r < 0)
                return -SQ_EPARSE;
            seen |= 1;
        } else if ((r = status_line(s, lend, "nonvoluntary_ctxt_switches", 1, &out->ctxsw_invol)) !=
                   0) {
            if (r < 0)
                return -SQ_EPARSE;
            seen |= 2;
        }
        s = lend + 1;
    }
    out->has_ctxsw = seen == 3;
    return 0;
}

int sq_proc_parse_schedstat(const char *s, size_t len, int64_t *cpu_ns, int64_t *wait_ns)
{
    const char *p = s, *end = s + len;
    uint64_t a, b;
    if (!take_u64(&p, end, &a) || !take_u64(&p, end, &b) || a > INT64_MAX || b > INT64_MAX)
        return -SQ_EPARSE;
    *cpu_ns = (int64_t)a;
    *wait_ns = (int64_t)b;
    return 0;
}

/* ---- reading ---- */

long sq_proc_read_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return (long)n;
}

long sq_proc_ticks_per_s(void)
{
    static long tck;
    if (!tck) {
        long v = sysconf(_SC_CLK_TCK);
        tck = v > 0 ? v : 100;
    }
    return tck;
}

uint64_t sq_proc_now_ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    long t = sq_proc_ticks_per_s();
    return (uint64_t)ts.tv_sec * (uint64_t)t + (uint64_t)ts.tv_nsec / (1000000000ULL / (uint64_t)t);
}

static int64_t ticks_ns(uint64_t ticks)
{
    return (int64_t)(ticks * (1000000000ULL / (uint64_t)sq_proc_ticks_per_s()));
}

static int count_fds(int pid)
{
    char path[48];
    snprintf(path, sizeof(path), "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Sums the context switches of every live thread of pid. Returns false when none was read. */
static bool sum_ctxsw(int pid, int64_t *vol, int64_t *invol)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return false;
    char buf[STATUS_CAP];
    int64_t v = 0, iv = 0;
    bool any = false;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char tp[96];
        snprintf(tp, sizeof(tp), "/proc/%d/task/%.20s/status", pid, e->d_name);
        long n = sq_proc_read_file(tp, buf, sizeof(buf));
        struct sq_proc_status st;
        if (n <= 0 || sq_proc_parse_status(buf, (size_t)n, &st) < 0 || !st.has_ctxsw)
            continue; /* the thread exited between the listing and the read */
        v += (int64_t)st.ctxsw_vol;
        iv += (int64_t)st.ctxsw_invol;
        any = true;
    }
    closedir(d);
    *vol = v;
    *invol = iv;
    return any;
}

int sq_proc_read(int pid, unsigned what, struct sq_proc_sample *out)
{
    memset(out, 0, sizeof(*out));
    out->fds = -1;
    out->ctxsw_vol = out->ctxsw_invol = -1;
    if (pid <= 0)
        return -ESRCH;
    char path[48], buf[STATUS_CAP];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    long n = sq_proc_read_file(path, buf, sizeof(buf));
    if (n == -ENOENT)
        return -ESRCH;
    if (n < 0)
        return (int)n;
    struct sq_proc_stat st;
    if (sq_proc_parse_stat(buf, (size_t)n, &st) < 0)
        return -SQ_EPARSE;
    if (st.state == 'Z' || st.state == 'X')
        return -ESRCH;
    out->pid = st.pid;
    out->ppid = st.ppid;
    memcpy(out->comm, st.comm, sizeof(out->comm));
    out->state = st.state;
    out->starttime = st.starttime;
    out->cpu_user_ns = ticks_ns(st.utime);
    out->cpu_sys_ns = ticks_ns(st.stime);
    out->threads =
        st.num_threads > 0 && st.num_threads <= UINT32_MAX ? (uint32_t)st.num_threads : 0;
    out->rss_bytes = st.rss_pages * (uint64_t)sysconf(_SC_PAGESIZE);

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    n = sq_proc_read_file(path, buf, sizeof(buf));
    if (n == -ENOENT)
        return -ESRCH;
    struct sq_proc_status ss;
    if (n > 0 && sq_proc_parse_status(buf, (size_t)n, &ss) == 0) {
        if (ss.vm_rss || ss.vm_hwm) {
            out->rss_bytes = ss.vm_rss;
            out->hwm_bytes = ss.vm_hwm;
        }
        if (ss.threads)
            out->threads = ss.threads;
        if (ss.has_ctxsw && ss.threads <= 1) {
            out->ctxsw_vol = (int64_t)ss.ctxsw_vol;
            out->ctxsw_invol = (int64_t)ss.ctxsw_invol;
        }
    }
    if ((what & SQ_PROC_CTXSW) && out->threads > 1)
        sum_ctxsw(pid, &out->ctxsw_vol, &out->ctxsw_invol);
    if (what & SQ_PROC_FDS)
        out->fds = count_fds(pid);
    return 0;
}
