/* tests/unit/test_assert.c - base/assert: SQ_ASSERT fires (file:line, the expression, the
 * message on stderr, then abort) in a build that checks, and is gone from one that does not: its
 * condition is never evaluated, and the squall binary holds no call to sq_assert_fail at all.
 * Both forms (SQ_ASSERT_CHECK_, SQ_ASSERT_SKIP_) are tested in every build; SQ_ASSERT itself is
 * the one SQ_ASSERTS picks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/assert.h"

/* Runs fn in a child with stderr into a pipe: its stderr into out, how it ended into *status. */
static void run_child(void (*fn)(int), int arg, char *out, size_t cap, int *status)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t n;
    while (len + 1 < cap && (n = read(fds[0], out + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    assert_int_equal(waitpid(pid, status, 0), pid);
}

/* A child that checks expr with msg, and the line its check stands on (one macro line, so
 * __LINE__ is the same in both). */
#define CHILD(name, expr, msg)                                                                     \
    static void name(int v)                                                                        \
    {                                                                                              \
        SQ_ASSERT_CHECK_(expr, msg);                                                               \
    }                                                                                              \
    static const int name##_line = __LINE__;

CHILD(child_check, v == 2, "the message")
CHILD(child_check_nomsg, v > 10, NULL)

static void child_assert(int v)
{
    SQ_ASSERT_MSG(v == 0, "SQ_ASSERT_MSG itself");
    SQ_ASSERT(v == 0);
}

/* The checking form: silent while the condition holds, else file:line, the expression as
 * written, the message, and SIGABRT (what ASan, TSan and libFuzzer catch). */
static void test_fires(void **state)
{
    (void)state;
    char err[1024], want[256];
    int st;
    run_child(child_check, 2, err, sizeof(err), &st);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_string_equal(err, "");

    run_child(child_check, 3, err, sizeof(err), &st);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    snprintf(want, sizeof(want), "test_assert.c:%d: invariant failed: v == 2: the message\n",
             child_check_line);
    assert_non_null(strstr(err, want));

    run_child(child_check_nomsg, 3, err, sizeof(err), &st);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    snprintf(want, sizeof(want), "test_assert.c:%d: invariant failed: v > 10\n",
             child_check_nomsg_line);
    assert_non_null(strstr(err, want));
}

/* The skipping form: the condition is compiled, never run. */
static void test_skip_not_evaluated(void **state)
{
    (void)state;
    int n = 0;
    SQ_ASSERT_SKIP_(++n == 5);
    SQ_ASSERT_SKIP_((abort(), 0)); /* would end the test if it ran */
    assert_int_equal(n, 0);
}

/* SQ_ASSERT is the checking form where SQ_ASSERTS is 1, the skipping one where it is 0. */
static void test_assert_follows_build(void **state)
{
    (void)state;
    int n = 0;
    SQ_ASSERT(++n == 1);
    assert_int_equal(n, SQ_ASSERTS ? 1 : 0);
    char err[1024];
    int st;
    run_child(child_assert, 1, err, sizeof(err), &st);
    if (SQ_ASSERTS) {
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
        assert_non_null(strstr(err, ": invariant failed: v == 0: SQ_ASSERT_MSG itself\n"));
    } else {
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_string_equal(err, "");
    }
}

/* The squall binary of this build calls sq_assert_fail where asserts are on and holds no call to
 * it where they are off (the static archive's assert.o is linked only when something calls
 * it): the asserts are compiled out of the measured builds, not merely never taken. */
static void test_binary_has_asserts_iff_on(void **state)
{
    (void)state;
    const char *squall = getenv("SQUALL");
    if (!squall || access(squall, X_OK) != 0)
        skip();
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "nm -P '%s' 2>/dev/null", squall);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[512];
    bool found = false, any = false;
    while (fgets(line, sizeof(line), p)) {
        any = true;
        if (strncmp(line, "sq_assert_fail ", 15) == 0)
            found = true;
    }
    pclose(p);
    assert_true(any); /* nm ran and the binary has its symbols */
    assert_int_equal(found, SQ_ASSERTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fires),
        cmocka_unit_test(test_skip_not_evaluated),
        cmocka_unit_test(test_assert_follows_build),
        cmocka_unit_test(test_binary_has_asserts_iff_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
