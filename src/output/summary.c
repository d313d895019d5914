/* output/summary.c - the terminal summary, from the result document (see summary.h).
 *
 * The same code prints the summary after a run and for `squall report FILE`: the figures come
 * from the document (they were computed once, from the merged histogram), and the latency
 * distribution from the histogram decoded out of it. A key the document lacks leaves its part out.
 */
#include "output/summary.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "output/doc.h"
#include "output/fmt.h"
#include "stats/hist.h"

#define D 24

/* ---- colour and reading the document ---- */

/* Colours: only when the caller asked (a terminal without NO_COLOR). */
struct out {
    FILE *f;
    bool color;
};
#define RED    "\033[31m"
#define GREEN  "\033[32m"
#define YELLOW "\033[33m"
#define BOLD   "\033[1m"
#define RESET  "\033[0m"

static const char *c_on(const struct out *o, const char *code)
{
    return o->color ? code : "";
}

static const char *c_off(const struct out *o)
{
    return o->color ? RESET : "";
}

static uint64_t u64(const json_t *doc, const char *path)
{
    double v = sq_report__numd(doc, path, 0);
    return sq_report__count(v);
}

static const char *g(const json_t *doc, const char *path, char *buf)
{
    return sq_fmt_group(u64(doc, path), buf, 32);
}

static const char *dus(const json_t *doc, const char *path, char *buf)
{
    return sq_fmt_dur_us(sq_report__numd(doc, path, 0), buf, D);
}

/* ---- the run: header, latency, TLS, WebSocket, bodies, phases ---- */

/* The open loop: how it paced, and the pool when it may grow (k6's maxVUs). */
static void pool_lines(FILE *f, const json_t *doc)
{
    char g1[32], g2[32], g3[32];
    double tail = sq_report__numd(doc, "pacing.tail_us", 0);
    if (json_is_object(json_object_get(doc, "pacing")) && tail >= 0.5)
        fprintf(f, "%-12s precision %s · a %.0f µs tail polled before each arrival\n", "Pacing",
                sq_report__str(doc, "pacing.precision", "?"), tail);
    else if (json_is_object(json_object_get(doc, "pacing")))
        fprintf(f, "%-12s precision %s · sleeps until each arrival, no poll\n", "Pacing",
                sq_report__str(doc, "pacing.precision", "?"));
    if (u64(doc, "pool.max") <= u64(doc, "pool.preallocated"))
        return;
    fprintf(f, "%-12s %s preallocated · peak %s of at most %s", "Pool",
            g(doc, "pool.preallocated", g1), g(doc, "pool.peak", g2), g(doc, "pool.max", g3));
    if (u64(doc, "pool.grown"))
        fprintf(f, " (grew by %s between %.2f s and %.2f s)", g(doc, "pool.grown", g1),
                sq_report__numd(doc, "pool.first_growth_s", 0),
                sq_report__numd(doc, "pool.last_growth_s", 0));
    fputc('\n', f);
}

/* "name 12 · name 3" over the non-zero numbers of an object, in document order; " none". */
static void counts(FILE *f, const json_t *obj, const char *const *order, size_t norder)
{
    int any = 0;
    char n[32];
    if (order) {
        for (size_t i = 0; i < norder; i++) {
            const json_t *v = json_object_get(obj, order[i]);
            if (json_is_number(v) && json_number_value(v) > 0) {
                fprintf(f, "%s%s %s", any ? " · " : " ", order[i],
                        sq_fmt_group(sq_report__count(json_number_value(v)), n, sizeof(n)));
                any = 1;
            }
        }
    } else {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)obj, k, v)
        {
            if (json_is_number(v) && json_number_value(v) > 0) {
                fprintf(f, "%s%s %s", any ? " · " : " ", k,
                        sq_fmt_group(sq_report__count(json_number_value(v)), n, sizeof(n)));
                any = 1;
            }
        }
    }
    fprintf(f, "%s\n", any ? "" : " none");
}

static void header(FILE *f, const json_t *doc, bool open)
{
    const json_t *ex = sq_report__get(doc, "config.executor");
    const char *kind = sq_report__str(ex, "kind", NULL);
    const char *name = sq_report__str(doc, "run.name", NULL);
    char g1[32], d0[D];
    double v;

    fputs("squall ", f);
    if (name)
        fprintf(f, "[%s] ", name);
    if (json_is_object(json_object_get(doc, "plan")))
        fprintf(f, "run %s → %s (%s)\n", sq_report__str(doc, "plan.file", "?"),
                sq_report__str(doc, "plan.target", "?"),
                sq_report__str(doc, "config.address", "?"));
    else
        fprintf(f, "%s %s → %s\n", sq_report__str(doc, "config.method", "?"),
                sq_report__str(doc, "config.url", "?"), sq_report__str(doc, "config.address", "?"));
    fprintf(f, "%s", open ? "open loop" : "closed loop");
    if (kind)
        fprintf(f, " · %s", kind);
    if (sq_report__num(ex, "rate_per_s", &v))
        fprintf(f, " %g/s", v);
    if (sq_report__num(ex, "iterations", &v))
        fprintf(f, " %s", sq_fmt_group(sq_report__count(v), g1, sizeof(g1)));
    if (sq_report__num(doc, "config.connections", &v))
        fprintf(f, " · %s connection%s", sq_fmt_group(sq_report__count(v), g1, sizeof(g1)),
                v == 1 ? "" : "s");
    const char *proto = sq_report__str(doc, "config.protocol", NULL);
    if (proto && strcmp(proto, "http/1.1") != 0) {
        fprintf(f, " · %s", proto);
        if (sq_report__num(doc, "config.streams", &v))
            fprintf(f, " × %.0f stream%s", v, v == 1 ? "" : "s");
    }
    if (open && sq_report__num(ex, "max_in_flight", &v))
        fprintf(f, " (max in flight %s)", sq_fmt_group(sq_report__count(v), g1, sizeof(g1)));
    if (sq_report__num(ex, "pacing_s", &v) && v > 0)
        fprintf(f, " · paced %s", sq_fmt_dur_us(v * 1e6, d0, D));
    if (sq_report__num(doc, "threads", &v) || sq_report__num(doc, "config.threads", &v))
        fprintf(f, " · %.0f thread%s", v, v == 1 ? "" : "s");
    fprintf(f, " · %.2fs", sq_report__numd(doc, "duration_s", 0));
    if (sq_report__num(ex, "iterations", &v))
        fprintf(f, " (at most %.0fs)", sq_report__numd(ex, "length_s", 0));
    else if (sq_report__num(ex, "length_s", &v) || sq_report__num(doc, "config.duration_s", &v))
        fprintf(f, " (asked %.2fs)", v);
    if (sq_report__num(doc, "setup_s", &v))
        fprintf(f, " · setup %s", sq_fmt_dur_us(v * 1e6, d0, D));
    fputc('\n', f);
}

/* The seed the random values came from (run.seed; documents before issue 25 have none). */
static void seed_line(FILE *f, const json_t *doc)
{
    const json_t *s = sq_report__get(doc, "run.seed");
    if (!json_is_integer(s))
        return;
    long long v = (long long)json_integer_value(s);
    fprintf(f,
            "%-12s %lld · --seed %lld replays the random values ($randomUUID, $randomInt, "
            "random feeders, math.random)\n",
            "Seed", v, v);
}

