/* script/internal.h - what the files of script/ share: the state's struct, its fixed stack
 * slots and upvalues, and the installers of each part of the API. Not for other modules. */
#ifndef SQ_SCRIPT_INTERNAL_H
#define SQ_SCRIPT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "script/luajit.h"
#include "script/script.h"

/* Fixed slots at the bottom of every state's stack, pushed once when the state is built. Every
 * call from C leaves the stack at SLOT_TOP again, so these indices never move.
 *   SLOT_MSGH  the message handler: appends the Lua traceback to a runtime error
 *   SLOT_TRAMP the trampoline: a C closure that runs one struct op under lua_pcall, so that
 *              what the op pushes (a response body, a headers table) is protected too
 *   SLOT_REQ   keeps the string request() returned last alive (*req points into it)
 *   SLOT_K_REQUEST, SLOT_K_DELAY  the interned keys "request" and "delay": request() and
 *              delay() are called straight from C (looking a global up and calling it pushes
 *              nothing that allocates, so it needs no trampoline) */
enum { SLOT_MSGH = 1, SLOT_TRAMP, SLOT_REQ, SLOT_K_REQUEST, SLOT_K_DELAY, SLOT_TOP = SLOT_K_DELAY };

/* The trampoline's upvalues: the wrk table and interned keys, so that the hot path looks
 * globals up without hashing a C string. */
enum { UP_WRK = 1, UP_K_REQUEST, UP_K_RESPONSE, UP_CTX, UP__N = UP_CTX };

/* Metatable names, as wrk names them. */
#define SQ_SCRIPT_MT_ADDR   "wrk.addr"
#define SQ_SCRIPT_MT_THREAD "wrk.thread"
#define SQ_SCRIPT_MT_STATS  "wrk.stats"
#define SQ_SCRIPT_MT_CTX    "squall.ctx"

/* The plan hook call in progress (NULL outside one). */
struct sq_script__call {
    enum sq_script_when when;
    const struct sq_script_step *step;
    const struct sq_script_vars *vars;
    void *vu;
    struct sq_script_step_result *res;
};

struct sq_script {
    lua_State *L;
    struct sq_buf err;  /* the last error, NUL-terminated (len excludes the NUL) */
    struct sq_buf fmt;  /* wrk.format's output, reused: only lua_pushlstring copies it */
    struct sq_buf xfer; /* thread:get/set: a value serialised between two states */

    /* request(): the string anchored in SLOT_REQ and its request count */
    const char *last_req;
    size_t last_req_len;
    uint32_t last_nreq;

    /* the static request (sq_script_init) */
    char *static_req;
    size_t static_len;
    uint32_t static_nreq;
    bool inited;

    /* this state as a thread */
    bool has_addr;
    socklen_t addr_len;
    struct sockaddr_storage addr;
    atomic_bool stop;
    struct sq_script *parent; /* the main state that ran setup() for it, or NULL */
    int32_t slot;             /* its index in parent->threads */

    /* this state as the main state */
    struct sq_script **threads; /* set up through sq_script_setup (NULL: freed since) */
    size_t nthreads, cap_threads;
    uint32_t done_gen; /* stats objects of an earlier done() call are stale */
    bool in_done;

    /* plan hooks */
    struct sq_script__call *call;
    struct sq_buf hook_body; /* the body a before hook set (ctx.body = ...) */
    /* a before hook's request changes (ctx.method, ctx.url, ctx:set_header): the method and
     * the URL as the hook gave them, the headers as "Name: value\r\n" lines (one per name) */
    struct sq_buf hook_method, hook_url, hook_hdrs;
};

/* Sets s->err to the formatted message. Returns -SQ_ESCRIPT. */
int sq_script__fail(struct sq_script *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Installers, run while the state is built (inside lua_cpcall; they may raise). Each leaves the
 * stack as it found it. wrk is the index of the wrk table. */
void sq_script__install_format(lua_State *L, struct sq_script *s, int wrk);
void sq_script__install_net(lua_State *L, int wrk);
/* Registers metatable mt for a userdata object: methods (up to a {NULL, NULL} row) in the table
 * that index, a closure over it, consults; newindex for assignments. Pops what it pushed. */
void sq_script__object_mt(lua_State *L, const char *mt, const luaL_Reg *methods,
                          lua_CFunction index, lua_CFunction newindex);
void sq_script__install_thread(lua_State *L);
void sq_script__install_stats(lua_State *L);
void sq_script__install_ctx(lua_State *L, struct sq_script *s); /* pushes the ctx object */

/* Pushes a thread object for `thread` into holder's state: slot < 0 means holder itself. */
void sq_script__push_thread(lua_State *L, struct sq_script *holder, int32_t slot);
/* Pushes an address object holding sa. */
void sq_script__push_addr(lua_State *L, const struct sockaddr *sa, socklen_t len);
/* Pushes a stats object over h (may be NULL) for the current done() call of s. */
void sq_script__push_stats(lua_State *L, struct sq_script *s, const struct sq_hist *h);

#endif
