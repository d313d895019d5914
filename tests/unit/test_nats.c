/* test_nats.c - the NATS codec: server-op parser, encoders, INFO and PubAck readers.
 *
 * Parser cases are table-driven and run over every truncated prefix, each placed against a guard
 * page: a prefix of a valid operation must be PARTIAL (with the right `need` once the control
 * line is whole), a prefix of an invalid one PARTIAL or the same error, and the whole input the
 * expected result. Streams of several operations are then fed split at every point through a
 * driver-like loop that keeps only the unparsed tail, and must give the same events each way.
 * Encoders are checked byte for byte and at every buffer size below the one they need.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "proto_test.h"

#include "proto/nats.h"

#define OK 1

struct pcase {
    const char *name;
    const char *in;
    size_t in_len; /* 0: strlen(in) */
    int rc;        /* OK or a negative code */
    int op;
    const char *subject, *sid, *reply, *payload, *text;
    int status;
    const char *status_msg;
    size_t consumed; /* OK: 0 means in_len */
    uint32_t max_payload, max_line;
};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct pcase pcases[] = {
    {"ping", "PING\r\n", 0, OK, SQ_NATS_OP_PING},
    {"pong lower", "pong\r\n", 0, OK, SQ_NATS_OP_PONG},
    {"ok", "+OK\r\n", 0, OK, SQ_NATS_OP_OK},
    {"ping then more", "PING\r\nPONG\r\n", 0, OK, SQ_NATS_OP_PING, .consumed = 6},
    {"err", "-ERR 'Authorization Violation'\r\n", 0, OK, SQ_NATS_OP_ERR,
     .text = "Authorization Violation"},
    {"err unquoted", "-ERR  Stale Connection \r\n", 0, OK, SQ_NATS_OP_ERR,
     .text = "Stale Connection"},
    {"info",
     "INFO {\"server_id\":\"NABC\",\"version\":\"2.9.10\",\"proto\":1,\"headers\":true,"
     "\"max_payload\":1048576,\"jetstream\":true,\"client_id\":5}\r\n",
     0, OK, SQ_NATS_OP_INFO,
     .text = "{\"server_id\":\"NABC\",\"version\":\"2.9.10\",\"proto\":1,\"headers\":true,"
             "\"max_payload\":1048576,\"jetstream\":true,\"client_id\":5}"},
    {"msg", "MSG orders 1 5\r\nhello\r\n", 0, OK, SQ_NATS_OP_MSG, "orders", "1", "", "hello"},
    {"msg reply", "MSG a.b 12 _INBOX.x 3\r\nabc\r\n", 0, OK, SQ_NATS_OP_MSG, "a.b", "12",
     "_INBOX.x", "abc"},
    {"msg empty payload", "MSG a 1 0\r\n\r\n", 0, OK, SQ_NATS_OP_MSG, "a", "1", "", ""},
    {"msg tabs and spaces", "msg\ta  7\t 2\r\nhi\r\n", 0, OK, SQ_NATS_OP_MSG, "a", "7", "", "hi"},
    {"msg binary payload", "MSG a 1 4\r\n\r\n\0\xff\r\n", 17, OK, SQ_NATS_OP_MSG, "a", "1", "",
     NULL},
    {"msg alnum sid", "MSG a sidX 1\r\nz\r\n", 0, OK, SQ_NATS_OP_MSG, "a", "sidX", "", "z"},
    {"hmsg", "HMSG s 2 23 28\r\nNATS/1.0\r\nA: b\r\nC:d\r\n\r\nhello\r\n", 0, OK, SQ_NATS_OP_HMSG,
     "s", "2", "", "hello"},
    {"hmsg no responders", "HMSG _INBOX.a 3 16 16\r\nNATS/1.0 503\r\n\r\n\r\n", 0, OK,
     SQ_NATS_OP_HMSG, "_INBOX.a", "3", "", "", .status = 503, .status_msg = ""},
    {"hmsg status text", "HMSG s 1 r 38 40\r\nNATS/1.0 408 Request Timeout\r\nX: 1\r\n\r\nok\r\n",
     0, OK, SQ_NATS_OP_HMSG, "s", "1", "r", "ok", .status = 408, .status_msg = "Request Timeout"},
    /* refusals */
    {"unknown op", "XYZ\r\n", 0, -SQ_EPARSE},
    {"bad second byte", "PX", 0, -SQ_EPARSE},
    {"ping with args", "PING x\r\n", 0, -SQ_EPARSE},
    {"ping bare lf", "PING\n", 0, -SQ_EPARSE},
    {"msg no blank", "MSGa 1 1\r\nx\r\n", 0, -SQ_EPARSE},
    {"msg few args", "MSG a 1\r\n", 0, -SQ_EPARSE},
    {"msg many args", "MSG a 1 r x 1\r\nx\r\n", 0, -SQ_EPARSE},
    {"msg size not number", "MSG a 1 1x\r\nx\r\n", 0, -SQ_EPARSE},
    {"msg size negative", "MSG a 1 -1\r\n", 0, -SQ_EPARSE},
    {"msg over cap", "MSG a 1 1048577\r\n", 0, -SQ_ETOOBIG},
    {"msg huge number", "MSG a 1 99999999999999999999999\r\n", 0, -SQ_ETOOBIG},
    {"msg small cap", "MSG a 1 11\r\nhello world\r\n", 0, -SQ_ETOOBIG, .max_payload = 10},
    {"msg no crlf after payload", "MSG a 1 2\r\nhiX\n", 0, -SQ_EPARSE},
    {"msg payload too long", "MSG a 1 1\r\nhi\r\n", 0, -SQ_EPARSE},
    {"bare lf", "MSG a 1 2\nhi\r\n", 0, -SQ_EPARSE},
    {"cr alone", "MSG a 1\r2\r\n", 0, -SQ_EPARSE},
    {"control byte", "MSG a\x01 1 1\r\nx\r\n", 0, -SQ_EPARSE},
    {"line over cap", "MSG aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 1 1\r\n", 0, -SQ_ETOOBIG,
     .max_line = 32},
    {"hmsg hdr over total", "HMSG s 1 30 20\r\n", 0, -SQ_EPARSE},
    {"hmsg hdr too small", "HMSG s 1 4 4\r\nNATS\r\n", 0, -SQ_EPARSE},
    {"hmsg bad version", "HMSG s 1 14 14\r\nNATS/2.0\r\n\r\n\r\n", 0, -SQ_EPARSE},
    {"hmsg no end", "HMSG s 1 16 16\r\nNATS/1.0\r\nA: b\r\n\r\n", 0, -SQ_EPARSE},
    {"hmsg early blank", "HMSG s 1 20 20\r\nNATS/1.0\r\n\r\nA: b\r\n\r\n", 0, -SQ_EPARSE},
    {"hmsg status digits", "HMSG s 1 15 15\r\nNATS/1.0 50\r\n\r\n\r\n", 0, -SQ_EPARSE},
    {"hmsg field no colon", "HMSG s 1 16 16\r\nNATS/1.0\r\nAb\r\n\r\n\r\n", 0, -SQ_EPARSE},
    {"info not json", "INFO {\"a\":}\r\n", 0, -SQ_EPARSE},
    {"info trailing", "INFO {} x\r\n", 0, -SQ_EPARSE},
    {"info wrong type", "INFO {\"headers\":1}\r\n", 0, -SQ_EPARSE},
    {"info cr cr lf", "INFO {}\r\r\n", 0, -SQ_EPARSE}, /* found by fuzz_nats */
    {"err cr inside", "-ERR 'a\rb'\r\n", 0, -SQ_EPARSE},
    /* A CR as the last byte the cap allows: over the cap whatever follows (found by fuzz_nats) */
    {"cr at the cap", "MSG aaaaaaaaaaaaaaaaaaaaaaa 1 1\rx\n", 0, -SQ_ETOOBIG, .max_line = 32},
};
#pragma GCC diagnostic pop

