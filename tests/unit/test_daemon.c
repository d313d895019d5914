/* tests/unit/test_daemon.c - daemon/: the settings' validators, the token file, the loopback
 * rule, the live events' text, the Prometheus label escaping, the comparison of two results,
 * the dashboard page's assembly, and a daemon in this process (API, runner and ops threads, the
 * store, a target) driven over loopback: the test ThreadSanitizer runs over the daemon's
 * threads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/clock.h"
#include "daemon/runs_compare.h"
#include "daemon/daemon.h"
#include "daemon/internal.h"
#include "stats/hist.h"
#include "target/target.h"

/* ---- settings ---- */

static int set(struct sq_daemon_config *c, const char *key, json_t *v, char *err)
{
    int rc = sq_daemon_config_set(c, key, v, err, 256);
    json_decref(v);
    return rc;
}

static void test_config_set(void **state)
{
    (void)state;
    struct sq_daemon_config c;
    sq_daemon_config_init(&c);
    char err[256];
    assert_int_equal(c.max_vus, 10000);
    assert_true(c.max_rate == 1e6);
    assert_int_equal(c.max_duration_ns, 3600 * SQ_NS_PER_S);
    assert_int_equal(c.keep_runs, 200);
    assert_int_equal(c.keep_days, 0);
    assert_int_equal(c.max_body, 1024 * 1024);

    assert_int_equal(set(&c, "threads", json_integer(4), err), 0);
    assert_int_equal(c.threads, 4);
    assert_int_equal(set(&c, "threads", json_string("8"), err), 0);
    assert_int_equal(c.threads, 8);
    assert_int_equal(set(&c, "threads", json_integer(2000), err), -SQ_EUSAGE);
    assert_string_equal(err, "threads: '2000' is not a whole number in 0..1024");
    assert_int_equal(c.threads, 8);
    assert_int_equal(set(&c, "timeout", json_string("250ms"), err), 0);
    assert_int_equal(c.timeout_ns, 250 * SQ_NS_PER_MS);
    assert_int_equal(set(&c, "timeout", json_integer(3), err), 0);
    assert_int_equal(c.timeout_ns, 3 * SQ_NS_PER_S);
    assert_int_equal(set(&c, "timeout", json_string("soon"), err), -SQ_EUSAGE);
    assert_string_equal(err, "timeout: 'soon' is not a duration (e.g. 500ms, 10s, 2m, 1h)");
    assert_int_equal(set(&c, "max_duration", json_string("0s"), err), -SQ_EUSAGE);
    assert_int_equal(set(&c, "max_rate", json_real(2.5e5), err), 0);
    assert_true(c.max_rate == 2.5e5);
    assert_int_equal(set(&c, "max_rate", json_integer(0), err), -SQ_EUSAGE);
    assert_int_equal(set(&c, "max_rate", json_string("1e9"), err), -SQ_EUSAGE);
    assert_int_equal(set(&c, "max_vus", json_integer(0), err), -SQ_EUSAGE);
    assert_int_equal(set(&c, "max_vus", json_true(), err), -SQ_EUSAGE);
    assert_string_equal(err, "max_vus: '?' is not a whole number in 1..1000000");
    assert_int_equal(set(&c, "keep_runs", json_integer(-1), err), -SQ_EUSAGE);
    assert_int_equal(set(&c, "keep_days", json_integer(7), err), 0);
    assert_int_equal(c.keep_days, 7);
    assert_int_equal(set(&c, "max_body", json_integer(1024 * 1024 + 1), err), -SQ_EUSAGE);
    assert_int_equal(set(&c, "max_queue", json_integer(5), err), 0);
    assert_int_equal(c.max_queue, 5);

    assert_int_equal(set(&c, "treads", json_integer(1), err), -SQ_EUSAGE);
    assert_string_equal(err, "unknown key 'treads' (did you mean 'threads'?)");
    assert_int_equal(set(&c, "zzzz", json_integer(1), err), -SQ_EUSAGE);
    assert_string_equal(err, "unknown key 'zzzz'");
    assert_int_equal(set(&c, "listen", json_string("0.0.0.0:1"), err), -SQ_EUSAGE);
    assert_non_null(strstr(err, "listen: needs a restart"));
    assert_int_equal(set(&c, "auth", json_string("none"), err), -SQ_EUSAGE);

    /* allow_hosts: an array, or a comma-separated string (the flag's form); all or nothing */
    assert_int_equal(set(&c, "allow_hosts", json_string("localhost,127.0.0.1"), err), 0);
    assert_int_equal(c.nallow, 2);
    assert_string_equal(c.allow_hosts[1], "127.0.0.1");
    assert_int_equal(set(&c, "allow_hosts", json_pack("[s, s]", "a.example", "bad host"), err),
                     -SQ_EUSAGE);
    assert_string_equal(err, "allow_hosts: entry 2 is not a host name or address");
    assert_int_equal(c.nallow, 2);
    assert_int_equal(set(&c, "allow_hosts", json_integer(1), err), -SQ_EUSAGE);
    json_t *many = json_array();
    for (int i = 0; i < SQ_DAEMON_MAX_ALLOW + 1; i++)
        json_array_append_new(many, json_string("h"));
    assert_int_equal(set(&c, "allow_hosts", many, err), -SQ_EUSAGE);
    assert_int_equal(set(&c, "allow_hosts", json_array(), err), 0);
    assert_int_equal(c.nallow, 0);
    sq_daemon_config_dispose(&c);
}

