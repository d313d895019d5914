/* proc/spawn.c - command lines and child processes (see spawn.h).
 *
 * The split is two passes over the line: the first checks it and counts words and bytes, the
 * second writes the words after the pointer array of the same allocation. Spawning resolves the
 * program before fork, so the child calls only async-signal-safe functions (setpgid, prctl,
 * open, dup2, execv, write, _exit); a failed exec writes its errno to a close-on-exec pipe that
 * the parent reads (end of file: exec succeeded).
 */
#include "proc/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

/* ---- splitting ---- */

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n';
}

/* One pass: with out == NULL counts words (*nwords) and word bytes (*nbytes); else writes each
 * word, NUL-terminated, from out and points argv at them. Returns 0 or -SQ_EPARSE. */
static int split_pass(const char *s, char **argv, char *out, size_t *nwords, size_t *nbytes,
                      const char **why)
{
    size_t words = 0, bytes = 0;
    while (*s) {
        while (blank(*s))
            s++;
        if (!*s)
            break;
        if (argv)
            argv[words] = out + bytes;
        while (*s && !blank(*s)) {
            char c = *s++;
            if (c == '\'') {
                while (*s && *s != '\'') {
                    if (out)
                        out[bytes] = *s;
                    bytes++;
                    s++;
                }
                if (!*s) {
                    *why = "an unterminated ' quote";
                    return -SQ_EPARSE;
                }
                s++;
            } else if (c == '"') {
                while (*s && *s != '"') {
                    char d = *s++;
                    if (d == '\\' && (*s == '"' || *s == '\\' || *s == '$' || *s == '`')) {
                        d = *s++;
                    } else if (d == '\\' && *s == '\n') {
                        s++;
                        continue;
                    }
                    if (out)
                        out[bytes] = d;
                    bytes++;
                }
                if (!*s) {
                    *why = "an unterminated \" quote";
                    return -SQ_EPARSE;
                }
                s++;
            } else if (c == '\\') {
                if (!*s) {
                    *why = "a backslash at the end";
                    return -SQ_EPARSE;
                }
                if (*s == '\n') {
                    s++;
                    continue;
                }
                if (out)
                    out[bytes] = *s;
                bytes++;
                s++;
            } else {
                if (out)
                    out[bytes] = c;
                bytes++;
            }
        }
        if (out)
            out[bytes] = '\0';
        bytes++;
        words++;
    }
    *nwords = words;
    *nbytes = bytes;
    return 0;
}

int sq_args_split(const char *line, char ***argv, int *argc, const char **why)
{
    size_t words, bytes;
    *why = NULL;
    if (strlen(line) > SQ_ARGS_MAX_BYTES) {
        *why = "longer than 1 MiB";
        return -SQ_ETOOBIG;
    }
    int rc = split_pass(line, NULL, NULL, &words, &bytes, why);
    if (rc < 0)
        return rc;
    if (words > SQ_ARGS_MAX) {
        *why = "more than 4096 words";
        return -SQ_ETOOBIG;
    }
    size_t head = (words + 1) * sizeof(char *);
    char **v = malloc(head + bytes + 1);
    if (!v)
        return -ENOMEM;
    char *out = (char *)v + head;
    rc = split_pass(line, v, out, &words, &bytes, why);
    if (rc < 0) { /* cannot happen: the first pass accepted the same line */
        free(v);
        return rc;
    }
    v[words] = NULL;
    *argv = v;
    *argc = (int)words;
    return 0;
}

/* ---- finding and starting programs ---- */

static bool runnable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int sq_proc_which(const char *argv0, char *out, size_t len)
{
    if (!argv0[0])
        return -ENOENT;
    if (strchr(argv0, '/')) {
        if (strlen(argv0) >= len)
            return -ENAMETOOLONG;
        strcpy(out, argv0);
        return runnable(out) ? 0 : -ENOENT;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        const char *dir = n ? path : ".";
        size_t dn = n ? n : 1;
        if (dn + 1 + strlen(argv0) < len) {
            memcpy(out, dir, dn);
            out[dn] = '/';
            strcpy(out + dn + 1, argv0);
            if (runnable(out))
                return 0;
        }
        path += n;
        if (*path == ':')
            path++;
    }
    return -ENOENT;
}

int sq_proc_spawn(const char *const argv[], const struct sq_spawn_io *io, pid_t *pid)
{
    if (!argv[0])
        return -ENOENT;
    char exe[4096];
    int rc = sq_proc_which(argv[0], exe, sizeof(exe));
    if (rc < 0)
        return rc;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    int out_fd = io ? io->out_fd : -1, err_fd = io ? io->err_fd : -1;
    pid_t parent = getpid();
    pid_t p = fork();
    if (p < 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        return -e;
    }
    if (p == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) /* the parent died before prctl */
            _exit(127);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0)
            dup2(null, STDIN_FILENO);
        dup2(out_fd >= 0 ? out_fd : null, STDOUT_FILENO);
        dup2(err_fd >= 0 ? err_fd : null, STDERR_FILENO);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        execv(exe, (char *const *)argv);
        int e = errno;
        ssize_t w = write(pfd[1], &e, sizeof(e));
        (void)w;
        _exit(127);
    }
    close(pfd[1]);
    int child_err = 0;
    ssize_t n;
    do
        n = read(pfd[0], &child_err, sizeof(child_err));
    while (n < 0 && errno == EINTR);
    close(pfd[0]);
    if (n == (ssize_t)sizeof(child_err)) {
        waitpid(p, NULL, 0);
        return -child_err;
    }
    setpgid(p, p); /* also here: no race with a kill of the group right after */
    *pid = p;
    return 0;
}

int sq_proc_reap(pid_t pid, int *status)
{
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r < 0)
        return -errno;
    if (r == 0)
        return 0;
    if (status)
        *status = st;
    return 1;
}

int sq_proc_stop(pid_t pid, int64_t grace_ns, int *status)
{
    if (pid <= 0)
        return -EINVAL;
    if (kill(-pid, SIGTERM) < 0 && kill(pid, SIGTERM) < 0 && errno != ESRCH)
        return -errno;
    /* Wait for it to exit without reaping it (WNOWAIT): while it is a zombie its group number
     * cannot be handed out again, so the last SIGKILL below reaches only what it left behind. */
    int64_t deadline = sq_now_ns() + grace_ns;
    for (;;) {
        siginfo_t si = {0};
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
            return -errno;
        if (si.si_pid == pid)
            break;
        if (sq_now_ns() >= deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            deadline = INT64_MAX; /* SIGKILL cannot be refused: wait for it */
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 2 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    kill(-pid, SIGKILL); /* anything it started and left behind in its group */
    int st = 0;
    if (waitpid(pid, &st, 0) < 0)
        return -errno;
    /* Wait (a second at most) until the group is empty, so whatever port or file its members
     * held is free when this returns. Signal 0 only asks. */
    for (int i = 0; i < 500 && kill(-pid, 0) == 0; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 2 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    if (status)
        *status = st;
    return 0;
}

const char *sq_proc_status_text(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "stopped (wait status %d)", status);
    return buf;
}
