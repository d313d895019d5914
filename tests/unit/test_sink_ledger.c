/* test_sink_ledger.c - the sink's ledger under its memory cap (sink/sink.h): what does not fit
 * is counted over_cap and never matched, a page that did not fit is never counted lost, what
 * fits stays exact; the ledger alone evicts the stream with the oldest arrival, so a stream in
 * use wins over phantom streams; a stream's tag comes back with its counts; and `squall sink`'s
 * own ledger (a real HTTP source on loopback) reports over_cap, max_memory and ledger_bytes in
 * its block. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "proto/stamp.h"
#include "sink/sink.h"

#define MIB (1ull << 20)

static struct sq_sink_hit put(struct sq_sink *s, uint64_t run, uint64_t seq, void *tag)
{
    struct sq_stamp st = {.run = run, .seq = seq, .ns = 1};
    char body[SQ_STAMP_MAX + 1];
    body[sq_stamp_format(&st, body)] = '\0';
    struct sq_sink_hit hit;
    assert_int_equal(sq_sink_record(s, body, strlen(body), NULL, 0, tag, &hit), 1);
    return hit;
}

struct seen {
    struct sq_sink_stream_counts v[4096]; /* the most a ledger keeps */
    size_t n;
};
static struct seen seen;

static void collect(void *ud, const struct sq_sink_stream_counts *c)
{
    struct seen *s = ud;
    if (s->n < 4096)
        s->v[s->n] = *c;
    s->n++;
}

static const struct sq_sink_stream_counts *find(const struct seen *s, uint64_t run)
{
    for (size_t i = 0; i < s->n && i < 4096; i++)
        if (s->v[i].run == run)
            return &s->v[i];
    return NULL;
}

/* One stream alone fills the cap with pages far apart: the stamps past it are over_cap (not
 * matched, counted per stream and in all), a page it has still matches, and the pages that did
 * not fit are neither delivered nor missing, though they lie below its highest sequence number
 * (the stamp that made the top came first). */
#define PAGE_SEQS (1ull << 16) /* sink.c's page */
static void test_cap_counts_what_does_not_fit(void **state)
{
    (void)state;
    struct sq_sink *s = NULL;
    char err[256];
    assert_int_equal(sq_sink_ledger_new(NULL, MIB, &s, err, sizeof(err)), 0);
    for (uint64_t q = 0; q < 1000; q++)
        assert_false(put(s, 7, q, NULL).unmatched);
    /* pages 1..255 of the first block (2^24 sequence numbers: sink.c's), the last first */
    assert_false(put(s, 7, (255 * PAGE_SEQS) + 5, NULL).unmatched);
    uint64_t fit = 0, over = 0;
    for (uint64_t k = 1; k < 255; k++) { /* a page each: 8 KiB, so ~120 fit in 1 MiB */
        struct sq_sink_hit h = put(s, 7, k * PAGE_SEQS, NULL);
        if (h.unmatched) {
            assert_true(h.over_cap);
            over++;
        } else {
            assert_int_equal(fit, k - 1); /* once one does not fit, none after it does */
            fit++;
        }
    }
    assert_true(fit > 10 && over > 10);
    struct sq_sink_hit h = put(s, 7, 1000, NULL); /* page 0: still matched */
    assert_false(h.unmatched);
    h = put(s, 7, 254 * PAGE_SEQS + 1, NULL); /* an untracked page: over_cap again */
    assert_true(h.unmatched && h.over_cap);
    struct sq_sink_ledger_counts lc;
    sq_sink_ledger_counts(s, &lc);
    assert_int_equal(lc.over_cap, over + 1);
    assert_int_equal(lc.max_bytes, MIB);
    assert_true(lc.bytes <= MIB && lc.bytes > MIB - 16 * 1024);
    assert_int_equal(lc.streams, 1);
    seen.n = 0;
    assert_int_equal(sq_sink_streams(s, collect, &seen), 1);
    const struct sq_sink_stream_counts *c = find(&seen, 7);
    assert_non_null(c);
    uint64_t delivered = 1000 + 1 + fit + 1;
    assert_int_equal(c->delivered, delivered);
    assert_int_equal(c->over_cap, over + 1);
    assert_int_equal(c->highest, (int64_t)(255 * PAGE_SEQS + 5));
    /* below the top: the sequence numbers of the tracked pages that did not come; the `over`
     * pages that did not fit are not counted missing */
    assert_int_equal(c->missing, 255 * PAGE_SEQS + 6 - over * PAGE_SEQS - delivered);
    sq_sink_free(s);
}

