// Linux system calls that glibc does not wrap (or wraps as variadic functions Swift cannot
// call). Each returns what the kernel returns; on failure -1 with errno set.
#ifndef FORSETTI_SYS_H
#define FORSETTI_SYS_H
#include <stddef.h>
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

/// The most descriptors `forsetti_send_with_fds` sends in one message.
#define FORSETTI_MAX_FDS 4

/// Sends `length` bytes as one message with `count` (at most FORSETTI_MAX_FDS) descriptors
/// attached (SCM_RIGHTS). Returns what send(2) returns.
long forsetti_send_with_fds(int sock, const void *bytes, size_t length, const int *fds, int count);

/// Receives one message as `forsetti_recv_with_fd` does, taking up to `max` attached
/// descriptors (close-on-exec) into `fds` and their number into `*count`; the rest are closed.
long forsetti_recv_with_fds(int sock, void *buffer, size_t capacity, int *fds, int max, int *count);

/// pidfd_open(2): a descriptor that polls readable once process `pid` has exited.
int forsetti_pidfd_open(int pid);

/// What a child of the zygote runs once it holds its channels (never returns).
typedef void (*forsetti_zygote_child_fn)(void);

/// Becomes the worker zygote serving the host on `control` (zygote.c says how): starts the
/// forking thread and ends the calling one. `label`, the zygote's `--zygote` argument as the
/// kernel shows it, is overwritten in each worker. Never returns.
void forsetti_zygote_run(int control, forsetti_zygote_child_fn child, char *label) __attribute__((noreturn));

#endif

// Landlock system calls (glibc has no wrappers). `attr` is a struct landlock_ruleset_attr of
// `size` bytes as the running kernel's ABI defines it.
int forsetti_landlock_create_ruleset(const void *attr, unsigned long size, uint32_t flags);
/// Adds a path-beneath rule: `allowed` access for the hierarchy under `parent_fd` (O_PATH).
int forsetti_landlock_add_path_rule(int ruleset_fd, int parent_fd, uint64_t allowed);
int forsetti_landlock_restrict_self(int ruleset_fd);

/// prctl(PR_SET_NO_NEW_PRIVS, 1) and prctl(PR_SET_PDEATHSIG, sig): prctl is variadic in glibc.
int forsetti_set_no_new_privs(void);
int forsetti_set_parent_death_signal(int sig);

/// Number of threads of this process (from /proc/self/task), or -1.
int forsetti_thread_count(void);

/// pipe2(fds, O_CLOEXEC): both ends close-on-exec from their creation (glibc declares pipe2
/// only under _GNU_SOURCE). 0, or -1 with errno.
int forsetti_pipe_cloexec(int fds[2]);

/// posix_spawn_file_actions_addclosefrom_np(actions, from) on a posix_spawn_file_actions_t:
/// the child starts with no descriptor at or above `from`, whatever the parent (or a library in
/// it) left open without close-on-exec. 0, or an error number.
int forsetti_spawn_close_from(void *actions, int from);

/// POSIX_SPAWN_SETSID (glibc defines it only under _GNU_SOURCE): the child starts a session.
short forsetti_spawn_flag_setsid(void);

/// Makes a posix_spawnattr_t start its child with no signal blocked, whatever the spawning
/// thread blocks (an image started by an upgrade blocks the stop signals until its handlers are
/// in place; its workers must not inherit that). Call after the other flags are set.
int forsetti_spawn_clear_sigmask(void *attributes);

/// unshare(2) with CLONE_NEW* flags (glibc declares it only under _GNU_SOURCE).
int forsetti_unshare(int flags);
/// A mount namespace of the caller's own (CLONE_NEWNS, every mount made private so nothing
/// propagates back), then a tmpfs of `bytes` (mode 0700, nosuid, nodev, noexec) at `path`:
/// 0, or -1 with errno (EPERM without a user namespace or root).
int forsetti_mount_tmpfs(const char *path, uint64_t bytes);
/// renameat2(RENAME_NOREPLACE): 0, or -1 with errno (EEXIST when `to` exists).
int forsetti_rename_noreplace(int from_dir, const char *from, int to_dir, const char *to);
/// prctl(PR_CAPBSET_DROP, cap): 0, or -1 with EINVAL past the kernel's last capability and
/// EPERM without CAP_SETPCAP.
int forsetti_capbset_drop(int cap);
/// prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL).
int forsetti_ambient_clear_all(void);
/// capset(2) with empty effective, permitted and inheritable sets.
int forsetti_capset_empty(void);
/// 1 when any effective, permitted or inheritable capability is held, 0 when none, -1 on error.
int forsetti_capabilities_held(void);
/// Installs a classic BPF seccomp filter of `count` struct sock_filter (8 bytes each).
int forsetti_install_bpf_filter(const void *instructions, unsigned short count);

/// accept4(2) with SOCK_CLOEXEC (glibc declares it only under _GNU_SOURCE).
int forsetti_accept_cloexec(int fd);

/// Sends `length` bytes as one message on the socket `sock` with the descriptor `fd` attached
/// (SCM_RIGHTS). Returns what send(2) returns.
long forsetti_send_with_fd(int sock, const void *bytes, size_t length, int fd);

/// Receives one message on `sock` into `buffer` as recv(2) with MSG_TRUNC does (the whole
/// message's length, even when larger than `capacity`), taking at most one attached descriptor
/// into `*fd` (close-on-exec; -1 when none). Any other descriptor that came with it is closed,
/// so a peer cannot make the receiver leak descriptors.
long forsetti_recv_with_fd(int sock, void *buffer, size_t capacity, int *fd);
/// The uid of a unix socket's peer (SO_PEERCRED): 0, or -1 with errno.
int forsetti_peer_uid(int fd, unsigned int *uid);
/// The uid and pid of a unix socket's peer (SO_PEERCRED, as of its connect or listen): 0, or
/// -1 with errno. A client checks with it who listens before it sends anything.
int forsetti_peer_credentials(int fd, unsigned int *uid, int *pid);
/// A directory opened O_PATH (for reaching a socket whose path is too long for sun_path).
int forsetti_open_directory_path(const char *path);
