/* engine/control.c - changing a running run (engine/control.h): the controlling thread's side,
 * and the changed arrival schedule the workers read. */
#include "engine/control.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "engine/worker.h"

#define SQ_CTL_LEAD_NS                                                                             \
    (50 * SQ_NS_PER_MS) /* an open loop's change takes effect this much later                      \
                         */

struct sq_run_ctl {
    pthread_mutex_t mu;
    struct sq_engine__shared *run; /* bound while a run goes */
    struct sq_engine__ctlscen *scens;
    uint32_t nscens;
    struct sq_control_event ev[SQ_CTL_MAX_CHANGES];
    uint32_t nev;
};

int sq_run_ctl_new(struct sq_run_ctl **out)
{
    struct sq_run_ctl *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return 0;
}

void sq_run_ctl_free(struct sq_run_ctl *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->scens);
    free(c);
}

int64_t sq_engine__ctl_arrival_ns(const struct sq_engine__ctlseg *segs, uint32_t n,
                                  const struct sq_exec *ex, uint64_t i)
{
    double x = (double)i;
    uint32_t k = n;
    while (k > 0 && segs[k - 1].c0 > x)
        k--;
    if (k == 0)
        return sq_exec_arrival_ns(ex, i); /* due before the first change */
    const struct sq_engine__ctlseg *s = &segs[k - 1];
    if (s->r <= 0)
        return INT64_MAX; /* paused */
    return s->t0 + llround((x - s->c0) / s->r);
}

/* The rate of the executor's own schedule at t (per ns). */
static double exec_rate(const struct sq_exec *e, int64_t t)
{
    for (uint32_t s = 0; s < e->nstages; s++) {
        int64_t d = e->stages[s].duration_ns;
        if (t >= e->_t0[s] + d)
            continue;
        double k = t > e->_t0[s] ? (double)(t - e->_t0[s]) : 0;
        return e->_from[s] + (e->_to[s] - e->_from[s]) * k / (double)d;
    }
    return 0;
}

