/* test_target_inbox.c - the webhook inbox without a listener (sq_inbox_new + sq_inbox_handle):
 * stamped captures matched by the sink's ledger (per stream: received, duplicates, out of order,
 * gaps; per path: counts and latency; per capture: its stamp), --stamp-header's restriction,
 * the header-name check, and the query parsing's refusals. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proto/stamp.h"
#include "server/server.h"
#include "target/inbox.h"

static struct sq_server_resp send_req(struct sq_inbox *b, const char *method, const char *path,
                                      const char *body, const char *hname, const char *hvalue)
{
    struct sq_h1_header h[1];
    struct sq_server_req req = {.method = method,
                                .method_len = strlen(method),
                                .path = path,
                                .path_len = strlen(path),
                                .minor_version = 1,
                                .headers = h,
                                .body = body,
                                .body_len = body ? strlen(body) : 0,
                                .fd = -1};
    if (hname) {
        h[0] = (struct sq_h1_header){hname, strlen(hname), hvalue, strlen(hvalue)};
        req.num_headers = 1;
    }
    struct sq_server_resp resp = {0};
    sq_inbox_handle(b, &req, 0, &resp);
    return resp;
}

static json_t *get(struct sq_inbox *b, const char *path)
{
    struct sq_server_resp r = send_req(b, "GET", path, NULL, NULL, NULL);
    assert_int_equal(r.status ? r.status : 200, 200);
    json_error_t e;
    json_t *j = json_loadb(r.body, r.body_len, 0, &e);
    if (!j)
        fail_msg("%s: %s", path, e.text);
    return j;
}

static void post_stamp(struct sq_inbox *b, const char *path, uint64_t run, uint64_t seq, int64_t ns)
{
    struct sq_stamp st = {.run = run, .seq = seq, .ns = ns};
    char s[SQ_STAMP_MAX + 1], body[128];
    s[sq_stamp_format(&st, s)] = '\0';
    snprintf(body, sizeof(body), "{\"event\":\"%s\"}", s);
    send_req(b, "POST", path, body, NULL, NULL);
}

static json_int_t geti(json_t *o, const char *path)
{
    /* "a.b.c" */
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *x = o;
    for (char *k = strtok(buf, "."); k && x; k = strtok(NULL, "."))
        x = json_object_get(x, k);
    if (!json_is_integer(x))
        fail_msg("%s: not an integer", path);
    return json_integer_value(x);
}

static void test_matching(void **state)
{
    (void)state;
    struct sq_inbox_config cfg = {.threads = 1, .max_captures = 4, .max_body = 64};
    struct sq_inbox *b = NULL;
    assert_int_equal(sq_inbox_new(&cfg, &b), 0);
    int64_t sent = sq_stamp_now_ns() - 2000000; /* 2 ms ago */
    static const uint64_t seqs[] = {0, 1, 1, 4, 2};
    for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++)
        post_stamp(b, "/a/x?q=1", 100, seqs[i], sent);
    post_stamp(b, "/b", 200, 0, sent);
    send_req(b, "POST", "/b", "no stamp", NULL, NULL);

    json_t *st = get(b, "/_inbox/stats");
    assert_int_equal(geti(st, "captured"), 7);
    assert_int_equal(geti(st, "evicted"), 3);
    assert_int_equal(geti(st, "stamped"), 6);
    assert_string_equal(json_string_value(json_object_get(st, "stamp")), "scan");
    json_t *a = json_object_get(json_object_get(st, "paths"), "/a/x");
    assert_non_null(a);
    assert_int_equal(geti(a, "count"), 5);
    assert_int_equal(geti(a, "stamped"), 5);
    assert_int_equal(geti(a, "duplicates"), 1);
    assert_int_equal(geti(a, "out_of_order"), 1); /* 2 after 4 */
    assert_int_equal(geti(a, "missing"), 1);      /* 3 */
    assert_int_equal(geti(a, "latency.count"), 4);
    assert_true(geti(a, "latency.p50_us") >= 1900);
    assert_true(geti(a, "latency.max_us") >= geti(a, "latency.p99_us"));
    json_t *bp = json_object_get(json_object_get(st, "paths"), "/b");
    assert_int_equal(geti(bp, "count"), 2);
    assert_int_equal(geti(bp, "stamped"), 1);
    assert_int_equal(geti(bp, "missing"), 0);
    json_t *streams = json_object_get(st, "streams");
    assert_int_equal(json_array_size(streams), 2);
    size_t i;
    json_t *s;
    int seen = 0;
    json_array_foreach(streams, i, s)
    {
        const char *name = json_string_value(json_object_get(s, "stream"));
        if (strcmp(name, "34") == 0) { /* 100 in Crockford base32 */
            assert_int_equal(geti(s, "received"), 4);
            assert_int_equal(geti(s, "duplicates"), 1);
            assert_int_equal(geti(s, "out_of_order"), 1);
            assert_int_equal(geti(s, "missing"), 1);
            assert_int_equal(geti(s, "highest_seq"), 4);
            assert_string_equal(json_string_value(json_object_get(s, "path")), "/a/x");
            seen |= 1;
        } else if (strcmp(name, "68") == 0) { /* 200 */
            assert_int_equal(geti(s, "received"), 1);
            assert_string_equal(json_string_value(json_object_get(s, "path")), "/b");
            seen |= 2;
        }
    }
    assert_int_equal(seen, 3);
    json_decref(st);

    /* the kept captures (the newest 4) carry their stamps; the unstamped one null */
    json_t *l = get(b, "/_inbox/captures?since=0");
    json_t *caps = json_object_get(l, "captures");
    assert_int_equal(json_array_size(caps), 4);
    json_t *c0 = json_array_get(caps, 0); /* seq 4: stamp seq 4 */
    assert_int_equal(geti(c0, "stamp.seq"), 4);
    assert_true(geti(c0, "stamp.latency_us") >= 1900);
    assert_true(json_is_false(json_object_get(json_object_get(c0, "stamp"), "duplicate")));
    json_t *c1 = json_array_get(caps, 1); /* seq 5: stamp seq 2, late */
    assert_true(json_is_true(json_object_get(json_object_get(c1, "stamp"), "out_of_order")));
    assert_true(json_is_null(json_object_get(json_array_get(caps, 3), "stamp")));
    json_decref(l);

    struct sq_inbox_counts n;
    sq_inbox_counts(b, &n);
    assert_int_equal(n.stamped, 6);
    sq_inbox_free(b);
}

