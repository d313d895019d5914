/* http/h1.h - HTTP/1.1 message framing (RFC 9112): head parsers, body framer, response reader.
 *
 * The head parsers allocate nothing and copy nothing: headers come back as {ptr,len} spans into
 * the caller's buffer. They are stateless: call again with more bytes (from the start of the
 * head) after SQ_H1_PARTIAL. The body framer and the response reader are incremental state
 * machines that can be fed any split of the stream.
 *
 * Line endings: CRLF, or a bare LF (RFC 9112 2.2 allows a recipient to accept it); a CR that is
 * not followed by LF is an error. The same rule holds in chunked framing and trailers.
 * Rejected in heads: obs-fold (a line starting with SP/HTAB), whitespace between a field name
 * and its colon, an empty field name, control characters (other than HTAB) in values,
 * Content-Length that is not a list of equal decimals (at most 18 digits), Content-Length
 * together with Transfer-Encoding, "chunked" that is not the final transfer coding or appears
 * twice; in a request, two Host fields. See docs/internals/http.md.
 *
 * Besides framing, a response head yields two cheap facts a client needs before the first body
 * byte: its Content-Encoding (sq_coding_from_header() over every such field: two fields with a
 * coding each are stacked codings, SQ_CODING_OTHER) and whether Content-Type is
 * text/event-stream (the last Content-Type field decides). Field names are compared by length
 * first, so other fields cost one switch on their length.
 */
#ifndef SQ_HTTP_H1_H
#define SQ_HTTP_H1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "http/decode.h"

/* Returned by the head parsers when the head is not complete yet (a valid prefix). Zero, so it
 * can never be confused with a head length (> 0) or an error (negative). */
#define SQ_H1_PARTIAL 0
/* Returned by the body framer and the reader when a body / response is complete. */
#define SQ_H1_DONE 1

#define SQ_H1_DEFAULT_MAX_HEAD_BYTES (64 * 1024)
#define SQ_H1_DEFAULT_MAX_HEADERS    128
/* Hard caps of the chunked framer: one chunk-size line with its extensions, and the whole
 * trailer section. Over either: -SQ_ETOOBIG. */
#define SQ_H1_MAX_CHUNK_LINE    4096
#define SQ_H1_MAX_TRAILER_BYTES 16384
/* The response reader skips at most this many interim (1xx) responses before a final one. */
#define SQ_H1_MAX_INTERIM 32

/* One header field: spans into the parsed buffer. The value has surrounding OWS removed. */
struct sq_h1_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/* Limits for one head. A NULL pointer or a zero field means the default. */
struct sq_h1_limits {
    size_t max_head_bytes; /* start line + fields + blank line; default 64 KiB */
    size_t max_headers;    /* default 128 */
};

/* A parsed response head. Set headers/headers_cap before the call (headers NULL: the fields
 * are checked and counted but not stored); the parser sets the rest on success only. */
struct sq_h1_response {
    struct sq_h1_header *headers; /* in: array to fill, or NULL */
    size_t headers_cap;           /* in: its capacity; more fields: -SQ_ETOOBIG */
    int status;                   /* 100..999 */
    int minor_version;            /* HTTP/1.<minor> */
    const char *reason;           /* reason phrase span (may be empty) */
    size_t reason_len;
    size_t num_headers;       /* fields in the head (all stored when headers != NULL) */
    int64_t content_length;   /* -1: no Content-Length */
    bool chunked;             /* Transfer-Encoding ends in "chunked" */
    bool transfer_encoding;   /* a Transfer-Encoding field is present (chunked or not) */
    bool keep_alive;          /* Connection: close, or HTTP/1.0 without keep-alive: false */
    uint8_t content_encoding; /* enum sq_coding of the Content-Encoding field(s); NONE: none */
    bool event_stream;        /* Content-Type is text/event-stream (parameters allowed) */
};

