/* script/format.c - wrk.format() in C, and counting the HTTP requests a string holds.
 *
 * wrk.format(method, path, headers, body) renders
 *     METHOD SP path SP "HTTP/1.1" CRLF
 *     "Host: " host CRLF                      headers.Host, else wrk.headers.Host (if any)
 *     name ": " value CRLF                    every other header, in the table's order
 *     "Content-Length: " #body CRLF           only with a body
 *     CRLF body
 * Each argument that is nil (or false) takes the wrk table's field of the same name, as wrk's
 * own Lua version does. Like wrk, a "Content-Length" key in the headers is replaced by the
 * body's length (or dropped without a body) and a "Host" key is sent once; the keys are matched
 * exactly, as wrk matches them. Unlike wrk, the caller's headers table is left unchanged (wrk
 * writes Host and Content-Length into it) and a value of the wrong type is an error naming it
 * instead of text like "table: 0x...".
 *
 * The text is built in the state's reused C buffer; the only allocation per call is the
 * resulting Lua string.
 */
#include <string.h>

#include "base/str.h"
#include "script/internal.h"

enum {
    FUP_S = 1,
    FUP_WRK,
    FUP_K_METHOD,
    FUP_K_PATH,
    FUP_K_HEADERS,
    FUP_K_BODY,
    FUP_K_HOST,
    FUP_K_CL,
    FUP__N = FUP_K_CL
};

static void app(lua_State *L, struct sq_buf *b, const char *p, size_t n)
{
    if (SQ_UNLIKELY(sq_buf_append(b, p, n) < 0))
        luaL_error(L, "wrk.format: not enough memory");
}

/* Argument i, replaced by the wrk table's field (upvalue key k) when it is nil or false.
 * Returns true when the value came from the wrk table. */
static bool arg_or_wrk(lua_State *L, int i, int k)
{
    if (lua_toboolean(L, i))
        return false;
    lua_pushvalue(L, lua_upvalueindex(k));
    lua_rawget(L, lua_upvalueindex(FUP_WRK));
    lua_replace(L, i);
    return true;
}

static const char *const arg_names[] = {"", "method", "path", "headers", "body"};

/* The text of argument i (a string, or a number as Lua writes it); NULL when it is nil. */
static const char *arg_text(lua_State *L, int i, bool from_wrk, bool required, size_t *len)
{
    int t = lua_type(L, i);
    if (t == LUA_TSTRING || t == LUA_TNUMBER)
        return lua_tolstring(L, i, len); /* converts a number in its own stack slot */
    if ((t == LUA_TNIL || t == LUA_TBOOLEAN) && !required)
        return NULL;
    if (from_wrk)
        luaL_error(L, "wrk.format: wrk.%s is a %s, not a string", arg_names[i], lua_typename(L, t));
    else
        luaL_error(L, "wrk.format: the %s (argument #%d) is a %s, not a string or nil",
                   arg_names[i], i, lua_typename(L, t));
    return NULL;
}

/* Appends "name: value\r\n" for the value at the top of the stack (converted in place, which
 * is allowed for a value during lua_next, never for the key). */
static void header_line(lua_State *L, struct sq_buf *b, const char *name, size_t nlen)
{
    size_t vlen;
    const char *v;
    char digits[24];
    switch (lua_type(L, -1)) {
    case LUA_TNUMBER: {
        /* An integral value (counter.lua's X-Counter) is written here, as Lua's "%.14g" would
         * write it, without making a Lua string of it; anything else goes through Lua. */
        lua_Number d = lua_tonumber(L, -1);
        if (d == (lua_Number)(int64_t)d && d > -1e14 && d < 1e14) {
            int64_t iv = (int64_t)d;
            uint64_t u = iv < 0 ? (uint64_t)0 - (uint64_t)iv : (uint64_t)iv;
            char *e = digits + sizeof(digits), *q = e;
            do {
                *--q = (char)('0' + u % 10);
                u /= 10;
            } while (u);
            if (iv < 0)
                *--q = '-';
            v = q;
            vlen = (size_t)(e - q);
            break;
        }
        v = lua_tolstring(L, -1, &vlen);
        break;
    }
    case LUA_TSTRING:
        v = lua_tolstring(L, -1, &vlen);
        break;
    case LUA_TBOOLEAN:
        v = lua_toboolean(L, -1) ? "true" : "false";
        vlen = strlen(v);
        break;
    default:
        luaL_error(L, "wrk.format: header '%s' is a %s, not a string or a number", name,
                   luaL_typename(L, -1));
        return;
    }
    app(L, b, name, nlen);
    app(L, b, ": ", 2);
    app(L, b, v, vlen);
    app(L, b, "\r\n", 2);
}

