/* Unit tests: cluster/ (the clock estimate, the wire codec, the lossless merge of agents'
 * results, parts, and the control-plane NATS connection against a real nats-server). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <netinet/in.h>

#include "base/clock.h"
#include "cluster/ctlbus.h"
#include "cluster/cluster.h"
#include "cluster/internal.h"
#include "cluster/wire.h"
#include "stats/hist.h"

extern char **environ;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* ---- the clock estimate ---- */

static void clock_offset(void **state)
{
    (void)state;
    /* The agent's clock runs 250 ms ahead; one-way delays vary, the shortest round trip wins. */
    const int64_t off = 250 * SQ_NS_PER_MS;
    struct sq_clock_sample s[16];
    for (int i = 0; i < 16; i++) {
        int64_t send = 1000000000LL * i, up = 200000 + (int64_t)(rng() % 3000000),
                down = 200000 + (int64_t)(rng() % 3000000);
        int64_t tc = send + up; /* the controller's clock is the true time */
        s[i] = (struct sq_clock_sample){send + off, tc, tc + down + off};
    }
    s[7] = (struct sq_clock_sample){7000000000LL + off, 7000000000LL + 60000,
                                    7000000000LL + 100000 + off}; /* the fastest: 100 µs */
    struct sq_clock_est e;
    assert_int_equal(sq_clock_estimate(s, 16, &e), 0);
    assert_int_equal(e.rtt_ns, 100000);
    assert_int_equal(e.uncertainty_ns, 50000);
    assert_int_equal(e.samples, 16);
    /* the truth is within the bound, and the bound is half the shortest round trip */
    assert_true(llabs(e.offset_ns - off) <= e.uncertainty_ns);
    assert_int_equal(e.offset_ns, off - 10000); /* the middle: up 60 µs, down 40 µs */
    /* far-apart clocks (different boots) do not overflow */
    struct sq_clock_sample far = {INT64_MAX / 2, -INT64_MAX / 4, INT64_MAX / 2 + 1000};
    assert_int_equal(sq_clock_estimate(&far, 1, &e), 0);
    assert_int_equal(e.offset_ns, INT64_MAX / 2 + INT64_MAX / 4 + 500);
    struct sq_clock_sample bad = {10, 0, 5};
    assert_int_equal(sq_clock_estimate(&bad, 1, &e), -EINVAL);
    assert_int_equal(sq_clock_estimate(NULL, 0, &e), -EINVAL);
}

/* ---- the wire ---- */

static void counters_all_named(void **state)
{
    (void)state;
    /* A counter added to the engine without a name on the wire would vanish from distributed
     * runs: this fails instead. */
    assert_int_equal(sq_wire_counter_words(), sizeof(struct sq_counters) / sizeof(uint64_t));
}

static void fill_hist(struct sq_hist *h, int n, int64_t scale)
{
    for (int i = 0; i < n; i++)
        assert_true(sq_hist_record(h, 1 + (int64_t)(rng() % (uint64_t)scale)));
}

static void assert_hist_equal(const struct sq_hist *a, const struct sq_hist *b)
{
    assert_int_equal(sq_hist_total(a), sq_hist_total(b));
    assert_int_equal(sq_hist__counts_len(a), sq_hist__counts_len(b));
    for (int32_t i = 0; i < sq_hist__counts_len(a); i++)
        assert_int_equal(sq_hist__count_at_index(a, i), sq_hist__count_at_index(b, i));
    assert_int_equal(sq_hist_min(a), sq_hist_min(b));
    assert_int_equal(sq_hist_max(a), sq_hist_max(b));
}

static void second_round_trip(void **state)
{
    (void)state;
    struct sq_second s = {.t_s = 3.0,
                          .len_s = 1.0,
                          .sent = 1000,
                          .completed = 990,
                          .failed = 7,
                          .dropped = 3,
                          .errors = 7,
                          .bytes_received = 123456,
                          .active = 12,
                          .p50_us = 800,
                          .p99_us = 4000,
                          .max_us = 9000};
    s.status[2] = 980;
    s.status[5] = 10;
    s.errk[SQ_ERRK_TIMEOUT] = 7;
    struct sq_hist *h, *hu;
    assert_int_equal(sq_latency_hist_new(&h), 0);
    assert_int_equal(sq_latency_hist_new(&hu), 0);
    fill_hist(h, 990, 50000);
    fill_hist(hu, 990, 5000);
    json_t *j = sq_wire_second(&s, h, hu);
    assert_non_null(j);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    json_t *back = json_loads(text, 0, NULL);
    free(text);
    struct sq_second r;
    struct sq_hist *rh, *rhu;
    char err[128];
    assert_int_equal(sq_wire_second_read(back, &r, &rh, &rhu, err, sizeof(err)), 0);
    assert_memory_equal(&r, &s, sizeof(s));
    assert_hist_equal(rh, h);
    assert_hist_equal(rhu, hu);
    sq_hist_free(rh);
    sq_hist_free(rhu);
    /* hostile input: a histogram of another configuration, not base64, a negative count */
    struct sq_hist *other;
    assert_int_equal(sq_hist_new(1, 1000, 2, &other), 0);
    json_t *jo = sq_wire_hist(other);
    json_object_set_new(back, "h", jo);
    assert_int_equal(sq_wire_second_read(back, &r, &rh, &rhu, err, sizeof(err)), -SQ_EDECODE);
    json_object_set_new(back, "h", json_string("not base64!"));
    assert_true(sq_wire_second_read(back, &r, &rh, &rhu, err, sizeof(err)) < 0);
    json_object_set_new(back, "h", json_null());
    json_object_set_new(back, "sent", json_integer(-1));
    assert_int_equal(sq_wire_second_read(back, &r, &rh, &rhu, err, sizeof(err)), -SQ_EPARSE);
    json_decref(back);
    sq_hist_free(other);
    sq_hist_free(h);
    sq_hist_free(hu);
}

/* A second's plan metrics travel with it, and with a result's series: counts and sums as they
 * were, the latest sample's time by its age (the reader's clock: within the trip's time); a
 * second without them reads as none; hostile arrays are refused. */
