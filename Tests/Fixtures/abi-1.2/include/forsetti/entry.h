/* forsetti/entry.h — the entry point and the module table. */
#ifndef FORSETTI_ENTRY_H
#define FORSETTI_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "forsetti/status.h"
#include "forsetti/version.h"

#ifdef __cplusplus
extern "C" {
#endif

struct forsetti_host;
struct forsetti_ui_contributions;

/* Who the module says it is. Must agree with its manifest (moduleID, moduleType,
 * moduleVersion), or the host refuses it with moduleIdentityMismatch and never calls start. */
typedef struct forsetti_module_descriptor {
  uint32_t struct_size;       /* sizeof(forsetti_module_descriptor) */
  const char *module_id;      /* e.g. "com.vendor.counter" */
  const char *module_type;    /* "service", "ui" or "app" */
  uint32_t version_major;
  uint32_t version_minor;
  uint32_t version_patch;
  const char *version_prerelease; /* NULL for a release */
} forsetti_module_descriptor;

/* Receives the bytes of a saved state (hot reload). The writer copies them before returning. */
typedef forsetti_status (*forsetti_state_writer)(void *writer_context, const void *bytes, size_t length);

/* The module table returned by the entry point. It and everything it points to must stay valid
 * until the host calls `stop` and `stop` returns; a static const table is the usual choice. */
typedef struct forsetti_module {
  uint32_t abi_version;  /* FORSETTI_ABI_VERSION the module was built against */
  uint32_t struct_size;  /* sizeof(forsetti_module) */
  const forsetti_module_descriptor *descriptor;
  void *self;            /* passed back to every function below; the host never reads it */

  /* Called once, on the host's main thread, after every gate has passed. `host` stays valid
   * until stop returns. Return FORSETTI_OK, or a negative status to refuse to start (the host
   * records startFailed and does not call stop). Must return promptly. */
  forsetti_status (*start)(void *self, const struct forsetti_host *host);

  /* Called once, on the host's main thread, after a successful start. Before it is called the
   * module is taken off the event bus and message router and deliveries in flight to it have
   * finished, so no handler of the module runs while or after it stops. Host functions still
   * work during stop (log what you like) and are revoked as soon as it returns. */
  void (*stop)(void *self);

  /* Optional (may be NULL): the UI the module contributes, judged against its manifest and
   * capabilities before start. Called once, before start. */
  const struct forsetti_ui_contributions *(*ui_contributions)(void *self);

  /* Optional (may be NULL): hot reload, reserved for `forsetti-host dev` (not called by `run`).
   * `save_state` is called on the old instance before its stop; it hands its state to `write`
   * (at most once). `restore_state` is called on the new instance after its start with those
   * bytes (borrowed for the call). */
  forsetti_status (*save_state)(void *self, forsetti_state_writer write, void *writer_context);
  forsetti_status (*restore_state)(void *self, const void *bytes, size_t length);
} forsetti_module;

/* The entry point: export one function of this type under the manifest's `entryPoint` name.
 * `host_abi_version` is the host's FORSETTI_ABI_VERSION. Return the module table, or NULL to
 * refuse (e.g. an incompatible host); the host records loadFailed. Do no work here beyond
 * returning the table: start is where work begins. */
typedef const forsetti_module *(*forsetti_entry_fn)(uint32_t host_abi_version);

#ifdef __cplusplus
}
#endif
#endif
