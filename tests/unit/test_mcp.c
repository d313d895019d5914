/* tests/unit/test_mcp.c - mcp/: the JSON-RPC 2.0 parser over a table of messages and every
 * truncated prefix of each, the protocol methods (initialize's version answer, ping, tools/list,
 * notifications, error codes), every cap refused before anything runs, and a real bounded run
 * against a target the tools start (result kept, listed, fetched, compared, target stopped), the
 * run store behind list_runs/get_run/compare_runs (squall mcp --store), and the seam the daemon
 * uses (cfg.submit: the caps checked first, then the run handed over and its answer deferred). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "mcp/mcp.h"
#include "store/store.h"

/* ---- the parser ---- */

struct pcase {
    const char *msg;
    int rc;
    bool has_id, has_method;
};

static const struct pcase pcases[] = {
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", 0, true, true},
    {"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/list\",\"params\":{}}", 0, true, true},
    {"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", 0, false, true},
    {"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}", 0, true, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":1,\"message\":\"x\"}}", 0, true, false},
    {"", SQ_MCP_PARSE_ERROR, false, false},
    {"{", SQ_MCP_PARSE_ERROR, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} x", SQ_MCP_PARSE_ERROR, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}", SQ_MCP_PARSE_ERROR, false,
     false},
    {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", SQ_MCP_INVALID_REQUEST, false, false},
    {"[]", SQ_MCP_INVALID_REQUEST, false, false},
    {"42", SQ_MCP_INVALID_REQUEST, false, false},
    {"{\"id\":1,\"method\":\"ping\"}", SQ_MCP_INVALID_REQUEST, true, false},
    {"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", SQ_MCP_INVALID_REQUEST, true, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", SQ_MCP_INVALID_REQUEST, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", SQ_MCP_INVALID_REQUEST, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", SQ_MCP_INVALID_REQUEST, false, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", SQ_MCP_INVALID_REQUEST, true, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", SQ_MCP_INVALID_REQUEST, true, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\u0000b\"}", SQ_MCP_INVALID_REQUEST, true,
     false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[]}", SQ_MCP_INVALID_REQUEST,
     true, false},
    {"{\"jsonrpc\":\"2.0\",\"id\":1}", SQ_MCP_INVALID_REQUEST, true, false},
};

static void test_parse_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(pcases) / sizeof(pcases[0]); i++) {
        const struct pcase *c = &pcases[i];
        struct sq_mcp_msg m;
        char why[256] = "";
        int rc = sq_mcp_parse(c->msg, strlen(c->msg), &m, why, sizeof(why));
        if (rc != c->rc)
            fail_msg("%s: rc %d, want %d (%s)", c->msg, rc, c->rc, why);
        assert_true((m.id != NULL) == c->has_id);
        assert_true((m.method != NULL) == c->has_method);
        if (rc)
            assert_true(why[0] != '\0');
        json_decref(m.root);
    }
}

/* Every proper prefix of a valid message is a parse error, read from a buffer of exactly its
 * length (ASan catches a read past it). */
static void test_parse_prefixes(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(pcases) / sizeof(pcases[0]); i++) {
        if (pcases[i].rc != 0)
            continue;
        size_t n = strlen(pcases[i].msg);
        for (size_t k = 0; k < n; k++) {
            char *b = malloc(k ? k : 1);
            memcpy(b, pcases[i].msg, k);
            struct sq_mcp_msg m;
            int rc = sq_mcp_parse(b, k, &m, NULL, 0);
            if (rc != SQ_MCP_PARSE_ERROR)
                fail_msg("prefix %zu of %s: rc %d", k, pcases[i].msg, rc);
            json_decref(m.root);
            free(b);
        }
    }
}

/* ---- the protocol ---- */

/* Sends text, returns the parsed response (NULL when none came). */
static json_t *call(struct sq_mcp *m, const char *text)
{
    char *r = sq_mcp_handle(m, text, strlen(text));
    if (!r)
        return NULL;
    assert_null(strchr(r, '\n'));
    json_error_t je;
    json_t *v = json_loads(r, 0, &je);
    if (!v)
        fail_msg("response is not JSON: %s", r);
    free(r);
    assert_string_equal(json_string_value(json_object_get(v, "jsonrpc")), "2.0");
    return v;
}

static int error_code(json_t *v)
{
    json_t *e = json_object_get(v, "error");
    assert_non_null(e);
    assert_true(json_is_string(json_object_get(e, "message")));
    return (int)json_integer_value(json_object_get(e, "code"));
}

static struct sq_mcp *new_mcp(void)
{
    struct sq_mcp *m = NULL;
    assert_int_equal(sq_mcp_new(NULL, &m), 0);
    return m;
}

