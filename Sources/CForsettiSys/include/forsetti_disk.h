#ifndef FORSETTI_DISK_H
#define FORSETTI_DISK_H
// What a module's sandbox takes on disk, and the file-size limit that stops it taking more
// (SandboxQuotaMeter); the walk and the two prlimit calls only, the rule is Swift's.
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/// The bytes allocated under `path` (st_blocks × 512 of every entry, the directory itself
/// included; a file with several links once), never following a symbolic link nor leaving
/// `path`'s filesystem; `entries` counts what was seen. With `watch` an inotify descriptor
/// (else -1), every directory walked is watched there for writes and new entries, so the next
/// count can follow a write rather than a clock; at most `capacity` directories are watched, their
/// watch descriptors written to `wds` (`*wd_count` of them), so that one descriptor serves every
/// sandbox and an event names whose it is (the rest are counted by the clock). 0, or -1 with errno when `path` itself cannot be read. An entry
/// that vanishes during the walk is skipped.
int forsetti_disk_usage(const char *path, int watch, uint64_t *bytes, uint64_t *entries, int *wds,
                        size_t capacity, size_t *wd_count);

/// The watch descriptors of the inotify events in `buffer` (`length` bytes as read(2) gave
/// them), at most `capacity` into `wds`; how many.
size_t forsetti_inotify_event_wds(const void *buffer, size_t length, int *wds, size_t capacity);

/// RLIMIT_FSIZE of process `pid`: reads it into `soft` and `hard`; with `set` 1 then sets the
/// soft limit to `new_soft` (the hard one kept), with `set` 2 both to `new_soft`, clamped to
/// the hard limit unless the caller may raise it. 0, or -1 with errno.
int forsetti_file_size_limit(pid_t pid, int set, uint64_t new_soft, uint64_t *soft, uint64_t *hard);

#endif