static void test_stamp_header(void **state)
{
    (void)state;
    struct sq_inbox_config cfg = {.threads = 1, .stamp_header = "X-Stamp"};
    struct sq_inbox *b = NULL;
    assert_int_equal(sq_inbox_new(&cfg, &b), 0);
    send_req(b, "POST", "/h", "sq1.1.0.1", NULL, NULL);      /* the body: not looked at */
    send_req(b, "POST", "/h", "{}", "x-stamp", "sq1.2.0.1"); /* the header, any case */
    send_req(b, "POST", "/h", "{}", "X-Other", "sq1.3.0.1"); /* another header */
    json_t *st = get(b, "/_inbox/stats");
    assert_string_equal(json_string_value(json_object_get(st, "stamp")), "header:X-Stamp");
    assert_int_equal(geti(st, "stamped"), 1);
    json_t *s = json_array_get(json_object_get(st, "streams"), 0);
    assert_string_equal(json_string_value(json_object_get(s, "stream")), "2");
    assert_int_equal(json_array_size(json_object_get(st, "streams")), 1);
    json_decref(st);
    sq_inbox_free(b);

    assert_true(sq_inbox_header_name_ok("X-Event_Stamp.1"));
    assert_false(sq_inbox_header_name_ok(""));
    assert_false(sq_inbox_header_name_ok("a b"));
    assert_false(sq_inbox_header_name_ok("a:b"));
    char longname[200];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_false(sq_inbox_header_name_ok(longname));
    cfg.stamp_header = "bad name";
    assert_int_equal(sq_inbox_new(&cfg, &b), -EINVAL);
}

/* The matching's memory is bounded: one stream whose stamps each need a page of their own
 * (sequence numbers 2^20 apart) fills it, the stamp past it is counted `unmatched`, not
 * matched, and a page it has still matches (a hostile sender cannot grow the inbox without
 * bound, and what fits stays exact). */
