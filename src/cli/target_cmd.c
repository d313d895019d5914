/* cli/target_cmd.c - `squall target [flags]`: runs the built-in test server until SIGINT/SIGTERM.
 *
 * Prints exactly one line on stdout once every listener is bound (tests read the port from it):
 *     squall target listening on http://HOST:PORT     (https:// with --tls)
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "net/sock.h"
#include "net/tls.h"
#include "server/server.h"
#include "target/target.h"

#define MAX_THREADS 1024

static const char target_usage[] =
    "usage: squall target [flags]       the built-in HTTP/1.1 and h2c test server\n"
    "\n"
    "      --host ADDR         address to listen on (default 127.0.0.1)\n"
    "  -p, --port N            port (default 8080; 0 picks a free one)\n"
    "  -t, --threads N         worker threads (default: online CPUs)\n"
    "      --stall DUR/PERIOD  once every PERIOD, hold every response for DUR (e.g. 500ms/2s;\n"
    "                          a bare number is ms; 0 < DUR < PERIOD, DUR at most 1h)\n"
    "      --tls               serve HTTPS: a self-signed certificate for localhost is made\n"
    "                          at start, unless --cert/--key give one\n"
    "      --cert FILE         PEM certificate (chain) to serve (with --key; implies --tls)\n"
    "      --key FILE          PEM private key of --cert\n"
    "      --client-ca FILE    require client certificates signed by these CAs (implies --tls)\n"
    "      --cert-out FILE     write the certificate in use as PEM (for a client's --cacert)\n"
    "      --idle-timeout D    close a connection that moves no byte for D (default 60s;\n"
    "                          0: never; a bare number is seconds)\n"
    "      --header-timeout D  answer 408 and close when a request head (or a TLS handshake)\n"
    "                          takes longer than D to arrive (default 10s; 0: never)\n"
    "      --request-timeout D answer 408 and close when a whole request (head and body)\n"
    "                          takes longer than D to arrive (default 60s; 0: never)\n"
    "      --min-body-rate N   answer 408 and close when a request body arrives slower than\n"
    "                          N bytes/s after the header timeout (default 1024; 0: no\n"
    "                          minimum)\n"
    "      --oauth-client ID:SECRET  POST /oauth/token accepts only this client (default: any\n"
    "                          id with a secret)\n"
    "      --max-conns N       at most N connections open at once; more are closed at\n"
    "                          accept and counted (default: no cap)\n"
    "  -q, --quiet             no summary on stderr at exit\n"
    "  -h, --help              this help\n"
    "\n"
    "endpoints: /fast /ok /bytes/N /delay/MS /status/CODE /echo /json/N /sse POST /login\n"
    "/items /cookie/set /cookie/echo GET /stats POST /stats/reset\n"
    "(see docs/target.md). SIGINT or SIGTERM stops it.\n";

static struct sq_target *volatile running;

static void on_signal(int sig)
{
    SQ_UNUSED(sig);
    struct sq_target *t = running;
    if (t)
        sq_target_stop(t); /* async-signal-safe: a flag and an eventfd write */
}

#define FACE "squall target"

/* Messages name the long flag (-p is --port): "squall target: --port: '70000' is not a port". */
static int bad_value(const char *flag, const char *value, const char *what)
{
    return sq_cli_usage_error(FACE, "%s: '%s' is not %s", flag, value, what);
}

static int no_value(const char *flag)
{
    return sq_cli_usage_error(FACE, "%s needs a value", flag);
}

/* Matches argv[*i] against a flag that takes a value: "-p N", "-pN", "--port N", "--port=N".
 * Returns 1 with *val set, 0 when it is another flag, -1 when the value is missing. */
static int flag_value(int argc, char **argv, int *i, const char *shrt, const char *lng,
                      const char **val)
{
    const char *a = argv[*i];
    size_t ln = strlen(lng);
    if (strcmp(a, lng) == 0 || (shrt && strcmp(a, shrt) == 0)) {
        if (*i + 1 >= argc)
            return -1;
        *val = argv[++*i];
        return 1;
    }
    if (strncmp(a, lng, ln) == 0 && a[ln] == '=') {
        *val = a + ln + 1;
        return 1;
    }
    if (shrt && strncmp(a, shrt, 2) == 0 && a[2] != '\0' && a[1] != '-') {
        *val = a + 2;
        return 1;
    }
    return 0;
}

