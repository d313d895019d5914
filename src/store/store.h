/* store/store.h - the run store: one SQLite database of runs, their per-second series and their
 * results, shared by `squall serve` (writes) and `squall runs` (reads). docs/internals/store.md
 * says why it is shaped so.
 *
 * Errors. A call that can fail returns 0 or a negative code, and writes one sentence saying
 * what failed into err (errlen bytes, always NUL-terminated; err may be NULL when errlen is 0):
 *   -EINVAL   a bad argument: an unknown status, a result or request that is not valid JSON,
 *             a finished run without a result document, a negative second index
 *   -ENOENT   no such run (or it has no result; or, read-only, no store at that path)
 *   -EPERM    the run's status does not allow it: an illegal transition, appending a second to
 *             a run that is not running, deleting a queued or running run
 *   -EEXIST   that second of that run is already stored
 *   -EBUSY    another squall process holds the store, or the database stayed locked past the
 *             busy timeout
 *   -ENOTSUP  the database's schema is newer than this squall's (or, read-only, older)
 *   -EIO      not a squall store, not a database, corrupt, or another SQLite failure
 *   -EROFS    a write through a read-only handle
 *   -ENOMEM, -ENOSPC, -EACCES, -SQ_ETOOBIG, or a negative errno from the file system
 *
 * Threads. One struct sq_store serves every thread of a process, and calls never interleave
 * inside a transaction: writes (create, start, end, append, delete, prune) take the writer
 * connection's mutex for the whole call; reads (get, list, series, result, count, check) take
 * the reader connection's, so an API read never waits for a write's fsync, only for another
 * read. A read sees every write that returned before it started. sq_store_open starts one
 * thread of its own (the checkpointer, idle until the WAL grows); do not fork() with a store
 * open. A process opens the store read-write once (a second read-write open, from this process
 * or another, is -EBUSY); read-only handles (sq_store_opts.read_only) may be opened beside it,
 * by any process, and refuse every write with -EROFS.
 *
 * Durability. The database is in WAL mode. A call that changes a run's state (create, start,
 * end with its result) returns only once its transaction is on disk (synchronous=FULL for that
 * commit): no finished run is lost, even to a power cut. A second of series is its own
 * transaction at synchronous=NORMAL: it survives the process being killed the moment the call
 * returns (kill -9 loses at most the second being written); a power cut may lose the seconds
 * written since the last state change or checkpoint, never the database.
 *
 * Times are wall-clock Unix milliseconds (sq_store_opts.clock_ms); 0 means "not yet". */
#ifndef SQ_STORE_STORE_H
#define SQ_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SQ_STORE_FILE              "squall.db" /* the database file inside a data directory */
#define SQ_STORE_SCHEMA_VERSION    2           /* PRAGMA user_version this squall writes */
#define SQ_STORE_KEEP_RUNS_DEFAULT 200         /* retention: runs kept */
#define SQ_STORE_KEEP_DAYS_DEFAULT 0           /* retention: no age limit */
#define SQ_STORE_LIST_DEFAULT      50          /* runs per page when the query says 0 */
#define SQ_STORE_LIST_MAX          1000        /* runs per page at most */
#define SQ_STORE_PRUNE_BATCH       500         /* cost units per pruning transaction */

/* A run's status, with its name in the database and the API. One list builds both. */
#define SQ_STORE_STATUS_LIST(X)                                                                    \
    X(SQ_STORE_QUEUED, "queued")                                                                   \
    X(SQ_STORE_RUNNING, "running")                                                                 \
    X(SQ_STORE_FINISHED, "finished")                                                               \
    X(SQ_STORE_STOPPED, "stopped")                                                                 \
    X(SQ_STORE_FAILED, "failed")                                                                   \
    X(SQ_STORE_INTERRUPTED, "interrupted")

enum sq_store_status {
#define SQ_STORE_STATUS_ENUM(name, str) name,
    SQ_STORE_STATUS_LIST(SQ_STORE_STATUS_ENUM)
#undef SQ_STORE_STATUS_ENUM
        SQ_STORE_STATUS__COUNT
};

/* For sq_store_query.status_mask. */
#define SQ_STORE_STATUS_BIT(st) (1u << (unsigned)(st))

enum sq_store_kind {
    SQ_STORE_QUICK, /* the quick face's options */
    SQ_STORE_PLAN,  /* a plan's YAML text */
};

