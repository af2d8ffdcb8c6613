/* forsetti/services/storage.h — key-value storage and files in the module's sandbox.
 * Resolve with FORSETTI_SERVICE_STORAGE; needs capability `storage`. */
#ifndef FORSETTI_SERVICES_STORAGE_H
#define FORSETTI_SERVICES_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits: keys are 1–128 bytes of [A-Za-z0-9._-] and do not start with "."; values at most
 * 1 MiB. */
#define FORSETTI_STORAGE_MAX_KEY 128u
#define FORSETTI_STORAGE_MAX_VALUE (1u << 20)

/* File open flags for open_file (a subset of open(2)). READ and/or WRITE (or APPEND) must be
 * given; CREATE and TRUNCATE need write access; unknown bits are FORSETTI_ERR_INVALID_ARGUMENT. */
#define FORSETTI_OPEN_READ 0x1u
#define FORSETTI_OPEN_WRITE 0x2u
#define FORSETTI_OPEN_CREATE 0x4u
#define FORSETTI_OPEN_TRUNCATE 0x8u
#define FORSETTI_OPEN_APPEND 0x10u

typedef struct forsetti_storage {
  uint32_t struct_size;

  /* Stores `length` bytes under `key`, replacing any value; written atomically (a crash leaves
   * the old or the new value, never a mix). The host copies the bytes. FORSETTI_ERR_QUOTA, with
   * the old value kept, when the sandbox is at its quota (`--sandbox-quota`) or the disk full. */
  forsetti_status (*set)(const char *key, const void *value, size_t length);

  /* Copies the value of `key` into `buffer` (capacity `capacity`) and sets `*length` to its
   * size. FORSETTI_ERR_NOT_FOUND when absent; FORSETTI_ERR_BUFFER_TOO_SMALL with `*length` set
   * to the needed size when `capacity` is too small (call again with a larger buffer). */
  forsetti_status (*get)(const char *key, void *buffer, size_t capacity, size_t *length);

  /* Removes `key`; FORSETTI_ERR_NOT_FOUND when absent. */
  forsetti_status (*remove)(const char *key);

  /* Opens `relative_path` beneath the sandbox and returns a file descriptor (>= 0) that the
   * caller owns and must close(2), or a negative status. Absolute paths, `..` that leaves the
   * sandbox, and symbolic links pointing outside it are refused with FORSETTI_ERR_DENIED.
   * Intermediate directories are not created; see make_directory. */
  int32_t (*open_file)(const char *relative_path, uint32_t flags);

  /* Creates a directory beneath the sandbox (parents must exist); FORSETTI_OK if it exists as a
   * directory, FORSETTI_ERR_INVALID_ARGUMENT if a file of that name is in the way. */
  forsetti_status (*make_directory)(const char *relative_path);
} forsetti_storage;

#ifdef __cplusplus
}
#endif
#endif
