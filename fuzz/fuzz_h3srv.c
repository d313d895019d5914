/* fuzz_h3srv.c - the target's HTTP/3 server (target/h3srv.c) fed hostile input, two ways chosen
 * by the first byte: as UDP datagrams to a detached server (packet decoding, the connection ID
 * map, ngtcp2_accept, a connection made and freed for an Initial that does not decrypt), or as
 * HTTP/3 stream bytes to the request path (nghttp3's server session, the field and body limits,
 * dispatch to a handler that answers with a body, a fill tail, a delay or a paced stream, and
 * the answer pulled and acknowledged). Checks: no crash, no leak (ASan), the handler sees only
 * well-formed requests. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/tls.h"
#include "target/h3srv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char FILL[64] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static size_t piece(void *ud, uint32_t seq, uint32_t count, char *buf, size_t cap)
{
    (void)ud;
    (void)count;
    size_t n = (size_t)seq % 7 + 1;
    if (n > cap)
        abort();
    memset(buf, 'x', n);
    return n;
}

static void handler(void *ud, const struct sq_server_req *req, struct sq_server_resp *resp)
{
    (void)ud;
    if (!req->h3 || !req->method_len || !req->path_len || req->body_len > SQ_SERVER_MAX_BODY ||
        req->num_headers > SQ_SERVER_MAX_HEADERS + 1)
        abort();
    resp->body = req->path;
    resp->body_len = req->path_len;
    resp->headers = "X-Fuzz: yes\r\nConnection: close\r\n";
    resp->headers_len = strlen(resp->headers);
    switch (req->path[req->path_len - 1] % 4) {
    case 0:
        resp->fill = FILL;
        resp->fill_len = sizeof(FILL);
        resp->fill_total = (uint64_t)req->body_len * 3 + 100;
        break;
    case 1:
        resp->delay_ns = 1000;
        break;
    case 2:
        resp->stream = piece;
        resp->stream_count = 5;
        break;
    default:
        resp->status = 204;
    }
}

static struct sq_h3srv *srv;
static int state; /* 0: not made yet, 1: made, -1: no HTTP/3 in this build */

/* A detached server with a certificate made once, as `squall target --http3` makes one. */
static void make(void)
{
    struct sq_tls_server_opts o = {0};
    struct sq_tls_server *ts;
    char err[SQ_TLS_ERRLEN], *cert, *key;
    if (sq_tls_server_new(&o, &ts, err, sizeof(err)) < 0 || sq_tls_server_pem(ts, &cert, &key) < 0)
        abort();
    struct sq_h3srv_config cfg = {
        .port = 443, .cert_pem = cert, .key_pem = key, .handler = handler, .max_conns = 64};
    int rc = sq_h3srv_new_detached(&cfg, &srv);
    free(cert);
    sq_tls_pem_free(key);
    sq_tls_server_free(ts);
    state = rc == 0 ? 1 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!state)
        make();
    if (state < 0 || size < 1)
        return 0;
    if (data[0] & 1) {
        sq_h3srv_fuzz_request(srv, data + 1, size - 1);
    } else {
        /* several datagrams: a 2-byte length before each */
        size_t i = 1;
        while (i + 2 <= size) {
            size_t len = ((size_t)data[i] << 8 | data[i + 1]) % 1500;
            i += 2;
            if (len > size - i)
                len = size - i;
            sq_h3srv_feed(srv, data + i, len, (uint16_t)(40000 + (data[0] >> 1)));
            i += len;
        }
    }
    return 0;
}
