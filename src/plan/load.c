/* plan/load.c - the plan loader's entry points and its top level: YAML text -> struct sq_plan.
 *
 * yaml.c turns the text into a tree of our own whose every node keeps its line:col. A walk over
 * that tree then checks every key against the schema of docs/plans.md (an unknown key is an
 * error that suggests the nearest valid one) and compiles what the workers share: templates,
 * extractors, checks, executors, thresholds, feeders. This file holds the top level (vars,
 * target, defaults, data), templates and files; scenarios are in load_flow.c, thresholds in
 * threshold.c. The first problem stops the load with one error: where (file:line:col), which
 * key (a path such as scenarios.shop.flow[0].request.url) and what was expected. Everything
 * allocated for a half-built plan hangs off the plan itself, so sq_plan_free() cleans up after
 * any failure.
 */
#include "plan/plan.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/file.h"
#include "base/redact.h"
#include "base/text.h"
#include "plan/load_internal.h"

#define MAX_JSON_BODY (4u << 20) /* a serialised `json:` body (aliases can multiply it) */
#define TOO_BIG                                                                                    \
    "the plan is larger than %u MiB, the limit for a plan file (see docs/plans.md, Limits)"

/* ------------------------------------------------------------------------------------------ */
/* Templates                                                                                  */

void sq_plan__resolve_name(void *ud, const char *name, size_t len, struct sq_tmpl_ref *out)
{
    struct rctx *R = ud;
    const struct sq_plan *p = R->L->p;
    out->kind = SQ_TMPL_REF_UNKNOWN;
    if (len == 12 && memcmp(name, "$oauth.token", 12) == 0) {
        if (p->oauth2)
            out->kind = SQ_TMPL_REF_OAUTH;
        return;
    }
    uintptr_t at;
    if (sq_plan__map_get(&R->L->vars, name, len, &at) && at < R->nvars) {
        out->kind = SQ_TMPL_REF_STATIC;
        out->value = p->vars[at].value;
        out->value_len = strlen(p->vars[at].value);
        return;
    }
    /* L->slots holds the slots of the scenario being loaded, which is R->sc */
    if (R->sc && sq_plan__map_get(&R->L->slots, name, len, &at) && at < R->sc->nvars) {
        out->kind = SQ_TMPL_REF_VAR;
        out->index = (uint32_t)at;
        return;
    }
    const char *dot = memchr(name, '.', len);
    char shown[64];
    snprintf(shown, sizeof(shown), "%.*s", (int)(len > 60 ? 60 : len), name);
    char tail[80];
    if (dot && R->sc) {
        size_t fl = (size_t)(dot - name);
        uintptr_t fi;
        if (sq_plan__map_get(&R->L->feeder_names, name, fl, &fi) && fi < R->L->nfeeder_cols) {
            const struct sq_plan_feeder *f = &p->feeders[fi];
            const char *col = dot + 1;
            size_t cl = len - fl - 1;
            uintptr_t c;
            if (sq_plan__map_get(&R->L->feeder_cols[fi], col, cl, &c)) {
                out->kind = SQ_TMPL_REF_FEED;
                out->feeder = (uint32_t)fi;
                out->column = (uint32_t)c;
                return;
            }
            struct sq_suggest s;
            sq_suggest_init(&s, col, cl);
            for (size_t j = 0; j < f->data->ncolumns; j++)
                sq_suggest_try(&s, f->data->columns[j]);
            char cols[80] = "";
            size_t used = 0;
            for (size_t j = 0; j < f->data->ncolumns && used < sizeof(cols); j++)
                used += (size_t)snprintf(cols + used, sizeof(cols) - used, "%s%s", j ? ", " : "",
                                         f->data->columns[j]);
            snprintf(R->msg, sizeof(R->msg), "feeder '%s' has no column '%.*s'%s (columns: %s)",
                     f->name, (int)(cl > 40 ? 40 : cl), col,
                     sq_suggest_tail(&s, tail, sizeof(tail)), cols);
            R->have_msg = true;
            return;
        }
        struct sq_suggest s;
        sq_suggest_init(&s, name, fl);
        for (size_t i = 0; i < p->nfeeders; i++)
            sq_suggest_try(&s, p->feeders[i].name);
        if (s.best) {
            snprintf(R->msg, sizeof(R->msg), "unknown feeder '%.*s' in '%s' (did you mean '%s'?)",
                     (int)(fl > 40 ? 40 : fl), name, shown, s.best);
            R->have_msg = true;
            return;
        }
    }
    /* Suggest among every name the template could use here. */
    struct sq_suggest s;
    sq_suggest_init(&s, name, len);
    for (size_t i = 0; i < R->nvars; i++)
        sq_suggest_try(&s, p->vars[i].name);
    char full[8][128];
    size_t nfull = 0;
    if (R->sc) {
        for (uint32_t i = 0; i < R->sc->nvars; i++)
            sq_suggest_try(&s, R->sc->vars[i]);
        for (size_t i = 0; i < p->nfeeders; i++) {
            for (size_t j = 0; j < p->feeders[i].data->ncolumns; j++) {
                char cand[128];
                snprintf(cand, sizeof(cand), "%s.%s", p->feeders[i].name,
                         p->feeders[i].data->columns[j]);
                if (sq_suggest_offer(&s, cand, strlen(cand))) {
                    size_t slot = nfull < 8 ? nfull++ : 7;
                    memcpy(full[slot], cand, sizeof(cand));
                    s.best = full[slot]; /* cand is about to go */
                }
            }
        }
    }
    snprintf(R->msg, sizeof(R->msg), "unknown name '%s'%s", shown,
             sq_suggest_tail(&s, tail, sizeof(tail)));
    R->have_msg = true;
}

/* Where byte off of a scalar's value is in the file: exact while the value and the source agree
 * (no escapes or folding before it, one line), else the scalar's own position. libfyaml marks a
 * quoted scalar at its first character, after the quote. */
struct sq_loc sq_plan__value_loc(const struct ld *L, const struct ynode *n, size_t off)
{
    struct sq_loc loc = n->loc;
    if (!loc.line || n->kind != Y_SCALAR || off > n->len)
        return loc;
    if (n->style == YS_LITERAL || n->style == YS_FOLDED)
        return loc;
    if (n->pos + off > L->src_len || memcmp(L->src + n->pos, n->s, off) != 0 ||
        memchr(n->s, '\n', off))
        return loc;
    uint32_t cols = 0;
    for (size_t i = 0; i < off; i++)
        cols += ((unsigned char)n->s[i] & 0xc0) != 0x80; /* characters, as libfyaml counts */
    loc.col += cols;
    return loc;
}

