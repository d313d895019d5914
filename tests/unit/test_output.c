/* test_output.c - output/: the result document, the terminal summary, the per-second writers and
 * the saved-result reader, compared byte for byte with golden files in tests/unit/golden/.
 *
 * Three kinds of input:
 *  - result models built here (a closed-loop run, an open-loop https run with streams, a plan
 *    run): the document sq_report_json_doc (+ sq_report_plan_sections) builds from each is
 *    compared with result_NAME.json, and its summary with result_NAME.txt. The document's
 *    "environment" and "squall_version" are replaced with fixed values first (they name the
 *    machine and the build). The summary of the document after a round trip through its JSON
 *    text must be the same bytes: what a run prints and what `squall report` reprints agree.
 *  - saved documents written by real runs (doc_NAME.in.json: `squall URL --json`, `squall run
 *    --json` against `squall target`; the same files seed fuzz/corpus/result/): their summary is
 *    compared with doc_NAME.txt. doc_minimal.in.json holds only the three required keys.
 *  - one run's seconds fed to the progress line, the CSV writer and the HDR interval log
 *    (series.csv, series.hdrlog, progress.txt, progress_tty.txt).
 *
 * Regenerating: after a change that is meant to alter an output, run
 *     SQ_UPDATE_GOLDEN=1 build/tests/test_output
 * which rewrites every golden file from the current code (the *.in.json inputs are never
 * rewritten), then read `git diff tests/unit/golden/` line by line before committing it. On a
 * mismatch the test writes what it got to ./NAME.actual (ctest runs in build/) and names the
 * first line that differs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/run.h"
#include "result/verdict.h"
#include "output/doc.h"
#include "output/figures.h"
#include "output/html.h"
#include "output/junit.h"
#include "output/json.h"
#include "output/plan_json.h"
#include "output/progress.h"
#include "output/series.h"
#include "output/summary.h"
#include "plan/plan.h"
#include "stats/hist.h"

/* ---- golden files ---- */