static void test_initialize(void **state)
{
    (void)state;
    struct sq_mcp *m = new_mcp();
    assert_false(sq_mcp_initialized(m));
    static const struct {
        const char *asked, *answer;
    } vers[] = {{"2025-06-18", "2025-06-18"},
                {"2024-11-05", "2024-11-05"},
                {"2025-03-26", "2025-03-26"},
                {"1999-01-01", "2025-06-18"}};
    for (size_t i = 0; i < 4; i++) {
        char req[256];
        snprintf(req, sizeof(req),
                 "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
                 "\"version\":\"1\"}}}",
                 i, vers[i].asked);
        json_t *v = call(m, req);
        assert_int_equal(json_integer_value(json_object_get(v, "id")), (json_int_t)i);
        json_t *r = json_object_get(v, "result");
        assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")),
                            vers[i].answer);
        assert_non_null(json_object_get(json_object_get(r, "capabilities"), "tools"));
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(r, "serverInfo"), "name")), "squall");
        json_decref(v);
    }
    assert_true(sq_mcp_initialized(m));
    json_t *v = call(m, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"initialize\",\"params\":{}}");
    assert_int_equal(error_code(v), SQ_MCP_INVALID_PARAMS);
    json_decref(v);
    sq_mcp_free(m);
}

static void test_methods(void **state)
{
    (void)state;
    struct sq_mcp *m = new_mcp();
    assert_null(call(m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
    assert_null(call(m, "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\"}"));
    assert_null(call(m, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}"));

    json_t *v = call(m, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
    assert_string_equal(json_string_value(json_object_get(v, "id")), "p");
    assert_true(json_is_object(json_object_get(v, "result")));
    assert_int_equal(json_object_size(json_object_get(v, "result")), 0);
    json_decref(v);

    struct {
        const char *msg;
        int code;
        bool null_id;
    } errs[] = {
        {"not json", SQ_MCP_PARSE_ERROR, true},
        {"[1]", SQ_MCP_INVALID_REQUEST, true},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":5}", SQ_MCP_INVALID_REQUEST, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"nope\"}", SQ_MCP_METHOD_NOT_FOUND, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/subscribe\"}",
         SQ_MCP_METHOD_NOT_FOUND, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{}}",
         SQ_MCP_INVALID_PARAMS, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}",
         SQ_MCP_INVALID_PARAMS, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"get_run\",\"arguments\":[1]}}",
         SQ_MCP_INVALID_PARAMS, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"get_run\",\"arguments\":{\"id\":\"x\"}}}",
         SQ_MCP_INVALID_PARAMS, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"run_load_test\",\"arguments\":{}}}",
         SQ_MCP_INVALID_PARAMS, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"run_load_test\",\"arguments\":{\"quick\":\"x\"}}}",
         SQ_MCP_INVALID_PARAMS, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"run_load_test\",\"arguments\":{\"quick\":{},\"plan\":\"x\"}}}",
         SQ_MCP_INVALID_PARAMS, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"run_load_test\",\"arguments\":{\"quick\":{},\"vus\":3}}}",
         SQ_MCP_INVALID_PARAMS, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"start_target\",\"arguments\":{\"threads\":9}}}",
         SQ_MCP_INVALID_PARAMS, false},
        {"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"inbox_start\",\"arguments\":{\"stamp_header\":\"X Stamp\"}}}",
         SQ_MCP_INVALID_PARAMS, false},
    };
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        v = call(m, errs[i].msg);
        if (error_code(v) != errs[i].code)
            fail_msg("%s: code %d, want %d", errs[i].msg, error_code(v), errs[i].code);
        json_t *id = json_object_get(v, "id");
        assert_true(errs[i].null_id ? json_is_null(id) : json_integer_value(id) == 4);
        json_decref(v);
    }

    v = call(m, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\"}");
    json_t *tools = json_object_get(json_object_get(v, "result"), "tools");
    assert_int_equal(json_array_size(tools), 11);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        assert_true(json_is_string(json_object_get(t, "name")));
        assert_true(json_is_string(json_object_get(t, "description")));
        json_t *s = json_object_get(t, "inputSchema");
        assert_string_equal(json_string_value(json_object_get(s, "type")), "object");
        if (strcmp(json_string_value(json_object_get(t, "name")), "run_load_test") == 0) {
            const char *d = json_string_value(json_object_get(t, "description"));
            assert_non_null(strstr(d, "400 VUs"));
            assert_non_null(strstr(d, "10,000 requests/s"));
            assert_non_null(strstr(d, "5 minutes"));
            assert_non_null(strstr(d, "loopback"));
        }
    }
    json_decref(v);
    sq_mcp_free(m);
}

/* ---- tools ---- */

/* Calls tool name with args (JSON text); returns the CallToolResult. */
static json_t *tool(struct sq_mcp *m, const char *name, const char *args)
{
    size_t n = strlen(args) + 256;
    char *req = malloc(n);
    snprintf(req, n,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
             "\"arguments\":%s}}",
             name, args);
    json_t *v = call(m, req);
    free(req);
    json_t *r = json_incref(json_object_get(v, "result"));
    if (!r)
        fail_msg("%s %s: %s", name, args, json_dumps(v, 0));
    json_decref(v);
    return r;
}

static const char *text0(json_t *r)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
}

static void assert_tool_error(struct sq_mcp *m, const char *name, const char *args,
                              const char *needle)
{
    json_t *r = tool(m, name, args);
    if (!json_is_true(json_object_get(r, "isError")) || !strstr(text0(r), needle))
        fail_msg("%s %s: want an error with '%s', got %s", name, args, needle, text0(r));
    json_decref(r);
}

