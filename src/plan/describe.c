/* plan/describe.c - a loaded plan as text (`squall validate`) and load errors as one line.
 *
 * The outline names everything the run will do, in the plan's own words: the target, the
 * feeders, each scenario's executor and load shape, each step's method, url template, body,
 * extractors and checks, and the thresholds. Long or multi-line values are shortened so each
 * item stays on one line.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/redact.h"
#include "plan/plan.h"

void sq_plan_error_format(const struct sq_plan_error *e, char *buf, size_t len)
{
    if (!len)
        return;
    const char *file = e->file[0] ? e->file : "plan";
    if (e->loc.line && e->key[0])
        snprintf(buf, len, "%s:%u:%u: %s: %s", file, e->loc.line, e->loc.col, e->key, e->msg);
    else if (e->loc.line)
        snprintf(buf, len, "%s:%u:%u: %s", file, e->loc.line, e->loc.col, e->msg);
    else
        snprintf(buf, len, "%s: %s", file, e->msg);
}

/* "1h2m3s", "250ms", "1.5s", "0s" */
static const char *fmt_dur(int64_t ns, char *buf, size_t len)
{
    if (ns <= 0) {
        snprintf(buf, len, "0s");
    } else if (ns % SQ_NS_PER_S == 0) {
        int64_t s = ns / SQ_NS_PER_S, h = s / 3600, m = s / 60 % 60;
        size_t used = 0;
        if (h)
            used += (size_t)snprintf(buf + used, len - used, "%" PRId64 "h", h);
        if (m && used < len)
            used += (size_t)snprintf(buf + used, len - used, "%" PRId64 "m", m);
        if ((s % 60 || !used) && used < len)
            snprintf(buf + used, len - used, "%" PRId64 "s", s % 60);
    } else if (ns < SQ_NS_PER_S && ns % SQ_NS_PER_MS == 0) {
        snprintf(buf, len, "%" PRId64 "ms", (int64_t)(ns / SQ_NS_PER_MS));
    } else if (ns < SQ_NS_PER_MS && ns % SQ_NS_PER_US == 0) {
        snprintf(buf, len, "%" PRId64 "us", (int64_t)(ns / SQ_NS_PER_US));
    } else if (ns < SQ_NS_PER_US) {
        snprintf(buf, len, "%" PRId64 "ns", ns);
    } else {
        snprintf(buf, len, "%gs", (double)ns / 1e9);
    }
    return buf;
}

