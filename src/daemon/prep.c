/* daemon/prep.c - a run request (the body of POST /runs): parsed, checked against the caps, set
 * up for the engine, and its result document built - with the CLI's own code (face/quick.h,
 * face/planrun.h, plan's sq_plan_load_text, output's document builders), so the daemon and the
 * CLI refuse the same requests with the same words and write the same document for the same
 * run.
 *
 * A request is set up twice: once on the ops thread when it arrives (everything the CLI checks
 * before a run, DNS and TLS files included, so a bad request is refused before it is queued;
 * then the caps and the allowlist on the run it would be), and again on the runner when its turn
 * comes (fresh DNS, a fresh TLS context: a run may wait long in the queue). Parsing happens on
 * the ops thread only: the quick face's parser uses getopt_long, which is not thread-safe.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/redact.h"
#include "daemon/internal.h"
#include "face/flags.h"
#include "face/planrun.h"
#include "face/quick.h"
#include "face/report.h"
#include "result/verdict.h"
#include "net/egress.h"
#include "output/json.h"
#include "output/plan_json.h"
#include "plan/exec.h"
#include "plan/plan.h"
#include "sink/beside.h"
#include "sink/sink.h"

#define PLAN_NAME_DEFAULT "plan.yaml"

struct sq_daemon__req {
    enum sq_store_kind kind;
    /* quick: the options (parsed on the ops thread; they own what they built) and the run */
    struct sq_quick_opts qo;
    struct sq_quick_run qr;
    bool qr_set;
    /* plan: the loaded plan, the face's options and the run, its threshold watch and verdicts */
    char *plan_name;
    struct sq_plan *plan;
    struct sq_planrun_opts po;
    struct sq_planrun pr;
    bool pr_set;
    struct sq_planrun_watch watch;
    bool watch_set;
    struct sq_th_verdicts verdicts;
    /* a plan's sink: section, beside the load (sink/beside.h) */
    struct sq_sink *sink;
    uint64_t sink_run_id;
    /* The run's egress policy (net/egress.h): every destination and listener of the run, from
     * the check on the ops thread to the last connect() on the runner. NULL for /validate. */
    struct sq_egress *egress;
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

/* The highest rate an executor reaches, per second. */
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

/* vus, the summed peak rate and the longest scenario's end (start offset and graceful stop
 * included) against the caps. */
static int check_caps(uint64_t vus, double rate, int64_t length_ns,
                      const struct sq_daemon_config *c, char *err, size_t len)
{
    if (vus > c->max_vus)
        return fail(err, len, -SQ_ERANGE,
                    "max_vus: the run needs %llu VUs (connections), over the cap of %llu",
                    (unsigned long long)vus, (unsigned long long)c->max_vus);
    if (rate > c->max_rate)
        return fail(err, len, -SQ_ERANGE,
                    "max_rate: the run asks for %.10g requests/s, over the cap of %.10g", rate,
                    c->max_rate);
    if (length_ns > c->max_duration_ns)
        return fail(err, len, -SQ_ERANGE,
                    "max_duration: the run may last %.10gs, over the cap of %.10gs",
                    (double)length_ns / 1e9, (double)c->max_duration_ns / 1e9);
    return 0;
}

/* The run's egress policy from the operator's settings: allow_hosts for a run sent to the API.
 * One an MCP client sent must pass the MCP cap (loopback, or a host allow_hosts names) and
 * allow_hosts both: with an empty allow_hosts that is the cap (loopback only), with a list it is
 * the list. */
static int make_egress(struct sq_daemon__req *r, const struct sq_daemon_config *c, bool mcp,
                       char *err, size_t len)
{
    struct sq_egress_opts o = {.style = mcp && c->nallow == 0 ? SQ_EGRESS_MCP : SQ_EGRESS_DAEMON,
                               .hosts = (const char *const *)c->allow_hosts,
                               .nhosts = c->nallow,
                               .allow_hint = SQ_DAEMON_ALLOW_SETTING};
    if (sq_egress_new(&o, &r->egress) < 0)
        return fail(err, len, -ENOMEM, "out of memory");
    return 0;
}

/* ---- quick ---- */

