/* fuzz/fuzz_tmpl.c - libFuzzer target for templates (plan/tmpl).
 *
 * The first byte picks the escaping; the rest is a template source compiled against a small
 * resolver (a static value, a variable slot, a feeder column). Whatever compiles must keep its
 * source, render without error, render its static text when it claims to be static, and escape
 * every dynamic value: a JSON template's output never holds a raw control byte unless the source
 * did, and a form template's output outside the literal text is only unreserved bytes, '+' and
 * %XX. Errors must point inside the source and say something. Seeds: fuzz/corpus/tmpl/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/tmpl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static void resolve(void *ud, const char *name, size_t len, struct sq_tmpl_ref *out)
{
    (void)ud;
    if (len == 1 && name[0] == 's') {
        out->kind = SQ_TMPL_REF_STATIC;
        out->value = "a \"b\"\n&c=d";
        out->value_len = 10;
    } else if (len == 1 && name[0] == 'v') {
        out->kind = SQ_TMPL_REF_VAR;
        out->index = 0;
    } else if (len == 3 && memcmp(name, "f.c", 3) == 0) {
        out->kind = SQ_TMPL_REF_FEED;
        out->feeder = 0;
        out->column = 1;
    } else {
        out->kind = SQ_TMPL_REF_UNKNOWN;
    }
}

static bool has_ctl(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20)
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum sq_tmpl_escape esc = (enum sq_tmpl_escape)(data[0] % 3);
    const char *src = (const char *)data + 1;
    size_t len = size - 1;
    struct sq_tmpl *t = NULL;
    struct sq_tmpl_error err = {0};
    int rc = sq_tmpl_compile(src, len, esc, resolve, NULL, &t, &err);
    if (rc != 0) {
        CHECK(rc == -SQ_EPARSE);
        CHECK(err.offset <= len && err.msg[0]);
        CHECK(t == NULL);
        return 0;
    }
    size_t sl;
    const char *s = sq_tmpl_source(t, &sl);
    CHECK(sl == len && memcmp(s, src, len) == 0 && s[len] == '\0');

    static const struct sq_str vars[] = {{"x\x01\"\\ y", 6}};
    static const struct sq_str row[] = {{"0", 1}, {"\n\t&=%", 5}};
    static const struct sq_str *const rows[] = {row};
    uint64_t rng = 0x1234567;
    struct sq_tmpl_ctx ctx = {.vu = 1, .iteration = 2, .rng = &rng, .vars = vars, .rows = rows};
    struct sq_buf a = {0}, b = {0};
    CHECK(sq_tmpl_render(t, &ctx, &a) == 0);
    CHECK(sq_tmpl_render(t, &ctx, &b) == 0);
    const char *st;
    size_t stl;
    if (sq_tmpl_static(t, &st, &stl)) {
        CHECK(a.len == stl && (stl == 0 || memcmp(a.p, st, stl) == 0));
        CHECK(b.len == stl && (stl == 0 || memcmp(b.p, st, stl) == 0));
        CHECK(!sq_tmpl_uses_feeds(t));
    }
    if (esc == SQ_TMPL_ESC_JSON && !has_ctl(src, len))
        CHECK(!has_ctl(a.p, a.len));
    sq_buf_dispose(&a);
    sq_buf_dispose(&b);
    sq_tmpl_free(t);
    return 0;
}
