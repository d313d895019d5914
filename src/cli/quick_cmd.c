/* cli/quick_cmd.c - the quick face: `squall URL [flags]`, a wrk/oha-style one-liner. The flags and
 * the run's set-up are face/quick.h (shared with the daemon); here: the help, printing what the
 * engine refused, signals, the progress line, the --out files and the end-of-run outputs. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/sinkrun.h"
#include "cli/dist.h"
#include "base/b64.h"
#include "cli/wrk.h"
#include "face/flags.h"
#include "face/quick.h"
#include "face/report.h"
#include "engine/run.h"
#include "output/json.h"
#include "output/ndjson.h"
#include "output/progress.h"

#define FACE "squall"

/* Everything the run's tick feeds, on the main thread. */
struct ticker {
    struct sq_progress progress;
    bool show;
    struct sq_cli_series out; /* --out files */
};

static void on_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                    const struct sq_hist *hu)
{
    SQ_UNUSED(hu);
    struct ticker *t = ud;
    if (t->show)
        sq_progress_tick(&t->progress, s);
    sq_cli_series_tick(&t->out, s, h);
}

/* --urls: each URL named in the ndjson lines ("METHOD URL"). */
static int url_labels(struct sq_ndjson *nd, const struct sq_quick_run *run)
{
    char **labels = calloc(run->nurls, sizeof(*labels));
    int rc = labels ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < run->nurls; i++)
        if (asprintf(&labels[i], "%s %s", run->urls[i].method, run->list.v[i].url) < 0) {
            labels[i] = NULL;
            rc = -ENOMEM;
        }
    if (rc == 0)
        rc = sq_ndjson_url_labels(nd, (const char *const *)labels, run->nurls);
    for (size_t i = 0; labels && i < run->nurls; i++)
        free(labels[i]);
    free(labels);
    return rc;
}

static const char usage_head[] = "usage: squall COMMAND [args] or squall URL [flags]\n"
                                 "\n";

