/* plan/eval.c - extractors and checks: compiled at plan load, run against one response.
 *
 * Running allocates nothing: JSON goes through the tree-less scanner (jpath.c), regexes use
 * PCRE2 (8-bit, bytes, no UTF; JIT-compiled when the library has a JIT) with match data made
 * at init, and values land in the caller's sq_buf, which keeps its memory between calls.
 *
 * Init functions zero the struct (an extractor's var is kept: the caller may set it before or
 * after) and leave it zeroed on error, so dispose is always safe.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "plan/eval.h"

#include <errno.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/dynlib.h"

/* PCRE2 is opened by the first regex compiled (regex_compile: every regex extractor and check
 * is built there), not linked, so a run without one does not map it (base/dynlib.h; 80 KB
 * resident in a plain run, docs/benchmarks.md round 6). Every pcre2 function this file calls
 * goes through the table; the header's names (pcre2_compile...) are macros for these. Frees
 * are called only on what was compiled (the table is empty until then). */
#define PCRE2_SYMS(X)                                                                              \
    X(pcre2_code_free_8)                                                                           \
    X(pcre2_compile_8)                                                                             \
    X(pcre2_get_error_message_8)                                                                   \
    X(pcre2_get_ovector_count_8)                                                                   \
    X(pcre2_get_ovector_pointer_8)                                                                 \
    X(pcre2_jit_compile_8)                                                                         \
    X(pcre2_match_8)                                                                               \
    X(pcre2_match_data_create_from_pattern_8)                                                      \
    X(pcre2_match_data_free_8)

static struct {
#define PCRE2_FIELD(sym) __typeof__(sym) *sym;
    PCRE2_SYMS(PCRE2_FIELD)
#undef PCRE2_FIELD
} pcre2;

static const struct sq_dynlib_sym pcre2_syms[] = {
#define PCRE2_ENTRY(sym) {0, #sym, offsetof(__typeof__(pcre2), sym)},
    PCRE2_SYMS(PCRE2_ENTRY)
#undef PCRE2_ENTRY
};

static const char *const pcre2_sonames[] = {SQ_SONAME_PCRE2}; /* CMakeLists.txt's */

static struct sq_dynlib pcre2_libs = {
    .what = "regex",
    .hint = "scripts/deps.sh installs libpcre2-8-0",
    .sonames = pcre2_sonames,
    .nlibs = 1,
    .syms = pcre2_syms,
    .nsyms = sizeof(pcre2_syms) / sizeof(pcre2_syms[0]),
    .table = &pcre2,
    .table_size = sizeof(pcre2),
};

#define pcre2_code_free_8                      (pcre2.pcre2_code_free_8)
#define pcre2_compile_8                        (pcre2.pcre2_compile_8)
#define pcre2_get_error_message_8              (pcre2.pcre2_get_error_message_8)
#define pcre2_get_ovector_count_8              (pcre2.pcre2_get_ovector_count_8)
#define pcre2_get_ovector_pointer_8            (pcre2.pcre2_get_ovector_pointer_8)
#define pcre2_jit_compile_8                    (pcre2.pcre2_jit_compile_8)
#define pcre2_match_8                          (pcre2.pcre2_match_8)
#define pcre2_match_data_create_from_pattern_8 (pcre2.pcre2_match_data_create_from_pattern_8)
#define pcre2_match_data_free_8                (pcre2.pcre2_match_data_free_8)

#define NAME_TEXT_MAX 48 /* bytes of a text or pattern quoted in a check's name */

static void set_err(char *err, size_t errlen, const char *fmt, const char *arg)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, arg);
}

static char *dup_str(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Replaces b's content with s[0, n); b is unchanged on -ENOMEM. */
static int buf_set(struct sq_buf *b, const char *s, size_t n)
{
    size_t old = b->len;
    b->len = 0;
    int rc = sq_buf_reserve(b, n);
    if (rc < 0) {
        b->len = old;
        return rc;
    }
    if (n)
        memcpy(b->p, s, n);
    b->len = n;
    return 0;
}

/* The first header called name (ASCII case-insensitive), or NULL. */
static const struct sq_resp_header *find_header(const struct sq_resp_view *r, const char *name,
                                                size_t len)
{
    for (size_t i = 0; i < r->nheaders; i++) {
        const struct sq_resp_header *h = &r->headers[i];
        if (h->name_len == len && strncasecmp(h->name, name, len) == 0)
            return h;
    }
    return NULL;
}

/* A header name: a non-empty HTTP token. */
static bool header_name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!strchr("!#$%&'*+-.^_`|~", *s) && !(*s >= '0' && *s <= '9') &&
            !((*s | 0x20) >= 'a' && (*s | 0x20) <= 'z'))
            return false;
    return true;
}

