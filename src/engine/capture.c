/* engine/capture.c - exchanges for the run's capture hook and its sampled exchanges
 * (engine/capture.h).
 *
 * Each VU of a capturing or sampling run owns a small record (struct sq_engine__xc, worker.h).
 * conn_send arms it; the driver fills it (xc_raw before the head is complete, xc_head once it
 * is, xc_body after); conn_complete and conn_fail end it.
 *
 * The hook (--verbose, --http-debug) gives every VU its own buffer and copies every exchange;
 * the first-of-kind mode keeps a per-worker bitmap (one bit per status code, then one per error
 * kind): once a kind was handed out, the worker never hands that kind out again.
 *
 * Sampling (--sample-responses N) keeps per class a reservoir of N (algorithm R: the k-th
 * exchange of a class takes a random slot with probability N/k). A response draws when its head
 * is complete; only then, and only when it drew a slot, does it borrow a buffer from the
 * worker's pool and copy its head and the first SQ_SAMPLE_BODY_MAX bytes of its body. A failure
 * draws in its error kind's reservoir when it fails. The workers' reservoirs are merged at the
 * end in proportion to what each saw.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/redact.h"
#include "engine/driver.h"
#include "engine/flow.h"
#include "engine/worker.h"

#define SEEN_BITS (SQ_STATUS_CODES + SQ_ERRK_COUNT)
#define BUF_SIZE  (SQ_CAPTURE_HEAD_MAX + SQ_SAMPLE_BODY_MAX)
#define POOL_MIN  8 /* sample buffers per worker at least (exchanges drawn at the same time) */

int sq_engine__xc_init(struct sq_engine__worker *w)
{
    w->capture = w->cfg->capture;
    w->xs_per = w->cfg->sample_per_class;
    if (!w->capture && !w->xs_per)
        return 0;
    /* the VUs, then a batch's lanes (worker.h: they follow the pool, lane0 == nconns here) */
    uint32_t all = w->nconns + w->nlanes, n = all ? all : 1;
    w->xcs = calloc(n, sizeof(*w->xcs));
    if (!w->xcs)
        return -ENOMEM;
    /* Only the pointers are written here: a record's page is touched when its VU is captured,
     * drawn or fails (a zeroed record means none of these), so sampling alone costs 8 bytes per
     * VU, not 48 (bench/connmem.py). */
    for (uint32_t i = 0; i < all; i++)
        w->conns[i].xc = &w->xcs[i];
    if (w->capture) {
        w->xc_seen = calloc((SEEN_BITS + 7) / 8, 1);
        if (!w->xc_seen)
            return -ENOMEM;
        for (uint32_t i = 0; i < n; i++)
            if (!(w->xcs[i].buf = malloc(BUF_SIZE)))
                return -ENOMEM;
    }
    if (w->xs_per) {
        uint32_t pool = w->xs_per * 2 > POOL_MIN ? w->xs_per * 2 : POOL_MIN;
        if (pool > n)
            pool = n;
        w->xs = calloc(SQ_XS_CLASSES, sizeof(*w->xs));
        w->xs_pool = malloc((size_t)pool * BUF_SIZE);
        w->xs_free = malloc(pool * sizeof(*w->xs_free));
        if (!w->xs || !w->xs_pool || !w->xs_free)
            return -ENOMEM;
        for (uint32_t k = 0; k < SQ_XS_CLASSES; k++)
            if (!(w->xs[k].slot = calloc(w->xs_per, sizeof(*w->xs[k].slot))))
                return -ENOMEM;
        for (uint32_t i = 0; i < pool; i++)
            w->xs_free[i] = i;
        w->xs_nfree = pool;
        w->xs_rng = 0xD1B54A32D192ED03ull * (w->windex + 1);
        if (w->cfg->on_xsample_live && !(w->xs_live = calloc(SQ_XS_CLASSES, sizeof(*w->xs_live))))
            return -ENOMEM;
    }
    return 0;
}

