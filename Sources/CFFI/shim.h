// libffi for the host bridge. The ffi_type globals are exposed through functions because
// Swift cannot take stable pointers to imported C globals.
#ifndef FORSETTI_CFFI_SHIM_H
#define FORSETTI_CFFI_SHIM_H
#include <ffi.h>

static inline ffi_type *forsetti_ffi_void(void) { return &ffi_type_void; }
static inline ffi_type *forsetti_ffi_pointer(void) { return &ffi_type_pointer; }
static inline ffi_type *forsetti_ffi_sint32(void) { return &ffi_type_sint32; }
static inline ffi_type *forsetti_ffi_uint32(void) { return &ffi_type_uint32; }
static inline ffi_type *forsetti_ffi_sint64(void) { return &ffi_type_sint64; }
static inline ffi_type *forsetti_ffi_size(void) { return sizeof(size_t) == 8 ? &ffi_type_uint64 : &ffi_type_uint32; }
#endif
