/* engine/flow.c - compiling a scenario's steps into requests, and running checks and
 * extractors on what came back. See flow.h. */
#include "engine/flow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/text.h"
#include "engine/oauth.h"
#include "http/h1.h"
#include "http/request.h"
#include "http/url.h"
#include "net/egress.h"
#include "plan/cookie.h"
#include "net/tls.h"
#include "proto/busurl.h"
#include "stats/hist.h"

#define UA_LINE     "User-Agent: squall/" SQ_VERSION "\r\n"
#define MAX_HEADERS 128

static bool name_is(const char *name, const char *want)
{
    return strcasecmp(name, want) == 0;
}

static bool method_sends_length(const char *m)
{
    return strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0;
}

/* The request-target of a rendered or static URL: an absolute URL loses its scheme and
 * authority (the loader has checked that it names the plan's target). */
static void origin_form(const char *u, size_t len, const char **path, size_t *plen)
{
    const char *s = memmem(u, len, "://", 3);
    if (s && s - u <= 5) {
        const char *p = memchr(s + 3, '/', len - (size_t)(s + 3 - u));
        if (!p) {
            *path = "/";
            *plen = 1;
            return;
        }
        *path = p;
        *plen = len - (size_t)(p - u);
        return;
    }
    *path = u;
    *plen = len;
}

static bool header_user_set(const struct sq_plan_request *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++)
        if (name_is(r->headers[i].name, name))
            return true;
    return false;
}

/* Appends the field line "name: v\r\n" to b. */
static int put_field(struct sq_buf *b, const char *name, const char *v, size_t vl)
{
    int rc = sq_buf_append(b, name, strlen(name));
    if (rc == 0)
        rc = sq_buf_append(b, ": ", 2);
    if (rc == 0)
        rc = sq_buf_append(b, v, vl);
    if (rc == 0)
        rc = sq_buf_append(b, "\r\n", 2);
    return rc;
}

static int compile_static(const struct sq_flow *f, struct sq_flow_step *st, const char *url,
                          size_t url_len, const char *body, size_t body_len)
{
    const struct sq_plan_request *r = &st->ps->req;
    struct sq_kv kv[MAX_HEADERS + 1];
    char *copies[MAX_HEADERS];
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < r->nheaders && n < MAX_HEADERS; i++) {
        const char *v;
        size_t vl;
        if (!sq_tmpl_static(r->headers[i].value, &v, &vl))
            return -EINVAL;
        copies[n] = strndup(v, vl);
        if (!copies[n]) {
            rc = -ENOMEM;
            break;
        }
        kv[n].name = r->headers[i].name;
        kv[n].value = copies[n];
        n++;
    }
    size_t ncopies = n;
    if (r->content_type && !header_user_set(r, "Content-Type")) {
        kv[n].name = "Content-Type";
        kv[n].value = r->content_type;
        n++;
    }
    if (f->accept_encoding && !header_user_set(r, "Accept-Encoding")) {
        kv[n].name = "Accept-Encoding";
        kv[n].value = f->accept_encoding;
        n++;
    }
    const char *path;
    size_t plen;
    origin_form(url, url_len, &path, &plen);
    char *p = rc == 0 ? strndup(path, plen) : NULL;
    if (rc == 0 && !p)
        rc = -ENOMEM;
    if (rc == 0)
        rc = sq_request_build(r->method, p, f->host, kv, n, body, body_len, &st->req, &st->req_len);
    free(p);
    for (size_t i = 0; i < ncopies; i++)
        free(copies[i]);
    return rc;
}

static int append_value(struct sq_buf *out, size_t from);