void sq_engine__xc_dispose(struct sq_engine__worker *w)
{
    if (w->xcs && w->capture)
        for (uint32_t i = 0; i < (w->nconns + w->nlanes ? w->nconns + w->nlanes : 1); i++)
            free(w->xcs[i].buf);
    free(w->xcs);
    free(w->xc_seen);
    for (uint32_t k = 0; w->xs && k < SQ_XS_CLASSES; k++) {
        for (uint32_t i = 0; i < w->xs[k].n; i++)
            sq_xsample_clear(&w->xs[k].slot[i]);
        free(w->xs[k].slot);
    }
    for (uint32_t k = 0; w->xs_live && k < SQ_XS_CLASSES; k++)
        if (w->xs_live[k].state == 1) /* written, never taken: the workers have ended */
            sq_xsample_clear(&w->xs_live[k].x);
    free(w->xs_live);
    w->xs_live = NULL;
    free(w->xs);
    free(w->xs_pool);
    free(w->xs_free);
    w->xcs = NULL;
    w->xc_seen = NULL;
    w->xs = NULL;
    w->xs_pool = NULL;
    w->xs_free = NULL;
}

static size_t hook_body_max(const struct sq_capture *cap)
{
    return cap->body_max && cap->body_max < SQ_CAPTURE_BODY_MAX ? cap->body_max
                                                                : SQ_CAPTURE_BODY_MAX;
}

static size_t body_room(const struct sq_engine__worker *w)
{
    return w->xs_per ? SQ_SAMPLE_BODY_MAX : hook_body_max(w->capture);
}

void sq_engine__xc_arm(struct sq_engine__conn *c)
{
    struct sq_engine__xc *k = c->xc;
    k->on = c->w->capture != NULL; /* sampling only: nothing is copied until a draw says so */
    k->in_body = k->head_cut = false;
    k->head_len = k->body_len = 0;
    k->body_total = 0;
    k->head_ns = 0;
    k->pick = 0;
}

void sq_engine__xc_raw(struct sq_engine__conn *c, const char *data, size_t len)
{
    struct sq_engine__xc *k = c->xc;
    if (!k->on || k->in_body)
        return;
    size_t room = SQ_CAPTURE_HEAD_MAX - k->head_len;
    if (len > room) {
        len = room;
        k->head_cut = true;
    }
    memcpy(k->buf + k->head_len, data, len);
    k->head_len += (uint32_t)len;
}

static uint64_t xs_next(struct sq_engine__worker *w)
{
    w->xs_rng ^= w->xs_rng << 13; /* xorshift64 */
    w->xs_rng ^= w->xs_rng >> 7;
    w->xs_rng ^= w->xs_rng << 17;
    return w->xs_rng;
}

/* A uniform double in (0, 1). */
static double xs_unit(struct sq_engine__worker *w)
{
    return ((double)(xs_next(w) >> 11) + 0.5) / 9007199254740992.0;
}

/* Algorithm L's next jump: the weight shrinks by a random factor, and the next replacement is
 * a geometric number of exchanges away. */
__attribute__((noinline, cold)) static void xs_skip(struct sq_engine__worker *w,
                                                    struct sq_engine__xres *r)
{
    r->wgt *= exp(log(xs_unit(w)) / (double)w->xs_per);
    double skip = floor(log(xs_unit(w)) / log1p(-r->wgt));
    if (!(skip < 1e18)) /* a weight that underflowed: no further replacement in practice */
        skip = 1e18;
    r->next = r->seen + (uint64_t)skip + 1;
}

/* Reservoir sampling (algorithm L, the same distribution as algorithm R's "the k-th exchange
 * is kept with probability N/k"): the slot the class's next exchange takes, or -1. Once the
 * reservoir is full the common case is an increment and a compare: the random draws happen
 * only at a replacement. */
