/* face/report.c - see report.h. */
#include "face/report.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "engine/busconf.h"
#include "output/figures.h"
#include "output/json.h"
#include "output/plan_json.h"
#include "stats/hist.h"

/* --urls: each URL's figures, in the list's order. */
static json_t *urls_block(const struct sq_quick_run *r, const struct sq_result *res)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < res->nurls && i < r->nurls; i++) {
        const struct sq_url_result *u = &res->urls[i];
        struct sq_latency_figures lf;
        sq_report_latency_figures(u->latency, &lf);
        json_array_append_new(
            a, json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I}, "
                         "s:{s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}}",
                         "method", r->urls[i].method, "url", r->list.v[i].url, "line",
                         (json_int_t)r->list.v[i].line, "requests", (json_int_t)u->sent,
                         "completed", (json_int_t)u->completed, "failed", (json_int_t)u->failed,
                         "status", "1xx", (json_int_t)u->status[1], "2xx", (json_int_t)u->status[2],
                         "3xx", (json_int_t)u->status[3], "4xx", (json_int_t)u->status[4], "5xx",
                         (json_int_t)u->status[5], "other", (json_int_t)u->status[0], "latency",
                         "count", (json_int_t)lf.count, "mean_us", lf.mean, "p50_us",
                         (json_int_t)lf.p50, "p90_us", (json_int_t)lf.p90, "p95_us",
                         (json_int_t)lf.p95, "p99_us", (json_int_t)lf.p99, "p99_9_us",
                         (json_int_t)lf.p999, "max_us", (json_int_t)lf.max));
        if (r->norigins > 1) { /* several hosts: which one it went to (the hosts block's) */
            const struct sq_url *o = &r->list.v[r->ofirst[r->run_urls[i].origin]].u;
            char name[320];
            snprintf(name, sizeof(name), "%s://%s", o->scheme, o->authority);
            json_object_set_new(json_array_get(a, i), "host", json_string(name));
        }
    }
    return a;
}

/* One entry's figures: requests, completed, failed, status classes, latency (h may be NULL). */
static json_t *figures_json(uint64_t sent, uint64_t completed, uint64_t failed,
                            const uint64_t status[6], const struct sq_hist *h)
{
    struct sq_latency_figures lf;
    sq_report_latency_figures(h, &lf);
    return json_pack("{s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I}, "
                     "s:{s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}}",
                     "requests", (json_int_t)sent, "completed", (json_int_t)completed, "failed",
                     (json_int_t)failed, "status", "1xx", (json_int_t)status[1], "2xx",
                     (json_int_t)status[2], "3xx", (json_int_t)status[3], "4xx",
                     (json_int_t)status[4], "5xx", (json_int_t)status[5], "other",
                     (json_int_t)status[0], "latency", "count", (json_int_t)lf.count, "mean_us",
                     lf.mean, "p50_us", (json_int_t)lf.p50, "p90_us", (json_int_t)lf.p90, "p95_us",
                     (json_int_t)lf.p95, "p99_us", (json_int_t)lf.p99, "p99_9_us",
                     (json_int_t)lf.p999, "max_us", (json_int_t)lf.max);
}

/* --urls on several hosts: each host's figures, its URLs' summed (their histograms merged), and
 * its share of the connections. NULL when out of memory. */
