/* tests/unit/test_beside.c - sink/beside.h, a sink beside a load run: a plan's sink: section as
 * options and its check (the place and the section's key in the message), the URL rules, and a
 * real HTTP sink on a loopback port told what was stamped: delivered, lost, the settle cut short
 * by the stop flag. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "plan/plan.h"
#include "proto/stamp.h"
#include "sink/beside.h"
#include "sink/sink.h"

#define RUN 0x5a5a5000ull /* low 12 bits zero: stream RUN + 0 */

static const char *const flow = "scenarios:\n"
                                "  a:\n"
                                "    executor: shared-iterations\n"
                                "    flow: [{request: {url: /}}]\n";

static struct sq_plan *load(const char *sink)
{
    char text[1024];
    snprintf(text, sizeof(text), "target: http://127.0.0.1:1\nsink:\n%s%s", sink, flow);
    struct sq_plan *p = NULL;
    struct sq_plan_error pe;
    memset(&pe, 0, sizeof(pe));
    int rc = sq_plan_load_text("s.yaml", text, strlen(text), NULL, &p, &pe);
    if (rc < 0) {
        char e[512];
        sq_plan_error_format(&pe, e, sizeof(e));
        fail_msg("%s", e);
    }
    return p;
}

static void test_plan_opts_and_check(void **state)
{
    (void)state;
    struct sq_plan *p = load("  http: 127.0.0.1:9\n  stamp: json:$.t\n  settle: 3s\n");
    struct sq_sink_beside_opts o;
    char http[64];
    sq_sink_beside_plan_opts(p, &o, http, sizeof(http));
    assert_int_equal(o.nurls, 1);
    assert_string_equal(o.urls[0], "http://127.0.0.1:9");
    assert_string_equal(o.stamp, "json:$.t");
    assert_int_equal(o.settle_ns, 3 * SQ_NS_PER_S);
    char err[512] = "";
    assert_int_equal(sq_sink_beside_plan_check(p, NULL, NULL, err, sizeof(err)), 0);
    sq_plan_free(p);

    p = load("  http: 127.0.0.1:9\n  stamp: 'xml:t'\n");
    assert_int_equal(sq_sink_beside_plan_check(p, "named.yaml", NULL, err, sizeof(err)),
                     -SQ_EPARSE);
    /* the place, and the section's key (not the sink's flag "--stamp") */
    assert_non_null(strstr(err, "named.yaml:3:3: sink: stamp: 'xml:t'"));
    assert_int_equal(sq_sink_beside_plan_check(p, NULL, NULL, err, sizeof(err)), -SQ_EPARSE);
    assert_non_null(strstr(err, "s.yaml:3:3: sink: stamp: "));
    sq_plan_free(p);
}

static void test_url_rules(void **state)
{
    (void)state;
    struct sq_sink *s = (struct sq_sink *)&s;
    bool sub = true;
    char err[512] = "";
    struct sq_sink_beside_opts o = {
        .urls = {"http://127.0.0.1:0", "http://127.0.0.1:0"}, .nurls = 2, .mqtt_qos = -1};
    assert_int_equal(sq_sink_beside_start(&o, RUN, NULL, &s, &sub, err, sizeof(err)), -SQ_EUSAGE);
    assert_null(s);
    assert_non_null(strstr(err, "one sink of each kind"));
    o = (struct sq_sink_beside_opts){.urls = {"http://127.0.0.1:9/"}, .nurls = 1, .mqtt_qos = -1};
    assert_int_equal(sq_sink_beside_start(&o, RUN, NULL, &s, &sub, err, sizeof(err)), -SQ_EUSAGE);
    assert_non_null(strstr(err, "'http://127.0.0.1:9/': http://HOST:PORT, without a path"));
    assert_null(
        sq_sink_beside_end(NULL, &(struct sq_sink_sent){RUN, NULL, 0, NULL, NULL}, NULL, NULL, 0));
}

/* One POST with a stamp (run RUN, sequence seq) in its JSON body, answered before returning. */
static void post(uint16_t port, uint64_t seq)
{
    char st[SQ_STAMP_MAX + 1];
    struct sq_stamp x = {.run = RUN, .seq = seq, .ns = sq_stamp_now_ns()};
    st[sq_stamp_format(&x, st)] = 0;
    char body[128], req[512];
    int bl = snprintf(body, sizeof(body), "{\"t\":\"%s\"}", st);
    int rl = snprintf(req, sizeof(req),
                      "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: "
                      "close\r\n\r\n%s",
                      bl, body);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(write(fd, req, (size_t)rl), rl);
    char buf[512];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    assert_true(n > 12);
    buf[n] = 0;
    assert_non_null(strstr(buf, " 202 "));
    close(fd);
}

