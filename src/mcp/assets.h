/* mcp/assets.h - the documents the MCP server offers as resources, compiled into the binary.
 *
 * cmake/embed.cmake turns docs/plans.md (the plan format reference) and docs/result.schema.json
 * (the result document's JSON Schema) into the byte arrays below (build/gen/mcp_assets.c), so
 * `squall mcp` serves what the docs of the build it came from say. Each array ends with one NUL
 * that its _len does not count.
 */
#ifndef SQ_MCP_ASSETS_H
#define SQ_MCP_ASSETS_H

#include <stddef.h>

extern const unsigned char sq_mcp_plans_md[]; /* docs/plans.md */
extern const size_t sq_mcp_plans_md_len;
extern const unsigned char sq_mcp_result_schema[]; /* docs/result.schema.json */
extern const size_t sq_mcp_result_schema_len;

#endif