static void test_ledger_budget(void **state)
{
    (void)state;
    struct sq_inbox_config cfg = {.threads = 1, .max_captures = 8};
    struct sq_inbox *b = NULL;
    assert_int_equal(sq_inbox_new(&cfg, &b), 0);
    uint64_t k = 0;
    for (; k < 20000; k++) {
        post_stamp(b, "/far", 7, k << 20, 1);
        json_t *l = get(b, "/_inbox/captures?since=0&limit=1000");
        json_t *caps = json_object_get(l, "captures");
        json_t *last = json_array_get(caps, json_array_size(caps) - 1);
        bool un = json_is_true(json_object_get(json_object_get(last, "stamp"), "unmatched"));
        json_decref(l);
        if (un)
            break;
    }
    assert_true(k > 0 && k < 20000); /* the cap was reached, after some pages */
    post_stamp(b, "/far", 7, 1, 1);  /* a page it has: matched */
    json_t *st = get(b, "/_inbox/stats");
    assert_int_equal(geti(st, "stamped"), k + 2);
    assert_int_equal(geti(st, "unmatched"), 1);
    assert_true(geti(st, "ledger_bytes") <= geti(st, "ledger_max_bytes"));
    assert_int_equal(geti(st, "ledger_max_bytes"), SQ_INBOX_LEDGER_BYTES);
    json_t *s = json_array_get(json_object_get(st, "streams"), 0);
    assert_int_equal(geti(s, "received"), k + 1);
    assert_int_equal(geti(s, "missing"), (int64_t)(((k - 1) << 20) + 1 - (k + 1)));
    json_decref(st);
    sq_inbox_free(b);
}

/* Phantom streams (forged stamps, one each, each on a page of its own, on their own path) do
 * not lock a real run out of the matching: the ones that went longest without an arrival are
 * evicted to make room, and a genuine 100-event run afterwards, on another path, is matched in
 * full and keeps its path. */
static void test_phantom_streams_do_not_lock_out(void **state)
{
    (void)state;
    struct sq_inbox_config cfg = {.threads = 1, .max_captures = 16};
    struct sq_inbox *b = NULL;
    assert_int_equal(sq_inbox_new(&cfg, &b), 0);
    for (uint64_t r = 1; r <= 5000; r++)
        post_stamp(b, "/phantom", r << 12, (r * 2654435761u) & 0xffffffffu, 1);
    int64_t sent = sq_stamp_now_ns();
    uint64_t real = 0x3f1c2ull << 12;
    for (uint64_t q = 0; q < 100; q++)
        post_stamp(b, "/real", real, q, sent);
    json_t *st = get(b, "/_inbox/stats");
    assert_int_equal(geti(st, "stamped"), 5100);
    assert_true(geti(st, "unmatched") < 5000); /* phantoms may be, the real run not: */
    json_t *streams = json_object_get(st, "streams");
    size_t i;
    json_t *e;
    bool found = false;
    json_array_foreach(streams, i, e)
    {
        if (geti(e, "highest_seq") != 99 || geti(e, "received") != 100)
            continue;
        found = true;
        assert_int_equal(geti(e, "missing"), 0);
        assert_int_equal(geti(e, "duplicates"), 0);
        assert_string_equal(json_string_value(json_object_get(e, "path")), "/real");
    }
    assert_true(found);
    json_t *rp = json_object_get(json_object_get(st, "paths"), "/real");
    assert_int_equal(geti(rp, "stamped"), 100);
    assert_int_equal(geti(rp, "missing"), 0);
    assert_int_equal(geti(rp, "latency.count"), 100);
    json_decref(st);
    /* every capture of the real run says it was matched */
    json_t *l = get(b, "/_inbox/captures?since=0&path=/real");
    json_t *caps = json_object_get(l, "captures");
    assert_int_equal(json_array_size(caps), 16);
    json_array_foreach(caps, i, e)
        assert_null(json_object_get(json_object_get(e, "stamp"), "unmatched"));
    json_decref(l);
    sq_inbox_free(b);
}

static void test_query_refusals(void **state)
{
    (void)state;
    struct sq_inbox_config cfg = {.threads = 1};
    struct sq_inbox *b = NULL;
    assert_int_equal(sq_inbox_new(&cfg, &b), 0);
    static const char *const bad[] = {"/_inbox/captures?since=x", "/_inbox/captures?limit=0",
                                      "/_inbox/captures?limit=1001", "/_inbox/captures?since=-1",
                                      "/_inbox/stream?since=%zz"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(send_req(b, "GET", bad[i], NULL, NULL, NULL).status, 400);
    send_req(b, "POST", "/p%20q/r", "x", NULL, NULL);
    json_t *l = get(b, "/_inbox/captures?path=%2Fp+q&limit=5&since=0");
    assert_int_equal(json_array_size(json_object_get(l, "captures")), 0); /* '+' is a space... */
    json_decref(l);
    l = get(b, "/_inbox/captures?path=%2Fp%2520q&since=0"); /* ...the path as sent */
    assert_int_equal(json_array_size(json_object_get(l, "captures")), 1);
    json_decref(l);
    sq_inbox_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matching),
        cmocka_unit_test(test_stamp_header),
        cmocka_unit_test(test_ledger_budget),
        cmocka_unit_test(test_phantom_streams_do_not_lock_out),
        cmocka_unit_test(test_query_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
