/* tests/unit/test_script.c - the LuaJIT binding: wrk's API (the wrk table, wrk.format, lookup,
 * connect, thread objects, every hook), error messages, the request counter, done() over a real
 * histogram, plan hooks with a fake VU, and each fixture under tests/scripts/ driven as the
 * engine will drive it. Network: 127.0.0.1 only (a listening socket this test opens). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "script/internal.h"
#include "script/script.h"
#include "stats/hist.h"

/* ---- allocation counting (not under a sanitizer, which owns malloc) ---- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NO_ALLOC_COUNT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NO_ALLOC_COUNT 1
#endif
#endif

#ifndef NO_ALLOC_COUNT
/* glibc's own entry points: this test's malloc family counts, then forwards. LuaJIT allocates
 * from its own arena (mmap), so what is counted is what squall's C allocates. */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
static long allocs;
static bool counting;

void *malloc(size_t n)
{
    allocs += counting;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    allocs += counting;
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    allocs += counting;
    return __libc_realloc(p, n);
}
#endif

/* ---- helpers ---- */

static const char *fixture(const char *name)
{
    static char path[1024];
    const char *here = __FILE__; /* .../tests/unit/test_script.c */
    const char *cut = strstr(here, "tests/unit/test_script.c");
    assert_non_null(cut);
    snprintf(path, sizeof(path), "%.*stests/scripts/%s", (int)(cut - here), here, name);
    return path;
}

static const struct sq_script_header default_headers[] = {{"Accept", "*/*"}};

static const struct sq_script_target target = {
    .scheme = "http",
    .host = "127.0.0.1",
    .port = "8080",
    .path = "/items?x=1",
    .headers = default_headers,
    .nheaders = 1,
};

static struct sq_script *load(const char *file)
{
    struct sq_script *s = NULL;
    char err[1024];
    int rc = sq_script_new(fixture(file), &target, &s, err, sizeof(err));
    if (rc != 0)
        fail_msg("%s: %s", file, err);
    return s;
}

static struct sq_script *load_str(const char *src)
{
    struct sq_script *s = NULL;
    char err[1024];
    int rc = sq_script_new_string("t.lua", src, strlen(src), &target, &s, err, sizeof(err));
    if (rc != 0)
        fail_msg("%s", err);
    return s;
}

/* tostring(expr) evaluated in s's state (or "ERROR: message"). */
static const char *eval(struct sq_script *s, const char *expr)
{
    static char out[4096];
    char code[2048];
    lua_State *L = s->L;
    snprintf(code, sizeof(code), "return tostring(%s)", expr);
    if (luaL_loadstring(L, code) != 0 || lua_pcall(L, 0, 1, 0) != 0)
        snprintf(out, sizeof(out), "ERROR: %s", lua_tostring(L, -1));
    else
        snprintf(out, sizeof(out), "%s", lua_tostring(L, -1));
    lua_settop(L, SLOT_TOP);
    return out;
}

static void init(struct sq_script *s)
{
    if (sq_script_init(s, "http://127.0.0.1:8080/items?x=1", 0, NULL) != 0)
        fail_msg("init: %s", sq_script_error(s));
}

/* The next request() as a NUL-terminated copy. */
static const char *next_request(struct sq_script *s, uint32_t *nreq)
{
    static char out[8192];
    const char *p;
    size_t len;
    uint32_t n;
    if (sq_script_request(s, &p, &len, &n) != 0)
        fail_msg("request: %s", sq_script_error(s));
    assert_true(len < sizeof(out));
    memcpy(out, p, len);
    out[len] = '\0';
    if (nreq)
        *nreq = n;
    return out;
}

static void contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, hay);
}

/* ---- loading and errors ---- */

static void test_syntax_error_names_file_and_line(void **state)
{
    (void)state;
    struct sq_script *s = NULL;
    char err[1024];
    const char *path = fixture("bad/syntax.lua");
    assert_int_equal(sq_script_new(path, &target, &s, err, sizeof(err)), -SQ_ESCRIPT);
    assert_null(s);
    char want[1100];
    snprintf(want, sizeof(want), "%s:4:", path);
    contains(err, want);
    contains(err, "unexpected symbol");

    /* the same from a string: the chunk name stands for the file */
    const char *src = "x = 1\n\nif then\n";
    assert_int_equal(
        sq_script_new_string("inline.lua", src, strlen(src), NULL, &s, err, sizeof(err)),
        -SQ_ESCRIPT);
    contains(err, "inline.lua:3:");
}

static void test_missing_file(void **state)
{
    (void)state;
    struct sq_script *s = NULL;
    char err[512];
    assert_int_equal(sq_script_new("/nonexistent/dir/x.lua", &target, &s, err, sizeof(err)),
                     -ENOENT);
    assert_null(s);
    contains(err, "/nonexistent/dir/x.lua: cannot open");
}

static void test_top_level_runtime_error_has_traceback(void **state)
{
    (void)state;
    struct sq_script *s = NULL;
    char err[2048];
    const char *src = "local function f()\n  error('boom')\nend\nf()\n";
    assert_int_equal(sq_script_new_string("top.lua", src, strlen(src), NULL, &s, err, sizeof(err)),
                     -SQ_ESCRIPT);
    contains(err, "top.lua:2: boom");
    contains(err, "stack traceback:");
    contains(err, "top.lua:4");
}

static void test_request_runtime_error_has_traceback(void **state)
{
    (void)state;
    struct sq_script *s = load("bad/request_error.lua");
    init(s);
    assert_true(sq_script_hooks(s) & SQ_SCRIPT_REQUEST);
    const char *p;
    size_t len;
    uint32_t n;
    assert_int_equal(sq_script_request(s, &p, &len, &n), -SQ_ESCRIPT);
    const char *e = sq_script_error(s);
    contains(e, "request(): ");
    assert_null(strstr(e, "defined at")); /* the message has its own line */
    assert_null(strstr(e, "[C]: at 0x")); /* squall's own frames are not shown */
    contains(e, "request_error.lua:7: attempt to perform arithmetic on global 'missing'");
    contains(e, "stack traceback:");
    contains(e, "in function 'next_path'");
    contains(e, "request_error.lua:12");
    /* the state stays usable: fix the cause and call again */
    assert_string_equal(eval(s, "calls"), "1");
    assert_string_equal(eval(s, "(function() missing = 5 return 1 end)()"), "1");
    contains(next_request(s, &n), "GET /7 HTTP/1.1\r\n");
    sq_script_free(s);
}

static void test_format_bad_args(void **state)
{
    (void)state;
    struct sq_script *s = load("bad/format_args.lua");
    init(s);
    const char *p;
    size_t len;
    uint32_t n;
    assert_int_equal(sq_script_request(s, &p, &len, &n), -SQ_ESCRIPT);
    /* `return wrk.format(...)` is a tail call: the caller's line is gone, so the message
     * names where request() is defined */
    contains(sq_script_error(s), "request() (defined at ");
    contains(sq_script_error(s), "format_args.lua:3): wrk.format: the method (argument #1) is a "
                                 "table, not a string");
    contains(sq_script_error(s), "stack traceback:");
    sq_script_free(s);

    s = load_str("");
    init(s);
    static const struct {
        const char *expr, *msg;
    } cases[] = {
        {"wrk.format('GET', {})", "the path (argument #2) is a table"},
        {"wrk.format('GET', '/', 'x')", "the headers (argument #3) is a string, not a table"},
        {"wrk.format('GET', '/', nil, {})", "the body (argument #4) is a table"},
        {"wrk.format('GET', '/', {['X-A'] = {}})", "header 'X-A' is a table"},
        {"wrk.format('GET', '/', {['X-F'] = print})", "header 'X-F' is a function"},
        {"wrk.format('GET', '/', {'X: y'})", "header names must be strings, not a number (1)"},
        {"(function() wrk.method = {} return wrk.format() end)()", "wrk.method is a table"},
        {"(function() wrk.method = 'GET' wrk.headers = 5 return wrk.format() end)()",
         "wrk.headers is a number, not a table"},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(cases); i++) {
        const char *r = eval(s, cases[i].expr);
        contains(r, "ERROR: ");
        contains(r, cases[i].msg);
    }
    sq_script_free(s);
}