/* Phantom streams (one stamp each, each on a page of its own) past the cap: the ledger evicts
 * the oldest to make room, so a genuine run afterwards is matched in full. */
static void test_phantoms_evicted_for_a_real_run(void **state)
{
    (void)state;
    struct sq_sink *s = NULL;
    char err[256];
    assert_int_equal(sq_sink_ledger_new(NULL, MIB, &s, err, sizeof(err)), 0);
    for (uint64_t r = 1; r <= 500; r++)
        assert_false(put(s, 0x100000 + r, r * 77777, NULL).unmatched);
    int tag;
    for (uint64_t q = 0; q < 100; q++) {
        struct sq_sink_hit h = put(s, 0x5000, q, &tag);
        assert_false(h.unmatched);
        assert_false(h.duplicate);
    }
    struct sq_sink_ledger_counts lc;
    sq_sink_ledger_counts(s, &lc);
    assert_true(lc.evicted > 400); /* ~80 streams fit in 1 MiB */
    assert_int_equal(lc.over_cap, 0);
    assert_true(lc.bytes <= MIB);
    seen.n = 0;
    sq_sink_streams(s, collect, &seen);
    assert_int_equal(seen.n, lc.streams);
    assert_null(find(&seen, 0x100001)); /* the oldest phantom went first */
    assert_non_null(find(&seen, 0x100000 + 500));
    const struct sq_sink_stream_counts *c = find(&seen, 0x5000);
    assert_non_null(c);
    assert_int_equal(c->delivered, 100);
    assert_int_equal(c->missing, 0);
    assert_ptr_equal(c->tag, &tag);
    sq_sink_free(s);
}

/* A stream in use is never the oldest: phantoms arriving between its events evict each other,
 * and its figures stay exact. */
static void test_stream_in_use_survives_a_flood(void **state)
{
    (void)state;
    struct sq_sink *s = NULL;
    char err[256];
    assert_int_equal(sq_sink_ledger_new(NULL, MIB, &s, err, sizeof(err)), 0);
    uint64_t phantom = 0x900000;
    for (uint64_t q = 0; q < 500; q++) {
        if (q % 50 != 3)
            assert_false(put(s, 0x6000, q, NULL).unmatched);
        for (int k = 0; k < 20; k++, phantom++)
            put(s, phantom, phantom * 131, NULL);
    }
    struct sq_sink_ledger_counts lc;
    sq_sink_ledger_counts(s, &lc);
    assert_true(lc.evicted > 9000);
    seen.n = 0;
    sq_sink_streams(s, collect, &seen);
    const struct sq_sink_stream_counts *c = find(&seen, 0x6000);
    assert_non_null(c);
    assert_int_equal(c->delivered, 490);
    assert_int_equal(c->missing, 10); /* 3, 53, ..., 453 */
    assert_int_equal(c->highest, 499);
    /* after thousands of deletions from the open-addressed table, every stream kept is still
     * found: its highest sequence number again is a duplicate, and nothing new is made */
    size_t kept = seen.n;
    static struct sq_sink_stream_counts copy[4096];
    memcpy(copy, seen.v, kept * sizeof(copy[0]));
    for (size_t i = 0; i < kept; i++) {
        struct sq_sink_hit h = put(s, copy[i].run, (uint64_t)copy[i].highest, NULL);
        assert_true(h.duplicate);
    }
    struct sq_sink_ledger_counts after;
    sq_sink_ledger_counts(s, &after);
    assert_int_equal(after.streams, lc.streams);
    assert_int_equal(after.evicted, lc.evicted);
    sq_sink_free(s);
}

