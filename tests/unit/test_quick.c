/* tests/unit/test_quick.c - face/quick: the quick face's options from arguments and from JSON.
 *
 * The JSON form is what the daemon takes ({"quick": {...}}); it must prepare exactly the run the
 * equivalent arguments prepare (same executor, request bytes, timeouts, threads, addresses, TLS),
 * refuse a bad value with the very message the CLI prints for it, and refuse what only a
 * terminal run can do (files, -q). A real run against `squall target` then checks that the two
 * give the same result document (output/json.h) for the same result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "face/flags.h"
#include "face/quick.h"
#include "face/report.h"
#include "output/json.h"
#include "plan/tmpl.h"

#include "target_proc.h"

#define U "http://127.0.0.1:1/x"

/* Parses args (NULL-terminated, without the program name) into o. */
static int parse_args(struct sq_quick_opts *o, const char *const *args, char *err, size_t len)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"squall";
    while (*args)
        argv[argc++] = (char *)*args++;
    argv[argc] = NULL;
    sq_quick_opts_init(o);
    return sq_quick_parse_argv(o, argc, argv, err, len);
}

static int parse_json(struct sq_quick_opts *o, const char *text, char *err, size_t len)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v)
        fail_msg("bad test JSON %s: %s", text, je.text);
    sq_quick_opts_init(o);
    int rc = sq_quick_from_json(o, v, err, len);
    json_decref(v);
    return rc;
}

/* The two runs are the same run. */
static void assert_same_run(const struct sq_quick_run *a, const struct sq_quick_run *b)
{
    assert_memory_equal(&a->cfg.exec, &b->cfg.exec, sizeof(a->cfg.exec));
    assert_int_equal(a->req_len, b->req_len);
    assert_memory_equal(a->req, b->req, a->req_len);
    assert_int_equal(a->body_len, b->body_len);
    assert_int_equal(a->cfg.head_request, b->cfg.head_request);
    assert_int_equal(a->cfg.threads, b->cfg.threads);
    assert_int_equal(a->cfg.timeout_ns, b->cfg.timeout_ns);
    assert_int_equal(a->cfg.connect_timeout_ns, b->cfg.connect_timeout_ns);
    assert_int_equal(a->cfg.phases, b->cfg.phases);
    assert_int_equal(a->cfg.streams, b->cfg.streams);
    assert_int_equal(a->cfg.h2_request != NULL, b->cfg.h2_request != NULL);
    assert_int_equal(a->cfg.naddrs, b->cfg.naddrs);
    assert_memory_equal(a->cfg.addrs, b->cfg.addrs,
                        sizeof(a->cfg.addrs[0]) * (size_t)a->cfg.naddrs);
    assert_int_equal(a->cfg.dns_ttl_ns, b->cfg.dns_ttl_ns);
    assert_int_equal(a->cfg.resolve != NULL, b->cfg.resolve != NULL);
    assert_int_equal(a->cfg.tls != NULL, b->cfg.tls != NULL);
    assert_int_equal(a->accept_encoding != NULL, b->accept_encoding != NULL);
    if (a->accept_encoding)
        assert_string_equal(a->accept_encoding, b->accept_encoding);
    assert_int_equal(a->conns, b->conns);
    assert_string_equal(a->net.addr, b->net.addr);
    assert_string_equal(sq_quick_protocol(a), sq_quick_protocol(b));
    assert_string_equal(a->opts->url, b->opts->url);
    assert_string_equal(a->opts->method, b->opts->method);
}

