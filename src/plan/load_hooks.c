/* plan/load_hooks.c - what a plan hands to code: `script:` (the Lua file of the steps' hooks),
 * a step's `before:` / `after:`, and `auth.oauth2` (the run's token source).
 *
 * Only names and fixed values are checked here: whether a hook names a function of the script is
 * known once the engine has loaded it (engine/planhooks.c), before any load is sent. The OAuth2
 * client secret is kept for the engine and for nothing else: no message of this file quotes it.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "plan/load_internal.h"

int sq_plan__load_script(struct ld *L, const struct ynode *n)
{
    int rc = sq_plan__want_string(L, n, "a Lua file (the functions steps name in before/after)");
    if (rc < 0)
        return rc;
    char full[4096];
    if ((rc = sq_plan__relative_path(L, n, full, sizeof(full))) < 0)
        return rc;
    /* A plan given as text with no directory comes from a client (the daemon, MCP), and they
     * run no Lua from plans: the path is kept for their refusal and never opened, so the
     * answer is the same whether a file is there or not. */
    if (!L->no_dir && access(full, R_OK) != 0) {
        int e = errno;
        return sq_plan__fail(L, n, "cannot read '%.200s': %s", full, strerror(e));
    }
    L->p->script = strdup(full);
    L->p->script_loc = n->loc;
    return L->p->script ? 0 : -ENOMEM;
}

int sq_plan__load_hook(struct ld *L, const struct ynode *n, const char *key, char **fn,
                       struct sq_loc *loc)
{
    int rc = sq_plan__want_string(L, n, "the name of a function of the plan's script");
    if (rc < 0)
        return rc;
    if (!sq_plan__is_ident(n->s))
        return sq_plan__fail(L, n, "'%.60s' is not a Lua function name (letters, digits and '_')",
                             n->s);
    if (!L->p->script && !sq_plan__get(L->root, "script"))
        return sq_plan__fail(L, n,
                             "%s: '%s' names a function, but the plan has no script (add "
                             "script: FILE.lua at the top)",
                             key, n->s);
    *fn = strdup(n->s);
    *loc = n->loc;
    return *fn ? 0 : -ENOMEM;
}

/* A value that must be fixed text (plan variables and $env.NAME resolved), copied into *out. */
static int fixed_text(struct ld *L, const struct ynode *n, const char *what, char **out)
{
    struct sq_tmpl *t = NULL;
    const char *s;
    size_t len;
    int rc = sq_plan__static_text(L, n, what, &t, &s, &len);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        return sq_plan__fail(L, n,
                             "%s is fixed for the run: only plan variables and $env.NAME may "
                             "appear in it",
                             what);
    }
    if (memchr(s, '\0', len)) {
        sq_tmpl_free(t);
        return sq_plan__fail(L, n, "%s holds a NUL byte", what);
    }
    *out = strndup(s, len);
    sq_tmpl_free(t);
    return *out ? 0 : -ENOMEM;
}

static int duration_key(struct ld *L, const struct ynode *map, const char *key, int64_t *out)
{
    const struct ynode *v = sq_plan__get(map, key);
    if (!v)
        return 0;
    size_t mark = sq_plan__path_key(L, key);
    int rc = sq_plan__get_duration(L, v, out);
    if (rc == 0 && *out < 0)
        rc = sq_plan__fail(L, v, "a duration of 0 or more");
    if (rc == 0)
        sq_plan__path_pop(L, mark);
    return rc;
}

/* The node of key in map, or map itself when the key is absent (a default was wrong). */
static const struct ynode *at(const struct ynode *map, const char *key)
{
    const struct ynode *v = sq_plan__get(map, key);
    return v ? v : map;
}

