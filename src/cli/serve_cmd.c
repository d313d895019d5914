/* cli/serve_cmd.c - `squall serve [flags]`: the daemon (daemon/daemon.h) until SIGINT/SIGTERM.
 *
 * Prints exactly one line on stdout once the API listens (tests read the port from it):
 *     squall serve listening on http://HOST:PORT/
 * and its log (runs queued, started, ended; errors; with --access-log one line per request) on
 * stderr. The first SIGINT or SIGTERM shuts down gracefully: queued runs are cancelled, the
 * running one is stopped like POST /runs/{id}/stop and its result stored; a second one ends the
 * process at once (the store recovers: that run shows as interrupted).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "daemon/daemon.h"
#include "cli/inbox_cmd.h"
#include "face/flags.h"
#include "server/server.h"
#include "target/inbox.h"

#define FACE "squall serve"

static const char serve_usage[] =
    "usage: squall serve [flags]          the engine as a service: HTTP API, run store, live\n"
    "                                     dashboard and Prometheus metrics (docs/daemon.md),\n"
    "                                     MCP for AI agents at /mcp, a webhook inbox at /inbox\n"
    "\n"
    "  -l, --listen ADDR:PORT  where the API and the dashboard listen (default\n"
    "                          127.0.0.1:9876; port 0 picks a free one). Any address but a\n"
    "                          loopback one needs --token-file\n"
    "      --data DIR          the run store: a directory, created if need be (default\n"
    "                          ./squall-data)\n"
    "      --token-file F      require \"Authorization: Bearer TOKEN\" on every request; TOKEN\n"
    "                          is F's first line (16 bytes at least: openssl rand -hex 32)\n"
    "      --keep N            retention: keep the newest N runs (default 200; 0: no limit)\n"
    "      --keep-days D       retention: keep runs created in the last D days (default: no\n"
    "                          age limit)\n"
    "  -t, --threads N         worker threads a run gets unless it asks (default: online CPUs)\n"
    "      --timeout D         per-request timeout a run gets unless it asks (default 10s)\n"
    "      --max-vus N         safety cap: VUs (connections) per run (default 10000)\n"
    "      --max-rate N        safety cap: requests per second per run (default 1000000)\n"
    "      --max-duration D    safety cap: how long a run may last (default 1h)\n"
    "      --max-queue N       runs that may wait at once (default 100)\n"
    "      --allow-host HOST   a host runs may reach, checked on every address they connect\n"
    "                          to (repeatable, or comma-separated; default: any)\n"
    "      --max-body BYTES    largest API request body (default 1048576; 413 past it)\n"
    "      --cors-origin URL   let pages from this one origin call the API from a browser\n"
    "                          (default: no cross-origin access)\n"
    "      --access-log        one line per API request on stderr\n"
    "      --max-conns-per-peer N\n"
    "                          API connections one client address may hold (default 512 of\n"
    "                          the 1024; 0: no per-address cap); past it, its connection\n"
    "                          that waited longest on its client is closed to make room\n"
    "      --inbox-max-captures N\n"
    "                          the webhook inbox's ring: captures kept (default 10000, at\n"
    "                          most 1000000; older ones are evicted and counted)\n"
    "      --inbox-max-body SIZE\n"
    "                          body bytes the inbox keeps per capture (default 64KiB, at\n"
    "                          most 1MiB; 0 keeps none); longer ones are cut and flagged\n"
    "      --inbox-stamp-header NAME\n"
    "                          find a webhook's event stamp only in header NAME (default:\n"
    "                          the first in the body, else in any header)\n"
    "  -q, --quiet             no log lines on stderr (the listening line still prints)\n"
    "  -h, --help              this help\n"
    "\n"
    "Every setting after --data but the token and the CORS origin can be changed while it runs:\n"
    "GET and PUT /config. SIGINT or SIGTERM stops it gracefully; a second one at once.\n"
    "\n"
    "exit status: 0 stopped by a signal, 1 could not start (store in use, port taken),\n"
    "             2 bad flags\n";

enum {
    OPT_DATA = 300,
    OPT_TOKEN_FILE,
    OPT_KEEP,
    OPT_KEEP_DAYS,
    OPT_TIMEOUT,
    OPT_MAX_VUS,
    OPT_MAX_RATE,
    OPT_MAX_DURATION,
    OPT_MAX_QUEUE,
    OPT_ALLOW_HOST,
    OPT_MAX_BODY,
    OPT_CORS,
    OPT_ACCESS_LOG,
    OPT_INBOX_MAX_CAPTURES,
    OPT_INBOX_MAX_BODY,
    OPT_INBOX_STAMP_HEADER,
    OPT_MAX_CONNS_PER_PEER,
};

/* What getopt_long refused, as a usage error. */
static int flag_refused(const struct option *longs, int opt, const char *flag)
{
    char err[256];
    sq_flag_refused(longs, opt, flag, err, sizeof(err));
    return sq_cli_usage_error(FACE, "%s", err);
}