/* ---- the token file and the loopback rule ---- */

static char *temp_file(const char *text)
{
    char *path = strdup("/tmp/squall-test-daemon-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_token_read(void **state)
{
    (void)state;
    char err[256], *tok = NULL;
    char *p = temp_file("  0123456789abcdef-token \r\nsecond line\n");
    assert_int_equal(sq_daemon_token_read(p, &tok, err, sizeof(err)), 0);
    assert_string_equal(tok, "0123456789abcdef-token");
    free(tok);
    unlink(p);
    free(p);
    p = temp_file("short\n");
    assert_int_equal(sq_daemon_token_read(p, &tok, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "is 5 bytes: use at least 16"));
    unlink(p);
    free(p);
    p = temp_file("0123456789abcdef\x01xyz");
    assert_int_equal(sq_daemon_token_read(p, &tok, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "printable ASCII"));
    unlink(p);
    free(p);
    assert_int_equal(sq_daemon_token_read("/nonexistent/x", &tok, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "cannot read the token file"));

    assert_true(sq_daemon_host_is_loopback(NULL));
    assert_true(sq_daemon_host_is_loopback("127.0.0.1"));
    assert_true(sq_daemon_host_is_loopback("127.1.2.3"));
    assert_true(sq_daemon_host_is_loopback("::1"));
    assert_true(sq_daemon_host_is_loopback("LocalHost"));
    assert_false(sq_daemon_host_is_loopback("0.0.0.0"));
    assert_false(sq_daemon_host_is_loopback("::"));
    assert_false(sq_daemon_host_is_loopback("10.0.0.1"));
    assert_false(sq_daemon_host_is_loopback("example.com"));
}

/* ---- events and labels ---- */

static void test_events(void **state)
{
    (void)state;
    struct sq_second s = {.t_s = 2.0,
                          .len_s = 1.0,
                          .sent = 10,
                          .completed = 8,
                          .failed = 1,
                          .errors = 1,
                          .p50_us = 5,
                          .p90_us = 6,
                          .p99_us = 7,
                          .max_us = 9,
                          .active = 4};
    char *entry = sq_daemon__second_json(&s, false, false, NULL);
    assert_non_null(entry);
    char *ev = sq_daemon__event_second(7, 1, entry, "{\"x\":1}", NULL);
    assert_non_null(ev);
    assert_string_equal(
        ev, "id: 1\nevent: second\ndata: {\"run\":7,\"second\":{\"t_s\":2.0,\"len_s\":1.0,"
            "\"requests\":10,\"completed\":8,\"failed\":1,\"dropped\":0,\"errors\":1,\"rps\":8.0,"
            "\"bytes_received\":0,\"p50_us\":5,\"p90_us\":6,\"p99_us\":7,\"max_us\":9,\"vus\":4},"
            "\"totals\":{\"x\":1}}\n\n");
    free(ev);
    /* a live second carries its 100 ms bins */
    struct sq_fine_bin fb[2] = {{.completed = 3, .failed = 1, .max_us = 70}, {.completed = 0}};
    assert_null(sq_daemon__fine_json(fb, 0, SQ_FINE_BIN_NS, 1.0));
    char *fine = sq_daemon__fine_json(fb, 2, SQ_FINE_BIN_NS, 1.0);
    assert_string_equal(fine, "{\"bin_s\":0.1,\"t0_s\":1.0,\"completed\":[3,0],"
                              "\"failed\":[1,0],\"max_us\":[70,0]}");
    ev = sq_daemon__event_second(7, 1, entry, "{\"x\":1}", fine);
    free(fine);
    free(entry);
    assert_non_null(strstr(ev, "\"totals\":{\"x\":1},\"fine\":{\"bin_s\":"));
    free(ev);
    ev = sq_daemon__event_end(7, SQ_STORE_FINISHED, NULL, "{\"schema\":1}", 12);
    assert_string_equal(ev, "event: end\ndata: {\"run\":7,\"status\":\"finished\",\"reason\":null,"
                            "\"result\":{\"schema\":1}}\n\n");
    free(ev);
    ev = sq_daemon__event_end(8, SQ_STORE_STOPPED, "a \"why\"\n", NULL, 0);
    assert_string_equal(ev, "event: end\ndata: {\"run\":8,\"status\":\"stopped\",\"reason\":"
                            "\"a \\\"why\\\"\\n\",\"result\":null}\n\n");
    free(ev);
    ev = sq_daemon__event_status(9, SQ_STORE_QUEUED);
    assert_string_equal(ev, "event: status\ndata: {\"run\":9,\"status\":\"queued\"}\n\n");
    free(ev);

    struct sq_daemon__totals t = {.elapsed_s = 2, .sent = 10, .completed = 8};
    t.status[2] = 8;
    char *tj = sq_daemon__totals_json(&t);
    json_t *j = json_loads(tj, 0, NULL);
    assert_non_null(j);
    assert_true(json_real_value(json_object_get(j, "rps")) == 4.0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "status"), "2xx")), 8);
    assert_non_null(json_object_get(json_object_get(j, "errors_by_kind"), "timeout"));
    json_decref(j);
    free(tj);

    struct sq_buf b = {0};
    sq_daemon__prom_label(&b, "a\\b\"c\nd");
    assert_int_equal(sq_buf_append(&b, "", 1), 0);
    assert_string_equal(b.p, "a\\\\b\\\"c\\nd");
    sq_buf_dispose(&b);
}

