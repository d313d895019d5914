/* result/merge.c - one result from several: the lossless merge a distributed run ends with.
 *
 * Every figure of a result is either a count (summed), a histogram (merged bucket for bucket with
 * the same configuration, so the merged percentiles are those of all the values recorded into
 * one histogram, never an average of percentiles), or a fact about the run (the longest of the
 * durations, the first abort reason). Nothing else is computed here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result/result.h"
#include "stats/hist.h"

/* dst += src, creating dst's histogram when only src has one. */
static int hist_add(struct sq_hist **dst, const struct sq_hist *src)
{
    if (!src)
        return 0;
    if (!*dst) {
        int rc = sq_latency_hist_new(dst);
        if (rc < 0)
            return rc;
    }
    sq_hist_merge(*dst, src);
    return 0;
}

int sq_result_ws_add(struct sq_result *dst, const struct sq_ws_stats *s)
{
    if (!s)
        return 0;
    struct sq_ws_stats *t = dst->ws;
    if (!t && !(t = dst->ws = calloc(1, sizeof(*t))))
        return -ENOMEM;
    t->upgrades += s->upgrades;
    t->messages_sent += s->messages_sent;
    t->messages_received += s->messages_received;
    t->bytes_sent += s->bytes_sent;
    t->bytes_received += s->bytes_received;
    t->unmatched += s->unmatched;
    t->pings_sent += s->pings_sent;
    t->pongs_received += s->pongs_received;
    t->pings_received += s->pings_received;
    t->pongs_sent += s->pongs_sent;
    t->closes_sent += s->closes_sent;
    const struct sq_ws_tally *from[] = {&s->close_codes, &s->upgrade_failed};
    struct sq_ws_tally *to[] = {&t->close_codes, &t->upgrade_failed};
    for (size_t k = 0; k < 2; k++) {
        for (uint32_t i = 0; i < from[k]->n; i++)
            sq_ws_tally_add(to[k], from[k]->row[i].key, from[k]->row[i].n);
        to[k]->other += from[k]->other;
    }
    int rc = hist_add(&t->upgrade_us, s->upgrade_us);
    return rc == 0 ? hist_add(&t->ping_rtt_us, s->ping_rtt_us) : rc;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* dst takes src's step shape: the same number of checks per step, empty figures. */
static int steps_like(const struct sq_step_stats *src, size_t n, struct sq_step_stats **out)
{
    int rc = sq_step_stats_new(n, out);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = sq_step_stats_init(&(*out)[i], src[i].nchecks);
        if (rc == 0)
            rc = sq_step_stats_metrics(&(*out)[i], src[i].nmvals);
        if (rc == 0 && src[i].batch_dur)
            rc = sq_latency_hist_new(&(*out)[i].batch_dur);
    }
    return rc;
}