/* "queued", "running", ...; "?" for a value outside the enum. Never NULL. */
const char *sq_store_status_name(enum sq_store_status st);
/* Parses a status name (exact, lowercase). Returns 0, or -EINVAL when s names none. */
SQ_MUST_CHECK int sq_store_status_parse(const char *s, enum sq_store_status *out);
/* True for finished, stopped, failed and interrupted: a run that will never change again. */
bool sq_store_status_ended(enum sq_store_status st);
/* "quick" or "plan"; "?" outside the enum. */
const char *sq_store_kind_name(enum sq_store_kind k);

struct sq_store; /* opaque; sq_store_open creates it, sq_store_close frees it */

struct sq_store_opts {
    /* Open without writing anything: no migration, no recovery, no lock. The database must
     * exist with this squall's schema version. For `squall runs` beside a running daemon. */
    bool read_only;
    int busy_timeout_ms;  /* how long a call waits for another process's lock; 0: 5000 */
    int checkpoint_pages; /* WAL pages that wake the checkpointer; 0: 1000 (4 MiB) */
    /* The wall clock, Unix ms (tests pass a fake one); NULL: CLOCK_REALTIME. Called by writes,
     * under the writer's mutex. */
    int64_t (*clock_ms)(void *ud);
    void *clock_ud;
};

/* Opens (creating if need be) the store at path, which is either a data directory (an existing
 * directory, or a path not ending in ".db": created with its parents, mode 0700; the database is
 * path/squall.db) or a database file (an existing file, or a path ending in ".db"). The
 * database and its lock file are created mode 0600: requests may hold credentials.
 *
 * Read-write opens then, in order: take path's lock file (squall.db.lock, holding the pid:
 * -EBUSY names the pid holding it), refuse a database that is not a squall store or whose
 * schema is newer (-ENOTSUP: "... has schema version 3, newer than this squall's 2 ..."), migrate
 * an older schema step by step (each step one transaction), and recover: every run left queued or
 * running by a previous process becomes interrupted, with its series so far and a reason
 * (sq_store_recovered says how many). o may be NULL for the defaults.
 * On error *out is untouched and nothing stays open. */
SQ_MUST_CHECK int sq_store_open(const char *path, const struct sq_store_opts *o,
                                struct sq_store **out, char *err, size_t errlen);
/* Closes the database (a read-write close checkpoints the WAL into the database) and releases
 * the lock. Every other call on s must have returned. NULL is a no-op. */
void sq_store_close(struct sq_store *s);
/* The database file's path (owned by s). */
const char *sq_store_path(const struct sq_store *s);
/* How many runs sq_store_open found queued or running and marked interrupted. */
int sq_store_recovered(const struct sq_store *s);
/* How many times the checkpointer thread has copied the WAL into the database (read-write
 * opens; for tests and /metrics). */
int64_t sq_store_checkpoints(const struct sq_store *s);

/* ---- runs ---- */

struct sq_store_new_run {
    enum sq_store_kind kind;
    const char *name;    /* NULL: "" */
    const char *target;  /* the URL (quick) or the plan's first target, for the list; NULL: "" */
    const char *request; /* JSON text: the request as the API got it (quick options or plan) */
};

/* Stores a new run, queued, created now. *id is its id: ids grow and are never reused, even
 * after a delete. Durable when it returns 0. -EINVAL when request is not valid JSON. */
SQ_MUST_CHECK int sq_store_run_create(struct sq_store *s, const struct sq_store_new_run *r,
                                      int64_t *id, char *err, size_t errlen);

/* queued -> running, started now. -EPERM from any other status; -ENOENT. Durable. */
SQ_MUST_CHECK int sq_store_run_start(struct sq_store *s, int64_t id, char *err, size_t errlen);

struct sq_store_end {
    /* SQ_STORE_FINISHED (from running), SQ_STORE_STOPPED or SQ_STORE_FAILED (from running or
     * queued: a queued run stopped before it started, or one that could not start). */
    enum sq_store_status status;
    const char *reason; /* NULL, or a sentence: why it stopped or failed */
    /* The squall.result/1 document (JSON text, doc_len bytes), required for finished, optional
     * otherwise. The list's summary (req/s, p99, errors, sent) is read from it; without one it
     * is summed from the stored series (p99 stays unknown). */
    const char *doc;
    size_t doc_len;
    /* The merged latency histograms, as stats/hist.c's V2 encoder wrote them: opaque bytes to
     * the store. NULL/0 when absent (hist_uncorrected: closed-loop runs). Stored only with a
     * doc. */
    const void *hist;
    size_t hist_len;
    const void *hist_uncorrected;
    size_t hist_uncorrected_len;
};

/* Ends a run: its status, ended now, its reason and its result, in one transaction, durable
 * when it returns 0. -EPERM for an illegal transition (the message names both statuses),
 * -EINVAL for a bad status, a missing doc on finished or a doc that is not valid JSON. */