/* Parses a timeout: a duration (a bare number in s), 0 for none, at most 30 days. */
static bool parse_timeout(const char *val, int64_t *out)
{
    return sq_parse_duration(val, SQ_NS_PER_S, out) == 0 && *out <= SQ_SERVER_MAX_TIMEOUT_NS;
}

/* Parses "DUR/PERIOD" (durations as sq_parse_duration takes them, a bare number in ms) with
 * 0 < DUR < PERIOD and DUR <= SQ_TARGET_MAX_STALL_NS. Returns false on anything else. */
static bool parse_stall(const char *val, int64_t *dur, int64_t *period)
{
    const char *slash = strchr(val, '/');
    char a[64];
    size_t n = slash ? (size_t)(slash - val) : 0;
    if (!slash || n == 0 || n >= sizeof(a) || strchr(slash + 1, '/'))
        return false;
    memcpy(a, val, n);
    a[n] = '\0';
    if (sq_parse_duration(a, SQ_NS_PER_MS, dur) < 0 ||
        sq_parse_duration(slash + 1, SQ_NS_PER_MS, period) < 0)
        return false;
    return *dur > 0 && *dur < *period && *dur <= SQ_TARGET_MAX_STALL_NS;
}

int sq_cli_target(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    uint64_t port = 8080;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t threads = ncpu > 0 ? (uint64_t)ncpu : 1;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    bool quiet = false;
    int64_t stall = 0, stall_period = 0;
    int64_t idle_timeout = 60 * SQ_NS_PER_S, header_timeout = 10 * SQ_NS_PER_S;
    int64_t request_timeout = SQ_SERVER_REQUEST_TIMEOUT_DEFAULT;
    uint64_t max_conns = 0, min_body_rate = SQ_SERVER_MIN_BODY_RATE_DEFAULT;
    const char *oauth_client = NULL;
    bool tls = false;
    struct sq_tls_server_opts topts = {0};
    struct {
        const char *name;
        const char **dst;
    } const files[] = {{"--cert", &topts.cert},
                       {"--key", &topts.key},
                       {"--client-ca", &topts.client_ca},
                       {"--cert-out", &topts.cert_out}};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        int m;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(target_usage, stdout);
            return SQ_EXIT_OK;
        }
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = true;
            continue;
        }
        if (strcmp(a, "--tls") == 0) {
            tls = true;
            continue;
        }
        bool matched = false;
        for (size_t f = 0; f < SQ_ARRAY_LEN(files) && !matched; f++) {
            if ((m = flag_value(argc, argv, &i, NULL, files[f].name, &val)) == 0)
                continue;
            if (m < 0)
                return no_value(files[f].name);
            if (!*val)
                return bad_value(files[f].name, val, "a file name");
            *files[f].dst = val;
            tls = true;
            matched = true;
        }
        if (matched)
            continue;
        if ((m = flag_value(argc, argv, &i, NULL, "--host", &val)) != 0) {
            if (m < 0)
                return no_value("--host");
            if (!*val)
                return bad_value("--host", val, "an address (e.g. 127.0.0.1, ::1, 0.0.0.0)");
            host = val;
            continue;
        }
        if ((m = flag_value(argc, argv, &i, "-p", "--port", &val)) != 0) {
            if (m < 0)
                return no_value("--port");
            if (sq_parse_u64(val, 0, 65535, 0, &port) < 0)
                return bad_value("--port", val, "a port (0..65535; 0 picks a free one)");
            continue;
        }
        if ((m = flag_value(argc, argv, &i, "-t", "--threads", &val)) != 0) {
            if (m < 0)
                return no_value("--threads");
            if (sq_parse_u64(val, 1, MAX_THREADS, 0, &threads) < 0)
                return bad_value("--threads", val, "a thread count (1..1024)");
            continue;
        }
        if ((m = flag_value(argc, argv, &i, NULL, "--stall", &val)) != 0) {
            if (m < 0)
                return no_value("--stall");
            if (!parse_stall(val, &stall, &stall_period))
                return bad_value("--stall", val,
                                 "DUR/PERIOD (0 < DUR < PERIOD, DUR at most 1h, e.g. 500ms/2s)");
            continue;
        }
        if ((m = flag_value(argc, argv, &i, NULL, "--idle-timeout", &val)) != 0) {
            if (m < 0)
                return no_value("--idle-timeout");
            if (!parse_timeout(val, &idle_timeout))
                return bad_value("--idle-timeout", val, "a timeout (e.g. 30s, 2m; 0 turns it off)");
            continue;
        }
        if ((m = flag_value(argc, argv, &i, NULL, "--header-timeout", &val)) != 0) {
            if (m < 0)
                return no_value("--header-timeout");
            if (!parse_timeout(val, &header_timeout))
                return bad_value("--header-timeout", val,
                                 "a timeout (e.g. 10s, 500ms; 0 turns it off)");
            continue;
        }
        if ((m = flag_value(argc, argv, &i, NULL, "--request-timeout", &val)) != 0) {
            if (m < 0)
                return no_value("--request-timeout");
            if (!parse_timeout(val, &request_timeout))
                return bad_value("--request-timeout", val,
                                 "a timeout (e.g. 60s, 2m; 0 turns it off)");
            continue;
        }
        if ((m = flag_value(argc, argv, &i, NULL, "--min-body-rate", &val)) != 0) {
            if (m < 0)
                return no_value("--min-body-rate");
            if (sq_parse_u64(val, 0, UINT32_MAX, 1, &min_body_rate) < 0)
                return bad_value("--min-body-rate", val,
                                 "a rate in bytes per second (0..4294967295; 0 turns it off)");
            continue;
        }
        if ((m = flag_value(argc, argv, &i, NULL, "--oauth-client", &val)) != 0) {
            if (m < 0)
                return no_value("--oauth-client");
            const char *colon = strchr(val, ':');
            if (!colon || colon == val || !colon[1])
                return bad_value("--oauth-client", val, "ID:SECRET (both non-empty)");
            oauth_client = val;
            continue;
        }
        if ((m = flag_value(argc, argv, &i, NULL, "--max-conns", &val)) != 0) {
            if (m < 0)
                return no_value("--max-conns");
            if (sq_parse_u64(val, 1, UINT32_MAX, 1, &max_conns) < 0)
                return bad_value("--max-conns", val, "a connection count (1..4294967295)");
            continue;
        }
        if (a[0] == '-')
            return sq_cli_usage_error(FACE, "unknown flag '%s'", a);
        return sq_cli_usage_error(FACE, "unexpected argument '%s'", a);
    }

    if ((topts.cert == NULL) != (topts.key == NULL))
        return sq_cli_usage_error(FACE, "%s",
                                  topts.cert ? "--cert needs --key" : "--key needs --cert");

    uint64_t have = 0;
    (void)sq_raise_nofile(65536, &have); /* best effort: many connections need many fds */

    struct sq_tls_server *ts = NULL;
    if (tls) {
        char err[SQ_TLS_ERRLEN];
        topts.alpn = "h2,http/1.1"; /* h2 first: the server's preference (server/h2.h) */
        if (sq_tls_server_new(&topts, &ts, err, sizeof(err)) < 0)
            return sq_cli_tls_error(FACE, err);
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);

    struct sq_target_config cfg = {.host = host,
                                   .port = (uint16_t)port,
                                   .threads = (int)threads,
                                   .stall_ns = stall,
                                   .stall_period_ns = stall_period,
                                   .tls = ts,
                                   .idle_timeout_ns = idle_timeout,
                                   .header_timeout_ns = header_timeout,
                                   .request_timeout_ns = request_timeout,
                                   .min_body_rate = (uint32_t)min_body_rate,
                                   .max_conns = (uint32_t)max_conns,
                                   .oauth_client = oauth_client};
    struct sq_target *t = NULL;
    const char *why = NULL;
    int rc = sq_target_start(&cfg, &t, &why);
    if (rc < 0) {
        fprintf(stderr, "squall target: cannot listen on %s:%u: %s\n", host, (unsigned)port,
                why ? why : sq_strerror(rc));
        sq_tls_server_free(ts);
        return SQ_EXIT_FAIL;
    }
    running = t;
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    bool v6 = strchr(host, ':') != NULL;
    printf("squall target listening on %s://%s%s%s:%u\n", ts ? "https" : "http", v6 ? "[" : "",
           host, v6 ? "]" : "", (unsigned)sq_target_port(t));
    fflush(stdout);

    sq_target_wait(t);
    running = NULL;
    if (!quiet)
        fprintf(stderr, "squall target: stopped\n");
    sq_target_free(t);
    sq_tls_server_free(ts);
    return SQ_EXIT_OK;
}
