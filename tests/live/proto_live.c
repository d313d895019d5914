/* proto_live.c - the proto/ codecs against real peers over blocking loopback sockets.
 *
 *   proto_live nats PORT   nats-server with JetStream: CONNECT/PING/PONG, SUB + PUB round trip,
 *                          HPUB with headers, no-responders 503, a stream made through
 *                          $JS.API.STREAM.CREATE, PubAcks (ok, duplicate, error), a batch of PUBs
 *   proto_live mqtt PORT   mosquitto: 3.1.1 then 5.0, CONNECT, SUBSCRIBE, PUBLISH QoS 0/1/2 with
 *                          full handshakes both ways, a window of QoS 1 publishes, UNSUBSCRIBE,
 *                          PINGREQ, DISCONNECT; then reads $SYS/broker/... counters
 *   proto_live ws PORT     a WebSocket echo server (tests/e2e/test_proto_live.py): handshake,
 *                          echo of text and a 64-bit-length binary message, ping/pong, a
 *                          fragmented message with a ping inside, close 1011, a masked frame
 *
 * Only the codecs speak the protocols (http/h1 parses the 101 head, as the driver will). Each
 * mode prints one JSON object with what it sent, for the test to hold against the server's own
 * counts, and exits 0; any failed check prints "FAIL: ..." on stderr and exits 1. Every socket
 * read has a 5 s timeout, so a silent peer ends the run instead of hanging it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "http/h1.h"
#include "proto/mqtt.h"
#include "proto/nats.h"
#include "proto/stamp.h"
#include "proto/ws.h"

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            die(__VA_ARGS__);                                                                      \
    } while (0)

/* ---- a blocking connection with a receive buffer (the spill a driver would keep) ---- */

struct conn {
    int fd;
    char buf[1 << 20];
    size_t len;   /* bytes in buf */
    size_t off;   /* parsed so far */
    uint64_t out; /* protocol units sent (PUB/HPUB for NATS, packets for MQTT) */
};

