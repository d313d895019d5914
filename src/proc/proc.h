/* proc/proc.h - one process as Linux's /proc shows it: CPU time, memory, threads, open files,
 * context switches; and the text parsers behind that (pure, fuzzed: fuzz/fuzz_proc.c).
 *
 * Everything here reads files the kernel generates on each read; nothing is cached. A process is
 * named by its PID and its start time (field 22 of /proc/PID/stat, clock ticks after boot): a PID
 * the kernel hands to a new process after the old one exited has another start time, so the two
 * are never taken for one.
 */
#ifndef SQ_PROC_PROC_H
#define SQ_PROC_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SQ_PROC_COMM_MAX 16 /* the kernel's TASK_COMM_LEN, its NUL included */

/* The fields of /proc/PID/stat squall reads (proc(5) numbers them from 1). */
struct sq_proc_stat {
    int pid, ppid;
    char comm[SQ_PROC_COMM_MAX]; /* field 2 without its parentheses, cut to 15 bytes */
    char state;                  /* field 3: R S D Z T t X I ... */
    uint64_t utime, stime;       /* fields 14, 15: clock ticks in user and kernel mode */
    int64_t num_threads;         /* field 20 */
    uint64_t starttime;          /* field 22: clock ticks after boot */
    uint64_t rss_pages;          /* field 24 */
};

/* Parses the text of /proc/PID/stat (len bytes, no NUL needed). The command name may hold any
 * byte, spaces and parentheses included: it ends at the last ')'. Returns 0 or -SQ_EPARSE. */
SQ_MUST_CHECK int sq_proc_parse_stat(const char *s, size_t len, struct sq_proc_stat *out);

/* The lines of /proc/PID/status (or /proc/PID/task/TID/status) squall reads. A kernel thread has
 * no Vm lines: those stay 0. */
struct sq_proc_status {
    uint64_t vm_rss, vm_hwm;         /* bytes (the file says kB = 1024 bytes) */
    uint32_t threads;                /* Threads: */
    uint64_t ctxsw_vol, ctxsw_invol; /* voluntary_ctxt_switches, nonvoluntary_ctxt_switches */
    bool has_ctxsw;                  /* both switch lines were there */
};

/* Parses the text of a status file. Lines it does not know are skipped; a known line whose value
 * is not a number is -SQ_EPARSE. Returns 0 or -SQ_EPARSE. */
SQ_MUST_CHECK int sq_proc_parse_status(const char *s, size_t len, struct sq_proc_status *out);

/* /proc/PID/schedstat or /proc/PID/task/TID/schedstat: "on-CPU-ns runqueue-wait-ns slices".
 * Returns 0 or -SQ_EPARSE. */
SQ_MUST_CHECK int sq_proc_parse_schedstat(const char *s, size_t len, int64_t *cpu_ns,
                                          int64_t *wait_ns);

/* One reading of a process. */
struct sq_proc_sample {
    int pid, ppid;
    char comm[SQ_PROC_COMM_MAX];
    char state;
    uint64_t starttime;              /* with pid, names the process */
    int64_t cpu_user_ns, cpu_sys_ns; /* since it started (stat's ticks, so 1/CLK_TCK steps) */
    uint64_t rss_bytes, hwm_bytes;   /* VmRSS, VmHWM (0 for a kernel thread) */
    uint32_t threads;
    int32_t fds;                    /* open file descriptors; -1: not read, or not allowed */
    int64_t ctxsw_vol, ctxsw_invol; /* summed over its live threads; -1: not read */
};

/* What sq_proc_read reads beyond stat and status. */
enum {
    SQ_PROC_FDS = 1 << 0,   /* count /proc/PID/fd (one directory listing) */
    SQ_PROC_CTXSW = 1 << 1, /* sum every thread's switches (one status file per thread: the
                               process's own status counts its main thread only) */
};

/* Reads process pid. Returns 0; -ESRCH when there is no such process or it has exited (a zombie,
 * state Z or X, counts as exited); or another -errno. An unreadable fd directory (another user's
 * process) is not an error: fds is then -1. */
SQ_MUST_CHECK int sq_proc_read(int pid, unsigned what, struct sq_proc_sample *out);

/* Clock ticks per second of stat's time fields (sysconf(_SC_CLK_TCK), usually 100). */
long sq_proc_ticks_per_s(void);

/* Clock ticks after boot now (the unit and zero of struct sq_proc_stat.starttime). */
uint64_t sq_proc_now_ticks(void);

/* Reads a small /proc file (at most cap - 1 bytes, then a NUL) into buf. Returns the length or
 * -errno. */
SQ_MUST_CHECK long sq_proc_read_file(const char *path, char *buf, size_t cap);

#endif