static int load_oauth2(struct ld *L, const struct ynode *n)
{
    static const char *const keys[] = {
        "token_url",         "client_id",    "client_secret",        "scope",
        "client_auth",       "refresh_lead", "min_refresh_interval", "retry_backoff",
        "retry_backoff_max", "timeout"};
    int rc = sq_plan__want_keys(L, n, "a mapping (token_url, client_id, client_secret, ...)", keys,
                                SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    static const char *const required[] = {"token_url", "client_id", "client_secret"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(required); i++)
        if (!sq_plan__get(n, required[i]))
            return sq_plan__fail(L, n, "missing key '%s'", required[i]);
    struct sq_plan_oauth2 *o = calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;
    L->p->oauth2 = o;
    o->loc = n->loc;
    o->refresh_lead_ns = 30 * SQ_NS_PER_S;
    o->min_refresh_ns = SQ_NS_PER_S;
    o->retry_ns = 500 * SQ_NS_PER_MS;
    o->retry_max_ns = 30 * SQ_NS_PER_S;
    o->timeout_ns = 10 * SQ_NS_PER_S;
    static const struct {
        const char *key, *what;
        size_t off;
    } texts[] = {
        {"token_url", "the token endpoint (an http(s) URL, or a path on the target)",
         offsetof(struct sq_plan_oauth2, token_url)},
        {"client_id", "the client id", offsetof(struct sq_plan_oauth2, client_id)},
        {"client_secret", "the client secret", offsetof(struct sq_plan_oauth2, client_secret)},
        {"scope", "the scope (space-separated)", offsetof(struct sq_plan_oauth2, scope)},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(texts); i++) {
        const struct ynode *v = sq_plan__get(n, texts[i].key);
        if (!v)
            continue;
        size_t mark = sq_plan__path_key(L, texts[i].key);
        if ((rc = fixed_text(L, v, texts[i].what, (char **)((char *)o + texts[i].off))) < 0)
            return rc;
        sq_plan__path_pop(L, mark);
    }
    const struct ynode *u = sq_plan__get(n, "token_url");
    if (strncmp(o->token_url, "http://", 7) != 0 && strncmp(o->token_url, "https://", 8) != 0 &&
        o->token_url[0] != '/') {
        sq_plan__path_key(L, "token_url");
        return sq_plan__fail(L, u,
                             "expected an http:// or https:// URL, or a path starting with '/' "
                             "on the target, got '%.100s'",
                             o->token_url);
    }
    const struct ynode *ca = sq_plan__get(n, "client_auth");
    if (ca) {
        size_t mark = sq_plan__path_key(L, "client_auth");
        if ((rc = sq_plan__want_string(L, ca, "basic or body")) < 0)
            return rc;
        if (strcmp(ca->s, "body") == 0)
            o->client_auth_body = true;
        else if (strcmp(ca->s, "basic") != 0)
            return sq_plan__fail(L, ca,
                                 "expected basic (HTTP Basic, the default) or body (the "
                                 "client in the form), got '%.40s'",
                                 ca->s);
        sq_plan__path_pop(L, mark);
    }
    if ((rc = duration_key(L, n, "refresh_lead", &o->refresh_lead_ns)) < 0 ||
        (rc = duration_key(L, n, "min_refresh_interval", &o->min_refresh_ns)) < 0 ||
        (rc = duration_key(L, n, "retry_backoff", &o->retry_ns)) < 0 ||
        (rc = duration_key(L, n, "retry_backoff_max", &o->retry_max_ns)) < 0 ||
        (rc = duration_key(L, n, "timeout", &o->timeout_ns)) < 0)
        return rc;
    if (o->timeout_ns <= 0)
        return sq_plan__fail(L, at(n, "timeout"), "timeout: must be more than 0");
    if (o->retry_ns <= 0)
        return sq_plan__fail(L, at(n, "retry_backoff"), "retry_backoff: must be more than 0");
    if (o->retry_max_ns < o->retry_ns)
        return sq_plan__fail(L, at(n, "retry_backoff_max"),
                             "retry_backoff_max: must be at least retry_backoff");
    return 0;
}

int sq_plan__load_auth(struct ld *L, const struct ynode *n)
{
    static const char *const keys[] = {"oauth2"};
    int rc = sq_plan__want_keys(L, n, "a mapping with oauth2", keys, SQ_ARRAY_LEN(keys));
    if (rc < 0)
        return rc;
    const struct ynode *o = sq_plan__get(n, "oauth2");
    if (!o)
        return sq_plan__fail(L, n, "missing key 'oauth2' (the client-credentials token source)");
    size_t mark = sq_plan__path_key(L, "oauth2");
    if ((rc = load_oauth2(L, o)) < 0)
        return rc;
    sq_plan__path_pop(L, mark);
    return 0;
}

void sq_plan__oauth2_free(struct sq_plan_oauth2 *o)
{
    if (!o)
        return;
    free(o->token_url);
    free(o->client_id);
    if (o->client_secret) {
        /* the secret does not outlive the plan in freed memory */
        volatile char *p = o->client_secret;
        while (*p)
            *p++ = '\0';
        free(o->client_secret);
    }
    free(o->scope);
    free(o);
}
