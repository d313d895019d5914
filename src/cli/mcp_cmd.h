/* cli/mcp_cmd.h - `squall mcp`: the Model Context Protocol over stdio (docs/mcp.md). */
#ifndef SQ_CLI_MCP_CMD_H
#define SQ_CLI_MCP_CMD_H

/* `squall mcp [--allow-host HOST]...`; argv[0] is "mcp". Returns the exit status. */
int sq_cli_mcp(int argc, char **argv);

#endif