/* ---- regexes ---- */

static int regex_compile(const char *pattern, void **re_out, void **md_out, char *err,
                         size_t errlen)
{
    if (sq_dynlib_load(&pcre2_libs, err, errlen) < 0)
        return -ENOENT;
    int code;
    PCRE2_SIZE off;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &code, &off, NULL);
    if (!re) {
        if (code == PCRE2_ERROR_NOMEMORY)
            return -ENOMEM;
        PCRE2_UCHAR msg[256];
        if (pcre2_get_error_message(code, msg, sizeof(msg)) < 0)
            snprintf((char *)msg, sizeof(msg), "error %d", code);
        if (err && errlen)
            snprintf(err, errlen, "regex: %s at offset %zu", (const char *)msg, (size_t)off);
        return -SQ_EPARSE;
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* without a JIT, the interpreter runs */
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) {
        pcre2_code_free(re);
        return -ENOMEM;
    }
    *re_out = re;
    *md_out = md;
    return 0;
}

/* Matches subj; returns the match count (>0), or <= 0 for none (no match, or a match limit). */
static int regex_match(void *re, void *md, const char *subj, size_t len)
{
    return pcre2_match(re, (PCRE2_SPTR)(subj ? subj : ""), len, 0, 0, md, NULL);
}

/* ---- extractors ---- */

static void extractor_clear(struct sq_extractor *e, enum sq_extract_kind kind)
{
    uint32_t var = e->var;
    memset(e, 0, sizeof(*e));
    e->var = var;
    e->kind = kind;
}

int sq_extractor_init_json(struct sq_extractor *e, const char *path, char *err, size_t errlen)
{
    extractor_clear(e, SQ_EXTRACT_JSON);
    return sq_jpath_compile(path, strlen(path), &e->path, err, errlen);
}

int sq_extractor_init_regex(struct sq_extractor *e, const char *pattern, char *err, size_t errlen)
{
    extractor_clear(e, SQ_EXTRACT_REGEX);
    return regex_compile(pattern, &e->re, &e->md, err, errlen);
}

int sq_extractor_init_header(struct sq_extractor *e, const char *name, char *err, size_t errlen)
{
    extractor_clear(e, SQ_EXTRACT_HEADER);
    if (!header_name_ok(name)) {
        set_err(err, errlen, "'%s' is not a header name", name);
        return -SQ_EPARSE;
    }
    e->header_len = strlen(name);
    e->header = dup_str(name, e->header_len);
    if (!e->header) {
        e->header_len = 0;
        return -ENOMEM;
    }
    return 0;
}

void sq_extractor_dispose(struct sq_extractor *e)
{
    sq_jpath_free(e->path);
    if (e->re) { /* compiled: PCRE2 is open */
        pcre2_match_data_free(e->md);
        pcre2_code_free(e->re);
    }
    free(e->header);
    extractor_clear(e, e->kind);
}

bool sq_extractor_needs_body(const struct sq_extractor *e)
{
    return e->kind == SQ_EXTRACT_JSON || e->kind == SQ_EXTRACT_REGEX;
}

