/* engine/capture.c - exchanges for the run's capture hook (engine/capture.h).
 *
 * Each VU of a capturing run owns one buffer (struct sq_engine__xc, worker.h). conn_send arms
 * it; the driver fills it (xc_raw before the head is complete, xc_head once it is, xc_body
 * after); conn_complete and conn_fail end it, and the mode decides whether the hook sees it.
 * The first-of-kind mode keeps a per-worker bitmap (one bit per status code, then one per
 * error kind): once a kind was handed out, the worker never copies that kind again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/driver.h"
#include "engine/worker.h"

#define SEEN_BITS (SQ_STATUS_CODES + SQ_ERRK_COUNT)

int sq_engine__xc_init(struct sq_engine__worker *w)
{
    w->capture = w->cfg->capture;
    if (!w->capture)
        return 0;
    w->xcs = calloc(w->nconns ? w->nconns : 1, sizeof(*w->xcs));
    w->xc_seen = calloc((SEEN_BITS + 7) / 8, 1);
    if (!w->xcs || !w->xc_seen)
        return -ENOMEM;
    for (uint32_t i = 0; i < w->nconns; i++)
        w->conns[i].xc = &w->xcs[i];
    return 0;
}

void sq_engine__xc_dispose(struct sq_engine__worker *w)
{
    free(w->xcs);
    free(w->xc_seen);
    w->xcs = NULL;
    w->xc_seen = NULL;
}

static size_t body_max(const struct sq_capture *cap)
{
    return cap->body_max && cap->body_max < SQ_CAPTURE_BODY_MAX ? cap->body_max
                                                                : SQ_CAPTURE_BODY_MAX;
}

void sq_engine__xc_arm(struct sq_engine__conn *c)
{
    struct sq_engine__xc *k = c->xc;
    k->on = true;
    k->in_body = k->head_cut = false;
    k->head_len = k->body_len = 0;
    k->body_total = 0;
}

void sq_engine__xc_raw(struct sq_engine__conn *c, const char *data, size_t len)
{
    struct sq_engine__xc *k = c->xc;
    if (!k->on || k->in_body)
        return;
    size_t room = SQ_CAPTURE_HEAD_MAX - k->head_len;
    if (len > room) {
        len = room;
        k->head_cut = true;
    }
    memcpy(k->head + k->head_len, data, len);
    k->head_len += (uint32_t)len;
}

void sq_engine__xc_head(struct sq_engine__conn *c, const char *head, size_t len)
{
    struct sq_engine__xc *k = c->xc;
    if (!k->on)
        return;
    k->head_cut = len > SQ_CAPTURE_HEAD_MAX;
    if (k->head_cut)
        len = SQ_CAPTURE_HEAD_MAX;
    memcpy(k->head, head, len);
    k->head_len = (uint32_t)len;
    k->in_body = true;
}

void sq_engine__xc_body(struct sq_engine__conn *c, const char *data, size_t len)
{
    struct sq_engine__xc *k = c->xc;
    if (!k->on)
        return;
    k->in_body = true;
    k->body_total += len;
    size_t room = body_max(c->w->capture) - k->body_len;
    if (len > room)
        len = room;
    memcpy(k->body + k->body_len, data, len);
    k->body_len += (uint32_t)len;
}

/* The request as sent, cut after its head and body_max bytes of its body. */
static size_t request_part(const char *req, size_t len, size_t max_body)
{
    const char *end = memmem(req, len, "\r\n\r\n", 4);
    if (!end)
        return len;
    size_t head = (size_t)(end - req) + 4;
    return len - head > max_body ? head + max_body : len;
}

void sq_engine__xc_end(struct sq_engine__conn *c, int64_t now, uint16_t status, int error)
{
    struct sq_engine__worker *w = c->w;
    struct sq_engine__xc *k = c->xc;
    if (!k->on)
        return;
    k->on = false;
    if (w->capture->mode == SQ_CAPTURE_FIRST_OF_KIND) {
        size_t bit =
            error >= 0 ? SQ_STATUS_CODES + (size_t)error : (status < SQ_STATUS_CODES ? status : 0);
        if (w->xc_seen[bit / 8] & (1u << (bit % 8)))
            return;
        w->xc_seen[bit / 8] |= (uint8_t)(1u << (bit % 8));
    }
    size_t req_len = c->req ? request_part(c->req, c->req_len, body_max(w->capture)) : 0;
    struct sq_exchange x = {
        .end_ns = now - w->start_ns,
        .latency_us = (now - c->since_ns) / 1000,
        .status = status,
        .error = error,
        .req = c->req,
        .req_len = req_len,
        .req_cut = req_len < c->req_len,
        .head = k->head,
        .head_len = k->head_len,
        .head_cut = k->head_cut,
        .body = k->body,
        .body_len = k->body_len,
        .body_total = k->body_total,
        .h2 = w->drv != &sq_engine__h1_driver,
    };
    w->capture->on_exchange(w->capture->ud, w->windex, &x);
}
