/* target/h3srv.c - HTTP/3 for the target (target/h3srv.h): ngtcp2 + GnuTLS + nghttp3 on one
 * thread and one UDP socket.
 *
 * Datagrams: the header's connection ID finds the connection in a hash map of every ID a
 * connection uses (its first Destination ID from the client's Initial, then each Source ID it
 * issues); an unknown ID is a new connection only when ngtcp2_accept() takes the packet as a
 * client Initial (a full-size datagram, a known version) and there is room under max_conns.
 * Anything else is dropped and counted: nothing is allocated for it. A connection that fails
 * (decryption, the handshake, a protocol error) is freed at once, after a CONNECTION_CLOSE when
 * one is due, so a flood of forged Initials costs one short-lived connection each, never more
 * than max_conns at a time.
 *
 * Timers: each connection's next expiry (ngtcp2's, and its streams' delayed or paced answers)
 * is found by a scan over the connections once per loop round; poll() sleeps until the earliest.
 */
#include "target/h3srv.h"

#include <errno.h>

#ifndef SQ_HAVE_H3

bool sq_h3srv_available(void)
{
    return false;
}

int sq_h3srv_start(const struct sq_h3srv_config *cfg, struct sq_h3srv **out, const char **why)
{
    SQ_UNUSED(cfg);
    *out = NULL;
    if (why)
        *why = "this build has no HTTP/3 (libngtcp2, libngtcp2_crypto_gnutls, libnghttp3 and "
               "gnutls were not found at build time: scripts/deps.sh installs them)";
    return -ENOTSUP;
}

void sq_h3srv_stop(struct sq_h3srv *s)
{
    SQ_UNUSED(s);
}

void sq_h3srv_free(struct sq_h3srv *s)
{
    SQ_UNUSED(s);
}

void sq_h3srv_counts(const struct sq_h3srv *s, struct sq_h3srv_counts *out)
{
    SQ_UNUSED(s);
    *out = (struct sq_h3srv_counts){0};
}

int sq_h3srv_new_detached(const struct sq_h3srv_config *cfg, struct sq_h3srv **out)
{
    SQ_UNUSED(cfg);
    *out = NULL;
    return -ENOTSUP;
}

void sq_h3srv_feed(struct sq_h3srv *s, const uint8_t *p, size_t n, uint16_t port)
{
    SQ_UNUSED(s);
    SQ_UNUSED(p);
    SQ_UNUSED(n);
    SQ_UNUSED(port);
}

void sq_h3srv_fuzz_request(struct sq_h3srv *s, const uint8_t *p, size_t n)
{
    SQ_UNUSED(s);
    SQ_UNUSED(p);
    SQ_UNUSED(n);
}

#else

#include <ctype.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "base/clock.h"
#include "base/h3lib.h"

#define SCID_LEN 18
#define MAX_UDP  65527
#define MAX_PKT  1452 /* what one datagram we send holds at most */
#define GSO_MAX  32   /* packets one GSO send carries at most (the kernel: 64) */
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103 /* linux/udp.h */
#endif
#define RECV_BATCH    64            /* datagrams read per wakeup before the timers run */
#define MAP_BUCKETS   8192          /* connection IDs (a power of two) */
#define MAX_PENDING   (1024 * 1024) /* a paced answer's bytes not yet acknowledged */
#define STREAM_WINDOW (256 * 1024)
#define CONN_WINDOW   (1024 * 1024)
#define SEEN_SLOTS    4096 /* ClientHellos with early data remembered for the anti-replay check */
#define CONN_BODY_MAX                                                                              \
    (4 * 1024 * 1024) /* request bodies held at once per connection; more: 413                     \
                       */

static const char PRIORITY[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:"
                               "+AES-256-GCM:+CHACHA20-POLY1305:+AES-128-CCM:-GROUP-ALL:"
                               "+GROUP-SECP256R1:+GROUP-X25519:+GROUP-SECP384R1:+GROUP-SECP521R1:"
                               "%DISABLE_TLS13_COMPAT_MODE";

struct chunk {
    struct chunk *next;
    size_t len;
    char data[];
};

struct h3conn;

struct h3stream {
    int64_t id;
    struct h3conn *c;
    struct h3stream *next; /* the connection's list */
    /* the request: header fields "name\0value\0" in head, spans fixed at dispatch */
    char *head;
    size_t head_len, head_cap;
    size_t nfields;
    size_t fname[SQ_SERVER_MAX_HEADERS + 4], fnlen[SQ_SERVER_MAX_HEADERS + 4];
    size_t fval[SQ_SERVER_MAX_HEADERS + 4], fvlen[SQ_SERVER_MAX_HEADERS + 4];
    int too_big; /* 0, 431 or 413: answered so once the request ends */
    char *body;
    size_t body_len, body_cap;
    bool dispatched;
    /* the answer */
    int status;
    char *ctype; /* owned copy */
    char *xhead; /* owned copy of the handler's extra header lines */
    size_t xhead_len;
    bool head_only; /* HEAD, 204, 304: no body */
    bool submitted;
    int64_t due_ns;               /* > 0: submit then (a delayed answer) */
    struct chunk *first, *give;   /* chunks not yet acknowledged; the next to hand out */
    size_t give_base, first_base; /* offsets (within the chunks' bytes) */
    size_t chunk_total;           /* bytes in all chunks made */
    uint64_t acked;
    const char *fill;
    size_t fill_len;
    uint64_t fill_total, fill_given;
    /* a paced answer (SSE) */
    sq_server_stream_fn pace_fn;
    void *pace_ud;
    uint32_t pace_next, pace_count;
    int64_t pace_start_ns, pace_interval_ns;
};

struct cidref {
    struct cidref *next;
    uint8_t len;
    uint8_t id[NGTCP2_MAX_CIDLEN];
    struct h3conn *c;
};

struct h3conn {
    struct sq_h3srv *s;
    struct h3conn *prev, *next;
    ngtcp2_conn *q;
    nghttp3_conn *h;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    struct sockaddr_storage remote;
    socklen_t remote_len;
    ngtcp2_path path;
    struct h3stream *streams;
    uint32_t nstreams;
    size_t body_bytes; /* request body buffers of its streams (capacity), at most CONN_BODY_MAX */
    int ncids;
    struct cidref *own[16]; /* every ID of this connection in the map */
    bool dead;
    ngtcp2_connection_close_error ccerr;
};

struct sq_h3srv {
    int fd, efd;
    bool detached;
    pthread_t thr;
    bool started;
    _Atomic bool stop;
    struct sockaddr_storage local;
    socklen_t local_len;
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
    uint8_t secret[32];
    struct sq_h3srv_config cfg;
    struct h3conn *conns;
    uint32_t nconns, max_conns;
    struct cidref *map[MAP_BUCKETS];
    uint8_t pkt[MAX_PKT];
    uint8_t rbuf[MAX_UDP];
    bool gso;                        /* send runs of packets with UDP_SEGMENT (probed; env) */
    uint8_t gbuf[GSO_MAX * MAX_PKT]; /* one connection's run of packets, back to back */
    size_t goff, gseg;               /* its bytes, and the length of each but the last */
    int gn;                          /* its packets */
    _Atomic uint64_t n_conns, n_requests, n_streams, n_refused, n_dropped, n_open;
    _Atomic uint64_t n_resumed, n_early, n_early_streams;
    /* 0-RTT: the session tickets' key (random per server), GnuTLS's anti-replay check and the
     * ClientHellos it has seen inside its window (see seen_add) */
    uint8_t ticket_key[64];
    gnutls_anti_replay_t ar;
    struct seen {
        uint64_t h;
        time_t exp;
    } seen[SEEN_SLOTS];
};

#define BUMP(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)

static uint64_t now_ts(void)
{
    return (uint64_t)sq_now_ns();
}

static void rand_bytes(uint8_t *p, size_t n)
{
    while (n) {
        ssize_t k = getrandom(p, n, 0);
        if (k <= 0)
            continue;
        p += k;
        n -= (size_t)k;
    }
}

/* ---- the connection ID map ---- */

static uint32_t cid_hash(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h & (MAP_BUCKETS - 1);
}

static struct h3conn *cid_find(struct sq_h3srv *s, const uint8_t *p, size_t n)
{
    if (n > NGTCP2_MAX_CIDLEN)
        return NULL;
    for (struct cidref *r = s->map[cid_hash(p, n)]; r; r = r->next)
        if (r->len == n && memcmp(r->id, p, n) == 0)
            return r->c;
    return NULL;
}

static int cid_add(struct h3conn *c, const uint8_t *p, size_t n)
{
    if (n > NGTCP2_MAX_CIDLEN || c->ncids >= (int)SQ_ARRAY_LEN(c->own))
        return -1;
    struct cidref *r = calloc(1, sizeof(*r));
    if (!r)
        return -1;
    r->len = (uint8_t)n;
    memcpy(r->id, p, n);
    r->c = c;
    uint32_t b = cid_hash(p, n);
    r->next = c->s->map[b];
    c->s->map[b] = r;
    c->own[c->ncids++] = r;
    return 0;
}

static void cid_unlink(struct sq_h3srv *s, struct cidref *r)
{
    for (struct cidref **pp = &s->map[cid_hash(r->id, r->len)]; *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            return;
        }
    }
}

