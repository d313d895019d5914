/* tests/unit/alloc_count.h - counts every allocation the process's own code makes, so a test can
 * assert that a steady state allocates nothing (STYLE.md habit 8): two runs that differ only in
 * their length must allocate exactly as often.
 *
 * The test must be linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (CMakeLists.txt
 * does it for the tests it names). Calls made inside shared libraries (wslay's, OpenSSL's) are
 * not wrapped. Include it once, in the test's one source file:
 *
 *     uint64_t before = alloc_count();
 *     ...
 *     assert_int_equal(alloc_count() - before, expected);
 */
#ifndef SQ_TESTS_ALLOC_COUNT_H
#define SQ_TESTS_ALLOC_COUNT_H

#include <stddef.h>
#include <stdint.h>

static uint64_t n_allocs;

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
    __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
    return __real_malloc(n);
}

void *__wrap_calloc(size_t a, size_t b)
{
    __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
    return __real_calloc(a, b);
}

void *__wrap_realloc(void *p, size_t n)
{
    __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
    return __real_realloc(p, n);
}

/* Allocations so far, by every thread. */
static inline uint64_t alloc_count(void)
{
    return __atomic_load_n(&n_allocs, __ATOMIC_RELAXED);
}

#endif