/* The table full (4,096 streams, half its slots: long probe runs): each new stream evicts the
 * oldest, 20,000 times over, and every stream kept is still found afterwards (linear probing's
 * deletion moved the right entries back) while the evicted ones are gone. */
static void test_table_deletions_keep_lookups(void **state)
{
    (void)state;
    struct sq_sink *s = NULL;
    char err[256];
    assert_int_equal(sq_sink_ledger_new(NULL, 256 * MIB, &s, err, sizeof(err)), 0);
    for (uint64_t r = 1; r <= 24096; r++)
        assert_false(put(s, r * 0x9E3779B97F4A7C15ull, r, NULL).unmatched);
    struct sq_sink_ledger_counts lc;
    sq_sink_ledger_counts(s, &lc);
    assert_int_equal(lc.streams, 4096);
    assert_int_equal(lc.evicted, 20000);
    seen.n = 0;
    assert_int_equal(sq_sink_streams(s, collect, &seen), 4096);
    static struct sq_sink_stream_counts copy[4096];
    memcpy(copy, seen.v, sizeof(copy));
    for (size_t i = 0; i < 4096; i++) {
        uint64_t r = (uint64_t)copy[i].highest; /* stream r's one sequence number is r */
        assert_true(r > 20000);                 /* the newest 4,096 */
        assert_int_equal(copy[i].run, r * 0x9E3779B97F4A7C15ull);
        assert_true(put(s, copy[i].run, r, NULL).duplicate);
    }
    sq_sink_ledger_counts(s, &lc);
    assert_int_equal(lc.streams, 4096);
    assert_int_equal(lc.evicted, 20000);
    sq_sink_free(s);
}

/* ---- the sink with an HTTP source: its block ---- */

static void post(uint16_t port, const char *body)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    char req[512];
    int n = snprintf(req, sizeof(req),
                     "POST /e HTTP/1.1\r\nHost: s\r\nConnection: close\r\nContent-Length: "
                     "%zu\r\n\r\n%s",
                     strlen(body), body);
    assert_int_equal(write(fd, req, (size_t)n), n);
    char buf[512];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    close(fd);
}

static void post_stamp(uint16_t port, uint64_t run, uint64_t seq)
{
    struct sq_stamp st = {.run = run, .seq = seq, .ns = 1};
    char body[SQ_STAMP_MAX + 1];
    body[sq_stamp_format(&st, body)] = '\0';
    post(port, body);
}

static json_int_t geti(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    if (!json_is_integer(v))
        fail_msg("no integer '%s'", k);
    return json_integer_value(v);
}

static void test_sink_block_reports_the_cap(void **state)
{
    (void)state;
    struct sq_sink_config cfg = {.http = "127.0.0.1:0", .max_memory = MIB};
    struct sq_sink *s = NULL;
    char err[256];
    assert_int_equal(sq_sink_start(&cfg, &s, err, sizeof(err)), 0);
    uint16_t port = sq_sink_http_port(s);
    for (uint64_t q = 0; q < 10; q++)
        post_stamp(port, 1 << 12, q);
    for (uint64_t k = 1; k <= 200; k++)
        post_stamp(port, 1 << 12, k << 20);
    post_stamp(port, 1 << 12, 10);
    post_stamp(port, 1ull << 40, 0);       /* a new stream: no room left, over_cap */
    post_stamp(port, 1 << 12, 1ull << 32); /* past 2^32: out of range */
    sq_sink_stop(s);
    json_t *j = sq_sink_json(s);
    assert_non_null(j);
    json_int_t over = geti(j, "over_cap"), delivered = geti(j, "delivered");
    assert_true(over > 10);
    assert_int_equal(geti(j, "max_memory"), (json_int_t)MIB);
    assert_true(geti(j, "ledger_bytes") <= (json_int_t)MIB);
    assert_int_equal(geti(j, "out_of_range"), 1);
    assert_int_equal(delivered + over + 1, 213); /* every stamp counted once */
    assert_int_equal(geti(j, "events"), 213);
    json_t *streams = json_object_get(j, "streams");
    assert_int_equal(json_array_size(streams), 1);
    json_t *st = json_array_get(streams, 0);
    assert_int_equal(geti(st, "delivered"), delivered);
    assert_int_equal(geti(st, "over_cap"), over - 1); /* the new stream's stamp: the sink's */
    json_int_t fit = delivered - 11;                  /* pages k << 20 that fitted */
    assert_int_equal(geti(st, "highest_seq"), fit << 20);
    assert_int_equal(geti(j, "lost"), (fit << 20) + 1 - delivered);
    json_decref(j);
    sq_sink_free(s);
    cfg.max_memory = 1000; /* under 1 MiB: refused, naming the flag */
    assert_int_equal(sq_sink_check(&cfg, err, sizeof(err)), -SQ_EUSAGE);
    assert_non_null(strstr(err, "--max-memory"));
}

