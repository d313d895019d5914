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

/* ---- the command: parse -> prepare -> run ---- */

/* What the phases of one `squall serve` share. */
struct servecmd {
    struct sq_daemon_config cfg; /* --keep ... --max-body: checked by the daemon's validator */
    char host[256], allow[4096]; /* --listen's host; --allow-host's, joined by commas */
    uint16_t port;
    const char *data, *token_file, *cors, *inbox_stamp;
    bool quiet, access_log;
    uint64_t inbox_caps, inbox_body, per_peer;
    char *token;       /* read from --token-file (owned; scrubbed once the daemon has it) */
    sigset_t set, old; /* SIGINT and SIGTERM, blocked; the mask before */
    FILE *devnull;     /* -q: the log goes there */
    struct sq_daemon *d;
};

/* The flags that are one key of the daemon's settings each. */
static const struct {
    int opt;
    const char *key;
} config_keys[] = {
    {OPT_KEEP, "keep_runs"},
    {OPT_KEEP_DAYS, "keep_days"},
    {'t', "threads"},
    {OPT_TIMEOUT, "timeout"},
    {OPT_MAX_VUS, "max_vus"},
    {OPT_MAX_RATE, "max_rate"},
    {OPT_MAX_DURATION, "max_duration"},
    {OPT_MAX_QUEUE, "max_queue"},
    {OPT_MAX_BODY, "max_body"},
};

/* --allow-host: one more host in the list the setting holds. */
static int allow_host(struct servecmd *c, const char *flag, const char *arg)
{
    size_t n = strlen(c->allow);
    if (n + strlen(arg) + 2 > sizeof(c->allow))
        return sq_cli_usage_error(FACE, "%s: too many hosts", flag);
    snprintf(c->allow + n, sizeof(c->allow) - n, "%s%s", n ? "," : "", arg);
    return config_flag(&c->cfg, "allow_hosts", flag, c->allow);
}

/* One flag getopt_long returned. Returns 0, SQ_EXIT_DONE (--help answered) or the exit status
 * after printing why. */
static int take_flag(void *ud, const struct option *longs, int opt, const char *flag)
{
    struct servecmd *c = ud;
    for (size_t i = 0; i < SQ_ARRAY_LEN(config_keys); i++)
        if (config_keys[i].opt == opt)
            return config_flag(&c->cfg, config_keys[i].key, flag, optarg);
    switch (opt) {
    case 'l':
        if (!parse_listen(optarg, c->host, sizeof(c->host), &c->port))
            return sq_cli_usage_error(FACE,
                                      "%s: '%s' is not ADDR:PORT (e.g. 127.0.0.1:9876, "
                                      "[::1]:9876, 0.0.0.0:9876)",
                                      flag, optarg);
        return 0;
    case OPT_DATA:
        c->data = optarg;
        return 0;
    case OPT_TOKEN_FILE:
        c->token_file = optarg;
        return 0;
    case OPT_ALLOW_HOST:
        return allow_host(c, flag, optarg);
    case OPT_CORS:
        c->cors = optarg;
        if (!origin_ok(optarg))
            return sq_cli_usage_error(FACE,
                                      "%s: '%s' is not an origin (scheme://host[:port], "
                                      "e.g. https://grafana.example.com)",
                                      flag, optarg);
        return 0;
    case OPT_ACCESS_LOG:
        c->access_log = true;
        return 0;
    case OPT_INBOX_MAX_CAPTURES:
        if (sq_parse_u64(optarg, 1, SQ_INBOX_MAX_CAPTURES, 1, &c->inbox_caps) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a capture count (1..1000000)", flag,
                                      optarg);
        return 0;
    case OPT_INBOX_MAX_BODY:
        if (!sq_cli_parse_size(optarg, SQ_SERVER_MAX_BODY, &c->inbox_body))
            return sq_cli_usage_error(FACE, "%s: '%s' is not a size (0..1MiB, e.g. 64KiB)", flag,
                                      optarg);
        return 0;
    case OPT_INBOX_STAMP_HEADER:
        c->inbox_stamp = optarg;
        if (!sq_inbox_header_name_ok(optarg))
            return sq_cli_usage_error(FACE, "%s: '%s' is not a header name (e.g. X-Stamp)", flag,
                                      optarg);
        return 0;
    case OPT_MAX_CONNS_PER_PEER:
        if (sq_parse_u64(optarg, 0, SQ_DAEMON_MAX_CONNS, 0, &c->per_peer) < 0)
            return sq_cli_usage_error(FACE,
                                      "%s: '%s' is not a connection count (0..1024; 0: no "
                                      "per-address cap)",
                                      flag, optarg);
        return 0;
    case 'q':
        c->quiet = true;
        return 0;
    case 'h':
        fputs(serve_usage, stdout);
        return SQ_EXIT_DONE;
    }
    return sq_cli_flag_refused(FACE, longs, opt, flag);
}

