/* sink/beside.c - a sink beside a load run (see beside.h). */
#include "sink/beside.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/clock.h"
#include "plan/plan.h"
#include "sink/sink.h"

#define SUBSCRIBE_WAIT_NS (5 * SQ_NS_PER_S)
#define SETTLE_MAX_NS     (600 * SQ_NS_PER_S)

static void sink_config(const struct sq_sink_beside_opts *o, uint64_t run_id,
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
        .egress = o->egress,
        .tls = o->tls,
    };
}

void sq_sink_beside_plan_opts(const struct sq_plan *p, struct sq_sink_beside_opts *o,
                              char *http_buf, size_t len)
{
    const struct sq_plan_sink *ps = p->sink;
    *o = (struct sq_sink_beside_opts){.mqtt_qos = -1};
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

int sq_sink_beside_plan_check(const struct sq_plan *p, const char *file,
                              const struct sq_egress *egress, char *err, size_t len)
{
    if (!p->sink)
        return 0;
    struct sq_sink_beside_opts o;
    char http[300];
    sq_sink_beside_plan_opts(p, &o, http, sizeof(http));
    o.egress = egress;
    struct sq_sink_config cfg;
    sink_config(&o, 0, &cfg);
    cfg.http = p->sink->http;
    cfg.nats = p->sink->nats;
    cfg.mqtt = p->sink->mqtt;
    char why[1024] = "";
    int rc = sq_sink_check(&cfg, why, sizeof(why));
    if (rc == 0)
        return 0;
    /* the sink's words name its flags ("--stamp: ..."); here they are the section's keys */
    const char *w = strncmp(why, "--", 2) == 0 ? why + 2 : why;
    if (!file)
        file = p->file ? p->file : "plan";
    snprintf(err, len, "%s:%u:%u: sink: %s", file, (unsigned)p->sink->loc.line,
             (unsigned)p->sink->loc.col, w);
    return rc == -EACCES || rc == -SQ_ERESOLVE || rc == -ENOMEM ? rc : -SQ_EPARSE;
}

int sq_sink_beside_start(const struct sq_sink_beside_opts *o, uint64_t run_id, volatile int *stop,
                         struct sq_sink **out, bool *subscribed, char *err, size_t len)
{
    *out = NULL;
    *subscribed = false;
    struct sq_sink_config cfg;
    sink_config(o, run_id, &cfg);
    for (size_t i = 0; i < o->nurls; i++) {
        const char *u = o->urls[i];
        const char **slot = strncmp(u, "http://", 7) == 0 ? &cfg.http
                            : strncmp(u, "nats://", 7) == 0 || strncasecmp(u, "tls://", 6) == 0
                                ? &cfg.nats
                                : &cfg.mqtt;
        if (*slot) {
            snprintf(err, len, "'%s': one sink of each kind (http, nats, mqtt)", u);
            return -SQ_EUSAGE;
        }
        *slot = slot == &cfg.http ? u + 7 : u;
    }
    if (cfg.http) {
        size_t n = strlen(cfg.http);
        if (n && cfg.http[n - 1] == '/') { /* http://127.0.0.1:9000/ */
            snprintf(err, len, "'%s': http://HOST:PORT, without a path", cfg.http - 7);
            return -SQ_EUSAGE;
        }
    }
    struct sq_sink *s;
    int rc = sq_sink_start(&cfg, &s, err, len);
    if (rc < 0)
        return rc;
    int64_t begin = sq_now_ns();
    struct sq_sink_totals t;
    for (;;) {
        sq_sink_totals(s, &t);
        if (t.connected || sq_now_ns() - begin > SUBSCRIBE_WAIT_NS ||
            (stop && __atomic_load_n(stop, __ATOMIC_RELAXED)))
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 5 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    *subscribed = t.connected;
    *out = s;
    return 0;
}

json_t *sq_sink_beside_end(struct sq_sink *s, const struct sq_sink_sent *sent, volatile int *stop,
                           char *why, size_t len)
{
    if (len)
        why[0] = '\0';
    if (!s)
        return NULL;
    sq_sink_expect(s, sent);
    sq_sink_settle(s, SETTLE_MAX_NS, stop);
    sq_sink_stop(s);
    if (len && !sq_sink_unsubscribed(s, why, len))
        why[0] = '\0';
    json_t *block = sq_sink_json(s);
    sq_sink_free(s);
    return block;
}
