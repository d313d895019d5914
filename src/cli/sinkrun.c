/* cli/sinkrun.c - a sink beside a load run (see sinkrun.h). */
#include "cli/sinkrun.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "sink/sink.h"

static void sink_config(const struct sq_cli_sink_opts *o, uint64_t run_id,
                        struct sq_sink_config *cfg)
{
    *cfg = (struct sq_sink_config){
        .find = o->stamp,
        .settle_ns = o->settle_ns,
        .run_id = run_id,
        .http_threads = o->http_threads,
        .nats_stream = o->nats_stream,
        .nats_durable = o->nats_durable,
        .nats_queue = o->nats_queue,
        .mqtt_qos = o->mqtt_qos,
        .mqtt_version = o->mqtt_version,
    };
}

void sq_cli_sink_plan_opts(const struct sq_plan *p, struct sq_cli_sink_opts *o, char *http_buf,
                           size_t len)
{
    const struct sq_plan_sink *ps = p->sink;
    *o = (struct sq_cli_sink_opts){.mqtt_qos = -1};
    if (!ps)
        return;
    o->stamp = ps->stamp;
    o->settle_ns = ps->settle_ns;
    o->mqtt_qos = ps->qos;
    o->nats_stream = ps->stream;
    o->nats_durable = ps->durable;
    o->nats_queue = ps->queue;
    if (ps->http) {
        snprintf(http_buf, len, "http://%s", ps->http);
        o->urls[o->nurls++] = http_buf;
    }
    if (ps->nats)
        o->urls[o->nurls++] = ps->nats;
    if (ps->mqtt)
        o->urls[o->nurls++] = ps->mqtt;
}

int sq_cli_sink_plan_check(const struct sq_plan *p)
{
    if (!p->sink)
        return 0;
    struct sq_cli_sink_opts o;
    char http[300];
    sq_cli_sink_plan_opts(p, &o, http, sizeof(http));
    struct sq_sink_config cfg;
    sink_config(&o, 0, &cfg);
    cfg.http = p->sink->http;
    cfg.nats = p->sink->nats;
    cfg.mqtt = p->sink->mqtt;
    char err[512] = "";
    if (sq_sink_check(&cfg, err, sizeof(err)) == 0)
        return 0;
    /* the sink's words name its flags ("--stamp: ..."); here they are the section's keys */
    const char *why = strncmp(err, "--", 2) == 0 ? err + 2 : err;
    fprintf(stderr, "squall: %s:%u:%u: sink: %s\n", p->file ? p->file : "plan",
            (unsigned)p->sink->loc.line, (unsigned)p->sink->loc.col, why);
    return SQ_EXIT_USAGE;
}

int sq_cli_sink_begin(const char *face, const struct sq_cli_sink_opts *o, uint64_t run_id,
                      struct sq_sink **out)
{
    *out = NULL;
    struct sq_sink_config cfg;
    sink_config(o, run_id, &cfg);
    for (size_t i = 0; i < o->nurls; i++) {
        const char *u = o->urls[i];
        const char **slot = strncmp(u, "http://", 7) == 0   ? &cfg.http
                            : strncmp(u, "nats://", 7) == 0 ? &cfg.nats
                                                            : &cfg.mqtt;
        if (*slot)
            return sq_cli_usage_error(face,
                                      "--sink: '%s': one sink of each kind (http, nats, "
                                      "mqtt)",
                                      u);
        *slot = slot == &cfg.http ? u + 7 : u;
    }
    if (cfg.http) {
        size_t n = strlen(cfg.http);
        if (n && cfg.http[n - 1] == '/') /* http://127.0.0.1:9000/ */
            return sq_cli_usage_error(face, "--sink: '%s': http://HOST:PORT, without a path",
                                      cfg.http - 7);
    }
    char err[512] = "";
    struct sq_sink *s;
    int rc = sq_sink_start(&cfg, &s, err, sizeof(err));
    if (rc == -SQ_EUSAGE)
        return sq_cli_usage_error(face, "--sink: %s", err);
    if (rc < 0) {
        sq_cli_error(face, "--sink: %s", err);
        return SQ_EXIT_FAIL;
    }
    int64_t begin = sq_now_ns();
    struct sq_sink_totals t;
    for (;;) {
        sq_sink_totals(s, &t);
        if (t.connected || sq_now_ns() - begin > 5 * SQ_NS_PER_S)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 5 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    if (!t.connected)
        fprintf(stderr,
                "%s: --sink: not subscribed after 5s; the load starts anyway (events "
                "before the subscription are lost to the sink)\n",
                face);
    *out = s;
    return 0;
}

void sq_cli_sink_end(struct sq_sink *s, const struct sq_result *res, json_t *doc,
                     volatile int *stop)
{
    if (!s)
        return;
    sq_sink_expect(s, res->run_id, res->stamped, res->nstreams);
    sq_sink_settle(s, 600 * SQ_NS_PER_S, stop);
    sq_sink_stop(s);
    json_t *block = sq_sink_json(s);
    if (block && doc)
        json_object_set_new(doc, "sink", block);
    else
        json_decref(block);
    sq_sink_free(s);
}
