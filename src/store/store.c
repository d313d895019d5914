/* store/store.c - the run store on SQLite.
 *
 * Three connections to one database file, each used by one thread at a time:
 *   - wr, behind its mutex: every write. The mutex, not SQLite's, keeps a call's statements
 *     together: two threads on one connection would share (and commit) each other's
 *     transactions.
 *   - rd, behind its own mutex, opened read-only: the API's reads. WAL mode lets it read the
 *     last commit while wr writes, so a GET never waits for a commit's fsync or a prune batch.
 *   - ck, the checkpointer thread's: copies the WAL back into the database (PASSIVE) when wr's
 *     WAL hook says it has grown by checkpoint_pages, so no write call pays for a checkpoint.
 *     What a writer still pays, once per WAL cycle: the sync of the WAL header when it starts
 *     the WAL over (SQLite's rule for synchronous=NORMAL).
 *
 * Durability, per kind of write:
 *   - state changes (create, start, end + result, recovery): BEGIN IMMEDIATE ... COMMIT with
 *     synchronous=FULL for that commit, so the WAL is fsynced before the call returns. That
 *     fsync also makes every earlier commit durable, series included.
 *   - a second of series: one INSERT, its own transaction, synchronous=NORMAL: in the WAL (the
 *     kernel's page cache) when it returns, which a killed process cannot undo. NORMAL in WAL
 *     mode never corrupts the database; a power cut may roll back the latest NORMAL commits.
 *   - deletes and pruning: NORMAL (losing a delete to a power cut brings a run back; harmless).
 *
 * Schema changes are forward-only steps in `migrations[]`, applied in order, each with its
 * user_version bump in one transaction; a released step never changes (tests/unit/test_store.c
 * keeps a v1 database as a fixture and migrates it).
 *
 * Pruning works in transactions of a bounded cost and hands wr's mutex over between them: a
 * thread waiting for it (the per-second writer) goes first. Between them, when the WAL is long,
 * it waits for the checkpointer, so the WAL can start over. */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "store/sqlite.h"

/* 'Sqll' (0x53716c6c) in the database header (PRAGMA application_id): a squall store. */
#define APP_ID      1399942252
#define APP_ID_TEXT "1399942252"

/* ---- names ---- */

static const char *const status_names[] = {SQ_STORE_STATUS_LIST(SQ_LIST_STR)};

const char *sq_store_status_name(enum sq_store_status st)
{
    return SQ_NAME_AT(status_names, st);
}

int sq_store_status_parse(const char *s, enum sq_store_status *out)
{
    for (int i = 0; s && i < SQ_STORE_STATUS__COUNT; i++) {
        if (strcmp(s, status_names[i]) == 0) {
            *out = (enum sq_store_status)i;
            return 0;
        }
    }
    return -EINVAL;
}

bool sq_store_status_ended(enum sq_store_status st)
{
    return st == SQ_STORE_FINISHED || st == SQ_STORE_STOPPED || st == SQ_STORE_FAILED ||
           st == SQ_STORE_INTERRUPTED;
}

const char *sq_store_kind_name(enum sq_store_kind k)
{
    return k == SQ_STORE_QUICK ? "quick" : k == SQ_STORE_PLAN ? "plan" : "?";
}

/* ---- schema ---- */

/* The list's summary of a run, from its result document when it has one (the figures the
 * summary prints), else summed from its series. Used by the v2 backfill, by run_end and by
 * recovery, so the three never disagree. */
#define SUMMARY_SET                                                                                \
    "req_per_s = coalesce((SELECT json_extract(doc, '$.rate.requests_per_s') FROM results"         \
    "  WHERE run_id = runs.id), (SELECT CASE WHEN sum(len_s) > 0 THEN sum(completed) / sum(len_s)" \
    "  END FROM series WHERE run_id = runs.id)),"                                                  \
    " p99_us = (SELECT json_extract(doc, '$.latency.p99_us') FROM results"                         \
    "  WHERE run_id = runs.id),"                                                                   \
    " errors = coalesce((SELECT (SELECT sum(value) FROM json_each(doc, '$.errors')"                \
    "  WHERE type = 'integer') FROM results WHERE run_id = runs.id),"                              \
    "  (SELECT sum(errors) FROM series WHERE run_id = runs.id)),"                                  \
    " sent = coalesce((SELECT json_extract(doc, '$.requests.sent') FROM results"                   \
    "  WHERE run_id = runs.id), (SELECT sum(sent) FROM series WHERE run_id = runs.id))"

/* v1: what the first store wrote. Never edit a released step: add one. */
static const char v1_sql[] =
    "PRAGMA application_id = " APP_ID_TEXT ";"
    "CREATE TABLE runs ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL DEFAULT '',"
    " kind TEXT NOT NULL CONSTRAINT kind_known CHECK (kind IN ('quick', 'plan')),"
    " status TEXT NOT NULL CONSTRAINT status_known CHECK (status IN"
    "  ('queued', 'running', 'finished', 'stopped', 'failed', 'interrupted')),"
    " created_at INTEGER NOT NULL,"
    " started_at INTEGER,"
    " ended_at INTEGER,"
    " target TEXT NOT NULL DEFAULT '',"
    " request TEXT NOT NULL CONSTRAINT request_is_json CHECK (json_valid(request)),"
    " reason TEXT);"
    "CREATE TABLE series ("
    " run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,"
    " idx INTEGER NOT NULL CONSTRAINT idx_not_negative CHECK (idx >= 0),"
    " t_s REAL NOT NULL, len_s REAL NOT NULL,"
    " sent INTEGER NOT NULL, completed INTEGER NOT NULL, failed INTEGER NOT NULL,"
    " errors INTEGER NOT NULL, dropped INTEGER NOT NULL, bytes INTEGER NOT NULL,"
    " active INTEGER NOT NULL,"
    " p50_us INTEGER NOT NULL, p90_us INTEGER NOT NULL, p99_us INTEGER NOT NULL,"
    " max_us INTEGER NOT NULL,"
    " extra TEXT CONSTRAINT extra_is_json CHECK (extra IS NULL OR json_valid(extra)),"
    " PRIMARY KEY (run_id, idx)) WITHOUT ROWID;"
    "CREATE TABLE results ("
    " run_id INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,"
    " doc TEXT NOT NULL CONSTRAINT doc_is_json CHECK (json_valid(doc)),"
    " hist BLOB,"
    " hist_uncorrected BLOB);";

/* v2: the list's summary as columns (v1 read them out of each result document per listed
 * run) and each result's size (what pruning it costs), filled in for what is stored; an index
 * for counting and recovering by status. */
static const char v2_sql[] =
    "ALTER TABLE runs ADD COLUMN req_per_s REAL;"
    "ALTER TABLE runs ADD COLUMN p99_us INTEGER;"
    "ALTER TABLE runs ADD COLUMN errors INTEGER;"
    "ALTER TABLE runs ADD COLUMN sent INTEGER;"
    "ALTER TABLE results ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;"
    "UPDATE results SET bytes = length(CAST(doc AS BLOB)) + ifnull(length(hist), 0)"
    " + ifnull(length(hist_uncorrected), 0);"
    "UPDATE runs SET " SUMMARY_SET " WHERE status NOT IN ('queued', 'running');"
    "CREATE INDEX runs_by_status ON runs (status, id);";

static const struct migration {
    const char *what;
    const char *sql;
} migrations[] = {
    {"runs, series and results", v1_sql},
    {"the list's summary columns and result sizes", v2_sql},
};
_Static_assert(SQ_ARRAY_LEN(migrations) == SQ_STORE_SCHEMA_VERSION,
               "one migration step per schema version");

/* ---- statements ---- */

#define RUN_COLS                                                                                   \
    "id, kind, status, created_at, started_at, ended_at, name, target, reason, req_per_s,"         \
    " p99_us, errors, sent, EXISTS (SELECT 1 FROM results WHERE run_id = runs.id)"

#define SERIES_COLS                                                                                \
    "idx, t_s, len_s, sent, completed, failed, errors, dropped, bytes, active, p50_us, p90_us,"    \
    " p99_us, max_us, extra"

#define TERMINAL "('finished', 'stopped', 'failed', 'interrupted')"

/* `+status` in ST_LIST and ST_PRUNE_NEXT keeps the planner on the rowid order they page by:
 * given the status index (and no ANALYZE statistics), SQLite reads every run of those statuses
 * and sorts them. Measured with callgrind on 10,000 runs: a page of 200 took 1.8x the
 * instructions that way, pruning them 13% more. The index serves counting and recovery. */

