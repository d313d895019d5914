/* base/json.h - the JSON token walker every reader of JSON text shares: one pass over a borrowed
 * buffer, nothing allocated, nothing built.
 *
 * One copy, here, instead of one per module: the NATS INFO and PubAck readers (proto/nats.c), the
 * JSON feeder (plan/feeder.c) and the JSON paths (plan/jpath.c) each had a string scanner, a
 * hex4 and a skip_ws of their own. A reader that builds a tree and may allocate uses jansson.
 *
 * A pull walker: the caller asks for the next token and the walker checks it against RFC 8259's
 * grammar (brackets that match, ',' and ':' where they belong, keys only in objects, one root
 * value and only whitespace after it). A token is an offset and a length into the buffer; a
 * string's bytes are its escaped text, which sq_json_unescape decodes into a caller's buffer
 * (the string itself will do: decoding never lengthens). Callers that word their own errors at
 * each point peek at the next byte and take the separators themselves (sq_json_peek,
 * sq_json_sep); the others let sq_json_next take them. A reader after one value (a JSON path)
 * jumps: sq_json_find (a member by its key), sq_json_index (an array's value n), sq_json_skip
 * (past a value), each one tight loop.
 *
 * Invariants:
 *  - every read is of a byte at an offset below len; nothing looks ahead unchecked (the unit
 *    tests put each input and each of its truncated prefixes right before a PROT_NONE page);
 *  - nesting is counted, never recursed: opening a container past max_depth is an error; a byte
 *    is read a bounded number of times (by a fast loop, and after a fault by the token walk that
 *    names it), so hostile input costs a few passes at most;
 *  - each sq_json_next moves past at least one byte or returns the same END (or error) again;
 *  - an error is sticky: every later call returns it; err names what and err_at the byte.
 */
#ifndef SQ_BASE_JSON_H
#define SQ_BASE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The deepest nesting a walker follows (containers open at once, the root's included). */
#define SQ_JSON_DEPTH_MAX 256

enum sq_json_tok_type {
    SQ_JSON_T_OBJ = 1, /* '{' */
    SQ_JSON_T_OBJ_END, /* '}' */
    SQ_JSON_T_ARR,     /* '[' */
    SQ_JSON_T_ARR_END, /* ']' */
    SQ_JSON_T_KEY,     /* a member's name: the string before a ':' */
    SQ_JSON_T_STR,
    SQ_JSON_T_NUM,
    SQ_JSON_T_TRUE,
    SQ_JSON_T_FALSE,
    SQ_JSON_T_NULL,
    SQ_JSON_T_END, /* the root value is complete and only whitespace follows it */
};

struct sq_json_tok {
    enum sq_json_tok_type type;
    bool esc;   /* a string or key with a backslash: its bytes are not its text */
    size_t at;  /* offset of its first byte (END: len) */
    size_t len; /* its bytes: 1 for a bracket, a string's quotes included, 0 for END; after
                 * sq_json_skip, the whole value */
};

/* What stops a walk, with the byte err_at names. */
#define SQ_JSON_ERRORS(X)                                                                          \
    X(SQ_JSON_E_END, "the input ends inside the document")                                         \
    X(SQ_JSON_E_UNEXPECTED, "unexpected byte")                                                     \
    X(SQ_JSON_E_TRAILING, "more after the document's value")                                       \
    X(SQ_JSON_E_DEPTH, "nested too deep")                                                          \
    X(SQ_JSON_E_LITERAL, "not true, false or null")                                                \
    X(SQ_JSON_E_NUMBER, "malformed number")                                                        \
    X(SQ_JSON_E_STRING_END, "unterminated string")                                                 \
    X(SQ_JSON_E_CONTROL, "control character in a string")                                          \
    X(SQ_JSON_E_ESCAPE, "invalid escape")                                                          \
    X(SQ_JSON_E_HEX, "\\u not followed by 4 hex digits")                                           \
    X(SQ_JSON_E_LONE_HIGH, "high surrogate not followed by a low surrogate")                       \
    X(SQ_JSON_E_LONE_LOW, "lone low surrogate")                                                    \
    X(SQ_JSON_E_NUL, "\\u0000 not allowed")

enum sq_json_err {
    SQ_JSON_E_NONE,
#define SQ_JSON_ERR_ENUM(name, str) name,
    SQ_JSON_ERRORS(SQ_JSON_ERR_ENUM)
#undef SQ_JSON_ERR_ENUM
};

/* Flags for sq_json_walk_init. Without them a string is checked by the grammar alone: any
 * \uXXXX is well formed, a lone surrogate and \u0000 included (sq_json_unescape still refuses a
 * lone surrogate when the text is decoded). */
enum {
    SQ_JSON_SURROGATES = 1, /* a \u escape that is an unpaired surrogate is an error */
    SQ_JSON_NO_NUL = 2,     /* \u0000 is an error */
};

/* A walker; caller-owned, no dispose. Fields other than err and err_at are private. */
struct sq_json_walk {
    const char *s;
    size_t len;
    size_t pos;         /* the next byte to read */
    unsigned depth;     /* containers open */
    unsigned max_depth; /* 1..SQ_JSON_DEPTH_MAX */
    unsigned flags;
    enum sq_json_err err; /* SQ_JSON_E_NONE until the walk fails */
    size_t err_at;        /* the byte the error names; len: the end of the input */
    uint8_t _state;
    uint64_t _obj[SQ_JSON_DEPTH_MAX / 64]; /* bit d: the container at depth d is an object */
};

