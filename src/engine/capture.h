/* engine/capture.h - exchanges seen on the wire, handed to a hook: what `--verbose` and
 * `--http-debug` print, and what a sampled-exchanges reservoir can keep.
 *
 * A run with struct sq_run_config.capture set gives each VU a small capture buffer. While a
 * request is out, the driver copies into it the response's head (the raw bytes read before the
 * head is complete, so a response that does not parse still shows what came) and the first
 * body_max bytes of its body (after decoding). When the request ends, the worker decides whether
 * the exchange is wanted (the mode below) and, if so, calls on_exchange on its own thread with
 * the request (head and the start of its body, as sent) and the response.
 *
 * Cost: with capture NULL, nothing but one predictable branch per response head. With capture
 * on, one copy of the head and of the first body_max bytes per response, and a lookup in a
 * per-worker table of what was already seen.
 *
 * The hook runs on a worker thread, inside its event loop: it must be short (copy what it keeps
 * and return) and safe against the other workers calling it at the same time; worker (0..n-1)
 * tells it which worker calls, so per-worker state needs no lock.
 *
 * The sampled exchanges a run keeps (--sample-responses) are part of its result:
 * result/result.h (struct sq_xsample); capture.c fills them.
 */
#ifndef SQ_ENGINE_CAPTURE_H
#define SQ_ENGINE_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "result/result.h"

/* Response head bytes kept (the rest is cut: head_cut): a sampled exchange's head
 * (result/result.h) is copied from the same buffer, so both have the same room. */
#define SQ_CAPTURE_HEAD_MAX SQ_SAMPLE_HEAD_MAX
#define SQ_CAPTURE_BODY_MAX 1024 /* body bytes the hook gets at most (body_max) */

enum sq_capture_mode {
    /* The first exchange of each distinct status and of each error kind, per worker (the hook
     * keeps the first across workers). */
    SQ_CAPTURE_FIRST_OF_KIND,
    SQ_CAPTURE_EVERY, /* every exchange (`--http-debug`: runs of a few requests) */
};

/* One exchange. Pointers are borrowed for the call. */
struct sq_exchange {
    int64_t end_ns;     /* when it ended, ns after the run's start */
    int64_t latency_us; /* completed: its latency; failed: the time until it failed */
    uint16_t status;    /* 0: no complete response head */
    int error;          /* -1: completed; else an enum sq_errk */
    const char *req;    /* the request as sent: its head and up to body_max bytes of its body */
    size_t req_len;
    bool req_cut;        /* the request is longer than req_len */
    const char *head;    /* the response head, or the raw bytes read before it was complete */
    size_t head_len;     /* 0: nothing arrived */
    bool head_cut;       /* more head bytes arrived than SQ_CAPTURE_HEAD_MAX */
    const char *body;    /* the start of the response body (decoded) */
    size_t body_len;     /* up to body_max */
    uint64_t body_total; /* body bytes seen in all (decoded), however many were kept */
    bool h2;             /* over HTTP/2: req is its HTTP/1.1 form, head the status line only */
};

struct sq_capture {
    enum sq_capture_mode mode;
    size_t body_max; /* at most SQ_CAPTURE_BODY_MAX; 0 means SQ_CAPTURE_BODY_MAX */
    void (*on_exchange)(void *ud, uint32_t worker, const struct sq_exchange *x);
    void *ud;
};

#endif