#define STMT_LIST(X)                                                                               \
    X(ST_BEGIN, "BEGIN IMMEDIATE")                                                                 \
    X(ST_COMMIT, "COMMIT")                                                                         \
    X(ST_ROLLBACK, "ROLLBACK")                                                                     \
    X(ST_SYNC_FULL, "PRAGMA synchronous = FULL")                                                   \
    X(ST_SYNC_NORMAL, "PRAGMA synchronous = NORMAL")                                               \
    X(ST_STATUS, "SELECT status FROM runs WHERE id = ?1")                                          \
    X(ST_CREATE, "INSERT INTO runs (name, kind, status, created_at, target, request)"              \
                 " VALUES (?1, ?2, 'queued', ?3, ?4, ?5)")                                         \
    X(ST_START, "UPDATE runs SET status = 'running', started_at = ?2"                              \
                " WHERE id = ?1 AND status = 'queued'")                                            \
    X(ST_RESULT_PUT, "INSERT INTO results (run_id, doc, hist, hist_uncorrected, bytes)"            \
                     " VALUES (?1, ?2, ?3, ?4, ?5)")                                               \
    X(ST_END,                                                                                      \
      "UPDATE runs SET status = ?2, ended_at = ?3, reason = ?4, " SUMMARY_SET " WHERE id = ?1")    \
    X(ST_APPEND, "INSERT INTO series (run_id, " SERIES_COLS ")"                                    \
                 " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16"   \
                 " WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?1 AND status = 'running')")        \
    X(ST_GET, "SELECT " RUN_COLS ", request FROM runs WHERE id = ?1")                              \
    X(ST_LIST, "SELECT " RUN_COLS " FROM runs WHERE id < ?1 AND created_at < ?2"                   \
               " AND +status IN (?3, ?4, ?5, ?6, ?7, ?8) ORDER BY id DESC LIMIT ?9")               \
    X(ST_SERIES, "SELECT " SERIES_COLS " FROM series WHERE run_id = ?1 AND idx >= ?2"              \
                 " ORDER BY idx")                                                                  \
    X(ST_RESULT_GET, "SELECT doc, hist, hist_uncorrected FROM results WHERE run_id = ?1")          \
    X(ST_DELETE, "DELETE FROM runs WHERE id = ?1 AND status IN " TERMINAL)                         \
    X(ST_COUNT, "SELECT status, count(*) FROM runs GROUP BY status")                               \
    X(ST_CUTOFF, "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1")                         \
    X(ST_PRUNE_NEXT, "SELECT id, (SELECT ifnull(max(idx) + 1, 0) FROM series"                      \
                     " WHERE run_id = runs.id), (SELECT bytes / 4096 FROM results"                 \
                     " WHERE run_id = runs.id) FROM runs WHERE id > ?1 AND +status IN " TERMINAL   \
                     " AND (id < ?2 OR created_at < ?3) ORDER BY id LIMIT 1")                      \
    X(ST_PRUNE_CHUNK, "DELETE FROM series WHERE run_id = ?1 AND idx >= ?2")                        \
    X(ST_FREELIST, "PRAGMA freelist_count")                                                        \
    X(ST_VACUUM, "PRAGMA incremental_vacuum(256)")

enum stmt {
#define STMT_ENUM(name, sql) name,
    STMT_LIST(STMT_ENUM)
#undef STMT_ENUM
        ST__COUNT
};

static const char *const stmt_sql[] = {
#define STMT_SQL(name, sql) sql,
    STMT_LIST(STMT_SQL)
#undef STMT_SQL
};

/* One SQLite connection and the mutex that keeps each call's statements together. */
struct conn {
    sqlite3 *db;
    pthread_mutex_t mu;
    atomic_int waiting; /* calls blocked on mu: pruning lets them in between batches */
    sqlite3_stmt *st[ST__COUNT];
    struct sq_store *s;
};

struct sq_store {
    struct conn wr; /* every write, and the reads inside write transactions (unused read-only) */
    struct conn rd; /* the API's reads: never wait for a write's fsync */
    /* The checkpointer: its own connection and thread, woken by wr's WAL hook, copies the WAL
     * into the database without holding wr's mutex (unused read-only). */
    struct conn ck;
    pthread_t ck_thread;
    bool ck_started, ck_due, ck_quit;
    pthread_mutex_t ck_mu;
    pthread_cond_t ck_cv;      /* wakes the checkpointer */
    pthread_cond_t ck_done_cv; /* it finished a round: ck_rounds grew */
    int64_t ck_rounds;
    int ck_frames;            /* wake it every ck_frames WAL pages */
    int ck_next, ck_last;     /* on_commit's: the WAL length that wakes it next, the last seen */
    atomic_llong checkpoints; /* done so far */
    char *path;
    int lock_fd; /* -1 when read-only */
    bool ro;
    bool incremental; /* auto_vacuum = INCREMENTAL */
    int recovered;
    int64_t (*clock_ms)(void *ud);
    void *clock_ud;
    /* Ends that could not be written (sq_store_run_end_later), oldest first: every read through
     * this handle shows them; sq_store_retry writes them. Added under pend_mu; removed only by
     * the writer (wr's mutex held too), so a writer may use an entry without pend_mu. */
    pthread_mutex_t pend_mu;
    struct pend_end *pend;
    size_t npend;
};

/* An end kept in memory until the store can take it. */
struct pend_end {
    struct pend_end *next;
    int64_t id, ended_ms;
    enum sq_store_status status, from; /* from: what the file says meanwhile */
    char *reason, *doc;
    size_t doc_len;
    unsigned char *hist, *hist_u;
    size_t hist_len, hist_u_len;
};

/* ---- helpers ---- */

static void say(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static void pend_free(struct pend_end *p)
{
    if (!p)
        return;
    free(p->reason);
    free(p->doc);
    free(p->hist);
    free(p->hist_u);
    free(p);
}

static int map_rc(int rc, int sys)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return -EBUSY;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_FULL:
        return -ENOSPC;
    case SQLITE_READONLY:
        return -EROFS;
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return -EACCES;
    case SQLITE_CANTOPEN:
        return sys > 0 ? -sys : -EACCES;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
        return -EINVAL;
    case SQLITE_TOOBIG:
        return -SQ_ETOOBIG;
    default:
        return -EIO;
    }
}

/* A failed SQLite call: the message names what we were doing and what SQLite said. */
static int db_fail(struct conn *c, int rc, char *err, size_t errlen, const char *what)
{
    say(err, errlen, "%s: %s (%s)", what, sqlite3_errmsg(c->db), c->s->path);
    return map_rc(rc, sqlite3_system_errno(c->db));
}

static int64_t now_ms(struct sq_store *s)
{
    if (s->clock_ms)
        return s->clock_ms(s->clock_ud);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void lock(struct conn *c)
{
    atomic_fetch_add_explicit(&c->waiting, 1, memory_order_relaxed);
    pthread_mutex_lock(&c->mu);
    atomic_fetch_sub_explicit(&c->waiting, 1, memory_order_relaxed);
}

static void unlock(struct conn *c)
{
    pthread_mutex_unlock(&c->mu);
}

/* Gives the mutex to the calls waiting for it, if any: each one takes the mutex before it
 * stops counting as waiting, so once the count is 0 they hold it or are done. Bounded, since
 * new callers may keep arriving. */
static void hand_over(struct conn *c)
{
    for (int i = 0; i < 1000 && atomic_load_explicit(&c->waiting, memory_order_relaxed) > 0; i++)
        sched_yield();
}

/* A prepared statement, reset with its bindings cleared. */
static sqlite3_stmt *stmt(struct conn *c, enum stmt which)
{
    sqlite3_stmt *st = c->st[which];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

/* Runs a statement that returns no row. */
static int exec1(struct conn *c, enum stmt which)
{
    sqlite3_stmt *st = stmt(c, which);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* Steps a bound statement that returns no row, then resets it: 0 or db_fail's code. */
static int step_done(struct conn *c, sqlite3_stmt *st, char *err, size_t errlen, const char *what)
{
    int rc = sqlite3_step(st), r = 0;
    if (rc != SQLITE_DONE)
        r = db_fail(c, rc, err, errlen, what);
    sqlite3_reset(st);
    return r;
}

/* Locks c and steps `which` bound to one id: the caller reads the row, then row_done. */
static sqlite3_stmt *row_by_id(struct conn *c, enum stmt which, int64_t id, int *rc)
{
    lock(c);
    sqlite3_stmt *st = stmt(c, which);
    sqlite3_bind_int64(st, 1, id);
    *rc = sqlite3_step(st);
    return st;
}

static void row_done(struct conn *c, sqlite3_stmt *st)
{
    sqlite3_reset(st);
    unlock(c);
}

static char *dup_text(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    if (!t)
        return NULL;
    size_t n = (size_t)sqlite3_column_bytes(st, col);
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, t, n);
        p[n] = '\0';
    }
    return p;
}

static unsigned char *dup_blob(sqlite3_stmt *st, int col, size_t *len)
{
    const void *b = sqlite3_column_blob(st, col);
    *len = 0;
    if (!b)
        return NULL;
    size_t n = (size_t)sqlite3_column_bytes(st, col);
    unsigned char *p = malloc(n ? n : 1);
    if (p) {
        memcpy(p, b, n);
        *len = n;
    }
    return p;
}

static int64_t clamp_u64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* The status of run id: 0 with *st set, -ENOENT, or a database error. */
static int run_status(struct conn *c, int64_t id, enum sq_store_status *out, char *err,
                      size_t errlen)
{
    sqlite3_stmt *st = stmt(c, ST_STATUS);
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(st);
        say(err, errlen, "no run %lld", (long long)id);
        return -ENOENT;
    }
    if (rc != SQLITE_ROW) {
        int r = db_fail(c, rc, err, errlen, "reading a run's status");
        sqlite3_reset(st);
        return r;
    }
    int r = sq_store_status_parse((const char *)sqlite3_column_text(st, 0), out);
    sqlite3_reset(st);
    if (r < 0) {
        say(err, errlen, "run %lld has an unknown status (%s)", (long long)id, c->s->path);
        return -EIO;
    }
    return 0;
}

/* ---- transactions ---- */

static int txn_begin(struct conn *c, bool durable, char *err, size_t errlen)
{
    int rc;
    if (durable && (rc = exec1(c, ST_SYNC_FULL)) != SQLITE_OK)
        return db_fail(c, rc, err, errlen, "setting synchronous=FULL");
    if ((rc = exec1(c, ST_BEGIN)) != SQLITE_OK) {
        int r = db_fail(c, rc, err, errlen, "beginning a transaction");
        if (durable)
            (void)exec1(c, ST_SYNC_NORMAL);
        return r;
    }
    return 0;
}