/* Starts a walk over s[0, len) (borrowed; s may be NULL when len is 0). max_depth: 0 or more
 * than SQ_JSON_DEPTH_MAX means SQ_JSON_DEPTH_MAX. Inline: a reader starts one per document, on
 * a worker's per-response path. */
static inline void sq_json_walk_init(struct sq_json_walk *w, const char *s, size_t len,
                                     unsigned max_depth, unsigned flags)
{
    w->s = s ? s : ""; /* no arithmetic on NULL, not even + 0 */
    w->len = s ? len : 0;
    w->pos = 0;
    w->depth = 0;
    w->max_depth = max_depth && max_depth <= SQ_JSON_DEPTH_MAX ? max_depth : SQ_JSON_DEPTH_MAX;
    w->flags = flags;
    w->err = SQ_JSON_E_NONE;
    w->err_at = 0;
    w->_state = 0; /* the root value is due */
}

/* The next token into *t, taking a ',' or ':' before it. Returns 0, or -SQ_EPARSE with w->err
 * and w->err_at set. After the root value: END (and END again), or SQ_JSON_E_TRAILING when
 * anything but whitespace follows. */
SQ_MUST_CHECK int sq_json_next(struct sq_json_walk *w, struct sq_json_tok *t);

/* When *t (the token sq_json_next just gave) opens a container, reads to its matching end and
 * widens t->len to the whole value; any other token is left as it is. Returns 0 or -SQ_EPARSE.
 * Iterative and specialised: the fast way past a value nobody asked for. */
SQ_MUST_CHECK int sq_json_skip(struct sq_json_walk *w, struct sq_json_tok *t);

/* Inside an object, between its members (just after its '{' or after a member's value), or
 * where a value is due that is an object (its '{' is taken first): reads members, skipping their
 * values, up to the first whose key's text (decoded: sq_json_str_eq) is name[0, nlen], and reads
 * that member's value's first token into *t (as sq_json_next would). Returns 1 (found), 0 (the
 * object ended first, the walker past its '}'; or the value due is not an object, the walker
 * not moved but for whitespace) or -SQ_EPARSE (a fault on the way or in that token). */
SQ_MUST_CHECK int sq_json_find(struct sq_json_walk *w, const char *name, size_t nlen,
                               struct sq_json_tok *t);

/* Just after an array's '[', or where a value is due that is an array (the root, after ':' or
 * after ','; its '[' is taken first):
 * skips its first n values and reads value n's (0-based) first token into *t. Returns 1, 0
 * (fewer values, the walker past the ']'; or the value due is not an array, the walker not
 * moved) or -SQ_EPARSE. */
SQ_MUST_CHECK int sq_json_index(struct sq_json_walk *w, size_t n, struct sq_json_tok *t);

/* Skips whitespace and returns the next byte (0..255) without taking it, or -1 at the end of
 * the input or after an error. For callers that check the shape themselves before asking for a
 * token (or that want to look no further than the byte after a value). Inline: a JSON path
 * looks at the byte after the value it found, once per response. */
static inline int sq_json_peek(struct sq_json_walk *w)
{
    if (w->err)
        return -1;
    while (w->pos < w->len) {
        unsigned char c = (unsigned char)w->s[w->pos];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
            return c;
        w->pos++;
    }
    return -1;
}

/* Takes the ',' or ':' the grammar wants next (after a value in a container, after a key).
 * Returns 0, or -SQ_EPARSE (SQ_JSON_E_UNEXPECTED or _END) when it is not there. */
SQ_MUST_CHECK int sq_json_sep(struct sq_json_walk *w);

/* The error's name ("malformed number"). */
const char *sq_json_strerror(enum sq_json_err e);

/* "byte 17: expected ',' or '}'" (what the grammar wanted, for an unexpected byte or end) or
 * "byte 5: invalid escape" into buf; returns buf. Byte offsets count from 0. */
const char *sq_json_describe(const struct sq_json_walk *w, char *buf, size_t len);

/* The escape at s[0, n) (s[0] == '\\'): returns its length (2; 6 for \uXXXX; 12 for a surrogate
 * pair, joined) with the code point in *cp, or -SQ_JSON_E_ESCAPE (no such escape, or nothing
 * after the backslash), -SQ_JSON_E_HEX, -SQ_JSON_E_LONE_HIGH (not followed by \u and a low
 * surrogate) or -SQ_JSON_E_LONE_LOW. \' is not an escape here. */
int sq_json_escape(const char *s, size_t n, uint32_t *cp);

/* Decodes the inside of a string (the bytes between its quotes) into out, which has room for n
 * bytes (decoding never lengthens) and may be s itself or start before it: writes never pass
 * reads. Escapes become UTF-8 (\u0000 a NUL byte); other bytes are copied as they are. *outlen
 * gets the decoded length. Returns 0, or -SQ_EPARSE for a bad escape, a lone surrogate, a raw
 * '"' or a control byte; *bad (when not NULL) then gets its offset in s and out holds garbage. */
SQ_MUST_CHECK int sq_json_unescape(const char *s, size_t n, char *out, size_t *outlen, size_t *bad);

/* True when the inside of a well-formed string s[0, n) decodes to exactly name[0, nlen). A string
 * with an unpaired surrogate equals nothing. Compares while it decodes: no buffer. */
bool sq_json_str_eq(const char *s, size_t n, const char *name, size_t nlen);

#endif
