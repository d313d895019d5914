/* stats/histjson.h - a latency histogram as squall's JSON documents carry it: the run document's
 * latency blocks (output/json.c) and the sink's result block (sink/sink.c) write the same
 * object, so a reader decodes either with one piece of code.
 */
#ifndef SQ_STATS_HISTJSON_H
#define SQ_STATS_HISTJSON_H

#include "base/err.h"

struct sq_hist;
struct json_t; /* jansson's json_t */

/* The V2 compressed encoding of h (sq_hist_encode) as base64 text, NUL-terminated, in *out
 * (malloc'd; the caller frees it). Returns 0 or -ENOMEM; *out is untouched on error. */
SQ_MUST_CHECK int sq_hist_encode_b64(const struct sq_hist *h, char **out);

/* {"unit": "us", "lowest_us": 1, "highest_us": 3600000000, "significant_figures": 3,
 *  "encoding": "HdrHistogram V2 compressed, base64", "data": "<base64>"} for a latency
 * histogram (sq_latency_hist_new), as a new reference; JSON null when it cannot be encoded
 * (out of memory), NULL when the object cannot be made. */
struct json_t *sq_hist_json(const struct sq_hist *h);

#endif