int sq_extractor_run(const struct sq_extractor *e, const struct sq_resp_view *r, void *md_scratch,
                     struct sq_buf *out)
{
    switch (e->kind) {
    case SQ_EXTRACT_JSON: {
        struct sq_json_val v;
        if (!e->path || sq_jpath_eval(e->path, r->body, r->body_len, &v) != 1)
            return 0;
        /* Decode after the old content, then move it to the front: out stays as it was when
         * the value has a bad escape or memory runs out. */
        size_t old = out->len;
        int rc = sq_json_val_text(&v, out);
        if (rc < 0) {
            out->len = old;
            return rc == -ENOMEM ? -ENOMEM : 0;
        }
        memmove(out->p, out->p + old, out->len - old);
        out->len -= old;
        return 1;
    }
    case SQ_EXTRACT_REGEX: {
        if (!e->re)
            return 0;
        pcre2_match_data *md = md_scratch ? md_scratch : e->md;
        int n = regex_match(e->re, md, r->body, r->body_len);
        if (n < 0)
            return 0;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        uint32_t g = pcre2_get_ovector_count(md) > 1 ? 1 : 0; /* the first group, if any */
        if (ov[2 * g] == PCRE2_UNSET)
            return 0; /* the group took no part in the match */
        int rc = buf_set(out, r->body + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
        return rc < 0 ? rc : 1;
    }
    case SQ_EXTRACT_HEADER: {
        const struct sq_resp_header *h = find_header(r, e->header, e->header_len);
        if (!h)
            return 0;
        int rc = buf_set(out, h->value, h->value_len);
        return rc < 0 ? rc : 1;
    }
    }
    return 0;
}

void *sq_extractor_clone_state(const struct sq_extractor *e)
{
    if (e->kind != SQ_EXTRACT_REGEX || !e->re)
        return NULL;
    return pcre2_match_data_create_from_pattern(e->re, NULL);
}

void sq_extractor_free_state(void *md)
{
    if (md) /* made from a compiled regex: PCRE2 is open */
        pcre2_match_data_free(md);
}

/* ---- check names ---- */

/* Appends s quoted for a check name: at most NAME_TEXT_MAX bytes (cut on a UTF-8 boundary,
 * then "..."), control bytes shown as '?'. */
static int name_quote(struct sq_buf *b, const char *s, size_t n)
{
    size_t k = n;
    if (k > NAME_TEXT_MAX) {
        k = NAME_TEXT_MAX;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
            k--;
    }
    int rc = sq_buf_append(b, "'", 1);
    for (size_t i = 0; i < k && rc == 0; i++) {
        char c = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
        rc = sq_buf_append(b, &c, 1);
    }
    if (rc == 0 && k < n)
        rc = sq_buf_append(b, "...", 3);
    if (rc == 0)
        rc = sq_buf_append(b, "'", 1);
    return rc;
}

static int name_str(struct sq_buf *b, const char *s)
{
    return sq_buf_append(b, s, strlen(s));
}

/* Ends an init: on success (rc 0) b's content, NUL-terminated, becomes c->name; on failure b
 * and everything c holds are freed and c is left zeroed. Returns rc (or -ENOMEM). */
static int init_done(struct sq_check *c, struct sq_buf *b, int rc)
{
    if (rc == 0)
        rc = sq_buf_append(b, "", 1);
    if (rc < 0) {
        sq_buf_dispose(b);
        sq_check_dispose(c);
        return rc;
    }
    c->name = b->p;
    return 0;
}

/* "200ms", "2s", "1500us": the largest unit that shows the bound exactly. */
static void fmt_us(char *out, size_t n, int64_t us)
{
    if (us != 0 && us % 1000000 == 0)
        snprintf(out, n, "%llds", (long long)(us / 1000000));
    else if (us != 0 && us % 1000 == 0)
        snprintf(out, n, "%lldms", (long long)(us / 1000));
    else
        snprintf(out, n, "%lldus", (long long)us);
}

/* ---- checks ---- */

static void check_clear(struct sq_check *c, enum sq_check_kind kind)
{
    memset(c, 0, sizeof(*c));
    c->kind = kind;
}

/* The check failed to initialise: free what it holds, leave it zeroed, pass rc on. */
static int check_fail(struct sq_check *c, int rc)
{
    sq_check_dispose(c);
    return rc;
}

int sq_check_init_status(struct sq_check *c, const int *codes, size_t n, char *err, size_t errlen)
{
    check_clear(c, SQ_CHECK_STATUS);
    if (n == 0 || n > SQ_ARRAY_LEN(c->codes)) {
        set_err(err, errlen, "%s", "a status check takes 1 to 16 codes");
        return -SQ_EPARSE;
    }
    struct sq_buf b = {0};
    int rc = name_str(&b, n == 1 ? "status " : "status in [");
    for (size_t i = 0; i < n; i++) {
        if (codes[i] < 100 || codes[i] > 599) {
            char num[24];
            snprintf(num, sizeof(num), "%d", codes[i]);
            set_err(err, errlen, "status %s is not an HTTP status (100..599)", num);
            return init_done(c, &b, -SQ_EPARSE);
        }
        c->codes[i] = codes[i];
        char num[16];
        snprintf(num, sizeof(num), "%s%d", i ? ", " : "", codes[i]);
        if (rc == 0)
            rc = name_str(&b, num);
    }
    c->ncodes = n;
    if (rc == 0 && n > 1)
        rc = name_str(&b, "]");
    return init_done(c, &b, rc);
}

int sq_check_init_body_contains(struct sq_check *c, const char *text, char *err, size_t errlen)
{
    check_clear(c, SQ_CHECK_BODY_CONTAINS);
    if (!*text) {
        set_err(err, errlen, "%s", "body_contains needs a non-empty text");
        return -SQ_EPARSE;
    }
    c->text_len = strlen(text);
    c->text = dup_str(text, c->text_len);
    if (!c->text)
        return check_fail(c, -ENOMEM);
    struct sq_buf b = {0};
    int rc = name_str(&b, "body contains ");
    if (rc == 0)
        rc = name_quote(&b, text, c->text_len);
    return init_done(c, &b, rc);
}

/* The whole of s as a JSON-style number (what strtod accepts, but no hex, inf or nan). */
static bool parse_number(const char *s, double *out)
{
    if (!*s || strpbrk(s, "xXiInN") || (*s != '-' && *s != '.' && !(*s >= '0' && *s <= '9')))
        return false;
    char *end;
    double v = strtod(s, &end);
    if (*end || !isfinite(v))
        return false;
    *out = v;
    return true;
}

static bool is_literal(const char *s)
{
    return strcmp(s, "true") == 0 || strcmp(s, "false") == 0 || strcmp(s, "null") == 0;
}

int sq_check_init_json(struct sq_check *c, const char *path, enum sq_cmp_op op, const char *value,
                       bool is_number, char *err, size_t errlen)
{
    check_clear(c, SQ_CHECK_JSON);
    if ((unsigned)op > SQ_CMP_EXISTS) {
        set_err(err, errlen, "%s", "unknown comparison");
        return -SQ_EPARSE;
    }
    c->op = op;
    int rc = sq_jpath_compile(path, strlen(path), &c->path, err, errlen);
    if (rc < 0)
        return check_fail(c, rc);
    if (!value)
        value = op == SQ_CMP_EXISTS ? "true" : "";
    if (op == SQ_CMP_EXISTS) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
            set_err(err, errlen, "exists takes true or false, not '%s'", value);
            return check_fail(c, -SQ_EPARSE);
        }
    } else if (is_number || op >= SQ_CMP_GT) {
        if (!parse_number(value, &c->value)) {
            set_err(err, errlen,
                    is_number ? "'%s' is not a number"
                              : "'%s' is not a number (gt/ge/lt/le compare "
                                "numbers)",
                    value);
            return check_fail(c, -SQ_EPARSE);
        }
        c->num = true;
    }
    c->text_len = strlen(value);
    c->text = dup_str(value, c->text_len);
    if (!c->text)
        return check_fail(c, -ENOMEM);

    struct sq_buf b = {0};
    rc = name_str(&b, path);
    if (op == SQ_CMP_EXISTS) {
        if (rc == 0)
            rc = name_str(&b, value[0] == 't' ? " exists" : " does not exist");
    } else {
        if (rc == 0)
            rc = name_str(&b, " ");
        if (rc == 0)
            rc = name_str(&b, sq_cmp_op_name(op));
        if (rc == 0)
            rc = name_str(&b, " ");
        if (rc == 0)
            rc = c->num || is_literal(value) ? name_str(&b, value)
                                             : name_quote(&b, value, c->text_len);
    }
    return init_done(c, &b, rc);
}

