/* sink/subscribe.c - the sink's broker subscriptions: NATS (core, or a JetStream durable push
 * consumer) and MQTT, on the sink's own loop (see internal.h).
 *
 * One connection per source. It connects, greets, subscribes and then hands every message to
 * sq_sink__event; acknowledgements (JetStream's empty-payload ack to each message's reply
 * subject, MQTT's PUBACK / PUBREC / PUBCOMP) are queued and leave with one write at the end of
 * each read. When the broker goes away the connection is retried after a backoff (10 ms doubling
 * to 1.28 s) and the next subscription counts as a reconnect. A message the broker delivers
 * again (JetStream redelivers what was not acked before a reconnect) lands in the ledger as a
 * duplicate, never as a second delivery.
 *
 * JetStream: the durable consumer is created (or found, when it exists with the same config)
 * with $JS.API.CONSUMER.DURABLE.CREATE.<stream>.<durable>, explicit acks, deliver policy "new"
 * and a fixed deliver subject _INBOX.squall.<stream>.<durable>, so a restarted sink asks for the
 * same consumer and resumes it. The SUB of the deliver subject goes out before the create, so no
 * message can arrive unseen.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "loop/loop.h"
#include "net/egress.h"
#include "net/sock.h"
#include "net/tls.h"
#include "proto/busurl.h"
#include "proto/mqtt.h"
#include "proto/nats.h"
#include "proto/ws.h"
#include "sink/internal.h"
#include "http/h1.h"

#define BACKOFF_MIN_NS    (10 * SQ_NS_PER_MS)
#define BACKOFF_MAX_SHIFT 7
#define CONNECT_TIMEOUT   (5 * SQ_NS_PER_S)
#define SID_DATA          1
#define SID_API           2
#define MQTT_SUB_ID       1
#define MAX_FIELDS        64

enum { S_CLOSED, S_BACKOFF, S_CONNECTING, S_HANDSHAKE, S_UPGRADE, S_HELLO, S_SUBSCRIBED };

/* mqtt+ws://, mqtt+wss://: the WebSocket under the MQTT connection (as engine/busws.c does for
 * the load): the upgrade (subprotocol mqtt) before CONNECT, every packet written in a masked
 * binary frame, and the payload of binary frames read fed to the same packet reader. */
struct sinkws {
    struct sq_ws_ctx ctx;
    struct sq_ws_conn wc;
    struct sq_ws_handshake hs;
    struct sq_h1_reader rd;
    uint64_t rng;
    bool open;
};

struct sq_sink__bus {
    struct sq_sink *sink;
    struct sq_loop *loop;
    enum sq_sink__bus_kind kind;
    struct sq_bus_url url;
    const struct sq_sink_config *cfg;
    struct sq_addr addr;
    struct sq_io io;
    struct sq_timer timer;
    struct sq_buf out, spill;
    size_t need;
    int64_t since_ns, wrote_ns;
    uint8_t state, backoff;
    bool was_subscribed;
    bool got_info;
    bool failed; /* inside a read: the connection broke */
    /* over TLS (tls://, mqtts://): the client (its host the URL's), the connection's state, the
     * sessions to resume; upgrade: NATS read INFO in the clear and wants TLS now */
    struct sq_tls_client *tc;
    struct sq_tls_conn *tls;
    struct sq_tls_sessions sessions;
    bool upgrade, info_headers;
    char err[160];  /* the broker's first error (-ERR, a refused CONNACK or SUBACK) */
    char cerr[256]; /* the first reason a connection failed (refused, no answer, closed) */
    struct sq_nats_limits nlim;
    struct sq_mqtt_limits mlim;
    uint64_t messages, reconnects, acks; /* atomic (read by other threads) */
    int subscribed;                      /* atomic */
    /* set: messages go here, not to the sink's ledger (sink/subs.c's subscribers) */
    sq_sink__msg_cb on_msg;
    void *msg_ud;
    /* a JetStream pull or push consumer of the subscribers' (cfg->nats_pull, nats_push): this
     * connection's inbox prefix (its API answers and the messages), the consumer's name once
     * created, the fetch's count */
    char inbox[48];
    char consumer[128];
    uint32_t in_batch;
    uint64_t fetches, redelivered; /* atomic */
    struct sinkws *ws;             /* NULL: MQTT (or NATS) on the socket */
};

static void b_connect(struct sq_sink__bus *b);

static void note(struct sq_sink__bus *b, const char *msg, size_t len)
{
    if (b->err[0])
        return;
    if (len >= sizeof(b->err))
        len = sizeof(b->err) - 1;
    for (size_t i = 0; i < len; i++)
        b->err[i] = (unsigned char)msg[i] < 0x20 ? '?' : msg[i];
    b->err[len] = '\0';
}

/* Why the connection failed, once: what with the broker's address in its %s, then the error
 * (when err is set): "connect to 127.0.0.1:4222: Connection refused". */
static void conn_failed(struct sq_sink__bus *b, const char *what, int err)
{
    if (b->cerr[0])
        return;
    char addr[80], text[sizeof(b->cerr)];
    sq_addr_format(&b->addr, addr, sizeof(addr));
    const char *at = strstr(what, "%s");
    snprintf(text, sizeof(text), "%.*s%s%s", at ? (int)(at - what) : (int)strlen(what), what,
             at ? addr : "", at ? at + 2 : "");
    if (err) /* a reason longer than cerr is cut: it is a message, not data */
        snprintf(b->cerr, sizeof(b->cerr), "%.100s: %.50s", text, sq_strerror(err));
    else
        snprintf(b->cerr, sizeof(b->cerr), "%s", text);
}

static void teardown(struct sq_sink__bus *b)
{
    sq_timer_stop(b->loop, &b->timer);
    if (b->tls) {
        sq_tls_conn_free(b->tls);
        b->tls = NULL;
    }
    b->upgrade = false;
    if (b->io.fd >= 0) {
        sq_io_stop(b->loop, &b->io);
        close(b->io.fd);
        b->io.fd = -1;
    }
    sq_buf_reset(&b->out);
    sq_buf_reset(&b->spill);
    b->need = 0;
    b->got_info = false;
    if (b->ws) {
        if (b->ws->open)
            sq_ws_conn_dispose(&b->ws->ctx, &b->ws->wc);
        b->ws->open = false;
        sq_h1_reader_dispose(&b->ws->rd);
    }
    __atomic_store_n(&b->subscribed, 0, __ATOMIC_RELAXED);
    b->state = S_CLOSED;
}

