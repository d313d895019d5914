/* plan/cookie.c - a per-VU cookie jar (RFC 6265 subset).
 *
 * A jar is a small array of entries; each entry owns one buffer holding name, value, domain
 * and path back to back. A deleted or evicted entry keeps its buffer for the next cookie, and a
 * replaced cookie is rewritten in place when it fits, so a VU whose server sets the same
 * cookies every iteration allocates nothing once the jar has its working size. Everything here
 * runs on the VU's worker thread only. See docs/internals/plan-data.md. */
#include "plan/cookie.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "plan/cookie_internal.h"

struct entry {
    char *buf; /* name, value, domain, path */
    size_t cap;
    uint32_t name_len, value_len, domain_len, path_len;
    int64_t expires;  /* seconds since the epoch; INT64_MAX: a session cookie */
    uint64_t created; /* creation order, kept when the cookie is replaced */
    bool live, secure, host_only;
};

struct sq_cookie_jar {
    struct entry *e;
    size_t n, cap; /* slots in use (live or free), slots allocated */
    uint64_t seq;
    size_t allocs;
};

static const char *e_name(const struct entry *e)
{
    return e->buf;
}
static const char *e_value(const struct entry *e)
{
    return e->buf + e->name_len;
}
static const char *e_domain(const struct entry *e)
{
    return e->buf + e->name_len + e->value_len;
}
static const char *e_path(const struct entry *e)
{
    return e->buf + e->name_len + e->value_len + e->domain_len;
}

int sq_cookie_jar_new(struct sq_cookie_jar **out)
{
    *out = calloc(1, sizeof(**out));
    if (!*out)
        return -ENOMEM;
    (*out)->allocs = 1;
    return 0;
}

void sq_cookie_jar_free(struct sq_cookie_jar *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++)
        free(j->e[i].buf);
    free(j->e);
    free(j);
}

void sq_cookie_jar_clear(struct sq_cookie_jar *j)
{
    for (size_t i = 0; i < j->n; i++)
        j->e[i].live = false;
}

size_t sq_cookie__allocs(const struct sq_cookie_jar *j)
{
    return j->allocs;
}

size_t sq_cookie__count(const struct sq_cookie_jar *j)
{
    size_t n = 0;
    for (size_t i = 0; i < j->n; i++)
        n += j->e[i].live;
    return n;
}

/* ---- small string helpers ---- */

static bool is_ws(char c)
{
    return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *len)
{
    while (*len && is_ws(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && is_ws((*s)[*len - 1]))
        (*len)--;
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

static bool has_ctl(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return true;
    }
    return false;
}

static const char *memchr2(const char *s, size_t len, char a, char b)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] == a || s[i] == b)
            return s + i;
    return NULL;
}

/* Lower-cased host without port or IPv6 brackets into h (SQ_COOKIE_MAX_HOST + 1 bytes). */
static bool canon_host(const char *host, size_t len, char *h, size_t *hl)
{
    if (len && host[0] == '[') {
        const char *close = memchr(host, ']', len);
        if (!close)
            return false;
        host++;
        len = (size_t)(close - host);
    } else {
        const char *colon = memchr(host, ':', len);
        if (colon && !memchr(colon + 1, ':', len - (size_t)(colon + 1 - host)))
            len = (size_t)(colon - host); /* host:port; several colons: a bare IPv6 address */
    }
    if (len == 0 || len > SQ_COOKIE_MAX_HOST)
        return false;
    for (size_t i = 0; i < len; i++)
        h[i] = lower(host[i]);
    *hl = len;
    return true;
}

/* An IP address: IPv6 (a colon) or IPv4 (the last label is all digits; no TLD is). */
static bool is_ip(const char *h, size_t len)
{
    if (memchr(h, ':', len))
        return true;
    size_t i = len;
    while (i && h[i - 1] != '.') {
        if (h[i - 1] < '0' || h[i - 1] > '9')
            return false;
        i--;
    }
    return i < len;
}

