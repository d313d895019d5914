/* http/redirect.c - where a redirect's Location points. See redirect.h. */
#include "http/redirect.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"

static bool is_alpha(unsigned char c)
{
    return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* The length of a URI scheme at the start of s ("http" of "http://..."), 0 when there is none
 * (RFC 3986 3.1: a letter, then letters, digits, '+', '-', '.', up to a ':'). */
static size_t scheme_len(const char *s, size_t n)
{
    if (!n || !is_alpha((unsigned char)s[0]))
        return 0;
    for (size_t i = 1; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ':')
            return i;
        if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.')
            return 0;
    }
    return 0;
}

/* The authority a[0, n) (after "//") against the origin, for a URL of scheme secure. */
static int same_authority(const struct sq_redirect_origin *o, bool secure, const char *a, size_t n)
{
    if (!n || memchr(a, '@', n))
        return -SQ_EPARSE; /* no host, or userinfo: nothing a target sends us to */
    const char *host = a;
    size_t hl;
    size_t at;
    if (a[0] == '[') {
        const char *e = memchr(a, ']', n);
        if (!e)
            return -SQ_EPARSE;
        host = a + 1;
        hl = (size_t)(e - a - 1);
        at = (size_t)(e - a + 1);
    } else {
        const char *c = memchr(a, ':', n);
        hl = c ? (size_t)(c - a) : n;
        at = hl;
    }
    uint32_t port = secure ? 443 : 80;
    if (at < n) {
        if (a[at] != ':')
            return -SQ_EPARSE;
        if (at + 1 < n) {
            port = 0;
            for (size_t i = at + 1; i < n; i++) {
                if (!is_digit((unsigned char)a[i]) || port > 65535)
                    return -SQ_EPARSE;
                port = port * 10 + (uint32_t)(a[i] - '0');
            }
            if (port == 0 || port > 65535)
                return -SQ_EPARSE;
        }
    }
    if (!hl)
        return -SQ_EPARSE;
    bool same = secure == o->secure && port == o->port && strlen(o->host) == hl &&
                strncasecmp(o->host, host, hl) == 0;
    return same ? SQ_REDIRECT_SAME : SQ_REDIRECT_OFFSITE;
}

/* Appends p[0, n) with its dot segments removed (RFC 3986 5.2.4); p starts with '/'. */
static int put_path(struct sq_buf *out, const char *p, size_t n)
{
    size_t root = out->len;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n;) {
        const char *slash = memchr(p + i + 1, '/', n - i - 1);
        size_t j = slash ? (size_t)(slash - p) : n;
        const char *seg = p + i + 1;
        size_t sl = j - i - 1;
        if (sl == 1 && seg[0] == '.') {
            if (j == n)
                rc = sq_buf_append(out, "/", 1);
        } else if (sl == 2 && seg[0] == '.' && seg[1] == '.') {
            while (out->len > root && out->p[out->len - 1] != '/')
                out->len--;
            if (out->len > root)
                out->len--; /* the '/' before the segment dropped */
            if (j == n)
                rc = sq_buf_append(out, "/", 1);
        } else {
            rc = sq_buf_append(out, p + i, j - i);
        }
        i = j;
    }
    if (rc == 0 && out->len == root)
        rc = sq_buf_append(out, "/", 1);
    return rc;
}

/* Appends a path reference (a '/' first) and its query, dot segments removed from the path. */
static int put_target(struct sq_buf *out, const char *dir, size_t dl, const char *ref, size_t rl)
{
    const char *q = memchr(ref, '?', rl);
    size_t pl = q ? (size_t)(q - ref) : rl;
    struct sq_buf path = {0};
    int rc = sq_buf_append(&path, dir, dl);
    if (rc == 0)
        rc = sq_buf_append(&path, ref, pl);
    if (rc == 0)
        rc = put_path(out, path.p ? path.p : "/", path.len ? path.len : 1);
    sq_buf_dispose(&path);
    if (rc == 0 && q)
        rc = sq_buf_append(out, q, rl - pl);
    return rc;
}

/* Percent-encodes, in place, every byte of out that cannot go on a request line. */
static int encode(struct sq_buf *out)
{
    size_t bad = 0;
    for (size_t i = 0; i < out->len; i++)
        bad += (unsigned char)out->p[i] <= 0x20 || (unsigned char)out->p[i] >= 0x7f;
    if (!bad)
        return 0;
    int rc = sq_buf_reserve(out, 2 * bad);
    if (rc < 0)
        return rc;
    size_t end = out->len + 2 * bad;
    for (size_t i = out->len, k = end; i-- > 0;) {
        unsigned char c = (unsigned char)out->p[i];
        if (c > 0x20 && c < 0x7f) {
            out->p[--k] = (char)c;
        } else {
            out->p[--k] = sq_hex_upper[c & 15];
            out->p[--k] = sq_hex_upper[c >> 4];
            out->p[--k] = '%';
        }
    }
    out->len = end;
    return 0;
}

int sq_redirect_resolve(const struct sq_redirect_origin *o, const char *base, size_t blen,
                        const char *loc, size_t len, struct sq_buf *out)
{
    sq_buf_reset(out);
    while (len && (loc[0] == ' ' || loc[0] == '\t'))
        loc++, len--;
    while (len && (loc[len - 1] == ' ' || loc[len - 1] == '\t'))
        len--;
    const char *hash = memchr(loc, '#', len);
    if (hash)
        len = (size_t)(hash - loc);
    if (!len)
        return -SQ_EPARSE;
    size_t sl = scheme_len(loc, len);
    bool secure = o->secure;
    if (sl) {
        if (sl == 4 && strncasecmp(loc, "http", 4) == 0)
            secure = false;
        else if (sl == 5 && strncasecmp(loc, "https", 5) == 0)
            secure = true;
        else
            return SQ_REDIRECT_OFFSITE; /* another scheme altogether */
        loc += sl + 1;
        len -= sl + 1;
        if (len < 2 || loc[0] != '/' || loc[1] != '/')
            return -SQ_EPARSE;
    }
    int rc;
    if (len >= 2 && loc[0] == '/' && loc[1] == '/') {
        /* a network-path reference: "//host[:port]/path" */
        loc += 2;
        len -= 2;
        size_t a = 0;
        while (a < len && loc[a] != '/' && loc[a] != '?')
            a++;
        int same = same_authority(o, secure, loc, a);
        if (same != SQ_REDIRECT_SAME)
            return same;
        loc += a;
        len -= a;
        rc = len && loc[0] == '/' ? put_target(out, "", 0, loc, len)
                                  : put_target(out, "/", 1, loc, len);
    } else if (loc[0] == '/') {
        rc = put_target(out, "", 0, loc, len);
    } else {
        /* relative to the current target: its directory, or (a query alone) its path */
        const char *bq = memchr(base, '?', blen);
        size_t bp = bq ? (size_t)(bq - base) : blen;
        if (!bp || base[0] != '/') {
            base = "/";
            bp = 1;
        }
        if (loc[0] == '?') {
            rc = put_target(out, base, bp, loc, len);
        } else {
            size_t d = bp;
            while (d > 0 && base[d - 1] != '/')
                d--;
            rc = put_target(out, base, d, loc, len);
        }
    }
    if (rc == 0)
        rc = encode(out);
    return rc < 0 ? rc : SQ_REDIRECT_SAME;
}
