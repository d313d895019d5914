/* output/ndjson.c - per-request lines. Runs on the engine's writer thread, never on a worker. */
#include "output/ndjson.h"

#include <inttypes.h>

void sq_ndjson_write(void *ud, const struct sq_sample *v, size_t n)
{
    struct sq_ndjson *o = ud;
    if (o->failed)
        return;
    for (size_t i = 0; i < n; i++) {
        const struct sq_sample *s = &v[i];
        fprintf(
            o->f,
            "{\"t_s\":%.6f,\"scenario\":\"%s\",\"step\":null,\"status\":%u,\"latency_us\":%" PRId64
            ",\"wait_us\":%" PRId64 ",\"bytes\":%u,\"error\":",
            (double)s->end_ns / 1e9, o->scenario, (unsigned)s->status, s->latency_us, s->wait_us,
            (unsigned)s->bytes);
        if (s->error)
            fprintf(o->f, "\"%s\"}\n", sq_errk_name((enum sq_errk)(s->error - 1)));
        else
            fputs("null}\n", o->f);
    }
    if (ferror(o->f))
        o->failed = 1;
}
