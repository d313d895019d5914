/* cli/quick.c - the quick face: `squall URL [flags]`, a wrk/oha-style one-liner. The flags and
 * the run's set-up are engine/quick.h (shared with the daemon); here: the help, printing what the
 * engine refused, signals, the progress line, the --out files and the end-of-run outputs. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/sinkrun.h"
#include "cli/wrk.h"
#include "engine/flags.h"
#include "engine/quick.h"
#include "engine/run.h"
#include "output/json.h"
#include "output/ndjson.h"
#include "output/progress.h"
#include "output/series.h"

#define FACE "squall"

/* Everything the run's tick feeds, on the main thread. */
struct ticker {
    struct sq_progress progress;
    bool show;
    FILE *csv, *hdr;
    bool hdr_failed;
};

static void on_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                    const struct sq_hist *hu)
{
    SQ_UNUSED(hu);
    struct ticker *t = ud;
    if (t->show)
        sq_progress_tick(&t->progress, s);
    if (t->csv)
        sq_csv_row(t->csv, s);
    if (t->hdr && !t->hdr_failed && sq_hdrlog_line(t->hdr, s, h) < 0)
        t->hdr_failed = true;
}

static const char usage[] =
    "usage: squall URL [flags]          closed-loop HTTP/1.1 (or --http2) load test (http://\n"
    "                                   or https://), or WebSocket (ws://, wss://)\n"
    "       squall target [flags]       the built-in test server (squall target --help)\n"
    "       squall report FILE [--html OUT]  a saved --json result: its summary, or an HTML\n"
    "                                   report\n"
    "       squall serve [flags]        the daemon: HTTP API, run store, live dashboard\n"
    "                                   (squall serve --help)\n"
    "       squall runs list|show|compare|export  the daemon's stored runs\n"
    "       squall wrk [wrk's flags] URL  wrk's flags, report and Lua scripts (squall wrk -h)\n"
    "       squall nats://HOST[:PORT]/SUBJECT [flags]  publish load on NATS (docs/quick.md)\n"
    "       squall mqtt://HOST[:PORT]/TOPIC [flags]    publish load on MQTT\n"
    "       squall sink SOURCE... [flags]  count stamped events where they arrive (docs/sink.md)\n"
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
    "      --stages S          ramp: \"10s:100,30s:100,10s:0\" as VUs (connections), or as\n"
    "                          rates with -r (-r is then the starting rate)\n"
    "      --pacing D          closed loop: each connection starts a request at most every D\n"
    "      --graceful-stop D   let requests in flight at the end finish for up to D (default 0)\n"
    "  -t, --threads N         worker threads (default: online CPUs, at most -c)\n"
    "  -m, --method M          request method (default GET)\n"
    "  -H, --header 'K: V'     add a request header (repeatable)\n"
    "  -b, --body S|@FILE      request body: a string, or the contents of FILE\n"
    "  -s, --script FILE       a Lua script with wrk's API (docs/wrk.md); the arguments after\n"
    "                          the URL go to its init(args)\n"
    "      --timeout D         per-request timeout (default 10s)\n"
    "      --connect-timeout D per-connect timeout (default 5s; the TLS handshake gets as long)\n"
    "      --json FILE|-       write the result as JSON (- for stdout; the summary then goes\n"
    "                          to stderr)\n"
    "      --html FILE         write a self-contained HTML report (charts; opens offline)\n"
    "      --out csv=FILE      write the per-second series as CSV while the run goes\n"
    "      --out hdr=FILE      write HdrHistogram's interval log (one histogram a second)\n"
    "      --out ndjson=FILE   write one JSON line per request (from a writer thread)\n"
    "      --sample F          with --out ndjson: record this share of requests (0 < F <= 1)\n"
    "      --http2             HTTP/2: h2c with prior knowledge for http:// (RFC 9113 3.3)\n"
    "      --streams N         with --http2: concurrent streams per connection (default 1);\n"
    "                          VUs = connections x streams, each stream slot one VU\n"
    "      --no-compression    do not send Accept-Encoding (default: gzip, deflate, br, zstd;\n"
    "                          compressed bodies are decoded and counted either way)\n"
    "      --no-phases         do not record per-phase timings (blocked, connecting,\n"
    "                          sending, waiting, receiving...)\n"
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

