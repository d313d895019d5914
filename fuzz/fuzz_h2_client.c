/* fuzz_h2_client.c - the HTTP/2 client session (http/h2) fed hostile server bytes. Four
 * requests are submitted (one with a body); the input is fed in pieces whose sizes come from
 * the input itself, with the output drained after each piece and closed slots resubmitted.
 * Checks: on_close runs exactly once per submitted stream, never for a slot that is not in
 * flight; the open count matches the slots in flight; a status reported is a final one. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/h2client.h"

#define SLOTS 4

struct slot {
    struct sq_h2_stream st;
    bool busy;
};

struct ctx {
    struct sq_h2_client c;
    struct slot s[SLOTS];
    const struct sq_h2_req *req;
    int resubmits;
};

static void on_headers(void *ud, struct sq_h2_stream *st, int status)
{
    (void)ud;
    struct slot *sl = SQ_CONTAINER_OF(st, struct slot, st);
    if (!sl->busy || status < 200 || status > 999)
        abort();
}

static void on_data(void *ud, struct sq_h2_stream *st, const char *data, size_t len)
{
    (void)ud;
    (void)len;
    struct slot *sl = SQ_CONTAINER_OF(st, struct slot, st);
    if (!sl->busy || data)
        abort();
}

static void on_close(void *ud, struct sq_h2_stream *st, uint32_t err)
{
    (void)err;
    struct ctx *x = ud;
    struct slot *sl = SQ_CONTAINER_OF(st, struct slot, st);
    if (!sl->busy)
        abort();
    sl->busy = false;
    if (x->resubmits < 16 && sq_h2_client_submit(&x->c, x->req, st) > 0) {
        sl->busy = true;
        x->resubmits++;
    }
}

static const struct sq_h2_callbacks cb = {on_headers, on_data, on_close, NULL, NULL};

static void check(struct ctx *x)
{
    uint32_t busy = 0;
    for (int i = 0; i < SLOTS; i++)
        busy += x->s[i].busy;
    if (busy != x->c.open)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ctx x;
    memset(&x, 0, sizeof(x));
    struct sq_h2_req get, post;
    if (sq_h2_req_init(&get, "GET", "http", "x", "/", NULL, 0, NULL, 0) != 0 ||
        sq_h2_req_init(&post, "POST", "http", "x", "/p", NULL, 0, "0123456789", 10) != 0)
        abort();
    x.req = &get;
    struct sq_h2_opts o = {.max_streams = SLOTS};
    if (sq_h2_client_init(&x.c, &o, &cb, &x) != 0)
        abort();
    for (int i = 0; i < SLOTS; i++)
        x.s[i].busy = sq_h2_client_submit(&x.c, i == 0 ? &post : &get, &x.s[i].st) > 0;
    check(&x);
    size_t off = 0;
    bool ok = true;
    while (ok) {
        const char *p;
        size_t len;
        if (sq_h2_client_pending(&x.c, &p, &len) != 0)
            break;
        sq_h2_client_consume(&x.c, len);
        check(&x);
        if (off >= size)
            break;
        size_t piece = 1 + data[off] % 64;
        off++;
        if (piece > size - off)
            piece = size - off;
        ok = sq_h2_client_feed(&x.c, (const char *)data + off, piece) == 0;
        off += piece;
        check(&x);
    }
    sq_h2_client_dispose(&x.c);
    sq_h2_req_dispose(&get);
    sq_h2_req_dispose(&post);
    return 0;
}
