#define _GNU_SOURCE
#include "forsetti_crash.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static struct forsetti_crash_record *g_record;
// A pipe the handler copies memory through: write(2) says EFAULT for an unreadable page (a
// guard page above a thread's stack) where a plain copy would fault again inside the handler.
// Made when armed: a module that crashes because it ran out of descriptors could not have one
// made then. A module may have closed it or put another file at its numbers, so the handler
// checks both ends are still this pipe (fstat is async-signal-safe) and makes one anew if not:
// the stack is never written into a descriptor that is no longer the probe.
static int g_probe[2] = {-1, -1};
static ino_t g_probe_inode;
static int g_taken;
static char g_alternate[64 * 1024];

static const int g_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT, SIGSYS};

// Copies up to `n` readable bytes at `from` into `to`; the count copied.
static size_t safe_copy(uint8_t *to, uintptr_t from, size_t n) {
  size_t done = 0;
  while (done < n && g_probe[0] >= 0) {
    size_t chunk = n - done < 4096 ? n - done : 4096;
    // Never past the page `from + done` is on: a readable page and an unreadable one after it
    // must not fail the whole chunk.
    size_t to_page = 4096 - ((from + done) & 4095);
    if (chunk > to_page) chunk = to_page;
    ssize_t w = write(g_probe[1], (const void *)(from + done), chunk);
    if (w <= 0) break;
    ssize_t r = read(g_probe[0], to + done, (size_t)w);
    if (r != w) break;
    done += (size_t)w;
  }
  return done;
}

static int probe_is_ours(void) {
  struct stat a, b;
  return g_probe[0] >= 0 && fstat(g_probe[0], &a) == 0 && fstat(g_probe[1], &b) == 0 && S_ISFIFO(a.st_mode) &&
         a.st_ino == g_probe_inode && b.st_ino == g_probe_inode && a.st_dev == b.st_dev;
}

static void make_probe(void) {
  struct stat st;
  if (pipe2(g_probe, O_CLOEXEC | O_NONBLOCK) != 0 || fstat(g_probe[0], &st) != 0) {
    g_probe[0] = g_probe[1] = -1;
    return;
  }
  g_probe_inode = st.st_ino;
}

static void on_crash(int signo, siginfo_t *info, void *context) {
  struct forsetti_crash_record *r = g_record;
  if (r != NULL && __atomic_exchange_n(&g_taken, 1, __ATOMIC_SEQ_CST) == 0) {
    r->signo = (uint32_t)signo;
    r->code = info ? info->si_code : 0;
    r->address = info ? (uint64_t)(uintptr_t)info->si_addr : 0;
    r->tid = (int32_t)syscall(SYS_gettid);
    r->stack_length = 0;
#if defined(__x86_64__)
    const ucontext_t *uc = context;
    const greg_t *g = uc->uc_mcontext.gregs;
    const int order[FORSETTI_CRASH_REGISTERS] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                                 REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                                 REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
    for (int i = 0; i < FORSETTI_CRASH_REGISTERS; i++) r->registers[i] = (uint64_t)g[order[i]];
    r->stack_start = (uint64_t)g[REG_RSP];
    __atomic_store_n(&r->state, FORSETTI_CRASH_WRITTEN, __ATOMIC_RELEASE);
    if (!probe_is_ours()) make_probe();
    // The stack after the registers: a fault while copying it leaves the record as it is.
    r->stack_length = (uint32_t)safe_copy(r->stack, (uintptr_t)g[REG_RSP], FORSETTI_CRASH_STACK);
#else
    (void)context;
#endif
  }
  // A fault returns to the instruction and meets the default action; a signal someone sent
  // (si_code <= 0: kill, raise, abort) is sent again, now to the default action.
  if (info == NULL || info->si_code <= 0) {
    signal(signo, SIG_DFL);
    raise(signo);
  }
}

int forsetti_crash_arm(struct forsetti_crash_record *record) {
  if (record == NULL) {
    errno = EINVAL;
    return -1;
  }
  g_record = record;
  if (g_probe[0] < 0) make_probe();
  stack_t alternate = {.ss_sp = g_alternate, .ss_size = sizeof g_alternate, .ss_flags = 0};
  if (sigaltstack(&alternate, NULL) != 0) return -1;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_crash;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < sizeof g_signals / sizeof g_signals[0]; i++) {
    if (sigaction(g_signals[i], &action, NULL) != 0) return -1;
  }
  return 0;
}

static int note_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  struct forsetti_crash_record *r = g_record;
  if (r == NULL || r->object_count >= FORSETTI_CRASH_OBJECTS) return 1;
  struct forsetti_crash_object *o = &r->objects[r->object_count];
  o->base = (uint64_t)info->dlpi_addr;
  const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "";
  // The executable has no name here: /proc/self/exe is read for it.
  if (name[0] == 0 && r->object_count == 0) {
    ssize_t n = readlink("/proc/self/exe", o->path, FORSETTI_CRASH_PATH - 1);
    o->path[n > 0 ? n : 0] = 0;
  } else {
    strncpy(o->path, name, FORSETTI_CRASH_PATH - 1);
    o->path[FORSETTI_CRASH_PATH - 1] = 0;
  }
  r->object_count++;
  return 0;
}

void forsetti_crash_note_objects(void) {
  if (g_record == NULL) return;
  g_record->object_count = 0;
  dl_iterate_phdr(note_object, NULL);
}
