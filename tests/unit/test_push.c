/* tests/unit/test_push.c - the encoders of face/push.c: the remote-write WriteRequest read back
 * by a protobuf walker of the test's own (every series' labels sorted by name, the running
 * totals as samples, no latency sample for a second without a completion), and the InfluxDB
 * line protocol byte for byte (tags escaped); the points' timestamps, read by a receiver of the
 * test's own on loopback (never ahead of the wall clock, each after the one before). The
 * senders are otherwise e2e.test_push's, against real receivers. */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "face/push.h"
#include "plan/metrics.h"
#include "net/egress.h"

/* ---- a minimal protobuf reader ---- */

struct rd {
    const unsigned char *p, *end;
};

static uint64_t varint(struct rd *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        assert_true(r->p < r->end);
        unsigned char b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    fail_msg("varint too long");
    return 0;
}

/* The next length-delimited field: its number, and a reader over its bytes. */
static unsigned field_bytes(struct rd *r, struct rd *sub)
{
    uint64_t tag = varint(r);
    assert_int_equal(tag & 7, 2);
    uint64_t n = varint(r);
    assert_true(n <= (uint64_t)(r->end - r->p));
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
    return (unsigned)(tag >> 3);
}

struct series_seen {
    char name[64], extra[160], run[64], run_id[64];
    size_t nsamples;
    double v[8];
    int64_t ts[8];
};

static void read_series(struct rd *ts, struct series_seen *s)
{
    memset(s, 0, sizeof(*s));
    char prev[64] = "";
    while (ts->p < ts->end) {
        struct rd f;
        unsigned num = field_bytes(ts, &f);
        if (num == 1) { /* Label */
            struct rd k, v;
            assert_int_equal(field_bytes(&f, &k), 1);
            assert_int_equal(field_bytes(&f, &v), 2);
            char name[64], val[64];
            snprintf(name, sizeof(name), "%.*s", (int)(k.end - k.p), (const char *)k.p);
            snprintf(val, sizeof(val), "%.*s", (int)(v.end - v.p), (const char *)v.p);
            assert_true(strcmp(prev, name) < 0); /* sorted by name, no duplicate */
            snprintf(prev, sizeof(prev), "%s", name);
            if (strcmp(name, "__name__") == 0)
                snprintf(s->name, sizeof(s->name), "%s", val);
            else if (strcmp(name, "run") == 0)
                snprintf(s->run, sizeof(s->run), "%s", val);
            else if (strcmp(name, "run_id") == 0)
                snprintf(s->run_id, sizeof(s->run_id), "%s", val);
            else
                snprintf(s->extra, sizeof(s->extra), "%s=%s", name, val);
        } else { /* Sample: double value = 1 (fixed64), int64 timestamp = 2 */
            assert_int_equal(num, 2);
            assert_true(s->nsamples < 8);
            assert_int_equal(varint(&f), 1 << 3 | 1);
            uint64_t u = 0;
            assert_true(f.end - f.p >= 8);
            for (int i = 0; i < 8; i++)
                u |= (uint64_t)f.p[i] << (8 * i);
            f.p += 8;
            memcpy(&s->v[s->nsamples], &u, sizeof(double));
            assert_int_equal(varint(&f), 2 << 3 | 0);
            s->ts[s->nsamples] = (int64_t)varint(&f);
            assert_true(f.p == f.end);
            s->nsamples++;
        }
    }
}

static void two_points(struct sq_push_point pt[2])
{
    memset(pt, 0, 2 * sizeof(pt[0]));
    pt[0] = (struct sq_push_point){.ts_ms = 1700000000123,
                                   .len_s = 1,
                                   .sent = 10,
                                   .completed = 9,
                                   .failed = 1,
                                   .errors = 1,
                                   .bytes_received = 900,
                                   .active = 4,
                                   .p50_us = 1500,
                                   .p90_us = 2500,
                                   .p99_us = 4000,
                                   .max_us = 9000,
                                   .t_sent = 10,
                                   .t_completed = 9,
                                   .t_failed = 1,
                                   .t_errors = 1,
                                   .t_bytes = 900};
    pt[0].status[2] = pt[0].t_status[2] = 9;
    /* a second in which nothing completed: no latency */
    pt[1] = (struct sq_push_point){.ts_ms = 1700000001123,
                                   .len_s = 0.5,
                                   .sent = 2,
                                   .active = 2,
                                   .t_sent = 12,
                                   .t_completed = 9,
                                   .t_failed = 1,
                                   .t_errors = 1,
                                   .t_bytes = 900};
    pt[1].t_status[2] = 9;
}

