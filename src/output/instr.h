/* output/instr.h - the documents of the instruments (docs/instruments.md): `squall ab` (schema
 * squall.ab/1) and `squall measure` (schema squall.measure/1), built from what the CLI measured,
 * and their terminal tables and HTML pages.
 *
 * The statistics are stats/ab.h's; this file turns per-round values into medians, paired
 * differences with their bootstrap intervals, the null test's band, a verdict per metric and the
 * sentence that says it ("B is 4.1% faster (95% CI 2.8–5.3%), beyond the null test's ±1.2%").
 * Everything here is a pure function of its input (no clock, no I/O but the FILE given), so the
 * unit tests feed it made-up rounds.
 */
#ifndef SQ_OUTPUT_INSTR_H
#define SQ_OUTPUT_INSTR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

#define SQ_AB_SCHEMA      "squall.ab/1"
#define SQ_MEASURE_SCHEMA "squall.measure/1"

/* ---- squall ab ---- */

/* The metrics an A/B test compares, in this order. */
enum sq_ab_metric {
    SQ_AB_RPS,        /* rate.requests_per_s (higher is better) */
    SQ_AB_P50,        /* latency.p50_us */
    SQ_AB_P99,        /* latency.p99_us */
    SQ_AB_CLIENT_CPU, /* client.cpu_per_request_us */
    SQ_AB_SERVER_CPU, /* server.cpu_us_per_request (runs with --watch) */
    SQ_AB_NMETRICS
};

/* The metric's key in the document ("rps", "p50_us", "p99_us", "client_cpu_us",
 * "server_cpu_us"), or NULL. */
const char *sq_ab_metric_key(enum sq_ab_metric m);
/* The metric a --metric value names ("rps", "p50", "p99", "cpu", "server-cpu"); -1 if none. */
int sq_ab_metric_parse(const char *s);

/* The metrics of one run's result document (a squall.result/1 document), NaN for each one the
 * document lacks. */
void sq_ab_run_values(const json_t *result, double v[SQ_AB_NMETRICS]);

/* One arm as run: its words, its server's, and each round's outcome. */
struct sq_ab_arm_in {
    const char *name;
    const char *const *args; /* the squall arguments of each run */
    int nargs;
    const char *const *server; /* the server command started around each run, or NULL */
    int nserver;
    bool null_test;       /* the base arm again (the null test) */
    const int *exit;      /* per round: the run's exit status (-1: not run) */
    const double *values; /* per round: SQ_AB_NMETRICS values (NaN: none) */
};

struct sq_ab_in {
    const struct sq_ab_arm_in *arms; /* arms[0] is the base; a null-test arm, if any, is last */
    uint32_t narms;
    uint32_t rounds;
    const uint32_t *order; /* rounds x narms: the arm indexes in the order they ran */
    int64_t duration_ns, cooldown_ns;
    uint64_t seed;             /* of the bootstrap */
    uint32_t iters;            /* bootstrap resamples (10,000) */
    double level;              /* of the interval (0.95) */
    enum sq_ab_metric primary; /* the metric of the verdict */
};

/* Builds the A/B document (json_decref it), or NULL when out of memory. */
json_t *sq_ab_doc(const struct sq_ab_in *in);

/* A difference as the verdict states it. */
struct sq_ab_said {
    const char *arm; /* its name */
    enum sq_ab_metric metric;
    int verdict;           /* enum sq_ab_verdict (stats/ab.h) */
    double median, lo, hi; /* the median paired difference and its interval, percent */
    double level;          /* of the interval (0.95) */
    double band;           /* the null test's band, percent */
    bool null_test;        /* a null test ran (else band is 0 and says nothing) */
    double abs_median;     /* the median difference in the metric's unit (NaN: left out) */
};

/* The verdict sentence: "B is 4.1% faster (95% CI 2.8–5.3%), beyond the null test's ±1.2%",
 * "not resolvable here: the null test moves ±6.0% (B −4.1%, 95% CI −7.0 to −1.2%)", ... Returns
 * buf. */
const char *sq_ab_sentence(char *buf, size_t len, const struct sq_ab_said *s);

/* The document as a terminal table: per arm the median and spread of each metric, per arm the
 * paired differences against the base with their intervals and the null test's band, and the
 * verdict. Returns 0 or -EIO. */
SQ_MUST_CHECK int sq_ab_table(const json_t *doc, FILE *f);
/* The document as a self-contained HTML page. Returns 0, -ENOMEM or -EIO. */
SQ_MUST_CHECK int sq_ab_html(const json_t *doc, FILE *f);

/* ---- squall measure ---- */

/* One phase of a server's life (idle, under load, after), sampled once a second. */
struct sq_measure_phase {
    bool on;
    int64_t duration_ns;
    int64_t cpu_user_ns, cpu_sys_ns;
    uint64_t rss_start, rss_end, rss_peak; /* bytes, summed over its processes */
    uint32_t threads_max, procs_max;
    int32_t fds_max; /* -1: not readable */
};

/* One sample: seconds since the server was spawned, the phase, CPU in the second before (percent
 * of one core), RSS, threads, open files. */
struct sq_measure_sample {
    double t_s;
    const char *phase; /* "idle", "load", "after" */
    double cpu_pct;
    uint64_t rss_bytes;
    uint32_t threads;
    int32_t fds;
};

struct sq_measure_in {
    const char *const *command; /* the server's words */
    int ncommand;
    const char *ready_url;
    const char *binary_path; /* the file the command runs */
    int64_t binary_bytes;    /* its size; -1 unknown */
    const double *cold_ms;   /* per repeat: spawn to the first 2xx */
    size_t ncold;
    struct sq_measure_phase idle, load, after;
    const char *const *load_args; /* the load run's squall arguments, or NULL */
    int nload_args;
    int load_exit;             /* its exit status */
    const json_t *load_result; /* its result document, or NULL */
    const struct sq_measure_sample *samples;
    size_t nsamples;
};

/* Builds the measure document (json_decref it), or NULL when out of memory. */
json_t *sq_measure_doc(const struct sq_measure_in *in);
/* Its terminal table. Returns 0 or -EIO. */
SQ_MUST_CHECK int sq_measure_table(const json_t *doc, FILE *f);
/* Its HTML page. Returns 0, -ENOMEM or -EIO. */
SQ_MUST_CHECK int sq_measure_html(const json_t *doc, FILE *f);

#endif
