/* plan/feeder_internal.h - feeder parsers over bytes in memory (for tests and fuzzers).
 *
 * sq_feeder_load_csv/_json read the file and call these. path is used only in messages. The
 * data is copied (the feeder owns its text); it need not be NUL-terminated. Same results and
 * errors as the loaders, minus the I/O ones. */
#ifndef SQ_PLAN_FEEDER_INTERNAL_H
#define SQ_PLAN_FEEDER_INTERNAL_H

#include "plan/feeder.h"

/* A feeder file is at most this large (-SQ_ETOOBIG beyond). */
#define SQ_FEEDER_MAX_BYTES ((size_t)1 << 30)

SQ_MUST_CHECK int sq_feeder__parse_csv(const char *path, const char *data, size_t len,
                                       struct sq_feeder **out, char *err, size_t errlen);
SQ_MUST_CHECK int sq_feeder__parse_json(const char *path, const char *data, size_t len,
                                        struct sq_feeder **out, char *err, size_t errlen);

#endif
