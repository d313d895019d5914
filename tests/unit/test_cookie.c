/* test_cookie.c - the per-VU cookie jar: set, replace, delete, expiry, path and domain rules,
 * Secure, caps, and no allocation once the jar has its working size. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/cookie.h"
#include "plan/cookie_internal.h"

#define NOW 1700000000

static struct sq_cookie_jar *jar(void)
{
    struct sq_cookie_jar *j;
    assert_int_equal(sq_cookie_jar_new(&j), 0);
    return j;
}

static void set_at(struct sq_cookie_jar *j, const char *host, const char *path, const char *sc,
                   int64_t now)
{
    assert_int_equal(
        sq_cookie_jar_set(j, host, strlen(host), path, strlen(path), sc, strlen(sc), now), 0);
}

static void set(struct sq_cookie_jar *j, const char *host, const char *path, const char *sc)
{
    set_at(j, host, path, sc, NOW);
}

/* The Cookie header for host/path (want "" when none applies). */
static void hdr_at(struct sq_cookie_jar *j, const char *host, const char *path, bool secure,
                   int64_t now, const char *want)
{
    struct sq_buf b = {0};
    int n = sq_cookie_jar_header(j, host, strlen(host), path, strlen(path), secure, now, &b);
    assert_true(n >= 0);
    if (b.len != strlen(want) || (b.len && memcmp(b.p, want, b.len) != 0))
        fail_msg("%s%s: got '%.*s', want '%s'", host, path, (int)b.len, b.p ? b.p : "", want);
    /* the count is the number of pairs */
    int pairs = want[0] ? 1 : 0;
    for (const char *p = want; *p; p++)
        pairs += (*p == ';');
    assert_int_equal(n, pairs);
    sq_buf_dispose(&b);
}

static void hdr(struct sq_cookie_jar *j, const char *host, const char *path, const char *want)
{
    hdr_at(j, host, path, false, NOW, want);
}

static void test_set_and_send(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    hdr(j, "example.com", "/", "");
    set(j, "example.com", "/", "a=1");
    set(j, "example.com", "/", "b=2");
    set(j, "example.com", "/", "  c  =  x y  ;  Path = /  ");
    set(j, "example.com", "/", "e=");
    set(j, "example.com", "/", "q=\"quoted\"");
    hdr(j, "example.com", "/", "a=1; b=2; c=x y; e=; q=\"quoted\"");
    hdr(j, "EXAMPLE.com", "/any/thing?x=1", "a=1; b=2; c=x y; e=; q=\"quoted\"");
    assert_int_equal(sq_cookie__count(j), 5);

    /* appends to what the buffer holds; nothing when no cookie applies */
    struct sq_buf b = {0};
    assert_int_equal(sq_buf_append(&b, "Cookie: ", 8), 0);
    assert_int_equal(sq_cookie_jar_header(j, "example.com", 11, "/", 1, false, NOW, &b), 5);
    assert_int_equal(b.len, 8 + strlen("a=1; b=2; c=x y; e=; q=\"quoted\""));
    assert_memory_equal(b.p, "Cookie: a=1; b=2", 16);
    size_t len = b.len;
    assert_int_equal(sq_cookie_jar_header(j, "other.com", 9, "/", 1, false, NOW, &b), 0);
    assert_int_equal(b.len, len);
    sq_buf_dispose(&b);

    sq_cookie_jar_clear(j);
    assert_int_equal(sq_cookie__count(j), 0);
    hdr(j, "example.com", "/", "");
    sq_cookie_jar_free(j);
    sq_cookie_jar_free(NULL);
}

