/* engine/planrun.c - see planrun.h. */
#include "engine/planrun.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/parse.h"
#include "engine/flags.h"
#include "engine/flow.h"
#include "engine/hooks.h"
#include "http/decode.h"
#include "stats/hist.h"

void sq_planrun_opts_init(struct sq_planrun_opts *o)
{
    *o = (struct sq_planrun_opts){.timeout_ns = 10 * SQ_NS_PER_S,
                                  .connect_timeout_ns = 5 * SQ_NS_PER_S};
}

static const struct option longs[] = {
    {"threads", required_argument, NULL, 't'},
    {"timeout", required_argument, NULL, 'T'},
    {"connect-timeout", required_argument, NULL, 'C'},
    {"json", required_argument, NULL, 'j'},
    {"html", required_argument, NULL, 'H'},
    {"quiet", no_argument, NULL, 'q'},
    {"no-compression", no_argument, NULL, 'Z'},
    {"no-phases", no_argument, NULL, 'P'},
    SQ_NETOPTS_LONG_OPTIONS,
    {"help", no_argument, NULL, 'h'},
    {0, 0, 0, 0},
};

static int duration(const char *flag, const char *arg, int64_t *out, char *err, size_t len)
{
    if (sq_parse_duration(arg, SQ_NS_PER_S, out) < 0 || *out <= 0)
        return sq_flag_fail(err, len, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)", flag,
                            arg);
    return 0;
}

int sq_planrun_parse_argv(struct sq_planrun_opts *o, int argc, char **argv, char *err, size_t len)
{
    optind = 0; /* getopt_long starts afresh, whatever an earlier parse left behind */
    opterr = 0;
    int ch, li = -1, rc;
    while ((ch = getopt_long(argc, argv, ":t:qhk", longs, &li)) != -1) {
        char name[48];
        const char *flag = sq_flag_name(longs, &li, ch, argv, name, sizeof(name));
        rc = sq_netopts_flag(&o->net, ch, flag, optarg, err, len);
        if (rc == 1)
            continue;
        if (rc)
            return rc;
        switch (ch) {
        case 't':
            if (sq_parse_u64(optarg, 1, 1024, 0, &o->threads) < 0)
                return sq_flag_fail(err, len, "%s: '%s' is not a thread count (1..1024)", flag,
                                    optarg);
            break;
        case 'T':
            if ((rc = duration(flag, optarg, &o->timeout_ns, err, len)) < 0)
                return rc;
            break;
        case 'C':
            if ((rc = duration(flag, optarg, &o->connect_timeout_ns, err, len)) < 0)
                return rc;
            break;
        case 'j':
            o->json_path = optarg;
            break;
        case 'H':
            o->html_path = optarg;
            break;
        case 'q':
            o->quiet = true;
            break;
        case 'Z':
            o->no_compression = true;
            break;
        case 'P':
            o->no_phases = true;
            break;
        case 'h':
            return SQ_PLANRUN_HELP;
        default:
            return sq_flag_refused(longs, ch, flag, err, len);
        }
    }
    if ((rc = sq_netopts_check(&o->net, err, len)) < 0)
        return rc;
    if (optind >= argc)
        return sq_flag_fail(err, len, "no plan file given");
    if (optind < argc - 1)
        return sq_flag_fail(err, len, "one plan file only; unexpected '%s'", argv[optind + 1]);
    o->plan = argv[optind];
    return 0;
}

static int plan_fail(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int plan_fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -SQ_EPARSE;
}

static int no_memory(char *err, size_t len)
{
    snprintf(err, len, "out of memory");
    return -ENOMEM;
}