SQ_MUST_CHECK int sq_store_run_end(struct sq_store *s, int64_t id, const struct sq_store_end *e,
                                   char *err, size_t errlen);

/* Keeps an end the store could not write (sq_store_run_end failed: the file system is full, or
 * the disk failed) in memory, with its result, so that nothing is lost while the store cannot
 * take it: every read through this handle shows the run ended so (get, list, count; its result
 * from memory), sq_store_run_delete writes it before deleting, and sq_store_retry writes it once
 * the store can take it. Another process reading the file (squall runs) sees the run as the file
 * has it until then; if this process ends first, the next read-write open finds it running and
 * marks it interrupted. The run must be running or queued (-EPERM otherwise, or once it already
 * has a kept end). Copies e. Returns 0, -EINVAL as sq_store_run_end, -ENOMEM or a read's error. */
SQ_MUST_CHECK int sq_store_run_end_later(struct sq_store *s, int64_t id,
                                         const struct sq_store_end *e, char *err, size_t errlen);
/* How many kept ends wait to be written. */
size_t sq_store_pending(struct sq_store *s);
/* Writes the kept ends, oldest first, each in its durable transaction (as sq_store_run_end), and
 * forgets each once written (or once the file would refuse it: the run is not running or queued
 * there any more). Returns 0 when none is left, or the first write's error (the rest stay kept).
 * *written (may be NULL): the id of the first end written this call, 0 if none. */
SQ_MUST_CHECK int sq_store_retry(struct sq_store *s, int64_t *written, char *err, size_t errlen);

/* A run as the list and the API show it. Strings are owned by the struct (free with
 * sq_store_run_dispose). Summary figures are -1 while unknown (a run without a result or
 * series, or p99 without a result). */
struct sq_store_run {
    int64_t id;
    enum sq_store_kind kind;
    enum sq_store_status status;
    int64_t created_ms, started_ms, ended_ms; /* 0: not (yet) */
    char *name;                               /* never NULL */
    char *target;                             /* never NULL */
    char *request;                            /* JSON text from sq_store_run_get; NULL in a list */
    char *reason;     /* NULL, or why it stopped, failed or was interrupted */
    double req_per_s; /* completed requests per second */
    int64_t p99_us, errors, sent;
    bool has_result; /* sq_store_result_get will find one */
};

/* Reads one run, with its request. -ENOENT when there is none. On error *out is zeroed. */
SQ_MUST_CHECK int sq_store_run_get(struct sq_store *s, int64_t id, struct sq_store_run *out,
                                   char *err, size_t errlen);
/* Frees what a run owns and zeroes it. NULL is a no-op. */
void sq_store_run_dispose(struct sq_store_run *r);

struct sq_store_query {
    unsigned status_mask; /* SQ_STORE_STATUS_BIT()s; 0: every status */
    size_t limit;         /* runs per page: 0 = SQ_STORE_LIST_DEFAULT, at most SQ_STORE_LIST_MAX */
    int64_t before_id;    /* 0, or only runs with a smaller id (the cursor: the last id seen) */
    int64_t before_ms;    /* 0, or only runs created before this time */
};

struct sq_store_runs {
    struct sq_store_run *v; /* newest first (highest id first) */
    size_t n;
    bool more; /* another page follows: query again with before_id = v[n - 1].id */
};

/* Lists runs, newest first, one page. q may be NULL (the first page of every run).
 * -EINVAL for a mask with unknown bits or a limit above SQ_STORE_LIST_MAX. A run with a kept end
 * shows it; with a status filter it leaves the page it would not match (the page is shorter,
 * `more` unchanged), and a filter on its kept status does not find it until it is written. */
SQ_MUST_CHECK int sq_store_run_list(struct sq_store *s, const struct sq_store_query *q,
                                    struct sq_store_runs *out, char *err, size_t errlen);
void sq_store_runs_dispose(struct sq_store_runs *l); /* NULL is a no-op */

/* Deletes an ended run with its series and result. -EPERM for a queued or running run,
 * -ENOENT when there is none. A run with a kept end (sq_store_run_end_later) has it written
 * first: when that still fails, its error (-ENOSPC...) and nothing is deleted. */
SQ_MUST_CHECK int sq_store_run_delete(struct sq_store *s, int64_t id, char *err, size_t errlen);

/* How many runs have each status (indexed by enum sq_store_status), for /metrics. */
SQ_MUST_CHECK int sq_store_count(struct sq_store *s, int64_t counts[SQ_STORE_STATUS__COUNT],
                                 char *err, size_t errlen);

