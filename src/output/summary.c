/* output/summary.c - the terminal summary of a quick run. */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "output/report.h"
#include "stats/hist.h"

#define BAR_WIDTH 36
#define DIST_ROWS 10

/* "1,234,567" */
static const char *group(uint64_t v, char *buf, size_t size)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

/* A duration given in µs, with a unit that keeps three or four significant digits. */
static const char *dur_us(double us, char *buf, size_t size)
{
    if (us < 1000)
        snprintf(buf, size, "%.0fµs", us);
    else if (us < 1e6)
        snprintf(buf, size, "%.2fms", us / 1e3);
    else
        snprintf(buf, size, "%.2fs", us / 1e6);
    return buf;
}

static const char *bytes_h(double b, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t u = 0;
    while (b >= 1024 && u + 1 < SQ_ARRAY_LEN(units)) {
        b /= 1024;
        u++;
    }
    snprintf(buf, size, u ? "%.2f %s" : "%.0f %s", b, units[u]);
    return buf;
}

/* Prints s padded to width terminal columns (UTF-8 aware: "µ" is two bytes, one column). */
static void pad(FILE *f, const char *s, int width, bool right)
{
    int cols = 0;
    for (const char *p = s; *p; p++)
        cols += ((unsigned char)*p & 0xC0) != 0x80;
    if (right)
        fprintf(f, "%*s%s", width > cols ? width - cols : 0, "", s);
    else
        fprintf(f, "%s%*s", s, width > cols ? width - cols : 0, "");
}

static void distribution(FILE *f, const struct sq_result *r, const struct sq_latency_figures *lf)
{
    const struct sq_hist *h = r->latency;
    int64_t lo = lf->min, hi = lf->p999;
    if (lf->count == 0)
        return;
    if (hi <= lo)
        hi = lo + 1;
    int64_t step = (hi - lo + DIST_ROWS - 1) / DIST_ROWS;
    if (step < 1)
        step = 1;
    int64_t counts[DIST_ROWS + 1], peak = 1;
    int rows = 0;
    for (int64_t a = lo; a <= hi && rows < DIST_ROWS; a += step, rows++) {
        counts[rows] = sq_hist_count_between(h, a, a + step - 1);
        if (counts[rows] > peak)
            peak = counts[rows];
    }
    int64_t tail = sq_hist_count_between(h, lo + step * rows, INT64_MAX / 2);
    fprintf(f, "\nLatency distribution\n");
    char a[24], b[24], n[32];
    for (int i = 0; i <= rows; i++) {
        int64_t c = i < rows ? counts[i] : tail;
        if (i == rows && c == 0)
            break;
        int len = (int)((c * BAR_WIDTH + peak - 1) / peak);
        if (len > BAR_WIDTH)
            len = BAR_WIDTH;
        fputs("  ", f);
        pad(f, i < rows ? dur_us((double)(lo + step * i), a, sizeof(a)) : "above", 8, true);
        fputs(i < rows ? " – " : "   ", f);
        pad(f, dur_us((double)(lo + step * (i + (i < rows))) - (i < rows), b, sizeof(b)), 9, false);
        for (int k = 0; k < len; k++)
            fputs("■", f);
        fprintf(f, "%*s %s\n", BAR_WIDTH - len, "", group((uint64_t)c, n, sizeof(n)));
    }
}

