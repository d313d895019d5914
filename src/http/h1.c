/* http/h1.c - HTTP/1.1 heads, body framing and the incremental response reader (RFC 9112).
 *
 * The head parsers are stateless and scan left to right once, checking each byte as soon as it
 * is seen: a malformed head fails on the first bad byte, a valid but incomplete one returns
 * SQ_H1_PARTIAL, and nothing past buf + len is ever read. Only fields that decide framing or
 * connection reuse (Content-Length, Transfer-Encoding, Connection, Expect), a request's Host
 * (one at most: RFC 9112 3.2), and the two a client needs before the body (Content-Encoding,
 * Content-Type: text/event-stream), are interpreted; a field is matched on its name's length
 * first.
 *
 * The body framer and the reader keep their own small state so they can be fed any split of
 * the stream. The reader's invariant: _spill_len > 0 only while a head is incomplete, and then
 * _spill holds exactly the bytes of that head seen so far (< _max_head of them); SQ_ASSERT
 * states both where asserts are on.
 */
#include "http/h1.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/str.h"
#include "base/text.h"

/* Character classes: token (tchar), field content (VCHAR, SP, HTAB, obs-text), request-target
 * (VCHAR), a Host's reg-name (RFC 3986 3.2.2: unreserved and sub-delims; '%' apart). */
enum { C_TOKEN = 1, C_FIELD = 2, C_TARGET = 4, C_HOST = 8 };

static const uint8_t cls[256] = {
    0,  0,  0,  0,  0,  0,  0,  0,
    0,  2,  0,  0,  0,  0,  0,  0, /* 0x00: HTAB only */
    0,  0,  0,  0,  0,  0,  0,  0,
    0,  0,  0,  0,  0,  0,  0,  0, /* 0x10 */
    2,  15, 6,  7,  15, 7,  15, 15,
    14, 14, 15, 15, 14, 15, 15, 6, /* 0x20: SP ! " # $ % & ' ( ) * + , - . / */
    15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 6,  14, 6,  14, 6,  6, /* 0x30: digits : ; < = > ? */
    6,  15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, /* 0x40: @ A-O */
    15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 6,  6,  6,  7,  15, /* 0x50: P-Z [ \ ] ^ _ */
    7,  15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, /* 0x60: ` a-o */
    15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 6,  7,  6,  15, 0, /* 0x70: p-z { | } ~ DEL */
    2,  2,  2,  2,  2,  2,  2,  2,
    2,  2,  2,  2,  2,  2,  2,  2, /* 0x80: obs-text from here on */
    2,  2,  2,  2,  2,  2,  2,  2,
    2,  2,  2,  2,  2,  2,  2,  2, /* 0x90 */
    2,  2,  2,  2,  2,  2,  2,  2,
    2,  2,  2,  2,  2,  2,  2,  2, /* 0xa0 */
    2,  2,  2,  2,  2,  2,  2,  2,
    2,  2,  2,  2,  2,  2,  2,  2, /* 0xb0 */
    2,  2,  2,  2,  2,  2,  2,  2,
    2,  2,  2,  2,  2,  2,  2,  2, /* 0xc0 */
    2,  2,  2,  2,  2,  2,  2,  2,
    2,  2,  2,  2,  2,  2,  2,  2, /* 0xd0 */
    2,  2,  2,  2,  2,  2,  2,  2,
    2,  2,  2,  2,  2,  2,  2,  2, /* 0xe0 */
    2,  2,  2,  2,  2,  2,  2,  2,
    2,  2,  2,  2,  2,  2,  2,  2, /* 0xf0 */
};

#define IS_TOKEN(c)  (cls[(unsigned char)(c)] & C_TOKEN)
#define IS_FIELD(c)  (cls[(unsigned char)(c)] & C_FIELD)
#define IS_TARGET(c) (cls[(unsigned char)(c)] & C_TARGET)
#define IS_HOST(c)   (cls[(unsigned char)(c)] & C_HOST)
#define IS_DIGIT(c)  ((unsigned char)((c) - '0') < 10)
#define IS_OWS(c)    ((c) == ' ' || (c) == '\t')

#define PARTIAL SQ_H1_PARTIAL

/* Case-insensitive compare of p[0,n) with a lowercase literal. */
#define IEQ(p, n, lit) sq_ieq((p), (n), (lit), sizeof(lit) - 1)

/* NAME_IS(p, lit): p[0, sizeof(lit) - 1) equals lit ignoring case, where lit is lowercase
 * letters, '-' and '/' and p holds bytes the head scanner already accepted (token or field-value
 * bytes: no control byte but HTAB). Then setting bit 0x20 folds case exactly: the only other
 * bytes it maps onto a letter, '-' or '/' are control bytes, and HTAB becomes ')', which no
 * literal here holds. So the compare is 4- and 8-byte loads, two or three of them, overlapping
 * at the end. The caller checks the length first. */
#define NAME_IS(p, lit) name_is((p), (lit), sizeof(lit) - 1)