static int quick_parse(struct sq_daemon__req *r, const json_t *q,
                       const struct sq_daemon_config *cfg, char *err, size_t len)
{
    if (!json_is_object(q))
        return fail(err, len, -SQ_EUSAGE, "quick: expects an object of options");
    int rc = sq_quick_from_json(&r->qo, q, err, len);
    if (rc < 0)
        return rc;
    r->qo.net.egress = r->egress;
    /* the daemon's defaults where the request says nothing */
    if (!json_object_get(q, "threads"))
        r->qo.threads = cfg->threads;
    if (!json_object_get(q, "timeout") && cfg->timeout_ns)
        r->qo.timeout_ns = cfg->timeout_ns;
    if (!json_object_get(q, "connect-timeout") && cfg->connect_timeout_ns)
        r->qo.connect_timeout_ns = cfg->connect_timeout_ns;
    return 0;
}

static int quick_check(struct sq_daemon__req *r, const struct sq_daemon_config *cfg, char *err,
                       size_t len)
{
    struct sq_quick_run qr;
    int rc = sq_quick_prepare(&qr, &r->qo, err, len);
    if (rc == 0) {
        const struct sq_exec *e = &qr.cfg.exec;
        rc = check_caps(sq_exec_max_vus(e), peak_rate(e),
                        sq_exec_length_ns(e) + e->graceful_stop_ns, cfg, err, len);
    }
    sq_quick_run_dispose(&qr);
    return rc;
}

/* ---- plan ---- */

static int plan_parse(struct sq_daemon__req *r, const json_t *body, const json_t *p,
                      const struct sq_daemon_config *cfg, char *err, size_t len)
{
    if (!json_is_string(p))
        return fail(err, len, -SQ_EUSAGE, "plan: expects the plan's YAML text (a string)");
    const json_t *file = json_object_get(body, "file");
    if (file && (!json_is_string(file) || !json_string_length(file) ||
                 json_string_length(file) > 200 || strpbrk(json_string_value(file), "\r\n/")))
        return fail(err, len, -SQ_EUSAGE, "file: expects the plan's file name (no directory)");
    r->plan_name = strdup(file ? json_string_value(file) : PLAN_NAME_DEFAULT);
    if (!r->plan_name)
        return fail(err, len, -ENOMEM, "out of memory");
    struct sq_plan_error pe;
    memset(&pe, 0, sizeof(pe));
    int rc = sq_plan_load_text(r->plan_name, json_string_value(p), json_string_length(p), NULL,
                               &r->plan, &pe);
    if (rc < 0) {
        if (rc == -ENOMEM)
            return fail(err, len, rc, "out of memory");
        sq_plan_error_format(&pe, err, len);
        return -SQ_EPARSE;
    }
    if ((rc = sq_thresholds_check(r->plan, err, len)) < 0)
        return -SQ_EPARSE;
    /* A plan's script: is Lua with io and os, sent by a client: refused before it is loaded (the
     * hooks check would run it), on /validate too. */
    if (r->plan->script)
        return fail(err, len, -SQ_EPARSE,
                    "%s:%u:%u: script: the daemon runs no Lua from plans (no hooks here)",
                    r->plan_name, r->plan->script_loc.line, r->plan->script_loc.col);
    /* subscribers: run in `squall run` only (as the quick face's --subscribers in the CLI) */
    if (r->plan->subscribers)
        return fail(err, len, -SQ_EPARSE,
                    "%s:%u:%u: subscribers: the daemon runs no subscribers (squall run does)",
                    r->plan_name, r->plan->subscribers->loc.line, r->plan->subscribers->loc.col);
    /* A sink: section is checked as the sink will check it (URLs, the stamp spec), on
     * /validate too; it listens or subscribes only when the run's turn comes. */
    if ((rc = sq_sink_beside_plan_check(r->plan, r->plan_name, r->egress, err, len)) < 0)
        return rc;
    sq_planrun_opts_init(&r->po);
    r->po.net.egress = r->egress;
    r->po.plan = r->plan_name;
    r->po.refuse_scripts = true;
    r->po.run_once = true; /* setup: and teardown: on the runner (sq_daemon__req_once) */
    r->po.threads = cfg->threads;
    if (cfg->timeout_ns)
        r->po.timeout_ns = cfg->timeout_ns;
    if (cfg->connect_timeout_ns)
        r->po.connect_timeout_ns = cfg->connect_timeout_ns;
    return 0;
}

