/* daemon/api.c - the HTTP API and the dashboard, on the server's one worker thread.
 *
 * Every request passes the same gate before its route: CORS (only the configured origin gets
 * Access-Control-* headers), the Host check (a loopback daemon without a token answers only
 * loopback Host names: a DNS-rebinding page cannot reach it), the Origin check for requests that
 * change something, the bearer token (compared in constant time), the body cap (413) and the
 * JSON content type for bodies (415: an HTML form cannot post to the API).
 *
 * Reads (lists, runs, results, series, compare, metrics) are answered at once from the store's
 * reader connection. What needs a durable write or a parser that is not thread-safe is held and
 * handed to the ops thread (daemon/runner.c), which posts the answer back.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/clock.h"
#include "base/str.h"
#include "base/text.h"
#include "daemon/assets.h"
#include "daemon/runs_compare.h"
#include "daemon/internal.h"
#include "http/h1.h"
#include "mcp/mcp.h"
#include "target/inbox.h"
#include "output/html.h"
#include "stats/hist.h"

/* ---- small helpers ---- */

void sq_daemon__log(struct sq_daemon *d, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* a value a client sent may be in the line: no control bytes reach the terminal */
    for (char *p = line; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    pthread_mutex_lock(&d->log_mu);
    fprintf(d->log, "squall serve: %s\n", line);
    fflush(d->log);
    pthread_mutex_unlock(&d->log_mu);
}

void sq_daemon__iso_time(int64_t ms, char *buf, size_t len)
{
    if (ms <= 0) {
        snprintf(buf, len, "%s", "");
        return;
    }
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    char date[32];
    /* strftime, not "%04d-%02d..." over the tm fields: gcc at -O3 cannot bound those ints and
     * warns that the text may not fit (-Wformat-truncation), which fails a -Werror build. */
    if (!gmtime_r(&s, &tm) || strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(buf, len, "%s", "");
        return;
    }
    snprintf(buf, len, "%s.%03uZ", date, (unsigned)(ms % 1000));
}

static json_t *time_json(int64_t ms)
{
    if (ms <= 0)
        return json_null();
    char b[40];
    sq_daemon__iso_time(ms, b, sizeof(b));
    return json_string(b);
}

char *sq_daemon__error_body(const char *msg)
{
    json_t *o = json_pack("{s:s}", "error", msg ? msg : "error");
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s ? s : strdup("{\"error\":\"out of memory\"}");
}

json_t *sq_daemon__run_json(const struct sq_store_run *r)
{
    json_t *sum = json_pack("{s:o, s:o, s:o, s:o}", "requests_per_s",
                            r->req_per_s >= 0 ? json_real(r->req_per_s) : json_null(), "p99_us",
                            r->p99_us >= 0 ? json_integer(r->p99_us) : json_null(), "errors",
                            r->errors >= 0 ? json_integer(r->errors) : json_null(), "sent",
                            r->sent >= 0 ? json_integer(r->sent) : json_null());
    return json_pack("{s:I, s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:o, s:b, s:o}", "id",
                     (json_int_t)r->id, "name", r->name, "kind", sq_store_kind_name(r->kind),
                     "status", sq_store_status_name(r->status), "created_at",
                     time_json(r->created_ms), "started_at", time_json(r->started_ms), "ended_at",
                     time_json(r->ended_ms), "target", r->target, "reason",
                     r->reason ? json_string(r->reason) : json_null(), "has_result", r->has_result,
                     "summary", sum);
}

static void hdr(struct sq_daemon__out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void hdr(struct sq_daemon__out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->hdrs + o->hlen, sizeof(o->hdrs) - o->hlen, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof(o->hdrs) - o->hlen)
        o->hlen += (size_t)n;
}

static void set_body(struct sq_daemon__out *o, const char *p, size_t n)
{
    sq_buf_reset(&o->body);
    if (sq_buf_append(&o->body, p, n) < 0)
        o->body.len = 0;
}

/* A JSON answer: status and a document (taken). */
static void answer_json(struct sq_daemon__out *o, struct sq_server_resp *resp, int status,
                        json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!s) {
        status = 500;
        s = strdup("{\"error\":\"out of memory\"}");
    }
    set_body(o, s, s ? strlen(s) : 0);
    free(s);
    resp->status = status;
    resp->content_type = "application/json";
}