static void test_prom_write_request(void **state)
{
    (void)state;
    struct sq_push_point pt[2];
    two_points(pt);
    struct sq_push_labels lab = {.run = "smoke", .run_id = "abc-1", .open = false};
    struct sq_buf b = {0};
    assert_int_equal(sq_push_encode_prom(&b, &lab, pt, 2), 0);
    struct rd r = {(const unsigned char *)b.p, (const unsigned char *)b.p + b.len};
    size_t nseries = 0, lat = 0;
    bool completed = false, two_xx = false, vus = false;
    while (r.p < r.end) {
        struct rd ts;
        assert_int_equal(field_bytes(&r, &ts), 1); /* WriteRequest.timeseries */
        struct series_seen s;
        read_series(&ts, &s);
        nseries++;
        assert_string_equal(s.run, "smoke");
        assert_string_equal(s.run_id, "abc-1");
        assert_int_equal(s.ts[0], 1700000000123);
        if (strcmp(s.name, "squall_run_completed_total") == 0) {
            completed = true;
            assert_int_equal(s.nsamples, 2);
            assert_true(s.v[0] == 9 && s.v[1] == 9);
            assert_int_equal(s.ts[1], 1700000001123);
        } else if (strcmp(s.name, "squall_run_responses_total") == 0 &&
                   strcmp(s.extra, "class=2xx") == 0) {
            two_xx = true;
            assert_true(s.v[0] == 9);
        } else if (strcmp(s.name, "squall_run_vus") == 0) {
            vus = true;
            assert_true(s.v[0] == 4 && s.v[1] == 2);
        } else if (strcmp(s.name, "squall_run_interval_latency_seconds") == 0) {
            lat++;
            assert_int_equal(s.nsamples, 1); /* the second without a completion has none */
            if (strcmp(s.extra, "quantile=0.5") == 0)
                assert_true(s.v[0] == 0.0015);
            if (strcmp(s.extra, "quantile=1") == 0)
                assert_true(s.v[0] == 0.009);
        } else {
            assert_int_equal(s.nsamples, 2);
        }
        assert_true(strncmp(s.name, "squall_run_", 11) == 0);
    }
    assert_true(completed && two_xx && vus);
    assert_int_equal(lat, 4);
    assert_int_equal(nseries, 6 + 6 + 2 + 4);
    /* the open model names its active count in_flight */
    sq_buf_reset(&b);
    lab.open = true;
    assert_int_equal(sq_push_encode_prom(&b, &lab, pt, 2), 0);
    assert_non_null(memmem(b.p, b.len, "squall_run_in_flight", 20));
    assert_null(memmem(b.p, b.len, "squall_run_vus", 14));
    sq_buf_dispose(&b);
}

static void test_influx_lines(void **state)
{
    (void)state;
    struct sq_push_point pt[2];
    two_points(pt);
    struct sq_push_labels lab = {.run = "a b,c=d\\", .run_id = "x", .open = true};
    struct sq_buf b = {0};
    assert_int_equal(sq_push_encode_influx(&b, &lab, pt, 2), 0);
    assert_int_equal(sq_buf_append(&b, "", 1), 0);
    assert_string_equal(
        b.p, "squall_http_reqs,run=a\\ b\\,c\\=d\\\\,run_id=x count=9i,sent=10i,failed=1i,"
             "dropped=0i,errors=1i,bytes=900i,in_flight=4i,rate=9.000,s1xx=0i,s2xx=9i,s3xx=0i,"
             "s4xx=0i,s5xx=0i,sother=0i,p50_ms=1.500,p90_ms=2.500,p99_ms=4.000,max_ms=9.000 "
             "1700000000123\n"
             "squall_http_reqs,run=a\\ b\\,c\\=d\\\\,run_id=x count=0i,sent=2i,failed=0i,"
             "dropped=0i,errors=0i,bytes=0i,in_flight=2i,rate=0.000,s1xx=0i,s2xx=0i,s3xx=0i,"
             "s4xx=0i,s5xx=0i,sother=0i 1700000001123\n");
    sq_buf_dispose(&b);
}