/* ---- the wrk table and wrk.format ---- */

static void test_wrk_table(void **state)
{
    (void)state;
    struct sq_script *s = load_str("");
    assert_string_equal(eval(s, "wrk.scheme"), "http");
    assert_string_equal(eval(s, "wrk.host"), "127.0.0.1");
    assert_string_equal(eval(s, "wrk.port"), "8080");
    assert_string_equal(eval(s, "wrk.method"), "GET");
    assert_string_equal(eval(s, "wrk.path"), "/items?x=1");
    assert_string_equal(eval(s, "wrk.headers.Accept"), "*/*");
    assert_string_equal(eval(s, "wrk.body"), "nil");
    assert_string_equal(eval(s, "wrk.thread"), "nil");
    assert_string_equal(eval(s, "require('wrk') == wrk"), "true");
    assert_string_equal(eval(s, "type(wrk.format)..type(wrk.lookup)..type(wrk.connect)"),
                        "functionfunctionfunction");
    sq_script_free(s);

    /* no target: wrk's defaults */
    char err[256];
    assert_int_equal(sq_script_new_string("d", "", 0, NULL, &s, err, sizeof(err)), 0);
    assert_string_equal(eval(s, "wrk.scheme .. wrk.host .. wrk.path .. tostring(wrk.port)"),
                        "httplocalhost/nil");
    assert_string_equal(eval(s, "next(wrk.headers)"), "nil");
    sq_script_free(s);
}

