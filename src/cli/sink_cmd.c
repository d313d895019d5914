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
#include <time.h>

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/inbox_cmd.h"
#include "face/flags.h"
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
};

struct ticker {
    bool show;
};

static void on_tick(void *ud, const struct sq_sink_second *s)
{
    struct ticker *t = ud;
    if (!t->show)
        return;
    char g1[32], g2[32];
    fprintf(stderr, "[%5.1fs] delivered %s/s · lost %s · dup %llu · e2e p50 %.1f ms p99 %.1f ms\n",
            s->t_s, sq_fmt_group(s->delivered, g1, sizeof(g1)),
            sq_fmt_group(s->lost, g2, sizeof(g2)), (unsigned long long)s->duplicates,
            (double)s->p50_us / 1000, (double)s->p99_us / 1000);
}

static int dur(const char *flag, const char *arg, int64_t *out)
{
    if (sq_parse_duration(arg, SQ_NS_PER_S, out) < 0 || *out < 0)
        return sq_cli_usage_error(FACE, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)", flag,
                                  arg);
    return 0;
}

int sq_cli_sink(int argc, char **argv)
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
    struct sq_sink_config cfg = {.mqtt_qos = -1};
    int64_t duration = 0, idle = 0;
    uint64_t count = 0, u;
    const char *json_path = NULL, *html_path = NULL;
    bool quiet = false;
    opterr = 0;
    optind = 1;
    int opt, li = -1, rc;
    while ((opt = getopt_long(argc, argv, ":t:d:qh", longs, &li)) != -1) {
        char name[48];
        const char *flag = sq_flag_name(longs, &li, opt, argv, name, sizeof(name));
        switch (opt) {
        case OPT_HTTP:
            cfg.http = optarg;
            break;
        case OPT_NATS:
            cfg.nats = optarg;
            break;
        case OPT_QUEUE:
            cfg.nats_queue = optarg;
            break;
        case OPT_STREAM:
            cfg.nats_stream = optarg;
            break;
        case OPT_DURABLE:
            cfg.nats_durable = optarg;
            break;
        case OPT_MQTT:
            cfg.mqtt = optarg;
            break;
        case OPT_QOS:
            if (sq_parse_u64(optarg, 0, 2, 1, &u) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a QoS (0, 1 or 2)", flag, optarg);
            cfg.mqtt_qos = (int)u;
            break;
        case OPT_MQTT_VERSION:
            if (strcmp(optarg, "3") != 0 && strcmp(optarg, "5") != 0 &&
                strcmp(optarg, "3.1.1") != 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not 3 (3.1.1) or 5", flag, optarg);
            cfg.mqtt_version = optarg[0] == '5' ? 5 : 3;
            break;
        case 't':
            if (sq_parse_u64(optarg, 1, 64, 1, &u) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a thread count (1..64)", flag,
                                          optarg);
            cfg.http_threads = (int)u;
            break;
        case OPT_STATUS:
            if (sq_parse_u64(optarg, 200, 599, 1, &u) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a final status (200..599)", flag,
                                          optarg);
            cfg.http_status = (int)u;
            break;
        case OPT_STAMP:
            cfg.find = optarg;
            break;
        case OPT_SETTLE:
            if ((rc = dur(flag, optarg, &cfg.settle_ns)) != 0)
                return rc;
            break;
        case OPT_LIST_LOST:
            if (sq_parse_u64(optarg, 0, 100000, 1, &u) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a count (0..100000)", flag,
                                          optarg);
            cfg.list_lost = (uint32_t)u;
            if (!u)
                cfg.list_lost = 1; /* 0 would mean the default; one entry is the least shown */
            break;
        case OPT_MAX_MEMORY:
            if (!sq_cli_parse_size(optarg, SQ_SINK_MAX_MAX_MEMORY, &u) ||
                u < SQ_SINK_MIN_MAX_MEMORY)
                return sq_cli_usage_error(
                    FACE, "%s: '%s' is not a size (1MiB..1024GiB, e.g. 256MiB)", flag, optarg);
            cfg.max_memory = u;
            break;
        case 'd':
            if ((rc = dur(flag, optarg, &duration)) != 0)
                return rc;
            if (!duration)
                return sq_cli_usage_error(FACE, "%s: '%s': must be more than 0", flag, optarg);
            break;
        case OPT_COUNT:
            if (sq_parse_u64(optarg, 1, UINT64_MAX / 2, 1, &count) < 0)
                return sq_cli_usage_error(FACE, "%s: '%s' is not a count (1 or more)", flag,
                                          optarg);
            break;
        case OPT_IDLE:
            if ((rc = dur(flag, optarg, &idle)) != 0)
                return rc;
            break;
        case OPT_JSON:
            json_path = optarg;
            break;
        case OPT_HTML:
            html_path = optarg;
            break;
        case 'q':
            quiet = true;
            break;
        case 'h':
            fputs(usage, stdout);
            return SQ_EXIT_OK;
        default: {
            char msg[256];
            sq_flag_refused(longs, opt, flag, msg, sizeof(msg));
            return sq_cli_usage_error(FACE, "%s", msg);
        }
        }
    }
    if (optind < argc)
        return sq_cli_usage_error(FACE,
                                  "unexpected '%s' (sources are flags: --http, --nats, "
                                  "--mqtt)",
                                  argv[optind]);
    if (cfg.mqtt_qos >= 0 && !cfg.mqtt)
        return sq_cli_usage_error(FACE, "--qos applies to --mqtt");
    if (cfg.mqtt_version && !cfg.mqtt)
        return sq_cli_usage_error(FACE, "--mqtt-version applies to --mqtt");
    if ((cfg.http_threads || cfg.http_status) && !cfg.http)
        return sq_cli_usage_error(FACE, "%s applies to --http",
                                  cfg.http_threads ? "--threads" : "--status");
    char err[512] = "";
    rc = sq_sink_check(&cfg, err, sizeof(err));
    if (rc < 0)
        return sq_cli_usage_error(FACE, "%s", err);

    struct sq_cli_outputs outs = {
        .face = FACE, .json_path = json_path, .html_path = html_path, .quiet = quiet};
    if ((rc = sq_cli_outputs_open(&outs)) != 0)
        return rc;
    struct ticker tk = {.show = !quiet};
    cfg.on_tick = on_tick;
    cfg.tick_ud = &tk;
    struct sq_sink *s = NULL;
    rc = sq_sink_start(&cfg, &s, err, sizeof(err));
    if (rc < 0) {
        if (rc == -SQ_EUSAGE)
            return sq_cli_usage_error(FACE, "%s", err);
        sq_cli_error(FACE, "%s", err);
        return SQ_EXIT_FAIL;
    }
    volatile int *stop = sq_cli_signals_begin();
    int64_t begin = sq_now_ns();
    /* Ready once every broker source is subscribed (or after 5 s, with a note). */
    struct sq_sink_totals t;
    for (;;) {
        sq_sink_totals(s, &t);
        if (t.connected || *stop || sq_now_ns() - begin > 5 * SQ_NS_PER_S)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 5 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    if (cfg.http) {
        const char *colon = strrchr(cfg.http, ':');
        fprintf(stderr, "squall sink: listening on http://%.*s:%u", (int)(colon - cfg.http),
                cfg.http, sq_sink_http_port(s));
    } else {
        fprintf(stderr, "squall sink: ready");
    }
    if (cfg.nats)
        fprintf(stderr, " · %s%s", cfg.nats, t.connected ? "" : " (not subscribed yet)");
    if (cfg.mqtt)
        fprintf(stderr, " · %s%s", cfg.mqtt, t.connected ? "" : " (not subscribed yet)");
    fputc('\n', stderr);
    fflush(stderr);
    while (!*stop) {
        int64_t now = sq_now_ns();
        sq_sink_totals(s, &t);
        if (duration && now - begin >= duration)
            break;
        if (count && t.delivered >= count)
            break;
        if (idle && t.last_arrival_ns && now - t.last_arrival_ns >= idle)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    sq_cli_signals_end();
    sq_sink_stop(s);
    json_t *block = sq_sink_json(s);
    json_t *doc = block ? sq_report_sink_doc(block, (double)(sq_now_ns() - begin) / 1e9) : NULL;
    int exit_code = SQ_EXIT_FAIL;
    if (!doc) {
        sq_cli_error(FACE, "out of memory building the result");
    } else {
        sq_cli_render(&outs, doc);
        sq_sink_totals(s, &t);
        exit_code = t.delivered ? SQ_EXIT_OK : SQ_EXIT_FAIL;
        if (!t.delivered)
            fprintf(stderr, "squall sink: nothing was delivered\n");
        char why[512];
        if (sq_sink_unsubscribed(s, why, sizeof(why))) /* the reason, when it is a broker's */
            fprintf(stderr, "squall sink: %s\n", why);
        json_decref(doc);
    }
    sq_sink_free(s);
    return exit_code;
}
