#define _GNU_SOURCE
#include "forsetti_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
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

#include <dirent.h>
#include <linux/landlock.h>
#include <sys/prctl.h>

int forsetti_landlock_create_ruleset(const void *attr, unsigned long size, uint32_t flags) {
  return (int)syscall(__NR_landlock_create_ruleset, attr, size, flags);
}

int forsetti_landlock_add_path_rule(int ruleset_fd, int parent_fd, uint64_t allowed) {
  struct landlock_path_beneath_attr rule;
  memset(&rule, 0, sizeof rule);
  rule.allowed_access = allowed;
  rule.parent_fd = parent_fd;
  return (int)syscall(__NR_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
}

int forsetti_landlock_restrict_self(int ruleset_fd) { return (int)syscall(__NR_landlock_restrict_self, ruleset_fd, 0); }

int forsetti_set_no_new_privs(void) { return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); }

int forsetti_set_parent_death_signal(int sig) { return prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0); }

int forsetti_thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] != '.') n++;
  }
  closedir(d);
  return n;
}

int forsetti_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int forsetti_spawn_close_from(void *actions, int from) {
  return posix_spawn_file_actions_addclosefrom_np((posix_spawn_file_actions_t *)actions, from);
}

short forsetti_spawn_flag_setsid(void) { return POSIX_SPAWN_SETSID; }

int forsetti_spawn_clear_sigmask(void *attributes) {
  posix_spawnattr_t *a = attributes;
  sigset_t none;
  sigemptyset(&none);
  short flags = 0;
  if (posix_spawnattr_getflags(a, &flags) != 0) return -1;
  if (posix_spawnattr_setsigmask(a, &none) != 0) return -1;
  return posix_spawnattr_setflags(a, flags | POSIX_SPAWN_SETSIGMASK);
}

#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>

int forsetti_unshare(int flags) { return unshare(flags); }

int forsetti_mount_tmpfs(const char *path, uint64_t bytes) {
  if (unshare(CLONE_NEWNS) != 0) return -1;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -1;
  char options[64];
  snprintf(options, sizeof options, "size=%llu,mode=0700", (unsigned long long)bytes);
  return mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options);
}

int forsetti_rename_noreplace(int from_dir, const char *from, int to_dir, const char *to) {
  return (int)syscall(SYS_renameat2, from_dir, from, to_dir, to, 1u /* RENAME_NOREPLACE */);
}

int forsetti_capbset_drop(int cap) { return prctl(PR_CAPBSET_DROP, cap, 0, 0, 0); }

int forsetti_ambient_clear_all(void) { return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); }

int forsetti_capset_empty(void) {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  return (int)syscall(SYS_capset, &header, data);
}

int forsetti_capabilities_held(void) {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  if (syscall(SYS_capget, &header, data) != 0) return -1;
  for (int i = 0; i < 2; i++) {
    if (data[i].effective || data[i].permitted || data[i].inheritable) return 1;
  }
  return 0;
}

int forsetti_install_bpf_filter(const void *instructions, unsigned short count) {
  struct sock_fprog prog = {count, (struct sock_filter *)instructions};
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

#include <sys/socket.h>

int forsetti_accept_cloexec(int fd) { return accept4(fd, NULL, NULL, SOCK_CLOEXEC); }

int forsetti_peer_uid(int fd, unsigned int *uid) {
  struct ucred cred;
  socklen_t size = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0) return -1;
  *uid = cred.uid;
  return 0;
}

int forsetti_peer_credentials(int fd, unsigned int *uid, int *pid) {
  struct ucred cred;
  socklen_t size = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0) return -1;
  *uid = cred.uid;
  *pid = cred.pid;
  return 0;
}

int forsetti_open_directory_path(const char *path) {
  return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

long forsetti_send_with_fds(int sock, const void *bytes, size_t length, const int *fds, int count) {
  if (count < 0 || count > FORSETTI_MAX_FDS) {
    errno = EINVAL;
    return -1;
  }
  struct iovec iov = {.iov_base = (void *)bytes, .iov_len = length};
  union {
    struct cmsghdr header;
    char space[CMSG_SPACE(FORSETTI_MAX_FDS * sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space,
                       .msg_controllen = CMSG_SPACE(count * sizeof(int))};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(count * sizeof(int));
  memcpy(CMSG_DATA(c), fds, count * sizeof(int));
  long n;
  do { n = sendmsg(sock, &msg, MSG_NOSIGNAL); } while (n < 0 && errno == EINTR);
  return n;
}

long forsetti_recv_with_fds(int sock, void *buffer, size_t capacity, int *fds, int max, int *count) {
  *count = 0;
  struct iovec iov = {.iov_base = buffer, .iov_len = capacity};
  union {
    struct cmsghdr header;
    char space[CMSG_SPACE(2 * FORSETTI_MAX_FDS * sizeof(int))];
  } control;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space,
                       .msg_controllen = sizeof control.space};
  long n = recvmsg(sock, &msg, MSG_TRUNC | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t got = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < got; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*count < max) fds[(*count)++] = fd; else close(fd);
    }
  }
  return n;
}

long forsetti_send_with_fd(int sock, const void *bytes, size_t length, int fd) {
  return forsetti_send_with_fds(sock, bytes, length, &fd, 1);
}

long forsetti_recv_with_fd(int sock, void *buffer, size_t capacity, int *fd) {
  int count = 0;
  *fd = -1;
  return forsetti_recv_with_fds(sock, buffer, capacity, fd, 1, &count);
}

int forsetti_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
