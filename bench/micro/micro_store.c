/* bench/micro/micro_store.c - what the run store costs the daemon: one per-second append, one
 * durable state change, a list of 200 runs, the read of a 50 KB result, and pruning 10,000 runs
 * while a writer appends (the longest pruning transaction and the writer's worst wait).
 *
 *     build/bench/micro_store [reps] [prune_runs] [batch]
 *
 * The store lives in a fresh directory under $TMPDIR (default /tmp): the figures are those of
 * that file system (fsync included). Medians of reps repetitions (default 9); prune_runs
 * defaults to 10000. Prints one line per measure. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "micro.h"
#include "base/clock.h"
#include "store/store.h"

static char err[512];

static void die(const char *what)
{
    fprintf(stderr, "micro_store: %s: %s\n", what, err);
    exit(1);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

static struct sq_store_second second(int64_t i)
{
    struct sq_store_second x = {
        .idx = i,
        .t_s = (double)(i + 1),
        .len_s = 1.0,
        .sent = 90000,
        .completed = 89990,
        .failed = 10,
        .errors = 10,
        .bytes = 9000000,
        .active = 64,
        .p50_us = 650,
        .p90_us = 900,
        .p99_us = 1400,
        .max_us = 9000,
        /* what a plan run might add: status classes and two checks */
        .extra = "{\"status\":{\"2xx\":89990,\"5xx\":0},\"checks\":{\"passed\":89990,"
                 "\"failed\":0},\"iterations\":44995}"};
    return x;
}

/* A result document of about len bytes: the real keys, then a series to pad it. */
static char *make_doc(size_t len)
{
    char *d = malloc(len + 256);
    size_t n = (size_t)sprintf(d, "{\"schema\":\"squall.result/1\",\"requests\":{\"sent\":900000,"
                                  "\"completed\":899900},\"rate\":{\"requests_per_s\":89990.5},"
                                  "\"latency\":{\"p99_us\":1400},\"errors\":{\"timeout\":100},"
                                  "\"series\":[");
    for (int i = 0; n < len - 160; i++)
        n += (size_t)sprintf(d + n,
                             "%s{\"t_s\":%d.0,\"len_s\":1.0,\"requests\":90000,\"completed\":"
                             "89990,\"p50_us\":650,\"p99_us\":1400,\"vus\":64}",
                             i ? "," : "", i + 1);
    strcpy(d + n, "]}");
    return d;
}

static int64_t live_id;
static atomic_bool stop;
static int64_t waits[100000];
static int nwaits;
static char wal_path[600];
static off_t wal_peak; /* the WAL's largest size seen by the writer during the prune */

