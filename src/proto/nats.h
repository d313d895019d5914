/* proto/nats.h - the NATS client text protocol: a parser for what the server sends, encoders for
 * what a client sends, and a JetStream PubAck classifier.
 *
 * Parser: stateless and allocation-free in the picohttpparser shape. sq_nats_parse() looks at
 * the start of buf and returns the length of one complete server operation (> 0) with the
 * operation described in *ev as {ptr,len} spans into buf, SQ_NATS_PARTIAL (0) while buf is a
 * valid but incomplete prefix (and *need says how many bytes the operation needs in all, once
 * its control line is complete), or -SQ_EPARSE / -SQ_ETOOBIG with ev->why naming the refusal (a
 * constant string). Nothing past buf + len is read. A driver reads into a per-worker buffer,
 * parses until PARTIAL, and keeps only the unparsed tail; *need sizes that spill exactly.
 *
 * Encoders write into a caller buffer and return the bytes written, or -SQ_ETOOBIG when it is
 * too small (nothing useful is written then), or -EINVAL for an argument the protocol cannot
 * carry (a subject with whitespace, a header value with CR or LF). They never allocate. A PUB
 * whose subject and size do not change is best rendered once with sq_nats_encode_pub_head() and
 * copied: see docs/internals/proto.md.
 *
 * Protocol reference: the NATS client protocol (docs.nats.io, "Client Protocol"); headers are
 * the NATS/1.0 block of HPUB / HMSG.
 */
#ifndef SQ_PROTO_NATS_H
#define SQ_PROTO_NATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define SQ_NATS_PARTIAL 0

/* Default caps. A control line (MSG, HMSG, -ERR, ...) longer than max_line, an INFO line longer
 * than max_info, or a message payload (headers included) larger than max_payload is
 * -SQ_ETOOBIG. 4096 is nats-server's own max_control_line default; 1 MiB its max_payload
 * default; 64 MiB the largest max_payload it accepts. */
#define SQ_NATS_DEFAULT_MAX_LINE    4096
#define SQ_NATS_DEFAULT_MAX_INFO    (64 * 1024)
#define SQ_NATS_DEFAULT_MAX_PAYLOAD (1024 * 1024)
#define SQ_NATS_MAX_PAYLOAD_LIMIT   (64 * 1024 * 1024)

enum sq_nats_op {
    SQ_NATS_OP_INFO = 1, /* text: the JSON object */
    SQ_NATS_OP_MSG,      /* subject, sid, reply, payload */
    SQ_NATS_OP_HMSG,     /* as MSG, plus headers, status, description */
    SQ_NATS_OP_PING,
    SQ_NATS_OP_PONG,
    SQ_NATS_OP_OK,  /* +OK (only with verbose) */
    SQ_NATS_OP_ERR, /* text: the message between the quotes */
};

/* Caps for one parse. Fields left 0 take the defaults above (sq_nats_limits_init() sets them). */
struct sq_nats_limits {
    uint32_t max_line;
    uint32_t max_info;
    uint32_t max_payload; /* headers + payload of one MSG / HMSG; <= SQ_NATS_MAX_PAYLOAD_LIMIT */
};

/* One server operation. Spans point into the parsed buffer. Set on success (op and the fields
 * the op has; others are zeroed); on error only why is set. */
struct sq_nats_event {
    uint8_t op;               /* enum sq_nats_op */
    struct sq_str subject;    /* MSG / HMSG */
    struct sq_str sid;        /* MSG / HMSG: as the server sent it */
    uint64_t sid_num;         /* the sid as a decimal number; UINT64_MAX when it is not one */
    struct sq_str reply;      /* MSG / HMSG: empty when absent */
    struct sq_str headers;    /* HMSG: the whole block, "NATS/1.0..." through the blank line */
    int status;               /* HMSG: the status on the NATS/1.0 line (503, 408...); 0: none */
    struct sq_str status_msg; /* HMSG: the description after the status ("No Messages") */
    struct sq_str payload;    /* MSG / HMSG: the payload (after the headers for HMSG) */
    struct sq_str text;       /* INFO: the JSON; -ERR: the message without its quotes */
    const char *why;          /* on error: a constant string naming the refusal */
};