static int plan_check(struct sq_daemon__req *r, const struct sq_daemon_config *cfg, char *err,
                      size_t len)
{
    struct sq_planrun pr;
    int rc = sq_planrun_prepare(&pr, r->plan, &r->po, err, len);
    if (rc == 0) {
        double rate = 0;
        int64_t l = 0;
        for (size_t i = 0; i < r->plan->nscenarios; i++) {
            const struct sq_exec *e = &pr.scens[i].exec;
            rate += peak_rate(e);
            int64_t end = pr.scens[i].start_ns + sq_exec_length_ns(e) + e->graceful_stop_ns;
            if (end > l)
                l = end;
        }
        rc = check_caps(pr.vus, rate, l, cfg, err, len);
    }
    sq_planrun_dispose(&pr);
    return rc;
}

/* ---- the entry points ---- */

static int parse(const json_t *body, const struct sq_daemon_config *cfg, bool check, bool mcp,
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
    if (!q && !p)
        return fail(err, len, -SQ_EUSAGE,
                    "the body needs \"quick\" (the quick face's options) or \"plan\" (YAML)");
    if (name && (!json_is_string(name) || json_string_length(name) > 200))
        return fail(err, len, -SQ_EUSAGE, "name: expects a string (at most 200 bytes)");
    if (json_object_get(body, "redacted"))
        return fail(err, len, -SQ_EUSAGE,
                    "redacted: this is a stored request whose credentials were redacted "
                    "(docs/daemon.md): send it again with them");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        if (strcmp(k, "quick") && strcmp(k, "plan") && strcmp(k, "name") && strcmp(k, "file"))
            return fail(err, len, -SQ_EUSAGE, "unknown key '%s' (quick, plan, file, name)", k);
    }
    if (q && json_object_get(body, "file"))
        return fail(err, len, -SQ_EUSAGE, "file: goes with \"plan\"");
    struct sq_daemon__req *r = calloc(1, sizeof(*r));
    if (!r)
        return fail(err, len, -ENOMEM, "out of memory");
    r->kind = q ? SQ_STORE_QUICK : SQ_STORE_PLAN;
    if (q) /* first: sq_daemon__req_free disposes it */
        sq_quick_opts_init(&r->qo);
    int rc = check ? make_egress(r, cfg, mcp, err, len) : 0;
    if (rc == 0)
        rc = q ? quick_parse(r, q, cfg, err, len) : plan_parse(r, body, p, cfg, err, len);
    if (rc == 0 && check)
        rc = q ? quick_check(r, cfg, err, len) : plan_check(r, cfg, err, len);
    if (rc < 0) {
        sq_daemon__req_free(r);
        return rc;
    }
    info->kind = r->kind;
    snprintf(info->target, sizeof(info->target), "%s", q ? r->qo.url : r->plan->target);
    size_t at, n;
    if (q && !r->qo.no_redact && r->qo.url &&
        sq_redact_url_secret(r->qo.url, strlen(r->qo.url), &at, &n) && n) {
        /* the list's target and the log name a broker URL without its password */
        struct sq_buf b = {0};
        if (sq_redact_url(r->qo.url, strlen(r->qo.url), &b) == 0)
            snprintf(info->target, sizeof(info->target), "%.*s", (int)b.len, b.p);
        else
            snprintf(info->target, sizeof(info->target), "%s", SQ_REDACTED);
        sq_buf_dispose(&b);
    }
    snprintf(info->name, sizeof(info->name), "%s",
             name ? json_string_value(name)
             : q  ? ""
                  : r->plan_name);
    *out = r;
    return 0;
}

int sq_daemon__req_parse(const json_t *body, const struct sq_daemon_config *cfg, bool mcp,
                         struct sq_daemon__req **out, struct sq_daemon__req_info *info, char *err,
                         size_t len)
{
    return parse(body, cfg, true, mcp, out, info, err, len);
}

