/* plan/tmpl.h - templates: "{{...}}" strings compiled once into static pieces and slots.
 *
 * A template is compiled when the plan loads and rendered per iteration into a caller-owned
 * buffer (no allocation once the buffer has grown to its working size). Names inside {{ }}:
 *   $vu                 the VU number, 1-based, unique across the run's workers
 *   $iteration          the VU's iteration number in its scenario, 0-based
 *   $randomUUID         a random (version 4) UUID, new at every occurrence
 *   $randomInt(a,b)     a random integer in [a, b], new at every occurrence
 *   $timestamp          wall-clock milliseconds since the epoch, at render time
 *   $isoTimestamp       the same instant as 2026-11-30T14:05:06.123Z
 *   $env.NAME           the environment variable, read once at compile time (unset: an error)
 *   $stamp              the event stamp of this request (proto/stamp.h: run id, sequence number,
 *                       send time): the caller makes one per request (ctx->stamp) and every
 *                       occurrence in that request's templates (payload, headers, properties)
 *                       renders the same token
 *   $oauth.token        the run's current OAuth2 access token (a plan's auth.oauth2), read at
 *                       each render: valid only where the resolver answers SQ_TMPL_REF_OAUTH
 *   anything else       resolved by the caller's resolver: a plan variable (static text), a
 *                       value extracted earlier in the flow (a per-VU slot), or a feeder
 *                       column such as users.name (a column of the VU's current row)
 * Whitespace inside the braces is allowed ("{{ token }}"). "{{" with no closing "}}" is an error.
 *
 * Escaping is a property of the whole template, applied to every dynamic value and to static
 * values substituted by the resolver (never to the literal text): JSON string escaping for
 * values placed inside JSON strings, percent-encoding for form bodies.
 */
#ifndef SQ_PLAN_TMPL_H
#define SQ_PLAN_TMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

enum sq_tmpl_escape {
    SQ_TMPL_ESC_NONE,
    SQ_TMPL_ESC_JSON, /* inside a JSON string: " \ and control characters escaped */
    SQ_TMPL_ESC_FORM, /* application/x-www-form-urlencoded value: unreserved kept, space as + */
};

/* What the resolver says a name is. */
enum sq_tmpl_ref_kind {
    SQ_TMPL_REF_UNKNOWN, /* not a name the plan knows: compile fails */
    SQ_TMPL_REF_STATIC,  /* fixed text (a plan variable): value/value_len, copied at compile */
    SQ_TMPL_REF_VAR,     /* a per-VU variable slot (extracted values): index */
    SQ_TMPL_REF_FEED,    /* a feeder column: feeder, column */
    SQ_TMPL_REF_OAUTH,   /* asked for "$oauth.token": a token source is set up here */
};

struct sq_tmpl_ref {
    enum sq_tmpl_ref_kind kind;
    const char *value; /* STATIC */
    size_t value_len;
    uint32_t index;  /* VAR */
    uint32_t feeder; /* FEED */
    uint32_t column; /* FEED */
};

/* Resolves a name that is not a built-in ($...). name is not NUL-terminated. */
typedef void (*sq_tmpl_resolve_fn)(void *ud, const char *name, size_t len, struct sq_tmpl_ref *out);

struct sq_tmpl_error {
    size_t offset; /* byte offset in the source where the problem starts */
    char msg[160]; /* e.g. "unknown name 'tokn' (did you mean 'token'?)" */
};

/* A value the whole run shares and that changes while it runs ({{$oauth.token}}): the writer
 * publishes a new string with a release store (__atomic_store_n), renders read it with an
 * acquire load. A published string stays valid until the run ends. */
struct sq_tmpl_live {
    const struct sq_str *cur; /* NULL: nothing yet (renders as empty) */
};

/* Per-render values, owned by the VU. */
struct sq_tmpl_ctx {
    uint64_t vu;                      /* 1-based */
    uint64_t iteration;               /* 0-based */
    uint64_t *rng;                    /* the VU's (or worker's) xorshift64 state, never 0 */
    const struct sq_str *vars;        /* per-VU variable values, indexed by SQ_TMPL_REF_VAR.index;
                                         an unset variable renders as empty */
    const struct sq_str *const *rows; /* per feeder: the current row, one sq_str per column */
    const struct sq_str *stamp;       /* $stamp's text for this request; NULL renders nothing */
    const struct sq_tmpl_live *oauth; /* {{$oauth.token}}; NULL: renders as empty */
};

struct sq_tmpl;

/* Compiles src[0, len). resolve may be NULL (then only built-ins and literal text are valid).
 * Returns 0, -SQ_EPARSE (syntax, unknown name, $env.NAME unset; err says what and where) or
 * -ENOMEM. */
SQ_MUST_CHECK int sq_tmpl_compile(const char *src, size_t len, enum sq_tmpl_escape esc,
                                  sq_tmpl_resolve_fn resolve, void *ud, struct sq_tmpl **out,
                                  struct sq_tmpl_error *err);
void sq_tmpl_free(struct sq_tmpl *t);

/* A static template holding s[0, len) as it is: "{{" is not interpreted (file bodies). Returns 0
 * or -ENOMEM. */
SQ_MUST_CHECK int sq_tmpl_new_literal(const char *s, size_t len, struct sq_tmpl **out);

/* The source text the template was compiled from (for `squall validate`), NUL-terminated. */
const char *sq_tmpl_source(const struct sq_tmpl *t, size_t *len);

/* True when the template has no dynamic part (only literal text and static values): then *s,
 * *len give the whole rendered text, valid as long as the template. */
bool sq_tmpl_static(const struct sq_tmpl *t, const char **s, size_t *len);

/* True when the template uses any feeder column (then rows must be set in the context). */
bool sq_tmpl_uses_feeds(const struct sq_tmpl *t);

/* True when the template uses $stamp (then the caller makes a stamp per request: ctx->stamp). */
bool sq_tmpl_uses_stamp(const struct sq_tmpl *t);

/* The random values ($randomUUID, $randomInt, a random feeder's rows, and Lua's math.random in
 * scripts) come from a run's seed: one number in [0, SQ_SEED_MAX] (53 bits, so a JSON number
 * carries it exactly), drawn from the OS unless the user gave one (--seed, a plan's seed:).
 * Each VU has its own stream, sq_tmpl_rng_init(seed, its VU number): what a VU draws depends on
 * the seed and its number alone, never on which thread runs it or when, so the same seed replays
 * every VU's values, on one machine or split across agents (VU numbers are global). */
#define SQ_SEED_MAX ((1ull << 53) - 1)

/* The xorshift64 state of stream `stream` (a VU's 1-based number; other users take numbers
 * above 2^62) of the seed: a splitmix64 hash of both, so neighbouring seeds and streams give
 * unrelated sequences. Never 0 (xorshift's fixed point). */
uint64_t sq_tmpl_rng_init(uint64_t seed, uint64_t stream);

/* Lua states' streams (sq_tmpl_rng_init's stream): SQ_TMPL_STREAM_LUA + the state's number. */
#define SQ_TMPL_STREAM_LUA (1ull << 62)
/* A batch's lanes (engine/worker.c): SQ_TMPL_STREAM_LANE + the VU's number * 64 + the lane's. */
#define SQ_TMPL_STREAM_LANE (1ull << 61)

/* Appends the rendered text to out. Returns 0 or -ENOMEM. Generators ($randomUUID,
 * $randomInt, $timestamp) are evaluated at each occurrence. */
SQ_MUST_CHECK int sq_tmpl_render(const struct sq_tmpl *t, const struct sq_tmpl_ctx *ctx,
                                 struct sq_buf *out);

#endif
