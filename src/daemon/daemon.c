/* daemon/daemon.c - starting and stopping the daemon (daemon/daemon.h). */
#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/clock.h"
#include "daemon/internal.h"
#include "target/inbox.h"

bool sq_daemon_host_is_loopback(const char *host)
{
    if (!host || strcasecmp(host, "localhost") == 0)
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

int sq_daemon_token_read(const char *path, char **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        int rc = -errno;
        snprintf(err, errlen, "cannot read the token file '%s': %s", path, strerror(-rc));
        return rc;
    }
    char buf[SQ_DAEMON_TOKEN_MAX + 2];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    bool more = n == sizeof(buf) - 1 && fgetc(f) != EOF;
    fclose(f);
    buf[n] = '\0';
    char *s = buf, *e;
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    e = s;
    while (*e && *e != '\r' && *e != '\n')
        e++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    size_t len = (size_t)(e - s);
    if (more && len >= SQ_DAEMON_TOKEN_MAX) {
        snprintf(err, errlen, "the token in '%s' is longer than %d bytes", path,
                 SQ_DAEMON_TOKEN_MAX);
        return -EINVAL;
    }
    if (len < SQ_DAEMON_TOKEN_MIN) {
        snprintf(err, errlen,
                 "the token in '%s' is %zu bytes: use at least %d (e.g. openssl rand -hex 32)",
                 path, len, SQ_DAEMON_TOKEN_MIN);
        return -EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x21 || c > 0x7e) {
            snprintf(err, errlen,
                     "the token in '%s' holds a byte that cannot travel in a header (use "
                     "printable ASCII without spaces)",
                     path);
            return -EINVAL;
        }
    }
    char *t = malloc(len + 1);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    memcpy(t, s, len);
    t[len] = '\0';
    *out = t;
    return 0;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *dup_or_null(const char *s, bool *ok)
{
    if (!s)
        return NULL;
    char *p = strdup(s);
    if (!p)
        *ok = false;
    return p;
}

static void daemon_release(struct sq_daemon *d)
{
    sq_daemon__live_free(d->cur != d->last ? d->cur : NULL);
    sq_daemon__live_free(d->last);
    d->cur = d->last = NULL;
    sq_store_close(d->store);
    d->store = NULL;
    sq_inbox_free(d->inbox);
    d->inbox = NULL;
    sq_daemon_config_dispose(&d->cfg);
    free(d->host);
    free(d->data_dir);
    if (d->token)
        memset(d->token, 0, d->token_len);
    free(d->token);
    free(d->cors_origin);
    free(d->cors_headers);
    free(d->page);
    sq_buf_dispose(&d->out.body);
    sq_buf_dispose(&d->live_body);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->q_cv);
    pthread_mutex_destroy(&d->ops_mu);
    pthread_cond_destroy(&d->ops_cv);
    pthread_mutex_destroy(&d->log_mu);
    free(d);
}

/* What o names and its settings, copied into d (the caller's strings need not outlive the
 * call), the CORS headers, the inbox. False when out of memory. */
static bool daemon_fill(struct sq_daemon *d, const struct sq_daemon_opts *o, const char *host)
{
    d->log = o->log ? o->log : stderr;
    d->access_log = o->access_log;
    d->start_wall_ms = wall_ms();
    d->start_ns = sq_now_ns();
    bool ok = true;
    d->host = dup_or_null(host, &ok);
    d->data_dir = dup_or_null(o->data_dir ? o->data_dir : SQ_DAEMON_DATA, &ok);
    d->token = dup_or_null(o->token, &ok);
    d->token_len = o->token ? strlen(o->token) : 0;
    d->cors_origin = dup_or_null(o->cors_origin, &ok);
    d->check_host = !o->token; /* only loopback Host headers then (DNS rebinding) */
    d->cfg = o->config;
    d->cfg.nallow = 0;
    for (size_t i = 0; i < o->config.nallow && ok; i++) {
        d->cfg.allow_hosts[i] = dup_or_null(o->config.allow_hosts[i], &ok);
        d->cfg.nallow = ok ? i + 1 : i;
    }
    if (ok && d->cors_origin) {
        size_t n = strlen(d->cors_origin) + 64;
        d->cors_headers = malloc(n);
        if (d->cors_headers)
            snprintf(d->cors_headers, n, "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n",
                     d->cors_origin);
        else
            ok = false;
    }
    struct sq_inbox_config ic = {
        .threads = 1, /* the API's one worker */
        .max_captures =
            o->inbox_max_captures ? o->inbox_max_captures : SQ_INBOX_MAX_CAPTURES_DEFAULT,
        .max_body = o->inbox_max_body == SIZE_MAX ? 0
                    : o->inbox_max_body           ? o->inbox_max_body
                                                  : SQ_INBOX_MAX_BODY_DEFAULT,
        .stamp_header = o->inbox_stamp_header,
    };
    return ok && sq_inbox_new(&ic, &d->inbox) == 0;
}

/* The API's server, listening on host:o->port (one thread; HTTP/1.1 only). Returns 0 or a
 * negative code with err saying why. */
