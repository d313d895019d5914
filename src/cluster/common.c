/* cluster/common.c - ids, JSON publishing, parts and the clock estimate (internal.h, cluster.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/clock.h"
#include "cluster/cluster.h"
#include "cluster/internal.h"

void sq_cluster__rand_id(char out[17])
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = (uint64_t)sq_now_ns() * 0x9E3779B97F4A7C15ull ^ (uint64_t)sq_wall_s();
    snprintf(out, 17, "%016llx", (unsigned long long)v);
}

int sq_cluster__pub_json(struct sq_ctlbus *b, const char *subject, const char *reply, json_t *o)
{
    if (!o)
        return -ENOMEM;
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return -ENOMEM;
    int rc = sq_ctlbus_pub(b, subject, reply, text, strlen(text));
    free(text);
    return rc;
}

int sq_cluster__pub_big(struct sq_ctlbus *b, const char *subject, const char *run,
                        const char *agent, const char *text, size_t len)
{
    size_t max = sq_ctlbus_max_payload(b);
    if (len <= max)
        return sq_ctlbus_pub(b, subject, NULL, text, len);
    size_t room = max > 1024 ? max - 256 : max / 2;
    uint32_t n = (uint32_t)((len + room - 1) / room);
    char *buf = malloc(room + 256);
    if (!buf)
        return -ENOMEM;
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        size_t off = (size_t)i * room, l = len - off < room ? len - off : room;
        int h = snprintf(buf, 256, "SQPART %s %s %u %u\n", run, agent, i, n);
        memcpy(buf + h, text + off, l);
        rc = sq_ctlbus_pub(b, subject, NULL, buf, (size_t)h + l);
    }
    free(buf);
    return rc;
}

int sq_cluster__part(const char *data, size_t len, char *run, char *agent, uint32_t *i, uint32_t *n,
                     const char **body, size_t *blen)
{
    if (len < 7 || memcmp(data, "SQPART ", 7) != 0)
        return 0;
    const char *nl = memchr(data, '\n', len < 200 ? len : 200);
    if (!nl)
        return -1;
    char line[200];
    memcpy(line, data, (size_t)(nl - data));
    line[nl - data] = '\0';
    if (sscanf(line, "SQPART %39s %39s %u %u", run, agent, i, n) != 4 || *n == 0 || *i >= *n)
        return -1;
    *body = nl + 1;
    *blen = len - (size_t)(nl + 1 - data);
    return 1;
}

const char *sq_cluster__str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

bool sq_cluster__token_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

int sq_clock_estimate(const struct sq_clock_sample *s, size_t n, struct sq_clock_est *out)
{
    memset(out, 0, sizeof(*out));
    int64_t best = -1;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t rtt = s[i].t3 - s[i].t0;
        if (rtt < 0)
            continue;
        out->samples++;
        if (best < 0 || rtt < best) {
            best = rtt;
            at = i;
        }
    }
    if (best < 0)
        return -EINVAL;
    /* the middle of [t0 - tc, t3 - tc], without overflow for clocks far apart */
    out->offset_ns = (s[at].t0 - s[at].tc) + best / 2;
    out->uncertainty_ns = (best + 1) / 2;
    out->rtt_ns = best;
    return 0;
}
