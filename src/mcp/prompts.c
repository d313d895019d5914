/* mcp/prompts.c - MCP prompts (revision 2025-06-18): ready-made requests an agent's host offers its
 * user (a slash command, a menu entry), each filled in from a few arguments.
 *
 *   load_test_endpoint  url, rate?, duration?  how to load one endpoint safely with the tools:
 *                                              caps first, a short probe, then the run, then the
 *                                              figures to report
 *   investigate_run     run_id                 the run's result document embedded (the resource
 *                                              squall://runs/{id}) and what to look at in it
 *   find_capacity       url, p99_ms?           a stepwise search for the highest rate that keeps
 *                                              p99 and errors in bounds, within the caps
 *
 * prompts/get's arguments are strings (the spec's); a missing required one, one that is not a
 * string, an unknown prompt, or a run that does not exist is -32602 (Invalid params).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/internal.h"

struct arg {
    const char *name, *description;
    bool required;
};

struct prompt {
    const char *name, *title, *description;
    struct arg args[3];
};

static const struct prompt prompts[] = {
    {"load_test_endpoint",
     "Load test an endpoint",
     "Load one HTTP endpoint at a given rate for a given time with squall's tools, within the "
     "safety caps: a short probe first, then the run, then its figures.",
     {{"url",
       "The endpoint, e.g. http://127.0.0.1:8080/api (loopback unless the operator "
       "allowed the host)",
       true},
      {"rate", "Requests per second to hold (at most 10000); default 100", false},
      {"duration", "How long, e.g. 30s or 2m (at most 5m); default 10s", false}}},
    {"investigate_run",
     "Investigate a run",
     "Read one stored run's result (embedded) and explain what happened: throughput, latency, "
     "errors and their sampled responses, failed checks or thresholds.",
     {{"run_id", "The run's id, as run_load_test or list_runs gives it", true}}},
    {"find_capacity",
     "Find an endpoint's capacity",
     "Step the arrival rate up in short bounded runs until latency or errors break a bound, and "
     "report the highest rate that held.",
     {{"url", "The endpoint (loopback unless the operator allowed the host)", true},
      {"p99_ms", "The p99 latency bound in milliseconds; default 100", false}}},
};

#define NPROMPTS (sizeof(prompts) / sizeof(prompts[0]))

static json_t *descriptor(const struct prompt *p)
{
    json_t *args = json_array();
    for (size_t i = 0; args && i < 3 && p->args[i].name; i++)
        json_array_append_new(args,
                              json_pack("{s:s, s:s, s:b}", "name", p->args[i].name, "description",
                                        p->args[i].description, "required", p->args[i].required));
    return json_pack("{s:s, s:s, s:s, s:o}", "name", p->name, "title", p->title, "description",
                     p->description, "arguments", args);
}

static json_t *text_msg(const char *text)
{
    return json_pack("{s:s, s:{s:s, s:s}}", "role", "user", "content", "type", "text", "text",
                     text);
}

static json_t *result(const struct prompt *p, json_t *messages)
{
    return messages ? json_pack("{s:s, s:o}", "description", p->description, "messages", messages)
                    : NULL;
}

/* A rate argument: a number > 0. */
static bool num_arg(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v > 0) || v > 1e9)
        return false;
    *out = v;
    return true;
}

