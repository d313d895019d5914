/* cli/wrk_cmd.c - `squall wrk`: wrk's flags, wrk's report and wrk's Lua scripts on squall's
 * engine (docs/wrk.md).
 *
 * The flags are wrk 4.1.0's (-t -c -d -s -H --latency --timeout -v), with its number and time
 * grammar (a count may carry k, M, G...; a time is whole seconds, minutes or hours), and the
 * arguments after the URL (after "--" when they look like flags) go to init(args) as in wrk.
 * The report on stdout is wrk's, line for line and unit for unit, so what parses wrk's output
 * keeps working; squall's own figures (errors by kind, the JSON document, the intended-time
 * latency of -R) are one line away on stderr. The script, or its absence, goes through
 * face/wrkscript.h either way: without -s the request is the one wrk would render.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/wrk.h"
#include "face/flags.h"
#include "face/netopts.h"
#include "engine/run.h"
#include "face/wrkscript.h"
#include "http/url.h"
#include "net/sock.h"
#include "output/json.h"
#include "stats/hist.h"

#define FACE        "squall wrk"
#define MAX_HEADERS 64

static const char usage[] =
    "usage: squall wrk <options> <url> [-- script args]\n"
    "  wrk's flags, report and Lua scripts on squall's engine (docs/wrk.md)\n"
    "\n"
    "  -c, --connections <N>  connections to keep open (default 10)\n"
    "  -d, --duration    <T>  duration of the test (default 10s)\n"
    "  -t, --threads     <N>  threads to use (default 2)\n"
    "  -s, --script      <S>  load a Lua script file (wrk's API)\n"
    "  -H, --header      <H>  add a header to the request ('Name: value')\n"
    "      --latency          print the latency distribution\n"
    "      --timeout     <T>  request timeout (default 2s)\n"
    "  -v, --version          print the version\n"
    "\n"
    "  squall's own:\n"
    "  -R, --rate        <N>  open loop, like wrk2: N requests per second in all, latency\n"
    "                         from each request's intended send time\n"
    "      --json     <FILE>  also write squall's result document (- for stdout; the report\n"
    "                         then goes to stderr)\n"
    "      --seed        <N>  math.random's seed for the script's states (default: drawn from\n"
    "                         the OS; the report's last lines say which, to replay it)\n"
    "\n"
    "  Numeric arguments may include a SI unit (1k, 1M, 1G)\n"
    "  Time arguments may include a time unit (2s, 2m, 2h); squall also takes 500ms, 1m30s\n"
    "\n"
    "exit status: 0 the run completed, 1 it could not run (no connection, a script error\n"
    "             during the run) or no request got a response, 2 bad flags, URL or script\n";

/* ---- wrk's number and time grammar ---- */

/* "<digits>[unit]": unit matched without case against the scale's names (up to 2 letters, as
 * wrk reads them). Returns false for anything else. */
static bool scan_units(const char *s, uint64_t *out, uint64_t scale, const char *base,
                       const char *const *units)
{
    if (!isdigit((unsigned char)s[0]))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    uint64_t mult = 1;
    if (*end && strcasecmp(end, base) != 0) {
        size_t i;
        for (i = 0; units[i]; i++) {
            mult *= scale;
            if (strcasecmp(end, units[i]) == 0)
                break;
        }
        if (!units[i])
            return false;
    }
    if (mult && v > UINT64_MAX / mult)
        return false;
    *out = (uint64_t)v * mult;
    return true;
}

static bool scan_metric(const char *s, uint64_t *out)
{
    static const char *const units[] = {"k", "M", "G", "T", "P", NULL};
    return scan_units(s, out, 1000, "", units);
}

/* A time: wrk's (whole seconds, "2m", "2h"), else squall's durations ("500ms", "1m30s"). */
static bool scan_time(const char *s, int64_t *ns)
{
    static const char *const units[] = {"m", "h", NULL};
    uint64_t secs;
    if (scan_units(s, &secs, 60, "s", units)) {
        if (secs > INT64_MAX / SQ_NS_PER_S)
            return false;
        *ns = (int64_t)secs * SQ_NS_PER_S;
        return true;
    }
    return sq_parse_duration(s, SQ_NS_PER_S, ns) == 0;
}

/* ---- wrk's units in the report ---- */

