/* cli/inbox.h - `squall inbox`: the webhook inbox (docs/inbox.md). */
#ifndef SQ_CLI_INBOX_H
#define SQ_CLI_INBOX_H

/* `squall inbox [flags]`; argv[0] is "inbox". Returns the exit status. */
int sq_cli_inbox(int argc, char **argv);

#endif