static const struct {
    const char *json;
    const char *args[24];
} same[] = {
    /* the issue's example */
    {"{\"url\": \"" U "\", \"connections\": 64, \"duration\": \"10s\", \"header\": [\"A: b\"], "
     "\"http2\": true, \"rate\": 500}",
     {"--connections", "64", "-d", "10s", "-H", "A: b", "--http2", "-r", "500", U, NULL}},
    /* numbers as strings and strings as numbers, a body, every closed-loop knob */
    {"{\"url\": \"" U "\", \"connections\": \"8\", \"requests\": 100, \"duration\": 5, "
     "\"method\": \"POST\", \"body\": \"{\\\"a\\\":1}\", \"no-compression\": true, "
     "\"no-phases\": true, \"threads\": 2, \"timeout\": \"2s\", \"connect-timeout\": 1.5}",
     {"-c",
      "8",
      "-n",
      "100",
      "-d",
      "5",
      "-m",
      "POST",
      "-b",
      "{\"a\":1}",
      "--no-compression",
      "--no-phases",
      "-t",
      "2",
      "--timeout",
      "2s",
      "--connect-timeout",
      "1.5",
      U,
      NULL}},
    /* a ramp of arrivals, with its in-flight cap and graceful stop */
    {"{\"stages\": \"2s:10,3s:0\", \"rate\": 0, \"max-in-flight\": 100, \"connections\": 4, "
     "\"graceful-stop\": \"1s\", \"url\": \"" U "\"}",
     {"--stages", "2s:10,3s:0", "-r", "0", "--max-in-flight", "100", "-c", "4", "--graceful-stop",
      "1s", U, NULL}},
    /* an open loop whose pool may grow, paced without polling */
    {"{\"rate\": 500, \"connections\": 4, \"max-vus\": 40, \"pacing-precision\": \"off\", "
     "\"url\": \"" U "\"}",
     {"-r", "500", "-c", "4", "--max-vus", "40", "--pacing-precision", "off", U, NULL}},
    /* a VU ramp, paced; false and null are "not given" */
    {"{\"url\": \"" U "\", \"stages\": \"1s:3\", \"pacing\": \"100ms\", \"http2\": false, "
     "\"rate\": null, \"header\": \"Accept-Encoding: gzip\"}",
     {"--stages", "1s:3", "--pacing", "100ms", "-H", "Accept-Encoding: gzip", U, NULL}},
    /* the terminal's keys, not asked for */
    {"{\"url\": \"" U "\", \"json\": null, \"quiet\": false, \"out\": null}", {U, NULL}},
    /* DNS overrides (one value or a list), HTTP/2 streams, HEAD */
    {"{\"url\": \"http://example.test:8080/\", \"resolve\": [\"example.test:8080:127.0.0.1\"], "
     "\"connect-to\": \"a:1:b:2\", \"dns-ttl\": \"5s\", \"http2\": true, \"streams\": 4, "
     "\"method\": \"HEAD\"}",
     {"--resolve", "example.test:8080:127.0.0.1", "--connect-to", "a:1:b:2", "--dns-ttl", "5s",
      "--http2", "--streams", "4", "-m", "HEAD", "http://example.test:8080/", NULL}},
    /* TLS flags */
    {"{\"url\": \"https://127.0.0.1:1/\", \"insecure\": true, \"tls-min\": \"1.3\", "
     "\"tls-max\": 1.3}",
     {"-k", "--tls-min", "1.3", "--tls-max", "1.3", "https://127.0.0.1:1/", NULL}},
};

static void json_prepares_the_same_run(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        char err[SQ_PREP_ERRLEN] = "";
        struct sq_quick_opts oa, oj;
        struct sq_quick_run ra, rj;
        int rc = parse_args(&oa, same[i].args, err, sizeof(err));
        if (rc != 0)
            fail_msg("case %zu, args: %s", i, err);
        rc = parse_json(&oj, same[i].json, err, sizeof(err));
        if (rc != 0)
            fail_msg("case %zu, JSON: %s", i, err);
        if (sq_quick_prepare(&ra, &oa, err, sizeof(err)) != 0)
            fail_msg("case %zu, prepare args: %s", i, err);
        if (sq_quick_prepare(&rj, &oj, err, sizeof(err)) != 0)
            fail_msg("case %zu, prepare JSON: %s", i, err);
        assert_same_run(&ra, &rj);
        sq_quick_run_dispose(&ra);
        sq_quick_run_dispose(&rj);
        sq_quick_opts_dispose(&oa);
        sq_quick_opts_dispose(&oj);
    }
}