/* Commits (ok) or rolls back (!ok, or a failed commit). Returns 0 or the commit's error. */
static int txn_end(struct conn *c, bool durable, bool ok, char *err, size_t errlen)
{
    int r = 0;
    if (ok) {
        int rc = exec1(c, ST_COMMIT);
        if (rc != SQLITE_OK) {
            r = db_fail(c, rc, err, errlen, "committing");
            ok = false;
        }
    }
    if (!ok && sqlite3_get_autocommit(c->db) == 0)
        (void)exec1(c, ST_ROLLBACK);
    if (durable)
        (void)exec1(c, ST_SYNC_NORMAL);
    return r;
}

/* Ends the transaction that r's work ran in: r's error if it failed, else the commit's. */
static int txn_close(struct conn *c, bool durable, int r, char *err, size_t errlen)
{
    int cr = txn_end(c, durable, r == 0, err, errlen);
    return r == 0 ? cr : r;
}

/* ---- opening ---- */

static int mkdir_p(char *path, char *err, size_t errlen)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        int r = mkdir(path, 0700);
        int e = errno;
        *p = c;
        if (r < 0 && e != EEXIST) {
            say(err, errlen, "cannot create the data directory %s: %s", path, strerror(e));
            return -e;
        }
        if (c == '\0')
            return 0;
    }
}

/* The database file for path (see sq_store_open). */
static int resolve(const char *path, bool ro, char **out, char *err, size_t errlen)
{
    size_t n = path ? strlen(path) : 0;
    if (n == 0) {
        say(err, errlen, "the store's path is empty");
        return -EINVAL;
    }
    struct stat sb;
    bool dir;
    if (stat(path, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) {
            say(err, errlen, "%s is neither a directory nor a file", path);
            return -EINVAL;
        }
        dir = S_ISDIR(sb.st_mode);
    } else if (errno != ENOENT) {
        int e = errno;
        say(err, errlen, "cannot use %s: %s", path, strerror(e));
        return -e;
    } else if (ro) {
        say(err, errlen, "no store at %s", path);
        return -ENOENT;
    } else {
        dir = !(n >= 3 && strcmp(path + n - 3, ".db") == 0);
        if (dir) {
            char *p = strdup(path);
            if (!p)
                return -ENOMEM;
            int r = mkdir_p(p, err, errlen);
            free(p);
            if (r < 0)
                return r;
        }
    }
    size_t len = n + (dir ? 1 + sizeof(SQ_STORE_FILE) : 1);
    char *p = malloc(len);
    if (!p)
        return -ENOMEM;
    if (dir)
        snprintf(p, len, "%s%s%s", path, path[n - 1] == '/' ? "" : "/", SQ_STORE_FILE);
    else
        memcpy(p, path, n + 1);
    if (ro && stat(p, &sb) < 0) {
        say(err, errlen, "no store at %s", p);
        free(p);
        return -ENOENT;
    }
    *out = p;
    return 0;
}

/* Takes path.lock, exclusively: one read-write squall per store. */
static int take_lock(struct sq_store *s, char *err, size_t errlen)
{
    size_t n = strlen(s->path) + sizeof(".lock");
    char *lp = malloc(n);
    if (!lp)
        return -ENOMEM;
    snprintf(lp, n, "%s.lock", s->path);
    int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        say(err, errlen, "cannot open the lock file %s: %s", lp, strerror(e));
        free(lp);
        return -e;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t got = pread(fd, pid, sizeof(pid) - 1, 0);
        pid[got > 0 ? got : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        if (e == EWOULDBLOCK)
            say(err, errlen, "another squall (pid %s) has the store %s open",
                pid[0] ? pid : "unknown", s->path);
        else
            say(err, errlen, "cannot lock %s: %s", lp, strerror(e));
        close(fd);
        free(lp);
        return e == EWOULDBLOCK ? -EBUSY : -e;
    }
    free(lp);
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)len, 0) < 0) {
        /* the pid is only for the message above; the lock is what counts */
    }
    s->lock_fd = fd;
    return 0;
}

/* One integer from a pragma or query; -1 on error (with *rc set). */
static int64_t query_int(struct conn *c, const char *sql, int *rc)
{
    sqlite3_stmt *st;
    int64_t v = -1;
    *rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
    if (*rc != SQLITE_OK)
        return -1;
    *rc = sqlite3_step(st);
    if (*rc == SQLITE_ROW) {
        v = sqlite3_column_int64(st, 0);
        *rc = SQLITE_OK;
    } else if (*rc == SQLITE_DONE) {
        *rc = SQLITE_OK;
        v = 0;
    }
    sqlite3_finalize(st);
    return v;
}

static int exec_sql(struct conn *c, const char *sql, char *err, size_t errlen, const char *what)
{
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : db_fail(c, rc, err, errlen, what);
}

static int migrate(struct conn *c, int from, char *err, size_t errlen)
{
    for (int v = from; v < SQ_STORE_SCHEMA_VERSION; v++) {
        char bump[64];
        snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", v + 1);
        int rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(c->db, migrations[v].sql, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(c->db, bump, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            char what[160];
            snprintf(what, sizeof(what), "migrating the store from schema version %d to %d (%s)", v,
                     v + 1, migrations[v].what);
            int r = db_fail(c, rc, err, errlen, what);
            if (!sqlite3_get_autocommit(c->db))
                sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
            return r;
        }
    }
    return 0;
}

/* Every run a previous process left queued or running becomes interrupted, keeping its
 * series; ended_at is the end of its last stored second (unknown for a run that never
 * started). One durable transaction. */
static int recover(struct conn *c, char *err, size_t errlen)
{
    static const char sql[] =
        "UPDATE runs SET status = 'interrupted',"
        " reason = CASE status WHEN 'running' THEN"
        "  'squall stopped while this run was running; the seconds stored until then are kept'"
        "  ELSE 'squall stopped while this run was queued; it never started' END,"
        " ended_at = (SELECT runs.started_at + CAST(max(t_s) * 1000 AS INTEGER) FROM series"
        "  WHERE run_id = runs.id), " SUMMARY_SET " WHERE status IN ('queued', 'running')";
    int r = txn_begin(c, true, err, errlen);
    if (r < 0)
        return r;
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        r = db_fail(c, rc, err, errlen, "marking the runs of a previous process interrupted");
        (void)txn_end(c, true, false, NULL, 0);
        return r;
    }
    c->s->recovered = sqlite3_changes(c->db);
    return txn_end(c, true, true, err, errlen);
}

/* Opens one connection on the store's file. */
static int conn_open_at(struct sq_store *s, struct conn *c, const char *name, int flags,
                        int busy_ms, char *err, size_t errlen)
{
    int rc =
        sqlite3_open_v2(name, &c->db, flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, NULL);
    if (rc != SQLITE_OK && !c->db) {
        say(err, errlen, "opening %s: out of memory", s->path);
        return -ENOMEM;
    }
    if (rc != SQLITE_OK)
        return db_fail(c, rc, err, errlen, "opening the store");
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, busy_ms);
    /* A page cache of at most 1 MiB per connection (SQLite's default is 2 MiB). */
    return exec_sql(c, "PRAGMA foreign_keys = ON; PRAGMA cache_size = -1024", err, errlen,
                    "opening the store");
}

static int conn_open(struct sq_store *s, struct conn *c, int flags, int busy_ms, char *err,
                     size_t errlen)
{
    return conn_open_at(s, c, s->path, flags, busy_ms, err, errlen);
}

/* Bytes of path + suffix's file; -1 when there is none (or it cannot be read). */
static off_t file_size(const char *path, const char *suffix)
{
    char p[PATH_MAX];
    struct stat sb;
    if ((size_t)snprintf(p, sizeof(p), "%s%s", path, suffix) >= sizeof(p) || stat(p, &sb) < 0)
        return -1;
    return sb.st_size;
}

/* A reader of a WAL database needs its -shm file, and creates it when it is not there: not
 * possible on a read-only mount, where a store closed cleanly has none. There (and only when
 * there is no write-ahead log with content, which only a writer can have left: no writer has
 * the store open, and nothing committed is missing from the database file) the file is opened
 * as immutable: SQLite reads it as it is, with no -shm and no locks (sqlite.org/uri.html). */
static int open_immutable(struct sq_store *s, int busy, char *err, size_t errlen)
{
    if (file_size(s->path, "-wal") > 0) {
        say(err, errlen,
            "%s cannot be read here: its write-ahead log (%s-wal) holds writes that only a "
            "read-write open can replay, and the file system is read-only (copy the data "
            "directory to a writable place, or open it once with squall serve)",
            s->path, s->path);
        return -EROFS;
    }
    /* file:PATH?mode=ro&immutable=1, the path percent-encoded */
    size_t n = strlen(s->path);
    char *uri = malloc(n * 3 + 64);
    if (!uri) {
        say(err, errlen, "out of memory");
        return -ENOMEM;
    }
    size_t l = (size_t)sprintf(uri, "file:");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s->path[i];
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || ch == '/' || ch == '-' || ch == '_' || ch == '.' ||
                     ch == '~';
        l += (size_t)(plain ? sprintf(uri + l, "%c", ch) : sprintf(uri + l, "%%%02X", ch));
    }
    sprintf(uri + l, "?mode=ro&immutable=1");
    int r = conn_open_at(s, &s->rd, uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, busy, err, errlen);
    free(uri);
    return r;
}