static void test_caps(void **state)
{
    (void)state;
    struct sq_mcp *m = new_mcp();
    /* Port 9 on loopback: nothing listens, and nothing must be sent anyway. */
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://127.0.0.1:9/\",\"connections\":401,"
                      "\"duration\":\"1s\"}}",
                      "cap: max VUs 400");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://127.0.0.1:9/\",\"connections\":100,"
                      "\"http2\":true,\"streams\":5,\"duration\":\"1s\"}}",
                      "cap: max VUs 400");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://127.0.0.1:9/\",\"rate\":10001,"
                      "\"duration\":\"1s\"}}",
                      "cap: max rate 10000/s");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://127.0.0.1:9/\",\"rate\":10,\"stages\":"
                      "\"1s:10,1s:20000\"}}",
                      "cap: max rate 10000/s");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://127.0.0.1:9/\",\"duration\":\"5m1s\"}}",
                      "cap: max duration 5m");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://127.0.0.1:9/\",\"duration\":\"5m\","
                      "\"graceful-stop\":\"2s\"}}",
                      "cap: max duration 5m");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://10.1.2.3:9/\",\"duration\":\"1s\"}}",
                      "cap: targets only on loopback: the target: '10.1.2.3' connects to "
                      "10.1.2.3:9; MCP runs may only reach loopback unless the operator allows a "
                      "host (squall mcp --allow-host HOST); nothing was run");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"ws://example.invalid/\",\"message\":\"m\"}}",
                      "host 'example.invalid' is not 127.0.0.1, ::1 or localhost");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"nats://10.1.2.3:4222/x\",\"duration\":\"1s\"}}",
                      "'10.1.2.3' connects to 10.1.2.3:4222; MCP runs may only reach loopback");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://127.0.0.1:9/\",\"duration\":\"1s\","
                      "\"resolve\":\"127.0.0.1:9:[::ffff:10.9.9.9]\"}}",
                      "connects to [::ffff:10.9.9.9]:9 (from resolve)");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://localhost:9/\",\"duration\":\"1s\","
                      "\"connect-to\":\"localhost:9:10.9.9.9:9\"}}",
                      "connects to 10.9.9.9:9");
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://127.0.0.1:9/\",\"connections\":0}}",
                      "--connections");
    assert_tool_error(m, "run_load_test",
                      "{\"plan\":\"target: http://127.0.0.1:9\\nscenarios:\\n  a:\\n    executor: "
                      "constant-vus\\n    vus: 500\\n    duration: 1s\\n    flow:\\n      - "
                      "request: {url: /}\\n\"}",
                      "cap: max VUs 400");
    assert_tool_error(m, "run_load_test",
                      "{\"plan\":\"target: http://127.0.0.1:9\\nscenarios:\\n  a:\\n    executor: "
                      "shared-iterations\\n    vus: 5\\n    iterations: 10\\n    flow:\\n      - "
                      "request: {url: /}\\n\"}",
                      "cap: max duration 5m");
    assert_tool_error(m, "run_load_test",
                      "{\"plan\":\"target: http://192.0.2.1:9\\nscenarios:\\n  a:\\n    executor: "
                      "constant-vus\\n    vus: 5\\n    duration: 1s\\n    flow:\\n      - "
                      "request: {url: /}\\n\"}",
                      "'192.0.2.1' connects to 192.0.2.1:9; MCP runs may only reach loopback");
    /* every destination of a plan, not only its target (net/egress.h): a subscribe step's
     * broker, the OAuth2 token URL */
    assert_tool_error(m, "run_load_test",
                      "{\"plan\":\"target: http://127.0.0.1:9\\nscenarios:\\n  a:\\n    executor: "
                      "constant-vus\\n    vus: 1\\n    duration: 1s\\n    flow:\\n      - "
                      "subscribe: {url: 'nats://10.1.2.3:4222/x'}\\n\"}",
                      "cap: targets only on loopback: the broker nats://10.1.2.3:4222 of a publish "
                      "or subscribe step: '10.1.2.3' connects to 10.1.2.3:4222; MCP runs may only "
                      "reach loopback");
    assert_tool_error(m, "run_load_test",
                      "{\"plan\":\"target: http://127.0.0.1:9\\nauth:\\n  oauth2:\\n    "
                      "token_url: http://10.1.2.3/token\\n    client_id: a\\n    client_secret: "
                      "b\\nscenarios:\\n  a:\\n    executor: constant-vus\\n    vus: 1\\n    "
                      "duration: 1s\\n    flow:\\n      - request: {url: /}\\n\"}",
                      "cap: targets only on loopback: auth.oauth2.token_url: '10.1.2.3' connects "
                      "to 10.1.2.3:80");
    /* a plan's script is refused without being opened, by validate_plan too */
    assert_tool_error(m, "validate_plan",
                      "{\"plan\":\"target: http://127.0.0.1:9\\nscript: /nonexistent/x.lua\\n"
                      "scenarios:\\n  a:\\n    executor: constant-vus\\n    vus: 1\\n    "
                      "duration: 1s\\n    flow:\\n      - request: {url: /}\\n\"}",
                      "plan.yaml:2:9: script: MCP runs no Lua from plans");
    assert_tool_error(m, "run_load_test", "{\"plan\":\"target: [\"}", "plan.yaml:");
    assert_tool_error(m, "validate_plan", "{\"plan\":\"nope: 1\\n\"}", "plan.yaml:");
    assert_tool_error(m, "get_run", "{\"id\":1}", "no run 1");
    assert_tool_error(m, "stop_target", "{\"port\":9}", "no target");

    json_t *r = tool(m, "validate_plan",
                     "{\"plan\":\"target: http://127.0.0.1:9\\nscenarios:\\n  a:\\n    executor: "
                     "constant-vus\\n    vus: 5\\n    duration: 1s\\n    flow:\\n      - "
                     "request: {url: /}\\n\"}");
    assert_false(json_is_true(json_object_get(r, "isError")));
    assert_non_null(strstr(text0(r), "plan OK"));
    json_decref(r);
    sq_mcp_free(m);

    /* The operator's --allow-host lets a host past the name check (then the engine fails to
     * resolve .invalid, a run error: not a cap). */
    struct sq_mcp_config cfg = {.allow_hosts = {"example.invalid"}, .nallow_hosts = 1};
    assert_int_equal(sq_mcp_new(&cfg, &m), 0);
    r = tool(m, "run_load_test", "{\"quick\":{\"url\":\"http://example.invalid/\"}}");
    assert_true(json_is_true(json_object_get(r, "isError")));
    assert_null(strstr(text0(r), "cap:"));
    json_decref(r);
    sq_mcp_free(m);
}

