/* Unit tests: plan/tmpl (template compile errors, static fast path, built-ins, escapes, slots). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/tmpl.h"

/* A resolver for the tests: greeting (static), quote (static, needs escaping), token (VAR 1),
 * users.name (FEED 0/1), users.id (FEED 0/0), other (VAR 0). */
static void resolve(void *ud, const char *name, size_t len, struct sq_tmpl_ref *out)
{
    int *calls = ud;
    if (calls)
        (*calls)++;
#define NAME(lit) (len == sizeof(lit) - 1 && memcmp(name, lit, len) == 0)
    if (NAME("greeting")) {
        out->kind = SQ_TMPL_REF_STATIC;
        out->value = "hello world";
        out->value_len = 11;
    } else if (NAME("quote")) {
        out->kind = SQ_TMPL_REF_STATIC;
        out->value = "say \"hi\"\n";
        out->value_len = 9;
    } else if (NAME("token")) {
        out->kind = SQ_TMPL_REF_VAR;
        out->index = 1;
    } else if (NAME("other")) {
        out->kind = SQ_TMPL_REF_VAR;
        out->index = 0;
    } else if (NAME("users.name")) {
        out->kind = SQ_TMPL_REF_FEED;
        out->feeder = 0;
        out->column = 1;
    } else if (NAME("users.id")) {
        out->kind = SQ_TMPL_REF_FEED;
        out->feeder = 0;
        out->column = 0;
    } else if (NAME("$oauth.token") && ud) {
        out->kind = SQ_TMPL_REF_OAUTH; /* ud set: a token source is set up */
    } else {
        out->kind = SQ_TMPL_REF_UNKNOWN;
    }
#undef NAME
}

static struct sq_tmpl *compile(const char *src, enum sq_tmpl_escape esc)
{
    struct sq_tmpl *t = NULL;
    struct sq_tmpl_error err = {0};
    int rc = sq_tmpl_compile(src, strlen(src), esc, resolve, NULL, &t, &err);
    if (rc != 0)
        fail_msg("compile '%s': %s at %zu", src, err.msg, err.offset);
    return t;
}

/* Renders t with a fixed context into a fresh NUL-terminated string (caller frees). */
static uint64_t test_rng = 88172645463325252ull;

static char *render(const struct sq_tmpl *t)
{
    static const struct sq_str vars[] = {{"o&v", 3}, {"tok\"\\\x01", 6}};
    static const struct sq_str row0[] = {{"42", 2}, {"Ann Lee", 7}};
    static const struct sq_str *const rows[] = {row0};
    struct sq_tmpl_ctx ctx = {
        .vu = 7, .iteration = 3, .rng = &test_rng, .vars = vars, .rows = rows};
    struct sq_buf b = {0};
    assert_int_equal(sq_tmpl_render(t, &ctx, &b), 0);
    assert_int_equal(sq_buf_append(&b, "", 1), 0);
    return b.p;
}

static void expect_error(const char *src, size_t offset, const char *msg_part)
{
    struct sq_tmpl *t = (struct sq_tmpl *)0x1;
    struct sq_tmpl_error err = {0};
    int rc = sq_tmpl_compile(src, strlen(src), SQ_TMPL_ESC_NONE, resolve, NULL, &t, &err);
    if (rc != -SQ_EPARSE)
        fail_msg("'%s' compiled (rc %d), expected an error", src, rc);
    if (err.offset != offset || !strstr(err.msg, msg_part))
        fail_msg("'%s': got '%s' at %zu, expected '%s' at %zu", src, err.msg, err.offset, msg_part,
                 offset);
    assert_ptr_equal(t, (struct sq_tmpl *)0x1); /* untouched on error */
}

