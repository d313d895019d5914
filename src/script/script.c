/* script/script.c - a state's life: build, load, wrk's phases, the per-request hooks, done().
 *
 * Every entry point that runs Lua goes through one trampoline: a C closure, kept in a fixed
 * stack slot, that lua_pcall runs with a pointer to a struct op. The op's function does the
 * work inside the protected call, so a runtime error anywhere (the hook itself, a bad return
 * value, an allocation while pushing a response body) unwinds to lua_pcall, whose message
 * handler appends the traceback; the entry point copies the message into s->err and returns
 * -SQ_ESCRIPT. No path calls Lua unprotected, so a script cannot abort the process.
 *
 * The per-request cost of request() is: push the trampoline and a light userdata (no
 * allocation), lua_pcall, one raw lookup of the global `request` by an interned key held as an
 * upvalue, lua_call of the script's function, and one pointer compare to learn whether the
 * returned string is the one counted last time. The string stays anchored in SLOT_REQ until the
 * next call, so the engine writes it without a copy. Nothing here allocates per call; what Lua
 * allocates is what the script itself builds (wrk.format renders into a reused C buffer and
 * allocates only the resulting string).
 */
#include "script/script.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "script/internal.h"

/* ---- errors ---- */

static int vfail(struct sq_script *s, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    sq_buf_reset(&s->err);
    if (n < 0 || sq_buf_reserve(&s->err, (size_t)n + 1) < 0) {
        static const char oom[] = "out of memory while formatting a script error";
        if (s->err.cap >= sizeof(oom)) {
            memcpy(s->err.p, oom, sizeof(oom));
            s->err.len = sizeof(oom) - 1;
        }
        return -SQ_ESCRIPT;
    }
    vsnprintf(s->err.p, (size_t)n + 1, fmt, ap);
    s->err.len = (size_t)n;
    return -SQ_ESCRIPT;
}

int sq_script__fail(struct sq_script *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(s, fmt, ap);
    va_end(ap);
    return rc;
}

const char *sq_script_error(const struct sq_script *s)
{
    return s && s->err.len ? s->err.p : "";
}

/* The message handler: the error as a string, then the traceback from where it was raised. */
static int msgh(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1);
        else
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* ---- the trampoline ---- */

struct op;
typedef int (*op_fn)(lua_State *L, struct op *op);

struct op {
    op_fn fn;
    struct sq_script *s;
    union {
        struct {
            const char *url;
            int argc;
            const char *const *argv;
        } init;
        struct {
            int status;
            const struct sq_resp_header *h;
            size_t nh;
            const char *body;
            size_t body_len;
        } resp;
        struct {
            struct sq_script *thread;
            int32_t slot;
        } setup;
        struct {
            const struct sq_script_summary *sum;
            const struct sq_hist *lat, *req;
        } done;
        struct {
            const char *name;
            int ref;
        } find;
        int hook;
    } u;
};

static int tramp(lua_State *L)
{
    struct op *op = lua_touserdata(L, 1);
    lua_settop(L, 0);
    return op->fn(L, op);
}

/* " (defined at file:line)" for the Lua function at the top of the stack, which it pops: an
 * error raised by a C function in a tail call (`return wrk.format(x)`) has no line of its own,
 * since the caller's frame is gone, so the message names the hook's definition instead. */
static void defined_at(lua_State *L, char *out, size_t len)
{
    lua_Debug ar;
    out[0] = '\0';
    if (lua_isfunction(L, -1) && !lua_iscfunction(L, -1) && lua_getinfo(L, ">S", &ar) &&
        ar.linedefined > 0)
        snprintf(out, len, " (defined at %s:%d)", ar.short_src, ar.linedefined);
    else
        lua_pop(L, 1);
}

/* Does msg start with "chunk:line: "? */
static bool has_position(const char *msg)
{
    const char *c = strchr(msg, ':');
    if (!c || c[1] < '0' || c[1] > '9')
        return false;
    c++;
    while (*c >= '0' && *c <= '9')
        c++;
    return *c == ':';
}

