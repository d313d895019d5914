/* engine/oauth.c - the run's OAuth2 token source (see oauth.h).
 *
 * One thread, one blocking exchange at a time: connect, (TLS), write the token request, read
 * the answer with the HTTP/1.1 reader, close. Every wait is a poll() on the socket and on an
 * eventfd that sq_oauth_stop() signals, bounded by the request timeout, so a stop never waits
 * for a slow token endpoint. Tokens are published with a release store and never freed before
 * sq_oauth_free(): a render that loaded the previous pointer may still be copying it.
 */
#include "engine/oauth.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/b64.h"
#include "base/buf.h"
#include "base/clock.h"
#include "http/h1.h"
#include "http/request.h"
#include "http/url.h"
#include "net/egress.h"
#include "net/sock.h"
#include "plan/eval.h"

#define BODY_CAP (64 * 1024) /* the most of a token answer kept */

struct token {
    struct sq_str s; /* what renders read */
    struct token *older;
    char data[];
};

struct sq_oauth {
    const struct sq_plan_oauth2 *cfg;
    struct sq_url url;
    char full[4096]; /* the token URL as messages quote it */
    struct sq_addr addr;
    const struct sq_egress *egress; /* the run's policy (borrowed), or NULL */
    struct sq_tls_client *tls;
    struct sq_tls_sessions sessions;
    char *req; /* the token request: holds the secret, wiped when freed */
    size_t req_len;
    struct sq_jpath *p_token, *p_expires;
    struct sq_tmpl_live live;
    struct token *tokens; /* newest first */
    int stop_fd;          /* eventfd: the refresher leaves */
    pthread_t tid;
    bool running;
    atomic_bool stopping;
    pthread_mutex_t mu; /* the stats below */
    struct sq_oauth_stats st;
    int64_t expires_in_ns; /* the current token's lifetime (0: none said) */
    int64_t got_ns;        /* when it arrived */
};

/* ---- one exchange ---- */

/* Waits for fd to be ready for ev, at most until deadline, or for the stop signal. Returns 0,
 * -ETIMEDOUT or -ECANCELED. */
static int wait_fd(struct sq_oauth *o, int fd, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - sq_now_ns();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p[2] = {{.fd = fd, .events = ev}, {.fd = o->stop_fd, .events = POLLIN}};
        int ms = (int)((left + SQ_NS_PER_MS - 1) / SQ_NS_PER_MS);
        int n = poll(p, 2, ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (p[1].revents)
            return -ECANCELED;
        if (p[0].revents)
            return 0;
    }
}

struct xfer {
    struct sq_oauth *o;
    int fd;
    struct sq_tls_conn *t;
    int64_t deadline;
};

static ssize_t x_write(struct xfer *x, const char *b, size_t n)
{
    if (x->t) {
        ssize_t r = sq_tls_write(x->t, b, n);
        if (r < 0)
            errno = (int)-r;
        return r < 0 ? -1 : r;
    }
    return send(x->fd, b, n, MSG_NOSIGNAL);
}

static ssize_t x_read(struct xfer *x, char *b, size_t n)
{
    if (x->t) {
        ssize_t r = sq_tls_read(x->t, b, n);
        if (r < 0)
            errno = (int)-r;
        return r < 0 ? -1 : r;
    }
    return read(x->fd, b, n);
}

static int keep_body(void *ud, const char *data, size_t len)
{
    struct sq_buf *b = ud;
    if (b->len + len > BODY_CAP)
        return -SQ_ETOOBIG;
    return sq_buf_append(b, data, len);
}

/* One token request; on a 200, its body in *body. Returns the status (> 0) or a negative code
 * with why set (a description without any of the exchanged bytes). */
