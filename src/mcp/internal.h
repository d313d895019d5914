/* mcp/internal.h - what mcp/'s files share: the server's state and the tools' entry points. */
#ifndef SQ_MCP_INTERNAL_H
#define SQ_MCP_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcp/mcp.h"

struct sq_inbox;
struct sq_target;

/* A target start_target started in this process. */
struct sq_mcp__target {
    struct sq_target *t; /* NULL: a free slot */
    uint16_t port;
};

/* An inbox inbox_start started in this process. */
struct sq_mcp__inbox {
    struct sq_inbox *b; /* NULL: a free slot */
    uint16_t port;
    char *body; /* the answer's body (owned) */
};

/* A finished run kept for list_runs / get_run (a ring of SQ_MCP_KEEP_RUNS). */
struct sq_mcp__run {
    uint64_t id; /* 0: a free slot; ids count from 1 */
    char *kind;  /* "quick" or "plan" */
    char *url;   /* the target URL */
    json_t *doc; /* the result document */
    char *summary;
};

struct sq_mcp {
    struct sq_mcp_config cfg;
    bool initialized;
    struct sq_mcp__target targets[SQ_MCP_MAX_TARGETS];
    struct sq_mcp__inbox inboxes[SQ_MCP_MAX_TARGETS];
    struct sq_mcp__run runs[SQ_MCP_KEEP_RUNS];
    uint64_t next_run;          /* the id the next run gets */
    const json_t *cur_id;       /* the request being handled's JSON-RPC id (borrowed) */
    const json_t *cur_args;     /* run_load_test's arguments while it runs (borrowed) */
    const json_t *cur_progress; /* the request's params._meta.progressToken, or NULL */
    bool deferred;              /* the last request was handed to cfg.submit */
};

/* The tools' descriptors for tools/list (a new array). */
json_t *sq_mcp__tools_list(const struct sq_mcp *m);

/* Calls tool name with args (an object or NULL). Returns 0 with *result a CallToolResult (a tool
 * error is one too: isError true), or SQ_MCP_INVALID_PARAMS (an unknown tool, arguments that do
 * not match its schema: err says which) or SQ_MCP_INTERNAL_ERROR (memory). */
int sq_mcp__tools_call(struct sq_mcp *m, const char *name, json_t *args, json_t **result, char *err,
                       size_t errlen);

/* The result of a run (the tool's answer): summary text and document. */
json_t *sq_mcp__run_result(int64_t id, const char *summary, json_t *doc);
/* The summary squall prints for doc (malloc'd, NULL: memory). */
char *sq_mcp__summary_text(const json_t *doc);
/* A tool error result. */
json_t *sq_mcp__tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Run id's result document (*doc, owned): 0, -ENOENT (no such run), -ENODATA (no result) or
 * -EIO (the store failed); why says which. status (may be NULL) gets the run's status. */
int sq_mcp__run_doc(struct sq_mcp *m, int64_t id, json_t **doc, char *status, size_t statuslen,
                    char *why, size_t whylen);

/* resources/list, resources/read, resources/templates/list (resources.c) and prompts/list,
 * prompts/get (prompts.c): 0 with *result, or a JSON-RPC error code with err. */
int sq_mcp__resources(struct sq_mcp *m, const char *method, json_t *params, json_t **result,
                      char *err, size_t errlen);
int sq_mcp__prompts(struct sq_mcp *m, const char *method, json_t *params, json_t **result,
                    char *err, size_t errlen);

/* Frees what the tools hold (targets stopped, runs dropped). */
void sq_mcp__tools_dispose(struct sq_mcp *m);

#endif