static inline uint64_t load8(const char *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

static inline uint32_t load4(const char *p)
{
    uint32_t x;
    memcpy(&x, p, 4);
    return x;
}

static inline bool name_is(const char *p, const char *lit, size_t n)
{
    const uint64_t fold8 = 0x2020202020202020ull;
    const uint32_t fold4 = 0x20202020u;
    if (n < 8)
        return (((load4(p) | fold4) ^ load4(lit)) |
                ((load4(p + n - 4) | fold4) ^ load4(lit + n - 4))) == 0;
    uint64_t d = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        d |= (load8(p + i) | fold8) ^ load8(lit + i);
    if (i < n)
        d |= (load8(p + n - 8) | fold8) ^ load8(lit + n - 8);
    return d == 0;
}

static size_t lim_head(const struct sq_h1_limits *lim)
{
    size_t v = lim && lim->max_head_bytes ? lim->max_head_bytes : SQ_H1_DEFAULT_MAX_HEAD_BYTES;
    return v > INT_MAX ? INT_MAX : v;
}

static size_t lim_headers(const struct sq_h1_limits *lim)
{
    return lim && lim->max_headers ? lim->max_headers : SQ_H1_DEFAULT_MAX_HEADERS;
}

/* buf[*i] is CR or LF: steps over the line end (CRLF or a bare LF). */
static inline int eol(const char *buf, size_t len, size_t *i)
{
    if (buf[*i] == '\n') {
        (*i)++;
        return 1;
    }
    if (*i + 1 >= len)
        return PARTIAL;
    if (buf[*i + 1] != '\n')
        return -SQ_EPARSE;
    *i += 2;
    return 1;
}

/* Skips field-content bytes from i; returns the index of the first other byte (or len). Eight
 * bytes at a time while they are all printable ASCII or obs-text (no byte < 0x20, no DEL); a
 * block that holds another byte says where the first one is (the lowest flagged byte: a borrow
 * only ever flags bytes above a true one), so only HTAB, which is field content, and the last
 * bytes before len go byte by byte. Never reads at or past len. */
static inline size_t scan_field(const char *buf, size_t len, size_t i)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    for (;;) {
        while (i + 8 <= len) {
            uint64_t x = load8(buf + i);
            uint64_t ctl = (x - ones * 0x20) & ~x & highs; /* a byte < 0x20 */
            uint64_t del = ((x ^ (ones * 0x7f)) - ones) & ~(x ^ (ones * 0x7f)) & highs; /* 0x7f */
            uint64_t m = ctl | del;
            if (m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                i += (size_t)__builtin_ctzll(m) >> 3; /* the first byte in memory order */
#endif
                break;
            }
            i += 8;
        }
        while (i < len && IS_FIELD(buf[i]) && buf[i] != '\t')
            i++;
        if (i >= len || buf[i] != '\t')
            return i;
        i++; /* HTAB inside a value: go on */
    }
}

/* ---- fields ---- */

struct fields {
    struct sq_h1_header *hdrs;
    size_t cap;
    size_t max;
    size_t n;
    int64_t content_length;
    bool te;      /* Transfer-Encoding seen */
    bool chunked; /* the last transfer coding so far is chunked */
    bool conn_close;
    bool conn_keep_alive;
    bool expect_continue;
    uint8_t coding; /* enum sq_coding over every Content-Encoding field */
    bool event_stream;
    uint8_t nhost; /* Host fields seen (a request's: more than one is refused) */
    const char *host;
    size_t host_len;
};

/* Next element of a comma-separated list in v[0,n) from *i, OWS trimmed, empty ones skipped. */
static bool list_next(const char *v, size_t n, size_t *i, const char **el, size_t *el_len)
{
    size_t k = *i;
    while (k < n && (v[k] == ',' || IS_OWS(v[k])))
        k++;
    if (k >= n) {
        *i = k;
        return false;
    }
    size_t s = k;
    while (k < n && v[k] != ',')
        k++;
    size_t e = k;
    while (e > s && IS_OWS(v[e - 1]))
        e--;
    *el = v + s;
    *el_len = e - s;
    *i = k;
    return true;
}

/* Content-Length = 1*DIGIT; a list of equal values ("5, 5") is accepted (RFC 9110 8.6). */
static int on_content_length(struct fields *f, const char *v, size_t n)
{
    if (n - 1 < 18) { /* the usual one value of 1-18 digits: no list to walk */
        int64_t x = 0;
        size_t k = 0;
        for (; k < n && IS_DIGIT(v[k]); k++)
            x = x * 10 + (v[k] - '0');
        if (k == n) {
            if (f->content_length >= 0 && f->content_length != x)
                return -SQ_EPARSE;
            f->content_length = x;
            return 0;
        }
    }
    size_t i = 0, el_len;
    const char *el;
    bool any = false;
    while (list_next(v, n, &i, &el, &el_len)) {
        if (el_len > 18)
            return -SQ_EPARSE; /* 10^18 bytes: certainly a lie, and int64 stays safe */
        int64_t x = 0;
        for (size_t k = 0; k < el_len; k++) {
            if (!IS_DIGIT(el[k]))
                return -SQ_EPARSE;
            x = x * 10 + (el[k] - '0');
        }
        if (f->content_length >= 0 && f->content_length != x)
            return -SQ_EPARSE;
        f->content_length = x;
        any = true;
    }
    return any ? 0 : -SQ_EPARSE;
}

/* Transfer-Encoding: codings with optional parameters; chunked must be last and only once. */
static int on_transfer_encoding(struct fields *f, const char *v, size_t n)
{
    size_t i = 0, el_len;
    const char *el;
    bool any = false;
    f->te = true;
    while (list_next(v, n, &i, &el, &el_len)) {
        size_t t = 0;
        while (t < el_len && IS_TOKEN(el[t]))
            t++;
        size_t k = t;
        while (k < el_len && IS_OWS(el[k]))
            k++;
        if (t == 0 || (k < el_len && el[k] != ';'))
            return -SQ_EPARSE; /* transfer-coding = token *( OWS ";" OWS parameter ) */
        if (f->chunked)
            return -SQ_EPARSE; /* a coding after chunked, or chunked twice */
        f->chunked = IEQ(el, t, "chunked");
        any = true;
    }
    return any ? 0 : -SQ_EPARSE;
}

