/* face/urllist.c - the --urls list parser (see urllist.h). Line by line, one pass: split the
 * line into its first fields, ask the request serialiser whether the method is a token (so the
 * check and the request cannot disagree), the URL parser whether the URL is one, and compare its
 * origin with the first line's. Every refusal names the line and the column. */
#include "face/urllist.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "face/flags.h"

static bool blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

static int fail(char *err, size_t errlen, const char *name, uint32_t line, size_t col,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int fail(char *err, size_t errlen, const char *name, uint32_t line, size_t col,
                const char *fmt, ...)
{
    int n = snprintf(err, errlen, "%s:%u:%zu: ", name, line, col);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -SQ_EPARSE;
}

/* A method written in lower case that is a well-known one in upper case: its upper-case form in
 * up (for the hint), else false. Methods are case-sensitive (RFC 9110 9.1). */
static bool known_in_upper(const char *m, char *up, size_t len)
{
    static const char *const known[] = {"GET",    "HEAD",    "POST",  "PUT",
                                        "DELETE", "OPTIONS", "PATCH", "TRACE"};
    size_t n = strlen(m);
    if (n >= len)
        return false;
    bool lower = false;
    for (size_t i = 0; i <= n; i++) {
        char ch = m[i];
        lower |= ch >= 'a' && ch <= 'z';
        up[i] = (char)(ch >= 'a' && ch <= 'z' ? ch - 32 : ch);
    }
    if (!lower)
        return false;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(up, known[i]) == 0)
            return true;
    return false;
}

void sq_urllist_dispose(struct sq_urllist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        struct sq_urllist_entry *e = &l->v[i];
        free(e->method);
        free(e->url);
        free(e->body);
        free(e->body_file);
        for (size_t h = 0; h < e->nheaders; h++)
            sq_header_arg_dispose(&e->headers[h]);
        free(e->headers);
        sq_url_dispose(&e->u);
    }
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* A line's first two fields (blank-separated, from line[0, len)): where each starts, its length,
 * and a copy of each in tok. Returns how many (0..2), or -SQ_EPARSE for one too long. */
static int first_fields(const char *name, uint32_t lineno, const char *line, size_t len,
                        size_t col0, const char *f[2], size_t fl[2], char tok[2][2048], char *err,
                        size_t errlen)
{
    size_t nf = 0, at = 0;
    while (nf < 2 && at < len) {
        while (at < len && blank(line[at]))
            at++;
        if (at == len)
            break;
        f[nf] = line + at;
        while (at < len && !blank(line[at]))
            at++;
        fl[nf] = (size_t)(line + at - f[nf]);
        nf++;
    }
    for (size_t i = 0; i < nf; i++) {
        if (fl[i] >= sizeof(tok[i]))
            return fail(err, errlen, name, lineno, col0 + (size_t)(f[i] - line),
                        "a field longer than %zu bytes", sizeof(tok[i]) - 1);
        memcpy(tok[i], f[i], fl[i]);
        tok[i][fl[i]] = '\0';
    }
    return (int)nf;
}

/* Every URL of a list has the first one's scheme; http:// URLs may name several hosts (each
 * connection then goes to one of them), https:// ones one host (one TLS client). Returns 0 or
 * -SQ_EPARSE naming the line and column (col) of url, whose parsed form is u. */
static int same_origin(const struct sq_urllist *out, const struct sq_url *u, const char *url,
                       const char *name, uint32_t lineno, size_t col, char *err, size_t errlen)
{
    if (out->n == 0)
        return 0;
    const struct sq_url *u0 = &out->v[0].u;
    bool same = strcmp(u0->host, u->host) == 0 && u0->port == u->port;
    if (strcmp(u0->scheme, u->scheme) == 0 && (same || strcmp(u->scheme, "http") == 0))
        return 0;
    return fail(err, errlen, name, lineno, col,
                "'%s' is on %s://%s:%u, not on %s://%s:%u like line %u: %s; run the other "
                "origin separately",
                url, u->scheme, u->host, u->port, u0->scheme, u0->host, u0->port, out->v[0].line,
                strcmp(u0->scheme, u->scheme) != 0
                    ? "every URL of a run has one scheme"
                    : "https:// URLs of a run share one host and port (http:// ones may name "
                      "several)");
}

/* The entry's body from the rest of the line, b..end (not empty, not a lone '@'): @PATH names
 * a file, anything else is the body itself. Returns 0 or -ENOMEM. */
