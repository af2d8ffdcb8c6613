#ifndef FORSETTI_JOURNAL_H
#define FORSETTI_JOURNAL_H
// One call of libsystemd's journal API, sd_journal_sendv(3), through a library opened on first
// use: the host links nothing of systemd (see journal.c).
#include <sys/uio.h>

/// Opens libsystemd.so.0 once (thread-safe); 1 when sd_journal_sendv was found, else 0.
int forsetti_journal_load(void);

/// sd_journal_sendv(iov, n): each iovec one `FIELD=value` (a value may hold any bytes). 0 when
/// the journal took the entry, else a negative errno (-ENOSYS when the library is missing).
int forsetti_journal_sendv(const struct iovec *iov, int n);

#endif
