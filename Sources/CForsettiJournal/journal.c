#include "forsetti_journal.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <systemd/sd-journal.h>

// Opened, not linked, for parity with the debug screen's libmicrohttpd (CForsettiWeb): only a
// host whose standard error is the journal ($JOURNAL_STREAM) needs it, and every other command
// (`check`, `list`, a shell's `run`) then maps and relocates no library more. Linked, the .deb
// would also have to depend on libsystemd0; opened, a system without it gets plain lines.
#define FORSETTI_JOURNAL_LIBRARY "libsystemd.so.0"

static __typeof__(&sd_journal_sendv) journal_sendv;
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;

static void journal_open(void) {
  void *library = dlopen(FORSETTI_JOURNAL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) return;
  journal_sendv = (__typeof__(journal_sendv))dlsym(library, "sd_journal_sendv");
}

int forsetti_journal_load(void) { return pthread_once(&journal_once, journal_open) == 0 && journal_sendv != NULL; }

int forsetti_journal_sendv(const struct iovec *iov, int n) {
  if (!forsetti_journal_load()) return -ENOSYS;
  return journal_sendv(iov, n);
}