static void latency(FILE *f, const json_t *doc, bool open)
{
    const json_t *l = json_object_get(doc, "latency");
    char d[5][D], g1[32];
    if (sq_report__numd(l, "count", 0) > 0) {
        const char *from = sq_report__str(l, "measured_from", open ? "intended_send" : "");
        fprintf(f, "%-12s min %s · mean %s · stdev %s · max %s (from the %s send)\n", "Latency",
                dus(l, "min_us", d[0]), dus(l, "mean_us", d[1]), dus(l, "stdev_us", d[2]),
                dus(l, "max_us", d[3]), strcmp(from, "intended_send") == 0 ? "intended" : "actual");
        const json_t *pc = json_object_get(l, "percentiles");
        if (json_is_object(pc) && json_object_size(pc)) {
            /* the asked percentiles (--percentiles), in the document's order */
            const char *k;
            const json_t *v;
            int n = 0;
            fprintf(f, "%-12s", "");
            json_object_foreach((json_t *)pc, k, v)
            {
                fprintf(f, "%sp%s %s", n++ ? " · " : " ", k,
                        sq_fmt_dur_us(json_is_number(v) ? json_number_value(v) : 0, d[0], D));
            }
            fputc('\n', f);
        } else {
            fprintf(f, "%-12s p50 %s · p90 %s · p95 %s · p99 %s · p99.9 %s\n", "",
                    dus(l, "p50_us", d[0]), dus(l, "p90_us", d[1]), dus(l, "p95_us", d[2]),
                    dus(l, "p99_us", d[3]), dus(l, "p99_9_us", d[4]));
        }
    } else {
        fprintf(f, "%-12s no response completed\n", "Latency");
    }
    const json_t *u = json_object_get(doc, "latency_uncorrected");
    if (open && json_is_object(u) && sq_report__numd(l, "count", 0) > 0)
        fprintf(f, "%-12s p50 %s · p90 %s · p99 %s · max %s (uncorrected: from the actual send)\n",
                "", dus(u, "p50_us", d[0]), dus(u, "p90_us", d[1]), dus(u, "p99_us", d[2]),
                dus(u, "max_us", d[3]));
    if (sq_report__numd(l, "out_of_range", 0) > 0)
        fprintf(f, "%-12s %s values outside 1µs..1h were not recorded\n", "",
                g(l, "out_of_range", g1));
}

/* config.proxy: where the connections went first (its URL never carries credentials). */
static void proxy_line(FILE *f, const json_t *doc)
{
    const char *url = sq_report__str(doc, "config.proxy.url", NULL);
    if (!url)
        return;
    const char *mode = sq_report__str(doc, "config.proxy.mode", "");
    const json_t *auth = sq_report__get(doc, "config.proxy.auth");
    fprintf(f, "%-12s %s (%s) · %s%s\n", "Proxy", url,
            sq_report__str(doc, "config.proxy.from", "?"),
            strcmp(mode, "connect") == 0 ? "CONNECT tunnel" : "absolute-form requests",
            json_is_true(auth) ? " · basic auth" : "");
}

/* https: "TLSv1.3 · TLS_AES_256_GCM_SHA384 · ALPN http/1.1 · 64 handshakes (0 resumed)". */
static void tls(FILE *f, const json_t *t)
{
    if (!json_is_object(t))
        return;
    char g1[32], g2[32], g3[32];
    const char *ver = sq_report__str(t, "version", NULL);
    const char *alpn = sq_report__str(t, "alpn", "");
    fprintf(f, "%-12s ", "TLS");
    if (ver)
        fprintf(f, "%s · %s · ALPN %s · ", ver, sq_report__str(t, "cipher", "?"),
                alpn[0] ? alpn : "none");
    fprintf(f, "%s handshakes (%s resumed)", g(t, "handshakes", g1), g(t, "resumed", g2));
    if (sq_report__numd(t, "handshake_errors", 0) > 0)
        fprintf(f, " · %s failed", g(t, "handshake_errors", g3));
    fputc('\n', f);
    const char *err = sq_report__str(t, "first_error", NULL);
    if (err)
        fprintf(f, "%-12s %s\n", "TLS error", err);
}

/* WebSocket runs: upgrades, messages (a request is one message and its reply), control frames,
 * close codes. */
static void websocket(FILE *f, const json_t *w)
{
    if (!json_is_object(w))
        return;
    char g1[32], g2[32], g3[32], g4[32], d0[D], d1[D];
    fprintf(f, "%-12s %s upgrades (p50 %s) · %s messages out · %s in", "WebSocket",
            g(w, "upgrades", g1), dus(w, "upgrade.p50_us", d0), g(w, "messages.sent", g2),
            g(w, "messages.received", g3));
    if (sq_report__numd(w, "messages.unmatched", 0) > 0)
        fprintf(f, " (%s no reply of ours awaited)", g(w, "messages.unmatched", g4));
    fputc('\n', f);
    if (sq_report__numd(w, "pings.sent", 0) + sq_report__numd(w, "pings.received", 0) > 0) {
        fprintf(f, "%-12s %s sent · %s pongs back", "Pings", g(w, "pings.sent", g1),
                g(w, "pongs.received", g2));
        if (sq_report__numd(w, "ping_rtt.count", 0) > 0)
            fprintf(f, " (p50 %s)", dus(w, "ping_rtt.p50_us", d1));
        fprintf(f, " · %s from the server, %s answered\n", g(w, "pings.received", g3),
                g(w, "pongs.sent", g4));
    }
    fprintf(f, "%-12s", "Close codes");
    counts(f, json_object_get(w, "close_codes"), NULL, 0);
    const json_t *failed = json_object_get(w, "upgrade_failed");
    if (json_is_object(failed) && json_object_size(failed)) {
        fprintf(f, "%-12s", "Upgrades ✗");
        counts(f, failed, NULL, 0);
        const char *why = sq_report__str(w, "first_upgrade_error", NULL);
        if (why)
            fprintf(f, "%-12s %s\n", "", why);
    }
}

/* Bytes on the wire and decoded, and the compression setting; event streams. */
static void bodies(FILE *f, const json_t *doc)
{
    const json_t *b = json_object_get(doc, "bodies");
    char d0[D], d1[D], g1[32], g2[32];
    if (json_is_object(b)) {
        bool on = json_is_true(json_object_get(b, "compression"));
        bool h2 = strncmp(sq_report__str(doc, "config.protocol", ""), "h2", 2) == 0;
        fprintf(f, "%-12s %s received (heads included) · %s of bodies decoded · compression %s",
                "Bodies", sq_fmt_bytes(sq_report__numd(b, "wire_bytes", 0), d0, D),
                sq_fmt_bytes(sq_report__numd(b, "decoded_bytes", 0), d1, D),
                on   ? "offered"
                : h2 ? "not offered (HTTP/2 bodies are not decoded yet)"
                     : "off (--no-compression)");
        if (sq_report__numd(b, "compressed_responses", 0) > 0)
            fprintf(f, " · %s responses decoded", g(b, "compressed_responses", g1));
        if (sq_report__numd(b, "undecodable_responses", 0) > 0)
            fprintf(f, " · %s in a coding squall cannot decode", g(b, "undecodable_responses", g2));
        fputc('\n', f);
    }
    const json_t *s = json_object_get(doc, "sse");
    if (json_is_object(s))
        fprintf(
            f,
            "%-12s %s streams · %s events · %.1f events/s · first event p50 %s · stream p50 %s\n",
            "Streams", g(s, "streams", g1), g(s, "events", g2),
            sq_report__numd(s, "events_per_s", 0), dus(s, "first_event.p50_us", d0),
            dus(s, "stream_duration.p50_us", d1));
}

