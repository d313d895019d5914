/* mcp/mcp.h - the Model Context Protocol server (revision 2025-06-18): JSON-RPC 2.0 messages in,
 * responses out, and the tools an agent drives squall with.
 *
 * Transport-free: the caller hands in one message (a line of `squall mcp`'s stdin, or later the
 * body of the daemon's POST /mcp) and writes out what comes back. One server handles one message
 * at a time (a tool call runs to its end before the next message is read); it is not
 * thread-safe.
 *
 *   sq_mcp_parse    one message checked against JSON-RPC 2.0 (the fuzzed part)
 *   sq_mcp_handle   parse, dispatch (initialize, ping, tools/list, tools/call, resources/list,
 *                   resources/read, resources/templates/list, prompts/list, prompts/get,
 *                   notifications) and the response text
 *
 * Safety caps (struct sq_mcp_config) bound every tool call and are printed in the tool
 * descriptions: a call over a cap is answered as a tool error naming the cap, and nothing runs.
 * The agent cannot change them: only the process that creates the server sets them.
 */
#ifndef SQ_MCP_MCP_H
#define SQ_MCP_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct sq_store;

#define SQ_MCP_PROTOCOL "2025-06-18" /* the revision this server speaks */
#define SQ_MCP_MAX_MSG  (4u << 20)   /* the longest message read (4 MiB) */

#define SQ_MCP_CAP_VUS        400u                            /* VUs (connections x streams) */
#define SQ_MCP_CAP_RATE       10000.0                         /* arrivals per second */
#define SQ_MCP_CAP_DURATION   (5LL * 60 * 1000 * 1000 * 1000) /* a run's length, 5 min */
#define SQ_MCP_MAX_TARGETS    4                               /* start_target: at once */
#define SQ_MCP_KEEP_RUNS      16                              /* results list_runs keeps */
#define SQ_MCP_MAX_HOSTS      16                              /* --allow-host: names */
#define SQ_MCP_LIST_RUNS      50                              /* list_runs from a store */
#define SQ_MCP_LIST_RESOURCES 20                              /* runs per resources/list page */

/* JSON-RPC 2.0 error codes (section 5.1). */
enum {
    SQ_MCP_PARSE_ERROR = -32700,
    SQ_MCP_INVALID_REQUEST = -32600,
    SQ_MCP_METHOD_NOT_FOUND = -32601,
    SQ_MCP_INVALID_PARAMS = -32602,
    SQ_MCP_INTERNAL_ERROR = -32603,
    SQ_MCP_RESOURCE_NOT_FOUND = -32002, /* MCP 2025-06-18, resources/read */
};

struct sq_mcp_config {
    /* Hosts a load may target besides loopback (127.0.0.0/8, ::1, "localhost"), as written in
     * URLs (borrowed). */
    const char *allow_hosts[SQ_MCP_MAX_HOSTS];
    size_t nallow_hosts;
    /* Optional: how the operator allows a host, named where the loopback cap is (the tools'
     * descriptions, the cap's error). NULL: "squall mcp --allow-host HOST". */
    const char *allow_setting;
    /* Optional: set non-zero (SIGINT) to end the run in progress early. */
    volatile int *stop;
    /* Optional: the run store (borrowed). list_runs, get_run and compare_runs read runs there,
     * and (without submit) every run a tool makes is recorded in it. NULL: the session's last
     * SQ_MCP_KEEP_RUNS results, in memory. */
    struct sq_store *store;
    /* Optional, a host that queues runs itself (the daemon). With submit, run_load_test checks
     * the caps and then hands the run over instead of running it: submit(args as the tool got
     * them, the request's JSON-RPC id, its params._meta.progressToken or NULL, the run's length
     * in seconds or 0 when it has none) returns 0 with *run_id (the answer is deferred:
     * sq_mcp_handle returns NULL and sq_mcp_deferred is true; the host answers when the run
     * ends, with sq_mcp_run_answer), or a negative code with err for the agent. */
    void *host_ud;
    int (*submit)(void *ud, const json_t *args, const json_t *rpc_id, const json_t *progress,
                  double total_s, int64_t *run_id, char *err, size_t errlen);
    /* stop_run: 0 (stopping, or cancelled while queued), -ENOENT (no such run) or another
     * negative code with msg for the agent. NULL: stop_run answers that only the daemon can. */
    int (*stop_run)(void *ud, int64_t id, char *msg, size_t msglen);
    /* Optional: sends one notification (a JSON-RPC message as text, no newline) to the client
     * while a tool call runs, on the calling thread (stdio: a line on stdout). With it, a
     * run_load_test whose request carries params._meta.progressToken gets a
     * notifications/progress each second of its run. NULL: none are sent. */
    void (*notify)(void *ud, const char *msg);
    void *notify_ud;
};

/* One parsed message. id and params are borrowed from root (NULL when absent). */
struct sq_mcp_msg {
    json_t *root;
    json_t *id;         /* a string or an integer; NULL for a notification */
    const char *method; /* NULL for a response the client sent */
    json_t *params;     /* an object, or NULL */
};

/* Parses msg[0, len) as one JSON-RPC 2.0 message into *out (root owned: json_decref it).
 * Returns 0, SQ_MCP_PARSE_ERROR (not JSON: out->root NULL) or SQ_MCP_INVALID_REQUEST (JSON, but
 * not a request, notification or response: a batch, a missing or wrong "jsonrpc", a method that
 * is not a string, an id that is null or neither string nor integer, params that are not an
 * object); with SQ_MCP_INVALID_REQUEST out->root is kept and out->id is the id when it was
 * usable. why (may be NULL) gets a one-line reason. */
int sq_mcp_parse(const char *msg, size_t len, struct sq_mcp_msg *out, char *why, size_t whylen);

struct sq_mcp; /* opaque: sq_mcp_new creates it */

/* Returns 0 or -ENOMEM. cfg is copied (the host strings stay borrowed). */
SQ_MUST_CHECK int sq_mcp_new(const struct sq_mcp_config *cfg, struct sq_mcp **out);
/* Stops every target the tools started, then frees. NULL is a no-op. */
void sq_mcp_free(struct sq_mcp *m);

/* Handles one message. Returns the response as a malloc'd JSON text without a newline, or NULL
 * when none is due (a notification, a response from the client) or memory ran out. A tool call
 * may run a load for up to the duration cap before it returns. */
char *sq_mcp_handle(struct sq_mcp *m, const char *msg, size_t len);

/* True when the last sq_mcp_handle handed its run to cfg.submit: the host answers it later. */
bool sq_mcp_deferred(const struct sq_mcp *m);

/* The deferred answer of a run_load_test call with JSON-RPC id rpc_id: run run_id ended with
 * status ("finished", "stopped", "failed"...), reason (may be NULL) and its result document
 * (JSON text, may be NULL). Returns the response as malloc'd JSON text (NULL: out of memory). */
char *sq_mcp_run_answer(const json_t *rpc_id, int64_t run_id, const char *status,
                        const char *reason, const char *doc);

/* A JSON-RPC error response (malloc'd, NULL: out of memory); rpc_id may be NULL. */
char *sq_mcp_error_answer(const json_t *rpc_id, int code, const char *msg);

/* True once an "initialize" request has been answered. */
bool sq_mcp_initialized(const struct sq_mcp *m);

#endif
