/* plan/strmap.h - a string-keyed hash map for the plan module's name lookups (the loader's
 * keys, anchors, variables, steps and headers; a feeder's columns). Internal to plan/.
 *
 * Open addressing with linear probing, at most 3/4 full; keys are borrowed (they must outlive
 * the map) and compared by bytes, or ignoring ASCII case. A plan that names 100,000 things
 * loads in linear time because of it (docs/internals/plan.md).
 */
#ifndef SQ_PLAN_STRMAP_H
#define SQ_PLAN_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sq_plan__map {
    struct sq_plan__slot *slots; /* cap of them, cap a power of two (or 0) */
    size_t cap, n;
    uint64_t seed;
    bool icase; /* keys compare ignoring ASCII case (header names) */
};

/* An empty map (nothing allocated until the first key). A zeroed struct is an empty map too,
 * comparing bytes, with seed 0. */
void sq_plan__map_init(struct sq_plan__map *m, bool icase);
/* Frees the table; the map is empty again, ready for reuse. */
void sq_plan__map_dispose(struct sq_plan__map *m);
/* True when key[0, len) is in the map; its value in *val (when val is not NULL). */
bool sq_plan__map_get(const struct sq_plan__map *m, const char *key, size_t len, uintptr_t *val);
/* Adds key[0, len) with val. Returns 1 (added), 0 (already there: nothing changes, its value
 * in *old when old is not NULL) or -ENOMEM. */
int sq_plan__map_add(struct sq_plan__map *m, const char *key, size_t len, uintptr_t val,
                     uintptr_t *old);
/* Sets key[0, len) to val, added or replaced. 0 or -ENOMEM. */
int sq_plan__map_set(struct sq_plan__map *m, const char *key, size_t len, uintptr_t val);

#endif
