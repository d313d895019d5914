/* plan/feeder.c - CSV (RFC 4180) and JSON feeders, loaded once before the run.
 *
 * Both parsers decode in place: the file is read into one buffer (f->text, len + 1 bytes) and
 * every decoded cell is written back into that buffer at or before the position it was read
 * from (an escape never decodes longer than it is written), so a cell is a span into f->text and
 * nothing else is allocated per cell. Every cell and column name is also NUL-terminated in
 * place (the terminator overwrites a byte that was already consumed). Column names point into
 * the text as well. See docs/internals/plan-data.md. */
#include "plan/feeder.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"
#include "base/text.h"
#include "plan/feeder_internal.h"
#include "plan/strmap.h"

/* A parser over t[0..len), t[len] == '\0'. */
struct parser {
    const char *path;
    char *t;
    size_t len;
    size_t r;          /* read position */
    size_t line;       /* 1-based line of r */
    size_t line_start; /* offset where that line starts (after a BOM on line 1) */
    size_t counted;    /* JSON: line and line_start count the newlines before this offset */
    char *err;
    size_t errlen;
    struct sq_str *cells;
    size_t ncells, capcells;
    /* columns: names point into t (NUL-terminated), with lengths */
    char **cols;
    size_t *col_lens;
    size_t *col_row; /* JSON: the last row (+1) that set the column, to catch duplicate keys */
    size_t ncols, capcols;
    struct sq_plan__map colmap; /* name -> column: a file of many columns parses in linear time */
};

struct pos {
    size_t line, col;
};

static struct pos here(const struct parser *p)
{
    return (struct pos){p->line, p->r - p->line_start + 1};
}

/* "path:line:col: message" (at.line 0: "path: message") into p->err. Returns rc. */
__attribute__((format(printf, 4, 0))) static int verr(struct parser *p, struct pos at, int rc,
                                                      const char *fmt, va_list ap)
{
    if (p->err && p->errlen) {
        int n = at.line ? snprintf(p->err, p->errlen, "%s:%zu:%zu: ", p->path, at.line, at.col)
                        : snprintf(p->err, p->errlen, "%s: ", p->path);
        if (n >= 0 && (size_t)n < p->errlen)
            vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    }
    return rc;
}

