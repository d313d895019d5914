/* cli/inbox_cmd.c - `squall inbox`: the webhook inbox (target/inbox.h) as a process: its flags,
 * the listening line on stdout, and SIGINT/SIGTERM to stop (docs/inbox.md). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/inbox_cmd.h"
#include "server/server.h"
#include "target/inbox.h"

#define FACE "squall inbox"

static const char usage[] =
    "usage: squall inbox [--listen HOST:PORT] [flags]\n"
    "\n"
    "A webhook inbox: captures every request (time, method, path, headers, body up to a cap,\n"
    "client address) into a bounded ring, answers each as configured, matches stamped events\n"
    "to their sends (counts, gaps, latency per path), and serves the captures\n"
    "under /_inbox/ on the same listener: GET /_inbox/captures?since=SEQ&path=P&limit=N,\n"
    "DELETE /_inbox/captures, GET /_inbox/stats, GET /_inbox/stream (SSE). docs/inbox.md.\n"
    "\n"
    "      --listen HOST:PORT  where to listen (default 127.0.0.1:9100; port 0 picks a free one)\n"
    "  -t, --threads N         worker threads (default 1)\n"
    "      --max-captures N    captures kept; older ones are evicted and counted (default\n"
    "                          10000, at most 1000000)\n"
    "      --max-body SIZE     body bytes kept per capture: 64KiB, 1MiB, 0 (default 64KiB, at\n"
    "                          most 1MiB); longer bodies are cut and flagged truncated\n"
    "      --status N          the answer's status (200..999, default 200)\n"
    "      --body S            the answer's body (default empty)\n"
    "      --content-type T    the answer's Content-Type (default text/plain with --body)\n"
    "      --delay D           answer D after each request (e.g. 50ms; default 0)\n"
    "      --stamp-header NAME find the event stamp ({{$stamp}}) only in header NAME (default:\n"
    "                          the first stamp in the body, else in any header)\n"
    "  -q, --quiet             no line on stderr when stopping\n"
    "  -h, --help              this help\n";

static struct sq_inbox *volatile running;

static void on_signal(int sig)
{
    (void)sig;
    struct sq_inbox *b = running;
    if (b)
        sq_inbox_stop(b);
}

static int bad_value(const char *flag, const char *val, const char *what)
{
    return sq_cli_usage_error(FACE, "%s: '%s' is not %s", flag, val, what);
}

bool sq_cli_parse_size(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    uint64_t mul = 1;
    if (strcasecmp(end, "k") == 0 || strcasecmp(end, "kib") == 0 || strcasecmp(end, "kb") == 0)
        mul = 1024;
    else if (strcasecmp(end, "m") == 0 || strcasecmp(end, "mib") == 0 || strcasecmp(end, "mb") == 0)
        mul = 1024 * 1024;
    else if (strcasecmp(end, "g") == 0 || strcasecmp(end, "gib") == 0 || strcasecmp(end, "gb") == 0)
        mul = 1024 * 1024 * 1024;
    else if (*end && strcasecmp(end, "b") != 0)
        return false;
    if (v > max / mul)
        return false;
    *out = v * mul;
    return true;
}

/* ---- the command: parse -> prepare -> run ---- */

/* What the phases of one `squall inbox` share. */
struct inboxcmd {
    char host[256];
    uint64_t port, threads, max_captures, max_body, status;
    int64_t delay;
    const char *body, *ctype, *stamp_header;
    bool quiet;
    struct sq_inbox *b;
};

