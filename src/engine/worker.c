/* engine/worker.c - VUs, scheduling and accounting for every executor and every protocol.
 *
 * A worker opens its share of the connection pool before the common start, so connection setup
 * is never inside the measurement. Then:
 *  - closed model (VU executors): each VU runs iterations back to back, optionally paced, while
 *    it is active (ramping-vus activates and parks VUs over time);
 *  - open model (arrival rates): the worker follows an absolute schedule, arrival i due at
 *    start + T(i) for i = windex, windex + n, ...; each wake-up dispatches every arrival that is
 *    due to an idle VU, or queues it (bounded by the in-flight cap) until one is free, or drops
 *    it. Latency is measured from the arrival's intended time, and also from the actual send
 *    (the uncorrected figure).
 *
 * The bytes are a driver's (engine/driver.h): h1drv.c for HTTP/1.1, h2drv.c for HTTP/2. The
 * worker calls its driver to connect a VU, send its request, close it, sweep and end the run;
 * the driver calls back when a request completes or fails and when a VU is free. Per request
 * the worker adds one indirect call (send) to what the driver costs; the HTTP/1.1 steady state
 * stays one send(), one read() (usually), one clock read and no allocation.
 *
 * Timeouts are found by a sweep of the worker's VUs every 100 ms instead of a timer per request:
 * arming and disarming a heap timer on every request would cost more than the scan.
 *
 * Scripts: a worker with a wrk-style Lua state calls only the hooks it defines (request(),
 * response(), delay()) and otherwise sends its state's static request down the same path as a
 * request built from flags; a plan's before/after hooks run only for steps that name them. A
 * request() string may hold a pipelined batch: each of its requests is counted, timed and
 * answered on its own (c->pending), so the invariants below hold per request.
 *
 * Accounting invariants, per worker and so per run:
 *   c.sent == c.completed + c.failed + in_flight
 *   open model: arrivals == c.sent + c.dropped
 * conn_send counts a request sent; exactly one of conn_complete or conn_fail ends it, or it is
 * in flight when the worker leaves its loop. An arrival is dispatched, queued (w->qlen) or
 * dropped; where one arrival sends a fixed number of requests (w->per_arrival) the second line
 * reads arrivals == c.sent / per_arrival + c.dropped + qlen at every moment. acct_check states
 * both with SQ_ASSERT after each change of a count (base/assert.h: checked in the Debug,
 * sanitizer and fuzz builds, compiled out of the measured one).
 */
#include "engine/worker.h"

#include <pthread.h>
#include <sched.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "base/assert.h"
#include "base/clock.h"
#include "engine/busconf.h"
#include "engine/busws.h"
#include "engine/client.h"
#include "engine/driver.h"
#include "engine/flow.h"
#include "engine/flowbus.h"
#include "http/decode.h"
#include "loop/loop.h"
#include "plan/tmpl.h"
#include "script/script.h"
#include "stats/hist.h"

#define SWEEP_NS              (100 * SQ_NS_PER_MS)
#define SQ_PACING_TAIL_MAX_NS (500 * SQ_NS_PER_US) /* as calibrate_spin clamps (run.c) */
#define DEAF_MAX_NS           SQ_NS_PER_MS /* the longest a worker sleeps deaf to its sockets */
#define IDLE_POLL_NS          (50 * SQ_NS_PER_US) /* the longest a worker polls before sleeping */
#define RAMP_CHECK_NS         (10 * SQ_NS_PER_MS)
#define BACKOFF_MIN_NS        (10 * SQ_NS_PER_MS)
#define BACKOFF_MAX_SHIFT     7 /* 10 ms << 7 = 1.28 s */

static void conn_connect(struct sq_engine__conn *c);
static void conn_next(struct sq_engine__conn *c, int64_t now);
static void flow_step(struct sq_engine__conn *c, int64_t intended, int64_t now);
static bool plan_hook(struct sq_engine__conn *c, enum sq_script_when when, int status,
                      struct sq_script_step_result *res);
static void flow_advance(struct sq_engine__conn *c, int64_t now, bool stop);
static void lane_done(struct sq_engine__conn *l, int64_t now, bool stop);
static void lane_next(struct sq_engine__conn *l, int64_t now);

/* The accounting invariants of the opening comment; empty where asserts are compiled out. */
static inline void acct_check(const struct sq_engine__worker *w)
{
    SQ_ASSERT_MSG(w->c.sent == w->c.completed + w->c.failed + w->in_flight,
                  "sent == completed + failed + in flight");
    SQ_ASSERT(w->arrivals >= w->c.dropped + w->qlen);
    SQ_ASSERT_MSG(!w->open || w->per_arrival == 0 ||
                      w->c.sent ==
                          (uint64_t)w->per_arrival * (w->arrivals - w->c.dropped - w->qlen),
                  "arrivals == sent + dropped + queued");
}

static void publish(struct sq_engine__worker *w)
{
    __atomic_store_n(&w->live.bus_errors, w->c.errors[SQ_ERRK_SERVER_ERROR], __ATOMIC_RELAXED);
    __atomic_store_n(&w->live.progress, w->c.completed + w->c.failed, __ATOMIC_RELAXED);
    __atomic_store_n(&w->live.opened, w->c.conns_opened, __ATOMIC_RELAXED);
    __atomic_store_n(&w->live.connect_errors, w->c.errors[SQ_ERRK_CONNECT], __ATOMIC_RELAXED);
    __atomic_store_n(&w->live.tls_errors, w->c.errors[SQ_ERRK_TLS], __ATOMIC_RELAXED);
    __atomic_store_n(&w->live.upgrade_errors, w->c.errors[SQ_ERRK_UPGRADE], __ATOMIC_RELAXED);
}

/* Closes the VU (its socket, or its stream) and forgets any request in flight (the caller has
 * accounted for it). */
static void bus_step_fail(struct sq_engine__conn *c, enum sq_errk k);

static void conn_close(struct sq_engine__conn *c)
{
    if (SQ_UNLIKELY(c->state == CONN_WAIT))
        bus_step_fail(c, SQ_ERRK_CLOSED); /* its HTTP connection goes: the step with it */
    c->w->drv->close(c);
    if (c->state == CONN_ACTIVE)
        c->w->in_flight -= c->pending;
    sq_timer_stop(c->w->loop, &c->timer);
    c->state = CONN_CLOSED;
    acct_check(c->w); /* what was in flight was counted complete or failed before the close */
}

/* Records one request for the per-request outputs, if sampling is on and it is picked. */
static void sample(struct sq_engine__conn *c, int64_t now, uint16_t status, uint8_t error)
{
    struct sq_engine__worker *w = c->w;
    if (w->sample_below != UINT64_MAX) {
        w->rng ^= w->rng << 13; /* xorshift64 */
        w->rng ^= w->rng >> 7;
        w->rng ^= w->rng << 17;
        if (w->rng >= w->sample_below)
            return;
    }
    uint32_t head = w->rhead;
    if (head - __atomic_load_n(&w->rtail, __ATOMIC_ACQUIRE) == w->rcap) {
        w->samples_lost++;
        return;
    }
    struct sq_sample *s = &w->ring[head & (w->rcap - 1)];
    s->end_ns = now - w->start_ns;
    s->latency_us = (now - c->since_ns) / SQ_NS_PER_US;
    s->wait_us = (c->sent_ns - c->since_ns) / SQ_NS_PER_US;
    s->bytes = status ? c->rd.head_bytes + (uint32_t)c->rd.body.bytes : 0;
    s->status = status;
    s->error = error;
    s->scen = (uint16_t)w->scen;
    if (c->fv)
        s->label = c->fv->in_iter ? (uint16_t)(c->fv->step + 1) : 0;
    else
        s->label = w->ustats ? (uint16_t)(c->url + 1) : 0;
    __atomic_store_n(&w->rhead, head + 1, __ATOMIC_RELEASE);
}

/* Ends the request in flight with an error of kind k (every request still due, for a pipelined
 * batch: each counts one error of that kind). */
static void conn_fail(struct sq_engine__conn *c, enum sq_errk k)
{
    struct sq_engine__worker *w = c->w;
    bool active = c->state == CONN_ACTIVE;
    uint32_t n = active ? c->pending : 1;
    w->c.errors[k] += n;
    if (active) {
        w->c.failed += n;
        int64_t now = sq_loop_now(w->loop);
        sq_engine__fine_bin(w, now)->failed += n;
        if (w->ring)
            sample(c, sq_now_ns(), 0, (uint8_t)(k + 1));
        if (SQ_UNLIKELY(w->ustats != NULL))
            w->ustats[c->url].failed += n;
        if (SQ_UNLIKELY(c->xc != NULL))
            sq_engine__xc_end(c, now, 0, (int)k);
    }
    conn_close(c);
    if (active && c->fv && c->fv->in_iter) {
        /* The step failed: its error is counted; the flow goes on with the next step (or the
         * next iteration, as on_error says) once the connection is replaced. */
        struct sq_step_stats *ss = &w->steps[c->fv->step];
        ss->reqs++;
        ss->errors++;
        ss->failed++;
        w->c.http_failed++;
        if (SQ_UNLIKELY(w->hook_ids != NULL) && w->hook_ids[2 * c->fv->step + 1] >= 0) {
            struct sq_script_step_result res; /* status 0: no response, no headers, no body */
            plan_hook(c, SQ_SCRIPT_AFTER, 0, &res);
        }
        const struct sq_plan_step *ps = w->flow->steps[c->fv->step].ps;
        bool stop = ps->on_error == SQ_ON_ERROR_NEXT_ITERATION;
        if (SQ_UNLIKELY(c->lane))
            lane_done(c, sq_now_ns(), stop); /* the batch goes on (the lane is replaced) */
        else
            flow_advance(c, sq_now_ns(), stop);
    }
}

/* Opens a fresh connection in place of a closed one, unless the worker is winding down. */
static void conn_replace(struct sq_engine__conn *c)
{
    if (c->w->sending || (c->fv && c->fv->in_iter))
        conn_connect(c);
}

static void iter_begin(struct sq_engine__conn *c, int64_t intended, int64_t now);

static void timer_cb(struct sq_loop *loop, struct sq_timer *t)
{
    struct sq_engine__conn *c = SQ_CONTAINER_OF(t, struct sq_engine__conn, timer);
    if (c->state == CONN_BACKOFF) {
        c->state = CONN_CLOSED;
        conn_replace(c);
    } else if (c->state == CONN_QUEUED) {
        c->state = CONN_CLOSED;
        c->w->pace_bypass = true; /* its turn has come (xport.c) */
        conn_replace(c);
        c->w->pace_bypass = false;
    } else if (c->state == CONN_PACING) {
        conn_next(c, sq_loop_now(loop)); /* it sees the pacing wait that ended */
    } else if (c->state == CONN_THINK) {
        c->state = CONN_IDLE;
        int64_t now = sq_loop_now(loop);
        flow_advance(c, now, false);
        conn_next(c, now);
    } else if (c->state == CONN_DELAY) {
        c->state = CONN_IDLE;
        if (!c->w->sending)
            return; /* the run winds down: the delayed request never leaves */
        c->delayed = true;
        int64_t now = sq_loop_now(loop);
        iter_begin(c, now, now);
    }
}

void sq_engine__connect_error(struct sq_engine__worker *w, int err)
{
    if (!w->first_connect_err)
        w->first_connect_err = err;
    w->c.errors[SQ_ERRK_CONNECT]++;
    __atomic_store_n(&w->live.last_connect_err, err, __ATOMIC_RELAXED);
    __atomic_store_n(&w->live.connect_errors, w->c.errors[SQ_ERRK_CONNECT], __ATOMIC_RELAXED);
}

/* After a failed connect or handshake: try again later, with a backoff that doubles from 10 ms
 * to 1.28 s. Once the run winds down nothing reconnects: a VU still inside an iteration gives
 * that iteration up (it would otherwise wait for the hard end). */
static void conn_backoff(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    if (!w->sending) {
        if (SQ_UNLIKELY(c->lane)) {
            /* its request is given up unsent (nothing counted); the VU's batch is then left
             * unfinished, and its iteration is counted interrupted at the end */
            c->fv->in_iter = false;
        } else if (c->fv && c->fv->in_iter) {
            c->fv->in_iter = false;
            w->in_iter--;
            w->interrupted++;
        }
        return;
    }
    int64_t delay = BACKOFF_MIN_NS << c->backoff;
    if (c->backoff < BACKOFF_MAX_SHIFT)
        c->backoff++;
    if (sq_timer_start(w->loop, &c->timer, sq_loop_now(w->loop) + delay) == 0)
        c->state = CONN_BACKOFF;
}

/* Keeps the worker's first TLS error message for the summary (written once, then published). */
static void tls_note(struct sq_engine__worker *w, const char *msg)
{
    if (w->live.tls_err_set)
        return;
    snprintf(w->tls_err, sizeof(w->tls_err), "%s", msg && msg[0] ? msg : "unknown TLS error");
    __atomic_store_n(&w->live.tls_err_set, 1, __ATOMIC_RELEASE);
}

void sq_engine__tls_error(struct sq_engine__worker *w, const char *msg, bool count)
{
    if (count) {
        w->c.errors[SQ_ERRK_TLS]++;
        w->c.tls_handshake_errors++;
        __atomic_store_n(&w->live.tls_errors, w->c.errors[SQ_ERRK_TLS], __ATOMIC_RELAXED);
    }
    tls_note(w, msg);
}

