/* loop/loop.h - a small epoll event loop with intrusive timers.
 *
 * One loop per thread; nothing in it is thread-safe. Handles are caller-owned and embedded in
 * their owner (a connection embeds its sq_io and sq_timer), so registering costs no allocation.
 * File descriptors are level-triggered: a callback that leaves bytes unread is called again.
 */
#ifndef SQ_LOOP_LOOP_H
#define SQ_LOOP_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "base/err.h"

struct sq_loop;
struct sq_io;
struct sq_timer;

typedef void (*sq_io_cb)(struct sq_loop *loop, struct sq_io *io, uint32_t revents);
typedef void (*sq_timer_cb)(struct sq_loop *loop, struct sq_timer *t);

/* A registered file descriptor. revents are EPOLLIN/EPOLLOUT/EPOLLERR/EPOLLHUP bits. */
struct sq_io {
    int fd;
    uint32_t events; /* what is registered now */
    sq_io_cb cb;
};

/* A one-shot timer. _idx is its slot in the loop's heap, or UINT32_MAX when not armed. */
struct sq_timer {
    int64_t due_ns; /* CLOCK_MONOTONIC */
    sq_timer_cb cb;
    uint32_t _idx;
};

/* Returns 0, -ENOMEM or -errno of epoll_create1. */
SQ_MUST_CHECK int sq_loop_new(struct sq_loop **out);
void sq_loop_free(struct sq_loop *l); /* NULL is a no-op; closes nothing but its epoll fd */

/* Registers io->fd for events (EPOLLIN, EPOLLOUT or both). io must outlive the registration. */
SQ_MUST_CHECK int sq_io_start(struct sq_loop *l, struct sq_io *io, int fd, uint32_t events,
                              sq_io_cb cb);
/* Changes the events of a registered io; no system call when they are unchanged. */
SQ_MUST_CHECK int sq_io_modify(struct sq_loop *l, struct sq_io *io, uint32_t events);
/* Unregisters io (does not close the fd). Events already fetched for io in this round are
 * dropped, so its callback does not run again after this returns. */
void sq_io_stop(struct sq_loop *l, struct sq_io *io);
/* sq_io_stop and close(io->fd) in one system call: closing the last descriptor of a socket
 * takes it out of the epoll set, so the EPOLL_CTL_DEL is left out. Only for a descriptor that
 * was never duplicated (dup, or fork without an exec): a copy would keep the registration alive
 * and its events would reach io. Events already fetched for io are dropped, as sq_io_stop does;
 * io->fd becomes -1. */
void sq_io_close(struct sq_loop *l, struct sq_io *io);
/* Takes io's fd out of io (io->fd becomes -1) and returns it, its registration left in place
 * (io->events kept): for a socket that connects again in place (net/sock.h sq_sock_recycle).
 * Events already fetched for io are dropped. Before the loop waits again, the fd goes back to
 * the same io (sq_io_unpark) or is closed: a parked socket's events would reach io. */
int sq_io_park(struct sq_loop *l, struct sq_io *io);
/* Gives io the fd sq_io_park took from it, with events and cb (one EPOLL_CTL_MOD when the
 * events differ from those registered). Returns 0 or -errno. */
SQ_MUST_CHECK int sq_io_unpark(struct sq_loop *l, struct sq_io *io, int fd, uint32_t events,
                               sq_io_cb cb);

void sq_timer_init(struct sq_timer *t, sq_timer_cb cb);
/* Arms (or re-arms) t to fire at due_ns. O(log n), no allocation once the heap has grown. */
SQ_MUST_CHECK int sq_timer_start(struct sq_loop *l, struct sq_timer *t, int64_t due_ns);
void sq_timer_stop(struct sq_loop *l, struct sq_timer *t); /* no-op when not armed */
static inline bool sq_timer_active(const struct sq_timer *t)
{
    return t->_idx != UINT32_MAX;
}

/* Waits at most max_wait_ns (0 polls, negative waits for the next timer or event only), then
 * runs the callbacks of ready fds and of due timers. Returns the number of callbacks run, or
 * -errno when epoll_wait failed for a reason other than EINTR. */
int sq_loop_run_once(struct sq_loop *l, int64_t max_wait_ns);

/* The time spent in sq_loop_run_once's waits that could block (a timeout other than 0), from
 * the call before to the clock read after: asleep, and waking (engine/client.c). */
int64_t sq_loop_blocked_ns(const struct sq_loop *l);

/* The time taken right after the last wait returned: one clock read per round. */
int64_t sq_loop_now(const struct sq_loop *l);
/* Reads the clock again and stores it as the loop's time. */
int64_t sq_loop_update_now(struct sq_loop *l);

#endif
