#define _GNU_SOURCE
#include "forsetti_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int forsetti_futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns) {
  struct timespec ts, *t = NULL;
  if (timeout_ns >= 0) {
    ts.tv_sec = (time_t)(timeout_ns / 1000000000);
    ts.tv_nsec = (long)(timeout_ns % 1000000000);
    t = &ts;
  }
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory another process maps.
  return (int)syscall(SYS_futex, word, FUTEX_WAIT, expected, t, NULL, 0);
}

int forsetti_futex_waitv(uint32_t *const *words, const uint32_t *expected, int count, int64_t timeout_ns) {
  if (count < 1 || count > FORSETTI_FUTEX_WAITV_MAX || timeout_ns < 0) {
    errno = EINVAL;
    return -1;
  }
  struct futex_waitv waiters[FORSETTI_FUTEX_WAITV_MAX];
  for (int i = 0; i < count; i++) {
    // FUTEX_32 without FUTEX_PRIVATE_FLAG: each word lives in memory another process maps.
    waiters[i] = (struct futex_waitv){
        .val = expected[i], .uaddr = (uint64_t)(uintptr_t)words[i], .flags = FUTEX_32, .__reserved = 0};
  }
  // futex_waitv takes an absolute time on the clock named.
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += (time_t)(timeout_ns / 1000000000);
  t.tv_nsec += (long)(timeout_ns % 1000000000);
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return (int)syscall(SYS_futex_waitv, waiters, (unsigned)count, 0, &t, CLOCK_MONOTONIC);
}

int forsetti_futex_wake(uint32_t *word, int count) {
  return (int)syscall(SYS_futex, word, FUTEX_WAKE, count, NULL, NULL, 0);
}

int forsetti_memfd(const char *name, uint64_t size) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  // Sealed at its size: a worker holds this descriptor, and shrinking the file under the host's
  // mapping would make the host's next access to the ring a SIGBUS.
  if (ftruncate(fd, (off_t)size) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int forsetti_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int forsetti_eventfd_ring(int fd) {
  uint64_t one = 1;
  ssize_t n;
  do {
    n = write(fd, &one, sizeof one);
  } while (n < 0 && errno == EINTR);
  // EAGAIN: the count is at its maximum, so the bell is already ringing.
  return (n == sizeof one || (n < 0 && errno == EAGAIN)) ? 0 : -1;
}
