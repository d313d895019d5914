/* script/luajit.h - LuaJIT, loaded when a script's Lua state is first built (create() in
 * script.c, under sq_script_load and every other way to a state: the one place luaL_newstate is
 * called). Linked in, it was mapped into every run, a plain `squall URL` too
 * (docs/internals/base.md, "dynlib").
 *
 * After the struct, each function script/ calls is defined as its pointer (base/dynlib.h), so
 * script/'s files, which include this header (through internal.h) instead of LuaJIT's, call them
 * unchanged. LuaJIT's API macros (lua_pop, lua_newtable, lua_tostring...) expand to the functions
 * listed. Nothing may be called before sq_luajit_load returned 0.
 */
#ifndef SQ_SCRIPT_LUAJIT_H
#define SQ_SCRIPT_LUAJIT_H

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stddef.h>

#include "base/err.h"

/* X(library, function): every LuaJIT function script/ calls (`nm -u` on its objects), and
 * luaL_loadstring, which tests/unit/test_script.c calls on a script's state. */
#define SQ_LUAJIT_SYMS(X)                                                                          \
    X(LUAJIT, luaL_callmeta)                                                                       \
    X(LUAJIT, luaL_checkstack)                                                                     \
    X(LUAJIT, luaL_checkudata)                                                                     \
    X(LUAJIT, luaL_error)                                                                          \
    X(LUAJIT, luaL_loadbuffer)                                                                     \
    X(LUAJIT, luaL_loadstring)                                                                     \
    X(LUAJIT, luaL_newmetatable)                                                                   \
    X(LUAJIT, luaL_newstate)                                                                       \
    X(LUAJIT, luaL_openlibs)                                                                       \
    X(LUAJIT, luaL_ref)                                                                            \
    X(LUAJIT, luaL_traceback)                                                                      \
    X(LUAJIT, luaL_unref)                                                                          \
    X(LUAJIT, lua_call)                                                                            \
    X(LUAJIT, lua_checkstack)                                                                      \
    X(LUAJIT, lua_close)                                                                           \
    X(LUAJIT, lua_cpcall)                                                                          \
    X(LUAJIT, lua_createtable)                                                                     \
    X(LUAJIT, lua_getfield)                                                                        \
    X(LUAJIT, lua_getinfo)                                                                         \
    X(LUAJIT, lua_getmetatable)                                                                    \
    X(LUAJIT, lua_gettop)                                                                          \
    X(LUAJIT, lua_iscfunction)                                                                     \
    X(LUAJIT, lua_isnumber)                                                                        \
    X(LUAJIT, lua_newuserdata)                                                                     \
    X(LUAJIT, lua_next)                                                                            \
    X(LUAJIT, lua_pcall)                                                                           \
    X(LUAJIT, lua_pushboolean)                                                                     \
    X(LUAJIT, lua_pushcclosure)                                                                    \
    X(LUAJIT, lua_pushfstring)                                                                     \
    X(LUAJIT, lua_pushinteger)                                                                     \
    X(LUAJIT, lua_pushlightuserdata)                                                               \
    X(LUAJIT, lua_pushlstring)                                                                     \
    X(LUAJIT, lua_pushnil)                                                                         \
    X(LUAJIT, lua_pushnumber)                                                                      \
    X(LUAJIT, lua_pushstring)                                                                      \
    X(LUAJIT, lua_pushvalue)                                                                       \
    X(LUAJIT, lua_rawequal)                                                                        \
    X(LUAJIT, lua_rawget)                                                                          \
    X(LUAJIT, lua_rawgeti)                                                                         \
    X(LUAJIT, lua_rawset)                                                                          \
    X(LUAJIT, lua_rawseti)                                                                         \
    X(LUAJIT, lua_remove)                                                                          \
    X(LUAJIT, lua_replace)                                                                         \
    X(LUAJIT, lua_setfield)                                                                        \
    X(LUAJIT, lua_setmetatable)                                                                    \
    X(LUAJIT, lua_settop)                                                                          \
    X(LUAJIT, lua_toboolean)                                                                       \
    X(LUAJIT, lua_tolstring)                                                                       \
    X(LUAJIT, lua_tonumber)                                                                        \
    X(LUAJIT, lua_touserdata)                                                                      \
    X(LUAJIT, lua_type)                                                                            \
    X(LUAJIT, lua_typename)

