/* script/hooks.c - the context object a plan step hook receives (script.h: "plan hooks").
 *
 * One object per state, made when the state is built and handed to every hook call; what it
 * shows comes from s->call, the call in progress, so a hook call allocates nothing for the
 * object itself. Outside a call s->call is NULL and every use of a kept object is an error.
 * The VU's variables stay in the engine: ctx:get/ctx:set go through the engine's callbacks.
 */
#include <errno.h>
#include <string.h>

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

static int ctx_skip(lua_State *L)
{
    struct sq_script__call *c = check_call(L);
    if (c->when != SQ_SCRIPT_BEFORE)
        return luaL_error(L, "ctx:skip() is only allowed in a before hook");
    c->res->skip = true;
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

static int ctx_newindex(lua_State *L)
{
    struct sq_script__call *c = check_call(L);
    struct sq_script *s = ((struct ctx_ud *)lua_touserdata(L, 1))->s;
    const char *k = lua_tostring(L, 2);
    if (!k || strcmp(k, "body") != 0)
        return luaL_error(L, "cannot set ctx.%s (only ctx.body, in a before hook)",
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
    static const luaL_Reg methods[] = {
        {"get", ctx_get}, {"set", ctx_set}, {"skip", ctx_skip}, {NULL, NULL}};
    sq_script__object_mt(L, SQ_SCRIPT_MT_CTX, methods, ctx_index, ctx_newindex);

    struct ctx_ud *u = lua_newuserdata(L, sizeof(*u));
    u->s = s;
    luaL_getmetatable(L, SQ_SCRIPT_MT_CTX);
    lua_setmetatable(L, -2);
}
