import CForsetti
import ForsettiBridge
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiRuntime

/// The embedding application's own services (forsetti/services/application.h) and its calls
/// into a module's role (`HostServices.callRole`), with real C modules, in-process and in
/// workers, through a real ModuleManager; and the AskTheApp example through a real
/// `forsetti-host run`, as root and as an unprivileged user.
@Suite(.onTestThreads) struct ApplicationServiceTests {
  static let weather = "com.test.weather.v1"
  static let asker = "com.test.asker"
  static let stranger = "com.test.stranger"

  /// The application's weather service: `today` answers `caller|method|request`, `big` 5000
  /// bytes, `status` the status 42 with no bytes.
  static func weatherService() throws -> ApplicationServices {
    let services = ApplicationServices()
    try services.register(
      ApplicationService(id: weather, capability: .api) { call in
        switch call.method {
        case "big":
          return ApplicationServiceReply(status: FORSETTI_OK, response: Array(repeating: 0x78, count: 5000))
        case "status": return ApplicationServiceReply(status: 42)
        default:
          let text = "\(call.moduleID)|\(call.method)|\(String(decoding: call.request, as: UTF8.self))"
          return ApplicationServiceReply(status: FORSETTI_OK, response: Array(text.utf8))
        }
      })
    return services
  }

  /// A module that resolves the weather service and logs what each call returns. It forges
  /// host->module_id first: the application is told the ID the host bound.
  static func asker(id: String = asker, entry: String = "asker_entry") -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.start = """
      ((forsetti_host *)host)->module_id = "com.test.somebody";
      const forsetti_application_service *w = host->resolve("\(weather)");
      if (!w) { fixture_log("weather: NULL"); return FORSETTI_OK; }
      char out[256]; size_t n = 0; char line[400];
      forsetti_status s = w->call("today", "Oslo", 4, out, sizeof out, &n);
      snprintf(line, sizeof line, "today -> %d %.*s", s, s == FORSETTI_OK ? (int)n : 0, out);
      fixture_log(line);
      n = 0;
      s = w->call("big", "", 0, out, sizeof out, &n);
      snprintf(line, sizeof line, "big -> %d needs %zu", s, n);
      fixture_log(line);
      snprintf(line, sizeof line, "status -> %d", w->call("status", "", 0, out, sizeof out, &n));
      fixture_log(line);
      snprintf(line, sizeof line, "empty method -> %d", w->call("", "", 0, out, sizeof out, &n));
      fixture_log(line);
      return FORSETTI_OK;
      """
    return f
  }

  @Test(arguments: Placement.allCases)
  func aModuleCallsTheApplicationsServiceAndTheApplicationSeesTheModuleTheHostBound(_ mode: Placement)
    throws
  {
    let h = RuntimeHarness()
    try Self.asker().install(in: h.dir, capabilities: ["api"])
    try Self.asker(id: Self.stranger, entry: "stranger_entry").install(in: h.dir)
    let m = try h.start(mode: mode.execution, applicationServices: try Self.weatherService())
    defer { m.stopAll() }
    #expect(m.records.allSatisfy { $0.state == .started }, "\(m.records.map { ($0.moduleID, $0.state) })")
    let asked = h.waitForLine(Self.asker) { $0.hasPrefix("empty method") }
    #expect(asked != nil, "\(h.lines(Self.asker))")
    #expect(
      h.lines(Self.asker) == [
        "today -> 0 com.test.asker|today|Oslo",
        "big -> \(FORSETTI_ERR_BUFFER_TOO_SMALL) needs 5000",
        "status -> 42",
        "empty method -> \(FORSETTI_ERR_INVALID_ARGUMENT)",
      ])
    // Without capability api: NULL, and a warning naming the service and the capability.
    #expect(h.waitForLine(Self.stranger) { $0 == "weather: NULL" } != nil, "\(h.lines(Self.stranger))")
    #expect(
      h.lines(Self.stranger).contains(
        "denied service resolution: \(Self.weather) needs capability api, which was not granted"),
      "\(h.lines(Self.stranger))")
  }

  @Test func anUnknownApplicationServiceResolvesToNullWithAWarning() throws {
    let h = RuntimeHarness()
    try Self.asker().install(in: h.dir, capabilities: ["api"])
    let m = try h.start()
    defer { m.stopAll() }
    #expect(h.lines(Self.asker).contains("weather: NULL"), "\(h.lines(Self.asker))")
    #expect(
      h.lines(Self.asker).contains(
        "denied service resolution: unknown service \"\(Self.weather)\": the application offers no such service"
      ))
  }

  /// The capability is judged on every call, not only at resolve: a call the host answers for
  /// a caller without it is refused, one with it (the positive control) answered.
  @Test func everyCallChecksTheCapabilityAgain() throws {
    let services = HostServices(
      stateDirectory: TemporaryDirectory("appsvc").path, exportDirectory: nil, log: MemoryLogSink(),
      applications: try Self.weatherService())
    let request = ServiceRequest(
      .applicationCall, capacity: 256, [Array(Self.weather.utf8), Array("today".utf8), Array("Oslo".utf8)])
    let denied = services.answer(request, from: ModuleCaller(moduleID: Self.stranger, granted: []))
    #expect(denied.status == FORSETTI_ERR_DENIED)
    let answered = services.answer(request, from: ModuleCaller(moduleID: Self.asker, granted: [.api]))
    #expect(answered == ServiceReply(FORSETTI_OK, Array("com.test.asker|today|Oslo".utf8)))
    let big = ServiceRequest(
      .applicationCall, capacity: 256,
      [Array(Self.weather.utf8), Array("today".utf8), Array(repeating: 0, count: RoleCall.maxPayload + 1)])
    #expect(
      services.answer(big, from: ModuleCaller(moduleID: Self.asker, granted: [.api])).status
        == FORSETTI_ERR_TOO_LARGE)
  }

  /// A worker's `service` frame is untrusted: forged application calls arrive through the same
  /// reader (`ServiceRequest(WireView)`) and are refused by what they carry, never answered by
  /// the handler with bad arguments; a well-formed one (the positive control) is answered.
  @Test func forgedApplicationCallsFromAWorkerAreRefusedAtTheBoundary() throws {
    let services = HostServices(
      stateDirectory: TemporaryDirectory("appsvc").path, exportDirectory: nil, log: MemoryLogSink(),
      applications: try Self.weatherService())
    let caller = ModuleCaller(moduleID: Self.asker, granted: [.api])
    let id = Array(Self.weather.utf8)
    func answer(_ arguments: [[UInt8]], op: ServiceOperation = .applicationCall) -> Int32 {
      var out = [UInt8](repeating: 0, count: 1024)
      let n = out.withUnsafeMutableBytes { buf -> Int? in
        var w = WireWriter(into: buf, kind: .service, id: 1)
        w.int(op.rawValue)
        w.int(256)
        w.int(0)
        for a in arguments { a.withUnsafeBytes { w.bytes($0) } }
        return w.length
      }
      return Array(out.prefix(n ?? 0)).withUnsafeBytes { raw -> Int32 in
        guard let view = try? WireView(raw), let r = ServiceRequest(view) else { return Int32.min }
        return services.answer(r, from: caller).status
      }
    }
    #expect(answer([id, Array("today".utf8), Array("Oslo".utf8)]) == FORSETTI_OK)
    #expect(answer([id, Array("today".utf8), Array("Oslo".utf8)], op: .applicationResolve) == FORSETTI_OK)
    #expect(answer([]) == FORSETTI_ERR_NOT_FOUND)
    #expect(answer([[0xFF, 0xFE], Array("today".utf8), []]) == FORSETTI_ERR_NOT_FOUND)
    #expect(answer([id + [0], Array("today".utf8), []]) == FORSETTI_ERR_NOT_FOUND)
    #expect(answer([id]) == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(answer([id, [0x74, 0x6F, 0, 0x64], []]) == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(
      answer([id, Array(repeating: 0x61, count: HostFunctions.maxName + 1), []])
        == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(answer([id, [0xC3], []]) == FORSETTI_ERR_INVALID_ARGUMENT)
  }

  @Test(arguments: [
    ("com.example.weather", "major version"),
    ("example.v1", "at least three"),
    ("Com.example.weather.v1", "a-z or 0-9"),
    ("com.ex_ample.weather.v1", "other than a-z, 0-9 or '-'"),
    ("forsetti.example.weather.v1", "forsetti. prefix"),
    ("com..weather.v1", "empty label"),
    ("com.example.weather.v", "major version"),
    ("com.example.weather.vx", "major version"),
    ("", "empty"),
    ("com." + String(repeating: "a", count: 130) + ".v1", "more than 128"),
  ])
  func aBadIDIsRefusedAtRegisterSayingWhy(_ id: String, _ why: String) {
    #expect {
      _ = try ApplicationService(id: id, capability: .api) { _ in ApplicationServiceReply(status: FORSETTI_OK)
      }
    } throws: { error in
      guard case .invalidID(let bad, let reason) = error as? ApplicationServiceError else { return false }
      return bad == id && reason.contains(why)
    }
  }

  @Test func aGoodIDIsRegisteredOnceAndADuplicateRefused() throws {
    let services = ApplicationServices()
    let s = try ApplicationService(id: "com.example.weather-station.v12", capability: .api) { _ in
      ApplicationServiceReply(status: FORSETTI_OK)
    }
    try services.register(s)
    #expect(throws: ApplicationServiceError.duplicateID("com.example.weather-station.v12")) {
      try services.register(s)
    }
  }

  /// A module holding the `api` role, answering `caller|method|request`.
  static var apiProvider: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.api", entryPoint: "api_entry")
    f.prelude = """
      static forsetti_status handle(void *ctx, const char *caller, const char *method, const void *req,
                                    size_t len, void *resp, size_t cap, size_t *rlen) {
        (void)ctx;
        int n = snprintf(resp, cap, "%s|%s|%.*s", caller, method, (int)len, (const char *)req);
        if (n < 0) return FORSETTI_ERR_IO;
        *rlen = (size_t)n;
        if ((size_t)n >= cap) return FORSETTI_ERR_BUFFER_TOO_SMALL;
        return strcmp(method, "status") == 0 ? 7 : FORSETTI_OK;
      }
      """
    f.start = """
      const forsetti_role_service *r = host->resolve(FORSETTI_SERVICE_ROLE_API);
      if (!r || r->serve(handle, NULL) != FORSETTI_OK) return FORSETTI_ERR_START_FAILED;
      fixture_log("serving");
      return FORSETTI_OK;
      """
    return f
  }

  @Test(arguments: Placement.allCases)
  func theApplicationCallsAModulesRoleAndGetsItsAnswer(_ mode: Placement) throws {
    let h = RuntimeHarness()
    try Self.apiProvider.install(
      in: h.dir, capabilities: ["api"], manifestExtra: #","defaultModuleRole":"api""#)
    let m = try h.start(mode: mode.execution)
    defer { m.stopAll() }
    #expect(h.waitForLine("com.test.api") { $0 == "serving" } != nil, "\(h.lines("com.test.api"))")
    let services = m.environment.services
    let reply = services.callRole(.api, method: "weather", request: Array("Oslo".utf8), from: "tests")
    #expect(
      reply == ModuleCallReply(status: FORSETTI_OK, response: Array("application:tests|weather|Oslo".utf8)))
    #expect(services.callRole(.api, method: "status", request: [], from: "tests").status == 7)
    // Nobody holds `security`; the `ui` role is no module's to serve; a bad name or method.
    #expect(
      services.callRole(.security, method: "x", request: [], from: "tests").status == FORSETTI_ERR_UNAVAILABLE
    )
    #expect(
      services.callRole(.ui, method: "x", request: [], from: "tests").status == FORSETTI_ERR_UNAVAILABLE)
    #expect(
      services.callRole(.api, method: "x", request: [], from: "").status == FORSETTI_ERR_INVALID_ARGUMENT)
    #expect(
      services.callRole(.api, method: "", request: [], from: "tests").status == FORSETTI_ERR_INVALID_ARGUMENT)
    // Stopped, the provider serves no more: UNAVAILABLE, as for a module's call.
    m.stopAll()
    #expect(
      services.callRole(.api, method: "weather", request: [], from: "tests").status
        == FORSETTI_ERR_UNAVAILABLE)
  }

  /// The AskTheApp example under a real `forsetti-host run`, which offers no application
  /// services: the module is told NULL, says so and runs on; as root and unprivileged.
  @Test(arguments: HostileHost.Identity.allCases)
  func askTheAppRunsOnWhenNoApplicationOffersItsService(as identity: HostileHost.Identity) throws {
    let host = HostileHost(identity)
    try #require(host.isAvailable, "running as another user needs root")
    let plugins = host.dir.url("plugins")
    try FileManager.default.createDirectory(atPath: plugins, withIntermediateDirectories: true)
    let cc = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "cc", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-I", ModuleFixture.includeDirectory, "-o",
        plugins + "/libasktheapp.so", ExampleModules.root("Plugins/AskTheApp/ask.c"),
      ])
    #expect(cc.status == 0, "\(cc.stderr)")
    try host.dir.write(
      "manifests/ask-the-app.json",
      String(contentsOfFile: ExampleModules.root("manifests/ask-the-app.json"), encoding: .utf8))
    let run = try host.run(for: 60, stopWhen: { $0.contains("running on without it") })
    let lines = run.lines("com.example.asktheapp")
    #expect(
      lines.contains("no application offers com.example.weather.v1; running on without it"), "\(run.output)")
    #expect(
      lines.contains {
        $0.contains("unknown service \"com.example.weather.v1\": the application offers no such service")
      }, "\(run.output)")
    #expect(run.output.contains("1 ran and stopped cleanly"), "\(run.output)")
  }
}
