// What an embedder needs besides the facade itself, so that `import ForsettiHost` is enough:
// the runtime's configuration and records, the core's manifests, roles and capabilities, and the
// statuses of forsetti.h (`FORSETTI_OK`, `FORSETTI_ERR_*`) that replies carry.
@_exported import CForsetti
@_exported import ForsettiCore
@_exported import ForsettiRuntime
