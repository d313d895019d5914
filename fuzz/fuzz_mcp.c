/* fuzz/fuzz_mcp.c - libFuzzer target for the MCP server's message parser and dispatcher
 * (mcp/jsonrpc.c): what an agent's host writes to `squall mcp`'s stdin.
 *
 * sq_mcp_parse takes or refuses any bytes cleanly (a refusal is -32700 or -32600 with a reason),
 * and sq_mcp_handle answers any message that is not a tool call with one line of JSON (or
 * nothing for a notification or a response) that is itself a JSON-RPC response carrying the
 * request's id. Tool calls are parsed but not run here: they would start servers and send load.
 * Seeds: fuzz/corpus/mcp/.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sq_mcp_msg msg;
    char why[256] = "";
    int rc = sq_mcp_parse((const char *)data, size, &msg, why, sizeof(why));
    CHECK(rc == 0 || rc == SQ_MCP_PARSE_ERROR || rc == SQ_MCP_INVALID_REQUEST);
    if (rc != 0)
        CHECK(why[0] != '\0');
    if (rc == SQ_MCP_PARSE_ERROR)
        CHECK(msg.root == NULL);
    bool is_call = rc == 0 && msg.method && strcmp(msg.method, "tools/call") == 0;
    json_decref(msg.root);
    if (is_call)
        return 0;

    static struct sq_mcp *m;
    if (!m && sq_mcp_new(NULL, &m) < 0)
        return 0;
    char *out = sq_mcp_handle(m, (const char *)data, size);
    if (out) {
        CHECK(strchr(out, '\n') == NULL);
        json_t *v = json_loads(out, 0, NULL);
        CHECK(json_is_object(v));
        CHECK(json_object_get(v, "id") != NULL);
        CHECK((json_object_get(v, "result") != NULL) != (json_object_get(v, "error") != NULL));
        json_decref(v);
        free(out);
    }
    return 0;
}
