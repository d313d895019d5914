/* output/ndjson.c - per-request lines. Runs on the engine's writer thread, never on a worker.
 *
 * Lines are formatted by hand into a local buffer and written with one fwrite per batch chunk:
 * printf's format parsing was most of the writer's cost at 90k lines a second. */
#include "output/ndjson.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

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

/* A name longer than this is cut (at a UTF-8 boundary) in the lines: a line stays short. */
#define NAME_MAX_BYTES 256

/* A string as JSON (quoted, escaped), appended to the fragment being built. */
static int put_json_str(char **frag, size_t *len, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n > NAME_MAX_BYTES) {
        n = NAME_MAX_BYTES;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    json_t *j = json_stringn(s ? s : "", n);
    char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!q)
        return -ENOMEM;
    size_t ql = strlen(q);
    char *nf = realloc(*frag, *len + ql + 1);
    if (!nf) {
        free(q);
        return -ENOMEM;
    }
    memcpy(nf + *len, q, ql + 1);
    *len += ql;
    *frag = nf;
    free(q);
    return 0;
}

static int put_lit(char **frag, size_t *len, const char *s)
{
    size_t sl = strlen(s);
    char *nf = realloc(*frag, *len + sl + 1);
    if (!nf)
        return -ENOMEM;
    memcpy(nf + *len, s, sl + 1);
    *len += sl;
    *frag = nf;
    return 0;
}

/* One fragment: "scenario":S,"step":T|null[,"url":U] */
static int fragment(struct sq_ndjson *o, size_t at, const char *scen, const char *step,
                    const char *url)
{
    char *f = NULL;
    size_t len = 0;
    int rc = put_lit(&f, &len, "\"scenario\":");
    if (rc == 0)
        rc = put_json_str(&f, &len, scen);
    if (rc == 0)
        rc = put_lit(&f, &len, ",\"step\":");
    if (rc == 0)
        rc = step ? put_json_str(&f, &len, step) : put_lit(&f, &len, "null");
    if (rc == 0 && url) {
        rc = put_lit(&f, &len, ",\"url\":");
        if (rc == 0)
            rc = put_json_str(&f, &len, url);
    }
    if (rc < 0) {
        free(f);
        return rc;
    }
    o->_frag[at] = f;
    if (len > o->_maxfrag)
        o->_maxfrag = len;
    return 0;
}

static int labels_alloc(struct sq_ndjson *o, size_t nscen, size_t nfrag)
{
    o->_frag = calloc(nfrag ? nfrag : 1, sizeof(*o->_frag));
    o->_base = calloc(nscen ? nscen : 1, sizeof(*o->_base));
    o->_nscen = nscen;
    o->_nfrag = nfrag;
    return o->_frag && o->_base ? 0 : -ENOMEM;
}

int sq_ndjson_plan_labels(struct sq_ndjson *o, const struct sq_plan *p)
{
    size_t nfrag = 0;
    for (size_t i = 0; i < p->nscenarios; i++)
        nfrag += 1 + p->scenarios[i].nsteps;
    int rc = labels_alloc(o, p->nscenarios, nfrag);
    size_t at = 0;
    for (size_t i = 0; rc == 0 && i < p->nscenarios; i++) {
        const struct sq_plan_scenario *sc = &p->scenarios[i];
        o->_base[i] = at;
        rc = fragment(o, at++, sc->name, NULL, NULL);
        for (size_t k = 0; rc == 0 && k < sc->nsteps; k++)
            rc = fragment(o, at++, sc->name, sc->steps[k].name, NULL);
    }
    return rc;
}

int sq_ndjson_url_labels(struct sq_ndjson *o, const char *const *labels, size_t n)
{
    int rc = labels_alloc(o, 1, 1 + n);
    const char *scen = o->scenario ? o->scenario : "default";
    if (rc == 0)
        rc = fragment(o, 0, scen, NULL, NULL);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = fragment(o, 1 + i, scen, NULL, labels[i]);
    return rc;
}

void sq_ndjson_dispose(struct sq_ndjson *o)
{
    for (size_t i = 0; o->_frag && i < o->_nfrag; i++)
        free(o->_frag[i]);
    free(o->_frag);
    free(o->_base);
    o->_frag = NULL;
    o->_base = NULL;
    o->_nfrag = o->_nscen = o->_maxfrag = 0;
}

/* The label fragment of sample s, or NULL: the quick face's default. */
static const char *label_of(const struct sq_ndjson *o, const struct sq_sample *s)
{
    if (!o->_frag || s->scen >= o->_nscen)
        return NULL;
    size_t at = o->_base[s->scen] + s->label;
    size_t end = (size_t)s->scen + 1 < o->_nscen ? o->_base[s->scen + 1] : o->_nfrag;
    return at < end ? o->_frag[at] : o->_frag[o->_base[s->scen]];
}

void sq_ndjson_write(void *ud, const struct sq_sample *v, size_t n)
{
    struct sq_ndjson *o = ud;
    if (o->failed)
        return;
    char buf[CHUNK];
    char *p = buf;
    const char *dscen = o->scenario ? o->scenario : "default";
    size_t scen = strlen(dscen);
    size_t room = LINE_MAX_BYTES + (o->_maxfrag > scen ? o->_maxfrag : scen);
    for (size_t i = 0; i < n; i++) {
        const struct sq_sample *s = &v[i];
        if ((size_t)(buf + sizeof(buf) - p) < room) {
            fwrite(buf, 1, (size_t)(p - buf), o->f);
            p = buf;
        }
        p = put_str(p, "{\"t_s\":");
        p = put_secs(p, s->end_ns);
        const char *frag = label_of(o, s);
        if (frag) {
            *p++ = ',';
            p = put_str(p, frag);
            p = put_str(p, ",\"status\":");
        } else {
            p = put_str(p, ",\"scenario\":\"");
            memcpy(p, dscen, scen);
            p += scen;
            p = put_str(p, "\",\"step\":null,\"status\":");
        }
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