__attribute__((noinline)) static int32_t xs_pick(struct sq_engine__worker *w,
                                                 struct sq_engine__xres *r, uint64_t seen)
{
    if (seen > w->xs_per) { /* seen == r->next: a replacement */
        int32_t slot = (int32_t)(xs_next(w) % w->xs_per);
        xs_skip(w, r);
        return slot;
    }
    if (seen == w->xs_per) {
        r->wgt = 1.0;
        xs_skip(w, r);
    }
    return (int32_t)(seen - 1);
}

/* The draw: the common case (full, no replacement due) inline, the rest in xs_pick. */
static inline int32_t xs_draw(struct sq_engine__worker *w, uint32_t cls)
{
    struct sq_engine__xres *r = &w->xs[cls];
    uint64_t seen = ++r->seen;
    if (SQ_LIKELY(seen > w->xs_per && seen != r->next))
        return -1;
    return xs_pick(w, r, seen);
}

/* 1..5 for 100..599 ((s * 41) >> 12 is s / 100 over that range), else 0. */
static inline uint32_t status_class(uint16_t status)
{
    return (uint32_t)(status - 100) < 500 ? ((uint32_t)status * 41) >> 12 : 0;
}

/* The head of a captured or drawn exchange: a pool buffer for a drawn one, the head copied. */
__attribute__((noinline)) static void xc_head_keep(struct sq_engine__conn *c, const char *head,
                                                   size_t len)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__xc *k = c->xc;
    if (w->xs_per && k->pick > 0) {
        k->head_ns = c->fb_ns ? c->fb_ns : sq_loop_now(w->loop);
        if (!w->capture) { /* sampling alone: nothing was armed at the send */
            if (!k->on) {
                if (w->xs_nfree == 0) { /* every buffer is out: this one goes unsampled */
                    k->pick = 0;
                    return;
                }
                k->buf = w->xs_pool + (size_t)w->xs_free[--w->xs_nfree] * BUF_SIZE;
                k->pooled = k->on = true;
            }
            k->body_len = 0;
            k->body_total = 0;
        }
    }
    if (!k->on)
        return;
    k->head_cut = len > SQ_CAPTURE_HEAD_MAX;
    if (k->head_cut)
        len = SQ_CAPTURE_HEAD_MAX;
    memcpy(k->buf, head, len);
    k->head_len = (uint32_t)len;
    k->in_body = true;
}

void sq_engine__xc_head(struct sq_engine__conn *c, uint16_t status, const char *head, size_t len)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__xc *k = c->xc;
    if (w->xs_per) {
        int32_t slot = xs_draw(w, status_class(status));
        if (SQ_LIKELY(slot < 0) && !k->on)
            return; /* the common case: a counter went up (k is not written) */
        k->pick = slot + 1;
    }
    xc_head_keep(c, head, len);
}

void sq_engine__xc_body(struct sq_engine__conn *c, const char *data, size_t len)
{
    struct sq_engine__xc *k = c->xc;
    if (!k->on)
        return;
    k->in_body = true;
    k->body_total += len;
    size_t room = body_room(c->w) - k->body_len;
    if (len > room)
        len = room;
    memcpy(k->buf + SQ_CAPTURE_HEAD_MAX + k->body_len, data, len);
    k->body_len += (uint32_t)len;
}

/* The request as sent, cut after its head and max_body bytes of its body. */
static size_t request_part(const char *req, size_t len, size_t max_body)
{
    const char *end = memmem(req, len, "\r\n\r\n", 4);
    if (!end)
        return len;
    size_t head = (size_t)(end - req) + 4;
    return len - head > max_body ? head + max_body : len;
}

