/* mcp/tools.c - the tools an agent calls: run_load_test, validate_plan, start_target,
 * stop_target, list_runs, get_run.
 *
 * Every load goes through the same engine code as the CLI (face/quick.h's JSON entry point,
 * sq_plan_load_text and face/planrun.h), so the agent gets the CLI's messages for the CLI's
 * mistakes. Around it, the caps: the run is prepared with the MCP egress policy (every
 * destination's name is checked before it is resolved, then every address it would connect
 * to: loopback, or a host the operator allowed; nothing is sent yet), then its load shape (peak
 * VUs, peak arrival rate, length with the graceful stop) is checked against the caps. Only then
 * does it run (an auth.oauth2 token is the first thing fetched). A refusal is a tool result with
 * isError (the agent reads it and corrects the call); arguments that do not match a tool's schema
 * are a JSON-RPC -32602.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "face/flags.h"
#include "face/hookcheck.h"
#include "face/netopts.h"
#include "face/planrun.h"
#include "face/quick.h"
#include "face/report.h"
#include "engine/run.h"
#include "result/verdict.h"
#include "mcp/internal.h"
#include "net/egress.h"
#include "net/sock.h"
#include "output/json.h"
#include "output/plan_json.h"
#include "output/summary.h"
#include "plan/exec.h"
#include "plan/plan.h"
#include "server/server.h"
#include "store/store.h"
#include "target/inbox.h"
#include "target/target.h"

/* The caps, at the end of run_load_test's description; %s: how the operator allows a host. */
#define CAPS_TEXT                                                                                  \
    "Safety caps (set by the operator, not changeable here): at most 400 VUs (connections x "      \
    "streams), at most 10,000 requests/s, at most 5 minutes per run (graceful stop included), "    \
    "and only targets on loopback (127.0.0.1, ::1, localhost) unless the operator allows the "     \
    "host (%s). A call over a cap returns an error naming the cap and sends nothing."
#define ALLOW_SETTING_MCP "squall mcp --allow-host HOST"

/* ---- the tools' descriptors ---- */

struct tool {
    const char *name, *title, *description, *schema;
    bool read_only;
    bool caps; /* CAPS_TEXT follows the description */
};

static const struct tool tools[] = {
    {"run_load_test", "Run a load test",
     "Runs one bounded HTTP (or WebSocket) load test and waits for its end (the call lasts as "
     "long as the run). Give either `quick` (the options of `squall URL`: the long flags "
     "without \"--\", e.g. {\"url\": \"http://127.0.0.1:8080/fast\", \"connections\": 10, "
     "\"duration\": \"2s\"}; a run of `requests` without `duration` is bounded by 5m) or "
     "`plan` (a squall plan's YAML text, k6-style scenarios; relative file paths are refused "
     "and script: is not allowed). Returns the summary text, the run id (for get_run) and the "
     "result document (schema squall.result/1); `name` names the run in the store (list_runs, "
     "the daemon's dashboard). ",
     "{\"type\":\"object\",\"properties\":{"
     "\"quick\":{\"type\":\"object\",\"description\":\"The quick face's options by long flag "
     "name: url (required), connections, duration, requests, rate, method, header, body, "
     "http2, streams, stages, max-in-flight, pacing, graceful-stop, timeout, threads, "
     "no-compression, message, binary...\",\"properties\":{"
     "\"url\":{\"type\":\"string\",\"description\":\"http://, https://, ws:// or wss:// URL\"},"
     "\"connections\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":400},"
     "\"duration\":{\"type\":\"string\",\"description\":\"500ms, 10s, 2m (at most 5m)\"},"
     "\"requests\":{\"type\":\"integer\",\"minimum\":1},"
     "\"rate\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":10000,"
     "\"description\":\"open loop: requests per second\"},"
     "\"method\":{\"type\":\"string\"},"
     "\"header\":{\"type\":[\"string\",\"array\"],\"items\":{\"type\":\"string\"},"
     "\"description\":\"'Name: value', or an array of them\"},"
     "\"body\":{\"type\":\"string\"},"
     "\"http2\":{\"type\":\"boolean\"},"
     "\"stages\":{\"type\":\"string\",\"description\":\"10s:100,30s:100 (VUs, or rates with "
     "rate)\"}},"
     "\"required\":[\"url\"]},"
     "\"plan\":{\"type\":\"string\",\"description\":\"a plan's YAML text\"},"
     "\"name\":{\"type\":\"string\",\"maxLength\":200,\"description\":\"the run's name in "
     "the store (default: mcp under the daemon, none under squall mcp --store)\"}},"
     "\"oneOf\":[{\"required\":[\"quick\"]},{\"required\":[\"plan\"]}]}",
     false, true},
    {"validate_plan", "Validate a plan",
     "Checks a squall plan (YAML text) without running it: its keys, executors, steps, "
     "templates and thresholds. Returns what the plan would run (target, scenarios, load "
     "shapes, steps) or the first mistake as FILE:LINE:COL: KEY: WHY.",
     "{\"type\":\"object\",\"properties\":{\"plan\":{\"type\":\"string\",\"description\":"
     "\"a plan's YAML text\"}},\"required\":[\"plan\"]}",
     true, false},
    {"start_target", "Start a test server",
     "Starts squall's built-in test server (squall target) in this process on 127.0.0.1 and "
     "a free port; returns its base URL. Endpoints: /fast, /ok, /bytes/N, /delay/MS, "
     "/status/CODE, /echo, /json/N, /sse, POST /login, /items, /ws, POST /webhook, GET /stats "
     "(counts per endpoint), POST /stats/reset. At most 4 at once; stop_target stops one.",
     "{\"type\":\"object\",\"properties\":{\"threads\":{\"type\":\"integer\",\"minimum\":1,"
     "\"maximum\":4,\"description\":\"worker threads (default 1)\"}}}",
     false, false},
    {"stop_target", "Stop a test server", "Stops a test server start_target started, by its port.",
     "{\"type\":\"object\",\"properties\":{\"port\":{\"type\":\"integer\",\"minimum\":1,"
     "\"maximum\":65535}},\"required\":[\"port\"]}",
     false, false},
    {"inbox_start", "Start a webhook inbox",
     "Starts a webhook inbox (squall inbox) in this process on 127.0.0.1 and a free port: it "
     "captures every request sent to it (method, path, headers, body up to max_body, client "
     "address) into a ring of max_captures (older ones evicted and counted) and answers each "
     "with status and body. Point the system under test's webhook URL at it, then read what "
     "arrived with inbox_read. At most 4 at once.",
     "{\"type\":\"object\",\"properties\":{"
     "\"max_captures\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,"
     "\"description\":\"captures kept (default 10000)\"},"
     "\"max_body\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":1048576,"
     "\"description\":\"body bytes kept per capture (default 65536)\"},"
     "\"status\":{\"type\":\"integer\",\"minimum\":200,\"maximum\":599,"
     "\"description\":\"the answer's status (default 200)\"},"
     "\"body\":{\"type\":\"string\",\"description\":\"the answer's body\"},"
     "\"stamp_header\":{\"type\":\"string\",\"description\":\"find the event stamp "
     "({{$stamp}}) only in this header (default: the first stamp in the body, else in a "
     "header)\"}}}",
     false, false},
    {"inbox_read", "Read a webhook inbox",
     "Returns the captures of an inbox inbox_start started, oldest first: those after `since` "
     "(a sequence number; 0: from the oldest kept), whose path starts with `path`, at most "
     "`limit` (default 100, at most 1000). `next` is the `since` of the following call; "
     "`evicted` counts captures pushed out of the ring.",
     "{\"type\":\"object\",\"properties\":{"
     "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535},"
     "\"since\":{\"type\":\"integer\",\"minimum\":0},"
     "\"path\":{\"type\":\"string\"},"
     "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000}},"
     "\"required\":[\"port\"]}",
     true, false},
    {"inbox_stop", "Stop a webhook inbox", "Stops an inbox inbox_start started, by its port.",
     "{\"type\":\"object\",\"properties\":{\"port\":{\"type\":\"integer\",\"minimum\":1,"
     "\"maximum\":65535}},\"required\":[\"port\"]}",
     false, false},
    {"list_runs", "List runs",
     "Lists load tests, newest first: id, kind, status, target URL, requests/s, p99, errors. "
     "From the run store when there is one (the daemon's, or squall mcp --store: the last 50), "
     "else the last 16 this session ran.",
     "{\"type\":\"object\",\"properties\":{}}", true, false},
    {"get_run", "Get a run's result",
     "Returns one run's summary text and result document (schema squall.result/1) by the id "
     "run_load_test returned.",
     "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"required\":[\"id\"]}",
     true, false},
    {"compare_runs", "Compare two runs",
     "Compares two finished runs by id, a (the baseline) to b: requests/s, p50/p90/p99 latency "
     "(microseconds), errors, failed and completed requests, each with a, b, delta (b - a) and "
     "change (delta / a).",
     "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":1},"
     "\"b\":{\"type\":\"integer\",\"minimum\":1}},\"required\":[\"a\",\"b\"]}",
     true, false},
    {"stop_run", "Stop a run",
     "Stops a queued or running load test by id (the daemon's MCP endpoint only: there "
     "run_load_test queues runs, and a run stopped early answers its call with the result so "
     "far, status stopped).",
     "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"required\":[\"id\"]}",
     false, false},
};
#define NTOOLS (sizeof(tools) / sizeof(tools[0]))

