/* output/ndjson.h - --out ndjson=FILE: one JSON line per request, from the run's writer thread. */
#ifndef SQ_OUTPUT_NDJSON_H
#define SQ_OUTPUT_NDJSON_H

#include <stddef.h>
#include <stdio.h>

#include "base/err.h"
#include "result/result.h"

struct sq_plan;

struct sq_ndjson {
    FILE *f;
    const char *scenario; /* "default" for the quick face; a JSON-safe name (no escaping) */
    int failed;           /* a write failed (disk full): later lines are not attempted */
    /* Labels (sq_ndjson_plan_labels, sq_ndjson_url_labels): per scenario and per sample label,
     * the line's escaped "scenario":...,"step":... fragment; NULL: the quick face's one. */
    char **_frag;
    size_t *_base; /* per scenario: its first fragment */
    size_t _nscen, _nfrag, _maxfrag;
};

/* Plan runs: each line names its scenario and step ("step": null for a sample without one),
 * escaped as JSON once, here. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_ndjson_plan_labels(struct sq_ndjson *o, const struct sq_plan *p);
/* The quick face's --urls: each line also names its URL ("url": "METHOD URL"), labels[i] being
 * the i-th URL's. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_ndjson_url_labels(struct sq_ndjson *o, const char *const *labels, size_t n);
/* Frees the labels; o->f is the caller's. */
void sq_ndjson_dispose(struct sq_ndjson *o);

/* An sq_samples_cb: ud is a struct sq_ndjson. Each line is
 * {"t_s":1.234567,"scenario":"default","step":null,"status":200,"latency_us":523,
 *  "wait_us":0,"bytes":86,"error":null}
 * with "step":"NAME" for a plan step, and "url":"METHOD URL" after it with --urls. */
void sq_ndjson_write(void *ud, const struct sq_sample *v, size_t n);

#endif
