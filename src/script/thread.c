/* script/thread.c - addresses (wrk.lookup, wrk.connect, thread.addr) and thread objects
 * (thread:get, thread:set, thread:stop).
 *
 * A thread object lives in one state and acts on another (setup() and done() on the main state
 * reach each worker's state) or on its own (wrk.thread in a worker). It holds the state that
 * created it and a slot in that state's thread list, never a bare pointer to the other state,
 * so an object that outlives the state it names answers "thread is gone" instead of touching
 * freed memory.
 *
 * get/set copy a value between two lua_States: nil, booleans, numbers, strings and tables of
 * them (nested up to XFER_DEPTH), as wrk allows. The value is serialised into a C buffer in the
 * state that holds it and rebuilt in the other, each half inside that state's own protected
 * call (the caller's pcall, or lua_cpcall on the other state), so an error on either side (a
 * function value, a table nested too deep, memory) becomes a Lua error in the caller, never an
 * unprotected error in a state that is not running.
 *
 * Reaching into another state is safe because wrk's phases never overlap: setup() runs before
 * the workers start and done() after they have joined; a worker's script can reach only its
 * own state (a thread object cannot be transferred).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "script/internal.h"

#define XFER_DEPTH      32
#define CONNECT_TIMEOUT 2000 /* ms: wrk's default request timeout */
#define LOOKUP_MAX      64   /* addresses wrk.lookup returns at most */

/* ---- addresses ---- */

struct addr {
    socklen_t len;
    struct sockaddr_storage sa;
};

void sq_script__push_addr(lua_State *L, const struct sockaddr *sa, socklen_t len)
{
    struct addr *a = lua_newuserdata(L, sizeof(*a));
    memset(a, 0, sizeof(*a));
    if (len > sizeof(a->sa))
        len = sizeof(a->sa);
    memcpy(&a->sa, sa, len);
    a->len = len;
    luaL_getmetatable(L, SQ_SCRIPT_MT_ADDR);
    lua_setmetatable(L, -2);
}

/* The address object at idx, or NULL when it is something else. */
static struct addr *to_addr(lua_State *L, int idx)
{
    void *p = lua_touserdata(L, idx);
    if (!p || !lua_getmetatable(L, idx))
        return NULL;
    luaL_getmetatable(L, SQ_SCRIPT_MT_ADDR);
    bool ok = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return ok ? p : NULL;
}

/* "host:port", numeric, as wrk writes it (an IPv6 host without brackets). */
static int addr_tostring(lua_State *L)
{
    struct addr *a = to_addr(L, 1);
    if (!a)
        return luaL_error(L, "address expected");
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    int rc = getnameinfo((struct sockaddr *)&a->sa, a->len, host, sizeof(host), serv, sizeof(serv),
                         NI_NUMERICHOST | NI_NUMERICSERV);
    if (rc != 0)
        return luaL_error(L, "address: %s", gai_strerror(rc));
    lua_pushfstring(L, "%s:%s", host, serv);
    return 1;
}

static int addr_eq(lua_State *L)
{
    struct addr *a = to_addr(L, 1), *b = to_addr(L, 2);
    lua_pushboolean(L, a && b && a->len == b->len && memcmp(&a->sa, &b->sa, a->len) == 0);
    return 1;
}

/* wrk.lookup(host, service): every address getaddrinfo gives for a stream socket. */
static int l_lookup(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING)
        return luaL_error(L, "wrk.lookup: the host (argument #1) is a %s, not a string",
                          luaL_typename(L, 1));
    int st = lua_type(L, 2);
    if (st != LUA_TSTRING && st != LUA_TNUMBER && st != LUA_TNIL)
        return luaL_error(L,
                          "wrk.lookup: the service (argument #2) is a %s, not a string or a "
                          "port number",
                          luaL_typename(L, 2));
    const char *host = lua_tostring(L, 1);
    const char *service = st == LUA_TNIL ? NULL : lua_tostring(L, 2);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0)
        return luaL_error(L, "wrk.lookup: cannot resolve %s:%s: %s", host, service ? service : "",
                          gai_strerror(rc));
    /* Copied out first, so that nothing below can raise while res is held. */
    struct addr found[LOOKUP_MAX];
    int n = 0;
    for (struct addrinfo *ai = res; ai && n < LOOKUP_MAX; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(found[n].sa))
            continue;
        memset(&found[n], 0, sizeof(found[n]));
        memcpy(&found[n].sa, ai->ai_addr, ai->ai_addrlen);
        found[n].len = ai->ai_addrlen;
        n++;
    }
    freeaddrinfo(res);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        sq_script__push_addr(L, (struct sockaddr *)&found[i].sa, found[i].len);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* wrk.connect(addr): can a TCP connection be opened there now? At most CONNECT_TIMEOUT ms. */
