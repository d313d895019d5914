/* output/fmt.c - formatting shared by the terminal outputs (see fmt.h). */
#include "output/fmt.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "stats/hist.h"

#define BAR_WIDTH 36
#define DIST_ROWS 10

const char *sq_fmt_group(uint64_t v, char *buf, size_t size)
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

const char *sq_fmt_group_real(double v, int decimals, char *buf, size_t size)
{
    if (!(v >= 0) || v >= 1e18) {
        snprintf(buf, size, "%.*f", decimals, v);
        return buf;
    }
    char frac[32];
    snprintf(frac, sizeof(frac), "%.*f", decimals, v);
    const char *dot = strchr(frac, '.');
    char whole[32];
    sq_fmt_group(strtoull(frac, NULL, 10), whole, sizeof(whole));
    snprintf(buf, size, "%s%s", whole, dot ? dot : "");
    return buf;
}

const char *sq_fmt_dur_us(double us, char *buf, size_t size)
{
    if (us < 1000)
        snprintf(buf, size, "%.0fµs", us);
    else if (us < 1e6)
        snprintf(buf, size, "%.2fms", us / 1e3);
    else
        snprintf(buf, size, "%.2fs", us / 1e6);
    return buf;
}

const char *sq_fmt_bytes(double b, char *buf, size_t size)
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

void sq_fmt_pad(FILE *f, const char *s, int width, bool right)
{
    int cols = 0;
    for (const char *p = s; *p; p++)
        cols += ((unsigned char)*p & 0xC0) != 0x80;
    if (right)
        fprintf(f, "%*s%s", width > cols ? width - cols : 0, "", s);
    else
        fprintf(f, "%s%*s", s, width > cols ? width - cols : 0, "");
}

void sq_fmt_distribution(FILE *f, const struct sq_hist *h)
{
    if (sq_hist_total(h) == 0)
        return;
    int64_t lo = sq_hist_min(h), hi = sq_hist_percentile(h, 99.9);
    if (lo < 1)
        lo = 1;
    if (hi <= lo)
        hi = lo + 1;
    /* Bounds b[0] = lo < b[1] < ... < b[rows] = hi + 1, geometric: b[i] = lo * r^i, r chosen so
     * DIST_ROWS rows span [lo, hi]. Rounding may make two bounds equal: those rows merge. */
    int64_t b[DIST_ROWS + 1];
    int rows = 0;
    double r = pow((double)(hi + 1) / (double)lo, 1.0 / DIST_ROWS);
    b[0] = lo;
    for (int i = 1; i <= DIST_ROWS; i++) {
        int64_t v = i == DIST_ROWS ? hi + 1 : (int64_t)llround((double)lo * pow(r, i));
        if (v > b[rows])
            b[++rows] = v;
    }
    int64_t counts[DIST_ROWS + 1], peak = 1;
    for (int i = 0; i < rows; i++) {
        counts[i] = sq_hist_count_between(h, b[i], b[i + 1] - 1);
        if (counts[i] > peak)
            peak = counts[i];
    }
    int64_t tail = sq_hist_count_between(h, b[rows], INT64_MAX / 2);
    fprintf(f, "\nLatency distribution (log-spaced rows)\n");
    char a[24], bb[24], n[32];
    for (int i = 0; i <= rows; i++) {
        int64_t c = i < rows ? counts[i] : tail;
        if (i == rows && c == 0)
            break;
        /* in double: a histogram decoded from a file may hold counts near INT64_MAX */
        double bar = ceil((double)c * BAR_WIDTH / (double)peak);
        int len = bar > BAR_WIDTH ? BAR_WIDTH : bar < 0 ? 0 : (int)bar;
        fputs("  ", f);
        sq_fmt_pad(f, i < rows ? sq_fmt_dur_us((double)b[i], a, sizeof(a)) : "above", 8, true);
        fputs(i < rows ? " – " : "   ", f);
        sq_fmt_pad(f,
                   sq_fmt_dur_us((double)(i < rows ? b[i + 1] - 1 : b[rows] - 1), bb, sizeof(bb)),
                   9, false);
        for (int k = 0; k < len; k++)
            fputs("■", f);
        fprintf(f, "%*s %s\n", BAR_WIDTH - len, "", sq_fmt_group((uint64_t)c, n, sizeof(n)));
    }
}
