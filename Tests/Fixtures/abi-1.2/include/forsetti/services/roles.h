/* forsetti/services/roles.h — modules serving modules through a default role.
 * Resolve with FORSETTI_SERVICE_ROLE_* ("forsetti.role.<role>"); needs the capability of the
 * role's name (shared_database, authentication, diagnostics, api, security).
 *
 * The module holding the role (its manifest's defaultModuleRole) serves it: it installs a
 * handler with `serve`. A module that consumes the role calls it: one that lists it in
 * dataIsolation.requiredDefaultRoles, declares an I/O requirement of the role's kind, or (for
 * shared_database) uses dataIsolation.mode framework_mediated_shared. A call is a method name
 * and request bytes in, a status and response bytes out. The host passes the
 * provider the caller's module ID as the host bound it (a caller cannot choose it), and checks
 * the capability and the declaration on every call. In-process and between two workers alike:
 *  - calls reach the provider one at a time, in no promised order;
 *  - a call to a provider that is stopped, restarting or reloading, or has no handler yet,
 *    fails at once with FORSETTI_ERR_UNAVAILABLE; one cut off by the provider's crash fails
 *    with FORSETTI_ERR_UNAVAILABLE too, and one not answered within
 *    FORSETTI_ROLE_CALL_TIMEOUT_MS, counting the wait behind other calls, with
 *    FORSETTI_ERR_TIMEOUT (an in-process provider runs on the caller's thread: only the wait
 *    for its turn is bounded there);
 *  - a handler may call other host services, but not its own role (FORSETTI_ERR_DENIED), nor a
 *    role already on the path of the call it answers: a cycle (A's handler calls B, whose
 *    handler calls A, or longer) is refused at once with FORSETTI_ERR_CALL_CYCLE, before
 *    anything is sent; a call from a handler gets no more time than the call it answers has left;
 *  - a call holds only its caller's thread: the module's other host calls go on meanwhile.
 * The status the handler returns reaches the caller as it is.
 *
 * Between two workers, the host judges a consumer's first call of the role itself, then gives
 * the two workers a shared-memory channel of that consumer's own, labelled with its module ID,
 * and every call goes on it: no host thread waits on a provider. The checks do not lapse: a
 * running module's grant cannot change (a new grant is a new instance), and the host closes the
 * channel when either module stops, after which the next call is judged again.
 *
 * A provider in a worker that does not answer within FORSETTI_ROLE_CALL_TIMEOUT_MS is probed by
 * the host (a probe that waits for the handler's turn); if the probe is not answered within
 * FORSETTI_ROLE_CALL_TIMEOUT_MS either, the provider is hung: its worker is killed and restarted,
 * counted like a crash. */
#ifndef FORSETTI_SERVICES_ROLES_H
#define FORSETTI_SERVICES_ROLES_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Requests and responses at most 64 KiB; method names 1–256 bytes of UTF-8. */
#define FORSETTI_ROLE_MAX_PAYLOAD (64u * 1024u)
#define FORSETTI_ROLE_CALL_TIMEOUT_MS 10000u

/* Answers one call. `caller_module_id` is the calling module, as the host bound it, or, for a
 * call from the application embedding the host, "application:" and the name the application
 * gave (a module ID never holds a colon); such a call has a module's deadline too. Write at most
 * `capacity` bytes of response into `response` and set `*response_length`; when the answer does
 * not fit, return FORSETTI_ERR_BUFFER_TOO_SMALL with `*response_length` set to what it needs
 * (the caller may retry with more room). Every pointer is borrowed for the call. */
typedef forsetti_status (*forsetti_role_handler)(void *context, const char *caller_module_id,
                                                 const char *method, const void *request,
                                                 size_t request_length, void *response,
                                                 size_t capacity, size_t *response_length);

typedef struct forsetti_role_service {
  uint32_t struct_size;

  /* Calls the role's provider. The response is copied into `response` (capacity `capacity`,
   * at most FORSETTI_ROLE_MAX_PAYLOAD is used) and `*response_length` set. Returns the
   * handler's status, or FORSETTI_ERR_UNAVAILABLE, FORSETTI_ERR_TIMEOUT,
   * FORSETTI_ERR_DENIED (this module holds the role: it serves, it does not call itself),
   * FORSETTI_ERR_CALL_CYCLE (from a handler: the role is on the path of the call it answers). */
  forsetti_status (*call)(const char *method, const void *request, size_t request_length,
                          void *response, size_t capacity, size_t *response_length);

  /* Installs (or, with NULL, removes) the handler that serves this role. Only the module
   * holding the role may: FORSETTI_ERR_DENIED for any other. */
  forsetti_status (*serve)(forsetti_role_handler handler, void *context);
} forsetti_role_service;

#ifdef __cplusplus
}
#endif
#endif