void sq_engine__upgrade_error(struct sq_engine__worker *w, const char *msg)
{
    w->c.errors[SQ_ERRK_UPGRADE]++;
    __atomic_store_n(&w->live.upgrade_errors, w->c.errors[SQ_ERRK_UPGRADE], __ATOMIC_RELAXED);
    if (w->live.up_err_set)
        return;
    snprintf(w->up_err, sizeof(w->up_err), "%s", msg && msg[0] ? msg : "WebSocket upgrade failed");
    __atomic_store_n(&w->live.up_err_set, 1, __ATOMIC_RELEASE);
}

void sq_engine__proxy_error(struct sq_engine__worker *w, const char *msg)
{
    w->c.errors[SQ_ERRK_PROXY]++;
    __atomic_store_n(&w->live.proxy_errors, w->c.errors[SQ_ERRK_PROXY], __ATOMIC_RELAXED);
    if (w->live.proxy_err_set)
        return;
    snprintf(w->proxy_err, sizeof(w->proxy_err), "%s", msg);
    __atomic_store_n(&w->live.proxy_err_set, 1, __ATOMIC_RELEASE);
}

void sq_engine__tls_done(struct sq_engine__worker *w, const struct sq_tls_conn *t)
{
    w->c.tls_handshakes++;
    if (sq_tls_resumed(t))
        w->c.tls_resumed++;
    if (!w->tls_version) {
        w->tls_version = sq_tls_version(t);
        w->tls_cipher = sq_tls_cipher(t);
        w->tls_alpn = sq_tls_alpn(t);
    }
}

static void conn_connect(struct sq_engine__conn *c)
{
    c->w->drv->connect(c);
}

/* Sends one request, or a pipelined batch of nreq (each counted, timed from the batch's send and
 * answered in order on this connection): intended is the time it was due (open) or now
 * (closed). */
static void conn_send(struct sq_engine__conn *c, const char *req, size_t len, bool head,
                      int64_t tmo, int64_t intended, int64_t now, uint32_t nreq)
{
    struct sq_engine__worker *w = c->w;
    SQ_ASSERT(nreq > 0 && c->state != CONN_ACTIVE);
    w->c.sent += nreq;
    w->in_flight += nreq;
    acct_check(w);
    c->pending = nreq;
    c->state = CONN_ACTIVE;
    c->since_ns = intended;
    c->sent_ns = now;
    c->tmo_ns = tmo;
    c->req = req;
    c->req_len = (uint32_t)len;
    c->woff = 0;
    c->wdone_ns = 0;
    c->fb_ns = 0;
    c->head = head;
    if (SQ_UNLIKELY(c->xc != NULL) && w->capture) /* sampling alone arms at the head */
        sq_engine__xc_arm(c);
    w->drv->send(c);
}

/* A request that cannot be written (no memory; over HTTP/2, a field HTTP/2 cannot carry): it
 * counts as sent and failed (`write`), so the arrival or the step it was for is accounted for
 * like any other. c is closed after. */
static void conn_unsendable(struct sq_engine__conn *c, int64_t intended, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    w->c.sent++;
    w->in_flight++;
    c->pending = 1;
    c->state = CONN_ACTIVE;
    c->since_ns = intended;
    c->sent_ns = now;
    conn_fail(c, SQ_ERRK_WRITE);
}

/* --urls: the worker's next URL (round-robin), counted as sent for that URL. */
static void url_send(struct sq_engine__conn *c, int64_t intended, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    const struct sq_run_config *cfg = w->cfg;
    uint32_t u = w->url_next;
    if (SQ_UNLIKELY(cfg->norigins != 0)) /* the next URL of the connection's origin */
        while (cfg->urls[u].origin != c->global % cfg->norigins)
            u = u + 1 == cfg->nurls ? 0 : u + 1;
    w->url_next = u + 1 == cfg->nurls ? 0 : u + 1;
    const struct sq_run_url *ru = &cfg->urls[u];
    c->url = (uint16_t)u;
    sq_engine__vux(c)->h2req = ru->h2;
    w->ustats[u].sent++;
    conn_send(c, ru->request, ru->request_len, ru->head, cfg->timeout_ns, intended, now, 1);
}

/* ---- wrk-style scripts: the worker's own Lua state (script/script.h) ---- */

/* A hook raised: its message (with the traceback) is kept for the run, which the main thread
 * then stops; this worker stops at once. */
static void script_failed(struct sq_engine__worker *w)
{
    if (!w->script_err) {
        const char *msg = sq_script_error(w->script);
        w->script_err = strdup(msg && msg[0] ? msg : "script error");
        __atomic_store_n(&w->live.script_failed, 1, __ATOMIC_RELEASE);
    }
    w->sending = false;
    w->hard_end_ns = 0; /* the loop leaves at its next check; what is out stays in flight */
}

/* thread:stop() was called: as in wrk, this worker's loop ends now. */
static void script_check_stop(struct sq_engine__worker *w)
{
    if (SQ_UNLIKELY(sq_script_stopped(w->script)) && !w->script_stopped) {
        w->script_stopped = true;
        w->sending = false;
        w->hard_end_ns = 0;
    }
}

/* True when the request is a HEAD (its response carries no body). */
static bool is_head(const char *req, size_t len)
{
    return len > 5 && memcmp(req, "HEAD ", 5) == 0;
}

/* One iteration of a worker whose script defines request() or delay(): delay() first (closed
 * model), then the script's request (or the static one), which may hold a pipelined batch. */
static void script_iter(struct sq_engine__conn *c, int64_t intended, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    if ((w->shooks & SQ_SCRIPT_DELAY) && !c->delayed && !w->open) {
        int64_t ns = 0;
        w->c.script_delays++;
        if (sq_script_delay(w->script, &ns) < 0) {
            script_failed(w);
            return;
        }
        script_check_stop(w);
        if (!w->sending)
            return;
        if (ns > 0 && sq_timer_start(w->loop, &c->timer, now + ns) == 0) {
            c->state = CONN_DELAY;
            return;
        }
    }
    c->delayed = false;
    if (!(w->shooks & SQ_SCRIPT_REQUEST)) {
        conn_send(c, w->req, w->req_len, w->req_head, w->cfg->timeout_ns, intended, now, w->req_n);
        return;
    }
    const char *req;
    size_t len;
    uint32_t n;
    w->c.script_requests++;
    if (sq_script_request(w->script, &req, &len, &n) < 0) {
        script_failed(w);
        return;
    }
    script_check_stop(w);
    if (!w->sending)
        return;
    conn_send(c, req, len, is_head(req, len), w->cfg->timeout_ns, intended, now, n);
    if (c->state == CONN_ACTIVE && c->woff < c->req_len) {
        /* A short write: the string lives only until the next request() call, so what is left
         * to write moves into the connection's own buffer. */
        struct sq_engine__vux *x = sq_engine__vux(c);
        if (x->own_cap < len) {
            char *p = realloc(x->own, len);
            if (!p) {
                conn_fail(c, SQ_ERRK_WRITE);
                conn_replace(c);
                return;
            }
            x->own = p;
            x->own_cap = len;
        }
        memcpy(x->own, req, len);
        c->req = x->own;
    }
}

/* response(status, headers, body) with what the driver kept (h1drv.c). */
static void script_response(struct sq_engine__conn *c)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__capture *k = sq_engine__vux(c)->cap;
    if (!k)
        return; /* a lane of a flow's batch: no wrk script there */
    w->c.script_responses++;
    int rc = sq_script_response(w->script, c->rd.status,
                                (const struct sq_resp_header *)(const void *)k->fields.p,
                                k->head.len ? k->nfields : 0, k->body.p, k->body.len);
    sq_buf_reset(&k->head);
    sq_buf_reset(&k->body);
    k->nfields = 0;
    if (rc < 0)
        script_failed(w);
    else
        script_check_stop(w);
}

/* ---- plan hooks: a plan's script:, a step's before: / after: ---- */

/* The VU's variables as a hook sees them: the scenario's slots (extracted values and locals),
 * then the plan's fixed vars (read only). An empty slot reads as unset. */
static bool hook_get(void *vu, const char *name, size_t len, struct sq_str *out)
{
    struct sq_engine__conn *c = vu;
    const struct sq_flow *f = c->w->flow;
    for (uint32_t i = 0; i < f->sc->nvars; i++) {
        const char *n = f->sc->vars[i];
        if (strlen(n) == len && memcmp(n, name, len) == 0) {
            const struct sq_buf *b = &c->fv->vars[i];
            if (!b->len)
                return false;
            *out = (struct sq_str){b->p, b->len};
            return true;
        }
    }
    for (size_t i = 0; i < f->plan->nvars; i++) {
        const struct sq_plan_var *pv = &f->plan->vars[i];
        if (strlen(pv->name) == len && memcmp(pv->name, name, len) == 0) {
            *out = (struct sq_str){pv->value, strlen(pv->value)};
            return true;
        }
    }
    return false;
}

static int hook_set(void *vu, const char *name, size_t len, const char *val, size_t val_len)
{
    struct sq_engine__conn *c = vu;
    const struct sq_flow *f = c->w->flow;
    for (uint32_t i = 0; i < f->sc->nvars; i++) {
        const char *n = f->sc->vars[i];
        if (strlen(n) == len && memcmp(n, name, len) == 0) {
            struct sq_buf *b = &c->fv->vars[i];
            sq_buf_reset(b);
            return val && val_len ? sq_buf_append(b, val, val_len) : 0;
        }
    }
    return -ENOENT;
}

static int hook_url(void *vu, const char *url, size_t len, const char **why)
{
    struct sq_engine__conn *c = vu;
    return sq_flow_hook_url(c->w->flow, c->fv, url, len, why);
}

/* ctx:metric: into the step's slot for that plan metric (plan.h, sq_plan_step_nslots). */
static int hook_metric(void *vu, const char *name, size_t len, double x)
{
    struct sq_engine__conn *c = vu;
    struct sq_engine__worker *w = c->w;
    const struct sq_plan *p = w->flow->plan;
    const struct sq_plan_step *ps = w->flow->steps[c->fv->step].ps;
    struct sq_step_stats *ss = &w->steps[c->fv->step];
    for (size_t m = 0; m < p->nmetrics; m++)
        if (strlen(p->metrics[m].name) == len && memcmp(p->metrics[m].name, name, len) == 0) {
            uint32_t slot = ps->nmetrics + (uint32_t)m;
            if (slot < ss->nmvals)
                sq_engine__mval_add(&ss->mvals[slot], x, sq_now_ns());
            return 0;
        }
    return -ENOENT;
}

static const struct sq_script_vars hook_vars = {
    .get = hook_get, .set = hook_set, .url = hook_url, .metric = hook_metric};

/* Runs the current step's before or after hook. False when it raised: the run stops. */
static bool plan_hook(struct sq_engine__conn *c, enum sq_script_when when, int status,
                      struct sq_script_step_result *res)
{
    struct sq_engine__worker *w = c->w;
    struct sq_flow_vu *v = c->fv;
    const struct sq_plan_step *ps = w->flow->steps[v->step].ps;
    struct sq_script_step step = {.name = ps->name, .vu = v->vu, .iteration = v->iteration};
    if (when == SQ_SCRIPT_AFTER) {
        step.status = status;
        if (status && v->head.len) {
            step.headers = (const struct sq_resp_header *)(const void *)v->fields.p;
            step.nheaders = v->nfields;
        }
        if (status) {
            step.body = v->body.p ? v->body.p : "";
            step.body_len = v->body.len;
        }
    }
    w->c.script_hooks++;
    int hook = w->hook_ids[2 * v->step + (when == SQ_SCRIPT_AFTER)];
    if (sq_script_hook_call(w->script, hook, when, &step, &hook_vars, c, res) < 0) {
        script_failed(w);
        return false;
    }
    return true;
}

/* A worker's own state for the plan's hooks, and each step's hook handles. */
static int hooks_init(struct sq_engine__worker *w)
{
    const struct sq_flow *f = w->flow;
    char err[512];
    /* math.random: the worker's stream of the run's seed (a state serves all its VUs); on an
     * agent, its segment's (the same worker number on another agent draws other numbers) */
    const struct sq_seg *seg = w->cfg->seg;
    uint64_t stream = SQ_TMPL_STREAM_LUA + ((uint64_t)(seg ? seg->index : 0) << 32) + 1 + w->windex;
    struct sq_script_target t = {.seeded = true, .seed = sq_tmpl_rng_init(w->run->seed, stream)};
    int rc = sq_script_new(f->plan->script, &t, &w->script, err, sizeof(err));
    if (rc < 0)
        return rc;
    w->own_script = true;
    w->hook_ids = malloc(2 * (f->nsteps ? f->nsteps : 1) * sizeof(*w->hook_ids));
    if (!w->hook_ids)
        return -ENOMEM;
    for (size_t i = 0; i < f->nsteps; i++) {
        const struct sq_plan_step *ps = f->steps[i].ps;
        const char *fn[2] = {ps->before, ps->after};
        for (int k = 0; k < 2; k++) {
            w->hook_ids[2 * i + (size_t)k] = -1;
            if (fn[k] &&
                (rc = sq_script_hook_find(w->script, fn[k], &w->hook_ids[2 * i + (size_t)k])) < 0)
                return rc;
        }
    }
    return 0;
}

/* In w->shooks beside the script's hooks (script/script.h uses the low bits): the quick face's
 * body is a template (cfg->body_tmpl). */
#define BODY_TMPL (1u << 30)

/* The quick face's templated body (cfg->body_tmpl): rendered for this request (with a stamp
 * when it uses one), framed by the head with the body's length, in the connection's own buffer
 * (it must live until the request is written; it stops growing at its working size). */