static void test_run(void **state)
{
    (void)state;
    struct sq_mcp *m = new_mcp();
    json_t *r = tool(m, "start_target", "{}");
    assert_false(json_is_true(json_object_get(r, "isError")));
    json_t *sc = json_object_get(r, "structuredContent");
    int port = (int)json_integer_value(json_object_get(sc, "port"));
    assert_true(port > 0);
    /* The structured content is also given as JSON text. */
    json_t *c1 = json_array_get(json_object_get(r, "content"), 1);
    json_t *again = json_loads(json_string_value(json_object_get(c1, "text")), 0, NULL);
    assert_true(json_equal(again, sc));
    json_decref(again);
    json_decref(r);

    char args[256];
    snprintf(args, sizeof(args),
             "{\"quick\":{\"url\":\"http://127.0.0.1:%d/fast\",\"connections\":2,\"threads\":1,"
             "\"requests\":200}}",
             port);
    r = tool(m, "run_load_test", args);
    if (json_is_true(json_object_get(r, "isError")))
        fail_msg("run: %s", text0(r));
    sc = json_object_get(r, "structuredContent");
    assert_int_equal(json_integer_value(json_object_get(sc, "run_id")), 1);
    json_t *doc = json_object_get(sc, "result");
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "squall.result/1");
    json_t *req = json_object_get(doc, "requests");
    assert_int_equal(json_integer_value(json_object_get(req, "completed")), 200);
    assert_non_null(strstr(text0(r), "run 1\n"));
    json_decref(r);

    snprintf(args, sizeof(args),
             "{\"plan\":\"target: http://127.0.0.1:%d\\nscenarios:\\n  a:\\n    executor: "
             "per-vu-iterations\\n    vus: 2\\n    iterations: 5\\n    maxDuration: 10s\\n    "
             "flow:\\n      - request: {url: /ok}\\n\"}",
             port);
    r = tool(m, "run_load_test", args);
    if (json_is_true(json_object_get(r, "isError")))
        fail_msg("plan run: %s", text0(r));
    doc = json_object_get(json_object_get(r, "structuredContent"), "result");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(doc, "requests"), "completed")), 10);
    json_decref(r);

    r = tool(m, "list_runs", "{}");
    json_t *runs = json_object_get(json_object_get(r, "structuredContent"), "runs");
    assert_int_equal(json_array_size(runs), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(runs, 0), "id")), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(runs, 1), "kind")),
                        "quick");
    json_decref(r);

    r = tool(m, "compare_runs", "{\"a\":1,\"b\":2}");
    assert_false(json_is_true(json_object_get(r, "isError")));
    assert_non_null(
        json_object_get(json_object_get(json_object_get(r, "structuredContent"), "deltas"), "rps"));
    json_decref(r);

    r = tool(m, "get_run", "{\"id\":1}");
    assert_false(json_is_true(json_object_get(r, "isError")));
    doc = json_object_get(json_object_get(r, "structuredContent"), "result");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(doc, "requests"), "completed")), 200);
    json_decref(r);

    /* An inbox: a run posts to it, inbox_read returns what came (the body cut at max_body). */
    r = tool(m, "inbox_start", "{\"max_captures\":20,\"max_body\":3,\"status\":202}");
    assert_false(json_is_true(json_object_get(r, "isError")));
    int iport =
        (int)json_integer_value(json_object_get(json_object_get(r, "structuredContent"), "port"));
    json_decref(r);
    snprintf(args, sizeof(args),
             "{\"quick\":{\"url\":\"http://127.0.0.1:%d/hook\",\"method\":\"POST\","
             "\"body\":\"hello\",\"connections\":1,\"threads\":1,\"requests\":30}}",
             iport);
    r = tool(m, "run_load_test", args);
    assert_false(json_is_true(json_object_get(r, "isError")));
    json_decref(r);
    snprintf(args, sizeof(args), "{\"port\":%d,\"since\":0,\"limit\":5,\"path\":\"/hook\"}", iport);
    r = tool(m, "inbox_read", args);
    sc = json_object_get(r, "structuredContent");
    json_t *caps = json_object_get(sc, "captures");
    assert_int_equal(json_array_size(caps), 5);
    assert_int_equal(json_integer_value(json_object_get(sc, "captured")), 30);
    assert_int_equal(json_integer_value(json_object_get(sc, "evicted")), 10);
    json_t *c0 = json_array_get(caps, 0);
    assert_int_equal(json_integer_value(json_object_get(c0, "seq")), 11);
    assert_string_equal(json_string_value(json_object_get(c0, "body")), "hel");
    assert_true(json_is_true(json_object_get(c0, "truncated")));
    json_decref(r);
    snprintf(args, sizeof(args), "{\"port\":%d}", iport);
    r = tool(m, "inbox_stop", args);
    assert_false(json_is_true(json_object_get(r, "isError")));
    json_decref(r);
    assert_tool_error(m, "inbox_read", args, "no inbox");

    /* stamp_header: the stamp is looked for only there, so a stamped body is not matched. */
    r = tool(m, "inbox_start", "{\"stamp_header\":\"X-Stamp\"}");
    assert_false(json_is_true(json_object_get(r, "isError")));
    iport =
        (int)json_integer_value(json_object_get(json_object_get(r, "structuredContent"), "port"));
    json_decref(r);
    snprintf(args, sizeof(args),
             "{\"quick\":{\"url\":\"http://127.0.0.1:%d/hook\",\"method\":\"POST\","
             "\"body\":\"{\\\"s\\\":\\\"{{$stamp}}\\\"}\",\"connections\":1,\"threads\":1,"
             "\"requests\":3}}",
             iport);
    r = tool(m, "run_load_test", args);
    assert_false(json_is_true(json_object_get(r, "isError")));
    json_decref(r);
    snprintf(args, sizeof(args), "{\"port\":%d}", iport);
    r = tool(m, "inbox_read", args);
    caps = json_object_get(json_object_get(r, "structuredContent"), "captures");
    assert_int_equal(json_array_size(caps), 3);
    c0 = json_array_get(caps, 0);
    assert_non_null(strstr(json_string_value(json_object_get(c0, "body")), "\"s\":\""));
    assert_true(json_is_null(json_object_get(c0, "stamp")));
    json_decref(r);
    r = tool(m, "inbox_stop", args);
    assert_false(json_is_true(json_object_get(r, "isError")));
    json_decref(r);

    snprintf(args, sizeof(args), "{\"port\":%d}", port);
    r = tool(m, "stop_target", args);
    assert_false(json_is_true(json_object_get(r, "isError")));
    json_decref(r);
    assert_tool_error(m, "stop_target", args, "no target");
    sq_mcp_free(m);
}