static void check_str(const char *what, struct sq_str got, const char *want, const char *name)
{
    if (!want)
        return;
    CHECK(got.len == strlen(want) && (got.len == 0 || memcmp(got.p, want, got.len) == 0),
          "%s: %s is '%.*s', want '%s'\n", name, what, (int)got.len, got.p ? got.p : "", want);
}

static void test_parse_table(void **state)
{
    (void)state;
    struct guard g;
    guard_init(&g, 4096);
    for (size_t c = 0; c < SQ_ARRAY_LEN(pcases); c++) {
        const struct pcase *t = &pcases[c];
        size_t n = t->in_len ? t->in_len : strlen(t->in);
        struct sq_nats_limits lim;
        sq_nats_limits_init(&lim);
        if (t->max_payload)
            lim.max_payload = t->max_payload;
        if (t->max_line)
            lim.max_line = t->max_line;
        size_t want_len = t->consumed ? t->consumed : n;
        for (size_t k = 0; k <= n; k++) {
            const char *p = guard_put(&g, t->in, k);
            struct sq_nats_event ev;
            size_t need = 12345;
            uint64_t before = n_allocs;
            int rc = sq_nats_parse(p, k, &lim, &ev, &need);
            CHECK(n_allocs == before, "%s: the parser allocated\n", t->name);
            if (t->rc < 0)
                CHECK(rc == SQ_NATS_PARTIAL || rc == t->rc,
                      "%s: prefix %zu gives %d, want PARTIAL or %d\n", t->name, k, rc, t->rc);
            if (t->rc < 0 && rc < 0)
                CHECK(ev.why != NULL, "%s: an error without a reason\n", t->name);
            if (k == n && t->rc < 0) {
                CHECK(rc == t->rc, "%s: whole input gives %d (%s), want %d\n", t->name, rc,
                      ev.why ? ev.why : "", t->rc);
                continue;
            }
            if (t->rc < 0)
                continue;
            if (k < want_len) {
                CHECK(rc == SQ_NATS_PARTIAL, "%s: prefix %zu gives %d (%s), want PARTIAL\n",
                      t->name, k, rc, rc < 0 ? ev.why : "");
                CHECK(need == 0 || need == want_len, "%s: prefix %zu: need %zu, want %zu\n",
                      t->name, k, need, want_len);
                continue;
            }
            CHECK(rc == (int)want_len, "%s: prefix %zu gives %d (%s), want %zu\n", t->name, k, rc,
                  rc < 0 ? ev.why : "", want_len);
            CHECK(ev.op == t->op, "%s: op %d, want %d\n", t->name, ev.op, t->op);
            check_str("subject", ev.subject, t->subject, t->name);
            check_str("sid", ev.sid, t->sid, t->name);
            check_str("reply", ev.reply, t->reply, t->name);
            check_str("payload", ev.payload, t->payload, t->name);
            check_str("text", ev.text, t->text, t->name);
            check_str("status text", ev.status_msg, t->status_msg, t->name);
            CHECK(ev.status == t->status, "%s: status %d, want %d\n", t->name, ev.status,
                  t->status);
            if (k == want_len && (t->op == SQ_NATS_OP_MSG || t->op == SQ_NATS_OP_HMSG) &&
                strcmp(t->name, "msg binary payload") != 0) {
                /* Once the control line is whole, need says the exact total. */
                const char *eol = strstr(t->in, "\r\n");
                size_t line = (size_t)(eol - t->in) + 2;
                p = guard_put(&g, t->in, line);
                need = 0;
                rc = sq_nats_parse(p, line, &lim, &ev, &need);
                CHECK(rc == SQ_NATS_PARTIAL && need == want_len,
                      "%s: after the line: rc %d need %zu, want %zu\n", t->name, rc, need,
                      want_len);
            }
        }
    }
    guard_free(&g);
}

