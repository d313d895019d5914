/* micro_proto.c - ns per operation of the proto/ codecs, and wslay's frame API against its event
 * API.
 *
 * NATS: a PUB of 16 and 64 payload bytes encoded into a 1,000-PUB batch buffer (the load path's
 * shape); the same with the control line rendered once and copied (what a driver does for a
 * static PUB); one MSG parsed out of a 1,000-MSG stream. MQTT: a QoS 1 PUBLISH encoded (3.1.1,
 * and 5.0 with a stamp user property and a message expiry); a PUBACK and a PUBLISH parsed.
 * Stamp: encode, exact parse, and find in a 200-byte JSON event. WebSocket: a 64-byte masked
 * client frame encoded, and one 64-byte server frame of a 1,000-frame stream received (through
 * sq_ws_feed, wslay's frame API), then the same two through wslay's event API
 * (wslay_event_queue_msg + wslay_event_send; wslay_event_recv with buffering), with the heap
 * allocations per message counted by interposing malloc (in builds without a sanitizer).
 * Each figure is the median of REPS repetitions.
 * Usage: micro_proto [reps]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wslay/wslay.h>

#include "micro.h"
#include "base/clock.h"
#include "proto/mqtt.h"
#include "proto/nats.h"
#include "proto/stamp.h"
#include "proto/ws.h"

#define REPS_DEFAULT 9

/* ---- allocation counting (interposes malloc for the whole process, wslay's .so included) ---- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COUNT_ALLOCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define COUNT_ALLOCS 0
#endif
#endif
#ifndef COUNT_ALLOCS
#define COUNT_ALLOCS 1
#endif

static uint64_t n_allocs;

#if COUNT_ALLOCS
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t a, size_t b);
void *__libc_realloc(void *p, size_t n);
void *malloc(size_t n);
void *calloc(size_t a, size_t b);
void *realloc(void *p, size_t n);

void *malloc(size_t n)
{
    n_allocs++;
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    n_allocs++;
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    n_allocs++;
    return __libc_realloc(p, n);
}
#endif

static volatile uint64_t sink;

static void die(const char *what, int rc)
{
    fprintf(stderr, "micro_proto: %s: %d (%s)\n", what, rc, rc < 0 ? sq_strerror(rc) : "");
    exit(1);
}

enum { BATCH = 1000 };
static char batch[BATCH * 200];
static char msg_stream[BATCH * 100], ws_stream[BATCH * 70];

/* ---- NATS ---- */

static double nats_pub(size_t plen, long iters)
{
    char payload[64];
    memset(payload, 'x', sizeof(payload));
    struct sq_str subj = {"bench.orders", 12}, none = {0};
    int64_t t0 = sq_now_ns();
    for (long it = 0; it < iters; it++) {
        size_t off = 0;
        for (int i = 0; i < BATCH; i++) {
            int n = sq_nats_encode_pub(batch + off, sizeof(batch) - off, subj, none, payload, plen);
            if (n < 0)
                die("pub", n);
            off += (size_t)n;
        }
        sink += off + (uint64_t)(unsigned char)batch[off / 2];
    }
    return (double)(sq_now_ns() - t0) / ((double)iters * BATCH);
}

static double nats_pub_static(size_t plen, long iters)
{
    char payload[64], head[64];
    memset(payload, 'x', sizeof(payload));
    int hl = sq_nats_encode_pub_head(head, sizeof(head), (struct sq_str){"bench.orders", 12},
                                     (struct sq_str){0}, plen);
    if (hl < 0)
        die("pub head", hl);
    int64_t t0 = sq_now_ns();
    for (long it = 0; it < iters; it++) {
        size_t off = 0;
        for (int i = 0; i < BATCH; i++) {
            memcpy(batch + off, head, (size_t)hl);
            memcpy(batch + off + hl, payload, plen);
            memcpy(batch + off + (size_t)hl + plen, "\r\n", 2);
            off += (size_t)hl + plen + 2;
        }
        sink += off + (uint64_t)(unsigned char)batch[off / 2];
    }
    return (double)(sq_now_ns() - t0) / ((double)iters * BATCH);
}

static size_t msg_stream_len;

static double nats_msg_parse(long iters)
{
    if (!msg_stream_len) {
        char payload[65];
        memset(payload, 'x', 64);
        payload[64] = 0;
        for (int i = 0; i < BATCH; i++)
            msg_stream_len +=
                (size_t)snprintf(msg_stream + msg_stream_len, sizeof(msg_stream) - msg_stream_len,
                                 "MSG bench.orders 1 64\r\n%s\r\n", payload);
    }
    int64_t t0 = sq_now_ns();
    for (long it = 0; it < iters; it++) {
        size_t off = 0;
        while (off < msg_stream_len) {
            struct sq_nats_event ev;
            int n = sq_nats_parse(msg_stream + off, msg_stream_len - off, NULL, &ev, NULL);
            if (n <= 0)
                die("msg parse", n);
            sink += ev.payload.len;
            off += (size_t)n;
        }
    }
    return (double)(sq_now_ns() - t0) / ((double)iters * BATCH);
}