static void on_connection(struct fields *f, const char *v, size_t n)
{
    size_t i = 0, el_len;
    const char *el;
    while (list_next(v, n, &i, &el, &el_len)) {
        if (IEQ(el, el_len, "close"))
            f->conn_close = true;
        else if (IEQ(el, el_len, "keep-alive"))
            f->conn_keep_alive = true;
    }
}

/* Content-Encoding: one coding over all fields; a second coding stacks (not decodable). */
static void on_content_encoding(struct fields *f, const char *v, size_t n)
{
    enum sq_coding c;
    if (n == 4 && NAME_IS(v, "gzip")) /* the common single values first, inline */
        c = SQ_CODING_GZIP;
    else if (n == 2 && (v[0] | 0x20) == 'b' && (v[1] | 0x20) == 'r')
        c = SQ_CODING_BR;
    else if (n == 4 && NAME_IS(v, "zstd"))
        c = SQ_CODING_ZSTD;
    else
        c = sq_coding_from_header(v, n);
    if (c != SQ_CODING_NONE)
        f->coding = f->coding == SQ_CODING_NONE ? (uint8_t)c : (uint8_t)SQ_CODING_OTHER;
}

bool sq_h1_is_event_stream(const char *v, size_t n)
{
    static const char lit[] = "text/event-stream";
    size_t i = sizeof(lit) - 1;
    if (n < i || !NAME_IS(v, lit))
        return false;
    while (i < n && IS_OWS(v[i]))
        i++;
    return i == n || v[i] == ';';
}

static inline bool is_hex(unsigned char c)
{
    return IS_DIGIT(c) || (unsigned char)((c | 0x20) - 'a') < 6;
}

bool sq_h1_host_valid(const char *v, size_t n)
{
    size_t i = 0;
    if (n && v[0] == '[') {
        /* IP-literal: IPvFuture ("v" hex "." ...), or IPv6 hex, ':' and '.' (an IPv4 tail),
         * then an optional "%25" zone of reg-name bytes */
        i = 1;
        if (i < n && (v[i] | 0x20) == 'v') {
            for (i++; i < n && v[i] != ']'; i++)
                if (!IS_HOST(v[i]) && v[i] != ':')
                    return false;
        } else {
            bool colon = false;
            for (; i < n && v[i] != ']' && v[i] != '%'; i++) {
                if (v[i] == ':')
                    colon = true;
                else if (!is_hex((unsigned char)v[i]) && v[i] != '.')
                    return false;
            }
            if (!colon)
                return false;
            if (i < n && v[i] == '%') {
                if (n - i < 4 || v[i + 1] != '2' || v[i + 2] != '5' || v[i + 3] == ']')
                    return false;
                for (i += 3; i < n && v[i] != ']'; i++)
                    if (!IS_HOST(v[i]) && v[i] != '%')
                        return false;
            }
        }
        if (i >= n || i < 3)
            return false; /* no "]", or "[]" / "[v]" */
        i++;
    } else {
        for (;;) { /* a reg-name or an IPv4 address: one table lookup a byte */
            while (i < n && IS_HOST(v[i]))
                i++;
            if (i + 2 < n && v[i] == '%' && is_hex((unsigned char)v[i + 1]) &&
                is_hex((unsigned char)v[i + 2])) {
                i += 3;
                continue;
            }
            break;
        }
    }
    if (i == n)
        return true;
    if (v[i] != ':')
        return false;
    for (i++; i < n; i++)
        if (!IS_DIGIT(v[i]))
            return false;
    return true;
}

bool sq_h1_media_type_is(const char *v, size_t n, const char *type)
{
    size_t i = strlen(type);
    if (n < i || !sq_ieq(v, i, type, i))
        return false;
    while (i < n && IS_OWS(v[i]))
        i++;
    return i == n || v[i] == ';';
}

static int on_field(struct fields *f, const char *name, size_t name_len, const char *v, size_t n)
{
    switch (name_len) {
    case 4:
        if (NAME_IS(name, "host")) {
            f->host = v;
            f->host_len = n;
            f->nhost += f->nhost < 2;
        }
        return 0;
    case 6:
        if (NAME_IS(name, "expect") && IEQ(v, n, "100-continue"))
            f->expect_continue = true;
        return 0;
    case 10:
        if (NAME_IS(name, "connection"))
            on_connection(f, v, n);
        return 0;
    case 12:
        if (NAME_IS(name, "content-type"))
            f->event_stream = sq_h1_is_event_stream(v, n);
        return 0;
    case 14:
        if (NAME_IS(name, "content-length"))
            return on_content_length(f, v, n);
        return 0;
    case 16:
        if (NAME_IS(name, "content-encoding"))
            on_content_encoding(f, v, n);
        return 0;
    case 17:
        if (NAME_IS(name, "transfer-encoding"))
            return on_transfer_encoding(f, v, n);
        return 0;
    default:
        return 0;
    }
}

static void fields_init(struct fields *f, struct sq_h1_header *hdrs, size_t cap,
                        const struct sq_h1_limits *lim)
{
    memset(f, 0, sizeof(*f));
    f->hdrs = hdrs;
    f->cap = cap;
    f->max = lim_headers(lim);
    f->content_length = -1;
}

