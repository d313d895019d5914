/* fuzz_csv.c - the feeder parsers: every input goes to the CSV and to the JSON parser. Checks:
 * a loaded feeder has rows and unique, non-empty column names; every cell is a NUL-terminated
 * span inside the feeder's text; writing the feeder back out (CSV: every field quoted; JSON:
 * every value a string) and parsing that gives the same columns and cells; row choice stays in
 * range for every mode. A failure leaves no feeder and a one-line "path:..." message. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "plan/feeder.h"
#include "plan/feeder_internal.h"

static void put(struct sq_buf *b, const void *p, size_t n)
{
    if (sq_buf_append(b, p, n) != 0)
        abort();
}

static void csv_field(struct sq_buf *b, const char *p, size_t n)
{
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i++)
        put(b, p[i] == '"' ? "\"\"" : p + i, 1 + (p[i] == '"')); /* a quote is doubled */
    put(b, "\"", 1);
}

static void json_str(struct sq_buf *b, const char *p, size_t n)
{
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(b, e, 2);
        } else if (c < 0x20) {
            char e[8];
            snprintf(e, sizeof(e), "\\u%04x", c);
            put(b, e, 6);
        } else {
            put(b, p + i, 1);
        }
    }
    put(b, "\"", 1);
}

static const struct sq_str *cell(const struct sq_feeder *f, size_t r, size_t c)
{
    return &f->cells[r * f->ncolumns + c];
}

static void check_same(const struct sq_feeder *a, const struct sq_feeder *b)
{
    if (a->ncolumns != b->ncolumns || a->nrows != b->nrows)
        abort();
    for (size_t c = 0; c < a->ncolumns; c++)
        if (strcmp(a->columns[c], b->columns[c]) != 0)
            abort();
    for (size_t k = 0; k < a->nrows * a->ncolumns; k++)
        if (a->cells[k].len != b->cells[k].len ||
            memcmp(a->cells[k].p, b->cells[k].p, a->cells[k].len) != 0)
            abort();
}

static void check(struct sq_feeder *f, size_t len, bool is_json)
{
    if (!f || !f->nrows || !f->ncolumns || f->cursor)
        abort();
    for (size_t c = 0; c < f->ncolumns; c++) {
        const char *name = f->columns[c];
        size_t n = strlen(name);
        if (!n || name < f->text || name + n > f->text + len)
            abort();
        if (sq_feeder_column(f, name, n) != (int)c) /* unique */
            abort();
    }
    for (size_t k = 0; k < f->nrows * f->ncolumns; k++) {
        const struct sq_str *s = &f->cells[k];
        if (s->p < f->text || s->p + s->len > f->text + len || s->p[s->len] != '\0')
            abort();
        if (memchr(s->p, '\0', s->len))
            abort();
    }
    uint64_t rng = 1;
    for (uint64_t i = 0; i < 3; i++) {
        const struct sq_str *rows[3] = {sq_feeder_row(f, SQ_FEED_SEQUENTIAL, i + 1, &rng),
                                        sq_feeder_row(f, SQ_FEED_PER_VU, i + 1, &rng),
                                        sq_feeder_row(f, SQ_FEED_RANDOM, i + 1, &rng)};
        for (int m = 0; m < 3; m++) {
            size_t off = (size_t)(rows[m] - f->cells);
            if (rows[m] < f->cells || off % f->ncolumns || off / f->ncolumns >= f->nrows)
                abort();
        }
        if (rows[0] != cell(f, i % f->nrows, 0) || rows[1] != cell(f, i % f->nrows, 0))
            abort();
    }

    /* write it back out and parse that */
    struct sq_buf b = {0};
    struct sq_feeder *g = NULL;
    char err[512];
    int rc;
    if (!is_json) {
        for (size_t c = 0; c < f->ncolumns; c++) {
            if (c)
                put(&b, ",", 1);
            csv_field(&b, f->columns[c], strlen(f->columns[c]));
        }
        for (size_t r = 0; r < f->nrows; r++) {
            put(&b, r % 2 ? "\r\n" : "\n", r % 2 ? 2 : 1);
            for (size_t c = 0; c < f->ncolumns; c++) {
                if (c)
                    put(&b, ",", 1);
                csv_field(&b, cell(f, r, c)->p, cell(f, r, c)->len);
            }
        }
        rc = sq_feeder__parse_csv("again", b.p, b.len, &g, err, sizeof(err));
    } else {
        put(&b, "[", 1);
        for (size_t r = 0; r < f->nrows; r++) {
            put(&b, r ? ",{" : "{", r ? 2 : 1);
            for (size_t c = 0; c < f->ncolumns; c++) {
                if (c)
                    put(&b, ",", 1);
                json_str(&b, f->columns[c], strlen(f->columns[c]));
                put(&b, ":", 1);
                json_str(&b, cell(f, r, c)->p, cell(f, r, c)->len);
            }
            put(&b, "}", 1);
        }
        put(&b, "]", 1);
        rc = sq_feeder__parse_json("again", b.p, b.len, &g, err, sizeof(err));
    }
    if (rc != 0)
        abort();
    check_same(f, g);
    sq_feeder_free(g);
    sq_buf_dispose(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int is_json = 0; is_json < 2; is_json++) {
        struct sq_feeder *f = (struct sq_feeder *)1;
        char err[512];
        int rc = is_json
                     ? sq_feeder__parse_json("in", (const char *)data, size, &f, err, sizeof(err))
                     : sq_feeder__parse_csv("in", (const char *)data, size, &f, err, sizeof(err));
        if (rc == 0) {
            if (err[0])
                abort();
            check(f, size, is_json);
            sq_feeder_free(f);
        } else if (rc != -SQ_EPARSE || f || strncmp(err, "in:", 3) != 0 || strchr(err, '\n')) {
            if (rc != -SQ_ETOOBIG && rc != -ENOMEM)
                abort();
        }
    }
    return 0;
}
