/* mcp/resources.c - MCP resources (revision 2025-06-18): what an agent may read without calling a
 * tool.
 *
 *   squall://caps               the safety caps in force (application/json)
 *   squall://docs/plans.md      the plan format reference, docs/plans.md (text/markdown)
 *   squall://schema/result      the result document's JSON Schema (application/schema+json)
 *   squall://runs/{id}          a stored run's result document (application/json), as get_run
 *                               returns it; the template resources/templates/list names
 *
 * resources/list gives the static three, then the newest runs that have a result (from the run
 * store when there is one, else this session's last SQ_MCP_KEEP_RUNS), SQ_MCP_LIST_RESOURCES a
 * page; with a store, nextCursor (the last id listed, as text) pages further back. A URI that names
 * nothing (an unknown scheme or path, a run that does not exist or has no result) is the spec's
 * -32002 "Resource not found" with data {"uri"}; params that are not what the method takes are
 * -32602.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "mcp/assets.h"
#include "mcp/internal.h"
#include "store/store.h"

#define RUN_PREFIX "squall://runs/"

static json_t *run_entry(int64_t id, const char *kind, const char *status, const char *url)
{
    char uri[64], name[32], desc[1024];
    snprintf(uri, sizeof(uri), RUN_PREFIX "%lld", (long long)id);
    snprintf(name, sizeof(name), "run %lld", (long long)id);
    snprintf(desc, sizeof(desc), "The result document of %s run %lld (%s) against %.800s", kind,
             (long long)id, status, url ? url : "?");
    return json_pack("{s:s, s:s, s:s, s:s, s:s}", "uri", uri, "name", name, "title", name,
                     "description", desc, "mimeType", "application/json");
}

static void add_static(json_t *a)
{
    char caps_desc[] = "The safety caps every tool call is checked against (VUs, rate, duration, "
                       "the hosts a load may go to). Set by the operator; read-only.";
    json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:s}", "uri", "squall://caps", "name",
                                       "caps", "title", "Safety caps", "description", caps_desc,
                                       "mimeType", "application/json"));
    json_array_append_new(
        a, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "uri", "squall://docs/plans.md", "name",
                     "plans.md", "title", "Plan format reference", "description",
                     "How to write a plan (YAML or JSON) for run_load_test's `plan` and "
                     "validate_plan: scenarios, executors, flows, checks, thresholds.",
                     "mimeType", "text/markdown", "size", (json_int_t)sq_mcp_plans_md_len));
    json_array_append_new(
        a, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "uri", "squall://schema/result", "name",
                     "result.schema.json", "title", "Result document schema", "description",
                     "The JSON Schema of a run's result document (what run_load_test, get_run and "
                     "squall://runs/{id} return).",
                     "mimeType", "application/schema+json", "size",
                     (json_int_t)sq_mcp_result_schema_len));
}

/* The runs with a result, newest first, older than before (0: from the newest). */
static int add_runs(struct sq_mcp *m, json_t *a, int64_t before, int64_t *next, char *err,
                    size_t errlen)
{
    *next = 0;
    if (!m->cfg.store) {
        for (uint64_t id = m->next_run; id-- > 1;) {
            const struct sq_mcp__run *r = &m->runs[id % SQ_MCP_KEEP_RUNS];
            if (r->id != id)
                break;
            json_array_append_new(a, run_entry((int64_t)id, r->kind, "finished", r->url));
        }
        return 0;
    }
    struct sq_store_query q = {.limit = SQ_MCP_LIST_RESOURCES, .before_id = before};
    struct sq_store_runs l = {0};
    char serr[512];
    if (sq_store_run_list(m->cfg.store, &q, &l, serr, sizeof(serr)) < 0) {
        snprintf(err, errlen, "the run store: %s", serr);
        return SQ_MCP_INTERNAL_ERROR;
    }
    for (size_t i = 0; i < l.n; i++) {
        const struct sq_store_run *r = &l.v[i];
        if (r->has_result)
            json_array_append_new(a, run_entry(r->id, sq_store_kind_name(r->kind),
                                               sq_store_status_name(r->status), r->target));
    }
    if (l.more && l.n)
        *next = l.v[l.n - 1].id;
    sq_store_runs_dispose(&l);
    return 0;
}

static bool parse_i64(const char *s, int64_t *out)
{
    uint64_t v;
    if (s[0] == '0' || sq_parse_u64(s, 1, INT64_MAX, 0, &v) < 0)
        return false; /* a run id as written: no sign, no leading zero, no suffix */
    *out = (int64_t)v;
    return true;
}

