/* target/inbox.h - `squall inbox`: a webhook inbox. It captures every request it receives
 * (arrival time, method, path, headers, body up to a cap, the client's address) into a bounded
 * ring, answers each with a configured status, body and delay, and serves an API under the
 * reserved prefix /_inbox/ on the same listener (docs/inbox.md):
 *
 *   GET    /_inbox/captures?since=SEQ&path=P&limit=N   captures after SEQ (oldest first)
 *   DELETE /_inbox/captures                            drop them all
 *   GET    /_inbox/stats                               counts, evictions, per path
 *   GET    /_inbox/stream                              SSE: one event per new capture
 *
 * The ring holds at most max_captures; a capture past it evicts the oldest (counted). A body
 * over max_body keeps its first max_body bytes and is flagged truncated (its full length is
 * kept). Memory is bounded by max_captures x (max_body + the head, at most 8 KiB + what the
 * JSON adds). Captures go in under one mutex (a webhook sink is not a hot path).
 *
 * Stamped events (a squall event stamp in the body or a named header, proto/stamp.h) are matched
 * to their sends by `squall sink`'s ledger (sink/sink.h, sq_sink_ledger_new): per stream (the
 * stamp's run field) delivered, duplicates, out of order and the sequence gaps so far; per path
 * the end-to-end latency (arrival minus the stamp's send time) in a histogram; per capture its
 * stamp's stream, sequence number and latency.
 */
#ifndef SQ_TARGET_INBOX_H
#define SQ_TARGET_INBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define SQ_INBOX_MAX_CAPTURES_DEFAULT 10000
#define SQ_INBOX_MAX_CAPTURES         1000000
#define SQ_INBOX_MAX_BODY_DEFAULT     (64 * 1024)
#define SQ_INBOX_LIST_DEFAULT         100       /* captures per GET when no limit is given */
#define SQ_INBOX_LIST_MAX             1000      /* ... at most */
#define SQ_INBOX_LIST_BYTES           (8 << 20) /* a listing stops past this (next says where) */
#define SQ_INBOX_MAX_PATHS            1024      /* paths counted apart; the rest as "(other)" */
#define SQ_INBOX_MAX_STREAMS          32        /* SSE readers at once */
#define SQ_INBOX_MAX_LATENCY_PATHS    256 /* paths with a latency histogram; the rest share one */
/* The matching's memory: its streams and bitmaps (8 MiB hold 2^26 sequence numbers); past it
 * the stream with the oldest arrival is evicted to make room. */
#define SQ_INBOX_LEDGER_BYTES (8ull << 20)

struct sq_inbox; /* opaque; sq_inbox_start creates it */

struct sq_inbox_config {
    const char *host;         /* NULL: 127.0.0.1 */
    uint16_t port;            /* 0: any free port */
    int threads;              /* >= 1 */
    uint32_t max_captures;    /* 1..SQ_INBOX_MAX_CAPTURES; 0: the default */
    size_t max_body;          /* bytes of a body kept (at most the server's 1 MiB); 0: none kept */
    int status;               /* the answer's status; 0: 200 */
    const char *body;         /* the answer's body (borrowed for the inbox's life); NULL: empty */
    const char *content_type; /* NULL: text/plain when body is set */
    int64_t delay_ns;         /* answer this long after the request (0: at once) */
    int64_t idle_timeout_ns, header_timeout_ns; /* the server's (0: none) */
    int64_t request_timeout_ns;                 /* the server's (0: none) */
    uint32_t min_body_rate;                     /* the server's, bytes/s (0: none) */
    /* Where a capture's event stamp ({{$stamp}}, proto/stamp.h) is: NULL as `squall sink` finds
     * it by default (the first in the body, else in a header); else only in this header. */
    const char *stamp_header;
};

struct sq_server_req;
struct sq_server_resp;

/* An inbox without a listener of its own, for a server that mounts it (the daemon's /inbox):
 * cfg's host, port and timeouts are unused; threads is how many server workers call
 * sq_inbox_handle (each gets its own scratch buffer, indexed by req->worker). Returns 0,
 * -EINVAL or -ENOMEM. sq_inbox_free frees it. */
SQ_MUST_CHECK int sq_inbox_new(const struct sq_inbox_config *cfg, struct sq_inbox **out);
/* Inside a server's handler: answers req as the inbox's own listener would, its path without
 * its first strip bytes (the mount point: "/inbox/hooks/a?x" with strip 6 is "/hooks/a?x"; an
 * empty rest is "/"). The answer may point into the inbox's scratch buffer for that worker:
 * valid until the worker's next call. */
void sq_inbox_handle(struct sq_inbox *b, const struct sq_server_req *req, size_t strip,
                     struct sq_server_resp *resp);

/* True when name is a header name (an RFC 9110 token of at most 128 bytes): what
 * cfg->stamp_header must be. */
bool sq_inbox_header_name_ok(const char *name);

/* Binds and starts. Returns 0, -errno, -SQ_ERESOLVE (*why set) or -EINVAL. */
SQ_MUST_CHECK int sq_inbox_start(const struct sq_inbox_config *cfg, struct sq_inbox **out,
                                 const char **why);
uint16_t sq_inbox_port(const struct sq_inbox *b);
/* Asks the workers to exit. Async-signal-safe; idempotent. */
void sq_inbox_stop(struct sq_inbox *b);
/* Waits until every worker has exited (after sq_inbox_stop). */
void sq_inbox_wait(struct sq_inbox *b);
/* Stops, waits and frees. NULL is a no-op. */
void sq_inbox_free(struct sq_inbox *b);

struct sq_inbox_counts {
    uint64_t captured;  /* requests captured in all */
    uint64_t stored;    /* in the ring now */
    uint64_t evicted;   /* pushed out of the ring by newer ones */
    uint64_t truncated; /* bodies cut at max_body */
    uint64_t cleared;   /* dropped by DELETE /_inbox/captures */
    uint64_t next_seq;  /* the sequence number the next capture gets (they count from 1) */
    uint64_t stamped;   /* captures that carried an event stamp */
};
void sq_inbox_counts(struct sq_inbox *b, struct sq_inbox_counts *out);

/* What GET /_inbox/captures answers, into s (reset first): the captures after since whose path
 * (without the query) starts with prefix (NULL: any), at most limit (0 or over
 * SQ_INBOX_LIST_MAX: SQ_INBOX_LIST_MAX), oldest first, as {"captures":[...],"next":SEQ,
 * "more":B,"oldest":SEQ,"evicted":N}. Any thread. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_inbox_list(struct sq_inbox *b, uint64_t since, const char *prefix,
                                uint64_t limit, struct sq_buf *s);

#endif