/* A parsed request head; same conventions as struct sq_h1_response. */
struct sq_h1_request {
    struct sq_h1_header *headers; /* in: array to fill, or NULL */
    size_t headers_cap;           /* in */
    const char *method;           /* a token */
    size_t method_len;
    const char *path; /* the request-target as sent (origin, absolute, authority or '*' form) */
    size_t path_len;
    int minor_version;
    size_t num_headers;
    int64_t content_length; /* -1: none */
    bool chunked;           /* Transfer-Encoding: chunked (any other coding is an error) */
    bool keep_alive;        /* HTTP/1.1 unless "Connection: close"; HTTP/1.0 with keep-alive */
    bool expect_continue;   /* Expect: 100-continue */
    /* The one Host field's value (OWS trimmed; may be empty), or NULL when there is none. Two
     * Host fields are refused (-SQ_EPARSE: RFC 9112 3.2); that an HTTP/1.1 request has one, and
     * that its value is valid (sq_h1_host_valid), are the server's to check: it can skip the
     * check for the value it saw last. */
    const char *host;
    size_t host_len;
};

/* Parses a response head at the start of buf[0, len).
 * Returns the head length (> 0: bytes up to and including the blank line), SQ_H1_PARTIAL when
 * buf is a valid but incomplete prefix, -SQ_EPARSE (malformed; detected as early as the bytes
 * allow) or -SQ_ETOOBIG (head over lim->max_head_bytes, more fields than lim->max_headers or
 * than out->headers_cap). Never reads past buf + len. */
SQ_MUST_CHECK int sq_h1_parse_response_head(const char *buf, size_t len,
                                            const struct sq_h1_limits *lim,
                                            struct sq_h1_response *out);

/* Parses a request head at the start of buf[0, len); empty lines before the request line are
 * skipped (RFC 9112 2.2) and counted in the head length. Returns as
 * sq_h1_parse_response_head(). Also -SQ_EPARSE for a Transfer-Encoding other than "chunked" or
 * any Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1: faulty framing). */
SQ_MUST_CHECK int sq_h1_parse_request_head(const char *buf, size_t len,
                                           const struct sq_h1_limits *lim,
                                           struct sq_h1_request *out);

/* True when a Content-Type value v[0, n) is the media type "text/event-stream"
 * (case-insensitive), followed by parameters or nothing. HTTP/2 heads use it too
 * (http/h2client.c). */
bool sq_h1_is_event_stream(const char *v, size_t n);

/* True when a Content-Type value v[0, n) is exactly the media type `type` (lowercase, e.g.
 * "application/json"), compared case-insensitively, followed by nothing or by OWS and ";"
 * parameters: "application/json; charset=utf-8" is, "application/jsonp" is not. */
bool sq_h1_media_type_is(const char *v, size_t n, const char *type);

/* True when v[0, n) is a valid Host field value (RFC 9112 3.2, RFC 3986 3.2.2): empty, or
 * uri-host (a reg-name of unreserved, sub-delims and %XX bytes, or an IP-literal in brackets:
 * an IPv6 address with an optional "%25" zone, or IPvFuture) followed by an optional ":" and
 * digits. "[::1]x", "a b", "h:p" and "a:1:2" are not. */
bool sq_h1_host_valid(const char *v, size_t n);

/* ---- body framer ---- */

enum sq_h1_body_mode {
    SQ_H1_BODY_NONE,        /* no body: complete at once */
    SQ_H1_BODY_LENGTH,      /* exactly n bytes */
    SQ_H1_BODY_CHUNKED,     /* chunked transfer coding, trailers checked and skipped */
    SQ_H1_BODY_UNTIL_CLOSE, /* everything until the connection closes */
};

/* Receives a piece of decoded payload. Return 0 to go on, or a negative code that the feed call
 * then returns. */
typedef int (*sq_h1_data_cb)(void *ud, const char *data, size_t len);

