/* face/quick.h - the quick face (`squall URL [flags]`) as data: its options, read from
 * arguments or from a JSON object, and the run they prepare.
 *
 * Three steps, each shared by the CLI and the daemon, so both refuse the same mistakes with the
 * same words:
 *
 *   sq_quick_parse_argv / sq_quick_from_json   options (flags checked one by one, then together)
 *   sq_quick_prepare                           the run: the URL, the body (-b @FILE is read),
 *                                              the request serialised once (and the HTTP/2 one),
 *                                              the executor, threads, DNS and TLS
 *   sq_run(&run.cfg, ...)                      the engine (engine/run.h)
 *
 * The JSON form is the flags by their long names without "--": {"url": "http://h/x",
 * "connections": 64, "duration": "10s", "header": ["A: b"], "http2": true}. It is turned into
 * arguments and given to the same parser, so a bad value gets the CLI's message naming the flag:
 * "--connections: '0' is not a connection count (1..1000000)". Messages and return codes follow
 * face/flags.h. Nothing here prints or exits.
 */
#ifndef SQ_FACE_QUICK_H
#define SQ_FACE_QUICK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "face/busopts.h"
#include "base/buf.h"
#include "face/distopts.h"
#include "face/flags.h"
#include "face/netopts.h"
#include "engine/run.h"
#include "face/urllist.h"
#include "face/watchopt.h"
#include "face/wrkscript.h"
#include "http/h2client.h"
#include "http/request.h"
#include "http/url.h"

#define SQ_QUICK_MAX_HEADERS    64
#define SQ_QUICK_HTTP_DEBUG_MAX 20 /* --http-debug: the most requests (-n) without =force */
#define SQ_QUICK_MAX_BODY_FILE  (64u << 20) /* -b @FILE: the largest file read */

/* The quick face's options. Strings are borrowed from the arguments parsed (argv, or what
 * sq_quick_from_json built, which the options then own). */
