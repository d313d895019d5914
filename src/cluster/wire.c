/* cluster/wire.c - seconds and results as JSON, both ways (wire.h).
 *
 * Every uint64 field of a struct is listed once, by name and offset, in a table below; encoding
 * and decoding walk the same table, so the two cannot disagree about a field. The unit test
 * checks that the counter table covers every word of struct sq_counters, so a counter added to
 * the engine without a name here fails a test instead of vanishing from distributed runs.
 */
#include "cluster/wire.h"

#include "plan/plan.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/b64.h"
#include "base/clock.h"
#include "plan/plan.h"
#include "stats/hist.h"

struct field {
    const char *name;
    size_t off;
};

#define CF(f)                                                                                      \
    {                                                                                              \
#f, offsetof(struct sq_counters, f)                                                        \
    }
static const struct field counter_fields[] = {
    CF(sent),
    CF(dropped),
    CF(completed),
    CF(failed),
    {"status_other", offsetof(struct sq_counters, status[0])},
    {"status_1xx", offsetof(struct sq_counters, status[1])},
    {"status_2xx", offsetof(struct sq_counters, status[2])},
    {"status_3xx", offsetof(struct sq_counters, status[3])},
    {"status_4xx", offsetof(struct sq_counters, status[4])},
    {"status_5xx", offsetof(struct sq_counters, status[5])},
    CF(bytes_sent),
    CF(bytes_received),
    CF(conns_opened),
    CF(conns_closed_by_server),
    CF(tls_handshakes),
    CF(tls_resumed),
    CF(tls_handshake_errors),
    CF(iterations),
    CF(checks_passed),
    CF(checks_failed),
    CF(http_failed),
    CF(rendered),
    CF(body_bytes),
    CF(compressed),
    CF(undecodable),
    CF(sse_streams),
    CF(sse_events),
    CF(script_requests),
    CF(script_responses),
    CF(script_delays),
    CF(script_hooks),
    CF(script_skips),
    CF(bus.reconnects),
    CF(bus.flushes),
    CF(bus.pings),
    CF(bus.drained),
    CF(bus.acks),
    CF(bus.duplicates),
    CF(bus.late),
    CF(bus.delivered),
    CF(bus.foreign),
    CF(bus.stamped),
    CF(bus.connacks),
    CF(bus.keepalive_pings),
    CF(bus.pingresps),
    CF(bus.refused[0]),
    CF(bus.refused[1]),
    CF(bus.refused[2]),
    CF(bus.refused[3]),
    CF(bus.refused[4]),
    CF(bus.refused[5]),
};
#undef CF

#define SF(f)                                                                                      \
    {                                                                                              \
#f, offsetof(struct sq_second, f)                                                          \
    }
static const struct field second_fields[] = {
    SF(sent),          SF(completed),      SF(failed),      SF(dropped),
    SF(errors),        SF(bytes_received), SF(bytes_sent),  SF(iterations),
    SF(checks_passed), SF(checks_failed),  SF(http_failed), SF(active),
};
#undef SF

size_t sq_wire_counter_words(void)
{
    bool seen[sizeof(struct sq_counters) / sizeof(uint64_t)] = {0};
    size_t n = 0;
    for (size_t i = 0; i < SQ_ARRAY_LEN(counter_fields); i++) {
        size_t w = counter_fields[i].off / sizeof(uint64_t);
        n += !seen[w];
        seen[w] = true;
    }
    for (int k = 0; k < SQ_ERRK_COUNT; k++) {
        size_t w = offsetof(struct sq_counters, errors[k]) / sizeof(uint64_t);
        n += !seen[w];
        seen[w] = true;
    }
    return n;
}

static uint64_t *u64_at(void *base, size_t off)
{
    return (uint64_t *)(void *)((char *)base + off);
}

static const uint64_t *cu64_at(const void *base, size_t off)
{
    return (const uint64_t *)(const void *)((const char *)base + off);
}

/* An unsigned count out of JSON: an integer >= 0. */
static bool get_u64(const json_t *o, const char *key, uint64_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v)
        return true; /* absent: zero */
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static bool get_i64(const json_t *o, const char *key, int64_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v)
        return true;
    if (!json_is_integer(v))
        return false;
    *out = (int64_t)json_integer_value(v);
    return true;
}

static bool get_double(const json_t *o, const char *key, double *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v)
        return true;
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return true;
}

static void put_u64(json_t *o, const char *key, uint64_t v)
{
    json_object_set_new(o, key, json_integer((json_int_t)v));
}

static json_t *counters(const struct sq_counters *c)
{
    json_t *o = json_object();
    for (size_t i = 0; i < SQ_ARRAY_LEN(counter_fields); i++)
        put_u64(o, counter_fields[i].name, *cu64_at(c, counter_fields[i].off));
    json_t *e = json_object();
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        put_u64(e, sq_errk_name((enum sq_errk)k), c->errors[k]);
    json_object_set_new(o, "errors", e);
    return o;
}

static bool counters_read(const json_t *o, struct sq_counters *c)
{
    memset(c, 0, sizeof(*c));
    if (!json_is_object(o))
        return false;
    for (size_t i = 0; i < SQ_ARRAY_LEN(counter_fields); i++)
        if (!get_u64(o, counter_fields[i].name, u64_at(c, counter_fields[i].off)))
            return false;
    const json_t *e = json_object_get(o, "errors");
    if (e && !json_is_object(e))
        return false;
    for (int k = 0; e && k < SQ_ERRK_COUNT; k++)
        if (!get_u64(e, sq_errk_name((enum sq_errk)k), &c->errors[k]))
            return false;
    return true;
}

json_t *sq_wire_hist(const struct sq_hist *h)
{
    if (!h)
        return json_null();
    unsigned char *blob = NULL;
    size_t len = 0;
    if (sq_hist_encode(h, &blob, &len) < 0)
        return NULL;
    char *b64 = malloc(sq_b64_encoded_len(len));
    if (!b64) {
        free(blob);
        return NULL;
    }
    sq_b64_encode(blob, len, b64);
    free(blob);
    json_t *s = json_string(b64);
    free(b64);
    return s;
}