int sq_daemon__req_validate(const json_t *body, char **describe, char *err, size_t len)
{
    struct sq_daemon_config c;
    sq_daemon_config_init(&c);
    struct sq_daemon__req *r = NULL;
    struct sq_daemon__req_info info;
    int rc = parse(body, &c, false, false, &r, &info, err, len);
    sq_daemon_config_dispose(&c);
    if (rc < 0)
        return rc;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) {
        sq_daemon__req_free(r);
        return fail(err, len, -ENOMEM, "out of memory");
    }
    if (r->kind == SQ_STORE_PLAN) {
        sq_plan_describe(r->plan, f);
        fputs("plan OK\n", f);
    } else {
        fprintf(f, "%s %s\nrequest OK\n", r->qo.method, r->qo.url);
    }
    fclose(f);
    sq_daemon__req_free(r);
    *describe = buf;
    return buf ? 0 : -ENOMEM;
}

int sq_daemon__req_setup(struct sq_daemon__req *r, struct sq_run_config **cfg, char *err,
                         size_t len)
{
    int rc;
    uint64_t need;
    if (r->kind == SQ_STORE_QUICK) {
        rc = sq_quick_prepare(&r->qr, &r->qo, err, len);
        r->qr_set = true;
        if (rc < 0)
            return rc;
        *cfg = &r->qr.cfg;
        need = r->qr.conns;
    } else {
        rc = sq_planrun_prepare(&r->pr, r->plan, &r->po, err, len);
        r->pr_set = true;
        if (rc < 0)
            return rc;
        /* the set-up's first network I/O (auth.oauth2's token), after every check */
        if ((rc = sq_planrun_begin(&r->pr, err, len)) < 0)
            return rc;
        if ((rc = sq_planrun_watch_init(&r->watch, r->plan)) < 0)
            return fail(err, len, rc, "out of memory");
        r->watch_set = true;
        *cfg = &r->pr.cfg;
        need = r->pr.vus;
        if (r->plan->sink) /* the id its stamps carry, which the sink counts */
            r->pr.cfg.run_id = r->sink_run_id = sq_run_new_id();
    }
    return sq_net_raise_nofile(need, r->kind == SQ_STORE_QUICK ? "connections" : "VUs", err, len);
}

int sq_daemon__req_once(struct sq_daemon__req *r, bool teardown, volatile int *stop, char *why,
                        size_t len)
{
    if (r->kind != SQ_STORE_PLAN || !(teardown ? r->plan->teardown : r->plan->setup))
        return 0;
    /* its own seconds are not the run's: no tick, no live event, no stored second */
    int rc = sq_planrun_once(&r->pr, teardown, stop);
    if (rc < 0)
        return fail(why, len, rc, "%s: out of memory", teardown ? "teardown" : "setup");
    const struct sq_planrun_once *o = teardown ? &r->pr.teardown : &r->pr.setup;
    if (o->ok)
        return 0;
    return fail(why, len, -1, "%s failed: %s", teardown ? "teardown" : "setup", o->why);
}

bool sq_daemon__req_tick(struct sq_daemon__req *r, const struct sq_second *s,
                         const struct sq_hist *h, const char **why)
{
    if (!r->watch_set || !sq_planrun_watch_tick(&r->watch, s, h))
        return false;
    *why = r->watch.why;
    return true;
}

const struct sq_plan *sq_daemon__req_plan(const struct sq_daemon__req *r)
{
    return r->kind == SQ_STORE_PLAN ? r->plan : NULL;
}

const struct sq_live_totals *sq_daemon__req_live_totals(const struct sq_daemon__req *r)
{
    return r->watch_set ? &r->watch.t : NULL;
}

json_t *sq_daemon__req_doc(struct sq_daemon__req *r, struct sq_result *res)
{
    if (r->kind == SQ_STORE_QUICK)
        return sq_quick_doc(&r->qr, res);
    if (sq_planrun_finish(&r->pr, r->watch_set ? &r->watch : NULL, res, &r->verdicts) < 0)
        return NULL;
    return sq_planrun_doc(&r->pr, res, &r->verdicts);
}

