/* proto/ws.h - WebSocket client side (RFC 6455): the upgrade request, the check of the 101
 * answer, and frames over wslay's frame API.
 *
 * Handshake: sq_ws_handshake_init() draws the Sec-WebSocket-Key from the caller's PRNG and
 * precomputes the Sec-WebSocket-Accept the server must answer; sq_ws_encode_upgrade() writes the
 * GET; the caller parses the response head with its HTTP/1.1 parser (proto/ may not use http/)
 * and hands each header field to sq_ws_handshake_field() and the status to
 * sq_ws_handshake_finish(). Bytes after the head are already WebSocket frames: feed them.
 *
 * Frames: wslay (Debian's libwslay) frames and unframes; this layer adds what a client must
 * enforce on top of it (server frames unmasked, RSV bits clear, known opcodes, fragmentation
 * order, close codes and UTF-8 reasons, a message size cap) and turns frames into events. Two
 * objects: a struct sq_ws_ctx per worker thread (wslay contexts, a pool, the I/O cursor the
 * wslay callbacks use) and a struct sq_ws_conn per connection (a few hundred bytes; it borrows a
 * wslay context, 4 KiB and more, only while a frame is partly received). Nothing allocates in the
 * steady state: the pool grows to the peak number of connections caught mid-frame, then stays.
 * docs/internals/proto.md says why the frame API and not wslay_event.
 */
#ifndef SQ_PROTO_WS_H
#define SQ_PROTO_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define SQ_WS_GUID            "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define SQ_WS_KEY_LEN         24 /* base64 of 16 bytes */
#define SQ_WS_ACCEPT_LEN      28 /* base64 of a SHA-1 */
#define SQ_WS_MAX_CONTROL     125
#define SQ_WS_DEFAULT_MAX_MSG (1024 * 1024)

enum sq_ws_opcode {
    SQ_WS_CONT = 0x0,
    SQ_WS_TEXT = 0x1,
    SQ_WS_BINARY = 0x2,
    SQ_WS_CLOSE = 0x8,
    SQ_WS_PING = 0x9,
    SQ_WS_PONG = 0xa,
};

/* Close codes (RFC 6455 section 7.4.1) a load test reports by name. */
enum {
    SQ_WS_CLOSE_NORMAL = 1000,
    SQ_WS_CLOSE_GOING_AWAY = 1001,
    SQ_WS_CLOSE_PROTOCOL_ERROR = 1002,
    SQ_WS_CLOSE_UNSUPPORTED = 1003,
    SQ_WS_CLOSE_NO_STATUS = 1005, /* reported when a close frame carries no code */
    SQ_WS_CLOSE_INVALID_DATA = 1007,
    SQ_WS_CLOSE_POLICY = 1008,
    SQ_WS_CLOSE_TOO_BIG = 1009,
    SQ_WS_CLOSE_SERVER_ERROR = 1011,
};

/* splitmix64: a fast PRNG for masks and keys (RFC 6455 asks for unpredictable masks so a
 * browser script cannot steer bytes on the wire; a load generator has no such script, so speed
 * wins over cryptographic strength; seed it per connection from getrandom() or a worker PRNG). */
static inline uint64_t sq_ws_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* ---- handshake ---- */

struct sq_ws_handshake {
    char key[SQ_WS_KEY_LEN + 1];
    char accept[SQ_WS_ACCEPT_LEN + 1]; /* what Sec-WebSocket-Accept must say */
    struct sq_str protocol;            /* offered subprotocols (borrowed), may be empty */
    uint8_t _seen;
    const char *why; /* after a refusal: which check failed */
};

/* Base64(SHA-1(key + GUID)) (RFC 6455 section 4.2.2), NUL-terminated. */
void sq_ws_accept_for_key(const char *key, size_t len, char out[SQ_WS_ACCEPT_LEN + 1]);

/* A fresh key from *rng; protocol is the Sec-WebSocket-Protocol list to offer (borrowed; the
 * caller keeps it alive until the handshake ends), empty for none. */