static void test_malformed_ignored(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    const char *bad[] = {"", "novalue", "=x", " = x", ";a=1", "a\x01=1", "a=1\x7f", "a=1\r\nb=2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        set(j, "h", "/", bad[i]);
    assert_int_equal(sq_cookie__count(j), 0);
    /* an embedded NUL in the value is a control character too */
    assert_int_equal(sq_cookie_jar_set(j, "h", 1, "/", 1, "a=1\0x", 5, NOW), 0);
    assert_int_equal(sq_cookie__count(j), 0);
    /* the length is honoured: the rest of the string is not read */
    assert_int_equal(sq_cookie_jar_set(j, "h", 1, "/", 1, "a=1; Secure", 3, NOW), 0);
    hdr(j, "h", "/", "a=1");
    /* bad hosts: no cookie */
    set(j, "", "/", "x=1");
    char longhost[300];
    memset(longhost, 'a', sizeof(longhost) - 1);
    longhost[sizeof(longhost) - 1] = '\0';
    set(j, longhost, "/", "x=1");
    set(j, "[::1", "/", "x=1");
    assert_int_equal(sq_cookie__count(j), 1);
    hdr(j, "", "/", "");
    sq_cookie_jar_free(j);
}

static void test_replace_keeps_order(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    set(j, "h", "/", "a=1");
    set(j, "h", "/", "b=2");
    set(j, "h", "/", "a=3; Secure");
    hdr(j, "h", "/", "b=2"); /* a is now Secure */
    hdr_at(j, "h", "/", true, NOW, "a=3; b=2");
    set(j, "h", "/", "a=4");
    hdr(j, "h", "/", "a=4; b=2");
    assert_int_equal(sq_cookie__count(j), 2);
    /* a different path or domain is a different cookie */
    set(j, "h", "/", "a=5; Path=/x");
    set(j, "www.h.com", "/", "a=6");
    set(j, "www.h.com", "/", "a=7; Domain=h.com");
    assert_int_equal(sq_cookie__count(j), 5);
    hdr(j, "h", "/x", "a=5; a=4; b=2");
    hdr(j, "www.h.com", "/", "a=6; a=7");
    hdr(j, "h.com", "/", "a=7");
    sq_cookie_jar_free(j);
}

static void test_delete_and_expire(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    set(j, "h", "/", "a=1");
    set(j, "h", "/", "b=2");
    set(j, "h", "/", "c=3");
    set(j, "h", "/", "d=4");
    set(j, "h", "/", "a=gone; Max-Age=0");
    set(j, "h", "/", "b=; max-age=-5");
    set(j, "h", "/", "c=x; Expires=Thu, 01 Jan 1970 00:00:00 GMT");
    hdr(j, "h", "/", "d=4");
    assert_int_equal(sq_cookie__count(j), 1);
    /* deleting what is not there stores nothing */
    set(j, "h", "/", "z=1; Max-Age=0");
    assert_int_equal(sq_cookie__count(j), 1);
    /* a delete must match the path */
    set(j, "h", "/", "d=4; Max-Age=0; Path=/other");
    hdr(j, "h", "/", "d=4");

    /* Max-Age: alive until now + delta, gone at it */
    set_at(j, "h", "/", "m=1; Max-Age=10", 1000);
    hdr_at(j, "h", "/", false, 1009, "d=4; m=1");
    hdr_at(j, "h", "/", false, 1010, "d=4");
    assert_int_equal(sq_cookie__count(j), 1); /* evicted when seen expired */
    /* Expires in the future, then past */
    set(j, "h", "/", "e=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT");
    hdr_at(j, "h", "/", false, NOW, "d=4"); /* 2015 < NOW: never stored */
    set_at(j, "h", "/", "e=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT", 1445412479);
    hdr_at(j, "h", "/", false, 1445412479, "d=4; e=1");
    hdr_at(j, "h", "/", false, 1445412480, "d=4");
    /* Max-Age wins over Expires, whatever the order; the last valid Max-Age counts */
    set(j, "h", "/", "f=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=100");
    set(j, "h", "/", "g=1; Max-Age=100; Expires=Thu, 01 Jan 1970 00:00:00 GMT");
    set(j, "h", "/", "k=1; Max-Age=0; Max-Age=100");
    set(j, "h", "/", "l=1; Max-Age=100; Max-Age=1x; Max-Age=; Max-Age=-");
    hdr_at(j, "h", "/", false, NOW + 99, "d=4; f=1; g=1; k=1; l=1");
    hdr_at(j, "h", "/", false, NOW + 100, "d=4");
    /* a bad Expires or Max-Age is ignored: a session cookie */
    set(j, "h", "/", "s=1; Expires=tomorrow; Max-Age=soon");
    hdr_at(j, "h", "/", false, INT64_MAX - 1, "d=4; s=1");
    /* a huge Max-Age saturates */
    set(j, "h", "/", "t=1; Max-Age=99999999999999999999999999");
    hdr_at(j, "h", "/", false, INT64_MAX - 2, "d=4; s=1; t=1");
    sq_cookie_jar_free(j);
}

struct date_case {
    const char *s;
    bool ok;
    int64_t t;
};

static const struct date_case dates[] = {
    {"Sun, 06 Nov 1994 08:49:37 GMT", true, 784111777},  /* IMF-fixdate */
    {"Sunday, 06-Nov-94 08:49:37 GMT", true, 784111777}, /* RFC 850 */
    {"Sun Nov  6 08:49:37 1994", true, 784111777},       /* asctime */
    {"sun, 6 nov 1994 8:49:37", true, 784111777},        /* loose, as the algorithm allows */
    {"Wed, 21 Oct 2015 07:28:00 GMT", true, 1445412480},
    {"06 Nov 69 00:00:00", true, 3150921600},            /* 2-digit years: 0-69 -> 20xx */
    {"Thu, 29 Feb 2024 12:00:00 GMT", true, 1709208000}, /* leap day */
    {"Mon, 01 Jan 1601 00:00:00 GMT", true, -11644473600},
    {"Fri, 31 Dec 9999 23:59:59 GMT", true, 253402300799},
    {"Thu, 01 Jan 1970 00:00:00 GMT", true, 0},
    {"Wed, 29 Feb 2023 12:00:00 GMT", false, 0}, /* no such day */
    {"Sat, 31 Apr 2023 12:00:00 GMT", false, 0},
    {"Sun, 06 Nov 1600 08:49:37 GMT", false, 0}, /* before 1601 */
    {"Sun, 06 Nov 1994 24:00:00 GMT", false, 0},
    {"Sun, 06 Nov 1994 08:60:00 GMT", false, 0},
    {"Sun, 06 Nov 1994 08:49:60 GMT", false, 0},
    {"Sun, 00 Nov 1994 08:49:37 GMT", false, 0},
    {"Sun, 06 Nox 1994 08:49:37 GMT", false, 0},  /* no month */
    {"Sun, 06 Nov 08:49:37 GMT", false, 0},       /* no year */
    {"Sun, 06 Nov 1994 GMT", false, 0},           /* no time */
    {"Sun, 006 Nov 1994 08:49:37 GMT", false, 0}, /* 3 digits: not a day, nor a year */
    {"", false, 0},
    {"tomorrow", false, 0},
};

static void test_dates(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(dates) / sizeof(dates[0]); i++) {
        int64_t t = -1;
        bool ok = sq_cookie__parse_date(dates[i].s, strlen(dates[i].s), &t);
        if (ok != dates[i].ok || (ok && t != dates[i].t))
            fail_msg("'%s': ok %d t %lld", dates[i].s, ok, (long long)t);
    }
}