int sq_daemon__req_sink_begin(struct sq_daemon__req *r, volatile int *stop, bool *subscribed,
                              char *err, size_t len)
{
    *subscribed = true;
    if (r->kind != SQ_STORE_PLAN || !r->plan->sink)
        return 0;
    struct sq_sink_beside_opts o;
    char http[300];
    sq_sink_beside_plan_opts(r->plan, &o, http, sizeof(http));
    o.egress = r->egress;
    char why[1024] = "";
    int rc = sq_sink_beside_start(&o, r->sink_run_id, stop, &r->sink, subscribed, why, sizeof(why));
    if (rc < 0) /* the sink's words name its flags ("--http: ..."): here they are keys */
        return fail(err, len, rc, "%s:%u:%u: sink: %s", r->plan_name, r->plan->sink->loc.line,
                    r->plan->sink->loc.col, strncmp(why, "--", 2) == 0 ? why + 2 : why);
    return 0;
}

bool sq_daemon__req_has_sink(const struct sq_daemon__req *r)
{
    return r->sink != NULL;
}

bool sq_daemon__req_sink_end(struct sq_daemon__req *r, const struct sq_result *res, json_t *doc,
                             volatile int *stop, char *why, size_t len)
{
    if (!r->sink)
        return false;
    char w[512];
    struct sq_sink_sent sent = {res->run_id, res->stamped, res->nstreams,
                                (const uint64_t *const *)res->unfinished, res->nunfinished};
    json_t *block = sq_sink_beside_end(r->sink, &sent, stop, w, sizeof(w));
    r->sink = NULL;
    if (block && doc)
        json_object_set_new(doc, "sink", block);
    else
        json_decref(block);
    if (!w[0])
        return false;
    snprintf(why, len, "%s:%u:%u: sink: %s", r->plan_name, r->plan->sink->loc.line,
             r->plan->sink->loc.col, w);
    return true;
}

void sq_daemon__req_shape(const struct sq_daemon__req *r, uint32_t *workers, uint64_t *vus)
{
    if (r->kind == SQ_STORE_QUICK) {
        *workers = sq_run_workers(&r->qr.cfg);
        *vus = sq_exec_max_vus(&r->qr.cfg.exec);
    } else {
        *workers = sq_run_workers(&r->pr.cfg);
        *vus = r->pr.vus;
    }
}

/* A -H line ("K: V") with V redacted when K carries a credential; NULL when it does not (or
 * out of memory: *oom set). */
static json_t *redact_header_line(const char *line, bool *oom)
{
    const char *colon = strchr(line, ':');
    if (!colon)
        return NULL;
    size_t nl = (size_t)(colon - line);
    while (nl && (line[nl - 1] == ' ' || line[nl - 1] == '\t'))
        nl--;
    if (!sq_redact_header_name(line, nl))
        return NULL;
    const char *v = colon + 1 + strspn(colon + 1, " \t");
    struct sq_buf b = {0};
    json_t *j = NULL;
    if (sq_buf_append(&b, line, (size_t)(v - line)) == 0 &&
        sq_redact_value(line, nl, v, strlen(v), &b) == 0)
        j = json_stringn(b.p, b.len);
    sq_buf_dispose(&b);
    *oom |= !j;
    return j;
}

static void redact_strings(json_t *v, const struct sq_str *sec, size_t n, bool *changed, bool *oom);

/* e, a member of a container: walked into when it is not a string; a string with a secret in it
 * is returned redacted (a new string for the container to take), else NULL. */
static json_t *redact_member(json_t *e, const struct sq_str *sec, size_t n, bool *changed,
                             bool *oom)
{
    if (!json_is_string(e)) {
        redact_strings(e, sec, n, changed, oom);
        return NULL;
    }
    json_t *r = NULL;
    struct sq_buf b = {0};
    if (sq_redact_text(json_string_value(e), json_string_length(e), 0, sec, n, &b) < 0)
        *oom = true;
    else if (b.len != json_string_length(e) ||
             memcmp(b.p ? b.p : "", json_string_value(e), b.len) != 0) {
        r = json_stringn(b.p ? b.p : "", b.len);
        *oom |= !r; /* out of memory: the member stays as it was */
        *changed = true;
    }
    sq_buf_dispose(&b);
    return r;
}

