/* nats_js_libnats.c - JetStream publish with PubAcks on cnats (Debian's libnats), the
 * comparison arm of bench/pipeline.py's `js` bench (natscli's `nats bench` is not packaged in
 * Debian 12). WINDOW 1: js_Publish() COUNT times, each waiting for its PubAck; WINDOW > 1:
 * js_PublishAsync() with PublishAsync.MaxPending = WINDOW, then js_PublishAsyncComplete().
 * Prints {"sent":N,"seconds":T,"errors":E} from the first publish to the last PubAck.
 * Built only when libnats is installed (scripts/deps.sh bench).
 * Usage: nats_js_libnats PORT COUNT SIZE WINDOW SUBJECT
 */
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check(natsStatus s, const char *what)
{
    if (s != NATS_OK) {
        fprintf(stderr, "nats_js_libnats: %s: %s\n", what, natsStatus_GetText(s));
        exit(1);
    }
}

static long errors;

static void on_err(jsCtx *js, jsPubAckErr *pae, void *closure)
{
    (void)js;
    (void)pae;
    (void)closure;
    errors++;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: nats_js_libnats PORT COUNT SIZE WINDOW SUBJECT\n");
        return 2;
    }
    long count = atol(argv[2]), size = atol(argv[3]), window = atol(argv[4]);
    const char *subject = argv[5];
    char url[64];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%s", argv[1]);
    char *payload = malloc((size_t)size + 1);
    memset(payload, 'x', (size_t)size);
    natsConnection *nc = NULL;
    check(natsConnection_ConnectTo(&nc, url), "connect");
    jsOptions o;
    check(jsOptions_Init(&o), "jsOptions_Init");
    o.PublishAsync.MaxPending = window;
    o.PublishAsync.ErrHandler = on_err;
    o.PublishAsync.StallWait = 10000; /* a loaded machine: wait for room, do not fail */
    jsCtx *js = NULL;
    check(natsConnection_JetStream(&js, nc, &o), "JetStream");
    double t0 = now();
    for (long i = 0; i < count; i++) {
        if (window == 1) {
            jsPubAck *pa = NULL;
            jsErrCode jerr = 0;
            natsStatus s = js_Publish(&pa, js, subject, payload, (int)size, NULL, &jerr);
            if (s != NATS_OK)
                errors++;
            jsPubAck_Destroy(pa);
        } else {
            check(js_PublishAsync(js, subject, payload, (int)size, NULL), "js_PublishAsync");
        }
    }
    if (window > 1) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = 60000;
        check(js_PublishAsyncComplete(js, &po), "js_PublishAsyncComplete");
    }
    double t = now() - t0;
    printf("{\"sent\":%ld,\"seconds\":%.6f,\"errors\":%ld}\n", count, t, errors);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(payload);
    return 0;
}
