/* target/inbox.c - `squall inbox`: captures requests into a bounded ring and serves them back
 * under /_inbox/ (target/inbox.h).
 *
 * A capture is one allocation: its JSON head (seq, time, method, path, client, headers, body
 * length, truncation) rendered once on arrival, its path (for filters and the per-path counts)
 * and its raw body (at most max_body bytes; escaped when listed, so a stored body costs its own
 * size, not six times it). The ring is indexed by sequence number: it always holds the
 * `stored` most recent captures, seq next_seq - stored .. next_seq - 1, at ring[seq % cap], so
 * a reader's "since" cursor finds its place without a search. One mutex guards the ring, the
 * counts and the path table; the API handlers render under it into their worker's own scratch
 * buffer (bounded by SQ_INBOX_LIST_BYTES), which the server copies before the handler returns.
 *
 * SSE readers (/_inbox/stream) are the server's streamed bodies: one piece every 100 ms carries
 * the summaries of the captures since that reader's cursor ("capture" events), or, when more
 * than a few wait (a piece holds 1 KiB), one "batch" event naming their range, which the reader
 * fetches from /_inbox/captures; or nothing (a comment every 10 s keeps proxies awake). A reader's
 * cursor lives in one of SQ_INBOX_MAX_STREAMS slots; the server tells nobody when a streaming
 * client leaves, so a slot whose pieces stopped being asked for 10 s ago is taken back.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/buf.h"
#include "base/clock.h"
#include "proto/stamp.h"
#include "server/server.h"
#include "sink/sink.h"
#include "stats/hist.h"
#include "target/inbox.h"
#include "target/target.h"

#define STREAM_INTERVAL_NS (100LL * 1000 * 1000)
#define STREAM_IDLE_NS     (10LL * 1000 * 1000 * 1000)
#define KEEPALIVE_EVERY    100 /* empty pieces between two comments (10 s) */
#define BATCH_OVER         3   /* captures waiting past which one batch event names them */

struct cap {
    uint64_t seq;
    char *head; /* the JSON object's members but the body: "\"seq\":1,...,\"truncated\":false" */
    size_t head_len;
    char *path; /* without the query */
    size_t path_len;
    char *body;
    size_t body_len; /* kept (<= max_body) */
};

struct path_stat {
    char *path; /* NULL: free */
    uint64_t count, bytes;
    int64_t first_ms, last_ms;
    uint64_t stamped, duplicates, out_of_order;
    struct sq_hist *lat; /* end-to-end latency of the stamped ones delivered, us; NULL: none yet */
};

struct slot {
    struct sq_inbox *inbox;
    bool used;
    uint64_t cursor; /* the last seq sent */
    unsigned empty;  /* empty pieces since the last comment */
    _Atomic int64_t seen_ns;
};

