#ifndef FORSETTI_CRASH_H
#define FORSETTI_CRASH_H
// A worker's crash record: what its signal handler saw (the signal, the faulting address, the
// crashing thread's registers and the top of its stack) and what was loaded where, written into
// memory the host shares with that worker only (after the progress page of fd 4's mapping), so
// the host reads it once the worker is dead and symbolizes it from the files (CrashReport).
// The handler only copies memory: no allocation, no lock, no system call the worker's seccomp
// filter does not already allow a module.
#include <stddef.h>
#include <stdint.h>

#define FORSETTI_CRASH_OBJECTS 64
#define FORSETTI_CRASH_PATH 240
#define FORSETTI_CRASH_STACK (32 * 1024)
/// x86-64's DWARF registers 0–16: rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8–r15, then rip.
#define FORSETTI_CRASH_REGISTERS 17
/// `state` once the handler has written the signal and the registers.
#define FORSETTI_CRASH_WRITTEN 0x46435231u

struct forsetti_crash_object {
  uint64_t base;
  char path[FORSETTI_CRASH_PATH];
};

struct forsetti_crash_record {
  uint32_t state;
  uint32_t signo;
  int32_t code;
  int32_t tid;
  uint64_t address;
  uint64_t registers[FORSETTI_CRASH_REGISTERS];
  uint64_t stack_start;
  uint32_t stack_length;
  uint32_t object_count;
  struct forsetti_crash_object objects[FORSETTI_CRASH_OBJECTS];
  uint8_t stack[FORSETTI_CRASH_STACK];
};

/// Where the stack bytes and the objects start in a record (Swift does not import the arrays).
static inline size_t forsetti_crash_stack_offset(void) { return offsetof(struct forsetti_crash_record, stack); }
static inline size_t forsetti_crash_objects_offset(void) { return offsetof(struct forsetti_crash_record, objects); }

/// Installs the handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT and SIGSYS (once
/// each, then the default: the worker dies of the signal as before), with an alternate stack
/// for the calling thread, writing into `record`. 0, or -1 with errno.
int forsetti_crash_arm(struct forsetti_crash_record *record);
/// Writes the objects loaded now (dl_iterate_phdr: each one's load bias and path) into the
/// record armed; called outside the handler, after a load.
void forsetti_crash_note_objects(void);
#endif
