/* daemon/assets.h - what the daemon serves from the binary itself.
 *
 * cmake/embed.cmake turns web/dashboard/{index.html,dashboard.js,dashboard.css,live-tables.js,
 * live-tables.css} and
 * docs/daemon.openapi.json into the byte arrays below (build/gen/daemon_assets.c); the dashboard
 * page also inlines uPlot (output/html_assets.h). Nothing is fetched from the network, by the
 * build's output or by the page. Each array ends with one NUL that its _len does not count.
 */
#ifndef SQ_DAEMON_ASSETS_H
#define SQ_DAEMON_ASSETS_H

#include <stddef.h>

extern const unsigned char sq_dash_html[]; /* web/dashboard/index.html: the page's frame */
extern const size_t sq_dash_html_len;
extern const unsigned char sq_dash_js[]; /* web/dashboard/dashboard.js */
extern const size_t sq_dash_js_len;
extern const unsigned char sq_dash_css[]; /* web/dashboard/dashboard.css */
extern const size_t sq_dash_css_len;
extern const unsigned char
    sq_daemon_openapi_json[]; /* docs/daemon.openapi.json: GET /openapi.json */
extern const size_t sq_daemon_openapi_json_len;
extern const unsigned char sq_dash_live_js[]; /* web/dashboard/live-tables.js */
extern const size_t sq_dash_live_js_len;
extern const unsigned char sq_dash_live_css[]; /* web/dashboard/live-tables.css */
extern const size_t sq_dash_live_css_len;

#endif