static void msecond_round_trip(void **state)
{
    (void)state;
    int64_t now = sq_now_ns();
    struct sq_msecond m[2] = {{.n = 5, .nonzero = 4, .sum = 12.5, .last = 3, .last_ns = now - 1000},
                              {0}};
    struct sq_second s = {.t_s = 1, .len_s = 1, .sent = 5, .m = m, .nm = 2};
    json_t *j = sq_wire_second(&s, NULL, NULL);
    assert_non_null(j);
    struct sq_msecond *back;
    uint32_t nm;
    assert_int_equal(sq_wire_msecond_read(j, &back, &nm), 0);
    assert_int_equal(nm, 2);
    assert_int_equal(back[0].n, 5);
    assert_int_equal(back[0].nonzero, 4);
    assert_true(back[0].sum == 12.5 && back[0].last == 3);
    assert_true(back[0].last_ns > 0 && back[0].last_ns <= sq_now_ns() - 1000);
    assert_int_equal(back[1].n, 0);
    assert_int_equal(back[1].last_ns, 0);
    free(back);
    json_object_set_new(j, "m",
                        json_pack("[[I, I, f, f, I]]", (json_int_t)1, (json_int_t)2, 1.0, 1.0,
                                  (json_int_t)-1)); /* more passes than samples */
    assert_int_equal(sq_wire_msecond_read(j, &back, &nm), -SQ_EPARSE);
    json_object_set_new(j, "m", json_string("x"));
    assert_int_equal(sq_wire_msecond_read(j, &back, &nm), -SQ_EPARSE);
    json_object_del(j, "m");
    assert_int_equal(sq_wire_msecond_read(j, &back, &nm), 0);
    assert_null(back);
    assert_int_equal(nm, 0);
    json_decref(j);
    /* in a result's series */
    struct sq_result r = {0};
    struct sq_second sv[2] = {{.t_s = 1, .len_s = 1}, {.t_s = 2, .len_s = 1}};
    struct sq_msecond ms[4] = {{.n = 1, .sum = 2}, {.n = 2, .nonzero = 1}, {.n = 3, .sum = 6}, {0}};
    r.series = (struct sq_series){.v = sv, .n = 2, .cap = 2};
    r.mseries = ms;
    r.nmetrics = 2;
    json_t *jr = sq_wire_result(&r);
    assert_non_null(jr);
    struct sq_wire_res w;
    char err[128];
    assert_int_equal(sq_wire_result_read(jr, &w, err, sizeof(err)), 0);
    assert_int_equal(w.r.nmetrics, 2);
    assert_int_equal(w.r.series.n, 2);
    assert_int_equal(w.r.mseries[1].n, 2);
    assert_int_equal(w.r.mseries[1].nonzero, 1);
    assert_int_equal(w.r.mseries[2].n, 3);
    assert_true(w.r.mseries[2].sum == 6);
    sq_wire_res_dispose(&w);
    json_decref(jr);
}

/* A result like a plan run's: two scenarios with steps, statuses and checks. */
static void make_result(struct sq_result *r, int64_t scale, const char *const *names)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(sq_latency_hist_new(&r->latency), 0);
    assert_int_equal(sq_latency_hist_new(&r->latency_uncorrected), 0);
    r->open = true;
    r->c.sent = 100 + rng() % 1000;
    r->c.completed = r->c.sent - 3;
    r->c.failed = 2;
    r->in_flight = 1;
    r->c.errors[SQ_ERRK_TIMEOUT] = 2;
    r->c.status[2] = r->c.completed;
    r->c.sse_events = rng() % 77;
    r->arrivals = r->c.sent + 5;
    r->c.dropped = 5;
    r->duration_ns = (int64_t)(rng() % SQ_NS_PER_S) + 5 * SQ_NS_PER_S;
    r->threads = 2;
    r->connections = 8;
    fill_hist(r->latency, (int)r->c.completed, scale);
    fill_hist(r->latency_uncorrected, (int)r->c.completed, scale / 2);
    for (int k = 0; k < SQ_PHASE_COUNT; k += 2) {
        assert_int_equal(sq_latency_hist_new(&r->phase[k]), 0);
        fill_hist(r->phase[k], 50, scale);
    }
    r->nscens = 2;
    r->scens = calloc(2, sizeof(*r->scens));
    for (uint32_t i = 0; i < 2; i++) {
        struct sq_scen_result *s = &r->scens[i];
        s->name = names[i];
        s->c.sent = 10 + i;
        s->vus_max = 3 + i;
        s->interrupted = i;
        assert_int_equal(sq_latency_hist_new(&s->latency), 0);
        assert_int_equal(sq_latency_hist_new(&s->iter_dur), 0);
        fill_hist(s->latency, 20, scale);
        fill_hist(s->iter_dur, 20, scale * 3);
        s->nsteps = 2;
        s->steps = calloc(2, sizeof(*s->steps));
        for (size_t k = 0; k < 2; k++) {
            struct sq_step_stats *st = &s->steps[k];
            st->reqs = 20;
            st->failed = 1;
            st->nchecks = (uint32_t)k + 1;
            st->check_pass = calloc(k + 1, sizeof(uint64_t));
            st->check_fail = calloc(k + 1, sizeof(uint64_t));
            st->check_pass[0] = 19;
            st->check_fail[0] = 1;
            assert_int_equal(sq_latency_hist_new(&st->dur), 0);
            fill_hist(st->dur, 20, scale);
            st->nstatus = 2;
            st->by_status[0].status = 200;
            st->by_status[0].n = 19;
            st->by_status[1].status = (uint16_t)(k ? 404 : 500);
            st->by_status[1].n = 1;
            for (int b = 0; b < 2; b++) {
                assert_int_equal(sq_latency_hist_new(&st->by_status[b].h), 0);
                fill_hist(st->by_status[b].h, (int)st->by_status[b].n, scale);
            }
        }
    }
    /* group_duration: scenario 1 has two groups; batch_duration: its first step starts a batch */
    assert_int_equal(sq_group_hists_new(2, &r->scens[1].group_dur), 0);
    r->scens[1].ngroups = 2;
    fill_hist(r->scens[1].group_dur[0], 30, scale * 2);
    fill_hist(r->scens[1].group_dur[1], 10, scale);
    assert_int_equal(sq_latency_hist_new(&r->scens[1].steps[0].batch_dur), 0);
    fill_hist(r->scens[1].steps[0].batch_dur, 20, scale * 4);
    /* the plan's own metrics on one step: a trend with samples, a counter whose sum overflowed */
    struct sq_step_stats *ms = &r->scens[1].steps[0];
    assert_int_equal(sq_step_stats_metrics(ms, 2), 0);
    ms->mvals[0] = (struct sq_step_mval){.n = 20,
                                         .nonzero = 19,
                                         .bad = 2,
                                         .sum = 12.5,
                                         .last = 0.75,
                                         .last_ns = sq_now_ns() - SQ_NS_PER_S,
                                         .h = ms->mvals[0].h};
    fill_hist(ms->mvals[0].h, 20, scale);
    ms->mvals[1].n = ms->mvals[1].nonzero = 1;
    ms->mvals[1].sum = ms->mvals[1].last = INFINITY;
    ms->mvals[1].last_ns = sq_now_ns();
    r->series.n = r->series.cap = 3;
    r->series.v = calloc(3, sizeof(*r->series.v));
    for (size_t i = 0; i < 3; i++)
        r->series.v[i] = (struct sq_second){.t_s = (double)i + 1, .len_s = 1, .sent = 7 * i};
    r->aborted = true;
    snprintf(r->abort_reason, sizeof(r->abort_reason), "stopped by request");
    r->tls_version = "TLSv1.3";
}