static int take_body(struct sq_urllist_entry *e, const char *b, const char *end)
{
    if (*b == '@') {
        e->body_file = strndup(b + 1, (size_t)(end - b - 1));
        return e->body_file ? 0 : -ENOMEM;
    }
    e->body_len = (size_t)(end - b);
    if (!(e->body = malloc(e->body_len + 1)))
        return -ENOMEM;
    memcpy(e->body, b, e->body_len);
    e->body[e->body_len] = '\0';
    return 0;
}

/* One line with a request: fields at line[0, len), which starts with a non-blank byte. */
static int parse_line(const char *name, uint32_t lineno, const char *line, size_t len, size_t col0,
                      struct sq_urllist *out, char *err, size_t errlen)
{
    const char *f[2];
    size_t fl[2];
    char tok[2][2048];
    int n = first_fields(name, lineno, line, len, col0, f, fl, tok, err, errlen);
    if (n < 0)
        return n;
    size_t nf = (size_t)n;
    struct sq_urllist_entry e = {.line = lineno};
    size_t ui = 0; /* the URL's field: 1 when a method comes first */
    bool has_scheme = strstr(tok[0], "://") != NULL;
    /* a method is a token without a dot ("example.com/x" is a URL missing its scheme) */
    if (!has_scheme && nf == 2 && sq_flag_method_ok(tok[0]) && !strchr(tok[0], '.')) {
        char up[16];
        if (known_in_upper(tok[0], up, sizeof(up)))
            return fail(err, errlen, name, lineno, col0,
                        "'%s' is not a method: methods are case-sensitive (did you mean '%s'?)",
                        tok[0], up);
        ui = 1;
    } else if (!has_scheme && nf == 1 && sq_flag_method_ok(tok[0]) && !strchr(tok[0], '.')) {
        return fail(err, errlen, name, lineno, col0 + fl[0], "a URL must follow the method '%s'",
                    tok[0]);
    }
    const char *why = NULL;
    size_t ucol = col0 + (size_t)(f[ui] - line);
    int rc = sq_url_parse(tok[ui], &e.u, &why);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0) {
        if (!strstr(tok[ui], "://"))
            return fail(err, errlen, name, lineno, ucol,
                        "'%s' is not a URL: it has no scheme (did you mean http://%s?)", tok[ui],
                        tok[ui]);
        return fail(err, errlen, name, lineno, ucol, "'%s' is not a URL: %s", tok[ui],
                    why ? why : sq_strerror(rc));
    }
    rc = same_origin(out, &e.u, tok[ui], name, lineno, ucol, err, errlen);
    if (rc == 0 && out->n == SQ_URLLIST_MAX)
        rc = fail(err, errlen, name, lineno, col0, "more than %d URLs in one list", SQ_URLLIST_MAX);
    if (rc < 0) {
        sq_url_dispose(&e.u);
        return rc;
    }
    /* the body: the rest of the line after the URL */
    const char *b = f[ui] + fl[ui];
    const char *end = line + len;
    while (b < end && blank(*b))
        b++;
    while (end > b && (blank(end[-1]) || end[-1] == '\r'))
        end--;
    if (ui == 1 && !(e.method = strdup(tok[0])))
        rc = -ENOMEM;
    if (rc == 0 && !(e.url = strdup(tok[ui])))
        rc = -ENOMEM;
    if (rc == 0 && end - b == 1 && *b == '@')
        rc = fail(err, errlen, name, lineno, col0 + (size_t)(b - line),
                  "'@' names no file (@PATH reads the body from PATH)");
    else if (rc == 0 && b < end)
        rc = take_body(&e, b, end);
    if (rc < 0) {
        free(e.method);
        free(e.url);
        free(e.body_file);
        free(e.body);
        sq_url_dispose(&e.u);
        return rc;
    }
    out->v[out->n++] = e;
    return 0;
}