static void cid_del(struct h3conn *c, const uint8_t *p, size_t n)
{
    for (int i = 0; i < c->ncids; i++) {
        struct cidref *r = c->own[i];
        if (r->len == n && memcmp(r->id, p, n) == 0) {
            cid_unlink(c->s, r);
            free(r);
            c->own[i] = c->own[--c->ncids];
            return;
        }
    }
}

/* ---- streams ---- */

static void chunks_free(struct chunk *k)
{
    while (k) {
        struct chunk *n = k->next;
        free(k);
        k = n;
    }
}

/* Frees st's request body (the handler has had it, or it is refused). */
static void body_drop(struct h3stream *st)
{
    st->c->body_bytes -= st->body_cap;
    free(st->body);
    st->body = NULL;
    st->body_len = st->body_cap = 0;
}

static void stream_free(struct h3stream *st)
{
    body_drop(st);
    free(st->head);
    free(st->ctype);
    free(st->xhead);
    chunks_free(st->first);
    free(st);
}

static void stream_unlink(struct h3conn *c, struct h3stream *st)
{
    for (struct h3stream **pp = &c->streams; *pp; pp = &(*pp)->next) {
        if (*pp == st) {
            *pp = st->next;
            c->nstreams--;
            return;
        }
    }
}

static int chunk_add(struct h3stream *st, const char *p, size_t n)
{
    if (!n)
        return 0;
    struct chunk *k = malloc(sizeof(*k) + n);
    if (!k)
        return -1;
    k->next = NULL;
    k->len = n;
    memcpy(k->data, p, n);
    if (!st->first) {
        st->first = k;
        st->first_base = st->chunk_total;
    } else {
        struct chunk *t = st->first;
        while (t->next)
            t = t->next;
        t->next = k;
    }
    if (!st->give) {
        st->give = k;
        st->give_base = st->chunk_total;
    }
    st->chunk_total += n;
    return 0;
}

static bool stream_complete(const struct h3stream *st)
{
    return !st->give && st->fill_given >= st->fill_total &&
           (!st->pace_fn || st->pace_next >= st->pace_count);
}

static nghttp3_ssize read_data(nghttp3_conn *h, int64_t id, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *conn_ud, void *stream_ud)
{
    SQ_UNUSED(h);
    SQ_UNUSED(id);
    SQ_UNUSED(conn_ud);
    struct h3stream *st = stream_ud;
    size_t n = 0;
    while (n < veccnt && st->give) {
        vec[n].base = (uint8_t *)st->give->data;
        vec[n++].len = st->give->len;
        st->give_base += st->give->len;
        st->give = st->give->next;
    }
    while (n < veccnt && st->fill_given < st->fill_total) {
        size_t off = (size_t)(st->fill_given % st->fill_len);
        uint64_t left = st->fill_total - st->fill_given;
        size_t len = st->fill_len - off;
        if (len > left)
            len = (size_t)left;
        vec[n].base = (uint8_t *)(uintptr_t)(st->fill + off);
        vec[n++].len = len;
        st->fill_given += len;
    }
    if (stream_complete(st))
        *pflags |= NGHTTP3_DATA_FLAG_EOF;
    else if (!n)
        return NGHTTP3_ERR_WOULDBLOCK;
    return (nghttp3_ssize)n;
}

/* Appends one header line's field ("Name: value") to nva, lowercasing the name into buf. */
static size_t add_lines(const char *p, size_t n, nghttp3_nv *nva, size_t max, char *buf)
{
    size_t k = 0, o = 0;
    while (n && k < max) {
        const char *eol = memchr(p, '\n', n);
        size_t line = eol ? (size_t)(eol - p) : n;
        size_t adv = eol ? line + 1 : n;
        if (line && p[line - 1] == '\r')
            line--;
        const char *colon = memchr(p, ':', line);
        if (colon && colon > p) {
            size_t nl = (size_t)(colon - p);
            const char *v = colon + 1;
            size_t vl = line - nl - 1;
            while (vl && (*v == ' ' || *v == '\t'))
                v++, vl--;
            while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
            char *name = buf + o;
            for (size_t i = 0; i < nl; i++)
                name[i] = (char)tolower((unsigned char)p[i]);
            o += nl;
            /* connection-specific fields have no place in HTTP/3 (RFC 9114 4.2) */
            static const char *const drop[] = {"connection", "keep-alive", "transfer-encoding",
                                               "upgrade", "proxy-connection"};
            bool skip = false;
            for (size_t d = 0; d < SQ_ARRAY_LEN(drop); d++)
                if (strlen(drop[d]) == nl && memcmp(drop[d], name, nl) == 0)
                    skip = true;
            if (!skip)
                nva[k++] = (nghttp3_nv){(uint8_t *)name, (uint8_t *)(uintptr_t)v, nl, vl,
                                        NGHTTP3_NV_FLAG_NONE};
        }
        p += adv;
        n -= adv;
    }
    return k;
}

static int submit(struct h3stream *st)
{
    struct h3conn *c = st->c;
    st->submitted = true;
    char status[4], clen[24];
    snprintf(status, sizeof(status), "%03d", st->status);
    nghttp3_nv nva[SQ_SERVER_MAX_HEADERS + 4];
    size_t k = 0;
    nva[k++] = (nghttp3_nv){(uint8_t *)":status", (uint8_t *)status, 7, 3, NGHTTP3_NV_FLAG_NONE};
    if (st->ctype)
        nva[k++] = (nghttp3_nv){(uint8_t *)"content-type", (uint8_t *)st->ctype, 12,
                                strlen(st->ctype), NGHTTP3_NV_FLAG_NONE};
    bool no_len = st->status == 204 || st->status == 304 || st->pace_fn;
    if (!no_len) {
        int l = snprintf(clen, sizeof(clen), "%llu",
                         (unsigned long long)(st->chunk_total + st->fill_total));
        nva[k++] = (nghttp3_nv){(uint8_t *)"content-length", (uint8_t *)clen, 14, (size_t)l,
                                NGHTTP3_NV_FLAG_NONE};
    }
    char *lower = st->xhead_len ? malloc(st->xhead_len) : NULL;
    if (st->xhead_len && !lower)
        return -1;
    k += add_lines(st->xhead, st->xhead_len, nva + k, SQ_ARRAY_LEN(nva) - k, lower);
    if (st->head_only || st->status == 204 || st->status == 304) {
        chunks_free(st->first);
        st->first = st->give = NULL;
        st->fill_total = 0;
        st->pace_fn = NULL;
    }
    nghttp3_data_reader dr = {.read_data = read_data};
    bool body = st->first || st->fill_total || st->pace_fn;
    int rv = nghttp3_conn_submit_response(c->h, st->id, nva, k, body ? &dr : NULL);
    free(lower);
    return rv == 0 ? 0 : -1;
}