/* n in the largest unit it reaches 85% of, as wrk shows it: "%.{prec}f" and the unit. */
static void fmt_units(char *buf, size_t size, double n, double scale, const char *base,
                      const char *const *units, int prec)
{
    const char *unit = base;
    for (int i = 0; units[i + 1] && n >= scale * 0.85; i++) {
        n /= scale;
        unit = units[i];
    }
    snprintf(buf, size, "%.*f%s", prec, n, unit);
}

static void fmt_binary(char *buf, size_t size, double n)
{
    static const char *const units[] = {"K", "M", "G", "T", "P", NULL};
    fmt_units(buf, size, n, 1024, "", units, 2);
}

static void fmt_metric(char *buf, size_t size, double n)
{
    static const char *const units[] = {"k", "M", "G", "T", "P", NULL};
    fmt_units(buf, size, n, 1000, "", units, 2);
}

static void fmt_time_us(char *buf, size_t size, double n)
{
    static const char *const us[] = {"ms", "s", NULL};
    static const char *const s[] = {"m", "h", NULL};
    if (n >= 1000000.0)
        fmt_units(buf, size, n / 1000000.0, 60, "s", s, 2);
    else
        fmt_units(buf, size, n, 1000, "us", us, 2);
}

static void fmt_time_s(char *buf, size_t size, double n)
{
    static const char *const s[] = {"m", "h", NULL};
    fmt_units(buf, size, n, 60, "s", s, 0);
}

typedef void (*fmt_fn)(char *buf, size_t size, double n);

/* A figure right-aligned in width, its unit letters eating into the two spaces after it, so the
 * numbers line up whatever their units (wrk's print_units). */
static void print_units(FILE *f, double n, fmt_fn fmt, int width)
{
    char msg[64];
    fmt(msg, sizeof(msg), n);
    size_t len = strlen(msg);
    int pad = 2;
    if (len >= 1 && isalpha((unsigned char)msg[len - 1]))
        pad--;
    if (len >= 2 && isalpha((unsigned char)msg[len - 2]))
        pad--;
    width -= pad;
    fprintf(f, "%*.*s%.*s", width, width, msg, pad, "  ");
}

/* Mean, sample deviation, max and the share within one deviation of the mean, from a histogram
 * (bucket midpoints; exact below 2048). */
struct figs {
    double mean, stdev, max, within;
};

static void hist_figs(const struct sq_hist *h, struct figs *o)
{
    memset(o, 0, sizeof(*o));
    int64_t n = h ? sq_hist_total(h) : 0;
    if (n <= 0)
        return;
    struct sq_hist_iter it;
    double sum = 0;
    sq_hist_iter_init(&it, h);
    while (sq_hist_iter_next(&it))
        sum += (double)(it.lowest + it.value) / 2.0 * (double)it.count;
    o->mean = sum / (double)n;
    double sq = 0;
    sq_hist_iter_init(&it, h);
    while (sq_hist_iter_next(&it)) {
        double d = (double)(it.lowest + it.value) / 2.0 - o->mean;
        sq += d * d * (double)it.count;
    }
    o->stdev = n > 1 ? sqrt(sq / (double)(n - 1)) : 0;
    o->max = (double)sq_hist_max(h);
    double lo = o->mean - o->stdev, hi = o->mean + o->stdev;
    int64_t in = 0;
    sq_hist_iter_init(&it, h);
    while (sq_hist_iter_next(&it)) {
        double v = (double)(it.lowest + it.value) / 2.0;
        if (v >= lo && v <= hi)
            in += it.count;
    }
    o->within = (double)in / (double)n * 100.0;
}

static void print_stats(FILE *f, const char *name, const struct sq_hist *h, fmt_fn fmt)
{
    struct figs g;
    hist_figs(h, &g);
    fprintf(f, "    %-10s", name);
    print_units(f, g.mean, fmt, 8);
    print_units(f, g.stdev, fmt, 10);
    print_units(f, g.max, fmt, 9);
    fprintf(f, "%8.2f%%\n", g.within);
}

