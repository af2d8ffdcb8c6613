#define _GNU_SOURCE
#include "forsetti_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int forsetti_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve) {
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = flags;
  how.mode = mode;
  how.resolve = resolve;
  return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

int forsetti_have_openat2(void) {
  int fd = forsetti_openat2(AT_FDCWD, ".", O_PATH | O_CLOEXEC, 0, 0);
  if (fd >= 0) {
    close(fd);
    return 1;
  }
  return errno != ENOSYS;
}
