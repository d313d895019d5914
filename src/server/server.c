/* server/server.c - the HTTP/1.1 server core (see server.h and docs/internals/server.md).
 *
 * Shape: N workers, each a thread with its own epoll loop, SO_REUSEPORT listener, read buffer
 * (rbuf), output buffer (ob) and pool of connection structs. A stop eventfd, never read, is
 * registered in every loop: once written it stays readable, so every worker wakes and leaves.
 *
 * Read path: one read() per readiness into the worker's rbuf; every complete request in it is
 * answered into ob; ob is sent with one send() at the end (or earlier once it passes OB_SOFT).
 * Only the bytes of an incomplete request are copied into the connection (c->in), and later
 * reads go straight into c->in until it completes. A connection between requests holds no
 * buffer at all: sizeof(struct conn) bytes from a slab.
 *
 * Order invariant: responses leave in request order. The serve loop stops at the first request
 * whose answer cannot be written now - a parked (delayed) response (F_DEFER), output that hit
 * EAGAIN (c->out), or a close (F_CLOSE) - and the requests behind it wait in c->in with EPOLLIN
 * off, so a pipelining client gets back-pressure instead of a growing buffer.
 *
 * Answer later: a plain delayed response is parked as pointers in the connection (d_status,
 * d_ctype, d_body); any other (a fill tail, extra headers, a body that does not outlive the
 * handler call) is rendered at once and its bytes held in an outq (d_held, DF_HELD) until the
 * timer fires. Either way F_DEFER is set and the connection waits with no events registered.
 *
 * Streams: a streamed answer (resp->stream) sends its head with the batch, then lives in a small
 * struct stream (c->d_stream, DF_STREAM) with F_DEFER set, driven by c->timer: each tick renders
 * the pieces that are due as chunks into ob and sends them. While c->out is pending the tick only
 * notes it (blocked) and on_writable runs it again once the output drains, so a slow reader
 * holds at most one batch of pieces, never a growing queue.
 *
 * Write path: the batch is sent as soon as it is built; only on EAGAIN is the rest copied into
 * c->out and EPOLLOUT requested (one epoll_ctl), and EPOLLIN comes back when it drains.
 * c->out holds [bytes][fill tail]: a large streamed body is never copied, only referenced.
 * At most one fill tail is ever pending because the serve loop stops right after it blocks.
 *
 * Closing: an error answer (400/413/431), or "Connection: close" with unread input behind it,
 * shuts the write side and drains input for up to LINGER_NS (F_LINGER) so the client reads the
 * answer instead of an RST. A plain close with nothing unread closes at once.
 *
 * Timeouts: no timer per request or per connection. Each worker keeps a coarse clock (w->tick,
 * ms, advanced only by its sweep timer); a read or a write stores it in c->seen (one store, no
 * clock read), and c->in->since is the tick when the incomplete head at the start of c->in
 * began. During a TLS handshake c->seen stays at the accept. The sweep, every 1/8 of the
 * shortest timeout (at most 1 s), walks the worker's slabs: a connection parked on the server's
 * own timer (a delayed or streamed answer, an h2 stream waiting on one) is skipped, and stamped
 * when it wakes; one silent for idle_ms is closed; one reading a head for header_ms (or a
 * request for request_ms), or a body slower than min_rate after the grace, gets 408 and a
 * lingering close, and a handshake not done in header_ms is closed. A stamp lags the activity
 * it marks by less than a sweep, so the sweep waits one sweep longer than the timeout: a timeout
 * never fires early, and at most two sweeps late. Accepts refresh w->tick from the loop's round
 * time too, so connections accepted a millisecond apart have different ages.
 *
 * Caps: max_conns (one atomic counter) and max_conns_per_peer (a salted-hash table under a lock,
 * touched per accept and close, never per request). At a cap, evict closes the accepting
 * worker's connection that has waited longest on its client (never one being answered) so the
 * new one gets in; without evict, or with none to close, the new one gets a 503 and a close.
 *
 * Output is capped by construction: the serve loop stops at the first blocked batch, so c->out
 * holds at most one batch (OB_SOFT plus the one answer that crossed it; a fill tail by
 * reference) and EPOLLIN stays off until it drains. A client that never reads holds that, its
 * c->in (at most IN_MAX) and its socket buffers, and the idle timeout closes it.
 */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/str.h"
#include "base/text.h"
#include "loop/loop.h"
#include "net/sock.h"
#include "net/tls.h"
#include "server/h2.h"

#define RBUF_SIZE   (64 * 1024)
#define OB_INIT     (64 * 1024)
#define OB_SOFT     (64 * 1024)   /* send the batch once this much is queued */
#define OB_KEEP     (1024 * 1024) /* a batch buffer grown past this shrinks back after use */
#define FILL_INLINE (16 * 1024)   /* fill tails up to this are copied into the batch */
#define IN_MIN      4096          /* smallest free space offered to read() in c->in */
/* c->in never grows past this: a head, a body, and the overhead of chunked framing */
#define IN_MAX          (SQ_SERVER_MAX_HEAD + 2 * SQ_SERVER_MAX_BODY)
#define LINGER_NS       (1 * SQ_NS_PER_S)
#define ACCEPT_BURST    64
#define ACCEPT_PAUSE_NS (100 * SQ_NS_PER_MS)
#define SLAB_BYTES      32768 /* a slab of connections, aligned to its size (peer_of) */
#define SLAB_CONNS      320
#define MAX_IOV         16
#define SWEEP_MIN_NS    (10 * SQ_NS_PER_MS)
#define SWEEP_MAX_NS    (1 * SQ_NS_PER_S)

#define BUMP(x)                                                                                    \
    atomic_store_explicit(&(x), atomic_load_explicit(&(x), memory_order_relaxed) + 1,              \
                          memory_order_relaxed)

/* Parse state of the one incomplete request at the start of a connection's saved input.
 * Offsets are from the start of that request. */
struct rx {
    uint32_t need;   /* Content-Length body: bytes needed before parsing again is worth it */
    uint32_t dlen;   /* chunked: decoded bytes, kept in place right after the head */
    uint32_t raw;    /* chunked: offset of the next raw byte to feed the framer */
    bool chunked;    /* framer is live */
    bool continued;  /* "100 Continue" was sent */
    bool admitted;   /* the on_head hook let it in (asked once per request) */
    int64_t arrival; /* when the head was first parsed complete (stamp_arrivals), else 0 */
    struct sq_h1_body framer;
};

/* Saved input: allocated only while a request is incomplete or waits behind a parked one. */
struct inbuf {
    uint32_t len, cap;
    uint32_t since; /* w->tick when the request at the start began to arrive */
    struct rx st;
    char data[];
};

/* Output that hit EAGAIN: data[off, len), then fill_left bytes of fill (cyclic from fill_off). */
struct outq {
    size_t off, len, cap;
    const char *fill;
    size_t fill_len, fill_off;
    uint64_t fill_left;
    char data[];
};

enum {
    F_DEFER = 1,        /* a response is parked until c->timer fires */
    F_CLOSE = 2,        /* close once the output is drained; serve no more requests */
    F_LINGER_AFTER = 4, /* ...and close lingering (error answer, or input left unread) */
    F_LINGER = 8,       /* write side shut; draining input until EOF or c->timer */
    F_FAIL = 16,        /* out of memory while answering: close without lingering */
    F_HS = 32,          /* TLS handshake in progress */
    F_H2 = 64,          /* another protocol owns the bytes: HTTP/2 (c->h2, server/h2.h), or an
                           upgrade (d_flags DF_UP, c->up) */
    F_SERVED = 128,     /* answered a request: the HTTP/2 preface can no longer come */
};

/* parked response: HEAD, Connection header, rendered bytes held in d_held, a stream in d_stream,
 * an answer the handler gives later in d_hold */
enum { DF_HEAD = 1, DF_CLOSE = 2, DF_KA = 4, DF_HELD = 8, DF_STREAM = 16, DF_HOLD = 32 };
/* parked connections whose c->seen is the idle stamp (not a plain parked answer's length) */
#define DF_STAMPED (DF_HELD | DF_STREAM | DF_HOLD)
/* With F_H2 (never parked, so d_flags is free): the connection was upgraded, c->up holds it */
enum { DF_UP = 128 };

/* An upgraded connection's protocol (sq_server_resp.upgrade): one allocation per connection. */
struct upgraded {
    const struct sq_server_upgrade *ops;
    void *ud;
};

/* how render() frames the body */
enum { FR_LENGTH, FR_CHUNKED, FR_NONE };
enum { CONN_HDR_NONE, CONN_HDR_CLOSE, CONN_HDR_KA };

struct worker;

/* One connection: 96 bytes on x86-64, all an idle one costs besides the kernel's socket (and,
 * with TLS, OpenSSL's state). */
struct conn {
    struct sq_io io; /* io.fd < 0: the struct is free */
    struct worker *w;
    struct sq_tls_conn *tls; /* NULL: plaintext */
    union {
        struct inbuf *in;
        struct conn *next_free;
    };
    struct outq *out;
    struct sq_timer timer; /* parked response or lingering close */
    union {
        const char *d_ctype;      /* the parked response */
        struct sq_server__h2 *h2; /* F_H2: the HTTP/2 session (never parked) */
        struct upgraded *up;      /* F_H2 with DF_UP: the upgrade's protocol */
    };
    union {
        const char *d_body;
        struct outq *d_held;     /* DF_HELD: the rendered response, sent when the timer fires */
        struct stream *d_stream; /* DF_STREAM: the streamed body in progress */
        struct sq_server_hold *d_hold; /* DF_HOLD: an answer the handler gives later */
    };
    union {
        uint32_t d_body_len; /* a plain parked answer (F_DEFER without DF_HELD or DF_STREAM) */
        uint32_t seen;       /* otherwise: w->tick at the last read or write (F_HS: the accept) */
    };
    uint16_t d_status;
    uint8_t flags;
    uint8_t d_flags;
};

_Static_assert(sizeof(struct conn) <= 96, "an idle connection should stay this small");

/* A streamed body in progress (see sq_server_resp.stream). */
struct stream {
    struct sq_server__pace pace;
    bool chunked; /* false: HTTP/1.0, the body ends with the connection */
    bool blocked; /* a tick found c->out pending: on_writable ticks again once it drains */
};

#define STREAM_BATCH (64 * 1024) /* bytes of pieces rendered per tick at most */

/* A held request (sq_server_hold): how its answer is to be framed, and who to tell if the
 * connection goes first. */
struct sq_server_hold {
    struct conn *c;
    sq_server_gone_fn gone;
    void *ud;
    uint8_t conn_hdr;
    bool head, close_after, chunked, streaming;
};

/* Work handed to a worker by another thread (sq_server_post). */
struct post {
    struct post *next;
    void (*fn)(void *ud);
    void *ud;
};

struct slab {
    struct slab *next;
    uint32_t peer[SLAB_CONNS]; /* c[i]'s peer key (max_conns_per_peer); 0: not counted */
    struct conn c[SLAB_CONNS];
};

_Static_assert(sizeof(struct slab) <= SLAB_BYTES, "a slab fits its alignment");

/* The peer key slot of c, found from its address: slabs are aligned to SLAB_BYTES. */
static inline uint32_t *peer_of(struct conn *c)
{
    struct slab *sl = (struct slab *)((uintptr_t)c & ~(uintptr_t)(SLAB_BYTES - 1));
    return &sl->peer[c - sl->c];
}

/* One client address's open connections (max_conns_per_peer), in sq_server's table. */
struct peer {
    uint32_t key, n; /* key 0: an empty slot */
};

/* Written by the owning worker only (relaxed stores), read by anyone (relaxed loads). */
struct counters {
    _Atomic uint64_t accepted, requests, bad_req, too_large, head_big, tls_ok, tls_failed;
    _Atomic uint64_t h2_conns, h2_streams, smuggling, refused, idle_to, header_to, body_to;
    _Atomic uint64_t head_refused, evicted;
};

struct view {
    const char *p;
    size_t len;
    const char *fill;
    size_t fill_len, fill_off;
    uint64_t fill_left;
};

struct worker {
    _Alignas(64) struct counters cnt; /* own cache line(s): no false sharing between workers */
    _Alignas(64) struct sq_server *srv;
    int idx;
    int lfd;
    bool started;
    bool stamp; /* stamp_arrivals */
    pthread_t thr;
    struct sq_loop *loop;
    struct sq_io lio, stop_io, wake_io;
    uint32_t nconns;                 /* open on this worker: the sweep sleeps while none are */
    struct sq_server_hold *hold_new; /* set by sq_server_hold during the handler call */
    int wake_fd;                     /* eventfd: posts are waiting */
    pthread_mutex_t post_mu;         /* guards the post queue */
    struct post *post_head, *post_tail;
    bool post_mu_init;
    struct sq_timer accept_timer;
    struct sq_timer sweep_timer; /* armed when a timeout is set */
    uint32_t tick;               /* ms since epoch_ns, as of the last sweep */
    int64_t epoch_ns;
    char *rbuf;
    char *ob; /* the batch being built for one connection */
    size_t olen, ocap;
    struct view fill; /* a large fill tail after ob, sent with it */
    struct slab *slabs;
    struct conn *free_conns;
    struct sq_h1_limits lim;
    struct sq_h1_header hdrs[SQ_SERVER_MAX_HEADERS];
    /* the last Host value found valid (empty at first, which is valid): a client sends the same
     * one on every request, so the check is a compare */
    uint32_t host_len;
    char host[64];
};

struct sq_server {
    atomic_int stopping;
    int ulfd;    /* a Unix socket's listener (cfg->unix_path), each worker a dup of it; -1 */
    char *upath; /* its path, removed at the end (NULL: TCP) */
    _Alignas(64) atomic_uint open; /* connections open now; touched per connection, not request */
    _Alignas(64) int efd;
    int nworkers;
    bool joined;
    bool stamp;
    bool http1_only;
    uint16_t port;
    uint32_t max_conns;
    uint32_t per_peer; /* max_conns_per_peer; 0: off */
    bool evict;
    /* connections per peer key (open addressing, linear probing, at most half full), guarded
     * by peer_mu: touched per accept and per close while per_peer is set */
    pthread_mutex_t peer_mu;
    bool peer_mu_init;
    struct peer *peers;
    uint32_t peer_cap, peer_used;
    uint64_t peer_salt; /* keys are a salted hash of the address: none can be aimed at */
    /* what a connection refused or evicted at a cap is sent (best effort, plaintext only) */
    char e503_full[512], e503_peer[512], e503_evicted[512];
    uint32_t idle_ms, header_ms, request_ms; /* 0: off */
    uint32_t min_rate;                       /* bytes/s; 0: off */
    uint32_t rate_grace_ms;                  /* the header timeout, or 1 s */
    int64_t sweep_ns;                        /* 0: no sweep */
    /* the 408s' JSON bodies, with the configured numbers */
    char e408_head[192], e408_request[192], e408_rate[256];
    struct sq_tls_server *tls;
    sq_server_handler handler;
    sq_server_head_fn on_head;
    void *ud;
    struct worker **w;
};

