/* cli/mcp_cmd.c - `squall mcp`: the MCP server (mcp/mcp.h) on stdin and stdout, as an agent host
 * (Claude Desktop, an SDK client) starts it.
 *
 * The stdio transport of MCP 2025-06-18: one JSON-RPC message per line each way (a message never
 * holds a newline), nothing but messages on stdout, logs on stderr. A line longer than
 * SQ_MCP_MAX_MSG is dropped up to its newline and answered -32600. EOF on stdin ends the server;
 * the targets the tools started are stopped. The first SIGINT ends the run in progress and then
 * the server; a second kills it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/mcp.h"
#include "mcp/mcp.h"
#include "store/store.h"

#define FACE "squall mcp"

static const char usage[] =
    "usage: squall mcp [--allow-host HOST]... [--store PATH]\n"
    "\n"
    "Speaks the Model Context Protocol (2025-06-18) on stdin and stdout, for an AI agent's host\n"
    "(Claude Desktop, an MCP SDK client). Tools: run_load_test, validate_plan, start_target,\n"
    "stop_target, inbox_start, inbox_read, inbox_stop, list_runs, get_run, compare_runs\n"
    "(docs/mcp.md). `squall serve` offers the same tools at POST /mcp.\n"
    "\n"
    "Every call is capped: at most 400 VUs, 10,000 requests/s and 5 minutes per run, and loads\n"
    "go only to loopback (127.0.0.0/8, ::1, localhost).\n"
    "      --allow-host HOST   also allow loads to HOST, as URLs name it (repeatable, at most 16)\n"
    "      --store PATH        record runs in this run store (a data directory or a .db file, as\n"
    "                          squall serve --data takes; not one a running daemon holds):\n"
    "                          list_runs, get_run and compare_runs read it\n"
    "  -h, --help              this help\n";

/* Reads one line (without its newline) into *buf, at most SQ_MCP_MAX_MSG bytes. Returns its
 * length, -1 at EOF with nothing read, -2 for a line too long (dropped up to its newline). */
static long read_line(FILE *in, char **buf, size_t *cap)
{
    size_t n = 0;
    bool over = false;
    int c;
    while ((c = getc_unlocked(in)) != EOF && c != '\n') {
        if (over)
            continue;
        if (n + 1 >= *cap) {
            if (*cap >= SQ_MCP_MAX_MSG) {
                over = true;
                continue;
            }
            size_t ncap = *cap ? *cap * 2 : 4096;
            char *nb = realloc(*buf, ncap);
            if (!nb)
                return -3;
            *buf = nb;
            *cap = ncap;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && n == 0 && !over)
        return -1;
    if (over)
        return -2;
    (*buf)[n] = '\0';
    if (n && (*buf)[n - 1] == '\r')
        (*buf)[--n] = '\0';
    return (long)n;
}

/* A notification while a tool call runs (progress): one line on stdout, between responses. */
static void notify_line(void *ud, const char *msg)
{
    (void)ud;
    fputs(msg, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

int sq_cli_mcp(int argc, char **argv)
{
    struct sq_mcp_config cfg = {0};
    const char *store_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return SQ_EXIT_OK;
        }
        const char *v = NULL;
        if (strcmp(a, "--store") == 0 || strncmp(a, "--store=", 8) == 0) {
            if (a[7] == '=')
                store_path = a + 8;
            else if (i + 1 >= argc)
                return sq_cli_usage_error(FACE, "--store needs a value");
            else
                store_path = argv[++i];
            if (!store_path[0])
                return sq_cli_usage_error(FACE, "--store: the path is empty");
            continue;
        }
        if (strcmp(a, "--allow-host") == 0) {
            if (i + 1 >= argc)
                return sq_cli_usage_error(FACE, "--allow-host needs a value");
            v = argv[++i];
        } else if (strncmp(a, "--allow-host=", 13) == 0) {
            v = a + 13;
        } else {
            return sq_cli_usage_error(FACE, "unknown flag '%s'", a);
        }
        if (!v[0] || strpbrk(v, "/:@ ") != NULL)
            return sq_cli_usage_error(FACE, "--allow-host: '%s' is not a host name", v);
        if (cfg.nallow_hosts == SQ_MCP_MAX_HOSTS)
            return sq_cli_usage_error(FACE, "--allow-host: at most %d hosts", SQ_MCP_MAX_HOSTS);
        cfg.allow_hosts[cfg.nallow_hosts++] = v;
    }
    struct sq_store *store = NULL;
    if (store_path) {
        char err[512];
        if (sq_store_open(store_path, NULL, &store, err, sizeof(err)) < 0) {
            fprintf(stderr, "squall mcp: --store: %s\n", err);
            return SQ_EXIT_FAIL;
        }
        cfg.store = store;
    }
    cfg.notify = notify_line;
    cfg.stop = sq_cli_signals_begin();
    struct sq_mcp *m = NULL;
    if (sq_mcp_new(&cfg, &m) < 0) {
        fprintf(stderr, "squall: out of memory\n");
        sq_store_close(store);
        return SQ_EXIT_FAIL;
    }
    char *buf = NULL;
    size_t cap = 0;
    int exit_code = SQ_EXIT_OK;
    for (;;) {
        long n = read_line(stdin, &buf, &cap);
        if (n == -1)
            break;
        char *resp = NULL;
        if (n == -3) {
            fprintf(stderr, "squall: out of memory\n");
            exit_code = SQ_EXIT_FAIL;
            break;
        }
        if (n == -2) {
            static const char too_long[] =
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":"
                "\"Invalid Request: the message is longer than 4 MiB\"}}";
            resp = strdup(too_long);
        } else if (n == 0) {
            continue; /* a blank line between messages */
        } else {
            resp = sq_mcp_handle(m, buf, (size_t)n);
        }
        if (resp) {
            fputs(resp, stdout);
            fputc('\n', stdout);
            free(resp);
            if (fflush(stdout) != 0)
                break; /* the host went away */
        }
        if (*cfg.stop)
            break;
    }
    free(buf);
    sq_mcp_free(m);
    sq_store_close(store);
    sq_cli_signals_end();
    return exit_code;
}