static int exchange(struct sq_oauth *o, struct sq_buf *body, char *why, size_t wl)
{
    struct xfer x = {.o = o, .fd = -1, .deadline = sq_now_ns() + o->cfg->timeout_ns};
    struct sq_h1_reader rd;
    sq_h1_reader_init(&rd, NULL);
    sq_h1_reader_on_body(&rd, keep_body, body);
    sq_h1_reader_start(&rd, false);
    const char *stage = "connect";
    /* the run's egress policy, checked at set-up, once more on the address itself */
    int rc = x.fd = o->egress && sq_egress_allows(o->egress, &o->addr, SQ_EGRESS_CONNECT) < 0
                        ? -EACCES
                        : sq_connect_start(&o->addr);
    if (rc >= 0 && (rc = wait_fd(o, x.fd, POLLOUT, x.deadline)) == 0)
        rc = sq_connect_result(x.fd);
    if (rc == 0 && o->tls) {
        stage = "tls";
        rc = sq_tls_conn_client(o->tls, &o->sessions, x.fd, &x.t);
        while (rc == 0 && (rc = sq_tls_handshake(x.t)) == -EAGAIN)
            rc = wait_fd(o, x.fd, sq_tls_want_write(x.t) ? POLLOUT : POLLIN, x.deadline);
        if (rc == -EPROTO) {
            snprintf(why, wl, "tls: %s", sq_tls_conn_error(x.t));
            goto out;
        }
    }
    for (size_t off = 0; rc == 0 && off < o->req_len;) {
        stage = "write";
        ssize_t n = x_write(&x, o->req + off, o->req_len - off);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && (errno == EAGAIN || errno == EINTR))
            rc = wait_fd(o, x.fd, POLLOUT, x.deadline);
        else
            rc = n < 0 ? -errno : -EPIPE;
    }
    int done = 0;
    char buf[16384];
    while (rc == 0 && !done) {
        stage = "read";
        ssize_t n = x_read(&x, buf, sizeof(buf));
        if (n > 0) {
            size_t used;
            done = sq_h1_reader_feed(&rd, buf, (size_t)n, &used);
            if (done < 0)
                rc = done;
        } else if (n == 0) {
            done = sq_h1_reader_eof(&rd);
            if (done <= 0)
                rc = -ECONNRESET;
        } else if (errno == EAGAIN || errno == EINTR) {
            if (!(x.t && sq_tls_buffered(x.t)))
                rc = wait_fd(o, x.fd, POLLIN, x.deadline);
        } else {
            rc = -errno;
        }
    }
    if (rc < 0) {
        const char *what = rc == -ECANCELED    ? "stopped"
                           : rc == -ETIMEDOUT  ? "timed out"
                           : rc == -SQ_EPARSE  ? "not an HTTP response"
                           : rc == -SQ_ETOOBIG ? "the answer is too large"
                                               : sq_strerror(rc);
        snprintf(why, wl, "%s: %s", stage, what);
    } else {
        rc = rd.status;
    }
out:
    sq_h1_reader_dispose(&rd);
    sq_tls_conn_free(x.t);
    if (x.fd >= 0)
        close(x.fd);
    return rc;
}

/* One attempt: a token published, or why not. Returns 0 or a negative code. */
static int fetch(struct sq_oauth *o, char *why, size_t wl)
{
    struct sq_buf body = {0}, val = {0};
    int rc = exchange(o, &body, why, wl);
    if (rc >= 0 && rc != 200) {
        snprintf(why, wl, "HTTP %d from the token endpoint", rc);
        rc = -EPROTO;
    }
    struct sq_json_val v;
    if (rc >= 0 && !(sq_jpath_eval(o->p_token, body.p ? body.p : "", body.len, &v) == 1 &&
                     v.type == SQ_JSON_STRING && sq_json_val_text(&v, &val) == 0 && val.len)) {
        snprintf(why, wl, "the answer has no access_token");
        rc = -EPROTO;
    }
    int64_t expires = 0;
    if (rc >= 0 && sq_jpath_eval(o->p_expires, body.p, body.len, &v) == 1 &&
        v.type == SQ_JSON_NUMBER) {
        char num[32];
        snprintf(num, sizeof(num), "%.*s", (int)(v.raw_len < 31 ? v.raw_len : 31), v.raw);
        double secs = strtod(num, NULL);
        if (secs > 0 && secs < 1e9)
            expires = (int64_t)(secs * 1e9);
    }
    if (rc >= 0) {
        struct token *t = malloc(sizeof(*t) + val.len + 1);
        if (!t) {
            snprintf(why, wl, "out of memory");
            rc = -ENOMEM;
        } else {
            memcpy(t->data, val.p, val.len);
            t->data[val.len] = '\0';
            t->s = (struct sq_str){t->data, val.len};
            t->older = o->tokens;
            o->tokens = t;
            __atomic_store_n(&o->live.cur, &t->s, __ATOMIC_RELEASE);
            pthread_mutex_lock(&o->mu);
            o->st.tokens++;
            o->st.refreshes = o->st.tokens - 1;
            o->st.expires_in_ns = expires;
            o->expires_in_ns = expires;
            o->got_ns = sq_now_ns();
            pthread_mutex_unlock(&o->mu);
            rc = 0;
        }
    }
    sq_buf_dispose(&body);
    sq_buf_dispose(&val);
    return rc;
}

/* ---- the refresher ---- */

