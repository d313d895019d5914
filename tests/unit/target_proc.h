/* tests/unit/target_proc.h - a real `squall target` (one thread, an ephemeral loopback port) for
 * the unit tests that run load against one, started and stopped by PID as cmocka group
 * fixtures:
 *
 *     return cmocka_run_group_tests(tests, start_target, stop_target);
 *
 * The binary is $SQUALL (ctest sets it), else build/squall. The port is read from the first
 * line the target prints ("... 127.0.0.1:PORT"). Include it once, in the test's one source file;
 * the test may wrap the two fixtures in its own (test_planrun.c adds a temporary directory).
 */
#ifndef SQ_TESTS_TARGET_PROC_H
#define SQ_TESTS_TARGET_PROC_H

#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static pid_t target_pid;
static uint16_t target_port;

static inline int start_target(void **state)
{
    (void)state;
    const char *squall = getenv("SQUALL");
    if (!squall)
        squall = "build/squall";
    int fds[2];
    if (pipe(fds) < 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    char a0[256], a1[] = "target", a2[] = "--port", a3[] = "0", a4[] = "-t", a5[] = "1";
    snprintf(a0, sizeof(a0), "%s", squall);
    char *argv[] = {a0, a1, a2, a3, a4, a5, NULL};
    int rc = posix_spawn(&target_pid, squall, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return -1;
    }
    FILE *f = fdopen(fds[0], "r");
    char line[256] = "";
    if (!f || !fgets(line, sizeof(line), f)) {
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    char *colon = strrchr(line, ':');
    target_port = colon ? (uint16_t)atoi(colon + 1) : 0;
    return target_port ? 0 : -1;
}

static inline int stop_target(void **state)
{
    (void)state;
    if (target_pid > 0) {
        kill(target_pid, SIGTERM);
        waitpid(target_pid, NULL, 0);
        target_pid = 0;
    }
    return 0;
}

#endif
