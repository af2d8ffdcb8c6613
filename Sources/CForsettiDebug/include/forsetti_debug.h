#ifndef FORSETTI_DEBUG_H
#define FORSETTI_DEBUG_H
// What symbolizing a crash needs of elfutils' libdwfl, which Swift cannot call directly (C
// callbacks, C walks) or should not link (libdw and its compression libraries would load with
// every command): a session over the files of one crash, unwinding a captured stack with each
// file's CFI, and what is known of an address. Judged and shown by Swift (CrashSymbolizer).
#include <stddef.h>
#include <stdint.h>

typedef struct Dwfl Dwfl;

/// Opens libdw (once): 1 when it is there with every call used, 0 when not.
int forsetti_debug_load(void);
/// The library forsetti_debug_load opens, for a message saying it is missing.
const char *forsetti_debug_library(void);

/// A session over the files of one crash; NULL on failure (or without libdw).
Dwfl *forsetti_debug_begin(void);
/// Reports `path` loaded at `bias`; 0, or -1 when libdwfl cannot read it.
int forsetti_debug_report(Dwfl *dwfl, const char *path, uint64_t bias);
/// Ends the reporting (before unwinding or looking anything up).
void forsetti_debug_report_end(Dwfl *dwfl);
void forsetti_debug_end(Dwfl *dwfl);

/// Unwinds from the 17 x86-64 DWARF registers with the stack bytes `stack` (`length`, starting
/// at address `stack_start`): up to `max` program counters into `pcs`, `activation[i]` 1 where
/// pcs[i] is where the signal struck rather than a return address. The count (at least 1).
int forsetti_debug_unwind(Dwfl *dwfl, const uint64_t *registers, uint64_t stack_start, const uint8_t *stack,
                          size_t length, uint64_t *pcs, uint8_t *activation, int max);

/// What is known of an address: its file, symbol, source line and the functions inlined there.
#define FORSETTI_DEBUG_INLINES 8
struct forsetti_debug_place {
  const char *file;     // the reported path of the file holding it, or NULL (no file does)
  uint64_t bias;        // that file's load bias
  const char *symbol;   // the nearest symbol (.symtab, else .dynsym), or NULL
  uint64_t symbol_offset;
  const char *source;   // its source file (DWARF line table), or NULL
  int line;
  int inline_count;     // the chain inlined at the address, innermost first
  const char *inline_function[FORSETTI_DEBUG_INLINES];
  const char *inline_call_file[FORSETTI_DEBUG_INLINES];  // where the next outer one called it
  int inline_call_line[FORSETTI_DEBUG_INLINES];
  uint8_t build_id[64];
  int build_id_length;
};
/// Fills `out` for `address`; the strings live as long as the session.
void forsetti_debug_lookup(Dwfl *dwfl, uint64_t address, struct forsetti_debug_place *out);
#endif
