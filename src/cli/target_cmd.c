/* cli/target_cmd.c - `squall target [flags]`: runs the built-in test server until SIGINT/SIGTERM.
 *
 * Prints exactly one line on stdout once every listener is bound (tests read the port from it):
 *     squall target listening on http://HOST:PORT     (https:// with --tls)
 *     squall target listening on unix:PATH (http)     (--unix PATH; "(https)" with --tls)
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/h3lib.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "net/sock.h"
#include "net/tls.h"
#include "server/server.h"
#include "target/h3srv.h"
#include "target/target.h"

#define MAX_THREADS 1024

static const char target_usage[] =
    "usage: squall target [flags]       the built-in HTTP/1.1 and h2c test server\n"
    "\n"
    "      --host ADDR         address to listen on (default 127.0.0.1)\n"
    "      --unix PATH         listen on this Unix socket instead (mode 0600; a stale socket\n"
    "                          there is replaced, any other file refused)\n"
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
    "      --http3             also serve HTTP/3 (QUIC) on UDP at the same port number, with\n"
    "                          the same certificate (implies --tls); TCP answers carry Alt-Svc\n"
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

/* ---- the command: parse -> prepare -> run ---- */

/* What the phases of one `squall target` share. */
struct targetcmd {
    const char *host;
    const char *unix_path; /* --unix PATH, or NULL */
    uint64_t port, threads;
    bool quiet, tls, http3;
    int64_t stall, stall_period; /* --stall DUR/PERIOD */
    int64_t idle_timeout, header_timeout, request_timeout;
    uint64_t max_conns, min_body_rate;
    const char *oauth_client;
    struct sq_tls_server_opts topts; /* --cert, --key, --client-ca, --cert-out */
    struct sq_tls_server *ts;
    struct sq_target *t;
};

/* The flags that take a value, in the order they are tried. */
static const struct {
    const char *shrt, *lng;
} value_flags[] = {
    {NULL, "--cert"},           {NULL, "--key"},
    {NULL, "--client-ca"},      {NULL, "--cert-out"},
    {NULL, "--host"},           {NULL, "--unix"},
    {"-p", "--port"},           {"-t", "--threads"},
    {NULL, "--stall"},          {NULL, "--idle-timeout"},
    {NULL, "--header-timeout"}, {NULL, "--request-timeout"},
    {NULL, "--min-body-rate"},  {NULL, "--oauth-client"},
    {NULL, "--max-conns"},
};

/* A TLS file flag's value: any of them turns TLS on. Returns 0, 1 (not a file flag) or the exit
 * status. */
static int take_file(struct targetcmd *c, const char *flag, const char *val)
{
    struct {
        const char *name;
        const char **dst;
    } const files[] = {{"--cert", &c->topts.cert},
                       {"--key", &c->topts.key},
                       {"--client-ca", &c->topts.client_ca},
                       {"--cert-out", &c->topts.cert_out}};
    for (size_t f = 0; f < SQ_ARRAY_LEN(files); f++) {
        if (strcmp(flag, files[f].name) != 0)
            continue;
        if (!*val)
            return bad_value(flag, val, "a file name");
        *files[f].dst = val;
        c->tls = true;
        return 0;
    }
    return 1;
}

