/* cli/quick.c - the quick face: `squall URL [flags]`, a wrk/oha-style one-liner. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/netopts.h"
#include "engine/run.h"
#include "http/decode.h"
#include "http/h2.h"
#include "http/request.h"
#include "http/url.h"
#include "net/sock.h"
#include "output/json.h"
#include "output/ndjson.h"
#include "output/progress.h"
#include "output/series.h"

#define MAX_HEADERS    64
#define MAX_BODY_BYTES (64u << 20)

#define FACE "squall"

/* Everything the run's tick feeds, on the main thread. */
struct ticker {
    struct sq_progress progress;
    bool show;
    FILE *csv, *hdr;
    bool hdr_failed;
};

static void on_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                    const struct sq_hist *hu)
{
    SQ_UNUSED(hu);
    struct ticker *t = ud;
    if (t->show)
        sq_progress_tick(&t->progress, s);
    if (t->csv)
        sq_csv_row(t->csv, s);
    if (t->hdr && !t->hdr_failed && sq_hdrlog_line(t->hdr, s, h) < 0)
        t->hdr_failed = true;
}

static const char usage[] =
    "usage: squall URL [flags]          closed-loop HTTP/1.1 (or --http2) load test (http://\n"
    "                                   or https://)\n"
    "       squall target [flags]       the built-in test server (squall target --help)\n"
    "       squall report FILE [--html OUT]  a saved --json result: its summary, or an HTML\n"
    "                                   report\n"
    "       squall serve [flags]        the daemon: HTTP API, run store, live dashboard\n"
    "                                   (squall serve --help)\n"
    "       squall runs list|show|compare|export  the daemon's stored runs\n"
    "\n"
    "  -c, --connections N     connections (VUs), opened before the start and split across\n"
    "                          threads (default 64)\n"
    "  -d, --duration D        run length: 500ms, 10s, 2m, 1m30s (default 10s)\n"
    "  -n, --requests N        send N requests in all (shared iterations); with -d, the\n"
    "                          longest the run may take (default 10m)\n"
    "  -r, --rate N            open loop: N requests per second whatever the server does\n"
    "                          (latency from each request's intended send time)\n"
    "      --max-in-flight N   open loop: requests in flight plus waiting for a connection;\n"
    "                          past it an arrival is dropped and counted (default: -c)\n"
    "      --stages S          ramp: \"10s:100,30s:100,10s:0\" as VUs (connections), or as\n"
    "                          rates with -r (-r is then the starting rate)\n"
    "      --pacing D          closed loop: each connection starts a request at most every D\n"
    "      --graceful-stop D   let requests in flight at the end finish for up to D (default 0)\n"
    "  -t, --threads N         worker threads (default: online CPUs, at most -c)\n"
    "  -m, --method M          request method (default GET)\n"
    "  -H, --header 'K: V'     add a request header (repeatable)\n"
    "  -b, --body S|@FILE      request body: a string, or the contents of FILE\n"
    "      --timeout D         per-request timeout (default 10s)\n"
    "      --connect-timeout D per-connect timeout (default 5s; the TLS handshake gets as long)\n"
    "      --json FILE|-       write the result as JSON (- for stdout; the summary then goes\n"
    "                          to stderr)\n"
    "      --html FILE         write a self-contained HTML report (charts; opens offline)\n"
    "      --out csv=FILE      write the per-second series as CSV while the run goes\n"
    "      --out hdr=FILE      write HdrHistogram's interval log (one histogram a second)\n"
    "      --out ndjson=FILE   write one JSON line per request (from a writer thread)\n"
    "      --sample F          with --out ndjson: record this share of requests (0 < F <= 1)\n"
    "      --http2             HTTP/2: h2c with prior knowledge for http:// (RFC 9113 3.3)\n"
    "      --streams N         with --http2: concurrent streams per connection (default 1);\n"
    "                          VUs = connections x streams, each stream slot one VU\n"
    "      --no-compression    do not send Accept-Encoding (default: gzip, deflate, br, zstd;\n"
    "                          compressed bodies are decoded and counted either way)\n"
    "      --no-phases         do not record per-phase timings (blocked, connecting,\n"
    "                          sending, waiting, receiving...)\n"
    "  -q, --quiet             no progress line and no summary on the terminal\n"
    "  -h, --help              this help\n"
    "  -V, --version           print the version\n";