static void test_paths(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    /* default path: the request path up to its rightmost '/' */
    set(j, "h", "/a/b/c?x=/y/z", "d=1");
    hdr(j, "h", "/a/b", "d=1");
    hdr(j, "h", "/a/b/", "d=1");
    hdr(j, "h", "/a/b/x/y", "d=1");
    hdr(j, "h", "/a/b?q", "d=1");
    hdr(j, "h", "/a/bc", "");
    hdr(j, "h", "/a", "");
    hdr(j, "h", "/A/b", "");
    sq_cookie_jar_clear(j);
    const char *roots[] = {"/", "/x", "", "noslash", "?q=/a/b"};
    for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
        set(j, "h", roots[i], "r=1");
        assert_int_equal(sq_cookie__count(j), 1); /* all the same cookie: path "/" */
        hdr(j, "h", "/", "r=1");
    }
    sq_cookie_jar_clear(j);
    /* explicit Path */
    set(j, "h", "/", "p=1; Path=/docs");
    hdr(j, "h", "/docs", "p=1");
    hdr(j, "h", "/docs/", "p=1");
    hdr(j, "h", "/docs/web", "p=1");
    hdr(j, "h", "/docsets", "");
    hdr(j, "h", "/Docs", "");
    hdr(j, "h", "/", "");
    set(j, "h", "/", "q=1; Path=/docs/");
    hdr(j, "h", "/docs/x", "q=1; p=1");
    hdr(j, "h", "/docs", "p=1");
    /* a Path that does not start with '/' means the default path */
    set(j, "h", "/u/v", "r=1; Path=relative");
    set(j, "h", "/u/v", "s=1; Path=");
    hdr(j, "h", "/u/x", "r=1; s=1");
    /* a Path over the cap is ignored (default path instead) */
    char sc[1200] = "t=1; Path=/";
    memset(sc + strlen(sc), 'p', SQ_COOKIE_MAX_ATTR);
    sc[11 + SQ_COOKIE_MAX_ATTR] = '\0';
    set(j, "h", "/w/x", sc);
    hdr(j, "h", "/w/y", "t=1");
    sq_cookie_jar_free(j);
}