/* Removes the traceback lines "\n\t[C]: at 0x..." (the trampoline, and C functions LuaJIT cannot
 * name): they say nothing to the script's author. */
static void drop_anonymous_c_frames(struct sq_buf *b)
{
    static const char pat[] = "\n\t[C]: at 0x";
    if (!b->p)
        return;
    char *p = b->p, *end = b->p + b->len;
    while ((p = memmem(p, (size_t)(end - p), pat, sizeof(pat) - 1)) != NULL) {
        char *eol = memchr(p + 1, '\n', (size_t)(end - p - 1));
        char *next = eol ? eol : end;
        memmove(p, next, (size_t)(end - next));
        end -= next - p;
    }
    b->len = (size_t)(end - b->p);
    *end = '\0';
}

/* After a failed lua_pcall (error message at SLOT_TOP + 1): sets s->err to "what (defined at
 * file:line): message" and returns -SQ_ESCRIPT with the stack back at SLOT_TOP. fn names the
 * hook (a global name, or a registry ref when fn is NULL and ref >= 0) for the "defined at"
 * part, added only when the message carries no position of its own; neither: no such part. */
static int pcall_failed(struct sq_script *s, int rc, const char *what, const char *fn, int ref)
{
    lua_State *L = s->L;
    const char *msg = lua_tostring(L, SLOT_TOP + 1);
    if (!msg)
        msg = rc == LUA_ERRMEM ? "not enough memory" : "unknown error";
    char where[320] = "";
    if ((fn || ref >= 0) && !has_position(msg)) {
        if (fn)
            lua_getfield(L, LUA_GLOBALSINDEX, fn);
        else
            lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
        defined_at(L, where, sizeof(where));
    }
    sq_script__fail(s, "%s%s: %s", what, where, msg);
    drop_anonymous_c_frames(&s->err);
    lua_settop(L, SLOT_TOP);
    return -SQ_ESCRIPT;
}

/* Runs op protected, leaving nres results above SLOT_TOP; errors as pcall_failed. */
static int run_fn(struct sq_script *s, struct op *op, int nres, const char *what, const char *fn,
                  int ref)
{
    lua_State *L = s->L;
    op->s = s;
    lua_pushvalue(L, SLOT_TRAMP);
    lua_pushlightuserdata(L, op);
    int rc = lua_pcall(L, 1, nres, SLOT_MSGH);
    if (SQ_LIKELY(rc == 0))
        return 0;
    return pcall_failed(s, rc, what, fn, ref);
}

static int run(struct sq_script *s, struct op *op, int nres, const char *what)
{
    return run_fn(s, op, nres, what, NULL, -1);
}

/* The global `name` held in upvalue k, pushed. */
static void push_global(lua_State *L, int k)
{
    lua_pushvalue(L, lua_upvalueindex(k));
    lua_rawget(L, LUA_GLOBALSINDEX);
}

/* ---- building a state ---- */

struct build {
    struct sq_script *s;
    const struct sq_script_target *t;
    int ref; /* registry: the table of the fixed slots' values */
};

static void set_str(lua_State *L, int tbl, const char *key, const char *val)
{
    if (val)
        lua_pushstring(L, val);
    else
        lua_pushnil(L);
    lua_setfield(L, tbl, key);
}