static int conn_prepare(struct conn *c, char *err, size_t errlen)
{
    for (int i = 0; i < ST__COUNT; i++) {
        int rc =
            sqlite3_prepare_v3(c->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &c->st[i], NULL);
        if (rc != SQLITE_OK)
            return db_fail(c, rc, err, errlen, "preparing the store's statements");
    }
    return 0;
}

static void conn_close(struct conn *c)
{
    for (int i = 0; i < ST__COUNT; i++)
        sqlite3_finalize(c->st[i]);
    sqlite3_close_v2(c->db);
    c->db = NULL;
}

/* What is this file? Refuses anything but a squall store this squall can use; *ver is its
 * schema version (0: a new, empty database). The first read: a file that is not a database
 * fails here. */
static int identify(struct sq_store *s, struct conn *c, int64_t *ver, char *err, size_t errlen)
{
    int rc;
    int64_t app = query_int(c, "PRAGMA application_id", &rc);
    *ver = rc == SQLITE_OK ? query_int(c, "PRAGMA user_version", &rc) : -1;
    int64_t tables = rc == SQLITE_OK ? query_int(c, "SELECT count(*) FROM sqlite_master", &rc) : -1;
    if (rc != SQLITE_OK)
        return db_fail(c, rc, err, errlen, "reading the store's header");
    if ((app != 0 && app != APP_ID) || (app == 0 && (*ver != 0 || tables != 0))) {
        say(err, errlen, "%s is a SQLite database but not a squall store", s->path);
        return -EIO;
    }
    if (*ver > SQ_STORE_SCHEMA_VERSION) {
        say(err, errlen,
            "%s has schema version %lld, newer than this squall's %d: use the squall that "
            "wrote it (or a newer one), or another data directory",
            s->path, (long long)*ver, SQ_STORE_SCHEMA_VERSION);
        return -ENOTSUP;
    }
    if (s->ro && *ver < SQ_STORE_SCHEMA_VERSION) {
        say(err, errlen,
            "%s has schema version %lld, older than this squall's %d: open it read-write once "
            "(squall serve) to migrate it",
            s->path, (long long)*ver, SQ_STORE_SCHEMA_VERSION);
        return -ENOTSUP;
    }
    return 0;
}

static void wake_checkpointer(struct sq_store *s)
{
    pthread_mutex_lock(&s->ck_mu);
    s->ck_due = true;
    pthread_cond_signal(&s->ck_cv);
    pthread_mutex_unlock(&s->ck_mu);
}

/* Wakes the checkpointer and waits (at most 2 s) until it has been round: for a writer that
 * keeps the WAL busy (pruning), so that the WAL gets copied in full and starts over instead of
 * growing by everything the prune writes. Holds no connection's mutex. */
static void await_checkpoint(struct sq_store *s)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += 2;
    pthread_mutex_lock(&s->ck_mu);
    int64_t round = s->ck_rounds;
    s->ck_due = true;
    pthread_cond_signal(&s->ck_cv);
    while (s->ck_rounds == round && !s->ck_quit &&
           pthread_cond_timedwait(&s->ck_done_cv, &s->ck_mu, &until) == 0)
        ;
    pthread_mutex_unlock(&s->ck_mu);
}

/* Called by SQLite after each commit on wr (under wr's mutex, so ck_next and ck_last need no
 * lock of their own) with the WAL's length in pages. It replaces SQLite's auto-checkpoint, which
 * would copy the WAL back inside that commit, and wakes the checkpointer once per ck_frames
 * pages written (not after every commit while a checkpoint is behind). */
static int on_commit(void *ud, sqlite3 *db, const char *name, int frames)
{
    struct sq_store *s = ud;
    (void)db, (void)name;
    if (frames < s->ck_last) /* the WAL started over after a complete checkpoint */
        s->ck_next = s->ck_frames;
    s->ck_last = frames;
    if (frames >= s->ck_next) {
        s->ck_next = frames + s->ck_frames;
        wake_checkpointer(s);
    }
    return SQLITE_OK;
}

/* The checkpointer thread: sleeps until woken, then copies the WAL into the database. PASSIVE:
 * it never waits for, nor blocks, the writer or the readers, so it copies the pages committed
 * when it started; it goes again (a few times at most) while commits made meanwhile remain, so
 * that it ends with the whole WAL copied and the next commit can start the WAL over instead of
 * growing it. No timer: idle, it waits. */
static void *checkpointer(void *arg)
{
    struct sq_store *s = arg;
    pthread_mutex_lock(&s->ck_mu);
    for (;;) {
        while (!s->ck_due && !s->ck_quit)
            pthread_cond_wait(&s->ck_cv, &s->ck_mu);
        if (s->ck_quit)
            break;
        s->ck_due = false;
        pthread_mutex_unlock(&s->ck_mu);
        for (int pass = 0; pass < 8; pass++) {
            int frames = 0, copied = 0;
            if (sqlite3_wal_checkpoint_v2(s->ck.db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames,
                                          &copied) != SQLITE_OK)
                break;
            atomic_fetch_add_explicit(&s->checkpoints, 1, memory_order_relaxed);
            if (copied >= frames)
                break;
        }
        pthread_mutex_lock(&s->ck_mu);
        s->ck_rounds++;
        pthread_cond_broadcast(&s->ck_done_cv);
    }
    pthread_mutex_unlock(&s->ck_mu);
    return NULL;
}

static int setup(struct sq_store *s, const struct sq_store_opts *o, char *err, size_t errlen)
{
    int r, rc;
    int busy = o && o->busy_timeout_ms > 0 ? o->busy_timeout_ms : 5000;
    int64_t ver;
    if (s->ro) {
        r = conn_open(s, &s->rd, SQLITE_OPEN_READONLY, busy, err, errlen);
        if (r == 0)
            r = identify(s, &s->rd, &ver, err, errlen);
        if (r < 0 && r != -ENOTSUP && file_size(s->path, "-shm") < 0 &&
            access(s->path, R_OK) == 0) {
            /* no -shm, and none could be made: a read-only file system (or directory) */
            conn_close(&s->rd);
            if ((r = open_immutable(s, busy, err, errlen)) == 0)
                r = identify(s, &s->rd, &ver, err, errlen);
        }
        if (r < 0)
            return r;
        return conn_prepare(&s->rd, err, errlen);
    }

    if ((r = take_lock(s, err, errlen)) < 0)
        return r;
    /* Created here so that it is 0600; SQLite gives its -wal and -shm the same mode. */
    int fd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        say(err, errlen, "cannot create %s: %s", s->path, strerror(e));
        return -e;
    }
    close(fd);
    struct conn *c = &s->wr;
    if ((r = conn_open(s, c, SQLITE_OPEN_READWRITE, busy, err, errlen)) < 0 ||
        (r = identify(s, c, &ver, err, errlen)) < 0)
        return r;
    if (ver == 0 && (r = exec_sql(c, "PRAGMA auto_vacuum = INCREMENTAL", err, errlen,
                                  "creating the store")) < 0)
        return r;
    sqlite3_stmt *st;
    rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *mode = (const char *)sqlite3_column_text(st, 0);
        bool wal = mode && strcmp(mode, "wal") == 0;
        sqlite3_finalize(st);
        if (!wal) {
            say(err, errlen, "%s: the file system does not allow WAL mode", s->path);
            return -EIO;
        }
    } else {
        sqlite3_finalize(st);
        return db_fail(c, rc, err, errlen, "switching the store to WAL mode");
    }
    if ((r = exec_sql(c, "PRAGMA synchronous = NORMAL; PRAGMA journal_size_limit = 8388608", err,
                      errlen, "opening the store")) < 0 ||
        (r = migrate(c, (int)ver, err, errlen)) < 0)
        return r;
    s->incremental = query_int(c, "PRAGMA auto_vacuum", &rc) == 2;

    if ((r = conn_open(s, &s->rd, SQLITE_OPEN_READONLY, busy, err, errlen)) < 0 ||
        (r = conn_open(s, &s->ck, SQLITE_OPEN_READWRITE, busy, err, errlen)) < 0 ||
        (r = conn_prepare(&s->wr, err, errlen)) < 0 || (r = conn_prepare(&s->rd, err, errlen)) < 0)
        return r;
    if ((r = pthread_create(&s->ck_thread, NULL, checkpointer, s)) != 0) {
        say(err, errlen, "cannot start the store's checkpointer: %s", strerror(r));
        return -r;
    }
    s->ck_started = true;
    sqlite3_wal_hook(c->db, on_commit, s);
    return recover(c, err, errlen);
}

