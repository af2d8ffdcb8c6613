/* forsetti/services/messages.h — direct messages between modules.
 * Resolve with FORSETTI_SERVICE_MESSAGES. */
#ifndef FORSETTI_SERVICES_MESSAGES_H
#define FORSETTI_SERVICES_MESSAGES_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits: payloads at most FORSETTI_MESSAGE_MAX_PAYLOAD bytes. */
#define FORSETTI_MESSAGE_MAX_PAYLOAD (64u * 1024u)

/* Receives messages addressed to this module. `sender_module_id` is the sending module as
 * bound by the host. Pointers are borrowed for the call. Called on the sender's thread (or, in
 * an isolated worker, on the worker's delivery thread), as for events. */
typedef void (*forsetti_message_handler)(void *context, const char *sender_module_id, const char *message_type,
                                         const void *payload, size_t length);

typedef struct forsetti_messages {
  uint32_t struct_size;

  /* Sends a message from this module to `target_module_id`. The sender is always this
   * module. FORSETTI_ERR_COMMUNICATION_DENIED for an empty target or type, a message to
   * oneself, or the reserved `forsetti.internal.` prefix; FORSETTI_ERR_NOT_FOUND when the
   * target is not running or has no handler. Payloads at most 64 KiB. */
  forsetti_status (*send)(const char *target_module_id, const char *message_type, const void *payload,
                          size_t length);

  /* Installs (or, with NULL, removes) this module's message handler. */
  forsetti_status (*set_handler)(forsetti_message_handler handler, void *context);
} forsetti_messages;

#ifdef __cplusplus
}
#endif
#endif
