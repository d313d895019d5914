/* daemon/mcp.c - POST /mcp: the Model Context Protocol over streamable HTTP (revision
 * 2025-06-18), with the tools of `squall mcp` (mcp/) and the daemon's queue behind them.
 *
 * The transport: one JSON-RPC message per POST, answered with one application/json body (a
 * request) or 202 with none (a notification or a response); GET /mcp is 405 (this server sends
 * nothing unasked); DELETE /mcp ends a session. An "initialize" request opens a session: its
 * answer carries Mcp-Session-Id, and every later request must carry it (400 without, 404 for a
 * session that is not, or no longer, open). The daemon's gate has already refused a foreign
 * Origin (403), a non-loopback Host without a token, a missing token, and the API thread has
 * checked MCP-Protocol-Version.
 *
 * Threads: everything here runs on the ops thread (the quick face's parser is not thread-safe,
 * and a session's server is not either), so the sessions and the waiting calls need no lock. A
 * run_load_test call does not run on this thread: the tools check the caps, then cfg.submit puts
 * the run in the daemon's queue (as POST /runs does) and the held HTTP request waits in a list;
 * when the runner says the run ended (OP_MCP_DONE), its result is read from the store and the
 * request answered. Meanwhile the ops thread serves every other request, of any session. A
 * notifications/cancelled naming a waiting call stops its run.
 *
 * Progress: a run_load_test whose request carries params._meta.progressToken, from a client whose
 * Accept takes text/event-stream, is answered as an SSE stream (the streamable HTTP transport
 * allows it): the head at once, then a notifications/progress event each second of the run (the
 * API thread writes it when the runner's second arrives: sq_daemon__mcp_tick), then the JSON-RPC
 * response as the last event, and the stream ends. The stream (struct sq_daemon__mcp_stream) is
 * the API thread's from its begin post on; the ops thread hands it the answer in an end post.
 * Without a token, or without text/event-stream in Accept, the answer is one application/json
 * body as before.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "base/clock.h"
#include "daemon/internal.h"
#include "mcp/mcp.h"

#define MAX_SESSIONS 64

struct sess {
    char id[SQ_DAEMON_MCP_SID_MAX + 1]; /* "": a free slot */
    struct sq_mcp *m;
    struct sq_mcp_config cfg;
    char *hosts[SQ_MCP_MAX_HOSTS]; /* the allowlist as the session started (owned) */
    int64_t used_ns;
};

/* An answer streamed as SSE (API thread only once its begin post ran). */
struct sq_daemon__mcp_stream {
    struct sq_daemon__mcp_stream *next;
    struct sq_daemon *d;
    struct sq_daemon__pending *p; /* p->h NULL: the client left, or a write failed */
    int64_t run;
    json_t *token;  /* the progressToken */
    double total_s; /* the run's length, 0: none (a run of a request count) */
    double last_s;  /* the progress last sent (it only grows) */
};

struct waiter {
    struct waiter *next;
    int64_t run;
    json_t *rpc_id;
    struct sq_daemon__pending *p;         /* NULL when answered by a stream */
    struct sq_daemon__mcp_stream *stream; /* or this */
    struct sess *s;                       /* NULL once the session ended */
    bool cancelled; /* notifications/cancelled named it: a stream ends without the response */
};

struct sq_daemon__mcp {
    struct sess sess[MAX_SESSIONS];
    struct waiter *waiting;
    /* while a message is handled */
    struct sq_daemon *d;
    struct sess *cur;
    struct sq_daemon__pending *cur_p;
    bool cur_sse; /* the request's Accept takes text/event-stream */
};

static struct sq_daemon__mcp *state(struct sq_daemon *d)
{
    if (!d->mcp) {
        d->mcp = calloc(1, sizeof(*d->mcp));
        if (d->mcp)
            d->mcp->d = d;
    }
    return d->mcp;
}

static void answer_rpc_error(struct sq_daemon *d, struct sq_daemon__pending *p, int status,
                             int code, const char *msg)
{
    char *b = sq_mcp_error_answer(NULL, code, msg);
    sq_daemon__answer(d, p, status, b ? b : sq_daemon__error_body(msg), NULL);
}