/* A plan's own metrics: a line each per second (a gauge's only once it has a value), the tag
 * metric= escaped like the run's, the fields by kind; and their remote-write series by name. */
static void test_custom_metrics(void **state)
{
    (void)state;
    struct sq_push_point pt[2];
    two_points(pt);
    struct sq_push_metric ms[4] = {{.name = "orders", .kind = SQ_MK_COUNTER},
                                   {.name = "ok", .kind = SQ_MK_RATE},
                                   {.name = "depth", .kind = SQ_MK_GAUGE},
                                   {.name = "cart", .kind = SQ_MK_TREND}};
    struct sq_push_mval v[2][4] = {
        {{.n = 2, .sum = 4.5, .t_n = 2, .t_sum = 4.5},
         {.n = 4, .nonzero = 3, .t_n = 4, .t_nonzero = 3},
         {0},
         {.n = 2, .sum = 15, .t_n = 2, .t_sum = 15}},
        {{.t_n = 2, .t_sum = 4.5},
         {.t_n = 4, .t_nonzero = 3},
         {.n = 1, .sum = 3, .last = 3, .has_last = true, .t_n = 1, .t_sum = 3},
         {.t_n = 2, .t_sum = 15}},
    };
    pt[0].m = v[0];
    pt[1].m = v[1];
    struct sq_push_labels lab = {
        .run = "r", .run_id = "x", .open = true, .metrics = ms, .nmetrics = 4};
    struct sq_buf b = {0};
    assert_int_equal(sq_push_encode_influx(&b, &lab, pt, 2), 0);
    assert_int_equal(sq_buf_append(&b, "", 1), 0);
    assert_non_null(strstr(b.p, "1700000000123\n"
                                "squall_custom,run=r,run_id=x,metric=orders,kind=counter count=4.5 "
                                "1700000000123\n"
                                "squall_custom,run=r,run_id=x,metric=ok,kind=rate passes=3i,"
                                "total=4i,rate=0.750000 1700000000123\n"
                                "squall_custom,run=r,run_id=x,metric=cart,kind=trend samples=2i,"
                                "avg=7.5 1700000000123\n"));
    assert_non_null(strstr(b.p, "squall_custom,run=r,run_id=x,metric=orders,kind=counter count=0 "
                                "1700000001123\n"
                                "squall_custom,run=r,run_id=x,metric=ok,kind=rate passes=0i,"
                                "total=0i 1700000001123\n"
                                "squall_custom,run=r,run_id=x,metric=depth,kind=gauge value=3 "
                                "1700000001123\n"
                                "squall_custom,run=r,run_id=x,metric=cart,kind=trend samples=0i "
                                "1700000001123\n"));
    sq_buf_reset(&b);
    assert_int_equal(sq_push_encode_prom(&b, &lab, pt, 2), 0);
    static const char *const names[] = {
        "squall_custom_orders_total",       "squall_custom_ok_samples_total",
        "squall_custom_ok_passes_total",    "squall_custom_depth",
        "squall_custom_cart_samples_total", "squall_custom_cart_avg"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        assert_non_null(memmem(b.p, b.len, names[i], strlen(names[i])));
    sq_buf_dispose(&b);
}

/* A metric split by the steps' tags: each unit's user tags after the built-in ones, keys and
 * values escaped for line protocol, a key that is a built-in's prefixed with tag_, an empty
 * value left out; in remote write the keys sanitized to label names and sorted. */
static void test_custom_tags(void **state)
{
    (void)state;
    struct sq_push_point pt[2];
    two_points(pt);
    char k0[] = "page kind", k1[] = "run", k2[] = "empty", k3[] = "9lives";
    char v0[] = "a,b=c d\\e", v1[] = "mine", v2[] = "", v3[] = "x";
    char *tk[4] = {k0, k1, k2, k3};
    char *tv[4] = {v0, v1, v2, v3};
    struct sq_push_metric ms[2] = {
        {.name = "orders", .kind = SQ_MK_COUNTER, .ntags = 4, .tk = tk, .tv = tv},
        {.name = "orders", .kind = SQ_MK_COUNTER}};
    struct sq_push_mval v[2] = {{.n = 2, .sum = 2, .t_n = 2, .t_sum = 2},
                                {.n = 1, .sum = 1, .t_n = 1, .t_sum = 1}};
    pt[0].m = v;
    struct sq_push_labels lab = {
        .run = "r", .run_id = "x", .open = true, .metrics = ms, .nmetrics = 2};
    struct sq_buf b = {0};
    assert_int_equal(sq_push_encode_influx(&b, &lab, pt, 1), 0);
    assert_int_equal(sq_buf_append(&b, "", 1), 0);
    assert_non_null(strstr(b.p, "squall_custom,run=r,run_id=x,metric=orders,kind=counter,"
                                "page\\ kind=a\\,b\\=c\\ d\\\\e,tag_run=mine,9lives=x "
                                "count=2 1700000000123\n"
                                "squall_custom,run=r,run_id=x,metric=orders,kind=counter count=1 "
                                "1700000000123\n"));
    char name[80];
    sq_push_prom_label_name("page kind", name, sizeof(name));
    assert_string_equal(name, "page_kind");
    sq_push_prom_label_name("run_id", name, sizeof(name));
    assert_string_equal(name, "tag_run_id");
    sq_push_prom_label_name("9lives", name, sizeof(name));
    assert_string_equal(name, "tag_9lives");
    sq_push_prom_label_name("__name__", name, sizeof(name));
    assert_string_equal(name, "tag___name__");
    sq_push_prom_label_name("a.b-c", name, sizeof(name));
    assert_string_equal(name, "a_b_c");
    sq_buf_reset(&b);
    assert_int_equal(sq_push_encode_prom(&b, &lab, pt, 1), 0);
    /* the tagged series: labels in order __name__, page_kind, run, run_id, tag_9lives, tag_run
     * (each a Label: field 1 name, field 2 value) */
    static const char seq[][12] = {"__name__", "page_kind",  "run",
                                   "run_id",   "tag_9lives", "tag_run"};
    const char *at = memmem(b.p, b.len, "page_kind", 9);
    assert_non_null(at);
    const char *from = memmem(b.p, b.len, "squall_custom_orders_total", 26);
    assert_non_null(from);
    size_t last = 0;
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
        const char *q = memmem(from, b.len - (size_t)(from - b.p), seq[i], strlen(seq[i]));
        assert_non_null(q);
        if (i > 1) /* __name__'s value precedes the rest */
            assert_true((size_t)(q - b.p) > last);
        last = (size_t)(q - b.p);
    }
    assert_non_null(memmem(b.p, b.len, "a,b=c d\\e", 9)); /* values as they are */
    assert_null(memmem(b.p, b.len, "empty", 5));
    sq_buf_dispose(&b);
}