static void test_binary_payload(void **state)
{
    (void)state;
    static const char in[] = "MSG a 1 4\r\n\r\n\0\xff\r\n";
    struct sq_nats_event ev;
    assert_int_equal(sq_nats_parse(in, sizeof(in) - 1, NULL, &ev, NULL), (int)sizeof(in) - 1);
    assert_int_equal(ev.payload.len, 4);
    assert_memory_equal(ev.payload.p, "\r\n\0\xff", 4);
    assert_int_equal(ev.sid_num, 1);
}

/* ---- streams: a driver-like loop over every split ---- */

/* Feeds in[0,n) as two pieces split at `split`, keeping only the unparsed tail (a spill), and
 * appends "op:subject:payload;" per event to log. Returns the last rc (0 or an error). */
static int drive(const char *in, size_t n, size_t split, char *log, size_t logcap)
{
    static char spill[4096];
    size_t have = 0;
    log[0] = 0;
    size_t pieces[2][2] = {{0, split}, {split, n - split}};
    for (int i = 0; i < 2; i++) {
        memcpy(spill + have, in + pieces[i][0], pieces[i][1]);
        have += pieces[i][1];
        size_t off = 0;
        for (;;) {
            struct sq_nats_event ev;
            int rc = sq_nats_parse(spill + off, have - off, NULL, &ev, NULL);
            if (rc < 0)
                return rc;
            if (rc == 0)
                break;
            size_t l = strlen(log);
            snprintf(log + l, logcap - l, "%d:%.*s:%.*s:%d;", ev.op, (int)ev.subject.len,
                     ev.subject.p ? ev.subject.p : "", (int)ev.payload.len,
                     ev.payload.p ? ev.payload.p : "", ev.status);
            off += (size_t)rc;
        }
        memmove(spill, spill + off, have - off);
        have -= off;
    }
    return have ? -1000 : 0;
}

