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

/* Service IDs for forsetti_host.resolve, each with its table in forsetti/services/. */
#define FORSETTI_SERVICE_STORAGE "forsetti.storage"     /* needs capability storage */
#define FORSETTI_SERVICE_TELEMETRY "forsetti.telemetry" /* needs capability telemetry */
#define FORSETTI_SERVICE_EVENTS "forsetti.events"       /* every module */
#define FORSETTI_SERVICE_MESSAGES "forsetti.messages"   /* every module */

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
   * control characters are shown escaped. The host copies it. Thread-safe. */
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