/* ---- compare ---- */

static json_t *doc(double rps, int64_t p99, int64_t sent)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:f, s:{s:f}, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}, "
                     "s:{s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:f}}",
                     "schema", "squall.result/1", "mode", "closed-loop", "config", "url",
                     "http://x/", "duration_s", 2.0, "rate", "requests_per_s", rps, "requests",
                     "sent", (json_int_t)sent, "completed", (json_int_t)sent, "failed", 0,
                     "dropped", 0, "errors", "timeout", 1, "closed", 2, "status", "2xx",
                     (json_int_t)sent, "5xx", 0, "latency", "p50_us", 10, "p90_us", 20, "p95_us",
                     30, "p99_us", (json_int_t)p99, "p99_9_us", 50, "max_us", 60, "mean_us", 12.0);
}

static void test_compare(void **state)
{
    (void)state;
    json_t *a = doc(1000, 40, 2000), *b = doc(1500, 44, 3000);
    struct sq_hist *ha, *hb;
    assert_int_equal(sq_latency_hist_new(&ha), 0);
    assert_int_equal(sq_latency_hist_new(&hb), 0);
    for (int i = 1; i <= 1000; i++) {
        sq_hist_record(ha, i);
        sq_hist_record(hb, 2 * i);
    }
    json_t *c = sq_daemon_compare(a, ha, b, hb);
    assert_non_null(c);
    json_t *rows = json_object_get(c, "rows");
    json_t *rps = NULL, *p99 = NULL, *errs = NULL, *p50 = NULL;
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        const char *k = json_string_value(json_object_get(r, "key"));
        if (strcmp(k, "rate.requests_per_s") == 0)
            rps = r;
        else if (strcmp(k, "latency.p99_us") == 0)
            p99 = r;
        else if (strcmp(k, "errors") == 0)
            errs = r;
        else if (strcmp(k, "latency.p50_us") == 0)
            p50 = r;
    }
    assert_true(json_number_value(json_object_get(rps, "change")) == 0.5);
    assert_string_equal(json_string_value(json_object_get(rps, "verdict")), "better");
    assert_string_equal(json_string_value(json_object_get(p99, "verdict")), "worse");
    assert_int_equal(json_integer_value(json_object_get(errs, "a")), 3);
    assert_string_equal(json_string_value(json_object_get(errs, "verdict")), "similar");
    assert_string_equal(json_string_value(json_object_get(p50, "verdict")), "similar");
    json_t *pc = json_object_get(c, "percentiles");
    json_t *xs = json_object_get(pc, "x"), *ya = json_object_get(pc, "a"),
           *yb = json_object_get(pc, "b");
    assert_int_equal(json_array_size(xs), 3 * 20 + 1); /* 1,000 values: three decades */
    assert_int_equal(json_array_size(ya), json_array_size(xs));
    int64_t prev = -1;
    json_array_foreach(ya, i, r)
    {
        assert_true(json_integer_value(r) >= prev);
        prev = json_integer_value(r);
        /* b recorded every value doubled */
        int64_t vb = json_integer_value(json_array_get(yb, i));
        assert_true(llabs(vb - 2 * prev) <= 2 * prev / 500 + 2);
    }
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    sq_daemon_compare_print(c, "run 1", "run 2", f);
    fclose(f);
    assert_non_null(strstr(out, "requests/s"));
    assert_non_null(strstr(out, "+50.0%  better"));
    assert_non_null(strstr(out, "+10.0%  worse"));
    free(out);
    json_decref(c);
    /* without histograms: no curves */
    c = sq_daemon_compare(a, NULL, b, hb);
    assert_true(json_is_null(json_object_get(c, "percentiles")));
    json_decref(c);
    json_decref(a);
    json_decref(b);
    sq_hist_free(ha);
    sq_hist_free(hb);
}