static void test_order(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    set(j, "h", "/", "root=1");
    set(j, "h", "/", "ab=1; Path=/a/b");
    set(j, "h", "/", "a=1; Path=/a");
    set(j, "h", "/", "ab2=1; Path=/a/b");
    set(j, "h", "/", "root2=1");
    hdr(j, "h", "/a/b/c", "ab=1; ab2=1; a=1; root=1; root2=1");
    /* replacing keeps the creation time, so the order */
    set(j, "h", "/", "ab=2; Path=/a/b");
    set(j, "h", "/", "root=2");
    hdr(j, "h", "/a/b/c", "ab=2; ab2=1; a=1; root=2; root2=1");
    /* deleted and set again: a new creation time */
    set(j, "h", "/", "root=; Max-Age=0");
    set(j, "h", "/", "root=3");
    hdr(j, "h", "/a", "a=1; root2=1; root=3");
    sq_cookie_jar_free(j);
}

static void test_domains(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    set(j, "www.example.com", "/", "host=1");
    set(j, "www.example.com", "/", "dom=1; Domain=example.com");
    set(j, "WWW.Example.COM", "/", "dot=1; Domain=.Example.COM");
    set(j, "www.example.com", "/", "self=1; Domain=www.example.com");
    hdr(j, "www.example.com", "/", "host=1; dom=1; dot=1; self=1");
    hdr(j, "www.example.com:8443", "/", "host=1; dom=1; dot=1; self=1"); /* ports ignored */
    hdr(j, "example.com", "/", "dom=1; dot=1");
    hdr(j, "a.b.example.com", "/", "dom=1; dot=1");
    hdr(j, "x.www.example.com", "/", "dom=1; dot=1; self=1"); /* host-only: not subdomains */
    hdr(j, "notexample.com", "/", "");
    hdr(j, "example.org", "/", "");
    hdr(j, "com", "/", "");
    /* rejected: a domain the host does not match, a single label, an empty attribute ignored */
    set(j, "www.example.com", "/", "r1=1; Domain=other.com");
    set(j, "www.example.com", "/", "r2=1; Domain=ww.example.com");
    set(j, "www.example.com", "/", "r3=1; Domain=com");
    set(j, "www.example.com", "/", "r4=1; Domain=sub.www.example.com");
    set(j, "www.example.com", "/", "ok=1; Domain=");
    set(j, "www.example.com", "/", "ok2=1; Domain=.");
    assert_int_equal(sq_cookie__count(j), 6);
    hdr(j, "other.com", "/", "");
    hdr(j, "x.www.example.com", "/", "dom=1; dot=1; self=1");
    hdr(j, "www.example.com", "/", "host=1; dom=1; dot=1; self=1; ok=1; ok2=1");
    sq_cookie_jar_clear(j);

    /* IP addresses: only exact */
    set(j, "127.0.0.1:8080", "/", "ip=1");
    set(j, "127.0.0.1", "/", "r=1; Domain=0.0.1");
    set(j, "127.0.0.1", "/", "ipd=1; Domain=127.0.0.1");
    hdr(j, "127.0.0.1:9090", "/", "ip=1; ipd=1");
    hdr(j, "1.127.0.0.1", "/", "");
    set(j, "[::1]:8080", "/", "v6=1");
    set(j, "::1", "/", "v6b=1");
    hdr(j, "[::1]", "/", "v6=1; v6b=1");
    hdr(j, "::1", "/", "v6=1; v6b=1");
    /* single-label hosts: a Domain equal to the host is fine */
    set(j, "localhost", "/", "lh=1; Domain=localhost");
    hdr(j, "localhost:3000", "/", "lh=1");
    sq_cookie_jar_free(j);
}