void sq_ws_handshake_init(struct sq_ws_handshake *hs, uint64_t *rng, struct sq_str protocol);

/* GET path HTTP/1.1 with Host, Upgrade, Connection, Sec-WebSocket-Key / -Version 13, the
 * protocol list when set, then extra (complete "Name: value\r\n" lines, or empty) and the blank
 * line. Returns the length, -SQ_ETOOBIG or -EINVAL (a path that does not start with '/', CR, LF
 * or a blank in host or path, extra not ending in CRLF). */
SQ_MUST_CHECK int sq_ws_encode_upgrade(char *buf, size_t cap, const struct sq_ws_handshake *hs,
                                       struct sq_str host, struct sq_str path, struct sq_str extra);

/* One field of the response head (value without surrounding blanks). Returns 0, or -SQ_EPARSE
 * with hs->why set: a wrong Sec-WebSocket-Accept, an Upgrade other than websocket, a Connection
 * without the upgrade token, an extension (none was offered), a subprotocol that was not offered,
 * a field that may appear once appearing twice. Other fields are ignored. */
SQ_MUST_CHECK int sq_ws_handshake_field(struct sq_ws_handshake *hs, struct sq_str name,
                                        struct sq_str value);

/* After the last field: status must be 101 and Upgrade, Connection and Sec-WebSocket-Accept must
 * have been seen. Returns 0 or -SQ_EPARSE (hs->why). */
SQ_MUST_CHECK int sq_ws_handshake_finish(struct sq_ws_handshake *hs, int status);

/* ---- frames ---- */

struct wslay_frame_context;

struct sq_ws_ctx {
    uint64_t contexts_created; /* wslay contexts made so far (pool growth; tests read it) */
    const char *why;           /* after an error from sq_ws_feed / sq_ws_encode_frame */
    struct wslay_frame_context *_enc_srv; /* a server's frames (unmasked), made on first use */
    struct wslay_frame_context **_pool;
    size_t _npool, _pool_cap;
    /* The cursor the wslay callbacks use during one call. */
    const uint8_t *_in;
    size_t _in_len;
    uint8_t *_out;
    size_t _out_len, _out_cap;
    struct sq_ws_conn *_conn;
};

struct sq_ws_conn {
    struct wslay_frame_context *_fc; /* borrowed while a frame is partly received */
    uint64_t rng;                    /* mask PRNG state */
    uint64_t max_msg;                /* message size cap (fragments summed) */
    uint64_t _given, _used;          /* bytes handed to wslay / accounted to frames */
    uint64_t _frame_left;            /* payload bytes of the current frame still to come */
    uint64_t _msg_len;               /* bytes of the data message in progress */
    uint8_t _frame_op, _msg_op;      /* current frame's opcode; message's (0: none open) */
    bool _frame_fin, _in_frame, _msg_first;
    bool close_received;
    bool server; /* the server's end: frames in must be masked, frames out are not */
    uint8_t _ctl_len;
    uint8_t _ctl[SQ_WS_MAX_CONTROL]; /* a control frame's payload, gathered */
};

enum sq_ws_event_type {
    SQ_WS_EV_DATA = 1, /* a chunk of a text or binary message */
    SQ_WS_EV_PING,     /* answer with a PONG carrying data (RFC 6455 section 5.5.2) */
    SQ_WS_EV_PONG,
    SQ_WS_EV_CLOSE, /* answer with a CLOSE (echo code), then close the connection */
};

struct sq_ws_event {
    uint8_t type;
    uint8_t opcode;      /* DATA: SQ_WS_TEXT or SQ_WS_BINARY (of the whole message) */
    bool first, last;    /* DATA: first chunk / last chunk (the message is complete) */
    const uint8_t *data; /* DATA: the chunk; PING / PONG: the payload; CLOSE: the reason */
    size_t len;          /* valid only during the callback */
    uint64_t msg_len;    /* DATA: bytes of the message so far, this chunk included */
    uint16_t code;       /* CLOSE: the status code, SQ_WS_CLOSE_NO_STATUS when none */
};

