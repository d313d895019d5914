/* base/parse.h - strict parsers for the numbers and durations users type. */
#ifndef SQ_BASE_PARSE_H
#define SQ_BASE_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Parses a duration such as "500ms", "10s", "2m", "1h", "1m30s", "250us" or "1.5s" into ns.
 * A bare number is taken in default_unit_ns. Returns 0, or SQ_EPARSE (garbage, negative, or a
 * value over 100 days). */
SQ_MUST_CHECK int sq_parse_duration(const char *s, int64_t default_unit_ns, int64_t *out_ns);

/* Parses a decimal integer in [min, max] ("1k" and "1m" suffixes allowed when allow_suffix:
 * 10k = 10,000). Returns 0, SQ_EPARSE or SQ_ERANGE. */
SQ_MUST_CHECK int sq_parse_u64(const char *s, uint64_t min, uint64_t max, int allow_suffix,
                               uint64_t *out);

/* Parses a list of percentiles, "50,90,99,99.9", into out (at most max, each in (0, 100],
 * rising). Returns the count, or -1 with *why saying what is wrong. */
int sq_parse_percentiles(const char *list, double *out, size_t max, const char **why);

#endif