/* From JSON, "body" is the body itself: "@x" is not a file to read. */
static void json_body_is_literal(void **state)
{
    (void)state;
    char err[SQ_PREP_ERRLEN] = "";
    struct sq_quick_opts o;
    struct sq_quick_run r;
    assert_int_equal(
        parse_json(&o, "{\"url\": \"" U "\", \"body\": \"@/nonexistent\"}", err, sizeof(err)), 0);
    assert_int_equal(sq_quick_prepare(&r, &o, err, sizeof(err)), 0);
    assert_int_equal(r.body_len, strlen("@/nonexistent"));
    assert_memory_equal(r.body, "@/nonexistent", r.body_len);
    assert_non_null(strstr(r.req, "\r\n\r\n@/nonexistent"));
    sq_quick_run_dispose(&r);
    sq_quick_opts_dispose(&o);
}

/* A number as the body (or a WebSocket message) is its text, kept past the parse (it was read from
 * freed stack under ASan: fuzz_quick_json found it); a key given twice keeps the last value
 * (jansson's rule). */
static void json_body_number(void **state)
{
    (void)state;
    char err[SQ_PREP_ERRLEN] = "";
    struct sq_quick_opts o;
    struct sq_quick_run r;
    /* the number after the body reused the body's text buffer */
    assert_int_equal(parse_json(&o,
                                "{\"url\": \"" U "\", \"method\": \"POST\", \"body\": \"x\", "
                                "\"body\": 2.5, \"connections\": 7}",
                                err, sizeof(err)),
                     0);
    assert_int_equal(sq_quick_prepare(&r, &o, err, sizeof(err)), 0);
    assert_int_equal(r.body_len, 3);
    assert_memory_equal(r.body, "2.5", 3);
    sq_quick_run_dispose(&r);
    sq_quick_opts_dispose(&o);
    /* the same for a WebSocket message */
    assert_int_equal(parse_json(&o,
                                "{\"url\": \"ws://127.0.0.1:9/ws\", \"message\": 42, "
                                "\"connections\": 7}",
                                err, sizeof(err)),
                     0);
    assert_string_equal(o.message_arg, "42");
    assert_true(o.message_literal);
    sq_quick_opts_dispose(&o);
}

