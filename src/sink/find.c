/* sink/find.c - where an event's stamp is (see sink.h, "finding the stamp").
 *
 *   scan          the first stamp in the body, else the first in a header (the default)
 *   all           every stamp in the body (a batch: a JSON array, NDJSON lines), else headers
 *   header:NAME   the first stamp in header NAME (ASCII case ignored)
 *   json:PATH     the first stamp in the value at PATH (plan/eval.h's JSON path subset)
 *   regex:RE      the first stamp in RE's first capture group (or its whole match)
 *
 * A stamp found must stand alone (proto/stamp.h), so "sq1." inside other text is not one. The
 * scan costs what sq_stamp_find costs (~60 ns for a 200-byte event); a JSON path walks the
 * document without building it; a regex runs PCRE2 with the calling thread's match data.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plan/eval.h"
#include "proto/stamp.h"
#include "sink/sink.h"

enum kind { F_SCAN, F_ALL, F_HEADER, F_JSON, F_REGEX };

struct sq_sink_finder {
    enum kind kind;
    char *header;
    size_t header_len;
    struct sq_jpath *path;
    struct sq_extractor re;
    bool has_re;
};

struct sq_sink_scratch {
    void *md;
    struct sq_buf out;
};

int sq_sink_finder_new(const char *spec, struct sq_sink_finder **out, char *err, size_t len)
{
    struct sq_sink_finder *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    int rc = 0;
    char why[200] = "";
    if (!spec || strcmp(spec, "scan") == 0) {
        f->kind = F_SCAN;
    } else if (strcmp(spec, "all") == 0) {
        f->kind = F_ALL;
    } else if (strncmp(spec, "header:", 7) == 0) {
        f->kind = F_HEADER;
        f->header_len = strlen(spec + 7);
        if (!f->header_len) {
            rc = -SQ_EUSAGE;
            snprintf(err, len, "--stamp: 'header:' names no header");
        } else if (!(f->header = strdup(spec + 7))) {
            rc = -ENOMEM;
        }
    } else if (strncmp(spec, "json:", 5) == 0) {
        f->kind = F_JSON;
        rc = sq_jpath_compile(spec + 5, strlen(spec + 5), &f->path, why, sizeof(why));
        if (rc == -SQ_EPARSE) {
            rc = -SQ_EUSAGE;
            snprintf(err, len, "--stamp: '%s': %s", spec, why);
        }
    } else if (strncmp(spec, "regex:", 6) == 0) {
        f->kind = F_REGEX;
        rc = sq_extractor_init_regex(&f->re, spec + 6, why, sizeof(why));
        if (rc == 0)
            f->has_re = true;
        else if (rc == -SQ_EPARSE) {
            rc = -SQ_EUSAGE;
            snprintf(err, len, "--stamp: '%s': %s", spec, why);
        }
    } else {
        rc = -SQ_EUSAGE;
        snprintf(err, len,
                 "--stamp: '%s' is not a place (scan, all, header:NAME, json:PATH or regex:RE)",
                 spec);
    }
    if (rc < 0) {
        sq_sink_finder_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

void sq_sink_finder_free(struct sq_sink_finder *f)
{
    if (!f)
        return;
    free(f->header);
    sq_jpath_free(f->path);
    if (f->has_re)
        sq_extractor_dispose(&f->re);
    free(f);
}

struct sq_sink_scratch *sq_sink_finder_scratch(const struct sq_sink_finder *f)
{
    struct sq_sink_scratch *s = calloc(1, sizeof(*s));
    if (s && f->has_re && !(s->md = sq_extractor_clone_state(&f->re))) {
        free(s);
        return NULL;
    }
    return s;
}

void sq_sink_scratch_free(struct sq_sink_scratch *s)
{
    if (!s)
        return;
    sq_extractor_free_state(s->md);
    sq_buf_dispose(&s->out);
    free(s);
}

static size_t first_in(const char *p, size_t n, void (*found)(void *, const struct sq_stamp *),
                       void *ud)
{
    struct sq_stamp st;
    if (!p || !sq_stamp_find(p, n, &st, NULL, NULL))
        return 0;
    found(ud, &st);
    return 1;
}

static size_t in_fields(const struct sq_sink_field *fields, size_t n,
                        void (*found)(void *, const struct sq_stamp *), void *ud)
{
    for (size_t i = 0; i < n; i++)
        if (first_in(fields[i].value, fields[i].value_len, found, ud))
            return 1;
    return 0;
}

size_t sq_sink_find(const struct sq_sink_finder *f, struct sq_sink_scratch *scratch,
                    const char *body, size_t len, const struct sq_sink_field *fields,
                    size_t nfields, void (*found)(void *ud, const struct sq_stamp *st), void *ud)
{
    switch (f->kind) {
    case F_SCAN:
        return first_in(body, len, found, ud) ? 1 : in_fields(fields, nfields, found, ud);
    case F_ALL: {
        size_t k = 0, at, sl;
        struct sq_stamp st;
        const char *p = body;
        size_t n = body ? len : 0;
        while (n && sq_stamp_find(p, n, &st, &at, &sl)) {
            found(ud, &st);
            k++;
            p += at + sl;
            n -= at + sl;
        }
        return k ? k : in_fields(fields, nfields, found, ud);
    }
    case F_HEADER:
        for (size_t i = 0; i < nfields; i++)
            if (fields[i].name_len == f->header_len &&
                strncasecmp(fields[i].name, f->header, f->header_len) == 0)
                return first_in(fields[i].value, fields[i].value_len, found, ud);
        return 0;
    case F_JSON: {
        struct sq_json_val v;
        if (!body || sq_jpath_eval(f->path, body, len, &v) != 1)
            return 0;
        return first_in(v.raw, v.raw_len, found, ud);
    }
    case F_REGEX: {
        if (!scratch || !body)
            return 0;
        struct sq_resp_view view = {.body = body, .body_len = len};
        if (sq_extractor_run(&f->re, &view, scratch->md, &scratch->out) != 1)
            return 0;
        return first_in(scratch->out.p, scratch->out.len, found, ud);
    }
    }
    return 0;
}
