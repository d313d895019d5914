/* output/doc.h - reading a saved result document (`squall report FILE`): the checks and lookups
 * the outputs rendered from it (output/summary.h, output/html.h) share.
 *
 * The document is the parsed JSON of `--json` (schema squall.result/1, docs/json-schema.md). Only
 * "schema", "requests" and "latency" are required; every other key may be missing (an older or a
 * newer squall wrote it) and is then left out of what is printed, never guessed.
 */
#ifndef SQ_OUTPUT_DOC_H
#define SQ_OUTPUT_DOC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

struct sq_hist;

/* Checks that doc is a result this build reads: an object whose "schema" is squall.result/1,
 * with "requests" and "latency" objects (or, written by `squall sink` alone, a "sink" object
 * instead of both). Returns 0, or -SQ_EPARSE with *why set to a short static
 * phrase ("no \"schema\" key: not a squall result"). */
SQ_MUST_CHECK int sq_report_doc_check(const json_t *doc, const char **why);

/* Reads a saved result from f (untrusted input: `squall report FILE`) and checks it. Returns 0
 * with *out set (the caller json_decrefs it), or -SQ_EPARSE with why holding one line that says
 * what is wrong: "not JSON: <jansson's text> (line L, column C)" or "not a squall result this
 * version reads: <what sq_report_doc_check found>". A duplicate key is refused (two values for
 * one figure cannot both be right). */
SQ_MUST_CHECK int sq_report_doc_read(FILE *f, json_t **out, char *why, size_t len);

/* ---- Internal to output/: lookups shared by doc.c, summary.c and html.c. ---- */

/* The value at a dotted path ("latency.histogram.data"), or NULL when any step is missing. */
const json_t *sq_report__get(const json_t *doc, const char *path);
/* The number at path (integer or real); false, and *out untouched, when it is not a number. */
bool sq_report__num(const json_t *doc, const char *path, double *out);
/* The number at path, or dflt. */
double sq_report__numd(const json_t *doc, const char *path, double dflt);
/* v as a count: negative and NaN give 0, anything past UINT64_MAX gives UINT64_MAX (a cast of an
 * out-of-range double is undefined behaviour, and the document is untrusted input). */
uint64_t sq_report__count(double v);
/* The string at path, or dflt. */
const char *sq_report__str(const json_t *doc, const char *path, const char *dflt);
/* Decodes a latency block's "histogram.data" (base64 of HdrHistogram V2 compressed). Returns 0,
 * -SQ_EPARSE (no data string), -SQ_EDECODE, -SQ_ETOOBIG or -ENOMEM; the caller frees *out. */
SQ_MUST_CHECK int sq_report__hist(const json_t *latency, struct sq_hist **out);

#endif
