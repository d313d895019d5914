/* output/json.c - the result as JSON (schema squall.result/1, docs/json-schema.md).
 *
 * Every duration carries its unit in its key; request accounting lives under "requests" alone.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "base/b64.h"
#include "output/report.h"
#include "stats/hist.h"

static json_t *jdur_s(int64_t ns)
{
    return json_real((double)ns / 1e9);
}

static json_t *histogram(const struct sq_result *r)
{
    unsigned char *blob = NULL;
    size_t len = 0;
    if (sq_hist_encode(r->latency, &blob, &len) < 0)
        return json_null();
    char *b64 = malloc(sq_b64_encoded_len(len)); /* includes the NUL */
    if (!b64) {
        free(blob);
        return json_null();
    }
    sq_b64_encode(blob, len, b64);
    free(blob);
    json_t *h =
        json_pack("{s:s, s:I, s:I, s:i, s:s, s:s}", "unit", "us", "lowest_us", (json_int_t)1,
                  "highest_us", (json_int_t)3600000000LL, "significant_figures", 3, "encoding",
                  "HdrHistogram V2 compressed, base64", "data", b64);
    free(b64);
    return h;
}

int sq_report_json(FILE *f, const struct sq_report_info *info, const struct sq_result *r)
{
    struct sq_latency_figures lf;
    sq_report_latency_figures(r, &lf);
    double secs = r->duration_ns > 0 ? (double)r->duration_ns / 1e9 : 1e-9;

    json_t *config = json_pack(
        "{s:s, s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:I}", "url", info->url, "method",
        info->method, "address", info->target_addr, "connections", (json_int_t)info->connections,
        "threads", (json_int_t)info->threads, "duration_s",
        info->duration_ns ? jdur_s(info->duration_ns) : json_null(), "requests",
        info->total_requests ? json_integer((json_int_t)info->total_requests) : json_null(),
        "timeout_s", jdur_s(info->timeout_ns), "connect_timeout_s",
        jdur_s(info->connect_timeout_ns), "request_bytes", (json_int_t)info->request_bytes);

    json_t *requests = json_pack("{s:I, s:I, s:I, s:I}", "sent", (json_int_t)r->c.sent, "completed",
                                 (json_int_t)r->c.completed, "failed", (json_int_t)r->c.failed,
                                 "in_flight", (json_int_t)r->in_flight);
    json_t *status = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "1xx", (json_int_t)r->c.status[1],
                               "2xx", (json_int_t)r->c.status[2], "3xx", (json_int_t)r->c.status[3],
                               "4xx", (json_int_t)r->c.status[4], "5xx", (json_int_t)r->c.status[5],
                               "other", (json_int_t)r->c.status[0]);
    json_t *errors = json_object();
    for (int k = 0; k < SQ_ERRK_COUNT; k++)
        json_object_set_new(errors, sq_errk_name((enum sq_errk)k),
                            json_integer((json_int_t)r->c.errors[k]));
    json_t *latency = json_pack(
        "{s:s, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:I}", "measured_from",
        "actual_send", "count", (json_int_t)lf.count, "out_of_range", (json_int_t)lf.out_of_range,
        "min_us", (json_int_t)lf.min, "mean_us", lf.mean, "stdev_us", lf.stdev, "p50_us",
        (json_int_t)lf.p50, "p90_us", (json_int_t)lf.p90, "p95_us", (json_int_t)lf.p95, "p99_us",
        (json_int_t)lf.p99, "p99_9_us", (json_int_t)lf.p999, "max_us", (json_int_t)lf.max);
    json_object_set_new(latency, "histogram", histogram(r));

    json_t *root =
        json_pack("{s:s, s:s, s:s, s:o, s:f, s:b, s:o, s:o, s:{s:f, s:f, s:f}, s:o, s:o, "
                  "s:{s:I, s:I}, s:{s:I, s:I}, s:o}",
                  "schema", SQ_RESULT_SCHEMA, "squall_version", SQ_VERSION, "mode", "closed-loop",
                  "config", config, "duration_s", secs, "aborted", r->aborted, "abort_reason",
                  r->aborted ? json_string(r->abort_reason) : json_null(), "requests", requests,
                  "rate", "requests_per_s", (double)r->c.completed / secs, "bytes_received_per_s",
                  (double)r->c.bytes_received / secs, "bytes_sent_per_s",
                  (double)r->c.bytes_sent / secs, "status", status, "errors", errors, "bytes",
                  "sent", (json_int_t)r->c.bytes_sent, "received", (json_int_t)r->c.bytes_received,
                  "connections", "opened", (json_int_t)r->c.conns_opened, "closed_by_server",
                  (json_int_t)r->c.conns_closed_by_server, "latency", latency);
    if (!root)
        return -ENOMEM;
    json_object_set_new(root, "threads", json_integer(r->threads));
    int rc = json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', f);
    json_decref(root);
    if (rc < 0 || fflush(f) != 0)
        return -EIO;
    return 0;
}