/* The flags, then what they say together: a non-loopback address needs a token, read here.
 * Returns 0, SQ_EXIT_DONE or the exit status after printing why. */
static int serve_parse(struct servecmd *c, int argc, char **argv)
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
    int rc = sq_cli_getopt(argc, argv, ":l:t:qh", longs, take_flag, c);
    if (rc == 0 && optind < argc)
        rc = sq_cli_usage_error(FACE, "unexpected argument '%s'", argv[optind]);
    if (rc == 0 && !c->token_file && !sq_daemon_host_is_loopback(c->host))
        rc = sq_cli_usage_error(FACE,
                                "--listen %s needs --token-file: without a token only a loopback "
                                "address (127.0.0.1, ::1, localhost) is served",
                                c->host);
    if (rc == 0 && c->token_file) {
        char err[512];
        if (sq_daemon_token_read(c->token_file, &c->token, err, sizeof(err)) < 0)
            rc = sq_cli_usage_error(FACE, "--token-file: %s", err);
    }
    return rc;
}

/* The daemon started with the signals blocked, then the one line on stdout. Returns 0 or the
 * exit status after printing why. */
static int serve_start(struct servecmd *c)
{
    /* The signals go to this thread alone: every thread started from here inherits the mask. */
    sigemptyset(&c->set);
    sigaddset(&c->set, SIGINT);
    sigaddset(&c->set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &c->set, &c->old);
    signal(SIGPIPE, SIG_IGN);
    c->devnull = c->quiet ? fopen("/dev/null", "w") : NULL;
    struct sq_daemon_opts o = {
        .host = c->host,
        .port = c->port,
        .data_dir = c->data,
        .token = c->token,
        .cors_origin = c->cors,
        .access_log = c->access_log,
        .log = c->devnull ? c->devnull : stderr,
        .config = c->cfg,
        .inbox_max_captures = (uint32_t)c->inbox_caps,
        .inbox_max_body = c->inbox_body ? (size_t)c->inbox_body : SIZE_MAX,
        .inbox_stamp_header = c->inbox_stamp,
        .max_conns_per_peer = c->per_peer ? (uint32_t)c->per_peer : UINT32_MAX,
    };
    char err[1024];
    int rc = sq_daemon_start(&o, &c->d, err, sizeof(err));
    if (rc < 0) {
        sq_cli_error(FACE, "%s", err);
        pthread_sigmask(SIG_SETMASK, &c->old, NULL);
        return rc == -EINVAL ? SQ_EXIT_USAGE : SQ_EXIT_FAIL;
    }
    sq_cli_listening("serve", "http", c->host, sq_daemon_port(c->d), "/");
    return 0;
}

/* Serves until the first SIGINT or SIGTERM, then shuts down gracefully. */
static void serve_run(struct servecmd *c)
{
    int sig = 0;
    sigwait(&c->set, &sig);
    /* A second signal ends the process at once: this thread takes signals with their default
     * action from now on (the others keep them blocked). */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, &c->set, NULL);
    if (!c->quiet) {
        fprintf(stderr, "squall serve: %s: shutting down (again to stop at once)\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM");
        fflush(stderr);
    }
    sq_daemon_free(c->d);
}

int sq_cli_serve(int argc, char **argv)
{
    struct servecmd c = {.host = "127.0.0.1",
                         .port = SQ_DAEMON_PORT,
                         .data = SQ_DAEMON_DATA,
                         .inbox_body = SQ_INBOX_MAX_BODY_DEFAULT,
                         .per_peer = SQ_DAEMON_MAX_CONNS_PER_PEER};
    sq_daemon_config_init(&c.cfg);
    int rc = serve_parse(&c, argc, argv);
    if (rc == 0)
        rc = serve_start(&c);
    if (c.token) { /* the daemon keeps its own copy */
        memset(c.token, 0, strlen(c.token));
        free(c.token);
    }
    sq_daemon_config_dispose(&c.cfg);
    if (rc == 0)
        serve_run(&c);
    if (c.devnull)
        fclose(c.devnull);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