static void test_stream_splits(void **state)
{
    (void)state;
    static const char in[] = "INFO {\"server_id\":\"x\",\"headers\":true}\r\n"
                             "+OK\r\n"
                             "PING\r\n"
                             "MSG orders 1 5\r\nhello\r\n"
                             "MSG orders 1 _INBOX.1 0\r\n\r\n"
                             "HMSG _INBOX.2 2 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
                             "HMSG a 3 23 26\r\nNATS/1.0\r\nK: v\r\nL:w\r\n\r\nabc\r\n"
                             "PONG\r\n"
                             "-ERR 'Slow Consumer'\r\n";
    size_t n = sizeof(in) - 1;
    char want[1024], got[1024];
    assert_int_equal(drive(in, n, 0, want, sizeof(want)), 0);
    assert_string_equal(want, "1:::0;6:::0;4:::0;2:orders:hello:0;2:orders::0;3:_INBOX.2::503;"
                              "3:a:abc:0;5:::0;7:::0;");
    for (size_t s = 1; s <= n; s++) {
        int rc = drive(in, n, s, got, sizeof(got));
        CHECK(rc == 0 && strcmp(got, want) == 0, "split %zu: rc %d, log %s\n", s, rc, got);
    }
}

/* ---- header helpers ---- */

static void test_headers(void **state)
{
    (void)state;
    static const char in[] =
        "HMSG s 1 44 44\r\nNATS/1.0\r\nNats-Msg-Id: 7\r\nX-Stamp:  a b \r\n\r\n"
        "\r\n";
    struct sq_nats_event ev;
    assert_int_equal(sq_nats_parse(in, sizeof(in) - 1, NULL, &ev, NULL), (int)sizeof(in) - 1);
    size_t pos = 0;
    struct sq_str nm, v;
    assert_true(sq_nats_header_next(ev.headers, &pos, &nm, &v));
    assert_int_equal(nm.len, 11);
    assert_memory_equal(nm.p, "Nats-Msg-Id", 11);
    assert_int_equal(v.len, 1);
    assert_true(sq_nats_header_next(ev.headers, &pos, &nm, &v));
    assert_int_equal(v.len, 3);
    assert_memory_equal(v.p, "a b", 3);
    assert_false(sq_nats_header_next(ev.headers, &pos, &nm, &v));
    assert_true(sq_nats_header_get(ev.headers, S("x-stamp"), &v));
    assert_memory_equal(v.p, "a b", 3);
    assert_false(sq_nats_header_get(ev.headers, S("x-stam"), &v));
}