static char *dupz(const char *s)
{
    return s ? strdup(s) : NULL;
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* A publish or subscribe step: its broker (shared by steps that name the same one) and its
 * subject; a subscribe step's subject joins its broker's subscriptions. */
static int compile_bus_step(struct sq_flow *f, struct sq_flow_step *st, char *err, size_t errlen)
{
    const struct sq_plan_step *ps = st->ps;
    bool sub = ps->kind == SQ_STEP_SUBSCRIBE;
    struct sq_bus_url u;
    const char *why = NULL;
    int rc = sq_bus_url_parse(ps->req.url_src, SQ_BUS_URL_TARGET | (sub ? SQ_BUS_URL_FILTER : 0),
                              &u, &why);
    if (rc < 0) {
        sq_bus_url_dispose(&u);
        if (rc == -SQ_EPARSE)
            snprintf(err, errlen, "step '%s': url '%s': %s", ps->name, ps->req.url_src, why);
        else
            snprintf(err, errlen, "out of memory");
        return rc;
    }
    st->subject = u.target;
    u.target = NULL;
    st->subject_len = strlen(st->subject);
    size_t i = 0;
    for (; i < f->nbrokers; i++) {
        struct sq_flow_broker *b = &f->brokers[i];
        if (b->kind == (int)u.kind && b->tls == u.tls && b->port == u.port &&
            strcmp(b->host, u.host) == 0 && same_str(b->user, u.user) &&
            same_str(b->password, u.password) && same_str(b->ws_path, u.ws_path))
            break;
    }
    if (i == f->nbrokers) {
        struct sq_flow_broker *nb = realloc(f->brokers, (f->nbrokers + 1) * sizeof(*nb));
        if (!nb) {
            sq_bus_url_dispose(&u);
            return -ENOMEM;
        }
        f->brokers = nb;
        struct sq_flow_broker *b = &f->brokers[f->nbrokers++];
        memset(b, 0, sizeof(*b));
        b->kind = (int)u.kind;
        b->tls = u.tls;
        snprintf(b->host, sizeof(b->host), "%s", u.host);
        b->port = u.port;
        b->user = dupz(u.user);
        b->password = dupz(u.password);
        b->ws_path = dupz(u.ws_path);
        if (u.ws_path) {
            char host[300];
            bool v6 = strchr(u.host, ':') != NULL;
            snprintf(host, sizeof(host), "%s%s%s:%u", v6 ? "[" : "", u.host, v6 ? "]" : "",
                     (unsigned)u.port);
            b->ws_host = strdup(host);
        }
        if ((u.user && !b->user) || (u.password && !b->password) ||
            (u.ws_path && (!b->ws_path || !b->ws_host))) {
            sq_bus_url_dispose(&u);
            return -ENOMEM;
        }
    }
    sq_bus_url_dispose(&u);
    st->broker = (int)i;
    struct sq_flow_broker *b = &f->brokers[i];
    if (ps->qos > b->qos)
        b->qos = ps->qos;
    if (sub) {
        for (size_t k = 0; k < b->nsubs; k++)
            if (strcmp(b->subs[k], st->subject) == 0)
                return 0;
        char **ns = realloc(b->subs, (b->nsubs + 1) * sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        b->subs = ns;
        if (!(b->subs[b->nsubs] = strdup(st->subject)))
            return -ENOMEM;
        b->nsubs++;
    } else {
        st->stamped = ps->req.body && sq_tmpl_uses_stamp(ps->req.body);
        for (size_t k = 0; k < ps->req.nheaders; k++)
            st->stamped |= sq_tmpl_uses_stamp(ps->req.headers[k].value);
    }
    return 0;
}

static int compile_step(struct sq_flow *f, struct sq_flow_step *st, char *err, size_t errlen)
{
    const struct sq_plan_step *ps = st->ps;
    st->broker = -1;
    if (ps->kind == SQ_STEP_THINK) {
        st->think = true;
        return 0;
    }
    if (ps->kind == SQ_STEP_PUBLISH || ps->kind == SQ_STEP_SUBSCRIBE)
        return compile_bus_step(f, st, err, errlen);
    if (ps->kind == SQ_STEP_WS) {
        st->ws = true;
        st->timeout_ns = ps->req.timeout_ns;
        return 0;
    }
    const struct sq_plan_request *r = &ps->req;
    st->head = strcmp(r->method, "HEAD") == 0;
    st->timeout_ns = r->timeout_ns;
    st->max_redirects = r->max_redirects;
    st->follow = r->max_redirects > 0;
    const char *url = NULL, *body = NULL;
    size_t url_len = 0, body_len = 0;
    bool dynamic = f->sc->cookies || ps->before; /* a before hook may change the body */
    if (!sq_tmpl_static(r->url, &url, &url_len))
        dynamic = true;
    if (r->body && !sq_tmpl_static(r->body, &body, &body_len))
        dynamic = true;
    st->stamped = sq_tmpl_uses_stamp(r->url) || (r->body && sq_tmpl_uses_stamp(r->body));
    for (size_t i = 0; i < r->nheaders; i++) {
        const char *v;
        size_t vl;
        if (!sq_tmpl_static(r->headers[i].value, &v, &vl))
            dynamic = true;
        st->stamped |= sq_tmpl_uses_stamp(r->headers[i].value);
    }
    if (!dynamic) {
        int rc = compile_static(f, st, url, url_len, body, body_len);
        if (rc < 0)
            snprintf(err, errlen, "step '%s': cannot build the request: %s", ps->name,
                     sq_strerror(rc));
        return rc;
    }
    /* Dynamic: "METHOD " + target + fixed part + dynamic headers + length + CRLF + body. */
    size_t ml = strlen(r->method);
    st->method_sp = malloc(ml + 2);
    st->dyn = calloc(r->nheaders ? r->nheaders : 1, sizeof(*st->dyn));
    struct sq_buf fx = {0};
    int rc = st->method_sp && st->dyn ? 0 : -ENOMEM;
    /* As sq_request_build does for static requests: a step's own Host replaces the default one
     * (and goes first), a Content-Length or Transfer-Encoding of its own replaces ours. */
    bool own_host = header_user_set(r, "Host");
    if (rc == 0) {
        memcpy(st->method_sp, r->method, ml);
        memcpy(st->method_sp + ml, " ", 2);
        rc = sq_buf_append(&fx, " HTTP/1.1\r\n", 11);
    }
    if (rc == 0 && !own_host)
        rc = put_field(&fx, "Host", f->host, strlen(f->host));
    for (size_t i = 0; rc == 0 && i < r->nheaders; i++) {
        const char *v;
        size_t vl;
        if (!sq_tmpl_static(r->headers[i].value, &v, &vl)) {
            st->dyn[st->ndyn++] = (uint32_t)i;
            continue;
        }
        rc = put_field(&fx, r->headers[i].name, v, vl);
    }
    if (rc == 0 && r->content_type && !header_user_set(r, "Content-Type"))
        rc = put_field(&fx, "Content-Type", r->content_type, strlen(r->content_type));
    if (rc == 0 && f->accept_encoding && !header_user_set(r, "Accept-Encoding"))
        rc = put_field(&fx, "Accept-Encoding", f->accept_encoding, strlen(f->accept_encoding));
    if (rc == 0 && !header_user_set(r, "User-Agent"))
        rc = sq_buf_append(&fx, UA_LINE, sizeof(UA_LINE) - 1);
    if (rc < 0) {
        sq_buf_dispose(&fx);
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    st->fixed = fx.p;
    st->fixed_len = fx.len;
    st->content_length = (r->body != NULL || method_sends_length(r->method)) &&
                         !header_user_set(r, "Content-Length") &&
                         !header_user_set(r, "Transfer-Encoding");
    st->may_override = ps->before && !header_user_set(r, "Content-Length") &&
                       !header_user_set(r, "Transfer-Encoding");
    return 0;
}

int sq_flow_compile(const struct sq_plan *p, const struct sq_plan_scenario *sc,
                    const struct sq_url *target, const char *accept_encoding, struct sq_flow **out,
                    char *err, size_t errlen)
{
    struct sq_flow *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->accept_encoding = accept_encoding;
    f->plan = p;
    f->sc = sc;
    f->nloops = sc->nloops;
    f->extra = sc->nloops + sc->ngroups;
    f->secure = strcmp(target->scheme, "https") == 0;
    snprintf(f->host, sizeof(f->host), "%s", target->authority);
    snprintf(f->origin_host, sizeof(f->origin_host), "%s", target->host);
    f->origin = (struct sq_redirect_origin){f->secure, f->origin_host, target->port};
    f->steps = calloc(sc->nsteps ? sc->nsteps : 1, sizeof(*f->steps));
    if (!f->steps) {
        free(f);
        return -ENOMEM;
    }
    f->nsteps = sc->nsteps;
    uint32_t md = 0;
    for (size_t i = 0; i < sc->nsteps; i++) {
        struct sq_flow_step *st = &f->steps[i];
        st->ps = &sc->steps[i];
        st->cond = sc->steps[i].cond;
        st->md_base = md;
        md += (uint32_t)(st->ps->nextract + st->ps->nchecks);
        int rc = compile_step(f, st, err, errlen);
        if (rc < 0) {
            sq_flow_free(f);
            return rc;
        }
    }
    f->nstates = md;
    *out = f;
    return 0;
}

int sq_flow_resolve_brokers(struct sq_flow *f, const struct sq_egress *e,
                            const struct sq_tls_client_opts *tls, char *err, size_t errlen)
{
    for (size_t i = 0; i < f->nbrokers; i++) {
        struct sq_flow_broker *b = &f->brokers[i];
        bool v6 = strchr(b->host, ':') != NULL;
        char what[320], why[800];
        snprintf(what, sizeof(what), "the broker %s://%s%s%s:%u of a publish or subscribe step",
                 b->kind == SQ_BUS_NATS ? (b->tls ? "tls" : "nats")
                 : b->ws_path           ? (b->tls ? "mqtt+wss" : "mqtt+ws")
                                        : (b->tls ? "mqtts" : "mqtt"),
                 v6 ? "[" : "", b->host, v6 ? "]" : "", (unsigned)b->port);
        if (b->tls && !b->tc) {
            struct sq_tls_client_opts t = tls ? *tls : (struct sq_tls_client_opts){0};
            t.host = b->host;
            t.alpn = NULL;
            char twhy[SQ_TLS_ERRLEN];
            int trc = sq_tls_client_new(&t, &b->tc, twhy, sizeof(twhy));
            if (trc < 0) {
                snprintf(err, errlen, "%s: tls: %s", what + 4,
                         trc == -EINVAL ? twhy : sq_strerror(trc));
                return trc == -EINVAL ? -SQ_EUSAGE : trc;
            }
        }
        int rc = sq_egress_lookup(e, NULL, what, b->host, b->port, SQ_EGRESS_CONNECT, &b->addr, 1,
                                  why, sizeof(why));
        if (rc < 0) {
            b->addr.len = 0;
            if (rc == -EACCES)
                snprintf(err, errlen, "%s", why);
            else
                snprintf(err, errlen, "%s: %s", what + 4, why);
            return rc == -EACCES ? rc : -SQ_ERESOLVE;
        }
    }
    return 0;
}

void sq_flow_free(struct sq_flow *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nsteps; i++) {
        struct sq_flow_step *st = &f->steps[i];
        free(st->req);
        free(st->method_sp);
        free(st->fixed);
        free(st->dyn);
        free(st->subject);
        sq_h2_req_dispose(&st->h2);
    }
    free(f->steps);
    for (size_t i = 0; i < f->nbrokers; i++) {
        struct sq_flow_broker *b = &f->brokers[i];
        sq_tls_client_free(b->tc);
        free(b->user);
        free(b->password);
        free(b->ws_path);
        free(b->ws_host);
        for (size_t k = 0; k < b->nsubs; k++)
            free(b->subs[k]);
        free(b->subs);
    }
    free(f->brokers);
    free(f);
}

int sq_flow_vu_init(struct sq_flow_vu *v, const struct sq_flow *f, uint64_t vu, uint64_t seed)
{
    memset(v, 0, sizeof(*v));
    v->vu = vu;
    v->rng = sq_tmpl_rng_init(seed, vu);
    uint32_t nv = f->sc->nvars;
    v->vars = calloc(nv ? nv : 1, sizeof(*v->vars));
    v->var_views = calloc(nv ? nv : 1, sizeof(*v->var_views));
    size_t nf = f->plan->nfeeders;
    v->rows = calloc(nf ? nf : 1, sizeof(*v->rows));
    if (!v->vars || !v->var_views || !v->rows)
        return -ENOMEM;
    if (f->nloops && !(v->loop_n = calloc(f->nloops, sizeof(*v->loop_n))))
        return -ENOMEM;
    if (f->sc->ngroups && !(v->gstart = calloc(f->sc->ngroups, sizeof(*v->gstart))))
        return -ENOMEM;
    if (f->sc->cookies) {
        int rc = sq_cookie_jar_new(&v->jar);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void sq_flow_vu_dispose(struct sq_flow_vu *v, const struct sq_flow *f)
{
    if (v->vars)
        for (uint32_t i = 0; i < f->sc->nvars; i++)
            sq_buf_dispose(&v->vars[i]);
    free(v->vars);
    free(v->var_views);
    free(v->rows);
    free(v->loop_n);
    free(v->gstart);
    sq_buf_dispose(&v->req);
    sq_buf_dispose(&v->body);
    sq_buf_dispose(&v->head);
    sq_buf_dispose(&v->fields);
    sq_buf_dispose(&v->scratch);
    sq_buf_dispose(&v->val);
    sq_buf_dispose(&v->loc);
    sq_buf_dispose(&v->redir);
    sq_buf_dispose(&v->target);
    sq_cookie_jar_free(v->jar);
    sq_h2_req_dispose(&v->h2);
    memset(v, 0, sizeof(*v));
}

void sq_flow_vu_lane(struct sq_flow_vu *lane, const struct sq_flow_vu *v)
{
    lane->vu = v->vu;
    lane->iteration = v->iteration;
    lane->iter_start_ns = v->iter_start_ns;
    lane->last_status = v->last_status;
    lane->vars = v->vars;
    lane->var_views = v->var_views;
    lane->rows = v->rows;
    lane->jar = v->jar;
    lane->loop_n = v->loop_n;
    lane->stamp_fn = v->stamp_fn;
    lane->stamp_ud = v->stamp_ud;
    lane->think_until = 0;
    lane->hops = 0;
    lane->redirect = false;
    lane->stamp_len = 0;
}

void sq_flow_vu_lane_dispose(struct sq_flow_vu *lane, const struct sq_flow *f)
{
    lane->vars = NULL; /* the VU's, not the lane's */
    lane->var_views = NULL;
    lane->rows = NULL;
    lane->jar = NULL;
    lane->loop_n = NULL;
    sq_flow_vu_dispose(lane, f);
}

struct cond_ctx {
    const struct sq_flow *f;
    struct sq_flow_vu *v;
};

static int cond_render(void *ud, const struct sq_tmpl *t, struct sq_buf *out)
{
    struct cond_ctx *x = ud;
    return sq_flow_render(x->f, x->v, t, out);
}

bool sq_flow_cond(const struct sq_flow *f, struct sq_flow_vu *v, const struct sq_flow_step *st)
{
    struct cond_ctx x = {f, v};
    return sq_cond_eval(st->cond, v->last_status, cond_render, &x, &v->scratch, &v->val);
}

static bool loop_while(const struct sq_flow *f, struct sq_flow_vu *v, const struct sq_plan_loop *lp)
{
    struct cond_ctx x = {f, v};
    return sq_cond_eval(lp->cond, v->last_status, cond_render, &x, &v->scratch, &v->val);
}

void sq_flow_loops_enter(const struct sq_flow *f, struct sq_flow_vu *v, uint32_t from)
{
    const struct sq_plan_loop *loops = f->sc->loops;
    for (uint32_t l = from; l < f->nloops; l++) {
        if (loops[l].first != v->step)
            continue; /* pre-order: the loops after it start at or after it */
        v->loop_n[l] = 0;
        if (loops[l].cond && !loop_while(f, v, &loops[l]))
            v->step = loops[l].last + 1; /* the loader keeps a while off its parent's end */
    }
}

bool sq_flow_loops_after(const struct sq_flow *f, struct sq_flow_vu *v)
{
    const struct sq_plan_loop *loops = f->sc->loops;
    for (uint32_t l = f->nloops; l-- > 0;) { /* inner loops before the outer ones */
        const struct sq_plan_loop *lp = &loops[l];
        if (lp->last != v->step)
            continue;
        uint64_t n = ++v->loop_n[l];
        bool again = lp->cond ? n < lp->max && loop_while(f, v, lp) : n < lp->count;
        if (again) {
            v->gagain |= lp->gin; /* group_duration: each group inside ends a pass */
            v->step = lp->first;
            sq_flow_loops_enter(f, v, l + 1);
            return true;
        }
    }
    return false;
}

void sq_flow_vu_begin(struct sq_flow_vu *v, const struct sq_flow *f, int64_t now)
{
    v->step = 0;
    v->last_status = 0;
    v->in_iter = true;
    v->iter_start_ns = now;
    v->think_until = 0;
    v->stamp_len = 0; /* a subscribe step waits for a stamp of its own iteration */
    v->hops = 0;
    v->redirect = false;
    if (v->jar)
        sq_cookie_jar_clear(v->jar); /* each iteration starts with an empty jar, as in k6 */
    const struct sq_plan *p = f->plan;
    for (size_t i = 0; i < p->nfeeders; i++)
        v->rows[i] = sq_feeder_row(p->feeders[i].data, p->feeders[i].mode, v->vu, &v->rng);
    if (SQ_UNLIKELY(f->extra != 0)) {
        if (f->nloops) /* after the rows: a while: may read them */
            sq_flow_loops_enter(f, v, 0);
        if (v->gstart) {
            /* the groups around the first step start their clocks at the iteration's start (an
             * arrival-rate iteration's intended start, as its first request's duration); one
             * an earlier iteration left open (cut short) is forgotten, nothing recorded */
            v->gopen = 0;
            sq_flow_groups_move(f, v, v->step, now, NULL);
        }
    }
}

void sq_flow_groups_move(const struct sq_flow *f, struct sq_flow_vu *v, size_t next, int64_t now,
                         struct sq_hist **gdur)
{
    const struct sq_plan_step *ps = next < f->nsteps ? f->steps[next].ps : NULL;
    uint64_t in = ps ? ps->gmask : 0;
    uint64_t left = v->gopen & (~in | v->gagain);
    v->gagain = 0;
    /* only a flow with groups gets here, and only sq_flow_vu_begin passes no histograms, with
     * nothing open */
    SQ_ASSERT(v->gstart != NULL && (gdur != NULL || left == 0));
    for (uint64_t m = left; m; m &= m - 1) {
        int g = __builtin_ctzll(m);
        sq_hist_record(gdur[g], (now - v->gstart[g]) / SQ_NS_PER_US);
    }
    v->gopen &= ~left;
    for (uint64_t m = in & ~v->gopen; m; m &= m - 1)
        v->gstart[__builtin_ctzll(m)] = now;
    v->gopen |= in;
}

/* the token in use, and the one requests may still carry after a refresh */
#define OAUTH_RECENT 2

size_t sq_flow_secrets(const struct sq_flow *f, const struct sq_flow_vu *v, struct sq_str *out,
                       size_t max)
{
    const struct sq_plan *p = f->plan;
    size_t n = 0;
    for (size_t i = 0; i < p->nsecrets; i++, n++)
        if (n < max)
            out[n] = p->secrets[i];
    for (size_t i = 0; v && v->rows && i < p->nfeeders; i++) {
        const struct sq_plan_feeder *fd = &p->feeders[i];
        if (!fd->secret || !v->rows[i])
            continue;
        for (size_t c = 0; c < fd->data->ncolumns; c++) {
            if (!fd->secret[c])
                continue;
            if (n < max)
                out[n] = v->rows[i][c];
            n++;
        }
    }
    if (v && v->jar) /* cookies the server set: an echo of one in a body goes too */
        n += sq_cookie_jar_values(v->jar, n < max ? out + n : NULL, n < max ? max - n : 0);
    struct sq_str tok[OAUTH_RECENT];
    size_t nt = sq_oauth_recent(f->oauth, tok, OAUTH_RECENT);
    for (size_t i = 0; i < nt; i++, n++)
        if (n < max)
            out[n] = tok[i];
    return n;
}

/* Appends a rendered header value with CR and LF replaced by spaces: an extracted value from a
 * hostile response must not inject header lines. */
static int append_value(struct sq_buf *out, size_t from)
{
    for (size_t i = from; i < out->len; i++)
        if (out->p[i] == '\r' || out->p[i] == '\n')
            out->p[i] = ' ';
    return 0;
}

/* A request-target may only hold visible ASCII: a rendered value with a space, a control byte or
 * a byte >= 0x80 is percent-encoded in place, so no value can break the request line. Only
 * rendered targets pay for the scan. */
static bool target_byte_ok(unsigned char ch)
{
    return ch > 0x20 && ch < 0x7f;
}

static int encode_target(struct sq_buf *o, size_t from)
{
    size_t bad = 0;
    for (size_t i = from; i < o->len; i++)
        bad += !target_byte_ok((unsigned char)o->p[i]);
    if (!bad)
        return 0;
    int rc = sq_buf_reserve(o, 2 * bad);
    if (rc < 0)
        return rc;
    size_t end = o->len + 2 * bad;
    for (size_t i = o->len, k = end; i-- > from;) {
        unsigned char ch = (unsigned char)o->p[i];
        if (target_byte_ok(ch)) {
            o->p[--k] = (char)ch;
        } else {
            o->p[--k] = sq_hex_upper[ch & 15];
            o->p[--k] = sq_hex_upper[ch >> 4];
            o->p[--k] = '%';
        }
    }
    o->len = end;
    return 0;
}

/* The template context of a VU: its numbers, variables (views refreshed) and feeder rows. */
static void render_ctx(const struct sq_flow *f, struct sq_flow_vu *v, struct sq_tmpl_ctx *ctx)
{
    for (uint32_t i = 0; i < f->sc->nvars; i++) {
        v->var_views[i].p = v->vars[i].p;
        v->var_views[i].len = v->vars[i].len;
    }
    *ctx = (struct sq_tmpl_ctx){
        .vu = v->vu,
        .iteration = v->iteration,
        .rng = &v->rng,
        .vars = v->var_views,
        .rows = (const struct sq_str *const *)v->rows,
        .oauth = f->oauth,
    };
}

/* A stamped step's stamp, made once per step (every {{$stamp}} in it renders the same token). */
static inline void make_stamp(bool stamped, struct sq_flow_vu *v, struct sq_str *stamp)
{
    *stamp = (struct sq_str){v->stamp, 0};
    if (stamped && v->stamp_fn) {
        v->stamp_len = (uint8_t)v->stamp_fn(v->stamp_ud, &v->stamp_seq, v->stamp);
        stamp->len = v->stamp_len;
    }
}

/* A step's context: the VU's, with the step's stamp in *stamp (which outlives ctx). */
static inline void step_ctx(const struct sq_flow *f, const struct sq_flow_step *st,
                            struct sq_flow_vu *v, struct sq_tmpl_ctx *ctx, struct sq_str *stamp)
{
    render_ctx(f, v, ctx);
    make_stamp(st->stamped, v, stamp);
    ctx->stamp = stamp;
}

int sq_flow_render(const struct sq_flow *f, struct sq_flow_vu *v, const struct sq_tmpl *t,
                   struct sq_buf *out)
{
    struct sq_tmpl_ctx ctx;
    render_ctx(f, v, &ctx);
    return sq_tmpl_render(t, &ctx, out);
}

int sq_flow_render_event(const struct sq_flow *f, struct sq_flow_vu *v, const struct sq_tmpl *t,
                         struct sq_buf *out)
{
    struct sq_tmpl_ctx ctx;
    render_ctx(f, v, &ctx);
    struct sq_str stamp;
    make_stamp(sq_tmpl_uses_stamp(t), v, &stamp);
    ctx.stamp = &stamp;
    return sq_tmpl_render(t, &ctx, out);
}

int sq_flow_publish_render(const struct sq_flow *f, const struct sq_flow_step *st,
                           struct sq_flow_vu *v, struct sq_str *payload, struct sq_str *hvals)
{
    const struct sq_plan_request *r = &st->ps->req;
    struct sq_tmpl_ctx ctx;
    struct sq_str stamp;
    step_ctx(f, st, v, &ctx, &stamp);
    sq_buf_reset(&v->scratch);
    sq_buf_reset(&v->val);
    int rc = r->body ? sq_tmpl_render(r->body, &ctx, &v->scratch) : 0;
    size_t off[SQ_FLOW_MAX_HEADERS + 1];
    if (r->nheaders > SQ_FLOW_MAX_HEADERS)
        return -EINVAL;
    for (size_t i = 0; rc == 0 && i < r->nheaders; i++) {
        off[i] = v->val.len;
        rc = sq_tmpl_render(r->headers[i].value, &ctx, &v->val);
        if (rc == 0)
            append_value(&v->val, off[i]);
    }
    if (rc < 0)
        return rc;
    off[r->nheaders] = v->val.len;
    for (size_t i = 0; i < r->nheaders; i++)
        hvals[i] = (struct sq_str){v->val.p + off[i], off[i + 1] - off[i]};
    *payload = (struct sq_str){v->scratch.p ? v->scratch.p : "", v->scratch.len};
    return 0;
}

/* Whether the field line l (up to its CRLF) has the name of one of the lines in hs. */
static bool field_named_in(const char *l, size_t ll, struct sq_str hs)
{
    const char *colon = memchr(l, ':', ll);
    if (!colon)
        return false;
    size_t n = (size_t)(colon - l);
    for (size_t at = 0; at < hs.len;) {
        const char *h = hs.p + at;
        const char *eol = memchr(h, '\n', hs.len - at);
        size_t hl = eol ? (size_t)(eol - h) + 1 : hs.len - at;
        const char *hc = memchr(h, ':', hl);
        if (hc && (size_t)(hc - h) == n && strncasecmp(h, l, n) == 0)
            return true;
        at += hl;
    }
    return false;
}

/* A before hook's fields (hs: "Name: value\r\n" lines): the field lines of o from `from` on
 * that have one of their names are dropped, then hs is appended. Cold: hooks that set headers. */
static int override_fields(struct sq_buf *o, size_t from, struct sq_str hs)
{
    size_t w = from;
    for (size_t at = from; at < o->len;) {
        const char *l = o->p + at;
        const char *eol = memchr(l, '\n', o->len - at);
        size_t ll = eol ? (size_t)(eol - l) + 1 : o->len - at;
        if (!field_named_in(l, ll, hs)) {
            if (w != at)
                memmove(o->p + w, l, ll);
            w += ll;
        }
        at += ll;
    }
    o->len = w;
    return sq_buf_append(o, hs.p, hs.len);
}

int sq_flow_hook_url(const struct sq_flow *f, struct sq_flow_vu *v, const char *url, size_t len,
                     const char **why)
{
    int rc = sq_redirect_resolve(&f->origin, "/", 1, url, len, &v->target);
    if (rc == SQ_REDIRECT_SAME && v->target.len && v->target.p[0] == '/')
        return 0;
    *why = rc == SQ_REDIRECT_OFFSITE ? "another origin than the target's (a hook's URL stays on "
                                       "the target: a path, or a URL with its scheme, host and "
                                       "port)"
           : rc == -ENOMEM           ? "not enough memory"
                                     : "not a URL";
    sq_buf_reset(&v->target);
    return -1;
}

int sq_flow_request(const struct sq_flow *f, const struct sq_flow_step *st, struct sq_flow_vu *v,
                    const char **req, size_t *len, bool *rendered)
{
    v->jar_len = 0;
    if (st->req) {
        *req = st->req;
        *len = st->req_len;
        *rendered = false;
        const char *sp = memchr(st->req, ' ', st->req_len);
        const char *e = sp ? memchr(sp + 1, ' ', st->req_len - (size_t)(sp + 1 - st->req)) : NULL;
        v->path = sp && e ? sp + 1 : "/";
        v->path_len = sp && e ? (size_t)(e - sp - 1) : 1;
        return 0;
    }
    *rendered = true;
    const struct sq_plan_request *r = &st->ps->req;
    struct sq_tmpl_ctx ctx;
    struct sq_str stamp;
    step_ctx(f, st, v, &ctx, &stamp);
    struct sq_buf *o = &v->req;
    sq_buf_reset(o);
    sq_buf_reset(&v->scratch);
    int rc = 0;
    if (SQ_UNLIKELY(v->body_set))
        rc = sq_buf_append(&v->scratch, v->body_in.p, v->body_in.len);
    else if (r->body)
        rc = sq_tmpl_render(r->body, &ctx, &v->scratch);
    if (rc == 0 && SQ_UNLIKELY(v->ovr) && v->ovr_method.len) {
        rc = sq_buf_append(o, v->ovr_method.p, v->ovr_method.len);
        if (rc == 0)
            rc = sq_buf_append(o, " ", 1);
    } else if (rc == 0) {
        rc = sq_buf_append(o, st->method_sp, strlen(st->method_sp));
    }
    size_t url_at = o->len;
    if (rc == 0 && SQ_UNLIKELY(v->ovr) && v->ovr_url) {
        /* the hook's URL, checked and encoded already (sq_flow_hook_url) */
        rc = sq_buf_append(o, v->target.p, v->target.len);
        if (rc < 0)
            return rc;
        goto target_done;
    }
    if (rc == 0)
        rc = sq_tmpl_render(r->url, &ctx, o);
    if (rc < 0)
        return rc;
    /* An absolute URL becomes origin-form in place. */
    const char *path;
    size_t plen;
    origin_form(o->p + url_at, o->len - url_at, &path, &plen);
    if (path != o->p + url_at) {
        if (path[0] == '/' && plen && path >= o->p + url_at && path < o->p + o->len) {
            memmove(o->p + url_at, path, plen);
            o->len = url_at + plen;
        } else {
            o->len = url_at;
            rc = sq_buf_append(o, "/", 1);
        }
    }
    if (rc == 0)
        rc = encode_target(o, url_at);
target_done:;
    size_t path_len = o->len - url_at;
    if (path_len == 0 && rc == 0) {
        rc = sq_buf_append(o, "/", 1);
        path_len = 1;
    }
    if (rc == 0)
        rc = sq_buf_append(o, st->fixed, st->fixed_len);
    for (size_t i = 0; rc == 0 && i < st->ndyn; i++) {
        const struct sq_plan_header *h = &r->headers[st->dyn[i]];
        rc = sq_buf_append(o, h->name, strlen(h->name));
        if (rc == 0)
            rc = sq_buf_append(o, ": ", 2);
        size_t at = o->len;
        if (rc == 0)
            rc = sq_tmpl_render(h->value, &ctx, o);
        if (rc == 0)
            rc = append_value(o, at);
        if (rc == 0)
            rc = sq_buf_append(o, "\r\n", 2);
    }
    if (rc == 0 && SQ_UNLIKELY(v->ovr) && v->ovr_hdrs.len)
        rc = override_fields(o, url_at + path_len + 11, v->ovr_hdrs);
    if (rc == 0 && v->jar) {
        size_t at = o->len;
        rc = sq_buf_append(o, "Cookie: ", 8);
        /* The path is in o; copy it out first, since appending may move the buffer. */
        char pbuf[512];
        size_t pl = path_len < sizeof(pbuf) ? path_len : sizeof(pbuf) - 1;
        memcpy(pbuf, o->p + url_at, pl);
        const char *q = memchr(pbuf, '?', pl);
        if (q)
            pl = (size_t)(q - pbuf);
        int n = rc == 0 ? sq_cookie_jar_header(v->jar, f->host, strlen(f->host), pbuf, pl,
                                               f->secure, (int64_t)sq_wall_s(), o)
                        : 0;
        if (n < 0)
            rc = n;
        else if (n == 0)
            o->len = at;
        else
            rc = sq_buf_append(o, "\r\n", 2);
        if (n > 0 && rc == 0) {
            v->jar_at = at;
            v->jar_len = o->len - at;
        }
    }
    if (rc == 0 && (st->content_length || (v->body_set && st->may_override))) {
        char cl[48];
        int n = snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", v->scratch.len);
        rc = sq_buf_append(o, cl, (size_t)n);
    }
    if (rc == 0)
        rc = sq_buf_append(o, "\r\n", 2);
    if (rc == 0 && v->scratch.len)
        rc = sq_buf_append(o, v->scratch.p, v->scratch.len);
    if (rc < 0)
        return rc;
    v->path = o->p + url_at;
    v->path_len = path_len;
    *req = o->p;
    *len = o->len;
    return 0;
}

int sq_flow_use_h2(struct sq_flow *f, char *err, size_t errlen)
{
    f->h2 = true;
    for (size_t i = 0; i < f->nsteps; i++) {
        struct sq_flow_step *st = &f->steps[i];
        if (!st->req)
            continue;
        int rc = sq_h2_req_from_h1(&st->h2, f->secure ? "https" : "http", st->req, st->req_len);
        if (rc < 0) {
            snprintf(err, errlen, "step '%s': cannot build the HTTP/2 request: %s", st->ps->name,
                     sq_strerror(rc));
            return rc;
        }
    }
    return 0;
}

int sq_flow_h2_request(const struct sq_flow *f, const struct sq_flow_step *st, struct sq_flow_vu *v,
                       const char *req, size_t len, const struct sq_h2_req **out)
{
    if (st->req && req == st->req) { /* the static request, as sq_flow_request gave it */
        *out = &st->h2;
        return 0;
    }
    int rc = sq_h2_req_from_h1(&v->h2, f->secure ? "https" : "http", req, len);
    if (rc < 0)
        return rc;
    *out = &v->h2;
    return 0;
}

/* A field's place in v->head while the head is being collected; turned into a struct
 * sq_resp_header (same size) in place by sq_flow_vu_fields_done. */
struct field_at {
    size_t name, name_len, value, value_len;
};
_Static_assert(sizeof(struct field_at) == sizeof(struct sq_resp_header), "same slots");

void sq_flow_vu_field(struct sq_flow_vu *v, const char *name, size_t name_len, const char *value,
                      size_t value_len)
{
    if (v->head.len == 0) {
        sq_buf_reset(&v->fields);
        v->nfields = 0;
    }
    struct field_at at = {v->head.len, name_len, v->head.len + name_len + 2, value_len};
    if (sq_buf_append(&v->head, name, name_len) < 0 || sq_buf_append(&v->head, ": ", 2) < 0 ||
        sq_buf_append(&v->head, value, value_len) < 0 || sq_buf_append(&v->head, "\r\n", 2) < 0 ||
        sq_buf_append(&v->fields, &at, sizeof(at)) < 0) {
        sq_buf_reset(&v->head);
        sq_buf_reset(&v->fields);
        v->nfields = 0;
        return;
    }
    v->nfields++;
}

void sq_flow_vu_fields_done(struct sq_flow_vu *v)
{
    if (!v->head.len) {
        v->nfields = 0;
        return;
    }
    for (size_t i = 0; i < v->nfields; i++) {
        struct field_at at;
        memcpy(&at, v->fields.p + i * sizeof(at), sizeof(at));
        struct sq_resp_header h = {v->head.p + at.name, at.name_len, v->head.p + at.value,
                                   at.value_len};
        memcpy(v->fields.p + i * sizeof(h), &h, sizeof(h));
    }
}

void sq_flow_vu_capture(struct sq_flow_vu *v, const char *data, size_t len)
{
    size_t room = SQ_FLOW_BODY_CAP - v->body.len;
    if (len > room) {
        len = room;
        v->body_truncated = true;
    }
    if (len && sq_buf_append(&v->body, data, len) < 0)
        v->body_truncated = true;
}

void **sq_flow_states_new(const struct sq_flow *f)
{
    void **st = calloc(f->nstates ? f->nstates : 1, sizeof(*st));
    if (!st)
        return NULL;
    for (size_t i = 0; i < f->nsteps; i++) {
        const struct sq_plan_step *ps = f->steps[i].ps;
        uint32_t b = f->steps[i].md_base;
        for (size_t k = 0; k < ps->nextract; k++)
            st[b + k] = sq_extractor_clone_state(&ps->extract[k]);
        for (size_t k = 0; k < ps->nchecks; k++)
            st[b + ps->nextract + k] = sq_check_clone_state(&ps->checks[k]);
    }
    return st;
}

void sq_flow_states_free(const struct sq_flow *f, void **st)
{
    if (!st)
        return;
    for (uint32_t i = 0; i < f->nstates; i++)
        sq_extractor_free_state(st[i]);
    free(st);
}

void sq_flow_vu_keep_head(struct sq_flow_vu *v, const char *head, size_t len,
                          const struct sq_h1_header *fields, size_t nfields)
{
    sq_buf_reset(&v->head);
    sq_buf_reset(&v->fields);
    v->nfields = 0;
    if (sq_buf_append(&v->head, head, len) < 0 ||
        sq_buf_reserve(&v->fields, nfields * sizeof(struct sq_resp_header)) < 0) {
        sq_buf_reset(&v->head);
        return;
    }
    struct sq_resp_header *out = (struct sq_resp_header *)(void *)v->fields.p;
    for (size_t i = 0; i < nfields; i++) {
        out[i].name = v->head.p + (fields[i].name - head);
        out[i].name_len = fields[i].name_len;
        out[i].value = v->head.p + (fields[i].value - head);
        out[i].value_len = fields[i].value_len;
    }
    v->fields.len = nfields * sizeof(struct sq_resp_header);
    v->nfields = nfields;
}

void sq_flow_max_redirects(struct sq_flow *f, uint32_t n)
{
    for (size_t i = 0; i < f->nsteps; i++) {
        struct sq_flow_step *st = &f->steps[i];
        if (st->ps->kind != SQ_STEP_REQUEST || st->ps->req.redirects_set)
            continue;
        st->max_redirects = n;
        st->follow = n > 0;
    }
}

void sq_flow_store_cookies(const struct sq_flow *f, struct sq_flow_vu *v)
{
    if (!v->jar)
        return;
    const struct sq_resp_header *hs = (const struct sq_resp_header *)(const void *)v->fields.p;
    size_t nh = v->head.len ? v->nfields : 0;
    for (size_t i = 0; i < nh; i++) {
        if (hs[i].name_len == 10 && strncasecmp(hs[i].name, "set-cookie", 10) == 0) {
            char pbuf[512];
            size_t pl = v->path_len < sizeof(pbuf) ? v->path_len : sizeof(pbuf) - 1;
            memcpy(pbuf, v->path ? v->path : "/", v->path ? pl : 1);
            if (!v->path)
                pl = 1;
            const char *q = memchr(pbuf, '?', pl);
            if (q)
                pl = (size_t)(q - pbuf);
            if (sq_cookie_jar_set(v->jar, f->host, strlen(f->host), pbuf, pl, hs[i].value,
                                  hs[i].value_len, (int64_t)sq_wall_s()) < 0)
                break;
        }
    }
}

void sq_flow_vu_location_set(struct sq_flow_vu *v, const char *value, size_t len)
{
    sq_buf_reset(&v->loc);
    if (sq_buf_append(&v->loc, value, len) < 0)
        sq_buf_reset(&v->loc);
}

void sq_flow_vu_location(struct sq_flow_vu *v, const char *head, size_t len)
{
    sq_buf_reset(&v->loc);
    const char *p = memchr(head, '\n', len); /* past the status line */
    const char *end = head + len;
    while (p && p + 1 < end) {
        const char *line = p + 1;
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(end - line);
        if (ll > 9 && strncasecmp(line, "location:", 9) == 0) {
            const char *val = line + 9;
            size_t vl = ll - 9;
            if (vl && val[vl - 1] == '\r')
                vl--;
            sq_flow_vu_location_set(v, val, vl);
            return;
        }
        p = nl;
    }
}

/* Whether the header line l[0, n) is the field name (n counts up to the colon). */
static bool line_is(const char *l, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && l[k] == ':' && strncasecmp(l, name, k) == 0;
}

int sq_flow_redirect(const struct sq_flow *f, struct sq_flow_vu *v, const char *prev, size_t len,
                     unsigned status)
{
    if (!v->loc.len)
        return -SQ_EPARSE;
    const char *sp = memchr(prev, ' ', len);
    const char *eol = memchr(prev, '\n', len);
    const char *hend = memmem(prev, len, "\r\n\r\n", 4);
    if (!sp || !eol || !hend || sp > eol)
        return -SQ_EPARSE;
    const char *tgt = sp + 1;
    const char *tsp = memchr(tgt, ' ', (size_t)(eol - tgt));
    size_t tl = tsp ? (size_t)(tsp - tgt) : 0;
    /* the new target, resolved against the old, into val (free at this point) */
    int rc = sq_redirect_resolve(&f->origin, tgt, tl, v->loc.p, v->loc.len, &v->val);
    if (rc != SQ_REDIRECT_SAME)
        return rc;
    bool keep = sq_redirect_keeps_method(status);
    size_t ml = (size_t)(sp - prev);
    bool head = ml == 4 && memcmp(prev, "HEAD", 4) == 0;
    struct sq_buf *o = &v->redir;
    sq_buf_reset(o);
    if (keep || head)
        rc = sq_buf_append(o, prev, ml + 1);
    else
        rc = sq_buf_append(o, "GET ", 4);
    size_t url_at = o->len;
    if (rc == 0)
        rc = sq_buf_append(o, v->val.p, v->val.len);
    size_t path_len = v->val.len;
    if (rc == 0)
        rc = sq_buf_append(o, " HTTP/1.1\r\n", 11);
    /* the header lines but the jar's Cookie line, and without a body its framing and type */
    const char *l = eol + 1;
    while (rc == 0 && l < hend + 2) {
        const char *nl = memchr(l, '\n', (size_t)(hend + 2 - l));
        size_t ll = (size_t)(nl - l) + 1;
        size_t at = (size_t)(l - prev);
        bool jar_line = v->jar_len && at == v->jar_at;
        bool framing = line_is(l, ll, "Content-Length") || line_is(l, ll, "Transfer-Encoding") ||
                       line_is(l, ll, "Content-Type");
        if (!jar_line && (keep || !framing))
            rc = sq_buf_append(o, l, ll);
        l = nl + 1;
    }
    v->jar_len = 0;
    if (rc == 0 && v->jar) {
        size_t at = o->len;
        rc = sq_buf_append(o, "Cookie: ", 8);
        char pbuf[512];
        size_t pl = path_len < sizeof(pbuf) ? path_len : sizeof(pbuf) - 1;
        memcpy(pbuf, v->val.p, pl);
        const char *q = memchr(pbuf, '?', pl);
        if (q)
            pl = (size_t)(q - pbuf);
        int n = rc == 0 ? sq_cookie_jar_header(v->jar, f->host, strlen(f->host), pbuf, pl,
                                               f->secure, (int64_t)sq_wall_s(), o)
                        : 0;
        if (n < 0)
            rc = n;
        else if (n == 0)
            o->len = at;
        else if ((rc = sq_buf_append(o, "\r\n", 2)) == 0) {
            v->jar_at = at;
            v->jar_len = o->len - at;
        }
    }
    if (rc == 0)
        rc = sq_buf_append(o, "\r\n", 2);
    size_t body_at = (size_t)(hend + 4 - prev);
    if (rc == 0 && keep && body_at < len)
        rc = sq_buf_append(o, hend + 4, len - body_at);
    if (rc < 0) {
        v->jar_len = 0;
        return rc;
    }
    struct sq_buf t = v->req;
    v->req = v->redir;
    v->redir = t;
    v->path = v->req.p + url_at;
    v->path_len = path_len;
    return SQ_REDIRECT_SAME;
}

void sq_flow_eval(const struct sq_flow *f, const struct sq_flow_step *st, struct sq_flow_vu *v,
                  void **states, int status, int64_t duration_us, uint64_t *pass, uint64_t *fail,
                  struct sq_flow_outcome *out)
{
    const struct sq_plan_step *ps = st->ps;
    out->extract_fail = 0;
    out->stop_iteration = false;
    /* the fields the reader parsed, kept with the head (a reset head has none) */
    const struct sq_resp_header *hs = (const struct sq_resp_header *)(const void *)v->fields.p;
    size_t nh = v->head.len ? v->nfields : 0;
    struct sq_resp_view r = {
        .status = status,
        .headers = hs,
        .nheaders = nh,
        .body = v->body.p ? v->body.p : "",
        .body_len = v->body.len,
        .body_truncated = v->body_truncated,
        .duration_us = duration_us,
    };
    sq_flow_store_cookies(f, v);
    for (size_t k = 0; k < ps->nchecks; k++) {
        bool ok = sq_check_run(&ps->checks[k], &r,
                               states ? states[st->md_base + ps->nextract + k] : NULL, &v->scratch);
        if (ok)
            pass[k]++;
        else
            fail[k]++;
    }
    for (size_t k = 0; k < ps->nextract; k++) {
        const struct sq_extractor *e = &ps->extract[k];
        int rc = sq_extractor_run(e, &r, states ? states[st->md_base + k] : NULL, &v->val);
        if (rc == 1) {
            struct sq_buf *dst = &v->vars[e->var];
            sq_buf_reset(dst);
            if (sq_buf_append(dst, v->val.p ? v->val.p : "", v->val.len) < 0)
                rc = 0;
        }
        if (rc != 1) {
            out->extract_fail++;
            if (ps->on_error == SQ_ON_ERROR_NEXT_ITERATION)
                out->stop_iteration = true;
        }
    }
}
