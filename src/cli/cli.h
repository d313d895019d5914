/* cli/cli.h - the faces of the squall binary and its exit codes (docs/quick.md lists them). */
#ifndef SQ_CLI_CLI_H
#define SQ_CLI_CLI_H

#include <stdio.h>

enum {
    SQ_EXIT_OK = 0,          /* the run completed (failed requests are in the summary) */
    SQ_EXIT_FAIL = 1,        /* the run could not do its job: nothing succeeded, internal error */
    SQ_EXIT_USAGE = 2,       /* bad flags, URL or plan */
    SQ_EXIT_THRESHOLDS = 99, /* thresholds failed (k6's convention) */
    SQ_EXIT_SIGNAL = 105,    /* stopped by SIGINT or SIGTERM (k6's external abort); the outputs
                                are written, marked aborted */
    SQ_EXIT_DONE = -1,       /* internal: --help or --version was answered */
};

/* `squall URL [flags]`; argv[0] is the program name. Returns the exit status. */
int sq_cli_quick(int argc, char **argv);
/* `squall --help`: every command, the quick face's flags, the exit codes. */
void sq_cli_usage(FILE *f);
/* The list of commands, one line each (cli/main.c), and the exit codes, for the helps. */
void sq_cli_commands(FILE *f);
void sq_cli_exit_codes(FILE *f);

/* `squall target [flags]`; argv[0] is "target". Returns the exit status. */
int sq_cli_target(int argc, char **argv);

/* `squall report FILE [--html OUT]`; argv[0] is "report". Returns the exit status. */
int sq_cli_report(int argc, char **argv);

/* `squall run PLAN [flags]` and `squall validate PLAN`; argv[0] is the subcommand. */
int sq_cli_run(int argc, char **argv);
int sq_cli_validate(int argc, char **argv);

/* `squall serve [flags]` (the daemon) and `squall runs ...` (its store); argv[0] is the
 * subcommand. */
int sq_cli_serve(int argc, char **argv);
int sq_cli_runs(int argc, char **argv);

/* `squall sink SOURCE... [flags]`; argv[0] is "sink". Returns the exit status. */
int sq_cli_sink(int argc, char **argv);
/* `squall agent --nats URL [flags]`; argv[0] is "agent". Returns the exit status. */
int sq_cli_agent(int argc, char **argv);
/* `squall compare A B`, `squall measure --spawn CMD ...`, `squall ab --arm A=... ...` (the
 * instruments, docs/instruments.md); argv[0] is the subcommand. */
int sq_cli_compare(int argc, char **argv);
int sq_cli_measure(int argc, char **argv);
int sq_cli_ab(int argc, char **argv);

#endif