static void compile_errors(void **state)
{
    (void)state;
    unsetenv("SQ_TMPL_TEST_UNSET");
    expect_error("abc{{", 3, "unclosed '{{'");
    expect_error("abc{{ token", 3, "unclosed '{{'");
    expect_error("a{{token}}b{{x", 11, "unclosed '{{'");
    expect_error("x{{ }}", 1, "empty");
    expect_error("x{{}}", 1, "empty");
    expect_error("/p/{{tokn}}", 5, "unknown name 'tokn'");
    expect_error("{{  nope  }}", 4, "unknown name 'nope'");
    expect_error("{{ to ken }}", 5, "invalid character ' '");
    expect_error("{{$vuu}}", 2, "unknown built-in '$vuu' (did you mean '$vu'?)");
    expect_error("{{$timestmp}}", 2, "did you mean '$timestamp'?");
    expect_error("{{$randomInteger(1,2)}}", 2, "did you mean '$randomInt(MIN,MAX)'?");
    expect_error("{{$zzzzzzzz}}", 2, "unknown built-in '$zzzzzzzz'");
    expect_error("{{$randomInt(5,1)}}", 2, "MIN 5 is greater than MAX 1");
    expect_error("{{$randomInt(a,b)}}", 2, "expected $randomInt(MIN,MAX)");
    expect_error("{{$randomInt(1)}}", 2, "expected $randomInt(MIN,MAX)");
    expect_error("{{$randomInt(1,2)x}}", 2, "expected $randomInt(MIN,MAX)");
    expect_error("{{$randomInt(1,99999999999999999999)}}", 2, "expected $randomInt");
    expect_error("{{$randomInt}}", 2, "expected $randomInt(MIN,MAX)");
    expect_error("q={{$env.SQ_TMPL_TEST_UNSET}}", 4, "'SQ_TMPL_TEST_UNSET' is not set");
    expect_error("{{$env.1X}}", 7, "not an environment variable name");

    /* Without a resolver only built-ins are names. */
    struct sq_tmpl *t = NULL;
    struct sq_tmpl_error err = {0};
    assert_int_equal(sq_tmpl_compile("{{token}}", 9, SQ_TMPL_ESC_NONE, NULL, NULL, &t, &err),
                     -SQ_EPARSE);
    assert_int_equal(err.offset, 2);
    assert_int_equal(sq_tmpl_compile("{{$vu}}", 7, SQ_TMPL_ESC_NONE, NULL, NULL, &t, &err), 0);
    sq_tmpl_free(t);
}

static void static_fast_path(void **state)
{
    (void)state;
    static const struct {
        const char *src;
        enum sq_tmpl_escape esc;
        const char *want;
    } cases[] = {
        {"", SQ_TMPL_ESC_NONE, ""},
        {"/plain/path?a=1", SQ_TMPL_ESC_NONE, "/plain/path?a=1"},
        {"{{greeting}}", SQ_TMPL_ESC_NONE, "hello world"},
        {"<{{ greeting }}|{{greeting}}>", SQ_TMPL_ESC_NONE, "<hello world|hello world>"},
        /* a static value is escaped, the literal text around it is not */
        {"{\"m\":\"{{quote}}\"}", SQ_TMPL_ESC_JSON, "{\"m\":\"say \\\"hi\\\"\\u000A\"}"},
        {"a=b c&g={{greeting}}", SQ_TMPL_ESC_FORM, "a=b c&g=hello+world"},
        {"one } brace {, and }} closers", SQ_TMPL_ESC_NONE, "one } brace {, and }} closers"},
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(cases); i++) {
        struct sq_tmpl *t = compile(cases[i].src, cases[i].esc);
        const char *s = NULL;
        size_t len = 99;
        assert_true(sq_tmpl_static(t, &s, &len));
        assert_int_equal(len, strlen(cases[i].want));
        assert_memory_equal(s, cases[i].want, len);
        assert_false(sq_tmpl_uses_feeds(t));
        char *r = render(t); /* the render path gives the same text */
        assert_string_equal(r, cases[i].want);
        free(r);
        size_t sl;
        assert_string_equal(sq_tmpl_source(t, &sl), cases[i].src);
        assert_int_equal(sl, strlen(cases[i].src));
        sq_tmpl_free(t);
    }
    static const char *const dynamic[] = {
        "{{$vu}}",         "/a/{{token}}",   "{{users.name}}",    "x{{$iteration}}",
        "{{$randomUUID}}", "{{$timestamp}}", "{{$isoTimestamp}}", "{{$randomInt(1,2)}}"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(dynamic); i++) {
        struct sq_tmpl *t = compile(dynamic[i], SQ_TMPL_ESC_NONE);
        assert_false(sq_tmpl_static(t, NULL, NULL));
        sq_tmpl_free(t);
    }

    /* A literal template keeps "{{" as text. */
    struct sq_tmpl *t = NULL;
    assert_int_equal(sq_tmpl_new_literal("{{not a name", 12, &t), 0);
    const char *s;
    size_t len;
    assert_true(sq_tmpl_static(t, &s, &len));
    assert_int_equal(len, 12);
    assert_memory_equal(s, "{{not a name", 12);
    sq_tmpl_free(t);
    sq_tmpl_free(NULL);
}