__attribute__((noinline)) static void body_send(struct sq_engine__conn *c, int64_t intended,
                                                int64_t now)
{
    struct sq_engine__worker *w = c->w;
    const struct sq_run_config *cfg = w->cfg;
    struct sq_engine__vux *xv = sq_engine__vux(c);
    char stamp[SQ_STAMP_MAX];
    struct sq_str st = {stamp, 0};
    if (sq_tmpl_uses_stamp(cfg->body_tmpl)) {
        st.len = sq_engine__stamp(w, NULL, stamp);
        w->c.bus.stamped++;
    }
    struct sq_tmpl_ctx x = {
        .vu = sq_engine__vu_number(w, c->local),
        .iteration = xv->body_iter++,
        .rng = sq_engine__vu_rng(c),
        .stamp = &st,
    };
    sq_buf_reset(&w->body);
    char digits[24];
    int nd = sq_tmpl_render(cfg->body_tmpl, &x, &w->body) < 0
                 ? -1
                 : snprintf(digits, sizeof(digits), "%zu", w->body.len);
    size_t head = cfg->request_len, n = head - 1 + (size_t)nd + w->body.len;
    if (nd > 0 && xv->own_cap < n) {
        char *p = realloc(xv->own, n);
        if (p) {
            xv->own = p;
            xv->own_cap = n;
        }
    }
    if (SQ_UNLIKELY(nd <= 0 || xv->own_cap < n)) { /* out of memory: this request fails */
        conn_unsendable(c, intended, now);
        conn_replace(c);
        return;
    }
    char *o = xv->own;
    memcpy(o, cfg->request, cfg->body_cl);
    o += cfg->body_cl;
    memcpy(o, digits, (size_t)nd);
    o += nd;
    memcpy(o, cfg->request + cfg->body_cl + 1, head - cfg->body_cl - 1);
    o += head - cfg->body_cl - 1;
    if (w->body.len)
        memcpy(o, w->body.p, w->body.len);
    w->c.rendered++;
    conn_send(c, xv->own, n, false, cfg->timeout_ns, intended, now, 1);
}

/* Starts one iteration: the quick face's static request (or its next URL), or a flow from its
 * first step. */
static void iter_begin(struct sq_engine__conn *c, int64_t intended, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    if (!c->fv) {
        if (SQ_UNLIKELY(w->ustats != NULL)) {
            url_send(c, intended, now);
            return;
        }
        if (SQ_UNLIKELY(w->shooks & (SQ_SCRIPT_REQUEST | SQ_SCRIPT_DELAY | BODY_TMPL))) {
            /* one test keeps the static path's cost: a script, or a templated body */
            if (w->shooks & BODY_TMPL)
                body_send(c, intended, now);
            else
                script_iter(c, intended, now);
            return;
        }
        conn_send(c, w->req, w->req_len, w->req_head, w->cfg->timeout_ns, intended, now, w->req_n);
        return;
    }
    sq_flow_vu_begin(c->fv, w->flow, intended);
    w->in_iter++;
    if (SQ_UNLIKELY(c->fv->step >= w->flow->nsteps)) {
        /* a flow that is one while: loop, which does not hold: the iteration ends at once */
        c->fv->step = (uint32_t)w->flow->nsteps - 1;
        flow_advance(c, now, true);
        if (sq_timer_start(w->loop, &c->timer, now) == 0)
            c->state = CONN_PACING;
        return;
    }
    flow_step(c, intended, now);
}

/* The next hop of a redirect the VU's step follows (flow_complete built it into v->req): a
 * request of its own, sent now, on this connection or the fresh one that replaced it. */
static void redirect_send(struct sq_engine__conn *c, const struct sq_flow_step *st, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    struct sq_flow_vu *v = c->fv;
    v->redirect = false;
    const char *req = v->req.p;
    size_t len = v->req.len;
    if (SQ_UNLIKELY(w->flow->h2 &&
                    sq_flow_h2_request(w->flow, st, v, req, len, &sq_engine__vux(c)->h2req) < 0)) {
        conn_unsendable(c, now, now);
        conn_backoff(c);
        return;
    }
    sq_buf_reset(&v->body);
    sq_buf_reset(&v->head);
    v->body_truncated = false;
    /* the hop's own method: a before hook may have made the step's a HEAD, or another */
    bool head = len >= 5 && memcmp(req, "HEAD ", 5) == 0;
    conn_send(c, req, len, head, st->timeout_ns ? st->timeout_ns : w->cfg->timeout_ns, now, now, 1);
}

/* The current step is skipped (a before hook said so, or its `if:` does not hold): not sent,
 * its checks not run: on to the next step, or (the iteration over) to the next iteration from
 * the loop, so a flow that skips everything cannot recurse. */
static void flow_skip(struct sq_engine__conn *c, int64_t now)
{
    flow_advance(c, now, false);
    if (c->fv->in_iter) {
        conn_next(c, now);
    } else if (sq_timer_start(c->w->loop, &c->timer, now) == 0) {
        c->state = CONN_PACING;
    }
}

/* ---- batches (docs/plans.md, Parallel requests) ----
 *
 * A VU at the first request of a batch sends none itself: it hands the batch's requests to its
 * lanes (connections of its own, worker.h), each lane one request at a time, and waits
 * (CONN_BATCH). A lane sends a request as a VU sends a step's (the same accounting: counted
 * sent in conn_send, then completed or failed exactly once; the same per-step figures, checks,
 * extractors and redirects), and takes the batch's next request when it is answered. When the
 * last one is answered or failed the VU goes on past the batch. */

static struct sq_engine__conn *lane_parent(const struct sq_engine__conn *l)
{
    struct sq_engine__worker *w = l->w;
    return &w->conns[(l->local - w->lane0) / w->lanes_per];
}

/* The lane takes the VU's next request of its batch (false: none is left). It is sent when the
 * lane is next free (lane_next), on this connection or the one that replaces it. */
static bool lane_take(struct sq_engine__conn *l)
{
    struct sq_flow_vu *v = lane_parent(l)->fv, *lv = l->fv;
    if (v->batch_next >= v->batch_end)
        return false;
    sq_flow_vu_lane(lv, v);
    lv->step = v->batch_next++;
    lv->in_iter = true;
    return true;
}

/* Sends the lane's request (or the next hop of its redirect). */
static void lane_send(struct sq_engine__conn *l, int64_t now)
{
    struct sq_engine__worker *w = l->w;
    struct sq_flow_vu *lv = l->fv;
    const struct sq_flow_step *st = &w->flow->steps[lv->step];
    if (SQ_UNLIKELY(lv->redirect)) {
        redirect_send(l, st, now);
        return;
    }
    lv->body_set = false;
    lv->ovr = false;
    const char *req = "";
    size_t len = 0;
    bool rendered = false;
    if (SQ_UNLIKELY(sq_flow_request(w->flow, st, lv, &req, &len, &rendered) < 0 ||
                    (w->flow->h2 && sq_flow_h2_request(w->flow, st, lv, req, len,
                                                       &sq_engine__vux(l)->h2req) < 0))) {
        conn_unsendable(l, now, now); /* counted sent and failed: the batch goes on */
        conn_backoff(l);
        return;
    }
    if (rendered)
        w->c.rendered++;
    const struct sq_plan_step *ps = st->ps;
    sq_buf_reset(&lv->body);
    sq_buf_reset(&lv->head);
    lv->body_truncated = false;
    lv->capture = ps->needs_body;
    lv->want_head = ps->needs_headers || lv->jar;
    lv->follow = st->follow;
    conn_send(l, req, len, st->head, st->timeout_ns ? st->timeout_ns : w->cfg->timeout_ns, now, now,
              1);
}

/* The lane is open and free (connected, or its response done): its request goes out, if it
 * has one. */
static void lane_next(struct sq_engine__conn *l, int64_t now)
{
    if (l->fv->in_iter && (l->w->sending || lane_parent(l)->fv->in_iter))
        lane_send(l, now);
}

/* The VU's batch is over: the flow goes on past its last request. */
static void batch_finish(struct sq_engine__conn *c, int64_t now)
{
    struct sq_flow_vu *v = c->fv;
    if (!v->in_iter)
        return;
    struct sq_hist *bd = c->w->steps[v->batch_first].batch_dur;
    if (bd) /* batch_duration: from the batch's send to its last answer */
        sq_hist_record(bd, (now - v->batch_ns) / SQ_NS_PER_US);
    v->step = v->batch_end - 1; /* a repeat: ending at the batch's last request sees it end */
    flow_advance(c, now, v->batch_stop);
    if (c->state == CONN_BATCH) {
        conn_next(c, now);
    }
    /* else its own connection broke meanwhile: the one that replaces it goes on (or, the
     * iteration over, the VU waits for its next turn as any replaced VU does) */
}

/* The lane's request was answered (or failed: stop when its on_error ends the iteration). */
static void lane_done(struct sq_engine__conn *l, int64_t now, bool stop)
{
    struct sq_engine__conn *c = lane_parent(l);
    struct sq_flow_vu *v = c->fv, *lv = l->fv;
    lv->in_iter = false;
    if (!v->batch_left)
        return;
    if (lv->last_status)
        v->last_status = lv->last_status;
    v->batch_stop = v->batch_stop || stop;
    lane_take(l); /* sent when the lane is free: its driver calls back (or it is replaced) */
    if (--v->batch_left == 0) {
        /* the VU may start its next batch from here: l is still inside its own completion (or
         * failure), so it is left to what follows that (its driver's next, or its
         * replacement), never sent on from inside it */
        struct sq_engine__conn *was = l->w->lane_cur;
        l->w->lane_cur = l;
        batch_finish(c, now);
        l->w->lane_cur = was;
    }
}

/* The VU reaches the first request of a batch: each lane takes one of its requests. */
static void batch_begin(struct sq_engine__conn *c, const struct sq_flow_step *st, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    struct sq_flow_vu *v = c->fv;
    c->state = CONN_BATCH;
    if (v->batch_left)
        return; /* its own connection was replaced while the batch is out: it waits on */
    v->batch_next = v->step;
    v->batch_first = v->step;
    v->batch_end = v->step + st->ps->batch;
    v->batch_left = st->ps->batch;
    v->batch_stop = false;
    v->batch_ns = now;
    for (uint32_t k = 0; k < w->lanes_per; k++) {
        struct sq_engine__conn *l = &w->conns[w->lane0 + c->local * w->lanes_per + k];
        if (l->fv->in_iter || !lane_take(l) || l == w->lane_cur)
            continue;
        if (l->state == CONN_IDLE)
            lane_send(l, now);
        else if (l->state == CONN_CLOSED)
            conn_connect(l); /* lane_next sends it once connected */
    }
}

/* Sends the request of the VU's current step, or starts its think time. */
static void flow_step(struct sq_engine__conn *c, int64_t intended, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    struct sq_flow_vu *v = c->fv;
    const struct sq_flow_step *st = &w->flow->steps[v->step];
    if (SQ_UNLIKELY(st->cond != NULL) && !v->redirect && !v->think_until &&
        !sq_flow_cond(w->flow, v, st)) {
        flow_skip(c, now); /* `if:` does not hold: nothing sent, nothing counted */
        return;
    }
    if (st->broker >= 0) {
        /* publish / subscribe: on the worker's broker connection (flowbus.c); the VU waits */
        const struct sq_plan_step *ps = st->ps;
        c->state = CONN_WAIT;
        c->since_ns = intended;
        c->sent_ns = now;
        c->tmo_ns = ps->req.timeout_ns ? ps->req.timeout_ns : w->cfg->timeout_ns;
        int k = sq_engine__flowbus_begin(w->fbus, c);
        if (k != 0 && c->state == CONN_WAIT) {
            bus_step_fail(c, (enum sq_errk)k);
            /* the flow goes on after a pause, not from inside this call: a broker that refuses
             * at once would otherwise spin the VU through its flow */
            if (sq_timer_start(w->loop, &c->timer, now + BACKOFF_MIN_NS) == 0)
                c->state = CONN_PACING;
        }
        return;
    }
    if (SQ_UNLIKELY(st->ps->batch != 0) && !v->redirect) {
        batch_begin(c, st, now);
        return;
    }
    if (st->think) {
        /* The deadline is the VU's, not the connection's: a server that closes the idle
         * connection during the think does not restart it after the reconnect. */
        if (!v->think_until)
            v->think_until = now + st->ps->think_ns;
        if (v->think_until > now && sq_timer_start(w->loop, &c->timer, v->think_until) == 0) {
            c->state = CONN_THINK;
            return;
        }
        flow_advance(c, now, false);
        conn_next(c, now);
        return;
    }
    if (SQ_UNLIKELY(v->redirect)) {
        redirect_send(c, st, now);
        return;
    }
    v->body_set = false;
    v->ovr = false;
    bool head = st->head;
    if (SQ_UNLIKELY(w->hook_ids != NULL) && w->hook_ids[2 * v->step] >= 0) {
        struct sq_script_step_result res;
        if (!plan_hook(c, SQ_SCRIPT_BEFORE, 0, &res))
            return;
        if (res.skip) {
            w->c.script_skips++;
            flow_skip(c, now);
            return;
        }
        if (res.has_body) {
            v->body_set = true;
            v->body_in = (struct sq_str){res.body, res.body_len};
        }
        if (SQ_UNLIKELY(res.method || res.headers || res.has_url)) {
            v->ovr = true;
            v->ovr_url = res.has_url;
            v->ovr_method = (struct sq_str){res.method, res.method_len};
            v->ovr_hdrs = (struct sq_str){res.headers, res.headers_len};
            if (res.method)
                head = res.method_len == 4 && memcmp(res.method, "HEAD", 4) == 0;
        }
    }
    const char *req = "";
    size_t len = 0;
    bool rendered = false;
    if (SQ_LIKELY(!st->ws) &&
        SQ_UNLIKELY(sq_flow_request(w->flow, st, v, &req, &len, &rendered) < 0 ||
                    (w->flow->h2 && sq_flow_h2_request(w->flow, st, v, req, len,
                                                       &sq_engine__vux(c)->h2req) < 0))) {
        /* The request cannot be written (no memory; over HTTP/2, a rendered field HTTP/2
         * cannot carry): the step fails with it, and the VU goes on after a backoff, so a step
         * that never renders cannot spin. */
        conn_unsendable(c, intended, now);
        conn_backoff(c);
        return;
    }
    if (rendered)
        w->c.rendered++;
    const struct sq_plan_step *ps = st->ps;
    sq_buf_reset(&v->body);
    sq_buf_reset(&v->head);
    v->body_truncated = false;
    v->capture = ps->needs_body;
    v->want_head = ps->needs_headers || v->jar;
    v->follow = st->follow;
    conn_send(c, req, len, head, st->timeout_ns ? st->timeout_ns : w->cfg->timeout_ns, intended,
              now, 1);
}