struct sq_inbox {
    struct sq_server *srv;
    struct sq_inbox_config cfg;
    pthread_mutex_t mu;
    struct cap **ring;
    uint32_t cap;
    uint64_t next_seq, stored, evicted, truncated, cleared, captured;
    struct path_stat *paths; /* open addressing, SQ_INBOX_MAX_PATHS * 2 buckets */
    size_t npaths;
    struct path_stat other;
    struct slot slots[SQ_INBOX_MAX_STREAMS];
    struct sq_buf *scratch; /* one per worker */
    int threads;
    struct sq_sink *ledger; /* the stamps' matching (sink/sink.h) */
    char *find;             /* its find spec: NULL (scan) or "header:NAME" */
    uint64_t stamped, unmatched;
    size_t nlat;
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Appends s[0, n) JSON-escaped (no quotes). */
static int put_esc(struct sq_buf *b, const char *s, size_t n)
{
    if (sq_buf_reserve(b, 6 * n + 1) < 0)
        return -ENOMEM;
    b->len += sq_target_json_escape(b->p + b->len, b->cap - b->len, s, n);
    return 0;
}

static int put_str(struct sq_buf *b, const char *s)
{
    return sq_buf_append(b, s, strlen(s));
}

/* v in decimal. */
static int put_u64(struct sq_buf *b, uint64_t v)
{
    char t[24];
    size_t n = 0;
    do {
        t[sizeof(t) - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return sq_buf_append(b, t + sizeof(t) - n, n);
}

#define PUT_MAX 256 /* the longest text one put may add: a longer one is cut there */

/* ---- the per-path table ---- */

static uint64_t hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

/* Under mu. */
static struct path_stat *path_stat(struct sq_inbox *b, const char *p, size_t n)
{
    size_t nb = SQ_INBOX_MAX_PATHS * 2;
    for (size_t i = hash(p, n) % nb;; i = (i + 1) % nb) {
        struct path_stat *s = &b->paths[i];
        if (!s->path) {
            if (b->npaths == SQ_INBOX_MAX_PATHS || !(s->path = strndup(p, n)))
                return &b->other;
            b->npaths++;
            return s;
        }
        if (strlen(s->path) == n && memcmp(s->path, p, n) == 0)
            return s;
    }
}

/* ---- capturing ---- */

static void client_addr(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    out[0] = '\0';
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
        return;
    char host[INET6_ADDRSTRLEN] = "";
    unsigned port = 0;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        port = ntohs(a->sin_port);
        snprintf(out, cap, "%s:%u", host, port);
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        port = ntohs(a->sin6_port);
        snprintf(out, cap, "[%s]:%u", host, port);
    }
}

/* A stamp's run field as the stamp spells it (at most 13 characters). */
static void run_text(uint64_t run, char out[16])
{
    struct sq_stamp st = {.run = run};
    char tmp[SQ_STAMP_MAX + 1];
    size_t n = sq_stamp_format(&st, tmp);
    tmp[n] = '\0';
    const char *a = tmp + SQ_STAMP_PREFIX_LEN, *dot = strchr(a, '.');
    size_t l = dot ? (size_t)(dot - a) : strlen(a);
    if (l > 15)
        l = 15;
    memcpy(out, a, l);
    out[l] = '\0';
}

/* A stamped capture on path ps: its counts and latency. Under mu. */
static void matched(struct sq_inbox *b, struct path_stat *ps, const struct sq_sink_hit *hit)
{
    b->stamped++;
    ps->stamped++;
    if (hit->unmatched) {
        b->unmatched++;
        return;
    }
    if (hit->duplicate) {
        ps->duplicates++;
        return;
    }
    ps->out_of_order += hit->out_of_order;
    struct path_stat *into = ps;
    if (!ps->lat && b->nlat >= SQ_INBOX_MAX_LATENCY_PATHS)
        into = &b->other; /* past the cap, the paths share (other)'s histogram */
    if (!into->lat) {
        /* 2 significant digits: 26 KiB a path, 1 us .. 1 h */
        if (sq_hist_new(1, 3600LL * 1000 * 1000, 2, &into->lat) < 0)
            return;
        b->nlat++;
    }
    sq_hist_record(into->lat, hit->latency_ns / 1000);
}

static void cap_free(struct cap *c)
{
    free(c); /* one allocation */
}

static void capture(struct sq_inbox *b, const struct sq_server_req *req, struct sq_buf *s)
{
    int64_t now = wall_ms();
    size_t kept = req->body_len < b->cfg.max_body ? req->body_len : b->cfg.max_body;
    bool trunc = kept < req->body_len;
    /* the path is not NUL-terminated (the body may follow it in the same buffer) */
    const char *qm = memchr(req->path, '?', req->path_len);
    size_t plen = qm ? (size_t)(qm - req->path) : req->path_len;
    char client[80];
    client_addr(req->fd, client, sizeof(client));
    struct sq_sink_field fields[SQ_SERVER_MAX_HEADERS];
    size_t nf = req->num_headers < SQ_SERVER_MAX_HEADERS ? req->num_headers : SQ_SERVER_MAX_HEADERS;
    for (size_t i = 0; i < nf; i++)
        fields[i] = (struct sq_sink_field){req->headers[i].name, req->headers[i].value,
                                           req->headers[i].name_len, req->headers[i].value_len};
    /* The path's counts first: a stream the stamp makes has its home there (the ledger keeps
     * it with the stream, and forgets both when it evicts the stream). */
    pthread_mutex_lock(&b->mu);
    struct path_stat *ps = path_stat(b, req->path, plen);
    pthread_mutex_unlock(&b->mu);
    struct sq_sink_hit hit;
    sq_sink_record(b->ledger, req->body, req->body_len, fields, nf, ps, &hit);

    /* The head without seq (known under the lock): rendered here, outside it. */
    sq_buf_reset(s);
    int rc = put_str(s, ",\"time_ms\":");
    rc |= sq_buf_printf(s, PUT_MAX, "%lld", (long long)now);
    rc |= put_str(s, ",\"method\":\"");
    rc |= put_esc(s, req->method, req->method_len);
    rc |= put_str(s, "\",\"path\":\"");
    rc |= put_esc(s, req->path, req->path_len);
    rc |= put_str(s, "\",\"client\":\"");
    rc |= put_str(s, client);
    rc |= put_str(s, "\",\"version\":\"");
    rc |= put_str(s, req->h2 ? "HTTP/2" : req->minor_version ? "HTTP/1.1" : "HTTP/1.0");
    if (hit.stamped) { /* by hand: snprintf cost ~1,500 instructions a capture here */
        char run[16];
        run_text(hit.run, run);
        rc |= put_str(s, "\",\"stamp\":{\"stream\":\"");
        rc |= put_str(s, run);
        rc |= put_str(s, "\",\"seq\":");
        rc |= put_u64(s, hit.seq);
        rc |= put_str(s, ",\"latency_us\":");
        rc |= put_u64(s, (uint64_t)(hit.latency_ns / 1000));
        rc |= put_str(s, hit.duplicate ? ",\"duplicate\":true" : ",\"duplicate\":false");
        rc |= put_str(s, hit.out_of_order ? ",\"out_of_order\":true" : ",\"out_of_order\":false");
        rc |= put_str(s, hit.unmatched ? ",\"unmatched\":true}" : "}");
        rc |= put_str(s, ",\"headers\":[");
    } else {
        rc |= put_str(s, "\",\"stamp\":null,\"headers\":[");
    }
    for (size_t i = 0; i < req->num_headers; i++) {
        const struct sq_h1_header *h = &req->headers[i];
        rc |= put_str(s, i ? ",[\"" : "[\"");
        rc |= put_esc(s, h->name, h->name_len);
        rc |= put_str(s, "\",\"");
        rc |= put_esc(s, h->value, h->value_len);
        rc |= put_str(s, "\"]");
    }
    rc |= sq_buf_printf(s, PUT_MAX, "],\"body_len\":%zu,\"truncated\":%s", req->body_len,
                        trunc ? "true" : "false");
    if (rc)
        return;

    char seqtxt[32];
    size_t head_max = sizeof(seqtxt) + 8 + s->len;
    struct cap *c = malloc(sizeof(*c) + head_max + plen + 1 + kept);
    if (!c)
        return;
    c->head = (char *)(c + 1);
    c->path = c->head + head_max;
    c->body = c->path + plen + 1;
    memcpy(c->path, req->path, plen);
    c->path[plen] = '\0';
    c->path_len = plen;
    if (kept)
        memcpy(c->body, req->body, kept);
    c->body_len = kept;

    pthread_mutex_lock(&b->mu);
    c->seq = b->next_seq++;
    int n = snprintf(c->head, head_max, "\"seq\":%llu", (unsigned long long)c->seq);
    memcpy(c->head + n, s->p, s->len);
    c->head_len = (size_t)n + s->len;
    struct cap **slot = &b->ring[c->seq % b->cap];
    if (b->stored == b->cap) {
        cap_free(*slot);
        b->evicted++;
        b->stored--;
    }
    *slot = c;
    b->stored++;
    b->captured++;
    b->truncated += trunc;
    if (!ps->count)
        ps->first_ms = now;
    ps->count++;
    ps->bytes += req->body_len;
    ps->last_ms = now;
    if (hit.stamped)
        matched(b, ps, &hit);
    pthread_mutex_unlock(&b->mu);
}

/* ---- the API ---- */

/* The value of query parameter name in path (percent-decoded into out). False when absent. */
static bool query_param(const char *path, size_t len, const char *name, char *out, size_t cap)
{
    const char *q = memchr(path, '?', len);
    if (!q)
        return false;
    size_t nl = strlen(name);
    const char *end = path + len;
    for (const char *p = q + 1; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        if ((size_t)(e - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == '=') {
            size_t o = 0;
            for (const char *v = p + nl + 1; v < e && o + 1 < cap; v++) {
                if (*v == '%' && e - v >= 3) {
                    char hx[3] = {v[1], v[2], 0};
                    char *ep;
                    long x = strtol(hx, &ep, 16);
                    if (*ep == '\0') {
                        out[o++] = (char)x;
                        v += 2;
                        continue;
                    }
                }
                out[o++] = *v == '+' ? ' ' : *v;
            }
            out[o] = '\0';
            return true;
        }
        p = e + 1;
    }
    return false;
}

/* The oldest seq in the ring. Under mu. */
static uint64_t oldest(const struct sq_inbox *b)
{
    return b->next_seq - b->stored;
}

int sq_inbox_list(struct sq_inbox *b, uint64_t since, const char *prefix, uint64_t limit,
                  struct sq_buf *s)
{
    size_t pfl = prefix ? strlen(prefix) : 0;
    if (limit == 0 || limit > SQ_INBOX_LIST_MAX)
        limit = SQ_INBOX_LIST_MAX;
    sq_buf_reset(s);
    int rc = put_str(s, "{\"captures\":[");
    pthread_mutex_lock(&b->mu);
    uint64_t seq = since + 1 > oldest(b) ? since + 1 : oldest(b);
    uint64_t n = 0, next = since;
    for (; seq < b->next_seq && n < limit && s->len < SQ_INBOX_LIST_BYTES && !rc; seq++) {
        const struct cap *c = b->ring[seq % b->cap];
        next = seq;
        if (pfl && (c->path_len < pfl || memcmp(c->path, prefix, pfl) != 0))
            continue;
        rc |= put_str(s, n ? ",{" : "{");
        rc |= sq_buf_append(s, c->head, c->head_len);
        rc |= put_str(s, ",\"body\":\"");
        rc |= put_esc(s, c->body, c->body_len);
        rc |= put_str(s, "\"}");
        n++;
    }
    if (seq == b->next_seq && b->next_seq > 1)
        next = b->next_seq - 1 > since ? b->next_seq - 1 : since;
    rc |=
        sq_buf_printf(s, PUT_MAX, "],\"next\":%llu,\"more\":%s,\"oldest\":%llu,\"evicted\":%llu}\n",
                      (unsigned long long)next, seq < b->next_seq ? "true" : "false",
                      (unsigned long long)oldest(b), (unsigned long long)b->evicted);
    pthread_mutex_unlock(&b->mu);
    return rc ? -ENOMEM : 0;
}

static void list(struct sq_inbox *b, const struct sq_server_req *req, struct sq_buf *s,
                 struct sq_server_resp *resp)
{
    char v[512];
    uint64_t since = 0, limit = SQ_INBOX_LIST_DEFAULT;
    if (query_param(req->path, req->path_len, "since", v, sizeof(v)) &&
        !sq_target_parse_u64(v, strlen(v), UINT64_MAX / 2, &since)) {
        resp->status = 400;
        resp->body = "since: not a sequence number\n";
        return;
    }
    if (query_param(req->path, req->path_len, "limit", v, sizeof(v)) &&
        (!sq_target_parse_u64(v, strlen(v), SQ_INBOX_LIST_MAX, &limit) || limit == 0)) {
        resp->status = 400;
        resp->body = "limit: not a count (1..1000)\n";
        return;
    }
    char pf[512];
    bool filter = query_param(req->path, req->path_len, "path", pf, sizeof(pf));
    if (sq_inbox_list(b, since, filter ? pf : NULL, limit, s) < 0) {
        resp->status = 500;
        resp->body = "out of memory\n";
        return;
    }
    resp->content_type = "application/json";
    resp->body = s->p;
    resp->body_len = s->len;
}

static void clear(struct sq_inbox *b, struct sq_buf *s, struct sq_server_resp *resp)
{
    pthread_mutex_lock(&b->mu);
    uint64_t n = b->stored;
    for (uint64_t seq = oldest(b); seq < b->next_seq; seq++) {
        cap_free(b->ring[seq % b->cap]);
        b->ring[seq % b->cap] = NULL;
    }
    b->stored = 0;
    b->cleared += n;
    pthread_mutex_unlock(&b->mu);
    sq_buf_reset(s);
    if (sq_buf_printf(s, PUT_MAX, "{\"cleared\":%llu}\n", (unsigned long long)n) == 0) {
        resp->content_type = "application/json";
        resp->body = s->p;
        resp->body_len = s->len;
    }
}

struct stream_list {
    struct sq_sink_stream_counts *v;
    size_t n, cap;
    bool oom;
};

static void add_stream(void *ud, const struct sq_sink_stream_counts *c)
{
    struct stream_list *l = ud;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct sq_sink_stream_counts *v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *c;
}

static int put_latency(struct sq_buf *s, const struct sq_hist *h)
{
    int64_t n = h ? sq_hist_total(h) : 0;
    if (!n)
        return put_str(s, "null");
    return sq_buf_printf(
        s, PUT_MAX,
        "{\"count\":%lld,\"p50_us\":%lld,\"p90_us\":%lld,\"p99_us\":%lld,\"max_us\":%lld}",
        (long long)n, (long long)sq_hist_percentile(h, 50), (long long)sq_hist_percentile(h, 90),
        (long long)sq_hist_percentile(h, 99), (long long)sq_hist_max(h));
}

static void stats(struct sq_inbox *b, struct sq_buf *s, struct sq_server_resp *resp)
{
    sq_buf_reset(s);
    /* the ledger's streams first (its own atomics, no lock of ours) */
    struct stream_list sl = {0};
    sq_sink_streams(b->ledger, add_stream, &sl);
    struct sq_sink_ledger_counts lc;
    sq_sink_ledger_counts(b->ledger, &lc);
    size_t nb = SQ_INBOX_MAX_PATHS * 2;
    uint64_t *miss = calloc(nb + 1, sizeof(*miss)); /* per path bucket, (other) last */
    if (sl.oom || !miss) {
        free(sl.v);
        free(miss);
        return;
    }
    pthread_mutex_lock(&b->mu);
    int rc = sq_buf_printf(
        s, PUT_MAX,
        "{\"captured\":%llu,\"stored\":%llu,\"evicted\":%llu,\"truncated\":%llu,"
        "\"cleared\":%llu,\"next_seq\":%llu,\"max_captures\":%u,\"max_body\":%zu,",
        (unsigned long long)b->captured, (unsigned long long)b->stored,
        (unsigned long long)b->evicted, (unsigned long long)b->truncated,
        (unsigned long long)b->cleared, (unsigned long long)b->next_seq, b->cap, b->cfg.max_body);
    rc |= put_str(s, "\"stamp\":\"");
    rc |= put_esc(s, b->find ? b->find : "scan", strlen(b->find ? b->find : "scan"));
    rc |= sq_buf_printf(s, PUT_MAX,
                        "\",\"stamped\":%llu,\"unmatched\":%llu,\"streams_evicted\":%llu,"
                        "\"ledger_bytes\":%llu,\"ledger_max_bytes\":%llu,\"streams\":[",
                        (unsigned long long)b->stamped, (unsigned long long)b->unmatched,
                        (unsigned long long)lc.evicted, (unsigned long long)lc.bytes,
                        (unsigned long long)lc.max_bytes);
    for (size_t i = 0; i < sl.n && !rc; i++) {
        const struct sq_sink_stream_counts *c = &sl.v[i];
        const struct path_stat *h = c->tag; /* the path the stream was first seen on */
        const char *path = h ? (h == &b->other ? "(other)" : h->path) : NULL;
        if (h)
            miss[h == &b->other ? nb : (size_t)(h - b->paths)] += c->missing;
        rc |= sq_buf_printf(s, PUT_MAX,
                            "%s{\"stream\":\"%s\",\"received\":%llu,\"duplicates\":%llu,"
                            "\"out_of_order\":%llu,\"missing\":%llu,\"highest_seq\":%lld,\"path\":",
                            i ? "," : "", c->run_text, (unsigned long long)c->delivered,
                            (unsigned long long)c->duplicates, (unsigned long long)c->out_of_order,
                            (unsigned long long)c->missing, (long long)c->highest);
        if (path) {
            rc |= put_str(s, "\"");
            rc |= put_esc(s, path, strlen(path));
            rc |= put_str(s, "\"}");
        } else {
            rc |= put_str(s, "null}");
        }
    }
    rc |= put_str(s, "],\"paths\":{");
    bool first = true;
    for (size_t i = 0; i <= nb && !rc; i++) {
        const struct path_stat *p = i < nb ? &b->paths[i] : &b->other;
        const char *name = i < nb ? p->path : "(other)";
        if (!name || !p->count)
            continue;
        rc |= put_str(s, first ? "\"" : ",\"");
        rc |= put_esc(s, name, strlen(name));
        rc |= sq_buf_printf(
            s, PUT_MAX,
            "\":{\"count\":%llu,\"bytes\":%llu,\"first_ms\":%lld,\"last_ms\":%lld,"
            "\"stamped\":%llu,\"duplicates\":%llu,\"out_of_order\":%llu,\"missing\":%llu,"
            "\"latency\":",
            (unsigned long long)p->count, (unsigned long long)p->bytes, (long long)p->first_ms,
            (long long)p->last_ms, (unsigned long long)p->stamped,
            (unsigned long long)p->duplicates, (unsigned long long)p->out_of_order,
            (unsigned long long)miss[i]);
        rc |= put_latency(s, p->lat);
        rc |= put_str(s, "}");
        first = false;
    }
    pthread_mutex_unlock(&b->mu);
    free(sl.v);
    free(miss);
    rc |= put_str(s, "}}\n");
    if (rc)
        return;
    resp->content_type = "application/json";
    resp->body = s->p;
    resp->body_len = s->len;
}

/* One SSE piece: the summaries of the captures after the slot's cursor that fit. */
static size_t stream_piece(void *ud, uint32_t seq, uint32_t count, char *buf, size_t cap)
{
    struct slot *sl = ud;
    struct sq_inbox *b = sl->inbox;
    atomic_store_explicit(&sl->seen_ns, sq_now_ns(), memory_order_relaxed);
    size_t len = 0;
    pthread_mutex_lock(&b->mu);
    uint64_t from = sl->cursor + 1 > oldest(b) ? sl->cursor + 1 : oldest(b);
    bool batched = from < b->next_seq && b->next_seq - from > BATCH_OVER;
    if (batched) {
        /* More waiting than a piece holds one by one: one event names them all, and the reader
         * fetches them from /_inbox/captures?since=FIRST-1. */
        int n = snprintf(buf, cap,
                         "id: %llu\nevent: batch\ndata: {\"first\":%llu,\"last\":%llu,"
                         "\"count\":%llu}\n\n",
                         (unsigned long long)(b->next_seq - 1), (unsigned long long)from,
                         (unsigned long long)(b->next_seq - 1),
                         (unsigned long long)(b->next_seq - from));
        len = (size_t)n;
        sl->cursor = b->next_seq - 1;
    }
    for (uint64_t q = from; !batched && q < b->next_seq; q++) {
        const struct cap *c = b->ring[q % b->cap];
        /* The head's first members up to the headers: seq, time, method, path, client. */
        const char *hdrs = strstr(c->head, ",\"headers\":");
        size_t hl = hdrs ? (size_t)(hdrs - c->head) : c->head_len;
        char ev[1024];
        int n =
            snprintf(ev, sizeof(ev), "id: %llu\nevent: capture\ndata: {%.*s,\"body_kept\":%zu}\n\n",
                     (unsigned long long)c->seq, (int)hl, c->head, c->body_len);
        if (n < 0 || (size_t)n >= sizeof(ev)) { /* a head too long for one piece: seq alone */
            n = snprintf(ev, sizeof(ev), "id: %llu\nevent: capture\ndata: {\"seq\":%llu}\n\n",
                         (unsigned long long)c->seq, (unsigned long long)c->seq);
        }
        if (len + (size_t)n > cap)
            break;
        memcpy(buf + len, ev, (size_t)n);
        len += (size_t)n;
        sl->cursor = c->seq;
    }
    if (len == 0 && b->next_seq - 1 > sl->cursor && b->stored == 0)
        sl->cursor = b->next_seq - 1; /* cleared meanwhile */
    pthread_mutex_unlock(&b->mu);
    if (len == 0 && ++sl->empty >= KEEPALIVE_EVERY) {
        sl->empty = 0;
        static const char ka[] = ": keep-alive\n\n";
        memcpy(buf, ka, sizeof(ka) - 1);
        len = sizeof(ka) - 1;
    }
    if (seq + 1 == count) { /* the last piece: the slot is free again */
        pthread_mutex_lock(&b->mu);
        sl->used = false;
        pthread_mutex_unlock(&b->mu);
    }
    return len;
}

static void stream(struct sq_inbox *b, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    char v[64];
    uint64_t since = UINT64_MAX;
    if (query_param(req->path, req->path_len, "since", v, sizeof(v)) &&
        !sq_target_parse_u64(v, strlen(v), UINT64_MAX / 2, &since)) {
        resp->status = 400;
        resp->body = "since: not a sequence number\n";
        return;
    }
    int64_t now = sq_now_ns();
    struct slot *sl = NULL;
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < SQ_INBOX_MAX_STREAMS && !sl; i++) {
        struct slot *x = &b->slots[i];
        if (!x->used ||
            now - atomic_load_explicit(&x->seen_ns, memory_order_relaxed) > STREAM_IDLE_NS)
            sl = x;
    }
    if (sl) {
        sl->used = true;
        sl->empty = 0;
        sl->cursor = since == UINT64_MAX ? b->next_seq - 1 : since; /* default: new ones only */
        atomic_store_explicit(&sl->seen_ns, now, memory_order_relaxed);
    }
    pthread_mutex_unlock(&b->mu);
    if (!sl) {
        resp->status = 503;
        resp->body = "too many stream readers\n";
        return;
    }
    resp->content_type = "text/event-stream";
    resp->headers = "Cache-Control: no-cache\r\n";
    resp->headers_len = strlen(resp->headers);
    resp->stream = stream_piece;
    resp->stream_ud = sl;
    resp->stream_count = UINT32_MAX;
    resp->stream_interval_ns = STREAM_INTERVAL_NS;
}

static bool is(const struct sq_server_req *req, const char *method, const char *path)
{
    const char *qm = memchr(req->path, '?', req->path_len);
    size_t pl = qm ? (size_t)(qm - req->path) : req->path_len;
    return req->method_len == strlen(method) && memcmp(req->method, method, req->method_len) == 0 &&
           pl == strlen(path) && memcmp(req->path, path, pl) == 0;
}

static void handle(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    struct sq_inbox *b = ud;
    struct sq_buf *s = &b->scratch[req->worker];
    if (req->path_len >= 7 && memcmp(req->path, "/_inbox", 7) == 0 &&
        (req->path_len == 7 || req->path[7] == '/' || req->path[7] == '?')) {
        if (is(req, "GET", "/_inbox/captures") || is(req, "HEAD", "/_inbox/captures"))
            list(b, req, s, resp);
        else if (is(req, "DELETE", "/_inbox/captures"))
            clear(b, s, resp);
        else if (is(req, "GET", "/_inbox/stats") || is(req, "HEAD", "/_inbox/stats"))
            stats(b, s, resp);
        else if (is(req, "GET", "/_inbox/stream"))
            stream(b, req, resp);
        else {
            resp->status = 404;
            resp->body = "unknown /_inbox/ endpoint (captures, stats, stream)\n";
        }
        if (resp->body && !resp->body_len && !resp->stream)
            resp->body_len = strlen(resp->body);
        return;
    }
    capture(b, req, s);
    resp->status = b->cfg.status;
    resp->body = b->cfg.body;
    resp->body_len = b->cfg.body ? strlen(b->cfg.body) : 0;
    resp->content_type = b->cfg.body ? b->cfg.content_type : NULL;
    resp->delay_ns = b->cfg.delay_ns;
}

/* ---- lifetime ---- */

bool sq_inbox_header_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("!#$%&'*+-.^_`|~", name[i]) && !(name[i] >= '0' && name[i] <= '9') &&
            !(name[i] >= 'a' && name[i] <= 'z') && !(name[i] >= 'A' && name[i] <= 'Z'))
            return false;
    return true;
}

