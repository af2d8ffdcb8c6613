/*
 * forsetti.h — the Forsetti module ABI. The only header a module compiles against.
 *
 * A module is a shared object exporting one C function whose name is the manifest's
 * `entryPoint` (see forsetti/entry.h). The host calls it after every gate has passed, reads the
 * returned module table, then calls `start` with a host table (forsetti/host.h) whose functions
 * are bound to this module alone. Services are looked up by string ID with `host->resolve`
 * and are NULL when the module was not granted the capability (forsetti/services/).
 *
 * Rules that hold everywhere:
 *  - Every table starts with `abi_version` (or `struct_size`) and `struct_size`; tables only grow
 *    at the end. Check `struct_size` before reading a field added in a later minor version.
 *  - Strings are NUL-terminated UTF-8. Buffers are (const void *, size_t). Status codes are
 *    int32_t, 0 for success, negative FORSETTI_ERR_* values (forsetti/status.h).
 *  - Unless a function says otherwise, pointers passed into the host are borrowed for the
 *    duration of the call only, and pointers the host returns stay valid until `stop` returns.
 *  - Host functions may be called from any thread. After `stop` returns they keep working as
 *    functions but do nothing and return FORSETTI_ERR_REVOKED.
 */
#ifndef FORSETTI_H
#define FORSETTI_H

#include "forsetti/version.h"
#include "forsetti/status.h"
#include "forsetti/entry.h"
#include "forsetti/host.h"
#include "forsetti/services/log.h"
#include "forsetti/services/storage.h"
#include "forsetti/services/telemetry.h"
#include "forsetti/services/events.h"
#include "forsetti/services/messages.h"
#include "forsetti/services/secure_storage.h"
#include "forsetti/services/file_export.h"
#include "forsetti/services/crypto.h"
#include "forsetti/services/diagnostics.h"
#include "forsetti/services/roles.h"
#include "forsetti/services/application.h"
#include "forsetti/ui.h"

#endif /* FORSETTI_H */
