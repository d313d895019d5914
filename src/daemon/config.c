/* daemon/config.c - the daemon's settings: their defaults, one validator per key (shared by the
 * flags of `squall serve` and PUT /config, so both refuse a bad value with the same words), and
 * the GET /config document, where each key says when a change takes effect.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/text.h"
#include "daemon/internal.h"

void sq_daemon_config_init(struct sq_daemon_config *c)
{
    memset(c, 0, sizeof(*c));
    c->timeout_ns = 10 * SQ_NS_PER_S;
    c->connect_timeout_ns = 5 * SQ_NS_PER_S;
    c->max_vus = SQ_DAEMON_MAX_VUS;
    c->max_rate = SQ_DAEMON_MAX_RATE;
    c->max_duration_ns = (int64_t)SQ_DAEMON_MAX_DURATION * SQ_NS_PER_S;
    c->max_queue = SQ_DAEMON_MAX_QUEUE;
    c->keep_runs = SQ_STORE_KEEP_RUNS_DEFAULT;
    c->keep_days = SQ_STORE_KEEP_DAYS_DEFAULT;
    c->max_body = SQ_DAEMON_MAX_BODY;
}

void sq_daemon_config_dispose(struct sq_daemon_config *c)
{
    for (size_t i = 0; i < c->nallow; i++)
        free(c->allow_hosts[i]);
    c->nallow = 0;
}

/* When a change to a key takes effect. */
enum applies { NEXT_RUN, NEXT_PRUNE, NEXT_REQUEST, RESTART };
static const char *const applies_name[] = {"next_run", "next_prune", "next_request", "restart"};

enum kind {
    K_THREADS,
    K_TIMEOUT,
    K_CONNECT_TIMEOUT,
    K_MAX_VUS,
    K_MAX_RATE,
    K_MAX_DURATION,
    K_MAX_QUEUE,
    K_ALLOW_HOSTS,
    K_KEEP_RUNS,
    K_KEEP_DAYS,
    K_MAX_BODY,
    K_LISTEN,
    K_DATA,
    K_AUTH,
    K_CORS_ORIGIN
};

static const struct key {
    const char *name;
    enum kind kind;
    enum applies applies;
    const char *about;
} keys[] = {
    {"threads", K_THREADS, NEXT_RUN, "worker threads a run gets unless it asks (0: online CPUs)"},
    {"timeout", K_TIMEOUT, NEXT_RUN, "per-request timeout a run gets unless it asks"},
    {"connect_timeout", K_CONNECT_TIMEOUT, NEXT_RUN,
     "per-connect timeout a run gets unless it asks"},
    {"max_vus", K_MAX_VUS, NEXT_RUN, "safety cap: VUs (connections) a run may use"},
    {"max_rate", K_MAX_RATE, NEXT_RUN, "safety cap: requests per second a run may ask for"},
    {"max_duration", K_MAX_DURATION, NEXT_RUN, "safety cap: how long a run may last"},
    {"max_queue", K_MAX_QUEUE, NEXT_REQUEST, "runs that may wait in the queue at once"},
    {"allow_hosts", K_ALLOW_HOSTS, NEXT_RUN,
     "hosts a run may reach (names or numeric addresses; empty: any), checked on every address "
     "it connects to; a run listens on loopback or on a listed address"},
    {"keep_runs", K_KEEP_RUNS, NEXT_PRUNE, "retention: runs kept (0: no count limit)"},
    {"keep_days", K_KEEP_DAYS, NEXT_PRUNE, "retention: days a run is kept (0: no age limit)"},
    {"max_body", K_MAX_BODY, NEXT_REQUEST, "largest API request body, bytes (413 past it)"},
    {"listen", K_LISTEN, RESTART, "the API's address (squall serve --listen)"},
    {"data", K_DATA, RESTART, "the store's directory (squall serve --data)"},
    {"auth", K_AUTH, RESTART, "\"bearer\" with a token (squall serve --token-file), else \"none\""},
    {"cors_origin", K_CORS_ORIGIN, RESTART,
     "the one origin allowed to call the API from a browser (squall serve --cors-origin)"},
};

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -SQ_EUSAGE;
}

/* A JSON value as the text a flag would hold: strings as they are, integers printed. */
static const char *as_text(const json_t *v, char *buf, size_t n)
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

static int u64_of(const char *key, const json_t *v, uint64_t lo, uint64_t hi, uint64_t *out,
                  char *err, size_t len)
{
    char b[64];
    const char *s = as_text(v, b, sizeof(b));
    if (!s || sq_parse_u64(s, lo, hi, 0, out) < 0)
        return fail(err, len, "%s: '%s' is not a whole number in %llu..%llu", key, s ? s : "?",
                    (unsigned long long)lo, (unsigned long long)hi);
    return 0;
}

static int dur_of(const char *key, const json_t *v, int64_t *out, char *err, size_t len)
{
    char b[64];
    const char *s = as_text(v, b, sizeof(b));
    if (!s || sq_parse_duration(s, SQ_NS_PER_S, out) < 0 || *out <= 0)
        return fail(err, len, "%s: '%s' is not a duration (e.g. 500ms, 10s, 2m, 1h)", key,
                    s ? s : "?");
    return 0;
}

