#define _GNU_SOURCE
#include "forsetti_image.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

int forsetti_exec_image(const char *path, char *const argv[], char *const envp[], const int *keep, int count) {
  // Blocked across the exec (a thread's mask and pending signals survive it): a SIGTERM between
  // the exec and the new image's handlers stays pending for them instead of killing the host,
  // and every worker with it.
  sigset_t stop, before;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, &before);
  for (int i = 0; i < count; i++) fcntl(keep[i], F_SETFD, 0);
  execve(path, argv, envp);
  int e = errno;
  for (int i = 0; i < count; i++) fcntl(keep[i], F_SETFD, FD_CLOEXEC);
  pthread_sigmask(SIG_SETMASK, &before, NULL);
  return -e;
}

int forsetti_memfd_document(const char *name, const void *bytes, size_t count) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < count) {
    ssize_t n = pwrite(fd, (const char *)bytes + done, count - done, (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      close(fd);
      errno = e;
      return -1;
    }
    done += (size_t)n;
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int forsetti_unblock_stop_signals(void) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  return pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
}
