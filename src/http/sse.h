/* http/sse.h - counts Server-Sent Events in a text/event-stream body, byte by byte.
 *
 * A scanner, not a parser: it allocates nothing, builds no string and keeps a few bytes of
 * state, so it can run over every byte of a stream at memory speed. It follows the WHATWG
 * event-stream interpretation (HTML, "Server-sent events", 9.2.6) as far as counting needs:
 *   - a UTF-8 BOM (EF BB BF) at the very start of the stream is skipped;
 *   - lines end with CRLF, LF or CR; a CR that ends one feed and an LF that starts the next are
 *     one line end;
 *   - a line starting with ':' is a comment; a line "data" or "data:..." is a data field line
 *     (the field name is what precedes the first ':', or the whole line);
 *   - a blank line dispatches an event when the data buffer is non-empty, i.e. when at least
 *     one data field line came since the last blank line; other fields (event, id, retry) and
 *     unknown ones never make an event on their own;
 *   - an event not closed by a blank line when the stream ends is not dispatched (not counted).
 * See docs/internals/http.md, "Server-Sent Events".
 */
#ifndef SQ_HTTP_SSE_H
#define SQ_HTTP_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Caller-owned; 16 bytes. Only events is for reading. */
struct sq_sse {
    uint64_t events; /* events dispatched since sq_sse_init */
    uint8_t _line;   /* where the scanner is in the current line */
    uint8_t _bom;    /* BOM bytes matched at the start of the stream; 3: done with it */
    bool _cr;        /* the last byte was a CR that ended a line (an LF next is skipped) */
    bool _data;      /* a data field line came since the last dispatch */
};

/* Prepares s for a new stream (the start of a response body). */
void sq_sse_init(struct sq_sse *s);

/* Scans the next buf[0, len) of the stream (any split). Returns how many events were dispatched
 * within it (0 or more), also added to s->events: a caller timestamps the first event when the
 * feed that completes it returns > 0. Never fails; any byte sequence is a valid stream. */
uint64_t sq_sse_feed(struct sq_sse *s, const char *buf, size_t len);

#endif