static json_t *hosts_block(const struct sq_quick_run *r, const struct sq_result *res)
{
    json_t *a = json_array();
    for (uint32_t k = 0; a && k < r->norigins; k++) {
        struct sq_hist *h = NULL;
        if (sq_latency_hist_new(&h) < 0) {
            json_decref(a);
            return NULL;
        }
        uint64_t sent = 0, completed = 0, failed = 0, status[6] = {0};
        uint32_t nurls = 0;
        for (uint32_t i = 0; i < res->nurls && i < r->nurls; i++) {
            const struct sq_url_result *u = &res->urls[i];
            if (r->run_urls[i].origin != k)
                continue;
            nurls++;
            sent += u->sent;
            completed += u->completed;
            failed += u->failed;
            for (int c = 0; c < 6; c++)
                status[c] += u->status[c];
            if (u->latency)
                sq_hist_merge(h, u->latency);
        }
        const struct sq_url *u0 = &r->list.v[r->ofirst[k]].u;
        char name[320];
        snprintf(name, sizeof(name), "%s://%s", u0->scheme, u0->authority);
        json_t *e = figures_json(sent, completed, failed, status, h);
        sq_hist_free(h);
        if (!e || json_object_set_new(e, "host", json_string(name)) < 0 ||
            json_object_set_new(e, "urls", json_integer(nurls)) < 0 ||
            json_object_set_new(e, "connections",
                                json_integer((json_int_t)sq_quick_origin_conns(r, k))) < 0 ||
            json_array_append_new(a, e) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* What a bus run's latency measures, mode by mode (engine/busconf.h). */
static const char *bus_latency_means(const struct sq_bus_config *b)
{
    switch (b->mode) {
    case SQ_BUS_PUBLISH:
        if (b->kind == SQ_BUS_NATS)
            return "until the server's PONG to the PING behind the message's batch: the server "
                   "has read it";
        return b->qos == 0   ? "until the broker's PINGRESP to the PINGREQ behind the message's "
                               "batch: the broker has read it"
               : b->qos == 1 ? "until the PUBACK"
                             : "until the PUBCOMP";
    case SQ_BUS_JETSTREAM:
        return "until the JetStream PubAck: the stream has stored it";
    case SQ_BUS_REQUEST:
        return "until the reply";
    case SQ_BUS_ROUND_TRIP:
        return "until the broker delivered it back on the connection's subscription";
    }
    return "";
}

/* The document's `nats` / `mqtt` block as plain values, from the bus configuration. */
static struct sq_report_bus report_bus(const struct sq_bus_config *b)
{
    return (struct sq_report_bus){
        .mqtt = b->kind == SQ_BUS_MQTT,
        .mode = sq_bus_mode_name(b->mode),
        .subject = b->subject,
        .window = b->window,
        .latency_means = bus_latency_means(b),
        .qos = b->qos,
        .version = b->mqtt_version == 5 ? "5.0" : "3.1.1",
        .retain = b->retain,
        .round_trip = b->mode == SQ_BUS_ROUND_TRIP,
        .idle = b->idle,
        .websocket = b->ws_path,
    };
}

json_t *sq_quick_doc(const struct sq_quick_run *r, const struct sq_result *res)
{
    struct sq_report_bus bus = r->is_bus ? report_bus(&r->bus) : (struct sq_report_bus){0};
    char stamp_run[16];
    sq_stamp_run_text(res->run_id, stamp_run);
    const struct sq_quick_opts *o = r->opts;
    bool list = r->nurls > 0;
    struct sq_report_info info = {
        .url = list ? r->list.v[0].url : o->url,
        .method = list ? r->urls[0].method : o->method,
        .target_addr = r->net.addr,
        .exec = &r->cfg.exec,
        .threads = res->threads,
        .timeout_ns = r->cfg.timeout_ns,
        .connect_timeout_ns = r->cfg.connect_timeout_ns,
        .request_bytes = r->req_len,
        .accept_encoding = r->accept_encoding,
        .protocol = sq_quick_protocol(r),
        .streams = o->http2 ? (uint32_t)o->streams : 0,
        .bus = r->is_bus ? &bus : NULL,
        .stamp_run = stamp_run,
        .name = o->name,
        .percentiles = o->npercentiles ? o->percentiles : NULL,
        .npercentiles = o->npercentiles,
        .source_addrs = r->net.src_names,
        .nsource_addrs = r->net.nsrc,
        .source_auto = r->net.src_auto,
        .connect_rate = r->net.connect_rate,
        .proxy_url = r->net.proxy_shown,
        .proxy_from = r->net.proxy_from,
        .proxy_mode = r->net.proxy_mode,
        .proxy_auth = r->net.proxy_has_auth,
    };
    if (r->is_bus) {
        info.method = r->bus.kind == SQ_BUS_NATS ? "PUB" : r->bus.idle ? "CONNECT" : "PUBLISH";
        info.request_bytes = 0;
    }
    json_t *doc = sq_report_json_doc(&info, res);
    if (doc && o->cpus_arg)
        json_object_set_new(json_object_get(doc, "config"), "cpus", json_string(o->cpus_arg));
    if (doc && list) {
        json_object_set_new(json_object_get(doc, "config"), "urls_file", json_string(o->urls_path));
        json_object_set_new(doc, "urls", urls_block(r, res));
        if (r->norigins > 1)
            json_object_set_new(doc, "hosts", hosts_block(r, res));
    }
    if (doc && !o->no_redact) /* a broker URL's password: nats://user:[redacted]@host */
        sq_report_redact_url(json_object_get(doc, "config"), "url");
    return doc;
}

json_t *sq_planrun_doc(const struct sq_planrun *r, const struct sq_result *res,
                       const struct sq_th_verdicts *v)
{
    char stamp_run[16];
    sq_stamp_run_text(res->run_id, stamp_run);
    /* One protocol for the whole run when every scenario has the same, else each says its own */
    const char *proto = r->plan->nscenarios ? sq_planrun_protocol(r, 0) : NULL;
    bool h2 = false;
    for (size_t i = 0; i < r->plan->nscenarios; i++) {
        if (proto && strcmp(proto, sq_planrun_protocol(r, i)) != 0)
            proto = NULL;
        h2 |= r->scens[i].h2;
    }
    struct sq_report_info info = {
        .protocol = proto,
        .streams = h2 ? r->cfg.streams : 0,
        .url = r->plan->file,
        .method = "run",
        .target_addr = r->net.addr,
        .exec = &r->scens[0].exec,
        .threads = res->threads,
        .timeout_ns = r->cfg.timeout_ns,
        .connect_timeout_ns = r->cfg.connect_timeout_ns,
        .accept_encoding = r->accept_encoding,
        .stamp_run = stamp_run,
        .name = r->opts->name ? r->opts->name : r->plan->name,
        .percentiles = r->opts->npercentiles ? r->opts->percentiles : NULL,
        .npercentiles = r->opts->npercentiles,
        .source_addrs = r->net.src_names,
        .nsource_addrs = r->net.nsrc,
        .source_auto = r->net.src_auto,
        .connect_rate = r->net.connect_rate,
        .proxy_url = r->net.proxy_shown,
        .proxy_from = r->net.proxy_from,
        .proxy_mode = r->net.proxy_mode,
        .proxy_auth = r->net.proxy_has_auth,
    };
    json_t *doc = sq_report_json_doc(&info, res);
    if (doc && sq_report_plan_sections(doc, r->plan, res, v) < 0) {
        json_decref(doc);
        return NULL;
    }
    if (doc && !r->cfg.no_redact) { /* a broker URL's password: nats://user:[redacted]@host */
        json_t *steps = json_object_get(doc, "steps"), *st;
        size_t k;
        json_array_foreach(steps, k, st) sq_report_redact_url(st, "url");
    }
    json_t *sc = doc ? json_object_get(doc, "scenarios") : NULL;
    for (size_t i = 0; i < json_array_size(sc) && i < r->plan->nscenarios; i++)
        json_object_set_new(json_array_get(sc, i), "protocol",
                            json_string(sq_planrun_protocol(r, i)));
    if (doc && r->plan->script)
        json_object_set_new(doc, "script",
                            json_pack("{s:s, s:{s:I}, s:I, s:s?}", "file", r->plan->script, "calls",
                                      "hooks", (json_int_t)res->c.script_hooks, "skipped_steps",
                                      (json_int_t)res->c.script_skips, "error", res->script_error));
    for (int i = 0; doc && i < 2; i++) {
        const struct sq_planrun_once *o = i ? &r->teardown : &r->setup;
        if (!(i ? r->plan->teardown : r->plan->setup))
            continue;
        json_object_set_new(
            doc, i ? "teardown" : "setup",
            json_pack("{s:b, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:s?}", "ran", o->ran,
                      "ok", o->ok, "requests", (json_int_t)o->sent, "completed",
                      (json_int_t)o->completed, "failed", (json_int_t)o->failed, "http_failed",
                      (json_int_t)o->http_failed, "checks_passed", (json_int_t)o->checks_passed,
                      "checks_failed", (json_int_t)o->checks_failed, "iterations",
                      (json_int_t)o->iterations, "duration_s", (double)o->duration_ns / 1e9,
                      "error", o->ran && !o->ok ? o->why : NULL));
    }
    if (doc && r->oauth) {
        struct sq_oauth_stats st;
        sq_oauth_stats(r->oauth, &st);
        json_object_set_new(doc, "oauth",
                            json_pack("{s:I, s:I, s:I, s:f, s:f, s:s?}", "tokens",
                                      (json_int_t)st.tokens, "refreshes", (json_int_t)st.refreshes,
                                      "failures", (json_int_t)st.failures, "first_token_s",
                                      (double)st.first_ns / 1e9, "expires_in_s",
                                      (double)st.expires_in_ns / 1e9, "last_error",
                                      st.last_error[0] ? st.last_error : NULL));
    }
    return doc;
}