/* Parses header lines from *pos through the blank line. Returns 1 (with *pos past the blank
 * line), PARTIAL or a negative code. */
static int parse_fields(const char *buf, size_t len, size_t *pos, struct fields *f)
{
    size_t i = *pos;
    for (;;) {
        if (i >= len)
            return PARTIAL;
        if (buf[i] == '\r' || buf[i] == '\n') {
            int rc = eol(buf, len, &i);
            if (rc <= 0)
                return rc;
            *pos = i;
            return 1;
        }
        /* field-name ":" — no obs-fold, no whitespace before the colon */
        size_t name = i;
        while (i < len && IS_TOKEN(buf[i]))
            i++;
        if (i >= len)
            return PARTIAL;
        if (buf[i] != ':' || i == name)
            return -SQ_EPARSE;
        size_t name_len = i - name;
        i++;
        while (i < len && IS_OWS(buf[i]))
            i++;
        size_t v = i;
        i = scan_field(buf, len, i);
        if (i >= len)
            return PARTIAL;
        if (buf[i] != '\r' && buf[i] != '\n')
            return -SQ_EPARSE;
        size_t v_end = i;
        int rc = eol(buf, len, &i);
        if (rc <= 0)
            return rc;
        while (v_end > v && IS_OWS(buf[v_end - 1]))
            v_end--;
        if (f->n >= f->max || (f->hdrs && f->n >= f->cap))
            return -SQ_ETOOBIG;
        if (f->hdrs) {
            struct sq_h1_header *h = &f->hdrs[f->n];
            h->name = buf + name;
            h->name_len = name_len;
            h->value = buf + v;
            h->value_len = v_end - v;
        }
        f->n++;
        rc = on_field(f, buf + name, name_len, buf + v, v_end - v);
        if (rc < 0)
            return rc;
    }
}

/* "HTTP/1." DIGIT; the name is case-sensitive (RFC 9112 2.3). */
static int parse_version(const char *buf, size_t len, size_t *pos, int *minor)
{
    static const char lit[] = "HTTP/1.";
    size_t i = *pos;
    /* the whole name and digit in view: two 4-byte compares (overlapping) and the digit */
    if (len - i >= 8 && load4(buf + i) == load4(lit) && load4(buf + i + 3) == load4(lit + 3) &&
        IS_DIGIT(buf[i + 7])) {
        *minor = buf[i + 7] - '0';
        *pos = i + 8;
        return 1;
    }
    for (size_t k = 0; k < sizeof(lit) - 1; k++, i++) {
        if (i >= len)
            return PARTIAL;
        if (buf[i] != lit[k])
            return -SQ_EPARSE;
    }
    if (i >= len)
        return PARTIAL;
    if (!IS_DIGIT(buf[i]))
        return -SQ_EPARSE;
    *minor = buf[i] - '0';
    *pos = i + 1;
    return 1;
}

/* The start line's end at buf[*i] (CRLF, or a bare LF), then the field lines into f. The caller
 * has checked *i < len. */
static inline int line_end_fields(const char *buf, size_t len, size_t *i, struct fields *f)
{
    if (buf[*i] != '\r' && buf[*i] != '\n')
        return -SQ_EPARSE;
    int rc = eol(buf, len, i);
    if (rc <= 0)
        return rc;
    return parse_fields(buf, len, i, f);
}

/* A head still partial once the cap's worth has arrived cannot end within the cap. */
static inline int head_capped(int rc, size_t len, size_t max)
{
    return rc == PARTIAL && len >= max ? -SQ_ETOOBIG : rc;
}

static int parse_response(const char *buf, size_t len, const struct sq_h1_limits *lim,
                          struct sq_h1_response *out)
{
    size_t i = 0;
    int minor = 0, rc;
    rc = parse_version(buf, len, &i, &minor);
    if (rc <= 0)
        return rc;
    if (i >= len)
        return PARTIAL;
    if (buf[i++] != ' ')
        return -SQ_EPARSE;
    int status = 0;
    for (int k = 0; k < 3; k++, i++) {
        if (i >= len)
            return PARTIAL;
        if (!IS_DIGIT(buf[i]))
            return -SQ_EPARSE;
        status = status * 10 + (buf[i] - '0');
    }
    if (status < 100)
        return -SQ_EPARSE;
    if (i >= len)
        return PARTIAL;
    size_t reason = i, reason_end = i;
    if (buf[i] == ' ') { /* the reason phrase may be empty, and its SP missing (tolerated) */
        reason = ++i;
        i = scan_field(buf, len, i);
        if (i >= len)
            return PARTIAL;
        reason_end = i;
    }
    struct fields f;
    fields_init(&f, out->headers, out->headers_cap, lim);
    rc = line_end_fields(buf, len, &i, &f);
    if (rc <= 0)
        return rc;
    if (f.te && f.content_length >= 0)
        return -SQ_EPARSE; /* RFC 9112 6.3: a smuggling sign; refuse the connection */

    out->status = status;
    out->minor_version = minor;
    out->reason = buf + reason;
    out->reason_len = reason_end - reason;
    out->num_headers = f.n;
    out->content_length = f.content_length;
    out->chunked = f.chunked;
    out->transfer_encoding = f.te;
    out->keep_alive = f.conn_close ? false : minor >= 1 ? true : f.conn_keep_alive;
    out->content_encoding = f.coding;
    out->event_stream = f.event_stream;
    return (int)i;
}

int sq_h1_parse_response_head(const char *buf, size_t len, const struct sq_h1_limits *lim,
                              struct sq_h1_response *out)
{
    size_t max = lim_head(lim);
    return head_capped(parse_response(buf, len < max ? len : max, lim, out), len, max);
}