/* Called for each event; a nonzero return stops sq_ws_feed, which returns it. It may encode
 * frames (sq_ws_encode_frame / _close, any connection of the same context): an echo answers
 * from inside the callback. */
typedef int (*sq_ws_event_cb)(void *ud, const struct sq_ws_event *ev);

/* Per worker. Returns 0 or -ENOMEM. */
SQ_MUST_CHECK int sq_ws_ctx_init(struct sq_ws_ctx *w);
void sq_ws_ctx_dispose(struct sq_ws_ctx *w);

/* Per connection (after a successful handshake). seed feeds the mask PRNG; max_msg 0 takes
 * SQ_WS_DEFAULT_MAX_MSG. */
void sq_ws_conn_init(struct sq_ws_conn *c, uint64_t seed, uint64_t max_msg);
/* The server's end of a connection (squall target): client frames must be masked (an unmasked
 * one is -SQ_EPARSE), frames written here are not masked. Otherwise as sq_ws_conn_init. */
void sq_ws_conn_init_server(struct sq_ws_conn *c, uint64_t max_msg);
/* Gives back the wslay context the connection holds, if any. */
void sq_ws_conn_dispose(struct sq_ws_ctx *w, struct sq_ws_conn *c);

/* Feeds bytes received from the peer. Every byte is consumed (a partial frame waits inside the
 * borrowed wslay context). Returns 0, the callback's nonzero value, -ENOMEM, -SQ_ETOOBIG (a
 * message over max_msg) or -SQ_EPARSE with w->why: a masked frame from a server (an unmasked
 * one from a client), RSV bits, a reserved opcode,
 * a continuation with no message open or a new message inside one, a control frame over 125
 * bytes or fragmented, a non-minimal length, a close frame of 1 byte or with a code a peer may
 * not send or a reason that is not UTF-8, anything after a close. Text is not checked for UTF-8
 * (a load generator counts messages; it does not render them). After an error the connection
 * is done: dispose it. A frame is judged when wslay reports it, which is with its first payload
 * byte (or at once for an empty frame): a header alone is held, not yet refused. */
SQ_MUST_CHECK int sq_ws_feed(struct sq_ws_ctx *w, struct sq_ws_conn *c, const void *buf, size_t len,
                             sq_ws_event_cb cb, void *ud);

/* The bytes a masked client frame with len payload bytes takes. */
size_t sq_ws_frame_len(size_t len);
/* The bytes a frame of len payload bytes takes from c's end (masked from a client, not from a
 * server). */
size_t sq_ws_frame_len_for(const struct sq_ws_conn *c, size_t len);

/* Writes one frame from c's end: masked (mask from c->rng) from a client, unmasked from a server
 * (sq_ws_conn_init_server). opcode: SQ_WS_TEXT / BINARY / CONT with
 * fin false for all but the last fragment; CLOSE / PING / PONG with fin true and at most 125
 * bytes. Returns the length, -SQ_ETOOBIG (cap < sq_ws_frame_len_for(c, len)) or -EINVAL. */
SQ_MUST_CHECK int sq_ws_encode_frame(struct sq_ws_ctx *w, struct sq_ws_conn *c, uint8_t *buf,
                                     size_t cap, uint8_t opcode, bool fin, const void *payload,
                                     size_t len);

/* A close frame with code (0: none, then reason must be empty) and reason (<= 123 bytes). */
SQ_MUST_CHECK int sq_ws_encode_close(struct sq_ws_ctx *w, struct sq_ws_conn *c, uint8_t *buf,
                                     size_t cap, uint16_t code, struct sq_str reason);

/* A close code a peer may put on the wire (RFC 6455 section 7.4). */
bool sq_ws_close_code_ok(unsigned code);

#endif
