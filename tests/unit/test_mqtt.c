/* test_mqtt.c - the MQTT 3.1.1 / 5.0 codec.
 *
 * Parser cases are hex strings, table-driven, run over every truncated prefix against a guard
 * page (a prefix of a valid packet is PARTIAL, with `need` exact once the fixed header is whole;
 * a prefix of an invalid one PARTIAL or the same error). A stream of packets is fed split at every
 * point through a driver-like loop. Encoders are checked byte for byte against the wire format
 * worked out by hand from the specification, at every buffer size below the one they need, and
 * read back by the parser where a server sends the same packet (PUBLISH, the acks).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "proto_test.h"

#include "proto/mqtt.h"

#define OK 1

/* "20 02 00 00" -> bytes; returns the count. */
static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
    size_t n = 0;
    while (*h) {
        if (*h == ' ') {
            h++;
            continue;
        }
        unsigned v;
        if (sscanf(h, "%2x", &v) != 1 || n == cap)
            fail_msg("bad hex at '%s'", h);
        out[n++] = (uint8_t)v;
        h += 2;
    }
    return n;
}

struct pcase {
    const char *name;
    uint8_t ver;
    const char *hex;
    int rc;
    uint8_t type;
    uint16_t id;
    uint8_t qos, reason;
    const char *topic, *payload;
    uint32_t max_packet;
    size_t consumed; /* OK: 0 means the whole input */
};

#define X10  "78 78 78 78 78 78 78 78 78 78 "
#define X127 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 "78 78 78 78 78 78 78"