/* Encodes r, sends it through text as the wire does, and decodes it. */
static void through_wire(const struct sq_result *r, struct sq_wire_res *out)
{
    json_t *j = sq_wire_result(r);
    assert_non_null(j);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    json_t *back = json_loads(text, 0, NULL);
    free(text);
    char err[128];
    assert_int_equal(sq_wire_result_read(back, out, err, sizeof(err)), 0);
    json_decref(back);
}

static void result_round_trip(void **state)
{
    (void)state;
    const char *names[] = {"browse", "buy"};
    struct sq_result r;
    make_result(&r, 100000, names);
    struct sq_wire_res w;
    through_wire(&r, &w);
    assert_memory_equal(&w.r.c, &r.c, sizeof(r.c));
    assert_int_equal(w.r.in_flight, 1);
    assert_int_equal(w.r.arrivals, r.arrivals);
    assert_int_equal(w.r.duration_ns, r.duration_ns);
    assert_true(w.r.open && w.r.aborted);
    assert_string_equal(w.r.abort_reason, "stopped by request");
    assert_string_equal(w.r.tls_version, "TLSv1.3");
    assert_hist_equal(w.r.latency, r.latency);
    assert_hist_equal(w.r.latency_uncorrected, r.latency_uncorrected);
    for (int k = 0; k < SQ_PHASE_COUNT; k++) {
        assert_int_equal(w.r.phase[k] != NULL, r.phase[k] != NULL);
        if (r.phase[k])
            assert_hist_equal(w.r.phase[k], r.phase[k]);
    }
    assert_int_equal(w.r.nscens, 2);
    assert_string_equal(w.r.scens[1].name, "buy");
    assert_int_equal(w.r.scens[1].vus_max, 4);
    assert_int_equal(w.r.scens[1].steps[1].nchecks, 2);
    assert_int_equal(w.r.scens[1].steps[1].by_status[1].status, 404);
    assert_hist_equal(w.r.scens[0].steps[0].by_status[0].h, r.scens[0].steps[0].by_status[0].h);
    assert_int_equal(w.r.series.n, 3);
    assert_int_equal(w.r.series.v[2].sent, 14);
    assert_null(w.r.script_error);
    /* a step's metric samples: every figure, the latest sample's time on this clock */
    assert_int_equal(w.r.scens[0].steps[0].nmvals, 0);
    const struct sq_step_stats *mb = &w.r.scens[1].steps[0], *ma = &r.scens[1].steps[0];
    assert_int_equal(mb->nmvals, 2);
    assert_int_equal(mb->mvals[0].n, 20);
    assert_int_equal(mb->mvals[0].nonzero, 19);
    assert_int_equal(mb->mvals[0].bad, 2);
    assert_true(mb->mvals[0].sum == 12.5 && mb->mvals[0].last == 0.75);
    assert_true(mb->mvals[0].last_ns >= ma->mvals[0].last_ns &&
                mb->mvals[0].last_ns < mb->mvals[1].last_ns); /* the order kept */
    assert_hist_equal(mb->mvals[0].h, ma->mvals[0].h);
    assert_true(isinf(mb->mvals[1].sum) && mb->mvals[1].sum > 0 && isinf(mb->mvals[1].last));
    assert_int_equal(sq_hist_total(mb->mvals[1].h), 0);
    /* group_duration per group and a batch's batch_duration come back bucket for bucket, and
     * merge as the other trends do (a distributed run's agents) */
    assert_int_equal(w.r.scens[0].ngroups, 0);
    assert_null(w.r.scens[0].group_dur);
    assert_int_equal(w.r.scens[1].ngroups, 2);
    assert_hist_equal(w.r.scens[1].group_dur[0], r.scens[1].group_dur[0]);
    assert_hist_equal(w.r.scens[1].group_dur[1], r.scens[1].group_dur[1]);
    assert_hist_equal(w.r.scens[1].steps[0].batch_dur, r.scens[1].steps[0].batch_dur);
    assert_null(w.r.scens[1].steps[1].batch_dur);
    struct sq_result gm = {0};
    assert_int_equal(sq_result_merge(&gm, &w.r), 0);
    assert_int_equal(sq_result_merge(&gm, &w.r), 0);
    assert_int_equal(gm.scens[1].ngroups, 2);
    assert_int_equal(sq_hist_total(gm.scens[1].group_dur[0]),
                     2 * sq_hist_total(r.scens[1].group_dur[0]));
    assert_int_equal(sq_hist_total(gm.scens[1].steps[0].batch_dur),
                     2 * sq_hist_total(r.scens[1].steps[0].batch_dur));
    sq_result_dispose(&gm);
    sq_wire_res_dispose(&w);
    /* a WebSocket run's own figures: counts, tallies by key, histograms */
    r.ws = calloc(1, sizeof(*r.ws));
    assert_non_null(r.ws);
    assert_int_equal(sq_latency_hist_new(&r.ws->upgrade_us), 0);
    fill_hist(r.ws->upgrade_us, 500, 20000);
    r.ws->upgrades = 7;
    r.ws->messages_received = 1234;
    r.ws->closes_sent = 7;
    sq_ws_tally_add(&r.ws->close_codes, 1000, 5);
    sq_ws_tally_add(&r.ws->close_codes, 1006, 2);
    sq_ws_tally_add(&r.ws->upgrade_failed, SQ_WS_UP_TIMEOUT, 3);
    r.ws->upgrade_failed.other = 4;
    through_wire(&r, &w);
    assert_non_null(w.r.ws);
    assert_int_equal(w.r.ws->upgrades, 7);
    assert_int_equal(w.r.ws->messages_received, 1234);
    assert_int_equal(w.r.ws->close_codes.n, 2);
    assert_int_equal(w.r.ws->close_codes.row[1].key, 1006);
    assert_int_equal(w.r.ws->close_codes.row[1].n, 2);
    assert_int_equal(w.r.ws->upgrade_failed.row[0].key, SQ_WS_UP_TIMEOUT);
    assert_int_equal(w.r.ws->upgrade_failed.other, 4);
    assert_hist_equal(w.r.ws->upgrade_us, r.ws->upgrade_us);
    assert_null(w.r.ws->ping_rtt_us);
    struct sq_result wsm = {0};
    assert_int_equal(sq_result_merge(&wsm, &w.r), 0);
    assert_int_equal(sq_result_merge(&wsm, &w.r), 0);
    assert_int_equal(wsm.ws->upgrades, 14);
    assert_int_equal(wsm.ws->close_codes.row[0].n, 10);
    assert_int_equal(wsm.ws->upgrade_failed.other, 8);
    assert_int_equal(sq_hist_total(wsm.ws->upgrade_us), 2 * sq_hist_total(r.ws->upgrade_us));
    sq_result_dispose(&wsm);
    sq_wire_res_dispose(&w);
    /* a hook's error and the threads thread:stop() ended come back too */
    r.script_error = strdup("hooks.lua:3: boom\nstack traceback: ...");
    r.script_stopped = 2;
    through_wire(&r, &w);
    assert_string_equal(w.r.script_error, r.script_error);
    assert_int_equal(w.r.script_stopped, 2);
    struct sq_result merged = {0};
    assert_int_equal(sq_result_merge(&merged, &w.r), 0);
    assert_int_equal(sq_result_merge(&merged, &w.r), 0);
    assert_string_equal(merged.script_error, r.script_error);
    assert_int_equal(merged.script_stopped, 4);
    sq_result_dispose(&merged);
    sq_wire_res_dispose(&w);
    /* an HTTP/3 run's QUIC figures come back, and merge: counts summed, maxima the larger */
    r.quic = (struct sq_quic_stats){.connections = 3,
                                    .datagrams_sent = 410,
                                    .datagrams_received = 520,
                                    .cwnd_sum = 3 * 12000,
                                    .cwnd_max = 15000,
                                    .srtt_max_ns = 250000};
    through_wire(&r, &w);
    assert_int_equal(w.r.quic.connections, 3);
    assert_int_equal(w.r.quic.datagrams_sent, 410);
    assert_int_equal(w.r.quic.datagrams_received, 520);
    assert_int_equal(w.r.quic.cwnd_sum, 36000);
    assert_int_equal(w.r.quic.cwnd_max, 15000);
    assert_int_equal(w.r.quic.srtt_max_ns, 250000);
    struct sq_result qm = {.quic = {.connections = 1,
                                    .datagrams_sent = 10,
                                    .datagrams_received = 20,
                                    .cwnd_sum = 40000,
                                    .cwnd_max = 40000,
                                    .srtt_max_ns = 100000}};
    assert_int_equal(sq_result_merge(&qm, &w.r), 0);
    assert_int_equal(qm.quic.connections, 4);
    assert_int_equal(qm.quic.datagrams_sent, 420);
    assert_int_equal(qm.quic.datagrams_received, 540);
    assert_int_equal(qm.quic.cwnd_sum, 76000); /* mean 19000: weighted by connections */
    assert_int_equal(qm.quic.cwnd_max, 40000);
    assert_int_equal(qm.quic.srtt_max_ns, 250000);
    sq_result_dispose(&qm);
    sq_wire_res_dispose(&w);
    sq_result_dispose(&r);
}

