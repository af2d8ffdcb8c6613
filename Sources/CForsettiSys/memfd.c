#define _GNU_SOURCE
#include "forsetti_memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(int a, int b) {
  int e = errno;
  if (a >= 0) close(a);
  if (b >= 0) close(b);
  errno = e;
  return -1;
}

int forsetti_memfd_copy(const char *path, const char *name, long long max_bytes) {
  int src = open(path, O_RDONLY | O_CLOEXEC);
  if (src < 0) return -1;
  struct stat st;
  if (fstat(src, &st) != 0) return fail(src, -1);
  if (!S_ISREG(st.st_mode)) {
    errno = EINVAL;
    return fail(src, -1);
  }
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return fail(src, -1);
  // In the kernel, page cache to page cache; to the end of the file as it is read (a file
  // replaced by rename is not the one open here, and one written in place is the writer's race
  // with any copy).
  long long total = 0;
  for (;;) {
    ssize_t n = sendfile(fd, src, NULL, 1 << 30);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(src, fd);
    }
    if (n == 0) break;
    total += n;
    if (total > max_bytes) {
      errno = EFBIG;
      return fail(src, fd);
    }
  }
  close(src);
  // Sealed: no one (the module included, through /proc) can change the image after the fact.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    return fail(fd, -1);
  }
  return fd;
}
