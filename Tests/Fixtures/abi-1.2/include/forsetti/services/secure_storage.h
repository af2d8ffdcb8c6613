/* forsetti/services/secure_storage.h — secrets kept encrypted at rest.
 * Resolve with FORSETTI_SERVICE_SECURE_STORAGE; needs capability `secure_storage`.
 *
 * Values are sealed (XChaCha20-Poly1305, libsodium) with a key of this module's that the host
 * holds outside every sandbox; the module never sees the key, and no value is ever written in
 * plain text to disk or to any log. A sealed value is bound to its module and key: one copied
 * from another module's store, or altered, reads as FORSETTI_ERR_INVALID_DATA. In a worker
 * every call crosses to the host, which does the sealing. */
#ifndef FORSETTI_SERVICES_SECURE_STORAGE_H
#define FORSETTI_SERVICES_SECURE_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keys as for forsetti_storage (1–128 bytes of [A-Za-z0-9._-], not starting with "."); values
 * at most 64 KiB. All of a module's values together are bounded by the operator's
 * `--storage-quota` (16 MiB by default; each value counted as its sealed file, 44 bytes more
 * than the value, in whole 4 KiB blocks). */
#define FORSETTI_SECURE_STORAGE_MAX_KEY 128u
#define FORSETTI_SECURE_STORAGE_MAX_VALUE (64u * 1024u)

typedef struct forsetti_secure_storage {
  uint32_t struct_size;

  /* Seals `length` bytes and stores them under `key`, replacing any value, atomically.
   * FORSETTI_ERR_QUOTA, with nothing stored, when it would take the module beyond its quota
   * (replacing a value with one no larger always fits; removing one frees room). */
  forsetti_status (*set)(const char *key, const void *value, size_t length);

  /* Opens the value of `key` into `buffer`, as forsetti_storage.get does (NOT_FOUND,
   * BUFFER_TOO_SMALL with `*length` set); FORSETTI_ERR_INVALID_DATA when the stored value
   * does not authenticate. */
  forsetti_status (*get)(const char *key, void *buffer, size_t capacity, size_t *length);

  /* Removes `key`; FORSETTI_ERR_NOT_FOUND when absent. */
  forsetti_status (*remove)(const char *key);
} forsetti_secure_storage;

#ifdef __cplusplus
}
#endif
#endif
