/* plan/load_internal.h - what the plan loader's files share (never included outside plan/).
 *
 * The loader is four files along its stages:
 *   yaml.c       YAML text -> a tree of our own in which every node keeps its line:col, and the
 *                typed access the other three use (want a mapping, a duration, a number...),
 *                the key path and the one error a failed load reports;
 *   load.c       the entry points, the top level (vars, target, defaults, data), templates and
 *                files (bodies, feeders), sq_plan_free();
 *   load_flow.c  scenarios: executors, steps, requests, extracts, checks;
 *   threshold.c  thresholds, beside their expression and selector parsers.
 * See docs/internals/plan.md.
 */
#ifndef SQ_PLAN_LOAD_INTERNAL_H
#define SQ_PLAN_LOAD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "plan/plan.h"
#include "plan/strmap.h"

/* Limits on a plan (docs/plans.md, "Limits"). Each is refused with a message that names it. */
#define SQ_PLAN_MAX_BYTES   (16u << 20) /* the plan file */
#define SQ_PLAN_MAX_NODES   1000000     /* YAML nodes: scalars, mappings, lists, aliases */
#define SQ_PLAN_MAX_WEIGHT  (32u << 20) /* the tree's weight with every alias expanded */
#define SQ_PLAN_MAX_HEADERS 100         /* headers of one request, the defaults' included */

/* ---- the tree (yaml.c) ---- */

enum ykind { Y_SCALAR, Y_MAP, Y_SEQ };

/* How a scalar was written: only a plain scalar can be a number, a boolean or null. */
enum ystyle { YS_PLAIN, YS_SINGLE, YS_DOUBLE, YS_LITERAL, YS_FOLDED };

struct ynode;

struct ypair {
    struct ynode *key, *val;
};

/* One node: 32 bytes, in the loader's arena. The fields in the unions are read only for the
 * kind that has them (a scalar has no pairs; check kind first). An alias is the node it names
 * (the tree is a DAG, never a cycle: an anchor is registered when its node closes). */
struct ynode {
    union {
        char *s;              /* Y_SCALAR: the text, NUL-terminated */
        struct ypair *pairs;  /* Y_MAP: own keys in order, then merged (<<) ones */
        struct ynode **items; /* Y_SEQ */
    };
    union {
        uint32_t len;    /* Y_SCALAR: bytes in s (NUL bytes included) */
        uint32_t npairs; /* Y_MAP */
        uint32_t nitems; /* Y_SEQ */
    };
    uint32_t pos;      /* byte offset of the node in the source (valid when loc.line) */
    struct sq_loc loc; /* 1-based; 0:0 when libfyaml gave no position (an empty value) */
    uint32_t weight;   /* 8 per node plus the text's bytes, through aliases: what a walk of
                          the node costs (at most SQ_PLAN_MAX_WEIGHT) */
    uint8_t kind;      /* enum ykind */
    uint8_t style;     /* enum ystyle (Y_SCALAR) */
    bool raw;          /* tagged !raw */
};

struct sq_plan__chunk; /* a block of the arena (yaml.c) */

/* The loader's state. Tree memory is an arena of large blocks freed together. */
struct ld {
    struct sq_plan *p;
    struct sq_plan_error *err;
    const char *src;
    size_t src_len;
    char dir[4096]; /* the plan file's directory, "" for the working directory */
    bool no_dir;    /* a plan given as text without a base directory: relative paths refused */
    char path[256]; /* the key path being compiled */
    size_t path_len;
    /* the arena */
    struct sq_plan__chunk *chunks;
    char *cur;        /* free space in the current block */
    size_t left;      /* bytes there */
    size_t next_size; /* the next block's size (grows to 1 MiB) */
    /* building the tree */
    struct sq_plan__map anchors; /* name -> node; a later definition replaces an earlier one */
    struct ynode **stack;        /* children of the open collections, innermost last */
    size_t nstack, capstack;
    /* lookups over what the walk has compiled so far (hash maps: a plan with 100,000 names
     * loads in linear time) */
    struct sq_plan__map vars;       /* plan variable -> index */
    struct sq_plan__map slots;      /* the current scenario's extract variable -> index */
    struct sq_plan__map step_names; /* the current scenario's step name -> index */
    struct sq_plan__map scenario_names, all_step_names; /* for threshold tags */
    struct sq_plan__map feeder_names;                   /* feeder -> index */
    struct sq_plan__map *feeder_cols; /* per feeder: column -> index (nfeeder_cols built) */
    size_t nfeeder_cols;
    bool once;       /* loading setup: or teardown: (sq_plan__load_scenario takes no executor) */
    char group[256]; /* the group: path of the steps being loaded ("" outside any) */
    /* the tags: of the scenario and the groups around the steps being loaded, outer first */
    const struct ynode *tagnodes[SQ_PLAN_LOOP_DEPTH + 2];
    int ntagnodes;
    /* the target origin, for absolute step URLs */
    char scheme[8];
    char host[256];
    unsigned port;
    /* defaults */
    const struct ynode *def_headers;
    const struct ynode *root;
};