static int parse_request(const char *buf, size_t len, const struct sq_h1_limits *lim,
                         struct sq_h1_request *out)
{
    size_t i = 0;
    int minor = 0, rc;
    while (i < len && (buf[i] == '\r' || buf[i] == '\n')) {
        rc = eol(buf, len, &i);
        if (rc <= 0)
            return rc;
    }
    size_t method = i;
    while (i < len && IS_TOKEN(buf[i]))
        i++;
    if (i >= len)
        return PARTIAL;
    if (buf[i] != ' ' || i == method)
        return -SQ_EPARSE;
    size_t method_len = i - method;
    size_t target = ++i;
    while (i < len && IS_TARGET(buf[i]))
        i++;
    if (i >= len)
        return PARTIAL;
    if (buf[i] != ' ' || i == target)
        return -SQ_EPARSE;
    size_t target_len = i - target;
    i++;
    rc = parse_version(buf, len, &i, &minor);
    if (rc <= 0)
        return rc;
    if (i >= len)
        return PARTIAL;
    struct fields f;
    fields_init(&f, out->headers, out->headers_cap, lim);
    rc = line_end_fields(buf, len, &i, &f);
    if (rc <= 0)
        return rc;
    /* RFC 9112 6.1 / 6.3: the server cannot frame these reliably; answer 400 and close. */
    if (f.te && (f.content_length >= 0 || !f.chunked || minor == 0))
        return -SQ_EPARSE;
    /* RFC 9112 3.2: one Host (its presence and its value are the server's to check) */
    if (f.nhost > 1)
        return -SQ_EPARSE;

    out->method = buf + method;
    out->method_len = method_len;
    out->path = buf + target;
    out->path_len = target_len;
    out->minor_version = minor;
    out->num_headers = f.n;
    out->content_length = f.content_length;
    out->chunked = f.chunked;
    out->keep_alive = f.conn_close ? false : minor >= 1 ? true : f.conn_keep_alive;
    out->expect_continue = f.expect_continue && minor >= 1; /* 1.0: ignored (RFC 9110 10.1.1) */
    out->host = f.nhost ? f.host : NULL;
    out->host_len = f.nhost ? f.host_len : 0;
    return (int)i;
}

int sq_h1_parse_request_head(const char *buf, size_t len, const struct sq_h1_limits *lim,
                             struct sq_h1_request *out)
{
    size_t max = lim_head(lim);
    return head_capped(parse_request(buf, len < max ? len : max, lim, out), len, max);
}

/* ---- body framer ---- */

/* Each *_LF state (a CR seen, its LF awaited) directly follows the state whose bare-LF ending it
 * completes: its LF is handled as st - 1 would handle a bare LF. */
enum {
    /* chunk-size line (counted against SQ_H1_MAX_CHUNK_LINE) */
    CS_SIZE,
    CS_SIZE_WS,
    CS_EXT,
    CS_SIZE_LF,
    /* chunk data (and LENGTH / UNTIL_CLOSE bodies) */
    CS_DATA,
    CS_DATA_CR,
    CS_DATA_LF,
    /* trailer section (counted against SQ_H1_MAX_TRAILER_BYTES) */
    CS_TR_NAME,
    CS_TR_VALUE,
    CS_TR_LF,
    CS_TR_START,
    CS_END_LF,
    CS_DONE,
    CS_ERR,
};

void sq_h1_body_init(struct sq_h1_body *b, enum sq_h1_body_mode mode, uint64_t length)
{
    memset(b, 0, sizeof(*b));
    b->mode = (uint8_t)mode;
    switch (mode) {
    case SQ_H1_BODY_LENGTH:
        b->_remaining = length;
        b->_state = length ? CS_DATA : CS_DONE;
        break;
    case SQ_H1_BODY_CHUNKED:
        b->_state = CS_SIZE;
        break;
    case SQ_H1_BODY_UNTIL_CLOSE:
        b->_state = CS_DATA;
        break;
    default:
        b->_state = CS_DONE;
        break;
    }
}

static inline int deliver(struct sq_h1_body *b, const char *p, size_t n, sq_h1_data_cb cb, void *ud)
{
    b->bytes += n;
    if (cb && n)
        return cb(ud, p, n);
    return 0;
}

