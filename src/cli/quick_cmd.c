/* cli/quick_cmd.c - the quick face: `squall URL [flags]`, a wrk/oha-style one-liner. The flags and
 * the run's set-up are face/quick.h (shared with the daemon); here: the help, printing what the
 * engine refused, signals, the progress line, the --out files and the end-of-run outputs (what
 * the plan face does too is cli/loadrun.h's). The command runs parse -> prepare -> run -> render,
 * each phase a function of its own over one `struct quick`. */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/b64.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/loadrun.h"
#include "cli/sinkrun.h"
#include "cli/wrk.h"
#include "base/clock.h"
#include "sink/subs.h"
#include "stats/hist.h"
#include "face/flags.h"
#include "face/quick.h"
#include "face/report.h"
#include "engine/run.h"
#include "output/json.h"
#include "output/ndjson.h"

#define FACE "squall"

/* ---- the help ---- */

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
    "      --cpus LIST         pin worker i to the i-th CPU of LIST, taskset's syntax (0-3,\n"
    "                          0,2-5; round-robin; best effort: a refusal is a warning)\n"
    "  -m, --method M          request method (default GET; get, post... are upper-cased)\n"
    "  -H, --header 'K: V'     add a request header (repeatable)\n"
    "  -b, --body S|@FILE      request body: a string, or the contents of FILE\n"
    "  -s, --script FILE       a Lua script with wrk's API (docs/wrk.md); the arguments after\n"
    "                          the URL go to its init(args)\n"
    "      --urls FILE|-       several URLs instead of one (- reads them from stdin): a line\n"
    "                          each, [METHOD] URL [BODY|@FILE], # comments, or vegeta's\n"
    "                          targets (header lines and an @FILE line under METHOD URL);\n"
    "                          sent round-robin, each URL's figures reported apart; http://\n"
    "                          URLs may name several hosts (each connection goes to one, each\n"
    "                          host's figures apart), https:// ones share one host\n"
    "      --timeout D         per-request timeout (default 10s)\n"
    "      --connect-timeout D per-connect timeout (default 5s; the TLS handshake gets as long)\n"
    "      --json FILE|-       write the result as JSON (- for stdout; the summary then goes\n"
    "                          to stderr)\n"
    "      --html FILE         write a self-contained HTML report (charts; opens offline)\n"
    "      --out csv=FILE      write the per-second series as CSV while the run goes (tail -f\n"
    "                          shows each second; so do hdr= and ndjson=)\n"
    "      --out hdr=FILE      write HdrHistogram's interval log (one histogram a second)\n"
    "      --out ndjson=FILE   write one JSON line per request (from a writer thread)\n"
    "      --out prometheus-rw=URL  stream the per-second series to Prometheus's remote-write\n"
    "                          receiver (http://HOST:9090/api/v1/write) while the run goes\n"
    "      --out influxdb=URL  the same to InfluxDB 1.x (http://HOST:8086/DB, line protocol;\n"
    "                          https:// and user:password@ too, tokens from the environment);\n"
    "                          a slow or dead receiver never slows the load (drops counted)\n"
    "      --sample F          with --out ndjson: record this share of requests (0 < F <= 1)\n"
    "      --name NAME         the run's name in the result and the report\n"
    "      --seed N            replay the random values ({{$randomUUID}}, {{$randomInt}} in -b,\n"
    "                          --message, --payload; -s's math.random): default drawn from the\n"
    "                          OS, printed on the summary's Seed line and in the JSON\n"
    "      --percentiles LIST  the latency percentiles reported (default 50,90,95,99,99.9)\n"
    "      --http2             HTTP/2: h2c with prior knowledge for http:// (RFC 9113 3.3)\n"
    "      --http3             HTTP/3 over QUIC (https:// only; UDP to the URL's port)\n"
    "      --h3-0rtt           with --http3: keep the server's session ticket; later\n"
    "                          connections resume with 0-RTT (first request as early data)\n"
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
    "nats:// and mqtt:// URLs (one connection unless -c; VUs = connections x window); tls://\n"
    "(NATS) and mqtts:// (MQTT, port 8883) over TLS, with -k, --cacert, --cert as for https;\n"
    "mqtt+ws://HOST[:PORT][/PATH]?topic=TOPIC (and mqtt+wss://) MQTT over WebSocket:\n"
    "      --payload S|@FILE   the message (templates; default {{$stamp}})\n"
    "      --window N          messages out per connection (default 1,000 for NATS core and\n"
    "                          MQTT QoS 0, else 1)\n"
    "      --jetstream         NATS: wait for each PubAck (latency = ack)\n"
    "      --request           NATS: request/reply (latency = reply)\n"
    "      --qos N             MQTT: QoS 0, 1 or 2 (latency = PINGRESP, PUBACK, PUBCOMP)\n"
    "      --round-trip        MQTT: subscribe to the topic; latency = publish to delivery\n"
    "      --idle              MQTT: connect and hold -c connections, keep-alive pings only;\n"
    "                          CONNECT->CONNACK latency and refusals in the result\n"
    "      --mqtt-version V    MQTT: 3 (3.1.1, default) or 5\n"
    "      --retain            MQTT: publish retained\n"
    "      --keepalive D       MQTT: keep-alive (default 60s)\n"
    "      --client-id S       MQTT: client id prefix (the connection number is added)\n"
    "      --tls-first         NATS over TLS (tls://): shake hands before the server's INFO\n"
    "                          (a server with tls { handshake_first: true })\n"
    "      --sink URL          count the stamped events where they arrive, in this process:\n"
    "                          http://HOST:PORT to listen on, nats://.../SUBJECT or\n"
    "                          mqtt://.../TOPIC to subscribe to (repeatable, one of each)\n"
    "      --sink-stamp WHERE  where the sink finds the stamp (squall sink --stamp)\n"
    "      --sink-settle D     how long the sink waits for stragglers (default 2s)\n"
    "      --subscribers N     N subscriber connections to the load's subject/topic beside the\n"
    "                          publishers: per-subscriber msgs/s, spread, lag, e2e latency\n"
    "      --queue NAME        the subscribers share the messages: a NATS queue group, an MQTT\n"
    "                          shared subscription ($share/NAME/TOPIC)\n"
    "      --subscribe-only    no publisher: subscribe for -d and count what others publish\n"
    "      --stream NAME       NATS: the subscribers are JetStream pull consumers on NAME (with\n"
    "                          --queue, one durable consumer NAME they share); acked each\n"
    "      --batch N           their fetch size (default 100)\n"
    "      --push              push consumers instead (with --queue: one deliver group)\n";

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