/* ---- MQTT ---- */

static double mqtt_publish(uint8_t ver, long iters)
{
    char payload[64];
    memset(payload, 'x', sizeof(payload));
    char st[SQ_STAMP_MAX];
    struct sq_stamp_enc se;
    sq_stamp_enc_init(&se, 12345);
    size_t sl = sq_stamp_encode(&se, 1, 1700000000000000000LL, st);
    struct sq_mqtt_user_prop up = {{"sq-stamp", 8}, {st, sl}};
    struct sq_mqtt_publish m = {.topic = {"bench/orders", 12},
                                .qos = 1,
                                .packet_id = 1,
                                .payload = payload,
                                .payload_len = sizeof(payload),
                                .payload_format = -1};
    if (ver == SQ_MQTT_V5) {
        m.has_message_expiry = true;
        m.message_expiry = 60;
        m.user_props = &up;
        m.n_user_props = 1;
    }
    int64_t t0 = sq_now_ns();
    for (long it = 0; it < iters; it++) {
        size_t off = 0;
        for (int i = 0; i < BATCH; i++) {
            m.packet_id = (uint16_t)(i + 1);
            int n = sq_mqtt_encode_publish(ver, (uint8_t *)batch + off, sizeof(batch) - off, &m);
            if (n < 0)
                die("publish", n);
            off += (size_t)n;
        }
        sink += off;
    }
    return (double)(sq_now_ns() - t0) / ((double)iters * BATCH);
}

static double mqtt_parse(const uint8_t *pkt, size_t len, uint8_t ver, long iters)
{
    struct sq_mqtt_limits lim = {ver, 0};
    int64_t t0 = sq_now_ns();
    for (long it = 0; it < iters; it++) {
        struct sq_mqtt_packet p;
        int n = sq_mqtt_parse(pkt, len, &lim, &p, NULL);
        if (n <= 0)
            die("mqtt parse", n);
        sink += (uint64_t)n + p.packet_id;
    }
    return (double)(sq_now_ns() - t0) / (double)iters;
}

/* ---- stamp ---- */

static double stamp_encode(long iters)
{
    struct sq_stamp_enc se;
    sq_stamp_enc_init(&se, 0x1234567890ULL);
    char out[SQ_STAMP_MAX];
    int64_t ns = 1700000000123456789LL;
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < iters; i++) {
        size_t n = sq_stamp_encode(&se, (uint64_t)i, ns + i, out);
        sink += n + (uint64_t)(unsigned char)out[n - 1];
    }
    return (double)(sq_now_ns() - t0) / (double)iters;
}

static char event_json[256];
static size_t event_len;

static double stamp_find(bool exact, long iters)
{
    if (!event_len) {
        struct sq_stamp s = {0x1234567890ULL, 123456789, 1700000000123456789LL};
        char st[SQ_STAMP_MAX];
        size_t sl = sq_stamp_format(&s, st);
        event_len = (size_t)snprintf(
            event_json, sizeof(event_json),
            "{\"type\":\"order.created\",\"id\":\"5f0c2a7e-1b9d-4c3e-9a0b-2f1e3d4c5b6a\","
            "\"customer\":\"c-918273\",\"amount\":4217,\"currency\":\"EUR\",\"stamp\":\"%.*s\","
            "\"source\":\"squall\"}",
            (int)sl, st);
    }
    const char *at_stamp = strstr(event_json, "sq1.");
    size_t stamp_len = (size_t)(strchr(at_stamp, '"') - at_stamp);
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < iters; i++) {
        struct sq_stamp s;
        if (exact) {
            if (sq_stamp_parse(at_stamp, stamp_len, &s) != 0)
                die("stamp parse", -1);
        } else if (!sq_stamp_find(event_json, event_len, &s, NULL, NULL)) {
            die("stamp find", -1);
        }
        sink += s.seq;
    }
    return (double)(sq_now_ns() - t0) / (double)iters;
}

/* ---- WebSocket ---- */

static double ws_encode(long iters, double *allocs)
{
    struct sq_ws_ctx w;
    if (sq_ws_ctx_init(&w) != 0)
        die("ws ctx", -1);
    struct sq_ws_conn c;
    sq_ws_conn_init(&c, 1, 0);
    uint8_t payload[64];
    memset(payload, 'x', sizeof(payload));
    uint64_t a0 = n_allocs;
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < iters; i++) {
        int n = sq_ws_encode_frame(&w, &c, (uint8_t *)batch, sizeof(batch), SQ_WS_TEXT, true,
                                   payload, sizeof(payload));
        if (n < 0)
            die("ws encode", n);
        sink += (uint64_t)n + (uint8_t)batch[n - 1];
    }
    double t = (double)(sq_now_ns() - t0) / (double)iters;
    *allocs = (double)(n_allocs - a0) / (double)iters;
    sq_ws_ctx_dispose(&w);
    return t;
}