int sq_store_open(const char *path, const struct sq_store_opts *o, struct sq_store **out, char *err,
                  size_t errlen)
{
    /* libsqlite3 is loaded here, the store's one way in (store/sqlite.h). */
    int lr = sq_sqlite_load(err, errlen);
    if (lr < 0)
        return lr;
    struct sq_store *s = calloc(1, sizeof(*s));
    if (!s) {
        say(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->lock_fd = -1;
    s->ro = o && o->read_only;
    s->ck_frames = o && o->checkpoint_pages > 0 ? o->checkpoint_pages : 1000;
    s->ck_next = s->ck_frames;
    if (o) {
        s->clock_ms = o->clock_ms;
        s->clock_ud = o->clock_ud;
    }
    struct conn *conns[] = {&s->wr, &s->rd, &s->ck};
    for (size_t i = 0; i < SQ_ARRAY_LEN(conns); i++) {
        conns[i]->s = s;
        atomic_init(&conns[i]->waiting, 0);
        pthread_mutex_init(&conns[i]->mu, NULL);
    }
    pthread_mutex_init(&s->ck_mu, NULL);
    pthread_mutex_init(&s->pend_mu, NULL);
    pthread_cond_init(&s->ck_cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->ck_done_cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&s->checkpoints, 0);
    int r = resolve(path, s->ro, &s->path, err, errlen);
    if (r == 0)
        r = setup(s, o, err, errlen);
    if (r < 0) {
        if (r == -ENOMEM && err && errlen && !err[0])
            say(err, errlen, "out of memory");
        sq_store_close(s);
        return r;
    }
    *out = s;
    return 0;
}

void sq_store_close(struct sq_store *s)
{
    if (!s)
        return;
    if (s->ck_started) {
        pthread_mutex_lock(&s->ck_mu);
        s->ck_quit = true;
        pthread_cond_signal(&s->ck_cv);
        pthread_mutex_unlock(&s->ck_mu);
        pthread_join(s->ck_thread, NULL);
    }
    if (s->wr.db)
        sqlite3_wal_hook(s->wr.db, NULL, NULL);
    /* wr last: the last connection to close checkpoints the WAL and removes it. */
    conn_close(&s->rd);
    conn_close(&s->ck);
    conn_close(&s->wr);
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* releases the flock */
    struct conn *conns[] = {&s->wr, &s->rd, &s->ck};
    for (size_t i = 0; i < SQ_ARRAY_LEN(conns); i++)
        pthread_mutex_destroy(&conns[i]->mu);
    pthread_mutex_destroy(&s->ck_mu);
    while (s->pend) {
        struct pend_end *p = s->pend;
        s->pend = p->next;
        pend_free(p);
    }
    pthread_mutex_destroy(&s->pend_mu);
    pthread_cond_destroy(&s->ck_cv);
    pthread_cond_destroy(&s->ck_done_cv);
    free(s->path);
    free(s);
}

int64_t sq_store_checkpoints(const struct sq_store *s)
{
    return atomic_load_explicit(&s->checkpoints, memory_order_relaxed);
}

const char *sq_store_path(const struct sq_store *s)
{
    return s->path;
}

int sq_store_recovered(const struct sq_store *s)
{
    return s->recovered;
}

/* ---- runs ---- */

static int read_only(const struct sq_store *s, char *err, size_t errlen)
{
    say(err, errlen, "the store %s is open read-only", s->path);
    return -EROFS;
}

static int bind_text(sqlite3_stmt *st, int i, const char *t)
{
    return sqlite3_bind_text(st, i, t ? t : "", -1, SQLITE_STATIC);
}

int sq_store_run_create(struct sq_store *s, const struct sq_store_new_run *nr, int64_t *id,
                        char *err, size_t errlen)
{
    struct conn *c = &s->wr;
    if (s->ro)
        return read_only(s, err, errlen);
    if (!nr || (nr->kind != SQ_STORE_QUICK && nr->kind != SQ_STORE_PLAN) || !nr->request) {
        say(err, errlen, "a new run needs a kind (quick or plan) and a request");
        return -EINVAL;
    }
    lock(c);
    int r = txn_begin(c, true, err, errlen);
    if (r == 0) {
        sqlite3_stmt *st = stmt(c, ST_CREATE);
        bind_text(st, 1, nr->name);
        bind_text(st, 2, sq_store_kind_name(nr->kind));
        sqlite3_bind_int64(st, 3, now_ms(s));
        bind_text(st, 4, nr->target);
        bind_text(st, 5, nr->request);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_CONSTRAINT_CHECK) {
            say(err, errlen, "the run's request is not valid JSON");
            r = -EINVAL;
        } else if (rc != SQLITE_DONE) {
            r = db_fail(c, rc, err, errlen, "storing a new run");
        }
        sqlite3_reset(st);
        int64_t rowid = sqlite3_last_insert_rowid(c->db);
        int cr = txn_end(c, true, r == 0, err, errlen);
        if (r == 0 && (r = cr) == 0)
            *id = rowid;
    }
    unlock(c);
    return r;
}

/* The message for a refused transition. */
static int refuse(int64_t id, enum sq_store_status from, enum sq_store_status to, char *err,
                  size_t errlen)
{
    say(err, errlen, "run %lld is %s: it cannot become %s", (long long)id,
        sq_store_status_name(from), sq_store_status_name(to));
    return -EPERM;
}

int sq_store_run_start(struct sq_store *s, int64_t id, char *err, size_t errlen)
{
    struct conn *c = &s->wr;
    if (s->ro)
        return read_only(s, err, errlen);
    lock(c);
    int r = txn_begin(c, true, err, errlen);
    if (r == 0) {
        enum sq_store_status cur;
        r = run_status(c, id, &cur, err, errlen);
        if (r == 0 && cur != SQ_STORE_QUEUED)
            r = refuse(id, cur, SQ_STORE_RUNNING, err, errlen);
        if (r == 0) {
            sqlite3_stmt *st = stmt(c, ST_START);
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_int64(st, 2, now_ms(s));
            r = step_done(c, st, err, errlen, "starting a run");
        }
        r = txn_close(c, true, r, err, errlen);
    }
    unlock(c);
    return r;
}

static int put_result(struct conn *c, int64_t id, const struct sq_store_end *e, char *err,
                      size_t errlen)
{
    if (e->doc_len > INT_MAX || e->hist_len > INT_MAX || e->hist_uncorrected_len > INT_MAX) {
        say(err, errlen, "run %lld's result is over 2 GiB", (long long)id);
        return -SQ_ETOOBIG;
    }
    sqlite3_stmt *st = stmt(c, ST_RESULT_PUT);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, e->doc, (int)e->doc_len, SQLITE_STATIC);
    if (e->hist)
        sqlite3_bind_blob(st, 3, e->hist, (int)e->hist_len, SQLITE_STATIC);
    if (e->hist_uncorrected)
        sqlite3_bind_blob(st, 4, e->hist_uncorrected, (int)e->hist_uncorrected_len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5,
                       (int64_t)(e->doc_len + (e->hist ? e->hist_len : 0) +
                                 (e->hist_uncorrected ? e->hist_uncorrected_len : 0)));
    int rc = sqlite3_step(st);
    int r = 0;
    if (rc == SQLITE_CONSTRAINT_CHECK) {
        say(err, errlen, "run %lld's result document is not valid JSON", (long long)id);
        r = -EINVAL;
    } else if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        say(err, errlen, "run %lld already has a result", (long long)id);
        r = -EEXIST;
    } else if (rc != SQLITE_DONE) {
        r = db_fail(c, rc, err, errlen, "storing a result");
    }
    sqlite3_reset(st);
    return r;
}

static int check_end(const struct sq_store *s, int64_t id, const struct sq_store_end *e, char *err,
                     size_t errlen)
{
    if (s->ro)
        return read_only(s, err, errlen);
    if (!e || (e->status != SQ_STORE_FINISHED && e->status != SQ_STORE_STOPPED &&
               e->status != SQ_STORE_FAILED)) {
        say(err, errlen, "a run ends finished, stopped or failed");
        return -EINVAL;
    }
    if (e->status == SQ_STORE_FINISHED && (!e->doc || !e->doc_len)) {
        say(err, errlen, "run %lld cannot finish without its result document", (long long)id);
        return -EINVAL;
    }
    return 0;
}

/* The end's transaction, wr's mutex held; ended at ended_ms. */
static int end_locked(struct sq_store *s, int64_t id, const struct sq_store_end *e,
                      int64_t ended_ms, char *err, size_t errlen)
{
    struct conn *c = &s->wr;
    int r = txn_begin(c, true, err, errlen);
    if (r == 0) {
        enum sq_store_status cur;
        r = run_status(c, id, &cur, err, errlen);
        if (r == 0 && !(cur == SQ_STORE_RUNNING ||
                        (cur == SQ_STORE_QUEUED && e->status != SQ_STORE_FINISHED)))
            r = refuse(id, cur, e->status, err, errlen);
        if (r == 0 && e->doc && e->doc_len)
            r = put_result(c, id, e, err, errlen);
        if (r == 0) {
            sqlite3_stmt *st = stmt(c, ST_END);
            sqlite3_bind_int64(st, 1, id);
            bind_text(st, 2, sq_store_status_name(e->status));
            sqlite3_bind_int64(st, 3, ended_ms);
            if (e->reason)
                bind_text(st, 4, e->reason);
            r = step_done(c, st, err, errlen, "ending a run");
        }
        r = txn_close(c, true, r, err, errlen);
    }
    return r;
}

