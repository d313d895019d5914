/* plan/strmap.c - see strmap.h. */
#include "plan/strmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Open addressing with linear probing, at most 3/4 full. The hash is FNV-1a over the key's
 * bytes, seeded per map from its address (a plan cannot aim its keys at one bucket without
 * knowing it) and finished with a 64-bit mix so the low bits index well. */
struct sq_plan__slot {
    const char *key; /* NULL: empty */
    size_t len;
    uint64_t hash;
    uintptr_t val;
};

static unsigned char fold(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + ('a' - 'A')) : c;
}

static uint64_t map_hash(const struct sq_plan__map *m, const char *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull ^ m->seed;
    for (size_t i = 0; i < len; i++) {
        h ^= m->icase ? fold((unsigned char)key[i]) : (unsigned char)key[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static bool key_eq(const struct sq_plan__map *m, const struct sq_plan__slot *s, const char *key,
                   size_t len, uint64_t h)
{
    if (s->hash != h || s->len != len)
        return false;
    if (!m->icase)
        return memcmp(s->key, key, len) == 0;
    for (size_t i = 0; i < len; i++)
        if (fold((unsigned char)s->key[i]) != fold((unsigned char)key[i]))
            return false;
    return true;
}

void sq_plan__map_init(struct sq_plan__map *m, bool icase)
{
    memset(m, 0, sizeof(*m));
    m->icase = icase;
    m->seed = (uint64_t)(uintptr_t)m * 0x9e3779b97f4a7c15ull;
}

void sq_plan__map_dispose(struct sq_plan__map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

/* The slot of key, or the empty slot where it would go. */
static struct sq_plan__slot *map_find(const struct sq_plan__map *m, const char *key, size_t len,
                                      uint64_t h)
{
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        struct sq_plan__slot *s = &m->slots[i];
        if (!s->key || key_eq(m, s, key, len, h))
            return s;
    }
}

static int map_grow(struct sq_plan__map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    if (cap > SIZE_MAX / sizeof(struct sq_plan__slot))
        return -ENOMEM;
    struct sq_plan__slot *old = m->slots, *ns = calloc(cap, sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    size_t oldcap = m->cap;
    m->slots = ns;
    m->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].key)
            *map_find(m, old[i].key, old[i].len, old[i].hash) = old[i];
    free(old);
    return 0;
}

bool sq_plan__map_get(const struct sq_plan__map *m, const char *key, size_t len, uintptr_t *val)
{
    if (!m->n)
        return false;
    const struct sq_plan__slot *s = map_find(m, key, len, map_hash(m, key, len));
    if (!s->key)
        return false;
    if (val)
        *val = s->val;
    return true;
}

static int map_put(struct sq_plan__map *m, const char *key, size_t len, uintptr_t val,
                   uintptr_t *old, bool replace)
{
    if ((m->n + 1) * 4 > m->cap * 3 && map_grow(m) < 0)
        return -ENOMEM;
    uint64_t h = map_hash(m, key, len);
    struct sq_plan__slot *s = map_find(m, key, len, h);
    if (s->key) {
        if (old)
            *old = s->val;
        if (replace)
            s->val = val;
        return 0;
    }
    *s = (struct sq_plan__slot){key ? key : "", len, h, val}; /* NULL marks an empty slot */
    m->n++;
    return 1;
}

int sq_plan__map_add(struct sq_plan__map *m, const char *key, size_t len, uintptr_t val,
                     uintptr_t *old)
{
    return map_put(m, key, len, val, old, false);
}

int sq_plan__map_set(struct sq_plan__map *m, const char *key, size_t len, uintptr_t val)
{
    int rc = map_put(m, key, len, val, NULL, true);
    return rc < 0 ? rc : 0;
}
