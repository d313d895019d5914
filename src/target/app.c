/* target/app.c - /json/N, /sse, /login, /items, /cookie/set, /cookie/echo (see app.h).
 *
 * /json cache: JSON_SLOTS slots of atomic pointers to immutable entries (N, coding, bytes),
 * open addressing, never evicted, at most JSON_CACHE_MAX bytes in all. A worker that misses
 * builds the body (compressing the cached identity body), reserves its bytes, and publishes it
 * with a compare-and-swap into the first empty slot of its probe sequence; a worker that loses
 * the race to an equal entry frees its own and uses the winner. Lookups are acquire loads, no
 * lock. An entry is answered as the response's fill tail, which the server may still be sending
 * after the handler returned: that is why entries live until sq_target__app_free. A body that
 * does not fit the cache is built per request in the worker's own buffer and copied.
 *
 * Tokens: token = hex(nonce) + hex(SipHash-2-4(key, nonce)), nonce from the worker's PRNG, key
 * drawn once per process. Any worker verifies any token by recomputing the tag: no shared table,
 * no lock. It proves "this process issued it", nothing more (no expiry, no revocation); the
 * target is a test server, not a security boundary.
 *
 * OAuth2 tokens (POST /oauth/token, the client-credentials grant): hex(nonce) + hex(expiry) +
 * hex(tag), expiry in CLOCK_MONOTONIC ms, tag = SipHash(key, SipHash(key, nonce) ^ expiry); /items
 * takes them until they expire. The one shared state is the ordinal of token requests (an
 * atomic), which lets a test make chosen requests fail (?fail=N&fail_after=M).
 */
#include "target/app.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/b64.h"
#include "base/clock.h"
#include "base/str.h"
#include "base/text.h"
#include "http/codecs.h"
#include "target/target.h"

#define JSON_SLOTS     64
#define JSON_CACHE_MAX (256u << 20) /* bytes of cached /json bodies, all codings */
#define SCRATCH        (24 * 1024)  /* per worker: /login, /cookie/set, /cookie/echo answers */
#define MAX_COOKIES    32           /* pairs one /cookie/set may set */
#define SSE_DEFAULT_N  10
#define SSE_DEFAULT_MS 100

struct jentry {
    uint64_t n;
    int coding;
    size_t len;
    char data[];
};

struct slot {
    _Alignas(64) uint64_t rng;
    char *tmp; /* an uncached /json body, kept until the next one */
    char buf[SCRATCH];
};

struct sq_target__app {
    uint64_t key[2];
    int threads;
    struct slot *slots;
    _Atomic size_t cached;
    _Atomic(struct jentry *) cache[JSON_SLOTS];
    _Atomic uint64_t oauth_seq;    /* token requests since start or the last /stats/reset */
    char *oauth_id, *oauth_secret; /* --oauth-client: the one client accepted (NULL: any) */
};

/* ---- small helpers ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The query string of a request-target (after '?'), or an empty one. */
static void query_of(const struct sq_server_req *req, const char **q, size_t *n)
{
    const char *p = memchr(req->path, '?', req->path_len);
    *q = p ? p + 1 : req->path + req->path_len;
    *n = p ? req->path_len - (size_t)(p + 1 - req->path) : 0;
}

/* Next "k=v" pair of a query from *i ('&'-separated; empty pairs skipped). v_len is SIZE_MAX
 * when the pair has no '='. */
static bool query_next(const char *q, size_t n, size_t *i, const char **k, size_t *k_len,
                       const char **v, size_t *v_len)
{
    size_t at = *i;
    while (at < n && q[at] == '&')
        at++;
    if (at >= n)
        return false;
    size_t end = at;
    while (end < n && q[end] != '&')
        end++;
    const char *eq = memchr(q + at, '=', end - at);
    *k = q + at;
    *k_len = eq ? (size_t)(eq - (q + at)) : end - at;
    *v = eq ? eq + 1 : q + end;
    *v_len = eq ? (size_t)(q + end - (eq + 1)) : SIZE_MAX;
    *i = end;
    return true;
}

/* ---- Accept-Encoding ---- */

/* A qvalue (RFC 9110 12.4.2) in thousandths, or -1 when malformed. */
static int parse_q(const char *s, size_t n)
{
    if (n == 0 || (s[0] != '0' && s[0] != '1'))
        return -1;
    int v = (s[0] - '0') * 1000;
    if (n == 1)
        return v;
    if (s[1] != '.' || n > 5)
        return -1;
    int scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v += (s[i] - '0') * scale;
    }
    return v > 1000 ? -1 : v;
}

