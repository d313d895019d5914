/* mcp/jsonrpc.c - JSON-RPC 2.0 for MCP: one message parsed and checked, dispatched to the
 * protocol's methods, and the response written.
 *
 * The message rules (JSON-RPC 2.0 and MCP's "Base Protocol" page for 2025-06-18): a message is
 * one JSON object with "jsonrpc": "2.0". A request has a "method" string and an "id" that is a
 * string or an integer (MCP forbids null); a notification has a method and no id and is never
 * answered; a response (our client answering a request of ours) has "result" or "error" and is
 * dropped, since this server sends no requests. Batches (JSON arrays) were removed in 2025-06-18
 * and are an invalid request. A message that is not JSON is answered -32700 with a null id; a
 * JSON value that is not a valid message is answered -32600 with its id when that id was usable.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/internal.h"
#include "mcp/mcp.h"

/* The revisions a client may ask for; we answer with the one it asked when listed here, else
 * with ours (the client then decides whether to go on). */
static const char *const versions[] = {SQ_MCP_PROTOCOL, "2025-03-26", "2024-11-05"};

static const char instructions[] =
    "squall is a load-testing engine. Start a test server with start_target (or use a server "
    "on 127.0.0.1), check a plan with validate_plan, run a bounded load with run_load_test "
    "and read its result (get_run). To see the webhooks a system sends, start an inbox "
    "(inbox_start), point the system at it and read the captures (inbox_read). Resources: "
    "squall://caps (the caps in force), squall://docs/plans.md (the plan format), "
    "squall://schema/result and squall://runs/{id} (a run's result). Every call is "
    "capped: at most 400 VUs, 10,000 requests/s "
    "and 5 minutes; loads go to loopback unless the operator allowed more hosts.";

static void set_why(char *why, size_t len, const char *s)
{
    if (why && len)
        snprintf(why, len, "%s", s);
}

static bool id_ok(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

int sq_mcp_parse(const char *msg, size_t len, struct sq_mcp_msg *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof(*out));
    json_error_t je;
    /* JSON_DISABLE_EOF_CHECK is not set: trailing bytes after the value are an error. */
    out->root =
        json_loadb(msg, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!out->root) {
        set_why(why, whylen, je.text);
        return SQ_MCP_PARSE_ERROR;
    }
    json_t *r = out->root;
    if (json_is_array(r)) {
        set_why(why, whylen, "batches are not supported (MCP 2025-06-18)");
        return SQ_MCP_INVALID_REQUEST;
    }
    if (!json_is_object(r)) {
        set_why(why, whylen, "a message is a JSON object");
        return SQ_MCP_INVALID_REQUEST;
    }
    json_t *id = json_object_get(r, "id");
    if (id && id_ok(id))
        out->id = id;
    json_t *v = json_object_get(r, "jsonrpc");
    if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0) {
        set_why(why, whylen, "\"jsonrpc\" must be \"2.0\"");
        return SQ_MCP_INVALID_REQUEST;
    }
    if (id && !id_ok(id)) {
        set_why(why, whylen, "\"id\" must be a string or an integer");
        return SQ_MCP_INVALID_REQUEST;
    }
    json_t *method = json_object_get(r, "method");
    if (!method) {
        if (id && (json_object_get(r, "result") || json_object_get(r, "error")))
            return 0; /* a response */
        set_why(why, whylen, "no \"method\"");
        return SQ_MCP_INVALID_REQUEST;
    }
    if (!json_is_string(method) || json_string_length(method) == 0 ||
        strlen(json_string_value(method)) != json_string_length(method)) {
        set_why(why, whylen, "\"method\" must be a non-empty string");
        return SQ_MCP_INVALID_REQUEST;
    }
    json_t *params = json_object_get(r, "params");
    if (params && !json_is_object(params)) {
        set_why(why, whylen, "\"params\" must be an object");
        return SQ_MCP_INVALID_REQUEST;
    }
    out->method = json_string_value(method);
    out->params = params;
    return 0;
}

