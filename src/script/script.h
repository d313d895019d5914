/* script/script.h - LuaJIT scripts: wrk's Lua API, unchanged, and plan step hooks.
 *
 * One struct sq_script is one lua_State with the script loaded. As in wrk, a run holds one
 * *main* state (setup() before the run, done() after it) and one state per worker thread
 * (init(), delay(), request(), response() during the run). A state belongs to one thread at a
 * time; nothing here locks. The engine drives a wrk-style run so:
 *
 *     sq_script_new(file, &target, &main, err)           syntax errors: err = "file:line: ..."
 *     for each worker i:
 *         sq_script_new(file, &target, &w[i], err)
 *         sq_script_set_addr(w[i], addr, addrlen)          the resolved server address
 *         sq_script_setup(main, w[i])                      setup(thread) on the main state
 *         sq_script_addr(w[i], ...)                        setup() may have changed thread.addr
 *         sq_script_init(w[i], url, argc, argv)            init(args); the static request
 *         hooks = sq_script_hooks(w[i])
 *     run: per request, in worker i's thread, only for the hooks it has:
 *         sq_script_delay(w[i], &ns)                       before the request is due
 *         sq_script_request(w[i], &req, &len, &nreq)       else sq_script_static_request()
 *         sq_script_response(w[i], status, hdrs, n, body)  with the body captured
 *         sq_script_stopped(w[i])                          thread:stop() was called
 *     sq_script_done(main, &summary, latency, requests)    after every worker has joined
 *     sq_script_free(w[i]) ..., sq_script_free(main)       any order
 *
 * A script that defines no request(), response() or delay() costs nothing per request: the
 * engine sends sq_script_static_request() (wrk.format() with the wrk table as init() left it,
 * rendered once per state) exactly as it sends a request built from flags.
 *
 * Errors: every call that runs Lua runs it protected. A Lua error (a syntax error, a runtime
 * error in any hook, a bad return value) returns -SQ_ESCRIPT and leaves the message, with the
 * Lua traceback for runtime errors, in sq_script_error(); the state stays usable. The process is
 * never aborted by a script error. (LuaJIT running out of memory outside a protected call is
 * the one fatal case, as for any allocation failure inside a library.)
 *
 * docs/internals/script.md describes the layout, the invariants, the costs and every place
 * where this differs from wrk.
 */
#ifndef SQ_SCRIPT_SCRIPT_H
#define SQ_SCRIPT_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "base/err.h"
#include "plan/eval.h"
#include "stats/hist.h"

struct sq_script; /* opaque; one lua_State */

/* A -H header, strings borrowed (NUL-terminated). */
struct sq_script_header {
    const char *name;
    const char *value;
};

/* What the global wrk table starts with (from the URL and the flags). Strings are copied into
 * the state. A NULL target (plan hook scripts) gives wrk's defaults: http, localhost, no port,
 * path "/", no headers. */
struct sq_script_target {
    const char *scheme; /* "http" or "https"; NULL: "http" */
    const char *host;   /* as in the URL, an IPv6 literal without brackets; NULL: "localhost" */
    const char *port;   /* as written in the URL, or NULL when the URL has none (wrk.port = nil) */
    const char *path;   /* from the path on, query included; NULL: "/" */
    const struct sq_script_header *headers; /* wrk.headers, in order (a later name replaces) */
    size_t nheaders;
    /* seeded: math.randomseed(seed) before the chunk runs, so math.random follows the run's
     * seed (engine/: one stream per state, plan/tmpl.h); else LuaJIT's fixed default state,
     * the same numbers in every run (as in wrk). A script that calls math.randomseed itself
     * replaces it either way. */
    bool seeded;
    uint64_t seed;
};

/* The global functions a state defines, as sq_script_hooks() reports them. */
enum sq_script_hook {
    SQ_SCRIPT_SETUP = 1u << 0,
    SQ_SCRIPT_INIT = 1u << 1,
    SQ_SCRIPT_DELAY = 1u << 2,
    SQ_SCRIPT_REQUEST = 1u << 3,
    SQ_SCRIPT_RESPONSE = 1u << 4,
    SQ_SCRIPT_DONE = 1u << 5,
};

/* ---- lifetime ---- */

/* Creates a state, builds the wrk table from t and runs the script file (its top level runs
 * now, as in wrk). Returns 0; -SQ_ESCRIPT with err = "file:line: message" for a syntax error,
 * or the message and traceback of a runtime error in the top level; -errno with err naming the
 * file when it cannot be read; -ENOMEM. *out is untouched on error. err may be NULL. */
SQ_MUST_CHECK int sq_script_new(const char *file, const struct sq_script_target *t,
                                struct sq_script **out, char *err, size_t errlen);
/* The same from a string; name is the chunk name errors show ("name:line: ..."). */
SQ_MUST_CHECK int sq_script_new_string(const char *name, const char *src, size_t len,
                                       const struct sq_script_target *t, struct sq_script **out,
                                       char *err, size_t errlen);
/* Closes the state. Thread objects other states hold for it answer "thread is gone" from
 * then on. NULL is a no-op. */
void sq_script_free(struct sq_script *s);