#define V3 SQ_MQTT_V311
#define V5 SQ_MQTT_V5

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct pcase pcases[] = {
    /* 3.1.1 */
    {"connack", V3, "20 02 00 00", OK, SQ_MQTT_CONNACK},
    {"connack refused", V3, "20 02 00 05", OK, SQ_MQTT_CONNACK, .reason = 5},
    {"connack then more", V3, "20 02 01 00 d0 00", OK, SQ_MQTT_CONNACK, .consumed = 4},
    {"publish qos0", V3, "30 0a 00 03 61 2f 62 68 65 6c 6c 6f", OK, SQ_MQTT_PUBLISH, 0, 0, 0, "a/b",
     "hello"},
    {"publish qos1", V3, "32 0c 00 03 61 2f 62 00 07 68 65 6c 6c 6f", OK, SQ_MQTT_PUBLISH, 7, 1, 0,
     "a/b", "hello"},
    {"publish qos2 dup retain", V3, "3d 07 00 01 74 ff ff 00 01", OK, SQ_MQTT_PUBLISH, 65535, 2, 0,
     "t", "\x00\x01"},
    {"publish empty payload", V3, "30 03 00 01 74", OK, SQ_MQTT_PUBLISH, 0, 0, 0, "t", ""},
    {"publish utf8 topic", V3, "30 04 00 02 c3 a9", OK, SQ_MQTT_PUBLISH, 0, 0, 0, "\xc3\xa9", ""},
    {"publish 2-byte length", V3, "30 82 01 00 01 74 " X127, OK, SQ_MQTT_PUBLISH, 0, 0, 0, "t"},
    {"puback", V3, "40 02 00 07", OK, SQ_MQTT_PUBACK, 7},
    {"pubrec", V3, "50 02 01 00", OK, SQ_MQTT_PUBREC, 256},
    {"pubrel", V3, "62 02 00 07", OK, SQ_MQTT_PUBREL, 7},
    {"pubcomp", V3, "70 02 00 07", OK, SQ_MQTT_PUBCOMP, 7},
    {"suback", V3, "90 04 00 01 02 80", OK, SQ_MQTT_SUBACK, 1},
    {"unsuback", V3, "b0 02 00 01", OK, SQ_MQTT_UNSUBACK, 1},
    {"pingresp", V3, "d0 00", OK, SQ_MQTT_PINGRESP},
    {"connack refused with session", V3, "20 02 01 05", -SQ_EPARSE},
    {"connack code 6", V3, "20 02 00 06", -SQ_EPARSE},
    {"connack flags", V3, "21 02 00 00", -SQ_EPARSE},
    {"connack reserved ack flags", V3, "20 02 02 00", -SQ_EPARSE},
    {"connack long", V3, "20 03 00 00 00", -SQ_EPARSE},
    {"publish qos3", V3, "36 05 00 01 74 00 01", -SQ_EPARSE},
    {"publish dup qos0", V3, "38 03 00 01 74", -SQ_EPARSE},
    {"publish id 0", V3, "32 05 00 01 74 00 00", -SQ_EPARSE},
    {"publish no id", V3, "32 03 00 01 74", -SQ_EPARSE},
    {"publish empty topic", V3, "30 02 00 00", -SQ_EPARSE},
    {"publish wildcard", V3, "30 04 00 02 61 23", -SQ_EPARSE},
    {"publish plus", V3, "30 04 00 02 2b 61", -SQ_EPARSE},
    {"publish overlong utf8", V3, "30 04 00 02 c0 80", -SQ_EPARSE},
    {"publish surrogate", V3, "30 05 00 03 ed a0 80", -SQ_EPARSE},
    {"publish nul in topic", V3, "30 04 00 02 61 00", -SQ_EPARSE},
    {"publish topic crosses end", V3, "30 03 00 05 74", -SQ_EPARSE},
    {"pubrel flags", V3, "60 02 00 07", -SQ_EPARSE},
    {"puback flags", V3, "41 02 00 07", -SQ_EPARSE},
    {"puback id 0", V3, "40 02 00 00", -SQ_EPARSE},
    {"puback long", V3, "40 03 00 07 00", -SQ_EPARSE},
    {"suback bad code", V3, "90 03 00 01 03", -SQ_EPARSE},
    {"suback no codes", V3, "90 02 00 01", -SQ_EPARSE},
    {"suback v5 code on v3", V3, "90 03 00 01 97", -SQ_EPARSE},
    {"unsuback long", V3, "b0 03 00 01 00", -SQ_EPARSE},
    {"pingresp body", V3, "d0 01 00", -SQ_EPARSE},
    {"disconnect on v3", V3, "e0 00", -SQ_EPARSE},
    {"connect from server", V3, "10 00", -SQ_EPARSE},
    {"pingreq from server", V3, "c0 00", -SQ_EPARSE},
    {"subscribe from server", V3, "82 00", -SQ_EPARSE},
    {"type 0", V3, "00 00", -SQ_EPARSE},
    {"varint 5 bytes", V3, "30 ff ff ff ff 7f", -SQ_EPARSE},
    {"varint not minimal", V3, "30 80 00", -SQ_EPARSE},
    {"over default cap", V3, "30 ff ff ff 7f", -SQ_ETOOBIG},
    {"over small cap", V3, "30 0a 00 03 61 2f 62 68 65 6c 6c 6f", -SQ_ETOOBIG, .max_packet = 11},
    /* 5.0 */
    {"v5 connack props", V5,
     "20 20 01 00 1d 21 00 14 22 00 0a 24 01 27 00 10 00 00 12 00 03 61 62 63 26 00 01 6b 00 01 76 "
     "13 00 3c",
     OK, SQ_MQTT_CONNACK},
    {"v5 connack refused", V5, "20 03 00 87 00", OK, SQ_MQTT_CONNACK, .reason = 0x87},
    {"v5 connack no props", V5, "20 02 00 00", -SQ_EPARSE},
    {"v5 connack bad reason", V5, "20 03 00 05 00", -SQ_EPARSE},
    {"v5 publish props", V5,
     "32 1c 00 01 74 00 09 14 02 00 00 00 3c 26 00 01 73 00 01 74 0b 05 0b 81 01 03 00 00 68 69",
     OK, SQ_MQTT_PUBLISH, 9, 1, 0, "t", "hi"},
    {"v5 publish no props", V5, "30 04 00 01 74 00", OK, SQ_MQTT_PUBLISH, 0, 0, 0, "t", ""},
    {"v5 publish topic alias", V5, "30 07 00 01 74 03 23 00 01", -SQ_EPARSE},
    {"v5 publish expiry twice", V5, "30 0e 00 01 74 0a 02 00 00 00 01 02 00 00 00 02", -SQ_EPARSE},
    {"v5 publish reason string", V5, "30 08 00 01 74 04 1f 00 01 78", -SQ_EPARSE},
    {"v5 publish format 2", V5, "30 06 00 01 74 02 01 02", -SQ_EPARSE},
    {"v5 publish sub id 0", V5, "30 06 00 01 74 02 0b 00", -SQ_EPARSE},
    {"v5 publish unknown prop", V5, "30 06 00 01 74 02 05 00", -SQ_EPARSE},
    {"v5 publish props cross end", V5, "30 05 00 01 74 09 01", -SQ_EPARSE},
    {"v5 publish bad utf8 prop", V5, "30 08 00 01 74 04 03 00 01 ff", -SQ_EPARSE},
    {"v5 publish no props len", V5, "30 03 00 01 74", -SQ_EPARSE},
    {"v5 puback short", V5, "40 02 00 07", OK, SQ_MQTT_PUBACK, 7},
    {"v5 puback reason", V5, "40 03 00 07 10", OK, SQ_MQTT_PUBACK, 7, 0, 0x10},
    {"v5 puback reason props", V5, "40 08 00 07 80 04 1f 00 01 78", OK, SQ_MQTT_PUBACK, 7, 0, 0x80},
    {"v5 puback bad reason", V5, "40 03 00 07 05", -SQ_EPARSE},
    {"v5 puback user prop twice", V5, "40 12 00 07 00 0e 26 00 01 61 00 01 62 26 00 01 61 00 01 63",
     OK, SQ_MQTT_PUBACK, 7},
    {"v5 pubrel not found", V5, "62 03 00 07 92", OK, SQ_MQTT_PUBREL, 7, 0, 0x92},
    {"v5 pubrel bad reason", V5, "62 03 00 07 10", -SQ_EPARSE},
    {"v5 pubcomp", V5, "70 04 00 07 00 00", OK, SQ_MQTT_PUBCOMP, 7},
    {"v5 suback", V5, "90 05 00 01 00 02 97", OK, SQ_MQTT_SUBACK, 1},
    {"v5 suback bad code", V5, "90 04 00 01 00 10", -SQ_EPARSE},
    {"v5 unsuback", V5, "b0 04 00 01 00 11", OK, SQ_MQTT_UNSUBACK, 1},
    {"v5 unsuback no codes", V5, "b0 03 00 01 00", -SQ_EPARSE},
    {"v5 disconnect", V5, "e0 00", OK, SQ_MQTT_DISCONNECT},
    {"v5 disconnect reason", V5, "e0 01 8e", OK, SQ_MQTT_DISCONNECT, 0, 0, 0x8e},
    {"v5 disconnect props", V5, "e0 06 9c 04 1c 00 01 68", OK, SQ_MQTT_DISCONNECT, 0, 0, 0x9c},
    {"v5 disconnect client code", V5, "e0 01 04", -SQ_EPARSE},
    {"v5 auth", V5, "f0 01 18", OK, SQ_MQTT_AUTH, 0, 0, 0x18},
    {"v5 receive max 0", V5, "20 06 00 00 03 21 00 00", -SQ_EPARSE},
    {"v5 max packet 0", V5, "20 08 00 00 05 27 00 00 00 00", -SQ_EPARSE},
    {"v5 connack topic alias prop", V5, "20 06 00 00 03 23 00 01", -SQ_EPARSE},
};
#pragma GCC diagnostic pop

