/* output/doc.c - reading a saved result document: the schema check and path lookups. */
#include "output/doc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/b64.h"
#include "output/json.h"
#include "stats/hist.h"

const json_t *sq_report__get(const json_t *doc, const char *path)
{
    const json_t *v = doc;
    const char *p = path;
    while (v && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        v = json_is_object(v) ? json_object_getn(v, p, n) : NULL;
        p += n + (dot != NULL);
    }
    return v;
}

bool sq_report__num(const json_t *doc, const char *path, double *out)
{
    const json_t *v = sq_report__get(doc, path);
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return true;
}

double sq_report__numd(const json_t *doc, const char *path, double dflt)
{
    double v = dflt;
    sq_report__num(doc, path, &v);
    return v;
}

uint64_t sq_report__count(double v)
{
    if (!(v > 0))
        return 0;
    if (v >= 18446744073709551615.0)
        return UINT64_MAX;
    return (uint64_t)v;
}

const char *sq_report__str(const json_t *doc, const char *path, const char *dflt)
{
    const json_t *v = sq_report__get(doc, path);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

int sq_report__hist(const json_t *latency, struct sq_hist **out)
{
    const json_t *data = sq_report__get(latency, "histogram.data");
    if (!json_is_string(data))
        return -SQ_EPARSE;
    unsigned char *blob;
    size_t len;
    int rc = sq_b64_decode(json_string_value(data), json_string_length(data), &blob, &len);
    if (rc < 0)
        return rc;
    rc = sq_hist_decode(blob, len, out);
    free(blob);
    return rc;
}

int sq_report_doc_check(const json_t *doc, const char **why)
{
    if (!json_is_object(doc)) {
        *why = "not a JSON object: not a squall result";
        return -SQ_EPARSE;
    }
    const json_t *schema = json_object_get(doc, "schema");
    if (!schema) {
        *why = "no \"schema\" key: not a squall result";
        return -SQ_EPARSE;
    }
    if (!json_is_string(schema) || strcmp(json_string_value(schema), SQ_RESULT_SCHEMA) != 0) {
        *why = "\"schema\" is not " SQ_RESULT_SCHEMA ", the result schema this squall reads";
        return -SQ_EPARSE;
    }
    /* `squall sink` alone writes a sink block instead of requests and latency */
    if (json_is_object(json_object_get(doc, "sink")) && !json_object_get(doc, "requests"))
        return 0;
    if (!json_is_object(json_object_get(doc, "requests"))) {
        *why = "no \"requests\" object";
        return -SQ_EPARSE;
    }
    if (!json_is_object(json_object_get(doc, "latency"))) {
        *why = "no \"latency\" object";
        return -SQ_EPARSE;
    }
    return 0;
}

/* The reason is printed as one line: a control byte the parser quoted from the file (a newline
 * inside a bad token) becomes '?'. */
static void one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

int sq_report_doc_read(FILE *f, json_t **out, char *why, size_t len)
{
    json_error_t err;
    json_t *doc = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    if (!doc) {
        snprintf(why, len, "not JSON: %s (line %d, column %d)", err.text, err.line, err.column);
        one_line(why);
        return -SQ_EPARSE;
    }
    const char *problem;
    if (sq_report_doc_check(doc, &problem) < 0) {
        const json_t *schema = json_is_object(doc) ? json_object_get(doc, "schema") : NULL;
        if (json_is_string(schema) && strcmp(json_string_value(schema), SQ_RESULT_SCHEMA) != 0)
            snprintf(why, len, "not a squall result this version reads: schema '%.64s' is not %s",
                     json_string_value(schema), SQ_RESULT_SCHEMA);
        else
            snprintf(why, len, "not a squall result this version reads: %s", problem);
        one_line(why);
        json_decref(doc);
        return -SQ_EPARSE;
    }
    *out = doc;
    return 0;
}
