/* micro_eval.c - ns per JSON path evaluation and per check, as a worker runs them on a response.
 *
 * Documents: a ~200-byte login response ("$.token" sits after a nested "user" object) and a
 * ~4 KiB list of 28 items ("$.items[5].id" skips five items; "$.count" sits at the very end, so
 * "$.count gt 0" walks the whole document). Each figure is the median of REPS repetitions.
 * Usage: micro_eval [iterations_per_rep] [reps]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "micro.h"
#include "base/clock.h"
#include "plan/eval.h"

static volatile uint64_t sink;

static const char login[] =
    "{\"ok\":true,\"user\":{\"id\":42,\"name\":\"Ana Lima\",\"email\":\"ana@example.com\","
    "\"roles\":[\"admin\",\"dev\"]},\"token\":\"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI0MiJ9."
    "Qx3kR9vTn2mPz8\",\"expires_in\":3600}";

static void die(const char *what)
{
    fprintf(stderr, "micro_eval: %s\n", what);
    exit(1);
}

/* Times `expr` (which yields an integer) iters times per repetition; prints the median. */
#define BENCH(label, expr)                                                                         \
    do {                                                                                           \
        double t_[101];                                                                            \
        for (int r_ = 0; r_ < reps; r_++) {                                                        \
            uint64_t acc_ = 0;                                                                     \
            int64_t t0_ = sq_now_ns();                                                             \
            for (long i_ = 0; i_ < iters; i_++)                                                    \
                acc_ += (uint64_t)(expr);                                                          \
            int64_t t1_ = sq_now_ns();                                                             \
            sink += acc_;                                                                          \
            t_[r_] = (double)(t1_ - t0_) / (double)iters;                                          \
        }                                                                                          \
        printf("micro_eval: %-34s %7.1f ns (median of %d x %ld)\n", label, micro_median(t_, reps), \
               reps, iters);                                                                       \
    } while (0)

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 2000000;
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    if (iters <= 0 || reps <= 0 || reps > 101) {
        fprintf(stderr, "usage: micro_eval [iterations_per_rep] [reps (1..101)]\n");
        return 2;
    }

    struct sq_buf big = {0};
    if (sq_buf_append(&big, "{\"page\":1,\"items\":[", 19) < 0)
        die("no memory");
    for (int i = 0; i < 28; i++) {
        char item[256];
        int n = snprintf(item, sizeof(item),
                         "%s{\"id\":%d,\"name\":\"item %d\",\"tags\":[\"red\",\"large\"],"
                         "\"price\":%d.%02d,\"stock\":{\"warehouse\":\"north\",\"qty\":%d},"
                         "\"desc\":\"A \\\"plain\\\" item, caf\\u00e9 grade\"}",
                         i ? "," : "", 1000 + i, i, 10 + i, i * 7 % 100, i * 3);
        if (sq_buf_append(&big, item, (size_t)n) < 0)
            die("no memory");
    }
    if (sq_buf_append(&big, "],\"count\":28}", 13) < 0)
        die("no memory");

    struct sq_jpath *token, *item5;
    if (sq_jpath_compile("$.token", 7, &token, NULL, 0) ||
        sq_jpath_compile("$.items[5].id", 13, &item5, NULL, 0))
        die("compile");
    struct sq_json_val v;
    if (sq_jpath_eval(token, login, sizeof(login) - 1, &v) != 1 ||
        sq_jpath_eval(item5, big.p, big.len, &v) != 1 || memcmp(v.raw, "1005", 4) != 0)
        die("paths do not find their values");

    struct sq_resp_header hdr[] = {{"Content-Type", 12, "application/json", 16},
                                   {"X-Request-Id", 12, "8731", 4}};
    struct sq_resp_view small = {200, hdr, 2, login, sizeof(login) - 1, false, 1234};
    struct sq_resp_view large = {200, hdr, 2, big.p, big.len, false, 1234};
    struct sq_check status, contains, contains_end, count, hmatch;
    struct sq_extractor ext;
    int ok[] = {200};
    if (sq_check_init_status(&status, ok, 1, NULL, 0) ||
        sq_check_init_body_contains(&contains, "expires_in", NULL, 0) ||
        sq_check_init_body_contains(&contains_end, "\"count\"", NULL, 0) ||
        sq_check_init_json(&count, "$.count", SQ_CMP_GT, "0", true, NULL, 0) ||
        sq_check_init_header_match(&hmatch, "x-request-id", "^[0-9]+$", NULL, 0) ||
        sq_extractor_init_json(&ext, "$.token", NULL, 0))
        die("init");
    struct sq_buf scratch = {0}, out = {0};
    if (!sq_check_run(&status, &small, NULL, &scratch) ||
        !sq_check_run(&contains, &small, NULL, &scratch) ||
        !sq_check_run(&contains_end, &large, NULL, &scratch) ||
        !sq_check_run(&count, &large, NULL, &scratch) ||
        !sq_check_run(&hmatch, &small, NULL, &scratch) ||
        sq_extractor_run(&ext, &small, NULL, &out) != 1)
        die("checks do not pass");

    printf("micro_eval: login response %zu B, item list %zu B\n", sizeof(login) - 1, big.len);
    BENCH("jpath $.token (login)", sq_jpath_eval(token, login, sizeof(login) - 1, &v));
    BENCH("jpath $.items[5].id (4 KiB)", sq_jpath_eval(item5, big.p, big.len, &v));
    BENCH("extract $.token -> buf (login)", sq_extractor_run(&ext, &small, NULL, &out));
    BENCH("check status 200", sq_check_run(&status, &small, NULL, &scratch));
    BENCH("check body contains (login)", sq_check_run(&contains, &small, NULL, &scratch));
    BENCH("check body contains (4 KiB, end)", sq_check_run(&contains_end, &large, NULL, &scratch));
    BENCH("check $.count gt 0 (4 KiB, end)", sq_check_run(&count, &large, NULL, &scratch));
    BENCH("check header matches regex", sq_check_run(&hmatch, &small, NULL, &scratch));

    sq_check_dispose(&status);
    sq_check_dispose(&contains);
    sq_check_dispose(&contains_end);
    sq_check_dispose(&count);
    sq_check_dispose(&hmatch);
    sq_extractor_dispose(&ext);
    sq_jpath_free(token);
    sq_jpath_free(item5);
    sq_buf_dispose(&scratch);
    sq_buf_dispose(&out);
    sq_buf_dispose(&big);
    return 0;
}