static void *refresher(void *arg)
{
    struct sq_oauth *o = arg;
    const struct sq_plan_oauth2 *c = o->cfg;
    int64_t backoff = c->retry_ns;
    int64_t due = 0; /* the next attempt; 0: from the current token */
    while (!atomic_load(&o->stopping)) {
        if (!due) {
            if (o->expires_in_ns <= 0)
                break; /* a token that never expires is never refreshed */
            int64_t at = o->got_ns + o->expires_in_ns - c->refresh_lead_ns;
            int64_t floor = o->got_ns + c->min_refresh_ns;
            due = at > floor ? at : floor;
        }
        int64_t left = due - sq_now_ns();
        if (left > 0) {
            struct pollfd p = {.fd = o->stop_fd, .events = POLLIN};
            int ms = (int)((left + SQ_NS_PER_MS - 1) / SQ_NS_PER_MS);
            if (poll(&p, 1, ms) > 0)
                break;
            continue;
        }
        char why[160];
        if (fetch(o, why, sizeof(why)) == 0) {
            backoff = c->retry_ns;
            due = 0;
            continue;
        }
        if (atomic_load(&o->stopping))
            break;
        pthread_mutex_lock(&o->mu);
        o->st.failures++;
        snprintf(o->st.last_error, sizeof(o->st.last_error), "%s", why);
        pthread_mutex_unlock(&o->mu);
        due = sq_now_ns() + backoff;
        backoff = backoff * 2 > c->retry_max_ns ? c->retry_max_ns : backoff * 2;
    }
    return NULL;
}

/* ---- set-up ---- */

/* s form-urlencoded (RFC 6749 appendix B) onto b. */
static int form_enc(struct sq_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char e[3];
        int rc;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '.' || ch == '_' || ch == '~') {
            rc = sq_buf_append(b, s, 1);
        } else if (ch == ' ') {
            rc = sq_buf_append(b, "+", 1);
        } else {
            e[0] = '%';
            e[1] = hex[ch >> 4];
            e[2] = hex[ch & 15];
            rc = sq_buf_append(b, e, 3);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void wipe(struct sq_buf *b)
{
    if (b->p) {
        volatile char *p = b->p;
        for (size_t i = 0; i < b->cap; i++)
            p[i] = 0;
    }
    sq_buf_dispose(b);
}

/* The token request: POST, the form, the client as HTTP Basic of the form-encoded pair (RFC 6749
 * 2.3.1) or in the form. */
static int build_request(struct sq_oauth *o)
{
    const struct sq_plan_oauth2 *c = o->cfg;
    struct sq_buf form = {0}, pair = {0};
    int rc = sq_buf_append(&form, "grant_type=client_credentials", 29);
    if (rc == 0 && c->scope && c->scope[0]) {
        rc = sq_buf_append(&form, "&scope=", 7);
        if (rc == 0)
            rc = form_enc(&form, c->scope);
    }
    if (rc == 0 && c->client_auth_body) {
        rc = sq_buf_append(&form, "&client_id=", 11);
        if (rc == 0)
            rc = form_enc(&form, c->client_id);
        if (rc == 0)
            rc = sq_buf_append(&form, "&client_secret=", 15);
        if (rc == 0)
            rc = form_enc(&form, c->client_secret);
    }
    char *basic = NULL;
    if (rc == 0 && !c->client_auth_body) {
        rc = form_enc(&pair, c->client_id);
        if (rc == 0)
            rc = sq_buf_append(&pair, ":", 1);
        if (rc == 0)
            rc = form_enc(&pair, c->client_secret);
        if (rc == 0) {
            size_t bl = 6 + sq_b64_encoded_len(pair.len);
            basic = malloc(bl);
            if (!basic) {
                rc = -ENOMEM;
            } else {
                memcpy(basic, "Basic ", 6);
                sq_b64_encode(pair.p, pair.len, basic + 6);
            }
        }
    }
    struct sq_kv hs[3] = {
        {"Content-Type", "application/x-www-form-urlencoded"},
        {"Accept", "application/json"},
        {"Authorization", basic},
    };
    if (rc == 0)
        rc = sq_request_build("POST", o->url.path, o->url.authority, hs, basic ? 3 : 2, form.p,
                              form.len, &o->req, &o->req_len);
    if (basic) {
        volatile char *p = basic;
        while (*p)
            *p++ = 0;
        free(basic);
    }
    wipe(&form);
    wipe(&pair);
    return rc;
}

int sq_oauth_new(const struct sq_plan_oauth2 *cfg, const char *target,
                 const struct sq_tls_client_opts *tls, const struct sq_egress *egress,
                 struct sq_oauth **out, char *err, size_t errlen)
{
    struct sq_oauth *o = calloc(1, sizeof(*o));
    if (!o) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    o->cfg = cfg;
    o->egress = egress;
    o->stop_fd = -1;
    pthread_mutex_init(&o->mu, NULL);
    atomic_init(&o->stopping, false);
    char *full = o->full;
    if (cfg->token_url[0] == '/')
        snprintf(full, sizeof(o->full), "%s%s", target, cfg->token_url);
    else
        snprintf(full, sizeof(o->full), "%s", cfg->token_url);
    const char *why = NULL;
    int rc = sq_url_parse(full, &o->url, &why);
    if (rc < 0) {
        snprintf(err, errlen, "auth.oauth2.token_url: '%.200s': %s", full,
                 why ? why : sq_strerror(rc));
        sq_oauth_free(o);
        return -SQ_EPARSE;
    }
    /* the policy first: a name the run may not reach is not even looked up */
    char rwhy[800];
    rc = sq_egress_lookup(egress, NULL, "auth.oauth2.token_url", o->url.host, o->url.port,
                          SQ_EGRESS_CONNECT, &o->addr, 1, rwhy, sizeof(rwhy));
    if (rc == -EACCES) {
        snprintf(err, errlen, "%s", rwhy);
        sq_oauth_free(o);
        return rc;
    }
    if (rc <= 0) {
        snprintf(err, errlen, "auth.oauth2.token_url: %s", rwhy);
        sq_oauth_free(o);
        return -SQ_ERESOLVE;
    }
    if (strcmp(o->url.scheme, "https") == 0) {
        struct sq_tls_client_opts to = tls ? *tls : (struct sq_tls_client_opts){0};
        to.host = o->url.host;
        to.alpn = "http/1.1";
        char terr[256];
        if ((rc = sq_tls_client_new(&to, &o->tls, terr, sizeof(terr))) < 0) {
            snprintf(err, errlen, "auth.oauth2.token_url: tls: %s", terr);
            sq_oauth_free(o);
            return rc;
        }
    }
    char jerr[64];
    if ((rc = sq_jpath_compile("$.access_token", 14, &o->p_token, jerr, sizeof(jerr))) < 0 ||
        (rc = sq_jpath_compile("$.expires_in", 12, &o->p_expires, jerr, sizeof(jerr))) < 0 ||
        (rc = build_request(o)) < 0) {
        snprintf(err, errlen, "out of memory");
        sq_oauth_free(o);
        return rc;
    }
    o->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (o->stop_fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "eventfd: %s", strerror(-rc));
        sq_oauth_free(o);
        return rc;
    }
    *out = o;
    return 0;
}

