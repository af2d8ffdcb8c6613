/* forsetti/status.h — status codes returned by host and module functions. */
#ifndef FORSETTI_STATUS_H
#define FORSETTI_STATUS_H

#include <stdint.h>

typedef int32_t forsetti_status;

#define FORSETTI_OK 0
/* An argument is NULL, not UTF-8, empty where it must not be, or otherwise malformed. */
#define FORSETTI_ERR_INVALID_ARGUMENT (-1)
/* The module was not granted what this call needs (capability, declaration, path). */
#define FORSETTI_ERR_DENIED (-2)
/* The module has been stopped: its host functions no longer act. */
#define FORSETTI_ERR_REVOKED (-3)
/* The key, file, module or subscription does not exist. */
#define FORSETTI_ERR_NOT_FOUND (-4)
/* The operating system refused or failed the operation (see the log for errno). */
#define FORSETTI_ERR_IO (-5)
/* The value exceeds a host limit (key length, value size, payload size). */
#define FORSETTI_ERR_TOO_LARGE (-6)
/* The caller's buffer is smaller than the value; the needed size is reported. */
#define FORSETTI_ERR_BUFFER_TOO_SMALL (-7)
/* A message or event was refused: empty type, reserved prefix, or sent to oneself. */
#define FORSETTI_ERR_COMMUNICATION_DENIED (-8)
/* The module failed to start; returned by a module's `start`. Any negative value works too. */
#define FORSETTI_ERR_START_FAILED (-9)
/* Nothing serves the call now: a role's provider is stopped, restarting or reloading, or has
 * not installed its handler yet. Nothing was done; the call may succeed later. */
#define FORSETTI_ERR_UNAVAILABLE (-10)
/* The call was not answered in time (a role provider that took longer than
 * FORSETTI_ROLE_CALL_TIMEOUT_MS). Whether the provider acted on it is unknown. */
#define FORSETTI_ERR_TIMEOUT (-11)
/* Data failed its check: sealed bytes that do not authenticate, a signature that does not
 * verify, a stored secret that was tampered with. */
#define FORSETTI_ERR_INVALID_DATA (-12)
/* A role call that would close a cycle: the role called is already on the path of the call
 * being answered (A's handler calls B, whose handler calls A). Refused before anything was
 * sent; nothing was done. */
#define FORSETTI_ERR_CALL_CYCLE (-13)
/* The write would take the module beyond a quota the operator set (secure storage:
 * --storage-quota; file export: --export-quota). Nothing was written; removing or overwriting
 * the module's own values or files frees room. */
#define FORSETTI_ERR_QUOTA (-14)
/* The provider's queue for this caller is full (ABI 1.3): FORSETTI_ROLE_QUEUE_DEPTH calls of
 * this caller already wait beyond those it runs. Answered at once; nothing was sent or done;
 * try again later (after a pause), or make fewer calls at once. */
#define FORSETTI_ERR_BUSY (-15)

#endif