int sq_engine__ctl_bind(struct sq_run_ctl *c, struct sq_engine__shared *run)
{
    const struct sq_run_config *cfg = run->cfg;
    uint32_t n = cfg->scens ? cfg->nscens : 1;
    struct sq_engine__ctlscen *cs = calloc(n, sizeof(*cs));
    if (!cs)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        cs[i].ex = cfg->scens ? &cfg->scens[i].exec : &cfg->exec;
        cs[i].offset_ns = cfg->scens ? cfg->scens[i].start_ns : 0;
        cs[i].open = sq_exec_is_open(cs[i].ex);
        cs[i].peak = sq_exec_max_vus(cs[i].ex);
        cs[i].vus = -1;
    }
    pthread_mutex_lock(&c->mu);
    free(c->scens);
    c->scens = cs;
    c->nscens = n;
    c->nev = 0;
    c->run = run;
    run->ctl = cs;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int sq_engine__ctl_unbind(struct sq_run_ctl *c, struct sq_result *out)
{
    pthread_mutex_lock(&c->mu);
    c->run = NULL;
    int rc = 0;
    if (c->nev && out) {
        out->controls = malloc(c->nev * sizeof(*out->controls));
        if (out->controls) {
            memcpy(out->controls, c->ev, c->nev * sizeof(*out->controls));
            out->ncontrols = c->nev;
            /* in time order: an open loop's change takes effect SQ_CTL_LEAD_NS after it was
             * made, a closed loop's at once (stable: changes at one time keep their order) */
            struct sq_control_event *v = out->controls;
            for (uint32_t i = 1; i < c->nev; i++)
                for (uint32_t k = i; k > 0 && v[k - 1].t_s > v[k].t_s; k--) {
                    struct sq_control_event t = v[k];
                    v[k] = v[k - 1];
                    v[k - 1] = t;
                }
        } else {
            rc = -ENOMEM;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void say(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t n, const char *fmt, ...)
{
    if (!why || !n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
}

static const char *scen_name(const struct sq_run_ctl *c, uint32_t i)
{
    const struct sq_run_config *cfg = c->run->cfg;
    return cfg->scens && cfg->scens[i].name ? cfg->scens[i].name : "the run";
}

/* Whether the change fits scenario i; when not, why says so (for a named scenario). */
static bool fits(const struct sq_run_ctl *c, uint32_t i, enum sq_control_kind kind, double value,
                 char *why, size_t whylen)
{
    const struct sq_engine__ctlscen *cs = &c->scens[i];
    const char *name = scen_name(c, i);
    switch (kind) {
    case SQ_CONTROL_RATE:
        if (!cs->open) {
            say(why, whylen, "rate: %s is closed loop (change its vus)", name);
            return false;
        }
        return true;
    case SQ_CONTROL_VUS:
        if (cs->open) {
            say(why, whylen, "vus: %s is open loop (change its rate)", name);
            return false;
        }
        if (cs->ex->kind != SQ_EXEC_CONSTANT_VUS && cs->ex->kind != SQ_EXEC_RAMPING_VUS) {
            say(why, whylen, "vus: %s runs %s (only constant-vus and ramping-vus take a VU count)",
                name, sq_exec_name(cs->ex->kind));
            return false;
        }
        if (value > cs->peak) {
            say(why, whylen, "vus: %s opened %u VUs at its start; it can run 0 to %u", name,
                cs->peak, cs->peak);
            return false;
        }
        return true;
    case SQ_CONTROL_PAUSE:
        if (__atomic_load_n(&cs->paused, __ATOMIC_RELAXED)) {
            say(why, whylen, "pause: %s is paused already", name);
            return false;
        }
        return true;
    case SQ_CONTROL_RESUME:
        if (!__atomic_load_n(&cs->paused, __ATOMIC_RELAXED)) {
            say(why, whylen, "resume: %s is not paused", name);
            return false;
        }
        return true;
    }
    return false;
}

/* The open loop's schedule: arrivals expected by t (ns after the scenario's start). */
static double expected(const struct sq_engine__ctlscen *cs, int64_t t)
{
    if (cs->nsegs == 0)
        return sq_exec_expected(cs->ex, t);
    const struct sq_engine__ctlseg *s = &cs->segs[cs->nsegs - 1];
    return s->c0 + s->r * (double)(t - s->t0);
}

static double rate_now(const struct sq_engine__ctlscen *cs, int64_t t)
{
    if (cs->nsegs == 0)
        return exec_rate(cs->ex, t);
    return cs->segs[cs->nsegs - 1].r;
}

static void push_seg(struct sq_engine__ctlscen *cs, int64_t t, double c0, double r)
{
    int64_t len = sq_exec_length_ns(cs->ex);
    double x = r > 0 ? c0 + r * (double)(len - t) : c0;
    struct sq_engine__ctlseg *s = &cs->segs[cs->nsegs];
    s->t0 = t;
    s->c0 = c0;
    s->r = r;
    s->total = x <= 0 ? 0 : (uint64_t)ceil(x - 1e-6); /* float noise is no arrival (exec.c) */
    __atomic_store_n(&cs->nsegs, cs->nsegs + 1, __ATOMIC_RELEASE);
}

static void apply(struct sq_engine__ctlscen *cs, int64_t t, enum sq_control_kind kind, double v)
{
    int64_t len = sq_exec_length_ns(cs->ex);
    if (t < 0)
        t = 0;
    if (t > len)
        t = len;
    if (cs->open) {
        double c0 = expected(cs, t);
        switch (kind) {
        case SQ_CONTROL_RATE:
            cs->rate_ns = v / 1e9;
            if (!cs->paused)
                push_seg(cs, t, c0, cs->rate_ns);
            break;
        case SQ_CONTROL_PAUSE:
            if (cs->rate_ns == 0)
                cs->rate_ns = rate_now(cs, t);
            push_seg(cs, t, c0, 0);
            break;
        case SQ_CONTROL_RESUME:
            push_seg(cs, t, c0, cs->rate_ns);
            break;
        case SQ_CONTROL_VUS:
            break;
        }
    } else if (kind == SQ_CONTROL_VUS) {
        __atomic_store_n(&cs->vus, (int64_t)v, __ATOMIC_RELAXED);
    }
    if (kind == SQ_CONTROL_PAUSE || kind == SQ_CONTROL_RESUME)
        __atomic_store_n(&cs->paused, kind == SQ_CONTROL_PAUSE, __ATOMIC_RELAXED);
    __atomic_store_n(&cs->gen, cs->gen + 1, __ATOMIC_RELEASE);
}

static void state_of(const struct sq_run_ctl *c, uint32_t i, int64_t now, struct sq_ctl_state *st)
{
    const struct sq_engine__ctlscen *cs = &c->scens[i];
    int64_t go = __atomic_load_n(&c->run->go_ns, __ATOMIC_ACQUIRE);
    st->t_s = go ? (double)(now - go) / 1e9 : 0;
    st->open = cs->open;
    st->paused = cs->paused;
    st->rate = 0;
    st->vus = 0;
    if (cs->open) {
        int64_t t = go ? now - go - cs->offset_ns : 0;
        st->rate = cs->paused ? 0 : round(rate_now(cs, t < 0 ? 0 : t) * 1e15) / 1e6;
    } else if (!cs->paused) {
        int64_t t = go ? now - go - cs->offset_ns : 0;
        st->vus = cs->vus >= 0 ? (uint32_t)cs->vus : sq_exec_vus_at(cs->ex, t < 0 ? 0 : t);
    }
}

int sq_run_control(struct sq_run_ctl *c, enum sq_control_kind kind, double value, int scen,
                   struct sq_ctl_state *st, char *why, size_t whylen)
{
    say(why, whylen, "%s", "");
    if (kind == SQ_CONTROL_RATE && !(isfinite(value) && value > 0 && value <= 1e8)) {
        say(why, whylen, "rate: give arrivals per second, more than 0 and at most 1e8");
        return -SQ_EUSAGE;
    }
    if (kind == SQ_CONTROL_VUS && !(isfinite(value) && value >= 0 && value == floor(value))) {
        say(why, whylen, "vus: give a whole number of VUs, 0 or more");
        return -SQ_EUSAGE;
    }
    if (kind == SQ_CONTROL_PAUSE || kind == SQ_CONTROL_RESUME)
        value = 0;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    struct sq_engine__shared *run = c->run;
    int64_t go = run ? __atomic_load_n(&run->go_ns, __ATOMIC_ACQUIRE) : 0;
    if (!run || !go || __atomic_load_n(&run->wind_ns, __ATOMIC_RELAXED) ||
        __atomic_load_n(&run->abort, __ATOMIC_RELAXED)) {
        say(why, whylen, "%s",
            !run  ? "no run is going"
            : !go ? "the run has not started yet"
                  : "the run is ending");
        rc = -EAGAIN;
    } else if (run->cfg->seg) {
        say(why, whylen, "a distributed run's segment cannot be changed on its own");
        rc = -SQ_EUSAGE;
    } else if (scen >= (int)c->nscens) {
        say(why, whylen, "no scenario %d (the run has %u)", scen, c->nscens);
        rc = -SQ_EUSAGE;
    } else if (c->nev >= SQ_CTL_MAX_CHANGES) {
        say(why, whylen, "this run took %d changes already, the most one run takes",
            SQ_CTL_MAX_CHANGES);
        rc = -ENOSPC;
    }
    uint32_t from = scen < 0 ? 0 : (uint32_t)scen, to = scen < 0 ? c->nscens : (uint32_t)scen + 1;
    uint32_t hit = 0, first = 0;
    if (rc == 0) {
        for (uint32_t i = from; i < to; i++)
            if (fits(c, i, kind, value, why, whylen) && c->scens[i].nsegs + 1 < SQ_CTL_MAX_CHANGES)
                hit++;
        if (hit == 0)
            rc = -SQ_EUSAGE; /* why names the last scenario's reason */
        else
            say(why, whylen, "%s", "");
    }
    if (rc == 0) {
        /* An open loop's change takes effect SQ_CTL_LEAD_NS from now: every worker sees the new
         * generation before its loop's clock passes that time (short of the controlling thread
         * stalling that long between this read and its release store), so none releases an
         * arrival of the old schedule past the change and the count stays the schedule's. A
         * closed loop's VUs change at once. */
        int64_t now = sq_now_ns(), at = now;
        bool any = false;
        for (uint32_t i = from; i < to; i++) {
            if (!fits(c, i, kind, value, NULL, 0))
                continue;
            if (!any)
                first = i;
            any = true;
            if (c->scens[i].open)
                at = now + SQ_CTL_LEAD_NS;
        }
        for (uint32_t i = from; i < to; i++)
            if (fits(c, i, kind, value, NULL, 0))
                apply(&c->scens[i], at - go - c->scens[i].offset_ns, kind, value);
        c->ev[c->nev++] = (struct sq_control_event){
            .t_s = (double)(at - go) / 1e9, .kind = kind, .value = value, .scen = scen};
        if (st)
            state_of(c, first, at, st);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int sq_run_ctl_state(struct sq_run_ctl *c, int scen, struct sq_ctl_state *st)
{
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (!c->run || scen < 0 || (uint32_t)scen >= c->nscens)
        rc = -EAGAIN;
    else
        state_of(c, (uint32_t)scen, sq_now_ns(), st);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int sq_run_ctl_scenario(struct sq_run_ctl *c, const char *name)
{
    int hit = -1;
    pthread_mutex_lock(&c->mu);
    const struct sq_run_config *cfg = c->run ? c->run->cfg : NULL;
    for (uint32_t i = 0; cfg && cfg->scens && i < cfg->nscens; i++)
        if (cfg->scens[i].name && strcmp(cfg->scens[i].name, name) == 0) {
            hit = (int)i;
            break;
        }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

json_t *sq_run_ctl_state_json(const struct sq_ctl_state *st)
{
    return json_pack("{s:f, s:b, s:f, s:I, s:b}", "t_s", st->t_s, "open", st->open, "rate",
                     st->rate, "vus", (json_int_t)st->vus, "paused", st->paused);
}

int sq_run_ctl_json(struct sq_run_ctl *c, const char *body, size_t len, json_t **answer, char *why,
                    size_t whylen)
{
    *answer = NULL;
    json_error_t je;
    json_t *j = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        say(why, whylen,
            "the body is not a JSON object: give one of {\"rate\": N}, "
            "{\"vus\": N}, {\"pause\": true}, {\"resume\": true}");
        return -SQ_EUSAGE;
    }
    static const char *const keys[] = {"rate", "vus", "pause", "resume"};
    int which = -1, n = 0;
    const char *key, *bad = NULL;
    json_t *v;
    json_object_foreach(j, key, v)
    {
        int k = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(key, keys[i]) == 0)
                k = i;
        if (k >= 0) {
            which = k;
            n++;
        } else if (strcmp(key, "scenario") != 0) {
            bad = key;
        }
    }
    json_t *sc = json_object_get(j, "scenario");
    const char *err = NULL;
    if (bad)
        err = "unknown key: give one of rate, vus, pause, resume (and scenario)";
    else if (n != 1)
        err = "give exactly one of rate, vus, pause, resume";
    else if (sc && !json_is_string(sc))
        err = "scenario: give a scenario's name";
    else if (which <= 1 && !json_is_number(json_object_get(j, keys[which])))
        err = which == 0 ? "rate: give arrivals per second (a number)" : "vus: give a number";
    else if (which >= 2 && !json_is_true(json_object_get(j, keys[which])))
        err = which == 2 ? "pause: give true" : "resume: give true";
    if (err) {
        json_decref(j);
        say(why, whylen, "%s", err);
        return -SQ_EUSAGE;
    }
    double value = which <= 1 ? json_number_value(json_object_get(j, keys[which])) : 0;
    int scen = -1;
    if (sc && (scen = sq_run_ctl_scenario(c, json_string_value(sc))) < 0) {
        say(why, whylen, "scenario: the run has no scenario named \"%.100s\"",
            json_string_value(sc));
        json_decref(j);
        return -SQ_EUSAGE;
    }
    json_decref(j);
    struct sq_ctl_state st = {0};
    int rc = sq_run_control(c, (enum sq_control_kind)which, value, scen, &st, why, whylen);
    if (rc < 0)
        return rc;
    json_t *a = sq_run_ctl_state_json(&st);
    json_t *head = json_pack("{s:s, s:f}", "kind", keys[which], "value", value);
    if (a && head) {
        json_object_update(head, a);
        *answer = head;
        head = NULL;
    }
    json_decref(a);
    json_decref(head);
    return 0;
}
