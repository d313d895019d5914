/* nats_sub_libnats.c - NATS subscribers on cnats (Debian's libnats), the comparison arm of
 * bench/pipeline_figures.py's fan-out and JetStream consume figures.
 *
 *   nats_sub_libnats PORT core SUBJECT N M       N connections, each one SUB on SUBJECT
 *                                                (asynchronous callback), until each has M
 *                                                messages or nothing came for IDLE s
 *   nats_sub_libnats PORT pull STREAM SUBJECT N M BATCH
 *                                                N connections, each its own ephemeral pull
 *                                                consumer (explicit acks, deliver policy new,
 *                                                max ack pending 100,000, as squall's), a
 *                                                thread each fetching BATCH at a time and
 *                                                acking every message, until M each
 *   nats_sub_libnats PORT mkstream STREAM SUBJECT    a memory stream on SUBJECT (made anew)
 *   nats_sub_libnats PORT rmstream STREAM
 *
 * Prints {"received":R,"seconds":T}: T from the program's start to the last message of the
 * slowest subscriber (the same span squall's per-subscriber msgs_per_s is over).
 * --idle S (default 3) ends a subscriber that got nothing for S seconds.
 * Built only when libnats is installed (scripts/deps.sh bench).
 */
#include <nats/nats.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check(natsStatus s, const char *what)
{
    if (s != NATS_OK) {
        fprintf(stderr, "nats_sub_libnats: %s: %s\n", what, natsStatus_GetText(s));
        nats_PrintLastErrorStack(stderr);
        exit(1);
    }
}

struct sub {
    natsConnection *nc;
    natsSubscription *s;
    jsCtx *js;
    pthread_t th;
    long got;    /* written by one delivery thread, read by main */
    double last; /* the last message's time */
};

static long want;
static int batch = 100;
static double idle_s = 3.0;

static void on_msg(natsConnection *nc, natsSubscription *s, natsMsg *m, void *closure)
{
    (void)nc;
    (void)s;
    struct sub *u = closure;
    natsMsg_Destroy(m);
    double t = now();
    __atomic_store(&u->last, &t, __ATOMIC_RELAXED);
    __atomic_add_fetch(&u->got, 1, __ATOMIC_RELAXED);
}

static void *pull_loop(void *arg)
{
    struct sub *u = arg;
    double quiet_since = now();
    while (u->got < want && now() - quiet_since < idle_s) {
        natsMsgList list = {0};
        jsErrCode jerr = 0;
        natsStatus s = natsSubscription_Fetch(&list, u->s, batch, 1000, &jerr);
        if (s == NATS_TIMEOUT)
            continue;
        check(s, "fetch");
        for (int i = 0; i < list.Count; i++) {
            natsMsg_Ack(list.Msgs[i], NULL);
            u->got++;
        }
        if (list.Count) {
            u->last = now();
            quiet_since = u->last;
        }
        natsMsgList_Destroy(&list);
    }
    return NULL;
}

static void connect_to(natsConnection **nc, const char *port)
{
    char url[64];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%s", port);
    check(natsConnection_ConnectTo(nc, url), "connect");
}

static int stream_admin(const char *port, int make, const char *stream, const char *subject)
{
    natsConnection *nc;
    jsCtx *js;
    connect_to(&nc, port);
    check(natsConnection_JetStream(&js, nc, NULL), "JetStream");
    jsErrCode jerr = 0;
    js_DeleteStream(js, stream, NULL, &jerr); /* absent is fine */
    if (make) {
        jsStreamConfig cfg;
        jsStreamConfig_Init(&cfg);
        cfg.Name = stream;
        const char *subs[1] = {subject};
        cfg.Subjects = subs;
        cfg.SubjectsLen = 1;
        cfg.Storage = js_MemoryStorage;
        jsStreamInfo *si = NULL;
        check(js_AddStream(&si, js, &cfg, NULL, &jerr), "add stream");
        jsStreamInfo_Destroy(si);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--idle") == 0) {
            idle_s = atof(argv[i + 1]);
            memmove(argv + i, argv + i + 2, (size_t)(argc - i - 2) * sizeof(*argv));
            argc -= 2;
            break;
        }
    if (argc >= 5 && strcmp(argv[2], "mkstream") == 0)
        return stream_admin(argv[1], 1, argv[3], argv[4]);
    if (argc >= 4 && strcmp(argv[2], "rmstream") == 0)
        return stream_admin(argv[1], 0, argv[3], NULL);
    int pull = argc >= 3 && strcmp(argv[2], "pull") == 0;
    if (!(argc == 6 && strcmp(argv[2], "core") == 0) && !(pull && argc == 8)) {
        fprintf(stderr, "usage: nats_sub_libnats PORT core SUBJECT N M | "
                        "PORT pull STREAM SUBJECT N M BATCH | PORT mkstream STREAM SUBJECT | "
                        "PORT rmstream STREAM [--idle S]\n");
        return 2;
    }
    double t0 = now();
    const char *stream = pull ? argv[3] : NULL, *subject = pull ? argv[4] : argv[3];
    int n = atoi(argv[pull ? 5 : 4]);
    want = atol(argv[pull ? 6 : 5]);
    if (pull)
        batch = atoi(argv[7]);
    struct sub *subs = calloc((size_t)n, sizeof(*subs));
    if (!subs || n < 1)
        return 1;
    for (int i = 0; i < n; i++) {
        struct sub *u = &subs[i];
        connect_to(&u->nc, argv[1]);
        if (!pull) {
            check(natsConnection_Subscribe(&u->s, u->nc, subject, on_msg, u), "subscribe");
            /* no slow-consumer drops: the count is the figure */
            check(natsSubscription_SetPendingLimits(u->s, -1, -1), "pending limits");
            check(natsConnection_Flush(u->nc), "flush");
            continue;
        }
        check(natsConnection_JetStream(&u->js, u->nc, NULL), "JetStream");
        jsSubOptions so;
        jsSubOptions_Init(&so);
        so.Stream = stream;
        so.Config.AckPolicy = js_AckExplicit;
        so.Config.DeliverPolicy = js_DeliverNew;
        so.Config.MaxAckPending = 100000;
        jsErrCode jerr = 0;
        check(js_PullSubscribe(&u->s, u->js, subject, NULL, NULL, &so, &jerr), "pull subscribe");
    }
    if (pull) {
        for (int i = 0; i < n; i++)
            pthread_create(&subs[i].th, NULL, pull_loop, &subs[i]);
        for (int i = 0; i < n; i++)
            pthread_join(subs[i].th, NULL);
    } else {
        double quiet_since = now();
        long seen = 0;
        for (;;) {
            long all = 0, done = 0;
            for (int i = 0; i < n; i++) {
                long g = __atomic_load_n(&subs[i].got, __ATOMIC_RELAXED);
                all += g;
                done += g >= want;
            }
            if (done == n)
                break;
            if (all != seen) {
                seen = all;
                quiet_since = now();
            } else if (now() - quiet_since >= idle_s) {
                break;
            }
            usleep(2000);
        }
    }
    long total = 0;
    double last = t0;
    for (int i = 0; i < n; i++) {
        total += __atomic_load_n(&subs[i].got, __ATOMIC_RELAXED);
        double l;
        __atomic_load(&subs[i].last, &l, __ATOMIC_RELAXED);
        if (l > last)
            last = l;
    }
    printf("{\"received\":%ld,\"seconds\":%.6f}\n", total, last - t0);
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        natsSubscription_Destroy(subs[i].s);
        jsCtx_Destroy(subs[i].js);
        natsConnection_Destroy(subs[i].nc);
    }
    free(subs);
    return 0;
}
