/* output/series.c - the CSV series and HdrHistogram's interval log (see series.h). */
#include "output/series.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "base/b64.h"
#include "plan/plan.h"
#include "stats/hist.h"

void sq_csv_header(FILE *f, const struct sq_plan_metric *m, uint32_t nm)
{
    fputs("t_s,len_s,requests,completed,failed,dropped,errors,rps,bytes_received,p50_us,p90_us,"
          "p99_us,max_us,vus",
          f);
    for (uint32_t i = 0; i < nm; i++) {
        const char *n = m[i].name;
        switch (m[i].kind) {
        case SQ_MK_COUNTER:
        case SQ_MK_GAUGE:
            fprintf(f, ",%s", n);
            break;
        case SQ_MK_RATE:
            fprintf(f, ",%s_passes,%s_total", n, n);
            break;
        case SQ_MK_TREND:
            fprintf(f, ",%s_count,%s_avg", n, n);
            break;
        }
    }
    fputc('\n', f);
}

void sq_csv_row(FILE *f, const struct sq_second *s, const struct sq_plan_metric *m, uint32_t nm)
{
    double len = s->len_s > 0 ? s->len_s : 1;
    fprintf(f,
            "%.3f,%.3f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.1f,%" PRIu64
            ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRIu64,
            s->t_s, s->len_s, s->sent, s->completed, s->failed, s->dropped, s->errors,
            (double)s->completed / len, s->bytes_received, s->p50_us, s->p90_us, s->p99_us,
            s->max_us, s->active);
    for (uint32_t i = 0; i < nm; i++) {
        static const struct sq_msecond none = {0};
        const struct sq_msecond *x = s->m && i < s->nm ? &s->m[i] : &none;
        switch (m[i].kind) {
        case SQ_MK_COUNTER:
            fprintf(f, ",%.15g", x->sum);
            break;
        case SQ_MK_GAUGE:
            if (x->last_ns)
                fprintf(f, ",%.15g", x->last);
            else
                fputc(',', f);
            break;
        case SQ_MK_RATE:
            fprintf(f, ",%" PRIu64 ",%" PRIu64, x->nonzero, x->n);
            break;
        case SQ_MK_TREND:
            fprintf(f, ",%" PRIu64 ",", x->n);
            if (x->n)
                fprintf(f, "%.15g", x->sum / (double)x->n);
            break;
        }
    }
    fputc('\n', f);
    fflush(f);
}

void sq_hdrlog_header(FILE *f, double start_wall_s)
{
    time_t t = (time_t)start_wall_s;
    struct tm tm;
    char date[64] = "";
    if (gmtime_r(&t, &tm))
        strftime(date, sizeof(date), "%a %b %d %H:%M:%S UTC %Y", &tm);
    fprintf(f, "#[Histogram log format version 1.2]\n");
    fprintf(f, "#[StartTime: %.3f (seconds since epoch), %s]\n", start_wall_s, date);
    fprintf(f, "#[BaseTime: %.3f (seconds since epoch)]\n", start_wall_s);
    fprintf(f, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\","
               "\"Interval_Compressed_Histogram\"\n");
    fflush(f);
}

int sq_hdrlog_line(FILE *f, const struct sq_second *s, const struct sq_hist *h)
{
    unsigned char *blob = NULL;
    size_t len = 0;
    int rc = sq_hist_encode(h, &blob, &len);
    if (rc < 0)
        return rc;
    char *b64 = malloc(sq_b64_encoded_len(len));
    if (!b64) {
        free(blob);
        return -ENOMEM;
    }
    sq_b64_encode(blob, len, b64);
    /* Like Java's HistogramLogWriter: start relative to BaseTime, the max divided by the
     * default max-value unit ratio (1e6), three decimals. Values are µs. */
    int64_t max = sq_hist_total(h) ? sq_hist_max(h) : 0;
    fprintf(f, "%.3f,%.3f,%.3f,%s\n", s->t_s - s->len_s, s->len_s, (double)max / 1e6, b64);
    fflush(f);
    free(b64);
    free(blob);
    return 0;
}
