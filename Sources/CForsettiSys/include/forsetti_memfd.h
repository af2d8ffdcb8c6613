// A sealed in-memory copy of a file, for loading a module image into the host process without
// a copy on disk (hot reload). The caller opens it through /proc/self/fd/N.
#ifndef FORSETTI_MEMFD_H
#define FORSETTI_MEMFD_H

/// Copies the file at `path` into a new memfd named `name` (close-on-exec), then seals it
/// against any write, shrink or growth. Returns the memfd, or -1 with errno set (the copy is
/// not made); copies at most `max_bytes` and fails with EFBIG past them.
int forsetti_memfd_copy(const char *path, const char *name, long long max_bytes);

#endif
