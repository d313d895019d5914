/* http/sse.c - the event-stream counter (see sse.h).
 *
 * State between feeds: where the scanner is in the current line (_line), whether a data field
 * line came since the last dispatch (_data), whether the previous feed ended with a CR that
 * ended a line (_cr: an LF first in this feed belongs to it), and the BOM match at the start.
 * Within a line only the first five bytes matter ("data" and what follows it, or a ':'); the
 * rest of a line is skipped up to its end.
 */
#include "http/sse.h"

#include <string.h>

#include "base/err.h"

enum {
    L_START, /* nothing of this line yet */
    L_D,     /* "d" */
    L_DA,    /* "da" */
    L_DAT,   /* "dat" */
    L_DATA,  /* "data": a ':' or the line end makes it a data line */
    L_REST,  /* decided: skip to the line end */
};

#define BOM_DONE 3

void sq_sse_init(struct sq_sse *s)
{
    memset(s, 0, sizeof(*s));
}

uint64_t sq_sse_feed(struct sq_sse *s, const char *buf, size_t len)
{
    static const unsigned char bom[3] = {0xef, 0xbb, 0xbf};
    const unsigned char *p = (const unsigned char *)buf;
    size_t i = 0;
    uint64_t n = 0;
    if (SQ_UNLIKELY(s->_bom < BOM_DONE)) {
        while (i < len && s->_bom < BOM_DONE) {
            if (p[i] != bom[s->_bom]) {
                if (s->_bom > 0)
                    s->_line = L_REST; /* a line that starts with part of a BOM: nothing */
                s->_bom = BOM_DONE;
                break;
            }
            s->_bom++;
            i++;
        }
    }
    if (s->_cr && i < len) {
        s->_cr = false;
        if (p[i] == '\n')
            i++; /* the LF of a CRLF split across feeds */
    }
    unsigned st = s->_line;
    bool data = s->_data;
    while (i < len) {
        if (st == L_REST) {
            while (i < len && p[i] != '\n' && p[i] != '\r')
                i++;
            if (i == len)
                break;
        }
        unsigned char c = p[i++];
        if (c == '\n' || c == '\r') {
            if (st == L_START) {
                if (data) { /* a blank line: dispatch */
                    n++;
                    data = false;
                }
            } else if (st == L_DATA) {
                data = true; /* the line "data" */
            }
            st = L_START;
            if (c == '\r') {
                if (i == len)
                    s->_cr = true;
                else if (p[i] == '\n')
                    i++;
            }
            continue;
        }
        switch (st) {
        case L_START:
            st = c == 'd' ? L_D : L_REST; /* ':' (a comment) and every other field: skipped */
            break;
        case L_D:
            st = c == 'a' ? L_DA : L_REST;
            break;
        case L_DA:
            st = c == 't' ? L_DAT : L_REST;
            break;
        case L_DAT:
            st = c == 'a' ? L_DATA : L_REST;
            break;
        default: /* L_DATA */
            if (c == ':')
                data = true;
            st = L_REST;
            break;
        }
    }
    s->_line = (uint8_t)st;
    s->_data = data;
    s->events += n;
    return n;
}
