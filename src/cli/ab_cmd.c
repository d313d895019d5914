#include "cli/cli.h"
int sq_cli_ab(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return 2;
}