/* The kept end of run id, or NULL; pend_mu held. */
static struct pend_end *pend_find(struct sq_store *s, int64_t id)
{
    for (struct pend_end *p = s->pend; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

/* Writes the kept end p (wr's mutex held) and forgets it once it is written, or when the file
 * will never take it (the run is not running or queued there any more, or it is gone).
 * Returns 0 when written or forgotten, else the write's error. */
static int pend_write(struct sq_store *s, struct pend_end *p, char *err, size_t errlen)
{
    struct sq_store_end e = {.status = p->status,
                             .reason = p->reason,
                             .doc = p->doc,
                             .doc_len = p->doc_len,
                             .hist = p->hist,
                             .hist_len = p->hist_len,
                             .hist_uncorrected = p->hist_u,
                             .hist_uncorrected_len = p->hist_u_len};
    int r = end_locked(s, p->id, &e, p->ended_ms, err, errlen);
    if (r < 0 && r != -EPERM && r != -ENOENT && r != -EINVAL)
        return r;
    pthread_mutex_lock(&s->pend_mu);
    for (struct pend_end **pp = &s->pend; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            s->npend--;
            break;
        }
    pthread_mutex_unlock(&s->pend_mu);
    pend_free(p);
    return 0;
}

int sq_store_run_end(struct sq_store *s, int64_t id, const struct sq_store_end *e, char *err,
                     size_t errlen)
{
    int r = check_end(s, id, e, err, errlen);
    if (r < 0)
        return r;
    lock(&s->wr);
    r = end_locked(s, id, e, now_ms(s), err, errlen);
    unlock(&s->wr);
    return r;
}

static void *dup_bytes(const void *p, size_t n)
{
    void *q = p && n ? malloc(n) : NULL;
    if (q)
        memcpy(q, p, n);
    return q;
}

int sq_store_run_end_later(struct sq_store *s, int64_t id, const struct sq_store_end *e, char *err,
                           size_t errlen)
{
    int r = check_end(s, id, e, err, errlen);
    if (r < 0)
        return r;
    struct sq_store_run cur;
    r = sq_store_run_get(s, id, &cur, err, errlen); /* reads work on a full disk */
    if (r < 0)
        return r;
    enum sq_store_status from = cur.status;
    sq_store_run_dispose(&cur);
    if (from != SQ_STORE_RUNNING && from != SQ_STORE_QUEUED)
        return refuse(id, from, e->status, err, errlen);
    struct pend_end *p = calloc(1, sizeof(*p));
    if (!p) {
        say(err, errlen, "out of memory");
        return -ENOMEM;
    }
    p->id = id;
    p->status = e->status;
    p->from = from;
    p->ended_ms = now_ms(s);
    p->reason = e->reason ? strdup(e->reason) : NULL;
    if (e->doc && e->doc_len) {
        p->doc = malloc(e->doc_len + 1);
        if (p->doc) {
            memcpy(p->doc, e->doc, e->doc_len);
            p->doc[e->doc_len] = '\0';
            p->doc_len = e->doc_len;
        }
        p->hist = dup_bytes(e->hist, e->hist_len);
        p->hist_len = p->hist ? e->hist_len : 0;
        p->hist_u = dup_bytes(e->hist_uncorrected, e->hist_uncorrected_len);
        p->hist_u_len = p->hist_u ? e->hist_uncorrected_len : 0;
    }
    if ((e->reason && !p->reason) || (e->doc && e->doc_len && !p->doc) ||
        (e->hist && e->hist_len && !p->hist) ||
        (e->hist_uncorrected && e->hist_uncorrected_len && !p->hist_u)) {
        pend_free(p);
        say(err, errlen, "out of memory");
        return -ENOMEM;
    }
    pthread_mutex_lock(&s->pend_mu);
    struct pend_end **tail = &s->pend;
    while (*tail)
        tail = &(*tail)->next;
    *tail = p;
    s->npend++;
    pthread_mutex_unlock(&s->pend_mu);
    return 0;
}

size_t sq_store_pending(struct sq_store *s)
{
    pthread_mutex_lock(&s->pend_mu);
    size_t n = s->npend;
    pthread_mutex_unlock(&s->pend_mu);
    return n;
}

int sq_store_retry(struct sq_store *s, int64_t *written, char *err, size_t errlen)
{
    if (written)
        *written = 0;
    if (s->ro)
        return 0;
    lock(&s->wr);
    int r = 0;
    for (;;) {
        pthread_mutex_lock(&s->pend_mu);
        struct pend_end *p = s->pend;
        pthread_mutex_unlock(&s->pend_mu);
        if (!p)
            break;
        int64_t id = p->id;
        if ((r = pend_write(s, p, err, errlen)) < 0)
            break;
        if (written && !*written)
            *written = id;
    }
    unlock(&s->wr);
    return r;
}

/* What a read shows of run r: its kept end, if it has one. pend_mu held. */
static int pend_overlay(struct sq_store *s, struct sq_store_run *r)
{
    struct pend_end *p = pend_find(s, r->id);
    if (!p)
        return 0;
    char *reason = p->reason ? strdup(p->reason) : NULL;
    if (p->reason && !reason)
        return -ENOMEM;
    free(r->reason);
    r->reason = reason;
    r->status = p->status;
    r->ended_ms = p->ended_ms;
    r->has_result = r->has_result || p->doc;
    return 0;
}

/* Fills r from a row of RUN_COLS (and request at column 14 when with_request). */
static int read_run(sqlite3_stmt *st, struct sq_store_run *r, bool with_request)
{
    memset(r, 0, sizeof(*r));
    r->id = sqlite3_column_int64(st, 0);
    const char *kind = (const char *)sqlite3_column_text(st, 1);
    r->kind = kind && strcmp(kind, "plan") == 0 ? SQ_STORE_PLAN : SQ_STORE_QUICK;
    if (sq_store_status_parse((const char *)sqlite3_column_text(st, 2), &r->status) < 0)
        return -EIO;
    r->created_ms = sqlite3_column_int64(st, 3);
    r->started_ms = sqlite3_column_int64(st, 4);
    r->ended_ms = sqlite3_column_int64(st, 5);
    r->name = dup_text(st, 6);
    r->target = dup_text(st, 7);
    r->reason = dup_text(st, 8);
    r->req_per_s = sqlite3_column_type(st, 9) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 9);
    r->p99_us = sqlite3_column_type(st, 10) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 10);
    r->errors = sqlite3_column_type(st, 11) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 11);
    r->sent = sqlite3_column_type(st, 12) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 12);
    r->has_result = sqlite3_column_int(st, 13) != 0;
    if (with_request)
        r->request = dup_text(st, 14);
    if (!r->name || !r->target || (with_request && !r->request) ||
        (!r->reason && sqlite3_column_type(st, 8) != SQLITE_NULL))
        return -ENOMEM;
    return 0;
}

void sq_store_run_dispose(struct sq_store_run *r)
{
    if (!r)
        return;
    free(r->name);
    free(r->target);
    free(r->request);
    free(r->reason);
    memset(r, 0, sizeof(*r));
}

int sq_store_run_get(struct sq_store *s, int64_t id, struct sq_store_run *out, char *err,
                     size_t errlen)
{
    struct conn *c = &s->rd;
    memset(out, 0, sizeof(*out));
    int rc, r = 0;
    sqlite3_stmt *st = row_by_id(c, ST_GET, id, &rc);
    if (rc == SQLITE_ROW) {
        r = read_run(st, out, true);
        if (r == 0) {
            pthread_mutex_lock(&s->pend_mu);
            r = pend_overlay(s, out);
            pthread_mutex_unlock(&s->pend_mu);
        }
        if (r < 0) {
            sq_store_run_dispose(out);
            say(err, errlen, r == -ENOMEM ? "out of memory" : "run %lld has an unknown status",
                (long long)id);
        }
    } else if (rc == SQLITE_DONE) {
        say(err, errlen, "no run %lld", (long long)id);
        r = -ENOENT;
    } else {
        r = db_fail(c, rc, err, errlen, "reading a run");
    }
    row_done(c, st);
    return r;
}

int sq_store_run_list(struct sq_store *s, const struct sq_store_query *q, struct sq_store_runs *out,
                      char *err, size_t errlen)
{
    struct conn *c = &s->rd;
    struct sq_store_query dq = {0};
    memset(out, 0, sizeof(*out));
    if (!q)
        q = &dq;
    unsigned all = (1u << SQ_STORE_STATUS__COUNT) - 1;
    if (q->status_mask & ~all) {
        say(err, errlen, "the status filter names an unknown status");
        return -EINVAL;
    }
    if (q->limit > SQ_STORE_LIST_MAX) {
        say(err, errlen, "at most %d runs per page", SQ_STORE_LIST_MAX);
        return -EINVAL;
    }
    size_t limit = q->limit ? q->limit : SQ_STORE_LIST_DEFAULT;
    unsigned mask = q->status_mask ? q->status_mask : all;
    struct sq_store_run *v = calloc(limit + 1, sizeof(*v));
    if (!v) {
        say(err, errlen, "out of memory");
        return -ENOMEM;
    }

    lock(c);
    sqlite3_stmt *st = stmt(c, ST_LIST);
    sqlite3_bind_int64(st, 1, q->before_id > 0 ? q->before_id : INT64_MAX);
    sqlite3_bind_int64(st, 2, q->before_ms > 0 ? q->before_ms : INT64_MAX);
    for (int i = 0; i < SQ_STORE_STATUS__COUNT; i++)
        if (mask & SQ_STORE_STATUS_BIT(i))
            bind_text(st, 3 + i, status_names[i]); /* the others stay NULL: match nothing */
    sqlite3_bind_int64(st, 9, (int64_t)limit + 1);
    size_t n = 0;
    int rc, r = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && n <= limit) {
        if ((r = read_run(st, &v[n], false)) < 0) {
            sq_store_run_dispose(&v[n]);
            say(err, errlen, r == -ENOMEM ? "out of memory" : "a run has an unknown status");
            break;
        }
        n++;
    }
    if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
        r = db_fail(c, rc, err, errlen, "listing runs");
    sqlite3_reset(st);
    unlock(c);

    bool more = false;
    if (r == 0 && n > limit) {
        sq_store_run_dispose(&v[limit]);
        n = limit;
        more = true;
    }
    if (r == 0) { /* kept ends: shown as they will be stored; gone from a filter they leave */
        pthread_mutex_lock(&s->pend_mu);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (r == 0 && s->pend)
                r = pend_overlay(s, &v[i]);
            if (!(mask & SQ_STORE_STATUS_BIT(v[i].status))) {
                sq_store_run_dispose(&v[i]);
                continue;
            }
            if (k != i) {
                v[k] = v[i];
                memset(&v[i], 0, sizeof(v[i]));
            }
            k++;
        }
        pthread_mutex_unlock(&s->pend_mu);
        n = k;
        if (r < 0)
            say(err, errlen, "out of memory");
    }
    if (r < 0) {
        struct sq_store_runs tmp = {v, n, false};
        sq_store_runs_dispose(&tmp);
        return r;
    }
    out->more = more;
    out->v = v;
    out->n = n;
    return 0;
}

