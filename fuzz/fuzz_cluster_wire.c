/* fuzz/fuzz_cluster_wire.c - libFuzzer target for what a controller reads from agents over NATS
 * (cluster/wire.h and the parts of a large result, cluster/internal.h).
 *
 * A message comes from the network: any bytes are parsed as JSON and read as a second (counts
 * and base64 histograms) and as a whole result (counters, histograms, scenarios, steps, checks,
 * the series, the plan's metrics per second). A refusal must say why; an accepted result must
 * encode again and read back to the same counters, and merge into an empty result (result/merge.c)
 * without a sanitizer report; its sampled exchanges merge as the controller merges them
 * (sq_xs_merge). The same bytes are also read as a result part's header. Seeds:
 * fuzz/corpus/cluster_wire/, a second and a final result written by real agents, and hostile
 * shapes.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/internal.h"
#include "cluster/wire.h"
#include "plan/plan.h"
#include "stats/hist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char run[40], agent[40];
    uint32_t i, n;
    const char *body;
    size_t blen;
    int pr = sq_cluster__part((const char *)data, size, run, agent, &i, &n, &body, &blen);
    CHECK(pr != 1 || (i < n && body + blen == (const char *)data + size));

    json_t *j = json_loadb((const char *)data, size, 0, NULL);
    if (!j)
        return 0;
    char err[256] = "";
    struct sq_second s;
    struct sq_hist *h = NULL, *hu = NULL;
    if (sq_wire_second_read(j, &s, &h, &hu, err, sizeof(err)) < 0)
        CHECK(err[0] && !h && !hu);
    sq_hist_free(h);
    sq_hist_free(hu);
    /* the second's plan metrics: none, or at most SQ_PLAN_METRICS_MAX, rates within their n */
    struct sq_msecond *m = NULL;
    uint32_t nm = 0;
    if (sq_wire_msecond_read(j, &m, &nm) == 0) {
        CHECK((m == NULL) == (nm == 0) && nm <= SQ_PLAN_METRICS_MAX);
        for (uint32_t k = 0; k < nm; k++)
            CHECK(m[k].nonzero <= m[k].n);
    } else {
        CHECK(!m && !nm);
    }
    free(m);

    const json_t *r = json_object_get(j, "result");
    struct sq_wire_res w;
    err[0] = '\0';
    if (sq_wire_result_read(r ? r : j, &w, err, sizeof(err)) < 0) {
        CHECK(err[0]);
    } else {
        json_t *again = sq_wire_result(&w.r);
        if (again) {
            struct sq_wire_res back;
            if (sq_wire_result_read(again, &back, err, sizeof(err)) == 0)
                CHECK(memcmp(&back.r.c, &w.r.c, sizeof(w.r.c)) == 0 &&
                      back.r.nscens == w.r.nscens && back.r.nmetrics == w.r.nmetrics);
            sq_wire_res_dispose(&back);
            json_decref(again);
        }
        struct sq_result merged = {0};
        (void)sq_result_merge(&merged, &w.r);
        (void)sq_result_merge(&merged, &w.r);
        sq_result_dispose(&merged);
        /* the sampled exchanges as the controller merges them (they move out of w) */
        struct sq_result xm = {0};
        if (sq_xs_merge(&w.r.xsamples, 1, &xm.xsamples) == 0)
            CHECK(xm.xsamples.n <= w.r.xsamples.n);
        sq_result_dispose(&xm);
    }
    sq_wire_res_dispose(&w);
    json_decref(j);
    return 0;
}
