/* daemon/daemon.h - `squall serve`: the engine as a service. docs/daemon.md is the user guide,
 * docs/internals/daemon.md says how it is built.
 *
 * One process holds: an HTTP/1.1 API on one server worker thread (server/), the run store
 * (store/), a runner thread that executes runs one at a time from a FIFO queue (the engine runs
 * in-process, with its own worker threads), and an "ops" thread that does what the API must not
 * wait for (durable store writes, plan loading, DNS, pruning). The API thread never waits for
 * the engine or for an fsync: requests that need either are held (sq_server_hold) and answered
 * when the work is done.
 *
 * Nothing here exits; the daemon prints to the log stream it is given (stderr by the CLI).
 */
#ifndef SQ_DAEMON_DAEMON_H
#define SQ_DAEMON_DAEMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

#define SQ_DAEMON_PORT         9876
#define SQ_DAEMON_DATA         "squall-data"
#define SQ_DAEMON_MAX_BODY     (1024 * 1024) /* request bodies: 413 past it */
#define SQ_DAEMON_MAX_VUS      10000
#define SQ_DAEMON_MAX_RATE     1000000.0
#define SQ_DAEMON_MAX_DURATION 3600 /* seconds */
#define SQ_DAEMON_MAX_QUEUE    100  /* runs waiting at once */
#define SQ_DAEMON_TOKEN_MIN    16   /* bytes of a token at least */
#define SQ_DAEMON_TOKEN_MAX    4096
#define SQ_DAEMON_MAX_ALLOW    64   /* allowlisted target hosts */
#define SQ_DAEMON_IDLE_TIMEOUT 120  /* seconds: an API connection that moves nothing is closed */
#define SQ_DAEMON_MAX_CONNS    1024 /* API connections open at once */
/* API connections open at once from one client address: one client cannot take more than half
 * the table; past it, its own connection that waited longest makes room (server.h, evict) */
#define SQ_DAEMON_MAX_CONNS_PER_PEER 512
/* live followers (GET /runs/{id}/live of a run not ended) at once: a follower holds its
 * connection, which no newcomer can make room from, so they may fill at most a quarter of the
 * connections (the inbox's event stream has its own cap of 32) */
#define SQ_DAEMON_MAX_FOLLOWERS 256

/* What can be changed while the daemon runs (GET/PUT /config); the flags set the first values. */
struct sq_daemon_config {
    uint32_t threads;           /* worker threads a run gets unless it asks; 0: online CPUs */
    int64_t timeout_ns;         /* per-request timeout a run gets unless it asks; 0: 10 s */
    int64_t connect_timeout_ns; /* 0: 5 s */
    uint64_t max_vus;           /* safety caps, per run */
    double max_rate;            /* requests per second */
    int64_t max_duration_ns;
    uint32_t max_queue; /* runs waiting at once; one more is refused (429) */
    int64_t keep_runs;  /* retention: 0 no count limit */
    int64_t keep_days;  /* 0: no age limit */
    size_t max_body;    /* API request bodies, bytes (1 .. SQ_DAEMON_MAX_BODY) */
    /* Targets a run may load: host names or addresses, compared case-insensitively with the
     * URL's host. None: any. */
    char *allow_hosts[SQ_DAEMON_MAX_ALLOW];
    size_t nallow;
};

/* The defaults above (threads 0, timeouts 10 s / 5 s, caps 10,000 VUs, 1,000,000/s, 1 h,
 * queue 100, keep 200 runs, no age limit, 1 MiB bodies, no allowlist). */
void sq_daemon_config_init(struct sq_daemon_config *c);
/* Frees the allowlist's strings. */
void sq_daemon_config_dispose(struct sq_daemon_config *c);
/* Sets one key from a JSON value (the names of GET /config: "threads", "timeout", "max_vus",
 * "allow_hosts"...; numbers may come as strings, durations as "10s" or seconds, allow_hosts as
 * an array or a comma-separated string). Returns 0, or -SQ_EUSAGE with err naming the key
 * ("max_vus: 'x' is not a whole number in 1..1000000", "unknown key 'treads' (did you mean
 * 'threads'?)", "listen: needs a restart (...)"), or -ENOMEM. c is unchanged on error. */
SQ_MUST_CHECK int sq_daemon_config_set(struct sq_daemon_config *c, const char *key, const json_t *v,
                                       char *err, size_t len);

struct sq_daemon_opts {
    const char *host;               /* the listen address; NULL: 127.0.0.1 */
    uint16_t port;                  /* 0: any free port */
    const char *data_dir;           /* the store: a directory (created) or a .db file */
    const char *token;              /* NULL: no token (then host must be a loopback address) */
    const char *cors_origin;        /* NULL: no CORS; else the one origin allowed to call the API */
    bool access_log;                /* one log line per API request */
    FILE *log;                      /* state changes and errors; NULL: stderr */
    struct sq_daemon_config config; /* borrowed: copied by sq_daemon_start */
    /* The webhook inbox at /inbox (target/inbox.h): 0 / NULL: its defaults. */
    uint32_t inbox_max_captures;    /* ring size, 1..SQ_INBOX_MAX_CAPTURES */
    size_t inbox_max_body;          /* body bytes kept per capture (SIZE_MAX: none kept) */
    const char *inbox_stamp_header; /* find event stamps only in this header */
    /* API connections at once from one address: 0: SQ_DAEMON_MAX_CONNS_PER_PEER; UINT32_MAX: no
     * per-address cap (SQ_DAEMON_MAX_CONNS still holds) */
    uint32_t max_conns_per_peer;
};

struct sq_daemon; /* opaque */

/* Opens the store (recovering runs a previous process left running), prunes it, starts the
 * threads and the API. Returns 0, or a negative code with err saying why in one sentence:
 * -EINVAL (a bad option; a non-loopback host without a token is refused here too), -EBUSY
 * (another squall has the store), -EADDRINUSE, or another store or server failure. */
SQ_MUST_CHECK int sq_daemon_start(const struct sq_daemon_opts *o, struct sq_daemon **out, char *err,
                                  size_t errlen);
/* The port the API listens on. */
uint16_t sq_daemon_port(const struct sq_daemon *d);
/* How many runs the store marked interrupted when it opened (a previous process died). */
int sq_daemon_recovered(const struct sq_daemon *d);
/* Graceful end: cancels the queued runs (stopped, "the daemon shut down"), stops the running
 * one like POST /runs/{id}/stop and waits until its result is stored, then stops the API and
 * closes the store. Call from the thread that started it; afterwards only sq_daemon_free. */
void sq_daemon_shutdown(struct sq_daemon *d);
/* Shuts down if need be and frees. NULL is a no-op. */
void sq_daemon_free(struct sq_daemon *d);

/* True when host (a numeric address or "localhost") is a loopback address: the daemon may
 * listen there without a token. */
bool sq_daemon_host_is_loopback(const char *host);

/* Reads a token file: the first line, surrounding whitespace trimmed. Returns 0 with *out
 * malloc'd, or a negative code with err saying why: the file cannot be read, the token is
 * shorter than SQ_DAEMON_TOKEN_MIN bytes, longer than SQ_DAEMON_TOKEN_MAX, or holds bytes that
 * cannot travel in an HTTP header. */
SQ_MUST_CHECK int sq_daemon_token_read(const char *path, char **out, char *err, size_t errlen);

#endif
