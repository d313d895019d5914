/* face/flags.c - see flags.h. */
#include "face/flags.h"

#include "base/parse.h"
#include "http/request.h"
#include "result/result.h"
#include "base/text.h"
#include "plan/tmpl.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sq_flag_fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (len)
        vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -SQ_EUSAGE;
}

int sq_flag_out(const char *flag, const char *arg, const char **csv, const char **hdr,
                const char **ndjson, const char **prom_rw, const char **influx, char *err,
                size_t len)
{
    if (strncmp(arg, "csv=", 4) == 0 && arg[4])
        *csv = arg + 4;
    else if (strncmp(arg, "hdr=", 4) == 0 && arg[4])
        *hdr = arg + 4;
    else if (strncmp(arg, "ndjson=", 7) == 0 && arg[7])
        *ndjson = arg + 7;
    else if (strncmp(arg, "prometheus-rw=", 14) == 0 && arg[14])
        *prom_rw = arg + 14;
    else if (strncmp(arg, "influxdb=", 9) == 0 && arg[9])
        *influx = arg + 9;
    else
        return sq_flag_fail(err, len,
                            "%s: '%s' is not an output (csv=, hdr=, ndjson=FILE, "
                            "prometheus-rw= or influxdb=URL)",
                            flag, arg);
    return 0;
}

int sq_flag_sample(const char *flag, const char *arg, double *out, char *err, size_t len)
{
    char *end;
    double f = strtod(arg, &end);
    if (end == arg || *end || !(f > 0 && f <= 1))
        return sq_flag_fail(err, len, "%s: '%s' is not a fraction in (0, 1]", flag, arg);
    *out = f;
    return 0;
}

/* The long option a "--name" or "--name=value" token names exactly, or NULL. */
static const struct option *long_named(const struct option *longs, const char *tok)
{
    if (strncmp(tok, "--", 2) != 0)
        return NULL;
    tok += 2;
    size_t n = strcspn(tok, "=");
    for (const struct option *o = longs; o->name; o++)
        if (strlen(o->name) == n && strncmp(o->name, tok, n) == 0)
            return o;
    return NULL;
}

const char *sq_flag_name(const struct option *longs, int *li, int opt, char **argv, char *buf,
                         size_t size)
{
    int idx = *li;
    *li = -1;
    if (idx >= 0) {
        snprintf(buf, size, "--%s", longs[idx].name);
        return buf;
    }
    if (opt != '?' && opt != ':') {
        snprintf(buf, size, "-%c", opt);
        return buf;
    }
    /* getopt_long has moved past the token when it was the last of its argument; inside a
     * cluster of short flags ("-qx") it has not, so optopt is the one to trust there. */
    const char *tok = optind > 0 ? argv[optind - 1] : "";
    const struct option *lo = long_named(longs, tok);
    if (optopt > 0 && optopt < 128 && !(lo && lo->val == optopt)) {
        snprintf(buf, size, "-%c", optopt);
        return buf;
    }
    if (lo) {
        snprintf(buf, size, "--%s", lo->name);
        return buf;
    }
    return tok;
}

int sq_flag_refused(const struct option *longs, int opt, const char *flag, char *err, size_t len)
{
    if (opt == ':')
        return sq_flag_fail(err, len, "%s needs a value", flag);
    const struct option *lo = long_named(longs, flag);
    if (lo && lo->has_arg == no_argument)
        return sq_flag_fail(err, len, "%s takes no value", flag);
    if (strncmp(flag, "--", 2) == 0 && flag[2] && !lo) {
        /* getopt_long takes an unambiguous prefix; an ambiguous one lands here. */
        char names[400] = "";
        size_t n = strcspn(flag + 2, "="), used = 0;
        int matches = 0;
        for (const struct option *o = longs; o->name; o++) {
            if (strncmp(o->name, flag + 2, n) != 0)
                continue;
            int w = snprintf(names + used, sizeof(names) - used, "%s--%s", matches ? ", " : "",
                             o->name);
            if (w > 0 && (size_t)w < sizeof(names) - used)
                used += (size_t)w;
            matches++;
        }
        if (matches > 1)
            return sq_flag_fail(err, len, "'%.*s' is ambiguous: %s", (int)(n + 2), flag, names);
    }
    if (strncmp(flag, "--", 2) == 0 && flag[2]) {
        /* a misspelt long flag: the nearest one, as the plan loader does for keys */
        struct sq_suggest sg;
        char tail[96];
        size_t n = strcspn(flag + 2, "=");
        sq_suggest_init(&sg, flag + 2, n);
        for (const struct option *o = longs; o->name; o++)
            sq_suggest_try(&sg, o->name);
        if (sg.best)
            snprintf(tail, sizeof(tail), " (did you mean '--%s'?)", sg.best);
        else
            tail[0] = '\0';
        return sq_flag_fail(err, len, "unknown flag '%.*s'%s", (int)(n + 2), flag, tail);
    }
    return sq_flag_fail(err, len, "unknown flag '%s'", flag);
}

