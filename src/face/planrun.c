/* face/planrun.c - see planrun.h. */
#include "face/planrun.h"

#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/parse.h"
#include "face/flags.h"
#include "engine/flow.h"
#include "face/hookcheck.h"
#include "http/decode.h"
#include "net/quic.h"
#include "net/srcaddr.h"
#include "stats/hist.h"

void sq_planrun_opts_init(struct sq_planrun_opts *o)
{
    *o = (struct sq_planrun_opts){.timeout_ns = 10 * SQ_NS_PER_S,
                                  .connect_timeout_ns = 5 * SQ_NS_PER_S,
                                  .sample_responses = SQ_SAMPLE_RESPONSES_DEFAULT,
                                  .max_redirects = -1};
}

static const struct option longs[] = {
    {"threads", required_argument, NULL, 't'},
    {"timeout", required_argument, NULL, 'T'},
    {"connect-timeout", required_argument, NULL, 'C'},
    {"json", required_argument, NULL, 'j'},
    {"html", required_argument, NULL, 'H'},
    {"junit", required_argument, NULL, 'J'},
    {"quiet", no_argument, NULL, 'q'},
    {"no-compression", no_argument, NULL, 'Z'},
    {"no-phases", no_argument, NULL, 'P'},
    {"http2", no_argument, NULL, '2'},
    {"http3", no_argument, NULL, '3'},
    {"h3-0rtt", no_argument, NULL, '0'},
    {"streams", required_argument, NULL, 'S'},
    {"out", required_argument, NULL, 'O'},
    {"sample", required_argument, NULL, 's'},
    {"name", required_argument, NULL, 'N'},
    {"percentiles", required_argument, NULL, 'R'},
    {"watch", required_argument, NULL, 'W'},
    {"watch-name", required_argument, NULL, 'w'},
    {"sample-responses", required_argument, NULL, 'X'},
    {"seed", required_argument, NULL, 'E'},
    {"no-redact", no_argument, NULL, 'U'},
    {"max-redirects", required_argument, NULL, 'M'},
    SQ_NETOPTS_LONG_OPTIONS,
    SQ_DISTOPTS_LONG_OPTIONS,
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

/* One flag of the plan face's own (not DNS/TLS, not distribution). Returns 0, SQ_PLANRUN_HELP or
 * a negative code with err filled. */
static int take(struct sq_planrun_opts *o, int ch, const char *flag, char *arg, char *err,
                size_t len)
{
    switch (ch) {
    case 't':
        if (sq_parse_u64(arg, 1, 1024, 0, &o->threads) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a thread count (1..1024)", flag, arg);
        return 0;
    case 'T':
        return duration(flag, arg, &o->timeout_ns, err, len);
    case 'C':
        return duration(flag, arg, &o->connect_timeout_ns, err, len);
    case 'j':
        o->json_path = arg;
        return 0;
    case 'H':
        o->html_path = arg;
        return 0;
    case 'J':
        o->junit_path = arg;
        return 0;
    case 'q':
        o->quiet = true;
        return 0;
    case 'Z':
        o->no_compression = true;
        return 0;
    case 'P':
        o->no_phases = true;
        return 0;
    case '2':
        o->http2 = true;
        return 0;
    case '3':
#ifdef SQ_HAVE_H3
        o->http3 = true;
        return 0;
#else
        return sq_flag_fail(err, len,
                            "--http3: this build of squall has no HTTP/3 (it was built without "
                            "ngtcp2, nghttp3 and GnuTLS; scripts/deps.sh installs them)");
#endif
    case '0':
        o->h3_0rtt = true;
        return 0;
    case 'S':
        if (sq_parse_u64(arg, 1, 1000, 1, &o->streams) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a stream count (1..1000)", flag, arg);
        return 0;
    case 'O':
        return sq_flag_out(flag, arg, &o->csv_path, &o->hdr_path, &o->ndjson_path, &o->prom_rw_url,
                           &o->influx_url, err, len);
    case 's':
        return sq_flag_sample(flag, arg, &o->sample, err, len);
    case 'N':
        return sq_flag_run_name(flag, arg, &o->name, err, len);
    case 'R':
        return sq_flag_percentiles(flag, arg, o->percentiles, SQ_ARRAY_LEN(o->percentiles),
                                   &o->npercentiles, err, len);
    case 'W':
    case 'w':
        return sq_watch_opts_add(&o->watch, ch == 'w', flag, arg, err, len);
    case 'X':
        return sq_flag_sample_responses(flag, arg, &o->sample_responses, err, len);
    case 'E': {
        int rc = sq_flag_seed(flag, arg, &o->seed, err, len);
        if (rc < 0)
            return rc;
        o->seed_set = true;
        return 0;
    }
    case 'U':
        o->no_redact = true;
        return 0;
    case 'M': {
        uint64_t n;
        if (sq_parse_u64(arg, 0, SQ_PLAN_REDIRECTS_CAP, 0, &n) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a redirect count (0..%d)", flag, arg,
                                SQ_PLAN_REDIRECTS_CAP);
        o->max_redirects = (int64_t)n;
        return 0;
    }
    case 'h':
        return SQ_PLANRUN_HELP;
    default:
        return sq_flag_refused(longs, ch, flag, err, len);
    }
}

int sq_planrun_parse_argv(struct sq_planrun_opts *o, int argc, char **argv, char *err, size_t len)
{
    optind = 0; /* getopt_long starts afresh, whatever an earlier parse left behind */
    opterr = 0;
    int ch, li = -1, rc;
    while ((ch = getopt_long(argc, argv, ":t:qhk", longs, &li)) != -1) {
        char name[48];
        const char *flag = sq_flag_name(longs, &li, ch, argv, name, sizeof(name));
        /* the DNS/TLS and distribution flags first (1: taken), then the face's own (whose 1
         * is SQ_PLANRUN_HELP) */
        rc = sq_netopts_flag(&o->net, ch, flag, optarg, err, len);
        if (rc == 0)
            rc = sq_distopts_flag(&o->dist, ch, flag, optarg, err, len);
        if (rc == 1)
            continue;
        if (rc == 0)
            rc = take(o, ch, flag, optarg, err, len);
        if (rc != 0)
            return rc;
    }
    if ((rc = sq_netopts_check(&o->net, err, len)) < 0)
        return rc;
    if ((rc = sq_distopts_check(&o->dist, err, len)) < 0)
        return rc;
    if (o->sample && !o->ndjson_path)
        return sq_flag_fail(err, len, "--sample applies to --out ndjson=FILE");
    if (o->json_path && o->junit_path && strcmp(o->json_path, "-") == 0 &&
        strcmp(o->junit_path, "-") == 0)
        return sq_flag_fail(err, len, "--junit -: standard output is taken by --json -");
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

/* What the plan must pass before anything is set up: its thresholds, its script (and whether
 * this runner takes one), its hooks, its target. */
int sq_planrun_check_sources(const struct sq_plan *p, const struct sq_netopts *o, char *err,
                             size_t len)
{
    if (!p->source_addrs || o->source_addrs)
        return 0;
    struct sq_addr *v = NULL;
    size_t nv = 0;
    char why[240];
    int rc = sq_srcaddr_parse(p->source_addrs, &v, &nv, why, sizeof(why));
    free(v);
    if (rc == -ENOMEM)
        return no_memory(err, len);
    if (rc < 0)
        return plan_fail(err, len, "%s:%u:%u: source_addrs: %s", p->file, p->source_addrs_loc.line,
                         p->source_addrs_loc.col, why);
    return 0;
}

static int plan_checks(struct sq_planrun *r, const struct sq_plan *p,
                       const struct sq_planrun_opts *o, char *err, size_t len)
{
    char why[512];
    if (sq_thresholds_check(p, why, sizeof(why)) < 0)
        return plan_fail(err, len, "%s", why);
    if (p->script && o->refuse_scripts)
        return plan_fail(err, len,
                         "%s:%u:%u: script: this runner runs no Lua from plans (no hooks here)",
                         p->file, p->script_loc.line, p->script_loc.col);
    int src = sq_planrun_check_sources(p, &o->net, err, len);
    if (src < 0)
        return src;
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
    return 0;
}

/* Scenario i's flow compiled (over HTTP/2 when asked and it can), its executor and start; the
 * run's VUs, length and loop grow with it. *nh2 counts the HTTP/2 scenarios. */
static int compile_scen(struct sq_planrun *r, const struct sq_plan *p,
                        const struct sq_planrun_opts *o, size_t i, size_t *nh2, char *err,
                        size_t len)
{
    char why[512];
    struct sq_flow *f = NULL;
    int rc =
        sq_flow_compile(p, &p->scenarios[i], &r->url, r->accept_encoding, &f, why, sizeof(why));
    /* WebSocket steps upgrade an HTTP/1.1 connection: --http2 leaves their scenario on it,
     * and `protocol: h2` beside them is refused */
    bool ws = p->scenarios[i].ws;
    bool h3 = (o->http3 && !ws) || p->scenarios[i].h3;
    bool h2 = (o->http2 && !ws) || p->scenarios[i].h2 || h3;
    if (rc == 0 && h2 && ws) {
        snprintf(why, sizeof(why),
                 "protocol: %s cannot carry WebSocket steps (their upgrade needs HTTP/1.1)",
                 h3 ? "h3" : "h2");
        rc = -SQ_EPARSE;
    }
    if (rc == 0 && h2)
        rc = sq_flow_use_h2(f, why, sizeof(why));
    if (rc == 0 && o->max_redirects >= 0)
        sq_flow_max_redirects(f, (uint32_t)o->max_redirects);
    struct sq_run_scen *s = &r->scens[i];
    s->flow = f; /* freed by sq_planrun_dispose, whatever happens next */
    if (rc == -ENOMEM)
        return no_memory(err, len);
    if (rc < 0)
        return plan_fail(err, len, "%s: scenario '%s': %s", p->file, p->scenarios[i].name, why);
    s->name = p->scenarios[i].name;
    s->exec = p->scenarios[i].exec;
    s->start_ns = p->scenarios[i].start_ns;
    s->h2 = h2;
    s->h3 = h3;
    r->nh3 += h3;
    *nh2 += h2;
    r->vus += sq_exec_max_vus(&s->exec);
    double l = (double)(s->start_ns + sq_exec_length_ns(&s->exec)) / 1e9;
    if (l > r->length_s)
        r->length_s = l;
    r->open |= sq_exec_is_open(&s->exec);
    return 0;
}

/* setup: or teardown: compiled like a scenario (over HTTP/2 when every scenario is). */
static int compile_once(struct sq_planrun *r, const struct sq_plan_scenario *sc,
                        const struct sq_planrun_opts *o, bool h2, struct sq_run_scen *s, char *err,
                        size_t len)
{
    char why[512];
    struct sq_flow *f = NULL;
    int rc = sq_flow_compile(r->plan, sc, &r->url, r->accept_encoding, &f, why, sizeof(why));
    h2 = h2 && !sc->ws;
    if (rc == 0 && h2)
        rc = sq_flow_use_h2(f, why, sizeof(why));
    if (rc == 0 && o->max_redirects >= 0)
        sq_flow_max_redirects(f, (uint32_t)o->max_redirects);
    s->flow = f;
    if (rc == -ENOMEM)
        return no_memory(err, len);
    if (rc < 0)
        return plan_fail(err, len, "%s: %s: %s", r->plan->file, sc->name, why);
    s->name = sc->name;
    s->exec = sc->exec;
    s->h2 = h2;
    s->h3 = h2 && r->nh3 == r->plan->nscenarios; /* over HTTP/3 when every scenario is */
    r->vus += 1;
    return 0;
}

/* DNS and TLS for the target: https gets ALPN h2 for HTTP/2 scenarios (required: a server that
 * does not pick it fails the handshake), none for HTTP/1.1 ones; a plan with both gets a client
 * of each. */
static int net_setup(struct sq_planrun *r, const struct sq_planrun_opts *o, size_t nh2, char *err,
                     size_t len)
{
    struct sq_run_config *cfg = &r->cfg;
    bool all_h2 = nh2 == r->plan->nscenarios && nh2 > 0;
    /* HTTP/3 goes over QUIC (UDP), which an HTTP proxy cannot carry: --proxy is refused; the
     * environment's HTTP(S)_PROXY is not used when every scenario is over h3 (the CLI says so:
     * r->h3_proxy_env), and refused beside scenarios that would take it (they share the
     * run's addresses: the proxy's, or the target's) */
    struct sq_netopts nopts = o->net;
    if (r->nh3 && nopts.unix_socket)
        return sq_flag_fail(err, len,
                            "--unix-socket: HTTP/3 (protocol: h3, --http3) runs over UDP to the "
                            "target's host and port, not over a Unix socket");
    if (r->nh3 && nopts.proxy && nopts.proxy[0])
        return sq_flag_fail(err, len,
                            "--proxy: HTTP/3 (protocol: h3, --http3) is over QUIC (UDP), which an "
                            "HTTP proxy cannot carry (CONNECT-UDP / MASQUE is not supported): "
                            "drop --proxy, or run the scenarios over h2 or http/1.1");
    if (r->nh3 && nopts.proxy_env && !nopts.proxy) {
        const char *from = NULL;
        if (sq_proxy_from_env(r->url.scheme, r->url.host, r->url.port, &from)) {
            if (r->nh3 != r->plan->nscenarios)
                return sq_flag_fail(err, len,
                                    "%s is set for the target, but HTTP/3 scenarios (protocol: "
                                    "h3) cannot go through an HTTP proxy and the plan's others "
                                    "would: list the target's host in NO_PROXY, or run the "
                                    "h3 scenarios apart",
                                    from);
            r->h3_proxy_env = from;
        }
        nopts.proxy_env = false;
    }
    int rc = sq_net_setup(&r->net, &nopts, &r->url, all_h2 ? "h2" : NULL, cfg, err, len);
    if (rc == 0 && nh2 && !all_h2 && r->net.tls) {
        char tls_why[SQ_TLS_ERRLEN];
        struct sq_tls_client_opts t = o->net.tls;
        t.host = r->url.host;
        t.alpn = "h2";
        rc = sq_tls_client_new(&t, &r->tls_h2, tls_why, sizeof(tls_why));
        if (rc < 0) {
            snprintf(err, len, "tls: %s", rc == -EINVAL ? tls_why : sq_strerror(rc));
            return rc == -EINVAL ? -SQ_EUSAGE : rc;
        }
        cfg->tls_h2 = r->tls_h2;
    }
    return rc;
}

/* HTTP/3 scenarios: QUIC's TLS settings (the same -k and --cacert). */
static int quic_setup(struct sq_planrun *r, const struct sq_planrun_opts *o, char *err, size_t len)
{
#ifdef SQ_HAVE_H3
    if (strcmp(r->url.scheme, "https") != 0)
        return sq_flag_fail(err, len,
                            "HTTP/3 (protocol: h3, --http3) is over QUIC's TLS: the "
                            "plan's base URL must be https://");
    char why[256];
    struct sq_quic_client_opts qo = {.insecure = o->net.tls.insecure,
                                     .cacert = o->net.tls.cacert,
                                     .host = r->url.host,
                                     .alpn = "h3",
                                     .zero_rtt = o->h3_0rtt};
    int rc = sq_quic_client_new(&qo, &r->quic, why, sizeof(why));
    if (rc == -EINVAL)
        return sq_flag_fail(err, len, "%s", why);
    if (rc < 0)
        return sq_flag_fail(err, len, "quic: %s", sq_strerror(rc));
    r->cfg.h3 = r->quic;
    return 0;
#else
    SQ_UNUSED(r);
    SQ_UNUSED(o);
    return sq_flag_fail(err, len, "HTTP/3: this build of squall has no HTTP/3");
#endif
}

/* Every other destination of the run, through the same policy as the target: the brokers of
 * publish and subscribe steps, the OAuth2 token URL (set up, not fetched: nothing is sent before
 * sq_planrun_begin). */
static int destinations(struct sq_planrun *r, const struct sq_planrun_opts *o, char *err,
                        size_t len)
{
    const struct sq_plan *p = r->plan;
    char why[512];
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->nscenarios; i++) {
        if ((rc = sq_flow_resolve_brokers((struct sq_flow *)r->scens[i].flow, o->net.egress,
                                          &o->net.tls, why, sizeof(why))) < 0)
            snprintf(err, len,
                     rc == -EACCES || rc == -SQ_EUSAGE ? "%s: scenario '%s': %s"
                                                       : "%s: scenario '%s': dns: %s",
                     p->file, p->scenarios[i].name, why);
    }
    for (size_t i = 0; rc == 0 && i < 2; i++)
        if (r->once[i].flow &&
            (rc = sq_flow_resolve_brokers((struct sq_flow *)r->once[i].flow, o->net.egress,
                                          &o->net.tls, why, sizeof(why))) < 0)
            snprintf(err, len, rc == -EACCES || rc == -SQ_EUSAGE ? "%s: %s: %s" : "%s: %s: dns: %s",
                     p->file, r->once[i].name, why);
    if (rc == 0 && p->oauth2) {
        rc = sq_oauth_new(p->oauth2, p->target, &o->net.tls, o->net.egress, &r->oauth, err, len);
        if (rc < 0)
            return rc == -SQ_EPARSE || rc == -SQ_ERESOLVE || rc == -EACCES || rc == -ENOMEM
                       ? rc
                       : -EPROTO;
        for (size_t i = 0; i < p->nscenarios; i++)
            ((struct sq_flow *)r->scens[i].flow)->oauth = sq_oauth_live(r->oauth);
        for (size_t i = 0; i < 2; i++)
            if (r->once[i].flow)
                ((struct sq_flow *)r->once[i].flow)->oauth = sq_oauth_live(r->oauth);
    }
    return rc;
}

int sq_planrun_prepare(struct sq_planrun *r, const struct sq_plan *p,
                       const struct sq_planrun_opts *o, char *err, size_t len)
{
    memset(r, 0, sizeof(*r));
    r->plan = p;
    r->opts = o;
    int rc = plan_checks(r, p, o, err, len);
    if (rc < 0)
        return rc;
    r->accept_encoding = o->no_compression ? NULL : sq_accept_encoding_default();
    r->scens = calloc(p->nscenarios ? p->nscenarios : 1, sizeof(*r->scens));
    if (!r->scens)
        return no_memory(err, len);
    size_t nh2 = 0;
    for (size_t i = 0; i < p->nscenarios; i++)
        if ((rc = compile_scen(r, p, o, i, &nh2, err, len)) < 0)
            return rc;
    if ((p->setup || p->teardown) && !o->run_once && !o->once_elsewhere)
        return plan_fail(err, len,
                         "%s:%u:%u: %s: runs once, on the controller: this job came without "
                         "setup's values (a controller older than this agent?)",
                         p->file, (p->setup ? p->setup : p->teardown)->loc.line,
                         (p->setup ? p->setup : p->teardown)->loc.col,
                         p->setup ? "setup" : "teardown");
    bool all_h2 = nh2 == p->nscenarios && nh2 > 0;
    bool here = !o->once_elsewhere; /* an agent's controller runs them */
    if (here && p->setup && (rc = compile_once(r, p->setup, o, all_h2, &r->once[0], err, len)) < 0)
        return rc;
    if (here && p->teardown &&
        (rc = compile_once(r, p->teardown, o, all_h2, &r->once[1], err, len)) < 0)
        return rc;
    struct sq_run_config *cfg = &r->cfg;
    cfg->timeout_ns = p->default_timeout_ns ? p->default_timeout_ns : o->timeout_ns;
    cfg->connect_timeout_ns = o->connect_timeout_ns;
    /* --seed over the plan's seed:, else one from the OS, drawn now: a job for agents carries
     * it (every agent draws from the same seed, each VU from its own global number) */
    cfg->seed = o->seed_set ? o->seed : p->seed_set ? p->seed : sq_run_new_seed();
    cfg->seed_set = true;
    cfg->scens = r->scens;
    cfg->nscens = (uint32_t)p->nscenarios;
    cfg->phases = !o->no_phases;
    cfg->threads = sq_flag_threads(o->threads);
    /* Every watched process must exist now: refused before any load, never found out after. */
    if ((rc = sq_watch_opts_build(&o->watch, &r->watch, err, len)) < 0)
        return rc;
    cfg->watch = r->watch;
    cfg->sample_per_class = (uint32_t)o->sample_responses;
    /* credentials out of kept exchanges: the plan's own come from its flows (sq_flow_secrets) */
    cfg->no_redact = o->no_redact || p->no_redact;
    if (o->streams && !nh2)
        return sq_flag_fail(err, len,
                            "--streams applies to HTTP/2 scenarios (--http2, or protocol: h2)");
    cfg->streams = o->streams ? (uint32_t)o->streams : 1;
    rc = net_setup(r, o, nh2, err, len);
    if (rc == 0 && r->nh3)
        rc = quic_setup(r, o, err, len);
    if (rc == 0 && !o->net.connect_rate && p->connect_rate > 0)
        cfg->connect_rate = r->net.connect_rate = p->connect_rate; /* the flag wins */
    if (rc == 0) {
        /* --source-addrs, else the plan's source_addrs (named by its position), else none or the
         * loopback spread */
        struct sq_netopts n = o->net;
        char what[320];
        if (!n.source_addrs && p->source_addrs) {
            snprintf(what, sizeof(what), "%s:%u:%u: source_addrs", p->file,
                     p->source_addrs_loc.line, p->source_addrs_loc.col);
            n.source_addrs = p->source_addrs;
            n.source_what = what;
        }
        rc = sq_net_sources(&r->net, &n, r->vus, cfg, err, len);
    }
    if (rc == 0)
        rc = destinations(r, o, err, len);
    return rc;
}

int sq_planrun_begin(struct sq_planrun *r, char *err, size_t len)
{
    if (!r->oauth)
        return 0;
    /* the run's token, before any load: no token, no run */
    int rc = sq_oauth_begin(r->oauth, err, len);
    return rc < 0 ? -EPROTO : 0;
}

const char *sq_planrun_protocol(const struct sq_planrun *r, size_t i)
{
    if (!r->scens || !r->scens[i].h2)
        return "http/1.1";
    if (r->scens[i].h3)
        return "h3";
    return r->net.tls ? "h2" : "h2c";
}

void sq_planrun_dispose(struct sq_planrun *r)
{
    if (r->scens)
        for (size_t i = 0; i < r->plan->nscenarios; i++)
            sq_flow_free((struct sq_flow *)r->scens[i].flow);
    free(r->scens);
    r->scens = NULL;
    for (size_t i = 0; i < 2; i++) {
        sq_flow_free((struct sq_flow *)r->once[i].flow);
        r->once[i].flow = NULL;
    }
    sq_step_stats_free(r->once_metrics, 1);
    r->once_metrics = NULL;
    sq_url_dispose(&r->url);
    sq_net_dispose(&r->net);
    sq_tls_client_free(r->tls_h2);
    r->tls_h2 = NULL;
#ifdef SQ_HAVE_H3
    sq_quic_client_free(r->quic);
    r->quic = NULL;
#endif
    sq_watch_free(r->watch);
    r->watch = NULL;
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
    if (r->once_metrics && !res->once) { /* setup: and teardown:'s samples count too */
        int rc = sq_once_metrics_new(r->once_metrics->nmvals, &res->once);
        if (rc < 0)
            return rc;
        sq_step_stats_merge(res->once, r->once_metrics, 0);
    }
    return sq_thresholds_eval(r->plan, res, v);
}

/* The setup VU's variables when its iteration ends (its worker's thread; the main thread reads
 * them after sq_run has joined it). */
struct once_keep {
    struct sq_buf *vals;
    uint32_t n;
    bool ended, stopped;
    bool nomem;
};

static void once_end(void *ud, const struct sq_flow_vu *v, bool stopped)
{
    struct once_keep *k = ud;
    k->ended = true;
    k->stopped = stopped;
    for (uint32_t i = 0; i < k->n; i++) {
        k->vals[i].len = 0;
        if (v->vars[i].len && sq_buf_append(&k->vals[i], v->vars[i].p, v->vars[i].len) < 0)
            k->nomem = true;
    }
}

/* What the once flow sc's steps added to the plan's own metrics, into r->once_metrics (by plan
 * metric). 0 or -ENOMEM. */
static int once_metrics_add(struct sq_planrun *r, const struct sq_plan_scenario *sc,
                            const struct sq_result *res)
{
    const struct sq_plan *p = r->plan;
    if (!p->nmetrics || !res->nscens)
        return 0;
    if (!r->once_metrics) {
        int rc = sq_once_metrics_new((uint32_t)p->nmetrics, &r->once_metrics);
        if (rc < 0)
            return rc;
    }
    const struct sq_scen_result *sr = &res->scens[0];
    for (size_t k = 0; k < sr->nsteps && k < sc->nsteps; k++)
        for (uint32_t j = 0; j < sr->steps[k].nmvals; j++) {
            uint32_t m = sq_plan_slot_metric(&sc->steps[k], j);
            if (m < r->once_metrics->nmvals)
                sq_step_mval_merge(&r->once_metrics->mvals[m], &sr->steps[k].mvals[j]);
        }
    return 0;
}

int sq_planrun_once(struct sq_planrun *r, bool teardown, volatile int *stop)
{
    const struct sq_plan *p = r->plan;
    const struct sq_plan_scenario *sc = teardown ? p->teardown : p->setup;
    struct sq_planrun_once *o = teardown ? &r->teardown : &r->setup;
    struct sq_run_scen scen = r->once[teardown];
    if (!sc || !scen.flow)
        return 0;
    struct once_keep k = {.n = teardown ? 0 : sc->nvars};
    if (k.n && !(k.vals = calloc(k.n, sizeof(*k.vals))))
        return -ENOMEM;
    if (!teardown) {
        scen.on_iter_end = once_end;
        scen.iter_ud = &k;
    }
    struct sq_run_config cfg = r->cfg;
    cfg.scens = &scen;
    cfg.nscens = 1;
    cfg.stop = stop;
    cfg.on_tick = NULL; /* none of the run's callbacks: they are the scenarios' (a daemon's */
    cfg.tick_ud = NULL; /* live tables, its control) */
    cfg.on_tick_steps = NULL;
    cfg.on_tick_fine = NULL;
    cfg.on_xsample_live = NULL;
    cfg.ctl = NULL;
    cfg.on_samples = NULL;
    cfg.watch = NULL;
    cfg.capture = NULL;
    cfg.sample_per_class = 0;
    cfg.seg = NULL;
    cfg.start_at = NULL;
    cfg.on_ready = NULL;
    cfg.rate_samples = false;
    struct sq_result res;
    memset(&res, 0, sizeof(res));
    const char *why = NULL;
    int rc = sq_run(&cfg, &res, &why);
    *o = (struct sq_planrun_once){.ran = true};
    if (rc < 0) {
        snprintf(o->why, sizeof(o->why), "%s: %s", why ? why : "run", sq_strerror(rc));
    } else {
        rc = once_metrics_add(r, sc, &res);
        o->sent = res.c.sent;
        o->completed = res.c.completed;
        o->failed = res.c.failed;
        o->http_failed = res.c.http_failed;
        o->checks_passed = res.c.checks_passed;
        o->checks_failed = res.c.checks_failed;
        o->iterations = res.c.iterations;
        o->duration_ns = res.duration_ns;
        if (k.nomem)
            rc = -ENOMEM;
        else if (o->iterations == 0)
            snprintf(o->why, sizeof(o->why), "its flow did not complete%s",
                     res.aborted ? " (stopped)" : "");
        else if (o->failed)
            snprintf(o->why, sizeof(o->why), "%" PRIu64 " of its %" PRIu64 " requests failed",
                     o->failed, o->sent);
        else if (o->checks_failed)
            snprintf(o->why, sizeof(o->why), "%" PRIu64 " of its %" PRIu64 " checks failed",
                     o->checks_failed, o->checks_failed + o->checks_passed);
        else if (k.stopped)
            snprintf(o->why, sizeof(o->why), "it stopped early (on_error: next_iteration)");
        else
            o->ok = true;
    }
    if (rc == 0 && o->ok && !teardown) {
        struct sq_str *vals = calloc(k.n ? k.n : 1, sizeof(*vals));
        for (uint32_t i = 0; vals && i < k.n; i++)
            vals[i] = (struct sq_str){k.vals[i].p, k.vals[i].len};
        rc = vals ? sq_feeder_set_row(p->feeders[p->setup_feeder].data, vals) : -ENOMEM;
        free(vals);
    }
    for (uint32_t i = 0; i < k.n; i++)
        sq_buf_dispose(&k.vals[i]);
    free(k.vals);
    sq_result_dispose(&res);
    return rc == -ENOMEM ? rc : 0;
}

json_t *sq_planrun_setup_json(const struct sq_planrun *r, char *err, size_t len)
{
    const struct sq_plan *p = r->plan;
    json_t *o = json_object();
    if (!o || !p->setup || p->setup_feeder < 0) {
        if (!o)
            snprintf(err, len, "out of memory");
        return o;
    }
    const struct sq_feeder *f = p->feeders[p->setup_feeder].data;
    for (size_t i = 0; i < f->ncolumns; i++) {
        const struct sq_str *c = &f->cells[i];
        json_t *v = json_stringn(c->len ? c->p : "", c->len);
        if (!v) {
            snprintf(err, len, "setup.%s: its value is not UTF-8 text (it cannot be sent)",
                     f->columns[i]);
            json_decref(o);
            return NULL;
        }
        if (json_object_set_new(o, f->columns[i], v) < 0) {
            snprintf(err, len, "out of memory");
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

int sq_planrun_setup_from_json(struct sq_planrun *r, const json_t *vals, char *err, size_t len)
{
    const struct sq_plan *p = r->plan;
    if (!p->setup || p->setup_feeder < 0)
        return 0;
    struct sq_feeder *f = p->feeders[p->setup_feeder].data;
    if (!json_is_object(vals))
        return plan_fail(err, len, "%s: setup: its values did not come with the job", p->file);
    struct sq_str *v = calloc(f->ncolumns ? f->ncolumns : 1, sizeof(*v));
    if (!v)
        return no_memory(err, len);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < f->ncolumns; i++) {
        const json_t *s = json_object_get(vals, f->columns[i]);
        if (!json_is_string(s))
            rc = plan_fail(err, len, "%s: setup.%s: its value did not come with the job", p->file,
                           f->columns[i]);
        else
            v[i] = (struct sq_str){json_string_value(s), json_string_length(s)};
    }
    if (rc == 0 && sq_feeder_set_row(f, v) < 0)
        rc = no_memory(err, len);
    free(v);
    return rc;
}