/* Shared by the two header checks: the name and its copy. */
static int header_init(struct sq_check *c, const char *name, char *err, size_t errlen)
{
    if (!header_name_ok(name)) {
        set_err(err, errlen, "'%s' is not a header name", name);
        return -SQ_EPARSE;
    }
    c->header_len = strlen(name);
    c->header = dup_str(name, c->header_len);
    return c->header ? 0 : -ENOMEM;
}

int sq_check_init_header_eq(struct sq_check *c, const char *name, const char *text, char *err,
                            size_t errlen)
{
    check_clear(c, SQ_CHECK_HEADER_EQ);
    int rc = header_init(c, name, err, errlen);
    if (rc < 0)
        return check_fail(c, rc);
    c->text_len = strlen(text);
    c->text = dup_str(text, c->text_len);
    if (!c->text)
        return check_fail(c, -ENOMEM);
    struct sq_buf b = {0};
    rc = name_str(&b, "header ");
    if (rc == 0)
        rc = name_str(&b, name);
    if (rc == 0)
        rc = name_str(&b, " eq ");
    if (rc == 0)
        rc = name_quote(&b, text, c->text_len);
    return init_done(c, &b, rc);
}

int sq_check_init_header_match(struct sq_check *c, const char *name, const char *regex, char *err,
                               size_t errlen)
{
    check_clear(c, SQ_CHECK_HEADER_MATCH);
    int rc = header_init(c, name, err, errlen);
    if (rc == 0)
        rc = regex_compile(regex, &c->re, &c->md, err, errlen);
    if (rc < 0)
        return check_fail(c, rc);
    struct sq_buf b = {0};
    rc = name_str(&b, "header ");
    if (rc == 0)
        rc = name_str(&b, name);
    if (rc == 0)
        rc = name_str(&b, " matches ");
    if (rc == 0)
        rc = name_quote(&b, regex, strlen(regex));
    return init_done(c, &b, rc);
}