/* The value of flag (its long name), checked. Returns 0 or the exit status after printing why. */
static int take_value(struct targetcmd *c, const char *flag, const char *val)
{
    int rc = take_file(c, flag, val);
    if (rc != 1)
        return rc;
    if (strcmp(flag, "--host") == 0) {
        if (!*val)
            return bad_value(flag, val, "an address (e.g. 127.0.0.1, ::1, 0.0.0.0)");
        c->host = val;
    } else if (strcmp(flag, "--unix") == 0) {
        if (!*val)
            return bad_value(flag, val, "a socket path");
        c->unix_path = val;
    } else if (strcmp(flag, "--port") == 0) {
        if (sq_parse_u64(val, 0, 65535, 0, &c->port) < 0)
            return bad_value(flag, val, "a port (0..65535; 0 picks a free one)");
    } else if (strcmp(flag, "--threads") == 0) {
        if (sq_parse_u64(val, 1, MAX_THREADS, 0, &c->threads) < 0)
            return bad_value(flag, val, "a thread count (1..1024)");
    } else if (strcmp(flag, "--stall") == 0) {
        if (!parse_stall(val, &c->stall, &c->stall_period))
            return bad_value(flag, val,
                             "DUR/PERIOD (0 < DUR < PERIOD, DUR at most 1h, e.g. 500ms/2s)");
    } else if (strcmp(flag, "--idle-timeout") == 0) {
        if (!parse_timeout(val, &c->idle_timeout))
            return bad_value(flag, val, "a timeout (e.g. 30s, 2m; 0 turns it off)");
    } else if (strcmp(flag, "--header-timeout") == 0) {
        if (!parse_timeout(val, &c->header_timeout))
            return bad_value(flag, val, "a timeout (e.g. 10s, 500ms; 0 turns it off)");
    } else if (strcmp(flag, "--request-timeout") == 0) {
        if (!parse_timeout(val, &c->request_timeout))
            return bad_value(flag, val, "a timeout (e.g. 60s, 2m; 0 turns it off)");
    } else if (strcmp(flag, "--min-body-rate") == 0) {
        if (sq_parse_u64(val, 0, UINT32_MAX, 1, &c->min_body_rate) < 0)
            return bad_value(flag, val,
                             "a rate in bytes per second (0..4294967295; 0 turns it off)");
    } else if (strcmp(flag, "--oauth-client") == 0) {
        const char *colon = strchr(val, ':');
        if (!colon || colon == val || !colon[1])
            return bad_value(flag, val, "ID:SECRET (both non-empty)");
        c->oauth_client = val;
    } else if (strcmp(flag, "--max-conns") == 0) {
        if (sq_parse_u64(val, 1, UINT32_MAX, 1, &c->max_conns) < 0)
            return bad_value(flag, val, "a connection count (1..4294967295)");
    }
    return 0;
}

/* The flags, by hand (--port=N, -pN and --port N all work). Returns 0, SQ_EXIT_DONE (--help
 * answered) or the exit status after printing why. */
static int target_parse(struct targetcmd *c, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(target_usage, stdout);
            return SQ_EXIT_DONE;
        }
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            c->quiet = true;
            continue;
        }
        if (strcmp(a, "--tls") == 0) {
            c->tls = true;
            continue;
        }
        if (strcmp(a, "--http3") == 0) {
            c->http3 = c->tls = true;
            continue;
        }
        int m = 0, rc;
        size_t f;
        for (f = 0; f < SQ_ARRAY_LEN(value_flags) && m == 0; f++)
            m = flag_value(argc, argv, &i, value_flags[f].shrt, value_flags[f].lng, &val);
        if (m < 0)
            return no_value(value_flags[f - 1].lng);
        if (m > 0) {
            if ((rc = take_value(c, value_flags[f - 1].lng, val)) != 0)
                return rc;
            continue;
        }
        if (a[0] == '-')
            return sq_cli_usage_error(FACE, "unknown flag '%s'", a);
        return sq_cli_usage_error(FACE, "unexpected argument '%s'", a);
    }
    if ((c->topts.cert == NULL) != (c->topts.key == NULL))
        return sq_cli_usage_error(FACE, "%s",
                                  c->topts.cert ? "--cert needs --key" : "--key needs --cert");
    if (c->http3 && !sq_h3srv_available()) {
        fprintf(stderr,
                "%s: --http3: this build has no HTTP/3 (libngtcp2, "
                "libngtcp2_crypto_gnutls, libnghttp3 and gnutls were not found when it "
                "was built; scripts/deps.sh installs them)\n",
                FACE);
        return SQ_EXIT_USAGE;
    }
    if (c->http3 && c->unix_path)
        return sq_cli_usage_error(FACE, "--http3 listens on UDP: not with --unix");
    if (c->http3 && c->topts.client_ca)
        return sq_cli_usage_error(FACE, "--http3 does not check client certificates: not with "
                                        "--client-ca");
    return 0;
}

