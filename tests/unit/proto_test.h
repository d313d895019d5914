/* proto_test.h - what the proto/ unit tests share: inputs placed against a PROT_NONE guard page
 * (a read past the given length faults), and an allocation counter.
 *
 * The allocation counter needs the test linked with --wrap=malloc,--wrap=calloc,--wrap=realloc
 * (CMakeLists.txt does it for test_nats, test_mqtt, test_ws and test_stamp): it counts every
 * allocation squall_core's code makes, so a test can assert a codec call makes none. (Calls
 * inside shared libraries, such as wslay's, are not wrapped: test_ws counts wslay contexts.)
 * Include it once, after cmocka.h.
 */
#ifndef SQ_TEST_PROTO_TEST_H
#define SQ_TEST_PROTO_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct guard {
    char *map;
    size_t map_len;
    char *end; /* first byte of the PROT_NONE page */
};

static inline void guard_init(struct guard *g, size_t cap)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t data = cap ? (cap + pg - 1) / pg * pg : pg;
    g->map_len = data + pg;
    g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(g->map != MAP_FAILED);
    assert_int_equal(mprotect(g->map + data, pg, PROT_NONE), 0);
    g->end = g->map + data;
}

/* Copies src[0,n) so that it ends right at the guard page. */
static inline char *guard_put(struct guard *g, const void *src, size_t n)
{
    char *p = g->end - n;
    if (n)
        memcpy(p, src, n);
    return p;
}

static inline void guard_free(struct guard *g)
{
    munmap(g->map, g->map_len);
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            print_error(__VA_ARGS__);                                                              \
            fail_msg("check failed: %s", #cond);                                                   \
        }                                                                                          \
    } while (0)

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

#define S(lit) ((struct sq_str){(lit), sizeof(lit) - 1})

#endif