static void pump(struct worker *w, struct conn *c, char *buf, size_t len, struct rx *st);
static bool hold_head(struct worker *w, struct sq_server_hold *h,
                      const struct sq_server_resp *resp);
static void hold_free(struct conn *c, struct sq_server_hold *h);
static void up_begin(struct worker *w, struct conn *c, const char *initial, size_t len);
static bool out_append(struct conn *c, const char *p, size_t n);
static void resume(struct worker *w, struct conn *c);
static void peer_drop(struct sq_server *s, uint32_t key);

/* ---- small helpers ---- */

static const char *const reasons[600] = {
    [100] = "Continue",
    [101] = "Switching Protocols",
    [200] = "OK",
    [201] = "Created",
    [202] = "Accepted",
    [203] = "Non-Authoritative Information",
    [204] = "No Content",
    [205] = "Reset Content",
    [206] = "Partial Content",
    [300] = "Multiple Choices",
    [301] = "Moved Permanently",
    [302] = "Found",
    [303] = "See Other",
    [304] = "Not Modified",
    [307] = "Temporary Redirect",
    [308] = "Permanent Redirect",
    [400] = "Bad Request",
    [401] = "Unauthorized",
    [402] = "Payment Required",
    [403] = "Forbidden",
    [404] = "Not Found",
    [405] = "Method Not Allowed",
    [406] = "Not Acceptable",
    [407] = "Proxy Authentication Required",
    [408] = "Request Timeout",
    [409] = "Conflict",
    [410] = "Gone",
    [411] = "Length Required",
    [412] = "Precondition Failed",
    [413] = "Content Too Large",
    [414] = "URI Too Long",
    [415] = "Unsupported Media Type",
    [416] = "Range Not Satisfiable",
    [417] = "Expectation Failed",
    [418] = "I'm a teapot",
    [421] = "Misdirected Request",
    [422] = "Unprocessable Content",
    [425] = "Too Early",
    [426] = "Upgrade Required",
    [428] = "Precondition Required",
    [429] = "Too Many Requests",
    [431] = "Request Header Fields Too Large",
    [451] = "Unavailable For Legal Reasons",
    [500] = "Internal Server Error",
    [501] = "Not Implemented",
    [502] = "Bad Gateway",
    [503] = "Service Unavailable",
    [504] = "Gateway Timeout",
    [505] = "HTTP Version Not Supported",
};

const char *sq_server_reason(int status)
{
    return status >= 0 && status < 600 && reasons[status] ? reasons[status] : "";
}

const struct sq_h1_header *sq_server_req_header(const struct sq_server_req *req, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->num_headers; i++) {
        const struct sq_h1_header *h = &req->headers[i];
        if (h->name_len == n && strncasecmp(h->name, name, n) == 0)
            return h;
    }
    return NULL;
}

static char *put(char *o, const char *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}

static char *put_u64(char *o, uint64_t v)
{
    char tmp[20];
    int i = 20;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return put(o, tmp + i, (size_t)(20 - i));
}

#define PUT_LIT(o, s) put((o), (s), sizeof(s) - 1)

static bool ob_reserve(struct worker *w, size_t n)
{
    if (w->ocap - w->olen >= n)
        return true;
    size_t cap = w->ocap * 2;
    if (cap < w->olen + n)
        cap = w->olen + n;
    char *p = realloc(w->ob, cap);
    if (!p)
        return false;
    w->ob = p;
    w->ocap = cap;
    return true;
}

/* Copies fill bytes [off, off+n) (cyclic) to o. */
static void copy_fill(char *o, const char *fill, size_t fill_len, uint64_t n)
{
    while (n) {
        size_t k = n < fill_len ? (size_t)n : fill_len;
        memcpy(o, fill, k);
        o += k;
        n -= k;
    }
}

/* Renders one response into the batch, its body framed as framing says (FR_CHUNKED and FR_NONE
 * write the head only: a stream's pieces follow later). Returns false when out of memory. */
static bool render_framed(struct worker *w, const struct sq_server_resp *r, bool head_only,
                          int conn_hdr, int framing)
{
    int status = r->status ? r->status : 200;
    const char *ctype = r->content_type, *fill = r->fill;
    size_t body_len = r->body_len, fill_len = r->fill_len, hdrs_len = r->headers_len;
    uint64_t fill_total = r->fill_total;
    if (status < 200 || status > 999 || (fill_total && (!fill || !fill_len))) {
        status = 500; /* 1xx cannot be a final answer; a fill without bytes is a handler bug */
        ctype = NULL;
        body_len = hdrs_len = 0;
        fill_total = 0;
    }
    bool no_cl = status == 204 || status == 304;
    bool no_body = head_only || no_cl || framing != FR_LENGTH;
    size_t ctype_len = ctype ? strlen(ctype) : 0;
    bool inline_fill = fill_total <= FILL_INLINE;
    size_t need = 160 + ctype_len + hdrs_len;
    if (!no_body)
        need += body_len + (inline_fill ? (size_t)fill_total : 0);
    if (!ob_reserve(w, need))
        return false;

    char *o = w->ob + w->olen;
    if (status == 200) {
        o = PUT_LIT(o, "HTTP/1.1 200 OK\r\n");
    } else {
        const char *reason = sq_server_reason(status);
        o = PUT_LIT(o, "HTTP/1.1 ");
        *o++ = (char)('0' + status / 100);
        *o++ = (char)('0' + status / 10 % 10);
        *o++ = (char)('0' + status % 10);
        *o++ = ' ';
        o = put(o, reason, strlen(reason));
        o = PUT_LIT(o, "\r\n");
    }
    if (!no_cl && framing == FR_LENGTH) {
        o = PUT_LIT(o, "Content-Length: ");
        o = put_u64(o, body_len + fill_total);
        o = PUT_LIT(o, "\r\n");
    } else if (!no_cl && framing == FR_CHUNKED) {
        o = PUT_LIT(o, "Transfer-Encoding: chunked\r\n");
    }
    if (ctype) {
        o = PUT_LIT(o, "Content-Type: ");
        o = put(o, ctype, ctype_len);
        o = PUT_LIT(o, "\r\n");
    }
    if (hdrs_len)
        o = put(o, r->headers, hdrs_len);
    if (conn_hdr == CONN_HDR_CLOSE)
        o = PUT_LIT(o, "Connection: close\r\n");
    else if (conn_hdr == CONN_HDR_KA)
        o = PUT_LIT(o, "Connection: keep-alive\r\n");
    o = PUT_LIT(o, "\r\n");
    if (!no_body) {
        if (body_len)
            o = put(o, r->body, body_len);
        if (fill_total && inline_fill) {
            copy_fill(o, fill, fill_len, fill_total);
            o += fill_total;
        } else if (fill_total) {
            w->fill = (struct view){.fill = fill, .fill_len = fill_len, .fill_left = fill_total};
        }
    }
    w->olen = (size_t)(o - w->ob);
    return true;
}

static bool render(struct worker *w, const struct sq_server_resp *r, bool head_only, int conn_hdr)
{
    return render_framed(w, r, head_only, conn_hdr, FR_LENGTH);
}

/* ---- sending ---- */

/* view_send over TLS: piece by piece, each write all-or-nothing. A piece that hits EAGAIN is
 * left in v whole, so the retry starts with the same bytes (sq_tls_write's rule). */
static int tls_view_send(struct sq_tls_conn *t, struct view *v)
{
    for (;;) {
        const char *p;
        size_t k;
        bool fill = v->len == 0;
        if (!fill) {
            p = v->p;
            k = v->len;
        } else if (v->fill_left) {
            p = v->fill + v->fill_off;
            k = v->fill_len - v->fill_off;
            if (k > v->fill_left)
                k = (size_t)v->fill_left;
        } else {
            return 0;
        }
        ssize_t r = sq_tls_write(t, p, k);
        if (r < 0)
            return (int)r;
        if (!fill) {
            v->p += r;
            v->len -= (size_t)r;
        } else {
            v->fill_left -= (uint64_t)r;
            v->fill_off = (v->fill_off + (size_t)r) % v->fill_len;
        }
    }
}

/* Sends v on c until done (0), the socket is full (-EAGAIN: v says what is left) or an error. */
static int view_send(struct conn *c, struct view *v)
{
    if (SQ_UNLIKELY(c->tls != NULL))
        return tls_view_send(c->tls, v);
    int fd = c->io.fd;
    for (;;) {
        struct iovec iov[MAX_IOV];
        int n = 0;
        size_t total = 0;
        if (v->len) {
            iov[n++] = (struct iovec){(void *)v->p, v->len};
            total += v->len;
        }
        uint64_t left = v->fill_left;
        size_t foff = v->fill_off;
        while (left && n < MAX_IOV) {
            size_t k = v->fill_len - foff;
            if (k > left)
                k = (size_t)left;
            iov[n++] = (struct iovec){(void *)(v->fill + foff), k};
            total += k;
            left -= k;
            foff = 0;
        }
        if (n == 0)
            return 0;
        ssize_t r;
        if (n == 1) {
            r = send(fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL);
        } else {
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            r = sendmsg(fd, &mh, MSG_NOSIGNAL);
        }
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? -EAGAIN : -errno;
        }
        size_t done = (size_t)r;
        size_t k = done < v->len ? done : v->len;
        v->p += k;
        v->len -= k;
        done -= k;
        if (done) {
            v->fill_left -= done;
            v->fill_off = (v->fill_off + done) % v->fill_len;
        }
        if ((size_t)r < total)
            return -EAGAIN; /* a short write means the socket buffer is full: wait for EPOLLOUT */
    }
}

/* Sends what q holds on c. Returns -EAGAIN when the socket filled (q keeps the rest), else
 * frees q and returns 0 (all of it left) or a negative code. */
static int outq_send(struct conn *c, struct outq *q)
{
    struct view v = {q->data + q->off, q->len - q->off, q->fill,
                     q->fill_len,      q->fill_off,     q->fill_left};
    int rc = view_send(c, &v);
    if (rc == -EAGAIN) {
        q->off = q->len - v.len;
        q->fill_off = v.fill_off;
        q->fill_left = v.fill_left;
        return rc;
    }
    free(q);
    return rc;
}

/* EPOLLOUT: sends what c->out holds. Returns 0 once it has all left (c->out is NULL),
 * -EAGAIN when the socket filled again (c->out keeps the rest), or a negative code (c->out is
 * NULL; the caller closes c). */
static int out_drain(struct conn *c)
{
    int rc = outq_send(c, c->out);
    if (rc != -EAGAIN)
        c->out = NULL;
    return rc;
}

/* Keeps what v still holds after a send that hit EAGAIN (bytes copied, a fill tail by
 * reference) as c->out. False when out of memory. */
static bool out_keep(struct conn *c, const struct view *v)
{
    /* the order invariant: output waits in one queue, and nothing was sent ahead of it */
    SQ_ASSERT_MSG(c->out == NULL, "c->out holds at most one batch");
    struct outq *q = malloc(sizeof(*q) + v->len);
    if (!q)
        return false;
    q->off = 0;
    q->len = q->cap = v->len;
    q->fill = v->fill;
    q->fill_len = v->fill_len;
    q->fill_off = v->fill_off;
    q->fill_left = v->fill_left;
    if (v->len)
        memcpy(q->data, v->p, v->len);
    c->out = q;
    return true;
}

/* Sends the batch (ob, then a large fill tail). Returns 0 when all of it left, 1 when the rest
 * went to c->out, or a negative code (the caller closes c). */
static int batch_flush(struct worker *w, struct conn *c)
{
    /* a batch goes out only behind nothing: a pending c->out would be overtaken */
    SQ_ASSERT_MSG(c->out == NULL, "responses leave in request order");
    struct view v = w->fill;
    v.p = w->ob;
    v.len = w->olen;
    w->olen = 0;
    w->fill.fill_left = 0;
    int rc = view_send(c, &v);
    if (rc == -EAGAIN)
        rc = out_keep(c, &v) ? 1 : -ENOMEM;
    if (w->ocap > OB_KEEP) { /* one huge answer (an echo) grew it: give the memory back */
        char *p = realloc(w->ob, OB_INIT);
        if (p) {
            w->ob = p;
            w->ocap = OB_INIT;
        }
    }
    return rc;
}

/* ---- connections ---- */

static struct conn *conn_get(struct worker *w)
{
    if (!w->free_conns) {
        struct slab *s = aligned_alloc(SLAB_BYTES, SLAB_BYTES);
        if (!s)
            return NULL;
        memset(s, 0, sizeof(*s));
        s->next = w->slabs;
        w->slabs = s;
        for (int i = SLAB_CONNS - 1; i >= 0; i--) {
            s->c[i].io.fd = -1;
            s->c[i].next_free = w->free_conns;
            w->free_conns = &s->c[i];
        }
    }
    struct conn *c = w->free_conns;
    w->free_conns = c->next_free;
    return c;
}

/* Frees a held response that was never sent, or a stream that did not end. */
static void drop_held(struct conn *c)
{
    if ((c->flags & F_DEFER) && (c->d_flags & DF_HELD)) {
        free(c->d_held);
        c->d_held = NULL;
        c->d_flags = 0;
    } else if ((c->flags & F_DEFER) && (c->d_flags & DF_STREAM)) {
        free(c->d_stream);
        c->d_stream = NULL;
        c->d_flags = 0;
    } else if ((c->flags & F_DEFER) && (c->d_flags & DF_HOLD)) {
        struct sq_server_hold *h = c->d_hold;
        c->d_hold = NULL;
        c->d_flags = 0;
        if (h->gone)
            h->gone(h->ud);
        free(h);
    }
}

/* Releases what another protocol holds (HTTP/2's session, an upgrade's state: its closed
 * callback runs) and clears F_H2. */
static void proto_free(struct conn *c)
{
    if (!(c->flags & F_H2))
        return;
    if (c->d_flags & DF_UP) {
        struct upgraded *u = c->up;
        c->up = NULL;
        c->d_flags = 0;
        if (u) {
            u->ops->closed(u->ud);
            free(u);
        }
    } else {
        sq_server__h2_free(c->h2);
        c->h2 = NULL;
    }
    c->flags &= (uint8_t)~F_H2;
}

