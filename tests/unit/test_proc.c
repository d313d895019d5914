/* Unit tests: proc/ (the /proc parsers, reading a process, the watched set, command lines and
 * spawned children). The processes watched here are this test's own children, started and
 * stopped by PID. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "proc/proc.h"
#include "proc/spawn.h"
#include "proc/watch.h"

static const char stat_line[] =
    "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 3 0 123456 "
    "10000000 2048 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";

static void parse_stat(void **state)
{
    (void)state;
    struct sq_proc_stat st;
    assert_int_equal(sq_proc_parse_stat(stat_line, strlen(stat_line), &st), 0);
    assert_int_equal(st.pid, 4242);
    assert_string_equal(st.comm, "my (odd) name");
    assert_int_equal(st.state, 'S');
    assert_int_equal(st.ppid, 1);
    assert_int_equal(st.utime, 250);
    assert_int_equal(st.stime, 75);
    assert_int_equal(st.num_threads, 3);
    assert_int_equal(st.starttime, 123456);
    assert_int_equal(st.rss_pages, 2048);
    /* Every prefix that stops before field 24 is refused; none is over-read. */
    const char *field24 = strstr(stat_line, " 2048 ") + 1;
    for (size_t n = 0; n < (size_t)(field24 - stat_line); n++) {
        char *cut = malloc(n ? n : 1); /* exactly n bytes: ASan catches a read past them */
        memcpy(cut, stat_line, n);
        assert_int_equal(sq_proc_parse_stat(cut, n, &st), -SQ_EPARSE);
        free(cut);
    }
    /* A name longer than the kernel's 15 bytes is cut (the kernel never writes one). */
    const char longname[] = "7 (abcdefghijklmnopqrstuvwxyz) R 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 "
                            "0 99 0 5";
    assert_int_equal(sq_proc_parse_stat(longname, strlen(longname), &st), 0);
    assert_string_equal(st.comm, "abcdefghijklmno");
    static const char *const bad[] = {
        "x (a) S 1",
        "0 (a) S 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 5",
        "7 a S 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 5",
        "7 (a S 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 5",
        "7 (a) 1 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 5",
        "7 (a) S 1 1 1 0 -1 0 0 0 0 0 x 2 0 0 20 0 1 0 99 0 5",
        "7 (a) S -1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 5",
        "7 (a) S 1 1 1 0 -1 0 0 0 0 0 99999999999999999999999 2 0 0 20 0 1 0 99 0 5",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sq_proc_parse_stat(bad[i], strlen(bad[i]), &st), -SQ_EPARSE);
}

static void parse_status(void **state)
{
    (void)state;
    const char text[] = "Name:\tnginx\nState:\tS (sleeping)\nVmHWM:\t    8192 kB\n"
                        "VmRSS:\t    4096 kB\nThreads:\t2\nvoluntary_ctxt_switches:\t17\n"
                        "nonvoluntary_ctxt_switches:\t3\n";
    struct sq_proc_status st;
    assert_int_equal(sq_proc_parse_status(text, strlen(text), &st), 0);
    assert_int_equal(st.vm_hwm, 8192 * 1024);
    assert_int_equal(st.vm_rss, 4096 * 1024);
    assert_int_equal(st.threads, 2);
    assert_true(st.has_ctxsw);
    assert_int_equal(st.ctxsw_vol, 17);
    assert_int_equal(st.ctxsw_invol, 3);
    /* A kernel thread: no Vm lines. Unknown lines are skipped, and a last line without '\n'. */
    const char kthread[] = "Name:\tkworker\nThreads:\t1\nvoluntary_ctxt_switches:\t5";
    assert_int_equal(sq_proc_parse_status(kthread, strlen(kthread), &st), 0);
    assert_int_equal(st.vm_rss, 0);
    assert_false(st.has_ctxsw);
    const char bad[] = "VmRSS:\tmany kB\n";
    assert_int_equal(sq_proc_parse_status(bad, strlen(bad), &st), -SQ_EPARSE);
    const char huge[] = "VmRSS:\t99999999999999999999 kB\n";
    assert_int_equal(sq_proc_parse_status(huge, strlen(huge), &st), -SQ_EPARSE);
    const char prefix[] = "VmRSSX:\t12 kB\n"; /* another key that starts the same */
    assert_int_equal(sq_proc_parse_status(prefix, strlen(prefix), &st), 0);
    assert_int_equal(st.vm_rss, 0);

    int64_t cpu, wait;
    assert_int_equal(sq_proc_parse_schedstat("123 456 7\n", 10, &cpu, &wait), 0);
    assert_int_equal(cpu, 123);
    assert_int_equal(wait, 456);
    assert_int_equal(sq_proc_parse_schedstat("123", 3, &cpu, &wait), -SQ_EPARSE);
}