static int list(struct sq_mcp *m, json_t *params, json_t **result, char *err, size_t errlen)
{
    json_t *cur = params ? json_object_get(params, "cursor") : NULL;
    int64_t before = 0;
    if (cur && !json_is_null(cur) &&
        (!json_is_string(cur) || !parse_i64(json_string_value(cur), &before))) {
        snprintf(err, errlen, "resources/list: params.cursor is not a cursor this server gave");
        return SQ_MCP_INVALID_PARAMS;
    }
    json_t *a = json_array();
    if (!a)
        return SQ_MCP_INTERNAL_ERROR;
    if (!before)
        add_static(a);
    int64_t next = 0;
    int rc = add_runs(m, a, before, &next, err, errlen);
    if (rc) {
        json_decref(a);
        return rc;
    }
    *result = json_pack("{s:o}", "resources", a);
    if (*result && next) {
        char c[32];
        snprintf(c, sizeof(c), "%lld", (long long)next);
        json_object_set_new(*result, "nextCursor", json_string(c));
    }
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

static json_t *caps_doc(const struct sq_mcp *m)
{
    json_t *hosts = json_array();
    for (size_t i = 0; hosts && i < m->cfg.nallow_hosts; i++)
        json_array_append_new(hosts, json_string(m->cfg.allow_hosts[i]));
    return json_pack(
        "{s:I, s:f, s:I, s:[s, s, s], s:o, s:I, s:I, s:s}", "max_vus", (json_int_t)SQ_MCP_CAP_VUS,
        "max_rate_per_s", SQ_MCP_CAP_RATE, "max_duration_s",
        (json_int_t)(SQ_MCP_CAP_DURATION / 1000000000LL), "loopback", "127.0.0.0/8", "::1",
        "localhost", "allowed_hosts", hosts, "max_targets", (json_int_t)SQ_MCP_MAX_TARGETS,
        "max_inboxes", (json_int_t)SQ_MCP_MAX_TARGETS, "note",
        "Every tool call is checked against these before anything runs: VUs are connections x "
        "streams (or a plan's peak VUs), the rate is the peak arrival rate (ramps included), the "
        "duration includes the graceful stop, and a load may go only to loopback or an allowed "
        "host (every address a name resolves to is checked). Only the operator sets them, when "
        "the server starts.");
}

static json_t *contents(const char *uri, const char *mime, const char *text, size_t len)
{
    json_t *t = json_stringn(text, len);
    if (!t)
        return NULL;
    return json_pack("{s:[{s:s, s:s, s:o}]}", "contents", "uri", uri, "mimeType", mime, "text", t);
}

/* Returns 0 with *result, SQ_MCP_RESOURCE_NOT_FOUND, or another code; err says why. */
static int read_res(struct sq_mcp *m, json_t *params, json_t **result, char *err, size_t errlen)
{
    json_t *u = params ? json_object_get(params, "uri") : NULL;
    if (!json_is_string(u) || strlen(json_string_value(u)) != json_string_length(u)) {
        snprintf(err, errlen, "resources/read: params.uri must be a string");
        return SQ_MCP_INVALID_PARAMS;
    }
    const char *uri = json_string_value(u);
    if (strcmp(uri, "squall://caps") == 0) {
        json_t *c = caps_doc(m);
        char *s = c ? json_dumps(c, JSON_INDENT(2)) : NULL;
        json_decref(c);
        *result = s ? contents(uri, "application/json", s, strlen(s)) : NULL;
        free(s);
    } else if (strcmp(uri, "squall://docs/plans.md") == 0) {
        *result =
            contents(uri, "text/markdown", (const char *)sq_mcp_plans_md, sq_mcp_plans_md_len);
    } else if (strcmp(uri, "squall://schema/result") == 0) {
        *result = contents(uri, "application/schema+json", (const char *)sq_mcp_result_schema,
                           sq_mcp_result_schema_len);
    } else if (strncmp(uri, RUN_PREFIX, strlen(RUN_PREFIX)) == 0) {
        int64_t id;
        if (!parse_i64(uri + strlen(RUN_PREFIX), &id)) {
            snprintf(err, errlen, "Resource not found: %.200s (a run's URI is squall://runs/ID)",
                     uri);
            return SQ_MCP_RESOURCE_NOT_FOUND;
        }
        json_t *doc = NULL;
        char why[640];
        int rc = sq_mcp__run_doc(m, id, &doc, NULL, 0, why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errlen, "Resource not found: %.200s: %s", uri, why);
            return rc == -EIO ? SQ_MCP_INTERNAL_ERROR : SQ_MCP_RESOURCE_NOT_FOUND;
        }
        char *s = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        *result = s ? contents(uri, "application/json", s, strlen(s)) : NULL;
        free(s);
    } else {
        snprintf(err, errlen,
                 "Resource not found: %.200s (resources/list and resources/templates/list name "
                 "what there is)",
                 uri);
        return SQ_MCP_RESOURCE_NOT_FOUND;
    }
    return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
}

static json_t *templates(void)
{
    return json_pack("{s:[{s:s, s:s, s:s, s:s, s:s}]}", "resourceTemplates", "uriTemplate",
                     RUN_PREFIX "{id}", "name", "run", "title", "A run's result", "description",
                     "The result document of run {id} (an integer, as run_load_test and list_runs "
                     "give it): the same JSON as get_run's structuredContent.result.",
                     "mimeType", "application/json");
}

int sq_mcp__resources(struct sq_mcp *m, const char *method, json_t *params, json_t **result,
                      char *err, size_t errlen)
{
    *result = NULL;
    if (strcmp(method, "resources/list") == 0)
        return list(m, params, result, err, errlen);
    if (strcmp(method, "resources/read") == 0)
        return read_res(m, params, result, err, errlen);
    if (strcmp(method, "resources/templates/list") == 0) {
        *result = templates();
        return *result ? 0 : SQ_MCP_INTERNAL_ERROR;
    }
    snprintf(err, errlen, "Method not found: %.200s", method);
    return SQ_MCP_METHOD_NOT_FOUND;
}
