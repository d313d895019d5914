/* daemon/live.c - the run in progress as the API sees it, and its Server-Sent Events.
 *
 * The runner renders each second's event once (text, "id:", "event: second", one "data:" line)
 * and appends it to the live run under its mutex; the API thread sends it to every follower.
 * A follower that connects late gets the events so far from the live run's memory (a running
 * run) or from the store (an ended one: a plain, finite answer), then the rest as they come.
 *
 * Events (docs/daemon.md):
 *   event: status   data: {"run": 7, "status": "queued" | "running"}
 *   event: second   data: {"run": 7, "second": {a series entry of the result document},
 *                          "totals": {running totals}}           id: the second's index
 *   event: control  data: {"run": 7, "control": {the change's answer: kind, value, t_s, state}}
 *   event: live     data: {"run": 7, "t_s", "rows": [...], "thresholds": [...]} (livetab.c):
 *                   not kept with the seconds; a follower gets the latest, after the seconds
 *   event: end      data: {"run": 7, "status": "finished", "reason": null, "result": {...}}
 * The totals ride in the store too (the series' extra JSON), so a replayed second reads exactly
 * like the live one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/internal.h"
#include "output/json.h"
#include "output/plan_json.h"

const double sq_daemon__buckets_s[SQ_DAEMON_NBUCKETS - 1] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

static const char *const class_names[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};

int sq_daemon__live_new(int64_t id, struct sq_daemon__live **out)
{
    struct sq_daemon__live *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    int rc = pthread_mutex_init(&l->mu, NULL);
    if (rc != 0) {
        free(l);
        return -rc;
    }
    l->id = id;
    l->status = SQ_STORE_RUNNING;
    *out = l;
    return 0;
}

void sq_daemon__live_free(struct sq_daemon__live *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->nev; i++)
        free(l->ev[i]);
    free(l->ev);
    free(l->end_ev);
    free(l->live_ev);
    free(l->cm_value);
    free(l->cm_samples);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* ---- rendering ---- */

static char *dump(json_t *o)
{
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

char *sq_daemon__totals_json(const struct sq_daemon__totals *t)
{
    json_t *st = json_object(), *ek = json_object();
    for (int i = 1; i <= 6; i++) /* 1xx..5xx, then other: the document's order */
        json_object_set_new(st, class_names[i % 6], json_integer((json_int_t)t->status[i % 6]));
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        json_object_set_new(ek, sq_errk_name((enum sq_errk)k),
                            json_integer((json_int_t)t->errk[k]));
    double rps = t->elapsed_s > 0 ? (double)t->completed / t->elapsed_s : 0;
    return dump(json_pack("{s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I, "
                          "s:I, s:I, s:o, s:o}",
                          "elapsed_s", t->elapsed_s, "requests", (json_int_t)t->sent, "completed",
                          (json_int_t)t->completed, "failed", (json_int_t)t->failed, "dropped",
                          (json_int_t)t->dropped, "errors", (json_int_t)t->errors, "bytes_received",
                          (json_int_t)t->bytes_received, "rps", rps, "last_rps", t->rps, "p50_us",
                          (json_int_t)t->p50_us, "p90_us", (json_int_t)t->p90_us, "p99_us",
                          (json_int_t)t->p99_us, "max_us", (json_int_t)t->max_us, "vus",
                          (json_int_t)t->vus, "in_flight", (json_int_t)t->in_flight, "status", st,
                          "errors_by_kind", ek));
}

/* "id: N\nevent: NAME\ndata: TEXT\n\n" (id left out when idx < 0). */
static char *event(const char *name, int64_t idx, const char *data)
{
    size_t n = strlen(data) + strlen(name) + 64;
    char *s = malloc(n);
    if (!s)
        return NULL;
    if (idx >= 0)
        snprintf(s, n, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)idx, name, data);
    else
        snprintf(s, n, "event: %s\ndata: %s\n\n", name, data);
    return s;
}

char *sq_daemon__second_json(const struct sq_second *s, bool client, bool open,
                             const struct sq_plan *p)
{
    json_t *o = sq_report_json_second(s, client, open);
    if (o && p && s->m && s->nm) {
        json_t *m = sq_report_json_msecond(p, s->m, s->nm);
        if (!m) {
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, "custom_metrics", m);
    }
    return dump(o);
}

char *sq_daemon__fine_json(const struct sq_fine_bin *v, uint32_t n, int64_t bin_ns, double t0_s)
{
    if (!n)
        return NULL;
    json_t *done = json_array(), *failed = json_array(), *mx = json_array();
    for (uint32_t i = 0; done && failed && mx && i < n; i++) {
        json_array_append_new(done, json_integer(v[i].completed));
        json_array_append_new(failed, json_integer(v[i].failed));
        json_array_append_new(mx, json_integer(v[i].max_us));
    }
    json_t *o = json_pack("{s:f, s:f, s:o, s:o, s:o}", "bin_s", (double)bin_ns / 1e9, "t0_s", t0_s,
                          "completed", done, "failed", failed, "max_us", mx);
    char *txt = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))
                  : NULL; /* 0.1, not 0.10000000000000001 */
    json_decref(o);
    return txt;
}