static void builtins(void **state)
{
    (void)state;
    struct sq_tmpl *t = compile("vu={{$vu}} it={{ $iteration }}", SQ_TMPL_ESC_NONE);
    char *r = render(t);
    assert_string_equal(r, "vu=7 it=3");
    free(r);
    sq_tmpl_free(t);

    setenv("SQ_TMPL_TEST_ENV", "a b&c", 1);
    t = compile("[{{$env.SQ_TMPL_TEST_ENV}}]", SQ_TMPL_ESC_FORM);
    const char *s;
    size_t len;
    assert_true(sq_tmpl_static(t, &s, &len)); /* read once, at compile time */
    assert_string_equal(s, "[a+b%26c]");
    sq_tmpl_free(t);

    /* $randomUUID: RFC 4122 version 4 text. */
    t = compile("{{$randomUUID}}", SQ_TMPL_ESC_NONE);
    for (int k = 0; k < 200; k++) {
        r = render(t);
        assert_int_equal(strlen(r), 36);
        for (int i = 0; i < 36; i++) {
            if (i == 8 || i == 13 || i == 18 || i == 23)
                assert_int_equal(r[i], '-');
            else
                assert_non_null(strchr("0123456789abcdef", r[i]));
        }
        assert_int_equal(r[14], '4');
        assert_non_null(strchr("89ab", r[19]));
        free(r);
    }
    sq_tmpl_free(t);

    /* $randomInt: inclusive bounds, negative ranges, the whole 64-bit range. */
    t = compile("{{$randomInt(-3, 2)}}", SQ_TMPL_ESC_NONE);
    bool seen[6] = {0};
    for (int k = 0; k < 2000; k++) {
        r = render(t);
        long v = strtol(r, NULL, 10);
        assert_true(v >= -3 && v <= 2);
        seen[v + 3] = true;
        free(r);
    }
    for (int i = 0; i < 6; i++)
        assert_true(seen[i]);
    sq_tmpl_free(t);
    t = compile("{{$randomInt(5,5)}}", SQ_TMPL_ESC_NONE);
    r = render(t);
    assert_string_equal(r, "5");
    free(r);
    sq_tmpl_free(t);
    t = compile("{{$randomInt(-9223372036854775808,9223372036854775807)}}", SQ_TMPL_ESC_NONE);
    r = render(t);
    assert_true(strlen(r) > 0);
    free(r);
    sq_tmpl_free(t);

    /* $timestamp and $isoTimestamp: wall-clock ms at render time. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long before = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    t = compile("{{$timestamp}} {{$isoTimestamp}}", SQ_TMPL_ESC_NONE);
    r = render(t);
    clock_gettime(CLOCK_REALTIME, &ts);
    long long after = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    char *sp = strchr(r, ' ');
    assert_non_null(sp);
    long long ms = strtoll(r, NULL, 10);
    assert_true(ms >= before && ms <= after);
    const char *iso = sp + 1;
    assert_int_equal(strlen(iso), 24);
    struct tm tm = {0};
    const char *rest = strptime(iso, "%Y-%m-%dT%H:%M:%S", &tm);
    assert_non_null(rest);
    assert_int_equal(rest[0], '.');
    assert_int_equal(rest[4], 'Z');
    long long iso_ms = (long long)timegm(&tm) * 1000 + strtol(rest + 1, NULL, 10);
    assert_true(iso_ms >= before && iso_ms <= after);
    free(r);
    sq_tmpl_free(t);
}

static void generators_differ(void **state)
{
    (void)state;
    /* per occurrence */
    struct sq_tmpl *t = compile("{{$randomUUID}} {{$randomUUID}}", SQ_TMPL_ESC_NONE);
    char *a = render(t);
    assert_int_equal(strlen(a), 73);
    assert_memory_not_equal(a, a + 37, 36);
    /* per render */
    char *b = render(t);
    assert_string_not_equal(a, b);
    free(a);
    free(b);
    sq_tmpl_free(t);

    t = compile("{{$randomInt(0,1000000000)}},{{$randomInt(0,1000000000)}}", SQ_TMPL_ESC_NONE);
    a = render(t);
    b = render(t);
    char *comma = strchr(a, ',');
    assert_non_null(comma);
    assert_true(strtoll(a, NULL, 10) != strtoll(comma + 1, NULL, 10));
    assert_string_not_equal(a, b);
    free(a);
    free(b);
    sq_tmpl_free(t);

    /* a zero rng state is replaced rather than stuck */
    uint64_t zero = 0;
    struct sq_tmpl_ctx ctx = {.vu = 1, .rng = &zero};
    t = compile("{{$randomInt(0,1000000)}}", SQ_TMPL_ESC_NONE);
    struct sq_buf buf = {0};
    assert_int_equal(sq_tmpl_render(t, &ctx, &buf), 0);
    assert_true(zero != 0);
    sq_buf_dispose(&buf);
    sq_tmpl_free(t);
}