/* "HOST:PORT", "[V6]:PORT" or ":PORT" (loopback). host is written into buf. */
static bool parse_listen(const char *s, char *buf, size_t len, uint16_t *port)
{
    const char *colon;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':' || (size_t)(rb - s - 1) >= len || rb == s + 1)
            return false;
        memcpy(buf, s + 1, (size_t)(rb - s - 1));
        buf[rb - s - 1] = '\0';
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || (size_t)(colon - s) >= len)
            return false;
        if (colon == s)
            snprintf(buf, len, "127.0.0.1");
        else {
            memcpy(buf, s, (size_t)(colon - s));
            buf[colon - s] = '\0';
        }
        if (strchr(buf, ':'))
            return false; /* an IPv6 address needs its brackets */
    }
    uint64_t p;
    if (sq_parse_u64(colon + 1, 0, 65535, 0, &p) < 0)
        return false;
    *port = (uint16_t)p;
    return true;
}

/* An origin as browsers send it: scheme "://" host [":" port], nothing after. */
static bool origin_ok(const char *s)
{
    const char *p = strstr(s, "://");
    if (!p || p == s || !p[3])
        return false;
    for (const char *c = s; c < p; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '+' || *c == '-' ||
              *c == '.'))
            return false;
    for (const char *c = p + 3; *c; c++)
        if (*c == '/' || *c <= ' ' || *c > '~')
            return false;
    return true;
}

/* One key of the daemon's settings from a flag: the daemon's own validator, its message
 * with the flag's name in front. */
static int config_flag(struct sq_daemon_config *c, const char *key, const char *flag,
                       const char *arg)
{
    char err[512];
    json_t *v = json_string(arg);
    int rc = v ? sq_daemon_config_set(c, key, v, err, sizeof(err)) : -ENOMEM;
    json_decref(v);
    if (rc == -ENOMEM)
        return SQ_EXIT_FAIL;
    if (rc < 0) {
        /* "max_vus: 'x' is not ..." -> "--max-vus: 'x' is not ..." */
        const char *tail = strchr(err, ':');
        return sq_cli_usage_error(FACE, "%s%s", flag, tail ? tail : err);
    }
    return 0;
}