/* The next piece of a paced answer that is due at now, if any. Returns 0, or -1: close. */
static int pace_run(struct h3stream *st, int64_t now)
{
    bool made = false;
    while (st->pace_next < st->pace_count) {
        int64_t off, due;
        if (__builtin_mul_overflow(st->pace_interval_ns, (int64_t)st->pace_next + 1, &off) ||
            __builtin_add_overflow(st->pace_start_ns, off, &due) || due > now)
            break;
        if (st->chunk_total - st->acked > MAX_PENDING)
            return -1; /* a reader that does not read */
        char buf[SQ_SERVER_STREAM_PIECE];
        size_t n = st->pace_fn(st->pace_ud, st->pace_next, st->pace_count, buf, sizeof(buf));
        st->pace_next++;
        if (n > sizeof(buf))
            n = sizeof(buf);
        if (chunk_add(st, buf, n) < 0)
            return -1;
        made = true;
    }
    if (made || st->pace_next >= st->pace_count)
        nghttp3_conn_resume_stream(st->c->h, st->id);
    return 0;
}

static int64_t pace_due(const struct h3stream *st)
{
    if (!st->pace_fn || st->pace_next >= st->pace_count)
        return INT64_MAX;
    int64_t off, due;
    if (__builtin_mul_overflow(st->pace_interval_ns, (int64_t)st->pace_next + 1, &off) ||
        __builtin_add_overflow(st->pace_start_ns, off, &due))
        return INT64_MAX;
    return due;
}

static char *dup_n(const char *p, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = 0;
    }
    return d;
}

/* The request is whole: the handler answers it (or the limits already did). */
static int dispatch(struct h3stream *st)
{
    struct h3conn *c = st->c;
    struct sq_h3srv *s = c->s;
    st->dispatched = true;
    struct sq_server_resp resp = {0};
    struct sq_h1_header hdr[SQ_SERVER_MAX_HEADERS + 1];
    struct sq_server_req req = {0};
    const char *method = NULL, *path = NULL, *authority = NULL;
    size_t method_len = 0, path_len = 0, authority_len = 0, nh = 0;
    bool has_host = false;
    for (size_t i = 0; i < st->nfields; i++) {
        const char *nm = st->head + st->fname[i], *v = st->head + st->fval[i];
        size_t nl = st->fnlen[i], vl = st->fvlen[i];
        if (nl == 7 && memcmp(nm, ":method", 7) == 0) {
            method = v, method_len = vl;
        } else if (nl == 5 && memcmp(nm, ":path", 5) == 0) {
            path = v, path_len = vl;
        } else if (nl == 10 && memcmp(nm, ":authority", 10) == 0) {
            authority = v, authority_len = vl;
        } else if (nl && nm[0] != ':' && nh < SQ_SERVER_MAX_HEADERS) {
            if (nl == 4 && memcmp(nm, "host", 4) == 0)
                has_host = true;
            hdr[nh++] =
                (struct sq_h1_header){.name = nm, .name_len = nl, .value = v, .value_len = vl};
        }
    }
    if (!has_host && authority && nh < SQ_ARRAY_LEN(hdr)) { /* a leading host, as over h2 */
        memmove(hdr + 1, hdr, nh * sizeof(*hdr));
        hdr[0] = (struct sq_h1_header){
            .name = "host", .name_len = 4, .value = authority, .value_len = authority_len};
        nh++;
    }
    if (st->too_big) {
        resp.status = st->too_big;
        resp.content_type = "application/json";
        resp.body = st->too_big == 413 ? "{\"error\":\"request body too large\"}\n"
                                       : "{\"error\":\"request header fields too large\"}\n";
        resp.body_len = strlen(resp.body);
    } else if (!method || !path || !path_len) {
        resp.status = 400;
        resp.content_type = "application/json";
        resp.body = "{\"error\":\"malformed request\"}\n";
        resp.body_len = strlen(resp.body);
    } else {
        req.method = method;
        req.method_len = method_len;
        req.path = path;
        req.path_len = path_len;
        req.minor_version = 0;
        req.h3 = true;
        req.headers = hdr;
        req.num_headers = nh;
        req.body = st->body_len ? st->body : NULL;
        req.body_len = st->body_len;
        req.head = method_len == 4 && memcmp(method, "HEAD", 4) == 0;
        req.keep_alive = true;
        req.worker = s->cfg.worker;
        req.fd = -1;
        req.arrival_ns = sq_now_ns();
        req.server = s->cfg.server;
        s->cfg.handler(s->cfg.ud, &req, &resp);
        BUMP(s->n_requests);
    }
    st->head_only = req.head;
    st->status = resp.status ? resp.status : 200;
    if (st->status < 200 || st->status > 999)
        st->status = 500;
    if (resp.content_type && !(st->ctype = dup_n(resp.content_type, strlen(resp.content_type))))
        goto oom;
    if (resp.headers_len) {
        if (!(st->xhead = dup_n(resp.headers, resp.headers_len)))
            goto oom;
        st->xhead_len = resp.headers_len;
    }
    if (resp.stream && resp.stream_count > 0) {
        st->pace_fn = resp.stream;
        st->pace_ud = resp.stream_ud;
        st->pace_count = resp.stream_count;
        st->pace_start_ns = sq_now_ns();
        st->pace_interval_ns = resp.stream_interval_ns > 0 ? resp.stream_interval_ns : 0;
    } else {
        if (chunk_add(st, resp.body, resp.body_len) < 0)
            goto oom;
        body_drop(st); /* after the copy: an answer may point into the request */
        if (resp.fill && resp.fill_len && resp.fill_total) {
            st->fill = resp.fill;
            st->fill_len = resp.fill_len;
            st->fill_total = resp.fill_total;
        }
        if (resp.delay_ns > 0)
            st->due_ns =
                sq_now_ns() +
                (resp.delay_ns < SQ_SERVER_MAX_DELAY_NS ? resp.delay_ns : SQ_SERVER_MAX_DELAY_NS);
    }
    if (resp.upgrade && resp.upgrade->closed)
        resp.upgrade->closed(resp.upgrade_ud); /* not taken over HTTP/3 */
    if (st->due_ns)
        return 0;
    return submit(st);
oom:
    if (resp.upgrade && resp.upgrade->closed)
        resp.upgrade->closed(resp.upgrade_ud);
    return -1;
}

/* ---- nghttp3 callbacks ---- */

static int h_begin_headers(nghttp3_conn *h, int64_t id, void *cud, void *sud)
{
    SQ_UNUSED(sud);
    struct h3conn *c = cud;
    struct h3stream *st = calloc(1, sizeof(*st));
    if (!st)
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    st->id = id;
    st->c = c;
    st->next = c->streams;
    c->streams = st;
    c->nstreams++;
    BUMP(c->s->n_streams);
    nghttp3_conn_set_stream_user_data(h, id, st);
    return 0;
}

static int grow(char **p, size_t *cap, size_t need, size_t max)
{
    if (need <= *cap)
        return 0;
    if (need > max)
        return -1;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    if (n > max)
        n = max;
    char *q = realloc(*p, n);
    if (!q)
        return -2;
    *p = q;
    *cap = n;
    return 0;
}

