/* micro_script.c - ns per call of each per-request script hook, as a worker calls them.
 *
 * request() in the styles wrk's scripts use: counter.lua (a new path and header each time,
 * through wrk.format), a dynamic POST (request() returning wrk.format() over a wrk table with a
 * method, a body and a header), the same counter with wrk.format written in Lua the way wrk's
 * own wrk.lua renders (to show what the C version saves), and pipeline.lua (one string of three
 * requests returned again and again: the binding's own floor). response() with a 1 KiB body and
 * 8 headers: a function that only counts (setup.lua's) and one that reads a header and the body
 * length. delay() returning a constant. Scripts come from tests/scripts/ where one exists.
 * Each figure is the median of REPS repetitions of ITERS calls, GC included.
 * Usage: micro_script [iterations_per_rep] [reps] [only: run the figures whose label has this]
 * (for instruction counts: valgrind --tool=callgrind build/bench/micro_script 20000 1 counter)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "micro.h"
#include "base/clock.h"
#include "script/script.h"

static volatile uint64_t sink;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "micro_script: %s: %s\n", what, detail);
    exit(1);
}

static const struct sq_script_header headers[] = {{"Accept", "*/*"}};
static const struct sq_script_target target = {"http",  "127.0.0.1", "8080", "/",
                                               headers, 1,           false,  0};

/* Loads tests/scripts/name and starts it as a worker state; with main, setup() runs first. */
static struct sq_script *load_file(const char *name, struct sq_script **main)
{
    char path[1024];
    const char *here = __FILE__; /* .../bench/micro/micro_script.c */
    const char *cut = strstr(here, "bench/micro/micro_script.c");
    if (!cut)
        die("cannot find tests/scripts from", here);
    snprintf(path, sizeof(path), "%.*stests/scripts/%s", (int)(cut - here), here, name);
    struct sq_script *s;
    char err[1024];
    if (sq_script_new(path, &target, &s, err, sizeof(err)) != 0)
        die(name, err);
    if (main) {
        if (sq_script_new(path, &target, main, err, sizeof(err)) != 0)
            die(name, err);
        if (sq_script_setup(*main, s) != 0)
            die(name, sq_script_error(*main));
    }
    if (sq_script_init(s, "http://127.0.0.1:8080/", 0, NULL) != 0)
        die(name, sq_script_error(s));
    return s;
}

static struct sq_script *load_src(const char *name, const char *src)
{
    struct sq_script *s;
    char err[1024];
    if (sq_script_new_string(name, src, strlen(src), &target, &s, err, sizeof(err)) != 0)
        die(name, err);
    if (sq_script_init(s, "http://127.0.0.1:8080/", 0, NULL) != 0)
        die(name, sq_script_error(s));
    return s;
}

static const char post_dynamic[] =
    "wrk.method = 'POST'\n"
    "wrk.body = 'foo=bar&baz=quux'\n"
    "wrk.headers['Content-Type'] = 'application/x-www-form-urlencoded'\n"
    "function request() return wrk.format() end\n";

/* counter.lua's request() over a wrk.format written in Lua, rendering as wrk.lua does: a table
 * of lines joined by CRLF, string.format per line, Host and Content-Length set in the table. */
static const char counter_lua_format[] =
    "wrk.format = function(method, path, headers, body)\n"
    "  method = method or wrk.method\n"
    "  path = path or wrk.path\n"
    "  headers = headers or wrk.headers\n"
    "  body = body or wrk.body\n"
    "  if not headers.Host then headers.Host = wrk.headers.Host end\n"
    "  headers['Content-Length'] = body and #body\n"
    "  local lines = { string.format('%s %s HTTP/1.1', method, path) }\n"
    "  for k, v in pairs(headers) do lines[#lines + 1] = string.format('%s: %s', k, v) end\n"
    "  lines[#lines + 1] = ''\n"
    "  lines[#lines + 1] = body or ''\n"
    "  return table.concat(lines, '\\r\\n')\n"
    "end\n"
    "counter = 0\n"
    "function request()\n"
    "  local n = counter\n"
    "  counter = n + 1\n"
    "  wrk.headers['X-Counter'] = n\n"
    "  return wrk.format(nil, '/' .. n)\n"
    "end\n";

static const char response_reads[] = "seen, bytes = 0, 0\n"
                                     "function response(status, headers, body)\n"
                                     "  if status == 200 and headers['X-Token'] then\n"
                                     "    seen = seen + 1\n"
                                     "  end\n"
                                     "  bytes = bytes + #body\n"
                                     "end\n";

