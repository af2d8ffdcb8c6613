// The primitives of the shared-memory call ring between the host and a worker: atomic access to
// 32-bit words in memory both processes map, futex waits and wakes on them (shared, not
// process-private, futexes), an anonymous memory file to map, and the spin-loop hint.
#ifndef FORSETTI_RING_H
#define FORSETTI_RING_H
#include <stdint.h>

static inline uint32_t forsetti_load_acquire(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void forsetti_store_release(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
/// Sequentially consistent store and load: the sleeping-flag handshake needs a store followed by
/// a load that cannot be reordered before it (Dekker's pattern).
static inline void forsetti_store_seq_cst(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static inline uint32_t forsetti_load_seq_cst(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
/// Compare-and-swap (sequentially consistent): 1 when `*p` was `expected` and is now `desired`.
static inline int forsetti_cas(uint32_t *p, uint32_t expected, uint32_t desired) {
  return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
/// Adds `v` (sequentially consistent, wrapping); the value before.
static inline uint32_t forsetti_fetch_add(uint32_t *p, uint32_t v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

/// A pause for spin loops (`pause` on x86, `yield` on arm).
static inline void forsetti_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/// FUTEX_WAIT while `*word == expected`, at most `timeout_ns` nanoseconds (negative: no limit).
/// 0 when woken or the value differed; -1 with errno (ETIMEDOUT, EINTR, EAGAIN) otherwise.
int forsetti_futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns);
/// Waits on up to FORSETTI_FUTEX_WAITV_MAX words at once (futex_waitv, Linux 5.16): while
/// `*words[i] == expected[i]` for every i, at most `timeout_ns` nanoseconds. The index of a word
/// woken, or -1 with errno: EAGAIN (a word differed already), ETIMEDOUT, EINTR, ENOSYS (an older
/// kernel), EINVAL (more than the maximum).
int forsetti_futex_waitv(uint32_t *const *words, const uint32_t *expected, int count, int64_t timeout_ns);
#define FORSETTI_FUTEX_WAITV_MAX 128
/// FUTEX_WAKE of up to `count` waiters; the number woken, or -1.
int forsetti_futex_wake(uint32_t *word, int count);
/// memfd_create(name, MFD_CLOEXEC), sized to `size` bytes; the descriptor or -1.
int forsetti_memfd(const char *name, uint64_t size);

// The doorbell of a worker's call ring: an eventfd the worker rings when the host's server
// sleeps, which the host's loop waits on in epoll (a futex cannot be waited on there).
/// A new non-blocking, close-on-exec eventfd counting from 0; the descriptor or -1.
int forsetti_eventfd(void);
/// Adds one to the eventfd's count (wakes whoever polls it); 0 or -1 with errno.
int forsetti_eventfd_ring(int fd);
#endif
