/* store/sqlite.c - see sqlite.h. */
#define SQ_SQLITE_IMPL
#include "store/sqlite.h"

#include "base/dynlib.h"

struct sq_sqlite sq_sqlite;

enum { LIB_SQLITE3, NLIBS };
static const char *const sonames[NLIBS] = {SQ_SONAME_SQLITE3}; /* CMakeLists.txt's */

static const struct sq_dynlib_sym syms[] = {
#define SQ_SQLITE_ENTRY(lib, sym) {LIB_##lib, #sym, offsetof(struct sq_sqlite, sym)},
    SQ_SQLITE_SYMS(SQ_SQLITE_ENTRY)
#undef SQ_SQLITE_ENTRY
};

static struct sq_dynlib libs = {
    .what = "the run store",
    .hint = "scripts/deps.sh installs libsqlite3",
    .sonames = sonames,
    .nlibs = NLIBS,
    .syms = syms,
    .nsyms = sizeof(syms) / sizeof(syms[0]),
    .table = &sq_sqlite,
    .table_size = sizeof(sq_sqlite),
};

int sq_sqlite_load(char *why, size_t len)
{
    return sq_dynlib_load(&libs, why, len);
}