static void conn_close(struct worker *w, struct conn *c)
{
    sq_timer_stop(w->loop, &c->timer);
    drop_held(c);
    if (SQ_UNLIKELY(c->flags & F_H2))
        proto_free(c);
    sq_io_stop(w->loop, &c->io);
    if (c->tls) {
        sq_tls_conn_free(c->tls);
        c->tls = NULL;
    }
    close(c->io.fd);
    free(c->in);
    free(c->out);
    c->out = NULL;
    c->io.fd = -1;
    c->flags = 0;
    c->next_free = w->free_conns;
    w->free_conns = c;
    w->nconns--;
    atomic_fetch_sub_explicit(&w->srv->open, 1, memory_order_relaxed);
    if (SQ_UNLIKELY(w->srv->per_peer)) {
        uint32_t *k = peer_of(c);
        if (*k)
            peer_drop(w->srv, *k);
        *k = 0;
    }
}

static void drop_input(struct conn *c)
{
    free(c->in);
    c->in = NULL;
}

/* Registers the events c's state calls for. Returns false when c was closed. */
static bool conn_events(struct worker *w, struct conn *c)
{
    uint32_t ev;
    if (c->out)
        ev = EPOLLOUT;
    else if ((c->flags & F_DEFER) && (c->d_flags & DF_HOLD))
        ev = EPOLLRDHUP; /* a held connection hears its peer leave (gone), nothing else */
    else if (c->flags & F_DEFER)
        ev = 0;
    else
        ev = EPOLLIN;
    if (sq_io_modify(w->loop, &c->io, ev) < 0) {
        conn_close(w, c);
        return false;
    }
    return true;
}

/* The output of a closing connection has drained: close now or linger. */
static void conn_finish(struct worker *w, struct conn *c)
{
    if (SQ_UNLIKELY(c->flags & F_H2))
        proto_free(c); /* an upgraded connection that closes: the protocol is done */
    if (c->tls)
        sq_tls_shutdown(c->tls); /* close_notify first, so the client sees a clean end */
    if (!(c->flags & F_LINGER_AFTER) || (c->flags & F_FAIL) || shutdown(c->io.fd, SHUT_WR) < 0) {
        conn_close(w, c);
        return;
    }
    drop_input(c);
    c->flags = F_LINGER;
    if (sq_io_modify(w->loop, &c->io, EPOLLIN) < 0 ||
        sq_timer_start(w->loop, &c->timer, sq_loop_now(w->loop) + LINGER_NS) < 0)
        conn_close(w, c);
}

static void linger_drain(struct worker *w, struct conn *c)
{
    ssize_t n = read(c->io.fd, w->rbuf, RBUF_SIZE);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        conn_close(w, c);
}

/* Copies the incomplete request buf[0, n) into a fresh c->in. */
static bool save_input(struct conn *c, const char *buf, size_t n, const struct rx *st)
{
    size_t cap = n + IN_MIN;
    if (st->need > cap)
        cap = st->need;
    if (cap > IN_MAX)
        cap = IN_MAX;
    if (cap < n)
        cap = n;
    struct inbuf *b = malloc(sizeof(*b) + cap);
    if (!b)
        return false;
    b->len = (uint32_t)n;
    b->cap = (uint32_t)cap;
    b->st = *st;
    memcpy(b->data, buf, n);
    c->in = b;
    return true;
}

/* Makes room for a read into c->in. Returns false at the hard cap (or out of memory). */
static bool grow_input(struct conn *c)
{
    struct inbuf *b = c->in;
    if (b->cap - b->len >= IN_MIN || (b->st.need > b->len && b->cap >= b->st.need))
        return b->cap > b->len;
    size_t cap = (size_t)b->cap * 2;
    if (cap < b->st.need)
        cap = b->st.need;
    if (cap < (size_t)b->len + IN_MIN)
        cap = (size_t)b->len + IN_MIN;
    if (cap > IN_MAX)
        cap = IN_MAX;
    if (cap <= b->len)
        return false;
    struct inbuf *nb = realloc(b, sizeof(*b) + cap);
    if (!nb)
        return false;
    nb->cap = (uint32_t)cap;
    c->in = nb;
    return true;
}

/* ---- serving ---- */

/* The server's own refusals: a JSON body naming the limit (docs/daemon.md, docs/target.md). The
 * timeouts' texts carry the configured numbers and are rendered once, at start (struct
 * sq_server). */
#define E400                                                                                       \
    "{\"error\":\"malformed request: RFC 9112 refuses its request line or a header field\"}"
#define E400_SMUGGLING                                                                             \
    "{\"error\":\"malformed request: a framing RFC 9112 refuses (request smuggling: "              \
    "Content-Length with Transfer-Encoding, Content-Lengths that disagree, obs-fold, "             \
    "whitespace before a colon, or a Transfer-Encoding that does not end in chunked)\"}"
#define E400_HOST                                                                                  \
    "{\"error\":\"bad Host: an HTTP/1.1 request needs exactly one Host field, whose value is "     \
    "host[:port] (RFC 9112 3.2)\"}"
#define E400_CHUNKED "{\"error\":\"malformed chunked body (RFC 9112 7.1)\"}"
#define E413         "{\"error\":\"request body too large: the server's cap is 1 MiB (1048576 bytes)\"}"
#define E431                                                                                       \
    "{\"error\":\"request head too large: the server's cap is 8 KiB (8192 bytes) and 64 header "   \
    "fields\"}"
_Static_assert(SQ_SERVER_MAX_BODY == 1048576 && SQ_SERVER_MAX_HEAD == 8192 &&
                   SQ_SERVER_MAX_HEADERS == 64,
               "the refusals' texts name these caps");

static void error_answer(struct worker *w, struct conn *c, int status, const char *json)
{
    if (status == 400)
        BUMP(w->cnt.bad_req);
    else if (status == 413)
        BUMP(w->cnt.too_large);
    else if (status == 431)
        BUMP(w->cnt.head_big);
    struct sq_server_resp r = {.status = status,
                               .content_type = "application/json",
                               .body = json,
                               .body_len = strlen(json)};
    if (!render(w, &r, false, CONN_HDR_CLOSE))
        c->flags |= F_FAIL;
    c->flags |= F_CLOSE | F_LINGER_AFTER;
}

/* ---- request smuggling shapes (only on the error path: the parser has refused the head) ---- */

static bool ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Trims optional whitespace off both ends of [*a, *b). */
static void trim(const char **a, const char **b)
{
    while (*a < *b && ows(**a))
        (*a)++;
    while (*b > *a && ows((*b)[-1]))
        (*b)--;
}

/* The decimal value of [a, b), or -1 when it is not 1..18 digits. */
static int64_t decimal(const char *a, const char *b)
{
    if (a == b || b - a > 18)
        return -1;
    int64_t v = 0;
    for (; a < b; a++) {
        if (*a < '0' || *a > '9')
            return -1;
        v = v * 10 + (*a - '0');
    }
    return v;
}

/* See server.h. Only reached on the error path: the parser has refused the head. Incomplete
 * last lines are looked at for obs-fold only. */
bool sq_server_smuggle_shape(const char *p, size_t n)
{
    const char *e = p + n, *l = p;
    while (l < e && (*l == '\r' || *l == '\n')) /* empty lines before the request line */
        l++;
    const char *eol = memchr(l, '\n', (size_t)(e - l));
    if (!eol)
        return false;
    bool v10 = eol - l >= 9 && memcmp(eol - ((eol[-1] == '\r') ? 9 : 8), "HTTP/1.0", 8) == 0;
    int64_t cl = -1;
    bool has_cl = false, te = false, last_chunked = false;
    int chunked = 0;
    for (l = eol + 1; l < e; l = eol + 1) {
        if (ows(*l))
            return true; /* obs-fold */
        eol = memchr(l, '\n', (size_t)(e - l));
        if (!eol)
            break;
        const char *end = eol > l && eol[-1] == '\r' ? eol - 1 : eol;
        if (end == l)
            break; /* the blank line: the head ends */
        const char *colon = memchr(l, ':', (size_t)(end - l));
        if (!colon)
            continue;
        if (colon > l && ows(colon[-1]))
            return true;
        const char *v = colon + 1, *ve = end;
        size_t nl = (size_t)(colon - l);
        if (sq_ieq(l, nl, "content-length", 14)) {
            has_cl = true;
            for (const char *a = v; a <= ve;) { /* a list of values: all must be equal */
                const char *comma = memchr(a, ',', (size_t)(ve - a));
                const char *b = comma ? comma : ve, *x = a;
                trim(&x, &b);
                int64_t d = decimal(x, b);
                if (d >= 0 && cl >= 0 && d != cl)
                    return true;
                if (d >= 0)
                    cl = d;
                if (!comma)
                    break;
                a = comma + 1;
            }
        } else if (sq_ieq(l, nl, "transfer-encoding", 17)) {
            te = true;
            const char *last = v;
            for (const char *a = v; a < ve; a++)
                if (*a == ',')
                    last = a + 1;
            for (const char *a = v; a < ve;) {
                const char *comma = memchr(a, ',', (size_t)(ve - a));
                const char *b = comma ? comma : ve, *x = a;
                trim(&x, &b);
                if (sq_ieq(x, (size_t)(b - x), "chunked", 7))
                    chunked++;
                if (!comma)
                    break;
                a = comma + 1;
            }
            const char *x = last, *b = ve;
            trim(&x, &b);
            last_chunked = sq_ieq(x, (size_t)(b - x), "chunked", 7); /* the last field decides */
        }
    }
    return te && (has_cl || v10 || !last_chunked || chunked != 1);
}

/* The head at p[0, n), which the parser refused, has two Host fields or a bad Host value (only
 * on the error path, to say so in the answer). */
static bool host_shape(const char *p, size_t n)
{
    const char *e = p + n, *l = p;
    while (l < e && (*l == '\r' || *l == '\n'))
        l++;
    const char *eol = memchr(l, '\n', (size_t)(e - l));
    int hosts = 0;
    for (l = eol ? eol + 1 : e; l < e; l = eol + 1) {
        eol = memchr(l, '\n', (size_t)(e - l));
        if (!eol)
            break;
        const char *end = eol > l && eol[-1] == '\r' ? eol - 1 : eol;
        if (end == l)
            break;
        if (end - l >= 5 && sq_ieq(l, 5, "host:", 5)) {
            const char *v = l + 5, *ve = end;
            trim(&v, &ve);
            if (++hosts > 1 || !sq_h1_host_valid(v, (size_t)(ve - v)))
                return true;
        }
    }
    return false;
}

struct dechunk {
    char *dst;
    uint32_t dlen;
};

/* Moves decoded bytes down to the end of the decoded run: it never overtakes the raw bytes. */
static int on_chunk_data(void *ud, const char *data, size_t len)
{
    struct dechunk *d = ud;
    if (d->dlen + len > SQ_SERVER_MAX_BODY)
        return -EFBIG;
    memmove(d->dst + d->dlen, data, len);
    d->dlen += (uint32_t)len;
    return 0;
}

/* Feeds the chunked body of the request at p (head hl bytes, n bytes in all). Returns
 * SQ_H1_DONE with *req_len set, 0 (needs more: all raw bytes consumed) or a negative code. */
static int dechunk(char *p, size_t n, size_t hl, struct rx *st, size_t *req_len)
{
    if (!st->chunked) {
        sq_h1_body_init(&st->framer, SQ_H1_BODY_CHUNKED, 0);
        st->chunked = true;
        st->raw = (uint32_t)hl;
        st->dlen = 0;
    }
    struct dechunk d = {p + hl, st->dlen};
    size_t used = 0;
    int r = sq_h1_body_feed(&st->framer, p + st->raw, n - st->raw, &used, on_chunk_data, &d);
    st->dlen = d.dlen;
    st->raw += (uint32_t)used;
    if (r == SQ_H1_DONE)
        *req_len = st->raw;
    else if (r == 0)
        st->raw = (uint32_t)hl + st->dlen; /* the consumed raw bytes are dropped from the buffer */
    return r;
}

static void send_continue(struct worker *w, struct conn *c, struct rx *st,
                          const struct sq_h1_request *rq)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (!rq->expect_continue || st->continued || rq->minor_version < 1)
        return;
    if (!ob_reserve(w, sizeof(cont) - 1)) {
        c->flags |= F_FAIL | F_CLOSE;
        return;
    }
    memcpy(w->ob + w->olen, cont, sizeof(cont) - 1);
    w->olen += sizeof(cont) - 1;
    st->continued = true;
}

/* Renders r now and keeps its bytes (and a reference to its fill tail) in a new outq, c->d_held,
 * with c->timer armed for due. Returns false (ob and w->fill as before, nothing armed) when out
 * of memory. w->fill is empty here: a fill tail leaves before the next request is served. */
static bool hold(struct worker *w, struct conn *c, const struct sq_server_resp *r, bool head_only,
                 int conn_hdr, int64_t due)
{
    size_t start = w->olen;
    if (!render(w, r, head_only, conn_hdr))
        return false;
    size_t n = w->olen - start;
    struct outq *q = malloc(sizeof(*q) + n);
    if (q) {
        q->off = 0;
        q->len = q->cap = n;
        memcpy(q->data, w->ob + start, n);
        q->fill = w->fill.fill;
        q->fill_len = w->fill.fill_len;
        q->fill_off = 0;
        q->fill_left = w->fill.fill_left;
    }
    w->olen = start;
    w->fill.fill_left = 0;
    if (!q || sq_timer_start(w->loop, &c->timer, due) < 0) {
        free(q);
        return false;
    }
    c->d_held = q;
    return true;
}

/* Sends the head of a streamed answer with the batch and parks c with its stream, the timer
 * armed for the first piece. HEAD, 204 and 304 get the head alone and no stream. Returns false
 * (the batch as before) when out of memory. */