/* Per-phase timings: one line of p50 / p95 per phase that has any time in it. */
/* True when no connection was opened after the start: the pool was opened before it and never
 * replaced, so the setup phases (dns, connecting, tls_handshaking) only carry the pool's own
 * setup, on each connection's first request. With --max-vus config.connections is the cap, not
 * what was opened before the start: the pool's preallocated count is, and a pool that grew
 * opened connections during the run. */
static bool setup_before_start(const json_t *doc)
{
    double opened, conns;
    if (!sq_report__num(doc, "connections.opened", &opened))
        return false;
    if (json_is_object(json_object_get(doc, "pool"))) {
        if (sq_report__numd(doc, "pool.grown", 0) > 0)
            return false;
        return sq_report__num(doc, "pool.preallocated", &conns) && opened <= conns;
    }
    return sq_report__num(doc, "config.connections", &conns) && opened <= conns;
}

static bool setup_phase(const char *name)
{
    return strcmp(name, "dns") == 0 || strcmp(name, "connecting") == 0 ||
           strcmp(name, "tls_handshaking") == 0;
}

static void phases(FILE *f, const json_t *doc)
{
    const json_t *ph = json_object_get(doc, "phases");
    if (!json_is_object(ph))
        return;
    static const char *const order[] = {"blocked", "dns",     "connecting", "tls_handshaking",
                                        "sending", "waiting", "receiving"};
    bool fold = setup_before_start(doc);
    char d[3][D];
    fprintf(f, "%-12s", "Phases");
    int n = 0;
    for (size_t i = 0; i < SQ_ARRAY_LEN(order); i++) {
        const json_t *p = json_object_get(ph, order[i]);
        if (!json_is_object(p) || sq_report__numd(p, "max_us", 0) <= 0)
            continue;
        if (fold && setup_phase(order[i]))
            continue;
        fprintf(f, "%s%s p50 %s p95 %s", n++ ? " · " : " ", order[i], dus(p, "p50_us", d[0]),
                dus(p, "p95_us", d[1]));
        if (setup_phase(order[i]))
            fprintf(f, " max %s", dus(p, "max_us", d[2]));
    }
    fprintf(f, "%s\n", n ? "" : " all under 1µs");
    if (fold)
        fprintf(f,
                "%-12s connection setup: none during the run (the pool was opened before the "
                "start, in %s)\n",
                "", sq_fmt_dur_us(sq_report__numd(doc, "setup_s", 0) * 1e6, d[0], D));
}

/* ---- the server, the client, a plan, sinks, buses, the cluster, URLs ---- */

/* The watched processes (--watch): "Server  12.3 ms CPU per 1k requests · RSS peak 45.6 MB ·
 * threads 4", and a line for each one that exited during the run. */
static void server(FILE *f, const json_t *doc)
{
    const json_t *sv = json_object_get(doc, "server");
    if (!json_is_object(sv))
        return;
    double v;
    fprintf(f, "%-12s ", "Server");
    if (sq_report__num(sv, "cpu_ms_per_1k_requests", &v))
        fprintf(f, "%.1f ms CPU per 1k requests", v);
    else
        fprintf(f, "%.2f s CPU (no request completed)",
                sq_report__numd(sv, "cpu_user_s", 0) + sq_report__numd(sv, "cpu_sys_s", 0));
    fprintf(f, " · RSS peak %.1f MB · threads %.0f", sq_report__numd(sv, "rss_peak_bytes", 0) / 1e6,
            sq_report__numd(sv, "threads_max", 0));
    const json_t *ps = json_object_get(sv, "processes");
    size_t np = json_is_array(ps) ? json_array_size(ps) : 0;
    if (np != 1)
        fprintf(f, " · %zu processes", np);
    fputc('\n', f);
    size_t i;
    const json_t *p;
    json_array_foreach((json_t *)ps, i, p)
    {
        if (!json_is_true(json_object_get(p, "exited")))
            continue;
        double at = sq_report__numd(p, "exited_at_s", 0),
               seen = sq_report__numd(p, "last_seen_s", 0);
        fprintf(f, "%-12s pid %.0f (%s) exited between %.1f s and %.1f s into the run\n", "",
                sq_report__numd(p, "pid", 0), sq_report__str(p, "name", "?"), seen, at);
    }
}

/* squall's own cost: "Client  2.10 µs CPU per request · RSS peak 12.0 MB · busiest worker 45% ·
 * loop lag max 1.20ms". */
static void client(FILE *f, const json_t *doc, bool open)
{
    const json_t *c = json_object_get(doc, "client");
    if (!json_is_object(c))
        return;
    char d0[D], d1[D];
    double v, busiest = 0;
    fprintf(f, "%-12s ", "Client");
    if (sq_report__num(c, "cpu_per_request_us", &v))
        fprintf(f, "%s CPU per request", sq_fmt_dur_us(v, d0, D));
    else
        fprintf(f, "%.2f s CPU",
                sq_report__numd(c, "cpu_user_s", 0) + sq_report__numd(c, "cpu_sys_s", 0));
    size_t i;
    const json_t *w;
    json_array_foreach(json_object_get(c, "workers"), i, w)
    {
        double b = sq_report__numd(w, "busy", 0);
        if (b > busiest)
            busiest = b;
    }
    fprintf(f, " · RSS peak %.1f MB · busiest worker %.0f%% · loop lag max %s",
            sq_report__numd(c, "rss_peak_bytes", 0) / 1e6, 100 * busiest,
            sq_fmt_dur_us(sq_report__numd(c, "loop_lag_max_ms", 0) * 1e3, d1, D));
    if (open && sq_report__num(c, "behind_max_ms", &v))
        fprintf(f, " · behind schedule max %s", sq_fmt_dur_us(v * 1e3, d0, D));
    fputc('\n', f);
}

/* Plan runs: per-step figures, checks and thresholds (k6's ✓/✗). */
/* A built-in trend under a step's or a group's line (batch_duration, group_duration): its
 * percentiles over its samples (what one is: "batch", "pass"); nothing when it has none. */
static void trend_line(FILE *f, const char *name, const json_t *t, const char *what)
{
    double n = sq_report__numd(t, "count", 0);
    if (!(n > 0))
        return;
    char d[3][32];
    fprintf(f, "    %-28s %10.0f %s%s · p50 %s · p95 %s · max %s\n", name, n, what,
            n == 1 ? "" : "es", sq_fmt_dur_us(sq_report__numd(t, "med", 0) * 1000, d[0], 32),
            sq_fmt_dur_us(sq_report__numd(t, "p(95)", 0) * 1000, d[1], 32),
            sq_fmt_dur_us(sq_report__numd(t, "max", 0) * 1000, d[2], 32));
}

