/* cli/instr_run.h - what `squall measure` and `squall ab` share: the runs they start as children of
 * this squall (each writes its result document to a file of its own), the servers they start
 * and stop, the address a URL names for readiness probes, and Ctrl-C.
 */
#ifndef SQ_CLI_INSTR_RUN_H
#define SQ_CLI_INSTR_RUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli/common.h"
#include "net/sock.h"

/* A run of this squall as a child: `squall ARGS -q --json FILE`, its stderr kept in a file. */
struct sq_cli_child {
    pid_t pid;
    char json_path[64], err_path[64];
    int status; /* the wait status, once done */
    bool done;
};

/* Starts the child. Returns 0 or -errno (after printing nothing: the caller says what failed). */
int sq_cli_child_start(struct sq_cli_child *c, const char *const *args, int nargs);
/* True once the child has exited (reaps it). */
bool sq_cli_child_poll(struct sq_cli_child *c);
/* Waits for the child (killing it after timeout_ns), then reads its result: *exit its exit
 * status (128 + signal when killed), *doc its document or NULL, err the first line it wrote to
 * stderr ("" if none). Removes its files. */
void sq_cli_child_finish(struct sq_cli_child *c, int64_t timeout_ns, int *exit, json_t **doc,
                         char *err, size_t len);
/* Kills the child (if it runs) and removes its files. */
void sq_cli_child_abort(struct sq_cli_child *c);

/* The address and request of a URL a probe goes to: "http://127.0.0.1:8080/health". */
struct sq_cli_probe_url {
    struct sq_addr addr;
    char authority[300];
    char path[1024];
};

/* Parses url (http:// only: the probe speaks plain HTTP/1.1) and resolves its host. Returns 0,
 * or -SQ_EPARSE / -SQ_ESCHEME / -SQ_ERESOLVE / -SQ_ETOOBIG with *why set. */
int sq_cli_probe_url(const char *url, struct sq_cli_probe_url *out, const char **why);

/* Waits until the server started as pid is ready: accepts a TCP connection (want_2xx false), or
 * answers a GET with a 2xx (want_2xx true), polling every millisecond. Returns 0 with *ready_ns
 * (CLOCK_MONOTONIC when it was), -ETIMEDOUT after timeout_ns, -ECHILD when pid exited first
 * (*status its wait status; it is reaped), or -EINTR when Ctrl-C was pressed. *last_status is
 * the last non-2xx status it answered (0: none). */
int sq_cli_wait_ready(pid_t pid, const struct sq_cli_probe_url *u, bool want_2xx,
                      int64_t timeout_ns, int64_t *ready_ns, int *status, int *last_status);

/* Checks the squall arguments of a run (an arm, a --load) the way the run will, without running
 * it: the quick face's flags, or the plan face's when args[0] is "run". extra (may be NULL, nextra
 * words) is appended as the run will append it. Returns 0, or -SQ_EUSAGE with err holding the
 * run's own message ("-c: '0' is not a connection count (1..1000000)"). */
int sq_cli_check_run_args(const char *const *args, int nargs, const char *const *extra, int nextra,
                          char *err, size_t len);

/* SIGINT and SIGTERM for the instruments: the first sets the flag (the face stops what it
 * started, writes what it measured so far marked interrupted, and exits SQ_EXIT_INTERRUPTED);
 * a repeat changes nothing (each stop it waits on is bounded). */
void sq_cli_instr_signals(void);
bool sq_cli_instr_interrupted(void);

/* Sleeps ns, waking early (false) when Ctrl-C was pressed. */
bool sq_cli_instr_sleep(int64_t ns);

/* An instrument's --json FILE and --html FILE (measure, ab): opened before anything runs, so a
 * path that cannot be written is refused first ("-" for --json is standard output, written at
 * the end), and written atomically (cli/common.h) once the document is known. */
struct sq_cli_docfiles {
    const char *face;
    const char *json_path, *html_path; /* NULL: not asked */
    struct sq_cli_file jf, hf;
};

/* Opens the files asked for. Returns 0, or the exit status after printing why. */
int sq_cli_docfiles_open(struct sq_cli_docfiles *d);
/* Whether --json - takes standard output (the face's table then goes to stderr). */
bool sq_cli_docfiles_json_stdout(const struct sq_cli_docfiles *d);
/* Writes doc as JSON and as the page html(doc, FILE) renders, each one committed. Returns 0, or
 * -1 after printing "FACE: --json: writing 'PATH': why" (or --html's) for each that failed. */
int sq_cli_docfiles_write(struct sq_cli_docfiles *d, const json_t *doc,
                          int (*html)(const json_t *doc, FILE *f));
/* Removes what was not committed: nothing under its name. */
void sq_cli_docfiles_discard(struct sq_cli_docfiles *d);

/* Stopped by a signal: the run faces' code (cli.h SQ_EXIT_SIGNAL, k6's external abort). */
#define SQ_EXIT_INTERRUPTED 105

#endif
