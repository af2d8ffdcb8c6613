#define _GNU_SOURCE
#include "forsetti_loop.h"

#include <sys/epoll.h>
#include <unistd.h>

int forsetti_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static int control(int epfd, int op, int fd, uint64_t token) {
  // EPOLLONESHOT: one thread at a time handles an entry, so a worker's frames are read in order
  // and its ring has one server, without a lock per entry.
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.u64 = token};
  return epoll_ctl(epfd, op, fd, &ev);
}

int forsetti_epoll_add(int epfd, int fd, uint64_t token) { return control(epfd, EPOLL_CTL_ADD, fd, token); }

int forsetti_epoll_add_edge(int epfd, int fd, uint64_t token) {
  struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = token};
  return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

int forsetti_epoll_rearm(int epfd, int fd, uint64_t token) { return control(epfd, EPOLL_CTL_MOD, fd, token); }

int forsetti_epoll_remove(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

int forsetti_epoll_wait_one(int epfd, uint64_t *token, int timeout_ms) {
  struct epoll_event ev;
  int n = epoll_wait(epfd, &ev, 1, timeout_ms);
  if (n == 1) *token = ev.data.u64;
  return n;
}

