/* bench/micro/micro_cluster.c - what one second of a distributed run costs the agent and the
 * controller, besides the load itself: the agent encodes the second (counts, and two latency
 * histograms as base64 of their compressed encoding) into one JSON message; the controller
 * parses it, decodes both histograms and merges them into its totals and the second's merge.
 *
 *     build/bench/micro_cluster [messages_per_rep] [reps]
 *
 * The second's histograms hold 3,000 latencies (a 3,000 req/s second), log-normal around 2 ms
 * with a long tail. Prints the median µs per message for each side and the message's size. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "micro.h"
#include "base/clock.h"
#include "cluster/wire.h"
#include "stats/hist.h"

int main(int argc, char **argv)
{
    int per_rep = argc > 1 ? atoi(argv[1]) : 200;
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    if (per_rep <= 0 || reps <= 0 || reps > 101) {
        fprintf(stderr, "usage: micro_cluster [messages_per_rep] [reps (1..101)]\n");
        return 2;
    }
    struct sq_hist *h, *hu, *tot, *tot_u, *sec, *sec_u;
    if (sq_latency_hist_new(&h) < 0 || sq_latency_hist_new(&hu) < 0 ||
        sq_latency_hist_new(&tot) < 0 || sq_latency_hist_new(&tot_u) < 0 ||
        sq_latency_hist_new(&sec) < 0 || sq_latency_hist_new(&sec_u) < 0)
        return 1;
    for (int i = 0; i < 3000; i++) {
        double z = sqrt(-2.0 * log(micro_unit())) * cos(6.283185307179586 * micro_unit());
        double v = exp(log(2000.0) + 1.2 * z);
        sq_hist_record(h, v < 1 ? 1 : (int64_t)v);
        sq_hist_record(hu, v < 2 ? 1 : (int64_t)(v / 2));
    }
    struct sq_second s = {.t_s = 7.0,
                          .len_s = 1.0,
                          .sent = 3000,
                          .completed = 2998,
                          .failed = 2,
                          .errors = 2,
                          .bytes_received = 228000,
                          .active = 9};
    s.status[2] = 2998;
    s.errk[SQ_ERRK_TIMEOUT] = 2;
    double enc[101], dec[101];
    size_t size = 0;
    char *text = NULL;
    for (int r = 0; r < reps; r++) {
        int64_t t0 = sq_now_ns();
        for (int i = 0; i < per_rep; i++) {
            json_t *o = sq_wire_second(&s, h, hu);
            json_object_set_new(o, "op", json_string("iv"));
            json_object_set_new(o, "agent", json_string("5460348df69e2122"));
            json_object_set_new(o, "run", json_string("5f1c4a22b9df2010"));
            json_object_set_new(o, "n", json_integer(7));
            free(text);
            text = json_dumps(o, JSON_COMPACT);
            json_decref(o);
        }
        enc[r] = (double)(sq_now_ns() - t0) / per_rep / 1e3;
        size = strlen(text);
        t0 = sq_now_ns();
        for (int i = 0; i < per_rep; i++) {
            json_t *o = json_loads(text, 0, NULL);
            struct sq_second got;
            struct sq_hist *gh = NULL, *ghu = NULL;
            char err[64];
            if (!o || sq_wire_second_read(o, &got, &gh, &ghu, err, sizeof(err)) < 0)
                return 1;
            sq_hist_merge(tot, gh);
            sq_hist_merge(tot_u, ghu);
            sq_hist_merge(sec, gh);
            sq_hist_merge(sec_u, ghu);
            sq_hist_free(gh);
            sq_hist_free(ghu);
            json_decref(o);
        }
        dec[r] = (double)(sq_now_ns() - t0) / per_rep / 1e3;
    }
    printf("agent: one second's message (encode 2 histograms, JSON): %.1f us\n",
           micro_median(enc, reps));
    printf("controller: parse it, decode and merge both histograms twice: %.1f us\n",
           micro_median(dec, reps));
    printf("message size: %zu bytes\n", size);
    free(text);
    return 0;
}
