/* fuzz_h1_response.c - response heads, the chunked framer and the response reader.
 *
 * Input: byte 0 = flags (bit 0: HEAD request, bit 1: small limits), byte 1 = split seed, then
 * the byte stream a server would send. Checks: no over-read (every buffer is an exact-size
 * heap copy under ASan), spans inside the input, and that the reader gives the same responses
 * whether the stream arrives whole or in random pieces: status, keep-alive, body and head sizes,
 * Content-Encoding and event-stream, and the head callback's bytes (once per final response,
 * before its body, one whole head that parses to its own length).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/h1.h"

#define MAX_RESP 64

struct outcome {
    int n;
    uint16_t status[MAX_RESP];
    bool ka[MAX_RESP];
    uint64_t body[MAX_RESP];
    uint32_t head[MAX_RESP];
    uint8_t ce[MAX_RESP];
    bool es[MAX_RESP];
    uint32_t cb_len[MAX_RESP]; /* the head callback's length, and a hash of its bytes */
    uint32_t cb_hash[MAX_RESP];
    int err;
    bool by_eof;
    /* the response in progress */
    int calls;
    uint32_t len, hash;
    const struct sq_h1_reader *r;
    const struct sq_h1_limits *lim;
};

static int on_head(void *ud, const char *head, size_t len)
{
    struct outcome *o = ud;
    if (o->calls++ || o->r->body.bytes != 0)
        abort(); /* once per final response, before any body byte */
    struct sq_h1_response h = {0};
    if (sq_h1_parse_response_head(head, len, o->lim, &h) != (int)len || h.status != o->r->status ||
        h.content_encoding != o->r->content_encoding || h.event_stream != o->r->event_stream)
        abort();
    uint32_t x = 2166136261u;
    for (size_t i = 0; i < len; i++)
        x = (x ^ (unsigned char)head[i]) * 16777619u;
    o->len = (uint32_t)len;
    o->hash = x;
    return 0;
}

static uint32_t next_rand(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static void record(struct outcome *o, const struct sq_h1_reader *r)
{
    if (o->n < MAX_RESP) {
        o->status[o->n] = r->status;
        o->ka[o->n] = r->keep_alive;
        o->body[o->n] = r->body.bytes;
        o->head[o->n] = r->head_bytes;
        o->ce[o->n] = r->content_encoding;
        o->es[o->n] = r->event_stream;
        o->cb_len[o->n] = o->len;
        o->cb_hash[o->n] = o->hash;
    }
    if (o->calls != 1 || o->len > r->head_bytes)
        abort();
    o->calls = 0;
    o->n++;
}

/* seed 0: one feed; else pieces of 1..64 bytes, each in its own exact-size heap buffer. */
static void run(const char *in, size_t len, bool head_req, const struct sq_h1_limits *lim,
                uint32_t seed, struct outcome *o)
{
    struct sq_h1_reader r;
    memset(o, 0, sizeof(*o));
    o->r = &r;
    o->lim = lim;
    sq_h1_reader_init(&r, lim);
    sq_h1_reader_on_head(&r, on_head, o);
    sq_h1_reader_start(&r, head_req);
    size_t off = 0;
    bool stop = false;
    while (off < len && !stop) {
        size_t n = seed ? 1 + next_rand(&seed) % 64 : len;
        if (n > len - off)
            n = len - off;
        char *piece = malloc(n);
        if (!piece)
            abort();
        memcpy(piece, in + off, n);
        size_t p = 0;
        while (p < n) {
            size_t used = 0;
            int rc = sq_h1_reader_feed(&r, piece + p, n - p, &used);
            if (used > n - p)
                abort();
            p += used;
            if (rc == SQ_H1_DONE) {
                record(o, &r);
                sq_h1_reader_start(&r, head_req);
            } else if (rc == 0) {
                if (p != n)
                    abort();
            } else {
                o->err = rc;
                stop = true;
                break;
            }
        }
        free(piece);
        off += n;
    }
    if (!stop) {
        int rc = sq_h1_reader_eof(&r);
        if (rc == SQ_H1_DONE) {
            record(o, &r);
            o->by_eof = true;
        } else if (rc < 0) {
            o->err = rc;
        }
    }
    if (sq_h1_reader_heap_bytes(&r) > 512)
        abort(); /* an idle reader keeps at most a small spill buffer */
    sq_h1_reader_dispose(&r);
}

static void check_head(const char *in, size_t len, const struct sq_h1_limits *lim)
{
    struct sq_h1_header h[8];
    struct sq_h1_response a = {.headers = h, .headers_cap = 8};
    struct sq_h1_response b = {0};
    int ra = sq_h1_parse_response_head(in, len, lim, &a);
    int rb = sq_h1_parse_response_head(in, len, lim, &b);
    if (ra > (int)len || rb > (int)len)
        abort();
    if (ra > 0) {
        if (rb != ra || a.num_headers > 8 || a.status < 100 || a.status > 999)
            abort();
        for (size_t i = 0; i < a.num_headers; i++)
            if (h[i].name < in || h[i].name + h[i].name_len > in + ra || h[i].value < in ||
                h[i].value + h[i].value_len > in + ra)
                abort();
        if (a.chunked && a.content_length >= 0)
            abort();
    } else if (rb > 0 && ra != -SQ_ETOOBIG) {
        abort(); /* only the array capacity may make the two differ */
    }
}

static void check_chunked(const char *in, size_t len)
{
    struct sq_h1_body whole, bytewise;
    size_t used, total = 0;
    sq_h1_body_init(&whole, SQ_H1_BODY_CHUNKED, 0);
    sq_h1_body_init(&bytewise, SQ_H1_BODY_CHUNKED, 0);
    int rw = sq_h1_body_feed(&whole, in, len, &used, NULL, NULL);
    if (used > len)
        abort();
    int rb = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        size_t u;
        rb = sq_h1_body_feed(&bytewise, &c, 1, &u, NULL, NULL);
        total += u;
        if (rb != 0)
            break;
    }
    if (rw != rb || (rw == SQ_H1_DONE && (total != used || whole.bytes != bytewise.bytes)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool head_req = data[0] & 1;
    struct sq_h1_limits small = {.max_head_bytes = 96, .max_headers = 4};
    const struct sq_h1_limits *lim = (data[0] & 2) ? &small : NULL;
    uint32_t seed = data[1] | 0x100u;
    size_t len = size - 2;
    char *in = malloc(len ? len : 1);
    if (!in)
        abort();
    memcpy(in, data + 2, len);

    check_head(in, len, lim);
    check_chunked(in, len);

    struct outcome a, b;
    run(in, len, head_req, lim, 0, &a);
    run(in, len, head_req, lim, seed, &b);
    if (a.n != b.n || (a.err != 0) != (b.err != 0) || a.by_eof != b.by_eof)
        abort();
    for (int i = 0; i < a.n && i < MAX_RESP; i++)
        if (a.status[i] != b.status[i] || a.ka[i] != b.ka[i] || a.body[i] != b.body[i] ||
            a.head[i] != b.head[i] || a.ce[i] != b.ce[i] || a.es[i] != b.es[i] ||
            a.cb_len[i] != b.cb_len[i] || a.cb_hash[i] != b.cb_hash[i])
            abort();
    free(in);
    return 0;
}
