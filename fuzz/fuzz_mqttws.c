/* fuzz_mqttws.c - MQTT carried in WebSocket frames (engine/busws.c's read side): a server's
 * frames taken apart by proto/ws.c and their binary payload reassembled into MQTT packets by
 * the spill and proto/mqtt.c, as a mqtt+ws:// connection reads them.
 * Input: byte 0 seeds the split; the rest is what a broker sends after its 101. Checks: the
 * stream fed whole and in random pieces yields the same packets (type, length, a hash of the
 * bytes) and the same end (0, a CLOSE, or an error code); no read outside the buffers (ASan). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/spill.h"
#include "engine/busws.h"
#include "proto/mqtt.h"
#include "proto/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    uint64_t h;
    size_t packets;
    struct sq_mqtt_limits lim;
};

static int unit(void *ud, const char *p, size_t n, size_t *need)
{
    struct seen *s = ud;
    struct sq_mqtt_packet pk;
    int rc = sq_mqtt_parse((const uint8_t *)p, n, &s->lim, &pk, need);
    if (rc <= 0)
        return rc;
    if ((size_t)rc > n)
        abort();
    for (int i = 0; i < rc; i++)
        s->h = (s->h ^ (uint8_t)p[i]) * 1099511628211ULL;
    s->h ^= (uint64_t)pk.type << 32 | (uint64_t)rc;
    s->packets++;
    return rc;
}

static int ping(void *ud, const uint8_t *p, size_t n)
{
    struct seen *s = ud;
    for (size_t i = 0; i < n; i++)
        s->h = (s->h ^ p[i]) * 31;
    return 0;
}

static int run(const uint8_t *p, size_t n, uint32_t seed, struct seen *s)
{
    struct sq_ws_ctx ctx;
    if (sq_ws_ctx_init(&ctx) < 0)
        abort();
    struct sq_ws_conn c;
    sq_ws_conn_init(&c, 1, UINT64_MAX);
    struct sq_spill sp = {0};
    memset(s, 0, sizeof(*s));
    s->lim.version = SQ_MQTT_V5;
    s->lim.max_packet = 64 * 1024;
    int rc = 0;
    size_t off = 0;
    while (off < n && rc == 0) {
        size_t k = n - off;
        if (seed) {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            k = 1 + seed % (k < 64 ? k : 64);
        }
        uint8_t *piece = malloc(k); /* exact size: ASan sees a read past the piece */
        if (!piece)
            abort();
        memcpy(piece, p + off, k);
        rc = sq_engine__busws_frames(&ctx, &c, &sp, 64 * 1024 + 4096, (const char *)piece, k, unit,
                                     ping, s);
        free(piece);
        off += k;
    }
    sq_spill_dispose(&sp);
    sq_ws_conn_dispose(&ctx, &c);
    sq_ws_ctx_dispose(&ctx);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t seed = 0x9e3779b9u ^ data[0];
    struct seen whole, cut;
    int a = run(data + 1, size - 1, 0, &whole);
    int b = run(data + 1, size - 1, seed, &cut);
    if (a != b || whole.packets != cut.packets || whole.h != cut.h)
        abort();
    return 0;
}
