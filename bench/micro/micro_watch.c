/* bench/micro/micro_watch.c - what reading /proc costs a run: one sample of a watched set
 * (--watch), and a worker's own once-a-second reading (its schedstat).
 *
 *   micro_watch [SAMPLES [REPS]]
 *
 * Starts four children (each sleeps; one with eight extra threads and 64 open files, like a
 * server), watches them with proc/watch.h and times sq_watch_sample over SAMPLES samples, REPS
 * times; also a --watch-name set (a scan of /proc at each sample) and a worker's schedstat pread.
 * Prints the median CPU time (this thread's user + system: what a sample costs, however busy the
 * machine) per sample and what one sample a second is as a share of one core. The children are
 * stopped by PID.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "micro.h"

/* The calling thread's CPU time (user + system) in ns: what a sample costs, whatever else runs. */
static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * SQ_NS_PER_S + ts.tv_nsec;
}
#include "proc/proc.h"
#include "proc/watch.h"

static void *sleeper(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

/* A child that sleeps; with threads, it first starts them and opens files. */
static pid_t child(int threads, int files)
{
    pid_t p = fork();
    if (p == 0) {
        for (int i = 0; i < files; i++)
            open("/dev/null", O_RDONLY);
        for (int i = 0; i < threads; i++) {
            pthread_t t;
            pthread_create(&t, NULL, sleeper, NULL);
        }
        pause();
        _exit(0);
    }
    return p;
}

int main(int argc, char **argv)
{
    int samples = argc > 1 ? atoi(argv[1]) : 2000;
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    if (samples < 1 || reps < 1 || reps > 99)
        return 2;
    pid_t kids[4] = {child(8, 64), child(0, 0), child(0, 0), child(0, 0)};
    usleep(100 * 1000); /* let them start their threads */
    struct sq_watch *w;
    if (sq_watch_new(&w) < 0)
        return 1;
    for (int i = 0; i < 4; i++)
        if (sq_watch_add_pid(w, kids[i], false) < 0)
            return 1;
    sq_watch_start(w, sq_now_ns());
    double v[99];
    struct sq_watch_tick t;
    for (int r = 0; r < reps; r++) {
        int64_t t0 = cpu_ns();
        for (int i = 0; i < samples; i++)
            sq_watch_sample(w, sq_now_ns(), &t);
        v[r] = (double)(cpu_ns() - t0) / samples / 1e3;
    }
    double med = micro_median(v, reps);
    printf("--watch of 4 processes (%u threads, %d open files): %.1f µs per sample = %.4f%% of a "
           "core at one sample a second\n",
           t.threads, t.fds, med, med / 1e6 * 100);
    sq_watch_free(w);

    /* --watch-name: a scan of /proc (every process's stat file) finds the four (the children
     * carry this program's name); sq_watch_add_name scans once. At one sample a second, a scan
     * every 5 s adds a fifth of it. */
    int n = samples / 20 > 0 ? samples / 20 : 1;
    size_t found = 0;
    for (int r = 0; r < reps; r++) {
        int64_t t0 = cpu_ns();
        for (int i = 0; i < n; i++) {
            if (sq_watch_new(&w) < 0 || sq_watch_add_name(w, "micro_watch") < 0)
                return 1;
            found = sq_watch_count(w);
            sq_watch_free(w);
        }
        v[r] = (double)(cpu_ns() - t0) / n / 1e3;
    }
    med = micro_median(v, reps);
    long procs = 0;
    FILE *ls = popen("ls /proc | grep -c '^[0-9]'", "r");
    if (ls && fscanf(ls, "%ld", &procs) != 1)
        procs = 0;
    if (ls)
        pclose(ls);
    printf("--watch-name: a scan of /proc (%ld processes, %zu found) %.1f µs; one every 5 s = "
           "%.4f%% of a core\n",
           procs, found, med, med / 5 / 1e6 * 100);

    /* A worker's own reading at each tick. */
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    char buf[128];
    for (int r = 0; r < reps; r++) {
        int64_t t0 = cpu_ns();
        for (int i = 0; i < samples; i++) {
            int64_t cpu, wait;
            ssize_t k = pread(fd, buf, sizeof(buf) - 1, 0);
            if (k <= 0 || sq_proc_parse_schedstat(buf, (size_t)k, &cpu, &wait) < 0)
                return 1;
        }
        v[r] = (double)(cpu_ns() - t0) / samples / 1e3;
    }
    printf("a worker's schedstat read: %.2f µs per tick\n", micro_median(v, reps));
    close(fd);
    for (int i = 0; i < 4; i++) {
        kill(kids[i], SIGTERM);
        waitpid(kids[i], NULL, 0);
    }
    return 0;
}