static int l_connect(lua_State *L)
{
    struct addr *a = to_addr(L, 1);
    if (!a)
        return luaL_error(L, "wrk.connect: argument #1 is a %s, not an address from wrk.lookup",
                          luaL_typename(L, 1));
    bool ok = false;
    int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        int rc = connect(fd, (struct sockaddr *)&a->sa, a->len);
        if (rc == 0) {
            ok = true;
        } else if (errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int err = 0;
            socklen_t elen = sizeof(err);
            if (poll(&pfd, 1, CONNECT_TIMEOUT) == 1 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0)
                ok = true;
        }
        close(fd);
    }
    lua_pushboolean(L, ok);
    return 1;
}

void sq_script__install_net(lua_State *L, int wrk)
{
    luaL_newmetatable(L, SQ_SCRIPT_MT_ADDR);
    lua_pushcfunction(L, addr_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushcfunction(L, addr_eq);
    lua_setfield(L, -2, "__eq");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_lookup);
    lua_setfield(L, wrk, "lookup");
    lua_pushcfunction(L, l_connect);
    lua_setfield(L, wrk, "connect");
}

/* ---- thread objects ---- */

struct thread_ref {
    struct sq_script *holder; /* the state this object lives in */
    int32_t slot;             /* < 0: holder itself; else holder->threads[slot] */
};

void sq_script__push_thread(lua_State *L, struct sq_script *holder, int32_t slot)
{
    struct thread_ref *r = lua_newuserdata(L, sizeof(*r));
    r->holder = holder;
    r->slot = slot;
    luaL_getmetatable(L, SQ_SCRIPT_MT_THREAD);
    lua_setmetatable(L, -2);
}

/* The thread object at argument 1 and the state it names. */
static struct thread_ref *check_thread(lua_State *L, struct sq_script **t)
{
    struct thread_ref *r = luaL_checkudata(L, 1, SQ_SCRIPT_MT_THREAD);
    struct sq_script *h = r->holder;
    if (r->slot < 0)
        *t = h;
    else
        *t = (size_t)r->slot < h->nthreads ? h->threads[r->slot] : NULL;
    if (!*t)
        luaL_error(L, "thread is gone (its state was closed)");
    return r;
}

/* Serialised values: 'n' nil, 'f' false, 't' true, 'd' double, 's' u32 length + bytes,
 * '{' then key/value pairs then '}'. */
static void put(lua_State *L, struct sq_buf *b, const void *p, size_t n)
{
    if (sq_buf_append(b, p, n) < 0)
        luaL_error(L, "not enough memory");
}

static void ser(lua_State *L, int idx, struct sq_buf *b, int depth)
{
    if (idx < 0)
        idx = lua_gettop(L) + idx + 1;
    int t = lua_type(L, idx);
    switch (t) {
    case LUA_TNIL:
        put(L, b, "n", 1);
        return;
    case LUA_TBOOLEAN:
        put(L, b, lua_toboolean(L, idx) ? "t" : "f", 1);
        return;
    case LUA_TNUMBER: {
        double d = lua_tonumber(L, idx);
        put(L, b, "d", 1);
        put(L, b, &d, sizeof(d));
        return;
    }
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        if (n > UINT32_MAX)
            luaL_error(L, "cannot transfer a string of %d MiB", (int)(n >> 20));
        uint32_t n32 = (uint32_t)n;
        put(L, b, "s", 1);
        put(L, b, &n32, sizeof(n32));
        put(L, b, s, n);
        return;
    }
    case LUA_TTABLE:
        if (depth >= XFER_DEPTH)
            luaL_error(L, "cannot transfer tables nested more than %d deep (a cycle?)", XFER_DEPTH);
        luaL_checkstack(L, 3, "transfer");
        put(L, b, "{", 1);
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            ser(L, -2, b, depth + 1);
            ser(L, -1, b, depth + 1);
            lua_pop(L, 1);
        }
        put(L, b, "}", 1);
        return;
    default:
        luaL_error(L,
                   "cannot transfer a %s between threads (only nil, booleans, numbers, strings "
                   "and tables of them)",
                   lua_typename(L, t));
    }
}

/* Rebuilds one value from b at *pos onto L's stack. The buffer is this module's own output. */
static void deser(lua_State *L, const struct sq_buf *b, size_t *pos)
{
    luaL_checkstack(L, 3, "transfer");
    char tag = b->p[(*pos)++];
    switch (tag) {
    case 'n':
        lua_pushnil(L);
        return;
    case 'f':
    case 't':
        lua_pushboolean(L, tag == 't');
        return;
    case 'd': {
        double d;
        memcpy(&d, b->p + *pos, sizeof(d));
        *pos += sizeof(d);
        lua_pushnumber(L, d);
        return;
    }
    case 's': {
        uint32_t n;
        memcpy(&n, b->p + *pos, sizeof(n));
        *pos += sizeof(n);
        lua_pushlstring(L, b->p + *pos, n);
        *pos += n;
        return;
    }
    default: /* '{' */
        lua_newtable(L);
        while (b->p[*pos] != '}') {
            deser(L, b, pos);
            deser(L, b, pos);
            if (lua_isnil(L, -2)) /* cannot happen: a key is never nil */
                lua_pop(L, 2);
            else
                lua_rawset(L, -3);
        }
        (*pos)++;
        return;
    }
}