int sq_wire_hist_read(const json_t *j, struct sq_hist **out)
{
    *out = NULL;
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_string(j))
        return -SQ_EPARSE;
    unsigned char *blob = NULL;
    size_t blen = 0;
    int rc = sq_b64_decode(json_string_value(j), json_string_length(j), &blob, &blen);
    if (rc < 0)
        return rc == -ENOMEM ? rc : -SQ_EPARSE;
    struct sq_hist *h = NULL;
    rc = sq_hist_decode(blob, blen, &h);
    free(blob);
    if (rc < 0)
        return rc == -ENOMEM ? rc : -SQ_EDECODE;
    if (sq_hist_lowest(h) != SQ_LATENCY_LOWEST_US || sq_hist_highest(h) != SQ_LATENCY_HIGHEST_US ||
        sq_hist_sigfigs(h) != SQ_LATENCY_SIGFIGS) {
        sq_hist_free(h);
        return -SQ_EDECODE; /* another configuration would not merge bucket for bucket */
    }
    *out = h;
    return 0;
}

/* Sets key to the histogram's JSON; false when it could not be encoded. */
static bool put_hist(json_t *o, const char *key, const struct sq_hist *h)
{
    json_t *v = sq_wire_hist(h);
    if (!v)
        return false;
    json_object_set_new(o, key, v);
    return true;
}

static json_t *real_json(double v);
static bool real_read(const json_t *v, double *out);

/* The plan's metrics of a second: "m": [[n, nonzero, sum, last, age], ...], age: how long ago
 * (ns) the latest sample was taken, -1 for none (monotonic clocks differ between machines: the
 * reader takes it from its own now, as the result's samples do). */
static bool put_msecond(json_t *o, const struct sq_msecond *m, uint32_t nm)
{
    json_t *a = json_array();
    int64_t now = sq_now_ns();
    for (uint32_t i = 0; a && i < nm; i++)
        if (json_array_append_new(
                a,
                json_pack("[I, I, o, o, I]", (json_int_t)m[i].n, (json_int_t)m[i].nonzero,
                          real_json(m[i].sum), real_json(m[i].last),
                          (json_int_t)(m[i].last_ns ? (now > m[i].last_ns ? now - m[i].last_ns : 0)
                                                    : -1))) < 0) {
            json_decref(a);
            return false;
        }
    return a && json_object_set_new(o, "m", a) == 0;
}

int sq_wire_msecond_read(const json_t *j, struct sq_msecond **out, uint32_t *nm)
{
    *out = NULL;
    *nm = 0;
    const json_t *a = json_object_get(j, "m");
    if (!a)
        return 0;
    if (!json_is_array(a) || json_array_size(a) > SQ_PLAN_METRICS_MAX)
        return -SQ_EPARSE;
    size_t n = json_array_size(a);
    if (!n)
        return 0;
    struct sq_msecond *m = calloc(n, sizeof(*m));
    if (!m)
        return -ENOMEM;
    int64_t now = sq_now_ns();
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(a, i);
        const json_t *f[5];
        bool ok = json_is_array(e) && json_array_size(e) == 5;
        for (size_t k = 0; ok && k < 5; k++)
            f[k] = json_array_get(e, k);
        ok = ok && json_is_integer(f[0]) && json_integer_value(f[0]) >= 0 &&
             json_is_integer(f[1]) && json_integer_value(f[1]) >= 0 &&
             json_integer_value(f[1]) <= json_integer_value(f[0]) && json_is_integer(f[4]) &&
             real_read(f[2], &m[i].sum) && real_read(f[3], &m[i].last);
        if (!ok) {
            free(m);
            return -SQ_EPARSE;
        }
        m[i].n = (uint64_t)json_integer_value(f[0]);
        m[i].nonzero = (uint64_t)json_integer_value(f[1]);
        json_int_t age = json_integer_value(f[4]);
        if (age >= 0)
            m[i].last_ns = now - age > 0 ? now - age : 1; /* 0 means no sample */
    }
    *out = m;
    *nm = (uint32_t)n;
    return 0;
}

