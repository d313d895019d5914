/* proto/nats.c - NATS client protocol: server-op parser, client encoders, PubAck classifier.
 *
 * The parser is stateless. One call looks at the start of the buffer, recognises the operation
 * name as soon as its first bytes arrive (garbage fails on its first byte, not at the cap), scans
 * the control line once for its end while checking every byte, and for MSG / HMSG then checks
 * that the whole payload and its CRLF are present. The invariant a driver relies on: a return of
 * SQ_NATS_PARTIAL means the bytes seen so far are a valid prefix of some operation, and nothing
 * in them will be re-judged differently once more bytes arrive.
 *
 * The encoders compute the exact length first and then write with memcpy, so a too-small buffer
 * costs one comparison and a PUB costs its copies plus one decimal conversion.
 */
#include "proto/nats.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "base/json.h"

#ifndef SQ_VERSION
#define SQ_VERSION "0"
#endif

#define PARTIAL SQ_NATS_PARTIAL

static int fail(struct sq_nats_event *ev, int rc, const char *why)
{
    ev->why = why;
    return rc;
}

static inline char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c + ('a' - 'A')) : c;
}

static inline bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* A byte of a subject, sid, reply or number token: printable, not a blank. */
static inline bool is_tok(char c)
{
    unsigned char u = (unsigned char)c;
    return u > 0x20 && u != 0x7f;
}

/* ---- numbers ---- */

/* Parses a decimal token of at most max_digits digits. False on anything else. */
static bool dec_u64(const char *p, size_t n, size_t max_digits, uint64_t *out)
{
    if (n == 0 || n > max_digits)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(unsigned char)p[i] - '0';
        if (d > 9)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static const char digits2[201] = "00010203040506070809"
                                 "10111213141516171819"
                                 "20212223242526272829"
                                 "30313233343536373839"
                                 "40414243444546474849"
                                 "50515253545556575859"
                                 "60616263646566676869"
                                 "70717273747576777879"
                                 "80818283848586878889"
                                 "90919293949596979899";

static inline size_t dec_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 100) {
        v /= 100;
        n += 2;
    }
    return n + (v >= 10);
}

/* Writes v in decimal (n = dec_len(v) digits) at out; returns out + n. */
static inline char *dec_put(char *out, uint64_t v, size_t n)
{
    char *p = out + n;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        p -= 2;
        memcpy(p, digits2 + 2 * r, 2);
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, digits2 + 2 * v, 2);
    } else {
        *--p = (char)('0' + v);
    }
    return out + n;
}

/* A size token: 0, -SQ_EPARSE (not all digits) or -SQ_ETOOBIG (over max). */
static int size_tok(struct sq_str t, uint64_t max, uint64_t *out)
{
    if (t.len == 0)
        return -SQ_EPARSE;
    uint64_t v = 0;
    for (size_t i = 0; i < t.len; i++) {
        unsigned d = (unsigned)(unsigned char)t.p[i] - '0';
        if (d > 9)
            return -SQ_EPARSE;
        if (v <= max) /* past max it only has to stay a number */
            v = v * 10 + d;
    }
    if (v > max)
        return -SQ_ETOOBIG;
    *out = v;
    return 0;
}

/* ---- the parser ---- */

enum { N_MSG, N_HMSG, N_PING, N_PONG, N_INFO, N_OK, N_ERR };

static const struct {
    const char *name; /* lowercase */
    uint8_t len, op;
    bool args; /* followed by blank + arguments (else by CRLF at once) */
} ops[] = {
    [N_MSG] = {"msg", 3, SQ_NATS_OP_MSG, true},     [N_HMSG] = {"hmsg", 4, SQ_NATS_OP_HMSG, true},
    [N_PING] = {"ping", 4, SQ_NATS_OP_PING, false}, [N_PONG] = {"pong", 4, SQ_NATS_OP_PONG, false},
    [N_INFO] = {"info", 4, SQ_NATS_OP_INFO, true},  [N_OK] = {"+ok", 3, SQ_NATS_OP_OK, false},
    [N_ERR] = {"-err", 4, SQ_NATS_OP_ERR, true},
};

/* Which operation buf starts with, judged from the bytes present: an index into ops, -1 when
 * more bytes are needed to tell (a lone "P"), -2 when no operation starts so. */