static int quick_run(struct sq_mcp *m, int port, const char *path, int requests)
{
    char args[256];
    snprintf(args, sizeof(args),
             "{\"quick\":{\"url\":\"http://127.0.0.1:%d%s\",\"connections\":2,\"threads\":1,"
             "\"requests\":%d}}",
             port, path, requests);
    json_t *r = tool(m, "run_load_test", args);
    if (json_is_true(json_object_get(r, "isError")))
        fail_msg("run: %s", text0(r));
    int id =
        (int)json_integer_value(json_object_get(json_object_get(r, "structuredContent"), "run_id"));
    json_decref(r);
    return id;
}

static void test_store(void **state)
{
    (void)state;
    char dir[] = "/tmp/squall-test-mcp-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct sq_store *st = NULL;
    char err[256];
    assert_int_equal(sq_store_open(dir, NULL, &st, err, sizeof(err)), 0);
    struct sq_mcp_config cfg = {.store = st};
    struct sq_mcp *m = NULL;
    assert_int_equal(sq_mcp_new(&cfg, &m), 0);
    json_t *r = tool(m, "start_target", "{}");
    int port =
        (int)json_integer_value(json_object_get(json_object_get(r, "structuredContent"), "port"));
    json_decref(r);
    int a = quick_run(m, port, "/fast", 300);
    int b = quick_run(m, port, "/delay/3", 20);
    assert_true(a >= 1 && b == a + 1);

    /* list_runs and get_run read the store (a second server on it sees the same runs) */
    struct sq_mcp *m2 = NULL;
    assert_int_equal(sq_mcp_new(&cfg, &m2), 0);
    r = tool(m2, "list_runs", "{}");
    json_t *runs = json_object_get(json_object_get(r, "structuredContent"), "runs");
    assert_int_equal(json_array_size(runs), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(runs, 0), "id")), b);
    assert_string_equal(json_string_value(json_object_get(json_array_get(runs, 1), "status")),
                        "finished");
    json_decref(r);
    char args[128];
    snprintf(args, sizeof(args), "{\"id\":%d}", a);
    r = tool(m2, "get_run", args);
    json_t *doc = json_object_get(json_object_get(r, "structuredContent"), "result");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(doc, "requests"), "completed")), 300);
    json_decref(r);

    snprintf(args, sizeof(args), "{\"a\":%d,\"b\":%d}", a, b);
    r = tool(m2, "compare_runs", args);
    assert_false(json_is_true(json_object_get(r, "isError")));
    json_t *dl = json_object_get(json_object_get(r, "structuredContent"), "deltas");
    assert_true(json_real_value(json_object_get(json_object_get(dl, "p50_us"), "delta")) > 2000);
    assert_true(json_real_value(json_object_get(json_object_get(dl, "rps"), "delta")) < 0);
    assert_true(json_real_value(json_object_get(json_object_get(dl, "completed"), "a")) == 300);
    assert_non_null(json_object_get(dl, "errors"));
    assert_non_null(json_object_get(dl, "p90_us"));
    assert_non_null(json_object_get(dl, "p99_us"));
    assert_non_null(strstr(text0(r), "p99_us"));
    json_decref(r);
    assert_tool_error(m2, "compare_runs", "{\"a\":1,\"b\":999}", "no run 999");
    assert_tool_error(m2, "get_run", "{\"id\":999}", "no run 999");
    assert_tool_error(m2, "stop_run", "{\"id\":1}", "only the daemon");
    r = call(m2, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"compare_runs\",\"arguments\":{\"a\":1}}}");
    assert_int_equal(error_code(r), -32602);
    json_decref(r);
    sq_mcp_free(m2);
    sq_mcp_free(m);
    sq_store_close(st);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- resources and prompts ---- */