static void test_format(void **state)
{
    (void)state;
    struct sq_script *s = load_str("");
    /* before init there is no Host (wrk sets it in wrk.init) */
    assert_string_equal(eval(s, "wrk.format()"), "GET /items?x=1 HTTP/1.1\r\nAccept: */*\r\n\r\n");
    init(s);
    assert_string_equal(eval(s, "wrk.headers.Host"), "127.0.0.1:8080");
    assert_string_equal(eval(s, "wrk.format()"),
                        "GET /items?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\n\r\n");
    /* explicit arguments; the caller's headers table without Host takes wrk's Host */
    assert_string_equal(eval(s, "wrk.format('PUT', '/a', {['X-N'] = 5}, 'hello')"),
                        "PUT /a HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-N: 5\r\n"
                        "Content-Length: 5\r\n\r\nhello");
    /* the table's own Host wins; a Content-Length key is replaced by the body's length (or
     * dropped without a body), as wrk does */
    assert_string_equal(eval(s, "wrk.format('POST', '/b', {Host = 'h', ['Content-Length'] = 99},"
                                " '')"),
                        "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
    assert_string_equal(eval(s, "wrk.format(nil, nil, {['Content-Length'] = 99})"),
                        "GET /items?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n");
    /* numbers as path and body, booleans as values, the body default from the table */
    assert_string_equal(eval(s, "wrk.format('GET', 7, {X = true}, 42)"),
                        "GET 7 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX: true\r\n"
                        "Content-Length: 2\r\n\r\n42");
    assert_string_equal(eval(s, "(function() wrk.body = 'b' local r = wrk.format('POST', '/') "
                                "wrk.body = nil return r end)()"),
                        "POST / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\n"
                        "Content-Length: 1\r\n\r\nb");
    /* a number value reads as tostring() writes it (integers are formatted in C) */
    assert_string_equal(eval(s, "(function() for _, v in ipairs({0, 7, -3, 2.5, 1e15, -1e13, "
                                "99999999999999, 123456789012345, 2^53, 1/0, -0.5}) do "
                                "local r = wrk.format('GET', '/', {X = v}) "
                                "if not r:find('\\r\\nX: ' .. tostring(v) .. '\\r\\n', 1, true) "
                                "then return r end end return 'all' end)()"),
                        "all");
    /* the caller's table is not changed */
    assert_string_equal(eval(s, "(function() local h = {A = '1'} wrk.format(nil, nil, h, 'x') "
                                "return tostring(h.Host) .. tostring(h['Content-Length']) end)()"),
                        "nilnil");
    sq_script_free(s);
}

/* The C wrk.format renders what wrk's own Lua rendering gives (wrk.lua: defaults from the wrk
 * table, Host from wrk.headers, Content-Length from the body, lines joined by CRLF), up to the
 * order of the header lines, which pairs() leaves unspecified in wrk too. */
static void test_format_matches_wrk_lua(void **state)
{
    (void)state;
    struct sq_script *s =
        load_str("function ref_format(method, path, headers, body)\n"
                 "  method = method or wrk.method\n"
                 "  path = path or wrk.path\n"
                 "  local h = {}\n"
                 "  for k, v in pairs(headers or wrk.headers) do h[k] = v end\n"
                 "  body = body or wrk.body\n"
                 "  if not h.Host then h.Host = wrk.headers.Host end\n"
                 "  h['Content-Length'] = body and #body\n"
                 "  local lines = { string.format('%s %s HTTP/1.1', method, path) }\n"
                 "  for k, v in pairs(h) do lines[#lines + 1] = string.format('%s: %s', k, v) end\n"
                 "  lines[#lines + 1] = ''\n"
                 "  lines[#lines + 1] = body or ''\n"
                 "  return table.concat(lines, '\\r\\n')\n"
                 "end\n"
                 "-- request line, sorted header lines, body\n"
                 "function canon(r)\n"
                 "  local head, body = r:match('^(.-)\\r\\n\\r\\n(.*)$')\n"
                 "  local lines = {}\n"
                 "  for l in (head .. '\\r\\n'):gmatch('(.-)\\r\\n') do lines[#lines + 1] = l end\n"
                 "  local first = table.remove(lines, 1)\n"
                 "  table.sort(lines)\n"
                 "  return first .. '|' .. table.concat(lines, '|') .. '|' .. body\n"
                 "end\n"
                 "function same(...)\n"
                 "  local a, b = canon(wrk.format(...)), canon(ref_format(...))\n"
                 "  if a ~= b then return a .. ' ~= ' .. b end\n"
                 "  return 'same'\n"
                 "end\n");
    static const char *const cases[] = {
        "same()",
        "same('POST', '/x', {A = '1', B = 2}, 'body')",
        "same(nil, '/p', {Host = 'h'})",
        "same(nil, nil, {['Content-Length'] = 5, X = 'y'})",
        "same('PUT', '/e', nil, '')",
        "same(nil, '/q?a=1&b=2', {['X-Num'] = 12345, ['X-Frac'] = 0.25}, 'x=1')",
        ("(function() wrk.method = 'PATCH' wrk.body = 'wb' local r = same() "
         "wrk.method = 'GET' wrk.body = nil return r end)()"),
    };
    for (int pass = 0; pass < 2; pass++) { /* before init (no Host yet) and after */
        for (size_t i = 0; i < SQ_ARRAY_LEN(cases); i++) {
            const char *r = eval(s, cases[i]);
            if (strcmp(r, "same") != 0)
                fail_msg("%s: %s", cases[i], r);
        }
        if (pass == 0)
            init(s);
    }
    /* the comparison can tell a difference */
    assert_string_equal(eval(s, "canon(wrk.format()) == canon(ref_format('POST'))"), "false");
    assert_string_equal(eval(s, "canon(wrk.format(nil, nil, {A = 1})) == "
                                "canon(ref_format(nil, nil, {A = 2}))"),
                        "false");
    sq_script_free(s);
}

static void test_host_header_forms(void **state)
{
    (void)state;
    struct sq_script *s;
    char err[256];
    struct sq_script_target t6 = {.host = "::1", .port = "9000", .path = "/"};
    assert_int_equal(sq_script_new_string("v6", "", 0, &t6, &s, err, sizeof(err)), 0);
    init(s);
    assert_string_equal(eval(s, "wrk.headers.Host"), "[::1]:9000");
    sq_script_free(s);

    struct sq_script_target noport = {.host = "example.test", .path = "/"};
    assert_int_equal(sq_script_new_string("np", "", 0, &noport, &s, err, sizeof(err)), 0);
    init(s);
    assert_string_equal(eval(s, "wrk.headers.Host"), "example.test");
    sq_script_free(s);

    /* -H Host is kept */
    struct sq_script_header h[] = {{"Host", "virtual.test"}};
    struct sq_script_target th = {.host = "127.0.0.1", .port = "1", .headers = h, .nheaders = 1};
    assert_int_equal(sq_script_new_string("h", "", 0, &th, &s, err, sizeof(err)), 0);
    init(s);
    const char *req;
    size_t len;
    uint32_t n;
    sq_script_static_request(s, &req, &len, &n);
    assert_string_equal(req, "GET / HTTP/1.1\r\nHost: virtual.test\r\n\r\n");
    sq_script_free(s);
}

static void test_init_args(void **state)
{
    (void)state;
    struct sq_script *s = load_str("function init(args) got = table.concat(args, ',', 0) "
                                   "n = #args end");
    const char *argv[] = {"a", "b c"};
    assert_int_equal(sq_script_init(s, "http://h/", 2, argv), 0);
    assert_string_equal(eval(s, "got"), "http://h/,a,b c");
    assert_string_equal(eval(s, "n"), "2");
    /* wrk.thread is the state's own thread */
    assert_string_equal(eval(s, "type(wrk.thread)"), "userdata");
    sq_script_free(s);

    s = load_str("function init(args) error('no good', 0) end");
    assert_int_equal(sq_script_init(s, "u", 0, NULL), -SQ_ESCRIPT);
    contains(sq_script_error(s), "init: no good");
    sq_script_free(s);
}

/* ---- lookup, connect, addresses ---- */

static int listen_local(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 8), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void test_lookup_connect(void **state)
{
    (void)state;
    struct sq_script *s = load_str("");
    assert_string_equal(eval(s, "#wrk.lookup('127.0.0.1', '8080')"), "1");
    assert_string_equal(eval(s, "wrk.lookup('127.0.0.1', 8080)[1]"), "127.0.0.1:8080");
    assert_string_equal(eval(s, "wrk.lookup('::1', 'http')[1]"), "::1:80");
    assert_string_equal(eval(s, "wrk.lookup('127.0.0.1', 1)[1] == wrk.lookup('127.0.0.1', 1)[1]"),
                        "true");
    contains(eval(s, "wrk.lookup({}, 1)"), "wrk.lookup: the host (argument #1) is a table");
    contains(eval(s, "wrk.lookup('127.0.0.1', 'no-such-service-name')"),
             "wrk.lookup: cannot resolve 127.0.0.1:no-such-service-name");
    contains(eval(s, "wrk.connect('127.0.0.1:80')"),
             "wrk.connect: argument #1 is a string, not an address from wrk.lookup");

    uint16_t port;
    int fd = listen_local(&port);
    char expr[128];
    snprintf(expr, sizeof(expr), "wrk.connect(wrk.lookup('127.0.0.1', %u)[1])", port);
    assert_string_equal(eval(s, expr), "true");
    close(fd);
    assert_string_equal(eval(s, expr), "false"); /* refused now */
    sq_script_free(s);
}

static void test_thread_addr(void **state)
{
    (void)state;
    struct sq_script *main = load("addr.lua");
    struct sq_script *w = load("addr.lua");
    uint16_t port;
    int fd = listen_local(&port);
    char ps[16];
    snprintf(ps, sizeof(ps), "%u", port);
    /* addr.lua looks up wrk.host/wrk.port: point its wrk table at the listener */
    char code[128];
    snprintf(code, sizeof(code), "(function() wrk.port = '%s' return 1 end)()", ps);
    assert_string_equal(eval(main, code), "1");

    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(1), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(sq_script_set_addr(w, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(sq_script_setup(main, w), 0);
    struct sockaddr_storage got;
    socklen_t glen;
    assert_true(sq_script_addr(w, &got, &glen));
    assert_int_equal(glen, sizeof(struct sockaddr_in));
    assert_int_equal(ntohs(((struct sockaddr_in *)&got)->sin_port), port); /* setup() chose it */
    init(w);
    snprintf(code, sizeof(code), "127.0.0.1:%u", port);
    assert_string_equal(eval(w, "wrk.thread.addr"), code);
    contains(eval(w, "(function() wrk.thread.addr = 'x' end)()"),
             "thread.addr must be an address from wrk.lookup, not a string");
    contains(eval(w, "(function() wrk.thread.name = 1 end)()"), "cannot set thread.name");
    close(fd);
    sq_script_free(w);
    sq_script_free(main);
}

/* ---- thread objects: setup across states, get/set, stop ---- */

static void test_setup_fixture_across_threads(void **state)
{
    (void)state;
    enum { N = 3 };
    struct sq_script *main = load("setup.lua"), *w[N];
    for (int i = 0; i < N; i++) {
        w[i] = load("setup.lua");
        assert_int_equal(sq_script_setup(main, w[i]), 0);
        init(w[i]);
        unsigned h = sq_script_hooks(w[i]);
        assert_int_equal(h, SQ_SCRIPT_SETUP | SQ_SCRIPT_INIT | SQ_SCRIPT_REQUEST |
                                SQ_SCRIPT_RESPONSE | SQ_SCRIPT_DONE);
        char want[8];
        snprintf(want, sizeof(want), "%d", i + 1);
        assert_string_equal(eval(w[i], "id"), want);
    }
    /* thread i makes i + 1 requests and gets i + 1 responses */
    for (int i = 0; i < N; i++) {
        for (int k = 0; k <= i; k++) {
            uint32_t n;
            const char *r = next_request(w[i], &n);
            assert_int_equal(n, 1);
            assert_string_equal(r, "GET /items?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
                                   "Accept: */*\r\n\r\n");
            assert_int_equal(sq_script_response(w[i], 200, NULL, 0, NULL, 0), 0);
        }
    }
    assert_int_equal(sq_script_done(main, NULL, NULL, NULL), 0);
    /* done() read them through thread:get; check the same from here */
    assert_string_equal(eval(main, "(function() local t = {} "
                                   "function setup(th) t[#t + 1] = th end return 1 end)()"),
                        "1");
    for (int i = 0; i < N; i++)
        assert_int_equal(sq_script_setup(main, w[i]), 0); /* again: same slot, no growth */
    assert_int_equal(main->nthreads, N);
    for (int i = 0; i < N; i++)
        sq_script_free(w[i]);
    sq_script_free(main);
}

static void test_thread_get_set_values(void **state)
{
    (void)state;
    struct sq_script *main = load_str("function setup(t) T = t end");
    struct sq_script *w = load_str("x = { a = 1, b = { 'deep', true }, [3] = 'three' }\n"
                                   "f = print\n");
    assert_int_equal(sq_script_setup(main, w), 0);
    /* set: strings, numbers, booleans, nested tables; copied, not shared */
    assert_string_equal(eval(main, "(function() local v = { n = 2.5, s = 'str', t = { 1, { k = "
                                   "false } } } T:set('v', v) v.n = 9 return 1 end)()"),
                        "1");
    assert_string_equal(eval(w, "v.n .. v.s .. v.t[1] .. tostring(v.t[2].k)"), "2.5str1false");
    assert_string_equal(eval(main, "(function() T:set('v', nil) return 1 end)()"), "1");
    assert_string_equal(eval(w, "v"), "nil");
    /* get */
    assert_string_equal(eval(main, "T:get('x').a .. T:get('x').b[1] .. T:get('x')[3]"),
                        "1deepthree");
    assert_string_equal(eval(main, "T:get('nothing')"), "nil");
    /* what cannot be transferred */
    contains(eval(main, "T:get('f')"), "thread:get('f'): cannot transfer a function");
    contains(eval(main, "T:set('g', function() end)"), "cannot transfer a function");
    contains(eval(main, "T:set('g', { T })"), "cannot transfer a userdata");
    contains(eval(main, "(function() local c = {} c.c = c T:set('g', c) end)()"),
             "nested more than 32 deep");
    contains(eval(main, "T:get(1)"), "thread:get: the name is a number, not a string");
    /* wrk.thread in the worker reaches its own globals too */
    assert_string_equal(eval(w, "(function() wrk.thread:set('y', 'me') return y end)()"), "me");
    assert_string_equal(eval(w, "wrk.thread:get('y')"), "me");
    /* a thread object outliving its state */
    sq_script_free(w);
    contains(eval(main, "T:get('x')"), "thread is gone");
    sq_script_free(main);
}

static void test_thread_stop(void **state)
{
    (void)state;
    /* from setup() on the main state */
    struct sq_script *main = load_str("function setup(t) if t:get('quit') then t:stop() end end");
    struct sq_script *a = load_str("quit = true"), *b = load_str("");
    assert_int_equal(sq_script_setup(main, a), 0);
    assert_int_equal(sq_script_setup(main, b), 0);
    assert_true(sq_script_stopped(a));
    assert_false(sq_script_stopped(b));
    sq_script_free(a);
    sq_script_free(b);
    sq_script_free(main);

    /* stop.lua: the thread stops itself at its 100th response */
    struct sq_script *s = load("stop.lua");
    init(s);
    assert_int_equal(sq_script_hooks(s), SQ_SCRIPT_RESPONSE);
    for (int i = 1; i <= 120; i++) {
        assert_int_equal(sq_script_response(s, 200, NULL, 0, "x", 1), 0);
        if (i < 100)
            assert_false(sq_script_stopped(s));
        else
            assert_true(sq_script_stopped(s));
    }
    sq_script_free(s);
}

/* As the engine will run it: setup on the main state, then each worker state driven by its own
 * thread at the same time, then done() on the main state reading every thread's globals. */
struct worker_arg {
    struct sq_script *s;
    int n;
    int failed;
};

static void *worker_main(void *p)
{
    struct worker_arg *a = p;
    for (int i = 0; i < a->n; i++) {
        const char *req;
        size_t len;
        uint32_t n;
        if (sq_script_request(a->s, &req, &len, &n) != 0 || n != 1 ||
            sq_script_response(a->s, 200, NULL, 0, "ok", 2) != 0)
            a->failed++;
    }
    return NULL;
}

static void test_workers_in_threads(void **state)
{
    (void)state;
    enum { N = 4, CALLS = 5000 };
    struct sq_script *main = load("setup.lua");
    struct sq_script *w[N];
    struct worker_arg args[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        w[i] = load("setup.lua");
        assert_int_equal(sq_script_setup(main, w[i]), 0);
        init(w[i]);
        args[i] = (struct worker_arg){w[i], CALLS * (i + 1), 0};
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &args[i]), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(args[i].failed, 0);
    }
    assert_int_equal(sq_script_done(main, NULL, NULL, NULL), 0); /* prints via thread:get */
    for (int i = 0; i < N; i++) {
        char want[32];
        snprintf(want, sizeof(want), "%d", CALLS * (i + 1));
        assert_string_equal(eval(w[i], "requests"), want);
        assert_string_equal(eval(w[i], "responses"), want);
        sq_script_free(w[i]);
    }
    sq_script_free(main);
}

/* ---- the fixtures as the engine drives them ---- */

static void test_counter_fixture(void **state)
{
    (void)state;
    struct sq_script *s = load("counter.lua");
    init(s);
    assert_int_equal(sq_script_hooks(s), SQ_SCRIPT_REQUEST);
    for (int i = 0; i < 50; i++) {
        uint32_t n;
        const char *r = next_request(s, &n);
        char want[256];
        snprintf(want, sizeof(want), "GET /%d HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n", i);
        assert_int_equal(strncmp(r, want, strlen(want)), 0);
        snprintf(want, sizeof(want), "X-Counter: %d\r\n", i);
        contains(r, want);
        contains(r, "Accept: */*\r\n");
        assert_int_equal(n, 1);
    }
    sq_script_free(s);
}

static void test_pipeline_fixture(void **state)
{
    (void)state;
    struct sq_script *s = load("pipeline.lua");
    init(s);
    const char *p1, *p2;
    size_t l1, l2;
    uint32_t n1, n2;
    assert_int_equal(sq_script_request(s, &p1, &l1, &n1), 0);
    assert_int_equal(n1, 3);
    const char *second = strstr(p1 + 1, "GET /?bar HTTP/1.1\r\n");
    assert_non_null(second);
    assert_non_null(strstr(second, "GET /?baz HTTP/1.1\r\n"));
    assert_int_equal(strncmp(p1, "GET /?foo HTTP/1.1\r\n", 20), 0);
    /* the same string again: counted once, the same bytes */
    assert_int_equal(sq_script_request(s, &p2, &l2, &n2), 0);
    assert_ptr_equal(p1, p2);
    assert_int_equal(n2, 3);
    sq_script_free(s);
}

static void test_post_fixture_static_path(void **state)
{
    (void)state;
    struct sq_script *s = load("post.lua");
    init(s);
    assert_int_equal(sq_script_hooks(s), 0); /* nothing per request: the static path */
    const char *req;
    size_t len;
    uint32_t n;
    sq_script_static_request(s, &req, &len, &n);
    assert_int_equal(n, 1);
    assert_int_equal(strncmp(req, "POST /items?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n", 48), 0);
    contains(req, "Content-Type: application/x-www-form-urlencoded\r\n");
    contains(req, "Content-Length: 16\r\n\r\nfoo=bar&baz=quux");
    assert_int_equal(len, strlen(req));
    /* wrk.request() returns the same bytes */
    assert_string_equal(eval(s, "wrk.request()"), req);
    sq_script_free(s);

    /* a script with only init/done renders exactly what no script renders */
    struct sq_script *plain = load_str("");
    struct sq_script *id = load_str("function init(a) end function done(s, l, r) end");
    init(plain);
    init(id);
    assert_int_equal(sq_script_hooks(id), SQ_SCRIPT_INIT | SQ_SCRIPT_DONE);
    const char *r1, *r2;
    size_t n1, n2;
    sq_script_static_request(plain, &r1, &n1, &n);
    sq_script_static_request(id, &r2, &n2, &n);
    assert_int_equal(n1, n2);
    assert_memory_equal(r1, r2, n1);
    sq_script_free(plain);
    sq_script_free(id);
}

static void test_auth_fixture(void **state)
{
    (void)state;
    struct sq_script *s = load("auth.lua");
    init(s);
    assert_int_equal(sq_script_hooks(s), SQ_SCRIPT_REQUEST | SQ_SCRIPT_RESPONSE);
    const char *r = next_request(s, NULL);
    contains(r, "GET /authenticate HTTP/1.1\r\n");
    assert_null(strstr(r, "X-Token"));
    /* a failed login changes nothing */
    assert_int_equal(sq_script_response(s, 401, NULL, 0, NULL, 0), 0);
    contains(next_request(s, NULL), "GET /authenticate HTTP/1.1\r\n");
    struct sq_resp_header h[] = {{"Content-Type", 12, "text/plain", 10},
                                 {"X-Token", 7, "tok-123", 7}};
    assert_int_equal(sq_script_response(s, 200, h, 2, "ok", 2), 0);
    r = next_request(s, NULL);
    contains(r, "GET /resource HTTP/1.1\r\n");
    contains(r, "X-Token: tok-123\r\n");
    /* later answers do not replace the token */
    struct sq_resp_header h2[] = {{"X-Token", 7, "other", 5}};
    assert_int_equal(sq_script_response(s, 200, h2, 1, NULL, 0), 0);
    contains(next_request(s, NULL), "X-Token: tok-123\r\n");
    sq_script_free(s);
}

static void test_response_arguments(void **state)
{
    (void)state;
    struct sq_script *s = load_str("function response(st, h, b) S = st H = h B = b end");
    init(s);
    struct sq_resp_header h[] = {{"A", 1, "1", 1}, {"B", 1, "2", 1}, {"A", 1, "3", 1}};
    assert_int_equal(sq_script_response(s, 503, h, 3, "body\0bytes", 10), 0);
    assert_string_equal(eval(s, "S"), "503");
    assert_string_equal(eval(s, "type(S)"), "number");
    assert_string_equal(eval(s, "H.A .. H.B"), "32"); /* the last of a repeated name */
    assert_string_equal(eval(s, "#B"), "10");
    assert_int_equal(sq_script_response(s, 204, NULL, 0, NULL, 0), 0);
    assert_string_equal(eval(s, "B == '' and next(H) == nil"), "true");
    sq_script_free(s);

    s = load_str("function response(st) if st == 500 then error('bad status ' .. st) end end");
    init(s);
    assert_int_equal(sq_script_response(s, 500, NULL, 0, NULL, 0), -SQ_ESCRIPT);
    contains(sq_script_error(s), "response(): t.lua:1: bad status 500");
    contains(sq_script_error(s), "stack traceback:");
    assert_int_equal(sq_script_response(s, 200, NULL, 0, NULL, 0), 0);
    sq_script_free(s);
}

static void test_delay_fixture(void **state)
{
    (void)state;
    struct sq_script *s = load("delay.lua");
    init(s);
    assert_int_equal(sq_script_hooks(s), SQ_SCRIPT_DELAY);
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < 400; i++) {
        int64_t ns;
        assert_int_equal(sq_script_delay(s, &ns), 0);
        assert_true(ns >= 10 * 1000000LL && ns <= 50 * 1000000LL);
        assert_int_equal(ns % 1000000LL, 0);
        lo = ns < lo ? ns : lo;
        hi = ns > hi ? ns : hi;
    }
    assert_true(lo <= 12 * 1000000LL && hi >= 48 * 1000000LL); /* it does vary */
    sq_script_free(s);

    s = load_str("v = nil function delay() return v end");
    init(s);
    int64_t ns = 7;
    assert_int_equal(sq_script_delay(s, &ns), 0);
    assert_int_equal(ns, 0);
    eval(s, "(function() v = 1.5 end)()");
    assert_int_equal(sq_script_delay(s, &ns), 0);
    assert_int_equal(ns, 1500000);
    eval(s, "(function() v = -3 end)()");
    assert_int_equal(sq_script_delay(s, &ns), 0);
    assert_int_equal(ns, 0);
    eval(s, "(function() v = '20' end)()"); /* a string that reads as a number, as in wrk */
    assert_int_equal(sq_script_delay(s, &ns), 0);
    assert_int_equal(ns, 20000000);
    eval(s, "(function() v = 0/0 end)()");
    assert_int_equal(sq_script_delay(s, &ns), -SQ_ESCRIPT);
    contains(sq_script_error(s), "returned NaN");
    eval(s, "(function() v = {} end)()");
    assert_int_equal(sq_script_delay(s, &ns), -SQ_ESCRIPT);
    contains(sq_script_error(s), "delay() (defined at t.lua:1): returned a table, not a number");
    sq_script_free(s);
}

static void test_request_bad_returns(void **state)
{
    (void)state;
    struct sq_script *s = load_str("r = nil function request() return r end");
    init(s);
    const char *p;
    size_t len;
    uint32_t n;
    assert_int_equal(sq_script_request(s, &p, &len, &n), -SQ_ESCRIPT);
    contains(sq_script_error(s), "request() (defined at t.lua:1): returned a nil, not a string");
    eval(s, "(function() r = 'hello' end)()");
    assert_int_equal(sq_script_request(s, &p, &len, &n), -SQ_ESCRIPT);
    contains(sq_script_error(s), "returned bytes that are not complete HTTP requests");
    eval(s, "(function() r = 'GET / HTTP/1.1\\r\\nHost: x\\r\\n' end)()");
    assert_int_equal(sq_script_request(s, &p, &len, &n), -SQ_ESCRIPT);
    contains(sq_script_error(s), "incomplete head");
    eval(s, "(function() r = 'POST / HTTP/1.1\\r\\nContent-Length: 5\\r\\n\\r\\nab' end)()");
    assert_int_equal(sq_script_request(s, &p, &len, &n), -SQ_ESCRIPT);
    contains(sq_script_error(s), "incomplete body");
    /* when request() is removed at run time, wrk.request (the static request) is used */
    eval(s, "(function() request = nil end)()");
    assert_int_equal(sq_script_request(s, &p, &len, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(strncmp(p, "GET /items?x=1 HTTP/1.1\r\n", 25), 0);
    sq_script_free(s);
}

/* ---- request counting ---- */

static void test_count_requests(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        uint32_t n;
    } ok[] = {
        {"GET / HTTP/1.1\r\n\r\n", 1},
        {"GET / HTTP/1.0\n\n", 1},
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n", 2},
        {"POST /p HTTP/1.1\r\ncontent-length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n", 2},
        {"POST /p HTTP/1.1\r\nContent-Length:  0 \r\n\r\n", 1},
        {"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 1},
        {"POST /c HTTP/1.1\r\ntransfer-encoding: gzip, Chunked\r\n\r\n"
         "a;ext=1\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nGET / HTTP/1.1\r\n\r\n",
         2},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(ok); i++) {
        const char *why = NULL;
        size_t at = 0;
        size_t len = strlen(ok[i].in);
        uint32_t n = sq_script_count_requests(ok[i].in, len, &why, &at);
        if (n != ok[i].n)
            fail_msg("case %zu: %u requests (%s at %zu)", i, n, why ? why : "-", at);
        /* every strict prefix is either short of a request (0) or ends on a boundary */
        for (size_t cut = 0; cut < len; cut++) {
            char *copy = malloc(cut ? cut : 1); /* exact size: ASan catches an over-read */
            memcpy(copy, ok[i].in, cut);
            uint32_t m = sq_script_count_requests(copy, cut, &why, &at);
            assert_true(m < ok[i].n);
            if (m == 0)
                assert_true(at <= cut);
            free(copy);
        }
    }
    static const char *const bad[] = {
        "",
        "hello",
        "hello\r\n\r\n",
        "GET /\r\n\r\n",
        "GET / HTTP/2\r\n\r\n",
        " / HTTP/1.1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX0\r\n\r\n",
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(bad); i++) {
        const char *why = NULL;
        size_t at = 99999;
        if (sq_script_count_requests(bad[i], strlen(bad[i]), &why, &at) != 0)
            fail_msg("bad case %zu counted", i);
        assert_non_null(why);
        assert_true(at <= strlen(bad[i]));
    }
}

/* ---- done() over real histograms ---- */

static void test_done_with_histograms(void **state)
{
    (void)state;
    struct sq_hist *lat, *rps;
    assert_int_equal(sq_hist_new(1, INT64_C(3600000000), 3, &lat), 0);
    assert_int_equal(sq_hist_new(1, INT64_C(10000000), 3, &rps), 0);
    for (int64_t v = 100; v <= 1000; v++)
        sq_hist_record(lat, v);
    sq_hist_record_n(lat, 5000, 10);
    sq_hist_record(rps, 2500);
    sq_hist_record(rps, 2600);

    struct sq_script *s = load_str(
        "function done(s, lat, req)\n"
        "  D = s.duration R = s.requests B = s.bytes\n"
        "  E = s.errors.connect .. ',' .. s.errors.read .. ',' .. s.errors.write .. ',' ..\n"
        "      s.errors.status .. ',' .. s.errors.timeout\n"
        "  P50 = lat:percentile(50) P99 = lat:percentile(99) P100 = lat:percentile(100)\n"
        "  MIN = lat.min MAX = lat.max MEAN = lat.mean SD = lat.stdev N = #lat\n"
        "  V1, C1 = lat(1) VL, CL = lat(#lat) VX, CX = lat(#lat + 1) I1 = lat[1] IX = lat[#lat + "
        "1]\n"
        "  local sum = 0 for i = 1, #lat do local v, c = lat(i) sum = sum + c end SUM = sum\n"
        "  RMIN = req.min RMAX = req.max RN = #req\n"
        "  KEEP = lat\n"
        "end\n");
    assert_int_equal(sq_script_hooks(s), SQ_SCRIPT_DONE);
    struct sq_script_summary sum = {
        .duration_us = 10000000, .requests = 911, .bytes = 123456, .errors = {1, 2, 3, 4, 5}};
    if (sq_script_done(s, &sum, lat, rps) != 0)
        fail_msg("%s", sq_script_error(s));
    assert_string_equal(eval(s, "D .. ' ' .. R .. ' ' .. B"), "10000000 911 123456");
    assert_string_equal(eval(s, "E"), "1,2,3,4,5");
    char want[128];
    assert_string_equal(eval(s, "P50"), "555"); /* 100..1000, then 10 x 5000: rank 456 */
    snprintf(want, sizeof(want), "%lld %lld", (long long)sq_hist_percentile(lat, 99),
             (long long)sq_hist_percentile(lat, 100));
    assert_string_equal(eval(s, "P99 .. ' ' .. P100"), want);
    int64_t top = sq_hist_max(lat); /* 5000's bucket is 4 wide: its highest value */
    assert_true(top >= 5000 && top <= 5003);
    snprintf(want, sizeof(want), "100 %lld", (long long)top);
    assert_string_equal(eval(s, "MIN .. ' ' .. MAX"), want);
    snprintf(want, sizeof(want), "math.abs(MEAN - %.9f) < 1e-6", sq_hist_mean(lat));
    assert_string_equal(eval(s, want), "true");
    double n = (double)sq_hist_total(lat);
    snprintf(want, sizeof(want), "math.abs(SD - %.9f) < 1e-6",
             sq_hist_stddev(lat) * __builtin_sqrt(n / (n - 1)));
    assert_string_equal(eval(s, want), "true");
    assert_string_equal(eval(s, "N"), "902"); /* 901 values below 2048 are exact, plus 5000 */
    snprintf(want, sizeof(want), "100 1 %lld 10", (long long)top);
    assert_string_equal(eval(s, "V1 .. ' ' .. C1 .. ' ' .. VL .. ' ' .. CL"), want);
    assert_string_equal(eval(s, "VX .. ' ' .. CX .. ' ' .. I1 .. ' ' .. tostring(IX)"),
                        "0 0 100 nil");
    assert_string_equal(eval(s, "SUM"), "911");
    assert_string_equal(eval(s, "RMIN .. ' ' .. RMAX .. ' ' .. RN"), "2500 2601 2");
    /* a kept object refuses to read after done() returned */
    contains(eval(s, "KEEP.min"), "can be read only during done()");
    contains(eval(s, "KEEP:percentile(50)"), "can be read only during done()");

    /* report.lua runs on the same data; empty (NULL) histograms answer zeros */
    struct sq_script *r = load("report.lua");
    assert_int_equal(sq_script_done(r, &sum, lat, rps), 0);
    assert_int_equal(sq_script_done(r, &sum, NULL, NULL), 0);
    sq_script_free(r);

    /* an error in done() */
    struct sq_script *e = load_str("function done(s, l, r)\n local p = l:percentile('x')\n"
                                   " return p\nend");
    assert_int_equal(sq_script_done(e, &sum, lat, rps), -SQ_ESCRIPT);
    contains(sq_script_error(e), "done(): t.lua:2: percentile: p is a string, not a number");
    sq_script_free(e);
    sq_script_free(s);
    sq_hist_free(lat);
    sq_hist_free(rps);
}

/* ---- plan hooks with a fake VU ---- */

struct fake_vu {
    const char *names[4];
    char vals[4][128];
    bool set[4];
    int sets;
};

static int find_var(struct fake_vu *v, const char *name, size_t len)
{
    for (int i = 0; i < 4 && v->names[i]; i++)
        if (strlen(v->names[i]) == len && memcmp(v->names[i], name, len) == 0)
            return i;
    return -1;
}

static bool vu_get(void *vu, const char *name, size_t len, struct sq_str *out)
{
    struct fake_vu *v = vu;
    int i = find_var(v, name, len);
    if (i < 0 || !v->set[i])
        return false;
    out->p = v->vals[i];
    out->len = strlen(v->vals[i]);
    return true;
}

static int vu_set(void *vu, const char *name, size_t len, const char *val, size_t vlen)
{
    struct fake_vu *v = vu;
    int i = find_var(v, name, len);
    if (i < 0)
        return -ENOENT;
    v->sets++;
    if (!val) {
        v->set[i] = false;
        return 0;
    }
    if (vlen >= sizeof(v->vals[i]))
        return -ENOMEM;
    memcpy(v->vals[i], val, vlen);
    v->vals[i][vlen] = '\0';
    v->set[i] = true;
    return 0;
}

/* The engine's check of ctx.url, faked: a path is taken, anything else is another origin. */
static int vu_url(void *vu, const char *url, size_t len, const char **why)
{
    (void)vu;
    if (len && url[0] == '/')
        return 0;
    *why = "another origin than the target's";
    return -1;
}

/* ctx:metric, faked: "orders" is the plan's one metric; its samples are added up here. */
static double metric_sum;
static int metric_n;
static int vu_metric(void *vu, const char *name, size_t len, double x)
{
    (void)vu;
    if (len != 6 || memcmp(name, "orders", 6))
        return -ENOENT;
    metric_sum += x;
    metric_n++;
    return 0;
}

static const struct sq_script_vars vars = {vu_get, vu_set, vu_url, vu_metric};

/* ctx:metric hands each sample to the engine; a name it does not know, a value that is not a
 * number or a boolean, and a step without metrics raise naming the reason. */
static void test_plan_hooks_metric(void **state)
{
    (void)state;
    struct sq_script *s = load_str("function ok(c) c:metric('orders', 2.5); c:metric('orders');\n"
                                   "  c:metric('orders', false); c:metric('orders', true) end\n"
                                   "function unknown(c) c:metric('ordrs', 1) end\n"
                                   "function str(c) c:metric('orders', 'a') end\n"
                                   "function inf(c) c:metric('orders', math.huge) end\n");
    struct fake_vu vu = {.names = {"user"}};
    struct sq_script_step st = {.name = "s", .vu = 1};
    struct sq_script_step_result res;
    int h;
    metric_sum = 0;
    metric_n = 0;
    assert_int_equal(sq_script_hook_find(s, "ok", &h), 0);
    assert_int_equal(sq_script_hook_call(s, h, SQ_SCRIPT_AFTER, &st, &vars, &vu, &res), 0);
    assert_int_equal(metric_n, 4);
    assert_true(metric_sum == 4.5);
    static const struct {
        const char *fn, *msg;
    } bad[] = {{"unknown", "ctx:metric: no metric 'ordrs' under the plan's metrics:"},
               {"str", "ctx:metric('orders'): the value is a string, not a number or a boolean"},
               {"inf", "ctx:metric('orders'): the value is not a finite number"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(sq_script_hook_find(s, bad[i].fn, &h), 0);
        assert_true(sq_script_hook_call(s, h, SQ_SCRIPT_AFTER, &st, &vars, &vu, &res) < 0);
        contains(sq_script_error(s), bad[i].msg);
    }
    static const struct sq_script_vars none = {vu_get, vu_set, vu_url, NULL};
    assert_int_equal(sq_script_hook_find(s, "ok", &h), 0);
    assert_true(sq_script_hook_call(s, h, SQ_SCRIPT_AFTER, &st, &none, &vu, &res) < 0);
    contains(sq_script_error(s), "this step takes no metrics");
    assert_int_equal(metric_n, 4);
    sq_script_free(s);
}

/* A before hook changes the request's method, URL and headers; what it may not send is refused
 * with a Lua error naming the reason (the run stops with it), and nothing of it is kept. */
static void test_plan_hooks_request(void **state)
{
    (void)state;
    struct sq_script *s = load_str(
        "function all(c)\n"
        "  c.method = 'PATCH'; c.url = '/x?y=1'\n"
        "  c:set_header('X-A', 'one'); c:set_header('X-B', 2); c:set_header('x-a', 'three')\n"
        "  assert(c.method == 'PATCH' and c.url == '/x?y=1')\n"
        "end\n"
        "function none(c) assert(c.method == nil and c.url == nil) end\n"
        "function bad_method(c) c.method = 'GE T' end\n"
        "function crlf_method(c) c.method = 'GET\\r\\nX: y' end\n"
        "function crlf_value(c) c:set_header('X-A', 'v\\r\\nX-Injected: 1') end\n"
        "function nul_value(c) c:set_header('X-A', 'v\\0w') end\n"
        "function lf_name(c) c:set_header('X-A\\nB', 'v') end\n"
        "function host(c) c:set_header('HOST', 'evil.example') end\n"
        "function te(c) c:set_header('Transfer-Encoding', 'chunked') end\n"
        "function offsite(c) c.url = 'http://evil.example/' end\n"
        "function space_url(c) c.url = '/a b' end\n"
        "function after_method(c) c.method = 'PUT' end\n"
        "function after_header(c) c:set_header('X-A', 'v') end\n"
        "function table_url(c) c.url = {} end\n");
    struct fake_vu vu = {.names = {"user"}};
    struct sq_script_step st = {.name = "s", .vu = 1};
    struct sq_script_step_result res;
    int h;
    assert_int_equal(sq_script_hook_find(s, "all", &h), 0);
    assert_int_equal(sq_script_hook_call(s, h, SQ_SCRIPT_BEFORE, &st, &vars, &vu, &res), 0);
    assert_int_equal(res.method_len, 5);
    assert_memory_equal(res.method, "PATCH", 5);
    assert_true(res.has_url);
    const char *want = "X-B: 2\r\nx-a: three\r\n";
    assert_int_equal(res.headers_len, strlen(want));
    assert_memory_equal(res.headers, want, res.headers_len);
    /* the next call starts from nothing */
    assert_int_equal(sq_script_hook_find(s, "none", &h), 0);
    assert_int_equal(sq_script_hook_call(s, h, SQ_SCRIPT_BEFORE, &st, &vars, &vu, &res), 0);
    assert_null(res.method);
    assert_null(res.headers);
    assert_false(res.has_url);

    static const struct {
        const char *fn;
        enum sq_script_when when;
        const char *msg;
    } bad[] = {
        {"bad_method", SQ_SCRIPT_BEFORE, "ctx.method: 'GE T' is not an HTTP method"},
        {"crlf_method", SQ_SCRIPT_BEFORE, "is not an HTTP method"},
        {"crlf_value", SQ_SCRIPT_BEFORE,
         "ctx:set_header('X-A'): the value has a control character (byte 13 at offset 1)"},
        {"nul_value", SQ_SCRIPT_BEFORE, "the value has a control character (byte 0 at offset 1)"},
        {"lf_name", SQ_SCRIPT_BEFORE, "is not a header name"},
        {"host", SQ_SCRIPT_BEFORE, "HOST is set by squall, not by a hook"},
        {"te", SQ_SCRIPT_BEFORE, "Transfer-Encoding is set by squall"},
        {"offsite", SQ_SCRIPT_BEFORE,
         "ctx.url: 'http://evil.example/': another origin than the target's"},
        {"space_url", SQ_SCRIPT_BEFORE, "ctx.url: '/a b' has a space or a control character"},
        {"after_method", SQ_SCRIPT_AFTER, "ctx.method can only be set in a before hook"},
        {"after_header", SQ_SCRIPT_AFTER, "ctx:set_header() is only allowed in a before hook"},
        {"table_url", SQ_SCRIPT_BEFORE, "ctx.url must be a string, not a table"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(sq_script_hook_find(s, bad[i].fn, &h), 0);
        assert_int_equal(sq_script_hook_call(s, h, bad[i].when, &st, &vars, &vu, &res),
                         -SQ_ESCRIPT);
        contains(sq_script_error(s), bad[i].msg);
        assert_null(res.method);
        assert_null(res.headers);
        assert_false(res.has_url);
    }
    /* without the engine's URL check, ctx.url cannot be set */
    static const struct sq_script_vars no_url = {vu_get, vu_set, NULL, NULL};
    assert_int_equal(sq_script_hook_find(s, "all", &h), 0);
    assert_int_equal(sq_script_hook_call(s, h, SQ_SCRIPT_BEFORE, &st, &no_url, &vu, &res),
                     -SQ_ESCRIPT);
    contains(sq_script_error(s), "this step cannot change its URL");
    sq_script_free(s);
}

static void test_plan_hooks(void **state)
{
    (void)state;
    struct sq_script *s;
    char err[512];
    if (sq_script_new(fixture("hooks.lua"), NULL, &s, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    int before, after, skip, nope = -1;
    assert_int_equal(sq_script_hook_find(s, "login_before", &before), 0);
    assert_int_equal(sq_script_hook_find(s, "login_after", &after), 0);
    assert_int_equal(sq_script_hook_find(s, "skip_if_token", &skip), 0);
    assert_int_equal(sq_script_hook_find(s, "no_such_fn", &nope), -ENOENT);
    contains(sq_script_error(s), "hook 'no_such_fn' is not a function");
    assert_int_equal(nope, -1);

    struct fake_vu vu = {.names = {"user", "token"}};
    struct sq_script_step st = {.name = "login", .vu = 7, .iteration = 3};
    struct sq_script_step_result res;

    /* skip_if_token: no token yet, so the step runs */
    assert_int_equal(sq_script_hook_call(s, skip, SQ_SCRIPT_BEFORE, &st, &vars, &vu, &res), 0);
    assert_false(res.skip);
    assert_false(res.has_body);

    /* before: sets a variable and computes the body */
    assert_int_equal(sq_script_hook_call(s, before, SQ_SCRIPT_BEFORE, &st, &vars, &vu, &res), 0);
    assert_string_equal(vu.vals[0], "user7");
    assert_true(res.has_body);
    assert_false(res.skip);
    assert_int_equal(res.body_len, strlen("{\"user\":\"user7\",\"iteration\":3}"));
    assert_memory_equal(res.body, "{\"user\":\"user7\",\"iteration\":3}", res.body_len);

    /* after: a failed login extracts nothing */
    st.status = 500;
    assert_int_equal(sq_script_hook_call(s, after, SQ_SCRIPT_AFTER, &st, &vars, &vu, &res), 0);
    assert_false(vu.set[1]);
    /* after: the token from the JSON body, then from a header (which wins) */
    st.status = 200;
    st.body = "{\"ok\":true,\"token\":\"abc.def\"}";
    st.body_len = strlen(st.body);
    assert_int_equal(sq_script_hook_call(s, after, SQ_SCRIPT_AFTER, &st, &vars, &vu, &res), 0);
    assert_string_equal(vu.vals[1], "abc.def");
    struct sq_resp_header h[] = {{"X-Token", 7, "from-header", 11}};
    st.headers = h;
    st.nheaders = 1;
    assert_int_equal(sq_script_hook_call(s, after, SQ_SCRIPT_AFTER, &st, &vars, &vu, &res), 0);
    assert_string_equal(vu.vals[1], "from-header");

    /* now skip_if_token skips */
    assert_int_equal(sq_script_hook_call(s, skip, SQ_SCRIPT_BEFORE, &st, &vars, &vu, &res), 0);
    assert_true(res.skip);
    sq_script_free(s);

    /* errors: unknown variable, before-only operations after, a kept ctx */
    s = load_str("function bad_var(c) c:set('nope', 1) end\n"
                 "function skip_after(c) c:skip() end\n"
                 "function body_after(c) c.body = 'x' end\n"
                 "function keep(c) K = c end\n"
                 "function bad_type(c) c:set('user', {}) end\n"
                 "function unset(c) c:set('user', nil) end\n"
                 "function request() return K.step end\n");
    int h1, h2, h3, h4, h5, h6;
    assert_int_equal(sq_script_hook_find(s, "bad_var", &h1), 0);
    assert_int_equal(sq_script_hook_find(s, "skip_after", &h2), 0);
    assert_int_equal(sq_script_hook_find(s, "body_after", &h3), 0);
    assert_int_equal(sq_script_hook_find(s, "keep", &h4), 0);
    assert_int_equal(sq_script_hook_find(s, "bad_type", &h5), 0);
    assert_int_equal(sq_script_hook_find(s, "unset", &h6), 0);
    assert_int_equal(sq_script_hook_call(s, h1, SQ_SCRIPT_BEFORE, &st, &vars, &vu, &res),
                     -SQ_ESCRIPT);
    contains(sq_script_error(s), "before hook of step 'login': t.lua:1: ctx:set: no variable "
                                 "'nope' in this scenario");
    contains(sq_script_error(s), "stack traceback:");
    assert_int_equal(sq_script_hook_call(s, h2, SQ_SCRIPT_AFTER, &st, &vars, &vu, &res),
                     -SQ_ESCRIPT);
    contains(sq_script_error(s), "ctx:skip() is only allowed in a before hook");
    assert_int_equal(sq_script_hook_call(s, h3, SQ_SCRIPT_AFTER, &st, &vars, &vu, &res),
                     -SQ_ESCRIPT);
    contains(sq_script_error(s), "ctx.body can only be set in a before hook");
    assert_int_equal(sq_script_hook_call(s, h5, SQ_SCRIPT_BEFORE, &st, &vars, &vu, &res),
                     -SQ_ESCRIPT);
    contains(sq_script_error(s), "the value is a table, not a string, a number or nil");
    assert_true(vu.set[0]);
    assert_int_equal(sq_script_hook_call(s, h6, SQ_SCRIPT_BEFORE, &st, &vars, &vu, &res), 0);
    assert_false(vu.set[0]);
    assert_int_equal(sq_script_hook_call(s, h4, SQ_SCRIPT_BEFORE, &st, &vars, &vu, &res), 0);
    init(s);
    const char *p;
    size_t len;
    uint32_t n;
    assert_int_equal(sq_script_request(s, &p, &len, &n), -SQ_ESCRIPT);
    contains(sq_script_error(s), "ctx used after its hook returned");
    sq_script_free(s);
}

/* The steady state of every per-request hook allocates nothing from C. */
static void test_hot_path_allocates_nothing(void **state)
{
    (void)state;
#ifdef NO_ALLOC_COUNT
    skip();
#else
    struct sq_script *counter = load("counter.lua"), *pipe = load("pipeline.lua");
    struct sq_script *resp = load("auth.lua"), *delay = load("delay.lua");
    init(counter);
    init(pipe);
    init(resp);
    init(delay);
    static char body[1024];
    struct sq_resp_header h[] = {{"Content-Type", 12, "text/plain", 10}, {"X-Token", 7, "t", 1}};
    for (int round = 0; round < 2; round++) {
        counting = round == 1; /* round 0 warms up: buffers reach their working size */
        for (int i = 0; i < 3000; i++) {
            const char *p;
            size_t len;
            uint32_t n;
            int64_t ns;
            assert_int_equal(sq_script_request(counter, &p, &len, &n), 0);
            assert_int_equal(sq_script_request(pipe, &p, &len, &n), 0);
            assert_int_equal(sq_script_request(resp, &p, &len, &n), 0);
            assert_int_equal(sq_script_response(resp, 200, h, 2, body, sizeof(body)), 0);
            assert_int_equal(sq_script_delay(delay, &ns), 0);
        }
        counting = false;
    }
    assert_int_equal(allocs, 0);
    sq_script_free(counter);
    sq_script_free(pipe);
    sq_script_free(resp);
    sq_script_free(delay);
#endif
}

/* Every fixture loads and reports the hooks it defines. */
static void test_fixture_hooks(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        unsigned hooks;
    } fx[] = {
        {"auth.lua", SQ_SCRIPT_REQUEST | SQ_SCRIPT_RESPONSE},
        {"counter.lua", SQ_SCRIPT_REQUEST},
        {"delay.lua", SQ_SCRIPT_DELAY},
        {"pipeline.lua", SQ_SCRIPT_INIT | SQ_SCRIPT_REQUEST},
        {"post.lua", 0},
        {"report.lua", SQ_SCRIPT_DONE},
        {"setup.lua", SQ_SCRIPT_SETUP | SQ_SCRIPT_INIT | SQ_SCRIPT_REQUEST | SQ_SCRIPT_RESPONSE |
                          SQ_SCRIPT_DONE},
        {"stop.lua", SQ_SCRIPT_RESPONSE},
        {"addr.lua", SQ_SCRIPT_SETUP | SQ_SCRIPT_INIT},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(fx); i++) {
        struct sq_script *s = load(fx[i].file);
        if (sq_script_hooks(s) != fx[i].hooks)
            fail_msg("%s: hooks %#x, want %#x", fx[i].file, sq_script_hooks(s), fx[i].hooks);
        sq_script_free(s);
    }
    sq_script_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syntax_error_names_file_and_line),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_top_level_runtime_error_has_traceback),
        cmocka_unit_test(test_request_runtime_error_has_traceback),
        cmocka_unit_test(test_format_bad_args),
        cmocka_unit_test(test_wrk_table),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_format_matches_wrk_lua),
        cmocka_unit_test(test_host_header_forms),
        cmocka_unit_test(test_init_args),
        cmocka_unit_test(test_lookup_connect),
        cmocka_unit_test(test_thread_addr),
        cmocka_unit_test(test_setup_fixture_across_threads),
        cmocka_unit_test(test_thread_get_set_values),
        cmocka_unit_test(test_thread_stop),
        cmocka_unit_test(test_workers_in_threads),
        cmocka_unit_test(test_counter_fixture),
        cmocka_unit_test(test_pipeline_fixture),
        cmocka_unit_test(test_post_fixture_static_path),
        cmocka_unit_test(test_auth_fixture),
        cmocka_unit_test(test_response_arguments),
        cmocka_unit_test(test_delay_fixture),
        cmocka_unit_test(test_request_bad_returns),
        cmocka_unit_test(test_count_requests),
        cmocka_unit_test(test_done_with_histograms),
        cmocka_unit_test(test_plan_hooks),
        cmocka_unit_test(test_plan_hooks_request),
        cmocka_unit_test(test_plan_hooks_metric),
        cmocka_unit_test(test_hot_path_allocates_nothing),
        cmocka_unit_test(test_fixture_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