/* ---- INFO, JSON, PubAck ---- */

static void test_info(void **state)
{
    (void)state;
    static const char json[] =
        "{\"server_id\":\"NDX\",\"server_name\":\"n\",\"version\":\"2.9.10\",\"proto\":1,"
        "\"go\":\"go1.19\",\"host\":\"127.0.0.1\",\"port\":4222,\"headers\":true,"
        "\"max_payload\":1048576,\"jetstream\":true,\"client_id\":17,\"client_ip\":\"127.0.0.1\","
        "\"connect_urls\":[\"a:1\",\"b:2\"],\"nested\":{\"x\":[1,2.5e3,-0.1,null,false]},"
        "\"nonce\":\"abc\"}";
    struct sq_nats_info info;
    assert_int_equal(sq_nats_info_parse((struct sq_str){json, sizeof(json) - 1}, &info), 0);
    assert_int_equal(info.proto, 1);
    assert_int_equal(info.max_payload, 1048576);
    assert_true(info.headers);
    assert_true(info.jetstream);
    assert_false(info.auth_required);
    assert_int_equal(info.client_id, 17);
    assert_int_equal(info.version.len, 6);
    assert_memory_equal(info.nonce.p, "abc", 3);
    assert_int_equal(sq_nats_info_parse(S("{}"), &info), 0);
    assert_int_equal(info.proto, -1);
    assert_int_equal(info.max_payload, -1);
    assert_int_equal(sq_nats_info_parse(S("[]"), &info), -SQ_EPARSE);
}

static void test_json(void **state)
{
    (void)state;
    struct sq_str v;
    assert_int_equal(sq_nats_json_get(S(" { \"a\" : 1 , \"b\" : \"x\\\"y\" } "), "b", &v), 1);
    assert_int_equal(v.len, 6);
    assert_int_equal(sq_nats_json_get(S("{\"a\":1}"), "c", &v), 0);
    static const char *const bad[] = {
        "",
        "{",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "{a:1}",
        "{\"a\":01}",
        "{\"a\":1.}",
        "{\"a\":tru}",
        "{\"a\":\"\\x\"}",
        "{\"a\":\"\x01\"}",
        "{\"a\":1}x",
        "{\"a\":[1,]}",
        "{\"a\":-}",
        "{\"a\":\"\\u12g4\"}",
    };
    for (size_t i = 0; i < SQ_ARRAY_LEN(bad); i++)
        CHECK(sq_nats_json_get((struct sq_str){bad[i], strlen(bad[i])}, "a", &v) == -SQ_EPARSE,
              "accepted bad JSON '%s'\n", bad[i]);
    /* Nesting is capped. */
    char deep[200];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof(deep), "{\"a\":");
    for (int i = 0; i < 40; i++)
        deep[n++] = '[';
    for (int i = 0; i < 40; i++)
        deep[n++] = ']';
    deep[n++] = '}';
    assert_int_equal(sq_nats_json_get((struct sq_str){deep, n}, "a", &v), -SQ_EPARSE);
    /* the cap to the container: 32 open at once, the object's own included. (The scanner before
     * base/json counted levels by the values in them, so it also took a 33rd when it was
     * empty.) */
    for (int levels = 31; levels <= 32; levels++) {
        for (int empty = 0; empty < 2; empty++) {
            n = (size_t)snprintf(deep, sizeof(deep), "{\"a\":");
            memset(deep + n, '[', (size_t)levels);
            n += (size_t)levels;
            if (!empty)
                deep[n++] = '1';
            memset(deep + n, ']', (size_t)levels);
            n += (size_t)levels;
            deep[n++] = '}';
            int want = levels + 1 <= 32 ? 1 : -SQ_EPARSE;
            CHECK(sq_nats_json_get((struct sq_str){deep, n}, "a", &v) == want,
                  "%d arrays in the object (%s)\n", levels, empty ? "empty" : "holding 1");
        }
    }
}