static bool stream_begin(struct worker *w, struct conn *c, const struct sq_server_resp *r,
                         bool head_only, bool chunked, int conn_hdr, bool close_after)
{
    int status = r->status ? r->status : 200;
    if (status < 200 || status > 999)
        return false; /* the caller answers 500 */
    struct sq_server_resp h = *r;
    h.body_len = 0;
    h.fill_total = 0;
    size_t start = w->olen;
    if (!render_framed(w, &h, head_only, conn_hdr, chunked ? FR_CHUNKED : FR_NONE))
        return false;
    if (head_only || status == 204 || status == 304) {
        if (close_after)
            c->flags |= F_CLOSE;
        return true; /* the head is the whole answer */
    }
    struct stream *st = malloc(sizeof(*st));
    if (st) {
        sq_server__pace_start(&st->pace, r);
        st->chunked = chunked;
        st->blocked = false;
    }
    if (!st || sq_timer_start(w->loop, &c->timer, sq_server__pace_due(&st->pace, 0)) < 0) {
        free(st);
        w->olen = start;
        return false;
    }
    c->d_stream = st;
    c->d_flags = (uint8_t)(DF_STREAM | (close_after ? DF_CLOSE : 0));
    c->flags |= F_DEFER;
    return true;
}

/* c closes once what is written is out; behind: requests came after the close, which stay
 * unanswered (the close lingers so the peer reads the answers before the reset). */
static void close_after_out(struct worker *w, struct conn *c, bool behind)
{
    c->flags |= F_CLOSE;
    if (behind)
        c->flags |= F_LINGER_AFTER;
    drop_input(c);
    if (c->out)
        conn_events(w, c);
    else
        conn_finish(w, c);
}

/* A deferred answer (a stream, a parked or a held one) has its last bytes out: close after it
 * when it asked to (what came behind it stays unanswered), else go on with the next request. */
static void answer_ended(struct worker *w, struct conn *c, bool close_after)
{
    if (close_after) {
        close_after_out(w, c, c->in != NULL);
        return;
    }
    if (c->out)
        conn_events(w, c);
    else
        resume(w, c);
}

/* Appends one chunk's framing and bytes to the batch (unframed for HTTP/1.0). */
static bool chunk_put(struct worker *w, bool chunked, const char *p, size_t n)
{
    if (!ob_reserve(w, n + 24))
        return false;
    char *o = w->ob + w->olen;
    if (chunked) {
        char tmp[16];
        int k = 16;
        size_t v = n;
        do {
            tmp[--k] = sq_hex_lower[v & 15];
            v >>= 4;
        } while (v);
        o = put(o, tmp + k, (size_t)(16 - k));
        o = PUT_LIT(o, "\r\n");
    }
    o = put(o, p, n);
    if (chunked)
        o = PUT_LIT(o, "\r\n");
    w->olen = (size_t)(o - w->ob);
    return true;
}

/* Appends the pieces of c's stream that are due (at most STREAM_BATCH bytes of them) to the
 * batch and sends it; ends the stream after its last piece, then goes on as after a parked
 * answer. c may be closed on return. */
static void stream_tick(struct worker *w, struct conn *c)
{
    struct stream *st = c->d_stream;
    if (c->out) {
        st->blocked = true; /* on_writable calls again once the output drains */
        return;
    }
    st->blocked = false;
    struct sq_server__pace *p = &st->pace;
    int64_t now = sq_now_ns();
    char piece[SQ_SERVER_STREAM_PIECE];
    while (p->next < p->count && w->olen < STREAM_BATCH) {
        if (sq_server__pace_due(p, p->next) > now)
            break;
        size_t n = p->fn(p->ud, p->next, p->count, piece, sizeof(piece));
        p->next++;
        if (n == 0)
            continue;
        if (n > sizeof(piece))
            n = sizeof(piece);
        if (!chunk_put(w, st->chunked, piece, n))
            goto fail;
    }
    bool done = p->next >= p->count;
    if (done && st->chunked) {
        if (!ob_reserve(w, 5))
            goto fail;
        memcpy(w->ob + w->olen, "0\r\n\r\n", 5);
        w->olen += 5;
    }
    if (!done) {
        /* a full batch: go on in the next loop round; else at the next piece's time */
        int64_t due = w->olen >= STREAM_BATCH ? now : sq_server__pace_due(p, p->next);
        if (sq_timer_start(w->loop, &c->timer, due) < 0)
            goto fail;
    }
    if (w->olen && batch_flush(w, c) < 0) {
        conn_close(w, c);
        return;
    }
    if (!done) {
        if (c->out)
            conn_events(w, c); /* EPOLLOUT; F_DEFER keeps EPOLLIN off */
        return;
    }
    free(st);
    c->d_stream = NULL;
    c->flags &= (uint8_t)~F_DEFER;
    bool close_after = c->d_flags & DF_CLOSE;
    c->d_flags = 0;
    answer_ended(w, c, close_after);
    return;
fail:
    w->olen = 0;
    conn_close(w, c);
}

/* A 101 with an upgrade: renders the switch and hands the connection over (pump() starts the
 * protocol once the request's bytes are consumed). False when it cannot be taken: not a 101,
 * not HTTP/1.1, a HEAD, out of memory. */
static bool upgrade_take(struct worker *w, struct conn *c, const struct sq_server_resp *r,
                         const struct sq_server_req *req)
{
    if (r->status != 101 || req->minor_version < 1 || req->head)
        return false;
    static const char line[] = "HTTP/1.1 101 Switching Protocols\r\n";
    struct upgraded *u = malloc(sizeof(*u));
    if (!u || !ob_reserve(w, sizeof(line) + r->headers_len + 2)) {
        free(u);
        return false;
    }
    u->ops = r->upgrade;
    u->ud = r->upgrade_ud;
    char *o = put(w->ob + w->olen, line, sizeof(line) - 1);
    if (r->headers_len)
        o = put(o, r->headers, r->headers_len);
    o = PUT_LIT(o, "\r\n");
    w->olen = (size_t)(o - w->ob);
    c->up = u;
    c->d_flags = DF_UP;
    c->flags |= F_H2; /* serve() stops here; pump() starts the protocol */
    return true;
}

/* The request a handler sees, from a parsed HTTP/1.x head: all but the body and the connection,
 * which the caller sets (answer() has them; the on_head hook sees neither). */
static inline struct sq_server_req req_of(const struct worker *w, const struct conn *c,
                                          const struct sq_h1_request *rq, int64_t arrival)
{
    return (struct sq_server_req){
        .method = rq->method,
        .method_len = rq->method_len,
        .path = rq->path,
        .path_len = rq->path_len,
        .minor_version = rq->minor_version,
        .headers = rq->headers,
        .num_headers = rq->num_headers,
        .head = rq->method_len == 4 && memcmp(rq->method, "HEAD", 4) == 0,
        .keep_alive = rq->keep_alive,
        .worker = w->idx,
        .fd = c->io.fd,
        .arrival_ns = arrival,
        .server = w->srv,
    };
}

/* Calls the handler for one complete request and renders or parks its answer. */
static void answer(struct worker *w, struct conn *c, const struct sq_h1_request *rq,
                   const char *body, size_t body_len, int64_t arrival)
{
    struct sq_server *s = w->srv;
    struct sq_server_req req = req_of(w, c, rq, arrival);
    req.body = body_len ? body : NULL;
    req.body_len = body_len;
    req._conn = c;
    struct sq_server_resp r = {0};
    s->handler(s->ud, &req, &r);
    BUMP(w->cnt.requests);
    c->flags |= F_SERVED;
    if (SQ_UNLIKELY(w->hold_new != NULL)) {
        struct sq_server_hold *h = w->hold_new;
        w->hold_new = NULL;
        h->head = req.head;
        h->close_after = !req.keep_alive;
        h->chunked = req.minor_version >= 1;
        h->conn_hdr = (uint8_t)(h->close_after ? CONN_HDR_CLOSE
                                : !h->chunked  ? CONN_HDR_KA
                                               : CONN_HDR_NONE);
        c->d_hold = h;
        c->d_flags = DF_HOLD;
        c->flags |= F_DEFER;
        if (r.status && !hold_head(w, h, &r)) { /* a stream begun at once, in the batch */
            if (h->gone)
                h->gone(h->ud);
            hold_free(c, h);
            c->flags |= F_FAIL | F_CLOSE;
        }
        return;
    }
    if (SQ_UNLIKELY(r.upgrade != NULL)) {
        if (upgrade_take(w, c, &r, &req))
            return;
        /* not taken: answered now as it is (no delay, no stream), then the protocol's state
         * goes (the answer may point into it until it is rendered) */
        bool close_after = r.close || !req.keep_alive;
        int conn_hdr = close_after              ? CONN_HDR_CLOSE
                       : req.minor_version == 0 ? CONN_HDR_KA
                                                : CONN_HDR_NONE;
        if (!render(w, &r, req.head, conn_hdr))
            c->flags |= F_FAIL | F_CLOSE;
        if (close_after)
            c->flags |= F_CLOSE;
        r.upgrade->closed(r.upgrade_ud);
        return;
    }

    bool close_after = r.close || !req.keep_alive;
    if (r.stream && r.stream_count && req.minor_version == 0)
        close_after = true; /* HTTP/1.0 has no chunked framing: the close ends the body */
    int conn_hdr = close_after              ? CONN_HDR_CLOSE
                   : req.minor_version == 0 ? CONN_HDR_KA
                                            : CONN_HDR_NONE;
    if (r.stream && r.stream_count) {
        if (stream_begin(w, c, &r, req.head, req.minor_version >= 1, conn_hdr, close_after))
            return;
        r = (struct sq_server_resp){.status = 500}; /* out of memory: no stream */
        close_after = true;
        conn_hdr = CONN_HDR_CLOSE;
    } else if (r.delay_ns > 0) {
        int64_t d = r.delay_ns > SQ_SERVER_MAX_DELAY_NS ? SQ_SERVER_MAX_DELAY_NS : r.delay_ns;
        /* from a fresh clock, not the loop's round time: the handler may have aimed at an
         * absolute moment (the target's stall window) and must not be answered before it */
        int64_t due = sq_now_ns() + d;
        uint8_t df = (uint8_t)((req.head ? DF_HEAD : 0) | (close_after ? DF_CLOSE : 0) |
                               (conn_hdr == CONN_HDR_KA ? DF_KA : 0));
        if (r.fill_total == 0 && r.headers_len == 0 && !r.delay_copy && r.body_len <= UINT32_MAX) {
            if (sq_timer_start(w->loop, &c->timer, due) == 0) {
                c->d_status = (uint16_t)(r.status ? r.status : 200);
                c->d_ctype = r.content_type;
                c->d_body = r.body;
                c->d_body_len = (uint32_t)r.body_len; /* over c->seen until on_timer */
                c->d_flags = df;
                c->flags |= F_DEFER;
                return;
            }
        } else if (hold(w, c, &r, req.head, conn_hdr, due)) {
            c->d_flags = df | DF_HELD;
            c->flags |= F_DEFER;
            return;
        }
        /* cannot park it (no timer or buffer memory): answer now */
    }
    if (!render(w, &r, req.head, conn_hdr))
        c->flags |= F_FAIL | F_CLOSE;
    if (close_after)
        c->flags |= F_CLOSE;
}

/* a[0, n) == b[0, n) for the short strings a Host is: 8-byte loads, the last one overlapping */
static inline bool eq_short(const char *a, const char *b, size_t n)
{
    uint64_t x, y;
    if (n < 8)
        return memcmp(a, b, n) == 0;
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y)
            return false;
    }
    memcpy(&x, a + n - 8, 8);
    memcpy(&y, b + n - 8, 8);
    return x == y;
}

/* RFC 9112 3.2: an HTTP/1.1 request names its host, and a Host value must be host[:port]. The
 * value last found valid is kept, so a client that sends the same one each time (all do) costs
 * a length compare and two or three 8-byte compares. */
static inline bool host_ok(struct worker *w, const struct sq_h1_request *rq)
{
    if (!rq->host)
        return rq->minor_version == 0;
    if (SQ_LIKELY(rq->host_len == w->host_len && eq_short(rq->host, w->host, rq->host_len)))
        return true;
    if (!sq_h1_host_valid(rq->host, rq->host_len))
        return false;
    if (rq->host_len <= sizeof(w->host)) {
        memcpy(w->host, rq->host, rq->host_len);
        w->host_len = (uint32_t)rq->host_len;
    }
    return true;
}

/* A request with a body to come has its head in: the on_head hook (set) may refuse it before the
 * server waits for the body. Returns true when it did: the refusal is in the batch and c closes
 * after it, lingering. */
static bool refused_at_head(struct worker *w, struct conn *c, const struct sq_h1_request *rq,
                            struct rx *st)
{
    struct sq_server *s = w->srv;
    st->admitted = true;
    struct sq_server_req req = req_of(w, c, rq, st->arrival);
    req.body_len = rq->chunked ? 0 : (size_t)rq->content_length;
    struct sq_server_resp r = {0};
    s->on_head(s->ud, &req, &r);
    if (!r.status)
        return false;
    BUMP(w->cnt.head_refused);
    struct sq_server_resp a = {.status = r.status,
                               .content_type = r.content_type,
                               .headers = r.headers,
                               .headers_len = r.headers_len,
                               .body = r.body,
                               .body_len = r.body_len};
    if (!render(w, &a, req.head, CONN_HDR_CLOSE))
        c->flags |= F_FAIL;
    c->flags |= F_CLOSE | F_LINGER_AFTER;
    return true;
}

/* Answers the complete requests in buf[0, len) in order. Returns the bytes consumed; *keep is
 * set to how many bytes after them must be kept: all of them, except for an incomplete chunked
 * request, whose body is decoded in place (head + decoded bytes). Stops early when c cannot go
 * on (parked, closing, or output blocked); st then describes the request at the stop. */