static void retry(struct sq_sink__bus *b)
{
    teardown(b);
    int64_t delay = BACKOFF_MIN_NS << b->backoff;
    if (b->backoff < BACKOFF_MAX_SHIFT)
        b->backoff++;
    if (sq_timer_start(b->loop, &b->timer, sq_loop_now(b->loop) + delay) == 0)
        b->state = S_BACKOFF;
}

static void on_timer(struct sq_loop *loop, struct sq_timer *t)
{
    SQ_UNUSED(loop);
    struct sq_sink__bus *b = SQ_CONTAINER_OF(t, struct sq_sink__bus, timer);
    b->state = S_CLOSED;
    b_connect(b);
}

static int queue(struct sq_sink__bus *b, const void *p, size_t n)
{
    if (!b->ws || !b->ws->open)
        return sq_buf_append(&b->out, p, n);
    size_t need = sq_ws_frame_len(n);
    if (sq_buf_reserve(&b->out, need) < 0)
        return -ENOMEM;
    int k = sq_ws_encode_frame(&b->ws->ctx, &b->ws->wc, (uint8_t *)b->out.p + b->out.len, need,
                               SQ_WS_BINARY, true, p, n);
    if (k < 0)
        return k;
    b->out.len += (size_t)k;
    return 0;
}

