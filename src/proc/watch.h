/* proc/watch.h - the processes a run watches (`--watch PID`, `--watch-name NAME`), sampled from
 * /proc once a second: CPU user and system time, RSS, threads, open files, context switches.
 *
 * The set holds entries (a PID, or a name) and the processes they found. A name matches every
 * process whose command name (comm, /proc/PID/comm: the kernel keeps its first 15 bytes) is NAME,
 * and every process below one of those (children, grandchildren); the set looks for new ones at
 * its first sample and then every 5 s (a scan reads every process's stat file), so a worker a
 * server forks mid-run joins it within 5 s. A PID entry may ask for its children
 * the same way. squall itself (this process) is never matched by a name.
 *
 * Figures are differences between samples: sq_watch_start() takes the baseline, each
 * sq_watch_sample() reports the interval since the previous one summed over the set. A process
 * found after the start that also started after it counts from zero (all its CPU time is inside
 * the watch); one that was already running counts from its first sample. A process that exits is
 * kept with the figures of its last sample and the time of the first sample that missed it.
 *
 * Not thread-safe: one thread (the run's main thread) owns the set.
 */
#ifndef SQ_PROC_WATCH_H
#define SQ_PROC_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "proc/proc.h"

struct sq_watch; /* opaque; the creator owns it */

/* How a process joined the set. */
enum sq_watch_how {
    SQ_WATCH_BY_PID,   /* --watch PID */
    SQ_WATCH_BY_NAME,  /* --watch-name NAME matched it */
    SQ_WATCH_BY_CHILD, /* below a process of the set that asked for its children */
};

/* One watched process. Times are ns after sq_watch_start (negative before it). */
struct sq_watch_proc {
    int pid;
    char comm[SQ_PROC_COMM_MAX];
    enum sq_watch_how how;
    uint64_t starttime;            /* with pid, names the process */
    bool children;                 /* its children join the set */
    bool exited;                   /* a sample missed it after it was seen */
    bool fresh;                    /* read when it joined; the next sample counts that reading */
    int64_t seen_ns, last_seen_ns; /* its first and latest sample */
    int64_t exited_ns;             /* exited: the first sample that missed it */
    struct sq_proc_sample base;    /* what its figures count from */
    struct sq_proc_sample last;    /* its latest sample */
    uint64_t rss_peak;             /* the largest RSS its samples saw */
    uint32_t threads_max;
    int32_t fds_max; /* -1: never read */
};

/* One interval (between two samples), summed over the set. */
struct sq_watch_tick {
    bool on;                         /* the run watches processes (false: the rest is 0) */
    int64_t cpu_user_ns, cpu_sys_ns; /* CPU time spent in the interval */
    uint64_t rss_bytes;              /* RSS at the sample, summed */
    uint32_t procs;                  /* processes alive at the sample */
    uint32_t threads;                /* their threads */
    int32_t fds;                     /* their open files; -1 when none could be read */
    int64_t ctxsw_vol, ctxsw_invol;  /* switches in the interval; -1 when none could be read */
};

/* The whole watch: from the start to the latest sample. */
struct sq_watch_totals {
    int64_t cpu_user_ns, cpu_sys_ns;
    uint64_t rss_peak;              /* the largest summed RSS of any sample */
    uint32_t threads_max;           /* the most threads of any sample */
    int32_t fds_max;                /* -1: never read */
    int64_t ctxsw_vol, ctxsw_invol; /* -1: never read */
    uint32_t nprocs, exited;
    int64_t elapsed_ns; /* from the start to the latest sample */
};

/* Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_watch_new(struct sq_watch **out);
void sq_watch_free(struct sq_watch *w); /* NULL is a no-op */

/* Adds process pid, and with children every process below it. Returns 0, -ESRCH (no such
 * process, or it has exited), -EINVAL (pid <= 0) or -ENOMEM. */
SQ_MUST_CHECK int sq_watch_add_pid(struct sq_watch *w, int pid, bool children);

/* Adds every process named name, and their children (see above). Returns 0, -ESRCH (no process
 * of that name runs now), -EINVAL (an empty name, one with '/', or longer than 255 bytes) or
 * -ENOMEM. */
SQ_MUST_CHECK int sq_watch_add_name(struct sq_watch *w, const char *name);

/* True when the set has an entry. */
bool sq_watch_any(const struct sq_watch *w);

/* Takes the baseline: every process's figures count from here. now_ns is CLOCK_MONOTONIC. */
void sq_watch_start(struct sq_watch *w, int64_t now_ns);

/* Samples every process (and looks for new ones); fills tick with the interval since the
 * previous sample. Returns 0 or -ENOMEM (tick is then still filled from what was read). */
int sq_watch_sample(struct sq_watch *w, int64_t now_ns, struct sq_watch_tick *tick);

void sq_watch_totals(const struct sq_watch *w, struct sq_watch_totals *out);
size_t sq_watch_count(const struct sq_watch *w);
/* Process i (0 <= i < count), in the order they joined. */
const struct sq_watch_proc *sq_watch_get(const struct sq_watch *w, size_t i);

#endif