static void test_url_refusals(void **state)
{
    (void)state;
    struct sq_push_labels lab = {.run = "r", .run_id = "i"};
    struct sq_push *p = NULL;
    char why[640];
    assert_int_equal(
        sq_push_open(SQ_PUSH_INFLUX, "ftp://127.0.0.1/db", &lab, NULL, &p, why, sizeof(why)),
        -SQ_EUSAGE);
    assert_non_null(strstr(why, "--out influxdb: 'ftp://127.0.0.1/db' is not an http(s):// URL"));
    assert_int_equal(
        sq_push_open(SQ_PUSH_INFLUX, "http://a:%g0@127.0.0.1/db", &lab, NULL, &p, why, sizeof(why)),
        -SQ_EUSAGE);
    assert_non_null(strstr(why, "a bad %-escape"));
    assert_int_equal(sq_push_open(SQ_PUSH_INFLUX, "not a url", &lab, NULL, &p, why, sizeof(why)),
                     -SQ_EUSAGE);
    assert_null(p);
    /* a good one starts and, with nothing queued, finishes at once */
    assert_int_equal(
        sq_push_open(SQ_PUSH_INFLUX, "http://127.0.0.1:1/db", &lab, NULL, &p, why, sizeof(why)), 0);
    assert_string_equal(sq_push_url(p), "http://127.0.0.1:1/db");
    sq_push_finish(p, 5);
    struct sq_push_stats st;
    sq_push_stats(p, &st);
    assert_int_equal(st.points + st.sent + st.failed + st.dropped + st.posts, 0);
    sq_push_free(p);
    /* https, and a user:password (%-escaped) that the URL as shown leaves out */
    p = NULL;
    assert_int_equal(sq_push_open(SQ_PUSH_INFLUX, "https://u:p%40ss@127.0.0.1:1/db", &lab, NULL, &p,
                                  why, sizeof(why)),
                     0);
    assert_string_equal(sq_push_url(p), "https://127.0.0.1:1/db");
    sq_push_free(p);
}