json_t *sq_mcp__tools_list(const struct sq_mcp *m)
{
    const char *allow = m->cfg.allow_setting ? m->cfg.allow_setting : ALLOW_SETTING_MCP;
    json_t *a = json_array();
    for (size_t i = 0; a && i < NTOOLS; i++) {
        json_t *schema = json_loads(tools[i].schema, 0, NULL);
        json_t *desc = tools[i].caps ? json_sprintf("%s" CAPS_TEXT, tools[i].description, allow)
                                     : json_string(tools[i].description);
        json_t *t = json_pack("{s:s, s:s, s:o, s:o, s:{s:s, s:b, s:b, s:b}}", "name", tools[i].name,
                              "title", tools[i].title, "description", desc, "inputSchema", schema,
                              "annotations", "title", tools[i].title, "readOnlyHint",
                              tools[i].read_only, "destructiveHint", 0, "openWorldHint", 0);
        if (!t || json_array_append_new(a, t) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* ---- results ---- */

static json_t *text_block(const char *s)
{
    return json_pack("{s:s, s:s}", "type", "text", "text", s);
}

#define tool_error sq_mcp__tool_error

json_t *sq_mcp__tool_error(const char *fmt, ...)
{
    char msg[SQ_PREP_ERRLEN + 128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return json_pack("{s:[o], s:b}", "content", text_block(msg), "isError", 1);
}

/* A result with text and structured content (also given as JSON text, as the spec advises for
 * clients that read only text). Takes structured. */
static json_t *tool_ok(const char *text, json_t *structured)
{
    if (!structured)
        return NULL;
    char *js = json_dumps(structured, JSON_COMPACT);
    json_t *r = NULL;
    if (js)
        r = json_pack("{s:[o, o], s:o, s:b}", "content", text_block(text), text_block(js),
                      "structuredContent", structured, "isError", 0);
    else
        json_decref(structured);
    free(js);
    return r;
}

static void bad_args(char *err, size_t len, const char *tool, const char *why)
{
    snprintf(err, len, "Invalid params: %s: %s", tool, why);
}

/* ---- the caps ---- */

/* The run's egress policy (net/egress.h): loopback, and the hosts the operator allowed
 * (--allow-host; the daemon's allow_hosts when the daemon hosts this server: cfg.allow_setting
 * names it in the error). The engine asks it
 * for every destination (the target, --connect-to and --resolve, the brokers of publish and
 * subscribe steps, auth.oauth2.token_url) before anything is looked up or sent, and again at
 * each connect(). */
static int new_egress(const struct sq_mcp *m, struct sq_egress **out)
{
    struct sq_egress_opts o = {.style = SQ_EGRESS_MCP,
                               .hosts = m->cfg.allow_hosts,
                               .nhosts = m->cfg.nallow_hosts,
                               .allow_hint = m->cfg.allow_setting};
    return sq_egress_new(&o, out);
}

/* The arrivals per second an open executor reaches at its peak (0 for a closed one). */
static double peak_rate(const struct sq_exec *e)
{
    if (!sq_exec_is_open(e))
        return 0;
    double r = e->rate > e->start_rate ? e->rate : e->start_rate;
    if (e->kind == SQ_EXEC_RAMPING_ARRIVAL_RATE)
        for (uint32_t i = 0; i < e->nstages; i++)
            if (e->stages[i].target > r)
                r = e->stages[i].target;
    return r * 1e9 / (double)(e->time_unit_ns > 0 ? e->time_unit_ns : 1000000000LL);
}

static int64_t exec_end_ns(const struct sq_exec *e)
{
    return sq_exec_length_ns(e) + e->graceful_stop_ns;
}

static json_t *check_shape(uint64_t vus, double rate, int64_t length_ns)
{
    if (vus > SQ_MCP_CAP_VUS)
        return tool_error("cap: max VUs %u: this run needs %llu (connections x streams); "
                          "nothing was run",
                          SQ_MCP_CAP_VUS, (unsigned long long)vus);
    if (rate > SQ_MCP_CAP_RATE)
        return tool_error("cap: max rate 10000/s: this run reaches %.0f/s; nothing was run", rate);
    if (length_ns > SQ_MCP_CAP_DURATION)
        return tool_error("cap: max duration 5m: this run may last %.1fs (its length with the "
                          "graceful stop; an iterations executor needs maxDuration); nothing "
                          "was run",
                          (double)length_ns / 1e9);
    return NULL;
}

/* ---- keeping runs ---- */

static void run_clear(struct sq_mcp__run *r)
{
    free(r->kind);
    free(r->url);
    free(r->summary);
    json_decref(r->doc);
    memset(r, 0, sizeof(*r));
}

static uint64_t keep_run(struct sq_mcp *m, const char *kind, const char *url, json_t *doc,
                         const char *summary)
{
    uint64_t id = m->next_run++;
    struct sq_mcp__run *r = &m->runs[id % SQ_MCP_KEEP_RUNS];
    run_clear(r);
    r->id = id;
    r->kind = strdup(kind);
    r->url = strdup(url);
    r->summary = strdup(summary);
    r->doc = json_incref(doc);
    return id;
}

json_t *sq_mcp__run_result(int64_t id, const char *summary, json_t *doc)
{
    size_t n = strlen(summary) + 64;
    char *text = malloc(n);
    if (!text)
        return NULL;
    snprintf(text, n, "run %lld\n%s", (long long)id, summary);
    json_t *r = tool_ok(text, json_pack("{s:I, s:O}", "run_id", (json_int_t)id, "result", doc));
    free(text);
    return r;
}

/* The summary squall prints, as text (malloc'd). */
char *sq_mcp__summary_text(const json_t *doc)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f)
        return NULL;
    int rc = sq_report_summary(doc, f);
    if (fclose(f) != 0 || rc < 0) {
        free(s);
        return NULL;
    }
    return s;
}

/* Records a finished run in the store (squall mcp --store). Returns its id, or 0 when it could
 * not be stored (it is kept in memory then, and the reason goes to stderr). */
static int64_t record_run(struct sq_mcp *m, const char *kind, const char *url, json_t *doc)
{
    char err[512];
    char *req = m->cur_args ? json_dumps(m->cur_args, JSON_COMPACT) : NULL;
    char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    struct sq_store_new_run nr = {
        .kind = strcmp(kind, "plan") == 0 ? SQ_STORE_PLAN : SQ_STORE_QUICK,
        .name = m->cur_args ? json_string_value(json_object_get(m->cur_args, "name")) : NULL,
        .target = url,
        .request = req ? req : "{}",
    };
    int64_t id = 0;
    struct sq_store_end e = {
        .status = SQ_STORE_FINISHED, .doc = text, .doc_len = text ? strlen(text) : 0};
    int rc = text ? sq_store_run_create(m->cfg.store, &nr, &id, err, sizeof(err)) : -ENOMEM;
    if (rc == 0)
        rc = sq_store_run_start(m->cfg.store, id, err, sizeof(err));
    if (rc == 0)
        rc = sq_store_run_end(m->cfg.store, id, &e, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "squall mcp: the run could not be stored: %s\n",
                rc == -ENOMEM ? "out of memory" : err);
        id = 0;
    }
    free(req);
    free(text);
    return id;
}

/* With cfg.submit (the daemon): the run, its caps checked, goes to the host's queue; the answer
 * is the host's when the run ends. Returns a placeholder (dropped) or a tool error. */
static json_t *hand_over(struct sq_mcp *m, int64_t total_ns)
{
    char err[1024] = "";
    int64_t id = 0;
    int rc = m->cfg.submit(m->cfg.host_ud, m->cur_args, m->cur_id, m->cur_progress,
                           (double)total_ns / 1e9, &id, err, sizeof(err));
    if (rc < 0)
        return tool_error("the run was not queued: %s", err[0] ? err : sq_strerror(rc));
    m->deferred = true;
    return json_object();
}

/* Renders the finished run: kept, and returned. Takes doc. */
static json_t *finish_run(struct sq_mcp *m, const char *kind, const char *url, json_t *doc)
{
    if (!doc)
        return NULL;
    char *summary = sq_mcp__summary_text(doc);
    json_t *r = NULL;
    if (summary) {
        int64_t id = m->cfg.store ? record_run(m, kind, url, doc) : 0;
        if (id == 0)
            id = (int64_t)keep_run(m, kind, url, doc, summary);
        r = sq_mcp__run_result(id, summary, doc);
    }
    free(summary);
    json_decref(doc);
    return r;
}

static volatile int *stop_flag(struct sq_mcp *m, volatile int *local)
{
    *local = 0;
    return m->cfg.stop ? m->cfg.stop : local;
}

/* ---- run_load_test ---- */

/* notifications/progress each second of a run (cfg.notify and a progressToken). */
struct progress {
    struct sq_mcp *m;
    const json_t *token;
    double total_s; /* 0: unknown (a run of a request count) */
    uint64_t completed, errors;
};

static void progress_init(struct progress *pg, struct sq_mcp *m, int64_t total_ns)
{
    pg->m = m->cfg.notify && m->cur_progress ? m : NULL;
    pg->token = m->cur_progress;
    pg->total_s = (double)total_ns / 1e9;
    pg->completed = pg->errors = 0;
}

static void progress_tick(struct progress *pg, const struct sq_second *s)
{
    if (!pg->m)
        return;
    pg->completed += s->completed;
    pg->errors += s->errors;
    char msg[160];
    snprintf(msg, sizeof(msg), "%.0fs: %llu requests completed (%.0f/s this second), %llu errors",
             s->t_s, (unsigned long long)pg->completed,
             s->len_s > 0 ? (double)s->completed / s->len_s : 0.0, (unsigned long long)pg->errors);
    json_t *params = json_pack("{s:O, s:f, s:s}", "progressToken", (json_t *)pg->token, "progress",
                               s->t_s, "message", msg);
    if (params && pg->total_s > 0)
        json_object_set_new(params, "total", json_real(pg->total_s));
    json_t *n = params ? json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
                                   "notifications/progress", "params", params)
                       : NULL;
    char *text = n ? json_dumps(n, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    if (text)
        pg->m->cfg.notify(pg->m->cfg.notify_ud, text);
    free(text);
    json_decref(n);
}

static void quick_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                       const struct sq_hist *hu)
{
    (void)h;
    (void)hu;
    progress_tick(ud, s);
}

