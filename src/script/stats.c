/* script/stats.c - the latency and requests objects done() receives, over squall's HDR
 * histograms (stats/hist.h).
 *
 *     s.min, s.max, s.mean, s.stdev     as wrk names them (stdev: the sample deviation, n - 1,
 *                                       as wrk computes it; from HDR bucket midpoints)
 *     s:percentile(p)                   HdrHistogram's value at percentile p (0..100)
 *     #s                                how many distinct values (non-empty buckets) there are
 *     s(i)                              the i-th distinct value (1-based, ascending) and its
 *                                       count, as wrk's; 0, 0 past the end
 *     s[i]                              the i-th distinct value alone (nil past the end), so
 *                                       `for i = 1, #s do local v, n = s(i) ... end` and
 *                                       `s[i]` both work
 * A distinct value is a bucket's highest equivalent value: exact below 2048 µs, within 1/1024
 * above (wrk's own array is exact to 1 µs up to its timeout). Walking i = 1, 2, ... costs one
 * step each: the object keeps its iterator between calls.
 *
 * The histograms belong to the engine and are read only during done(): the object checks the
 * state's done generation and refuses to read after the call returned.
 */
#include <math.h>
#include <string.h>

#include "script/internal.h"

struct stats_ud {
    struct sq_script *s;
    const struct sq_hist *h; /* NULL: empty */
    uint32_t gen;
    int64_t pos; /* buckets the iterator has passed */
    struct sq_hist_iter it;
    int64_t distinct; /* -1: not counted yet */
};

void sq_script__push_stats(lua_State *L, struct sq_script *s, const struct sq_hist *h)
{
    struct stats_ud *u = lua_newuserdata(L, sizeof(*u));
    memset(u, 0, sizeof(*u));
    u->s = s;
    u->h = h && sq_hist_total(h) > 0 ? h : NULL;
    u->gen = s->done_gen;
    u->distinct = -1;
    luaL_getmetatable(L, SQ_SCRIPT_MT_STATS);
    lua_setmetatable(L, -2);
}

static struct stats_ud *check_stats(lua_State *L)
{
    struct stats_ud *u = luaL_checkudata(L, 1, SQ_SCRIPT_MT_STATS);
    if (!u->s->in_done || u->gen != u->s->done_gen)
        luaL_error(L, "latency and requests objects can be read only during done()");
    return u;
}

/* The i-th (1-based) non-empty bucket: its value and count, or false past the end. */
static bool bucket(struct stats_ud *u, int64_t i, int64_t *value, int64_t *count)
{
    if (!u->h || i < 1)
        return false;
    if (u->pos == 0 || i < u->pos) {
        sq_hist_iter_init(&u->it, u->h);
        u->pos = 0;
    }
    while (u->pos < i) {
        if (!sq_hist_iter_next(&u->it)) {
            u->pos = 0;
            return false;
        }
        u->pos++;
    }
    *value = u->it.value;
    *count = u->it.count;
    return true;
}

static int stats_percentile(lua_State *L)
{
    struct stats_ud *u = check_stats(L);
    if (!lua_isnumber(L, 2))
        return luaL_error(L, "percentile: p is a %s, not a number", luaL_typename(L, 2));
    lua_pushnumber(L, u->h ? (double)sq_hist_percentile(u->h, lua_tonumber(L, 2)) : 0);
    return 1;
}

static int stats_call(lua_State *L)
{
    struct stats_ud *u = check_stats(L);
    int64_t v = 0, n = 0;
    if (lua_isnumber(L, 2) && !bucket(u, (int64_t)lua_tonumber(L, 2), &v, &n))
        v = n = 0;
    lua_pushnumber(L, (double)v);
    lua_pushnumber(L, (double)n);
    return 2;
}

static int stats_len(lua_State *L)
{
    struct stats_ud *u = check_stats(L);
    if (u->distinct < 0) {
        u->distinct = 0;
        if (u->h) {
            struct sq_hist_iter it;
            sq_hist_iter_init(&it, u->h);
            while (sq_hist_iter_next(&it))
                u->distinct++;
        }
    }
    lua_pushnumber(L, (double)u->distinct);
    return 1;
}

static int stats_index(lua_State *L)
{
    struct stats_ud *u = check_stats(L);
    const struct sq_hist *h = u->h;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        int64_t v, n;
        if (bucket(u, (int64_t)lua_tonumber(L, 2), &v, &n))
            lua_pushnumber(L, (double)v);
        else
            lua_pushnil(L);
        return 1;
    }
    const char *k = lua_tostring(L, 2);
    if (!k) {
        lua_pushnil(L);
    } else if (strcmp(k, "min") == 0) {
        lua_pushnumber(L, h ? (double)sq_hist_min(h) : 0);
    } else if (strcmp(k, "max") == 0) {
        lua_pushnumber(L, h ? (double)sq_hist_max(h) : 0);
    } else if (strcmp(k, "mean") == 0) {
        lua_pushnumber(L, h ? sq_hist_mean(h) : 0);
    } else if (strcmp(k, "stdev") == 0) {
        /* HdrHistogram's deviation is the population one; wrk divides by n - 1. */
        double n = h ? (double)sq_hist_total(h) : 0;
        lua_pushnumber(L, n >= 2 ? sq_hist_stddev(h) * sqrt(n / (n - 1)) : 0);
    } else if (strcmp(k, "percentile") == 0) {
        lua_pushcfunction(L, stats_percentile);
    } else {
        lua_pushnil(L);
    }
    return 1;
}

void sq_script__install_stats(lua_State *L)
{
    luaL_newmetatable(L, SQ_SCRIPT_MT_STATS);
    lua_pushcfunction(L, stats_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, stats_call);
    lua_setfield(L, -2, "__call");
    lua_pushcfunction(L, stats_len);
    lua_setfield(L, -2, "__len");
    lua_pop(L, 1);
}