/* RFC 6265 5.1.3; both lower-case. */
static bool domain_match(const char *h, size_t hl, const char *d, size_t dl)
{
    if (hl == dl)
        return memcmp(h, d, dl) == 0;
    return hl > dl && memcmp(h + hl - dl, d, dl) == 0 && h[hl - dl - 1] == '.' && !is_ip(h, hl);
}

/* The request path without query or fragment; "/" when empty. */
static void uri_path(const char **p, size_t *len)
{
    const char *q = memchr2(*p, *len, '?', '#');
    if (q)
        *len = (size_t)(q - *p);
    if (*len == 0 || (*p)[0] != '/') {
        *p = "/";
        *len = 1;
    }
}

/* RFC 6265 5.1.4. */
static bool path_match(const char *cp, size_t cl, const char *rp, size_t rl)
{
    if (cl > rl || memcmp(cp, rp, cl) != 0)
        return false;
    return cl == rl || cp[cl - 1] == '/' || rp[cl] == '/';
}

/* ---- dates (RFC 6265 5.1.1) ---- */

static bool is_delim(unsigned char c)
{
    return c == 0x09 || (c >= 0x20 && c <= 0x2F) || (c >= 0x3B && c <= 0x40) ||
           (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* 1*2DIGIT etc.: min..max leading digits (then the end or a non-digit). */
static bool digits(const char *s, size_t len, size_t *i, size_t min, size_t max, int *v)
{
    size_t k = *i, n = 0;
    int x = 0;
    while (k < len && is_digit(s[k]) && n <= max) {
        x = x * 10 + (s[k] - '0');
        k++;
        n++;
    }
    if (n < min || n > max)
        return false;
    *v = x;
    *i = k;
    return true;
}

static bool parse_time(const char *s, size_t len, int *hh, int *mm, int *ss)
{
    size_t i = 0;
    return digits(s, len, &i, 1, 2, hh) && i < len && s[i++] == ':' &&
           digits(s, len, &i, 1, 2, mm) && i < len && s[i++] == ':' && digits(s, len, &i, 1, 2, ss);
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian), counting eras of 400 years. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;                                  /* 0..399 */
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1; /* 0..365, from March */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;          /* 0..146096 */
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return 29;
    return dim[m - 1];
}

bool sq_cookie__parse_date(const char *s, size_t len, int64_t *out)
{
    static const char months[] = "janfebmaraprmayjunjulaugsepoctnovdec";
    bool ft = false, fd = false, fm = false, fy = false;
    int hh = 0, mi = 0, ss = 0, dom = 0, mon = 0, year = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && is_delim((unsigned char)s[i]))
            i++;
        size_t a = i;
        while (i < len && !is_delim((unsigned char)s[i]))
            i++;
        if (a == i)
            break;
        const char *tok = s + a;
        size_t tl = i - a, k = 0;
        int v;
        if (!ft && parse_time(tok, tl, &hh, &mi, &ss)) {
            ft = true;
        } else if (!fd && digits(tok, tl, &k, 1, 2, &v)) {
            fd = true;
            dom = v;
        } else if (!fm && tl >= 3) {
            bool hit = false;
            for (int m = 0; m < 12 && !hit; m++) {
                if (lower(tok[0]) == months[3 * m] && lower(tok[1]) == months[3 * m + 1] &&
                    lower(tok[2]) == months[3 * m + 2]) {
                    mon = m + 1;
                    hit = fm = true;
                }
            }
            if (!hit && !fy && (k = 0, digits(tok, tl, &k, 2, 4, &v))) {
                fy = true;
                year = v;
            }
        } else if (!fy && (k = 0, digits(tok, tl, &k, 2, 4, &v))) {
            fy = true;
            year = v;
        }
    }
    if (!(ft && fd && fm && fy))
        return false;
    if (year >= 70 && year <= 99)
        year += 1900;
    else if (year >= 0 && year <= 69)
        year += 2000;
    if (dom < 1 || dom > 31 || year < 1601 || hh > 23 || mi > 59 || ss > 59)
        return false;
    if (dom > days_in_month(year, mon))
        return false;
    *out = days_from_civil(year, mon, dom) * 86400 + hh * 3600 + mi * 60 + ss;
    return true;
}

