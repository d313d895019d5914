/* plan/load_flow.c - the plan loader's scenarios: executors, steps, requests, extracts and
 * checks (see load.c for the whole and load_internal.h for the tree and its typed access).
 *
 * A scenario's executor keys are checked against a table of what each executor takes and needs,
 * then sq_exec_prepare() validates the numbers and its complaint is mapped back onto the key it
 * is about. Each step compiles its request (url, headers with the defaults, one body), its
 * extractors into the scenario's variable slots and its checks.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/file.h"
#include "base/parse.h"
#include "base/text.h"
#include "plan/load_internal.h"

/* How many groups a group path names ("": 0, "a": 1, "a::b": 2). */
static uint32_t group_depth(const char *path)
{
    uint32_t n = path[0] != '\0';
    for (const char *p = path; (p = strstr(p, "::")) != NULL; p += 2)
        n++;
    return n;
}

#define MAX_FILE_BODY  (64u << 20) /* a `file:` body */
#define MAX_VUS        1000000
#define MAX_ITERATIONS 1000000000000ull

/* ------------------------------------------------------------------------------------------ */
/* Executors                                                                                  */

/* An executor's keys, in one list: exec_keys[I_X] is key X's name and F(X) its bit in
 * exec_fields' masks. */
#define EXEC_KEYS(X)                                                                               \
    X(VUS, "vus")                                                                                  \
    X(DURATION, "duration")                                                                        \
    X(ITERATIONS, "iterations")                                                                    \
    X(RATE, "rate")                                                                                \
    X(TIME_UNIT, "timeUnit")                                                                       \
    X(START_RATE, "startRate")                                                                     \
    X(START_VUS, "startVUs")                                                                       \
    X(PREALLOC, "preAllocatedVUs")                                                                 \
    X(MAX_VUS, "maxVUs")                                                                           \
    X(STAGES, "stages")                                                                            \
    X(MAX_DURATION, "maxDuration")                                                                 \
    X(PACING, "pacing")                                                                            \
    X(PRECISION, "pacingPrecision")

enum {
#define EXEC_INDEX(name, key) I_##name,
    EXEC_KEYS(EXEC_INDEX)
#undef EXEC_INDEX
};
#define F(name) (1u << I_##name)

static const char *const exec_keys[] = {
#define EXEC_NAME(name, key) key,
    EXEC_KEYS(EXEC_NAME)
#undef EXEC_NAME
};

static const struct {
    unsigned allowed, required;
} exec_fields[SQ_EXEC__COUNT] = {
    [SQ_EXEC_CONSTANT_VUS] = {F(VUS) | F(DURATION) | F(PACING), F(DURATION)},
    [SQ_EXEC_RAMPING_VUS] = {F(START_VUS) | F(STAGES) | F(PACING), F(STAGES)},
    [SQ_EXEC_CONSTANT_ARRIVAL_RATE] = {F(RATE) | F(TIME_UNIT) | F(DURATION) | F(PREALLOC) |
                                           F(MAX_VUS) | F(PRECISION),
                                       F(RATE) | F(DURATION) | F(PREALLOC)},
    [SQ_EXEC_RAMPING_ARRIVAL_RATE] = {F(START_RATE) | F(TIME_UNIT) | F(STAGES) | F(PREALLOC) |
                                          F(MAX_VUS) | F(PRECISION),
                                      F(STAGES) | F(PREALLOC)},
    [SQ_EXEC_PER_VU_ITERATIONS] = {F(VUS) | F(ITERATIONS) | F(MAX_DURATION) | F(PACING), 0},
    [SQ_EXEC_SHARED_ITERATIONS] = {F(VUS) | F(ITERATIONS) | F(MAX_DURATION) | F(PACING), 0},
};

static const char *const scenario_common[] = {"executor", "flow",   "startTime", "gracefulStop",
                                              "cookies",  "locals", "protocol",  "batchConnections",
                                              "tags"};

static int load_stages(struct ld *L, const struct ynode *n, struct sq_exec *e, bool vus)
{
    int rc;
    if (n->kind == Y_SCALAR) {
        const char *why;
        if (sq_exec_parse_stages(e, n->s, &why) < 0)
            return sq_plan__fail(L, n, "%s", why);
        return 0;
    }
    if (n->kind != Y_SEQ)
        return sq_plan__fail(L, n, "expected a list of { duration, target }, got %s",
                             sq_plan__kind_name(n));
    if (n->nitems == 0)
        return sq_plan__fail(L, n, "at least one stage is needed");
    if (n->nitems > SQ_EXEC_MAX_STAGES)
        return sq_plan__fail(L, n->items[SQ_EXEC_MAX_STAGES], "at most %d stages",
                             SQ_EXEC_MAX_STAGES);
    static const char *const keys[] = {"duration", "target"};
    for (size_t i = 0; i < n->nitems; i++) {
        const struct ynode *s = n->items[i];
        size_t mark = sq_plan__path_push(L, "[%zu]", i);
        if ((rc = sq_plan__want_keys(L, s, "a stage like { duration: 30s, target: 100 }", keys,
                                     2)) < 0)
            return rc;
        const struct ynode *d = sq_plan__get(s, "duration"), *t = sq_plan__get(s, "target");
        if (!d || !t)
            return sq_plan__fail(L, s, "missing key '%s' (a stage is { duration, target })",
                                 d ? "target" : "duration");
        size_t m2 = sq_plan__path_key(L, "duration");
        if ((rc = sq_plan__get_duration(L, d, &e->stages[i].duration_ns)) < 0)
            return rc;
        sq_plan__path_pop(L, m2);
        m2 = sq_plan__path_key(L, "target");
        if (vus) {
            uint64_t v;
            if ((rc = sq_plan__get_u64(L, t, 0, MAX_VUS, &v)) < 0)
                return rc;
            e->stages[i].target = (double)v;
        } else if ((rc = sq_plan__get_number(L, t, 0, &e->stages[i].target)) < 0) {
            return rc;
        }
        sq_plan__path_pop(L, m2);
        sq_plan__path_pop(L, mark);
    }
    e->nstages = (uint32_t)n->nitems;
    return 0;
}

/* Maps sq_exec_prepare's complaint ("duration: must be positive") onto the plan key it is
 * about, in the plan's spelling. */
static int exec_error(struct ld *L, const struct ynode *sc_key, const struct ynode *sc,
                      const struct sq_exec *e, const char *why)
{
    static const struct {
        const char *prefix, *key;
    } map[] = {
        {"max-in-flight", "maxVUs"},
        {"max-vus", "maxVUs"},
        {"pacing-precision", "pacingPrecision"},
        {"preAllocatedVUs", "preAllocatedVUs"},
        {"timeUnit", "timeUnit"},
        {"startRate", "startRate"},
        {"vus", "vus"},
        {"duration", "duration"},
        {"rate", "rate"},
        {"stages", "stages"},
        {"iterations", "iterations"},
        {"pacing", "pacing"},
    };
    const char *key = NULL, *rest = why;
    for (size_t i = 0; i < SQ_ARRAY_LEN(map); i++) {
        size_t pl = strlen(map[i].prefix);
        if (strncmp(why, map[i].prefix, pl) == 0) {
            key = map[i].key;
            rest = why + pl;
            break;
        }
    }
    if (key && !strcmp(key, "vus") && sq_exec_is_open(e))
        key = "preAllocatedVUs";
    const struct ynode *at = key ? sq_plan__get(sc, key) : NULL;
    if (!key)
        return sq_plan__fail(L, sc_key, "%s", why);
    if (!strncmp(rest, " (connections)", 14))
        rest += 14;
    if (*rest == ':')
        rest++;
    while (*rest == ' ')
        rest++;
    sq_plan__path_key(L, key);
    if (!strcmp(key, "maxVUs"))
        rest = "must be at least preAllocatedVUs";
    return sq_plan__fail(L, at ? at : sc_key, "%s", rest);
}

static int load_executor(struct ld *L, const struct ynode *key, const struct ynode *n,
                         struct sq_plan_scenario *sc)
{
    int rc;
    const struct ynode *ex = sq_plan__get(n, "executor");
    if (!ex)
        return sq_plan__fail(L, key,
                             "missing key 'executor' (one of constant-vus, ramping-vus, "
                             "constant-arrival-rate, ramping-arrival-rate, per-vu-iterations, "
                             "shared-iterations)");
    size_t mark = sq_plan__path_key(L, "executor");
    if ((rc = sq_plan__want_string(L, ex, "an executor name")) < 0)
        return rc;
    int kind = sq_exec_kind_from_name(ex->s);
    if (kind < 0) {
        struct sq_suggest s;
        char tail[96];
        sq_suggest_init(&s, ex->s, ex->len);
        for (int i = 0; i < SQ_EXEC__COUNT; i++)
            sq_suggest_try(&s, sq_exec_name((enum sq_exec_kind)i));
        if (s.best)
            return sq_plan__fail(L, ex, "unknown executor '%.60s'%s", ex->s,
                                 sq_suggest_tail(&s, tail, sizeof(tail)));
        return sq_plan__fail(L, ex,
                             "unknown executor '%.60s' (expected constant-vus, ramping-vus, "
                             "constant-arrival-rate, ramping-arrival-rate, per-vu-iterations or "
                             "shared-iterations)",
                             ex->s);
    }
    sq_plan__path_pop(L, mark);
    unsigned allowed = exec_fields[kind].allowed, required = exec_fields[kind].required;