static void escapes(void **state)
{
    (void)state;
    /* vars[1] is: tok " \ 0x01 */
    struct sq_tmpl *t = compile("{\"t\":\"{{token}}\"}", SQ_TMPL_ESC_JSON);
    char *r = render(t);
    assert_string_equal(r, "{\"t\":\"tok\\\"\\\\\\u0001\"}");
    free(r);
    sq_tmpl_free(t);

    t = compile("n={{users.name}}&o={{other}}&i={{$isoTimestamp}}", SQ_TMPL_ESC_FORM);
    r = render(t);
    assert_memory_equal(r, "n=Ann+Lee&o=o%26v&i=", 20);
    assert_non_null(strstr(r + 20, "%3A")); /* ':' of the time is percent-encoded */
    free(r);
    sq_tmpl_free(t);

    setenv("SQ_TMPL_TEST_ENV", "-._~ /?\xc3\xa9", 1);
    t = compile("{{$env.SQ_TMPL_TEST_ENV}}", SQ_TMPL_ESC_FORM);
    r = render(t);
    assert_string_equal(r, "-._~+%2F%3F%C3%A9");
    free(r);
    sq_tmpl_free(t);

    t = compile("{{token}}", SQ_TMPL_ESC_NONE);
    r = render(t);
    assert_string_equal(r, "tok\"\\\x01");
    free(r);
    sq_tmpl_free(t);
}

static void slots(void **state)
{
    (void)state;
    int calls = 0;
    struct sq_tmpl *t = NULL;
    struct sq_tmpl_error err;
    const char *src = "/u/{{users.id}}/{{ users.name }}?t={{token}}&g={{greeting}}";
    assert_int_equal(sq_tmpl_compile(src, strlen(src), SQ_TMPL_ESC_NONE, resolve, &calls, &t, &err),
                     0);
    assert_int_equal(calls, 4);
    assert_true(sq_tmpl_uses_feeds(t));
    assert_false(sq_tmpl_static(t, NULL, NULL));
    char *r = render(t);
    assert_string_equal(r, "/u/42/Ann Lee?t=tok\"\\\x01&g=hello world");
    free(r);

    /* unset variables and missing rows render empty */
    struct sq_tmpl_ctx ctx = {.vu = 1, .rng = &test_rng};
    struct sq_buf b = {0};
    assert_int_equal(sq_tmpl_render(t, &ctx, &b), 0);
    assert_int_equal(b.len, strlen("/u//?t=&g=hello world"));
    assert_memory_equal(b.p, "/u//?t=&g=hello world", b.len);

    /* a warm buffer is reused without growing */
    static const struct sq_str vars[] = {{"a", 1}, {"b", 1}};
    static const struct sq_str row0[] = {{"1", 1}, {"n", 1}};
    static const struct sq_str *const rows[] = {row0};
    ctx.vars = vars;
    ctx.rows = rows;
    size_t cap = b.cap;
    char *p = b.p;
    for (int i = 0; i < 100; i++) {
        sq_buf_reset(&b);
        assert_int_equal(sq_tmpl_render(t, &ctx, &b), 0);
    }
    assert_int_equal(b.cap, cap);
    assert_ptr_equal(b.p, p);
    sq_buf_dispose(&b);
    sq_tmpl_free(t);

    t = compile("{{other}}", SQ_TMPL_ESC_NONE);
    assert_false(sq_tmpl_uses_feeds(t));
    sq_tmpl_free(t);
}

