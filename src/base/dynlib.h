/* base/dynlib.h - a set of shared libraries opened with dlopen the first time a module needs
 * them, so a run that never uses them does not map them (their pages, relocations and
 * constructors). Users: base/h3lib.c (GnuTLS, ngtcp2, nghttp3), store/sqlite.c (libsqlite3),
 * plan/fyaml.c (libfyaml), script/luajit.c (LuaJIT), net/tls.c (libcrypto, libssl),
 * http/codecs.c (brotli, zstd), http/nghttp2lib.c (nghttp2), plan/eval.c (PCRE2), proto/ws.c
 * (wslay).
 *
 * A user lists the functions it calls in an X-macro, X(library index, function), declares a
 * struct with a `__typeof__(function) *function;` field for each, and after the struct
 * `#define function (table.function)` for each, so its code calls them unchanged. The SONAMEs
 * are read at configure time (CMakeLists.txt, sq_soname()) from the libraries compiled against.
 * sq_dynlib_load opens each SONAME in order (RTLD_NOW | RTLD_LOCAL), looks every function up
 * into the table, once (thread-safe), and keeps the handles open until exit.
 */
#ifndef SQ_BASE_DYNLIB_H
#define SQ_BASE_DYNLIB_H

#include <stddef.h>

#include "base/err.h"

struct sq_dynlib_sym {
    unsigned char lib; /* index into sonames */
    const char *name;
    size_t off; /* offsetof the pointer in the table */
};

struct sq_dynlib {
    const char *what;           /* the feature, first in the error: "HTTP/3" */
    const char *hint;           /* how to install them: "scripts/deps.sh installs ..." */
    const char *const *sonames; /* in dependency order */
    int nlibs;
    const struct sq_dynlib_sym *syms;
    size_t nsyms;
    void *table; /* filled only when every function was found */
    size_t table_size;
    /* Private: 0 not tried, 1 loaded, 2 failed (failed says why). */
    int state;
    char failed[256];
};

/* Loads d once (later calls return the first answer, from any thread). Returns 0, or -ENOENT
 * with why "<what>: <library> could not be loaded (...)" or "<what>: <library> has no <function>
 * ..." followed by the hint. */
SQ_MUST_CHECK int sq_dynlib_load(struct sq_dynlib *d, char *why, size_t len);

#endif