/* ---- sampled exchanges: over the wire, and merged across agents ---- */

static char *dup_n(const char *p, size_t n)
{
    char *d = malloc(n ? n : 1);
    assert_non_null(d);
    memcpy(d, p, n);
    return d;
}

/* Appends one kept exchange of class cls to xs (the caller sets xs->seen). body NULL: none. */
static void xs_add(struct sq_xsamples *xs, uint32_t cls, int64_t end_ns, const char *body,
                   size_t body_len)
{
    struct sq_xsample *v = realloc(xs->v, (xs->n + 1) * sizeof(*v));
    assert_non_null(v);
    xs->v = v;
    static const char req[] = "GET /x HTTP/1.1\r\nHost: a\r\n\r\n";
    static const char head[] = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 9\r\n\r\n";
    struct sq_xsample x = {
        .cls = cls,
        .end_ns = end_ns,
        .latency_us = 1234,
        .ttfb_us = cls < SQ_XS_STATUS_CLASSES ? 1200 : -1,
        .connect_us = 210,
        .tls_us = -1,
        .status = cls < SQ_XS_STATUS_CLASSES ? (uint16_t)(cls * 100 + 3) : 0,
        .error = cls < SQ_XS_STATUS_CLASSES ? -1 : (int)(cls - SQ_XS_STATUS_CLASSES),
        .req = dup_n(req, sizeof(req) - 1),
        .req_len = sizeof(req) - 1,
        .req_cut = true,
    };
    if (cls < SQ_XS_STATUS_CLASSES) {
        x.head = dup_n(head, sizeof(head) - 1);
        x.head_len = sizeof(head) - 1;
    }
    if (body) {
        x.body = dup_n(body, body_len);
        x.body_len = body_len;
        x.body_total = body_len + 100000;
    }
    xs->v[xs->n++] = x;
}