static json_t *rpc(struct sq_mcp *m, const char *method, const char *params)
{
    char req[1024];
    snprintf(req, sizeof(req), "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"%s\",\"params\":%s}",
             method, params);
    return call(m, req);
}

/* resources/read's one text content for uri (asserts the shape). */
static json_t *read_text(struct sq_mcp *m, const char *uri, const char *mime)
{
    char params[256];
    snprintf(params, sizeof(params), "{\"uri\":\"%s\"}", uri);
    json_t *v = rpc(m, "resources/read", params);
    json_t *c = json_object_get(json_object_get(v, "result"), "contents");
    if (json_array_size(c) != 1)
        fail_msg("%s: %s", uri, json_dumps(v, 0));
    json_t *c0 = json_array_get(c, 0);
    assert_string_equal(json_string_value(json_object_get(c0, "uri")), uri);
    assert_string_equal(json_string_value(json_object_get(c0, "mimeType")), mime);
    json_t *t = json_incref(json_object_get(c0, "text"));
    assert_true(json_is_string(t));
    json_decref(v);
    return t;
}

static void test_resources(void **state)
{
    (void)state;
    char dir[] = "/tmp/squall-test-mcpres-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct sq_store *st = NULL;
    char err[256];
    assert_int_equal(sq_store_open(dir, NULL, &st, err, sizeof(err)), 0);
    const char *hosts[] = {"lab.example"};
    struct sq_mcp_config cfg = {.store = st, .nallow_hosts = 1};
    cfg.allow_hosts[0] = hosts[0];
    struct sq_mcp *m = NULL;
    assert_int_equal(sq_mcp_new(&cfg, &m), 0);

    json_t *v = call(m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                        "\"protocolVersion\":\"2025-06-18\"}}");
    json_t *caps = json_object_get(json_object_get(v, "result"), "capabilities");
    assert_non_null(json_object_get(caps, "resources"));
    assert_non_null(json_object_get(caps, "prompts"));
    json_decref(v);

    /* the static three, no run yet */
    v = rpc(m, "resources/list", "{}");
    json_t *l = json_object_get(json_object_get(v, "result"), "resources");
    assert_int_equal(json_array_size(l), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 0), "uri")),
                        "squall://caps");
    json_decref(v);
    json_t *t = read_text(m, "squall://caps", "application/json");
    json_t *cd = json_loads(json_string_value(t), 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(cd, "max_vus")), 400);
    assert_int_equal(json_integer_value(json_object_get(cd, "max_duration_s")), 300);
    assert_string_equal(json_string_value(json_array_get(json_object_get(cd, "allowed_hosts"), 0)),
                        "lab.example");
    json_decref(cd);
    json_decref(t);
    t = read_text(m, "squall://docs/plans.md", "text/markdown");
    assert_non_null(strstr(json_string_value(t), "scenarios"));
    json_decref(t);
    t = read_text(m, "squall://schema/result", "application/schema+json");
    cd = json_loads(json_string_value(t), 0, NULL);
    assert_true(json_is_object(json_object_get(cd, "properties")));
    json_decref(cd);
    json_decref(t);
    v = rpc(m, "resources/templates/list", "{}");
    json_t *tp =
        json_array_get(json_object_get(json_object_get(v, "result"), "resourceTemplates"), 0);
    assert_string_equal(json_string_value(json_object_get(tp, "uriTemplate")),
                        "squall://runs/{id}");
    json_decref(v);

    /* not found: -32002 with the URI as data; bad params: -32602 */
    const char *missing[] = {"squall://runs/1", "squall://runs/0",    "squall://runs/x",
                             "squall://nope",   "file:///etc/passwd", "squall://runs/"};
    for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
        char params[128];
        snprintf(params, sizeof(params), "{\"uri\":\"%s\"}", missing[i]);
        v = rpc(m, "resources/read", params);
        if (error_code(v) != SQ_MCP_RESOURCE_NOT_FOUND)
            fail_msg("%s: %s", missing[i], json_dumps(v, 0));
        assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_object_get(v, "error"), "data"), "uri")),
                            missing[i]);
        json_decref(v);
    }
    v = rpc(m, "resources/read", "{}");
    assert_int_equal(error_code(v), SQ_MCP_INVALID_PARAMS);
    json_decref(v);
    v = rpc(m, "resources/list", "{\"cursor\":\"abc\"}");
    assert_int_equal(error_code(v), SQ_MCP_INVALID_PARAMS);
    json_decref(v);

    /* a run becomes a resource whose text is get_run's document */
    json_t *r = tool(m, "start_target", "{}");
    int port =
        (int)json_integer_value(json_object_get(json_object_get(r, "structuredContent"), "port"));
    json_decref(r);
    int id = quick_run(m, port, "/fast", 100);
    v = rpc(m, "resources/list", "{}");
    l = json_object_get(json_object_get(v, "result"), "resources");
    assert_int_equal(json_array_size(l), 4);
    char uri[64];
    snprintf(uri, sizeof(uri), "squall://runs/%d", id);
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 3), "uri")), uri);
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 3), "mimeType")),
                        "application/json");
    json_decref(v);
    t = read_text(m, uri, "application/json");
    cd = json_loads(json_string_value(t), 0, NULL);
    char args[64];
    snprintf(args, sizeof(args), "{\"id\":%d}", id);
    r = tool(m, "get_run", args);
    assert_true(json_equal(cd, json_object_get(json_object_get(r, "structuredContent"), "result")));
    json_decref(r);
    json_decref(cd);
    json_decref(t);

    /* prompts */
    v = rpc(m, "prompts/list", "{}");
    json_t *pl = json_object_get(json_object_get(v, "result"), "prompts");
    assert_int_equal(json_array_size(pl), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(pl, 0), "name")),
                        "load_test_endpoint");
    json_decref(v);
    v = rpc(m, "prompts/get",
            "{\"name\":\"load_test_endpoint\",\"arguments\":{\"url\":\"http://127.0.0.1:1/x\","
            "\"rate\":\"20000\",\"duration\":\"20s\"}}");
    json_t *msg0 = json_array_get(json_object_get(json_object_get(v, "result"), "messages"), 0);
    const char *pt = json_string_value(json_object_get(json_object_get(msg0, "content"), "text"));
    assert_non_null(pt);
    assert_non_null(strstr(pt, "http://127.0.0.1:1/x"));
    assert_non_null(strstr(pt, "over the cap")); /* 20000/s is capped to 10000 */
    assert_non_null(strstr(pt, "\"rate\": 10000"));
    json_decref(v);
    char params[128];
    snprintf(params, sizeof(params),
             "{\"name\":\"investigate_run\",\"arguments\":{\"run_id\":\"%d\"}}", id);
    v = rpc(m, "prompts/get", params);
    json_t *msg1 = json_array_get(json_object_get(json_object_get(v, "result"), "messages"), 1);
    json_t *res = json_object_get(json_object_get(msg1, "content"), "resource");
    assert_string_equal(json_string_value(json_object_get(res, "uri")), uri);
    assert_non_null(strstr(json_string_value(json_object_get(res, "text")), "squall.result/1"));
    json_decref(v);
    const char *bad[] = {
        "{\"name\":\"nope\"}",
        "{\"name\":\"load_test_endpoint\"}",
        "{\"name\":\"load_test_endpoint\",\"arguments\":{\"url\":5}}",
        "{\"name\":\"load_test_endpoint\",\"arguments\":{\"url\":\"u\",\"rate\":\"fast\"}}",
        "{\"name\":\"investigate_run\",\"arguments\":{\"run_id\":\"999\"}}",
        "{\"name\":\"investigate_run\",\"arguments\":[]}",
        "{}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = rpc(m, "prompts/get", bad[i]);
        if (error_code(v) != SQ_MCP_INVALID_PARAMS)
            fail_msg("%s: %s", bad[i], json_dumps(v, 0));
        json_decref(v);
    }
    sq_mcp_free(m);
    sq_store_close(st);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* The daemon's seam: a fake host that queues. */
