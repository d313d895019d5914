/* cli/mcp_cmd.c - `squall mcp`: the MCP server (mcp/mcp.h) on stdin and stdout, as an agent host
 * (Claude Desktop, an SDK client) starts it.
 *
 * The stdio transport of MCP 2025-06-18: one JSON-RPC message per line each way (a message never
 * holds a newline), nothing but messages on stdout, logs on stderr. A line longer than
 * SQ_MCP_MAX_MSG is dropped up to its newline and answered -32600. EOF on stdin ends the server;
 * the targets the tools started are stopped. The first SIGINT ends the run in progress and then
 * the server; a second kills it.
 *
 * Messages are handled one at a time, but stdin is read all the time: a reader thread takes the
 * lines off stdin into a queue that the main thread handles in order. So a notifications/cancelled
 * that names the tools/call in progress is seen while its run goes on: the reader stops the run
 * (the run's stop flag, as SIGINT would), and the main thread then writes no response for that
 * request (the spec: a cancelled request is not answered) and goes on with the next message.
 * A cancellation of a request still in the queue drops it. Other messages that come during a
 * run wait in the queue until it ends.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/mcp_cmd.h"
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

/* ---- the reader thread ---- */

struct line {
    struct line *next;
    long n;     /* the length, or -2 (longer than SQ_MCP_MAX_MSG), -3 (out of memory) */
    char *text; /* NUL-terminated, without its newline (owned) */
};

struct inq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct line *head, **tail;
    bool eof; /* the reader is done: nothing follows what is queued */
    volatile int *stop;
    json_t *inflight; /* the JSON-RPC id of the tools/call being handled, or NULL */
    bool cancelled;   /* a notifications/cancelled named it */
};

static void push(struct inq *q, long n, char *text)
{
    struct line *l = malloc(sizeof(*l));
    pthread_mutex_lock(&q->mu);
    if (l) {
        *l = (struct line){.n = n, .text = text};
        *q->tail = l;
        q->tail = &l->next;
    } else {
        free(text); /* out of memory: the line is lost */
    }
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static void done(struct inq *q)
{
    pthread_mutex_lock(&q->mu);
    q->eof = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* True when the queued line l is a request with the id rid. */
static bool queued_request(const struct line *l, const json_t *rid)
{
    if (l->n <= 0)
        return false;
    struct sq_mcp_msg msg;
    bool yes = sq_mcp_parse(l->text, (size_t)l->n, &msg, NULL, 0) == 0 && msg.method && msg.id &&
               json_equal(msg.id, rid);
    json_decref(msg.root);
    return yes;
}

/* A notifications/cancelled for the request in progress stops its run; one for a request still
 * in the queue drops it (it is never handled nor answered). Returns true for a
 * notifications/cancelled (handled here: it is not queued). */
static bool cancel_seen(struct inq *q, const char *text, size_t n)
{
    struct sq_mcp_msg msg;
    bool is = sq_mcp_parse(text, n, &msg, NULL, 0) == 0 && msg.method && !msg.id &&
              strcmp(msg.method, "notifications/cancelled") == 0;
    json_t *rid = is && msg.params ? json_object_get(msg.params, "requestId") : NULL;
    if (rid) {
        pthread_mutex_lock(&q->mu);
        if (q->inflight && json_equal(q->inflight, rid)) {
            q->cancelled = true;
            __atomic_store_n(q->stop, 1, __ATOMIC_RELAXED);
        } else {
            for (struct line **pp = &q->head; *pp; pp = &(*pp)->next) {
                struct line *l = *pp;
                if (!queued_request(l, rid))
                    continue;
                *pp = l->next;
                if (q->tail == &l->next)
                    q->tail = pp;
                free(l->text);
                free(l);
                break;
            }
        }
        pthread_mutex_unlock(&q->mu);
    }
    json_decref(msg.root);
    return is;
}

/* Reads stdin (fd 0) line by line into q until EOF; cancelled by the main thread when it ends
 * first (read is a cancellation point; nothing is held there). */
static void *reader(void *arg)
{
    struct inq *q = arg;
    static char chunk[65536];
    char *cur = NULL;
    size_t n = 0, cap = 0;
    bool over = false;
    for (;;) {
        ssize_t r = read(0, chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; i++) {
            char c = chunk[i];
            if (c != '\n') {
                if (over)
                    continue;
                if (n + 1 >= cap) {
                    if (cap >= SQ_MCP_MAX_MSG) {
                        over = true;
                        continue;
                    }
                    size_t ncap = cap ? cap * 2 : 4096;
                    char *nb = realloc(cur, ncap);
                    if (!nb) {
                        free(cur);
                        push(q, -3, NULL);
                        done(q);
                        return NULL;
                    }
                    cur = nb;
                    cap = ncap;
                }
                cur[n++] = c;
                continue;
            }
            if (over) {
                push(q, -2, NULL);
            } else {
                if (n && cur[n - 1] == '\r')
                    n--;
                if (n && !cancel_seen(q, cur, n)) {
                    cur[n] = '\0';
                    push(q, (long)n, cur);
                    cur = NULL;
                    cap = 0;
                }
            }
            n = 0;
            over = false;
        }
    }
    if (n && !over) { /* a last line without its newline */
        cur[n] = '\0';
        if (!cancel_seen(q, cur, n)) {
            push(q, (long)n, cur);
            cur = NULL;
        }
    } else if (over) {
        push(q, -2, NULL);
    }
    free(cur);
    done(q);
    return NULL;
}

/* The next line; NULL at the end of stdin (*eof true) or once *stop is set (SIGINT) with none
 * waiting. */
static struct line *pop(struct inq *q, bool *eof)
{
    pthread_mutex_lock(&q->mu);
    while (!q->head && !q->eof && !*q->stop) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 200 * 1000 * 1000;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&q->cv, &q->mu, &dl);
    }
    struct line *l = q->head;
    if (l) {
        q->head = l->next;
        if (!q->head)
            q->tail = &q->head;
    }
    *eof = !l && q->eof;
    pthread_mutex_unlock(&q->mu);
    return l;
}