static void test_page(void **state)
{
    (void)state;
    char *page = NULL;
    size_t len = 0;
    assert_int_equal(sq_daemon__page(&page, &len), 0);
    assert_int_equal(strlen(page), len);
    assert_null(strstr(page, "<!--UPLOT_JS-->"));
    assert_null(strstr(page, "<!--DASH_JS-->"));
    assert_null(strstr(page, "<!--LIVE_JS-->"));
    assert_null(strstr(page, "<!--LIVE_CSS-->"));
    assert_non_null(strstr(page, "uPlot"));
    assert_non_null(strstr(page, "squallDash"));
    assert_non_null(strstr(page, "squallLive"));
    /* exactly the page's three scripts (uPlot, dashboard.js, live-tables.js): nothing inlined may
     * close one early */
    size_t n = 0;
    for (const char *p = page; (p = strstr(p, "</script")); p++)
        n++;
    assert_int_equal(n, 3);
    free(page);
}

/* ---- a daemon in this process ---- */

static int client(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* One request on a new connection ("Connection: close"); returns the status, *body malloc'd. */
static int call(uint16_t port, const char *method, const char *path, const char *body, char **out)
{
    int fd = client(port);
    char req[4096];
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     method, path, body ? strlen(body) : 0, body ? body : "");
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
        ssize_t k = recv(fd, buf + len, cap - len - 1, 0);
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    buf[len] = '\0';
    int status = 0;
    assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &status), 1);
    char *b = strstr(buf, "\r\n\r\n");
    if (out)
        *out = strdup(b ? b + 4 : "");
    free(buf);
    return status;
}

static json_t *call_json(uint16_t port, const char *method, const char *path, const char *body,
                         int want)
{
    char *out = NULL;
    int st = call(port, method, path, body, &out);
    if (st != want)
        fail_msg("%s %s: %d, wanted %d: %s", method, path, st, want, out);
    json_t *j = json_loads(out, 0, NULL);
    free(out);
    assert_non_null(j);
    return j;
}

static const char *run_status(uint16_t port, int64_t id, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof(path), "/runs/%lld", (long long)id);
    json_t *r = call_json(port, "GET", path, NULL, 200);
    snprintf(buf, len, "%s", json_string_value(json_object_get(r, "status")));
    json_decref(r);
    return buf;
}

