/* proc/spawn.h - the processes squall starts itself: a server under test (`squall measure
 * --spawn`, `squall ab --server-a`) and the runs of an A/B test; and the command lines they are
 * given as one string ('CMD ARGS').
 *
 * A spawned process gets its own process group (so stopping it reaches what it forked), stdin
 * from /dev/null, and SIGTERM when squall dies (PR_SET_PDEATHSIG), so no server outlives the
 * command that started it.
 */
#ifndef SQ_PROC_SPAWN_H
#define SQ_PROC_SPAWN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

#define SQ_ARGS_MAX       4096      /* words in one command line */
#define SQ_ARGS_MAX_BYTES (1 << 20) /* its length */

/* Splits a command line into words the way a POSIX shell does before any expansion: blanks
 * (space, tab, newline) separate words; '...' keeps everything inside as it is; "..." keeps
 * everything but \" \\ \$ \` and a backslash-newline; outside quotes a backslash keeps the next
 * byte as it is. No variables, globs or operators: `a|b` is one word. Returns 0 with *argv (a
 * NULL-terminated array in one allocation: free(*argv) frees it all) and *argc (which may be 0),
 * or -SQ_EPARSE with *why a static phrase ("an unterminated ' quote", "an unterminated \"
 * quote", "a backslash at the end"), -SQ_ETOOBIG or -ENOMEM. */
SQ_MUST_CHECK int sq_args_split(const char *line, char ***argv, int *argc, const char **why);

/* The file argv0 runs: argv0 itself when it holds a '/', else the first executable regular file
 * named argv0 in $PATH (or "/usr/local/bin:/usr/bin:/bin"). Returns 0 with out filled, -ENOENT
 * (not found) or -ENAMETOOLONG. */
SQ_MUST_CHECK int sq_proc_which(const char *argv0, char *out, size_t len);

/* How a spawned process's stdout and stderr go: an open descriptor, or -1 for /dev/null. */
struct sq_spawn_io {
    int out_fd, err_fd;
};

/* Starts argv (argv[0] found with sq_proc_which) as a child in its own process group. Returns 0
 * with *pid, -ENOENT (no such program), -EACCES, or the -errno of fork or exec (an exec that fails
 * in the child is reported here, not as an exit status). io may be NULL (both to /dev/null). */
SQ_MUST_CHECK int sq_proc_spawn(const char *const argv[], const struct sq_spawn_io *io, pid_t *pid);

/* Whether child pid (spawned here) has exited: 1 with *status (a wait status) when it has and
 * has been reaped, 0 while it runs, -errno on error. */
int sq_proc_reap(pid_t pid, int *status);

/* Stops child pid (spawned here) and what it started in its process group: SIGTERM, then SIGKILL
 * after grace_ns, and reaps it; then waits (up to a second) until nothing of its group is left.
 * Returns 0 with *status (may be NULL) or -errno. A child that had already been reaped
 * (sq_proc_reap returned 1) must not be stopped again. */
int sq_proc_stop(pid_t pid, int64_t grace_ns, int *status);

/* "exited with status 3", "killed by signal 9 (Killed)" for a wait status. */
const char *sq_proc_status_text(int status, char *buf, size_t len);

#endif
