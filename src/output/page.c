/* output/page.c - escaping and the frame of squall's HTML pages (see page.h). */
#include "output/page.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

#include "output/html_assets.h"

void sq_page__esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

void sq_page__escf(FILE *f, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    sq_page__esc(f, buf);
}

/* '<', '>' and '&' occur in JSON text only inside strings, where their \u escapes mean the same;
 * with them gone, neither "</script" nor "<!--" can. */
void sq_page__island_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("\\u003c", f);
        else if (*s == '>')
            fputs("\\u003e", f);
        else if (*s == '&')
            fputs("\\u0026", f);
        else
            fputc(*s, f);
    }
}

void sq_page__head(FILE *f, const char *title)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"squall " SQ_VERSION "\">\n"
          "<link rel=\"icon\" href=\"data:,\">\n<title>",
          f);
    sq_page__esc(f, title);
    fputs("</title>\n<style>\n", f);
    fwrite(sq_uplot_css, 1, sq_uplot_css_len, f);
    fputs("\n", f);
    fwrite(sq_report_css, 1, sq_report_css_len, f);
    fputs("</style>\n</head>\n<body>\n", f);
}

void sq_page__scripts(FILE *f, const char *island, const unsigned char *js, size_t len)
{
    fputs("<script type=\"application/json\" id=\"squall-data\">", f);
    sq_page__island_text(f, island);
    fputs("</script>\n<script>\n", f);
    fwrite(sq_uplot_js, 1, sq_uplot_js_len, f);
    fputs("\n</script>\n<script>\n", f);
    fwrite(js, 1, len, f);
    fputs("</script>\n</body>\n</html>\n", f);
}

int sq_page__tail(FILE *f, const json_t *data, const unsigned char *js, size_t len)
{
    char *text = json_dumps(data, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text)
        return -ENOMEM;
    sq_page__scripts(f, text, js, len);
    free(text);
    return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}