/* The message of the last call that returned -SQ_ESCRIPT (or another error), "" if none. Valid
 * until the next call on s. A runtime error reads "request(): file:line: message\nstack
 * traceback:\n\t...", or "request() (defined at file:line): message\n..." when the error has
 * no line of its own (raised by a C function such as wrk.format in a tail call). */
const char *sq_script_error(const struct sq_script *s);

/* The SQ_SCRIPT_* hooks s defines now: the globals setup, init, delay, request, response and
 * done that are functions. Ask after sq_script_init() (init() may define or remove hooks, and
 * wrk decides after init() as well). */
unsigned sq_script_hooks(const struct sq_script *s);

/* ---- wrk's phases ---- */

/* The worker's server address, shown to setup() as thread.addr. len <= sizeof(struct
 * sockaddr_storage), else -EINVAL. */
SQ_MUST_CHECK int sq_script_set_addr(struct sq_script *thread, const struct sockaddr *sa,
                                     socklen_t len);
/* thread.addr now (setup() may have set another address from wrk.lookup()). Returns false, and
 * leaves *out untouched, when the thread has none. */
bool sq_script_addr(const struct sq_script *thread, struct sockaddr_storage *out, socklen_t *len);

/* Runs setup(thread) on the main state for the worker state `thread` (wrk calls it once per
 * thread, before any thread starts), if setup is defined. thread:get/set/stop act on `thread`
 * from then on, also in done(). Also sets wrk.thread in thread's own state. main != thread.
 * Returns 0 or -SQ_ESCRIPT (sq_script_error(main)) or -ENOMEM. */
SQ_MUST_CHECK int sq_script_setup(struct sq_script *main, struct sq_script *thread);

/* Starts the worker state s, as wrk.init does: sets wrk.headers.Host to host[:port] ("[v6]:port"
 * for an IPv6 literal) unless it is set, calls init(args) with args[0] = url and args[1..argc] =
 * argv (the arguments after "--"), then renders the static request with wrk.format() and makes
 * wrk.request() return it. Returns 0 or -SQ_ESCRIPT (an error in init(), or wrk.format() failing
 * on the wrk table, or a static request that is not a complete HTTP request). */
SQ_MUST_CHECK int sq_script_init(struct sq_script *s, const char *url, int argc,
                                 const char *const *argv);

/* The request sq_script_init() rendered: the whole bytes (valid until s is freed, shared by all
 * of the worker's connections) and how many requests they hold (1 unless the wrk table makes a
 * pipeline of it). NULL, 0, 0 before a successful sq_script_init(). */
void sq_script_static_request(const struct sq_script *s, const char **req, size_t *len,
                              uint32_t *nreq);

/* ---- per request (hot path: call only when sq_script_hooks() has the hook) ---- */

/* Calls request() and returns the bytes it returned: *req / *len, valid until the next
 * sq_script_request() on s (copy what a partial write leaves over), and *nreq, how many
 * requests they hold (a pipeline: each request's head ends at an empty line, its body is
 * Content-Length bytes or chunked; the engine accounts and times each). Returned strings are
 * counted once: returning the same string again (wrk's pipeline.lua) costs no re-parse.
 * Returns 0 or -SQ_ESCRIPT: an error in request(), a value that is not a string, or bytes that
 * are not complete HTTP requests (the message says which request and where). */
SQ_MUST_CHECK int sq_script_request(struct sq_script *s, const char **req, size_t *len,
                                    uint32_t *nreq);

/* Calls response(status, headers, body): headers a new table name -> value (a repeated name: the
 * last value), body a string ("" when body is NULL or body_len is 0). Returns 0 or -SQ_ESCRIPT. */
SQ_MUST_CHECK int sq_script_response(struct sq_script *s, int status,
                                     const struct sq_resp_header *headers, size_t nheaders,
                                     const char *body, size_t body_len);

/* Calls delay() and returns the wait before the next request in ns (milliseconds from Lua,
 * fractions kept; nil or a negative number: 0). Returns 0 or -SQ_ESCRIPT (an error, or a value
 * that is not a number). */
SQ_MUST_CHECK int sq_script_delay(struct sq_script *s, int64_t *ns);

/* True once thread:stop() was called for s (from its own state, or from setup() on the main
 * state). Safe to call from any thread; the engine checks it after each hook it calls and at
 * the start, and ends this worker's run (wrk stops that thread's event loop). */
bool sq_script_stopped(const struct sq_script *s);

/* ---- after the run ---- */

struct sq_script_summary {
    int64_t duration_us; /* the run's duration */
    uint64_t requests;   /* completed requests */
    uint64_t bytes;      /* bytes received */
    struct {
        uint64_t connect, read, write, status, timeout;
    } errors;
};

/* Calls done(summary, latency, requests) on the main state, if done is defined. latency (µs per
 * request, the workers' histograms merged) and requests (requests per second, one value per
 * thread and sample interval) back the two stats objects; either may be NULL (an empty object).
 * They are read only during the call: an object a script keeps answers an error afterwards.
 * Returns 0 or -SQ_ESCRIPT. */