/* ---- the command: parse -> prepare -> run -> render ---- */

/* What the phases of one `squall URL` share. */
struct quick {
    int argc;
    char **argv;
    char **typed; /* the command line as typed, for the result ("run.command"): getopt reorders
                     argv */
    struct sq_quick_opts o;
    struct sq_quick_run run;
    bool prepared;           /* run, load and cap hold what prepare set up */
    struct sq_cli_load load; /* the outputs, the tick, the sink, the result */
    struct sq_cli_capture cap;
    struct sq_subs *subs; /* --subscribers (sink/subs.h), or NULL */
};

/* Everything the run's tick feeds, on the main thread. */
static void on_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                    const struct sq_hist *hu)
{
    SQ_UNUSED(hu);
    sq_cli_load_tick(ud, s, h);
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

/* What the agents run: this face's arguments, and the body when it came from a file (the file
 * need not exist on the agents). NULL after printing why. */
static json_t *quick_job(int argc, char **argv, const struct sq_quick_opts *o,
                         const struct sq_quick_run *r)
{
    json_t *args = sq_cli_dist_args(argc, argv, 1, r->cfg.seed);
    json_t *job = args ? json_pack("{s:s, s:o}", "face", "quick", "args", args) : NULL;
    if (job && o->body_arg && o->body_arg[0] == '@' && !o->body_literal) {
        char *b64 = malloc(sq_b64_encoded_len(r->body_len));
        if (!b64) {
            json_decref(job);
            job = NULL;
        } else {
            sq_b64_encode(r->body, r->body_len, b64);
            json_object_set_new(job, "body_file_b64", json_string(b64));
            free(b64);
        }
    }
    if (!job)
        fprintf(stderr, "squall: out of memory\n");
    return job;
}

/* The flags. Returns 0 to go on, SQ_EXIT_DONE when --help or --version was answered, or the
 * exit status after printing why. */
static int quick_parse(struct quick *q)
{
    char err[SQ_PREP_ERRLEN];
    sq_quick_opts_init(&q->o);
    q->o.net.proxy_env = true; /* this process's HTTP(S)_PROXY: the CLI's own environment */
    q->typed = sq_cli_argv_copy(q->argc, q->argv);
    int rc = sq_quick_parse_argv(&q->o, q->argc, q->argv, err, sizeof(err));
    if (rc == SQ_QUICK_HELP)
        sq_cli_usage(stdout);
    else if (rc == SQ_QUICK_VERSION)
        printf("squall %s\n", SQ_VERSION);
    if (rc == 0)
        return 0;
    return rc > 0 ? SQ_EXIT_DONE : sq_cli_prep_error(FACE, rc, err);
}

/* --sink: the sink beside the load, told this run's id first. */
static int quick_sink(struct quick *q)
{
    const struct sq_quick_opts *o = &q->o;
    if (!o->nsinks)
        return 0;
    struct sq_sink_beside_opts so = {.nurls = o->nsinks,
                                     .stamp = o->sink_stamp,
                                     .settle_ns = o->sink_settle_ns,
                                     .mqtt_qos = -1,
                                     .tls = &o->net.tls};
    memcpy(so.urls, o->sinks, o->nsinks * sizeof(so.urls[0]));
    q->run.cfg.run_id = sq_run_new_id();
    return sq_cli_sink_begin(FACE, &so, q->run.cfg.run_id, &q->load.sink);
}

/* --subscribers: started, and subscribed (up to 5 s), before the first publish. */
static int quick_subs(struct quick *q)
{
    const struct sq_quick_opts *o = &q->o;
    if (!o->subscribers)
        return 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    struct sq_subs_opts so = {.url = o->url,
                              .n = o->subscribers,
                              /* -t as given (the publishers may run fewer: one per
                               * connection); else one per CPU, at most one per subscriber */
                              .threads = (uint32_t)(o->threads ? o->threads
                                                    : ncpu > 0 ? ncpu
                                                               : 1),
                              .group = o->sub_group,
                              .stream = o->sub_stream,
                              .batch = (uint32_t)o->sub_batch,
                              .push = o->sub_push,
                              .mqtt_qos = o->qos < 0 ? 1 : o->qos,
                              .mqtt_version = o->mqtt_version,
                              .egress = q->run.cfg.egress,
                              .tls = &o->net.tls};
    char err[512] = "";
    int rc = sq_subs_start(&so, &q->subs, err, sizeof(err));
    if (rc == -SQ_EUSAGE)
        return sq_cli_usage_error(FACE, "%s", err);
    if (rc < 0) {
        sq_cli_error(FACE, "%s", err);
        return SQ_EXIT_FAIL;
    }
    uint32_t k = sq_subs_wait(q->subs, 5 * SQ_NS_PER_S, NULL);
    if (k < o->subscribers)
        fprintf(stderr, "%s: --subscribers: %u of %u subscribed after 5s; the load starts anyway\n",
                FACE, k, o->subscribers);
    return 0;
}

/* --subscribe-only: no load; the subscribers count for the run's length (or until a signal). */
static int subscribe_only(struct quick *q)
{
    struct sq_run_config *cfg = &q->run.cfg;
    int64_t start = sq_now_ns(), end = start + sq_exec_length_ns(&cfg->exec);
    while (sq_now_ns() < end && !*cfg->stop) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    q->load.sig = sq_cli_signal_seen(&q->load.forced);
    /* the document's load part: nothing sent, over the time the subscribers listened */
    struct sq_result *res = &q->load.res;
    res->duration_ns = sq_now_ns() - start;
    res->run_id = cfg->run_id;
    res->seed = cfg->seed;
    return sq_latency_hist_new(&res->latency) < 0 ? SQ_EXIT_FAIL : 0;
}

/* --cpus is best effort: a CPU this process may not run on (offline, outside its cgroup's or
 * taskset's set) leaves the workers given it unpinned; said before the run (the result's
 * worker_cpus says -1 for them after it). */
static void cpus_warn(const struct sq_quick_opts *o)
{
    cpu_set_t mine;
    if (!o->ncpus || o->dist.agents || sched_getaffinity(0, sizeof(mine), &mine) != 0)
        return;
    for (uint32_t i = 0; i < o->ncpus; i++)
        if (!CPU_ISSET(o->cpus[i], &mine))
            fprintf(stderr,
                    "squall: warning: --cpus: CPU %u is not available to this process (see "
                    "taskset -p %d): the workers given it run unpinned\n",
                    (unsigned)o->cpus[i], (int)getpid());
}

/* Everything before the first packet of load: the run set up (face/quick.h), the open-file
 * limit, the output files, the tick, --verbose's capture and the sink. Returns 0, or the exit
 * status after printing why. */
static int quick_prepare(struct quick *q)
{
    char err[SQ_PREP_ERRLEN];
    const struct sq_quick_opts *o = &q->o;
    int rc = sq_quick_prepare(&q->run, o, err, sizeof(err));
    q->prepared = true;
    if (rc == 0 && !o->dist.agents) /* on agents, each raises its own */
        rc = sq_net_raise_nofile(q->run.conns, "connections", err, sizeof(err));
    if (rc < 0)
        return sq_cli_prep_error(FACE, rc, err);
    /* a worker thread holds at least one connection: more threads than the pool would idle, so
     * the engine runs fewer; say so rather than lower -t silently */
    if (o->threads && o->threads > q->run.conns)
        fprintf(stderr,
                "squall: note: -t %llu lowered to %llu: each worker thread needs a connection of "
                "its own and the run has %llu (raise -c for more threads)\n",
                (unsigned long long)o->threads, (unsigned long long)q->run.conns,
                (unsigned long long)q->run.conns);
    cpus_warn(o);
    if (q->run.h3_proxy_env)
        fprintf(stderr,
                "squall: note: --http3: %s is not used: an HTTP proxy cannot carry QUIC (UDP); "
                "the requests go straight to the target\n",
                q->run.h3_proxy_env);
    struct sq_run_config *cfg = &q->run.cfg;
    struct sq_cli_load *l = &q->load;
    l->face = FACE;
    l->cfg = cfg;
    l->d = &o->dist;
    l->outs = (struct sq_cli_outputs){
        .face = FACE, .json_path = o->json_path, .html_path = o->html_path, .quiet = o->quiet};
    l->push_url[SQ_PUSH_PROM_RW] = o->prom_rw_url;
    l->push_url[SQ_PUSH_INFLUX] = o->influx_url;
    l->run_name = o->name;
    l->push_open = sq_exec_is_open(&cfg->exec);
    if ((rc = sq_cli_load_open(l, o->csv_path, o->hdr_path, o->ndjson_path, o->sample)) != 0)
        return rc;
    sq_cli_progress_init(&l->progress, sq_exec_is_open(&cfg->exec),
                         cfg->exec.kind == SQ_EXEC_SHARED_ITERATIONS
                             ? 0
                             : (double)sq_exec_length_ns(&cfg->exec) / 1e9);
    l->show = !o->quiet;
    if (l->out.nd.f && q->run.nurls && url_labels(&l->out.nd, &q->run) < 0) {
        fprintf(stderr, "squall: out of memory\n");
        return SQ_EXIT_FAIL;
    }
    cfg->on_tick = on_tick;
    cfg->tick_ud = l;
    if (o->verbose || o->http_debug) {
        rc = sq_cli_capture_init(&q->cap,
                                 o->http_debug ? SQ_CAPTURE_EVERY : SQ_CAPTURE_FIRST_OF_KIND);
        if (rc < 0)
            return SQ_EXIT_FAIL;
        cfg->capture = &q->cap.cfg;
    }
    if ((rc = quick_sink(q)) != 0)
        return rc;
    return quick_subs(q);
}

/* The run, here or on agents, until it ends or a signal stops it. Returns 0 when it took place,
 * or the exit status after printing why. */
static int quick_run(struct quick *q)
{
    struct sq_run_config *cfg = &q->run.cfg;
    cfg->stop = sq_cli_signals_begin();
    if (q->o.dist.agents) /* the same run on agents: the arguments (and a -b @FILE's bytes) */
        q->load.job = quick_job(q->argc, q->argv, &q->o, &q->run);
    if (q->subs)
        sq_subs_go(q->subs);
    if (q->o.subscribe_only) {
        return subscribe_only(q);
    }
    int rc = sq_cli_load_run(&q->load, sq_exec_is_open(&cfg->exec),
                             sq_exec_length_ns(&cfg->exec) + cfg->exec.graceful_stop_ns, on_tick,
                             &q->load);
    if (rc)
        return rc;
    sq_cli_load_measured(&q->load);
    if (cfg->capture)
        sq_cli_capture_print(&q->cap, stderr);
    return 0;
}

/* One document feeds every output, so they cannot disagree; then the wrk script's done() and
 * the exit status. */
static int quick_render(struct quick *q)
{
    const struct sq_quick_opts *o = &q->o;
    struct sq_cli_load *l = &q->load;
    json_t *doc =
        sq_cli_load_doc(l, sq_quick_doc(&q->run, &l->res), q->argc, q->typed, !o->no_redact);
    if (!doc)
        return SQ_EXIT_FAIL;
    uint64_t received = 0, subscribed = 0;
    if (q->subs) { /* the last messages (quiet for 1 s at most), then the block */
        sq_subs_finish(q->subs, o->subscribe_only ? UINT64_MAX : l->res.c.completed, SQ_NS_PER_S,
                       q->run.cfg.stop);
        json_t *b = sq_subs_json(q->subs);
        received = b ? (uint64_t)json_integer_value(json_object_get(b, "received")) : 0;
        subscribed = b ? (uint64_t)json_integer_value(json_object_get(b, "subscribed")) : 0;
        if (b && o->subscribe_only) /* no publisher: the summary shows the subscribers alone */
            json_object_set_new(b, "subscribe_only", json_true());
        if (b)
            json_object_set_new(doc, "subscribers", b);
    }
    if (o->script)
        json_object_set_new(doc, "script",
                            sq_cli_script_json(o->script, q->run.wrk.hooks, &l->res));
    bool written = sq_cli_render(&l->outs, doc) == 0;
    json_decref(doc);
    if (sq_cli_load_script_failed(l))
        return SQ_EXIT_FAIL;
    char err[SQ_PREP_ERRLEN];
    if (o->script && sq_wrk_script_done(&q->run.wrk, &l->res, err, sizeof(err)) < 0) {
        fflush(stdout);
        fprintf(stderr, "squall: done(): %s\n", err);
        return SQ_EXIT_FAIL;
    }
    fflush(stdout);
    int status = o->subscribe_only ? (l->sig ? SQ_EXIT_SIGNAL : SQ_EXIT_OK)
                                   : sq_cli_run_status(&l->res, l->sig, q->run.cfg.timeout_ns);
    if (o->subscribe_only && !l->sig && !received) {
        fprintf(stderr, "squall: --subscribe-only: the subscribers received nothing\n");
        status = SQ_EXIT_FAIL;
    } else if (q->subs && !l->sig && !subscribed && status == SQ_EXIT_OK) {
        /* what they would have counted is not known: not a pass, as a dead sink is not */
        fprintf(stderr,
                "squall: --subscribers: none of the %u subscribed (the broker was not there or "
                "refused them)\n",
                o->subscribers);
        status = SQ_EXIT_FAIL;
    }
    if (!l->sig && l->sink_failed) { /* the sink counted nothing that crossed its broker */
        fprintf(stderr, "squall: --sink: %s\n", l->sink_why);
        status = SQ_EXIT_FAIL;
    }
    return sq_cli_load_status(l, status, written);
}

static void quick_dispose(struct quick *q)
{
    sq_subs_free(q->subs);
    if (q->prepared) {
        sq_cli_load_dispose(&q->load);
        sq_cli_capture_dispose(&q->cap);
        sq_quick_run_dispose(&q->run);
    }
    sq_quick_opts_dispose(&q->o);
    free(q->typed);
}

int sq_cli_quick(int argc, char **argv)
{
    struct quick q = {.argc = argc, .argv = argv};
    int rc = quick_parse(&q);
    if (rc == 0)
        rc = quick_prepare(&q);
    if (rc == 0)
        rc = quick_run(&q);
    if (rc == 0)
        rc = quick_render(&q);
    quick_dispose(&q);
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