static int build(lua_State *L)
{
    struct build *b = lua_touserdata(L, 1);
    const struct sq_script_target *t = b->t;
    lua_settop(L, 0);
    luaL_openlibs(L);

    /* wrk = { scheme, host, port, method, path, headers, body, thread } */
    lua_createtable(L, 0, 16);
    int wrk = lua_gettop(L);
    set_str(L, wrk, "scheme", t && t->scheme ? t->scheme : "http");
    set_str(L, wrk, "host", t && t->host ? t->host : "localhost");
    set_str(L, wrk, "port", t ? t->port : NULL);
    set_str(L, wrk, "method", "GET");
    set_str(L, wrk, "path", t && t->path ? t->path : "/");
    lua_newtable(L);
    for (size_t i = 0; t && i < t->nheaders; i++) {
        if (!t->headers[i].name)
            continue;
        lua_pushstring(L, t->headers[i].value ? t->headers[i].value : "");
        lua_setfield(L, -2, t->headers[i].name);
    }
    lua_setfield(L, wrk, "headers");
    sq_script__install_format(L, b->s, wrk);
    sq_script__install_net(L, wrk);
    sq_script__install_thread(L);
    sq_script__install_stats(L);
    if (t && t->seeded) {
        /* a double holds 53 bits exactly: LuaJIT mixes them into its generator's state */
        lua_getglobal(L, "math");
        lua_getfield(L, -1, "randomseed");
        lua_pushnumber(L, (lua_Number)(t->seed >> 11));
        lua_call(L, 1, 0);
        lua_pop(L, 1);
    }
    lua_pushvalue(L, wrk);
    lua_setglobal(L, "wrk");
    /* require "wrk" finds it too, as in wrk */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaded");
    lua_pushvalue(L, wrk);
    lua_setfield(L, -2, "wrk");
    lua_pop(L, 2);

    /* The values of the fixed slots, handed out through the registry (lua_cpcall discards
     * what this function returns). */
    lua_createtable(L, SLOT_TOP, 0);
    int slots = lua_gettop(L);
    lua_pushcfunction(L, msgh);
    lua_rawseti(L, slots, SLOT_MSGH);
    lua_pushvalue(L, wrk);           /* UP_WRK */
    lua_pushliteral(L, "request");   /* UP_K_REQUEST */
    lua_pushliteral(L, "response");  /* UP_K_RESPONSE */
    sq_script__install_ctx(L, b->s); /* UP_CTX */
    lua_pushcclosure(L, tramp, UP__N);
    lua_rawseti(L, slots, SLOT_TRAMP);
    lua_pushliteral(L, "request");
    lua_rawseti(L, slots, SLOT_K_REQUEST);
    lua_pushliteral(L, "delay");
    lua_rawseti(L, slots, SLOT_K_DELAY);
    b->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

/* Builds the state and runs the chunk src[0, len) named chunk ("@file" or "=name"). */
static int create(const char *chunk, const char *shown, const char *src, size_t len,
                  const struct sq_script_target *t, struct sq_script **out, char *err,
                  size_t errlen)
{
    int lr = sq_luajit_load(err, errlen); /* script/luajit.h: every state is built here */
    if (lr < 0)
        return lr;
    struct sq_script *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    atomic_init(&s->stop, false);
    s->slot = -1;
    s->L = luaL_newstate();
    if (!s->L) {
        free(s);
        return -ENOMEM;
    }
    lua_State *L = s->L;
    struct build b = {.s = s, .t = t, .ref = LUA_NOREF};
    int rc = lua_cpcall(L, build, &b);
    if (rc != 0 || !lua_checkstack(L, SLOT_TOP + 8)) {
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot build the Lua state: %s", shown,
                     rc && lua_tostring(L, -1) ? lua_tostring(L, -1) : "not enough memory");
        sq_script_free(s);
        return -ENOMEM;
    }
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, b.ref);
    for (int i = 1; i <= SLOT_TOP; i++)
        lua_rawgeti(L, 1, i);
    lua_remove(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, b.ref);

    /* A first line starting with '#' is skipped, as luaL_loadfile does; its newline stays so
     * line numbers do not move. */
    if (len && src[0] == '#') {
        const char *nl = memchr(src, '\n', len);
        len = nl ? len - (size_t)(nl - src) : 0;
        src = nl ? nl : src;
    }
    rc = luaL_loadbuffer(L, src, len, chunk);
    if (rc == 0)
        rc = lua_pcall(L, 0, 0, SLOT_MSGH);
    if (rc != 0) {
        const char *msg = lua_tostring(L, -1);
        if (err && errlen)
            snprintf(err, errlen, "%s", msg ? msg : "not enough memory");
        sq_script_free(s);
        return rc == LUA_ERRMEM ? -ENOMEM : -SQ_ESCRIPT;
    }
    lua_settop(L, SLOT_TOP);
    *out = s;
    return 0;
}

