/* forsetti/services/crypto.h — cryptographic utilities with keys scoped to this module.
 * Resolve with FORSETTI_SERVICE_CRYPTO; needs capability `crypto_utilities`.
 *
 * Built on libsodium. The module's keys (a secret key for sealing, an Ed25519 key pair for
 * signing) are made by the host the first time they are needed and held by it, outside every
 * sandbox; the module never sees a secret key. What one module seals, another cannot open; what
 * it signs, anyone can verify with its public key. Inputs at most 64 KiB each; for seal,
 * `length + extra_length` at most 64 KiB, and for open at most 64 KiB +
 * FORSETTI_CRYPTO_SEAL_OVERHEAD (FORSETTI_ERR_TOO_LARGE otherwise): in a worker, the whole call
 * crosses to the host in one frame. */
#ifndef FORSETTI_SERVICES_CRYPTO_H
#define FORSETTI_SERVICES_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FORSETTI_CRYPTO_MAX_INPUT (64u * 1024u)
/* BLAKE2b digests (crypto_generichash) of 16 to 64 bytes; 32 is the usual choice. */
#define FORSETTI_CRYPTO_HASH_MIN 16u
#define FORSETTI_CRYPTO_HASH_MAX 64u
/* What seal adds to the plain text: a 24-byte random nonce and a 16-byte tag
 * (XChaCha20-Poly1305-IETF). */
#define FORSETTI_CRYPTO_SEAL_OVERHEAD 40u
/* Ed25519. */
#define FORSETTI_CRYPTO_SIGNATURE_BYTES 64u
#define FORSETTI_CRYPTO_PUBLIC_KEY_BYTES 32u

typedef struct forsetti_crypto {
  uint32_t struct_size;

  /* Fills `buffer` with `length` (at most 64 KiB) unpredictable bytes. */
  forsetti_status (*random_bytes)(void *buffer, size_t length);

  /* Writes the `digest_length`-byte BLAKE2b digest of `data` (unkeyed) into `digest`. */
  forsetti_status (*hash)(const void *data, size_t length, void *digest, size_t digest_length);

  /* Encrypts and authenticates `plain` (and authenticates `extra`, which is not encrypted; may
   * be NULL/0) with this module's key. Writes `length + FORSETTI_CRYPTO_SEAL_OVERHEAD` bytes
   * into `out` and sets `*out_length` (BUFFER_TOO_SMALL, with `*out_length` set, otherwise). */
  forsetti_status (*seal)(const void *plain, size_t length, const void *extra, size_t extra_length,
                          void *out, size_t capacity, size_t *out_length);

  /* Reverses seal: FORSETTI_ERR_INVALID_DATA when `sealed` or `extra` was altered, or was
   * sealed by another module. */
  forsetti_status (*open)(const void *sealed, size_t length, const void *extra, size_t extra_length,
                          void *out, size_t capacity, size_t *out_length);

  /* Signs `message` with this module's Ed25519 key. */
  forsetti_status (*sign)(const void *message, size_t length, void *signature /* 64 bytes */);

  /* Checks `signature` over `message` against `public_key` (any module's, or anyone's):
   * FORSETTI_OK when it verifies, FORSETTI_ERR_INVALID_DATA when it does not. */
  forsetti_status (*verify)(const void *message, size_t length, const void *signature /* 64 */,
                            const void *public_key /* 32 */);

  /* Copies this module's Ed25519 public key (32 bytes). */
  forsetti_status (*public_key)(void *public_key /* 32 bytes */);
} forsetti_crypto;

#ifdef __cplusplus
}
#endif
#endif