struct sq_luajit {
#define SQ_LUAJIT_FIELD(lib, sym) __typeof__(sym) *sym;
    SQ_LUAJIT_SYMS(SQ_LUAJIT_FIELD)
#undef SQ_LUAJIT_FIELD
};
extern struct sq_luajit sq_luajit;

/* Loads LuaJIT once (thread-safe). Returns 0, or -ENOENT with why naming the library or
 * function that is missing. */
SQ_MUST_CHECK int sq_luajit_load(char *why, size_t len);

#ifndef SQ_LUAJIT_IMPL
#define luaL_callmeta         (sq_luajit.luaL_callmeta)
#define luaL_checkstack       (sq_luajit.luaL_checkstack)
#define luaL_checkudata       (sq_luajit.luaL_checkudata)
#define luaL_error            (sq_luajit.luaL_error)
#define luaL_loadbuffer       (sq_luajit.luaL_loadbuffer)
#define luaL_loadstring       (sq_luajit.luaL_loadstring)
#define luaL_newmetatable     (sq_luajit.luaL_newmetatable)
#define luaL_newstate         (sq_luajit.luaL_newstate)
#define luaL_openlibs         (sq_luajit.luaL_openlibs)
#define luaL_ref              (sq_luajit.luaL_ref)
#define luaL_traceback        (sq_luajit.luaL_traceback)
#define luaL_unref            (sq_luajit.luaL_unref)
#define lua_call              (sq_luajit.lua_call)
#define lua_checkstack        (sq_luajit.lua_checkstack)
#define lua_close             (sq_luajit.lua_close)
#define lua_cpcall            (sq_luajit.lua_cpcall)
#define lua_createtable       (sq_luajit.lua_createtable)
#define lua_getfield          (sq_luajit.lua_getfield)
#define lua_getinfo           (sq_luajit.lua_getinfo)
#define lua_getmetatable      (sq_luajit.lua_getmetatable)
#define lua_gettop            (sq_luajit.lua_gettop)
#define lua_iscfunction       (sq_luajit.lua_iscfunction)
#define lua_isnumber          (sq_luajit.lua_isnumber)
#define lua_newuserdata       (sq_luajit.lua_newuserdata)
#define lua_next              (sq_luajit.lua_next)
#define lua_pcall             (sq_luajit.lua_pcall)
#define lua_pushboolean       (sq_luajit.lua_pushboolean)
#define lua_pushcclosure      (sq_luajit.lua_pushcclosure)
#define lua_pushfstring       (sq_luajit.lua_pushfstring)
#define lua_pushinteger       (sq_luajit.lua_pushinteger)
#define lua_pushlightuserdata (sq_luajit.lua_pushlightuserdata)
#define lua_pushlstring       (sq_luajit.lua_pushlstring)
#define lua_pushnil           (sq_luajit.lua_pushnil)
#define lua_pushnumber        (sq_luajit.lua_pushnumber)
#define lua_pushstring        (sq_luajit.lua_pushstring)
#define lua_pushvalue         (sq_luajit.lua_pushvalue)
#define lua_rawequal          (sq_luajit.lua_rawequal)
#define lua_rawget            (sq_luajit.lua_rawget)
#define lua_rawgeti           (sq_luajit.lua_rawgeti)
#define lua_rawset            (sq_luajit.lua_rawset)
#define lua_rawseti           (sq_luajit.lua_rawseti)
#define lua_remove            (sq_luajit.lua_remove)
#define lua_replace           (sq_luajit.lua_replace)
#define lua_setfield          (sq_luajit.lua_setfield)
#define lua_setmetatable      (sq_luajit.lua_setmetatable)
#define lua_settop            (sq_luajit.lua_settop)
#define lua_toboolean         (sq_luajit.lua_toboolean)
#define lua_tolstring         (sq_luajit.lua_tolstring)
#define lua_tonumber          (sq_luajit.lua_tonumber)
#define lua_touserdata        (sq_luajit.lua_touserdata)
#define lua_type              (sq_luajit.lua_type)
#define lua_typename          (sq_luajit.lua_typename)
#endif

#endif
