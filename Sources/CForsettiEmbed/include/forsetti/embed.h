/* forsetti/embed.h — the Forsetti host inside an application (libforsetti-embed).
 *
 *   cc app.c $(pkg-config --cflags --libs forsetti-embed)
 *
 * An application configures a host (forsetti_embed_config), makes it (forsetti_embed_host),
 * starts it, and runs it: for a while or until asked to stop (forsetti_embed_host_run), or from
 * its own loop (forsetti_embed_host_next_due, forsetti_embed_host_process). It supplies its own
 * entitlement and capability-policy callbacks and its own services, which modules resolve by ID
 * behind a capability like the host's; it calls a module's default role and gets the bytes
 * back, and hears of every module's change of state.
 *
 * Conventions, as in wasmtime.h:
 *  - Handles are opaque and owned: each `*_new` hands the caller one it must `*_delete`.
 *  - A function that can fail returns `forsetti_embed_error *`: NULL on success, else an error
 *    the caller owns and frees with forsetti_embed_error_delete. Out-parameters are written on
 *    success only. Every argument is checked: NULL, text that is not UTF-8, an unknown
 *    capability or role name, a value out of range come back as an error, never a crash.
 *  - Strings passed in are borrowed for the call (copied when kept). Strings passed to a
 *    callback are borrowed for the callback.
 *  - Thread rules are written per function. "The host's thread" is whichever thread calls
 *    start, run, process, stop and delete for a host; one thread at a time may do so.
 *
 * A `void *context` given with a callback is passed back as it is and must stay valid until
 * the host made from the configuration is deleted (or the configuration, if no host is made).
 * A callback may call forsetti_embed_host_request_stop, but no other function of its host: it
 * runs inside one (start, run, process, stop) and would re-enter it. */
#ifndef FORSETTI_EMBED_H
#define FORSETTI_EMBED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forsetti/services/roles.h"
#include "forsetti/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---------------------------------------------------------------------------- */

typedef struct forsetti_embed_error forsetti_embed_error;

/* Reason codes of an error (forsetti_embed_error_code). */
#define FORSETTI_EMBED_ERROR_NULL_ARGUMENT 1  /* a required pointer was NULL */
#define FORSETTI_EMBED_ERROR_INVALID_UTF8 2   /* a string is not UTF-8 */
#define FORSETTI_EMBED_ERROR_INVALID_VALUE 3  /* unknown capability or role, bad service ID, empty
                                                 path or method, number out of range */
#define FORSETTI_EMBED_ERROR_MISSING_SETTING 4 /* host_new: no manifests, plugins or state dir */
#define FORSETTI_EMBED_ERROR_WRONG_STATE 5    /* e.g. start twice, call before start */
#define FORSETTI_EMBED_ERROR_HOST 6           /* the host refused (configuration, judging, start) */

/* The reason code (FORSETTI_EMBED_ERROR_*); 0 for NULL. Any thread. */
int32_t forsetti_embed_error_code(const forsetti_embed_error *error);
/* One line saying what went wrong and with which value, UTF-8; "" for NULL. Borrowed: valid
 * until the error is deleted. Any thread. */
const char *forsetti_embed_error_message(const forsetti_embed_error *error);
/* Frees an error; NULL is ignored. Any thread. */
void forsetti_embed_error_delete(forsetti_embed_error *error);

/* ---- configuration --------------------------------------------------------------------- */

typedef struct forsetti_embed_config forsetti_embed_config;

/* Whether the product `product_id` of module `module_id` is unlocked (beside licences). */
typedef bool (*forsetti_embed_entitlement_callback)(void *context, const char *product_id,
                                                    const char *module_id);
/* Whether module `module_id` may be granted `capability` (a manifest's name: "storage"). */
typedef bool (*forsetti_embed_policy_callback)(void *context, const char *module_id,
                                               const char *capability);

/* A new configuration: modules in workers (the worker found beside the library), nothing
 * approved, no entitlement or policy callback (every capability allowed), no services, logs
 * dropped. The caller owns it. Any thread. */
forsetti_embed_config *forsetti_embed_config_new(void);
/* Frees a configuration; NULL is ignored. Hosts made from it keep what they took. */
void forsetti_embed_config_delete(forsetti_embed_config *config);

/* The setters below change only `config`; use one configuration from one thread at a time. */

/* Where the manifests are (scanned recursively). Required. */
forsetti_embed_error *forsetti_embed_config_set_manifests_dir(forsetti_embed_config *config,
                                                              const char *path);
/* Adds a directory of module binaries. At least one is required. */
forsetti_embed_error *forsetti_embed_config_add_plugins_dir(forsetti_embed_config *config,
                                                            const char *path);
