/* cluster/controller.c - one test on N agents: find, assign, start together, merge, watch.
 *
 * One thread, one NATS connection, one loop over its messages (sq_ctlbus_next with a short
 * timeout), in phases:
 *   discover  publish "discover" (again every second) until N idle agents of this protocol
 *             answered, or the wait is over (refusals and busy agents are named in the error);
 *   assign    each chosen agent gets the job, the sequence and its index, and answers accept (or
 *             refuse, with why: busy, or its face could not prepare the job);
 *   ready     each agent measures its clock offset (it asks, the controller answers with its
 *             clock: "time") and opens its pools, then says ready with its offset;
 *   run       "start" names a common start a little ahead in the controller's clock; agents
 *             stream one message per second (counts and histograms) and heartbeats, and finally
 *             their whole result; the controller merges each second as soon as every running
 *             agent has sent it (the live progress and abortOnFail), sends a stop to every agent
 *             when asked to (Ctrl-C, a threshold), and marks an agent lost when it has been silent
 *             for SQ_CLUSTER_LOSS_NS.
 * A NATS outage (the controller's connection ends, or the server stops answering PINGs when an
 * agent seems silent): the controller redials the same URL (ride_out) for up to the outage window,
 * the run going on on the agents; meanwhile no agent can be lost (their silence is the broker's),
 * and once it is back each gets SQ_CLUSTER_LOSS_NS from then to speak. Agents keep every second
 * the controller has not acknowledged (its heartbeats carry "ack": every second up to that one
 * arrived) and their final result until it says "got", and send them again, so nothing they
 * measured is missing. Past the window, or on a stop during the outage, the controller ends the
 * run with what arrived: the agents still running are lost, and the report says why it is
 * incomplete.
 * Then the merge: each finished agent's final result (sq_result_merge: counts summed, histograms
 * merged bucket for bucket) and the series second by second: counts from each finished agent's
 * own series, percentiles from the merged histograms of its seconds. Nothing is averaged. A lost
 * agent's seconds up to its loss are its own result, shown apart (cluster.lost_agents), never
 * merged: every figure of the merged result is over the same agents.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "cluster/cluster.h"
#include "cluster/internal.h"
#include "cluster/wire.h"
#include "plan/plan.h"
#include "stats/hist.h"

#define POLL_NS       (20 * SQ_NS_PER_MS)
#define DISCOVER_NS   SQ_NS_PER_S
#define ACCEPT_NS     (15 * SQ_NS_PER_S)
#define LEAD_MIN_NS   (250 * SQ_NS_PER_MS) /* the common start, at least this far ahead */
#define FINAL_WAIT_NS (10 * SQ_NS_PER_S)   /* after a stop or the planned end, for the results */
#define DIAL_NS       (2 * SQ_NS_PER_S)    /* one redial during an outage, at most */
#define REDIAL_MAX_NS (500 * SQ_NS_PER_MS) /* between redials (from 50 ms, doubling) */

enum cstate { C_ASSIGNED, C_ACCEPTED, C_READY, C_RUNNING, C_DONE, C_LOST };

/* One second from one agent: its counts. Its histograms are merged as they come into the
 * agent's totals and into the second's pending merge (struct pend), and not kept: a long run on
 * many agents holds a few bytes per agent-second, not two histograms (190 KB each). */
struct iv {
    bool have;
    struct sq_second s;
    struct sq_msecond *m; /* the plan's metrics of the second (s.nm of them; owned), or NULL */
};

/* A second not yet emitted: every agent's histograms of it, merged as they arrive. */
struct pend {
    struct sq_hist *h, *hu;
};

struct sq_cluster__agent {
    enum cstate st;
    char subject[SQ_CLUSTER__SUBJ];
    int64_t last_seen;
    struct iv *ivs; /* by second - 1 */
    size_t niv;
    uint32_t acked;              /* seconds 1..acked all arrived (the heartbeat's "ack") */
    struct sq_hist *lat, *lat_u; /* every second it sent, merged (its figures if it is lost) */
    struct sq_wire_res final;
    bool have_final;
    struct sq_buf parts; /* a final result in parts */
    uint32_t parts_next, parts_n;
};

/* An agent that answered discovery. */
struct cand {
    char id[40], name[128], host[128], version[32];
    json_t *labels;
    bool used;
};

struct ctl {
    /* the plan's metrics: as many as the agents' seconds carried (at most
     * SQ_PLAN_METRICS_MAX), and the second emit_live is putting together */
    uint32_t nm;
    struct sq_msecond mlive[SQ_PLAN_METRICS_MAX];
    const struct sq_cluster_config *cfg;
    struct sq_cluster_report *rep;
    struct sq_ctlbus *bus;
    const char *prefix;
    char self[SQ_CLUSTER__SUBJ];
    char *err;
    size_t errlen;
    struct cand *cands;
    size_t ncands;
    char refusals[1024];
    uint32_t busy;
    int64_t start_c;   /* the common start, controller clock; 0 before */
    int64_t outage_ns; /* the NATS outage ridden out */
    bool stop_sent;
    uint32_t emitted;  /* live seconds emitted */
    struct pend *pend; /* seconds emitted + 1, + 2, ... */
    size_t npend;
    struct sq_second *pct; /* each emitted second's percentiles (p50_us ... max_us), by second */
    size_t npct;
    int64_t next_hb;
};