static inline void sq_nats_limits_init(struct sq_nats_limits *l)
{
    l->max_line = SQ_NATS_DEFAULT_MAX_LINE;
    l->max_info = SQ_NATS_DEFAULT_MAX_INFO;
    l->max_payload = SQ_NATS_DEFAULT_MAX_PAYLOAD;
}

/* Parses one server operation at the start of buf[0, len) (see the top of this file). lim may be
 * NULL (defaults). need may be NULL; on PARTIAL it is set to the operation's total length when
 * the control line is complete (a MSG waiting for its payload), else to 0 (unknown yet).
 * Operation names are matched ignoring case; lines must end in CRLF. */
SQ_MUST_CHECK int sq_nats_parse(const char *buf, size_t len, const struct sq_nats_limits *lim,
                                struct sq_nats_event *ev, size_t *need);

/* Walks the fields of an HMSG header block (ev->headers). *pos starts at 0; returns true and
 * sets name / value (value without surrounding blanks) for each field in turn, false at the end.
 * The block was validated by the parser, so this never fails on one it returned. */
bool sq_nats_header_next(struct sq_str block, size_t *pos, struct sq_str *name,
                         struct sq_str *value);

/* The value of the first field named name (ASCII case ignored); false when there is none. */
bool sq_nats_header_get(struct sq_str block, struct sq_str name, struct sq_str *value);

/* ---- INFO ---- */

/* What a client needs from INFO. Strings are spans into the JSON, still JSON-escaped (server
 * ids, versions and nonces contain no escapes). */
struct sq_nats_info {
    struct sq_str server_id, version, nonce;
    int proto;           /* -1: absent */
    int64_t max_payload; /* -1: absent */
    bool headers;        /* the server accepts HPUB */
    bool jetstream;      /* JetStream enabled */
    bool auth_required;  /* CONNECT must carry credentials */
    bool tls_required;   /* the server wants TLS before anything else */
    bool tls_available;  /* the server takes TLS without requiring it (allow_non_tls) */
    uint64_t client_id;  /* 0: absent */
};

/* Reads INFO's JSON (ev->text). Returns 0 or -SQ_EPARSE (not a JSON object, a field of the
 * wrong type). Unknown fields are skipped. */
SQ_MUST_CHECK int sq_nats_info_parse(struct sq_str json, struct sq_nats_info *out);

/* ---- a small JSON reader (top-level members of one object; allocation-free; base/json) ---- */

/* Finds member key (compared byte for byte with the raw, still escaped, member name) of the JSON
 * object json and sets *value to its raw value text (a string keeps its quotes). Returns 1 found,
 * 0 not found, -SQ_EPARSE when json is not one well-formed object (more than 32 containers open
 * at once, the object's own included). */
SQ_MUST_CHECK int sq_nats_json_get(struct sq_str json, const char *key, struct sq_str *value);

/* ---- JetStream PubAck ---- */

enum sq_nats_ack {
    SQ_NATS_ACK_OK = 0,    /* stored: stream and seq set */
    SQ_NATS_ACK_DUPLICATE, /* already stored under the same Nats-Msg-Id: stream and seq set */
    SQ_NATS_ACK_ERROR,     /* refused: code, err_code and description set */
};

struct sq_nats_puback {
    struct sq_str stream; /* JSON-escaped span */
    uint64_t seq;
    int code;                  /* the HTTP-like code (503, 400...); 0 when absent */
    int err_code;              /* JetStream's own error number (10077...); 0 when absent */
    struct sq_str description; /* JSON-escaped span */
};

