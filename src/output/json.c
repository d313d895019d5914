/* output/json.c - the result as JSON (schema squall.result/1, docs/json-schema.md).
 *
 * Every duration carries its unit in its key; request accounting lives under "requests" alone.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "base/redact.h"
#include "base/text.h"
#include "result/verdict.h"
#include "plan/exec.h"
#include "output/figures.h"
#include "output/fmt.h"
#include "output/json.h"
#include "stats/hist.h"
#include "stats/histjson.h"

/* ---- figures: durations, histograms, percentiles ---- */

static json_t *jdur_s(int64_t ns)
{
    return json_real((double)ns / 1e9);
}

static const double default_pcts[] = {50, 90, 95, 99, 99.9};

/* {"50": 830, "99.9": 5510}: the asked percentiles of h, keyed as the user wrote them. */
static json_t *percentiles(const struct sq_hist *h, const double *pcts, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof(key), "%g", pcts[i]);
        json_object_set_new(o, key,
                            json_integer(sq_hist_total(h) ? sq_hist_percentile(h, pcts[i]) : 0));
    }
    return o;
}

static json_t *latency_block(const struct sq_hist *h, const char *from)
{
    struct sq_latency_figures lf;
    sq_report_latency_figures(h, &lf);
    json_t *l = json_pack(
        "{s:s, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:I}", "measured_from", from,
        "count", (json_int_t)lf.count, "out_of_range", (json_int_t)lf.out_of_range, "min_us",
        (json_int_t)lf.min, "mean_us", lf.mean, "stdev_us", lf.stdev, "p50_us", (json_int_t)lf.p50,
        "p90_us", (json_int_t)lf.p90, "p95_us", (json_int_t)lf.p95, "p99_us", (json_int_t)lf.p99,
        "p99_9_us", (json_int_t)lf.p999, "max_us", (json_int_t)lf.max);
    json_object_set_new(l, "histogram", sq_hist_json(h));
    return l;
}

/* ---- the run block and the command line as typed ---- */

const char *sq_report_iso8601(int64_t wall_ns, char *buf, size_t size)
{
    time_t t = (time_t)(wall_ns / 1000000000LL);
    struct tm tm;
    char date[32], zone[8];
    if (!localtime_r(&t, &tm) || !strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm) ||
        !strftime(zone, sizeof(zone), "%z", &tm) || strlen(zone) != 5) {
        snprintf(buf, size, "?");
        return buf;
    }
    /* %z is +hhmm; ISO 8601's extended form wants +hh:mm */
    snprintf(buf, size, "%s.%03d%.3s:%s", date, (int)(wall_ns / 1000000LL % 1000), zone, zone + 3);
    return buf;
}

/* When the run ran, under what name, from where: what an archived report needs to be found
 * again. "command" is the CLI's to fill (sq_report_set_command). */
static json_t *run_block(const struct sq_report_info *info, const struct sq_result *r)
{
    char a[48], b[48], host[256] = "";
    gethostname(host, sizeof(host) - 1);
    bool started = r->wall_start_ns > 0;
    /* seed: what the random values came from (53 bits: exact as a JSON number) */
    return json_pack(
        "{s:o, s:o, s:o, s:o, s:s, s:I}", "name",
        info->name ? json_string(info->name) : json_null(), "started_at",
        started ? json_string(sq_report_iso8601(r->wall_start_ns, a, sizeof(a))) : json_null(),
        "ended_at",
        started ? json_string(sq_report_iso8601(r->wall_start_ns + r->duration_ns, b, sizeof(b)))
                : json_null(),
        "command", json_null(), "host", host, "seed", (json_int_t)r->seed);
}

/* Appends s to o, quoted for a POSIX shell when it holds anything a shell reads specially.
 * o has room for 4 * strlen(s) + 3 bytes. Returns the end. */
static char *shell_word(char *o, const char *s)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                               "@%+=:,./-_";
    size_t n = strlen(s);
    if (n && strspn(s, safe) == n) {
        memcpy(o, s, n);
        return o + n;
    }
    *o++ = '\'';
    for (; *s; s++) {
        if (*s == '\'') {
            memcpy(o, "'\\''", 4); /* close, an escaped quote, open again */
            o += 4;
        } else {
            *o++ = *s;
        }
    }
    *o++ = '\'';
    return o;
}

/* The header value of a -H argument: "-H" then the next word, "-HK: V", "--header" then the next
 * word, "--header=K: V". Returns where it starts in argv[i] (or argv[i + 1], *next set), or NULL
 * when argv[i] gives none. */
static const char *header_arg(int argc, char **argv, int i, bool *next)
{
    const char *a = argv[i];
    *next = false;
    if ((strcmp(a, "-H") == 0 || strcmp(a, "--header") == 0) && i + 1 < argc) {
        *next = true;
        return argv[i + 1];
    }
    if (strncmp(a, "--header=", 9) == 0)
        return a + 9;
    if (a[0] == '-' && a[1] == 'H' && a[2])
        return a + 2;
    return NULL;
}

/* s, a "K: V" header line, with V redacted when K carries a credential; NULL: s as it is (or
 * out of memory). */
static char *redact_header_arg(const char *s)
{
    const char *colon = strchr(s, ':');
    if (!colon)
        return NULL;
    size_t nl = (size_t)(colon - s);
    while (nl && (s[nl - 1] == ' ' || s[nl - 1] == '\t'))
        nl--;
    if (!sq_redact_header_name(s, nl))
        return NULL;
    const char *v = colon + 1;
    v += strspn(v, " \t");
    struct sq_buf b = {0};
    if (sq_buf_append(&b, s, (size_t)(v - s)) < 0 || sq_redact_value(s, nl, v, strlen(v), &b) < 0 ||
        sq_buf_append(&b, "", 1) < 0) {
        sq_buf_dispose(&b);
        return NULL;
    }
    return b.p;
}

