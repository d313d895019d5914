/* face/flags.h - what the load faces' flag parsers share (face/quick.c, face/planrun.c):
 * the message buffer and return codes of the run set-up, the flag getopt_long returned named as
 * the user wrote it, the message for what getopt_long refused, and the thread default.
 *
 * The set-up code prints nothing: every refusal is one line of text in the caller's buffer and a
 * return code that says whose fault it is, so `squall URL`, `squall run` and the daemon's API
 * give the same message for the same mistake:
 *
 *   0            fine
 *   -SQ_EUSAGE   a flag (or a JSON key) is wrong; the message names it: "-c: 'x' is not a
 *                connection count (1..1000000)". The CLI prints "FACE: MESSAGE (see FACE --help)"
 *                and exits 2; the daemon answers 400.
 *   -SQ_EPARSE   the plan is wrong: "plan.yaml:3:5: key: why" or "plan.yaml: why". The CLI
 *                prints "squall: MESSAGE" and exits 2; the daemon answers 400.
 *   other < 0    the run cannot be set up here (a failed lookup, the TLS library, memory, the
 *                open-file limit). The CLI prints "squall: MESSAGE" and exits 1.
 *
 * getopt_long keeps its state in globals: the parsers are not thread-safe, and each call starts
 * getopt_long afresh (optind = 0), so they may be called again and again in one process.
 */
#ifndef SQ_FACE_FLAGS_H
#define SQ_FACE_FLAGS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Room for any message of the set-up code (the CLI cuts its lines at 1023 bytes). */
#define SQ_PREP_ERRLEN 2048

/* Writes the message into err and returns -SQ_EUSAGE. */
int sq_flag_fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The flag getopt_long just returned (opt), named as the user wrote it: "--connections" or "-c",
 * also for an unknown flag ('?') or one that lacks its value (':'). *li is getopt_long's
 * longindex; it is reset to -1 for the next call. Returns buf or a string of argv. */
const char *sq_flag_name(const struct option *longs, int *li, int opt, char **argv, char *buf,
                         size_t size);

/* What getopt_long refused (opt '?' or ':'), named by flag (sq_flag_name): "FLAG needs a value",
 * "FLAG takes no value", "'--co' is ambiguous: --connections, --connect-timeout" or
 * "unknown flag 'FLAG'". Returns -SQ_EUSAGE. */
int sq_flag_refused(const struct option *longs, int opt, const char *flag, char *err, size_t len);

/* --out KIND=FILE, the per-run files both load faces write: csv= (the per-second series),
 * hdr= (HdrHistogram's interval log), ndjson= (one line per request), and the series streamed
 * while the run goes (face/push.h): prometheus-rw=URL (remote write), influxdb=URL (line
 * protocol). Sets the matching path or URL (borrowed from arg). Returns 0 or -SQ_EUSAGE
 * ("--out: 'x' is not an output (csv=, hdr=, ndjson=FILE, prometheus-rw= or influxdb=URL)"). */
int sq_flag_out(const char *flag, const char *arg, const char **csv, const char **hdr,
                const char **ndjson, const char **prom_rw, const char **influx, char *err,
                size_t len);
/* --sample F: the share of requests --out ndjson records, 0 < F <= 1. Returns 0 or -SQ_EUSAGE. */
int sq_flag_sample(const char *flag, const char *arg, double *out, char *err, size_t len);

/* --seed N: the seed of a run's random values, a decimal integer in [0, SQ_SEED_MAX] (2^53 - 1,
 * plan/tmpl.h). Returns 0 or -SQ_EUSAGE ("--seed: 'x' is not a seed (0..9007199254740991)"). */
int sq_flag_seed(const char *flag, const char *arg, uint64_t *out, char *err, size_t len);

/* --name NAME: the run's name, not empty (borrowed from arg). Returns 0 or -SQ_EUSAGE. */
int sq_flag_run_name(const char *flag, const char *arg, const char **out, char *err, size_t len);

/* --percentiles LIST: the summary's percentiles (base/parse.h), at most max into out, their count
 * into *n. Returns 0 or -SQ_EUSAGE ("--percentiles: 'x': why"). */
int sq_flag_percentiles(const char *flag, const char *arg, double *out, size_t max, size_t *n,
                        char *err, size_t len);

/* --sample-responses N: exchanges kept per class, 0..SQ_SAMPLE_RESPONSES_MAX. Returns 0 or
 * -SQ_EUSAGE. */
int sq_flag_sample_responses(const char *flag, const char *arg, uint64_t *out, char *err,
                             size_t len);

/* True when m is a method a request line can carry (an RFC 9110 token): the serialiser itself
 * is asked (http/request.h), so the check and the request cannot disagree. -m and --urls' lines
 * both ask it. */
bool sq_flag_method_ok(const char *m);

/* --cpus LIST: CPU numbers as taskset writes them ("0,2-3": numbers and ranges, comma-separated,
 * each below SQ_FLAG_MAX_CPU), in the order given, repeats dropped, at most max into out and
 * their count into *n. Returns 0 or -SQ_EUSAGE ("--cpus: 'x': why"). */
#define SQ_FLAG_MAX_CPU 1024
int sq_flag_cpus(const char *flag, const char *arg, uint16_t *out, size_t max, uint32_t *n,
                 char *err, size_t len);

/* The worker threads of a run: asked, or the online CPUs when asked is 0. */
uint32_t sq_flag_threads(uint64_t asked);

#endif