/* The open-file limit, TLS, the listeners bound, then the one line on stdout. Returns 0 or the
 * exit status after printing why. */
static int target_start(struct targetcmd *c)
{
#ifdef SQ_HAVE_H3
    char h3why[512];
    if (c->http3 && sq_h3lib_load(h3why, sizeof(h3why)) < 0) {
        fprintf(stderr, "squall target: --http3: %s\n", h3why);
        return SQ_EXIT_FAIL;
    }
#endif
    uint64_t have = 0;
    (void)sq_raise_nofile(65536, &have); /* best effort: many connections need many fds */
    if (c->tls) {
        char err[SQ_TLS_ERRLEN];
        c->topts.alpn = "h2,http/1.1"; /* h2 first: the server's preference (server/h2.h) */
        if (sq_tls_server_new(&c->topts, &c->ts, err, sizeof(err)) < 0)
            return sq_cli_tls_error(FACE, err);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    struct sq_target_config cfg = {.host = c->host,
                                   .port = (uint16_t)c->port,
                                   .unix_path = c->unix_path,
                                   .threads = (int)c->threads,
                                   .stall_ns = c->stall,
                                   .stall_period_ns = c->stall_period,
                                   .tls = c->ts,
                                   .idle_timeout_ns = c->idle_timeout,
                                   .header_timeout_ns = c->header_timeout,
                                   .request_timeout_ns = c->request_timeout,
                                   .min_body_rate = (uint32_t)c->min_body_rate,
                                   .max_conns = (uint32_t)c->max_conns,
                                   .oauth_client = c->oauth_client};
    char *cert_pem = NULL, *key_pem = NULL;
    if (c->http3 && sq_tls_server_pem(c->ts, &cert_pem, &key_pem) < 0) {
        fprintf(stderr, "squall target: --http3: out of memory\n");
        return SQ_EXIT_FAIL;
    }
    cfg.http3 = c->http3;
    cfg.h3_cert_pem = cert_pem;
    cfg.h3_key_pem = key_pem;
    const char *why = NULL;
    int rc = sq_target_start(&cfg, &c->t, &why);
    free(cert_pem);
    sq_tls_pem_free(key_pem);
    if (rc < 0 && c->unix_path) {
        fprintf(stderr, "squall target: cannot listen on unix:%s: %s\n", c->unix_path,
                why ? why : sq_strerror(rc));
        return SQ_EXIT_FAIL;
    }
    if (rc < 0) {
        fprintf(stderr, "squall target: cannot listen on %s:%u: %s\n", c->host, (unsigned)c->port,
                why ? why : sq_strerror(rc));
        return SQ_EXIT_FAIL;
    }
    running = c->t;
    sq_cli_stop_signals(on_signal);
    if (c->unix_path) {
        printf("squall target listening on unix:%s (%s)\n", c->unix_path, c->ts ? "https" : "http");
        fflush(stdout);
    } else {
        sq_cli_listening("target", c->ts ? "https" : "http", c->host, sq_target_port(c->t), "");
    }
    return 0;
}

/* Serves until SIGINT or SIGTERM. */
static void target_run(struct targetcmd *c)
{
    sq_target_wait(c->t);
    running = NULL;
    if (!c->quiet)
        fprintf(stderr, "squall target: stopped\n");
}

int sq_cli_target(int argc, char **argv)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    struct targetcmd c = {.host = "127.0.0.1",
                          .port = 8080,
                          .threads = ncpu > 0 ? (uint64_t)ncpu : 1,
                          .idle_timeout = 60 * SQ_NS_PER_S,
                          .header_timeout = 10 * SQ_NS_PER_S,
                          .request_timeout = SQ_SERVER_REQUEST_TIMEOUT_DEFAULT,
                          .min_body_rate = SQ_SERVER_MIN_BODY_RATE_DEFAULT};
    if (c.threads > MAX_THREADS)
        c.threads = MAX_THREADS;
    int rc = target_parse(&c, argc, argv);
    if (rc == 0)
        rc = target_start(&c);
    if (rc == 0)
        target_run(&c);
    sq_target_free(c.t);
    sq_tls_server_free(c.ts);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