static int64_t cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * SQ_NS_PER_S + ts.tv_nsec;
}

/* Spends ms of CPU time (not wall time: the machine may be busy). */
static void burn_ms(int64_t ms)
{
    int64_t end = cpu_now() + ms * SQ_NS_PER_MS;
    volatile uint64_t x = 0;
    while (cpu_now() < end)
        x++;
}

static void read_self(void **state)
{
    (void)state;
    struct sq_proc_sample a, b;
    assert_int_equal(sq_proc_read(getpid(), SQ_PROC_FDS | SQ_PROC_CTXSW, &a), 0);
    assert_int_equal(a.pid, getpid());
    assert_int_equal(a.ppid, getppid());
    assert_true(a.threads >= 1);
    assert_true(a.rss_bytes > 0 && a.hwm_bytes >= a.rss_bytes);
    assert_true(a.fds >= 3);
    assert_true(a.ctxsw_vol >= 0 && a.ctxsw_invol >= 0);
    burn_ms(300);
    assert_int_equal(sq_proc_read(getpid(), 0, &b), 0);
    assert_int_equal(b.starttime, a.starttime);
    assert_int_equal(b.fds, -1); /* not asked */
    int64_t cpu = (b.cpu_user_ns + b.cpu_sys_ns) - (a.cpu_user_ns + a.cpu_sys_ns);
    /* 300 ms of CPU, in the kernel's 10 ms ticks */
    assert_true(cpu >= 280 * SQ_NS_PER_MS && cpu <= 330 * SQ_NS_PER_MS);
    assert_int_equal(sq_proc_read(0, 0, &a), -ESRCH);
    assert_int_equal(sq_proc_read(0x3ffffff, 0, &a), -ESRCH); /* above pid_max's ceiling */
}

/* A zombie has exited: read says so. */
static void zombie(void **state)
{
    (void)state;
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0)
        _exit(0);
    struct sq_proc_sample s;
    int64_t deadline = sq_now_ns() + 5 * SQ_NS_PER_S;
    while (sq_proc_read(p, 0, &s) == 0 && sq_now_ns() < deadline)
        usleep(1000);
    assert_int_equal(sq_proc_read(p, 0, &s), -ESRCH);
    assert_int_equal(waitpid(p, NULL, 0), p);
}

/* A child that waits for a byte on go, burns burn ms of CPU, writes a byte to done, sleeps for
 * sleep_ms and exits. */
static pid_t burner(int64_t burn, int64_t sleep_ms, int go[2], int done[2])
{
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        char c;
        if (read(go[0], &c, 1) != 1)
            _exit(1);
        burn_ms(burn);
        if (write(done[1], &c, 1) != 1)
            _exit(1);
        usleep((useconds_t)(sleep_ms * 1000));
        _exit(0);
    }
    return p;
}

static void watch_pid(void **state)
{
    (void)state;
    struct sq_watch *w;
    assert_int_equal(sq_watch_new(&w), 0);
    assert_false(sq_watch_any(w));
    int go[2], done[2];
    pid_t p = burner(300, 300, go, done);
    assert_int_equal(sq_watch_add_pid(w, p, false), 0);
    assert_int_equal(sq_watch_add_pid(w, p, false), 0); /* once only */
    assert_int_equal(sq_watch_count(w), 1);
    assert_true(sq_watch_any(w));
    struct sq_proc_sample before;
    assert_int_equal(sq_proc_read(p, 0, &before), 0);
    sq_watch_start(w, sq_now_ns());
    char c = 'x';
    assert_int_equal(write(go[1], &c, 1), 1);
    assert_int_equal(read(done[0], &c, 1), 1);
    struct sq_watch_tick t;
    assert_int_equal(sq_watch_sample(w, sq_now_ns(), &t), 0);
    assert_true(t.on);
    assert_int_equal(t.procs, 1);
    assert_int_equal(t.threads, 1);
    assert_true(t.rss_bytes > 0);
    assert_true(t.fds >= 0);
    struct sq_proc_sample after;
    assert_int_equal(sq_proc_read(p, 0, &after), 0);
    /* The watch's CPU is what /proc said between its two readings; ours bracket them. */
    int64_t watched = t.cpu_user_ns + t.cpu_sys_ns;
    int64_t outer = after.cpu_user_ns + after.cpu_sys_ns - before.cpu_user_ns - before.cpu_sys_ns;
    assert_true(watched <= outer && watched >= outer - 20 * SQ_NS_PER_MS);
    assert_true(watched >= 280 * SQ_NS_PER_MS && watched <= 330 * SQ_NS_PER_MS);
    /* It exits: the next sample misses it and says when. */
    assert_int_equal(waitpid(p, NULL, 0), p);
    int64_t now = sq_now_ns();
    assert_int_equal(sq_watch_sample(w, now, &t), 0);
    assert_int_equal(t.procs, 0);
    assert_int_equal(t.cpu_user_ns + t.cpu_sys_ns, 0);
    const struct sq_watch_proc *wp = sq_watch_get(w, 0);
    assert_true(wp->exited);
    assert_true(wp->exited_ns > wp->last_seen_ns);
    struct sq_watch_totals tot;
    sq_watch_totals(w, &tot);
    assert_int_equal(tot.nprocs, 1);
    assert_int_equal(tot.exited, 1);
    assert_int_equal(tot.cpu_user_ns + tot.cpu_sys_ns, watched);
    assert_true(tot.rss_peak > 0 && tot.threads_max == 1);
    assert_null(sq_watch_get(w, 1));
    sq_watch_free(w);
    close(go[0]);
    close(go[1]);
    close(done[0]);
    close(done[1]);

    /* A PID that does not exist, and one that has exited. */
    assert_int_equal(sq_watch_new(&w), 0);
    assert_int_equal(sq_watch_add_pid(w, 0x3ffffff, false), -ESRCH);
    assert_int_equal(sq_watch_add_pid(w, -4, false), -EINVAL);
    sq_watch_free(w);
    sq_watch_free(NULL);
}