enum sq_coding sq_target_pick_coding(const char *accept, size_t len)
{
    int q[SQ_CODING_OTHER], star = -1;
    for (int c = 0; c < SQ_CODING_OTHER; c++)
        q[c] = -1;
    size_t i = 0;
    while (i < len) {
        size_t s = i;
        while (i < len && accept[i] != ',')
            i++;
        size_t e = i++;
        /* element: OWS token OWS *( ";" OWS param ) OWS */
        while (s < e && (accept[s] == ' ' || accept[s] == '\t'))
            s++;
        size_t t = s;
        while (t < e && accept[t] != ';' && accept[t] != ' ' && accept[t] != '\t')
            t++;
        if (t == s)
            continue;
        int w = 1000;
        size_t k = t;
        while (k < e) {
            while (k < e && (accept[k] == ' ' || accept[k] == '\t' || accept[k] == ';'))
                k++;
            size_t ps = k;
            while (k < e && accept[k] != ';')
                k++;
            size_t pe = k;
            while (pe > ps && (accept[pe - 1] == ' ' || accept[pe - 1] == '\t'))
                pe--;
            if (pe - ps >= 2 && (accept[ps] == 'q' || accept[ps] == 'Q') && accept[ps + 1] == '=')
                w = parse_q(accept + ps + 2, pe - ps - 2);
        }
        if (w < 0)
            continue; /* a malformed weight: ignore the element */
        const char *tok = accept + s;
        size_t tl = t - s;
        int c = -1;
        if (sq_ieq_cstr(tok, tl, "gzip") || sq_ieq_cstr(tok, tl, "x-gzip"))
            c = SQ_CODING_GZIP;
        else if (sq_ieq_cstr(tok, tl, "deflate"))
            c = SQ_CODING_DEFLATE;
        else if (sq_ieq_cstr(tok, tl, "br"))
            c = SQ_CODING_BR;
        else if (sq_ieq_cstr(tok, tl, "zstd"))
            c = SQ_CODING_ZSTD;
        else if (tl == 1 && tok[0] == '*')
            star = star > w ? star : w;
        if (c >= 0)
            q[c] = q[c] > w ? q[c] : w;
    }
    static const enum sq_coding pref[] = {SQ_CODING_ZSTD, SQ_CODING_BR, SQ_CODING_GZIP,
                                          SQ_CODING_DEFLATE};
    enum sq_coding best = SQ_CODING_NONE;
    int best_q = 0;
    for (size_t k = 0; k < sizeof(pref) / sizeof(pref[0]); k++) {
        int w = q[pref[k]] >= 0 ? q[pref[k]] : star;
        if (w > best_q) {
            best_q = w;
            best = pref[k];
        }
    }
    return best;
}

/* ---- /json ---- */

void sq_target_json_fill(char *out, size_t n)
{
    size_t i = 1;
    out[0] = '[';
    char item[96];
    for (uint32_t k = 0;; k++) {
        int len = snprintf(item, sizeof(item), "%s{\"id\":%u,\"name\":\"item-%u\",\"ok\":%s}",
                           k ? "," : "", k, k, k % 3 ? "true" : "false");
        if (len <= 0 || i + (size_t)len + 1 > n)
            break;
        memcpy(out + i, item, (size_t)len);
        i += (size_t)len;
    }
    memset(out + i, ' ', n - 1 - i); /* whitespace between tokens: still valid JSON */
    out[n - 1] = ']';
}

/* Compresses in[0, n) into a new entry, or NULL when out of memory (or, for br and zstd, when
 * their libraries cannot be opened: http/codecs.h). */
static struct jentry *compress_entry(const char *in, uint64_t n, enum sq_coding c)
{
    if ((c == SQ_CODING_BR || c == SQ_CODING_ZSTD) && sq_codecs_load(NULL, 0) < 0)
        return NULL;
    size_t cap;
    switch (c) {
    case SQ_CODING_GZIP:
    case SQ_CODING_DEFLATE:
        cap = compressBound((uLong)n) + 32; /* the gzip wrapper is 18 bytes, zlib's 6 */
        break;
    case SQ_CODING_BR:
        cap = BrotliEncoderMaxCompressedSize(n);
        break;
    default:
        cap = ZSTD_compressBound(n);
        break;
    }
    if (cap == 0)
        return NULL;
    struct jentry *e = malloc(sizeof(*e) + cap);
    if (!e)
        return NULL;
    size_t len = 0;
    bool ok = false;
    if (c == SQ_CODING_GZIP || c == SQ_CODING_DEFLATE) {
        z_stream z;
        memset(&z, 0, sizeof(z));
        if (deflateInit2(&z, 6, Z_DEFLATED, c == SQ_CODING_GZIP ? 31 : 15, 8, Z_DEFAULT_STRATEGY) ==
            Z_OK) {
            z.next_in = (Bytef *)(uintptr_t)in;
            z.avail_in = (uInt)n;
            z.next_out = (Bytef *)e->data;
            z.avail_out = (uInt)cap;
            ok = deflate(&z, Z_FINISH) == Z_STREAM_END;
            len = cap - z.avail_out;
            deflateEnd(&z);
        }
    } else if (c == SQ_CODING_BR) {
        len = cap;
        ok = BrotliEncoderCompress(5, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_TEXT, (size_t)n,
                                   (const uint8_t *)in, &len, (uint8_t *)e->data);
    } else {
        len = ZSTD_compress(e->data, cap, in, (size_t)n, 3);
        ok = !ZSTD_isError(len);
    }
    if (!ok) {
        free(e);
        return NULL;
    }
    struct jentry *small = realloc(e, sizeof(*e) + len);
    if (small)
        e = small;
    e->n = n;
    e->coding = (int)c;
    e->len = len;
    return e;
}