/* What the JSON form refuses before anything is parsed or prepared: exact messages. */
static const struct {
    const char *json, *msg;
} refused[] = {
    /* values the CLI refuses, with the CLI's message naming the flag */
    {"{\"url\": \"" U "\", \"connections\": 0}",
     "--connections: '0' is not a connection count (1..1000000)"},
    {"{\"url\": \"" U "\", \"connections\": \"abc\"}",
     "--connections: 'abc' is not a connection count (1..1000000)"},
    {"{\"url\": \"" U "\", \"connections\": 64.5}",
     "--connections: '64.5' is not a connection count (1..1000000)"},
    {"{\"url\": \"" U "\", \"duration\": \"10parsecs\"}",
     "--duration: '10parsecs' is not a duration (e.g. 500ms, 10s, 2m)"},
    {"{\"url\": \"" U "\", \"duration\": \"\"}",
     "--duration: '' is not a duration (e.g. 500ms, 10s, 2m)"},
    {"{\"url\": \"" U "\", \"rate\": 1e9}",
     "--rate: '1000000000' is not a rate (requests per second, 0..100000000)"},
    {"{\"url\": \"" U "\", \"rate\": -1}",
     "--rate: '-1' is not a rate (requests per second, 0..100000000)"},
    {"{\"url\": \"" U "\", \"rate\": 0}",
     "-r: '0': the rate must be positive (with --stages it may start at 0)"},
    {"{\"url\": \"" U "\", \"requests\": 5, \"rate\": 10}", "-n cannot be combined with -r"},
    {"{\"url\": \"" U "\", \"stages\": \"1s:1\", \"duration\": \"1s\"}",
     "--stages sets the run's length; drop -d"},
    {"{\"url\": \"" U "\", \"threads\": 2000}",
     "--threads: '2000' is not a thread count (1..1024)"},
    {"{\"url\": \"" U "\", \"method\": \"GE T\"}",
     "--method: 'GE T' is not a method (a token like GET or POST: letters, digits and "
     "!#$%&'*+-.^_`|~)"},
    {"{\"url\": \"" U "\", \"header\": [\"A: b\", \"no colon\"]}",
     "--header: 'no colon' is not a header: expected 'Name: value'"},
    {"{\"url\": \"" U "\", \"header\": \"X: a\\r\\nY: b\"}",
     "--header: 'X: a\r\nY: b' is not a header: CR and LF are not allowed (one header per -H)"},
    {"{\"url\": \"" U "\", \"streams\": 2}", "--streams applies to --http2 and --http3"},
    {"{\"url\": \"" U "\", \"max-in-flight\": 5}", "--max-in-flight applies to the open loop (-r)"},
    {"{\"url\": \"" U "\", \"http2\": true, \"connections\": 600000, \"streams\": 2}",
     "-c x --streams: at most 1000000 VUs"},
    {"{\"url\": \"" U "\", \"resolve\": [\"nope\"]}",
     "--resolve: 'nope' is not HOST:PORT:ADDR[,ADDR...]"},
    {"{\"url\": \"" U "\", \"dns-ttl\": 0}",
     "--dns-ttl: '0' is not a duration (e.g. 500ms, 10s, 2m)"},
    {"{\"url\": \"" U "\", \"tls-min\": \"1.3\", \"tls-max\": \"1.2\"}",
     "--tls-min 1.3 is above --tls-max 1.2"},
    {"{\"url\": \"" U "\", \"key\": \"k.pem\"}", "--key needs --cert"},
    {"{\"connections\": 4}", "no URL given"},
    /* unknown keys, named, with the nearest one; short flags and prefixes are not keys */
    {"{\"url\": \"" U "\", \"conections\": 5}",
     "unknown key 'conections' (did you mean 'connections'?)"},
    {"{\"url\": \"" U "\", \"frobnicate\": 1}", "unknown key 'frobnicate'"},
    {"{\"url\": \"" U "\", \"c\": 5}", "unknown key 'c'"},
    {"{\"url\": \"" U "\", \"dur\": \"1s\"}", "unknown key 'dur'"},
    {"{\"url\": \"" U "\", \"help\": true}", "unknown key 'help'"},
    {"{\"url\": \"" U "\", \"version\": true}", "unknown key 'version'"},
    /* what only a terminal run does */
    {"{\"url\": \"" U "\", \"json\": \"r.json\"}",
     "key 'json' is refused: a run started from JSON writes no files"},
    {"{\"url\": \"" U "\", \"html\": \"r.html\"}",
     "key 'html' is refused: a run started from JSON writes no files"},
    {"{\"url\": \"" U "\", \"out\": \"csv=s.csv\"}",
     "key 'out' is refused: a run started from JSON writes no files"},
    {"{\"url\": \"" U "\", \"sample\": 0.5}",
     "key 'sample' is refused: a run started from JSON writes no files"},
    {"{\"url\": \"" U "\", \"quiet\": true}",
     "key 'quiet' is refused: a run started from JSON prints nothing"},
    /* types */
    {"[1]", "the quick options must be a JSON object, not a list"},
    {"{\"url\": 5}", "url: expected a string, not a number"},
    {"{\"url\": \"" U "\", \"http2\": \"yes\"}", "--http2: expected true or false, not a string"},
    {"{\"url\": \"" U "\", \"insecure\": 1}", "--insecure: expected true or false, not a number"},
    {"{\"url\": \"" U "\", \"connections\": true}",
     "--connections: expected a string or a number, not true"},
    {"{\"url\": \"" U "\", \"header\": {\"A\": \"b\"}}",
     "--header: expected a string or a number, not an object"},
    {"{\"url\": \"" U "\", \"header\": [[\"A: b\"]]}",
     "--header: expected a string or a number, not a list"},
    {"{\"url\": \"" U "\", \"duration\": [\"1s\"]}",
     "--duration: expected a string or a number, not a list (only header, resolve and connect-to "
     "take several)"},
    {"{\"url\": \"" U "\", \"header\": \"A: b\\u0000c\"}",
     "--header: a value cannot contain a NUL byte"},
    {"{\"url\": \"http://a\\u0000b/\"}", "url: a value cannot contain a NUL byte"},
};

