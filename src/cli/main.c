/* cli/main.c - the squall binary: dispatches to a face. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/inbox.h"
#include "cli/mcp.h"
#include "cli/wrk.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        sq_cli_usage(stderr);
        return SQ_EXIT_USAGE;
    }
    if (strcmp(argv[1], "target") == 0)
        return sq_cli_target(argc - 1, argv + 1);
    if (strcmp(argv[1], "sink") == 0)
        return sq_cli_sink(argc - 1, argv + 1);
    if (strcmp(argv[1], "report") == 0)
        return sq_cli_report(argc - 1, argv + 1);
    if (strcmp(argv[1], "run") == 0)
        return sq_cli_run(argc - 1, argv + 1);
    if (strcmp(argv[1], "validate") == 0)
        return sq_cli_validate(argc - 1, argv + 1);
    if (strcmp(argv[1], "serve") == 0)
        return sq_cli_serve(argc - 1, argv + 1);
    if (strcmp(argv[1], "runs") == 0)
        return sq_cli_runs(argc - 1, argv + 1);
    if (strcmp(argv[1], "agent") == 0)
        return sq_cli_agent(argc - 1, argv + 1);
    if (strcmp(argv[1], "inbox") == 0)
        return sq_cli_inbox(argc - 1, argv + 1);
    if (strcmp(argv[1], "mcp") == 0)
        return sq_cli_mcp(argc - 1, argv + 1);
    if (strcmp(argv[1], "wrk") == 0)
        return sq_cli_wrk(argc - 1, argv + 1);
    if (strcmp(argv[1], "version") == 0) {
        printf("squall %s\n", SQ_VERSION);
        return SQ_EXIT_OK;
    }
    if (strcmp(argv[1], "help") == 0) {
        sq_cli_usage(stdout);
        return SQ_EXIT_OK;
    }
    return sq_cli_quick(argc, argv);
}