SQ_MUST_CHECK int sq_script_done(struct sq_script *main, const struct sq_script_summary *sum,
                                 const struct sq_hist *latency, const struct sq_hist *requests);

/* ---- plan hooks (plan `script:` with per-step `before:` / `after:`) ----
 *
 * A hook is a global Lua function called with one context object, ctx:
 *     ctx.step, ctx.vu, ctx.iteration        the step's name, the VU (1-based), its iteration
 *     ctx:get(name)                          a VU variable or extracted value (a string), or nil
 *     ctx:set(name, value)                   sets it (a string or a number; nil unsets it)
 *     before hooks only:
 *         ctx:skip()                         the step is not sent (its checks do not run)
 *         ctx.body = "..."                   the request body to send instead of the plan's
 *         ctx.method = "PUT"                 the method to send (an HTTP token)
 *         ctx.url = "/path?q"                the URL: a path, or an absolute URL on the origin
 *         ctx:set_header(name, value)        adds a header, or replaces the plan's of that name
 *     after hooks only:
 *         ctx.status                         the response status (0 when the request failed)
 *         ctx.headers                        a table name -> value (built when read)
 *         ctx.body                           the response body, or nil when none was captured
 * The VU's variables belong to the engine: the hook reaches them through sq_script_vars. The
 * context object is reused for every call; using it after its hook returned is an error. */

/* The engine's storage of one VU's variables. */
struct sq_script_vars {
    /* Looks name[0, len) up. Returns true and sets *out (borrowed: valid for the rest of the
     * hook call, or until set() changes that name) when the VU has a value for it. */
    bool (*get)(void *vu, const char *name, size_t len, struct sq_str *out);
    /* Sets name[0, len) to val[0, val_len), or unsets it when val is NULL. Returns 0, -ENOENT
     * (no variable of that name in this scenario: the hook gets a Lua error naming it) or
     * -ENOMEM. */
    int (*set)(void *vu, const char *name, size_t len, const char *val, size_t val_len);
    /* ctx.url = url[0, len) in a before hook: the engine checks it (a path, or an absolute URL
     * on the run's origin) and keeps the request-target it makes of it for the request about
     * to be sent. Returns 0, or -1 with *why (static text) set: the hook gets a Lua error
     * saying why. NULL: ctx.url cannot be set (a Lua error). */
    int (*url)(void *vu, const char *url, size_t len, const char **why);
    /* ctx:metric(name, value): one sample of the plan's metric name[0, len) (a finite value).
     * Returns 0, or -ENOENT (the plan declares no such metric: the hook gets a Lua error). NULL:
     * ctx:metric is an error. */
    int (*metric)(void *vu, const char *name, size_t len, double value);
};

enum sq_script_when { SQ_SCRIPT_BEFORE, SQ_SCRIPT_AFTER };

/* What the hook is called for. Pointers are borrowed for the call. */
struct sq_script_step {
    const char *name; /* the step's name */
    uint64_t vu;      /* 1-based */
    uint64_t iteration;
    /* after hooks: the response */
    int status;
    const struct sq_resp_header *headers;
    size_t nheaders;
    const char *body; /* NULL when not captured */
    size_t body_len;
};

/* What the hook decided. */
struct sq_script_step_result {
    bool skip;        /* before: ctx:skip() was called */
    bool has_body;    /* before: ctx.body was set; body/body_len valid until the next call on s */
    const char *body; /* that body */
    size_t body_len;
    /* before, each valid until the next call on s; NULL when the hook did not set it:
     * method: ctx.method, a token (checked); headers: ctx:set_header's, "Name: value\r\n"
     * lines, one per name (checked: token names, values without CR, LF, NUL or other controls
     * but tab; never Host, Content-Length, Transfer-Encoding or a connection header) */
    const char *method;
    size_t method_len;
    const char *headers;
    size_t headers_len;
    bool has_url; /* ctx.url was set: vars->url accepted it (the engine keeps the target) */
};

/* Finds the global function fn for later calls (at plan load, once per state: a hook handle
 * belongs to the state that found it). Returns 0 and *hook; -ENOENT when fn is not a function in
 * this script (sq_script_error() names it); -SQ_ESCRIPT. */
SQ_MUST_CHECK int sq_script_hook_find(struct sq_script *s, const char *fn, int *hook);

/* Calls the hook with a context for step, reading and writing the VU's variables through
 * vars/vu. *res is always filled. Returns 0 or -SQ_ESCRIPT (an error in the hook, a set() of an
 * unknown variable, a before-only operation in an after hook). */
SQ_MUST_CHECK int sq_script_hook_call(struct sq_script *s, int hook, enum sq_script_when when,
                                      const struct sq_script_step *step,
                                      const struct sq_script_vars *vars, void *vu,
                                      struct sq_script_step_result *res);

/* ---- helpers, also for tests ---- */

/* Counts the HTTP/1.x requests in p[0, len) (what sq_script_request reports as *nreq). Returns
 * the count (>= 1), or 0 with why (static text) and *at (the byte offset of the problem) set. */
uint32_t sq_script_count_requests(const char *p, size_t len, const char **why, size_t *at);

#endif