static void plan_sections(const struct out *o, const json_t *doc)
{
    FILE *f = o->f;
    const json_t *steps = json_object_get(doc, "steps");
    const json_t *checks = json_object_get(doc, "checks");
    const json_t *ths = json_object_get(doc, "thresholds");
    size_t i;
    const json_t *e;
    char g1[32], g2[32], d[3][D];
    if (json_is_array(steps) && json_array_size(steps)) {
        fprintf(f, "\nSteps\n");
        json_array_foreach((json_t *)steps, i, e)
        {
            const json_t *du = json_object_get(e, "duration_ms");
            char g3[32];
            double errs = sq_report__numd(e, "errors", 0);
            fprintf(
                f, "  %-24s %-6s %10s req · %s failed (%s transport, %s HTTP)",
                sq_report__str(e, "step", "?"), sq_report__str(e, "method", ""),
                g(e, "requests", g1), g(e, "failed", g2), g(e, "errors", g3),
                sq_fmt_group(sq_report__count(sq_report__numd(e, "failed", 0) - errs), d[0], D));
            if (sq_report__numd(du, "count", 0) > 0)
                fprintf(f, " · p50 %s · p95 %s · max %s\n",
                        sq_fmt_dur_us(sq_report__numd(du, "med", 0) * 1000, d[0], D),
                        sq_fmt_dur_us(sq_report__numd(du, "p(95)", 0) * 1000, d[1], D),
                        sq_fmt_dur_us(sq_report__numd(du, "max", 0) * 1000, d[2], D));
            else
                fprintf(f, " · no response\n");
            trend_line(f, "batch_duration", json_object_get(e, "batch_duration_ms"), "batch");
        }
    }
    const json_t *groups = json_object_get(doc, "groups");
    if (json_is_array(groups) && json_array_size(groups)) {
        fprintf(f, "\nGroups\n");
        json_array_foreach((json_t *)groups, i, e)
        {
            const json_t *du = json_object_get(e, "duration_ms");
            fprintf(f, "  %-31s %10s req · %s failed", sq_report__str(e, "group", "?"),
                    g(e, "requests", g1), g(e, "failed", g2));
            if (sq_report__numd(du, "count", 0) > 0)
                fprintf(f, " · p50 %s · p95 %s · max %s\n",
                        sq_fmt_dur_us(sq_report__numd(du, "med", 0) * 1000, d[0], D),
                        sq_fmt_dur_us(sq_report__numd(du, "p(95)", 0) * 1000, d[1], D),
                        sq_fmt_dur_us(sq_report__numd(du, "max", 0) * 1000, d[2], D));
            else
                fprintf(f, " · no response\n");
            trend_line(f, "group_duration", json_object_get(e, "group_duration_ms"), "pass");
        }
    }
    const json_t *cm = json_object_get(doc, "custom_metrics");
    if (json_is_object(cm) && json_object_size(cm)) {
        fprintf(f, "\nCustom metrics\n");
        const char *name;
        json_object_foreach((json_t *)cm, name, e)
        {
            const char *kind = sq_report__str(e, "kind", "?");
            fprintf(f, "  %-24s %-7s ", name, kind);
            if (!strcmp(kind, "counter"))
                fprintf(f, "%g (%.4g/s)\n", sq_report__numd(e, "count", 0),
                        sq_report__numd(e, "rate", 0));
            else if (!strcmp(kind, "rate"))
                fprintf(f, "%.2f%% (%s of %s)\n", 100 * sq_report__numd(e, "rate", 0),
                        g(e, "passes", g1), g(e, "samples", g2));
            else if (!strcmp(kind, "gauge") && json_is_number(json_object_get(e, "value")))
                fprintf(f, "%g\n", sq_report__numd(e, "value", 0));
            else if (!strcmp(kind, "trend") && sq_report__numd(e, "count", 0) > 0)
                fprintf(f, "avg %g · p50 %g · p95 %g · max %g (%s samples)\n",
                        sq_report__numd(e, "avg", 0), sq_report__numd(e, "med", 0),
                        sq_report__numd(e, "p(95)", 0), sq_report__numd(e, "max", 0),
                        g(e, "samples", g1));
            else
                fprintf(f, "no sample\n");
        }
    }
    if (json_is_array(checks) && json_array_size(checks)) {
        fprintf(f, "\nChecks\n");
        json_array_foreach((json_t *)checks, i, e)
        {
            uint64_t pass = u64(e, "passed"), fail = u64(e, "failed");
            fprintf(f, "  %s%s%s %s: %s  (%s passed, %s failed)\n", c_on(o, fail ? RED : GREEN),
                    fail ? "✗" : "✓", c_off(o), sq_report__str(e, "step", "?"),
                    sq_report__str(e, "check", "?"), sq_fmt_group(pass, g1, sizeof(g1)),
                    sq_fmt_group(fail, g2, sizeof(g2)));
        }
    }
    if (json_is_array(ths) && json_array_size(ths)) {
        fprintf(f, "\nThresholds\n");
        /* the crossed ones first */
        for (int pass = 0; pass < 2; pass++) {
            json_array_foreach((json_t *)ths, i, e)
            {
                bool ok = json_is_true(json_object_get(e, "ok"));
                if (ok != (pass == 1))
                    continue;
                fprintf(f, "  %s%s%s %s: %s  (value %.4g%s)\n", c_on(o, ok ? GREEN : RED),
                        ok ? "✓" : "✗", c_off(o), sq_report__str(e, "metric", "?"),
                        sq_report__str(e, "expression", "?"), sq_report__numd(e, "value", 0),
                        json_is_true(json_object_get(e, "no_data")) ? ", no data" : "");
            }
        }
    }
}

/* The first line of a run with a sink, the one that answers "did anything get lost?":
 * "sent 20,000 · delivered 20,000 · lost 0 · e2e p50 14 ms p99 36 ms" (with "· unfinished N"
 * after lost when some publishes never completed), then what else the sink saw. */
static void sink_lines(FILE *f, const json_t *doc)
{
    const json_t *s = json_object_get(doc, "sink");
    if (!json_is_object(s))
        return;
    char g1[32], g2[32], g3[32], d[2][D];
    const json_t *l = json_object_get(s, "latency");
    double sent;
    if (sq_report__num(s, "sent", &sent))
        fprintf(f, "sent %s · ", sq_fmt_group(sq_report__count(sent), g1, sizeof(g1)));
    fprintf(f, "delivered %s · lost %s", g(s, "delivered", g2), g(s, "lost", g3));
    if (sq_report__numd(s, "unfinished", 0) > 0) /* never finished sending: not lost */
        fprintf(f, " · unfinished %s", g(s, "unfinished", g1));
    if (sq_report__numd(l, "count", 0) > 0)
        fprintf(f, " · e2e p50 %s p99 %s", dus(l, "p50_us", d[0]), dus(l, "p99_us", d[1]));
    fputc('\n', f);
    const json_t *ls = json_object_get(s, "lost_seqs");
    if (json_is_array(ls) && json_array_size(ls)) {
        fprintf(f, "%-12s", "Lost");
        size_t i;
        const json_t *e;
        json_array_foreach((json_t *)ls, i, e)
        {
            if (i == 10) {
                fprintf(f, " … (%zu listed in the JSON)", json_array_size(ls));
                break;
            }
            fprintf(f, "%s%s#%.0f", i ? ", " : " ", sq_report__str(e, "stream", "?"),
                    sq_report__numd(e, "seq", 0));
        }
        fputc('\n', f);
    }
    fprintf(f, "%-12s %s duplicates · %s out of order · %s unstamped", "Sink",
            g(s, "duplicates", g1), g(s, "out_of_order", g2), g(s, "unstamped", g3));
    if (sq_report__numd(s, "foreign", 0) > 0)
        fprintf(f, " · %s of other runs", g(s, "foreign", g1));
    if (sq_report__numd(s, "out_of_range", 0) > 0)
        fprintf(f, " · %s out of range", g(s, "out_of_range", g1));
    if (sq_report__numd(s, "over_cap", 0) > 0) /* counted, not tracked: say how to track them */
        fprintf(f, " · %s over the memory cap (%.0f MiB; not tracked)", g(s, "over_cap", g1),
                sq_report__numd(s, "max_memory", 0) / (1024.0 * 1024.0));
    fprintf(f, " · settle %.1fs\n", sq_report__numd(s, "settle_s", 0));
    const json_t *src = json_object_get(s, "sources");
    size_t i;
    const json_t *e;
    json_array_foreach((json_t *)src, i, e)
    {
        const char *kind = sq_report__str(e, "kind", "?");
        if (strcmp(kind, "http") == 0)
            fprintf(f, "%-12s http %s · %s requests\n", i ? "" : "Sources",
                    sq_report__str(e, "listen", "?"), g(e, "requests", g1));
        else
            fprintf(f, "%-12s %s %s %s · %s messages · %s reconnects%s%s\n", i ? "" : "Sources",
                    kind, sq_report__str(e, "url", "?"),
                    sq_report__str(e, "subject", sq_report__str(e, "topic", "")),
                    g(e, "messages", g1), g(e, "reconnects", g2),
                    sq_report__str(e, "first_error", NULL) ? " · " : "",
                    sq_report__str(e, "first_error", ""));
    }
    if (sq_report__numd(l, "count", 0) > 0)
        fprintf(f, "%-12s p50 %s · p90 %s · p99 %s · p99.9 %s · max %s (from the stamp)\n",
                "End to end", dus(l, "p50_us", d[0]), dus(l, "p90_us", d[1]), dus(l, "p99_us", g1),
                dus(l, "p99_9_us", g2), dus(l, "max_us", g3));
}

