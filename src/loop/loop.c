/* loop/loop.c - epoll loop and a binary min-heap of intrusive timers.
 *
 * Invariant: heap[i]->_idx == i for every armed timer, and heap[(i-1)/2]->due_ns <=
 * heap[i]->due_ns. sq_io_stop() during a round must not let a stale epoll_event reach a freed io:
 * the loop keeps the round's event array and nulls out entries that point at the stopped io.
 */
#include "loop/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

#define SQ_LOOP_EVENTS 256

struct sq_loop {
    int epfd;
    int64_t now;
    struct sq_timer **heap;
    uint32_t nheap, capheap;
    int nready, cur;    /* events of the round being dispatched */
    int64_t blocked_ns; /* time spent in waits that could block (a timeout other than 0) */
    struct epoll_event ready[SQ_LOOP_EVENTS];
};

int sq_loop_new(struct sq_loop **out)
{
    struct sq_loop *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) {
        int err = -errno;
        free(l);
        return err;
    }
    l->now = sq_now_ns();
    *out = l;
    return 0;
}

void sq_loop_free(struct sq_loop *l)
{
    if (!l)
        return;
    close(l->epfd);
    free(l->heap);
    free(l);
}

int sq_io_start(struct sq_loop *l, struct sq_io *io, int fd, uint32_t events, sq_io_cb cb)
{
    io->fd = fd;
    io->events = events;
    io->cb = cb;
    struct epoll_event ev = {.events = events, .data.ptr = io};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -errno;
    return 0;
}

int sq_io_modify(struct sq_loop *l, struct sq_io *io, uint32_t events)
{
    if (io->events == events)
        return 0;
    struct epoll_event ev = {.events = events, .data.ptr = io};
    if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
        return -errno;
    io->events = events;
    return 0;
}

/* Drops the events of this round that are still due to io. */
static void forget(struct sq_loop *l, struct sq_io *io)
{
    for (int i = l->cur; i < l->nready; i++)
        if (l->ready[i].data.ptr == io)
            l->ready[i].data.ptr = NULL;
    io->events = 0;
}

void sq_io_stop(struct sq_loop *l, struct sq_io *io)
{
    /* Closing the fd would unregister it too, but only once every duplicate is closed. */
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    forget(l, io);
}

int sq_io_park(struct sq_loop *l, struct sq_io *io)
{
    uint32_t events = io->events;
    forget(l, io);
    io->events = events; /* still registered */
    int fd = io->fd;
    io->fd = -1;
    return fd;
}

int sq_io_unpark(struct sq_loop *l, struct sq_io *io, int fd, uint32_t events, sq_io_cb cb)
{
    io->fd = fd;
    io->cb = cb;
    return sq_io_modify(l, io, events);
}

void sq_io_close(struct sq_loop *l, struct sq_io *io)
{
    forget(l, io);
    close(io->fd);
    io->fd = -1;
}

void sq_timer_init(struct sq_timer *t, sq_timer_cb cb)
{
    t->due_ns = 0;
    t->cb = cb;
    t->_idx = UINT32_MAX;
}

static void heap_set(struct sq_loop *l, uint32_t i, struct sq_timer *t)
{
    l->heap[i] = t;
    t->_idx = i;
}

static void sift_up(struct sq_loop *l, uint32_t i)
{
    struct sq_timer *t = l->heap[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (l->heap[p]->due_ns <= t->due_ns)
            break;
        heap_set(l, i, l->heap[p]);
        i = p;
    }
    heap_set(l, i, t);
}

static void sift_down(struct sq_loop *l, uint32_t i)
{
    struct sq_timer *t = l->heap[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= l->nheap)
            break;
        if (c + 1 < l->nheap && l->heap[c + 1]->due_ns < l->heap[c]->due_ns)
            c++;
        if (t->due_ns <= l->heap[c]->due_ns)
            break;
        heap_set(l, i, l->heap[c]);
        i = c;
    }
    heap_set(l, i, t);
}