static size_t ws_stream_len;

static void make_ws_stream(void)
{
    if (ws_stream_len)
        return;
    for (int i = 0; i < BATCH; i++) {
        ws_stream[ws_stream_len++] = (char)0x81;
        ws_stream[ws_stream_len++] = 64;
        memset(ws_stream + ws_stream_len, 'x', 64);
        ws_stream_len += 64;
    }
}

static int count_data(void *ud, const struct sq_ws_event *ev)
{
    (void)ud;
    sink += ev->len;
    return 0;
}

static double ws_recv(long iters, double *allocs)
{
    make_ws_stream();
    struct sq_ws_ctx w;
    if (sq_ws_ctx_init(&w) != 0)
        die("ws ctx", -1);
    struct sq_ws_conn c;
    sq_ws_conn_init(&c, 1, 0);
    uint64_t a0 = n_allocs;
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < iters; i++) {
        int rc = sq_ws_feed(&w, &c, ws_stream, ws_stream_len, count_data, NULL);
        if (rc)
            die("ws feed", rc);
    }
    double t = (double)(sq_now_ns() - t0) / ((double)iters * BATCH);
    *allocs = (double)(n_allocs - a0) / ((double)iters * BATCH);
    sq_ws_conn_dispose(&w, &c);
    sq_ws_ctx_dispose(&w);
    return t;
}

/* wslay_event: the callbacks read from / write to a flat buffer. */
struct ev_io {
    const uint8_t *in;
    size_t in_len;
    uint8_t *out;
    size_t out_len, out_cap;
    uint64_t rng;
};

static ssize_t ev_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
    (void)flags;
    struct ev_io *io = ud;
    if (io->in_len == 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    size_t n = len < io->in_len ? len : io->in_len;
    memcpy(buf, io->in, n);
    io->in += n;
    io->in_len -= n;
    return (ssize_t)n;
}

static ssize_t ev_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *ud)
{
    (void)ctx;
    (void)flags;
    struct ev_io *io = ud;
    if (io->out_len + len > io->out_cap)
        io->out_len = 0; /* a sink: keep writing over the same bytes */
    memcpy(io->out + io->out_len, data, len);
    io->out_len += len;
    return (ssize_t)len;
}

static int ev_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *ud)
{
    (void)ctx;
    struct ev_io *io = ud;
    uint64_t r = sq_ws_rand(&io->rng);
    memcpy(buf, &r, len < 8 ? len : 8);
    return 0;
}

static void ev_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *ud)
{
    (void)ctx;
    (void)ud;
    sink += arg->msg_length;
}

static double wslay_event_send_bench(long iters, double *allocs)
{
    static uint8_t out[1 << 16];
    struct ev_io io = {.out = out, .out_cap = sizeof(out), .rng = 1};
    struct wslay_event_callbacks cb = {ev_recv, ev_send, ev_genmask, NULL, NULL, NULL, ev_msg};
    wslay_event_context_ptr ctx;
    if (wslay_event_context_client_init(&ctx, &cb, &io) != 0)
        die("wslay_event init", -1);
    uint8_t payload[64];
    memset(payload, 'x', sizeof(payload));
    uint64_t a0 = n_allocs;
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < iters; i++) {
        struct wslay_event_msg m = {WSLAY_TEXT_FRAME, payload, sizeof(payload)};
        if (wslay_event_queue_msg(ctx, &m) != 0 || wslay_event_send(ctx) != 0)
            die("wslay_event send", -1);
    }
    double t = (double)(sq_now_ns() - t0) / (double)iters;
    *allocs = (double)(n_allocs - a0) / (double)iters;
    wslay_event_context_free(ctx);
    return t;
}

static double wslay_event_recv_bench(long iters, double *allocs)
{
    make_ws_stream();
    static uint8_t out[1 << 16];
    struct ev_io io = {.out = out, .out_cap = sizeof(out), .rng = 1};
    struct wslay_event_callbacks cb = {ev_recv, ev_send, ev_genmask, NULL, NULL, NULL, ev_msg};
    wslay_event_context_ptr ctx;
    if (wslay_event_context_client_init(&ctx, &cb, &io) != 0)
        die("wslay_event init", -1);
    uint64_t a0 = n_allocs;
    int64_t t0 = sq_now_ns();
    for (long i = 0; i < iters; i++) {
        io.in = (const uint8_t *)ws_stream;
        io.in_len = ws_stream_len;
        if (wslay_event_recv(ctx) != 0)
            die("wslay_event recv", -1);
    }
    double t = (double)(sq_now_ns() - t0) / ((double)iters * BATCH);
    *allocs = (double)(n_allocs - a0) / ((double)iters * BATCH);
    wslay_event_context_free(ctx);
    return t;
}