static const char usage[] =
    "\n"
    "squall URL: a load test of one URL (http:// or https://). Closed loop by default: each\n"
    "connection is a VU that sends its next request when a response ends. Open loop with -r:\n"
    "requests start at a fixed rate whatever the server does, latency from the intended send.\n"
    "WebSocket with ws:// and wss:// URLs (below). squall nats://HOST[:PORT]/SUBJECT and\n"
    "squall mqtt://HOST[:PORT]/TOPIC publish load on NATS and MQTT (below; docs/quick.md).\n"
    "\n"
    "  -c, --connections N     connections (VUs), opened before the start and split across\n"
    "                          threads (default 64)\n"
    "  -d, --duration D        run length: 500ms, 10s, 2m, 1m30s (default 10s)\n"
    "  -n, --requests N        send N requests in all (shared iterations); with -d, the\n"
    "                          longest the run may take (default 10m)\n"
    "  -r, --rate N            open loop: N requests per second whatever the server does\n"
    "                          (latency from each request's intended send time)\n"
    "      --max-in-flight N   open loop: requests in flight plus waiting for a connection;\n"
    "                          past it an arrival is dropped and counted (default: -c)\n"
    "      --max-vus N         open loop: when every connection is busy, open more, up to N\n"
    "                          in all (k6's maxVUs; HTTP/1.1; default: -c, a fixed pool)\n"
    "      --pacing-precision P open loop: high (poll before each arrival: on time, a busy\n"
    "                          core), normal (the default: sleep, poll only a learnt short\n"
    "                          tail; arrivals tens of µs late), off (sleep only) or\n"
    "                          coarse (release arrivals in batches every 5 ms: one\n"
    "                          wake-up per batch; latency from each batch's release),\n"
    "                          coarse:D (batches every D, 1ms..100ms)\n"
    "      --stages S          ramp: \"10s:100,30s:100,10s:0\" as VUs (connections), or as\n"
    "                          rates with -r (-r is then the starting rate)\n"
    "      --pacing D          closed loop: each connection starts a request at most every D\n"
    "      --graceful-stop D   let requests in flight at the end finish for up to D (default 0)\n"
    "  -t, --threads N         worker threads (default: online CPUs, at most -c)\n"
    "  -m, --method M          request method (default GET; get, post... are upper-cased)\n"
    "  -H, --header 'K: V'     add a request header (repeatable)\n"
    "  -b, --body S|@FILE      request body: a string, or the contents of FILE\n"
    "  -s, --script FILE       a Lua script with wrk's API (docs/wrk.md); the arguments after\n"
    "                          the URL go to its init(args)\n"
    "      --urls FILE         several URLs instead of one: a line each, [METHOD] URL\n"
    "                          [BODY|@FILE], # comments; sent round-robin, one connection pool\n"
    "                          (every URL on the first one's scheme, host and port), each URL's\n"
    "                          figures reported apart\n"
    "      --timeout D         per-request timeout (default 10s)\n"
    "      --connect-timeout D per-connect timeout (default 5s; the TLS handshake gets as long)\n"
    "      --json FILE|-       write the result as JSON (- for stdout; the summary then goes\n"
    "                          to stderr)\n"
    "      --html FILE         write a self-contained HTML report (charts; opens offline)\n"
    "      --out csv=FILE      write the per-second series as CSV while the run goes\n"
    "      --out hdr=FILE      write HdrHistogram's interval log (one histogram a second)\n"
    "      --out ndjson=FILE   write one JSON line per request (from a writer thread)\n"
    "      --sample F          with --out ndjson: record this share of requests (0 < F <= 1)\n"
    "      --name NAME         the run's name in the result and the report\n"
    "      --seed N            replay the random values ({{$randomUUID}}, {{$randomInt}} in -b,\n"
    "                          --message, --payload; -s's math.random): default drawn from the\n"
    "                          OS, printed on the summary's Seed line and in the JSON\n"
    "      --percentiles LIST  the latency percentiles reported (default 50,90,95,99,99.9)\n"
    "      --http2             HTTP/2: h2c with prior knowledge for http:// (RFC 9113 3.3)\n"
    "      --streams N         with --http2: concurrent streams per connection (default 1);\n"
    "                          VUs = connections x streams, each stream slot one VU\n"
    "      --no-compression    do not send Accept-Encoding (default: gzip, deflate, br, zstd;\n"
    "                          compressed bodies are decoded and counted either way)\n"
    "      --no-phases         do not record per-phase timings (blocked, connecting,\n"
    "                          sending, waiting, receiving...)\n"
    "  -v, --verbose           print the first request and response of each status and each\n"
    "                          error kind (head and the first 1 KiB of the body)\n"
    "      --http-debug        print every exchange (with -n 20 or fewer; =force for more)\n"
    "      --sample-responses N  keep N exchanges per status class and error kind, at random\n"
    "                          (request, response head, 4 KiB of body; default 5, 0: off)\n"
    "      --no-redact         keep credentials in the exchanges shown and kept (-v,\n"
    "                          --http-debug, --sample-responses) and in the result's command\n"
    "                          line (default: Authorization, Cookie... and their values redacted)\n"
    "      --watch PID         sample that process and its children each second from /proc\n"
    "                          (CPU, RSS, threads, open files, context switches): the summary\n"
    "                          adds the server's CPU per 1k requests (repeatable)\n"
    "      --watch-name NAME   the same for every process named NAME (repeatable)\n"
    "\n"
    "  WebSocket (ws:// and wss:// URLs): each VU opens one connection with an HTTP/1.1\n"
    "  upgrade; a request is one message, complete when the next whole message comes back\n"
    "      --message S|@FILE   the message each request sends: a template ({{$vu}},\n"
    "                          {{$iteration}}, {{$randomUUID}}...), or FILE's bytes as they are\n"
    "      --binary            send binary messages (default: text)\n"
    "      --ws-ping D         ping every open connection every D (at least 100ms; the pongs'\n"
    "                          round trip is in the result)\n"
    "      --ws-subprotocol P  offer Sec-WebSocket-Protocol P (a list: a, b)\n"
    "                          (-H headers go on the upgrade request)\n"
    "  -q, --quiet             no progress line and no summary on the terminal\n"
    "  -h, --help              this help\n"
    "  -V, --version           print the version\n"
    "\n"
    "nats:// and mqtt:// URLs (one connection unless -c; VUs = connections x window):\n"
    "      --payload S|@FILE   the message (templates; default {{$stamp}})\n"
    "      --window N          messages out per connection (default 1,000 for NATS core and\n"
    "                          MQTT QoS 0, else 1)\n"
    "      --jetstream         NATS: wait for each PubAck (latency = ack)\n"
    "      --request           NATS: request/reply (latency = reply)\n"
    "      --qos N             MQTT: QoS 0, 1 or 2 (latency = PINGRESP, PUBACK, PUBCOMP)\n"
    "      --round-trip        MQTT: subscribe to the topic; latency = publish to delivery\n"
    "      --mqtt-version V    MQTT: 3 (3.1.1, default) or 5\n"
    "      --retain            MQTT: publish retained\n"
    "      --keepalive D       MQTT: keep-alive (default 60s)\n"
    "      --client-id S       MQTT: client id prefix (the connection number is added)\n"
    "      --sink URL          count the stamped events where they arrive, in this process:\n"
    "                          http://HOST:PORT to listen on, nats://.../SUBJECT or\n"
    "                          mqtt://.../TOPIC to subscribe to (repeatable, one of each)\n"
    "      --sink-stamp WHERE  where the sink finds the stamp (squall sink --stamp)\n"
    "      --sink-settle D     how long the sink waits for stragglers (default 2s)\n";

