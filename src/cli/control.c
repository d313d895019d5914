/* cli/control.c - control of a running quick or plan run from outside it (docs/quick.md,
 * "Control of a running run"): the run's endpoint (--control [HOST:]PORT) and `squall control`,
 * its client.
 *
 * The endpoint is a one-thread HTTP/1.1 server (server/server.h) on a loopback address only.
 * Anyone on the machine can reach a loopback port, so it takes what a browser page cannot send
 * and a local user can be kept out: a Host that is a loopback name (no DNS rebinding), no Origin
 * header at all (no web page), a JSON body (a form cannot post one without a preflight), at
 * most SQ_CLI_CONTROL_MAX_BODY bytes, within the server's deadlines; and, when
 * $SQUALL_CONTROL_TOKEN is set for the run, `Authorization: Bearer` with that token (compared
 * in constant time). What a change may be is the engine's (engine/control.h); a request never
 * reaches the load path but through sq_run_control.
 */
#include "cli/control.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/str.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "engine/control.h"
#include "server/server.h"

#define SQ_CLI_CONTROL_MAX_BODY 4096
#define TOKEN_ENV               "SQUALL_CONTROL_TOKEN"

static bool host_is_loopback(const char *p, size_t n)
{
    if (n && p[0] == '[') {
        const char *rb = memchr(p, ']', n);
        return rb && (size_t)(rb - p) == 4 && memcmp(p, "[::1", 4) == 0;
    }
    const char *colon = memchr(p, ':', n);
    size_t hn = colon ? (size_t)(colon - p) : n;
    if (sq_ieq(p, hn, "localhost", 9))
        return true;
    if (hn < 4 || memcmp(p, "127.", 4) != 0)
        return false;
    for (size_t i = 4; i < hn; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || p[i] == '.'))
            return false;
    return true;
}

static bool token_ok(const struct sq_cli_control *c, const struct sq_server_req *req)
{
    const struct sq_h1_header *h = sq_server_req_header(req, "authorization");
    if (!h || h->value_len < 7 || !sq_ieq(h->value, 7, "bearer ", 7))
        return false;
    const char *v = h->value + 7;
    size_t n = h->value_len - 7;
    unsigned diff = n != c->token_len;
    for (size_t i = 0; i < c->token_len; i++)
        diff |= (unsigned)(i < n ? v[i] : 0) ^ (unsigned)c->token[i];
    return diff == 0;
}

static void answer(struct sq_cli_control *c, struct sq_server_resp *resp, int status, json_t *j)
{
    free(c->body);
    c->body = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!c->body) {
        status = 500;
        c->body = strdup("{\"error\":\"out of memory\"}");
    }
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = c->body;
    resp->body_len = c->body ? strlen(c->body) : 0;
}

static void fail(struct sq_cli_control *c, struct sq_server_resp *resp, int status, const char *msg)
{
    answer(c, resp, status, json_pack("{s:s}", "error", msg));
}

