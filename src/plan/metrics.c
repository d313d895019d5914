/* plan/metrics.c - see metrics.h. */
#include "plan/metrics.h"

#include <string.h>

static const struct {
    const char *name;
    enum sq_metric_kind kind;
    enum sq_metric_scope scope;
} table[SQ_METRIC__COUNT] = {
#define SQ_METRIC_ROW(id, n, k, s) [SQ_METRIC_##id] = {n, SQ_MK_##k, SQ_MS_##s},
    SQ_METRIC_LIST(SQ_METRIC_ROW)
#undef SQ_METRIC_ROW
};

const char *sq_metric_name(enum sq_metric m)
{
    return (unsigned)m < SQ_METRIC__COUNT ? table[m].name : "?";
}

enum sq_metric_kind sq_metric_kind(enum sq_metric m)
{
    return (unsigned)m < SQ_METRIC__COUNT ? table[m].kind : SQ_MK_TREND;
}

enum sq_metric_scope sq_metric_scope(enum sq_metric m)
{
    return (unsigned)m < SQ_METRIC__COUNT ? table[m].scope : SQ_MS_RUN;
}

int sq_metric_find(const char *name, size_t len)
{
    for (int i = 0; i < SQ_METRIC__COUNT; i++)
        if (strlen(table[i].name) == len && memcmp(table[i].name, name, len) == 0)
            return i;
    return -1;
}

bool sq_metric_agg_fits(enum sq_metric_kind k, enum sq_th_agg a)
{
    switch (k) {
    case SQ_MK_COUNTER:
        return a == SQ_TH_COUNT || a == SQ_TH_RATE;
    case SQ_MK_RATE:
        return a == SQ_TH_RATE;
    case SQ_MK_GAUGE:
        return a == SQ_TH_VALUE;
    case SQ_MK_TREND:
        return a == SQ_TH_AVG || a == SQ_TH_MIN || a == SQ_TH_MAX || a == SQ_TH_MED ||
               a == SQ_TH_PCT;
    }
    return false;
}

const char *sq_metric_kind_aggs(enum sq_metric_kind k)
{
    switch (k) {
    case SQ_MK_COUNTER:
        return "a counter: count or rate";
    case SQ_MK_RATE:
        return "a rate: rate";
    case SQ_MK_GAUGE:
        return "a gauge: value";
    case SQ_MK_TREND:
        return "a trend: avg, min, max, med or p(N)";
    }
    return "?";
}