    /* keys: the common ones plus the executor's own */
    const char *keys[SQ_ARRAY_LEN(scenario_common) + SQ_ARRAY_LEN(exec_keys)];
    size_t nkeys = 0;
    for (size_t i = 0; i < SQ_ARRAY_LEN(scenario_common); i++)
        keys[nkeys++] = scenario_common[i];
    for (size_t i = 0; i < SQ_ARRAY_LEN(exec_keys); i++)
        if (allowed & (1u << i))
            keys[nkeys++] = exec_keys[i];
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key;
        for (size_t j = 0; j < SQ_ARRAY_LEN(exec_keys); j++) {
            if (strcmp(k->s, exec_keys[j]) == 0 && !(allowed & (1u << j))) {
                char list[160] = "";
                size_t used = 0;
                for (size_t x = 0; x < SQ_ARRAY_LEN(exec_keys) && used < sizeof(list); x++)
                    if (allowed & (1u << x))
                        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
                                                 used ? ", " : "", exec_keys[x]);
                return sq_plan__fail(L, k, "'%s' does not apply to %s (it takes %s)", k->s,
                                     sq_exec_name((enum sq_exec_kind)kind), list);
            }
        }
    }
    if ((rc = sq_plan__check_keys(L, n, keys, nkeys)) < 0)
        return rc;
    for (size_t j = 0; j < SQ_ARRAY_LEN(exec_keys); j++)
        if ((required & (1u << j)) && !sq_plan__get(n, exec_keys[j]))
            return sq_plan__fail(L, key, "missing key '%s' (%s needs it)", exec_keys[j],
                                 sq_exec_name((enum sq_exec_kind)kind));

    struct sq_exec *e = &sc->exec;
    memset(e, 0, sizeof(*e));
    e->kind = (enum sq_exec_kind)kind;
    e->vus = 1;
    e->start_vus = 1;
    e->iterations = 1;
    e->graceful_stop_ns = 30 * SQ_NS_PER_S; /* k6's default */
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        const char *name = k->s;
        uint64_t u;
        size_t m2 = sq_plan__path_key(L, name);
        rc = 0;
        if (!strcmp(name, "vus") || !strcmp(name, "preAllocatedVUs")) {
            if ((rc = sq_plan__get_u64(L, v, 1, MAX_VUS, &u)) == 0)
                e->vus = (uint32_t)u;
        } else if (!strcmp(name, "startVUs")) {
            if ((rc = sq_plan__get_u64(L, v, 0, MAX_VUS, &u)) == 0)
                e->start_vus = (uint32_t)u;
        } else if (!strcmp(name, "maxVUs")) {
            /* k6's maxVUs: the pool grows up to it, and it caps what is in flight */
            if ((rc = sq_plan__get_u64(L, v, 1, MAX_VUS, &u)) == 0) {
                e->max_in_flight = u;
                e->max_vus = (uint32_t)u;
            }
        } else if (!strcmp(name, "pacingPrecision")) {
            rc = sq_plan__want_string(L, v, "high, normal, off, coarse or coarse:D");
            int64_t win = 0;
            int p = rc == 0 ? sq_pacing_parse(v->s, &win) : 0;
            if (rc == 0 && p == -2)
                rc = sq_plan__fail(L, v, "'%s': the window of coarse:D is a duration, 1ms..100ms",
                                   v->s);
            else if (rc == 0 && p < 0)
                rc = sq_plan__fail(
                    L, v, "'%s' is not a pacing precision: high, normal, off or coarse", v->s);
            if (rc == 0) {
                e->precision = p;
                e->window_ns = win;
            }
        } else if (!strcmp(name, "iterations")) {
            if ((rc = sq_plan__get_u64(L, v, 1, MAX_ITERATIONS, &u)) == 0)
                e->iterations = u;
        } else if (!strcmp(name, "duration")) {
            rc = sq_plan__get_duration(L, v, &e->duration_ns);
        } else if (!strcmp(name, "maxDuration")) {
            rc = sq_plan__get_duration(L, v, &e->max_duration_ns);
        } else if (!strcmp(name, "gracefulStop")) {
            rc = sq_plan__get_duration(L, v, &e->graceful_stop_ns);
        } else if (!strcmp(name, "pacing")) {
            rc = sq_plan__get_duration(L, v, &e->pacing_ns);
        } else if (!strcmp(name, "timeUnit")) {
            rc = sq_plan__get_duration(L, v, &e->time_unit_ns);
            if (rc == 0 && e->time_unit_ns <= 0)
                rc = sq_plan__fail(L, v, "timeUnit must be longer than 0");
        } else if (!strcmp(name, "startTime")) {
            rc = sq_plan__get_duration(L, v, &sc->start_ns);
        } else if (!strcmp(name, "rate")) {
            rc = sq_plan__get_number(L, v, 0, &e->rate);
        } else if (!strcmp(name, "startRate")) {
            rc = sq_plan__get_number(L, v, 0, &e->start_rate);
        } else if (!strcmp(name, "stages")) {
            rc = load_stages(L, v, e, kind == SQ_EXEC_RAMPING_VUS);
        } else if (!strcmp(name, "cookies")) {
            rc = sq_plan__get_bool(L, v, &sc->cookies);
        } else if (!strcmp(name, "protocol")) {
            rc = sq_plan__want_string(L, v, "a protocol: http/1.1, h2 or h3");
            if (rc == 0 && !strcmp(v->s, "h2"))
                sc->h2 = true;
            else if (rc == 0 && !strcmp(v->s, "h3"))
#ifdef SQ_HAVE_H3
                sc->h2 = sc->h3 = true; /* the HTTP/2 requests, over QUIC (engine/h3drv.c) */
#else
                rc = sq_plan__fail(L, v,
                                   "protocol: h3: this build of squall has no HTTP/3 (it was "
                                   "built without ngtcp2, nghttp3 and GnuTLS; scripts/deps.sh "
                                   "installs them)");
#endif
            else if (rc == 0 && strcmp(v->s, "http/1.1") != 0)
                rc = sq_plan__fail(L, v, "'%s' is not a protocol: http/1.1 (the default), h2 or h3",
                                   v->s);
        }
        if (rc < 0)
            return rc;
        sq_plan__path_pop(L, m2);
    }
    if (sq_exec_is_open(e)) {
        /* keep the schedule's arithmetic inside 64 bits: at most 10^15 arrivals */
        double unit = (double)(e->time_unit_ns ? e->time_unit_ns : SQ_NS_PER_S), total = 0;
        if (kind == SQ_EXEC_CONSTANT_ARRIVAL_RATE) {
            total = e->rate * (double)e->duration_ns / unit;
        } else {
            double from = e->start_rate;
            for (uint32_t i = 0; i < e->nstages; i++) {
                total += (from + e->stages[i].target) / 2 * (double)e->stages[i].duration_ns / unit;
                from = e->stages[i].target;
            }
        }
        if (!(total <= 1e15))
            return sq_plan__fail(
                L, key, "the schedule has %.3g iterations (at most 1e15: lower the rate)", total);
    }
    const char *why = NULL;
    if (sq_exec_prepare(e, &why) < 0)
        return exec_error(L, key, n, e, why ? why : "invalid executor settings");
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Steps                                                                                      */

/* Grows an array of n elements when n is 0 or a power of two: amortised linear appends without
 * a capacity field. */
static void *grow(void *v, size_t n, size_t size)
{
    if (n & (n - 1))
        return v; /* room left */
    size_t cap = n ? 2 * n : 1;
    if (cap > SIZE_MAX / size)
        return NULL;
    return realloc(v, cap * size);
}