static bool eq(const char *p, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

static bool is(const struct sq_server_req *r, const char *m)
{
    return eq(r->method, r->method_len, m);
}

/* The server's one worker thread: the gate (file comment), then GET or POST /control. */
static void handle(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    struct sq_cli_control *c = ud;
    const struct sq_h1_header *host = sq_server_req_header(req, "host");
    const struct sq_h1_header *ct = sq_server_req_header(req, "content-type");
    size_t pn = req->path_len;
    const char *q = memchr(req->path, '?', pn);
    if (q)
        pn = (size_t)(q - req->path);
    bool get = is(req, "GET") || is(req, "HEAD");
    if (!host || !host_is_loopback(host->value, host->value_len))
        return fail(c, resp, 403, "this endpoint answers only a loopback Host (127.0.0.1, [::1])");
    if (sq_server_req_header(req, "origin"))
        return fail(c, resp, 403, "requests from web pages (an Origin header) are refused");
    if (c->token_len && !token_ok(c, req)) {
        resp->headers = "WWW-Authenticate: Bearer realm=\"squall control\"\r\n";
        resp->headers_len = strlen(resp->headers);
        return fail(c, resp, 401, "a bearer token is required ($" TOKEN_ENV ")");
    }
    if (!eq(req->path, pn, "/control"))
        return fail(c, resp, 404, "no such endpoint (GET or POST /control)");
    if (!get && !is(req, "POST")) {
        resp->headers = "Allow: GET, HEAD, POST\r\n";
        resp->headers_len = strlen(resp->headers);
        return fail(c, resp, 405, "GET, HEAD or POST");
    }
    if (req->body_len > SQ_CLI_CONTROL_MAX_BODY)
        return fail(c, resp, 413, "the body is larger than 4096 bytes");
    if (get) {
        struct sq_ctl_state st;
        if (sq_run_ctl_state(c->ctl, 0, &st) < 0)
            return fail(c, resp, 409, "the run is not going");
        return answer(c, resp, 200, sq_run_ctl_state_json(&st));
    }
    if (!ct || ct->value_len < 16 || !sq_ieq(ct->value, 16, "application/json", 16))
        return fail(c, resp, 415, "the body must be JSON (Content-Type: application/json)");
    char why[256] = "";
    json_t *a = NULL;
    int rc = sq_run_ctl_json(c->ctl, req->body, req->body_len, &a, why, sizeof(why));
    if (rc < 0)
        return fail(c, resp, rc == -SQ_EUSAGE ? 400 : 409, why);
    answer(c, resp, 200, a);
}

int sq_cli_control_start(struct sq_cli_control *c, const struct sq_distopts *d,
                         struct sq_run_config *cfg)
{
    memset(c, 0, sizeof(*c));
    if (!d->control)
        return 0;
    const char *tok = getenv(TOKEN_ENV);
    if (tok && *tok) {
        if (strlen(tok) >= sizeof(c->token)) {
            fprintf(stderr, "squall: $%s: longer than %zu bytes\n", TOKEN_ENV,
                    sizeof(c->token) - 1);
            return SQ_EXIT_USAGE;
        }
        c->token_len = strlen(tok);
        memcpy(c->token, tok, c->token_len);
    }
    if (sq_run_ctl_new(&c->ctl) < 0) {
        fprintf(stderr, "squall: --control: out of memory\n");
        return SQ_EXIT_FAIL;
    }
    struct sq_server_config sc = {
        .host = d->control_host,
        .port = d->control_port,
        .threads = 1,
        .handler = handle,
        .ud = c,
        .idle_timeout_ns = 30 * SQ_NS_PER_S,
        .header_timeout_ns = 5 * SQ_NS_PER_S,
        .request_timeout_ns = 10 * SQ_NS_PER_S,
        .min_body_rate = SQ_SERVER_MIN_BODY_RATE_DEFAULT,
        .max_conns = 16,
        .evict = true,
        .http1_only = true,
    };
    const char *why = NULL;
    int rc = sq_server_start(&sc, &c->srv, &why);
    if (rc < 0) {
        fprintf(stderr, "squall: --control %s: cannot listen: %s\n", d->control,
                why ? why : sq_strerror(rc));
        sq_run_ctl_free(c->ctl);
        c->ctl = NULL;
        return SQ_EXIT_USAGE;
    }
    bool v6 = strchr(d->control_host, ':') != NULL;
    fprintf(stderr, "squall: control on http://%s%s%s:%u/control (squall control %s%s%s:%u ...)\n",
            v6 ? "[" : "", d->control_host, v6 ? "]" : "", sq_server_port(c->srv), v6 ? "[" : "",
            d->control_host, v6 ? "]" : "", sq_server_port(c->srv));
    cfg->ctl = c->ctl;
    return 0;
}

void sq_cli_control_stop(struct sq_cli_control *c, struct sq_run_config *cfg)
{
    sq_server_free(c->srv); /* its thread is gone: nothing calls into the control any more */
    c->srv = NULL;
    if (cfg && cfg->ctl == c->ctl)
        cfg->ctl = NULL;
    sq_run_ctl_free(c->ctl);
    c->ctl = NULL;
    free(c->body);
    c->body = NULL;
}

/* ---- squall control ADDR [CHANGE] ---- */

static const char control_usage[] =
    "usage: squall control [HOST:]PORT [CHANGE] [scenario=NAME]\n"
    "\n"
    "Changes a quick or plan run started with --control [HOST:]PORT while it goes, and prints\n"
    "the run's state after the change as JSON (with no CHANGE: the state now). CHANGE is one of\n"
    "  rate=N      open loop: N arrivals per second from now on\n"
    "  vus=N       closed loop (constant-vus, ramping-vus): N VUs, at most those opened\n"
    "  pause       no new arrival or iteration until resume (in-flight requests finish)\n"
    "  resume      go on after a pause\n"
    "scenario=NAME changes that scenario of a plan run alone (else every one the change fits).\n"
    "With $" TOKEN_ENV " set, it is sent as a bearer token (the run must have the same).\n"
    "Exit: 0 the change was made, 1 the run refused it or could not be reached, 2 bad usage.\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "squall control: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see squall control --help)\n");
    return SQ_EXIT_USAGE;
}