void sq_cli_wrk_report(FILE *f, const struct sq_result *r, bool latency)
{
    fprintf(f, "  Thread Stats%6s%11s%8s%12s\n", "Avg", "Stdev", "Max", "+/- Stdev");
    print_stats(f, "Latency", r->latency, fmt_time_us);
    print_stats(f, "Req/Sec", r->rate, fmt_metric);
    if (latency) {
        static const double pcts[] = {50.0, 75.0, 90.0, 99.0};
        fprintf(f, "  Latency Distribution\n");
        for (size_t i = 0; i < SQ_ARRAY_LEN(pcts); i++) {
            int64_t v = r->latency && sq_hist_total(r->latency)
                            ? sq_hist_percentile(r->latency, pcts[i])
                            : 0;
            fprintf(f, "%7.0f%%", pcts[i]);
            print_units(f, (double)v, fmt_time_us, 10);
            fprintf(f, "\n");
        }
    }
    char rt[32], rd[32];
    int64_t us = r->duration_ns / SQ_NS_PER_US;
    fmt_time_us(rt, sizeof(rt), (double)us);
    fmt_binary(rd, sizeof(rd), (double)r->c.bytes_received);
    fprintf(f, "  %" PRIu64 " requests in %s, %sB read\n", r->c.completed, rt, rd);
    uint64_t ec, er, ew, es, et;
    sq_wrk_errors(&r->c, &ec, &er, &ew, &es, &et);
    if (ec || er || ew || et)
        fprintf(f,
                "  Socket errors: connect %" PRIu64 ", read %" PRIu64 ", write %" PRIu64
                ", timeout %" PRIu64 "\n",
                ec, er, ew, et);
    if (es)
        fprintf(f, "  Non-2xx or 3xx responses: %" PRIu64 "\n", es);
    double secs = us > 0 ? (double)us / 1e6 : 1e-6;
    char tr[32];
    fmt_binary(tr, sizeof(tr), (double)r->c.bytes_received / secs);
    fprintf(f, "Requests/sec: %9.2f\n", (double)r->c.completed / secs);
    fprintf(f, "Transfer/sec: %10sB\n", tr);
}

/* ---- the script block of the result document ---- */

json_t *sq_cli_script_json(const char *file, unsigned hooks, const struct sq_result *r)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{SQ_SCRIPT_SETUP, "setup"},       {SQ_SCRIPT_INIT, "init"},
                 {SQ_SCRIPT_DELAY, "delay"},       {SQ_SCRIPT_REQUEST, "request"},
                 {SQ_SCRIPT_RESPONSE, "response"}, {SQ_SCRIPT_DONE, "done"}};
    json_t *h = json_array();
    for (size_t i = 0; i < SQ_ARRAY_LEN(names); i++)
        if (hooks & names[i].bit)
            json_array_append_new(h, json_string(names[i].name));
    bool stat = !(hooks & (SQ_SCRIPT_REQUEST | SQ_SCRIPT_RESPONSE | SQ_SCRIPT_DELAY));
    return json_pack("{s:s?, s:o, s:b, s:{s:I, s:I, s:I}, s:I, s:s?}", "file", file, "hooks", h,
                     "static_request", stat, "calls", "request", (json_int_t)r->c.script_requests,
                     "response", (json_int_t)r->c.script_responses, "delay",
                     (json_int_t)r->c.script_delays, "stopped_threads",
                     (json_int_t)r->script_stopped, "error", r->script_error);
}

/* ---- flags ---- */

struct wrk_opts {
    uint64_t threads, connections;
    int64_t duration_ns, timeout_ns;
    const char *script, *json_path, *url;
    double rate;
    bool latency, version;
    const char *hname[MAX_HEADERS];
    const char *hvalue[MAX_HEADERS];
    char *hbuf[MAX_HEADERS];
    size_t nheaders;
    int argc; /* init()'s args after the URL */
    char **argv;
    uint64_t seed; /* --seed */
    bool seed_set;
};

enum { OPT_LATENCY = 256, OPT_TIMEOUT, OPT_JSON, OPT_SEED };

/* -H: wrk's shape, the name, ": ", the value. Returns 0 or the exit status. */
static int take_header(struct wrk_opts *o, const char *flag, const char *arg)
{
    const char *sep = strstr(arg, ": ");
    if (!sep || sep == arg || strpbrk(arg, "\r\n"))
        return sq_cli_usage_error(FACE, "%s: '%s' is not a header ('Name: value')", flag, arg);
    if (o->nheaders == MAX_HEADERS)
        return sq_cli_usage_error(FACE, "%s: '%s': at most %d headers", flag, arg, MAX_HEADERS);
    char *nm = strndup(arg, (size_t)(sep - arg));
    if (!nm)
        return SQ_EXIT_FAIL;
    o->hbuf[o->nheaders] = nm;
    o->hname[o->nheaders] = nm;
    o->hvalue[o->nheaders] = sep + 2;
    o->nheaders++;
    return 0;
}