static json_t *run_quick(struct sq_mcp *m, json_t *q)
{
    char err[SQ_PREP_ERRLEN];
    struct sq_quick_opts o;
    sq_quick_opts_init(&o);
    struct sq_quick_run run;
    bool prepared = false;
    struct sq_result res = {0};
    json_t *out = NULL;

    struct sq_egress *egress = NULL;
    int rc = sq_quick_from_json(&o, q, err, sizeof(err));
    if (rc < 0) {
        out = tool_error("quick: %s", err);
        goto done;
    }
    if (new_egress(m, &egress) < 0)
        goto done;
    o.net.egress = egress;
    rc = sq_quick_prepare(&run, &o, err, sizeof(err));
    prepared = true;
    if (rc < 0) {
        out = tool_error(rc == -EACCES ? "%s; nothing was run" : "quick: %s", err);
        goto done;
    }
    struct sq_exec *e = &run.cfg.exec;
    if ((e->kind == SQ_EXEC_SHARED_ITERATIONS || e->kind == SQ_EXEC_PER_VU_ITERATIONS) &&
        !o.duration_set && e->max_duration_ns > SQ_MCP_CAP_DURATION)
        e->max_duration_ns = SQ_MCP_CAP_DURATION; /* -n alone: bounded by the cap */
    if ((out = check_shape(sq_exec_max_vus(e), peak_rate(e), exec_end_ns(e))))
        goto done;
    if (m->cfg.submit && m->cur_args && m->cur_id) {
        out = hand_over(m, o.duration_set ? sq_exec_length_ns(e) : 0);
        goto done;
    }
    if ((rc = sq_net_raise_nofile(run.conns, "connections", err, sizeof(err))) < 0) {
        out = tool_error("%s", err);
        goto done;
    }
    volatile int local;
    run.cfg.stop = stop_flag(m, &local);
    struct progress pg;
    progress_init(&pg, m, o.duration_set ? sq_exec_length_ns(e) : 0);
    if (pg.m) {
        run.cfg.on_tick = quick_tick;
        run.cfg.tick_ud = &pg;
    }
    const char *why = NULL;
    rc = sq_run(&run.cfg, &res, &why);
    if (rc < 0) {
        out = tool_error("the run failed: %s: %s", why ? why : "run", sq_strerror(rc));
        goto done;
    }
    out = finish_run(m, "quick", o.url, sq_quick_doc(&run, &res));
done:
    sq_result_dispose(&res);
    if (prepared)
        sq_quick_run_dispose(&run);
    sq_quick_opts_dispose(&o);
    sq_egress_free(egress);
    return out;
}

