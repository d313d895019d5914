/* output/html.h - the self-contained HTML report of a saved run (`squall report FILE --html`).
 *
 * One file that opens offline: uPlot and the report's script and styles are embedded
 * (output/html_assets.h), the data travels as a JSON island, and a Content-Security-Policy
 * forbids every fetch. docs/report.md shows what it holds; docs/internals/output.md how.
 */
#ifndef SQ_OUTPUT_HTML_H
#define SQ_OUTPUT_HTML_H

#include <jansson.h>
#include <stdio.h>

#include "base/err.h"

/* Renders the report of doc (a squall.result/1 document, docs/json-schema.md, optionally with
 * a per-second "series") to out. Every string from the document is escaped for its context.
 * Returns 0, -SQ_EPARSE (not a result this build reads: sq_report_doc_check), -ENOMEM or -EIO. */
SQ_MUST_CHECK int sq_report_html(const json_t *doc, FILE *out);

#endif
