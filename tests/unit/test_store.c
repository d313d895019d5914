/* tests/unit/test_store.c - store/: every operation on a real SQLite file in a temp directory,
 * status transitions (the illegal ones refused), paging, retention in bounded batches,
 * migration of a v1 database kept here as a fixture, recovery after a process dies in the
 * middle of a transaction or is SIGKILLed mid-run, the stock sqlite3 tool reading the file,
 * and threads sharing one store (run under TSan by `make test-tsan`). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/store.h"

/* ---- fixtures ---- */

static char tmpdir[256];
static char errbuf[512];
static int64_t fake_now = INT64_C(1767225600000); /* 2026-01-01 */

static int64_t fake_clock(void *ud)
{
    (void)ud;
    return fake_now;
}

static const struct sq_store_opts fake_opts = {.clock_ms = fake_clock};

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/sq-store-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir))
        return -1;
    fake_now = INT64_C(1767225600000);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static char *path_in(const char *name)
{
    static char p[4][512];
    static int k;
    char *out = p[k++ % 4];
    snprintf(out, sizeof(p[0]), "%s/%s", tmpdir, name);
    return out;
}

static struct sq_store *open_ok(const char *path, const struct sq_store_opts *o)
{
    struct sq_store *s = NULL;
    errbuf[0] = '\0';
    int r = sq_store_open(path, o, &s, errbuf, sizeof(errbuf));
    if (r != 0)
        fail_msg("sq_store_open(%s): %d %s", path, r, errbuf);
    assert_non_null(s);
    return s;
}

static int64_t create_run(struct sq_store *s, enum sq_store_kind kind, const char *name)
{
    struct sq_store_new_run nr = {kind, name, "http://127.0.0.1:1/fast",
                                  "{\"quick\":{\"url\":\"http://127.0.0.1:1/fast\"}}"};
    int64_t id = 0;
    int r = sq_store_run_create(s, &nr, &id, errbuf, sizeof(errbuf));
    if (r != 0)
        fail_msg("create: %d %s", r, errbuf);
    assert_true(id > 0);
    return id;
}

static struct sq_store_second second(int64_t idx)
{
    struct sq_store_second x = {
        .idx = idx,
        .t_s = (double)(idx + 1),
        .len_s = 1.0,
        .sent = 1000 + (uint64_t)idx,
        .completed = 990 + (uint64_t)idx,
        .failed = 10,
        .errors = 3,
        .dropped = 1,
        .bytes = 123456,
        .active = 64,
        .p50_us = 100 + idx,
        .p90_us = 200 + idx,
        .p99_us = 300 + idx,
        .max_us = 4000 + idx,
    };
    return x;
}

static void append_ok(struct sq_store *s, int64_t id, int64_t idx)
{
    struct sq_store_second x = second(idx);
    int r = sq_store_series_append(s, id, &x, errbuf, sizeof(errbuf));
    if (r != 0)
        fail_msg("append %lld/%lld: %d %s", (long long)id, (long long)idx, r, errbuf);
}

static const char result_doc[] =
    "{\"schema\":\"squall.result/1\",\"requests\":{\"sent\":3003,\"completed\":2973},"
    "\"rate\":{\"requests_per_s\":991.25},\"latency\":{\"p99_us\":302},"
    "\"errors\":{\"connect\":4,\"timeout\":5,\"closed\":0}}";
static const unsigned char hist_blob[] = {0x1c, 0x84, 0x93, 0x14, 0, 0, 0, 3, 0x78, 0x9c, 0x00};
static const unsigned char hist_unc_blob[] = {0x1c, 0x84, 0x93, 0x14, 0, 0, 0, 1, 0xff};

static void end_run(struct sq_store *s, int64_t id, enum sq_store_status st, bool with_doc)
{
    struct sq_store_end e = {.status = st, .reason = st == SQ_STORE_FINISHED ? NULL : "because"};
    if (with_doc) {
        e.doc = result_doc;
        e.doc_len = strlen(result_doc);
        e.hist = hist_blob;
        e.hist_len = sizeof(hist_blob);
        e.hist_uncorrected = hist_unc_blob;
        e.hist_uncorrected_len = sizeof(hist_unc_blob);
    }
    int r = sq_store_run_end(s, id, &e, errbuf, sizeof(errbuf));
    if (r != 0)
        fail_msg("end %lld: %d %s", (long long)id, r, errbuf);
}

/* A finished run with three seconds and a result. */
static int64_t finished_run(struct sq_store *s, const char *name)
{
    int64_t id = create_run(s, SQ_STORE_QUICK, name);
    assert_int_equal(sq_store_run_start(s, id, errbuf, sizeof(errbuf)), 0);
    for (int i = 0; i < 3; i++)
        append_ok(s, id, i);
    end_run(s, id, SQ_STORE_FINISHED, true);
    return id;
}

static enum sq_store_status status_of(struct sq_store *s, int64_t id)
{
    struct sq_store_run r;
    assert_int_equal(sq_store_run_get(s, id, &r, errbuf, sizeof(errbuf)), 0);
    enum sq_store_status st = r.status;
    sq_store_run_dispose(&r);
    return st;
}

/* One integer from a raw SQLite connection (the test's own view of the file). */
static int64_t raw_int(const char *db, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(h));
    int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

static void raw_exec(const char *db, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s", msg);
    sqlite3_close(h);
}

/* ---- names ---- */

static void status_names(void **state)
{
    (void)state;
    for (int i = 0; i < SQ_STORE_STATUS__COUNT; i++) {
        enum sq_store_status st;
        assert_int_equal(sq_store_status_parse(sq_store_status_name(i), &st), 0);
        assert_int_equal(st, i);
    }
    enum sq_store_status st;
    assert_int_equal(sq_store_status_parse("Finished", &st), -EINVAL);
    assert_int_equal(sq_store_status_parse("", &st), -EINVAL);
    assert_int_equal(sq_store_status_parse(NULL, &st), -EINVAL);
    assert_string_equal(sq_store_status_name(SQ_STORE_STATUS__COUNT), "?");
    assert_false(sq_store_status_ended(SQ_STORE_QUEUED));
    assert_false(sq_store_status_ended(SQ_STORE_RUNNING));
    assert_true(sq_store_status_ended(SQ_STORE_INTERRUPTED));
    assert_string_equal(sq_store_kind_name(SQ_STORE_PLAN), "plan");
}

/* ---- opening ---- */

static void open_creates_data_dir(void **state)
{
    (void)state;
    char *dir = path_in("a/b/data");
    struct sq_store *s = open_ok(dir, NULL);
    char db[600];
    snprintf(db, sizeof(db), "%s/squall.db", dir);
    assert_string_equal(sq_store_path(s), db);
    assert_int_equal(sq_store_recovered(s), 0);
    struct stat sb;
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    assert_int_equal(stat(db, &sb), 0);
    assert_int_equal(sb.st_mode & 0077, 0); /* requests may hold credentials */
    snprintf(db + strlen(db), sizeof(db) - strlen(db), ".lock");
    assert_int_equal(stat(db, &sb), 0);
    int64_t size = 0;
    assert_int_equal(sq_store_size(s, &size, errbuf, sizeof(errbuf)), 0);
    assert_true(size > 0);
    sq_store_close(s);

    db[strlen(db) - 5] = '\0';
    assert_int_equal(raw_int(db, "PRAGMA user_version"), SQ_STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(db, "PRAGMA application_id"), 0x53716c6c);
    assert_int_equal(raw_int(db, "PRAGMA auto_vacuum"), 2);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM runs"), 0);
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(h);

    /* The same directory again, with a trailing slash: the same file. */
    char again[600];
    snprintf(again, sizeof(again), "%s/", dir);
    s = open_ok(again, NULL);
    assert_string_equal(sq_store_path(s), db);
    sq_store_close(s);
}

