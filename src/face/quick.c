/* face/quick.c - see quick.h. The flags are checked where they are parsed when they can be (a
 * method is given to the request serialiser itself, so the check and the request cannot
 * disagree), combinations after every flag is read, files (-b @FILE, --cacert) when they are
 * opened in sq_quick_prepare, still before anything is sent. The JSON form builds arguments and
 * goes through the same parser, so there is one set of checks and one set of messages. */
#include "face/quick.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/redact.h"
#include "base/text.h"
#include "face/flags.h"
#include "http/decode.h"
#include "net/quic.h"
#include "plan/exec.h"
#include "plan/tmpl.h"

enum {
    OPT_TIMEOUT = 256,
    OPT_CONNECT_TIMEOUT,
    OPT_JSON,
    OPT_MAX_IN_FLIGHT,
    OPT_MAX_VUS,
    OPT_PACING_PRECISION,
    OPT_STAGES,
    OPT_PACING,
    OPT_GRACEFUL,
    OPT_OUT,
    OPT_SAMPLE,
    OPT_HTML,
    OPT_NO_PHASES,
    OPT_NO_COMPRESSION,
    OPT_HTTP2,
    OPT_HTTP3,
    OPT_H3_0RTT,
    OPT_STREAMS,
    /* event buses */
    OPT_PAYLOAD,
    OPT_WINDOW,
    OPT_QOS,
    OPT_MQTT_VERSION,
    OPT_JETSTREAM,
    OPT_REQUEST,
    OPT_ROUND_TRIP,
    OPT_IDLE,
    OPT_RETAIN,
    OPT_KEEPALIVE,
    OPT_CLIENT_ID,
    OPT_TLS_FIRST,
    OPT_SINK,
    OPT_SINK_STAMP,
    OPT_SINK_SETTLE,
    OPT_SUBSCRIBERS,
    OPT_QUEUE,
    OPT_SUBSCRIBE_ONLY,
    OPT_STREAM,
    OPT_BATCH,
    OPT_PUSH,
    OPT_URLS,
    OPT_CPUS,
    OPT_HTTP_DEBUG,
    OPT_SAMPLE_RESPONSES,
    OPT_NO_REDACT,
    OPT_NAME,
    OPT_PERCENTILES,
    OPT_WATCH,
    OPT_WATCH_NAME,
    OPT_MESSAGE,
    OPT_BINARY,
    OPT_WS_PING,
    OPT_WS_SUBPROTOCOL,
    OPT_SEED,
};

static const struct option longs[] = {
    {"connections", required_argument, NULL, 'c'},
    {"duration", required_argument, NULL, 'd'},
    {"requests", required_argument, NULL, 'n'},
    {"rate", required_argument, NULL, 'r'},
    {"max-in-flight", required_argument, NULL, OPT_MAX_IN_FLIGHT},
    {"max-vus", required_argument, NULL, OPT_MAX_VUS},
    {"pacing-precision", required_argument, NULL, OPT_PACING_PRECISION},
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
    SQ_NETOPTS_LONG_OPTIONS,
    {"quiet", no_argument, NULL, 'q'},
    {"no-phases", no_argument, NULL, OPT_NO_PHASES},
    {"no-compression", no_argument, NULL, OPT_NO_COMPRESSION},
    {"http2", no_argument, NULL, OPT_HTTP2},
    {"http3", no_argument, NULL, OPT_HTTP3},
    {"h3-0rtt", no_argument, NULL, OPT_H3_0RTT},
    {"streams", required_argument, NULL, OPT_STREAMS},
    {"payload", required_argument, NULL, OPT_PAYLOAD},
    {"window", required_argument, NULL, OPT_WINDOW},
    {"qos", required_argument, NULL, OPT_QOS},
    {"mqtt-version", required_argument, NULL, OPT_MQTT_VERSION},
    {"jetstream", no_argument, NULL, OPT_JETSTREAM},
    {"request", no_argument, NULL, OPT_REQUEST},
    {"round-trip", no_argument, NULL, OPT_ROUND_TRIP},
    {"idle", no_argument, NULL, OPT_IDLE},
    {"retain", no_argument, NULL, OPT_RETAIN},
    {"keepalive", required_argument, NULL, OPT_KEEPALIVE},
    {"client-id", required_argument, NULL, OPT_CLIENT_ID},
    {"tls-first", no_argument, NULL, OPT_TLS_FIRST},
    {"sink", required_argument, NULL, OPT_SINK},
    {"sink-stamp", required_argument, NULL, OPT_SINK_STAMP},
    {"sink-settle", required_argument, NULL, OPT_SINK_SETTLE},
    {"subscribers", required_argument, NULL, OPT_SUBSCRIBERS},
    {"queue", required_argument, NULL, OPT_QUEUE},
    {"subscribe-only", no_argument, NULL, OPT_SUBSCRIBE_ONLY},
    {"stream", required_argument, NULL, OPT_STREAM},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"push", no_argument, NULL, OPT_PUSH},
    {"urls", required_argument, NULL, OPT_URLS},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"verbose", no_argument, NULL, 'v'},
    {"http-debug", optional_argument, NULL, OPT_HTTP_DEBUG},
    {"sample-responses", required_argument, NULL, OPT_SAMPLE_RESPONSES},
    {"no-redact", no_argument, NULL, OPT_NO_REDACT},
    {"name", required_argument, NULL, OPT_NAME},
    {"seed", required_argument, NULL, OPT_SEED},
    {"percentiles", required_argument, NULL, OPT_PERCENTILES},
    {"watch", required_argument, NULL, OPT_WATCH},
    {"watch-name", required_argument, NULL, OPT_WATCH_NAME},
    {"script", required_argument, NULL, 's'},
    {"message", required_argument, NULL, OPT_MESSAGE},
    {"binary", no_argument, NULL, OPT_BINARY},
    {"ws-ping", required_argument, NULL, OPT_WS_PING},
    {"ws-subprotocol", required_argument, NULL, OPT_WS_SUBPROTOCOL},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    SQ_DISTOPTS_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

void sq_quick_opts_init(struct sq_quick_opts *o)
{
    *o = (struct sq_quick_opts){
        .method = "GET",
        .connections = 64,
        .duration_ns = 10 * SQ_NS_PER_S,
        .timeout_ns = 10 * SQ_NS_PER_S,
        .connect_timeout_ns = 5 * SQ_NS_PER_S,
        .qos = -1,
        .precision = -1,
        .sample_responses = SQ_SAMPLE_RESPONSES_DEFAULT,
    };
}

