/* fuzz_h1_request.c - request heads (the built-in server's parser) and the body framer behind
 * them. The input is an exact-size heap copy, so ASan catches any over-read. Checks: spans
 * inside the head, the storing and the counting-only parse agree, and a body is framed the same
 * whole and byte by byte.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/h1.h"

static void frame_body(const char *in, size_t len, enum sq_h1_body_mode mode, uint64_t n)
{
    struct sq_h1_body whole, bytewise;
    size_t used, total = 0;
    sq_h1_body_init(&whole, mode, n);
    sq_h1_body_init(&bytewise, mode, n);
    int rw = sq_h1_body_feed(&whole, in, len, &used, NULL, NULL);
    if (used > len)
        abort();
    int rb = 0;
    for (size_t i = 0; i < len; i++) {
        size_t u;
        rb = sq_h1_body_feed(&bytewise, in + i, 1, &u, NULL, NULL);
        total += u;
        if (rb != 0)
            break;
    }
    if (len == 0)
        rb = rw; /* nothing to feed byte by byte */
    if (rw != rb || (rw == SQ_H1_DONE && (total != used || whole.bytes != bytewise.bytes)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size ? size : 1);
    if (!in)
        abort();
    memcpy(in, data, size);
    struct sq_h1_header h[16];
    struct sq_h1_request a = {.headers = h, .headers_cap = 16};
    struct sq_h1_request b = {0};
    struct sq_h1_limits lim = {.max_head_bytes = 8192, .max_headers = 64};
    int ra = sq_h1_parse_request_head(in, size, &lim, &a);
    int rb = sq_h1_parse_request_head(in, size, &lim, &b);
    if (ra > (int)size || rb > (int)size)
        abort();
    if (ra > 0) {
        if (rb != ra || a.method_len == 0 || a.path_len == 0 || a.num_headers > 16)
            abort();
        if (a.method < in || a.path + a.path_len > in + ra)
            abort();
        for (size_t i = 0; i < a.num_headers; i++)
            if (h[i].name < in || h[i].value + h[i].value_len > in + ra)
                abort();
        if (a.chunked && a.content_length >= 0)
            abort();
        const char *body = in + ra;
        size_t blen = size - (size_t)ra;
        if (a.chunked)
            frame_body(body, blen, SQ_H1_BODY_CHUNKED, 0);
        else if (a.content_length >= 0)
            frame_body(body, blen, SQ_H1_BODY_LENGTH, (uint64_t)a.content_length);
    } else if (rb > 0 && ra != -SQ_ETOOBIG) {
        abort();
    }
    free(in);
    return 0;
}