static void open_file_path(void **state)
{
    (void)state;
    char *db = path_in("runs.db");
    struct sq_store *s = open_ok(db, NULL);
    assert_string_equal(sq_store_path(s), db);
    finished_run(s, "one");
    sq_store_close(s);
    s = open_ok(db, &fake_opts);
    int64_t counts[SQ_STORE_STATUS__COUNT];
    assert_int_equal(sq_store_count(s, counts, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(counts[SQ_STORE_FINISHED], 1);
    sq_store_close(s);

    struct sq_store *t = NULL;
    assert_int_equal(sq_store_open("", NULL, &t, errbuf, sizeof(errbuf)), -EINVAL);
    assert_null(t);
    assert_int_equal(sq_store_open("/dev/null", NULL, &t, errbuf, sizeof(errbuf)), -EINVAL);
    assert_non_null(strstr(errbuf, "neither a directory nor a file"));
}

static void open_twice_is_busy(void **state)
{
    (void)state;
    char *dir = path_in("data");
    struct sq_store *s = open_ok(dir, NULL), *t = NULL;
    int64_t id = finished_run(s, "x");
    assert_int_equal(sq_store_open(dir, NULL, &t, errbuf, sizeof(errbuf)), -EBUSY);
    assert_null(t);
    char pid[32];
    snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
    assert_non_null(strstr(errbuf, pid));

    /* Read-only beside it: reads what the writer wrote, writes nothing, recovers nothing. */
    int64_t running = create_run(s, SQ_STORE_QUICK, "live");
    assert_int_equal(sq_store_run_start(s, running, errbuf, sizeof(errbuf)), 0);
    struct sq_store_opts ro = {.read_only = true};
    t = open_ok(dir, &ro);
    assert_int_equal(sq_store_recovered(t), 0);
    assert_int_equal(status_of(t, running), SQ_STORE_RUNNING);
    struct sq_store_result res;
    assert_int_equal(sq_store_result_get(t, id, &res, errbuf, sizeof(errbuf)), 0);
    assert_string_equal(res.doc, result_doc);
    sq_store_result_dispose(&res);
    int64_t nid;
    struct sq_store_new_run nr = {SQ_STORE_QUICK, "", "", "{}"};
    assert_int_equal(sq_store_run_create(t, &nr, &nid, errbuf, sizeof(errbuf)), -EROFS);
    append_ok(s, running, 0); /* the writer goes on while the reader is open */
    struct sq_store_series se;
    assert_int_equal(sq_store_series_get(t, running, 0, &se, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(se.n, 1);
    sq_store_series_dispose(&se);
    sq_store_close(t);
    sq_store_close(s);

    /* Closed: a read-write open works again (and recovers the running run). */
    s = open_ok(dir, NULL);
    assert_int_equal(sq_store_recovered(s), 1);
    sq_store_close(s);

    /* Read-only on its own (no WAL left): reads, and refuses every write by name. */
    t = open_ok(dir, &ro);
    assert_int_equal(status_of(t, running), SQ_STORE_INTERRUPTED);
    struct sq_store_end stop = {.status = SQ_STORE_STOPPED};
    struct sq_store_second x = second(1);
    assert_int_equal(sq_store_run_start(t, running, errbuf, sizeof(errbuf)), -EROFS);
    assert_non_null(strstr(errbuf, "open read-only"));
    assert_int_equal(sq_store_run_end(t, running, &stop, errbuf, sizeof(errbuf)), -EROFS);
    assert_int_equal(sq_store_series_append(t, running, &x, errbuf, sizeof(errbuf)), -EROFS);
    assert_int_equal(sq_store_run_delete(t, id, errbuf, sizeof(errbuf)), -EROFS);
    assert_int_equal(sq_store_prune(t, NULL, NULL, errbuf, sizeof(errbuf)), -EROFS);
    assert_int_equal(sq_store_checkpoints(t), 0);
    assert_int_equal(sq_store_check(t, errbuf, sizeof(errbuf)), 0);
    sq_store_close(t);

    t = NULL;
    assert_int_equal(sq_store_open(path_in("nothing"), &ro, &t, errbuf, sizeof(errbuf)), -ENOENT);
    assert_null(t);
    assert_non_null(strstr(errbuf, "no store at"));
}

static void open_refuses_foreign_files(void **state)
{
    (void)state;
    struct sq_store *s = NULL;
    char *junk = path_in("junk.db");
    FILE *f = fopen(junk, "w");
    assert_non_null(f);
    for (int i = 0; i < 200; i++)
        fputs("this is not a database at all. ", f);
    fclose(f);
    assert_int_equal(sq_store_open(junk, NULL, &s, errbuf, sizeof(errbuf)), -EIO);
    assert_null(s);
    assert_non_null(strstr(errbuf, "not a database"));

    char *other = path_in("other.db");
    raw_exec(other, "CREATE TABLE t (x); INSERT INTO t VALUES (1);");
    assert_int_equal(sq_store_open(other, NULL, &s, errbuf, sizeof(errbuf)), -EIO);
    assert_non_null(strstr(errbuf, "not a squall store"));
    assert_int_equal(raw_int(other, "SELECT x FROM t"), 1); /* untouched */
}

static void newer_schema_refused(void **state)
{
    (void)state;
    char *db = path_in("new.db");
    struct sq_store *s = open_ok(db, NULL);
    finished_run(s, "x");
    sq_store_close(s);
    raw_exec(db, "PRAGMA user_version = 7");
    s = NULL;
    assert_int_equal(sq_store_open(db, NULL, &s, errbuf, sizeof(errbuf)), -ENOTSUP);
    assert_null(s);
    assert_non_null(strstr(errbuf, "schema version 7, newer than this squall's 2"));
    struct sq_store_opts ro = {.read_only = true};
    assert_int_equal(sq_store_open(db, &ro, &s, errbuf, sizeof(errbuf)), -ENOTSUP);
    assert_int_equal(raw_int(db, "PRAGMA user_version"), 7); /* untouched */
    assert_int_equal(raw_int(db, "SELECT count(*) FROM runs"), 1);
}

/* ---- migrations ---- */

/* What squall's first store (schema version 1) wrote, frozen here: never edit it. Four runs:
 * a finished one with series and a result, one left running with two seconds, a failed one,
 * a queued one. */
static const char v1_fixture[] =
    "PRAGMA application_id = 1399942252;"
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
    " hist_uncorrected BLOB);"
    "PRAGMA journal_mode = WAL;"
    "INSERT INTO runs VALUES (1, 'nightly', 'quick', 'finished', 1700000000000, 1700000001000,"
    " 1700000004000, 'http://127.0.0.1:8080/fast', '{\"quick\":{\"connections\":64}}', NULL);"
    "INSERT INTO series VALUES (1, 0, 1.0, 1.0, 1000, 990, 10, 3, 0, 5000, 64, 100, 200, 300,"
    " 400, NULL);"
    "INSERT INTO series VALUES (1, 1, 2.0, 1.0, 1000, 990, 10, 3, 0, 5000, 64, 100, 200, 300,"
    " 400, '{\"status\":{\"2xx\":990}}');"
    "INSERT INTO results VALUES (1, '{\"schema\":\"squall.result/1\","
    "\"requests\":{\"sent\":2000,\"completed\":1980},\"rate\":{\"requests_per_s\":660.0},"
    "\"latency\":{\"p99_us\":300},\"errors\":{\"connect\":2,\"timeout\":4}}', X'1C849314', NULL);"
    "INSERT INTO runs VALUES (2, 'soak', 'plan', 'running', 1700000100000, 1700000101000, NULL,"
    " 'http://127.0.0.1:8080/', '{\"plan\":\"scenarios: {}\"}', NULL);"
    "INSERT INTO series VALUES (2, 0, 1.0, 1.0, 500, 500, 0, 1, 0, 100, 8, 10, 20, 30, 40, NULL);"
    "INSERT INTO series VALUES (2, 1, 2.0, 1.0, 700, 500, 0, 2, 0, 100, 8, 10, 20, 30, 40, NULL);"
    "INSERT INTO runs VALUES (3, '', 'quick', 'failed', 1700000200000, 1700000200001,"
    " 1700000200002, 'http://nowhere.invalid/', '{}', 'nowhere.invalid: host not found');"
    "INSERT INTO runs VALUES (4, '', 'quick', 'queued', 1700000300000, NULL, NULL, '', '{}',"
    " NULL);"
    "PRAGMA user_version = 1;";

/* The columns and indexes of the store's tables, as text. */
static void schema_of(const char *db, char *out, size_t len)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    const char *sql =
        "SELECT m.name || '.' || p.name || ' ' || p.type || ' ' || p.\"notnull\" || ' ' ||"
        " ifnull(p.dflt_value, '-') || ' ' || p.pk FROM sqlite_master m,"
        " pragma_table_xinfo(m.name) p WHERE m.type = 'table' ORDER BY m.name, p.cid";
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    size_t n = 0;
    out[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW)
        n += (size_t)snprintf(out + n, len - n, "%s\n", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_prepare_v2(h,
                                        "SELECT name || ' ' || ifnull(sql, '') FROM sqlite_master"
                                        " WHERE type = 'index' ORDER BY name",
                                        -1, &st, NULL),
                     SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW)
        n += (size_t)snprintf(out + n, len - n, "%s\n", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    assert_true(n < len - 1);
    sqlite3_close(h);
}

static void migrates_v1(void **state)
{
    (void)state;
    char *old = path_in("v1.db");
    raw_exec(old, v1_fixture);
    assert_int_equal(raw_int(old, "PRAGMA user_version"), 1);

    struct sq_store *s = open_ok(old, &fake_opts);
    assert_int_equal(sq_store_recovered(s), 2); /* the running and the queued run */
    assert_int_equal(sq_store_check(s, errbuf, sizeof(errbuf)), 0);

    struct sq_store_run r;
    assert_int_equal(sq_store_run_get(s, 1, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.status, SQ_STORE_FINISHED);
    assert_string_equal(r.name, "nightly");
    assert_string_equal(r.request, "{\"quick\":{\"connections\":64}}");
    assert_int_equal(r.created_ms, INT64_C(1700000000000));
    assert_true(r.req_per_s == 660.0); /* the summary, filled in from the result */
    assert_int_equal(r.p99_us, 300);
    assert_int_equal(r.errors, 6);
    assert_int_equal(r.sent, 2000);
    assert_true(r.has_result);
    sq_store_run_dispose(&r);

    assert_int_equal(sq_store_run_get(s, 2, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.status, SQ_STORE_INTERRUPTED);
    assert_int_equal(r.kind, SQ_STORE_PLAN);
    assert_int_equal(r.ended_ms, INT64_C(1700000103000)); /* started + the last t_s */
    assert_int_equal(r.sent, 1200);                       /* from its series */
    assert_int_equal(r.errors, 3);
    assert_true(r.req_per_s == 500.0);
    assert_int_equal(r.p99_us, -1);
    assert_false(r.has_result);
    assert_non_null(strstr(r.reason, "running"));
    sq_store_run_dispose(&r);

    assert_int_equal(sq_store_run_get(s, 3, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.status, SQ_STORE_FAILED);
    assert_string_equal(r.reason, "nowhere.invalid: host not found");
    assert_int_equal(r.sent, -1);
    sq_store_run_dispose(&r);
    assert_int_equal(status_of(s, 4), SQ_STORE_INTERRUPTED);

    struct sq_store_series se;
    assert_int_equal(sq_store_series_get(s, 1, 0, &se, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(se.n, 2);
    assert_null(se.v[0].extra);
    assert_string_equal(se.v[1].extra, "{\"status\":{\"2xx\":990}}");
    sq_store_series_dispose(&se);
    struct sq_store_result res;
    assert_int_equal(sq_store_result_get(s, 1, &res, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(res.hist_len, 4);
    assert_memory_equal(res.hist, "\x1c\x84\x93\x14", 4);
    assert_null(res.hist_uncorrected);
    sq_store_result_dispose(&res);

    /* It goes on like a new store: ids are not reused. */
    assert_int_equal(create_run(s, SQ_STORE_QUICK, "after"), 5);
    sq_store_close(s);

    /* The migrated schema is the one a new store gets. */
    char *fresh = path_in("fresh.db");
    sq_store_close(open_ok(fresh, NULL));
    static char a[8192], b[8192];
    schema_of(old, a, sizeof(a));
    schema_of(fresh, b, sizeof(b));
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "runs.p99_us INTEGER"));
    assert_non_null(strstr(a, "runs_by_status"));
    assert_int_equal(raw_int(old, "PRAGMA user_version"), SQ_STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(old, "PRAGMA application_id"),
                     raw_int(fresh, "PRAGMA application_id"));
}

/* A migration step that fails leaves the database at its old version, untouched. */
static void failed_migration_rolls_back(void **state)
{
    (void)state;
    char *old = path_in("v1bad.db");
    raw_exec(old, v1_fixture);
    /* A column the v2 step adds, already there: its ALTER TABLE fails. */
    raw_exec(old, "ALTER TABLE runs ADD COLUMN sent INTEGER");
    struct sq_store *s = NULL;
    assert_int_equal(sq_store_open(old, NULL, &s, errbuf, sizeof(errbuf)), -EIO);
    assert_null(s);
    assert_non_null(strstr(errbuf, "from schema version 1 to 2"));
    assert_int_equal(raw_int(old, "PRAGMA user_version"), 1);
    assert_int_equal(raw_int(old, "SELECT count(*) FROM pragma_table_info('runs')"), 11);
    assert_int_equal(raw_int(old, "SELECT status = 'running' FROM runs WHERE id = 2"), 1);
}

/* ---- runs ---- */

static void run_lifecycle(void **state)
{
    (void)state;
    struct sq_store *s = open_ok(path_in("d"), &fake_opts);
    struct sq_store_new_run nr = {SQ_STORE_PLAN, "checkout", "https://127.0.0.1:8443/",
                                  "{\"plan\":\"scenarios:\\n  a: {}\\n\",\"name\":\"checkout\"}"};
    int64_t id = 0;
    assert_int_equal(sq_store_run_create(s, &nr, &id, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(id, 1);

    struct sq_store_run r;
    assert_int_equal(sq_store_run_get(s, id, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.id, id);
    assert_int_equal(r.kind, SQ_STORE_PLAN);
    assert_int_equal(r.status, SQ_STORE_QUEUED);
    assert_string_equal(r.name, "checkout");
    assert_string_equal(r.target, "https://127.0.0.1:8443/");
    assert_string_equal(r.request, nr.request);
    assert_int_equal(r.created_ms, fake_now);
    assert_int_equal(r.started_ms, 0);
    assert_int_equal(r.ended_ms, 0);
    assert_null(r.reason);
    assert_int_equal(r.sent, -1);
    assert_true(r.req_per_s == -1);
    assert_false(r.has_result);
    sq_store_run_dispose(&r);
    sq_store_run_dispose(&r); /* disposing twice is harmless */

    fake_now += 1500;
    assert_int_equal(sq_store_run_start(s, id, errbuf, sizeof(errbuf)), 0);
    for (int i = 0; i < 3; i++) {
        struct sq_store_second x = second(i);
        x.extra = i == 1 ? "{\"status\":{\"2xx\":991,\"5xx\":0}}" : NULL;
        x.sent = i == 2 ? UINT64_MAX : x.sent; /* clamped, not wrapped */
        assert_int_equal(sq_store_series_append(s, id, &x, errbuf, sizeof(errbuf)), 0);
    }
    struct sq_store_series se;
    assert_int_equal(sq_store_series_get(s, id, 0, &se, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(se.n, 3);
    for (int i = 0; i < 3; i++) {
        struct sq_store_second want = second(i);
        assert_int_equal(se.v[i].idx, i);
        assert_true(se.v[i].t_s == want.t_s);
        assert_true(se.v[i].len_s == want.len_s);
        assert_int_equal(se.v[i].sent, i == 2 ? (uint64_t)INT64_MAX : want.sent);
        assert_int_equal(se.v[i].completed, want.completed);
        assert_int_equal(se.v[i].failed, want.failed);
        assert_int_equal(se.v[i].errors, want.errors);
        assert_int_equal(se.v[i].dropped, want.dropped);
        assert_int_equal(se.v[i].bytes, want.bytes);
        assert_int_equal(se.v[i].active, want.active);
        assert_int_equal(se.v[i].p50_us, want.p50_us);
        assert_int_equal(se.v[i].p90_us, want.p90_us);
        assert_int_equal(se.v[i].p99_us, want.p99_us);
        assert_int_equal(se.v[i].max_us, want.max_us);
    }
    assert_null(se.v[0].extra);
    assert_string_equal(se.v[1].extra, "{\"status\":{\"2xx\":991,\"5xx\":0}}");
    sq_store_series_dispose(&se);
    assert_int_equal(sq_store_series_get(s, id, 2, &se, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(se.n, 1); /* a late joiner's catch-up from a given second */
    assert_int_equal(se.v[0].idx, 2);
    sq_store_series_dispose(&se);
    assert_int_equal(sq_store_series_get(s, id, 3, &se, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(se.n, 0);
    sq_store_series_dispose(&se);

    fake_now += 3000;
    end_run(s, id, SQ_STORE_FINISHED, true);
    assert_int_equal(sq_store_run_get(s, id, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.status, SQ_STORE_FINISHED);
    assert_int_equal(r.started_ms, fake_now - 3000);
    assert_int_equal(r.ended_ms, fake_now);
    assert_null(r.reason);
    assert_true(r.req_per_s == 991.25); /* the summary comes from the document */
    assert_int_equal(r.p99_us, 302);
    assert_int_equal(r.errors, 9);
    assert_int_equal(r.sent, 3003);
    assert_true(r.has_result);
    sq_store_run_dispose(&r);

    struct sq_store_result res;
    assert_int_equal(sq_store_result_get(s, id, &res, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(res.doc_len, strlen(result_doc));
    assert_string_equal(res.doc, result_doc);
    assert_int_equal(res.hist_len, sizeof(hist_blob));
    assert_memory_equal(res.hist, hist_blob, sizeof(hist_blob));
    assert_int_equal(res.hist_uncorrected_len, sizeof(hist_unc_blob));
    assert_memory_equal(res.hist_uncorrected, hist_unc_blob, sizeof(hist_unc_blob));
    sq_store_result_dispose(&res);
    sq_store_result_dispose(NULL);

    /* A stopped run without a document: its summary is summed from its series. */
    int64_t id2 = create_run(s, SQ_STORE_QUICK, "");
    assert_int_equal(sq_store_run_start(s, id2, errbuf, sizeof(errbuf)), 0);
    append_ok(s, id2, 0);
    append_ok(s, id2, 1);
    end_run(s, id2, SQ_STORE_STOPPED, false);
    assert_int_equal(sq_store_run_get(s, id2, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.status, SQ_STORE_STOPPED);
    assert_string_equal(r.reason, "because");
    assert_int_equal(r.sent, 2001);
    assert_int_equal(r.errors, 6);
    assert_true(r.req_per_s == 990.5);
    assert_int_equal(r.p99_us, -1);
    assert_false(r.has_result);
    sq_store_run_dispose(&r);
    assert_int_equal(sq_store_result_get(s, id2, &res, errbuf, sizeof(errbuf)), -ENOENT);
    assert_non_null(strstr(errbuf, "has no result"));
    assert_int_equal(sq_store_check(s, errbuf, sizeof(errbuf)), 0);
    sq_store_close(s);
}

/* Every transition the store refuses, and what it leaves behind: nothing. */
static void illegal_transitions(void **state)
{
    (void)state;
    struct sq_store *s = open_ok(path_in("d"), NULL);
    int64_t q = create_run(s, SQ_STORE_QUICK, "queued");
    int64_t run = create_run(s, SQ_STORE_QUICK, "running");
    assert_int_equal(sq_store_run_start(s, run, errbuf, sizeof(errbuf)), 0);
    int64_t fin = finished_run(s, "finished");
    struct sq_store_second x = second(0);
    struct sq_store_end fin_end = {
        .status = SQ_STORE_FINISHED, .doc = result_doc, .doc_len = strlen(result_doc)};
    struct sq_store_end stop_end = {.status = SQ_STORE_STOPPED};

    /* start: only from queued */
    assert_int_equal(sq_store_run_start(s, run, errbuf, sizeof(errbuf)), -EPERM);
    assert_string_equal(errbuf, "run 2 is running: it cannot become running");
    assert_int_equal(sq_store_run_start(s, fin, errbuf, sizeof(errbuf)), -EPERM);
    assert_int_equal(sq_store_run_start(s, 999, errbuf, sizeof(errbuf)), -ENOENT);
    assert_string_equal(errbuf, "no run 999");

    /* end: finished only from running, with a document */
    assert_int_equal(sq_store_run_end(s, q, &fin_end, errbuf, sizeof(errbuf)), -EPERM);
    assert_string_equal(errbuf, "run 1 is queued: it cannot become finished");
    assert_int_equal(sq_store_run_end(s, fin, &stop_end, errbuf, sizeof(errbuf)), -EPERM);
    assert_int_equal(sq_store_run_end(s, fin, &fin_end, errbuf, sizeof(errbuf)), -EPERM);
    assert_int_equal(sq_store_run_end(s, 999, &stop_end, errbuf, sizeof(errbuf)), -ENOENT);
    struct sq_store_end bad = {.status = SQ_STORE_RUNNING};
    assert_int_equal(sq_store_run_end(s, run, &bad, errbuf, sizeof(errbuf)), -EINVAL);
    bad.status = SQ_STORE_INTERRUPTED;
    assert_int_equal(sq_store_run_end(s, run, &bad, errbuf, sizeof(errbuf)), -EINVAL);
    bad.status = SQ_STORE_FINISHED;
    assert_int_equal(sq_store_run_end(s, run, &bad, errbuf, sizeof(errbuf)), -EINVAL);
    assert_non_null(strstr(errbuf, "without its result document"));
    bad.doc = "{\"schema\": \"squall.result/1\", ";
    bad.doc_len = strlen(bad.doc);
    assert_int_equal(sq_store_run_end(s, run, &bad, errbuf, sizeof(errbuf)), -EINVAL);
    assert_string_equal(errbuf, "run 2's result document is not valid JSON");
    assert_int_equal(sq_store_run_end(s, run, NULL, errbuf, sizeof(errbuf)), -EINVAL);
    assert_int_equal(status_of(s, run), SQ_STORE_RUNNING); /* the refusals changed nothing */
    struct sq_store_result res;
    assert_int_equal(sq_store_result_get(s, run, &res, errbuf, sizeof(errbuf)), -ENOENT);

    /* append: only while running; one row per second; valid extra */
    assert_int_equal(sq_store_series_append(s, q, &x, errbuf, sizeof(errbuf)), -EPERM);
    assert_string_equal(errbuf, "run 1 is queued: seconds are appended only while it runs");
    assert_int_equal(sq_store_series_append(s, fin, &x, errbuf, sizeof(errbuf)), -EPERM);
    assert_int_equal(sq_store_series_append(s, 999, &x, errbuf, sizeof(errbuf)), -ENOENT);
    assert_int_equal(sq_store_series_append(s, run, &x, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(sq_store_series_append(s, run, &x, errbuf, sizeof(errbuf)), -EEXIST);
    assert_string_equal(errbuf, "run 2 already has second 0");
    x.idx = -1;
    assert_int_equal(sq_store_series_append(s, run, &x, errbuf, sizeof(errbuf)), -EINVAL);
    x.idx = 1;
    x.extra = "{not json";
    assert_int_equal(sq_store_series_append(s, run, &x, errbuf, sizeof(errbuf)), -EINVAL);
    assert_non_null(strstr(errbuf, "extra is not valid JSON"));
    x.extra = NULL;
    x.idx = 5; /* a gap is fine (a second the engine skipped) */
    assert_int_equal(sq_store_series_append(s, run, &x, errbuf, sizeof(errbuf)), 0);

    /* create: a request that is JSON, a known kind */
    int64_t id = -7;
    struct sq_store_new_run nr = {SQ_STORE_QUICK, "x", "", "not json"};
    assert_int_equal(sq_store_run_create(s, &nr, &id, errbuf, sizeof(errbuf)), -EINVAL);
    assert_string_equal(errbuf, "the run's request is not valid JSON");
    assert_int_equal(id, -7);
    nr.request = NULL;
    assert_int_equal(sq_store_run_create(s, &nr, &id, errbuf, sizeof(errbuf)), -EINVAL);
    nr.request = "{}";
    nr.kind = (enum sq_store_kind)7;
    assert_int_equal(sq_store_run_create(s, &nr, &id, errbuf, sizeof(errbuf)), -EINVAL);

    /* A queued run may be stopped (cancelled) or fail to start; then nothing moves it. */
    assert_int_equal(sq_store_run_end(s, q, &stop_end, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(status_of(s, q), SQ_STORE_STOPPED);
    struct sq_store_run r;
    assert_int_equal(sq_store_run_get(s, q, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.started_ms, 0);
    assert_true(r.ended_ms > 0);
    sq_store_run_dispose(&r);
    assert_int_equal(sq_store_run_start(s, q, errbuf, sizeof(errbuf)), -EPERM);
    int64_t q2 = create_run(s, SQ_STORE_QUICK, "cannot start");
    struct sq_store_end failed = {.status = SQ_STORE_FAILED, .reason = "no such host"};
    assert_int_equal(sq_store_run_end(s, q2, &failed, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(sq_store_run_end(s, q2, &failed, errbuf, sizeof(errbuf)), -EPERM);
    assert_string_equal(errbuf, "run 4 is failed: it cannot become failed");

    /* A failed running run may keep a partial result. */
    failed.doc = result_doc;
    failed.doc_len = strlen(result_doc);
    assert_int_equal(sq_store_run_end(s, run, &failed, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(sq_store_result_get(s, run, &res, errbuf, sizeof(errbuf)), 0);
    sq_store_result_dispose(&res);
    assert_int_equal(sq_store_check(s, errbuf, sizeof(errbuf)), 0);
    sq_store_close(s);
}

static void list_pages_newest_first(void **state)
{
    (void)state;
    struct sq_store *s = open_ok(path_in("d"), &fake_opts);
    /* 25 runs, one a minute; every 5th finished, every 7th failed, the rest queued. */
    for (int i = 1; i <= 25; i++) {
        fake_now += 60000;
        int64_t id = create_run(s, SQ_STORE_QUICK, "r");
        assert_int_equal(id, i);
        if (i % 5 == 0) {
            assert_int_equal(sq_store_run_start(s, id, errbuf, sizeof(errbuf)), 0);
            end_run(s, id, SQ_STORE_FINISHED, true);
        } else if (i % 7 == 0) {
            end_run(s, id, SQ_STORE_FAILED, false);
        }
    }
    int64_t t12 = INT64_C(1767225600000) + 12 * 60000;

    /* Every run, in pages of 10: 25..16, 15..6, 5..1. */
    int64_t before = 0, want = 25;
    int pages = 0;
    for (;;) {
        struct sq_store_query q = {.limit = 10, .before_id = before};
        struct sq_store_runs l;
        assert_int_equal(sq_store_run_list(s, &q, &l, errbuf, sizeof(errbuf)), 0);
        pages++;
        for (size_t i = 0; i < l.n; i++) {
            assert_int_equal(l.v[i].id, want--);
            assert_null(l.v[i].request); /* lists stay light */
            assert_string_equal(l.v[i].target, "http://127.0.0.1:1/fast");
        }
        bool more = l.more;
        if (l.n)
            before = l.v[l.n - 1].id;
        assert_int_equal(l.n, pages < 3 ? 10 : 5);
        sq_store_runs_dispose(&l);
        if (!more)
            break;
    }
    assert_int_equal(pages, 3);
    assert_int_equal(want, 0);

    /* Exactly one page: more is false. */
    struct sq_store_query q = {.limit = 25};
    struct sq_store_runs l;
    assert_int_equal(sq_store_run_list(s, &q, &l, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(l.n, 25);
    assert_false(l.more);
    sq_store_runs_dispose(&l);

    /* By status, and two statuses at once. */
    q = (struct sq_store_query){.status_mask = SQ_STORE_STATUS_BIT(SQ_STORE_FINISHED)};
    assert_int_equal(sq_store_run_list(s, &q, &l, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(l.n, 5);
    for (size_t i = 0; i < l.n; i++) {
        assert_int_equal(l.v[i].id, 25 - 5 * (int64_t)i);
        assert_int_equal(l.v[i].status, SQ_STORE_FINISHED);
        assert_true(l.v[i].has_result);
        assert_int_equal(l.v[i].p99_us, 302);
    }
    sq_store_runs_dispose(&l);
    q.status_mask |= SQ_STORE_STATUS_BIT(SQ_STORE_FAILED);
    q.limit = 4;
    q.before_id = 20;
    assert_int_equal(sq_store_run_list(s, &q, &l, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(l.n, 4); /* 15, 14, 10, 7; then 5 on the next page */
    assert_true(l.more);
    assert_int_equal(l.v[0].id, 15);
    assert_int_equal(l.v[1].id, 14);
    assert_int_equal(l.v[2].id, 10);
    assert_int_equal(l.v[3].id, 7);
    sq_store_runs_dispose(&l);

    /* By time: created before run 12's minute. */
    q = (struct sq_store_query){.before_ms = t12, .limit = 100};
    assert_int_equal(sq_store_run_list(s, &q, &l, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(l.n, 11);
    assert_int_equal(l.v[0].id, 11);
    sq_store_runs_dispose(&l);

    /* Defaults, and refusals. */
    assert_int_equal(sq_store_run_list(s, NULL, &l, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(l.n, 25);
    sq_store_runs_dispose(&l);
    q = (struct sq_store_query){.limit = SQ_STORE_LIST_MAX + 1};
    assert_int_equal(sq_store_run_list(s, &q, &l, errbuf, sizeof(errbuf)), -EINVAL);
    assert_null(l.v);
    q = (struct sq_store_query){.status_mask = 1u << SQ_STORE_STATUS__COUNT};
    assert_int_equal(sq_store_run_list(s, &q, &l, errbuf, sizeof(errbuf)), -EINVAL);
    sq_store_runs_dispose(NULL);

    int64_t counts[SQ_STORE_STATUS__COUNT];
    assert_int_equal(sq_store_count(s, counts, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(counts[SQ_STORE_FINISHED], 5);
    assert_int_equal(counts[SQ_STORE_FAILED], 3);
    assert_int_equal(counts[SQ_STORE_QUEUED], 17);
    assert_int_equal(counts[SQ_STORE_RUNNING], 0);
    sq_store_close(s);
}

static void delete_runs(void **state)
{
    (void)state;
    struct sq_store *s = open_ok(path_in("d"), NULL);
    int64_t a = finished_run(s, "a"), b = finished_run(s, "b");
    int64_t live = create_run(s, SQ_STORE_QUICK, "live");
    assert_int_equal(sq_store_run_delete(s, a, errbuf, sizeof(errbuf)), 0);
    struct sq_store_run r;
    assert_int_equal(sq_store_run_get(s, a, &r, errbuf, sizeof(errbuf)), -ENOENT);
    assert_int_equal(r.id, 0);
    struct sq_store_series se;
    assert_int_equal(sq_store_series_get(s, a, 0, &se, errbuf, sizeof(errbuf)), -ENOENT);
    struct sq_store_result res;
    assert_int_equal(sq_store_result_get(s, a, &res, errbuf, sizeof(errbuf)), -ENOENT);
    assert_string_equal(errbuf, "no run 1");
    assert_int_equal(sq_store_run_delete(s, a, errbuf, sizeof(errbuf)), -ENOENT);
    assert_int_equal(sq_store_run_delete(s, live, errbuf, sizeof(errbuf)), -EPERM);
    assert_string_equal(errbuf, "run 3 is queued: stop it before deleting it");
    assert_int_equal(sq_store_run_start(s, live, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(sq_store_run_delete(s, live, errbuf, sizeof(errbuf)), -EPERM);
    assert_int_equal(status_of(s, b), SQ_STORE_FINISHED);
    sq_store_close(s);

    char *db = path_in("d/squall.db");
    assert_int_equal(raw_int(db, "SELECT count(*) FROM series WHERE run_id = 1"), 0);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM results WHERE run_id = 1"), 0);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM series WHERE run_id = 2"), 3);

    /* Ids are never reused, even for the newest run deleted. */
    s = open_ok(path_in("d"), NULL);
    assert_int_equal(sq_store_run_delete(s, live, errbuf, sizeof(errbuf)), 0); /* interrupted */
    assert_int_equal(create_run(s, SQ_STORE_QUICK, "next"), 4);
    sq_store_close(s);
}

/* ---- ends kept in memory ---- */

/* An end the file cannot take (another connection holds the write lock: every write is -EBUSY,
 * as a full disk makes it -ENOSPC) is kept: this handle shows it everywhere, with its result;
 * another handle sees the file; a retry writes it once the file can take it. */
static void end_kept_until_written(void **state)
{
    (void)state;
    struct sq_store_opts o = {.busy_timeout_ms = 50, .clock_ms = fake_clock};
    struct sq_store *s = open_ok(path_in("k"), &o);
    int64_t id = create_run(s, SQ_STORE_QUICK, "kept");
    int64_t other = finished_run(s, "other");
    assert_int_equal(sq_store_run_start(s, id, errbuf, sizeof(errbuf)), 0);
    append_ok(s, id, 0);
    char *db = path_in("k/squall.db");
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    struct sq_store_end e = {.status = SQ_STORE_FAILED,
                             .reason = "the store could not take the run's end",
                             .doc = result_doc,
                             .doc_len = strlen(result_doc),
                             .hist = hist_blob,
                             .hist_len = sizeof(hist_blob)};
    assert_int_equal(sq_store_run_end(s, id, &e, errbuf, sizeof(errbuf)), -EBUSY);
    fake_now += 1000;
    assert_int_equal(sq_store_run_end_later(s, id, &e, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(sq_store_pending(s), 1);
    /* once kept, not twice; and only a running or queued run */
    assert_int_equal(sq_store_run_end_later(s, id, &e, errbuf, sizeof(errbuf)), -EPERM);
    assert_int_equal(sq_store_run_end_later(s, other, &e, errbuf, sizeof(errbuf)), -EPERM);
    struct sq_store_run r;
    assert_int_equal(sq_store_run_get(s, id, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.status, SQ_STORE_FAILED);
    assert_string_equal(r.reason, "the store could not take the run's end");
    assert_int_equal(r.ended_ms, fake_now);
    assert_true(r.has_result);
    sq_store_run_dispose(&r);
    struct sq_store_result res;
    assert_int_equal(sq_store_result_get(s, id, &res, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(res.doc_len, strlen(result_doc));
    assert_string_equal(res.doc, result_doc);
    assert_memory_equal(res.hist, hist_blob, sizeof(hist_blob));
    assert_null(res.hist_uncorrected);
    sq_store_result_dispose(&res);
    int64_t counts[SQ_STORE_STATUS__COUNT];
    assert_int_equal(sq_store_count(s, counts, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(counts[SQ_STORE_RUNNING], 0);
    assert_int_equal(counts[SQ_STORE_FAILED], 1);
    assert_int_equal(counts[SQ_STORE_FINISHED], 1);
    struct sq_store_runs l;
    assert_int_equal(sq_store_run_list(s, NULL, &l, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[1].id, id);
    assert_int_equal(l.v[1].status, SQ_STORE_FAILED);
    sq_store_runs_dispose(&l);
    struct sq_store_query q = {.status_mask = SQ_STORE_STATUS_BIT(SQ_STORE_RUNNING)};
    assert_int_equal(sq_store_run_list(s, &q, &l, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(l.n, 0); /* it is not running any more */
    sq_store_runs_dispose(&l);
    /* the file: still running, seen by another handle */
    struct sq_store_opts ro = {.read_only = true};
    struct sq_store *r2 = open_ok(path_in("k"), &ro);
    assert_int_equal(status_of(r2, id), SQ_STORE_RUNNING);
    /* the delete writes the end first: it cannot yet */
    assert_int_equal(sq_store_run_delete(s, id, errbuf, sizeof(errbuf)), -EBUSY);
    assert_non_null(strstr(errbuf, "cannot take its end yet"));
    int64_t written = -1;
    assert_int_equal(sq_store_retry(s, &written, errbuf, sizeof(errbuf)), -EBUSY);
    assert_int_equal(written, 0);
    assert_int_equal(sq_store_pending(s), 1);
    /* the file can take it again */
    assert_int_equal(sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    fake_now += 5000;
    assert_int_equal(sq_store_retry(s, &written, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(written, id);
    assert_int_equal(sq_store_pending(s), 0);
    assert_int_equal(sq_store_run_get(r2, id, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.status, SQ_STORE_FAILED);
    assert_string_equal(r.reason, "the store could not take the run's end");
    assert_int_equal(r.ended_ms, fake_now - 5000); /* when it ended, not when it was written */
    assert_true(r.has_result);
    sq_store_run_dispose(&r);
    assert_int_equal(sq_store_result_get(r2, id, &res, errbuf, sizeof(errbuf)), 0);
    assert_string_equal(res.doc, result_doc);
    sq_store_result_dispose(&res);
    sq_store_close(r2);
    assert_int_equal(sq_store_retry(s, &written, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(written, 0);

    /* kept again (a second run), and written by the delete itself */
    int64_t id2 = create_run(s, SQ_STORE_QUICK, "kept2");
    assert_int_equal(sq_store_run_start(s, id2, errbuf, sizeof(errbuf)), 0);
    e.doc = NULL;
    e.doc_len = 0;
    e.hist = NULL;
    assert_int_equal(sq_store_run_end_later(s, id2, &e, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(sq_store_result_get(s, id2, &res, errbuf, sizeof(errbuf)), -ENOENT);
    assert_string_equal(errbuf, "run 3 (failed) has no result");
    assert_int_equal(sq_store_run_delete(s, id2, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(sq_store_pending(s), 0);
    assert_int_equal(sq_store_run_get(s, id2, &r, errbuf, sizeof(errbuf)), -ENOENT);
    /* one left kept at close is forgotten: the next open finds the run interrupted */
    int64_t id3 = create_run(s, SQ_STORE_QUICK, "kept3");
    assert_int_equal(sq_store_run_start(s, id3, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(sq_store_run_end_later(s, id3, &e, errbuf, sizeof(errbuf)), 0);
    sq_store_close(s);
    s = open_ok(path_in("k"), &o);
    assert_int_equal(status_of(s, id3), SQ_STORE_INTERRUPTED);
    sq_store_close(s);
}

/* ---- recovery ---- */

static void recovery_on_open(void **state)
{
    (void)state;
    struct sq_store *s = open_ok(path_in("d"), &fake_opts);
    int64_t fin = finished_run(s, "done");
    int64_t q = create_run(s, SQ_STORE_QUICK, "waiting");
    int64_t run = create_run(s, SQ_STORE_QUICK, "going");
    fake_now += 1000;
    assert_int_equal(sq_store_run_start(s, run, errbuf, sizeof(errbuf)), 0);
    append_ok(s, run, 0);
    append_ok(s, run, 1);
    sq_store_close(s); /* as if the daemon stopped without ending them */

    fake_now += 60000;
    s = open_ok(path_in("d"), &fake_opts);
    assert_int_equal(sq_store_recovered(s), 2);
    struct sq_store_run r;
    assert_int_equal(sq_store_run_get(s, run, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.status, SQ_STORE_INTERRUPTED);
    assert_int_equal(r.ended_ms, r.started_ms + 2000); /* the end of its last second */
    assert_int_equal(r.sent, 2001);
    assert_non_null(strstr(r.reason, "the seconds stored until then are kept"));
    sq_store_run_dispose(&r);
    assert_int_equal(sq_store_run_get(s, q, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.status, SQ_STORE_INTERRUPTED);
    assert_int_equal(r.ended_ms, 0);
    assert_int_equal(r.sent, -1);
    assert_non_null(strstr(r.reason, "queued"));
    sq_store_run_dispose(&r);
    assert_int_equal(status_of(s, fin), SQ_STORE_FINISHED);
    struct sq_store_series se;
    assert_int_equal(sq_store_series_get(s, run, 0, &se, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(se.n, 2);
    sq_store_series_dispose(&se);
    sq_store_close(s);
    s = open_ok(path_in("d"), &fake_opts);
    assert_int_equal(sq_store_recovered(s), 0); /* nothing left to recover */
    sq_store_close(s);
}

static void assert_finished_intact(struct sq_store *s, int64_t id)
{
    struct sq_store_run r;
    assert_int_equal(sq_store_run_get(s, id, &r, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(r.status, SQ_STORE_FINISHED);
    assert_int_equal(r.sent, 3003);
    sq_store_run_dispose(&r);
    struct sq_store_result res;
    assert_int_equal(sq_store_result_get(s, id, &res, errbuf, sizeof(errbuf)), 0);
    assert_string_equal(res.doc, result_doc);
    assert_memory_equal(res.hist, hist_blob, sizeof(hist_blob));
    assert_memory_equal(res.hist_uncorrected, hist_unc_blob, sizeof(hist_unc_blob));
    sq_store_result_dispose(&res);
    struct sq_store_series se;
    assert_int_equal(sq_store_series_get(s, id, 0, &se, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(se.n, 3);
    sq_store_series_dispose(&se);
}

static off_t file_size(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? sb.st_size : -1;
}

/* A child writes a finished run and three seconds of a live one, then dies inside a big write
 * transaction whose pages are already in the WAL: reopening loses that transaction only. */
static void crash_mid_transaction(void **state)
{
    (void)state;
    char *dir = path_in("d");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        struct sq_store *s;
        char e[256];
        if (sq_store_open(dir, NULL, &s, e, sizeof(e)) < 0)
            _exit(10);
        int64_t fin = 0, run = 0;
        struct sq_store_end end = {.status = SQ_STORE_FINISHED,
                                   .doc = result_doc,
                                   .doc_len = strlen(result_doc),
                                   .hist = hist_blob,
                                   .hist_len = sizeof(hist_blob),
                                   .hist_uncorrected = hist_unc_blob,
                                   .hist_uncorrected_len = sizeof(hist_unc_blob)};
        struct sq_store_new_run nr = {SQ_STORE_QUICK, "", "", "{}"};
        if (sq_store_run_create(s, &nr, &fin, e, sizeof(e)) < 0 ||
            sq_store_run_start(s, fin, e, sizeof(e)) < 0)
            _exit(11);
        for (int i = 0; i < 3; i++) {
            struct sq_store_second x = second(i);
            if (sq_store_series_append(s, fin, &x, e, sizeof(e)) < 0)
                _exit(12);
        }
        if (sq_store_run_end(s, fin, &end, e, sizeof(e)) < 0 ||
            sq_store_run_create(s, &nr, &run, e, sizeof(e)) < 0 ||
            sq_store_run_start(s, run, e, sizeof(e)) < 0)
            _exit(13);
        for (int i = 0; i < 3; i++) {
            struct sq_store_second x = second(i);
            if (sq_store_series_append(s, run, &x, e, sizeof(e)) < 0)
                _exit(14);
        }
        /* The fourth second, as a transaction far bigger than the page cache, so SQLite
         * spills its pages into the WAL before the commit that never comes. */
        char wal[600];
        snprintf(wal, sizeof(wal), "%s-wal", sq_store_path(s));
        off_t before = file_size(wal);
        sqlite3 *h;
        if (sqlite3_open(sq_store_path(s), &h) != SQLITE_OK ||
            sqlite3_exec(h, "PRAGMA cache_size = 10; BEGIN IMMEDIATE", NULL, NULL, NULL) !=
                SQLITE_OK)
            _exit(15);
        static char sql[4096];
        for (int i = 3; i < 2003; i++) {
            snprintf(sql, sizeof(sql),
                     "INSERT INTO series VALUES (%lld, %d, 4, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1,"
                     " 1, json_object('pad', printf('%%.2000c', 'x')))",
                     (long long)run, i);
            if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK)
                _exit(16);
        }
        off_t after = file_size(wal);
        int64_t report[3] = {fin, run, after > before};
        if (write(fds[1], report, sizeof(report)) != (ssize_t)sizeof(report))
            _exit(17);
        _exit(0); /* no COMMIT, no close */
    }
    close(fds[1]);
    int64_t report[3] = {0};
    assert_int_equal(read(fds[0], report, sizeof(report)), sizeof(report));
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(report[2], 1); /* the uncommitted transaction had reached the WAL */

    struct sq_store *s = open_ok(dir, NULL);
    assert_int_equal(sq_store_recovered(s), 1);
    assert_int_equal(sq_store_check(s, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(status_of(s, report[1]), SQ_STORE_INTERRUPTED);
    struct sq_store_series se;
    assert_int_equal(sq_store_series_get(s, report[1], 0, &se, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(se.n, 3); /* what was committed, and nothing of the transaction */
    for (size_t i = 0; i < se.n; i++)
        assert_int_equal(se.v[i].idx, i);
    sq_store_series_dispose(&se);
    assert_finished_intact(s, report[0]);
    sq_store_close(s);
}

/* A child appends a second at a time, telling the parent after each; the parent SIGKILLs it
 * at several points. Every second the child was told was stored is there after the reopen. */
static void crash_sigkill_mid_run(void **state)
{
    (void)state;
    static const int kill_after[] = {3, 11, 40};
    char *dir = path_in("d");
    int64_t fin;
    struct sq_store *s = open_ok(dir, NULL);
    fin = finished_run(s, "before");
    sq_store_close(s);
    for (size_t k = 0; k < SQ_ARRAY_LEN(kill_after); k++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            char e[256];
            int64_t run;
            struct sq_store_new_run nr = {SQ_STORE_QUICK, "victim", "", "{}"};
            if (sq_store_open(dir, NULL, &s, e, sizeof(e)) < 0 ||
                sq_store_run_create(s, &nr, &run, e, sizeof(e)) < 0 ||
                sq_store_run_start(s, run, e, sizeof(e)) < 0 ||
                write(fds[1], &run, sizeof(run)) != sizeof(run))
                _exit(10);
            for (int i = 0; i < 100000; i++) { /* bounded: the parent kills it long before */
                struct sq_store_second x = second(i);
                x.extra = "{\"status\":{\"2xx\":990,\"5xx\":10}}";
                if (sq_store_series_append(s, run, &x, e, sizeof(e)) < 0)
                    _exit(11);
                char one = 1;
                if (write(fds[1], &one, 1) != 1)
                    _exit(12);
            }
            _exit(13);
        }
        close(fds[1]);
        int64_t run = 0;
        assert_int_equal(read(fds[0], &run, sizeof(run)), sizeof(run));
        int acked = 0;
        while (acked < kill_after[k]) {
            struct pollfd p = {fds[0], POLLIN, 0};
            assert_int_equal(poll(&p, 1, 20000), 1);
            char buf[64];
            ssize_t got = read(fds[0], buf, sizeof(buf));
            assert_true(got > 0);
            acked += (int)got;
        }
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        char buf[4096];
        ssize_t got;
        while ((got = read(fds[0], buf, sizeof(buf))) > 0)
            acked += (int)got; /* told before the kill landed */
        close(fds[0]);

        s = open_ok(dir, NULL);
        assert_int_equal(sq_store_recovered(s), 1);
        assert_int_equal(sq_store_check(s, errbuf, sizeof(errbuf)), 0);
        struct sq_store_run r;
        assert_int_equal(sq_store_run_get(s, run, &r, errbuf, sizeof(errbuf)), 0);
        assert_int_equal(r.status, SQ_STORE_INTERRUPTED);
        sq_store_run_dispose(&r);
        struct sq_store_series se;
        assert_int_equal(sq_store_series_get(s, run, 0, &se, errbuf, sizeof(errbuf)), 0);
        assert_true(se.n >= (size_t)acked);     /* nothing it was told is lost */
        assert_true(se.n <= (size_t)acked + 1); /* at most the one in flight got in */
        for (size_t i = 0; i < se.n; i++)
            assert_int_equal(se.v[i].idx, i);
        assert_string_equal(se.v[se.n - 1].extra, "{\"status\":{\"2xx\":990,\"5xx\":10}}");
        sq_store_series_dispose(&se);
        assert_finished_intact(s, fin);
        sq_store_close(s);
    }
}

/* ---- the stock tool ---- */

static void sqlite3_cli_reads_it(void **state)
{
    (void)state;
    char *dir = path_in("d");
    struct sq_store *s = open_ok(dir, NULL);
    finished_run(s, "one");
    int64_t live = create_run(s, SQ_STORE_QUICK, "two");
    assert_int_equal(sq_store_run_start(s, live, errbuf, sizeof(errbuf)), 0);
    append_ok(s, live, 0);

    /* While the store is open and its WAL holds the latest commits. */
    char cmd[1024], out[256];
    snprintf(cmd, sizeof(cmd),
             "sqlite3 -readonly '%s' 'PRAGMA integrity_check; PRAGMA user_version;"
             " SELECT group_concat(status) FROM (SELECT status FROM runs ORDER BY id);"
             " SELECT count(*) FROM series; SELECT json_extract(doc, \"$.latency.p99_us\")"
             " FROM results' 2>&1",
             sq_store_path(s));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    if (rc != 0)
        fail_msg("%s -> %d: %s", cmd, rc, out);
    assert_string_equal(out, "ok\n2\nfinished,running\n4\n302\n");
    sq_store_close(s);

    /* Closed (checkpointed): the tool sees the recovered file the same way. */
    s = open_ok(dir, NULL);
    sq_store_close(s);
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_string_equal(out, "ok\n2\nfinished,interrupted\n4\n302\n");
}

static void check_finds_corruption(void **state)
{
    (void)state;
    char *db = path_in("c.db");
    struct sq_store *s = open_ok(db, NULL);
    for (int i = 0; i < 40; i++)
        finished_run(s, "x");
    assert_int_equal(sq_store_check(s, errbuf, sizeof(errbuf)), 0);
    sq_store_close(s);
    off_t size = file_size(db);
    assert_true(size > 8 * 4096);
    int fd = open(db, O_WRONLY);
    assert_true(fd >= 0);
    char junk[4096];
    memset(junk, 0x5a, sizeof(junk));
    for (off_t off = 2 * 4096; off + 4096 <= size; off += 3 * 4096)
        assert_int_equal(pwrite(fd, junk, sizeof(junk), off), sizeof(junk));
    close(fd);
    s = NULL;
    int r = sq_store_open(db, NULL, &s, errbuf, sizeof(errbuf));
    if (r == 0) {
        r = sq_store_check(s, errbuf, sizeof(errbuf));
        sq_store_close(s);
    }
    assert_int_equal(r, -EIO);
    assert_non_null(strstr(errbuf, "c.db"));
}

/* ---- retention ---- */

static int64_t count_runs(struct sq_store *s)
{
    int64_t c[SQ_STORE_STATUS__COUNT], n = 0;
    assert_int_equal(sq_store_count(s, c, errbuf, sizeof(errbuf)), 0);
    for (int i = 0; i < SQ_STORE_STATUS__COUNT; i++)
        n += c[i];
    return n;
}

static void retention_by_count(void **state)
{
    (void)state;
    struct sq_store *s = open_ok(path_in("d"), NULL);
    int64_t old_live = create_run(s, SQ_STORE_QUICK, "old but running");
    assert_int_equal(sq_store_run_start(s, old_live, errbuf, sizeof(errbuf)), 0);
    int64_t old_queued = create_run(s, SQ_STORE_QUICK, "old but queued");
    for (int i = 0; i < 30; i++)
        finished_run(s, "r");
    struct sq_store_retention keep = {.keep_runs = 10};
    struct sq_store_prune_stats st;
    assert_int_equal(sq_store_prune(s, &keep, &st, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(st.runs_deleted, 20);
    assert_int_equal(st.rows_deleted, 60);
    assert_true(st.transactions >= 1);
    assert_int_equal(count_runs(s), 12);
    assert_int_equal(status_of(s, old_live), SQ_STORE_RUNNING); /* never touched */
    assert_int_equal(status_of(s, old_queued), SQ_STORE_QUEUED);
    struct sq_store_query q = {.limit = 100};
    struct sq_store_runs l;
    assert_int_equal(sq_store_run_list(s, &q, &l, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(l.n, 12);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(l.v[i].id, 32 - (int64_t)i); /* the newest ten */
    sq_store_runs_dispose(&l);

    /* Again: nothing more to do. Defaults (200 runs): nothing either. */
    assert_int_equal(sq_store_prune(s, &keep, &st, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(st.runs_deleted, 0);
    assert_int_equal(sq_store_prune(s, NULL, NULL, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(count_runs(s), 12);
    keep.keep_runs = -1;
    assert_int_equal(sq_store_prune(s, &keep, &st, errbuf, sizeof(errbuf)), -EINVAL);
    keep = (struct sq_store_retention){0}; /* no limit at all */
    assert_int_equal(sq_store_prune(s, &keep, &st, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(count_runs(s), 12);
    assert_int_equal(sq_store_check(s, errbuf, sizeof(errbuf)), 0);
    sq_store_close(s);
}

static void retention_by_age(void **state)
{
    (void)state;
    struct sq_store *s = open_ok(path_in("d"), &fake_opts);
    int64_t day = 86400000, t0 = fake_now;
    for (int i = 0; i < 10; i++) { /* one run a day, days 0..9 */
        fake_now = t0 + i * day;
        finished_run(s, "daily");
    }
    fake_now = t0 + 10 * day; /* keep 3 days: runs of days 7, 8, 9 */
    struct sq_store_retention keep = {.keep_days = 3};
    struct sq_store_prune_stats st;
    assert_int_equal(sq_store_prune(s, &keep, &st, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(st.runs_deleted, 7);
    assert_int_equal(count_runs(s), 3);
    struct sq_store_runs l;
    assert_int_equal(sq_store_run_list(s, NULL, &l, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.v[2].created_ms, t0 + 7 * day);
    sq_store_runs_dispose(&l);

    /* Both limits: a run goes when it is outside either. */
    keep = (struct sq_store_retention){.keep_runs = 2, .keep_days = 3};
    assert_int_equal(sq_store_prune(s, &keep, &st, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(count_runs(s), 2);
    sq_store_close(s);
}

/* Pruning in batches: many runs over many transactions, and one run bigger than a batch. */
static void prune_in_batches(void **state)
{
    (void)state;
    struct sq_store *s = open_ok(path_in("d"), NULL);
    int64_t big = create_run(s, SQ_STORE_QUICK, "long");
    assert_int_equal(sq_store_run_start(s, big, errbuf, sizeof(errbuf)), 0);
    for (int i = 0; i < 1300; i++)
        append_ok(s, big, i);
    end_run(s, big, SQ_STORE_FINISHED, true);
    sq_store_close(s);
    /* 400 finished runs of 3 seconds each (4 rows), written in one go. */
    raw_exec(path_in("d/squall.db"),
             "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400)"
             " INSERT INTO runs (name, kind, status, created_at, target, request)"
             " SELECT 'r', 'quick', 'finished', x, '', '{}' FROM c;"
             "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < 2)"
             " INSERT INTO series SELECT id, x, x + 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1,"
             " json_object('pad', printf('%.200c', 'x')) FROM runs, c WHERE name = 'r';"
             "INSERT INTO results (run_id, doc, bytes) SELECT id, d, length(d) FROM runs,"
             " (SELECT json_object('pad', printf('%.5000c', 'x')) AS d) WHERE name = 'r';");
    s = open_ok(path_in("d"), NULL);
    int64_t size_before = 0, size_after = 0;
    assert_int_equal(sq_store_size(s, &size_before, errbuf, sizeof(errbuf)), 0);

    struct sq_store_retention keep = {.keep_runs = 1, .batch = 300};
    struct sq_store_prune_stats st;
    assert_int_equal(sq_store_prune(s, &keep, &st, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(st.runs_deleted, 400);
    assert_int_equal(st.rows_deleted, 1300 + 399 * 3);
    /* 1300 rows of the big run in chunks of <= 300 (5 transactions), then 399 runs of cost 5
     * (the run, 3 seconds, a result of one page). */
    assert_true(st.transactions >= 5 + (399 * 5 + 299) / 300);
    assert_true(st.max_txn_us > 0);
    assert_int_equal(count_runs(s), 1);
    assert_int_equal(sq_store_check(s, errbuf, sizeof(errbuf)), 0);
    sq_store_close(s);
    /* Free pages went back: after a checkpoint the file is smaller. */
    s = open_ok(path_in("d"), NULL);
    sq_store_close(s);
    s = open_ok(path_in("d"), NULL);
    assert_int_equal(sq_store_size(s, &size_after, errbuf, sizeof(errbuf)), 0);
    assert_true(size_after < size_before / 2);
    assert_int_equal(raw_int(path_in("d/squall.db"), "PRAGMA freelist_count"), 0);
    sq_store_close(s);
}

/* The checkpointer thread keeps the WAL short while a run appends; nothing is lost. */
static void checkpointer_keeps_wal_short(void **state)
{
    (void)state;
    struct sq_store_opts o = {.checkpoint_pages = 16};
    struct sq_store *s = open_ok(path_in("d"), &o);
    int64_t id = create_run(s, SQ_STORE_QUICK, "long");
    assert_int_equal(sq_store_run_start(s, id, errbuf, sizeof(errbuf)), 0);
    off_t longest = 0;
    char wal[600];
    snprintf(wal, sizeof(wal), "%s-wal", sq_store_path(s));
    /* Rounds of 40 seconds (over 100 WAL pages), each waiting for a checkpoint, as a run at one
     * append a second would give the checkpointer time to. */
    for (int round = 0; round < 10; round++) {
        int64_t before = sq_store_checkpoints(s);
        for (int i = 0; i < 40; i++) {
            append_ok(s, id, round * 40 + i);
            off_t n = file_size(wal);
            longest = n > longest ? n : longest;
        }
        for (int w = 0; w < 500 && sq_store_checkpoints(s) == before; w++)
            usleep(10000);
        assert_true(sq_store_checkpoints(s) > before);
        /* ... and until it is done: the count stays put for 100 ms. */
        for (int64_t seen = -1; seen != sq_store_checkpoints(s);) {
            seen = sq_store_checkpoints(s);
            usleep(100000);
        }
    }
    /* The WAL starts over after each checkpoint: it never holds much more than a round (400
     * appends without checkpoints would make it about 5 MB). */
    assert_true(longest < 256 * 4096);
    struct sq_store_series se;
    assert_int_equal(sq_store_series_get(s, id, 0, &se, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(se.n, 400);
    sq_store_series_dispose(&se);
    assert_int_equal(sq_store_check(s, errbuf, sizeof(errbuf)), 0);
    sq_store_close(s);
    assert_int_equal(file_size(wal), -1); /* the last close folds the WAL in and removes it */
}

/* ---- threads (TSan) ---- */

struct shared {
    struct sq_store *s;
    int64_t live;
    atomic_bool done;
    atomic_int failures;
};

static void *writer(void *arg)
{
    struct shared *sh = arg;
    char e[256];
    for (int i = 0; i < 200; i++) {
        struct sq_store_second x = second(i);
        if (sq_store_series_append(sh->s, sh->live, &x, e, sizeof(e)) != 0)
            atomic_fetch_add(&sh->failures, 1);
    }
    atomic_store(&sh->done, true);
    return NULL;
}

static void *reader(void *arg)
{
    struct shared *sh = arg;
    char e[256];
    while (!atomic_load(&sh->done)) {
        struct sq_store_runs l;
        struct sq_store_series se;
        struct sq_store_run r;
        int64_t c[SQ_STORE_STATUS__COUNT], size;
        if (sq_store_run_list(sh->s, NULL, &l, e, sizeof(e)) != 0 ||
            sq_store_series_get(sh->s, sh->live, 0, &se, e, sizeof(e)) != 0 ||
            sq_store_run_get(sh->s, sh->live, &r, e, sizeof(e)) != 0 ||
            sq_store_count(sh->s, c, e, sizeof(e)) != 0 || sq_store_size(sh->s, &size, e, 256))
            atomic_fetch_add(&sh->failures, 1);
        else if (r.status != SQ_STORE_RUNNING)
            atomic_fetch_add(&sh->failures, 1);
        sq_store_runs_dispose(&l);
        sq_store_series_dispose(&se);
        sq_store_run_dispose(&r);
    }
    return NULL;
}

static void *churner(void *arg)
{
    struct shared *sh = arg;
    char e[256];
    struct sq_store_retention keep = {.keep_runs = 5, .batch = 4};
    while (!atomic_load(&sh->done)) {
        int64_t id;
        struct sq_store_new_run nr = {SQ_STORE_QUICK, "churn", "", "{}"};
        struct sq_store_end end = {
            .status = SQ_STORE_FINISHED, .doc = result_doc, .doc_len = strlen(result_doc)};
        struct sq_store_second x = second(0);
        if (sq_store_run_create(sh->s, &nr, &id, e, sizeof(e)) != 0 ||
            sq_store_run_start(sh->s, id, e, sizeof(e)) != 0 ||
            sq_store_series_append(sh->s, id, &x, e, sizeof(e)) != 0 ||
            sq_store_run_end(sh->s, id, &end, e, sizeof(e)) != 0 ||
            sq_store_prune(sh->s, &keep, NULL, e, sizeof(e)) != 0)
            atomic_fetch_add(&sh->failures, 1);
    }
    return NULL;
}

static void threads_share_a_store(void **state)
{
    (void)state;
    struct sq_store_opts o = {.checkpoint_pages = 8}; /* the checkpointer runs all along */
    struct shared sh = {.s = open_ok(path_in("d"), &o)};
    atomic_init(&sh.done, false);
    atomic_init(&sh.failures, 0);
    sh.live = create_run(sh.s, SQ_STORE_QUICK, "live");
    assert_int_equal(sq_store_run_start(sh.s, sh.live, errbuf, sizeof(errbuf)), 0);
    pthread_t t[4];
    assert_int_equal(pthread_create(&t[0], NULL, writer, &sh), 0);
    assert_int_equal(pthread_create(&t[1], NULL, reader, &sh), 0);
    assert_int_equal(pthread_create(&t[2], NULL, reader, &sh), 0);
    assert_int_equal(pthread_create(&t[3], NULL, churner, &sh), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&sh.failures), 0);
    struct sq_store_series se;
    assert_int_equal(sq_store_series_get(sh.s, sh.live, 0, &se, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(se.n, 200);
    sq_store_series_dispose(&se);
    assert_int_equal(status_of(sh.s, sh.live), SQ_STORE_RUNNING); /* pruning never took it */
    assert_true(count_runs(sh.s) <= 6);
    /* The WAL hook woke the checkpointer; on a busy machine its thread may not have had a CPU
     * yet when the others are done, so it is given up to 10 s to have been round. */
    for (int i = 0; i < 1000 && sq_store_checkpoints(sh.s) == 0; i++)
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    assert_true(sq_store_checkpoints(sh.s) > 0);
    assert_int_equal(sq_store_check(sh.s, errbuf, sizeof(errbuf)), 0);
    sq_store_close(sh.s);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_names),
        T(open_creates_data_dir),
        T(open_file_path),
        T(open_twice_is_busy),
        T(open_refuses_foreign_files),
        T(newer_schema_refused),
        T(migrates_v1),
        T(failed_migration_rolls_back),
        T(run_lifecycle),
        T(illegal_transitions),
        T(list_pages_newest_first),
        T(delete_runs),
        T(end_kept_until_written),
        T(recovery_on_open),
        T(crash_mid_transaction),
        T(crash_sigkill_mid_run),
        T(sqlite3_cli_reads_it),
        T(check_finds_corruption),
        T(retention_by_count),
        T(retention_by_age),
        T(prune_in_batches),
        T(checkpointer_keeps_wal_short),
        T(threads_share_a_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