static const char usage_tail[] =
    "\n"
    "exit status: 0 the run completed, 1 it could not do its job (nothing succeeded),\n"
    "             2 bad flags or URL\n";

void sq_cli_usage(FILE *f)
{
    fputs(usage, f);
    fputs(sq_netopts_usage, f);
    fputs(usage_tail, f);
}

int sq_cli_quick(int argc, char **argv)
{
    char err[SQ_PREP_ERRLEN];
    struct sq_quick_opts o;
    sq_quick_opts_init(&o);
    int rc = sq_quick_parse_argv(&o, argc, argv, err, sizeof(err));
    if (rc == SQ_QUICK_HELP)
        sq_cli_usage(stdout);
    else if (rc == SQ_QUICK_VERSION)
        printf("squall %s\n", SQ_VERSION);
    if (rc != 0) {
        sq_quick_opts_dispose(&o);
        return rc > 0 ? SQ_EXIT_OK : sq_cli_prep_error(FACE, rc, err);
    }

    int exit_code = SQ_EXIT_FAIL;
    struct sq_quick_run run;
    struct sq_result res = {0};
    struct sq_cli_outputs outs = {
        .face = FACE, .json_path = o.json_path, .html_path = o.html_path, .quiet = o.quiet};
    struct ticker tk = {0};
    struct sq_ndjson nd = {.scenario = "default"};
    const char *why = NULL;

    rc = sq_quick_prepare(&run, &o, err, sizeof(err));
    if (rc == 0)
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
    if (o.csv_path && !(tk.csv = sq_cli_open_out(FACE, "--out csv", o.csv_path, &exit_code)))
        goto out;
    if (o.hdr_path && !(tk.hdr = sq_cli_open_out(FACE, "--out hdr", o.hdr_path, &exit_code)))
        goto out;
    if (o.ndjson_path) {
        if (!(nd.f = sq_cli_open_out(FACE, "--out ndjson", o.ndjson_path, &exit_code)))
            goto out;
        setvbuf(nd.f, NULL, _IOFBF, 1 << 20);
        cfg->on_samples = sq_ndjson_write;
        cfg->samples_ud = &nd;
        cfg->sample_fraction = o.sample ? o.sample : 1;
    }
    if (tk.csv)
        sq_csv_header(tk.csv);
    if (tk.hdr)
        sq_hdrlog_header(tk.hdr, sq_wall_s());
    cfg->on_tick = on_tick;
    cfg->tick_ud = &tk;

    struct sq_sink *sink = NULL;
    if (o.nsinks) {
        struct sq_cli_sink_opts so = {.nurls = o.nsinks,
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
    rc = sq_run(cfg, &res, &why);
    sq_progress_finish(&tk.progress);
    if (tk.hdr_failed)
        fprintf(stderr, "squall: --out hdr: could not encode an interval\n");
    if (nd.f && (fflush(nd.f) != 0 || nd.failed))
        fprintf(stderr, "squall: --out ndjson: write failed: %s\n", strerror(errno));
    if (res.samples_lost)
        fprintf(stderr,
                "squall: --out ndjson: %llu requests not recorded (the writer fell "
                "behind; try --sample)\n",
                (unsigned long long)res.samples_lost);
    if (rc < 0) {
        sq_cli_signals_end();
        fprintf(stderr, "squall: %s: %s\n", why, sq_strerror(rc));
        sq_cli_sink_end(sink, &res, NULL, cfg->stop);
        goto out;
    }

    /* One document feeds every output, so they cannot disagree. */
    json_t *doc = sq_report_quick_doc(&run, &res);
    sq_cli_sink_end(sink, &res, doc, cfg->stop); /* its block, and its line first */
    sq_cli_signals_end();
    if (!doc) {
        fprintf(stderr, "squall: out of memory building the result\n");
        goto out;
    }
    if (o.script)
        json_object_set_new(doc, "script", sq_cli_script_json(o.script, run.wrk.hooks, &res));
    sq_cli_render(&outs, doc);
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
    exit_code = sq_cli_run_status(&res);
out:
    sq_cli_outputs_close(&outs);
    if (tk.csv)
        fclose(tk.csv);
    if (tk.hdr)
        fclose(tk.hdr);
    if (nd.f)
        fclose(nd.f);
    sq_result_dispose(&res);
    sq_quick_run_dispose(&run);
    sq_quick_opts_dispose(&o);
    return exit_code;
}
