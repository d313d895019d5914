/* face/planrun.h - the plan face (`squall run PLAN`) up to the engine and after it: its flags,
 * the run a loaded plan prepares, and the thresholds watched while it goes and judged at its end.
 *
 * Shared by the CLI and the daemon, so both refuse the same plan with the same words:
 *
 *   sq_planrun_parse_argv     the face's flags (threads, timeouts, DNS/TLS, no-compression,
 *                             --http2, the --out files...)
 *   sq_plan_load / sq_plan_load_text (plan/plan.h)   the plan, from a file or from text
 *   sq_planrun_prepare        thresholds checked, a flow compiled per scenario, the target
 *                             and every other destination resolved through the run's egress
 *                             policy, the TLS client: a run configuration (nothing sent)
 *   sq_planrun_begin          the first token of auth.oauth2, just before the run
 *   sq_planrun_watch_tick     each second: the running totals, abortOnFail thresholds
 *   sq_planrun_finish         the verdicts, and the run marked when a threshold stopped it
 *
 * Messages and return codes follow face/flags.h: -SQ_EUSAGE names a flag, -SQ_EPARSE is the
 * plan's fault ("plan.yaml:3:5: key: why", "plan.yaml: scenario 'a': why"). Nothing prints.
 */
#ifndef SQ_FACE_PLANRUN_H
#define SQ_FACE_PLANRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "face/distopts.h"
#include "face/netopts.h"
#include "engine/oauth.h"
#include "engine/run.h"
#include "face/watchopt.h"
#include "result/verdict.h"
#include "http/url.h"
#include "plan/plan.h"

/* The plan face's flags. Strings are borrowed from the arguments. */
struct sq_planrun_opts {
    const char *plan;           /* the plan file (the argument) */
    uint64_t threads;           /* per scenario; 0: the online CPUs */
    int64_t timeout_ns;         /* unless the plan sets one; default 10 s */
    int64_t connect_timeout_ns; /* default 5 s */
    bool no_compression, no_phases;
    bool http2;       /* --http2: every scenario over HTTP/2 (else each says, `protocol: h2`) */
    bool http3;       /* --http3: every scenario over HTTP/3 (else `protocol: h3`) */
    bool h3_0rtt;     /* --h3-0rtt: HTTP/3 connections resume with 0-RTT */
    uint64_t streams; /* --streams: HTTP/2 streams (VUs) per connection; 1 unless given */
    /* Refuse a plan with script: (a daemon that runs plans its clients send: their Lua could
     * use io and os). Not a flag; false from sq_planrun_opts_init. */
    bool refuse_scripts;
    /* the caller runs the plan's setup: and teardown: (sq_planrun_once); without it (or
     * once_elsewhere) a plan that has them is refused */
    bool run_once;
    /* they run elsewhere (an agent: its controller runs them once for the whole test and sends
     * setup's values, sq_planrun_setup_from_json): not compiled here, nothing refused */
    bool once_elsewhere;
    struct sq_netopts net;
    struct sq_distopts dist; /* --agents N --nats URL...: a run on agents */
    const char *name;        /* --name: the run's name (over the plan's name:) */
    double percentiles[16];  /* --percentiles; npercentiles 0: the default list */
    size_t npercentiles;
    struct sq_watch_opts watch; /* --watch PID, --watch-name NAME (face/watchopt.h) */
    uint64_t sample_responses;  /* --sample-responses N: exchanges kept per class (5; 0: none) */
    uint64_t seed;              /* --seed N: the random values' seed, over the plan's seed: */
    bool seed_set;
    bool no_redact; /* --no-redact (or the plan's redact: false): keep credentials */
    /* --max-redirects N (0..100): over defaults.max_redirects, under a step's own redirects;
     * -1: not given */
    int64_t max_redirects;
    /* The CLI's own outputs and terminal. */
    const char *json_path, *html_path, *junit_path; /* --junit: thresholds and checks, JUnit XML */
    const char *csv_path, *hdr_path, *ndjson_path;  /* --out csv=, hdr=, ndjson= */
    const char *prom_rw_url, *influx_url;           /* --out prometheus-rw=, influxdb= */
    double sample;                                  /* --sample (with ndjson); 0: not given */
    bool quiet;
};

