// elfutils' libdw and libdwfl headers, for the crash symbolizer's shim (CForsettiDebug), which
// opens the library when a crash is symbolized: linked, it and its compression libraries would
// be loaded by every forsetti-host command.
#ifndef FORSETTI_CLIBDW_SHIM_H
#define FORSETTI_CLIBDW_SHIM_H
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#endif
