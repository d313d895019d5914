/* base/h3lib.c - see h3lib.h. */
#define SQ_H3LIB_IMPL
#include "base/h3lib.h"

#ifdef SQ_HAVE_H3

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct sq_h3lib sq_h3lib;

/* In dependency order (the crypto backend needs GnuTLS and ngtcp2). The SONAMEs are
 * CMakeLists.txt's, read from the libraries pkg-config found. */
enum { LIB_GNUTLS, LIB_NGTCP2, LIB_NGTCP2_CRYPTO, LIB_NGHTTP3, NLIBS };
static const char *const sonames[NLIBS] = {SQ_H3_SONAME_GNUTLS, SQ_H3_SONAME_NGTCP2,
                                           SQ_H3_SONAME_NGTCP2_CRYPTO, SQ_H3_SONAME_NGHTTP3};

static const struct entry {
    unsigned char lib;
    const char *name;
    size_t off;
} entries[] = {
#define SQ_H3LIB_ENTRY(lib, sym) {LIB_##lib, #sym, offsetof(struct sq_h3lib, sym)},
    SQ_H3LIB_SYMS(SQ_H3LIB_ENTRY)
#undef SQ_H3LIB_ENTRY
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failed[256]; /* "": loaded */

static void load(void)
{
    void *h[NLIBS] = {0};
    for (int i = 0; i < NLIBS; i++) {
        if (!(h[i] = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL))) {
            const char *e = dlerror();
            snprintf(failed, sizeof(failed), "%s could not be loaded (%s)", sonames[i],
                     e ? e : "not found");
            return;
        }
    }
    struct sq_h3lib t;
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        void *p = dlsym(h[entries[i].lib], entries[i].name);
        if (!p) {
            snprintf(failed, sizeof(failed), "%s has no %s (not the version squall was built with)",
                     sonames[entries[i].lib], entries[i].name);
            return;
        }
        memcpy((char *)&t + entries[i].off, &p, sizeof(p));
    }
    sq_h3lib = t; /* the handles stay open: the functions are used until exit */
}

int sq_h3lib_load(char *why, size_t len)
{
    pthread_once(&once, load);
    if (!failed[0])
        return 0;
    if (len)
        snprintf(why, len, "HTTP/3: %s (scripts/deps.sh installs the QUIC libraries)", failed);
    return -ENOENT;
}

#endif
