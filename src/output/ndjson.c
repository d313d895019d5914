/* output/ndjson.c - per-request lines. Runs on the engine's writer thread, never on a worker.
 *
 * Lines are formatted by hand into a local buffer and written with one fwrite per batch chunk:
 * printf's format parsing was most of the writer's cost at 90k lines a second. */
#include "output/ndjson.h"

#include <string.h>

#define LINE_MAX_BYTES 256
#define CHUNK          (64 * 1024)

/* Appends v in decimal; returns the new end. */
static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/* Seconds with six decimals from ns: "1.234567". */
static char *put_secs(char *p, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    int64_t us = (ns + 500) / 1000;
    p = put_u64(p, (uint64_t)(us / 1000000));
    *p++ = '.';
    int64_t frac = us % 1000000;
    for (int64_t d = 100000; d > 0; d /= 10)
        *p++ = (char)('0' + frac / d % 10);
    return p;
}

void sq_ndjson_write(void *ud, const struct sq_sample *v, size_t n)
{
    struct sq_ndjson *o = ud;
    if (o->failed)
        return;
    char buf[CHUNK];
    char *p = buf;
    size_t scen = strlen(o->scenario);
    for (size_t i = 0; i < n; i++) {
        const struct sq_sample *s = &v[i];
        if ((size_t)(buf + sizeof(buf) - p) < LINE_MAX_BYTES + scen) {
            fwrite(buf, 1, (size_t)(p - buf), o->f);
            p = buf;
        }
        p = put_str(p, "{\"t_s\":");
        p = put_secs(p, s->end_ns);
        p = put_str(p, ",\"scenario\":\"");
        memcpy(p, o->scenario, scen);
        p += scen;
        p = put_str(p, "\",\"step\":null,\"status\":");
        p = put_u64(p, s->status);
        p = put_str(p, ",\"latency_us\":");
        p = put_i64(p, s->latency_us);
        p = put_str(p, ",\"wait_us\":");
        p = put_i64(p, s->wait_us);
        p = put_str(p, ",\"bytes\":");
        p = put_u64(p, s->bytes);
        p = put_str(p, ",\"error\":");
        if (s->error) {
            *p++ = '"';
            p = put_str(p, sq_errk_name((enum sq_errk)(s->error - 1)));
            p = put_str(p, "\"}\n");
        } else {
            p = put_str(p, "null}\n");
        }
    }
    fwrite(buf, 1, (size_t)(p - buf), o->f);
    if (ferror(o->f))
        o->failed = 1;
}