/* ---- SSE answers (API thread) ---- */

static const char sse_headers[] = "Cache-Control: no-store\r\nX-Accel-Buffering: no\r\n";

/* Writes one SSE "message" event holding a JSON-RPC message; on failure the hold is over. */
static void stream_event(struct sq_daemon__mcp_stream *s, const char *json)
{
    if (!s->p->h)
        return;
    char *ev = NULL;
    if (asprintf(&ev, "event: message\ndata: %s\n\n", json) < 0)
        return;
    if (sq_server_hold_write(s->p->h, ev, strlen(ev)) < 0)
        s->p->h = NULL; /* closed: gone is not called */
    free(ev);
}

static void on_stream_begin(void *ud)
{
    struct sq_daemon__mcp_stream *s = ud;
    struct sq_daemon *d = s->d;
    s->next = d->mcp_streams;
    d->mcp_streams = s;
    if (!s->p->h)
        return;
    char *h = NULL;
    if (asprintf(&h, "%s%s", s->p->headers ? s->p->headers : "", sse_headers) < 0)
        h = NULL;
    struct sq_server_resp r = {
        .status = 200,
        .content_type = "text/event-stream",
        .headers = h ? h : sse_headers,
        .headers_len = strlen(h ? h : sse_headers),
    };
    d->answers[2]++;
    if (sq_server_hold_begin(s->p->h, &r) < 0)
        s->p->h = NULL;
    free(h);
}

struct stream_end {
    struct sq_daemon__mcp_stream *s;
    char *text; /* the JSON-RPC response */
};

