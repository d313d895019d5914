/* fuzz/fuzz_result.c - libFuzzer target for the saved-result reader (`squall report FILE`).
 *
 * The file is untrusted: any bytes are read with sq_report_doc_read, exactly as report_cmd.c
 * reads them. A refusal leaves no document and says why in one non-empty line (the CLI prints it
 * as one line). An accepted document passes sq_report_doc_check and is rendered both ways: the
 * terminal summary must succeed, and the HTML report must succeed (or run out of memory) with no
 * script element but its own three, whatever strings the document holds; so must the JUnit XML,
 * with no element of the document's making. ASan and UBSan watch
 * the number handling (counts from doubles, histogram decoding). Seeds: fuzz/corpus/result/, real
 * documents from `squall URL --json` and `squall run --json` runs plus a hostile one.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "output/doc.h"
#include "output/html.h"
#include "output/junit.h"
#include "output/summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static size_t count_ci(const char *hay, size_t len, const char *needle)
{
    size_t n = 0, nl = strlen(needle);
    for (size_t i = 0; i + nl <= len; i++)
        if (strncasecmp(hay + i, needle, nl) == 0)
            n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null_out;
    if (!null_out)
        null_out = fopen("/dev/null", "w");
    static const char empty[1];
    FILE *in = fmemopen(size ? (void *)data : (void *)empty, size ? size : 1, "rb");
    CHECK(in != NULL);
    if (!size)
        fgetc(in); /* at the end: an empty file */
    json_t *doc = NULL;
    char why[512];
    why[0] = '\0';
    int rc = sq_report_doc_read(in, &doc, why, sizeof(why));
    fclose(in);
    if (rc != 0) {
        CHECK(rc == -SQ_EPARSE);
        CHECK(doc == NULL);
        CHECK(why[0] != '\0');
        CHECK(strchr(why, '\n') == NULL && strchr(why, '\r') == NULL);
        return 0;
    }
    CHECK(doc != NULL);
    const char *problem;
    CHECK(sq_report_doc_check(doc, &problem) == 0);
    if (null_out)
        CHECK(sq_report_summary(doc, null_out) == 0);

    char *html = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&html, &len);
    CHECK(out != NULL);
    rc = sq_report_html(doc, out);
    CHECK(fclose(out) == 0);
    CHECK(rc == 0 || rc == -ENOMEM);
    if (rc == 0) {
        /* The page's own scripts: the data island, uPlot and the report script. */
        CHECK(count_ci(html, len, "<script") == 3);
        CHECK(count_ci(html, len, "</script") == 3);
    }
    free(html);

    /* The JUnit XML: every string from the document escaped, so no markup of its own is added
     * (one <testsuites> and its closing tag) */
    char *xml = NULL;
    out = open_memstream(&xml, &len);
    CHECK(out != NULL);
    rc = sq_report_junit(doc, out);
    CHECK(fclose(out) == 0);
    CHECK(rc == 0 || rc == -ENOMEM);
    if (rc == 0) {
        CHECK(count_ci(xml, len, "<testsuites") == 1);
        CHECK(count_ci(xml, len, "</testsuites>") == 1);
        CHECK(count_ci(xml, len, "<testsuite ") == 2);
    }
    free(xml);
    json_decref(doc);
    return 0;
}