static int load_test_endpoint(const struct prompt *p, const char *const *a, json_t **out, char *err,
                              size_t errlen)
{
    double rate = 100;
    if (a[1] && !num_arg(a[1], &rate)) {
        snprintf(err, errlen, "prompts/get: load_test_endpoint: rate '%.40s' is not a number > 0",
                 a[1]);
        return SQ_MCP_INVALID_PARAMS;
    }
    const char *dur = a[2] ? a[2] : "10s";
    char over[160] = "";
    if (rate > SQ_MCP_CAP_RATE) {
        snprintf(over, sizeof(over),
                 " The rate asked for (%.0f/s) is over the cap of 10000/s: use 10000 and say so.",
                 rate);
        rate = SQ_MCP_CAP_RATE;
    }
    double probe = rate / 10 < 1 ? 1 : rate / 10;
    char *t = NULL;
    if (asprintf(&t,
                 "Load test %s at %.0f requests/s for %s with squall's tools, safely.%s\n\n"
                 "1. Read the resource squall://caps: the URL's host must be on loopback or an "
                 "allowed host, the run at most 5 minutes, at most 400 VUs and 10000 requests/s. "
                 "If the request is over a cap, do not try to work around it: tell me.\n"
                 "2. Probe first: run_load_test with quick {\"url\": \"%s\", \"rate\": %.0f, "
                 "\"duration\": \"3s\", \"connections\": 8}. If more than 5%% of requests fail "
                 "or nothing completes, stop there and report the errors (the summary's Sampled "
                 "lines show the failing responses).\n"
                 "3. The run: run_load_test with quick {\"url\": \"%s\", \"rate\": %.0f, "
                 "\"duration\": \"%s\", \"connections\": %d}. Do not start another run while "
                 "it is under way.\n"
                 "4. Report from the result: requests completed and per second against the rate "
                 "asked (a shortfall means the server or the connections could not keep up: "
                 "see dropped), latency p50/p90/p99/max, errors by kind and status classes, and "
                 "the run id so that the run can be read again (squall://runs/ID) or compared "
                 "(compare_runs).",
                 a[0], rate, dur, over, a[0], probe, a[0], rate, dur,
                 rate >= 2000  ? 64
                 : rate >= 200 ? 16
                               : 4) < 0)
        return SQ_MCP_INTERNAL_ERROR;
    *out = result(p, json_pack("[o]", text_msg(t)));
    free(t);
    return *out ? 0 : SQ_MCP_INTERNAL_ERROR;
}

static int investigate_run(struct sq_mcp *m, const struct prompt *p, const char *const *a,
                           json_t **out, char *err, size_t errlen)
{
    int64_t id = 0;
    char *end;
    long long v = strtoll(a[0], &end, 10);
    if (end == a[0] || *end || v < 1) {
        snprintf(err, errlen, "prompts/get: investigate_run: run_id '%.40s' is not a run id", a[0]);
        return SQ_MCP_INVALID_PARAMS;
    }
    id = (int64_t)v;
    json_t *doc = NULL;
    char why[640];
    int rc = sq_mcp__run_doc(m, id, &doc, NULL, 0, why, sizeof(why));
    if (rc < 0) {
        snprintf(err, errlen, "prompts/get: investigate_run: %s", why);
        return rc == -EIO ? SQ_MCP_INTERNAL_ERROR : SQ_MCP_INVALID_PARAMS;
    }
    char *js = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    char uri[64], text[1024];
    snprintf(uri, sizeof(uri), "squall://runs/%lld", (long long)id);
    snprintf(text, sizeof(text),
             "Investigate squall run %lld (its result document follows, the resource %s). Say "
             "whether the run met its target rate (requests.completed per second against rate; "
             "dropped), how latency behaved (p50/p90/p99/max, and the per-second series for a "
             "trend), which errors happened (errors by kind, status classes) and what the "
             "sampled_exchanges show of the failing responses, and whether checks or thresholds "
             "failed. End with the likely cause and one next experiment (a tool call within the "
             "caps).",
             (long long)id, uri);
    json_t *msgs = js ? json_pack("[o, {s:s, s:{s:s, s:{s:s, s:s, s:s}}}]", text_msg(text), "role",
                                  "user", "content", "type", "resource", "resource", "uri", uri,
                                  "mimeType", "application/json", "text", js)
                      : NULL;
    free(js);
    *out = result(p, msgs);
    return *out ? 0 : SQ_MCP_INTERNAL_ERROR;
}