int sq_planrun_prepare(struct sq_planrun *r, const struct sq_plan *p,
                       const struct sq_planrun_opts *o, char *err, size_t len)
{
    memset(r, 0, sizeof(*r));
    r->plan = p;
    r->opts = o;
    char why[512];
    if (sq_thresholds_check(p, why, sizeof(why)) < 0)
        return plan_fail(err, len, "%s", why);
    if (p->script && o->refuse_scripts)
        return plan_fail(err, len,
                         "%s:%u:%u: script: this runner runs no Lua from plans (no hooks here)",
                         p->file, p->script_loc.line, p->script_loc.col);
    int hrc = sq_plan_hooks_check(p, why, sizeof(why)); /* the script loads, its hooks exist */
    if (hrc == -ENOMEM)
        return no_memory(err, len);
    if (hrc < 0)
        return plan_fail(err, len, "%s", why);
    const char *uwhy = NULL;
    int rc = sq_url_parse(p->target, &r->url, &uwhy);
    if (rc < 0)
        return plan_fail(err, len, "%s: target: bad URL '%s': %s", p->file, p->target,
                         uwhy ? uwhy : sq_strerror(rc));
    r->accept_encoding = o->no_compression ? NULL : sq_accept_encoding_default();
    r->scens = calloc(p->nscenarios ? p->nscenarios : 1, sizeof(*r->scens));
    if (!r->scens)
        return no_memory(err, len);
    for (size_t i = 0; i < p->nscenarios; i++) {
        struct sq_flow *f = NULL;
        rc =
            sq_flow_compile(p, &p->scenarios[i], &r->url, r->accept_encoding, &f, why, sizeof(why));
        if (rc == -ENOMEM)
            return no_memory(err, len);
        if (rc < 0)
            return plan_fail(err, len, "%s: scenario '%s': %s", p->file, p->scenarios[i].name, why);
        struct sq_run_scen *s = &r->scens[i];
        s->name = p->scenarios[i].name;
        s->exec = p->scenarios[i].exec;
        s->start_ns = p->scenarios[i].start_ns;
        s->flow = f;
        r->vus += sq_exec_max_vus(&s->exec);
        double l = (double)(s->start_ns + sq_exec_length_ns(&s->exec)) / 1e9;
        if (l > r->length_s)
            r->length_s = l;
        r->open |= sq_exec_is_open(&s->exec);
    }
    struct sq_run_config *cfg = &r->cfg;
    cfg->timeout_ns = p->default_timeout_ns ? p->default_timeout_ns : o->timeout_ns;
    cfg->connect_timeout_ns = o->connect_timeout_ns;
    cfg->scens = r->scens;
    cfg->nscens = (uint32_t)p->nscenarios;
    cfg->phases = !o->no_phases;
    cfg->threads = sq_flag_threads(o->threads);
    rc = sq_net_setup(&r->net, &o->net, &r->url, NULL, cfg, err, len);
    if (rc == 0 && p->oauth2) {
        /* the run's token, before any load: no token, no run */
        if ((rc = sq_oauth_start(p->oauth2, p->target, &o->net.tls, &r->oauth, err, len)) < 0)
            return rc == -SQ_EPARSE ? rc : (rc == -SQ_ERESOLVE ? rc : -EPROTO);
        for (size_t i = 0; i < p->nscenarios; i++)
            ((struct sq_flow *)r->scens[i].flow)->oauth = sq_oauth_live(r->oauth);
    }
    return rc;
}

void sq_planrun_dispose(struct sq_planrun *r)
{
    if (r->scens)
        for (size_t i = 0; i < r->plan->nscenarios; i++)
            sq_flow_free((struct sq_flow *)r->scens[i].flow);
    free(r->scens);
    r->scens = NULL;
    sq_url_dispose(&r->url);
    sq_net_dispose(&r->net);
    sq_oauth_free(r->oauth);
    r->oauth = NULL;
}

int sq_planrun_watch_init(struct sq_planrun_watch *w, const struct sq_plan *p)
{
    *w = (struct sq_planrun_watch){.plan = p};
    return sq_latency_hist_new(&w->t.dur);
}

bool sq_planrun_watch_tick(struct sq_planrun_watch *w, const struct sq_second *s,
                           const struct sq_hist *h)
{
    struct sq_live_totals *t = &w->t;
    sq_hist_merge(t->dur, h);
    t->reqs += s->completed + s->failed;
    t->http_failed += s->http_failed;
    t->checks_passed += s->checks_passed;
    t->checks_failed += s->checks_failed;
    t->iterations += s->iterations;
    t->dropped += s->dropped;
    t->bytes_sent += s->bytes_sent;
    t->bytes_received += s->bytes_received;
    t->elapsed_s = s->t_s;
    if (w->aborted || !sq_thresholds_should_abort(w->plan, t, w->why, sizeof(w->why)))
        return false;
    w->aborted = true;
    return true;
}

void sq_planrun_watch_dispose(struct sq_planrun_watch *w)
{
    sq_hist_free(w->t.dur);
    w->t.dur = NULL;
}

int sq_planrun_finish(const struct sq_planrun *r, const struct sq_planrun_watch *w,
                      struct sq_result *res, struct sq_th_verdicts *v)
{
    sq_oauth_stop(r->oauth); /* its figures are final from here */
    if (w && w->aborted) {
        /* The run stopped itself: say which threshold, not "stopped by request". */
        res->aborted = true;
        snprintf(res->abort_reason, sizeof(res->abort_reason), "%.159s", w->why);
    }
    return sq_thresholds_eval(r->plan, res, v);
}
