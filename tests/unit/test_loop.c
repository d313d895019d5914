/* Unit tests: loop/ (timer heap order, re-arming, stopping, fd events, stop during a round). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "loop/loop.h"

#define NT 200

static int fired[NT], nfired;

static void on_timer(struct sq_loop *l, struct sq_timer *t)
{
    (void)l;
    fired[nfired++] = (int)(t->due_ns % 1000);
}

static void timers_fire_in_order(void **state)
{
    (void)state;
    struct sq_loop *l;
    assert_int_equal(sq_loop_new(&l), 0);
    static struct sq_timer ts[NT];
    int64_t base = sq_now_ns() - SQ_NS_PER_S; /* all already due */
    srand(7);
    for (int i = 0; i < NT; i++) {
        sq_timer_init(&ts[i], on_timer);
        int k = rand() % 1000;
        assert_int_equal(sq_timer_start(l, &ts[i], base + k * 1000 + i % 1000), 0);
    }
    /* Stop every third, re-arm every fifth later. */
    for (int i = 0; i < NT; i += 3)
        sq_timer_stop(l, &ts[i]);
    for (int i = 1; i < NT; i += 5)
        assert_int_equal(sq_timer_start(l, &ts[i], base + 999000 + i % 1000), 0);
    nfired = 0;
    sq_loop_run_once(l, 0);
    int expect = 0;
    for (int i = 0; i < NT; i++)
        expect += i % 3 != 0 || i % 5 == 1; /* a stopped timer that was re-armed fires */
    assert_int_equal(nfired, expect);
    for (int i = 0; i < NT; i++)
        assert_false(sq_timer_active(&ts[i]));
    sq_loop_free(l);
}

static void on_order(struct sq_loop *l, struct sq_timer *t)
{
    (void)l;
    static int64_t last;
    if (nfired)
        assert_true(t->due_ns >= last);
    last = t->due_ns;
    nfired++;
}

static void timers_sorted(void **state)
{
    (void)state;
    struct sq_loop *l;
    assert_int_equal(sq_loop_new(&l), 0);
    static struct sq_timer ts[NT];
    int64_t base = sq_now_ns() - SQ_NS_PER_S;
    for (int i = 0; i < NT; i++) {
        sq_timer_init(&ts[i], on_order);
        assert_int_equal(sq_timer_start(l, &ts[i], base + (i * 7919) % 1000), 0);
    }
    nfired = 0;
    sq_loop_run_once(l, 0);
    assert_int_equal(nfired, NT);
    sq_loop_free(l);
}

static void timer_waits(void **state)
{
    (void)state;
    struct sq_loop *l;
    assert_int_equal(sq_loop_new(&l), 0);
    struct sq_timer t;
    sq_timer_init(&t, on_timer);
    int64_t t0 = sq_now_ns();
    assert_int_equal(sq_timer_start(l, &t, t0 + 20 * SQ_NS_PER_MS), 0);
    nfired = 0;
    while (nfired == 0)
        sq_loop_run_once(l, -1);
    int64_t took = sq_now_ns() - t0;
    assert_true(took >= 20 * SQ_NS_PER_MS);
    assert_true(took < 200 * SQ_NS_PER_MS);
    sq_loop_free(l);
}

struct pair {
    struct sq_io a, b;
    int calls_a, calls_b;
};

static struct pair P;

static void on_a(struct sq_loop *l, struct sq_io *io, uint32_t ev)
{
    (void)io;
    (void)ev;
    P.calls_a++;
    sq_io_stop(l, &P.b); /* b's event of this round must not be delivered */
}

static void on_b(struct sq_loop *l, struct sq_io *io, uint32_t ev)
{
    (void)io;
    (void)ev;
    P.calls_b++;
    sq_io_stop(l, &P.a);
}

static void stop_drops_pending_events(void **state)
{
    (void)state;
    struct sq_loop *l;
    assert_int_equal(sq_loop_new(&l), 0);
    int sa[2], sb[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sa), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sb), 0);
    assert_int_equal(write(sa[1], "x", 1), 1);
    assert_int_equal(write(sb[1], "x", 1), 1);
    assert_int_equal(sq_io_start(l, &P.a, sa[0], EPOLLIN, on_a), 0);
    assert_int_equal(sq_io_start(l, &P.b, sb[0], EPOLLIN, on_b), 0);
    sq_loop_run_once(l, 100 * SQ_NS_PER_MS);
    /* Whichever ran first stopped the other: exactly one callback ran. */
    assert_int_equal(P.calls_a + P.calls_b, 1);
    /* Unchanged events cost no system call and succeed. */
    struct sq_io *live = P.calls_a ? &P.a : &P.b;
    assert_int_equal(sq_io_modify(l, live, EPOLLIN), 0);
    for (int i = 0; i < 2; i++) {
        close(sa[i]);
        close(sb[i]);
    }
    sq_loop_free(l);
}

