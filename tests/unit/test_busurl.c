/* test_busurl.c - bus URL schemes: nats:// and tls:// (NATS), mqtt://, mqtts://, mqtt+ws:// and
 * mqtt+wss:// (MQTT), their default ports and TLS flag, table-driven; the WebSocket path and
 * ?topic=. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "proto/busurl.h"

static const struct {
    const char *in;
    enum sq_bus_kind kind;
    unsigned port;
    bool tls;
} good[] = {
    {"nats://h/a", SQ_BUS_NATS, 4222, false},
    {"tls://h/a", SQ_BUS_NATS, 4222, true},
    {"TLS://h:4443/a", SQ_BUS_NATS, 4443, true},
    {"mqtt://h/a", SQ_BUS_MQTT, 1883, false},
    {"mqtts://h/a/b", SQ_BUS_MQTT, 8883, true},
    {"MQTTS://u:p@[::1]:9/a", SQ_BUS_MQTT, 9, true},
    {"mqtt+ws://h/mqtt?topic=a", SQ_BUS_MQTT, 80, false},
    {"MQTT+WSS://u:p@h:9/x?topic=a/b", SQ_BUS_MQTT, 9, true},
};

static void schemes_ports_and_tls(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct sq_bus_url u;
        const char *why = NULL;
        assert_int_equal(sq_bus_url_parse(good[i].in, SQ_BUS_URL_TARGET, &u, &why), 0);
        assert_true(sq_bus_url_is_bus(good[i].in));
        assert_int_equal(u.kind, good[i].kind);
        assert_int_equal(u.port, good[i].port);
        assert_int_equal(u.tls, good[i].tls);
        sq_bus_url_dispose(&u);
    }
}

static void other_schemes_are_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {"nats+tls://h/a", "mqtt+ssl://h/a", "ssl://h/a",
                                      "tlsx://h/a",     "https://h/a",    "tls:/h/a"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct sq_bus_url u;
        const char *why = NULL;
        assert_false(sq_bus_url_is_bus(bad[i]));
        assert_int_equal(sq_bus_url_parse(bad[i], SQ_BUS_URL_TARGET, &u, &why), -SQ_EPARSE);
        assert_non_null(why);
        sq_bus_url_dispose(&u);
    }
    struct sq_bus_url u;
    const char *why = NULL;
    /* an IPv6 literal longer than the host buffer: refused, not copied past it (fuzz_busurl) */
    char v6[400] = "mqtts://[";
    memset(v6 + 9, 'f', 300);
    strcpy(v6 + 309, "]/a");
    assert_int_equal(sq_bus_url_parse(v6, 0, &u, &why), -SQ_EPARSE);
    assert_string_equal(why, "the IPv6 address is too long");
    sq_bus_url_dispose(&u);
    assert_int_equal(sq_bus_url_parse("amqp://h/a", 0, &u, &why), -SQ_EPARSE);
    assert_string_equal(why,
                        "unsupported scheme 'amqp' (nats, tls, mqtt, mqtts, mqtt+ws or mqtt+wss)");
    sq_bus_url_dispose(&u);
}

/* MQTT over WebSocket: the path is the WebSocket request's (default /mqtt), the topic ?topic=. */
static void websocket_path_and_topic(void **state)
{
    (void)state;
    static const struct {
        const char *in, *path, *topic;
    } ok[] = {
        {"mqtt+ws://h:8080/mqtt?topic=a/b", "/mqtt", "a/b"},
        {"mqtt+ws://h?topic=t", "/mqtt", "t"},
        {"mqtt+ws://h/?topic=t", "/mqtt", "t"},
        {"mqtt+wss://h/ws/v1?topic=%23x", "/ws/v1", "#x"},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct sq_bus_url u;
        const char *why = NULL;
        assert_int_equal(sq_bus_url_parse(ok[i].in, 0, &u, &why), i == 3 ? -SQ_EPARSE : 0);
        if (i != 3) {
            assert_string_equal(u.ws_path, ok[i].path);
            assert_string_equal(u.target, ok[i].topic);
        }
        sq_bus_url_dispose(&u);
    }
    struct sq_bus_url u;
    const char *why = NULL;
    assert_int_equal(sq_bus_url_parse("mqtt+ws://h/mqtt", SQ_BUS_URL_TARGET, &u, &why), -SQ_EPARSE);
    assert_string_equal(why, "no topic: mqtt+ws://HOST[:PORT][/PATH]?topic=TOPIC");
    sq_bus_url_dispose(&u);
    assert_int_equal(sq_bus_url_parse("mqtt+ws://h/a b?topic=t", 0, &u, &why), -SQ_EPARSE);
    sq_bus_url_dispose(&u);
    assert_int_equal(sq_bus_url_parse("mqtt://h/t", 0, &u, &why), 0);
    assert_null(u.ws_path); /* plain MQTT: no WebSocket */
    sq_bus_url_dispose(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schemes_ports_and_tls),
        cmocka_unit_test(other_schemes_are_refused),
        cmocka_unit_test(websocket_path_and_topic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