static const char *golden_path(const char *name, char *buf, size_t size)
{
    const char *slash = strrchr(__FILE__, '/');
    int dir = slash ? (int)(slash - __FILE__) : 1;
    snprintf(buf, size, "%.*s/golden/%s", dir, slash ? __FILE__ : ".", name);
    return buf;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void golden(const char *name, const char *got, size_t len)
{
    char path[1024];
    golden_path(name, path, sizeof(path));
    if (getenv("SQ_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(got, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
        print_message("updated %s\n", path);
        return;
    }
    size_t want_len = 0;
    char *want = slurp(path, &want_len);
    if (!want)
        fail_msg("%s: %s (SQ_UPDATE_GOLDEN=1 writes it)", path, strerror(errno));
    if (want_len == len && memcmp(want, got, len) == 0) {
        free(want);
        return;
    }
    char actual[300];
    snprintf(actual, sizeof(actual), "%s.actual", name);
    FILE *f = fopen(actual, "wb");
    if (f) {
        fwrite(got, 1, len, f);
        fclose(f);
    }
    size_t i = 0, line = 1, bol = 0;
    while (i < len && i < want_len && got[i] == want[i]) {
        if (got[i] == '\n') {
            line++;
            bol = i + 1;
        }
        i++;
    }
    const char *ge = memchr(got + bol, '\n', len - bol);
    const char *we = memchr(want + bol, '\n', want_len - bol);
    int gl = (int)(ge ? (size_t)(ge - got) - bol : len - bol);
    int wl = (int)(we ? (size_t)(we - want) - bol : want_len - bol);
    print_error("%s differs from what the code writes (saved in ./%s), first at line %zu:\n"
                "  golden: %.*s\n  got:    %.*s\n",
                path, actual, line, wl, want + bol, gl, got + bol);
    free(want);
    fail_msg("golden file %s differs", name);
}

/* Output written to a FILE, collected in memory. */
struct capture {
    char *buf;
    size_t len;
    FILE *f;
};

static FILE *capture_start(struct capture *c)
{
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    assert_non_null(c->f);
    return c->f;
}

static void capture_golden(struct capture *c, const char *name)
{
    assert_int_equal(fclose(c->f), 0);
    golden(name, c->buf, c->len);
    free(c->buf);
}

static char *summary_of(const json_t *doc, size_t *len)
{
    struct capture c;
    capture_start(&c);
    assert_int_equal(sq_report_summary(doc, c.f), 0);
    assert_int_equal(fclose(c.f), 0);
    *len = c.len;
    return c.buf;
}

static json_t *load_doc(const char *name)
{
    char path[1024];
    FILE *f = fopen(golden_path(name, path, sizeof(path)), "rb");
    if (!f)
        fail_msg("%s: %s", path, strerror(errno));
    json_t *doc = NULL;
    char why[400];
    int rc = sq_report_doc_read(f, &doc, why, sizeof(why));
    fclose(f);
    if (rc != 0)
        fail_msg("%s: %s", path, why);
    return doc;
}

/* ---- result models ---- */

static struct sq_hist *hist(void)
{
    struct sq_hist *h = NULL;
    assert_int_equal(sq_hist_new(1, 3600LL * 1000 * 1000, 3, &h), 0);
    return h;
}

/* n values spread from lo µs upwards (a long tail: every 50th is 40x slower). */
static struct sq_hist *hist_of(int n, int64_t lo)
{
    struct sq_hist *h = hist();
    for (int i = 0; i < n; i++)
        assert_true(sq_hist_record(h, lo + (int64_t)i * 3 + (i % 50 == 49 ? lo * 40 : 0)));
    return h;
}

static void series_of(struct sq_result *r, int seconds, double last_len)
{
    r->series.v = calloc((size_t)seconds, sizeof(*r->series.v));
    assert_non_null(r->series.v);
    r->series.n = r->series.cap = (size_t)seconds;
    for (int i = 0; i < seconds; i++) {
        struct sq_second *s = &r->series.v[i];
        s->len_s = i == seconds - 1 ? last_len : 1.0;
        s->t_s = i + s->len_s;
        s->sent = 400 + (uint64_t)i * 10;
        s->completed = s->sent - 1;
        s->failed = i == 1 ? 1 : 0;
        s->errors = s->failed;
        s->bytes_received = s->completed * 120;
        s->active = 4;
        s->p50_us = 250 + i;
        s->p90_us = 480 + i;
        s->p99_us = 2100 + i * 100;
        s->max_us = 9000 + i * 1000;
    }
}

static void result_dispose(struct sq_result *r)
{
    sq_hist_free(r->latency);
    sq_hist_free(r->latency_uncorrected);
    for (int k = 0; k < SQ_PHASE_COUNT; k++)
        sq_hist_free(r->phase[k]);
    sq_hist_free(r->sse_first_event);
    sq_hist_free(r->sse_duration);
    free(r->series.v);
    for (uint32_t i = 0; i < r->nscens; i++) {
        struct sq_scen_result *s = &r->scens[i];
        sq_hist_free(s->latency);
        sq_hist_free(s->iter_dur);
        for (size_t k = 0; k < s->nsteps; k++) {
            sq_hist_free(s->steps[k].dur);
            for (uint32_t b = 0; b < s->steps[k].nstatus; b++)
                sq_hist_free(s->steps[k].by_status[b].h);
            free(s->steps[k].check_pass);
            free(s->steps[k].check_fail);
        }
        free(s->steps);
    }
    free(r->scens);
}

/* A closed-loop HTTP/1.1 run of 4 VUs for 2 s, with phases, a timeout and a reset connection. */
static void closed_result(struct sq_result *r, struct sq_exec *e)
{
    memset(r, 0, sizeof(*r));
    memset(e, 0, sizeof(*e));
    e->kind = SQ_EXEC_CONSTANT_VUS;
    e->vus = 4;
    e->duration_ns = 2 * 1000000000LL;
    r->seed = 9007199254740991ull; /* the largest: exact in the document */
    const char *why = NULL;
    assert_int_equal(sq_exec_prepare(e, &why), 0);
    r->latency = hist_of(1000, 180);
    r->c.sent = 1003;
    r->c.completed = 1000;
    r->c.failed = 2;
    r->in_flight = 1;
    r->c.status[2] = 990;
    r->c.status[5] = 10;
    r->status_codes[200] = 990;
    r->status_codes[503] = 10;
    r->c.errors[SQ_ERRK_TIMEOUT] = 1;
    r->c.errors[SQ_ERRK_CLOSED] = 1;
    r->c.errors[SQ_ERRK_CONNECT] = 3;
    r->c.bytes_sent = 1003 * 64;
    r->c.bytes_received = 1000 * 120;
    r->c.body_bytes = 1000 * 2;
    r->c.conns_opened = 5;
    r->c.conns_closed_by_server = 1;
    r->setup_ns = 1234567;
    r->duration_ns = 2050000000;
    r->threads = 2;
    r->connections = 4;
    r->dns_ns = 21000;
    for (int k = 0; k < SQ_PHASE_COUNT; k++)
        r->phase[k] = k == SQ_PHASE_DNS ? hist() : hist_of(200, 1 + k * 20);
    series_of(r, 3, 0.05);
}

static struct sq_report_info closed_info(const struct sq_exec *e)
{
    return (struct sq_report_info){.url = "http://127.0.0.1:8080/fast",
                                   .method = "GET",
                                   .target_addr = "127.0.0.1:8080",
                                   .exec = e,
                                   .threads = 2,
                                   .timeout_ns = 10 * 1000000000LL,
                                   .connect_timeout_ns = 5 * 1000000000LL,
                                   .request_bytes = 64,
                                   .accept_encoding = "gzip, deflate, br, zstd",
                                   .protocol = "http/1.1"};
}

/* An open-loop https run at 500/s with dropped arrivals, an event stream and a TLS error. */
static void open_result(struct sq_result *r, struct sq_exec *e)
{
    memset(r, 0, sizeof(*r));
    memset(e, 0, sizeof(*e));
    e->kind = SQ_EXEC_CONSTANT_ARRIVAL_RATE;
    e->vus = 8;
    e->rate = 500;
    r->seed = 42;
    e->duration_ns = 3 * 1000000000LL;
    e->max_in_flight = 16;
    const char *why = NULL;
    assert_int_equal(sq_exec_prepare(e, &why), 0);
    r->open = true;
    r->latency = hist_of(1490, 900);
    r->latency_uncorrected = hist_of(1490, 700);
    r->arrivals = 1500;
    r->c.sent = 1492;
    r->c.dropped = 8;
    r->c.completed = 1490;
    r->c.failed = 2;
    r->c.status[2] = 1490;
    r->status_codes[200] = 1490;
    r->c.errors[SQ_ERRK_TLS] = 2;
    r->c.tls_handshakes = 9;
    r->c.tls_resumed = 1;
    r->c.tls_handshake_errors = 1;
    r->c.bytes_sent = 1492 * 80;
    r->c.bytes_received = 1490 * 900;
    r->c.body_bytes = 1490 * 4000;
    r->c.compressed = 1490;
    r->c.undecodable = 3;
    r->c.conns_opened = 9;
    r->c.sse_streams = 1490;
    r->c.sse_events = 7450;
    r->sse_first_event = hist_of(1490, 5000);
    r->sse_duration = hist_of(1490, 45000);
    r->tls = true;
    r->tls_version = "TLSv1.3";
    r->tls_cipher = "TLS_AES_256_GCM_SHA384";
    r->tls_alpn = "http/1.1";
    snprintf(r->tls_error, sizeof(r->tls_error), "%s",
             "certificate verify failed: self-signed certificate (depth 0, CN=localhost)");
    r->setup_ns = 8000000;
    r->duration_ns = 3001000000;
    r->spin_ns = 123456;
    r->threads = 1;
    r->connections = 8;
    r->samples_written = 1490;
    r->samples_lost = 2;
    r->dns_ns = 1500;
    r->dns_lookups = 3;
    series_of(r, 4, 0.001);
}

static json_t *fixed(json_t *doc)
{
    assert_non_null(doc);
    json_object_set_new(doc, "squall_version", json_string("TEST"));
    json_object_set_new(doc, "environment",
                        json_pack("{s:s, s:s, s:s, s:s, s:i}", "squall_version", "TEST", "host",
                                  "golden", "os", "Linux", "kernel", "6.1.0", "cpus", 2));
    json_object_set_new(json_object_get(doc, "run"), "host", json_string("golden"));
    return doc;
}

static char *dump(const json_t *doc, size_t *len)
{
    struct capture c;
    capture_start(&c);
    assert_int_equal(sq_report_json_write(c.f, doc), 0);
    assert_int_equal(fclose(c.f), 0);
    *len = c.len;
    return c.buf;
}

/* The document and its summary against golden files, and the summary again after a round trip
 * through the JSON text (what `squall report` reads). */
static void check_doc(const json_t *doc, const char *name)
{
    char file[128];
    size_t jlen, slen, s2len;
    char *text = dump(doc, &jlen);
    snprintf(file, sizeof(file), "result_%s.json", name);
    golden(file, text, jlen);
    char *summary = summary_of(doc, &slen);
    snprintf(file, sizeof(file), "result_%s.txt", name);
    golden(file, summary, slen);

    FILE *f = fmemopen(text, jlen, "rb");
    assert_non_null(f);
    json_t *back = NULL;
    char why[400];
    assert_int_equal(sq_report_doc_read(f, &back, why, sizeof(why)), 0);
    fclose(f);
    char *again = summary_of(back, &s2len);
    assert_int_equal(s2len, slen);
    assert_memory_equal(again, summary, slen);
    json_decref(back);
    free(again);
    free(summary);
    free(text);
}

static void test_closed_run(void **state)
{
    (void)state;
    struct sq_result r;
    struct sq_exec e;
    closed_result(&r, &e);
    struct sq_report_info info = closed_info(&e);
    json_t *doc = fixed(sq_report_json_doc(&info, &r));
    check_doc(doc, "closed");
    json_decref(doc);
    result_dispose(&r);
}

static void test_open_tls_run(void **state)
{
    (void)state;
    struct sq_result r;
    struct sq_exec e;
    open_result(&r, &e);
    struct sq_report_info info = closed_info(&e);
    info.url = "https://localhost:8443/sse?events=5";
    info.target_addr = "[::1]:8443";
    info.threads = 1;
    info.request_bytes = 80;
    info.accept_encoding = NULL;
    info.protocol = "h2";
    info.streams = 4;
    json_t *doc = fixed(sq_report_json_doc(&info, &r));
    check_doc(doc, "open");
    json_decref(doc);
    result_dispose(&r);
}

static const char plan_yaml[] = "target: http://127.0.0.1:8080\n"
                                "scenarios:\n"
                                "  api:\n"
                                "    executor: per-vu-iterations\n"
                                "    vus: 2\n"
                                "    iterations: 50\n"
                                "    flow:\n"
                                "      - name: home\n"
                                "        request: { url: /fast }\n"
                                "        check: { status: 200 }\n"
                                "      - name: login\n"
                                "        request: { method: POST, url: /login, body: x }\n"
                                "        check: { status: 200, body_contains: token }\n";

static void test_plan_run(void **state)
{
    (void)state;
    struct sq_plan *p = NULL;
    struct sq_plan_error err;
    memset(&err, 0, sizeof(err));
    int rc = sq_plan_load_string("golden.yaml", plan_yaml, strlen(plan_yaml), &p, &err);
    if (rc != 0)
        fail_msg("plan: %s", err.msg);
    assert_int_equal(p->nscenarios, 1);
    assert_int_equal(p->scenarios[0].nsteps, 2);

    struct sq_result r;
    struct sq_exec e;
    closed_result(&r, &e);
    r.nscens = 1;
    r.scens = calloc(1, sizeof(*r.scens));
    assert_non_null(r.scens);
    struct sq_scen_result *s = &r.scens[0];
    s->name = "api";
    s->latency = hist_of(200, 150);
    s->iter_dur = hist_of(100, 400);
    s->vus_max = 2;
    s->c.iterations = 100;
    s->c.bytes_sent = 12800;
    s->c.bytes_received = 34000;
    s->nsteps = 2;
    s->steps = calloc(2, sizeof(*s->steps));
    assert_non_null(s->steps);
    for (size_t k = 0; k < 2; k++) {
        struct sq_step_stats *st = &s->steps[k];
        st->reqs = 100;
        st->failed = k == 1 ? 4 : 0;
        st->errors = k == 1 ? 1 : 0;
        st->dur = hist_of(k == 1 ? 99 : 100, 150 + (int64_t)k * 100);
        st->nstatus = k == 1 ? 2 : 1;
        st->by_status[0].status = 200;
        st->by_status[0].n = 100 - st->failed;
        st->by_status[0].h = hist_of((int)st->by_status[0].n, 150);
        if (k == 1) {
            st->by_status[1].status = 503;
            st->by_status[1].n = 3;
            st->by_status[1].h = hist_of(3, 900);
        }
        size_t nchecks = p->scenarios[0].steps[k].nchecks;
        st->check_pass = calloc(nchecks, sizeof(uint64_t));
        st->check_fail = calloc(nchecks, sizeof(uint64_t));
        for (size_t c = 0; c < nchecks; c++) {
            st->check_pass[c] = 100 - st->failed - c;
            st->check_fail[c] = st->failed + c;
        }
    }
    struct sq_report_info info = closed_info(&p->scenarios[0].exec);
    info.url = "golden.yaml";
    info.method = "run";
    info.protocol = NULL;
    json_t *doc = fixed(sq_report_json_doc(&info, &r));
    assert_int_equal(sq_report_plan_sections(doc, p, &r, NULL), 0);
    check_doc(doc, "plan");
    json_decref(doc);
    result_dispose(&r);
    sq_plan_free(p);
}

/* ---- saved documents ---- */

static void summary_golden(const char *in, const char *out)
{
    json_t *doc = load_doc(in);
    size_t len;
    char *s = summary_of(doc, &len);
    golden(out, s, len);
    free(s);
    json_decref(doc);
}

static void test_saved_documents(void **state)
{
    (void)state;
    static const char *const names[] = {"quick", "open", "plan", "tls", "h2", "503", "minimal"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char in[64], out[64];
        snprintf(in, sizeof(in), "doc_%s.in.json", names[i]);
        snprintf(out, sizeof(out), "doc_%s.txt", names[i]);
        summary_golden(in, out);
    }
}

static void test_saved_document_html(void **state)
{
    (void)state;
    /* The report renders every saved document; its bytes embed uPlot from npm, so they are
     * checked for shape here and in a browser by tests/browser, not against a golden file. */
    static const char *const names[] = {"quick", "open", "plan", "tls", "h2", "503", "minimal"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char in[64];
        snprintf(in, sizeof(in), "doc_%s.in.json", names[i]);
        json_t *doc = load_doc(in);
        struct capture c;
        capture_start(&c);
        assert_int_equal(sq_report_html(doc, c.f), 0);
        assert_int_equal(fclose(c.f), 0);
        assert_non_null(strstr(c.buf, "<!DOCTYPE html>"));
        assert_non_null(strstr(c.buf, "id=\"squall-data\""));
        assert_non_null(strstr(c.buf, "</html>"));
        free(c.buf);
        json_decref(doc);
    }
}

/* The report's own markup is written as markup (never escaped with the data) in the tables and
 * the sampled exchanges, and every string of the document is escaped once. */
static void test_html_markup_once(void **state)
{
    (void)state;
    json_t *doc = load_doc("doc_quick.in.json");
    json_object_set_new(doc, "failures",
                        json_pack("{s:i, s:i, s:{s:f}}", "transport", 1, "http", 2,
                                  "http_req_failed", "rate", 0.5));
    json_t *sample = json_pack(
        "{s:f, s:i, s:n, s:f, s:{s:s, s:b}, s:{s:s, s:b, s:s, s:i, s:b}}", "t_s", 0.25, "status",
        500, "error", "latency_ms", 1.5, "request", "text", "GET /<b>x</b> HTTP/1.1\r\n\r\n", "cut",
        0, "response", "head", "HTTP/1.1 500 E\r\nX-E: <i>h</i>\r\n\r\n", "head_cut", 0, "body",
        "</pre><img src=x onerror=alert(1)>", "body_bytes", 9000, "body_cut", 1);
    json_object_set_new(doc, "sampled_exchanges",
                        json_pack("{s:i, s:[{s:s, s:s, s:i, s:[o]}]}", "per_class", 5, "classes",
                                  "class", "5xx", "kind", "status", "seen", 7, "samples", sample));
    struct capture c;
    capture_start(&c);
    assert_int_equal(sq_report_html(doc, c.f), 0);
    assert_int_equal(fclose(c.f), 0);
    assert_non_null(
        strstr(c.buf, "</td></tr>\n<tr><th>http_req_failed (k6: both)</th><td class=\"n\">50.00%"));
    assert_non_null(strstr(c.buf, "<details class=\"sample\"><summary>0.250 s · 500 · 1.500 ms · "
                                  "GET /&lt;b&gt;x&lt;/b&gt; HTTP/1.1</summary>"));
    assert_non_null(strstr(c.buf, "X-E: &lt;i&gt;h&lt;/i&gt;"));
    assert_non_null(strstr(c.buf, "&lt;/pre&gt;&lt;img src=x onerror=alert(1)&gt;[… 9,000 bytes"));
    assert_null(strstr(c.buf, "&lt;td"));
    assert_null(strstr(c.buf, "&lt;tr"));
    assert_null(strstr(c.buf, "&lt;details"));
    assert_null(strstr(c.buf, "&lt;p class"));
    assert_null(strstr(c.buf, "<img"));
    assert_null(strstr(c.buf, "&amp;lt;")); /* nothing escaped twice */
    free(c.buf);
    json_decref(doc);
}

/* ---- the saved-result reader on bad input ---- */

static int read_text(const char *text, json_t **doc, char *why, size_t len)
{
    FILE *f = fmemopen((void *)text, strlen(text), "rb");
    assert_non_null(f);
    *doc = NULL;
    int rc = sq_report_doc_read(f, doc, why, len);
    fclose(f);
    return rc;
}

static void test_reader_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"", "not JSON: "},
        {"squall http://x -d 3s\n", "not JSON: "},
        {"{\"schema\": \"squall.result/1\", \"requests\": {", "not JSON: "},
        {"{\"schema\": \"squall.result/1\",\n \"requests\": {}, \"latency\": {}, \"requests\": {}}",
         "not JSON: duplicate object key near '\"requests\"' (line 2, column"},
        {"[1, 2]", "not a squall result this version reads: not a JSON object"},
        {"{\"name\": \"x\"}", "not a squall result this version reads: no \"schema\" key"},
        {"{\"schema\": \"squall.result/2\", \"requests\": {}, \"latency\": {}}",
         "not a squall result this version reads: schema 'squall.result/2' is not "
         "squall.result/1"},
        {"{\"schema\": \"x\\ny\", \"requests\": {}, \"latency\": {}}",
         "schema 'x?y' is not squall.result/1"},
        {"{\"schema\": 1, \"requests\": {}, \"latency\": {}}",
         "not a squall result this version reads: \"schema\" is not squall.result/1"},
        {"{\"schema\": \"squall.result/1\", \"latency\": {}}", "no \"requests\" object"},
        {"{\"schema\": \"squall.result/1\", \"requests\": [], \"latency\": {}}",
         "no \"requests\" object"},
        {"{\"schema\": \"squall.result/1\", \"requests\": {}}", "no \"latency\" object"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *doc;
        char why[400] = "";
        int rc = read_text(cases[i].text, &doc, why, sizeof(why));
        if (rc != -SQ_EPARSE || doc)
            fail_msg("case %zu: accepted", i);
        if (!strstr(why, cases[i].why))
            fail_msg("case %zu: '%s' lacks '%s'", i, why, cases[i].why);
        if (strchr(why, '\n'))
            fail_msg("case %zu: '%s' is more than one line", i, why);
    }
    /* The renderers refuse what the reader would. */
    json_t *bad = json_pack("{s:s}", "schema", "squall.result/1");
    FILE *null = fopen("/dev/null", "w");
    assert_non_null(null);
    assert_int_equal(sq_report_summary(bad, null), -SQ_EPARSE);
    assert_int_equal(sq_report_html(bad, null), -SQ_EPARSE);
    fclose(null);
    json_decref(bad);
}