void sq_report_summary(FILE *f, const struct sq_report_info *info, const struct sq_result *r)
{
    struct sq_latency_figures lf;
    sq_report_latency_figures(r->latency, &lf);
    const struct sq_exec *ex = info->exec;
    const char *bold = info->color ? "\033[1m" : "", *red = info->color ? "\033[31m" : "",
               *off = info->color ? "\033[0m" : "";
    char g1[32], g2[32], g3[32], g4[32], d[6][24];
    double secs = (double)r->duration_ns / 1e9;
    if (secs <= 0)
        secs = 1e-9;

    fprintf(f, "%ssquall%s %s %s → %s\n", bold, off, info->method, info->url, info->target_addr);
    fprintf(f, "%s · %s", r->open ? "open loop" : "closed loop", sq_exec_name(ex->kind));
    if (ex->kind == SQ_EXEC_CONSTANT_ARRIVAL_RATE)
        fprintf(f, " %g/s", ex->rate * 1e9 / (double)ex->time_unit_ns);
    if (ex->kind == SQ_EXEC_SHARED_ITERATIONS || ex->kind == SQ_EXEC_PER_VU_ITERATIONS)
        fprintf(f, " %s", group(ex->iterations, g1, sizeof(g1)));
    fprintf(f, " · %u connection%s", r->connections, r->connections == 1 ? "" : "s");
    if (r->open)
        fprintf(f, " (max in flight %s)", group(ex->max_in_flight, g1, sizeof(g1)));
    if (ex->pacing_ns)
        fprintf(f, " · paced %s", dur_us((double)ex->pacing_ns / 1e3, d[0], 24));
    fprintf(f, " · %u thread%s · %.2fs (asked %.2fs) · setup %s\n", r->threads,
            r->threads == 1 ? "" : "s", secs, (double)sq_exec_length_ns(ex) / 1e9,
            dur_us((double)r->setup_ns / 1e3, d[0], 24));
    if (r->aborted)
        fprintf(f, "%sstopped early: %s%s\n", red, r->abort_reason, off);

    fprintf(f, "\n%-12s %s sent · %s completed · %s failed · %s in flight at the end", "Requests",
            group(r->c.sent, g1, sizeof(g1)), group(r->c.completed, g2, sizeof(g2)),
            group(r->c.failed, g3, sizeof(g3)), group(r->in_flight, g4, sizeof(g4)));
    if (r->open)
        fprintf(f,
                "\n%-12s %s due · %s%s dropped%s (no connection free within the in-flight "
                "cap, or still waiting at the end)",
                "Arrivals", group(r->arrivals, g1, sizeof(g1)), r->c.dropped ? red : "",
                group(r->c.dropped, g2, sizeof(g2)), r->c.dropped ? off : "");
    fputc('\n', f);
    fprintf(f, "%-12s %.1f req/s · %s/s in · %s/s out\n", "Throughput",
            (double)r->c.completed / secs, bytes_h((double)r->c.bytes_received / secs, d[0], 24),
            bytes_h((double)r->c.bytes_sent / secs, d[1], 24));
    if (lf.count) {
        fprintf(f, "%-12s min %s · mean %s · stdev %s · max %s (from the %s send)\n", "Latency",
                dur_us((double)lf.min, d[0], 24), dur_us(lf.mean, d[1], 24),
                dur_us(lf.stdev, d[2], 24), dur_us((double)lf.max, d[3], 24),
                r->open ? "intended" : "actual");
        fprintf(f, "%-12s p50 %s · p90 %s · p95 %s · p99 %s", "", dur_us((double)lf.p50, d[0], 24),
                dur_us((double)lf.p90, d[1], 24), dur_us((double)lf.p95, d[2], 24),
                dur_us((double)lf.p99, d[3], 24));
        fprintf(f, " · p99.9 %s\n", dur_us((double)lf.p999, d[4], 24));
    } else {
        fprintf(f, "%-12s no response completed\n", "Latency");
    }
    if (r->open && lf.count) {
        struct sq_latency_figures u;
        sq_report_latency_figures(r->latency_uncorrected, &u);
        fprintf(f, "%-12s p50 %s · p90 %s · p99 %s · max %s (uncorrected: from the actual send)\n",
                "", dur_us((double)u.p50, d[0], 24), dur_us((double)u.p90, d[1], 24),
                dur_us((double)u.p99, d[2], 24), dur_us((double)u.max, d[3], 24));
    }
    if (lf.out_of_range)
        fprintf(f, "%-12s %s values outside 1µs..1h were not recorded\n", "",
                group((uint64_t)lf.out_of_range, g1, sizeof(g1)));

    fprintf(f, "%-12s", "Status");
    static const char *const cls[] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    int any = 0;
    for (int i = 1; i <= 6; i++) {
        int k = i % 6;
        if (r->c.status[k]) {
            bool bad = k >= 4 || k == 0;
            fprintf(f, "%s%s%s %s%s", any ? " · " : " ", bad ? red : "", cls[k],
                    group(r->c.status[k], g1, sizeof(g1)), bad ? off : "");
            any = 1;
        }
    }
    fprintf(f, "%s\n", any ? "" : " none");

    fprintf(f, "%-12s", "Errors");
    any = 0;
    for (int k = 0; k < SQ_ERRK_COUNT; k++) {
        if (r->c.errors[k]) {
            fprintf(f, "%s%s%s %s%s", any ? " · " : " ", red, sq_errk_name((enum sq_errk)k),
                    group(r->c.errors[k], g1, sizeof(g1)), off);
            any = 1;
        }
    }
    fprintf(f, "%s\n", any ? "" : " none");
    fprintf(f, "%-12s %s opened · %s replaced after the server closed them\n", "Connections",
            group(r->c.conns_opened, g1, sizeof(g1)),
            group(r->c.conns_closed_by_server, g2, sizeof(g2)));
    distribution(f, r, &lf);
}
