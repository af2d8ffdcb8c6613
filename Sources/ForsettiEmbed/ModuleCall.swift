import CForsetti
import ForsettiCore
import Glibc

/// Calls a module's default role; the response is malloc'd for the caller.
@_cdecl("forsetti_embed_host_call")
public func forsettiEmbedHostCall(
  _ host: OpaquePointer?, _ role: UnsafePointer<CChar>?, _ method: UnsafePointer<CChar>?,
  _ request: UnsafeRawPointer?, _ requestLength: Int, _ status: UnsafeMutablePointer<Int32>?,
  _ response: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?,
  _ responseLength: UnsafeMutablePointer<Int>?
) -> OpaquePointer? {
  EmbedHost.use(host, "forsetti_embed_host_call") { h throws(EmbedFailure) in
    let name = try CText.read(role, "role")
    // A role is served, and so callable, when it has a capability of its own (roles.h).
    guard let found = DefaultModuleRole(rawValue: name), found.requiredCapability != nil else {
      let callable = DefaultModuleRole.allCases.filter { $0.requiredCapability != nil }.map(\.rawValue)
      throw .invalidValue(
        "role", value: name, why: "no role a module serves (one of: \(callable.joined(separator: ", ")))")
    }
    let methodName = try CText.nonEmpty(method, "method")
    guard let status else { throw .nullArgument("status") }
    guard let response else { throw .nullArgument("response") }
    guard let responseLength else { throw .nullArgument("response_length") }
    guard requestLength >= 0, requestLength <= Int(FORSETTI_ROLE_MAX_PAYLOAD) else {
      throw .invalidValue(
        "request_length", value: "\(requestLength)",
        why: "at most FORSETTI_ROLE_MAX_PAYLOAD (\(FORSETTI_ROLE_MAX_PAYLOAD))")
    }
    if requestLength > 0 && request == nil { throw .nullArgument("request") }
    try h.requireRunning("forsetti_embed_host_call")
    let bytes = request.map { Array(UnsafeRawBufferPointer(start: $0, count: requestLength)) } ?? []
    let reply = h.host.call(role: found, method: methodName, request: bytes)
    // One byte more than the answer, a NUL, so a text answer prints as it is.
    guard
      let out = malloc(reply.response.count + 1)?.bindMemory(
        to: UInt8.self, capacity: reply.response.count + 1)
    else { throw .host("out of memory for a response of \(reply.response.count) bytes") }
    reply.response.withUnsafeBufferPointer { answer in
      if let base = answer.baseAddress { out.update(from: base, count: answer.count) }
    }
    out[reply.response.count] = 0
    status.pointee = reply.status
    response.pointee = out
    responseLength.pointee = reply.response.count
  }
}

/// Frees a response of `forsetti_embed_host_call`; NULL is ignored.
@_cdecl("forsetti_embed_bytes_delete")
public func forsettiEmbedBytesDelete(_ bytes: UnsafeMutablePointer<UInt8>?) { free(bytes) }