int sq_script_new_string(const char *name, const char *src, size_t len,
                         const struct sq_script_target *t, struct sq_script **out, char *err,
                         size_t errlen)
{
    char chunk[512];
    snprintf(chunk, sizeof(chunk), "=%s", name ? name : "script");
    return create(chunk, name ? name : "script", src, len, t, out, err, errlen);
}

int sq_script_new(const char *file, const struct sq_script_target *t, struct sq_script **out,
                  char *err, size_t errlen)
{
    FILE *f = fopen(file, "rb");
    if (!f) {
        int e = errno;
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot open: %s", file, strerror(e));
        return -e;
    }
    struct sq_buf src = {0};
    char chunk[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        if ((rc = sq_buf_append(&src, chunk, n)) < 0)
            break;
    if (rc == 0 && ferror(f)) {
        rc = -EIO;
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot read: %s", file, strerror(EIO));
    }
    fclose(f);
    if (rc == 0) {
        char name[4096];
        snprintf(name, sizeof(name), "@%s", file);
        rc = create(name, file, src.p ? src.p : "", src.len, t, out, err, errlen);
    }
    sq_buf_dispose(&src);
    return rc;
}

void sq_script_free(struct sq_script *s)
{
    if (!s)
        return;
    if (s->parent && s->slot >= 0 && (size_t)s->slot < s->parent->nthreads)
        s->parent->threads[s->slot] = NULL;
    for (size_t i = 0; i < s->nthreads; i++)
        if (s->threads[i])
            s->threads[i]->parent = NULL;
    if (s->L)
        lua_close(s->L);
    free(s->threads);
    free(s->static_req);
    sq_buf_dispose(&s->err);
    sq_buf_dispose(&s->fmt);
    sq_buf_dispose(&s->xfer);
    sq_buf_dispose(&s->hook_body);
    sq_buf_dispose(&s->hook_method);
    sq_buf_dispose(&s->hook_url);
    sq_buf_dispose(&s->hook_hdrs);
    free(s);
}

/* ---- hooks present ---- */

static const struct {
    const char *name;
    unsigned bit;
} hook_names[] = {
    {"setup", SQ_SCRIPT_SETUP},     {"init", SQ_SCRIPT_INIT},         {"delay", SQ_SCRIPT_DELAY},
    {"request", SQ_SCRIPT_REQUEST}, {"response", SQ_SCRIPT_RESPONSE}, {"done", SQ_SCRIPT_DONE},
};

static int op_hooks(lua_State *L, struct op *op)
{
    unsigned bits = 0;
    for (size_t i = 0; i < SQ_ARRAY_LEN(hook_names); i++) {
        lua_getglobal(L, hook_names[i].name);
        if (lua_isfunction(L, -1))
            bits |= hook_names[i].bit;
        lua_pop(L, 1);
    }
    op->u.hook = (int)bits;
    return 0;
}

unsigned sq_script_hooks(const struct sq_script *cs)
{
    struct sq_script *s = (struct sq_script *)cs; /* s->err only changes on an error */
    struct op op = {.fn = op_hooks};
    if (run(s, &op, 0, "hooks") < 0)
        return 0;
    return (unsigned)op.u.hook;
}

/* ---- setup ---- */

int sq_script_set_addr(struct sq_script *thread, const struct sockaddr *sa, socklen_t len)
{
    if (!sa || len == 0 || len > sizeof(thread->addr))
        return -EINVAL;
    memset(&thread->addr, 0, sizeof(thread->addr));
    memcpy(&thread->addr, sa, len);
    thread->addr_len = len;
    thread->has_addr = true;
    return 0;
}

bool sq_script_addr(const struct sq_script *thread, struct sockaddr_storage *out, socklen_t *len)
{
    if (!thread->has_addr)
        return false;
    *out = thread->addr;
    *len = thread->addr_len;
    return true;
}

/* wrk.thread = this state's own thread object, once. */
static int op_bind(lua_State *L, struct op *op)
{
    lua_pushvalue(L, lua_upvalueindex(UP_WRK));
    lua_getfield(L, -1, "thread");
    if (lua_isnil(L, -1)) {
        sq_script__push_thread(L, op->s, -1);
        lua_setfield(L, -3, "thread");
    }
    return 0;
}

static int op_setup(lua_State *L, struct op *op)
{
    lua_getglobal(L, "setup");
    if (!lua_isfunction(L, -1))
        return 0;
    sq_script__push_thread(L, op->s, op->u.setup.slot);
    lua_call(L, 1, 0);
    return 0;
}

int sq_script_setup(struct sq_script *main, struct sq_script *thread)
{
    if (main == thread)
        return sq_script__fail(main, "setup: the main state cannot be its own thread");
    if (thread->parent != main) {
        if (thread->parent)
            thread->parent->threads[thread->slot] = NULL;
        thread->parent = NULL;
        if (main->nthreads == main->cap_threads) {
            size_t cap = main->cap_threads ? main->cap_threads * 2 : 8;
            struct sq_script **p = realloc(main->threads, cap * sizeof(*p));
            if (!p)
                return -ENOMEM;
            main->threads = p;
            main->cap_threads = cap;
        }
        if (main->nthreads >= INT32_MAX)
            return -ENOMEM;
        thread->slot = (int32_t)main->nthreads;
        main->threads[main->nthreads++] = thread;
        thread->parent = main;
    }
    struct op bind = {.fn = op_bind};
    if (run(thread, &bind, 0, "setup") < 0)
        return sq_script__fail(main, "%s", sq_script_error(thread));
    struct op op = {.fn = op_setup, .u.setup = {thread, thread->slot}};
    return run_fn(main, &op, 0, "setup()", "setup", -1);
}

/* ---- init ---- */

/* wrk.request(): the static request, held as the upvalue. */
static int static_request(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    return 1;
}

static int op_init(lua_State *L, struct op *op)
{
    struct sq_script *s = op->s;
    op_bind(L, op);
    lua_settop(L, 0);
    int wrk = lua_upvalueindex(UP_WRK);

    /* Host: host[:port], an IPv6 literal in brackets, unless -H or the script set one. */
    lua_getfield(L, wrk, "headers");
    if (!lua_istable(L, -1))
        return luaL_error(L, "wrk.headers is a %s, not a table", luaL_typename(L, -1));
    lua_getfield(L, -1, "Host");
    if (lua_isnil(L, -1)) {
        lua_getfield(L, wrk, "host");
        lua_getfield(L, wrk, "port");
        const char *host = lua_tostring(L, -2);
        const char *port = lua_tostring(L, -1);
        if (host) {
            bool v6 = strchr(host, ':') != NULL;
            lua_pushfstring(L, "%s%s%s%s%s", v6 ? "[" : "", host, v6 ? "]" : "", port ? ":" : "",
                            port ? port : "");
            lua_setfield(L, -5, "Host");
        }
    }
    lua_settop(L, 0);

    lua_getglobal(L, "init");
    if (lua_isfunction(L, -1)) {
        lua_createtable(L, op->u.init.argc, 1);
        lua_pushstring(L, op->u.init.url ? op->u.init.url : "");
        lua_rawseti(L, -2, 0);
        for (int i = 0; i < op->u.init.argc; i++) {
            lua_pushstring(L, op->u.init.argv[i]);
            lua_rawseti(L, -2, i + 1);
        }
        lua_call(L, 1, 0);
    }
    lua_settop(L, 0);

    /* The static request: wrk.format() over the wrk table as init() left it. */
    lua_getfield(L, wrk, "format");
    lua_call(L, 0, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "wrk.format() returned a %s, not a string", luaL_typename(L, -1));
    size_t len;
    const char *req = lua_tolstring(L, -1, &len);
    const char *why;
    size_t at;
    uint32_t n = sq_script_count_requests(req, len, &why, &at);
    if (n == 0)
        return luaL_error(L,
                          "the request wrk.format() renders from the wrk table is not valid: "
                          "%s at byte %d",
                          why, (int)at);
    char *copy = malloc(len + 1);
    if (!copy)
        return luaL_error(L, "not enough memory");
    memcpy(copy, req, len);
    copy[len] = '\0';
    free(s->static_req);
    s->static_req = copy;
    s->static_len = len;
    s->static_nreq = n;

    /* wrk.request() returns it (wrk's setup.lua calls it from its own request()). */
    lua_pushcclosure(L, static_request, 1);
    lua_setfield(L, wrk, "request");
    return 0;
}

int sq_script_init(struct sq_script *s, const char *url, int argc, const char *const *argv)
{
    struct op op = {.fn = op_init, .u.init = {url, argc, argv}};
    int rc = run(s, &op, 0, "init");
    if (rc == 0)
        s->inited = true;
    return rc;
}

void sq_script_static_request(const struct sq_script *s, const char **req, size_t *len,
                              uint32_t *nreq)
{
    *req = s->static_req;
    *len = s->static_len;
    *nreq = s->static_nreq;
}

/* ---- per request ---- */

/* request() was removed after init (request = nil): wrk falls back to wrk.request. */
static int op_request(lua_State *L, struct op *op)
{
    (void)op;
    lua_pushvalue(L, lua_upvalueindex(UP_WRK));
    lua_pushvalue(L, lua_upvalueindex(UP_K_REQUEST));
    lua_rawget(L, -2);
    if (!lua_isfunction(L, -1))
        return luaL_error(L, "neither request nor wrk.request is a function");
    lua_call(L, 0, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "wrk.request() returned a %s, not a string", luaL_typename(L, -1));
    return 1;
}

int sq_script_request(struct sq_script *s, const char **req, size_t *len, uint32_t *nreq)
{
    lua_State *L = s->L;
    int rc;
    lua_pushvalue(L, SLOT_K_REQUEST);
    lua_rawget(L, LUA_GLOBALSINDEX);
    if (SQ_LIKELY(lua_isfunction(L, -1))) {
        rc = lua_pcall(L, 0, 1, SLOT_MSGH);
        if (SQ_UNLIKELY(rc != 0))
            return pcall_failed(s, rc, "request()", "request", -1);
        if (SQ_UNLIKELY(lua_type(L, -1) != LUA_TSTRING)) {
            const char *t = lua_typename(L, lua_type(L, -1));
            lua_settop(L, SLOT_TOP);
            lua_pushvalue(L, SLOT_K_REQUEST);
            lua_rawget(L, LUA_GLOBALSINDEX);
            char where[320];
            defined_at(L, where, sizeof(where));
            return sq_script__fail(s, "request()%s: returned a %s, not a string", where, t);
        }
    } else {
        lua_settop(L, SLOT_TOP);
        struct op op = {.fn = op_request};
        rc = run_fn(s, &op, 1, "request()", "request", -1);
        if (SQ_UNLIKELY(rc < 0))
            return rc;
    }
    size_t n;
    const char *p = lua_tolstring(L, -1, &n);
    /* The string counted last time is still anchored in SLOT_REQ, so an equal pointer is the
     * same string: no other object can live at its address. */
    if (p != s->last_req || n != s->last_req_len) {
        const char *why;
        size_t at;
        uint32_t count = sq_script_count_requests(p, n, &why, &at);
        if (SQ_UNLIKELY(count == 0)) {
            lua_settop(L, SLOT_TOP);
            return sq_script__fail(s,
                                   "request(): returned bytes that are not complete HTTP "
                                   "requests: %s at byte %zu",
                                   why, at);
        }
        s->last_nreq = count;
    }
    lua_replace(L, SLOT_REQ);
    s->last_req = p;
    s->last_req_len = n;
    *req = p;
    *len = n;
    *nreq = s->last_nreq;
    return 0;
}

static int op_response(lua_State *L, struct op *op)
{
    push_global(L, UP_K_RESPONSE);
    if (!lua_isfunction(L, -1))
        return 0; /* removed at run time: nothing to call */
    lua_pushinteger(L, op->u.resp.status);
    lua_createtable(L, 0, (int)(op->u.resp.nh < 64 ? op->u.resp.nh : 64));
    for (size_t i = 0; i < op->u.resp.nh; i++) {
        const struct sq_resp_header *h = &op->u.resp.h[i];
        lua_pushlstring(L, h->name, h->name_len);
        lua_pushlstring(L, h->value, h->value_len);
        lua_rawset(L, -3);
    }
    lua_pushlstring(L, op->u.resp.body ? op->u.resp.body : "", op->u.resp.body_len);
    lua_call(L, 3, 0);
    return 0;
}

int sq_script_response(struct sq_script *s, int status, const struct sq_resp_header *headers,
                       size_t nheaders, const char *body, size_t body_len)
{
    struct op op = {.fn = op_response,
                    .u.resp = {status, headers, nheaders, body, body ? body_len : 0}};
    return run_fn(s, &op, 0, "response()", "response", -1);
}

int sq_script_delay(struct sq_script *s, int64_t *ns)
{
    lua_State *L = s->L;
    lua_pushvalue(L, SLOT_K_DELAY);
    lua_rawget(L, LUA_GLOBALSINDEX);
    if (!lua_isfunction(L, -1)) {
        lua_settop(L, SLOT_TOP);
        *ns = 0;
        return 0;
    }
    int rc = lua_pcall(L, 0, 1, SLOT_MSGH);
    if (SQ_UNLIKELY(rc != 0))
        return pcall_failed(s, rc, "delay()", "delay", -1);
    int t = lua_type(L, -1);
    bool num = lua_isnumber(L, -1); /* a number, or a string that reads as one (as in wrk) */
    double ms = num ? lua_tonumber(L, -1) : 0;
    lua_settop(L, SLOT_TOP);
    if (SQ_UNLIKELY(!num && t != LUA_TNIL) || ms != ms) {
        lua_pushvalue(L, SLOT_K_DELAY);
        lua_rawget(L, LUA_GLOBALSINDEX);
        char where[320];
        defined_at(L, where, sizeof(where));
        return sq_script__fail(s, "delay()%s: returned %s%s, not a number of milliseconds", where,
                               num ? "NaN" : "a ", num ? "" : lua_typename(L, t));
    }
    /* A day is more than any run: longer waits are capped there, not overflowed. */
    *ns = ms <= 0 ? 0 : ms >= 86400e3 ? (int64_t)86400e9 : (int64_t)(ms * 1e6);
    return 0;
}

bool sq_script_stopped(const struct sq_script *s)
{
    return atomic_load_explicit(&((struct sq_script *)s)->stop, memory_order_acquire);
}

/* ---- done ---- */

static void set_num(lua_State *L, const char *key, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, key);
}