static void test_hostile_values(void **state)
{
    (void)state;
    /* Wrong types, negative and huge numbers, NaN-free but absurd figures, a histogram that is
     * not one: the summary prints what it can and never guesses or crashes. */
    const char *text =
        "{\"schema\": \"squall.result/1\", \"mode\": \"open-loop\", \"duration_s\": -5,"
        " \"config\": {\"url\": 7, \"method\": [], \"executor\": {\"kind\": {}, \"iterations\":"
        " 1e300}},"
        " \"requests\": {\"sent\": -1, \"completed\": 1e30, \"failed\": \"x\", \"in_flight\": "
        "null},"
        " \"latency\": {\"count\": 3, \"min_us\": -1e308, \"max_us\": 1e308, \"histogram\":"
        " {\"data\": \"not base64!\"}},"
        " \"status\": {\"2xx\": 1.5, \"zzz\": 2, \"5xx\": -3}, \"errors\": [1, 2],"
        " \"steps\": [1, {\"step\": 3}], \"checks\": {}, \"thresholds\": [null]}";
    json_t *doc;
    char why[400];
    assert_int_equal(read_text(text, &doc, why, sizeof(why)), 0);
    size_t len;
    char *s = summary_of(doc, &len);
    golden("doc_hostile.txt", s, len);
    free(s);
    json_decref(doc);
}

