/* stats/histjson.c - a latency histogram as squall's JSON documents carry it (stats/histjson.h). */
#include "stats/histjson.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "base/b64.h"
#include "stats/hist.h"

int sq_hist_encode_b64(const struct sq_hist *h, char **out)
{
    unsigned char *blob = NULL;
    size_t len = 0;
    int rc = sq_hist_encode(h, &blob, &len);
    if (rc < 0)
        return rc;
    char *b64 = malloc(sq_b64_encoded_len(len)); /* includes the NUL */
    if (!b64) {
        free(blob);
        return -ENOMEM;
    }
    sq_b64_encode(blob, len, b64);
    free(blob);
    *out = b64;
    return 0;
}

json_t *sq_hist_json(const struct sq_hist *h)
{
    char *b64 = NULL;
    if (sq_hist_encode_b64(h, &b64) < 0)
        return json_null();
    json_t *j =
        json_pack("{s:s, s:I, s:I, s:i, s:s, s:s}", "unit", "us", "lowest_us",
                  (json_int_t)SQ_LATENCY_LOWEST_US, "highest_us", (json_int_t)SQ_LATENCY_HIGHEST_US,
                  "significant_figures", SQ_LATENCY_SIGFIGS, "encoding",
                  "HdrHistogram V2 compressed, base64", "data", b64);
    free(b64);
    return j;
}
