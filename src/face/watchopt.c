/* face/watchopt.c - --watch and --watch-name (see watchopt.h). */
#include "face/watchopt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/parse.h"

#define PID_MAX 4194304 /* the kernel's ceiling for pid_max (PID_MAX_LIMIT on 64-bit) */

int sq_watch_opts_add(struct sq_watch_opts *o, bool by_name, const char *flag, const char *arg,
                      char *err, size_t len)
{
    if (o->n == SQ_WATCH_MAX) {
        snprintf(err, len, "%s: at most %d processes (--watch and --watch-name together)", flag,
                 SQ_WATCH_MAX);
        return -SQ_EUSAGE;
    }
    if (by_name) {
        size_t n = strlen(arg);
        if (n == 0 || n > 255 || strchr(arg, '/')) {
            snprintf(err, len, "%s: '%s' is not a process name (1..255 bytes, no '/')", flag, arg);
            return -SQ_EUSAGE;
        }
    } else {
        uint64_t pid;
        if (sq_parse_u64(arg, 1, PID_MAX, 0, &pid) < 0) {
            snprintf(err, len, "%s: '%s' is not a process id (1..%d)", flag, arg, PID_MAX);
            return -SQ_EUSAGE;
        }
    }
    o->arg[o->n] = arg;
    o->by_name[o->n] = by_name;
    o->n++;
    return 0;
}

int sq_watch_opts_build(const struct sq_watch_opts *o, struct sq_watch **out, char *err, size_t len)
{
    *out = NULL;
    if (o->n == 0)
        return 0;
    struct sq_watch *w;
    int rc = sq_watch_new(&w);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < o->n; i++) {
        if (o->by_name[i]) {
            rc = sq_watch_add_name(w, o->arg[i]);
            if (rc == -ESRCH)
                snprintf(err, len, "--watch-name: no process named '%s' runs", o->arg[i]);
        } else {
            uint64_t pid = 0;
            if (sq_parse_u64(o->arg[i], 1, PID_MAX, 0, &pid) < 0)
                rc = -ESRCH;
            else
                rc = sq_watch_add_pid(w, (int)pid, true);
            if (rc == -ESRCH || rc == -EINVAL)
                snprintf(err, len, "--watch: no process %s (or it has exited)", o->arg[i]);
        }
        if (rc < 0) {
            sq_watch_free(w);
            if (rc == -ESRCH || rc == -EINVAL)
                return -SQ_EUSAGE;
            snprintf(err, len, "--watch: %s", sq_strerror(rc));
            return rc;
        }
    }
    *out = w;
    return 0;
}
