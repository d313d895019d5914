/* face/wrkscript.h - a wrk-style Lua script around one run (squall wrk, the quick face's -s).
 *
 * As in wrk: a *main* state runs setup(thread) once per worker before the run and
 * done(summary, latency, requests) after it; each worker owns one state of its own for init(),
 * delay(), request() and response() (script/script.h has the whole sequence). This file does the
 * before and after; the worker (worker.c) calls the per-request hooks it finds defined, and a
 * worker whose script defines none of request(), response() and delay() sends the state's static
 * request exactly as it sends a request built from flags.
 *
 *     struct sq_wrk_script ws;
 *     sq_wrk_script_open(&ws, &args, err, errlen)   every state built, setup() and init() run
 *     cfg.script = &ws.run; cfg.request = ws.request ...; sq_run(&cfg, &res, &why)
 *     sq_wrk_script_done(&ws, &res, err, errlen)    done() on the main state
 *     sq_wrk_script_close(&ws)
 *
 * Errors before the run (a syntax error: "file:line: message"; an error in the top level,
 * setup() or init(), with its traceback) come back as -SQ_ESCRIPT with the message, before any
 * connection is made.
 */
#ifndef SQ_FACE_WRKSCRIPT_H
#define SQ_FACE_WRKSCRIPT_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "engine/run.h"
#include "script/script.h"

struct sq_wrk_script_args {
    const char *file; /* the script; NULL: none (wrk's own request from the URL and -H) */
    const char *url;  /* args[0] of init(), as the user wrote it */
    const struct sq_script_target *target;
    int argc; /* the arguments after "--": init()'s args[1..argc] */
    const char *const *argv;
    uint32_t workers;            /* sq_run_workers() of the run */
    const struct sq_addr *addrs; /* the run's resolved addresses: thread i is shown i % naddrs */
    int naddrs;
    /* the run's seed (struct sq_run_config.seed): state k (0: the main one, i + 1: worker i's)
     * seeds math.random with sq_tmpl_rng_init(seed, SQ_TMPL_STREAM_LUA + k) */
    uint64_t seed;
};

struct sq_wrk_script {
    struct sq_script *main;
    struct sq_script **states; /* one per worker */
    struct sq_addr *addrs;     /* per worker, what setup() left in thread.addr */
    uint32_t n;
    unsigned hooks; /* SQ_SCRIPT_* that worker 0's state defines after init() (main: setup, done) */
    const char *request; /* worker 0's static request: the run's cfg.request */
    size_t request_len;
    struct sq_run_script run; /* what the run's cfg.script points to */
};

/* Builds the states and runs setup() and init(). Returns 0, or -SQ_ESCRIPT (err: the script's
 * message), -errno (err names the file) or -ENOMEM; on error nothing is left to close. */
SQ_MUST_CHECK int sq_wrk_script_open(struct sq_wrk_script *ws, const struct sq_wrk_script_args *a,
                                     char *err, size_t errlen);

/* wrk's error counts from squall's kinds (docs/wrk.md): connect (connect, dns, failed TLS
 * handshakes), read (closed, parse, decode, unsolicited, other TLS failures), write, status
 * (responses with a status above 399), timeout. */
void sq_wrk_errors(const struct sq_counters *c, uint64_t *connect, uint64_t *read, uint64_t *write,
                   uint64_t *status, uint64_t *timeout);

/* Calls done() on the main state with the run's summary, latency and requests-per-second
 * histograms, if the script defines done(). Returns 0 or -SQ_ESCRIPT (err: the message). */
SQ_MUST_CHECK int sq_wrk_script_done(struct sq_wrk_script *ws, const struct sq_result *r, char *err,
                                     size_t errlen);

void sq_wrk_script_close(struct sq_wrk_script *ws);

#endif