static void json_refusals_name_the_key(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char err[SQ_PREP_ERRLEN] = "";
        struct sq_quick_opts o;
        int rc = parse_json(&o, refused[i].json, err, sizeof(err));
        if (rc != -SQ_EUSAGE || strcmp(err, refused[i].msg) != 0)
            fail_msg("case %zu %s: rc %d, got \"%s\", want \"%s\"", i, refused[i].json, rc, err,
                     refused[i].msg);
        sq_quick_opts_dispose(&o);
    }
}

/* Refused when the run is prepared (files, the URL, the executor): the CLI's messages too. */
static const struct {
    const char *json, *msg;
    int rc;
} refused_later[] = {
    {"{\"url\": \"ftp://127.0.0.1/\"}",
     "bad URL 'ftp://127.0.0.1/': unsupported URL scheme \"ftp\" (use http://, https://, ws://, "
     "wss://, nats://, tls:// (NATS over TLS), mqtt://, mqtts://, mqtt+ws:// or mqtt+wss:// "
     "(MQTT over WebSocket))",
     -SQ_EUSAGE},
    {"{\"url\": \"127.0.0.1:8080\"}",
     "bad URL '127.0.0.1:8080': no scheme (did you mean http://127.0.0.1:8080?)", -SQ_EUSAGE},
    {"{\"url\": \"" U "\", \"stages\": \"x\"}",
     "--stages: 'x': expected DURATION:TARGET[,DURATION:TARGET...] e.g. 10s:100,30s:100",
     -SQ_EUSAGE},
    {"{\"url\": \"" U "\", \"stages\": \"0s:5\"}", "--stages: '0s:5': the stages add up to no time",
     -SQ_EUSAGE},
    {"{\"url\": \"https://127.0.0.1:1/\", \"cacert\": \"/nonexistent/ca.pem\"}",
     "--cacert: '/nonexistent/ca.pem': No such file or directory", -SQ_EUSAGE},
    {"{\"url\": \"http://nonexistent.invalid:1/\", \"resolve\": [\"other.invalid:1:127.0.0.1\"], "
     "\"connect-to\": [\"nonexistent.invalid:1:also.invalid:1\"]}",
     NULL, -SQ_ERESOLVE},
};

static void prepare_refusals(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(refused_later) / sizeof(refused_later[0]); i++) {
        char err[SQ_PREP_ERRLEN] = "";
        struct sq_quick_opts o;
        struct sq_quick_run r;
        if (parse_json(&o, refused_later[i].json, err, sizeof(err)) != 0)
            fail_msg("case %zu: %s", i, err);
        int rc = sq_quick_prepare(&r, &o, err, sizeof(err));
        assert_int_equal(rc, refused_later[i].rc);
        if (refused_later[i].msg)
            assert_string_equal(err, refused_later[i].msg);
        else
            assert_memory_equal(err, "dns: ", 5);
        sq_quick_run_dispose(&r);
        sq_quick_opts_dispose(&o);
    }
}

