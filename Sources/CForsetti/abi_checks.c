// Compile-time checks of the ABI's promises: fixed layouts that only grow at the end.
#include "forsetti.h"

_Static_assert(offsetof(forsetti_module, abi_version) == 0, "abi_version comes first");
_Static_assert(offsetof(forsetti_module, struct_size) == 4, "struct_size comes second");
_Static_assert(offsetof(forsetti_host, abi_version) == 0, "abi_version comes first");
_Static_assert(offsetof(forsetti_host, struct_size) == 4, "struct_size comes second");
_Static_assert(sizeof(forsetti_status) == 4, "status codes are int32_t");

/// The ABI version this copy of forsetti.h describes; lets tools ask a built library.
uint32_t forsetti_header_abi_version(void) { return FORSETTI_ABI_VERSION; }
