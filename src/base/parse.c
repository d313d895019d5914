/* base/parse.c - duration and integer parsing with no locale and no silent truncation. */
#include "base/parse.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

#define SQ_MAX_DURATION_NS (100LL * 86400 * SQ_NS_PER_S)

static int unit_ns(const char *u, size_t n, int64_t *out)
{
    static const struct {
        const char *name;
        int64_t ns;
    } units[] = {
        {"ns", 1},          {"us", SQ_NS_PER_US},    {"µs", SQ_NS_PER_US},     {"ms", SQ_NS_PER_MS},
        {"s", SQ_NS_PER_S}, {"m", 60 * SQ_NS_PER_S}, {"h", 3600 * SQ_NS_PER_S}};
    for (size_t i = 0; i < SQ_ARRAY_LEN(units); i++) {
        if (strlen(units[i].name) == n && memcmp(units[i].name, u, n) == 0) {
            *out = units[i].ns;
            return 0;
        }
    }
    return -SQ_EPARSE;
}

int sq_parse_duration(const char *s, int64_t default_unit_ns, int64_t *out_ns)
{
    if (!s || !*s)
        return -SQ_EPARSE;
    double total = 0;
    const char *p = s;
    int parts = 0;
    while (*p) {
        if (!isdigit((unsigned char)*p) && *p != '.')
            return -SQ_EPARSE;
        double whole = 0, scale = 1;
        int digits = 0, dot = 0;
        for (; isdigit((unsigned char)*p) || *p == '.'; p++) {
            if (*p == '.') {
                if (dot++)
                    return -SQ_EPARSE;
                continue;
            }
            digits++;
            if (dot)
                scale /= 10;
            whole = whole * 10 + (*p - '0');
            if (whole > 1e18)
                return -SQ_EPARSE;
        }
        if (!digits)
            return -SQ_EPARSE;
        double v = whole * scale;
        const char *u = p;
        while (*p && !isdigit((unsigned char)*p) && *p != '.')
            p++;
        int64_t mult;
        if (p == u) {
            if (parts > 0 || *p)
                return -SQ_EPARSE; /* "1m30" is ambiguous */
            mult = default_unit_ns;
        } else if (unit_ns(u, (size_t)(p - u), &mult) < 0) {
            return -SQ_EPARSE;
        }
        total += v * (double)mult;
        if (total > (double)SQ_MAX_DURATION_NS)
            return -SQ_EPARSE;
        parts++;
    }
    *out_ns = (int64_t)(total + 0.5);
    return 0;
}

int sq_parse_u64(const char *s, uint64_t min, uint64_t max, int allow_suffix, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -SQ_EPARSE;
    uint64_t v = 0;
    const char *p = s;
    for (; isdigit((unsigned char)*p); p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -SQ_ERANGE;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (*p && allow_suffix && !p[1] && (*p == 'k' || *p == 'K' || *p == 'm' || *p == 'M')) {
        uint64_t mult = (*p == 'k' || *p == 'K') ? 1000 : 1000000;
        if (v > UINT64_MAX / mult)
            return -SQ_ERANGE;
        v *= mult;
        p++;
    }
    if (*p)
        return -SQ_EPARSE;
    if (v < min || v > max)
        return -SQ_ERANGE;
    *out = v;
    return 0;
}

int sq_parse_percentiles(const char *list, double *out, size_t max, const char **why)
{
    size_t n = 0;
    const char *p = list;
    for (;;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v > 0 && v <= 100)) {
            *why = "each percentile is a number above 0 and at most 100, e.g. 50,90,99,99.9";
            return -1;
        }
        if (n == max) {
            *why = "too many percentiles";
            return -1;
        }
        if (n && v <= out[n - 1]) {
            *why = "percentiles go from the lowest to the highest, each once";
            return -1;
        }
        out[n++] = v;
        if (*end == '\0')
            return (int)n;
        if (*end != ',') {
            *why = "a comma-separated list of numbers, e.g. 50,90,99,99.9";
            return -1;
        }
        p = end + 1;
    }
}
