/* forsetti/host.h — the host table a module receives in start. */
#ifndef FORSETTI_HOST_H
#define FORSETTI_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Log levels for forsetti_host.log. */
#define FORSETTI_LOG_DEBUG 0
#define FORSETTI_LOG_INFO 1
#define FORSETTI_LOG_WARNING 2
#define FORSETTI_LOG_ERROR 3

/* Limits: a log message is at most FORSETTI_LOG_MAX_MESSAGE bytes; service IDs, module IDs,
 * event and message types at most FORSETTI_MAX_NAME bytes. */
#define FORSETTI_LOG_MAX_MESSAGE (16u * 1024u)
#define FORSETTI_MAX_NAME 256u

/* Service IDs for forsetti_host.resolve, each with its table in forsetti/services/.
 *
 * An ID names one table and its meaning for good. A table may grow at its end (check
 * `struct_size` before reading a later field), but a service whose functions must ever change
 * meaning or signature gets a new ID with a version suffix, "forsetti.secure_storage/2", and the
 * host goes on serving the old ID to modules built against it. An ID without a suffix is
 * version 1. The same rule holds for role services and for the method names a provider
 * defines: version a method ("put/2") rather than change what "put" means. */
#define FORSETTI_SERVICE_STORAGE "forsetti.storage"     /* needs capability storage */
#define FORSETTI_SERVICE_TELEMETRY "forsetti.telemetry" /* needs capability telemetry */
#define FORSETTI_SERVICE_EVENTS "forsetti.events"       /* every module */
#define FORSETTI_SERVICE_MESSAGES "forsetti.messages"   /* every module */
/* Capability `networking` has no service: a module granted it opens sockets itself. In a worker
 * it may create AF_INET and AF_INET6 sockets (no raw or packet sockets) and connect, bind,
 * listen and accept on them; without it every socket(2) fails with EPERM. AF_UNIX sockets from
 * socket(2), netlink, packet and raw sockets are refused either way (docs/abi.md). */
/* ABI 1.1: */
#define FORSETTI_SERVICE_SECURE_STORAGE "forsetti.secure_storage" /* needs capability secure_storage */
#define FORSETTI_SERVICE_FILE_EXPORT "forsetti.file_export"       /* needs capability file_export */
#define FORSETTI_SERVICE_CRYPTO "forsetti.crypto_utilities"       /* needs capability crypto_utilities */
#define FORSETTI_SERVICE_DIAGNOSTICS "forsetti.diagnostics"       /* needs capability diagnostics */
/* Role services (forsetti/services/roles.h): "forsetti.role." and the role's name. Each needs
 * the capability of the role's name, and the module must hold the role (to serve it) or
 * consume it (to call it; see roles.h). */
#define FORSETTI_SERVICE_ROLE_SHARED_DATABASE "forsetti.role.shared_database"
#define FORSETTI_SERVICE_ROLE_AUTHENTICATION "forsetti.role.authentication"
#define FORSETTI_SERVICE_ROLE_DIAGNOSTICS "forsetti.role.diagnostics"
#define FORSETTI_SERVICE_ROLE_API "forsetti.role.api"
#define FORSETTI_SERVICE_ROLE_SECURITY "forsetti.role.security"

/* The host, as one module sees it. Every function is bound to that module: there is no
 * module-ID parameter, so a module can only ever act as itself. Valid until stop returns;
 * afterwards calls return FORSETTI_ERR_REVOKED (or do nothing, for void functions). */
typedef struct forsetti_host {
  uint32_t abi_version;   /* the host's FORSETTI_ABI_VERSION */
  uint32_t struct_size;   /* sizeof(forsetti_host) as the host built it */
  const char *module_id;  /* the module's own ID, as the host bound it */
  const char *sandbox_path; /* absolute path of the module's only writable directory */

  /* Writes one line to the host log, stamped by the host with the module ID and level.
   * `message` is UTF-8 of at most 16 KiB (longer or invalid text is replaced by a note);
   * control characters (C0, DEL, C1), U+2028/U+2029 and bidirectional controls are shown
   * escaped. The host copies it. Thread-safe. */
  void (*log)(int32_t level, const char *message);

  /* Looks up a service table by ID (FORSETTI_SERVICE_*; IDs, event and message types are at
   * most 256 bytes everywhere in this ABI). Returns NULL when the service is
   * unknown or the module lacks its capability (the host logs a warning naming both). The
   * returned table is owned by the host and valid until stop returns. Thread-safe. */
  const void *(*resolve)(const char *service_id);
} forsetti_host;

#ifdef __cplusplus
}
#endif
#endif
