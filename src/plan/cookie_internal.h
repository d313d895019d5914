/* plan/cookie_internal.h - the cookie jar's caps and what tests may observe of it. */
#ifndef SQ_PLAN_COOKIE_INTERNAL_H
#define SQ_PLAN_COOKIE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan/cookie.h"

/* Caps, so a hostile server cannot grow a VU's memory without bound: */
#define SQ_COOKIE_MAX       64   /* cookies per jar; a new one beyond evicts the oldest */
#define SQ_COOKIE_MAX_BYTES 4096 /* name + value of one cookie; a larger one is ignored */
#define SQ_COOKIE_MAX_ATTR  1024 /* a Path or Domain value; a longer attribute is ignored */
#define SQ_COOKIE_MAX_HOST  255  /* a host name; a cookie for a longer one is ignored */

/* How many allocations (malloc/realloc) the jar has made since it was created, its own struct
 * included: a test asserts that replacing a cookie by one that fits makes none. */
size_t sq_cookie__allocs(const struct sq_cookie_jar *j);
/* The number of cookies stored (expired ones not yet evicted included). */
size_t sq_cookie__count(const struct sq_cookie_jar *j);
/* Parses a cookie date (RFC 6265 5.1.1: IMF-fixdate, RFC 850 and asctime forms, and the loose
 * variants the algorithm accepts) into seconds since the epoch. False if it is not a date. */
bool sq_cookie__parse_date(const char *s, size_t len, int64_t *out);

#endif
