/* script/luajit.c - see luajit.h. */
#define SQ_LUAJIT_IMPL
#include "script/luajit.h"

#include "base/dynlib.h"

struct sq_luajit sq_luajit;

enum { LIB_LUAJIT, NLIBS };
static const char *const sonames[NLIBS] = {SQ_SONAME_LUAJIT}; /* CMakeLists.txt's */

static const struct sq_dynlib_sym syms[] = {
#define SQ_LUAJIT_ENTRY(lib, sym) {LIB_##lib, #sym, offsetof(struct sq_luajit, sym)},
    SQ_LUAJIT_SYMS(SQ_LUAJIT_ENTRY)
#undef SQ_LUAJIT_ENTRY
};

static struct sq_dynlib libs = {
    .what = "scripts",
    .hint = "scripts/deps.sh installs libluajit-5.1",
    .sonames = sonames,
    .nlibs = NLIBS,
    .syms = syms,
    .nsyms = sizeof(syms) / sizeof(syms[0]),
    .table = &sq_luajit,
    .table_size = sizeof(sq_luajit),
};

int sq_luajit_load(char *why, size_t len)
{
    return sq_dynlib_load(&libs, why, len);
}