static size_t serve(struct worker *w, struct conn *c, char *buf, size_t len, struct rx *st,
                    size_t *keep)
{
    size_t off = 0;
    *keep = SIZE_MAX;
    while (off < len) {
        /* the order invariant: a request is served only when nothing waits ahead of it */
        SQ_ASSERT_MSG(!c->out && !(c->flags & (F_DEFER | F_CLOSE | F_H2)),
                      "the serve loop stopped at the first answer that could not be written");
        char *p = buf + off;
        size_t n = len - off;
        if (st->need > n)
            break;
        struct sq_h1_request rq = {.headers = w->hdrs, .headers_cap = SQ_SERVER_MAX_HEADERS};
        int hl = sq_h1_parse_request_head(p, n, &w->lim, &rq);
        if (hl == SQ_H1_PARTIAL) {
            if (n >= SQ_SERVER_MAX_HEAD)
                error_answer(w, c, 431, E431);
            break;
        }
        if (hl < 0) {
            /* "PRI * HTTP/2.0" is no HTTP/1.x request line: only here, off the hot path, is
             * the HTTP/2 preface looked for (at the start of a fresh connection) */
            if (off == 0 && !(c->flags & F_SERVED) && !w->srv->http1_only) {
                size_t k = n < SQ_SERVER_H2_PREFACE_LEN ? n : SQ_SERVER_H2_PREFACE_LEN;
                if (memcmp(p, SQ_SERVER_H2_PREFACE, k) == 0) {
                    if (k == SQ_SERVER_H2_PREFACE_LEN)
                        c->flags |= F_H2; /* pump() switches the connection */
                    break;                /* else a partial preface: wait for the rest */
                }
            }
            const char *why = hl == -SQ_ETOOBIG ? E431 : E400;
            if (hl != -SQ_ETOOBIG && sq_server_smuggle_shape(p, n)) {
                BUMP(w->cnt.smuggling);
                why = E400_SMUGGLING;
            } else if (hl != -SQ_ETOOBIG && host_shape(p, n)) {
                why = E400_HOST;
            }
            error_answer(w, c, hl == -SQ_ETOOBIG ? 431 : 400, why);
            break;
        }
        if (SQ_UNLIKELY(!host_ok(w, &rq))) {
            error_answer(w, c, 400, E400_HOST);
            break;
        }
        if (w->stamp && !st->arrival)
            st->arrival = sq_now_ns(); /* once per request: a later read re-parses the head */
        const char *body = p + hl;
        size_t body_len = 0, req_len = (size_t)hl;
        if (SQ_UNLIKELY(w->srv->on_head != NULL) && (rq.chunked || rq.content_length > 0) &&
            rq.content_length <= SQ_SERVER_MAX_BODY && !st->admitted &&
            refused_at_head(w, c, &rq, st))
            break;
        if (rq.chunked) {
            int r = dechunk(p, n, (size_t)hl, st, &req_len);
            if (r == 0) {
                send_continue(w, c, st, &rq);
                *keep = (size_t)hl + st->dlen;
                break;
            }
            if (r < 0) {
                error_answer(w, c, r == -EFBIG ? 413 : 400, r == -EFBIG ? E413 : E400_CHUNKED);
                break;
            }
            body_len = st->dlen;
        } else if (rq.content_length > 0) {
            if (rq.content_length > SQ_SERVER_MAX_BODY) {
                error_answer(w, c, 413, E413);
                break;
            }
            body_len = (size_t)rq.content_length;
            req_len += body_len;
            if (n < req_len) {
                st->need = (uint32_t)req_len;
                send_continue(w, c, st, &rq);
                break;
            }
        }
        answer(w, c, &rq, body, body_len, st->arrival);
        off += req_len;
        st->need = 0;
        st->chunked = false;
        st->continued = false;
        st->admitted = false;
        st->arrival = 0;
        if (c->flags & (F_DEFER | F_CLOSE | F_H2)) /* F_H2 here: an upgrade */
            break;
        if (w->fill.fill_left || w->olen >= OB_SOFT) {
            int rc = batch_flush(w, c);
            if (rc < 0) {
                c->flags |= F_FAIL | F_CLOSE;
                break;
            }
            if (rc > 0)
                break; /* blocked: the rest waits in c->in for EPOLLOUT */
        }
    }
    if (*keep == SIZE_MAX)
        *keep = len - off;
    return off;
}

/* Serves what buf holds (the worker's rbuf when st is NULL, else c->in with its state), sends
 * the batch, keeps what is left, and sets c's events. c may be closed on return. */
static void pump(struct worker *w, struct conn *c, char *buf, size_t len, struct rx *st)
{
    struct rx fresh = {0};
    bool in_conn = st != NULL;
    if (!in_conn)
        st = &fresh;
    size_t keep;
    size_t used = serve(w, c, buf, len, st, &keep);
    if (SQ_UNLIKELY(c->flags & F_H2)) {
        if (c->d_flags & DF_UP)
            up_begin(w, c, buf + used, len - used); /* the bytes behind the upgrade */
        else
            sq_server__h2_begin(c, buf + used, len - used); /* used is 0: nothing answered */
        return;
    }
    if ((w->olen || w->fill.fill_left) && batch_flush(w, c) < 0)
        c->flags |= F_FAIL;
    if (c->flags & F_FAIL) {
        conn_close(w, c);
        return;
    }
    if (c->flags & F_CLOSE) {
        close_after_out(w, c, used < len);
        return;
    }
    if (in_conn) {
        struct inbuf *b = c->in;
        if (keep == 0) {
            drop_input(c);
        } else if (used) {
            memmove(b->data, b->data + used, keep);
            b->len = (uint32_t)keep;
            b->since = w->tick; /* a new request at the start */
        } else {
            b->len = (uint32_t)keep;
        }
    } else if (keep) {
        if (!save_input(c, buf + used, keep, st)) { /* the only copy of input */
            conn_close(w, c);
            return;
        }
        c->in->since = w->tick;
    }
    conn_events(w, c);
}

/* Goes on with the requests waiting in c->in, if any. */
static void resume(struct worker *w, struct conn *c)
{
    if (c->in) /* a request waiting behind could not be read meanwhile */
        c->in->since = w->tick;
    if (c->in && c->in->len)
        pump(w, c, c->in->data, c->in->len, &c->in->st);
    else
        conn_events(w, c);
}

/* read(), or TLS: the same contract (-1 with errno; EPROTO for a TLS failure). */
static inline ssize_t conn_recv(struct conn *c, void *buf, size_t n)
{
    if (SQ_UNLIKELY(c->tls != NULL)) {
        ssize_t r = sq_tls_read(c->tls, buf, n);
        if (r < 0) {
            errno = (int)-r;
            return -1;
        }
        return r;
    }
    return read(c->io.fd, buf, n);
}

/* A record larger than the room left in c->in leaves decrypted bytes inside OpenSSL, which no
 * poll would report: take them now (rbuf reads are record-sized, so they never do). */
static void tls_drain(struct conn *c)
{
    while (sq_tls_pending(c->tls) > 0 && grow_input(c)) {
        struct inbuf *b = c->in;
        ssize_t r = sq_tls_read(c->tls, b->data + b->len, b->cap - b->len);
        if (r <= 0)
            return;
        b->len += (uint32_t)r;
    }
}

/* Steps a TLS handshake; once done the connection serves like any other. */
static void handshake(struct worker *w, struct conn *c)
{
    int rc = sq_tls_handshake(c->tls);
    if (rc == -EAGAIN) {
        if (sq_io_modify(w->loop, &c->io, sq_tls_want_write(c->tls) ? EPOLLOUT : EPOLLIN) < 0)
            conn_close(w, c);
        return;
    }
    if (rc < 0) {
        /* Close lingering: a client that already sent its request (TLS 1.3 sends it before
         * the server has judged its certificate) then reads the alert, not a reset. */
        BUMP(w->cnt.tls_failed);
        c->flags = F_CLOSE | F_LINGER_AFTER;
        conn_finish(w, c);
        return;
    }
    BUMP(w->cnt.tls_ok);
    c->flags &= (uint8_t)~F_HS;
    c->seen = w->tick;
    if (strcmp(sq_tls_alpn(c->tls), "h2") == 0) {
        sq_server__h2_begin(c, NULL, 0); /* HTTP/2 from the first byte after the handshake */
        return;
    }
    conn_events(w, c);
}

static void on_readable(struct worker *w, struct conn *c)
{
    ssize_t n;
    c->seen = w->tick; /* never parked here (on_conn); EOF and errors close anyway */
    if (SQ_LIKELY(!c->in)) {
        n = conn_recv(c, w->rbuf, RBUF_SIZE);
        if (SQ_LIKELY(n > 0)) {
            pump(w, c, w->rbuf, (size_t)n, NULL);
            return;
        }
    } else {
        if (!grow_input(c)) {
            /* a request this large passed every cap (chunked overhead): refuse it */
            drop_input(c);
            error_answer(w, c, 413, E413);
            pump(w, c, w->rbuf, 0, NULL);
            return;
        }
        struct inbuf *b = c->in;
        n = conn_recv(c, b->data + b->len, b->cap - b->len);
        if (n > 0) {
            b->len += (uint32_t)n;
            if (SQ_UNLIKELY(c->tls != NULL))
                tls_drain(c);
            pump(w, c, c->in->data, c->in->len, &c->in->st);
            return;
        }
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    conn_close(w, c); /* EOF or error: nothing is pending in this state */
}

/* Sends c's queued output: true when all of it is out; false when the socket is full (c waits for
 * EPOLLOUT) or the send failed (c is closed). */
static inline bool drained(struct worker *w, struct conn *c)
{
    int rc = out_drain(c);
    if (rc == -EAGAIN)
        return false;
    if (rc < 0) {
        conn_close(w, c);
        return false;
    }
    return true;
}

/* Reads what is there into w->rbuf (HTTP/2 and upgraded connections): the bytes read, 0 when none
 * is there now, -1 when c is closed (EOF, or the read failed). */
static ssize_t read_in(struct worker *w, struct conn *c)
{
    ssize_t n = conn_recv(c, w->rbuf, RBUF_SIZE);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0) {
        conn_close(w, c);
        return -1;
    }
    return n;
}

static void on_writable(struct worker *w, struct conn *c)
{
    /* EPOLLOUT: the socket has room again, so bytes move. A plain parked answer behind this
     * output keeps its length in the stamp's slot: on_timer stamps it instead. */
    if (!(c->flags & F_DEFER) || (c->d_flags & DF_STAMPED))
        c->seen = w->tick;
    if (!drained(w, c))
        return;
    if (c->flags & F_CLOSE)
        conn_finish(w, c);
    else if ((c->flags & F_DEFER) && (c->d_flags & DF_STREAM) && c->d_stream->blocked) {
        if (conn_events(w, c)) /* EPOLLOUT off: a parked connection waits on its timer */
            stream_tick(w, c);
    } else if (c->flags & F_DEFER)
        conn_events(w, c);
    else
        resume(w, c);
}

/* ---- HTTP/2 connections (the protocol is in h2.c; the bytes move here) ---- */

/* After input or a timer: pull the session's output, send it, then set c's events, or close c
 * when the session is done or failed. */
static void h2_settle(struct worker *w, struct conn *c)
{
    int rc = c->out ? 1 : sq_server__h2_send(c->h2);
    if (rc >= 0 && (w->olen || w->fill.fill_left)) {
        int f = batch_flush(w, c);
        if (f < 0)
            rc = f;
    }
    w->olen = 0;
    if (rc < 0 || (!c->out && sq_server__h2_done(c->h2))) {
        conn_close(w, c);
        return;
    }
    conn_events(w, c);
}

/* A session that failed: send what it queued (a GOAWAY), if the socket takes it, and close. */
static void h2_fail(struct worker *w, struct conn *c)
{
    if (!c->out && sq_server__h2_send(c->h2) >= 0 && w->olen) {
        struct view v = {.p = w->ob, .len = w->olen};
        (void)view_send(c, &v);
    }
    w->olen = 0;
    conn_close(w, c);
}

static void h2_event(struct worker *w, struct conn *c)
{
    c->seen = w->tick;
    if (c->out) {
        if (!drained(w, c))
            return;
    } else {
        ssize_t n = read_in(w, c);
        if (n <= 0)
            return;
        for (;;) {
            if (sq_server__h2_feed(c->h2, w->rbuf, (size_t)n) < 0) {
                h2_fail(w, c);
                return;
            }
            /* TLS: decrypted bytes OpenSSL still holds would wake no poll */
            if (!c->tls || sq_tls_pending(c->tls) == 0 ||
                (n = conn_recv(c, w->rbuf, RBUF_SIZE)) <= 0)
                break;
        }
    }
    h2_settle(w, c);
}

void sq_server__h2_begin(struct conn *c, const char *initial, size_t len)
{
    struct worker *w = c->w;
    struct sq_server__h2 *h;
    c->flags = (uint8_t)((c->flags | F_H2) & ~(F_DEFER | F_CLOSE | F_LINGER_AFTER));
    c->d_flags = 0;
    c->h2 = NULL;
    if (sq_server__h2_new(c, w->loop, &h) < 0) {
        conn_close(w, c);
        return;
    }
    c->h2 = h;
    BUMP(w->cnt.h2_conns);
    int rc = sq_server__h2_feed(h, initial, len);
    drop_input(c); /* initial may have been c->in: the session has taken what it needs */
    if (rc < 0)
        h2_fail(w, c);
    else
        h2_settle(w, c);
}

/* Queues n bytes a session or an upgraded protocol writes: into the batch, sent once it passes
 * OB_SOFT, or behind c->out while the socket is blocked. Returns 0, 1 (blocked: the rest and what
 * follows wait in c->out), -ENOMEM or a send error. */
static int queue_out(struct conn *c, const void *p, size_t n)
{
    struct worker *w = c->w;
    if (c->out)
        return out_append(c, p, n) ? 1 : -ENOMEM;
    if (!ob_reserve(w, n))
        return -ENOMEM;
    memcpy(w->ob + w->olen, p, n);
    w->olen += n;
    if (w->olen < OB_SOFT)
        return 0;
    return batch_flush(w, c);
}

int sq_server__h2_out(struct conn *c, const uint8_t *p, size_t n)
{
    return queue_out(c, p, n);
}

void sq_server__h2_dispatch(struct conn *c, struct sq_server_req *req, struct sq_server_resp *resp)
{
    struct worker *w = c->w;
    struct sq_server *s = w->srv;
    req->worker = w->idx;
    req->fd = c->io.fd;
    req->server = s;
    req->arrival_ns = w->stamp ? sq_now_ns() : 0;
    s->handler(s->ud, req, resp);
    BUMP(w->cnt.requests);
    BUMP(w->cnt.h2_streams);
}

void sq_server__h2_kick(struct conn *c)
{
    if (c->out)
        return; /* EPOLLOUT is registered: the rest follows when the socket drains */
    h2_settle(c->w, c);
}

/* ---- upgraded connections (the protocol is the handler's; the bytes move here) ---- */

static struct conn *conn_of_up(struct sq_server_conn *sc)
{
    return (struct conn *)(void *)sc;
}

int sq_server_conn_send(struct sq_server_conn *sc, const void *p, size_t n)
{
    int rc = queue_out(conn_of_up(sc), p, n); /* 1: blocked, the rest waits in c->out */
    return rc < 0 ? rc : 0;
}

void sq_server_conn_close(struct sq_server_conn *sc, bool linger)
{
    struct conn *c = conn_of_up(sc);
    c->flags |= (uint8_t)(F_CLOSE | (linger ? F_LINGER_AFTER : 0));
}

int sq_server_conn_worker(const struct sq_server_conn *sc)
{
    return ((const struct conn *)(const void *)sc)->w->idx;
}