static int h_recv_header(nghttp3_conn *h, int64_t id, int32_t token, nghttp3_rcbuf *name,
                         nghttp3_rcbuf *value, uint8_t flags, void *cud, void *sud)
{
    SQ_UNUSED(h);
    SQ_UNUSED(id);
    SQ_UNUSED(token);
    SQ_UNUSED(flags);
    SQ_UNUSED(cud);
    struct h3stream *st = sud;
    if (!st || st->too_big)
        return 0;
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
    size_t need = st->head_len + n.len + v.len + 2;
    if (st->nfields >= SQ_ARRAY_LEN(st->fname) - 1) {
        st->too_big = 431;
        return 0;
    }
    int g = grow(&st->head, &st->head_cap, need, SQ_SERVER_MAX_HEAD);
    if (g == -2)
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    if (g < 0) {
        st->too_big = 431;
        return 0;
    }
    size_t i = st->nfields++;
    st->fname[i] = st->head_len;
    st->fnlen[i] = n.len;
    memcpy(st->head + st->head_len, n.base, n.len);
    st->head_len += n.len;
    st->head[st->head_len++] = 0;
    st->fval[i] = st->head_len;
    st->fvlen[i] = v.len;
    memcpy(st->head + st->head_len, v.base, v.len);
    st->head_len += v.len;
    st->head[st->head_len++] = 0;
    return 0;
}

static int h_recv_data(nghttp3_conn *h, int64_t id, const uint8_t *data, size_t len, void *cud,
                       void *sud)
{
    SQ_UNUSED(h);
    struct h3conn *c = cud;
    struct h3stream *st = sud;
    if (c->q) { /* NULL only in the fuzzer's request path */
        ngtcp2_conn_extend_max_stream_offset(c->q, id, len);
        ngtcp2_conn_extend_max_offset(c->q, len);
    }
    if (!st || st->too_big || !len)
        return 0;
    size_t cap0 = st->body_cap;
    /* the connection's budget: what its other streams hold leaves this one less */
    size_t room = CONN_BODY_MAX - (c->body_bytes - cap0);
    int g = grow(&st->body, &st->body_cap, st->body_len + len,
                 room < SQ_SERVER_MAX_BODY ? room : SQ_SERVER_MAX_BODY);
    c->body_bytes += st->body_cap - cap0;
    if (g == -2)
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    if (g < 0) {
        st->too_big = 413;
        body_drop(st);
        return 0;
    }
    memcpy(st->body + st->body_len, data, len);
    st->body_len += len;
    return 0;
}

static int h_deferred_consume(nghttp3_conn *h, int64_t id, size_t n, void *cud, void *sud)
{
    SQ_UNUSED(h);
    SQ_UNUSED(sud);
    struct h3conn *c = cud;
    if (c->q) {
        ngtcp2_conn_extend_max_stream_offset(c->q, id, n);
        ngtcp2_conn_extend_max_offset(c->q, n);
    }
    return 0;
}

static int h_end_stream(nghttp3_conn *h, int64_t id, void *cud, void *sud)
{
    SQ_UNUSED(h);
    SQ_UNUSED(id);
    SQ_UNUSED(cud);
    struct h3stream *st = sud;
    if (!st || st->dispatched)
        return 0;
    return dispatch(st) < 0 ? NGHTTP3_ERR_CALLBACK_FAILURE : 0;
}

static int h_acked(nghttp3_conn *h, int64_t id, uint64_t n, void *cud, void *sud)
{
    SQ_UNUSED(h);
    SQ_UNUSED(id);
    SQ_UNUSED(cud);
    struct h3stream *st = sud;
    if (!st)
        return 0;
    st->acked += n;
    while (st->first && st->first != st->give && st->first_base + st->first->len <= st->acked) {
        struct chunk *k = st->first;
        st->first_base += k->len;
        st->first = k->next;
        free(k);
    }
    return 0;
}

static int h_stream_close(nghttp3_conn *h, int64_t id, uint64_t code, void *cud, void *sud)
{
    SQ_UNUSED(h);
    SQ_UNUSED(code);
    struct h3conn *c = cud;
    struct h3stream *st = sud;
    if (st) {
        stream_unlink(c, st);
        stream_free(st);
    }
    if (c->q && ngtcp2_is_bidi_stream(id) && !ngtcp2_conn_is_local_stream(c->q, id))
        ngtcp2_conn_extend_max_streams_bidi(c->q, 1);
    return 0;
}

static int h_stop_sending(nghttp3_conn *h, int64_t id, uint64_t code, void *cud, void *sud)
{
    SQ_UNUSED(h);
    SQ_UNUSED(sud);
    struct h3conn *c = cud;
    if (c->q)
        ngtcp2_conn_shutdown_stream_read(c->q, id, code);
    return 0;
}

static int h_reset_stream(nghttp3_conn *h, int64_t id, uint64_t code, void *cud, void *sud)
{
    SQ_UNUSED(h);
    SQ_UNUSED(sud);
    struct h3conn *c = cud;
    if (c->q)
        ngtcp2_conn_shutdown_stream_write(c->q, id, code);
    return 0;
}

/* c's nghttp3 server session, with the settings and limits every connection has (the fuzzer's
 * request path too); its streams are not bound yet. 0 or -1. */
static int h3_session_new(struct h3conn *c)
{
    static const nghttp3_callbacks cb = {
        .acked_stream_data = h_acked,
        .stream_close = h_stream_close,
        .recv_data = h_recv_data,
        .deferred_consume = h_deferred_consume,
        .begin_headers = h_begin_headers,
        .recv_header = h_recv_header,
        .stop_sending = h_stop_sending,
        .end_stream = h_end_stream,
        .reset_stream = h_reset_stream,
    };
    nghttp3_settings set;
    nghttp3_settings_default(&set);
    set.qpack_max_dtable_capacity = 4096;
    set.qpack_blocked_streams = 100;
    set.max_field_section_size = SQ_SERVER_MAX_HEAD * 2;
    if (nghttp3_conn_server_new(&c->h, &cb, &set, NULL, c) != 0)
        return -1;
    nghttp3_conn_set_max_client_streams_bidi(c->h, SQ_H3SRV_MAX_STREAMS);
    return 0;
}

static int setup_h3(struct h3conn *c)
{
    if (h3_session_new(c) < 0)
        return -1;
    int64_t ctrl, enc, dec;
    if (ngtcp2_conn_open_uni_stream(c->q, &ctrl, NULL) != 0 ||
        nghttp3_conn_bind_control_stream(c->h, ctrl) != 0 ||
        ngtcp2_conn_open_uni_stream(c->q, &enc, NULL) != 0 ||
        ngtcp2_conn_open_uni_stream(c->q, &dec, NULL) != 0 ||
        nghttp3_conn_bind_qpack_streams(c->h, enc, dec) != 0)
        return -1;
    return 0;
}

/* ---- ngtcp2 callbacks ---- */

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
    struct h3conn *c = ref->user_data;
    return c->q;
}

static void q_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    SQ_UNUSED(ctx);
    rand_bytes(dest, len);
}