struct xfer {
    struct sq_buf *b;
    const char *name;
    size_t name_len;
};

/* In the other state: serialise its global name into b. */
static int xget(lua_State *L)
{
    struct xfer *x = lua_touserdata(L, 1);
    lua_pushlstring(L, x->name, x->name_len);
    lua_rawget(L, LUA_GLOBALSINDEX);
    ser(L, -1, x->b, 0);
    return 0;
}

/* In the other state: rebuild b and set it as its global name. */
static int xset(lua_State *L)
{
    struct xfer *x = lua_touserdata(L, 1);
    size_t pos = 0;
    lua_pushlstring(L, x->name, x->name_len);
    deser(L, x->b, &pos);
    lua_rawset(L, LUA_GLOBALSINDEX);
    return 0;
}

/* Runs fn on state t protected; on an error raises it in L (the caller's state). */
static void on_other(lua_State *L, struct sq_script *t, lua_CFunction fn, struct xfer *x,
                     const char *what)
{
    int rc = lua_cpcall(t->L, fn, x);
    if (rc == 0)
        return;
    char msg[512];
    const char *m = lua_tostring(t->L, -1);
    snprintf(msg, sizeof(msg), "%s", m ? m : "not enough memory");
    lua_pop(t->L, 1);
    luaL_error(L, "%s('%s'): %s", what, x->name, msg);
}

static int thread_get(lua_State *L)
{
    struct sq_script *t;
    struct thread_ref *r = check_thread(L, &t);
    if (lua_type(L, 2) != LUA_TSTRING)
        return luaL_error(L, "thread:get: the name is a %s, not a string", luaL_typename(L, 2));
    struct xfer x = {.b = &r->holder->xfer};
    x.name = lua_tolstring(L, 2, &x.name_len);
    sq_buf_reset(x.b);
    on_other(L, t, xget, &x, "thread:get");
    size_t pos = 0;
    deser(L, x.b, &pos);
    return 1;
}

static int thread_set(lua_State *L)
{
    struct sq_script *t;
    struct thread_ref *r = check_thread(L, &t);
    if (lua_type(L, 2) != LUA_TSTRING)
        return luaL_error(L, "thread:set: the name is a %s, not a string", luaL_typename(L, 2));
    lua_settop(L, 3);
    struct xfer x = {.b = &r->holder->xfer};
    x.name = lua_tolstring(L, 2, &x.name_len);
    sq_buf_reset(x.b);
    ser(L, 3, x.b, 0);
    on_other(L, t, xset, &x, "thread:set");
    return 0;
}

static int thread_stop(lua_State *L)
{
    struct sq_script *t;
    check_thread(L, &t);
    atomic_store_explicit(&t->stop, true, memory_order_release);
    return 0;
}

static int thread_index(lua_State *L)
{
    struct sq_script *t;
    check_thread(L, &t);
    const char *key = lua_tostring(L, 2);
    if (key && strcmp(key, "addr") == 0) {
        if (t->has_addr)
            sq_script__push_addr(L, (struct sockaddr *)&t->addr, t->addr_len);
        else
            lua_pushnil(L);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1)); /* the methods */
    return 1;
}

static int thread_newindex(lua_State *L)
{
    struct sq_script *t;
    check_thread(L, &t);
    const char *key = lua_tostring(L, 2);
    if (!key || strcmp(key, "addr") != 0)
        return luaL_error(L, "cannot set thread.%s (only thread.addr can be set)",
                          key ? key : luaL_typename(L, 2));
    struct addr *a = to_addr(L, 3);
    if (!a)
        return luaL_error(L, "thread.addr must be an address from wrk.lookup, not a %s",
                          luaL_typename(L, 3));
    t->addr = a->sa;
    t->addr_len = a->len;
    t->has_addr = true;
    return 0;
}

void sq_script__object_mt(lua_State *L, const char *mt, const luaL_Reg *methods,
                          lua_CFunction index, lua_CFunction newindex)
{
    int n = 0;
    while (methods[n].name)
        n++;
    luaL_newmetatable(L, mt);
    lua_createtable(L, 0, n);
    for (const luaL_Reg *m = methods; m->name; m++) {
        lua_pushcfunction(L, m->func);
        lua_setfield(L, -2, m->name);
    }
    lua_pushcclosure(L, index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pop(L, 1);
}

void sq_script__install_thread(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"get", thread_get}, {"set", thread_set}, {"stop", thread_stop}, {NULL, NULL}};
    sq_script__object_mt(L, SQ_SCRIPT_MT_THREAD, methods, thread_index, thread_newindex);
}
