/* cli/sink_cmd.c - `squall sink`: count what arrives at the far end of a pipeline (sink/sink.h).
 *
 * The sink runs until Ctrl-C, or -d elapses, or --count events were delivered, or nothing
 * arrived for --idle after the first event; then it writes its result (the summary, --json,
 * --html) and exits 0, or 1 when nothing at all was delivered. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/inbox_cmd.h"
#include "face/flags.h"
#include "net/tls.h"
#include "output/fmt.h"
#include "output/json.h"
#include "sink/sink.h"

#define FACE "squall sink"

static const char usage[] =
    "usage: squall sink SOURCE... [flags]\n"
    "  Counts stamped events ({{$stamp}}) where they arrive: delivered, lost, duplicated, out\n"
    "  of order, and their end-to-end latency from the stamp's send time.\n"
    "\n"
    "sources (one or more):\n"
    "      --http HOST:PORT    accept events as HTTP requests (any method and path; answered\n"
    "                          202); port 0 picks a free one\n"
    "      --nats URL          nats://HOST[:PORT]/SUBJECT (wildcards allowed): a subscription\n"
    "      --queue NAME        with --nats: subscribe in a queue group\n"
    "      --stream S --durable D  with --nats: a JetStream durable push consumer on stream S\n"
    "                          (created if missing; explicit acks; new messages)\n"
    "      --mqtt URL          mqtt://HOST[:PORT]/FILTER: a subscription\n"
    "      --qos N             with --mqtt: the subscription's QoS (default 1)\n"
    "      --mqtt-version V    with --mqtt: 3 (3.1.1, the default) or 5\n"
    "  mqtt+ws://HOST[:PORT][/PATH]?topic=FILTER (--mqtt) subscribes over WebSocket;\n"
    "  tls://HOST[:PORT]/SUBJECT (--nats), mqtts://HOST[:PORT]/FILTER (--mqtt, port 8883) and\n"
    "  mqtt+wss:// subscribe over TLS:\n"
    "  -k, --insecure          do not verify the broker's certificate\n"
    "      --cacert FILE       trust the CAs in this PEM file (default: the system's)\n"
    "      --cert FILE         client certificate (PEM), with --key\n"
    "      --key FILE          private key of --cert (PEM)\n"
    "\n"
    "  -t, --threads N         HTTP worker threads (default 1)\n"
    "      --status N          the HTTP answer (default 202)\n"
    "      --stamp WHERE       where the stamp is: scan (the first in the body, else a header;\n"
    "                          default), all (every stamp of a batch body), header:NAME,\n"
    "                          json:PATH ($.event.id), regex:RE (its first group)\n"
    "      --settle D          a gap counts as lost once it is this old (default 2s)\n"
    "      --list-lost N       list the first N lost sequence numbers (default 20)\n"
    "      --max-memory SIZE   what the count of sequence numbers may take: 16MiB, 1GiB\n"
    "                          (default 64MiB, ~537 million events); a stamp past it is\n"
    "                          counted over_cap, not tracked\n"
    "  -d, --duration D        stop after D (default: run until Ctrl-C)\n"
    "      --count N           stop once N events were delivered\n"
    "      --idle D            stop once nothing arrived for D (after the first event)\n"
    "      --json FILE|-       write the result as JSON (- for stdout)\n"
    "      --html FILE         write an HTML report\n"
    "  -q, --quiet             no progress and no summary\n"
    "  -h, --help              this help\n"
    "\n"
    "exit status: 0 the sink ran, 1 nothing was delivered, 2 bad flags\n";

enum {
    OPT_HTTP = 256,
    OPT_NATS,
    OPT_QUEUE,
    OPT_STREAM,
    OPT_DURABLE,
    OPT_MQTT,
    OPT_QOS,
    OPT_MQTT_VERSION,
    OPT_STATUS,
    OPT_STAMP,
    OPT_SETTLE,
    OPT_LIST_LOST,
    OPT_MAX_MEMORY,
    OPT_COUNT,
    OPT_IDLE,
    OPT_JSON,
    OPT_HTML,
    OPT_CACERT,
    OPT_CERT,
    OPT_KEY,
};

/* ---- the flags ---- */

/* What the phases of one `squall sink` share. */
struct sinkcmd {
    struct sq_sink_config cfg;
    struct sq_tls_client_opts tls; /* -k, --cacert, --cert, --key: a broker over TLS */
    int64_t duration, idle;        /* -d, --idle: when to stop (0: not asked) */
    uint64_t count;                /* --count */
    const char *json_path, *html_path;
    bool quiet;
    struct sq_cli_outputs outs;
    struct sq_sink *s;
    int64_t begin; /* when the sink started (CLOCK_MONOTONIC) */
};