struct fake_host {
    int calls;
    json_t *args, *rpc_id;
};

static int fake_submit(void *ud, const json_t *args, const json_t *rpc_id, const json_t *progress,
                       double total_s, int64_t *run_id, char *err, size_t len)
{
    (void)progress;
    (void)total_s;
    (void)err;
    (void)len;
    struct fake_host *h = ud;
    h->calls++;
    json_decref(h->args);
    json_decref(h->rpc_id);
    h->args = json_deep_copy(args);
    h->rpc_id = json_deep_copy(rpc_id);
    *run_id = 42;
    return 0;
}

static int fake_stop(void *ud, int64_t id, char *msg, size_t len)
{
    (void)ud;
    if (id != 42) {
        snprintf(msg, len, "no such run");
        return -2;
    }
    snprintf(msg, len, "run 42 is stopping");
    return 0;
}

static void test_submit(void **state)
{
    (void)state;
    struct fake_host h = {0};
    struct sq_mcp_config cfg = {.host_ud = &h, .submit = fake_submit, .stop_run = fake_stop};
    struct sq_mcp *m = NULL;
    assert_int_equal(sq_mcp_new(&cfg, &m), 0);
    /* over a cap: refused here, never handed over */
    assert_tool_error(m, "run_load_test",
                      "{\"quick\":{\"url\":\"http://127.0.0.1:9/\",\"connections\":401}}",
                      "cap: max VUs 400");
    assert_tool_error(m, "run_load_test", "{\"quick\":{\"url\":\"http://192.0.2.1:9/\"}}",
                      "loopback");
    assert_int_equal(h.calls, 0);
    /* within the caps: handed over, no answer now */
    const char *req = "{\"jsonrpc\":\"2.0\",\"id\":\"r-7\",\"method\":\"tools/call\",\"params\":"
                      "{\"name\":\"run_load_test\",\"arguments\":{\"quick\":{\"url\":"
                      "\"http://127.0.0.1:9/x\",\"connections\":2,\"duration\":\"1s\"}}}}";
    char *resp = sq_mcp_handle(m, req, strlen(req));
    assert_null(resp);
    assert_true(sq_mcp_deferred(m));
    assert_int_equal(h.calls, 1);
    assert_string_equal(json_string_value(h.rpc_id), "r-7");
    assert_string_equal(json_string_value(json_object_get(json_object_get(h.args, "quick"), "url")),
                        "http://127.0.0.1:9/x");
    /* the next request is answered at once */
    json_t *v = call(m, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}");
    assert_false(sq_mcp_deferred(m));
    json_decref(v);
    /* the host's answer when the run ends */
    char *ans = sq_mcp_run_answer(h.rpc_id, 42, "failed", "no request succeeded", NULL);
    v = json_loads(ans, 0, NULL);
    free(ans);
    assert_string_equal(json_string_value(json_object_get(v, "id")), "r-7");
    json_t *res = json_object_get(v, "result");
    assert_true(json_is_true(json_object_get(res, "isError")));
    assert_non_null(strstr(text0(res), "run 42 failed: no request succeeded"));
    json_decref(v);
    json_t *r = tool(m, "stop_run", "{\"id\":42}");
    assert_false(json_is_true(json_object_get(r, "isError")));
    assert_non_null(strstr(text0(r), "stopping"));
    json_decref(r);
    assert_tool_error(m, "stop_run", "{\"id\":41}", "no such run");
    json_decref(h.args);
    json_decref(h.rpc_id);
    sq_mcp_free(m);
}