/* The subscribers beside a publish load (the quick face's --subscribers):
 * "Subscribers 4 × nats t.a (fan out) · received 80,000 of 80,000 · lag 0 · 970,982.6 msg/s"
 * then the spread between them and the end-to-end latency from the stamp. */
static void subs_lines(FILE *f, const json_t *doc)
{
    const json_t *s = json_object_get(doc, "subscribers");
    if (!json_is_object(s))
        return;
    char g1[32], g2[32], g3[32], d[2][D];
    const char *mode = sq_report__str(s, "mode", "?");
    fprintf(f, "%-12s %s × %s %s (%s%s%s) · received %s", "Subscribers", g(s, "count", g1),
            sq_report__str(s, "kind", "?"), sq_report__str(s, "subscription", "?"),
            strcmp(mode, "fan_out") == 0 ? "fan out"
            : strcmp(mode, "queue") == 0 ? "queue group "
                                         : "shared subscription ",
            strcmp(mode, "fan_out") == 0 ? "" : sq_report__str(s, "group", "?"), "",
            g(s, "received", g2));
    double x;
    if (sq_report__num(s, "expected", &x))
        fprintf(f, " of %s · lag %s", g(s, "expected", g3), g(s, "lag", g1));
    fprintf(f, " · %s msg/s\n",
            sq_fmt_group((uint64_t)(sq_report__numd(s, "msgs_per_s", 0) + 0.5), g2, sizeof(g2)));
    const json_t *sp = json_object_get(s, "spread");
    fprintf(f, "%-12s per subscriber min %s · max %s · stddev %.1f · ", "", g(sp, "min", g1),
            g(sp, "max", g2), sq_report__numd(sp, "stddev", 0));
    fprintf(
        f, "%s – %s msg/s",
        sq_fmt_group((uint64_t)(sq_report__numd(sp, "msgs_per_s_min", 0) + 0.5), g1, sizeof(g1)),
        sq_fmt_group((uint64_t)(sq_report__numd(sp, "msgs_per_s_max", 0) + 0.5), g2, sizeof(g2)));
    if (sq_report__numd(s, "reconnects", 0) > 0)
        fprintf(f, " · %s reconnects", g(s, "reconnects", g3));
    fputc('\n', f);
    const json_t *js = json_object_get(s, "jetstream");
    if (json_is_object(js))
        fprintf(f,
                "%-12s JetStream %s on %s · %s%s · batch %s · %s fetches · %s acks · %s "
                "redelivered\n",
                "", sq_report__str(js, "consumer", "?"), sq_report__str(js, "stream", "?"),
                sq_report__str(js, "durable", NULL) ? "durable " : "ephemeral consumer each",
                sq_report__str(js, "durable", ""), g(js, "batch", g1), g(js, "fetches", g2),
                g(js, "acks", g3), g(js, "redelivered", d[0]));
    const json_t *l = json_object_get(s, "latency");
    if (sq_report__numd(l, "count", 0) > 0)
        fprintf(f, "%-12s e2e p50 %s · p90 %s · p99 %s · p99.9 %s · max %s (from the stamp)\n", "",
                dus(l, "p50_us", d[0]), dus(l, "p90_us", d[1]), dus(l, "p99_us", g1),
                dus(l, "p99_9_us", g2), dus(l, "max_us", g3));
}

/* A bus run's own figures: "NATS        jetstream · 3,000 acks · 0 duplicates · 1 reconnect". */
static void bus_lines(FILE *f, const json_t *doc)
{
    static const char *const kinds[] = {"nats", "mqtt"};
    char g1[32], g2[32], g3[32];
    for (size_t k = 0; k < SQ_ARRAY_LEN(kinds); k++) {
        const json_t *b = json_object_get(doc, kinds[k]);
        if (!json_is_object(b))
            continue;
        fprintf(f, "%-12s %s", k == 0 ? "NATS" : "MQTT", sq_report__str(b, "mode", "?"));
        if (k == 1)
            fprintf(f, " · QoS %.0f · MQTT %s", sq_report__numd(b, "qos", 0),
                    sq_report__str(b, "version", "?"));
        fprintf(f, " · window %s", g(b, "window", g1));
        /* named for what they are: a request's acks are its replies, and a round trip's
         * foreign deliveries are messages the connection did not publish (older documents
         * have the old keys alone) */
        bool request = strcmp(sq_report__str(b, "mode", ""), "request") == 0;
        const char *others =
            json_object_get(b, "others_delivered") ? "others_delivered" : "foreign";
        static const char *const order[] = {"acks",      "duplicates", "late",
                                            "delivered", "foreign",    "reconnects"};
        for (size_t i = 0; i < SQ_ARRAY_LEN(order); i++) {
            const char *key = order[i], *label = order[i];
            if (i == 0 && request) {
                key = json_object_get(b, "replies") ? "replies" : "acks";
                label = "replies";
            } else if (i == 4) {
                key = others;
                label = "delivered of other connections' or publishers' messages";
            }
            if (sq_report__numd(b, key, 0) > 0)
                fprintf(f, " · %s %s", g(b, key, g1), label);
        }
        fputc('\n', f);
        const json_t *cn = json_object_get(b, "connect");
        if (json_is_object(cn) &&
            sq_report__numd(cn, "connacks", 0) + sq_report__numd(cn, "refused", 0) > 0) {
            char d[3][32];
            fprintf(f, "%-12s %s CONNACKs · p50 %s · p99 %s · max %s · %s refused", "Connect",
                    g(cn, "connacks", g1), dus(cn, "p50_us", d[0]), dus(cn, "p99_us", d[1]),
                    dus(cn, "max_us", d[2]), g(cn, "refused", g2));
            const json_t *by = json_object_get(cn, "refused_by");
            const char *why;
            const json_t *v;
            json_object_foreach((json_t *)by, why, v)
            {
                if (json_is_integer(v) && json_integer_value(v) > 0)
                    fprintf(f, " · %lld %s", (long long)json_integer_value(v), why);
            }
            fprintf(f, "\n%-12s %s keep-alive pings · %s PINGRESPs · %s unanswered\n", "Keep-alive",
                    g(cn, "keepalive.pings", g1), g(cn, "keepalive.pingresps", g2),
                    g(cn, "keepalive.unanswered", g3));
        }
        const char *err = sq_report__str(b, "first_error", NULL);
        if (err)
            fprintf(f, "%-12s %s\n", "Broker said", err);
    }
}