/* After the protocol ran: send what it queued, then close (when it asked) or set the events.
 * failed: it returned an error (what was queued still leaves, if the socket takes it). */
static void up_settle(struct worker *w, struct conn *c, bool failed)
{
    if (failed)
        c->flags |= F_CLOSE;
    if ((w->olen || w->fill.fill_left) && batch_flush(w, c) < 0) {
        conn_close(w, c);
        return;
    }
    if (!(c->flags & F_CLOSE)) {
        conn_events(w, c);
        return;
    }
    if (c->out && !failed) {
        conn_events(w, c); /* EPOLLOUT: up_event finishes once it drained */
        return;
    }
    conn_finish(w, c);
}

static void up_begin(struct worker *w, struct conn *c, const char *initial, size_t len)
{
    struct upgraded *u = c->up;
    struct sq_server_conn *sc = (struct sq_server_conn *)(void *)c;
    c->seen = w->tick;
    bool failed = u->ops->open && u->ops->open(u->ud, sc) < 0;
    if (!failed && len && !(c->flags & F_CLOSE))
        failed = u->ops->data(u->ud, sc, initial, len) < 0;
    drop_input(c); /* initial may have been c->in: the protocol has taken what it needs */
    up_settle(w, c, failed);
}

static void up_event(struct worker *w, struct conn *c)
{
    c->seen = w->tick;
    if (c->out) {
        if (!drained(w, c))
            return;
        if (c->flags & F_CLOSE)
            conn_finish(w, c);
        else
            conn_events(w, c);
        return;
    }
    struct upgraded *u = c->up;
    struct sq_server_conn *sc = (struct sq_server_conn *)(void *)c;
    bool failed = false;
    for (;;) {
        ssize_t n = read_in(w, c);
        if (n < 0)
            return; /* the client left (or TLS failed): the protocol's closed ran */
        if (n == 0)
            break;
        if (u->ops->data(u->ud, sc, w->rbuf, (size_t)n) < 0) {
            failed = true;
            break;
        }
        /* TLS: decrypted bytes OpenSSL still holds would wake no poll */
        if ((c->flags & F_CLOSE) || c->out || !c->tls || sq_tls_pending(c->tls) == 0)
            break;
    }
    up_settle(w, c, failed);
}

static void on_conn(struct sq_loop *loop, struct sq_io *io, uint32_t rev)
{
    SQ_UNUSED(loop);
    SQ_UNUSED(rev);
    struct conn *c = SQ_CONTAINER_OF(io, struct conn, io);
    struct worker *w = c->w;
    if (SQ_UNLIKELY(c->flags & (F_LINGER | F_HS | F_H2))) {
        if (c->flags & F_LINGER)
            linger_drain(w, c);
        else if (c->flags & F_HS)
            handshake(w, c);
        else if (c->d_flags & DF_UP)
            up_event(w, c);
        else
            h2_event(w, c);
    } else if (c->out)
        on_writable(w, c);
    else if (SQ_UNLIKELY(c->flags & F_DEFER))
        conn_close(w, c); /* only EPOLLERR/EPOLLHUP (and, held, EPOLLRDHUP) reach a parked
                             connection: the peer left */
    else
        on_readable(w, c);
}

/* Appends p[0, n) to a pending c->out (which has no fill tail: see the file comment). */
static bool out_append(struct conn *c, const char *p, size_t n)
{
    struct outq *q = c->out;
    /* a fill tail is the last thing a batch holds (the serve loop stops right after it blocks):
     * bytes appended behind one would leave before it */
    SQ_ASSERT_MSG(q->fill_left == 0, "at most one fill tail, and last");
    size_t rest = q->len - q->off;
    if (q->off) {
        memmove(q->data, q->data + q->off, rest);
        q->off = 0;
        q->len = rest;
    }
    if (rest + n > q->cap) {
        q = realloc(q, sizeof(*q) + rest + n);
        if (!q)
            return false;
        q->cap = rest + n;
        c->out = q;
    }
    memcpy(q->data + q->len, p, n);
    q->len += n;
    return true;
}

/* Sends a held response h (owned here) after what c->out still holds. Returns false on a send
 * error or out of memory (the caller closes c); what could not be sent now is left in c->out. */
static bool held_send(struct conn *c, struct outq *h)
{
    if (c->out) { /* plain bytes only (see out_append): h's bytes go after, its fill tail last */
        bool ok = out_append(c, h->data + h->off, h->len - h->off);
        if (ok) {
            c->out->fill = h->fill;
            c->out->fill_len = h->fill_len;
            c->out->fill_off = h->fill_off;
            c->out->fill_left = h->fill_left;
        }
        free(h);
        return ok;
    }
    int rc = outq_send(c, h);
    if (rc == -EAGAIN)
        c->out = h; /* the caller registers EPOLLOUT */
    return rc == 0 || rc == -EAGAIN;
}

static void on_timer(struct sq_loop *loop, struct sq_timer *t)
{
    SQ_UNUSED(loop);
    struct conn *c = SQ_CONTAINER_OF(t, struct conn, timer);
    struct worker *w = c->w;
    if (c->flags & F_LINGER) {
        conn_close(w, c);
        return;
    }
    if (!(c->flags & F_DEFER))
        return;
    if (c->d_flags & DF_STREAM) {
        stream_tick(w, c);
        return;
    }
    c->flags &= (uint8_t)~F_DEFER;
    if (c->d_flags & DF_HELD) {
        struct outq *h = c->d_held;
        c->d_held = NULL;
        c->d_flags &= (uint8_t)~DF_HELD;
        if (!held_send(c, h)) {
            conn_close(w, c);
            return;
        }
    } else {
        int conn_hdr = (c->d_flags & DF_CLOSE) ? CONN_HDR_CLOSE
                       : (c->d_flags & DF_KA)  ? CONN_HDR_KA
                                               : CONN_HDR_NONE;
        struct sq_server_resp r = {.status = c->d_status,
                                   .content_type = c->d_ctype,
                                   .body = c->d_body,
                                   .body_len = c->d_body_len};
        c->seen = w->tick; /* d_body_len is read: the slot is the idle stamp again */
        if (!render(w, &r, c->d_flags & DF_HEAD, conn_hdr)) {
            conn_close(w, c);
            return;
        }
        if (c->out) {
            bool ok = out_append(c, w->ob, w->olen); /* c->out already waits for EPOLLOUT */
            w->olen = 0;
            if (!ok) {
                conn_close(w, c);
                return;
            }
        } else if (batch_flush(w, c) < 0) {
            conn_close(w, c);
            return;
        }
    }
    answer_ended(w, c, c->d_flags & DF_CLOSE);
}

/* ---- held answers (sq_server_hold) ---- */

struct sq_server_hold *sq_server_hold(const struct sq_server_req *req, sq_server_gone_fn gone,
                                      void *ud)
{
    struct conn *c = req->_conn;
    if (!c || c->w->hold_new)
        return NULL;
    struct sq_server_hold *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->c = c;
    h->gone = gone;
    h->ud = ud;
    c->w->hold_new = h;
    return h;
}

/* Ends h (its connection stays): frees it and unparks c. */
static void hold_free(struct conn *c, struct sq_server_hold *h)
{
    c->d_hold = NULL;
    c->d_flags = 0;
    c->flags &= (uint8_t)~F_DEFER;
    free(h);
}

/* A write failed: the hold is over without telling gone, and c closes. */
static int hold_fail(struct worker *w, struct conn *c, struct sq_server_hold *h, int rc)
{
    hold_free(c, h);
    w->olen = 0;
    conn_close(w, c);
    return rc;
}

/* Sends w->ob[start, olen) on c (after what c->out holds), the rest into c->out, and puts the
 * batch back at start: a hold may be answered while the worker builds another connection's
 * batch (from a handler), whose bytes stay where they are. */
static int hold_send(struct worker *w, struct conn *c, size_t start)
{
    struct view v = {.p = w->ob + start, .len = w->olen - start};
    int rc = 0;
    if (c->out) {
        if (c->out->len - c->out->off > SQ_SERVER_HOLD_MAX_PENDING)
            rc = -ENOBUFS;
        else if (!out_append(c, v.p, v.len))
            rc = -ENOMEM;
    } else {
        rc = view_send(c, &v);
        if (rc == -EAGAIN) {
            if (!out_keep(c, &v))
                rc = -ENOMEM;
            else
                rc = conn_events(w, c) ? 0 : -EIO; /* EPOLLOUT */
        }
    }
    w->olen = start;
    return rc;
}

/* After the last bytes of a held answer: c goes on as after a parked answer. */
static void hold_done(struct worker *w, struct conn *c, struct sq_server_hold *h)
{
    bool close_after = h->close_after;
    hold_free(c, h);
    answer_ended(w, c, close_after);
}

int sq_server_hold_answer(struct sq_server_hold *h, const struct sq_server_resp *resp)
{
    struct conn *c = h->c;
    struct worker *w = c->w;
    struct sq_server_resp r = *resp;
    r.fill_total = 0;
    r.stream = NULL;
    if (r.close)
        h->close_after = true;
    size_t start = w->olen;
    if (!render(w, &r, h->head, h->close_after ? CONN_HDR_CLOSE : h->conn_hdr))
        return hold_fail(w, c, h, -ENOMEM);
    int rc = hold_send(w, c, start);
    if (rc < 0)
        return hold_fail(w, c, h, rc);
    hold_done(w, c, h);
    return 0;
}

/* Renders the head of h's stream (and resp->body as its first chunk) into the batch. Returns
 * false when out of memory (the batch as before). */
static bool hold_head(struct worker *w, struct sq_server_hold *h, const struct sq_server_resp *resp)
{
    struct sq_server_resp r = *resp;
    r.fill_total = 0;
    r.body_len = 0;
    if (!h->chunked)
        h->close_after = true; /* HTTP/1.0: the close ends the body */
    int conn_hdr = h->close_after ? CONN_HDR_CLOSE : h->conn_hdr;
    size_t start = w->olen;
    if (!render_framed(w, &r, h->head, conn_hdr, h->chunked ? FR_CHUNKED : FR_NONE) ||
        (!h->head && resp->body_len && !chunk_put(w, h->chunked, resp->body, resp->body_len))) {
        w->olen = start;
        return false;
    }
    h->streaming = true;
    return true;
}

int sq_server_hold_begin(struct sq_server_hold *h, const struct sq_server_resp *resp)
{
    struct conn *c = h->c;
    struct worker *w = c->w;
    if (h->streaming)
        return 0;
    size_t start = w->olen;
    if (!hold_head(w, h, resp))
        return hold_fail(w, c, h, -ENOMEM);
    int rc = hold_send(w, c, start);
    return rc < 0 ? hold_fail(w, c, h, rc) : 0;
}

int sq_server_hold_write(struct sq_server_hold *h, const char *p, size_t n)
{
    struct conn *c = h->c;
    struct worker *w = c->w;
    if (!h->streaming || h->head || n == 0)
        return 0;
    size_t start = w->olen;
    if (!chunk_put(w, h->chunked, p, n))
        return hold_fail(w, c, h, -ENOMEM);
    int rc = hold_send(w, c, start);
    return rc < 0 ? hold_fail(w, c, h, rc) : 0;
}

int sq_server_hold_end(struct sq_server_hold *h)
{
    struct conn *c = h->c;
    struct worker *w = c->w;
    if (h->streaming && h->chunked && !h->head) {
        size_t start = w->olen;
        if (!ob_reserve(w, 5))
            return hold_fail(w, c, h, -ENOMEM);
        memcpy(w->ob + w->olen, "0\r\n\r\n", 5);
        w->olen += 5;
        int rc = hold_send(w, c, start);
        if (rc < 0)
            return hold_fail(w, c, h, rc);
    }
    hold_done(w, c, h);
    return 0;
}

/* ---- posts from other threads ---- */