void sq_cli_usage(FILE *f)
{
    fputs(usage_head, f);
    fputs("commands:\n", f);
    sq_cli_commands(f);
    fputs(usage, f);
    fputs(sq_netopts_usage, f);
    fputs(sq_distopts_usage, f);
    fputs("\nSIGINT (Ctrl-C) or SIGTERM stops a run gracefully and still writes every output; a\n"
          "second signal 1 s or more later stops it at once (the outputs still written).\n\n",
          f);
    sq_cli_exit_codes(f);
}

/* What the agents run: this face's arguments, and the body when it came from a file (the file
 * need not exist on the agents). */
static json_t *quick_job(int argc, char **argv, const struct sq_quick_opts *o,
                         const struct sq_quick_run *r)
{
    json_t *args = sq_cli_dist_args(argc, argv, 1, r->cfg.seed);
    json_t *job = args ? json_pack("{s:s, s:o}", "face", "quick", "args", args) : NULL;
    if (job && o->body_arg && o->body_arg[0] == '@' && !o->body_literal) {
        char *b64 = malloc(sq_b64_encoded_len(r->body_len));
        if (!b64) {
            json_decref(job);
            return NULL;
        }
        sq_b64_encode(r->body, r->body_len, b64);
        json_object_set_new(job, "body_file_b64", json_string(b64));
        free(b64);
    }
    return job;
}