/* Prints s[0, n) on one line: control characters as escapes, cut after max bytes. */
static void put_short(FILE *out, const char *s, size_t n, size_t max)
{
    size_t shown = n > max ? max : n;
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", out);
        else if (c == '\r')
            fputs("\\r", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
    if (n > max)
        fprintf(out, "... (%zu bytes)", n);
}

static const char *feed_mode(enum sq_feed_mode m)
{
    return m == SQ_FEED_PER_VU ? "per-vu" : m == SQ_FEED_RANDOM ? "random" : "sequential";
}

static void put_rate(FILE *out, double rate, int64_t unit)
{
    char d[32];
    if (unit == SQ_NS_PER_S)
        fprintf(out, "%g/s", rate);
    else
        fprintf(out, "%g per %s", rate, fmt_dur(unit, d, sizeof(d)));
}

static void put_stages(FILE *out, const struct sq_exec *e, bool rate)
{
    char d[32];
    for (uint32_t i = 0; i < e->nstages; i++) {
        fprintf(out, "%s%s to ", i ? ", " : "", fmt_dur(e->stages[i].duration_ns, d, sizeof(d)));
        if (rate)
            put_rate(out, e->stages[i].target, e->time_unit_ns);
        else
            fprintf(out, "%g", e->stages[i].target);
    }
}

static void put_shape(FILE *out, const struct sq_exec *e)
{
    char d[32], d2[32];
    fprintf(out, "%s: ", sq_exec_name(e->kind));
    switch (e->kind) {
    case SQ_EXEC_CONSTANT_VUS:
        fprintf(out, "%u VUs for %s", e->vus, fmt_dur(e->duration_ns, d, sizeof(d)));
        break;
    case SQ_EXEC_RAMPING_VUS:
        fprintf(out, "from %u VUs: ", e->start_vus);
        put_stages(out, e, false);
        fprintf(out, " (%s, at most %u VUs)", fmt_dur(sq_exec_length_ns(e), d, sizeof(d)),
                sq_exec_max_vus(e));
        break;
    case SQ_EXEC_CONSTANT_ARRIVAL_RATE:
        put_rate(out, e->rate, e->time_unit_ns);
        fprintf(out,
                " for %s (%" PRIu64 " iterations), %u VUs preallocated, at most %" PRIu64
                " in flight",
                fmt_dur(e->duration_ns, d, sizeof(d)), sq_exec_total_arrivals(e), e->vus,
                e->max_in_flight);
        break;
    case SQ_EXEC_RAMPING_ARRIVAL_RATE:
        fprintf(out, "from ");
        put_rate(out, e->start_rate, e->time_unit_ns);
        fprintf(out, ": ");
        put_stages(out, e, true);
        fprintf(out,
                " (%s, %" PRIu64 " iterations), %u VUs preallocated, at most %" PRIu64 " in flight",
                fmt_dur(sq_exec_length_ns(e), d, sizeof(d)), sq_exec_total_arrivals(e), e->vus,
                e->max_in_flight);
        break;
    case SQ_EXEC_PER_VU_ITERATIONS:
        fprintf(out, "%u VUs x %" PRIu64 " iterations each (at most %s)", e->vus, e->iterations,
                fmt_dur(e->max_duration_ns, d, sizeof(d)));
        break;
    case SQ_EXEC_SHARED_ITERATIONS:
        fprintf(out, "%" PRIu64 " iterations shared by %u VUs (at most %s)", e->iterations, e->vus,
                fmt_dur(e->max_duration_ns, d, sizeof(d)));
        break;
    default:
        break;
    }
    if (e->pacing_ns)
        fprintf(out, ", pacing %s", fmt_dur(e->pacing_ns, d, sizeof(d)));
    fprintf(out, ", graceful stop %s", fmt_dur(e->graceful_stop_ns, d2, sizeof(d2)));
}

static const char *body_kind(enum sq_body_kind k)
{
    switch (k) {
    case SQ_BODY_TEXT:
        return "text";
    case SQ_BODY_JSON:
        return "json";
    case SQ_BODY_FORM:
        return "form";
    case SQ_BODY_FILE:
        return "file";
    default:
        return "none";
    }
}

static void put_tmpl(FILE *out, const struct sq_tmpl *t, size_t max)
{
    size_t n;
    const char *s = sq_tmpl_source(t, &n);
    put_short(out, s, n, max);
}

/* A step's url as written, a broker URL's password redacted (base/redact.h). */
static void put_url(FILE *out, const char *url)
{
    struct sq_buf b = {0};
    if (sq_redact_url(url, strlen(url), &b) == 0)
        put_short(out, b.p ? b.p : "", b.len, 160);
    else
        put_short(out, url, strlen(url), 160);
    sq_buf_dispose(&b);
}

/* A header's template as written; a credential header's fixed text redacted (base/redact.h):
 * "Authorization: Bearer [redacted]", while "Bearer {{token}}" names only where it comes from. */
static void put_header_value(FILE *out, const char *name, const struct sq_tmpl *t)
{
    size_t n;
    const char *s = sq_tmpl_source(t, &n);
    struct sq_buf b = {0};
    if (!sq_redact_header_name(name, strlen(name)) || memmem(s, n, "{{", 2) ||
        sq_redact_value(name, strlen(name), s, n, &b) < 0) {
        put_short(out, s, n, 100);
    } else {
        put_short(out, b.p ? b.p : "", b.len, 100);
    }
    sq_buf_dispose(&b);
}

/* True when nothing of the request is rendered per iteration: its URL, every header and its
 * body are fixed text and the scenario keeps no cookie jar (which adds a Cookie header per VU),
 * so it is serialised once before the run. */
static bool step_static(const struct sq_plan_scenario *sc, const struct sq_plan_request *r)
{
    if (sc->cookies || !sq_tmpl_static(r->url, NULL, NULL))
        return false;
    if (r->body && !sq_tmpl_static(r->body, NULL, NULL))
        return false;
    for (size_t h = 0; h < r->nheaders; h++)
        if (!sq_tmpl_static(r->headers[h].value, NULL, NULL))
            return false;
    return true;
}

/* A ws step's first line: what it does (its headers, message and timeout follow as for a
 * request). */
static void put_ws_step(FILE *out, const struct sq_plan_step *st, size_t i)
{
    const struct sq_plan_request *r = &st->req;
    fprintf(out, "    %zu. %s: ws ", i + 1, st->name);
    switch (st->ws.op) {
    case SQ_WS_OP_CONNECT:
        fprintf(out, "connect ");
        put_url(out, r->url_src);
        if (st->ws.subprotocol)
            fprintf(out, "  (subprotocol %s)", st->ws.subprotocol);
        break;
    case SQ_WS_OP_SEND:
        fprintf(out, "send a %s message%s", st->ws.binary ? "binary" : "text",
                st->ws.reply ? ", then wait for the reply" : "");
        break;
    case SQ_WS_OP_RECEIVE:
        fprintf(out, "receive the next message");
        break;
    case SQ_WS_OP_CLOSE:
        fprintf(out, "close %u", (unsigned)st->ws.close_code);
        break;
    }
    fputc('\n', out);
}

static void put_step(FILE *out, const struct sq_plan_scenario *sc, size_t i)
{
    const struct sq_plan_step *st = &sc->steps[i];
    char d[32];
    const char *pad = "       ";
    if (st->kind == SQ_STEP_THINK) {
        fprintf(out, "    %zu. %s: think %s\n", i + 1, st->name,
                fmt_dur(st->think_ns, d, sizeof(d)));
        if (st->cond) {
            fprintf(out, "%sif ", pad);
            put_short(out, sq_cond_source(st->cond), strlen(sq_cond_source(st->cond)), 160);
            fputc('\n', out);
        }
        return;
    }
    const struct sq_plan_request *r = &st->req;
    if (st->kind == SQ_STEP_WS) {
        put_ws_step(out, st, i);
    } else {
        fprintf(out, "    %zu. %s: %s ", i + 1, st->name, r->method);
        put_url(out, r->url_src);
        if (step_static(sc, r))
            fprintf(out, "  (static)");
        fputc('\n', out);
    }
    if (st->cond) {
        fprintf(out, "%sif ", pad);
        put_short(out, sq_cond_source(st->cond), strlen(sq_cond_source(st->cond)), 160);
        fputc('\n', out);
    }
    if (st->group) {
        fprintf(out, "%sgroup ", pad);
        put_short(out, st->group, strlen(st->group), 160);
        fputc('\n', out);
    }
    if (st->ntags) {
        fprintf(out, "%stags", pad);
        for (uint32_t t = 0; t < st->ntags; t++)
            fprintf(out, "%s %s:%s", t ? "," : "", st->tags[t].key, st->tags[t].value);
        fputc('\n', out);
    }
    for (size_t h = 0; h < r->nheaders; h++) {
        const char *name = r->headers[h].name;
        fprintf(out, "%sheader %s: ", pad, name);
        put_header_value(out, name, r->headers[h].value);
        fputc('\n', out);
    }
    if (r->body_kind == SQ_BODY_FILE) {
        size_t n;
        sq_tmpl_source(r->body, &n);
        fprintf(out, "%sbody (file): %s, %zu bytes\n", pad, r->body_file, n);
    } else if (r->body_kind != SQ_BODY_NONE) {
        fprintf(out, "%s%s (%s): ", pad, st->kind == SQ_STEP_WS ? "message" : "body",
                body_kind(r->body_kind));
        put_tmpl(out, r->body, 120);
        fputc('\n', out);
    }
    if (r->timeout_ns)
        fprintf(out, "%stimeout %s\n", pad, fmt_dur(r->timeout_ns, d, sizeof(d)));
    if (r->redirects_set)
        fprintf(out, "%sredirects %u\n", pad, (unsigned)r->max_redirects);
    for (size_t k = 0; k < st->nextract; k++) {
        const struct sq_extractor *e = &st->extract[k];
        static const char *const kinds[] = {"json", "regex", "header"};
        fprintf(out, "%sextract %s <- %s ", pad, sc->vars[e->var],
                (unsigned)e->kind < 3 ? kinds[e->kind] : "?");
        const char *src = st->extract_src ? st->extract_src[k] : NULL;
        put_short(out, src ? src : "", src ? strlen(src) : 0, 100);
        fputc('\n', out);
    }
    for (size_t k = 0; k < st->nchecks; k++) {
        const char *name = st->checks[k].name ? st->checks[k].name : "?";
        fprintf(out, "%scheck ", pad);
        put_short(out, name, strlen(name), 120);
        fputc('\n', out);
    }
    if (st->on_error == SQ_ON_ERROR_NEXT_ITERATION)
        fprintf(out, "%son error: next iteration\n", pad);
    if (st->before)
        fprintf(out, "%sbefore: %s()\n", pad, st->before);
    if (st->after)
        fprintf(out, "%safter: %s()\n", pad, st->after);
}

void sq_plan_describe(const struct sq_plan *p, FILE *out)
{
    char d[32];
    fprintf(out, "plan %s\n", p->file ? p->file : "");
    if (p->name)
        fprintf(out, "name %s\n", p->name);
    fprintf(out, "target %s\n", p->target ? p->target : "");
    if (p->default_timeout_ns)
        fprintf(out, "default timeout %s\n", fmt_dur(p->default_timeout_ns, d, sizeof(d)));
    if (p->default_max_redirects != SQ_PLAN_MAX_REDIRECTS)
        fprintf(out, "default max_redirects %u\n", (unsigned)p->default_max_redirects);
    if (p->seed_set)
        fprintf(out, "seed %llu (the random values replay it; --seed wins)\n",
                (unsigned long long)p->seed);
    if (p->nvars) {
        fprintf(out, "vars\n");
        for (size_t i = 0; i < p->nvars; i++) {
            fprintf(out, "  %s = ", p->vars[i].name);
            put_short(out, p->vars[i].value, strlen(p->vars[i].value), 100);
            fputc('\n', out);
        }
    }
    if (p->nfeeders > (p->setup_feeder >= 0)) {
        fprintf(out, "data\n");
        for (size_t i = 0; i < p->nfeeders; i++) {
            const struct sq_plan_feeder *f = &p->feeders[i];
            if ((int)i == p->setup_feeder)
                continue; /* setup's values: shown with setup */
            fprintf(out, "  %s: %s, %zu rows, %s; columns ", f->name, f->path,
                    f->data ? f->data->nrows : 0, feed_mode(f->mode));
            for (size_t c = 0; f->data && c < f->data->ncolumns; c++)
                fprintf(out, "%s%s", c ? ", " : "", f->data->columns[c]);
            fputc('\n', out);
        }
    }
    if (p->sink) {
        const struct sq_plan_sink *k = p->sink;
        fprintf(out, "sink");
        if (k->http)
            fprintf(out, " http %s", k->http);
        if (k->nats)
            fprintf(out, " nats %s%s%s", k->nats, k->durable ? " durable " : "",
                    k->durable ? k->durable : "");
        if (k->mqtt)
            fprintf(out, " mqtt %s", k->mqtt);
        fprintf(out, ", stamp %s", k->stamp ? k->stamp : "scan");
        if (k->settle_ns)
            fprintf(out, ", settle %s", fmt_dur(k->settle_ns, d, sizeof(d)));
        fputc('\n', out);
    }
    if (p->subscribers) {
        const struct sq_plan_subscribers *k = p->subscribers;
        fprintf(out, "subscribers %u × %s", (unsigned)k->count, k->url);
        if (k->queue)
            fprintf(out, ", queue %s", k->queue);
        if (k->stream)
            fprintf(out, ", stream %s (%s)", k->stream, k->push ? "push" : "pull");
        fputc('\n', out);
    }
    if (p->script)
        fprintf(out, "script %s\n", p->script);
    if (p->oauth2) {
        /* the client secret is never shown */
        const struct sq_plan_oauth2 *o = p->oauth2;
        fprintf(out, "auth oauth2 (client credentials)\n  token_url ");
        put_short(out, o->token_url, strlen(o->token_url), 160);
        fprintf(out, "\n  client_id ");
        put_short(out, o->client_id, strlen(o->client_id), 100);
        fprintf(out, " (as %s; the secret is set, not shown)\n",
                o->client_auth_body ? "form fields" : "HTTP Basic");
        if (o->scope) {
            fprintf(out, "  scope ");
            put_short(out, o->scope, strlen(o->scope), 100);
            fputc('\n', out);
        }
        fprintf(out, "  refreshed %s before expiry", fmt_dur(o->refresh_lead_ns, d, sizeof(d)));
        fprintf(out, ", at most every %s", fmt_dur(o->min_refresh_ns, d, sizeof(d)));
        fprintf(out, "; retries after %s", fmt_dur(o->retry_ns, d, sizeof(d)));
        fprintf(out, " doubling to %s\n", fmt_dur(o->retry_max_ns, d, sizeof(d)));
    }
    for (size_t i = 0; i < p->nscenarios + 2; i++) {
        const struct sq_plan_scenario *sc = i == 0               ? p->setup
                                            : i <= p->nscenarios ? &p->scenarios[i - 1]
                                                                 : p->teardown;
        if (!sc)
            continue;
        if (sc == p->setup || sc == p->teardown) {
            fprintf(out, "%s: once, on one VU, %s the scenarios (at most %s)\n", sc->name,
                    sc == p->setup ? "before" : "after",
                    fmt_dur(sc->exec.max_duration_ns, d, sizeof(d)));
            if (sc == p->setup && sc->nvars)
                fprintf(out, "  every VU reads its variables as {{setup.NAME}}\n");
        } else {
            fprintf(out, "scenario %s\n  ", sc->name);
            put_shape(out, &sc->exec);
            fputc('\n', out);
        }
        if (sc->start_ns)
            fprintf(out, "  starts at %s\n", fmt_dur(sc->start_ns, d, sizeof(d)));
        if (sc->cookies)
            fprintf(out, "  cookies: a jar per VU\n");
        if (sc->h2)
            fprintf(out, "  protocol: %s\n", sc->h3 ? "h3" : "h2");
        if (sc->nvars) {
            fprintf(out, "  variables:");
            for (uint32_t v = 0; v < sc->nvars; v++)
                fprintf(out, " %s", sc->vars[v]);
            fputc('\n', out);
        }
        fprintf(out, "  flow (%zu step%s)\n", sc->nsteps, sc->nsteps == 1 ? "" : "s");
        for (size_t s = 0; s < sc->nsteps; s++) {
            for (uint32_t l = 0; l < sc->nloops; l++) {
                const struct sq_plan_loop *lp = &sc->loops[l];
                if (lp->first != s)
                    continue;
                if (lp->cond) {
                    fprintf(out, "    repeat steps %u-%u while ", lp->first + 1, lp->last + 1);
                    put_short(out, sq_cond_source(lp->cond), strlen(sq_cond_source(lp->cond)), 160);
                    fprintf(out, ", at most %llu times\n", (unsigned long long)lp->max);
                } else {
                    fprintf(out, "    repeat steps %u-%u %llu times\n", lp->first + 1, lp->last + 1,
                            (unsigned long long)lp->count);
                }
            }
            if (sc->steps[s].batch) {
                uint32_t nc = sc->batch_max < sc->batch_conns ? sc->batch_max : sc->batch_conns;
                fprintf(out, "    batch: steps %zu-%zu at once", s + 1, s + sc->steps[s].batch);
                if (sc->h2)
                    fprintf(out, " (streams of the VU's connection)\n");
                else
                    fprintf(out, " (on %u connection%s of the VU's)\n", nc, nc == 1 ? "" : "s");
            }
            put_step(out, sc, s);
        }
    }
    if (p->nmetrics) {
        static const char *const kinds[] = {"counter", "rate", "gauge", "trend"};
        fprintf(out, "metrics\n");
        for (size_t i = 0; i < p->nmetrics; i++)
            fprintf(out, "  %s %s\n", p->metrics[i].name,
                    (unsigned)p->metrics[i].kind < 4 ? kinds[p->metrics[i].kind] : "?");
    }
    if (p->nthresholds) {
        fprintf(out, "thresholds\n");
        for (size_t i = 0; i < p->nthresholds; i++) {
            const struct sq_plan_threshold *t = &p->thresholds[i];
            fprintf(out, "  %s:", t->selector);
            for (size_t e = 0; e < t->nexprs; e++)
                fprintf(out, "%s %s", e ? "," : "", t->exprs[e].text);
            if (t->abort_on_fail) {
                fprintf(out, " (abort on fail");
                if (t->delay_abort_eval_ns)
                    fprintf(out, ", evaluated after %s",
                            fmt_dur(t->delay_abort_eval_ns, d, sizeof(d)));
                fputc(')', out);
            }
            fputc('\n', out);
        }
    }
}