static int op_done(lua_State *L, struct op *op)
{
    lua_getglobal(L, "done");
    if (!lua_isfunction(L, -1))
        return 0;
    const struct sq_script_summary *sum = op->u.done.sum;
    lua_createtable(L, 0, 4);
    set_num(L, "duration", (double)sum->duration_us);
    set_num(L, "requests", (double)sum->requests);
    set_num(L, "bytes", (double)sum->bytes);
    lua_createtable(L, 0, 5);
    set_num(L, "connect", (double)sum->errors.connect);
    set_num(L, "read", (double)sum->errors.read);
    set_num(L, "write", (double)sum->errors.write);
    set_num(L, "status", (double)sum->errors.status);
    set_num(L, "timeout", (double)sum->errors.timeout);
    lua_setfield(L, -2, "errors");
    sq_script__push_stats(L, op->s, op->u.done.lat);
    sq_script__push_stats(L, op->s, op->u.done.req);
    lua_call(L, 3, 0);
    return 0;
}

int sq_script_done(struct sq_script *main, const struct sq_script_summary *sum,
                   const struct sq_hist *latency, const struct sq_hist *requests)
{
    static const struct sq_script_summary none;
    struct op op = {.fn = op_done, .u.done = {sum ? sum : &none, latency, requests}};
    main->in_done = true;
    int rc = run_fn(main, &op, 0, "done()", "done", -1);
    main->in_done = false;
    main->done_gen++;
    return rc;
}