/* The defaults of every flag. */
void sq_planrun_opts_init(struct sq_planrun_opts *o);

/* What sq_planrun_parse_argv returns for --help (the caller prints it). */
enum { SQ_PLANRUN_HELP = 1 };

/* Parses `squall run PLAN [flags]` (argv[0] is "run"; getopt_long may reorder argv, whose strings
 * must outlive o). Returns 0, SQ_PLANRUN_HELP or -SQ_EUSAGE with err naming the flag ("--threads:
 * 'x' is not a thread count (1..1024)", "no plan file given"). Not thread-safe (getopt_long). */
SQ_MUST_CHECK int sq_planrun_parse_argv(struct sq_planrun_opts *o, int argc, char **argv, char *err,
                                        size_t len);

/* A prepared plan run: cfg is ready for sq_run() once the caller adds its own parts (stop,
 * on_tick). cfg points into the struct, so it must stay where it is while the run goes; the
 * plan and the options are borrowed and must outlive it. */
/* What a setup: or teardown: flow did (sq_planrun_once): its requests are counted here, apart
 * from the scenarios'. */
struct sq_planrun_once {
    bool ran;
    bool ok;       /* its iteration completed, every request was answered, every check passed */
    uint64_t sent; /* requests */
    uint64_t completed, failed, http_failed, checks_passed, checks_failed, iterations;
    int64_t duration_ns;
    char why[256]; /* !ok: what went wrong */
};

struct sq_planrun {
    const struct sq_plan *plan;
    const struct sq_planrun_opts *opts;
    struct sq_run_config cfg;
    struct sq_url url;           /* the plan's target */
    const char *h3_proxy_env;    /* every scenario over h3: the proxy variable set for the target
                                    and not used (HTTPS_PROXY, ...: a note), or NULL */
    struct sq_run_scen *scens;   /* one per scenario, each with its compiled flow (owned) */
    const char *accept_encoding; /* offered on requests without their own (NULL: none) */
    uint64_t vus;                /* the VUs of every scenario at their peak: the open-file need */
    bool open;                   /* a scenario has an arrival-rate executor */
    double length_s;             /* the longest scenario's end, its start time included */
    struct sq_net net;
    struct sq_tls_client *tls_h2; /* https plans mixing protocols: the h2 scenarios' client */
    struct sq_quic_client *quic;  /* plans with HTTP/3 scenarios: QUIC's TLS (net/quic.h) */
    size_t nh3;                   /* how many scenarios are over HTTP/3 */
    struct sq_oauth *oauth;       /* the plan's auth.oauth2 token source, or NULL */
    struct sq_watch *watch;       /* the processes --watch names (cfg.watch), or NULL */
    struct sq_run_scen once[2];   /* setup:, teardown: (flow NULL: none; flows owned) */
    struct sq_planrun_once setup, teardown;
    /* the samples setup: and teardown: steps added to the plan's own metrics (metric:), one slot
     * per plan metric; sq_planrun_finish adds them to the result (sq_result.once). NULL: none */
    struct sq_step_stats *once_metrics;
};

/* Runs the plan's setup: (teardown false) or teardown: flow on its own: one VU, one iteration,
 * the run's configuration without its tick, outputs or watch, stopped by *stop. After a setup
 * that completed, every VU of the scenarios and teardown reads its variables as
 * {{setup.NAME}}. Fills r->setup or r->teardown. Returns 0 (nothing to run, or it ran: see its
 * ok), or -ENOMEM. */
SQ_MUST_CHECK int sq_planrun_once(struct sq_planrun *r, bool teardown, volatile int *stop);

