/* daemon/prep.c - a run request (the body of POST /runs): parsed, checked against the caps, set
 * up for the engine, and its result document built.
 *
 * INTERIM: a small quick-face reader of its own (url, connections, duration, requests, rate,
 * threads, method, header, body, timeout, connect-timeout; numeric hosts only) until the run
 * preparation moves from cli/ into engine/ (engine/quick.h, engine/planrun.h); then this file
 * calls those, so the daemon and the CLI refuse and run the same requests the same way.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/parse.h"
#include "daemon/internal.h"
#include "http/decode.h"
#include "http/request.h"
#include "http/url.h"
#include "output/json.h"
#include "plan/exec.h"

#define MAX_HDRS 64

struct sq_daemon__req {
    char *url_text, *method, *body;
    size_t body_len;
    struct sq_kv hdrs[MAX_HDRS];
    size_t nhdrs;
    uint64_t connections, threads, requests;
    int64_t duration_ns, timeout_ns, connect_timeout_ns;
    double rate;
    bool rate_set;
    struct sq_exec exec;
    /* set up */
    struct sq_url url;
    char *reqbuf;
    size_t reqlen;
    struct sq_run_config cfg;
    char addr[300];
};

static int fail(char *err, size_t len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t len, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return rc;
}

/* A value as text: strings as they are, numbers printed. */
static const char *text_of(const json_t *v, char *buf, size_t n)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v)) {
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    if (json_is_real(v)) {
        snprintf(buf, n, "%.17g", json_real_value(v));
        return buf;
    }
    return NULL;
}

static int dur(const char *key, const json_t *v, int64_t *out, char *err, size_t len)
{
    char b[64];
    const char *s = text_of(v, b, sizeof(b));
    if (!s || sq_parse_duration(s, SQ_NS_PER_S, out) < 0 || *out <= 0)
        return fail(err, len, -SQ_EUSAGE, "--%s: '%s' is not a duration (e.g. 500ms, 10s, 2m)", key,
                    s ? s : "?");
    return 0;
}

static int count(const char *key, const json_t *v, uint64_t lo, uint64_t hi, uint64_t *out,
                 char *err, size_t len)
{
    char b[64];
    const char *s = text_of(v, b, sizeof(b));
    if (!s || sq_parse_u64(s, lo, hi, 1, out) < 0)
        return fail(err, len, -SQ_EUSAGE, "--%s: '%s' is not a count (%llu..%llu)", key,
                    s ? s : "?", (unsigned long long)lo, (unsigned long long)hi);
    return 0;
}

