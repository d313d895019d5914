/* tests/unit/guard.h - input placed right before a PROT_NONE guard page, so a parser that reads
 * one byte past the length it was given faults at once (picohttpparser's test idea). Used by the
 * table-driven parser tests (test_h1.c, test_eval.c, test_redact.c, and the proto/ tests through
 * proto_test.h): each case is copied so that it ends at the guard, whole and as every truncated
 * prefix. CHECK fails a case with its name.
 *
 *     struct guard g;
 *     guard_init(&g, longest_input);
 *     const char *p = guard_put(&g, in, n);   // p[n] is the first byte of the guard page
 *     ...
 *     guard_free(&g);
 */
#ifndef SQ_TESTS_GUARD_H
#define SQ_TESTS_GUARD_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct guard {
    char *map;
    size_t map_len;
    char *end; /* first byte of the PROT_NONE page */
};

/* Maps room for cap bytes (at least one page) followed by the guard page. */
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

/* Copies src[0,n) so that it ends right at the guard page; n must be at most guard_init's cap
 * (rounded up to whole pages). */
static inline char *guard_put(struct guard *g, const void *src, size_t n)
{
    assert_true(n <= (size_t)(g->end - g->map));
    char *p = g->end - n;
    if (n)
        memcpy(p, src, n);
    return p;
}

static inline void guard_free(struct guard *g)
{
    munmap(g->map, g->map_len);
}

/* A check inside a table-driven loop: on failure, prints what the caller formats (the case's
 * name, the prefix length) before failing, so the report names the case and not only the line. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            print_error(__VA_ARGS__);                                                              \
            fail_msg("check failed: %s", #cond);                                                   \
        }                                                                                          \
    } while (0)

#endif