/* flow_advance's step for a flow with repeat: blocks or groups: back to a loop's start or on,
 * then the groups the VU leaves record their passes (group_duration). Kept out of line so that
 * flow_advance stays as small as before for the plain flow. */
__attribute__((noinline)) static void advance_extra(struct sq_engine__conn *c, int64_t now,
                                                    bool stop)
{
    struct sq_engine__worker *w = c->w;
    struct sq_flow_vu *v = c->fv;
    if (w->flow->nloops != 0 && !stop) {
        if (!sq_flow_loops_after(w->flow, v)) {
            v->step++;
            sq_flow_loops_enter(w->flow, v, 0);
        }
    } else {
        v->step++;
    }
    if (w->gdur != NULL)
        sq_flow_groups_move(w->flow, v, stop ? w->flow->nsteps : v->step, now, w->gdur);
}

/* Moves the VU past its current step (or, with stop, past the whole iteration). At the end of
 * the flow the iteration is counted and the VU is free for the next one. */
static void flow_advance(struct sq_engine__conn *c, int64_t now, bool stop)
{
    struct sq_engine__worker *w = c->w;
    struct sq_flow_vu *v = c->fv;
    if (!v->in_iter)
        return;
    v->think_until = 0;
    v->hops = 0;
    v->redirect = false;
    if (SQ_UNLIKELY(w->flow->extra != 0))
        advance_extra(c, now, stop); /* repeat: blocks, groups */
    else
        v->step++;
    if (!stop && v->step < w->flow->nsteps)
        return;
    v->in_iter = false;
    v->step = 0;
    v->iteration++;
    w->in_iter--;
    w->c.iterations++;
    sq_hist_record(w->iter_hist, (now - v->iter_start_ns) / SQ_NS_PER_US);
    const struct sq_run_scen *sc = &w->cfg->scens[w->scen];
    if (SQ_UNLIKELY(sc->on_iter_end != NULL))
        sc->on_iter_end(sc->iter_ud, v, stop);
}

/* A publish or subscribe step ended (flowbus.c): its figures, then the flow goes on. kind < 0:
 * completed after dur_us; else it failed with that kind (counted; the step's on_error
 * applies). Its failures are not HTTP requests: they count by kind and in the step. */
static void bus_step_end(struct sq_engine__conn *c, int kind, int64_t dur_us, bool next)
{
    struct sq_engine__worker *w = c->w;
    struct sq_flow_vu *v = c->fv;
    struct sq_step_stats *ss = &w->steps[v->step];
    const struct sq_plan_step *ps = w->flow->steps[v->step].ps;
    c->state = CONN_IDLE;
    ss->reqs++;
    bool stop = false;
    if (kind < 0) {
        sq_hist_record(ss->dur, dur_us);
    } else {
        ss->errors++;
        ss->failed++;
        w->c.errors[kind]++;
        stop = ps->on_error == SQ_ON_ERROR_NEXT_ITERATION;
    }
    int64_t now = sq_loop_now(w->loop);
    flow_advance(c, now, stop);
    if (next)
        conn_next(c, now);
}

static void bus_step_fail(struct sq_engine__conn *c, enum sq_errk k)
{
    if (c->w->fbus)
        sq_engine__flowbus_cancel(c->w->fbus, c);
    bus_step_end(c, (int)k, 0, false);
}

void sq_engine__flow_bus_done(struct sq_engine__conn *c, int kind, int64_t dur_us)
{
    if (c->state != CONN_WAIT)
        return;
    bus_step_end(c, kind, dur_us, true);
}

/* A redirect answered a step that follows them: its cookies are stored and the next hop built
 * (-1: it goes out when the connection is next free, redirect_send), or it is what the step's
 * checks see: 0 with no Location (a 3xx like any other), 1 with an error counted (the limit
 * reached, or a Location off the target's origin). */
static int flow_redirect(struct sq_engine__conn *c, const struct sq_flow_step *st)
{
    struct sq_engine__worker *w = c->w;
    struct sq_flow_vu *v = c->fv;
    if (!v->loc.len)
        return 0;
    enum sq_errk k = SQ_ERRK_REDIRECT_LIMIT;
    if (v->hops < st->max_redirects) {
        sq_flow_store_cookies(w->flow, v);
        int rc = sq_flow_redirect(w->flow, v, c->req, c->req_len, c->rd.status);
        if (rc == SQ_REDIRECT_SAME) {
            v->hops++;
            v->redirect = true;
            return -1;
        }
        if (rc == -ENOMEM)
            return 0; /* no memory for the next hop: the 3xx is the step's answer */
        k = SQ_ERRK_REDIRECT_OFFSITE;
    }
    w->c.errors[k]++; /* its own kind: the 3xx completed, it costs no request */
    return 1;
}

/* A flow step's response is complete: per-step figures, checks, extractors, cookies. */
static void flow_complete(struct sq_engine__conn *c, int64_t now, int64_t lat_us)
{
    struct sq_engine__worker *w = c->w;
    struct sq_flow_vu *v = c->fv;
    const struct sq_flow_step *st = &w->flow->steps[v->step];
    struct sq_step_stats *ss = &w->steps[v->step];
    uint16_t status = c->rd.status;
    v->last_status = status;
    ss->reqs++;
    sq_hist_record(ss->dur, lat_us);
    sq_hist_record(w->step_h[v->step], lat_us);
    if (status >= 400) {
        ss->failed++;
        w->c.http_failed++;
    }
    uint32_t i = 0;
    while (i < ss->nstatus && ss->by_status[i].status != status)
        i++;
    if (i == ss->nstatus && i < SQ_STEP_STATUSES && sq_latency_hist_new(&ss->by_status[i].h) == 0) {
        ss->by_status[i].status = status;
        ss->nstatus++;
    }
    if (i < ss->nstatus) {
        ss->by_status[i].n++;
        sq_hist_record(ss->by_status[i].h, lat_us);
    }
    const struct sq_plan_step *ps = st->ps;
    bool stop = false;
    if (SQ_UNLIKELY(sq_redirect_status(status)) && st->follow) {
        int k = flow_redirect(c, st);
        if (k < 0)
            return; /* the next hop goes out when the connection is next free */
        stop = k > 0 && ps->on_error == SQ_ON_ERROR_NEXT_ITERATION;
    }
    if (ps->nchecks || ps->nextract || v->jar) {
        struct sq_flow_outcome o;
        uint64_t p0 = 0, f0 = 0;
        for (size_t k = 0; k < ps->nchecks; k++) {
            p0 += ss->check_pass[k];
            f0 += ss->check_fail[k];
        }
        sq_flow_eval(w->flow, st, v, w->states, status, lat_us, ss->check_pass, ss->check_fail, &o);
        uint64_t p1 = 0, f1 = 0;
        for (size_t k = 0; k < ps->nchecks; k++) {
            p1 += ss->check_pass[k];
            f1 += ss->check_fail[k];
        }
        w->c.checks_passed += p1 - p0;
        w->c.checks_failed += f1 - f0;
        ss->extract_fail += o.extract_fail;
        w->c.errors[SQ_ERRK_EXTRACT] += o.extract_fail; /* its own kind: costs no request */
        stop = stop || o.stop_iteration;
        /* metric: samples, after the checks (from: checks: whether every one held) */
        if (SQ_UNLIKELY(ps->nmetrics != 0))
            sq_engine__step_metrics(w->flow, v, ps, ss, f1 == f0, now);
    } else if (SQ_UNLIKELY(ps->nmetrics != 0)) {
        sq_engine__step_metrics(w->flow, v, ps, ss, true, now);
    }
    if (SQ_UNLIKELY(w->hook_ids != NULL) && w->hook_ids[2 * v->step + 1] >= 0) {
        struct sq_script_step_result res;
        plan_hook(c, SQ_SCRIPT_AFTER, status, &res);
    }
    if (SQ_UNLIKELY(c->lane))
        lane_done(c, now, stop);
    else
        flow_advance(c, now, stop);
}

static void idle_push(struct sq_engine__conn *c)
{
    c->state = CONN_IDLE;
    if (!c->in_idle) {
        c->in_idle = true;
        c->w->idle[c->w->nidle++] = c->local;
    }
}

/* Pops an idle connection; entries whose connection has since closed are skipped. */
static struct sq_engine__conn *idle_pop(struct sq_engine__worker *w)
{
    while (w->nidle > 0) {
        struct sq_engine__conn *c = &w->conns[w->idle[--w->nidle]];
        c->in_idle = false;
        if (c->state == CONN_IDLE)
            return c;
    }
    return NULL;
}

/* Opens one more connection for the arrivals waiting (k6's maxVUs): its first idle moment
 * takes the head of the queue like any other connection's. */
static void grow(struct sq_engine__worker *w, int64_t now)
{
    struct sq_engine__conn *c = &w->conns[w->nconns++];
    c->growing = true;
    w->ngrowing++;
    w->grown++;
    if (w->grow_first == 0)
        w->grow_first = now;
    w->grow_last = now;
    conn_connect(c);
}

/* One arrival of the open model, due at intended. It waits (in flight + waiting within the
 * in-flight cap) when no connection is idle, and the pool grows while arrivals wait with no
 * connection coming for them. */
static void dispatch(struct sq_engine__worker *w, int64_t intended, int64_t now)
{
    w->arrivals++;
    struct sq_engine__conn *c = idle_pop(w);
    if (c) {
        iter_begin(c, intended, now);
    } else if (w->qlen < w->qcap && w->in_flight + w->qlen < w->ifcap) {
        uint32_t tail = w->qhead + w->qlen;
        w->queue[tail >= w->qcap ? tail - w->qcap : tail] = intended;
        w->qlen++;
        if (w->nconns < w->ncap && w->qlen > w->ngrowing)
            grow(w, now);
    } else {
        w->c.dropped++;
    }
    acct_check(w);
}

/* What an open, idle connection does next. */
static void conn_next(struct sq_engine__conn *c, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    bool paced = c->state == CONN_PACING; /* the pacing timer woke it */
    c->state = CONN_IDLE;
    if (c->growing) {
        c->growing = false;
        w->ngrowing--;
    }
    if (SQ_UNLIKELY(c->lane)) {
        lane_next(c, now);
        return;
    }
    if (!w->started || SQ_UNLIKELY(w->hold))
        return;
    if (c->fv && c->fv->in_iter) {
        flow_step(c, now, now);
        return;
    }
    if (w->open) {
        if (w->qlen > 0 && w->sending) {
            int64_t intended = w->queue[w->qhead];
            w->qhead = w->qhead + 1 == w->qcap ? 0 : w->qhead + 1;
            w->qlen--;
            iter_begin(c, intended, now);
        } else {
            idle_push(c);
        }
        return;
    }
    if (!w->sending || c->local >= w->active_vus)
        return; /* parked: the run is winding down, or the VU was ramped away */
    const struct sq_exec *ex = w->ex;
    if (ex->kind == SQ_EXEC_SHARED_ITERATIONS) {
        if (w->quota == 0)
            return;
    } else if (ex->kind == SQ_EXEC_PER_VU_ITERATIONS) {
        if (c->iters == 0)
            return;
    }
    if (ex->pacing_ns) {
        /* Iteration starts follow an absolute cadence, so a timer that fires late (by less
         * than one pacing: a busy machine's wake-up) does not push every later start back; a
         * response slower than the pacing restarts the cadence from now (an iteration never
         * starts before the previous start plus the pacing). */
        int64_t due = c->iter_ns ? c->iter_ns + ex->pacing_ns : now;
        if (now < due) {
            if (sq_timer_start(w->loop, &c->timer, due) == 0) {
                c->state = CONN_PACING;
                return;
            }
        }
        int64_t tolerance = ex->pacing_ns / 10 < SQ_NS_PER_MS ? ex->pacing_ns / 10 : SQ_NS_PER_MS;
        bool on_cadence = paced ? now - due < ex->pacing_ns : now - due <= tolerance;
        c->iter_ns = on_cadence ? due : now;
    }
    if (ex->kind == SQ_EXEC_SHARED_ITERATIONS)
        w->quota--;
    else if (ex->kind == SQ_EXEC_PER_VU_ITERATIONS)
        c->iters--;
    iter_begin(c, now, now);
}

/* Per-phase timings of the request that just completed: blocked (open model: from the intended
 * to the actual send), the connection's setup on its first request only, then sending, waiting
 * (to the first byte) and receiving. The first byte is stamped with the loop's wake-up time, so
 * it costs no clock read. */