/* --listen HOST:PORT ("[V6]:PORT" too). Returns 0 or the exit status. */
static int take_listen(struct inboxcmd *c, const char *val)
{
    const char *colon = strrchr(val, ':');
    size_t hl = colon ? (size_t)(colon - val) : 0;
    const char *h = val;
    if (hl >= 2 && val[0] == '[' && val[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (!colon || hl == 0 || hl >= sizeof(c->host) ||
        sq_parse_u64(colon + 1, 0, 65535, 0, &c->port) < 0)
        return bad_value("--listen", val, "HOST:PORT (e.g. 127.0.0.1:9100)");
    memcpy(c->host, h, hl);
    c->host[hl] = '\0';
    return 0;
}

/* The value of flag (as matched: "-t" stands for --threads), checked. Returns 0 or the exit
 * status after printing why. */
static int take_value(struct inboxcmd *c, const char *flag, const char *val)
{
    if (strcmp(flag, "--listen") == 0)
        return take_listen(c, val);
    if (strcmp(flag, "--threads") == 0 || strcmp(flag, "-t") == 0) {
        if (sq_parse_u64(val, 1, 1024, 0, &c->threads) < 0)
            return bad_value("--threads", val, "a thread count (1..1024)");
    } else if (strcmp(flag, "--max-captures") == 0) {
        if (sq_parse_u64(val, 1, SQ_INBOX_MAX_CAPTURES, 1, &c->max_captures) < 0)
            return bad_value("--max-captures", val, "a capture count (1..1000000)");
    } else if (strcmp(flag, "--max-body") == 0) {
        if (!sq_cli_parse_size(val, SQ_SERVER_MAX_BODY, &c->max_body))
            return bad_value("--max-body", val, "a size (0..1MiB, e.g. 64KiB)");
    } else if (strcmp(flag, "--status") == 0) {
        if (sq_parse_u64(val, 200, 999, 0, &c->status) < 0)
            return bad_value("--status", val, "a status (200..999)");
    } else if (strcmp(flag, "--body") == 0) {
        c->body = val;
    } else if (strcmp(flag, "--content-type") == 0) {
        if (strpbrk(val, "\r\n"))
            return bad_value("--content-type", val, "a header value (no line breaks)");
        c->ctype = val;
    } else if (strcmp(flag, "--stamp-header") == 0) {
        if (!sq_inbox_header_name_ok(val))
            return bad_value("--stamp-header", val, "a header name (e.g. X-Stamp)");
        c->stamp_header = val;
    } else if (strcmp(flag, "--delay") == 0) {
        if (sq_parse_duration(val, SQ_NS_PER_MS, &c->delay) != 0 ||
            c->delay > SQ_SERVER_MAX_DELAY_NS)
            return bad_value("--delay", val, "a duration (e.g. 50ms, 2s; at most 1 day)");
    }
    return 0;
}

/* The flags, by hand ("--flag VALUE" and "--flag=VALUE"). Returns 0, SQ_EXIT_DONE (--help
 * answered) or the exit status after printing why. */
static int inbox_parse(struct inboxcmd *c, int argc, char **argv)
{
    static const char *const with_value[] = {
        "--listen", "--threads",      "-t",      "--max-captures", "--max-body", "--status",
        "--body",   "--content-type", "--delay", "--stamp-header"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return SQ_EXIT_DONE;
        }
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            c->quiet = true;
            continue;
        }
        const char *flag = NULL, *val = NULL;
        for (size_t k = 0; k < SQ_ARRAY_LEN(with_value) && !flag; k++) {
            size_t n = strlen(with_value[k]);
            if (strcmp(a, with_value[k]) == 0) {
                if (i + 1 >= argc)
                    return sq_cli_usage_error(FACE, "%s needs a value", a);
                flag = with_value[k];
                val = argv[++i];
            } else if (strncmp(a, with_value[k], n) == 0 && a[n] == '=') {
                flag = with_value[k];
                val = a + n + 1;
            }
        }
        if (!flag) {
            if (a[0] == '-')
                return sq_cli_usage_error(FACE, "unknown flag '%s'", a);
            return sq_cli_usage_error(FACE, "unexpected argument '%s'", a);
        }
        int rc = take_value(c, flag, val);
        if (rc)
            return rc;
    }
    return 0;
}

/* The inbox listening, then the one line on stdout. Returns 0 or the exit status. */
static int inbox_start(struct inboxcmd *c)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    struct sq_inbox_config cfg = {
        .host = c->host,
        .port = (uint16_t)c->port,
        .threads = (int)c->threads,
        .max_captures = (uint32_t)c->max_captures,
        .max_body = (size_t)c->max_body,
        .status = (int)c->status,
        .body = c->body,
        .content_type = c->ctype,
        .delay_ns = c->delay,
        .stamp_header = c->stamp_header,
        .idle_timeout_ns = 60 * SQ_NS_PER_S,
        .header_timeout_ns = 10 * SQ_NS_PER_S,
        .request_timeout_ns = SQ_SERVER_REQUEST_TIMEOUT_DEFAULT,
        .min_body_rate = SQ_SERVER_MIN_BODY_RATE_DEFAULT,
    };
    const char *why = NULL;
    int rc = sq_inbox_start(&cfg, &c->b, &why);
    if (rc < 0) {
        fprintf(stderr, "squall inbox: cannot listen on %s:%u: %s\n", c->host, (unsigned)c->port,
                why ? why : sq_strerror(rc));
        return SQ_EXIT_FAIL;
    }
    running = c->b;
    sq_cli_stop_signals(on_signal);
    sq_cli_listening("inbox", "http", c->host, sq_inbox_port(c->b), "");
    return 0;
}

/* Serves until SIGINT or SIGTERM, then says what it kept. */
static void inbox_run(struct inboxcmd *c)
{
    sq_inbox_wait(c->b);
    running = NULL;
    if (!c->quiet) {
        struct sq_inbox_counts n;
        sq_inbox_counts(c->b, &n);
        fprintf(stderr, "squall inbox: stopped (%llu captured, %llu evicted, %llu stamped)\n",
                (unsigned long long)n.captured, (unsigned long long)n.evicted,
                (unsigned long long)n.stamped);
    }
}

int sq_cli_inbox(int argc, char **argv)
{
    struct inboxcmd c = {.host = "127.0.0.1",
                         .port = 9100,
                         .threads = 1,
                         .max_captures = SQ_INBOX_MAX_CAPTURES_DEFAULT,
                         .max_body = SQ_INBOX_MAX_BODY_DEFAULT,
                         .status = 200};
    int rc = inbox_parse(&c, argc, argv);
    if (rc == 0)
        rc = inbox_start(&c);
    if (rc == 0)
        inbox_run(&c);
    sq_inbox_free(c.b);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