int sq_server_post(struct sq_server *s, int worker, void (*fn)(void *ud), void *ud)
{
    if (!fn || worker < 0 || worker >= s->nworkers)
        return -EINVAL;
    struct post *p = malloc(sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->next = NULL;
    p->fn = fn;
    p->ud = ud;
    struct worker *w = s->w[worker];
    pthread_mutex_lock(&w->post_mu);
    if (w->post_tail)
        w->post_tail->next = p;
    else
        w->post_head = p;
    w->post_tail = p;
    pthread_mutex_unlock(&w->post_mu);
    uint64_t one = 1;
    ssize_t r = write(w->wake_fd, &one, sizeof(one));
    SQ_UNUSED(r); /* EAGAIN: the counter is already huge, and so readable */
    return 0;
}

/* Runs the posts waiting on w, in order (those made meanwhile too). */
static void run_posts(struct worker *w)
{
    for (;;) {
        pthread_mutex_lock(&w->post_mu);
        struct post *p = w->post_head;
        w->post_head = w->post_tail = NULL;
        pthread_mutex_unlock(&w->post_mu);
        if (!p)
            return;
        while (p) {
            struct post *next = p->next;
            p->fn(p->ud);
            free(p);
            p = next;
        }
    }
}

static void on_wake(struct sq_loop *loop, struct sq_io *io, uint32_t rev)
{
    SQ_UNUSED(loop);
    SQ_UNUSED(rev);
    struct worker *w = SQ_CONTAINER_OF(io, struct worker, wake_io);
    uint64_t n;
    ssize_t r = read(w->wake_fd, &n, sizeof(n)); /* resets the counter before the queue is read */
    SQ_UNUSED(r);
    run_posts(w);
}

/* ---- timeouts ---- */

/* A head (or a TLS handshake) or a request took too long: 408 with json and a lingering close
 * (a handshake just closes: there is no channel to answer on). c is closed or closing on
 * return. */
static void timeout_answer(struct worker *w, struct conn *c, const char *json)
{
    if (c->flags & F_HS) {
        conn_close(w, c);
        return;
    }
    drop_input(c);
    error_answer(w, c, 408, json);
    if ((c->flags & F_FAIL) || batch_flush(w, c) < 0) {
        w->olen = 0;
        conn_close(w, c);
    } else if (c->out) {
        conn_events(w, c);
    } else {
        conn_finish(w, c);
    }
}

/* c is reading the incomplete request at the start of c->in (since c->in->since): a head past
 * the header timeout or the request timeout, or a body past the request timeout or under the
 * minimum rate, gets its 408. The stamps lag by less than slack ms (see on_sweep). */
static void slow_request(struct worker *w, struct conn *c, uint32_t tick, uint32_t slack)
{
    const struct sq_server *s = w->srv;
    const struct inbuf *b = c->in;
    uint32_t age = tick - b->since;
    if (!b->st.need && !b->st.chunked) { /* the head is incomplete */
        bool late = s->header_ms && age >= s->header_ms + slack;
        if (late || (s->request_ms && age >= s->request_ms + slack)) {
            BUMP(w->cnt.header_to);
            timeout_answer(w, c, late ? s->e408_head : s->e408_request);
        }
        return;
    }
    if (s->request_ms && age >= s->request_ms + slack) {
        BUMP(w->cnt.body_to);
        timeout_answer(w, c, s->e408_request);
    } else if (s->min_rate && age >= s->rate_grace_ms + slack &&
               age >= s->rate_grace_ms + (uint64_t)b->len * 1000 / s->min_rate + slack) {
        BUMP(w->cnt.body_to);
        timeout_answer(w, c, s->e408_rate);
    }
}

/* Every sweep_ns: advances w->tick, then closes the connections past a timeout. */
static void on_sweep(struct sq_loop *loop, struct sq_timer *t)
{
    struct worker *w = SQ_CONTAINER_OF(t, struct worker, sweep_timer);
    const struct sq_server *s = w->srv;
    int64_t now = sq_loop_now(loop);
    uint32_t tick = (uint32_t)((now - w->epoch_ns) / SQ_NS_PER_MS);
    uint32_t slack = (uint32_t)(s->sweep_ns / SQ_NS_PER_MS) + 1; /* stamps lag by < a sweep */
    w->tick = tick;
    /* first, while the heap slot this timer just left is free; should it fail all the same
     * (no memory), the next accept arms it again. With no connection open the sweep sleeps
     * (an idle server wakes for nothing); the next accept arms it again. */
    if (w->nconns == 0 || sq_timer_start(loop, t, now + s->sweep_ns) < 0)
        sq_timer_stop(loop, t);
    for (struct slab *sl = w->slabs; sl; sl = sl->next) {
        for (int i = 0; i < SLAB_CONNS; i++) {
            struct conn *c = &sl->c[i];
            if (c->io.fd < 0 || (c->flags & F_LINGER))
                continue; /* free, or closing on its own timer */
            /* the server is the one taking its time: not idle */
            if (c->flags & F_DEFER) {
                if (!(c->d_flags & DF_STAMPED))
                    continue; /* a plain parked answer: c->seen holds its length till on_timer */
                if (!c->out) {
                    c->seen = tick;
                    continue;
                }
            } else if ((c->flags & F_H2) && !(c->d_flags & DF_UP) && !c->out &&
                       sq_server__h2_waiting(c->h2)) {
                c->seen = tick;
                continue;
            }
            uint32_t quiet = tick - c->seen;
            if (s->idle_ms && quiet >= s->idle_ms + slack) {
                BUMP(w->cnt.idle_to);
                conn_close(w, c);
            } else if (c->flags & F_HS) {
                /* c->seen is the accept during a handshake */
                if (s->header_ms && quiet >= s->header_ms + slack) {
                    BUMP(w->cnt.header_to);
                    timeout_answer(w, c, NULL);
                }
            } else if (c->in && !c->out && !(c->flags & (F_DEFER | F_CLOSE | F_H2))) {
                slow_request(w, c, tick, slack); /* reading a request that is incomplete */
            }
        }
    }
}

/* ---- accepting ---- */

/* Out of fds or memory: stop accepting for a moment (level-triggered, a backlog left unread
 * would wake the loop at once, for ever). */
static void accept_pause(struct sq_loop *loop, struct worker *w)
{
    if (sq_timer_start(loop, &w->accept_timer, sq_loop_now(loop) + ACCEPT_PAUSE_NS) < 0)
        return; /* no timer memory: keep accepting rather than stop for good */
    if (sq_io_modify(loop, &w->lio, 0) < 0)
        sq_timer_stop(loop, &w->accept_timer);
}

static void on_accept_resume(struct sq_loop *loop, struct sq_timer *t)
{
    struct worker *w = SQ_CONTAINER_OF(t, struct worker, accept_timer);
    if (sq_io_modify(loop, &w->lio, EPOLLIN) < 0)
        accept_pause(loop, w); /* try again later */
}

/* ---- caps: per peer, and making room (evict) ---- */

/* A client address's key: the IPv4 address (an IPv4-mapped IPv6 one too) or an IPv6 /64,
 * hashed with the server's salt (never 0). */
static uint32_t peer_key(const struct sq_server *s, const struct sockaddr_storage *ss)
{
    uint64_t a = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        a = (1ull << 32) | ntohl(in->sin_addr.s_addr);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
        const uint8_t *b = in6->sin6_addr.s6_addr;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(b, mapped, 12) == 0) {
            uint32_t v4;
            memcpy(&v4, b + 12, 4);
            a = (1ull << 32) | ntohl(v4);
        } else {
            memcpy(&a, b, 8); /* the /64 */
            a ^= 2ull << 62;
        }
    }
    uint64_t h = (a ^ s->peer_salt) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    h += s->peer_salt >> 32;
    h ^= h >> 31;
    uint32_t k = (uint32_t)h;
    return k ? k : 1;
}

/* The slot holding key, or the empty slot where it would go (peer_mu held). */
static uint32_t peer_find(const struct sq_server *s, uint32_t key)
{
    uint32_t mask = s->peer_cap - 1, i = key & mask;
    while (s->peers[i].key && s->peers[i].key != key)
        i = (i + 1) & mask;
    return i;
}

/* Doubles the table (peer_mu held). Returns false when out of memory. */
static bool peer_grow(struct sq_server *s)
{
    uint32_t cap = s->peer_cap ? s->peer_cap * 2 : 64;
    struct peer *np = calloc(cap, sizeof(*np)), *old = s->peers;
    if (!np)
        return false;
    uint32_t old_cap = s->peer_cap;
    s->peers = np;
    s->peer_cap = cap;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].key)
            s->peers[peer_find(s, old[i].key)] = old[i];
    free(old);
    return true;
}

/* Counts one more connection of key unless it has per_peer open. Returns true when counted;
 * false at the cap (or, rarely, out of memory: then refused like at the cap). */
static bool peer_take(struct sq_server *s, uint32_t key)
{
    pthread_mutex_lock(&s->peer_mu);
    bool ok = false;
    if ((s->peer_used + 1) * 2 <= s->peer_cap || peer_grow(s)) {
        uint32_t i = peer_find(s, key);
        if (!s->peers[i].key) {
            s->peers[i].key = key;
            s->peers[i].n = 0;
            s->peer_used++;
        }
        if (s->peers[i].n < s->per_peer) { /* per_peer > 0: a new entry always gets in */
            s->peers[i].n++;
            ok = true;
        }
    }
    pthread_mutex_unlock(&s->peer_mu);
    return ok;
}

/* One connection of key closed. An entry that reaches 0 leaves the table (backward shift: the
 * entries after it that probed past it move up, so every probe still ends at an empty slot). */
static void peer_drop(struct sq_server *s, uint32_t key)
{
    pthread_mutex_lock(&s->peer_mu);
    uint32_t mask = s->peer_cap - 1, i = peer_find(s, key);
    if (s->peers[i].key == key && --s->peers[i].n == 0) {
        s->peer_used--;
        for (uint32_t j = i;;) {
            s->peers[i].key = 0;
            for (;;) {
                j = (j + 1) & mask;
                if (!s->peers[j].key) {
                    pthread_mutex_unlock(&s->peer_mu);
                    return;
                }
                uint32_t home = s->peers[j].key & mask;
                /* j's entry may fill the hole at i unless its home lies in (i, j] */
                bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
                if (!stays)
                    break;
            }
            s->peers[i] = s->peers[j];
            i = j;
        }
    }
    pthread_mutex_unlock(&s->peer_mu);
}

/* The connection of w (of peer key, or any when key is 0) that has waited longest on its
 * client, among those evict may close (see sq_server_config.evict); NULL when there is none.
 * Ages are in the worker's ticks; one lingering after an error comes first. */
static struct conn *evict_pick(struct worker *w, uint32_t key)
{
    struct conn *best = NULL;
    uint32_t best_age = 0, tick = w->tick;
    for (struct slab *sl = w->slabs; sl; sl = sl->next) {
        for (int i = 0; i < SLAB_CONNS; i++) {
            struct conn *c = &sl->c[i];
            if (c->io.fd < 0 || (key && sl->peer[i] != key))
                continue;
            uint32_t age;
            if (c->flags & F_LINGER)
                age = UINT32_MAX;
            else if (c->flags & F_HS)
                age = tick - c->seen; /* the accept */
            else if (c->out || (c->flags & (F_DEFER | F_CLOSE | F_H2)))
                continue; /* being answered, or not HTTP/1.1's */
            else
                age = tick - (c->in ? c->in->since : c->seen);
            if (!best || age > best_age) {
                best = c;
                best_age = age;
            }
        }
    }
    return best;
}

/* Closes c to make room: a request it was reading gets a 503 first, if the socket takes it. */
static void evict(struct worker *w, struct conn *c)
{
    BUMP(w->cnt.evicted);
    if (!c->tls && c->in && !(c->flags & F_LINGER)) {
        const char *m = w->srv->e503_evicted;
        ssize_t r = send(c->io.fd, m, strlen(m), MSG_NOSIGNAL | MSG_DONTWAIT);
        SQ_UNUSED(r); /* best effort: the close follows at once */
    }
    conn_close(w, c);
}

/* Refuses fd at a cap: a 503 if the socket takes it (plaintext only), then the close. */
static void refuse(struct worker *w, int fd, const char *why)
{
    BUMP(w->cnt.refused); /* before the close: a client that sees it may read /stats */
    if (!w->srv->tls) {
        ssize_t r = send(fd, why, strlen(why), MSG_NOSIGNAL | MSG_DONTWAIT);
        SQ_UNUSED(r);
    }
    close(fd); /* the client sees the answer and the close (or a reset if it had sent) */
}