void sq_store_runs_dispose(struct sq_store_runs *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        sq_store_run_dispose(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

int sq_store_run_delete(struct sq_store *s, int64_t id, char *err, size_t errlen)
{
    struct conn *c = &s->wr;
    if (s->ro)
        return read_only(s, err, errlen);
    lock(c);
    /* an end kept in memory is written first: the run is deleted as ended, or not at all */
    pthread_mutex_lock(&s->pend_mu);
    struct pend_end *p = pend_find(s, id);
    pthread_mutex_unlock(&s->pend_mu);
    char why[256];
    int r = p ? pend_write(s, p, why, sizeof(why)) : 0;
    if (r < 0) {
        say(err, errlen, "run %lld ended, but the store cannot take its end yet: %s", (long long)id,
            why);
        unlock(c);
        return r;
    }
    r = txn_begin(c, false, err, errlen);
    if (r == 0) {
        enum sq_store_status cur;
        r = run_status(c, id, &cur, err, errlen);
        if (r == 0 && !sq_store_status_ended(cur)) {
            say(err, errlen, "run %lld is %s: stop it before deleting it", (long long)id,
                sq_store_status_name(cur));
            r = -EPERM;
        }
        if (r == 0) {
            sqlite3_stmt *st = stmt(c, ST_DELETE);
            sqlite3_bind_int64(st, 1, id);
            r = step_done(c, st, err, errlen, "deleting a run");
        }
        r = txn_close(c, false, r, err, errlen);
    }
    unlock(c);
    return r;
}

int sq_store_count(struct sq_store *s, int64_t counts[SQ_STORE_STATUS__COUNT], char *err,
                   size_t errlen)
{
    struct conn *c = &s->rd;
    memset(counts, 0, sizeof(int64_t) * SQ_STORE_STATUS__COUNT);
    lock(c);
    sqlite3_stmt *st = stmt(c, ST_COUNT);
    int rc, r = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        enum sq_store_status k;
        if (sq_store_status_parse((const char *)sqlite3_column_text(st, 0), &k) == 0)
            counts[k] = sqlite3_column_int64(st, 1);
    }
    if (rc != SQLITE_DONE)
        r = db_fail(c, rc, err, errlen, "counting runs");
    sqlite3_reset(st);
    unlock(c);
    pthread_mutex_lock(&s->pend_mu);
    for (struct pend_end *p = s->pend; p; p = p->next) {
        if (counts[p->from] > 0)
            counts[p->from]--;
        counts[p->status]++;
    }
    pthread_mutex_unlock(&s->pend_mu);
    return r;
}

/* ---- series ---- */

int sq_store_series_append(struct sq_store *s, int64_t id, const struct sq_store_second *sec,
                           char *err, size_t errlen)
{
    struct conn *c = &s->wr;
    if (s->ro)
        return read_only(s, err, errlen);
    if (sec->idx < 0) {
        say(err, errlen, "run %lld: a second's index cannot be negative", (long long)id);
        return -EINVAL;
    }
    lock(c);
    sqlite3_stmt *st = stmt(c, ST_APPEND);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, sec->idx);
    sqlite3_bind_double(st, 3, sec->t_s);
    sqlite3_bind_double(st, 4, sec->len_s);
    sqlite3_bind_int64(st, 5, clamp_u64(sec->sent));
    sqlite3_bind_int64(st, 6, clamp_u64(sec->completed));
    sqlite3_bind_int64(st, 7, clamp_u64(sec->failed));
    sqlite3_bind_int64(st, 8, clamp_u64(sec->errors));
    sqlite3_bind_int64(st, 9, clamp_u64(sec->dropped));
    sqlite3_bind_int64(st, 10, clamp_u64(sec->bytes));
    sqlite3_bind_int64(st, 11, clamp_u64(sec->active));
    sqlite3_bind_int64(st, 12, sec->p50_us);
    sqlite3_bind_int64(st, 13, sec->p90_us);
    sqlite3_bind_int64(st, 14, sec->p99_us);
    sqlite3_bind_int64(st, 15, sec->max_us);
    if (sec->extra && sec->extra[0])
        bind_text(st, 16, sec->extra);
    int rc = sqlite3_step(st), r = 0;
    if (rc == SQLITE_DONE && sqlite3_changes(c->db) == 0) {
        sqlite3_reset(st);
        enum sq_store_status cur;
        r = run_status(c, id, &cur, err, errlen);
        if (r == 0) {
            say(err, errlen, "run %lld is %s: seconds are appended only while it runs",
                (long long)id, sq_store_status_name(cur));
            r = -EPERM;
        }
    } else if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        say(err, errlen, "run %lld already has second %lld", (long long)id, (long long)sec->idx);
        r = -EEXIST;
    } else if (rc == SQLITE_CONSTRAINT_CHECK) {
        say(err, errlen, "run %lld, second %lld: extra is not valid JSON", (long long)id,
            (long long)sec->idx);
        r = -EINVAL;
    } else if (rc != SQLITE_DONE) {
        r = db_fail(c, rc, err, errlen, "appending a second");
    }
    sqlite3_reset(st);
    unlock(c);
    return r;
}

int sq_store_series_get(struct sq_store *s, int64_t id, int64_t from_idx,
                        struct sq_store_series *out, char *err, size_t errlen)
{
    struct conn *c = &s->rd;
    memset(out, 0, sizeof(*out));
    size_t cap = 0;
    lock(c);
    enum sq_store_status cur;
    int r = run_status(c, id, &cur, err, errlen);
    sqlite3_stmt *st = stmt(c, ST_SERIES);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, from_idx);
    int rc = SQLITE_DONE;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (out->n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            struct sq_store_second *nv = realloc(out->v, nc * sizeof(*nv));
            if (!nv) {
                r = -ENOMEM;
                break;
            }
            out->v = nv;
            cap = nc;
        }
        struct sq_store_second *x = &out->v[out->n];
        x->idx = sqlite3_column_int64(st, 0);
        x->t_s = sqlite3_column_double(st, 1);
        x->len_s = sqlite3_column_double(st, 2);
        x->sent = (uint64_t)sqlite3_column_int64(st, 3);
        x->completed = (uint64_t)sqlite3_column_int64(st, 4);
        x->failed = (uint64_t)sqlite3_column_int64(st, 5);
        x->errors = (uint64_t)sqlite3_column_int64(st, 6);
        x->dropped = (uint64_t)sqlite3_column_int64(st, 7);
        x->bytes = (uint64_t)sqlite3_column_int64(st, 8);
        x->active = (uint64_t)sqlite3_column_int64(st, 9);
        x->p50_us = sqlite3_column_int64(st, 10);
        x->p90_us = sqlite3_column_int64(st, 11);
        x->p99_us = sqlite3_column_int64(st, 12);
        x->max_us = sqlite3_column_int64(st, 13);
        x->extra = NULL;
        if (sqlite3_column_type(st, 14) != SQLITE_NULL && !(x->extra = dup_text(st, 14))) {
            r = -ENOMEM;
            break;
        }
        out->n++;
    }
    if (r == -ENOMEM)
        say(err, errlen, "out of memory");
    else if (r == 0 && rc != SQLITE_DONE)
        r = db_fail(c, rc, err, errlen, "reading a series");
    sqlite3_reset(st);
    unlock(c);
    if (r < 0)
        sq_store_series_dispose(out);
    return r;
}

void sq_store_series_dispose(struct sq_store_series *se)
{
    if (!se)
        return;
    for (size_t i = 0; i < se->n; i++)
        free((char *)se->v[i].extra);
    free(se->v);
    memset(se, 0, sizeof(*se));
}

/* ---- results ---- */

int sq_store_result_get(struct sq_store *s, int64_t id, struct sq_store_result *out, char *err,
                        size_t errlen)
{
    struct conn *c = &s->rd;
    memset(out, 0, sizeof(*out));
    int rc, r = 0;
    sqlite3_stmt *st = row_by_id(c, ST_RESULT_GET, id, &rc);
    if (rc == SQLITE_ROW) {
        out->doc = dup_text(st, 0);
        out->doc_len = out->doc ? (size_t)sqlite3_column_bytes(st, 0) : 0;
        out->hist = dup_blob(st, 1, &out->hist_len);
        out->hist_uncorrected = dup_blob(st, 2, &out->hist_uncorrected_len);
        if (!out->doc || (!out->hist && sqlite3_column_type(st, 1) != SQLITE_NULL) ||
            (!out->hist_uncorrected && sqlite3_column_type(st, 2) != SQLITE_NULL)) {
            say(err, errlen, "out of memory");
            r = -ENOMEM;
        }
    } else if (rc == SQLITE_DONE) {
        sqlite3_reset(st);
        enum sq_store_status cur;
        r = run_status(c, id, &cur, err, errlen);
        pthread_mutex_lock(&s->pend_mu);
        struct pend_end *p = r == 0 ? pend_find(s, id) : NULL;
        if (p && p->doc) { /* a kept end's result, from memory */
            out->doc = dup_bytes(p->doc, p->doc_len + 1);
            out->doc_len = p->doc_len;
            out->hist = dup_bytes(p->hist, p->hist_len);
            out->hist_len = out->hist ? p->hist_len : 0;
            out->hist_uncorrected = dup_bytes(p->hist_u, p->hist_u_len);
            out->hist_uncorrected_len = out->hist_uncorrected ? p->hist_u_len : 0;
            if (!out->doc || (p->hist && !out->hist) || (p->hist_u && !out->hist_uncorrected)) {
                say(err, errlen, "out of memory");
                r = -ENOMEM;
            }
        } else if (r == 0) {
            say(err, errlen, "run %lld (%s) has no result", (long long)id,
                sq_store_status_name(p ? p->status : cur));
            r = -ENOENT;
        }
        pthread_mutex_unlock(&s->pend_mu);
    } else {
        r = db_fail(c, rc, err, errlen, "reading a result");
    }
    row_done(c, st);
    if (r < 0)
        sq_store_result_dispose(out);
    return r;
}