char *sq_daemon__event_second(int64_t run, int64_t idx, const char *second_json,
                              const char *totals_json, const char *fine_json)
{
    if (!second_json)
        return NULL;
    size_t n = strlen(second_json) + strlen(totals_json ? totals_json : "null") +
               (fine_json ? strlen(fine_json) : 0) + 64;
    char *data = malloc(n);
    char *ev = NULL;
    if (data) {
        snprintf(data, n, "{\"run\":%lld,\"second\":%s,\"totals\":%s%s%s}", (long long)run,
                 second_json, totals_json ? totals_json : "null", fine_json ? ",\"fine\":" : "",
                 fine_json ? fine_json : "");
        ev = event("second", idx, data);
    }
    free(data);
    return ev;
}

char *sq_daemon__event_end(int64_t run, enum sq_store_status st, const char *reason,
                           const char *doc, size_t doc_len)
{
    char *head = dump(json_pack("{s:I, s:s, s:o}", "run", (json_int_t)run, "status",
                                sq_store_status_name(st), "reason",
                                reason ? json_string(reason) : json_null()));
    if (!head)
        return NULL;
    size_t hl = strlen(head);
    size_t n = hl + (doc ? doc_len : 4) + 64;
    char *data = malloc(n);
    char *ev = NULL;
    if (data) {
        /* head is an object: splice the stored document in as "result" without parsing it */
        memcpy(data, head, hl - 1);
        size_t k = hl - 1;
        k += (size_t)snprintf(data + k, n - k, ",\"result\":");
        if (doc) {
            memcpy(data + k, doc, doc_len);
            k += doc_len;
        } else {
            memcpy(data + k, "null", 4);
            k += 4;
        }
        data[k++] = '}';
        data[k] = '\0';
        ev = event("end", -1, data);
    }
    free(data);
    free(head);
    return ev;
}

char *sq_daemon__event_status(int64_t run, enum sq_store_status st)
{
    char data[96];
    snprintf(data, sizeof(data), "{\"run\":%lld,\"status\":\"%s\"}", (long long)run,
             sq_store_status_name(st));
    return event("status", -1, data);
}

/* ---- followers ---- */

static void sub_unlink(struct sq_daemon *d, struct sq_daemon__sub *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        d->subs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    d->nsubs--;
    free(s);
}

static void sub_gone(void *ud)
{
    struct sq_daemon__sub *s = ud;
    sub_unlink(s->d, s);
}

/* Writes text to s; on failure the hold is over and s is gone. Returns false then. */
static bool sub_write(struct sq_daemon *d, struct sq_daemon__sub *s, const char *p, size_t n)
{
    if (sq_server_hold_write(s->h, p, n) == 0)
        return true;
    sub_unlink(d, s);
    return false;
}

static void sub_end(struct sq_daemon *d, struct sq_daemon__sub *s)
{
    (void)sq_server_hold_end(s->h); /* closes on failure: the hold is over either way */
    sub_unlink(d, s);
}

/* Sends s the live events it has not seen, and the end when there is one. Returns false when
 * s is gone (ended or failed). */
static bool sub_catch_up(struct sq_daemon *d, struct sq_daemon__sub *s, struct sq_daemon__live *l)
{
    struct sq_buf b = {0};
    bool end = false;
    pthread_mutex_lock(&l->mu);
    for (; s->next_ev < l->nev; s->next_ev++)
        if (sq_buf_append(&b, l->ev[s->next_ev], strlen(l->ev[s->next_ev])) < 0)
            break;
    if (l->live_ev && s->live_seq != l->live_seq && s->next_ev == l->nev &&
        sq_buf_append(&b, l->live_ev, strlen(l->live_ev)) == 0)
        s->live_seq = l->live_seq; /* only the latest: the tables are the run so far */
    if (l->end_ev && s->next_ev == l->nev) {
        end = sq_buf_append(&b, l->end_ev, strlen(l->end_ev)) == 0;
    }
    pthread_mutex_unlock(&l->mu);
    bool ok = !b.len || sub_write(d, s, b.p, b.len);
    sq_buf_dispose(&b);
    if (ok && end) {
        sub_end(d, s);
        return false;
    }
    return ok;
}

static const char sse_headers[] = "Cache-Control: no-store\r\nX-Accel-Buffering: no\r\n"
                                  "X-Content-Type-Options: nosniff\r\n";

