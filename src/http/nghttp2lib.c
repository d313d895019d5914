/* http/nghttp2lib.c - see nghttp2lib.h. */
#define SQ_NGHTTP2_IMPL
#include "http/nghttp2lib.h"

#include "base/dynlib.h"

struct sq_nghttp2 sq_nghttp2;

static const char *const sonames[] = {SQ_SONAME_NGHTTP2}; /* CMakeLists.txt's */

static const struct sq_dynlib_sym syms[] = {
#define SQ_NGHTTP2_ENTRY(sym) {0, #sym, offsetof(struct sq_nghttp2, sym)},
    SQ_NGHTTP2_SYMS(SQ_NGHTTP2_ENTRY)
#undef SQ_NGHTTP2_ENTRY
};

static struct sq_dynlib libs = {
    .what = "HTTP/2",
    .hint = "scripts/deps.sh installs libnghttp2-14",
    .sonames = sonames,
    .nlibs = 1,
    .syms = syms,
    .nsyms = sizeof(syms) / sizeof(syms[0]),
    .table = &sq_nghttp2,
    .table_size = sizeof(sq_nghttp2),
};

int sq_nghttp2_load(char *why, size_t len)
{
    return sq_dynlib_load(&libs, why, len);
}