/* A distributed run (docs/distributed.md): the agents, their segments and clocks, and the lost. */
static void cluster(FILE *f, const json_t *doc)
{
    const json_t *c = json_object_get(doc, "cluster");
    const json_t *agents = json_object_get(c, "agents");
    if (!json_is_array(agents))
        return;
    char g1[32];
    double spread = sq_report__numd(c, "start_spread_ms", 0), unc = 0;
    for (size_t i = 0; i < json_array_size(agents); i++) {
        double u = sq_report__numd(json_array_get(agents, i), "clock.uncertainty_ms", 0);
        unc = u > unc ? u : unc;
    }
    fprintf(f, "%-12s %zu (run %s) · clocks known to within %.3f ms · start spread %.3f ms",
            "Agents", json_array_size(agents), sq_report__str(c, "run", "?"), unc, spread);
    if (sq_report__numd(c, "lost", 0) > 0) {
        const json_t *m = json_object_get(c, "merged_agents");
        fprintf(f, " · %.0f LOST", sq_report__numd(c, "lost", 0));
        if (json_is_true(json_object_get(c, "totals_last_known")))
            fputs(" · no agent's result came: the totals are their last known figures", f);
        else if (json_is_array(m)) /* every figure above is over these, none over a lost one */
            fprintf(f, " · the totals are over %zu of %zu", json_array_size(m),
                    json_array_size(agents));
    }
    fputc('\n', f);
    const char *inc = sq_report__str(c, "incomplete", NULL);
    if (inc)
        fprintf(f, "%-12s %s\n", "Incomplete", inc);
    if (sq_report__numd(c, "controller.nats_outages", 0) > 0)
        fprintf(f, "%-12s %.0f, %.1f s in all (ridden out: the agents resent what it missed)\n",
                "NATS outages", sq_report__numd(c, "controller.nats_outages", 0),
                sq_report__numd(c, "controller.nats_down_s", 0));
    for (size_t i = 0; i < json_array_size(agents); i++) {
        const json_t *a = json_array_get(agents, i);
        fprintf(
            f, "%-12s %s %s:%s · %s sent · clock %+.3f ms", "", sq_report__str(a, "name", "?"),
            sq_report__str(a, "segment.from", "?"), sq_report__str(a, "segment.to", "?"),
            sq_fmt_group(sq_report__count(sq_report__numd(a, "requests.sent", 0)), g1, sizeof(g1)),
            sq_report__numd(a, "clock.offset_ms", 0));
        double at;
        if (json_is_true(json_object_get(a, "lost")) && sq_report__num(a, "lost_at_s", &at)) {
            char g2[32], g3[32];
            fprintf(f, " · LOST at %.1f s, %s: last known %s completed, %s failed", at,
                    json_is_true(json_object_get(c, "totals_last_known")) ? "in the totals"
                                                                          : "not in the totals",
                    sq_fmt_group(sq_report__count(sq_report__numd(a, "requests.completed", 0)), g2,
                                 sizeof(g2)),
                    sq_fmt_group(sq_report__count(sq_report__numd(a, "requests.failed", 0)), g3,
                                 sizeof(g3)));
        }
        const char *err = sq_report__str(a, "error", NULL);
        if (err)
            fprintf(f, " · %s", err);
        fputc('\n', f);
    }
}

/* --urls: each URL's figures (the document's `urls`). */
static void urls_section(FILE *f, const json_t *doc)
{
    const json_t *urls = json_object_get(doc, "urls");
    if (!json_is_array(urls) || !json_array_size(urls))
        return;
    static const char *const cls[] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
    size_t i;
    const json_t *e;
    char g1[32], g2[32], g3[32], g4[32], d[3][D];
    fprintf(f, "\nURLs (%s)\n", sq_report__str(json_object_get(doc, "config"), "urls_file", "?"));
    json_array_foreach((json_t *)urls, i, e)
    {
        const json_t *lat = json_object_get(e, "latency");
        const json_t *st = json_object_get(e, "status");
        /* failed as the steps and the Failed line count it: no response (the entry's `failed`)
         * or a status >= 400 */
        uint64_t transport = u64(e, "failed"), http = u64(st, "4xx") + u64(st, "5xx");
        fprintf(f, "  %-6s %s\n         %s req · %s failed (%s transport, %s HTTP) ·",
                sq_report__str(e, "method", ""), sq_report__str(e, "url", "?"),
                g(e, "requests", g1), sq_fmt_group(transport + http, g2, sizeof(g2)),
                sq_fmt_group(transport, g3, sizeof(g3)), sq_fmt_group(http, g4, sizeof(g4)));
        for (size_t k = 0; k < SQ_ARRAY_LEN(cls); k++)
            if (u64(st, cls[k]))
                fprintf(f, " %s %s ·", cls[k], g(st, cls[k], g1));
        if (sq_report__numd(lat, "count", 0) > 0)
            fprintf(f, " p50 %s · p95 %s · max %s\n", dus(lat, "p50_us", d[0]),
                    dus(lat, "p95_us", d[1]), dus(lat, "max_us", d[2]));
        else
            fprintf(f, " no response\n");
    }
}

/* --urls on several hosts: each host's figures (the document's `hosts`). */
static void hosts_section(FILE *f, const json_t *doc)
{
    const json_t *hosts = json_object_get(doc, "hosts");
    if (!json_is_array(hosts) || !json_array_size(hosts))
        return;
    static const char *const cls[] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
    size_t i;
    const json_t *e;
    char g1[32], g2[32], g3[32], d[4][D];
    fprintf(f, "\nHosts (each connection goes to one)\n");
    json_array_foreach((json_t *)hosts, i, e)
    {
        const json_t *lat = json_object_get(e, "latency");
        const json_t *st = json_object_get(e, "status");
        uint64_t transport = u64(e, "failed"), http = u64(st, "4xx") + u64(st, "5xx");
        fprintf(f, "  %s · %s connections · %s URLs\n         %s req · %s failed ·",
                sq_report__str(e, "host", "?"), g(e, "connections", g1), g(e, "urls", g2),
                g(e, "requests", g3), sq_fmt_group(transport + http, g1, sizeof(g1)));
        for (size_t k = 0; k < SQ_ARRAY_LEN(cls); k++)
            if (u64(st, cls[k]))
                fprintf(f, " %s %s ·", cls[k], g(st, cls[k], g2));
        if (sq_report__numd(lat, "count", 0) > 0)
            fprintf(f, " p50 %s · p95 %s · p99 %s · max %s\n", dus(lat, "p50_us", d[0]),
                    dus(lat, "p95_us", d[1]), dus(lat, "p99_us", d[2]), dus(lat, "max_us", d[3]));
        else
            fprintf(f, " no response\n");
    }
}

/* ---- failures, errors, samples, the verdict ---- */

/* The failures of each kind, apart: with no response (transport) and with a status >= 400 (HTTP),
 * and k6's http_req_failed, which counts both. From "failures", or for an older document from
 * "requests" and "status". */