static int chunked_feed(struct sq_h1_body *b, const char *buf, size_t len, size_t *consumed,
                        sq_h1_data_cb cb, void *ud)
{
    size_t i = 0;
    int st = b->_state, rc = 0;
    while (i < len) {
        if (st == CS_DATA) {
            size_t n = len - i;
            if (n > b->_remaining)
                n = (size_t)b->_remaining;
            b->_remaining -= n;
            rc = deliver(b, buf + i, n, cb, ud);
            i += n;
            if (rc < 0)
                goto fail;
            if (b->_remaining == 0)
                st = CS_DATA_CR;
            continue;
        }
        if (st <= CS_SIZE_LF) {
            if (++b->_line > SQ_H1_MAX_CHUNK_LINE)
                goto too_big;
        } else if (st >= CS_TR_NAME) {
            if (++b->_trailer > SQ_H1_MAX_TRAILER_BYTES)
                goto too_big;
        }
        char c = buf[i++];
    again:
        switch (st) {
        case CS_SIZE: {
            int h = sq_hex_value((unsigned char)c);
            if (h >= 0) {
                if (b->_digits == 16)
                    goto too_big; /* more would overflow 64 bits */
                b->_remaining = (b->_remaining << 4) | (uint64_t)h;
                b->_digits++;
                continue;
            }
            if (b->_digits == 0)
                goto bad;
            st = CS_SIZE_WS; /* the size ends here; what may follow it is what may follow OWS */
        }
            /* fall through */
        case CS_SIZE_WS:
            if (IS_OWS(c))
                continue;
            if (c == ';')
                st = CS_EXT;
            else if (c == '\r')
                st = CS_SIZE_LF;
            else if (c == '\n')
                goto line_done;
            else
                goto bad;
            continue;
        case CS_EXT: /* chunk-ext is not interpreted, only checked for stray control bytes */
            if (c == '\r')
                st = CS_SIZE_LF;
            else if (c == '\n')
                goto line_done;
            else if (!IS_FIELD(c))
                goto bad;
            continue;
        case CS_DATA_CR:
            if (c == '\r')
                st = CS_DATA_LF;
            else if (c == '\n')
                goto next_chunk;
            else
                goto bad; /* chunk data longer than its size, or CRLF missing */
            continue;
        case CS_TR_START:
            if (c == '\r')
                st = CS_END_LF;
            else if (c == '\n')
                goto done;
            else if (IS_TOKEN(c))
                st = CS_TR_NAME;
            else
                goto bad; /* obs-fold or garbage */
            continue;
        case CS_TR_NAME:
            if (c == ':')
                st = CS_TR_VALUE;
            else if (!IS_TOKEN(c))
                goto bad;
            continue;
        case CS_TR_VALUE:
            if (c == '\r')
                st = CS_TR_LF;
            else if (c == '\n')
                st = CS_TR_START;
            else if (!IS_FIELD(c))
                goto bad;
            continue;
        case CS_SIZE_LF:
        case CS_DATA_LF:
        case CS_TR_LF:
        case CS_END_LF:
            if (c != '\n')
                goto bad;
            st--; /* the CR's state ends its line on this LF as on a bare one */
            goto again;
        default:
            goto bad;
        }
    line_done:
        b->_line = 0;
        b->_digits = 0;
        st = b->_remaining ? CS_DATA : CS_TR_START;
        continue;
    next_chunk:
        b->_remaining = 0;
        st = CS_SIZE;
        continue;
    }
    b->_state = (uint8_t)st;
    *consumed = i;
    return 0;
done:
    b->_state = CS_DONE;
    *consumed = i;
    return SQ_H1_DONE;
bad:
    rc = -SQ_EPARSE;
    goto fail;
too_big:
    rc = -SQ_ETOOBIG;
fail:
    b->_state = CS_ERR;
    *consumed = i;
    return rc;
}

int sq_h1_body_feed(struct sq_h1_body *b, const char *buf, size_t len, size_t *consumed,
                    sq_h1_data_cb on_data, void *ud)
{
    *consumed = 0;
    if (b->_state == CS_DONE)
        return SQ_H1_DONE;
    if (b->_state == CS_ERR)
        return -SQ_EPARSE;
    int rc;
    switch (b->mode) {
    case SQ_H1_BODY_LENGTH: {
        size_t n = len;
        if (n > b->_remaining)
            n = (size_t)b->_remaining;
        b->_remaining -= n;
        *consumed = n;
        if (b->_remaining == 0)
            b->_state = CS_DONE;
        rc = deliver(b, buf, n, on_data, ud);
        if (rc < 0) {
            b->_state = CS_ERR;
            return rc;
        }
        return b->_state == CS_DONE ? SQ_H1_DONE : 0;
    }
    case SQ_H1_BODY_UNTIL_CLOSE:
        *consumed = len;
        rc = deliver(b, buf, len, on_data, ud);
        if (rc < 0) {
            b->_state = CS_ERR;
            return rc;
        }
        return 0;
    case SQ_H1_BODY_CHUNKED:
        return chunked_feed(b, buf, len, consumed, on_data, ud);
    default:
        return SQ_H1_DONE;
    }
}

int sq_h1_body_eof(struct sq_h1_body *b)
{
    if (b->_state == CS_DONE)
        return SQ_H1_DONE;
    if (b->mode == SQ_H1_BODY_UNTIL_CLOSE && b->_state == CS_DATA) {
        b->_state = CS_DONE;
        return SQ_H1_DONE;
    }
    return -SQ_EPARSE;
}

/* ---- response reader ---- */

enum { R_IDLE, R_HEAD, R_BODY, R_DONE };

#define READER_MAX_HEAD (16u * 1024 * 1024) /* keeps head_bytes (u32) safe over interim heads */
#define SPILL_MIN       512u                /* first spill allocation */
#define SPILL_KEEP      512u                /* a spill buffer this small is kept for reuse */

/* The spill buffer keeps its capacity in its own header, so the reader stays at 88 bytes. */
struct sq_h1__spill {
    uint32_t cap;
    char data[];
};

static uint32_t spill_cap(const struct sq_h1_reader *r)
{
    return r->_spill ? r->_spill->cap : 0;
}

/* Forgets the spilled bytes; keeps the buffer for reuse only while it is small. */
static void spill_reset(struct sq_h1_reader *r)
{
    r->_spill_len = 0;
    r->_eoh = 0;
    if (spill_cap(r) > SPILL_KEEP) {
        free(r->_spill);
        r->_spill = NULL;
    }
}

