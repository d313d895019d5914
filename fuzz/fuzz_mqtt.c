/* fuzz_mqtt.c - the MQTT server-packet parser, and the PUBLISH encoder read back by it.
 * Input: byte 0 picks the version (bit 0), a small packet cap (bit 1) and seeds the split; the
 * rest is a server stream. Checks: spans inside the buffer; a PARTIAL's `need` exceeds what was
 * there; the stream whole and in random pieces (exact-size heap copies through a spill) gives
 * the same packets and the same final error code; user-property walks stay inside their block.
 * Then a PUBLISH built from the input's bytes (topic, payload, QoS, id, v5 user property) is
 * encoded and must parse back to the same fields. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/mqtt.h"

static uint32_t next_rand(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ULL;
    return h ^ n;
}

static void in_buf(struct sq_str s, const void *buf, size_t len)
{
    const char *b = buf;
    if (s.len && (s.p < b || s.p + s.len > b + len))
        abort();
}

static uint64_t packet(uint64_t h, const struct sq_mqtt_packet *p, const uint8_t *buf, size_t len)
{
    in_buf(p->topic, buf, len);
    in_buf(p->payload, buf, len);
    in_buf(p->reasons, buf, len);
    in_buf(p->props.raw, buf, len);
    size_t pos = 0;
    struct sq_mqtt_user_prop up;
    uint32_t n = 0;
    while (sq_mqtt_user_prop_next(p->props.raw, &pos, &up)) {
        in_buf(up.name, p->props.raw.p, p->props.raw.len);
        in_buf(up.value, p->props.raw.p, p->props.raw.len);
        n++;
    }
    if (n != p->props.user_props)
        abort();
    uint8_t f[4] = {p->type, p->qos, p->reason, (uint8_t)p->retain};
    h = mix(h, f, sizeof(f));
    h = mix(h, &p->packet_id, 2);
    h = mix(h, p->topic.p, p->topic.len);
    h = mix(h, p->payload.p, p->payload.len);
    h = mix(h, p->reasons.p, p->reasons.len);
    h = mix(h, p->props.raw.p, p->props.raw.len);
    return h;
}

static int run(const uint8_t *in, size_t n, uint32_t seed, const struct sq_mqtt_limits *lim,
               uint64_t *hash)
{
    uint8_t *spill = NULL;
    size_t have = 0, off = 0;
    uint64_t h = 1469598103934665603ULL;
    for (;;) {
        size_t k = n - off;
        if (seed && k) {
            k = 1 + next_rand(&seed) % 19;
            if (k > n - off)
                k = n - off;
        }
        uint8_t *buf = malloc(have + k ? have + k : 1);
        if (!buf)
            abort();
        if (have)
            memcpy(buf, spill, have);
        if (k)
            memcpy(buf + have, in + off, k);
        free(spill);
        spill = NULL;
        off += k;
        size_t len = have + k, pos = 0;
        for (;;) {
            struct sq_mqtt_packet p;
            size_t need = 0;
            int rc = sq_mqtt_parse(buf + pos, len - pos, lim, &p, &need);
            if (rc < 0) {
                if (!p.why)
                    abort();
                free(buf);
                *hash = h;
                return rc;
            }
            if (rc == 0) {
                if (need && need <= len - pos)
                    abort();
                break;
            }
            if ((size_t)rc > len - pos || p.len != (uint32_t)rc)
                abort();
            h = packet(h, &p, buf + pos, (size_t)rc);
            pos += (size_t)rc;
        }
        have = len - pos;
        if (have) {
            spill = malloc(have);
            if (!spill)
                abort();
            memcpy(spill, buf + pos, have);
        }
        free(buf);
        if (off == n)
            break;
    }
    free(spill);
    *hash = h;
    return 0;
}

static void round_trip(const uint8_t *d, size_t n, uint8_t ver)
{
    if (n < 6)
        return;
    size_t tl = 1 + d[0] % 16, vl = d[1] % 8;
    if (2 + tl + vl > n)
        return;
    struct sq_mqtt_user_prop up = {{(const char *)d + 2 + tl, vl}, {(const char *)d + 2, tl}};
    struct sq_mqtt_publish m = {.topic = {(const char *)d + 2, tl},
                                .qos = d[0] % 3,
                                .packet_id = (uint16_t)(d[1] | 1),
                                .payload = d + 2 + tl + vl,
                                .payload_len = n - 2 - tl - vl,
                                .payload_format = -1};
    if (ver == SQ_MQTT_V5) {
        m.user_props = &up;
        m.n_user_props = 1;
        m.has_message_expiry = d[1] & 2;
        m.message_expiry = d[2];
    }
    if (!m.qos)
        m.packet_id = 0;
    size_t cap = 64 + n * 2;
    uint8_t *buf = malloc(cap);
    if (!buf)
        abort();
    int len = sq_mqtt_encode_publish(ver, buf, cap, &m);
    if (len == -EINVAL) { /* a topic or property the protocol cannot carry */
        free(buf);
        return;
    }
    if (len <= 0)
        abort();
    uint8_t *exact = malloc((size_t)len);
    if (!exact)
        abort();
    memcpy(exact, buf, (size_t)len);
    struct sq_mqtt_limits lim = {ver, 0};
    struct sq_mqtt_packet p;
    if (sq_mqtt_parse(exact, (size_t)len, &lim, &p, NULL) != len)
        abort();
    if (p.type != SQ_MQTT_PUBLISH || p.qos != m.qos || p.packet_id != m.packet_id ||
        p.topic.len != tl || memcmp(p.topic.p, m.topic.p, tl) != 0 ||
        p.payload.len != m.payload_len ||
        (m.payload_len && memcmp(p.payload.p, m.payload, m.payload_len) != 0))
        abort();
    if (ver == SQ_MQTT_V5 && p.props.user_props != 1)
        abort();
    /* Every smaller buffer is refused without a write past it. */
    if (sq_mqtt_encode_publish(ver, buf, (size_t)len - 1, &m) != -SQ_ETOOBIG)
        abort();
    free(exact);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ver = data[0] & 1 ? SQ_MQTT_V5 : SQ_MQTT_V311;
    struct sq_mqtt_limits lim = {ver, data[0] & 2 ? 64 : 0};
    uint32_t seed = data[0] * 2654435761u + 1;
    uint64_t h1, h2;
    int r1 = run(data + 1, size - 1, 0, &lim, &h1);
    int r2 = run(data + 1, size - 1, seed, &lim, &h2);
    if (r1 != r2 || h1 != h2)
        abort();
    round_trip(data + 1, size - 1, ver);
    return 0;
}