static int l_format(lua_State *L)
{
    struct sq_script *s = lua_touserdata(L, lua_upvalueindex(FUP_S));
    struct sq_buf *b = &s->fmt;
    lua_settop(L, 4);
    bool dm = arg_or_wrk(L, 1, FUP_K_METHOD);
    bool dp = arg_or_wrk(L, 2, FUP_K_PATH);
    bool dh = arg_or_wrk(L, 3, FUP_K_HEADERS);
    bool db = arg_or_wrk(L, 4, FUP_K_BODY);

    size_t mlen, plen, blen = 0;
    const char *method = arg_text(L, 1, dm, true, &mlen);
    const char *path = arg_text(L, 2, dp, true, &plen);
    const char *body = arg_text(L, 4, db, false, &blen);
    int ht = lua_type(L, 3);
    if (ht != LUA_TTABLE && ht != LUA_TNIL && !(ht == LUA_TBOOLEAN && !lua_toboolean(L, 3)))
        return dh ? luaL_error(L, "wrk.format: wrk.headers is a %s, not a table",
                               lua_typename(L, ht))
                  : luaL_error(L,
                               "wrk.format: the headers (argument #3) is a %s, not a table "
                               "or nil",
                               lua_typename(L, ht));
    bool headers = ht == LUA_TTABLE;
    const char *k_host = lua_tostring(L, lua_upvalueindex(FUP_K_HOST));
    const char *k_cl = lua_tostring(L, lua_upvalueindex(FUP_K_CL));

    sq_buf_reset(b);
    app(L, b, method, mlen);
    app(L, b, " ", 1);
    app(L, b, path, plen);
    app(L, b, " HTTP/1.1\r\n", 11);

    /* Host: the table's own, else wrk.headers.Host */
    lua_pushvalue(L, lua_upvalueindex(FUP_K_HOST));
    if (headers) {
        lua_rawget(L, 3);
    } else {
        lua_pop(L, 1);
        lua_pushnil(L);
    }
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushvalue(L, lua_upvalueindex(FUP_K_HEADERS));
        lua_rawget(L, lua_upvalueindex(FUP_WRK));
        if (lua_istable(L, -1)) {
            lua_pushvalue(L, lua_upvalueindex(FUP_K_HOST));
            lua_rawget(L, -2);
            lua_remove(L, -2);
        } else {
            lua_pop(L, 1);
            lua_pushnil(L);
        }
    }
    if (!lua_isnil(L, -1))
        header_line(L, b, "Host", 4);
    lua_pop(L, 1);

    if (headers) {
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            if (SQ_UNLIKELY(lua_type(L, -2) != LUA_TSTRING)) {
                const char *tn = luaL_typename(L, -2);
                lua_pushvalue(L, -2);
                const char *shown = lua_isnumber(L, -1) ? lua_tostring(L, -1) : "?";
                return luaL_error(L, "wrk.format: header names must be strings, not a %s (%s)", tn,
                                  shown);
            }
            /* Strings are interned: the same text is the same object, so comparing the
             * data pointers with the upvalues' is comparing the names. */
            size_t nlen;
            const char *name = lua_tolstring(L, -2, &nlen);
            if (name != k_host && name != k_cl)
                header_line(L, b, name, nlen);
            lua_pop(L, 1);
        }
    }

    if (body) {
        char digits[24];
        char *d = digits + sizeof(digits);
        size_t v = blen;
        do {
            *--d = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        app(L, b, "Content-Length: ", 16);
        app(L, b, d, (size_t)(digits + sizeof(digits) - d));
        app(L, b, "\r\n", 2);
    }
    app(L, b, "\r\n", 2);
    if (body)
        app(L, b, body, blen);
    lua_pushlstring(L, b->p, b->len);
    return 1;
}

void sq_script__install_format(lua_State *L, struct sq_script *s, int wrk)
{
    lua_pushlightuserdata(L, s);
    lua_pushvalue(L, wrk);
    lua_pushliteral(L, "method");
    lua_pushliteral(L, "path");
    lua_pushliteral(L, "headers");
    lua_pushliteral(L, "body");
    lua_pushliteral(L, "Host");
    lua_pushliteral(L, "Content-Length");
    lua_pushcclosure(L, l_format, FUP__N);
    lua_setfield(L, wrk, "format");
}

/* ---- counting requests ---- */

/* Does v[0, n) name the chunked coding (case-insensitively, anywhere in the list)? */
static bool has_chunked(const char *v, size_t n)
{
    for (size_t i = 0; i + 7 <= n; i++)
        if (sq_ieq_prefix(v + i, n - i, "chunked", 7))
            return true;
    return false;
}

#define FAIL(msg, pos)                                                                             \
    do {                                                                                           \
        *why = (msg);                                                                              \
        *at = (size_t)(pos);                                                                       \
        return 0;                                                                                  \
    } while (0)

