/* result/xsample.c - sampled exchanges merged and freed (result/result.h).
 *
 * A run's workers (engine/capture.c) and a distributed run's agents (cluster/controller.c) end
 * the same way: per class, several uniform samples of what each saw, to be made into one
 * uniform sample of the union. One rule serves both (sq_xs_merge_parts): each input's kept
 * exchanges of a class stand for what it saw of that class, so an input is drawn in proportion
 * to that, and one of its kept exchanges at random, until per_class are taken. The random
 * sequence is fixed (the same inputs give the same sample).
 */
#include "result/result.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sq_xsample_clear(struct sq_xsample *x)
{
    free(x->req);
    free(x->head);
    free(x->body);
    memset(x, 0, sizeof(*x));
}

void sq_xsamples_dispose(struct sq_xsamples *x)
{
    for (size_t i = 0; i < x->n; i++)
        sq_xsample_clear(&x->v[i]);
    free(x->v);
    memset(x, 0, sizeof(*x));
}

static uint64_t merge_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int by_class_then_time(const void *a, const void *b)
{
    const struct sq_xsample *x = a, *y = b;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    return (x->end_ns > y->end_ns) - (x->end_ns < y->end_ns);
}

/* One source of a class's merge: a uniform sample (v, n of them) of the seen exchanges. */
struct xs_src {
    uint64_t seen;
    struct sq_xsample *v;
    uint32_t n;
    uint32_t left; /* not taken yet: v[0..left) */
    double rem;    /* what those still stand for (seen / n each) */
};

/* A uniform sample of the union of the sources' populations, per_class at most, appended to
 * out->v: draw a source in proportion to what its remaining kept exchanges stand for (each of
 * source i's stands for seen/n of the class there), take one of them at random, until per_class
 * are taken or none is left. A taken exchange moves to out (its source slot is left empty). */
static void merge_class(struct xs_src *src, uint32_t n, uint32_t per_class, uint64_t *rng,
                        struct sq_xsamples *out)
{
    double total = 0;
    for (uint32_t i = 0; i < n; i++) {
        src[i].left = src[i].n;
        src[i].rem = src[i].n ? (double)(src[i].seen > src[i].n ? src[i].seen : src[i].n) : 0;
        total += src[i].rem;
    }
    for (uint32_t taken = 0; taken < per_class && total > 0.5; taken++) {
        double u = (double)(merge_next(rng) >> 11) / 9007199254740992.0 * total;
        uint32_t i = 0;
        while (i + 1 < n && (src[i].rem <= 0 || u >= src[i].rem)) {
            if (src[i].rem > 0)
                u -= src[i].rem;
            i++;
        }
        while (src[i].rem <= 0) /* rounding at the end: the last source with any */
            i--;
        struct xs_src *s = &src[i];
        uint32_t j = (uint32_t)(merge_next(rng) % s->left);
        out->v[out->n++] = s->v[j];
        s->v[j] = s->v[s->left - 1];
        memset(&s->v[s->left - 1], 0, sizeof(s->v[0])); /* handed over */
        s->left--;
        double each = s->rem / (double)(s->left + 1);
        total -= s->left == 0 ? s->rem : each;
        s->rem = s->left == 0 ? 0 : s->rem - each;
    }
}

static int merge_alloc(uint32_t n, size_t cap, struct xs_src **src, struct sq_xsamples *out)
{
    out->v = calloc(cap ? cap : 1, sizeof(*out->v));
    *src = calloc(n ? n : 1, sizeof(**src));
    if (!out->v || !*src) {
        free(*src);
        free(out->v);
        out->v = NULL;
        return -ENOMEM;
    }
    return 0;
}

int sq_xs_merge_parts(const struct sq_xs_part *parts, uint32_t n, uint32_t per_class,
                      struct sq_xsamples *out)
{
    memset(out, 0, sizeof(*out));
    out->per_class = per_class;
    if (!per_class)
        return 0;
    size_t cap = 0;
    for (uint32_t k = 0; k < SQ_XS_CLASSES; k++) {
        uint64_t kept = 0;
        for (uint32_t i = 0; i < n; i++)
            kept += parts[(size_t)k * n + i].n;
        cap += kept < per_class ? kept : per_class;
    }
    struct xs_src *src;
    if (merge_alloc(n, cap, &src, out) < 0) {
        out->per_class = 0;
        return -ENOMEM;
    }
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (uint32_t k = 0; k < SQ_XS_CLASSES; k++) {
        for (uint32_t i = 0; i < n; i++) {
            const struct sq_xs_part *p = &parts[(size_t)k * n + i];
            src[i] = (struct xs_src){.seen = p->seen, .v = p->v, .n = p->n};
            out->seen[k] += src[i].seen;
        }
        merge_class(src, n, per_class, &rng, out);
    }
    free(src);
    qsort(out->v, out->n, sizeof(*out->v), by_class_then_time);
    return 0;
}

int sq_xs_merge(struct sq_xsamples *in, uint32_t n, struct sq_xsamples *out)
{
    memset(out, 0, sizeof(*out));
    uint32_t per_class = 0;
    for (uint32_t i = 0; i < n; i++)
        per_class = in[i].per_class > per_class ? in[i].per_class : per_class;
    if (!per_class)
        return 0;
    /* Each input's v is sorted by class: class k of input i is the run of v from where class
     * k - 1 ended. */
    struct sq_xs_part *parts = calloc((size_t)SQ_XS_CLASSES * (n ? n : 1), sizeof(*parts));
    if (!parts)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        size_t a = 0;
        for (uint32_t k = 0; k < SQ_XS_CLASSES; k++) {
            size_t b = a;
            while (b < in[i].n && in[i].v[b].cls == k)
                b++;
            parts[(size_t)k * n + i] = (struct sq_xs_part){
                .seen = in[i].seen[k], .v = in[i].v + a, .n = (uint32_t)(b - a)};
            a = b;
        }
    }
    int rc = sq_xs_merge_parts(parts, n, per_class, out);
    free(parts);
    return rc;
}