static const struct key *find(const char *name)
{
    for (size_t i = 0; i < SQ_ARRAY_LEN(keys); i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

/* A host name or address as allow_hosts holds it: 1..255 bytes of [A-Za-z0-9.:_-]. */
static bool host_ok(const char *h)
{
    size_t n = strlen(h);
    if (n == 0 || n > 255)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = h[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == ':' || ch == '_'))
            return false;
    }
    return true;
}

/* max_rate: requests per second, a number or its text. */
static int set_max_rate(struct sq_daemon_config *c, const char *key, const json_t *v, char *err,
                        size_t len)
{
    char b[64];
    const char *s = as_text(v, b, sizeof(b));
    char *end = NULL;
    double r = s ? strtod(s, &end) : NAN;
    if (!s || !*s || *end || !(r > 0 && r <= 1e8))
        return fail(err, len, "%s: '%s' is not a rate in (0, 100000000] requests/s", key,
                    s ? s : "?");
    c->max_rate = r;
    return 0;
}

/* allow_hosts: an array of hosts, or one string of them separated by commas (the flag's form).
 * The list is replaced only when every entry is a host. */
static int set_allow_hosts(struct sq_daemon_config *c, const char *key, const json_t *v, char *err,
                           size_t len)
{
    char *list[SQ_DAEMON_MAX_ALLOW];
    size_t n = 0;
    json_t *arr = NULL;
    if (json_is_string(v)) {
        arr = json_array();
        const char *s = json_string_value(v);
        while (arr && *s) {
            const char *comma = strchr(s, ',');
            size_t l = comma ? (size_t)(comma - s) : strlen(s);
            json_array_append_new(arr, json_stringn(s, l));
            s += l + (comma ? 1 : 0);
        }
        v = arr;
    }
    if (!json_is_array(v)) {
        json_decref(arr);
        return fail(err, len, "%s: expects an array of host names", key);
    }
    if (json_array_size(v) > SQ_DAEMON_MAX_ALLOW) {
        json_decref(arr);
        return fail(err, len, "%s: at most %d hosts", key, SQ_DAEMON_MAX_ALLOW);
    }
    int rc = 0;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e) || !host_ok(json_string_value(e))) {
            rc = fail(err, len, "%s: entry %zu is not a host name or address", key, i + 1);
            break;
        }
        if (!(list[n] = strdup(json_string_value(e)))) {
            rc = -ENOMEM;
            snprintf(err, len, "out of memory");
            break;
        }
        n++;
    }
    json_decref(arr);
    if (rc < 0) {
        while (n)
            free(list[--n]);
        return rc;
    }
    sq_daemon_config_dispose(c);
    memcpy(c->allow_hosts, list, n * sizeof(list[0]));
    c->nallow = n;
    return 0;
}

int sq_daemon_config_set(struct sq_daemon_config *c, const char *key, const json_t *v, char *err,
                         size_t len)
{
    const struct key *k = find(key);
    if (!k) {
        struct sq_suggest sg;
        sq_suggest_init(&sg, key, strlen(key));
        for (size_t i = 0; i < SQ_ARRAY_LEN(keys); i++)
            sq_suggest_try(&sg, keys[i].name);
        char tail[96];
        return fail(err, len, "unknown key '%s'%s", key, sq_suggest_tail(&sg, tail, sizeof(tail)));
    }
    if (k->applies == RESTART)
        return fail(err, len, "%s: needs a restart (%s)", key, k->about);
    uint64_t u;
    int64_t ns;
    int rc = 0;
    switch (k->kind) {
    case K_THREADS:
        if ((rc = u64_of(key, v, 0, 1024, &u, err, len)) == 0)
            c->threads = (uint32_t)u;
        break;
    case K_TIMEOUT:
        if ((rc = dur_of(key, v, &ns, err, len)) == 0)
            c->timeout_ns = ns;
        break;
    case K_CONNECT_TIMEOUT:
        if ((rc = dur_of(key, v, &ns, err, len)) == 0)
            c->connect_timeout_ns = ns;
        break;
    case K_MAX_VUS:
        if ((rc = u64_of(key, v, 1, 1000000, &u, err, len)) == 0)
            c->max_vus = u;
        break;
    case K_MAX_RATE:
        return set_max_rate(c, key, v, err, len);
    case K_MAX_DURATION:
        if ((rc = dur_of(key, v, &ns, err, len)) == 0)
            c->max_duration_ns = ns;
        break;
    case K_MAX_QUEUE:
        if ((rc = u64_of(key, v, 1, 10000, &u, err, len)) == 0)
            c->max_queue = (uint32_t)u;
        break;
    case K_KEEP_RUNS:
        if ((rc = u64_of(key, v, 0, 100000000, &u, err, len)) == 0)
            c->keep_runs = (int64_t)u;
        break;
    case K_KEEP_DAYS:
        if ((rc = u64_of(key, v, 0, 100000, &u, err, len)) == 0)
            c->keep_days = (int64_t)u;
        break;
    case K_MAX_BODY:
        if ((rc = u64_of(key, v, 1, SQ_DAEMON_MAX_BODY, &u, err, len)) == 0)
            c->max_body = (size_t)u;
        break;
    case K_ALLOW_HOSTS:
        return set_allow_hosts(c, key, v, err, len);
    default:
        return fail(err, len, "%s: needs a restart", key);
    }
    return rc;
}

