/* micro_h1.c - ns per parsed response through sq_h1_reader (framing only, as the engine runs it).
 *
 * Cases: a small 200 with Content-Length, fed whole; the same with its head split across two
 * reads (the spill path); a 16 KiB chunked response (16 chunks of 1 KiB), fed whole; and the
 * bare head parser on the small response. Then a small 200 that also carries Content-Encoding
 * and Content-Type: text/event-stream (the fields the reader interprets for decoding and SSE),
 * the small 200 with a head callback set (a no-op one: the cost of the call itself), and with a
 * fields callback (the reader stores the fields' spans as it parses: what a plan step that
 * reads headers costs). Each figure is the median of REPS repetitions.
 * Usage: micro_h1 [reps]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "micro.h"
#include "base/clock.h"
#include "http/h1.h"

#define REPS_DEFAULT 9

static const char small[] = "HTTP/1.1 200 OK\r\n"
                            "Server: squall-target\r\n"
                            "Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
                            "Content-Type: text/plain\r\n"
                            "Content-Length: 13\r\n"
                            "\r\n"
                            "Hello, World!";

static const char coded[] = "HTTP/1.1 200 OK\r\n"
                            "Server: squall-target\r\n"
                            "Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
                            "Content-Type: text/event-stream; charset=utf-8\r\n"
                            "Content-Encoding: gzip\r\n"
                            "Content-Length: 13\r\n"
                            "\r\n"
                            "Hello, World!";

static volatile uint64_t sink;

static int on_head(void *ud, const char *head, size_t len)
{
    (void)ud;
    sink += len + (uint64_t)(unsigned char)head[0];
    return 0;
}

static int on_fields(void *ud, const char *head, size_t len, const struct sq_h1_header *f, size_t n)
{
    (void)ud;
    sink += len + (uint64_t)(unsigned char)head[0] + n + f[n - 1].value_len;
    return 0;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "micro_h1: %s: %s\n", what, sq_strerror(rc));
    exit(1);
}

/* One response through the reader, in one or two feeds. */
static void read_one(struct sq_h1_reader *r, const char *buf, size_t len, size_t split)
{
    size_t used;
    int rc;
    sq_h1_reader_start(r, false);
    if (split) {
        rc = sq_h1_reader_feed(r, buf, split, &used);
        if (rc != 0)
            die("split feed", rc);
        buf += split;
        len -= split;
    }
    rc = sq_h1_reader_feed(r, buf, len, &used);
    if (rc != SQ_H1_DONE || used != len)
        die("feed", rc < 0 ? rc : -SQ_EPARSE);
    sink += r->body.bytes;
}

static double bench_reader(const char *buf, size_t len, size_t split, long iters, int kind)
{
    struct sq_h1_reader r;
    sq_h1_reader_init(&r, NULL);
    if (kind == 2)
        sq_h1_reader_on_head(&r, on_head, NULL);
    else if (kind == 3)
        sq_h1_reader_on_fields(&r, on_fields, NULL);
    read_one(&r, buf, len, split); /* warm: allocates the spill buffer once when split */
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < iters; i++)
        read_one(&r, buf, len, split);
    int64_t t1 = sq_now_ns();
    sq_h1_reader_dispose(&r);
    return (double)(t1 - t0) / (double)iters;
}

static double bench_head(const char *buf, size_t len, long iters)
{
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < iters; i++) {
        struct sq_h1_header h[16];
        struct sq_h1_response resp = {.headers = h, .headers_cap = 16};
        int rc = sq_h1_parse_response_head(buf, len, NULL, &resp);
        if (rc <= 0)
            die("head", rc);
        sink += (uint64_t)rc + resp.num_headers;
    }
    int64_t t1 = sq_now_ns();
    return (double)(t1 - t0) / (double)iters;
}

static char *make_chunked(size_t *len)
{
    size_t cap = 20000, w = 0;
    char *s = malloc(cap);
    if (!s)
        die("malloc", -12);
    w += (size_t)snprintf(s, cap,
                          "HTTP/1.1 200 OK\r\nServer: squall-target\r\n"
                          "Content-Type: application/octet-stream\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 16; i++) {
        w += (size_t)snprintf(s + w, cap - w, "400\r\n");
        memset(s + w, 'x', 1024);
        w += 1024;
        w += (size_t)snprintf(s + w, cap - w, "\r\n");
    }
    w += (size_t)snprintf(s + w, cap - w, "0\r\n\r\n");
    *len = w;
    return s;
}

struct bcase {
    const char *name;
    int kind; /* 0 reader, 1 head only, 2 reader with a head callback, 3 with a fields one */
    const char *buf;
    size_t len, split;
    long iters;
};

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : REPS_DEFAULT;
    if (reps < 1)
        reps = 1;
    size_t clen;
    char *chunked = make_chunked(&clen);
    size_t slen = sizeof(small) - 1;
    const struct bcase cases[] = {
        {"small 200, Content-Length, one read", 0, small, slen, 0, 2000000},
        {"small 200, head split over two reads", 0, small, slen, 40, 2000000},
        {"16 KiB chunked (16 x 1 KiB), one read", 0, chunked, clen, 0, 100000},
        {"small 200, head parser only (16 headers array)", 1, small, slen, 0, 2000000},
        {"200 with Content-Encoding + event-stream, one read", 0, coded, sizeof(coded) - 1, 0,
         2000000},
        {"small 200, one read, head callback set", 2, small, slen, 0, 2000000},
        {"small 200, one read, fields callback set", 3, small, slen, 0, 2000000},
    };
    double *t = calloc((size_t)reps, sizeof(double));
    if (!t)
        die("malloc", -12);
    printf("micro_h1: median of %d repetitions, ns per response\n", reps);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const struct bcase *b = &cases[c];
        for (int i = 0; i < reps; i++)
            t[i] = b->kind == 1 ? bench_head(b->buf, b->len, b->iters)
                                : bench_reader(b->buf, b->len, b->split, b->iters, b->kind);
        qsort(t, (size_t)reps, sizeof(double), micro_cmp_double);
        double med = t[reps / 2];
        printf("  %-48s %6zu B  %9.1f ns  (min %.1f, max %.1f)  %6.2f GB/s\n", b->name, b->len, med,
               t[0], t[reps - 1], (double)b->len / med);
    }
    free(t);
    free(chunked);
    return sink == 42 ? 1 : 0;
}