/* ---- plan hooks: finding and calling (the context object is in hooks.c) ---- */

static int op_find(lua_State *L, struct op *op)
{
    lua_getglobal(L, op->u.find.name);
    if (!lua_isfunction(L, -1)) {
        op->u.find.ref = LUA_NOREF;
        return 0;
    }
    op->u.find.ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

int sq_script_hook_find(struct sq_script *s, const char *fn, int *hook)
{
    struct op op = {.fn = op_find, .u.find = {fn, LUA_NOREF}};
    int rc = run(s, &op, 0, "hook");
    if (rc < 0)
        return rc;
    if (op.u.find.ref == LUA_NOREF || op.u.find.ref == LUA_REFNIL) {
        sq_script__fail(s, "hook '%s' is not a function in the script", fn);
        return -ENOENT;
    }
    *hook = op.u.find.ref;
    return 0;
}

static int op_hook(lua_State *L, struct op *op)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, op->u.hook);
    if (!lua_isfunction(L, -1))
        return luaL_error(L, "hook %d is not a hook of this script", op->u.hook);
    lua_pushvalue(L, lua_upvalueindex(UP_CTX));
    lua_call(L, 1, 0);
    return 0;
}

int sq_script_hook_call(struct sq_script *s, int hook, enum sq_script_when when,
                        const struct sq_script_step *step, const struct sq_script_vars *vars,
                        void *vu, struct sq_script_step_result *res)
{
    *res = (struct sq_script_step_result){0};
    sq_buf_reset(&s->hook_body);
    sq_buf_reset(&s->hook_method);
    sq_buf_reset(&s->hook_url);
    sq_buf_reset(&s->hook_hdrs);
    struct sq_script__call call = {when, step, vars, vu, res};
    s->call = &call;
    struct op op = {.fn = op_hook, .u.hook = hook};
    char what[160];
    snprintf(what, sizeof(what), "%s hook of step '%s'",
             when == SQ_SCRIPT_BEFORE ? "before" : "after", step && step->name ? step->name : "?");
    int rc = run_fn(s, &op, 0, what, NULL, hook);
    s->call = NULL;
    if (rc < 0) {
        *res = (struct sq_script_step_result){0};
        return rc;
    }
    if (res->has_body) {
        res->body = s->hook_body.p ? s->hook_body.p : "";
        res->body_len = s->hook_body.len;
    }
    if (s->hook_method.len) {
        res->method = s->hook_method.p;
        res->method_len = s->hook_method.len;
    }
    if (s->hook_hdrs.len) {
        res->headers = s->hook_hdrs.p;
        res->headers_len = s->hook_hdrs.len;
    }
    return 0;
}