static void record_phases(struct sq_engine__conn *c, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    int64_t wdone = c->wdone_ns ? c->wdone_ns : c->sent_ns;
    int64_t fb = c->fb_ns > wdone ? c->fb_ns : wdone;
    if (fb > now)
        fb = now;
    sq_hist_record(w->phase[SQ_PHASE_BLOCKED], (c->sent_ns - c->since_ns) / SQ_NS_PER_US);
    int64_t dns = 0, conn = 0, tls = 0;
    if (c->fresh) {
        c->fresh = false;
        conn = c->x.connect_ns;
        tls = c->x.tls_ns;
        if (!w->dns_done) {
            w->dns_done = true; /* the one resolution of the run lands on its first request */
            dns = w->windex == 0 ? w->cfg->dns_ns : 0;
        }
    }
    sq_hist_record(w->phase[SQ_PHASE_DNS], dns / SQ_NS_PER_US);
    sq_hist_record(w->phase[SQ_PHASE_CONNECTING], conn / SQ_NS_PER_US);
    sq_hist_record(w->phase[SQ_PHASE_TLS], tls / SQ_NS_PER_US);
    sq_hist_record(w->phase[SQ_PHASE_SENDING], (wdone - c->sent_ns) / SQ_NS_PER_US);
    sq_hist_record(w->phase[SQ_PHASE_WAITING], (fb - wdone) / SQ_NS_PER_US);
    sq_hist_record(w->phase[SQ_PHASE_RECEIVING], (now - fb) / SQ_NS_PER_US);
}

/* The end of a decoded body or of an event stream. */
static void body_done(struct sq_engine__conn *c, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    if (c->decoding) {
        w->c.compressed++;
        w->c.body_bytes += sq_decoder_total(sq_engine__vux(c)->dec);
    } else {
        w->c.body_bytes += c->rd.body.bytes;
    }
    if (c->streaming) {
        w->c.sse_streams++;
        struct sq_engine__vux *xv = sq_engine__vux(c);
        w->c.sse_events += xv->sse.events;
        if (!w->sse_first &&
            (sq_latency_hist_new(&w->sse_first) < 0 || sq_latency_hist_new(&w->sse_dur) < 0))
            return;
        if (xv->first_event_ns)
            sq_hist_record(w->sse_first, (xv->first_event_ns - c->since_ns) / SQ_NS_PER_US);
        sq_hist_record(w->sse_dur, (now - c->since_ns) / SQ_NS_PER_US);
    }
}

static void conn_complete(struct sq_engine__conn *c, int64_t now)
{
    struct sq_engine__worker *w = c->w;
    SQ_ASSERT_MSG(c->state == CONN_ACTIVE && c->pending > 0, "a completion ends a request out");
    int64_t lat_us = (now - c->since_ns) / SQ_NS_PER_US;
    sq_hist_record(w->hist, lat_us);
    if (SQ_UNLIKELY(c->decoding || c->streaming)) {
        body_done(c, now);
    } else {
        w->c.body_bytes += c->rd.body.bytes;
        if (c->rd.content_encoding != SQ_CODING_NONE)
            w->c.undecodable++;
    }
    if (w->phase[0])
        record_phases(c, now);
    if (w->hist_unc)
        sq_hist_record(w->hist_unc, (now - c->sent_ns) / SQ_NS_PER_US);
    unsigned status = c->rd.status, cls = status / 100;
    w->c.status[cls <= 5 ? cls : 0]++;
    w->codes[status < SQ_STATUS_CODES ? status : 0]++;
    struct sq_fine_bin *fb = sq_engine__fine_bin(w, now);
    fb->completed++;
    if ((uint64_t)lat_us > fb->max_us)
        fb->max_us = lat_us < UINT32_MAX ? (uint32_t)lat_us : UINT32_MAX;
    if (w->ring)
        sample(c, now, c->rd.status, 0);
    if (SQ_UNLIKELY(w->ustats != NULL)) {
        struct sq_url_result *u = &w->ustats[c->url];
        u->completed++;
        u->status[cls <= 5 ? cls : 0]++;
        sq_hist_record(u->latency, lat_us);
    }
    /* a response neither captured nor drawn for a sample costs nothing more */
    if (SQ_UNLIKELY(c->xc != NULL) && (c->xc->on || c->xc->pick > 0))
        sq_engine__xc_end(c, now, c->rd.status, -1);
    w->c.completed++;
    w->in_flight--;
    acct_check(w);
    if (SQ_UNLIKELY(w->shooks & SQ_SCRIPT_RESPONSE))
        script_response(c);
    if (SQ_UNLIKELY(--c->pending != 0))
        return; /* a pipelined batch: the next response is due on this connection */
    c->state = CONN_IDLE;
    if (c->fv && c->fv->in_iter)
        flow_complete(c, now, lat_us);
}

/* wrk's Req/Sec: the requests this worker completed since the last sample, per second (a sample
 * only when some completed, as wrk records them). */
static void record_rate(struct sq_engine__worker *w, int64_t now)
{
    if (!w->rate_ns) {
        w->rate_ns = w->start_ns;
        w->rate_base = 0;
    }
    uint64_t done = w->c.completed - w->rate_base;
    int64_t ms = (now - w->rate_ns) / SQ_NS_PER_MS;
    if (done == 0 || ms <= 0)
        return;
    sq_hist_record(w->rate, (int64_t)((double)done * 1000.0 / (double)ms));
    w->rate_base = w->c.completed;
    w->rate_ns = now;
}

/* Every 100 ms: time out slow requests (the driver times out its connects), publish live
 * figures. */
static void sweep(struct sq_engine__worker *w, int64_t now)
{
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        if (c->state == CONN_ACTIVE && now - c->sent_ns >= c->tmo_ns) {
            conn_fail(c, SQ_ERRK_TIMEOUT);
            conn_replace(c);
        } else if (SQ_UNLIKELY(c->state == CONN_WAIT) && now - c->sent_ns >= c->tmo_ns) {
            bus_step_fail(c, SQ_ERRK_TIMEOUT);
            conn_next(c, now);
        }
    }
    for (uint32_t i = w->lane0; i < w->lane0 + w->nlanes; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        if (c->state == CONN_ACTIVE && now - c->sent_ns >= c->tmo_ns) {
            conn_fail(c, SQ_ERRK_TIMEOUT);
            conn_replace(c);
        }
    }
    w->drv->sweep(w, now);
    if (w->fbus)
        sq_engine__flowbus_sweep(w->fbus, now);
    publish(w);
    if (SQ_UNLIKELY(w->rate != NULL) && w->ticking)
        record_rate(w, now);
}

/* ramping-vus: activates VUs up to this worker's share of the target, in order. Parked VUs
 * beyond the share finish their iteration and stop (conn_next checks active_vus). */
static void ramp(struct sq_engine__worker *w, int64_t now)
{
    uint32_t target = (uint32_t)sq_seg_share(w->cfg->seg, sq_exec_vus_at(w->ex, now - w->sched_ns));
    uint32_t mine = (uint32_t)sq_engine__share(target, w->snw, w->sindex);
    if (SQ_UNLIKELY(w->ctl != NULL)) {
        /* control (engine/control.h): paused, or a VU count set in place of the executor's */
        int64_t v = __atomic_load_n(&w->ctl->vus, __ATOMIC_RELAXED);
        if (__atomic_load_n(&w->ctl->paused, __ATOMIC_RELAXED))
            mine = 0;
        else if (v >= 0)
            mine = (uint32_t)sq_engine__share((uint64_t)v, w->snw, w->sindex);
        else if (w->ex->kind != SQ_EXEC_RAMPING_VUS)
            mine = w->nconns;
        if (mine > w->nconns)
            mine = w->nconns;
    }
    uint32_t was = w->active_vus;
    w->active_vus = mine;
    for (uint32_t i = was; i < mine && i < w->nconns; i++)
        if (w->conns[i].state == CONN_IDLE)
            conn_next(&w->conns[i], now);
}

/* A change made through the run's control (engine/control.h) reached this worker: the open loop
 * takes the changed schedule (its arrivals so far stay as they were), the closed loop sets its
 * active VUs (parked ones finish their iteration, woken ones start the next at once). */
static void ctl_apply(struct sq_engine__worker *w, int64_t now)
{
    struct sq_engine__ctlscen *cs = w->ctl;
    w->ctl_gen = __atomic_load_n(&cs->gen, __ATOMIC_ACQUIRE);
    if (w->open) {
        uint32_t n = __atomic_load_n(&cs->nsegs, __ATOMIC_ACQUIRE);
        if (n != 0) {
            w->nsegs = n;
            w->total_arrivals = cs->segs[n - 1].total;
        }
        return;
    }
    ramp(w, now);
}

static bool pool_settled(const struct sq_engine__worker *w)
{
    if (w->fbus && !sq_engine__flowbus_settled(w->fbus))
        return false;
    for (uint32_t i = 0; i < w->nconns; i++)
        if (w->conns[i].state == CONN_CONNECTING || w->conns[i].state == CONN_CLOSED ||
            w->conns[i].state == CONN_HANDSHAKE || w->conns[i].state == CONN_QUEUED)
            return false;
    return true;
}

static bool aborted(const struct sq_engine__worker *w)
{
    return __atomic_load_n(&w->run->abort, __ATOMIC_RELAXED) != 0;
}

/* Opens the pool and waits for the run's common start. False when the run was aborted. */
static bool setup(struct sq_engine__worker *w)
{
    struct sq_loop *loop = w->loop;
    int64_t next_sweep = sq_loop_update_now(loop) + SWEEP_NS;
    for (uint32_t i = 0; i < w->nconns; i++)
        conn_connect(&w->conns[i]);
    if (w->fbus)
        sq_engine__flowbus_connect(w->fbus);
    bool ready = false;
    for (;;) {
        if (!ready && pool_settled(w)) {
            ready = true;
            w->ready_ns = sq_loop_now(loop);
            publish(w);
            __atomic_store_n(&w->live.ready, 1, __ATOMIC_RELEASE);
        }
        if (aborted(w))
            return false;
        int64_t go = __atomic_load_n(&w->run->go_ns, __ATOMIC_ACQUIRE);
        int64_t now = sq_loop_now(loop);
        if (go && now >= go)
            return true;
        int64_t wait = go ? go - now : SQ_NS_PER_MS;
        if (wait > next_sweep - now)
            wait = next_sweep - now;
        if (sq_loop_run_once(loop, wait < 0 ? 0 : wait) < 0)
            return false;
        now = sq_loop_now(loop);
        if (now >= next_sweep) {
            sweep(w, now);
            next_sweep = now + SWEEP_NS;
        }
    }
}

/* The scenario's own start: its executor's clock begins here (start_ns stays the run's start,
 * which the per-second slots count from). */
static void start(struct sq_engine__worker *w)
{
    const struct sq_exec *ex = w->ex;
    w->sched_ns = w->start_ns + w->offset_ns;
    w->end_load_ns = w->sched_ns + sq_exec_length_ns(ex);
    w->hard_end_ns = w->end_load_ns + ex->graceful_stop_ns;
    w->started = true;
    if (SQ_UNLIKELY(w->script != NULL)) {
        script_check_stop(w); /* setup() may have stopped the thread already */
        if (w->script_stopped)
            return;
    }
    int64_t now = sq_loop_update_now(w->loop);
    w->ctl = w->run->ctl ? &w->run->ctl[w->scen] : NULL;
    if (w->open) {
        w->next_arrival = w->sindex;
        for (uint32_t i = 0; i < w->nconns; i++)
            if (w->conns[i].state == CONN_IDLE)
                idle_push(&w->conns[i]);
        return;
    }
    w->active_vus = ex->kind == SQ_EXEC_RAMPING_VUS ? 0 : w->nconns;
    if (ex->kind == SQ_EXEC_RAMPING_VUS) {
        ramp(w, now);
        return;
    }
    for (uint32_t i = 0; i < w->nconns; i++)
        if (w->conns[i].state == CONN_IDLE)
            conn_next(&w->conns[i], now);
}

/* Stops starting iterations: queued arrivals are dropped, VUs park after their iteration. */
static void wind_down(struct sq_engine__worker *w)
{
    w->sending = false;
    w->c.dropped += w->qlen;
    w->qlen = 0;
    acct_check(w);
}

/* Closed model with iterations: true when no iteration is left to start. */
static bool iterations_done(const struct sq_engine__worker *w)
{
    if (w->ex->kind == SQ_EXEC_SHARED_ITERATIONS)
        return w->quota == 0;
    if (w->ex->kind != SQ_EXEC_PER_VU_ITERATIONS)
        return false;
    for (uint32_t i = 0; i < w->nconns; i++)
        if (w->conns[i].iters > 0)
            return false;
    return true;
}

/* When the arrival numbered idx (in the worker's segment) is released: its time on the schedule,
 * or under precision coarse the end of the window it falls in (its intended time from then on),
 * the last window cut at the schedule's end so that no arrival falls past the load. */
static int64_t release_ns(const struct sq_engine__worker *w, uint64_t idx)
{
    int64_t off;
    if (SQ_UNLIKELY(w->nsegs != 0)) {
        off = sq_engine__ctl_arrival_ns(w->ctl->segs, w->nsegs, w->ex, idx);
        if (off == INT64_MAX)
            return INT64_MAX; /* paused */
    } else {
        off = sq_exec_arrival_ns(w->ex, sq_seg_global(w->cfg->seg, idx));
    }
    if (w->window_ns) {
        off = (off + w->window_ns - 1) / w->window_ns * w->window_ns;
        if (off > w->end_load_ns - w->sched_ns)
            off = w->end_load_ns - w->sched_ns;
    }
    return w->sched_ns + off;
}

static void mcum_add(struct sq_msecond *o, const struct sq_step_mval *mv)
{
    o->n += mv->n;
    o->nonzero += mv->nonzero;
    o->sum += mv->sum;
    if (mv->last_ns >= o->last_ns) {
        o->last = mv->last;
        o->last_ns = mv->last_ns;
    }
}

