/* forsetti/services/diagnostics.h — a module's own account of its health.
 * Resolve with FORSETTI_SERVICE_DIAGNOSTICS; needs capability `diagnostics`.
 *
 * What a module reports is shown by `forsetti-host list`, `explain` and the debug page, marked
 * as the module's own words: it is the module's claim, not the host's finding. The host keeps
 * the latest report and counters of each running module and drops them when it stops. */
#ifndef FORSETTI_SERVICES_DIAGNOSTICS_H
#define FORSETTI_SERVICES_DIAGNOSTICS_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FORSETTI_HEALTH_OK 0
#define FORSETTI_HEALTH_DEGRADED 1
#define FORSETTI_HEALTH_FAILING 2

/* Summaries at most 256 bytes of UTF-8; counter names 1–64 bytes of [A-Za-z0-9._-]; at most 32
 * counters per module. */
#define FORSETTI_DIAGNOSTICS_MAX_SUMMARY 256u
#define FORSETTI_DIAGNOSTICS_MAX_COUNTER_NAME 64u
#define FORSETTI_DIAGNOSTICS_MAX_COUNTERS 32u

typedef struct forsetti_diagnostics {
  uint32_t struct_size;

  /* Sets this module's health (FORSETTI_HEALTH_*) and a one-line summary (NULL or empty for
   * none). FORSETTI_ERR_INVALID_ARGUMENT for an unknown health or a summary that is not UTF-8;
   * FORSETTI_ERR_TOO_LARGE for one over FORSETTI_DIAGNOSTICS_MAX_SUMMARY. */
  forsetti_status (*report)(int32_t health, const char *summary);

  /* Sets counter `name` to `value`; FORSETTI_ERR_INVALID_ARGUMENT for a name outside the set,
   * FORSETTI_ERR_TOO_LARGE for a 33rd counter (updating an existing one never fails for it). */
  forsetti_status (*set_counter)(const char *name, int64_t value);
} forsetti_diagnostics;

#ifdef __cplusplus
}
#endif
#endif