static int which_op(const char *buf, size_t len)
{
    int k;
    switch (lower(buf[0])) {
    case 'm':
        k = N_MSG;
        break;
    case 'h':
        k = N_HMSG;
        break;
    case 'i':
        k = N_INFO;
        break;
    case '+':
        k = N_OK;
        break;
    case '-':
        k = N_ERR;
        break;
    case 'p':
        if (len < 2)
            return -1;
        k = lower(buf[1]) == 'i' ? N_PING : N_PONG;
        break;
    default:
        return -2;
    }
    size_t n = len < ops[k].len ? len : ops[k].len;
    for (size_t i = 1; i < n; i++)
        if (lower(buf[i]) != ops[k].name[i])
            return -2;
    return k;
}

/* Header block of an HMSG: "NATS/1.0[ SSS[ description]]\r\n" then "Name: value\r\n" fields and
 * an empty line that ends exactly at the block's end. A prefix check (len short of the block) only
 * judges the bytes present. Returns 0, PARTIAL-compatible 1 ("fine so far") or -SQ_EPARSE. */
static int check_headers(const char *b, size_t len, size_t hdr_len, struct sq_nats_event *ev)
{
    static const char ver[] = "NATS/1.0";
    size_t vn = sizeof(ver) - 1;
    size_t n = len < vn ? len : vn;
    if (memcmp(b, ver, n) != 0)
        return fail(ev, -SQ_EPARSE, "NATS: header block does not start with NATS/1.0");
    if (len < hdr_len)
        return 1;
    /* The status line. */
    size_t i = vn;
    if (i < hdr_len && is_blank(b[i])) {
        while (i < hdr_len && is_blank(b[i]))
            i++;
        size_t s = i;
        while (i < hdr_len && (unsigned)(unsigned char)b[i] - '0' < 10)
            i++;
        if (i - s != 3)
            return fail(ev, -SQ_EPARSE, "NATS: header status is not three digits");
        ev->status = (b[s] - '0') * 100 + (b[s + 1] - '0') * 10 + (b[s + 2] - '0');
        while (i < hdr_len && is_blank(b[i]))
            i++;
        size_t d = i;
        while (i < hdr_len && b[i] != '\r') {
            unsigned char c = (unsigned char)b[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return fail(ev, -SQ_EPARSE, "NATS: control byte in the header status line");
            i++;
        }
        size_t e = i;
        while (e > d && is_blank(b[e - 1]))
            e--;
        ev->status_msg = (struct sq_str){b + d, e - d};
    }
    if (i + 1 >= hdr_len || b[i] != '\r' || b[i + 1] != '\n')
        return fail(ev, -SQ_EPARSE, "NATS: header version line does not end in CRLF");
    i += 2;
    /* Fields, then the empty line. */
    for (;;) {
        if (i + 1 >= hdr_len)
            return fail(ev, -SQ_EPARSE, "NATS: header block does not end with an empty line");
        if (b[i] == '\r') {
            if (b[i + 1] != '\n' || i + 2 != hdr_len)
                return fail(ev, -SQ_EPARSE, "NATS: header block does not end at its size");
            return 0;
        }
        size_t s = i;
        while (i < hdr_len && b[i] != ':') {
            unsigned char c = (unsigned char)b[i];
            if (c <= 0x20 || c == 0x7f)
                return fail(ev, -SQ_EPARSE, "NATS: bad byte in a header name");
            i++;
        }
        if (i == s || i == hdr_len)
            return fail(ev, -SQ_EPARSE, "NATS: header field without a name or a colon");
        i++;
        while (i < hdr_len && b[i] != '\r') {
            unsigned char c = (unsigned char)b[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return fail(ev, -SQ_EPARSE, "NATS: control byte in a header value");
            i++;
        }
        if (i + 1 >= hdr_len || b[i + 1] != '\n')
            return fail(ev, -SQ_EPARSE, "NATS: header field does not end in CRLF");
        i += 2;
    }
}

/* Judges the control-line bytes buf[from, to) (no LF among them): a CR must be followed by LF,
 * control bytes are refused except HTAB, and DEL only in text (INFO, -ERR). A CR's next byte is
 * looked at only below `limit`: for a line still without its LF that is the cap, so a CR in the
 * cap's last byte is over the cap whatever comes next, and every longer prefix judges alike. */
static int check_bytes(const char *buf, size_t from, size_t to, size_t limit, bool text,
                       struct sq_nats_event *ev)
{
    for (size_t i = from; i < to; i++) {
        unsigned char c = (unsigned char)buf[i];
        if ((c >= 0x20 && c != 0x7f) || c == '\t' || (c == 0x7f && text))
            continue;
        if (c == '\r') {
            if (i + 1 < limit && buf[i + 1] != '\n')
                return fail(ev, -SQ_EPARSE, "NATS: CR not followed by LF");
            continue;
        }
        return fail(ev, -SQ_EPARSE, "NATS: control byte in a control line");
    }
    return 0;
}

int sq_nats_parse(const char *buf, size_t len, const struct sq_nats_limits *lim,
                  struct sq_nats_event *ev, size_t *need)
{
    size_t max_line = SQ_NATS_DEFAULT_MAX_LINE, max_info = SQ_NATS_DEFAULT_MAX_INFO;
    size_t max_payload = SQ_NATS_DEFAULT_MAX_PAYLOAD;
    if (lim) {
        if (lim->max_line)
            max_line = lim->max_line;
        if (lim->max_info)
            max_info = lim->max_info;
        if (lim->max_payload)
            max_payload = lim->max_payload;
    }
    if (max_payload > SQ_NATS_MAX_PAYLOAD_LIMIT)
        max_payload = SQ_NATS_MAX_PAYLOAD_LIMIT;
    memset(ev, 0, sizeof(*ev));
    if (need)
        *need = 0;
    if (len == 0)
        return PARTIAL;

    int k = which_op(buf, len);
    if (k == -2)
        return fail(ev, -SQ_EPARSE, "NATS: unknown protocol operation");
    if (k == -1 || len <= ops[k].len)
        return PARTIAL;
    size_t i = ops[k].len;
    if (!ops[k].args) {
        /* PING, PONG, +OK: the name and CRLF, nothing else. */
        if (buf[i] != '\r' || (len > i + 1 && buf[i + 1] != '\n'))
            return fail(ev, -SQ_EPARSE, "NATS: bytes after an operation without arguments");
        if (len < i + 2)
            return PARTIAL;
        ev->op = ops[k].op;
        return (int)(i + 2);
    }
    if (!is_blank(buf[i]))
        return fail(ev, -SQ_EPARSE, "NATS: operation name not followed by a blank");

    /* Find the end of the control line: memchr for the LF, then the bytes are judged by the
     * tokenizer (MSG, HMSG) or check_bytes() (INFO, -ERR). A line without its LF yet is judged
     * here at once, so garbage fails on its bytes, not at the cap. */
    bool text = k == N_INFO || k == N_ERR;
    size_t cap = k == N_INFO ? max_info : max_line; /* whole line, CRLF included */
    size_t scan = len < cap ? len : cap;
    const char *nl = memchr(buf + i, '\n', scan - i);
    if (!nl) {
        int rc = check_bytes(buf, i, scan, scan, text, ev); /* look no further than the cap */
        if (rc < 0)
            return rc;
        if (scan == cap)
            return fail(ev, -SQ_ETOOBIG, "NATS: control line over the cap");
        return PARTIAL;
    }
    size_t eol = (size_t)(nl - buf);
    if (buf[eol - 1] != '\r')
        return fail(ev, -SQ_EPARSE, "NATS: line ends without CR");
    if (text) {
        int rc = check_bytes(buf, i, eol - 1, eol, true, ev);
        if (rc < 0)
            return rc;
    }
    size_t line_len = eol + 1;
    const char *a = buf + ops[k].len, *end = buf + eol - 1; /* args: [a, end) */
    while (a < end && is_blank(*a))
        a++;
    while (end > a && is_blank(end[-1]))
        end--;

    if (k == N_INFO) {
        ev->text = (struct sq_str){a, (size_t)(end - a)};
        struct sq_nats_info info;
        if (sq_nats_info_parse(ev->text, &info) < 0)
            return fail(ev, -SQ_EPARSE, "NATS: INFO is not a JSON object");
        ev->op = SQ_NATS_OP_INFO;
        return (int)line_len;
    }
    if (k == N_ERR) {
        if (end - a >= 2 && a[0] == '\'' && end[-1] == '\'') {
            a++;
            end--;
        }
        ev->text = (struct sq_str){a, (size_t)(end - a)};
        ev->op = SQ_NATS_OP_ERR;
        return (int)line_len;
    }

    /* MSG <subject> <sid> [reply] <#bytes> / HMSG <subject> <sid> [reply] <#hdr> <#total> */
    struct sq_str tok[6];
    size_t nt = 0;
    for (const char *p = a; p < end;) {
        if (nt == SQ_ARRAY_LEN(tok))
            return fail(ev, -SQ_EPARSE, "NATS: too many arguments");
        const char *s = p;
        while (p < end && is_tok(*p))
            p++;
        if (p == s) /* neither a blank nor a token byte: a control byte or a stray CR */
            return fail(ev, -SQ_EPARSE, "NATS: control byte in a control line");
        tok[nt++] = (struct sq_str){s, (size_t)(p - s)};
        while (p < end && is_blank(*p))
            p++;
    }
    bool hmsg = k == N_HMSG;
    size_t base = hmsg ? 4 : 3;
    if (nt != base && nt != base + 1)
        return fail(ev, -SQ_EPARSE,
                    hmsg ? "NATS: HMSG needs 4 or 5 arguments"
                         : "NATS: MSG needs 3 or 4 arguments");
    ev->subject = tok[0];
    ev->sid = tok[1];
    if (!dec_u64(tok[1].p, tok[1].len, 19, &ev->sid_num))
        ev->sid_num = UINT64_MAX;
    if (nt == base + 1)
        ev->reply = tok[2];
    uint64_t hdr = 0, total;
    int rc = size_tok(tok[nt - 1], max_payload, &total);
    if (rc == -SQ_EPARSE)
        return fail(ev, rc, "NATS: message size is not a decimal number");
    if (rc < 0)
        return fail(ev, rc, "NATS: message size over the cap");
    if (hmsg) {
        rc = size_tok(tok[nt - 2], max_payload, &hdr);
        if (rc == -SQ_EPARSE)
            return fail(ev, rc, "NATS: header size is not a decimal number");
        if (rc < 0 || hdr > total)
            return fail(ev, -SQ_EPARSE, "NATS: header size over the total size");
        if (hdr < 12)
            return fail(ev, -SQ_EPARSE, "NATS: header block shorter than NATS/1.0 and CRLFs");
    }
    size_t whole = line_len + (size_t)total + 2;
    if (len < whole) {
        if (hmsg) {
            size_t have = len - line_len;
            rc = check_headers(buf + line_len, have < hdr ? have : hdr, (size_t)hdr, ev);
            if (rc < 0)
                return rc;
            ev->status = 0;
            ev->status_msg = (struct sq_str){0};
        }
        if (need)
            *need = whole;
        return PARTIAL;
    }
    if (buf[whole - 2] != '\r' || buf[whole - 1] != '\n')
        return fail(ev, -SQ_EPARSE, "NATS: payload not followed by CRLF");
    if (hmsg) {
        rc = check_headers(buf + line_len, (size_t)hdr, (size_t)hdr, ev);
        if (rc < 0)
            return rc;
        ev->headers = (struct sq_str){buf + line_len, (size_t)hdr};
    }
    ev->payload = (struct sq_str){buf + line_len + hdr, (size_t)(total - hdr)};
    ev->op = ops[k].op;
    return (int)whole;
}

bool sq_nats_header_next(struct sq_str block, size_t *pos, struct sq_str *name,
                         struct sq_str *value)
{
    size_t i = *pos;
    const char *b = block.p;
    if (i == 0) {
        /* Skip the version / status line. */
        while (i + 1 < block.len && !(b[i] == '\r' && b[i + 1] == '\n'))
            i++;
        i += 2;
    }
    if (i + 1 >= block.len || b[i] == '\r') {
        *pos = block.len;
        return false;
    }
    size_t s = i;
    while (i < block.len && b[i] != ':')
        i++;
    if (i >= block.len) {
        *pos = block.len;
        return false;
    }
    *name = (struct sq_str){b + s, i - s};
    i++;
    while (i < block.len && is_blank(b[i]))
        i++;
    size_t v = i;
    while (i < block.len && b[i] != '\r')
        i++;
    size_t e = i;
    while (e > v && is_blank(b[e - 1]))
        e--;
    *value = (struct sq_str){b + v, e - v};
    *pos = i + 2;
    return true;
}

bool sq_nats_header_get(struct sq_str block, struct sq_str name, struct sq_str *value)
{
    size_t pos = 0;
    struct sq_str n, v;
    while (sq_nats_header_next(block, &pos, &n, &v)) {
        if (n.len != name.len)
            continue;
        size_t i = 0;
        while (i < n.len && lower(n.p[i]) == lower(name.p[i]))
            i++;
        if (i == n.len) {
            *value = v;
            return true;
        }
    }
    return false;
}

/* ---- JSON: one object's members, with base/json's walker ---- */

#define JSON_MAX_DEPTH 32 /* containers open at once, the object's own included */

/* Calls fn(ud, key, value) for each member of the object json (key without quotes, still
 * escaped; value its raw text, a string with its quotes). fn returns 0 to go on. Returns 0, fn's
 * nonzero value, or -SQ_EPARSE (json is not one well-formed object, only whitespace around). */
static int json_walk(struct sq_str json, int (*fn)(void *, struct sq_str, struct sq_str), void *ud)
{
    struct sq_json_walk w;
    struct sq_json_tok k, v;
    sq_json_walk_init(&w, json.p, json.len, JSON_MAX_DEPTH, 0);
    if (sq_json_next(&w, &k) < 0 || k.type != SQ_JSON_T_OBJ)
        return -SQ_EPARSE;
    for (;;) {
        if (sq_json_next(&w, &k) < 0)
            return -SQ_EPARSE;
        if (k.type == SQ_JSON_T_OBJ_END)
            break;
        if (sq_json_next(&w, &v) < 0 || sq_json_skip(&w, &v) < 0)
            return -SQ_EPARSE;
        int rc = fn(ud, (struct sq_str){json.p + k.at + 1, k.len - 2},
                    (struct sq_str){json.p + v.at, v.len});
        if (rc)
            return rc;
    }
    return sq_json_next(&w, &k) < 0 ? -SQ_EPARSE : 0; /* the end, or more after the object */
}

static bool key_is(struct sq_str k, const char *lit)
{
    size_t n = strlen(lit);
    return k.len == n && memcmp(k.p, lit, n) == 0;
}

struct get_ctx {
    const char *key;
    struct sq_str *value;
    bool found;
};

static int get_fn(void *ud, struct sq_str k, struct sq_str v)
{
    struct get_ctx *g = ud;
    if (!g->found && key_is(k, g->key)) {
        *g->value = v;
        g->found = true;
    }
    return 0;
}

int sq_nats_json_get(struct sq_str json, const char *key, struct sq_str *value)
{
    struct get_ctx g = {key, value, false};
    int rc = json_walk(json, get_fn, &g);
    if (rc < 0)
        return rc;
    return g.found ? 1 : 0;
}

static bool json_bool(struct sq_str v, bool *out)
{
    if (v.len == 4 && memcmp(v.p, "true", 4) == 0)
        *out = true;
    else if (v.len == 5 && memcmp(v.p, "false", 5) == 0)
        *out = false;
    else
        return false;
    return true;
}

/* A non-negative JSON integer (no fraction, no exponent). */
static bool json_u64(struct sq_str v, uint64_t *out)
{
    if (v.len > 1 && v.p[0] == '0')
        return false;
    return dec_u64(v.p, v.len, 19, out);
}

static bool json_int(struct sq_str v, int64_t *out)
{
    uint64_t u;
    bool neg = v.len > 0 && v.p[0] == '-';
    if (neg) {
        v.p++;
        v.len--;
    }
    if (!json_u64(v, &u) || u > INT64_MAX)
        return false;
    *out = neg ? -(int64_t)u : (int64_t)u;
    return true;
}

/* The inside of a JSON string value (still escaped). */
static bool json_str(struct sq_str v, struct sq_str *out)
{
    if (v.len < 2 || v.p[0] != '"')
        return false;
    *out = (struct sq_str){v.p + 1, v.len - 2};
    return true;
}

static int info_fn(void *ud, struct sq_str k, struct sq_str v)
{
    struct sq_nats_info *o = ud;
    int64_t n;
    uint64_t u;
    bool ok = true;
    if (key_is(k, "server_id"))
        ok = json_str(v, &o->server_id);
    else if (key_is(k, "version"))
        ok = json_str(v, &o->version);
    else if (key_is(k, "nonce"))
        ok = json_str(v, &o->nonce);
    else if (key_is(k, "proto"))
        ok = json_int(v, &n) && n >= INT_MIN && n <= INT_MAX && ((o->proto = (int)n), true);
    else if (key_is(k, "max_payload"))
        ok = json_int(v, &o->max_payload);
    else if (key_is(k, "headers"))
        ok = json_bool(v, &o->headers);
    else if (key_is(k, "jetstream"))
        ok = json_bool(v, &o->jetstream);
    else if (key_is(k, "auth_required"))
        ok = json_bool(v, &o->auth_required);
    else if (key_is(k, "tls_required"))
        ok = json_bool(v, &o->tls_required);
    else if (key_is(k, "tls_available"))
        ok = json_bool(v, &o->tls_available);
    else if (key_is(k, "client_id"))
        ok = json_u64(v, &u) && ((o->client_id = u), true);
    return ok ? 0 : -SQ_EPARSE;
}

int sq_nats_info_parse(struct sq_str json, struct sq_nats_info *out)
{
    struct sq_nats_info o;
    memset(&o, 0, sizeof(o));
    o.proto = -1;
    o.max_payload = -1;
    int rc = json_walk(json, info_fn, &o);
    if (rc < 0)
        return -SQ_EPARSE;
    *out = o;
    return 0;
}

/* ---- PubAck ---- */

struct ack_ctx {
    struct sq_nats_puback *out;
    bool has_stream, has_seq, dup, has_error;
    struct sq_str error;
};

static int ack_fn(void *ud, struct sq_str k, struct sq_str v)
{
    struct ack_ctx *a = ud;
    bool ok = true;
    if (key_is(k, "stream"))
        ok = a->has_stream = json_str(v, &a->out->stream);
    else if (key_is(k, "seq"))
        ok = a->has_seq = json_u64(v, &a->out->seq);
    else if (key_is(k, "duplicate"))
        ok = json_bool(v, &a->dup);
    else if (key_is(k, "error")) {
        a->error = v;
        a->has_error = true;
    }
    return ok ? 0 : -SQ_EPARSE;
}

static int err_fn(void *ud, struct sq_str k, struct sq_str v)
{
    struct sq_nats_puback *o = ud;
    int64_t n;
    bool ok = true;
    if (key_is(k, "code"))
        ok = json_int(v, &n) && n >= INT_MIN && n <= INT_MAX && ((o->code = (int)n), true);
    else if (key_is(k, "err_code"))
        ok = json_int(v, &n) && n >= INT_MIN && n <= INT_MAX && ((o->err_code = (int)n), true);
    else if (key_is(k, "description"))
        ok = json_str(v, &o->description);
    return ok ? 0 : -SQ_EPARSE;
}

int sq_nats_puback_parse(const char *payload, size_t len, struct sq_nats_puback *out)
{
    memset(out, 0, sizeof(*out));
    struct ack_ctx a = {.out = out};
    if (json_walk((struct sq_str){payload, len}, ack_fn, &a) != 0)
        return -SQ_EPARSE;
    if (a.has_error) {
        if (json_walk(a.error, err_fn, out) != 0)
            return -SQ_EPARSE;
        return SQ_NATS_ACK_ERROR;
    }
    if (!a.has_stream || !a.has_seq)
        return -SQ_EPARSE;
    return a.dup ? SQ_NATS_ACK_DUPLICATE : SQ_NATS_ACK_OK;
}

/* ---- encoders ---- */

static inline bool word_ok(const char *p)
{
    uint64_t w, x;
    memcpy(&w, p, 8);
    x = w ^ 0x7f7f7f7f7f7f7f7fULL;
    return !(((w - 0x2121212121212121ULL) & ~w & 0x8080808080808080ULL) |
             ((x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL));
}

bool sq_nats_subject_ok(struct sq_str s)
{
    if (s.len == 0)
        return false;
    if (s.len < 8) {
        for (size_t i = 0; i < s.len; i++)
            if (!is_tok(s.p[i]))
                return false;
        return true;
    }
    /* Eight bytes at a time, the last eight overlapping: no byte < 0x21 (the has-less-than
     * trick, exact as a yes/no; bytes with the high bit set are masked out) and no 0x7f (no
     * zero byte in w ^ 0x7f..). */
    for (size_t i = 0; i + 8 < s.len; i += 8)
        if (!word_ok(s.p + i))
            return false;
    return word_ok(s.p + s.len - 8);
}

/* A bounded writer for the rarely-used encoders (CONNECT): writes what fits, remembers overflow. */
struct w {
    char *p;
    size_t len, cap;
};

static void w_put(struct w *w, const char *s, size_t n)
{
    if (w->len + n <= w->cap && n)
        memcpy(w->p + w->len, s, n);
    w->len += n;
}

static void w_lit(struct w *w, const char *s)
{
    w_put(w, s, strlen(s));
}

static void w_json_str(struct w *w, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    w_put(w, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            w_put(w, e, 2);
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            w_put(w, e, 6);
        } else {
            w_put(w, (const char *)&c, 1);
        }
    }
    w_put(w, "\"", 1);
}

static void w_field_str(struct w *w, const char *name, const char *v)
{
    if (!v)
        return;
    w_put(w, ",\"", 2);
    w_lit(w, name);
    w_put(w, "\":", 2);
    w_json_str(w, v);
}

static void w_field_bool(struct w *w, const char *name, bool v)
{
    w_put(w, ",\"", 2);
    w_lit(w, name);
    w_put(w, "\":", 2);
    w_lit(w, v ? "true" : "false");
}

static int w_done(const struct w *w)
{
    if (w->len > w->cap || w->len > INT_MAX)
        return -SQ_ETOOBIG;
    return (int)w->len;
}

int sq_nats_encode_connect(char *buf, size_t cap, const struct sq_nats_connect_opts *o)
{
    if (o->no_responders && !o->headers)
        return -EINVAL; /* the server refuses no_responders without headers */
    struct w w = {buf, 0, cap};
    w_lit(&w, "CONNECT {\"verbose\":");
    w_lit(&w, o->verbose ? "true" : "false");
    w_field_bool(&w, "pedantic", o->pedantic);
    w_field_bool(&w, "tls_required", o->tls_required);
    w_field_str(&w, "name", o->name);
    w_field_str(&w, "lang", o->lang ? o->lang : "c");
    w_field_str(&w, "version", o->version ? o->version : SQ_VERSION);
    w_lit(&w, ",\"protocol\":1");
    w_field_bool(&w, "echo", o->echo);
    if (o->headers)
        w_field_bool(&w, "headers", true);
    if (o->no_responders)
        w_field_bool(&w, "no_responders", true);
    w_field_str(&w, "user", o->user);
    w_field_str(&w, "pass", o->pass);
    w_field_str(&w, "auth_token", o->auth_token);
    w_lit(&w, "}\r\n");
    return w_done(&w);
}

/* PUB, HPUB and SUB open alike: "<OP> <subject>[ <second>] ", where the second token is the
 * reply subject (PUB, HPUB) or the queue group (SUB) and is left out when empty. */
static inline bool subjects_ok(struct sq_str subject, struct sq_str second)
{
    return sq_nats_subject_ok(subject) && (!second.len || sq_nats_subject_ok(second));
}

static inline size_t line_head_len(size_t op_len, struct sq_str subject, struct sq_str second)
{
    return op_len + subject.len + (second.len ? second.len + 1 : 0) + 1;
}

/* op carries its trailing blank ("PUB "); returns the byte after the head's last blank. */
static inline char *line_head_put(char *p, const char *op, size_t op_len, struct sq_str subject,
                                  struct sq_str second)
{
    memcpy(p, op, op_len);
    p += op_len;
    memcpy(p, subject.p, subject.len);
    p += subject.len;
    if (second.len) {
        *p++ = ' ';
        memcpy(p, second.p, second.len);
        p += second.len;
    }
    *p++ = ' ';
    return p;
}

/* Appends the payload and its CRLF after a head of h bytes, or passes the head's error on. */
static int put_payload(char *buf, size_t cap, int h, const void *payload, size_t len)
{
    if (h < 0)
        return h;
    size_t need = (size_t)h + len + 2;
    if (need > cap || need > INT_MAX)
        return -SQ_ETOOBIG;
    if (len)
        memcpy(buf + h, payload, len);
    buf[h + len] = '\r';
    buf[h + len + 1] = '\n';
    return (int)need;
}

/* "<OP> <subject>[ <second>] <v>\r\n": PUB's head (v = payload length) and SUB (v = sid). */
static int number_line(char *buf, size_t cap, const char *op, size_t op_len, struct sq_str subject,
                       struct sq_str second, uint64_t v)
{
    if (!subjects_ok(subject, second))
        return -EINVAL;
    size_t nd = dec_len(v);
    size_t need = line_head_len(op_len, subject, second) + nd + 2;
    if (need > cap || need > INT_MAX)
        return -SQ_ETOOBIG;
    char *p = line_head_put(buf, op, op_len, subject, second);
    p = dec_put(p, v, nd);
    memcpy(p, "\r\n", 2);
    return (int)need;
}

int sq_nats_encode_pub_head(char *buf, size_t cap, struct sq_str subject, struct sq_str reply,
                            size_t payload_len)
{
    return number_line(buf, cap, "PUB ", 4, subject, reply, payload_len);
}

int sq_nats_encode_pub(char *buf, size_t cap, struct sq_str subject, struct sq_str reply,
                       const void *payload, size_t len)
{
    return put_payload(buf, cap, sq_nats_encode_pub_head(buf, cap, subject, reply, len), payload,
                       len);
}

static bool hdr_name_ok(struct sq_str s)
{
    if (s.len == 0)
        return false;
    for (size_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.p[i];
        if (c <= 0x20 || c == 0x7f || c == ':')
            return false;
    }
    return true;
}

static bool hdr_value_ok(struct sq_str s)
{
    for (size_t i = 0; i < s.len; i++)
        if (s.p[i] == '\r' || s.p[i] == '\n')
            return false;
    return true;
}

size_t sq_nats_headers_len(const struct sq_nats_header *h, size_t n)
{
    size_t len = 10 + 2; /* "NATS/1.0\r\n" ... "\r\n" */
    for (size_t i = 0; i < n; i++)
        len += h[i].name.len + 2 + h[i].value.len + 2;
    return len;
}

int sq_nats_encode_hpub_head(char *buf, size_t cap, struct sq_str subject, struct sq_str reply,
                             const struct sq_nats_header *h, size_t n, size_t payload_len)
{
    if (!subjects_ok(subject, reply))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!hdr_name_ok(h[i].name) || !hdr_value_ok(h[i].value))
            return -EINVAL;
    size_t hl = sq_nats_headers_len(h, n);
    size_t total = hl + payload_len;
    size_t nh = dec_len(hl), ntot = dec_len(total);
    size_t line = line_head_len(5, subject, reply) + nh + 1 + ntot + 2;
    size_t need = line + hl;
    if (need > cap || need > INT_MAX)
        return -SQ_ETOOBIG;
    char *p = line_head_put(buf, "HPUB ", 5, subject, reply);
    p = dec_put(p, hl, nh);
    *p++ = ' ';
    p = dec_put(p, total, ntot);
    memcpy(p, "\r\nNATS/1.0\r\n", 12);
    p += 12;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, h[i].name.p, h[i].name.len);
        p += h[i].name.len;
        memcpy(p, ": ", 2);
        p += 2;
        if (h[i].value.len)
            memcpy(p, h[i].value.p, h[i].value.len);
        p += h[i].value.len;
        memcpy(p, "\r\n", 2);
        p += 2;
    }
    memcpy(p, "\r\n", 2);
    return (int)need;
}

int sq_nats_encode_hpub(char *buf, size_t cap, struct sq_str subject, struct sq_str reply,
                        const struct sq_nats_header *h, size_t n, const void *payload, size_t len)
{
    return put_payload(buf, cap, sq_nats_encode_hpub_head(buf, cap, subject, reply, h, n, len),
                       payload, len);
}

int sq_nats_encode_sub(char *buf, size_t cap, struct sq_str subject, struct sq_str queue,
                       uint64_t sid)
{
    return number_line(buf, cap, "SUB ", 4, subject, queue, sid);
}

int sq_nats_encode_unsub(char *buf, size_t cap, uint64_t sid, uint64_t max)
{
    size_t nd = dec_len(sid), nm = max ? dec_len(max) + 1 : 0;
    size_t need = 6 + nd + nm + 2;
    if (need > cap)
        return -SQ_ETOOBIG;
    char *p = buf;
    memcpy(p, "UNSUB ", 6);
    p += 6;
    p = dec_put(p, sid, nd);
    if (max) {
        *p++ = ' ';
        p = dec_put(p, max, nm - 1);
    }
    memcpy(p, "\r\n", 2);
    return (int)need;
}