static void collect(void *ud, const char *msg)
{
    json_t *a = ud;
    json_array_append_new(a, json_loads(msg, 0, NULL));
}

static void test_progress(void **state)
{
    (void)state;
    json_t *got = json_array();
    struct sq_mcp_config cfg = {.notify = collect, .notify_ud = got};
    struct sq_mcp *m = NULL;
    assert_int_equal(sq_mcp_new(&cfg, &m), 0);
    json_t *r = tool(m, "start_target", "{}");
    int port =
        (int)json_integer_value(json_object_get(json_object_get(r, "structuredContent"), "port"));
    json_decref(r);
    char req[512];
    snprintf(req, sizeof(req),
             "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"_meta\":{"
             "\"progressToken\":\"tok\"},\"name\":\"run_load_test\",\"arguments\":{\"quick\":{"
             "\"url\":\"http://127.0.0.1:%d/fast\",\"connections\":1,\"threads\":1,"
             "\"duration\":\"1500ms\"}}}}",
             port);
    json_t *v = call(m, req);
    assert_false(json_is_true(json_object_get(json_object_get(v, "result"), "isError")));
    json_decref(v);
    assert_true(json_array_size(got) >= 1);
    json_t *n = json_array_get(got, 0);
    assert_string_equal(json_string_value(json_object_get(n, "method")), "notifications/progress");
    json_t *pp = json_object_get(n, "params");
    assert_string_equal(json_string_value(json_object_get(pp, "progressToken")), "tok");
    assert_true(json_real_value(json_object_get(pp, "total")) == 1.5);
    assert_true(json_real_value(json_object_get(pp, "progress")) > 0);
    /* without a token: none */
    size_t before = json_array_size(got);
    snprintf(req, sizeof(req),
             "{\"quick\":{\"url\":\"http://127.0.0.1:%d/fast\",\"connections\":1,\"threads\":1,"
             "\"duration\":\"1100ms\"}}",
             port);
    r = tool(m, "run_load_test", req);
    json_decref(r);
    assert_int_equal(json_array_size(got), before);
    sq_mcp_free(m);
    json_decref(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table), cmocka_unit_test(test_parse_prefixes),
        cmocka_unit_test(test_initialize),  cmocka_unit_test(test_methods),
        cmocka_unit_test(test_caps),        cmocka_unit_test(test_run),
        cmocka_unit_test(test_store),       cmocka_unit_test(test_submit),
        cmocka_unit_test(test_progress),    cmocka_unit_test(test_resources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
