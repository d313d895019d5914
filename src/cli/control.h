/* cli/control.h - a running quick or plan run's control endpoint (--control [HOST:]PORT, on
 * loopback) and `squall control`, its client (docs/quick.md, "Control of a running run"). */
#ifndef SQ_CLI_CONTROL_H
#define SQ_CLI_CONTROL_H

#include <stddef.h>

#include "engine/run.h"
#include "face/distopts.h"

struct sq_server;

struct sq_cli_control {
    struct sq_server *srv;
    struct sq_run_ctl *ctl;
    char token[256]; /* $SQUALL_CONTROL_TOKEN, token_len 0: none asked */
    size_t token_len;
    char *body; /* the last answer's (the server copies it after the handler) */
};

/* With d->control: the run's control made (cfg->ctl) and its endpoint listening, its address
 * printed on stderr. Returns 0 (nothing done without d->control), or the exit status after
 * printing why. */
int sq_cli_control_start(struct sq_cli_control *c, const struct sq_distopts *d,
                         struct sq_run_config *cfg);
/* After the run: the endpoint closed and the control freed. Safe when nothing was started. */
void sq_cli_control_stop(struct sq_cli_control *c, struct sq_run_config *cfg);

/* `squall control [HOST:]PORT [CHANGE]`; argv[0] is "control". Returns the exit status. */
int sq_cli_control(int argc, char **argv);

#endif