/* -R: requests per second, a real number. Returns 0 or the exit status. */
static int take_rate(struct wrk_opts *o, const char *flag, const char *arg)
{
    char *end;
    o->rate = strtod(arg, &end);
    if (*end || arg[0] == '\0' || !(o->rate > 0 && o->rate <= 1e8))
        return sq_cli_usage_error(
            FACE, "%s: '%s' is not a rate (requests per second, 0 < N <= 100000000)", flag, arg);
    return 0;
}

/* One flag getopt_long returned. Returns 0, SQ_EXIT_DONE (--help answered) or the exit status
 * after printing why. */
static int take_flag(void *ud, const struct option *longs, int opt, const char *flag)
{
    struct wrk_opts *o = ud;
    switch (opt) {
    case 't':
        if (!scan_metric(optarg, &o->threads) || o->threads == 0 || o->threads > 1024)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a thread count (1..1024)", flag,
                                      optarg);
        return 0;
    case 'c':
        if (!scan_metric(optarg, &o->connections) || o->connections == 0 ||
            o->connections > 1000000)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a connection count (1..1000000)", flag,
                                      optarg);
        return 0;
    case 'd':
        if (!scan_time(optarg, &o->duration_ns) || o->duration_ns <= 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a duration (10s, 2m, 1h)", flag,
                                      optarg);
        return 0;
    case 's':
        o->script = optarg;
        return 0;
    case 'H':
        return take_header(o, flag, optarg);
    case 'L':
    case OPT_LATENCY:
        o->latency = true;
        return 0;
    case 'T':
    case OPT_TIMEOUT:
        if (!scan_time(optarg, &o->timeout_ns) || o->timeout_ns <= 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a duration (2s, 1m)", flag, optarg);
        return 0;
    case 'R':
        return take_rate(o, flag, optarg);
    case OPT_JSON:
        o->json_path = optarg;
        return 0;
    case OPT_SEED: {
        char msg[SQ_PREP_ERRLEN];
        if (sq_flag_seed(flag, optarg, &o->seed, msg, sizeof(msg)) < 0)
            return sq_cli_usage_error(FACE, "%s", msg);
        o->seed_set = true;
        return 0;
    }
    case 'v':
        /* wrk prints its version and goes on: with a URL the run still happens */
        printf("squall wrk %s: wrk 4.1.0's flags, report and Lua API on squall's engine\n",
               SQ_VERSION);
        o->version = true;
        return 0;
    case 'h':
        fputs(usage, stdout);
        return SQ_EXIT_DONE;
    default: {
        char msg[SQ_PREP_ERRLEN];
        sq_flag_refused(longs, opt, flag, msg, sizeof(msg));
        return sq_cli_usage_error(FACE, "%s", msg);
    }
    }
}

/* The flags, then the URL and init()'s arguments after it. Returns 0, SQ_EXIT_DONE (--help, or
 * -v without a URL) or the exit status after printing why. */
static int parse_flags(int argc, char **argv, struct wrk_opts *o)
{
    static const struct option longs[] = {
        {"connections", required_argument, NULL, 'c'},
        {"duration", required_argument, NULL, 'd'},
        {"threads", required_argument, NULL, 't'},
        {"script", required_argument, NULL, 's'},
        {"header", required_argument, NULL, 'H'},
        {"latency", no_argument, NULL, OPT_LATENCY},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"rate", required_argument, NULL, 'R'},
        {"json", required_argument, NULL, OPT_JSON},
        {"seed", required_argument, NULL, OPT_SEED},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'v'},
        {NULL, 0, NULL, 0},
    };
    int rc = sq_cli_getopt(argc, argv, ":t:c:d:s:H:T:R:Lvh", longs, take_flag, o);
    if (rc)
        return rc;
    if (optind >= argc) {
        if (o->version)
            return SQ_EXIT_DONE;
        return sq_cli_usage_error(FACE, "no URL given");
    }
    o->url = argv[optind];
    o->argc = argc - optind - 1;
    o->argv = argv + optind + 1;
    if (o->connections < o->threads)
        return sq_cli_usage_error(
            FACE, "number of connections must be >= threads (-c %" PRIu64 " -t %" PRIu64 ")",
            o->connections, o->threads);
    return 0;
}

