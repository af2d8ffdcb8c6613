#define _GNU_SOURCE
#include "forsetti_disk.h"

#include <errno.h>
#include <fts.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>

static int compare_inode(const void *a, const void *b) {
  ino_t x = *(const ino_t *)a, y = *(const ino_t *)b;
  return x < y ? -1 : x > y;
}

static void free_node(void *node) { free(node); }

int forsetti_disk_usage(const char *path, int watch, uint64_t *bytes, uint64_t *entries, int *wds,
                        size_t capacity, size_t *wd_count) {
  if (wd_count) *wd_count = 0;
  struct stat top;
  if (lstat(path, &top) != 0) return -1;
  char *roots[] = {(char *)path, NULL};
  // Physical (no link followed), by path (no chdir: the host's other threads share its
  // directory), on one filesystem (a mount the module cannot make is not its).
  FTS *walk = fts_open(roots, FTS_PHYSICAL | FTS_NOCHDIR | FTS_XDEV, NULL);
  if (walk == NULL) return -1;
  uint64_t total = 0, seen = 0;
  void *linked = NULL;  // inodes of files with more than one link, counted once
  FTSENT *e;
  while ((e = fts_read(walk)) != NULL) {
    if (e->fts_info == FTS_DP || e->fts_info == FTS_NS || e->fts_info == FTS_ERR || e->fts_statp == NULL)
      continue;
    const struct stat *st = e->fts_statp;
    seen++;
    // Adding a watch a directory already has costs a lookup; one the kernel refuses (the
    // user's watch limit) leaves the count to the clock.
    // Only as many as can be recorded: a watch nobody knows of would outlive its module.
    if (watch >= 0 && e->fts_info == FTS_D && wds && wd_count && *wd_count < capacity) {
      int wd = inotify_add_watch(watch, e->fts_accpath, IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
      if (wd >= 0) wds[(*wd_count)++] = wd;
    }
    if (!S_ISDIR(st->st_mode) && st->st_nlink > 1) {
      ino_t *key = malloc(sizeof *key);
      if (key == NULL) continue;
      *key = st->st_ino;
      void *found = tsearch(key, &linked, compare_inode);
      if (found == NULL) {
        free(key);
      } else if (*(ino_t **)found != key) {
        free(key);
        continue;
      }
    }
    total += (uint64_t)st->st_blocks * 512u;
  }
  int saved = errno;
  fts_close(walk);
  tdestroy(linked, free_node);
  errno = saved;
  *bytes = total;
  if (entries) *entries = seen;
  return 0;
}

int forsetti_file_size_limit(pid_t pid, int set, uint64_t new_soft, uint64_t *soft, uint64_t *hard) {
  struct rlimit old;
  if (prlimit(pid, RLIMIT_FSIZE, NULL, &old) != 0) return -1;
  *soft = old.rlim_cur;
  *hard = old.rlim_max;
  if (set == 0) return 0;
  struct rlimit next = old;
  next.rlim_cur = new_soft;
  if (set == 2) next.rlim_max = new_soft;
  if (next.rlim_cur > next.rlim_max) next.rlim_cur = next.rlim_max;
  return prlimit(pid, RLIMIT_FSIZE, &next, NULL);
}

size_t forsetti_inotify_event_wds(const void *buffer, size_t length, int *wds, size_t capacity) {
  size_t n = 0, at = 0;
  const char *bytes = buffer;
  while (at + sizeof(struct inotify_event) <= length && n < capacity) {
    struct inotify_event event;
    memcpy(&event, bytes + at, sizeof event);
    wds[n++] = event.wd;
    size_t next = at + sizeof(struct inotify_event) + event.len;
    if (next <= at) break;
    at = next;
  }
  return n;
}