static void event(struct ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void event(struct ctl *c, const char *fmt, ...)
{
    if (!c->cfg->on_event)
        return;
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    c->cfg->on_event(c->cfg->event_ud, line);
}

static int fail(struct ctl *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct ctl *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static void send_to(struct ctl *c, const char *subject, const char *reply, json_t *o)
{
    if (sq_cluster__pub_json(c->bus, subject, reply, o) < 0)
        event(c, "could not publish to %s: %s", subject, sq_ctlbus_error(c->bus));
}

static struct sq_cluster_agent *agent_by_id(struct ctl *c, const char *id)
{
    for (uint32_t i = 0; i < c->rep->n; i++)
        if (strcmp(c->rep->agents[i].id, id) == 0)
            return &c->rep->agents[i];
    return NULL;
}

static bool active(const struct sq_cluster_agent *a)
{
    return a->_in->st != C_DONE && a->_in->st != C_LOST;
}

/* Every agent still in the run gets op (stop, release, hb). */
static void to_all(struct ctl *c, const char *op, const char *why)
{
    for (uint32_t i = 0; i < c->rep->n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        if (!active(a))
            continue;
        json_t *o = json_pack("{s:s, s:s}", "op", op, "run", c->rep->run);
        if (o && why)
            json_object_set_new(o, "why", json_string(why));
        send_to(c, a->_in->subject, NULL, o);
    }
}

/* A heartbeat to every agent still in the run, with what arrived of its seconds. */
static void send_hb(struct ctl *c)
{
    for (uint32_t i = 0; i < c->rep->n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        if (active(a))
            send_to(c, a->_in->subject, NULL,
                    json_pack("{s:s, s:s, s:I}", "op", "hb", "run", c->rep->run, "ack",
                              (json_int_t)a->_in->acked));
    }
}

/* ---- messages ---- */

static void on_time(struct ctl *c, const json_t *o, const char *reply)
{
    if (!reply[0])
        return;
    json_t *n = json_object_get(o, "n");
    send_to(c, reply, NULL,
            json_pack("{s:s, s:s, s:O, s:I}", "op", "time", "run", c->rep->run, "n",
                      n ? n : json_null(), "t", (json_int_t)sq_now_ns()));
}

static void on_hello(struct ctl *c, const json_t *o)
{
    const char *id = sq_cluster__str(o, "agent");
    if (!sq_cluster__token_ok(id))
        return;
    for (size_t i = 0; i < c->ncands; i++)
        if (strcmp(c->cands[i].id, id) == 0)
            return;
    if (strcmp(sq_cluster__str(o, "state"), "idle") != 0) {
        c->busy++;
        return;
    }
    struct cand *v = realloc(c->cands, (c->ncands + 1) * sizeof(*v));
    if (!v)
        return;
    c->cands = v;
    struct cand *k = &c->cands[c->ncands++];
    memset(k, 0, sizeof(*k));
    snprintf(k->id, sizeof(k->id), "%s", id);
    snprintf(k->name, sizeof(k->name), "%s", sq_cluster__str(o, "name"));
    snprintf(k->host, sizeof(k->host), "%s", sq_cluster__str(o, "host"));
    snprintf(k->version, sizeof(k->version), "%s", sq_cluster__str(o, "version"));
    json_t *l = json_object_get(o, "labels");
    k->labels = json_is_object(l) ? json_deep_copy(l) : json_object();
}

static void on_refuse(struct ctl *c, const json_t *o)
{
    const char *why = sq_cluster__str(o, "why");
    if (strstr(c->refusals, why))
        return;
    size_t l = strlen(c->refusals);
    snprintf(c->refusals + l, sizeof(c->refusals) - l, "%s%s", l ? "; " : "", why);
}

static struct iv *iv_slot(struct sq_cluster__agent *in, uint32_t second)
{
    if (second == 0 || second > 100000000)
        return NULL;
    if (second > in->niv) {
        size_t n = in->niv ? in->niv : 64;
        while (n < second)
            n *= 2;
        struct iv *v = realloc(in->ivs, n * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + in->niv, 0, (n - in->niv) * sizeof(*v));
        in->ivs = v;
        in->niv = n;
    }
    return &in->ivs[second - 1];
}

/* The pending merge of second `second` (> emitted), created as needed. */
static struct pend *pend_at(struct ctl *c, uint32_t second)
{
    size_t k = second - c->emitted - 1;
    if (k >= 100000)
        return NULL;
    if (k >= c->npend) {
        struct pend *v = realloc(c->pend, (k + 1) * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + c->npend, 0, (k + 1 - c->npend) * sizeof(*v));
        c->pend = v;
        c->npend = k + 1;
    }
    struct pend *p = &c->pend[k];
    if ((!p->h && sq_latency_hist_new(&p->h) < 0) || (!p->hu && sq_latency_hist_new(&p->hu) < 0))
        return NULL;
    return p;
}

static void on_iv(struct ctl *c, struct sq_cluster_agent *a, const json_t *o)
{
    json_t *n = json_object_get(o, "n");
    if (!json_is_integer(n) || json_integer_value(n) < 1)
        return;
    uint32_t second = (uint32_t)json_integer_value(n);
    struct iv *slot = iv_slot(a->_in, second);
    if (!slot || slot->have)
        return;
    char err[128];
    struct sq_hist *h = NULL, *hu = NULL;
    if (sq_wire_second_read(o, &slot->s, &h, &hu, err, sizeof(err)) < 0) {
        event(c, "agent %s: %s", a->name, err);
        return;
    }
    struct sq_msecond *m;
    uint32_t nm;
    if (sq_wire_msecond_read(o, &m, &nm) < 0) {
        event(c, "agent %s: a second's metrics are malformed", a->name);
        sq_hist_free(h);
        sq_hist_free(hu);
        return;
    }
    slot->m = m;
    slot->s.m = m;
    slot->s.nm = nm;
    if (nm > c->nm)
        c->nm = nm;
    slot->have = true;
    a->seconds++;
    struct sq_cluster__agent *in = a->_in;
    while (in->acked < in->niv && in->ivs[in->acked].have)
        in->acked++;
    if ((h && !in->lat && sq_latency_hist_new(&in->lat) < 0) ||
        (hu && !in->lat_u && sq_latency_hist_new(&in->lat_u) < 0))
        goto out;
    if (h)
        sq_hist_merge(in->lat, h);
    if (hu)
        sq_hist_merge(in->lat_u, hu);
    /* A second already emitted (an agent that came late): its counts still reach the series at
     * the end; its latencies reach the totals but not that second's percentiles. */
    struct pend *p = second > c->emitted ? pend_at(c, second) : NULL;
    if (p && h)
        sq_hist_merge(p->h, h);
    if (p && hu)
        sq_hist_merge(p->hu, hu);
out:
    sq_hist_free(h);
    sq_hist_free(hu);
}

static void on_final(struct ctl *c, struct sq_cluster_agent *a, const json_t *o)
{
    struct sq_cluster__agent *in = a->_in;
    /* the agent keeps its result until it hears this (again, if the first was lost) */
    send_to(c, in->subject, NULL, json_pack("{s:s, s:s}", "op", "got", "run", c->rep->run));
    if (in->have_final || in->st == C_LOST)
        return;
    const char *error = sq_cluster__str(o, "error");
    json_t *r = json_object_get(o, "result");
    char err[200];
    if (error[0] || !r) {
        snprintf(a->error, sizeof(a->error), "%s", error[0] ? error : "no result");
    } else if (sq_wire_result_read(r, &in->final, err, sizeof(err)) < 0) {
        snprintf(a->error, sizeof(a->error), "%s", err);
        sq_wire_res_dispose(&in->final);
    } else {
        in->have_final = true;
        a->series = (uint32_t)in->final.r.series.n;
        json_t *v = json_object_get(o, "setup_ns");
        if (json_is_integer(v))
            a->setup_ns = (int64_t)json_integer_value(v);
        v = json_object_get(o, "start_late_ns");
        if (json_is_integer(v))
            a->start_late_ns = (int64_t)json_integer_value(v);
    }
    if (in->have_final && in->st < C_RUNNING && in->final.r.aborted && !a->error[0])
        snprintf(a->error, sizeof(a->error), "could not start: %.280s", in->final.r.abort_reason);
    a->finished = in->have_final;
    in->st = C_DONE;
    if (a->error[0])
        event(c, "agent %s: %s", a->name, a->error);
}

static void dispatch(struct ctl *c, const struct sq_ctlbus_msg *m);

/* A final result in parts: collected in order, dispatched once whole. */
static void on_part(struct ctl *c, const struct sq_ctlbus_msg *m)
{
    char run[40], id[40];
    uint32_t i, n;
    const char *body;
    size_t blen;
    if (sq_cluster__part(m->data, m->len, run, id, &i, &n, &body, &blen) != 1 ||
        strcmp(run, c->rep->run) != 0)
        return;
    struct sq_cluster_agent *a = agent_by_id(c, id);
    if (!a)
        return;
    struct sq_cluster__agent *in = a->_in;
    if (i == 0) {
        in->parts.len = 0;
        in->parts_next = 0;
        in->parts_n = n;
    }
    if (i != in->parts_next || n != in->parts_n || sq_buf_append(&in->parts, body, blen) < 0)
        return;
    in->parts_next++;
    if (in->parts_next == n) {
        char noreply[1] = "";
        struct sq_ctlbus_msg whole = {
            .subject = m->subject, .reply = noreply, .data = in->parts.p, .len = in->parts.len};
        dispatch(c, &whole);
        in->parts.len = 0;
    }
}

static void dispatch(struct ctl *c, const struct sq_ctlbus_msg *m)
{
    if (m->len > 7 && memcmp(m->data, "SQPART ", 7) == 0) {
        on_part(c, m);
        return;
    }
    json_t *o = json_loadb(m->data, m->len, 0, NULL);
    if (!o)
        return;
    const char *op = sq_cluster__str(o, "op");
    const char *run = sq_cluster__str(o, "run");
    if (strcmp(op, "hello") == 0) {
        on_hello(c, o);
    } else if (strcmp(op, "refuse") == 0 &&
               (!run[0] || strcmp(run, c->rep->run) == 0 || !json_object_get(o, "run"))) {
        struct sq_cluster_agent *a = agent_by_id(c, sq_cluster__str(o, "agent"));
        if (a && a->_in->st == C_ASSIGNED) {
            snprintf(a->error, sizeof(a->error), "%s", sq_cluster__str(o, "why"));
            a->_in->st = C_DONE;
        } else {
            on_refuse(c, o);
        }
    } else if (strcmp(run, c->rep->run) == 0) {
        struct sq_cluster_agent *a = agent_by_id(c, sq_cluster__str(o, "agent"));
        if (strcmp(op, "time") == 0) {
            on_time(c, o, m->reply);
        } else if (a && a->_in->st != C_LOST) {
            a->_in->last_seen = sq_now_ns();
            if (strcmp(op, "accept") == 0 && a->_in->st == C_ASSIGNED) {
                a->_in->st = C_ACCEPTED;
            } else if (strcmp(op, "ready") == 0 && a->_in->st == C_ACCEPTED) {
                json_t *v;
                if (json_is_integer(v = json_object_get(o, "offset_ns")))
                    a->clock.offset_ns = (int64_t)json_integer_value(v);
                if (json_is_integer(v = json_object_get(o, "uncertainty_ns")))
                    a->clock.uncertainty_ns = (int64_t)json_integer_value(v);
                if (json_is_integer(v = json_object_get(o, "rtt_ns")))
                    a->clock.rtt_ns = (int64_t)json_integer_value(v);
                if (json_is_integer(v = json_object_get(o, "samples")))
                    a->clock.samples = (uint32_t)json_integer_value(v);
                a->_in->st = C_READY;
            } else if (strcmp(op, "iv") == 0) {
                on_iv(c, a, o);
            } else if (strcmp(op, "final") == 0) {
                on_final(c, a, o);
            }
        }
    }
    json_decref(o);
}

/* Reads messages for up to wait_ns. Returns 0, or < 0 when the connection is gone. */
static int pump(struct ctl *c, int64_t wait_ns)
{
    int64_t deadline = sq_now_ns() + wait_ns;
    for (;;) {
        int64_t left = deadline - sq_now_ns();
        struct sq_ctlbus_msg m;
        int rc = sq_ctlbus_next(c->bus, left > 0 ? left : 0, &m);
        if (rc <= 0)
            return rc;
        dispatch(c, &m);
        sq_ctlbus_msg_dispose(&m);
    }
}

/* ---- the live seconds ---- */

/* d[0, nm) += s's metrics (the sums; the latest sample the later one). */
static void add_msecond(struct sq_msecond *d, uint32_t nm, const struct sq_second *s)
{
    for (uint32_t i = 0; s->m && i < nm && i < s->nm; i++) {
        d[i].n += s->m[i].n;
        d[i].nonzero += s->m[i].nonzero;
        d[i].sum += s->m[i].sum;
        if (s->m[i].last_ns > d[i].last_ns) {
            d[i].last = s->m[i].last;
            d[i].last_ns = s->m[i].last_ns;
        }
    }
}

static void add_second(struct sq_second *d, const struct sq_second *s)
{
    if (s->t_s > d->t_s)
        d->t_s = s->t_s;
    if (s->len_s > d->len_s)
        d->len_s = s->len_s;
    d->sent += s->sent;
    d->completed += s->completed;
    d->failed += s->failed;
    d->dropped += s->dropped;
    d->errors += s->errors;
    d->bytes_received += s->bytes_received;
    d->bytes_sent += s->bytes_sent;
    d->iterations += s->iterations;
    d->checks_passed += s->checks_passed;
    d->checks_failed += s->checks_failed;
    d->http_failed += s->http_failed;
    d->active += s->active;
    for (size_t i = 0; i < SQ_ARRAY_LEN(d->status); i++)
        d->status[i] += s->status[i];
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        d->errk[k] += s->errk[k];
}

static void percentiles(struct sq_second *e, const struct sq_hist *h)
{
    e->p50_us = e->p90_us = e->p99_us = e->max_us = 0;
    if (sq_hist_total(h)) {
        e->p50_us = sq_hist_percentile(h, 50);
        e->p90_us = sq_hist_percentile(h, 90);
        e->p99_us = sq_hist_percentile(h, 99);
        e->max_us = sq_hist_max(h);
    }
}

/* Emits each second every running agent has sent: progress and abortOnFail see the whole. */
static void emit_live(struct ctl *c)
{
    for (;;) {
        uint32_t s = c->emitted + 1;
        bool any = false;
        for (uint32_t i = 0; i < c->rep->n; i++) {
            struct sq_cluster__agent *in = c->rep->agents[i]._in;
            bool have = s <= in->niv && in->ivs[s - 1].have;
            if (!have && (in->st == C_RUNNING || in->st == C_READY))
                return; /* still inside this second */
            any |= have;
        }
        if (!any)
            return;
        struct sq_second e = {0};
        if (c->nm) { /* a gauge's value stays the latest so far in a second without a sample */
            for (uint32_t k = 0; k < c->nm; k++)
                c->mlive[k] =
                    (struct sq_msecond){.last = c->mlive[k].last, .last_ns = c->mlive[k].last_ns};
            e.m = c->mlive;
            e.nm = c->nm;
        }
        for (uint32_t i = 0; i < c->rep->n; i++) {
            struct sq_cluster__agent *in = c->rep->agents[i]._in;
            if (s <= in->niv && in->ivs[s - 1].have) {
                add_second(&e, &in->ivs[s - 1].s);
                add_msecond(c->mlive, c->nm, &in->ivs[s - 1].s);
            }
        }
        struct pend *p = pend_at(c, s);
        if (!p)
            return; /* out of memory: try again at the next message */
        percentiles(&e, p->h);
        if (s > c->npct) {
            size_t n = c->npct ? c->npct * 2 : 64;
            struct sq_second *v = realloc(c->pct, n * sizeof(*v));
            if (!v)
                return;
            c->pct = v;
            c->npct = n;
        }
        c->pct[s - 1] = e;
        c->pct[s - 1].m = NULL; /* the live figures are reused: merge_series sums its own */
        c->pct[s - 1].nm = 0;
        c->emitted = s;
        if (c->cfg->on_tick)
            c->cfg->on_tick(c->cfg->tick_ud, &e, p->h, c->cfg->open ? p->hu : NULL);
        /* the next second moves to the front; this one's histograms are reused */
        struct pend done = c->pend[0];
        memmove(c->pend, c->pend + 1, (c->npend - 1) * sizeof(*c->pend));
        sq_hist_reset(done.h);
        sq_hist_reset(done.hu);
        c->pend[c->npend - 1] = done;
    }
}

/* ---- phases ---- */

static int discover(struct ctl *c)
{
    int64_t deadline = sq_now_ns() + (c->cfg->wait_ns > 0 ? c->cfg->wait_ns : 10 * SQ_NS_PER_S);
    int64_t next = 0;
    char disc[SQ_CLUSTER__SUBJ];
    snprintf(disc, sizeof(disc), "%s.discover", c->prefix);
    while (c->ncands < c->cfg->agents) {
        int64_t now = sq_now_ns();
        if (c->cfg->stop && *c->cfg->stop)
            return fail(c, -EINTR, "stopped while looking for agents");
        if (now >= deadline) {
            char secs[32];
            snprintf(secs, sizeof(secs), "%.0fs", (double)c->cfg->wait_ns / 1e9);
            return fail(c, -ETIMEDOUT, "found %zu of %u idle agents within %s on %s%s%s%s%s",
                        c->ncands, c->cfg->agents, c->cfg->wait_ns > 0 ? secs : "10s",
                        c->cfg->nats_url, c->busy ? " (others were busy)" : "",
                        c->refusals[0] ? "; refused: " : "", c->refusals,
                        c->ncands || c->refusals[0] || c->busy
                            ? ""
                            : "; start agents with `squall agent --nats URL`");
        }
        if (now >= next) {
            send_to(c, disc, c->self,
                    json_pack("{s:s, s:s, s:i, s:s}", "op", "discover", "run", c->rep->run, "proto",
                              SQ_CLUSTER_PROTO, "version", SQ_VERSION));
            next = now + DISCOVER_NS;
        }
        int rc = pump(c, POLL_NS);
        if (rc < 0)
            return fail(c, rc, "NATS: %s", sq_ctlbus_error(c->bus));
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    const struct cand *x = *(const struct cand *const *)a, *y = *(const struct cand *const *)b;
    int r = strcmp(x->name, y->name);
    return r ? r : strcmp(x->id, y->id);
}

/* Takes the first N candidates, in name order (the segment order). */
static int choose(struct ctl *c)
{
    uint32_t n = c->cfg->agents;
    const struct cand **pick = calloc(n, sizeof(*pick));
    c->rep->agents = calloc(n, sizeof(*c->rep->agents));
    struct sq_cluster__agent *ins = calloc(n, sizeof(*ins));
    if (!pick || !c->rep->agents || !ins) {
        free(pick);
        free(ins);
        return fail(c, -ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++)
        pick[i] = &c->cands[i];
    qsort(pick, n, sizeof(*pick), by_name);
    c->rep->n = n;
    for (uint32_t i = 0; i < n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        const struct cand *k = pick[i];
        a->_in = &ins[i];
        snprintf(a->id, sizeof(a->id), "%s", k->id);
        snprintf(a->name, sizeof(a->name), "%s", k->name);
        snprintf(a->host, sizeof(a->host), "%s", k->host);
        snprintf(a->version, sizeof(a->version), "%s", k->version);
        a->labels = json_incref(k->labels);
        snprintf(a->_in->subject, sizeof(a->_in->subject), "%s.agent.%s", c->prefix, k->id);
    }
    free(pick);
    return 0;
}

static int assign(struct ctl *c)
{
    struct sq_rat even[SQ_SEG_MAX_PARTS + 1];
    const struct sq_rat *pt = c->cfg->sequence;
    uint32_t n = c->rep->n;
    if (!pt) {
        sq_seg_even(even, n);
        pt = even;
    }
    char seq[4096] = "";
    size_t l = 0;
    for (uint32_t i = 0; i <= n && l < sizeof(seq) - 48; i++) {
        char r[48];
        sq_rat_format(pt[i], r, sizeof(r));
        l += (size_t)snprintf(seq + l, sizeof(seq) - l, "%s%s", i ? "," : "", r);
    }
    json_error_t je;
    json_t *job = json_loads(c->cfg->job, 0, &je);
    if (!job)
        return fail(c, -EINVAL, "the job is not JSON: %s", je.text);
    int64_t now = sq_now_ns();
    for (uint32_t i = 0; i < n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        a->from = pt[i];
        a->to = pt[i + 1];
        a->_in->last_seen = now;
        send_to(c, a->_in->subject, c->self,
                json_pack("{s:s, s:s, s:i, s:s, s:i, s:i, s:s, s:I, s:O}", "op", "assign", "run",
                          c->rep->run, "proto", SQ_CLUSTER_PROTO, "version", SQ_VERSION, "index",
                          (int)i, "count", (int)n, "sequence", seq, "outage_ns",
                          (json_int_t)c->outage_ns, "job", job));
    }
    json_decref(job);
    return 0;
}

/* Waits until every agent is in state want (or further), within timeout. */
static int wait_all(struct ctl *c, enum cstate want, int64_t timeout, const char *what)
{
    int64_t deadline = sq_now_ns() + timeout;
    for (;;) {
        uint32_t got = 0;
        for (uint32_t i = 0; i < c->rep->n; i++) {
            struct sq_cluster_agent *a = &c->rep->agents[i];
            if (a->_in->st == C_DONE || a->_in->st == C_LOST)
                return fail(c, -ECANCELED, "agent %s: %s", a->name,
                            a->error[0] ? a->error : "it left before the start");
            got += a->_in->st >= want;
        }
        if (got == c->rep->n)
            return 0;
        int64_t now = sq_now_ns();
        if (c->cfg->stop && *c->cfg->stop)
            return fail(c, -EINTR, "stopped before the start");
        for (uint32_t i = 0; i < c->rep->n; i++) {
            struct sq_cluster_agent *a = &c->rep->agents[i];
            if (a->_in->st < want && now - a->_in->last_seen > SQ_CLUSTER_LOSS_NS + ACCEPT_NS)
                return fail(c, -ETIMEDOUT, "agent %s did not %s", a->name, what);
        }
        if (now >= deadline) {
            for (uint32_t i = 0; i < c->rep->n; i++)
                if (c->rep->agents[i]._in->st < want)
                    return fail(c, -ETIMEDOUT, "agent %s did not %s within %.0fs",
                                c->rep->agents[i].name, what, (double)timeout / 1e9);
        }
        if (now >= c->next_hb) {
            send_hb(c);
            c->next_hb = now + SQ_CLUSTER_HB_NS;
        }
        int rc = pump(c, POLL_NS);
        if (rc < 0)
            return fail(c, rc, "NATS: %s", sq_ctlbus_error(c->bus));
    }
}

static void start(struct ctl *c)
{
    int64_t rtt = 0;
    for (uint32_t i = 0; i < c->rep->n; i++)
        if (c->rep->agents[i].clock.rtt_ns > rtt)
            rtt = c->rep->agents[i].clock.rtt_ns;
    int64_t lead = LEAD_MIN_NS + 4 * rtt;
    c->start_c = sq_now_ns() + lead;
    for (uint32_t i = 0; i < c->rep->n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        send_to(c, a->_in->subject, NULL,
                json_pack("{s:s, s:s, s:I}", "op", "start", "run", c->rep->run, "at_ns",
                          (json_int_t)c->start_c));
        a->_in->st = C_RUNNING;
    }
    double lo = 0, hi = 0;
    for (uint32_t i = 0; i < c->rep->n; i++) {
        double u = (double)c->rep->agents[i].clock.uncertainty_ns / 1e6;
        hi = u > hi ? u : hi;
        lo = i == 0 || u < lo ? u : lo;
    }
    event(c, "run %s: %u agents start in %.0f ms (clock offsets known to within %.3f ms)",
          c->rep->run, c->rep->n, (double)lead / 1e6, hi);
}

/* Marks an agent lost: its data up to its last word stays. */
static void lose(struct ctl *c, struct sq_cluster_agent *a, int64_t now)
{
    a->_in->st = C_LOST;
    a->lost = true;
    a->lost_at_s = (double)(a->_in->last_seen - c->start_c) / 1e9;
    if (a->lost_at_s < 0)
        a->lost_at_s = 0;
    c->rep->lost++;
    event(c, "agent %s lost at %.1f s (silent for %.1f s); its share is missing from %.0f s on",
          a->name, a->lost_at_s, (double)(now - a->_in->last_seen) / 1e9,
          (double)(uint64_t)a->lost_at_s);
}

/* Marks silent agents lost (every agent still running, with force: its result never came).
 * Before a silence counts, the server must answer a PING: when it does not, the silence is the
 * broker's (-EPIPE: the caller rides out the outage), not the agents'. */
static int check_loss(struct ctl *c, int64_t now, bool force)
{
    bool due = false;
    for (uint32_t i = 0; i < c->rep->n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        due |= active(a) && (force || now - a->_in->last_seen > SQ_CLUSTER_LOSS_NS);
    }
    if (!due)
        return 0;
    if (!force && sq_ctlbus_sync(c->bus, SQ_NS_PER_S) < 0)
        return -EPIPE;
    for (uint32_t i = 0; i < c->rep->n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        if (active(a) && (force || now - a->_in->last_seen > SQ_CLUSTER_LOSS_NS))
            lose(c, a, now);
    }
    return 0;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / SQ_NS_PER_S, .tv_nsec = ns % SQ_NS_PER_S};
    nanosleep(&ts, NULL);
}

/* The connection to NATS is gone: redials it for up to the outage window. Returns 0 once it is
 * back (*down_ns: how long it was away), or -ETIMEDOUT when the controller gives up (the window
 * passed, or a stop came meanwhile): every agent still running is then lost, and rep says why
 * the result is incomplete. */
static int ride_out(struct ctl *c, int64_t *down_ns)
{
    int64_t t0 = sq_now_ns(), wait = 50 * SQ_NS_PER_MS;
    double at = (double)(t0 - c->start_c) / 1e9;
    event(c, "NATS connection lost at %.1f s (%s); reconnecting for up to %g s", at,
          sq_ctlbus_error(c->bus)[0] ? sq_ctlbus_error(c->bus) : "no answer",
          (double)c->outage_ns / 1e9);
    char why[512] = "";
    bool stopped = false;
    for (;;) {
        int64_t now = sq_now_ns();
        if (c->cfg->stop && *c->cfg->stop) {
            stopped = true;
            break;
        }
        int64_t left = t0 + c->outage_ns - now;
        if (left <= 0)
            break;
        if (sq_ctlbus_reconnect(c->bus, left < DIAL_NS ? left : DIAL_NS, why, sizeof(why)) == 0) {
            now = sq_now_ns();
            *down_ns = now - t0;
            c->rep->nats_outages++;
            c->rep->nats_down_s += (double)*down_ns / 1e9;
            /* the agents were cut off too: each has LOSS_NS from now to be heard again */
            for (uint32_t i = 0; i < c->rep->n; i++)
                if (c->rep->agents[i]._in->last_seen < now)
                    c->rep->agents[i]._in->last_seen = now;
            event(c, "NATS is back after %.1f s; the agents resend what it missed",
                  (double)*down_ns / 1e9);
            send_hb(c);
            c->next_hb = now + SQ_CLUSTER_HB_NS;
            return 0;
        }
        left = t0 + c->outage_ns - sq_now_ns();
        sleep_ns(left < wait ? (left > 0 ? left : 0) : wait);
        wait = wait * 2 > REDIAL_MAX_NS ? REDIAL_MAX_NS : wait * 2;
    }
    int64_t now = sq_now_ns();
    c->rep->nats_gave_up = true;
    c->rep->nats_down_s += (double)(now - t0) / 1e9;
    char who[320] = "";
    size_t l = 0;
    for (uint32_t i = 0; i < c->rep->n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        if (!active(a))
            continue;
        if (l < sizeof(who))
            l += (size_t)snprintf(who + l, sizeof(who) - l, "%s%s", l ? ", " : "", a->name);
        lose(c, a, now);
    }
    if (stopped)
        snprintf(c->rep->incomplete, sizeof(c->rep->incomplete),
                 "stopped while NATS was unreachable (from %.1f s on): what the agents measured "
                 "after that never arrived%s%s",
                 at, who[0] ? "; no result from " : "", who);
    else
        snprintf(c->rep->incomplete, sizeof(c->rep->incomplete),
                 "NATS was unreachable from %.1f s on, for longer than the %g s outage window "
                 "(--nats-outage; last error: %.200s): what the agents measured after that never "
                 "arrived%s%s",
                 at, (double)c->outage_ns / 1e9, why[0] ? why : sq_ctlbus_error(c->bus),
                 who[0] ? "; no result from " : "", who);
    event(c, "giving up on NATS after %.1f s; the result has what arrived",
          (double)(now - t0) / 1e9);
    return -ETIMEDOUT;
}

static int run(struct ctl *c)
{
    int64_t end = c->start_c + c->cfg->length_ns + FINAL_WAIT_NS;
    int64_t stop_at = 0;
    for (;;) {
        int64_t now = sq_now_ns();
        bool any = false;
        for (uint32_t i = 0; i < c->rep->n; i++)
            any |= active(&c->rep->agents[i]);
        emit_live(c);
        if (!any)
            return 0;
        if (c->cfg->stop && *c->cfg->stop && !c->stop_sent) {
            to_all(c, "stop", "the controller was stopped");
            c->stop_sent = true;
            stop_at = now;
            event(c, "run %s: stopping every agent", c->rep->run);
        }
        if (now >= end && !c->stop_sent) {
            to_all(c, "stop", "past the run's planned end");
            c->stop_sent = true;
            stop_at = now;
        }
        /* stopped, and still no result: what came from them is all there will be */
        int rc = check_loss(c, now, c->stop_sent && now - stop_at > FINAL_WAIT_NS);
        if (rc == 0 && now >= c->next_hb) {
            send_hb(c);
            c->next_hb = now + SQ_CLUSTER_HB_NS;
        }
        if (rc == 0)
            rc = pump(c, POLL_NS);
        if (rc < 0) {
            int64_t down = 0;
            if (ride_out(c, &down) < 0)
                return 0; /* the result is what arrived, marked incomplete */
            end += down;  /* the agents' results come that much later */
            if (stop_at)
                stop_at += down;
        }
    }
}

/* ---- the merge ---- */

/* A lost agent's figures: what its seconds carried, up to its loss. */
static int lost_result(struct sq_cluster_agent *a)
{
    struct sq_cluster__agent *in = a->_in;
    struct sq_result *r = &a->res;
    int rc = sq_latency_hist_new(&r->latency);
    if (rc < 0)
        return rc;
    for (size_t s = 0; s < in->niv; s++) {
        const struct iv *v = &in->ivs[s];
        if (!v->have)
            continue;
        r->c.sent += v->s.sent;
        r->c.completed += v->s.completed;
        r->c.failed += v->s.failed;
        r->c.dropped += v->s.dropped;
        r->c.bytes_received += v->s.bytes_received;
        r->c.bytes_sent += v->s.bytes_sent;
        r->c.iterations += v->s.iterations;
        r->c.checks_passed += v->s.checks_passed;
        r->c.checks_failed += v->s.checks_failed;
        r->c.http_failed += v->s.http_failed;
        for (size_t i = 0; i < SQ_ARRAY_LEN(r->c.status); i++)
            r->c.status[i] += v->s.status[i];
        for (int k = 0; k < SQ_ERRK_COUNT; k++)
            r->c.errors[k] += v->s.errk[k];
        int64_t d = (int64_t)(v->s.t_s * 1e9);
        if (d > r->duration_ns)
            r->duration_ns = d;
    }
    if (in->lat)
        sq_hist_merge(r->latency, in->lat);
    if (in->lat_u) {
        if ((rc = sq_latency_hist_new(&r->latency_uncorrected)) < 0)
            return rc;
        sq_hist_merge(r->latency_uncorrected, in->lat_u);
        r->open = true;
    }
    r->in_flight = r->c.sent - r->c.completed - r->c.failed;
    if (r->open)
        r->arrivals = r->c.sent + r->c.dropped;
    /* Its run did not end, but the merged run is not stopped by it: the others go on (the
     * report and the document's cluster block say it was lost). */
    return 0;
}

/* The series: second by second, the counts of the agents whose result came (their final series,
 * complete; a lost agent's seconds are not merged, as in the totals) and the percentiles of that
 * second's merged histograms (emit_live: those took a lost agent's seconds up to its loss, as
 * the live view showed them; no histogram per agent and second is kept to take them out). */
static int merge_series(struct ctl *c, struct sq_result *out)
{
    size_t n = 0;
    for (uint32_t i = 0; i < c->rep->n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        size_t k = a->_in->have_final ? a->_in->final.r.series.n : 0;
        for (size_t s = 0; c->rep->totals_last_known && s < a->_in->niv; s++)
            if (a->_in->ivs[s].have && s + 1 > k)
                k = s + 1;
        if (k > n)
            n = k;
    }
    if (!n)
        return 0;
    out->series.v = calloc(n, sizeof(*out->series.v));
    if (!out->series.v)
        return -ENOMEM;
    out->series.n = out->series.cap = n;
    /* the plan's metrics: as many as the agents' results (or seconds) carried */
    uint32_t nm = c->nm;
    for (uint32_t i = 0; i < c->rep->n; i++)
        if (c->rep->agents[i]._in->have_final && c->rep->agents[i]._in->final.r.nmetrics > nm)
            nm = c->rep->agents[i]._in->final.r.nmetrics;
    if (nm) {
        if (!(out->mseries = calloc(n * nm, sizeof(*out->mseries))))
            return -ENOMEM;
        out->nmetrics = nm;
    }
    for (size_t s = 0; s < n; s++) {
        struct sq_second *e = &out->series.v[s];
        struct sq_msecond *me = nm ? &out->mseries[s * nm] : NULL;
        if (me && s > 0) /* a gauge's latest sample so far carries over */
            for (uint32_t k = 0; k < nm; k++) {
                me[k].last = (me - nm)[k].last;
                me[k].last_ns = (me - nm)[k].last_ns;
            }
        for (uint32_t i = 0; i < c->rep->n; i++) {
            struct sq_cluster__agent *in = c->rep->agents[i]._in;
            const struct sq_result *fr = &in->final.r;
            if (in->have_final && s < fr->series.n) {
                add_second(e, &fr->series.v[s]); /* a lost agent's are not merged, */
                if (me && fr->mseries) {
                    struct sq_second fs = {.m = &fr->mseries[s * fr->nmetrics], .nm = fr->nmetrics};
                    add_msecond(me, nm, &fs);
                }
            } else if (c->rep->totals_last_known && s < in->niv && in->ivs[s].have) {
                add_second(e, &in->ivs[s].s); /* unless no agent's result came at all */
                if (me)
                    add_msecond(me, nm, &in->ivs[s].s);
            }
        }
        if (s < c->emitted) {
            e->p50_us = c->pct[s].p50_us;
            e->p90_us = c->pct[s].p90_us;
            e->p99_us = c->pct[s].p99_us;
            e->max_us = c->pct[s].max_us;
        }
    }
    return 0;
}

/* The sampled exchanges: per class, a uniform sample of the union of the finished agents' (each
 * drawn in proportion to what it saw of the class, result/xsample.c). A lost agent sent none. */
static int merge_samples(struct ctl *c, struct sq_result *out)
{
    struct sq_xsamples *in = calloc(c->rep->n ? c->rep->n : 1, sizeof(*in));
    if (!in)
        return -ENOMEM;
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->rep->n; i++)
        if (c->rep->agents[i]._in->have_final)
            in[n++] = c->rep->agents[i]._in->final.r.xsamples; /* its kept ones move to out */
    int rc = sq_xs_merge(in, n, &out->xsamples);
    free(in);
    return rc;
}

/* Why the merged result does not cover the whole run, when it does not: NATS gave out (said
 * already, by ride_out), an agent lost (its share after its last word is missing), an agent
 * whose run failed (its share is missing). */
static void note_incomplete(struct ctl *c)
{
    char *w = c->rep->incomplete;
    size_t cap = sizeof(c->rep->incomplete), l = strlen(w);
    for (uint32_t i = 0; i < c->rep->n && l < cap; i++) {
        const struct sq_cluster_agent *a = &c->rep->agents[i];
        if (a->lost && !c->rep->nats_gave_up)
            l += (size_t)snprintf(w + l, cap - l,
                                  "%sagent %s was lost at %.1f s: its figures are not in the "
                                  "totals (its last known ones: cluster.lost_agents)",
                                  l ? "; " : "", a->name, a->lost_at_s);
        else if (!a->lost && !a->finished && a->error[0])
            l += (size_t)snprintf(w + l, cap - l,
                                  "%sagent %s sent no result (%s): its share is missing",
                                  l ? "; " : "", a->name, a->error);
    }
}

static int merge(struct ctl *c, struct sq_result *out)
{
    note_incomplete(c);
    memset(out, 0, sizeof(*out));
    int rc = sq_latency_hist_new(&out->latency);
    if (rc < 0)
        return fail(c, rc, "out of memory");
    /* No final result at all (NATS gone past the window): what arrived, every lost agent's
     * seconds alike, is the result, rather than an empty one; the figures are then all of one
     * kind (its seconds' counts and latency), over the same agents. */
    bool any_final = false;
    for (uint32_t i = 0; i < c->rep->n; i++)
        any_final = any_final || c->rep->agents[i]._in->have_final;
    c->rep->totals_last_known = !any_final && c->rep->lost > 0;
    for (uint32_t i = 0; i < c->rep->n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        struct sq_cluster__agent *in = a->_in;
        if (in->have_final) {
            /* the agent's own figures stay in the report: a merge of its result into nothing */
            rc = sq_result_merge(&a->res, &in->final.r);
            if (rc == 0)
                rc = sq_result_merge(out, &a->res);
        } else if (a->lost) {
            /* Its last known figures, shown apart (cluster.lost_agents), never in the totals:
             * its seconds carry counts and latency, not its status codes, connections or
             * threads, so a merge of them would leave every other figure over fewer agents than
             * the counts (253,237 completed beside `Status 200 191,966`). */
            rc = lost_result(a);
            if (rc == 0 && c->rep->totals_last_known)
                rc = sq_result_merge(out, &a->res);
        } else {
            continue; /* refused or failed before it ran: it has no figures */
        }
        if (rc < 0)
            return fail(c, rc, "merging agent %s's result: %s", a->name, sq_strerror(rc));
    }
    rc = merge_series(c, out);
    if (rc == 0)
        rc = merge_samples(c, out);
    if (rc < 0)
        return fail(c, rc, "out of memory");
    double lo = 0, hi = 0;
    bool first = true;
    for (uint32_t i = 0; i < c->rep->n; i++) {
        struct sq_cluster_agent *a = &c->rep->agents[i];
        if (!a->finished)
            continue;
        double late = (double)a->start_late_ns / 1e6;
        lo = first || late < lo ? late : lo;
        hi = first || late > hi ? late : hi;
        first = false;
    }
    c->rep->start_spread_ms = hi - lo;
    return 0;
}

static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

int sq_cluster_run(const struct sq_cluster_config *cfg, struct sq_result *out,
                   struct sq_cluster_report *rep, char *err, size_t len)
{
    memset(rep, 0, sizeof(*rep));
    memset(out, 0, sizeof(*out));
    struct ctl c = {.cfg = cfg, .rep = rep, .err = err, .errlen = len};
    c.outage_ns = cfg->outage_ns > 0 ? cfg->outage_ns : SQ_CLUSTER_OUTAGE_NS;
    c.prefix = cfg->prefix ? cfg->prefix : SQ_CLUSTER_PREFIX;
    err[0] = '\0';
    if (cfg->agents == 0 || cfg->agents > SQ_SEG_MAX_PARTS)
        return fail(&c, -EINVAL, "--agents: between 1 and %d", SQ_SEG_MAX_PARTS);
    sq_cluster__rand_id(rep->run);
    snprintf(c.self, sizeof(c.self), "%s.ctl.%s", c.prefix, rep->run);
    int rc;
    char cname[64];
    snprintf(cname, sizeof(cname), "squall-controller %s", rep->run);
    rc = sq_ctlbus_connect(cfg->nats_url, cname, &cfg->nats_tls, cfg->nats_tls_first,
                           5 * SQ_NS_PER_S, &c.bus, err, len);
    if (rc < 0)
        goto out;
    rc = sq_ctlbus_sub(c.bus, c.self, NULL);
    if (rc == 0)
        rc = sq_ctlbus_sync(c.bus, 5 * SQ_NS_PER_S);
    if (rc < 0) {
        fail(&c, rc, "NATS: %s", sq_ctlbus_error(c.bus));
        goto out;
    }
    double cpu0 = cpu_now();
    int64_t t0 = sq_now_ns();
    rc = discover(&c);
    if (rc == 0)
        rc = choose(&c);
    if (rc == 0)
        rc = assign(&c);
    if (rc == 0)
        rc = wait_all(&c, C_ACCEPTED, ACCEPT_NS, "accept the job");
    if (rc == 0)
        rc = wait_all(&c, C_READY,
                      cfg->setup_timeout_ns > 0 ? cfg->setup_timeout_ns : 60 * SQ_NS_PER_S,
                      "open its connections");
    if (rc < 0) {
        to_all(&c, "release", err);
        goto out;
    }
    start(&c);
    rc = run(&c);
    if (rc == 0)
        rc = merge(&c, out);
    rep->cpu_s = cpu_now() - cpu0;
    rep->run_s = (double)(sq_now_ns() - t0) / 1e9;
out:
    if (c.bus) {
        sq_ctlbus_counts(c.bus, &rep->bytes_out, &rep->bytes_in, &rep->msgs_out, &rep->msgs_in);
        sq_ctlbus_close(c.bus);
    }
    for (size_t i = 0; i < c.ncands; i++)
        json_decref(c.cands[i].labels);
    free(c.cands);
    for (size_t i = 0; i < c.npend; i++) {
        sq_hist_free(c.pend[i].h);
        sq_hist_free(c.pend[i].hu);
    }
    free(c.pend);
    free(c.pct);
    if (rc < 0)
        sq_result_dispose(out);
    return rc;
}

void sq_cluster_report_dispose(struct sq_cluster_report *rep)
{
    for (uint32_t i = 0; i < rep->n; i++) {
        struct sq_cluster_agent *a = &rep->agents[i];
        struct sq_cluster__agent *in = a->_in;
        json_decref(a->labels);
        sq_result_dispose(&a->res);
        if (!in)
            continue;
        for (size_t s = 0; in->ivs && s < in->niv; s++)
            free(in->ivs[s].m);
        free(in->ivs);
        sq_hist_free(in->lat);
        sq_hist_free(in->lat_u);
        free(in->parts.p);
        sq_wire_res_dispose(&in->final);
    }
    if (rep->n)
        free(rep->agents[0]._in);
    free(rep->agents);
    memset(rep, 0, sizeof(*rep));
}

/* A JSON string of text cut by snprintf, perhaps inside a UTF-8 sequence: the cut one goes. */
static json_t *cut_string(const char *text)
{
    size_t n = strlen(text);
    json_t *j = json_stringn(text, n);
    for (int k = 0; !j && k < 4 && n > 0; k++)
        j = json_stringn(text, --n);
    return j ? j : json_string("?");
}

/* A lost agent's last known figures (its seconds up to its loss), apart from the totals. */
static json_t *lost_agent_json(const struct sq_cluster_agent *a)
{
    const struct sq_result *r = &a->res;
    json_t *errors = json_object();
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        if (r->c.errors[k])
            json_object_set_new(errors, sq_errk_name((enum sq_errk)k),
                                json_integer((json_int_t)r->c.errors[k]));
    int64_t n = r->latency ? sq_hist_total(r->latency) : 0;
    return json_pack(
        "{s:s, s:f, s:i, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:I}, "
        "s:o, s:{s:I, s:I, s:I, s:I}}",
        "name", a->name, "lost_at_s", a->lost_at_s, "seconds", (int)a->seconds, "requests", "sent",
        (json_int_t)r->c.sent, "completed", (json_int_t)r->c.completed, "failed",
        (json_int_t)r->c.failed, "dropped", (json_int_t)r->c.dropped, "in_flight",
        (json_int_t)r->in_flight, "arrivals", (json_int_t)r->arrivals, "status", "1xx",
        (json_int_t)r->c.status[1], "2xx", (json_int_t)r->c.status[2], "3xx",
        (json_int_t)r->c.status[3], "4xx", (json_int_t)r->c.status[4], "5xx",
        (json_int_t)r->c.status[5], "other", (json_int_t)r->c.status[0], "errors", errors,
        "latency", "count", (json_int_t)n, "p50_us",
        (json_int_t)(n ? sq_hist_percentile(r->latency, 50) : 0), "p99_us",
        (json_int_t)(n ? sq_hist_percentile(r->latency, 99) : 0), "max_us",
        (json_int_t)(n ? sq_hist_max(r->latency) : 0));
}

json_t *sq_cluster_report_json(const struct sq_cluster_report *rep)
{
    json_t *agents = json_array();
    for (uint32_t i = 0; i < rep->n; i++) {
        const struct sq_cluster_agent *a = &rep->agents[i];
        char from[32], to[32];
        sq_rat_format(a->from, from, sizeof(from));
        sq_rat_format(a->to, to, sizeof(to));
        const struct sq_result *r = &a->res;
        json_t *o = json_pack(
            "{s:s, s:s, s:s, s:s, s:o, s:{s:s, s:s}, s:{s:f, s:f, s:f, s:i}, s:f, s:f, s:b, s:b, "
            "s:o, s:i}",
            "name", a->name, "id", a->id, "host", a->host, "version", a->version, "labels",
            a->labels ? json_incref(a->labels) : json_object(), "segment", "from", from, "to", to,
            "clock", "offset_ms", (double)a->clock.offset_ns / 1e6, "uncertainty_ms",
            (double)a->clock.uncertainty_ns / 1e6, "rtt_ms", (double)a->clock.rtt_ns / 1e6,
            "samples", (int)a->clock.samples, "setup_s", (double)a->setup_ns / 1e9, "start_late_ms",
            (double)a->start_late_ns / 1e6, "finished", a->finished, "lost", a->lost, "lost_at_s",
            a->lost ? json_real(a->lost_at_s) : json_null(), "seconds", (int)a->seconds);
        if (!o)
            continue;
        json_object_set_new(
            o, "requests",
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "sent", (json_int_t)r->c.sent, "completed",
                      (json_int_t)r->c.completed, "failed", (json_int_t)r->c.failed, "dropped",
                      (json_int_t)r->c.dropped, "in_flight", (json_int_t)r->in_flight, "arrivals",
                      (json_int_t)r->arrivals));
        if (r->quic.connections) /* an HTTP/3 run: its own QUIC counts (merged: `quic`) */
            json_object_set_new(o, "quic",
                                json_pack("{s:I, s:I, s:I}", "connections",
                                          (json_int_t)r->quic.connections, "datagrams_sent",
                                          (json_int_t)r->quic.datagrams_sent, "datagrams_received",
                                          (json_int_t)r->quic.datagrams_received));
        json_object_set_new(o, "error", a->error[0] ? cut_string(a->error) : json_null());
        /* its seconds that never came live (they are in its result all the same) */
        json_object_set_new(
            o, "seconds_missing",
            a->finished
                ? json_integer(a->series > a->seconds ? (json_int_t)(a->series - a->seconds) : 0)
                : json_null());
        json_array_append_new(agents, o);
    }
    json_t *merged = json_array(), *lost = json_array();
    for (uint32_t i = 0; i < rep->n; i++) {
        const struct sq_cluster_agent *a = &rep->agents[i];
        if (a->finished || (a->lost && rep->totals_last_known))
            json_array_append_new(merged, json_string(a->name));
        if (!a->finished && a->lost)
            json_array_append_new(lost, lost_agent_json(a));
    }
    json_t *j =
        json_pack("{s:s, s:i, s:i, s:f, s:o, s:o, s:{s:I, s:I, s:I, s:I, s:f, s:f, s:i, s:f}}",
                  "run", rep->run, "agents_asked", (int)rep->n, "lost", (int)rep->lost,
                  "start_spread_ms", rep->start_spread_ms, "incomplete",
                  rep->incomplete[0] ? cut_string(rep->incomplete) : json_null(), "agents", agents,
                  "controller", "bytes_in", (json_int_t)rep->bytes_in, "bytes_out",
                  (json_int_t)rep->bytes_out, "msgs_in", (json_int_t)rep->msgs_in, "msgs_out",
                  (json_int_t)rep->msgs_out, "cpu_s", rep->cpu_s, "run_s", rep->run_s,
                  "nats_outages", (int)rep->nats_outages, "nats_down_s", rep->nats_down_s);
    if (j) {
        json_object_set_new(j, "totals_last_known", json_boolean(rep->totals_last_known));
        json_object_set_new(j, "merged_agents", merged);
        json_object_set_new(j, "lost_agents", lost);
    } else {
        json_decref(merged);
        json_decref(lost);
    }
    return j;
}