int sq_cli_quick(int argc, char **argv)
{
    char err[SQ_PREP_ERRLEN];
    struct sq_quick_opts o;
    sq_quick_opts_init(&o);
    /* the command line as typed, for the result ("run.command"): getopt reorders argv */
    char **typed = sq_cli_argv_copy(argc, argv);
    int rc = sq_quick_parse_argv(&o, argc, argv, err, sizeof(err));
    if (rc == SQ_QUICK_HELP)
        sq_cli_usage(stdout);
    else if (rc == SQ_QUICK_VERSION)
        printf("squall %s\n", SQ_VERSION);
    if (rc != 0) {
        free(typed);
        sq_quick_opts_dispose(&o);
        return rc > 0 ? SQ_EXIT_OK : sq_cli_prep_error(FACE, rc, err);
    }

    int exit_code = SQ_EXIT_FAIL;
    struct sq_quick_run run;
    struct sq_result res = {0};
    struct sq_cli_outputs outs = {
        .face = FACE, .json_path = o.json_path, .html_path = o.html_path, .quiet = o.quiet};
    struct ticker tk = {0};
    struct sq_cluster_report rep = {0};
    struct sq_cli_dist dist = {0};
    json_t *job = NULL;
    struct sq_cli_capture cap = {0};
    const char *why = NULL;

    rc = sq_quick_prepare(&run, &o, err, sizeof(err));
    if (rc == 0 && !o.dist.agents) /* on agents, each raises its own */
        rc = sq_net_raise_nofile(run.conns, "connections", err, sizeof(err));
    if (rc < 0) {
        exit_code = sq_cli_prep_error(FACE, rc, err);
        goto out;
    }
    struct sq_run_config *cfg = &run.cfg;

    if ((rc = sq_cli_outputs_open(&outs)) != 0) {
        exit_code = rc;
        goto out;
    }
    sq_cli_progress_init(&tk.progress, sq_exec_is_open(&cfg->exec),
                         cfg->exec.kind == SQ_EXEC_SHARED_ITERATIONS
                             ? 0
                             : (double)sq_exec_length_ns(&cfg->exec) / 1e9);
    tk.show = !o.quiet;
    if ((rc = sq_cli_series_open(&tk.out, FACE, o.csv_path, o.hdr_path, o.ndjson_path, o.sample,
                                 cfg)) != 0) {
        exit_code = rc;
        goto out;
    }
    if (tk.out.nd.f && run.nurls && url_labels(&tk.out.nd, &run) < 0) {
        fprintf(stderr, "squall: out of memory\n");
        goto out;
    }
    cfg->on_tick = on_tick;
    cfg->tick_ud = &tk;
    if (o.verbose || o.http_debug) {
        if (sq_cli_capture_init(&cap, o.http_debug ? SQ_CAPTURE_EVERY : SQ_CAPTURE_FIRST_OF_KIND) <
            0)
            goto out;
        cfg->capture = &cap.cfg;
    }

    struct sq_sink *sink = NULL;
    if (o.nsinks) {
        struct sq_sink_beside_opts so = {.nurls = o.nsinks,
                                         .stamp = o.sink_stamp,
                                         .settle_ns = o.sink_settle_ns,
                                         .mqtt_qos = -1};
        memcpy(so.urls, o.sinks, o.nsinks * sizeof(so.urls[0]));
        cfg->run_id = sq_run_new_id();
        if ((rc = sq_cli_sink_begin(FACE, &so, cfg->run_id, &sink)) != 0) {
            exit_code = rc;
            goto out;
        }
    }
    cfg->stop = sq_cli_signals_begin();
    if (o.dist.agents) {
        /* The same run on agents: they get the arguments (and a -b @FILE's bytes). */
        job = quick_job(argc, argv, &o, &run);
        struct sq_cli_dist x = {.face = FACE,
                                .d = &o.dist,
                                .job = job,
                                .open = sq_exec_is_open(&cfg->exec),
                                .length_ns =
                                    sq_exec_length_ns(&cfg->exec) + cfg->exec.graceful_stop_ns,
                                .on_tick = on_tick,
                                .tick_ud = &tk,
                                .stop = cfg->stop,
                                .progress = tk.show ? &tk.progress : NULL};
        dist = x;
        rc = job ? sq_cli_dist_run(&dist, &res, &rep) : SQ_EXIT_FAIL;
        res.seed = cfg->seed; /* the agents' seed: the job carried it */
        if (!job)
            fprintf(stderr, "squall: out of memory\n");
        if (rc) {
            sq_cli_signals_end();
            sq_cli_sink_end(sink, &res, NULL, cfg->stop, NULL, 0);
            exit_code = rc;
            goto out;
        }
    } else {
        rc = sq_run(cfg, &res, &why);
    }
    bool forced;
    int sig = sq_cli_signal_seen(&forced);
    sq_progress_finish(&tk.progress);
    sq_cli_series_report(&tk.out, &res);
    if (rc < 0) {
        sq_cli_signals_end();
        fprintf(stderr, "squall: %s: %s\n", why, sq_strerror(rc));
        sq_cli_sink_end(sink, &res, NULL, cfg->stop, NULL, 0);
        goto out;
    }
    sq_cli_series_close(&tk.out, true);
    if (sig)
        sq_cli_signal_mark(&res, sig, forced);
    if (cfg->capture)
        sq_cli_capture_print(&cap, stderr);

    /* One document feeds every output, so they cannot disagree. */
    json_t *doc = sq_quick_doc(&run, &res);
    char sink_why[512] = ""; /* its block, and its line first */
    bool sink_failed = sq_cli_sink_end(sink, &res, doc, cfg->stop, sink_why, sizeof(sink_why));
    if (!sig && sink) /* a signal while the sink waited for the last events */
        sig = sq_cli_signal_seen(&forced);
    sq_cli_signals_end();
    if (!doc || (o.dist.agents && sq_cli_dist_doc(doc, &rep) < 0)) {
        json_decref(doc);
        fprintf(stderr, "squall: out of memory building the result\n");
        goto out;
    }
    if (typed)
        sq_report_set_command(doc, argc, typed, !o.no_redact);
    if (sig)
        sq_cli_signal_doc(doc, sig, forced);
    if (o.script)
        json_object_set_new(doc, "script", sq_cli_script_json(o.script, run.wrk.hooks, &res));
    bool written = sq_cli_render(&outs, doc) == 0;
    json_decref(doc);
    if (res.script_error) {
        fprintf(stderr, "squall: the run stopped on a script error: %s\n", res.script_error);
        goto out;
    }
    if (o.script && sq_wrk_script_done(&run.wrk, &res, err, sizeof(err)) < 0) {
        fflush(stdout);
        fprintf(stderr, "squall: done(): %s\n", err);
        goto out;
    }
    fflush(stdout);
    exit_code = sq_cli_run_status(&res, sig, cfg->timeout_ns);
    if (!sig && sink_failed) { /* the sink counted nothing that crossed its broker */
        fprintf(stderr, "squall: --sink: %s\n", sink_why);
        exit_code = SQ_EXIT_FAIL;
    }
    if (o.dist.agents)
        exit_code = sq_cli_dist_status(&dist, &rep, exit_code);
    if (!written && exit_code == SQ_EXIT_OK)
        exit_code = SQ_EXIT_FAIL;
out:
    sq_cli_signals_end();
    sq_cli_series_close(&tk.out, false); /* what was not committed above: nothing measured */
    sq_cli_capture_dispose(&cap);
    sq_result_dispose(&res);
    sq_cluster_report_dispose(&rep);
    json_decref(job);
    sq_quick_run_dispose(&run);
    sq_quick_opts_dispose(&o);
    free(typed);
    return exit_code;
}