/* Every string in v (a JSON value, walked in place) with the secrets redacted by value. */
static void redact_strings(json_t *v, const struct sq_str *sec, size_t n, bool *changed, bool *oom)
{
    const char *k;
    json_t *e, *r;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, k, e)
        {
            if ((r = redact_member(e, sec, n, changed, oom)))
                *oom |= json_object_set_new(v, k, r) < 0;
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, e)
        {
            if ((r = redact_member(e, sec, n, changed, oom)))
                *oom |= json_array_set_new(v, i, r) < 0;
        }
    }
}

char *sq_daemon__req_stored(const struct sq_daemon__req *r, const json_t *body, const char *text)
{
    bool keep = r->kind == SQ_STORE_QUICK ? r->qo.no_redact : r->plan->no_redact;
    if (keep)
        return strdup(text);
    json_t *copy = json_deep_copy(body);
    if (!copy)
        return NULL;
    bool changed = false, oom = false;
    /* the values looked for: a quick request's credential headers (whole, and after the scheme
     * word, as the run redacts them: face/quick.c), or the plan's fixed credentials */
    struct sq_str qs[2 * SQ_QUICK_MAX_HEADERS];
    const struct sq_str *sec = qs;
    size_t nsec = 0;
    if (r->kind == SQ_STORE_QUICK) {
        for (size_t i = 0; i < r->qo.nheaders; i++) {
            const char *nm = r->qo.headers[i].name, *v = r->qo.headers[i].value;
            if (!sq_redact_header_name(nm, strlen(nm)))
                continue;
            size_t vl = strlen(v), w = strcspn(v, " \t");
            qs[nsec++] = (struct sq_str){v, vl};
            w += strspn(v + w, " \t");
            if (w > 0 && w < vl)
                qs[nsec++] = (struct sq_str){v + w, vl - w};
        }
        json_t *q = json_object_get(copy, "quick"), *h = json_object_get(q, "header"), *e;
        static const char *const urls[] = {"url", "proxy"}; /* a proxy's user:password too */
        for (size_t k = 0; k < sizeof(urls) / sizeof(urls[0]); k++) {
            const json_t *u = json_object_get(q, urls[k]);
            size_t at, n;
            if (json_is_string(u) &&
                sq_redact_url_secret(json_string_value(u), json_string_length(u), &at, &n) && n) {
                struct sq_buf b = {0};
                oom |= sq_redact_url(json_string_value(u), json_string_length(u), &b) < 0 ||
                       json_object_set_new(q, urls[k], json_stringn(b.p, b.len)) < 0;
                sq_buf_dispose(&b);
                changed = true;
            }
        }
        if (json_is_string(h)) {
            json_t *red = redact_header_line(json_string_value(h), &oom);
            if (red) {
                json_object_set_new(q, "header", red);
                changed = true;
            }
        }
        size_t i;
        json_array_foreach(h, i, e)
        {
            json_t *red = json_is_string(e) ? redact_header_line(json_string_value(e), &oom) : NULL;
            if (red) {
                json_array_set_new(h, i, red);
                changed = true;
            }
        }
    } else {
        sec = r->plan->secrets;
        nsec = r->plan->nsecrets;
    }
    /* then those values wherever else the request holds them: a body, a plan's text */
    redact_strings(copy, sec, nsec, &changed, &oom);
    char *out = NULL;
    if (!oom && !changed)
        out = strdup(text);
    else if (!oom && json_object_set_new(copy, "redacted", json_true()) == 0)
        out = json_dumps(copy, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(copy);
    return out;
}

void sq_daemon__req_free(struct sq_daemon__req *r)
{
    if (!r)
        return;
    sq_sink_free(r->sink); /* the run failed before its end: no settle */
    if (r->qr_set)
        sq_quick_run_dispose(&r->qr);
    if (r->kind == SQ_STORE_QUICK)
        sq_quick_opts_dispose(&r->qo);
    if (r->pr_set)
        sq_planrun_dispose(&r->pr);
    if (r->watch_set)
        sq_planrun_watch_dispose(&r->watch);
    sq_th_verdicts_dispose(&r->verdicts);
    sq_plan_free(r->plan);
    free(r->plan_name);
    sq_egress_free(r->egress); /* last: the run's parts above borrowed it */
    free(r);
}