static int closes;

static void on_close_other(struct sq_loop *l, struct sq_io *io, uint32_t ev)
{
    (void)ev;
    closes++;
    struct sq_io *other = io == &P.a ? &P.b : &P.a;
    sq_io_close(l, other); /* its event of this round must not be delivered */
}

/* sq_io_close: the descriptor is closed and out of the epoll set without an EPOLL_CTL_DEL (a new
 * socket that gets its number registers afresh), and its pending events are dropped. */
static void close_drops_pending_events(void **state)
{
    (void)state;
    struct sq_loop *l;
    assert_int_equal(sq_loop_new(&l), 0);
    int sa[2], sb[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sa), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sb), 0);
    assert_int_equal(write(sa[1], "x", 1), 1);
    assert_int_equal(write(sb[1], "x", 1), 1);
    closes = 0;
    assert_int_equal(sq_io_start(l, &P.a, sa[0], EPOLLIN, on_close_other), 0);
    assert_int_equal(sq_io_start(l, &P.b, sb[0], EPOLLIN, on_close_other), 0);
    sq_loop_run_once(l, 100 * SQ_NS_PER_MS);
    assert_int_equal(closes, 1);
    struct sq_io *gone = P.a.fd < 0 ? &P.a : &P.b;
    assert_int_equal(gone->fd, -1);
    int again[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, again), 0);
    assert_int_equal(sq_io_start(l, gone, again[0], EPOLLIN, on_close_other), 0);
    sq_io_close(l, gone);
    close(again[1]);
    sq_io_close(l, P.a.fd >= 0 ? &P.a : &P.b);
    close(sa[1]);
    close(sb[1]);
    sq_loop_free(l);
}

static int parks, parked_fd = -1;

static void on_park_other(struct sq_loop *l, struct sq_io *io, uint32_t ev)
{
    (void)ev;
    parks++;
    struct sq_io *other = io == &P.a ? &P.b : &P.a;
    parked_fd = sq_io_park(l, other); /* its event of this round must not be delivered */
}

static void on_count(struct sq_loop *l, struct sq_io *io, uint32_t ev)
{
    (void)l;
    (void)io;
    (void)ev;
    parks += 100;
}

/* sq_io_park: the fd leaves the io (its events of this round dropped) but stays registered;
 * sq_io_unpark gives it back with new events, and they reach the same io. */
static void park_keeps_registration(void **state)
{
    (void)state;
    struct sq_loop *l;
    assert_int_equal(sq_loop_new(&l), 0);
    int sa[2], sb[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sa), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sb), 0);
    assert_int_equal(write(sa[1], "x", 1), 1);
    assert_int_equal(write(sb[1], "x", 1), 1);
    parks = 0;
    assert_int_equal(sq_io_start(l, &P.a, sa[0], EPOLLIN, on_park_other), 0);
    assert_int_equal(sq_io_start(l, &P.b, sb[0], EPOLLIN, on_park_other), 0);
    sq_loop_run_once(l, 100 * SQ_NS_PER_MS);
    assert_int_equal(parks, 1);
    struct sq_io *parked = P.a.fd < 0 ? &P.a : &P.b, *live = parked == &P.a ? &P.b : &P.a;
    assert_true(parked_fd == sa[0] || parked_fd == sb[0]);
    assert_int_equal(parked->events, EPOLLIN); /* still registered */
    sq_io_stop(l, live);
    /* back with EPOLLIN|EPOLLOUT: a socket pair is writable, so the io runs at once */
    assert_int_equal(sq_io_unpark(l, parked, parked_fd, EPOLLIN | EPOLLOUT, on_count), 0);
    assert_int_equal(parked->fd, parked_fd);
    assert_int_equal(sq_loop_run_once(l, 100 * SQ_NS_PER_MS), 1);
    assert_int_equal(parks, 101);
    sq_io_close(l, parked);
    for (int i = 0; i < 2; i++)
        close(i ? sa[1] : sb[1]);
    close(live->fd);
    sq_loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timers_fire_in_order),
        cmocka_unit_test(timers_sorted),
        cmocka_unit_test(timer_waits),
        cmocka_unit_test(stop_drops_pending_events),
        cmocka_unit_test(close_drops_pending_events),
        cmocka_unit_test(park_keeps_registration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