static int dur(const char *flag, const char *arg, int64_t *out)
{
    if (sq_parse_duration(arg, SQ_NS_PER_S, out) < 0 || *out < 0)
        return sq_cli_usage_error(FACE, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)", flag,
                                  arg);
    return 0;
}

#define NOT_MINE (-2) /* a flag the sources' parser leaves to the other one */

/* A flag of the sources: --http, --nats, --mqtt and what goes with each. Returns 0, NOT_MINE, or
 * the exit status after printing why. */
static int take_source(struct sq_sink_config *cfg, int opt, const char *flag, const char *arg)
{
    uint64_t u;
    switch (opt) {
    case OPT_HTTP:
        cfg->http = arg;
        return 0;
    case OPT_NATS:
        cfg->nats = arg;
        return 0;
    case OPT_QUEUE:
        cfg->nats_queue = arg;
        return 0;
    case OPT_STREAM:
        cfg->nats_stream = arg;
        return 0;
    case OPT_DURABLE:
        cfg->nats_durable = arg;
        return 0;
    case OPT_MQTT:
        cfg->mqtt = arg;
        return 0;
    case OPT_QOS:
        if (sq_parse_u64(arg, 0, 2, 1, &u) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a QoS (0, 1 or 2)", flag, arg);
        cfg->mqtt_qos = (int)u;
        return 0;
    case OPT_MQTT_VERSION:
        if (strcmp(arg, "3") != 0 && strcmp(arg, "5") != 0 && strcmp(arg, "3.1.1") != 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not 3 (3.1.1) or 5", flag, arg);
        cfg->mqtt_version = arg[0] == '5' ? 5 : 3;
        return 0;
    case 't':
        if (sq_parse_u64(arg, 1, 64, 1, &u) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a thread count (1..64)", flag, arg);
        cfg->http_threads = (int)u;
        return 0;
    case OPT_STATUS:
        if (sq_parse_u64(arg, 200, 599, 1, &u) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a final status (200..599)", flag, arg);
        cfg->http_status = (int)u;
        return 0;
    case OPT_STAMP:
        cfg->find = arg;
        return 0;
    }
    return NOT_MINE;
}

/* A flag of the ledger, of when to stop and of what to write. Returns 0, SQ_EXIT_DONE (--help
 * answered) or the exit status after printing why. */
static int take_flag(struct sinkcmd *c, const struct option *longs, int opt, const char *flag,
                     const char *arg)
{
    uint64_t u;
    switch (opt) {
    case OPT_SETTLE:
        return dur(flag, arg, &c->cfg.settle_ns);
    case OPT_LIST_LOST:
        if (sq_parse_u64(arg, 0, 100000, 1, &u) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a count (0..100000)", flag, arg);
        /* 0 would mean the default; one entry is the least shown */
        c->cfg.list_lost = u ? (uint32_t)u : 1;
        return 0;
    case OPT_MAX_MEMORY:
        if (!sq_cli_parse_size(arg, SQ_SINK_MAX_MAX_MEMORY, &u) || u < SQ_SINK_MIN_MAX_MEMORY)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a size (1MiB..1024GiB, e.g. 256MiB)",
                                      flag, arg);
        c->cfg.max_memory = u;
        return 0;
    case 'd': {
        int rc = dur(flag, arg, &c->duration);
        if (rc == 0 && !c->duration)
            rc = sq_cli_usage_error(FACE, "%s: '%s': must be more than 0", flag, arg);
        return rc;
    }
    case OPT_COUNT:
        if (sq_parse_u64(arg, 1, UINT64_MAX / 2, 1, &c->count) < 0)
            return sq_cli_usage_error(FACE, "%s: '%s' is not a count (1 or more)", flag, arg);
        return 0;
    case OPT_IDLE:
        return dur(flag, arg, &c->idle);
    case OPT_JSON:
        c->json_path = arg;
        return 0;
    case OPT_HTML:
        c->html_path = arg;
        return 0;
    case 'q':
        c->quiet = true;
        return 0;
    case 'h':
        fputs(usage, stdout);
        return SQ_EXIT_DONE;
    }
    return sq_cli_flag_refused(FACE, longs, opt, flag);
}

/* One flag getopt_long returned: a source's, else the others'. */
static int take(void *ud, const struct option *longs, int opt, const char *flag)
{
    struct sinkcmd *c = ud;
    switch (opt) { /* a broker over TLS */
    case 'k':
        return (c->tls.insecure = true, 0);
    case OPT_CACERT:
        return (c->tls.cacert = optarg, 0);
    case OPT_CERT:
        return (c->tls.cert = optarg, 0);
    case OPT_KEY:
        return (c->tls.key = optarg, 0);
    default:
        break;
    }
    int rc = take_source(&c->cfg, opt, flag, optarg);
    return rc == NOT_MINE ? take_flag(c, longs, opt, flag, optarg) : rc;
}

/* The flags, their combinations, and the sink's own check of its config. Returns 0,
 * SQ_EXIT_DONE or the exit status after printing why. */
static int sink_parse(struct sinkcmd *c, int argc, char **argv)
{
    static const struct option longs[] = {
        {"http", required_argument, NULL, OPT_HTTP},
        {"nats", required_argument, NULL, OPT_NATS},
        {"queue", required_argument, NULL, OPT_QUEUE},
        {"stream", required_argument, NULL, OPT_STREAM},
        {"durable", required_argument, NULL, OPT_DURABLE},
        {"mqtt", required_argument, NULL, OPT_MQTT},
        {"qos", required_argument, NULL, OPT_QOS},
        {"mqtt-version", required_argument, NULL, OPT_MQTT_VERSION},
        {"insecure", no_argument, NULL, 'k'},
        {"cacert", required_argument, NULL, OPT_CACERT},
        {"cert", required_argument, NULL, OPT_CERT},
        {"key", required_argument, NULL, OPT_KEY},
        {"threads", required_argument, NULL, 't'},
        {"status", required_argument, NULL, OPT_STATUS},
        {"stamp", required_argument, NULL, OPT_STAMP},
        {"settle", required_argument, NULL, OPT_SETTLE},
        {"list-lost", required_argument, NULL, OPT_LIST_LOST},
        {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
        {"duration", required_argument, NULL, 'd'},
        {"count", required_argument, NULL, OPT_COUNT},
        {"idle", required_argument, NULL, OPT_IDLE},
        {"json", required_argument, NULL, OPT_JSON},
        {"html", required_argument, NULL, OPT_HTML},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    c->cfg.tls = &c->tls;
    int rc = sq_cli_getopt(argc, argv, ":t:d:qhk", longs, take, c);
    if (rc)
        return rc;
    if (optind < argc)
        return sq_cli_usage_error(FACE,
                                  "unexpected '%s' (sources are flags: --http, --nats, "
                                  "--mqtt)",
                                  argv[optind]);
    const struct sq_sink_config *cfg = &c->cfg;
    if (cfg->mqtt_qos >= 0 && !cfg->mqtt)
        return sq_cli_usage_error(FACE, "--qos applies to --mqtt");
    if (cfg->mqtt_version && !cfg->mqtt)
        return sq_cli_usage_error(FACE, "--mqtt-version applies to --mqtt");
    bool tls = (cfg->nats && strncasecmp(cfg->nats, "tls://", 6) == 0) ||
               (cfg->mqtt && (strncasecmp(cfg->mqtt, "mqtts://", 8) == 0 ||
                              strncasecmp(cfg->mqtt, "mqtt+wss://", 11) == 0));
    if (!tls && (c->tls.insecure || c->tls.cacert || c->tls.cert || c->tls.key))
        return sq_cli_usage_error(FACE, "-k, --cacert, --cert and --key are for a broker over "
                                        "TLS: --nats tls://... or --mqtt mqtts://...");
    if (!c->tls.cert != !c->tls.key)
        return sq_cli_usage_error(FACE, "--cert and --key go together");
    if ((cfg->http_threads || cfg->http_status) && !cfg->http)
        return sq_cli_usage_error(FACE, "%s applies to --http",
                                  cfg->http_threads ? "--threads" : "--status");
    char err[512] = "";
    if (sq_sink_check(cfg, err, sizeof(err)) < 0)
        return sq_cli_usage_error(FACE, "%s", err);
    return 0;
}

/* ---- the command: parse -> prepare -> run -> render ---- */

static void on_tick(void *ud, const struct sq_sink_second *s)
{
    const struct sinkcmd *c = ud;
    if (c->quiet)
        return;
    char g1[32], g2[32];
    fprintf(stderr, "[%5.1fs] delivered %s/s · lost %s · dup %llu · e2e p50 %.1f ms p99 %.1f ms\n",
            s->t_s, sq_fmt_group(s->delivered, g1, sizeof(g1)),
            sq_fmt_group(s->lost, g2, sizeof(g2)), (unsigned long long)s->duplicates,
            (double)s->p50_us / 1000, (double)s->p99_us / 1000);
}

/* The output files checked, the sources started. Returns 0 or the exit status. */
static int sink_prepare(struct sinkcmd *c)
{
    c->outs = (struct sq_cli_outputs){
        .face = FACE, .json_path = c->json_path, .html_path = c->html_path, .quiet = c->quiet};
    int rc = sq_cli_outputs_open(&c->outs);
    if (rc != 0)
        return rc;
    c->cfg.on_tick = on_tick;
    c->cfg.tick_ud = c;
    char err[512] = "";
    rc = sq_sink_start(&c->cfg, &c->s, err, sizeof(err));
    if (rc == -SQ_EUSAGE)
        return sq_cli_usage_error(FACE, "%s", err);
    if (rc < 0) {
        sq_cli_error(FACE, "%s", err);
        return SQ_EXIT_FAIL;
    }
    return 0;
}

/* Waits until every broker source is subscribed (or 5 s, or a signal), then says so on stderr:
 * the line a script waits for before it sends. */
static void sink_ready(struct sinkcmd *c, volatile int *stop)
{
    const struct sq_sink_config *cfg = &c->cfg;
    struct sq_sink_totals t;
    for (;;) {
        sq_sink_totals(c->s, &t);
        if (t.connected || *stop || sq_now_ns() - c->begin > 5 * SQ_NS_PER_S)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 5 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    if (cfg->http) {
        const char *colon = strrchr(cfg->http, ':');
        fprintf(stderr, "squall sink: listening on http://%.*s:%u", (int)(colon - cfg->http),
                cfg->http, sq_sink_http_port(c->s));
    } else {
        fprintf(stderr, "squall sink: ready");
    }
    if (cfg->nats)
        fprintf(stderr, " · %s%s", cfg->nats, t.connected ? "" : " (not subscribed yet)");
    if (cfg->mqtt)
        fprintf(stderr, " · %s%s", cfg->mqtt, t.connected ? "" : " (not subscribed yet)");
    fputc('\n', stderr);
    fflush(stderr);
}

/* Counts until a signal, -d, --count or --idle ends it. */
static void sink_run(struct sinkcmd *c)
{
    volatile int *stop = sq_cli_signals_begin();
    c->begin = sq_now_ns();
    sink_ready(c, stop);
    struct sq_sink_totals t;
    while (!*stop) {
        int64_t now = sq_now_ns();
        sq_sink_totals(c->s, &t);
        if (c->duration && now - c->begin >= c->duration)
            break;
        if (c->count && t.delivered >= c->count)
            break;
        /* --idle counts from the first event on: a sink that got nothing yet waits */
        if (c->idle && t.last_arrival_ns && now - t.last_arrival_ns >= c->idle)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    sq_cli_signals_end();
}

/* The sink stopped, its document rendered; 0 when something was delivered, else 1. */
static int sink_render(struct sinkcmd *c)
{
    sq_sink_stop(c->s);
    json_t *block = sq_sink_json(c->s);
    json_t *doc = block ? sq_report_sink_doc(block, (double)(sq_now_ns() - c->begin) / 1e9) : NULL;
    if (!doc) {
        sq_cli_error(FACE, "out of memory building the result");
        return SQ_EXIT_FAIL;
    }
    sq_cli_render(&c->outs, doc);
    struct sq_sink_totals t;
    sq_sink_totals(c->s, &t);
    if (!t.delivered)
        fprintf(stderr, "squall sink: nothing was delivered\n");
    char why[512];
    if (sq_sink_unsubscribed(c->s, why, sizeof(why))) /* the reason, when it is a broker's */
        fprintf(stderr, "squall sink: %s\n", why);
    json_decref(doc);
    return t.delivered ? SQ_EXIT_OK : SQ_EXIT_FAIL;
}

int sq_cli_sink(int argc, char **argv)
{
    struct sinkcmd c = {.cfg = {.mqtt_qos = -1}};
    int rc = sink_parse(&c, argc, argv);
    if (rc == 0)
        rc = sink_prepare(&c);
    if (rc == 0) {
        sink_run(&c);
        rc = sink_render(&c);
    }
    sq_sink_free(c.s);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
