/* base/spill.h - a byte stream cut into a protocol's units across reads (a NATS operation, an
 * MQTT packet), one copy for every reader of one (engine/busio.c; sink/'s subscriptions may take
 * it too).
 *
 * A read is parsed where it lies (the caller's buffer); only a unit the read cut is copied, into
 * the spill, and the next read's bytes go there only until that unit is whole: `need` (its
 * length, once the parser knows it) says how much to take, else 4 KiB at a time. The invariant:
 * the spill is empty, or it holds the start of exactly one unit.
 *
 * Header only: sq_spill_feed is inline so that the unit callback, a constant at each call site,
 * is called directly.
 */
#ifndef SQ_BASE_SPILL_H
#define SQ_BASE_SPILL_H

#include <errno.h>
#include <stddef.h>

#include "base/buf.h"

struct sq_spill {
    struct sq_buf buf; /* the start of a unit a read cut, or empty */
    size_t need;       /* that unit's whole length once known, else 0 */
};

/* One unit at p[0, n): its length (> 0, handled), 0 while p is a prefix of one (*need its whole
 * length when known), or a negative code: stop (an error, or the reader is done). */
typedef int (*sq_spill_unit_fn)(void *ud, const char *p, size_t n, size_t *need);

static inline void sq_spill_reset(struct sq_spill *s)
{
    sq_buf_reset(&s->buf);
    s->need = 0;
}

static inline void sq_spill_dispose(struct sq_spill *s)
{
    sq_buf_dispose(&s->buf);
    s->need = 0;
}

/* Feeds one read's p[0, n) to unit, unit by unit; a unit cut at the end goes into the spill.
 * Returns 0, what unit returned to stop, -E2BIG (a unit beyond max bytes), -EPROTO (unit
 * claimed more than it was given) or -ENOMEM. */
static inline int sq_spill_feed(struct sq_spill *s, size_t max, const char *p, size_t n,
                                sq_spill_unit_fn unit, void *ud)
{
    while (s->buf.len > 0 && n > 0) {
        size_t take = s->need > s->buf.len ? s->need - s->buf.len : 4096;
        if (take > n)
            take = n;
        if (s->buf.len + take > max)
            return -E2BIG;
        if (sq_buf_append(&s->buf, p, take) < 0)
            return -ENOMEM;
        p += take;
        n -= take;
        size_t need = 0;
        int rc = unit(ud, s->buf.p, s->buf.len, &need);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            s->need = need;
            continue;
        }
        if ((size_t)rc > s->buf.len)
            return -EPROTO;
        /* the unit ended inside the bytes just taken: give the rest back to the read */
        size_t rest = s->buf.len - (size_t)rc;
        p -= rest;
        n += rest;
        sq_spill_reset(s);
    }
    while (n > 0) {
        size_t need = 0;
        int rc = unit(ud, p, n, &need);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            if (n > max)
                return -E2BIG;
            if (sq_buf_append(&s->buf, p, n) < 0)
                return -ENOMEM;
            s->need = need;
            return 0;
        }
        if ((size_t)rc > n)
            return -EPROTO;
        p += rc;
        n -= (size_t)rc;
    }
    return 0;
}

#endif