/* ---- series ---- */

/* One second of a run: what the daemon maps the engine's struct sq_second onto. Unsigned
 * counts above INT64_MAX are stored as INT64_MAX. */
struct sq_store_second {
    int64_t idx;  /* 0 for the run's first second, then 1, 2, ... (gaps allowed, not repeats) */
    double t_s;   /* end of the interval, seconds after the start */
    double len_s; /* its length (the last one may be shorter) */
    uint64_t sent, completed, failed, errors, dropped;
    uint64_t bytes;  /* received */
    uint64_t active; /* closed model: active VUs; open model: in flight at the end */
    int64_t p50_us, p90_us, p99_us, max_us;
    /* NULL, or JSON text with fields the struct lacks (status classes, checks, scenarios...).
     * Appended: borrowed. Read back: owned by the series. */
    const char *extra;
};

/* Appends one second of a running run as one transaction: a process killed at any moment
 * loses at most the second being written. -EPERM when the run is not running, -EEXIST when
 * that idx is stored, -EINVAL for idx < 0 or extra that is not valid JSON. */
SQ_MUST_CHECK int sq_store_series_append(struct sq_store *s, int64_t id,
                                         const struct sq_store_second *sec, char *err,
                                         size_t errlen);

struct sq_store_series {
    struct sq_store_second *v; /* by idx */
    size_t n;
};

/* Reads a run's seconds with idx >= from_idx (0: all of them; a live view that joins late
 * reads from 0, then follows). -ENOENT when the run does not exist. */
SQ_MUST_CHECK int sq_store_series_get(struct sq_store *s, int64_t id, int64_t from_idx,
                                      struct sq_store_series *out, char *err, size_t errlen);
void sq_store_series_dispose(struct sq_store_series *se); /* NULL is a no-op */

/* ---- results ---- */

struct sq_store_result {
    char *doc; /* the squall.result/1 JSON text, NUL-terminated */
    size_t doc_len;
    unsigned char *hist; /* NULL when none was stored */
    size_t hist_len;
    unsigned char *hist_uncorrected;
    size_t hist_uncorrected_len;
};

/* Reads a run's result, byte for byte as stored. -ENOENT when the run or its result does not
 * exist (the message says which). */
SQ_MUST_CHECK int sq_store_result_get(struct sq_store *s, int64_t id, struct sq_store_result *out,
                                      char *err, size_t errlen);
void sq_store_result_dispose(struct sq_store_result *r); /* NULL is a no-op */

/* ---- retention ---- */

struct sq_store_retention {
    int64_t keep_runs; /* keep the newest N runs (of any status); 0: no count limit */
    int64_t keep_days; /* keep runs created in the last D days; 0: no age limit */
    /* Work per transaction: a run costs 1 + its seconds + its result's 4 KiB pages; 0:
     * SQ_STORE_PRUNE_BATCH. A run bigger than a batch loses its series over several
     * transactions, then goes. */
    int64_t batch;
};

struct sq_store_prune_stats {
    int64_t runs_deleted;
    int64_t rows_deleted; /* series rows */
    int64_t transactions; /* write transactions, the vacuum steps included */
    int64_t max_txn_us;   /* the longest, writer's mutex held: what an append may wait */
};

/* Deletes ended runs outside the retention (a run is deleted when it is older than the newest
 * keep_runs, or created more than keep_days ago); queued and running runs are never touched.
 * Works in transactions of about r->batch rows and lets every waiting call in between, so a
 * live run's per-second append waits at most one batch; when the WAL grows long it waits
 * between batches (holding nothing) for the checkpointer, so the WAL does not grow by all it
 * writes. Returns free pages to the file system in bounded steps (databases created by this
 * squall use incremental auto-vacuum). Takes seconds for thousands of runs: call it from a
 * thread that can wait (after each run, as the daemon does). r NULL: the defaults; stats may be
 * NULL. */
SQ_MUST_CHECK int sq_store_prune(struct sq_store *s, const struct sq_store_retention *r,
                                 struct sq_store_prune_stats *stats, char *err, size_t errlen);

/* ---- upkeep ---- */

/* Bytes the store takes on disk: the database file and its WAL. */
SQ_MUST_CHECK int sq_store_size(struct sq_store *s, int64_t *bytes, char *err, size_t errlen);
/* PRAGMA integrity_check and foreign_key_check. 0 when both are clean; -EIO with the first
 * problem otherwise. Reads the whole file: for tests and `squall runs check`, not per request. */
SQ_MUST_CHECK int sq_store_check(struct sq_store *s, char *err, size_t errlen);

#endif