int sq_cli_serve(int argc, char **argv)
{
    static const struct option longs[] = {
        {"listen", required_argument, NULL, 'l'},
        {"data", required_argument, NULL, OPT_DATA},
        {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
        {"keep", required_argument, NULL, OPT_KEEP},
        {"keep-days", required_argument, NULL, OPT_KEEP_DAYS},
        {"threads", required_argument, NULL, 't'},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"max-vus", required_argument, NULL, OPT_MAX_VUS},
        {"max-rate", required_argument, NULL, OPT_MAX_RATE},
        {"max-duration", required_argument, NULL, OPT_MAX_DURATION},
        {"max-queue", required_argument, NULL, OPT_MAX_QUEUE},
        {"allow-host", required_argument, NULL, OPT_ALLOW_HOST},
        {"max-body", required_argument, NULL, OPT_MAX_BODY},
        {"cors-origin", required_argument, NULL, OPT_CORS},
        {"access-log", no_argument, NULL, OPT_ACCESS_LOG},
        {"inbox-max-captures", required_argument, NULL, OPT_INBOX_MAX_CAPTURES},
        {"inbox-max-body", required_argument, NULL, OPT_INBOX_MAX_BODY},
        {"inbox-stamp-header", required_argument, NULL, OPT_INBOX_STAMP_HEADER},
        {"max-conns-per-peer", required_argument, NULL, OPT_MAX_CONNS_PER_PEER},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct sq_daemon_config cfg;
    sq_daemon_config_init(&cfg);
    char host[256] = "127.0.0.1", allow[4096] = "";
    uint16_t port = SQ_DAEMON_PORT;
    const char *data = SQ_DAEMON_DATA, *token_file = NULL, *cors = NULL;
    bool quiet = false, access_log = false;
    uint64_t inbox_caps = 0, inbox_body = SQ_INBOX_MAX_BODY_DEFAULT;
    uint64_t per_peer = SQ_DAEMON_MAX_CONNS_PER_PEER;
    const char *inbox_stamp = NULL;
    int rc = 0, opt, li = -1;
    opterr = 0;
    optind = 1;
    while (rc == 0 && (opt = getopt_long(argc, argv, ":l:t:qh", longs, &li)) != -1) {
        char name[48];
        const char *flag = sq_flag_name(longs, &li, opt, argv, name, sizeof(name));
        switch (opt) {
        case 'l':
            if (!parse_listen(optarg, host, sizeof(host), &port))
                rc = sq_cli_usage_error(FACE,
                                        "%s: '%s' is not ADDR:PORT (e.g. 127.0.0.1:9876, "
                                        "[::1]:9876, 0.0.0.0:9876)",
                                        flag, optarg);
            break;
        case OPT_DATA:
            data = optarg;
            break;
        case OPT_TOKEN_FILE:
            token_file = optarg;
            break;
        case OPT_KEEP:
            rc = config_flag(&cfg, "keep_runs", flag, optarg);
            break;
        case OPT_KEEP_DAYS:
            rc = config_flag(&cfg, "keep_days", flag, optarg);
            break;
        case 't':
            rc = config_flag(&cfg, "threads", flag, optarg);
            break;
        case OPT_TIMEOUT:
            rc = config_flag(&cfg, "timeout", flag, optarg);
            break;
        case OPT_MAX_VUS:
            rc = config_flag(&cfg, "max_vus", flag, optarg);
            break;
        case OPT_MAX_RATE:
            rc = config_flag(&cfg, "max_rate", flag, optarg);
            break;
        case OPT_MAX_DURATION:
            rc = config_flag(&cfg, "max_duration", flag, optarg);
            break;
        case OPT_MAX_QUEUE:
            rc = config_flag(&cfg, "max_queue", flag, optarg);
            break;
        case OPT_MAX_BODY:
            rc = config_flag(&cfg, "max_body", flag, optarg);
            break;
        case OPT_ALLOW_HOST: {
            size_t n = strlen(allow);
            if (n + strlen(optarg) + 2 > sizeof(allow)) {
                rc = sq_cli_usage_error(FACE, "%s: too many hosts", flag);
                break;
            }
            snprintf(allow + n, sizeof(allow) - n, "%s%s", n ? "," : "", optarg);
            rc = config_flag(&cfg, "allow_hosts", flag, allow);
            break;
        }
        case OPT_CORS:
            if (!origin_ok(optarg))
                rc = sq_cli_usage_error(FACE,
                                        "%s: '%s' is not an origin (scheme://host[:port], "
                                        "e.g. https://grafana.example.com)",
                                        flag, optarg);
            cors = optarg;
            break;
        case OPT_ACCESS_LOG:
            access_log = true;
            break;
        case OPT_INBOX_MAX_CAPTURES:
            if (sq_parse_u64(optarg, 1, SQ_INBOX_MAX_CAPTURES, 1, &inbox_caps) < 0)
                rc = sq_cli_usage_error(FACE, "%s: '%s' is not a capture count (1..1000000)", flag,
                                        optarg);
            break;
        case OPT_INBOX_MAX_BODY:
            if (!sq_cli_parse_size(optarg, SQ_SERVER_MAX_BODY, &inbox_body))
                rc = sq_cli_usage_error(FACE, "%s: '%s' is not a size (0..1MiB, e.g. 64KiB)", flag,
                                        optarg);
            break;
        case OPT_INBOX_STAMP_HEADER:
            if (!sq_inbox_header_name_ok(optarg))
                rc = sq_cli_usage_error(FACE, "%s: '%s' is not a header name (e.g. X-Stamp)", flag,
                                        optarg);
            inbox_stamp = optarg;
            break;
        case OPT_MAX_CONNS_PER_PEER:
            if (sq_parse_u64(optarg, 0, SQ_DAEMON_MAX_CONNS, 0, &per_peer) < 0)
                rc = sq_cli_usage_error(FACE,
                                        "%s: '%s' is not a connection count (0..1024; 0: no "
                                        "per-address cap)",
                                        flag, optarg);
            break;
        case 'q':
            quiet = true;
            break;
        case 'h':
            fputs(serve_usage, stdout);
            sq_daemon_config_dispose(&cfg);
            return SQ_EXIT_OK;
        default:
            rc = flag_refused(longs, opt, flag);
        }
    }
    if (rc == 0 && optind < argc)
        rc = sq_cli_usage_error(FACE, "unexpected argument '%s'", argv[optind]);
    if (rc == 0 && !token_file && !sq_daemon_host_is_loopback(host))
        rc = sq_cli_usage_error(FACE,
                                "--listen %s needs --token-file: without a token only a loopback "
                                "address (127.0.0.1, ::1, localhost) is served",
                                host);
    char *token = NULL;
    if (rc == 0 && token_file) {
        char err[512];
        if (sq_daemon_token_read(token_file, &token, err, sizeof(err)) < 0)
            rc = sq_cli_usage_error(FACE, "--token-file: %s", err);
    }
    if (rc != 0) {
        sq_daemon_config_dispose(&cfg);
        return rc;
    }

    /* The signals go to this thread alone: every thread started from here inherits the mask. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    signal(SIGPIPE, SIG_IGN);

    FILE *devnull = quiet ? fopen("/dev/null", "w") : NULL;
    struct sq_daemon_opts o = {
        .host = host,
        .port = port,
        .data_dir = data,
        .token = token,
        .cors_origin = cors,
        .access_log = access_log,
        .log = devnull ? devnull : stderr,
        .config = cfg,
        .inbox_max_captures = (uint32_t)inbox_caps,
        .inbox_max_body = inbox_body ? (size_t)inbox_body : SIZE_MAX,
        .inbox_stamp_header = inbox_stamp,
        .max_conns_per_peer = per_peer ? (uint32_t)per_peer : UINT32_MAX,
    };
    struct sq_daemon *d = NULL;
    char err[1024];
    rc = sq_daemon_start(&o, &d, err, sizeof(err));
    if (token) {
        memset(token, 0, strlen(token));
        free(token);
    }
    sq_daemon_config_dispose(&cfg);
    if (rc < 0) {
        sq_cli_error(FACE, "%s", err);
        if (devnull)
            fclose(devnull);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return rc == -EINVAL ? SQ_EXIT_USAGE : SQ_EXIT_FAIL;
    }
    bool v6 = strchr(host, ':') != NULL;
    printf("squall serve listening on http://%s%s%s:%u/\n", v6 ? "[" : "", host, v6 ? "]" : "",
           sq_daemon_port(d));
    fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    /* A second signal ends the process at once: this thread takes signals with their default
     * action from now on (the others keep them blocked). */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    if (!quiet) {
        fprintf(stderr, "squall serve: %s: shutting down (again to stop at once)\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM");
        fflush(stderr);
    }
    sq_daemon_free(d);
    if (devnull)
        fclose(devnull);
    return SQ_EXIT_OK;
}