static void failed_line(const struct out *o, const json_t *doc)
{
    FILE *f = o->f;
    const json_t *fl = json_object_get(doc, "failures");
    double transport, http, of;
    if (json_is_object(fl)) {
        transport = sq_report__numd(fl, "transport", 0);
        http = sq_report__numd(fl, "http", 0);
        of = sq_report__numd(fl, "http_req_failed.of", 0);
    } else {
        transport = sq_report__numd(doc, "requests.failed", 0);
        http = sq_report__numd(doc, "status.4xx", 0) + sq_report__numd(doc, "status.5xx", 0);
        of = sq_report__numd(doc, "requests.completed", 0) + transport;
    }
    char g1[32], g2[32];
    bool bad = transport + http > 0;
    fprintf(f,
            "%-12s %s%s transport (no response) · %s HTTP (status ≥ 400)%s · http_req_failed "
            "%.2f%% (k6: both kinds)\n",
            "Failed", c_on(o, bad ? RED : ""), sq_fmt_group(sq_report__count(transport), g1, 32),
            sq_fmt_group(sq_report__count(http), g2, 32), bad ? c_off(o) : "",
            of > 0 ? 100.0 * (transport + http) / of : 0.0);
}

/* Every exact status seen ("200 9,990 · 503 10"), or the classes of an older document. */
static void status_line(FILE *f, const json_t *doc)
{
    static const char *const cls[] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
    fprintf(f, "%-12s", "Status");
    const json_t *codes = json_object_get(doc, "status_codes");
    if (json_is_object(codes) && json_object_size(codes))
        counts(f, codes, NULL, 0);
    else
        counts(f, json_object_get(doc, "status"), cls, SQ_ARRAY_LEN(cls));
}

/* Errors by kind, then what each one means or its first message ("connect: Connection
 * refused"). Kinds with no error are left out. */
static void errors_lines(const struct out *o, const json_t *doc)
{
    FILE *f = o->f;
    const json_t *errs = json_object_get(doc, "errors");
    const char *k;
    const json_t *v;
    double total = 0;
    json_object_foreach((json_t *)errs, k, v) total += json_is_number(v) ? json_number_value(v) : 0;
    fprintf(f, "%-12s%s", "Errors", c_on(o, total > 0 ? RED : ""));
    counts(f, errs, NULL, 0);
    if (total > 0)
        fputs(c_off(o), f);
    const json_t *msgs = json_object_get(doc, "error_messages");
    if (json_is_object(msgs))
        json_object_foreach((json_t *)msgs, k, v)
        {
            if (json_is_string(v))
                fprintf(f, "%-12s   %s: %s\n", "", k, json_string_value(v));
        }
}

/* The start of s on one line: at most max bytes, control bytes as spaces, "…" when cut. */
static void one_line(FILE *f, const char *s, size_t max)
{
    size_t n = strlen(s), i = 0;
    for (; i < n && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i + 1 == n && (c == '\n' || c == '\r'))
            break;
        fputc(c < 0x20 || c == 0x7f ? ' ' : c, f);
    }
    if (i < n) {
        while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) /* never half a character */
            i--;
        fputs("…", f);
    }
}

/* The first sampled failure of each kind (--sample-responses): its status or error, when, the
 * request line and the start of the body, so a newcomer sees what the server said. */
static void sample_lines(FILE *f, const json_t *doc)
{
    const json_t *cls = sq_report__get(doc, "sampled_exchanges.classes");
    size_t i;
    const json_t *c;
    bool first = true;
    json_array_foreach(cls, i, c)
    {
        const char *name = sq_report__str(c, "class", "");
        bool err = strcmp(sq_report__str(c, "kind", ""), "error") == 0;
        if (!err && strcmp(name, "4xx") != 0 && strcmp(name, "5xx") != 0 &&
            strcmp(name, "other") != 0)
            continue;
        const json_t *v = json_object_get(c, "samples");
        const json_t *x = NULL, *y;
        size_t j;
        json_array_foreach(v, j, y) if (!x || sq_report__numd(y, "t_s", 0) <
                                                  sq_report__numd(x, "t_s", 0)) x = y;
        if (!x)
            continue;
        char g1[32];
        fprintf(f, "%-12s %s (%s seen): ", first ? "Sampled" : "", name,
                sq_fmt_group(sq_report__count(sq_report__numd(c, "seen", 0)), g1, sizeof(g1)));
        first = false;
        const char *req = sq_report__str(x, "request.text", "");
        size_t rl = strcspn(req, "\r\n");
        fprintf(f, "%.*s", (int)(rl < 80 ? rl : 80), req);
        if (json_is_integer(json_object_get(x, "status")))
            fprintf(f, " → %d", (int)sq_report__numd(x, "status", 0));
        if (json_is_string(json_object_get(x, "error")))
            fprintf(f, " → %s", sq_report__str(x, "error", ""));
        const char *body = sq_report__str(x, "response.body", "");
        if (body[0]) {
            fputs(" · body \"", f);
            one_line(f, body, 72);
            fputc('"', f);
        }
        fputc('\n', f);
    }
}

/* "every response was 503 — is the URL right?": every response had a status >= 400. */
static void all_errors_warning(const struct out *o, const json_t *doc)
{
    double done = sq_report__numd(doc, "requests.completed", 0);
    if (done <= 0)
        return;
    const json_t *codes = json_object_get(doc, "status_codes");
    char buf[400] = "", g1[32];
    double bad = 0;
    size_t n = 0, used = 0;
    if (json_is_object(codes) && json_object_size(codes)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)codes, k, v)
        {
            double c = json_is_number(v) ? json_number_value(v) : 0;
            if (c <= 0)
                continue;
            if (atoi(k) < 400)
                return;
            bad += c;
            int w = snprintf(buf + used, sizeof(buf) - used, "%s%s ×%s", n ? ", " : "", k,
                             sq_fmt_group(sq_report__count(c), g1, sizeof(g1)));
            if (w > 0 && (size_t)w < sizeof(buf) - used)
                used += (size_t)w;
            n++;
        }
    } else {
        bad = sq_report__numd(doc, "status.4xx", 0) + sq_report__numd(doc, "status.5xx", 0);
    }
    if (bad < done)
        return;
    fprintf(o->f, "%s", c_on(o, BOLD YELLOW));
    if (n == 1)
        fprintf(o->f, "warning: every response was %.*s — is the URL right?",
                (int)strcspn(buf, " "), buf);
    else if (n > 1)
        fprintf(o->f, "warning: every response was an error status (%s) — is the URL right?", buf);
    else
        fprintf(o->f, "warning: every response was 4xx or 5xx — is the URL right?");
    fprintf(o->f, "%s\n", c_off(o));
}

/* A plan with thresholds ends with its verdict: the crossed ones named again. */
static void verdict_line(const struct out *o, const json_t *doc)
{
    const json_t *ths = json_object_get(doc, "thresholds");
    if (!json_is_array(ths) || json_array_size(ths) == 0)
        return;
    size_t i, crossed = 0;
    const json_t *e;
    json_array_foreach((json_t *)ths, i, e) crossed += !json_is_true(json_object_get(e, "ok"));
    FILE *f = o->f;
    if (!crossed) {
        fprintf(f, "\n%s✓ thresholds held: %zu of %zu%s\n", c_on(o, BOLD GREEN),
                json_array_size(ths), json_array_size(ths), c_off(o));
        return;
    }
    fprintf(f, "\n%s✗ thresholds crossed: ", c_on(o, BOLD RED));
    size_t n = 0;
    json_array_foreach((json_t *)ths, i, e)
    {
        if (json_is_true(json_object_get(e, "ok")))
            continue;
        fprintf(f, "%s%s %s", n++ ? "; " : "", sq_report__str(e, "metric", "?"),
                sq_report__str(e, "expression", "?"));
    }
    fprintf(f, "%s\n", c_off(o));
}