static void xsamples_over_the_wire(void **state)
{
    (void)state;
    const char *names[] = {"a", "b"};
    struct sq_result r;
    make_result(&r, 1000, names);
    r.xsamples.per_class = 2;
    r.xsamples.seen[2] = 900;
    r.xsamples.seen[5] = 40;
    r.xsamples.seen[SQ_XS_STATUS_CLASSES + SQ_ERRK_TIMEOUT] = 3;
    xs_add(&r.xsamples, 2, 100, "ok", 2);
    xs_add(&r.xsamples, 5, 200, "bad\0\xff\xfe tail", 11); /* not text: base64 keeps it */
    xs_add(&r.xsamples, 5, 300, NULL, 0);
    xs_add(&r.xsamples, SQ_XS_STATUS_CLASSES + SQ_ERRK_TIMEOUT, 400, NULL, 0);
    struct sq_wire_res w;
    through_wire(&r, &w);
    const struct sq_xsamples *a = &r.xsamples, *b = &w.r.xsamples;
    assert_int_equal(b->per_class, 2);
    assert_memory_equal(b->seen, a->seen, sizeof(a->seen));
    assert_int_equal(b->n, 4);
    for (size_t i = 0; i < 4; i++) {
        const struct sq_xsample *x = &a->v[i], *y = &b->v[i];
        assert_int_equal(y->cls, x->cls);
        assert_int_equal(y->end_ns, x->end_ns);
        assert_int_equal(y->latency_us, x->latency_us);
        assert_int_equal(y->ttfb_us, x->ttfb_us);
        assert_int_equal(y->connect_us, x->connect_us);
        assert_int_equal(y->tls_us, x->tls_us);
        assert_int_equal(y->status, x->status);
        assert_int_equal(y->error, x->error);
        assert_int_equal(y->req_len, x->req_len);
        assert_memory_equal(y->req, x->req, x->req_len);
        assert_true(y->req_cut);
        assert_int_equal(y->head != NULL, x->head != NULL);
        assert_int_equal(y->head_len, x->head_len);
        if (x->head)
            assert_memory_equal(y->head, x->head, x->head_len);
        assert_int_equal(y->body != NULL, x->body != NULL);
        assert_int_equal(y->body_len, x->body_len);
        assert_int_equal(y->body_total, x->body_total);
        if (x->body)
            assert_memory_equal(y->body, x->body, x->body_len);
    }
    sq_wire_res_dispose(&w);

    /* hostile: every bound is checked; a class this side does not know is skipped */
    json_t *j = sq_wire_result(&r);
    assert_non_null(j);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    struct {
        const char *from, *to;
        int rc;
    } bad[] = {
        {"\"per_class\":2", "\"per_class\":101", -SQ_EPARSE},
        {"\"per_class\":2", "\"per_class\":1", -SQ_EPARSE},     /* two kept of 5xx */
        {"\"class\":\"2xx\"", "\"class\":\"5xx\"", -SQ_EPARSE}, /* 5xx twice */
        {"\"body\":\"b2s=\"", "\"body\":\"b2s\"", -SQ_EPARSE},  /* not base64 */
        {"\"h2\":false", "\"h2\":1", -SQ_EPARSE},
        {"\"class\":\"timeout\"", "\"class\":\"from-the-future\"", 0},
        {"\"sum\":12.5", "\"sum\":\"12.5\"", -SQ_EPARSE}, /* a metric's figures */
        {"\"nonzero\":19", "\"nonzero\":21", -SQ_EPARSE},
        {"\"sum\":\"inf\"", "\"sum\":\"-inf\"", 0},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *at = strstr(text, bad[i].from);
        assert_non_null(at);
        size_t fl = strlen(bad[i].from), tl = strlen(bad[i].to), n = strlen(text);
        char *t = malloc(n - fl + tl + 1);
        assert_non_null(t);
        memcpy(t, text, (size_t)(at - text));
        memcpy(t + (at - text), bad[i].to, tl);
        memcpy(t + (at - text) + tl, at + fl, n - (size_t)(at - text) - fl + 1);
        json_t *back = json_loads(t, 0, NULL);
        assert_non_null(back);
        char err[128];
        assert_int_equal(sq_wire_result_read(back, &w, err, sizeof(err)), bad[i].rc);
        if (bad[i].rc == 0 && strstr(bad[i].to, "inf"))
            assert_true(w.r.scens[1].steps[0].mvals[1].sum < 0);
        else if (bad[i].rc == 0) {
            assert_int_equal(w.r.xsamples.n, 3);
            assert_int_equal(w.r.xsamples.seen[SQ_XS_STATUS_CLASSES + SQ_ERRK_TIMEOUT], 0);
        }
        sq_wire_res_dispose(&w);
        json_decref(back);
        free(t);
    }
    free(text);
    /* a body longer than a sample keeps */
    char big[SQ_SAMPLE_BODY_MAX + 1];
    memset(big, 'z', sizeof(big));
    xs_add(&r.xsamples, SQ_XS_CLASSES - 1, 500, big, sizeof(big)); /* (v stays sorted) */
    j = sq_wire_result(&r);
    char err[128];
    assert_int_equal(sq_wire_result_read(j, &w, err, sizeof(err)), -SQ_EPARSE);
    sq_wire_res_dispose(&w);
    json_decref(j);
    sq_result_dispose(&r);
}

