/* script/hooks.c - the context object a plan step hook receives (script.h: "plan hooks").
 *
 * One object per state, made when the state is built and handed to every hook call; what it
 * shows comes from s->call, the call in progress, so a hook call allocates nothing for the
 * object itself. Outside a call s->call is NULL and every use of a kept object is an error.
 * The VU's variables stay in the engine: ctx:get/ctx:set go through the engine's callbacks.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "script/internal.h"

struct ctx_ud {
    struct sq_script *s;
};

static struct sq_script__call *check_call(lua_State *L)
{
    struct ctx_ud *u = luaL_checkudata(L, 1, SQ_SCRIPT_MT_CTX);
    if (!u->s->call)
        luaL_error(L, "ctx used after its hook returned");
    return u->s->call;
}

static int ctx_get(lua_State *L)
{
    struct sq_script__call *c = check_call(L);
    if (lua_type(L, 2) != LUA_TSTRING)
        return luaL_error(L, "ctx:get: the name is a %s, not a string", luaL_typename(L, 2));
    size_t n;
    const char *name = lua_tolstring(L, 2, &n);
    struct sq_str v;
    if (c->vars && c->vars->get && c->vars->get(c->vu, name, n, &v))
        lua_pushlstring(L, v.p ? v.p : "", v.len);
    else
        lua_pushnil(L);
    return 1;
}

static int ctx_set(lua_State *L)
{
    struct sq_script__call *c = check_call(L);
    if (lua_type(L, 2) != LUA_TSTRING)
        return luaL_error(L, "ctx:set: the name is a %s, not a string", luaL_typename(L, 2));
    lua_settop(L, 3);
    size_t n, vlen = 0;
    const char *name = lua_tolstring(L, 2, &n);
    const char *val = NULL;
    int t = lua_type(L, 3);
    if (t == LUA_TSTRING || t == LUA_TNUMBER)
        val = lua_tolstring(L, 3, &vlen);
    else if (t != LUA_TNIL)
        return luaL_error(L, "ctx:set('%s'): the value is a %s, not a string, a number or nil",
                          name, lua_typename(L, t));
    if (!c->vars || !c->vars->set)
        return luaL_error(L, "ctx:set('%s'): this step has no variables", name);
    int rc = c->vars->set(c->vu, name, n, val, vlen);
    if (rc == -ENOENT)
        return luaL_error(L, "ctx:set: no variable '%s' in this scenario", name);
    if (rc < 0)
        return luaL_error(L, "ctx:set('%s'): %s", name, sq_strerror(rc));
    return 0;
}

/* ctx:metric(name[, value]): a sample of one of the plan's metrics (value: a number or a
 * boolean; 1 when left out). */
static int ctx_metric(lua_State *L)
{
    struct sq_script__call *c = check_call(L);
    if (lua_type(L, 2) != LUA_TSTRING)
        return luaL_error(L, "ctx:metric: the name is a %s, not a string", luaL_typename(L, 2));
    size_t n;
    const char *name = lua_tolstring(L, 2, &n);
    double x = 1;
    int t = lua_type(L, 3);
    if (t == LUA_TNUMBER)
        x = lua_tonumber(L, 3);
    else if (t == LUA_TBOOLEAN)
        x = lua_toboolean(L, 3) ? 1 : 0;
    else if (t != LUA_TNONE && t != LUA_TNIL)
        return luaL_error(L, "ctx:metric('%s'): the value is a %s, not a number or a boolean", name,
                          lua_typename(L, t));
    if (x != x || x - x != 0) /* NaN or an infinity */
        return luaL_error(L, "ctx:metric('%s'): the value is not a finite number", name);
    if (!c->vars || !c->vars->metric)
        return luaL_error(L, "ctx:metric('%s'): this step takes no metrics", name);
    if (c->vars->metric(c->vu, name, n, x) < 0)
        return luaL_error(L, "ctx:metric: no metric '%s' under the plan's metrics:", name);
    return 0;
}

static int ctx_skip(lua_State *L)
{
    struct sq_script__call *c = check_call(L);
    if (c->when != SQ_SCRIPT_BEFORE)
        return luaL_error(L, "ctx:skip() is only allowed in a before hook");
    c->res->skip = true;
    return 0;
}

/* RFC 9110 5.6.2 tchar: what a method or a field name is made of. */
static bool is_tchar(unsigned char ch)
{
    if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))
        return true;
    return ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static bool is_token(const char *p, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)p[i]))
            return false;
    return true;
}

/* A field value a hook may send: no CR, LF, NUL or other control but tab (no header
 * injection, nothing HTTP/2 refuses). Returns the first bad byte's offset, or n. */