int sq_oauth_begin(struct sq_oauth *o, char *err, size_t errlen)
{
    int64_t t0 = sq_now_ns();
    char fwhy[160];
    int rc;
    if ((rc = fetch(o, fwhy, sizeof(fwhy))) < 0) {
        snprintf(err, errlen, "auth.oauth2: no token from %s: %s", o->full, fwhy);
        return rc;
    }
    o->st.first_ns = sq_now_ns() - t0;
    if ((rc = -pthread_create(&o->tid, NULL, refresher, o)) < 0) {
        snprintf(err, errlen, "cannot start the token refresher: %s", strerror(-rc));
        return rc;
    }
    o->running = true;
    return 0;
}

const struct sq_tmpl_live *sq_oauth_live(const struct sq_oauth *o)
{
    return &o->live;
}

size_t sq_oauth_recent(const struct sq_tmpl_live *live, struct sq_str *out, size_t max)
{
    if (!live)
        return 0;
    /* the published string is the first member of its token; a token's older link is set
     * before it is published and never changes */
    const struct sq_str *cur = __atomic_load_n(&live->cur, __ATOMIC_ACQUIRE);
    const struct token *t = (const struct token *)(const void *)cur;
    size_t n = 0;
    for (; t && n < max; t = t->older)
        out[n++] = t->s;
    return n;
}

void sq_oauth_stop(struct sq_oauth *o)
{
    if (!o || !o->running)
        return;
    atomic_store(&o->stopping, true);
    uint64_t one = 1;
    ssize_t n = write(o->stop_fd, &one, sizeof(one));
    (void)n;
    pthread_join(o->tid, NULL);
    o->running = false;
}

void sq_oauth_stats(struct sq_oauth *o, struct sq_oauth_stats *st)
{
    pthread_mutex_lock(&o->mu);
    *st = o->st;
    pthread_mutex_unlock(&o->mu);
}

void sq_oauth_free(struct sq_oauth *o)
{
    if (!o)
        return;
    sq_oauth_stop(o);
    while (o->tokens) {
        struct token *t = o->tokens;
        o->tokens = t->older;
        free(t);
    }
    if (o->req) {
        volatile char *p = o->req;
        for (size_t i = 0; i < o->req_len; i++)
            p[i] = 0;
        free(o->req);
    }
    sq_jpath_free(o->p_token);
    sq_jpath_free(o->p_expires);
    sq_tls_sessions_dispose(&o->sessions);
    sq_tls_client_free(o->tls);
    sq_url_dispose(&o->url);
    if (o->stop_fd >= 0)
        close(o->stop_fd);
    pthread_mutex_destroy(&o->mu);
    free(o);
}
