/* output/page.h - what every self-contained HTML page squall writes shares (internal to output/):
 * escaping, the JSON island, and the page's head and tail with uPlot and a script embedded.
 *
 * The pages are the run report (html.c), the comparison of two runs (compare.c) and the A/B and
 * measure reports (instr.c). Each opens offline: a Content-Security-Policy forbids every fetch,
 * the data travels as a JSON island whose '<', '>' and '&' are written as \u escapes (so no
 * string in it can close the script element), and every string from a document is escaped for
 * its context.
 */
#ifndef SQ_OUTPUT_PAGE_H
#define SQ_OUTPUT_PAGE_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "base/err.h"

/* HTML text and attribute values (double- or single-quoted). */
void sq_page__esc(FILE *f, const char *s);
/* The same for a formatted string (cut at 511 bytes): text only. A format that holds markup
 * has its tags escaped into text with the data; markup goes through fputs/fprintf, data strings
 * through sq_page__esc. */
void sq_page__escf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* JSON text for inside a <script> element: '<', '>' and '&' as their \u escapes. */
void sq_page__island_text(FILE *f, const char *s);

/* "<!DOCTYPE html> ... <title>TITLE</title><style>uPlot's and report.css</style></head><body>". */
void sq_page__head(FILE *f, const char *title);
/* The JSON island (script#squall-data) holding island (JSON text), uPlot, the page's script
 * js[0, len) and the closing tags. */
void sq_page__scripts(FILE *f, const char *island, const unsigned char *js, size_t len);
/* sq_page__scripts with data's JSON text as the island, then the page flushed. Returns 0,
 * -ENOMEM or -EIO. */
SQ_MUST_CHECK int sq_page__tail(FILE *f, const json_t *data, const unsigned char *js, size_t len);

#endif
