/* fuzz/fuzz_control.c - libFuzzer target for a change to a running run as a client sends it
 * (engine/control.h: sq_run_ctl_json, what POST /runs/{id}/control and the CLI's --control
 * endpoint take) and for --control's [HOST:]PORT (face/distopts.h).
 *
 * The body comes from the network: with no run bound, every body is refused, as a bad body or a
 * change that does not fit (-SQ_EUSAGE) or as "no run is going" (-EAGAIN), always with a reason
 * and never with an answer. The same bytes as an address: one that is taken is a loopback one.
 * Seeds: fuzz/corpus/control/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/control.h"
#include "face/distopts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sq_run_ctl *ctl;
    if (!ctl && sq_run_ctl_new(&ctl) < 0)
        return 0;
    char why[256];
    json_t *answer = (json_t *)1;
    int rc = sq_run_ctl_json(ctl, (const char *)data, size, &answer, why, sizeof(why));
    CHECK(rc == -SQ_EUSAGE || rc == -EAGAIN);
    CHECK(answer == NULL);
    CHECK(why[0] != 0 && memchr(why, 0, sizeof(why)) != NULL);

    if (size < 64) {
        char arg[64];
        memcpy(arg, data, size);
        arg[size] = 0;
        struct sq_distopts d = {0};
        char err[256];
        int r = sq_distopts_flag(&d, SQ_DISTOPT_CONTROL, "--control", arg, err, sizeof(err));
        CHECK(r == 1 || r < 0);
        if (r == 1)
            CHECK(strcmp(d.control_host, "::1") == 0 || strncmp(d.control_host, "127.", 4) == 0);
    }
    return 0;
}
