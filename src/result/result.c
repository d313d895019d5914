/* result/result.c - the result model's names and its whole-result operations: error kinds and
 * phases by name, the WebSocket tallies, counters added and subtracted, per-step figures made,
 * freed and merged, a result disposed (result/result.h). The lossless merge of two results is
 * merge.c's, the sampled exchanges' xsample.c's.
 */
#include "result/result.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats/hist.h"

static const char *const errk_names[] = {SQ_ERRK_LIST(SQ_LIST_STR)};

const char *sq_errk_name(enum sq_errk k)
{
    return SQ_NAME_AT(errk_names, k);
}

static const char *const phase_names[] = {SQ_PHASE_LIST(SQ_LIST_STR)};
static const char *const phase_metrics[] = {
#define SQ_PHASE_K6(name, str, k6) k6,
    SQ_PHASE_LIST(SQ_PHASE_K6)
#undef SQ_PHASE_K6
};

const char *sq_phase_name(enum sq_phase p)
{
    return SQ_NAME_AT(phase_names, p);
}

const char *sq_phase_metric(enum sq_phase p)
{
    return SQ_NAME_AT(phase_metrics, p);
}

/* The bus counters are all uint64_t: added and subtracted as an array. */
#define BUS_WORDS (sizeof(struct sq_bus_counters) / sizeof(uint64_t))
_Static_assert(sizeof(struct sq_bus_counters) % sizeof(uint64_t) == 0, "uint64_t fields only");

static void bus_add(struct sq_bus_counters *dst, const struct sq_bus_counters *src, int sign)
{
    uint64_t d[BUS_WORDS], s[BUS_WORDS];
    memcpy(d, dst, sizeof(d));
    memcpy(s, src, sizeof(s));
    for (size_t i = 0; i < BUS_WORDS; i++)
        d[i] = sign > 0 ? d[i] + s[i] : d[i] - s[i];
    memcpy(dst, d, sizeof(d));
}

void sq_ws_tally_add(struct sq_ws_tally *t, uint16_t key, uint64_t n)
{
    for (uint32_t i = 0; i < t->n; i++) {
        if (t->row[i].key == key) {
            t->row[i].n += n;
            return;
        }
    }
    if (t->n == SQ_WS_KEYS) {
        t->other += n;
        return;
    }
    t->row[t->n].key = key;
    t->row[t->n].n = n;
    t->n++;
}

const char *sq_ws_key_name(uint16_t key, bool upgrade, char *buf)
{
    if (upgrade) {
        switch (key) {
        case SQ_WS_UP_TIMEOUT:
            return "timeout";
        case SQ_WS_UP_CLOSED:
            return "closed";
        case SQ_WS_UP_INVALID:
            return "invalid";
        case SQ_WS_UP_MALFORMED:
            return "malformed";
        default:
            break;
        }
    }
    snprintf(buf, 12, "%u", (unsigned)key);
    return buf;
}

void sq_counters_add(struct sq_counters *dst, const struct sq_counters *src)
{
    bus_add(&dst->bus, &src->bus, 1);
    dst->sent += src->sent;
    dst->dropped += src->dropped;
    dst->completed += src->completed;
    dst->failed += src->failed;
    for (size_t i = 0; i < SQ_ARRAY_LEN(dst->status); i++)
        dst->status[i] += src->status[i];
    for (size_t i = 0; i < SQ_ERRK_COUNT; i++)
        dst->errors[i] += src->errors[i];
    dst->bytes_sent += src->bytes_sent;
    dst->bytes_received += src->bytes_received;
    dst->conns_opened += src->conns_opened;
    dst->conns_closed_by_server += src->conns_closed_by_server;
    dst->tls_handshakes += src->tls_handshakes;
    dst->tls_resumed += src->tls_resumed;
    dst->tls_handshake_errors += src->tls_handshake_errors;
    dst->iterations += src->iterations;
    dst->checks_passed += src->checks_passed;
    dst->checks_failed += src->checks_failed;
    dst->http_failed += src->http_failed;
    dst->rendered += src->rendered;
    dst->body_bytes += src->body_bytes;
    dst->compressed += src->compressed;
    dst->undecodable += src->undecodable;
    dst->sse_streams += src->sse_streams;
    dst->sse_events += src->sse_events;
    dst->script_requests += src->script_requests;
    dst->script_responses += src->script_responses;
    dst->script_delays += src->script_delays;
    dst->script_hooks += src->script_hooks;
    dst->script_skips += src->script_skips;
}

