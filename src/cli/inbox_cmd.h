/* cli/inbox_cmd.h - `squall inbox`: the webhook inbox (docs/inbox.md). */
#ifndef SQ_CLI_INBOX_CMD_H
#define SQ_CLI_INBOX_CMD_H

/* `squall inbox [flags]`; argv[0] is "inbox". Returns the exit status. */
int sq_cli_inbox(int argc, char **argv);

#include <stdbool.h>
#include <stdint.h>

/* A size as --max-body takes it ("65536", "64KiB", "64k", "1MiB", "1M", "1GiB", "1G"; "b" and
 * "kb", "mb", "gb" too, any case) into *out bytes; false when it is not one or over max
 * (`squall serve --inbox-max-body`, `squall sink --max-memory` too). */
bool sq_cli_parse_size(const char *s, uint64_t max, uint64_t *out);

#endif