/* Caller-owned; no allocation. Only mode and bytes are for reading. */
struct sq_h1_body {
    uint64_t _remaining; /* LENGTH: bytes left; CHUNKED: bytes left in this chunk / its size */
    uint64_t bytes;      /* decoded payload bytes delivered so far */
    uint16_t _line;      /* bytes of the current chunk-size line */
    uint16_t _trailer;   /* bytes of the trailer section so far */
    uint8_t mode;        /* enum sq_h1_body_mode */
    uint8_t _state;
    uint8_t _digits; /* hex digits of the current chunk size */
};

/* Prepares b for one body; length is used by SQ_H1_BODY_LENGTH only. */
void sq_h1_body_init(struct sq_h1_body *b, enum sq_h1_body_mode mode, uint64_t length);

/* Feeds buf[0, len). *consumed is set to the bytes that belong to the body. Returns SQ_H1_DONE
 * (1) when the body ended (bytes after *consumed belong to the next message), 0 when all of buf
 * was consumed and more is needed, or a negative code: -SQ_EPARSE (bad chunk framing: bad hex,
 * a chunk not followed by CRLF, a bad trailer field), -SQ_ETOOBIG (more than 16 hex digits, a
 * chunk line over SQ_H1_MAX_CHUNK_LINE, trailers over SQ_H1_MAX_TRAILER_BYTES) or what on_data
 * returned. After an error the body must be initialised again. on_data may be NULL (framing
 * only); it is never called with len 0. A complete body returns 1 with *consumed 0 again. */
SQ_MUST_CHECK int sq_h1_body_feed(struct sq_h1_body *b, const char *buf, size_t len,
                                  size_t *consumed, sq_h1_data_cb on_data, void *ud);

/* The connection closed. Returns 1 when that completes the body (UNTIL_CLOSE, or already
 * complete), -SQ_EPARSE when the body was cut short. */
SQ_MUST_CHECK int sq_h1_body_eof(struct sq_h1_body *b);

/* ---- response reader ---- */

/* Receives the complete head of a final response: head[0, len), contiguous, valid during the
 * call only. Return 0 to go on, or a negative code that the feed call then returns. */
typedef int (*sq_h1_head_cb)(void *ud, const char *head, size_t len);
/* The same, with the head's fields as the reader parsed them: spans into head (valid during the
 * call only), in order. */
typedef int (*sq_h1_fields_cb)(void *ud, const char *head, size_t len,
                               const struct sq_h1_header *fields, size_t nfields);

/* The most fields a reader hands to a fields callback: a head with more fails with -SQ_ETOOBIG
 * while a fields callback is set, whatever max_headers says. */
#define SQ_H1_READER_MAX_FIELDS SQ_H1_DEFAULT_MAX_HEADERS

struct sq_h1__spill; /* the reader's spill buffer (private) */

/* One per connection, embedded by the caller (sizeof is 88 bytes). status, minor_version,
 * keep_alive, content_encoding and event_stream describe the final response as soon as its head
 * is parsed: from the head callback on, before the first body callback, and until the next
 * sq_h1_reader_start(). body and head_bytes are complete once sq_h1_reader_feed() or
 * sq_h1_reader_eof() returned SQ_H1_DONE. A head split across reads is copied into a spill
 * buffer the reader owns (allocated on first need, at most max_head_bytes, kept for reuse while
 * it is small); body bytes are never copied. */
