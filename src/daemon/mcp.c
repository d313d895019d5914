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

struct waiter {
    struct waiter *next;
    int64_t run;
    json_t *rpc_id;
    struct sq_daemon__pending *p;
    struct sess *s; /* NULL once the session ended */
};

struct sq_daemon__mcp {
    struct sess sess[MAX_SESSIONS];
    struct waiter *waiting;
    /* while a message is handled */
    struct sq_daemon *d;
    struct sess *cur;
    struct sq_daemon__pending *cur_p;
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

/* ---- the hooks the tools call (ops thread) ---- */

static int submit(void *ud, const json_t *args, const json_t *rpc_id, int64_t *run_id, char *err,
                  size_t errlen)
{
    struct sq_daemon__mcp *x = ud;
    struct waiter *w = calloc(1, sizeof(*w));
    json_t *body = json_deep_copy(args);
    if (body && !json_object_get(body, "name"))
        json_object_set_new(body, "name", json_string("mcp"));
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    int status = 0;
    int rc =
        w && text ? sq_daemon__enqueue(x->d, body, text, run_id, &status, err, errlen) : -ENOMEM;
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
    x->cur_p = NULL; /* the waiter answers it */
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
 * is stopped (or cancelled while queued). The call is still answered when the run ends (the
 * client ignores it); nothing else changes. */
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
    char *resp = sq_mcp_handle(s->m, op->body ? op->body : "", op->body_len);
    struct sq_daemon__pending *p = x->cur_p; /* NULL when a waiter took it */
    x->cur = NULL;
    x->cur_p = NULL;
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
        sq_daemon__answer(d, w->p, 200, text ? text : sq_daemon__error_body("out of memory"), NULL);
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
        sq_daemon__answer(d, w->p, 200, b ? b : sq_daemon__error_body("shut down"), NULL);
        json_decref(w->rpc_id);
        free(w);
    }
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (x->sess[i].id[0])
            sess_end(x, &x->sess[i]);
    free(x);
    d->mcp = NULL;
}
