/* forsetti/services/telemetry.h — recorded events for diagnostics and analytics.
 * Resolve with FORSETTI_SERVICE_TELEMETRY; needs capability `telemetry`. */
#ifndef FORSETTI_SERVICES_TELEMETRY_H
#define FORSETTI_SERVICES_TELEMETRY_H

#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits: event names 1–FORSETTI_TELEMETRY_MAX_NAME bytes; attributes JSON at most
 * FORSETTI_TELEMETRY_MAX_ATTRIBUTES bytes. */
#define FORSETTI_TELEMETRY_MAX_NAME 128u
#define FORSETTI_TELEMETRY_MAX_ATTRIBUTES (64u * 1024u)

typedef struct forsetti_telemetry {
  uint32_t struct_size;

  /* Records an event named `name` (1–128 bytes) with `attributes_json`, a JSON object or NULL.
   * The host stamps module ID and time and appends one JSON line to its telemetry log.
   * FORSETTI_ERR_INVALID_ARGUMENT when attributes_json is not a JSON object. */
  forsetti_status (*record)(const char *name, const char *attributes_json);
} forsetti_telemetry;

#ifdef __cplusplus
}
#endif
#endif