/* The host's state directory (approvals, sandboxes, logs); made if missing. Required. One host
 * runs per state directory. */
forsetti_embed_error *forsetti_embed_config_set_state_dir(forsetti_embed_config *config,
                                                          const char *path);
/* true: modules run in the application's process (fast; a crashing module takes it down).
 * false (the default): each module in its own confined forsetti-worker process. */
forsetti_embed_error *forsetti_embed_config_set_in_process(forsetti_embed_config *config,
                                                           bool in_process);
/* The forsetti-worker executable; NULL (the default): the one installed with the library,
 * PREFIX/libexec/forsetti/forsetti-worker for PREFIX/lib/libforsetti-embed.so, else the one
 * beside the library (a build directory). */
forsetti_embed_error *forsetti_embed_config_set_worker(forsetti_embed_config *config,
                                                       const char *path);
/* true: every requested capability counts as approved (development, CI). Default false: only
 * what STATE/approvals.json approves. */
forsetti_embed_error *forsetti_embed_config_set_approve_all(forsetti_embed_config *config,
                                                            bool approve_all);
/* Sets a host setting by its name in host.conf (and `forsetti-host run`'s option of that name),
 * from text in the same units: "memory-limit" "256" (MiB), "start-timeout" "2.5" (seconds),
 * "max-restarts", "cpu-weight" "com.acme.x=300" (repeatable: each call adds), "worker-env",
 * "log-rate", "storage-quota", "sandbox-quota", "metrics" "127.0.0.1:9464", "application-id"
 * "com.acme.editor" (a module calling the application's services sees the caller
 * application:com.acme.editor; default "application"), and the rest `forsetti-host run --help`
 * lists. A value out of range, an unknown key or a malformed value is refused here with
 * FORSETTI_EMBED_ERROR_INVALID_VALUE, the message naming the key and the configuration's field
 * ("memory-limit '99999999': isolation.limits.memoryBytes: at most 16777216 MiB (16 TiB)"), as
 * the command line refuses it. */
forsetti_embed_error *forsetti_embed_config_set(forsetti_embed_config *config, const char *key,
                                                const char *value);
/* true: the host's log (its own lines and every module's) goes to standard error. */
forsetti_embed_error *forsetti_embed_config_set_log_to_stderr(forsetti_embed_config *config,
                                                              bool log);
/* The application's entitlement source, asked beside licences whenever the host judges; NULL
 * removes it. Called on a host thread (not necessarily the application's), never two calls at
 * once for one host. */
forsetti_embed_error *forsetti_embed_config_set_entitlement_callback(
    forsetti_embed_config *config, forsetti_embed_entitlement_callback callback, void *context);
/* The capability policy: a capability the callback refuses is not granted; NULL allows all.
 * Threads as for the entitlement callback. */
forsetti_embed_error *forsetti_embed_config_set_policy_callback(
    forsetti_embed_config *config, forsetti_embed_policy_callback callback, void *context);
/* Offers modules the service `service_id` (versioned reverse DNS: "com.example.weather.v1")
 * behind `capability` (a manifest's capability name, e.g. "api"). `handler` answers each call
 * as a role handler does (forsetti/services/roles.h: the caller's module ID as the host bound
 * it, the method, the request; it writes at most `capacity` bytes and returns a status that
 * reaches the module as it is). Called on a host thread, one call at a time per service. */
forsetti_embed_error *forsetti_embed_config_add_service(forsetti_embed_config *config,
                                                        const char *service_id,
                                                        const char *capability,
                                                        forsetti_role_handler handler,
                                                        void *context);

/* ---- the host -------------------------------------------------------------------------- */

typedef struct forsetti_embed_host forsetti_embed_host;

/* A module changed state: its ID (NULL for a file that is no valid manifest), the state's name
 * ("gated", "started", "stopped", "blocked", "failed", "inactive" …) and, for blocked, failed
 * and inactive, the reason code (else NULL). */
typedef void (*forsetti_embed_observer)(void *context, const char *module_id, const char *state,
                                        const char *reason);

/* How forsetti_embed_host_run ended. */
#define FORSETTI_EMBED_ENDED_DEADLINE 1                /* the seconds passed */
#define FORSETTI_EMBED_ENDED_STOP_REQUESTED 2          /* forsetti_embed_host_request_stop */
#define FORSETTI_EMBED_ENDED_SIGNAL 3                  /* SIGINT or SIGTERM */
#define FORSETTI_EMBED_ENDED_STATE_DIRECTORY_REPLACED 4 /* the state directory was moved away */

