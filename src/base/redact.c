/* base/redact.c - credentials out of captured text (see redact.h).
 *
 * Two passes: the name rule rewrites the head's credential fields into a scratch buffer (only
 * when the text has a head), then the value rule finds every secret's occurrences in that, as
 * byte ranges, merges the ranges that touch or overlap (two secrets may share bytes: a token
 * and the "Bearer token" it came in) and writes the text with each merged range replaced once.
 */
#include "base/redact.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define R_LEN (sizeof(SQ_REDACTED) - 1)

static const char *const credential_fields[] = {
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "x-auth-token",
};

bool sq_redact_header_name(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(credential_fields) / sizeof(credential_fields[0]); i++)
        if (strlen(credential_fields[i]) == len &&
            strncasecmp(credential_fields[i], name, len) == 0)
            return true;
    return false;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t';
}

/* Authorization and Proxy-Authorization: "scheme credentials" (RFC 9110 11.4). */
static bool has_scheme(const char *name, size_t len)
{
    return (len == 13 && strncasecmp(name, "authorization", 13) == 0) ||
           (len == 19 && strncasecmp(name, "proxy-authorization", 19) == 0);
}

int sq_redact_value(const char *name, size_t nlen, const char *v, size_t vlen, struct sq_buf *out)
{
    if (vlen == 0)
        return 0;
    if (has_scheme(name, nlen)) {
        size_t w = 0;
        while (w < vlen && !is_ws(v[w]))
            w++;
        size_t s = w;
        while (s < vlen && is_ws(v[s]))
            s++;
        if (w > 0 && s < vlen) { /* a scheme word, spaces, then the credentials */
            int rc = sq_buf_append(out, v, s);
            if (rc < 0)
                return rc;
        }
    }
    return sq_buf_append(out, SQ_REDACTED, R_LEN);
}

/* The name rule over a head at the start of text[0, len), into out; the rest copied. */
static int by_name(const char *text, size_t len, struct sq_buf *out)
{
    const char *p = text, *end = text + len;
    const char *nl = memchr(p, '\n', len);
    if (!nl) /* the start line alone, or part of it */
        return sq_buf_append(out, text, len);
    int rc = sq_buf_append(out, p, (size_t)(nl + 1 - p));
    p = nl + 1;
    bool folded = false; /* the field before was redacted: its obs-fold lines are its value */
    while (rc == 0 && p < end) {
        nl = memchr(p, '\n', (size_t)(end - p));
        const char *next = nl ? nl + 1 : end, *ce = nl ? nl : end;
        if (ce > p && ce[-1] == '\r')
            ce--;
        if (ce == p) /* the empty line: the head ends, the body is copied as it is */
            return sq_buf_append(out, p, (size_t)(end - p));
        if (is_ws(*p)) {
            if (!folded) {
                rc = sq_buf_append(out, p, (size_t)(next - p));
            } else {
                const char *v = p;
                while (v < ce && is_ws(*v))
                    v++;
                rc = sq_buf_append(out, p, (size_t)(v - p));
                if (rc == 0 && v < ce)
                    rc = sq_buf_append(out, SQ_REDACTED, R_LEN);
                if (rc == 0)
                    rc = sq_buf_append(out, ce, (size_t)(next - ce));
            }
            p = next;
            continue;
        }
        const char *colon = memchr(p, ':', (size_t)(ce - p));
        const char *ne = colon;
        while (ne && ne > p && is_ws(ne[-1]))
            ne--;
        folded = colon && sq_redact_header_name(p, (size_t)(ne - p));
        if (!folded) {
            rc = sq_buf_append(out, p, (size_t)(next - p));
        } else {
            const char *v = colon + 1;
            while (v < ce && is_ws(*v))
                v++;
            const char *ve = ce;
            while (ve > v && is_ws(ve[-1]))
                ve--;
            rc = sq_buf_append(out, p, (size_t)(v - p));
            if (rc == 0)
                rc = sq_redact_value(p, (size_t)(ne - p), v, (size_t)(ve - v), out);
            if (rc == 0)
                rc = sq_buf_append(out, ve, (size_t)(next - ve));
        }
        p = next;
    }
    return rc;
}

struct range {
    size_t a, b; /* [a, b) */
};

static int add_range(struct sq_buf *rs, size_t a, size_t b)
{
    struct range r = {a, b};
    return sq_buf_append(rs, &r, sizeof(r));
}