static json_t *load_plan(const char *text, struct sq_plan **p)
{
    struct sq_plan_error pe;
    int rc = sq_plan_load_text("plan.yaml", text, strlen(text), NULL, p, &pe);
    if (rc < 0) {
        char msg[1024];
        sq_plan_error_format(&pe, msg, sizeof(msg));
        return tool_error("%s", msg);
    }
    return NULL;
}

struct plan_ticker {
    struct sq_planrun_watch w;
    volatile int *stop;
    struct progress pg;
};

static void plan_tick(void *ud, const struct sq_second *s, const struct sq_hist *h,
                      const struct sq_hist *hu)
{
    (void)hu;
    struct plan_ticker *t = ud;
    if (sq_planrun_watch_tick(&t->w, s, h))
        *t->stop = 1;
    progress_tick(&t->pg, s);
}

static json_t *run_plan(struct sq_mcp *m, const char *text)
{
    char err[SQ_PREP_ERRLEN];
    struct sq_plan *p = NULL;
    struct sq_planrun_opts o;
    sq_planrun_opts_init(&o);
    o.refuse_scripts = true; /* Lua could use io and os */
    o.run_once = true;       /* setup: and teardown: here, or on the daemon's runner */
    o.quiet = true;
    struct sq_planrun run;
    bool prepared = false, watching = false;
    struct sq_result res = {0};
    struct sq_th_verdicts verdicts = {0};
    struct plan_ticker tk = {0};
    struct sq_egress *egress = NULL;
    json_t *out = load_plan(text, &p);
    if (out)
        goto done;
    if (p->subscribers) { /* as the daemon's runner: they start under `squall run` only */
        out = tool_error("plan.yaml:%u:%u: subscribers: MCP runs no subscribers (squall run "
                         "does); nothing was run",
                         p->subscribers->loc.line, p->subscribers->loc.col);
        goto done;
    }
    if (new_egress(m, &egress) < 0)
        goto done;
    o.net.egress = egress;
    int rc = sq_planrun_prepare(&run, p, &o, err, sizeof(err));
    prepared = true;
    if (rc < 0) {
        out = tool_error(rc == -EACCES ? "%s; nothing was run" : "%s", err);
        goto done;
    }
    double rate = 0;
    int64_t end = 0;
    for (uint32_t i = 0; i < run.cfg.nscens; i++) {
        const struct sq_run_scen *s = &run.cfg.scens[i];
        rate += peak_rate(&s->exec);
        if (s->start_ns + exec_end_ns(&s->exec) > end)
            end = s->start_ns + exec_end_ns(&s->exec);
    }
    if ((out = check_shape(run.vus, rate, end)))
        goto done;
    if (m->cfg.submit && m->cur_args && m->cur_id) {
        out = hand_over(m, end);
        goto done;
    }
    if ((rc = sq_net_raise_nofile(run.vus, "VUs", err, sizeof(err))) < 0 ||
        (rc = sq_planrun_begin(&run, err, sizeof(err))) < 0) { /* after the caps: the token */
        out = tool_error("%s", err);
        goto done;
    }
    if (sq_planrun_watch_init(&tk.w, p) < 0)
        goto done;
    watching = true;
    volatile int local;
    run.cfg.stop = tk.stop = stop_flag(m, &local);
    progress_init(&tk.pg, m, end);
    run.cfg.on_tick = plan_tick;
    run.cfg.tick_ud = &tk;
    if (p->setup) { /* once, before the scenarios: what it extracts, every VU reads */
        if (sq_planrun_once(&run, false, run.cfg.stop) < 0)
            goto done;
        if (!run.setup.ok) {
            out =
                tool_error("%s: %s; the scenarios did not run",
                           *run.cfg.stop ? "stopped during setup" : "setup failed", run.setup.why);
            goto done;
        }
    }
    const char *why = NULL;
    rc = sq_run(&run.cfg, &res, &why);
    if (p->teardown) { /* after the scenarios, also when a stop or a threshold ended them */
        volatile int td_stop = 0;
        if (sq_planrun_once(&run, true, &td_stop) < 0)
            goto done;
    }
    if (rc < 0) {
        out = tool_error("the run failed: %s: %s", why ? why : "run", sq_strerror(rc));
        goto done;
    }
    if (sq_planrun_finish(&run, &tk.w, &res, &verdicts) < 0)
        goto done;
    out = finish_run(m, "plan", p->target, sq_planrun_doc(&run, &res, &verdicts));
done:
    if (watching)
        sq_planrun_watch_dispose(&tk.w);
    sq_th_verdicts_dispose(&verdicts);
    sq_result_dispose(&res);
    if (prepared)
        sq_planrun_dispose(&run);
    sq_plan_free(p);
    sq_egress_free(egress);
    return out;
}

