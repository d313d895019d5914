/* nats_libnats.c - the same NATS core publisher on cnats (Debian's libnats), for
 * bench/nats_floor.py: natsConnection_Publish() COUNT times, then natsConnection_Flush() (a
 * PING/PONG round trip), and {"sent":N,"seconds":T} from the first publish to the flush.
 * Built only when libnats is installed (scripts/deps.sh bench).
 * Usage: nats_libnats PORT COUNT SIZE [--iobuf BYTES] [--subject S]
 *   --iobuf sets natsOptions_SetIOBufSize (the library's write buffer; default 32 KiB).
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
        fprintf(stderr, "nats_libnats: %s: %s\n", what, natsStatus_GetText(s));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: nats_libnats PORT COUNT SIZE [--iobuf BYTES] [--subject S]\n");
        return 2;
    }
    long count = atol(argv[2]);
    int size = atoi(argv[3]);
    int iobuf = 0;
    const char *subject = "bench.floor";
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--iobuf") == 0 && i + 1 < argc)
            iobuf = atoi(argv[++i]);
        else if (strcmp(argv[i], "--subject") == 0 && i + 1 < argc)
            subject = argv[++i];
    }
    char url[64];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%s", argv[1]);
    natsOptions *o;
    natsConnection *nc;
    check(natsOptions_Create(&o), "options");
    check(natsOptions_SetURL(o, url), "url");
    if (iobuf)
        check(natsOptions_SetIOBufSize(o, iobuf), "iobuf");
    check(natsConnection_Connect(&nc, o), "connect");
    char *payload = malloc((size_t)size + 1);
    if (!payload)
        return 1;
    memset(payload, 'x', (size_t)size);
    double t0 = now();
    for (long i = 0; i < count; i++)
        check(natsConnection_Publish(nc, subject, payload, size), "publish");
    check(natsConnection_FlushTimeout(nc, 60000), "flush");
    double secs = now() - t0;
    printf("{\"sent\":%ld,\"seconds\":%.6f}\n", count, secs);
    natsConnection_Destroy(nc);
    natsOptions_Destroy(o);
    nats_Close();
    free(payload);
    return 0;
}