static void test_secure_and_ignored_attrs(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    set(j, "h", "/", "s=1; Secure");
    set(j, "h", "/", "s2=1; secure=whatever");
    set(j, "h", "/", "p=1; HttpOnly; SameSite=Strict; Priority=High; Unknown");
    hdr_at(j, "h", "/", false, NOW, "p=1");
    hdr_at(j, "h", "/", true, NOW, "s=1; s2=1; p=1");
    sq_cookie_jar_free(j);
}

static void test_caps(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    char sc[64];
    for (int i = 0; i < SQ_COOKIE_MAX; i++) {
        snprintf(sc, sizeof(sc), "c%d=%d", i, i);
        set(j, "h", "/", sc);
    }
    assert_int_equal(sq_cookie__count(j), SQ_COOKIE_MAX);
    /* replacing at the cap evicts nothing */
    set(j, "h", "/", "c0=new");
    assert_int_equal(sq_cookie__count(j), SQ_COOKIE_MAX);
    /* one more evicts the oldest (c0, replaced but still the first created) */
    set(j, "h", "/", "extra=1");
    assert_int_equal(sq_cookie__count(j), SQ_COOKIE_MAX);
    struct sq_buf b = {0};
    assert_int_equal(sq_cookie_jar_header(j, "h", 1, "/", 1, false, NOW, &b), SQ_COOKIE_MAX);
    assert_int_equal(b.len - 1 > 0, 1);
    assert_memory_equal(b.p, "c1=1; c2=2", 10);
    assert_int_equal(sq_buf_append(&b, "", 1), 0);
    assert_null(strstr(b.p, "c0="));
    assert_non_null(strstr(b.p, "; extra=1"));
    sq_buf_dispose(&b);
    /* with the jar full, an expired cookie is evicted before the oldest live one */
    set_at(j, "h", "/", "c5=short; Max-Age=1", NOW);
    set_at(j, "h", "/", "late=1", NOW + 5);
    assert_int_equal(sq_cookie__count(j), SQ_COOKIE_MAX);
    b = (struct sq_buf){0};
    assert_int_equal(sq_cookie_jar_header(j, "h", 1, "/", 1, false, NOW + 5, &b), SQ_COOKIE_MAX);
    assert_int_equal(sq_buf_append(&b, "", 1), 0);
    assert_null(strstr(b.p, "c5="));
    assert_non_null(strstr(b.p, "c1=1")); /* the oldest survived */
    sq_buf_dispose(&b);

    /* name + value: SQ_COOKIE_MAX_BYTES at most */
    sq_cookie_jar_clear(j);
    char *big = malloc(SQ_COOKIE_MAX_BYTES + 16);
    memcpy(big, "n=", 2);
    memset(big + 2, 'v', SQ_COOKIE_MAX_BYTES - 1);
    big[SQ_COOKIE_MAX_BYTES + 1] = '\0'; /* name 1 + value 4095 */
    set(j, "h", "/", big);
    assert_int_equal(sq_cookie__count(j), 1);
    big[SQ_COOKIE_MAX_BYTES + 1] = 'v';
    big[SQ_COOKIE_MAX_BYTES + 2] = '\0'; /* one more */
    big[0] = 'm';
    set(j, "h", "/", big);
    assert_int_equal(sq_cookie__count(j), 1);
    free(big);
    sq_cookie_jar_free(j);
}