static const char usage_tail[] =
    "\n"
    "exit status: 0 the run completed, 1 it could not do its job (nothing succeeded),\n"
    "             2 bad flags or URL\n";

void sq_cli_usage(FILE *f)
{
    fputs(usage, f);
    fputs(sq_cli_net_usage, f);
    fputs(usage_tail, f);
}

/* Reads -b @FILE. Returns 0, -errno (-EISDIR for a directory), -SQ_ETOOBIG or -ENOMEM. */
static int read_body_file(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return -EISDIR;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        if (n == cap) {
            if (cap >= MAX_BODY_BYTES) {
                rc = -SQ_ETOOBIG;
                break;
            }
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb)
                break;
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                rc = -EIO;
            break;
        }
    }
    fclose(f);
    if (!buf)
        return -ENOMEM;
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* True when m is a method the request line can carry (an RFC 9110 token): the serialiser
 * itself is asked, so the flag check and the request cannot disagree. */
static bool method_ok(const char *m)
{
    char *req = NULL;
    size_t len = 0;
    if (sq_request_build(m, "/", "x", NULL, 0, NULL, 0, &req, &len) < 0)
        return false;
    free(req);
    return true;
}

/* Why a -H value is not a header, for the message. */
static const char *header_problem(const char *arg)
{
    if (strpbrk(arg, "\r\n"))
        return "CR and LF are not allowed (one header per -H)";
    const char *colon = strchr(arg, ':');
    if (!colon)
        return "expected 'Name: value'";
    if (colon == arg)
        return "the name before ':' is empty";
    for (const char *p = arg; p < colon; p++)
        if (*p == ' ' || *p == '\t')
            return "the name cannot contain spaces";
    return "expected 'Name: value', the name a token and the value printable";
}

struct quick_opts {
    const char *body_flag; /* -b or --body, as the user wrote it */
    const char *rate_arg;  /* -r's value as given, for messages */
    const char *url, *method, *body_arg, *json_path, *html_path, *csv_path, *hdr_path, *ndjson_path;
    double sample;
    bool no_phases;
    bool no_compression;
    bool http2;
    uint64_t streams;
    struct sq_kv headers[MAX_HEADERS];
    size_t nheaders;
    uint64_t connections, threads, requests, max_in_flight;
    int64_t duration_ns, timeout_ns, connect_timeout_ns, pacing_ns, graceful_ns;
    double rate;
    const char *stages;
    int quiet, duration_set, rate_set;
    struct sq_cli_net net; /* DNS and TLS flags (cli/netopts.h) */
};

static void release_headers(struct quick_opts *o)
{
    for (size_t i = 0; i < o->nheaders; i++)
        sq_header_arg_dispose(&o->headers[i]);
    o->nheaders = 0;
}

enum {
    OPT_TIMEOUT = 256,
    OPT_CONNECT_TIMEOUT,
    OPT_JSON,
    OPT_MAX_IN_FLIGHT,
    OPT_STAGES,
    OPT_PACING,
    OPT_GRACEFUL,
    OPT_OUT,
    OPT_SAMPLE,
    OPT_HTML,
    OPT_NO_PHASES,
    OPT_NO_COMPRESSION,
    OPT_HTTP2,
    OPT_STREAMS,
};

/* Parses a duration flag's value (a bare number is seconds); positive refuses zero. */
static int duration_flag(const char *flag, const char *arg, bool positive, int64_t *out)
{
    if (sq_parse_duration(arg, SQ_NS_PER_S, out) < 0 || (positive && *out <= 0))
        return sq_cli_usage_error(FACE, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)", flag,
                                  arg);
    return 0;
}

