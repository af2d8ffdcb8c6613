import ForsettiHost
import Glibc

// Runs the example modules inside this application: its own entitlement source, its own service
// for modules, a call into the module serving `shared_database`, until --for SECONDS or a signal.
//
//   embed-example [--manifests DIR] [--plugins DIR] [--state DIR] [--worker PATH | --in-process]
//                 [--for SECONDS]

/// The application's own record of purchases; the host asks it about each paid module.
struct Purchases: EntitlementProvider {
  var unlocked: Set<String>
  var name: String { "embed-example purchases" }

  func isUnlocked(productID: String, moduleID: String) -> Bool {
    let yes = unlocked.contains(productID)
    say("entitlement: \(moduleID) asks for \(productID): \(yes ? "unlocked" : "locked")")
    return yes
  }
}

/// `com.example.weather.v1`, behind the `api` capability: `today` with a city gives its weather.
func weather(_ call: ApplicationServiceCall) -> ApplicationServiceReply {
  guard call.method == "today", !call.request.isEmpty else {
    return ApplicationServiceReply(status: FORSETTI_ERR_INVALID_ARGUMENT, response: [])
  }
  let city = String(decoding: call.request, as: UTF8.self)
  say("weather: \(call.moduleID) asks about \(city)")
  return ApplicationServiceReply(status: FORSETTI_OK, response: Array("sunny in \(city)".utf8))
}

/// One line to standard output, unbuffered: it shows as it happens, in a pipe too.
func say(_ line: String) {
  _ = (line + "\n").withCString { write(1, $0, strlen($0)) }
}

/// The value of `--name` on the command line, if given.
func option(_ name: String) -> String? {
  let args = CommandLine.arguments
  guard let i = args.firstIndex(of: "--" + name), i + 1 < args.count else { return nil }
  return args[i + 1]
}

func main() -> Int32 {
  var configuration = ForsettiHost.Configuration(
    manifestsDirectory: option("manifests") ?? "manifests",
    pluginDirectories: [option("plugins") ?? ".build/plugins"],
    stateDirectory: option("state") ?? ".forsetti-embed")
  // An example: the capabilities the modules request count as approved.
  configuration.judging.approveAll = true
  configuration.judging.entitlementSource = Purchases(unlocked: ["com.example.weather-plus"])
  // Workers are found beside this executable or where the host is installed; --worker names
  // one, --in-process loads modules into this process instead (no confinement).
  if CommandLine.arguments.contains("--in-process") {
    configuration.isolation = nil
  } else if let worker = option("worker") {
    configuration.isolation?.workerExecutable = worker
  }
  configuration.logSinks = [StreamLogSink(fd: 2)]
  configuration.applicationID = "com.example.embed-example"
  do {
    let host = try ForsettiHost(configuration)
    try host.register(ApplicationService(id: "com.example.weather.v1", capability: .api, handler: weather))
    host.observe { change in
      if case .module(let r) = change { say("module \(r.moduleID ?? r.file): \(r.state)") }
    }
    try host.start()

    // The module holding the `shared_database` role keeps rows per caller: this application's.
    let key = Array("greeting".utf8)
    let put = host.call(
      role: .sharedDatabase, method: "put", request: key + [0] + Array("hello from Swift".utf8))
    let get = host.call(role: .sharedDatabase, method: "get", request: key)
    say(
      "shared_database: put \(put.status), get \(get.status): \(String(decoding: get.response, as: UTF8.self))"
    )

    let ending = host.run(until: option("for").flatMap(Double.init).map { .now + .seconds($0) })
    host.stop()
    say("stopped: \(ending)")
    return 0
  } catch {
    say("embed-example: \(error)")
    return 1
  }
}

exit(main())