static char *dup_bytes(const char *p, size_t n)
{
    char *d = malloc(n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

/* ---- credentials (base/redact.h): taken out of what is kept, before anyone sees it ---- */

#define SECRETS_ON_STACK 32

struct secrets {
    bool on; /* the run redacts (not --no-redact, not a plan's redact: false) */
    struct sq_str *v;
    size_t n;
    struct sq_str stack[SECRETS_ON_STACK];
};

/* The values an exchange on c may carry: the run's, then its plan VU's (sq_flow_secrets).
 * Returns 0 or -ENOMEM. */
static int secrets_get(const struct sq_engine__conn *c, struct secrets *s)
{
    const struct sq_run_config *cfg = c->w->cfg;
    const struct sq_flow *f = c->w->flow;
    s->on = !cfg->no_redact;
    s->v = s->stack;
    s->n = 0;
    if (!s->on)
        return 0;
    size_t nf = f ? sq_flow_secrets(f, c->fv, NULL, 0) : 0, n = cfg->nsecrets + nf;
    if (n > SECRETS_ON_STACK && !(s->v = malloc(n * sizeof(*s->v))))
        return -ENOMEM;
    if (cfg->nsecrets)
        memcpy(s->v, cfg->secrets, cfg->nsecrets * sizeof(*s->v));
    if (nf) {
        size_t m = sq_flow_secrets(f, c->fv, s->v + cfg->nsecrets, nf);
        nf = m < nf ? m : nf;
    }
    s->n = cfg->nsecrets + nf;
    return 0;
}

static void secrets_dispose(struct secrets *s)
{
    if (s->v != s->stack)
        free(s->v);
}

/* A copy of p[0, n) to keep: with its credentials redacted (flags: base/redact.h) unless the run
 * keeps them. NULL when out of memory. A redacted text may be longer than what it came from:
 * the caller cuts it to the same cap. */
static char *keep_copy(const struct secrets *s, const char *p, size_t n, unsigned flags,
                       size_t *out_len)
{
    if (!s->on) {
        *out_len = n;
        return dup_bytes(p, n);
    }
    return sq_redact_dup(p, n, flags, s->v, s->n, out_len);
}

/* cfg->on_xsample_live: a copy of x for the main thread when this worker has handed out no
 * exchange of class cls yet (the first 4xx, 5xx or error of each kind it draws: its reservoir
 * takes the first ones it sees). A copy of a few KiB once per class per worker, on the drawn
 * exchange's path; out of memory: none this time (the next drawn one tries again). */
static void xs_live_put(struct sq_engine__worker *w, uint32_t cls, const struct sq_xsample *x)
{
    struct sq_engine__xlive *l = &w->xs_live[cls];
    if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != 0)
        return;
    struct sq_xsample c = *x;
    c.req = x->req ? dup_bytes(x->req, x->req_len) : NULL;
    c.head = x->head ? dup_bytes(x->head, x->head_len) : NULL;
    c.body = x->body ? dup_bytes(x->body, x->body_len) : NULL;
    if ((x->req && !c.req) || (x->head && !c.head) || (x->body && !c.body)) {
        sq_xsample_clear(&c);
        return;
    }
    l->x = c;
    __atomic_store_n(&l->state, 1, __ATOMIC_RELEASE);
}

void sq_engine__xs_live_take(struct sq_engine__worker *ws, uint32_t n,
                             const struct sq_run_config *cfg)
{
    for (uint32_t i = 0; i < n; i++) {
        struct sq_engine__xlive *v = ws[i].xs_live;
        for (uint32_t k = 0; v && k < SQ_XS_CLASSES; k++) {
            if (__atomic_load_n(&v[k].state, __ATOMIC_ACQUIRE) != 1)
                continue;
            cfg->on_xsample_live(cfg->tick_ud, &v[k].x);
            sq_xsample_clear(&v[k].x);
            __atomic_store_n(&v[k].state, 2, __ATOMIC_RELAXED);
        }
    }
}

/* Keeps the exchange in slot of class cls (what the slot held goes). Out of memory: the slot
 * is left empty of this one (the sample is a sample). */
__attribute__((noinline)) static void xs_keep(struct sq_engine__conn *c, int64_t now, uint32_t cls,
                                              int32_t slot, uint16_t status, int error)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__xc *k = c->xc;
    struct sq_engine__xres *r = &w->xs[cls];
    struct sq_xsample x = {
        .cls = cls,
        .end_ns = now - w->start_ns,
        .latency_us = (now - c->since_ns) / 1000,
        .ttfb_us = k->head_ns && c->sent_ns ? (k->head_ns - c->sent_ns) / 1000 : -1,
        .connect_us = c->x.connect_ns / 1000,
        .tls_us = c->x.tls_ns ? c->x.tls_ns / 1000 : -1,
        .status = status,
        .error = error,
        .h2 = w->drv != &sq_engine__h1_driver,
    };
    struct secrets sec;
    if (secrets_get(c, &sec) < 0)
        return;
    if (c->req) {
        size_t n = request_part(c->req, c->req_len, SQ_SAMPLE_BODY_MAX);
        x.req_cut = n < c->req_len;
        if (!(x.req = keep_copy(&sec, c->req, n, SQ_REDACT_HEAD | (x.req_cut ? SQ_REDACT_CUT : 0),
                                &x.req_len)))
            goto oom;
    }
    if (k->on && k->head_len) {
        x.head_cut = k->head_cut;
        if (!(x.head = keep_copy(&sec, k->buf, k->head_len,
                                 SQ_REDACT_HEAD | (k->head_cut ? SQ_REDACT_CUT : 0), &x.head_len)))
            goto oom;
        if (x.head_len > SQ_CAPTURE_HEAD_MAX) {
            x.head_len = SQ_CAPTURE_HEAD_MAX;
            x.head_cut = true;
        }
    }
    if (k->on && k->body_total) {
        if (!(x.body = keep_copy(&sec, k->buf + SQ_CAPTURE_HEAD_MAX, k->body_len,
                                 k->body_total > k->body_len ? SQ_REDACT_CUT : 0, &x.body_len)))
            goto oom;
        /* the body as shown: a redacted secret changed its length, what was not kept did not */
        x.body_total = k->body_total - k->body_len + x.body_len;
        if (x.body_len > SQ_SAMPLE_BODY_MAX)
            x.body_len = SQ_SAMPLE_BODY_MAX;
    }
    secrets_dispose(&sec);
    if (w->xs_live && (cls == 4 || cls == 5 || cls >= SQ_XS_STATUS_CLASSES)) /* 4xx, 5xx, errors */
        xs_live_put(w, cls, &x);
    if (r->n < w->xs_per) /* filling: whatever slot it drew, the next free one */
        slot = (int32_t)r->n++;
    else
        sq_xsample_clear(&r->slot[slot]);
    r->slot[slot] = x;
    return;
oom:
    secrets_dispose(&sec);
    sq_xsample_clear(&x);
}