static int daemon_listen(struct sq_daemon *d, const struct sq_daemon_opts *o, const char *host,
                         char *err, size_t errlen)
{
    struct sq_server_config sc = {
        .host = host,
        .port = o->port,
        .threads = 1,
        .handler = sq_daemon__handler,
        .on_head = sq_daemon__on_head,
        .ud = d,
        .idle_timeout_ns = (int64_t)SQ_DAEMON_IDLE_TIMEOUT * SQ_NS_PER_S,
        .header_timeout_ns = 10 * SQ_NS_PER_S,
        .request_timeout_ns = SQ_SERVER_REQUEST_TIMEOUT_DEFAULT,
        .min_body_rate = SQ_SERVER_MIN_BODY_RATE_DEFAULT,
        .max_conns = SQ_DAEMON_MAX_CONNS,
        .max_conns_per_peer = o->max_conns_per_peer == UINT32_MAX ? 0
                              : o->max_conns_per_peer             ? o->max_conns_per_peer
                                                                  : SQ_DAEMON_MAX_CONNS_PER_PEER,
        .evict = true,
        .http1_only = true,
    };
    const char *why = NULL;
    int rc = sq_server_start(&sc, &d->srv, &why);
    if (rc == -EADDRINUSE)
        snprintf(err, errlen, "%s:%u is in use (another squall serve?)", host, o->port);
    else if (rc < 0)
        snprintf(err, errlen, "cannot listen on %s:%u: %s", host, o->port,
                 why ? why : sq_strerror(rc));
    return rc;
}

int sq_daemon_start(const struct sq_daemon_opts *o, struct sq_daemon **out, char *err,
                    size_t errlen)
{
    const char *host = o->host ? o->host : "127.0.0.1";
    if (!o->token && !sq_daemon_host_is_loopback(host)) {
        snprintf(err, errlen,
                 "listening on %s needs a token (--token-file): without one only a loopback "
                 "address is served",
                 host);
        return -EINVAL;
    }
    if (o->cors_origin && strpbrk(o->cors_origin, "\r\n")) {
        snprintf(err, errlen, "the CORS origin holds a line break");
        return -EINVAL;
    }
    struct sq_daemon *d = calloc(1, sizeof(*d));
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->q_cv, NULL);
    pthread_mutex_init(&d->ops_mu, NULL);
    pthread_cond_init(&d->ops_cv, NULL);
    pthread_mutex_init(&d->log_mu, NULL);
    if (!daemon_fill(d, o, host) || sq_daemon__page(&d->page, &d->page_len) < 0) {
        snprintf(err, errlen, "out of memory");
        daemon_release(d);
        return -ENOMEM;
    }
    int rc = sq_store_open(d->data_dir, NULL, &d->store, err, errlen);
    if (rc == 0)
        rc = daemon_listen(d, o, host, err, errlen);
    if (rc < 0) {
        daemon_release(d);
        return rc;
    }
    d->port = sq_server_port(d->srv);
    rc = sq_daemon__threads_start(d, err, errlen);
    if (rc < 0) {
        sq_daemon__threads_stop(d);
        sq_server_free(d->srv);
        daemon_release(d);
        return rc;
    }
    if (sq_store_recovered(d->store) > 0)
        sq_daemon__log(d, "%d run(s) left running by a previous process are now interrupted",
                       sq_store_recovered(d->store));
    struct sq_daemon__op *op = calloc(1, sizeof(*op));
    if (op) { /* pruned once at start: the store may hold more than --keep allows */
        op->kind = OP_PRUNE;
        (void)sq_daemon__op_push(d, op);
    }
    *out = d;
    return 0;
}

uint16_t sq_daemon_port(const struct sq_daemon *d)
{
    return d->port;
}

int sq_daemon_recovered(const struct sq_daemon *d)
{
    return sq_store_recovered(d->store);
}

/* Runs on the API thread: ends every follower's stream, then says so. */
struct flush {
    struct sq_daemon *d;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void on_flush(void *ud)
{
    struct flush *f = ud;
    sq_daemon__live_close_all(f->d);
    pthread_mutex_lock(&f->mu);
    f->done = true;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

void sq_daemon_shutdown(struct sq_daemon *d)
{
    if (d->shut)
        return;
    d->shut = true;
    sq_daemon__threads_stop(d);
    sq_daemon__mcp_close(d); /* the ops thread is gone: its MCP state is this thread's now */
    /* the posts made so far (the last run's end, answers) run before this one; then the
     * followers get the end of their streams rather than a cut connection */
    struct flush f = {.d = d};
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    if (sq_server_post(d->srv, 0, on_flush, &f) == 0) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 2;
        pthread_mutex_lock(&f.mu);
        while (!f.done)
            if (pthread_cond_timedwait(&f.cv, &f.mu, &dl) != 0)
                break;
        pthread_mutex_unlock(&f.mu);
    }
    sq_server_free(d->srv); /* runs the flush itself if the worker had left */
    d->srv = NULL;
    pthread_mutex_destroy(&f.mu);
    pthread_cond_destroy(&f.cv);
}

void sq_daemon_free(struct sq_daemon *d)
{
    if (!d)
        return;
    sq_daemon_shutdown(d);
    daemon_release(d);
}