json_t *sq_wire_second(const struct sq_second *s, const struct sq_hist *h, const struct sq_hist *hu)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "t", json_real(s->t_s));
    json_object_set_new(o, "len", json_real(s->len_s));
    for (size_t i = 0; i < SQ_ARRAY_LEN(second_fields); i++)
        put_u64(o, second_fields[i].name, *cu64_at(s, second_fields[i].off));
    json_object_set_new(o, "p50", json_integer(s->p50_us));
    json_object_set_new(o, "p90", json_integer(s->p90_us));
    json_object_set_new(o, "p99", json_integer(s->p99_us));
    json_object_set_new(o, "max", json_integer(s->max_us));
    json_t *st = json_array(), *ek = json_object();
    for (size_t i = 0; i < SQ_ARRAY_LEN(s->status); i++)
        json_array_append_new(st, json_integer((json_int_t)s->status[i]));
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        put_u64(ek, sq_errk_name((enum sq_errk)k), s->errk[k]);
    json_object_set_new(o, "status", st);
    json_object_set_new(o, "errk", ek);
    if (s->m && s->nm && !put_msecond(o, s->m, s->nm)) {
        json_decref(o);
        return NULL;
    }
    if ((h && !put_hist(o, "h", h)) || (hu && !put_hist(o, "hu", hu))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int sq_wire_second_read(const json_t *j, struct sq_second *s, struct sq_hist **h,
                        struct sq_hist **hu, char *err, size_t len)
{
    memset(s, 0, sizeof(*s));
    if (h)
        *h = *hu = NULL;
    bool ok = json_is_object(j) && get_double(j, "t", &s->t_s) && get_double(j, "len", &s->len_s);
    for (size_t i = 0; ok && i < SQ_ARRAY_LEN(second_fields); i++)
        ok = get_u64(j, second_fields[i].name, u64_at(s, second_fields[i].off));
    ok = ok && get_i64(j, "p50", &s->p50_us) && get_i64(j, "p90", &s->p90_us) &&
         get_i64(j, "p99", &s->p99_us) && get_i64(j, "max", &s->max_us);
    const json_t *st = ok ? json_object_get(j, "status") : NULL;
    if (st && (!json_is_array(st) || json_array_size(st) > SQ_ARRAY_LEN(s->status)))
        ok = false;
    for (size_t i = 0; ok && st && i < json_array_size(st); i++) {
        const json_t *v = json_array_get(st, i);
        ok = json_is_integer(v) && json_integer_value(v) >= 0;
        if (ok)
            s->status[i] = (uint64_t)json_integer_value(v);
    }
    const json_t *ek = ok ? json_object_get(j, "errk") : NULL;
    if (ek && !json_is_object(ek))
        ok = false;
    for (int k = 0; ok && ek && k < SQ_ERRK_COUNT; k++)
        ok = get_u64(ek, sq_errk_name((enum sq_errk)k), &s->errk[k]);
    if (!ok) {
        snprintf(err, len, "a second's figures are malformed");
        return -SQ_EPARSE;
    }
    if (!h)
        return 0;
    int rc = sq_wire_hist_read(json_object_get(j, "h"), h);
    if (rc == 0)
        rc = sq_wire_hist_read(json_object_get(j, "hu"), hu);
    if (rc < 0) {
        sq_hist_free(*h);
        *h = NULL;
        snprintf(err, len, "a second's histogram: %s", sq_strerror(rc));
        return rc;
    }
    return 0;
}

/* ---- whole results ---- */

static json_t *opt_str(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* A double that JSON can carry: a number, or "inf", "-inf", "nan" (a sample read as 1e999). */
static json_t *real_json(double v)
{
    if (isfinite(v))
        return json_real(v);
    return json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

static bool real_read(const json_t *v, double *out)
{
    if (!v)
        return true; /* absent: zero */
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    const char *s = json_string_value(v);
    if (!s)
        return false;
    if (!strcmp(s, "inf"))
        *out = INFINITY;
    else if (!strcmp(s, "-inf"))
        *out = -INFINITY;
    else if (!strcmp(s, "nan"))
        *out = NAN;
    else
        return false;
    return true;
}

/* One metric: entry's samples (struct sq_step_mval). The latest sample's time travels as its age
 * at encoding ("age", ns), since monotonic clocks of two machines do not compare; the reader
 * turns it back into a time on its own clock, so the merge's newest gauge value stays the newest
 * (to within the message's transit). */
static json_t *mval_json(const struct sq_step_mval *mv, int64_t now, bool *ok)
{
    json_t *o = json_object();
    put_u64(o, "n", mv->n);
    put_u64(o, "nonzero", mv->nonzero);
    put_u64(o, "bad", mv->bad);
    json_object_set_new(o, "sum", real_json(mv->sum));
    if (mv->n && mv->last_ns) {
        json_object_set_new(o, "last", real_json(mv->last));
        int64_t age = now - mv->last_ns;
        json_object_set_new(o, "age", json_integer(age > 0 ? age : 0));
    }
    *ok &= put_hist(o, "h", mv->h);
    return o;
}

static int read_mval(const json_t *j, struct sq_step_mval *mv, int64_t now)
{
    int64_t age = -1;
    if (!json_is_object(j) || !get_u64(j, "n", &mv->n) || !get_u64(j, "nonzero", &mv->nonzero) ||
        !get_u64(j, "bad", &mv->bad) || !real_read(json_object_get(j, "sum"), &mv->sum) ||
        !real_read(json_object_get(j, "last"), &mv->last) || !get_i64(j, "age", &age) ||
        mv->nonzero > mv->n)
        return -SQ_EPARSE;
    if (json_object_get(j, "age")) {
        if (age < 0 || !mv->n)
            return -SQ_EPARSE;
        mv->last_ns = now - age > 0 ? now - age : 1; /* 0 means no sample */
    }
    struct sq_hist *h = NULL;
    int rc = sq_wire_hist_read(json_object_get(j, "h"), &h);
    if (rc < 0)
        return rc;
    if (h) {
        sq_hist_free(mv->h);
        mv->h = h;
    }
    return 0;
}

static json_t *step_json(const struct sq_step_stats *st, bool *ok)
{
    json_t *o = json_object(), *bs = json_array(), *pass = json_array(), *fail = json_array();
    put_u64(o, "reqs", st->reqs);
    put_u64(o, "failed", st->failed);
    put_u64(o, "errors", st->errors);
    put_u64(o, "extract_fail", st->extract_fail);
    *ok &= put_hist(o, "dur", st->dur);
    if (st->batch_dur)
        *ok &= put_hist(o, "batch_dur", st->batch_dur);
    for (uint32_t i = 0; i < st->nstatus; i++) {
        json_t *h = sq_wire_hist(st->by_status[i].h);
        *ok &= h != NULL;
        json_array_append_new(bs, json_pack("[i, I, o]", st->by_status[i].status,
                                            (json_int_t)st->by_status[i].n, h ? h : json_null()));
    }
    for (uint32_t k = 0; k < st->nchecks; k++) {
        json_array_append_new(pass, json_integer((json_int_t)st->check_pass[k]));
        json_array_append_new(fail, json_integer((json_int_t)st->check_fail[k]));
    }
    json_object_set_new(o, "statuses", bs);
    json_object_set_new(o, "pass", pass);
    json_object_set_new(o, "fail", fail);
    if (st->nmvals) {
        json_t *ms = json_array();
        int64_t now = sq_now_ns();
        for (uint32_t k = 0; k < st->nmvals; k++)
            json_array_append_new(ms, mval_json(&st->mvals[k], now, ok));
        json_object_set_new(o, "metrics", ms);
    }
    return o;
}

/* A WebSocket run's figures (struct sq_ws_stats), named as in the struct. */
#define WF(f)                                                                                      \
    {                                                                                              \
#f, offsetof(struct sq_ws_stats, f)                                                        \
    }
static const struct field ws_fields[] = {
    WF(upgrades),       WF(messages_sent), WF(messages_received), WF(bytes_sent),
    WF(bytes_received), WF(unmatched),     WF(pings_sent),        WF(pongs_received),
    WF(pings_received), WF(pongs_sent),    WF(closes_sent),
};
#undef WF

/* An HTTP/3 run's QUIC figures (struct sq_quic_stats), named as in the struct: the controller
 * merges them (sq_result_merge) into the document's `quic` block. */
static json_t *quic_json(const struct sq_quic_stats *q)
{
    json_t *o = json_object();
    put_u64(o, "connections", q->connections);
    put_u64(o, "datagrams_sent", q->datagrams_sent);
    put_u64(o, "datagrams_received", q->datagrams_received);
    put_u64(o, "cwnd_sum", q->cwnd_sum);
    put_u64(o, "cwnd_max", q->cwnd_max);
    json_object_set_new(o, "srtt_max_ns", json_integer((json_int_t)q->srtt_max_ns));
    put_u64(o, "resumed", q->resumed);
    put_u64(o, "early_accepted", q->early_accepted);
    put_u64(o, "early_rejected", q->early_rejected);
    put_u64(o, "packets_lost", q->packets_lost);
    put_u64(o, "pto_count", q->pto_count);
    put_u64(o, "send_calls", q->send_calls);
    put_u64(o, "recv_calls", q->recv_calls);
    put_u64(o, "gso_sends", q->gso_sends);
    json_object_set_new(o, "rcvbuf_min", json_integer((json_int_t)q->rcvbuf_min));
    json_object_set_new(o, "sndbuf_min", json_integer((json_int_t)q->sndbuf_min));
    json_object_set_new(o, "buf_asked", json_integer((json_int_t)q->buf_asked));
    put_u64(o, "batch", q->batch);
    json_object_set_new(o, "gso", json_boolean(q->gso));
    return o;
}

static int quic_read(const json_t *j, struct sq_quic_stats *q)
{
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_object(j) || !get_u64(j, "connections", &q->connections) ||
        !get_u64(j, "datagrams_sent", &q->datagrams_sent) ||
        !get_u64(j, "datagrams_received", &q->datagrams_received) ||
        !get_u64(j, "cwnd_sum", &q->cwnd_sum) || !get_u64(j, "cwnd_max", &q->cwnd_max) ||
        !get_i64(j, "srtt_max_ns", &q->srtt_max_ns) || q->srtt_max_ns < 0)
        return -SQ_EPARSE;
    /* the figures added after the first (0-RTT, losses, UDP): absent (zero) in an older agent's */
    uint64_t batch = 0;
    if (!get_u64(j, "resumed", &q->resumed) || !get_u64(j, "early_accepted", &q->early_accepted) ||
        !get_u64(j, "early_rejected", &q->early_rejected) ||
        !get_u64(j, "packets_lost", &q->packets_lost) || !get_u64(j, "pto_count", &q->pto_count) ||
        !get_u64(j, "send_calls", &q->send_calls) || !get_u64(j, "recv_calls", &q->recv_calls) ||
        !get_u64(j, "gso_sends", &q->gso_sends) || !get_i64(j, "rcvbuf_min", &q->rcvbuf_min) ||
        !get_i64(j, "sndbuf_min", &q->sndbuf_min) || !get_i64(j, "buf_asked", &q->buf_asked) ||
        !get_u64(j, "batch", &batch) || batch > 2 || q->rcvbuf_min < 0 || q->sndbuf_min < 0 ||
        q->buf_asked < 0)
        return -SQ_EPARSE;
    q->batch = (uint8_t)batch;
    const json_t *g = json_object_get(j, "gso");
    if (g && !json_is_boolean(g))
        return -SQ_EPARSE;
    q->gso = g && json_is_true(g);
    return 0;
}

static json_t *tally_json(const struct sq_ws_tally *t)
{
    json_t *o = json_object(), *rows = json_array();
    for (uint32_t i = 0; i < t->n; i++)
        json_array_append_new(rows, json_pack("[iI]", (int)t->row[i].key, (json_int_t)t->row[i].n));
    json_object_set_new(o, "rows", rows);
    put_u64(o, "other", t->other);
    return o;
}

static json_t *ws_json(const struct sq_ws_stats *w, bool *ok)
{
    json_t *o = json_object();
    for (size_t i = 0; i < SQ_ARRAY_LEN(ws_fields); i++)
        put_u64(o, ws_fields[i].name, *cu64_at(w, ws_fields[i].off));
    json_object_set_new(o, "close_codes", tally_json(&w->close_codes));
    json_object_set_new(o, "upgrade_failed", tally_json(&w->upgrade_failed));
    if (w->upgrade_us)
        *ok &= put_hist(o, "upgrade_us", w->upgrade_us);
    if (w->ping_rtt_us)
        *ok &= put_hist(o, "ping_rtt_us", w->ping_rtt_us);
    return o;
}

static int tally_read(const json_t *j, struct sq_ws_tally *t)
{
    const json_t *rows = json_object_get(j, "rows");
    if (!json_is_object(j) || !json_is_array(rows) || !get_u64(j, "other", &t->other))
        return -SQ_EPARSE;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *r = json_array_get(rows, i);
        const json_t *k = json_array_get(r, 0), *n = json_array_get(r, 1);
        if (!json_is_array(r) || json_array_size(r) != 2 || !json_is_integer(k) ||
            !json_is_integer(n) || json_integer_value(k) < 0 ||
            json_integer_value(k) > UINT16_MAX || json_integer_value(n) < 0)
            return -SQ_EPARSE;
        sq_ws_tally_add(t, (uint16_t)json_integer_value(k), (uint64_t)json_integer_value(n));
    }
    return 0;
}

static int ws_read(const json_t *j, struct sq_result *r)
{
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_object(j))
        return -SQ_EPARSE;
    struct sq_ws_stats *w = r->ws = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    for (size_t i = 0; i < SQ_ARRAY_LEN(ws_fields); i++)
        if (!get_u64(j, ws_fields[i].name, u64_at(w, ws_fields[i].off)))
            return -SQ_EPARSE;
    int rc = tally_read(json_object_get(j, "close_codes"), &w->close_codes);
    if (rc == 0)
        rc = tally_read(json_object_get(j, "upgrade_failed"), &w->upgrade_failed);
    if (rc == 0)
        rc = sq_wire_hist_read(json_object_get(j, "upgrade_us"), &w->upgrade_us);
    if (rc == 0)
        rc = sq_wire_hist_read(json_object_get(j, "ping_rtt_us"), &w->ping_rtt_us);
    return rc;
}