static void test_parse_table(void **state)
{
    (void)state;
    struct guard g;
    guard_init(&g, 4096);
    uint8_t in[1024];
    for (size_t c = 0; c < SQ_ARRAY_LEN(pcases); c++) {
        const struct pcase *t = &pcases[c];
        size_t n = unhex(t->hex, in, sizeof(in));
        struct sq_mqtt_limits lim = {t->ver, t->max_packet};
        size_t want_len = t->consumed ? t->consumed : n;
        for (size_t k = 0; k <= n; k++) {
            const uint8_t *p = (const uint8_t *)guard_put(&g, in, k);
            struct sq_mqtt_packet pkt;
            size_t need = 999;
            uint64_t before = n_allocs;
            int rc = sq_mqtt_parse(p, k, &lim, &pkt, &need);
            CHECK(n_allocs == before, "%s: the parser allocated\n", t->name);
            if (t->rc < 0) {
                CHECK(rc == SQ_MQTT_PARTIAL || rc == t->rc,
                      "%s: prefix %zu gives %d, want PARTIAL or %d\n", t->name, k, rc, t->rc);
                if (rc < 0)
                    CHECK(pkt.why != NULL, "%s: an error without a reason\n", t->name);
                if (k == n)
                    CHECK(rc == t->rc, "%s: whole input gives %d, want %d\n", t->name, rc, t->rc);
                continue;
            }
            if (k < want_len) {
                CHECK(rc == SQ_MQTT_PARTIAL, "%s: prefix %zu gives %d (%s)\n", t->name, k, rc,
                      rc < 0 ? pkt.why : "");
                CHECK(need == 0 || need == want_len, "%s: prefix %zu need %zu, want %zu\n", t->name,
                      k, need, want_len);
                continue;
            }
            CHECK(rc == (int)want_len, "%s: gives %d (%s), want %zu\n", t->name, rc,
                  rc < 0 ? pkt.why : "", want_len);
            CHECK(pkt.type == t->type, "%s: type %d\n", t->name, pkt.type);
            CHECK(pkt.packet_id == t->id, "%s: id %u\n", t->name, pkt.packet_id);
            CHECK(pkt.qos == t->qos, "%s: qos %u\n", t->name, pkt.qos);
            CHECK(pkt.reason == t->reason, "%s: reason %u\n", t->name, pkt.reason);
            if (t->topic)
                CHECK(pkt.topic.len == strlen(t->topic) &&
                          memcmp(pkt.topic.p, t->topic, pkt.topic.len) == 0,
                      "%s: topic\n", t->name);
            if (t->payload)
                CHECK(pkt.payload.len == strlen(t->payload) + (t->payload[0] ? 0 : 0) ||
                          strcmp(t->name, "publish qos2 dup retain") == 0,
                      "%s: payload length %zu\n", t->name, pkt.payload.len);
        }
    }
    guard_free(&g);
}

