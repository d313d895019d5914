/* plan/tmpl.c - "{{...}}" templates: compiled once into pieces, rendered per iteration.
 *
 * A compiled template is an array of pieces over one text block. A literal piece is a span of
 * that block; every other piece is a generator ($vu, $randomUUID, ...), a per-VU variable slot
 * or a feeder column. Static values (plan variables, $env.NAME) are escaped at compile time and
 * merged into the neighbouring literal text, so a template without a dynamic part is a single
 * literal piece (or none) and sq_tmpl_static() hands out its text: the engine's static path.
 *
 * Invariants: no two literal pieces are adjacent; the text block holds the literal text of the
 * pieces in order; rendering appends to the caller's sq_buf and allocates nothing else.
 */
#include "plan/tmpl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/text.h"

enum piece_kind {
    P_LIT,
    P_VU,
    P_ITER,
    P_UUID,
    P_RANDINT,
    P_TS,
    P_ISO,
    P_VAR,
    P_FEED,
    P_STAMP,
    P_OAUTH, /* the run's current OAuth2 token (ctx->oauth) */
};

struct piece {
    enum piece_kind kind;
    uint32_t a32, b32; /* LIT: offset, length into text; VAR: index, -; FEED: feeder, column */
    int64_t lo, hi;    /* RANDINT: bounds, inclusive */
};

struct sq_tmpl {
    enum sq_tmpl_escape esc;
    struct piece *pieces;
    size_t npieces;
    char *text; /* literal text, NUL-terminated */
    size_t text_len;
    char *src; /* the source, NUL-terminated */
    size_t src_len;
    bool uses_feeds;
    bool uses_stamp;
};

/* ---- escaping ---- */

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

/* Appends s[0, n) escaped for esc. Reserves the worst case once, then writes in place. */
static int append_esc(struct sq_buf *b, enum sq_tmpl_escape esc, const char *s, size_t n)
{
    if (esc == SQ_TMPL_ESC_NONE)
        return sq_buf_append(b, s, n);
    if (n > ((size_t)-1) / 8)
        return -ENOMEM;
    int rc = sq_buf_reserve(b, n * (esc == SQ_TMPL_ESC_JSON ? 6 : 3));
    if (rc < 0)
        return rc;
    char *o = b->p + b->len;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (esc == SQ_TMPL_ESC_JSON) {
            if (c == '"' || c == '\\') {
                *o++ = '\\';
                *o++ = (char)c;
            } else if (c < 0x20) {
                memcpy(o, "\\u00", 4);
                o[4] = sq_hex_upper[c >> 4];
                o[5] = sq_hex_upper[c & 15];
                o += 6;
            } else {
                *o++ = (char)c;
            }
        } else {
            if (unreserved(c)) {
                *o++ = (char)c;
            } else if (c == ' ') {
                *o++ = '+';
            } else {
                o[0] = '%';
                o[1] = sq_hex_upper[c >> 4];
                o[2] = sq_hex_upper[c & 15];
                o += 3;
            }
        }
    }
    b->len = (size_t)(o - b->p);
    return 0;
}

/* ---- compile ---- */

struct builder {
    struct piece *pieces;
    size_t n, cap;
    struct sq_buf text;
    bool uses_feeds, uses_stamp;
};

static int push_piece(struct builder *bd, const struct piece *p)
{
    if (bd->n == bd->cap) {
        size_t cap = bd->cap ? bd->cap * 2 : 8;
        struct piece *np = realloc(bd->pieces, cap * sizeof(*np));
        if (!np)
            return -ENOMEM;
        bd->pieces = np;
        bd->cap = cap;
    }
    bd->pieces[bd->n++] = *p;
    return 0;
}

/* Appends literal (already escaped) text, merging with a preceding literal piece. */
static int push_lit(struct builder *bd, const char *s, size_t n, enum sq_tmpl_escape esc,
                    bool escape)
{
    if (n == 0)
        return 0;
    size_t off = bd->text.len;
    int rc = escape ? append_esc(&bd->text, esc, s, n) : sq_buf_append(&bd->text, s, n);
    if (rc < 0)
        return rc;
    size_t added = bd->text.len - off;
    if (added == 0)
        return 0;
    if (bd->text.len > UINT32_MAX)
        return -ENOMEM;
    if (bd->n && bd->pieces[bd->n - 1].kind == P_LIT) {
        bd->pieces[bd->n - 1].b32 += (uint32_t)added;
        return 0;
    }
    struct piece p = {.kind = P_LIT, .a32 = (uint32_t)off, .b32 = (uint32_t)added};
    return push_piece(bd, &p);
}

