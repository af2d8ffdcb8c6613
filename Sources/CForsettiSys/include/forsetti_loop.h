// The kernel primitives of the host's event loop (`WorkerLoop`): an epoll set whose entries fire
// once and are re-armed by the thread that handled them (the doorbells it waits on are in
// forsetti_ring.h). Swift's Glibc module does not export <sys/epoll.h>.
#ifndef FORSETTI_LOOP_H
#define FORSETTI_LOOP_H
#include <stdint.h>

/// A new epoll set (close-on-exec); the descriptor or -1.
int forsetti_epoll_create(void);
/// Adds `fd` for input (and hang-up), firing once for `token`; 0 or -1 with errno.
int forsetti_epoll_add(int epfd, int fd, uint64_t token);
/// Adds `fd` for input, edge-triggered and never disarmed, for `token`: it fires once per
/// wake-up of the file (an eventfd: once per write, drained or not), and its handler may run on
/// two threads at once, so it must exclude itself. 0 or -1 with errno.
int forsetti_epoll_add_edge(int epfd, int fd, uint64_t token);
/// Arms `fd` again after it fired; 0 or -1 with errno (ENOENT once it was removed).
int forsetti_epoll_rearm(int epfd, int fd, uint64_t token);
/// Removes `fd`; 0 or -1 with errno.
int forsetti_epoll_remove(int epfd, int fd);
/// Waits up to `timeout_ms` (negative: no limit) for one entry; its token in `*token`. 1 when one
/// fired, 0 on timeout, -1 with errno (EINTR).
int forsetti_epoll_wait_one(int epfd, uint64_t *token, int timeout_ms);
#endif