void sq_quick_opts_dispose(struct sq_quick_opts *o)
{
    for (size_t i = 0; i < o->nheaders; i++)
        sq_header_arg_dispose(&o->headers[i]);
    o->nheaders = 0;
    for (size_t i = 0; i < o->_argc; i++)
        free(o->_argv[i]);
    free(o->_argv);
    free(o->_body);
    free(o->_message);
    o->_argv = NULL;
    o->_argc = 0;
    o->_body = NULL;
    o->_message = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Arguments                                                                                  */

/* The standard methods (RFC 9110 9, RFC 5789): one written in another case is taken as meant in
 * capitals (-m post sends POST). Methods are case-sensitive, so any other token is sent as it
 * was written. */
static const char *const standard_methods[] = {"GET",     "HEAD",    "POST",  "PUT",  "DELETE",
                                               "CONNECT", "OPTIONS", "TRACE", "PATCH"};

static const char *method_canonical(const char *m)
{
    for (size_t i = 0; i < SQ_ARRAY_LEN(standard_methods); i++)
        if (strcasecmp(m, standard_methods[i]) == 0)
            return standard_methods[i];
    return m;
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

/* Parses a duration flag's value (a bare number is seconds); positive refuses zero. */
static int duration_flag(const char *flag, const char *arg, bool positive, int64_t *out, char *err,
                         size_t len)
{
    if (sq_parse_duration(arg, SQ_NS_PER_S, out) < 0 || (positive && *out <= 0))
        return sq_flag_fail(err, len, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)", flag,
                            arg);
    return 0;
}

/* The event-bus flags (face/busopts.h). Returns 0 or a negative code with err filled. */
static int take_bus(struct sq_quick_opts *o, int opt, const char *flag, char *arg, char *err,
                    size_t len)
{
    uint64_t u;
    switch (opt) {
    case OPT_PAYLOAD:
        if (arg[0] == '@' && arg[1] == '\0')
            return sq_flag_fail(err, len, "%s: '@' names no file (--payload @FILE)", flag);
        o->payload_arg = arg;
        return 0;
    case OPT_WINDOW:
        if (sq_parse_u64(arg, 1, SQ_BUS_MAX_WINDOW, 1, &o->window) < 0)
            return sq_flag_fail(err, len,
                                "%s: '%s' is not a window (1..%d messages out per "
                                "connection)",
                                flag, arg, SQ_BUS_MAX_WINDOW);
        return 0;
    case OPT_QOS:
        if (sq_parse_u64(arg, 0, 2, 1, &u) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a QoS (0, 1 or 2)", flag, arg);
        o->qos = (int)u;
        return 0;
    case OPT_MQTT_VERSION:
        if (strcmp(arg, "3") && strcmp(arg, "3.1.1") && strcmp(arg, "5") && strcmp(arg, "5.0"))
            return sq_flag_fail(err, len, "%s: '%s' is not an MQTT version (3 for 3.1.1, or 5)",
                                flag, arg);
        o->mqtt_version = arg[0] == '5' ? 5 : 3;
        return 0;
    case OPT_JETSTREAM:
        o->jetstream = true;
        return 0;
    case OPT_REQUEST:
        o->request_reply = true;
        return 0;
    case OPT_ROUND_TRIP:
        o->round_trip = true;
        return 0;
    case OPT_IDLE:
        o->idle = true;
        return 0;
    case OPT_RETAIN:
        o->retain = true;
        return 0;
    case OPT_KEEPALIVE:
        return duration_flag(flag, arg, false, &o->keepalive_ns, err, len);
    case OPT_CLIENT_ID:
        if (!arg[0] || strlen(arg) > 64)
            return sq_flag_fail(err, len, "%s: '%s' is not a client id prefix (1 to 64 bytes)",
                                flag, arg);
        o->client_id = arg;
        return 0;
    case OPT_TLS_FIRST:
        o->tls_first = true;
        return 0;
    case OPT_SINK:
        if (o->nsinks == SQ_ARRAY_LEN(o->sinks))
            return sq_flag_fail(err, len, "%s: at most %zu sinks (one http, one nats, one mqtt)",
                                flag, SQ_ARRAY_LEN(o->sinks));
        if (strncmp(arg, "http://", 7) && !sq_bus_url_is_bus(arg))
            return sq_flag_fail(err, len,
                                "%s: '%s' is not a sink (http://HOST:PORT to listen on, "
                                "nats://HOST[:PORT]/SUBJECT or mqtt://HOST[:PORT]/TOPIC)",
                                flag, arg);
        o->sinks[o->nsinks++] = arg;
        return 0;
    case OPT_SINK_STAMP:
        o->sink_stamp = arg;
        return 0;
    case OPT_SINK_SETTLE:
        return duration_flag(flag, arg, false, &o->sink_settle_ns, err, len);
    case OPT_SUBSCRIBERS: {
        uint64_t n;
        if (sq_parse_u64(arg, 1, 100000, 1, &n) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a subscriber count (1..100000)", flag,
                                arg);
        o->subscribers = (uint32_t)n;
        return 0;
    }
    case OPT_QUEUE:
        if (!arg[0] || strlen(arg) > 128 || strpbrk(arg, " \t/+#*>"))
            return sq_flag_fail(err, len,
                                "%s: '%s' is not a group name (1 to 128 bytes, no blank, '/', "
                                "'+', '#', '*' or '>')",
                                flag, arg);
        o->sub_group = arg;
        return 0;
    case OPT_SUBSCRIBE_ONLY:
        o->subscribe_only = true;
        return 0;
    case OPT_STREAM:
        if (!arg[0] || strlen(arg) > 128 || strpbrk(arg, " \t./*>"))
            return sq_flag_fail(err, len,
                                "%s: '%s' is not a stream name (1 to 128 bytes, no blank, '.', "
                                "'/', '*' or '>')",
                                flag, arg);
        o->sub_stream = arg;
        return 0;
    case OPT_BATCH:
        if (sq_parse_u64(arg, 1, 10000, 1, &o->sub_batch) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a fetch size (1..10000)", flag, arg);
        return 0;
    case OPT_PUSH:
        o->sub_push = true;
        return 0;
    default:
        return sq_flag_refused(longs, opt, flag, err, len);
    }
}

#define NOT_MINE 3 /* not this group's flag: the next group's take_* */

/* The load's shape: VUs, length, rate, pacing, threads. Returns 0, NOT_MINE or a negative
 * code with err filled. */
static int take_shape(struct sq_quick_opts *o, int opt, const char *flag, char *arg, char *err,
                      size_t len)
{
    int rc;
    switch (opt) {
    case 'c':
        if (sq_parse_u64(arg, 1, 1000000, 1, &o->connections) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a connection count (1..1000000)", flag,
                                arg);
        o->connections_set = true;
        return 0;
    case 'd':
        if ((rc = duration_flag(flag, arg, true, &o->duration_ns, err, len)) != 0)
            return rc;
        o->duration_set = true;
        return 0;
    case 'n':
        if (sq_parse_u64(arg, 1, UINT64_MAX / 2, 1, &o->requests) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a request count (1 or more)", flag, arg);
        return 0;
    case 'r': {
        char *end;
        o->rate = strtod(arg, &end);
        if (*end || !(o->rate >= 0 && o->rate <= 1e8) || arg[0] == '\0')
            return sq_flag_fail(
                err, len, "%s: '%s' is not a rate (requests per second, 0..100000000)", flag, arg);
        o->rate_set = true;
        o->rate_arg = arg;
        return 0;
    }
    case OPT_MAX_IN_FLIGHT:
        if (sq_parse_u64(arg, 1, 100000000, 1, &o->max_in_flight) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a count (1..100000000)", flag, arg);
        return 0;
    case OPT_MAX_VUS:
        if (sq_parse_u64(arg, 1, 1000000, 1, &o->max_vus) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a count (1..1000000)", flag, arg);
        return 0;
    case OPT_PACING_PRECISION:
        o->precision = sq_pacing_parse(arg, &o->window_ns);
        if (o->precision == -2)
            return sq_flag_fail(
                err, len, "%s: '%s': the window of coarse:D is a duration, 1ms..100ms", flag, arg);
        if (o->precision < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not one of high, normal, off, coarse", flag,
                                arg);
        return 0;
    case OPT_STAGES:
        o->stages = arg;
        return 0;
    case OPT_PACING:
        return duration_flag(flag, arg, false, &o->pacing_ns, err, len);
    case OPT_GRACEFUL:
        return duration_flag(flag, arg, false, &o->graceful_ns, err, len);
    case 't':
        if (sq_parse_u64(arg, 1, 1024, 0, &o->threads) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a thread count (1..1024)", flag, arg);
        return 0;
    case OPT_CPUS:
        o->cpus_arg = arg;
        return sq_flag_cpus(flag, arg, o->cpus, SQ_FLAG_MAX_CPU, &o->ncpus, err, len);
    default:
        return NOT_MINE;
    }
}

/* What is sent and how: method, headers, body, timeouts, HTTP/2, --urls, a script, WebSocket
 * messages. Returns 0, NOT_MINE or a negative code with err filled. */
static int take_request(struct sq_quick_opts *o, int opt, const char *flag, char *arg, char *err,
                        size_t len)
{
    int rc;
    switch (opt) {
    case 'm':
        if (!sq_flag_method_ok(arg))
            return sq_flag_fail(err, len,
                                "%s: '%s' is not a method (a token like GET or POST: letters, "
                                "digits and !#$%%&'*+-.^_`|~)",
                                flag, arg);
        o->method = method_canonical(arg);
        return 0;
    case 'H':
        if (o->nheaders == SQ_QUICK_MAX_HEADERS)
            return sq_flag_fail(err, len, "%s: '%s': at most %d headers", flag, arg,
                                SQ_QUICK_MAX_HEADERS);
        if ((rc = sq_header_parse_arg(arg, &o->headers[o->nheaders])) < 0) {
            if (rc == -ENOMEM) {
                snprintf(err, len, "out of memory");
                return rc;
            }
            return sq_flag_fail(err, len, "%s: '%s' is not a header: %s", flag, arg,
                                header_problem(arg));
        }
        o->nheaders++;
        return 0;
    case 'b':
        if (arg[0] == '@' && arg[1] == '\0')
            return sq_flag_fail(err, len, "%s: '@' names no file (-b @FILE)", flag);
        o->body_flag = flag[1] == '-' ? "--body" : "-b";
        o->body_arg = arg;
        return 0;
    case OPT_TIMEOUT:
        return duration_flag(flag, arg, true, &o->timeout_ns, err, len);
    case OPT_CONNECT_TIMEOUT:
        return duration_flag(flag, arg, true, &o->connect_timeout_ns, err, len);
    case OPT_NO_COMPRESSION:
        o->no_compression = true;
        return 0;
    case OPT_HTTP2:
        o->http2 = true;
        return 0;
    case OPT_HTTP3:
#ifdef SQ_HAVE_H3
        o->http3 = o->http2 = true; /* HTTP/3 sends the HTTP/2 request (engine/h3drv.c) */
        return 0;
#else
        return sq_flag_fail(err, len,
                            "--http3: this build of squall has no HTTP/3 (it was built without "
                            "ngtcp2, nghttp3 and GnuTLS; scripts/deps.sh installs them)");
#endif
    case OPT_H3_0RTT:
        o->h3_0rtt = true;
        return 0;
    case OPT_STREAMS:
        if (sq_parse_u64(arg, 1, 1000, 1, &o->streams) < 0)
            return sq_flag_fail(err, len, "%s: '%s' is not a stream count (1..1000)", flag, arg);
        return 0;
    case OPT_URLS:
        o->urls_path = arg;
        return 0;
    case 's':
        o->script = arg;
        return 0;
    case OPT_MESSAGE:
        if (arg[0] == '@' && arg[1] == '\0')
            return sq_flag_fail(err, len, "%s: '@' names no file (--message @FILE)", flag);
        o->message_arg = arg;
        return 0;
    case OPT_BINARY:
        o->binary = true;
        return 0;
    case OPT_WS_PING:
        if ((rc = duration_flag(flag, arg, true, &o->ws_ping_ns, err, len)) != 0)
            return rc;
        if (o->ws_ping_ns < 100 * SQ_NS_PER_MS)
            return sq_flag_fail(err, len,
                                "%s: '%s': at least 100ms (pings go out ten times a "
                                "second at most)",
                                flag, arg);
        return 0;
    case OPT_WS_SUBPROTOCOL:
        if (!arg[0] || strpbrk(arg, "\r\n"))
            return sq_flag_fail(err, len, "%s: '%s' is not a subprotocol list (a, b)", flag, arg);
        o->ws_subprotocol = arg;
        return 0;
    default:
        return NOT_MINE;
    }
}

/* What is kept and written: the outputs, the samples, the seed, names, watched processes,
 * --help and --version. Returns 0, SQ_QUICK_HELP, SQ_QUICK_VERSION, NOT_MINE or a negative code
 * with err filled. */
static int take_output(struct sq_quick_opts *o, int opt, const char *flag, char *arg, char *err,
                       size_t len)
{
    int rc;
    switch (opt) {
    case OPT_JSON:
        o->json_path = arg;
        return 0;
    case OPT_OUT:
        return sq_flag_out(flag, arg, &o->csv_path, &o->hdr_path, &o->ndjson_path, &o->prom_rw_url,
                           &o->influx_url, err, len);
    case OPT_HTML:
        o->html_path = arg;
        return 0;
    case OPT_SAMPLE:
        return sq_flag_sample(flag, arg, &o->sample, err, len);
    case 'q':
        o->quiet = true;
        return 0;
    case OPT_NO_PHASES:
        o->no_phases = true;
        return 0;
    case 'v':
        o->verbose = true;
        return 0;
    case OPT_HTTP_DEBUG:
        if (arg && strcmp(arg, "force") != 0)
            return sq_flag_fail(err, len,
                                "%s: '%s' is not a value it takes (--http-debug, or "
                                "--http-debug=force for more than %d requests)",
                                flag, arg, SQ_QUICK_HTTP_DEBUG_MAX);
        o->http_debug = true;
        o->http_debug_force = arg != NULL;
        return 0;
    case OPT_SAMPLE_RESPONSES:
        return sq_flag_sample_responses(flag, arg, &o->sample_responses, err, len);
    case OPT_SEED:
        if ((rc = sq_flag_seed(flag, arg, &o->seed, err, len)) < 0)
            return rc;
        o->seed_set = true;
        return 0;
    case OPT_NO_REDACT:
        o->no_redact = true;
        return 0;
    case OPT_NAME:
        return sq_flag_run_name(flag, arg, &o->name, err, len);
    case OPT_PERCENTILES:
        return sq_flag_percentiles(flag, arg, o->percentiles, SQ_ARRAY_LEN(o->percentiles),
                                   &o->npercentiles, err, len);
    case OPT_WATCH:
    case OPT_WATCH_NAME:
        return sq_watch_opts_add(&o->watch, opt == OPT_WATCH_NAME, flag, arg, err, len);
    case 'h':
        return SQ_QUICK_HELP;
    case 'V':
        return SQ_QUICK_VERSION;
    default:
        return NOT_MINE;
    }
}

/* One flag getopt_long returned, asked of each group in turn (DNS/TLS, distribution, the
 * load's shape, the request, the outputs, the event bus; the last one refuses what nobody took).
 * Returns 0, SQ_QUICK_HELP, SQ_QUICK_VERSION or a negative code with err filled. */
static int take(struct sq_quick_opts *o, int opt, const char *flag, char *arg, char *err,
                size_t len)
{
    int rc = sq_netopts_flag(&o->net, opt, flag, arg, err, len);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    if ((rc = sq_distopts_flag(&o->dist, opt, flag, arg, err, len)) != 0)
        return rc == 1 ? 0 : rc;
    if ((rc = take_shape(o, opt, flag, arg, err, len)) != NOT_MINE)
        return rc;
    if ((rc = take_request(o, opt, flag, arg, err, len)) != NOT_MINE)
        return rc;
    if ((rc = take_output(o, opt, flag, arg, err, len)) != NOT_MINE)
        return rc;
    return take_bus(o, opt, flag, arg, err, len);
}

static bool tls_url(const char *u)
{
    return strncasecmp(u, "tls://", 6) == 0 || strncasecmp(u, "mqtts://", 8) == 0 ||
           strncasecmp(u, "mqtt+wss://", 11) == 0;
}

/* The flag that asked for the HTTP/2 request path: --http3 rides on it. */
static const char *h2flag(const struct sq_quick_opts *o)
{
    return o->http3 ? "--http3" : "--http2";
}

/* A bus URL's flags, and an http(s) URL's lack of them. */
static int check_bus(struct sq_quick_opts *o, char *err, size_t len)
{
    bool bus = o->url && sq_bus_url_is_bus(o->url);
    if (!bus) {
        const char *f = o->payload_arg     ? "--payload"
                        : o->window        ? "--window"
                        : o->qos >= 0      ? "--qos"
                        : o->mqtt_version  ? "--mqtt-version"
                        : o->jetstream     ? "--jetstream"
                        : o->request_reply ? "--request"
                        : o->round_trip    ? "--round-trip"
                        : o->idle          ? "--idle"
                        : o->retain        ? "--retain"
                        : o->keepalive_ns  ? "--keepalive"
                        : o->client_id     ? "--client-id"
                        : o->tls_first     ? "--tls-first"
                        : o->subscribers   ? "--subscribers"
                                           : NULL;
        if (f)
            return sq_flag_fail(err, len, "%s is for nats:// and mqtt:// URLs%s", f,
                                strcmp(f, "--payload") == 0 ? " (HTTP has -b)" : "");
    } else {
        const char *f = o->body_arg                ? "-b"
                        : o->script                ? "-s"
                        : strcmp(o->method, "GET") ? "-m"
                        : o->http2                 ? h2flag(o)
                        : o->streams > 1           ? "--streams"
                        : o->no_compression        ? "--no-compression"
                                                   : NULL;
        if (f)
            return sq_flag_fail(err, len, "%s is for http:// and https:// URLs%s", f,
                                strcmp(f, "-b") == 0   ? " (a bus message is --payload)"
                                : strcmp(f, "-s") == 0 ? " (wrk scripts write HTTP requests)"
                                                       : "");
        /* the TLS flags: a broker over TLS takes them as https does */
        bool tls = tls_url(o->url);
        for (size_t i = 0; i < o->nsinks; i++)
            tls = tls || tls_url(o->sinks[i]); /* the sink's broker connection takes them too */
        f = tls                      ? NULL
            : o->net.tls.insecure    ? "-k"
            : o->net.tls.cacert      ? "--cacert"
            : o->net.tls.cert        ? "--cert"
            : o->net.tls.key         ? "--key"
            : o->net.tls.min_version ? "--tls-min"
            : o->net.tls.max_version ? "--tls-max"
                                     : NULL;
        if (f)
            return sq_flag_fail(err, len,
                                "%s is for a broker over TLS: tls://HOST[:PORT]/SUBJECT (NATS) or "
                                "mqtts://HOST[:PORT]/TOPIC (MQTT) or "
                                "mqtt+wss://HOST[:PORT]/PATH?topic=TOPIC",
                                f);
        if (!o->connections_set)
            o->connections = 1; /* one publisher, as nats bench and the MQTT tools start */
    }
    if ((o->sub_group || o->subscribe_only) && !o->subscribers)
        return sq_flag_fail(err, len, "%s applies to --subscribers N",
                            o->sub_group ? "--queue" : "--subscribe-only");
    if ((o->sub_stream || o->sub_batch) && !o->subscribers)
        return sq_flag_fail(err, len, "%s applies to --subscribers N",
                            o->sub_stream ? "--stream" : "--batch");
    if ((o->sub_batch || o->sub_push) && !o->sub_stream)
        return sq_flag_fail(err, len, "%s applies to --stream (JetStream consumers)",
                            o->sub_batch ? "--batch" : "--push");
    if (o->sub_batch && o->sub_push)
        return sq_flag_fail(err, len, "--batch is a pull consumer's fetch size (not with --push)");
    if (o->subscribers && (o->request_reply || o->round_trip || o->idle))
        return sq_flag_fail(err, len, "--subscribers: the load must publish (not %s)",
                            o->request_reply ? "--request"
                            : o->round_trip  ? "--round-trip"
                                             : "--idle");
    if ((o->sink_stamp || o->sink_settle_ns) && !o->nsinks)
        return sq_flag_fail(err, len, "%s applies to --sink",
                            o->sink_stamp ? "--sink-stamp" : "--sink-settle");
    return 0;
}

/* ws:// and wss:// URLs (the scheme in any case): 1 and 2, else 0 (NULL, with --urls: 0). */
static int ws_scheme(const char *url)
{
    if (!url)
        return 0;
    if (strncasecmp(url, "ws://", 5) == 0)
        return 1;
    if (strncasecmp(url, "wss://", 6) == 0)
        return 2;
    return 0;
}

/* A ws:// URL takes --message and the WebSocket flags; no body, method or HTTP/2. */
static int check_ws(struct sq_quick_opts *o, char *err, size_t len)
{
    o->ws = ws_scheme(o->url) != 0;
    if (!o->ws) {
        if (o->message_arg || o->binary || o->ws_ping_ns || o->ws_subprotocol)
            return sq_flag_fail(err, len, "%s applies to ws:// and wss:// URLs (-b sends a body)",
                                o->message_arg  ? "--message"
                                : o->binary     ? "--binary"
                                : o->ws_ping_ns ? "--ws-ping"
                                                : "--ws-subprotocol");
        return 0;
    }
    if (!o->message_arg)
        return sq_flag_fail(err, len,
                            "a ws:// URL needs --message (what each request sends; the next "
                            "message back completes it)");
    if (o->body_arg)
        return sq_flag_fail(err, len, "%s: a ws:// run sends --message, not a body", o->body_flag);
    if (strcmp(o->method, "GET") != 0)
        return sq_flag_fail(err, len, "-m: a ws:// run opens with GET (the upgrade)");
    if (o->http2)
        return sq_flag_fail(err, len, "%s: WebSocket runs over HTTP/1.1 (RFC 6455)", h2flag(o));
    return 0;
}

/* The flags together, once all are read. */
static int check_together(struct sq_quick_opts *o, char *err, size_t len)
{
    int brc = check_bus(o, err, len);
    if (brc < 0)
        return brc;
    int wrc = check_ws(o, err, len);
    if (wrc < 0)
        return wrc;
    if (o->requests && (o->rate_set || o->stages))
        return sq_flag_fail(err, len, "-n cannot be combined with %s",
                            o->rate_set ? "-r" : "--stages");
    if (o->stages && o->duration_set)
        return sq_flag_fail(err, len, "--stages sets the run's length; drop -d");
    if (o->rate_set && !o->stages && o->rate <= 0)
        return sq_flag_fail(err, len,
                            "-r: '%s': the rate must be positive (with --stages it may start at 0)",
                            o->rate_arg);
    if (o->rate_set && o->pacing_ns)
        return sq_flag_fail(err, len, "--pacing applies to the closed loop, not with -r");
    if (o->sample && !o->ndjson_path)
        return sq_flag_fail(err, len, "--sample applies to --out ndjson=FILE");
    if (o->max_in_flight && !o->rate_set)
        return sq_flag_fail(err, len, "--max-in-flight applies to the open loop (-r)");
    if (o->max_vus && !o->rate_set)
        return sq_flag_fail(err, len, "--max-vus applies to the open loop (-r)");
    if (o->precision >= 0 && !o->rate_set)
        return sq_flag_fail(err, len, "--pacing-precision applies to the open loop (-r)");
    if (o->max_vus && (o->http2 || o->ws))
        return sq_flag_fail(err, len, "--max-vus: the pool grows on HTTP/1.1 only; drop %s",
                            o->http2 ? h2flag(o) : "it for a ws:// URL");
    if (o->streams && !o->http2)
        return sq_flag_fail(err, len, "--streams applies to --http2 and --http3");
    if (o->h3_0rtt && !o->http3)
        return sq_flag_fail(err, len, "--h3-0rtt: resumes HTTP/3 sessions; add --http3");
    /* --http3 with --urls is a URL list's requests over QUIC (one https:// origin, as for
     * --http2); the rest cannot be carried: refused before anything is sent */
    if (o->http3 && o->net.proxy && o->net.proxy[0])
        return sq_flag_fail(err, len,
                            "--http3 and --proxy: an HTTP proxy cannot carry QUIC (HTTP/3 is over "
                            "UDP; CONNECT-UDP / MASQUE is not supported): drop --proxy, or drop "
                            "--http3 to go through the proxy over HTTP/1.1 or --http2");
    if (o->http3 && o->script)
        return sq_flag_fail(err, len,
                            "--http3 and -s: a wrk script's requests are HTTP/1.1 bytes "
                            "(request() returns them as sent): drop --http3, or write the load "
                            "as a plan (squall run --http3, docs/plans.md)");
    if (o->http3 && o->net.unix_socket)
        return sq_flag_fail(err, len,
                            "--http3 and --unix-socket: QUIC runs over UDP to the URL's host and "
                            "port, not over a Unix socket: drop one");
    if (o->http_debug && !o->http_debug_force &&
        (!o->requests || o->requests > SQ_QUICK_HTTP_DEBUG_MAX))
        return sq_flag_fail(err, len,
                            "--http-debug prints every exchange: give -n N (N at most %d), or "
                            "--http-debug=force",
                            SQ_QUICK_HTTP_DEBUG_MAX);
    if (o->script && o->http2)
        return sq_flag_fail(err, len, "-s: scripts run over HTTP/1.1; drop --http2");
    if (o->script && o->ws)
        return sq_flag_fail(err, len, "-s: scripts run on http:// and https:// URLs, not ws://");
    if (o->script && (o->body_arg || strcmp(o->method, "GET") != 0))
        return sq_flag_fail(err, len,
                            "-s: the script sets the method and the body (wrk.method, wrk.body); "
                            "drop %s",
                            o->body_arg ? o->body_flag : "-m");
    if (!o->streams)
        o->streams = 1;
    if (o->connections * o->streams > 1000000)
        return sq_flag_fail(err, len, "-c x --streams: at most 1000000 VUs");
    if (o->max_in_flight && o->max_in_flight < o->connections * o->streams)
        return sq_flag_fail(err, len, "--max-in-flight: '%llu' must be at least -c%s (%llu)",
                            (unsigned long long)o->max_in_flight,
                            o->streams > 1 ? " x --streams" : "",
                            (unsigned long long)(o->connections * o->streams));
    if (o->max_vus && o->max_vus < o->connections)
        return sq_flag_fail(err, len, "--max-vus: '%llu' must be at least -c (%llu)",
                            (unsigned long long)o->max_vus, (unsigned long long)o->connections);
    if (o->max_vus && o->max_in_flight && o->max_in_flight < o->max_vus)
        return sq_flag_fail(err, len, "--max-in-flight: '%llu' must be at least --max-vus (%llu)",
                            (unsigned long long)o->max_in_flight, (unsigned long long)o->max_vus);
    if (o->dist.agents && o->ndjson_path)
        return sq_flag_fail(err, len,
                            "--out ndjson: per-request records stay on the agents; not with "
                            "--agents");
    if (o->dist.agents && o->script)
        return sq_flag_fail(err, len, "-s: a script runs on this machine only; not with --agents");
    if (o->dist.agents && o->subscribers)
        return sq_flag_fail(err, len,
                            "--subscribers: the subscribers run on this machine only; not with "
                            "--agents");
    int rc = sq_distopts_check(&o->dist, err, len);
    if (rc < 0)
        return rc;
    /* plain http through a proxy: absolute-form requests (HTTP/2 and WebSocket tunnel) */
    o->net.proxy_absolute = !o->http2 && !o->ws;
    return sq_netopts_check(&o->net, err, len);
}

int sq_quick_parse_argv(struct sq_quick_opts *o, int argc, char **argv, char *err, size_t len)
{
    opterr = 0;
    optind = 0; /* getopt_long starts afresh, whatever an earlier parse left behind */
    int opt, li = -1, rc;
    while ((opt = getopt_long(argc, argv, ":c:d:n:r:t:m:H:b:s:kqvhV", longs, &li)) != -1) {
        char name[48];
        const char *flag = sq_flag_name(longs, &li, opt, argv, name, sizeof(name));
        if ((rc = take(o, opt, flag, optarg, err, len)) != 0)
            return rc;
    }
    if (optind >= argc && !o->urls_path)
        return sq_flag_fail(err, len, "no URL given");
    if (optind < argc && o->urls_path)
        return sq_flag_fail(err, len,
                            "--urls: '%s': give a URL or --urls FILE, not both (unexpected '%s')",
                            o->urls_path, argv[optind]);
    if (o->urls_path && o->script)
        return sq_flag_fail(err, len, "--urls: not with -s (the script makes the requests)");
    if (o->urls_path && o->dist.agents)
        return sq_flag_fail(err, len, "--urls: not with --agents (agents get no files yet)");
    if (argc - optind > 1 && !o->script)
        return sq_flag_fail(err, len, "one URL only; unexpected '%s' (several: --urls FILE)",
                            argv[optind + 1]);
    o->url = optind < argc ? argv[optind] : NULL;
    if (o->url) {
        o->script_argc = argc - optind - 1; /* with -s: init(args) gets them, as in wrk */
        o->script_argv = argv + optind + 1;
    }
    return check_together(o, err, len);
}

/* ------------------------------------------------------------------------------------------ */
/* JSON                                                                                       */

/* Keys a run started from JSON does not take: they write files or print. */
static const struct {
    const char *key, *why;
} cli_only[] = {
    {"json", "writes no files"},
    {"html", "writes no files"},
    {"out", "writes no files"},
    {"sample", "writes no files"},
    {"quiet", "prints nothing"},
    {"urls", "reads no files"},
    {"cpus", "pins no threads of the daemon"},
    {"script", "runs no script file"},
    {"sink", "runs no sink (squall sink runs one beside it)"},
    {"sink-stamp", "runs no sink"},
    {"sink-settle", "runs no sink"},
    {"subscribers", "runs no subscribers (the CLI does)"},
    {"queue", "runs no subscribers"},
    {"subscribe-only", "runs no subscribers"},
    {"stream", "runs no subscribers"},
    {"batch", "runs no subscribers"},
    {"push", "runs no subscribers"},
    {"agents", "cannot run on agents"},
    {"nats", "cannot run on agents"},
    {"agent-wait", "cannot run on agents"},
    {"tolerate-agent-loss", "cannot run on agents"},
    {"subject-prefix", "cannot run on agents"},
    {"segments", "cannot run on agents"},
    {"nats-outage", "cannot run on agents"},
    {"nats-cacert", "cannot run on agents"},
    {"nats-cert", "cannot run on agents"},
    {"nats-key", "cannot run on agents"},
    {"nats-insecure", "cannot run on agents"},
    {"nats-tls-first", "cannot run on agents"},
    {"control", "opens no listener (POST /runs/{id}/control changes a daemon's run)"},
    {"verbose", "prints nothing"},
    {"http-debug", "prints nothing"},
};

static bool repeatable(const char *key)
{
    return strcmp(key, "header") == 0 || strcmp(key, "resolve") == 0 ||
           strcmp(key, "connect-to") == 0 || strcmp(key, "watch") == 0 ||
           strcmp(key, "watch-name") == 0;
}

/* The long option named key exactly, if a JSON object may use it. */
static const struct option *json_option(const char *key)
{
    if (strcmp(key, "help") == 0 || strcmp(key, "version") == 0)
        return NULL;
    for (const struct option *lo = longs; lo->name; lo++)
        if (strcmp(lo->name, key) == 0)
            return lo;
    return NULL;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "a list";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
        return "true";
    case JSON_FALSE:
        return "false";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

/* The arguments being built. */
struct args {
    char **v;
    size_t n, cap;
};

/* Appends s (owned; NULL ends argv); frees it when it cannot. Returns 0 or -ENOMEM. */
static int push_raw(struct args *a, char *s)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        char **nv = realloc(a->v, cap * sizeof(*nv));
        if (!nv) {
            free(s);
            return -ENOMEM;
        }
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = s;
    return 0;
}

/* Appends a string just allocated (NULL: the allocation failed). */
static int push(struct args *a, char *s)
{
    return s ? push_raw(a, s) : -ENOMEM;
}

static char *printf_dup(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *printf_dup(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* A scalar JSON value as the text of an argument: a string as it is, a number as written
 * (integers exactly, reals in the shortest form that reads back the same). */
static int value_text(const char *flag, const json_t *v, char *num, size_t numlen, const char **out,
                      char *err, size_t len)
{
    if (json_is_string(v)) {
        if (strlen(json_string_value(v)) != json_string_length(v))
            return sq_flag_fail(err, len, "%s: a value cannot contain a NUL byte", flag);
        *out = json_string_value(v);
        return 0;
    }
    if (json_is_integer(v)) {
        snprintf(num, numlen, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        *out = num;
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        snprintf(num, numlen, "%.15g", d);
        if (strtod(num, NULL) != d)
            snprintf(num, numlen, "%.17g", d);
        *out = num;
        return 0;
    }
    return sq_flag_fail(err, len, "%s: expected a string or a number, not %s", flag, json_kind(v));
}

/* One key of the object, as arguments. */
static int key_args(struct args *a, const char *key, const json_t *v, const char **url, char **body,
                    char **message, char *err, size_t len)
{
    char flag[64];
    if (strcmp(key, "url") == 0) {
        if (!json_is_string(v))
            return sq_flag_fail(err, len, "url: expected a string, not %s", json_kind(v));
        if (strlen(json_string_value(v)) != json_string_length(v))
            return sq_flag_fail(err, len, "url: a value cannot contain a NUL byte");
        *url = json_string_value(v);
        return 0;
    }
    for (size_t i = 0; i < SQ_ARRAY_LEN(cli_only); i++) {
        if (strcmp(key, cli_only[i].key) != 0)
            continue;
        if (json_is_null(v) || json_is_false(v)) /* not asked for: nothing to refuse */
            return 0;
        return sq_flag_fail(err, len, "key '%s' is refused: a run started from JSON %s", key,
                            cli_only[i].why);
    }
    const struct option *lo = json_option(key);
    if (!lo) {
        struct sq_suggest s;
        char tail[96];
        sq_suggest_init(&s, key, strlen(key));
        sq_suggest_try(&s, "url");
        for (const struct option *c = longs; c->name; c++)
            if (json_option(c->name))
                sq_suggest_try(&s, c->name);
        return sq_flag_fail(err, len, "unknown key '%.60s'%s", key,
                            sq_suggest_tail(&s, tail, sizeof(tail)));
    }
    snprintf(flag, sizeof(flag), "--%s", key);
    if (json_is_null(v))
        return 0;
    if (lo->has_arg == no_argument) {
        if (json_is_false(v))
            return 0;
        if (!json_is_true(v))
            return sq_flag_fail(err, len, "%s: expected true or false, not %s", flag, json_kind(v));
        return push(a, strdup(flag));
    }
    if (json_is_array(v) && !repeatable(key))
        return sq_flag_fail(err, len,
                            "%s: expected a string or a number, not a list (only header, "
                            "resolve and connect-to take several)",
                            flag);
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        char num[40];
        const char *text = NULL;
        int rc = value_text(flag, e, num, sizeof(num), &text, err, len);
        if (rc < 0)
            return rc;
        if (lo->val == 'b' || lo->val == OPT_MESSAGE) {
            /* The body or message itself, set after the parse and never read as @FILE. A copy:
             * a number's text lives in num, gone when this function returns. */
            char **slot = lo->val == 'b' ? body : message;
            free(*slot);
            if (!(*slot = strdup(text)))
                return -ENOMEM;
            if (lo->val == OPT_MESSAGE && (rc = push(a, strdup("--message=-"))) < 0)
                return rc;
            continue;
        }
        if ((rc = push(a, printf_dup("%s=%s", flag, text))) < 0)
            return rc;
    }
    return 0;
}

int sq_quick_from_json(struct sq_quick_opts *o, const json_t *obj, char *err, size_t len)
{
    if (!json_is_object(obj))
        return sq_flag_fail(err, len, "the quick options must be a JSON object, not %s",
                            json_kind(obj));
    struct args a = {0};
    const char *url = NULL, *key;
    char *body = NULL, *message = NULL;
    json_t *v;
    int rc = push(&a, strdup("squall"));
    json_object_foreach((json_t *)obj, key, v)
    {
        if (rc == 0)
            rc = key_args(&a, key, v, &url, &body, &message, err, len);
    }
    if (rc == 0 && url) {
        rc = push(&a, strdup("--"));
        if (rc == 0)
            rc = push(&a, strdup(url));
    }
    size_t argc = a.n;
    if (rc == 0)
        rc = push_raw(&a, NULL); /* argv[argc] */
    o->_argv = a.v;
    o->_argc = argc;
    o->_body = body; /* owned by o from here, freed with it */
    o->_message = message;
    if (rc == -ENOMEM)
        snprintf(err, len, "out of memory");
    if (rc < 0)
        return rc;
    rc = sq_quick_parse_argv(o, (int)argc, a.v, err, len);
    if (rc > 0) /* --help and --version are not keys JSON may use */
        rc = sq_flag_fail(err, len, "unknown key");
    if (rc == 0 && o->_body) {
        o->body_arg = o->_body;
        o->body_flag = "--body";
        o->body_literal = true;
    }
    if (rc == 0 && o->_message) {
        o->message_arg = o->_message;
        o->message_literal = true;
    }
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Prepare                                                                                    */

/* What the kept exchanges redact (struct sq_run_config.secrets): the value of each -H header
 * that carries a credential (base/redact.h), whole and after its scheme word, so an echo of it
 * in a response body goes too. */
static void redact_setup(struct sq_quick_run *r, const struct sq_quick_opts *o)
{
    struct sq_run_config *cfg = &r->cfg;
    cfg->no_redact = o->no_redact;
    cfg->secrets = r->secrets;
    cfg->nsecrets = 0;
    for (size_t i = 0; i < o->nheaders; i++) {
        const char *v = o->headers[i].value;
        if (!sq_redact_header_name(o->headers[i].name, strlen(o->headers[i].name)))
            continue;
        size_t n = strlen(v), w = strcspn(v, " \t");
        r->secrets[cfg->nsecrets++] = (struct sq_str){v, n};
        w += strspn(v + w, " \t");
        if (w > 0 && w < n)
            r->secrets[cfg->nsecrets++] = (struct sq_str){v + w, n - w};
    }
}

/* Reads -b @FILE, or the standard input when in (--urls -). Returns 0, -errno (-EISDIR for a
 * directory), -SQ_ETOOBIG or -ENOMEM. */
static int read_input(const char *path, bool in, char **out, size_t *len)
{
    FILE *f = in ? stdin : fopen(path, "rb");
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
            if (cap >= SQ_QUICK_MAX_BODY_FILE) {
                rc = -SQ_ETOOBIG;
                break;
            }
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
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
    if (!in)
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

static int read_body_file(const char *path, char **out, size_t *len)
{
    return read_input(path, false, out, len);
}

/* The body: -b's text, or the file -b @FILE names. */
static int load_body(struct sq_quick_run *r, const struct sq_quick_opts *o, char *err, size_t len)
{
    if (!o->body_arg)
        return 0;
    if (o->body_arg[0] == '@' && !o->body_literal) {
        const char *file = o->body_arg + 1;
        int rc = read_body_file(file, &r->body, &r->body_len);
        if (rc == -EISDIR)
            return sq_flag_fail(err, len, "%s: '%s': %s is a directory, not a file", o->body_flag,
                                o->body_arg, file);
        if (rc == -SQ_ETOOBIG)
            return sq_flag_fail(err, len, "%s: '%s': %s is larger than %u MiB", o->body_flag,
                                o->body_arg, file, SQ_QUICK_MAX_BODY_FILE >> 20);
        if (rc == -ENOMEM) {
            snprintf(err, len, "out of memory");
            return rc;
        }
        if (rc < 0)
            return sq_flag_fail(err, len, "%s: '%s': cannot read %s: %s", o->body_flag, o->body_arg,
                                file, sq_strerror(rc));
        return 0;
    }
    r->body_len = strlen(o->body_arg);
    r->body = malloc(r->body_len + 1);
    if (!r->body) {
        snprintf(err, len, "out of memory");
        return -ENOMEM;
    }
    memcpy(r->body, o->body_arg, r->body_len + 1);
    return 0;
}

/* -b's text (not @FILE's bytes) is a template: with dynamic parts ({{$stamp}}, {{$vu}}...) it
 * is rendered per request (r->body_tmpl), HTTP/1.1 and one URL only; without, the static path
 * (r->body as it is, serialised once). */
static int body_template(struct sq_quick_run *r, const struct sq_quick_opts *o, char *err,
                         size_t len)
{
    if (!o->body_arg || (o->body_arg[0] == '@' && !o->body_literal))
        return 0;
    struct sq_tmpl *t = NULL;
    struct sq_tmpl_error te = {0};
    int rc = sq_tmpl_compile(r->body, r->body_len, SQ_TMPL_ESC_NONE, NULL, NULL, &t, &te);
    if (rc == -ENOMEM) {
        snprintf(err, len, "out of memory");
        return rc;
    }
    if (rc < 0)
        return sq_flag_fail(err, len,
                            "%s: '%s': %s (at byte %zu; a body file, @FILE, is sent "
                            "as it is)",
                            o->body_flag, o->body_arg, te.msg, te.offset + 1);
    const char *text;
    size_t n;
    if (sq_tmpl_static(t, &text, &n)) {
        /* no dynamic part: the static request ("{{" escapes, if any, resolved) */
        memmove(r->body, text, n);
        r->body[n] = '\0';
        r->body_len = n;
        sq_tmpl_free(t);
        return 0;
    }
    r->body_tmpl = t;
    const char *why = o->urls_path ? "--urls" : o->http2 ? h2flag(o) : o->script ? "-s" : NULL;
    if (why)
        return sq_flag_fail(err, len,
                            "%s: a body with {{...}} is rendered per request over HTTP/1.1 for "
                            "one URL, not with %s (a plan's request: body can)",
                            o->body_flag, why);
    for (size_t i = 0; i < o->nheaders; i++)
        if (strcasecmp(o->headers[i].name, "Content-Length") == 0 ||
            strcasecmp(o->headers[i].name, "Transfer-Encoding") == 0)
            return sq_flag_fail(err, len,
                                "-H %s: a body with {{...}} gets its Content-Length per request",
                                o->headers[i].name);
    return 0;
}

/* sq_request_build, or for plain http through a proxy its absolute-form: the request-target
 * "http://authority/path" and the Proxy-Authorization header (face/netopts.h). */
static int build_req(const struct sq_quick_run *r, const char *method, const char *path,
                     const char *authority, const struct sq_kv *headers, size_t nheaders,
                     const void *body, size_t body_len, char **out, size_t *out_len)
{
    if (!r->px_target[0])
        return sq_request_build(method, path, authority, headers, nheaders, body, body_len, out,
                                out_len);
    size_t tl = strlen(r->px_target), pl = strlen(path);
    char *target = malloc(tl + pl + 1);
    struct sq_kv *hs = calloc(nheaders + 1, sizeof(*hs));
    int rc = -ENOMEM;
    if (target && hs) {
        memcpy(target, r->px_target, tl);
        memcpy(target + tl, path, pl + 1);
        memcpy(hs, headers, nheaders * sizeof(*hs));
        size_t nh = nheaders;
        if (r->px_auth)
            hs[nh++] = (struct sq_kv){.name = "Proxy-Authorization", .value = r->px_auth};
        rc = sq_request_build(method, target, authority, hs, nh, body, body_len, out, out_len);
    }
    free(target);
    free(hs);
    return rc;
}

/* The head of a templated body's requests: serialised with a one-byte body, so it carries
 * "Content-Length: 1", whose digit the worker replaces with each body's length. */
static int templated_head(struct sq_quick_run *r, const struct sq_quick_opts *o,
                          const struct sq_kv *headers, size_t nheaders, char *err, size_t len)
{
    int rc = build_req(r, o->method, r->url.path, r->url.authority, headers, nheaders, "x", 1,
                       &r->req, &r->req_len);
    if (rc < 0)
        return sq_flag_fail(err, len, "cannot build the request: %s", sq_strerror(rc));
    static const char cl[] = "\r\nContent-Length: 1\r\n";
    const char *at = NULL;
    for (const char *p = r->req; p + sizeof(cl) - 1 <= r->req + r->req_len; p++)
        if (memcmp(p, cl, sizeof(cl) - 1) == 0) {
            at = p;
            break;
        }
    if (!at) { /* sq_request_build always writes it for a body it frames */
        snprintf(err, len, "cannot build the request: no Content-Length");
        return -SQ_EUSAGE;
    }
    r->req_len--; /* the head alone: the body is rendered per request */
    r->req[r->req_len] = '\0';
    r->cfg.body_cl = (size_t)(at - r->req) + sizeof(cl) - 4;
    return 0;
}

/* Maps the quick face's flags onto one executor (plan/exec.h). per: the VUs one connection
 * carries (HTTP/2 streams, a bus window). */
static int build_exec(const struct sq_quick_opts *o, uint64_t per, struct sq_exec *e, char *err,
                      size_t len)
{
    memset(e, 0, sizeof(*e));
    e->vus = (uint32_t)(o->connections * per); /* one VU per stream slot or window slot */
    e->pacing_ns = o->pacing_ns;
    e->graceful_stop_ns = o->graceful_ns;
    const char *why = NULL;
    if (o->stages && sq_exec_parse_stages(e, o->stages, &why) < 0)
        return sq_flag_fail(err, len, "--stages: '%s': %s", o->stages, why + strlen("stages: "));
    if (o->rate_set) {
        e->kind = o->stages ? SQ_EXEC_RAMPING_ARRIVAL_RATE : SQ_EXEC_CONSTANT_ARRIVAL_RATE;
        e->rate = o->rate;
        e->start_rate = o->rate;
        e->duration_ns = o->duration_ns;
        e->max_in_flight = o->max_in_flight;
        e->max_vus = (uint32_t)o->max_vus;
        e->precision = o->precision < 0 ? SQ_PACING_NORMAL : o->precision;
        e->window_ns = o->window_ns;
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
            return sq_flag_fail(err, len, "--stages: '%s': %s", o->stages, why + 8);
        return sq_flag_fail(err, len, "%s", why);
    }
    return 0;
}

/* --payload @FILE: the file's bytes into r->payload. */
static int read_payload(struct sq_quick_run *r, const struct sq_quick_opts *o, char *err,
                        size_t len)
{
    const char *file = o->payload_arg + 1;
    int rc = read_body_file(file, &r->payload, &r->payload_len);
    if (rc == -EISDIR)
        return sq_flag_fail(err, len, "--payload: '%s': %s is a directory, not a file",
                            o->payload_arg, file);
    if (rc == -SQ_ETOOBIG)
        return sq_flag_fail(err, len, "--payload: '%s': %s is larger than %u MiB", o->payload_arg,
                            file, SQ_QUICK_MAX_BODY_FILE >> 20);
    if (rc == -ENOMEM) {
        snprintf(err, len, "out of memory");
        return rc;
    }
    if (rc < 0)
        return sq_flag_fail(err, len, "--payload: '%s': cannot read %s: %s", o->payload_arg, file,
                            sq_strerror(rc));
    return 0;
}

/* A nats:// or mqtt:// run: the bus configuration (engine/busconf.h), the broker's address, the
 * executor over connections x window VUs. */
static int prepare_bus(struct sq_quick_run *r, const struct sq_quick_opts *o, char *err, size_t len)
{
    r->is_bus = true;
    const char *why = NULL;
    int rc = sq_bus_url_parse(o->url, SQ_BUS_URL_TARGET, &r->bus_url, &why);
    if (rc == -ENOMEM) {
        snprintf(err, len, "out of memory");
        return rc;
    }
    if (rc < 0)
        return sq_flag_fail(err, len, "bad URL '%s': %s", o->url, why);
    if (o->payload_arg && o->payload_arg[0] == '@' && !o->body_literal &&
        (rc = read_payload(r, o, err, len)) < 0)
        return rc;
    const char *hs[SQ_QUICK_MAX_HEADERS], *hv[SQ_QUICK_MAX_HEADERS];
    for (size_t i = 0; i < o->nheaders; i++) {
        hs[i] = o->headers[i].name;
        hv[i] = o->headers[i].value;
    }
    struct sq_bus_opts bo = {
        .payload = r->payload ? r->payload : o->payload_arg,
        .payload_len = r->payload       ? r->payload_len
                       : o->payload_arg ? strlen(o->payload_arg)
                                        : 0,
        .payload_flag = "--payload",
        .header_names = hs,
        .header_values = hv,
        .nheaders = o->nheaders,
        .window = o->window,
        .qos = o->qos,
        .mqtt_version = o->mqtt_version,
        .jetstream = o->jetstream,
        .request = o->request_reply,
        .round_trip = o->round_trip,
        .idle = o->idle,
        .retain = o->retain,
        .keepalive_ns = o->keepalive_ns,
        .client_id = o->client_id,
        .tls_first = o->tls_first,
    };
    rc = sq_bus_prepare(&r->bus, &r->bus_url, &bo, err, len);
    if (rc < 0)
        return rc;
    if (o->idle && (o->rate_set || o->requests || o->stages))
        return sq_flag_fail(err, len, "--idle holds -c connections for -d: no %s",
                            o->rate_set   ? "--rate"
                            : o->requests ? "-n"
                                          : "--stages");
    uint64_t vus = o->connections * r->bus.window;
    if (vus > 1000000)
        return sq_flag_fail(err, len, "-c x --window: at most 1000000 VUs");
    if (o->max_vus)
        return sq_flag_fail(err, len, "--max-vus: the pool grows on HTTP/1.1 only, not on a bus");
    if (o->max_in_flight && o->max_in_flight < vus)
        return sq_flag_fail(err, len,
                            "--max-in-flight: '%llu' must be at least -c x --window (%llu)",
                            (unsigned long long)o->max_in_flight, (unsigned long long)vus);
    struct sq_run_config *cfg = &r->cfg;
    cfg->bus = &r->bus;
    cfg->timeout_ns = o->timeout_ns;
    cfg->connect_timeout_ns = o->connect_timeout_ns;
    cfg->phases = false; /* a message has no connect or TLS of its own to time */
    if ((rc = build_exec(o, r->bus.window, &cfg->exec, err, len)) < 0)
        return rc;
    cfg->threads = sq_flag_threads(o->threads);
    cfg->cpus = o->ncpus ? o->cpus : NULL;
    cfg->ncpus = o->ncpus;
    /* --watch: the broker's CPU and RSS beside the load (refused now if it does not exist) */
    if ((rc = sq_watch_opts_build(&o->watch, &r->watch, err, len)) < 0)
        return rc;
    cfg->watch = r->watch;
    /* the broker's address through the same DNS options (--resolve, --connect-to, --dns-ttl) */
    /* over TLS (tls://, mqtts://): the run's TLS client, built from -k, --cacert, --cert as for
     * https, verifies the broker's certificate against the URL's host */
    snprintf(r->url.scheme, sizeof(r->url.scheme), "%s", r->bus_url.tls ? "https" : "http");
    snprintf(r->url.host, sizeof(r->url.host), "%s", r->bus_url.host);
    r->url.port = r->bus_url.port;
    snprintf(r->url.authority, sizeof(r->url.authority), "%s:%u", r->bus_url.host, r->bus_url.port);
    if (o->net.proxy && o->net.proxy[0])
        return sq_flag_fail(err, len,
                            "--proxy: an HTTP proxy carries http, https, ws and wss "
                            "runs, not a broker's");
    struct sq_netopts bn = o->net;
    bn.proxy_env = false; /* HTTP(S)_PROXY are for HTTP */
    bn.proxy = NULL;
    rc = sq_net_setup(&r->net, &bn, &r->url, NULL, cfg, err, len);
    if (rc < 0)
        return rc;
    r->conns = sq_run_connections(cfg, sq_exec_max_vus(&cfg->exec));
    return sq_net_sources(&r->net, &o->net, r->conns, cfg, err, len);
}

/* A --urls line's @PATH body: PATH as written, taken from the list's directory when relative. */
static int read_list_body(const struct sq_quick_opts *o, const struct sq_urllist_entry *e,
                          char **out, size_t *blen, char *err, size_t len)
{
    char path[4096];
    const char *slash = strrchr(o->urls_path, '/');
    if (e->body_file[0] == '/' || !slash)
        snprintf(path, sizeof(path), "%s", e->body_file);
    else
        snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - o->urls_path), o->urls_path,
                 e->body_file);
    int rc = read_body_file(path, out, blen);
    if (rc == -ENOMEM) {
        snprintf(err, len, "out of memory");
        return rc;
    }
    if (rc < 0) {
        snprintf(err, len, "%s:%u: @%s: cannot read %s: %s",
                 strcmp(o->urls_path, "-") == 0 ? "<stdin>" : o->urls_path, e->line, e->body_file,
                 path,
                 rc == -EISDIR       ? "it is a directory"
                 : rc == -SQ_ETOOBIG ? "larger than 64 MiB"
                                     : sq_strerror(rc));
        return -SQ_EPARSE;
    }
    return 0;
}

/* --urls: the list's origins (scheme, host and port) in the order they first appear, each URL's
 * origin; one origin leaves cfg.origins unset. */
static int list_origins(struct sq_quick_run *r, char *err, size_t len)
{
    size_t n = r->nurls;
    r->ofirst = calloc(n, sizeof(*r->ofirst));
    if (!r->ofirst) {
        snprintf(err, len, "out of memory");
        return -ENOMEM;
    }
    r->norigins = 0;
    for (size_t i = 0; i < n; i++) {
        const struct sq_url *u = &r->list.v[i].u;
        uint32_t k = 0;
        for (; k < r->norigins; k++) {
            const struct sq_url *f = &r->list.v[r->ofirst[k]].u;
            if (f->port == u->port && strcmp(f->host, u->host) == 0 &&
                strcmp(f->scheme, u->scheme) == 0)
                break;
        }
        if (k == r->norigins)
            r->ofirst[r->norigins++] = i;
        r->run_urls[i].origin = (uint16_t)k;
    }
    return 0;
}

/* --urls on several hosts, after origin 0's set-up (r->net, into cfg): every other origin looked
 * up through the same policy, overrides and DNS flags, its addresses its connections'. Plain
 * HTTP/1.1 only, and at least a connection per host. */
static int origins_setup(struct sq_quick_run *r, const struct sq_quick_opts *o, char *err,
                         size_t len)
{
    struct sq_run_config *cfg = &r->cfg;
    const char *no = o->http2                ? "--http2"
                     : o->net.dns_ttl_ns > 0 ? "--dns-ttl"
                     : r->net.proxy_shown[0] ? "a proxy"
                     : o->net.unix_socket    ? "--unix-socket"
                     : o->script             ? "-s"
                                             : NULL;
    if (no)
        return sq_flag_fail(err, len,
                            "--urls: the list names %u hosts; several hosts in one run are not "
                            "supported with %s (run one host at a time)",
                            r->norigins, no);
    if (r->conns < r->norigins)
        return sq_flag_fail(err, len,
                            "--urls: the list names %u hosts, and each connection goes to one: "
                            "give -c %u or more (the pool is %llu)",
                            r->norigins, r->norigins, (unsigned long long)r->conns);
    r->origins = calloc(r->norigins, sizeof(*r->origins));
    r->onets = calloc(r->norigins, sizeof(*r->onets));
    if (!r->origins || !r->onets) {
        snprintf(err, len, "out of memory");
        return -ENOMEM;
    }
    memcpy(r->origins[0].addrs, cfg->addrs, sizeof(cfg->addrs));
    r->origins[0].naddrs = cfg->naddrs;
    for (uint32_t k = 1; k < r->norigins; k++) {
        struct sq_run_config tmp;
        memset(&tmp, 0, sizeof(tmp));
        int rc =
            sq_net_setup(&r->onets[k], &o->net, &r->list.v[r->ofirst[k]].u, NULL, &tmp, err, len);
        if (rc < 0)
            return rc;
        memcpy(r->origins[k].addrs, tmp.addrs, sizeof(tmp.addrs));
        r->origins[k].naddrs = tmp.naddrs;
    }
    cfg->origins = r->origins;
    cfg->norigins = r->norigins;
    return 0;
}

uint64_t sq_quick_origin_conns(const struct sq_quick_run *r, uint32_t k)
{
    if (r->norigins <= 1)
        return r->conns;
    return r->conns / r->norigins + (k < r->conns % r->norigins);
}

/* --urls: reads and parses the list, and serialises each line's request (and its HTTP/2 form)
 * with the run's headers; r->url becomes the first line's URL (the pool's origin). */
static int prepare_urls(struct sq_quick_run *r, const struct sq_quick_opts *o,
                        const struct sq_kv *headers, size_t nheaders, char *err, size_t len)
{
    char *text = NULL;
    size_t tlen = 0;
    int rc = read_input(o->urls_path, strcmp(o->urls_path, "-") == 0, &text, &tlen);
    if (rc == -ENOMEM) {
        snprintf(err, len, "out of memory");
        return rc;
    }
    if (rc < 0)
        return sq_flag_fail(err, len, "--urls: '%s': %s", o->urls_path,
                            rc == -EISDIR ? "it is a directory, not a file" : sq_strerror(rc));
    /* --urls -: the standard input, named so in messages */
    const char *name = strcmp(o->urls_path, "-") == 0 ? "<stdin>" : o->urls_path;
    rc = sq_urllist_parse(name, text, tlen, &r->list, err, len);
    free(text);
    if (rc < 0)
        return rc;
    size_t n = r->list.n;
    r->urls = calloc(n, sizeof(*r->urls));
    r->run_urls = calloc(n, sizeof(*r->run_urls));
    if (!r->urls || !r->run_urls) {
        snprintf(err, len, "out of memory");
        return -ENOMEM;
    }
    r->nurls = n;
    const char *why = NULL;
    if ((rc = sq_url_parse(r->list.v[0].url, &r->url, &why)) < 0) {
        snprintf(err, len, "out of memory");
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        const struct sq_urllist_entry *e = &r->list.v[i];
        struct sq_quick_url *q = &r->urls[i];
        q->method = e->method ? e->method : o->method;
        const char *body = r->body;
        size_t blen = r->body_len;
        if (e->body_file) {
            if ((rc = read_list_body(o, e, &q->body, &blen, err, len)) < 0)
                return rc;
            body = q->body;
        } else if (e->body) {
            body = e->body;
            blen = e->body_len;
        }
        /* the run's headers, less those the line's own header lines set, then those */
        struct sq_kv hs[SQ_QUICK_MAX_HEADERS + 1 + SQ_URLLIST_MAX_HEADERS];
        size_t nh = 0;
        for (size_t h = 0; h < nheaders; h++) {
            bool mine = false;
            for (size_t k = 0; k < e->nheaders && !mine; k++)
                mine = strcasecmp(headers[h].name, e->headers[k].name) == 0;
            if (!mine)
                hs[nh++] = headers[h];
        }
        for (size_t k = 0; k < e->nheaders; k++)
            hs[nh++] = e->headers[k];
        rc = build_req(r, q->method, e->u.path, e->u.authority, hs, nh, body, blen, &q->req,
                       &q->req_len);
        if (rc == 0 && o->http2)
            rc = sq_h2_req_init(&q->h2, q->method, e->u.scheme, e->u.authority, e->u.path, hs, nh,
                                body, blen);
        if (rc == -ENOMEM) {
            snprintf(err, len, "out of memory");
            return rc;
        }
        if (rc < 0) {
            snprintf(err, len, "%s:%u: cannot build the request: %s", name, e->line,
                     sq_strerror(rc));
            return -SQ_EPARSE;
        }
        r->run_urls[i] = (struct sq_run_url){.request = q->req,
                                             .request_len = q->req_len,
                                             .head = strcmp(q->method, "HEAD") == 0,
                                             .h2 = o->http2 ? &q->h2 : NULL};
    }
    return list_origins(r, err, len);
}

/* -s: the wrk table starts from the URL and the -H headers (with the quick face's
 * Accept-Encoding); each worker gets its state, and the script's static request replaces the one
 * built from the flags. */
static int prepare_script(struct sq_quick_run *r, const struct sq_quick_opts *o,
                          const struct sq_kv *headers, size_t nheaders, char *err, size_t len)
{
    struct sq_script_header hs[SQ_QUICK_MAX_HEADERS + 1];
    for (size_t i = 0; i < nheaders; i++)
        hs[i] = (struct sq_script_header){.name = headers[i].name, .value = headers[i].value};
    /* wrk.port is the port as the URL wrote it: the authority has it unless it is the default */
    const char *colon =
        r->url.ipv6_literal ? strstr(r->url.authority, "]:") : strchr(r->url.authority, ':');
    const char *port = colon ? colon + (r->url.ipv6_literal ? 2 : 1) : NULL;
    struct sq_script_target t = {
        .scheme = r->url.scheme,
        .host = r->url.host,
        .port = port,
        .path = r->url.path,
        .headers = hs,
        .nheaders = nheaders,
    };
    struct sq_wrk_script_args a = {
        .file = o->script,
        .url = o->url,
        .target = &t,
        .argc = o->script_argc,
        .argv = (const char *const *)o->script_argv,
        .workers = sq_run_workers(&r->cfg),
        .addrs = r->cfg.addrs,
        .naddrs = r->cfg.naddrs,
        .seed = r->cfg.seed,
    };
    int rc = sq_wrk_script_open(&r->wrk, &a, err, len);
    if (rc < 0)
        return rc == -ENOMEM ? rc : -SQ_EPARSE;
    r->cfg.script = &r->wrk.run;
    r->cfg.request = r->wrk.request;
    r->cfg.request_len = r->wrk.request_len;
    r->cfg.head_request = r->wrk.request_len > 5 && memcmp(r->wrk.request, "HEAD ", 5) == 0;
    r->cfg.rate_samples = (r->wrk.hooks & SQ_SCRIPT_DONE) != 0; /* done()'s requests */
    return 0;
}

/* A ws:// run: the message (a template, or @FILE's bytes as they are; the static path when it
 * has no dynamic part), the upgrade's target, -H lines and subprotocol. */
static int prepare_ws(struct sq_quick_run *r, const struct sq_quick_opts *o, char *err, size_t len)
{
    const char *arg = o->message_arg;
    if (arg[0] == '@' && !o->message_literal) {
        const char *file = arg + 1;
        int rc = read_body_file(file, &r->body, &r->body_len);
        if (rc == -EISDIR)
            return sq_flag_fail(err, len, "--message: '%s': %s is a directory, not a file", arg,
                                file);
        if (rc == -SQ_ETOOBIG)
            return sq_flag_fail(err, len, "--message: '%s': %s is larger than %u MiB", arg, file,
                                SQ_QUICK_MAX_BODY_FILE >> 20);
        if (rc == -ENOMEM) {
            snprintf(err, len, "out of memory");
            return rc;
        }
        if (rc < 0)
            return sq_flag_fail(err, len, "--message: '%s': cannot read %s: %s", arg, file,
                                sq_strerror(rc));
    } else {
        struct sq_tmpl_error te = {0};
        int rc =
            sq_tmpl_compile(arg, strlen(arg), SQ_TMPL_ESC_NONE, NULL, NULL, &r->ws_message, &te);
        if (rc == -ENOMEM) {
            snprintf(err, len, "out of memory");
            return rc;
        }
        if (rc < 0)
            return sq_flag_fail(err, len, "--message: '%s': %s (at byte %zu)", arg, te.msg,
                                te.offset + 1);
        const char *text = "";
        size_t n = 0;
        bool fixed = sq_tmpl_static(r->ws_message, &text, &n);
        if (!fixed)
            n = 0; /* rendered per send */
        r->body = malloc(n + 1);
        if (!r->body) {
            snprintf(err, len, "out of memory");
            return -ENOMEM;
        }
        memcpy(r->body, fixed ? text : "", n);
        r->body[n] = '\0';
        r->body_len = n;
        if (fixed) { /* the static path: one message for every send */
            sq_tmpl_free(r->ws_message);
            r->ws_message = NULL;
        }
    }
    struct sq_buf *h = &r->ws_headers;
    for (size_t i = 0; i < o->nheaders; i++) {
        const struct sq_kv *kv = &o->headers[i];
        if (sq_buf_append(h, kv->name, strlen(kv->name)) < 0 || sq_buf_append(h, ": ", 2) < 0 ||
            sq_buf_append(h, kv->value, strlen(kv->value)) < 0 || sq_buf_append(h, "\r\n", 2) < 0) {
            snprintf(err, len, "out of memory");
            return -ENOMEM;
        }
    }
    if (h->len) { /* NUL-terminated for the driver */
        if (sq_buf_append(h, "", 1) < 0) {
            snprintf(err, len, "out of memory");
            return -ENOMEM;
        }
        h->len--;
    }
    r->ws = (struct sq_ws_run){
        .host = r->url.authority,
        .path = r->url.path,
        .headers = h->len ? h->p : NULL,
        .protocol = o->ws_subprotocol,
        .binary = o->binary,
        .message = r->ws_message,
        .ping_ns = o->ws_ping_ns,
    };
    r->req_len = r->body_len;
    return 0;
}

/* The URL parsed into r->url. ws:// and wss:// are http:// and https:// for the upgrade (RFC
 * 6455 3): parsed as those, so TLS, DNS and the Host header follow; the document keeps the URL
 * as written. No URL: --urls (its first line's is parsed there). */
static int prepare_url(struct sq_quick_run *r, const struct sq_quick_opts *o, char *err, size_t len)
{
    const char *why = NULL;
    int wsk = o->ws && o->url ? ws_scheme(o->url) : 0;
    char *url = NULL;
    if (wsk && asprintf(&url, "%s%s", wsk == 1 ? "http" : "https", o->url + (wsk == 1 ? 2 : 3)) < 0)
        url = NULL;
    if (wsk && !url) {
        snprintf(err, len, "out of memory");
        return -ENOMEM;
    }
    int rc = o->url ? sq_url_parse(url ? url : o->url, &r->url, &why) : 0;
    free(url);
    if (rc < 0 && !strstr(o->url, "://")) {
        /* "localhost:8080/x", ":8080/x", "/x": a URL without its scheme */
        const char *u = o->url;
        return sq_flag_fail(err, len, "bad URL '%s': no scheme (did you mean http://%s%s%s?)", u,
                            u[0] == ':' || u[0] == '/' ? "127.0.0.1" : "",
                            u[0] == '/' ? ":8080" : "", u);
    }
    if (rc == -SQ_ESCHEME) {
        /* the quick face takes more schemes than sq_url_parse (HTTP's): name them all */
        int sn = (int)(strstr(o->url, "://") - o->url);
        return sq_flag_fail(err, len,
                            "bad URL '%s': unsupported URL scheme \"%.*s\" (use http://, https://, "
                            "ws://, wss://, nats://, tls:// (NATS over TLS), mqtt://, mqtts://, "
                            "mqtt+ws:// or mqtt+wss:// (MQTT over WebSocket))",
                            o->url, sn > 16 ? 16 : sn, o->url);
    }
    if (rc < 0)
        return sq_flag_fail(err, len, "bad URL '%s': %s", o->url, why ? why : sq_strerror(rc));
    return 0;
}

/* The HTTP request(s), serialised once: the body, the headers sent (the user's, and
 * Accept-Encoding unless the user set one or turned compression off, over HTTP/1.1 and HTTP/2
 * alike: both decode what comes back), then --urls' requests, a templated body's head, or the
 * one request (and its HTTP/2 form). headers gets what is sent, for the script. */
static int prepare_request(struct sq_quick_run *r, const struct sq_quick_opts *o,
                           struct sq_kv *headers, size_t *nheaders, char *err, size_t len)
{
    int rc;
    if ((rc = load_body(r, o, err, len)) < 0 || (rc = body_template(r, o, err, len)) < 0)
        return rc;
    const char *accept = o->no_compression ? NULL : sq_accept_encoding_default();
    for (size_t i = 0; i < o->nheaders; i++)
        if (strcasecmp(o->headers[i].name, "Accept-Encoding") == 0)
            accept = o->headers[i].value[0] ? o->headers[i].value : NULL;
    r->accept_encoding = accept;
    size_t n = o->nheaders;
    memcpy(headers, o->headers, n * sizeof(headers[0]));
    if (accept && !o->no_compression && accept == sq_accept_encoding_default() &&
        n < SQ_QUICK_MAX_HEADERS)
        headers[n++] = (struct sq_kv){.name = "Accept-Encoding", .value = accept};
    *nheaders = n;
    if (o->urls_path) {
        struct sq_run_config *cfg = &r->cfg;
        if ((rc = prepare_urls(r, o, headers, n, err, len)) < 0)
            return rc;
        cfg->urls = r->run_urls;
        cfg->nurls = (uint32_t)r->nurls;
        cfg->request = r->urls[0].req;
        cfg->request_len = r->req_len = r->urls[0].req_len;
        cfg->head_request = r->run_urls[0].head;
        cfg->h2_request = o->http2 ? &r->urls[0].h2 : NULL;
        return 0;
    }
    if (r->body_tmpl)
        return templated_head(r, o, headers, n, err, len);
    rc = build_req(r, o->method, r->url.path, r->url.authority, headers, n, r->body, r->body_len,
                   &r->req, &r->req_len);
    if (rc < 0)
        return sq_flag_fail(err, len, "cannot build the request: %s", sq_strerror(rc));
    if (o->http2) {
        rc = sq_h2_req_init(&r->h2req, o->method, r->url.scheme, r->url.authority, r->url.path,
                            headers, n, r->body, r->body_len);
        if (rc < 0)
            return sq_flag_fail(err, len, "cannot build the request: %s", sq_strerror(rc));
    }
    return 0;
}

/* The run's configuration around the request: what is sent, the sink's stamps, timeouts, the
 * executor, threads, the watched processes, DNS and TLS, the pool, the wrk script. */
static int configure(struct sq_quick_run *r, const struct sq_quick_opts *o,
                     const struct sq_kv *headers, size_t nheaders, char *err, size_t len)
{
    struct sq_run_config *cfg = &r->cfg;
    int rc;
    if (!o->urls_path) { /* --urls set its own */
        cfg->request = o->ws ? r->body : r->req;
        cfg->request_len = r->req_len;
        cfg->head_request = strcmp(o->method, "HEAD") == 0;
        cfg->h2_request = o->http2 ? &r->h2req : NULL;
    }
    cfg->ws = o->ws ? &r->ws : NULL;
    cfg->body_tmpl = r->body_tmpl;
    if (o->nsinks && !(r->body_tmpl && sq_tmpl_uses_stamp(r->body_tmpl)) &&
        !(r->ws_message && sq_tmpl_uses_stamp(r->ws_message)))
        return sq_flag_fail(err, len, "--sink: this load stamps no event: put {{$stamp}} in %s",
                            o->ws ? "--message" : "-b (e.g. -m POST -b '{\"t\":\"{{$stamp}}\"}')");
    cfg->timeout_ns = o->timeout_ns;
    cfg->connect_timeout_ns = o->connect_timeout_ns;
    cfg->phases = !o->no_phases;
    cfg->streams = (uint32_t)o->streams;
    if ((rc = build_exec(o, o->streams, &cfg->exec, err, len)) < 0)
        return rc;
    cfg->threads = sq_flag_threads(o->threads);
    cfg->cpus = o->ncpus ? o->cpus : NULL;
    cfg->ncpus = o->ncpus;
    /* Every watched process must exist now: refused before any load, never found out after. */
    if ((rc = sq_watch_opts_build(&o->watch, &r->watch, err, len)) < 0)
        return rc;
    cfg->watch = r->watch;
    cfg->sample_per_class = (uint32_t)o->sample_responses;
    redact_setup(r, o);
    /* --http3: the environment's HTTP(S)_PROXY cannot carry QUIC, so it is not used (the CLI
     * says so: r->h3_proxy_env); --proxy was refused with the flags */
    struct sq_netopts nopts = o->net;
    if (o->http3 && nopts.proxy_env && !nopts.proxy) {
        const char *from = NULL;
        if (sq_proxy_from_env(r->url.scheme, r->url.host, r->url.port, &from))
            r->h3_proxy_env = from;
        nopts.proxy_env = false;
    }
    /* ALPN h2 is required: a server that does not pick it fails the handshake. */
    rc = sq_net_setup(&r->net, &nopts, &r->url, o->http2 ? "h2" : NULL, cfg, err, len);
    if (rc < 0)
        return rc;
#ifdef SQ_HAVE_H3
    if (o->http3) {
        if (strcmp(r->url.scheme, "https") != 0)
            return sq_flag_fail(err, len,
                                "--http3: HTTP/3 is over QUIC's TLS: give an https:// URL");
        char why[256];
        struct sq_quic_client_opts qo = {.insecure = o->net.tls.insecure,
                                         .cacert = o->net.tls.cacert,
                                         .host = r->url.host,
                                         .alpn = "h3",
                                         .zero_rtt = o->h3_0rtt};
        rc = sq_quic_client_new(&qo, &r->quic, why, sizeof(why));
        if (rc == -EINVAL)
            return sq_flag_fail(err, len, "%s", why);
        if (rc < 0)
            return sq_flag_fail(err, len, "quic: %s", sq_strerror(rc));
        cfg->h3 = r->quic;
    }
#endif
    /* The pool is the executor's largest VU count (a --stages ramp may exceed -c). */
    r->conns = sq_run_connections(cfg, sq_exec_max_vus(&cfg->exec));
    if (r->norigins > 1 && (rc = origins_setup(r, o, err, len)) < 0)
        return rc;
    if ((rc = sq_net_sources(&r->net, &o->net, r->conns, cfg, err, len)) < 0)
        return rc;
    if (o->script && (rc = prepare_script(r, o, headers, nheaders, err, len)) < 0)
        return rc;
    return 0;
}

int sq_quick_prepare(struct sq_quick_run *r, const struct sq_quick_opts *o, char *err, size_t len)
{
    memset(r, 0, sizeof(*r));
    r->opts = o;
    /* drawn now, not by sq_run: a script's states and a job for agents need it before the run */
    r->cfg.seed = o->seed_set ? o->seed : sq_run_new_seed();
    r->cfg.seed_set = true;
    if (o->url && sq_bus_url_is_bus(o->url))
        return prepare_bus(r, o, err, len);
    int rc = prepare_url(r, o, err, len);
    if (rc < 0)
        return rc;
    if (!o->ws && (rc = sq_net_proxy_form(&o->net, &r->url, r->px_target, sizeof(r->px_target),
                                          &r->px_auth, err, len)) < 0)
        return rc;
    struct sq_kv headers[SQ_QUICK_MAX_HEADERS + 1];
    size_t nheaders = 0;
    /* a WebSocket run sends messages, not requests: its upgrade is prepare_ws's */
    rc = o->ws ? prepare_ws(r, o, err, len) : prepare_request(r, o, headers, &nheaders, err, len);
    if (rc < 0)
        return rc;
    return configure(r, o, headers, nheaders, err, len);
}

void sq_quick_run_dispose(struct sq_quick_run *r)
{
    if (r->px_auth)
        explicit_bzero(r->px_auth, strlen(r->px_auth));
    free(r->px_auth);
    r->px_auth = NULL;
    sq_bus_config_dispose(&r->bus);
    sq_bus_url_dispose(&r->bus_url);
    free(r->payload);
    r->payload = NULL;
    for (size_t i = 0; r->urls && i < r->nurls; i++) {
        free(r->urls[i].req);
        free(r->urls[i].body);
        sq_h2_req_dispose(&r->urls[i].h2);
    }
    free(r->urls);
    free(r->run_urls);
    r->urls = NULL;
    r->run_urls = NULL;
    r->nurls = 0;
    sq_urllist_dispose(&r->list);
    sq_h2_req_dispose(&r->h2req);
    sq_tmpl_free(r->ws_message);
    r->ws_message = NULL;
    sq_tmpl_free(r->body_tmpl);
    r->body_tmpl = NULL;
    sq_buf_dispose(&r->ws_headers);
    free(r->req);
    free(r->body);
    r->req = r->body = NULL;
    sq_url_dispose(&r->url);
    sq_net_dispose(&r->net);
#ifdef SQ_HAVE_H3
    sq_quic_client_free(r->quic);
    r->quic = NULL;
#endif
    for (uint32_t k = 1; r->onets && k < r->norigins; k++)
        sq_net_dispose(&r->onets[k]);
    free(r->onets);
    free(r->origins);
    free(r->ofirst);
    r->onets = NULL;
    r->origins = NULL;
    r->ofirst = NULL;
    r->norigins = 0;
    sq_watch_free(r->watch);
    r->watch = NULL;
    sq_wrk_script_close(&r->wrk);
}

const char *sq_quick_protocol(const struct sq_quick_run *r)
{
    if (r->is_bus)
        return sq_bus_kind_name(r->bus.kind);
    if (r->opts->ws)
        return "websocket";
    if (!r->opts->http2)
        return "http/1.1";
    if (r->opts->http3)
        return "h3";
    return r->net.tls ? "h2" : "h2c";
}