static size_t bad_value_at(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return i;
    }
    return n;
}

/* Fields the engine owns (framing, the origin, the connection): a hook may not set them. */
static bool reserved_field(const char *p, size_t n)
{
    static const char *const names[] = {
        "host",       "content-length",   "transfer-encoding", "connection",
        "keep-alive", "proxy-connection", "upgrade",           "te"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i]) == n && strncasecmp(names[i], p, n) == 0)
            return true;
    return false;
}

/* ctx:set_header(name, value): adds the field, or replaces the plan's (and an earlier
 * set_header's) of that name, for the request about to be sent. */
static int ctx_set_header(lua_State *L)
{
    struct sq_script__call *c = check_call(L);
    struct sq_script *s = ((struct ctx_ud *)lua_touserdata(L, 1))->s;
    if (c->when != SQ_SCRIPT_BEFORE)
        return luaL_error(L, "ctx:set_header() is only allowed in a before hook");
    if (lua_type(L, 2) != LUA_TSTRING)
        return luaL_error(L, "ctx:set_header: the name is a %s, not a string", luaL_typename(L, 2));
    int t = lua_type(L, 3);
    if (t != LUA_TSTRING && t != LUA_TNUMBER)
        return luaL_error(L, "ctx:set_header: the value is a %s, not a string or a number",
                          luaL_typename(L, 3));
    size_t n, vl;
    const char *name = lua_tolstring(L, 2, &n);
    const char *val = lua_tolstring(L, 3, &vl);
    if (!is_token(name, n) || n > 256)
        return luaL_error(L,
                          "ctx:set_header: '%s' is not a header name (letters, digits and "
                          "!#$%%&'*+-.^_`|~, up to 256)",
                          name);
    if (reserved_field(name, n))
        return luaL_error(L, "ctx:set_header: %s is set by squall, not by a hook", name);
    size_t bad = bad_value_at(val, vl);
    if (bad < vl)
        return luaL_error(L,
                          "ctx:set_header('%s'): the value has a control character (byte "
                          "%d at offset %d): CR, LF and NUL cannot go in a header",
                          name, (int)(unsigned char)val[bad], (int)bad);
    /* drop an earlier line of that name, then add this one */
    struct sq_buf *h = &s->hook_hdrs;
    for (size_t at = 0; at < h->len;) {
        const char *line = h->p + at;
        const char *eol = memchr(line, '\n', h->len - at);
        size_t ll = (size_t)(eol - line) + 1;
        const char *colon = memchr(line, ':', ll);
        if (colon && (size_t)(colon - line) == n && strncasecmp(line, name, n) == 0) {
            memmove(h->p + at, h->p + at + ll, h->len - at - ll);
            h->len -= ll;
            break;
        }
        at += ll;
    }
    if (sq_buf_append(h, name, n) < 0 || sq_buf_append(h, ": ", 2) < 0 ||
        sq_buf_append(h, val, vl) < 0 || sq_buf_append(h, "\r\n", 2) < 0)
        return luaL_error(L, "ctx:set_header: not enough memory");
    return 0;
}

static int ctx_index(lua_State *L)
{
    struct sq_script__call *c = check_call(L);
    const struct sq_script_step *st = c->step;
    const char *k = lua_tostring(L, 2);
    if (!k) {
        lua_pushnil(L);
    } else if (strcmp(k, "step") == 0) {
        lua_pushstring(L, st && st->name ? st->name : "");
    } else if (strcmp(k, "vu") == 0) {
        lua_pushnumber(L, st ? (double)st->vu : 0);
    } else if (strcmp(k, "iteration") == 0) {
        lua_pushnumber(L, st ? (double)st->iteration : 0);
    } else if (strcmp(k, "status") == 0) {
        if (c->when == SQ_SCRIPT_AFTER && st)
            lua_pushinteger(L, st->status);
        else
            lua_pushnil(L);
    } else if (strcmp(k, "headers") == 0) {
        if (c->when == SQ_SCRIPT_AFTER && st) {
            lua_createtable(L, 0, (int)(st->nheaders < 64 ? st->nheaders : 64));
            for (size_t i = 0; i < st->nheaders; i++) {
                lua_pushlstring(L, st->headers[i].name, st->headers[i].name_len);
                lua_pushlstring(L, st->headers[i].value, st->headers[i].value_len);
                lua_rawset(L, -3);
            }
        } else {
            lua_pushnil(L);
        }
    } else if (strcmp(k, "method") == 0 || strcmp(k, "url") == 0) {
        struct sq_script *s = ((struct ctx_ud *)lua_touserdata(L, 1))->s;
        const struct sq_buf *b = k[0] == 'm' ? &s->hook_method : &s->hook_url;
        if (c->when == SQ_SCRIPT_BEFORE && b->len)
            lua_pushlstring(L, b->p, b->len);
        else
            lua_pushnil(L);
    } else if (strcmp(k, "body") == 0) {
        const struct sq_buf *b = &((struct ctx_ud *)lua_touserdata(L, 1))->s->hook_body;
        if (c->when == SQ_SCRIPT_AFTER && st && st->body)
            lua_pushlstring(L, st->body, st->body_len);
        else if (c->when == SQ_SCRIPT_BEFORE && c->res->has_body)
            lua_pushlstring(L, b->p ? b->p : "", b->len);
        else
            lua_pushnil(L);
    } else {
        lua_pushvalue(L, 2);
        lua_rawget(L, lua_upvalueindex(1)); /* the methods */
    }
    return 1;
}

