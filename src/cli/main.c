/* cli/main.c - the squall binary: dispatches to a face.
 *
 * The commands live in one table: its rows dispatch and make the top-level help, so a command
 * added here is listed by `squall --help` (one line each) without another edit.
 */
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/text.h"
#include "cli/cli.h"
#include "cli/control.h"
#include "cli/inbox_cmd.h"
#include "cli/mcp_cmd.h"
#include "cli/wrk.h"

static int version(int argc, char **argv)
{
    SQ_UNUSED(argc);
    SQ_UNUSED(argv);
    printf("squall %s\n", SQ_VERSION);
    return SQ_EXIT_OK;
}

static int help(int argc, char **argv)
{
    SQ_UNUSED(argc);
    SQ_UNUSED(argv);
    sq_cli_usage(stdout);
    return SQ_EXIT_OK;
}

/* Every command: its name, its arguments and what it is for (one line in `squall --help`). The
 * quick face, `squall URL`, has no name: any first argument that is not a command. */
static const struct command {
    const char *name, *args, *what;
    int (*run)(int argc, char **argv); /* argv[0] is the command's name */
} commands[] = {
    {"run", "PLAN [flags]", "run a YAML plan: scenarios, flows, checks, thresholds", sq_cli_run},
    {"validate", "PLAN...", "check plans and print what each would run", sq_cli_validate},
    {"target", "[flags]", "the built-in test server", sq_cli_target},
    {"serve", "[flags]", "the daemon: HTTP API, run store, live dashboard (docs/daemon.md)",
     sq_cli_serve},
    {"runs", "list|show|compare|export", "the daemon's stored runs", sq_cli_runs},
    {"control", "[HOST:]PORT [CHANGE]", "change a run started with --control: rate, VUs, pause",
     sq_cli_control},
    {"agent", "--nats URL", "wait for distributed runs (squall agent --help)", sq_cli_agent},
    {"sink", "SOURCE... [flags]", "count stamped events where they arrive (docs/sink.md)",
     sq_cli_sink},
    {"inbox", "[flags]", "a webhook inbox: captures requests, serves them back", sq_cli_inbox},
    {"mcp", "", "the Model Context Protocol on stdio, for AI agents", sq_cli_mcp},
    {"report", "FILE [--html OUT]", "a saved --json result: its summary or its HTML report",
     sq_cli_report},
    {"compare", "A.json B.json [flags]", "two saved results side by side (docs/instruments.md)",
     sq_cli_compare},
    {"measure", "--spawn CMD [flags]", "a server's life measured: cold start, idle, under load",
     sq_cli_measure},
    {"ab", "--arm A=... --arm B=... [flags]",
     "whether a difference is real: A/B rounds, interleaved", sq_cli_ab},
    {"wrk", "[wrk's flags] URL", "wrk's flags, report and Lua scripts (squall wrk -h)", sq_cli_wrk},
    {"version", "", "print the version", version},
    {"help", "", "this help", help},
};

void sq_cli_commands(FILE *f)
{
    char left[64];
    fprintf(f, "  %-32s %s\n", "squall URL [flags]",
            "load test one URL (the flags below; http:// or https://)");
    for (size_t i = 0; i < SQ_ARRAY_LEN(commands); i++) {
        snprintf(left, sizeof(left), "squall %s%s%s", commands[i].name,
                 commands[i].args[0] ? " " : "", commands[i].args);
        fprintf(f, "  %-32s %s\n", left, commands[i].what);
    }
}

void sq_cli_exit_codes(FILE *f)
{
    fputs("exit codes:\n"
          "    0  the run completed (failed requests are in the summary, not the exit code)\n"
          "    1  the run could not do its job: nothing succeeded (no response of any status),\n"
          "       a plan's target unreachable, an internal error\n"
          "    2  bad flags, URL or plan\n"
          "   99  thresholds crossed (squall run; k6's convention)\n"
          "  105  stopped by SIGINT or SIGTERM (k6's external abort); every output is still\n"
          "       written, marked aborted\n"
          "  130  squall measure or squall ab interrupted (what they started is stopped)\n",
          f);
}

/* A first argument that looks like a misspelt command ("rn", "tagret"): a word, close to one. */
static const char *near_command(const char *arg)
{
    if (!arg[0] || strpbrk(arg, ":/.") || arg[0] == '-')
        return NULL;
    struct sq_suggest s;
    sq_suggest_init(&s, arg, strlen(arg));
    for (size_t i = 0; i < SQ_ARRAY_LEN(commands); i++)
        sq_suggest_try(&s, commands[i].name);
    return s.best;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        sq_cli_usage(stderr);
        return SQ_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return help(argc - 1, argv + 1);
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
        return version(argc - 1, argv + 1);
    for (size_t i = 0; i < SQ_ARRAY_LEN(commands); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    const char *near = near_command(argv[1]);
    if (near) {
        fprintf(stderr,
                "squall: unknown command '%s' (did you mean 'squall %s'?) (see squall --help)\n",
                argv[1], near);
        return SQ_EXIT_USAGE;
    }
    return sq_cli_quick(argc, argv);
}
