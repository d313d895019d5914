/* engine/busio.h - what the NATS and MQTT drivers share (internal to engine/): a broker
 * connection carrying a window of VUs, its socket, its batched writes and its reads.
 *
 * A worker's VUs are window slots: connection k carries VUs [k * window, (k + 1) * window) of
 * w->conns, the way HTTP/2 streams ride a connection (h2drv.c): both are engine/xport.h's shared
 * transport (struct sq_engine__mux), which connects, backs off (10 ms doubling to 1.28 s, as
 * HTTP) and moves the VUs' states with the connection (CONNECTING or BACKOFF while it
 * (re)connects, IDLE and on their way once it opens; when it breaks, requests out fail and every
 * VU asks for it again). This layer owns what does not depend on the protocol besides:
 *
 *  - the connection's life past the transport: the protocol's hello (INFO/CONNECT/PONG,
 *    CONNECT/CONNACK), its timeout, open, failure, reconnects counted;
 *  - writes: a VU's message is appended to the connection's output buffer and the buffer goes
 *    out in one send() at the end of the event that produced it (a read whose completions made
 *    the VUs publish again), or at once when it passes 64 KiB inside an event, or from a timer
 *    due now when the message came from outside any event (an arrival, a pacing timer): so the
 *    arrivals of one loop round leave in one write. EPOLLOUT is registered only while a write
 *    is short;
 *  - reads into the worker's buffer, cut into the protocol's units (a NATS operation, an MQTT
 *    packet) by the protocol's stateless parser; a unit split across reads is kept in a spill
 *    sized from the parser's `need`, and only its bytes are copied.
 *
 * The protocol (struct sq_busio_ops) writes its hello, sends a VU's message, handles each unit,
 * adds what must ride behind a batch (a PING) and forgets a VU's pending state when the worker
 * closes it. A failure found inside an event (a write error, a parse error) is held until the
 * event ends, so no VU is failed while the protocol walks its units.
 */
#ifndef SQ_ENGINE_BUSIO_H
#define SQ_ENGINE_BUSIO_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "engine/run.h"
#include "engine/xport.h"
#include "loop/loop.h"

struct sq_engine__worker;
struct sq_engine__conn;
struct sq_busio;

/* ---- what the bus code keeps per connection and per worker: one copy each ---- */

/* A FIFO of 64-bit entries (a VU and its generation, a batch's size) that doubles when full:
 * rarely, once warm (stale entries of VUs that timed out can outnumber the window for a
 * moment). */
struct sq_engine__ring {
    uint64_t *v;
    uint32_t head, len, cap; /* cap is 0 or a power of two */
};

/* Appends x. Returns 0 or -ENOMEM (the ring is unchanged). */
SQ_MUST_CHECK int sq_engine__ring_push(struct sq_engine__ring *r, uint64_t x);
/* The oldest entry; the ring must not be empty. */
static inline uint64_t sq_engine__ring_pop(struct sq_engine__ring *r)
{
    uint64_t x = r->v[r->head];
    r->head = (r->head + 1) & (r->cap - 1);
    r->len--;
    return x;
}
static inline void sq_engine__ring_clear(struct sq_engine__ring *r)
{
    r->head = r->len = 0;
}
void sq_engine__ring_dispose(struct sq_engine__ring *r);

/* A stamp's sequence number -> a value (a VU's slot, an arrival time): open addressing, linear
 * probing, backward-shift deletion, a table of fixed size that holds at most half its slots, so
 * a probe always ends at an empty one. No allocation after init. */
struct sq_engine__seqmap {
    uint64_t *key; /* UINT64_MAX: empty */
    int64_t *val;
    uint32_t mask, n;
};

/* Sizes the table for `want` entries (at least 16 slots, twice want). Returns 0 or -ENOMEM (m
 * is then disposable). */
SQ_MUST_CHECK int sq_engine__seqmap_init(struct sq_engine__seqmap *m, uint32_t want);
void sq_engine__seqmap_dispose(struct sq_engine__seqmap *m);
bool sq_engine__seqmap_get(const struct sq_engine__seqmap *m, uint64_t k, int64_t *v);
/* Puts or replaces k; false when the table is at its bound (the caller evicts first). */
SQ_MUST_CHECK bool sq_engine__seqmap_put(struct sq_engine__seqmap *m, uint64_t k, int64_t v);
void sq_engine__seqmap_del(struct sq_engine__seqmap *m, uint64_t k);
void sq_engine__seqmap_clear(struct sq_engine__seqmap *m);

#define SQ_BUSIO_FLUSH_AT (64 * 1024) /* inside an event, write once this much is queued */

struct sq_busio_ops {
    size_t conn_size; /* the protocol's connection struct, which starts with a struct sq_busio */
    /* The TCP connect completed: queue what the protocol says first (MQTT's CONNECT; NATS
     * waits for INFO). Returns 0 or a negative code (the connect then counts as failed). */
    int (*hello)(struct sq_busio *b);
    /* One unit at p[0, n): returns its length (> 0, handled), 0 while p is a prefix of one (*need
     * its whole length when known, else 0), or a negative code (a protocol error: the connection
     * fails with `parse`, or with the kind the protocol set through sq_busio_fail). */
    int (*unit)(struct sq_busio *b, const char *p, size_t n, size_t *need);
    /* The VU c (ACTIVE, counted as sent) on b: queue its message. Returns 0, or an error kind
     * that fails it (out of memory, a message the connection cannot carry). */
    int (*send)(struct sq_busio *b, struct sq_engine__conn *c);
    /* The worker closes c (timeout, the end): forget what it waits for, so a late answer
     * matches nothing. */
    void (*release)(struct sq_busio *b, struct sq_engine__conn *c);
    /* About to write out.p: a last chance to queue what closes a batch (a PING). */
    void (*before_write)(struct sq_busio *b);
    /* The connection is gone (socket closed): forget its protocol state. */
    void (*reset)(struct sq_busio *b);
    /* Every 100 ms while open (keep-alive). */
    void (*tick)(struct sq_busio *b, int64_t now);
    /* Per-worker state of the protocol (after the connections exist), and its end. */
    int (*init)(struct sq_engine__worker *w);
    void (*dispose)(struct sq_engine__worker *w);
};