/* The stored run, replayed: every second, then the end (a finite answer). */
static void replay(struct sq_daemon *d, const struct sq_store_run *r, struct sq_server_resp *resp,
                   struct sq_buf *b)
{
    char err[256];
    struct sq_store_series se = {0};
    struct sq_store_result res = {0};
    bool has_doc = false;
    if (sq_store_series_get(d->store, r->id, 0, &se, err, sizeof(err)) < 0)
        se.n = 0;
    if (r->has_result && sq_store_result_get(d->store, r->id, &res, err, sizeof(err)) == 0)
        has_doc = true;
    for (size_t i = 0; i < se.n; i++) {
        const struct sq_store_second *x = &se.v[i];
        struct sq_second s = {
            .t_s = x->t_s,
            .len_s = x->len_s,
            .sent = x->sent,
            .completed = x->completed,
            .failed = x->failed,
            .dropped = x->dropped,
            .errors = x->errors,
            .bytes_received = x->bytes,
            .active = x->active,
            .p50_us = x->p50_us,
            .p90_us = x->p90_us,
            .p99_us = x->p99_us,
            .max_us = x->max_us,
        };
        /* the extra is {"totals": {...}, "second": {...}}: take the objects' text as it is (a
         * second stored without its entry is rebuilt from the columns) */
        char *totals = NULL, *entry = NULL;
        json_t *ex = x->extra ? json_loads(x->extra, 0, NULL) : NULL;
        if (ex && json_is_object(json_object_get(ex, "totals")))
            totals = json_dumps(json_object_get(ex, "totals"), JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (ex && json_is_object(json_object_get(ex, "second")))
            entry = json_dumps(json_object_get(ex, "second"), JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(ex);
        if (!entry)
            entry = sq_daemon__second_json(&s, false, false, NULL);
        char *ev = sq_daemon__event_second(r->id, x->idx, entry, totals, NULL);
        free(entry);
        free(totals);
        if (ev && sq_buf_append(b, ev, strlen(ev)) < 0)
            i = se.n;
        free(ev);
    }
    char *end = sq_daemon__event_end(r->id, r->status, r->reason, has_doc ? res.doc : NULL,
                                     has_doc ? res.doc_len : 0);
    if (end && sq_buf_append(b, end, strlen(end)) < 0)
        b->len = 0;
    free(end);
    sq_store_series_dispose(&se);
    sq_store_result_dispose(&res);
    resp->status = 200;
    resp->content_type = "text/event-stream";
    resp->body = b->p;
    resp->body_len = b->len;
}

void sq_daemon__live_follow(struct sq_daemon *d, const struct sq_server_req *req,
                            struct sq_server_resp *resp, int64_t id, const char *cors)
{
    struct sq_buf *bp = &d->live_body; /* the answer's bytes: copied by the server */
    char *hdrs = d->live_hdrs;
    sq_buf_reset(bp);
    char err[256];
    struct sq_store_run r;
    int rc = sq_store_run_get(d->store, id, &r, err, sizeof(err));
    snprintf(hdrs, sizeof(d->live_hdrs), "%s%s", sse_headers, cors ? cors : "");
    resp->headers = hdrs;
    resp->headers_len = strlen(hdrs);
    if (rc < 0) {
        char *body = sq_daemon__error_body(rc == -ENOENT ? "no such run" : err);
        if (sq_buf_append(bp, body, strlen(body)) < 0)
            bp->len = 0;
        free(body);
        resp->status = rc == -ENOENT ? 404 : 500;
        resp->content_type = "application/json";
        resp->body = bp->p;
        resp->body_len = bp->len;
        resp->headers = cors;
        resp->headers_len = cors ? strlen(cors) : 0;
        return;
    }
    if (sq_store_status_ended(r.status)) {
        replay(d, &r, resp, bp);
        sq_store_run_dispose(&r);
        return;
    }
    if (d->nsubs >= SQ_DAEMON_MAX_FOLLOWERS) {
        sq_store_run_dispose(&r);
        resp->status = 503;
        resp->content_type = "application/json";
        resp->body = "{\"error\":\"too many live followers: at most 256 at once\"}";
        resp->body_len = strlen(resp->body);
        resp->headers = cors;
        resp->headers_len = cors ? strlen(cors) : 0;
        return;
    }
    _Static_assert(SQ_DAEMON_MAX_FOLLOWERS == 256, "the refusal's text names the cap");
    struct sq_daemon__sub *s = calloc(1, sizeof(*s));
    struct sq_server_hold *h = s ? sq_server_hold(req, sub_gone, s) : NULL;
    if (!h) {
        free(s);
        sq_store_run_dispose(&r);
        resp->status = 503;
        resp->content_type = "application/json";
        resp->body = "{\"error\":\"cannot follow the run now\"}";
        resp->body_len = strlen(resp->body);
        return;
    }
    s->d = d;
    s->h = h;
    s->run = id;
    s->next = d->subs;
    if (d->subs)
        d->subs->prev = s;
    d->subs = s;
    d->nsubs++;
    d->sse_total++;
    struct sq_daemon__live *l = d->cur && d->cur->id == id ? d->cur : NULL;
    /* the first chunk: the status, and the seconds so far (the server sends it after the
     * handler returns, in order; hold_write may not be called from here) */
    char *first = sq_daemon__event_status(id, l ? SQ_STORE_RUNNING : r.status);
    sq_store_run_dispose(&r);
    if (first && sq_buf_append(bp, first, strlen(first)) < 0)
        bp->len = 0;
    free(first);
    if (l) { /* an end already there follows with the runner's end post */
        pthread_mutex_lock(&l->mu);
        for (; s->next_ev < l->nev; s->next_ev++)
            if (sq_buf_append(bp, l->ev[s->next_ev], strlen(l->ev[s->next_ev])) < 0)
                break;
        if (l->live_ev && s->next_ev == l->nev &&
            sq_buf_append(bp, l->live_ev, strlen(l->live_ev)) == 0)
            s->live_seq = l->live_seq;
        pthread_mutex_unlock(&l->mu);
    }
    resp->status = 200;
    resp->content_type = "text/event-stream";
    resp->body = bp->p;
    resp->body_len = bp->len;
}

void sq_daemon__live_begin(struct sq_daemon *d, struct sq_daemon__live *l)
{
    d->cur = l;
    char *ev = sq_daemon__event_status(l->id, SQ_STORE_RUNNING);
    for (struct sq_daemon__sub *s = d->subs, *next; s; s = next) {
        next = s->next;
        if (s->run != l->id)
            continue;
        if (ev && !sub_write(d, s, ev, strlen(ev)))
            continue;
        (void)sub_catch_up(d, s, l);
    }
    free(ev);
}

void sq_daemon__live_tick(struct sq_daemon *d, struct sq_daemon__live *l)
{
    for (struct sq_daemon__sub *s = d->subs, *next; s; s = next) {
        next = s->next;
        if (s->run == l->id)
            (void)sub_catch_up(d, s, l);
    }
    sq_daemon__mcp_tick(d, l);
}

void sq_daemon__live_control(struct sq_daemon *d, int64_t id, const json_t *change)
{
    struct sq_daemon__live *l = d->cur;
    if (!l || l->id != id || !change)
        return;
    char *text = dump(json_pack("{s:I, s:O}", "run", (json_int_t)id, "control", (json_t *)change));
    char *ev = text ? event("control", -1, text) : NULL;
    free(text);
    if (!ev)
        return;
    pthread_mutex_lock(&l->mu);
    if (l->nev == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->ev, cap * sizeof(*v));
        if (v) {
            l->ev = v;
            l->cap = cap;
        }
    }
    if (l->nev < l->cap) {
        l->ev[l->nev++] = ev;
        ev = NULL;
    }
    pthread_mutex_unlock(&l->mu);
    free(ev);
    for (struct sq_daemon__sub *s = d->subs, *next; s; s = next) {
        next = s->next;
        if (s->run == id)
            (void)sub_catch_up(d, s, l);
    }
}

void sq_daemon__live_end(struct sq_daemon *d, struct sq_daemon__live *l)
{
    for (struct sq_daemon__sub *s = d->subs, *next; s; s = next) {
        next = s->next;
        if (s->run == l->id)
            (void)sub_catch_up(d, s, l); /* ends it: end_ev is set */
    }
    if (d->cur == l)
        d->cur = NULL;
    /* every follower has its end; a late one replays the store: keep only the totals (for
     * /metrics), not the run's events */
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < l->nev; i++)
        free(l->ev[i]);
    free(l->ev);
    free(l->end_ev);
    free(l->live_ev);
    l->ev = NULL;
    l->end_ev = NULL;
    l->live_ev = NULL;
    l->nev = l->cap = 0;
    pthread_mutex_unlock(&l->mu);
    if (d->last != l) {
        sq_daemon__live_free(d->last);
        d->last = l;
    }
}

void sq_daemon__live_cancelled(struct sq_daemon *d, int64_t id, enum sq_store_status st,
                               const char *reason)
{
    char *ev = sq_daemon__event_end(id, st, reason, NULL, 0);
    for (struct sq_daemon__sub *s = d->subs, *next; s; s = next) {
        next = s->next;
        if (s->run != id)
            continue;
        if (ev && !sub_write(d, s, ev, strlen(ev)))
            continue;
        sub_end(d, s);
    }
    free(ev);
}

void sq_daemon__live_close_all(struct sq_daemon *d)
{
    while (d->subs)
        sub_end(d, d->subs);
}
