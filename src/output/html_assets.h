/* output/html_assets.h - what the HTML report embeds, compiled into the binary.
 *
 * The build fetches uPlot 1.x from npm into the build tree, and cmake/embed.cmake turns its
 * minified script and stylesheet, the report's own web/report/report.{js,css} and the instruments'
 * pages' web/report/instr.js, into the byte
 * arrays below (build/gen/html_assets.c); nothing of uPlot is committed. Each array ends with one
 * NUL that its _len does not count.
 */
#ifndef SQ_OUTPUT_HTML_ASSETS_H
#define SQ_OUTPUT_HTML_ASSETS_H

#include <stddef.h>

extern const unsigned char sq_uplot_js[]; /* uPlot.iife.min.js: defines the global uPlot */
extern const size_t sq_uplot_js_len;
extern const unsigned char sq_uplot_css[]; /* uPlot.min.css */
extern const size_t sq_uplot_css_len;
extern const unsigned char sq_report_js[]; /* web/report/report.js: draws the charts */
extern const size_t sq_report_js_len;
extern const unsigned char sq_report_css[]; /* web/report/report.css */
extern const size_t sq_report_css_len;
extern const unsigned char sq_instr_js[]; /* web/report/instr.js: compare, ab and measure pages */
extern const size_t sq_instr_js_len;

#endif
