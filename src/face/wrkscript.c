/* face/wrkscript.c - a wrk-style script around one run: states, setup(), init(), done().
 *
 * The order is wrk's: the main state is built first, then per worker its own state is built,
 * shown its address, handed to setup() on the main state and started with init(). A state
 * belongs to the main thread until sq_run() starts the workers, to its worker during the run,
 * and to the main thread again after the join (done() reads the worker states through
 * thread:get); wrk's phases never overlap, and nothing here locks.
 */
#include "face/wrkscript.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "net/sock.h"
#include "plan/tmpl.h"

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg && msg[0] ? msg : "script error");
}

/* State k: 0 the main one, i + 1 worker i's. */
static int new_state(const struct sq_wrk_script_args *a, uint32_t k, struct sq_script **out,
                     char *err, size_t errlen)
{
    struct sq_script_target t = a->target ? *a->target : (struct sq_script_target){0};
    t.seeded = true;
    t.seed = sq_tmpl_rng_init(a->seed, SQ_TMPL_STREAM_LUA + k);
    if (a->file)
        return sq_script_new(a->file, &t, out, err, errlen);
    return sq_script_new_string("(no script)", "", 0, &t, out, err, errlen);
}

int sq_wrk_script_open(struct sq_wrk_script *ws, const struct sq_wrk_script_args *a, char *err,
                       size_t errlen)
{
    memset(ws, 0, sizeof(*ws));
    if (a->workers == 0 || a->naddrs <= 0) {
        set_err(err, errlen, "no worker or no address to run the script on");
        return -EINVAL;
    }
    ws->states = calloc(a->workers, sizeof(*ws->states));
    ws->addrs = calloc(a->workers, sizeof(*ws->addrs));
    if (!ws->states || !ws->addrs) {
        set_err(err, errlen, "out of memory");
        sq_wrk_script_close(ws);
        return -ENOMEM;
    }
    int rc = new_state(a, 0, &ws->main, err, errlen);
    if (rc < 0) {
        sq_wrk_script_close(ws);
        return rc;
    }
    bool moved = false; /* setup() gave some thread another address */
    for (uint32_t i = 0; i < a->workers; i++) {
        struct sq_script *t;
        rc = new_state(a, i + 1, &t, err, errlen);
        if (rc < 0)
            break;
        ws->states[i] = t;
        ws->n = i + 1;
        const struct sq_addr *given = &a->addrs[i % (uint32_t)a->naddrs];
        rc = sq_script_set_addr(t, (const struct sockaddr *)&given->ss, given->len);
        if (rc < 0) {
            set_err(err, errlen, "the target's address does not fit a thread object");
            break;
        }
        rc = sq_script_setup(ws->main, t);
        if (rc < 0) {
            set_err(err, errlen, sq_script_error(ws->main));
            break;
        }
        struct sq_addr *got = &ws->addrs[i];
        if (!sq_script_addr(t, &got->ss, &got->len)) {
            set_err(err, errlen, "setup() left the thread without an address (thread.addr)");
            rc = -SQ_ESCRIPT;
            break;
        }
        if (got->len != given->len || memcmp(&got->ss, &given->ss, given->len) != 0)
            moved = true;
        rc = sq_script_init(t, a->url, a->argc, a->argv);
        if (rc < 0) {
            set_err(err, errlen, sq_script_error(t));
            break;
        }
    }
    if (rc < 0) {
        sq_wrk_script_close(ws);
        return rc;
    }
    /* Threads whose address setup() left alone keep the run's own (with its round-robin over
     * every address); any other address is that thread's alone, as in wrk. */
    if (moved)
        ws->run.addrs = ws->addrs;
    ws->run.states = ws->states;
    ws->run.n = ws->n;
    ws->hooks = sq_script_hooks(ws->states[0]) | (sq_script_hooks(ws->main) & SQ_SCRIPT_DONE);
    uint32_t nreq;
    sq_script_static_request(ws->states[0], &ws->request, &ws->request_len, &nreq);
    return 0;
}

void sq_wrk_errors(const struct sq_counters *c, uint64_t *connect, uint64_t *read, uint64_t *write,
                   uint64_t *status, uint64_t *timeout)
{
    const uint64_t *e = c->errors;
    *connect = e[SQ_ERRK_CONNECT] + e[SQ_ERRK_DNS] + c->tls_handshake_errors;
    *read = e[SQ_ERRK_CLOSED] + e[SQ_ERRK_PARSE] + e[SQ_ERRK_DECODE] + e[SQ_ERRK_UNSOLICITED] +
            (e[SQ_ERRK_TLS] - c->tls_handshake_errors);
    *write = e[SQ_ERRK_WRITE];
    *status = c->status[4] + c->status[5];
    *timeout = e[SQ_ERRK_TIMEOUT];
}

int sq_wrk_script_done(struct sq_wrk_script *ws, const struct sq_result *r, char *err,
                       size_t errlen)
{
    if (!ws->main || !(sq_script_hooks(ws->main) & SQ_SCRIPT_DONE))
        return 0;
    struct sq_script_summary sum = {
        .duration_us = r->duration_ns / SQ_NS_PER_US,
        .requests = r->c.completed,
        .bytes = r->c.bytes_received,
    };
    sq_wrk_errors(&r->c, &sum.errors.connect, &sum.errors.read, &sum.errors.write,
                  &sum.errors.status, &sum.errors.timeout);
    int rc = sq_script_done(ws->main, &sum, r->latency, r->rate);
    if (rc < 0)
        set_err(err, errlen, sq_script_error(ws->main));
    return rc;
}

void sq_wrk_script_close(struct sq_wrk_script *ws)
{
    for (uint32_t i = 0; ws->states && i < ws->n; i++)
        sq_script_free(ws->states[i]);
    sq_script_free(ws->main);
    free(ws->states);
    free(ws->addrs);
    memset(ws, 0, sizeof(*ws));
}