/* Compiles src (from node n, whose value the offsets refer to when exact) into *out. */
int sq_plan__compile_tmpl(struct ld *L, const struct ynode *n, bool exact, const char *src,
                          size_t len, enum sq_tmpl_escape esc, struct rctx *R, struct sq_tmpl **out)
{
    struct sq_tmpl_error te = {0};
    R->have_msg = false;
    int rc = sq_tmpl_compile(src, len, esc, sq_plan__resolve_name, R, out, &te);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0) {
        struct sq_loc loc = exact ? sq_plan__value_loc(L, n, te.offset) : n->loc;
        return sq_plan__fail_at(L, loc, "%s", R->have_msg ? R->msg : te.msg);
    }
    return 0;
}

int sq_plan__compile_scalar(struct ld *L, const struct ynode *n, enum sq_tmpl_escape esc,
                            struct rctx *R, struct sq_tmpl **out)
{
    return sq_plan__compile_tmpl(L, n, true, n->s, n->len, esc, R, out);
}

int sq_plan__static_text(struct ld *L, const struct ynode *n, const char *what, struct sq_tmpl **t,
                         const char **s, size_t *len)
{
    int rc = sq_plan__want_string(L, n, what);
    if (rc < 0)
        return rc;
    struct rctx R = {.L = L, .nvars = L->p->nvars};
    if ((rc = sq_plan__compile_scalar(L, n, SQ_TMPL_ESC_NONE, &R, t)) < 0)
        return rc;
    if (!sq_tmpl_static(*t, s, len)) {
        sq_tmpl_free(*t);
        *t = NULL;
        return 0;
    }
    return 1;
}

/* Compiles a scalar just to report its template errors at their exact place. */
int sq_plan__precheck(struct ld *L, const struct ynode *n, struct rctx *R)
{
    if (!strstr(n->s, "{{"))
        return 0;
    struct sq_tmpl *t = NULL;
    int rc = sq_plan__compile_scalar(L, n, SQ_TMPL_ESC_NONE, R, &t);
    sq_tmpl_free(t);
    return rc;
}

/* Walks s: literal text through lit(), each "{{...}}" copied as it is. */
int sq_plan__split_tags(struct sq_buf *b, const char *s, size_t n,
                        int (*lit)(struct sq_buf *, const char *, size_t))
{
    size_t i = 0;
    while (i < n) {
        const char *open = NULL;
        for (size_t j = i; j + 1 < n; j++)
            if (s[j] == '{' && s[j + 1] == '{') {
                open = s + j;
                break;
            }
        size_t end = open ? (size_t)(open - s) : n;
        int rc = lit(b, s + i, end - i);
        if (rc < 0 || !open)
            return rc;
        const char *close = NULL;
        for (size_t j = end + 2; j + 1 < n; j++)
            if (s[j] == '}' && s[j + 1] == '}') {
                close = s + j;
                break;
            }
        size_t stop = close ? (size_t)(close - s) + 2 : n;
        rc = sq_buf_append(b, s + end, stop - end);
        if (rc < 0)
            return rc;
        i = stop;
    }
    return 0;
}