/* ---- sampled exchanges (result/result.h): per class seen, and the kept ones ----
 * {"per_class": N, "classes": [{"class": "5xx", "seen": n, "samples": [{...}]}]}; a class by its
 * name (a status class, or an error kind's name); bytes (request, head, body) as base64, since
 * a sample keeps what came, text or not. Bounded on the way in: per_class at most
 * SQ_SAMPLE_RESPONSES_MAX, at most per_class samples per class, each class once, heads and
 * bodies as cut (SQ_SAMPLE_HEAD_MAX, SQ_SAMPLE_BODY_MAX), a request at most XS_REQ_MAX. */

#define XS_REQ_MAX (1u << 20)

static const char *const xs_status_names[SQ_XS_STATUS_CLASSES] = {"other", "1xx", "2xx",
                                                                  "3xx",   "4xx", "5xx"};

static const char *xs_class_name(uint32_t k)
{
    return k < SQ_XS_STATUS_CLASSES ? xs_status_names[k]
                                    : sq_errk_name((enum sq_errk)(k - SQ_XS_STATUS_CLASSES));
}

/* The class named s, or -1 (a class this side does not know: a newer error kind). */
static int xs_class_of(const char *s)
{
    for (uint32_t k = 0; k < SQ_XS_CLASSES; k++)
        if (strcmp(s, xs_class_name(k)) == 0)
            return (int)k;
    return -1;
}