static void test_puback(void **state)
{
    (void)state;
    struct sq_nats_puback a;
    static const char ok[] = "{\"stream\":\"ORDERS\",\"seq\":42}";
    assert_int_equal(sq_nats_puback_parse(ok, sizeof(ok) - 1, &a), SQ_NATS_ACK_OK);
    assert_int_equal(a.seq, 42);
    assert_int_equal(a.stream.len, 6);
    static const char dup[] = "{\"stream\":\"S\",\"domain\":\"d\",\"seq\":7,\"duplicate\":true}";
    assert_int_equal(sq_nats_puback_parse(dup, sizeof(dup) - 1, &a), SQ_NATS_ACK_DUPLICATE);
    assert_int_equal(a.seq, 7);
    static const char nodup[] = "{\"stream\":\"S\",\"seq\":8,\"duplicate\":false}";
    assert_int_equal(sq_nats_puback_parse(nodup, sizeof(nodup) - 1, &a), SQ_NATS_ACK_OK);
    static const char err[] = "{\"error\":{\"code\":503,\"err_code\":10077,"
                              "\"description\":\"maximum messages exceeded\"}}";
    assert_int_equal(sq_nats_puback_parse(err, sizeof(err) - 1, &a), SQ_NATS_ACK_ERROR);
    assert_int_equal(a.code, 503);
    assert_int_equal(a.err_code, 10077);
    assert_int_equal(a.description.len, strlen("maximum messages exceeded"));
    static const char *const bad[] = {"",
                                      "{}",
                                      "{\"stream\":\"S\"}",
                                      "{\"seq\":1}",
                                      "{\"stream\":1,\"seq\":1}",
                                      "{\"stream\":\"S\",\"seq\":-1}",
                                      "{\"error\":{\"code\":\"x\"}}",
                                      "not json"};
    for (size_t i = 0; i < SQ_ARRAY_LEN(bad); i++)
        CHECK(sq_nats_puback_parse(bad[i], strlen(bad[i]), &a) == -SQ_EPARSE,
              "accepted bad PubAck '%s'\n", bad[i]);
}

/* ---- encoders ---- */

/* Runs enc at every cap below the length it needs (each must be -SQ_ETOOBIG, and writes stay
 * inside cap: the buffer ends at a guard page), then at the exact cap, and compares. */
typedef int (*enc_fn)(char *buf, size_t cap, const void *arg);

static void check_enc(const char *name, enc_fn enc, const void *arg, const char *want,
                      size_t want_len)
{
    struct guard g;
    if (!want_len)
        want_len = strlen(want);
    guard_init(&g, want_len + 64);
    for (size_t cap = 0; cap < want_len; cap++) {
        int rc = enc(g.end - cap, cap, arg);
        CHECK(rc == -SQ_ETOOBIG, "%s: cap %zu gives %d\n", name, cap, rc);
    }
    uint64_t before = n_allocs;
    int rc = enc(g.end - want_len, want_len, arg);
    CHECK(n_allocs == before, "%s: the encoder allocated\n", name);
    CHECK(rc == (int)want_len && memcmp(g.end - want_len, want, want_len) == 0,
          "%s: rc %d, wrote '%.*s'\nwant '%s'\n", name, rc, rc > 0 ? rc : 0, g.end - want_len,
          want);
    guard_free(&g);
}

