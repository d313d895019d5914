/* fuzz_sinkfind.c - the sink's stamp finder (sink/find.c) over hostile events: the first byte
 * picks a find spec (scan, all, a header, a JSON path, a regex), the rest is the body, and the
 * body's first line, when it has one, is also given as a header. Checks: no crash or over-read
 * (the body is an exact-size heap copy), every stamp handed over formats back to a stamp that
 * parses to the same values, and scan finds a stamp exactly when sq_stamp_find does in the
 * body or the header. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/stamp.h"
#include "sink/sink.h"

static const char *const specs[] = {"scan",        "all",       "header:x-stamp", "json:$.t",
                                    "json:$.a[1]", "json:$..t", "regex:t=(\\S+)", "regex:sq1"};

struct seen {
    size_t n;
};

static void found(void *ud, const struct sq_stamp *st)
{
    struct seen *s = ud;
    s->n++;
    char text[SQ_STAMP_MAX + 1];
    size_t len = sq_stamp_format(st, text);
    struct sq_stamp back;
    size_t at, blen;
    if (!sq_stamp_find(text, len, &back, &at, &blen) || at != 0 || blen != len ||
        back.run != st->run || back.seq != st->seq || back.ns != st->ns)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *spec = specs[data[0] % (sizeof(specs) / sizeof(specs[0]))];
    size_t n = size - 1;
    char *body = malloc(n ? n : 1);
    if (!body)
        return 0;
    memcpy(body, data + 1, n);
    struct sq_sink_finder *f = NULL;
    char err[256];
    if (sq_sink_finder_new(spec, &f, err, sizeof(err)) != 0) {
        free(body); /* json:$..t may be outside the path subset: a refusal is fine */
        return 0;
    }
    struct sq_sink_scratch *scratch = sq_sink_finder_scratch(f);
    const char *nl = memchr(body, '\n', n);
    struct sq_sink_field hdr = {"X-Stamp", body, 7, nl ? (size_t)(nl - body) : 0};
    struct seen s = {0};
    size_t got = sq_sink_find(f, scratch, body, n, nl ? &hdr : NULL, nl ? 1 : 0, found, &s);
    if (got != s.n)
        abort();
    if (data[0] % (sizeof(specs) / sizeof(specs[0])) == 0) {
        struct sq_stamp st;
        bool any = sq_stamp_find(body, n, &st, NULL, NULL) ||
                   (nl && sq_stamp_find(body, hdr.value_len, &st, NULL, NULL));
        if (any != (got > 0))
            abort();
    }
    sq_sink_scratch_free(scratch);
    sq_sink_finder_free(f);
    free(body);
    return 0;
}