__attribute__((format(printf, 4, 5))) static int perr(struct parser *p, struct pos at, int rc,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rc = verr(p, at, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* An error about the whole file (no position). */
__attribute__((format(printf, 3, 4))) static int ferr(struct parser *p, int rc, const char *fmt,
                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    rc = verr(p, (struct pos){0, 0}, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* Grows *arr (elements of size sz) to hold one more than *n. */
static int grow(void **arr, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    if (ncap < *cap || ncap > ((size_t)-1) / sz)
        return -ENOMEM;
    void *a = realloc(*arr, ncap * sz);
    if (!a)
        return -ENOMEM;
    *arr = a;
    *cap = ncap;
    return 0;
}

static int add_cell(struct parser *p, const char *s, size_t len)
{
    void *a = p->cells;
    if (grow(&a, &p->capcells, p->ncells, sizeof(*p->cells)) < 0)
        return -ENOMEM;
    p->cells = a;
    p->cells[p->ncells++] = (struct sq_str){s, len};
    return 0;
}

static int add_col(struct parser *p, char *name, size_t len)
{
    if (p->ncols == p->capcols) {
        size_t cap = p->capcols;
        void *a = p->cols;
        if (grow(&a, &cap, p->ncols, sizeof(*p->cols)) < 0)
            return -ENOMEM;
        p->cols = a;
        cap = p->capcols;
        a = p->col_lens;
        if (grow(&a, &cap, p->ncols, sizeof(*p->col_lens)) < 0)
            return -ENOMEM;
        p->col_lens = a;
        cap = p->capcols;
        a = p->col_row;
        if (grow(&a, &cap, p->ncols, sizeof(*p->col_row)) < 0)
            return -ENOMEM;
        p->col_row = a;
        p->capcols = cap;
    }
    if (sq_plan__map_add(&p->colmap, name, len, p->ncols, NULL) < 0)
        return -ENOMEM;
    p->cols[p->ncols] = name;
    p->col_lens[p->ncols] = len;
    p->col_row[p->ncols] = 0;
    p->ncols++;
    return 0;
}

static void parser_dispose(struct parser *p)
{
    free(p->cells);
    free(p->cols);
    free(p->col_lens);
    free(p->col_row);
    sq_plan__map_dispose(&p->colmap);
    free(p->t);
}

/* Hands the parsed text, columns and cells over to a new feeder. */
static int finish(struct parser *p, size_t nrows, struct sq_feeder **out)
{
    struct sq_feeder *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->columns = p->cols;
    f->ncolumns = p->ncols;
    f->nrows = nrows;
    f->cells = p->cells;
    f->text = p->t;
    p->cols = NULL;
    p->cells = NULL;
    p->t = NULL;
    *out = f;
    return 0;
}

/* Quotes a byte for a message. */
static const char *show(char c, char buf[8])
{
    if (c == '\n')
        return "end of line";
    if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
        snprintf(buf, 8, "0x%02x", (unsigned char)c);
    else
        snprintf(buf, 8, "'%c'", c);
    return buf;
}

/* A name for a message: at most 60 bytes, control bytes as \xNN, "..." when cut. */
static const char *printable(const char *s, size_t len, char out[256])
{
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        if (i == 60) {
            memcpy(out + w, "...", 3);
            w += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) {
            snprintf(out + w, 5, "\\x%02x", c);
            w += 4;
        } else {
            out[w++] = (char)c;
        }
    }
    out[w] = '\0';
    return out;
}

/* ---- CSV ---- */

/* Parses one record starting at p->r. The fields are appended to the cells unless more than
 * want (0: any number); *nfields gets the count. Decoded bytes go to t[*w...]. header: empty or
 * duplicate names are errors. */
static int csv_record(struct parser *p, size_t *w, size_t want, bool header, size_t *nfields)
{
    char *t = p->t;
    size_t nf = 0;
    struct pos extra = {0, 0};
    for (;;) {
        struct pos fs = here(p);
        size_t w0 = *w;
        char cb[8];
        if (p->r < p->len && t[p->r] == '"') {
            p->r++;
            for (;;) {
                if (p->r >= p->len)
                    return perr(p, fs, -SQ_EPARSE,
                                "unterminated quoted field (no closing '\"' before the end)");
                char c = t[p->r];
                if (c == '"') {
                    if (p->r + 1 < p->len && t[p->r + 1] == '"') {
                        t[(*w)++] = '"';
                        p->r += 2;
                        continue;
                    }
                    p->r++;
                    break;
                }
                if (c == '\0')
                    return perr(p, here(p), -SQ_EPARSE, "NUL byte in a field");
                t[(*w)++] = c;
                p->r++;
                if (c == '\n') {
                    p->line++;
                    p->line_start = p->r;
                }
            }
            if (p->r < p->len && t[p->r] != ',' && t[p->r] != '\n' &&
                !(t[p->r] == '\r' && p->r + 1 < p->len && t[p->r + 1] == '\n'))
                return perr(p, here(p), -SQ_EPARSE,
                            "unexpected %s after a closing quote (expected ',' or the end of "
                            "the line)",
                            show(t[p->r], cb));
        } else {
            while (p->r < p->len) {
                char c = t[p->r];
                if (c == ',' || c == '\n')
                    break;
                if (c == '\r') {
                    if (p->r + 1 < p->len && t[p->r + 1] == '\n')
                        break;
                    return perr(p, here(p), -SQ_EPARSE, "CR not followed by LF");
                }
                if (c == '"')
                    return perr(p, here(p), -SQ_EPARSE,
                                "'\"' in an unquoted field (quote the whole field and write "
                                "the quote as \"\")");
                if (c == '\0')
                    return perr(p, here(p), -SQ_EPARSE, "NUL byte in a field");
                t[(*w)++] = c;
                p->r++;
            }
        }
        size_t flen = *w - w0;
        nf++;
        if (header) {
            char nb[256];
            if (flen == 0)
                return perr(p, fs, -SQ_EPARSE, "empty column name (column %zu)", nf);
            uintptr_t k;
            if (sq_plan__map_get(&p->colmap, t + w0, flen, &k))
                return perr(p, fs, -SQ_EPARSE,
                            "duplicate column name '%s' (column %zu, first as column %zu)",
                            printable(t + w0, flen, nb), nf, (size_t)k + 1);
        }
        if (want && nf == want + 1)
            extra = fs;
        /* The separator: consume it, then terminate the field (w < r now). */
        struct pos end = here(p);
        bool more = false;
        if (p->r < p->len) {
            if (t[p->r] == ',') {
                more = true;
                p->r++;
            } else {
                p->r += t[p->r] == '\r' ? 2 : 1;
                p->line++;
                p->line_start = p->r;
            }
        }
        t[*w] = '\0';
        if (!want || nf <= want) {
            int rc = header ? add_col(p, t + w0, flen) : add_cell(p, t + w0, flen);
            if (rc < 0)
                return ferr(p, rc, "out of memory");
        }
        (*w)++;
        if (!more) {
            if (want && nf > want)
                return perr(p, extra, -SQ_EPARSE, "row has %zu fields, the header has %zu", nf,
                            want);
            if (want && nf < want)
                return perr(p, end, -SQ_EPARSE, "row has %zu field%s, the header has %zu", nf,
                            nf == 1 ? "" : "s", want);
            *nfields = nf;
            return 0;
        }
    }
}

/* Skips empty lines at p->r. */
static void csv_skip_blank(struct parser *p)
{
    for (;;) {
        if (p->r < p->len && p->t[p->r] == '\n')
            p->r++;
        else if (p->r + 1 < p->len && p->t[p->r] == '\r' && p->t[p->r + 1] == '\n')
            p->r += 2;
        else
            return;
        p->line++;
        p->line_start = p->r;
    }
}

static int parse_csv(struct parser *p, struct sq_feeder **out)
{
    size_t w = p->r; /* the write position trails the read position */
    csv_skip_blank(p);
    if (p->r >= p->len)
        return perr(p, here(p), -SQ_EPARSE, "empty file (expected a header row)");
    size_t ncols;
    int rc = csv_record(p, &w, 0, true, &ncols);
    if (rc < 0)
        return rc;
    size_t nrows = 0;
    for (;;) {
        csv_skip_blank(p);
        if (p->r >= p->len)
            break;
        size_t nf;
        rc = csv_record(p, &w, ncols, false, &nf);
        if (rc < 0)
            return rc;
        nrows++;
    }
    if (!nrows)
        return perr(p, here(p), -SQ_EPARSE, "no data rows after the header");
    return finish(p, nrows, out);
}

/* ---- JSON ---- */

/* The JSON feeder reads with base/json's walker, strings checked strictly (no lone surrogate, no
 * \u0000), and words each error itself: it peeks at the byte the shape of a feeder wants next
 * before it asks the walker for a token, so the walker's own errors are only the faults inside
 * a token (a string, a number, a literal). Offsets become line:col through json_at. */

/* line:col of t[off], counting the newlines between the last offset counted and off. Offsets
 * asked for only grow, but for ones inside the last token counted (no token spans a line). The
 * text behind the count may be decoded over: count past a token before decoding it. */
static struct pos json_at(struct parser *p, size_t off)
{
    while (p->counted < off) {
        const char *nl = memchr(p->t + p->counted, '\n', off - p->counted);
        if (!nl) {
            p->counted = off;
            break;
        }
        p->counted = (size_t)(nl - p->t) + 1;
        p->line++;
        p->line_start = p->counted;
    }
    return (struct pos){p->line, off - p->line_start + 1};
}

/* The message for a fault the walker found inside a token. */
static int json_token_error(struct parser *p, const struct sq_json_walk *w, size_t base)
{
    size_t off = base + w->err_at;
    struct pos at = json_at(p, off);
    const char *e = p->t + off;
    char cb[8];
    unsigned u = 0;
    if (w->err == SQ_JSON_E_LONE_LOW || w->err == SQ_JSON_E_LONE_HIGH)
        for (int k = 2; k < 6; k++) /* the walker read \uXXXX there */
            u = u << 4 | (unsigned)sq_hex_value((unsigned char)e[k]);
    switch (w->err) {
    case SQ_JSON_E_STRING_END:
        return perr(p, at, -SQ_EPARSE, "unterminated string");
    case SQ_JSON_E_CONTROL:
        return perr(p, at, -SQ_EPARSE, "control character 0x%02x in a string (escape it)",
                    (unsigned char)*e);
    case SQ_JSON_E_ESCAPE:
        return perr(p, at, -SQ_EPARSE, "invalid escape '\\' followed by %s", show(e[1], cb));
    case SQ_JSON_E_HEX:
        return perr(p, at, -SQ_EPARSE, "'\\u' must be followed by 4 hex digits");
    case SQ_JSON_E_LONE_LOW:
        return perr(p, at, -SQ_EPARSE, "lone low surrogate \\u%04X", u);
    case SQ_JSON_E_LONE_HIGH:
        return perr(p, at, -SQ_EPARSE, "high surrogate \\u%04X not followed by a low surrogate", u);
    case SQ_JSON_E_NUL:
        return perr(p, at, -SQ_EPARSE, "\\u0000 is not allowed in a feeder");
    case SQ_JSON_E_NUMBER:
        return perr(p, at, -SQ_EPARSE, "malformed number");
    default: /* not true, false or null; a byte no value starts with */
        return perr(p, at, -SQ_EPARSE, "expected a value (string, number, true, false or null)");
    }
}

/* The string or key token t decoded in place over itself (from its opening quote on) and
 * NUL-terminated (at most over its closing quote). */
static int json_string(struct parser *p, const struct sq_json_tok *t, size_t base,
                       struct sq_str *out)
{
    char *s = p->t + base + t->at;
    size_t n;
    json_at(p, base + t->at + t->len); /* count past it before decoding over it */
    if (sq_json_unescape(s + 1, t->len - 2, s, &n, NULL) < 0) /* the strict walk took it: never */
        return perr(p, json_at(p, base + t->at), -SQ_EPARSE, "malformed string");
    s[n] = '\0';
    *out = (struct sq_str){s, n};
    return 0;
}

/* A number or literal token t, kept as written: moved one byte left (over the consumed ':' or
 * whitespace before it) so that it can be NUL-terminated; null is the empty cell. */
static void json_scalar(struct parser *p, const struct sq_json_tok *t, size_t base,
                        struct sq_str *out)
{
    char *s = p->t + base + t->at;
    if (t->type == SQ_JSON_T_NULL) {
        *out = (struct sq_str){p->t + p->len, 0};
        return;
    }
    json_at(p, base + t->at + t->len); /* the byte before it may be a newline */
    memmove(s - 1, s, t->len);
    s[t->len - 1] = '\0';
    *out = (struct sq_str){s - 1, t->len};
}

/* After a value in a container: takes a ',' (1: more follow) or the container's closer (0);
 * -1 for anything else, *c the byte found there (-1: the end), for the caller to word. */
static int json_more(struct sq_json_walk *w, char closer, int *c)
{
    struct sq_json_tok t;
    *c = sq_json_peek(w);
    if (*c == ',')
        return sq_json_sep(w) < 0 ? -1 : 1;
    if (*c == closer)
        return sq_json_next(w, &t) < 0 ? -1 : 0;
    return -1;
}

/* Column index of a key, adding a new column when unseen. hint: the key's position in its
 * object, the usual column. */
static int json_column(struct parser *p, struct sq_str key, size_t hint, size_t *idx)
{
    if (hint < p->ncols && p->col_lens[hint] == key.len &&
        memcmp(p->cols[hint], key.p, key.len) == 0) {
        *idx = hint;
        return 0;
    }
    uintptr_t k;
    if (sq_plan__map_get(&p->colmap, key.p, key.len, &k)) {
        *idx = k;
        return 0;
    }
    *idx = p->ncols;
    return add_col(p, (char *)key.p, key.len);
}

/* One (row, column, value) triple, until the matrix can be laid out. */
struct triple {
    size_t row, col;
    struct sq_str v;
};

static int parse_json(struct parser *p, struct sq_feeder **out)
{
    char *t = p->t;
    char cb[8], nb[256];
    struct triple *tr = NULL;
    size_t ntr = 0, captr = 0, nrows = 0, base = p->r; /* after a BOM */
    struct sq_json_walk w;
    struct sq_json_tok tok;
    int rc, c;

    p->counted = base;
    sq_json_walk_init(&w, t + base, p->len - base, 2, SQ_JSON_SURROGATES | SQ_JSON_NO_NUL);
#define HERE()     json_at(p, base + w.pos) /* after sq_json_peek: the byte it showed */
#define TAKE(call) /* the walker's faults are inside a token: its message */                       \
    do {                                                                                           \
        if ((call) < 0) {                                                                          \
            rc = json_token_error(p, &w, base);                                                    \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
#define NEXT() TAKE(sq_json_next(&w, &tok))
#define SEP()  TAKE(sq_json_sep(&w))
    /* What NEXT and SEP are asked for has been peeked at: they fail only inside a token. */

    c = sq_json_peek(&w);
    if (c < 0) {
        rc = perr(p, HERE(), -SQ_EPARSE, "empty file (expected a JSON array of objects)");
        goto fail;
    }
    if (c != '[') {
        rc = perr(p, HERE(), -SQ_EPARSE, "expected '[' (a top-level array of objects), found %s",
                  show((char)c, cb));
        goto fail;
    }
    NEXT();
    if (sq_json_peek(&w) == ']') {
        rc = perr(p, HERE(), -SQ_EPARSE, "empty array (expected at least one object)");
        goto fail;
    }
    for (;;) {
        c = sq_json_peek(&w);
        if (c < 0) {
            rc = perr(p, HERE(), -SQ_EPARSE,
                      "unexpected end (expected an object for row index "
                      "%zu)",
                      nrows);
            goto fail;
        }
        if (c != '{') {
            rc = perr(p, HERE(), -SQ_EPARSE, "row index %zu is not an object (found %s)", nrows,
                      show((char)c, cb));
            goto fail;
        }
        NEXT();
        if (sq_json_peek(&w) == '}') {
            NEXT();
        } else {
            for (size_t nkey = 0;; nkey++) {
                if (sq_json_peek(&w) != '"') {
                    rc = perr(p, HERE(), -SQ_EPARSE, "expected a key string in row index %zu",
                              nrows);
                    goto fail;
                }
                struct pos kpos = HERE();
                struct sq_str key = {0}, val = {0};
                NEXT();
                if ((rc = json_string(p, &tok, base, &key)) < 0)
                    goto fail;
                if (key.len == 0) {
                    rc = perr(p, kpos, -SQ_EPARSE, "row index %zu: empty key", nrows);
                    goto fail;
                }
                if (sq_json_peek(&w) != ':') {
                    rc = perr(p, HERE(), -SQ_EPARSE, "expected ':' after key '%s'",
                              printable(key.p, key.len, nb));
                    goto fail;
                }
                SEP();
                c = sq_json_peek(&w);
                if (c < 0) {
                    rc = perr(p, HERE(), -SQ_EPARSE, "unexpected end (expected a value)");
                    goto fail;
                }
                if (c == '{' || c == '[') {
                    rc = perr(p, HERE(), -SQ_EPARSE,
                              "row index %zu, key '%s': nested %s not allowed (values are "
                              "strings, numbers, booleans or null)",
                              nrows, printable(key.p, key.len, nb), c == '{' ? "object" : "array");
                    goto fail;
                }
                NEXT();
                if (tok.type == SQ_JSON_T_STR) {
                    if ((rc = json_string(p, &tok, base, &val)) < 0)
                        goto fail;
                } else {
                    json_scalar(p, &tok, base, &val);
                }
                size_t col;
                if (json_column(p, key, nkey, &col) < 0) {
                    rc = ferr(p, -ENOMEM, "out of memory");
                    goto fail;
                }
                if (p->col_row[col] == nrows + 1) {
                    rc = perr(p, kpos, -SQ_EPARSE, "row index %zu: duplicate key '%s'", nrows,
                              printable(key.p, key.len, nb));
                    goto fail;
                }
                p->col_row[col] = nrows + 1;
                void *a = tr;
                if (grow(&a, &captr, ntr, sizeof(*tr)) < 0) {
                    rc = ferr(p, -ENOMEM, "out of memory");
                    goto fail;
                }
                tr = a;
                tr[ntr++] = (struct triple){nrows, col, val};
                int more = json_more(&w, '}', &c);
                if (more > 0)
                    continue;
                if (more == 0)
                    break;
                rc = perr(p, HERE(), -SQ_EPARSE, "expected ',' or '}' in row index %zu, found %s",
                          nrows, c >= 0 ? show((char)c, cb) : "the end");
                goto fail;
            }
        }
        nrows++;
        int more = json_more(&w, ']', &c);
        if (more > 0)
            continue;
        if (more == 0)
            break;
        rc = perr(p, HERE(), -SQ_EPARSE, "expected ',' or ']' after row index %zu, found %s",
                  nrows - 1, c >= 0 ? show((char)c, cb) : "the end");
        goto fail;
    }
    c = sq_json_peek(&w);
    if (c >= 0) {
        rc = perr(p, HERE(), -SQ_EPARSE, "unexpected %s after the array", show((char)c, cb));
        goto fail;
    }
#undef HERE
#undef TAKE
#undef NEXT
#undef SEP
    if (!p->ncols) {
        rc = ferr(p, -SQ_EPARSE, "no keys in any object (no columns)");
        goto fail;
    }
    if (nrows > ((size_t)-1) / sizeof(struct sq_str) / p->ncols) {
        rc = ferr(p, -ENOMEM, "out of memory");
        goto fail;
    }
    free(p->cells);
    p->cells = malloc(nrows * p->ncols * sizeof(struct sq_str));
    if (!p->cells) {
        rc = ferr(p, -ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t k = 0; k < nrows * p->ncols; k++)
        p->cells[k] = (struct sq_str){t + p->len, 0};
    for (size_t k = 0; k < ntr; k++)
        p->cells[tr[k].row * p->ncols + tr[k].col] = tr[k].v;
    free(tr);
    return finish(p, nrows, out);
fail:
    free(tr);
    return rc;
}

/* ---- loading ---- */

/* Sets up a parser over a copy of data (len + 1 bytes, NUL-terminated); skips a UTF-8 BOM. */
static int parser_init(struct parser *p, const char *path, const char *data, size_t len, char *err,
                       size_t errlen)
{
    memset(p, 0, sizeof(*p));
    p->path = path ? path : "(feeder)";
    p->err = err;
    p->errlen = errlen;
    p->line = 1;
    if (err && errlen)
        err[0] = '\0';
    if (len > SQ_FEEDER_MAX_BYTES)
        return ferr(p, -SQ_ETOOBIG, "file is over %zu MiB", SQ_FEEDER_MAX_BYTES >> 20);
    p->t = malloc(len + 1);
    if (!p->t)
        return ferr(p, -ENOMEM, "out of memory");
    if (len)
        memcpy(p->t, data, len);
    p->t[len] = '\0';
    p->len = len;
    if (len >= 3 && memcmp(p->t, "\xEF\xBB\xBF", 3) == 0)
        p->r = p->line_start = 3;
    return 0;
}

typedef int (*parse_fn)(struct parser *p, struct sq_feeder **out);

/* Parses a copy of data with fn. */
static int parse_copy(const char *path, const char *data, size_t len, parse_fn fn,
                      struct sq_feeder **out, char *err, size_t errlen)
{
    struct parser p;
    *out = NULL;
    int rc = parser_init(&p, path, data, len, err, errlen);
    if (rc == 0)
        rc = fn(&p, out);
    parser_dispose(&p);
    return rc;
}

int sq_feeder__parse_csv(const char *path, const char *data, size_t len, struct sq_feeder **out,
                         char *err, size_t errlen)
{
    return parse_copy(path, data, len, parse_csv, out, err, errlen);
}

int sq_feeder__parse_json(const char *path, const char *data, size_t len, struct sq_feeder **out,
                          char *err, size_t errlen)
{
    return parse_copy(path, data, len, parse_json, out, err, errlen);
}

/* Reads the whole file into a malloc'd buffer. */
static int read_file(const char *path, char **data, size_t *len, char *err, size_t errlen)
{
    *data = NULL;
    *len = 0;
    if (err && errlen)
        err[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    size_t cap = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        cap = (size_t)st.st_size + 1;
    if (cap < 4096)
        cap = 4096;
    char *buf = NULL;
    size_t n = 0;
    int rc = 0;
    for (;;) {
        if (n == cap || !buf) {
            if (buf)
                cap *= 2;
            if (cap > SQ_FEEDER_MAX_BYTES + 1)
                cap = SQ_FEEDER_MAX_BYTES + 1;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = -ENOMEM;
                if (err && errlen)
                    snprintf(err, errlen, "%s: out of memory", path);
                break;
            }
            buf = nb;
        }
        if (n == cap) {
            rc = -SQ_ETOOBIG;
            if (err && errlen)
                snprintf(err, errlen, "%s: file is over %zu MiB", path, SQ_FEEDER_MAX_BYTES >> 20);
            break;
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            if (err && errlen)
                snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
            break;
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *data = buf;
    *len = n;
    return 0;
}

static int load(const char *path, parse_fn fn, struct sq_feeder **out, char *err, size_t errlen)
{
    *out = NULL;
    char *data;
    size_t len;
    int rc = read_file(path, &data, &len, err, errlen);
    if (rc < 0)
        return rc;
    /* Parse in the read buffer itself: no second copy of a large file. */
    struct parser p;
    memset(&p, 0, sizeof(p));
    p.path = path;
    p.err = err;
    p.errlen = errlen;
    p.line = 1;
    char *t = realloc(data, len + 1);
    if (!t) {
        free(data);
        return ferr(&p, -ENOMEM, "out of memory");
    }
    t[len] = '\0';
    p.t = t;
    p.len = len;
    if (len >= 3 && memcmp(t, "\xEF\xBB\xBF", 3) == 0)
        p.r = p.line_start = 3;
    rc = fn(&p, out);
    parser_dispose(&p);
    return rc;
}

int sq_feeder_load_csv(const char *path, struct sq_feeder **out, char *err, size_t errlen)
{
    return load(path, parse_csv, out, err, errlen);
}

int sq_feeder_load_json(const char *path, struct sq_feeder **out, char *err, size_t errlen)
{
    return load(path, parse_json, out, err, errlen);
}

void sq_feeder_free(struct sq_feeder *f)
{
    if (!f)
        return;
    free(f->columns); /* the names point into text */
    free(f->cells);
    free(f->text);
    free(f);
}

int sq_feeder_column(const struct sq_feeder *f, const char *name, size_t len)
{
    for (size_t k = 0; k < f->ncolumns; k++)
        if (strlen(f->columns[k]) == len && memcmp(f->columns[k], name, len) == 0)
            return k > (size_t)INT32_MAX ? -1 : (int)k;
    return -1;
}

const struct sq_str *sq_feeder_row(struct sq_feeder *f, enum sq_feed_mode mode, uint64_t vu,
                                   uint64_t *rng)
{
    uint64_t i = 0;
    switch (mode) {
    case SQ_FEED_SEQUENTIAL:
        i = __atomic_fetch_add(&f->cursor, 1, __ATOMIC_RELAXED) % f->nrows;
        break;
    case SQ_FEED_PER_VU:
        i = (vu - 1) % f->nrows;
        break;
    case SQ_FEED_RANDOM: {
        uint64_t x = *rng ? *rng : 0x9E3779B97F4A7C15ull; /* 0 is xorshift's fixed point */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *rng = x;
        i = x % f->nrows; /* modulo bias: under nrows / 2^64, negligible */
        break;
    }
    }
    return f->cells + i * f->ncolumns;
}

/* One block: the column names (NUL-terminated) then the cells' bytes; columns and cells are
 * re-pointed into it. */
static int row_text(struct sq_feeder *f, char *const *names, const struct sq_str *vals)
{
    size_t need = 1;
    for (size_t k = 0; k < f->ncolumns; k++)
        need += strlen(names[k]) + 1 + (vals ? vals[k].len : 0);
    char *t = malloc(need), *at = t;
    if (!t)
        return -ENOMEM;
    char **cols = malloc(f->ncolumns * sizeof(*cols));
    if (!cols) {
        free(t);
        return -ENOMEM;
    }
    for (size_t k = 0; k < f->ncolumns; k++) {
        size_t n = strlen(names[k]) + 1;
        memcpy(at, names[k], n);
        cols[k] = at;
        at += n;
    }
    for (size_t k = 0; k < f->ncolumns; k++) {
        size_t n = vals ? vals[k].len : 0;
        if (n)
            memcpy(at, vals[k].p, n);
        f->cells[k] = (struct sq_str){at, n};
        at += n;
    }
    *at = '\0';
    free(f->columns);
    free(f->text);
    f->columns = cols;
    f->text = t;
    return 0;
}

int sq_feeder_new_row(char *const *columns, size_t ncolumns, struct sq_feeder **out)
{
    struct sq_feeder *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->ncolumns = ncolumns;
    f->nrows = 1;
    f->cells = calloc(ncolumns ? ncolumns : 1, sizeof(*f->cells));
    if (!f->cells || row_text(f, columns, NULL) < 0) {
        sq_feeder_free(f);
        return -ENOMEM;
    }
    *out = f;
    return 0;
}

int sq_feeder_set_row(struct sq_feeder *f, const struct sq_str *vals)
{
    return row_text(f, f->columns, vals);
}