/* Builds the tree of L->src (checked as UTF-8 text first) into *root. 0, -SQ_EPARSE (L->err
 * says where and why) or -ENOMEM. */
int sq_plan__yaml_tree(struct ld *L, struct ynode **root);
/* Frees the tree, the arena and the loader's maps. */
void sq_plan__ld_dispose(struct ld *L);
/* Zeroed memory from the arena, aligned for any node (size 0 is fine); lives as long as the
 * tree. NULL when out of memory. */
void *sq_plan__alloc(struct ld *L, size_t size);
/* s[0, n) and a NUL, from the arena (unaligned: text only). */
char *sq_plan__strndup(struct ld *L, const char *s, size_t n);

/* ---- errors and the key path (yaml.c) ---- */

/* Appends to the key path; returns the length to restore with sq_plan__path_pop(). */
size_t sq_plan__path_push(struct ld *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends ".key" (or "key" at the top). */
size_t sq_plan__path_key(struct ld *L, const char *key);
void sq_plan__path_pop(struct ld *L, size_t mark);
/* Sets the load error at loc with the current key path; returns -SQ_EPARSE. */
int sq_plan__fail_at(struct ld *L, struct sq_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same at node n. */
int sq_plan__fail(struct ld *L, const struct ynode *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- typed access (yaml.c); each want/get fails at the node with what was expected ---- */

const char *sq_plan__kind_name(const struct ynode *n); /* "a mapping", "a list", "a scalar" */
/* The value (or the key node) of key in a mapping, NULL when it is not there. */
const struct ynode *sq_plan__get(const struct ynode *map, const char *key);
const struct ynode *sq_plan__get_key(const struct ynode *map, const char *key);
int sq_plan__want_map(struct ld *L, const struct ynode *n, const char *what);
/* Every key of map must be in allowed[0, n) (the root also takes x- extension keys); an
 * unknown key is reported with the closest allowed one, or the list. */
int sq_plan__check_keys(struct ld *L, const struct ynode *map, const char *const *allowed,
                        size_t n);
/* want_map (what), then check_keys. */
int sq_plan__want_keys(struct ld *L, const struct ynode *n, const char *what,
                       const char *const *allowed, size_t nallowed);
int sq_plan__want_scalar(struct ld *L, const struct ynode *n, const char *what);
/* A non-empty scalar without NUL bytes. */
int sq_plan__want_string(struct ld *L, const struct ynode *n, const char *what);
int sq_plan__get_duration(struct ld *L, const struct ynode *n, int64_t *out);
int sq_plan__get_u64(struct ld *L, const struct ynode *n, uint64_t min, uint64_t max,
                     uint64_t *out);
int sq_plan__get_number(struct ld *L, const struct ynode *n, double min, double *out);
int sq_plan__get_bool(struct ld *L, const struct ynode *n, bool *out);
bool sq_plan__is_true(const char *s);
bool sq_plan__is_false(const char *s);
bool sq_plan__is_null(const struct ynode *n);
bool sq_plan__is_ident(const char *s); /* [A-Za-z_][A-Za-z0-9_]* */
bool sq_plan__is_token(const char *s); /* an HTTP token (RFC 9110 5.6.2) */
/* A plain scalar the YAML 1.2 core schema reads as a number: its JSON text into out (64
 * bytes). Returns 1 (a number), 0 (not a number), -1 (inf or nan: no JSON for it). */
int sq_plan__yaml_number(const struct ynode *n, char *out, size_t outlen);

/* ---- templates and files (load.c) ---- */

/* What a template may name at one place of the plan. */
struct rctx {
    struct ld *L;
    size_t nvars;                      /* plan variables visible */
    const struct sq_plan_scenario *sc; /* NULL: no slots, no feeders */
    char msg[160];                     /* set when a name is unknown */
    bool have_msg;
};

/* The resolver sq_tmpl_compile() calls (ud: a struct rctx). */
void sq_plan__resolve_name(void *ud, const char *name, size_t len, struct sq_tmpl_ref *out);
/* Where byte off of scalar n's value is in the file (exact on one line without escapes). */
struct sq_loc sq_plan__value_loc(const struct ld *L, const struct ynode *n, size_t off);
/* Compiles src (from node n, whose value the offsets refer to when exact) into *out. */
int sq_plan__compile_tmpl(struct ld *L, const struct ynode *n, bool exact, const char *src,
                          size_t len, enum sq_tmpl_escape esc, struct rctx *R,
                          struct sq_tmpl **out);
int sq_plan__compile_scalar(struct ld *L, const struct ynode *n, enum sq_tmpl_escape esc,
                            struct rctx *R, struct sq_tmpl **out);
/* String n compiled as a template that only plan variables and $env.NAME fill (what: the
 * want_string message): 1 with its text at *s, *len, owned by *t (the caller frees it); 0 when
 * something else fills it (*t freed: the caller says why); or a negative code. */
int sq_plan__static_text(struct ld *L, const struct ynode *n, const char *what, struct sq_tmpl **t,
                         const char **s, size_t *len);
/* Compiles a scalar just to report its template errors at their exact place. */
int sq_plan__precheck(struct ld *L, const struct ynode *n, struct rctx *R);
/* Walks s: literal text through lit(), each "{{...}}" copied as it is. */
int sq_plan__split_tags(struct sq_buf *b, const char *s, size_t n,
                        int (*lit)(struct sq_buf *, const char *, size_t));
/* Appends s form-urlencoded. */
int sq_plan__lit_form(struct sq_buf *b, const char *s, size_t n);
/* Serialises a YAML value into JSON text whose strings may hold "{{...}}" tags. */
int sq_plan__to_json(struct ld *L, const struct ynode *n, struct rctx *R, struct sq_buf *b,
                     int depth);
/* n's path, relative to the plan's directory unless absolute, into out. A relative path of a
 * plan without a directory (sq_plan_load_text with no base) is refused at n. */
int sq_plan__relative_path(struct ld *L, const struct ynode *n, char *out, size_t outlen);
/* scheme://host[:port][/] with nothing after: the origin every step's url is relative to. */
bool sq_plan__parse_origin(const char *s, size_t len, char *scheme, char *host, size_t hostlen,
                           unsigned *port);

/* ---- scenarios (load_flow.c) and thresholds (threshold.c) ---- */

int sq_plan__load_scenario(struct ld *L, const struct ynode *key, const struct ynode *n,
                           struct sq_plan_scenario *sc);
int sq_plan__load_thresholds(struct ld *L, const struct ynode *n);
/* metrics: the plan's own metrics, NAME: counter | gauge | rate | trend (threshold.c). */
int sq_plan__load_metrics(struct ld *L, const struct ynode *n);
/* A step's metric: (one mapping or a list of them) into st->metrics (threshold.c). */
int sq_plan__load_step_metrics(struct ld *L, const struct ynode *n, struct sq_plan_step *st,
                               struct rctx *R);

/* ---- code the plan hands to (load_hooks.c) ---- */

/* script: FILE (resolved against the plan's directory; it must be readable). */
int sq_plan__load_script(struct ld *L, const struct ynode *n);
/* A step's before: / after: (key) value: a function name, kept in *fn with its place. */
int sq_plan__load_hook(struct ld *L, const struct ynode *n, const char *key, char **fn,
                       struct sq_loc *loc);
/* auth: { oauth2: {...} } into L->p->oauth2. */
int sq_plan__load_auth(struct ld *L, const struct ynode *n);
void sq_plan__oauth2_free(struct sq_plan_oauth2 *o);

#endif