static bool tchar(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* A vegeta header line: a token, ':', then a blank, the end, or a byte that is neither a digit
 * nor '/' ("host:8080/x" is a URL without its scheme, "http://x" a URL). */
static bool is_header_line(const char *line, size_t len)
{
    size_t i = 0;
    while (i < len && tchar(line[i]))
        i++;
    if (i == 0 || i == len || line[i] != ':')
        return false;
    return i + 1 == len || !((line[i + 1] >= '0' && line[i + 1] <= '9') || line[i + 1] == '/');
}

/* A header line under entry e (line[0, len), starting at column col0). */
static int add_header(const char *name, uint32_t lineno, const char *line, size_t len, size_t col0,
                      struct sq_urllist_entry *e, char *err, size_t errlen)
{
    if (e->nheaders == SQ_URLLIST_MAX_HEADERS)
        return fail(err, errlen, name, lineno, col0, "more than %d header lines under line %u",
                    SQ_URLLIST_MAX_HEADERS, e->line);
    if (!e->headers && !(e->headers = calloc(SQ_URLLIST_MAX_HEADERS, sizeof(*e->headers))))
        return -ENOMEM;
    char *copy = strndup(line, len);
    if (!copy)
        return -ENOMEM;
    while (len && (blank(copy[len - 1]) || copy[len - 1] == '\r'))
        copy[--len] = '\0';
    int rc = sq_header_parse_arg(copy, &e->headers[e->nheaders]);
    free(copy);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0) {
        size_t at = (size_t)((const char *)memchr(line, ':', len) - line);
        while (at < len &&
               !(((unsigned char)line[at] < 0x20 && line[at] != '\t') || line[at] == 0x7f))
            at++;
        return fail(err, errlen, name, lineno, col0 + at,
                    "a header value may not hold control characters (Name: value)");
    }
    e->nheaders++;
    return 0;
}

/* An "@PATH" line under entry e: its body. */
static int add_body_line(const char *name, uint32_t lineno, const char *line, size_t len,
                         size_t col0, struct sq_urllist_entry *e, char *err, size_t errlen)
{
    if (e->body || e->body_file)
        return fail(err, errlen, name, lineno, col0,
                    "line %u already has a body: one body per request", e->line);
    const char *end = line + len;
    while (end > line + 1 && (blank(end[-1]) || end[-1] == '\r'))
        end--;
    if (end == line + 1)
        return fail(err, errlen, name, lineno, col0,
                    "'@' names no file (@PATH reads the body from PATH)");
    e->body_file = strndup(line + 1, (size_t)(end - line - 1));
    return e->body_file ? 0 : -ENOMEM;
}

int sq_urllist_parse(const char *name, const char *text, size_t len, struct sq_urllist *out,
                     char *err, size_t errlen)
{
    out->v = NULL;
    out->n = 0;
    if (len > SQ_URLLIST_MAX_BYTES)
        return fail(err, errlen, name, 1, 1, "the list is larger than %u KiB",
                    SQ_URLLIST_MAX_BYTES >> 10);
    out->v = calloc(SQ_URLLIST_MAX, sizeof(*out->v));
    if (!out->v) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    uint32_t lineno = 0;
    size_t pos = 0;
    struct sq_urllist_entry *open = NULL; /* the target that header and @PATH lines go to */
    while (pos < len) {
        lineno++;
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + (nl ? 1 : 0);
        if (ll && line[ll - 1] == '\r')
            ll--; /* CRLF line ends: the CR belongs to no field */
        const char *nul = memchr(line, '\0', ll);
        if (nul)
            return fail(err, errlen, name, lineno, (size_t)(nul - line) + 1, "a NUL byte");
        size_t i = 0;
        while (i < ll && (blank(line[i]) || line[i] == '\r'))
            i++;
        if (i == ll) {
            open = NULL; /* a blank line ends a target */
            continue;
        }
        if (line[i] == '#')
            continue;
        int rc;
        if (line[i] == '@' || is_header_line(line + i, ll - i)) {
            bool body = line[i] == '@';
            if (!open)
                return fail(err, errlen, name, lineno, i + 1,
                            "%s with no request line above it (%s go right under their METHOD "
                            "URL line%s, with no blank line between)",
                            body ? "a body line (@PATH)" : "a header line",
                            body ? "@PATH lines" : "header lines",
                            body ? ", after its headers" : ", before its @PATH line");
            rc = body ? add_body_line(name, lineno, line + i, ll - i, i + 1, open, err, errlen)
                      : add_header(name, lineno, line + i, ll - i, i + 1, open, err, errlen);
            if (body)
                open = NULL; /* the body ends the target */
        } else {
            rc = parse_line(name, lineno, line + i, ll - i, i + 1, out, err, errlen);
            open = rc == 0 ? &out->v[out->n - 1] : NULL;
        }
        if (rc == -ENOMEM)
            snprintf(err, errlen, "out of memory");
        if (rc < 0)
            return rc;
    }
    if (out->n == 0)
        return fail(err, errlen, name, lineno ? lineno : 1, 1,
                    "no URL in the list (one per line: [METHOD] URL [BODY|@FILE])");
    return 0;
}