void sq_h1_reader_init(struct sq_h1_reader *r, const struct sq_h1_limits *lim)
{
    memset(r, 0, sizeof(*r));
    size_t h = lim_head(lim), n = lim_headers(lim);
    r->_max_head = (uint32_t)(h < READER_MAX_HEAD ? h : READER_MAX_HEAD);
    r->_max_headers = (uint16_t)(n < UINT16_MAX ? n : UINT16_MAX);
    r->_state = R_IDLE;
    sq_h1_body_init(&r->body, SQ_H1_BODY_NONE, 0);
}

void sq_h1_reader_dispose(struct sq_h1_reader *r)
{
    free(r->_spill);
    r->_spill = NULL;
    r->_spill_len = 0;
    r->_state = R_IDLE;
}

void sq_h1_reader_on_body(struct sq_h1_reader *r, sq_h1_data_cb cb, void *ud)
{
    r->_on_data = cb;
    if (cb)
        r->_ud = ud;
}

void sq_h1_reader_on_head(struct sq_h1_reader *r, sq_h1_head_cb cb, void *ud)
{
    r->_on_head.head = cb;
    if (cb)
        r->_ud = ud;
    r->_fields = 0;
}

void sq_h1_reader_on_fields(struct sq_h1_reader *r, sq_h1_fields_cb cb, void *ud)
{
    r->_on_head.fields = cb;
    if (cb)
        r->_ud = ud;
    r->_fields = cb != NULL;
}

void sq_h1_reader_start(struct sq_h1_reader *r, bool head_request)
{
    sq_h1_body_init(&r->body, SQ_H1_BODY_NONE, 0);
    r->head_bytes = 0;
    r->status = 0;
    r->minor_version = 0;
    r->keep_alive = false;
    r->content_encoding = SQ_CODING_NONE;
    r->event_stream = false;
    spill_reset(r); /* a response abandoned mid-head leaves no big buffer behind */
    r->_interim = 0;
    r->_head_req = head_request;
    r->_state = R_HEAD;
}

uint32_t sq_h1_reader_spill_allocs(const struct sq_h1_reader *r)
{
    return r->_spill_allocs;
}

size_t sq_h1_reader_heap_bytes(const struct sq_h1_reader *r)
{
    return spill_cap(r);
}

/* Appends p[0,n) to the spill buffer; the caller has checked _spill_len + n <= _max_head. */
static int spill_append(struct sq_h1_reader *r, const char *p, size_t n)
{
    size_t need = (size_t)r->_spill_len + n;
    SQ_ASSERT_MSG(need <= r->_max_head, "the spill stays within its cap"); /* realloc caps it */
    if (n == 0)
        return 0;
    if (need > spill_cap(r)) {
        size_t cap = r->_spill ? r->_spill->cap : SPILL_MIN;
        while (cap < need)
            cap *= 2;
        if (cap > r->_max_head)
            cap = r->_max_head;
        struct sq_h1__spill *np = realloc(r->_spill, sizeof(*np) + cap);
        if (!np)
            return -ENOMEM;
        np->cap = (uint32_t)cap;
        r->_spill = np;
        if (r->_spill_allocs < UINT8_MAX)
            r->_spill_allocs++;
    }
    memcpy(r->_spill->data + r->_spill_len, p, n);
    r->_spill_len = (uint32_t)need;
    return 0;
}

/* Looks for the blank line that ends a head in p[0,n), continuing the scan state *st
 * (0: inside a line, 1: just after LF, 2: after LF CR). Returns the offset just past the blank
 * line, or 0 when there is none (a blank line ends at offset >= 1, so 0 is free). */
static size_t scan_eoh(unsigned *st, const char *p, size_t n)
{
    size_t i = 0;
    unsigned s = *st;
    while (i < n) {
        if (s == 0) {
            const char *q = memchr(p + i, '\n', n - i);
            if (!q) {
                i = n;
                break;
            }
            i = (size_t)(q - p) + 1;
            s = 1;
            continue;
        }
        char c = p[i++];
        if (c == '\n') {
            *st = 0;
            return i;
        }
        s = (c == '\r' && s == 1) ? 2 : 0;
    }
    *st = s;
    return 0;
}

/* A complete head (head[0, head_len)) was parsed: skip it if interim, else set up the body and
 * hand the head to the head callback (with_fields: the fields callback, h->headers filled).
 * Returns 0 or a negative code. with_fields is a constant in each inlined copy. */
static inline int on_head(struct sq_h1_reader *r, const struct sq_h1_response *h, const char *head,
                          size_t head_len, const bool with_fields)
{
    r->head_bytes += (uint32_t)head_len;
    r->status = (uint16_t)h->status;
    r->minor_version = (uint8_t)h->minor_version;
    r->keep_alive = h->keep_alive;
    if (h->status < 200 && h->status != 101) {
        if (++r->_interim > SQ_H1_MAX_INTERIM)
            return -SQ_ETOOBIG;
        return 0; /* 100 Continue, 103 Early Hints ...: the final response follows */
    }
    r->content_encoding = h->content_encoding;
    r->event_stream = h->event_stream;
    enum sq_h1_body_mode mode = SQ_H1_BODY_NONE;
    uint64_t length = 0;
    if (h->status == 101) {
        r->keep_alive = false; /* the connection now speaks another protocol */
    } else if (r->_head_req || h->status == 204 || h->status == 304) {
        mode = SQ_H1_BODY_NONE;
    } else if (h->chunked) {
        mode = SQ_H1_BODY_CHUNKED;
    } else if (!h->transfer_encoding && h->content_length >= 0) {
        mode = SQ_H1_BODY_LENGTH;
        length = (uint64_t)h->content_length;
    } else {
        mode = SQ_H1_BODY_UNTIL_CLOSE;
        r->keep_alive = false;
    }
    sq_h1_body_init(&r->body, mode, length);
    r->_state = R_BODY;
    if (with_fields)
        return r->_on_head.fields(r->_ud, head, head_len, h->headers, h->num_headers);
    if (r->_on_head.head)
        return r->_on_head.head(r->_ud, head, head_len);
    return 0;
}