static size_t count_body(const struct sq_xsamples *xs, uint32_t cls, char c)
{
    size_t n = 0;
    for (size_t i = 0; i < xs->n; i++)
        n += xs->v[i].cls == cls && xs->v[i].body && xs->v[i].body[0] == c;
    return n;
}

static size_t count_held(const struct sq_xsamples *xs)
{
    size_t n = 0;
    for (size_t i = 0; i < xs->n; i++)
        n += xs->v[i].req != NULL;
    return n;
}

/* Agents' samples merged (sq_xs_merge): per class at most per_class, seen summed, sorted, each
 * agent drawn in proportion to what it saw of the class, and every exchange owned once. */
static void xsamples_merge(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        struct sq_xsamples in[2] = {{.per_class = 3}, {.per_class = 3}};
        struct sq_xsamples *a = &in[order], *b = &in[1 - order];
        /* 2xx: a saw 5 (kept 2), b saw 4 (kept 3); 5xx: a saw a million, b three */
        a->seen[2] = 5;
        xs_add(a, 2, 10, "A", 1);
        xs_add(a, 2, 50, "A", 1);
        a->seen[5] = 1000000;
        for (int i = 0; i < 3; i++)
            xs_add(a, 5, 100 + i, "A", 1);
        b->seen[2] = 4;
        for (int i = 0; i < 3; i++)
            xs_add(b, 2, 20 + i, "B", 1);
        b->seen[5] = 3;
        for (int i = 0; i < 3; i++)
            xs_add(b, 5, 5 - i, "B", 1);
        struct sq_xsamples out;
        assert_int_equal(sq_xs_merge(in, 2, &out), 0);
        assert_int_equal(out.per_class, 3);
        assert_int_equal(out.seen[2], 9);
        assert_int_equal(out.seen[5], 1000003);
        assert_int_equal(out.n, 6);
        assert_int_equal(count_body(&out, 5, 'A'), 3); /* a million against three */
        assert_int_equal(count_body(&out, 2, 'A') + count_body(&out, 2, 'B'), 3);
        for (size_t i = 1; i < out.n; i++)
            assert_true(
                out.v[i - 1].cls < out.v[i].cls ||
                (out.v[i - 1].cls == out.v[i].cls && out.v[i - 1].end_ns <= out.v[i].end_ns));
        /* what moved is gone from the inputs: 11 in all, each held once */
        assert_int_equal(count_held(&out) + count_held(&in[0]) + count_held(&in[1]), 11);
        sq_result_dispose(&(struct sq_result){.xsamples = out});
        sq_result_dispose(&(struct sq_result){.xsamples = in[0]});
        sq_result_dispose(&(struct sq_result){.xsamples = in[1]});
    }
    /* in proportion: a saw three times what b saw; of 100 drawn from 100 + 100 kept, about 75
     * come from a (a fixed seed: the figure is the same every run) */
    struct sq_xsamples in[2] = {{.per_class = 100}, {.per_class = 100}}, out;
    in[0].seen[2] = 3000;
    in[1].seen[2] = 1000;
    for (int i = 0; i < 100; i++) {
        xs_add(&in[0], 2, i, "A", 1);
        xs_add(&in[1], 2, i, "B", 1);
    }
    assert_int_equal(sq_xs_merge(in, 2, &out), 0);
    assert_int_equal(out.n, 100);
    size_t from_a = count_body(&out, 2, 'A');
    assert_in_range(from_a, 62, 88);
    sq_result_dispose(&(struct sq_result){.xsamples = out});
    sq_result_dispose(&(struct sq_result){.xsamples = in[0]});
    sq_result_dispose(&(struct sq_result){.xsamples = in[1]});
    /* nothing sampled (--sample-responses 0): nothing out */
    struct sq_xsamples none[2] = {{0}, {0}};
    assert_int_equal(sq_xs_merge(none, 2, &out), 0);
    assert_int_equal(out.per_class, 0);
    assert_int_equal(out.n, 0);
    sq_result_dispose(&(struct sq_result){.xsamples = out});
    assert_int_equal(sq_xs_merge(none, 0, &out), 0);
    assert_int_equal(out.n, 0);
    sq_result_dispose(&(struct sq_result){.xsamples = out});
}

/* The merge is lossless: three agents' latencies, each recorded by its agent, sent over the wire
 * and merged, give bin for bin the histogram of every raw latency recorded into one; totals are
 * the sums. */
static void merge_is_lossless(void **state)
{
    (void)state;
    struct sq_hist *all;
    assert_int_equal(sq_latency_hist_new(&all), 0);
    struct sq_result merged = {0};
    uint64_t sent = 0, completed = 0;
    const char *names[] = {"a", "b"};
    for (int agent = 0; agent < 3; agent++) {
        struct sq_result r;
        make_result(&r, 1000, names);
        sq_hist_reset(r.latency);
        /* this agent's raw latencies: different shapes per agent */
        int n = 20000 + agent * 7919;
        for (int i = 0; i < n; i++) {
            int64_t v = agent == 0   ? 100 + (int64_t)(rng() % 900)
                        : agent == 1 ? 1000 + (int64_t)(rng() % 50000)
                                     : (int64_t)(rng() % 3000000) + 1;
            assert_true(sq_hist_record(r.latency, v));
            assert_true(sq_hist_record(all, v));
        }
        sent += r.c.sent;
        completed += r.c.completed;
        struct sq_wire_res w;
        through_wire(&r, &w);
        assert_int_equal(sq_result_merge(&merged, &w.r), 0);
        sq_wire_res_dispose(&w);
        sq_result_dispose(&r);
    }
    assert_hist_equal(merged.latency, all);
    for (double p = 0; p <= 100; p += 0.5)
        assert_int_equal(sq_hist_percentile(merged.latency, p), sq_hist_percentile(all, p));
    assert_int_equal(merged.c.sent, sent);
    assert_int_equal(merged.c.completed, completed);
    assert_int_equal(merged.in_flight, 3);
    assert_int_equal(merged.threads, 6);
    assert_int_equal(merged.nscens, 2);
    assert_int_equal(merged.scens[1].vus_max, 12);
    assert_int_equal(merged.scens[0].steps[1].check_pass[0], 57);
    assert_int_equal(merged.scens[0].steps[1].by_status[1].n, 3);
    /* the merged p99 is not the average of the agents' p99s (the reason for all this) */
    sq_result_dispose(&merged);
    sq_hist_free(all);
}