static int find_capacity(const struct prompt *p, const char *const *a, json_t **out, char *err,
                         size_t errlen)
{
    double p99 = 100;
    if (a[1] && !num_arg(a[1], &p99)) {
        snprintf(err, errlen, "prompts/get: find_capacity: p99_ms '%.40s' is not a number > 0",
                 a[1]);
        return SQ_MCP_INVALID_PARAMS;
    }
    char *t = NULL;
    if (asprintf(&t,
                 "Find the highest request rate %s sustains with p99 latency under %g ms and "
                 "fewer than 1%% errors, using squall's tools within the safety caps (read "
                 "squall://caps first; at most 10000 requests/s and 400 VUs per run).\n\n"
                 "Run run_load_test with quick {\"url\": \"%s\", \"rate\": R, \"duration\": "
                 "\"5s\", \"connections\": 64} for R = 100, then double R after each run that "
                 "held (p99 under the bound, errors under 1%%, completed per second within 5%% of "
                 "R), up to 10000. After the first run that did not hold, bisect once between "
                 "the last rate that held and it. One run at a time. Report a table of R, "
                 "completed/s, p50, p99 and errors per run (with run ids), the highest rate "
                 "that held, and what gave way first (latency, errors, or throughput).",
                 a[0], p99, a[0]) < 0)
        return SQ_MCP_INTERNAL_ERROR;
    *out = result(p, json_pack("[o]", text_msg(t)));
    free(t);
    return *out ? 0 : SQ_MCP_INTERNAL_ERROR;
}

static int get(struct sq_mcp *m, json_t *params, json_t **out, char *err, size_t errlen)
{
    json_t *name = params ? json_object_get(params, "name") : NULL;
    json_t *args = params ? json_object_get(params, "arguments") : NULL;
    if (!json_is_string(name)) {
        snprintf(err, errlen, "prompts/get: params.name must be a string");
        return SQ_MCP_INVALID_PARAMS;
    }
    if (args && !json_is_object(args) && !json_is_null(args)) {
        snprintf(err, errlen, "prompts/get: params.arguments must be an object of strings");
        return SQ_MCP_INVALID_PARAMS;
    }
    const struct prompt *p = NULL;
    for (size_t i = 0; i < NPROMPTS; i++)
        if (strcmp(json_string_value(name), prompts[i].name) == 0)
            p = &prompts[i];
    if (!p) {
        snprintf(err, errlen, "prompts/get: no prompt '%.100s' (prompts/list names them)",
                 json_string_value(name));
        return SQ_MCP_INVALID_PARAMS;
    }
    const char *a[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < 3 && p->args[i].name; i++) {
        json_t *v = json_is_object(args) ? json_object_get(args, p->args[i].name) : NULL;
        if (v && !json_is_string(v)) {
            snprintf(err, errlen, "prompts/get: %s: argument '%s' must be a string", p->name,
                     p->args[i].name);
            return SQ_MCP_INVALID_PARAMS;
        }
        if (v && json_string_length(v) > 0 &&
            strlen(json_string_value(v)) == json_string_length(v) && json_string_length(v) < 2048)
            a[i] = json_string_value(v);
        else if (v && json_string_length(v) > 0) {
            snprintf(err, errlen, "prompts/get: %s: argument '%s' is too long or holds a NUL",
                     p->name, p->args[i].name);
            return SQ_MCP_INVALID_PARAMS;
        }
        if (!a[i] && p->args[i].required) {
            snprintf(err, errlen, "prompts/get: %s: the argument '%s' is required", p->name,
                     p->args[i].name);
            return SQ_MCP_INVALID_PARAMS;
        }
    }
    if (p == &prompts[0])
        return load_test_endpoint(p, a, out, err, errlen);
    if (p == &prompts[1])
        return investigate_run(m, p, a, out, err, errlen);
    return find_capacity(p, a, out, err, errlen);
}

int sq_mcp__prompts(struct sq_mcp *m, const char *method, json_t *params, json_t **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    if (strcmp(method, "prompts/list") == 0) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < NPROMPTS; i++)
            json_array_append_new(a, descriptor(&prompts[i]));
        *out = a ? json_pack("{s:o}", "prompts", a) : NULL;
        return *out ? 0 : SQ_MCP_INTERNAL_ERROR;
    }
    if (strcmp(method, "prompts/get") == 0)
        return get(m, params, out, err, errlen);
    snprintf(err, errlen, "Method not found: %.200s", method);
    return SQ_MCP_METHOD_NOT_FOUND;
}