/* After a setup that completed (here or elsewhere): its values as a JSON object {NAME: value}
 * (what a controller sends its agents), or NULL (out of memory, or a value that is not UTF-8:
 * err says which). A plan without setup: an empty object. */
json_t *sq_planrun_setup_json(const struct sq_planrun *r, char *err, size_t len);

/* On an agent (once_elsewhere): setup's values from its controller, every one of the plan's
 * setup variables a string in vals; every VU then reads them as {{setup.NAME}}. Returns 0,
 * -SQ_EPARSE (err names the missing or malformed value) or -ENOMEM. */
SQ_MUST_CHECK int sq_planrun_setup_from_json(struct sq_planrun *r, const json_t *vals, char *err,
                                             size_t len);

/* The protocol scenario i runs, as the result names it: "http/1.1", "h2c" or "h2". */
const char *sq_planrun_protocol(const struct sq_planrun *r, size_t i);

/* The plan's source_addrs (the syntax of --source-addrs, net/srcaddr.h), unless the flag (o's)
 * replaces it: 0, or -SQ_EPARSE with err saying "FILE:LINE:COL: source_addrs: why", or -ENOMEM.
 * sq_planrun_prepare calls it; `squall validate` too (no address is bound). */
SQ_MUST_CHECK int sq_planrun_check_sources(const struct sq_plan *p, const struct sq_netopts *o,
                                           char *err, size_t len);

/* Prepares the run of plan p with the flags o, sending nothing: every destination (the target,
 * the brokers of publish and subscribe steps, auth.oauth2.token_url) resolved through
 * o->net.egress. A caller that only checks a plan stops here. Returns 0, -SQ_EPARSE (a threshold
 * the engine cannot evaluate, a bad target URL, a step that does not compile, a script: that
 * does not load or a before/after that names none of its functions: err says "FILE: ..."),
 * -SQ_EUSAGE (a TLS file: err names the flag), -EACCES (the egress policy's refusal, naming
 * its rule), -SQ_ERESOLVE and other negative codes when the run cannot be set up here. r is
 * filled either way: sq_planrun_dispose it. */
SQ_MUST_CHECK int sq_planrun_prepare(struct sq_planrun *r, const struct sq_plan *p,
                                     const struct sq_planrun_opts *o, char *err, size_t len);
/* Just before sq_run(): the first network I/O of the set-up, after every check of the caller's.
 * With auth.oauth2, fetches the first token and starts its refresher (it runs until
 * sq_planrun_finish); -EPROTO when no first token could be had ("auth.oauth2: no token from
 * URL: HTTP 401 ..."). Returns 0 without auth.oauth2. */
SQ_MUST_CHECK int sq_planrun_begin(struct sq_planrun *r, char *err, size_t len);
void sq_planrun_dispose(struct sq_planrun *r);

/* The running totals of a run, fed each second on the main thread (the run's on_tick), and the
 * abortOnFail thresholds judged on them. */
struct sq_planrun_watch {
    const struct sq_plan *plan;
    struct sq_live_totals t;
    bool aborted;  /* an abortOnFail threshold failed */
    char why[256]; /* ... which one */
};

/* Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_planrun_watch_init(struct sq_planrun_watch *w, const struct sq_plan *p);
/* Adds one second (s, and its merged latency histogram h). Returns true once, on the second an
 * abortOnFail threshold fails: the caller then stops the run (its stop flag). */
bool sq_planrun_watch_tick(struct sq_planrun_watch *w, const struct sq_second *s,
                           const struct sq_hist *h);
void sq_planrun_watch_dispose(struct sq_planrun_watch *w);

/* After the run: stops the OAuth2 token source (its figures final), marks res as aborted with the
 * threshold's reason when w (may be NULL) stopped it, and evaluates every threshold into v
 * (sq_th_verdicts_dispose it). Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_planrun_finish(const struct sq_planrun *r, const struct sq_planrun_watch *w,
                                    struct sq_result *res, struct sq_th_verdicts *v);

#endif
