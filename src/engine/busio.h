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
 *    sized from the parser's `need` (base/spill.h), and only its bytes are copied;
 *  - batches: a message whose answer is none of its own (NATS core publish, MQTT QoS 0, a
 *    flow's publish) joins the connection's batch (a FIFO of VU and generation); before each
 *    write a ping (PING, PINGREQ) closes the batch, and its answer completes exactly those
 *    messages;
 *  - the skeleton of the two bus drivers (natsdrv.c, mqttdrv.c): one driver table
 *    (sq_engine__bus_driver) that picks the protocol's ops by the run's bus kind, the per-VU
 *    generation (a late answer never ends the VU's next request), the static message and the
 *    rendering of a templated payload and its headers (with the stamp), the completion and
 *    failure of a VU's request, the quarter-window writes.
 *
 * The protocol (struct sq_engine__bus_ops) writes its hello, encodes a VU's message, handles each
 * unit and forgets a VU's pending state when the worker closes it. A failure found inside an event
 * (a write error, a parse error) is held until the event ends, so no VU is failed while the
 * protocol walks its units.
 */
#ifndef SQ_ENGINE_BUSIO_H
#define SQ_ENGINE_BUSIO_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "base/spill.h"
#include "engine/busconf.h"
#include "engine/run.h"
#include "engine/xport.h"
#include "loop/loop.h"

struct sq_engine__worker;
struct sq_engine__conn;
struct sq_engine__busconn;
struct sq_engine__busdrv;
struct sq_nats_limits;
struct sq_nats_event;
struct sq_mqtt_limits;
struct sq_mqtt_packet;

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

#define SQ_ENGINE__BUS_FLUSH_AT (64 * 1024) /* inside an event, write once this much is queued */

struct sq_engine__bus_ops {
    size_t conn_size; /* the protocol's connection struct, which starts with a struct
                         sq_engine__busconn */
    /* The TCP connect completed: queue what the protocol says first (MQTT's CONNECT; NATS
     * waits for INFO). Returns 0 or a negative code (the connect then counts as failed). */
    int (*hello)(struct sq_engine__busconn *b);
    /* One unit at p[0, n): returns its length (> 0, handled), 0 while p is a prefix of one (*need
     * its whole length when known, else 0), or a negative code (a protocol error: the connection
     * fails with `parse`, or with the kind the protocol set through sq_engine__bus_fail). */
    int (*unit)(struct sq_engine__busconn *b, const char *p, size_t n, size_t *need);
    /* The VU c (ACTIVE, counted as sent, its generation moved on) on b: queue its message
     * (sq_engine__bus_send_static, or sq_engine__bus_render then sq_engine__bus_sent). Returns 0,
     * or an error kind that fails it (out of memory, a message the connection cannot carry). */
    int (*send)(struct sq_engine__busdrv *d, struct sq_engine__busconn *b,
                struct sq_engine__conn *c);
    /* Optional: the worker closes c (timeout, the end; its generation moved on already): forget
     * what else it waits for, so a late answer matches nothing. */
    void (*release)(struct sq_engine__busconn *b, struct sq_engine__conn *c);
    /* The connection is gone (socket closed): forget its protocol state (the batch and the
     * buffers are busio's). */
    void (*reset)(struct sq_engine__busconn *b);
    /* Every 100 ms while open (keep-alive). */
    void (*tick)(struct sq_engine__busconn *b, int64_t now);
    /* Per-worker state of the protocol (after the connections exist), and its end. */
    int (*init)(struct sq_engine__worker *w);
    void (*dispose)(struct sq_engine__worker *w);
};

struct sq_engine__busconn {
    /* the transport and its VUs: m.w the worker, m.first / m.n its VUs, m.usable those that may
     * publish (a broker's Receive Maximum parks the rest; the protocol lowers it before open),
     * m.pin the broker of a side connection (NULL: the run's addresses), m.state */
    struct sq_engine__mux m;
    const struct sq_engine__bus_ops *ops;
    struct sq_timer kick; /* a write due now (messages queued outside an event) */
    struct sq_buf out;    /* bytes to write; out_off of them written */
    size_t out_off;
    struct sq_spill spill; /* a unit cut by the end of a read (base/spill.h) */
    size_t max_unit;       /* the largest unit the spill may hold */
    int64_t hello_ns;      /* HELLO: when the greeting began */
    int64_t now;           /* inside a read: when it returned (the completion time) */
    int64_t wrote_ns;      /* the last write (keep-alive) */
    /* the batch: its messages in the FIFO (VU << 32 | the VU's generation then), each ping in
     * flight with how many of them it closes (0: a keep-alive's), those queued since the last */
    struct sq_engine__ring fifo, pings;
    uint32_t unpinged;
    uint32_t answered; /* pings answered so far (wraps; reads compare before and after) */
    const char *ping;  /* the protocol's ping (set before the first write) */
    uint8_t ping_len;
    /* over TLS (tls://, mqtts://): the client to shake hands with; NULL: plain. m.tc holds it
     * too when the handshake follows the connect (MQTT, NATS --tls-first) */
    struct sq_tls_client *tls;
    struct sq_engine__busws *ws; /* MQTT over WebSocket (engine/busws.h); NULL: on the socket */
    bool upgrade;  /* the protocol asked for TLS on the plaintext connection (NATS after INFO):
                      it starts at the end of the event */
    bool was_open; /* opened before: the next open is a reconnect */
    bool dirty;    /* queued inside an event: write when it ends */
    int busy;      /* inside an event of this connection */
    int broken;    /* a failure found while busy: 1 + enum sq_errk; 0 none */
};

/* One unit read, handed to the protocol (busws.c feeds the payload of frames through it). */
int sq_engine__bus_unit(void *ud, const char *p, size_t n, size_t *need);

/* Open: it takes messages. */
static inline bool sq_engine__bus_is_open(const struct sq_engine__busconn *b)
{
    return b->m.state == SQ_ENGINE__MX_OPEN;
}

/* Inside a read: the protocol read what comes in the clear (NATS's INFO) and wants TLS now.
 * At the end of the event the transport shakes hands with b->tls on the same socket
 * (sq_engine__xport_starttls); once it is done, ops->hello runs again (the protocol's turn to
 * write its greeting, now encrypted); a failure is counted as a TLS error and the connection
 * retried. */
void sq_engine__bus_starttls(struct sq_engine__busconn *b);

/* Sets up a connection that carries no VUs (engine/flowbus.c: a flow's publish and subscribe
 * steps): it connects to addr when asked (sq_engine__bus_start), and reconnects only when asked
 * again. */
void sq_engine__bus_init_side(struct sq_engine__busconn *b, struct sq_engine__worker *w,
                              const struct sq_engine__bus_ops *ops, const struct sq_addr *addr);
void sq_engine__bus_start(struct sq_engine__busconn *b);
/* Closes it without a callback and frees its buffers. */
void sq_engine__bus_dispose_side(struct sq_engine__busconn *b);
/* Connect and greeting timeouts, keep-alive, a stuck write: the sweep's part for one
 * connection. */
void sq_engine__bus_sweep_one(struct sq_engine__busconn *b, int64_t now);

/* What the bus driver keeps per VU. */
struct sq_engine__busvu {
    uint32_t gen;  /* moves at each send and close: an answer to an older one is late */
    uint64_t iter; /* messages so far ({{$iteration}}) */
    uint64_t seq;  /* MQTT round trip: the stamp of the publish out (UINT64_MAX: none) */
    /* The stamp of its message not yet completed (UINT64_MAX: none): cleared when it completes;
     * still set at its next message or at the end of the run, it is unfinished (worker.h). */
    uint64_t out;
};

/* The per-worker state of a bus driver (w->proto). */
struct sq_engine__busdrv {
    const struct sq_engine__bus_ops *ops;
    const struct sq_bus_config *bus;
    char *conns; /* nconn connections of ops->conn_size bytes */
    uint32_t nconn, window;
    uint32_t quarter; /* batches: write (and ping) every quarter window inside an event */
    struct sq_engine__busvu *vus; /* per VU of the worker */
    const char *payload;          /* the static payload, or NULL: a template rendered per message */
    size_t payload_len;
    char *msg; /* a whole static message (the protocol's init builds it), or NULL */
    size_t msg_len;
    size_t id_off;                   /* in msg: where a 16-bit packet id goes; 0: none */
    struct sq_buf scratch, hscratch; /* rendering: the payload, header values */
    void *proto;                     /* the protocol's own per-worker state */
};

struct sq_engine__busdrv *sq_engine__busdrv_of(const struct sq_engine__worker *w);

/* The connection with index k, and the one a VU rides. */
struct sq_engine__busconn *sq_engine__bus_at(struct sq_engine__busdrv *d, uint32_t k);
struct sq_engine__busconn *sq_engine__bus_of(struct sq_engine__conn *c);

/* Queues n bytes on b; writes at the end of the current event, or soon (a timer due now) when
 * there is none. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_engine__bus_queue(struct sq_engine__busconn *b, const void *p, size_t n);
/* Room for n bytes at the end of out (fill them, then sq_engine__bus_commit how many were used), or
 * NULL when out of memory. */
char *sq_engine__bus_room(struct sq_engine__busconn *b, size_t n);
void sq_engine__bus_commit(struct sq_engine__busconn *b, size_t n);
/* Writes what is queued now, even inside an event (a protocol that closes its batches itself:
 * NATS core and MQTT QoS 0 write every quarter window, so four batches are out at once and
 * the broker always has the next one while the PONG of the last one travels back). */
void sq_engine__bus_write_now(struct sq_engine__busconn *b);
/* The hello is done: the connection is open, its waiting VUs go to work. */
void sq_engine__bus_open(struct sq_engine__busconn *b);
/* The connection fails with kind (the kind fails the requests out on it): at once, or when the
 * current event ends. */
void sq_engine__bus_fail(struct sq_engine__busconn *b, enum sq_errk kind);
/* Keeps the broker's first error message for the result (bus_error); with count, the message
 * is a refusal of the connection or session: counted as a `server_error`. */
void sq_engine__bus_note(struct sq_engine__busconn *b, const char *msg, size_t len, bool count);

/* ---- batches ---- */

/* The message just queued (before its commit: the ping the commit may write must cover it) of
 * VU local at generation gen joins the batch. Returns 0 or -ENOMEM. */
static inline int sq_engine__bus_batch_add(struct sq_engine__busconn *b, uint32_t local,
                                           uint32_t gen)
{
    if (sq_engine__ring_push(&b->fifo, (uint64_t)local << 32 | gen) < 0)
        return -ENOMEM;
    b->unpinged++;
    return 0;
}
/* The answer to the oldest ping in flight came: how many messages at the head of b->fifo it
 * closes (the caller pops them; 0: a keep-alive's, or no ping out). */
static inline uint64_t sq_engine__bus_batch_take(struct sq_engine__busconn *b)
{
    if (!b->pings.len)
        return 0;
    b->answered++;
    return sq_engine__ring_pop(&b->pings);
}
/* A keep-alive: a ping that closes no message. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_engine__bus_keepalive(struct sq_engine__busconn *b);

/* ---- the bus driver's skeleton (natsdrv.c, mqttdrv.c) ---- */

/* The protocols' ops (natsdrv.c, mqttdrv.c); sq_engine__bus_driver picks by cfg->bus->kind. */
extern const struct sq_engine__bus_ops sq_engine__nats_ops, sq_engine__mqtt_ops;

/* One unit of a broker connection, a driver's or a flow's side one (flowbus.c), parsed, and what
 * every client answers alike, answered: NATS (natsdrv.c) a PING with its PONG, an -ERR noted
 * (while greeting: a refusal, the connection backs off); MQTT (mqttdrv.c) a PUBREC with its
 * PUBREL (unless it refuses), a QoS 1 / 2 PUBLISH with its PUBACK / PUBREC, a PUBREL with its
 * PUBCOMP. Returns what the parser returns; the unit is the caller's to handle further. */
int sq_engine__bus_nats_unit(struct sq_engine__busconn *b, const struct sq_nats_limits *lim,
                             const char *p, size_t n, struct sq_nats_event *ev, size_t *need);
int sq_engine__bus_mqtt_unit(struct sq_engine__busconn *b, const struct sq_mqtt_limits *lim,
                             const char *p, size_t n, struct sq_mqtt_packet *pk, size_t *need);

/* VU c's request completed with bytes of answer: counted, and the VU goes on. */
void sq_engine__bus_complete(struct sq_engine__busconn *b, struct sq_engine__conn *c, size_t bytes);
/* VU c's request failed with kind k; the VU asks for its connection again. */
void sq_engine__bus_vu_fail(struct sq_engine__conn *c, enum sq_errk k);
/* The batch's answer came: its messages whose VU still waits for them (same generation)
 * complete. */
void sq_engine__bus_batch_complete(struct sq_engine__busconn *b);

/* A VU's message when it is not the static one: the payload (the static one, or the template
 * rendered into the worker's scratch) and the values of the first nh headers (rendered; their
 * names are bus->headers[i].name), the stamp's sequence number when the templates stamp. */
struct sq_engine__busmsg {
    const char *payload;
    size_t len;
    struct sq_str vals[SQ_BUS_MAX_HEADERS];
    uint64_t seq;
};
/* Renders c's message (its iteration moves on). Returns 0 or SQ_ERRK_WRITE. */
int sq_engine__bus_render(struct sq_engine__busdrv *d, struct sq_engine__conn *c, size_t nh,
                          struct sq_engine__busmsg *m);
/* The n bytes of VU local's message are in the room (sq_engine__bus_room): committed, after
 * joining the batch when `batch`; a long batch inside an event is written every quarter window.
 * Returns 0 or SQ_ERRK_WRITE. Inline: the message path of every send. */
static inline int sq_engine__bus_sent(struct sq_engine__busdrv *d, struct sq_engine__busconn *b,
                                      uint32_t local, size_t n, bool batch)
{
    /* the batch first: the commit may write, and the ping it adds must cover this message */
    if (batch && sq_engine__bus_batch_add(b, local, d->vus[local].gen) < 0)
        return SQ_ERRK_WRITE;
    sq_engine__bus_commit(b, n);
    if (batch && b->busy && b->unpinged >= d->quarter)
        sq_engine__bus_write_now(b);
    return 0;
}

/* Sends d->msg for VU local, its packet id patched in at d->id_off when id != 0: one copy.
 * Returns 0 or SQ_ERRK_WRITE. */
static inline int sq_engine__bus_send_static(struct sq_engine__busdrv *d,
                                             struct sq_engine__busconn *b, uint32_t local,
                                             uint16_t id, bool batch)
{
    char *r = sq_engine__bus_room(b, d->msg_len);
    if (!r)
        return SQ_ERRK_WRITE;
    memcpy(r, d->msg, d->msg_len);
    if (id) {
        r[d->id_off] = (char)(id >> 8);
        r[d->id_off + 1] = (char)id;
    }
    return sq_engine__bus_sent(d, b, local, d->msg_len, batch);
}

#endif