/* The worker's samples of each plan metric so far (cumulative), every step's slots for it added
 * up: what the per-second series of the plan's metrics is the difference of; then each step's
 * own (out[nm + k * nm + m]), what the streamed outputs split by the steps' tags. */
static void metrics_cum(const struct sq_engine__worker *w, struct sq_msecond *out)
{
    size_t nm = w->flow->plan->nmetrics;
    memset(out, 0, nm * (1 + w->flow->nsteps) * sizeof(*out));
    for (size_t k = 0; k < w->flow->nsteps; k++) {
        const struct sq_step_stats *ss = &w->steps[k];
        for (uint32_t j = 0; j < ss->nmvals; j++) {
            const struct sq_step_mval *mv = &ss->mvals[j];
            uint32_t m = sq_plan_slot_metric(w->flow->steps[k].ps, j);
            if (!mv->n || m >= w->flow->plan->nmetrics)
                continue;
            mcum_add(&out[m], mv);
            mcum_add(&out[nm + k * nm + m], mv);
        }
    }
}

/* Closes the current slot as second `second` and moves to the next one. Returns false (and keeps
 * recording into the same slot) when the main thread has not yet freed a slot, unless wait is
 * set: then it waits for one (only at the very end). */
static bool publish_slot(struct sq_engine__worker *w, uint32_t second, int64_t now, bool wait)
{
    for (;;) {
        uint32_t rd = __atomic_load_n(&w->rd, __ATOMIC_ACQUIRE);
        if (w->wr - rd < SQ_SLOTS - 1)
            break;
        if (!wait)
            return false;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    struct sq_engine__slot *s = &w->slots[w->wr % SQ_SLOTS];
    acct_check(w); /* the shard swap: the main thread adds up what this snapshot says */
    s->c = w->c;
    s->arrivals = w->arrivals;
    s->active = w->open ? w->in_flight : w->active_vus;
    s->second = second;
    s->end_ns = now;
    /* The worker's own cost, once a second (engine/client.c). */
    sq_engine__times(w, &s->cpu_ns, &s->wait_ns);
    s->cpu_ns -= w->cpu0_ns;
    s->wait_ns -= w->wait0_ns;
    s->poll_ns = w->idle_poll_ns;
    s->sleep_ns = sq_loop_blocked_ns(w->loop) + w->deaf_ns - w->sleep0_ns;
    s->lag_ns = w->lag_ns;
    s->behind_ns = 0;
    for (size_t k = 0; s->step_live && k < w->flow->nsteps; k++) {
        const struct sq_step_stats *ss = &w->steps[k];
        struct sq_step_live *o = &s->step_live[k];
        o->reqs = ss->reqs;
        o->failed = ss->failed;
        o->errors = ss->errors;
        o->nstatus = ss->nstatus;
        for (uint32_t b = 0; b < ss->nstatus && b < SQ_STEP_STATUSES; b++) {
            o->by_status[b].status = ss->by_status[b].status;
            o->by_status[b].n = ss->by_status[b].n;
        }
        o->nchecks = ss->nchecks;
        for (uint32_t ck = 0; ck < ss->nchecks && ck < SQ_STEP_LIVE_CHECKS; ck++) {
            o->checks[ck].pass = ss->check_pass[ck];
            o->checks[ck].fail = ss->check_fail[ck];
        }
        o->nmvals = ss->nmvals;
        for (uint32_t j = 0; j < ss->nmvals && j < SQ_STEP_LIVE_METRICS; j++) {
            const struct sq_step_mval *mv = &ss->mvals[j];
            o->mvals[j].n = mv->n;
            o->mvals[j].nonzero = mv->nonzero;
            o->mvals[j].sum = mv->sum;
            o->mvals[j].last = mv->last;
            o->mvals[j].last_ns = mv->last_ns;
        }
    }
    if (s->mcum)
        metrics_cum(w, s->mcum);
    s->nfine = 0;
    if (w->cfg->on_tick_fine && now >= w->fine_next)
        sq_engine__fine_advance(w, now); /* past the bins' span: folded even with no completion */
    if (w->cfg->on_tick_fine && w->fine_ns <= SQ_LIVE_FINE_MAX_NS && second > 0) {
        /* the second's bins: [second - 1, second) s at the bins' width now (200 ms bins: 5) */
        uint32_t per = (uint32_t)(SQ_NS_PER_S / w->fine_ns);
        uint64_t first = (uint64_t)(second - 1) * per;
        if (first + per <= SQ_FINE_BINS) {
            memcpy(s->fine, &w->fine[first], per * sizeof(*s->fine));
            s->nfine = per;
            s->fine_ns = w->fine_ns;
        }
    }
    if (w->open && w->sending && w->started && w->next_arrival < w->total_arrivals) {
        int64_t due = release_ns(w, w->next_arrival);
        s->behind_ns = now > due ? now - due : 0;
    }
    __atomic_store_n(&w->wr, w->wr + 1, __ATOMIC_RELEASE);
    struct sq_engine__slot *next = &w->slots[w->wr % SQ_SLOTS];
    w->hist = next->hist;
    w->hist_unc = next->hist_unc;
    w->step_h = next->step_h;
    return true;
}

/* At each whole second after the start: hand the second's shard to the main thread. */
static void tick(struct sq_engine__worker *w, int64_t now)
{
    uint32_t second = (uint32_t)((w->next_tick_ns - w->start_ns) / SQ_NS_PER_S);
    int64_t lag = now - w->next_tick_ns;
    if (lag > w->lag_ns)
        w->lag_ns = lag; /* the largest since the last slot went out */
    /* past this tick its end cannot fold into the second before (run.c: aggregate) */
    if (second > 1)
        __atomic_store_n(&w->live.sealed, second - 1, __ATOMIC_RELEASE);
    if (publish_slot(w, second, now, false)) {
        w->next_tick_ns = w->start_ns + (int64_t)(second + 1) * SQ_NS_PER_S;
        w->seal_second = second;
        w->seal_ns = w->start_ns + (int64_t)second * SQ_NS_PER_S + SQ_FOLD_NS;
        w->lag_ns = 0;
    } else
        w->next_tick_ns += 10 * SQ_NS_PER_MS; /* the main thread is behind: try again soon */
}

/* CLOCK_REALTIME in ns: only to turn the kernel's receive stamps into monotonic time (the
 * offset is taken at each deaf wake-up, so a clock step moves at most one sleep's stamps). */
static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * SQ_NS_PER_S + ts.tv_nsec;
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC, for the kernel's receive stamps: the realtime read between
 * two monotonic ones, the narrowest of three tries (a thread preempted between its reads would
 * otherwise shift every stamp by the preemption). */
static int64_t rt_offset(void)
{
    int64_t best = 0, width = INT64_MAX;
    for (int i = 0; i < 3 && width > 2000; i++) {
        int64_t m1 = sq_now_ns(), r = realtime_ns(), m2 = sq_now_ns();
        if (m2 - m1 < width) {
            width = m2 - m1;
            best = r - (m1 + (m2 - m1) / 2);
        }
    }
    return best;
}

/* A timed wait for an arrival woke over_ns past the time it asked for. Precision normal polls
 * only the lower quartile of the last 32 such overshoots: three wake-ups in four then find their
 * arrival already due and send it at once (late by what the kernel overshot past the quartile,
 * typically tens of µs), the fourth polls a few µs. The sort runs once per 32 wake-ups. */
static void learn_wake(struct sq_engine__worker *w, int64_t over_ns)
{
    w->wakes++;
    w->overshoot[w->nover++ % SQ_ARRAY_LEN(w->overshoot)] = over_ns > 0 ? over_ns : 0;
    if (w->precision != SQ_PACING_NORMAL || w->nover % SQ_ARRAY_LEN(w->overshoot) != 0)
        return;
    int64_t v[SQ_ARRAY_LEN(w->overshoot)];
    uint32_t n = (uint32_t)SQ_ARRAY_LEN(v);
    memcpy(v, w->overshoot, sizeof(v));
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t k = i; k > 0 && v[k - 1] > v[k]; k--) {
            int64_t t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
    int64_t tail = v[n / 4];
    w->spin_ns = tail < SQ_PACING_TAIL_MAX_NS ? tail : SQ_PACING_TAIL_MAX_NS;
}

/* A wait for responses (requests out, no arrival due before `wait` ends): poll the sockets for
 * up to IDLE_POLL_NS before sleeping, while the recent waits were that short. On loopback (and
 * on a VM, through the hypervisor) a client asleep in epoll makes the server pay for waking it
 * at each response it sends: in a server-bound run that cost is the server's, and it serves
 * fewer. A client whose responses come back within tens of µs is about to be busy anyway, so it
 * stays awake for them; one whose server is slow (the moving average of its waits above the
 * bound) sleeps at once, as before. docs/benchmarks.md, "HTTP/2 against h2load, round 3".
 * Returns what sq_loop_run_once returns. */
static int wait_io(struct sq_engine__worker *w, struct sq_loop *loop, int64_t now, int64_t wait)
{
    int ran = 0;
    if (w->idle_gap_ns < IDLE_POLL_NS) {
        int64_t stop = now + (wait < IDLE_POLL_NS ? wait : IDLE_POLL_NS), last = now;
        w->idle_polled++;
        do {
            last = sq_loop_now(loop); /* the poll that finds something ends the idle time */
            ran = sq_loop_run_once(loop, 0);
        } while (ran == 0 && sq_loop_now(loop) < stop);
        if (ran != 0) {
            w->idle_caught += ran > 0;
            w->idle_poll_ns += last - now;
        } else {
            w->idle_poll_ns += sq_loop_now(loop) - now;
        }
    }
    if (ran == 0) {
        int64_t left = now + wait - sq_loop_now(loop);
        w->idle_slept++;
        ran = sq_loop_run_once(loop, left < 0 ? 0 : left);
    }
    int64_t gap = sq_loop_now(loop) - now;
    if (gap > 4 * IDLE_POLL_NS)
        gap = 4 * IDLE_POLL_NS; /* one long wait does not keep it asleep for long */
    w->idle_gap_ns += (gap - w->idle_gap_ns) / 8;
    return ran;
}

static void run_loop(struct sq_engine__worker *w)
{
    struct sq_loop *loop = w->loop;
    const struct sq_exec *ex = w->ex;
    uint32_t step = w->snw;
    w->rt_off = rt_offset();
    int64_t now = sq_loop_now(loop);
    int64_t next_sweep = now + SWEEP_NS, next_ramp = now + RAMP_CHECK_NS;
    int64_t next_due = INT64_MAX;
    for (;;) {
        now = sq_loop_now(loop);
        if (!w->started && now >= w->start_ns + w->offset_ns) {
            start(w);
            now = sq_loop_now(loop);
        }
        if (SQ_UNLIKELY(w->ctl != NULL) && w->started && w->sending &&
            __atomic_load_n(&w->ctl->gen, __ATOMIC_ACQUIRE) != w->ctl_gen)
            ctl_apply(w, now);
        if (w->open && w->sending && w->started) {
            /* Every arrival that is due goes out now, at its own intended time. */
            while (w->next_arrival < w->total_arrivals) {
                int64_t due = release_ns(w, w->next_arrival);
                if (due > now) {
                    next_due = due;
                    break;
                }
                dispatch(w, due, now);
                w->next_arrival += step;
            }
            if (w->next_arrival >= w->total_arrivals)
                next_due = INT64_MAX;
        }
        if (aborted(w))
            break;
        int64_t wind = __atomic_load_n(&w->run->wind_ns, __ATOMIC_RELAXED);
        if (SQ_UNLIKELY(wind != 0)) {
            /* stopped by the caller: what is in flight may finish for the graceful stop */
            if (w->sending)
                wind_down(w);
            int64_t grace = ex->graceful_stop_ns < SQ_STOP_GRACE_MAX_NS ? ex->graceful_stop_ns
                                                                        : SQ_STOP_GRACE_MAX_NS;
            if (wind + grace < w->hard_end_ns)
                w->hard_end_ns = wind + grace;
        }
        if (w->sending && (now >= w->end_load_ns || (!w->open && iterations_done(w))))
            wind_down(w);
        if (!w->sending && ((w->in_flight == 0 && w->in_iter == 0) || now >= w->hard_end_ns))
            break;
        if (ex->kind == SQ_EXEC_RAMPING_VUS && w->sending && now >= next_ramp) {
            ramp(w, now);
            next_ramp = now + RAMP_CHECK_NS;
        }

        int64_t until = next_sweep;
        if (w->sending && w->end_load_ns < until)
            until = w->end_load_ns;
        if (!w->sending && w->hard_end_ns < until)
            until = w->hard_end_ns;
        if (ex->kind == SQ_EXEC_RAMPING_VUS && next_ramp < until)
            until = next_ramp;
        if (w->next_tick_ns < until)
            until = w->next_tick_ns;
        if (w->seal_ns < until)
            until = w->seal_ns;
        if (!w->started && w->start_ns + w->offset_ns < until)
            until = w->start_ns + w->offset_ns;
        int64_t wait;
        w->wake_at = 0;
        if (w->rxts && next_due < until && w->sending && next_due - now > w->spin_ns &&
            next_due - now <= (w->window_ns ? w->window_ns : DEAF_MAX_NS)) {
            /* Sleep deaf to the sockets until the arrival, less the learnt tail, then read what
             * came meanwhile: one wake-up for the arrival and its neighbours' responses, each
             * timed by the kernel's stamp. */
            int64_t at = next_due - w->spin_ns;
            struct timespec ts = {.tv_sec = at / SQ_NS_PER_S, .tv_nsec = at % SQ_NS_PER_S};
            int64_t before = sq_now_ns();
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
            w->deaf_sleeps++;
            now = sq_loop_update_now(loop);
            w->deaf_ns += now - before;
            learn_wake(w, now - at);
            w->rt_off = rt_offset();
            wait = 0;
        } else if (next_due < until && w->sending) {
            /* Sleep through the coarse part, then poll until the arrival is due: the kernel
             * wakes a sleeper late, and the tail polled (w->spin_ns, by the precision) is how
             * much of that lateness is bought back with a busy core. */
            wait = next_due - now - w->spin_ns;
            if (wait < 0)
                wait = 0;
            else
                w->wake_at = now + wait;
        } else {
            wait = until - now;
        }
        int ran = wait > 0 && w->in_flight && !w->wake_at
                      ? wait_io(w, loop, now, wait)
                      : sq_loop_run_once(loop, wait < 0 ? 0 : wait);
        if (ran < 0)
            break;
        if (SQ_UNLIKELY(w->over))
            break; /* a driver gave up long work at the end (the loop's clock is stale then) */
        now = sq_loop_now(loop);
        if (ran == 0 && w->wake_at)
            learn_wake(w, now - w->wake_at); /* nothing else woke it: the timeout did */
        if (now >= next_sweep) {
            sweep(w, now);
            next_sweep = now + SWEEP_NS;
        }
        if (now >= w->next_tick_ns)
            tick(w, now);
        if (now >= w->seal_ns) {
            /* its end (w->end_ns, read after this) is past the tick's fold window */
            __atomic_store_n(&w->live.sealed, w->seal_second, __ATOMIC_RELEASE);
            w->seal_ns = INT64_MAX;
        }
    }
}

static size_t flow_stamp(void *ud, uint64_t *seq, char *out)
{
    struct sq_engine__worker *w = ud;
    w->c.bus.stamped++;
    return sq_engine__stamp(w, seq, out);
}

uint64_t sq_engine__vu_number(const struct sq_engine__worker *w, uint32_t i)
{
    return w->vu_base + sq_seg_global(w->cfg->seg, w->first_vu - w->vu_base + i) + 1;
}

uint64_t *sq_engine__vu_rng(struct sq_engine__conn *c)
{
    struct sq_engine__vux *x = sq_engine__vux(c);
    if (SQ_UNLIKELY(x->rng == 0))
        x->rng = sq_tmpl_rng_init(c->w->run->seed, sq_engine__vu_number(c->w, c->local));
    return &x->rng;
}

/* Plan runs: per-VU flow state, per-step figures, the iteration histogram, regex states. */
static int flow_init(struct sq_engine__worker *w)
{
    const struct sq_flow *f = w->flow;
    w->vus = calloc(w->nconns ? w->nconns : 1, sizeof(*w->vus));
    if (!w->vus)
        return -ENOMEM;
    for (uint32_t i = 0; i < w->nconns; i++) {
        int rc = sq_flow_vu_init(&w->vus[i], f, sq_engine__vu_number(w, i), w->run->seed);
        if (rc < 0)
            return rc;
        w->vus[i].stamp_fn = flow_stamp;
        w->vus[i].stamp_ud = w;
    }
    int rc = sq_engine__steps_new(f, &w->steps);
    if (rc == 0)
        rc = sq_latency_hist_new(&w->iter_hist);
    if (rc == 0 && f->sc->ngroups)
        rc = sq_group_hists_new(f->sc->ngroups, &w->gdur);
    if (rc < 0)
        return rc;
    w->states = sq_flow_states_new(f);
    if (!w->states)
        return -ENOMEM;
    return sq_engine__flowbus_new(w, &w->fbus);
}

int sq_engine__worker_init(struct sq_engine__worker *w, struct sq_engine__shared *run,
                           uint32_t windex, const struct sq_engine__place *pl)
{
    memset(w, 0, sizeof(*w));
    const struct sq_run_config *cfg = run->cfg;
    const struct sq_run_scen *sc = cfg->scens ? &cfg->scens[pl->scen] : NULL;
    const struct sq_exec *ex = sc ? &sc->exec : &cfg->exec;
    uint32_t n = pl->snw, si = pl->sindex;
    w->cfg = cfg;
    w->ex = ex;
    w->run = run;
    w->windex = windex;
    w->scen = pl->scen;
    w->sindex = si;
    w->snw = n;
    w->offset_ns = sc ? sc->start_ns : 0;
    w->flow = sc ? sc->flow : NULL;
    w->open = sq_exec_is_open(ex);
    w->hold = cfg->bus && cfg->bus->idle;
    w->req = cfg->request;
    w->req_len = cfg->request_len;
    w->req_n = 1;
    w->req_head = cfg->head_request;
    if (cfg->body_tmpl && !sc)
        w->shooks = BODY_TMPL; /* the quick face refuses -s with a templated body */
    if (cfg->script && !sc) {
        /* a wrk-style script: this worker's own state, its hooks and its static request */
        if (windex >= cfg->script->n)
            return -EINVAL;
        w->script = cfg->script->states[windex];
        w->shooks =
            sq_script_hooks(w->script) & (SQ_SCRIPT_REQUEST | SQ_SCRIPT_RESPONSE | SQ_SCRIPT_DELAY);
        const char *r;
        size_t rl;
        uint32_t rn;
        sq_script_static_request(w->script, &r, &rl, &rn);
        if (r && rl) {
            w->req = r;
            w->req_len = rl;
            w->req_n = rn ? rn : 1;
            w->req_head = is_head(r, rl);
        }
        if (cfg->script->addrs)
            w->addr = &cfg->script->addrs[windex];
    }
    /* The driver, and how many VUs ride one of its connections: HTTP/2 carries `streams` and a
     * bus connection `window` (a worker gets whole connections), HTTP/1.1 one. A plan's scenario
     * says its own protocol; buses are the quick face's. */
    bool h2 = sc ? sc->h2 : cfg->h2_request != NULL;
    const struct sq_bus_config *bus = sc ? NULL : cfg->bus;
    w->drv = h2 ? &sq_engine__h2_driver : &sq_engine__h1_driver;
#ifdef SQ_HAVE_H3
    if (h2 && cfg->h3 && (sc ? sc->h3 : true))
        w->drv = &sq_engine__h3_driver; /* HTTP/3: the HTTP/2 request over QUIC */
#endif
    if ((cfg->ws && !sc) || (sc && sc->flow->sc->ws))
        w->drv = &sq_engine__ws_driver; /* plans: HTTP/1.1 steps go through it to h1drv */
    uint32_t per = h2 && cfg->streams ? cfg->streams : 1;
    if (bus) {
        w->drv = &sq_engine__bus_driver; /* NATS or MQTT by bus->kind (busio.c) */
        per = bus->window ? bus->window : 1;
    }
    if (sc) {
        bool http = false;
        for (size_t i = 0; i < sc->flow->nsteps; i++)
            http |= sc->flow->steps[i].ps->kind == SQ_STEP_REQUEST ||
                    sc->flow->steps[i].ps->kind == SQ_STEP_WS;
        if (!http)
            w->drv = &sq_engine__null_driver;
    }
    sq_stamp_enc_init(&w->stamp, run->run_id + windex);
    uint64_t vus = sq_seg_share(cfg->seg, sq_exec_max_vus(ex));
    /* The open model's pool grows from preAllocatedVUs to maxVUs on HTTP/1.1 (one VU, one
     * connection); elsewhere maxVUs only caps what is in flight. */
    uint64_t pre = sq_exec_is_open(ex) ? sq_seg_share(cfg->seg, ex->vus) : vus;
    if (pre >= vus || per != 1 || w->drv != &sq_engine__h1_driver)
        vus = pre;
    uint32_t total = (uint32_t)((vus + per - 1) / per);
    uint32_t nconn = (uint32_t)sq_engine__share(total, n, si), first_conn = 0;
    for (uint32_t i = 0; i < si; i++)
        first_conn += (uint32_t)sq_engine__share(total, n, i);
    w->nconns = nconn * per;
    w->ncap = w->nconns;
    w->npre = vus > pre ? (uint32_t)sq_engine__share(pre, n, si) : w->nconns;
    w->precision = ex->precision;
    /* deaf sleeps need every response stamped by the kernel: plain HTTP/1.1, no flow (its
     * timers would wait), no script */
    w->rxts = sq_exec_is_open(ex) &&
              (w->precision == SQ_PACING_NORMAL || w->precision == SQ_PACING_COARSE) &&
              w->drv == &sq_engine__h1_driver && !sc && !cfg->tls && !cfg->script;
    SQ_ASSERT_MSG(!(w->rxts && ex->pacing_ns), "c->rx_ns and c->iter_ns share their bytes");
    w->spin_ns = w->precision == SQ_PACING_HIGH     ? run->spin_ns
                 : w->precision == SQ_PACING_NORMAL ? run->spin_ns / 4
                                                    : 0;
    w->window_ns = w->precision != SQ_PACING_COARSE ? 0
                   : ex->window_ns                  ? ex->window_ns
                                                    : SQ_PACING_WINDOW_NS;
    uint32_t first = pl->vu_base + first_conn * per;
    w->first_vu = first;
    w->vu_base = pl->vu_base;
    if (ex->kind == SQ_EXEC_SHARED_ITERATIONS)
        w->quota = sq_engine__share(sq_seg_share(cfg->seg, ex->iterations), n, si);
    int rc = sq_loop_new(&w->loop);
    if (rc < 0)
        return rc;
    if (w->flow && w->flow->sc->batch_max) {
        const struct sq_plan_scenario *fsc = w->flow->sc;
        /* HTTP/1.1: up to batchConnections connections; HTTP/2: a stream per request */
        w->lanes_per = fsc->batch_max < fsc->batch_conns || w->drv != &sq_engine__h1_driver
                           ? fsc->batch_max
                           : fsc->batch_conns;
        w->lane0 = w->ncap;
        w->nlanes = w->ncap * w->lanes_per;
    }
    uint32_t nall = w->ncap + w->nlanes;
    w->conns = calloc(nall ? nall : 1, sizeof(*w->conns));
    w->vux = calloc(nall ? nall : 1, sizeof(*w->vux));
    w->rbuf = malloc(SQ_ENGINE_RBUF_SIZE);
    if (!w->conns || !w->vux || !w->rbuf)
        return -ENOMEM;
    for (int i = 0; i < SQ_SLOTS; i++) {
        rc = sq_latency_hist_new(&w->slots[i].hist);
        if (rc == 0 && sq_exec_is_open(ex))
            rc = sq_latency_hist_new(&w->slots[i].hist_unc);
        if (rc < 0)
            return rc;
    }
    w->hist = w->slots[0].hist;
    w->hist_unc = w->slots[0].hist_unc;
    w->fine = calloc(SQ_FINE_BINS, sizeof(*w->fine));
    if (!w->fine)
        return -ENOMEM;
    w->fine_ns = SQ_FINE_BIN_NS;
    w->fine_next = INT64_MAX; /* until the start: nothing completes before it */
    if (w->open) {
        w->total_arrivals = sq_seg_share(cfg->seg, sq_exec_total_arrivals(ex));
        uint64_t cap = sq_engine__share(sq_seg_share(cfg->seg, ex->max_in_flight), n, si);
        w->ifcap = cap;
        w->qcap = (uint32_t)(cap > w->npre ? cap - w->npre : 0);
        w->queue = malloc((w->qcap ? w->qcap : 1) * sizeof(*w->queue));
        w->idle = malloc((w->nconns ? w->nconns : 1) * sizeof(*w->idle));
        if (!w->queue || !w->idle)
            return -ENOMEM;
    }
    if (cfg->on_samples) {
        w->rcap = 1u << 15;
        w->ring = malloc(w->rcap * sizeof(*w->ring));
        if (!w->ring)
            return -ENOMEM;
        double f = cfg->sample_fraction;
        w->sample_below = f >= 1 || f <= 0 ? UINT64_MAX : (uint64_t)(f * 18446744073709551615.0);
        w->rng = 0x9E3779B97F4A7C15ull * (windex + 1);
    }
    for (int k = 0; cfg->phases && k < SQ_PHASE_COUNT; k++) {
        rc = sq_latency_hist_new(&w->phase[k]);
        if (rc < 0)
            return rc;
    }
    if (w->flow) {
        rc = flow_init(w);
        if (rc < 0)
            return rc;
        if (w->flow->plan->script && (rc = hooks_init(w)) < 0)
            return rc;
        for (int i = 0; i < SQ_SLOTS; i++) {
            struct sq_hist **sh = calloc(w->flow->nsteps ? w->flow->nsteps : 1, sizeof(*sh));
            if (!sh)
                return -ENOMEM;
            w->slots[i].step_h = sh;
            for (size_t k = 0; k < w->flow->nsteps; k++)
                if (!w->flow->steps[k].think && (rc = sq_engine__step_hist_new(&sh[k])) < 0)
                    return rc;
            if (cfg->on_tick_steps && w->flow->nsteps &&
                !(w->slots[i].step_live = calloc(w->flow->nsteps, sizeof(struct sq_step_live))))
                return -ENOMEM;
            if (w->flow->plan->nmetrics &&
                !(w->slots[i].mcum = calloc(w->flow->plan->nmetrics * (1 + w->flow->nsteps),
                                            sizeof(struct sq_msecond))))
                return -ENOMEM;
        }
        w->step_h = w->slots[0].step_h;
    }
    if (!sc && cfg->nurls) {
        w->ustats = calloc(cfg->nurls, sizeof(*w->ustats));
        if (!w->ustats)
            return -ENOMEM;
        for (uint32_t u = 0; u < cfg->nurls; u++)
            if ((rc = sq_latency_hist_new(&w->ustats[u].latency)) < 0)
                return rc;
        w->url_next = windex % cfg->nurls;
    }
    /* what acct_check holds an open worker's arrivals to (worker.h) */
    w->per_arrival = w->flow || (w->shooks & SQ_SCRIPT_REQUEST) ? 0 : w->ustats ? 1 : w->req_n;
    if (cfg->rate_samples && (rc = sq_latency_hist_new(&w->rate)) < 0)
        return rc;
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        c->w = w;
        sq_engine__xport_init(&c->x);
        c->local = i;
        c->global = first + i;
        c->state = CONN_CLOSED;
        if (ex->kind == SQ_EXEC_PER_VU_ITERATIONS)
            c->iters = ex->iterations;
        sq_timer_init(&c->timer, timer_cb);
        if (w->flow)
            c->fv = &w->vus[i];
        struct sq_engine__vux *xv = &w->vux[i];
        if ((w->shooks & SQ_SCRIPT_RESPONSE) && !(xv->cap = calloc(1, sizeof(*xv->cap))))
            return -ENOMEM;
    }
    if (w->nlanes && !(w->lane_fv = calloc(w->nlanes, sizeof(*w->lane_fv))))
        return -ENOMEM;
    for (uint32_t k = 0; k < w->nlanes; k++) {
        struct sq_engine__conn *c = &w->conns[w->lane0 + k];
        c->w = w;
        sq_engine__xport_init(&c->x);
        c->local = w->lane0 + k;
        c->global = first + k / w->lanes_per; /* its VU's address */
        c->state = CONN_CLOSED;
        c->lane = true;
        sq_timer_init(&c->timer, timer_cb);
        c->fv = &w->lane_fv[k];
        c->fv->rng = sq_tmpl_rng_init(
            w->run->seed, SQ_TMPL_STREAM_LANE + sq_engine__vu_number(w, k / w->lanes_per) * 64 +
                              k % w->lanes_per);
    }
    if ((rc = sq_engine__xc_init(w)) < 0)
        return rc;
    rc = w->drv->init(w, nconn, first_conn);
    w->nconns = w->npre; /* the rest wait for the pool to grow (set up, closed) */
    return rc;
}