static void on_stream_end(void *ud)
{
    struct stream_end *e = ud;
    struct sq_daemon__mcp_stream *s = e->s;
    struct sq_daemon *d = s->d;
    for (struct sq_daemon__mcp_stream **pp = &d->mcp_streams; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    if (e->text)
        stream_event(s, e->text);
    if (s->p->h) {
        if (d->access_log)
            sq_daemon__log(d, "%s 200 (SSE) %.2fms", s->p->what,
                           (double)(sq_now_ns() - s->p->t0) / 1e6);
        (void)sq_server_hold_end(s->p->h);
    }
    sq_daemon__pending_free(s->p);
    json_decref(s->token);
    free(s);
    free(e->text);
    free(e);
}

void sq_daemon__mcp_tick(struct sq_daemon *d, struct sq_daemon__live *l)
{
    for (struct sq_daemon__mcp_stream *s = d->mcp_streams; s; s = s->next) {
        if (s->run != l->id || !s->p->h)
            continue;
        pthread_mutex_lock(&l->mu);
        struct sq_daemon__totals t = l->t;
        pthread_mutex_unlock(&l->mu);
        if (!(t.elapsed_s > s->last_s))
            continue;
        s->last_s = t.elapsed_s;
        char msg[192];
        snprintf(msg, sizeof(msg),
                 "%.0fs: %llu requests completed (%.0f/s this second), %llu errors", t.elapsed_s,
                 (unsigned long long)t.completed, t.rps, (unsigned long long)t.errors);
        json_t *n = json_pack("{s:s, s:s, s:{s:O, s:f, s:s}}", "jsonrpc", "2.0", "method",
                              "notifications/progress", "params", "progressToken", s->token,
                              "progress", t.elapsed_s, "message", msg);
        if (n && s->total_s > 0)
            json_object_set_new(json_object_get(n, "params"), "total", json_real(s->total_s));
        char *text = n ? json_dumps(n, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        json_decref(n);
        if (text)
            stream_event(s, text);
        free(text);
    }
}

/* Ops thread (or the one shutting down): hands w's answer to its stream, or answers it plainly.
 * Takes text. */
static void waiter_answer(struct sq_daemon *d, struct waiter *w, char *text)
{
    if (!w->stream) {
        sq_daemon__answer(d, w->p, 200, text ? text : sq_daemon__error_body("out of memory"), NULL);
        return;
    }
    struct stream_end *e = malloc(sizeof(*e));
    if (!e) {
        free(text);
        return; /* the client waits until it gives up */
    }
    *e = (struct stream_end){.s = w->stream, .text = text};
    if (sq_server_post(d->srv, 0, on_stream_end, e) < 0) {
        free(text);
        free(e);
    }
}

/* ---- the hooks the tools call (ops thread) ---- */

static int submit(void *ud, const json_t *args, const json_t *rpc_id, const json_t *progress,
                  double total_s, int64_t *run_id, char *err, size_t errlen)
{
    struct sq_daemon__mcp *x = ud;
    struct waiter *w = calloc(1, sizeof(*w));
    json_t *body = json_deep_copy(args);
    if (body && !json_object_get(body, "name"))
        json_object_set_new(body, "name", json_string("mcp"));
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    int status = 0;
    int rc = w && text ? sq_daemon__enqueue(x->d, body, text, true, run_id, &status, err, errlen)
                       : -ENOMEM;
    json_decref(body);
    free(text);
    if (rc < 0) {
        free(w);
        if (rc == -ENOMEM && !err[0])
            snprintf(err, errlen, "out of memory");
        return rc;
    }
    w->run = *run_id;
    w->rpc_id = json_deep_copy(rpc_id);
    w->p = x->cur_p;
    w->s = x->cur;
    x->cur_p = NULL;                      /* the waiter answers it */
    if (progress && x->cur_sse && w->p) { /* progress each second: the answer is a stream */
        struct sq_daemon__mcp_stream *st = calloc(1, sizeof(*st));
        if (st) {
            *st = (struct sq_daemon__mcp_stream){.d = x->d,
                                                 .p = w->p,
                                                 .run = w->run,
                                                 .token = json_deep_copy(progress),
                                                 .total_s = total_s};
            if (st->token && sq_server_post(x->d->srv, 0, on_stream_begin, st) == 0) {
                w->stream = st;
                w->p = NULL;
            } else {
                json_decref(st->token);
                free(st);
            }
        }
    }
    w->next = x->waiting;
    x->waiting = w;
    return 0;
}

static int stop(void *ud, int64_t id, char *msg, size_t len)
{
    struct sq_daemon__mcp *x = ud;
    struct sq_daemon *d = x->d;
    if (sq_daemon__stop_running(d, id)) {
        sq_daemon__log(d, "run %lld: stop asked (MCP)", (long long)id);
        snprintf(msg, len,
                 "run %lld is stopping: its run_load_test call answers with the result so far",
                 (long long)id);
        return 0;
    }
    if (sq_daemon__dequeue(d, id)) {
        sq_daemon__cancel_queued(d, id);
        snprintf(msg, len, "run %lld was queued: it is cancelled", (long long)id);
        return 0;
    }
    char err[256];
    struct sq_store_run r;
    int rc = sq_store_run_get(d->store, id, &r, err, sizeof(err));
    if (rc < 0) {
        snprintf(msg, len, "%s", rc == -ENOENT ? "no such run" : err);
        return rc;
    }
    snprintf(msg, len, "run %lld is %s: there is nothing to stop", (long long)id,
             sq_store_status_name(r.status));
    sq_store_run_dispose(&r);
    return -EPERM;
}

/* ---- sessions ---- */

static void sess_end(struct sq_daemon__mcp *x, struct sess *s)
{
    for (struct waiter *w = x->waiting; w; w = w->next)
        if (w->s == s)
            w->s = NULL;
    sq_mcp_free(s->m);
    for (size_t i = 0; i < SQ_MCP_MAX_HOSTS; i++)
        free(s->hosts[i]);
    memset(s, 0, sizeof(*s));
}

static bool sess_busy(const struct sq_daemon__mcp *x, const struct sess *s)
{
    for (const struct waiter *w = x->waiting; w; w = w->next)
        if (w->s == s)
            return true;
    return false;
}

/* A free slot: when all are taken, the session unused the longest (and not waiting for a run)
 * is ended. NULL when every session waits for a run. */
static struct sess *sess_slot(struct sq_daemon__mcp *x)
{
    struct sess *lru = NULL;
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        struct sess *s = &x->sess[i];
        if (!s->id[0])
            return s;
        if (!sess_busy(x, s) && (!lru || s->used_ns < lru->used_ns))
            lru = s;
    }
    if (lru) {
        sq_daemon__log(x->d, "MCP session %.8s... ended: the oldest of %d", lru->id, MAX_SESSIONS);
        sess_end(x, lru);
    }
    return lru;
}

static int sess_open(struct sq_daemon__mcp *x, struct sess **out)
{
    struct sess *s = sess_slot(x);
    if (!s)
        return -EBUSY;
    unsigned char r[16];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        return -EIO;
    for (size_t i = 0; i < sizeof(r); i++)
        snprintf(s->id + 2 * i, 3, "%02x", r[i]);
    struct sq_daemon *d = x->d;
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->cfg.nallow && s->cfg.nallow_hosts < SQ_MCP_MAX_HOSTS; i++) {
        s->hosts[s->cfg.nallow_hosts] = strdup(d->cfg.allow_hosts[i]);
        if (s->hosts[s->cfg.nallow_hosts]) {
            s->cfg.allow_hosts[s->cfg.nallow_hosts] = s->hosts[s->cfg.nallow_hosts];
            s->cfg.nallow_hosts++;
        }
    }
    pthread_mutex_unlock(&d->mu);
    s->cfg.store = d->store;
    s->cfg.allow_setting = SQ_DAEMON_ALLOW_SETTING;
    s->cfg.host_ud = x;
    s->cfg.submit = submit;
    s->cfg.stop_run = stop;
    if (sq_mcp_new(&s->cfg, &s->m) < 0) {
        sess_end(x, s);
        return -ENOMEM;
    }
    s->used_ns = sq_now_ns();
    *out = s;
    return 0;
}

