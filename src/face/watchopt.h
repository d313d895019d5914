/* face/watchopt.h - the flags that name processes for a run to watch (`--watch PID`,
 * `--watch-name NAME`, both repeatable), shared by the quick face, the plan face and the daemon's
 * JSON options, so each refuses the same mistakes with the same words.
 *
 * Both take the process's children too (a server is often a master and its workers): --watch PID
 * is that process and every process below it; --watch-name NAME every process whose command
 * name is NAME and every process below those (proc/watch.h). A PID that does not exist, or a
 * name no process has, is refused before the run starts (exit 2), never found out after it.
 */
#ifndef SQ_FACE_WATCHOPT_H
#define SQ_FACE_WATCHOPT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "proc/watch.h"

#define SQ_WATCH_MAX 64 /* --watch and --watch-name values in one run */

struct sq_watch_opts {
    const char *arg[SQ_WATCH_MAX]; /* as given (borrowed from the arguments) */
    bool by_name[SQ_WATCH_MAX];
    size_t n;
};

/* Records one value of --watch (by_name false) or --watch-name (true); flag is the flag as the
 * user wrote it. Returns 0, or -SQ_EUSAGE with err naming the flag ("--watch: 'x' is not a
 * process id (1..4194304)", "--watch-name: 'a/b' is not a process name (1..255 bytes, no '/')",
 * "--watch: at most 64 processes"). */
SQ_MUST_CHECK int sq_watch_opts_add(struct sq_watch_opts *o, bool by_name, const char *flag,
                                    const char *arg, char *err, size_t len);

/* Builds the watched set the options name. *out is NULL when none was given. Returns 0,
 * -SQ_EUSAGE with err ("--watch: no process 4242 (or it has exited)", "--watch-name: no process
 * named 'ngnix' runs"), or -ENOMEM. The caller sq_watch_free()s *out. */
SQ_MUST_CHECK int sq_watch_opts_build(const struct sq_watch_opts *o, struct sq_watch **out,
                                      char *err, size_t len);

#endif