/* A copy of a program under a name no other process has, so a name match finds only ours. */
static void named_copy(const char *src, char *path, size_t len, char *name, size_t nlen)
{
    snprintf(name, nlen, "sqw%d", (int)getpid() % 1000000);
    snprintf(path, len, "/tmp/%s", name);
    int in = open(src, O_RDONLY), out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    assert_true(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        assert_int_equal(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
}

static void watch_name_children(void **state)
{
    (void)state;
    char path[64], name[32];
    named_copy("/bin/sh", path, sizeof(path), name, sizeof(name));
    struct sq_watch *w;
    assert_int_equal(sq_watch_new(&w), 0);
    assert_int_equal(sq_watch_add_name(w, name), -ESRCH); /* nothing of that name runs yet */
    assert_int_equal(sq_watch_add_name(w, ""), -EINVAL);
    assert_int_equal(sq_watch_add_name(w, "a/b"), -EINVAL);
    /* The named shell starts one sleeper, then a second after 300 ms. */
    const char *argv[] = {path, "-c", "sleep 3 & sleep 0.3; sleep 3 & wait", NULL};
    pid_t p;
    assert_int_equal(sq_proc_spawn(argv, NULL, &p), 0);
    int64_t deadline = sq_now_ns() + 5 * SQ_NS_PER_S;
    int rc;
    while ((rc = sq_watch_add_name(w, name)) == -ESRCH && sq_now_ns() < deadline)
        usleep(2000);
    assert_int_equal(rc, 0);
    sq_watch_start(w, sq_now_ns());
    usleep(600 * 1000);
    struct sq_watch_tick t;
    assert_int_equal(sq_watch_sample(w, sq_now_ns(), &t), 0);
    /* The shell by name, and both sleepers below it: the second one started after the watch
     * did. (A sleeper caught between its fork and its exec still had the shell's name.) */
    size_t sleepers = 0, named = 0;
    for (size_t i = 0; i < sq_watch_count(w); i++) {
        const struct sq_watch_proc *wp = sq_watch_get(w, i);
        sleepers += strcmp(wp->comm, "sleep") == 0 && !wp->exited;
        /* A child caught by name between its fork and its exec that has since exited keeps the
         * name it was last seen with: only live processes count here. */
        named += !wp->exited && wp->how == SQ_WATCH_BY_NAME && strcmp(wp->comm, name) == 0;
        assert_int_not_equal(wp->pid, getpid());
    }
    assert_int_equal(named, 1);
    assert_int_equal(sleepers, 2);
    assert_int_equal(t.procs, 3);
    assert_int_equal(sq_proc_stop(p, SQ_NS_PER_S, NULL), 0);
    assert_int_equal(sq_watch_sample(w, sq_now_ns(), &t), 0);
    assert_int_equal(t.procs, 0); /* the group went with it */
    sq_watch_free(w);
    unlink(path);
}

static void args_split(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *out[6];
    } ok[] = {
        {"a b  c", {"a", "b", "c"}},
        {"  nginx -c '/tmp/my conf'  ", {"nginx", "-c", "/tmp/my conf"}},
        {"say \"a \\\"b\\\" \\$c \\d\"", {"say", "a \"b\" $c \\d"}},
        {"a\\ b c\\'d", {"a b", "c'd"}},
        {"'' \"\" x", {"", "", "x"}},
        {"a'b'\"c\"d", {"abcd"}},
        {"x|y > z", {"x|y", ">", "z"}},
        {"line\\\ncont", {"linecont"}},
        {"\t\n", {NULL}},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char **argv;
        int argc;
        const char *why;
        assert_int_equal(sq_args_split(ok[i].in, &argv, &argc, &why), 0);
        int n = 0;
        while (ok[i].out[n])
            n++;
        assert_int_equal(argc, n);
        for (int k = 0; k < n; k++)
            assert_string_equal(argv[k], ok[i].out[k]);
        assert_null(argv[argc]);
        free(argv);
    }
    static const struct {
        const char *in, *why;
    } bad[] = {
        {"a 'b", "an unterminated ' quote"},
        {"a \"b\\\"", "an unterminated \" quote"},
        {"a b\\", "a backslash at the end"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char **argv = NULL;
        int argc;
        const char *why;
        assert_int_equal(sq_args_split(bad[i].in, &argv, &argc, &why), -SQ_EPARSE);
        assert_string_equal(why, bad[i].why);
        assert_null(argv);
    }
}

static void spawn_and_stop(void **state)
{
    (void)state;
    char path[256];
    assert_int_equal(sq_proc_which("sh", path, sizeof(path)), 0);
    assert_true(path[0] == '/');
    assert_int_equal(sq_proc_which("no-such-program-here", path, sizeof(path)), -ENOENT);
    assert_int_equal(sq_proc_which("/no/such/file", path, sizeof(path)), -ENOENT);
    assert_int_equal(sq_proc_which("sh", path, 4), -ENOENT); /* no room: not found */

    pid_t p;
    const char *exit3[] = {"sh", "-c", "exit 3", NULL};
    assert_int_equal(sq_proc_spawn(exit3, NULL, &p), 0);
    int st = 0, rc;
    int64_t deadline = sq_now_ns() + 5 * SQ_NS_PER_S;
    while ((rc = sq_proc_reap(p, &st)) == 0 && sq_now_ns() < deadline)
        usleep(1000);
    assert_int_equal(rc, 1);
    char text[64];
    assert_string_equal(sq_proc_status_text(st, text, sizeof(text)), "exited with status 3");

    const char *missing[] = {"no-such-program-here", NULL};
    assert_int_equal(sq_proc_spawn(missing, NULL, &p), -ENOENT);
    char plain[] = "/tmp/sq-test-proc-XXXXXX"; /* a file without an execute bit */
    int pf = mkstemp(plain);
    assert_true(pf >= 0);
    close(pf);
    const char *notexec[] = {plain, NULL};
    assert_int_equal(sq_proc_spawn(notexec, NULL, &p), -ENOENT);
    unlink(plain);

    /* stdout to a pipe */
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    const char *echo[] = {"sh", "-c", "echo hello", NULL};
    struct sq_spawn_io io = {.out_fd = pfd[1], .err_fd = -1};
    assert_int_equal(sq_proc_spawn(echo, &io, &p), 0);
    close(pfd[1]);
    char buf[16] = "";
    assert_int_equal(read(pfd[0], buf, sizeof(buf) - 1), 6);
    assert_string_equal(buf, "hello\n");
    close(pfd[0]);
    assert_int_equal(sq_proc_stop(p, SQ_NS_PER_S, &st), 0);

    /* SIGTERM ends a sleeper; one that ignores it is killed after the grace. */
    const char *sleeper[] = {"sleep", "30", NULL};
    assert_int_equal(sq_proc_spawn(sleeper, NULL, &p), 0);
    assert_int_equal(sq_proc_stop(p, 5 * SQ_NS_PER_S, &st), 0);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    const char *stubborn[] = {"sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30", NULL};
    assert_int_equal(sq_proc_spawn(stubborn, NULL, &p), 0);
    usleep(100 * 1000); /* let the trap be set */
    int64_t t0 = sq_now_ns();
    assert_int_equal(sq_proc_stop(p, 200 * SQ_NS_PER_MS, &st), 0);
    assert_true(sq_now_ns() - t0 < 3 * SQ_NS_PER_S);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_string_equal(sq_proc_status_text(st, text, sizeof(text)), "killed by signal 9 (Killed)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_stat), cmocka_unit_test(parse_status),
        cmocka_unit_test(read_self),  cmocka_unit_test(zombie),
        cmocka_unit_test(watch_pid),  cmocka_unit_test(watch_name_children),
        cmocka_unit_test(args_split), cmocka_unit_test(spawn_and_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