int sq_check_init_duration(struct sq_check *c, enum sq_cmp_op op, int64_t bound_us, char *err,
                           size_t errlen)
{
    check_clear(c, SQ_CHECK_DURATION);
    if ((unsigned)op >= SQ_CMP_EXISTS) {
        set_err(err, errlen, "%s", "a duration check compares with eq, ne, gt, ge, lt or le");
        return -SQ_EPARSE;
    }
    if (bound_us < 0) {
        set_err(err, errlen, "%s", "a duration bound cannot be negative");
        return -SQ_EPARSE;
    }
    c->op = op;
    c->value = (double)bound_us;
    char num[32];
    fmt_us(num, sizeof(num), bound_us);
    struct sq_buf b = {0};
    int rc = name_str(&b, "duration ");
    if (rc == 0)
        rc = name_str(&b, sq_cmp_op_name(op));
    if (rc == 0)
        rc = name_str(&b, " ");
    if (rc == 0)
        rc = name_str(&b, num);
    return init_done(c, &b, rc);
}

void sq_check_dispose(struct sq_check *c)
{
    free(c->name);
    free(c->text);
    free(c->header);
    sq_jpath_free(c->path);
    if (c->re) { /* compiled: PCRE2 is open */
        pcre2_match_data_free(c->md);
        pcre2_code_free(c->re);
    }
    check_clear(c, c->kind);
}

bool sq_check_needs_body(const struct sq_check *c)
{
    return c->kind == SQ_CHECK_BODY_CONTAINS || c->kind == SQ_CHECK_JSON;
}

bool sq_check_needs_headers(const struct sq_check *c)
{
    return c->kind == SQ_CHECK_HEADER_EQ || c->kind == SQ_CHECK_HEADER_MATCH;
}

static bool compare(enum sq_cmp_op op, double a, double b)
{
    switch (op) {
    case SQ_CMP_EQ:
        return a == b;
    case SQ_CMP_NE:
        return a != b;
    case SQ_CMP_GT:
        return a > b;
    case SQ_CMP_GE:
        return a >= b;
    case SQ_CMP_LT:
        return a < b;
    case SQ_CMP_LE:
        return a <= b;
    case SQ_CMP_EXISTS:
        break;
    }
    return false;
}

/* The number v spans (a JSON number, so strtod reads it the same way), parsed from a bounded
 * copy: on the stack when short, else in scratch. false: no memory. */
static bool number_of(const struct sq_json_val *v, struct sq_buf *scratch, double *out)
{
    char small[64];
    char *s = small;
    if (v->raw_len >= sizeof(small)) {
        sq_buf_reset(scratch);
        if (sq_buf_append(scratch, v->raw, v->raw_len) < 0 || sq_buf_append(scratch, "", 1) < 0)
            return false;
        s = scratch->p;
    } else {
        memcpy(small, v->raw, v->raw_len);
        small[v->raw_len] = '\0';
    }
    *out = strtod(s, NULL);
    return true;
}

