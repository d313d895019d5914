/* cli/common.h - what the two load faces, `squall URL` (quick.c) and `squall run PLAN`
 * (run_cmd.c), both do around a run: one-line messages, signals, the progress line, the output
 * files and the end-of-run render. The flags and the run set-up are the engine's
 * (face/quick.h, face/planrun.h), shared with the daemon; the CLI prints what they say.
 */
#ifndef SQ_CLI_COMMON_H
#define SQ_CLI_COMMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/capture.h"
#include "engine/run.h"
#include "output/ndjson.h"

struct sq_progress;

/* Prints "FACE: MESSAGE (see FACE --help)" as one line on stderr and returns SQ_EXIT_USAGE;
 * control bytes in MESSAGE (a value the user typed) are shown as C escapes (\r, \n, \x01).
 * face is how the user called it: "squall", "squall run", "squall target"... The shapes every
 * face uses: "FLAG: 'VALUE' is not A THING (what is)", "FLAG needs a value",
 * "unknown flag 'FLAG'". */
int sq_cli_usage_error(const char *face, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* What getopt_long refused (opt '?' or ':', flag as sq_flag_name named it), worded by
 * face/flags.h's sq_flag_refused ("--x needs a value", "unknown flag '--durration' (did you mean
 * '--duration'?)"), as a usage error of face. Returns SQ_EXIT_USAGE. */
struct option;
int sq_cli_flag_refused(const char *face, const struct option *longs, int opt, const char *flag);

/* The getopt_long loop of every face with long flags: argv from its start (optind = 0: getopt
 * starts afresh), getopt's own messages off (opterr = 0), each flag named as the user wrote it
 * (face/flags.h's sq_flag_name) and handed to take(ud, longs, opt, flag) with optarg set.
 * Returns 0 once every flag was taken, or the first non-zero take returned (an exit status, or
 * SQ_EXIT_DONE when --help was answered); optind is then the first operand. */
typedef int (*sq_cli_take_fn)(void *ud, const struct option *longs, int opt, const char *flag);
int sq_cli_getopt(int argc, char **argv, const char *shorts, const struct option *longs,
                  sq_cli_take_fn take, void *ud);

/* Prints what the run set-up code refused (face/flags.h) and returns the exit status:
 * -SQ_EUSAGE as a usage error of face ("FACE: MSG (see FACE --help)", SQ_EXIT_USAGE),
 * -SQ_EPARSE as "squall: MSG" (a plan's fault, SQ_EXIT_USAGE), any other code as "squall: MSG"
 * (SQ_EXIT_FAIL). */
int sq_cli_prep_error(const char *face, int rc, const char *msg);

/* A TLS option the library refused (the message of sq_tls_client_new / sq_tls_server_new, which
 * names the option: "cacert '/x.pem': No such file or directory"), printed as a usage error that
 * names the flag instead: "FACE: --cacert: '/x.pem': No such file or directory". Returns
 * SQ_EXIT_USAGE. */
int sq_cli_tls_error(const char *face, const char *err);

/* Prints "FACE: MESSAGE" as one line on stderr, escaped like sq_cli_usage_error: a problem that is
 * not a flag's (a file that is not a result, a path that cannot be written). */