int sq_flag_seed(const char *flag, const char *arg, uint64_t *out, char *err, size_t len)
{
    /* digits only: no sign, no suffix (a seed is an identity, not an amount) */
    bool digits = arg[0] != '\0' && strspn(arg, "0123456789") == strlen(arg);
    if (!digits || sq_parse_u64(arg, 0, SQ_SEED_MAX, 0, out) != 0)
        return sq_flag_fail(err, len, "%s: '%s' is not a seed (0..%llu)", flag, arg,
                            (unsigned long long)SQ_SEED_MAX);
    return 0;
}

int sq_flag_run_name(const char *flag, const char *arg, const char **out, char *err, size_t len)
{
    if (!arg[0])
        return sq_flag_fail(err, len, "%s: the name is empty", flag);
    *out = arg;
    return 0;
}

int sq_flag_percentiles(const char *flag, const char *arg, double *out, size_t max, size_t *n,
                        char *err, size_t len)
{
    const char *why = NULL;
    int got = sq_parse_percentiles(arg, out, max, &why);
    if (got < 0)
        return sq_flag_fail(err, len, "%s: '%s': %s", flag, arg, why);
    *n = (size_t)got;
    return 0;
}

int sq_flag_sample_responses(const char *flag, const char *arg, uint64_t *out, char *err,
                             size_t len)
{
    if (sq_parse_u64(arg, 0, SQ_SAMPLE_RESPONSES_MAX, 1, out) < 0)
        return sq_flag_fail(err, len, "%s: '%s' is not a count of exchanges kept per class (0..%d)",
                            flag, arg, SQ_SAMPLE_RESPONSES_MAX);
    return 0;
}

bool sq_flag_method_ok(const char *m)
{
    char *req = NULL;
    size_t n = 0;
    if (sq_request_build(m, "/", "x", NULL, 0, NULL, 0, &req, &n) < 0)
        return false;
    free(req);
    return true;
}

int sq_flag_cpus(const char *flag, const char *arg, uint16_t *out, size_t max, uint32_t *n,
                 char *err, size_t len)
{
    static const char *const what = "is not a CPU list like 0-3 or 0,2-5 (numbers and ranges, "
                                    "comma-separated)";
    *n = 0;
    const char *p = arg;
    bool seen[SQ_FLAG_MAX_CPU] = {false};
    for (;;) {
        unsigned long lo, hi;
        char *end;
        if (*p < '0' || *p > '9')
            return sq_flag_fail(err, len, "%s: '%s' %s", flag, arg, what);
        lo = hi = strtoul(p, &end, 10);
        p = end;
        if (*p == '-') {
            if (p[1] < '0' || p[1] > '9')
                return sq_flag_fail(err, len, "%s: '%s' %s", flag, arg, what);
            hi = strtoul(p + 1, &end, 10);
            p = end;
            if (hi < lo)
                return sq_flag_fail(err, len, "%s: '%s': the range %lu-%lu runs backwards", flag,
                                    arg, lo, hi);
        }
        if (hi >= SQ_FLAG_MAX_CPU)
            return sq_flag_fail(err, len, "%s: '%s': CPU %lu is past the last one (%d)", flag, arg,
                                hi, SQ_FLAG_MAX_CPU - 1);
        for (unsigned long c = lo; c <= hi; c++) {
            if (seen[c])
                continue;
            if (*n == max)
                return sq_flag_fail(err, len, "%s: '%s': more than %zu CPUs", flag, arg, max);
            seen[c] = true;
            out[(*n)++] = (uint16_t)c;
        }
        if (*p == '\0')
            return 0;
        if (*p != ',')
            return sq_flag_fail(err, len, "%s: '%s' %s", flag, arg, what);
        p++;
    }
}

uint32_t sq_flag_threads(uint64_t asked)
{
    if (asked)
        return (uint32_t)asked;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return (uint32_t)(cpus > 0 ? cpus : 1);
}