/* ctx.method = m, ctx.url = u (k names which) in a before hook. */
static int set_request(lua_State *L, struct sq_script__call *c, struct sq_script *s, const char *k)
{
    if (c->when != SQ_SCRIPT_BEFORE)
        return luaL_error(L, "ctx.%s can only be set in a before hook", k);
    if (lua_type(L, 3) != LUA_TSTRING)
        return luaL_error(L, "ctx.%s must be a string, not a %s", k, luaL_typename(L, 3));
    size_t n;
    const char *p = lua_tolstring(L, 3, &n);
    struct sq_buf *b = k[0] == 'm' ? &s->hook_method : &s->hook_url;
    if (k[0] == 'm') {
        if (!is_token(p, n) || n > 64)
            return luaL_error(L,
                              "ctx.method: '%s' is not an HTTP method (a token: letters, "
                              "digits and !#$%%&'*+-.^_`|~, up to 64)",
                              p);
    } else {
        if (n == 0 || n > 8192)
            return luaL_error(L, "ctx.url: %s", n ? "longer than 8192 bytes" : "empty");
        size_t bad = bad_value_at(p, n);
        if (bad < n || memchr(p, ' ', n))
            return luaL_error(L, "ctx.url: '%s' has a space or a control character", p);
        const char *why = "this step cannot change its URL";
        if (!c->vars || !c->vars->url || c->vars->url(c->vu, p, n, &why) < 0)
            return luaL_error(L, "ctx.url: '%s': %s", p, why);
        c->res->has_url = true;
    }
    sq_buf_reset(b);
    if (sq_buf_append(b, p, n) < 0)
        return luaL_error(L, "ctx.%s: not enough memory", k);
    return 0;
}

static int ctx_newindex(lua_State *L)
{
    struct sq_script__call *c = check_call(L);
    struct sq_script *s = ((struct ctx_ud *)lua_touserdata(L, 1))->s;
    const char *k = lua_tostring(L, 2);
    if (k && (strcmp(k, "method") == 0 || strcmp(k, "url") == 0))
        return set_request(L, c, s, k);
    if (!k || strcmp(k, "body") != 0)
        return luaL_error(L,
                          "cannot set ctx.%s (only ctx.body, ctx.method and ctx.url, in a "
                          "before hook)",
                          k ? k : luaL_typename(L, 2));
    if (c->when != SQ_SCRIPT_BEFORE)
        return luaL_error(L, "ctx.body can only be set in a before hook");
    int t = lua_type(L, 3);
    if (t == LUA_TNIL) {
        c->res->has_body = false;
        sq_buf_reset(&s->hook_body);
        return 0;
    }
    if (t != LUA_TSTRING && t != LUA_TNUMBER)
        return luaL_error(L, "ctx.body must be a string, not a %s", lua_typename(L, t));
    size_t n;
    const char *p = lua_tolstring(L, 3, &n);
    sq_buf_reset(&s->hook_body);
    if (sq_buf_append(&s->hook_body, p, n) < 0)
        return luaL_error(L, "ctx.body: not enough memory");
    c->res->has_body = true;
    return 0;
}

void sq_script__install_ctx(lua_State *L, struct sq_script *s)
{
    static const luaL_Reg methods[] = {{"get", ctx_get},
                                       {"set", ctx_set},
                                       {"skip", ctx_skip},
                                       {"metric", ctx_metric},
                                       {"set_header", ctx_set_header},
                                       {NULL, NULL}};
    sq_script__object_mt(L, SQ_SCRIPT_MT_CTX, methods, ctx_index, ctx_newindex);

    struct ctx_ud *u = lua_newuserdata(L, sizeof(*u));
    u->s = s;
    luaL_getmetatable(L, SQ_SCRIPT_MT_CTX);
    lua_setmetatable(L, -2);
}