static void parts(void **state)
{
    (void)state;
    char run[40], agent[40];
    uint32_t i, n;
    const char *body;
    size_t blen;
    const char ok[] = "SQPART r1 a2 3 5\n{\"x\":1}";
    assert_int_equal(sq_cluster__part(ok, strlen(ok), run, agent, &i, &n, &body, &blen), 1);
    assert_string_equal(run, "r1");
    assert_string_equal(agent, "a2");
    assert_int_equal(i, 3);
    assert_int_equal(n, 5);
    assert_int_equal(blen, 7);
    assert_int_equal(sq_cluster__part("{}", 2, run, agent, &i, &n, &body, &blen), 0);
    const char *bad[] = {"SQPART r1 a2 5 5\nx", "SQPART r1 a2 0 0\nx", "SQPART r1\nx",
                         "SQPART r1 a2 1 2"};
    for (size_t k = 0; k < 4; k++)
        assert_int_equal(sq_cluster__part(bad[k], strlen(bad[k]), run, agent, &i, &n, &body, &blen),
                         -1);
    assert_true(sq_cluster__token_ok("agent-0_x"));
    assert_false(sq_cluster__token_ok("a.b"));
    assert_false(sq_cluster__token_ok(""));
    assert_false(sq_cluster__token_ok("a b"));
}

/* ---- the NATS connection, against a real nats-server ---- */

static pid_t nats_pid;
static uint16_t nats_port;

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(sa);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    getsockname(fd, (struct sockaddr *)&sa, &l);
    close(fd);
    return ntohs(sa.sin_port);
}

static char nats_conf[] = "/tmp/sq-nats-XXXXXX";
static const char *nats_bin;