/* Every value refused through a flag gets the same words through its key. */
static void same_message_both_ways(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"connections", "0"},
        {"duration", "x"},
        {"requests", "many"},
        {"rate", "abc"},
        {"max-in-flight", "0"},
        {"pacing", "x"},
        {"graceful-stop", "-1s"},
        {"threads", "0"},
        {"method", ""},
        {"header", ": v"},
        {"body", "@"},
        {"timeout", "0"},
        {"connect-timeout", "soon"},
        {"streams", "0"},
        {"resolve", "h:0:127.0.0.1"},
        {"connect-to", "x"},
        {"dns-ttl", "0"},
        {"tls-min", "1.1"},
        {"tls-max", "x"},
        {"seed", "x"},
        {"seed", "-1"},
        {"seed", "1k"},
        {"seed", "9007199254740992"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char flag[64], ea[SQ_PREP_ERRLEN] = "", ej[SQ_PREP_ERRLEN] = "", js[256];
        snprintf(flag, sizeof(flag), "--%s=%s", bad[i][0], bad[i][1]);
        const char *args[] = {flag, U, NULL};
        struct sq_quick_opts oa, oj;
        int ra = parse_args(&oa, args, ea, sizeof(ea));
        snprintf(js, sizeof(js), "{\"url\": \"" U "\", \"%s\": \"%s\"}", bad[i][0], bad[i][1]);
        int rj = parse_json(&oj, js, ej, sizeof(ej));
        if (strcmp(bad[i][0], "body") == 0) {
            /* "@" is a file to read only on the command line; from JSON it is the body */
            assert_int_equal(rj, 0);
            assert_string_equal(ea, "--body: '@' names no file (-b @FILE)");
        } else {
            assert_int_equal(ra, -SQ_EUSAGE);
            assert_int_equal(rj, -SQ_EUSAGE);
            assert_string_equal(ea, ej);
            assert_memory_equal(ea, flag, strlen(bad[i][0]) + 2); /* names the flag */
        }
        sq_quick_opts_dispose(&oa);
        sq_quick_opts_dispose(&oj);
    }
}

/* --seed N (and the JSON key seed, as a number or a string) is the run's seed; without it the
 * prepared run has one drawn from the OS, a different one each time. */
static void seed_flag(void **state)
{
    (void)state;
    char err[SQ_PREP_ERRLEN];
    struct sq_quick_opts o, j;
    struct sq_quick_run r, s;
    const char *args[] = {"--seed", "9007199254740991", U, NULL};
    assert_int_equal(parse_args(&o, args, err, sizeof(err)), 0);
    assert_true(o.seed_set && o.seed == 9007199254740991ull);
    assert_int_equal(sq_quick_prepare(&r, &o, err, sizeof(err)), 0);
    assert_true(r.cfg.seed_set && r.cfg.seed == 9007199254740991ull);
    sq_quick_run_dispose(&r);
    assert_int_equal(parse_json(&j, "{\"url\": \"" U "\", \"seed\": 0}", err, sizeof(err)), 0);
    assert_true(j.seed_set && j.seed == 0);
    sq_quick_opts_dispose(&j);
    sq_quick_opts_dispose(&o);
    const char *none[] = {U, NULL};
    assert_int_equal(parse_args(&o, none, err, sizeof(err)), 0);
    assert_false(o.seed_set);
    assert_int_equal(sq_quick_prepare(&r, &o, err, sizeof(err)), 0);
    assert_int_equal(sq_quick_prepare(&s, &o, err, sizeof(err)), 0);
    assert_true(r.cfg.seed_set && s.cfg.seed_set);
    assert_true(r.cfg.seed <= SQ_SEED_MAX && s.cfg.seed <= SQ_SEED_MAX);
    assert_true(r.cfg.seed != s.cfg.seed); /* 53 bits from getrandom: equal once in 2^53 */
    sq_quick_run_dispose(&r);
    sq_quick_run_dispose(&s);
    sq_quick_opts_dispose(&o);
    assert_int_equal(
        parse_args(&o, (const char *const[]){"--seed", "0x10", U, NULL}, err, sizeof(err)),
        -SQ_EUSAGE);
    assert_string_equal(err, "--seed: '0x10' is not a seed (0..9007199254740991)");
    sq_quick_opts_dispose(&o);
}