static int enc_connect(char *b, size_t cap, const void *arg)
{
    return sq_nats_encode_connect(b, cap, arg);
}

struct pub_arg {
    struct sq_str subj, reply;
    const char *payload;
    const struct sq_nats_header *h;
    size_t nh;
};

static int enc_pub(char *b, size_t cap, const void *arg)
{
    const struct pub_arg *a = arg;
    return sq_nats_encode_pub(b, cap, a->subj, a->reply, a->payload, strlen(a->payload));
}

static int enc_hpub(char *b, size_t cap, const void *arg)
{
    const struct pub_arg *a = arg;
    return sq_nats_encode_hpub(b, cap, a->subj, a->reply, a->h, a->nh, a->payload,
                               strlen(a->payload));
}

static int enc_sub(char *b, size_t cap, const void *arg)
{
    const struct pub_arg *a = arg;
    return sq_nats_encode_sub(b, cap, a->subj, a->reply, 42);
}

static int enc_unsub(char *b, size_t cap, const void *arg)
{
    (void)arg;
    return sq_nats_encode_unsub(b, cap, 42, 1000);
}

static void test_encoders(void **state)
{
    (void)state;
    struct sq_nats_connect_opts o = {.name = "sq \"1\"\n",
                                     .lang = "c",
                                     .version = "0.1.0",
                                     .user = "u",
                                     .pass = "p\\w",
                                     .echo = true,
                                     .headers = true,
                                     .no_responders = true};
    check_enc("connect", enc_connect, &o,
              "CONNECT {\"verbose\":false,\"pedantic\":false,\"tls_required\":false,"
              "\"name\":\"sq \\\"1\\\"\\u000a\",\"lang\":\"c\",\"version\":\"0.1.0\","
              "\"protocol\":1,\"echo\":true,\"headers\":true,\"no_responders\":true,"
              "\"user\":\"u\",\"pass\":\"p\\\\w\"}\r\n",
              0);
    struct sq_nats_connect_opts bad = {.no_responders = true};
    char buf[512];
    assert_int_equal(sq_nats_encode_connect(buf, sizeof(buf), &bad), -EINVAL);

    struct pub_arg a = {S("orders"), {0}, "hello", NULL, 0};
    check_enc("pub", enc_pub, &a, "PUB orders 5\r\nhello\r\n", 0);
    struct pub_arg r = {S("js.orders"), S("_INBOX.abc.1"), "", NULL, 0};
    check_enc("pub reply empty", enc_pub, &r, "PUB js.orders _INBOX.abc.1 0\r\n\r\n", 0);
    struct sq_nats_header h[] = {{S("Nats-Msg-Id"), S("m1")}, {S("X"), S("")}};
    struct pub_arg hp = {S("s"), S("r"), "abc", h, 2};
    check_enc("hpub", enc_hpub, &hp,
              "HPUB s r 34 37\r\nNATS/1.0\r\nNats-Msg-Id: m1\r\nX: \r\n\r\n"
              "abc\r\n",
              0);
    struct pub_arg hp0 = {S("s"), {0}, "", NULL, 0};
    check_enc("hpub no fields", enc_hpub, &hp0, "HPUB s 12 12\r\nNATS/1.0\r\n\r\n\r\n", 0);
    struct pub_arg sb = {S("orders.>"), S("q1"), "", NULL, 0};
    check_enc("sub", enc_sub, &sb, "SUB orders.> q1 42\r\n", 0);
    check_enc("unsub", enc_unsub, NULL, "UNSUB 42 1000\r\n", 0);
    assert_int_equal(sq_nats_encode_unsub(buf, sizeof(buf), 0, 0), 9);
    assert_memory_equal(buf, "UNSUB 0\r\n", 9);

    /* What the protocol cannot carry. */
    assert_int_equal(sq_nats_encode_pub(buf, sizeof(buf), S("a b"), (struct sq_str){0}, "", 0),
                     -EINVAL);
    assert_int_equal(sq_nats_encode_pub(buf, sizeof(buf), S(""), (struct sq_str){0}, "", 0),
                     -EINVAL);
    assert_int_equal(sq_nats_encode_pub(buf, sizeof(buf), S("a"), S("r\r\n"), "", 0), -EINVAL);
    struct sq_nats_header bh[] = {{S("A:B"), S("v")}};
    assert_int_equal(
        sq_nats_encode_hpub(buf, sizeof(buf), S("a"), (struct sq_str){0}, bh, 1, "", 0), -EINVAL);
    struct sq_nats_header bv[] = {{S("A"), S("v\r\nX: y")}};
    assert_int_equal(
        sq_nats_encode_hpub(buf, sizeof(buf), S("a"), (struct sq_str){0}, bv, 1, "", 0), -EINVAL);

    /* What the encoders write, the parser reads back (as the server would echo it). */
    int n = sq_nats_encode_hpub(buf, sizeof(buf), S("s"), S("r"), h, 2, "abc", 3);
    assert_true(n > 0);
    char msg[600];
    int m = snprintf(msg, sizeof(msg), "HMSG s 9 r%.*s", n - 8, buf + 8);
    struct sq_nats_event ev;
    assert_int_equal(sq_nats_parse(msg, (size_t)m, NULL, &ev, NULL), m);
    assert_int_equal(ev.payload.len, 3);
    struct sq_str v;
    assert_true(sq_nats_header_get(ev.headers, S("nats-msg-id"), &v));
    assert_memory_equal(v.p, "m1", 2);
}