int sq_inbox_new(const struct sq_inbox_config *cfg, struct sq_inbox **out)
{
    if ((cfg->stamp_header && !sq_inbox_header_name_ok(cfg->stamp_header)) || cfg->threads < 1 ||
        cfg->max_captures > SQ_INBOX_MAX_CAPTURES || cfg->max_body > SQ_SERVER_MAX_BODY ||
        cfg->delay_ns < 0 || cfg->delay_ns > SQ_SERVER_MAX_DELAY_NS ||
        (cfg->status && (cfg->status < 200 || cfg->status > 999)))
        return -EINVAL;
    struct sq_inbox *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->cfg = *cfg;
    if (!b->cfg.status)
        b->cfg.status = 200;
    if (b->cfg.body && !b->cfg.content_type)
        b->cfg.content_type = "text/plain";
    b->cap = cfg->max_captures ? cfg->max_captures : SQ_INBOX_MAX_CAPTURES_DEFAULT;
    b->next_seq = 1;
    b->threads = cfg->threads;
    pthread_mutex_init(&b->mu, NULL);
    b->ring = calloc(b->cap, sizeof(*b->ring));
    b->paths = calloc(SQ_INBOX_MAX_PATHS * 2, sizeof(*b->paths));
    b->scratch = calloc((size_t)cfg->threads, sizeof(*b->scratch));
    for (size_t i = 0; i < SQ_INBOX_MAX_STREAMS; i++)
        b->slots[i].inbox = b;
    bool ok = b->ring && b->paths && b->scratch;
    if (ok && cfg->stamp_header) {
        size_t n = strlen(cfg->stamp_header) + 8;
        if ((b->find = malloc(n)))
            snprintf(b->find, n, "header:%s", cfg->stamp_header);
        ok = b->find != NULL;
    }
    b->cfg.stamp_header = NULL; /* borrowed no further: b->find has it */
    char err[256];
    if (ok && sq_sink_ledger_new(b->find, SQ_INBOX_LEDGER_BYTES, &b->ledger, err, sizeof(err)) < 0)
        ok = false;
    if (!ok) {
        sq_inbox_free(b);
        return -ENOMEM;
    }
    *out = b;
    return 0;
}

