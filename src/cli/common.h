/* cli/common.h - what the two load faces, `squall URL` (quick.c) and `squall run PLAN`
 * (run_cmd.c), both do around a run: one-line messages, signals, the progress line, the output
 * files and the end-of-run render. The flags and the run set-up are the engine's
 * (engine/quick.h, engine/planrun.h), shared with the daemon; the CLI prints what they say.
 */
#ifndef SQ_CLI_COMMON_H
#define SQ_CLI_COMMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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

/* Prints what the run set-up code refused (engine/flags.h) and returns the exit status:
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

/* Signals around a run. begin ignores SIGPIPE and installs the SIGINT handler, and returns the
 * flag the run polls (struct sq_run_config.stop): the first SIGINT sets it, so the run winds
 * down and every output is written; a second SIGINT kills the process at once. The face may set
 * the flag itself (an abortOnFail threshold). end puts SIGINT back to its default. */
volatile int *sq_cli_signals_begin(void);
void sq_cli_signals_end(void);

/* The progress line on stderr: redrawn in place on a terminal (coloured unless NO_COLOR is set),
 * a plain line every 10 s elsewhere. open: an arrival-rate run; length_s: the bar's length (0
 * when the run is a count of requests). */
void sq_cli_progress_init(struct sq_progress *p, bool open, double length_s);

/* Opens an output file for writing. Returns it, or NULL with *exit_code set to SQ_EXIT_USAGE
 * after printing "FACE: FLAG: cannot write 'PATH': why". */
FILE *sq_cli_open_out(const char *face, const char *flag, const char *path, int *exit_code);

/* The end-of-run outputs both faces render from the result document. */
struct sq_cli_outputs {
    const char *face;      /* for messages: "squall", "squall run" */
    const char *json_path; /* --json FILE, "-" for stdout; NULL: not asked */
    const char *html_path; /* --html FILE; NULL: not asked */
    bool quiet;            /* -q: no summary */
    FILE *json, *html;     /* opened by sq_cli_outputs_open */
};

/* Opens --html and --json before the run, so a path that cannot be written is refused before
 * any load is sent. Returns 0, or SQ_EXIT_USAGE after printing why. */
int sq_cli_outputs_open(struct sq_cli_outputs *o);
/* Renders doc to every output: the summary (stdout, or stderr when the JSON takes stdout), the
 * JSON and the HTML report. An output that fails gets one line on stderr; the others are still
 * written. */
void sq_cli_render(const struct sq_cli_outputs *o, const json_t *doc);
void sq_cli_outputs_close(struct sq_cli_outputs *o);

/* The --out files of both load faces, written while the run goes: csv= and hdr= from the run's
 * tick (main thread), ndjson= from the engine's writer thread. */
struct sq_cli_series {
    const char *face;
    FILE *csv, *hdr;
    bool hdr_failed;
    struct sq_ndjson nd; /* nd.f: the ndjson file; set labels before the run (output/ndjson.h) */
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
void sq_cli_series_close(struct sq_cli_series *s);

/* The exit status of a run that completed (thresholds aside): SQ_EXIT_OK, or SQ_EXIT_FAIL after
 * printing "squall: no request succeeded: why" when nothing completed. */
int sq_cli_run_status(const struct sq_result *res);

#endif