/* A duration as a flag would say it: "1h", "2m", "10s", "500ms". */
static json_t *dur_json(int64_t ns)
{
    char b[48];
    if (ns % (3600 * SQ_NS_PER_S) == 0)
        snprintf(b, sizeof(b), "%lldh", (long long)(ns / (3600 * SQ_NS_PER_S)));
    else if (ns % (60 * SQ_NS_PER_S) == 0)
        snprintf(b, sizeof(b), "%lldm", (long long)(ns / (60 * SQ_NS_PER_S)));
    else if (ns % SQ_NS_PER_S == 0)
        snprintf(b, sizeof(b), "%llds", (long long)(ns / SQ_NS_PER_S));
    else if (ns % SQ_NS_PER_MS == 0)
        snprintf(b, sizeof(b), "%lldms", (long long)(ns / SQ_NS_PER_MS));
    else
        snprintf(b, sizeof(b), "%lldus", (long long)(ns / 1000));
    return json_string(b);
}

json_t *sq_daemon__config_json(struct sq_daemon *d)
{
    json_t *o = json_object();
    char listen[300];
    snprintf(listen, sizeof(listen), "%s:%u", d->host, d->port);
    pthread_mutex_lock(&d->mu);
    const struct sq_daemon_config *c = &d->cfg;
    for (size_t i = 0; i < SQ_ARRAY_LEN(keys); i++) {
        const struct key *k = &keys[i];
        json_t *v = NULL;
        switch (k->kind) {
        case K_THREADS:
            v = json_integer(c->threads);
            break;
        case K_TIMEOUT:
            v = dur_json(c->timeout_ns);
            break;
        case K_CONNECT_TIMEOUT:
            v = dur_json(c->connect_timeout_ns);
            break;
        case K_MAX_VUS:
            v = json_integer((json_int_t)c->max_vus);
            break;
        case K_MAX_RATE:
            v = json_real(c->max_rate);
            break;
        case K_MAX_DURATION:
            v = dur_json(c->max_duration_ns);
            break;
        case K_MAX_QUEUE:
            v = json_integer(c->max_queue);
            break;
        case K_ALLOW_HOSTS:
            v = json_array();
            for (size_t j = 0; j < c->nallow; j++)
                json_array_append_new(v, json_string(c->allow_hosts[j]));
            break;
        case K_KEEP_RUNS:
            v = json_integer(c->keep_runs);
            break;
        case K_KEEP_DAYS:
            v = json_integer(c->keep_days);
            break;
        case K_MAX_BODY:
            v = json_integer((json_int_t)c->max_body);
            break;
        case K_LISTEN:
            v = json_string(listen);
            break;
        case K_DATA:
            v = json_string(d->data_dir);
            break;
        case K_AUTH:
            v = json_string(d->token ? "bearer" : "none");
            break;
        case K_CORS_ORIGIN:
            v = d->cors_origin ? json_string(d->cors_origin) : json_null();
            break;
        }
        json_object_set_new(o, k->name,
                            json_pack("{s:o, s:s, s:s}", "value", v ? v : json_null(), "applies",
                                      applies_name[k->applies], "description", k->about));
    }
    pthread_mutex_unlock(&d->mu);
    return o;
}

int sq_daemon__config_put(struct sq_daemon *d, const json_t *obj, char *err, size_t len)
{
    if (!json_is_object(obj))
        return fail(err, len, "the body must be a JSON object of settings");
    /* every key is checked on a copy first: a body with one bad key changes nothing */
    struct sq_daemon_config c;
    pthread_mutex_lock(&d->mu);
    c = d->cfg;
    c.nallow = 0;
    int rc = 0;
    for (size_t i = 0; i < d->cfg.nallow && rc == 0; i++) {
        if (!(c.allow_hosts[i] = strdup(d->cfg.allow_hosts[i])))
            rc = -ENOMEM;
        else
            c.nallow = i + 1;
    }
    pthread_mutex_unlock(&d->mu);
    if (rc < 0) {
        sq_daemon_config_dispose(&c);
        snprintf(err, len, "out of memory");
        return rc;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        if ((rc = sq_daemon_config_set(&c, k, v, err, len)) < 0)
            break;
    }
    if (rc < 0) {
        sq_daemon_config_dispose(&c);
        return rc;
    }
    pthread_mutex_lock(&d->mu);
    sq_daemon_config_dispose(&d->cfg);
    d->cfg = c;
    pthread_mutex_unlock(&d->mu);
    return 0;
}
