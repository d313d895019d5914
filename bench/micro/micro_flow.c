/* bench/micro/micro_flow.c - what a plan's flow costs the engine per iteration, without I/O.
 *
 *   empty iteration: what the worker does for an iteration of a one-step static flow besides
 *     the request itself - begin (feeder rows picked), the step's request (the static bytes, no
 *     rendering), the step's figures (duration histogram, status table), the end (iteration
 *     counter and histogram). The same calls worker.c makes, in the same order.
 *   login flow: the two-request login flow of docs/plans.md - templated JSON body from a feeder,
 *     JSON extraction of the token, a templated header, a status check - rendering and
 *     evaluating against canned responses. The login response's head is kept the way the worker
 *     keeps it for a step that reads headers (sq_flow_vu_keep_head: the head and the fields the
 *     HTTP/1.1 reader parsed, parsed once here as the reader would have), so the figure includes
 *     what a head costs the flow; the flow never parses it.
 *
 * usage: micro_flow [iterations] [repetitions]   prints the median ns per iteration
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "engine/flow.h"
#include "engine/run.h"
#include "http/h1.h"
#include "http/url.h"
#include "micro.h"
#include "plan/plan.h"
#include "stats/hist.h"

static const char *empty_plan = "target: http://127.0.0.1:8080\n"
                                "scenarios:\n"
                                "  s:\n"
                                "    executor: constant-vus\n"
                                "    vus: 1\n"
                                "    duration: 1s\n"
                                "    flow:\n"
                                "      - request: { url: /fast }\n";

static const char *login_plan =
    "target: http://127.0.0.1:8080\n"
    "data:\n"
    "  users: { csv: %s, mode: per-vu }\n"
    "scenarios:\n"
    "  s:\n"
    "    executor: constant-vus\n"
    "    vus: 1\n"
    "    duration: 1s\n"
    "    flow:\n"
    "      - name: login\n"
    "        request: { method: POST, url: /login, json: { user: \"{{users.name}}\", password: "
    "\"{{users.password}}\" } }\n"
    "        extract: { token: { json: \"$.token\" } }\n"
    "        check: { status: 200 }\n"
    "      - name: items\n"
    "        request:\n"
    "          url: \"/items?vu={{$vu}}&it={{$iteration}}\"\n"
    "          headers: { Authorization: \"Bearer {{token}}\" }\n"
    "        check: { status: 200 }\n";

static const char login_resp[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 "Content-Length: 45\r\n\r\n";
static const char login_body[] = "{\"token\":\"0123456789abcdef0123456789abcdef\"}";

static int load(const char *yaml, struct sq_plan **p, struct sq_flow **f, struct sq_url *u)
{
    struct sq_plan_error err;
    char msg[600];
    if (sq_plan_load_string("micro.yaml", yaml, strlen(yaml), p, &err) < 0) {
        sq_plan_error_format(&err, msg, sizeof(msg));
        fprintf(stderr, "micro_flow: %s\n", msg);
        return -1;
    }
    const char *why;
    if (sq_url_parse((*p)->target, u, &why) < 0 ||
        sq_flow_compile(*p, &(*p)->scenarios[0], u, NULL, f, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "micro_flow: cannot compile the flow\n");
        return -1;
    }
    return 0;
}

/* The per-step figures worker.c's flow_complete keeps. */
static void step_done(struct sq_step_stats *ss, uint16_t status, int64_t lat_us)
{
    ss->reqs++;
    sq_hist_record(ss->dur, lat_us);
    uint32_t i = 0;
    while (i < ss->nstatus && ss->by_status[i].status != status)
        i++;
    if (i < ss->nstatus) {
        ss->by_status[i].n++;
        sq_hist_record(ss->by_status[i].h, lat_us);
    }
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 1000000;
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    struct sq_plan *p, *lp;
    struct sq_flow *f, *lf;
    struct sq_url u, lu;
    char csv[] = "/tmp/micro_flow_XXXXXX";
    int fd = mkstemp(csv);
    if (fd < 0 || write(fd, "name,password\nalice,secret1\nbob,secret2\n", 40) != 40)
        return 1;
    close(fd);
    char yaml[2048];
    snprintf(yaml, sizeof(yaml), login_plan, csv);
    if (load(empty_plan, &p, &f, &u) < 0 || load(yaml, &lp, &lf, &lu) < 0)
        return 1;
    unlink(csv);

    struct sq_flow_vu v, lv;
    struct sq_step_stats ss[2] = {0};
    struct sq_hist *iter_hist;
    if (sq_flow_vu_init(&v, f, 1, 0) < 0 || sq_flow_vu_init(&lv, lf, 1, 0) < 0 ||
        sq_latency_hist_new(&iter_hist) < 0)
        return 1;
    for (int k = 0; k < 2; k++) {
        ss[k].check_pass = calloc(1, sizeof(uint64_t));
        ss[k].check_fail = calloc(1, sizeof(uint64_t));
        if (sq_latency_hist_new(&ss[k].dur) < 0 || sq_latency_hist_new(&ss[k].by_status[0].h) < 0)
            return 1;
        ss[k].by_status[0].status = 200;
        ss[k].nstatus = 1;
    }
    void **states = sq_flow_states_new(lf);
    /* what the reader hands the head callback: the login head's fields (spans into it) */
    struct sq_h1_header fields[16];
    struct sq_h1_response hr = {.headers = fields, .headers_cap = 16};
    if (sq_h1_parse_response_head(login_resp, sizeof(login_resp) - 1, NULL, &hr) <= 0)
        return 1;
    double t_empty[64], t_login[64];
    uint64_t sink = 0;
    for (int r = 0; r < reps && r < 64; r++) {
        int64_t t0 = sq_now_ns();
        for (long i = 0; i < iters; i++) {
            const char *req;
            size_t len;
            bool rendered;
            sq_flow_vu_begin(&v, f, t0);
            if (sq_flow_request(f, &f->steps[0], &v, &req, &len, &rendered) < 0)
                return 1;
            sink += len;
            step_done(&ss[0], 200, 100 + (i & 63));
            v.in_iter = false;
            v.iteration++;
            sq_hist_record(iter_hist, 100 + (i & 63));
        }
        t_empty[r] = (double)(sq_now_ns() - t0) / (double)iters;

        long liters = iters / 10;
        t0 = sq_now_ns();
        for (long i = 0; i < liters; i++) {
            const char *req;
            size_t len;
            bool rendered;
            struct sq_flow_outcome o;
            sq_flow_vu_begin(&lv, lf, t0);
            for (int s = 0; s < 2; s++) {
                if (sq_flow_request(lf, &lf->steps[s], &lv, &req, &len, &rendered) < 0)
                    return 1;
                sink += len;
                sq_buf_reset(&lv.head);
                sq_buf_reset(&lv.body);
                if (s == 0) {
                    sq_flow_vu_keep_head(&lv, login_resp, sizeof(login_resp) - 1, fields,
                                         hr.num_headers);
                    if (sq_buf_append(&lv.body, login_body, sizeof(login_body) - 1) < 0)
                        return 1;
                }
                sq_flow_eval(lf, &lf->steps[s], &lv, states, 200, 150, ss[s].check_pass,
                             ss[s].check_fail, &o);
                step_done(&ss[s], 200, 150);
            }
            lv.iteration++;
            sq_hist_record(iter_hist, 300);
        }
        t_login[r] = (double)(sq_now_ns() - t0) / (double)liters;
    }
    if (ss[0].check_fail[0] || ss[1].check_fail[0] || lv.vars[0].len != 32) {
        fprintf(stderr, "micro_flow: the login flow did not extract or check as expected\n");
        return 1;
    }
    printf("flow: empty iteration (one static step)  %.1f ns\n", micro_median(t_empty, reps));
    printf("flow: login flow iteration (2 requests)  %.1f ns  (render + extract + check)\n",
           micro_median(t_login, reps));
    printf("(sink %llu)\n", (unsigned long long)(sink & 1));
    return 0;
}
