// Linux system calls that glibc does not wrap (or wraps as variadic functions Swift cannot
// call). Each returns what the kernel returns; on failure -1 with errno set.
#ifndef FORSETTI_SYS_H
#define FORSETTI_SYS_H
#include <stdint.h>

// Resolution flags of openat2(2).
#define FORSETTI_RESOLVE_NO_XDEV 0x01
#define FORSETTI_RESOLVE_NO_MAGICLINKS 0x02
#define FORSETTI_RESOLVE_NO_SYMLINKS 0x04
#define FORSETTI_RESOLVE_BENEATH 0x08

// O_PATH (Linux, all architectures); glibc hides it without _GNU_SOURCE.
#define FORSETTI_O_PATH 0x200000

/// openat2(2): opens `path` relative to `dirfd` with `resolve` restrictions.
int forsetti_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve);

/// Whether the kernel has openat2 (checked once by a harmless call).
int forsetti_have_openat2(void);
#endif