void sq_store_result_dispose(struct sq_store_result *r)
{
    if (!r)
        return;
    free(r->doc);
    free(r->hist);
    free(r->hist_uncorrected);
    memset(r, 0, sizeof(*r));
}

/* ---- retention ---- */

/* One pruning transaction: deletes candidates after *last, oldest first, until the batch's
 * rows are spent. *more says whether a candidate is left. */
static int prune_batch(struct conn *c, int64_t cut_id, int64_t cut_ms, int64_t batch, int64_t *last,
                       bool *more, struct sq_store_prune_stats *stats, char *err, size_t errlen)
{
    int r = txn_begin(c, false, err, errlen);
    if (r < 0)
        return r;
    int64_t budget = batch;
    *more = false;
    while (r == 0) {
        sqlite3_stmt *st = stmt(c, ST_PRUNE_NEXT);
        sqlite3_bind_int64(st, 1, *last);
        sqlite3_bind_int64(st, 2, cut_id);
        sqlite3_bind_int64(st, 3, cut_ms);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            sqlite3_reset(st);
            break;
        }
        if (rc != SQLITE_ROW) {
            r = db_fail(c, rc, err, errlen, "pruning");
            sqlite3_reset(st);
            break;
        }
        int64_t id = sqlite3_column_int64(st, 0), rows = sqlite3_column_int64(st, 1);
        int64_t cost = 1 + rows + sqlite3_column_int64(st, 2); /* + its result's pages */
        sqlite3_reset(st);
        if (cost > budget && budget < batch) {
            *more = true; /* the next transaction takes it */
            break;
        }
        if (cost > budget && rows > 0) {
            /* Bigger than a whole batch: its newest seconds go first, the run stays. */
            st = stmt(c, ST_PRUNE_CHUNK);
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_int64(st, 2, rows - budget);
            rc = sqlite3_step(st);
            sqlite3_reset(st);
            if (rc != SQLITE_DONE) {
                r = db_fail(c, rc, err, errlen, "pruning a run's series");
                break;
            }
            stats->rows_deleted += sqlite3_changes(c->db);
            *more = true;
            break;
        }
        st = stmt(c, ST_DELETE);
        sqlite3_bind_int64(st, 1, id);
        rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc != SQLITE_DONE) {
            r = db_fail(c, rc, err, errlen, "pruning a run");
            break;
        }
        stats->runs_deleted++;
        stats->rows_deleted += rows;
        budget -= cost;
        *last = id;
    }
    int cr = txn_end(c, false, r == 0, err, errlen);
    return r < 0 ? r : cr;
}

/* After one pruning transaction of us microseconds: counts it, hands the writer's lock to a
 * waiting writer, and waits for a checkpoint when the WAL has grown long. */
static void txn_pause(struct sq_store *s, struct sq_store_prune_stats *stats, int64_t us,
                      bool long_wal)
{
    stats->transactions++;
    if (us > stats->max_txn_us)
        stats->max_txn_us = us;
    hand_over(&s->wr);
    if (long_wal)
        await_checkpoint(s);
}

int sq_store_prune(struct sq_store *s, const struct sq_store_retention *ret,
                   struct sq_store_prune_stats *stats, char *err, size_t errlen)
{
    struct conn *c = &s->wr;
    if (s->ro)
        return read_only(s, err, errlen);
    struct sq_store_retention dr = {SQ_STORE_KEEP_RUNS_DEFAULT, SQ_STORE_KEEP_DAYS_DEFAULT, 0};
    struct sq_store_prune_stats ds;
    if (!ret)
        ret = &dr;
    if (!stats)
        stats = &ds;
    memset(stats, 0, sizeof(*stats));
    if (ret->keep_runs < 0 || ret->keep_days < 0 || ret->batch < 0) {
        say(err, errlen, "retention figures cannot be negative");
        return -EINVAL;
    }
    int64_t batch = ret->batch ? ret->batch : SQ_STORE_PRUNE_BATCH;

    /* The cut-offs, fixed once: runs created while pruning are never candidates. */
    int64_t cut_id = INT64_MIN, cut_ms = INT64_MIN;
    int r = 0;
    lock(c);
    if (ret->keep_runs > 0) {
        sqlite3_stmt *st = stmt(c, ST_CUTOFF);
        sqlite3_bind_int64(st, 1, ret->keep_runs - 1);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            cut_id = sqlite3_column_int64(st, 0);
        else if (rc != SQLITE_DONE)
            r = db_fail(c, rc, err, errlen, "pruning");
        sqlite3_reset(st);
    }
    if (ret->keep_days > 0)
        cut_ms = now_ms(s) - ret->keep_days * 86400000;
    unlock(c);
    if (r < 0 || (cut_id == INT64_MIN && cut_ms == INT64_MIN))
        return r;

    int64_t last = 0;
    for (bool more = true; more && r == 0;) {
        lock(c);
        int64_t t0 = sq_now_ns();
        r = prune_batch(c, cut_id, cut_ms, batch, &last, &more, stats, err, errlen);
        int64_t us = (sq_now_ns() - t0) / 1000;
        bool long_wal = s->ck_last >= 2 * s->ck_frames; /* on_commit's, read under wr's mutex */
        unlock(c);
        txn_pause(s, stats, us, long_wal);
    }
    /* Free pages back to the file system, 256 (1 MiB) per transaction. */
    for (int64_t prev = -1; r == 0 && s->incremental;) {
        lock(c);
        int64_t t0 = sq_now_ns();
        int64_t free_pages = 0;
        sqlite3_stmt *st = stmt(c, ST_FREELIST);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            free_pages = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        }
        sqlite3_reset(st);
        if (rc == SQLITE_OK && free_pages > 0 && free_pages != prev) {
            /* One page per step (a row each): step to the end. */
            st = stmt(c, ST_VACUUM);
            while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                ;
            sqlite3_reset(st);
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        } else {
            free_pages = 0;
        }
        int64_t us = (sq_now_ns() - t0) / 1000;
        if (rc != SQLITE_OK)
            r = db_fail(c, rc, err, errlen, "returning free pages");
        bool long_wal = s->ck_last >= 2 * s->ck_frames;
        unlock(c);
        if (free_pages == 0)
            break;
        prev = free_pages;
        txn_pause(s, stats, us, long_wal);
    }
    /* Fold what pruning wrote into the database now, not at the next run's thousandth page. */
    if (stats->transactions)
        wake_checkpointer(s);
    return r;
}

/* ---- upkeep ---- */

int sq_store_size(struct sq_store *s, int64_t *bytes, char *err, size_t errlen)
{
    struct stat sb;
    size_t n = strlen(s->path) + sizeof("-wal");
    char *wal = malloc(n);
    if (!wal) {
        say(err, errlen, "out of memory");
        return -ENOMEM;
    }
    snprintf(wal, n, "%s-wal", s->path);
    int r = 0;
    if (stat(s->path, &sb) < 0) {
        r = -errno;
        say(err, errlen, "cannot stat %s: %s", s->path, strerror(errno));
    } else {
        *bytes = (int64_t)sb.st_size;
        if (stat(wal, &sb) == 0)
            *bytes += (int64_t)sb.st_size;
    }
    free(wal);
    return r;
}

int sq_store_check(struct sq_store *s, char *err, size_t errlen)
{
    struct conn *c = &s->rd;
    static const char *const checks[] = {"PRAGMA integrity_check", "PRAGMA foreign_key_check"};
    int r = 0;
    lock(c);
    for (size_t i = 0; r == 0 && i < SQ_ARRAY_LEN(checks); i++) {
        sqlite3_stmt *st;
        int rc = sqlite3_prepare_v2(c->db, checks[i], -1, &st, NULL);
        if (rc != SQLITE_OK) {
            r = db_fail(c, rc, err, errlen, checks[i]);
            break;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW && i == 0) {
            const char *t = (const char *)sqlite3_column_text(st, 0);
            if (!t || strcmp(t, "ok") != 0) {
                say(err, errlen, "%s: integrity_check: %s", s->path, t ? t : "?");
                r = -EIO;
            }
        } else if (rc == SQLITE_ROW) {
            say(err, errlen, "%s: a row of %s (rowid %lld) refers to no %s", s->path,
                (const char *)sqlite3_column_text(st, 0), (long long)sqlite3_column_int64(st, 1),
                (const char *)sqlite3_column_text(st, 2));
            r = -EIO;
        } else if (rc != SQLITE_DONE) {
            r = db_fail(c, rc, err, errlen, checks[i]);
        }
        sqlite3_finalize(st);
    }
    unlock(c);
    return r;
}