int sq_timer_start(struct sq_loop *l, struct sq_timer *t, int64_t due_ns)
{
    if (sq_timer_active(t)) {
        int64_t old = t->due_ns;
        t->due_ns = due_ns;
        if (due_ns < old)
            sift_up(l, t->_idx);
        else
            sift_down(l, t->_idx);
        return 0;
    }
    if (l->nheap == l->capheap) {
        uint32_t cap = l->capheap ? l->capheap * 2 : 64;
        struct sq_timer **h = realloc(l->heap, cap * sizeof(*h));
        if (!h)
            return -ENOMEM;
        l->heap = h;
        l->capheap = cap;
    }
    t->due_ns = due_ns;
    heap_set(l, l->nheap++, t);
    sift_up(l, t->_idx);
    return 0;
}

void sq_timer_stop(struct sq_loop *l, struct sq_timer *t)
{
    if (!sq_timer_active(t))
        return;
    uint32_t i = t->_idx;
    t->_idx = UINT32_MAX;
    if (--l->nheap == i)
        return;
    struct sq_timer *last = l->heap[l->nheap];
    heap_set(l, i, last);
    if (i > 0 && l->heap[(i - 1) / 2]->due_ns > last->due_ns)
        sift_up(l, i);
    else
        sift_down(l, i);
}

int64_t sq_loop_blocked_ns(const struct sq_loop *l)
{
    return l->blocked_ns;
}

int64_t sq_loop_now(const struct sq_loop *l)
{
    return l->now;
}

int64_t sq_loop_update_now(struct sq_loop *l)
{
    l->now = sq_now_ns();
    return l->now;
}

static int run_timers(struct sq_loop *l)
{
    int n = 0;
    while (l->nheap > 0 && l->heap[0]->due_ns <= l->now) {
        struct sq_timer *t = l->heap[0];
        sq_timer_stop(l, t);
        t->cb(l, t);
        n++;
    }
    return n;
}

/* epoll_pwait2 (ns timeouts, Linux 5.11); where the kernel (or valgrind 3.19, which does not
 * know the call) answers ENOSYS, epoll_wait with the wait rounded up to whole ms. */
static int epoll_wait_ns(int epfd, struct epoll_event *ev, const struct timespec *tsp, int64_t wait)
{
    static int no_pwait2; /* atomic: set once, when ENOSYS is seen */
    if (!__atomic_load_n(&no_pwait2, __ATOMIC_RELAXED)) {
        int n = epoll_pwait2(epfd, ev, SQ_LOOP_EVENTS, tsp, NULL);
        if (n >= 0 || errno != ENOSYS)
            return n;
        __atomic_store_n(&no_pwait2, 1, __ATOMIC_RELAXED);
    }
    int ms = -1;
    if (wait >= 0)
        ms = wait > (int64_t)INT32_MAX * SQ_NS_PER_MS
                 ? INT32_MAX
                 : (int)((wait + SQ_NS_PER_MS - 1) / SQ_NS_PER_MS);
    return epoll_wait(epfd, ev, SQ_LOOP_EVENTS, ms);
}

int sq_loop_run_once(struct sq_loop *l, int64_t max_wait_ns)
{
    int64_t wait = max_wait_ns;
    if (l->nheap > 0) {
        int64_t until = l->heap[0]->due_ns - sq_loop_update_now(l);
        if (until < 0)
            until = 0;
        if (wait < 0 || until < wait)
            wait = until;
    }
    struct timespec ts, *tsp = NULL;
    if (wait >= 0) {
        ts.tv_sec = wait / SQ_NS_PER_S;
        ts.tv_nsec = wait % SQ_NS_PER_S;
        tsp = &ts;
    }
    int64_t before = wait != 0 ? sq_now_ns() : 0;
    int n = epoll_wait_ns(l->epfd, l->ready, tsp, wait);
    int64_t after = sq_loop_update_now(l);
    if (wait != 0)
        l->blocked_ns += after - before;
    if (n < 0) {
        if (errno != EINTR)
            return -errno;
        n = 0;
    }
    l->nready = n;
    for (l->cur = 0; l->cur < l->nready; l->cur++) {
        struct sq_io *io = l->ready[l->cur].data.ptr;
        if (io)
            io->cb(l, io, l->ready[l->cur].events);
    }
    l->nready = l->cur = 0;
    return n + run_timers(l);
}