static void xs_end(struct sq_engine__conn *c, int64_t now, uint16_t status, int error)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__xc *k = c->xc;
    uint32_t cls;
    int32_t slot;
    if (error >= 0) {
        cls = SQ_XS_STATUS_CLASSES + (uint32_t)error;
        slot = xs_draw(w, cls);
    } else {
        cls = status_class(status);
        slot = k->pick - 1;
    }
    if (slot >= 0)
        xs_keep(c, now, cls, slot, status, error);
    if (k->pick != 0 ||
        k->head_ns != 0) { /* xc_end runs for what was captured, drawn, or failed: */
        k->pick = 0;       /* a failure that drew nothing leaves its record untouched */
        k->head_ns = 0;
    }
    if (k->pooled) {
        w->xs_free[w->xs_nfree++] = (uint32_t)((k->buf - w->xs_pool) / BUF_SIZE);
        k->buf = NULL;
        k->pooled = k->on = false;
    }
}

void sq_engine__xc_end(struct sq_engine__conn *c, int64_t now, uint16_t status, int error)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__xc *k = c->xc;
    if (w->xs_per)
        xs_end(c, now, status, error); /* before the hook's copy: k->on may be the pool's */
    if (!w->capture || !k->on)
        return;
    k->on = false;
    if (w->capture->mode == SQ_CAPTURE_FIRST_OF_KIND) {
        size_t bit =
            error >= 0 ? SQ_STATUS_CODES + (size_t)error : (status < SQ_STATUS_CODES ? status : 0);
        if (w->xc_seen[bit / 8] & (1u << (bit % 8)))
            return;
        w->xc_seen[bit / 8] |= (uint8_t)(1u << (bit % 8));
    }
    size_t max = hook_body_max(w->capture);
    size_t req_len = c->req ? request_part(c->req, c->req_len, max) : 0;
    struct sq_exchange x = {
        .end_ns = now - w->start_ns,
        .latency_us = (now - c->since_ns) / 1000,
        .status = status,
        .error = error,
        .req = c->req,
        .req_len = req_len,
        .req_cut = req_len < c->req_len,
        .head = k->buf,
        .head_len = k->head_len,
        .head_cut = k->head_cut,
        .body = k->buf + SQ_CAPTURE_HEAD_MAX,
        .body_len = k->body_len < max ? k->body_len : max,
        .body_total = k->body_total,
        .h2 = w->drv != &sq_engine__h1_driver,
    };
    struct secrets sec;
    if (secrets_get(c, &sec) < 0)
        return; /* out of memory: this one is not shown rather than shown unredacted */
    char *rq = NULL, *hd = NULL, *bd = NULL;
    if (sec.on) {
        size_t bl = 0;
        rq = keep_copy(&sec, x.req, x.req_len, SQ_REDACT_HEAD | (x.req_cut ? SQ_REDACT_CUT : 0),
                       &x.req_len);
        hd = keep_copy(&sec, x.head, x.head_len, SQ_REDACT_HEAD | (x.head_cut ? SQ_REDACT_CUT : 0),
                       &x.head_len);
        bd =
            keep_copy(&sec, x.body, x.body_len, x.body_total > x.body_len ? SQ_REDACT_CUT : 0, &bl);
        secrets_dispose(&sec);
        if (!rq || !hd || !bd) {
            free(rq);
            free(hd);
            free(bd);
            return;
        }
        x.req = rq;
        x.head = hd;
        x.body = bd;
        x.body_total = x.body_total - x.body_len + bl; /* the body as shown */
        x.body_len = bl;
    }
    w->capture->on_exchange(w->capture->ud, w->windex, &x);
    free(rq);
    free(hd);
    free(bd);
}

/* ---- the end of the run: one reservoir per class from every worker's ---- */

int sq_engine__xs_merge(struct sq_engine__worker *ws, uint32_t n, uint32_t per_class,
                        struct sq_xsamples *out)
{
    memset(out, 0, sizeof(*out));
    out->per_class = per_class;
    if (!per_class)
        return 0;
    /* parts[k * n + i]: worker i's reservoir of class k (result/xsample.c draws from them) */
    struct sq_xs_part *parts = calloc((size_t)SQ_XS_CLASSES * (n ? n : 1), sizeof(*parts));
    if (!parts)
        return -ENOMEM;
    for (uint32_t k = 0; k < SQ_XS_CLASSES; k++)
        for (uint32_t i = 0; i < n; i++) {
            struct sq_engine__xres *r = ws[i].xs ? &ws[i].xs[k] : NULL;
            parts[(size_t)k * n + i] = (struct sq_xs_part){
                .seen = r ? r->seen : 0, .v = r ? r->slot : NULL, .n = r ? r->n : 0};
        }
    int rc = sq_xs_merge_parts(parts, n, per_class, out);
    free(parts);
    return rc;
}