static char *dump(json_t *resp)
{
    if (!resp)
        return NULL;
    char *s = json_dumps(resp, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(resp);
    return s;
}

static char *error_resp(json_t *id, int code, const char *msg)
{
    json_t *e = json_pack("{s:i, s:s}", "code", code, "message", msg);
    return dump(
        json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", e));
}

/* -32002 Resource not found carries the URI as data (the spec's example). */
static char *error_resp_uri(json_t *id, int code, const char *msg, json_t *params)
{
    json_t *uri = params ? json_object_get(params, "uri") : NULL;
    if (code != SQ_MCP_RESOURCE_NOT_FOUND || !json_is_string(uri))
        return error_resp(id, code, msg);
    json_t *e = json_pack("{s:i, s:s, s:{s:O}}", "code", code, "message", msg, "data", "uri", uri);
    return dump(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "error", e));
}

static char *result_resp(json_t *id, json_t *result)
{
    if (!result)
        return error_resp(id, SQ_MCP_INTERNAL_ERROR, "out of memory");
    return dump(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

static json_t *initialize(struct sq_mcp *m, json_t *params, char *err, size_t errlen)
{
    json_t *pv = params ? json_object_get(params, "protocolVersion") : NULL;
    if (!json_is_string(pv)) {
        snprintf(err, errlen, "initialize: params.protocolVersion must be a string");
        return NULL;
    }
    const char *ver = SQ_MCP_PROTOCOL;
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
        if (strcmp(json_string_value(pv), versions[i]) == 0)
            ver = versions[i];
    m->initialized = true;
    return json_pack("{s:s, s:{s:{s:b}, s:{s:b, s:b}, s:{s:b}}, s:{s:s, s:s, s:s}, s:s}",
                     "protocolVersion", ver, "capabilities", "tools", "listChanged", 0, "resources",
                     "subscribe", 0, "listChanged", 0, "prompts", "listChanged", 0, "serverInfo",
                     "name", "squall", "title", "squall load tester", "version", SQ_VERSION,
                     "instructions", instructions);
}

char *sq_mcp_handle(struct sq_mcp *m, const char *msg, size_t len)
{
    struct sq_mcp_msg req;
    char why[256] = "";
    int rc = sq_mcp_parse(msg, len, &req, why, sizeof(why));
    char *out = NULL;
    char text[512];
    m->deferred = false;
    if (rc == SQ_MCP_PARSE_ERROR) {
        snprintf(text, sizeof(text), "Parse error: %s", why);
        return error_resp(NULL, rc, text);
    }
    if (rc != 0) {
        snprintf(text, sizeof(text), "Invalid Request: %s", why);
        out = error_resp(req.id, rc, text);
        goto done;
    }
    if (!req.method || !req.id) /* a response, or a notification: nothing to answer */
        goto done;

    const char *meth = req.method;
    char err[512] = "";
    if (strcmp(meth, "initialize") == 0) {
        json_t *r = initialize(m, req.params, err, sizeof(err));
        out = r ? result_resp(req.id, r) : error_resp(req.id, SQ_MCP_INVALID_PARAMS, err);
    } else if (strcmp(meth, "ping") == 0) {
        out = result_resp(req.id, json_object());
    } else if (strcmp(meth, "tools/list") == 0) {
        out = result_resp(req.id, json_pack("{s:o}", "tools", sq_mcp__tools_list(m)));
    } else if (strcmp(meth, "tools/call") == 0) {
        json_t *name = req.params ? json_object_get(req.params, "name") : NULL;
        json_t *args = req.params ? json_object_get(req.params, "arguments") : NULL;
        if (!json_is_string(name) || strlen(json_string_value(name)) != json_string_length(name)) {
            out = error_resp(req.id, SQ_MCP_INVALID_PARAMS,
                             "tools/call: params.name must be a string");
        } else if (args && !json_is_object(args) && !json_is_null(args)) {
            out = error_resp(req.id, SQ_MCP_INVALID_PARAMS,
                             "tools/call: params.arguments must be an object");
        } else {
            json_t *result = NULL;
            m->cur_id = req.id;
            json_t *meta = json_object_get(req.params, "_meta");
            json_t *tok = meta ? json_object_get(meta, "progressToken") : NULL;
            m->cur_progress = json_is_string(tok) || json_is_integer(tok) ? tok : NULL;
            rc = sq_mcp__tools_call(m, json_string_value(name), json_is_object(args) ? args : NULL,
                                    &result, err, sizeof(err));
            m->cur_id = NULL;
            m->cur_progress = NULL;
            if (m->deferred)
                json_decref(result); /* the host answers when the run ends */
            else
                out = rc == 0 ? result_resp(req.id, result) : error_resp(req.id, rc, err);
        }
    } else if (strncmp(meth, "resources/", 10) == 0 &&
               (strcmp(meth + 10, "list") == 0 || strcmp(meth + 10, "read") == 0 ||
                strcmp(meth + 10, "templates/list") == 0)) {
        json_t *r = NULL;
        rc = sq_mcp__resources(m, meth, req.params, &r, err, sizeof(err));
        out = rc == 0 ? result_resp(req.id, r) : error_resp_uri(req.id, rc, err, req.params);
    } else if (strcmp(meth, "prompts/list") == 0 || strcmp(meth, "prompts/get") == 0) {
        json_t *r = NULL;
        rc = sq_mcp__prompts(m, meth, req.params, &r, err, sizeof(err));
        out = rc == 0 ? result_resp(req.id, r) : error_resp(req.id, rc, err);
    } else {
        snprintf(text, sizeof(text), "Method not found: %.200s", meth);
        out = error_resp(req.id, SQ_MCP_METHOD_NOT_FOUND, text);
    }
done:
    json_decref(req.root);
    return out;
}

int sq_mcp_new(const struct sq_mcp_config *cfg, struct sq_mcp **out)
{
    struct sq_mcp *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    if (cfg)
        m->cfg = *cfg;
    m->next_run = 1;
    *out = m;
    return 0;
}

void sq_mcp_free(struct sq_mcp *m)
{
    if (!m)
        return;
    sq_mcp__tools_dispose(m);
    free(m);
}

bool sq_mcp_deferred(const struct sq_mcp *m)
{
    return m->deferred;
}

char *sq_mcp_error_answer(const json_t *rpc_id, int code, const char *msg)
{
    return error_resp((json_t *)rpc_id, code, msg);
}

char *sq_mcp_run_answer(const json_t *rpc_id, int64_t run_id, const char *status,
                        const char *reason, const char *doc)
{
    json_t *d = doc ? json_loads(doc, 0, NULL) : NULL;
    json_t *r = NULL;
    if (d) {
        char *summary = sq_mcp__summary_text(d);
        if (summary) {
            bool finished = strcmp(status, "finished") == 0;
            size_t n = strlen(summary) + (reason ? strlen(reason) : 0) + 64;
            char *text = malloc(n);
            if (text) {
                snprintf(text, n, "%s%s%s%s%s", finished ? "" : "the run ", finished ? "" : status,
                         reason ? ": " : "", reason ? reason : "", finished ? summary : "\n");
                if (!finished)
                    snprintf(text + strlen(text), n - strlen(text), "%s", summary);
                r = sq_mcp__run_result(run_id, text, d);
            }
            free(text);
        }
        free(summary);
    } else {
        r = sq_mcp__tool_error("run %lld %s: %s", (long long)run_id, status,
                               reason ? reason : "no result was stored");
    }
    json_decref(d);
    return result_resp((json_t *)rpc_id, r);
}

bool sq_mcp_initialized(const struct sq_mcp *m)
{
    return m->initialized;
}