/* ---- the command: parse -> prepare -> run -> render ---- */

/* What the phases of one `squall wrk` share. */
struct wrk {
    struct wrk_opts o;
    struct sq_url url;
    char *port; /* wrk.port: as written in the URL, or NULL */
    struct sq_run_config cfg;
    struct sq_net net; /* the resolved target; --dns-ttl would call back into it */
    struct sq_script_header hs[MAX_HEADERS];
    struct sq_script_target target; /* the script's wrk table: scheme, host, port, -H */
    struct sq_wrk_script ws;
    FILE *rep;  /* wrk's report: stdout, or stderr when --json - takes stdout */
    FILE *json; /* the document's stream (NULL: no --json): jfile.f or the saved stdout */
    struct sq_cli_file jfile;
    struct sq_result res;
};

/* The port as written in the URL (wrk.port), or NULL when it has none. */
static char *url_port(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = strcspn(p, "/?#");
    const char *end = p + n;
    if (*p == '[') {
        const char *rb = memchr(p, ']', n);
        if (!rb)
            return NULL;
        p = rb + 1;
    }
    const char *colon = memchr(p, ':', (size_t)(end - p));
    if (!colon || colon + 1 == end)
        return NULL;
    return strndup(colon + 1, (size_t)(end - colon - 1));
}

/* The URL, the executor, threads, the seed and the target resolved. Returns 0 or the exit
 * status after printing why. */
static int wrk_config(struct wrk *w)
{
    const struct wrk_opts *o = &w->o;
    const char *why = NULL;
    int rc = sq_url_parse(o->url, &w->url, &why);
    if (rc < 0)
        return sq_cli_usage_error(FACE, "invalid URL '%s': %s", o->url,
                                  why ? why : sq_strerror(rc));
    w->port = url_port(o->url);
    struct sq_run_config *cfg = &w->cfg;
    *cfg = (struct sq_run_config){
        .timeout_ns = o->timeout_ns,
        .connect_timeout_ns = 5 * SQ_NS_PER_S,
        .rate_samples = true,
    };
    cfg->exec.vus = (uint32_t)o->connections;
    if (o->rate > 0) {
        cfg->exec.kind = SQ_EXEC_CONSTANT_ARRIVAL_RATE;
        cfg->exec.rate = o->rate;
        cfg->exec.start_rate = o->rate;
    } else {
        cfg->exec.kind = SQ_EXEC_CONSTANT_VUS;
    }
    cfg->exec.duration_ns = o->duration_ns;
    if (sq_exec_prepare(&cfg->exec, &why) < 0)
        return sq_cli_usage_error(FACE, "%s", why);
    cfg->threads = (uint32_t)o->threads;
    /* drawn before the script's states are built: each seeds its math.random from it */
    cfg->seed = o->seed_set ? o->seed : sq_run_new_seed();
    cfg->seed_set = true;
    /* wrk verifies no certificate; neither does its drop-in. */
    struct sq_netopts nopts = {0};
    nopts.tls.insecure = true;
    char err[8192];
    if ((rc = sq_net_setup(&w->net, &nopts, &w->url, NULL, cfg, err, sizeof(err))) < 0 ||
        (rc = sq_net_sources(&w->net, &nopts, o->connections, cfg, err, sizeof(err))) < 0)
        return sq_cli_prep_error(FACE, rc, err);
    return 0;
}

/* --json -: the document takes stdout; the report and whatever the script prints go to
 * stderr. Returns 0 or SQ_EXIT_FAIL after printing why. */