static struct conn *conn_open(int port)
{
    struct conn *c = calloc(1, sizeof(*c));
    EXPECT(c, "out of memory");
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT(c->fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT(connect(c->fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect to %d: %s", port,
           strerror(errno));
    struct timeval tv = {5, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return c;
}

static void conn_close(struct conn *c)
{
    close(c->fd);
    free(c);
}

static void send_all(struct conn *c, const void *p, size_t n)
{
    const char *s = p;
    while (n) {
        ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);
        EXPECT(w > 0, "send: %s", strerror(errno));
        s += w;
        n -= (size_t)w;
    }
}

/* Reads more bytes after dropping what was parsed. */
static void fill(struct conn *c)
{
    if (c->off) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    EXPECT(c->len < sizeof(c->buf), "receive buffer full");
    ssize_t r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    EXPECT(r > 0, "recv: %s", r == 0 ? "peer closed" : strerror(errno));
    c->len += (size_t)r;
}

/* ---- NATS ---- */

/* The next server operation (reading as needed). */
static void nats_next(struct conn *c, struct sq_nats_event *ev)
{
    for (;;) {
        int rc = sq_nats_parse(c->buf + c->off, c->len - c->off, NULL, ev, NULL);
        EXPECT(rc >= 0, "NATS parse: %s", ev->why);
        if (rc > 0) {
            c->off += (size_t)rc;
            if (ev->op == SQ_NATS_OP_ERR)
                die("NATS -ERR '%.*s'", (int)ev->text.len, ev->text.p);
            return;
        }
        fill(c);
    }
}

/* Skips server PINGs (answering them) and returns the next other operation. */
static void nats_next_msg(struct conn *c, struct sq_nats_event *ev)
{
    for (;;) {
        nats_next(c, ev);
        if (ev->op == SQ_NATS_OP_PING) {
            send_all(c, SQ_NATS_PONG, SQ_NATS_PONG_LEN);
            continue;
        }
        return;
    }
}

static void nats_pub(struct conn *c, const char *subj, const char *reply, const char *payload,
                     size_t len)
{
    static char buf[1 << 16];
    int n = sq_nats_encode_pub(buf, sizeof(buf), (struct sq_str){subj, strlen(subj)},
                               (struct sq_str){reply, reply ? strlen(reply) : 0}, payload, len);
    EXPECT(n > 0, "encode PUB: %d", n);
    send_all(c, buf, (size_t)n);
    c->out++;
}

static void nats_sub(struct conn *c, const char *subj, uint64_t sid)
{
    char buf[256];
    int n = sq_nats_encode_sub(buf, sizeof(buf), (struct sq_str){subj, strlen(subj)},
                               (struct sq_str){0}, sid);
    EXPECT(n > 0, "encode SUB");
    send_all(c, buf, (size_t)n);
}

/* PING, then every operation up to the PONG goes to the callback (MSGs that arrived first). */
static void nats_flush(struct conn *c, void (*on)(void *, const struct sq_nats_event *), void *ud)
{
    send_all(c, SQ_NATS_PING, SQ_NATS_PING_LEN);
    for (;;) {
        struct sq_nats_event ev;
        nats_next_msg(c, &ev);
        if (ev.op == SQ_NATS_OP_PONG)
            return;
        EXPECT(on, "unexpected NATS op %d before PONG", ev.op);
        on(ud, &ev);
    }
}

struct got {
    int msgs;
    char payloads[16][64];
    struct sq_stamp stamps[16];
    int stamped;
};

static void collect(void *ud, const struct sq_nats_event *ev)
{
    struct got *g = ud;
    EXPECT(ev->op == SQ_NATS_OP_MSG || ev->op == SQ_NATS_OP_HMSG, "op %d", ev->op);
    if (g->msgs < 16) {
        snprintf(g->payloads[g->msgs], 64, "%.*s", (int)ev->payload.len, ev->payload.p);
        if (sq_stamp_find(ev->payload.p, ev->payload.len, &g->stamps[g->stamped], NULL, NULL))
            g->stamped++;
    }
    g->msgs++;
}

/* A request: PUB with a reply inbox the connection subscribed (sid), then the reply. */
static void nats_request(struct conn *c, const char *subj, const char *inbox, const char *payload,
                         struct sq_nats_event *reply)
{
    nats_pub(c, subj, inbox, payload, strlen(payload));
    nats_next_msg(c, reply);
    EXPECT(reply->op == SQ_NATS_OP_MSG || reply->op == SQ_NATS_OP_HMSG, "reply op %d", reply->op);
}

static int run_nats(int port)
{
    struct conn *c = conn_open(port);
    struct sq_nats_event ev;
    nats_next(c, &ev);
    EXPECT(ev.op == SQ_NATS_OP_INFO, "first op %d, want INFO", ev.op);
    struct sq_nats_info info;
    EXPECT(sq_nats_info_parse(ev.text, &info) == 0, "INFO JSON");
    EXPECT(info.headers && info.jetstream && info.proto >= 1 && info.max_payload > 0,
           "INFO lacks headers / jetstream / proto / max_payload");

    struct sq_nats_connect_opts o = {
        .name = "squall-proto-live", .echo = true, .headers = true, .no_responders = true};
    char buf[4096];
    int n = sq_nats_encode_connect(buf, sizeof(buf), &o);
    EXPECT(n > 0, "encode CONNECT");
    send_all(c, buf, (size_t)n);
    nats_flush(c, NULL, NULL); /* CONNECT accepted: the PONG comes, no -ERR */

    /* SUB + PUB round trip, stamped. */
    struct sq_stamp_enc se;
    sq_stamp_enc_init(&se, 0x5c0a11);
    nats_sub(c, "sq.live", 1);
    for (int i = 0; i < 5; i++) {
        char st[SQ_STAMP_MAX], p[128];
        size_t sl = sq_stamp_encode(&se, (uint64_t)i + 1, sq_stamp_now_ns(), st);
        int pl = snprintf(p, sizeof(p), "{\"i\":%d,\"stamp\":\"%.*s\"}", i, (int)sl, st);
        nats_pub(c, "sq.live", NULL, p, (size_t)pl);
    }
    struct got g = {0};
    nats_flush(c, collect, &g);
    EXPECT(g.msgs == 5 && g.stamped == 5, "round trip: %d messages, %d stamped", g.msgs, g.stamped);
    for (int i = 0; i < 5; i++)
        EXPECT(g.stamps[i].seq == (uint64_t)i + 1 && g.stamps[i].run == 0x5c0a11,
               "stamp %d came back as seq %llu", i, (unsigned long long)g.stamps[i].seq);

    /* HPUB with headers arrives as HMSG with them. */
    struct sq_nats_header h[] = {{{"Nats-Msg-Id", 11}, {"live-1", 6}},
                                 {{"X-Stamp", 7}, {"sq1.5.6.7", 9}}};
    n = sq_nats_encode_hpub(buf, sizeof(buf), (struct sq_str){"sq.live", 7}, (struct sq_str){0}, h,
                            2, "body", 4);
    EXPECT(n > 0, "encode HPUB");
    send_all(c, buf, (size_t)n);
    c->out++;
    nats_next_msg(c, &ev);
    EXPECT(ev.op == SQ_NATS_OP_HMSG && ev.payload.len == 4, "HPUB came back as op %d", ev.op);
    struct sq_str v;
    EXPECT(sq_nats_header_get(ev.headers, (struct sq_str){"x-stamp", 7}, &v) && v.len == 9,
           "X-Stamp header lost");
    struct sq_stamp hs;
    EXPECT(sq_stamp_parse(v.p, v.len, &hs) == 0 && hs.seq == 6, "header stamp");

    /* No responders: a request nobody answers comes back as a 503 status. */
    nats_sub(c, "_INBOX.live.*", 2);
    nats_request(c, "nobody.home", "_INBOX.live.0", "", &ev);
    EXPECT(ev.op == SQ_NATS_OP_HMSG && ev.status == 503, "no-responders: op %d status %d", ev.op,
           ev.status);

    /* JetStream: a stream, then publishes with PubAcks. */
    nats_request(c, "$JS.API.STREAM.CREATE.SQLIVE", "_INBOX.live.1",
                 "{\"name\":\"SQLIVE\",\"subjects\":[\"js.live.>\"],\"storage\":\"memory\"}", &ev);
    struct sq_str err;
    EXPECT(sq_nats_json_get(ev.payload, "error", &err) == 0, "stream create: %.*s",
           (int)ev.payload.len, ev.payload.p);
    struct sq_nats_puback ack;
    int kinds[4] = {0};
    nats_request(c, "js.live.a", "_INBOX.live.2", "one", &ev);
    int k = sq_nats_puback_parse(ev.payload.p, ev.payload.len, &ack);
    EXPECT(k == SQ_NATS_ACK_OK && ack.seq == 1 && ack.stream.len == 6, "PubAck 1: %d %.*s", k,
           (int)ev.payload.len, ev.payload.p);
    kinds[k]++;
    for (int i = 0; i < 2; i++) { /* the same Nats-Msg-Id twice */
        n = sq_nats_encode_hpub(buf, sizeof(buf), (struct sq_str){"js.live.b", 9},
                                (struct sq_str){"_INBOX.live.3", 13}, h, 1, "two", 3);
        EXPECT(n > 0, "encode HPUB");
        send_all(c, buf, (size_t)n);
        c->out++;
        nats_next_msg(c, &ev);
        k = sq_nats_puback_parse(ev.payload.p, ev.payload.len, &ack);
        EXPECT(k == (i ? SQ_NATS_ACK_DUPLICATE : SQ_NATS_ACK_OK) && ack.seq == 2,
               "PubAck with Msg-Id, try %d: %d %.*s", i, k, (int)ev.payload.len, ev.payload.p);
        kinds[k]++;
    }
    struct sq_nats_header ex[] = {{{"Nats-Expected-Last-Sequence", 27}, {"99", 2}}};
    n = sq_nats_encode_hpub(buf, sizeof(buf), (struct sq_str){"js.live.c", 9},
                            (struct sq_str){"_INBOX.live.4", 13}, ex, 1, "three", 5);
    EXPECT(n > 0, "encode HPUB");
    send_all(c, buf, (size_t)n);
    c->out++;
    nats_next_msg(c, &ev);
    k = sq_nats_puback_parse(ev.payload.p, ev.payload.len, &ack);
    EXPECT(k == SQ_NATS_ACK_ERROR && ack.code == 400 && ack.err_code > 0,
           "PubAck with a wrong expected sequence: %d %.*s", k, (int)ev.payload.len, ev.payload.p);
    kinds[k]++;

    /* A batch the way the load path writes it: 1,000 PUBs per send, then a PING to flush. */
    enum { BATCH = 1000, ROUNDS = 20 };
    static char big[BATCH * 128];
    char payload[64];
    memset(payload, 'x', sizeof(payload));
    for (int r = 0; r < ROUNDS; r++) {
        size_t off = 0;
        for (int i = 0; i < BATCH; i++) {
            n = sq_nats_encode_pub(big + off, sizeof(big) - off, (struct sq_str){"sq.bulk", 7},
                                   (struct sq_str){0}, payload, sizeof(payload));
            EXPECT(n > 0, "encode batch PUB");
            off += (size_t)n;
        }
        send_all(c, big, off);
        c->out += BATCH;
    }
    nats_flush(c, NULL, NULL);

    printf("{\"published\":%llu,\"acks_ok\":%d,\"acks_duplicate\":%d,\"acks_error\":%d,"
           "\"round_trip\":%d}\n",
           (unsigned long long)c->out, kinds[0], kinds[1], kinds[2], g.msgs);
    conn_close(c);
    return 0;
}

/* ---- MQTT ---- */

static uint8_t mver; /* the version the current clients speak */

static void mqtt_send(struct conn *c, const uint8_t *p, int n)
{
    EXPECT(n > 0, "MQTT encode: %d", n);
    send_all(c, p, (size_t)n);
    c->out++;
}

static void mqtt_next(struct conn *c, struct sq_mqtt_packet *pkt)
{
    struct sq_mqtt_limits lim = {mver, 0};
    for (;;) {
        int rc = sq_mqtt_parse((const uint8_t *)c->buf + c->off, c->len - c->off, &lim, pkt, NULL);
        EXPECT(rc >= 0, "MQTT parse: %s", pkt->why);
        if (rc > 0) {
            c->off += (size_t)rc;
            return;
        }
        fill(c);
    }
}

static struct conn *mqtt_connect(int port, const char *id)
{
    struct conn *c = conn_open(port);
    uint8_t buf[256];
    struct sq_mqtt_connect cn = {
        .version = mver, .clean_start = true, .keepalive = 60, .client_id = {id, strlen(id)}};
    if (mver == SQ_MQTT_V5) {
        cn.receive_max = 100;
        cn.max_packet_size = SQ_MQTT_DEFAULT_MAX_PACKET;
    }
    mqtt_send(c, buf, sq_mqtt_encode_connect(buf, sizeof(buf), &cn));
    struct sq_mqtt_packet pkt;
    mqtt_next(c, &pkt);
    EXPECT(pkt.type == SQ_MQTT_CONNACK && pkt.reason == 0, "CONNACK %d reason %d", pkt.type,
           pkt.reason);
    return c;
}

struct mq_counts {
    uint64_t packets;      /* every packet the clients sent */
    uint64_t pub_counted;  /* PUBLISH packets mosquitto's publish counter sees (QoS 0/1, no
                              retain: it masks the first byte with 0xF5) */
    uint64_t delivered[3]; /* per QoS, to the subscriber */
};

/* Reads what the subscriber gets until `want` PUBLISHes arrived, completing each QoS flow. */
static void mqtt_receive(struct conn *sub, int want, struct mq_counts *mc, bool v5_props)
{
    uint8_t buf[16];
    int got = 0;
    while (got < want) {
        struct sq_mqtt_packet pkt;
        mqtt_next(sub, &pkt);
        if (pkt.type == SQ_MQTT_PUBREL) {
            mqtt_send(
                sub, buf,
                sq_mqtt_encode_ack(mver, buf, sizeof(buf), SQ_MQTT_PUBCOMP, pkt.packet_id, 0));
            continue;
        }
        EXPECT(pkt.type == SQ_MQTT_PUBLISH, "subscriber got %s", sq_mqtt_type_name(pkt.type));
        struct sq_stamp st;
        EXPECT(sq_stamp_find(pkt.payload.p, pkt.payload.len, &st, NULL, NULL),
               "a delivered payload without its stamp");
        if (v5_props) {
            size_t pos = 0;
            struct sq_mqtt_user_prop up;
            EXPECT(sq_mqtt_user_prop_next(pkt.props.raw, &pos, &up) && up.name.len == 8 &&
                       memcmp(up.name.p, "sq-stamp", 8) == 0,
                   "the stamp user property is lost");
            struct sq_stamp s2;
            EXPECT(sq_stamp_parse(up.value.p, up.value.len, &s2) == 0 && s2.seq == st.seq,
                   "user property stamp differs from the payload's");
            EXPECT(pkt.props.has & SQ_MQTT_HAS_MESSAGE_EXPIRY, "message expiry lost");
        }
        mc->delivered[pkt.qos]++;
        if (pkt.qos == 1)
            mqtt_send(sub, buf,
                      sq_mqtt_encode_ack(mver, buf, sizeof(buf), SQ_MQTT_PUBACK, pkt.packet_id, 0));
        else if (pkt.qos == 2)
            mqtt_send(sub, buf,
                      sq_mqtt_encode_ack(mver, buf, sizeof(buf), SQ_MQTT_PUBREC, pkt.packet_id, 0));
        got++;
    }
}

static void mqtt_publish(struct conn *c, struct sq_stamp_enc *se, uint64_t seq, uint8_t qos,
                         uint16_t id, struct mq_counts *mc)
{
    char st[SQ_STAMP_MAX], payload[128];
    size_t sl = sq_stamp_encode(se, seq, sq_stamp_now_ns(), st);
    int pl = snprintf(payload, sizeof(payload), "{\"seq\":%llu,\"stamp\":\"%.*s\"}",
                      (unsigned long long)seq, (int)sl, st);
    struct sq_mqtt_user_prop up[] = {{{"sq-stamp", 8}, {st, sl}}};
    struct sq_mqtt_publish m = {.topic = {"sq/live/a", 9},
                                .qos = qos,
                                .packet_id = id,
                                .payload = payload,
                                .payload_len = (size_t)pl,
                                .payload_format = -1};
    if (mver == SQ_MQTT_V5) {
        m.has_message_expiry = true;
        m.message_expiry = 300;
        m.payload_format = 1;
        m.content_type = (struct sq_str){"application/json", 16};
        m.user_props = up;
        m.n_user_props = 1;
    }
    uint8_t buf[512];
    mqtt_send(c, buf, sq_mqtt_encode_publish(mver, buf, sizeof(buf), &m));
    if (qos < 2)
        mc->pub_counted++;
}

static void mqtt_round(int port, uint8_t version, struct mq_counts *mc)
{
    mver = version;
    bool v5 = version == SQ_MQTT_V5;
    struct conn *sub = mqtt_connect(port, v5 ? "sq-sub-5" : "sq-sub-4");
    struct conn *pub = mqtt_connect(port, v5 ? "sq-pub-5" : "sq-pub-4");
    uint8_t buf[512];
    struct sq_mqtt_packet pkt;

    struct sq_mqtt_subscription s = {.filter = {"sq/live/#", 9}, .qos = 2};
    mqtt_send(sub, buf, sq_mqtt_encode_subscribe(mver, buf, sizeof(buf), 1, &s, 1, v5 ? 7 : 0));
    mqtt_next(sub, &pkt);
    EXPECT(pkt.type == SQ_MQTT_SUBACK && pkt.packet_id == 1 && pkt.reasons.len == 1 &&
               pkt.reasons.p[0] == 2,
           "SUBACK");

    struct sq_stamp_enc se;
    sq_stamp_enc_init(&se, version);
    uint64_t seq = 0;
    uint16_t id = 1;
    /* QoS 0, 1 and 2, one at a time, each flow complete before the next. */
    for (int i = 0; i < 3; i++)
        mqtt_publish(pub, &se, ++seq, 0, 0, mc);
    for (int i = 0; i < 3; i++) {
        mqtt_publish(pub, &se, ++seq, 1, id, mc);
        mqtt_next(pub, &pkt);
        EXPECT(pkt.type == SQ_MQTT_PUBACK && pkt.packet_id == id, "PUBACK for %u", id);
        id++;
    }
    for (int i = 0; i < 3; i++) {
        mqtt_publish(pub, &se, ++seq, 2, id, mc);
        mqtt_next(pub, &pkt);
        EXPECT(pkt.type == SQ_MQTT_PUBREC && pkt.packet_id == id, "PUBREC for %u", id);
        mqtt_send(pub, buf, sq_mqtt_encode_ack(mver, buf, sizeof(buf), SQ_MQTT_PUBREL, id, 0));
        mqtt_next(pub, &pkt);
        EXPECT(pkt.type == SQ_MQTT_PUBCOMP && pkt.packet_id == id, "PUBCOMP for %u", id);
        id++;
    }
    mqtt_receive(sub, 9, mc, v5);

    /* A window of 50 outstanding QoS 1 publishes, 500 in all. */
    enum { TOTAL = 500, WINDOW = 50 };
    int sent = 0, acked = 0;
    while (acked < TOTAL) {
        while (sent < TOTAL && sent - acked < WINDOW) {
            mqtt_publish(pub, &se, ++seq, 1, id, mc);
            id = (uint16_t)(id % 60000 + 1);
            sent++;
        }
        mqtt_next(pub, &pkt);
        EXPECT(pkt.type == SQ_MQTT_PUBACK, "window: got %s", sq_mqtt_type_name(pkt.type));
        acked++;
    }
    mqtt_receive(sub, TOTAL, mc, v5);

    mqtt_send(pub, buf, sq_mqtt_encode_pingreq(buf, sizeof(buf)));
    mqtt_next(pub, &pkt);
    EXPECT(pkt.type == SQ_MQTT_PINGRESP, "PINGRESP");
    struct sq_str f = {"sq/live/#", 9};
    mqtt_send(sub, buf, sq_mqtt_encode_unsubscribe(mver, buf, sizeof(buf), 2, &f, 1));
    mqtt_next(sub, &pkt);
    EXPECT(pkt.type == SQ_MQTT_UNSUBACK && pkt.packet_id == 2, "UNSUBACK");
    mqtt_send(pub, buf, sq_mqtt_encode_disconnect(mver, buf, sizeof(buf), 0));
    mqtt_send(sub, buf, sq_mqtt_encode_disconnect(mver, buf, sizeof(buf), 0));
    mc->packets += pub->out + sub->out;
    conn_close(pub);
    conn_close(sub);
}

/* Subscribes to two $SYS counters and reads them until both reach the wanted values (they are
 * republished every sys_interval) or 6 s pass; returns the last values seen. */
static void mqtt_sys(int port, uint64_t *packets, uint64_t pub_counted, uint64_t *got_msgs,
                     uint64_t *got_pub)
{
    mver = SQ_MQTT_V311;
    struct conn *c = mqtt_connect(port, "sq-sys");
    uint8_t buf[256];
    struct sq_mqtt_subscription s[2] = {{.filter = {"$SYS/broker/messages/received", 29}},
                                        {.filter = {"$SYS/broker/publish/messages/received", 37}}};
    mqtt_send(c, buf, sq_mqtt_encode_subscribe(mver, buf, sizeof(buf), 1, s, 2, 0));
    /* What the broker will have received from this client by the time it reports: CONNECT and
     * SUBSCRIBE. */
    *packets += c->out;
    *got_msgs = *got_pub = 0;
    struct timeval t0, t;
    gettimeofday(&t0, NULL);
    for (;;) {
        struct sq_mqtt_packet pkt;
        mqtt_next(c, &pkt);
        if (pkt.type == SQ_MQTT_PUBLISH) {
            char v[32];
            snprintf(v, sizeof(v), "%.*s", (int)pkt.payload.len, pkt.payload.p);
            if (pkt.topic.len == 29)
                *got_msgs = strtoull(v, NULL, 10);
            else
                *got_pub = strtoull(v, NULL, 10);
        }
        gettimeofday(&t, NULL);
        if ((*got_msgs == *packets && *got_pub == pub_counted) || t.tv_sec - t0.tv_sec > 6)
            break;
    }
    conn_close(c);
}

static int run_mqtt(int port)
{
    struct mq_counts mc = {0};
    mqtt_round(port, SQ_MQTT_V311, &mc);
    mqtt_round(port, SQ_MQTT_V5, &mc);
    uint64_t got_msgs, got_pub;
    mqtt_sys(port, &mc.packets, mc.pub_counted, &got_msgs, &got_pub);
    printf("{\"packets_sent\":%llu,\"publish_counted\":%llu,\"delivered_qos0\":%llu,"
           "\"delivered_qos1\":%llu,\"delivered_qos2\":%llu,\"sys_messages_received\":%llu,"
           "\"sys_publish_received\":%llu}\n",
           (unsigned long long)mc.packets, (unsigned long long)mc.pub_counted,
           (unsigned long long)mc.delivered[0], (unsigned long long)mc.delivered[1],
           (unsigned long long)mc.delivered[2], (unsigned long long)got_msgs,
           (unsigned long long)got_pub);
    return 0;
}

/* ---- WebSocket ---- */

struct wsc {
    struct conn *c;
    struct sq_ws_ctx *w;
    struct sq_ws_conn ws;
    /* the last complete message and events seen */
    uint8_t msg[80000];
    size_t msg_len;
    int msgs, pings, closes;
    uint16_t close_code;
    char close_reason[128];
    int frag_chunks;
};

static int ws_on(void *ud, const struct sq_ws_event *ev)
{
    struct wsc *x = ud;
    switch (ev->type) {
    case SQ_WS_EV_DATA:
        if (ev->first) {
            x->msg_len = 0;
            x->frag_chunks = 0;
        }
        if (x->msg_len + ev->len > sizeof(x->msg))
            return -1;
        memcpy(x->msg + x->msg_len, ev->data, ev->len);
        x->msg_len += ev->len;
        x->frag_chunks++;
        if (ev->last)
            x->msgs++;
        break;
    case SQ_WS_EV_PING: {
        uint8_t out[256];
        int n =
            sq_ws_encode_frame(x->w, &x->ws, out, sizeof(out), SQ_WS_PONG, true, ev->data, ev->len);
        EXPECT(n > 0, "encode PONG");
        send_all(x->c, out, (size_t)n);
        x->pings++;
        break;
    }
    case SQ_WS_EV_PONG:
        break;
    case SQ_WS_EV_CLOSE:
        x->closes++;
        x->close_code = ev->code;
        snprintf(x->close_reason, sizeof(x->close_reason), "%.*s", (int)ev->len,
                 (const char *)ev->data);
        break;
    }
    return 0;
}

static void ws_open(struct wsc *x, struct sq_ws_ctx *w, int port, uint64_t *rng)
{
    x->c = conn_open(port);
    x->w = w;
    struct sq_ws_handshake hs;
    sq_ws_handshake_init(&hs, rng, (struct sq_str){0});
    char req[512];
    char host[32];
    snprintf(host, sizeof(host), "127.0.0.1:%d", port);
    int n = sq_ws_encode_upgrade(req, sizeof(req), &hs, (struct sq_str){host, strlen(host)},
                                 (struct sq_str){"/ws", 3}, (struct sq_str){0});
    EXPECT(n > 0, "encode upgrade");
    send_all(x->c, req, (size_t)n);
    struct sq_h1_header hd[32];
    struct sq_h1_response resp;
    int head;
    for (;;) {
        resp = (struct sq_h1_response){.headers = hd, .headers_cap = 32};
        head = sq_h1_parse_response_head(x->c->buf, x->c->len, NULL, &resp);
        EXPECT(head >= 0, "101 head: %s", sq_strerror(head));
        if (head > 0)
            break;
        fill(x->c);
    }
    for (size_t i = 0; i < resp.num_headers; i++) {
        int rc = sq_ws_handshake_field(&hs, (struct sq_str){hd[i].name, hd[i].name_len},
                                       (struct sq_str){hd[i].value, hd[i].value_len});
        EXPECT(rc == 0, "handshake field: %s", hs.why);
    }
    EXPECT(sq_ws_handshake_finish(&hs, resp.status) == 0, "handshake: %s", hs.why);
    sq_ws_conn_init(&x->ws, sq_ws_rand(rng), 0);
    x->c->off = (size_t)head;
    if (x->c->off < x->c->len) { /* frames that came with the head */
        EXPECT(sq_ws_feed(w, &x->ws, x->c->buf + x->c->off, x->c->len - x->c->off, ws_on, x) == 0,
               "feed: %s", w->why);
        x->c->off = x->c->len;
    }
}

/* Reads until the count *what reaches want (or the feed fails: returns its code). */
static int ws_wait(struct wsc *x, int *what, int want)
{
    while (*what < want) {
        x->c->off = x->c->len; /* the codec consumes everything it is given */
        fill(x->c);
        int rc = sq_ws_feed(x->w, &x->ws, x->c->buf, x->c->len, ws_on, x);
        x->c->off = x->c->len;
        if (rc)
            return rc;
    }
    return 0;
}

static void ws_send(struct wsc *x, uint8_t op, const void *p, size_t n)
{
    static uint8_t out[80000];
    int k = sq_ws_encode_frame(x->w, &x->ws, out, sizeof(out), op, true, p, n);
    EXPECT(k > 0, "encode frame");
    send_all(x->c, out, (size_t)k);
}

static int run_ws(int port)
{
    struct sq_ws_ctx w;
    EXPECT(sq_ws_ctx_init(&w) == 0, "ws ctx");
    uint64_t rng = 0x77;
    static struct wsc x;
    ws_open(&x, &w, port, &rng);
    int sent = 0;

    ws_send(&x, SQ_WS_TEXT, "hello", 5);
    sent++;
    EXPECT(ws_wait(&x, &x.msgs, 1) == 0 && x.msg_len == 5 && memcmp(x.msg, "hello", 5) == 0,
           "text echo");
    static uint8_t big[70000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)(i * 13);
    ws_send(&x, SQ_WS_BINARY, big, sizeof(big));
    sent++;
    EXPECT(ws_wait(&x, &x.msgs, 2) == 0 && x.msg_len == sizeof(big) &&
               memcmp(x.msg, big, sizeof(big)) == 0,
           "64-bit length binary echo (%zu bytes back)", x.msg_len);
    /* The server pings; the event handler pongs; the server says whether the pong matched. */
    ws_send(&x, SQ_WS_TEXT, "ping", 4);
    sent++;
    EXPECT(ws_wait(&x, &x.msgs, 3) == 0 && x.pings == 1 && x.msg_len == 7 &&
               memcmp(x.msg, "pong-ok", 7) == 0,
           "ping/pong: %d pings, reply '%.*s'", x.pings, (int)x.msg_len, x.msg);
    /* A fragmented message with a ping between its fragments. */
    ws_send(&x, SQ_WS_TEXT, "frag", 4);
    sent++;
    EXPECT(ws_wait(&x, &x.msgs, 4) == 0 && x.pings == 2 && x.frag_chunks == 3 && x.msg_len == 11 &&
               memcmp(x.msg, "hello world", 11) == 0,
           "fragmented: %d chunks '%.*s'", x.frag_chunks, (int)x.msg_len, x.msg);
    /* The server closes with 1011; the client answers with a close. */
    ws_send(&x, SQ_WS_TEXT, "close1011", 9);
    sent++;
    EXPECT(ws_wait(&x, &x.closes, 1) == 0 && x.close_code == 1011 &&
               strcmp(x.close_reason, "bye") == 0,
           "close: code %u reason '%s'", x.close_code, x.close_reason);
    uint8_t out[64];
    int n = sq_ws_encode_close(&w, &x.ws, out, sizeof(out), x.close_code, (struct sq_str){0});
    EXPECT(n > 0, "encode close");
    send_all(x.c, out, (size_t)n);
    sq_ws_conn_dispose(&w, &x.ws);
    conn_close(x.c);

    /* A server that masks its frames is a protocol error. */
    static struct wsc y;
    ws_open(&y, &w, port, &rng);
    ws_send(&y, SQ_WS_TEXT, "masked", 6);
    sent++;
    int rc = ws_wait(&y, &y.msgs, 1);
    EXPECT(rc == -SQ_EPARSE && strstr(w.why, "masked"), "masked server frame: %d", rc);
    sq_ws_conn_dispose(&w, &y.ws);
    conn_close(y.c);

    printf("{\"messages_sent\":%d,\"echoes\":%d,\"pings_answered\":%d,\"close_code\":%u,"
           "\"wslay_contexts\":%llu}\n",
           sent, x.msgs, x.pings, x.close_code, (unsigned long long)w.contexts_created);
    sq_ws_ctx_dispose(&w);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: proto_live nats|mqtt|ws PORT\n");
        return 2;
    }
    int port = atoi(argv[2]);
    if (strcmp(argv[1], "nats") == 0)
        return run_nats(port);
    if (strcmp(argv[1], "mqtt") == 0)
        return run_mqtt(port);
    if (strcmp(argv[1], "ws") == 0)
        return run_ws(port);
    fprintf(stderr, "proto_live: unknown mode '%s'\n", argv[1]);
    return 2;
}