static const char delay_const[] = "function delay() return 10 end\n";

static uint64_t call_request(struct sq_script *s)
{
    const char *p;
    size_t len;
    uint32_t n;
    if (sq_script_request(s, &p, &len, &n) != 0)
        die("request", sq_script_error(s));
    return len + n;
}

static char body[1024];
static const struct sq_resp_header resp_headers[] = {
    {"Server", 6, "squall", 6},
    {"Date", 4, "Tue, 01 Dec 2026 10:00:00 GMT", 29},
    {"Content-Type", 12, "application/json", 16},
    {"Content-Length", 14, "1024", 4},
    {"Connection", 10, "keep-alive", 10},
    {"Cache-Control", 13, "no-store", 8},
    {"X-Request-Id", 12, "8731", 4},
    {"X-Token", 7, "tok-123", 7},
};

static uint64_t call_response(struct sq_script *s)
{
    if (sq_script_response(s, 200, resp_headers, 8, body, sizeof(body)) != 0)
        die("response", sq_script_error(s));
    return 1;
}

static uint64_t call_delay(struct sq_script *s)
{
    int64_t ns;
    if (sq_script_delay(s, &ns) != 0)
        die("delay", sq_script_error(s));
    return (uint64_t)ns;
}

static uint64_t call_static(struct sq_script *s)
{
    const char *p;
    size_t len;
    uint32_t n;
    sq_script_static_request(s, &p, &len, &n);
    return len + n;
}

static const char *only;

static void bench(const char *label, struct sq_script *s, uint64_t (*fn)(struct sq_script *),
                  long iters, int reps)
{
    double t[101] = {0}; /* zeroed: gcc -O3 cannot tell that reps >= 1 fills t[0] */
    if (only && !strstr(label, only))
        return;
    for (long i = 0; i < iters / 10 + 1; i++) /* warm up: JIT traces, buffers at size */
        sink += fn(s);
    for (int r = 0; r < reps; r++) {
        uint64_t acc = 0;
        int64_t t0 = sq_now_ns();
        for (long i = 0; i < iters; i++)
            acc += fn(s);
        int64_t t1 = sq_now_ns();
        sink += acc;
        t[r] = (double)(t1 - t0) / (double)iters;
    }
    double lo = t[0], hi = t[0];
    for (int r = 1; r < reps; r++) {
        lo = t[r] < lo ? t[r] : lo;
        hi = t[r] > hi ? t[r] : hi;
    }
    printf("micro_script: %-44s %8.1f ns  (min %.1f, max %.1f; median of %d x %ld)\n", label,
           micro_median(t, reps), lo, hi, reps, iters);
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 500000;
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    only = argc > 3 ? argv[3] : NULL;
    if (iters <= 0 || reps <= 0 || reps > 101) {
        fprintf(stderr, "usage: micro_script [iterations_per_rep] [reps (1..101)] [only]\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (char)('a' + i % 26);

    struct sq_script *setup_main = NULL;
    struct sq_script *counter = load_file("counter.lua", NULL);
    struct sq_script *post = load_src("post_dynamic", post_dynamic);
    struct sq_script *luafmt = load_src("counter_lua_format", counter_lua_format);
    struct sq_script *pipeline = load_file("pipeline.lua", NULL);
    struct sq_script *setup = load_file("setup.lua", &setup_main); /* response() only counts */
    struct sq_script *reads = load_src("response_reads", response_reads);
    struct sq_script *delay = load_src("delay_const", delay_const);
    struct sq_script *post_static = load_file("post.lua", NULL);

    bench("request() counter.lua (C wrk.format)", counter, call_request, iters, reps);
    bench("request() dynamic POST, wrk.format()", post, call_request, iters, reps);
    bench("request() counter.lua, wrk.format in Lua", luafmt, call_request, iters, reps);
    bench("request() pipeline.lua (same 3-request str)", pipeline, call_request, iters, reps);
    bench("response() 1 KiB body, 8 headers, counts", setup, call_response, iters, reps);
    bench("response() 1 KiB body, reads header + #body", reads, call_response, iters, reps);
    bench("delay() returning a constant", delay, call_delay, iters, reps);
    bench("static request (post.lua: no hook)", post_static, call_static, iters, reps);

    sq_script_free(counter);
    sq_script_free(post);
    sq_script_free(luafmt);
    sq_script_free(pipeline);
    sq_script_free(setup);
    sq_script_free(reads);
    sq_script_free(delay);
    sq_script_free(post_static);
    sq_script_free(setup_main);
    return 0;
}
