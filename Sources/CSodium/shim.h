// libsodium: Ed25519 signatures for licences and module binaries.
#ifndef FORSETTI_CSODIUM_SHIM_H
#define FORSETTI_CSODIUM_SHIM_H
#include <sodium.h>
#endif