/* The script and OAuth2 blocks, when the run had them. */
static void scripting(FILE *f, const json_t *doc)
{
    char g1[32], g2[32], g3[32];
    const json_t *s = json_object_get(doc, "script");
    if (json_is_object(s)) {
        fprintf(f, "%-12s %s", "Script", sq_report__str(s, "file", "(none)"));
        const json_t *c = json_object_get(s, "calls");
        static const char *const calls[][2] = {{"request", "request()"},
                                               {"response", "response()"},
                                               {"delay", "delay()"},
                                               {"hooks", "hook"}};
        for (size_t i = 0; i < SQ_ARRAY_LEN(calls); i++)
            if (sq_report__numd(c, calls[i][0], 0) > 0)
                fprintf(f, " · %s %s calls", g(c, calls[i][0], g1), calls[i][1]);
        if (sq_report__numd(s, "skipped_steps", 0) > 0)
            fprintf(f, " · %s steps skipped", g(s, "skipped_steps", g1));
        if (json_is_true(json_object_get(s, "static_request")))
            fprintf(f, " · static request");
        fputc('\n', f);
    }
    const json_t *o = json_object_get(doc, "oauth");
    if (json_is_object(o)) {
        fprintf(f, "%-12s %s token%s · %s refreshes · %s refresh failures", "OAuth2",
                g(o, "tokens", g1), sq_report__numd(o, "tokens", 0) == 1 ? "" : "s",
                g(o, "refreshes", g2), g(o, "failures", g3));
        const char *last = sq_report__str(o, "last_error", "");
        if (last[0])
            fprintf(f, " (latest: %s)", last);
        fputc('\n', f);
    }
}

/* ---- the summary ---- */

/* --subscribe-only: no publisher ran, so no request, window or latency of its own to show; what
 * was subscribed to, for how long, and what the subscribers counted:
 * "squall --subscribe-only nats://127.0.0.1:4222/t.a · 4 subscribers · 2.00s" */
static int subscribe_only(FILE *f, const json_t *doc)
{
    const json_t *s = json_object_get(doc, "subscribers");
    char g1[32];
    const char *name = sq_report__str(doc, "run.name", NULL);
    fprintf(f, "squall %s%s%s--subscribe-only %s/%s · %s subscriber%s · %.2fs\n\n", name ? "[" : "",
            name ? name : "", name ? "] " : "", sq_report__str(s, "url", "?"),
            sq_report__str(s, "subscription", "?"), g(s, "count", g1),
            sq_report__numd(s, "count", 0) == 1 ? "" : "s", sq_report__numd(doc, "duration_s", 0));
    subs_lines(f, doc);
    return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}

int sq_report_summary(const json_t *doc, FILE *f)
{
    return sq_report_summary_opts(doc, f, NULL);
}

int sq_report_summary_opts(const json_t *doc, FILE *f, const struct sq_summary_opts *opts)
{
    const char *why;
    if (sq_report_doc_check(doc, &why) < 0)
        return -SQ_EPARSE;
    sink_lines(f, doc);
    if (!json_object_get(doc, "requests")) /* `squall sink` alone */
        return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
    if (json_object_get(doc, "sink"))
        fputc('\n', f);
    struct out o = {.f = f, .color = opts && opts->color};
    bool open = strcmp(sq_report__str(doc, "mode", ""), "open-loop") == 0;
    const json_t *rq = json_object_get(doc, "requests");
    char g1[32], g2[32], g3[32], d0[D], d1[D];

    if (json_is_true(sq_report__get(doc, "subscribers.subscribe_only")))
        return subscribe_only(f, doc);
    all_errors_warning(&o, doc);
    if (json_is_true(sq_report__get(doc, "client.saturated")))
        fprintf(f,
                "the client was saturated: %s — these figures measure squall, not the server; "
                "add threads or agents\n",
                sq_report__str(doc, "client.saturation", "(no reason given)"));
    header(f, doc, open);
    if (json_is_true(json_object_get(doc, "aborted")))
        fprintf(f, "%sstopped early: %s%s\n", c_on(&o, YELLOW),
                sq_report__str(doc, "abort_reason", "(no reason given)"), c_off(&o));
    fprintf(f, "\n%-12s %s sent · %s completed · %s in flight at the end", "Requests",
            g(rq, "sent", g1), g(rq, "completed", g2), g(rq, "in_flight", g3));
    /* A plan's arrivals are iterations, each running its scenario's flow (so 80 due can send
     * 160 requests): said so, or the two lines read as a contradiction. */
    if (open)
        fprintf(f,
                "\n%-12s %s %sdue · %s dropped (no connection free within the in-flight cap, or "
                "still waiting at the end)",
                "Arrivals", g(rq, "arrivals", g1),
                json_object_get(doc, "plan") ? "iterations (each runs its flow's requests) " : "",
                g(rq, "dropped", g2));
    fputc('\n', f);
    if (open)
        pool_lines(f, doc);
    failed_line(&o, doc);
    fprintf(f, "%-12s %s req/s · %s/s in · %s/s out\n", "Throughput",
            sq_fmt_group_real(sq_report__numd(doc, "rate.requests_per_s", 0), 1, g1, sizeof(g1)),
            sq_fmt_bytes(sq_report__numd(doc, "rate.bytes_received_per_s", 0), d0, D),
            sq_fmt_bytes(sq_report__numd(doc, "rate.bytes_sent_per_s", 0), d1, D));
    latency(f, doc, open);

    const json_t *ws = json_object_get(doc, "ws");
    /* a WebSocket run's requests are messages: no HTTP status, no HTTP bodies; a bus run's are
     * messages too, with its own line */
    bool messages = strcmp(sq_report__str(doc, "config.protocol", ""), "websocket") == 0;
    bool bus = json_is_object(json_object_get(doc, "nats")) ||
               json_is_object(json_object_get(doc, "mqtt"));
    if (bus)
        bus_lines(f, doc);
    else if (!messages)
        status_line(f, doc);
    subs_lines(f, doc); /* a plan's subscribers: beside requests as well as publishes */
    errors_lines(&o, doc);
    sample_lines(f, doc);
    if (json_is_object(json_object_get(doc, "connections")))
        fprintf(f, "%-12s %s opened · %s replaced after the server closed them\n", "Connections",
                g(doc, "connections.opened", g1), g(doc, "connections.closed_by_server", g2));
    proxy_line(f, doc);
    tls(f, json_object_get(doc, "tls"));
    websocket(f, ws);
    server(f, doc);
    client(f, doc, open);
    seed_line(f, doc);

    if (!messages && !bus)
        bodies(f, doc); /* WebSocket: the ws block has the payload figures */
    phases(f, doc);
    cluster(f, doc);
    scripting(f, doc);
    plan_sections(&o, doc);
    urls_section(f, doc);
    hosts_section(f, doc);

    struct sq_hist *h;
    if (sq_report__hist(json_object_get(doc, "latency"), &h) == 0) {
        sq_fmt_distribution(f, h);
        sq_hist_free(h);
    }
    verdict_line(&o, doc);
    return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}