/* Sends the request and reads the whole answer (at most 64 KiB, 10 s) into buf. */
static int exchange(const char *host, const char *port, const char *req, size_t n, char *buf,
                    size_t cap, size_t *got)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai)
        return -EHOSTUNREACH;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -errno : 0;
    if (rc == 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
        rc = -errno;
    freeaddrinfo(ai);
    for (size_t off = 0; rc == 0 && off < n;) {
        ssize_t w = send(fd, req + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && errno != EINTR)
            rc = -errno;
        else if (w > 0)
            off += (size_t)w;
    }
    *got = 0;
    int64_t end = sq_now_ns() + 10 * SQ_NS_PER_S;
    while (rc == 0 && *got < cap - 1) {
        int64_t left = end - sq_now_ns();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = left > 0 ? poll(&p, 1, (int)(left / SQ_NS_PER_MS) + 1) : 0;
        if (pr == 0) {
            rc = -ETIMEDOUT;
            break;
        }
        if (pr < 0) {
            if (errno != EINTR)
                rc = -errno;
            continue;
        }
        ssize_t r = recv(fd, buf + *got, cap - 1 - *got, 0);
        if (r == 0)
            break;
        if (r < 0 && errno != EINTR)
            rc = -errno;
        else if (r > 0)
            *got += (size_t)r;
    }
    if (fd >= 0)
        close(fd);
    buf[*got] = 0;
    return rc;
}

int sq_cli_control(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(control_usage, stdout);
        return SQ_EXIT_OK;
    }
    if (argc < 2)
        return usage_error("%s", "give the run's [HOST:]PORT");
    struct sq_distopts d = {0};
    char err[256];
    if (sq_distopts_flag(&d, SQ_DISTOPT_CONTROL, "ADDR", argv[1], err, sizeof(err)) < 0)
        return usage_error("%s", err);
    json_t *body = json_object();
    int changes = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        if (strcmp(a, "pause") == 0 || strcmp(a, "resume") == 0) {
            json_object_set_new(body, a, json_true());
            changes++;
        } else if (eq && (size_t)(eq - a) == 8 && memcmp(a, "scenario", 8) == 0) {
            json_object_set_new(body, "scenario", json_string(eq + 1));
        } else if (eq && ((eq - a == 4 && memcmp(a, "rate", 4) == 0) ||
                          (eq - a == 3 && memcmp(a, "vus", 3) == 0))) {
            char *e = NULL;
            double v = strtod(eq + 1, &e);
            if (!eq[1] || *e) {
                json_decref(body);
                return usage_error("'%s' is not a number after =", a);
            }
            char key[8];
            snprintf(key, sizeof(key), "%.*s", (int)(eq - a), a);
            json_object_set_new(body, key, json_real(v));
            changes++;
        } else {
            json_decref(body);
            return usage_error("'%s': give rate=N, vus=N, pause, resume or scenario=NAME", a);
        }
    }
    if (changes > 1) {
        json_decref(body);
        return usage_error("%s", "give one change at a time");
    }
    char *text = changes ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    bool v6 = strchr(d.control_host, ':') != NULL;
    char port[8], hosthdr[64];
    snprintf(port, sizeof(port), "%u", d.control_port);
    snprintf(hosthdr, sizeof(hosthdr), "%s%s%s:%u", v6 ? "[" : "", d.control_host, v6 ? "]" : "",
             d.control_port);
    const char *tok = getenv(TOKEN_ENV);
    char auth[320] = "";
    if (tok && *tok && strlen(tok) < 256)
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", tok);
    char req[1024];
    int n =
        snprintf(req, sizeof(req),
                 "%s /control HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                 text ? "POST" : "GET", hosthdr, auth, text ? strlen(text) : 0, text ? text : "");
    free(text);
    if (n < 0 || (size_t)n >= sizeof(req))
        return usage_error("%s", "the change is too long");
    static char buf[64 * 1024];
    size_t got = 0;
    int rc = exchange(d.control_host, port, req, (size_t)n, buf, sizeof(buf), &got);
    if (rc < 0) {
        fprintf(stderr, "squall control: %s: %s\n", hosthdr, sq_strerror(rc));
        return SQ_EXIT_FAIL;
    }
    int status = 0;
    const char *b = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || !b) {
        fprintf(stderr, "squall control: %s: not an HTTP answer\n", hosthdr);
        return SQ_EXIT_FAIL;
    }
    b += 4;
    if (status != 200) {
        json_t *j = json_loads(b, 0, NULL);
        const char *e = j ? json_string_value(json_object_get(j, "error")) : NULL;
        fprintf(stderr, "squall control: %s (HTTP %d)\n", e ? e : b, status);
        json_decref(j);
        return SQ_EXIT_FAIL;
    }
    printf("%s\n", b);
    return SQ_EXIT_OK;
}