void sq_counters_sub(struct sq_counters *dst, const struct sq_counters *src)
{
    bus_add(&dst->bus, &src->bus, -1);
    dst->sent -= src->sent;
    dst->dropped -= src->dropped;
    dst->completed -= src->completed;
    dst->failed -= src->failed;
    for (size_t i = 0; i < SQ_ARRAY_LEN(dst->status); i++)
        dst->status[i] -= src->status[i];
    for (size_t i = 0; i < SQ_ERRK_COUNT; i++)
        dst->errors[i] -= src->errors[i];
    dst->bytes_sent -= src->bytes_sent;
    dst->bytes_received -= src->bytes_received;
    dst->conns_opened -= src->conns_opened;
    dst->conns_closed_by_server -= src->conns_closed_by_server;
    dst->tls_handshakes -= src->tls_handshakes;
    dst->tls_resumed -= src->tls_resumed;
    dst->tls_handshake_errors -= src->tls_handshake_errors;
    dst->iterations -= src->iterations;
    dst->checks_passed -= src->checks_passed;
    dst->checks_failed -= src->checks_failed;
    dst->http_failed -= src->http_failed;
    dst->rendered -= src->rendered;
    dst->body_bytes -= src->body_bytes;
    dst->compressed -= src->compressed;
    dst->undecodable -= src->undecodable;
    dst->sse_streams -= src->sse_streams;
    dst->sse_events -= src->sse_events;
    dst->script_requests -= src->script_requests;
    dst->script_responses -= src->script_responses;
    dst->script_delays -= src->script_delays;
    dst->script_hooks -= src->script_hooks;
    dst->script_skips -= src->script_skips;
}