/* A chunked body from p[pos]: returns the offset after it, or 0 with why/at set. */
static size_t skip_chunked(const char *p, size_t len, size_t pos, const char **why, size_t *at)
{
    for (;;) {
        size_t size = 0, digits = 0;
        while (pos < len) {
            char c = p[pos];
            int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (d < 0)
                break;
            if (size > (SIZE_MAX >> 4))
                FAIL("chunk size too large", pos);
            size = size * 16 + (size_t)d;
            digits++;
            pos++;
        }
        if (digits == 0)
            FAIL(pos >= len ? "incomplete chunked body" : "bad chunk size", pos);
        const char *nl = memchr(p + pos, '\n', len - pos);
        if (!nl)
            FAIL("incomplete chunked body", len);
        pos = (size_t)(nl - p) + 1;
        if (size == 0) {
            /* trailers, then an empty line */
            for (;;) {
                nl = memchr(p + pos, '\n', len - pos);
                if (!nl)
                    FAIL("incomplete chunked body", len);
                size_t line = (size_t)(nl - p) - pos;
                bool empty = line == 0 || (line == 1 && p[pos] == '\r');
                pos = (size_t)(nl - p) + 1;
                if (empty)
                    return pos;
            }
        }
        if (size > len - pos)
            FAIL("incomplete chunked body", len);
        pos += size;
        if (pos + 2 <= len && p[pos] == '\r' && p[pos + 1] == '\n')
            pos += 2;
        else if (pos + 1 <= len && p[pos] == '\n')
            pos += 1;
        else
            FAIL(pos >= len ? "incomplete chunked body" : "chunk not followed by CRLF", pos);
    }
}

uint32_t sq_script_count_requests(const char *p, size_t len, const char **why, size_t *at)
{
    size_t pos = 0;
    uint32_t n = 0;
    if (len == 0)
        FAIL("empty request", 0);
    while (pos < len) {
        /* the request line: METHOD SP target SP HTTP/1.x */
        const char *nl = memchr(p + pos, '\n', len - pos);
        if (!nl)
            FAIL("incomplete request line", len);
        size_t end = (size_t)(nl - p);
        size_t lend = end > pos && p[end - 1] == '\r' ? end - 1 : end;
        const char *sp = memchr(p + pos, ' ', lend - pos);
        if (!sp || sp == p + pos)
            FAIL("bad request line", pos);
        if (lend - pos < 10 || memcmp(p + lend - 8, "HTTP/1.", 7) != 0 || p[lend - 9] != ' ' ||
            p + lend - 9 <= sp)
            FAIL("bad request line (METHOD SP target SP HTTP/1.x expected)", pos);
        pos = end + 1;

        /* header lines, up to an empty one */
        size_t clen = 0;
        bool has_len = false, chunked = false;
        for (;;) {
            nl = memchr(p + pos, '\n', len - pos);
            if (!nl)
                FAIL("incomplete head (no empty line)", len);
            end = (size_t)(nl - p);
            lend = end > pos && p[end - 1] == '\r' ? end - 1 : end;
            const char *l = p + pos;
            size_t ln = lend - pos;
            pos = end + 1;
            if (ln == 0)
                break;
            char c = (char)(l[0] | 0x20);
            if (c == 'c' && sq_ieq_prefix(l, ln, "content-length:", 15)) {
                size_t i = 15, v = 0, digits = 0;
                while (i < ln && (l[i] == ' ' || l[i] == '\t'))
                    i++;
                while (i < ln && l[i] >= '0' && l[i] <= '9') {
                    if (v > (SIZE_MAX - 9) / 10)
                        FAIL("Content-Length too large", l + i - p);
                    v = v * 10 + (size_t)(l[i] - '0');
                    i++;
                    digits++;
                }
                while (i < ln && (l[i] == ' ' || l[i] == '\t'))
                    i++;
                if (digits == 0 || i != ln)
                    FAIL("bad Content-Length", l - p);
                if (has_len && v != clen)
                    FAIL("conflicting Content-Length headers", l - p);
                clen = v;
                has_len = true;
            } else if (c == 't' && sq_ieq_prefix(l, ln, "transfer-encoding:", 18)) {
                chunked = has_chunked(l + 18, ln - 18);
            }
        }
        if (chunked) {
            size_t next = skip_chunked(p, len, pos, why, at);
            if (next == 0)
                return 0;
            pos = next;
        } else {
            if (clen > len - pos)
                FAIL("incomplete body (shorter than its Content-Length)", len);
            pos += clen;
        }
        if (n == UINT32_MAX)
            FAIL("too many requests", pos);
        n++;
    }
    return n;
}
