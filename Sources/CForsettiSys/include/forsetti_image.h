#ifndef FORSETTI_IMAGE_H
#define FORSETTI_IMAGE_H

/// execve(path, argv, envp) with the `count` descriptors of `keep` inherited (their
/// close-on-exec cleared just before) and SIGINT, SIGTERM and SIGHUP blocked across it. Returns
/// only on failure: -errno, with the descriptors close-on-exec again and the mask as it was.
int forsetti_exec_image(const char *path, char *const argv[], char *const envp[], const int *keep, int count);

#include <stddef.h>

/// A memfd (close-on-exec) holding `count` bytes of `bytes`, sealed against every change: a
/// process it is handed to reads it and cannot alter what the next reader reads. -1 (errno).
int forsetti_memfd_document(const char *name, const void *bytes, size_t count);

/// Unblocks SIGINT, SIGTERM and SIGHUP in the calling thread: an image started by
/// `forsetti_exec_image` calls it once its own handlers are in place.
int forsetti_unblock_stop_signals(void);

#endif