void sq_report_set_command(json_t *doc, int argc, char **argv, bool redact)
{
    json_t *run = json_object_get(doc, "run");
    if (!json_is_object(run) || argc < 1)
        return;
    size_t cap = 1;
    for (int i = 0; i < argc; i++)
        cap += 4 * strlen(i ? argv[i] : "squall") + 4 + 4 * sizeof(SQ_REDACTED);
    char *buf = malloc(cap), *o = buf;
    if (!buf)
        return;
    for (int i = 0; i < argc; i++) {
        if (i)
            *o++ = ' ';
        bool next;
        const char *h = redact && i ? header_arg(argc, argv, i, &next) : NULL;
        char *r = h ? redact_header_arg(h) : NULL;
        size_t at, n;
        if (!r && redact && i && sq_redact_url_secret(argv[i], strlen(argv[i]), &at, &n) && n) {
            struct sq_buf b = {0}; /* a broker URL's password */
            if (sq_redact_url(argv[i], strlen(argv[i]), &b) == 0 && sq_buf_append(&b, "", 1) == 0)
                o = shell_word(o, b.p);
            else
                o = shell_word(o, SQ_REDACTED);
            sq_buf_dispose(&b);
            continue;
        }
        if (!r) {
            o = shell_word(o, i ? argv[i] : "squall");
            continue;
        }
        if (next) { /* -H, then the value as its own word */
            o = shell_word(o, argv[i]);
            *o++ = ' ';
            o = shell_word(o, r);
            i++;
        } else { /* the flag and the value in one word */
            size_t fl = (size_t)(h - argv[i]);
            char *w = malloc(fl + strlen(r) + 1);
            if (w) {
                memcpy(w, argv[i], fl);
                strcpy(w + fl, r);
                o = shell_word(o, w);
                free(w);
            } else {
                o = shell_word(o, "[redacted]");
            }
        }
        free(r);
    }
    *o = '\0';
    json_object_set_new(run, "command", json_string(buf));
    free(buf);
}

/* {"200": 9, "503": 1}: every exact status seen, lowest first. */
/* Bytes as a JSON string: UTF-8 as it is, any byte that is not part of well-formed UTF-8 as
 * U+FFFD (a sample shows what came, not necessarily text). */
/* ---- sampled exchanges ---- */