static struct jentry *build_entry(struct sq_target__app *a, uint64_t n, enum sq_coding c);

static size_t probe_start(uint64_t n, enum sq_coding c)
{
    return (size_t)(((n * 0x9e3779b97f4a7c15ull) ^ (uint64_t)c * 0xff51afd7ed558ccdull) >> 58) %
           JSON_SLOTS;
}

static struct jentry *cache_find(struct sq_target__app *a, uint64_t n, enum sq_coding c)
{
    size_t h = probe_start(n, c);
    for (size_t k = 0; k < JSON_SLOTS; k++) {
        struct jentry *e =
            atomic_load_explicit(&a->cache[(h + k) % JSON_SLOTS], memory_order_acquire);
        if (!e)
            return NULL;
        if (e->n == n && e->coding == (int)c)
            return e;
    }
    return NULL;
}

/* Publishes e. Returns the cached entry for (n, c) - e, or an equal one another worker put in
 * first (e is then freed) - or NULL when the cache is full (e is left to the caller). */
static struct jentry *cache_put(struct sq_target__app *a, struct jentry *e)
{
    size_t bytes = sizeof(*e) + e->len;
    if (atomic_fetch_add_explicit(&a->cached, bytes, memory_order_relaxed) + bytes >
        JSON_CACHE_MAX) {
        atomic_fetch_sub_explicit(&a->cached, bytes, memory_order_relaxed);
        return NULL;
    }
    size_t h = probe_start(e->n, (enum sq_coding)e->coding);
    for (size_t k = 0; k < JSON_SLOTS; k++) {
        _Atomic(struct jentry *) *slot = &a->cache[(h + k) % JSON_SLOTS];
        struct jentry *cur = NULL;
        if (atomic_compare_exchange_strong_explicit(slot, &cur, e, memory_order_release,
                                                    memory_order_acquire))
            return e;
        if (cur->n == e->n && cur->coding == e->coding) {
            atomic_fetch_sub_explicit(&a->cached, bytes, memory_order_relaxed);
            free(e);
            return cur;
        }
    }
    atomic_fetch_sub_explicit(&a->cached, bytes, memory_order_relaxed);
    return NULL;
}

/* A body for (n, c): from the cache, or built (and cached when it fits). *owned is set when the
 * caller must free the result (not cached). NULL: out of memory. */
static struct jentry *json_get(struct sq_target__app *a, uint64_t n, enum sq_coding c, bool *owned)
{
    *owned = false;
    struct jentry *e = cache_find(a, n, c);
    if (e)
        return e;
    e = build_entry(a, n, c);
    if (!e)
        return NULL;
    struct jentry *put = cache_put(a, e);
    if (put)
        return put;
    *owned = true;
    return e;
}

static struct jentry *build_entry(struct sq_target__app *a, uint64_t n, enum sq_coding c)
{
    if (c == SQ_CODING_NONE) {
        struct jentry *e = malloc(sizeof(*e) + n);
        if (!e)
            return NULL;
        sq_target_json_fill(e->data, (size_t)n);
        e->n = n;
        e->coding = SQ_CODING_NONE;
        e->len = n;
        return e;
    }
    bool owned;
    struct jentry *plain = json_get(a, n, SQ_CODING_NONE, &owned);
    if (!plain)
        return NULL;
    struct jentry *e = compress_entry(plain->data, n, c);
    if (owned)
        free(plain);
    return e;
}