/* The subject check, eight bytes at a time and in the tail, at every position. */
static void test_subject_check(void **state)
{
    (void)state;
    static const unsigned char bad[] = {' ', '\t', '\r', '\n', 0x00, 0x01, 0x1f, 0x20, 0x7f};
    static const unsigned char good[] = {'!', '.', '>', '*', 0x80, 0xc3, 0xfe, 0xff, '~', 0x21};
    char s[21];
    for (size_t len = 1; len <= 20; len++) {
        for (size_t pos = 0; pos < len; pos++) {
            for (size_t b = 0; b < sizeof(bad); b++) {
                memset(s, 'a', len);
                s[pos] = (char)bad[b];
                CHECK(!sq_nats_subject_ok((struct sq_str){s, len}), "len %zu pos %zu byte %02x\n",
                      len, pos, bad[b]);
            }
            for (size_t g = 0; g < sizeof(good); g++) {
                memset(s, 'a', len);
                s[pos] = (char)good[g];
                CHECK(sq_nats_subject_ok((struct sq_str){s, len}), "len %zu pos %zu byte %02x\n",
                      len, pos, good[g]);
            }
        }
    }
    assert_false(sq_nats_subject_ok((struct sq_str){"", 0}));
}

/* Many PUBs into one buffer, as the load path writes them. */
static void test_pub_batch(void **state)
{
    (void)state;
    char payload[64];
    memset(payload, 'x', sizeof(payload));
    static char buf[1000 * 96];
    size_t off = 0;
    uint64_t before = n_allocs;
    for (int i = 0; i < 1000; i++) {
        int n = sq_nats_encode_pub(buf + off, sizeof(buf) - off, S("bench.orders"),
                                   (struct sq_str){0}, payload, sizeof(payload));
        assert_true(n > 0);
        off += (size_t)n;
    }
    assert_int_equal(n_allocs, before);
    assert_int_equal(off, 1000 * (strlen("PUB bench.orders 64\r\n") + 64 + 2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table),   cmocka_unit_test(test_binary_payload),
        cmocka_unit_test(test_stream_splits), cmocka_unit_test(test_headers),
        cmocka_unit_test(test_info),          cmocka_unit_test(test_json),
        cmocka_unit_test(test_puback),        cmocka_unit_test(test_encoders),
        cmocka_unit_test(test_pub_batch),     cmocka_unit_test(test_subject_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