static int run_load_test(struct sq_mcp *m, json_t *args, json_t **result, char *err, size_t len)
{
    json_t *q = json_object_get(args, "quick");
    json_t *plan = json_object_get(args, "plan");
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v)
    {
        if (strcmp(key, "quick") != 0 && strcmp(key, "plan") != 0 && strcmp(key, "name") != 0) {
            char why[160];
            snprintf(why, sizeof(why), "unknown argument '%.60s' (give quick or plan, and name)",
                     key);
            bad_args(err, len, "run_load_test", why);
            return SQ_MCP_INVALID_PARAMS;
        }
    }
    if ((q && plan) || (!q && !plan)) {
        bad_args(err, len, "run_load_test", "give exactly one of quick (an object) or plan");
        return SQ_MCP_INVALID_PARAMS;
    }
    if (q && !json_is_object(q)) {
        bad_args(err, len, "run_load_test", "quick must be an object");
        return SQ_MCP_INVALID_PARAMS;
    }
    if (plan &&
        (!json_is_string(plan) || strlen(json_string_value(plan)) != json_string_length(plan))) {
        bad_args(err, len, "run_load_test", "plan must be a string (YAML text, no NUL)");
        return SQ_MCP_INVALID_PARAMS;
    }
    /* the daemon's POST /runs takes the same name (daemon/prep.c) */
    json_t *name = json_object_get(args, "name");
    if (name && (!json_is_string(name) || json_string_length(name) > 200 ||
                 strlen(json_string_value(name)) != json_string_length(name))) {
        bad_args(err, len, "run_load_test", "name must be a string (at most 200 bytes, no NUL)");
        return SQ_MCP_INVALID_PARAMS;
    }
    m->cur_args = args;
    *result = q ? run_quick(m, q) : run_plan(m, json_string_value(plan));
    m->cur_args = NULL;
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

/* ---- validate_plan ---- */

static int validate_plan(json_t *args, json_t **result, char *err, size_t len)
{
    json_t *plan = json_object_get(args, "plan");
    if (!json_is_string(plan) || strlen(json_string_value(plan)) != json_string_length(plan)) {
        bad_args(err, len, "validate_plan", "plan must be a string (YAML text, no NUL)");
        return SQ_MCP_INVALID_PARAMS;
    }
    struct sq_plan *p = NULL;
    json_t *out = load_plan(json_string_value(plan), &p);
    if (!out && p->script) {
        /* as run_load_test refuses it; never loaded (the hooks check would run its Lua) */
        out = tool_error("plan.yaml:%u:%u: script: MCP runs no Lua from plans (no hooks here)",
                         p->script_loc.line, p->script_loc.col);
    } else if (!out) {
        char msg[512];
        if (sq_thresholds_check(p, msg, sizeof(msg)) < 0 ||
            sq_plan_hooks_check(p, msg, sizeof(msg)) < 0) {
            out = tool_error("%s", msg);
        } else {
            char *s = NULL;
            size_t n = 0;
            FILE *f = open_memstream(&s, &n);
            if (f) {
                sq_plan_describe(p, f);
                fputs("plan OK\n", f);
                if (fclose(f) == 0)
                    out = json_pack("{s:[o], s:b}", "content", text_block(s), "isError", 0);
            }
            free(s);
        }
    }
    sq_plan_free(p);
    *result = out;
    return out ? 0 : SQ_MCP_INTERNAL_ERROR;
}

/* ---- targets ---- */

/* The answer of start_target and inbox_start: the start's error (why, else rc's text), or the
 * listener's URL in the text and in the structured content. */
static int started(const char *tool, const char *what, int rc, const char *why, uint16_t port,
                   json_t **result)
{
    if (rc < 0) {
        *result = tool_error("%s: %s", tool, why ? why : sq_strerror(rc));
        return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
    }
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)port);
    char text[160];
    snprintf(text, sizeof(text), "squall %s listening on %s", what, url);
    *result = tool_ok(text, json_pack("{s:s, s:i}", "url", url, "port", (int)port));
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

static int start_target(struct sq_mcp *m, json_t *args, json_t **result, char *err, size_t len)
{
    json_t *th = json_object_get(args, "threads");
    json_int_t threads = 1;
    if (th) {
        if (!json_is_integer(th) || json_integer_value(th) < 1 || json_integer_value(th) > 4) {
            bad_args(err, len, "start_target", "threads must be an integer 1..4");
            return SQ_MCP_INVALID_PARAMS;
        }
        threads = json_integer_value(th);
    }
    struct sq_mcp__target *slot = NULL;
    for (size_t i = 0; i < SQ_MCP_MAX_TARGETS && !slot; i++)
        if (!m->targets[i].t)
            slot = &m->targets[i];
    if (!slot) {
        *result = tool_error("cap: at most %d targets at once: stop_target one first",
                             SQ_MCP_MAX_TARGETS);
        return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
    }
    struct sq_target_config tc = {
        .host = "127.0.0.1",
        .threads = (int)threads,
        .arrivals_cap = 1u << 16,
        .idle_timeout_ns = 60LL * 1000000000,
        .header_timeout_ns = 10LL * 1000000000,
        .request_timeout_ns = SQ_SERVER_REQUEST_TIMEOUT_DEFAULT,
        .min_body_rate = SQ_SERVER_MIN_BODY_RATE_DEFAULT,
    };
    const char *why = NULL;
    int rc = sq_target_start(&tc, &slot->t, &why);
    if (rc < 0)
        slot->t = NULL;
    else
        slot->port = sq_target_port(slot->t);
    return started("start_target", "target", rc, why, slot->port, result);
}