/* The daemon's per-second writer, ten times faster: its worst wait is what pruning costs it. */
static void *writer(void *arg)
{
    struct sq_store *s = arg;
    char e[256];
    for (int64_t i = 1000000; !atomic_load(&stop) && nwaits < 100000; i++) {
        struct sq_store_second x = second(i);
        int64_t t0 = sq_now_ns();
        if (sq_store_series_append(s, live_id, &x, e, sizeof(e)) < 0) {
            fprintf(stderr, "micro_store: append during prune: %s\n", e);
            exit(1);
        }
        waits[nwaits++] = (sq_now_ns() - t0) / 1000;
        struct stat sb;
        if (stat(wal_path, &sb) == 0 && sb.st_size > wal_peak)
            wal_peak = sb.st_size;
        usleep(20000);
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    int prune_runs = argc > 2 ? atoi(argv[2]) : 10000;
    int64_t batch = argc > 3 ? atoll(argv[3]) : 0;
    if (reps <= 0 || reps > 101 || prune_runs < 200) {
        fprintf(stderr, "usage: micro_store [reps (1..101)] [prune_runs (>= 200)] [batch]\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/micro-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    struct sq_store *s;
    if (sq_store_open(dir, NULL, &s, err, sizeof(err)) < 0)
        die("open");

    /* 1. One second of series: reps x 200 appends to a running run. */
    struct sq_store_new_run nr = {SQ_STORE_QUICK, "bench", "http://127.0.0.1:8080/fast",
                                  "{\"quick\":{\"url\":\"http://127.0.0.1:8080/fast\","
                                  "\"connections\":64,\"duration\":\"10s\"}}"};
    if (sq_store_run_create(s, &nr, &live_id, err, sizeof(err)) < 0 ||
        sq_store_run_start(s, live_id, err, sizeof(err)) < 0)
        die("create");
    double app[101], dur[101], list[101], get[101];
    static int64_t one[101 * 200];
    int64_t idx = 0;
    for (int r = 0; r < reps; r++) {
        int64_t t0 = sq_now_ns();
        for (int i = 0; i < 200; i++) {
            struct sq_store_second x = second(idx++);
            int64_t a = sq_now_ns();
            if (sq_store_series_append(s, live_id, &x, err, sizeof(err)) < 0)
                die("append");
            one[r * 200 + i] = (sq_now_ns() - a) / 1000;
        }
        app[r] = (double)(sq_now_ns() - t0) / 200 / 1000.0;
    }
    qsort(one, (size_t)reps * 200, sizeof(one[0]), cmp_i64);
    size_t nall = (size_t)reps * 200;
    printf("micro_store: append one second %.1f us (median of %d x 200; single appends p99 %lld "
           "us, max %lld us: a WAL restart's header sync)\n",
           micro_median(app, reps), reps, (long long)one[nall * 99 / 100],
           (long long)one[nall - 1]);

    /* 2. A durable state change (fsync): create, start, end with a 50 KB result. */
    char *doc = make_doc(50 * 1024);
    static unsigned char hist[8192];
    for (size_t i = 0; i < sizeof(hist); i++)
        hist[i] = (unsigned char)(i * 131);
    struct sq_store_end end = {.status = SQ_STORE_FINISHED,
                               .doc = doc,
                               .doc_len = strlen(doc),
                               .hist = hist,
                               .hist_len = sizeof(hist)};
    int64_t ids[101];
    for (int r = 0; r < reps; r++) {
        int64_t t0 = sq_now_ns();
        if (sq_store_run_create(s, &nr, &ids[r], err, sizeof(err)) < 0 ||
            sq_store_run_start(s, ids[r], err, sizeof(err)) < 0 ||
            sq_store_run_end(s, ids[r], &end, err, sizeof(err)) < 0)
            die("state changes");
        dur[r] = (double)(sq_now_ns() - t0) / 3 / 1000.0;
    }
    printf("micro_store: durable state change %.0f us (median of %d x create/start/end with a "
           "%zu B result; synchronous=FULL commit)\n",
           micro_median(dur, reps), reps, strlen(doc));

    /* 3. Get a 50 KB result. */
    for (int r = 0; r < reps; r++) {
        struct sq_store_result res;
        int64_t t0 = sq_now_ns();
        for (int i = 0; i < 100; i++) {
            if (sq_store_result_get(s, ids[r], &res, err, sizeof(err)) < 0)
                die("result_get");
            sq_store_result_dispose(&res);
        }
        get[r] = (double)(sq_now_ns() - t0) / 100 / 1000.0;
    }
    printf("micro_store: get a result %.1f us (median of %d x 100; %zu B document + %zu B "
           "histogram)\n",
           micro_median(get, reps), reps, strlen(doc), sizeof(hist));

    /* 4. List 200 runs (one page): the store holds 200 + prune_runs finished runs. */
    sqlite3 *h;
    char sql[1024];
    if (sqlite3_open(sq_store_path(s), &h) != SQLITE_OK)
        return 1;
    sqlite3_busy_timeout(h, 10000);
    snprintf(sql, sizeof(sql),
             "BEGIN;"
             "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)"
             " INSERT INTO runs (name, kind, status, created_at, target, request, req_per_s,"
             " p99_us, errors, sent) SELECT 'old', 'quick', 'finished', x, 'http://127.0.0.1:8080/"
             "fast', '{\"quick\":{}}', 89990.5, 1400, 100, 900000 FROM c;"
             "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < 9)"
             " INSERT INTO series SELECT id, x, x + 1, 1, 90000, 89990, 10, 10, 0, 9000000, 64,"
             " 650, 900, 1400, 9000, NULL FROM runs, c WHERE name = 'old';"
             "INSERT INTO results (run_id, doc, hist, bytes) SELECT id, d, randomblob(2000),"
             " length(d) + 2000 FROM runs, (SELECT json_object('pad', printf('%%.4000c', 'x'))"
             " AS d) WHERE name = 'old';"
             "COMMIT",
             prune_runs);
    int64_t t0 = sq_now_ns();
    if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, sizeof(err), "%s", sqlite3_errmsg(h));
        die("filling");
    }
    sqlite3_stmt *pc;
    int64_t size0 = 0, size1 = 0;
    if (sqlite3_prepare_v2(h,
                           "SELECT page_count * page_size FROM pragma_page_count,"
                           " pragma_page_size",
                           -1, &pc, NULL) == SQLITE_OK &&
        sqlite3_step(pc) == SQLITE_ROW)
        size0 = sqlite3_column_int64(pc, 0);
    sqlite3_finalize(pc);
    /* Start the prune with an empty WAL, so the peak below is the prune's. */
    if (sqlite3_exec(h, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, sizeof(err), "%s", sqlite3_errmsg(h));
        die("checkpoint after filling");
    }
    sqlite3_close(h);
    double fill_s = (double)(sq_now_ns() - t0) / 1e9;
    for (int r = 0; r < reps; r++) {
        struct sq_store_query q = {.limit = 200};
        struct sq_store_runs l;
        t0 = sq_now_ns();
        for (int i = 0; i < 20; i++) {
            if (sq_store_run_list(s, &q, &l, err, sizeof(err)) < 0 || l.n != 200)
                die("list");
            sq_store_runs_dispose(&l);
        }
        list[r] = (double)(sq_now_ns() - t0) / 20 / 1000.0;
    }
    printf("micro_store: list 200 runs %.0f us (median of %d x 20, newest first, of %d runs)\n",
           micro_median(list, reps), reps, prune_runs + reps + 1);

    /* 5. Prune to 200 runs while a writer appends every 20 ms. */
    pthread_t w;
    snprintf(wal_path, sizeof(wal_path), "%s-wal", sq_store_path(s));
    atomic_init(&stop, false);
    pthread_create(&w, NULL, writer, s);
    usleep(300000);
    struct sq_store_retention keep = {.keep_runs = 200, .batch = batch};
    struct sq_store_prune_stats st;
    t0 = sq_now_ns();
    if (sq_store_prune(s, &keep, &st, err, sizeof(err)) < 0)
        die("prune");
    double prune_s = (double)(sq_now_ns() - t0) / 1e9;
    usleep(300000);
    atomic_store(&stop, true);
    pthread_join(w, NULL);
    qsort(waits, (size_t)nwaits, sizeof(waits[0]), cmp_i64);
    char db[600];
    snprintf(db, sizeof(db), "%s", sq_store_path(s));
    int64_t ckpts = sq_store_checkpoints(s);
    free(doc);
    sq_store_close(s); /* the WAL folded in: the file's size is what the runs left take */
    struct stat sb;
    if (stat(db, &sb) == 0)
        size1 = (int64_t)sb.st_size;
    printf("micro_store: prune %lld runs (%lld series rows, 6 KB results) in %.2f s, %lld "
           "transactions, longest %.1f ms; %lld checkpoints in all; %.0f MB -> %.1f MB after "
           "close (filled in %.1f s)\n",
           (long long)st.runs_deleted, (long long)st.rows_deleted, prune_s,
           (long long)st.transactions, (double)st.max_txn_us / 1000.0, (long long)ckpts,
           (double)size0 / 1e6, (double)size1 / 1e6, fill_s);
    printf("micro_store: appends during the prune: %d, median %lld us, max %lld us; WAL at most "
           "%.1f MB\n",
           nwaits, (long long)waits[nwaits / 2], (long long)waits[nwaits - 1],
           (double)wal_peak / 1e6);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