/* Parses the next head from buf[0,len) (or from the spill buffer plus buf). Returns 1 with
 * *used set, 0 when buf was swallowed into the spill buffer, or a negative code. fields: NULL
 * (the framing-only scan; a constant in the copy inlined into the feed), or room for
 * SQ_H1_READER_MAX_FIELDS fields for the fields callback. */
__attribute__((always_inline)) static inline int reader_head(struct sq_h1_reader *r,
                                                             const char *buf, size_t len,
                                                             size_t *used,
                                                             struct sq_h1_header *fields)
{
    const struct sq_h1_limits lim = {r->_max_head, r->_max_headers};
    struct sq_h1_response h;
    h.headers = fields;
    h.headers_cap = fields ? SQ_H1_READER_MAX_FIELDS : 0;
    int rc;
    unsigned eoh;
    *used = 0;
    if (SQ_LIKELY(r->_spill_len == 0)) {
        /* Fast path: parse in place. */
        rc = sq_h1_parse_response_head(buf, len, &lim, &h);
        if (rc > 0) {
            *used = (size_t)rc;
            rc = on_head(r, &h, buf, (size_t)rc, fields != NULL);
            return rc < 0 ? rc : 1;
        }
        if (rc < 0)
            return rc;
        /* A valid prefix (shorter than _max_head): keep it. It holds no blank line. */
        eoh = 0;
        if (scan_eoh(&eoh, buf, len) != 0)
            return -SQ_EPARSE;
        r->_eoh = eoh & 3;
        rc = spill_append(r, buf, len);
        if (rc < 0)
            return rc;
        *used = len;
        return 0;
    }
    eoh = r->_eoh;
    size_t end = scan_eoh(&eoh, buf, len);
    r->_eoh = eoh & 3;
    if (end == 0) {
        if ((size_t)r->_spill_len + len >= r->_max_head)
            return -SQ_ETOOBIG;
        rc = spill_append(r, buf, len);
        if (rc < 0)
            return rc;
        *used = len;
        return 0;
    }
    if ((size_t)r->_spill_len + end > r->_max_head)
        return -SQ_ETOOBIG;
    rc = spill_append(r, buf, end);
    if (rc < 0)
        return rc;
    const char *head = r->_spill->data;
    size_t head_len = r->_spill_len;
    rc = sq_h1_parse_response_head(head, head_len, &lim, &h);
    SQ_ASSERT_MSG(rc < 0 || (size_t)rc == head_len, "the scan and the parser end the head alike");
    if (rc >= 0 && (size_t)rc != head_len)
        rc = -SQ_EPARSE; /* cannot happen: both stop at the first blank line */
    if (rc >= 0)
        rc = on_head(r, &h, head, head_len, fields != NULL); /* it sees the spill buffer */
    spill_reset(r);
    if (rc < 0)
        return rc;
    *used = end;
    return 1;
}

/* The same, for a reader with a fields callback: the fields go into an array on this frame, kept
 * out of the framing-only path. */
__attribute__((noinline)) static int reader_head_fields(struct sq_h1_reader *r, const char *buf,
                                                        size_t len, size_t *used)
{
    struct sq_h1_header fields[SQ_H1_READER_MAX_FIELDS];
    return reader_head(r, buf, len, used, fields);
}

int sq_h1_reader_feed(struct sq_h1_reader *r, const char *buf, size_t len, size_t *consumed)
{
    size_t pos = 0, used = 0;
    int rc;
    *consumed = 0;
    if (r->_state != R_HEAD && r->_state != R_BODY)
        return -SQ_EUSAGE;
    while (r->_state == R_HEAD) {
        if (SQ_UNLIKELY(r->_fields))
            rc = reader_head_fields(r, buf + pos, len - pos, &used);
        else
            rc = reader_head(r, buf + pos, len - pos, &used, NULL);
        pos += used;
        if (rc < 0)
            goto fail;
        if (rc == 0) {
            *consumed = pos;
            return 0;
        }
    }
    SQ_ASSERT(r->_spill_len == 0); /* the spill holds only a head still incomplete */
    rc = sq_h1_body_feed(&r->body, buf + pos, len - pos, &used, r->_on_data, r->_ud);
    pos += used;
    if (rc < 0)
        goto fail;
    *consumed = pos;
    if (rc == 0)
        return 0;
    r->_state = R_DONE;
    return SQ_H1_DONE;
fail:
    *consumed = pos;
    spill_reset(r);
    r->_state = R_IDLE;
    return rc;
}

int sq_h1_reader_eof(struct sq_h1_reader *r)
{
    int rc;
    switch (r->_state) {
    case R_HEAD:
        if (r->_spill_len == 0 && r->head_bytes == 0)
            return 0;
        rc = -SQ_EPARSE;
        break;
    case R_BODY:
        rc = sq_h1_body_eof(&r->body);
        if (rc == SQ_H1_DONE) {
            r->_state = R_DONE;
            r->keep_alive = false;
            return SQ_H1_DONE;
        }
        break;
    default:
        return 0;
    }
    spill_reset(r);
    r->_state = R_IDLE;
    return rc;
}