static struct sess *sess_find(struct sq_daemon__mcp *x, const char *id)
{
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (x->sess[i].id[0] && strcmp(x->sess[i].id, id) == 0)
            return &x->sess[i];
    return NULL;
}

/* ---- the ops ---- */

static bool is_initialize(const char *body, size_t len)
{
    struct sq_mcp_msg m;
    bool init = sq_mcp_parse(body, len, &m, NULL, 0) == 0 && m.method && m.id &&
                strcmp(m.method, "initialize") == 0;
    json_decref(m.root);
    return init;
}

/* notifications/cancelled for a run_load_test of this session that waits for its run: the run
 * is stopped (or cancelled while queued). A plain JSON call is still answered when the run ends
 * (the HTTP request needs an answer; the client ignores it); an SSE one ends without the
 * response, as the spec asks. */
static void cancelled(struct sq_daemon__mcp *x, struct sess *s, const char *body, size_t len)
{
    struct sq_mcp_msg m;
    if (sq_mcp_parse(body, len, &m, NULL, 0) == 0 && m.method && !m.id &&
        strcmp(m.method, "notifications/cancelled") == 0 && m.params) {
        json_t *rid = json_object_get(m.params, "requestId");
        for (struct waiter *w = x->waiting; rid && w; w = w->next) {
            if (w->s == s && json_equal(w->rpc_id, rid)) {
                char msg[256];
                sq_daemon__log(x->d, "run %lld: the MCP call was cancelled", (long long)w->run);
                w->cancelled = true;
                (void)stop(x, w->run, msg, sizeof(msg));
                break;
            }
        }
    }
    json_decref(m.root);
}