struct sq_quick_opts {
    const char *url;       /* NULL with --urls */
    const char *urls_path; /* --urls FILE (face/urllist.h), or NULL */
    const char *method;    /* default "GET" */
    const char *body_arg;  /* -b's value: the body, or "@FILE" (from argv) */
    const char *body_flag; /* "-b" or "--body", as the user wrote it */
    bool body_literal;     /* from JSON: body_arg is the body even when it starts with '@' */
    struct sq_kv headers[SQ_QUICK_MAX_HEADERS]; /* -H, parsed (owned: sq_quick_opts_dispose) */
    size_t nheaders;
    uint64_t connections;           /* default 64 */
    uint64_t threads;               /* 0: the online CPUs */
    const char *cpus_arg;           /* --cpus LIST as given, or NULL */
    uint16_t cpus[SQ_FLAG_MAX_CPU]; /* --cpus, parsed: worker i is pinned to cpus[i % ncpus] */
    uint32_t ncpus;
    uint64_t requests; /* -n; 0: a timed run */
    uint64_t max_in_flight;
    uint64_t max_vus;     /* --max-vus: the open loop's pool may grow to it (0: not given) */
    int precision;        /* --pacing-precision: enum sq_pacing (plan/exec.h); -1: not given */
    int64_t window_ns;    /* --pacing-precision coarse:D: D (0: the default window) */
    uint64_t streams;     /* --streams; 1 after parsing unless given */
    int64_t duration_ns;  /* default 10 s */
    bool duration_set;    /* -d was given */
    double rate;          /* -r */
    bool rate_set;        /* -r was given */
    const char *rate_arg; /* -r's value as given, for messages */
    const char *stages;   /* --stages as given */
    int64_t pacing_ns, graceful_ns;
    int64_t timeout_ns;         /* default 10 s */
    int64_t connect_timeout_ns; /* default 5 s */
    bool no_phases, no_compression, http2;
    bool http3;   /* --http3: HTTP/3 over QUIC (http2 is set with it: the same prepared request) */
    bool h3_0rtt; /* --h3-0rtt: later connections resume the session with 0-RTT */
    struct sq_netopts net;      /* DNS and TLS */
    struct sq_distopts dist;    /* --agents N --nats URL...: a run on agents (the CLI only) */
    struct sq_watch_opts watch; /* --watch PID, --watch-name NAME (face/watchopt.h) */
    /* -s FILE: a wrk-style Lua script (docs/wrk.md), and the arguments after the URL that its
     * init(args) gets (refused from JSON: a daemon runs no script file) */
    const char *script;
    int script_argc;
    char **script_argv;
    /* WebSocket (ws:// and wss:// URLs) */
    bool ws;                    /* the URL's scheme is ws or wss (set by the parse) */
    const char *message_arg;    /* --message: a template, or "@FILE" (from argv) */
    bool message_literal;       /* from JSON: message_arg is the text even when it starts with @ */
    bool binary;                /* --binary */
    int64_t ws_ping_ns;         /* --ws-ping */
    const char *ws_subprotocol; /* --ws-subprotocol */
    /* The CLI's own outputs and terminal (refused from JSON: a daemon run writes no files). */
    const char *json_path, *html_path, *csv_path, *hdr_path, *ndjson_path;
    const char *prom_rw_url, *influx_url; /* --out prometheus-rw=URL, influxdb=URL */
    double sample;                        /* --sample; 0: not given */
    bool quiet;
    /* Event buses (nats://, mqtt:// URLs; engine/busconf.h), refused with an http(s) URL */
    bool connections_set;    /* -c was given (a bus run defaults to 1 connection) */
    const char *payload_arg; /* --payload: the text, or "@FILE" */
    uint64_t window;         /* --window; 0: the mode's default */
    int qos;                 /* --qos; -1: not given */
    int mqtt_version;        /* --mqtt-version: 3 or 5; 0: not given */
    bool jetstream, request_reply, round_trip, retain;
    bool idle;             /* --idle (mqtt://): connect and hold */
    int64_t keepalive_ns;  /* --keepalive */
    const char *client_id; /* --client-id */
    bool tls_first;        /* --tls-first */
    /* --sink URL (the CLI runs a sink beside the load: http://HOST:PORT to listen on,
     * nats://.../SUBJECT or mqtt://.../TOPIC to subscribe to), --sink-stamp, --sink-settle;
     * refused from JSON (the daemon runs no sink) */
    const char *sinks[3];
    size_t nsinks;
    const char *sink_stamp;
    int64_t sink_settle_ns;
    /* --subscribers N (nats:// and mqtt:// publish loads; sink/subs.h): N subscriber
     * connections beside the publishers; --queue NAME makes them a NATS queue group or an MQTT
     * shared subscription; --subscribe-only runs no publisher (an external one publishes).
     * Refused from JSON (the CLI runs them) */
    uint32_t subscribers;
    const char *sub_group;
    bool subscribe_only;
    const char *sub_stream;    /* --stream: JetStream pull consumers on it */
    uint64_t sub_batch;        /* --batch: their fetch size; 0: 100 */
    bool sub_push;             /* --push: push consumers instead */
    bool verbose;              /* -v: the first exchange of each status and error kind */
    bool http_debug;           /* --http-debug: every exchange (a few requests only) */
    bool http_debug_force;     /* --http-debug=force: whatever the count */
    uint64_t sample_responses; /* --sample-responses N: exchanges kept per class (5; 0: none) */
    uint64_t seed;             /* --seed N: the random values' seed (plan/tmpl.h) */
    bool seed_set;             /* --seed was given; else sq_quick_prepare draws one */
    bool no_redact;            /* --no-redact: kept exchanges keep their credentials */
    const char *name;          /* --name: the run's name in the result */
    double percentiles[16];    /* --percentiles (output/json.h); npercentiles 0: the default */
    size_t npercentiles;
    /* sq_quick_from_json: the arguments it built and the body (owned) */
    char **_argv;
    size_t _argc;
    char *_body;
    char *_message;
};

/* The defaults of every option. */
void sq_quick_opts_init(struct sq_quick_opts *o);
/* Frees what parsing allocated (headers, the arguments built from JSON); o may be parsed into
 * again after sq_quick_opts_init. */
void sq_quick_opts_dispose(struct sq_quick_opts *o);

/* What sq_quick_parse_argv returns for --help and --version (the caller prints them). */
enum { SQ_QUICK_HELP = 1, SQ_QUICK_VERSION = 2 };

/* Parses `squall URL [flags]` (argv[0] is the program; getopt_long may reorder argv, whose
 * strings must outlive o) into o, which sq_quick_opts_init set. Returns 0, SQ_QUICK_HELP,
 * SQ_QUICK_VERSION, -SQ_EUSAGE (err names the flag: "-c: 'x' is not a connection count
 * (1..1000000)") or -ENOMEM. Not thread-safe (getopt_long). */
SQ_MUST_CHECK int sq_quick_parse_argv(struct sq_quick_opts *o, int argc, char **argv, char *err,
                                      size_t len);

/* Parses a JSON object of options into o, which sq_quick_opts_init set: the keys are the long
 * flags without "--" and "url". A value is a string, or a number where the flag takes one
 * ("connections": 64 or "64"); "header", "resolve" and "connect-to" take one value or an array
 * of them; a flag without a value takes true (false and null: not given). "body" is always the
 * body itself (no @FILE). Refused, with err naming the key: an unknown key (with the nearest
 * one), "json", "html", "out", "sample" and "quiet" unless null or false (a run started from JSON
 * writes no files and prints nothing), a value of the wrong type, a string with a NUL byte; then
 * every value the CLI refuses, with its message. Returns 0, -SQ_EUSAGE or -ENOMEM. o owns what it
 * built: sq_quick_opts_dispose. Not thread-safe (getopt_long). */