static json_t *bytes_text(const char *p, size_t n)
{
    if (sq_utf8_valid(p, n))
        return json_stringn(p, n);
    char *t = malloc(n * 3 + 1);
    if (!t)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = sq_utf8_decode((const unsigned char *)p + i, n - i, NULL);
        if (l) {
            memcpy(t + o, p + i, l);
            o += l;
            i += l;
        } else {
            memcpy(t + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(t, o);
    free(t);
    return j;
}

static const char *const xs_status_names[SQ_XS_STATUS_CLASSES] = {"other", "1xx", "2xx",
                                                                  "3xx",   "4xx", "5xx"};

const char *sq_report_sample_class(uint32_t cls)
{
    if (cls < SQ_XS_STATUS_CLASSES)
        return xs_status_names[cls];
    return sq_errk_name((enum sq_errk)(cls - SQ_XS_STATUS_CLASSES));
}

static json_t *us_ms_or_null(int64_t us)
{
    return us >= 0 ? json_real((double)us / 1e3) : json_null();
}

static json_t *one_sample(const struct sq_xsample *x)
{
    json_t *req = json_pack("{s:o, s:b}", "text", bytes_text(x->req ? x->req : "", x->req_len),
                            "cut", x->req_cut);
    json_t *resp =
        x->head || x->body
            ? json_pack("{s:o, s:b, s:o, s:I, s:b}", "head",
                        bytes_text(x->head ? x->head : "", x->head_len), "head_cut", x->head_cut,
                        "body", bytes_text(x->body ? x->body : "", x->body_len), "body_bytes",
                        (json_int_t)x->body_total, "body_cut", x->body_total > x->body_len)
            : json_null();
    return json_pack(
        "{s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:o, s:o}", "t_s", (double)x->end_ns / 1e9,
        "status", x->status ? json_integer(x->status) : json_null(), "error",
        x->error >= 0 ? json_string(sq_errk_name((enum sq_errk)x->error)) : json_null(),
        "latency_ms", us_ms_or_null(x->latency_us), "ttfb_ms", us_ms_or_null(x->ttfb_us),
        "connect_ms", us_ms_or_null(x->connect_us), "tls_ms", us_ms_or_null(x->tls_us), "protocol",
        x->h2 ? "h2" : "http/1.1", "request", req, "response", resp);
}

json_t *sq_report_json_sample(const struct sq_xsample *x)
{
    return one_sample(x);
}

/* The sampled exchanges (--sample-responses): per class seen, how many were seen and those kept. */
static json_t *samples_block(const struct sq_result *r)
{
    const struct sq_xsamples *xs = &r->xsamples;
    json_t *classes = json_array();
    size_t i = 0;
    for (uint32_t k = 0; k < SQ_XS_CLASSES; k++) {
        json_t *kept = json_array();
        for (; i < xs->n && xs->v[i].cls == k; i++)
            json_array_append_new(kept, one_sample(&xs->v[i]));
        if (!xs->seen[k] && !json_array_size(kept)) {
            json_decref(kept);
            continue;
        }
        json_array_append_new(classes,
                              json_pack("{s:s, s:s, s:I, s:o}", "class", sq_report_sample_class(k),
                                        "kind", k < SQ_XS_STATUS_CLASSES ? "status" : "error",
                                        "seen", (json_int_t)xs->seen[k], "samples", kept));
    }
    return json_pack("{s:I, s:I, s:o}", "per_class", (json_int_t)xs->per_class, "body_max",
                     (json_int_t)SQ_SAMPLE_BODY_MAX, "classes", classes);
}

/* ---- statuses, failures and why a run failed ---- */

static json_t *status_codes(const struct sq_result *r)
{
    json_t *o = json_object();
    for (int k = 0; k < SQ_STATUS_CODES; k++) {
        if (!r->status_codes[k])
            continue;
        char key[8];
        snprintf(key, sizeof(key), "%d", k);
        json_object_set_new(o, key, json_integer((json_int_t)r->status_codes[k]));
    }
    return o;
}

/* Responses with a status >= 400: the 4xx and 5xx classes, and any code above 599 (counted in
 * the "other" class with the statuses that did not parse). */
static uint64_t http_failed(const struct sq_result *r)
{
    uint64_t n = r->c.status[4] + r->c.status[5];
    for (int k = 600; k < SQ_STATUS_CODES; k++)
        n += r->status_codes[k];
    return n;
}

/* The two kinds of failure, apart, and k6's http_req_failed over both. */
static json_t *failures(const struct sq_result *r)
{
    uint64_t transport = r->c.failed, http = http_failed(r);
    uint64_t ended = r->c.completed + r->c.failed;
    return json_pack("{s:I, s:I, s:{s:I, s:I, s:f}}", "transport", (json_int_t)transport, "http",
                     (json_int_t)http, "http_req_failed", "count", (json_int_t)(transport + http),
                     "of", (json_int_t)ended, "rate",
                     ended ? (double)(transport + http) / (double)ended : 0.0);
}

const char *sq_report_error_text(const struct sq_result *r, enum sq_errk k, int64_t timeout_ns,
                                 char *buf, size_t len)
{
    switch (k) {
    case SQ_ERRK_CONNECT:
        if (r->first_connect_err)
            return sq_strerror(r->first_connect_err);
        return "a connect attempt failed";
    case SQ_ERRK_TLS:
        if (r->tls_error[0])
            return r->tls_error;
        return "a TLS failure";
    case SQ_ERRK_PROXY:
        if (r->proxy_error[0])
            return r->proxy_error;
        return "the proxy refused the tunnel (CONNECT)";
    case SQ_ERRK_TIMEOUT:
        snprintf(buf, len, "no complete response within the %gs timeout", (double)timeout_ns / 1e9);
        return buf;
    case SQ_ERRK_CLOSED:
        return "the server closed or reset the connection with a request in flight";
    case SQ_ERRK_PARSE:
        return "a response that is not valid HTTP, or past the limits (64 KiB of head, 128 "
               "headers)";
    case SQ_ERRK_WRITE:
        return "the request could not be written: the connection broke";
    case SQ_ERRK_DNS:
        return "a lookup of the target during the run failed (the old addresses stay in use)";
    case SQ_ERRK_DECODE:
        return "a compressed body did not decode: corrupt, cut short, or over 64 MiB decoded";
    case SQ_ERRK_EXTRACT:
        return "an extractor found nothing";
    case SQ_ERRK_UNSOLICITED:
        return "bytes no request asked for (RFC 9112 6.3): the connection was replaced";
    case SQ_ERRK_REDIRECT_LIMIT:
        return "a step was redirected more times than it may follow (a loop, or past its "
               "redirects): its checks saw the last 3xx";
    case SQ_ERRK_REDIRECT_OFFSITE:
        return "a redirect to another origin (scheme, host or port), or to no URL: not followed, "
               "its checks saw the 3xx";
    default:
        return sq_errk_name(k);
    }
}

/* What an error kind means, or its first message when squall keeps one. */
static json_t *error_message(const struct sq_result *r, enum sq_errk k, int64_t timeout_ns)
{
    char buf[320];
    return json_string(sq_report_error_text(r, k, timeout_ns, buf, sizeof(buf)));
}

/* Appends to buf at *used, as far as it goes. */
static void add(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    if (*used >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    if (w > 0)
        *used = (size_t)w < len - *used ? *used + (size_t)w : len - 1;
}

/* How many kinds the line names at most, largest first; the rest are counted. */
#define WHY_KINDS 3

/* The kind with the most errors (SQ_ERRK_COUNT: none). */
static int largest_kind(const struct sq_result *r)
{
    int best = SQ_ERRK_COUNT;
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        if (r->c.errors[k] && (best == SQ_ERRK_COUNT || r->c.errors[k] > r->c.errors[best]))
            best = k;
    return best;
}

const char *sq_report_why_failed(const struct sq_result *r, int64_t timeout_ns, char *buf,
                                 size_t len)
{
    size_t used = 0;
    char g[32], tmp[320];
    if (len)
        buf[0] = '\0';
    uint64_t failed = sq_result_failed_units(r);
    bool said_tls = false;
    if (r->c.sent == 0 && r->bus_error[0]) {
        /* MQTT --idle: no CONNECT accepted; the broker's refusal says why */
        add(buf, len, &used, "%s", r->bus_error);
        return buf;
    }
    if (r->aborted && r->abort_reason[0]) {
        /* the run gave up (no connection could be made...): its reason says it best */
        add(buf, len, &used, "%s", r->abort_reason);
        if (!failed)
            return buf;
        add(buf, len, &used, "; ");
    } else if (r->tls_error[0] && (failed == 0 || largest_kind(r) == SQ_ERRK_TLS)) {
        /* every handshake failed, or TLS failed the requests (a client certificate refused
         * after a TLS 1.3 handshake): the TLS library's reason first */
        add(buf, len, &used, "tls: %s", r->tls_error);
        if (!failed)
            return buf;
        add(buf, len, &used, "; ");
        said_tls = true;
    }
    if (failed)
        add(buf, len, &used, "%s failed", sq_fmt_group(failed, g, sizeof(g)));
    /* the kinds, largest first (connect and the other kinds that cost no request included:
     * they say why nothing could be sent) */
    bool done[SQ_ERRK_COUNT] = {0};
    int named = 0, more = 0;
    for (;;) {
        int best = -1;
        for (int k = 0; k < SQ_ERRK_COUNT; k++)
            if (!done[k] && r->c.errors[k] && (best < 0 || r->c.errors[k] > r->c.errors[best]))
                best = k;
        if (best < 0)
            break;
        done[best] = true;
        if (named == WHY_KINDS) {
            more++;
            continue;
        }
        add(buf, len, &used, "%s%s %s",
            named    ? "; "
            : failed ? ": "
                     : "",
            sq_errk_name((enum sq_errk)best), sq_fmt_group(r->c.errors[best], g, sizeof(g)));
        if (!(said_tls && best == SQ_ERRK_TLS)) /* else said above */
            add(buf, len, &used, " (%s)",
                sq_report_error_text(r, (enum sq_errk)best, timeout_ns, tmp, sizeof(tmp)));
        named++;
    }
    if (more)
        add(buf, len, &used, "; %d more kind%s in the summary", more, more > 1 ? "s" : "");
    if (!used && r->c.sent)
        /* a run shorter than the timeout: its requests were still out when it ended */
        add(buf, len, &used, "%s sent, none answered before the run ended (%s still in flight)",
            sq_fmt_group(r->c.sent, g, sizeof(g)), sq_fmt_group(r->in_flight, tmp, sizeof(tmp)));
    else if (!used)
        add(buf, len, &used, "nothing was sent (the flow's steps were never started)");
    return buf;
}

static json_t *error_messages(const struct sq_result *r, int64_t timeout_ns)
{
    json_t *o = json_object();
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        if (r->c.errors[k])
            json_object_set_new(o, sq_errk_name((enum sq_errk)k),
                                error_message(r, (enum sq_errk)k, timeout_ns));
    return o;
}

/* The 100 ms series, as parallel arrays: a bin a key would triple the document. */
/* ---- the series, the executor, TLS, the environment ---- */

static json_t *fine_series(const struct sq_result *r)
{
    json_t *done = json_array(), *failed = json_array(), *mx = json_array();
    for (size_t i = 0; i < r->fine.n; i++) {
        json_array_append_new(done, json_integer(r->fine.v[i].completed));
        json_array_append_new(failed, json_integer(r->fine.v[i].failed));
        json_array_append_new(mx, json_integer(r->fine.v[i].max_us));
    }
    int64_t bin_ns = r->fine.bin_ns ? r->fine.bin_ns : SQ_FINE_BIN_NS;
    return json_pack("{s:f, s:o, s:o, s:o}", "bin_s", (double)bin_ns / 1e9, "completed", done,
                     "failed", failed, "max_us", mx);
}

static json_t *executor(const struct sq_exec *e)
{
    double per_s = 1e9 / (double)e->time_unit_ns;
    json_t *x =
        json_pack("{s:s, s:I, s:f, s:f, s:o}", "kind", sq_exec_name(e->kind), "vus",
                  (json_int_t)sq_exec_max_vus(e), "length_s", (double)sq_exec_length_ns(e) / 1e9,
                  "graceful_stop_s", (double)e->graceful_stop_ns / 1e9, "pacing_s",
                  e->pacing_ns ? jdur_s(e->pacing_ns) : json_null());
    if (e->kind == SQ_EXEC_CONSTANT_ARRIVAL_RATE)
        json_object_set_new(x, "rate_per_s", json_real(e->rate * per_s));
    if (e->kind == SQ_EXEC_RAMPING_ARRIVAL_RATE)
        json_object_set_new(x, "start_rate_per_s", json_real(e->start_rate * per_s));
    if (sq_exec_is_open(e))
        json_object_set_new(x, "max_in_flight", json_integer((json_int_t)e->max_in_flight));
    if (e->kind == SQ_EXEC_SHARED_ITERATIONS || e->kind == SQ_EXEC_PER_VU_ITERATIONS)
        json_object_set_new(x, "iterations", json_integer((json_int_t)e->iterations));
    if (e->kind == SQ_EXEC_RAMPING_VUS || e->kind == SQ_EXEC_RAMPING_ARRIVAL_RATE) {
        json_t *st = json_array();
        bool rate = e->kind == SQ_EXEC_RAMPING_ARRIVAL_RATE;
        for (uint32_t i = 0; i < e->nstages; i++)
            json_array_append_new(st, json_pack("{s:f, s:f}", "duration_s",
                                                (double)e->stages[i].duration_ns / 1e9,
                                                rate ? "target_per_s" : "target_vus",
                                                e->stages[i].target * (rate ? per_s : 1)));
        json_object_set_new(x, "stages", st);
    }
    return x;
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* https: handshakes, what the first connection negotiated, and the first TLS error. */
static json_t *tls_block(const struct sq_result *r)
{
    return json_pack("{s:I, s:I, s:I, s:o, s:o, s:o, s:o}", "handshakes",
                     (json_int_t)r->c.tls_handshakes, "resumed", (json_int_t)r->c.tls_resumed,
                     "handshake_errors", (json_int_t)r->c.tls_handshake_errors, "version",
                     str_or_null(r->tls_version), "cipher", str_or_null(r->tls_cipher), "alpn",
                     str_or_null(r->tls_alpn), "first_error",
                     r->tls_error[0] ? json_string(r->tls_error) : json_null());
}

/* Where the run ran: enough to tell two results' machines apart. */
static json_t *environment(void)
{
    struct utsname u;
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    bool un = uname(&u) == 0;
    return json_pack("{s:s, s:s, s:s, s:s, s:I}", "squall_version", SQ_VERSION, "host", host, "os",
                     un ? u.sysname : "", "kernel", un ? u.release : "", "cpus",
                     (json_int_t)sysconf(_SC_NPROCESSORS_ONLN));
}

static json_t *ns_s(int64_t ns)
{
    return json_real((double)ns / 1e9);
}

static json_t *ns_ms(int64_t ns)
{
    return json_real((double)ns / 1e6);
}

/* A count that may be unknown (-1): null then. */
static json_t *count_or_null(int64_t v)
{
    return v >= 0 ? json_integer((json_int_t)v) : json_null();
}

/* One second of the watched processes (docs/json-schema.md, "server" in a series entry). */
static json_t *server_second(const struct sq_watch_tick *t)
{
    return json_pack("{s:o, s:o, s:I, s:I, s:I, s:o, s:o, s:o}", "cpu_user_s", ns_s(t->cpu_user_ns),
                     "cpu_sys_s", ns_s(t->cpu_sys_ns), "rss_bytes", (json_int_t)t->rss_bytes,
                     "processes", (json_int_t)t->procs, "threads", (json_int_t)t->threads, "fds",
                     count_or_null(t->fds), "ctxsw_voluntary", count_or_null(t->ctxsw_vol),
                     "ctxsw_involuntary", count_or_null(t->ctxsw_invol));
}

/* squall's own cost in one second ("client" in a series entry). */
static json_t *client_second(const struct sq_client_second *c, bool open)
{
    json_t *o =
        json_pack("{s:o, s:f, s:o, s:I}", "cpu_s", ns_s(c->cpu_ns), "busy_max", c->busy_max,
                  "loop_lag_ms", ns_ms(c->lag_max_ns), "rss_bytes", (json_int_t)c->rss_bytes);
    if (o && open)
        json_object_set_new(o, "behind_ms", ns_ms(c->behind_max_ns));
    return o;
}

json_t *sq_report_json_second(const struct sq_second *e, bool client, bool open)
{
    double len = e->len_s > 0 ? e->len_s : 1;
    json_t *o = json_pack("{s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}",
                          "t_s", e->t_s, "len_s", e->len_s, "requests", (json_int_t)e->sent,
                          "completed", (json_int_t)e->completed, "failed", (json_int_t)e->failed,
                          "dropped", (json_int_t)e->dropped, "errors", (json_int_t)e->errors, "rps",
                          (double)e->completed / len, "bytes_received",
                          (json_int_t)e->bytes_received, "p50_us", (json_int_t)e->p50_us, "p90_us",
                          (json_int_t)e->p90_us, "p99_us", (json_int_t)e->p99_us, "max_us",
                          (json_int_t)e->max_us, "vus", (json_int_t)e->active);
    if (o && client)
        json_object_set_new(o, "client", client_second(&e->client, open));
    if (o && e->server.on)
        json_object_set_new(o, "server", server_second(&e->server));
    return o;
}

/* The per-second series: one object per second of the run. */
/* Changes made while the run went (engine/control.h). */
static json_t *controls(const struct sq_result *r)
{
    json_t *a = json_array();
    for (uint32_t i = 0; a && i < r->ncontrols; i++) {
        const struct sq_control_event *e = &r->controls[i];
        json_t *o = json_pack("{s:f, s:s, s:f}", "t_s", e->t_s, "kind",
                              sq_control_kind_name(e->kind), "value", e->value);
        if (o && e->scen >= 0 && (uint32_t)e->scen < r->nscens && r->scens[e->scen].name)
            json_object_set_new(o, "scenario", json_string(r->scens[e->scen].name));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *series(const struct sq_result *r)
{
    json_t *a = json_array();
    for (size_t i = 0; i < r->series.n; i++)
        json_array_append_new(a, sq_report_json_second(&r->series.v[i], r->client.valid, r->open));
    return a;
}

/* The `nats` / `mqtt` block of a bus run. */
/* ---- buses, stamps, the client, the watched server, WebSocket ---- */

/* mqtt.connect: the greetings (CONNECT to CONNACK) and the keep-alive of an MQTT run. */
static json_t *mqtt_connect_block(const struct sq_result *r)
{
    const struct sq_bus_counters *c = &r->c.bus;
    struct sq_latency_figures f = {0};
    if (r->bus_connect) /* none without a CONNACK that accepted */
        sq_report_latency_figures(r->bus_connect, &f);
    static const char *const why[6] = {"other",       "unsupported_version", "client_id_rejected",
                                       "unavailable", "bad_credentials",     "not_authorized"};
    json_t *by = json_object();
    uint64_t refused = 0;
    for (int i = 0; by && i < 6; i++) {
        refused += c->refused[i];
        json_object_set_new(by, why[i], json_integer((json_int_t)c->refused[i]));
    }
    uint64_t pings = c->pings + c->keepalive_pings;
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:o*, s:{s:I, s:I, s:I}}", "connacks",
                     (json_int_t)c->connacks, "p50_us", (json_int_t)f.p50, "p99_us",
                     (json_int_t)f.p99, "max_us", (json_int_t)f.max, "refused", (json_int_t)refused,
                     "refused_by", by, "keepalive", "pings", (json_int_t)c->keepalive_pings,
                     "pingresps", (json_int_t)c->pingresps, "unanswered",
                     (json_int_t)(pings > c->pingresps ? pings - c->pingresps : 0));
}

static json_t *bus_block(const struct sq_report_bus *b, const struct sq_result *r)
{
    const struct sq_bus_counters *c = &r->c.bus;
    json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
                          "mode", b->mode, b->mqtt ? "topic" : "subject", b->subject, "window",
                          (json_int_t)b->window, "latency_means", b->latency_means, "stamped",
                          (json_int_t)c->stamped, "acks", (json_int_t)c->acks, "duplicates",
                          (json_int_t)c->duplicates, "late", (json_int_t)c->late, "pings",
                          (json_int_t)c->pings, "drained", (json_int_t)c->drained, "writes",
                          (json_int_t)c->flushes, "reconnects", (json_int_t)c->reconnects,
                          "server_errors", (json_int_t)r->c.errors[SQ_ERRK_SERVER_ERROR],
                          "first_error", r->bus_error[0] ? json_string(r->bus_error) : json_null());
    if (j && b->mqtt) {
        json_object_set_new(j, "qos", json_integer(b->qos));
        json_object_set_new(j, "version", json_string(b->version));
        json_object_set_new(j, "retain", json_boolean(b->retain));
        json_object_set_new(j, "idle", json_boolean(b->idle));
        json_object_set_new(j, "transport", json_string(b->websocket ? "websocket" : "tcp"));
        if (b->websocket)
            json_object_set_new(j, "websocket_path", json_string(b->websocket));
        json_t *cn = mqtt_connect_block(r);
        if (cn)
            json_object_set_new(j, "connect", cn);
        if (b->round_trip) {
            json_object_set_new(j, "delivered", json_integer((json_int_t)c->delivered));
            /* deliveries of messages this connection did not publish: with -c N each message
             * comes back to every connection, so mostly the other connections' (and any other
             * publisher's). `foreign` is the older name, kept for the documents' readers. */
            json_object_set_new(j, "others_delivered", json_integer((json_int_t)c->foreign));
            json_object_set_new(j, "foreign", json_integer((json_int_t)c->foreign));
        }
    }
    if (j && !b->mqtt && strcmp(b->mode, "request") == 0) /* its `acks` are the replies */
        json_object_set_new(j, "replies", json_integer((json_int_t)c->acks));
    return j;
}

/* The stamps a run made: its run id and how many each worker (stream) stamped. */
static json_t *stamps_block(const struct sq_result *r, const char *run)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < r->nstreams; i++)
        total += r->stamped[i];
    return json_pack("{s:o, s:I, s:I}", "run_id", run ? json_string(run) : json_null(), "streams",
                     (json_int_t)r->nstreams, "stamped", (json_int_t)total);
}

/* squall's own cost over the run, and whether it limited the run (docs/json-schema.md). */
static json_t *client_block(const struct sq_result *r)
{
    const struct sq_client_stats *c = &r->client;
    json_t *ws = json_array();
    int64_t lag = 0, behind = 0;
    for (uint32_t i = 0; i < c->nworkers; i++) {
        const struct sq_worker_stats *w = &c->workers[i];
        json_t *o = json_pack("{s:o, s:o, s:f, s:f, s:I, s:I, s:o}", "cpu_s", ns_s(w->cpu_ns),
                              "wait_s", ns_s(w->wait_ns), "busy", w->busy, "busy_max", w->busy_max,
                              "seconds", (json_int_t)w->seconds, "busy_seconds",
                              (json_int_t)w->busy_seconds, "loop_lag_max_ms", ns_ms(w->lag_max_ns));
        if (o) {
            json_object_set_new(o, "poll_s", ns_s(w->poll_ns));
            json_object_set_new(o, "off_s", ns_s(w->off_ns));
            if (r->open)
                json_object_set_new(o, "behind_max_ms", ns_ms(w->behind_max_ns));
        }
        json_array_append_new(ws, o);
        if (w->lag_max_ns > lag)
            lag = w->lag_max_ns;
        if (w->behind_max_ns > behind)
            behind = w->behind_max_ns;
    }
    int64_t cpu = c->cpu_user_ns + c->cpu_sys_ns;
    json_t *o = json_pack(
        "{s:o, s:o, s:o, s:I, s:o, s:b, s:o, s:o}", "cpu_user_s", ns_s(c->cpu_user_ns), "cpu_sys_s",
        ns_s(c->cpu_sys_ns), "cpu_per_request_us",
        r->c.completed ? json_real((double)cpu / 1e3 / (double)r->c.completed) : json_null(),
        "rss_peak_bytes", (json_int_t)c->rss_peak, "loop_lag_max_ms", ns_ms(lag), "saturated",
        c->saturated, "saturation", c->saturated ? json_string(c->saturation) : json_null(),
        "workers", ws);
    if (o && r->open)
        json_object_set_new(o, "behind_max_ms", ns_ms(behind));
    if (o)
        json_object_set_new(o, "idle_waits",
                            json_pack("{s:I, s:I, s:I}", "polled", (json_int_t)c->idle_polled,
                                      "caught", (json_int_t)c->idle_caught, "slept",
                                      (json_int_t)c->idle_slept));
    return o;
}

static const char *how_name(enum sq_watch_how h)
{
    return h == SQ_WATCH_BY_PID ? "pid" : h == SQ_WATCH_BY_NAME ? "name" : "child";
}

/* The watched processes over the run (docs/json-schema.md). */
static json_t *server_block(const struct sq_result *r)
{
    const struct sq_server_stats *sv = &r->server;
    const struct sq_watch_totals *t = &sv->tot;
    json_t *ps = json_array();
    for (size_t i = 0; i < sv->nprocs; i++) {
        const struct sq_watch_proc *p = &sv->procs[i];
        json_array_append_new(
            ps, json_pack("{s:I, s:s, s:s, s:o, s:o, s:I, s:I, s:I, s:o, s:b, s:o, s:o}", "pid",
                          (json_int_t)p->pid, "name", p->comm, "how", how_name(p->how),
                          "cpu_user_s", ns_s(p->last.cpu_user_ns - p->base.cpu_user_ns),
                          "cpu_sys_s", ns_s(p->last.cpu_sys_ns - p->base.cpu_sys_ns),
                          "rss_peak_bytes", (json_int_t)p->rss_peak, "vm_hwm_bytes",
                          (json_int_t)p->last.hwm_bytes, "threads_max", (json_int_t)p->threads_max,
                          "fds_max", count_or_null(p->fds_max), "exited", p->exited, "exited_at_s",
                          p->exited ? ns_s(p->exited_ns) : json_null(), "last_seen_s",
                          ns_s(p->last_seen_ns)));
    }
    int64_t cpu = t->cpu_user_ns + t->cpu_sys_ns;
    double done = (double)r->c.completed;
    return json_pack(
        "{s:o, s:o, s:o, s:o, s:I, s:I, s:o, s:o, s:o, s:o, s:o}", "cpu_user_s",
        ns_s(t->cpu_user_ns), "cpu_sys_s", ns_s(t->cpu_sys_ns), "cpu_ms_per_1k_requests",
        done > 0 ? json_real((double)cpu / 1e6 / done * 1000) : json_null(), "cpu_us_per_request",
        done > 0 ? json_real((double)cpu / 1e3 / done) : json_null(), "rss_peak_bytes",
        (json_int_t)t->rss_peak, "threads_max", (json_int_t)t->threads_max, "fds_max",
        count_or_null(t->fds_max), "ctxsw_voluntary", count_or_null(t->ctxsw_vol),
        "ctxsw_involuntary", count_or_null(t->ctxsw_invol), "elapsed_s", ns_s(t->elapsed_ns),
        "processes", ps);
}

/* A count by key (close codes, upgrade failures). */
static json_t *ws_tally(const struct sq_ws_tally *t, bool upgrade)
{
    json_t *o = json_object();
    char buf[12];
    for (uint32_t i = 0; i < t->n; i++)
        json_object_set_new(o, sq_ws_key_name(t->row[i].key, upgrade, buf),
                            json_integer((json_int_t)t->row[i].n));
    if (t->other)
        json_object_set_new(o, "other", json_integer((json_int_t)t->other));
    return o;
}

static json_t *ws_figures(const struct sq_hist *h)
{
    struct sq_latency_figures f;
    sq_report_latency_figures(h, &f);
    return json_pack("{s:I, s:I, s:I, s:I}", "count", (json_int_t)f.count, "p50_us",
                     (json_int_t)f.p50, "p99_us", (json_int_t)f.p99, "max_us", (json_int_t)f.max);
}

/* WebSocket runs: upgrades, messages, control frames, close codes (docs/json-schema.md). */
static json_t *ws_block(const struct sq_result *r, double secs)
{
    const struct sq_ws_stats *w = r->ws;
    return json_pack(
        "{s:I, s:o, s:o, s:o, s:{s:I, s:I, s:I, s:f}, s:{s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:I}, "
        "s:o, s:I, s:o}",
        "upgrades", (json_int_t)w->upgrades, "upgrade_failed", ws_tally(&w->upgrade_failed, true),
        "first_upgrade_error", r->upgrade_error[0] ? json_string(r->upgrade_error) : json_null(),
        "upgrade", ws_figures(w->upgrade_us), "messages", "sent", (json_int_t)w->messages_sent,
        "received", (json_int_t)w->messages_received, "unmatched", (json_int_t)w->unmatched,
        "received_per_s", (double)w->messages_received / secs, "payload_bytes", "sent",
        (json_int_t)w->bytes_sent, "received", (json_int_t)w->bytes_received, "pings", "sent",
        (json_int_t)w->pings_sent, "received", (json_int_t)w->pings_received, "pongs", "sent",
        (json_int_t)w->pongs_sent, "received", (json_int_t)w->pongs_received, "ping_rtt",
        ws_figures(w->ping_rtt_us), "closes_sent", (json_int_t)w->closes_sent, "close_codes",
        ws_tally(&w->close_codes, false));
}

/* ---- the result document ---- */

/* The document's "config": what was asked of the run. */
static json_t *config_block(const struct sq_report_info *info, const struct sq_result *r)
{
    const struct sq_exec *ex = info->exec;
    bool timed = ex->kind != SQ_EXEC_SHARED_ITERATIONS && ex->kind != SQ_EXEC_PER_VU_ITERATIONS;
    json_t *config =
        json_pack("{s:s, s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:I, s:o}", "url", info->url,
                  "method", info->method, "address", info->target_addr, "connections",
                  (json_int_t)r->connections, "threads", (json_int_t)info->threads, "duration_s",
                  timed ? jdur_s(sq_exec_length_ns(ex)) : json_null(), "requests",
                  ex->kind == SQ_EXEC_SHARED_ITERATIONS ? json_integer((json_int_t)ex->iterations)
                                                        : json_null(),
                  "timeout_s", jdur_s(info->timeout_ns), "connect_timeout_s",
                  jdur_s(info->connect_timeout_ns), "request_bytes",
                  (json_int_t)info->request_bytes, "executor", executor(ex));
    if (config && info->protocol)
        json_object_set_new(config, "protocol", json_string(info->protocol));
    if (config && info->streams)
        json_object_set_new(config, "streams", json_integer((json_int_t)info->streams));
    if (config && info->nsource_addrs) {
        json_t *a = json_array();
        for (size_t i = 0; i < info->nsource_addrs; i++)
            json_array_append_new(a, json_string(info->source_addrs[i]));
        json_object_set_new(config, "source_addrs", a);
        json_object_set_new(config, "source_addrs_auto", json_boolean(info->source_auto));
    }
    if (config && info->connect_rate > 0)
        json_object_set_new(config, "connect_rate_per_s", json_real(info->connect_rate));
    if (config && info->proxy_url && info->proxy_url[0])
        json_object_set_new(config, "proxy",
                            json_pack("{s:s, s:s, s:s, s:b}", "url", info->proxy_url, "from",
                                      info->proxy_from, "mode", info->proxy_mode, "auth",
                                      info->proxy_auth));
    return config;
}

/* The open loop's own blocks: the latency from the actual send, the spin tail, pacing and the
 * VU pool. */
static void open_loop_blocks(json_t *root, const struct sq_result *r, const double *pcts,
                             size_t npcts)
{
    json_object_set_new(root, "latency_uncorrected",
                        latency_block(r->latency_uncorrected, "actual_send"));
    json_object_set_new(json_object_get(root, "latency_uncorrected"), "percentiles",
                        percentiles(r->latency_uncorrected, pcts, npcts));
    json_object_set_new(root, "spin_us", json_real((double)r->spin_ns / 1e3));
    json_object_set_new(root, "pacing",
                        json_pack("{s:s, s:f, s:I, s:I}", "precision",
                                  sq_pacing_name(r->precision < 0 ? 0 : r->precision), "tail_us",
                                  (double)r->pace_tail_ns / 1e3, "timed_wakes",
                                  (json_int_t)r->pace_wakes, "deaf_sleeps",
                                  (json_int_t)r->pace_deaf));
    if (r->precision == SQ_PACING_COARSE)
        json_object_set_new(json_object_get(root, "pacing"), "window_ms",
                            json_real((double)r->pace_window_ns / 1e6));
    json_t *pool = json_pack("{s:I, s:I, s:I, s:I}", "preallocated", (json_int_t)r->pool.pre, "max",
                             (json_int_t)r->pool.cap, "peak", (json_int_t)r->pool.peak, "grown",
                             (json_int_t)r->pool.grown);
    json_object_set_new(pool, "first_growth_s",
                        r->pool.grown ? json_real((double)r->pool.first_ns / 1e9) : json_null());
    json_object_set_new(pool, "last_growth_s",
                        r->pool.grown ? json_real((double)r->pool.last_ns / 1e9) : json_null());
    json_object_set_new(root, "pool", pool);
}

/* Per-phase timings (k6's metric names beside ours), summary figures only: the phases'
 * histograms stay in memory. */
static json_t *phases_block(const struct sq_result *r)
{
    json_t *ph = json_object();
    for (int k = 0; k < SQ_PHASE_COUNT; k++) {
        struct sq_latency_figures lf;
        sq_report_latency_figures(r->phase[k], &lf);
        json_object_set_new(ph, sq_phase_name((enum sq_phase)k),
                            json_pack("{s:s, s:I, s:f, s:I, s:I, s:I, s:I, s:I}", "metric",
                                      sq_phase_metric((enum sq_phase)k), "count",
                                      (json_int_t)lf.count, "mean_us", lf.mean, "p50_us",
                                      (json_int_t)lf.p50, "p90_us", (json_int_t)lf.p90, "p95_us",
                                      (json_int_t)lf.p95, "p99_us", (json_int_t)lf.p99, "max_us",
                                      (json_int_t)lf.max));
    }
    return ph;
}

/* Server-sent events: streams, events, the first event's wait and a stream's length. */
static json_t *sse_block(const struct sq_result *r, double secs)
{
    struct sq_latency_figures fe, du;
    sq_report_latency_figures(r->sse_first_event, &fe);
    sq_report_latency_figures(r->sse_duration, &du);
    return json_pack("{s:I, s:I, s:f, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I}}", "streams",
                     (json_int_t)r->c.sse_streams, "events", (json_int_t)r->c.sse_events,
                     "events_per_s", (double)r->c.sse_events / secs, "first_event", "count",
                     (json_int_t)fe.count, "p50_us", (json_int_t)fe.p50, "p99_us",
                     (json_int_t)fe.p99, "max_us", (json_int_t)fe.max, "stream_duration", "p50_us",
                     (json_int_t)du.p50, "p99_us", (json_int_t)du.p99, "max_us",
                     (json_int_t)du.max);
}

/* The document's head: schema, mode, config, the counts, rates, statuses, errors, bytes,
 * connections and the latency (with its percentiles). NULL when out of memory. */
static json_t *doc_head(const struct sq_report_info *info, const struct sq_result *r, double secs,
                        const double *pcts, size_t npcts)
{
    json_t *requests =
        json_pack("{s:I, s:I, s:I, s:I, s:I}", "sent", (json_int_t)r->c.sent, "completed",
                  (json_int_t)r->c.completed, "failed", (json_int_t)r->c.failed, "in_flight",
                  (json_int_t)r->in_flight, "dropped", (json_int_t)r->c.dropped);
    if (r->open)
        json_object_set_new(requests, "arrivals", json_integer((json_int_t)r->arrivals));
    json_t *status = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "1xx", (json_int_t)r->c.status[1],
                               "2xx", (json_int_t)r->c.status[2], "3xx", (json_int_t)r->c.status[3],
                               "4xx", (json_int_t)r->c.status[4], "5xx", (json_int_t)r->c.status[5],
                               "other", (json_int_t)r->c.status[0]);
    json_t *errors = json_object();
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        json_object_set_new(errors, sq_errk_name((enum sq_errk)k),
                            json_integer((json_int_t)r->c.errors[k]));
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:o, s:f, s:f, s:b, s:o, s:o, s:{s:f, s:f, s:f}, s:o, s:o, "
        "s:{s:I, s:I}, s:{s:I, s:I}, s:o}",
        "schema", SQ_RESULT_SCHEMA, "squall_version", SQ_VERSION, "mode",
        r->open ? "open-loop" : "closed-loop", "config", config_block(info, r), "duration_s", secs,
        "setup_s", (double)r->setup_ns / 1e9, "aborted", r->aborted, "abort_reason",
        r->aborted ? json_string(r->abort_reason) : json_null(), "requests", requests, "rate",
        "requests_per_s", (double)r->c.completed / secs, "bytes_received_per_s",
        (double)r->c.bytes_received / secs, "bytes_sent_per_s", (double)r->c.bytes_sent / secs,
        "status", status, "errors", errors, "bytes", "sent", (json_int_t)r->c.bytes_sent,
        "received", (json_int_t)r->c.bytes_received, "connections", "opened",
        (json_int_t)r->c.conns_opened, "closed_by_server", (json_int_t)r->c.conns_closed_by_server,
        "latency", latency_block(r->latency, r->open ? "intended_send" : "actual_send"));
    if (root)
        json_object_set_new(json_object_get(root, "latency"), "percentiles",
                            percentiles(r->latency, pcts, npcts));
    return root;
}