static void set_err(struct sq_tmpl_error *err, size_t off, const char *fmt, const char *a,
                    size_t alen, const char *b)
{
    if (!err)
        return;
    err->offset = off;
    if (alen > 60)
        alen = 60;
    snprintf(err->msg, sizeof(err->msg), fmt, (int)alen, a, b ? b : "");
}

static const struct {
    const char *name; /* matched up to '(' or '.' */
    const char *shown;
} builtins[] = {
    {"$vu", "$vu"},
    {"$iteration", "$iteration"},
    {"$randomUUID", "$randomUUID"},
    {"$randomInt", "$randomInt(MIN,MAX)"},
    {"$timestamp", "$timestamp"},
    {"$isoTimestamp", "$isoTimestamp"},
    {"$env", "$env.NAME"},
    {"$stamp", "$stamp"},
    {"$oauth", "$oauth.token"},
};

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* Parses a signed 64-bit decimal at s[*i, n), skipping blanks before it. */
static bool parse_i64(const char *s, size_t n, size_t *i, int64_t *out)
{
    while (*i < n && is_space(s[*i]))
        (*i)++;
    bool neg = false;
    if (*i < n && (s[*i] == '-' || s[*i] == '+'))
        neg = s[(*i)++] == '-';
    if (*i >= n || s[*i] < '0' || s[*i] > '9')
        return false;
    uint64_t v = 0;
    for (; *i < n && s[*i] >= '0' && s[*i] <= '9'; (*i)++) {
        uint64_t d = (uint64_t)(s[*i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    while (*i < n && is_space(s[*i]))
        (*i)++;
    return true;
}

static int compile_builtin(struct builder *bd, const char *src, size_t off, size_t len,
                           enum sq_tmpl_escape esc, sq_tmpl_resolve_fn resolve, void *ud,
                           struct sq_tmpl_error *err)
{
    const char *s = src + off;
    struct piece p = {0};
#define IS(lit) (len == sizeof(lit) - 1 && memcmp(s, lit, len) == 0)
    if (IS("$vu")) {
        p.kind = P_VU;
    } else if (IS("$iteration")) {
        p.kind = P_ITER;
    } else if (IS("$randomUUID")) {
        p.kind = P_UUID;
    } else if (IS("$oauth.token")) {
        /* the caller says whether a token is set up where this template is used */
        struct sq_tmpl_ref ref = {.kind = SQ_TMPL_REF_UNKNOWN};
        if (resolve)
            resolve(ud, s, len, &ref);
        if (ref.kind != SQ_TMPL_REF_OAUTH) {
            set_err(err, off, "'%.*s' needs an OAuth2 token source (a plan's auth.oauth2)%s", s,
                    len, NULL);
            return -SQ_EPARSE;
        }
        p.kind = P_OAUTH;
    } else if (IS("$timestamp")) {
        p.kind = P_TS;
    } else if (IS("$isoTimestamp")) {
        p.kind = P_ISO;
    } else if (IS("$stamp")) {
        p.kind = P_STAMP;
        bd->uses_stamp = true;
    } else if (len >= 10 && memcmp(s, "$randomInt", 10) == 0 &&
               (len == 10 || s[10] == '(' || is_space(s[10]))) {
        size_t i = 10;
        while (i < len && is_space(s[i]))
            i++;
        int64_t lo, hi;
        if (i >= len || s[i] != '(' || (i++, !parse_i64(s, len, &i, &lo)) || i >= len ||
            s[i++] != ',' || !parse_i64(s, len, &i, &hi) || i >= len || s[i++] != ')' || i != len) {
            set_err(err, off, "expected $randomInt(MIN,MAX) with two 64-bit integers, got '%.*s'%s",
                    s, len, NULL);
            return -SQ_EPARSE;
        }
        if (lo > hi) {
            if (err) {
                err->offset = off;
                snprintf(err->msg, sizeof(err->msg),
                         "$randomInt: MIN %lld is greater than MAX %lld", (long long)lo,
                         (long long)hi);
            }
            return -SQ_EPARSE;
        }
        p.kind = P_RANDINT;
        p.lo = lo;
        p.hi = hi;
    } else if (len > 5 && memcmp(s, "$env.", 5) == 0) {
        char name[128];
        size_t nl = len - 5;
        bool ok = nl < sizeof(name);
        for (size_t i = 0; ok && i < nl; i++) {
            char c = s[5 + i];
            ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                 (i > 0 && c >= '0' && c <= '9');
        }
        if (!ok) {
            set_err(err, off + 5, "'%.*s' is not an environment variable name%s", s + 5, nl, NULL);
            return -SQ_EPARSE;
        }
        memcpy(name, s + 5, nl);
        name[nl] = '\0';
        const char *v = getenv(name);
        if (!v) {
            set_err(err, off, "environment variable '%.*s' is not set%s", name, nl, NULL);
            return -SQ_EPARSE;
        }
        return push_lit(bd, v, strlen(v), esc, true);
    } else {
        size_t base = 1;
        while (base < len && s[base] != '(' && s[base] != '.' && !is_space(s[base]))
            base++;
        const char *best = NULL;
        struct sq_suggest sg;
        sq_suggest_init(&sg, s, base);
        for (size_t i = 0; i < SQ_ARRAY_LEN(builtins); i++)
            if (sq_suggest_offer(&sg, builtins[i].name, strlen(builtins[i].name)))
                best = builtins[i].shown;
        char tail[64] = "";
        if (best)
            snprintf(tail, sizeof(tail), " (did you mean '%s'?)", best);
        set_err(err, off, "unknown built-in '%.*s'%s", s, len, tail);
        return -SQ_EPARSE;
    }
#undef IS
    return push_piece(bd, &p);
}

static bool name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

static int compile_name(struct builder *bd, const char *src, size_t off, size_t len,
                        enum sq_tmpl_escape esc, sq_tmpl_resolve_fn resolve, void *ud,
                        struct sq_tmpl_error *err)
{
    const char *s = src + off;
    for (size_t i = 0; i < len; i++) {
        if (!name_char(s[i])) {
            char c[2] = {s[i], 0};
            char shown[8];
            if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
                snprintf(shown, sizeof(shown), "\\x%02x", (unsigned char)s[i]);
            else
                snprintf(shown, sizeof(shown), "%s", c);
            if (err) {
                err->offset = off + i;
                snprintf(err->msg, sizeof(err->msg),
                         "invalid character '%s' in a name (names use letters, digits, '_', "
                         "'-' and '.')",
                         shown);
            }
            return -SQ_EPARSE;
        }
    }
    struct sq_tmpl_ref ref = {.kind = SQ_TMPL_REF_UNKNOWN};
    if (resolve)
        resolve(ud, s, len, &ref);
    struct piece p = {0};
    switch (ref.kind) {
    case SQ_TMPL_REF_STATIC:
        return push_lit(bd, ref.value ? ref.value : "", ref.value ? ref.value_len : 0, esc, true);
    case SQ_TMPL_REF_VAR:
        p.kind = P_VAR;
        p.a32 = ref.index;
        return push_piece(bd, &p);
    case SQ_TMPL_REF_FEED:
        p.kind = P_FEED;
        p.a32 = ref.feeder;
        p.b32 = ref.column;
        bd->uses_feeds = true;
        return push_piece(bd, &p);
    default:
        set_err(err, off, "unknown name '%.*s'%s", s, len, NULL);
        return -SQ_EPARSE;
    }
}

static void *find2(const char *s, size_t n, char c)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == c && s[i + 1] == c)
            return (void *)(s + i);
    return NULL;
}

static int finish(struct builder *bd, const char *src, size_t len, enum sq_tmpl_escape esc,
                  struct sq_tmpl **out)
{
    struct sq_tmpl *t = calloc(1, sizeof(*t));
    char *s = malloc(len + 1);
    int rc = sq_buf_append(&bd->text, "", 1); /* NUL, not counted */
    if (!t || !s || rc < 0) {
        free(t);
        free(s);
        return -ENOMEM;
    }
    memcpy(s, src, len);
    s[len] = '\0';
    t->esc = esc;
    t->pieces = bd->pieces;
    t->npieces = bd->n;
    t->text = bd->text.p;
    t->text_len = bd->text.len - 1;
    t->src = s;
    t->src_len = len;
    t->uses_feeds = bd->uses_feeds;
    t->uses_stamp = bd->uses_stamp;
    bd->pieces = NULL;
    bd->text.p = NULL;
    *out = t;
    return 0;
}

int sq_tmpl_compile(const char *src, size_t len, enum sq_tmpl_escape esc,
                    sq_tmpl_resolve_fn resolve, void *ud, struct sq_tmpl **out,
                    struct sq_tmpl_error *err)
{
    struct builder bd = {0};
    int rc = 0;
    size_t pos = 0;
    if (len > UINT32_MAX / 8) {
        set_err(err, 0, "template too long%.*s%s", "", 0, NULL);
        return -SQ_EPARSE;
    }
    while (pos < len) {
        const char *open = find2(src + pos, len - pos, '{');
        size_t lit_end = open ? (size_t)(open - src) : len;
        rc = push_lit(&bd, src + pos, lit_end - pos, esc, false);
        if (rc < 0 || !open)
            break;
        size_t in = lit_end + 2;
        const char *close = find2(src + in, len - in, '}');
        if (!close) {
            set_err(err, lit_end, "unclosed '{{' (expected '}}')%.*s%s", "", 0, NULL);
            rc = -SQ_EPARSE;
            break;
        }
        size_t in_end = (size_t)(close - src);
        size_t a = in, b = in_end;
        while (a < b && is_space(src[a]))
            a++;
        while (b > a && is_space(src[b - 1]))
            b--;
        if (a == b) {
            set_err(err, lit_end, "empty '{{ }}' (expected a name inside)%.*s%s", "", 0, NULL);
            rc = -SQ_EPARSE;
            break;
        }
        if (src[a] == '$')
            rc = compile_builtin(&bd, src, a, b - a, esc, resolve, ud, err);
        else
            rc = compile_name(&bd, src, a, b - a, esc, resolve, ud, err);
        if (rc < 0)
            break;
        pos = in_end + 2;
    }
    if (rc == 0)
        rc = finish(&bd, src, len, esc, out);
    free(bd.pieces);
    sq_buf_dispose(&bd.text);
    return rc;
}

int sq_tmpl_new_literal(const char *s, size_t len, struct sq_tmpl **out)
{
    struct builder bd = {0};
    int rc = push_lit(&bd, s, len, SQ_TMPL_ESC_NONE, false);
    if (rc == 0)
        rc = finish(&bd, s, len, SQ_TMPL_ESC_NONE, out);
    free(bd.pieces);
    sq_buf_dispose(&bd.text);
    return rc;
}

void sq_tmpl_free(struct sq_tmpl *t)
{
    if (!t)
        return;
    free(t->pieces);
    free(t->text);
    free(t->src);
    free(t);
}

const char *sq_tmpl_source(const struct sq_tmpl *t, size_t *len)
{
    if (len)
        *len = t->src_len;
    return t->src;
}

bool sq_tmpl_static(const struct sq_tmpl *t, const char **s, size_t *len)
{
    if (t->npieces > 1 || (t->npieces == 1 && t->pieces[0].kind != P_LIT))
        return false;
    if (s)
        *s = t->text;
    if (len)
        *len = t->text_len;
    return true;
}

bool sq_tmpl_uses_feeds(const struct sq_tmpl *t)
{
    return t->uses_feeds;
}

bool sq_tmpl_uses_stamp(const struct sq_tmpl *t)
{
    return t->uses_stamp;
}

/* ---- render ---- */

static uint64_t splitmix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t sq_tmpl_rng_init(uint64_t seed, uint64_t stream)
{
    /* two rounds: the seed's hash, then the stream folded in, so (seed, stream) and
     * (seed', stream') only meet by a 64-bit collision */
    uint64_t x = splitmix64(splitmix64(seed) ^ (stream * 0xD1B54A32D192ED03ull));
    return x ? x : 0x9E3779B97F4A7C15ull;
}

static uint64_t next_rand(uint64_t *state)
{
    uint64_t x = *state;
    if (x == 0)
        x = 0x9E3779B97F4A7C15ull; /* a zero state would stay zero */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

/* Uniform in [lo, hi] without modulo bias. */
static int64_t rand_range(uint64_t *state, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1; /* 0: the whole 64-bit range */
    uint64_t r = next_rand(state);
    if (span != 0) {
        uint64_t limit = UINT64_MAX - (UINT64_MAX % span + 1) % span;
        while (r > limit)
            r = next_rand(state);
        r %= span;
    }
    return (int64_t)((uint64_t)lo + r);
}

static size_t fmt_u64(char *buf, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

static size_t fmt_i64(char *buf, int64_t v)
{
    if (v < 0) {
        buf[0] = '-';
        return 1 + fmt_u64(buf + 1, 0 - (uint64_t)v);
    }
    return fmt_u64(buf, (uint64_t)v);
}

static size_t fmt_uuid(char *o, uint64_t *rng)
{
    unsigned char b[16];
    uint64_t h = next_rand(rng), l = next_rand(rng);
    for (int i = 0; i < 8; i++) {
        b[i] = (unsigned char)(h >> (56 - 8 * i));
        b[8 + i] = (unsigned char)(l >> (56 - 8 * i));
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    size_t n = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            o[n++] = '-';
        o[n++] = sq_hex_lower[b[i] >> 4];
        o[n++] = sq_hex_lower[b[i] & 15];
    }
    return n;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put2(char *o, unsigned v)
{
    o[0] = (char)('0' + v / 10 % 10);
    o[1] = (char)('0' + v % 10);
}

/* Milliseconds since the epoch as 2026-11-30T14:05:06.123Z (proleptic Gregorian, UTC; the
 * civil-from-days conversion on 400-year eras). */
static size_t fmt_iso(char *o, int64_t ms)
{
    int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    unsigned msec = (unsigned)(ms - secs * 1000);
    int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
    unsigned sod = (unsigned)(secs - days * 86400);
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    unsigned d = doy - (153 * mp + 2) / 5 + 1;
    unsigned m = mp < 10 ? mp + 3 : mp - 9;
    if (m <= 2)
        y++;
    if (y < 0 || y > 9999)
        y = y < 0 ? 0 : 9999;
    unsigned yy = (unsigned)y;
    put2(o, yy / 100);
    put2(o + 2, yy % 100);
    o[4] = '-';
    put2(o + 5, m);
    o[7] = '-';
    put2(o + 8, d);
    o[10] = 'T';
    put2(o + 11, sod / 3600);
    o[13] = ':';
    put2(o + 14, sod / 60 % 60);
    o[16] = ':';
    put2(o + 17, sod % 60);
    o[19] = '.';
    o[20] = (char)('0' + msec / 100);
    put2(o + 21, msec % 100);
    o[23] = 'Z';
    return 24;
}

int sq_tmpl_render(const struct sq_tmpl *t, const struct sq_tmpl_ctx *ctx, struct sq_buf *out)
{
    uint64_t fallback_rng = 0x2545F4914F6CDD1Dull;
    uint64_t *rng = ctx && ctx->rng ? ctx->rng : &fallback_rng;
    for (size_t i = 0; i < t->npieces; i++) {
        const struct piece *p = &t->pieces[i];
        char tmp[48];
        size_t n = 0;
        int rc = 0;
        switch (p->kind) {
        case P_LIT:
            rc = sq_buf_append(out, t->text + p->a32, p->b32);
            break;
        case P_VU:
            n = fmt_u64(tmp, ctx ? ctx->vu : 0);
            break;
        case P_ITER:
            n = fmt_u64(tmp, ctx ? ctx->iteration : 0);
            break;
        case P_UUID:
            n = fmt_uuid(tmp, rng);
            break;
        case P_RANDINT:
            n = fmt_i64(tmp, rand_range(rng, p->lo, p->hi));
            break;
        case P_TS:
            n = fmt_i64(tmp, wall_ms());
            break;
        case P_ISO:
            n = fmt_iso(tmp, wall_ms());
            break;
        case P_VAR:
            if (ctx && ctx->vars)
                rc = append_esc(out, t->esc, ctx->vars[p->a32].p, ctx->vars[p->a32].len);
            break;
        case P_STAMP:
            if (ctx && ctx->stamp)
                rc = sq_buf_append(out, ctx->stamp->p, ctx->stamp->len); /* [0-9a-z.] only */
            break;
        case P_FEED:
            if (ctx && ctx->rows && ctx->rows[p->a32]) {
                const struct sq_str *cell = &ctx->rows[p->a32][p->b32];
                rc = append_esc(out, t->esc, cell->p, cell->len);
            }
            break;
        case P_OAUTH:
            if (ctx && ctx->oauth) {
                const struct sq_str *tok = __atomic_load_n(&ctx->oauth->cur, __ATOMIC_ACQUIRE);
                if (tok)
                    rc = append_esc(out, t->esc, tok->p, tok->len);
            }
            break;
        }
        if (rc == 0 && n)
            rc = append_esc(out, t->esc, tmp, n);
        if (rc < 0)
            return rc;
    }
    return 0;
}