static json_t *bytes_b64(const char *p, size_t n)
{
    if (!p)
        return json_null();
    char *t = malloc(sq_b64_encoded_len(n));
    if (!t)
        return NULL;
    sq_b64_encode(p, n, t);
    json_t *j = json_string(t);
    free(t);
    return j;
}

static json_t *xsample_json(const struct sq_xsample *x)
{
    json_t *req = bytes_b64(x->req ? x->req : "", x->req_len),
           *head = bytes_b64(x->head, x->head_len), *body = bytes_b64(x->body, x->body_len);
    if (!req || !head || !body) {
        json_decref(req);
        json_decref(head);
        json_decref(body);
        return NULL;
    }
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:b, s:o, s:b, s:o, s:I}", "end_ns",
                     (json_int_t)x->end_ns, "latency_us", (json_int_t)x->latency_us, "ttfb_us",
                     (json_int_t)x->ttfb_us, "connect_us", (json_int_t)x->connect_us, "tls_us",
                     (json_int_t)x->tls_us, "status", (json_int_t)x->status, "h2", x->h2, "req",
                     req, "req_cut", x->req_cut, "head", head, "head_cut", x->head_cut, "body",
                     body, "body_total", (json_int_t)x->body_total);
}

static json_t *xsamples_json(const struct sq_xsamples *xs, bool *ok)
{
    json_t *classes = json_array();
    size_t i = 0;
    for (uint32_t k = 0; k < SQ_XS_CLASSES; k++) {
        json_t *kept = json_array();
        for (; i < xs->n && xs->v[i].cls == k; i++) {
            json_t *e = xsample_json(&xs->v[i]);
            *ok &= e != NULL;
            if (e)
                json_array_append_new(kept, e);
        }
        if (!xs->seen[k] && !json_array_size(kept)) {
            json_decref(kept);
            continue;
        }
        json_array_append_new(classes, json_pack("{s:s, s:I, s:o}", "class", xs_class_name(k),
                                                 "seen", (json_int_t)xs->seen[k], "samples", kept));
    }
    return json_pack("{s:I, s:o}", "per_class", (json_int_t)xs->per_class, "classes", classes);
}

/* Bytes back from base64 (JSON null: none, *out NULL), at most max of them. */
static int get_bytes(const json_t *o, const char *key, size_t max, char **out, size_t *len)
{
    const json_t *v = json_object_get(o, key);
    *out = NULL;
    *len = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || json_string_length(v) > (max + 2) / 3 * 4)
        return -SQ_EPARSE;
    unsigned char *b = NULL;
    size_t n = 0;
    int rc = sq_b64_decode(json_string_value(v), json_string_length(v), &b, &n);
    if (rc < 0)
        return rc == -ENOMEM ? rc : -SQ_EPARSE;
    if (n > max) {
        free(b);
        return -SQ_EPARSE;
    }
    *out = (char *)b;
    *len = n;
    return 0;
}

static bool get_flag(const json_t *o, const char *key, bool *out)
{
    const json_t *v = json_object_get(o, key);
    if (v && !json_is_boolean(v))
        return false;
    *out = json_is_true(v);
    return true;
}

static int xsample_read(const json_t *j, uint32_t cls, struct sq_xsample *x)
{
    uint64_t status = 0;
    x->cls = cls;
    x->error = cls < SQ_XS_STATUS_CLASSES ? -1 : (int)(cls - SQ_XS_STATUS_CLASSES);
    if (!json_is_object(j) || !get_i64(j, "end_ns", &x->end_ns) ||
        !get_i64(j, "latency_us", &x->latency_us) || !get_i64(j, "ttfb_us", &x->ttfb_us) ||
        !get_i64(j, "connect_us", &x->connect_us) || !get_i64(j, "tls_us", &x->tls_us) ||
        !get_u64(j, "status", &status) || status > UINT16_MAX ||
        !get_u64(j, "body_total", &x->body_total) || !get_flag(j, "h2", &x->h2) ||
        !get_flag(j, "req_cut", &x->req_cut) || !get_flag(j, "head_cut", &x->head_cut))
        return -SQ_EPARSE;
    x->status = (uint16_t)status;
    int rc = get_bytes(j, "req", XS_REQ_MAX, &x->req, &x->req_len);
    if (rc == 0)
        rc = get_bytes(j, "head", SQ_SAMPLE_HEAD_MAX, &x->head, &x->head_len);
    if (rc == 0)
        rc = get_bytes(j, "body", SQ_SAMPLE_BODY_MAX, &x->body, &x->body_len);
    if (rc == 0 && x->body_total < x->body_len)
        rc = -SQ_EPARSE;
    return rc;
}

static int by_class_then_time(const void *a, const void *b)
{
    const struct sq_xsample *x = a, *y = b;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    return (x->end_ns > y->end_ns) - (x->end_ns < y->end_ns);
}