json_t *sq_report_json_doc(const struct sq_report_info *info, const struct sq_result *r)
{
    double secs = r->duration_ns > 0 ? (double)r->duration_ns / 1e9 : 1e-9;
    const double *pcts = info->percentiles ? info->percentiles : default_pcts;
    size_t npcts = info->percentiles ? info->npercentiles : SQ_ARRAY_LEN(default_pcts);
    json_t *root = doc_head(info, r, secs, pcts, npcts);
    if (!root)
        return NULL;
    json_object_set_new(root, "run", run_block(info, r));
    /* a bus run's messages have no HTTP status: none listed */
    json_object_set_new(root, "status_codes", info->bus ? json_object() : status_codes(r));
    json_object_set_new(root, "failures", failures(r));
    json_object_set_new(root, "error_messages", error_messages(r, info->timeout_ns));
    if (r->open)
        open_loop_blocks(root, r, pcts, npcts);
    if (r->tls)
        json_object_set_new(root, "tls", tls_block(r));
    json_object_set_new(root, "threads", json_integer(r->threads));
    if (r->npinned) { /* --cpus: each worker's CPU, -1 where the kernel refused */
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < r->npinned; i++)
            json_array_append_new(a, json_integer(r->worker_cpu[i]));
        json_object_set_new(root, "worker_cpus", a);
    }
    json_object_set_new(root, "environment", environment());
    if (r->samples_written || r->samples_lost)
        json_object_set_new(root, "samples",
                            json_pack("{s:I, s:I}", "written", (json_int_t)r->samples_written,
                                      "lost", (json_int_t)r->samples_lost));
    if (r->phase[0])
        json_object_set_new(root, "phases", phases_block(r));
    json_object_set_new(
        root, "bodies",
        json_pack("{s:b, s:s?, s:I, s:I, s:I, s:I}", "compression", info->accept_encoding != NULL,
                  "accept_encoding", info->accept_encoding, "wire_bytes",
                  (json_int_t)r->c.bytes_received, "decoded_bytes", (json_int_t)r->c.body_bytes,
                  "compressed_responses", (json_int_t)r->c.compressed, "undecodable_responses",
                  (json_int_t)r->c.undecodable));
    if (r->c.sse_streams)
        json_object_set_new(root, "sse", sse_block(r, secs));
    if (r->ws)
        json_object_set_new(root, "ws", ws_block(r, secs));
    if (r->quic.connections) {
        const struct sq_quic_stats *q = &r->quic;
        static const char *const batch[] = {"on", "nogso", "off"};
        json_object_set_new(
            root, "quic",
            json_pack("{s:I, s:I, s:I, s:{s:f, s:I}, s:f, s:I, s:I, s:I, s:I, s:I, s:{s:s, s:b, "
                      "s:I, s:I, s:I, s:I, s:I, s:I}}",
                      "connections", (json_int_t)q->connections, "datagrams_sent",
                      (json_int_t)q->datagrams_sent, "datagrams_received",
                      (json_int_t)q->datagrams_received, "cwnd_bytes", "mean",
                      (double)q->cwnd_sum / (double)q->connections, "max", (json_int_t)q->cwnd_max,
                      "smoothed_rtt_ms_max", (double)q->srtt_max_ns / 1e6, "resumed",
                      (json_int_t)q->resumed, "early_data_accepted", (json_int_t)q->early_accepted,
                      "early_data_rejected", (json_int_t)q->early_rejected, "packets_lost",
                      (json_int_t)q->packets_lost, "pto_count", (json_int_t)q->pto_count, "udp",
                      "batching", batch[q->batch < 3 ? q->batch : 0], "gso", (int)q->gso,
                      "send_calls", (json_int_t)q->send_calls, "recv_calls",
                      (json_int_t)q->recv_calls, "gso_sends", (json_int_t)q->gso_sends,
                      "buffer_requested_bytes", (json_int_t)q->buf_asked, "rcvbuf_bytes",
                      (json_int_t)q->rcvbuf_min, "sndbuf_bytes", (json_int_t)q->sndbuf_min));
    }
    json_object_set_new(root, "dns",
                        json_pack("{s:f, s:I}", "first_lookup_us", (double)r->dns_ns / 1e3,
                                  "lookups_during_run", (json_int_t)r->dns_lookups));
    if (info->bus)
        json_object_set_new(root, info->bus->mqtt ? "mqtt" : "nats", bus_block(info->bus, r));
    for (uint32_t i = 0; i < r->nstreams; i++)
        if (r->stamped[i]) { /* any stream stamped: the run's stamps are listed */
            json_object_set_new(root, "stamps", stamps_block(r, info->stamp_run));
            break;
        }
    if (r->client.valid)
        json_object_set_new(root, "client", client_block(r));
    if (r->server.on)
        json_object_set_new(root, "server", server_block(r));
    json_object_set_new(root, "series", series(r));
    if (r->ncontrols)
        json_object_set_new(root, "controls", controls(r));
    json_object_set_new(root, "series_100ms", fine_series(r));
    if (r->xsamples.per_class)
        json_object_set_new(root, "sampled_exchanges", samples_block(r));
    return root;
}

/* ---- the sink's document, writing, redaction ---- */

json_t *sq_report_sink_doc(json_t *sink, double duration_s)
{
    return json_pack("{s:s, s:s, s:s, s:f, s:o, s:o}", "schema", SQ_RESULT_SCHEMA, "squall_version",
                     SQ_VERSION, "mode", "sink", "duration_s", duration_s, "environment",
                     environment(), "sink", sink);
}

int sq_report_json_write(FILE *f, const json_t *doc)
{
    int rc = json_dumpf(doc, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', f);
    if (rc < 0 || fflush(f) != 0)
        return -EIO;
    return 0;
}

void sq_report_redact_url(json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    size_t at, n;
    if (!json_is_string(v) ||
        !sq_redact_url_secret(json_string_value(v), json_string_length(v), &at, &n) || !n)
        return;
    struct sq_buf b = {0};
    if (sq_redact_url(json_string_value(v), json_string_length(v), &b) == 0)
        json_object_set_new(obj, key, json_stringn(b.p, b.len));
    sq_buf_dispose(&b);
}
