/* store/sqlite.h - libsqlite3, loaded when the run store is opened (sq_store_open, the one
 * entry point that needs it: every other function takes the store it returned). Linked in, it
 * was mapped into every run, a plain `squall URL` too (docs/internals/base.md, "dynlib").
 *
 * After the struct, each function store.c calls is defined as its pointer (base/dynlib.h), so
 * store.c, which includes this header instead of <sqlite3.h>, calls them unchanged. Nothing may
 * be called before sq_sqlite_load returned 0.
 */
#ifndef SQ_STORE_SQLITE_H
#define SQ_STORE_SQLITE_H

#include <sqlite3.h>
#include <stddef.h>

#include "base/err.h"

/* X(library, function): every sqlite3 function store.c calls (`nm -u` on store.c.o). */
#define SQ_SQLITE_SYMS(X)                                                                          \
    X(SQLITE3, sqlite3_bind_blob)                                                                  \
    X(SQLITE3, sqlite3_bind_double)                                                                \
    X(SQLITE3, sqlite3_bind_int64)                                                                 \
    X(SQLITE3, sqlite3_bind_text)                                                                  \
    X(SQLITE3, sqlite3_busy_timeout)                                                               \
    X(SQLITE3, sqlite3_changes)                                                                    \
    X(SQLITE3, sqlite3_clear_bindings)                                                             \
    X(SQLITE3, sqlite3_close_v2)                                                                   \
    X(SQLITE3, sqlite3_column_blob)                                                                \
    X(SQLITE3, sqlite3_column_bytes)                                                               \
    X(SQLITE3, sqlite3_column_double)                                                              \
    X(SQLITE3, sqlite3_column_int)                                                                 \
    X(SQLITE3, sqlite3_column_int64)                                                               \
    X(SQLITE3, sqlite3_column_text)                                                                \
    X(SQLITE3, sqlite3_column_type)                                                                \
    X(SQLITE3, sqlite3_errmsg)                                                                     \
    X(SQLITE3, sqlite3_exec)                                                                       \
    X(SQLITE3, sqlite3_extended_result_codes)                                                      \
    X(SQLITE3, sqlite3_finalize)                                                                   \
    X(SQLITE3, sqlite3_get_autocommit)                                                             \
    X(SQLITE3, sqlite3_last_insert_rowid)                                                          \
    X(SQLITE3, sqlite3_open_v2)                                                                    \
    X(SQLITE3, sqlite3_prepare_v2)                                                                 \
    X(SQLITE3, sqlite3_prepare_v3)                                                                 \
    X(SQLITE3, sqlite3_reset)                                                                      \
    X(SQLITE3, sqlite3_step)                                                                       \
    X(SQLITE3, sqlite3_system_errno)                                                               \
    X(SQLITE3, sqlite3_wal_checkpoint_v2)                                                          \
    X(SQLITE3, sqlite3_wal_hook)

struct sq_sqlite {
#define SQ_SQLITE_FIELD(lib, sym) __typeof__(sym) *sym;
    SQ_SQLITE_SYMS(SQ_SQLITE_FIELD)
#undef SQ_SQLITE_FIELD
};
extern struct sq_sqlite sq_sqlite;

/* Loads libsqlite3 once (thread-safe). Returns 0, or -ENOENT with why naming the library or
 * function that is missing. */
SQ_MUST_CHECK int sq_sqlite_load(char *why, size_t len);

#ifndef SQ_SQLITE_IMPL
#define sqlite3_bind_blob             (sq_sqlite.sqlite3_bind_blob)
#define sqlite3_bind_double           (sq_sqlite.sqlite3_bind_double)
#define sqlite3_bind_int64            (sq_sqlite.sqlite3_bind_int64)
#define sqlite3_bind_text             (sq_sqlite.sqlite3_bind_text)
#define sqlite3_busy_timeout          (sq_sqlite.sqlite3_busy_timeout)
#define sqlite3_changes               (sq_sqlite.sqlite3_changes)
#define sqlite3_clear_bindings        (sq_sqlite.sqlite3_clear_bindings)
#define sqlite3_close_v2              (sq_sqlite.sqlite3_close_v2)
#define sqlite3_column_blob           (sq_sqlite.sqlite3_column_blob)
#define sqlite3_column_bytes          (sq_sqlite.sqlite3_column_bytes)
#define sqlite3_column_double         (sq_sqlite.sqlite3_column_double)
#define sqlite3_column_int            (sq_sqlite.sqlite3_column_int)
#define sqlite3_column_int64          (sq_sqlite.sqlite3_column_int64)
#define sqlite3_column_text           (sq_sqlite.sqlite3_column_text)
#define sqlite3_column_type           (sq_sqlite.sqlite3_column_type)
#define sqlite3_errmsg                (sq_sqlite.sqlite3_errmsg)
#define sqlite3_exec                  (sq_sqlite.sqlite3_exec)
#define sqlite3_extended_result_codes (sq_sqlite.sqlite3_extended_result_codes)
#define sqlite3_finalize              (sq_sqlite.sqlite3_finalize)
#define sqlite3_get_autocommit        (sq_sqlite.sqlite3_get_autocommit)
#define sqlite3_last_insert_rowid     (sq_sqlite.sqlite3_last_insert_rowid)
#define sqlite3_open_v2               (sq_sqlite.sqlite3_open_v2)
#define sqlite3_prepare_v2            (sq_sqlite.sqlite3_prepare_v2)
#define sqlite3_prepare_v3            (sq_sqlite.sqlite3_prepare_v3)
#define sqlite3_reset                 (sq_sqlite.sqlite3_reset)
#define sqlite3_step                  (sq_sqlite.sqlite3_step)
#define sqlite3_system_errno          (sq_sqlite.sqlite3_system_errno)
#define sqlite3_wal_checkpoint_v2     (sq_sqlite.sqlite3_wal_checkpoint_v2)
#define sqlite3_wal_hook              (sq_sqlite.sqlite3_wal_hook)
#endif

#endif