/* ---- the JUnit XML ---- */

static char *junit_of(const json_t *doc, size_t *len)
{
    struct capture c;
    capture_start(&c);
    assert_int_equal(sq_report_junit(doc, c.f), 0);
    assert_int_equal(fclose(c.f), 0);
    *len = c.len;
    return c.buf;
}

static char *esc_of(const char *s)
{
    struct capture c;
    capture_start(&c);
    sq_report_xml_esc(c.f, s);
    assert_int_equal(fclose(c.f), 0);
    return c.buf;
}

/* The plan document's thresholds (one failed) and checks, against a golden file; a document of
 * wrong types and hostile strings renders, escaped, and counts only what it can read. */
static void test_junit(void **state)
{
    (void)state;
    json_t *doc = load_doc("doc_plan.in.json");
    size_t len;
    char *x = junit_of(doc, &len);
    golden("doc_plan.junit.xml", x, len);
    free(x);
    json_decref(doc);

    static const struct {
        const char *in, *out;
    } esc[] = {
        {"plain", "plain"},
        {"<&\"']]>", "&lt;&amp;&quot;&apos;]]&gt;"},
        {"a\tb\nc\rd", "a&#9;b&#10;c&#13;d"},
        {"\x01\x1f\x7f", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xC2\x85", "\xEF\xBF\xBD"},                               /* C1 NEL */
        {"\xEF\xBF\xBE|\xEF\xBF\xBF", "\xEF\xBF\xBD|\xEF\xBF\xBD"}, /* U+FFFE, U+FFFF */
        {"\xff\xc3", "\xEF\xBF\xBD\xEF\xBF\xBD"},                   /* ill-formed, cut short */
        {"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"},
    };
    for (size_t i = 0; i < sizeof(esc) / sizeof(esc[0]); i++) {
        char *got = esc_of(esc[i].in);
        assert_string_equal(got, esc[i].out);
        free(got);
    }

    const char *text =
        "{\"schema\": \"squall.result/1\", \"requests\": {}, \"latency\": {},"
        " \"duration_s\": -1, \"run\": {\"name\": \"<x>\\u0001\", \"seed\": \"s\"},"
        " \"aborted\": true, \"abort_reason\": \"a&b\","
        " \"thresholds\": [null, 3, {\"metric\": \"checks\", \"expression\": \"no operator\","
        " \"value\": 1e300, \"ok\": \"yes\"}, {\"metric\": [], \"expression\": \"p(9\\\"5) < 1\","
        " \"ok\": true}],"
        " \"checks\": [{\"scenario\": \"s\", \"step\": \"</testcase>\", \"check\": \"c\","
        " \"passed\": -5, \"failed\": 1e30}, {\"passed\": 0, \"failed\": 0}]}";
    char why[400];
    assert_int_equal(read_text(text, &doc, why, sizeof(why)), 0);
    x = junit_of(doc, &len);
    assert_null(memchr(x, '\x01', len));
    assert_null(strstr(x, "<x>"));
    assert_null(strstr(x, "</testcase></testcase>"));
    assert_non_null(strstr(x, "<testsuites name=\"squall: &lt;x&gt;\xEF\xBF\xBD\" tests=\"4\" "
                              "failures=\"2\" errors=\"0\" skipped=\"1\" time=\"0.000\">"));
    assert_non_null(strstr(x, "value=\"a&amp;b\""));
    assert_non_null(strstr(x, "message=\"value 1e+300, bound no operator\""));
    assert_non_null(strstr(x, "name=\"&lt;/testcase&gt;: c\""));
    free(x);
    json_decref(doc);
}

/* ---- the per-second writers ---- */

static void test_series_writers(void **state)
{
    (void)state;
    struct sq_result r;
    memset(&r, 0, sizeof(r));
    series_of(&r, 3, 0.25);
    struct capture csv, hdr, prog, tty;
    capture_start(&csv);
    capture_start(&hdr);
    capture_start(&prog);
    capture_start(&tty);
    struct sq_progress p = {.f = prog.f, .every_s = 2, .length_s = 2.25};
    struct sq_progress pt = {.f = tty.f, .tty = true, .color = true, .length_s = 2.25, .open = 1};
    sq_csv_header(csv.f, NULL, 0);
    sq_hdrlog_header(hdr.f, 1767225600.125); /* 2026-01-01T00:00:00.125Z */
    for (size_t i = 0; i < r.series.n; i++) {
        struct sq_second *s = &r.series.v[i];
        if (i == 2) {
            s->dropped = 7;
            s->errors = 5;
        }
        struct sq_hist *h = hist_of((int)s->completed, 200 + (int64_t)i * 10);
        sq_csv_row(csv.f, s, NULL, 0);
        assert_int_equal(sq_hdrlog_line(hdr.f, s, h), 0);
        sq_progress_tick(&p, s);
        sq_progress_tick(&pt, s);
        sq_hist_free(h);
    }
    assert_false(p.drawn);
    assert_true(pt.drawn);
    sq_progress_finish(&pt);
    assert_false(pt.drawn);
    assert_int_equal(pt.errors_so_far, 6);
    capture_golden(&csv, "series.csv");
    capture_golden(&hdr, "series.hdrlog");
    capture_golden(&prog, "progress.txt");
    capture_golden(&tty, "progress_tty.txt");
    free(r.series.v);
}

static void test_latency_figures(void **state)
{
    (void)state;
    struct sq_latency_figures lf;
    struct sq_hist *h = hist();
    sq_report_latency_figures(h, &lf);
    assert_int_equal(lf.count, 0);
    assert_int_equal(lf.max, 0);
    assert_false(sq_hist_record(h, -1)); /* out of range: counted apart, not in the figures */
    assert_true(sq_hist_record(h, 100));
    assert_true(sq_hist_record(h, 300));
    sq_report_latency_figures(h, &lf);
    assert_int_equal(lf.count, 2);
    assert_int_equal(lf.min, 100);
    assert_true(lf.max >= 300 && lf.max <= 301);
    assert_true(lf.p50 >= 100 && lf.p50 <= 101);
    sq_hist_free(h);
}

/* The rule behind exit code 1 (result/verdict.h) and the line that says why. */
static void test_nothing_succeeded(void **state)
{
    (void)state;
    char buf[1024];
    struct sq_result r;
    memset(&r, 0, sizeof(r));
    /* a response of any status did the job */
    r.c.sent = r.c.completed = 3;
    r.c.status[5] = 3;
    assert_true(sq_result_succeeded(&r));

    /* every request timed out: the count, the kind and what it means */
    memset(&r, 0, sizeof(r));
    r.c.sent = r.c.failed = r.c.errors[SQ_ERRK_TIMEOUT] = 12408;
    r.c.iterations = 12408; /* each iteration ended, after its failed request */
    assert_false(sq_result_succeeded(&r));
    assert_string_equal(sq_report_why_failed(&r, 1000000000, buf, sizeof(buf)),
                        "12,408 failed: timeout 12,408 (no complete response within the 1s "
                        "timeout)");

    /* the largest three kinds, then how many more */
    r.c.errors[SQ_ERRK_PARSE] = 20000;
    r.c.errors[SQ_ERRK_CLOSED] = 3;
    r.c.errors[SQ_ERRK_CONNECT] = 2;
    r.c.errors[SQ_ERRK_DECODE] = 1;
    r.first_connect_err = -ECONNREFUSED;
    r.c.failed = 12408 + 20000 + 3 + 1;
    sq_report_why_failed(&r, 1000000000, buf, sizeof(buf));
    assert_non_null(strstr(buf, "32,412 failed: parse 20,000 (a response that is not valid"));
    assert_non_null(strstr(buf, "; timeout 12,408 (no complete"));
    assert_non_null(strstr(buf, "; closed 3 (the server closed"));
    assert_non_null(strstr(buf, "; 2 more kinds in the summary"));
    assert_null(strstr(buf, "connect 2")); /* the fourth largest: counted, not named */

    /* a run that gave up: its reason first */
    memset(&r, 0, sizeof(r));
    r.aborted = true;
    r.c.errors[SQ_ERRK_CONNECT] = 8;
    snprintf(r.abort_reason, sizeof(r.abort_reason),
             "no connection could be made to 127.0.0.1:1: Connection refused");
    assert_false(sq_result_succeeded(&r));
    assert_string_equal(sq_report_why_failed(&r, 1000000000, buf, sizeof(buf)),
                        "no connection could be made to 127.0.0.1:1: Connection refused");

    /* TLS refused the requests (a client certificate, after a TLS 1.3 handshake) */
    memset(&r, 0, sizeof(r));
    r.c.sent = r.c.failed = 5;
    r.c.errors[SQ_ERRK_TLS] = 7;
    snprintf(r.tls_error, sizeof(r.tls_error), "read failed: certificate required");
    assert_string_equal(sq_report_why_failed(&r, 1000000000, buf, sizeof(buf)),
                        "tls: read failed: certificate required; 5 failed: tls 7");

    /* shorter than the timeout: still out at the end */
    memset(&r, 0, sizeof(r));
    r.c.sent = r.in_flight = 2;
    assert_string_equal(sq_report_why_failed(&r, 10000000000, buf, sizeof(buf)),
                        "2 sent, none answered before the run ended (2 still in flight)");

    /* a plan: a publish step that completed is a success, one that failed is not; a flow of
     * think steps alone succeeds with an iteration */
    struct sq_step_stats steps[2];
    struct sq_scen_result sc;
    memset(&r, 0, sizeof(r));
    memset(steps, 0, sizeof(steps));
    memset(&sc, 0, sizeof(sc));
    sc.steps = steps;
    sc.nsteps = 2;
    r.scens = &sc;
    r.nscens = 1;
    r.c.iterations = 10;
    steps[0].reqs = steps[0].errors = 10; /* every publish timed out */
    r.c.errors[SQ_ERRK_TIMEOUT] = 10;
    assert_false(sq_result_succeeded(&r));
    assert_int_equal(sq_result_failed_units(&r), 10);
    assert_string_equal(sq_report_why_failed(&r, 300000000, buf, sizeof(buf)),
                        "10 failed: timeout 10 (no complete response within the 0.3s timeout)");
    steps[0].errors = 9; /* one publish the broker took */
    assert_true(sq_result_succeeded(&r));
    memset(steps, 0, sizeof(steps)); /* think steps only */
    memset(&r.c, 0, sizeof(r.c));
    r.c.iterations = 4;
    assert_true(sq_result_succeeded(&r));
    r.c.iterations = 0;
    assert_false(sq_result_succeeded(&r));
    assert_string_equal(sq_report_why_failed(&r, 300000000, buf, sizeof(buf)),
                        "nothing was sent (the flow's steps were never started)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_run),
        cmocka_unit_test(test_open_tls_run),
        cmocka_unit_test(test_plan_run),
        cmocka_unit_test(test_saved_documents),
        cmocka_unit_test(test_saved_document_html),
        cmocka_unit_test(test_html_markup_once),
        cmocka_unit_test(test_reader_refusals),
        cmocka_unit_test(test_hostile_values),
        cmocka_unit_test(test_junit),
        cmocka_unit_test(test_series_writers),
        cmocka_unit_test(test_latency_figures),
        cmocka_unit_test(test_nothing_succeeded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
