/* fuzz/fuzz_quick_json.c - libFuzzer target for the quick face's JSON options (face/quick.c,
 * sq_quick_from_json): what the daemon's POST /runs {"quick": {...}} hands it.
 *
 * Any JSON value is taken or refused cleanly: a refusal is -SQ_EUSAGE (or -ENOMEM) with a
 * one-line message, a success has a URL and the counts the parser promises (1..1000000
 * connections, streams >= 1), and sq_quick_opts_dispose frees everything either way (ASan checks
 * it). Nothing is prepared: that would resolve names and read files the input names. Inputs that
 * are not JSON are skipped. Seeds: fuzz/corpus/quick_json/.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "face/flags.h"
#include "face/quick.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v)
        return 0;
    struct sq_quick_opts o;
    sq_quick_opts_init(&o);
    char err[SQ_PREP_ERRLEN] = "";
    int rc = sq_quick_from_json(&o, v, err, sizeof(err));
    if (rc == 0) {
        CHECK(o.url != NULL);
        CHECK(o.connections >= 1 && o.connections <= 1000000);
        CHECK(o.streams >= 1 && o.connections * o.streams <= 1000000);
        CHECK(!o.json_path && !o.html_path && !o.csv_path && !o.hdr_path && !o.ndjson_path);
        CHECK(!o.quiet);
    } else {
        CHECK(rc == -SQ_EUSAGE || rc == -ENOMEM);
        CHECK(err[0] != '\0');
    }
    sq_quick_opts_dispose(&o);
    json_decref(v);
    return 0;
}