/* Before a message is handled: a tools/call becomes the request a cancel may name. */
static void begin_request(struct inq *q, const char *text, size_t n)
{
    struct sq_mcp_msg msg;
    json_t *id = NULL;
    if (sq_mcp_parse(text, n, &msg, NULL, 0) == 0 && msg.method && msg.id &&
        strcmp(msg.method, "tools/call") == 0)
        id = json_deep_copy(msg.id);
    json_decref(msg.root);
    pthread_mutex_lock(&q->mu);
    q->inflight = id;
    q->cancelled = false;
    pthread_mutex_unlock(&q->mu);
}

/* After it: true when it was cancelled (its response is dropped). */
static bool end_request(struct inq *q)
{
    pthread_mutex_lock(&q->mu);
    bool c = q->cancelled;
    json_decref(q->inflight);
    q->inflight = NULL;
    q->cancelled = false;
    pthread_mutex_unlock(&q->mu);
    return c;
}

/* A notification while a tool call runs (progress): one line on stdout, between responses. */
static void notify_line(void *ud, const char *msg)
{
    (void)ud;
    fputs(msg, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* ---- the command: parse -> prepare -> run ---- */

/* What the phases of one `squall mcp` share. */
struct mcpcmd {
    struct sq_mcp_config cfg;
    const char *store_path; /* --store DIR, or NULL */
    struct sq_store *store;
    struct sq_mcp *m;
    struct inq q;     /* the lines the reader thread took off stdin */
    pthread_t rt;     /* the reader thread */
    bool reader_done; /* it has seen the end of stdin: nothing to cancel */
};

/* --store DIR and --allow-host HOST (repeatable). Returns 0, SQ_EXIT_DONE (--help answered) or
 * the exit status after printing why. */
static int mcp_parse(struct mcpcmd *c, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return SQ_EXIT_DONE;
        }
        const char *v = NULL;
        if (strcmp(a, "--store") == 0 || strncmp(a, "--store=", 8) == 0) {
            if (a[7] == '=')
                c->store_path = a + 8;
            else if (i + 1 >= argc)
                return sq_cli_usage_error(FACE, "--store needs a value");
            else
                c->store_path = argv[++i];
            if (!c->store_path[0])
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
        if (c->cfg.nallow_hosts == SQ_MCP_MAX_HOSTS)
            return sq_cli_usage_error(FACE, "--allow-host: at most %d hosts", SQ_MCP_MAX_HOSTS);
        c->cfg.allow_hosts[c->cfg.nallow_hosts++] = v;
    }
    return 0;
}

/* The store opened, the server made, the signals caught, the reader thread started. Returns 0
 * or the exit status after printing why (what was made is freed by mcp_dispose). */
static int mcp_prepare(struct mcpcmd *c)
{
    if (c->store_path) {
        char err[512];
        if (sq_store_open(c->store_path, NULL, &c->store, err, sizeof(err)) < 0) {
            fprintf(stderr, "squall mcp: --store: %s\n", err);
            return SQ_EXIT_FAIL;
        }
        c->cfg.store = c->store;
    }
    c->cfg.notify = notify_line;
    c->cfg.stop = sq_cli_signals_begin();
    if (sq_mcp_new(&c->cfg, &c->m) < 0) {
        fprintf(stderr, "squall: out of memory\n");
        return SQ_EXIT_FAIL;
    }
    c->q = (struct inq){.stop = c->cfg.stop};
    c->q.tail = &c->q.head;
    if (pthread_mutex_init(&c->q.mu, NULL) != 0 || pthread_cond_init(&c->q.cv, NULL) != 0 ||
        pthread_create(&c->rt, NULL, reader, &c->q) != 0) {
        fprintf(stderr, "squall mcp: cannot start the stdin reader\n");
        sq_cli_signals_end();
        return SQ_EXIT_FAIL;
    }
    return 0;
}

/* One message's response; NULL when it gets none (a notification, a cancelled request). n is
 * the line's length, or -2: a line too long. */
static char *answer(struct mcpcmd *c, const char *text, long n)
{
    if (n == -2) {
        static const char too_long[] =
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":"
            "\"Invalid Request: the message is longer than 4 MiB\"}}";
        return strdup(too_long);
    }
    begin_request(&c->q, text, (size_t)n);
    char *resp = sq_mcp_handle(c->m, text, (size_t)n);
    if (end_request(&c->q)) {
        free(resp); /* cancelled: no response (MCP 2025-06-18, cancellation) */
        resp = NULL;
        bool forced;
        if (!sq_cli_signal_seen(&forced)) /* the run's stop was the cancel's, not SIGINT's */
            __atomic_store_n(c->cfg.stop, 0, __ATOMIC_RELAXED);
    }
    return resp;
}

/* Handles the messages in order until the end of stdin, SIGINT, or a host that went away.
 * Returns the exit status. */
static int mcp_run(struct mcpcmd *c)
{
    for (;;) {
        struct line *l = pop(&c->q, &c->reader_done);
        if (!l)
            return SQ_EXIT_OK; /* the end of stdin, or SIGINT while idle */
        long n = l->n;
        char *text = l->text;
        free(l);
        if (n == -3) {
            fprintf(stderr, "squall: out of memory\n");
            return SQ_EXIT_FAIL;
        }
        char *resp = answer(c, text, n);
        free(text);
        if (resp) {
            fputs(resp, stdout);
            fputc('\n', stdout);
            free(resp);
            if (fflush(stdout) != 0)
                return SQ_EXIT_OK; /* the host went away */
        }
        if (*c->cfg.stop)
            return SQ_EXIT_OK;
    }
}

/* The reader stopped (cancelled unless it saw the end of stdin) and what it queued freed. */
static void mcp_stop_reader(struct mcpcmd *c)
{
    if (!c->reader_done)
        pthread_cancel(c->rt);
    pthread_join(c->rt, NULL);
    for (struct line *l = c->q.head, *next; l; l = next) {
        next = l->next;
        free(l->text);
        free(l);
    }
    json_decref(c->q.inflight);
    pthread_cond_destroy(&c->q.cv);
    pthread_mutex_destroy(&c->q.mu);
}

int sq_cli_mcp(int argc, char **argv)
{
    struct mcpcmd c = {0};
    int rc = mcp_parse(&c, argc, argv);
    if (rc == 0)
        rc = mcp_prepare(&c);
    bool served = rc == 0;
    if (served) {
        rc = mcp_run(&c);
        mcp_stop_reader(&c);
    }
    sq_mcp_free(c.m); /* stops the targets the tools started */
    sq_store_close(c.store);
    if (served) /* after the targets: a signal while they stop is still caught */
        sq_cli_signals_end();
    return rc == SQ_EXIT_DONE ? SQ_EXIT_OK : rc;
}
