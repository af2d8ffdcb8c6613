/* forsetti/services/application.h — services the embedding application offers modules (ABI 1.2).
 *
 * An application that embeds the host may offer modules services of its own, each under an ID
 * it chose and behind one capability. A module resolves one with `host->resolve(id)` like a
 * host service. The ID rule: lowercase reverse-DNS of at least three labels (each of a–z, 0–9
 * and '-', starting with a letter or digit), the last being `v` and the major version, e.g.
 * "com.example.weather.v1"; never starting "forsetti."; at most 128 bytes
 * (FORSETTI_APPLICATION_SERVICE_MAX_ID). A new major is a new ID: "com.example.weather.v2".
 *
 * `resolve` returns NULL when the application offers no service of that ID, or the module was
 * not granted the service's capability (the host logs a warning naming which). In-process and
 * in a worker alike:
 *  - every call is checked again by the host (capability, limits), with the module as the host
 *    bound it: the application is told the caller's module ID, which the module cannot choose;
 *  - a request is at most FORSETTI_ROLE_MAX_PAYLOAD bytes (FORSETTI_ERR_TOO_LARGE), a method
 *    1–256 bytes of UTF-8 (FORSETTI_ERR_INVALID_ARGUMENT);
 *  - the application's handler runs on a host thread, and may take as long as it takes: no
 *    deadline is imposed on the application, which is trusted.
 * The status the application's handler returns reaches the caller as it is. */
#ifndef FORSETTI_SERVICES_APPLICATION_H
#define FORSETTI_SERVICES_APPLICATION_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest application service ID, in bytes. */
#define FORSETTI_APPLICATION_SERVICE_MAX_ID 128u

typedef struct forsetti_application_service {
  uint32_t struct_size;

  /* Calls the application's service: `method` (1–256 bytes) with `request` (at most
   * FORSETTI_ROLE_MAX_PAYLOAD bytes). The response is copied into `response` (capacity
   * `capacity`, at most FORSETTI_ROLE_MAX_PAYLOAD is used) and `*response_length` set. When it
   * does not fit, returns FORSETTI_ERR_BUFFER_TOO_SMALL with `*response_length` set to what it
   * needs (retry with more room). Returns the application's status, or FORSETTI_ERR_DENIED (the
   * capability was not granted), FORSETTI_ERR_TOO_LARGE, FORSETTI_ERR_INVALID_ARGUMENT,
   * FORSETTI_ERR_REVOKED. Every pointer is borrowed for the call. Thread-safe. */
  forsetti_status (*call)(const char *method, const void *request, size_t request_length,
                          void *response, size_t capacity, size_t *response_length);
} forsetti_application_service;

#ifdef __cplusplus
}
#endif
#endif