void sq_target__json(struct sq_target__app *a, const struct sq_server_req *req,
                     struct sq_server_resp *resp, uint64_t n)
{
    static const char *const hdrs[] = {
        [SQ_CODING_NONE] = "Vary: Accept-Encoding\r\n",
        [SQ_CODING_GZIP] = "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n",
        [SQ_CODING_DEFLATE] = "Content-Encoding: deflate\r\nVary: Accept-Encoding\r\n",
        [SQ_CODING_BR] = "Content-Encoding: br\r\nVary: Accept-Encoding\r\n",
        [SQ_CODING_ZSTD] = "Content-Encoding: zstd\r\nVary: Accept-Encoding\r\n",
    };
    const struct sq_h1_header *ae = sq_server_req_header(req, "accept-encoding");
    enum sq_coding c = ae ? sq_target_pick_coding(ae->value, ae->value_len) : SQ_CODING_NONE;
    bool owned;
    struct jentry *e = json_get(a, n, c, &owned);
    if (!e) {
        resp->status = 500;
        return;
    }
    resp->content_type = "application/json";
    resp->headers = hdrs[c];
    resp->headers_len = strlen(hdrs[c]);
    if (!owned) {
        resp->fill = e->data; /* immutable until the target is freed */
        resp->fill_len = e->len;
        resp->fill_total = e->len;
        return;
    }
    struct slot *s = &a->slots[req->worker];
    free(s->tmp); /* the previous uncached body was copied when it was answered */
    s->tmp = (char *)e;
    resp->body = e->data;
    resp->body_len = e->len;
    resp->delay_copy = true;
}

/* ---- /sse ---- */

