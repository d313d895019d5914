/* base/assert.h - SQ_ASSERT: an invariant stated in code, checked where checking is free to cost.
 *
 * curl's DEBUGASSERT and h2o's assert are the models. SQ_ASSERTS is set by CMake: 1 in the
 * Debug build and in every build with a sanitizer or the fuzzers (ASan, TSan, SQ_FUZZ), 0 in
 * RelWithDebInfo and Release, the builds that are measured (`make`, the benchmarks). Override it
 * with -DSQ_ASSERTS=ON/OFF.
 *
 * On: a false condition prints "file:line: invariant failed: expression: message" to stderr and
 * aborts, so a sanitizer or a fuzzer reports it with its stack and the input that led there.
 * Off: the condition is not evaluated (it sits behind `0 &&`: the compiler checks it, then drops
 * it), so an assert costs nothing on a hot path and a name it uses is never "unused".
 *
 * What to assert: what the code guarantees by itself (an accounting identity, an ordering rule,
 * a bound its own arithmetic keeps). Never what a peer, a user or a file controls: that is an
 * error to return or count in every build (docs/internals/base.md). A condition must be cheap
 * (a compare, a few adds; a scan only where the code around it scans as much) and have no side
 * effect, since a release build drops it.
 */
#ifndef SQ_BASE_ASSERT_H
#define SQ_BASE_ASSERT_H

#ifndef SQ_ASSERTS
#define SQ_ASSERTS 0
#endif

/* Prints the failed invariant (msg may be NULL) to stderr and aborts. */
__attribute__((noreturn, cold)) void sq_assert_fail(const char *file, int line, const char *expr,
                                                    const char *msg);

/* The two forms, whatever SQ_ASSERTS says (tests/unit/test_assert.c runs both in every build). */
#define SQ_ASSERT_CHECK_(cond, msg)                                                                \
    (__builtin_expect(!!(cond), 1) ? (void)0 : sq_assert_fail(__FILE__, __LINE__, #cond, (msg)))
#define SQ_ASSERT_SKIP_(cond) ((void)(0 && (cond)))

#if SQ_ASSERTS
#define SQ_ASSERT(cond)          SQ_ASSERT_CHECK_(cond, NULL)
#define SQ_ASSERT_MSG(cond, msg) SQ_ASSERT_CHECK_(cond, msg)
#else
#define SQ_ASSERT(cond)          SQ_ASSERT_SKIP_(cond)
#define SQ_ASSERT_MSG(cond, msg) SQ_ASSERT_SKIP_(cond)
#endif

#endif