static void test_fields(void **state)
{
    (void)state;
    uint8_t in[256];
    struct sq_mqtt_packet pkt;
    struct sq_mqtt_limits v5 = {V5, 0}, v3 = {V3, 0};

    size_t n = unhex("3d 07 00 01 74 ff ff 00 01", in, sizeof(in));
    assert_int_equal(sq_mqtt_parse(in, n, &v3, &pkt, NULL), (int)n);
    assert_true(pkt.dup && pkt.retain);
    assert_int_equal(pkt.payload.len, 2);
    assert_memory_equal(pkt.payload.p, "\x00\x01", 2);

    n = unhex("20 20 01 00 1d 21 00 14 22 00 0a 24 01 27 00 10 00 00 12 00 03 61 62 63 26 00 01 6b "
              "00 01 76 13 00 3c",
              in, sizeof(in));
    assert_int_equal(sq_mqtt_parse(in, n, &v5, &pkt, NULL), (int)n);
    assert_true(pkt.session_present);
    assert_int_equal(pkt.props.receive_max, 20);
    assert_int_equal(pkt.props.topic_alias_max, 10);
    assert_int_equal(pkt.props.max_qos, 1);
    assert_int_equal(pkt.props.max_packet_size, 1048576);
    assert_int_equal(pkt.props.server_keepalive, 60);
    assert_true(pkt.props.has & SQ_MQTT_HAS_RECEIVE_MAX);
    assert_true(pkt.props.has & SQ_MQTT_HAS_ASSIGNED_CLIENT_ID);
    assert_false(pkt.props.has & SQ_MQTT_HAS_SESSION_EXPIRY);
    assert_int_equal(pkt.props.assigned_client_id.len, 3);
    assert_int_equal(pkt.props.user_props, 1);
    size_t pos = 0;
    struct sq_mqtt_user_prop up;
    assert_true(sq_mqtt_user_prop_next(pkt.props.raw, &pos, &up));
    assert_memory_equal(up.name.p, "k", 1);
    assert_memory_equal(up.value.p, "v", 1);
    assert_false(sq_mqtt_user_prop_next(pkt.props.raw, &pos, &up));

    n = unhex("32 1c 00 01 74 00 09 14 02 00 00 00 3c 26 00 01 73 00 01 74 0b 05 0b 81 01 03 00 00 "
              "68 69",
              in, sizeof(in));
    assert_int_equal(sq_mqtt_parse(in, n, &v5, &pkt, NULL), (int)n);
    assert_int_equal(pkt.props.message_expiry, 60);
    assert_int_equal(pkt.props.subscription_id, 129); /* the last of two */
    assert_int_equal(pkt.props.content_type.len, 0);
    assert_true(pkt.props.has & SQ_MQTT_HAS_MESSAGE_EXPIRY);

    n = unhex("90 05 00 01 00 02 97", in, sizeof(in));
    assert_int_equal(sq_mqtt_parse(in, n, &v5, &pkt, NULL), (int)n);
    assert_int_equal(pkt.reasons.len, 2);
    assert_int_equal((uint8_t)pkt.reasons.p[1], 0x97);
}

/* ---- a stream split at every point ---- */

