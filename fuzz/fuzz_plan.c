/* fuzz/fuzz_plan.c - libFuzzer target for the plan loader (plan/load, plan/describe).
 *
 * Any input loads or fails cleanly: a failure names a position (line >= 1 for a parse error)
 * and a message, and leaves no plan; a success describes itself and frees (ASan checks that
 * everything the loader built is freed). The plan is named under a directory that does not
 * exist, so relative feeder and body paths fail; inputs that name device or proc files are
 * skipped (reading /dev/stdin would block). Seeds: fuzz/corpus/plan/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (memmem(data, size, "/dev", 4) || memmem(data, size, "/proc", 5) ||
        memmem(data, size, "/sys", 4))
        return 0;
    static FILE *null_out;
    if (!null_out)
        null_out = fopen("/dev/null", "w");
    struct sq_plan *p = NULL;
    struct sq_plan_error err;
    int rc =
        sq_plan_load_string("/nonexistent-fuzz-dir/plan.yaml", (const char *)data, size, &p, &err);
    if (rc != 0) {
        CHECK(p == NULL);
        CHECK(err.msg[0] != '\0');
        CHECK(rc != -SQ_EPARSE || err.loc.line >= 1);
        char line[1024];
        sq_plan_error_format(&err, line, sizeof(line));
        CHECK(line[0] != '\0');
        return 0;
    }
    CHECK(p->target && p->nscenarios >= 1);
    for (size_t i = 0; i < p->nscenarios; i++)
        CHECK(p->scenarios[i].nsteps >= 1);
    if (null_out)
        sq_plan_describe(p, null_out);
    sq_plan_free(p);
    return 0;
}