static void answer_error(struct sq_daemon__out *o, struct sq_server_resp *resp, int status,
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void answer_error(struct sq_daemon__out *o, struct sq_server_resp *resp, int status,
                         const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char *s = sq_daemon__error_body(msg);
    set_body(o, s, strlen(s));
    free(s);
    resp->status = status;
    resp->content_type = "application/json";
}

/* ---- held answers (from the ops thread) ---- */

void sq_daemon__pending_gone(void *ud)
{
    struct sq_daemon__pending *p = ud;
    p->h = NULL; /* the client left: the answer, when it comes, goes nowhere */
}

void sq_daemon__pending_free(struct sq_daemon__pending *p)
{
    if (!p)
        return;
    free(p->headers);
    free(p);
}

struct answer_post {
    struct sq_daemon__pending *p;
    int status;
    char *body;
    char *headers;
};

static void on_answer(void *ud)
{
    struct answer_post *a = ud;
    struct sq_daemon__pending *p = a->p;
    if (p->h) {
        struct sq_server_resp r = {
            .status = a->status,
            .content_type = a->body ? "application/json" : NULL,
            .body = a->body,
            .body_len = a->body ? strlen(a->body) : 0,
            .headers = a->headers,
            .headers_len = a->headers ? strlen(a->headers) : 0,
        };
        if (a->status / 100 < 6)
            p->d->answers[a->status / 100]++;
        if (p->d->access_log)
            sq_daemon__log(p->d, "%s %d %.2fms", p->what, a->status,
                           (double)(sq_now_ns() - p->t0) / 1e6);
        (void)sq_server_hold_answer(p->h, &r); /* on failure the connection is gone */
    }
    sq_daemon__pending_free(p);
    free(a->body);
    free(a->headers);
    free(a);
}

void sq_daemon__answer(struct sq_daemon *d, struct sq_daemon__pending *p, int status, char *body,
                       const char *extra_headers)
{
    struct answer_post *a = malloc(sizeof(*a));
    size_t n1 = p->headers ? strlen(p->headers) : 0, n2 = extra_headers ? strlen(extra_headers) : 0;
    char *h = malloc(n1 + n2 + 64);
    if (!a || !h) {
        free(a);
        free(h);
        free(body);
        return; /* out of memory: the client waits until it gives up (its hold is freed then) */
    }
    snprintf(h, n1 + n2 + 64, "%s%sCache-Control: no-store\r\n", p->headers ? p->headers : "",
             extra_headers ? extra_headers : "");
    *a = (struct answer_post){.p = p, .status = status, .body = body, .headers = h};
    if (sq_server_post(d->srv, 0, on_answer, a) < 0) {
        free(a->body);
        free(a->headers);
        free(a);
    }
}

static bool is(const struct sq_server_req *r, const char *m);

/* hold_for_ops could not hold the request: what it made is freed, the client answered 503. */
static void hold_failed(char *body, struct sq_daemon__op *op, struct sq_daemon__pending *p,
                        struct sq_daemon__out *o, struct sq_server_resp *resp, const char *why)
{
    free(body);
    free(op);
    sq_daemon__pending_free(p);
    answer_error(o, resp, 503, "%s", why);
}

/* Holds req and hands it to the ops thread as op (which takes body). */
static void hold_for_ops(struct sq_daemon *d, const struct sq_server_req *req,
                         struct sq_server_resp *resp, struct sq_daemon__out *o,
                         enum sq_daemon__op_kind kind, int64_t id, const char *cors)
{
    struct sq_daemon__pending *p = calloc(1, sizeof(*p));
    struct sq_daemon__op *op = calloc(1, sizeof(*op));
    char *body = NULL;
    if (p && op && req->body_len) {
        body = malloc(req->body_len + 1);
        if (body) {
            memcpy(body, req->body, req->body_len);
            body[req->body_len] = '\0';
        }
    }
    if (p && cors)
        p->headers = strdup(cors);
    if (!p || !op || (req->body_len && !body) || (cors && !p->headers)) {
        hold_failed(body, op, p, o, resp, "out of memory");
        return;
    }
    p->d = d;
    if (d->access_log) {
        const char *qm = memchr(req->path, '?', req->path_len);
        size_t pn = qm ? (size_t)(qm - req->path) : req->path_len;
        p->t0 = sq_now_ns();
        snprintf(p->what, sizeof(p->what), "%.*s %.*s", (int)req->method_len, req->method,
                 (int)(pn > 200 ? 200 : pn), req->path);
    }
    p->h = sq_server_hold(req, sq_daemon__pending_gone, p);
    if (!p->h) {
        hold_failed(body, op, p, o, resp, "cannot hold the request");
        return;
    }
    o->held = true;
    if (kind == OP_MCP) {
        const struct sq_h1_header *sid = sq_server_req_header(req, "mcp-session-id");
        if (sid && sid->value_len <= SQ_DAEMON_MCP_SID_MAX) {
            memcpy(op->mcp_sid, sid->value, sid->value_len);
            op->mcp_sid[sid->value_len] = '\0';
        } else if (sid) {
            snprintf(op->mcp_sid, sizeof(op->mcp_sid), "%s", "-"); /* too long: no such session */
        }
        op->mcp_delete = is(req, "DELETE");
        const struct sq_h1_header *acc = sq_server_req_header(req, "accept");
        op->mcp_sse = acc && memmem(acc->value, acc->value_len, "text/event-stream", 17);
    }
    op->kind = kind;
    op->p = p;
    op->id = id;
    op->body = body;
    op->body_len = req->body_len;
    (void)sq_daemon__op_push(d, op); /* on failure it answers 503 itself */
}

/* ---- the query string ---- */

/* Finds key in the query q[0, n) and percent-decodes its value into buf. False when absent. */
static bool query_get(const char *q, size_t n, const char *key, char *buf, size_t len)
{
    size_t kl = strlen(key);
    const char *e = q + n;
    for (const char *p = q; p < e;) {
        const char *amp = memchr(p, '&', (size_t)(e - p));
        const char *end = amp ? amp : e;
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *ke = eq ? eq : end;
        if ((size_t)(ke - p) == kl && memcmp(p, key, kl) == 0) {
            size_t k = 0;
            for (const char *v = eq ? eq + 1 : end; v < end && k + 1 < len; v++) {
                int hi, lo;
                if (*v == '%' && end - v >= 3 && (hi = sq_hex_value((unsigned char)v[1])) >= 0 &&
                    (lo = sq_hex_value((unsigned char)v[2])) >= 0) {
                    buf[k++] = (char)(hi * 16 + lo);
                    v += 2;
                } else {
                    buf[k++] = *v == '+' ? ' ' : *v;
                }
            }
            buf[k] = '\0';
            return true;
        }
        p = end + 1;
    }
    return false;
}

static bool parse_id(const char *s, size_t n, int64_t *out)
{
    if (n == 0 || n > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v <= 0)
        return false;
    *out = v;
    return true;
}

/* ---- routes ---- */

static void get_runs(struct sq_daemon *d, const char *q, size_t qn, struct sq_daemon__out *o,
                     struct sq_server_resp *resp)
{
    struct sq_store_query sq = {0};
    char v[256], err[256];
    if (query_get(q, qn, "status", v, sizeof(v)) && v[0]) {
        for (char *s = v, *tok; (tok = strsep(&s, ","));) {
            enum sq_store_status st;
            if (sq_store_status_parse(tok, &st) < 0) {
                answer_error(o, resp, 400,
                             "status: '%s' is not a status (queued, running, finished, stopped, "
                             "failed, interrupted)",
                             tok);
                return;
            }
            sq.status_mask |= SQ_STORE_STATUS_BIT(st);
        }
    }
    int64_t n;
    if (query_get(q, qn, "limit", v, sizeof(v))) {
        if (!parse_id(v, strlen(v), &n) || n > SQ_STORE_LIST_MAX) {
            answer_error(o, resp, 400, "limit: '%s' is not a count in 1..%d", v, SQ_STORE_LIST_MAX);
            return;
        }
        sq.limit = (size_t)n;
    }
    if (query_get(q, qn, "before", v, sizeof(v))) {
        if (!parse_id(v, strlen(v), &n)) {
            answer_error(o, resp, 400, "before: '%s' is not a run id", v);
            return;
        }
        sq.before_id = n;
    }
    struct sq_store_runs l = {0};
    int rc = sq_store_run_list(d->store, &sq, &l, err, sizeof(err));
    if (rc < 0) {
        answer_error(o, resp, rc == -EINVAL ? 400 : 500, "%s", err);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < l.n; i++)
        json_array_append_new(arr, sq_daemon__run_json(&l.v[i]));
    json_t *next = json_null();
    if (l.more && l.n) {
        char link[128];
        snprintf(link, sizeof(link), "/runs?limit=%zu&before=%lld",
                 sq.limit ? sq.limit : (size_t)SQ_STORE_LIST_DEFAULT, (long long)l.v[l.n - 1].id);
        json_decref(next);
        next = json_string(link);
        /* the status filter travels with the cursor */
        if (sq.status_mask && query_get(q, qn, "status", v, sizeof(v))) {
            char l2[512];
            snprintf(l2, sizeof(l2), "%s&status=%s", link, v);
            json_decref(next);
            next = json_string(l2);
        }
    }
    sq_store_runs_dispose(&l);
    answer_json(o, resp, 200, json_pack("{s:o, s:o}", "runs", arr, "next", next));
}

/* The live totals of run id when it is the one running (API thread). */
static json_t *live_json(struct sq_daemon *d, int64_t id)
{
    struct sq_daemon__live *l = d->cur && d->cur->id == id ? d->cur : NULL;
    if (!l)
        return NULL;
    pthread_mutex_lock(&l->mu);
    char *t = sq_daemon__totals_json(&l->t);
    pthread_mutex_unlock(&l->mu);
    json_t *j = t ? json_loads(t, 0, NULL) : NULL;
    free(t);
    if (j) {
        json_object_set_new(j, "workers", json_integer(l->workers));
        json_object_set_new(j, "vus_max", json_integer((json_int_t)l->vus_max));
    }
    return j;
}

/* Run id from the store into *r. False when there is none (answered 404) or the store failed
 * (answered 500 with its message). */
static bool run_or_answer(struct sq_daemon *d, int64_t id, struct sq_store_run *r,
                          struct sq_daemon__out *o, struct sq_server_resp *resp)
{
    char err[256];
    int rc = sq_store_run_get(d->store, id, r, err, sizeof(err));
    if (rc < 0)
        answer_error(o, resp, rc == -ENOENT ? 404 : 500, "%s", rc == -ENOENT ? "no such run" : err);
    return rc >= 0;
}

static void get_run(struct sq_daemon *d, int64_t id, struct sq_daemon__out *o,
                    struct sq_server_resp *resp)
{
    struct sq_store_run r;
    if (!run_or_answer(d, id, &r, o, resp))
        return;
    char err[256];
    struct sq_store_result res = {0};
    bool has = r.has_result && sq_store_result_get(d->store, id, &res, err, sizeof(err)) == 0;
    json_t *env = sq_daemon__run_json(&r);
    json_t *live = r.status == SQ_STORE_RUNNING ? live_json(d, id) : NULL;
    json_object_set_new(env, "live", live ? live : json_null());
    char *head = env ? json_dumps(env, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(env);
    if (!head) {
        sq_store_result_dispose(&res);
        sq_store_run_dispose(&r);
        answer_error(o, resp, 500, "out of memory");
        return;
    }
    /* the stored request and result are JSON text already: spliced in, never parsed again */
    struct sq_buf *b = &o->body;
    sq_buf_reset(b);
    size_t hl = strlen(head);
    bool ok =
        sq_buf_append(b, head, hl - 1) == 0 && sq_buf_append(b, ",\"request\":", 11) == 0 &&
        sq_buf_append(b, r.request ? r.request : "null", r.request ? strlen(r.request) : 4) == 0 &&
        sq_buf_append(b, ",\"result\":", 10) == 0 &&
        sq_buf_append(b, has ? res.doc : "null", has ? res.doc_len : 4) == 0 &&
        sq_buf_append(b, "}", 1) == 0;
    free(head);
    sq_store_result_dispose(&res);
    sq_store_run_dispose(&r);
    if (!ok) {
        answer_error(o, resp, 500, "out of memory");
        return;
    }
    resp->status = 200;
    resp->content_type = "application/json";
}

static void get_series(struct sq_daemon *d, int64_t id, struct sq_daemon__out *o,
                       struct sq_server_resp *resp)
{
    char err[256];
    struct sq_store_series se = {0};
    int rc = sq_store_series_get(d->store, id, 0, &se, err, sizeof(err));
    if (rc < 0) {
        answer_error(o, resp, rc == -ENOENT ? 404 : 500, "%s", rc == -ENOENT ? "no such run" : err);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < se.n; i++) {
        const struct sq_store_second *x = &se.v[i];
        json_t *e = json_pack(
            "{s:I, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}", "idx",
            (json_int_t)x->idx, "t_s", x->t_s, "len_s", x->len_s, "requests", (json_int_t)x->sent,
            "completed", (json_int_t)x->completed, "failed", (json_int_t)x->failed, "dropped",
            (json_int_t)x->dropped, "errors", (json_int_t)x->errors, "rps",
            x->len_s > 0 ? (double)x->completed / x->len_s : 0.0, "bytes_received",
            (json_int_t)x->bytes, "p50_us", (json_int_t)x->p50_us, "p90_us", (json_int_t)x->p90_us,
            "p99_us", (json_int_t)x->p99_us, "max_us", (json_int_t)x->max_us, "vus",
            (json_int_t)x->active);
        json_t *ex = x->extra ? json_loads(x->extra, 0, NULL) : NULL;
        json_t *t = ex ? json_object_get(ex, "totals") : NULL;
        json_t *sec = ex ? json_object_get(ex, "second") : NULL;
        /* squall's own cost and the watched server's, as the document's series entry has them */
        static const char *const blocks[] = {"client", "server"};
        for (size_t k = 0; k < 2; k++) {
            json_t *b = sec ? json_object_get(sec, blocks[k]) : NULL;
            if (b)
                json_object_set(e, blocks[k], b);
        }
        json_object_set(e, "totals", t ? t : json_null());
        json_decref(ex);
        json_array_append_new(arr, e);
    }
    sq_store_series_dispose(&se);
    answer_json(o, resp, 200, json_pack("{s:I, s:o}", "run", (json_int_t)id, "series", arr));
}

/* Reads run id's stored result: the document (parsed) and, optionally, its histogram. Answers
 * the error itself and returns NULL when there is none. */
static json_t *load_result(struct sq_daemon *d, int64_t id, struct sq_hist **hist,
                           struct sq_daemon__out *o, struct sq_server_resp *resp)
{
    char err[256];
    struct sq_store_result res = {0};
    int rc = sq_store_result_get(d->store, id, &res, err, sizeof(err));
    if (rc < 0) {
        answer_error(o, resp, rc == -ENOENT ? 404 : 500, "run %lld: %s", (long long)id, err);
        return NULL;
    }
    json_t *doc = json_loadb(res.doc, res.doc_len, 0, NULL);
    if (hist && res.hist && sq_hist_decode(res.hist, res.hist_len, hist) < 0)
        *hist = NULL;
    sq_store_result_dispose(&res);
    if (!doc)
        answer_error(o, resp, 500, "run %lld: the stored result does not parse", (long long)id);
    return doc;
}

static void get_result(struct sq_daemon *d, int64_t id, struct sq_daemon__out *o,
                       struct sq_server_resp *resp)
{
    char err[256];
    struct sq_store_result res = {0};
    int rc = sq_store_result_get(d->store, id, &res, err, sizeof(err));
    if (rc < 0) {
        answer_error(o, resp, rc == -ENOENT ? 404 : 500, "run %lld: %s", (long long)id, err);
        return;
    }
    set_body(o, res.doc, res.doc_len);
    sq_store_result_dispose(&res);
    resp->status = 200;
    resp->content_type = "application/json";
}

static void get_report(struct sq_daemon *d, int64_t id, struct sq_daemon__out *o,
                       struct sq_server_resp *resp)
{
    json_t *doc = load_result(d, id, NULL, o, resp);
    if (!doc)
        return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int rc = f ? sq_report_html(doc, f) : -ENOMEM;
    if (f)
        fclose(f);
    json_decref(doc);
    if (rc < 0) {
        free(buf);
        answer_error(o, resp, 500, "the report could not be rendered: %s", sq_strerror(rc));
        return;
    }
    set_body(o, buf, len);
    free(buf);
    resp->status = 200;
    resp->content_type = "text/html; charset=utf-8";
    hdr(o, "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; "
           "style-src 'unsafe-inline'; img-src data:\r\n");
}

static void get_compare(struct sq_daemon *d, const char *q, size_t qn, struct sq_daemon__out *o,
                        struct sq_server_resp *resp)
{
    char va[32], vb[32];
    int64_t a, b;
    if (!query_get(q, qn, "a", va, sizeof(va)) || !parse_id(va, strlen(va), &a) ||
        !query_get(q, qn, "b", vb, sizeof(vb)) || !parse_id(vb, strlen(vb), &b)) {
        answer_error(o, resp, 400, "compare needs two run ids: /compare?a=ID&b=ID");
        return;
    }
    struct sq_hist *ha = NULL, *hb = NULL;
    json_t *da = load_result(d, a, &ha, o, resp), *db = NULL;
    if (da)
        db = load_result(d, b, &hb, o, resp);
    if (da && db) {
        json_t *c = sq_daemon_compare(da, ha, db, hb);
        if (c) {
            json_object_set_new(json_object_get(c, "a"), "id", json_integer(a));
            json_object_set_new(json_object_get(c, "b"), "id", json_integer(b));
        }
        answer_json(o, resp, c ? 200 : 500, c);
    }
    json_decref(da);
    json_decref(db);
    sq_hist_free(ha);
    sq_hist_free(hb);
}

static void get_health(struct sq_daemon *d, struct sq_daemon__out *o, struct sq_server_resp *resp)
{
    char err[256];
    int64_t bytes = -1;
    if (sq_store_size(d->store, &bytes, err, sizeof(err)) < 0)
        bytes = -1;
    json_t *run = json_null();
    struct sq_daemon__live *l = d->cur;
    if (l) {
        pthread_mutex_lock(&l->mu);
        struct sq_daemon__totals t = l->t;
        pthread_mutex_unlock(&l->mu);
        json_decref(run);
        run = json_pack("{s:I, s:s, s:s, s:s, s:o, s:f, s:I, s:I, s:I, s:I, s:f}", "id",
                        (json_int_t)l->id, "name", l->name, "kind", l->kind, "target", l->target,
                        "started_at", time_json(l->started_ms), "elapsed_s", t.elapsed_s, "workers",
                        (json_int_t)l->workers, "vus", (json_int_t)t.vus, "vus_max",
                        (json_int_t)l->vus_max, "in_flight", (json_int_t)t.in_flight, "rps", t.rps);
    }
    pthread_mutex_lock(&d->mu);
    size_t queued = d->q_len;
    pthread_mutex_unlock(&d->mu);
    char started[40];
    sq_daemon__iso_time(d->start_wall_ms, started, sizeof(started));
    answer_json(o, resp, 200,
                json_pack("{s:s, s:s, s:s, s:f, s:o, s:I, s:I, s:{s:s, s:o}}", "status", "ok",
                          "version", SQ_VERSION, "started_at", started, "uptime_s",
                          (double)(sq_now_ns() - d->start_ns) / 1e9, "run", run, "queue",
                          (json_int_t)queued, "followers", (json_int_t)d->nsubs, "store", "path",
                          sq_store_path(d->store), "bytes",
                          bytes >= 0 ? json_integer(bytes) : json_null()));
}

static void put_config(struct sq_daemon *d, const struct sq_server_req *req,
                       struct sq_daemon__out *o, struct sq_server_resp *resp)
{
    json_error_t je;
    json_t *j = json_loadb(req->body ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        answer_error(o, resp, 400, "the body is not JSON: %s (line %d, column %d)", je.text,
                     je.line, je.column);
        return;
    }
    char err[512];
    int rc = sq_daemon__config_put(d, j, err, sizeof(err));
    json_decref(j);
    if (rc < 0) {
        answer_error(o, resp, rc == -ENOMEM ? 503 : 400, "%s", err);
        return;
    }
    sq_daemon__log(d, "configuration changed");
    answer_json(o, resp, 200, sq_daemon__config_json(d));
}

static void stop_run(struct sq_daemon *d, const struct sq_server_req *req, int64_t id,
                     struct sq_daemon__out *o, struct sq_server_resp *resp, const char *cors)
{
    if (sq_daemon__stop_running(d, id)) {
        sq_daemon__log(d, "run %lld: stop asked", (long long)id);
        char b[96];
        snprintf(b, sizeof(b), "{\"id\":%lld,\"status\":\"stopping\"}", (long long)id);
        set_body(o, b, strlen(b));
        resp->status = 202;
        resp->content_type = "application/json";
        return;
    }
    if (sq_daemon__dequeue(d, id)) {
        hold_for_ops(d, req, resp, o, OP_CANCEL, id, cors);
        return;
    }
    struct sq_store_run r;
    if (!run_or_answer(d, id, &r, o, resp))
        return;
    answer_error(o, resp, 409, "run %lld is %s: there is nothing to stop", (long long)id,
                 sq_store_status_name(r.status));
    sq_store_run_dispose(&r);
}

/* POST /runs/{id}/control: {"rate": N} | {"vus": N} | {"pause": true} | {"resume": true}, with
 * an optional "scenario" (engine/control.h). The running run's state after the change answers. */
static void control_run(struct sq_daemon *d, const struct sq_server_req *req, int64_t id,
                        struct sq_daemon__out *o, struct sq_server_resp *resp)
{
    char why[256] = "";
    json_t *a = NULL;
    int rc = sq_daemon__control_running(d, id, req->body, req->body_len, &a, why, sizeof(why));
    if (rc == -ENOENT) {
        struct sq_store_run r;
        if (!run_or_answer(d, id, &r, o, resp))
            return;
        answer_error(o, resp, 409, "run %lld is %s: only a running run can be changed",
                     (long long)id, sq_store_status_name(r.status));
        sq_store_run_dispose(&r);
        return;
    }
    if (rc < 0) {
        answer_error(o, resp, rc == -SQ_EUSAGE ? 400 : rc == -ENOMEM ? 503 : 409, "%s", why);
        return;
    }
    if (a) {
        json_object_set_new(a, "id", json_integer((json_int_t)id));
        char *line = json_dumps(a, JSON_COMPACT);
        sq_daemon__log(d, "run %lld: control %s", (long long)id, line ? line : "");
        free(line);
        sq_daemon__live_control(d, id, a);
    }
    answer_json(o, resp, 200, a);
}

/* ---- the gate ---- */

/* Constant time in the token's bytes: a wrong guess learns nothing from the timing but (at
 * most) the token's length. */
static bool token_ok(const struct sq_daemon *d, const struct sq_server_req *req)
{
    const struct sq_h1_header *h = sq_server_req_header(req, "authorization");
    if (!h || h->value_len < 7 || !sq_ieq(h->value, 7, "bearer ", 7))
        return false;
    const char *v = h->value + 7;
    size_t n = h->value_len - 7;
    while (n && (*v == ' ' || *v == '\t'))
        v++, n--;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    unsigned diff = n != d->token_len;
    for (size_t i = 0; i < d->token_len; i++)
        diff |= (unsigned char)d->token[i] ^ (unsigned char)(i < n ? v[i] : 0);
    return diff == 0;
}

/* A Host header naming this machine's loopback: localhost, 127.x.y.z or [::1], any port. */
static bool host_is_loopback(const char *p, size_t n)
{
    const char *colon = NULL;
    if (n && p[0] == '[') {
        const char *rb = memchr(p, ']', n);
        if (!rb)
            return false;
        return (size_t)(rb - p) == 4 && memcmp(p, "[::1", 4) == 0;
    }
    colon = memchr(p, ':', n);
    size_t hn = colon ? (size_t)(colon - p) : n;
    if (sq_ieq(p, hn, "localhost", 9))
        return true;
    if (hn >= 4 && memcmp(p, "127.", 4) == 0) {
        for (size_t i = 4; i < hn; i++)
            if (!((p[i] >= '0' && p[i] <= '9') || p[i] == '.'))
                return false;
        return true;
    }
    return false;
}

/* Origin equals "http://" + Host (the dashboard itself, or a page on the same origin). */
static bool same_origin(const struct sq_h1_header *origin, const struct sq_h1_header *host)
{
    if (!host)
        return false;
    const char *o = origin->value;
    size_t n = origin->value_len;
    if (n > 7 && memcmp(o, "http://", 7) == 0)
        return n - 7 == host->value_len && strncasecmp(o + 7, host->value, n - 7) == 0;
    return false;
}

static bool is(const struct sq_server_req *r, const char *m)
{
    size_t n = strlen(m);
    return r->method_len == n && memcmp(r->method, m, n) == 0;
}

static void method_not_allowed(struct sq_daemon__out *o, struct sq_server_resp *resp,
                               const char *allow)
{
    hdr(o, "Allow: %s\r\n", allow);
    answer_error(o, resp, 405, "method not allowed here (allowed: %s)", allow);
}

static const char page_headers[] = "X-Content-Type-Options: nosniff\r\n"
                                   "Referrer-Policy: no-referrer\r\n"
                                   "Cache-Control: no-store\r\n";

static void serve_page(struct sq_daemon *d, struct sq_daemon__out *o, struct sq_server_resp *resp,
                       int status)
{
    hdr(o, "Content-Security-Policy: %s\r\n%s", sq_daemon__page_csp, page_headers);
    resp->status = status;
    resp->content_type = "text/html; charset=utf-8";
    resp->body = d->page; /* static for the daemon's life: not copied into tl_out */
    resp->body_len = d->page_len;
}

/* POST and DELETE /mcp: the transport's own checks here, the rest on the ops thread
 * (daemon/mcp.c). */
static void mcp_route(struct sq_daemon *d, const struct sq_server_req *req,
                      struct sq_server_resp *resp, struct sq_daemon__out *o, const char *cors)
{
    if (is(req, "GET") || is(req, "HEAD"))
        return method_not_allowed(o, resp, "POST, DELETE"); /* no server-initiated stream */
    if (!is(req, "POST") && !is(req, "DELETE"))
        return method_not_allowed(o, resp, "POST, DELETE");
    const struct sq_h1_header *pv = sq_server_req_header(req, "mcp-protocol-version");
    if (pv) {
        static const char *const known[] = {SQ_MCP_PROTOCOL, "2025-03-26", "2024-11-05"};
        bool ok = false;
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            ok |= sq_ieq(pv->value, pv->value_len, known[i], strlen(known[i]));
        if (!ok)
            return answer_error(o, resp, 400,
                                "MCP-Protocol-Version: unsupported (this server speaks %s, "
                                "2025-03-26 and 2024-11-05)",
                                SQ_MCP_PROTOCOL);
    }
    if (is(req, "POST")) {
        const struct sq_h1_header *acc = sq_server_req_header(req, "accept");
        if (acc && !memmem(acc->value, acc->value_len, "application/json", 16) &&
            !memmem(acc->value, acc->value_len, "*/*", 3) &&
            !memmem(acc->value, acc->value_len, "application/*", 13))
            return answer_error(o, resp, 406, "Accept: this endpoint answers application/json");
        if (!req->body_len)
            return answer_error(o, resp, 400, "POST /mcp needs a JSON-RPC message as its body");
    }
    hold_for_ops(d, req, resp, o, OP_MCP, 0, cors);
}

/* /inbox and everything under it (the query aside). */
static bool is_inbox(const char *path, size_t pn)
{
    return pn >= 6 && memcmp(path, "/inbox", 6) == 0 && (pn == 6 || path[6] == '/');
}

/* GET /metrics: the Prometheus text format. */
static void get_metrics(struct sq_daemon *d, struct sq_daemon__out *o, struct sq_server_resp *resp)
{
    struct sq_buf b = {0};
    if (sq_daemon__metrics(d, &b) < 0) {
        sq_buf_dispose(&b);
        return answer_error(o, resp, 500, "out of memory");
    }
    set_body(o, b.p, b.len);
    sq_buf_dispose(&b);
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

/* /runs/{id} and its sub-resources (p..e: the path after "/runs/"). False when the path names
 * none of them (the caller answers 404). */
static bool route_run(struct sq_daemon *d, const struct sq_server_req *req,
                      struct sq_server_resp *resp, struct sq_daemon__out *o, const char *p,
                      const char *e, const char *cors)
{
    bool get = is(req, "GET") || is(req, "HEAD");
    const char *slash = memchr(p, '/', (size_t)(e - p));
    int64_t id;
    if (!parse_id(p, (size_t)((slash ? slash : e) - p), &id)) {
        answer_error(o, resp, 404, "no such run");
        return true;
    }
    if (!slash) {
        if (get)
            get_run(d, id, o, resp);
        else if (is(req, "DELETE"))
            hold_for_ops(d, req, resp, o, OP_DELETE, id, cors);
        else
            method_not_allowed(o, resp, "GET, HEAD, DELETE");
        return true;
    }
    const char *sub = slash + 1;
    size_t sn = (size_t)(e - sub);
#define SUB(lit) (sn == sizeof(lit) - 1 && memcmp(sub, lit, sn) == 0)
    if (SUB("live")) { /* an event stream (text/event-stream): GET only */
        if (!is(req, "GET"))
            method_not_allowed(o, resp, "GET");
        else
            sq_daemon__live_follow(d, req, resp, id, cors);
    } else if (SUB("stop")) {
        if (!is(req, "POST"))
            method_not_allowed(o, resp, "POST");
        else
            stop_run(d, req, id, o, resp, cors);
    } else if (SUB("control")) {
        if (!is(req, "POST"))
            method_not_allowed(o, resp, "POST");
        else
            control_run(d, req, id, o, resp);
    } else if (SUB("series") || SUB("result") || SUB("report")) {
        if (!get)
            method_not_allowed(o, resp, "GET, HEAD");
        else if (SUB("series"))
            get_series(d, id, o, resp);
        else if (SUB("result"))
            get_result(d, id, o, resp);
        else
            get_report(d, id, o, resp);
    } else {
        return false;
    }
#undef SUB
    return true;
}

static void route(struct sq_daemon *d, const struct sq_server_req *req, struct sq_server_resp *resp,
                  struct sq_daemon__out *o, const char *path, size_t pn, const char *q, size_t qn,
                  const char *cors)
{
    bool get = is(req, "GET") || is(req, "HEAD");
    if (is_inbox(path, pn)) /* the webhook inbox: captures, and its API under /inbox/_inbox/ */
        return sq_inbox_handle(d->inbox, req, 6, resp);
    if (pn == 1 && path[0] == '/') {
        if (!get)
            return method_not_allowed(o, resp, "GET, HEAD");
        return serve_page(d, o, resp, 200);
    }
#define PATH(lit) (pn == sizeof(lit) - 1 && memcmp(path, lit, pn) == 0)
    if (PATH("/health")) {
        if (!get)
            return method_not_allowed(o, resp, "GET, HEAD");
        return get_health(d, o, resp);
    }
    if (PATH("/metrics")) {
        if (!get)
            return method_not_allowed(o, resp, "GET, HEAD");
        return get_metrics(d, o, resp);
    }
    if (PATH("/config")) {
        if (get)
            return answer_json(o, resp, 200, sq_daemon__config_json(d));
        if (is(req, "PUT"))
            return put_config(d, req, o, resp);
        return method_not_allowed(o, resp, "GET, HEAD, PUT");
    }
    if (PATH("/openapi.json")) {
        if (!get)
            return method_not_allowed(o, resp, "GET, HEAD");
        resp->status = 200;
        resp->content_type = "application/json";
        resp->body = (const char *)sq_daemon_openapi_json;
        resp->body_len = sq_daemon_openapi_json_len;
        return;
    }
    if (PATH("/validate")) {
        if (!is(req, "POST"))
            return method_not_allowed(o, resp, "POST");
        return hold_for_ops(d, req, resp, o, OP_VALIDATE, 0, cors);
    }
    if (PATH("/compare")) {
        if (!get)
            return method_not_allowed(o, resp, "GET, HEAD");
        return get_compare(d, q, qn, o, resp);
    }
    if (PATH("/mcp"))
        return mcp_route(d, req, resp, o, cors);
    if (PATH("/runs")) {
        if (get)
            return get_runs(d, q, qn, o, resp);
        if (is(req, "POST"))
            return hold_for_ops(d, req, resp, o, OP_CREATE, 0, cors);
        return method_not_allowed(o, resp, "GET, HEAD, POST");
    }
#undef PATH
    if (pn > 6 && memcmp(path, "/runs/", 6) == 0 &&
        route_run(d, req, resp, o, path + 6, path + pn, cors))
        return;
    answer_error(o, resp, 404, "no such endpoint (the API is described at /openapi.json)");
}

/* What the gate and the route need of a request, found once. */
struct req_view {
    const char *path, *q; /* the path without its query; the query without its '?' */
    size_t pn, qn;
    const struct sq_h1_header *origin, *host, *ct;
    const char *cors; /* the CORS header lines when the Origin is the configured one */
    int64_t t0;       /* for the access log */
};

/* Resets the answer's scratch and looks at the request (API thread only). */
static void view_begin(struct sq_daemon *d, const struct sq_server_req *req, struct req_view *v)
{
    struct sq_daemon__out *o = &d->out;
    v->t0 = d->access_log ? sq_now_ns() : 0;
    o->hlen = 0;
    o->hdrs[0] = '\0';
    o->held = false;
    sq_buf_reset(&o->body);
    v->path = req->path;
    v->q = "";
    v->pn = req->path_len;
    v->qn = 0;
    const char *qm = memchr(v->path, '?', v->pn);
    if (qm) {
        v->q = qm + 1;
        v->qn = v->pn - (size_t)(v->q - v->path);
        v->pn = (size_t)(qm - v->path);
    }
    v->origin = sq_server_req_header(req, "origin");
    v->host = sq_server_req_header(req, "host");
    v->ct = sq_server_req_header(req, "content-type");
    v->cors = NULL;
    if (d->cors_origin && v->origin && v->origin->value_len == strlen(d->cors_origin) &&
        memcmp(v->origin->value, d->cors_origin, v->origin->value_len) == 0) {
        v->cors = d->cors_headers;
        hdr(o, "%s", v->cors);
    }
}

/* The checks every request passes before its route (the file comment). at_head: asked by the
 * server as soon as the head of a request with a body is in (sq_daemon__on_head), so that a
 * refusal needs no body byte: a preflight is left to the handler, and the body's type is checked
 * whatever its length. Returns true when it answered (a refusal). */
static bool gate(struct sq_daemon *d, const struct sq_server_req *req, struct sq_server_resp *resp,
                 const struct req_view *v, bool at_head)
{
    struct sq_daemon__out *o = &d->out;
    bool unsafe = !(is(req, "GET") || is(req, "HEAD") || is(req, "OPTIONS"));
    size_t max_body;
    pthread_mutex_lock(&d->mu);
    max_body = d->cfg.max_body;
    pthread_mutex_unlock(&d->mu);
    bool json = v->ct && sq_h1_media_type_is(v->ct->value, v->ct->value_len, "application/json");

    if (is(req, "OPTIONS")) {
        if (at_head)
            return false;
        if (v->cors) {
            hdr(o, "Access-Control-Allow-Methods: GET, HEAD, POST, PUT, DELETE\r\n"
                   "Access-Control-Allow-Headers: Authorization, Content-Type, Mcp-Session-Id, "
                   "MCP-Protocol-Version\r\n"
                   "Access-Control-Expose-Headers: Mcp-Session-Id\r\n"
                   "Access-Control-Max-Age: 600\r\n");
            resp->status = 204;
        } else {
            hdr(o, "Allow: GET, HEAD, POST, PUT, DELETE\r\n");
            answer_error(o, resp, 405, "no cross-origin access is configured (--cors-origin)");
        }
    } else if (d->check_host &&
               (!v->host || !host_is_loopback(v->host->value, v->host->value_len))) {
        answer_error(o, resp, 403,
                     "this daemon answers only requests to a loopback host name (localhost, "
                     "127.0.0.1, [::1]): start it with --token-file to serve other names");
    } else if (unsafe && v->origin && !v->cors && !same_origin(v->origin, v->host)) {
        answer_error(o, resp, 403, "cross-origin requests are refused (see --cors-origin)");
    } else if (d->token && !token_ok(d, req)) {
        d->unauthorized++;
        hdr(o, "WWW-Authenticate: Bearer realm=\"squall\"\r\n");
        if ((v->pn == 1 && v->path[0] == '/') && (is(req, "GET") || is(req, "HEAD")))
            serve_page(d, o, resp, 401); /* the page asks for the token, then calls the API */
        else
            answer_error(o, resp, 401, "a bearer token is required (Authorization: Bearer ...)");
    } else if (req->body_len > max_body) {
        answer_error(o, resp, 413, "the body is larger than max_body (%zu bytes)", max_body);
    } else if ((req->body_len || at_head) && !is_inbox(v->path, v->pn) && !json) {
        answer_error(o, resp, 415, "a request body must be JSON (Content-Type: application/json)");
    } else {
        return false;
    }
    return true;
}

/* The answer is decided: its body and headers from the scratch, counted, logged. */
static void view_end(struct sq_daemon *d, const struct sq_server_req *req,
                     struct sq_server_resp *resp, const struct req_view *v)
{
    struct sq_daemon__out *o = &d->out;
    if (!resp->body) {
        resp->body = o->body.p;
        resp->body_len = o->body.len;
    }
    if (!resp->headers) {
        if (resp->content_type && strncmp(resp->content_type, "text/html", 9) != 0)
            hdr(o, "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n");
        resp->headers = o->hdrs;
        resp->headers_len = o->hlen;
    }
    int st = resp->status ? resp->status : 200;
    if (!o->held && st / 100 < 6)
        d->answers[st / 100]++;
    if (d->access_log && !o->held) {
        /* path only (no query: a token must never be logged, nor anything a query carries) */
        sq_daemon__log(d, "%.*s %.*s %d %.2fms", (int)req->method_len, req->method,
                       (int)(v->pn > 200 ? 200 : v->pn), v->path, st,
                       (double)(sq_now_ns() - v->t0) / 1e6);
    }
}

void sq_daemon__on_head(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    struct sq_daemon *d = ud;
    struct req_view v;
    view_begin(d, req, &v);
    if (gate(d, req, resp, &v, true))
        view_end(d, req, resp, &v); /* refused: the server answers and closes */
}

void sq_daemon__handler(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    struct sq_daemon *d = ud;
    struct req_view v;
    view_begin(d, req, &v);
    if (!gate(d, req, resp, &v, false))
        route(d, req, resp, &d->out, v.path, v.pn, v.q, v.qn, v.cors);
    view_end(d, req, resp, &v);
}