/* The destination passes the run's egress policy: an MCP run (loopback only) may not push to
 * 10.1.2.3, and the refusal names the output; loopback passes. */
static void test_egress_policy(void **state)
{
    (void)state;
    struct sq_egress_opts o = {.style = SQ_EGRESS_MCP};
    struct sq_egress *e = NULL;
    assert_int_equal(sq_egress_new(&o, &e), 0);
    struct sq_push_labels lab = {.run = "r", .run_id = "i"};
    struct sq_push *p = NULL;
    char why[640];
    assert_int_equal(
        sq_push_open(SQ_PUSH_INFLUX, "http://10.1.2.3:8086/db", &lab, e, &p, why, sizeof(why)),
        -EACCES);
    assert_null(p);
    assert_non_null(strstr(why, "--out influxdb"));
    assert_non_null(strstr(why, "10.1.2.3"));
    assert_int_equal(
        sq_push_open(SQ_PUSH_INFLUX, "http://127.0.0.1:1/db", &lab, e, &p, why, sizeof(why)), 0);
    sq_push_free(p);
    sq_egress_free(e);
}

/* ---- the timestamps, through a receiver of the test's own ---- */

struct rx {
    int lfd;
    char body[16384];
    size_t n;
    /* 401 to the first POST, then hold every later one without an answer (its fd kept) */
    bool deny_then_hold;
    int conns, held[8], nheld;
};

