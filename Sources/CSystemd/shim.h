// libsystemd's journal header only: CForsettiJournal opens the library when the journal is the
// host's standard error, so nothing here is linked (no `link`, no pkg-config).
#ifndef FORSETTI_CSYSTEMD_SHIM_H
#define FORSETTI_CSYSTEMD_SHIM_H
#include <systemd/sd-journal.h>
#endif
