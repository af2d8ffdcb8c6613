// The worker zygote's fork loop (`ZygoteMain.swift` starts it, `Zygote.swift` in the host
// speaks to it). In C on purpose: the thread that forks must never have run Swift code. The
// Swift runtime's locks and `Synchronization.Mutex` are priority-inheritance futexes that
// cache their thread's id in thread-local storage the first time a thread takes one; a child
// forked from a thread that had would start with its parent's id cached, and the first lock
// another of its threads contends would never be released. A thread that has only ever run
// this loop has nothing cached, so its children compute their own.
#define _GNU_SOURCE
#include "forsetti_sys.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int control_fd = -1;
static forsetti_zygote_child_fn child_entry;
static pthread_t main_thread;
/// glibc's own thread id field of the forking thread: the clone writes the child's id there,
/// as glibc's fork does, so glibc in the child knows its thread by its own id.
static pid_t *own_tid_field;
/// The zygote's own `--zygote` in its command line, which a worker overwrites with `--worker`
/// (what `ps` shows); NULL to leave it.
static char *worker_label;

/// The offset of `tid` in glibc's thread descriptor, from the descriptor glibc publishes for
/// debuggers (`_thread_db_pthread_tid`: bits, count, offset), checked against the kernel's
/// answer; NULL when it cannot be trusted (another libc, another layout).
static pid_t *find_tid_field(void) {
  const uint32_t *desc = dlvsym(RTLD_DEFAULT, "_thread_db_pthread_tid", "GLIBC_PRIVATE");
  const uint32_t *size = dlvsym(RTLD_DEFAULT, "_thread_db_sizeof_pthread", "GLIBC_PRIVATE");
  if (desc == NULL || size == NULL) return NULL;
  if (desc[0] != 8 * sizeof(pid_t) || desc[1] != 1) return NULL;
  if ((uint64_t)desc[2] + sizeof(pid_t) > (uint64_t)size[0]) return NULL;
  pid_t *field = (pid_t *)((char *)pthread_self() + desc[2]);
  if (*field != (pid_t)syscall(SYS_gettid)) return NULL;
  return field;
}

static void reply(long long value) {
  ssize_t n;
  do { n = send(control_fd, &value, sizeof value, MSG_NOSIGNAL); } while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof value) _exit(0);
}

/// Whether this is the only live thread. The ended main thread stays listed, as a zombie, for as
/// long as the process lives (it leads the thread group), so it is not counted.
static int single_threaded(void) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return 0;
  int live = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // ended meanwhile
    ssize_t n = read(fd, stat, sizeof stat - 1);
    close(fd);
    if (n <= 0) continue;
    stat[n] = 0;
    // The state follows the command's closing parenthesis, which may itself hold any text.
    char *paren = strrchr(stat, ')');
    if (paren == NULL || paren[1] != ' ' || paren[2] == 'Z' || paren[2] == 'X') continue;
    live++;
  }
  closedir(d);
  return live == 1;
}

/// In the child: the three channels to 1–4 (output on 1 and 2, socket on 3, ring on 4),
/// /dev/null on 0, nothing else open; a process group of its own; then the worker.
static void become_worker(int fds[3]) {
  close(control_fd);
  int moved[3];
  for (int i = 0; i < 3; i++) {
    // Above every target first: a received descriptor may sit on 1–4 itself.
    moved[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10);
    if (moved[i] < 0) _exit(71);
  }
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || dup2(null, 0) < 0) _exit(71);
  if (dup2(moved[2], 1) < 0 || dup2(moved[2], 2) < 0) _exit(71);
  if (dup2(moved[0], 3) < 0 || dup2(moved[1], 4) < 0) _exit(71);
  if (syscall(SYS_close_range, 5U, ~0U, 0U) < 0) {
    for (int fd = 5; fd < 1024; fd++) close(fd);
  }
  // A session of its own (so a process group of its own too): where the kernel groups tasks by
  // session for the scheduler (autogroup, used when no cpu cgroup holds the worker, e.g. for an
  // unprivileged host), a module's threads then compete as one.
  if (setsid() < 0) setpgid(0, 0);
  if (worker_label != NULL && strlen(worker_label) == 8) memcpy(worker_label, "--worker", 8);
  child_entry();
  _exit(70);
}

/// glibc's fork plus CLONE_PARENT: the child is the host's, so the host waits for it, signals
/// it and reads its status exactly as for a process it spawned.
static long fork_sibling(void) {
  return syscall(SYS_clone, CLONE_PARENT | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, 0, NULL,
                 own_tid_field, 0);
}

/// The zygote proper: the only thread of its process, and its leader, serving fork requests.
static void serve(void) {
  for (;;) {
    char request[8];
    int fds[3] = {-1, -1, -1};
    int count = 0;
    long n = forsetti_recv_with_fds(control_fd, request, sizeof request, fds, 3, &count);
    if (n == 0 || (n < 0 && errno != EINTR)) _exit(0);
    if (n < 0) continue;
    long long result;
    if (n != 4 || memcmp(request, "fork", 4) != 0 || count != 3) {
      result = -EINVAL;
    } else if (!single_threaded()) {
      result = -EAGAIN;
    } else {
      long pid = fork_sibling();
      if (pid == 0) become_worker(fds);
      result = pid > 0 ? pid : -errno;
    }
    for (int i = 0; i < count; i++) close(fds[i]);
    reply(result);
  }
}

static void *fork_loop(void *unused) {
  (void)unused;
  pid_t host = getppid();
  // Until the Swift main thread has ended (and been joined, so glibc forgets it), this process
  // is not single-threaded.
  pthread_join(main_thread, NULL);
  own_tid_field = find_tid_field();
  if (own_tid_field == NULL || !single_threaded()) {
    reply(-ENOTSUP);
    _exit(0);
  }
  // The process whose leader ended stays listed as <defunct> for its whole life: the zygote
  // proper is a copy of this thread in a process of its own, the host's child; this one ends.
  long pid = fork_sibling();
  if (pid < 0) {
    reply(-errno);
    _exit(0);
  }
  if (pid > 0) _exit(0);
  if (forsetti_set_parent_death_signal(SIGKILL) != 0 || getppid() != host) _exit(0);
  reply(getpid());
  serve();
  return NULL;
}

void forsetti_zygote_run(int control, forsetti_zygote_child_fn child, char *label) {
  control_fd = control;
  child_entry = child;
  worker_label = label;
  main_thread = pthread_self();
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  // The worker runs its module on this thread's copy: the size of a main thread's stack.
  pthread_attr_setstacksize(&attributes, 8u << 20);
  pthread_t thread;
  if (pthread_create(&thread, &attributes, fork_loop, NULL) != 0) _exit(71);
  pthread_attr_destroy(&attributes);
  pthread_exit(NULL);
}
