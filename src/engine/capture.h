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
 */
#ifndef SQ_ENGINE_CAPTURE_H
#define SQ_ENGINE_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SQ_CAPTURE_HEAD_MAX 4096 /* response head bytes kept; the rest is cut (head_cut) */
#define SQ_CAPTURE_BODY_MAX 1024 /* body bytes the hook gets at most (body_max) */
#define SQ_SAMPLE_BODY_MAX  4096 /* body bytes a sampled exchange keeps (--sample-responses) */

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

/* ---- sampled exchanges (--sample-responses N) ----
 *
 * A run with struct sq_run_config.sample_per_class N > 0 keeps, per class, a uniform random
 * sample of at most N exchanges (reservoir sampling, per worker, merged at the end weighted by
 * what each worker saw). The classes: the response status classes (1xx .. 5xx, and "other" for a
 * status outside 100..599), then one per error kind (enum sq_errk). A response's class is drawn
 * when its head is complete: only a drawn exchange borrows a buffer (from a small per-worker
 * pool) and copies its head and the first SQ_SAMPLE_BODY_MAX bytes of its body; every other
 * one costs a counter and a random draw. A failure is drawn when it fails (its request, what
 * arrived of the response when it had been drawn as a response). */
#define SQ_XS_STATUS_CLASSES        6
#define SQ_SAMPLE_RESPONSES_DEFAULT 5   /* kept per class unless --sample-responses says */
#define SQ_SAMPLE_RESPONSES_MAX     100 /* [0] other, [1] 1xx .. [5] 5xx */

/* One kept exchange (owned by the result). */
struct sq_xsample {
    uint32_t cls;       /* its class: 0..5 a status class, 6 + k the error kind k */
    int64_t end_ns;     /* when it ended, ns after the run's start */
    int64_t latency_us; /* completed: its latency; failed: the time until it failed */
    int64_t ttfb_us;    /* to the response's first byte; -1 when none arrived */
    int64_t connect_us; /* its connection's TCP connect and TLS handshake (0: none timed) */
    int64_t tls_us;
    uint16_t status; /* 0: no complete response head */
    int error;       /* -1: completed; else an enum sq_errk */
    bool h2;         /* over HTTP/2: req is its HTTP/1.1 form, head the status line only */
    char *req;       /* the request as sent: its head and up to SQ_SAMPLE_BODY_MAX of body */
    size_t req_len;
    bool req_cut;
    char *head; /* the response head (NULL: none) */
    size_t head_len;
    bool head_cut;
    char *body; /* the start of the response body (decoded), body_len bytes */
    size_t body_len;
    uint64_t body_total; /* body bytes seen in all */
};

/* Several runs' sampled exchanges into one (a distributed run's agents, cluster/): per class, a
 * uniform sample of the union of what they saw, the workers' rule: each input's kept exchanges
 * of a class stand for what it saw of that class, so an input is drawn in proportion to that,
 * and one of its kept exchanges at random. out->seen is the sum, out->per_class the largest of
 * the inputs' (0: none sampled, out is empty), out->v sorted by class, then by when they ended.
 * Each input's v must be sorted by class (struct sq_xsamples is). The exchanges taken move to
 * out (their slots in the inputs are left empty); the inputs are still to be disposed. Returns 0
 * or -ENOMEM (out empty). */
struct sq_xsamples;
int sq_xs_merge(struct sq_xsamples *in, uint32_t n, struct sq_xsamples *out);

#endif