static size_t sse_piece(void *ud, uint32_t seq, uint32_t count, char *buf, size_t cap)
{
    (void)ud;
    int n = snprintf(buf, cap, "id: %u\ndata: {\"id\":%u,\"of\":%u}\n\n", seq, seq, count);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

void sq_target__sse(struct sq_target__app *a, const struct sq_server_req *req,
                    struct sq_server_resp *resp)
{
    const char *q, *k, *v;
    size_t qn, kl, vl, i = 0;
    uint64_t events = SSE_DEFAULT_N, interval = SSE_DEFAULT_MS;
    query_of(req, &q, &qn);
    while (query_next(q, qn, &i, &k, &kl, &v, &vl)) {
        bool ok = true;
        if (kl == 6 && !memcmp(k, "events", 6))
            ok = vl != SIZE_MAX && sq_target_parse_u64(v, vl, SQ_TARGET_MAX_EVENTS, &events);
        else if (kl == 8 && !memcmp(k, "interval", 8))
            ok = vl != SIZE_MAX && sq_target_parse_u64(v, vl, SQ_TARGET_MAX_INTERVAL, &interval);
        if (!ok) {
            resp->status = 400;
            return;
        }
    }
    resp->content_type = "text/event-stream";
    resp->headers = "Cache-Control: no-cache\r\n";
    resp->headers_len = strlen(resp->headers);
    if (events == 0)
        return; /* an empty stream: Content-Length: 0 */
    resp->stream = sse_piece;
    resp->stream_ud = a;
    resp->stream_count = (uint32_t)events;
    resp->stream_interval_ns = (int64_t)interval * SQ_NS_PER_MS;
}

/* ---- tokens ---- */

static inline uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = rotl(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = rotl(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = rotl(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = rotl(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = rotl(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = rotl(v2, 32);                                                                         \
    } while (0)

uint64_t sq_target_siphash(const uint64_t key[2], uint64_t m)
{
    uint64_t v0 = key[0] ^ 0x736f6d6570736575ull, v1 = key[1] ^ 0x646f72616e646f6dull;
    uint64_t v2 = key[0] ^ 0x6c7967656e657261ull, v3 = key[1] ^ 0x7465646279746573ull;
    v3 ^= m; /* the one 8-byte block */
    SIPROUND;
    SIPROUND;
    v0 ^= m;
    uint64_t b = (uint64_t)8 << 56; /* the last block: the length, no bytes left */
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

static void put_hex64(char *o, uint64_t v)
{
    for (int i = 15; i >= 0; i--, v >>= 4)
        o[i] = sq_hex_lower[v & 15];
}

static bool get_hex64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        int d = sq_hex_value((unsigned char)s[i]);
        if (d < 0)
            return false;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return true;
}

void sq_target_token_make(const uint64_t key[2], uint64_t nonce, char *out)
{
    put_hex64(out, nonce);
    put_hex64(out + 16, sq_target_siphash(key, nonce));
}

bool sq_target_token_check(const uint64_t key[2], const char *tok, size_t len)
{
    uint64_t nonce, tag;
    if (len != SQ_TARGET_TOKEN_LEN || !get_hex64(tok, &nonce) || !get_hex64(tok + 16, &tag))
        return false;
    return sq_target_siphash(key, nonce) == tag;
}

void sq_target__login(struct sq_target__app *a, const struct sq_server_req *req,
                      struct sq_server_resp *resp)
{
    struct slot *s = &a->slots[req->worker];
    char *o = s->buf;
    size_t len = 0;
    memcpy(o, "{\"token\":\"", 10);
    len += 10;
    sq_target_token_make(a->key, splitmix(&s->rng), o + len);
    len += SQ_TARGET_TOKEN_LEN;
    memcpy(o + len, "\"}\n", 3);
    len += 3;
    resp->content_type = "application/json";
    resp->body = o;
    resp->body_len = len;
    resp->delay_copy = true;
}

/* ---- OAuth2 client credentials (RFC 6749 4.4) ---- */

static uint64_t oauth_tag(const uint64_t key[2], uint64_t nonce, uint64_t expiry_ms)
{
    return sq_target_siphash(key, sq_target_siphash(key, nonce) ^ expiry_ms);
}

void sq_target_oauth_make(const uint64_t key[2], uint64_t nonce, uint64_t expiry_ms, char *out)
{
    put_hex64(out, nonce);
    put_hex64(out + 16, expiry_ms);
    put_hex64(out + 32, oauth_tag(key, nonce, expiry_ms));
}

int sq_target_oauth_check(const uint64_t key[2], const char *tok, size_t len, uint64_t now_ms)
{
    uint64_t nonce, expiry, tag;
    if (len != SQ_TARGET_OAUTH_TOKEN_LEN || !get_hex64(tok, &nonce) ||
        !get_hex64(tok + 16, &expiry) || !get_hex64(tok + 32, &tag) ||
        oauth_tag(key, nonce, expiry) != tag)
        return -1;
    return now_ms < expiry ? 1 : 0;
}

static uint64_t now_ms(void)
{
    return (uint64_t)(sq_now_ns() / SQ_NS_PER_MS);
}

/* A decimal of seconds with up to three decimals ("3", "0.5"), in ms; false otherwise. */
static bool parse_secs_ms(const char *s, size_t n, uint64_t *ms)
{
    const char *dot = memchr(s, '.', n);
    size_t ip = dot ? (size_t)(dot - s) : n, fp = dot ? n - ip - 1 : 0;
    uint64_t whole, frac = 0;
    if (ip == 0 || fp > 3 || (dot && fp == 0) || !sq_target_parse_u64(s, ip, 86400, &whole))
        return false;
    if (fp && !sq_target_parse_u64(dot + 1, fp, 999, &frac))
        return false;
    for (size_t i = fp; i < 3; i++)
        frac *= 10;
    *ms = whole * 1000 + frac;
    return true;
}

/* Form-decodes v[0, n) into out (cap bytes, NUL-terminated): '+' is a space, %XX a byte.
 * Returns false when it does not fit or a %-escape is malformed. */
static bool form_decode(const char *v, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o + 1 >= cap)
            return false;
        if (v[i] == '+') {
            out[o++] = ' ';
        } else if (v[i] == '%') {
            int hi = i + 2 < n ? sq_hex_value((unsigned char)v[i + 1]) : -1;
            int lo = i + 2 < n ? sq_hex_value((unsigned char)v[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return false;
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = v[i];
        }
    }
    out[o] = '\0';
    return true;
}

static void oauth_error(struct sq_server_resp *resp, int status, const char *body,
                        const char *headers)
{
    resp->status = status;
    resp->content_type = "application/json";
    resp->headers = headers;
    resp->headers_len = strlen(headers);
    resp->body = body;
    resp->body_len = strlen(body);
}

int sq_target__oauth(struct sq_target__app *a, const struct sq_server_req *req,
                     struct sq_server_resp *resp)
{
    static const char no_store[] = "Cache-Control: no-store\r\nPragma: no-cache\r\n";
    uint64_t seq = atomic_fetch_add_explicit(&a->oauth_seq, 1, memory_order_relaxed) + 1;
    /* the query: ttl (the token's lifetime), fail / fail_after (test knobs) */
    const char *q, *k, *v;
    size_t qn, i = 0, kl, vl;
    query_of(req, &q, &qn);
    uint64_t ttl_ms = 3600 * 1000, fail = 0, fail_after = 0;
    while (query_next(q, qn, &i, &k, &kl, &v, &vl)) {
        bool ok = true;
        if (kl == 3 && memcmp(k, "ttl", 3) == 0)
            ok = vl != SIZE_MAX && parse_secs_ms(v, vl, &ttl_ms) && ttl_ms > 0;
        else if (kl == 4 && memcmp(k, "fail", 4) == 0)
            ok = vl != SIZE_MAX && sq_target_parse_u64(v, vl, 1000000, &fail);
        else if (kl == 10 && memcmp(k, "fail_after", 10) == 0)
            ok = vl != SIZE_MAX && sq_target_parse_u64(v, vl, 1000000, &fail_after);
        if (!ok) {
            oauth_error(resp, 400, "{\"error\":\"invalid_request\"}\n", no_store);
            return SQ_TARGET_OAUTH_BAD;
        }
    }
    if (fail && seq > fail_after && seq <= fail_after + fail) {
        oauth_error(resp, 503, "{\"error\":\"temporarily_unavailable\"}\n",
                    "Cache-Control: no-store\r\nRetry-After: 1\r\n");
        return SQ_TARGET_OAUTH_REFUSED;
    }
    /* the form body: grant_type, client_id, client_secret, scope */
    struct slot *s = &a->slots[req->worker];
    char *grant = s->buf, *id = s->buf + 64, *secret = s->buf + 1024, *scope = s->buf + 2048;
    grant[0] = id[0] = secret[0] = scope[0] = '\0';
    const char *b = req->body ? req->body : "";
    i = 0;
    while (query_next(b, req->body_len, &i, &k, &kl, &v, &vl)) {
        if (vl == SIZE_MAX)
            continue;
        bool ok = true;
        if (kl == 10 && memcmp(k, "grant_type", 10) == 0)
            ok = form_decode(v, vl, grant, 64);
        else if (kl == 9 && memcmp(k, "client_id", 9) == 0)
            ok = form_decode(v, vl, id, 960);
        else if (kl == 13 && memcmp(k, "client_secret", 13) == 0)
            ok = form_decode(v, vl, secret, 1024);
        else if (kl == 5 && memcmp(k, "scope", 5) == 0)
            ok = form_decode(v, vl, scope, 1024);
        if (!ok) {
            oauth_error(resp, 400, "{\"error\":\"invalid_request\"}\n", no_store);
            return SQ_TARGET_OAUTH_BAD;
        }
    }
    if (strcmp(grant, "client_credentials") != 0) {
        oauth_error(resp, 400, "{\"error\":\"unsupported_grant_type\"}\n", no_store);
        return SQ_TARGET_OAUTH_BAD;
    }
    /* the client: HTTP Basic of the form-encoded pair (RFC 6749 2.3.1), else the body's */
    bool client = true;
    const struct sq_h1_header *h = sq_server_req_header(req, "authorization");
    if (h && h->value_len > 6 && sq_ieq_cstr(h->value, 5, "basic") && h->value[5] == ' ') {
        unsigned char *dec = NULL;
        size_t dl = 0;
        client = false;
        if (sq_b64_decode(h->value + 6, h->value_len - 6, &dec, &dl) == 0) {
            const unsigned char *colon = memchr(dec, ':', dl);
            client =
                colon && form_decode((const char *)dec, (size_t)(colon - dec), id, 960) &&
                form_decode((const char *)colon + 1, dl - (size_t)(colon + 1 - dec), secret, 1024);
            free(dec);
        }
    }
    client = client && id[0] && secret[0];
    if (client && a->oauth_id)
        client = strcmp(id, a->oauth_id) == 0 && strcmp(secret, a->oauth_secret) == 0;
    if (!client) {
        oauth_error(resp, 401, "{\"error\":\"invalid_client\"}\n",
                    "WWW-Authenticate: Basic realm=\"squall\"\r\nCache-Control: no-store\r\n");
        return SQ_TARGET_OAUTH_BAD;
    }
    char *o = s->buf + 4096;
    size_t cap = SCRATCH - 4096, len = 0;
    len += (size_t)snprintf(o, cap, "{\"access_token\":\"");
    sq_target_oauth_make(a->key, splitmix(&s->rng), now_ms() + ttl_ms, o + len);
    len += SQ_TARGET_OAUTH_TOKEN_LEN;
    len += (size_t)snprintf(o + len, cap - len, "\",\"token_type\":\"Bearer\",\"expires_in\":%llu",
                            (unsigned long long)((ttl_ms + 999) / 1000));
    if (scope[0]) {
        len += (size_t)snprintf(o + len, cap - len, ",\"scope\":\"");
        len += sq_target_json_escape(o + len, cap - len - 8, scope, strlen(scope));
        len += (size_t)snprintf(o + len, cap - len, "\"");
    }
    len += (size_t)snprintf(o + len, cap - len, "}\n");
    resp->content_type = "application/json";
    resp->headers = no_store;
    resp->headers_len = sizeof(no_store) - 1;
    resp->body = o;
    resp->body_len = len;
    resp->delay_copy = true;
    return SQ_TARGET_OAUTH_ISSUED;
}

int sq_target__app_oauth_client(struct sq_target__app *a, const char *id_secret)
{
    const char *colon = strchr(id_secret, ':');
    if (!colon || colon == id_secret || !colon[1])
        return -EINVAL;
    a->oauth_id = strndup(id_secret, (size_t)(colon - id_secret));
    a->oauth_secret = strdup(colon + 1);
    return a->oauth_id && a->oauth_secret ? 0 : -ENOMEM;
}

void sq_target__oauth_reset(struct sq_target__app *a)
{
    atomic_store_explicit(&a->oauth_seq, 0, memory_order_relaxed);
}

int sq_target__items(struct sq_target__app *a, const struct sq_server_req *req,
                     struct sq_server_resp *resp)
{
    static const char ok_body[] = "{\"count\":3,\"items\":[{\"id\":1,\"name\":\"alpha\"},"
                                  "{\"id\":2,\"name\":\"beta\"},{\"id\":3,\"name\":\"gamma\"}]}\n";
    static const char no_body[] = "{\"error\":\"unauthorized\"}\n";
    const struct sq_h1_header *h = sq_server_req_header(req, "authorization");
    bool ok = false, expired = false;
    if (h && h->value_len > 7 && sq_ieq_cstr(h->value, 6, "bearer") &&
        (h->value[6] == ' ' || h->value[6] == '\t')) {
        size_t i = 7;
        while (i < h->value_len && (h->value[i] == ' ' || h->value[i] == '\t'))
            i++;
        ok = sq_target_token_check(a->key, h->value + i, h->value_len - i);
        if (!ok) {
            int oc = sq_target_oauth_check(a->key, h->value + i, h->value_len - i, now_ms());
            ok = oc == 1;
            expired = oc == 0;
        }
    }
    resp->content_type = "application/json";
    if (ok) {
        resp->body = ok_body;
        resp->body_len = sizeof(ok_body) - 1;
    } else {
        resp->status = 401;
        resp->headers = "WWW-Authenticate: Bearer\r\n";
        resp->headers_len = strlen(resp->headers);
        resp->body = no_body;
        resp->body_len = sizeof(no_body) - 1;
    }
    return ok ? SQ_TARGET_ITEMS_OK : expired ? SQ_TARGET_ITEMS_EXPIRED : SQ_TARGET_ITEMS_UNAUTH;
}

/* ---- cookies ---- */

static bool is_token_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* cookie-octet (RFC 6265 4.1.1): no CTL, whitespace, DQUOTE, comma, semicolon, backslash. */
static bool is_cookie_octet(unsigned char c)
{
    return c == 0x21 || (c >= 0x23 && c <= 0x2b) || (c >= 0x2d && c <= 0x3a) ||
           (c >= 0x3c && c <= 0x5b) || (c >= 0x5d && c <= 0x7e);
}

void sq_target__cookie(struct sq_target__app *a, const struct sq_server_req *req,
                       struct sq_server_resp *resp, bool echo)
{
    struct slot *s = &a->slots[req->worker];
    char *o = s->buf;
    size_t len = 0;
    if (echo) {
        /* every Cookie field, joined as one (RFC 6265 5.4 sends one; be lenient) */
        for (size_t i = 0; i < req->num_headers; i++) {
            const struct sq_h1_header *h = &req->headers[i];
            if (!sq_ieq_cstr(h->name, h->name_len, "cookie") || h->value_len == 0)
                continue;
            if (len + h->value_len + 2 > SCRATCH)
                break; /* cannot happen: a request head is at most 8 KiB */
            if (len) {
                memcpy(o + len, "; ", 2);
                len += 2;
            }
            memcpy(o + len, h->value, h->value_len);
            len += h->value_len;
        }
        resp->content_type = "text/plain";
        resp->body = o;
        resp->body_len = len;
        resp->delay_copy = true;
        return;
    }
    const char *q, *k, *v;
    size_t qn, kl, vl, i = 0;
    int count = 0;
    query_of(req, &q, &qn);
    while (query_next(q, qn, &i, &k, &kl, &v, &vl)) {
        bool ok = kl > 0 && vl != SIZE_MAX && ++count <= MAX_COOKIES;
        for (size_t j = 0; ok && j < kl; j++)
            ok = is_token_char((unsigned char)k[j]);
        for (size_t j = 0; ok && j < vl; j++)
            ok = is_cookie_octet((unsigned char)v[j]);
        if (!ok || len + kl + vl + 32 > SCRATCH / 2) {
            resp->status = 400;
            return;
        }
        len += (size_t)snprintf(o + len, SCRATCH / 2 - len, "Set-Cookie: %.*s=%.*s; Path=/\r\n",
                                (int)kl, k, (int)vl, v);
    }
    if (count == 0) {
        resp->status = 400;
        return;
    }
    char *body = o + SCRATCH / 2;
    resp->headers = o;
    resp->headers_len = len;
    resp->content_type = "application/json";
    resp->body = body;
    resp->body_len = (size_t)snprintf(body, 32, "{\"set\":%d}\n", count);
    resp->delay_copy = true;
}

/* ---- redirects ---- */

/* Visible ASCII: what a Location or a query value may hold here (no CR, LF, space). */
static bool visible(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

void sq_target__redirect(struct sq_target__app *a, const struct sq_server_req *req,
                         struct sq_server_resp *resp, uint64_t n)
{
    struct slot *s = &a->slots[req->worker];
    const char *q, *k, *v;
    size_t qn, kl, vl, i = 0;
    const char *to = "/ok", *cookie = NULL;
    size_t to_len = 3, cookie_len = 0;
    int status = 302;
    query_of(req, &q, &qn);
    while (query_next(q, qn, &i, &k, &kl, &v, &vl)) {
        bool ok = vl != SIZE_MAX && visible(v, vl);
        if (ok && kl == 6 && memcmp(k, "status", 6) == 0) {
            uint64_t st = 0;
            ok = sq_target_parse_u64(v, vl, 308, &st) &&
                 (st == 301 || st == 302 || st == 303 || st == 307 || st == 308);
            status = (int)st;
        } else if (ok && kl == 2 && memcmp(k, "to", 2) == 0) {
            to = v;
            to_len = vl;
            ok = vl > 0;
        } else if (ok && kl == 6 && memcmp(k, "cookie", 6) == 0) {
            const char *eq = memchr(v, '=', vl);
            ok = eq && eq > v;
            for (const char *c = v; ok && c < eq; c++)
                ok = is_token_char((unsigned char)*c);
            for (const char *c = eq ? eq + 1 : v; ok && c < v + vl; c++)
                ok = is_cookie_octet((unsigned char)*c);
            cookie = v;
            cookie_len = vl;
        }
        if (!ok) {
            resp->status = 400;
            return;
        }
    }
    char *o = s->buf;
    size_t len = 0, cap = SCRATCH;
    if (n == 0)
        len = (size_t)snprintf(o, cap, "Location: /redirect/loop%s%.*s\r\n", qn ? "?" : "", (int)qn,
                               q);
    else if (n == 1)
        len = (size_t)snprintf(o, cap, "Location: %.*s\r\n", (int)to_len, to);
    else
        len = (size_t)snprintf(o, cap, "Location: /redirect/%llu%s%.*s\r\n",
                               (unsigned long long)(n - 1), qn ? "?" : "", (int)qn, q);
    if (cookie && len < cap)
        len += (size_t)snprintf(o + len, cap - len, "Set-Cookie: %.*s; Path=/\r\n", (int)cookie_len,
                                cookie);
    if (len >= cap) {
        resp->status = 400; /* cannot happen: a request head is at most 8 KiB */
        return;
    }
    resp->status = status;
    resp->headers = o;
    resp->headers_len = len;
    resp->delay_copy = true;
}

/* ---- lifetime ---- */

static void fill_random(void *p, size_t n)
{
    unsigned char *b = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(b + got, n - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got < n) { /* no entropy source: still unpredictable enough for a test server */
        uint64_t s = (uint64_t)sq_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL);
        for (; got < n; got++)
            b[got] = (unsigned char)splitmix(&s);
    }
}

int sq_target__app_new(int threads, struct sq_target__app **out)
{
    struct sq_target__app *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    size_t size = (size_t)threads * sizeof(struct slot);
    a->slots = aligned_alloc(_Alignof(struct slot), size);
    if (!a->slots) {
        free(a);
        return -ENOMEM;
    }
    memset(a->slots, 0, size);
    a->threads = threads;
    fill_random(a->key, sizeof(a->key));
    uint64_t seed;
    fill_random(&seed, sizeof(seed));
    for (int w = 0; w < threads; w++)
        a->slots[w].rng = splitmix(&seed);
    *out = a;
    return 0;
}

void sq_target__app_free(struct sq_target__app *a)
{
    if (!a)
        return;
    for (int w = 0; w < a->threads; w++)
        free(a->slots[w].tmp);
    free(a->slots);
    for (int k = 0; k < JSON_SLOTS; k++)
        free(atomic_load_explicit(&a->cache[k], memory_order_relaxed));
    free(a->oauth_id);
    free(a->oauth_secret);
    free(a);
}