/* Classifies the payload of a PubAck: {"stream":..,"seq":..[,"duplicate":true]} or
 * {"error":{"code":..,"err_code":..,"description":..}}. Returns an enum sq_nats_ack (>= 0) or
 * -SQ_EPARSE (not JSON, neither shape). A reply that is an HMSG with status 503 is "no
 * responders" (no stream listens on the subject): check ev->status before calling this. */
SQ_MUST_CHECK int sq_nats_puback_parse(const char *payload, size_t len, struct sq_nats_puback *out);

/* ---- encoders ---- */

/* CONNECT's fields. NULL strings are left out. verbose, pedantic and echo are sent as given;
 * protocol 1 (dynamic INFO) is always sent, and "headers" / "no_responders" when set. */
struct sq_nats_connect_opts {
    const char *name;
    const char *lang;    /* default "c" */
    const char *version; /* default SQ_VERSION */
    const char *user, *pass, *auth_token;
    bool verbose, pedantic, echo;
    bool headers, no_responders;
    bool tls_required; /* the connection runs TLS */
};

/* One header field for HPUB. */
struct sq_nats_header {
    struct sq_str name, value;
};

/* A subject (or reply or queue) the protocol can carry: non-empty, no byte <= 0x20 or 0x7f.
 * Wildcards are the server's business. */
bool sq_nats_subject_ok(struct sq_str s);

/* CONNECT {json}\r\n. Strings are JSON-escaped. Returns the length, -SQ_ETOOBIG or -EINVAL. */
SQ_MUST_CHECK int sq_nats_encode_connect(char *buf, size_t cap,
                                         const struct sq_nats_connect_opts *o);

/* "PUB <subject> [reply] <size>\r\n": the control line alone, for a caller that sends the payload
 * and "\r\n" from elsewhere (an iovec, a template) or renders a static PUB once. reply may be
 * empty. Returns the length, -SQ_ETOOBIG or -EINVAL. */
SQ_MUST_CHECK int sq_nats_encode_pub_head(char *buf, size_t cap, struct sq_str subject,
                                          struct sq_str reply, size_t payload_len);

/* A whole PUB: the control line, the payload and "\r\n". */
SQ_MUST_CHECK int sq_nats_encode_pub(char *buf, size_t cap, struct sq_str subject,
                                     struct sq_str reply, const void *payload, size_t len);

/* The bytes "NATS/1.0\r\n" + "Name: value\r\n" per field + "\r\n" take. */
size_t sq_nats_headers_len(const struct sq_nats_header *h, size_t n);

/* "HPUB <subject> [reply] <#hdr> <#total>\r\n" + the header block, without the payload and its
 * "\r\n". Field names must be non-empty tokens without ':' and values free of CR and LF, else
 * -EINVAL. */
SQ_MUST_CHECK int sq_nats_encode_hpub_head(char *buf, size_t cap, struct sq_str subject,
                                           struct sq_str reply, const struct sq_nats_header *h,
                                           size_t n, size_t payload_len);

/* A whole HPUB. */
SQ_MUST_CHECK int sq_nats_encode_hpub(char *buf, size_t cap, struct sq_str subject,
                                      struct sq_str reply, const struct sq_nats_header *h, size_t n,
                                      const void *payload, size_t len);

/* "SUB <subject> [queue] <sid>\r\n". queue may be empty. */
SQ_MUST_CHECK int sq_nats_encode_sub(char *buf, size_t cap, struct sq_str subject,
                                     struct sq_str queue, uint64_t sid);

/* "UNSUB <sid> [max]\r\n"; max 0 leaves it out. */
SQ_MUST_CHECK int sq_nats_encode_unsub(char *buf, size_t cap, uint64_t sid, uint64_t max);

#define SQ_NATS_PING     "PING\r\n"
#define SQ_NATS_PONG     "PONG\r\n"
#define SQ_NATS_PING_LEN 6
#define SQ_NATS_PONG_LEN 6

#endif