static char *dupstr(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

static int add_header(struct sq_daemon__req *r, const json_t *v, char *err, size_t len)
{
    if (!json_is_string(v))
        return fail(err, len, -SQ_EUSAGE, "--header: expects a string or an array of strings");
    if (r->nhdrs == MAX_HDRS)
        return fail(err, len, -SQ_EUSAGE, "--header: at most %d headers", MAX_HDRS);
    int rc = sq_header_parse_arg(json_string_value(v), &r->hdrs[r->nhdrs]);
    if (rc < 0)
        return fail(err, len, rc == -ENOMEM ? rc : -SQ_EUSAGE,
                    "--header: '%s' is not a header: expected 'Name: value'", json_string_value(v));
    r->nhdrs++;
    return 0;
}

static int parse_quick(struct sq_daemon__req *r, const json_t *q, char *err, size_t len)
{
    if (!json_is_object(q))
        return fail(err, len, -SQ_EUSAGE, "quick: expects an object of options");
    const char *k;
    json_t *v;
    int rc = 0;
    json_object_foreach((json_t *)q, k, v)
    {
        if (strcmp(k, "url") == 0) {
            if (!json_is_string(v))
                return fail(err, len, -SQ_EUSAGE, "url: expects a string");
            r->url_text = dupstr(json_string_value(v));
        } else if (strcmp(k, "connections") == 0) {
            rc = count(k, v, 1, 1000000, &r->connections, err, len);
        } else if (strcmp(k, "threads") == 0) {
            rc = count(k, v, 1, 1024, &r->threads, err, len);
        } else if (strcmp(k, "requests") == 0) {
            rc = count(k, v, 1, UINT64_MAX / 2, &r->requests, err, len);
        } else if (strcmp(k, "duration") == 0) {
            rc = dur(k, v, &r->duration_ns, err, len);
        } else if (strcmp(k, "timeout") == 0) {
            rc = dur(k, v, &r->timeout_ns, err, len);
        } else if (strcmp(k, "connect-timeout") == 0) {
            rc = dur(k, v, &r->connect_timeout_ns, err, len);
        } else if (strcmp(k, "rate") == 0) {
            if (!json_is_number(v) || !(json_number_value(v) > 0))
                return fail(err, len, -SQ_EUSAGE, "--rate: expects a positive number");
            r->rate = json_number_value(v);
            r->rate_set = true;
        } else if (strcmp(k, "method") == 0) {
            if (!json_is_string(v))
                return fail(err, len, -SQ_EUSAGE, "--method: expects a string");
            r->method = dupstr(json_string_value(v));
        } else if (strcmp(k, "body") == 0) {
            if (!json_is_string(v))
                return fail(err, len, -SQ_EUSAGE, "--body: expects a string");
            r->body_len = json_string_length(v);
            r->body = malloc(r->body_len + 1);
            if (r->body)
                memcpy(r->body, json_string_value(v), r->body_len + 1);
        } else if (strcmp(k, "header") == 0) {
            if (json_is_array(v)) {
                size_t i;
                json_t *e;
                json_array_foreach(v, i, e)
                {
                    if ((rc = add_header(r, e, err, len)) < 0)
                        return rc;
                }
            } else {
                rc = add_header(r, v, err, len);
            }
        } else {
            return fail(err, len, -SQ_EUSAGE, "unknown key '%s'", k);
        }
        if (rc < 0)
            return rc;
    }
    if (!r->url_text)
        return fail(err, len, -SQ_EUSAGE, "no URL given (the \"url\" key)");
    return 0;
}

/* The highest rate the executor reaches, per second. */
static double peak_rate(const struct sq_exec *e)
{
    if (!sq_exec_is_open(e))
        return 0;
    double unit = e->time_unit_ns > 0 ? (double)e->time_unit_ns / 1e9 : 1.0;
    double r = e->rate > e->start_rate ? e->rate : e->start_rate;
    for (uint32_t i = 0; i < e->nstages; i++)
        if (e->stages[i].target > r)
            r = e->stages[i].target;
    return r / unit;
}

static int check_caps(const struct sq_exec *e, uint64_t vus, const struct sq_daemon_config *c,
                      char *err, size_t len)
{
    if (vus > c->max_vus)
        return fail(err, len, -SQ_ERANGE,
                    "max_vus: the run needs %llu VUs (connections), over the cap of %llu",
                    (unsigned long long)vus, (unsigned long long)c->max_vus);
    double rate = peak_rate(e);
    if (rate > c->max_rate)
        return fail(err, len, -SQ_ERANGE,
                    "max_rate: the run asks for %.10g requests/s, over the cap of %.10g", rate,
                    c->max_rate);
    int64_t l = sq_exec_length_ns(e) + e->graceful_stop_ns;
    if (l > c->max_duration_ns)
        return fail(err, len, -SQ_ERANGE,
                    "max_duration: the run may last %.10gs, over the cap of %.10gs",
                    (double)l / 1e9, (double)c->max_duration_ns / 1e9);
    return 0;
}

static int build_exec(struct sq_daemon__req *r, char *err, size_t len)
{
    struct sq_exec *e = &r->exec;
    memset(e, 0, sizeof(*e));
    e->vus = (uint32_t)r->connections;
    if (r->rate_set) {
        e->kind = SQ_EXEC_CONSTANT_ARRIVAL_RATE;
        e->rate = r->rate;
        e->duration_ns = r->duration_ns;
    } else if (r->requests) {
        e->kind = SQ_EXEC_SHARED_ITERATIONS;
        e->iterations = r->requests;
    } else {
        e->kind = SQ_EXEC_CONSTANT_VUS;
        e->duration_ns = r->duration_ns;
    }
    const char *why = NULL;
    if (sq_exec_prepare(e, &why) < 0)
        return fail(err, len, -SQ_EUSAGE, "%s", why);
    return 0;
}

static bool allowed(const struct sq_daemon_config *c, const char *host)
{
    if (c->nallow == 0)
        return true;
    for (size_t i = 0; i < c->nallow; i++)
        if (strcasecmp(c->allow_hosts[i], host) == 0)
            return true;
    return false;
}

int sq_daemon__req_parse(const json_t *body, const struct sq_daemon_config *cfg,
                         struct sq_daemon__req **out, struct sq_daemon__req_info *info, char *err,
                         size_t len)
{
    memset(info, 0, sizeof(*info));
    if (!json_is_object(body))
        return fail(err, len, -SQ_EUSAGE, "the body must be a JSON object");
    const json_t *q = json_object_get(body, "quick"), *p = json_object_get(body, "plan");
    const json_t *name = json_object_get(body, "name");
    if (q && p)
        return fail(err, len, -SQ_EUSAGE, "give either \"quick\" or \"plan\", not both");
    if (p)
        return fail(err, len, -SQ_EUSAGE, "plan: plans cannot run through the daemon yet");
    if (!q)
        return fail(err, len, -SQ_EUSAGE, "the body needs \"quick\" (options) or \"plan\" (YAML)");
    if (name && !json_is_string(name))
        return fail(err, len, -SQ_EUSAGE, "name: expects a string");
    struct sq_daemon__req *r = calloc(1, sizeof(*r));
    if (!r)
        return fail(err, len, -ENOMEM, "out of memory");
    r->connections = 64;
    r->duration_ns = 10 * SQ_NS_PER_S;
    r->timeout_ns = cfg->timeout_ns ? cfg->timeout_ns : 10 * SQ_NS_PER_S;
    r->connect_timeout_ns = cfg->connect_timeout_ns ? cfg->connect_timeout_ns : 5 * SQ_NS_PER_S;
    r->threads = cfg->threads;
    int rc = parse_quick(r, q, err, len);
    if (rc == 0)
        rc = build_exec(r, err, len);
    if (rc == 0)
        rc = check_caps(&r->exec, r->connections, cfg, err, len);
    if (rc == 0) {
        const char *why = NULL;
        rc = sq_url_parse(r->url_text, &r->url, &why);
        if (rc < 0)
            rc = fail(err, len, -SQ_EUSAGE, "bad URL '%s': %s", r->url_text,
                      why ? why : sq_strerror(rc));
    }
    if (rc == 0 && !allowed(cfg, r->url.host))
        rc = fail(err, len, -EACCES, "allow_hosts: '%s' is not a target this daemon may load",
                  r->url.host);
    if (rc < 0) {
        sq_daemon__req_free(r);
        return rc;
    }
    info->kind = SQ_STORE_QUICK;
    snprintf(info->target, sizeof(info->target), "%s", r->url_text);
    snprintf(info->name, sizeof(info->name), "%s", name ? json_string_value(name) : "");
    *out = r;
    return 0;
}

int sq_daemon__req_validate(const json_t *body, char **describe, char *err, size_t len)
{
    struct sq_daemon_config c;
    sq_daemon_config_init(&c);
    struct sq_daemon__req *r = NULL;
    struct sq_daemon__req_info info;
    c.max_vus = UINT64_MAX;
    c.max_rate = INFINITY;
    c.max_duration_ns = INT64_MAX / 2;
    int rc = sq_daemon__req_parse(body, &c, &r, &info, err, len);
    sq_daemon_config_dispose(&c);
    if (rc < 0)
        return rc;
    char buf[700];
    snprintf(buf, sizeof(buf), "%s %s, %s\nrequest OK\n", r->method ? r->method : "GET",
             info.target, sq_exec_name(r->exec.kind));
    sq_daemon__req_free(r);
    *describe = dupstr(buf);
    return *describe ? 0 : -ENOMEM;
}

int sq_daemon__req_setup(struct sq_daemon__req *r, struct sq_run_config **cfg, char *err,
                         size_t len)
{
    struct sq_run_config *c = &r->cfg;
    memset(c, 0, sizeof(*c));
    struct sq_addr *a = &c->addrs[0];
    memset(a, 0, sizeof(*a));
    const char *host = strcmp(r->url.host, "localhost") == 0 ? "127.0.0.1" : r->url.host;
    struct sockaddr_in *in = (struct sockaddr_in *)&a->ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->ss;
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons(r->url.port);
        a->len = sizeof(*in);
        snprintf(r->addr, sizeof(r->addr), "%s:%u", host, r->url.port);
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(r->url.port);
        a->len = sizeof(*in6);
        snprintf(r->addr, sizeof(r->addr), "[%s]:%u", host, r->url.port);
    } else {
        return fail(err, len, -SQ_ERESOLVE, "dns: %s: only numeric hosts for now", host);
    }
    c->naddrs = 1;
    const char *accept = sq_accept_encoding_default();
    struct sq_kv hdrs[MAX_HDRS + 1];
    memcpy(hdrs, r->hdrs, r->nhdrs * sizeof(hdrs[0]));
    hdrs[r->nhdrs] = (struct sq_kv){.name = "Accept-Encoding", .value = accept};
    int rc = sq_request_build(r->method ? r->method : "GET", r->url.path, r->url.authority, hdrs,
                              r->nhdrs + 1, r->body, r->body_len, &r->reqbuf, &r->reqlen);
    if (rc < 0)
        return fail(err, len, rc, "cannot build the request: %s", sq_strerror(rc));
    c->request = r->reqbuf;
    c->request_len = r->reqlen;
    c->head_request = r->method && strcmp(r->method, "HEAD") == 0;
    c->threads = r->threads ? (uint32_t)r->threads : 2;
    c->exec = r->exec;
    c->timeout_ns = r->timeout_ns;
    c->connect_timeout_ns = r->connect_timeout_ns;
    c->phases = true;
    c->streams = 1;
    *cfg = c;
    return 0;
}