/* ---- the table ---- */

struct row {
    const char *name;
    double v[64], a;
};

static void report(struct row *r, int reps, const char *unit)
{
    double lo = r->v[0], hi = r->v[0];
    for (int i = 1; i < reps; i++) {
        lo = r->v[i] < lo ? r->v[i] : lo;
        hi = r->v[i] > hi ? r->v[i] : hi;
    }
    double med = micro_median(r->v, reps);
    printf("  %-58s %8.1f %s  (min %.1f, max %.1f)", r->name, med, unit, lo, hi);
    if (r->a >= 0)
        printf("  %.2f allocs/msg", r->a);
    printf("\n");
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : REPS_DEFAULT;
    if (reps < 1)
        reps = 1;
    if (reps > 64)
        reps = 64;
    static const uint8_t puback[] = {0x40, 0x02, 0x00, 0x07};
    uint8_t pub311[128];
    struct sq_mqtt_publish m = {
        .topic = {"bench/orders", 12},
        .qos = 1,
        .packet_id = 7,
        .payload = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        .payload_len = 64,
        .payload_format = -1};
    int pl = sq_mqtt_encode_publish(SQ_MQTT_V311, pub311, sizeof(pub311), &m);
    if (pl < 0)
        die("publish", pl);

    enum { N_ROWS = 16 };
    static struct row rows[N_ROWS] = {
        {"NATS PUB, 16 B payload, encoded into a 1,000-PUB batch", {0}, -1},
        {"NATS PUB, 64 B payload, encoded into a 1,000-PUB batch", {0}, -1},
        {"NATS PUB, 64 B, control line rendered once and copied", {0}, -1},
        {"NATS MSG, 64 B payload, parsed from a 1,000-MSG stream", {0}, -1},
        {"MQTT 3.1.1 PUBLISH QoS 1, 64 B, encoded", {0}, -1},
        {"MQTT 5 PUBLISH QoS 1, 64 B, expiry + stamp user property", {0}, -1},
        {"MQTT PUBACK parsed", {0}, -1},
        {"MQTT 3.1.1 PUBLISH QoS 1, 64 B, parsed", {0}, -1},
        {"stamp encoded (prepared run head)", {0}, -1},
        {"stamp parsed (exact span)", {0}, -1},
        {"stamp found in a 200-byte JSON event", {0}, -1},
        {"WebSocket 64 B masked frame encoded (frame API)", {0}, 0},
        {"WebSocket 64 B frame received, 1,000-frame stream (frame API)", {0}, 0},
        {"WebSocket 64 B message sent, wslay_event queue_msg + send", {0}, 0},
        {"WebSocket 64 B message received, wslay_event_recv", {0}, 0},
        {NULL, {0}, 0},
    };
    for (int i = 0; i < reps; i++) {
        rows[0].v[i] = nats_pub(16, 2000);
        rows[1].v[i] = nats_pub(64, 2000);
        rows[2].v[i] = nats_pub_static(64, 2000);
        rows[3].v[i] = nats_msg_parse(1000);
        rows[4].v[i] = mqtt_publish(SQ_MQTT_V311, 1000);
        rows[5].v[i] = mqtt_publish(SQ_MQTT_V5, 1000);
        rows[6].v[i] = mqtt_parse(puback, sizeof(puback), SQ_MQTT_V311, 2000000);
        rows[7].v[i] = mqtt_parse(pub311, (size_t)pl, SQ_MQTT_V311, 2000000);
        rows[8].v[i] = stamp_encode(2000000);
        rows[9].v[i] = stamp_find(true, 2000000);
        rows[10].v[i] = stamp_find(false, 2000000);
        rows[11].v[i] = ws_encode(1000000, &rows[11].a);
        rows[12].v[i] = ws_recv(1000, &rows[12].a);
        rows[13].v[i] = wslay_event_send_bench(1000000, &rows[13].a);
        rows[14].v[i] = wslay_event_recv_bench(1000, &rows[14].a);
    }
    printf("micro_proto: median of %d repetitions, ns per operation%s\n", reps,
           COUNT_ALLOCS ? "" : " (allocations not counted in a sanitizer build)");
    for (int r = 0; rows[r].name; r++) {
        if (!COUNT_ALLOCS)
            rows[r].a = -1;
        report(&rows[r], reps, "ns");
    }
    return sink == 42 ? 1 : 0;
}
