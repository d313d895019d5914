/* base/dynlib.c - see dynlib.h. */
#include "base/dynlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One lock for every set: each is loaded once, at a module's entry, never on a hot path. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void load(struct sq_dynlib *d)
{
    void *h[8] = {0};
    if (d->nlibs > (int)(sizeof(h) / sizeof(h[0]))) {
        snprintf(d->failed, sizeof(d->failed), "too many libraries");
        return;
    }
    for (int i = 0; i < d->nlibs; i++) {
        if (!(h[i] = dlopen(d->sonames[i], RTLD_NOW | RTLD_LOCAL))) {
            const char *e = dlerror();
            snprintf(d->failed, sizeof(d->failed), "%s could not be loaded (%s)", d->sonames[i],
                     e ? e : "not found");
            return;
        }
    }
    char *t = calloc(1, d->table_size);
    if (!t) {
        snprintf(d->failed, sizeof(d->failed), "out of memory");
        return;
    }
    for (size_t i = 0; i < d->nsyms; i++) {
        void *p = dlsym(h[d->syms[i].lib], d->syms[i].name);
        if (!p) {
            snprintf(d->failed, sizeof(d->failed),
                     "%s has no %s (not the version squall was built with)",
                     d->sonames[d->syms[i].lib], d->syms[i].name);
            free(t);
            return;
        }
        memcpy(t + d->syms[i].off, &p, sizeof(p));
    }
    memcpy(d->table, t, d->table_size); /* the handles stay open: used until exit */
    free(t);
}

int sq_dynlib_load(struct sq_dynlib *d, char *why, size_t len)
{
    int st = __atomic_load_n(&d->state, __ATOMIC_ACQUIRE);
    if (!st) {
        pthread_mutex_lock(&lock);
        st = d->state;
        if (!st) {
            d->failed[0] = '\0';
            load(d);
            st = d->failed[0] ? 2 : 1;
            __atomic_store_n(&d->state, st, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&lock);
    }
    if (st == 1)
        return 0;
    if (len)
        snprintf(why, len, "%s: %s (%s)", d->what, d->failed, d->hint);
    return -ENOENT;
}
