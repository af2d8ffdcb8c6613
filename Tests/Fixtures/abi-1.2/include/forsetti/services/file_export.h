/* forsetti/services/file_export.h — files handed out of the host, into the module's own
 * directory `EXPORT/<module ID>/` beneath the directory the operator chose with `--export-dir`
 * (made 0750 by the host). Resolve with FORSETTI_SERVICE_FILE_EXPORT; needs capability
 * `file_export`. On a host started without an export directory every write fails with
 * FORSETTI_ERR_UNAVAILABLE (and the host says so in its log).
 *
 * The module names a file, never a path: only the last path component of `file_name` is used,
 * and an empty name, "." and ".." are refused, as is a name holding control characters (C0, DEL,
 * C1), U+2028/U+2029, bidirectional controls (U+202A–U+202E, U+2066–U+2069) or bytes that are
 * not UTF-8 (FORSETTI_ERR_INVALID_ARGUMENT; the host logs the name escaped). The file is written
 * in the module's directory and nowhere else, so no name reaches another module's files: a
 * symbolic link under the name is replaced by the new file (a write) or refused with
 * FORSETTI_ERR_DENIED (APPEND), as is appending to anything but a regular file with one link.
 * Files are mode 0640, owned by the host's user. In a worker the host writes it. All the
 * module's files together are bounded by the operator's `--export-quota` (256 MiB by default,
 * each file counted in whole 4 KiB blocks): a write beyond fails with FORSETTI_ERR_QUOTA and
 * writes nothing; overwriting with less frees room, as does the operator removing files. */
#ifndef FORSETTI_SERVICES_FILE_EXPORT_H
#define FORSETTI_SERVICES_FILE_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Data of one write at most 64 KiB (append for more; FORSETTI_ERR_TOO_LARGE otherwise);
 * `file_name` may be a path of up to FORSETTI_FILE_EXPORT_MAX_PATH bytes, whose last component
 * is at most 255 bytes (FORSETTI_ERR_INVALID_ARGUMENT otherwise); the final path at most 4096
 * bytes with its NUL. */
#define FORSETTI_FILE_EXPORT_MAX_DATA (64u * 1024u)
#define FORSETTI_FILE_EXPORT_MAX_NAME 255u
#define FORSETTI_FILE_EXPORT_MAX_PATH 4096u

/* Flags for write. 0: create the file or replace it atomically (readers see the old or the new
 * file, never a mix). APPEND: add to the end, creating the file if absent. */
#define FORSETTI_FILE_EXPORT_APPEND 0x1u

typedef struct forsetti_file_export {
  uint32_t struct_size;

  /* Writes `length` bytes to the file named by `file_name`'s last component. On success the
   * file's absolute path is copied, NUL-terminated, into `final_path` (capacity `capacity`;
   * NULL and 0 when not wanted). FORSETTI_ERR_INVALID_ARGUMENT for a refused name or unknown
   * flags; FORSETTI_ERR_BUFFER_TOO_SMALL, with nothing written, when the path does not fit;
   * FORSETTI_ERR_QUOTA, with nothing written, beyond the module's export quota. */
  forsetti_status (*write)(const char *file_name, const void *data, size_t length, uint32_t flags,
                           char *final_path, size_t capacity);
} forsetti_file_export;

#ifdef __cplusplus
}
#endif
#endif