static int xsamples_read(const json_t *j, struct sq_xsamples *xs)
{
    if (!j || json_is_null(j))
        return 0;
    uint64_t per = 0;
    const json_t *classes = json_object_get(j, "classes");
    if (!json_is_object(j) || !get_u64(j, "per_class", &per) || per > SQ_SAMPLE_RESPONSES_MAX ||
        !json_is_array(classes))
        return -SQ_EPARSE;
    size_t cap = 0;
    for (size_t i = 0; i < json_array_size(classes); i++) {
        const json_t *kept = json_object_get(json_array_get(classes, i), "samples");
        if (!json_is_array(kept) || json_array_size(kept) > per)
            return -SQ_EPARSE;
        cap += json_array_size(kept);
    }
    xs->per_class = (uint32_t)per;
    xs->v = calloc(cap ? cap : 1, sizeof(*xs->v));
    if (!xs->v)
        return -ENOMEM;
    bool had[SQ_XS_CLASSES] = {false};
    for (size_t i = 0; i < json_array_size(classes); i++) {
        const json_t *c = json_array_get(classes, i), *name = json_object_get(c, "class"),
                     *kept = json_object_get(c, "samples");
        uint64_t seen = 0;
        if (!json_is_string(name) || !get_u64(c, "seen", &seen))
            return -SQ_EPARSE;
        int k = xs_class_of(json_string_value(name));
        if (k < 0)
            continue; /* a class this side does not know */
        if (had[k])
            return -SQ_EPARSE;
        had[k] = true;
        xs->seen[k] = seen;
        for (size_t s = 0; s < json_array_size(kept); s++) {
            int rc = xsample_read(json_array_get(kept, s), (uint32_t)k, &xs->v[xs->n++]);
            if (rc < 0)
                return rc;
        }
    }
    qsort(xs->v, xs->n, sizeof(*xs->v), by_class_then_time);
    return 0;
}