static int by_start(const void *x, const void *y)
{
    const struct range *r = x, *s = y;
    return (r->a > s->a) - (r->a < s->a);
}

/* The value rule over t[0, n), into out. */
static int by_value(const char *t, size_t n, unsigned flags, const struct sq_str *secrets,
                    size_t ns, struct sq_buf *out)
{
    struct sq_buf rs = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < ns; i++) {
        const char *s = secrets[i].p;
        size_t sl = secrets[i].len;
        if (!s || sl < SQ_REDACT_MIN)
            continue;
        for (size_t at = 0; rc == 0 && at + sl <= n;) {
            const char *hit = memmem(t + at, n - at, s, sl);
            if (!hit)
                break;
            size_t h = (size_t)(hit - t);
            rc = add_range(&rs, h, h + sl);
            at = h + 1; /* overlapping occurrences too: the ranges merge below */
        }
        if (rc == 0 && (flags & SQ_REDACT_CUT)) {
            /* the longest start of the secret that ends the text */
            for (size_t k = sl - 1 < n ? sl - 1 : n; k >= SQ_REDACT_MIN; k--) {
                if (memcmp(t + n - k, s, k) == 0) {
                    rc = add_range(&rs, n - k, n);
                    break;
                }
            }
        }
    }
    size_t nr = rs.len / sizeof(struct range);
    struct range *r = (struct range *)(void *)rs.p;
    if (rc == 0 && nr > 1)
        qsort(r, nr, sizeof(*r), by_start);
    size_t at = 0;
    for (size_t i = 0; rc == 0 && i < nr;) {
        size_t a = r[i].a, b = r[i].b;
        for (i++; i < nr && r[i].a <= b; i++)
            if (r[i].b > b)
                b = r[i].b;
        rc = sq_buf_append(out, t + at, a - at);
        if (rc == 0)
            rc = sq_buf_append(out, SQ_REDACTED, R_LEN);
        at = b;
    }
    if (rc == 0)
        rc = sq_buf_append(out, t + at, n - at);
    sq_buf_dispose(&rs);
    return rc;
}

int sq_redact_text(const char *text, size_t len, unsigned flags, const struct sq_str *secrets,
                   size_t n, struct sq_buf *out)
{
    if (!text)
        text = "";
    if (!(flags & SQ_REDACT_HEAD))
        return by_value(text, len, flags, secrets, n, out);
    struct sq_buf named = {0};
    int rc = by_name(text, len, &named);
    if (rc == 0)
        rc = by_value(named.p ? named.p : "", named.len, flags, secrets, n, out);
    sq_buf_dispose(&named);
    return rc;
}

char *sq_redact_dup(const char *text, size_t len, unsigned flags, const struct sq_str *secrets,
                    size_t n, size_t *out_len)
{
    struct sq_buf b = {0};
    if (sq_redact_text(text, len, flags, secrets, n, &b) < 0 || sq_buf_append(&b, "", 1) < 0) {
        sq_buf_dispose(&b);
        return NULL;
    }
    *out_len = b.len - 1;
    return b.p;
}

bool sq_redact_url_secret(const char *url, size_t len, size_t *at, size_t *n)
{
    const char *sep = url ? memmem(url, len, "://", 3) : NULL;
    if (!sep)
        return false;
    const char *a = sep + 3, *end = url + len;
    const char *e = a;
    while (e < end && *e != '/' && *e != '?' && *e != '#')
        e++;
    const char *atsign = NULL; /* the last '@' of the authority ends the userinfo */
    for (const char *p = a; p < e; p++)
        if (*p == '@')
            atsign = p;
    if (!atsign || atsign == a)
        return false;
    const char *colon = memchr(a, ':', (size_t)(atsign - a));
    const char *s = colon ? colon + 1 : a;
    *at = (size_t)(s - url);
    *n = (size_t)(atsign - s);
    return true;
}

int sq_redact_url(const char *url, size_t len, struct sq_buf *out)
{
    size_t at, n;
    if (!sq_redact_url_secret(url, len, &at, &n) || n == 0)
        return sq_buf_append(out, url ? url : "", url ? len : 0);
    int rc = sq_buf_append(out, url, at);
    if (rc == 0)
        rc = sq_buf_append(out, SQ_REDACTED, R_LEN);
    if (rc == 0)
        rc = sq_buf_append(out, url + at + n, len - at - n);
    return rc;
}
