/* plan/fyaml.c - see fyaml.h. */
#define SQ_FYAML_IMPL
#include "plan/fyaml.h"

#include "base/dynlib.h"

struct sq_fyaml sq_fyaml;

enum { LIB_FYAML, NLIBS };
static const char *const sonames[NLIBS] = {SQ_SONAME_FYAML}; /* CMakeLists.txt's */

static const struct sq_dynlib_sym syms[] = {
#define SQ_FYAML_ENTRY(lib, sym) {LIB_##lib, #sym, offsetof(struct sq_fyaml, sym)},
    SQ_FYAML_SYMS(SQ_FYAML_ENTRY)
#undef SQ_FYAML_ENTRY
};

static struct sq_dynlib libs = {
    .what = "YAML",
    .hint = "scripts/deps.sh installs libfyaml",
    .sonames = sonames,
    .nlibs = NLIBS,
    .syms = syms,
    .nsyms = sizeof(syms) / sizeof(syms[0]),
    .table = &sq_fyaml,
    .table_size = sizeof(sq_fyaml),
};

int sq_fyaml_load(char *why, size_t len)
{
    return sq_dynlib_load(&libs, why, len);
}