void sq_daemon__mcp_op(struct sq_daemon *d, struct sq_daemon__op *op)
{
    struct sq_daemon__mcp *x = state(d);
    if (!x) {
        sq_daemon__answer(d, op->p, 503, sq_daemon__error_body("out of memory"), NULL);
        return;
    }
    if (op->mcp_delete) {
        struct sess *s = op->mcp_sid[0] ? sess_find(x, op->mcp_sid) : NULL;
        if (!op->mcp_sid[0]) {
            sq_daemon__answer(d, op->p, 400,
                              sq_daemon__error_body("DELETE /mcp needs an Mcp-Session-Id header"),
                              NULL);
        } else if (!s) {
            sq_daemon__answer(d, op->p, 404, sq_daemon__error_body("no such MCP session"), NULL);
        } else {
            sess_end(x, s);
            sq_daemon__answer(d, op->p, 204, NULL, NULL);
        }
        return;
    }
    struct sess *s = NULL;
    bool opened = false;
    if (is_initialize(op->body ? op->body : "", op->body_len)) {
        int rc = sess_open(x, &s);
        if (rc < 0) {
            answer_rpc_error(d, op->p, 503, SQ_MCP_INTERNAL_ERROR,
                             rc == -EBUSY ? "every MCP session waits for a run: try later"
                                          : "cannot open an MCP session");
            return;
        }
        opened = true;
    } else if (!op->mcp_sid[0]) {
        answer_rpc_error(d, op->p, 400, SQ_MCP_INVALID_REQUEST,
                         "Bad Request: no Mcp-Session-Id header (initialize first)");
        return;
    } else if (!(s = sess_find(x, op->mcp_sid))) {
        answer_rpc_error(d, op->p, 404, SQ_MCP_INVALID_REQUEST,
                         "Session not found: initialize a new session");
        return;
    }
    s->used_ns = sq_now_ns();
    if (!opened)
        cancelled(x, s, op->body ? op->body : "", op->body_len);
    x->cur = s;
    x->cur_p = op->p;
    x->cur_sse = op->mcp_sse;
    char *resp = sq_mcp_handle(s->m, op->body ? op->body : "", op->body_len);
    struct sq_daemon__pending *p = x->cur_p; /* NULL when a waiter took it */
    x->cur = NULL;
    x->cur_p = NULL;
    x->cur_sse = false;
    if (opened && !sq_mcp_initialized(s->m)) {
        sess_end(x, s); /* initialize was refused: no session */
        opened = false;
    }
    if (!p) {
        free(resp);
        return;
    }
    char hdr[96] = "";
    if (opened)
        snprintf(hdr, sizeof(hdr), "Mcp-Session-Id: %s\r\n", s->id);
    if (resp)
        sq_daemon__answer(d, p, 200, resp, hdr);
    else
        sq_daemon__answer(d, p, 202, NULL, hdr);
}

void sq_daemon__mcp_done(struct sq_daemon *d, int64_t run)
{
    struct sq_daemon__mcp *x = d->mcp;
    if (!x)
        return;
    for (struct waiter **pp = &x->waiting; *pp;) {
        struct waiter *w = *pp;
        if (w->run != run) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        char err[256];
        struct sq_store_run r;
        struct sq_store_result res = {0};
        char *text = NULL;
        if (sq_store_run_get(d->store, run, &r, err, sizeof(err)) == 0) {
            bool has =
                r.has_result && sq_store_result_get(d->store, run, &res, err, sizeof(err)) == 0;
            text = sq_mcp_run_answer(w->rpc_id, run, sq_store_status_name(r.status), r.reason,
                                     has ? res.doc : NULL);
            sq_store_result_dispose(&res);
            sq_store_run_dispose(&r);
        } else {
            text = sq_mcp_error_answer(w->rpc_id, SQ_MCP_INTERNAL_ERROR, err);
        }
        if (w->stream && w->cancelled) { /* no response to a cancelled request (the spec) */
            free(text);
            text = NULL;
        }
        waiter_answer(d, w, text);
        json_decref(w->rpc_id);
        free(w);
    }
}

void sq_daemon__mcp_close(struct sq_daemon *d)
{
    struct sq_daemon__mcp *x = d->mcp;
    if (!x)
        return;
    while (x->waiting) {
        struct waiter *w = x->waiting;
        x->waiting = w->next;
        char *b = sq_mcp_error_answer(w->rpc_id, SQ_MCP_INTERNAL_ERROR,
                                      "the daemon shut down before the run ended");
        waiter_answer(d, w, b);
        json_decref(w->rpc_id);
        free(w);
    }
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (x->sess[i].id[0])
            sess_end(x, &x->sess[i]);
    free(x);
    d->mcp = NULL;
}