SQ_MUST_CHECK int sq_quick_from_json(struct sq_quick_opts *o, const json_t *obj, char *err,
                                     size_t len);

/* One URL of a --urls run. */
struct sq_quick_url {
    const char *method; /* the line's, or -m's */
    char *req;          /* serialised HTTP/1.1 request */
    size_t req_len;
    char *body; /* read from @PATH (owned), or NULL: the line's text or -b's */
    struct sq_h2_req h2;
};

/* A prepared quick run: cfg is ready for sq_run() once the caller adds its own parts (stop,
 * on_tick, on_samples). cfg points into the struct, so it must stay where it is while the run
 * goes; opts is borrowed and must outlive it too. */
struct sq_quick_run {
    const struct sq_quick_opts *opts;
    struct sq_run_config cfg;
    struct sq_url url;
    char *body, *req; /* the body and the serialised HTTP/1.1 request (owned) */
    size_t body_len, req_len;
    struct sq_h2_req h2req;      /* --http2: the request for nghttp2 */
    struct sq_quic_client *quic; /* --http3: QUIC's TLS settings (net/quic.h) */
    const char *h3_proxy_env;    /* --http3: the proxy variable set for the URL and not used
                                    (HTTPS_PROXY, ...: a note), or NULL */
    const char *accept_encoding; /* what the requests offer (NULL: nothing) */
    uint64_t conns;              /* connections the run may open: its open-file need */
    struct sq_net net;
    /* plain http through a proxy (sq_net_proxy_form): the absolute-form prefix ("" when not)
     * and the Proxy-Authorization value (owned; NULL: none) */
    char px_target[320];
    char *px_auth;
    /* nats:// and mqtt:// runs: the bus (cfg.bus points here), the broker URL split, the
     * payload as read (--payload @FILE), and the URL as sq_net_setup resolves it */
    bool is_bus;
    struct sq_bus_config bus;
    struct sq_bus_url bus_url;
    char *payload;
    size_t payload_len;
    struct sq_watch *watch;   /* the processes --watch names (cfg.watch), or NULL */
    struct sq_wrk_script wrk; /* -s: the script's states (cfg.script points into it) */
    /* ws:// and wss://: what cfg.ws points at; the message template when it has dynamic parts
     * (else the message is body, sent as it is), the upgrade's -H lines */
    struct sq_ws_run ws;
    struct sq_tmpl *ws_message;
    struct sq_buf ws_headers;
    /* -b's text as a template with dynamic parts (cfg.body_tmpl), else NULL: body is sent as
     * it is */
    struct sq_tmpl *body_tmpl;
    /* --urls: the list, and per URL its request (HTTP/1.1 and HTTP/2) and body (owned) */
    struct sq_urllist list;
    struct sq_quick_url *urls;
    struct sq_run_url *run_urls;
    size_t nurls;
    /* --urls on several hosts (cfg.origins): each origin's addresses, the set-up of origins 1..
     * (origin 0's is net; onets[0] unused), the line of the URL that named each first, and
     * norigins (1: one host, cfg.origins unset) */
    struct sq_run_origin *origins;
    struct sq_net *onets;
    size_t *ofirst;
    uint32_t norigins;
    /* cfg.secrets: the -H credential headers' values, each whole and after its scheme word */
    struct sq_str secrets[2 * SQ_QUICK_MAX_HEADERS];
};

/* --urls on several hosts: the connections of origin k (those numbered k mod norigins); one
 * host: every connection. */
uint64_t sq_quick_origin_conns(const struct sq_quick_run *r, uint32_t k);

/* Prepares the run o describes. Returns 0, -SQ_EUSAGE (a bad URL, a -b @FILE that cannot be
 * read, a load shape the executor refuses, a TLS file, a --urls file that cannot be read: err
 * names the flag), -SQ_EPARSE (-s: a script that does not load, or fails in setup() or init():
 * err is the script's message; a bad line of the --urls list, or a body file it names that
 * cannot be read: "FILE:LINE:COL: why"), -SQ_ERESOLVE and other negative codes when the run
 * cannot be set up here (err says why). r is filled either way: sq_quick_run_dispose it. With -s
 * the caller calls sq_wrk_script_done(&r->ws, ...) after the run. */
SQ_MUST_CHECK int sq_quick_prepare(struct sq_quick_run *r, const struct sq_quick_opts *o, char *err,
                                   size_t len);
void sq_quick_run_dispose(struct sq_quick_run *r);

/* The protocol the result document names: "http/1.1", "h2", "h2c", "websocket", "nats" or
 * "mqtt". */
const char *sq_quick_protocol(const struct sq_quick_run *r);

#endif