/* The parser can run again and again in one process (the daemon's), whatever the last one left
 * in getopt_long's state; --help and --version are reported, not printed. */
static void argv_parses_again(void **state)
{
    (void)state;
    char err[SQ_PREP_ERRLEN];
    struct sq_quick_opts o;
    const char *cluster[] = {"-qZ", U, NULL};
    assert_int_equal(parse_args(&o, cluster, err, sizeof(err)), -SQ_EUSAGE);
    assert_string_equal(err, "unknown flag '-Z'");
    sq_quick_opts_dispose(&o);
    const char *amb[] = {U, "--co", "5", NULL};
    assert_int_equal(parse_args(&o, amb, err, sizeof(err)), -SQ_EUSAGE);
    assert_string_equal(err, "'--co' is ambiguous: --connections, --connect-timeout, --connect-to, "
                             "--connect-rate, --control");
    sq_quick_opts_dispose(&o);
    const char *good[] = {"-qc", "3", U, NULL};
    assert_int_equal(parse_args(&o, good, err, sizeof(err)), 0);
    assert_int_equal(o.connections, 3);
    assert_true(o.quiet);
    assert_string_equal(o.url, U);
    sq_quick_opts_dispose(&o);
    const char *help[] = {U, "-h", NULL}, *version[] = {"--version", NULL};
    assert_int_equal(parse_args(&o, help, err, sizeof(err)), SQ_QUICK_HELP);
    sq_quick_opts_dispose(&o);
    assert_int_equal(parse_args(&o, version, err, sizeof(err)), SQ_QUICK_VERSION);
    sq_quick_opts_dispose(&o);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(parse_json(&o, "{\"url\": \"" U "\", \"requests\": 7}", err, sizeof(err)),
                         0);
        assert_int_equal(o.requests, 7);
        sq_quick_opts_dispose(&o);
    }
}

/* ---- a real run: the same document from either form ---- */

static void same_document(void **state)
{
    (void)state;
    char url[64], json[256], err[SQ_PREP_ERRLEN] = "";
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/fast", (unsigned)target_port);
    snprintf(json, sizeof(json),
             "{\"url\": \"%s\", \"connections\": 2, \"requests\": 40, \"threads\": 1, "
             "\"header\": [\"X-A: 1\"], \"method\": \"GET\"}",
             url);
    const char *args[] = {"-c", "2", "-n", "40", "-t", "1", "-H", "X-A: 1", url, NULL};
    struct sq_quick_opts oa, oj;
    struct sq_quick_run ra, rj;
    assert_int_equal(parse_args(&oa, args, err, sizeof(err)), 0);
    assert_int_equal(parse_json(&oj, json, err, sizeof(err)), 0);
    assert_int_equal(sq_quick_prepare(&ra, &oa, err, sizeof(err)), 0);
    assert_int_equal(sq_quick_prepare(&rj, &oj, err, sizeof(err)), 0);

    /* the run the JSON prepared, for real */
    struct sq_result res = {0};
    const char *why = NULL;
    assert_int_equal(sq_run(&rj.cfg, &res, &why), 0);
    assert_int_equal(res.c.completed, 40);
    assert_int_equal(res.c.status[2], 40);

    json_t *da = sq_quick_doc(&ra, &res), *dj = sq_quick_doc(&rj, &res);
    assert_non_null(da);
    assert_non_null(dj);
    assert_true(json_equal(da, dj));
    const json_t *cfg = json_object_get(dj, "config");
    assert_string_equal(json_string_value(json_object_get(cfg, "url")), url);
    assert_string_equal(json_string_value(json_object_get(cfg, "address")), rj.net.addr);
    assert_int_equal(json_integer_value(json_object_get(cfg, "requests")), 40);
    assert_string_equal(json_string_value(json_object_get(cfg, "protocol")), "http/1.1");
    json_decref(da);
    json_decref(dj);
    sq_result_dispose(&res);
    sq_quick_run_dispose(&ra);
    sq_quick_run_dispose(&rj);
    sq_quick_opts_dispose(&oa);
    sq_quick_opts_dispose(&oj);
}