void sq_cli_error(const char *face, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A copy of the argv array (the pointers only; free() it), taken before getopt reorders it. NULL
 * when out of memory. */
char **sq_cli_argv_copy(int argc, char **argv);

/* Signals around a run: SIGINT and SIGTERM both stop it gracefully, and every output is still
 * written. begin ignores SIGPIPE, installs the handlers and returns the flag the run polls
 * (struct sq_run_config.stop): the first signal sets it to SQ_STOP_GRACEFUL (the run stops
 * starting work; what is in flight may finish for the graceful stop, at most 5 s). A second
 * signal counts only when it comes 1 s or more after the first (`timeout -s INT` and a terminal's
 * Ctrl-C deliver one signal to the process and one to its group, at once): it sets SQ_STOP_NOW,
 * so the run ends at once, still with its outputs. The face may set the flag itself (an
 * abortOnFail threshold). end puts the default actions back. */
volatile int *sq_cli_signals_begin(void);
/* After a run that a signal or an abortOnFail threshold stopped: the stop flag cleared for the
 * plan's teardown:, which a further signal stops at once. */
volatile int *sq_cli_signals_again(void);
void sq_cli_signals_end(void);

/* A server face (target, inbox, agent) stops on SIGINT and SIGTERM: handler for both (it may
 * only do what is async-signal-safe). */
void sq_cli_stop_signals(void (*handler)(int));

/* The one line a server face prints on stdout once it listens (tests read the port from it):
 * "squall WHAT listening on SCHEME://HOST:PORTTAIL", an IPv6 host in brackets; flushed. */
void sq_cli_listening(const char *what, const char *scheme, const char *host, unsigned port,
                      const char *tail);

/* Whether a signal arrived since sq_cli_signals_begin: its number (0: none) and, in *forced,
 * whether a second one cut the grace period short. */
int sq_cli_signal_seen(bool *forced);
/* Marks res as stopped by that signal ("stopped by SIGTERM", "stopped by SIGINT, then at once
 * by a second SIGINT 1.3 s later"). */
void sq_cli_signal_mark(struct sq_result *res, int sig, bool forced);
/* Adds {"signal": {"name": "SIGTERM", "forced": false}} to the result document. */
void sq_cli_signal_doc(json_t *doc, int sig, bool forced);

/* The progress line on stderr: redrawn in place on a terminal (coloured unless NO_COLOR is set),
 * a plain line every 10 s elsewhere. open: an arrival-rate run; length_s: the bar's length (0
 * when the run is a count of requests). */
void sq_cli_progress_init(struct sq_progress *p, bool open, double length_s);

/* An output file written atomically: into a temporary file beside it (".NAME.XXXXXX" in the
 * same directory), renamed over NAME only once complete. A run killed half-way (SIGKILL, a
 * crash) leaves no partial file under NAME. Standard output ("-"), a device or a FIFO are written
 * directly; a symbolic link is followed and its target replaced. */
struct sq_cli_file {
    const char *flag; /* for messages: "--json", "--out csv" */
    char *path;       /* where it lands (a link resolved) */
    char *tmp;        /* the temporary file; NULL when written directly */
    FILE *f;
    bool made; /* sq_cli_file_stream created it (discard removes it) */
};

/* Checks that path can be written (creates and removes a temporary file beside it) without
 * touching it: before the run, so a path that cannot be written is refused before any load is
 * sent. Returns 0, or SQ_EXIT_USAGE after printing "FACE: FLAG: cannot write 'PATH': why". */
int sq_cli_file_check(const char *face, const char *flag, const char *path);
/* Opens the temporary file (or path itself, directly). Returns 0, or SQ_EXIT_USAGE after
 * printing why. */
int sq_cli_file_open(const char *face, const char *flag, const char *path, struct sq_cli_file *out);
/* Opens path itself for a file written while the run goes (--out csv=, hdr=, ndjson=), so that a
 * reader tailing it sees each second: created (0666 less the umask) or truncated, close-on-exec,
 * a link followed; "-" is standard output. Returns 0, or SQ_EXIT_USAGE after printing
 * "FACE: FLAG: cannot write 'PATH': why". Committing it flushes and closes it; discarding it
 * removes it when this call created it. */
int sq_cli_file_stream(const char *face, const char *flag, const char *path,
                       struct sq_cli_file *out);
/* Flushes, syncs and closes the file, then renames it over its name. Returns 0, or -errno after
 * printing "squall: FLAG: writing 'PATH': why" (the temporary file is removed). */
int sq_cli_file_commit(struct sq_cli_file *o);
/* Closes and removes the temporary file (nothing is written under the name). */
void sq_cli_file_discard(struct sq_cli_file *o);

/* The end-of-run outputs both faces render from the result document. */
struct sq_cli_outputs {
    const char *face;       /* for messages: "squall", "squall run" */
    const char *json_path;  /* --json FILE, "-" for stdout; NULL: not asked */
    const char *html_path;  /* --html FILE; NULL: not asked */
    const char *junit_path; /* --junit FILE, "-" for stdout; NULL: not asked */
    bool quiet;             /* -q: no summary */
};

/* Checks --html, --json and --junit before the run (sq_cli_file_check), so a path that cannot be
 * written is refused before any load is sent. Returns 0, or SQ_EXIT_USAGE after printing why. */
int sq_cli_outputs_open(struct sq_cli_outputs *o);
/* Renders doc to every output: the summary (stdout, or stderr when the JSON takes stdout;
 * coloured on a terminal unless NO_COLOR is set), the JSON, the HTML report and the JUnit XML
 * (output/junit.h), each file written atomically. An output that fails gets one line on stderr; the
 * others are still written. Returns 0, or -1 when an output could not be written. */
int sq_cli_render(const struct sq_cli_outputs *o, const json_t *doc);

/* The --out files of both load faces, written into the named file while the run goes (not
 * atomically: users tail them): csv= and hdr= from the run's tick (main thread), ndjson= from the
 * engine's writer thread; each flushed at every tick. */
struct sq_cli_series {
    const char *face;
    FILE *csv, *hdr; /* csvf.f, hdrf.f */
    bool hdr_failed;
    struct sq_ndjson nd; /* nd.f: the ndjson file; set labels before the run (output/ndjson.h) */
    struct sq_cli_file csvf, hdrf, ndf; /* each written as it goes (sq_cli_file_stream) */
    char *_ndbuf; /* ndf's stdio buffer (glibc's setvbuf takes a size only with a buffer) */
    const struct sq_plan_metric *metrics; /* the plan's own metrics: csv columns (or NULL) */
    uint32_t nmetrics;
};

/* Opens the files asked for (a NULL path: not asked), writes their headers and, for ndjson,
 * hooks the writer into cfg (sample: the share recorded, 0 for all). Before any load is sent, so
 * a path that cannot be written is refused first. Returns 0, or SQ_EXIT_USAGE after printing
 * "FACE: --out csv: cannot write 'PATH': why". */
int sq_cli_series_open(struct sq_cli_series *s, const char *face, const char *csv, const char *hdr,
                       const char *ndjson, double sample, struct sq_run_config *cfg);
/* One second of the run (from the run's on_tick). */
void sq_cli_series_tick(struct sq_cli_series *s, const struct sq_second *e,
                        const struct sq_hist *h);
/* After the run: one line on stderr for what went wrong (an interval hdr could not encode, a
 * failed ndjson write, records the writer could not keep up with). */
void sq_cli_series_report(struct sq_cli_series *s, const struct sq_result *res);
/* Closes the files: commit flushes and closes each; !commit (nothing measured) also removes
 * those the run created (a file that was there before was truncated when the run began). */
void sq_cli_series_close(struct sq_cli_series *s, bool commit);

/* True when colour goes to f: a terminal, and NO_COLOR unset or empty. */
bool sq_cli_color(FILE *f);

/* --verbose and --http-debug: the exchanges the run's capture hook (engine/capture.h) handed
 * over, kept (a copy each, at most 64, the first per status and error kind across workers in
 * the first-of-kind mode) and printed after the run, curl -v style. */
struct sq_cli_capture {
    struct sq_capture cfg; /* give &cfg to the run */
    void *_priv;
};
/* Returns 0 or -ENOMEM. */
int sq_cli_capture_init(struct sq_cli_capture *c, enum sq_capture_mode mode);
/* Prints what was kept to f (stderr), each exchange headed by what it was. */
void sq_cli_capture_print(const struct sq_cli_capture *c, FILE *f);
void sq_cli_capture_dispose(struct sq_cli_capture *c);

/* Reads a saved result document (`squall report FILE`, `squall compare A B`; "-" is stdin) and
 * checks it (output/doc.h). Returns SQ_EXIT_OK with *out set (json_decref it), or SQ_EXIT_USAGE
 * after printing "FACE: PATH: what is wrong" (cannot be opened, a directory, over 256 MiB, not
 * JSON, not a squall result). */
int sq_cli_read_result(const char *face, const char *path, json_t **out);

/* The exit status of a run that completed (thresholds aside): SQ_EXIT_SIGNAL when a signal
 * stopped it, SQ_EXIT_OK, or SQ_EXIT_FAIL after printing "squall: no request succeeded: why"
 * (output/json.h sq_report_why_failed; timeout_ns: the run's request timeout) when it did not
 * succeed by result/verdict.h's rule, the one every face and the daemon apply. */
int sq_cli_run_status(const struct sq_result *res, int sig, int64_t timeout_ns);

#endif