/* forsetti_embed_host_run without a deadline. */
#define FORSETTI_EMBED_NO_DEADLINE (-1.0)

/* Makes a host from `config` (borrowed: it may be deleted afterwards) into `*host_out`, which
 * the caller owns. Nothing is judged or loaded yet. The calling thread becomes the host's: every
 * function below marked "Host's thread" refuses any other with FORSETTI_EMBED_ERROR_WRONG_STATE
 * (forsetti_embed_host_delete, which cannot refuse, writes a line to standard error and leaves
 * the host alone). */
forsetti_embed_error *forsetti_embed_host_new(const forsetti_embed_config *config,
                                              forsetti_embed_host **host_out);
/* Calls `observer` after each module's change of state, on the host's thread (inside start,
 * run, process or stop); NULL removes it. Before start, to hear every change. Host's thread. */
forsetti_embed_error *forsetti_embed_host_observe(forsetti_embed_host *host,
                                                  forsetti_embed_observer observer, void *context);
/* Judges every module and starts those that may run. Once. Host's thread. */
forsetti_embed_error *forsetti_embed_host_start(forsetti_embed_host *host);
/* Runs the host: follows changes (approvals, licences, crashes and restarts) for `seconds`
 * (FORSETTI_EMBED_NO_DEADLINE: until stopped; any other negative value is refused as
 * FORSETTI_EMBED_ERROR_INVALID_VALUE), until forsetti_embed_host_request_stop, or, with
 * `handle_signals`, until SIGINT or SIGTERM. Writes how it ended to `*ending` (may be NULL).
 * Modules keep running afterwards until forsetti_embed_host_stop. Host's thread. */
forsetti_embed_error *forsetti_embed_host_run(forsetti_embed_host *host, double seconds,
                                              bool handle_signals, int32_t *ending);
/* The application's own loop: milliseconds until forsetti_embed_host_process is next due
 * (0: now; -1: only when woken — a worker exits, a file changes; call it then, or every
 * second). Host's thread. */
forsetti_embed_error *forsetti_embed_host_next_due(const forsetti_embed_host *host,
                                                   int64_t *milliseconds);
/* A descriptor for the application's own event loop (poll, epoll, GLib, libuv): it becomes
 * readable when forsetti_embed_host_process has work (a worker exited, a file changed, a
 * control request waits, a stop was requested). Poll it for POLLIN with the timeout
 * forsetti_embed_host_next_due gives, and call forsetti_embed_host_process when either comes;
 * process empties it. The host owns it: never read, write or close it. Any thread. */
forsetti_embed_error *forsetti_embed_host_fd(const forsetti_embed_host *host, int *fd);
/* Handles what happened since the last call (exits, restarts, changed files). Host's thread. */
forsetti_embed_error *forsetti_embed_host_process(forsetti_embed_host *host);
/* Makes a running forsetti_embed_host_run return soon. Any thread, but not a signal handler
 * (it takes a lock); the host must not be deleted meanwhile. */
forsetti_embed_error *forsetti_embed_host_request_stop(forsetti_embed_host *host);
/* Calls the module holding the default role `role` ("shared_database", "authentication",
 * "diagnostics", "api", "security") with `method` and `request_length` bytes of `request` (NULL
 * when 0; at most FORSETTI_ROLE_MAX_PAYLOAD). On success `*status` is the module's answer or
 * FORSETTI_ERR_UNAVAILABLE / FORSETTI_ERR_TIMEOUT as for a module's call, and `*response`
 * (`*response_length` bytes, NUL-terminated beyond them) is the caller's, to free with
 * forsetti_embed_bytes_delete. Blocks up to FORSETTI_ROLE_CALL_TIMEOUT_MS. After start, on the
 * host's thread. */
forsetti_embed_error *forsetti_embed_host_call(forsetti_embed_host *host, const char *role,
                                               const char *method, const void *request,
                                               size_t request_length, int32_t *status,
                                               uint8_t **response, size_t *response_length);
/* Frees a response of forsetti_embed_host_call; NULL is ignored. Any thread. */
void forsetti_embed_bytes_delete(uint8_t *bytes);
/* Stops every module, in reverse order of start; no module starts after it. Host's thread (from
 * another, refused: call forsetti_embed_host_request_stop there, and stop on the host's
 * thread once run returned). */
forsetti_embed_error *forsetti_embed_host_stop(forsetti_embed_host *host);
/* Stops what still runs and frees the host; NULL is ignored. Host's thread. */
void forsetti_embed_host_delete(forsetti_embed_host *host);

#ifdef __cplusplus
}
#endif
#endif