/* Starts nats-server on nats_port and waits until it answers. */
static int spawn_nats(void)
{
    char port[16], a0[64], a1[] = "-a", a2[] = "127.0.0.1", a3[] = "-p", a5[] = "-c";
    snprintf(port, sizeof(port), "%u", nats_port);
    snprintf(a0, sizeof(a0), "%s", nats_bin);
    char *argv[] = {a0, a1, a2, a3, port, a5, nats_conf, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawn(&nats_pid, nats_bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    for (int i = 0; i < 200; i++) {
        char url[64], err[256];
        snprintf(url, sizeof(url), "nats://127.0.0.1:%u", nats_port);
        struct sq_ctlbus *b;
        if (sq_ctlbus_connect(url, "probe", NULL, false, SQ_NS_PER_S, &b, err, sizeof(err)) == 0) {
            sq_ctlbus_close(b);
            return 0;
        }
        struct timespec ts = {0, 20 * SQ_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static int start_nats(void **state)
{
    (void)state;
    if (access("/usr/sbin/nats-server", X_OK) != 0 && access("/usr/bin/nats-server", X_OK) != 0)
        return 0; /* the bus test skips */
    nats_bin = access("/usr/sbin/nats-server", X_OK) == 0 ? "/usr/sbin/nats-server"
                                                          : "/usr/bin/nats-server";
    nats_port = free_port();
    /* a small max_payload, so results in parts are tested with small messages */
    int cfd = mkstemp(nats_conf);
    if (cfd < 0)
        return -1;
    const char text[] = "max_payload: 65536\n";
    if (write(cfd, text, sizeof(text) - 1) != (ssize_t)(sizeof(text) - 1))
        return -1;
    close(cfd);
    return spawn_nats();
}

static int stop_nats(void **state)
{
    (void)state;
    if (nats_pid > 0) {
        kill(nats_pid, SIGTERM);
        waitpid(nats_pid, NULL, 0);
    }
    if (nats_bin)
        unlink(nats_conf);
    return 0;
}

static void bus_against_nats_server(void **state)
{
    (void)state;
    if (!nats_pid)
        skip();
    char url[64], err[256];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u", nats_port);
    struct sq_ctlbus *a, *b;
    assert_int_equal(sq_ctlbus_connect(url, "a", NULL, false, SQ_NS_PER_S, &a, err, sizeof(err)),
                     0);
    assert_int_equal(sq_ctlbus_connect(url, "b", NULL, false, SQ_NS_PER_S, &b, err, sizeof(err)),
                     0);
    assert_int_equal(sq_ctlbus_max_payload(a), 65536);
    uint64_t sid;
    assert_int_equal(sq_ctlbus_sub(b, "t.x", &sid), 0);
    assert_int_equal(sq_ctlbus_sync(b, SQ_NS_PER_S), 0);
    assert_int_equal(sq_ctlbus_pub(a, "t.x", "t.reply", "hello", 5), 0);
    struct sq_ctlbus_msg m;
    assert_int_equal(sq_ctlbus_next(b, SQ_NS_PER_S, &m), 1);
    assert_string_equal(m.subject, "t.x");
    assert_string_equal(m.reply, "t.reply");
    assert_int_equal(m.len, 5);
    assert_string_equal(m.data, "hello");
    assert_int_equal(m.sid, sid);
    sq_ctlbus_msg_dispose(&m);
    /* nothing more: a timeout, on time */
    int64_t t0 = sq_now_ns();
    assert_int_equal(sq_ctlbus_next(b, 100 * SQ_NS_PER_MS, &m), 0);
    int64_t took = sq_now_ns() - t0;
    assert_true(took >= 100 * SQ_NS_PER_MS && took < 600 * SQ_NS_PER_MS);
    /* messages that arrive during a sync are kept, in order */
    for (int i = 0; i < 50; i++) {
        char buf[16];
        int n = snprintf(buf, sizeof(buf), "m%d", i);
        assert_int_equal(sq_ctlbus_pub(a, "t.x", NULL, buf, (size_t)n), 0);
    }
    assert_int_equal(sq_ctlbus_sync(a, SQ_NS_PER_S), 0); /* they reached the server */
    assert_int_equal(sq_ctlbus_sync(b, SQ_NS_PER_S),
                     0); /* ... and were delivered before the PONG */
    for (int i = 0; i < 50; i++) {
        char want[16];
        snprintf(want, sizeof(want), "m%d", i);
        assert_int_equal(sq_ctlbus_next(b, SQ_NS_PER_S, &m), 1);
        assert_string_equal(m.data, want);
        sq_ctlbus_msg_dispose(&m);
    }
    /* over max_payload: refused here; in parts: whole at the other end */
    size_t big = 200000;
    char *text = malloc(big);
    for (size_t i = 0; i < big; i++)
        text[i] = (char)('a' + i % 26);
    assert_int_equal(sq_ctlbus_pub(a, "t.x", NULL, text, big), -SQ_ETOOBIG);
    assert_int_equal(sq_cluster__pub_big(a, "t.x", "run1", "ag1", text, big), 0);
    size_t got = 0;
    uint32_t expect = 0;
    while (got < big) {
        assert_int_equal(sq_ctlbus_next(b, SQ_NS_PER_S, &m), 1);
        char run[40], ag[40];
        uint32_t i, n;
        const char *body;
        size_t blen;
        assert_int_equal(sq_cluster__part(m.data, m.len, run, ag, &i, &n, &body, &blen), 1);
        assert_int_equal(i, expect++);
        assert_true(m.len <= 65536);
        assert_memory_equal(body, text + got, blen);
        got += blen;
        sq_ctlbus_msg_dispose(&m);
    }
    free(text);
    uint64_t bo, bi, mo, mi;
    sq_ctlbus_counts(a, &bo, &bi, &mo, &mi);
    assert_true(mo >= 55 && bo > big);
    sq_ctlbus_close(a);
    sq_ctlbus_close(b);
    /* what is not a NATS URL, and nothing listening */
    assert_int_equal(
        sq_ctlbus_connect("http://x", "c", NULL, false, SQ_NS_PER_S, &a, err, sizeof(err)),
        -SQ_EUSAGE);
    assert_int_equal(sq_ctlbus_connect("nats://127.0.0.1:99999", "c", NULL, false, SQ_NS_PER_S, &a,
                                       err, sizeof(err)),
                     -SQ_EUSAGE);
    assert_true(sq_ctlbus_connect("nats://127.0.0.1:1", "c", NULL, false, SQ_NS_PER_S, &a, err,
                                  sizeof(err)) < 0);
    assert_non_null(strstr(err, "cannot connect"));
}

/* The server dies (SIGKILL: every connection ends) and starts again on its port: a connection
 * finds itself broken, cannot redial while nothing listens, then redials, and its subscription
 * is back under the same sid. */
static void bus_reconnects_after_a_restart(void **state)
{
    (void)state;
    if (!nats_pid)
        skip();
    char url[64], err[256];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u", nats_port);
    struct sq_ctlbus *a, *b;
    assert_int_equal(sq_ctlbus_connect(url, "a", NULL, false, SQ_NS_PER_S, &a, err, sizeof(err)),
                     0);
    assert_int_equal(sq_ctlbus_connect(url, "b", NULL, false, SQ_NS_PER_S, &b, err, sizeof(err)),
                     0);
    uint64_t sid;
    assert_int_equal(sq_ctlbus_sub(b, "t.r", &sid), 0);
    assert_int_equal(sq_ctlbus_sync(b, SQ_NS_PER_S), 0);
    kill(nats_pid, SIGKILL);
    waitpid(nats_pid, NULL, 0);
    nats_pid = 0;
    struct sq_ctlbus_msg m;
    assert_true(sq_ctlbus_next(b, SQ_NS_PER_S, &m) < 0); /* the end of the connection */
    assert_true(sq_ctlbus_broken(b));
    assert_true(sq_ctlbus_next(b, 0, &m) < 0); /* and every later call, at once */
    assert_true(sq_ctlbus_reconnect(b, 200 * SQ_NS_PER_MS, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "cannot connect"));
    assert_true(sq_ctlbus_broken(b));
    assert_int_equal(spawn_nats(), 0);
    assert_int_equal(sq_ctlbus_reconnect(b, SQ_NS_PER_S, err, sizeof(err)), 0);
    assert_false(sq_ctlbus_broken(b));
    assert_int_equal(sq_ctlbus_max_payload(b), 65536); /* the new server's INFO */
    /* a has not read since: its first sync finds the old connection gone */
    assert_true(sq_ctlbus_sync(a, SQ_NS_PER_S) < 0);
    assert_int_equal(sq_ctlbus_reconnect(a, SQ_NS_PER_S, err, sizeof(err)), 0);
    assert_int_equal(sq_ctlbus_pub(a, "t.r", NULL, "again", 5), 0);
    assert_int_equal(sq_ctlbus_next(b, SQ_NS_PER_S, &m), 1);
    assert_string_equal(m.data, "again");
    assert_int_equal(m.sid, sid);
    sq_ctlbus_msg_dispose(&m);
    sq_ctlbus_close(a);
    sq_ctlbus_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(clock_offset),
        cmocka_unit_test(counters_all_named),
        cmocka_unit_test(second_round_trip),
        cmocka_unit_test(msecond_round_trip),
        cmocka_unit_test(result_round_trip),
        cmocka_unit_test(merge_is_lossless),
        cmocka_unit_test(xsamples_over_the_wire),
        cmocka_unit_test(xsamples_merge),
        cmocka_unit_test(parts),
        cmocka_unit_test(bus_against_nats_server),
        cmocka_unit_test(bus_reconnects_after_a_restart),
    };
    return cmocka_run_group_tests(tests, start_nats, stop_nats);
}