static void on_accept(struct sq_loop *loop, struct sq_io *io, uint32_t rev)
{
    SQ_UNUSED(rev);
    struct worker *w = SQ_CONTAINER_OF(io, struct worker, lio);
    struct sq_server *s = w->srv;
    int64_t now = sq_loop_now(loop);
    /* a fresh clock for the stamps of this burst: evict_pick tells ages apart by it */
    w->tick = (uint32_t)((now - w->epoch_ns) / SQ_NS_PER_MS);
    if (SQ_UNLIKELY(s->sweep_ns && !sq_timer_active(&w->sweep_timer))) {
        /* the sweep slept (no connection) or had no memory: arm it again */
        if (sq_timer_start(loop, &w->sweep_timer, now + s->sweep_ns) < 0)
            sq_timer_stop(loop, &w->sweep_timer); /* still no memory: the next accept tries */
    }
    for (int i = 0; i < ACCEPT_BURST; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(w->lfd, s->per_peer ? (struct sockaddr *)&ss : NULL,
                         s->per_peer ? &sl : NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                accept_pause(loop, w);
            return;
        }
        unsigned open = atomic_fetch_add_explicit(&s->open, 1, memory_order_relaxed);
        uint32_t key = 0;
        bool room = false; /* one was evicted: its place (in both counts) is ours */
        if (SQ_UNLIKELY(s->per_peer)) {
            uint32_t k = peer_key(s, &ss);
            if (peer_take(s, k)) {
                key = k;
            } else { /* the peer's cap: room only among its own connections */
                struct conn *v = s->evict ? evict_pick(w, k) : NULL;
                if (v)
                    evict(w, v);
                if (!v || !peer_take(s, k)) {
                    atomic_fetch_sub_explicit(&s->open, 1, memory_order_relaxed);
                    refuse(w, fd, s->e503_peer);
                    continue;
                }
                key = k;
                room = true;
            }
        }
        if (!room && s->max_conns && open >= s->max_conns) {
            struct conn *v = s->evict ? evict_pick(w, 0) : NULL;
            if (v) {
                evict(w, v);
            } else {
                atomic_fetch_sub_explicit(&s->open, 1, memory_order_relaxed);
                if (key)
                    peer_drop(s, key);
                refuse(w, fd, s->e503_full);
                continue;
            }
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct conn *c = conn_get(w);
        if (!c)
            goto drop;
        c->w = w;
        c->seen = w->tick;
        c->in = NULL;
        c->out = NULL;
        c->tls = NULL;
        c->flags = 0;
        c->d_flags = 0;
        sq_timer_init(&c->timer, on_timer);
        if (s->tls) {
            if (sq_tls_conn_server(s->tls, fd, &c->tls) < 0) {
                c->next_free = w->free_conns;
                w->free_conns = c;
                goto drop;
            }
            c->flags = F_HS; /* the client speaks first: wait for EPOLLIN */
        }
        if (sq_io_start(loop, &c->io, fd, EPOLLIN, on_conn) < 0) {
            sq_tls_conn_free(c->tls);
            c->tls = NULL;
            c->io.fd = -1;
            c->next_free = w->free_conns;
            w->free_conns = c;
            goto drop;
        }
        *peer_of(c) = key;
        w->nconns++;
        BUMP(w->cnt.accepted);
        continue;
    drop: /* out of memory: closed, uncounted */
        atomic_fetch_sub_explicit(&s->open, 1, memory_order_relaxed);
        if (key)
            peer_drop(s, key);
        close(fd);
    }
}

static void on_stop(struct sq_loop *loop, struct sq_io *io, uint32_t rev)
{
    /* Nothing to do: the worker checks the flag after every round. The eventfd is not read so
     * that every worker sees it readable. */
    SQ_UNUSED(loop);
    SQ_UNUSED(io);
    SQ_UNUSED(rev);
}

/* ---- workers ---- */

static void worker_close_all(struct worker *w)
{
    for (struct slab *s = w->slabs; s; s = s->next) {
        for (int i = 0; i < SLAB_CONNS; i++) {
            struct conn *c = &s->c[i];
            if (c->io.fd < 0)
                continue;
            drop_held(c);
            if (c->flags & F_H2) {
                proto_free(c);
                c->flags = 0;
            }
            sq_tls_conn_free(c->tls);
            c->tls = NULL;
            close(c->io.fd);
            c->io.fd = -1;
            free(c->in);
            free(c->out);
            c->in = NULL;
            c->out = NULL;
        }
    }
    if (w->lfd >= 0) {
        close(w->lfd);
        w->lfd = -1;
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    while (!atomic_load_explicit(&w->srv->stopping, memory_order_acquire)) {
        if (sq_loop_run_once(w->loop, -1) < 0)
            break;
    }
    worker_close_all(w);
    return NULL;
}

static void worker_free(struct worker *w)
{
    if (!w)
        return;
    worker_close_all(w);
    while (w->slabs) {
        struct slab *s = w->slabs;
        w->slabs = s->next;
        free(s);
    }
    sq_loop_free(w->loop);
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    if (w->post_mu_init)
        pthread_mutex_destroy(&w->post_mu);
    free(w->rbuf);
    free(w->ob);
    free(w);
}

static int worker_new(struct sq_server *s, int idx, const struct sq_addr *a, int backlog,
                      struct worker **out)
{
    size_t size = (sizeof(struct worker) + 63) & ~(size_t)63;
    struct worker *w = aligned_alloc(64, size);
    if (!w)
        return -ENOMEM;
    memset(w, 0, size);
    w->srv = s;
    w->idx = idx;
    w->lfd = -1;
    w->wake_fd = -1;
    w->stamp = s->stamp;
    w->lim.max_head_bytes = SQ_SERVER_MAX_HEAD;
    w->lim.max_headers = SQ_SERVER_MAX_HEADERS;
    sq_timer_init(&w->accept_timer, on_accept_resume);
    sq_timer_init(&w->sweep_timer, on_sweep);
    int rc = pthread_mutex_init(&w->post_mu, NULL);
    if (rc != 0) {
        worker_free(w);
        return -rc;
    }
    w->post_mu_init = true;
    rc = sq_loop_new(&w->loop);
    if (rc < 0) {
        worker_free(w);
        return rc;
    }
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->wake_fd < 0) {
        rc = -errno;
        worker_free(w);
        return rc;
    }
    w->epoch_ns = sq_loop_now(w->loop);
    if (s->sweep_ns &&
        (rc = sq_timer_start(w->loop, &w->sweep_timer, w->epoch_ns + s->sweep_ns)) < 0) {
        worker_free(w);
        return rc;
    }
    w->rbuf = malloc(RBUF_SIZE);
    w->ob = malloc(OB_INIT);
    w->ocap = OB_INIT;
    if (!w->rbuf || !w->ob) {
        worker_free(w);
        return -ENOMEM;
    }
    w->lfd = s->ulfd >= 0 ? fcntl(s->ulfd, F_DUPFD_CLOEXEC, 0) : sq_listen(a, true, backlog);
    if (w->lfd < 0 && s->ulfd >= 0)
        w->lfd = -errno;
    if (w->lfd < 0) {
        rc = w->lfd;
        w->lfd = -1;
        worker_free(w);
        return rc;
    }
    if ((rc = sq_io_start(w->loop, &w->lio, w->lfd, EPOLLIN, on_accept)) < 0 ||
        (rc = sq_io_start(w->loop, &w->stop_io, s->efd, EPOLLIN, on_stop)) < 0 ||
        (rc = sq_io_start(w->loop, &w->wake_io, w->wake_fd, EPOLLIN, on_wake)) < 0) {
        worker_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

/* An answer sent whole with one send() at a cap: 503 with the JSON body json. */
static void render_503(char *buf, size_t n, const char *json)
{
    snprintf(buf, n,
             "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
             strlen(json), json);
}

/* "10 s", "0.5 s": a configured time as the refusals' texts say it. */
static void secs(char *buf, size_t n, int64_t ns)
{
    snprintf(buf, n, "%g s", (double)ns / 1e9);
}

static uint32_t ms_ceil(int64_t ns)
{
    return (uint32_t)((ns + SQ_NS_PER_MS - 1) / SQ_NS_PER_MS);
}

static void set_port(struct sq_addr *a, uint16_t port)
{
    if (a->ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&a->ss)->sin6_port = htons(port);
    else
        ((struct sockaddr_in *)&a->ss)->sin_port = htons(port);
}

/* SO_REUSEPORT would let a second server (same user) join a port that is already serving and
 * silently take half its connections. A plain bind first tells "in use" apart. */
static int probe_port(const struct sq_addr *a)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0)
        return -errno;
    int one = 1, rc = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* TIME_WAIT is no conflict */
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

/* The Unix socket listener at path: refuses to replace anything but a stale socket. */
static int unix_listen(const char *path, int backlog, const char **why)
{
    struct sq_addr a;
    if (sq_addr_unix(path, &a) < 0) {
        *why = "the socket path is empty or longer than 107 bytes";
        return -ENAMETOOLONG;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            *why = "the path exists and is not a socket (not replaced)";
            return -EEXIST;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe < 0)
            return -errno;
        int live = connect(probe, (const struct sockaddr *)&a.ss, a.len) == 0;
        close(probe);
        if (live) {
            *why = "a server already listens on that socket";
            return -EADDRINUSE;
        }
        if (unlink(path) < 0)
            return -errno; /* a stale socket: replaced */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    mode_t old = umask(0177); /* the file is born 0600: no moment with wider rights */
    int rc = bind(fd, (const struct sockaddr *)&a.ss, a.len);
    umask(old);
    if (rc < 0 || listen(fd, backlog) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

int sq_server_start(const struct sq_server_config *cfg, struct sq_server **out, const char **why)
{
    if (why)
        *why = NULL;
    if (!cfg || !cfg->handler || cfg->threads < 1 || cfg->threads > 4096 ||
        cfg->idle_timeout_ns < 0 || cfg->idle_timeout_ns > SQ_SERVER_MAX_TIMEOUT_NS ||
        cfg->header_timeout_ns < 0 || cfg->header_timeout_ns > SQ_SERVER_MAX_TIMEOUT_NS ||
        cfg->request_timeout_ns < 0 || cfg->request_timeout_ns > SQ_SERVER_MAX_TIMEOUT_NS)
        return -EINVAL;
    struct sq_addr addr;
    const char *rwhy = NULL;
    int rc, ulfd = -1;
    int backlog = cfg->backlog > 0 ? cfg->backlog : 1024;
    if (cfg->unix_path) {
        if ((ulfd = unix_listen(cfg->unix_path, backlog, &rwhy)) < 0) {
            if (why)
                *why = rwhy;
            return ulfd;
        }
        rc = sq_addr_unix(cfg->unix_path, &addr);
    } else {
        rc = sq_resolve(cfg->host ? cfg->host : "127.0.0.1", cfg->port, &addr, 1, &rwhy);
        if (rc < 0) {
            if (why)
                *why = rwhy;
            return rc;
        }
        if (cfg->port != 0 && (rc = probe_port(&addr)) < 0)
            return rc;
    }
    struct sq_server *s = calloc(1, sizeof(*s));
    if (!s || (cfg->unix_path && !(s->upath = strdup(cfg->unix_path)))) {
        if (ulfd >= 0) {
            close(ulfd);
            unlink(cfg->unix_path);
        }
        free(s);
        return -ENOMEM;
    }
    s->ulfd = ulfd;
    s->handler = cfg->handler;
    s->on_head = cfg->on_head;
    s->ud = cfg->ud;
    s->stamp = cfg->stamp_arrivals;
    s->tls = cfg->tls;
    s->max_conns = cfg->max_conns;
    s->per_peer = cfg->max_conns_per_peer;
    s->evict = cfg->evict;
    s->http1_only = cfg->http1_only;
    if (s->per_peer) {
        if (getrandom(&s->peer_salt, sizeof(s->peer_salt), 0) != (ssize_t)sizeof(s->peer_salt))
            s->peer_salt = (uint64_t)sq_now_ns() * 0x9e3779b97f4a7c15ull; /* no entropy: still
                                                                             unknown outside */
        if ((rc = -pthread_mutex_init(&s->peer_mu, NULL)) < 0) {
            s->efd = -1;
            sq_server_free(s);
            return rc;
        }
        s->peer_mu_init = true;
    }
    char json[256];
    snprintf(json, sizeof(json),
             "{\"error\":\"too many connections: the server's cap of %u is reached and none can "
             "make room\"}",
             s->max_conns);
    render_503(s->e503_full, sizeof(s->e503_full), json);
    snprintf(json, sizeof(json),
             "{\"error\":\"too many connections from this address: its cap of %u is reached and "
             "none of its connections can make room\"}",
             s->per_peer);
    render_503(s->e503_peer, sizeof(s->e503_peer), json);
    render_503(s->e503_evicted, sizeof(s->e503_evicted),
               "{\"error\":\"too many connections: this request, the one waiting longest on its "
               "client, was closed to make room for a new connection\"}");
    /* a timeout under 1 ms still waits 1 ms: the sweep counts whole ms */
    s->idle_ms = ms_ceil(cfg->idle_timeout_ns);
    s->header_ms = ms_ceil(cfg->header_timeout_ns);
    s->request_ms = ms_ceil(cfg->request_timeout_ns);
    s->min_rate = cfg->min_body_rate;
    s->rate_grace_ms = s->header_ms ? s->header_ms : 1000;
    char t[32];
    secs(t, sizeof(t), cfg->header_timeout_ns);
    snprintf(s->e408_head, sizeof(s->e408_head),
             "{\"error\":\"request timeout: the request head was not complete within the header "
             "timeout (%s)\"}",
             t);
    secs(t, sizeof(t), cfg->request_timeout_ns);
    snprintf(s->e408_request, sizeof(s->e408_request),
             "{\"error\":\"request timeout: the request was not complete within the request "
             "timeout (%s)\"}",
             t);
    secs(t, sizeof(t), (int64_t)s->rate_grace_ms * SQ_NS_PER_MS);
    snprintf(s->e408_rate, sizeof(s->e408_rate),
             "{\"error\":\"request timeout: the request body came slower than the minimum rate "
             "(%u bytes/s after the first %s)\"}",
             s->min_rate, t);
    int64_t shortest = cfg->idle_timeout_ns;
    int64_t others[] = {cfg->header_timeout_ns, cfg->request_timeout_ns,
                        s->min_rate ? (int64_t)s->rate_grace_ms * SQ_NS_PER_MS : 0};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        if (others[i] && (!shortest || others[i] < shortest))
            shortest = others[i];
    if (shortest > 0) {
        s->sweep_ns = shortest / 8;
        s->sweep_ns = s->sweep_ns < SWEEP_MIN_NS   ? SWEEP_MIN_NS
                      : s->sweep_ns > SWEEP_MAX_NS ? SWEEP_MAX_NS
                                                   : s->sweep_ns;
    }
    s->joined = true; /* nothing to join yet */
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    s->w = calloc((size_t)cfg->threads, sizeof(*s->w));
    if (s->efd < 0 || !s->w) {
        rc = s->efd < 0 ? -errno : -ENOMEM;
        goto fail;
    }
    for (int i = 0; i < cfg->threads; i++) {
        if ((rc = worker_new(s, i, &addr, backlog, &s->w[i])) < 0)
            goto fail;
        s->nworkers = i + 1;
        if (i == 0 && s->ulfd < 0) {
            s->port = sq_sock_port(s->w[0]->lfd);
            set_port(&addr, s->port); /* the rest share the port the first one got */
        }
    }
    /* Workers block the stop signals so the caller's thread takes them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    s->joined = false;
    for (int i = 0; i < s->nworkers; i++) {
        rc = -pthread_create(&s->w[i]->thr, NULL, worker_main, s->w[i]);
        if (rc < 0)
            break;
        s->w[i]->started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0)
        goto fail;
    *out = s;
    return 0;
fail:
    sq_server_free(s);
    return rc;
}

uint16_t sq_server_port(const struct sq_server *s)
{
    return s->port;
}

int sq_server_threads(const struct sq_server *s)
{
    return s->nworkers;
}

void sq_server_stop(struct sq_server *s)
{
    atomic_store_explicit(&s->stopping, 1, memory_order_release);
    if (s->efd >= 0) {
        uint64_t one = 1;
        ssize_t r = write(s->efd, &one, sizeof(one));
        SQ_UNUSED(r); /* EAGAIN: the counter is already non-zero, which is all we need */
    }
}

void sq_server_wait(struct sq_server *s)
{
    if (s->joined)
        return;
    for (int i = 0; i < s->nworkers; i++) {
        if (s->w[i]->started) {
            pthread_join(s->w[i]->thr, NULL);
            s->w[i]->started = false;
        }
    }
    s->joined = true;
}

void sq_server_free(struct sq_server *s)
{
    if (!s)
        return;
    sq_server_stop(s);
    sq_server_wait(s);
    if (s->w)
        for (int i = 0; i < s->nworkers; i++) {
            run_posts(s->w[i]); /* what the worker did not reach: each post runs once */
            worker_free(s->w[i]);
        }
    free(s->w);
    if (s->efd >= 0)
        close(s->efd);
    if (s->peer_mu_init)
        pthread_mutex_destroy(&s->peer_mu);
    if (s->ulfd >= 0) {
        close(s->ulfd);
        unlink(s->upath);
    }
    free(s->upath);
    free(s->peers);
    free(s);
}

void sq_server_counts(const struct sq_server *s, struct sq_server_counts *out)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < s->nworkers; i++) {
        const struct counters *c = &s->w[i]->cnt;
        out->accepted += atomic_load_explicit(&c->accepted, memory_order_relaxed);
        out->requests += atomic_load_explicit(&c->requests, memory_order_relaxed);
        out->bad_req += atomic_load_explicit(&c->bad_req, memory_order_relaxed);
        out->too_large += atomic_load_explicit(&c->too_large, memory_order_relaxed);
        out->head_big += atomic_load_explicit(&c->head_big, memory_order_relaxed);
        out->tls_ok += atomic_load_explicit(&c->tls_ok, memory_order_relaxed);
        out->tls_failed += atomic_load_explicit(&c->tls_failed, memory_order_relaxed);
        out->h2_conns += atomic_load_explicit(&c->h2_conns, memory_order_relaxed);
        out->h2_streams += atomic_load_explicit(&c->h2_streams, memory_order_relaxed);
        out->smuggling += atomic_load_explicit(&c->smuggling, memory_order_relaxed);
        out->refused += atomic_load_explicit(&c->refused, memory_order_relaxed);
        out->idle_timeouts += atomic_load_explicit(&c->idle_to, memory_order_relaxed);
        out->header_timeouts += atomic_load_explicit(&c->header_to, memory_order_relaxed);
        out->body_timeouts += atomic_load_explicit(&c->body_to, memory_order_relaxed);
        out->head_refused += atomic_load_explicit(&c->head_refused, memory_order_relaxed);
        out->evicted += atomic_load_explicit(&c->evicted, memory_order_relaxed);
    }
    out->open = atomic_load_explicit(&s->open, memory_order_relaxed);
}