struct sq_busio {
    /* the transport and its VUs: m.w the worker, m.first / m.n its VUs, m.usable those that may
     * publish (a broker's Receive Maximum parks the rest; the protocol lowers it before open),
     * m.pin the broker of a side connection (NULL: the run's addresses), m.state */
    struct sq_engine__mux m;
    const struct sq_busio_ops *ops;
    struct sq_timer kick; /* a write due now (messages queued outside an event) */
    struct sq_buf out;    /* bytes to write; out_off of them written */
    size_t out_off;
    struct sq_buf spill; /* a unit cut by the end of a read */
    size_t need;         /* its whole length once known, else 0 */
    size_t max_unit;     /* the largest unit the spill may hold */
    int64_t hello_ns;    /* HELLO: when the greeting began */
    int64_t now;         /* inside a read: when it returned (the completion time) */
    int64_t wrote_ns;    /* the last write (keep-alive) */
    bool was_open;       /* opened before: the next open is a reconnect */
    bool dirty;          /* queued inside an event: write when it ends */
    int busy;            /* inside an event of this connection */
    int broken;          /* a failure found while busy: 1 + enum sq_errk; 0 none */
};

/* Open: it takes messages. */
static inline bool sq_busio_is_open(const struct sq_busio *b)
{
    return b->m.state == SQ_ENGINE__MX_OPEN;
}

/* Sets up a connection that carries no VUs (engine/flowbus.c: a flow's publish and subscribe
 * steps): it connects to addr when asked (sq_busio_start), and reconnects only when asked again. */
void sq_busio_init_side(struct sq_busio *b, struct sq_engine__worker *w,
                        const struct sq_busio_ops *ops, const struct sq_addr *addr);
void sq_busio_start(struct sq_busio *b);
/* Closes it without a callback and frees its buffers. */
void sq_busio_dispose_side(struct sq_busio *b);
/* Connect and greeting timeouts, keep-alive, a stuck write: the sweep's part for one
 * connection. */
void sq_busio_sweep_one(struct sq_busio *b, int64_t now);

/* The per-worker state of a bus driver (w->proto). */
struct sq_busdrv {
    const struct sq_busio_ops *ops;
    const struct sq_bus_config *bus;
    char *conns; /* nconn connections of ops->conn_size bytes */
    uint32_t nconn, window;
    struct sq_buf scratch, hscratch; /* rendering: the payload, header values */
    void *proto;                     /* the protocol's own per-worker state */
};

struct sq_busdrv *sq_busdrv_of(const struct sq_engine__worker *w);

/* The connection with index k, and the one a VU rides. */
struct sq_busio *sq_busio_at(struct sq_busdrv *d, uint32_t k);
struct sq_busio *sq_busio_of(struct sq_engine__conn *c);

/* Queues n bytes on b; writes at the end of the current event, or soon (a timer due now) when
 * there is none. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_busio_queue(struct sq_busio *b, const void *p, size_t n);
/* Room for n bytes at the end of out (fill them, then sq_busio_commit how many were used), or
 * NULL when out of memory. */
char *sq_busio_room(struct sq_busio *b, size_t n);
void sq_busio_commit(struct sq_busio *b, size_t n);
/* Writes what is queued now, even inside an event (a protocol that closes its batches itself:
 * NATS core and MQTT QoS 0 write every quarter window, so four batches are out at once and
 * the broker always has the next one while the PONG of the last one travels back). */
void sq_busio_write_now(struct sq_busio *b);
/* The hello is done: the connection is open, its waiting VUs go to work. */
void sq_busio_open(struct sq_busio *b);
/* The connection fails with kind (the kind fails the requests out on it): at once, or when the
 * current event ends. */
void sq_busio_fail(struct sq_busio *b, enum sq_errk kind);
/* Keeps the broker's first error message for the result (bus_error); with count, the message
 * is a refusal of the connection or session: counted as a `server_error`. */
void sq_busio_note(struct sq_busio *b, const char *msg, size_t len, bool count);

/* The driver table's entries, shared by natsdrv.c and mqttdrv.c. */
int sq_busio_drv_init(struct sq_engine__worker *w, uint32_t nconn, uint32_t first_global,
                      const struct sq_busio_ops *ops);
void sq_busio_drv_dispose(struct sq_engine__worker *w);
void sq_busio_drv_connect(struct sq_engine__conn *c);
void sq_busio_drv_send(struct sq_engine__conn *c);
void sq_busio_drv_close(struct sq_engine__conn *c);
void sq_busio_drv_sweep(struct sq_engine__worker *w, int64_t now);
void sq_busio_drv_close_all(struct sq_engine__worker *w);

#endif