/* ---- storing ---- */

/* Writes a cookie into slot e, growing its buffer only when it does not fit. */
static int entry_write(struct sq_cookie_jar *j, struct entry *e, const char *name, size_t nl,
                       const char *value, size_t vl, const char *dom, size_t dl, const char *path,
                       size_t pl)
{
    size_t need = nl + vl + dl + pl;
    if (need > e->cap) {
        size_t cap = (need + 63) & ~(size_t)63;
        char *b = realloc(e->buf, cap);
        if (!b)
            return -ENOMEM;
        j->allocs++;
        e->buf = b;
        e->cap = cap;
    }
    memcpy(e->buf, name, nl);
    memcpy(e->buf + nl, value, vl);
    memcpy(e->buf + nl + vl, dom, dl);
    memcpy(e->buf + nl + vl + dl, path, pl);
    e->name_len = (uint32_t)nl;
    e->value_len = (uint32_t)vl;
    e->domain_len = (uint32_t)dl;
    e->path_len = (uint32_t)pl;
    return 0;
}

/* A slot for a new cookie of need bytes: a free slot (the smallest that fits, else any), a new
 * one, or, with the jar full, an expired cookie's or else the oldest cookie's. NULL: -ENOMEM. */
static struct entry *slot_for(struct sq_cookie_jar *j, size_t need, int64_t now)
{
    struct entry *best = NULL, *any = NULL;
    for (size_t i = 0; i < j->n; i++) {
        struct entry *e = &j->e[i];
        if (e->live && e->expires <= now)
            e->live = false;
        if (e->live)
            continue;
        if (!any)
            any = e;
        if (e->cap >= need && (!best || e->cap < best->cap))
            best = e;
    }
    if (best)
        return best;
    if (j->n < SQ_COOKIE_MAX) {
        if (j->n == j->cap) {
            size_t cap = j->cap ? j->cap * 2 : 8;
            if (cap > SQ_COOKIE_MAX)
                cap = SQ_COOKIE_MAX;
            struct entry *a = realloc(j->e, cap * sizeof(*a));
            if (!a)
                return NULL;
            j->allocs++;
            j->e = a;
            j->cap = cap;
        }
        struct entry *e = &j->e[j->n++];
        memset(e, 0, sizeof(*e));
        return e;
    }
    if (any)
        return any;
    struct entry *oldest = &j->e[0];
    for (size_t i = 1; i < j->n; i++)
        if (j->e[i].created < oldest->created)
            oldest = &j->e[i];
    oldest->live = false;
    return oldest;
}