bool sq_daemon__req_tick(struct sq_daemon__req *rq, const struct sq_second *s,
                         const struct sq_hist *h, const char **why)
{
    SQ_UNUSED(rq);
    SQ_UNUSED(s);
    SQ_UNUSED(h);
    SQ_UNUSED(why);
    return false;
}

json_t *sq_daemon__req_doc(struct sq_daemon__req *r, struct sq_result *res)
{
    struct sq_report_info info = {
        .url = r->url_text,
        .method = r->method ? r->method : "GET",
        .target_addr = r->addr,
        .exec = &r->cfg.exec,
        .threads = res->threads,
        .timeout_ns = r->cfg.timeout_ns,
        .connect_timeout_ns = r->cfg.connect_timeout_ns,
        .request_bytes = r->reqlen,
        .accept_encoding = sq_accept_encoding_default(),
        .protocol = "http/1.1",
    };
    return sq_report_json_doc(&info, res);
}

void sq_daemon__req_shape(const struct sq_daemon__req *r, uint32_t *workers, uint64_t *vus)
{
    *workers = sq_run_workers(&r->cfg);
    *vus = sq_exec_max_vus(&r->cfg.exec);
}

void sq_daemon__req_free(struct sq_daemon__req *r)
{
    if (!r)
        return;
    free(r->url_text);
    free(r->method);
    free(r->body);
    for (size_t i = 0; i < r->nhdrs; i++)
        sq_header_arg_dispose(&r->hdrs[i]);
    sq_url_dispose(&r->url);
    free(r->reqbuf);
    free(r);
}