/* Accepts POSTs until the listener is shut down: each body appended, each answered 204. */
static void *rx_main(void *arg)
{
    struct rx *x = arg;
    for (;;) {
        int fd = accept(x->lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char buf[8192];
        size_t got = 0, need = SIZE_MAX;
        while (got < need && got < sizeof(buf) - 1) {
            ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
            if (r <= 0)
                break;
            got += (size_t)r;
            buf[got] = 0;
            const char *eoh = strstr(buf, "\r\n\r\n");
            const char *cl = strstr(buf, "Content-Length: ");
            if (eoh && cl && need == SIZE_MAX)
                need = (size_t)(eoh + 4 - buf) + strtoul(cl + 16, NULL, 10);
        }
        const char *eoh = strstr(buf, "\r\n\r\n");
        if (eoh && got - (size_t)(eoh + 4 - buf) < sizeof(x->body) - x->n) {
            size_t k = got - (size_t)(eoh + 4 - buf);
            memcpy(x->body + x->n, eoh + 4, k);
            x->n += k;
            x->body[x->n] = 0;
        }
        if (x->deny_then_hold && x->conns++ > 0 && x->nheld < 8) {
            x->held[x->nheld++] = fd;
            continue;
        }
        static const char ok[] =
            "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        static const char no[] = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n"
                                 "Connection: close\r\n\r\n";
        const char *a = x->deny_then_hold ? no : ok;
        if (write(fd, a, strlen(a)) < 0) {
            /* the sender counts it failed; the test's counts say so */
        }
        close(fd);
    }
}

/* The http_reqs lines' timestamps (the last field of each), in order. */
static size_t reqs_ts(const char *body, int64_t *ts, size_t max)
{
    size_t n = 0;
    for (const char *l = body; *l && n < max;) {
        const char *e = strchr(l, '\n');
        if (!e)
            break;
        if (strncmp(l, "squall_http_reqs,", 17) == 0) {
            const char *sp = e;
            while (sp > l && sp[-1] != ' ')
                sp--;
            ts[n++] = strtoll(sp, NULL, 10);
        }
        l = e + 1;
    }
    return n;
}

static void push_two(double start_wall_s, const double t_s[2], int64_t ts[2], double *now_s)
{
    struct rx x = {.lfd = socket(AF_INET, SOCK_STREAM, 0)};
    assert_true(x.lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(x.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t al = sizeof(a);
    assert_int_equal(getsockname(x.lfd, (struct sockaddr *)&a, &al), 0);
    assert_int_equal(listen(x.lfd, 16), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, rx_main, &x), 0);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/db", (unsigned)ntohs(a.sin_port));
    struct sq_push_labels lab = {.run = "r", .run_id = "i"};
    struct sq_push *p = NULL;
    char why[640];
    assert_int_equal(sq_push_open(SQ_PUSH_INFLUX, url, &lab, NULL, &p, why, sizeof(why)), 0);
    sq_push_set_start(p, start_wall_s);
    for (int i = 0; i < 2; i++) {
        struct sq_second s = {.t_s = t_s[i], .len_s = 1, .sent = 10, .completed = 10};
        sq_push_tick(p, &s);
    }
    *now_s = sq_wall_s();
    sq_push_finish(p, 5);
    struct sq_push_stats st;
    sq_push_stats(p, &st);
    assert_int_equal(st.sent, 2);
    sq_push_free(p);
    shutdown(x.lfd, SHUT_RDWR);
    assert_int_equal(pthread_join(th, NULL), 0);
    close(x.lfd);
    assert_int_equal(reqs_ts(x.body, ts, 2), 2);
}

/* A first second handed over late (the main thread was busy) used to pin the run's start that
 * much late, and every point after it was stamped in the future: the second one here, 3 s into
 * a run whose start was guessed from a first second 1 s in, got now + 2 s, and Prometheus's
 * instant query right after the run did not see it. Now each is at most the clock's now (a
 * millisecond more for two in the same millisecond) and after the one before; with the run's start
 * known (sq_push_set_start) each is that start plus its t_s. */
static void test_timestamps_not_ahead(void **state)
{
    (void)state;
    int64_t ts[2];
    double now;
    push_two(0, (const double[2]){1.0, 3.0}, ts, &now);
    assert_true(ts[0] < ts[1]);
    /* was about now + 2000; now + 1 where both came in the same millisecond */
    assert_true(ts[1] <= (int64_t)(now * 1000.0) + 1);
    double start = sq_wall_s() - 10;
    push_two(start, (const double[2]){1.0, 2.5}, ts, &now);
    assert_int_equal(ts[0], (int64_t)((start + 1.0) * 1000.0));
    assert_int_equal(ts[1], (int64_t)((start + 2.5) * 1000.0));
}

/* A receiver that answers the first try 401 and the retry never: the end's deadline (2 s) cuts
 * the retry short, and the result still says 401 (the receiver's answer), not the deadline
 * (which a slow receiver on a busy machine made the last error, and e2e.test_push's wrong
 * password case read no 401). */
static void test_end_deadline_keeps_the_answer(void **state)
{
    (void)state;
    struct rx x = {.lfd = socket(AF_INET, SOCK_STREAM, 0), .deny_then_hold = true};
    assert_true(x.lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(x.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t al = sizeof(a);
    assert_int_equal(getsockname(x.lfd, (struct sockaddr *)&a, &al), 0);
    assert_int_equal(listen(x.lfd, 16), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, rx_main, &x), 0);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/db", (unsigned)ntohs(a.sin_port));
    struct sq_push_labels lab = {.run = "r", .run_id = "i"};
    struct sq_push *p = NULL;
    char why[640];
    assert_int_equal(sq_push_open(SQ_PUSH_INFLUX, url, &lab, NULL, &p, why, sizeof(why)), 0);
    struct sq_second s = {.t_s = 1, .len_s = 1, .sent = 1, .completed = 1};
    sq_push_tick(p, &s);
    sq_push_finish(p, 2);
    struct sq_push_stats st;
    sq_push_stats(p, &st);
    assert_int_equal(st.failed, 1);
    assert_true(st.posts >= 2);
    assert_string_equal(st.last_error, "answered 'HTTP/1.1 401 Unauthorized'");
    sq_push_free(p);
    shutdown(x.lfd, SHUT_RDWR);
    assert_int_equal(pthread_join(th, NULL), 0);
    close(x.lfd);
    for (int i = 0; i < x.nheld; i++)
        close(x.held[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prom_write_request),
        cmocka_unit_test(test_influx_lines),
        cmocka_unit_test(test_custom_metrics),
        cmocka_unit_test(test_custom_tags),
        cmocka_unit_test(test_url_refusals),
        cmocka_unit_test(test_egress_policy),
        cmocka_unit_test(test_timestamps_not_ahead),
        cmocka_unit_test(test_end_deadline_keeps_the_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