int sq_step_stats_new(size_t n, struct sq_step_stats **out)
{
    struct sq_step_stats *s = calloc(n ? n : 1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    *out = s;
    return 0;
}

int sq_step_stats_init(struct sq_step_stats *s, uint32_t nchecks)
{
    s->nchecks = nchecks;
    s->check_pass = calloc(nchecks ? nchecks : 1, sizeof(uint64_t));
    s->check_fail = calloc(nchecks ? nchecks : 1, sizeof(uint64_t));
    if (!s->check_pass || !s->check_fail)
        return -ENOMEM;
    return sq_latency_hist_new(&s->dur);
}

int sq_step_stats_metrics(struct sq_step_stats *s, uint32_t n)
{
    if (!n)
        return 0;
    s->mvals = calloc(n, sizeof(*s->mvals));
    if (!s->mvals)
        return -ENOMEM;
    s->nmvals = n;
    for (uint32_t k = 0; k < n; k++) {
        int rc = sq_latency_hist_new(&s->mvals[k].h);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int sq_group_hists_new(uint32_t n, struct sq_hist ***out)
{
    *out = NULL;
    if (!n)
        return 0;
    struct sq_hist **h = calloc(n, sizeof(*h));
    if (!h)
        return -ENOMEM;
    for (uint32_t g = 0; g < n; g++)
        if (sq_latency_hist_new(&h[g]) < 0) {
            sq_group_hists_free(h, n);
            return -ENOMEM;
        }
    *out = h;
    return 0;
}

void sq_group_hists_free(struct sq_hist **h, uint32_t n)
{
    for (uint32_t g = 0; h && g < n; g++)
        sq_hist_free(h[g]);
    free(h);
}

void sq_step_stats_free(struct sq_step_stats *s, size_t n)
{
    if (!s)
        return;
    for (size_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < s[i].nmvals; k++)
            sq_hist_free(s[i].mvals[k].h);
        free(s[i].mvals);
        free(s[i].check_pass);
        free(s[i].check_fail);
        sq_hist_free(s[i].dur);
        sq_hist_free(s[i].batch_dur);
        for (uint32_t k = 0; k < s[i].nstatus; k++)
            sq_hist_free(s[i].by_status[k].h);
    }
    free(s);
}

void sq_step_mval_merge(struct sq_step_mval *dm, const struct sq_step_mval *sm)
{
    dm->n += sm->n;
    dm->nonzero += sm->nonzero;
    dm->bad += sm->bad;
    dm->sum += sm->sum;
    if (sm->n && sm->last_ns >= dm->last_ns) {
        dm->last = sm->last;
        dm->last_ns = sm->last_ns;
    }
    sq_hist_merge(dm->h, sm->h);
}

int sq_once_metrics_new(uint32_t n, struct sq_step_stats **out)
{
    int rc = sq_step_stats_new(1, out);
    if (rc == 0)
        rc = sq_step_stats_init(*out, 0);
    if (rc == 0)
        rc = sq_step_stats_metrics(*out, n);
    if (rc < 0) {
        sq_step_stats_free(*out, 1);
        *out = NULL;
    }
    return rc;
}

void sq_step_stats_merge(struct sq_step_stats *d, const struct sq_step_stats *s, size_t nchecks)
{
    d->reqs += s->reqs;
    d->failed += s->failed;
    d->errors += s->errors;
    d->extract_fail += s->extract_fail;
    sq_hist_merge(d->dur, s->dur);
    if (d->batch_dur && s->batch_dur)
        sq_hist_merge(d->batch_dur, s->batch_dur);
    for (uint32_t k = 0; k < s->nmvals && k < d->nmvals; k++)
        sq_step_mval_merge(&d->mvals[k], &s->mvals[k]);
    for (size_t k = 0; k < nchecks; k++) {
        d->check_pass[k] += s->check_pass[k];
        d->check_fail[k] += s->check_fail[k];
    }
    for (uint32_t i = 0; i < s->nstatus; i++) {
        uint32_t j = 0;
        while (j < d->nstatus && d->by_status[j].status != s->by_status[i].status)
            j++;
        if (j == d->nstatus) {
            if (j == SQ_STEP_STATUSES || sq_latency_hist_new(&d->by_status[j].h) < 0)
                continue;
            d->by_status[j].status = s->by_status[i].status;
            d->nstatus++;
        }
        d->by_status[j].n += s->by_status[i].n;
        sq_hist_merge(d->by_status[j].h, s->by_status[i].h);
    }
}

const char *sq_control_kind_name(enum sq_control_kind k)
{
    static const char *const names[] = {"rate", "vus", "pause", "resume"};
    return (unsigned)k < SQ_ARRAY_LEN(names) ? names[k] : "?";
}

void sq_result_dispose(struct sq_result *r)
{
    free(r->controls);
    r->controls = NULL;
    r->ncontrols = 0;
    sq_xsamples_dispose(&r->xsamples);
    free(r->series.v);
    r->series = (struct sq_series){0};
    free(r->mseries);
    r->mseries = NULL;
    r->nmetrics = 0;
    free(r->fine.v);
    r->fine = (struct sq_fine_series){0};
    for (uint32_t g = 0; g < r->nstep_series; g++)
        free(r->step_series[g].v);
    free(r->step_series);
    r->step_series = NULL;
    r->nstep_series = 0;
    sq_hist_free(r->latency);
    sq_hist_free(r->latency_uncorrected);
    for (uint32_t i = 0; i < r->nscens; i++) {
        sq_hist_free(r->scens[i].latency);
        sq_hist_free(r->scens[i].iter_dur);
        sq_group_hists_free(r->scens[i].group_dur, r->scens[i].ngroups);
        sq_step_stats_free(r->scens[i].steps, r->scens[i].nsteps);
    }
    free(r->scens);
    r->scens = NULL;
    sq_step_stats_free(r->once, 1);
    r->once = NULL;
    for (uint32_t u = 0; r->urls && u < r->nurls; u++)
        sq_hist_free(r->urls[u].latency);
    free(r->urls);
    r->urls = NULL;
    r->nurls = 0;
    for (int k = 0; k < SQ_PHASE_COUNT; k++) {
        sq_hist_free(r->phase[k]);
        r->phase[k] = NULL;
    }
    sq_hist_free(r->sse_first_event);
    sq_hist_free(r->sse_duration);
    sq_hist_free(r->bus_connect);
    r->bus_connect = NULL;
    for (uint32_t w = 0; r->unfinished && w < r->nstreams; w++)
        free(r->unfinished[w]);
    free(r->unfinished);
    free(r->nunfinished);
    r->unfinished = NULL;
    r->nunfinished = NULL;
    free(r->stamped);
    r->stamped = NULL;
    r->nstreams = 0;
    free(r->client.workers);
    r->client.workers = NULL;
    r->client.nworkers = 0;
    free(r->server.procs);
    r->server.procs = NULL;
    r->server.nprocs = 0;
    r->sse_first_event = r->sse_duration = NULL;
    sq_hist_free(r->rate);
    r->rate = NULL;
    free(r->script_error);
    r->script_error = NULL;
    if (r->ws) {
        sq_hist_free(r->ws->upgrade_us);
        sq_hist_free(r->ws->ping_rtt_us);
        free(r->ws);
        r->ws = NULL;
    }
    r->nscens = 0;
    r->latency = NULL;
    r->latency_uncorrected = NULL;
}
