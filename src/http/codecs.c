/* http/codecs.c - see codecs.h. */
#define SQ_CODECS_IMPL
#include "http/codecs.h"

#include "base/dynlib.h"

struct sq_codecs sq_codecs;

enum { LIB_BROTLIDEC, LIB_BROTLIENC, LIB_ZSTD, NLIBS };
static const char *const sonames[NLIBS] = {SQ_SONAME_BROTLIDEC, SQ_SONAME_BROTLIENC,
                                           SQ_SONAME_ZSTD}; /* CMakeLists.txt's */

static const struct sq_dynlib_sym syms[] = {
#define SQ_CODECS_ENTRY(lib, sym) {LIB_##lib, #sym, offsetof(struct sq_codecs, sym)},
    SQ_CODECS_SYMS(SQ_CODECS_ENTRY)
#undef SQ_CODECS_ENTRY
};

static struct sq_dynlib libs = {
    .what = "br and zstd content coding",
    .hint = "scripts/deps.sh installs libbrotli1 and libzstd1",
    .sonames = sonames,
    .nlibs = NLIBS,
    .syms = syms,
    .nsyms = sizeof(syms) / sizeof(syms[0]),
    .table = &sq_codecs,
    .table_size = sizeof(sq_codecs),
};

int sq_codecs_load(char *why, size_t len)
{
    return sq_dynlib_load(&libs, why, len);
}