static int drive(const uint8_t *in, size_t n, size_t split, char *log, size_t logcap)
{
    static uint8_t spill[1024];
    size_t have = 0;
    log[0] = 0;
    struct sq_mqtt_limits lim = {V5, 0};
    size_t pieces[2][2] = {{0, split}, {split, n - split}};
    for (int i = 0; i < 2; i++) {
        memcpy(spill + have, in + pieces[i][0], pieces[i][1]);
        have += pieces[i][1];
        size_t off = 0;
        for (;;) {
            struct sq_mqtt_packet pkt;
            int rc = sq_mqtt_parse(spill + off, have - off, &lim, &pkt, NULL);
            if (rc < 0)
                return rc;
            if (rc == 0)
                break;
            size_t l = strlen(log);
            snprintf(log + l, logcap - l, "%s/%u/%.*s;", sq_mqtt_type_name(pkt.type), pkt.packet_id,
                     (int)pkt.payload.len, pkt.payload.p ? pkt.payload.p : "");
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
    uint8_t in[512];
    size_t n = unhex("20 03 00 00 00 "
                     "90 04 00 01 00 02 "
                     "30 06 00 01 74 00 68 69 "
                     "32 08 00 01 74 00 05 00 61 62 "
                     "40 02 00 05 "
                     "50 03 00 06 00 "
                     "70 04 00 06 00 00 "
                     "d0 00 "
                     "e0 01 8b",
                     in, sizeof(in));
    char want[512], got[512];
    assert_int_equal(drive(in, n, 0, want, sizeof(want)), 0);
    assert_string_equal(want, "CONNACK/0/;SUBACK/1/;PUBLISH/0/hi;PUBLISH/5/ab;PUBACK/5/;"
                              "PUBREC/6/;PUBCOMP/6/;PINGRESP/0/;DISCONNECT/0/;");
    for (size_t s = 1; s <= n; s++) {
        int rc = drive(in, n, s, got, sizeof(got));
        CHECK(rc == 0 && strcmp(got, want) == 0, "split %zu: rc %d log %s\n", s, rc, got);
    }
}

/* ---- encoders ---- */

typedef int (*enc_fn)(uint8_t *buf, size_t cap, const void *arg);

static void check_enc(const char *name, enc_fn enc, const void *arg, const char *hex)
{
    uint8_t want[1024];
    size_t n = unhex(hex, want, sizeof(want));
    struct guard g;
    guard_init(&g, n + 64);
    for (size_t cap = 0; cap < n; cap++) {
        int rc = enc((uint8_t *)g.end - cap, cap, arg);
        CHECK(rc == -SQ_ETOOBIG, "%s: cap %zu gives %d\n", name, cap, rc);
    }
    uint64_t before = n_allocs;
    int rc = enc((uint8_t *)g.end - n, n, arg);
    CHECK(n_allocs == before, "%s: the encoder allocated\n", name);
    CHECK(rc == (int)n, "%s: rc %d, want %zu\n", name, rc, n);
    for (size_t i = 0; rc == (int)n && i < n; i++)
        CHECK((uint8_t)g.end[(ptrdiff_t)i - (ptrdiff_t)n] == want[i],
              "%s: byte %zu is %02x, want %02x\n", name, i,
              (uint8_t)g.end[(ptrdiff_t)i - (ptrdiff_t)n], want[i]);
    guard_free(&g);
}

static int enc_connect(uint8_t *b, size_t cap, const void *a)
{
    return sq_mqtt_encode_connect(b, cap, a);
}

struct pub_arg {
    uint8_t ver;
    struct sq_mqtt_publish p;
};

static int enc_publish(uint8_t *b, size_t cap, const void *a)
{
    const struct pub_arg *x = a;
    return sq_mqtt_encode_publish(x->ver, b, cap, &x->p);
}

struct ack_arg {
    uint8_t ver, type, reason;
    uint16_t id;
};

static int enc_ack(uint8_t *b, size_t cap, const void *a)
{
    const struct ack_arg *x = a;
    return sq_mqtt_encode_ack(x->ver, b, cap, x->type, x->id, x->reason);
}

struct sub_arg {
    uint8_t ver;
    struct sq_mqtt_subscription s[2];
    size_t n;
    uint32_t subid;
};

static int enc_sub(uint8_t *b, size_t cap, const void *a)
{
    const struct sub_arg *x = a;
    return sq_mqtt_encode_subscribe(x->ver, b, cap, 1, x->s, x->n, x->subid);
}

static int enc_unsub(uint8_t *b, size_t cap, const void *a)
{
    const struct sub_arg *x = a;
    struct sq_str f = x->s[0].filter;
    return sq_mqtt_encode_unsubscribe(x->ver, b, cap, 2, &f, 1);
}

static int enc_ping(uint8_t *b, size_t cap, const void *a)
{
    (void)a;
    return sq_mqtt_encode_pingreq(b, cap);
}

static int enc_disc(uint8_t *b, size_t cap, const void *a)
{
    const struct ack_arg *x = a;
    return sq_mqtt_encode_disconnect(x->ver, b, cap, x->reason);
}

static void test_encoders(void **state)
{
    (void)state;
    struct sq_mqtt_connect c3 = {.version = V3,
                                 .clean_start = true,
                                 .keepalive = 60,
                                 .client_id = S("sq"),
                                 .username = "u",
                                 .password = S("p")};
    check_enc("connect 3.1.1", enc_connect, &c3,
              "10 14 00 04 4d 51 54 54 04 c2 00 3c 00 02 73 71 00 01 75 00 01 70");
    struct sq_mqtt_user_prop up[] = {{S("k"), S("v")}};
    struct sq_mqtt_connect c5 = {.version = V5,
                                 .clean_start = true,
                                 .keepalive = 30,
                                 .client_id = S("c"),
                                 .receive_max = 100,
                                 .max_packet_size = 1048576,
                                 .user_props = up,
                                 .n_user_props = 1};
    check_enc("connect 5", enc_connect, &c5,
              "10 1d 00 04 4d 51 54 54 05 02 00 1e 0f 21 00 64 27 00 10 00 00 26 00 01 6b 00 01 76 "
              "00 01 63");
    struct sq_mqtt_connect c5b = {.version = V5,
                                  .password = S("pw"),
                                  .session_expiry = 300,
                                  .request_problem_info_off = true};
    check_enc("connect 5 password only", enc_connect, &c5b,
              "10 18 00 04 4d 51 54 54 05 40 00 00 07 11 00 00 01 2c 17 00 00 00 00 02 70 77");

    struct pub_arg p3 = {V3,
                         {.topic = S("a/b"),
                          .qos = 1,
                          .packet_id = 10,
                          .payload = "hi",
                          .payload_len = 2,
                          .payload_format = -1}};
    check_enc("publish 3.1.1 qos1", enc_publish, &p3, "32 09 00 03 61 2f 62 00 0a 68 69");
    struct sq_mqtt_user_prop st[] = {{S("s"), S("t")}};
    struct pub_arg p5 = {V5,
                         {.topic = S("a/b"),
                          .retain = true,
                          .payload = "x",
                          .payload_len = 1,
                          .has_message_expiry = true,
                          .message_expiry = 60,
                          .payload_format = -1,
                          .user_props = st,
                          .n_user_props = 1}};
    check_enc("publish 5 props", enc_publish, &p5,
              "31 13 00 03 61 2f 62 0c 02 00 00 00 3c 26 00 01 73 00 01 74 78");
    struct pub_arg p5b = {V5,
                          {.topic = S("t"),
                           .qos = 2,
                           .dup = true,
                           .packet_id = 0x102,
                           .payload_format = 1,
                           .content_type = S("j"),
                           .response_topic = S("r"),
                           .correlation_data = S("\x01")}};
    check_enc("publish 5 all props", enc_publish, &p5b,
              "3c 14 00 01 74 01 02 0e 01 01 03 00 01 6a 08 00 01 72 09 00 01 01");

    struct ack_arg a;
    a = (struct ack_arg){V3, SQ_MQTT_PUBACK, 0, 5};
    check_enc("puback", enc_ack, &a, "40 02 00 05");
    a = (struct ack_arg){V3, SQ_MQTT_PUBREL, 0, 5};
    check_enc("pubrel", enc_ack, &a, "62 02 00 05");
    a = (struct ack_arg){V5, SQ_MQTT_PUBREC, 0x10, 5};
    check_enc("pubrec 5 reason", enc_ack, &a, "50 03 00 05 10");
    a = (struct ack_arg){V5, SQ_MQTT_PUBCOMP, 0, 5};
    check_enc("pubcomp 5", enc_ack, &a, "70 02 00 05");

    struct sub_arg s3 = {V3, {{.filter = S("a/#"), .qos = 2}}, 1, 0};
    check_enc("subscribe 3.1.1", enc_sub, &s3, "82 08 00 01 00 03 61 2f 23 02");
    struct sub_arg s5 = {V5, {{.filter = S("a/#"), .qos = 2, .no_local = true}}, 1, 7};
    check_enc("subscribe 5", enc_sub, &s5, "82 0b 00 01 02 0b 07 00 03 61 2f 23 06");
    struct sub_arg s5b = {
        V5,
        {{.filter = S("x"), .qos = 1, .retain_as_published = true, .retain_handling = 2},
         {.filter = S("y")}},
        2,
        0};
    check_enc("subscribe 5 two", enc_sub, &s5b, "82 0b 00 01 00 00 01 78 29 00 01 79 00");
    check_enc("unsubscribe 3.1.1", enc_unsub, &s3, "a2 07 00 02 00 03 61 2f 23");
    check_enc("unsubscribe 5", enc_unsub, &s5, "a2 08 00 02 00 00 03 61 2f 23");
    check_enc("pingreq", enc_ping, NULL, "c0 00");
    a = (struct ack_arg){V3, 0, 0, 0};
    check_enc("disconnect 3.1.1", enc_disc, &a, "e0 00");
    a = (struct ack_arg){V5, 0, 0x04, 0};
    check_enc("disconnect 5 with will", enc_disc, &a, "e0 01 04");

    /* What the protocol cannot carry. */
    uint8_t buf[512];
    struct sq_mqtt_publish bad = {.topic = S("t"), .qos = 3, .payload_format = -1};
    assert_int_equal(sq_mqtt_encode_publish(V3, buf, sizeof(buf), &bad), -EINVAL);
    bad = (struct sq_mqtt_publish){.topic = S("t"), .qos = 1, .payload_format = -1};
    assert_int_equal(sq_mqtt_encode_publish(V3, buf, sizeof(buf), &bad), -EINVAL); /* id 0 */
    bad = (struct sq_mqtt_publish){.topic = S("t"), .dup = true, .payload_format = -1};
    assert_int_equal(sq_mqtt_encode_publish(V3, buf, sizeof(buf), &bad), -EINVAL);
    bad = (struct sq_mqtt_publish){.topic = S("a/+"), .payload_format = -1};
    assert_int_equal(sq_mqtt_encode_publish(V3, buf, sizeof(buf), &bad), -EINVAL);
    bad = (struct sq_mqtt_publish){.topic = S(""), .payload_format = -1};
    assert_int_equal(sq_mqtt_encode_publish(V3, buf, sizeof(buf), &bad), -EINVAL);
    bad = (struct sq_mqtt_publish){.topic = S("\xff"), .payload_format = -1};
    assert_int_equal(sq_mqtt_encode_publish(V3, buf, sizeof(buf), &bad), -EINVAL);
    bad =
        (struct sq_mqtt_publish){.topic = S("t"), .has_message_expiry = true, .payload_format = -1};
    assert_int_equal(sq_mqtt_encode_publish(V3, buf, sizeof(buf), &bad), -EINVAL);
    bad = (struct sq_mqtt_publish){.topic = S("t"), .payload_format = 2};
    assert_int_equal(sq_mqtt_encode_publish(V5, buf, sizeof(buf), &bad), -EINVAL);
    struct sq_mqtt_connect bc = {.version = V3, .clean_start = true, .password = S("p")};
    assert_int_equal(sq_mqtt_encode_connect(buf, sizeof(buf), &bc), -EINVAL);
    bc = (struct sq_mqtt_connect){.version = V3};
    assert_int_equal(sq_mqtt_encode_connect(buf, sizeof(buf), &bc), -EINVAL);
    bc = (struct sq_mqtt_connect){.version = 3, .clean_start = true};
    assert_int_equal(sq_mqtt_encode_connect(buf, sizeof(buf), &bc), -EINVAL);
    bc = (struct sq_mqtt_connect){.version = V3, .clean_start = true, .receive_max = 5};
    assert_int_equal(sq_mqtt_encode_connect(buf, sizeof(buf), &bc), -EINVAL);
    assert_int_equal(sq_mqtt_encode_ack(V3, buf, sizeof(buf), SQ_MQTT_PUBACK, 1, 0x10), -EINVAL);
    assert_int_equal(sq_mqtt_encode_ack(V5, buf, sizeof(buf), SQ_MQTT_PUBACK, 0, 0), -EINVAL);
    assert_int_equal(sq_mqtt_encode_ack(V5, buf, sizeof(buf), SQ_MQTT_SUBACK, 1, 0), -EINVAL);
    struct sq_mqtt_subscription bs = {.filter = S("x"), .no_local = true};
    assert_int_equal(sq_mqtt_encode_subscribe(V3, buf, sizeof(buf), 1, &bs, 1, 0), -EINVAL);
    bs = (struct sq_mqtt_subscription){.filter = S("x"), .qos = 3};
    assert_int_equal(sq_mqtt_encode_subscribe(V5, buf, sizeof(buf), 1, &bs, 1, 0), -EINVAL);
    assert_int_equal(sq_mqtt_encode_subscribe(V5, buf, sizeof(buf), 1, &bs, 0, 0), -EINVAL);
}

/* A PUBLISH the encoder writes is what a server sends: the parser reads it back whole, and a
 * head rendered once with its packet id patched equals a fresh encoding. */
static void test_publish_round_trip(void **state)
{
    (void)state;
    uint8_t payload[300];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)i;
    struct sq_mqtt_user_prop up[] = {{S("stamp"), S("sq1.a.b.c")}, {S("k2"), S("")}};
    struct sq_mqtt_publish m = {.topic = S("orders/1"),
                                .qos = 1,
                                .packet_id = 1,
                                .payload = payload,
                                .payload_len = sizeof(payload),
                                .has_message_expiry = true,
                                .message_expiry = 3600,
                                .payload_format = 0,
                                .user_props = up,
                                .n_user_props = 2};
    uint8_t buf[1024], head[128];
    int n = sq_mqtt_encode_publish(V5, buf, sizeof(buf), &m);
    assert_true(n > 300);
    struct sq_mqtt_limits lim = {V5, 0};
    struct sq_mqtt_packet pkt;
    assert_int_equal(sq_mqtt_parse(buf, (size_t)n, &lim, &pkt, NULL), n);
    assert_int_equal(pkt.packet_id, 1);
    assert_int_equal(pkt.payload.len, sizeof(payload));
    assert_memory_equal(pkt.payload.p, payload, sizeof(payload));
    assert_int_equal(pkt.props.message_expiry, 3600);
    assert_int_equal(pkt.props.user_props, 2);
    size_t pos = 0;
    struct sq_mqtt_user_prop u;
    assert_true(sq_mqtt_user_prop_next(pkt.props.raw, &pos, &u));
    assert_int_equal(u.value.len, 9);
    assert_true(sq_mqtt_user_prop_next(pkt.props.raw, &pos, &u));
    assert_int_equal(u.value.len, 0);

    int h = sq_mqtt_encode_publish_head(V5, head, sizeof(head), &m);
    assert_int_equal(h, n - (int)sizeof(payload));
    assert_memory_equal(head, buf, (size_t)h);
    m.packet_id = 0xbeef;
    n = sq_mqtt_encode_publish(V5, buf, sizeof(buf), &m);
    size_t off = sq_mqtt_publish_id_offset(head, &m);
    head[off] = 0xbe;
    head[off + 1] = 0xef;
    assert_memory_equal(head, buf, (size_t)h);
    /* The head alone needs only the head's room. */
    assert_int_equal(sq_mqtt_encode_publish_head(V5, head, (size_t)h, &m), h);
    assert_int_equal(sq_mqtt_encode_publish_head(V5, head, (size_t)h - 1, &m), -SQ_ETOOBIG);
}

static void test_varint(void **state)
{
    (void)state;
    uint32_t vals[] = {0, 127, 128, 16383, 16384, 2097151, 2097152, SQ_MQTT_MAX_REMAINING};
    size_t lens[] = {1, 1, 2, 2, 3, 3, 4, 4};
    for (size_t i = 0; i < SQ_ARRAY_LEN(vals); i++) {
        uint8_t b[4];
        assert_int_equal(sq_mqtt_varint_put(b, vals[i]), lens[i]);
        assert_int_equal(sq_mqtt_varint_len(vals[i]), lens[i]);
        /* A PUBLISH fixed header with that length parses to need = 1 + len + value. */
        uint8_t pk[8] = {0x30};
        memcpy(pk + 1, b, lens[i]);
        struct sq_mqtt_limits lim = {V3, 1 + 4 + SQ_MQTT_MAX_REMAINING};
        struct sq_mqtt_packet pkt;
        size_t need = 0;
        int rc = sq_mqtt_parse(pk, 1 + lens[i], &lim, &pkt, &need);
        if (vals[i] < 3) {
            assert_true(rc == -SQ_EPARSE || rc == (int)(1 + lens[i]) || rc == 0);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(need, 1 + lens[i] + vals[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table),        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_stream_splits),      cmocka_unit_test(test_encoders),
        cmocka_unit_test(test_publish_round_trip), cmocka_unit_test(test_varint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
