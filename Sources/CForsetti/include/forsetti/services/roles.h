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
 *  - a provider runs as many calls at once as it declared (`serve_concurrently`; `serve`
 *    declares 1, so a module written for ABI 1.0-1.2 sees one call at a time, as before);
 *  - calls wait for a free handler in one queue per caller (module, or the application), served
 *    in turn across callers: one caller's many or slow calls delay another's by at most one call
 *    per handler. A caller with FORSETTI_ROLE_QUEUE_DEPTH calls waiting already is answered
 *    FORSETTI_ERR_BUSY at once (nothing sent);
 *  - every call has a deadline, FORSETTI_ROLE_CALL_TIMEOUT_MS from its start (or sooner:
 *    `call_within`, or the time left of the call a handler answers). A call still queued at its
 *    deadline is answered FORSETTI_ERR_TIMEOUT without running; a handler reads the time left of
 *    the call it serves with `time_left_ns`;
 *  - a call to a provider that is stopped, restarting or reloading, or has no handler yet,
 *    fails at once with FORSETTI_ERR_UNAVAILABLE; one cut off by the provider's crash fails
 *    with FORSETTI_ERR_UNAVAILABLE too (an in-process provider runs on the caller's thread:
 *    only the wait for its turn is bounded there);
 *  - a handler may call other host services, but not its own role (FORSETTI_ERR_DENIED). A call
 *    that would close a cycle of waiting modules is refused at once with
 *    FORSETTI_ERR_CALL_CYCLE, nothing run: a role already on the path of the call a handler
 *    answers (A's handler calls B, whose handler calls A), or, whatever thread calls, a provider
 *    with no free handler that waits, through providers with none free either, on the caller;
 *  - a call holds only its caller's thread: the module's other host calls go on meanwhile.
 * The status the handler returns reaches the caller as it is.
 *
 * Between two workers, the host judges a consumer's first call of the role itself, then gives
 * the two workers a shared-memory channel of that consumer's own, labelled with its module ID,
 * and every call goes on it: no host thread waits on a provider. The checks do not lapse: a
 * running module's grant cannot change (a new grant is a new instance), and the host closes the
 * channel when either module stops, after which the next call is judged again.
 *
 * Hung is judged by progress: a provider whose handler stays in one call longer than that
 * call's deadline plus FORSETTI_ROLE_HUNG_GRACE_MS is hung: its worker is killed and restarted,
 * counted like a crash, and the log says which call it was stuck in and for how long. A provider
 * that answers, however slowly, is never killed: its callers get FORSETTI_ERR_BUSY or
 * FORSETTI_ERR_TIMEOUT. */
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
/* Calls one caller may have waiting for a provider's handler, beyond those running (ABI 1.3). */
#define FORSETTI_ROLE_QUEUE_DEPTH 4u
/* The most calls a provider may declare it runs at once (`serve_concurrently`, ABI 1.3). */
#define FORSETTI_ROLE_MAX_CONCURRENCY 16u
/* How long past a call's deadline a handler may stay in it before its provider is hung (ABI 1.3). */
#define FORSETTI_ROLE_HUNG_GRACE_MS 5000u

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

  /* ABI 1.3 (check struct_size). As `serve`, with the number of calls the handler runs at once,
   * 1 to FORSETTI_ROLE_MAX_CONCURRENCY (FORSETTI_ERR_INVALID_ARGUMENT otherwise): the handler
   * must then be safe to run on that many threads together. */
  forsetti_status (*serve_concurrently)(forsetti_role_handler handler, void *context,
                                        uint32_t concurrency);

  /* ABI 1.3. As `call`, with the caller's own deadline: `timeout_ms` from now (0, or more than
   * FORSETTI_ROLE_CALL_TIMEOUT_MS, means FORSETTI_ROLE_CALL_TIMEOUT_MS), never more than the
   * call a handler answers has left. FORSETTI_ERR_TIMEOUT once it passes. */
  forsetti_status (*call_within)(uint32_t timeout_ms, const char *method, const void *request,
                                 size_t request_length, void *response, size_t capacity,
                                 size_t *response_length);

  /* ABI 1.3. From a handler: nanoseconds left before the deadline of the call it serves (its
   * caller stops waiting then); 0 when that has passed, or on a thread serving no call. */
  uint64_t (*time_left_ns)(void);
} forsetti_role_service;

#ifdef __cplusplus
}
#endif
#endif
