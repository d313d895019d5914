/* daemon/dashboard.c - the dashboard page: web/dashboard/index.html with uPlot, the dashboard's
 * styles and its scripts (dashboard.js, live-tables.js) inlined at its markers
 * (in the page's order), built once when the daemon starts. One self-contained document, so the
 * page needs nothing but the API (and, with a token, can be served as the body of a 401: it asks
 * for the token, then calls the API with it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/assets.h"
#include "daemon/internal.h"
#include "output/html_assets.h"

/* Inline scripts and styles only; the API on this origin; the run report in a sandboxed
 * frame (srcdoc: no URL to fetch); no framing of the page itself, no form posts. */
const char sq_daemon__page_csp[] =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; connect-src 'self'; frame-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'";

static const struct {
    const char *marker;
    const unsigned char *data;
    const size_t *len;
} parts[] = {
    {"<!--UPLOT_CSS-->", sq_uplot_css, &sq_uplot_css_len},
    {"<!--DASH_CSS-->", sq_dash_css, &sq_dash_css_len},
    {"<!--LIVE_CSS-->", sq_dash_live_css, &sq_dash_live_css_len},
    {"<!--UPLOT_JS-->", sq_uplot_js, &sq_uplot_js_len},
    {"<!--DASH_JS-->", sq_dash_js, &sq_dash_js_len},
    {"<!--LIVE_JS-->", sq_dash_live_js, &sq_dash_live_js_len},
};

int sq_daemon__page(char **out, size_t *len)
{
    struct sq_buf b = {0};
    const char *p = (const char *)sq_dash_html, *e = p + sq_dash_html_len;
    int rc = 0;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]) && rc == 0; i++) {
        const char *m = strstr(p, parts[i].marker);
        if (!m) {
            rc = -EINVAL; /* index.html lost a marker: a build that cannot serve its page */
            break;
        }
        if ((rc = sq_buf_append(&b, p, (size_t)(m - p))) == 0)
            rc = sq_buf_append(&b, parts[i].data, *parts[i].len);
        p = m + strlen(parts[i].marker);
    }
    if (rc == 0)
        rc = sq_buf_append(&b, p, (size_t)(e - p));
    if (rc < 0) {
        sq_buf_dispose(&b);
        return rc;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}