static int q_new_cid(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t len, void *ud)
{
    SQ_UNUSED(q);
    struct h3conn *c = ud;
    rand_bytes(cid->data, len);
    cid->datalen = len;
    if (ngtcp2_crypto_generate_stateless_reset_token(token, c->s->secret, sizeof(c->s->secret),
                                                     cid) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    if (cid_add(c, cid->data, len) < 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_remove_cid(ngtcp2_conn *q, const ngtcp2_cid *cid, void *ud)
{
    SQ_UNUSED(q);
    cid_del(ud, cid->data, cid->datalen);
    return 0;
}

/* The handshake completed: counted when it resumed a session (and when its early data was
 * taken), and a session ticket goes out for the client's next connection. */
static int q_handshake_completed(ngtcp2_conn *q, void *ud)
{
    SQ_UNUSED(q);
    struct h3conn *c = ud;
    if (gnutls_session_is_resumed(c->tls))
        BUMP(c->s->n_resumed);
    if (gnutls_session_get_flags(c->tls) & GNUTLS_SFLAGS_EARLY_DATA)
        BUMP(c->s->n_early);
    if (gnutls_session_ticket_send(c->tls, 1, 0) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return !c->h && setup_h3(c) < 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int q_recv_stream_data(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t off,
                              const uint8_t *data, size_t len, void *ud, void *sud)
{
    SQ_UNUSED(sud);
    struct h3conn *c = ud;
    if ((flags & NGTCP2_STREAM_DATA_FLAG_EARLY) && off == 0 && (id & 3) == 0)
        BUMP(c->s->n_early_streams); /* a request stream begun in 0-RTT */
    if (!c->h && setup_h3(c) < 0)    /* 1-RTT data processed before the handshake's end */
        return NGTCP2_ERR_CALLBACK_FAILURE;
    nghttp3_ssize n =
        nghttp3_conn_read_stream(c->h, id, data, len, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
    if (n < 0) {
        ngtcp2_connection_close_error_set_application_error(
            &c->ccerr, nghttp3_err_infer_quic_app_error_code((int)n), NULL, 0);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    ngtcp2_conn_extend_max_stream_offset(q, id, (uint64_t)n);
    ngtcp2_conn_extend_max_offset(q, (uint64_t)n);
    return 0;
}

static int q_acked(ngtcp2_conn *q, int64_t id, uint64_t off, uint64_t len, void *ud, void *sud)
{
    SQ_UNUSED(q);
    SQ_UNUSED(off);
    SQ_UNUSED(sud);
    struct h3conn *c = ud;
    if (c->h && nghttp3_conn_add_ack_offset(c->h, id, len) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_stream_close(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t code, void *ud,
                          void *sud)
{
    SQ_UNUSED(q);
    SQ_UNUSED(sud);
    struct h3conn *c = ud;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
        code = NGHTTP3_H3_NO_ERROR;
    if (!c->h)
        return 0;
    int rv = nghttp3_conn_close_stream(c->h, id, code);
    if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND) {
        ngtcp2_connection_close_error_set_application_error(
            &c->ccerr, nghttp3_err_infer_quic_app_error_code(rv), NULL, 0);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    if (rv == NGHTTP3_ERR_STREAM_NOT_FOUND && ngtcp2_is_bidi_stream(id) &&
        !ngtcp2_conn_is_local_stream(c->q, id))
        ngtcp2_conn_extend_max_streams_bidi(c->q, 1);
    return 0;
}

static int q_stream_reset(ngtcp2_conn *q, int64_t id, uint64_t final, uint64_t code, void *ud,
                          void *sud)
{
    SQ_UNUSED(q);
    SQ_UNUSED(final);
    SQ_UNUSED(code);
    SQ_UNUSED(sud);
    struct h3conn *c = ud;
    if (c->h && nghttp3_conn_shutdown_stream_read(c->h, id) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_extend_max_remote_bidi(ngtcp2_conn *q, uint64_t max, void *ud)
{
    SQ_UNUSED(q);
    struct h3conn *c = ud;
    if (c->h)
        nghttp3_conn_set_max_client_streams_bidi(c->h, max);
    return 0;
}

static int q_extend_max_stream_data(ngtcp2_conn *q, int64_t id, uint64_t max, void *ud, void *sud)
{
    SQ_UNUSED(q);
    SQ_UNUSED(max);
    SQ_UNUSED(sud);
    struct h3conn *c = ud;
    if (c->h && nghttp3_conn_unblock_stream(c->h, id) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

/* ngtcp2_crypto's callbacks are set by fill_qcb: the library is loaded at run time
 * (base/h3lib.h), so its functions are no constants. */
static const ngtcp2_callbacks QCB = {
    .handshake_completed = q_handshake_completed,
    .recv_stream_data = q_recv_stream_data,
    .acked_stream_data_offset = q_acked,
    .stream_close = q_stream_close,
    .rand = q_rand,
    .get_new_connection_id = q_new_cid,
    .remove_connection_id = q_remove_cid,
    .stream_reset = q_stream_reset,
    .extend_max_remote_streams_bidi = q_extend_max_remote_bidi,
    .extend_max_stream_data = q_extend_max_stream_data,
};

/* QCB with ngtcp2_crypto's callbacks filled in. */
static void fill_qcb(ngtcp2_callbacks *cb)
{
    *cb = QCB;
    sq_h3lib_crypto_callbacks(cb);
    cb->recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
    cb->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
    cb->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
}

/* ---- connections ---- */

static void send_pkt(struct sq_h3srv *s, const struct h3conn *c, const uint8_t *p, size_t n)
{
    if (s->detached)
        return;
    /* a full socket drops the datagram: QUIC's loss recovery sends it again */
    (void)sendto(s->fd, p, n, MSG_DONTWAIT, (const struct sockaddr *)&c->remote, c->remote_len);
}

static void conn_free(struct h3conn *c)
{
    struct sq_h3srv *s = c->s;
    for (int i = 0; i < c->ncids; i++) {
        cid_unlink(s, c->own[i]);
        free(c->own[i]);
    }
    if (c->h)
        nghttp3_conn_del(c->h);
    if (c->q)
        ngtcp2_conn_del(c->q);
    if (c->tls)
        gnutls_deinit(c->tls);
    struct h3stream *st = c->streams;
    while (st) {
        struct h3stream *n = st->next;
        stream_free(st);
        st = n;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    atomic_store_explicit(&s->n_open, s->nconns, memory_order_relaxed);
    free(c);
}

/* Sends a CONNECTION_CLOSE (unless draining or told not to), then frees c. */
static void conn_close(struct h3conn *c, bool quietly)
{
    struct sq_h3srv *s = c->s;
    if (!quietly && c->q && !ngtcp2_conn_is_in_closing_period(c->q) &&
        !ngtcp2_conn_is_in_draining_period(c->q)) {
        ngtcp2_path_storage ps;
        ngtcp2_path_storage_zero(&ps);
        ngtcp2_pkt_info pi;
        ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->q, &ps.path, &pi, s->pkt,
                                                            sizeof(s->pkt), &c->ccerr, now_ts());
        if (n > 0)
            send_pkt(s, c, s->pkt, (size_t)n);
    }
    conn_free(c);
}

/* Sends c's run of packets in s->gbuf: one sendmsg with UDP_SEGMENT when there are several. A
 * GSO send the kernel refuses (EIO, EINVAL) turns GSO off and the run goes one by one. */
static void gso_flush(struct sq_h3srv *s, const struct h3conn *c)
{
    if (s->gn > 1 && !s->detached) {
        struct iovec iov = {s->gbuf, s->goff};
        union {
            struct cmsghdr h;
            uint8_t b[CMSG_SPACE(sizeof(uint16_t))];
        } cm;
        memset(&cm, 0, sizeof(cm));
        struct msghdr m = {.msg_name = (void *)&c->remote,
                           .msg_namelen = c->remote_len,
                           .msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = cm.b,
                           .msg_controllen = sizeof(cm.b)};
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = IPPROTO_UDP;
        h->cmsg_type = UDP_SEGMENT;
        h->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t seg = (uint16_t)s->gseg;
        memcpy(CMSG_DATA(h), &seg, sizeof(seg));
        if (sendmsg(s->fd, &m, MSG_DONTWAIT) >= 0 || (errno != EIO && errno != EINVAL)) {
            s->gn = 0;
            s->goff = 0;
            return; /* sent, or dropped (a full socket): QUIC's loss recovery sends it again */
        }
        s->gso = false;
    }
    for (size_t off = 0; s->gn > 0; s->gn--) { /* one by one: GSO off, or a single packet */
        size_t n = s->gn > 1 ? s->gseg : s->goff - off;
        send_pkt(s, c, s->gbuf + off, n);
        off += n;
    }
    s->goff = 0;
}

/* Adds the packet in s->pkt (n bytes) to c's run, sending the run first when the packet cannot
 * join it (longer than the run's packets, or the run full) and after it when it is shorter (a
 * shorter one ends a run: the kernel's rule). Without GSO, sends it at once. */
static void gso_add(struct sq_h3srv *s, const struct h3conn *c, size_t n)
{
    if (!s->gso) {
        send_pkt(s, c, s->pkt, n);
        return;
    }
    if (s->gn && (n > s->gseg || s->gn == GSO_MAX))
        gso_flush(s, c);
    if (!s->gn)
        s->gseg = n;
    memcpy(s->gbuf + s->goff, s->pkt, n);
    s->goff += n;
    s->gn++;
    if (n < s->gseg)
        gso_flush(s, c);
}

/* conn_write's loop: its packets go through gso_add. */
static int conn_write_run(struct h3conn *c)
{
    int sent = 0;
    struct sq_h3srv *s = c->s;
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    uint64_t ts = now_ts();
    for (int rounds = 0; rounds < 4096; rounds++) {
        int64_t sid = -1;
        int fin = 0;
        nghttp3_vec vec[16];
        nghttp3_ssize nv = 0;
        if (c->h && ngtcp2_conn_get_max_data_left(c->q)) {
            nv = nghttp3_conn_writev_stream(c->h, &sid, &fin, vec, SQ_ARRAY_LEN(vec));
            if (nv < 0) {
                ngtcp2_connection_close_error_set_application_error(
                    &c->ccerr, nghttp3_err_infer_quic_app_error_code((int)nv), NULL, 0);
                return -1;
            }
        }
        ngtcp2_ssize ndata = -1;
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
        if (fin)
            flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
        ngtcp2_ssize n =
            ngtcp2_conn_writev_stream(c->q, &ps.path, &pi, s->pkt, sizeof(s->pkt), &ndata, flags,
                                      sid, (const ngtcp2_vec *)vec, (size_t)nv, ts);
        if (n < 0) {
            switch (n) {
            case NGTCP2_ERR_STREAM_DATA_BLOCKED:
                nghttp3_conn_block_stream(c->h, sid);
                continue;
            case NGTCP2_ERR_STREAM_SHUT_WR:
                nghttp3_conn_shutdown_stream_write(c->h, sid);
                continue;
            case NGTCP2_ERR_WRITE_MORE:
                if (nghttp3_conn_add_write_offset(c->h, sid, (uint64_t)ndata) != 0)
                    return -1;
                continue;
            default:
                ngtcp2_connection_close_error_set_transport_error_liberr(&c->ccerr, (int)n, NULL,
                                                                         0);
                return -1;
            }
        }
        if (ndata >= 0 && c->h && nghttp3_conn_add_write_offset(c->h, sid, (uint64_t)ndata) != 0)
            return -1;
        if (n == 0)
            return sent;
        gso_add(s, c, (size_t)n);
        sent++;
    }
    return sent;
}

/* Writes what c has to send, its last run of packets included. Returns the datagrams sent, or -1
 * when c must close. */
static int conn_write(struct h3conn *c)
{
    int sent = conn_write_run(c);
    gso_flush(c->s, c);
    return sent;
}

static int conn_new(struct sq_h3srv *s, const ngtcp2_pkt_hd *hd, const struct sockaddr *from,
                    socklen_t fromlen, struct h3conn **out)
{
    struct h3conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -1;
    c->s = s;
    memcpy(&c->remote, from, fromlen);
    c->remote_len = fromlen;
    c->path = (ngtcp2_path){
        .local = {.addr = (ngtcp2_sockaddr *)&s->local, .addrlen = s->local_len},
        .remote = {.addr = (ngtcp2_sockaddr *)&c->remote, .addrlen = c->remote_len},
    };
    ngtcp2_connection_close_error_default(&c->ccerr);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    atomic_store_explicit(&s->n_open, s->nconns, memory_order_relaxed);
    *out = c;

    ngtcp2_cid scid = {.datalen = SCID_LEN};
    rand_bytes(scid.data, SCID_LEN);
    ngtcp2_settings set;
    ngtcp2_settings_default(&set);
    set.initial_ts = now_ts();
    set.handshake_timeout = (uint64_t)s->cfg.handshake_timeout_ns;
    ngtcp2_transport_params p;
    ngtcp2_transport_params_default(&p);
    p.initial_max_stream_data_bidi_local = STREAM_WINDOW;
    p.initial_max_stream_data_bidi_remote = STREAM_WINDOW;
    p.initial_max_stream_data_uni = STREAM_WINDOW;
    p.initial_max_data = CONN_WINDOW;
    p.initial_max_streams_bidi = SQ_H3SRV_MAX_STREAMS;
    p.initial_max_streams_uni = 3;
    p.max_idle_timeout = (uint64_t)s->cfg.idle_timeout_ns;
    p.active_connection_id_limit = 7;
    p.original_dcid = hd->dcid;
    p.stateless_reset_token_present = 1;
    if (ngtcp2_crypto_generate_stateless_reset_token(p.stateless_reset_token, s->secret,
                                                     sizeof(s->secret), &scid) != 0)
        return -1;
    ngtcp2_callbacks cb;
    fill_qcb(&cb);
    if (ngtcp2_conn_server_new(&c->q, &hd->scid, &scid, &c->path, hd->version, &cb, &set, &p, NULL,
                               c) != 0) {
        c->q = NULL;
        return -1;
    }
    if (cid_add(c, scid.data, scid.datalen) < 0 || cid_add(c, hd->dcid.data, hd->dcid.datalen) < 0)
        return -1;
    if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_ENABLE_EARLY_DATA | GNUTLS_NO_AUTO_SEND_TICKET |
                                 GNUTLS_NO_END_OF_EARLY_DATA) != 0) {
        c->tls = NULL;
        return -1;
    }
    gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
    c->ref = (ngtcp2_crypto_conn_ref){.get_conn = get_conn, .user_data = c};
    if (gnutls_priority_set(c->tls, s->prio) != 0 ||
        ngtcp2_crypto_gnutls_configure_server_session(c->tls) != 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, s->cred) != 0 ||
        gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0)
        return -1;
    /* session tickets and 0-RTT (RFC 9001 4.6.1: max_early_data_size is 0xffffffff in QUIC) */
    gnutls_datum_t key = {s->ticket_key, sizeof(s->ticket_key)};
    if (gnutls_session_ticket_enable_server(c->tls, &key) != 0 ||
        gnutls_record_set_max_early_data_size(c->tls, 0xffffffffu) != 0)
        return -1;
    gnutls_anti_replay_enable(c->tls, s->ar);
    gnutls_session_set_ptr(c->tls, &c->ref);
    ngtcp2_conn_set_tls_native_handle(c->q, c->tls);
    return 0;
}

static void on_datagram(struct sq_h3srv *s, uint8_t *p, size_t n, const struct sockaddr *from,
                        socklen_t fromlen)
{
    ngtcp2_version_cid vc;
    if (n == 0) { /* ngtcp2_pkt_decode_version_cid asserts on an empty packet */
        BUMP(s->n_dropped);
        return;
    }
    int rv = ngtcp2_pkt_decode_version_cid(&vc, p, n, SCID_LEN);
    if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
        if (n < 1200) { /* answer only what could be an Initial: no amplification */
            BUMP(s->n_dropped);
            return;
        }
        uint32_t sv[] = {NGTCP2_PROTO_VER_V1};
        uint8_t r;
        rand_bytes(&r, 1);
        ngtcp2_ssize k = ngtcp2_pkt_write_version_negotiation(
            s->pkt, sizeof(s->pkt), r, vc.scid, vc.scidlen, vc.dcid, vc.dcidlen, sv, 1);
        if (k > 0 && !s->detached)
            (void)sendto(s->fd, s->pkt, (size_t)k, MSG_DONTWAIT, from, fromlen);
        BUMP(s->n_dropped); /* answered, but no connection */
        return;
    }
    if (rv != 0) {
        BUMP(s->n_dropped);
        return;
    }
    struct h3conn *c = cid_find(s, vc.dcid, vc.dcidlen);
    bool fresh = !c;
    if (!c) {
        ngtcp2_pkt_hd hd;
        if (ngtcp2_accept(&hd, p, n) != 0) {
            BUMP(s->n_dropped);
            return;
        }
        if (s->nconns >= s->max_conns) {
            BUMP(s->n_refused);
            return;
        }
        if (conn_new(s, &hd, from, fromlen, &c) < 0) {
            if (c)
                conn_close(c, true);
            BUMP(s->n_dropped);
            return;
        }
    } else if (fromlen != c->remote_len || memcmp(from, &c->remote, fromlen) != 0) {
        /* another address (migration, or a spoof): out of scope; ngtcp2 validates paths, but
         * this server keeps one remote per connection */
        BUMP(s->n_dropped);
        return;
    }
    ngtcp2_pkt_info pi = {0};
    rv = ngtcp2_conn_read_pkt(c->q, &c->path, &pi, p, n, now_ts());
    if (rv != 0) {
        if (fresh)
            BUMP(s->n_dropped);
        if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_DROP_CONN) {
            conn_close(c, true);
            return;
        }
        if (rv == NGTCP2_ERR_CRYPTO)
            ngtcp2_connection_close_error_set_transport_error_tls_alert(
                &c->ccerr, ngtcp2_conn_get_tls_alert(c->q), NULL, 0);
        else if (c->ccerr.error_code == 0 &&
                 c->ccerr.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT)
            ngtcp2_connection_close_error_set_transport_error_liberr(&c->ccerr, rv, NULL, 0);
        conn_close(c, false);
        return;
    }
    int sent = conn_write(c);
    if (sent < 0) {
        conn_close(c, false);
    } else if (fresh && sent > 0) {
        BUMP(s->n_conns);
    } else if (fresh) {
        /* an Initial that took no decryption (forged, or garbage in an Initial's shape): a real
         * ClientHello is always answered, so nothing is kept for this one */
        conn_close(c, true);
        BUMP(s->n_dropped);
    }
}

/* Runs c's timers due at now. Returns 0, or -1 when c was freed. */
static int conn_timers(struct h3conn *c, int64_t now)
{
    if ((int64_t)ngtcp2_conn_get_expiry(c->q) <= now) {
        int rv = ngtcp2_conn_handle_expiry(c->q, (uint64_t)now);
        if (rv != 0) {
            conn_close(c, true); /* idle, handshake timeout, or the closing period over */
            return -1;
        }
    }
    for (struct h3stream *st = c->streams; st; st = st->next) {
        if (st->due_ns && !st->submitted && st->due_ns <= now) {
            if (submit(st) < 0) {
                conn_close(c, false);
                return -1;
            }
        }
        if (st->submitted && st->pace_fn && pace_due(st) <= now && pace_run(st, now) < 0) {
            ngtcp2_conn_shutdown_stream(c->q, st->id, NGHTTP3_H3_INTERNAL_ERROR);
            st->pace_fn = NULL;
        }
    }
    if (conn_write(c) < 0) {
        conn_close(c, false);
        return -1;
    }
    return 0;
}

static int64_t conn_next(struct h3conn *c)
{
    int64_t t = (int64_t)ngtcp2_conn_get_expiry(c->q);
    if (t < 0)
        t = INT64_MAX;
    for (struct h3stream *st = c->streams; st; st = st->next) {
        if (st->due_ns && !st->submitted && st->due_ns < t)
            t = st->due_ns;
        if (st->submitted) {
            int64_t d = pace_due(st);
            if (d < t)
                t = d;
        }
    }
    return t;
}

static int64_t run_timers(struct sq_h3srv *s)
{
    int64_t now = sq_now_ns(), next = INT64_MAX;
    struct h3conn *c = s->conns;
    while (c) {
        struct h3conn *n = c->next;
        if (conn_next(c) <= now && conn_timers(c, now) < 0) {
            c = n;
            continue;
        }
        int64_t t = conn_next(c);
        if (t < next)
            next = t;
        c = n;
    }
    return next;
}

static void *loop_main(void *arg)
{
    struct sq_h3srv *s = arg;
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        int64_t next = run_timers(s), now = sq_now_ns();
        int timeout = -1;
        if (next != INT64_MAX)
            timeout = next <= now ? 0 : (int)((next - now) / SQ_NS_PER_MS + 1);
        if (timeout > 1000)
            timeout = 1000;
        struct pollfd pf[2] = {{.fd = s->fd, .events = POLLIN}, {.fd = s->efd, .events = POLLIN}};
        if (poll(pf, 2, timeout) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        for (int i = 0; i < RECV_BATCH; i++) {
            struct sockaddr_storage from;
            socklen_t fl = sizeof(from);
            ssize_t n = recvfrom(s->fd, s->rbuf, sizeof(s->rbuf), MSG_DONTWAIT,
                                 (struct sockaddr *)&from, &fl);
            if (n < 0)
                break;
            if (n == 0) {
                BUMP(s->n_dropped);
                continue;
            }
            on_datagram(s, s->rbuf, (size_t)n, (struct sockaddr *)&from, fl);
        }
    }
    while (s->conns) {
        ngtcp2_connection_close_error_default(&s->conns->ccerr);
        conn_close(s->conns, s->conns->q == NULL);
    }
    return NULL;
}

/* ---- setup ---- */

/* GnuTLS's anti-replay store (called on the server's thread for each ClientHello that carries
 * early data inside the window): a key seen before and not expired is a replay, and its early
 * data is refused (the handshake goes on in 1-RTT). The table is bounded: a slot taken by
 * another live key is overwritten, so under more than SEEN_SLOTS 0-RTT handshakes per window
 * (10 s) a replay can slip through; a load target accepts that, never the memory. */
static int seen_add(void *ud, time_t exp, const gnutls_datum_t *key, const gnutls_datum_t *data)
{
    SQ_UNUSED(data);
    struct sq_h3srv *s = ud;
    uint64_t h = 1469598103934665603ull;
    for (unsigned i = 0; i < key->size; i++)
        h = (h ^ key->data[i]) * 1099511628211ull;
    struct seen *e = &s->seen[h % SEEN_SLOTS];
    if (e->h == h && e->exp >= time(NULL))
        return GNUTLS_E_DB_ENTRY_EXISTS;
    *e = (struct seen){h, exp};
    return 0;
}

static int creds(struct sq_h3srv *s, const struct sq_h3srv_config *cfg, const char **why)
{
    if (gnutls_certificate_allocate_credentials(&s->cred) != 0) {
        s->cred = NULL;
        return -ENOMEM;
    }
    if (!cfg->cert_pem || !cfg->key_pem) {
        *why = "no certificate";
        return -EINVAL;
    }
    gnutls_datum_t cd = {(unsigned char *)(uintptr_t)cfg->cert_pem,
                         (unsigned)strlen(cfg->cert_pem)},
                   kd = {(unsigned char *)(uintptr_t)cfg->key_pem, (unsigned)strlen(cfg->key_pem)};
    if (gnutls_certificate_set_x509_key_mem(s->cred, &cd, &kd, GNUTLS_X509_FMT_PEM) < 0) {
        *why = "GnuTLS cannot load the certificate and key";
        return -EINVAL;
    }
    if (gnutls_priority_init(&s->prio, PRIORITY, NULL) != 0) {
        s->prio = NULL;
        *why = "GnuTLS refuses the TLS 1.3 priority string";
        return -EINVAL;
    }
    rand_bytes(s->ticket_key, sizeof(s->ticket_key));
    if (gnutls_anti_replay_init(&s->ar) != 0) {
        s->ar = NULL;
        return -ENOMEM;
    }
    gnutls_anti_replay_set_add_function(s->ar, seen_add);
    gnutls_anti_replay_set_ptr(s->ar, s);
    return 0;
}

static int common_new(const struct sq_h3srv_config *cfg, struct sq_h3srv **out, const char **why)
{
    /* the libraries are loaded with the first server (target_cmd.c said why when they fail) */
    char buf[256];
    if (sq_h3lib_load(buf, sizeof(buf)) < 0) {
        *why = "the QUIC libraries (GnuTLS, ngtcp2, nghttp3) could not be loaded";
        return -ENOENT;
    }
    struct sq_h3srv *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->fd = s->efd = -1;
    s->cfg = *cfg;
    s->cfg.cert_pem = s->cfg.key_pem = NULL;
    s->max_conns = cfg->max_conns ? cfg->max_conns : SQ_H3SRV_MAX_CONNS_DEFAULT;
    if (!s->cfg.idle_timeout_ns)
        s->cfg.idle_timeout_ns = 60 * SQ_NS_PER_S;
    if (!s->cfg.handshake_timeout_ns)
        s->cfg.handshake_timeout_ns = 10 * SQ_NS_PER_S;
    rand_bytes(s->secret, sizeof(s->secret));
    *out = s;
    return creds(s, cfg, why);
}

bool sq_h3srv_available(void)
{
    return true;
}

int sq_h3srv_start(const struct sq_h3srv_config *cfg, struct sq_h3srv **out, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = NULL;
    struct sq_h3srv *s = NULL;
    int rc = common_new(cfg, &s, why);
    if (rc < 0)
        goto fail;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_DGRAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", (unsigned)cfg->port);
    if (getaddrinfo(cfg->host ? cfg->host : "127.0.0.1", port, &hints, &ai) != 0 || !ai) {
        *why = "cannot resolve the address";
        rc = -SQ_ERESOLVE;
        goto fail;
    }
    s->fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->fd < 0 || bind(s->fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        rc = -errno;
        freeaddrinfo(ai);
        goto fail;
    }
    freeaddrinfo(ai);
    int buf = 4 << 20;
    (void)setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    (void)setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    /* UDP GSO where the kernel knows it (Linux 4.18 on), unless SQUALL_UDP_BATCH says off or
     * nogso (docs/target.md) */
    const char *ub = getenv("SQUALL_UDP_BATCH");
    int gv = 0;
    socklen_t gl = sizeof(gv);
    s->gso = (!ub || (strcmp(ub, "off") != 0 && strcmp(ub, "nogso") != 0)) &&
             getsockopt(s->fd, IPPROTO_UDP, UDP_SEGMENT, &gv, &gl) == 0;
    s->local_len = sizeof(s->local);
    if (getsockname(s->fd, (struct sockaddr *)&s->local, &s->local_len) < 0) {
        rc = -errno;
        goto fail;
    }
    s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->efd < 0) {
        rc = -errno;
        goto fail;
    }
    rc = -pthread_create(&s->thr, NULL, loop_main, s);
    if (rc < 0)
        goto fail;
    s->started = true;
    *out = s;
    return 0;
fail:
    sq_h3srv_free(s);
    *out = NULL;
    return rc;
}

void sq_h3srv_stop(struct sq_h3srv *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, true);
    if (s->efd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(s->efd, &one, sizeof(one));
        (void)w;
    }
}

void sq_h3srv_free(struct sq_h3srv *s)
{
    if (!s)
        return;
    if (s->started) {
        sq_h3srv_stop(s);
        pthread_join(s->thr, NULL);
    }
    while (s->conns)
        conn_close(s->conns, true);
    if (s->fd >= 0)
        close(s->fd);
    if (s->efd >= 0)
        close(s->efd);
    if (s->prio)
        gnutls_priority_deinit(s->prio);
    if (s->cred)
        gnutls_certificate_free_credentials(s->cred);
    if (s->ar)
        gnutls_anti_replay_deinit(s->ar);
    free(s);
}

void sq_h3srv_counts(const struct sq_h3srv *s, struct sq_h3srv_counts *out)
{
    *out = (struct sq_h3srv_counts){
        .conns = atomic_load_explicit(&s->n_conns, memory_order_relaxed),
        .requests = atomic_load_explicit(&s->n_requests, memory_order_relaxed),
        .streams = atomic_load_explicit(&s->n_streams, memory_order_relaxed),
        .refused = atomic_load_explicit(&s->n_refused, memory_order_relaxed),
        .dropped = atomic_load_explicit(&s->n_dropped, memory_order_relaxed),
        .open = atomic_load_explicit(&s->n_open, memory_order_relaxed),
        .resumed = atomic_load_explicit(&s->n_resumed, memory_order_relaxed),
        .early = atomic_load_explicit(&s->n_early, memory_order_relaxed),
        .early_streams = atomic_load_explicit(&s->n_early_streams, memory_order_relaxed),
    };
}

int sq_h3srv_new_detached(const struct sq_h3srv_config *cfg, struct sq_h3srv **out)
{
    const char *why = NULL;
    struct sq_h3srv *s = NULL;
    int rc = common_new(cfg, &s, &why);
    if (rc < 0) {
        sq_h3srv_free(s);
        *out = NULL;
        return rc;
    }
    s->detached = true;
    struct sockaddr_in *l = (struct sockaddr_in *)&s->local;
    l->sin_family = AF_INET;
    l->sin_port = htons(cfg->port);
    l->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->local_len = sizeof(*l);
    *out = s;
    return 0;
}

void sq_h3srv_feed(struct sq_h3srv *s, const uint8_t *p, size_t n, uint16_t port)
{
    struct sockaddr_in from = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (n > sizeof(s->rbuf))
        n = sizeof(s->rbuf);
    memcpy(s->rbuf, p, n);
    on_datagram(s, s->rbuf, n, (struct sockaddr *)&from, sizeof(from));
    (void)run_timers(s);
}

/* The request path without QUIC: a bare nghttp3 server session whose streams take the input
 * (see h3srv.h). */
void sq_h3srv_fuzz_request(struct sq_h3srv *s, const uint8_t *p, size_t n)
{
    struct h3conn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->s = s;
    if (h3_session_new(c) < 0) {
        free(c);
        return;
    }
    if (nghttp3_conn_bind_control_stream(c->h, 3) != 0 ||
        nghttp3_conn_bind_qpack_streams(c->h, 7, 11) != 0)
        goto out;
    /* the client's control stream: its type and an empty SETTINGS frame */
    static const uint8_t ctrl[] = {0x00, 0x04, 0x00};
    if (nghttp3_conn_read_stream(c->h, 2, ctrl, sizeof(ctrl), 0) < 0)
        goto out;
    /* the input: pieces "stream selector, length, bytes" onto request streams 0, 4, 8, 12 and
     * the client's QPACK streams; the last piece of a request stream ends it */
    size_t i = 0;
    while (i + 2 <= n) {
        uint8_t sel = p[i], len = p[i + 1];
        i += 2;
        size_t k = len < n - i ? len : n - i;
        int64_t ids[] = {0, 4, 8, 12, 6, 10};
        int64_t id = ids[(sel & 0x7f) % SQ_ARRAY_LEN(ids)];
        int fin = (sel & 0x80) && ngtcp2_is_bidi_stream(id);
        if (nghttp3_conn_read_stream(c->h, id, p + i, k, fin) < 0)
            goto out;
        i += k;
        /* answers: due ones now, paced pieces now, everything pulled and acknowledged */
        for (struct h3stream *st = c->streams; st; st = st->next) {
            if (st->due_ns && !st->submitted && submit(st) < 0)
                goto out;
            if (st->submitted && st->pace_fn && pace_run(st, INT64_MAX / 4) < 0)
                st->pace_fn = NULL;
        }
        for (int r = 0; r < 256; r++) {
            int64_t sid = -1;
            int f = 0;
            nghttp3_vec vec[16];
            nghttp3_ssize nv = nghttp3_conn_writev_stream(c->h, &sid, &f, vec, 16);
            if (nv < 0)
                goto out;
            if (sid < 0)
                break;
            size_t tot = 0;
            for (nghttp3_ssize v = 0; v < nv; v++)
                tot += vec[v].len;
            if (nghttp3_conn_add_write_offset(c->h, sid, tot) != 0 ||
                nghttp3_conn_add_ack_offset(c->h, sid, tot) != 0)
                goto out;
            if (!tot && !f)
                break;
        }
    }
out:
    nghttp3_conn_del(c->h);
    c->h = NULL;
    while (c->streams) {
        struct h3stream *st = c->streams;
        c->streams = st->next;
        stream_free(st);
    }
    free(c);
}

#endif