static int wrk_json_stdout(struct wrk *w)
{
    fflush(stdout);
    int jfd = dup(STDOUT_FILENO);
    if (jfd < 0 || !(w->json = fdopen(jfd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        fprintf(stderr, "%s: --json -: %s\n", FACE, strerror(errno));
        if (jfd >= 0 && !w->json)
            close(jfd);
        return SQ_EXIT_FAIL;
    }
    return 0;
}

/* The script's states (or wrk's own request without -s), built in wrk's order. Returns 0 or
 * the exit status after printing why. */
static int wrk_script(struct wrk *w)
{
    const struct wrk_opts *o = &w->o;
    for (size_t i = 0; i < o->nheaders; i++)
        w->hs[i] = (struct sq_script_header){.name = o->hname[i], .value = o->hvalue[i]};
    w->target = (struct sq_script_target){
        .scheme = w->url.scheme,
        .host = w->url.host,
        .port = w->port,
        .path = w->url.path,
        .headers = w->hs,
        .nheaders = o->nheaders,
    };
    struct sq_wrk_script_args sa = {
        .file = o->script,
        .url = o->url,
        .target = &w->target,
        .argc = o->argc,
        .argv = (const char *const *)o->argv,
        .workers = sq_run_workers(&w->cfg),
        .addrs = w->cfg.addrs,
        .naddrs = w->cfg.naddrs,
        .seed = w->cfg.seed,
    };
    char err[8192];
    int rc = sq_wrk_script_open(&w->ws, &sa, err, sizeof(err));
    if (rc < 0) {
        /* a script that does not load, or fails before the run: nothing was sent */
        fprintf(stderr, "%s: %s\n", FACE, err);
        return rc == -ENOMEM ? SQ_EXIT_FAIL : SQ_EXIT_USAGE;
    }
    w->cfg.script = &w->ws.run;
    w->cfg.request = w->ws.request;
    w->cfg.request_len = w->ws.request_len;
    return 0;
}

/* Everything before the first packet: the run's configuration, the script, the open-file limit
 * and the --json file. Returns 0 or the exit status after printing why. */
static int wrk_prepare(struct wrk *w)
{
    const struct wrk_opts *o = &w->o;
    int rc = wrk_config(w);
    w->rep = stdout;
    if (rc == 0 && o->json_path && strcmp(o->json_path, "-") == 0)
        rc = wrk_json_stdout(w);
    if (rc == 0)
        rc = wrk_script(w);
    if (rc)
        return rc;
    char err[8192];
    if ((rc = sq_net_raise_nofile(o->connections, "connections", err, sizeof(err))) < 0)
        return sq_cli_prep_error(FACE, rc, err);
    if (o->json_path && !w->json) {
        /* written atomically: a temporary file renamed into place once complete */
        if ((rc = sq_cli_file_open(FACE, "--json", o->json_path, &w->jfile)) != 0)
            return rc;
        w->json = w->jfile.f;
    }
    return 0;
}

/* wrk's header lines, then the run. Returns 0 when it took place, or SQ_EXIT_FAIL. */
static int wrk_run(struct wrk *w)
{
    char dur[32];
    fmt_time_s(dur, sizeof(dur), (double)w->o.duration_ns / 1e9);
    fprintf(w->rep, "Running %s test @ %s\n", dur, w->o.url);
    fprintf(w->rep, "  %" PRIu64 " threads and %" PRIu64 " connections\n", w->o.threads,
            w->o.connections);
    fflush(w->rep);
    const char *why = NULL;
    w->cfg.stop = sq_cli_signals_begin();
    int rc = sq_run(&w->cfg, &w->res, &why);
    sq_cli_signals_end();
    if (rc < 0) {
        fprintf(stderr, "%s: %s: %s\n", FACE, why, sq_strerror(rc));
        return SQ_EXIT_FAIL;
    }
    return 0;
}

/* --json: the result document, with the script block. */
static void wrk_json(struct wrk *w)
{
    char addr[80], stamp_run[16];
    sq_addr_format(&w->cfg.addrs[0], addr, sizeof(addr));
    sq_stamp_run_text(w->res.run_id, stamp_run);
    struct sq_report_info info = {
        .url = w->o.url,
        .method = "GET",
        .target_addr = addr,
        .exec = &w->cfg.exec,
        .threads = w->res.threads,
        .timeout_ns = w->cfg.timeout_ns,
        .connect_timeout_ns = w->cfg.connect_timeout_ns,
        .request_bytes = w->cfg.request_len,
        .protocol = "http/1.1",
        .stamp_run = stamp_run,
        .source_addrs = w->net.src_names,
        .nsource_addrs = w->net.nsrc,
        .source_auto = w->net.src_auto,
    };
    json_t *doc = sq_report_json_doc(&info, &w->res);
    if (!doc)
        return;
    json_object_set_new(doc, "script", sq_cli_script_json(w->o.script, w->ws.hooks, &w->res));
    if (sq_report_json_write(w->json, doc) < 0) {
        fprintf(stderr, "%s: --json: write failed\n", FACE);
    } else if (w->jfile.f && w->json == w->jfile.f) {
        sq_cli_file_commit(&w->jfile); /* closes it */
        w->json = NULL;
    }
    json_decref(doc);
}

/* squall's own figures on stderr, one line away from wrk's layout. */
static void wrk_footer(const struct wrk *w)
{
    const struct sq_result *res = &w->res;
    char kinds[512];
    size_t kl = 0;
    kinds[0] = '\0';
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        if (res->c.errors[k] && kl < sizeof(kinds))
            kl += (size_t)snprintf(kinds + kl, sizeof(kinds) - kl, "%s%s %" PRIu64, kl ? ", " : "",
                                   sq_errk_name((enum sq_errk)k), res->c.errors[k]);
    if (kinds[0])
        fprintf(stderr, "squall: errors by kind: %s\n", kinds);
    if (res->open && res->c.dropped)
        fprintf(stderr,
                "squall: %" PRIu64 " of %" PRIu64
                " arrivals dropped (no connection free: raise -c)\n",
                res->c.dropped, res->arrivals);
    if (w->o.script) /* what math.random drew: given back, it draws the same */
        fprintf(stderr, "squall: seed %llu (--seed %llu replays the script's math.random)\n",
                (unsigned long long)res->seed, (unsigned long long)res->seed);
    fprintf(stderr, "squall: errors by kind and the full result with --json FILE%s; docs/wrk.md\n",
            res->open ? "; latency above is from each request's intended send (-R)"
                      : "; -R N measures latency from the intended send, like wrk2");
}

/* The document, wrk's report, the script's done(), squall's own lines; the exit status. */
static int wrk_render(struct wrk *w)
{
    const struct sq_result *res = &w->res;
    if (w->json)
        wrk_json(w);
    if (res->script_error) {
        fprintf(stderr, "%s: the run stopped on a script error: %s\n", FACE, res->script_error);
        return SQ_EXIT_FAIL;
    }
    /* nothing completed and the run gave up by itself (not a signal): wrk's report would be
     * empty, the reason is the one line */
    if (res->aborted && res->c.completed == 0 && !(w->cfg.stop && *w->cfg.stop)) {
        fprintf(stderr, "%s: %s\n", FACE, res->abort_reason);
        return SQ_EXIT_FAIL;
    }
    sq_cli_wrk_report(w->rep, res, w->o.latency);
    fflush(w->rep);
    char err[8192];
    if (sq_wrk_script_done(&w->ws, res, err, sizeof(err)) < 0) {
        fflush(stdout);
        fprintf(stderr, "%s: done(): %s\n", FACE, err);
        return SQ_EXIT_FAIL;
    }
    fflush(stdout);
    wrk_footer(w);
    return sq_cli_run_status(res, 0, w->cfg.timeout_ns);
}

static void wrk_dispose(struct wrk *w)
{
    if (w->jfile.f)
        sq_cli_file_discard(&w->jfile); /* not written: nothing under its name */
    else if (w->json)
        fclose(w->json);
    sq_result_dispose(&w->res);
    sq_wrk_script_close(&w->ws);
    sq_net_dispose(&w->net);
    sq_url_dispose(&w->url);
    free(w->port);
    for (size_t i = 0; i < w->o.nheaders; i++)
        free(w->o.hbuf[i]);
}

int sq_cli_wrk(int argc, char **argv)
{
    struct wrk w = {.o = {
                        .threads = 2,
                        .connections = 10,
                        .duration_ns = 10 * SQ_NS_PER_S,
                        .timeout_ns = 2 * SQ_NS_PER_S,
                    }};
    int rc = parse_flags(argc, argv, &w.o);
    if (rc == 0)
        rc = wrk_prepare(&w);
    if (rc == 0)
        rc = wrk_run(&w);
    if (rc == 0)
        rc = wrk_render(&w);
    wrk_dispose(&w);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