int sq_cookie_jar_set(struct sq_cookie_jar *j, const char *host, size_t host_len, const char *path,
                      size_t path_len, const char *set_cookie, size_t len, int64_t now_s)
{
    char h[SQ_COOKIE_MAX_HOST + 1];
    size_t hl;
    if (!canon_host(host, host_len, h, &hl))
        return 0;

    /* name=value up to the first ';' */
    const char *semi = memchr(set_cookie, ';', len);
    size_t nvl = semi ? (size_t)(semi - set_cookie) : len;
    const char *eq = memchr(set_cookie, '=', nvl);
    if (!eq)
        return 0;
    const char *name = set_cookie, *value = eq + 1;
    size_t nl = (size_t)(eq - set_cookie), vl = nvl - nl - 1;
    trim(&name, &nl);
    trim(&value, &vl);
    if (nl == 0 || nl + vl > SQ_COOKIE_MAX_BYTES || has_ctl(name, nl) || has_ctl(value, vl))
        return 0;

    /* attributes */
    bool have_max_age = false, have_expires = false, secure = false;
    int64_t max_age_exp = 0, expires = 0;
    char dom[SQ_COOKIE_MAX_HOST + 1];
    size_t dl = 0;
    const char *cpath = NULL;
    size_t cpl = 0;
    const char *p = semi, *end = set_cookie + len;
    while (p && p < end) {
        p++; /* the ';' */
        const char *next = memchr(p, ';', (size_t)(end - p));
        size_t avl = next ? (size_t)(next - p) : (size_t)(end - p);
        const char *an = p, *av = NULL;
        size_t anl = avl, avlen = 0;
        const char *aeq = memchr(p, '=', avl);
        if (aeq) {
            anl = (size_t)(aeq - p);
            av = aeq + 1;
            avlen = avl - anl - 1;
            trim(&av, &avlen);
        }
        trim(&an, &anl);
        p = next;
        if (sq_ieq_cstr(an, anl, "expires")) {
            int64_t t;
            if (av && sq_cookie__parse_date(av, avlen, &t)) {
                have_expires = true;
                expires = t;
            }
        } else if (sq_ieq_cstr(an, anl, "max-age")) {
            if (!av || avlen == 0 || (av[0] != '-' && !is_digit(av[0])))
                continue;
            size_t k = av[0] == '-';
            if (k == avlen)
                continue;
            bool ok = true;
            int64_t delta = 0;
            for (; k < avlen; k++) {
                if (!is_digit(av[k])) {
                    ok = false;
                    break;
                }
                int d = av[k] - '0';
                delta = delta > (INT64_MAX - d) / 10 ? INT64_MAX : delta * 10 + d;
            }
            if (!ok)
                continue;
            have_max_age = true;
            if (av[0] == '-' || delta == 0)
                max_age_exp = INT64_MIN;
            else
                max_age_exp = now_s > INT64_MAX - delta ? INT64_MAX - 1 : now_s + delta;
        } else if (sq_ieq_cstr(an, anl, "domain")) {
            if (!av)
                continue;
            if (avlen && av[0] == '.') {
                av++;
                avlen--;
            }
            if (avlen == 0 || avlen > SQ_COOKIE_MAX_HOST)
                continue;
            for (size_t k = 0; k < avlen; k++)
                dom[k] = lower(av[k]);
            dl = avlen;
        } else if (sq_ieq_cstr(an, anl, "path")) {
            if (av && avlen && av[0] == '/' && avlen <= SQ_COOKIE_MAX_ATTR && !has_ctl(av, avlen)) {
                cpath = av;
                cpl = avlen;
            } else if (!av || avlen == 0 || av[0] != '/') {
                cpath = NULL; /* default path, as when there is none */
                cpl = 0;
            }
        } else if (sq_ieq_cstr(an, anl, "secure")) {
            secure = true;
        }
        /* HttpOnly, SameSite and anything else: ignored (no scripts, no cross-site) */
    }

    int64_t exp = have_max_age ? max_age_exp : have_expires ? expires : INT64_MAX;

    /* domain: host-only, or a domain the host matches; anything else rejects the cookie */
    bool host_only = true;
    if (dl) {
        if (dl == hl && memcmp(dom, h, hl) == 0) {
            host_only = false;
        } else if (memchr(dom, '.', dl) && domain_match(h, hl, dom, dl)) {
            host_only = false;
        } else {
            return 0;
        }
    } else {
        memcpy(dom, h, hl);
        dl = hl;
    }

    /* path: the attribute or the default path (RFC 6265 5.1.4) */
    if (!cpath) {
        cpath = path;
        cpl = path_len;
        uri_path(&cpath, &cpl);
        const char *last = cpath + cpl;
        while (last > cpath && last[-1] != '/')
            last--;
        cpl = (size_t)(last - cpath) - 1; /* up to, not including, the rightmost '/' */
        if (cpl == 0)
            cpl = 1;
    }

    /* replace the same (name, domain, path) in place, keeping its creation order */
    for (size_t i = 0; i < j->n; i++) {
        struct entry *e = &j->e[i];
        if (!e->live || e->name_len != nl || e->domain_len != dl || e->path_len != cpl ||
            memcmp(e_name(e), name, nl) != 0 || memcmp(e_domain(e), dom, dl) != 0 ||
            memcmp(e_path(e), cpath, cpl) != 0)
            continue;
        if (exp <= now_s) {
            e->live = false;
            return 0;
        }
        int rc = entry_write(j, e, name, nl, value, vl, dom, dl, cpath, cpl);
        if (rc < 0) {
            e->live = false; /* its buffer is intact but the new value is lost */
            return rc;
        }
        e->expires = exp;
        e->secure = secure;
        e->host_only = host_only;
        return 0;
    }
    if (exp <= now_s)
        return 0;
    struct entry *e = slot_for(j, nl + vl + dl + cpl, now_s);
    if (!e)
        return -ENOMEM;
    int rc = entry_write(j, e, name, nl, value, vl, dom, dl, cpath, cpl);
    if (rc < 0)
        return rc;
    e->expires = exp;
    e->secure = secure;
    e->host_only = host_only;
    e->created = ++j->seq;
    e->live = true;
    return 0;
}

