// What an embedder needs besides the facade itself, so that `import ForsettiHost` is enough: the
// core's manifests, roles and capabilities, the statuses of forsetti.h (`FORSETTI_OK`,
// `FORSETTI_ERR_*`) that replies carry, and the runtime's value types the facade's members name.
// The runtime's machinery is `package`: no application sees it (ForsettiHostTests' probe).
@_exported import CForsetti
@_exported import ForsettiCore

@_exported import struct ForsettiRuntime.ApplicationService
@_exported import struct ForsettiRuntime.ApplicationServiceCall
@_exported import enum ForsettiRuntime.ApplicationServiceError
@_exported import struct ForsettiRuntime.ApplicationServiceReply
@_exported import struct ForsettiRuntime.CPUShares
@_exported import enum ForsettiRuntime.CPUSharesError
@_exported import struct ForsettiRuntime.DevelopmentSettings
@_exported import enum ForsettiRuntime.HostChange
@_exported import struct ForsettiRuntime.HostConfiguration
@_exported import struct ForsettiRuntime.IsolationSettings
@_exported import enum ForsettiRuntime.JudgeError
@_exported import struct ForsettiRuntime.LogLimits
@_exported import struct ForsettiRuntime.LogRecord
@_exported import protocol ForsettiRuntime.LogSink
@_exported import class ForsettiRuntime.MemoryLogSink
@_exported import struct ForsettiRuntime.ModuleCallReply
@_exported import struct ForsettiRuntime.ModuleRecord
@_exported import enum ForsettiRuntime.ModuleState
@_exported import struct ForsettiRuntime.ReloadReport
@_exported import struct ForsettiRuntime.ServiceQuotas
@_exported import class ForsettiRuntime.StreamLogSink
@_exported import struct ForsettiRuntime.Surface
@_exported import struct ForsettiRuntime.WorkerEnvironment