json_t *sq_wire_result(const struct sq_result *r)
{
    bool ok = true;
    json_t *o = json_object();
    json_object_set_new(o, "c", counters(&r->c));
    put_u64(o, "in_flight", r->in_flight);
    put_u64(o, "arrivals", r->arrivals);
    json_object_set_new(o, "open", json_boolean(r->open));
    ok &= put_hist(o, "latency", r->latency);
    ok &= put_hist(o, "latency_unc", r->latency_uncorrected);
    json_object_set_new(o, "setup_ns", json_integer(r->setup_ns));
    json_object_set_new(o, "duration_ns", json_integer(r->duration_ns));
    json_object_set_new(o, "spin_ns", json_integer(r->spin_ns));
    json_object_set_new(o, "dns_ns", json_integer(r->dns_ns));
    put_u64(o, "dns_lookups", r->dns_lookups);
    put_u64(o, "threads", r->threads);
    put_u64(o, "connections", r->connections);
    put_u64(o, "samples_written", r->samples_written);
    put_u64(o, "samples_lost", r->samples_lost);
    json_t *ph = json_object();
    for (int k = 0; k < SQ_PHASE_COUNT; k++) {
        json_t *h = sq_wire_hist(r->phase[k]);
        ok &= h != NULL;
        json_object_set_new(ph, sq_phase_name((enum sq_phase)k), h ? h : json_null());
    }
    json_object_set_new(o, "phases", ph);
    ok &= put_hist(o, "sse_first", r->sse_first_event);
    ok &= put_hist(o, "bus_connect", r->bus_connect);
    ok &= put_hist(o, "sse_dur", r->sse_duration);
    json_t *sc = json_array();
    for (uint32_t i = 0; i < r->nscens; i++) {
        const struct sq_scen_result *s = &r->scens[i];
        json_t *so = json_object(), *steps = json_array();
        json_object_set_new(so, "name", opt_str(s->name));
        json_object_set_new(so, "c", counters(&s->c));
        ok &= put_hist(so, "latency", s->latency);
        ok &= put_hist(so, "iter_dur", s->iter_dur);
        if (s->ngroups) { /* group_duration, one per group of the scenario */
            json_t *gs = json_array();
            for (uint32_t g = 0; gs && g < s->ngroups; g++) {
                json_t *h = sq_wire_hist(s->group_dur[g]);
                ok &= h != NULL;
                json_array_append_new(gs, h ? h : json_null());
            }
            json_object_set_new(so, "groups", gs);
        }
        put_u64(so, "vus_max", s->vus_max);
        put_u64(so, "interrupted", s->interrupted);
        for (size_t k = 0; k < s->nsteps; k++)
            json_array_append_new(steps, step_json(&s->steps[k], &ok));
        json_object_set_new(so, "steps", steps);
        json_array_append_new(sc, so);
    }
    json_object_set_new(o, "scens", sc);
    json_t *codes = json_object(); /* exact statuses seen: {"200": n, ...} */
    for (size_t k = 0; k < SQ_STATUS_CODES; k++)
        if (r->status_codes[k]) {
            char key[8];
            snprintf(key, sizeof(key), "%zu", k);
            put_u64(codes, key, r->status_codes[k]);
        }
    json_object_set_new(o, "status_codes", codes);
    json_object_set_new(o, "aborted", json_boolean(r->aborted));
    json_object_set_new(o, "abort_reason", json_string(r->abort_reason));
    json_object_set_new(o, "tls", json_boolean(r->tls));
    json_object_set_new(o, "tls_version", opt_str(r->tls_version));
    json_object_set_new(o, "tls_cipher", opt_str(r->tls_cipher));
    json_object_set_new(o, "tls_alpn", opt_str(r->tls_alpn));
    json_object_set_new(o, "tls_error", json_string(r->tls_error));
    if (r->ws)
        json_object_set_new(o, "ws", ws_json(r->ws, &ok));
    if (r->quic.connections)
        json_object_set_new(o, "quic", quic_json(&r->quic));
    json_object_set_new(o, "script_error", opt_str(r->script_error));
    put_u64(o, "script_stopped", r->script_stopped);
    json_t *series = json_array();
    for (size_t i = 0; i < r->series.n; i++) {
        struct sq_second se = r->series.v[i];
        if (r->nmetrics && r->mseries) {
            se.m = &r->mseries[i * r->nmetrics];
            se.nm = r->nmetrics;
        }
        json_t *e = sq_wire_second(&se, NULL, NULL);
        ok &= e != NULL;
        if (e)
            json_array_append_new(series, e);
    }
    json_object_set_new(o, "series", series);
    if (r->xsamples.per_class)
        json_object_set_new(o, "xsamples", xsamples_json(&r->xsamples, &ok));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A string the decoded result keeps (owned by w). NULL for JSON null. */
static int keep_str(struct sq_wire_res *w, const json_t *v, const char **out)
{
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return -SQ_EPARSE;
    char **strs = realloc(w->strs, (w->nstrs + 1) * sizeof(*strs));
    if (!strs)
        return -ENOMEM;
    w->strs = strs;
    char *s = strdup(json_string_value(v));
    if (!s)
        return -ENOMEM;
    w->strs[w->nstrs++] = s;
    *out = s;
    return 0;
}

static int read_step(const json_t *j, struct sq_step_stats *st)
{
    if (!json_is_object(j))
        return -SQ_EPARSE;
    if (!get_u64(j, "reqs", &st->reqs) || !get_u64(j, "failed", &st->failed) ||
        !get_u64(j, "errors", &st->errors) || !get_u64(j, "extract_fail", &st->extract_fail))
        return -SQ_EPARSE;
    int rc = sq_wire_hist_read(json_object_get(j, "dur"), &st->dur);
    if (rc == 0 && !st->dur)
        rc = sq_latency_hist_new(&st->dur);
    if (rc == 0) /* a batch's first request: its batch_duration */
        rc = sq_wire_hist_read(json_object_get(j, "batch_dur"), &st->batch_dur);
    if (rc < 0)
        return rc;
    const json_t *bs = json_object_get(j, "statuses"), *pass = json_object_get(j, "pass"),
                 *fail = json_object_get(j, "fail");
    if (!json_is_array(bs) || json_array_size(bs) > SQ_STEP_STATUSES || !json_is_array(pass) ||
        !json_is_array(fail) || json_array_size(pass) != json_array_size(fail))
        return -SQ_EPARSE;
    for (size_t i = 0; i < json_array_size(bs); i++) {
        const json_t *e = json_array_get(bs, i);
        const json_t *code = json_array_get(e, 0), *n = json_array_get(e, 1);
        if (!json_is_array(e) || !json_is_integer(code) || json_integer_value(code) < 0 ||
            json_integer_value(code) > 999 || !json_is_integer(n) || json_integer_value(n) < 0)
            return -SQ_EPARSE;
        st->by_status[i].status = (uint16_t)json_integer_value(code);
        st->by_status[i].n = (uint64_t)json_integer_value(n);
        st->nstatus = (uint32_t)i + 1;
        rc = sq_wire_hist_read(json_array_get(e, 2), &st->by_status[i].h);
        if (rc == 0 && !st->by_status[i].h)
            rc = sq_latency_hist_new(&st->by_status[i].h);
        if (rc < 0)
            return rc;
    }
    size_t nc = json_array_size(pass);
    st->check_pass = calloc(nc ? nc : 1, sizeof(uint64_t));
    st->check_fail = calloc(nc ? nc : 1, sizeof(uint64_t));
    if (!st->check_pass || !st->check_fail)
        return -ENOMEM;
    st->nchecks = (uint32_t)nc;
    for (size_t k = 0; k < nc; k++) {
        const json_t *p = json_array_get(pass, k), *f = json_array_get(fail, k);
        if (!json_is_integer(p) || !json_is_integer(f) || json_integer_value(p) < 0 ||
            json_integer_value(f) < 0)
            return -SQ_EPARSE;
        st->check_pass[k] = (uint64_t)json_integer_value(p);
        st->check_fail[k] = (uint64_t)json_integer_value(f);
    }
    const json_t *ms = json_object_get(j, "metrics");
    if (!ms)
        return 0;
    if (!json_is_array(ms) || json_array_size(ms) > UINT32_MAX)
        return -SQ_EPARSE;
    rc = sq_step_stats_metrics(st, (uint32_t)json_array_size(ms));
    int64_t now = sq_now_ns();
    for (size_t k = 0; rc == 0 && k < json_array_size(ms); k++)
        rc = read_mval(json_array_get(ms, k), &st->mvals[k], now);
    return rc;
}

static int read_scen(struct sq_wire_res *w, const json_t *j, struct sq_scen_result *s)
{
    if (!json_is_object(j) || !counters_read(json_object_get(j, "c"), &s->c) ||
        !get_u64(j, "interrupted", &s->interrupted))
        return -SQ_EPARSE;
    uint64_t vus = 0;
    if (!get_u64(j, "vus_max", &vus) || vus > UINT32_MAX)
        return -SQ_EPARSE;
    s->vus_max = (uint32_t)vus;
    int rc = keep_str(w, json_object_get(j, "name"), &s->name);
    if (rc == 0)
        rc = sq_wire_hist_read(json_object_get(j, "latency"), &s->latency);
    if (rc == 0)
        rc = sq_wire_hist_read(json_object_get(j, "iter_dur"), &s->iter_dur);
    if (rc == 0 && !s->latency)
        rc = sq_latency_hist_new(&s->latency);
    if (rc == 0 && !s->iter_dur)
        rc = sq_latency_hist_new(&s->iter_dur);
    const json_t *gs = json_object_get(j, "groups");
    if (rc == 0 && gs) {
        if (!json_is_array(gs) || json_array_size(gs) > SQ_PLAN_GROUPS_MAX)
            return -SQ_EPARSE;
        uint32_t ng = (uint32_t)json_array_size(gs);
        if ((rc = sq_group_hists_new(ng, &s->group_dur)) == 0)
            s->ngroups = ng;
        for (uint32_t g = 0; rc == 0 && g < ng; g++) {
            struct sq_hist *h = NULL;
            if ((rc = sq_wire_hist_read(json_array_get(gs, g), &h)) == 0 && h) {
                sq_hist_free(s->group_dur[g]);
                s->group_dur[g] = h;
            }
        }
    }
    if (rc < 0)
        return rc;
    const json_t *steps = json_object_get(j, "steps");
    if (!json_is_array(steps))
        return -SQ_EPARSE;
    size_t n = json_array_size(steps);
    s->steps = calloc(n ? n : 1, sizeof(*s->steps));
    if (!s->steps)
        return -ENOMEM;
    s->nsteps = n;
    for (size_t k = 0; k < n; k++) {
        rc = read_step(json_array_get(steps, k), &s->steps[k]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int read_result(const json_t *j, struct sq_wire_res *w)
{
    struct sq_result *r = &w->r;
    if (!json_is_object(j) || !counters_read(json_object_get(j, "c"), &r->c) ||
        !get_u64(j, "in_flight", &r->in_flight) || !get_u64(j, "arrivals", &r->arrivals) ||
        !get_i64(j, "setup_ns", &r->setup_ns) || !get_i64(j, "duration_ns", &r->duration_ns) ||
        !get_i64(j, "spin_ns", &r->spin_ns) || !get_i64(j, "dns_ns", &r->dns_ns) ||
        !get_u64(j, "dns_lookups", &r->dns_lookups) ||
        !get_u64(j, "samples_written", &r->samples_written) ||
        !get_u64(j, "samples_lost", &r->samples_lost))
        return -SQ_EPARSE;
    uint64_t threads = 0, conns = 0;
    if (!get_u64(j, "threads", &threads) || !get_u64(j, "connections", &conns) ||
        threads > UINT32_MAX || conns > UINT32_MAX)
        return -SQ_EPARSE;
    r->threads = (uint32_t)threads;
    r->connections = (uint32_t)conns;
    r->open = json_is_true(json_object_get(j, "open"));
    r->aborted = json_is_true(json_object_get(j, "aborted"));
    r->tls = json_is_true(json_object_get(j, "tls"));
    const json_t *why = json_object_get(j, "abort_reason"), *te = json_object_get(j, "tls_error");
    if (json_is_string(why))
        snprintf(r->abort_reason, sizeof(r->abort_reason), "%s", json_string_value(why));
    if (json_is_string(te))
        snprintf(r->tls_error, sizeof(r->tls_error), "%s", json_string_value(te));
    const json_t *se = json_object_get(j, "script_error");
    if (se && !json_is_null(se) && !json_is_string(se))
        return -SQ_EPARSE;
    if (json_is_string(se) && !(r->script_error = strdup(json_string_value(se))))
        return -ENOMEM;
    uint64_t stopped = 0;
    if (json_object_get(j, "script_stopped") &&
        (!get_u64(j, "script_stopped", &stopped) || stopped > UINT32_MAX))
        return -SQ_EPARSE;
    r->script_stopped = (uint32_t)stopped;
    const json_t *codes = json_object_get(j, "status_codes");
    if (codes && !json_is_object(codes))
        return -SQ_EPARSE;
    const char *ck;
    const json_t *cv;
    json_object_foreach((json_t *)codes, ck, cv)
    {
        char *end;
        unsigned long k = strtoul(ck, &end, 10);
        if (*end || k >= SQ_STATUS_CODES || !json_is_integer(cv) || json_integer_value(cv) < 0)
            return -SQ_EPARSE;
        r->status_codes[k] = (uint64_t)json_integer_value(cv);
    }
    int rc = sq_wire_hist_read(json_object_get(j, "latency"), &r->latency);
    if (rc == 0 && !r->latency)
        rc = sq_latency_hist_new(&r->latency);
    if (rc == 0)
        rc = sq_wire_hist_read(json_object_get(j, "latency_unc"), &r->latency_uncorrected);
    if (rc == 0)
        rc = sq_wire_hist_read(json_object_get(j, "sse_first"), &r->sse_first_event);
    if (rc == 0)
        rc = sq_wire_hist_read(json_object_get(j, "bus_connect"), &r->bus_connect);
    if (rc == 0)
        rc = sq_wire_hist_read(json_object_get(j, "sse_dur"), &r->sse_duration);
    const json_t *ph = json_object_get(j, "phases");
    if (ph && !json_is_object(ph))
        return -SQ_EPARSE;
    for (int k = 0; rc == 0 && ph && k < SQ_PHASE_COUNT; k++)
        rc = sq_wire_hist_read(json_object_get(ph, sq_phase_name((enum sq_phase)k)), &r->phase[k]);
    if (rc == 0)
        rc = ws_read(json_object_get(j, "ws"), r);
    if (rc == 0)
        rc = quic_read(json_object_get(j, "quic"), &r->quic);
    if (rc == 0)
        rc = keep_str(w, json_object_get(j, "tls_version"), &r->tls_version);
    if (rc == 0)
        rc = keep_str(w, json_object_get(j, "tls_cipher"), &r->tls_cipher);
    if (rc == 0)
        rc = keep_str(w, json_object_get(j, "tls_alpn"), &r->tls_alpn);
    if (rc < 0)
        return rc;
    const json_t *sc = json_object_get(j, "scens");
    if (sc && !json_is_array(sc))
        return -SQ_EPARSE;
    size_t ns = sc ? json_array_size(sc) : 0;
    if (ns) {
        r->scens = calloc(ns, sizeof(*r->scens));
        if (!r->scens)
            return -ENOMEM;
        r->nscens = (uint32_t)ns;
        for (size_t i = 0; i < ns; i++) {
            rc = read_scen(w, json_array_get(sc, i), &r->scens[i]);
            if (rc < 0)
                return rc;
        }
    }
    rc = xsamples_read(json_object_get(j, "xsamples"), &r->xsamples);
    if (rc < 0)
        return rc;
    const json_t *series = json_object_get(j, "series");
    if (series && !json_is_array(series))
        return -SQ_EPARSE;
    size_t n = series ? json_array_size(series) : 0;
    if (n) {
        r->series.v = calloc(n, sizeof(*r->series.v));
        if (!r->series.v)
            return -ENOMEM;
        r->series.cap = n;
        char err[64];
        for (size_t i = 0; i < n; i++) {
            rc = sq_wire_second_read(json_array_get(series, i), &r->series.v[i], NULL, NULL, err,
                                     sizeof(err));
            if (rc < 0)
                return rc;
            r->series.n++;
            /* the plan's metrics of the second, as many in every second as in the first */
            struct sq_msecond *m;
            uint32_t nm;
            if ((rc = sq_wire_msecond_read(json_array_get(series, i), &m, &nm)) < 0)
                return rc;
            if (i == 0 && nm) {
                if (!(r->mseries = calloc(n * nm, sizeof(*r->mseries)))) {
                    free(m);
                    return -ENOMEM;
                }
                r->nmetrics = nm;
            }
            if (m && r->mseries)
                memcpy(&r->mseries[i * r->nmetrics], m,
                       (nm < r->nmetrics ? nm : r->nmetrics) * sizeof(*m));
            free(m);
        }
    }
    return 0;
}

int sq_wire_result_read(const json_t *j, struct sq_wire_res *out, char *err, size_t len)
{
    memset(out, 0, sizeof(*out));
    int rc = read_result(j, out);
    if (rc < 0)
        snprintf(err, len, "a result that cannot be read: %s", sq_strerror(rc));
    return rc;
}

void sq_wire_res_dispose(struct sq_wire_res *w)
{
    sq_result_dispose(&w->r);
    for (size_t i = 0; i < w->nstrs; i++)
        free(w->strs[i]);
    free(w->strs);
    memset(w, 0, sizeof(*w));
}