static int lit_json(struct sq_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int rc;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rc = sq_buf_append(b, e, 2);
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', sq_hex_lower[c >> 4], sq_hex_lower[c & 15]};
            rc = sq_buf_append(b, e, 6);
        } else {
            rc = sq_buf_append(b, &s[i], 1);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

int sq_plan__lit_form(struct sq_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int rc;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            rc = sq_buf_append(b, &s[i], 1);
        } else if (c == ' ') {
            rc = sq_buf_append(b, "+", 1);
        } else {
            char e[3] = {'%', sq_hex_upper[c >> 4], sq_hex_upper[c & 15]};
            rc = sq_buf_append(b, e, 3);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Serialises a YAML value into JSON text whose strings may hold "{{...}}" tags. */
int sq_plan__to_json(struct ld *L, const struct ynode *n, struct rctx *R, struct sq_buf *b,
                     int depth)
{
    int rc;
    if (depth > 64)
        return sq_plan__fail(L, n, "json body nested too deeply (at most 64 levels)");
    if (b->len > MAX_JSON_BODY)
        return sq_plan__fail(L, n, "json body larger than %u MiB", MAX_JSON_BODY >> 20);
    if (n->kind == Y_MAP || n->kind == Y_SEQ) {
        bool map = n->kind == Y_MAP;
        rc = sq_buf_append(b, map ? "{" : "[", 1);
        size_t count = map ? n->npairs : n->nitems;
        for (size_t i = 0; rc == 0 && i < count; i++) {
            if (i)
                rc = sq_buf_append(b, ",", 1);
            if (rc == 0 && map) {
                const struct ynode *k = n->pairs[i].key;
                size_t mark = sq_plan__path_key(L, k->s);
                rc = sq_plan__precheck(L, k, R);
                if (rc == 0)
                    rc = sq_buf_append(b, "\"", 1);
                if (rc == 0)
                    rc = sq_plan__split_tags(b, k->s, k->len, lit_json);
                if (rc == 0)
                    rc = sq_buf_append(b, "\":", 2);
                if (rc == 0)
                    rc = sq_plan__to_json(L, n->pairs[i].val, R, b, depth + 1);
                if (rc == 0)
                    sq_plan__path_pop(L, mark);
            } else if (rc == 0) {
                size_t mark = sq_plan__path_push(L, "[%zu]", i);
                rc = sq_plan__to_json(L, n->items[i], R, b, depth + 1);
                if (rc == 0)
                    sq_plan__path_pop(L, mark);
            }
        }
        return rc == 0 ? sq_buf_append(b, map ? "}" : "]", 1) : rc;
    }
    rc = sq_plan__precheck(L, n, R);
    if (rc < 0)
        return rc;
    if (n->raw)
        return sq_buf_append(b, n->s, n->len);
    if (n->style == YS_PLAIN) {
        if (sq_plan__is_null(n))
            return sq_buf_append(b, "null", 4);
        if (sq_plan__is_true(n->s))
            return sq_buf_append(b, "true", 4);
        if (sq_plan__is_false(n->s))
            return sq_buf_append(b, "false", 5);
        char num[64];
        int k = sq_plan__yaml_number(n, num, sizeof(num));
        if (k < 0)
            return sq_plan__fail(L, n, "'%s' has no JSON form (quote it to send a string)", n->s);
        if (k > 0)
            return sq_buf_append(b, num, strlen(num));
    }
    rc = sq_buf_append(b, "\"", 1);
    if (rc == 0)
        rc = sq_plan__split_tags(b, n->s, n->len, lit_json);
    return rc == 0 ? sq_buf_append(b, "\"", 1) : rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                      */

int sq_plan__relative_path(struct ld *L, const struct ynode *n, char *out, size_t outlen)
{
    if (n->s[0] != '/' && L->no_dir)
        return sq_plan__fail(L, n,
                             "'%.200s' is a relative path, and this plan was given as text with no "
                             "directory to resolve it against: use an absolute path",
                             n->s);
    int k = n->s[0] == '/' || !L->dir[0] ? snprintf(out, outlen, "%s", n->s)
                                         : snprintf(out, outlen, "%s/%s", L->dir, n->s);
    if (k < 0 || (size_t)k >= outlen)
        return sq_plan__fail(L, n, "path too long");
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Top level: vars, target, defaults, data                                                    */

static int load_vars(struct ld *L, const struct ynode *n)
{
    struct sq_plan *p = L->p;
    int rc = sq_plan__want_map(L, n, "a mapping of variable names to values");
    if (rc < 0)
        return rc;
    p->vars = calloc(n->npairs ? n->npairs : 1, sizeof(*p->vars));
    if (!p->vars)
        return -ENOMEM;
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        if (!sq_plan__is_ident(k->s))
            return sq_plan__fail(
                L, k,
                "'%.60s' is not a variable name (letters, digits and '_', not starting "
                "with a digit)",
                k->s);
        size_t mark = sq_plan__path_key(L, k->s);
        if ((rc = sq_plan__want_scalar(L, v, "a text value")) < 0)
            return rc;
        struct rctx R = {.L = L, .nvars = i};
        struct sq_tmpl *t = NULL;
        if ((rc = sq_plan__compile_scalar(L, v, SQ_TMPL_ESC_NONE, &R, &t)) < 0)
            return rc;
        const char *s;
        size_t len;
        if (!sq_tmpl_static(t, &s, &len)) {
            sq_tmpl_free(t);
            return sq_plan__fail(
                L, v,
                "a plan variable is fixed text: only other variables and $env.NAME may "
                "appear in it");
        }
        p->vars[i].name = strdup(k->s);
        p->vars[i].value = strndup(s, len);
        p->nvars = i + 1;
        sq_tmpl_free(t);
        if (!p->vars[i].name || !p->vars[i].value ||
            sq_plan__map_add(&L->vars, p->vars[i].name, strlen(p->vars[i].name), i, NULL) < 0)
            return -ENOMEM;
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

/* scheme://host[:port][/] with nothing after: the origin every step's url is relative to. */
bool sq_plan__parse_origin(const char *s, size_t len, char *scheme, char *host, size_t hostlen,
                           unsigned *port)
{
    const char *sep = NULL;
    for (size_t i = 0; i + 2 < len; i++)
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') {
            sep = s + i;
            break;
        }
    if (!sep)
        return false;
    size_t sl = (size_t)(sep - s);
    if (sl == 4 && strncasecmp(s, "http", 4) == 0)
        strcpy(scheme, "http");
    else if (sl == 5 && strncasecmp(s, "https", 5) == 0)
        strcpy(scheme, "https");
    else
        return false;
    const char *h = sep + 3, *end = s + len;
    if (end > h && end[-1] == '/')
        end--;
    const char *hend;
    if (h < end && *h == '[') {
        hend = memchr(h, ']', (size_t)(end - h));
        if (!hend)
            return false;
        for (const char *c = h + 1; c < hend; c++)
            if (!isxdigit((unsigned char)*c) && *c != ':' && *c != '.')
                return false;
        hend++;
    } else {
        hend = h;
        while (hend < end && (isalnum((unsigned char)*hend) || strchr("-._~", *hend)))
            hend++;
    }
    size_t hl = (size_t)(hend - h);
    if (hl == 0 || hl >= hostlen)
        return false;
    for (size_t i = 0; i < hl; i++)
        host[i] = (char)tolower((unsigned char)h[i]);
    host[hl] = '\0';
    *port = strcmp(scheme, "https") == 0 ? 443 : 80;
    if (hend < end) {
        if (*hend != ':' || hend + 1 == end)
            return false;
        unsigned v = 0;
        for (const char *c = hend + 1; c < end; c++) {
            if (!isdigit((unsigned char)*c) || v > 6553)
                return false;
            v = v * 10 + (unsigned)(*c - '0');
        }
        if (v == 0 || v > 65535)
            return false;
        *port = v;
    }
    return true;
}

static int load_target(struct ld *L, const struct ynode *n)
{
    struct sq_tmpl *t = NULL;
    const char *s;
    size_t len;
    int rc = sq_plan__static_text(L, n, "a URL like http://127.0.0.1:8080", &t, &s, &len);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        return sq_plan__fail(L, n,
                             "the target is fixed text: only plan variables and $env.NAME may "
                             "appear in it");
    }
    size_t blank = sq_blank_at(s, len);
    if (blank < len) {
        /* before the origin's own checks, which would blame the part the space lands in */
        bool same = n->kind == Y_SCALAR && n->len == len && memcmp(n->s, s, len) == 0;
        struct sq_loc at = same ? sq_plan__value_loc(L, n, blank) : n->loc;
        const char *what = s[blank] == ' ' ? "a space" : "a control character";
        sq_tmpl_free(t); /* s is its text */
        return sq_plan__fail_at(L, at,
                                "the target may not contain %s: it is an origin like "
                                "http://127.0.0.1:8080 (write a space as %%20, and paths in each "
                                "step's url)",
                                what);
    }
    bool ok = sq_plan__parse_origin(s, len, L->scheme, L->host, sizeof(L->host), &L->port);
    if (!ok) {
        char shown[120];
        snprintf(shown, sizeof(shown), "%.*s", (int)(len > 100 ? 100 : len), s);
        const char *sl = strstr(shown, "://");
        bool has_path = sl && strchr(sl + 3, '/') && strchr(sl + 3, '/')[1];
        sq_tmpl_free(t);
        if (has_path)
            return sq_plan__fail(
                L, n,
                "expected an origin like http://127.0.0.1:8080 without a path, got "
                "'%s' (paths go in each step's url)",
                shown);
        return sq_plan__fail(
            L, n, "expected an http:// or https:// URL like http://127.0.0.1:8080, got '%s'",
            shown);
    }
    if (len && s[len - 1] == '/')
        len--;
    L->p->target = strndup(s, len);
    sq_tmpl_free(t);
    return L->p->target ? 0 : -ENOMEM;
}

static int load_defaults(struct ld *L, const struct ynode *n)
{
    static const char *const keys[] = {"headers", "timeout", "max_redirects"};
    int rc = sq_plan__want_keys(L, n, "a mapping (headers, timeout, max_redirects)", keys,
                                SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    const struct ynode *v = sq_plan__get(n, "max_redirects");
    if (v) {
        size_t mark = sq_plan__path_key(L, "max_redirects");
        uint64_t m;
        if ((rc = sq_plan__get_u64(L, v, 0, SQ_PLAN_REDIRECTS_CAP, &m)) < 0)
            return rc;
        L->p->default_max_redirects = (uint32_t)m;
        sq_plan__path_pop(L, mark);
    }
    v = sq_plan__get(n, "timeout");
    if (v) {
        size_t mark = sq_plan__path_key(L, "timeout");
        if ((rc = sq_plan__get_duration(L, v, &L->p->default_timeout_ns)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    v = sq_plan__get(n, "headers");
    if (v) {
        size_t mark = sq_plan__path_key(L, "headers");
        if ((rc = sq_plan__want_map(L, v, "a mapping of header names to values")) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
        L->def_headers = v;
    }
    return 0;
}

/* secret: true (every column) or a list of the feeder's column names. */
static int load_feeder_secret(struct ld *L, const struct ynode *n, size_t fi)
{
    struct sq_plan_feeder *f = &L->p->feeders[fi];
    f->secret = calloc(f->data->ncolumns, sizeof(*f->secret));
    if (!f->secret)
        return -ENOMEM;
    if (n->kind != Y_SEQ) {
        bool all;
        int rc = sq_plan__get_bool(L, n, &all);
        if (rc < 0)
            return rc;
        for (size_t c = 0; c < f->data->ncolumns; c++)
            f->secret[c] = all;
        return 0;
    }
    for (size_t i = 0; i < n->nitems; i++) {
        const struct ynode *c = n->items[i];
        int rc = sq_plan__want_string(L, c, "a column name of the feeder");
        if (rc < 0)
            return rc;
        uintptr_t col;
        if (!sq_plan__map_get(&L->feeder_cols[fi], c->s, c->len, &col)) {
            char cols[160] = "";
            for (size_t k = 0, o = 0; k < f->data->ncolumns && o + 1 < sizeof(cols); k++)
                o += (size_t)snprintf(cols + o, sizeof(cols) - o, "%s%s", k ? ", " : "",
                                      f->data->columns[k]);
            return sq_plan__fail(L, c, "feeder '%s' has no column '%.60s' (columns: %s)", f->name,
                                 c->s, cols);
        }
        f->secret[col] = true;
    }
    return 0;
}

static int load_data(struct ld *L, const struct ynode *n)
{
    struct sq_plan *p = L->p;
    int rc =
        sq_plan__want_map(L, n, "a mapping of feeder names to { csv: FILE } or { json: FILE }");
    if (rc < 0)
        return rc;
    p->feeders = calloc(n->npairs ? n->npairs : 1, sizeof(*p->feeders));
    L->feeder_cols = calloc(n->npairs ? n->npairs : 1, sizeof(*L->feeder_cols)); /* empty maps */
    if (!p->feeders || !L->feeder_cols)
        return -ENOMEM;
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        static const char *const keys[] = {"csv", "json", "mode", "secret"};
        if (!sq_plan__is_ident(k->s))
            return sq_plan__fail(L, k, "'%.60s' is not a feeder name (letters, digits and '_')",
                                 k->s);
        size_t mark = sq_plan__path_key(L, k->s);
        if ((rc = sq_plan__want_keys(L, v, "a mapping like { csv: users.csv, mode: per-vu }", keys,
                                     SQ_ARRAY_LEN(keys))) < 0)
            return rc;
        const struct ynode *csv = sq_plan__get(v, "csv"), *json = sq_plan__get(v, "json"),
                           *mode = sq_plan__get(v, "mode");
        if (!csv == !json)
            return sq_plan__fail(L, v,
                                 csv ? "a feeder has one of csv or json, not both"
                                     : "missing key 'csv' or 'json' (the feeder's file)");
        struct sq_plan_feeder *f = &p->feeders[i];
        p->nfeeders = i + 1;
        f->mode = SQ_FEED_SEQUENTIAL;
        if (mode) {
            size_t m2 = sq_plan__path_key(L, "mode");
            if ((rc = sq_plan__want_string(L, mode, "sequential, per-vu or random")) < 0)
                return rc;
            if (!strcmp(mode->s, "sequential"))
                f->mode = SQ_FEED_SEQUENTIAL;
            else if (!strcmp(mode->s, "per-vu"))
                f->mode = SQ_FEED_PER_VU;
            else if (!strcmp(mode->s, "random"))
                f->mode = SQ_FEED_RANDOM;
            else {
                struct sq_suggest s;
                char tail[64];
                sq_suggest_init(&s, mode->s, mode->len);
                sq_suggest_try(&s, "sequential");
                sq_suggest_try(&s, "per-vu");
                sq_suggest_try(&s, "random");
                return sq_plan__fail(L, mode,
                                     "expected sequential, per-vu or random, got '%.40s'%s",
                                     mode->s, sq_suggest_tail(&s, tail, sizeof(tail)));
            }
            sq_plan__path_pop(L, m2);
        }
        const struct ynode *file = csv ? csv : json;
        size_t m2 = sq_plan__path_key(L, csv ? "csv" : "json");
        if ((rc = sq_plan__want_string(L, file, "a file path")) < 0)
            return rc;
        char full[4096];
        if ((rc = sq_plan__relative_path(L, file, full, sizeof(full))) < 0)
            return rc;
        f->name = strdup(k->s);
        f->path = strdup(full);
        if (!f->name || !f->path)
            return -ENOMEM;
        char ferr[256] = "";
        rc = csv ? sq_feeder_load_csv(full, &f->data, ferr, sizeof(ferr))
                 : sq_feeder_load_json(full, &f->data, ferr, sizeof(ferr));
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            return sq_plan__fail(L, file, "%s", ferr[0] ? ferr : sq_strerror(rc));
        if (f->data->ncolumns == 0 || f->data->nrows == 0)
            return sq_plan__fail(L, file, "%s: no data rows", full);
        /* the names templates look up: the feeder's, and its columns' (first one wins) */
        L->nfeeder_cols = i + 1;
        if (sq_plan__map_add(&L->feeder_names, f->name, strlen(f->name), i, NULL) < 0)
            return -ENOMEM;
        for (size_t c = 0; c < f->data->ncolumns; c++)
            if (sq_plan__map_add(&L->feeder_cols[i], f->data->columns[c],
                                 strlen(f->data->columns[c]), c, NULL) < 0)
                return -ENOMEM;
        sq_plan__path_pop(L, m2);
        const struct ynode *sec = sq_plan__get(v, "secret");
        if (sec) {
            m2 = sq_plan__path_key(L, "secret");
            if ((rc = load_feeder_secret(L, sec, i)) < 0)
                return rc;
            sq_plan__path_pop(L, m2);
        }
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Entry points                                                                               */

/* sink: {http: HOST:PORT, nats: URL, mqtt: URL, stamp: WHERE, settle: D, qos: N, stream: S,
 * durable: D, queue: Q}. The sink checks its URLs and the stamp spec when it starts. */
static int load_sink(struct ld *L, const struct ynode *n)
{
    static const char *const keys[] = {"http", "nats",   "mqtt",    "stamp", "settle",
                                       "qos",  "stream", "durable", "queue"};
    int rc = sq_plan__want_keys(L, n, "a mapping (http, nats or mqtt; stamp, settle)", keys,
                                SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    struct sq_plan_sink *sk = calloc(1, sizeof(*sk));
    if (!sk)
        return -ENOMEM;
    L->p->sink = sk;
    sk->loc = n->loc;
    sk->qos = -1;
    char **strs[] = {&sk->http, &sk->nats,   &sk->mqtt,    &sk->stamp, NULL,
                     NULL,      &sk->stream, &sk->durable, &sk->queue};
    for (size_t i = 0; i < SQ_ARRAY_LEN(keys); i++) {
        const struct ynode *v = sq_plan__get(n, keys[i]);
        if (!v || !strs[i])
            continue;
        size_t mark = sq_plan__path_key(L, keys[i]);
        if ((rc = sq_plan__want_string(L, v, "a string")) < 0)
            return rc;
        if (!(*strs[i] = strdup(v->s)))
            return -ENOMEM;
        sq_plan__path_pop(L, mark);
    }
    if (!sk->http && !sk->nats && !sk->mqtt)
        return sq_plan__fail(L, n, "a sink needs a source: http (HOST:PORT), nats or mqtt (a URL)");
    const struct ynode *v = sq_plan__get(n, "settle");
    if (v) {
        size_t mark = sq_plan__path_key(L, "settle");
        if ((rc = sq_plan__get_duration(L, v, &sk->settle_ns)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    v = sq_plan__get(n, "qos");
    if (v) {
        size_t mark = sq_plan__path_key(L, "qos");
        if ((rc = sq_plan__want_scalar(L, v, "0, 1 or 2")) < 0)
            return rc;
        if (strcmp(v->s, "0") && strcmp(v->s, "1") && strcmp(v->s, "2"))
            return sq_plan__fail(L, v, "expected a QoS of 0, 1 or 2, got '%.20s'", v->s);
        sk->qos = v->s[0] - '0';
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

/* subscribers: {url: URL, count: N, threads: N, queue: G, stream: S, batch: N, push: BOOL,
 * qos: N}, the quick face's --subscribers and its flags as keys. What only the broker's side
 * can say (the URL in full, a group's name) is checked when the subscribers start. */
static int load_subscribers(struct ld *L, const struct ynode *n)
{
    static const char *const keys[] = {"url",    "count", "threads", "queue",
                                       "stream", "batch", "push",    "qos"};
    int rc = sq_plan__want_keys(L, n, "a mapping (url, count; queue, stream, batch, push, qos)",
                                keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    struct sq_plan_subscribers *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    L->p->subscribers = s;
    s->loc = n->loc;
    s->qos = -1;
    s->count = 1;
    const struct ynode *v = sq_plan__get(n, "url");
    if (!v)
        return sq_plan__fail(L, n,
                             "missing key 'url' (nats://HOST[:PORT]/SUBJECT or "
                             "mqtt://HOST[:PORT]/TOPIC)");
    size_t mark = sq_plan__path_key(L, "url");
    if ((rc = sq_plan__want_string(L, v, "a broker URL")) < 0)
        return rc;
    bool mqtt = strncasecmp(v->s, "mqtt://", 7) == 0 || strncasecmp(v->s, "mqtts://", 8) == 0;
    if (!mqtt && strncasecmp(v->s, "nats://", 7) != 0 && strncasecmp(v->s, "tls://", 6) != 0)
        return sq_plan__fail(L, v,
                             "expected nats://HOST[:PORT]/SUBJECT or mqtt://HOST[:PORT]/TOPIC "
                             "(tls:// and mqtts:// over TLS), got '%.60s'",
                             v->s);
    if (!(s->url = strdup(v->s)))
        return -ENOMEM;
    sq_plan__path_pop(L, mark);
    static const char *const strs[] = {"queue", "stream"};
    char **dst[] = {&s->queue, &s->stream};
    for (size_t i = 0; i < SQ_ARRAY_LEN(strs); i++) {
        if (!(v = sq_plan__get(n, strs[i])))
            continue;
        mark = sq_plan__path_key(L, strs[i]);
        if ((rc = sq_plan__want_string(L, v, i ? "a stream name" : "a group name")) < 0)
            return rc;
        if (i == 1 && mqtt)
            return sq_plan__fail(L, v, "stream: JetStream consumers are NATS's (the URL is MQTT)");
        if (!(*dst[i] = strdup(v->s)))
            return -ENOMEM;
        sq_plan__path_pop(L, mark);
    }
    static const char *const nums[] = {"count", "threads", "batch"};
    uint32_t *ndst[] = {&s->count, &s->threads, &s->batch};
    for (size_t i = 0; i < SQ_ARRAY_LEN(nums); i++) {
        if (!(v = sq_plan__get(n, nums[i])))
            continue;
        mark = sq_plan__path_key(L, nums[i]);
        uint64_t u;
        if ((rc = sq_plan__get_u64(L, v, 1, i == 0 ? SQ_PLAN_SUBSCRIBERS_MAX : 100000, &u)) < 0)
            return rc;
        if (i == 2 && !s->stream)
            return sq_plan__fail(L, v,
                                 "batch is a JetStream pull consumer's fetch size (give "
                                 "stream)");
        *ndst[i] = (uint32_t)u;
        sq_plan__path_pop(L, mark);
    }
    if ((v = sq_plan__get(n, "push"))) {
        mark = sq_plan__path_key(L, "push");
        if ((rc = sq_plan__get_bool(L, v, &s->push)) < 0)
            return rc;
        if (s->push && !s->stream)
            return sq_plan__fail(L, v, "push makes JetStream consumers push ones (give stream)");
        if (s->push && s->batch)
            return sq_plan__fail(L, v, "batch is a pull consumer's fetch size (not with push)");
        sq_plan__path_pop(L, mark);
    }
    if ((v = sq_plan__get(n, "qos"))) {
        mark = sq_plan__path_key(L, "qos");
        if ((rc = sq_plan__want_scalar(L, v, "0, 1 or 2")) < 0)
            return rc;
        if (strcmp(v->s, "0") && strcmp(v->s, "1") && strcmp(v->s, "2"))
            return sq_plan__fail(L, v, "expected a QoS of 0, 1 or 2, got '%.20s'", v->s);
        if (!mqtt)
            return sq_plan__fail(L, v,
                                 "qos is for mqtt:// and mqtts:// URLs (NATS core has no QoS)");
        s->qos = v->s[0] - '0';
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

static int add_secret(struct sq_plan *p, const char *s, size_t len, size_t *cap)
{
    if (len < SQ_REDACT_MIN)
        return 0; /* the value rule skips it: the name rule is all there is */
    if (p->nsecrets == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        struct sq_str *v = realloc(p->secrets, nc * sizeof(*v));
        if (!v)
            return -ENOMEM;
        p->secrets = v;
        *cap = nc;
    }
    p->secrets[p->nsecrets++] = (struct sq_str){s, len};
    return 0;
}

/* The credentials the plan holds as fixed text (struct sq_plan.secrets). */
static int collect_secrets(struct sq_plan *p)
{
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->nscenarios; i++) {
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        for (size_t k = 0; rc == 0 && k < sc->nsteps; k++) {
            const struct sq_plan_request *r = &sc->steps[k].req;
            for (size_t h = 0; rc == 0 && h < r->nheaders; h++) {
                const char *v;
                size_t n;
                if (!sq_redact_header_name(r->headers[h].name, strlen(r->headers[h].name)) ||
                    !sq_tmpl_static(r->headers[h].value, &v, &n))
                    continue;
                rc = add_secret(p, v, n, &cap);
                size_t w = 0; /* "Bearer abc": abc alone too, wherever it shows */
                while (w < n && v[w] != ' ' && v[w] != '\t')
                    w++;
                while (w < n && (v[w] == ' ' || v[w] == '\t'))
                    w++;
                if (rc == 0 && w > 0 && w < n)
                    rc = add_secret(p, v + w, n - w, &cap);
            }
            /* a broker URL's password: nats://user:password@host/subject */
            size_t at, n;
            if (rc == 0 &&
                (sc->steps[k].kind == SQ_STEP_PUBLISH || sc->steps[k].kind == SQ_STEP_SUBSCRIBE) &&
                r->url_src && sq_redact_url_secret(r->url_src, strlen(r->url_src), &at, &n))
                rc = add_secret(p, r->url_src + at, n, &cap);
        }
    }
    if (rc == 0 && p->oauth2 && p->oauth2->client_secret)
        rc = add_secret(p, p->oauth2->client_secret, strlen(p->oauth2->client_secret), &cap);
    return rc;
}

/* setup: or teardown: (the key `which` of root), when the plan has it: a flow one VU runs once
 * (sq_plan__load_scenario without an executor). */
static int load_once(struct ld *L, const struct ynode *root, const char *which,
                     struct sq_plan_scenario **out)
{
    const struct ynode *n = sq_plan__get(root, which);
    if (!n)
        return 0;
    size_t mark = sq_plan__path_key(L, which);
    int rc = sq_plan__want_map(L, n, "a mapping with flow (the steps run once)");
    if (rc < 0)
        return rc;
    sq_plan__path_pop(L, mark); /* sq_plan__load_scenario names it again */
    if (!(*out = calloc(1, sizeof(**out))))
        return -ENOMEM;
    L->once = true;
    rc = sq_plan__load_scenario(L, sq_plan__get_key(root, which), n, *out);
    L->once = false;
    return rc;
}

/* The feeder "setup" whose columns are the setup flow's variables: {{setup.NAME}} in the
 * scenarios and teardown reads what setup extracted (one row, filled before they start). */
static int setup_feeder(struct ld *L, const struct ynode *root)
{
    struct sq_plan *p = L->p;
    const struct sq_plan_scenario *su = p->setup;
    for (size_t i = 0; i < p->nfeeders; i++)
        if (!strcmp(p->feeders[i].name, "setup")) {
            const struct ynode *data = sq_plan__get(root, "data");
            size_t mark = sq_plan__path_key(L, "data");
            int rc = sq_plan__fail(L, sq_plan__get_key(data, "setup"),
                                   "'setup' names setup:'s values ({{setup.NAME}}) in a plan with "
                                   "setup: (rename this feeder)");
            sq_plan__path_pop(L, mark);
            return rc;
        }
    struct sq_plan_feeder *fs = realloc(p->feeders, (p->nfeeders + 1) * sizeof(*fs));
    if (!fs)
        return -ENOMEM;
    p->feeders = fs;
    struct sq_plan__map *cols = realloc(L->feeder_cols, (p->nfeeders + 1) * sizeof(*cols));
    if (!cols)
        return -ENOMEM;
    L->feeder_cols = cols;
    size_t i = p->nfeeders;
    memset(&fs[i], 0, sizeof(fs[i]));
    memset(&cols[i], 0, sizeof(cols[i]));
    sq_plan__map_init(&cols[i], false);
    fs[i].mode = SQ_FEED_PER_VU;
    p->nfeeders = i + 1;
    L->nfeeder_cols = i + 1;
    if (!(fs[i].name = strdup("setup")) || sq_feeder_new_row(su->vars, su->nvars, &fs[i].data) < 0)
        return -ENOMEM;
    p->setup_feeder = (int)i;
    if (sq_plan__map_add(&L->feeder_names, "setup", 5, i, NULL) < 0)
        return -ENOMEM;
    for (uint32_t c = 0; c < su->nvars; c++)
        if (sq_plan__map_add(&cols[i], su->vars[c], strlen(su->vars[c]), c, NULL) < 0)
            return -ENOMEM;
    return 0;
}

static int load_root(struct ld *L, const struct ynode *root)
{
    static const char *const keys[] = {
        "target",       "vars",         "defaults", "data",     "scenarios", "thresholds",
        "script",       "auth",         "sink",     "name",     "seed",      "redact",
        "source_addrs", "connect_rate", "setup",    "teardown", "metrics",   "subscribers"};
    struct sq_plan *p = L->p;
    int rc = sq_plan__want_keys(L, root, "a mapping with target and scenarios", keys,
                                SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    struct sq_loc top = {1, 1};
    if (!sq_plan__get(root, "target"))
        return sq_plan__fail_at(L, top,
                                "missing key 'target' (the base URL, like http://127.0.0.1:8080)");
    if (!sq_plan__get(root, "scenarios"))
        return sq_plan__fail_at(L, top,
                                "missing key 'scenarios' (at least one scenario with an executor "
                                "and a flow)");
    static const char *const order[] = {"vars", "target", "defaults", "data", "script", "auth"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(order); i++) {
        const struct ynode *v = sq_plan__get(root, order[i]);
        if (!v)
            continue;
        size_t mark = sq_plan__path_key(L, order[i]);
        rc = i == 0   ? load_vars(L, v)
             : i == 1 ? load_target(L, v)
             : i == 2 ? load_defaults(L, v)
             : i == 3 ? load_data(L, v)
             : i == 4 ? sq_plan__load_script(L, v)
                      : sq_plan__load_auth(L, v);
        if (rc < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    const struct ynode *nm = sq_plan__get(root, "name");
    if (nm) {
        /* the run's name in its result and report */
        if ((rc = sq_plan__want_string(L, nm, "a name for the run, like nightly-checkout")) < 0)
            return rc;
        if (nm->len == 0 || strlen(nm->s) != nm->len)
            return sq_plan__fail(L, nm, "the name is empty or holds a NUL byte");
        if (!(p->name = strdup(nm->s)))
            return -ENOMEM;
    }
    const struct ynode *sd = sq_plan__get(root, "seed");
    if (sd) {
        /* the random values replayed: {{$randomUUID}}, {{$randomInt}}, random feeders */
        size_t m = sq_plan__path_key(L, "seed");
        if ((rc = sq_plan__get_u64(L, sd, 0, SQ_SEED_MAX, &p->seed)) < 0)
            return rc;
        p->seed_set = true;
        sq_plan__path_pop(L, m);
    }
    const struct ynode *rd = sq_plan__get(root, "redact");
    if (rd) {
        /* redact: false keeps the credentials in the exchanges squall keeps */
        size_t m = sq_plan__path_key(L, "redact");
        bool on;
        if ((rc = sq_plan__get_bool(L, rd, &on)) < 0)
            return rc;
        p->no_redact = !on;
        sq_plan__path_pop(L, m);
    }
    const struct ynode *sa = sq_plan__get(root, "source_addrs");
    if (sa) {
        /* the syntax is the face's to check (net/srcaddr.h), at this position */
        size_t m = sq_plan__path_key(L, "source_addrs");
        if ((rc = sq_plan__want_string(L, sa, "local addresses, like 127.0.0.2-127.0.0.5")) < 0)
            return rc;
        if (sa->len == 0 || strlen(sa->s) != sa->len)
            return sq_plan__fail(L, sa, "the list is empty or holds a NUL byte");
        if (!(p->source_addrs = strdup(sa->s)))
            return -ENOMEM;
        p->source_addrs_loc = sa->loc;
        sq_plan__path_pop(L, m);
    }
    const struct ynode *cr = sq_plan__get(root, "connect_rate");
    if (cr) {
        size_t m = sq_plan__path_key(L, "connect_rate");
        if ((rc = sq_plan__get_number(L, cr, 0, &p->connect_rate)) < 0)
            return rc;
        if (p->connect_rate <= 0 || p->connect_rate > 1e9)
            return sq_plan__fail(L, cr, "expected connections per second, above 0 (at most 1e9)");
        sq_plan__path_pop(L, m);
    }
    const struct ynode *mt = sq_plan__get(root, "metrics"); /* before the steps that add to them */
    if (mt) {
        size_t m = sq_plan__path_key(L, "metrics");
        if ((rc = sq_plan__load_metrics(L, mt)) < 0)
            return rc;
        sq_plan__path_pop(L, m);
    }
    if ((rc = load_once(L, root, "setup", &p->setup)) < 0)
        return rc;
    if (p->setup && (rc = setup_feeder(L, root)) < 0)
        return rc;
    const struct ynode *sc = sq_plan__get(root, "scenarios");
    size_t mark = sq_plan__path_key(L, "scenarios");
    if ((rc = sq_plan__want_map(L, sc, "a mapping of scenario names to scenarios")) < 0)
        return rc;
    if (sc->npairs == 0)
        return sq_plan__fail(L, sc, "at least one scenario is needed");
    p->scenarios = calloc(sc->npairs, sizeof(*p->scenarios));
    if (!p->scenarios)
        return -ENOMEM;
    for (size_t i = 0; i < sc->npairs; i++) {
        p->nscenarios = i + 1;
        if ((rc = sq_plan__load_scenario(L, sc->pairs[i].key, sc->pairs[i].val, &p->scenarios[i])) <
            0)
            return rc;
    }
    sq_plan__path_pop(L, mark);
    if ((rc = load_once(L, root, "teardown", &p->teardown)) < 0)
        return rc;
    const struct ynode *th = sq_plan__get(root, "thresholds");
    if (th) {
        mark = sq_plan__path_key(L, "thresholds");
        if ((rc = sq_plan__load_thresholds(L, th)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    const struct ynode *sk = sq_plan__get(root, "sink");
    if (sk) {
        mark = sq_plan__path_key(L, "sink");
        if ((rc = load_sink(L, sk)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    const struct ynode *su = sq_plan__get(root, "subscribers");
    if (su) {
        mark = sq_plan__path_key(L, "subscribers");
        if ((rc = load_subscribers(L, su)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    return collect_secrets(p);
}

/* Loads yaml; relative paths resolve against dir (NULL: refused). */
static int load_mem(const char *name, const char *yaml, size_t len, const char *dir,
                    struct sq_plan **out, struct sq_plan_error *err)
{
    if (err) {
        memset(err, 0, sizeof(*err));
        snprintf(err->file, sizeof(err->file), "%s", name);
    }
    struct ld *L = calloc(1, sizeof(*L));
    struct sq_plan *p = calloc(1, sizeof(*p));
    if (!L || !p) {
        free(L);
        free(p);
        return -ENOMEM;
    }
    p->default_max_redirects = SQ_PLAN_MAX_REDIRECTS;
    p->setup_feeder = -1;
    L->p = p;
    L->err = err;
    sq_plan__map_init(&L->anchors, false);
    sq_plan__map_init(&L->vars, false);
    sq_plan__map_init(&L->slots, false);
    sq_plan__map_init(&L->step_names, false);
    sq_plan__map_init(&L->scenario_names, false);
    sq_plan__map_init(&L->all_step_names, false);
    sq_plan__map_init(&L->feeder_names, false);
    L->src = yaml;
    L->src_len = len;
    L->no_dir = !dir;
    int rc = 0;
    if (dir && snprintf(L->dir, sizeof(L->dir), "%s", dir) >= (int)sizeof(L->dir)) {
        struct sq_loc loc = {0, 0};
        rc = sq_plan__fail_at(L, loc, "the base directory is too long");
    }
    p->file = strdup(name);
    if (rc == 0 && !p->file)
        rc = -ENOMEM;
    struct ynode *root = NULL;
    if (rc == 0 && len > SQ_PLAN_MAX_BYTES) {
        struct sq_loc loc = {1, 1};
        rc = sq_plan__fail_at(L, loc, TOO_BIG, SQ_PLAN_MAX_BYTES >> 20);
    }
    if (rc == 0)
        rc = sq_plan__yaml_tree(L, &root);
    L->root = root;
    if (rc == 0)
        rc = load_root(L, root);
    if (rc == -ENOMEM && err)
        snprintf(err->msg, sizeof(err->msg), "out of memory");
    sq_plan__ld_dispose(L);
    free(L);
    if (rc < 0) {
        sq_plan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int sq_plan_load_string(const char *name, const char *yaml, size_t len, struct sq_plan **out,
                        struct sq_plan_error *err)
{
    /* relative paths: from the directory of name, else the working directory */
    char dir[4096] = "";
    const char *slash = strrchr(name, '/');
    if (slash)
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash == name ? 1 : slash - name), name);
    return load_mem(name, yaml, len, dir, out, err);
}

int sq_plan_load_text(const char *name, const char *text, size_t len, const char *base_dir,
                      struct sq_plan **out, struct sq_plan_error *err)
{
    return load_mem(name, text, len, base_dir, out, err);
}

int sq_plan_load(const char *path, struct sq_plan **out, struct sq_plan_error *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = sq_file_read(path, SQ_PLAN_MAX_BYTES, &text, &len);
    if (rc < 0) {
        if (err) {
            memset(err, 0, sizeof(*err));
            snprintf(err->file, sizeof(err->file), "%s", path);
            if (rc == -SQ_ETOOBIG)
                snprintf(err->msg, sizeof(err->msg), TOO_BIG, SQ_PLAN_MAX_BYTES >> 20);
            else if (rc == -EISDIR)
                snprintf(err->msg, sizeof(err->msg), "cannot read the plan: it is a directory");
            else
                snprintf(err->msg, sizeof(err->msg), "cannot read the plan: %s", sq_strerror(rc));
        }
        return rc == -SQ_ETOOBIG ? -SQ_EPARSE : rc;
    }
    rc = sq_plan_load_string(path, text, len, out, err);
    free(text);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */

static void request_dispose(struct sq_plan_request *r)
{
    free(r->method);
    sq_tmpl_free(r->url);
    free(r->url_src);
    for (size_t i = 0; i < r->nheaders; i++) {
        free(r->headers[i].name);
        sq_tmpl_free(r->headers[i].value);
    }
    free(r->headers);
    sq_tmpl_free(r->body);
    free(r->body_file);
}

static void scenario_dispose(struct sq_plan_scenario *sc)
{
    if (!sc)
        return;
    for (size_t j = 0; j < sc->nsteps; j++) {
        struct sq_plan_step *st = &sc->steps[j];
        free(st->name);
        free(st->before);
        free(st->after);
        sq_cond_free(st->cond);
        free(st->group);
        request_dispose(&st->req);
        free(st->ws.subprotocol);
        for (size_t k = 0; k < st->nextract; k++) {
            sq_extractor_dispose(&st->extract[k]);
            free(st->extract_src[k]);
        }
        free(st->extract);
        free(st->extract_src);
        for (size_t k = 0; k < st->nchecks; k++)
            sq_check_dispose(&st->checks[k]);
        free(st->checks);
        for (uint32_t k = 0; k < st->ntags; k++) {
            free(st->tags[k].key);
            free(st->tags[k].value);
        }
        free(st->tags);
        for (uint32_t k = 0; k < st->nmetrics; k++)
            sq_tmpl_free(st->metrics[k].tmp);
        free(st->metrics);
    }
    free(sc->steps);
    for (uint32_t j = 0; j < sc->nloops; j++)
        sq_cond_free(sc->loops[j].cond);
    free(sc->loops);
    for (uint32_t j = 0; j < sc->ngroups; j++)
        free(sc->groups[j]);
    free(sc->groups);
    for (uint32_t j = 0; j < sc->nvars; j++)
        free(sc->vars[j]);
    free(sc->vars);
    free(sc->name);
}

bool sq_plan_in_group(const char *group, const char *name, size_t len)
{
    return group && len > 0 && strncmp(group, name, len) == 0 &&
           (group[len] == '\0' || (group[len] == ':' && group[len + 1] == ':'));
}

void sq_plan_free(struct sq_plan *p)
{
    if (!p)
        return;
    if (p->sink) {
        free(p->sink->http);
        free(p->sink->nats);
        free(p->sink->mqtt);
        free(p->sink->stamp);
        free(p->sink->stream);
        free(p->sink->durable);
        free(p->sink->queue);
        free(p->sink);
    }
    if (p->subscribers) {
        free(p->subscribers->url);
        free(p->subscribers->queue);
        free(p->subscribers->stream);
        free(p->subscribers);
    }
    for (size_t i = 0; i < p->nscenarios; i++)
        scenario_dispose(&p->scenarios[i]);
    free(p->scenarios);
    for (size_t i = 0; i < p->nmetrics; i++)
        free(p->metrics[i].name);
    free(p->metrics);
    scenario_dispose(p->setup);
    free(p->setup);
    scenario_dispose(p->teardown);
    free(p->teardown);
    for (size_t i = 0; i < p->nfeeders; i++) {
        free(p->feeders[i].name);
        free(p->feeders[i].path);
        sq_feeder_free(p->feeders[i].data);
        free(p->feeders[i].secret);
    }
    free(p->feeders);
    free(p->secrets);
    for (size_t i = 0; i < p->nvars; i++) {
        free(p->vars[i].name);
        free(p->vars[i].value);
    }
    free(p->vars);
    for (size_t i = 0; i < p->nthresholds; i++) {
        free(p->thresholds[i].selector);
        free(p->thresholds[i].exprs);
    }
    free(p->thresholds);
    free(p->target);
    free(p->name);
    free(p->file);
    free(p->script);
    free(p->source_addrs);
    sq_plan__oauth2_free(p->oauth2);
    free(p);
}