/* What the sender never finished sending (sq_sink_expect's unfinished) is never lost: of 10
 * stamped, 5, 7 and 9 unfinished (7 twice, and 12, past what was stamped, ignored), 3, 5 and 7
 * missing: lost is 3 alone (and lost_seqs lists it alone), sent 7, unfinished 3, 9 arrived all
 * the same, and delivered = sent - lost + unfinished_delivered. */
static void test_unfinished_are_never_lost(void **state)
{
    (void)state;
    struct sq_sink_config cfg = {.http = "127.0.0.1:0", .settle_ns = 1};
    struct sq_sink *s = NULL;
    char err[256];
    assert_int_equal(sq_sink_start(&cfg, &s, err, sizeof(err)), 0);
    uint16_t port = sq_sink_http_port(s);
    static const uint64_t arrive[] = {0, 1, 2, 4, 6, 8, 9};
    for (size_t i = 0; i < sizeof(arrive) / sizeof(arrive[0]); i++)
        post_stamp(port, 1 << 12, arrive[i]);
    const uint64_t stamped[] = {10}, unf[] = {9, 7, 5, 7, 12}, nunf[] = {5};
    const uint64_t *unfs[] = {unf};
    struct sq_sink_sent sent = {1 << 12, stamped, 1, unfs, nunf};
    sq_sink_expect(s, &sent);
    struct sq_sink_totals t;
    sq_sink_totals(s, &t);
    assert_int_equal(t.expected, 7);
    assert_int_equal(t.expected_in, 6); /* sent ones in: all but 3 */
    sq_sink_stop(s);
    json_t *j = sq_sink_json(s);
    assert_non_null(j);
    assert_int_equal(geti(j, "stamped"), 10);
    assert_int_equal(geti(j, "sent"), 7);
    assert_int_equal(geti(j, "unfinished"), 3);
    assert_int_equal(geti(j, "unfinished_delivered"), 1);
    assert_int_equal(geti(j, "lost"), 1);
    assert_int_equal(geti(j, "delivered"), 7);
    json_t *ls = json_object_get(j, "lost_seqs");
    assert_int_equal(json_array_size(ls), 1);
    assert_int_equal(geti(json_array_get(ls, 0), "seq"), 3);
    json_t *st = json_array_get(json_object_get(j, "streams"), 0);
    assert_int_equal(geti(st, "sent"), 7);
    assert_int_equal(geti(st, "unfinished"), 3);
    assert_int_equal(geti(st, "lost"), 1);
    assert_int_equal(geti(st, "delivered"), 7);
    json_decref(j);
    sq_sink_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_counts_what_does_not_fit),
        cmocka_unit_test(test_phantoms_evicted_for_a_real_run),
        cmocka_unit_test(test_stream_in_use_survives_a_flood),
        cmocka_unit_test(test_table_deletions_keep_lookups),
        cmocka_unit_test(test_sink_block_reports_the_cap),
        cmocka_unit_test(test_unfinished_are_never_lost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