/* -b is a template: with no dynamic part the static request, with one a head whose
 * Content-Length digit the worker replaces per request; where a rendered body cannot go, a
 * refusal naming the flag. */
static void body_template(void **state)
{
    (void)state;
    char err[SQ_PREP_ERRLEN] = "";
    struct sq_quick_opts o;
    struct sq_quick_run r;
    const char *stat[] = {U, "-m", "POST", "-b", "{\"a\":1}", NULL};
    assert_int_equal(parse_args(&o, stat, err, sizeof(err)), 0);
    assert_int_equal(sq_quick_prepare(&r, &o, err, sizeof(err)), 0);
    assert_null(r.cfg.body_tmpl); /* the static path: serialised once */
    assert_non_null(strstr(r.req, "Content-Length: 7\r\n"));
    assert_string_equal(r.req + r.req_len - 11, "\r\n\r\n{\"a\":1}");
    sq_quick_run_dispose(&r);
    sq_quick_opts_dispose(&o);

    const char *dyn[] = {U, "-m", "POST", "-b", "{\"t\":\"{{$stamp}}\",\"vu\":{{$vu}}}", NULL};
    assert_int_equal(parse_args(&o, dyn, err, sizeof(err)), 0);
    assert_int_equal(sq_quick_prepare(&r, &o, err, sizeof(err)), 0);
    assert_non_null(r.cfg.body_tmpl);
    assert_ptr_equal(r.cfg.request, r.req);
    assert_int_equal(r.cfg.request_len, strlen(r.req));
    assert_string_equal(r.req + r.req_len - 4, "\r\n\r\n"); /* the head only */
    assert_true(r.cfg.body_cl > 16 && r.cfg.body_cl < r.req_len);
    assert_memory_equal(r.req + r.cfg.body_cl - 16, "Content-Length: 1\r\n", 19);
    sq_quick_run_dispose(&r);
    sq_quick_opts_dispose(&o);

    static const struct {
        const char *args[12];
        const char *msg;
    } bad[] = {
        {{U, "-b", "{{$nosuch}}", NULL}, "-b: '{{$nosuch}}'"},
        {{U, "--http2", "-b", "{{$vu}}", NULL}, "not with --http2"},
        {{U, "-H", "Content-Length: 3", "-b", "{{$vu}}", NULL}, "-H Content-Length"},
        {{U, "--sink", "http://127.0.0.1:9", "-b", "{\"a\":1}", NULL},
         "--sink: this load stamps no event"},
        {{U, "--sink", "http://127.0.0.1:9", "-b", "{{$vu}}", NULL},
         "--sink: this load stamps no event"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse_args(&o, bad[i].args, err, sizeof(err)), 0);
        assert_int_equal(sq_quick_prepare(&r, &o, err, sizeof(err)), -SQ_EUSAGE);
        if (!strstr(err, bad[i].msg))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].msg);
        sq_quick_run_dispose(&r);
        sq_quick_opts_dispose(&o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_prepares_the_same_run),
        cmocka_unit_test(json_body_is_literal),
        cmocka_unit_test(json_body_number),
        cmocka_unit_test(body_template),
        cmocka_unit_test(json_refusals_name_the_key),
        cmocka_unit_test(prepare_refusals),
        cmocka_unit_test(same_message_both_ways),
        cmocka_unit_test(argv_parses_again),
        cmocka_unit_test(seed_flag),
        cmocka_unit_test(same_document),
    };
    return cmocka_run_group_tests(tests, start_target, stop_target);
}