static json_t *count(const char *settle, uint64_t sent, const uint64_t *skip, volatile int *stop)
{
    struct sq_sink_beside_opts o = {
        .urls = {"http://127.0.0.1:0"}, .nurls = 1, .stamp = "json:$.t", .mqtt_qos = -1};
    o.settle_ns = strcmp(settle, "60s") == 0 ? 60 * SQ_NS_PER_S : 200 * SQ_NS_PER_MS;
    struct sq_sink *s = NULL;
    bool sub = false;
    char err[512] = "";
    assert_int_equal(sq_sink_beside_start(&o, RUN, NULL, &s, &sub, err, sizeof(err)), 0);
    assert_true(sub); /* no bus source: nothing to wait for */
    uint16_t port = sq_sink_http_port(s);
    assert_true(port > 0);
    for (uint64_t i = 0; i < sent; i++)
        if (!skip || i != *skip)
            post(port, i);
    uint64_t stamped[1] = {sent};
    char why[256];
    json_t *j = sq_sink_beside_end(s, &(struct sq_sink_sent){RUN, stamped, 1, NULL, NULL}, stop,
                                   why, sizeof(why));
    assert_string_equal(why, ""); /* an HTTP sink alone never fails its run */
    return j;
}

static uint64_t num(const json_t *j, const char *k)
{
    const json_t *v = json_object_get(j, k);
    assert_true(json_is_integer(v));
    return (uint64_t)json_integer_value(v);
}

static void test_counts_what_was_stamped(void **state)
{
    (void)state;
    json_t *b = count("200ms", 20, NULL, NULL);
    assert_non_null(b);
    assert_int_equal(num(b, "sent"), 20);
    assert_int_equal(num(b, "delivered"), 20);
    assert_int_equal(num(b, "lost"), 0);
    assert_null(json_object_get(b, "settle_stopped"));
    json_decref(b);
}

static void test_settle_cut_short_by_stop(void **state)
{
    (void)state;
    /* one event never sent: the 60 s settle would wait for it; the stop flag is already up */
    volatile int stop = 1;
    uint64_t skip = 3;
    int64_t t0 = sq_now_ns();
    json_t *b = count("60s", 10, &skip, &stop);
    assert_true(sq_now_ns() - t0 < 10 * SQ_NS_PER_S);
    assert_non_null(b);
    assert_int_equal(num(b, "sent"), 10);
    assert_int_equal(num(b, "delivered"), 9);
    assert_int_equal(num(b, "lost"), 1);
    assert_true(json_is_true(json_object_get(b, "settle_stopped")));
    json_decref(b);
}

/* A broker that is not there (a loopback port bound, then closed): the sink was never
 * subscribed, so it counted nothing that crossed it, and the run fails with the reason, in why
 * and in the block (error, the source's first_error and subscribed). */
static void test_unreachable_broker_fails_the_run(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    char url[64];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%u/orders", ntohs(a.sin_port));
    struct sq_sink_beside_opts o = {.urls = {url}, .nurls = 1, .mqtt_qos = -1};
    volatile int stop = 1; /* no 5 s wait for the subscription, no settle */
    struct sq_sink *s = NULL;
    bool sub = true;
    char err[512] = "";
    assert_int_equal(sq_sink_beside_start(&o, RUN, &stop, &s, &sub, err, sizeof(err)), 0);
    assert_false(sub);
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 300 * SQ_NS_PER_MS}; /* a few tries */
    nanosleep(&ts, NULL);
    uint64_t stamped[1] = {5};
    char why[512];
    json_t *b = sq_sink_beside_end(s, &(struct sq_sink_sent){RUN, stamped, 1, NULL, NULL}, &stop,
                                   why, sizeof(why));
    assert_non_null(b);
    assert_non_null(strstr(why, url));
    assert_non_null(strstr(why, "never subscribed"));
    assert_non_null(strstr(why, "Connection refused"));
    assert_string_equal(json_string_value(json_object_get(b, "error")), why);
    json_t *src = json_array_get(json_object_get(b, "sources"), 0);
    assert_true(json_is_false(json_object_get(src, "subscribed")));
    assert_non_null(
        strstr(json_string_value(json_object_get(src, "first_error")), "Connection refused"));
    assert_int_equal(num(b, "lost"), 5);
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_opts_and_check),
        cmocka_unit_test(test_url_rules),
        cmocka_unit_test(test_counts_what_was_stamped),
        cmocka_unit_test(test_settle_cut_short_by_stop),
        cmocka_unit_test(test_unreachable_broker_fails_the_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