/* Hostile input: many distinct cookies from many paths never grow the jar past its cap. */
static void test_hostile_bounded(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    char sc[128], path[64];
    for (int i = 0; i < 10000; i++) {
        snprintf(sc, sizeof(sc), "k%d=%d", i, i);
        snprintf(path, sizeof(path), "/p%d/x", i % 100);
        set(j, "h", path, sc);
    }
    assert_int_equal(sq_cookie__count(j), SQ_COOKIE_MAX);
    /* slot array (at most a few growths to 64) + one buffer per slot, reused afterwards */
    assert_true(sq_cookie__allocs(j) <= 1 + 4 + SQ_COOKIE_MAX + 64);
    sq_cookie_jar_free(j);
}

static void test_no_alloc_steady_state(void **state)
{
    (void)state;
    struct sq_cookie_jar *j = jar();
    set(j, "h", "/", "sid=aaaaaaaa; Path=/");
    set(j, "h", "/", "csrf=0123456789");
    set(j, "h", "/", "tmp=1; Max-Age=5");
    struct sq_buf b = {0};
    assert_int_equal(sq_cookie_jar_header(j, "h", 1, "/", 1, false, NOW, &b), 3);
    size_t allocs = sq_cookie__allocs(j);
    char sc[64];
    for (int i = 0; i < 1000; i++) {
        /* same-size and smaller values replace in place */
        snprintf(sc, sizeof(sc), "sid=%08d; Path=/", i);
        set(j, "h", "/", sc);
        set(j, "h", "/", i % 2 ? "csrf=x" : "csrf=9876543210");
        /* deleted and set again: the freed slot's buffer is reused */
        set(j, "h", "/", "tmp=; Max-Age=0");
        set(j, "h", "/", "tmp=2; Max-Age=5");
        sq_buf_reset(&b);
        assert_int_equal(sq_cookie_jar_header(j, "h", 1, "/", 1, false, NOW, &b), 3);
    }
    assert_int_equal(sq_cookie__allocs(j), allocs);
    /* clear keeps the memory */
    sq_cookie_jar_clear(j);
    set(j, "h", "/", "sid=bbbbbbbb");
    set(j, "h", "/", "csrf=0123456789");
    assert_int_equal(sq_cookie__allocs(j), allocs);
    /* a value that does not fit grows that cookie's buffer once */
    char big[200] = "sid=";
    memset(big + 4, 'z', 150);
    big[154] = '\0';
    set(j, "h", "/", big);
    assert_int_equal(sq_cookie__allocs(j), allocs + 1);
    set(j, "h", "/", big);
    assert_int_equal(sq_cookie__allocs(j), allocs + 1);
    sq_buf_dispose(&b);
    sq_cookie_jar_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_and_send),
        cmocka_unit_test(test_malformed_ignored),
        cmocka_unit_test(test_replace_keeps_order),
        cmocka_unit_test(test_delete_and_expire),
        cmocka_unit_test(test_dates),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_domains),
        cmocka_unit_test(test_secure_and_ignored_attrs),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_hostile_bounded),
        cmocka_unit_test(test_no_alloc_steady_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
