/* plan/feeder.h - data feeders: CSV files with a header row, JSON arrays of objects.
 *
 * A feeder is loaded once, before the run, and shared read-only by every worker: one block of
 * cells, each a span into the loaded text. Row choice per iteration:
 *   sequential  rows in order across the whole run (one shared atomic cursor), wrapping
 *   per-vu      VU v uses row (v - 1) mod rows for all its iterations
 *   random      a uniformly random row per iteration (the VU's PRNG)
 */
#ifndef SQ_PLAN_FEEDER_H
#define SQ_PLAN_FEEDER_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

enum sq_feed_mode { SQ_FEED_SEQUENTIAL, SQ_FEED_PER_VU, SQ_FEED_RANDOM };

struct sq_feeder {
    char **columns; /* names, from the header row or the first object's keys */
    size_t ncolumns;
    size_t nrows;
    struct sq_str *cells; /* nrows * ncolumns, row-major; a missing JSON key is empty */
    char *text;           /* owned storage the cells point into */
    uint64_t cursor;      /* sequential: next row (atomic fetch-add) */
};

/* CSV (RFC 4180: quoted fields with "" escapes, CRLF or LF, fields may span lines inside
 * quotes). At least one data row. Errors name path:line:col and what was expected, e.g. a row
 * with a different number of fields. JSON: a top-level array of objects whose values are
 * strings, numbers, booleans or null (numbers and booleans as written; null as empty). Returns 0,
 * -SQ_EPARSE, -ENOENT/-errno (could not read: err says so) or -ENOMEM. */
SQ_MUST_CHECK int sq_feeder_load_csv(const char *path, struct sq_feeder **out, char *err,
                                     size_t errlen);
SQ_MUST_CHECK int sq_feeder_load_json(const char *path, struct sq_feeder **out, char *err,
                                      size_t errlen);
void sq_feeder_free(struct sq_feeder *f);
/* A feeder of one row with these columns (copied), every cell empty: the setup: flow's values
 * (plan/plan.h), filled by sq_feeder_set_row before any worker reads it. 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_feeder_new_row(char *const *columns, size_t ncolumns, struct sq_feeder **out);
/* Replaces row 0's cells with copies of vals (ncolumns of them). Not thread-safe: called before
 * the run that reads it starts. 0 or -ENOMEM (the row is then left as it was). */
SQ_MUST_CHECK int sq_feeder_set_row(struct sq_feeder *f, const struct sq_str *vals);
/* The column's index, or -1. */
int sq_feeder_column(const struct sq_feeder *f, const char *name, size_t len);
/* The row to use for one iteration of VU vu (1-based); rng: the VU's xorshift64 state. */
const struct sq_str *sq_feeder_row(struct sq_feeder *f, enum sq_feed_mode mode, uint64_t vu,
                                   uint64_t *rng);

#endif
