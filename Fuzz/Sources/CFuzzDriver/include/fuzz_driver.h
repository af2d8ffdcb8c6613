#ifndef FUZZ_DRIVER_H
#define FUZZ_DRIVER_H
#include <stddef.h>
#include <stdint.h>

// libFuzzer's entry for a program with its own main (compiler-rt, LLVM 11 and later). The
// fuzzers call it from `@main`: SwiftPM renames a debug executable's main for testability,
// which leaves libFuzzer's own main unlinked.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
