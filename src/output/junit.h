/* output/junit.h - a plan run's thresholds and checks as a JUnit XML report (`--junit FILE`), for
 * the CI tools that read one (Jenkins, GitLab, GitHub actions).
 *
 * Rendered from the result document (docs/json-schema.md), like the summary and the HTML report,
 * so `squall run --junit` and `squall report FILE --junit` write the same bytes for one run.
 */
#ifndef SQ_OUTPUT_JUNIT_H
#define SQ_OUTPUT_JUNIT_H

#include <jansson.h>
#include <stdio.h>

#include "base/err.h"

/* Writes doc's report to f: <testsuites> with a <testsuite name="thresholds"> (one <testcase>
 * per entry of "thresholds", a <failure> when it did not hold) and a <testsuite name="checks">
 * (one per entry of "checks", a <failure> when any of its evaluations failed); a suite is empty
 * (tests="0") when the document has no such key. Every string from the document is escaped for
 * XML 1.0 (a byte the format cannot carry, a control byte or ill-formed UTF-8, becomes U+FFFD).
 * Returns 0, or -errno (-EIO) when a write failed. */
SQ_MUST_CHECK int sq_report_junit(const json_t *doc, FILE *f);

/* Writes s to f escaped for an XML 1.0 attribute value or text: & < > " ' as entities, tab, line
 * feed and carriage return as character references (an attribute keeps them through the
 * parser's normalisation), any other character XML 1.0 does not allow (C0 controls, U+FFFE,
 * U+FFFF) and every byte of ill-formed UTF-8 as U+FFFD. Exposed for its unit test. */
void sq_report_xml_esc(FILE *f, const char *s);

#endif