void sq_engine__worker_dispose(struct sq_engine__worker *w)
{
    if (w->ncap > w->nconns)
        w->nconns = w->ncap; /* what init set up, opened or not */
    sq_engine__times_close(w);
    if (w->drv)
        w->drv->dispose(w);
    if (w->flow) {
        if (w->vus)
            for (uint32_t i = 0; i < w->nconns; i++)
                sq_flow_vu_dispose(&w->vus[i], w->flow);
        free(w->vus);
        for (uint32_t k = 0; w->lane_fv && k < w->nlanes; k++)
            sq_flow_vu_lane_dispose(&w->lane_fv[k], w->flow);
        free(w->lane_fv);
        sq_step_stats_free(w->steps, w->flow->nsteps);
        sq_hist_free(w->iter_hist);
        sq_group_hists_free(w->gdur, w->flow->sc->ngroups);
        sq_flow_states_free(w->flow, w->states);
        sq_engine__flowbus_free(w->fbus);
    }
    for (int k = 0; k < SQ_PHASE_COUNT; k++)
        sq_hist_free(w->phase[k]);
    for (uint32_t u = 0; w->ustats && u < w->cfg->nurls; u++)
        sq_hist_free(w->ustats[u].latency);
    free(w->ustats);
    for (uint32_t i = 0; w->conns && i < w->nconns; i++) {
        struct sq_engine__capture *k = w->vux ? w->vux[i].cap : NULL;
        if (k) {
            sq_buf_dispose(&k->head);
            sq_buf_dispose(&k->body);
            sq_buf_dispose(&k->fields);
            free(k);
        }
        if (w->vux)
            free(w->vux[i].own);
    }
    sq_buf_dispose(&w->body);
    free(w->unfinished);
    w->unfinished = NULL;
    free(w->script_err);
    free(w->hook_ids);
    if (w->own_script)
        sq_script_free(w->script);
    sq_hist_free(w->rate);
    sq_hist_free(w->sse_first);
    sq_hist_free(w->connack);
    sq_engine__busws_ctx_free(w);
    sq_hist_free(w->sse_dur);
    free(w->conns);
    free(w->vux);
    free(w->rbuf);
    free(w->queue);
    free(w->idle);
    free(w->ring);
    sq_tls_sessions_dispose(&w->tls_cache);
    for (int i = 0; i < SQ_SLOTS; i++) {
        sq_hist_free(w->slots[i].hist);
        sq_hist_free(w->slots[i].hist_unc);
        for (size_t k = 0; w->slots[i].step_h && k < w->flow->nsteps; k++)
            sq_hist_free(w->slots[i].step_h[k]);
        free(w->slots[i].step_h);
        free(w->slots[i].step_live);
        free(w->slots[i].mcum);
    }
    free(w->fine);
    sq_engine__xc_dispose(w);
    sq_loop_free(w->loop);
    memset(w, 0, sizeof(*w));
}