static int stop_target(struct sq_mcp *m, json_t *args, json_t **result, char *err, size_t len)
{
    json_t *pj = json_object_get(args, "port");
    if (!json_is_integer(pj) || json_integer_value(pj) < 1 || json_integer_value(pj) > 65535) {
        bad_args(err, len, "stop_target", "port must be an integer 1..65535");
        return SQ_MCP_INVALID_PARAMS;
    }
    json_int_t port = json_integer_value(pj);
    for (size_t i = 0; i < SQ_MCP_MAX_TARGETS; i++) {
        if (m->targets[i].t && m->targets[i].port == port) {
            sq_target_free(m->targets[i].t);
            m->targets[i].t = NULL;
            char text[96];
            snprintf(text, sizeof(text), "stopped the target on port %lld", (long long)port);
            *result = json_pack("{s:[o], s:b}", "content", text_block(text), "isError", 0);
            return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
        }
    }
    *result =
        tool_error("stop_target: no target of this session listens on port %lld", (long long)port);
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

/* ---- inboxes ---- */

static bool int_arg(json_t *args, const char *key, json_int_t lo, json_int_t hi, json_int_t *out)
{
    json_t *v = json_object_get(args, key);
    if (!v)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return false;
    *out = json_integer_value(v);
    return true;
}

static struct sq_mcp__inbox *find_inbox(struct sq_mcp *m, json_int_t port)
{
    for (size_t i = 0; i < SQ_MCP_MAX_TARGETS; i++)
        if (m->inboxes[i].b && m->inboxes[i].port == port)
            return &m->inboxes[i];
    return NULL;
}

static int inbox_start(struct sq_mcp *m, json_t *args, json_t **result, char *err, size_t len)
{
    json_int_t max_captures = SQ_INBOX_MAX_CAPTURES_DEFAULT, max_body = SQ_INBOX_MAX_BODY_DEFAULT,
               status = 200;
    json_t *body = json_object_get(args, "body");
    json_t *sh = json_object_get(args, "stamp_header");
    if (sh && (!json_is_string(sh) || !sq_inbox_header_name_ok(json_string_value(sh)))) {
        bad_args(err, len, "inbox_start", "stamp_header a header name (e.g. X-Stamp)");
        return SQ_MCP_INVALID_PARAMS;
    }
    if (!int_arg(args, "max_captures", 1, 100000, &max_captures) ||
        !int_arg(args, "max_body", 0, 1048576, &max_body) ||
        !int_arg(args, "status", 200, 599, &status) ||
        (body &&
         (!json_is_string(body) || strlen(json_string_value(body)) != json_string_length(body)))) {
        bad_args(err, len, "inbox_start",
                 "max_captures 1..100000, max_body 0..1048576, status 200..599, body a string");
        return SQ_MCP_INVALID_PARAMS;
    }
    struct sq_mcp__inbox *slot = NULL;
    for (size_t i = 0; i < SQ_MCP_MAX_TARGETS && !slot; i++)
        if (!m->inboxes[i].b)
            slot = &m->inboxes[i];
    if (!slot) {
        *result =
            tool_error("cap: at most %d inboxes at once: inbox_stop one first", SQ_MCP_MAX_TARGETS);
        return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
    }
    free(slot->body);
    slot->body = body ? strdup(json_string_value(body)) : NULL;
    struct sq_inbox_config ic = {
        .host = "127.0.0.1",
        .threads = 1,
        .max_captures = (uint32_t)max_captures,
        .max_body = (size_t)max_body,
        .status = (int)status,
        .body = slot->body,
        .idle_timeout_ns = 60LL * 1000000000,
        .header_timeout_ns = 10LL * 1000000000,
        .request_timeout_ns = SQ_SERVER_REQUEST_TIMEOUT_DEFAULT,
        .min_body_rate = SQ_SERVER_MIN_BODY_RATE_DEFAULT,
        .stamp_header = sh ? json_string_value(sh) : NULL, /* copied by the inbox */
    };
    const char *why = NULL;
    int rc = sq_inbox_start(&ic, &slot->b, &why);
    if (rc < 0)
        slot->b = NULL;
    else
        slot->port = sq_inbox_port(slot->b);
    return started("inbox_start", "inbox", rc, why, slot->port, result);
}

static int inbox_read(struct sq_mcp *m, json_t *args, json_t **result, char *err, size_t len)
{
    json_int_t port = 0, since = 0, limit = SQ_INBOX_LIST_DEFAULT;
    json_t *path = json_object_get(args, "path");
    if (!json_object_get(args, "port") || !int_arg(args, "port", 1, 65535, &port) ||
        !int_arg(args, "since", 0, INT64_MAX / 2, &since) ||
        !int_arg(args, "limit", 1, SQ_INBOX_LIST_MAX, &limit) ||
        (path &&
         (!json_is_string(path) || strlen(json_string_value(path)) != json_string_length(path)))) {
        bad_args(err, len, "inbox_read",
                 "port 1..65535 (required), since >= 0, limit 1..1000, path a string");
        return SQ_MCP_INVALID_PARAMS;
    }
    struct sq_mcp__inbox *ib = find_inbox(m, port);
    if (!ib) {
        *result = tool_error("inbox_read: no inbox of this session listens on port %lld",
                             (long long)port);
        return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
    }
    struct sq_buf s = {0};
    json_t *doc = NULL;
    if (sq_inbox_list(ib->b, (uint64_t)since, path ? json_string_value(path) : NULL,
                      (uint64_t)limit, &s) == 0)
        doc = json_loadb(s.p, s.len, 0, NULL);
    sq_buf_dispose(&s);
    if (!doc)
        return SQ_MCP_INTERNAL_ERROR;
    struct sq_inbox_counts c;
    sq_inbox_counts(ib->b, &c);
    json_object_set_new(doc, "captured", json_integer((json_int_t)c.captured));
    json_object_set_new(doc, "truncated", json_integer((json_int_t)c.truncated));
    char text[200];
    snprintf(text, sizeof(text),
             "%zu captures (next since=%lld; %llu captured in all, %llu evicted)",
             json_array_size(json_object_get(doc, "captures")),
             (long long)json_integer_value(json_object_get(doc, "next")),
             (unsigned long long)c.captured, (unsigned long long)c.evicted);
    *result = tool_ok(text, doc);
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

static int inbox_stop(struct sq_mcp *m, json_t *args, json_t **result, char *err, size_t len)
{
    json_int_t port = 0;
    if (!json_object_get(args, "port") || !int_arg(args, "port", 1, 65535, &port)) {
        bad_args(err, len, "inbox_stop", "port must be an integer 1..65535");
        return SQ_MCP_INVALID_PARAMS;
    }
    struct sq_mcp__inbox *ib = find_inbox(m, port);
    if (!ib) {
        *result = tool_error("inbox_stop: no inbox of this session listens on port %lld",
                             (long long)port);
        return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
    }
    sq_inbox_free(ib->b);
    ib->b = NULL;
    free(ib->body);
    ib->body = NULL;
    char text[96];
    snprintf(text, sizeof(text), "stopped the inbox on port %lld", (long long)port);
    *result = json_pack("{s:[o], s:b}", "content", text_block(text), "isError", 0);
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

/* ---- runs ---- */

static int list_runs(struct sq_mcp *m, json_t **result)
{
    json_t *a = json_array();
    if (m->cfg.store) {
        struct sq_store_query q = {.limit = SQ_MCP_LIST_RUNS};
        struct sq_store_runs l = {0};
        char err[512];
        if (sq_store_run_list(m->cfg.store, &q, &l, err, sizeof(err)) < 0) {
            json_decref(a);
            *result = tool_error("list_runs: the store: %s", err);
            return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
        }
        for (size_t i = 0; a && i < l.n; i++) {
            const struct sq_store_run *r = &l.v[i];
            json_array_append_new(
                a,
                json_pack("{s:I, s:s, s:s, s:s, s:s, s:f, s:I, s:I, s:I, s:s?}", "id",
                          (json_int_t)r->id, "kind", sq_store_kind_name(r->kind), "status",
                          sq_store_status_name(r->status), "name", r->name, "url", r->target,
                          "requests_per_s", r->req_per_s, "p99_us", (json_int_t)r->p99_us, "errors",
                          (json_int_t)r->errors, "sent", (json_int_t)r->sent, "reason", r->reason));
        }
        sq_store_runs_dispose(&l);
    } else {
        for (uint64_t id = m->next_run; a && id-- > 1;) {
            const struct sq_mcp__run *r = &m->runs[id % SQ_MCP_KEEP_RUNS];
            if (r->id != id)
                break;
            json_array_append_new(a, json_pack("{s:I, s:s, s:s, s:s, s:O?, s:O?}", "id",
                                               (json_int_t)id, "kind", r->kind, "status",
                                               "finished", "url", r->url, "requests",
                                               json_object_get(r->doc, "requests"), "rate",
                                               json_object_get(r->doc, "rate")));
        }
    }
    char text[64];
    snprintf(text, sizeof(text), "%zu runs", a ? json_array_size(a) : 0);
    *result = tool_ok(text, json_pack("{s:o}", "runs", a));
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

static bool id_arg(json_t *args, const char *key, int64_t *out)
{
    json_t *v = json_object_get(args, key);
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return false;
    *out = (int64_t)json_integer_value(v);
    return true;
}

int sq_mcp__run_doc(struct sq_mcp *m, int64_t id, json_t **doc, char *status, size_t statuslen,
                    char *why, size_t whylen)
{
    *doc = NULL;
    if (status)
        snprintf(status, statuslen, "finished");
    if (!m->cfg.store) {
        const struct sq_mcp__run *r = &m->runs[(uint64_t)id % SQ_MCP_KEEP_RUNS];
        if (r->id != (uint64_t)id) {
            snprintf(why, whylen, "no run %lld in this session", (long long)id);
            return -ENOENT;
        }
        *doc = json_incref(r->doc);
        return 0;
    }
    char err[512];
    struct sq_store_run r;
    int rc = sq_store_run_get(m->cfg.store, id, &r, err, sizeof(err));
    if (rc < 0) {
        if (rc == -ENOENT)
            snprintf(why, whylen, "no run %lld", (long long)id);
        else
            snprintf(why, whylen, "the store: %s", err);
        return rc == -ENOENT ? -ENOENT : -EIO;
    }
    if (status)
        snprintf(status, statuslen, "%s", sq_store_status_name(r.status));
    if (!r.has_result) {
        snprintf(why, whylen, "run %lld is %s%s%s%s: it has no result", (long long)id,
                 sq_store_status_name(r.status), r.reason ? " (" : "", r.reason ? r.reason : "",
                 r.reason ? ")" : "");
        sq_store_run_dispose(&r);
        return -ENODATA;
    }
    sq_store_run_dispose(&r);
    struct sq_store_result res;
    rc = sq_store_result_get(m->cfg.store, id, &res, err, sizeof(err));
    if (rc == 0) {
        *doc = json_loadb(res.doc, res.doc_len, 0, NULL);
        sq_store_result_dispose(&res);
    }
    if (!*doc) {
        snprintf(why, whylen, "run %lld: its result cannot be read: %s", (long long)id,
                 rc < 0 ? err : "not JSON");
        return -EIO;
    }
    return 0;
}

/* Run id's result document (*doc, owned) or a tool error (*fail). status may be NULL. */
static void load_run(struct sq_mcp *m, const char *tool, int64_t id, json_t **doc, json_t **fail,
                     char *status, size_t statuslen)
{
    char why[640];
    *fail = NULL;
    int rc = sq_mcp__run_doc(m, id, doc, status, statuslen, why, sizeof(why));
    if (rc == -ENOENT)
        *fail = tool_error("%s: %s (list_runs lists them)", tool, why);
    else if (rc < 0)
        *fail = tool_error("%s: %s", tool, why);
}

static int get_run(struct sq_mcp *m, json_t *args, json_t **result, char *err, size_t len)
{
    int64_t id;
    if (!id_arg(args, "id", &id)) {
        bad_args(err, len, "get_run", "id must be an integer >= 1");
        return SQ_MCP_INVALID_PARAMS;
    }
    json_t *doc, *fail;
    char status[32];
    load_run(m, "get_run", id, &doc, &fail, status, sizeof(status));
    if (fail) {
        *result = fail;
        return 0;
    }
    char *summary = sq_mcp__summary_text(doc);
    *result = summary ? sq_mcp__run_result(id, summary, doc) : NULL;
    if (*result)
        json_object_set_new(json_object_get(*result, "structuredContent"), "status",
                            json_string(status));
    free(summary);
    json_decref(doc);
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

/* compare_runs: the figures an agent weighs, a -> b. */
static const struct {
    const char *name, *path;
} cmp_rows[] = {
    {"rps", "rate.requests_per_s"},
    {"p50_us", "latency.p50_us"},
    {"p90_us", "latency.p90_us"},
    {"p99_us", "latency.p99_us"},
    {"errors", "errors"},
    {"failed", "requests.failed"},
    {"completed", "requests.completed"},
};

static bool doc_num(const json_t *doc, const char *path, double *out)
{
    if (strcmp(path, "errors") == 0) { /* the sum over the error kinds */
        const json_t *e = json_object_get(doc, "errors");
        const char *k;
        json_t *v;
        double sum = 0;
        if (!json_is_object(e))
            return false;
        json_object_foreach((json_t *)e, k, v)
        {
            if (json_is_number(v))
                sum += json_number_value(v);
        }
        *out = sum;
        return true;
    }
    const char *dot = strchr(path, '.');
    char key[32];
    snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
    const json_t *v = json_object_get(json_object_get(doc, key), dot + 1);
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return true;
}

static int compare_runs(struct sq_mcp *m, json_t *args, json_t **result, char *err, size_t len)
{
    int64_t ia, ib;
    if (!id_arg(args, "a", &ia) || !id_arg(args, "b", &ib)) {
        bad_args(err, len, "compare_runs", "a and b must be run ids (integers >= 1)");
        return SQ_MCP_INVALID_PARAMS;
    }
    json_t *da = NULL, *db = NULL, *fail = NULL;
    load_run(m, "compare_runs", ia, &da, &fail, NULL, 0);
    if (!fail)
        load_run(m, "compare_runs", ib, &db, &fail, NULL, 0);
    if (fail) {
        json_decref(da);
        *result = fail;
        return 0;
    }
    json_t *deltas = json_object();
    struct sq_buf text = {0};
    bool ok = true;
    char line[200];
    snprintf(line, sizeof(line), "run %lld -> run %lld\n", (long long)ia, (long long)ib);
    ok &= sq_buf_append(&text, line, strlen(line)) == 0;
    for (size_t i = 0; deltas && i < sizeof(cmp_rows) / sizeof(cmp_rows[0]); i++) {
        double va, vb;
        if (!doc_num(da, cmp_rows[i].path, &va) || !doc_num(db, cmp_rows[i].path, &vb))
            continue;
        double d = vb - va;
        json_object_set_new(deltas, cmp_rows[i].name,
                            json_pack("{s:f, s:f, s:f, s:o}", "a", va, "b", vb, "delta", d,
                                      "change", va != 0 ? json_real(d / va) : json_null()));
        snprintf(line, sizeof(line), "%-10s %14.1f %14.1f %+14.1f", cmp_rows[i].name, va, vb, d);
        ok &= sq_buf_append(&text, line, strlen(line)) == 0;
        if (va != 0)
            snprintf(line, sizeof(line), " (%+.1f%%)\n", 100.0 * d / va);
        else
            snprintf(line, sizeof(line), "\n");
        ok &= sq_buf_append(&text, line, strlen(line)) == 0;
    }
    ok &= sq_buf_append(&text, "", 1) == 0;
    *result = ok ? tool_ok(text.p, json_pack("{s:I, s:I, s:o}", "a", (json_int_t)ia, "b",
                                             (json_int_t)ib, "deltas", deltas))
                 : NULL;
    if (!ok)
        json_decref(deltas);
    sq_buf_dispose(&text);
    json_decref(da);
    json_decref(db);
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

static int stop_run(struct sq_mcp *m, json_t *args, json_t **result, char *err, size_t len)
{
    int64_t id;
    if (!id_arg(args, "id", &id)) {
        bad_args(err, len, "stop_run", "id must be an integer >= 1");
        return SQ_MCP_INVALID_PARAMS;
    }
    if (!m->cfg.stop_run) {
        *result = tool_error("stop_run: only the daemon's MCP endpoint (squall serve, POST /mcp) "
                             "runs loads in the background; here a run ends when its "
                             "run_load_test call returns");
        return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
    }
    char msg[512] = "";
    int rc = m->cfg.stop_run(m->cfg.host_ud, id, msg, sizeof(msg));
    if (rc < 0)
        *result = tool_error("stop_run: %s", msg[0] ? msg : sq_strerror(rc));
    else
        *result = tool_ok(msg[0] ? msg : "stopping",
                          json_pack("{s:I, s:s}", "id", (json_int_t)id, "status", "stopping"));
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

int sq_mcp__tools_call(struct sq_mcp *m, const char *name, json_t *args, json_t **result, char *err,
                       size_t errlen)
{
    json_t *empty = NULL;
    if (!args)
        args = empty = json_object();
    if (!args) {
        snprintf(err, errlen, "out of memory");
        return SQ_MCP_INTERNAL_ERROR;
    }
    *result = NULL;
    int rc;
    if (strcmp(name, "run_load_test") == 0)
        rc = run_load_test(m, args, result, err, errlen);
    else if (strcmp(name, "validate_plan") == 0)
        rc = validate_plan(args, result, err, errlen);
    else if (strcmp(name, "start_target") == 0)
        rc = start_target(m, args, result, err, errlen);
    else if (strcmp(name, "stop_target") == 0)
        rc = stop_target(m, args, result, err, errlen);
    else if (strcmp(name, "inbox_start") == 0)
        rc = inbox_start(m, args, result, err, errlen);
    else if (strcmp(name, "inbox_read") == 0)
        rc = inbox_read(m, args, result, err, errlen);
    else if (strcmp(name, "inbox_stop") == 0)
        rc = inbox_stop(m, args, result, err, errlen);
    else if (strcmp(name, "list_runs") == 0)
        rc = list_runs(m, result);
    else if (strcmp(name, "get_run") == 0)
        rc = get_run(m, args, result, err, errlen);
    else if (strcmp(name, "compare_runs") == 0)
        rc = compare_runs(m, args, result, err, errlen);
    else if (strcmp(name, "stop_run") == 0)
        rc = stop_run(m, args, result, err, errlen);
    else {
        snprintf(err, errlen, "Unknown tool: %.100s", name);
        rc = SQ_MCP_INVALID_PARAMS;
    }
    if (rc == SQ_MCP_INTERNAL_ERROR && !err[0])
        snprintf(err, errlen, "out of memory");
    json_decref(empty);
    return rc;
}

void sq_mcp__tools_dispose(struct sq_mcp *m)
{
    for (size_t i = 0; i < SQ_MCP_MAX_TARGETS; i++) {
        sq_target_free(m->targets[i].t);
        m->targets[i].t = NULL;
    }
    for (size_t i = 0; i < SQ_MCP_MAX_TARGETS; i++) {
        sq_inbox_free(m->inboxes[i].b);
        m->inboxes[i].b = NULL;
        free(m->inboxes[i].body);
        m->inboxes[i].body = NULL;
    }
    for (size_t i = 0; i < SQ_MCP_KEEP_RUNS; i++)
        run_clear(&m->runs[i]);
}