static void test_daemon_live(void **state)
{
    (void)state;
    struct sq_target_config tc = {.threads = 1};
    struct sq_target *t = NULL;
    assert_int_equal(sq_target_start(&tc, &t, NULL), 0);
    char dir[] = "/tmp/squall-test-daemon-dir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    FILE *log = fopen("/dev/null", "w");
    struct sq_daemon_opts o = {.port = 0, .data_dir = dir, .log = log};
    sq_daemon_config_init(&o.config);
    struct sq_daemon *d = NULL;
    char err[512];
    int rc = sq_daemon_start(&o, &d, err, sizeof(err));
    if (rc < 0)
        fail_msg("sq_daemon_start: %s", err);
    uint16_t port = sq_daemon_port(d);

    /* a second daemon on the same store is refused */
    struct sq_daemon *d2 = NULL;
    assert_int_equal(sq_daemon_start(&o, &d2, err, sizeof(err)), -EBUSY);
    /* a non-loopback address without a token is refused before anything opens */
    struct sq_daemon_opts o2 = o;
    o2.host = "0.0.0.0";
    assert_int_equal(sq_daemon_start(&o2, &d2, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "needs a token"));

    char body[512];
    snprintf(body, sizeof(body),
             "{\"quick\":{\"url\":\"http://127.0.0.1:%u/fast\",\"requests\":3000,"
             "\"connections\":2,\"threads\":1}}",
             sq_target_port(t));
    json_t *a = call_json(port, "POST", "/runs", body, 201);
    json_t *b = call_json(port, "POST", "/runs", body, 201);
    int64_t ida = json_integer_value(json_object_get(a, "id"));
    int64_t idb = json_integer_value(json_object_get(b, "id"));
    json_decref(a);
    json_decref(b);
    assert_int_equal(idb, ida + 1);
    char st[32];
    for (int i = 0; i < 3000 && strcmp(run_status(port, idb, st, sizeof(st)), "finished"); i++)
        usleep(10000);
    assert_string_equal(run_status(port, ida, st, sizeof(st)), "finished");
    assert_string_equal(run_status(port, idb, st, sizeof(st)), "finished");
    char path[64];
    snprintf(path, sizeof(path), "/runs/%lld", (long long)idb);
    json_t *run = call_json(port, "GET", path, NULL, 200);
    json_t *res = json_object_get(run, "result");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "requests"), "sent")),
                     3000);
    json_decref(run);
    char *metrics = NULL;
    assert_int_equal(call(port, "GET", "/metrics", NULL, &metrics), 200);
    char want[96];
    snprintf(want, sizeof(want), "squall_run_requests_total{run=\"%lld\"} 3000\n", (long long)idb);
    assert_non_null(strstr(metrics, want));
    free(metrics);

    /* shut down with one run going and one queued: both end stopped, the first with its
     * result */
    snprintf(body, sizeof(body),
             "{\"quick\":{\"url\":\"http://127.0.0.1:%u/fast\",\"duration\":\"30s\","
             "\"connections\":1,\"threads\":1}}",
             sq_target_port(t));
    json_t *c = call_json(port, "POST", "/runs", body, 201);
    json_t *q = call_json(port, "POST", "/runs", body, 201);
    int64_t idc = json_integer_value(json_object_get(c, "id"));
    int64_t idq = json_integer_value(json_object_get(q, "id"));
    json_decref(c);
    json_decref(q);
    for (int i = 0; i < 3000 && strcmp(run_status(port, idc, st, sizeof(st)), "running"); i++)
        usleep(10000);
    usleep(300 * 1000);
    int64_t t0 = sq_now_ns();
    sq_daemon_free(d);
    assert_true(sq_now_ns() - t0 < 10 * SQ_NS_PER_S);
    struct sq_store *s = NULL;
    struct sq_store_opts so = {.read_only = true};
    assert_int_equal(sq_store_open(dir, &so, &s, err, sizeof(err)), 0);
    struct sq_store_run r;
    assert_int_equal(sq_store_run_get(s, idc, &r, err, sizeof(err)), 0);
    assert_int_equal(r.status, SQ_STORE_STOPPED);
    assert_string_equal(r.reason, "the daemon shut down");
    assert_true(r.has_result);
    sq_store_run_dispose(&r);
    assert_int_equal(sq_store_run_get(s, idq, &r, err, sizeof(err)), 0);
    assert_int_equal(r.status, SQ_STORE_STOPPED);
    assert_false(r.has_result);
    sq_store_run_dispose(&r);
    sq_store_close(s);

    sq_daemon_config_dispose(&o.config);
    fclose(log);
    sq_target_free(t);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_set), cmocka_unit_test(test_token_read),
        cmocka_unit_test(test_events),     cmocka_unit_test(test_compare),
        cmocka_unit_test(test_page),       cmocka_unit_test(test_daemon_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