void sq_inbox_handle(struct sq_inbox *b, const struct sq_server_req *req, size_t strip,
                     struct sq_server_resp *resp)
{
    if (strip > req->path_len)
        strip = req->path_len;
    struct sq_server_req r = *req;
    char *tmp = NULL;
    r.path += strip;
    r.path_len -= strip;
    if (r.path_len == 0 || r.path[0] != '/') { /* "/inbox" or "/inbox?x": the path is "/" */
        tmp = malloc(r.path_len + 2);
        if (!tmp) {
            resp->status = 503;
            resp->body = "out of memory\n";
            resp->body_len = strlen(resp->body);
            return;
        }
        tmp[0] = '/';
        memcpy(tmp + 1, r.path, r.path_len);
        tmp[r.path_len + 1] = '\0';
        r.path = tmp;
        r.path_len++;
    }
    handle(b, &r, resp);
    free(tmp); /* handle copied what it keeps; the answer never points into the path */
}

int sq_inbox_start(const struct sq_inbox_config *cfg, struct sq_inbox **out, const char **why)
{
    struct sq_inbox *b = NULL;
    int rc = sq_inbox_new(cfg, &b);
    if (rc < 0)
        return rc;
    struct sq_server_config sc = {
        .host = cfg->host,
        .port = cfg->port,
        .threads = cfg->threads,
        .handler = handle,
        .ud = b,
        .idle_timeout_ns = cfg->idle_timeout_ns,
        .header_timeout_ns = cfg->header_timeout_ns,
        .request_timeout_ns = cfg->request_timeout_ns,
        .min_body_rate = cfg->min_body_rate,
    };
    rc = sq_server_start(&sc, &b->srv, why);
    if (rc < 0) {
        sq_inbox_free(b);
        return rc;
    }
    *out = b;
    return 0;
}