struct sq_h1_reader {
    struct sq_h1_body body; /* body.bytes: decoded payload bytes of the final response */
    uint32_t head_bytes;    /* bytes of the head(s), interim 1xx heads included */
    uint16_t status;        /* final status; 101 also ends a response */
    uint8_t minor_version;
    bool keep_alive;          /* the connection may carry the next response */
    uint8_t content_encoding; /* enum sq_coding of the final response */
    bool event_stream;        /* its Content-Type is text/event-stream */
    uint16_t _max_headers;
    uint8_t _state;
    uint8_t _interim;
    uint8_t _spill_allocs; /* saturates at 255 */
    uint8_t _eoh : 2;      /* end-of-head scanner state over the spilled bytes */
    uint8_t _head_req : 1;
    uint8_t _fields : 1; /* _on_head holds a fields callback */
    uint32_t _spill_len;
    uint32_t _max_head;
    sq_h1_data_cb _on_data;
    union {
        sq_h1_head_cb head;
        sq_h1_fields_cb fields;
    } _on_head;
    void *_ud; /* both callbacks' (one per reader: a VU's reader is a byte per VU) */
    struct sq_h1__spill *_spill;
};

/* Initialises r (idle, no memory held). lim may be NULL (defaults); it is copied. */
void sq_h1_reader_init(struct sq_h1_reader *r, const struct sq_h1_limits *lim);
/* Frees the spill buffer; r may be initialised again. */
void sq_h1_reader_dispose(struct sq_h1_reader *r);
/* The callbacks below share one ud, the last one given with a callback that is not NULL (a
 * setter given cb NULL leaves it as it was): a caller that sets both passes the same ud.
 *
 * Sets a callback for decoded body bytes of later responses (NULL: framing only, the default).
 * Interim responses and heads never reach it. */
void sq_h1_reader_on_body(struct sq_h1_reader *r, sq_h1_data_cb cb, void *ud);
/* Sets a callback for the complete head of each later final response (NULL: none, the
 * default). It is called once per final response (interim 1xx heads never reach it), after the
 * public fields are set and before any body callback, with the head from the caller's buffer or,
 * when the head was split across reads, from the spill buffer. */
void sq_h1_reader_on_head(struct sq_h1_reader *r, sq_h1_head_cb cb, void *ud);
/* Instead of a head callback (each setter replaces the other): the same call, with the fields
 * the reader parsed out of the head on its way (at most SQ_H1_READER_MAX_FIELDS), so a caller
 * that reads header values never parses the head again. Without it the reader parses heads
 * without storing their fields (the cheaper scan). cb NULL: no head callback. */
void sq_h1_reader_on_fields(struct sq_h1_reader *r, sq_h1_fields_cb cb, void *ud);
/* A new response is expected; head_request: it answers a HEAD request (no body). */
void sq_h1_reader_start(struct sq_h1_reader *r, bool head_request);
/* Feeds bytes read from the connection. Returns SQ_H1_DONE when the response ended (*consumed:
 * bytes used; the rest belongs to the next response, after the next sq_h1_reader_start()), 0
 * when all of buf was consumed and more is needed, or a negative code: -SQ_EPARSE,
 * -SQ_ETOOBIG (head over max_head_bytes or max_headers, too many interim responses, chunk
 * caps), -ENOMEM (spill buffer), -SQ_EUSAGE (no response was started), or what the head or
 * body callback returned. Interim 1xx responses
 * other than 101 are skipped; 101, 1xx, 204, 304 and answers to HEAD have no body; a response
 * with neither Content-Length nor chunked runs until the connection closes. After an error the
 * connection must not be reused; the reader may be started again. */
SQ_MUST_CHECK int sq_h1_reader_feed(struct sq_h1_reader *r, const char *buf, size_t len,
                                    size_t *consumed);
/* The connection closed. Returns SQ_H1_DONE when that completes the response (body delimited by
 * the close), 0 when no byte of the started response had arrived (or none was started), or
 * -SQ_EPARSE when the response was cut short. */
SQ_MUST_CHECK int sq_h1_reader_eof(struct sq_h1_reader *r);
/* How many times this reader allocated or grew its spill buffer since init, at most 255
 * (tests). */
uint32_t sq_h1_reader_spill_allocs(const struct sq_h1_reader *r);
/* Bytes of heap the reader holds now (its spill buffer). */
size_t sq_h1_reader_heap_bytes(const struct sq_h1_reader *r);

#endif