static bool json_check(const struct sq_check *c, const struct sq_resp_view *r,
                       struct sq_buf *scratch)
{
    struct sq_json_val v;
    bool found = c->path && sq_jpath_eval(c->path, r->body, r->body_len, &v) == 1;
    if (c->op == SQ_CMP_EXISTS)
        return found == (c->text && c->text[0] == 't');
    if (!found)
        return false; /* an absent value passes no comparison, ne included */
    bool eq;
    if (c->num) {
        double x;
        if (v.type != SQ_JSON_NUMBER || !number_of(&v, scratch, &x))
            return c->op == SQ_CMP_NE;
        return compare(c->op, x, c->value);
    }
    if (is_literal(c->text)) {
        enum sq_json_type want = c->text[0] == 't'   ? SQ_JSON_TRUE
                                 : c->text[0] == 'f' ? SQ_JSON_FALSE
                                                     : SQ_JSON_NULL;
        eq = v.type == want;
    } else if (v.type == SQ_JSON_STRING) {
        sq_buf_reset(scratch);
        if (sq_json_val_text(&v, scratch) < 0)
            eq = false; /* a lone surrogate equals nothing */
        else
            eq = scratch->len == c->text_len && memcmp(scratch->p, c->text, c->text_len) == 0;
    } else {
        eq = v.raw_len == c->text_len && memcmp(v.raw, c->text, c->text_len) == 0;
    }
    return c->op == SQ_CMP_EQ ? eq : !eq;
}

bool sq_check_run(const struct sq_check *c, const struct sq_resp_view *r, void *md_scratch,
                  struct sq_buf *scratch)
{
    switch (c->kind) {
    case SQ_CHECK_STATUS:
        for (size_t i = 0; i < c->ncodes; i++)
            if (r->status == c->codes[i])
                return true;
        return false;
    case SQ_CHECK_BODY_CONTAINS:
        return c->text_len && r->body_len >= c->text_len &&
               memmem(r->body, r->body_len, c->text, c->text_len) != NULL;
    case SQ_CHECK_JSON: {
        if (scratch)
            return json_check(c, r, scratch);
        struct sq_buf own = {0}; /* no scratch given: correct, but it may allocate */
        bool pass = json_check(c, r, &own);
        sq_buf_dispose(&own);
        return pass;
    }
    case SQ_CHECK_HEADER_EQ: {
        const struct sq_resp_header *h = find_header(r, c->header, c->header_len);
        return h && h->value_len == c->text_len && memcmp(h->value, c->text, c->text_len) == 0;
    }
    case SQ_CHECK_HEADER_MATCH: {
        const struct sq_resp_header *h = find_header(r, c->header, c->header_len);
        return h && c->re &&
               regex_match(c->re, md_scratch ? md_scratch : c->md, h->value, h->value_len) >= 0;
    }
    case SQ_CHECK_DURATION:
        return compare(c->op, (double)r->duration_us, c->value);
    }
    return false;
}

void *sq_check_clone_state(const struct sq_check *c)
{
    if (c->kind != SQ_CHECK_HEADER_MATCH || !c->re)
        return NULL;
    return pcre2_match_data_create_from_pattern(c->re, NULL);
}

/* ---- comparison names ---- */

static const char *const op_names[] = {
    [SQ_CMP_EQ] = "eq", [SQ_CMP_NE] = "ne", [SQ_CMP_GT] = "gt",         [SQ_CMP_GE] = "ge",
    [SQ_CMP_LT] = "lt", [SQ_CMP_LE] = "le", [SQ_CMP_EXISTS] = "exists",
};

int sq_cmp_op_parse(const char *s)
{
    for (size_t i = 0; i < SQ_ARRAY_LEN(op_names); i++)
        if (strcmp(s, op_names[i]) == 0)
            return (int)i;
    return -1;
}

const char *sq_cmp_op_name(enum sq_cmp_op op)
{
    return (unsigned)op < SQ_ARRAY_LEN(op_names) ? op_names[op] : "?";
}