static int scens_like(const struct sq_result *src, struct sq_result *dst)
{
    dst->scens = calloc(src->nscens, sizeof(*dst->scens));
    if (!dst->scens)
        return -ENOMEM;
    dst->nscens = src->nscens;
    for (uint32_t i = 0; i < src->nscens; i++) {
        struct sq_scen_result *d = &dst->scens[i];
        const struct sq_scen_result *s = &src->scens[i];
        d->name = s->name;
        d->nsteps = s->nsteps;
        int rc = sq_latency_hist_new(&d->latency);
        if (rc == 0)
            rc = sq_latency_hist_new(&d->iter_dur);
        if (rc == 0)
            rc = steps_like(s->steps, s->nsteps, &d->steps);
        if (rc == 0 && (rc = sq_group_hists_new(s->ngroups, &d->group_dur)) == 0)
            d->ngroups = s->ngroups;
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int merge_scen(struct sq_scen_result *d, const struct sq_scen_result *s)
{
    if (d->nsteps != s->nsteps)
        return -EINVAL;
    for (size_t k = 0; k < s->nsteps; k++)
        if (d->steps[k].nchecks != s->steps[k].nchecks || d->steps[k].nmvals != s->steps[k].nmvals)
            return -EINVAL;
    if (!d->name)
        d->name = s->name;
    sq_counters_add(&d->c, &s->c);
    d->interrupted += s->interrupted;
    d->vus_max += s->vus_max;
    if (d->ngroups != s->ngroups)
        return -EINVAL;
    int rc = hist_add(&d->latency, s->latency);
    if (rc == 0)
        rc = hist_add(&d->iter_dur, s->iter_dur);
    for (uint32_t g = 0; rc == 0 && g < s->ngroups; g++)
        rc = hist_add(&d->group_dur[g], s->group_dur[g]);
    for (size_t k = 0; rc == 0 && k < s->nsteps; k++)
        if (!d->steps[k].batch_dur && s->steps[k].batch_dur)
            rc = sq_latency_hist_new(&d->steps[k].batch_dur);
    if (rc < 0)
        return rc;
    for (size_t k = 0; k < s->nsteps; k++)
        sq_step_stats_merge(&d->steps[k], &s->steps[k], s->steps[k].nchecks);
    return 0;
}

int sq_result_merge(struct sq_result *dst, const struct sq_result *src)
{
    if (src->once) { /* setup: and teardown: samples of the plan's own metrics */
        if (!dst->once) {
            int rc = sq_once_metrics_new(src->once->nmvals, &dst->once);
            if (rc < 0)
                return rc;
        }
        if (dst->once->nmvals != src->once->nmvals)
            return -EINVAL;
        sq_step_stats_merge(dst->once, src->once, 0);
    }
    if (dst->nscens == 0 && src->nscens) {
        int rc = scens_like(src, dst);
        if (rc < 0)
            return rc;
    }
    if (src->nscens && src->nscens != dst->nscens)
        return -EINVAL;
    for (uint32_t i = 0; i < src->nscens; i++) {
        int rc = merge_scen(&dst->scens[i], &src->scens[i]);
        if (rc < 0)
            return rc;
    }
    sq_counters_add(&dst->c, &src->c);
    dst->in_flight += src->in_flight;
    dst->arrivals += src->arrivals;
    for (size_t k = 0; k < SQ_STATUS_CODES; k++)
        dst->status_codes[k] += src->status_codes[k];
    dst->open |= src->open;
    int rc = hist_add(&dst->latency, src->latency);
    if (rc == 0)
        rc = hist_add(&dst->latency_uncorrected, src->latency_uncorrected);
    for (int k = 0; rc == 0 && k < SQ_PHASE_COUNT; k++)
        rc = hist_add(&dst->phase[k], src->phase[k]);
    if (rc == 0)
        rc = hist_add(&dst->sse_first_event, src->sse_first_event);
    if (rc == 0)
        rc = hist_add(&dst->bus_connect, src->bus_connect);
    if (rc == 0)
        rc = hist_add(&dst->sse_duration, src->sse_duration);
    if (rc == 0)
        rc = sq_result_ws_add(dst, src->ws);
    if (rc < 0)
        return rc;
    dst->setup_ns = max64(dst->setup_ns, src->setup_ns);
    dst->duration_ns = max64(dst->duration_ns, src->duration_ns);
    dst->spin_ns = max64(dst->spin_ns, src->spin_ns);
    dst->precision = src->precision;
    dst->pace_tail_ns = max64(dst->pace_tail_ns, src->pace_tail_ns);
    dst->pace_wakes += src->pace_wakes;
    dst->pace_deaf += src->pace_deaf;
    if (src->pool.grown && (!dst->pool.grown || src->pool.first_ns < dst->pool.first_ns))
        dst->pool.first_ns = src->pool.first_ns; /* the times mean something once it grew */
    if (src->pool.grown && (!dst->pool.grown || src->pool.last_ns > dst->pool.last_ns))
        dst->pool.last_ns = src->pool.last_ns;
    dst->pool.pre += src->pool.pre;
    dst->pool.cap += src->pool.cap;
    dst->pool.peak += src->pool.peak;
    dst->pool.grown += src->pool.grown;
    dst->dns_ns = max64(dst->dns_ns, src->dns_ns);
    dst->dns_lookups += src->dns_lookups;
    dst->threads += src->threads;
    dst->connections += src->connections;
    dst->samples_written += src->samples_written;
    dst->samples_lost += src->samples_lost;
    if (src->aborted && !dst->aborted)
        snprintf(dst->abort_reason, sizeof(dst->abort_reason), "%s", src->abort_reason);
    dst->aborted |= src->aborted;
    dst->tls |= src->tls;
    if (!dst->tls_version && src->tls_version) {
        dst->tls_version = src->tls_version;
        dst->tls_cipher = src->tls_cipher;
        dst->tls_alpn = src->tls_alpn;
    }
    if (!dst->tls_error[0] && src->tls_error[0])
        snprintf(dst->tls_error, sizeof(dst->tls_error), "%s", src->tls_error);
    sq_result_quic_add(&dst->quic, &src->quic);
    dst->script_stopped += src->script_stopped;
    if (!dst->script_error && src->script_error && !(dst->script_error = strdup(src->script_error)))
        return -ENOMEM;
    return 0;
}

void sq_result_quic_add(struct sq_quic_stats *d, const struct sq_quic_stats *s)
{
    if (!s->connections && !s->send_calls && !s->recv_calls)
        return;
    if (!d->connections && !d->send_calls && !d->recv_calls) {
        d->batch = s->batch;
        d->buf_asked = s->buf_asked;
    }
    d->connections += s->connections;
    d->datagrams_sent += s->datagrams_sent;
    d->datagrams_received += s->datagrams_received;
    d->resumed += s->resumed;
    d->early_accepted += s->early_accepted;
    d->early_rejected += s->early_rejected;
    d->cwnd_sum += s->cwnd_sum;
    if (s->cwnd_max > d->cwnd_max)
        d->cwnd_max = s->cwnd_max;
    d->srtt_max_ns = max64(d->srtt_max_ns, s->srtt_max_ns);
    d->packets_lost += s->packets_lost;
    d->pto_count += s->pto_count;
    d->send_calls += s->send_calls;
    d->recv_calls += s->recv_calls;
    d->gso_sends += s->gso_sends;
    d->gso |= s->gso;
    if (s->rcvbuf_min && (!d->rcvbuf_min || s->rcvbuf_min < d->rcvbuf_min))
        d->rcvbuf_min = s->rcvbuf_min;
    if (s->sndbuf_min && (!d->sndbuf_min || s->sndbuf_min < d->sndbuf_min))
        d->sndbuf_min = s->sndbuf_min;
}