/* read() and send(), through TLS when the connection runs it (-1 with errno either way). */
static ssize_t b_recv(struct sq_sink__bus *b, void *p, size_t n)
{
    if (!b->tls)
        return read(b->io.fd, p, n);
    ssize_t r = sq_tls_read(b->tls, p, n);
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

static ssize_t b_send(struct sq_sink__bus *b, const void *p, size_t n)
{
    if (!b->tls)
        return send(b->io.fd, p, n, MSG_NOSIGNAL);
    ssize_t r = sq_tls_write(b->tls, p, n);
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

/* A TLS failure, as the first reason the connection failed: "TLS with 127.0.0.1:4222: ...". */
static void tls_failed(struct sq_sink__bus *b, const char *msg)
{
    if (b->cerr[0])
        return;
    char addr[80];
    sq_addr_format(&b->addr, addr, sizeof(addr));
    snprintf(b->cerr, sizeof(b->cerr), "TLS with %.60s: %.180s", addr, msg);
}

static void flush(struct sq_sink__bus *b)
{
    size_t off = 0;
    while (off < b->out.len) {
        ssize_t n = b_send(b, b->out.p + off, b->out.len - off);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        b->failed = true;
        return;
    }
    if (off) {
        memmove(b->out.p, b->out.p + off, b->out.len - off);
        b->out.len -= off;
    }
    b->wrote_ns = sq_loop_now(b->loop);
    if (sq_io_modify(b->loop, &b->io, b->out.len ? EPOLLIN | EPOLLOUT : EPOLLIN) < 0)
        b->failed = true;
}

static void subscribed(struct sq_sink__bus *b)
{
    if (b->state == S_SUBSCRIBED)
        return;
    if (b->was_subscribed)
        __atomic_add_fetch(&b->reconnects, 1, __ATOMIC_RELAXED);
    b->was_subscribed = true;
    b->backoff = 0;
    b->state = S_SUBSCRIBED;
    __atomic_store_n(&b->subscribed, 1, __ATOMIC_RELAXED);
}

/* ---- NATS ---- */

static int nats_connect(struct sq_sink__bus *b);
static int js_create(struct sq_sink__bus *b);

static int nats_hello(struct sq_sink__bus *b, const struct sq_nats_event *ev)
{
    struct sq_nats_info info;
    if (b->got_info)
        return 0;
    if (sq_nats_info_parse(ev->text, &info) < 0)
        return -SQ_EPARSE;
    b->got_info = true;
    if (info.max_payload > 0 && info.max_payload <= SQ_NATS_MAX_PAYLOAD_LIMIT)
        b->nlim.max_payload = (uint32_t)info.max_payload;
    b->info_headers = info.headers;
    if (!b->tc && info.tls_required) {
        tls_failed(b, "the NATS server requires TLS: use tls://HOST[:PORT]/SUBJECT");
        return -SQ_EPARSE;
    }
    if (b->tc && !b->tls) {
        if (!info.tls_required && !info.tls_available) {
            tls_failed(b, "the NATS server offers no TLS (tls:// asks for it)");
            return -SQ_EPARSE;
        }
        b->upgrade = true; /* TLS on this socket at the end of the read, then CONNECT */
        return 0;
    }
    return nats_connect(b);
}

static int nats_connect(struct sq_sink__bus *b)
{
    const struct sq_sink_config *cfg = b->cfg;
    struct sq_nats_connect_opts o = {
        .name = "squall-sink", .headers = b->info_headers, .tls_required = b->tls != NULL};
    if (b->url.user && b->url.password) {
        o.user = b->url.user;
        o.pass = b->url.password;
    } else if (b->url.user) {
        o.auth_token = b->url.user;
    }
    char buf[2048];
    int n = sq_nats_encode_connect(buf, sizeof(buf), &o);
    if (n < 0 || queue(b, buf, (size_t)n) < 0)
        return -ENOMEM;
    struct sq_str subj = {b->url.target, strlen(b->url.target)};
    if (cfg->nats_pull || cfg->nats_push)
        return js_create(b);
    if (cfg->nats_stream) {
        char deliver[512], api[512], body[1024];
        snprintf(deliver, sizeof(deliver), "_INBOX.squall.%s.%s", cfg->nats_stream,
                 cfg->nats_durable);
        snprintf(api, sizeof(api), "$JS.API.CONSUMER.DURABLE.CREATE.%s.%s", cfg->nats_stream,
                 cfg->nats_durable);
        int bl = snprintf(body, sizeof(body),
                          "{\"stream_name\":\"%s\",\"config\":{\"durable_name\":\"%s\","
                          "\"deliver_subject\":\"%s\",\"ack_policy\":\"explicit\","
                          "\"deliver_policy\":\"new\",\"max_ack_pending\":100000,"
                          "\"filter_subject\":\"%s\"}}",
                          cfg->nats_stream, cfg->nats_durable, deliver, b->url.target);
        n = sq_nats_encode_sub(buf, sizeof(buf), (struct sq_str){deliver, strlen(deliver)},
                               (struct sq_str){"", 0}, SID_DATA);
        if (n < 0 || queue(b, buf, (size_t)n) < 0)
            return -ENOMEM;
        n = sq_nats_encode_sub(buf, sizeof(buf), (struct sq_str){"_INBOX.squall.api", 17},
                               (struct sq_str){"", 0}, SID_API);
        if (n < 0 || queue(b, buf, (size_t)n) < 0)
            return -ENOMEM;
        n = sq_nats_encode_pub(buf, sizeof(buf), (struct sq_str){api, strlen(api)},
                               (struct sq_str){"_INBOX.squall.api", 17}, body, (size_t)bl);
        if (n < 0 || queue(b, buf, (size_t)n) < 0)
            return -ENOMEM;
        return 0; /* subscribed when the API answers */
    }
    const char *q = cfg->nats_queue ? cfg->nats_queue : "";
    n = sq_nats_encode_sub(buf, sizeof(buf), subj, (struct sq_str){q, strlen(q)}, SID_DATA);
    if (n < 0 || queue(b, buf, (size_t)n) < 0 || queue(b, SQ_NATS_PING, SQ_NATS_PING_LEN) < 0)
        return -ENOMEM;
    return 0; /* subscribed at the PONG */
}

/* ---- a JetStream pull consumer (sink/subs.c's subscribers) ---- */

/* A JetStream consumer of the subscribers' (cfg->nats_pull or nats_push): the SUBs of the
 * connection's inbox ("<inbox>.d" the messages, "<inbox>.api" the API's answers), then the
 * consumer's create. Durable when cfg->nats_durable names one (whoever names the same one shares
 * its messages: a push consumer's then go to a deliver group of that name), else ephemeral, one
 * per connection (the server drops it 10 s after the connection goes). Explicit acks, deliver
 * policy "new": what is published from now on. */
static int js_create(struct sq_sink__bus *b)
{
    const struct sq_sink_config *cfg = b->cfg;
    char d[192], api[64], subj[512], body[1024], buf[2048], deliver[256] = "";
    bool shared_push = cfg->nats_push && cfg->nats_durable;
    int dl = shared_push ? snprintf(d, sizeof(d), "_INBOX.squall.push.%s.%s", cfg->nats_stream,
                                    cfg->nats_durable)
                         : snprintf(d, sizeof(d), "%s.d", b->inbox);
    int al = snprintf(api, sizeof(api), "%s.api", b->inbox);
    if (dl < 0 || (size_t)dl >= sizeof(d))
        return -SQ_ETOOBIG;
    const char *grp = shared_push ? cfg->nats_durable : "";
    int n = sq_nats_encode_sub(buf, sizeof(buf), (struct sq_str){d, (size_t)dl},
                               (struct sq_str){grp, strlen(grp)}, SID_DATA);
    if (n < 0 || queue(b, buf, (size_t)n) < 0)
        return -ENOMEM;
    n = sq_nats_encode_sub(buf, sizeof(buf), (struct sq_str){api, (size_t)al},
                           (struct sq_str){"", 0}, SID_API);
    if (n < 0 || queue(b, buf, (size_t)n) < 0)
        return -ENOMEM;
    if (cfg->nats_push)
        snprintf(deliver, sizeof(deliver), "\"deliver_subject\":\"%s\",%s%s%s", d,
                 shared_push ? "\"deliver_group\":\"" : "", shared_push ? grp : "",
                 shared_push ? "\"," : "");
    int bl;
    if (cfg->nats_durable) {
        snprintf(subj, sizeof(subj), "$JS.API.CONSUMER.DURABLE.CREATE.%s.%s", cfg->nats_stream,
                 cfg->nats_durable);
        bl = snprintf(body, sizeof(body),
                      "{\"stream_name\":\"%s\",\"config\":{\"durable_name\":\"%s\",%s"
                      "\"ack_policy\":\"explicit\",\"deliver_policy\":\"new\","
                      "\"max_ack_pending\":100000,\"filter_subject\":\"%s\"}}",
                      cfg->nats_stream, cfg->nats_durable, deliver, b->url.target);
    } else {
        snprintf(subj, sizeof(subj), "$JS.API.CONSUMER.CREATE.%s", cfg->nats_stream);
        bl = snprintf(body, sizeof(body),
                      "{\"stream_name\":\"%s\",\"config\":{%s\"ack_policy\":\"explicit\","
                      "\"deliver_policy\":\"new\",\"max_ack_pending\":100000,"
                      "\"inactive_threshold\":10000000000,\"filter_subject\":\"%s\"}}",
                      cfg->nats_stream, deliver, b->url.target);
    }
    if (bl < 0 || (size_t)bl >= sizeof(body))
        return -SQ_ETOOBIG;
    n = sq_nats_encode_pub(buf, sizeof(buf), (struct sq_str){subj, strlen(subj)},
                           (struct sq_str){api, (size_t)al}, body, (size_t)bl);
    if (n < 0 || queue(b, buf, (size_t)n) < 0)
        return -ENOMEM;
    return 0; /* subscribed when the API answers (nats_message) */
}

/* The next fetch: nats_batch messages, or whatever came within 1 s (then a 408 status ends it
 * and the next one goes out). */
static void pull_fetch(struct sq_sink__bus *b)
{
    const struct sq_sink_config *cfg = b->cfg;
    char subj[512], d[64], body[96], buf[1024];
    snprintf(subj, sizeof(subj), "$JS.API.CONSUMER.MSG.NEXT.%s.%s", cfg->nats_stream, b->consumer);
    int dl = snprintf(d, sizeof(d), "%s.d", b->inbox);
    int bl = snprintf(body, sizeof(body), "{\"batch\":%u,\"expires\":1000000000}",
                      cfg->nats_batch ? cfg->nats_batch : 100);
    int n = sq_nats_encode_pub(buf, sizeof(buf), (struct sq_str){subj, strlen(subj)},
                               (struct sq_str){d, (size_t)dl}, body, (size_t)bl);
    if (n < 0 || queue(b, buf, (size_t)n) < 0) {
        b->failed = true;
        return;
    }
    b->in_batch = 0;
    __atomic_add_fetch(&b->fetches, 1, __ATOMIC_RELAXED);
}

/* The delivery count in a JetStream ack subject: $JS.ACK.<stream>.<consumer>.<delivered>...
 * (9 tokens), or with a domain and an account hash before the stream (12 or more). */
static uint64_t delivered_count(struct sq_str reply)
{
    size_t tok = 0, start = 0, ntok = 1;
    for (size_t i = 0; i < reply.len; i++)
        ntok += reply.p[i] == '.';
    size_t want = ntok >= 12 ? 6 : 4;
    uint64_t v = 0;
    for (size_t i = 0; i <= reply.len; i++) {
        if (i < reply.len && reply.p[i] != '.')
            continue;
        if (tok == want) {
            for (size_t k = start; k < i && reply.p[k] >= '0' && reply.p[k] <= '9'; k++)
                v = v * 10 + (uint64_t)(reply.p[k] - '0');
            return v;
        }
        tok++;
        start = i + 1;
    }
    return 0;
}

static void nats_message(struct sq_sink__bus *b, const struct sq_nats_event *ev)
{
    if (ev->sid_num == SID_API) {
        struct sq_str e;
        if (sq_nats_json_get(ev->payload, "error", &e) == 1) {
            note(b, ev->payload.p, ev->payload.len);
            b->failed = true; /* retried after a backoff */
            return;
        }
        if (b->cfg->nats_pull) {
            struct sq_str name;
            if (sq_nats_json_get(ev->payload, "name", &name) != 1 || name.len < 3 ||
                name.len - 2 >= sizeof(b->consumer)) {
                note(b, ev->payload.p, ev->payload.len);
                b->failed = true;
                return;
            }
            memcpy(b->consumer, name.p + 1, name.len - 2); /* without its quotes */
            b->consumer[name.len - 2] = '\0';
            subscribed(b);
            pull_fetch(b);
            return;
        }
        subscribed(b);
        return;
    }
    if (ev->sid_num != SID_DATA)
        return;
    if (b->cfg->nats_pull && ev->op == SQ_NATS_OP_HMSG && ev->status >= 400) {
        pull_fetch(b); /* 404 no messages, 408 expired, 409 the server ended it */
        return;
    }
    if ((b->cfg->nats_pull || b->cfg->nats_push) && delivered_count(ev->reply) > 1)
        __atomic_add_fetch(&b->redelivered, 1, __ATOMIC_RELAXED);
    struct sq_sink_field f[MAX_FIELDS];
    size_t nf = 0;
    if (ev->op == SQ_NATS_OP_HMSG) {
        size_t pos = 0;
        struct sq_str name, value;
        while (nf < MAX_FIELDS && sq_nats_header_next(ev->headers, &pos, &name, &value))
            f[nf++] = (struct sq_sink_field){name.p, value.p, name.len, value.len};
        if (ev->status == 100 || (ev->status && !ev->payload.len))
            return; /* a JetStream heartbeat or flow-control message, not an event */
    }
    __atomic_add_fetch(&b->messages, 1, __ATOMIC_RELAXED);
    if (b->on_msg)
        b->on_msg(b->msg_ud, ev->payload.p, ev->payload.len);
    else
        sq_sink__event(b->sink, sq_sink__bus_shard(b->sink), ev->payload.p, ev->payload.len, f, nf);
    if (b->cfg->nats_stream && ev->reply.len) {
        char buf[512];
        int n = sq_nats_encode_pub(buf, sizeof(buf), ev->reply, (struct sq_str){"", 0}, "", 0);
        if (n > 0 && queue(b, buf, (size_t)n) == 0)
            __atomic_add_fetch(&b->acks, 1, __ATOMIC_RELAXED);
    }
    if (b->cfg->nats_pull && ++b->in_batch >= (b->cfg->nats_batch ? b->cfg->nats_batch : 100))
        pull_fetch(b);
}

static int nats_unit(struct sq_sink__bus *b, const char *p, size_t n, size_t *need)
{
    struct sq_nats_event ev;
    int rc = sq_nats_parse(p, n, &b->nlim, &ev, need);
    if (rc <= 0)
        return rc;
    switch (ev.op) {
    case SQ_NATS_OP_INFO:
        if (nats_hello(b, &ev) < 0)
            return -SQ_EPARSE;
        break;
    case SQ_NATS_OP_PING:
        if (queue(b, SQ_NATS_PONG, SQ_NATS_PONG_LEN) < 0)
            return -ENOMEM;
        break;
    case SQ_NATS_OP_PONG:
        if (!b->cfg->nats_stream)
            subscribed(b);
        break;
    case SQ_NATS_OP_MSG:
    case SQ_NATS_OP_HMSG:
        nats_message(b, &ev);
        break;
    case SQ_NATS_OP_ERR:
        note(b, ev.text.p, ev.text.len);
        break;
    default:
        break;
    }
    return rc;
}

/* ---- MQTT ---- */

static int mqtt_hello(struct sq_sink__bus *b)
{
    /* unique in this process too: many subscribers (sink/subs.c) connect at once */
    static unsigned nth;
    char id[96];
    int idl = snprintf(id, sizeof(id), "squall-sink-%d-%llx-%u", (int)getpid(),
                       (unsigned long long)(sq_now_ns() & 0xffffffffffull),
                       __atomic_add_fetch(&nth, 1, __ATOMIC_RELAXED));
    struct sq_mqtt_connect c = {
        .version = b->mlim.version,
        .clean_start = true,
        .keepalive = 60,
        .client_id = {id, (size_t)idl},
        .username = b->url.user,
    };
    if (b->url.password)
        c.password = (struct sq_str){b->url.password, strlen(b->url.password)};
    if (c.version == SQ_MQTT_V5)
        c.max_packet_size = SQ_MQTT_DEFAULT_MAX_PACKET;
    uint8_t buf[1024];
    int n = sq_mqtt_encode_connect(buf, sizeof(buf), &c);
    return n < 0 ? n : queue(b, buf, (size_t)n);
}

static int mqtt_ack(struct sq_sink__bus *b, uint8_t type, uint16_t id)
{
    uint8_t p[8];
    int n = sq_mqtt_encode_ack(SQ_MQTT_V311, p, sizeof(p), type, id, 0);
    return n < 0 ? n : queue(b, p, (size_t)n);
}

static int mqtt_unit(struct sq_sink__bus *b, const char *p, size_t n, size_t *need)
{
    struct sq_mqtt_packet pk;
    int rc = sq_mqtt_parse((const uint8_t *)p, n, &b->mlim, &pk, need);
    if (rc <= 0)
        return rc;
    switch (pk.type) {
    case SQ_MQTT_CONNACK: {
        if (pk.reason != 0) {
            char m[64];
            int k = snprintf(m, sizeof(m), "mqtt: CONNACK refused (reason 0x%02x)", pk.reason);
            note(b, m, (size_t)k);
            b->failed = true;
            break;
        }
        struct sq_mqtt_subscription s = {
            .filter = {b->url.target, strlen(b->url.target)},
            .qos = (uint8_t)(b->cfg->mqtt_qos < 0 ? 1 : b->cfg->mqtt_qos),
        };
        uint8_t buf[1024];
        int k = sq_mqtt_encode_subscribe(b->mlim.version, buf, sizeof(buf), MQTT_SUB_ID, &s, 1, 0);
        if (k < 0 || queue(b, buf, (size_t)k) < 0)
            return -ENOMEM;
        break;
    }
    case SQ_MQTT_SUBACK:
        if (pk.reasons.len == 0 || (uint8_t)pk.reasons.p[0] >= 0x80) {
            note(b, "mqtt: SUBACK refused the subscription", 37);
            b->failed = true;
            break;
        }
        subscribed(b);
        break;
    case SQ_MQTT_PUBLISH: {
        if (pk.qos == 1 && mqtt_ack(b, SQ_MQTT_PUBACK, pk.packet_id) < 0)
            return -ENOMEM;
        if (pk.qos == 2 && mqtt_ack(b, SQ_MQTT_PUBREC, pk.packet_id) < 0)
            return -ENOMEM;
        struct sq_sink_field f[MAX_FIELDS];
        size_t nf = 0;
        if (b->mlim.version == SQ_MQTT_V5 && pk.props.user_props) {
            size_t pos = 0;
            struct sq_mqtt_user_prop up;
            while (nf < MAX_FIELDS && sq_mqtt_user_prop_next(pk.props.raw, &pos, &up))
                f[nf++] = (struct sq_sink_field){up.name.p, up.value.p, up.name.len, up.value.len};
        }
        __atomic_add_fetch(&b->messages, 1, __ATOMIC_RELAXED);
        if (b->on_msg)
            b->on_msg(b->msg_ud, pk.payload.p, pk.payload.len);
        else
            sq_sink__event(b->sink, sq_sink__bus_shard(b->sink), pk.payload.p, pk.payload.len, f,
                           nf);
        break;
    }
    case SQ_MQTT_PUBREL:
        if (mqtt_ack(b, SQ_MQTT_PUBCOMP, pk.packet_id) < 0)
            return -ENOMEM;
        break;
    case SQ_MQTT_DISCONNECT:
        note(b, "mqtt: the server sent DISCONNECT", 32);
        b->failed = true;
        break;
    default:
        break;
    }
    return rc;
}

/* ---- MQTT over WebSocket ---- */

static void feed(struct sq_sink__bus *b, const char *p, size_t n);
static void greet(struct sq_sink__bus *b);

static const struct sq_h1_limits up_limits = {.max_head_bytes = 16 * 1024, .max_headers = 64};

static int ws_fields(void *ud, const char *head, size_t len, const struct sq_h1_header *fields,
                     size_t nfields)
{
    SQ_UNUSED(head);
    SQ_UNUSED(len);
    struct sinkws *w = ud;
    if (w->rd.status != 101)
        return 0;
    for (size_t i = 0; i < nfields; i++)
        if (sq_ws_handshake_field(&w->hs, (struct sq_str){fields[i].name, fields[i].name_len},
                                  (struct sq_str){fields[i].value, fields[i].value_len}) < 0)
            return -SQ_EPARSE;
    return 0;
}

static void upgrade(struct sq_sink__bus *b)
{
    struct sinkws *w = b->ws;
    b->state = S_UPGRADE;
    b->since_ns = sq_loop_now(b->loop);
    sq_h1_reader_init(&w->rd, &up_limits);
    sq_h1_reader_start(&w->rd, false);
    sq_h1_reader_on_fields(&w->rd, ws_fields, w);
    sq_ws_handshake_init(&w->hs, &w->rng, (struct sq_str){"mqtt", 4});
    char host[300], req[1024];
    bool v6 = strchr(b->url.host, ':') != NULL;
    snprintf(host, sizeof(host), "%s%s%s:%u", v6 ? "[" : "", b->url.host, v6 ? "]" : "",
             (unsigned)b->url.port);
    int n = sq_ws_encode_upgrade(req, sizeof(req), &w->hs, (struct sq_str){host, strlen(host)},
                                 (struct sq_str){b->url.ws_path, strlen(b->url.ws_path)},
                                 (struct sq_str){"", 0});
    if (sq_io_modify(b->loop, &b->io, EPOLLIN) < 0 || n < 0 ||
        sq_buf_append(&b->out, req, (size_t)n) < 0) {
        retry(b);
        return;
    }
    flush(b);
    if (b->failed) {
        b->failed = false;
        retry(b);
    }
}

static int ws_event(void *ud, const struct sq_ws_event *ev)
{
    struct sq_sink__bus *b = ud;
    if (ev->type == SQ_WS_EV_DATA) {
        if (ev->opcode != SQ_WS_BINARY)
            return -SQ_EPARSE;
        feed(b, (const char *)ev->data, ev->len);
        return b->failed ? -EPROTO : 0;
    }
    if (ev->type == SQ_WS_EV_PING) {
        size_t need = sq_ws_frame_len(ev->len);
        if (sq_buf_reserve(&b->out, need) < 0)
            return -ENOMEM;
        int k = sq_ws_encode_frame(&b->ws->ctx, &b->ws->wc, (uint8_t *)b->out.p + b->out.len, need,
                                   SQ_WS_PONG, true, ev->data, ev->len);
        if (k < 0)
            return k;
        b->out.len += (size_t)k;
        return 0;
    }
    if (ev->type == SQ_WS_EV_CLOSE)
        return 1;
    return 0;
}

static void feed_ws(struct sq_sink__bus *b, const char *p, size_t n)
{
    struct sinkws *w = b->ws;
    if (!w->open) {
        size_t used = 0;
        int rc = sq_h1_reader_feed(&w->rd, p, n, &used);
        if (rc == 0)
            return;
        if (rc < 0 || w->rd.status != 101 || sq_ws_handshake_finish(&w->hs, 101) < 0) {
            char m[160];
            if (rc >= 0 && w->rd.status != 101)
                snprintf(m, sizeof(m), "mqtt+ws: %%s answered the upgrade with status %u",
                         (unsigned)w->rd.status);
            else
                snprintf(m, sizeof(m), "mqtt+ws: %%s: %.100s",
                         w->hs.why ? w->hs.why : "the answer to the upgrade is not HTTP/1.1");
            conn_failed(b, m, 0);
            b->failed = true;
            return;
        }
        sq_h1_reader_dispose(&w->rd);
        sq_ws_conn_init(&w->wc, sq_ws_rand(&w->rng), UINT64_MAX);
        w->open = true;
        greet(b); /* CONNECT, now framed */
        if (b->state != S_HELLO) {
            b->failed = true;
            return;
        }
        p += used;
        n -= used;
        if (!n)
            return;
    }
    int rc = sq_ws_feed(&w->ctx, &w->wc, p, n, ws_event, b);
    if (rc != 0)
        b->failed = true;
}

/* ---- I/O ---- */

static int unit(struct sq_sink__bus *b, const char *p, size_t n, size_t *need)
{
    *need = 0;
    return b->kind == SQ_SINK_NATS ? nats_unit(b, p, n, need) : mqtt_unit(b, p, n, need);
}

static void feed(struct sq_sink__bus *b, const char *p, size_t n)
{
    while (b->spill.len && n && !b->failed) {
        size_t take = b->need > b->spill.len ? b->need - b->spill.len : 4096;
        if (take > n)
            take = n;
        if (b->spill.len + take > (2u << 20) || sq_buf_append(&b->spill, p, take) < 0) {
            b->failed = true;
            return;
        }
        p += take;
        n -= take;
        size_t need;
        int rc = unit(b, b->spill.p, b->spill.len, &need);
        if (rc < 0) {
            b->failed = true;
            return;
        }
        if (rc == 0) {
            b->need = need;
            continue;
        }
        size_t rest = b->spill.len - (size_t)rc;
        p -= rest;
        n += rest;
        sq_buf_reset(&b->spill);
        b->need = 0;
    }
    while (n && !b->failed) {
        size_t need;
        int rc = unit(b, p, n, &need);
        if (rc < 0) {
            b->failed = true;
            return;
        }
        if (rc == 0) {
            if (sq_buf_append(&b->spill, p, n) < 0)
                b->failed = true;
            b->need = need;
            return;
        }
        p += rc;
        n -= (size_t)rc;
    }
}

/* The transport is usable (TCP, and TLS when the URL asks): the protocol's greeting. MQTT
 * speaks first; NATS waits for INFO, or, after a switch to TLS, sends its CONNECT now. */
static void greet(struct sq_sink__bus *b)
{
    if (b->ws && !b->ws->open) {
        upgrade(b);
        return;
    }
    b->state = S_HELLO;
    b->since_ns = sq_loop_now(b->loop);
    if (sq_io_modify(b->loop, &b->io, EPOLLIN) < 0 ||
        (b->kind == SQ_SINK_MQTT && mqtt_hello(b) < 0) ||
        (b->kind == SQ_SINK_NATS && b->got_info && nats_connect(b) < 0)) {
        retry(b);
        return;
    }
    flush(b);
    if (b->failed) {
        b->failed = false;
        retry(b);
    }
}

static void handshake(struct sq_sink__bus *b)
{
    int rc = sq_tls_handshake(b->tls);
    if (rc == -EAGAIN) {
        if (sq_io_modify(b->loop, &b->io, sq_tls_want_write(b->tls) ? EPOLLOUT : EPOLLIN) < 0)
            retry(b);
        return;
    }
    if (rc < 0) {
        tls_failed(b, sq_tls_conn_error(b->tls));
        retry(b);
        return;
    }
    greet(b);
}

static void start_tls(struct sq_sink__bus *b)
{
    if (sq_tls_conn_client(b->tc, &b->sessions, b->io.fd, &b->tls) < 0) {
        tls_failed(b, "out of memory for a TLS connection");
        retry(b);
        return;
    }
    b->state = S_HANDSHAKE;
    b->since_ns = sq_loop_now(b->loop);
    handshake(b);
}

static void on_io(struct sq_loop *loop, struct sq_io *io, uint32_t ev)
{
    SQ_UNUSED(loop);
    struct sq_sink__bus *b = SQ_CONTAINER_OF(io, struct sq_sink__bus, io);
    if (b->state == S_HANDSHAKE) {
        handshake(b);
        return;
    }
    if (b->state == S_CONNECTING) {
        int crc = sq_connect_result(b->io.fd);
        if (crc < 0) {
            conn_failed(b, "connect to %s", crc);
            retry(b);
            return;
        }
        if (b->tc && b->kind == SQ_SINK_MQTT)
            start_tls(b); /* mqtts: TLS first; NATS reads INFO in the clear first */
        else
            greet(b);
        return;
    }
    b->failed = false;
    if (ev & EPOLLOUT)
        flush(b);
    if (!b->failed && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
        static __thread char rbuf[64 * 1024];
        /* over TLS, records OpenSSL read ahead wake no poll: read them before returning */
        bool more = false;
        for (int i = 0; (i < 8 || more) && !b->failed && !b->upgrade; i++) {
            ssize_t n = b_recv(b, rbuf, sizeof(rbuf));
            more = b->tls && sq_tls_buffered(b->tls);
            if (n > 0) {
                if (b->ws)
                    feed_ws(b, rbuf, (size_t)n);
                else
                    feed(b, rbuf, (size_t)n);
                if ((size_t)n < sizeof(rbuf) && !more)
                    break;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                break;
            b->failed = true;                       /* end of stream, or a reset */
            if (n < 0 && errno == EPROTO && b->tls) /* an alert: certificate required... */
                tls_failed(b, sq_tls_conn_error(b->tls));
            else if (b->state != S_SUBSCRIBED)
                conn_failed(b, "%s closed the connection before the subscription", 0);
        }
        if (!b->failed && b->out.len)
            flush(b);
    }
    if (b->failed) {
        b->failed = false;
        retry(b);
        return;
    }
    if (b->upgrade) {
        b->upgrade = false;
        start_tls(b);
    }
}

static void b_connect(struct sq_sink__bus *b)
{
    /* the run's egress policy, checked when the sink started, once more on the address */
    if (b->cfg->egress && sq_egress_allows(b->cfg->egress, &b->addr, SQ_EGRESS_CONNECT) < 0) {
        static const char refused[] = "the run's egress policy refuses this address";
        note(b, refused, sizeof(refused) - 1);
        retry(b);
        return;
    }
    int fd = sq_connect_start(&b->addr);
    if (fd < 0) {
        conn_failed(b, "connect to %s", fd);
        retry(b);
        return;
    }
    if (sq_io_start(b->loop, &b->io, fd, EPOLLOUT, on_io) < 0) {
        close(fd);
        retry(b);
        return;
    }
    b->state = S_CONNECTING;
    b->since_ns = sq_loop_now(b->loop);
}

void sq_sink__bus_sweep(struct sq_sink__bus *b, int64_t now)
{
    if ((b->state == S_CONNECTING || b->state == S_HANDSHAKE || b->state == S_UPGRADE ||
         b->state == S_HELLO) &&
        now - b->since_ns > CONNECT_TIMEOUT) {
        conn_failed(b,
                    b->state == S_CONNECTING  ? "no answer from %s within 5s"
                    : b->state == S_HANDSHAKE ? "no TLS handshake with %s within 5s"
                    : b->state == S_UPGRADE ? "no answer to the WebSocket upgrade from %s within 5s"
                                            : "no subscription within 5s of connecting to %s",
                    0);
        retry(b);
        return;
    }
    if (b->state == S_CLOSED) {
        b_connect(b);
        return;
    }
    if (b->kind == SQ_SINK_MQTT && b->state == S_SUBSCRIBED &&
        now - b->wrote_ns > 30 * SQ_NS_PER_S) {
        uint8_t p[2];
        if (sq_mqtt_encode_pingreq(p, sizeof(p)) == 2 && queue(b, p, 2) == 0)
            flush(b);
        if (b->failed) {
            b->failed = false;
            retry(b);
        }
    }
}

int sq_sink__bus_new(struct sq_sink *s, struct sq_loop *loop, enum sq_sink__bus_kind kind,
                     const struct sq_sink_config *cfg, struct sq_sink__bus **out, char *err,
                     size_t len)
{
    *out = NULL;
    struct sq_sink__bus *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->sink = s;
    b->loop = loop;
    b->kind = kind;
    b->cfg = cfg;
    b->io.fd = -1;
    sq_timer_init(&b->timer, on_timer);
    sq_nats_limits_init(&b->nlim);
    b->mlim.version = cfg->mqtt_version == 5 ? SQ_MQTT_V5 : SQ_MQTT_V311;
    b->mlim.max_packet = SQ_MQTT_DEFAULT_MAX_PACKET;
    const char *flag = kind == SQ_SINK_NATS ? "--nats" : "--mqtt";
    const char *url = kind == SQ_SINK_NATS ? cfg->nats : cfg->mqtt;
    const char *why = NULL;
    int rc = sq_bus_url_parse(url, SQ_BUS_URL_TARGET | SQ_BUS_URL_FILTER, &b->url, &why);
    if (rc == 0 && b->url.kind != (kind == SQ_SINK_NATS ? SQ_BUS_NATS : SQ_BUS_MQTT)) {
        why = kind == SQ_SINK_NATS ? "expected nats://HOST[:PORT]/SUBJECT"
                                   : "expected mqtt://HOST[:PORT]/TOPIC";
        rc = -SQ_EPARSE;
    }
    if (rc == -SQ_EPARSE) {
        snprintf(err, len, "%s: '%s': %s", flag, url, why ? why : "not a URL");
        rc = -SQ_EUSAGE;
    }
    if (rc == 0) {
        char rwhy[800];
        rc = sq_egress_lookup(cfg->egress, NULL, flag + 2, b->url.host, b->url.port,
                              SQ_EGRESS_CONNECT, &b->addr, 1, rwhy, sizeof(rwhy));
        if (rc == -EACCES) {
            snprintf(err, len, "%s", rwhy);
        } else if (rc < 1) {
            snprintf(err, len, "%s: %s", flag, rwhy);
            rc = -SQ_ERESOLVE;
        } else {
            rc = 0;
        }
    }
    if (rc == 0 && b->url.ws_path) {
        b->ws = calloc(1, sizeof(*b->ws));
        if (!b->ws || sq_ws_ctx_init(&b->ws->ctx) < 0) {
            free(b->ws);
            b->ws = NULL;
            rc = -ENOMEM;
        } else {
            b->ws->rng = (uint64_t)sq_now_ns() ^ (uint64_t)(uintptr_t)b;
        }
    }
    if (rc == 0 && b->url.tls) {
        /* the CAs, -k and a client certificate as the caller's TLS flags say; the name checked
         * is the URL's host */
        struct sq_tls_client_opts t = cfg->tls ? *cfg->tls : (struct sq_tls_client_opts){0};
        t.host = b->url.host;
        t.alpn = NULL;
        char twhy[SQ_TLS_ERRLEN];
        rc = sq_tls_client_new(&t, &b->tc, twhy, sizeof(twhy));
        if (rc == -EINVAL) {
            snprintf(err, len, "%s: '%s': tls: %s", flag, url, twhy);
            rc = -SQ_EUSAGE;
        } else if (rc < 0) {
            snprintf(err, len, "%s: tls: %s", flag, sq_strerror(rc));
        }
    }
    if (rc < 0) {
        sq_sink__bus_free(b);
        return rc;
    }
    static unsigned nth_inbox;
    snprintf(b->inbox, sizeof(b->inbox), "_INBOX.squall.%d.%u", (int)getpid(),
             __atomic_add_fetch(&nth_inbox, 1, __ATOMIC_RELAXED));
    b->state = S_CLOSED; /* the first sweep connects */
    *out = b;
    return 0;
}

/* The URL's scheme as the user wrote it (any case folded): nats, tls, mqtt, mqtts, mqtt+ws or
 * mqtt+wss. */
static const char *scheme(const struct sq_sink__bus *b)
{
    if (b->kind == SQ_SINK_NATS)
        return b->url.tls ? "tls" : "nats";
    if (b->url.ws_path)
        return b->url.tls ? "mqtt+wss" : "mqtt+ws";
    return b->url.tls ? "mqtts" : "mqtt";
}

void sq_sink__bus_counts(const struct sq_sink__bus *b, uint64_t *messages, uint64_t *reconnects,
                         bool *subscribed_now)
{
    *messages = __atomic_load_n(&b->messages, __ATOMIC_RELAXED);
    *reconnects = __atomic_load_n(&b->reconnects, __ATOMIC_RELAXED);
    *subscribed_now = __atomic_load_n(&b->subscribed, __ATOMIC_RELAXED) != 0;
}

json_t *sq_sink__bus_json(const struct sq_sink__bus *b)
{
    char url[320];
    snprintf(url, sizeof(url), "%s://%s%s%s:%u%s", scheme(b), strchr(b->url.host, ':') ? "[" : "",
             b->url.host, strchr(b->url.host, ':') ? "]" : "", b->url.port,
             b->url.ws_path ? b->url.ws_path : "");
    /* first_error: the broker's own, else, when the source is not subscribed now (or never was),
     * why its connection failed first */
    bool now = __atomic_load_n(&b->subscribed, __ATOMIC_RELAXED) != 0;
    const char *first = b->err[0] ? b->err : !now && b->cerr[0] ? b->cerr : NULL;
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:I, s:I, s:b, s:o}", "kind", b->kind == SQ_SINK_NATS ? "nats" : "mqtt",
        "url", url, b->kind == SQ_SINK_NATS ? "subject" : "topic", b->url.target, "messages",
        (json_int_t)b->messages, "reconnects", (json_int_t)b->reconnects, "subscribed",
        b->was_subscribed ? 1 : 0, "first_error", first ? json_string(first) : json_null());
    if (j && b->kind == SQ_SINK_NATS && b->cfg->nats_stream)
        json_object_set_new(j, "jetstream",
                            json_pack("{s:s, s:s, s:I}", "stream", b->cfg->nats_stream, "durable",
                                      b->cfg->nats_durable, "acks", (json_int_t)b->acks));
    if (j && b->kind == SQ_SINK_NATS && b->cfg->nats_queue)
        json_object_set_new(j, "queue", json_string(b->cfg->nats_queue));
    if (j && b->kind == SQ_SINK_MQTT)
        json_object_set_new(j, "qos", json_integer(b->cfg->mqtt_qos < 0 ? 1 : b->cfg->mqtt_qos));
    return j;
}

bool sq_sink__bus_never(const struct sq_sink__bus *b, char *why, size_t len)
{
    if (b->was_subscribed)
        return false;
    char url[320];
    snprintf(url, sizeof(url), "%s://%s%s%s:%u%s%s", scheme(b), strchr(b->url.host, ':') ? "[" : "",
             b->url.host, strchr(b->url.host, ':') ? "]" : "", b->url.port,
             b->url.ws_path ? b->url.ws_path : "", b->url.ws_path ? "?topic=" : "/");
    snprintf(url + strlen(url), sizeof(url) - strlen(url), "%s", b->url.target);
    const char *first = b->err[0] ? b->err : b->cerr[0] ? b->cerr : "the broker did not answer";
    snprintf(why, len,
             "%s: never subscribed (%s): the sink counted nothing that crossed this broker", url,
             first);
    return true;
}

void sq_sink__bus_js_counts(const struct sq_sink__bus *b, uint64_t *acks, uint64_t *fetches,
                            uint64_t *redelivered)
{
    *acks = __atomic_load_n(&b->acks, __ATOMIC_RELAXED);
    *fetches = __atomic_load_n(&b->fetches, __ATOMIC_RELAXED);
    *redelivered = __atomic_load_n(&b->redelivered, __ATOMIC_RELAXED);
}

void sq_sink__bus_on_message(struct sq_sink__bus *b, sq_sink__msg_cb cb, void *ud)
{
    b->on_msg = cb;
    b->msg_ud = ud;
}

void sq_sink__bus_free(struct sq_sink__bus *b)
{
    if (!b)
        return;
    if (b->io.fd >= 0)
        teardown(b);
    sq_buf_dispose(&b->out);
    sq_buf_dispose(&b->spill);
    sq_bus_url_dispose(&b->url);
    sq_tls_client_free(b->tc);
    sq_tls_sessions_dispose(&b->sessions);
    if (b->ws) {
        sq_h1_reader_dispose(&b->ws->rd);
        sq_ws_ctx_dispose(&b->ws->ctx);
        free(b->ws);
    }
    free(b);
}
