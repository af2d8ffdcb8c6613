/* forsetti/services/events.h — the host event bus. Resolve with FORSETTI_SERVICE_EVENTS. */
#ifndef FORSETTI_SERVICES_EVENTS_H
#define FORSETTI_SERVICES_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits: payloads at most FORSETTI_EVENT_MAX_PAYLOAD bytes; at most
 * FORSETTI_EVENT_MAX_SUBSCRIPTIONS subscriptions per module. */
#define FORSETTI_EVENT_MAX_PAYLOAD (64u * 1024u)
#define FORSETTI_EVENT_MAX_SUBSCRIPTIONS 256u

/* Delivered for each matching event. `source_module_id` is set by the host (never by the
 * publisher); all pointers are borrowed for the call. For a module in the host process it is
 * called on the publisher's thread, synchronously inside its publish call; for a module in an
 * isolated worker it is called on the worker's delivery thread, after publish has returned.
 * Keep it short and do not block. Deliveries nest at most 16 deep (a handler that publishes,
 * whose handler publishes …); deeper publishes fail with FORSETTI_ERR_COMMUNICATION_DENIED. */
typedef void (*forsetti_event_handler)(void *context, const char *source_module_id, const char *event_type,
                                       const void *payload, size_t length);

typedef struct forsetti_events {
  uint32_t struct_size;

  /* Publishes an event as this module to every subscriber of `event_type` (including this
   * module, if subscribed). Types are non-empty UTF-8; the `forsetti.internal.` prefix is the
   * host's (FORSETTI_ERR_COMMUNICATION_DENIED). Payloads at most 64 KiB. */
  forsetti_status (*publish)(const char *event_type, const void *payload, size_t length);

  /* Subscribes `handler` to `event_type` ("*" for all). Returns a subscription ID (> 0) or a
   * negative status (FORSETTI_ERR_TOO_LARGE beyond 256 subscriptions). Subscriptions end by
   * unsubscribe or when the module stops. */
  int64_t (*subscribe)(const char *event_type, forsetti_event_handler handler, void *context);

  /* Ends a subscription this module made; FORSETTI_ERR_NOT_FOUND for any other ID. */
  forsetti_status (*unsubscribe)(int64_t subscription_id);
} forsetti_events;

#ifdef __cplusplus
}
#endif
#endif