int sq_cookie_jar_header(struct sq_cookie_jar *j, const char *host, size_t host_len,
                         const char *path, size_t path_len, bool secure, int64_t now_s,
                         struct sq_buf *out)
{
    char h[SQ_COOKIE_MAX_HOST + 1];
    size_t hl;
    if (!canon_host(host, host_len, h, &hl))
        return 0;
    uri_path(&path, &path_len);

    uint8_t idx[SQ_COOKIE_MAX];
    size_t k = 0, total = 0;
    for (size_t i = 0; i < j->n; i++) {
        struct entry *e = &j->e[i];
        if (!e->live)
            continue;
        if (e->expires <= now_s) {
            e->live = false;
            continue;
        }
        if (e->secure && !secure)
            continue;
        if (e->host_only ? (e->domain_len != hl || memcmp(e_domain(e), h, hl) != 0)
                         : !domain_match(h, hl, e_domain(e), e->domain_len))
            continue;
        if (!path_match(e_path(e), e->path_len, path, path_len))
            continue;
        /* insertion sort: longer paths first, then earlier creation */
        size_t at = k;
        while (at > 0) {
            const struct entry *o = &j->e[idx[at - 1]];
            if (o->path_len > e->path_len ||
                (o->path_len == e->path_len && o->created < e->created))
                break;
            idx[at] = idx[at - 1];
            at--;
        }
        idx[at] = (uint8_t)i;
        k++;
        total += e->name_len + 1 + e->value_len + 2;
    }
    if (!k)
        return 0;
    total -= 2;
    if (sq_buf_reserve(out, total) < 0)
        return -ENOMEM;
    char *w = out->p + out->len;
    for (size_t n = 0; n < k; n++) {
        const struct entry *e = &j->e[idx[n]];
        if (n) {
            memcpy(w, "; ", 2);
            w += 2;
        }
        memcpy(w, e_name(e), e->name_len);
        w += e->name_len;
        *w++ = '=';
        memcpy(w, e_value(e), e->value_len);
        w += e->value_len;
    }
    out->len += total;
    return (int)k;
}

size_t sq_cookie_jar_values(const struct sq_cookie_jar *j, struct sq_str *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < j->n; i++) {
        const struct entry *e = &j->e[i];
        if (!e->live)
            continue;
        if (n < max)
            out[n] = (struct sq_str){e_value(e), e->value_len};
        n++;
    }
    return n;
}