static int parse_flags(int argc, char **argv, struct quick_opts *o)
{
    static const struct option longs[] = {
        {"connections", required_argument, NULL, 'c'},
        {"duration", required_argument, NULL, 'd'},
        {"requests", required_argument, NULL, 'n'},
        {"rate", required_argument, NULL, 'r'},
        {"max-in-flight", required_argument, NULL, OPT_MAX_IN_FLIGHT},
        {"stages", required_argument, NULL, OPT_STAGES},
        {"pacing", required_argument, NULL, OPT_PACING},
        {"graceful-stop", required_argument, NULL, OPT_GRACEFUL},
        {"out", required_argument, NULL, OPT_OUT},
        {"sample", required_argument, NULL, OPT_SAMPLE},
        {"html", required_argument, NULL, OPT_HTML},
        {"threads", required_argument, NULL, 't'},
        {"method", required_argument, NULL, 'm'},
        {"header", required_argument, NULL, 'H'},
        {"body", required_argument, NULL, 'b'},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
        {"json", required_argument, NULL, OPT_JSON},
        SQ_CLI_NET_LONG_OPTIONS,
        {"quiet", no_argument, NULL, 'q'},
        {"no-phases", no_argument, NULL, OPT_NO_PHASES},
        {"no-compression", no_argument, NULL, OPT_NO_COMPRESSION},
        {"http2", no_argument, NULL, OPT_HTTP2},
        {"streams", required_argument, NULL, OPT_STREAMS},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 1;
    int opt, li = -1, rc;
    while ((opt = getopt_long(argc, argv, ":c:d:n:r:t:m:H:b:kqhV", longs, &li)) != -1) {
        char name[48];
        const char *flag = sq_cli_flag_name(longs, &li, opt, argv, name, sizeof(name));
        if ((rc = sq_cli_net_flag(&o->net, opt, flag, optarg)) != 0) {
            if (rc == 1)
                continue;
            return rc;
        }
        switch (opt) {
        case 'c':
            if (sq_parse_u64(optarg, 1, 1000000, 1, &o->connections) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a connection count (1..1000000)",
                                          flag, optarg);
            break;
        case 'd':
            if ((rc = duration_flag(flag, optarg, true, &o->duration_ns)) != 0)
                return rc;
            o->duration_set = 1;
            break;
        case 'n':
            if (sq_parse_u64(optarg, 1, UINT64_MAX / 2, 1, &o->requests) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a request count (1 or more)", flag,
                                          optarg);
            break;
        case 'r': {
            char *end;
            o->rate = strtod(optarg, &end);
            if (*end || !(o->rate >= 0 && o->rate <= 1e8) || optarg[0] == '\0')
                return sq_cli_usage_error(
                    FACE, "%s: '%s' is not a rate (requests per second, 0..100000000)", flag,
                    optarg);
            o->rate_set = 1;
            o->rate_arg = optarg;
            break;
        }
        case OPT_MAX_IN_FLIGHT:
            if (sq_parse_u64(optarg, 1, 100000000, 1, &o->max_in_flight) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a count (1..100000000)", flag,
                                          optarg);
            break;
        case OPT_STAGES:
            o->stages = optarg;
            break;
        case OPT_PACING:
            if ((rc = duration_flag(flag, optarg, false, &o->pacing_ns)) != 0)
                return rc;
            break;
        case OPT_GRACEFUL:
            if ((rc = duration_flag(flag, optarg, false, &o->graceful_ns)) != 0)
                return rc;
            break;
        case 't':
            if (sq_parse_u64(optarg, 1, 1024, 0, &o->threads) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a thread count (1..1024)", flag,
                                          optarg);
            break;
        case 'm':
            if (!method_ok(optarg))
                return sq_cli_usage_error(FACE,
                                          "%s: '%s' is not a method (a token like GET or POST: "
                                          "letters, digits and !#$%%&'*+-.^_`|~)",
                                          flag, optarg);
            o->method = optarg;
            break;
        case 'H':
            if (o->nheaders == MAX_HEADERS)
                return sq_cli_usage_error(FACE, "%s: '%s': at most %d headers", flag, optarg,
                                          MAX_HEADERS);
            if ((rc = sq_header_parse_arg(optarg, &o->headers[o->nheaders])) < 0)
                return rc == -ENOMEM ? SQ_EXIT_FAIL
                                     : sq_cli_usage_error(FACE, "%s: '%s' is not a header: %s",
                                                          flag, optarg, header_problem(optarg));
            o->nheaders++;
            break;
        case 'b':
            if (optarg[0] == '@' && optarg[1] == '\0')
                return sq_cli_usage_error(FACE, "%s: '@' names no file (-b @FILE)", flag);
            o->body_flag = flag[1] == '-' ? "--body" : "-b";
            o->body_arg = optarg;
            break;
        case OPT_TIMEOUT:
            if ((rc = duration_flag(flag, optarg, true, &o->timeout_ns)) != 0)
                return rc;
            break;
        case OPT_CONNECT_TIMEOUT:
            if ((rc = duration_flag(flag, optarg, true, &o->connect_timeout_ns)) != 0)
                return rc;
            break;
        case OPT_JSON:
            o->json_path = optarg;
            break;
        case OPT_OUT:
            if (strncmp(optarg, "csv=", 4) == 0 && optarg[4])
                o->csv_path = optarg + 4;
            else if (strncmp(optarg, "hdr=", 4) == 0 && optarg[4])
                o->hdr_path = optarg + 4;
            else if (strncmp(optarg, "ndjson=", 7) == 0 && optarg[7])
                o->ndjson_path = optarg + 7;
            else
                return sq_cli_usage_error(
                    FACE, "%s: '%s' is not an output (csv=, hdr= or ndjson=FILE)", flag, optarg);
            break;
        case OPT_HTML:
            o->html_path = optarg;
            break;
        case OPT_SAMPLE: {
            char *end;
            o->sample = strtod(optarg, &end);
            if (*end || !(o->sample > 0 && o->sample <= 1))
                return sq_cli_usage_error(FACE, "%s: '%s' is not a fraction in (0, 1]", flag,
                                          optarg);
            break;
        }
        case 'q':
            o->quiet = 1;
            break;
        case OPT_NO_PHASES:
            o->no_phases = true;
            break;
        case OPT_NO_COMPRESSION:
            o->no_compression = true;
            break;
        case OPT_HTTP2:
            o->http2 = true;
            break;
        case OPT_STREAMS:
            if (sq_parse_u64(optarg, 1, 1000, 1, &o->streams) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a stream count (1..1000)", flag,
                                          optarg);
            break;
        case 'h':
            sq_cli_usage(stdout);
            return SQ_EXIT_DONE;
        case 'V':
            printf("squall %s\n", SQ_VERSION);
            return SQ_EXIT_DONE;
        default:
            return sq_cli_flag_error(FACE, longs, opt, flag);
        }
    }
    if (optind >= argc)
        return sq_cli_usage_error(FACE, "no URL given");
    if (argc - optind > 1)
        return sq_cli_usage_error(FACE, "one URL only; unexpected '%s'", argv[optind + 1]);
    o->url = argv[optind];
    if (o->requests && (o->rate_set || o->stages))
        return sq_cli_usage_error(FACE, "-n cannot be combined with %s",
                                  o->rate_set ? "-r" : "--stages");
    if (o->stages && o->duration_set)
        return sq_cli_usage_error(FACE, "--stages sets the run's length; drop -d");
    if (o->rate_set && !o->stages && o->rate <= 0)
        return sq_cli_usage_error(
            FACE, "-r: '%s': the rate must be positive (with --stages it may start at 0)",
            o->rate_arg);
    if (o->rate_set && o->pacing_ns)
        return sq_cli_usage_error(FACE, "--pacing applies to the closed loop, not with -r");
    if (o->sample && !o->ndjson_path)
        return sq_cli_usage_error(FACE, "--sample applies to --out ndjson=FILE");
    if (o->max_in_flight && !o->rate_set)
        return sq_cli_usage_error(FACE, "--max-in-flight applies to the open loop (-r)");
    if (o->streams && !o->http2)
        return sq_cli_usage_error(FACE, "--streams applies to --http2");
    if (!o->streams)
        o->streams = 1;
    if (o->connections * o->streams > 1000000)
        return sq_cli_usage_error(FACE, "-c x --streams: at most 1000000 VUs");
    if (o->max_in_flight && o->max_in_flight < o->connections * o->streams)
        return sq_cli_usage_error(FACE, "--max-in-flight: '%llu' must be at least -c%s (%llu)",
                                  (unsigned long long)o->max_in_flight,
                                  o->streams > 1 ? " x --streams" : "",
                                  (unsigned long long)(o->connections * o->streams));
    return sq_cli_net_check(&o->net);
}

/* Maps the quick face's flags onto one executor (plan/exec.h). */
static int build_exec(const struct quick_opts *o, struct sq_exec *e)
{
    memset(e, 0, sizeof(*e));
    e->vus = (uint32_t)(o->connections * o->streams); /* HTTP/2: one VU per stream slot */
    e->pacing_ns = o->pacing_ns;
    e->graceful_stop_ns = o->graceful_ns;
    const char *why = NULL;
    if (o->stages && sq_exec_parse_stages(e, o->stages, &why) < 0)
        return sq_cli_usage_error(FACE, "--stages: '%s': %s", o->stages, why + strlen("stages: "));
    if (o->rate_set) {
        e->kind = o->stages ? SQ_EXEC_RAMPING_ARRIVAL_RATE : SQ_EXEC_CONSTANT_ARRIVAL_RATE;
        e->rate = o->rate;
        e->start_rate = o->rate;
        e->duration_ns = o->duration_ns;
        e->max_in_flight = o->max_in_flight;
    } else if (o->stages) {
        e->kind = SQ_EXEC_RAMPING_VUS;
    } else if (o->requests) {
        e->kind = SQ_EXEC_SHARED_ITERATIONS;
        e->iterations = o->requests;
        e->max_duration_ns = o->duration_set ? o->duration_ns : 0;
    } else {
        e->kind = SQ_EXEC_CONSTANT_VUS;
        e->duration_ns = o->duration_ns;
    }
    if (sq_exec_prepare(e, &why) < 0) {
        /* The executor names its plan keys; say which flag set them. */
        if (strncmp(why, "stages: ", 8) == 0)
            return sq_cli_usage_error(FACE, "--stages: '%s': %s", o->stages, why + 8);
        return sq_cli_usage_error(FACE, "%s", why);
    }
    return 0;
}

int sq_cli_quick(int argc, char **argv)
{
    struct quick_opts o = {
        .method = "GET",
        .connections = 64,
        .duration_ns = 10 * SQ_NS_PER_S,
        .timeout_ns = 10 * SQ_NS_PER_S,
        .connect_timeout_ns = 5 * SQ_NS_PER_S,
    };
    int rc = parse_flags(argc, argv, &o);
    if (rc != 0) {
        release_headers(&o);
        return rc == SQ_EXIT_DONE ? 0 : rc;
    }

    struct sq_url url;
    const char *why = NULL;
    rc = sq_url_parse(o.url, &url, &why);
    if (rc < 0) {
        release_headers(&o);
        return sq_cli_usage_error(FACE, "bad URL '%s': %s", o.url, why ? why : sq_strerror(rc));
    }
    struct sq_tls_client *tls = NULL;
    if (o.http2)
        o.net.tls.alpn = "h2"; /* required: a server that does not pick it fails the handshake */

    int exit_code = SQ_EXIT_FAIL;
    char *body = NULL, *req = NULL;
    size_t body_len = 0, req_len = 0;
    struct sq_result res = {0};
    struct sq_cli_outputs outs = {
        .face = FACE, .json_path = o.json_path, .html_path = o.html_path, .quiet = o.quiet};
    struct ticker tk = {0};
    struct sq_ndjson nd = {.scenario = "default"};
    struct sq_h2_req h2req = {0};

    if (o.body_arg && o.body_arg[0] == '@') {
        rc = read_body_file(o.body_arg + 1, &body, &body_len);
        if (rc < 0) {
            const char *file = o.body_arg + 1;
            if (rc == -EISDIR)
                exit_code = sq_cli_usage_error(FACE, "%s: '%s': %s is a directory, not a file",
                                               o.body_flag, o.body_arg, file);
            else if (rc == -SQ_ETOOBIG)
                exit_code = sq_cli_usage_error(FACE, "%s: '%s': %s is larger than %u MiB",
                                               o.body_flag, o.body_arg, file, MAX_BODY_BYTES >> 20);
            else
                exit_code = sq_cli_usage_error(FACE, "%s: '%s': cannot read %s: %s", o.body_flag,
                                               o.body_arg, file, sq_strerror(rc));
            goto out;
        }
    } else if (o.body_arg) {
        body_len = strlen(o.body_arg);
        body = malloc(body_len + 1);
        if (!body)
            goto out;
        memcpy(body, o.body_arg, body_len + 1);
    }
    /* Accept-Encoding is offered unless the user set one or turned compression off. Over
     * HTTP/2 bodies are framed only (not decoded yet): nothing is offered unless asked. */
    const char *accept = o.no_compression || o.http2 ? NULL : sq_accept_encoding_default();
    for (size_t i = 0; i < o.nheaders; i++)
        if (strcasecmp(o.headers[i].name, "Accept-Encoding") == 0)
            accept = o.headers[i].value[0] ? o.headers[i].value : NULL;
    bool add_accept = accept && !o.no_compression && accept == sq_accept_encoding_default() &&
                      o.nheaders < MAX_HEADERS;
    if (add_accept)
        o.headers[o.nheaders++] = (struct sq_kv){.name = "Accept-Encoding", .value = accept};
    rc = sq_request_build(o.method, url.path, url.authority, o.headers, o.nheaders, body, body_len,
                          &req, &req_len);
    if (add_accept)
        o.headers[--o.nheaders] = (struct sq_kv){0};
    if (rc < 0) {
        exit_code = sq_cli_usage_error(FACE, "cannot build the request: %s", sq_strerror(rc));
        goto out;
    }
    if (o.http2) {
        rc = sq_h2_req_init(&h2req, o.method, url.scheme, url.authority, url.path, o.headers,
                            o.nheaders, body, body_len);
        if (rc < 0) {
            exit_code = sq_cli_usage_error(FACE, "cannot build the request: %s", sq_strerror(rc));
            goto out;
        }
    }

    struct sq_run_config cfg = {
        .request = req,
        .request_len = req_len,
        .head_request = strcmp(o.method, "HEAD") == 0,
        .timeout_ns = o.timeout_ns,
        .connect_timeout_ns = o.connect_timeout_ns,
        .phases = !o.no_phases,
        .h2_request = o.http2 ? &h2req : NULL,
        .streams = (uint32_t)o.streams,
    };
    rc = build_exec(&o, &cfg.exec);
    if (rc != 0) {
        exit_code = rc;
        goto out;
    }
    cfg.threads = sq_cli_threads(o.threads);

    rc = sq_cli_net_setup(&o.net, &url, &cfg, &tls);
    if (rc != 0) {
        exit_code = rc;
        goto out;
    }

    /* The pool is the executor's largest VU count (a --stages ramp may exceed -c). */
    if ((rc = sq_cli_raise_nofile(sq_run_connections(&cfg, sq_exec_max_vus(&cfg.exec)),
                                  "connections")) != 0) {
        exit_code = rc;
        goto out;
    }

    if ((rc = sq_cli_outputs_open(&outs)) != 0) {
        exit_code = rc;
        goto out;
    }
    sq_cli_progress_init(&tk.progress, sq_exec_is_open(&cfg.exec),
                         cfg.exec.kind == SQ_EXEC_SHARED_ITERATIONS
                             ? 0
                             : (double)sq_exec_length_ns(&cfg.exec) / 1e9);
    tk.show = !o.quiet;
    if (o.csv_path && !(tk.csv = sq_cli_open_out(FACE, "--out csv", o.csv_path, &exit_code)))
        goto out;
    if (o.hdr_path && !(tk.hdr = sq_cli_open_out(FACE, "--out hdr", o.hdr_path, &exit_code)))
        goto out;
    if (o.ndjson_path) {
        if (!(nd.f = sq_cli_open_out(FACE, "--out ndjson", o.ndjson_path, &exit_code)))
            goto out;
        setvbuf(nd.f, NULL, _IOFBF, 1 << 20);
        cfg.on_samples = sq_ndjson_write;
        cfg.samples_ud = &nd;
        cfg.sample_fraction = o.sample ? o.sample : 1;
    }
    if (tk.csv)
        sq_csv_header(tk.csv);
    if (tk.hdr)
        sq_hdrlog_header(tk.hdr, sq_wall_s());
    cfg.on_tick = on_tick;
    cfg.tick_ud = &tk;

    cfg.stop = sq_cli_signals_begin();
    rc = sq_run(&cfg, &res, &why);
    sq_cli_signals_end();
    sq_progress_finish(&tk.progress);
    if (tk.hdr_failed)
        fprintf(stderr, "squall: --out hdr: could not encode an interval\n");
    if (nd.f && (fflush(nd.f) != 0 || nd.failed))
        fprintf(stderr, "squall: --out ndjson: write failed: %s\n", strerror(errno));
    if (res.samples_lost)
        fprintf(stderr,
                "squall: --out ndjson: %llu requests not recorded (the writer fell "
                "behind; try --sample)\n",
                (unsigned long long)res.samples_lost);
    if (rc < 0) {
        fprintf(stderr, "squall: %s: %s\n", why, sq_strerror(rc));
        goto out;
    }

    char addr[80];
    sq_addr_format(&cfg.addrs[0], addr, sizeof(addr));
    struct sq_report_info info = {
        .url = o.url,
        .method = o.method,
        .target_addr = addr,
        .exec = &cfg.exec,
        .threads = res.threads,
        .timeout_ns = cfg.timeout_ns,
        .connect_timeout_ns = cfg.connect_timeout_ns,
        .request_bytes = req_len,
        .accept_encoding = accept,
        .protocol = !o.http2 ? "http/1.1"
                    : tls    ? "h2"
                             : "h2c",
        .streams = o.http2 ? (uint32_t)o.streams : 0,
    };
    /* One document feeds every output, so they cannot disagree. */
    json_t *doc = sq_report_json_doc(&info, &res);
    if (!doc) {
        fprintf(stderr, "squall: out of memory building the result\n");
        goto out;
    }
    sq_cli_render(&outs, doc);
    json_decref(doc);
    exit_code = sq_cli_run_status(&res);
out:
    sq_cli_outputs_close(&outs);
    if (tk.csv)
        fclose(tk.csv);
    if (tk.hdr)
        fclose(tk.hdr);
    if (nd.f)
        fclose(nd.f);
    sq_result_dispose(&res);
    sq_h2_req_dispose(&h2req);
    free(req);
    free(body);
    sq_url_dispose(&url);
    release_headers(&o);
    sq_tls_client_free(tls);
    return exit_code;
}