void *sq_engine__worker_main(void *arg)
{
    struct sq_engine__worker *w = arg;
    /* --cpus: pinned before anything is allocated, so its memory is touched first there */
    w->cpu = -1;
    if (w->cfg->ncpus) {
        int c = w->cfg->cpus[w->windex % w->cfg->ncpus];
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(c, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0)
            w->cpu = c;
    }
    /* Timers and waits as precise as the kernel allows: the default 50 µs slack would land in
     * every paced send. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    sq_engine__times_open(w);
    if (w->cfg->connect_rate > 0) /* --connect-rate: this worker's share (xport.c) */
        w->pace_ns = (int64_t)((double)w->run->nworkers * 1e9 / w->cfg->connect_rate);
    w->sending = true;
    if (setup(w)) {
        sq_engine__times(w, &w->cpu0_ns, &w->wait0_ns);
        w->sleep0_ns = sq_loop_blocked_ns(w->loop) + w->deaf_ns;
        w->start_ns = __atomic_load_n(&w->run->go_ns, __ATOMIC_ACQUIRE);
        w->next_tick_ns = w->start_ns + SQ_NS_PER_S;
        w->fine_i = 0;
        w->fine_next = w->start_ns + w->fine_ns;
        w->end_load_ns = w->hard_end_ns = INT64_MAX;
        w->seal_ns = INT64_MAX;
        w->ticking = true;
        run_loop(w);
    }
    w->end_ns = sq_loop_update_now(w->loop);
    int64_t go = __atomic_load_n(&w->run->go_ns, __ATOMIC_ACQUIRE);
    if (go && !w->ticking) {
        /* aborted after the common start was set but before this worker saw it: it still
         * closes its one (empty) interval, so every worker's end is in the series */
        w->start_ns = go;
        w->ticking = true;
        if (w->end_ns < go)
            w->end_ns = go;
        sq_engine__times(w, &w->cpu0_ns, &w->wait0_ns);
        w->sleep0_ns = sq_loop_blocked_ns(w->loop) + w->deaf_ns;
    }
    w->sending = false;
    w->drv->close_all(w);
    if (w->fbus)
        sq_engine__flowbus_close_all(w->fbus);
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        sq_timer_stop(w->loop, &c->timer);
        c->state = CONN_CLOSED; /* in_flight keeps counting what was still out */
        if (c->fv && c->fv->in_iter) {
            c->fv->in_iter = false;
            w->interrupted++;
        }
    }
    for (uint32_t i = w->lane0; i < w->lane0 + w->nlanes; i++) {
        struct sq_engine__conn *c = &w->conns[i];
        sq_timer_stop(w->loop, &c->timer);
        c->state = CONN_CLOSED;
        c->fv->in_iter = false; /* its VU's iteration is the one counted interrupted */
    }
    w->c.dropped += w->qlen;
    w->qlen = 0;
    acct_check(w); /* what is still in flight stays counted there (run.c adds it up) */
    if (w->ticking) {
        /* The last, partial second: labelled with the second it falls in, or folded into the
         * one before when it is a sliver (a timed run ends a hair after its last tick). Either
         * way the series' last entry ends at the latest worker's end, which is the run's
         * duration (run.c: consume). */
        int64_t into = w->end_ns - w->start_ns;
        uint32_t second = (uint32_t)((into + SQ_NS_PER_S - 1) / SQ_NS_PER_S);
        if (second > 1 && into - (int64_t)(second - 1) * SQ_NS_PER_S < SQ_FOLD_NS)
            second--;
        publish_slot(w, second ? second : 1, w->end_ns, true);
    }
    sq_engine__times_close(w);
    publish(w);
    __atomic_store_n(&w->live.done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- the run's addresses (worker.h): written by the main thread, read at connect time ---- */

void sq_engine__addrs_store(struct sq_engine__addrs *t, const struct sq_addr *a, int n)
{
    uint64_t words[SQ_ADDR_WORDS];
    __atomic_fetch_add(&t->seq, 1, __ATOMIC_ACQ_REL);
    for (int i = 0; i < n && i < SQ_MAX_ADDRS; i++) {
        memset(words, 0, sizeof(words));
        memcpy(words, &a[i], sizeof(a[i]));
        for (size_t k = 0; k < SQ_ADDR_WORDS; k++)
            __atomic_store_n(&t->w[i][k], words[k], __ATOMIC_RELAXED);
    }
    __atomic_store_n(&t->n, (uint32_t)(n < SQ_MAX_ADDRS ? n : SQ_MAX_ADDRS), __ATOMIC_RELAXED);
    __atomic_fetch_add(&t->seq, 1, __ATOMIC_ACQ_REL);
}

void sq_engine__addrs_load(const struct sq_engine__addrs *t, uint32_t idx, struct sq_addr *out)
{
    uint64_t words[SQ_ADDR_WORDS];
    uint32_t s1, s2;
    do {
        s1 = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
        uint32_t n = __atomic_load_n(&t->n, __ATOMIC_RELAXED);
        uint32_t i = n ? idx % n : 0;
        /* Acquire loads keep the second read of seq after the words (no fence: ThreadSanitizer
         * does not model fences). */
        for (size_t k = 0; k < SQ_ADDR_WORDS; k++)
            words[k] = __atomic_load_n(&t->w[i][k], __ATOMIC_ACQUIRE);
        s2 = __atomic_load_n(&t->seq, __ATOMIC_RELAXED);
    } while ((s1 & 1) || s1 != s2);
    memcpy(out, words, sizeof(*out));
}

/* ---- for the drivers (engine/driver.h): the same steps, whatever the protocol ---- */

void sq_engine__vu_next(struct sq_engine__conn *c, int64_t now)
{
    conn_next(c, now);
}

void sq_engine__vu_complete(struct sq_engine__conn *c, int64_t now)
{
    conn_complete(c, now);
}

void sq_engine__vu_fail(struct sq_engine__conn *c, enum sq_errk k)
{
    conn_fail(c, k);
}

void sq_engine__vu_close(struct sq_engine__conn *c)
{
    if (SQ_UNLIKELY(c->state == CONN_ACTIVE))
        conn_fail(c, SQ_ERRK_CLOSED); /* the rest of a pipelined batch goes with the connection */
    else
        conn_close(c);
}

void sq_engine__vu_replace(struct sq_engine__conn *c)
{
    conn_replace(c);
}

void sq_engine__vu_backoff(struct sq_engine__conn *c)
{
    conn_backoff(c);
}

void sq_engine__conn_error(struct sq_engine__worker *w, enum sq_errk k)
{
    w->c.errors[k]++;
}

size_t sq_engine__stamp(struct sq_engine__worker *w, uint64_t *seq, char *out)
{
    uint64_t s = w->stamp_next++;
    if (seq)
        *seq = s;
    return sq_stamp_encode(&w->stamp, s, sq_stamp_now_ns(), out);
}

void sq_engine__unfinished(struct sq_engine__worker *w, uint64_t seq)
{
    if (w->nunfinished >= SQ_ENGINE_MAX_UNFINISHED)
        return; /* a broker failing every publish for long: the rest count as lost */
    if (w->nunfinished == w->capunfinished) {
        uint64_t cap = w->capunfinished ? w->capunfinished * 2 : 64;
        uint64_t *v = realloc(w->unfinished, cap * sizeof(*v));
        if (!v)
            return;
        w->unfinished = v;
        w->capunfinished = cap;
    }
    w->unfinished[w->nunfinished++] = seq;
}

bool sq_engine__past_end(struct sq_engine__worker *w)
{
    if (!w->over && (aborted(w) || sq_now_ns() >= w->hard_end_ns))
        w->over = true;
    return w->over;
}

/* ---- the 100 ms series (worker.h) ---- */

void sq_engine__fine_advance(struct sq_engine__worker *w, int64_t now)
{
    int64_t off = now - w->start_ns;
    if (off < 0)
        off = 0;
    uint64_t i = (uint64_t)(off / w->fine_ns);
    while (i >= SQ_FINE_BINS) {
        /* a run past the bins' span: pairs of bins become one twice as wide */
        for (uint32_t k = 0; k < SQ_FINE_BINS / 2; k++) {
            struct sq_fine_bin a = w->fine[2 * k], b = w->fine[2 * k + 1];
            w->fine[k] = (struct sq_fine_bin){.completed = a.completed + b.completed,
                                              .failed = a.failed + b.failed,
                                              .max_us = a.max_us > b.max_us ? a.max_us : b.max_us};
        }
        memset(&w->fine[SQ_FINE_BINS / 2], 0, SQ_FINE_BINS / 2 * sizeof(*w->fine));
        w->fine_ns *= 2;
        i = (uint64_t)(off / w->fine_ns);
    }
    w->fine_i = (uint32_t)i;
    w->fine_next = w->start_ns + (int64_t)(i + 1) * w->fine_ns;
}

int sq_engine__step_hist_new(struct sq_hist **out)
{
    return sq_hist_new(SQ_LATENCY_LOWEST_US, SQ_LATENCY_HIGHEST_US, 2, out);
}