uint16_t sq_inbox_port(const struct sq_inbox *b)
{
    return b->srv ? sq_server_port(b->srv) : 0;
}

void sq_inbox_stop(struct sq_inbox *b)
{
    if (b->srv)
        sq_server_stop(b->srv);
}

void sq_inbox_wait(struct sq_inbox *b)
{
    if (b->srv)
        sq_server_wait(b->srv);
}

void sq_inbox_free(struct sq_inbox *b)
{
    if (!b)
        return;
    if (b->srv)
        sq_server_free(b->srv);
    if (b->ring)
        for (uint64_t seq = oldest(b); seq < b->next_seq; seq++)
            cap_free(b->ring[seq % b->cap]);
    free(b->ring);
    if (b->paths)
        for (size_t i = 0; i < SQ_INBOX_MAX_PATHS * 2; i++) {
            free(b->paths[i].path);
            sq_hist_free(b->paths[i].lat);
        }
    free(b->paths);
    sq_hist_free(b->other.lat);
    sq_sink_free(b->ledger);
    free(b->find);
    if (b->scratch)
        for (int i = 0; i < b->threads; i++)
            sq_buf_dispose(&b->scratch[i]);
    free(b->scratch);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

void sq_inbox_counts(struct sq_inbox *b, struct sq_inbox_counts *out)
{
    pthread_mutex_lock(&b->mu);
    out->captured = b->captured;
    out->stored = b->stored;
    out->evicted = b->evicted;
    out->truncated = b->truncated;
    out->cleared = b->cleared;
    out->next_seq = b->next_seq;
    out->stamped = b->stamped;
    pthread_mutex_unlock(&b->mu);
}
