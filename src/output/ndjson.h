/* output/ndjson.h - --out ndjson=FILE: one JSON line per request, from the run's writer thread. */
#ifndef SQ_OUTPUT_NDJSON_H
#define SQ_OUTPUT_NDJSON_H

#include <stddef.h>
#include <stdio.h>

#include "engine/run.h"

struct sq_ndjson {
    FILE *f;
    const char *scenario; /* "default" for the quick face; a JSON-safe name (no escaping) */
    int failed;           /* a write failed (disk full): later lines are not attempted */
};

/* An sq_samples_cb: ud is a struct sq_ndjson. Each line is
 * {"t_s":1.234567,"scenario":"default","step":null,"status":200,"latency_us":523,
 *  "wait_us":0,"bytes":86,"error":null} */
void sq_ndjson_write(void *ud, const struct sq_sample *v, size_t n);

#endif