/* The slot of an extract variable of the scenario being loaded, added when new. */
static int add_slot(struct ld *L, struct sq_plan_scenario *sc, const char *name, uint32_t *index)
{
    uintptr_t i;
    if (sq_plan__map_get(&L->slots, name, strlen(name), &i)) {
        *index = (uint32_t)i;
        return 0;
    }
    char **nv = grow(sc->vars, sc->nvars, sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    sc->vars = nv;
    sc->vars[sc->nvars] = strdup(name);
    if (!sc->vars[sc->nvars])
        return -ENOMEM;
    *index = sc->nvars++;
    return sq_plan__map_add(&L->slots, sc->vars[*index], strlen(name), *index, NULL) < 0 ? -ENOMEM
                                                                                         : 0;
}

/* A scenario's locals: [a, b]: per-VU variables that hooks set (ctx:set), slots like extracted
 * values. */
/* A slot named by key k (a local, or an extract's variable): an identifier that no plan
 * variable holds; why_not ends the message when one does. */
static int add_named_slot(struct ld *L, struct sq_plan_scenario *sc, const struct ynode *k,
                          const char *why_not)
{
    if (!sq_plan__is_ident(k->s))
        return sq_plan__fail(L, k,
                             "'%.60s' is not a variable name (letters, digits and '_', not "
                             "starting with a digit)",
                             k->s);
    if (sq_plan__map_get(&L->vars, k->s, strlen(k->s), NULL))
        return sq_plan__fail(L, k, "'%s' is already a plan variable (vars)%s", k->s, why_not);
    uint32_t idx;
    return add_slot(L, sc, k->s, &idx);
}

static int collect_locals(struct ld *L, const struct ynode *n, struct sq_plan_scenario *sc)
{
    size_t mark = sq_plan__path_key(L, "locals");
    if (n->kind != Y_SEQ)
        return sq_plan__fail(L, n, "expected a list of variable names, got %s",
                             sq_plan__kind_name(n));
    for (size_t i = 0; i < n->nitems; i++) {
        const struct ynode *k = n->items[i];
        int rc = sq_plan__want_string(L, k, "a variable name");
        if (rc < 0)
            return rc;
        if ((rc = add_named_slot(L, sc, k, "")) < 0)
            return rc;
    }
    sq_plan__path_pop(L, mark);
    return 0;
}

/* First pass over a flow: every extract key is a slot, in order of first appearance. */
static int collect_slots(struct ld *L, const struct ynode *flow, struct sq_plan_scenario *sc)
{
    int rc;
    for (size_t i = 0; i < flow->nitems; i++) {
        const struct ynode *st = flow->items[i];
        if (st->kind != Y_MAP)
            continue; /* reported by the second pass */
        const struct ynode *rp = sq_plan__get(st, "repeat");
        const struct ynode *inner = rp && rp->kind == Y_MAP ? sq_plan__get(rp, "steps") : NULL;
        if (sq_plan__get(st, "group"))
            inner = sq_plan__get(st, "steps");
        if (sq_plan__get(st, "batch"))
            inner = sq_plan__get(st, "batch");
        if (inner && inner->kind == Y_SEQ) {
            size_t mark = sq_plan__path_push(L, ".flow[%zu].repeat", i);
            if ((rc = collect_slots(L, inner, sc)) < 0)
                return rc;
            sq_plan__path_pop(L, mark);
            continue;
        }
        const struct ynode *ex = sq_plan__get(st, "extract");
        if (!ex || ex->kind != Y_MAP)
            continue;
        size_t mark = sq_plan__path_push(L, ".flow[%zu].extract", i);
        for (size_t j = 0; j < ex->npairs; j++) {
            const struct ynode *k = ex->pairs[j].key;
            if ((rc = add_named_slot(L, sc, k, ": extract into another name")) < 0)
                return rc;
        }
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

/* Compiles the headers of mapping h into r. names maps the headers r has so far (their YAML
 * keys, ignoring case) to their index: a step's header replaces the default of the same name in
 * its place; from_defaults, every header is new. */
static int load_headers(struct ld *L, const struct ynode *h, struct sq_plan_request *r,
                        struct rctx *R, bool from_defaults, struct sq_plan__map *names)
{
    int rc;
    struct sq_plan__map own; /* h's names so far -> their pair: names differing only in case
                                are one header */
    sq_plan__map_init(&own, true);
    for (size_t i = 0; i < h->npairs; i++) {
        const struct ynode *k = h->pairs[i].key, *v = h->pairs[i].val;
        rc = 0;
        if (!sq_plan__is_token(k->s)) {
            rc = sq_plan__fail(
                L, k, "'%.60s' is not a header name (letters, digits and -!#$%%&'*+.^_`|~)", k->s);
            break;
        }
        size_t mark = sq_plan__path_key(L, k->s);
        if ((rc = sq_plan__want_scalar(L, v, "a header value")) < 0)
            break;
        if (strpbrk(v->s, "\r\n") || strlen(v->s) != v->len) {
            rc = sq_plan__fail(L, v, "a header value cannot contain line breaks or NUL bytes");
            break;
        }
        uintptr_t j = 0;
        size_t kl = strlen(k->s);
        if ((rc = sq_plan__map_add(&own, k->s, kl, i, &j)) < 0)
            break;
        if (rc == 0) {
            const struct ynode *first = h->pairs[j].key;
            rc = sq_plan__fail(L, k, "header '%s' is set twice (first at line %u)", k->s,
                               first->loc.line);
            break;
        }
        uintptr_t at = 0;
        bool replace = !from_defaults && sq_plan__map_get(names, k->s, kl, &at);
        if (!replace && r->nheaders == SQ_PLAN_MAX_HEADERS) {
            rc = sq_plan__fail(L, k,
                               "more than %d headers in one request (the defaults' included), "
                               "the limit for a request (see docs/plans.md, Limits)",
                               SQ_PLAN_MAX_HEADERS);
            break;
        }
        struct sq_tmpl *t = NULL;
        if ((rc = sq_plan__compile_scalar(L, v, SQ_TMPL_ESC_NONE, R, &t)) < 0)
            break;
        if (replace) { /* the step's header replaces the default's, in its place */
            char *nn = strdup(k->s);
            if (!nn) {
                sq_tmpl_free(t);
                rc = -ENOMEM;
                break;
            }
            free(r->headers[at].name);
            r->headers[at].name = nn;
            sq_tmpl_free(r->headers[at].value);
            r->headers[at].value = t;
        } else {
            struct sq_plan_header *nh = &r->headers[r->nheaders];
            nh->name = strdup(k->s);
            nh->value = t;
            r->nheaders++;
            if (!nh->name || sq_plan__map_add(names, k->s, kl, r->nheaders - 1, NULL) < 0) {
                rc = -ENOMEM;
                break;
            }
        }
        sq_plan__path_pop(L, mark);
        rc = 0;
    }
    sq_plan__map_dispose(&own);
    return rc;
}

/* url: "/path?q" (a template) or an absolute URL on the target's origin. */
static int load_url(struct ld *L, const struct ynode *n, struct sq_plan_request *r, struct rctx *R)
{
    int rc = sq_plan__want_string(L, n, "a path like /items or a URL on the target");
    if (rc < 0)
        return rc;
    r->url_src = strdup(n->s);
    if (!r->url_src)
        return -ENOMEM;
    const char *s = n->s;
    size_t skip = 0;
    if (s[0] != '/') {
        const char *sep = strstr(s, "://");
        if (!sep || (strncasecmp(s, "http://", 7) && strncasecmp(s, "https://", 8)))
            return sq_plan__fail(L, n,
                                 "expected a path starting with '/' or an http(s):// URL on the "
                                 "target, got '%.60s'",
                                 s);
        const char *end = sep + 3;
        while (*end && *end != '/' && *end != '?')
            end++;
        char scheme[8], host[256];
        unsigned port;
        size_t olen = (size_t)(end - s);
        if (memmem(s, olen, "{{", 2))
            return sq_plan__fail(L, n,
                                 "the scheme, host and port of a url are fixed text (templates go "
                                 "in the path)");
        size_t blank = sq_blank_at(s, olen);
        if (blank < olen)
            return sq_plan__fail_at(L, sq_plan__value_loc(L, n, blank),
                                    "a url cannot contain spaces or control characters (write "
                                    "%%20)");
        if (!sq_plan__parse_origin(s, olen, scheme, host, sizeof(host), &port))
            return sq_plan__fail(L, n, "malformed URL '%.60s'", s);
        if (strcmp(scheme, L->scheme) || strcmp(host, L->host) || port != L->port)
            return sq_plan__fail(
                L, n,
                "url '%.*s' is not on the target %s (a plan talks to one origin: use a "
                "path like /x)",
                (int)(olen > 60 ? 60 : olen), s, L->p->target);
        skip = olen;
    }
    const char *path = s + skip;
    size_t plen = n->len - skip;
    char buf[8];
    struct sq_buf tmp = {0};
    if (plen == 0 || path[0] == '?') { /* "http://h:1" or "http://h:1?x" */
        buf[0] = '/';
        if ((rc = sq_buf_append(&tmp, buf, 1)) < 0 || (rc = sq_buf_append(&tmp, path, plen)) < 0) {
            sq_buf_dispose(&tmp);
            return rc;
        }
        path = tmp.p;
        plen = tmp.len;
    }
    bool in_tag = false; /* blanks inside {{ }} are fine */
    for (size_t i = 0; i < plen; i++) {
        if (i >= 2) { /* a "{{" or "}}" that ends before i - 1 opens or closes a tag */
            if (path[i - 2] == '{' && path[i - 1] == '{')
                in_tag = true;
            else if (path[i - 2] == '}' && path[i - 1] == '}')
                in_tag = false;
        }
        if ((unsigned char)path[i] <= 0x20 || path[i] == 0x7f) {
            if (!in_tag) {
                sq_buf_dispose(&tmp);
                return sq_plan__fail_at(
                    L, sq_plan__value_loc(L, n, skip + i),
                    "a url cannot contain spaces or control characters (write %%20)");
            }
        }
    }
    if (tmp.p) {
        rc = sq_plan__compile_tmpl(L, n, false, path, plen, SQ_TMPL_ESC_NONE, R, &r->url);
    } else {
        /* offsets in the template are offsets in the value, shifted by the origin */
        struct sq_tmpl_error te = {0};
        R->have_msg = false;
        rc = sq_tmpl_compile(path, plen, SQ_TMPL_ESC_NONE, sq_plan__resolve_name, R, &r->url, &te);
        if (rc < 0 && rc != -ENOMEM)
            rc = sq_plan__fail_at(L, sq_plan__value_loc(L, n, skip + te.offset), "%s",
                                  R->have_msg ? R->msg : te.msg);
    }
    sq_buf_dispose(&tmp);
    return rc;
}

static int load_body(struct ld *L, const struct ynode *req, struct sq_plan_request *r,
                     struct rctx *R)
{
    static const char *const kinds[] = {"body", "json", "form", "file"};
    const struct ynode *which = NULL, *wkey = NULL;
    int rc;
    for (size_t i = 0; i < SQ_ARRAY_LEN(kinds); i++) {
        const struct ynode *v = sq_plan__get(req, kinds[i]);
        if (!v)
            continue;
        if (which)
            return sq_plan__fail(L, sq_plan__get_key(req, kinds[i]),
                                 "a request has one body: '%s' and '%s' are both set", wkey->s,
                                 kinds[i]);
        which = v;
        wkey = sq_plan__get_key(req, kinds[i]);
    }
    if (!which)
        return 0;
    size_t mark = sq_plan__path_key(L, wkey->s);
    if (!strcmp(wkey->s, "body")) {
        if ((rc = sq_plan__want_scalar(L, which, "a text body")) < 0)
            return rc;
        r->body_kind = SQ_BODY_TEXT;
        rc = sq_plan__compile_scalar(L, which, SQ_TMPL_ESC_NONE, R, &r->body);
    } else if (!strcmp(wkey->s, "json")) {
        if (which->kind == Y_SCALAR)
            return sq_plan__fail(
                L, which,
                "expected a mapping or a list (the JSON document); for JSON text use "
                "body: with a Content-Type header");
        struct sq_buf b = {0};
        rc = sq_plan__to_json(L, which, R, &b, 0);
        if (rc == 0) {
            r->body_kind = SQ_BODY_JSON;
            r->content_type = "application/json";
            rc = sq_plan__compile_tmpl(L, which, false, b.p, b.len, SQ_TMPL_ESC_JSON, R, &r->body);
        }
        sq_buf_dispose(&b);
    } else if (!strcmp(wkey->s, "form")) {
        if ((rc = sq_plan__want_map(L, which, "a mapping of form fields")) < 0)
            return rc;
        struct sq_buf b = {0};
        for (size_t i = 0; rc == 0 && i < which->npairs; i++) {
            const struct ynode *k = which->pairs[i].key, *v = which->pairs[i].val;
            size_t m2 = sq_plan__path_key(L, k->s);
            rc = sq_plan__want_scalar(L, v, "a form value");
            if (rc == 0)
                rc = sq_plan__precheck(L, v, R);
            if (rc == 0 && i)
                rc = sq_buf_append(&b, "&", 1);
            if (rc == 0)
                rc = sq_plan__lit_form(&b, k->s, k->len);
            if (rc == 0)
                rc = sq_buf_append(&b, "=", 1);
            if (rc == 0 && !sq_plan__is_null(v))
                rc = sq_plan__split_tags(&b, v->s, v->len, sq_plan__lit_form);
            if (rc == 0)
                sq_plan__path_pop(L, m2);
        }
        if (rc == 0) {
            r->body_kind = SQ_BODY_FORM;
            r->content_type = "application/x-www-form-urlencoded";
            rc = sq_plan__compile_tmpl(L, which, false, b.p ? b.p : "", b.len, SQ_TMPL_ESC_FORM, R,
                                       &r->body);
        }
        sq_buf_dispose(&b);
    } else {
        if ((rc = sq_plan__want_string(L, which, "a file path")) < 0)
            return rc;
        char full[4096];
        if ((rc = sq_plan__relative_path(L, which, full, sizeof(full))) < 0)
            return rc;
        char *data = NULL;
        size_t len = 0;
        rc = sq_file_read(full, MAX_FILE_BODY, &data, &len);
        if (rc == -SQ_ETOOBIG)
            return sq_plan__fail(L, which, "%s: larger than %u MiB, the limit for a file body",
                                 full, MAX_FILE_BODY >> 20);
        if (rc == -EISDIR)
            return sq_plan__fail(L, which, "%s: is a directory, not a file", full);
        if (rc < 0 && rc != -ENOMEM)
            return sq_plan__fail(L, which, "%s: %s", full, sq_strerror(rc));
        if (rc == 0) {
            r->body_kind = SQ_BODY_FILE;
            r->body_file = strdup(which->s);
            rc = sq_tmpl_new_literal(data, len, &r->body);
            if (rc == 0 && !r->body_file)
                rc = -ENOMEM;
        }
        free(data);
    }
    if (rc == 0)
        sq_plan__path_pop(L, mark);
    return rc;
}

/* A step's own headers (publish, ws connect: the defaults are for requests), into r->headers. */
static int load_own_headers(struct ld *L, const struct ynode *n, struct sq_plan_request *r,
                            struct rctx *R)
{
    const struct ynode *h = sq_plan__get(n, "headers");
    r->headers = calloc(h && h->kind == Y_MAP && h->npairs ? h->npairs : 1, sizeof(*r->headers));
    if (!r->headers)
        return -ENOMEM;
    if (!h)
        return 0;
    size_t mark = sq_plan__path_key(L, "headers");
    int rc = sq_plan__want_map(L, h, "a mapping of header names to values");
    if (rc < 0)
        return rc;
    struct sq_plan__map names;
    sq_plan__map_init(&names, true);
    rc = load_headers(L, h, r, R, false, &names);
    sq_plan__map_dispose(&names);
    if (rc < 0)
        return rc;
    sq_plan__path_pop(L, mark);
    return 0;
}

/* A step's timeout, or the plan's default. */
static int load_timeout(struct ld *L, const struct ynode *n, struct sq_plan_request *r)
{
    r->timeout_ns = L->p->default_timeout_ns;
    r->max_redirects = L->p->default_max_redirects;
    const struct ynode *v = sq_plan__get(n, "redirects");
    if (v) {
        size_t mark = sq_plan__path_key(L, "redirects");
        uint64_t m;
        int rc = sq_plan__get_u64(L, v, 0, SQ_PLAN_REDIRECTS_CAP, &m);
        if (rc < 0)
            return rc;
        r->max_redirects = (uint32_t)m;
        r->redirects_set = true;
        sq_plan__path_pop(L, mark);
    }
    v = sq_plan__get(n, "timeout");
    if (!v)
        return 0;
    size_t mark = sq_plan__path_key(L, "timeout");
    int rc = sq_plan__get_duration(L, v, &r->timeout_ns);
    if (rc < 0)
        return rc;
    sq_plan__path_pop(L, mark);
    return 0;
}

static int load_request(struct ld *L, const struct ynode *n, struct sq_plan_request *r,
                        struct rctx *R)
{
    static const char *const keys[] = {"method", "url",  "headers", "body",     "json",
                                       "form",   "file", "timeout", "redirects"};
    int rc = sq_plan__want_keys(L, n, "a mapping (method, url, headers, body...)", keys,
                                SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    const struct ynode *v = sq_plan__get(n, "method");
    size_t mark;
    if (v) {
        mark = sq_plan__path_key(L, "method");
        if ((rc = sq_plan__want_string(L, v, "an HTTP method like GET or POST")) < 0)
            return rc;
        bool upper = true;
        for (const char *c = v->s; *c; c++)
            upper = upper && ((*c >= 'A' && *c <= 'Z') || *c == '-' || *c == '_');
        if (!upper) {
            char up[32];
            size_t i = 0;
            for (; i + 1 < sizeof(up) && v->s[i]; i++)
                up[i] = (char)toupper((unsigned char)v->s[i]);
            up[i] = '\0';
            if (sq_plan__is_token(v->s))
                return sq_plan__fail(
                    L, v, "expected an upper-case method, got '%.30s' (did you mean '%s'?)", v->s,
                    up);
            return sq_plan__fail(L, v, "expected an HTTP method like GET or POST, got '%.30s'",
                                 v->s);
        }
        r->method = strdup(v->s);
        sq_plan__path_pop(L, mark);
    } else {
        r->method = strdup("GET");
    }
    if (!r->method)
        return -ENOMEM;
    v = sq_plan__get(n, "url");
    if (!v)
        return sq_plan__fail(L, n,
                             "missing key 'url' (a path like /items, resolved against the target)");
    mark = sq_plan__path_key(L, "url");
    if ((rc = load_url(L, v, r, R)) < 0)
        return rc;
    sq_plan__path_pop(L, mark);

    size_t nh = (L->def_headers ? L->def_headers->npairs : 0);
    const struct ynode *h = sq_plan__get(n, "headers");
    if (h) {
        mark = sq_plan__path_key(L, "headers");
        if ((rc = sq_plan__want_map(L, h, "a mapping of header names to values")) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
        nh += h->npairs;
    }
    r->headers = calloc(nh ? nh : 1, sizeof(*r->headers));
    if (!r->headers)
        return -ENOMEM;
    struct sq_plan__map names; /* the request's header names so far -> index */
    sq_plan__map_init(&names, true);
    rc = 0;
    if (L->def_headers) {
        /* the defaults compile against this scenario's names; errors point into defaults */
        char saved[sizeof(L->path)];
        size_t saved_len = L->path_len;
        memcpy(saved, L->path, sizeof(saved));
        sq_plan__path_pop(L, 0);
        sq_plan__path_key(L, "defaults.headers");
        rc = load_headers(L, L->def_headers, r, R, true, &names);
        if (rc == 0) {
            memcpy(L->path, saved, sizeof(saved));
            L->path_len = saved_len;
        }
    }
    if (rc == 0 && h) {
        mark = sq_plan__path_key(L, "headers");
        if ((rc = load_headers(L, h, r, R, false, &names)) == 0)
            sq_plan__path_pop(L, mark);
    }
    sq_plan__map_dispose(&names);
    if (rc < 0)
        return rc;
    if ((rc = load_body(L, n, r, R)) < 0)
        return rc;
    if ((rc = load_timeout(L, n, r)) < 0)
        return rc;
    return 0;
}

static int load_extract(struct ld *L, const struct ynode *n, struct sq_plan_step *st,
                        struct sq_plan_scenario *sc)
{
    int rc = sq_plan__want_map(L, n, "a mapping of variable names to { json | regex | header }");
    if (rc < 0)
        return rc;
    st->extract = calloc(n->npairs ? n->npairs : 1, sizeof(*st->extract));
    st->extract_src = calloc(n->npairs ? n->npairs : 1, sizeof(*st->extract_src));
    if (!st->extract || !st->extract_src)
        return -ENOMEM;
    static const char *const keys[] = {"json", "regex", "header"};
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        size_t mark = sq_plan__path_key(L, k->s);
        if ((rc = sq_plan__want_map(
                 L, v, "{ json: PATH }, { regex: PATTERN } or { header: NAME }")) < 0 ||
            (rc = sq_plan__check_keys(L, v, keys, SQ_ARRAY_LEN(keys))) < 0)
            return rc;
        if (v->npairs != 1)
            return sq_plan__fail(L, v, "an extractor has exactly one of json, regex or header");
        const struct ynode *what = v->pairs[0].key, *arg = v->pairs[0].val;
        size_t m2 = sq_plan__path_key(L, what->s);
        if ((rc = sq_plan__want_string(L, arg,
                                       !strcmp(what->s, "json")    ? "a JSON path like $.token"
                                       : !strcmp(what->s, "regex") ? "a regular expression"
                                                                   : "a header name")) < 0)
            return rc;
        char eerr[256] = "";
        struct sq_extractor *e = &st->extract[st->nextract];
        if (!strcmp(what->s, "json"))
            rc = sq_extractor_init_json(e, arg->s, eerr, sizeof(eerr));
        else if (!strcmp(what->s, "regex"))
            rc = sq_extractor_init_regex(e, arg->s, eerr, sizeof(eerr));
        else if (!sq_plan__is_token(arg->s))
            return sq_plan__fail(L, arg, "'%.60s' is not a header name", arg->s);
        else
            rc = sq_extractor_init_header(e, arg->s, eerr, sizeof(eerr));
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            return sq_plan__fail(L, arg, "%s", eerr[0] ? eerr : "invalid extractor");
        st->extract_src[st->nextract] = strdup(arg->s);
        st->nextract++;
        uint32_t idx = 0;
        if ((rc = add_slot(L, sc, k->s, &idx)) < 0 || !st->extract_src[st->nextract - 1])
            return rc < 0 ? rc : -ENOMEM;
        e->var = idx;
        if (sq_extractor_needs_body(e))
            st->needs_body = true;
        if (e->kind == SQ_EXTRACT_HEADER)
            st->needs_headers = true;
        sq_plan__path_pop(L, m2);
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

static struct sq_check *check_slot(struct sq_plan_step *st, size_t *cap)
{
    if (st->nchecks == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        struct sq_check *v = realloc(st->checks, nc * sizeof(*v));
        if (!v)
            return NULL;
        st->checks = v;
        *cap = nc;
    }
    struct sq_check *c = &st->checks[st->nchecks];
    memset(c, 0, sizeof(*c));
    return c;
}

/* Takes the check check_slot gave out once its init returned rc, then pops the path back to
 * mark (the check's own key, or L->path_len when it has none); on error the path stays. */
static int check_done(struct ld *L, const struct ynode *at, struct sq_plan_step *st, int rc,
                      const char *err, size_t mark)
{
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        return sq_plan__fail(L, at, "%s", err[0] ? err : "invalid check");
    struct sq_check *c = &st->checks[st->nchecks++];
    if (sq_check_needs_body(c))
        st->needs_body = true;
    if (sq_check_needs_headers(c))
        st->needs_headers = true;
    sq_plan__path_pop(L, mark);
    return 0;
}

static int status_code(struct ld *L, const struct ynode *n, int *out)
{
    uint64_t v;
    if (n->kind != Y_SCALAR || n->style != YS_PLAIN || sq_parse_u64(n->s, 100, 599, 0, &v) < 0)
        return sq_plan__fail(L, n, "expected an HTTP status from 100 to 599, got %s",
                             n->kind == Y_SCALAR ? n->s : sq_plan__kind_name(n));
    *out = (int)v;
    return 0;
}

static int load_json_checks(struct ld *L, const struct ynode *n, struct sq_plan_step *st,
                            size_t *cap)
{
    int rc = sq_plan__want_map(L, n, "a mapping of JSON paths to values or { op: value }");
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        size_t mark = sq_plan__path_key(L, k->s);
        size_t nops = v->kind == Y_MAP ? v->npairs : 1;
        if (v->kind == Y_SEQ)
            return sq_plan__fail(
                L, v, "expected a value or { op: value } (ops: eq ne gt ge lt le exists)");
        if (v->kind == Y_MAP && nops == 0)
            return sq_plan__fail(L, v, "expected { op: value } (ops: eq ne gt ge lt le exists)");
        for (size_t j = 0; j < nops; j++) {
            const struct ynode *ok = v->kind == Y_MAP ? v->pairs[j].key : NULL;
            const struct ynode *val = v->kind == Y_MAP ? v->pairs[j].val : v;
            int op = SQ_CMP_EQ;
            if (ok) {
                op = sq_cmp_op_parse(ok->s);
                if (op < 0) {
                    static const char *const opn[] = {"eq", "ne", "gt", "ge", "lt", "le", "exists"};
                    struct sq_suggest s;
                    char tail[64];
                    sq_suggest_init(&s, ok->s, ok->len);
                    for (size_t x = 0; x < SQ_ARRAY_LEN(opn); x++)
                        sq_suggest_try(&s, opn[x]);
                    return sq_plan__fail(
                        L, ok, "unknown operator '%.30s'%s (ops: eq ne gt ge lt le exists)", ok->s,
                        sq_suggest_tail(&s, tail, sizeof(tail)));
                }
            }
            size_t m2 = ok ? sq_plan__path_key(L, ok->s) : L->path_len;
            if ((rc = sq_plan__want_scalar(L, val, "a scalar value")) < 0)
                return rc;
            char num[64];
            int isnum = sq_plan__yaml_number(val, num, sizeof(num));
            const char *text = isnum > 0 ? num : sq_plan__is_null(val) ? "null" : val->s;
            if (op == SQ_CMP_EXISTS) {
                bool b;
                if ((rc = sq_plan__get_bool(L, val, &b)) < 0)
                    return rc;
                text = b ? "true" : "false";
                isnum = 0;
            } else if (val->style == YS_PLAIN &&
                       (sq_plan__is_true(val->s) || sq_plan__is_false(val->s))) {
                text = sq_plan__is_true(val->s) ? "true" : "false";
            }
            if ((op == SQ_CMP_GT || op == SQ_CMP_GE || op == SQ_CMP_LT || op == SQ_CMP_LE) &&
                isnum <= 0)
                return sq_plan__fail(L, val,
                                     "'%s' compares numbers: expected a number, got '%.40s'",
                                     sq_cmp_op_name((enum sq_cmp_op)op), val->s);
            char cerr[256] = "";
            struct sq_jpath *jp = NULL; /* a bad path is reported at the path */
            rc = sq_jpath_compile(k->s, k->len, &jp, cerr, sizeof(cerr));
            sq_jpath_free(jp);
            if (rc == -ENOMEM)
                return rc;
            if (rc < 0)
                return sq_plan__fail(L, k, "%s", cerr[0] ? cerr : "malformed JSON path");
            struct sq_check *c = check_slot(st, cap);
            rc = !c ? -ENOMEM
                    : sq_check_init_json(c, k->s, (enum sq_cmp_op)op, text, isnum > 0, cerr,
                                         sizeof(cerr));
            if ((rc = check_done(L, val, st, rc, cerr, m2)) < 0)
                return rc;
        }
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

static int load_checks(struct ld *L, const struct ynode *n, struct sq_plan_step *st)
{
    static const char *const keys[] = {"status", "body_contains",  "json",
                                       "header", "header_matches", "duration"};
    int rc = sq_plan__want_keys(L, n,
                                "a mapping (status, body_contains, json, header, header_matches, "
                                "duration)",
                                keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    size_t cap = 0;
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        size_t mark = sq_plan__path_key(L, k->s);
        char cerr[256] = "";
        if (!strcmp(k->s, "status")) {
            int codes[16];
            size_t nc = 0;
            if (v->kind == Y_SEQ) {
                if (v->nitems == 0 || v->nitems > 16)
                    return sq_plan__fail(L, v, "expected 1 to 16 status codes");
                for (size_t j = 0; j < v->nitems; j++)
                    if ((rc = status_code(L, v->items[j], &codes[nc++])) < 0)
                        return rc;
            } else if ((rc = status_code(L, v, &codes[nc++])) < 0) {
                return rc;
            }
            struct sq_check *c = check_slot(st, &cap);
            rc = !c ? -ENOMEM : sq_check_init_status(c, codes, nc, cerr, sizeof(cerr));
            if ((rc = check_done(L, v, st, rc, cerr, L->path_len)) < 0)
                return rc;
        } else if (!strcmp(k->s, "body_contains")) {
            size_t cnt = v->kind == Y_SEQ ? v->nitems : 1;
            if (v->kind == Y_MAP || cnt == 0)
                return sq_plan__fail(L, v, "expected a text or a list of texts");
            for (size_t j = 0; j < cnt; j++) {
                const struct ynode *t = v->kind == Y_SEQ ? v->items[j] : v;
                if ((rc = sq_plan__want_string(L, t, "a text to find in the body")) < 0)
                    return rc;
                struct sq_check *c = check_slot(st, &cap);
                rc = !c ? -ENOMEM : sq_check_init_body_contains(c, t->s, cerr, sizeof(cerr));
                if ((rc = check_done(L, t, st, rc, cerr, L->path_len)) < 0)
                    return rc;
            }
        } else if (!strcmp(k->s, "json")) {
            if ((rc = load_json_checks(L, v, st, &cap)) < 0)
                return rc;
        } else if (!strcmp(k->s, "header") || !strcmp(k->s, "header_matches")) {
            bool re = !strcmp(k->s, "header_matches");
            if ((rc = sq_plan__want_map(L, v,
                                        re ? "a mapping of header names to regular expressions"
                                           : "a mapping of header names to values")) < 0)
                return rc;
            for (size_t j = 0; j < v->npairs; j++) {
                const struct ynode *hk = v->pairs[j].key, *hv = v->pairs[j].val;
                size_t m2 = sq_plan__path_key(L, hk->s);
                if (!sq_plan__is_token(hk->s))
                    return sq_plan__fail(L, hk, "'%.60s' is not a header name", hk->s);
                if ((rc = sq_plan__want_scalar(L, hv,
                                               re ? "a regular expression" : "a header value")) < 0)
                    return rc;
                struct sq_check *c = check_slot(st, &cap);
                rc = !c   ? -ENOMEM
                     : re ? sq_check_init_header_match(c, hk->s, hv->s, cerr, sizeof(cerr))
                          : sq_check_init_header_eq(c, hk->s, hv->s, cerr, sizeof(cerr));
                if ((rc = check_done(L, hv, st, rc, cerr, m2)) < 0)
                    return rc;
            }
        } else { /* duration */
            if ((rc = sq_plan__want_map(L, v, "{ lt: 200ms } (ops: lt le gt ge)")) < 0)
                return rc;
            if (v->npairs == 0)
                return sq_plan__fail(L, v, "expected { lt: 200ms } (ops: lt le gt ge)");
            for (size_t j = 0; j < v->npairs; j++) {
                const struct ynode *ok = v->pairs[j].key, *ov = v->pairs[j].val;
                int op = sq_cmp_op_parse(ok->s);
                if (op != SQ_CMP_LT && op != SQ_CMP_LE && op != SQ_CMP_GT && op != SQ_CMP_GE)
                    return sq_plan__fail(
                        L, ok, "unknown operator '%.30s' for a duration (ops: lt le gt ge)", ok->s);
                size_t m2 = sq_plan__path_key(L, ok->s);
                int64_t ns;
                if ((rc = sq_plan__get_duration(L, ov, &ns)) < 0)
                    return rc;
                struct sq_check *c = check_slot(st, &cap);
                rc = !c ? -ENOMEM
                        : sq_check_init_duration(c, (enum sq_cmp_op)op, ns / SQ_NS_PER_US, cerr,
                                                 sizeof(cerr));
                if ((rc = check_done(L, ov, st, rc, cerr, m2)) < 0)
                    return rc;
            }
        }
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

/* publish: {url, body | json | form | file, headers, qos, timeout} and subscribe: {url, qos,
 * timeout}. The URL is checked for its scheme here and in full by the engine. */
static int load_bus_step(struct ld *L, const struct ynode *n, struct sq_plan_step *st,
                         struct rctx *R, bool publish)
{
    static const char *const pub_keys[] = {"url",  "body",    "json", "form",
                                           "file", "headers", "qos",  "timeout"};
    static const char *const sub_keys[] = {"url", "qos", "timeout"};
    int rc = sq_plan__want_map(L, n,
                               publish ? "a mapping (url, body or json, headers, qos, timeout)"
                                       : "a mapping (url, qos, timeout)");
    if (rc == 0)
        rc = publish ? sq_plan__check_keys(L, n, pub_keys, SQ_ARRAY_LEN(pub_keys))
                     : sq_plan__check_keys(L, n, sub_keys, SQ_ARRAY_LEN(sub_keys));
    if (rc < 0)
        return rc;
    struct sq_plan_request *r = &st->req;
    st->kind = publish ? SQ_STEP_PUBLISH : SQ_STEP_SUBSCRIBE;
    const struct ynode *v = sq_plan__get(n, "url");
    if (!v)
        return sq_plan__fail(L, n,
                             "missing key 'url' (nats://HOST[:PORT]/SUBJECT or "
                             "mqtt://HOST[:PORT]/TOPIC)");
    size_t mark = sq_plan__path_key(L, "url");
    if ((rc = sq_plan__want_string(L, v, "a broker URL")) < 0)
        return rc;
    if (strncasecmp(v->s, "nats://", 7) != 0 && strncasecmp(v->s, "mqtt://", 7) != 0 &&
        strncasecmp(v->s, "tls://", 6) != 0 && strncasecmp(v->s, "mqtts://", 8) != 0 &&
        strncasecmp(v->s, "mqtt+ws://", 10) != 0 && strncasecmp(v->s, "mqtt+wss://", 11) != 0)
        return sq_plan__fail(
            L, v,
            "expected nats://HOST[:PORT]/SUBJECT or mqtt://HOST[:PORT]/TOPIC "
            "(tls:// and mqtts:// over TLS; mqtt+ws://HOST[:PORT]/PATH?topic=TOPIC "
            "and mqtt+wss:// over WebSocket), got '%.60s'",
            v->s);
    r->url_src = strdup(v->s);
    r->method = strdup(publish ? "PUB" : "SUB");
    if (!r->url_src || !r->method || sq_tmpl_new_literal(v->s, v->len, &r->url) < 0)
        return -ENOMEM;
    sq_plan__path_pop(L, mark);
    if ((rc = load_own_headers(L, n, r, R)) < 0)
        return rc;
    if (publish) {
        if ((rc = load_body(L, n, r, R)) < 0)
            return rc;
        if (r->body_kind == SQ_BODY_NONE) {
            /* no payload given: the stamp alone, so the event can be found at the far end */
            r->body_kind = SQ_BODY_TEXT;
            struct sq_tmpl_error te;
            if (sq_tmpl_compile("{{$stamp}}", 10, SQ_TMPL_ESC_NONE, NULL, NULL, &r->body, &te) < 0)
                return -ENOMEM;
        }
    }
    v = sq_plan__get(n, "qos");
    if (v) {
        mark = sq_plan__path_key(L, "qos");
        if ((rc = sq_plan__want_scalar(L, v, "0, 1 or 2")) < 0)
            return rc;
        if (strcmp(v->s, "0") && strcmp(v->s, "1") && strcmp(v->s, "2"))
            return sq_plan__fail(L, v, "expected a QoS of 0, 1 or 2, got '%.20s'", v->s);
        if (strncasecmp(r->url_src, "mqtt://", 7) != 0 &&
            strncasecmp(r->url_src, "mqtts://", 8) != 0 &&
            strncasecmp(r->url_src, "mqtt+ws://", 10) != 0 &&
            strncasecmp(r->url_src, "mqtt+wss://", 11) != 0)
            return sq_plan__fail(
                L, v, "qos is for mqtt://, mqtts:// and mqtt+ws(s):// URLs (NATS core has no QoS)");
        st->qos = (uint8_t)(v->s[0] - '0');
        sq_plan__path_pop(L, mark);
    }
    if ((rc = load_timeout(L, n, r)) < 0)
        return rc;
    return 0;
}

/* ---- WebSocket steps (ws:) ---- */

/* ws: {connect: PATH, headers, subprotocol} | {send: MESSAGE, binary, reply} | {receive: true} |
 * {close: CODE}, each with an optional timeout. The templates go into st->req (plan.h). */
static int load_ws(struct ld *L, const struct ynode *n, struct sq_plan_step *st,
                   struct sq_plan_scenario *sc)
{
    static const char *const keys[] = {"connect", "send",  "receive", "close",      "headers",
                                       "binary",  "reply", "timeout", "subprotocol"};
    static const char *const ops[] = {"connect", "send", "receive", "close"};
    int rc = sq_plan__want_keys(L, n, "a mapping with one of connect, send, receive or close", keys,
                                SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    const struct ynode *opn = NULL;
    for (size_t i = 0; i < SQ_ARRAY_LEN(ops); i++) {
        const struct ynode *v = sq_plan__get(n, ops[i]);
        if (!v)
            continue;
        if (opn)
            return sq_plan__fail(
                L, v, "a ws step does one thing: '%s' and '%s' (split them into two steps)",
                ops[st->ws.op], ops[i]);
        opn = v;
        st->ws.op = (enum sq_ws_op)i;
    }
    if (!opn)
        return sq_plan__fail(L, n, "a ws step needs one of connect, send, receive or close");
    /* options that belong to another operation */
    static const struct {
        const char *key;
        enum sq_ws_op op;
    } only[] = {{"headers", SQ_WS_OP_CONNECT},
                {"subprotocol", SQ_WS_OP_CONNECT},
                {"binary", SQ_WS_OP_SEND},
                {"reply", SQ_WS_OP_SEND}};
    for (size_t i = 0; i < SQ_ARRAY_LEN(only); i++) {
        const struct ynode *v = sq_plan__get(n, only[i].key);
        if (v && st->ws.op != only[i].op)
            return sq_plan__fail(L, v, "'%s' goes with %s, not %s", only[i].key, ops[only[i].op],
                                 ops[st->ws.op]);
    }
    struct rctx R = {.L = L, .nvars = L->p->nvars, .sc = sc};
    struct sq_plan_request *r = &st->req;
    r->method = strdup("GET");
    if (!r->method)
        return -ENOMEM;
    size_t mark = sq_plan__path_key(L, ops[st->ws.op]);
    switch (st->ws.op) {
    case SQ_WS_OP_CONNECT: {
        if ((rc = sq_plan__want_string(L, opn, "a path like /ws, on the target")) < 0)
            return rc;
        if (opn->s[0] != '/')
            return sq_plan__fail(L, opn,
                                 "expected a path starting with '/' (the WebSocket opens on the "
                                 "target's origin), got '%.60s'",
                                 opn->s);
        if ((rc = load_url(L, opn, r, &R)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
        if ((rc = load_own_headers(L, n, r, &R)) < 0)
            return rc;
        const struct ynode *p = sq_plan__get(n, "subprotocol");
        if (p) {
            mark = sq_plan__path_key(L, "subprotocol");
            if ((rc = sq_plan__want_string(L, p, "a subprotocol name (or a list: a, b)")) < 0)
                return rc;
            if (strpbrk(p->s, "\r\n"))
                return sq_plan__fail(L, p, "a subprotocol cannot contain line breaks");
            st->ws.subprotocol = strdup(p->s);
            if (!st->ws.subprotocol)
                return -ENOMEM;
            sq_plan__path_pop(L, mark);
        }
        break;
    }
    case SQ_WS_OP_SEND: {
        if ((rc = sq_plan__want_scalar(L, opn, "the message (text, templates allowed)")) < 0)
            return rc;
        if ((rc = sq_plan__compile_scalar(L, opn, SQ_TMPL_ESC_NONE, &R, &r->body)) < 0)
            return rc;
        r->body_kind = SQ_BODY_TEXT;
        sq_plan__path_pop(L, mark);
        const struct ynode *b = sq_plan__get(n, "binary");
        if (b) {
            mark = sq_plan__path_key(L, "binary");
            if ((rc = sq_plan__get_bool(L, b, &st->ws.binary)) < 0)
                return rc;
            sq_plan__path_pop(L, mark);
        }
        b = sq_plan__get(n, "reply");
        if (b) {
            mark = sq_plan__path_key(L, "reply");
            if ((rc = sq_plan__get_bool(L, b, &st->ws.reply)) < 0)
                return rc;
            sq_plan__path_pop(L, mark);
        }
        break;
    }
    case SQ_WS_OP_RECEIVE: {
        bool on = false;
        if ((rc = sq_plan__get_bool(L, opn, &on)) < 0)
            return rc;
        if (!on)
            return sq_plan__fail(
                L, opn,
                "receive: true waits for the next message (false does nothing: drop the step)");
        sq_plan__path_pop(L, mark);
        break;
    }
    case SQ_WS_OP_CLOSE: {
        uint64_t code = 1000;
        if (opn->kind == Y_SCALAR && (!strcmp(opn->s, "true") || !strcmp(opn->s, "yes"))) {
            code = 1000;
        } else if ((rc = sq_plan__get_u64(L, opn, 1000, 4999, &code)) < 0) {
            return rc;
        }
        if (!((code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || code >= 3000))
            return sq_plan__fail(L, opn,
                                 "%llu is not a close code a client may send (1000-1003, "
                                 "1007-1014, 3000-4999)",
                                 (unsigned long long)code);
        st->ws.close_code = (uint16_t)code;
        sq_plan__path_pop(L, mark);
        break;
    }
    }
    if ((rc = load_timeout(L, n, r)) < 0)
        return rc;
    sc->ws = true;
    return 0;
}

/* A flow's WebSocket steps in order: connect opens, close closes; send and receive need it open,
 * a request step needs it closed, and what a flow opens it closes before its end (a VU's
 * WebSocket is its HTTP connection upgraded: it cannot carry requests meanwhile). */
static int check_ws_flow(struct ld *L, const struct ynode *flow, const struct sq_plan_scenario *sc)
{
    size_t open_at = SIZE_MAX; /* the connect step of the open WebSocket */
    for (size_t i = 0; i < sc->nsteps; i++) {
        const struct sq_plan_step *st = &sc->steps[i];
        const struct ynode *at = flow->items[i];
        size_t mark = sq_plan__path_push(L, "[%zu]", i); /* errors name the step */
        if (st->kind == SQ_STEP_REQUEST && open_at != SIZE_MAX)
            return sq_plan__fail(L, at,
                                 "a request step while the WebSocket opened by '%s' is open (its "
                                 "connection is upgraded): close it first (ws: {close: 1000})",
                                 sc->steps[open_at].name);
        if (st->kind != SQ_STEP_WS) {
            sq_plan__path_pop(L, mark);
            continue;
        }
        if (st->ws.op == SQ_WS_OP_CONNECT && open_at != SIZE_MAX)
            return sq_plan__fail(L, at,
                                 "ws connect while the WebSocket opened by '%s' is open: close "
                                 "it first (ws: {close: 1000})",
                                 sc->steps[open_at].name);
        if (st->ws.op != SQ_WS_OP_CONNECT && open_at == SIZE_MAX)
            return sq_plan__fail(L, at,
                                 "a ws %s step with no WebSocket open (ws: {connect: /path} first)",
                                 st->ws.op == SQ_WS_OP_SEND      ? "send"
                                 : st->ws.op == SQ_WS_OP_RECEIVE ? "receive"
                                                                 : "close");
        if (st->ws.op == SQ_WS_OP_CONNECT)
            open_at = i;
        else if (st->ws.op == SQ_WS_OP_CLOSE)
            open_at = SIZE_MAX;
        sq_plan__path_pop(L, mark);
    }
    if (open_at == SIZE_MAX)
        return 0;
    sq_plan__path_push(L, "[%zu]", open_at);
    return sq_plan__fail(L, flow->items[open_at],
                         "the WebSocket '%s' opens is never closed: end it with a ws close "
                         "step (ws: {close: 1000})",
                         sc->steps[open_at].name);
}

/* An `if:` operand that names a value: compiled as the template "{{name}}" with the step's
 * resolver, so it reads whatever a template there could. */
static int cond_name(void *ud, const char *name, size_t len, struct sq_tmpl **out, char *msg,
                     size_t msglen)
{
    struct rctx *R = ud;
    char src[160];
    if (len > sizeof(src) - 5) {
        snprintf(msg, msglen, "name too long");
        return -SQ_EPARSE;
    }
    int n = snprintf(src, sizeof(src), "{{%.*s}}", (int)len, name);
    struct sq_tmpl_error te;
    R->have_msg = false;
    int rc = sq_tmpl_compile(src, (size_t)n, SQ_TMPL_ESC_NONE, sq_plan__resolve_name, R, out, &te);
    if (rc < 0 && rc != -ENOMEM)
        snprintf(msg, msglen, "%s", R->have_msg ? R->msg : te.msg);
    return rc;
}

static int load_cond(struct ld *L, const struct ynode *n, struct sq_plan_step *st,
                     struct sq_plan_scenario *sc)
{
    int rc = sq_plan__want_string(L, n, "a condition, like \"status == 200\" or \"token != ''\"");
    if (rc < 0)
        return rc;
    struct rctx R = {.L = L, .nvars = L->p->nvars, .sc = sc};
    char why[240];
    size_t off = 0;
    rc = sq_cond_parse(n->s, n->len, cond_name, &R, &st->cond, why, sizeof(why), &off);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        return sq_plan__fail_at(L, sq_plan__value_loc(L, n, off), "%s", why);
    st->cond_loc = n->loc;
    return 0;
}

static int check_tags(struct ld *L, const struct ynode *n);

static int load_step(struct ld *L, const struct ynode *n, size_t index, struct sq_plan_step *st,
                     struct sq_plan_scenario *sc)
{
    static const char *const keys[] = {"name",      "request", "think",  "extract", "check",
                                       "on_error",  "before",  "after",  "ws",      "publish",
                                       "subscribe", "if",      "metric", "tags"};
    int rc = sq_plan__want_keys(L, n,
                                "a step: a mapping with request (or think, publish, "
                                "subscribe, ws)",
                                keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    st->loc = n->loc;
    const struct ynode *name = sq_plan__get(n, "name");
    if (name) {
        size_t mark = sq_plan__path_key(L, "name");
        if ((rc = sq_plan__want_string(L, name, "a step name")) < 0)
            return rc;
        uintptr_t i;
        if (sq_plan__map_get(&L->step_names, name->s, strlen(name->s), &i))
            return sq_plan__fail(L, name, "duplicate step name '%.60s' (first at line %u)", name->s,
                                 sc->steps[i].loc.line);
        st->name = strdup(name->s);
        sq_plan__path_pop(L, mark);
    } else {
        char def[32];
        snprintf(def, sizeof(def), "step %zu", index + 1);
        if (sq_plan__map_get(&L->step_names, def, strlen(def), NULL))
            return sq_plan__fail(L, n, "step %zu has no name and another step is named '%s'",
                                 index + 1, def);
        st->name = strdup(def);
    }
    if (!st->name || sq_plan__map_add(&L->step_names, st->name, strlen(st->name), index, NULL) < 0)
        return -ENOMEM;
    const struct ynode *cond = sq_plan__get(n, "if");
    if (cond) {
        size_t mark = sq_plan__path_key(L, "if");
        if ((rc = load_cond(L, cond, st, sc)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    const struct ynode *think = sq_plan__get(n, "think");
    if (think) {
        for (size_t i = 0; i < n->npairs; i++) {
            const char *k = n->pairs[i].key->s;
            if (strcmp(k, "think") && strcmp(k, "name") && strcmp(k, "if"))
                return sq_plan__fail(
                    L, n->pairs[i].key,
                    "a think step has only name, if and think ('%s' belongs to a request "
                    "step)",
                    k);
        }
        st->kind = SQ_STEP_THINK;
        size_t mark = sq_plan__path_key(L, "think");
        if ((rc = sq_plan__get_duration(L, think, &st->think_ns)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
        return 0;
    }
    const struct ynode *pub = sq_plan__get(n, "publish"), *sub = sq_plan__get(n, "subscribe");
    if (pub || sub) {
        for (size_t i = 0; i < n->npairs; i++) {
            const char *k = n->pairs[i].key->s;
            if (strcmp(k, "name") && strcmp(k, "on_error") && strcmp(k, "publish") &&
                strcmp(k, "subscribe") && strcmp(k, "if"))
                return sq_plan__fail(L, n->pairs[i].key,
                                     "a %s step has name, if, on_error and %s ('%s' belongs to a "
                                     "request step)",
                                     pub ? "publish" : "subscribe", pub ? "publish" : "subscribe",
                                     k);
        }
        if (pub && sub)
            return sq_plan__fail(L, sq_plan__get_key(n, "subscribe"),
                                 "a step publishes or subscribes, not both (two steps)");
        struct rctx R = {.L = L, .nvars = L->p->nvars, .sc = sc};
        size_t mark = sq_plan__path_key(L, pub ? "publish" : "subscribe");
        if ((rc = load_bus_step(L, pub ? pub : sub, st, &R, pub != NULL)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
        st->on_error = SQ_ON_ERROR_CONTINUE;
        const struct ynode *oe = sq_plan__get(n, "on_error");
        if (oe) {
            mark = sq_plan__path_key(L, "on_error");
            if ((rc = sq_plan__want_string(L, oe, "continue or next_iteration")) < 0)
                return rc;
            if (!strcmp(oe->s, "next_iteration"))
                st->on_error = SQ_ON_ERROR_NEXT_ITERATION;
            else if (strcmp(oe->s, "continue"))
                return sq_plan__fail(L, oe, "expected continue or next_iteration, got '%.40s'",
                                     oe->s);
            sq_plan__path_pop(L, mark);
        }
        return 0;
    }
    const struct ynode *req = sq_plan__get(n, "request");
    const struct ynode *wsn = sq_plan__get(n, "ws");
    size_t mark;
    if (wsn && req)
        return sq_plan__fail(L, wsn, "a step is a request or a ws step, not both");
    if (wsn && st->cond)
        return sq_plan__fail(L, sq_plan__get_key(n, "if"),
                             "'if' does not apply to ws steps (a skipped connect or close would "
                             "leave the WebSocket half done)");
    if (wsn) {
        st->kind = SQ_STEP_WS;
        mark = sq_plan__path_key(L, "ws");
        if ((rc = load_ws(L, wsn, st, sc)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    } else {
        if (!req)
            return sq_plan__fail(
                L, n,
                "missing key 'request' (a step is a request, publish, subscribe, ws or think: "
                "DURATION)");
        st->kind = SQ_STEP_REQUEST;
        struct rctx R = {.L = L, .nvars = L->p->nvars, .sc = sc};
        mark = sq_plan__path_key(L, "request");
        if ((rc = load_request(L, req, &st->req, &R)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    const struct ynode *v = sq_plan__get(n, "extract");
    if (v) {
        mark = sq_plan__path_key(L, "extract");
        if ((rc = load_extract(L, v, st, sc)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    v = sq_plan__get(n, "check");
    if (v) {
        mark = sq_plan__path_key(L, "check");
        if ((rc = load_checks(L, v, st)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    v = sq_plan__get(n, "tags");
    if (v) {
        mark = sq_plan__path_key(L, "tags");
        if ((rc = check_tags(L, v)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    v = sq_plan__get(n, "metric");
    if (v) {
        mark = sq_plan__path_key(L, "metric");
        if (st->kind != SQ_STEP_REQUEST)
            return sq_plan__fail(L, v, "metric: adds at a request step's response, not a ws step");
        struct rctx R = {.L = L, .nvars = L->p->nvars, .sc = sc};
        if ((rc = sq_plan__load_step_metrics(L, v, st, &R)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    static const char *const hook_keys[] = {"before", "after"};
    for (int h = 0; h < 2; h++) {
        v = sq_plan__get(n, hook_keys[h]);
        if (!v)
            continue;
        mark = sq_plan__path_key(L, hook_keys[h]);
        if (st->kind == SQ_STEP_WS)
            return sq_plan__fail(L, v, "'%s': hooks run around request steps, not ws steps",
                                 hook_keys[h]);
        if ((rc = sq_plan__load_hook(L, v, hook_keys[h], h ? &st->after : &st->before,
                                     h ? &st->after_loc : &st->before_loc)) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    if (st->after) /* the hook sees the response: its head and body are kept for it */
        st->needs_body = st->needs_headers = true;
    v = sq_plan__get(n, "on_error");
    st->on_error = SQ_ON_ERROR_CONTINUE;
    if (v) {
        mark = sq_plan__path_key(L, "on_error");
        if ((rc = sq_plan__want_string(L, v, "continue or next_iteration")) < 0)
            return rc;
        if (!strcmp(v->s, "next_iteration"))
            st->on_error = SQ_ON_ERROR_NEXT_ITERATION;
        else if (strcmp(v->s, "continue")) {
            struct sq_suggest s;
            char tail[64];
            sq_suggest_init(&s, v->s, v->len);
            sq_suggest_try(&s, "continue");
            sq_suggest_try(&s, "next_iteration");
            return sq_plan__fail(L, v, "expected continue or next_iteration, got '%.40s'%s", v->s,
                                 sq_suggest_tail(&s, tail, sizeof(tail)));
        }
        sq_plan__path_pop(L, mark);
    }
    return 0;
}

static bool scenario_name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '-' || *s == '.'))
            return false;
    return true;
}

/* How many steps and loops a flow (or a repeat's steps) holds once flattened; an item that is
 * not a repeat counts as one step (load_step reports what is wrong with it). */
static void count_flat(const struct ynode *seq, size_t *nsteps, size_t *nloops)
{
    for (size_t i = 0; i < seq->nitems; i++) {
        const struct ynode *it = seq->items[i];
        const struct ynode *rp = it->kind == Y_MAP ? sq_plan__get(it, "repeat") : NULL;
        const struct ynode *inner = rp && rp->kind == Y_MAP ? sq_plan__get(rp, "steps") : NULL;
        const struct ynode *gs =
            it->kind == Y_MAP && sq_plan__get(it, "group") ? sq_plan__get(it, "steps") : NULL;
        if (it->kind == Y_MAP && sq_plan__get(it, "batch"))
            gs = sq_plan__get(it, "batch");
        if (gs && gs->kind == Y_SEQ) {
            count_flat(gs, nsteps, nloops);
        } else if (inner && inner->kind == Y_SEQ) {
            (*nloops)++;
            count_flat(inner, nsteps, nloops);
        } else {
            (*nsteps)++;
        }
    }
}

static int load_items(struct ld *L, const struct ynode *seq, const char *where,
                      struct sq_plan_scenario *sc, int depth, bool ends_loop);

/* One `repeat:` item: its loop in sc->loops (pre-order), then its steps. */
static int load_repeat(struct ld *L, const struct ynode *item, struct sq_plan_scenario *sc,
                       int depth, bool last_of_parent)
{
    static const char *const keys[] = {"count", "while", "max", "steps"};
    int rc;
    if (item->npairs != 1)
        for (size_t i = 0; i < item->npairs; i++)
            if (strcmp(item->pairs[i].key->s, "repeat"))
                return sq_plan__fail(L, item->pairs[i].key,
                                     "a repeat item has only repeat ('%s' belongs to a step: put "
                                     "it on a step inside repeat.steps)",
                                     item->pairs[i].key->s);
    const struct ynode *rp = sq_plan__get(item, "repeat");
    const struct ynode *rkey = sq_plan__get_key(item, "repeat");
    size_t mark = sq_plan__path_key(L, "repeat");
    if ((rc = sq_plan__want_keys(L, rp, "a mapping with steps and count (or while and max)", keys,
                                 SQ_ARRAY_LEN(keys))) < 0)
        return rc;
    if (depth >= SQ_PLAN_LOOP_DEPTH)
        return sq_plan__fail(L, rkey, "repeat inside repeat goes %d deep at most",
                             SQ_PLAN_LOOP_DEPTH);
    const struct ynode *cnt = sq_plan__get(rp, "count"), *wh = sq_plan__get(rp, "while"),
                       *mx = sq_plan__get(rp, "max"), *steps = sq_plan__get(rp, "steps");
    if (!cnt == !wh)
        return sq_plan__fail(
            L, rp,
            cnt ? "a repeat has count or while, not both"
                : "missing key 'count' or 'while' (how many times, or while what)");
    if (cnt && mx)
        return sq_plan__fail(L, sq_plan__get_key(rp, "max"),
                             "'max' caps a while loop; a count loop runs count times");
    if (wh && !mx)
        return sq_plan__fail(L, rp, "missing key 'max' (a while loop needs a cap)");
    if (wh && last_of_parent)
        return sq_plan__fail(L, rkey,
                             "a while loop cannot end its enclosing repeat's steps (add a step "
                             "after it)");
    if (!steps)
        return sq_plan__fail(L, rp, "missing key 'steps' (the steps to repeat)");
    /* before the loop takes its place: count_flat sized sc->loops by the repeats whose steps
     * are a list, so one that is not has none */
    if (steps->kind != Y_SEQ)
        return sq_plan__fail(L, steps, "expected a list of steps, got %s",
                             sq_plan__kind_name(steps));
    uint32_t li = sc->nloops++;
    struct sq_plan_loop *lp = &sc->loops[li];
    lp->loc = rkey->loc;
    lp->first = (uint32_t)sc->nsteps;
    lp->gdepth = group_depth(L->group);
    if (cnt) {
        size_t m = sq_plan__path_key(L, "count");
        if ((rc = sq_plan__get_u64(L, cnt, 1, SQ_PLAN_LOOP_MAX, &lp->count)) < 0)
            return rc;
        sq_plan__path_pop(L, m);
    } else {
        size_t m = sq_plan__path_key(L, "max");
        if ((rc = sq_plan__get_u64(L, mx, 1, SQ_PLAN_LOOP_MAX, &lp->max)) < 0)
            return rc;
        sq_plan__path_pop(L, m);
        m = sq_plan__path_key(L, "while");
        struct sq_plan_step tmp = {0};
        rc = load_cond(L, wh, &tmp, sc);
        lp->cond = tmp.cond;
        if (rc < 0)
            return rc;
        sq_plan__path_pop(L, m);
    }
    if (steps->nitems == 0)
        return sq_plan__fail(L, steps, "a repeat needs at least one step");
    /* loads into sc->loops[li]'s place: the array does not move (sized by count_flat) */
    if ((rc = load_items(L, steps, ".steps", sc, depth + 1, true)) < 0)
        return rc;
    sc->loops[li].last = (uint32_t)sc->nsteps - 1;
    sq_plan__path_pop(L, mark);
    return 0;
}

/* A tags: mapping (of a step, a group or a scenario): NAME: VALUE, a name not one of the
 * built-in tags, both short. */
static int check_tags(struct ld *L, const struct ynode *n)
{
    static const char *const builtin[] = {"scenario", "step", "group", "method",
                                          "status",   "name", "url"};
    int rc = sq_plan__want_map(L, n, "a mapping of tag names to values");
    if (rc < 0)
        return rc;
    if (n->npairs > SQ_PLAN_TAGS_MAX)
        return sq_plan__fail(L, n, "at most %d tags", SQ_PLAN_TAGS_MAX);
    for (size_t i = 0; i < n->npairs; i++) {
        const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].val;
        size_t m = sq_plan__path_key(L, k->s);
        if (!sq_plan__is_ident(k->s) || k->len > SQ_PLAN_TAG_LEN)
            return sq_plan__fail(L, k,
                                 "a tag name is letters, digits and '_', not starting with a "
                                 "digit, %d bytes at most",
                                 SQ_PLAN_TAG_LEN);
        for (size_t j = 0; j < SQ_ARRAY_LEN(builtin); j++)
            if (!strcmp(k->s, builtin[j]))
                return sq_plan__fail(L, k, "'%s' is a built-in tag: choose another name", k->s);
        if ((rc = sq_plan__want_scalar(L, v, "a tag value")) < 0)
            return rc;
        if (v->len == 0 || v->len > SQ_PLAN_TAG_LEN || strlen(v->s) != v->len)
            return sq_plan__fail(L, v, "a tag value is 1 to %d bytes, no NUL byte",
                                 SQ_PLAN_TAG_LEN);
        sq_plan__path_pop(L, m);
    }
    return 0;
}

/* Step st's tags: those of L->tagnodes (outer first), then its own (own: NULL for none), a
 * later one of a name replacing the earlier. */
static int step_tags(struct ld *L, struct sq_plan_step *st, const struct ynode *own,
                     const struct ynode *at)
{
    const struct ynode *nodes[SQ_PLAN_LOOP_DEPTH + 3];
    int nn = 0;
    for (int i = 0; i < L->ntagnodes; i++)
        nodes[nn++] = L->tagnodes[i];
    if (own)
        nodes[nn++] = own;
    for (int i = 0; i < nn; i++)
        for (size_t j = 0; j < nodes[i]->npairs; j++) {
            const char *k = nodes[i]->pairs[j].key->s, *v = nodes[i]->pairs[j].val->s;
            uint32_t t = 0;
            while (t < st->ntags && strcmp(st->tags[t].key, k))
                t++;
            if (t == st->ntags) {
                if (t == SQ_PLAN_TAGS_MAX)
                    return sq_plan__fail(L, at,
                                         "more than %d tags on this step (its groups' and "
                                         "scenario's included)",
                                         SQ_PLAN_TAGS_MAX);
                if (!st->tags && !(st->tags = calloc(SQ_PLAN_TAGS_MAX, sizeof(*st->tags))))
                    return -ENOMEM;
                if (!(st->tags[t].key = strdup(k)))
                    return -ENOMEM;
                st->ntags++;
            }
            free(st->tags[t].value);
            if (!(st->tags[t].value = strdup(v)))
                return -ENOMEM;
        }
    return 0;
}

/* One `group:` item: its steps, each tagged with the group's path. */
static int load_group(struct ld *L, const struct ynode *item, struct sq_plan_scenario *sc,
                      int depth, bool ends_loop)
{
    static const char *const keys[] = {"group", "steps", "tags"};
    int rc = sq_plan__check_keys(L, item, keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    const struct ynode *tags = sq_plan__get(item, "tags");
    if (tags) {
        size_t m = sq_plan__path_key(L, "tags");
        if ((rc = check_tags(L, tags)) < 0)
            return rc;
        sq_plan__path_pop(L, m);
    }
    const struct ynode *g = sq_plan__get(item, "group"), *steps = sq_plan__get(item, "steps");
    size_t mark = sq_plan__path_key(L, "group");
    if ((rc = sq_plan__want_string(L, g, "a group name")) < 0)
        return rc;
    if (g->len == 0 || strlen(g->s) != g->len || strstr(g->s, "::"))
        return sq_plan__fail(L, g, "a group name is not empty and holds no NUL byte or '::'");
    if (depth >= SQ_PLAN_LOOP_DEPTH)
        return sq_plan__fail(L, g, "groups and repeats nest %d deep at most", SQ_PLAN_LOOP_DEPTH);
    sq_plan__path_pop(L, mark);
    if (!steps)
        return sq_plan__fail(L, item, "missing key 'steps' (the group's steps)");
    if (steps->kind != Y_SEQ)
        return sq_plan__fail(L, steps, "expected a list of steps, got %s",
                             sq_plan__kind_name(steps));
    if (steps->nitems == 0)
        return sq_plan__fail(L, steps, "a group needs at least one step");
    size_t had = strlen(L->group);
    if (had + 2 + g->len >= sizeof(L->group))
        return sq_plan__fail(L, g, "the group path is longer than %zu bytes", sizeof(L->group) - 1);
    snprintf(L->group + had, sizeof(L->group) - had, "%s%s", had ? "::" : "", g->s);
    if (tags)
        L->tagnodes[L->ntagnodes++] = tags;
    rc = load_items(L, steps, ".steps", sc, depth + 1, ends_loop);
    if (tags)
        L->ntagnodes--;
    L->group[had] = '\0';
    return rc;
}

/* One `batch:` item: its requests, flattened into sc->steps like any other step; the first one
 * holds how many there are (struct sq_plan_step.batch). */
static int load_batch(struct ld *L, const struct ynode *item, struct sq_plan_scenario *sc)
{
    static const char *const keys[] = {"batch"};
    int rc = sq_plan__check_keys(L, item, keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    const struct ynode *b = sq_plan__get(item, "batch");
    size_t mark = sq_plan__path_key(L, "batch");
    if (b->kind != Y_SEQ)
        return sq_plan__fail(L, b, "expected a list of request steps, got %s",
                             sq_plan__kind_name(b));
    if (b->nitems == 0)
        return sq_plan__fail(L, b, "a batch needs at least one request step");
    if (b->nitems > SQ_PLAN_BATCH_MAX)
        return sq_plan__fail(L, b->items[SQ_PLAN_BATCH_MAX],
                             "a batch holds %d requests at most (this is request %d)",
                             SQ_PLAN_BATCH_MAX, SQ_PLAN_BATCH_MAX + 1);
    size_t first = sc->nsteps;
    for (size_t i = 0; i < b->nitems; i++) {
        const struct ynode *it = b->items[i];
        size_t m = sq_plan__path_push(L, "[%zu]", i);
        if (it->kind == Y_MAP &&
            (sq_plan__get(it, "batch") || sq_plan__get(it, "group") || sq_plan__get(it, "repeat")))
            return sq_plan__fail(L, it,
                                 "a batch holds request steps only (no batch, group or repeat "
                                 "inside it: put the batch inside them instead)");
        size_t k = sc->nsteps++;
        struct sq_plan_step *st = &sc->steps[k];
        if ((rc = load_step(L, it, k, st, sc)) < 0)
            return rc;
        if (L->group[0] && !(st->group = strdup(L->group)))
            return -ENOMEM;
        if (it->kind == Y_MAP && (rc = step_tags(L, st, sq_plan__get(it, "tags"), it)) < 0)
            return rc;
        if (st->kind != SQ_STEP_REQUEST)
            return sq_plan__fail(L, it,
                                 "a batch holds request steps only (think, publish, subscribe "
                                 "and ws steps go before or after it)");
        if (st->cond)
            return sq_plan__fail(L, sq_plan__get_key(it, "if"),
                                 "'if' does not apply inside a batch: every request of a batch "
                                 "is sent (move the request out of the batch)");
        if (st->before || st->after)
            return sq_plan__fail(L, sq_plan__get_key(it, st->before ? "before" : "after"),
                                 "before and after hooks do not run inside a batch (move the "
                                 "request out of the batch to hook it)");
        st->in_batch = true;
        sq_plan__path_pop(L, m);
    }
    sc->steps[first].batch = (uint32_t)b->nitems;
    if (b->nitems > sc->batch_max)
        sc->batch_max = (uint32_t)b->nitems;
    sq_plan__path_pop(L, mark);
    return 0;
}

/* The items of a flow, a repeat's or a group's steps, flattened into sc->steps; ends_loop: the
 * list's last item ends an enclosing repeat's steps. */
static int load_items(struct ld *L, const struct ynode *seq, const char *where,
                      struct sq_plan_scenario *sc, int depth, bool ends_loop)
{
    int rc;
    for (size_t i = 0; i < seq->nitems; i++) {
        const struct ynode *it = seq->items[i];
        bool last = ends_loop && i + 1 == seq->nitems;
        size_t m = sq_plan__path_push(L, "%s[%zu]", where, i);
        if (it->kind == Y_MAP && sq_plan__get(it, "group")) {
            if ((rc = load_group(L, it, sc, depth, last)) < 0)
                return rc;
        } else if (it->kind == Y_MAP && sq_plan__get(it, "repeat")) {
            if ((rc = load_repeat(L, it, sc, depth, last)) < 0)
                return rc;
        } else if (it->kind == Y_MAP && sq_plan__get(it, "batch")) {
            if ((rc = load_batch(L, it, sc)) < 0)
                return rc;
        } else {
            size_t k = sc->nsteps++;
            if ((rc = load_step(L, it, k, &sc->steps[k], sc)) < 0)
                return rc;
            if (L->group[0] && !(sc->steps[k].group = strdup(L->group)))
                return -ENOMEM;
            if (it->kind == Y_MAP &&
                (rc = step_tags(L, &sc->steps[k], sq_plan__get(it, "tags"), it)) < 0)
                return rc;
        }
        sq_plan__path_pop(L, m);
    }
    return 0;
}

/* setup: and teardown: (L->once): a flow, cookies and locals, run by one VU once; maxDuration
 * bounds it (60s, k6's setupTimeout). */
static int load_once(struct ld *L, const struct ynode *key, const struct ynode *n,
                     struct sq_plan_scenario *sc)
{
    static const char *const keys[] = {"flow", "cookies", "locals", "maxDuration"};
    int rc = sq_plan__check_keys(L, n, keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    struct sq_exec *e = &sc->exec;
    memset(e, 0, sizeof(*e));
    e->kind = SQ_EXEC_PER_VU_ITERATIONS;
    e->vus = 1;
    e->start_vus = 1;
    e->iterations = 1;
    e->max_duration_ns = 60 * SQ_NS_PER_S;
    const struct ynode *v = sq_plan__get(n, "cookies");
    if (v) {
        size_t m = sq_plan__path_key(L, "cookies");
        if ((rc = sq_plan__get_bool(L, v, &sc->cookies)) < 0)
            return rc;
        sq_plan__path_pop(L, m);
    }
    if ((v = sq_plan__get(n, "maxDuration"))) {
        size_t m = sq_plan__path_key(L, "maxDuration");
        if ((rc = sq_plan__get_duration(L, v, &e->max_duration_ns)) < 0)
            return rc;
        if (e->max_duration_ns <= 0)
            return sq_plan__fail(L, v, "maxDuration must be longer than 0");
        sq_plan__path_pop(L, m);
    }
    const char *why = NULL;
    if (sq_exec_prepare(e, &why) < 0)
        return sq_plan__fail(L, key, "%s", why ? why : "invalid settings");
    return 0;
}

/* The scenario's group paths (each enclosing group too), in order of first appearance, each
 * step's gmask over them, and each repeat's groups inside it (group_duration, engine/flow.c): a
 * group deeper than the repeat whose first step is in the repeat's range is in its body. */
static int index_groups(struct ld *L, const struct ynode *flow, struct sq_plan_scenario *sc)
{
    uint32_t first[SQ_PLAN_GROUPS_MAX];
    for (size_t k = 0; k < sc->nsteps; k++) {
        struct sq_plan_step *st = &sc->steps[k];
        const char *g = st->group;
        for (size_t end = 0; g && end <= strlen(g); end++) {
            if (g[end] != '\0' && !(g[end] == ':' && g[end + 1] == ':'))
                continue;
            uint32_t i = 0;
            while (i < sc->ngroups &&
                   !(strlen(sc->groups[i]) == end && memcmp(sc->groups[i], g, end) == 0))
                i++;
            if (i == sc->ngroups) {
                if (sc->ngroups == SQ_PLAN_GROUPS_MAX)
                    return sq_plan__fail(L, flow, "a scenario holds %d groups at most",
                                         SQ_PLAN_GROUPS_MAX);
                char **v = realloc(sc->groups, (sc->ngroups + 1) * sizeof(*v));
                if (!v)
                    return -ENOMEM;
                sc->groups = v;
                if (!(v[i] = strndup(g, end)))
                    return -ENOMEM;
                sc->ngroups++;
                first[i] = (uint32_t)k;
            }
            st->gmask |= 1ull << i;
        }
    }
    for (uint32_t l = 0; l < sc->nloops; l++) {
        struct sq_plan_loop *lp = &sc->loops[l];
        for (uint32_t g = 0; g < sc->ngroups; g++)
            if (group_depth(sc->groups[g]) > lp->gdepth && first[g] >= lp->first &&
                first[g] <= lp->last)
                lp->gin |= 1ull << g;
    }
    return 0;
}

int sq_plan__load_scenario(struct ld *L, const struct ynode *key, const struct ynode *n,
                           struct sq_plan_scenario *sc)
{
    int rc;
    if (!scenario_name_ok(key->s))
        return sq_plan__fail(
            L, key, "'%.60s' is not a scenario name (letters, digits, '_', '-' and '.')", key->s);
    sq_plan__map_dispose(&L->slots); /* names are per scenario */
    sq_plan__map_dispose(&L->step_names);
    sc->name = strdup(key->s);
    sc->loc = key->loc;
    if (!sc->name)
        return -ENOMEM;
    size_t mark = sq_plan__path_key(L, key->s);
    if ((rc = sq_plan__want_map(L, n, "a scenario: a mapping with executor and flow")) < 0)
        return rc;
    if ((rc = L->once ? load_once(L, key, n, sc) : load_executor(L, key, n, sc)) < 0)
        return rc;
    const struct ynode *flow = sq_plan__get(n, "flow");
    if (!flow)
        return sq_plan__fail(L, key, "missing key 'flow' (the list of steps each iteration runs)");
    size_t m2 = sq_plan__path_key(L, "flow");
    if (flow->kind != Y_SEQ)
        return sq_plan__fail(L, flow, "expected a list of steps, got %s", sq_plan__kind_name(flow));
    if (flow->nitems == 0)
        return sq_plan__fail(L, flow, "a flow needs at least one step");
    sq_plan__path_pop(L, m2);
    if ((rc = collect_slots(L, flow, sc)) < 0)
        return rc;
    const struct ynode *locals = sq_plan__get(n, "locals");
    if (locals && (rc = collect_locals(L, locals, sc)) < 0)
        return rc;
    size_t nflat = 0, nloops = 0;
    count_flat(flow, &nflat, &nloops);
    sc->steps = calloc(nflat, sizeof(*sc->steps));
    if (nloops && !(sc->loops = calloc(nloops, sizeof(*sc->loops))))
        return -ENOMEM;
    if (!sc->steps)
        return -ENOMEM;
    L->group[0] = '\0';
    L->ntagnodes = 0;
    const struct ynode *tags = sq_plan__get(n, "tags");
    if (tags) {
        size_t m3 = sq_plan__path_key(L, "tags");
        if ((rc = check_tags(L, tags)) < 0)
            return rc;
        sq_plan__path_pop(L, m3);
        L->tagnodes[L->ntagnodes++] = tags;
    }
    if ((rc = load_items(L, flow, ".flow", sc, 0, false)) < 0)
        return rc;
    if ((rc = index_groups(L, flow, sc)) < 0)
        return rc;
    sc->batch_conns = SQ_PLAN_BATCH_CONNS;
    const struct ynode *bc = sq_plan__get(n, "batchConnections");
    if (bc) {
        uint64_t v = 0;
        size_t m = sq_plan__path_key(L, "batchConnections");
        if ((rc = sq_plan__get_u64(L, bc, 1, SQ_PLAN_BATCH_CONNMAX, &v)) < 0)
            return rc;
        sc->batch_conns = (uint32_t)v;
        sq_plan__path_pop(L, m);
    }
    L->ntagnodes = 0;
    bool any_request = false;
    for (size_t i = 0; i < sc->nsteps; i++)
        any_request = any_request || sc->steps[i].kind != SQ_STEP_THINK;
    if (sc->nloops && sc->ws)
        return sq_plan__fail(L, flow, "repeat: does not apply to a flow with ws steps");
    if (!any_request)
        return sq_plan__fail(L, flow,
                             "a flow needs at least one request, publish, subscribe or ws step");
    if (sc->ws) {
        size_t m4 = sq_plan__path_key(L, "flow");
        if ((rc = check_ws_flow(L, flow, sc)) < 0)
            return rc;
        sq_plan__path_pop(L, m4);
    }
    sq_plan__path_pop(L, mark);
    return 0;
}