/* {{$oauth.token}}: compiled only where the resolver has a token source, read at each render */
static void oauth_token(void **state)
{
    (void)state;
    struct sq_tmpl *t = (struct sq_tmpl *)0x1;
    struct sq_tmpl_error err = {0};
    const char *src = "Bearer {{$oauth.token}}";
    assert_int_equal(sq_tmpl_compile(src, strlen(src), SQ_TMPL_ESC_NONE, resolve, NULL, &t, &err),
                     -SQ_EPARSE);
    assert_non_null(strstr(err.msg, "needs an OAuth2 token source"));
    assert_int_equal(err.offset, 9);
    int yes = 1;
    assert_int_equal(sq_tmpl_compile(src, strlen(src), SQ_TMPL_ESC_JSON, resolve, &yes, &t, &err),
                     0);
    const char *s;
    size_t len;
    assert_false(sq_tmpl_static(t, &s, &len)); /* never the static path */
    struct sq_tmpl_live live = {0};
    struct sq_tmpl_ctx ctx = {.oauth = &live};
    struct sq_buf b = {0};
    assert_int_equal(sq_tmpl_render(t, &ctx, &b), 0);
    assert_int_equal(b.len, 7); /* nothing yet: empty */
    struct sq_str a = {"tok\"1", 5}, c = {"tok2", 4};
    __atomic_store_n(&live.cur, &a, __ATOMIC_RELEASE);
    sq_buf_reset(&b);
    assert_int_equal(sq_tmpl_render(t, &ctx, &b), 0);
    assert_int_equal(b.len, 13);
    assert_memory_equal(b.p, "Bearer tok\\\"1", 13); /* escaped like any value */
    __atomic_store_n(&live.cur, &c, __ATOMIC_RELEASE);
    sq_buf_reset(&b);
    assert_int_equal(sq_tmpl_render(t, &ctx, &b), 0);
    assert_memory_equal(b.p, "Bearer tok2", 11);
    sq_buf_dispose(&b);
    sq_tmpl_free(t);
}

/* Renders t n times from VU vu's stream of seed into one string (caller frees). */
static char *render_stream(const struct sq_tmpl *t, uint64_t seed, uint64_t vu, int n)
{
    uint64_t rng = sq_tmpl_rng_init(seed, vu);
    struct sq_tmpl_ctx ctx = {.vu = vu, .rng = &rng};
    struct sq_buf b = {0};
    for (int i = 0; i < n; i++) {
        ctx.iteration = (uint64_t)i;
        assert_int_equal(sq_tmpl_render(t, &ctx, &b), 0);
    }
    assert_int_equal(sq_buf_append(&b, "", 1), 0);
    return b.p;
}

/* A run's seed and a VU's number make its stream: the same pair replays it, another seed or VU
 * gives unrelated values, and no pair gives xorshift's stuck state 0. */
static void seed_streams(void **state)
{
    (void)state;
    /* pinned: a seed printed by one build replays its run on the next */
    assert_true(sq_tmpl_rng_init(0, 1) == 17393240832000593394ull);
    assert_true(sq_tmpl_rng_init(42, 7) == 956014191956182556ull);
    assert_true(sq_tmpl_rng_init(SQ_SEED_MAX, SQ_TMPL_STREAM_LUA) == 2507639321139471508ull);
    /* every (seed, stream) of a neighbourhood starts somewhere else, never at 0 */
    enum { SEEDS = 256, STREAMS = 64 };
    uint64_t *v = malloc(SEEDS * STREAMS * sizeof(*v));
    assert_non_null(v);
    size_t n = 0;
    for (uint64_t s = 0; s < SEEDS; s++)
        for (uint64_t k = 1; k <= STREAMS; k++) {
            uint64_t x = sq_tmpl_rng_init(s, k);
            assert_true(x != 0);
            assert_true(x == sq_tmpl_rng_init(s, k));
            v[n++] = x;
        }
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (v[i] == v[j])
                fail_msg("streams %zu and %zu start at the same state", i, j);
    /* each bit is set in about half of them (a mix, not seed + stream) */
    for (int bit = 0; bit < 64; bit++) {
        size_t ones = 0;
        for (size_t i = 0; i < n; i++)
            ones += (v[i] >> bit) & 1;
        if (ones < n * 45 / 100 || ones > n * 55 / 100)
            fail_msg("bit %d set in %zu of %zu", bit, ones, n);
    }
    free(v);

    /* rendered: a VU's values replay with its seed and number, and only with both */
    struct sq_tmpl *t = compile("{{$randomUUID}} {{$randomInt(1,1000000000)}};", SQ_TMPL_ESC_NONE);
    char *a = render_stream(t, 12345, 3, 50);
    char *b = render_stream(t, 12345, 3, 50);
    char *other_seed = render_stream(t, 12346, 3, 50);
    char *other_vu = render_stream(t, 12345, 4, 50);
    assert_string_equal(a, b);
    assert_memory_not_equal(a, other_seed, 36);
    assert_memory_not_equal(a, other_vu, 36);
    assert_memory_equal(a + 14, "4", 1); /* version 4 */
    free(a);
    free(b);
    free(other_seed);
    free(other_vu);
    sq_tmpl_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(compile_errors), cmocka_unit_test(static_fast_path),
        cmocka_unit_test(builtins),       cmocka_unit_test(generators_differ),
        cmocka_unit_test(escapes),        cmocka_unit_test(slots),
        cmocka_unit_test(oauth_token),    cmocka_unit_test(seed_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
